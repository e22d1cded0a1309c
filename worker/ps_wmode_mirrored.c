//  The mirrored mode on the worker; see ps_wmode.h.
//
//  Every worker holds a replica of the model and a place in a ring
//  (ps_mirror.h). The coordinator orders the ring formed ("ring": join
//  it, taking over the root's replica), each synchronous step ("train":
//  this member's batch, its gradient weighted by its share of the global
//  batch, summed over the ring and applied to the replica), evaluations
//  of a shard of the test set with the replica's checksum ("eval"), and
//  snapshots of the replica for a checkpoint ("save"). Every report
//  carries the replica's update count and the order's number.
//
//  While a collective waits on the ring, the ring's watch polls the loop
//  (ps_wmode_host_t): an abort of the ring in use, the loss of the
//  coordinator, a new registration or a failed link ends the collective.
//  An evaluator has no part in a ring (the coordinator tells it to stop),
//  so it reports whatever it is given failed.

#include "ps_wmode.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_clock.h"
#include "ps_log.h"
#include "ps_mirror.h"

//  The most batches one global step may name: one per member.
#define S_MAX_RING          4096

struct _ps_wmode_t {
    ps_stepplan_t *stepplan;
    ps_reports_t *reports;
    const ps_wmode_host_t *host;
    ps_mirror_t *mirror;        //  NULL for an evaluator
    uint64_t ring_id;           //  the ring joined last
    bool in_collective, aborted;
    uint64_t *steps;            //  the batches of a global step
};

//  The replicas start from the seed's values and apply the optimizer, so
//  both must agree for the ring to be the same one.
static bool
s_same (const ps_plan_t *a, const ps_plan_t *b)
{
    return a->seed == b->seed && a->optimizer.kind == b->optimizer.kind;
}

static void
s_destroy (ps_wmode_t **self_p)
{
    ps_wmode_t *self = *self_p;
    if (!self)
        return;
    ps_mirror_destroy (&self->mirror);
    free (self->steps);
    free (self);
    *self_p = NULL;
}

//  The ring's watch, called while a collective waits: the loop reads what
//  the coordinator sent (an abort order comes back here, through s_abort).
static bool
s_watch (void *arg)
{
    ps_wmode_t *self = arg;
    bool end = self->host->poll (self->host->arg);
    return end || self->aborted;
}

//  A replica and this worker's place in the ring, bound on its own address
//  from the cluster spec.
static ps_wmode_t *
s_create (const ps_wmode_env_t *env, ps_error_t *err)
{
    ps_wmode_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->stepplan = env->stepplan;
    self->reports = env->reports;
    self->host = env->host;
    if (env->evaluator)
        return self;
    if (!env->bind) {
        ps_error_set (err, PS_EINVAL, "the job runs in mirrored mode, which needs this "
                      "worker's own address from the cluster spec to bind its ring endpoint");
        s_destroy (&self);
        return NULL;
    }
    const ps_plan_t *plan = ps_stepplan_plan (env->stepplan);
    //  A member that hears nothing from its ring for this long gives up on
    //  the collective; the coordinator normally aborts it first, after its
    //  heartbeat timeout.
    int timeout_ms = 2 * plan->client_timeout_ms + 1000;
    if (!(self->mirror = ps_mirror_new (ps_stepplan_model (env->stepplan), plan->seed,
                                        &plan->optimizer, env->bind, env->ipc, timeout_ms,
                                        env->curve,
                                        err))) {
        ps_error_prefix (err, err->code, "mirrored mode");
        s_destroy (&self);
        return NULL;
    }
    if (!(self->steps = calloc (S_MAX_RING, sizeof (uint64_t))))
        abort ();
    ps_ring_set_watch (ps_mirror_ring (self->mirror), env->host->socket, -1, s_watch, self);
    ps_info ("mirrored mode: ring endpoint %s", ps_ring_endpoint (ps_mirror_ring (self->mirror)));
    return self;
}

//  Run a collective (fn) with the watch armed.
static int
s_collective (ps_wmode_t *self, int (*fn) (ps_wmode_t *, void *, ps_error_t *), void *arg,
              ps_error_t *err)
{
    self->in_collective = true;
    self->aborted = false;
    int rc = fn (self, arg, err);
    self->in_collective = false;
    return rc;
}

//  Queue a report: the replica's counters go with every one.
static void
s_report (ps_wmode_t *self, ps_report_t *report, bool done)
{
    report->done = done;
    if (self->mirror) {
        ps_replica_t *replica = ps_mirror_replica (self->mirror);
        report->has_update = true;
        report->update = ps_replica_updates (replica);
        report->applied = ps_ledger_count (ps_replica_ledger (replica));
        report->duplicates = ps_replica_duplicates (replica);
    }
    ps_reports_work (self->reports, report);
}

//  An evaluator holds no replica: whatever it is given, it reports failed.
static bool
s_no_replica (ps_wmode_t *self, const ps_work_t *work, ps_report_t *report)
{
    if (self->mirror)
        return false;
    ps_warn ("%s step %" PRIu64 ": an evaluator has no replica in mirrored mode; reporting "
             "it failed", work->name, work->step);
    s_report (self, report, false);
    return true;
}

typedef struct {
    uint64_t ring_id;
    int rank, n, root;
    char **members;
    int *tasks;
    char load [4096];
} s_join_t;

static int
s_do_join (ps_wmode_t *self, void *arg, ps_error_t *err)
{
    s_join_t *join = arg;
    return ps_mirror_join (self->mirror, join->ring_id, join->rank, join->n,
                           (const char *const *) join->members, join->tasks, join->root,
                           *join->load ? join->load : NULL, err);
}

//  Join the ring the coordinator formed, taking over the root's replica.
//  A failure is reported, not fatal: the coordinator forms the ring again.
//  The ring's fields are copied, since the message is gone once the
//  collective polls the loop.
static int
s_ring (ps_wmode_t *self, const ps_work_t *work)
{
    const ps_proto_work_t *msg = work->msg;
    const ps_proto_ring_spec_t *ring = msg->has_ring ? &msg->ring : NULL;
    ps_report_t report = { .kind = PS_WORK_RING, .generation = work->generation,
                           .order = work->order };
    if (s_no_replica (self, work, &report))
        return 0;
    s_join_t join = { .ring_id = work->generation };
    int64_t root = ring ? ring->root : -1;
    uint64_t rank = ring ? ring->rank : 0;
    size_t n = ring ? ring->members.count : 0;
    bool tasks_ok = ring && ring->tasks.count == n;
    for (size_t i = 0; tasks_ok && i < n; i++)
        tasks_ok = ring->tasks.items [i] <= 65535;
    //  The decoder has refused a root below -1 (protocol.json's bounds).
    if (!ring || n < 1 || n > S_MAX_RING || rank >= n || root >= (int64_t) n
    ||  !tasks_ok || strlen (ring->load) >= sizeof join.load) {
        ps_warn ("the coordinator sent a ring order without a valid ring (rank %" PRIu64
                 " of %zu, root %" PRId64 "); reporting it failed", rank, n, root);
        s_report (self, &report, false);
        return 0;
    }
    join.rank = (int) rank;
    join.n = (int) n;
    join.root = (int) root;
    snprintf (join.load, sizeof join.load, "%s", ring->load);
    join.members = calloc (n, sizeof (char *));
    join.tasks = calloc (n, sizeof (int));
    if (!join.members || !join.tasks)
        abort ();
    for (size_t i = 0; i < n; i++) {
        join.tasks [i] = (int) ring->tasks.items [i];
        if (!(join.members [i] = strdup (ring->members.items [i])))
            abort ();
    }
    ps_error_t local;
    double t0 = ps_clock_ms ();
    self->ring_id = work->generation;
    int rc = s_collective (self, s_do_join, &join, &local);
    for (size_t i = 0; i < n; i++)
        free (join.members [i]);
    free (join.members);
    free (join.tasks);
    report.comm_ms = ps_clock_ms () - t0;
    if (rc == 0)
        ps_info ("joined ring %" PRIx64 " as member %d of %d%s; the replica is at update %"
                 PRIu64, work->generation, join.rank, join.n,
                 join.root < 0 ? "" : join.root == join.rank ? " as its root" : ", taking the "
                 "root's replica", ps_replica_updates (ps_mirror_replica (self->mirror)));
    else
        ps_warn ("joining ring %" PRIx64 ": %s", work->generation, local.msg);
    s_report (self, &report, rc == 0);
    return 0;
}

typedef struct {
    size_t nsteps;
    double lr;
} s_update_t;

static int
s_do_update (ps_wmode_t *self, void *arg, ps_error_t *err)
{
    s_update_t *update = arg;
    return ps_mirror_update (self->mirror, self->steps, update->nsteps, update->lr, err);
}

//  One synchronous step: this member's batch (none when step is 0), its
//  gradient weighted by its share of the global batch, summed over the
//  ring and applied to the replica.
static int
s_train (ps_wmode_t *self, const ps_work_t *work, ps_error_t *err)
{
    const ps_proto_work_t *msg = work->msg;
    ps_report_t report = { .kind = PS_WORK_TRAIN, .step = work->step,
                           .generation = work->generation, .order = work->order };
    if (s_no_replica (self, work, &report))
        return 0;
    ps_replica_t *replica = ps_mirror_replica (self->mirror);
    //  The update number says which state the step expects: a replica at
    //  another count would diverge from the others, so it declines and the
    //  ring is formed again, bringing it up to date.
    if (!msg->has_steps || !msg->has_lr || !msg->has_examples || !msg->has_update
    ||  msg->steps.count < 1 || msg->steps.count > S_MAX_RING
    ||  work->generation != self->ring_id || msg->update != ps_replica_updates (replica) + 1) {
        ps_warn ("train step %" PRIu64 " (update %" PRIu64 " of ring %" PRIx64 ") is not one "
                 "this worker can run (its replica is at update %" PRIu64 " in ring %" PRIx64
                 "); reporting it failed", work->step, msg->has_update ? msg->update : 0,
                 work->generation, ps_replica_updates (replica), self->ring_id);
        s_report (self, &report, false);
        return 0;
    }
    s_update_t update = { .nsteps = msg->steps.count, .lr = msg->lr };
    memcpy (self->steps, msg->steps.items, update.nsteps * sizeof (uint64_t));
    uint64_t total = msg->examples;
    float *grad = ps_mirror_grad (self->mirror);
    size_t count = ps_replica_count (replica);
    double t0 = ps_clock_ms ();
    ps_batch_stats_t stats = { 0 };
    if (work->step > 0) {
        int n = ps_stepplan_batch (self->stepplan, work->step, work->epoch, work->batch, err);
        if (n < 0)
            return n;
        if ((uint64_t) n > total)
            return ps_error_set (err, PS_EPROTO, "train step %" PRIu64 ": the global step "
                                 "has %" PRIu64 " examples, fewer than this batch's %d",
                                 work->step, total, n);
        int rc = ps_backend_set_params (ps_stepplan_backend (self->stepplan),
                                        ps_replica_params (replica), err);
        if (rc)
            return ps_error_prefix (err, rc, "train step %" PRIu64, work->step);
        if ((rc = ps_stepplan_compute (self->stepplan, work->step, n, grad, &stats, err)))
            return rc;
        //  The backend gives the batch's mean gradient; weighted by the
        //  batch's share, the ring's sum is the global batch's mean.
        float share = (float) ((double) n / (double) total);
        for (size_t i = 0; i < count; i++)
            grad [i] *= share;
    }
    else
        memset (grad, 0, count * sizeof (float));
    double t1 = ps_clock_ms ();
    ps_error_t local;
    int rc = s_collective (self, s_do_update, &update, &local);
    double t2 = ps_clock_ms ();
    report.compute_ms = t1 - t0;
    report.comm_ms = t2 - t1;
    if (rc == 0) {
        report.loss = stats.loss_sum;
        report.correct = (uint64_t) stats.correct;
        report.count = (uint64_t) stats.count;
    }
    else {
        ps_warn ("train step %" PRIu64 " (ring %" PRIx64 "): %s", work->step, work->generation,
                 local.msg);
        if (rc == PS_ENONFINITE)
            snprintf (report.error, sizeof report.error, "%s: %.380s", ps_error_name (rc),
                      local.msg);
    }
    s_report (self, &report, rc == 0);
    return 0;
}

//  This member's share of an evaluation, with the replica's checksum, by
//  which the coordinator checks that the replicas agree.
static int
s_eval (ps_wmode_t *self, const ps_work_t *work, ps_error_t *err)
{
    const ps_proto_work_t *msg = work->msg;
    ps_report_t report = { .kind = PS_WORK_EVAL, .step = work->step,
                           .generation = work->generation, .order = work->order };
    if (s_no_replica (self, work, &report))
        return 0;
    if (!msg->has_shard || !msg->has_shards || msg->shards < 1 || msg->shard >= msg->shards) {
        ps_warn ("eval at step %" PRIu64 ": no valid shard; reporting it failed", work->step);
        s_report (self, &report, false);
        return 0;
    }
    ps_replica_t *replica = ps_mirror_replica (self->mirror);
    size_t total = ps_dataset_count (ps_stepplan_test (self->stepplan));
    size_t first = (size_t) (total * msg->shard / msg->shards);
    size_t end = (size_t) (total * (msg->shard + 1) / msg->shards);
    double t0 = ps_clock_ms ();
    ps_batch_stats_t stats;
    int rc = ps_backend_set_params (ps_stepplan_backend (self->stepplan),
                                    ps_replica_params (replica), err);
    if (rc == 0)
        rc = ps_stepplan_evaluate (self->stepplan, first, end - first, &stats, err);
    if (rc)
        return ps_error_prefix (err, rc, "eval at step %" PRIu64, work->step);
    report.compute_ms = ps_clock_ms () - t0;
    report.loss = stats.loss_sum;
    report.correct = (uint64_t) stats.correct;
    report.count = (uint64_t) stats.count;
    //  A shard's AUC does not add up to the test set's, so only a
    //  regression model's summed absolute error goes with the sums.
    report.has_abs_error = ps_dataset_targets (ps_stepplan_test (self->stepplan)) > 0;
    report.abs_error = stats.abs_sum;
    report.has_checksum = true;
    report.checksum = ps_replica_checksum (replica);
    s_report (self, &report, true);
    return 0;
}

//  Write the replica's snapshot files for a checkpoint.
static int
s_save (ps_wmode_t *self, const ps_work_t *work)
{
    char dir [4096];
    ps_report_t report = { .kind = PS_WORK_SAVE, .step = work->step,
                           .generation = work->generation, .order = work->order };
    if (s_no_replica (self, work, &report))
        return 0;
    const ps_proto_work_t *msg = work->msg;
    ps_error_t local;
    int rc = !msg->has_dir || strlen (msg->dir) >= sizeof dir
           ? ps_error_set (&local, PS_EPROTO, "a save order without a valid dir") : 0;
    if (rc == 0)
        snprintf (dir, sizeof dir, "%s", msg->dir);
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    double t0 = ps_clock_ms ();
    if (rc == 0)
        rc = ps_replica_save (ps_mirror_replica (self->mirror), dir, &files, &nfiles, &local);
    free (files);
    report.comm_ms = ps_clock_ms () - t0;
    if (rc)
        ps_warn ("saving the replica: %s", local.msg);
    else
        ps_info ("saved the replica into %s (%zu files, %.1f ms)", dir, nfiles, report.comm_ms);
    s_report (self, &report, rc == 0);
    return 0;
}

//  The mode's own kinds of work: forming a ring and saving the replica.
static int
s_order (ps_wmode_t *self, const ps_work_t *work, ps_error_t *err)
{
    (void) err;
    if (work->kind == PS_WORK_RING)
        return s_ring (self, work);
    if (work->kind == PS_WORK_SAVE)
        return s_save (self, work);
    return 1;
}

//  Every step ends with its collective: nothing is left in flight.
static int
s_settle (ps_wmode_t *self, ps_error_t *err)
{
    (void) self;
    (void) err;
    return 0;
}

//  The replica is the worker's own: nothing on the servers can change it.
static void
s_stale (ps_wmode_t *self)
{
    (void) self;
}

static void
s_give_back (ps_wmode_t *self, const ps_work_t *work, ps_report_t *report)
{
    if (!self->mirror)
        return;
    report->has_update = true;
    report->update = ps_replica_updates (ps_mirror_replica (self->mirror));
    report->order = work->order;
}

//  Rings are numbered upwards, so an abort of this ring or a later one
//  (this worker was left out of it, having been stopped) ends the
//  collective in progress; one that comes after it is stale.
static void
s_abort (ps_wmode_t *self, uint64_t generation)
{
    if (self->in_collective && generation >= self->ring_id)
        self->aborted = true;
}

const ps_wmode_ops_t ps_wmode_mirrored = {
    .name = "mirrored",
    .same = s_same,
    .create = s_create,
    .destroy = s_destroy,
    .train = s_train,
    .eval = s_eval,
    .order = s_order,
    .settle = s_settle,
    .stale = s_stale,
    .give_back = s_give_back,
    .abort = s_abort,
};
