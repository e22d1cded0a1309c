//  Synchronous training on the servers, the worker's side (see
//  ps_wmode.h): the servers' side (ps_wmode_ps.h), whose train pushes a
//  round's step with its round and pulls before every step (the plan's
//  overlap does not apply; the coordinator clears it). A train work
//  without a round comes from a coordinator that does not speak sync
//  mode: the worker stops with an error naming what was missing rather
//  than push a gradient the servers would apply on its own.

#include "ps_wmode_ps.h"

#include <inttypes.h>

static int
s_train (ps_wmode_t *self, const ps_work_t *work, ps_error_t *err)
{
    if (work->round == 0)
        return ps_error_set (err, PS_EPROTO, "train step %" PRIu64 " carries no round, which "
                             "sync mode needs (the coordinator's 'work' lacks 'round' and "
                             "'round_steps')", work->step);
    return ps_wmode_ps_train (self, work, err);
}

const ps_wmode_ops_t ps_wmode_sync = {
    .name = "sync",
    .same = NULL,
    .create = ps_wmode_ps_create,
    .destroy = ps_wmode_ps_destroy,
    .train = s_train,
    .eval = ps_wmode_ps_eval,
    .order = NULL,
    .settle = ps_wmode_ps_settle,
    .stale = ps_wmode_ps_stale,
    .give_back = NULL,
    .abort = NULL,
};
