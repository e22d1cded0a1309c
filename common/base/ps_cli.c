//  The command-line conventions; see ps_cli.h.

#include "ps_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_log.h"

static char s_version [96];
static char s_program [32] = "ps";
static int s_quiet;

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
    (void) arg;
    switch (key) {
        case O_HELP:
            argp_state_help (state, stdout, ARGP_HELP_STD_HELP);
            return 0;           //  not reached: ARGP_HELP_STD_HELP exits 0
        case O_USAGE:
            argp_state_help (state, stdout, ARGP_HELP_USAGE | ARGP_HELP_EXIT_OK);
            return 0;
        case O_VERSION:
            printf ("%s\n", s_version);
            exit (0);
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
    //  argp wraps its hint to --help at 79 columns, which would cut a
    //  subcommand's ("Try `coordinator export --help' or ...") in two:
    //  the margin is widened to fit it, unless the user chose one.
    const char *hint = "Try `' or `' for more information.--help --usage";
    size_t width = strlen (hint) + 2 * strlen (args [0]) + 8;
    if (width > 79) {
        char fmt [32];
        snprintf (fmt, sizeof fmt, "rmargin=%zu", width);
        if (setenv ("ARGP_HELP_FMT", fmt, 0) != 0)
            perror ("setenv");
    }
    //  argp exits by itself on a usage error (status argp_err_exit_status)
    //  and after --help or --version; a parser's own error code ends here.
    error_t rc = argp_parse (argp, argc, args, ARGP_NO_HELP, NULL, input);
    if (rc != 0)
        exit (PS_CLI_USAGE);
}

int
ps_cli_quiet (void)
{
    return s_quiet;
}
