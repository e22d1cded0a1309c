//  The coordinator's job flags: the command-line options that override keys
//  of the job (--model, --epochs, --batch, ... --staleness; schemas/job.md).
//  They are an argp child (ps_jobflags_argp) whose input is a
//  ps_jobflags_t: while the command line is parsed each flag's value is
//  checked for its form (a bad one is a usage error naming the flag) and
//  recorded in the order given; ps_jobflags_apply then applies them on top
//  of the job's defaults and its file, before the job is validated. A flag
//  checks only the form of its value and that it fits its field, and
//  ps_job_validate names the key of a value out of its range.
//
//  Order does not matter between the flags of the optimizer: --optimizer
//  KIND starts from that kind's defaults, and a rate given by --lr wins
//  over them whether it comes before or after.

#ifndef PS_JOBFLAGS_H_INCLUDED
#define PS_JOBFLAGS_H_INCLUDED

#include <argp.h>

#include "ps_error.h"
#include "ps_job.h"

typedef struct _ps_jobflags_t ps_jobflags_t;

//  The job flags, with their docs under the heading "Job (schemas/job.md):".
//  Name it as a child of a program's argp and hand it a ps_jobflags_t as
//  its input (state->child_inputs at ARGP_KEY_INIT). Their keys are short
//  options (-m, -e, -b, -d, -C, -T) or PS_JOBFLAGS_FIRST and above, clear
//  of a program's own.
#define PS_JOBFLAGS_FIRST  1024
extern const struct argp ps_jobflags_argp;

//  Create an empty set of flags.
ps_jobflags_t *ps_jobflags_new (void);

//  Destroy the flags and set the caller's pointer to NULL.
void ps_jobflags_destroy (ps_jobflags_t **self_p);

//  Record the flag called name (without its dashes) with its value (NULL
//  for a flag without one), after checking the value's form. Returns 0, or
//  a negative error code with *err naming the flag and what was expected
//  (PS_ENOTFOUND when there is no such flag).
int ps_jobflags_add (ps_jobflags_t *self, const char *name, const char *value,
                     ps_error_t *err);

//  How many flags were recorded.
int ps_jobflags_count (const ps_jobflags_t *self);

//  Apply the recorded flags to job, in the order given, then the rate
//  again so that it wins over an --optimizer after it. Returns 0, or a
//  negative error code with *err naming the flag.
int ps_jobflags_apply (const ps_jobflags_t *self, ps_job_t *job, ps_error_t *err);

#endif
