//  The worker's side of the modes that keep the variables on the servers
//  (async, whose workers ssp uses as they are, and sync): a client of the
//  plan's servers, the parameters pulled from them and the gradients
//  pushed to them. A train step pulls when the parameters held are not
//  the servers' current ones, computes the batch's gradient and pushes
//  it: async with push-pull on the pusher's thread (ps_pusher.h),
//  overlapping the next step's computation when the plan asks; sync
//  tagged with the work's round, at once, with no values back. An
//  evaluation pulls and evaluates on the test set. The mode files
//  (ps_wmode_async.c, ps_wmode_sync.c) are tables of these operations
//  (ps_wmode.h).

#ifndef PS_WMODE_PS_H_INCLUDED
#define PS_WMODE_PS_H_INCLUDED

#include "ps_wmode.h"

//  The operations of the same names (ps_wmode.h). train pushes with the
//  work's round when it has one.
ps_wmode_t *ps_wmode_ps_create (const ps_wmode_env_t *env, ps_error_t *err);
void ps_wmode_ps_destroy (ps_wmode_t **self_p);
int ps_wmode_ps_train (ps_wmode_t *self, const ps_work_t *work, ps_error_t *err);
int ps_wmode_ps_eval (ps_wmode_t *self, const ps_work_t *work, ps_error_t *err);
int ps_wmode_ps_settle (ps_wmode_t *self, ps_error_t *err);
void ps_wmode_ps_stale (ps_wmode_t *self);

#endif
