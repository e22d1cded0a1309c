//  The command-line conventions every ps-cluster program follows, on
//  glibc's argp, so that the three programs behave like the GNU tools their
//  users know: -h/--help, --usage and -V/--version; long options as
//  --opt=value or --opt value, abbreviated when unambiguous, in any order;
//  -q/--quiet and -v/--verbose everywhere. A usage error (an unknown option,
//  a bad value, a missing argument) prints one line that starts with the
//  program's name and a hint to --help, and exits 2, as the other errors of
//  the command line do.
//
//  A program calls ps_cli_init first, then parses each command (the
//  program's, or a subcommand's) with ps_cli_parse over its own struct argp
//  that names ps_cli_common as a child.

#ifndef PS_CLI_H_INCLUDED
#define PS_CLI_H_INCLUDED

#include <argp.h>

//  The exit status of a usage error.
#define PS_CLI_USAGE  2

//  Set the program's name for log lines and messages, the version string
//  --version prints ("PROGRAM (ps-cluster) VERSION") and the exit status
//  of a usage error.
void ps_cli_init (const char *program);

//  The options every command has: -h (--help), -q/--quiet (only warnings
//  and errors on stderr) and -v/--verbose (debug lines too); and the usage
//  error "unexpected argument 'ARG'" for an argument that the command's
//  own parser does not take. Name it as a child:
//  { &ps_cli_common, 0, NULL, 0 }.
extern const struct argp ps_cli_common;

//  The children of a command with no options of its own beyond these:
//  ps_cli_common alone.
extern const struct argp_child ps_cli_children [];

//  Parse argc/argv with argp into input. argv [0] names the command in
//  messages ("coordinator export" for a subcommand). Returns only on
//  success; a usage error exits PS_CLI_USAGE after saying what is wrong,
//  and --help, --usage and --version exit 0.
void ps_cli_parse (const struct argp *argp, int argc, char **argv, void *input);

//  Print "PROGRAM: message" on stderr: the form of an error that stops a
//  program before its work starts (a bad spec, a missing file, options
//  that do not go together), as GNU tools print theirs. Events of a run,
//  its final failure included, are log lines (ps_log.h).
void ps_cli_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

//  Whether --quiet was given: programs then print on stdout only what was
//  asked for (results), not progress.
int ps_cli_quiet (void);

#endif
