//  Logging for the ps-cluster programs: one line per event on stderr, with
//  a UTC timestamp in ISO 8601 with the date and milliseconds
//  (2026-11-26T14:20:00.123Z), the program's name and a level, so that the
//  logs of the processes of a cluster, and of runs that cross midnight,
//  can be merged and sorted as text.

#ifndef PS_LOG_H_INCLUDED
#define PS_LOG_H_INCLUDED

typedef enum { PS_LOG_DEBUG, PS_LOG_INFO, PS_LOG_WARN, PS_LOG_ERROR } ps_log_level_t;

//  Set the name printed on every line (default "ps") and the lowest level
//  printed (default INFO).
void ps_log_init (const char *name, ps_log_level_t level);

//  The lowest level printed: a program that renames its lines later
//  (ps-worker, once it knows its task) keeps what --quiet or --verbose set.
ps_log_level_t ps_log_level (void);

void ps_log (ps_log_level_t level, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

#define ps_debug(...)  ps_log (PS_LOG_DEBUG, __VA_ARGS__)
#define ps_info(...)   ps_log (PS_LOG_INFO, __VA_ARGS__)
#define ps_warn(...)   ps_log (PS_LOG_WARN, __VA_ARGS__)
#define ps_error(...)  ps_log (PS_LOG_ERROR, __VA_ARGS__)

#endif
