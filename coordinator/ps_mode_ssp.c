//  The bounded-staleness mode (see ps_mode_ssp.h).

#include "ps_mode_ssp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "ps_clock.h"
#include "ps_log.h"
#include "ps_mode_ps.h"
#include "ps_sspclock.h"

//  A worker's request, held until the clock lets it start a step.
typedef struct {
    bool held;
    uint64_t id;
    double since_ms;
} s_hold_t;

typedef struct {
    ps_mode_host_t *host;
    ps_mode_ps_t *ps;           //  the servers' side, as async's
    ps_sspclock_t *clock;
    int nworkers;
    s_hold_t *holds;            //  one per worker task
} s_ssp_t;

static void *
s_new (ps_mode_host_t *host, ps_error_t *err)
{
    s_ssp_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->host = host;
    self->ps = ps_mode_ps_new (host, err);
    self->nworkers = ps_roster_count (host->roster, PS_ROLE_WORKER);
    int staleness = host->job->staleness;
    self->clock = ps_sspclock_new ((uint32_t) self->nworkers,
                                   staleness == PS_JOB_STALENESS_UNBOUNDED
                                   ? PS_SSPCLOCK_UNBOUNDED : (uint32_t) staleness);
    self->holds = calloc ((size_t) self->nworkers + 1, sizeof *self->holds);
    if (!self->holds)
        abort ();
    return self;
}

static void
s_destroy (void **self_p)
{
    s_ssp_t *self = *self_p;
    if (self) {
        void *ps = self->ps;
        ps_mode_ps_destroy (&ps);
        ps_sspclock_destroy (&self->clock);
        free (self->holds);
        free (self);
        *self_p = NULL;
    }
}

static int
s_setup (void *self_)
{
    return ps_mode_ps_setup (((s_ssp_t *) self_)->ps);
}

//  Answer worker index's request id with a step, if the schedule has one.
static bool
s_hand_out (s_ssp_t *self, ps_peer_t *peer, int index, uint64_t id)
{
    if (!ps_mode_ps_hand_out (self->ps, peer, index, id))
        return false;
    ps_sspclock_started (self->clock, (uint32_t) index);
    return true;
}

//  Answer worker index's request id (want: it asks for work) as far as the
//  clock allows. Returns false when the clock holds the worker back and
//  nothing was sent.
static bool
s_answer (s_ssp_t *self, ps_peer_t *peer, int index, uint64_t id, bool want)
{
    if (ps_mode_ps_answer (self->ps, peer, PS_ROLE_WORKER, index, id, want))
        return true;
    if (want && ps_mode_ps_dispatching (self->ps)) {
        if (!ps_sspclock_may_start (self->clock, (uint32_t) index))
            return false;
        if (s_hand_out (self, peer, index, id))
            return true;
    }
    ps_mode_ps_wait (self->ps, peer, id);
    return true;
}

static void
s_request (void *self_, ps_peer_t *peer, ps_role_t role, int index, uint64_t id,
           const ps_proto_work_request_t *req)
{
    s_ssp_t *self = self_;
    uint64_t completed = ps_mode_ps_take_reports (self->ps, peer, role, index, req);
    bool want = req->want > 0;
    if (role != PS_ROLE_WORKER) {
        if (!ps_mode_ps_answer (self->ps, peer, role, index, id, want))
            ps_mode_ps_wait (self->ps, peer, id);
        return;
    }
    for (uint64_t i = 0; i < completed; i++)
        ps_sspclock_finished (self->clock, (uint32_t) index);
    //  A worker asks again only when it gave up on its last request: a
    //  request held still is one it no longer waits for.
    s_hold_t *hold = &self->holds [index];
    hold->held = false;
    if (!s_answer (self, peer, index, id, want))
        *hold = (s_hold_t) { .held = true, .id = id, .since_ms = ps_clock_ms () };
}

//  Serve the held requests the clock lets go now (a completion moved the
//  slowest worker on, or a worker left), and answer "wait" to those held
//  long, so that their workers do not take them for lost.
static void
s_serve_held (s_ssp_t *self, double now)
{
    for (int w = 0; w < self->nworkers; w++) {
        s_hold_t *hold = &self->holds [w];
        if (!hold->held)
            continue;
        ps_peer_t *peer = ps_roster_peer (self->host->roster, PS_ROLE_WORKER, w);
        if (s_answer (self, peer, w, hold->id, true))
            hold->held = false;
        else
        if (now - hold->since_ms > PS_MODE_HOLD_MS) {
            ps_mode_ps_wait (self->ps, peer, hold->id);
            hold->held = false;
        }
    }
}

//  A worker's registration: a new process, or the same one again, holds
//  no request of before; it counts in the clock from the slowest live
//  worker's.
static void
s_joined (void *self_, ps_role_t role, int index, bool fresh)
{
    (void) fresh;
    s_ssp_t *self = self_;
    if (role != PS_ROLE_WORKER)
        return;
    self->holds [index].held = false;
    ps_sspclock_join (self->clock, (uint32_t) index);
}

//  A worker declared failed was heard again: it counts in the clock again.
static void
s_rejoined (void *self_, ps_role_t role, int index)
{
    s_ssp_t *self = self_;
    if (role == PS_ROLE_WORKER)
        ps_sspclock_join (self->clock, (uint32_t) index);
}

//  A failed worker no longer holds the others back, and its steps go back
//  to the queue.
static size_t
s_task_failed (void *self_, ps_role_t role, int index)
{
    s_ssp_t *self = self_;
    if (role == PS_ROLE_WORKER) {
        self->holds [index].held = false;
        ps_sspclock_leave (self->clock, (uint32_t) index);
    }
    return ps_mode_ps_task_failed (self->ps, role, index);
}

static void
s_server_failed (void *self_, int index, const char *reason)
{
    ps_mode_ps_server_failed (((s_ssp_t *) self_)->ps, index, reason);
}

static void
s_advance (void *self_, double now)
{
    s_ssp_t *self = self_;
    ps_mode_ps_advance (self->ps, now);
    if (!self->host->failed)
        s_serve_held (self, now);
}

static int
s_final_checkpoint (void *self_, double now)
{
    return ps_mode_ps_final_checkpoint (((s_ssp_t *) self_)->ps, now);
}

//  The done record's "staleness": the bound, how many steps started d
//  steps ahead of the slowest live worker (d = 0 .. S; with S at 16 or
//  more, the last entry counts 16 and more), and the largest d seen. The
//  same goes to the log, after the line that says training is done.
static void
s_report (void *self_, json_t *record, json_t *mismatches, uint64_t done)
{
    (void) mismatches, (void) done;
    s_ssp_t *self = self_;
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

//  The done record is written: the held requests are answered "stop".
static void
s_stop (void *self_)
{
    s_serve_held (self_, ps_clock_ms ());
}

const ps_mode_ops_t ps_mode_ssp = {
    .name = "ssp",
    .holders = PS_ROLE_PS,
    .start_partial = false,
    .min_servers = 1,
    .local_servers = 2,
    .new = s_new,
    .destroy = s_destroy,
    .setup = s_setup,
    .joined = s_joined,
    .rejoined = s_rejoined,
    .request = s_request,
    .task_failed = s_task_failed,
    .server_failed = s_server_failed,
    .advance = s_advance,
    .final_checkpoint = s_final_checkpoint,
    .report = s_report,
    .stop = s_stop,
};
