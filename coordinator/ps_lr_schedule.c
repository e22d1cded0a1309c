//  The learning-rate schedule; see ps_lr_schedule.h.

#include "ps_lr_schedule.h"

#include <assert.h>
#include <math.h>
#include <string.h>

static const char *const s_kind_names [] = { "constant", "piecewise", "cosine" };

const char *
ps_lr_kind_name (ps_lr_kind_t kind)
{
    return (unsigned) kind < 3 ? s_kind_names [kind] : "unknown";
}

int
ps_lr_kind_parse (const char *name, ps_lr_kind_t *kind, ps_error_t *err)
{
    for (int i = 0; i < 3; i++)
        if (strcmp (name, s_kind_names [i]) == 0) {
            *kind = (ps_lr_kind_t) i;
            return 0;
        }
    return ps_error_set (err, PS_EINVAL, "unknown learning-rate schedule \"%s\", expected "
                         "constant, piecewise or cosine", name);
}

double
ps_lr_at (const ps_lr_schedule_t *schedule, double base_lr, uint64_t step,
          uint64_t steps_per_epoch, uint64_t total_steps)
{
    assert (schedule);
    //  Step ids start at 1; a 0 is taken for the first step.
    uint64_t s = step > 0 ? step : 1;
    uint64_t w = schedule->warmup_steps;
    int n = schedule->nboundaries;
    n = n < 0 ? 0 : n > PS_JOB_MAX_BOUNDARIES ? PS_JOB_MAX_BOUNDARIES : n;
    if (w > 0 && s <= w) {
        double first = schedule->kind == PS_LR_PIECEWISE ? schedule->values [0] : base_lr;
        return first * (double) s / (double) w;
    }
    if (schedule->kind == PS_LR_PIECEWISE) {
        //  Boundaries are in epochs, so a fractional one falls between
        //  epochs; Keras compares the 0-based step, s - 1.
        double position = (double) (s - 1);
        for (int i = 0; i < n; i++)
            if (position < schedule->boundaries [i] * (double) steps_per_epoch)
                return schedule->values [i];
        return schedule->values [n];
    }
    if (schedule->kind == PS_LR_COSINE) {
        uint64_t d = schedule->decay_steps > 0 ? schedule->decay_steps : total_steps;
        //  The decay spans the steps after the warm-up, at least one so
        //  that a run no longer than its warm-up does not divide by 0.
        double span = d > w ? (double) (d - w) : 0.0;
        span = fmax (1.0, span);
        double p = fmin ((double) (s - 1 - w), span) / span;
        double alpha = schedule->alpha;
        return base_lr * ((1.0 - alpha) * 0.5 * (1.0 + cos (M_PI * p)) + alpha);
    }
    return base_lr;
}
