//  The command-line conventions; see ps_cli.h.

#include "ps_cli.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_log.h"

static char s_version [96];
static char s_program [32] = "ps";
static int s_quiet;

//  argp wraps what it prints at column 79, the hint after a usage error
//  too, and a subcommand's hint ("Try `ps-worker predict --help' or
//  `ps-worker predict --usage' for more information.") is longer than
//  that: a usage error must stay two lines, the message and the hint, for
//  the scripts that read it. argp reads its layout from ARGP_HELP_FMT
//  once, when it first prints, so during the parse the variable asks for
//  a margin no hint reaches, and --help and --usage put the user's own
//  setting back before they print. Whatever a program runs later inherits
//  the user's environment.
static char *s_help_fmt;        //  the user's ARGP_HELP_FMT, or NULL
static bool s_help_fmt_wide;    //  ARGP_HELP_FMT is ours now

static void
s_help_fmt_restore (void)
{
    if (!s_help_fmt_wide)
        return;
    //  Should this fail (no memory), the help is printed wide; nothing
    //  else depends on it.
    if ((s_help_fmt ? setenv ("ARGP_HELP_FMT", s_help_fmt, 1)
                    : unsetenv ("ARGP_HELP_FMT")) == 0)
        s_help_fmt_wide = false;
}

#ifndef PS_VERSION
#   error "PS_VERSION must be defined by the build (meson.build)"
#endif

void
ps_cli_init (const char *program)
{
    snprintf (s_program, sizeof s_program, "%s", program);
    snprintf (s_version, sizeof s_version, "%s (ps-cluster) %s", program, PS_VERSION);
    argp_err_exit_status = PS_CLI_USAGE;
    ps_log_init (program, PS_LOG_INFO);
}

enum { O_HELP = 'h', O_QUIET = 'q', O_VERBOSE = 'v', O_VERSION = 'V', O_USAGE = 256 };

//  argp's own help option is -?, and ps_cli_parse turns it off (with its
//  --usage and --version): -h is what users type first, so all three are
//  defined here.
static const struct argp_option s_options [] = {
    { "help", O_HELP, NULL, 0, "Give this help list", -1 },
    { "usage", O_USAGE, NULL, 0, "Give a short usage message", -1 },
    { "version", O_VERSION, NULL, 0, "Print the program's version", -1 },
    { "quiet", O_QUIET, NULL, 0, "Print only warnings and errors, and no progress", -1 },
    { "verbose", O_VERBOSE, NULL, 0, "Print debug lines too", -1 },
    { 0 },
};

static error_t
s_parse (int key, char *arg, struct argp_state *state)
{
    switch (key) {
        case O_HELP:
            s_help_fmt_restore ();
            argp_state_help (state, stdout, ARGP_HELP_STD_HELP);
            return 0;           //  not reached: ARGP_HELP_STD_HELP exits 0
        case O_USAGE:
            s_help_fmt_restore ();
            argp_state_help (state, stdout, ARGP_HELP_USAGE | ARGP_HELP_EXIT_OK);
            return 0;
        case O_VERSION:
            printf ("%s\n", s_version);
            exit (0);
        //  A command that takes arguments reads them in its own parser,
        //  which argp asks first; one that does not leaves them here.
        case ARGP_KEY_ARG:
            argp_error (state, "unexpected argument '%s'", arg);
            return 0;
        case O_QUIET:
            s_quiet = 1;
            ps_log_init (s_program, PS_LOG_WARN);
            return 0;
        case O_VERBOSE:
            s_quiet = 0;
            ps_log_init (s_program, PS_LOG_DEBUG);
            return 0;
        default:
            return ARGP_ERR_UNKNOWN;
    }
}

const struct argp ps_cli_common = { s_options, s_parse, NULL, NULL, NULL, NULL, NULL };

const struct argp_child ps_cli_children [] = {
    { &ps_cli_common, 0, NULL, -1 },
    { 0 },
};

void
ps_cli_parse (const struct argp *argp, int argc, char **argv, void *input)
{
    //  getopt names the program in its own messages by argv [0], which may
    //  be a path: the copy names it as the user knows it.
    char *args [argc + 1];
    for (int i = 0; i < argc; i++)
        args [i] = argv [i];
    args [argc] = NULL;
    if (argc > 0 && strrchr (argv [0], '/'))
        args [0] = strrchr (argv [0], '/') + 1;
    const char *help_fmt = getenv ("ARGP_HELP_FMT");
    free (s_help_fmt);
    s_help_fmt = help_fmt ? strdup (help_fmt) : NULL;
    s_help_fmt_wide = (!help_fmt || s_help_fmt)
                   && setenv ("ARGP_HELP_FMT", "rmargin=1000", 1) == 0;
    //  argp exits by itself on a usage error (status argp_err_exit_status)
    //  and after --help or --version; a parser's own error code ends here.
    error_t rc = argp_parse (argp, argc, args, ARGP_NO_HELP, NULL, input);
    s_help_fmt_restore ();
    if (rc != 0)
        exit (PS_CLI_USAGE);
}

void
ps_cli_error (const char *fmt, ...)
{
    //  One write, so that lines of other processes on the same terminal
    //  never cut into it.
    char line [1024];
    int used = snprintf (line, sizeof line, "%s: ", s_program);
    va_list args;
    va_start (args, fmt);
    vsnprintf (line + used, sizeof line - (size_t) used, fmt, args);
    va_end (args);
    fprintf (stderr, "%s\n", line);
}

int
ps_cli_quiet (void)
{
    return s_quiet;
}
