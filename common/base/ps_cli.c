//  The command-line conventions; see ps_cli.h.

#include "ps_cli.h"

#include <stdio.h>
#include <stdlib.h>

#include "ps_log.h"

//  argp prints these two for --version and in usage errors. They are
//  argp's own globals, defined here once for every program.
const char *argp_program_version;
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
    argp_program_version = s_version;
    argp_err_exit_status = PS_CLI_USAGE;
    ps_log_init (program, PS_LOG_INFO);
}

enum { O_HELP = 'h', O_QUIET = 'q', O_VERBOSE = 'v' };

static const struct argp_option s_options [] = {
    { "quiet", O_QUIET, NULL, 0, "Print only warnings and errors, and no progress", -1 },
    { "verbose", O_VERBOSE, NULL, 0, "Print debug lines too", -1 },
    //  argp's own help option is -?; -h is what users type first.
    { NULL, O_HELP, NULL, 0, "Give this help list", -1 },
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
    //  argp exits by itself on a usage error (status argp_err_exit_status)
    //  and after --help or --version; a parser's own error code ends here.
    error_t rc = argp_parse (argp, argc, argv, 0, NULL, input);
    if (rc != 0)
        exit (PS_CLI_USAGE);
}

int
ps_cli_quiet (void)
{
    return s_quiet;
}
