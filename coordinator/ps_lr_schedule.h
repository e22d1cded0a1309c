//  The learning-rate schedule: how the rate changes over a run, by global
//  step, as the job's "lr_schedule" says (schemas/job.md). The coordinator
//  sends each new rate to the ps-servers as the global step advances.
//
//  The learning-rate schedules are Keras's, by global step s (1-based, the
//  step id) with E steps per epoch and T steps in the run:
//    constant    lr
//    piecewise   PiecewiseConstantDecay with boundaries in epochs:
//                values[i] for the first i with s - 1 < boundaries[i] * E,
//                values[n] past the last boundary (n + 1 values)
//    cosine      CosineDecay with floor alpha over D = decay_steps (0: T):
//                lr * ((1 - alpha) * 0.5 * (1 + cos (pi * p)) + alpha),
//                p = min (s - 1 - W, D') / D', D' = max (1, D - W)
//  where W = warmup_steps (0: none): for s <= W every kind gives its
//  first rate (lr, or values[0]) times s / W, a linear warm-up.

#ifndef PS_LR_SCHEDULE_H_INCLUDED
#define PS_LR_SCHEDULE_H_INCLUDED

#include <stdint.h>

#include "ps_error.h"

#define PS_JOB_MAX_BOUNDARIES 16

typedef enum { PS_LR_CONSTANT, PS_LR_PIECEWISE, PS_LR_COSINE } ps_lr_kind_t;

typedef struct {
    ps_lr_kind_t kind;
    int nboundaries;                            //  piecewise
    double boundaries [PS_JOB_MAX_BOUNDARIES];  //  epochs, increasing, > 0
    double values [PS_JOB_MAX_BOUNDARIES + 1];  //  learning rates, > 0
    double alpha;                               //  cosine floor, [0, 1]
    uint64_t decay_steps;                       //  cosine; 0 = the whole run
    uint64_t warmup_steps;                      //  any kind; 0 = none
} ps_lr_schedule_t;

//  Parse "constant", "piecewise" or "cosine", and name a kind ("unknown"
//  for a value out of range).
int ps_lr_kind_parse (const char *name, ps_lr_kind_t *kind, ps_error_t *err);
const char *ps_lr_kind_name (ps_lr_kind_t kind);

//  The learning rate for step (1-based) of a run of total_steps steps of
//  steps_per_epoch each, base_lr being the optimizer's lr (constant and
//  cosine scale it; piecewise uses its own values).
double ps_lr_at (const ps_lr_schedule_t *schedule, double base_lr, uint64_t step,
                 uint64_t steps_per_epoch, uint64_t total_steps);

#endif
