//  The bounded-staleness mode (see ps_mode_ssp.h): the servers' side
//  (ps_mode_ps.h) with a policy around the clock.

#include "ps_mode_ssp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "ps_log.h"
#include "ps_mode_ps.h"
#include "ps_sspclock.h"

typedef struct {
    ps_mode_host_t *host;
    ps_sspclock_t *clock;
} s_ssp_t;

//  A worker starts a step only while the clock allows; a request it
//  refuses is held (the policy's hold) until a completion frees it. A
//  checkpoint pauses dispatch as async's does.
static bool
s_may_hand (void *arg, int index, bool paused)
{
    s_ssp_t *self = arg;
    return !paused && ps_sspclock_may_start (self->clock, (uint32_t) index);
}

static void
s_handed (void *arg, int index, uint64_t step, ps_proto_work_t *work)
{
    (void) step, (void) work;
    s_ssp_t *self = arg;
    ps_sspclock_started (self->clock, (uint32_t) index);
}

static void
s_completed (void *arg, int index, uint64_t step)
{
    (void) step;
    s_ssp_t *self = arg;
    ps_sspclock_finished (self->clock, (uint32_t) index);
}

//  A worker's registration, or a worker declared failed heard again: it
//  counts in the clock from the slowest live worker's.
static void
s_joined (void *arg, int index)
{
    s_ssp_t *self = arg;
    ps_sspclock_join (self->clock, (uint32_t) index);
}

//  A worker that evaluates is away from the clock meanwhile: its clock
//  does not move while it evaluates, which would hold the others back.
static void
s_evaluating (void *arg, int index, bool evaluating)
{
    s_ssp_t *self = arg;
    ps_sspclock_away (self->clock, (uint32_t) index, evaluating);
}

//  A failed worker no longer holds the others back (its steps went back to
//  the queue).
static void
s_left (void *arg, int index)
{
    s_ssp_t *self = arg;
    ps_sspclock_leave (self->clock, (uint32_t) index);
}

//  The done record's "staleness": the bound, how many steps started d
//  steps ahead of the slowest live worker (d = 0 .. S; with S at 16 or
//  more, the last entry counts 16 and more), and the largest d seen. The
//  same goes to the log, after the line that says training is done.
static void
s_report (void *arg, json_t *record)
{
    s_ssp_t *self = arg;
    int staleness = self->host->job->staleness;
    uint64_t counts [PS_SSPCLOCK_BUCKETS];
    uint64_t widest = ps_sspclock_histogram (self->clock, counts);
    int buckets = staleness < PS_SSPCLOCK_BUCKETS - 1 ? staleness + 1 : PS_SSPCLOCK_BUCKETS;
    json_t *histogram = json_array ();
    char text [PS_SSPCLOCK_BUCKETS * 24] = "";
    size_t used = 0;
    for (int d = 0; d < buckets; d++) {
        json_array_append_new (histogram, json_integer ((json_int_t) counts [d]));
        used += (size_t) snprintf (text + used, sizeof text - used, "%s%d%s: %" PRIu64,
                                   d ? ", " : "", d, d == PS_SSPCLOCK_BUCKETS - 1 ? "+" : "",
                                   counts [d]);
    }
    json_object_set_new (record, "staleness",
                         json_pack ("{s:i, s:o, s:I}", "bound", staleness, "histogram",
                                    histogram, "max", (json_int_t) widest));
    ps_info ("staleness (bound %s%d): steps started d ahead of the slowest worker: %s; "
             "largest %" PRIu64, staleness == PS_JOB_STALENESS_UNBOUNDED ? "unbounded, " : "",
             staleness, text, widest);
}

static const ps_mode_ps_policy_t s_policy = {
    .may_hand = s_may_hand,
    .hold = true,
    .evaluating = s_evaluating,
    .handed = s_handed,
    .completed = s_completed,
    .joined = s_joined,
    .left = s_left,
    .report = s_report,
};

static void *
s_new (ps_mode_host_t *host, ps_error_t *err)
{
    (void) err;
    s_ssp_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->host = host;
    int nworkers = ps_roster_count (host->roster, PS_ROLE_WORKER);
    int staleness = host->job->staleness;
    self->clock = ps_sspclock_new ((uint32_t) nworkers,
                                   staleness == PS_JOB_STALENESS_UNBOUNDED
                                   ? PS_SSPCLOCK_UNBOUNDED : (uint32_t) staleness);
    return ps_mode_ps_new (host, &s_policy, self);
}

static void
s_destroy (void **self_p)
{
    ps_mode_ps_t *ps = *self_p;
    if (ps) {
        s_ssp_t *self = ps_mode_ps_arg (ps);
        ps_sspclock_destroy (&self->clock);
        free (self);
        ps_mode_ps_destroy (&ps);
    }
    *self_p = NULL;
}

const ps_mode_ops_t ps_mode_ssp = {
    .name = "ssp",
    .holders = PS_ROLE_PS,
    .start_partial = false,
    .min_servers = 1,
    .local_servers = 2,
    .new = s_new,
    .destroy = s_destroy,
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
