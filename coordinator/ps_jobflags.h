//  The coordinator's job flags: the command-line options that override keys
//  of the job (--model, --epochs, --batch, ... --staleness; schemas/job.md).
//  The program reads its command line with getopt_long over its own
//  options and ps_jobflags_options, keeps each job flag (ps_jobflags_is)
//  in the order given, and applies them with ps_jobflags_apply on top of
//  the job's defaults and its file, before the job is validated: a flag
//  checks only the form of its value and that it fits its field, and
//  ps_job_validate names the key of a value out of its range.

#ifndef PS_JOBFLAGS_H_INCLUDED
#define PS_JOBFLAGS_H_INCLUDED

#include <getopt.h>
#include <stdbool.h>

#include "ps_job.h"

//  The job flags as getopt_long options, ending with an entry of zeros.
//  Their values are PS_JOBFLAGS_FIRST and above, clear of a program's own.
#define PS_JOBFLAGS_FIRST  1024
extern const struct option ps_jobflags_options [];

//  Whether getopt_long's result option is a job flag.
bool ps_jobflags_is (int option);

//  Apply job flag option with its value (NULL for a flag without one) to
//  job. Returns 0, or -1 after saying on stderr what is wrong, naming the
//  flag.
int ps_jobflags_apply (ps_job_t *job, int option, const char *value);

#endif
