//  The synchronous mode (see ps_mode_sync.h).

#include "ps_mode_sync.h"

#include <stdlib.h>

#include "ps_clock.h"
#include "ps_log.h"
#include "ps_mode_ps.h"

typedef struct {
    ps_mode_host_t *host;
    ps_mode_ps_t *ps;               //  the servers' side, whose policy this is
    //  The open round: steps [first, first + steps), named first.
    bool open;
    uint64_t first;
    uint64_t steps;
    double opened_ms;
    //  The done record's: rounds completed, their steps and time.
    uint64_t rounds;
    uint64_t round_steps;
    double round_ms;
    double round_ms_max;
} s_sync_t;

//  How many of the open round's steps are done. Every step before the
//  round is done and none after it was handed out, so the schedule's done
//  count tells.
static uint64_t
s_round_done (const s_sync_t *self)
{
    return ps_schedule_done_count (self->host->schedule) - (self->first - 1);
}

//  Close the open round when every step of it is done.
static void
s_close_if_done (s_sync_t *self)
{
    if (!self->open || s_round_done (self) < self->steps)
        return;
    self->open = false;
    self->rounds++;
    self->round_steps += self->steps;
    double ms = ps_clock_ms () - self->opened_ms;
    self->round_ms += ms;
    if (ms > self->round_ms_max)
        self->round_ms_max = ms;
}

//  Open the next round: the steps after those done, one per live worker,
//  within the epoch and the run. False when no step is left.
static bool
s_open (s_sync_t *self)
{
    ps_mode_host_t *host = self->host;
    uint64_t done = ps_schedule_done_count (host->schedule);
    uint64_t total = ps_schedule_total (host->schedule);
    if (done >= total)
        return false;
    uint64_t epoch, batch;
    self->first = done + 1;
    ps_schedule_locate (host->schedule, self->first, &epoch, &batch);
    uint64_t steps = (uint64_t) ps_roster_alive (host->roster, PS_ROLE_WORKER);
    uint64_t in_epoch = ps_schedule_batches_per_epoch (host->schedule) - batch;
    if (steps > in_epoch)
        steps = in_epoch;
    if (steps > total - done)
        steps = total - done;
    if (steps == 0)
        return false;
    self->steps = steps;
    self->open = true;
    self->opened_ms = ps_clock_ms ();
    return true;
}

static bool
s_may_hand (void *arg, int index, bool paused)
{
    (void) index;
    s_sync_t *self = arg;
    s_close_if_done (self);
    //  A checkpoint waits for the open round, so its steps are still
    //  handed out; no round opens while dispatch is paused (before the
    //  checkpoint is taken, or ever again after a stop signal).
    if (!self->open && (paused || !s_open (self)))
        return false;
    uint64_t handled = s_round_done (self) + ps_schedule_in_flight (self->host->schedule);
    return handled < self->steps;
}

//  A train answer carries the round and its step count.
static void
s_handed (void *arg, int index, uint64_t step, ps_proto_work_t *work)
{
    (void) index, (void) step;
    s_sync_t *self = arg;
    work->has_round = true;
    work->round = self->first;
    work->has_round_steps = true;
    work->round_steps = self->steps;
}

static bool
s_drained (void *arg)
{
    s_sync_t *self = arg;
    s_close_if_done (self);
    return !self->open;
}

static void
s_rewound (void *arg)
{
    s_sync_t *self = arg;
    self->open = false;
}

static void
s_report (void *arg, json_t *record)
{
    s_sync_t *self = arg;
    s_close_if_done (self);
    double rounds = self->rounds ? (double) self->rounds : 1.0;
    json_object_set_new (record, "rounds", json_integer ((json_int_t) self->rounds));
    json_object_set_new (record, "round_steps_mean",
                         json_real ((double) self->round_steps / rounds));
    json_object_set_new (record, "round_ms_mean", json_real (self->round_ms / rounds));
    json_object_set_new (record, "round_ms_max", json_real (self->round_ms_max));
}

static const ps_mode_ps_policy_t s_policy = {
    .may_hand = s_may_hand,
    .handed = s_handed,
    .drained = s_drained,
    .rewound = s_rewound,
    .report = s_report,
    //  A worker that has pushed its step and finds the round handed out
    //  waits for the next round: its request is held and answered when
    //  the round closes and the next one opens, not polled for.
    .hold = true,
    //  An evaluation goes to a worker whose step is reported: the round
    //  would wait for the evaluation otherwise.
    .eval_idle = true,
};

//  Overlap would push a step while computing the next one on parameters
//  the round has not applied yet; a sync worker does not overlap, and the
//  plan says so.
static void
s_plan (void *self_, ps_plan_t *plan)
{
    (void) self_;
    plan->sync = true;
    if (plan->overlap)
        ps_warn ("overlap (--overlap, or the job's \"overlap\") is ignored in sync mode: every "
                 "step of a round is pushed before the next round's parameters are pulled");
    plan->overlap = false;
}

static void *
s_new (ps_mode_host_t *host, ps_error_t *err)
{
    (void) err;
    s_sync_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->host = host;
    self->ps = ps_mode_ps_new (host, &s_policy, self);
    return self->ps;
}

static void
s_destroy (void **self_p)
{
    ps_mode_ps_t *ps = *self_p;
    if (ps) {
        free (ps_mode_ps_arg (ps));
        ps_mode_ps_destroy (&ps);
    }
    *self_p = NULL;
}

const ps_mode_ops_t ps_mode_sync = {
    .name = "sync",
    .holders = PS_ROLE_PS,
    .start_partial = false,
    .min_servers = 1,
    .local_servers = 2,
    .new = s_new,
    .destroy = s_destroy,
    .plan = s_plan,
    .setup = ps_mode_ps_setup,
    .joined = ps_mode_ps_joined,
    .rejoined = ps_mode_ps_rejoined,
    .request = ps_mode_ps_request,
    .task_failed = ps_mode_ps_task_failed,
    .server_failed = ps_mode_ps_server_failed,
    .advance = ps_mode_ps_advance,
    .final_checkpoint = ps_mode_ps_final_checkpoint,
    .report = ps_mode_ps_report,
    .stop = ps_mode_ps_stop,
};
