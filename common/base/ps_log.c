//  Logging; see ps_log.h.

#include "ps_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static char s_name [32] = "ps";
static ps_log_level_t s_level = PS_LOG_INFO;

void
ps_log_init (const char *name, ps_log_level_t level)
{
    snprintf (s_name, sizeof s_name, "%s", name);
    s_level = level;
}

ps_log_level_t
ps_log_level (void)
{
    return s_level;
}

void
ps_log (ps_log_level_t level, const char *fmt, ...)
{
    if (level < s_level)
        return;
    static const char *names [] = { "debug", "info", "warn", "error" };
    struct timespec now;
    clock_gettime (CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r (&now.tv_sec, &tm);
    //  Format the whole line first so that lines of concurrent threads are
    //  written with one call and never interleave.
    char line [1024];
    int used = snprintf (line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s: ",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, now.tv_nsec / 1000000, s_name, names [level]);
    va_list args;
    va_start (args, fmt);
    vsnprintf (line + used, sizeof line - (size_t) used, fmt, args);
    va_end (args);
    fprintf (stderr, "%s\n", line);
}
