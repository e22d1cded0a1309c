//  What the modes that keep the variables on the servers share (see
//  ps_mode_ps.h).

#include "ps_mode_ps.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_checkpoint.h"
#include "ps_clock.h"
#include "ps_log.h"
#include "ps_shared_root.h"

//  How long a waiting worker sleeps before it asks again.
#define S_WAIT_MS          20
//  Steps whose failures are counted at once.
#define S_FAILING_STEPS    16
//  A worker whose step failed waits this long before it gets another,
//  twice as long after each further failure in a row, up to the most.
#define S_BACKOFF_MS       10
#define S_BACKOFF_MAX_MS   1000

//  A worker's request, held until the policy lets it have a step.
typedef struct {
    bool held;
    uint64_t id;
    double since_ms;
} s_hold_t;

struct _ps_mode_ps_t {
    ps_mode_host_t *host;
    const ps_mode_ps_policy_t *policy;  //  NULL: async's
    void *arg;
    int nworkers;
    s_hold_t *holds;                    //  one per worker task
    bool *evaluating;                   //  per worker task: told the policy so
    bool said_evaluator_coming;         //  logged that evaluations wait for the evaluator
    //  A server failed: dispatch is paused until every server is back and
    //  restored.
    bool recovering;
    double recover_ms;
    double recover_log_ms;
    double recover_retry_ms;
    //  The failures of the few steps that failed lately: gradients the
    //  servers refused as not finite (bounded by nonfinite_retries), and
    //  other failures (bounded by step_retries; a restore starts them
    //  again). A step that keeps failing is retried first, so it stays in
    //  the table until it is done or the run stops.
    struct { uint64_t step; int nonfinite; int failures; } failing [S_FAILING_STEPS];
    int failing_next;
    //  Per worker task: its failed steps in a row, and when it may have
    //  another step (its backoff), so that a worker that only fails does
    //  not spin on the step and flood the logs.
    int *streak;
    double *not_before_ms;
};

ps_mode_ps_t *
ps_mode_ps_new (ps_mode_host_t *host, const ps_mode_ps_policy_t *policy, void *arg)
{
    ps_mode_ps_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->host = host;
    self->policy = policy;
    self->arg = arg;
    self->nworkers = ps_roster_count (host->roster, PS_ROLE_WORKER);
    self->holds = calloc ((size_t) self->nworkers + 1, sizeof *self->holds);
    self->evaluating = calloc ((size_t) self->nworkers + 1, sizeof *self->evaluating);
    self->streak = calloc ((size_t) self->nworkers + 1, sizeof *self->streak);
    self->not_before_ms = calloc ((size_t) self->nworkers + 1, sizeof *self->not_before_ms);
    if (!self->holds || !self->evaluating || !self->streak || !self->not_before_ms)
        abort ();
    return self;
}

void
ps_mode_ps_destroy (ps_mode_ps_t **self_p)
{
    ps_mode_ps_t *self = *self_p;
    if (self) {
        free (self->holds);
        free (self->evaluating);
        free (self->streak);
        free (self->not_before_ms);
        free (self);
        *self_p = NULL;
    }
}

void *
ps_mode_ps_arg (ps_mode_ps_t *self)
{
    return self->arg;
}

static int
s_set_lr (ps_mode_ps_t *self, double lr)
{
    ps_mode_host_t *host = self->host;
    ps_opt_config_t opt = host->job->optimizer;
    opt.lr = lr;
    ps_error_t err;
    int rc = ps_client_set_optimizer (host->client, &opt, &err);
    if (rc)
        ps_warn ("cannot set the learning rate to %g: %s", lr, err.msg);
    else
        host->lr = lr;
    return rc;
}

//  The scheduled learning rate of step.
static double
s_lr_at (ps_mode_ps_t *self, uint64_t step)
{
    const ps_job_t *job = self->host->job;
    return ps_lr_at (&job->lr_schedule, job->optimizer.lr, step, self->host->steps_per_epoch,
                     self->host->total);
}

//  Follow the schedule: change the servers' rate when the scheduled one
//  has moved by more than 1% (every change for piecewise), not every step.
static void
s_follow_lr (ps_mode_ps_t *self, uint64_t step)
{
    double lr = s_lr_at (self, step), now = self->host->lr;
    if (lr != now && (self->host->job->lr_schedule.kind == PS_LR_PIECEWISE
                      || fabs (lr - now) > 0.01 * now))
        s_set_lr (self, lr);
}

//  Every server snapshots its partitions and its table shards (whole, or
//  incremental after the control's base), then the manifest.
static int
s_take_checkpoint (ps_mode_ps_t *self)
{
    ps_mode_host_t *host = self->host;
    char tmp [PS_JOB_PATH_MAX + 64];
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    uint64_t step;
    ps_error_t err;
    int rc = ps_ckpt_ctl_begin (host->ckpt, ps_clock_ms (), &step, tmp, sizeof tmp, &err);
    if (rc)
        return rc;
    ps_ckpt_cut_t cut = { .generation = host->generation, .lr = host->lr };
    rc = ps_client_snapshot_tables (host->client,
                                    ps_checkpoint_name (host->job->checkpoint_dir, tmp),
                                    ps_ckpt_ctl_base (host->ckpt), &files, &nfiles, &cut.tables,
                                    &cut.ntables, &err);
    return ps_ckpt_ctl_commit (host->ckpt, &cut, files, nfiles, rc, &err, ps_clock_ms ());
}

//  Create the model's embedding tables on every server (a no-op for the
//  shards a server holds already), as at the start and before a restore,
//  which a restarted server needs to know its shard by.
static int
s_create_tables (ps_mode_ps_t *self, ps_error_t *err)
{
    const ps_ctrmodel_t *ctr = ps_model_ctr (self->host->cfg->model);
    if (!ctr)
        return 0;
    ps_tablespec_t *specs = calloc ((size_t) ctr->table_count + 1, sizeof *specs);
    if (!specs)
        abort ();
    for (int t = 0; t < ctr->table_count; t++)
        specs [t] = ctr->tables [t].spec;
    int rc = ps_client_table_create (self->host->client, specs, (size_t) ctr->table_count, err);
    free (specs);
    return rc ? ps_error_prefix (err, rc, "creating the embedding tables") : 0;
}

//  Restore every server from the newest valid checkpoint and rewind the
//  schedule to it. Returns 0, PS_ENOTFOUND when there is none,
//  PS_ETIMEDOUT when a server is not serving yet (try again), or another
//  code after failing the run.
static int
s_restore (void *self_, const char *why)
{
    ps_mode_ps_t *self = self_;
    ps_mode_host_t *host = self->host;
    char dir [PS_JOB_PATH_MAX + 64], src [PS_JOB_PATH_MAX + 64];
    json_t *manifest = NULL;
    ps_error_t err;
    int rc = ps_ckpt_ctl_open (host->ckpt, dir, src, sizeof dir, &manifest, &err);
    if (rc) {
        if (rc != PS_ENOTFOUND)
            ps_mode_fail (host, rc, "%s", err.msg);
        return rc;
    }
    uint64_t before = ps_schedule_done_count (host->schedule);
    double t0 = ps_clock_ms ();
    //  An incremental checkpoint's table files are read on top of its
    //  base's full ones.
    const char *base = json_string_value (json_object_get (manifest, PS_CHECKPOINT_BASE));
    const char *name = ps_checkpoint_name (host->job->checkpoint_dir, src);
    //  Each server is fenced at the next generation by its restore itself
    //  (ps_client_set_generation), so that a stale push queued there
    //  cannot land between its restore and a separate fence; the fence
    //  after it reaches the servers a restore skips. A failure of either
    //  is a failed restore: a server left unfenced would apply the stale
    //  push, and the legitimate replay of its step would be a duplicate.
    uint64_t generation = host->generation + 1;
    ps_client_set_generation (host->client, generation);
    if (!ps_model_ctr (host->cfg->model))
        rc = ps_client_restore (host->client, name, &err);
    else
    if ((rc = s_create_tables (self, &err)) == 0)
        rc = ps_client_restore_tables (host->client, name, base,
                                       (size_t) ps_model_ctr (host->cfg->model)->table_count,
                                       &err);
    if (rc == 0 && (rc = ps_client_fence (host->client, generation, &err)) != 0)
        ps_error_prefix (&err, rc, "fencing the servers at generation %" PRIu64, generation);
    if (rc && self->recovering && (rc == PS_ETIMEDOUT || rc == PS_EIO || rc == PS_EREMOTE)) {
        //  Another server failed meanwhile, or is not serving yet: stay
        //  paused and try again once the failure handling has caught up.
        ps_warn ("restoring from %s: %s; trying again", dir, err.msg);
        json_decref (manifest);
        return PS_ETIMEDOUT;
    }
    uint64_t watermark = 0;
    if (rc == 0)
        rc = ps_ckpt_ctl_rewind (host->ckpt, manifest, ps_clock_ms (), &watermark, &err);
    if (rc) {
        ps_mode_fail (host, rc, "restoring from %s: %s", dir, err.msg);
        json_decref (manifest);
        return rc;
    }
    uint64_t after = ps_schedule_done_count (host->schedule);
    if (self->policy && self->policy->rewound)
        self->policy->rewound (self->arg);
    host->generation = generation;
    //  A step that failed for a server's failure starts its count again on
    //  the restored servers, and no worker waits out a backoff it owed them.
    for (int i = 0; i < S_FAILING_STEPS; i++)
        self->failing [i].failures = 0;
    for (int w = 0; w < self->nworkers; w++) {
        self->streak [w] = 0;
        self->not_before_ms [w] = 0;
    }
    ps_evalq_rewind (host->evalq, after);
    host->lr = 0;
    s_set_lr (self, s_lr_at (self, watermark + 1));
    ps_metrics_tty_clear (host->report);
    ps_info ("%s: restored every server from %s (step %" PRIu64 "); %" PRIu64
             " step%s to train again", why, dir, after, before > after ? before - after : 0,
             before - after == 1 ? "" : "s");
    ps_metrics_event (host->report, "recovered",
                      json_pack ("{s:s, s:s, s:I, s:I, s:I, s:f}", "reason", why, "checkpoint",
                                 dir, "step", (json_int_t) after, "steps_lost",
                                 (json_int_t) (before > after ? before - after : 0),
                                 "generation", (json_int_t) host->generation,
                                 "restore_ms", ps_clock_ms () - t0));
    json_decref (manifest);
    return 0;
}

int
ps_mode_ps_setup (void *self_)
{
    ps_mode_ps_t *self = self_;
    ps_mode_host_t *host = self->host;
    ps_error_t err;
    const ps_model_t *model = host->cfg->model;
    int nvars = ps_model_variable_count (model);
    ps_init_t *inits = calloc ((size_t) nvars + 1, sizeof (ps_init_t));
    if (!inits)
        abort ();
    for (int v = 0; v < nvars; v++) {
        inits [v] = ps_model_variable (model, v)->init;
        inits [v].seed = ps_model_variable_seed (host->job->seed, v);
    }
    //  The coordinator's own calls block its loop, heartbeats included, so
    //  they wait no longer than the heartbeat timeout (at least 2 s): a
    //  server that died in the middle of one is noticed in that time. A
    //  model whose snapshot takes longer needs a longer heartbeat timeout.
    ps_plan_t plan = *host->plan;
    if (plan.client_timeout_ms < 2000)
        plan.client_timeout_ms = 2000;
    host->client = ps_plan_client (&plan, inits, host->cfg->curve, &err);
    free (inits);
    if (!host->client) {
        ps_mode_fail (host, err.code, "%s", err.msg);
        return -1;
    }
    //  Before anything is restored from it or written to it, the servers
    //  must be seen to share the checkpoint directory.
    if (ps_ckpt_ctl_enabled (host->ckpt)
    &&  ps_shared_root_check (host->client, host->cfg->nservers, host->cfg->servers,
                              host->job->checkpoint_dir, host->generation, &err)) {
        ps_mode_fail (host, err.code, "%s", err.msg);
        return -1;
    }
    int rc = ps_mode_resume (host, s_restore, self);
    if (rc < 0 && rc != PS_ENOTFOUND)
        return -1;
    if (rc == PS_ENOTFOUND) {
        //  Servers keep partitions that exist already (create is
        //  idempotent), so a coordinator restarted without checkpoints goes
        //  on from the servers' current values.
        if ((rc = ps_client_create (host->client, &err)) != 0) {
            ps_mode_fail (host, rc, "creating the partitions: %s", err.msg);
            return -1;
        }
        if ((rc = s_create_tables (self, &err)) != 0) {
            ps_mode_fail (host, rc, "%s", err.msg);
            return -1;
        }
        if (s_set_lr (self, s_lr_at (self, 1))) {
            ps_mode_fail (host, PS_EIO, "%s", "cannot set the optimizer on the servers");
            return -1;
        }
        if ((rc = ps_client_fence (host->client, host->generation, &err)) != 0) {
            ps_mode_fail (host, rc, "fencing the servers: %s", err.msg);
            return -1;
        }
        //  A checkpoint of the initial state, so that a server failure
        //  before the first interval can be recovered too.
        if (ps_ckpt_ctl_enabled (host->ckpt) && s_take_checkpoint (self)) {
            ps_mode_fail (host, PS_EIO, "cannot write the first checkpoint in \"%s\"",
                          host->job->checkpoint_dir);
            return -1;
        }
    }
    return 0;
}

//  The slot of step in the table of failing steps, taken over from the
//  oldest step there when step has none.
static int
s_failing_slot (ps_mode_ps_t *self, uint64_t step)
{
    for (int i = 0; i < S_FAILING_STEPS; i++)
        if (self->failing [i].step == step)
            return i;
    int slot = self->failing_next;
    self->failing_next = (self->failing_next + 1) % S_FAILING_STEPS;
    self->failing [slot].step = step;
    self->failing [slot].nonfinite = 0;
    self->failing [slot].failures = 0;
    return slot;
}

//  Worker:index's step failed otherwise than for a non-finite gradient
//  (a server answered its pull or push with an error, a push was lost; the
//  worker says why in text, when it can). The worker backs off before its
//  next step, 10 ms, then twice as long for each failure in a row up to
//  1 s. The step goes back to the queue, up to the job's step_retries in a
//  row; then the run fails, naming the step and the error. A server's
//  failure is recovered from by a restore, which starts the counts again.
//  A push refused for a server's memory limit (PS_MEMORY_LIMIT_TEXT)
//  fails the run at once.
static void
s_on_failed (ps_mode_ps_t *self, int index, uint64_t step, const char *text)
{
    ps_mode_host_t *host = self->host;
    int streak = ++self->streak [index];
    double backoff = S_BACKOFF_MS * ldexp (1.0, streak < 16 ? streak - 1 : 15);
    self->not_before_ms [index] = ps_clock_ms () + fmin (backoff, S_BACKOFF_MAX_MS);
    int failures = ++self->failing [s_failing_slot (self, step)].failures;
    uint64_t epoch, batch;
    ps_schedule_locate (host->schedule, step, &epoch, &batch);
    if (!*text)
        text = "the worker gave no reason; see its log";
    int retries = host->job->step_retries;
    //  A server over its memory limit refuses every push that could add
    //  rows, and its tables do not shrink by waiting: retrying would only
    //  delay the failure by minutes of backoff.
    if (strstr (text, PS_MEMORY_LIMIT_TEXT)) {
        ps_mode_fail (host, PS_ETOOBIG, "step %" PRIu64 " (epoch %" PRIu64 ", batch %" PRIu64
                      ") failed on worker:%d: %s. The tables do not fit in the servers' memory "
                      "limit: run more servers, raise the limit, or bound the tables "
                      "(capacity, ttl)", step, epoch, batch, index, text);
        return;
    }
    if (failures > retries) {
        ps_mode_fail (host, PS_EIO, "step %" PRIu64 " (epoch %" PRIu64 ", batch %" PRIu64
                      ") failed %d times in a row, last on worker:%d: %s; step_retries is %d",
                      step, epoch, batch, failures, index, text, retries);
        return;
    }
    //  The first failure of a step is logged, and then only every
    //  doubling of the count, so a step that keeps failing does not flood
    //  the log either.
    if ((failures & (failures - 1)) == 0) {
        ps_metrics_tty_clear (host->report);
        ps_warn ("step %" PRIu64 " (epoch %" PRIu64 ", batch %" PRIu64 ") failed on worker:%d "
                 "(%s); trying it again (%d of %d retries)", step, epoch, batch, index, text,
                 failures, retries);
    }
}

//  The servers refused worker:index's gradient of step as not finite (it
//  changed nothing). The step goes back to the queue, to be computed again
//  on fresher parameters, up to the job's nonfinite_retries; then the run
//  fails, naming the step and what the servers said.
static void
s_on_nonfinite (ps_mode_ps_t *self, int index, uint64_t step, const char *text)
{
    ps_mode_host_t *host = self->host;
    host->nonfinite_failures++;
    int failures = ++self->failing [s_failing_slot (self, step)].nonfinite;
    uint64_t epoch, batch;
    ps_schedule_locate (host->schedule, step, &epoch, &batch);
    ps_metrics_tty_clear (host->report);
    ps_metrics_event (host->report, "nonfinite",
                      json_pack ("{s:I, s:I, s:I, s:s, s:i, s:i, s:s}", "step", (json_int_t) step,
                                 "epoch", (json_int_t) epoch, "batch", (json_int_t) batch,
                                 "role", "worker", "task", index, "failures", failures,
                                 "error", text));
    int retries = host->job->nonfinite_retries;
    if (failures > retries) {
        ps_mode_fail (host, PS_ENONFINITE, "step %" PRIu64 " (epoch %" PRIu64 ", batch %" PRIu64
                      ") gave a gradient with NaN or an infinity %d times, last from worker:%d "
                      "(%s); no server applied it. Lower the learning rate, clip the gradients "
                      "(optimizer.clip_norm), or check the batch's data; nonfinite_retries is %d",
                      step, epoch, batch, failures, index, text, retries);
        return;
    }
    ps_warn ("step %" PRIu64 " (epoch %" PRIu64 ", batch %" PRIu64 "): worker:%d's gradient "
             "was refused (%s); trying the step again (%d of %d retries)", step, epoch, batch,
             index, text, failures, retries);
}

//  A worker reported a step done that it does not hold: counted, and
//  logged once for its incarnation.
static void
s_refuse_report (ps_mode_ps_t *self, ps_peer_t *peer, int index, uint64_t step)
{
    ps_mode_host_t *host = self->host;
    peer->refused_reports++;
    host->refused_reports++;
    if (peer->refused_report_logged)
        return;
    peer->refused_report_logged = true;
    int holder = ps_schedule_holder (host->schedule, step);
    char held [48] = "nobody";
    if (holder >= 0)
        snprintf (held, sizeof held, "worker:%d", holder);
    ps_metrics_tty_clear (host->report);
    ps_warn ("refused worker:%d's completion of step %" PRIu64 ": %s holds it (further refusals "
             "of this process are counted in the done record, not logged)", index, step, held);
    ps_metrics_event (host->report, "refused",
                      json_pack ("{s:s, s:s, s:i, s:I, s:i}", "what", "completion", "role",
                                 "worker", "task", index, "step", (json_int_t) step,
                                 "holder", holder));
}

static void
s_on_eval_report (ps_mode_ps_t *self, ps_role_t role, int index,
                  const ps_proto_report_t *report, bool done)
{
    ps_mode_host_t *host = self->host;
    const ps_eval_t *busy = ps_evalq_busy (host->evalq);
    if (!busy || busy->role != role || busy->index != index
    ||  report->step != busy->step)
        return;
    if (!done || report->generation != busy->generation) {
        ps_evalq_requeue (host->evalq);
        return;
    }
    double now = ps_clock_ms ();
    ps_evalq_result (host->evalq, report->loss, report->correct, report->count,
                     report->has_auc ? report->auc : NAN,
                     report->has_abs_error ? report->abs_error : NAN,
                     ps_role_name (role), index, now - report->compute_ms, now);
}

//  A train report of worker index: a step completed, or given back.
static void
s_on_train_report (ps_mode_ps_t *self, ps_peer_t *peer, int index,
                   const ps_proto_report_t *report, bool done)
{
    ps_mode_host_t *host = self->host;
    uint64_t step = report->step;
    //  Work of an older generation ran against parameters since rewound;
    //  the restore emptied the schedule's in-flight lists already.
    if (report->generation != host->generation)
        return;
    if (!done) {
        if (ps_schedule_release (host->schedule, index, step) != 0)
            return;
        if (report->has_error && strncmp (report->error, "nonfinite", 9) == 0)
            s_on_nonfinite (self, index, step, report->error);
        else
            s_on_failed (self, index, step, report->has_error ? report->error : "");
        return;
    }
    //  A completion counts only from the worker (and, since a restart
    //  releases its steps, the incarnation) that holds the step. A step
    //  taken back from a worker declared failed, a step never handed out,
    //  or one handed to another worker is not its to complete: if it was
    //  trained at all, the servers' ledgers make the holder's push of it a
    //  duplicate, and the holder's report completes it.
    if (ps_schedule_holder (host->schedule, step) != index) {
        if (!ps_schedule_is_done (host->schedule, step))
            s_refuse_report (self, peer, index, step);
        return;
    }
    if (ps_schedule_complete (host->schedule, step) != 0)
        return;       //  a duplicate, or a step out of range
    self->streak [index] = 0;
    ps_step_report_t stats = {
        .count = report->count,
        .correct = report->correct,
        .duplicates = report->duplicates,
        .loss = report->loss,
        .compute_ms = report->compute_ms,
        .comm_ms = report->comm_ms,
    };
    host->completed (host->loop, step, peer, &stats);
    if (self->policy && self->policy->completed)
        self->policy->completed (self->arg, index, step);
}

static void
s_reply (ps_mode_ps_t *self, ps_peer_t *peer, uint64_t id, const char *kind, uint64_t step,
         uint64_t epoch, uint64_t batch, uint64_t wait_ms)
{
    self->host->work (self->host->loop, id, kind, step, epoch, batch, wait_ms);
    self->host->send (self->host->loop, peer);
}

//  Take the reports of work_request req from role:index (peer).
static void
s_take_reports (ps_mode_ps_t *self, ps_peer_t *peer, ps_role_t role, int index,
                const ps_proto_work_request_t *req)
{
    for (size_t i = 0; i < req->reports.count; i++) {
        const ps_proto_report_t *report = &req->reports.items [i];
        bool done = strcmp (report->status, "done") == 0;
        if (strcmp (report->kind, "eval") == 0)
            s_on_eval_report (self, role, index, report, done);
        else
        if (role == PS_ROLE_WORKER && strcmp (report->kind, "train") == 0)
            s_on_train_report (self, peer, index, report, done);
    }
}

//  Whether worker index holds a step in flight.
static bool
s_busy (ps_mode_ps_t *self, int index)
{
    return ps_schedule_worker_in_flight (self->host->schedule, index) > 0;
}

//  Whether the evaluator the cluster lists has yet to register, and is
//  still worth waiting for: within the registration timeout of the run's
//  start, and while training has steps left. A launcher starts it after
//  the workers, so without the wait the first evaluations would take a
//  worker off training. While it is waited for, a newer evaluation
//  replaces the one held (ps_evalq.h), so one that never comes costs the
//  evaluations of that time, not the run's final one; one whose launcher
//  gave up restarting it is not waited for. (The roster has a place for
//  evaluator:0 whenever the cluster lists one.)
static bool
s_evaluator_coming (ps_mode_ps_t *self)
{
    ps_mode_host_t *host = self->host;
    if (host->cfg->nevaluators < 1)
        return false;
    const ps_peer_t *evaluator = ps_roster_peer (host->roster, PS_ROLE_EVALUATOR, 0);
    if (evaluator->known || evaluator->abandoned)
        return false;
    bool coming = ps_clock_ms () - ps_metrics_start_ms (host->report)
                  < host->job->register_timeout_ms
                  && ps_schedule_done_count (host->schedule)
                     + ps_schedule_in_flight (host->schedule) < host->total;
    if (coming && !self->said_evaluator_coming) {
        ps_metrics_tty_clear (host->report);
        ps_info ("evaluations wait for evaluator:0, which the cluster lists, to register "
                 "(at most %d ms from the start, while steps are left to train)",
                 host->job->register_timeout_ms);
        self->said_evaluator_coming = true;
    }
    return coming;
}

//  Answer request id of role:index, if it needs no training step: "stop"
//  when the run is stopping, an evaluation when one is due and role:index
//  should have it (want: the task asks for work). Returns true when it
//  answered.
static bool
s_answer_other (ps_mode_ps_t *self, ps_peer_t *peer, ps_role_t role, int index, uint64_t id,
                bool want)
{
    ps_mode_host_t *host = self->host;
    if (host->state == PS_RUN_STOPPING) {
        peer->stopped = true;
        s_reply (self, peer, id, "stop", 0, 0, 0, 0);
        return true;
    }
    //  Evaluation goes to the evaluator when one is alive or about to
    //  register, else to the first worker that asks (for a policy that
    //  says so, the first that holds no step in flight). An evaluator in
    //  the cores' idle time evaluates only while steps are left: then the
    //  workers do, so that the run's end never waits on idle CPU. The
    //  final evaluation it holds is taken back, as is an older one once
    //  the final one waits (which supersedes it); its late result is
    //  ignored. An older one alone is left to it: handed to a worker now,
    //  it would read the final parameters under its older step.
    bool idle_over = host->cfg->idle_evaluator && ps_schedule_finished (host->schedule);
    bool may_eval = idle_over ? role == PS_ROLE_WORKER
                    : role == PS_ROLE_EVALUATOR
                      || (ps_roster_alive (host->roster, PS_ROLE_EVALUATOR) == 0
                          && !(self->policy && self->policy->eval_idle && s_busy (self, index)));
    const ps_eval_t *held = ps_evalq_busy (host->evalq);
    if (want && may_eval && idle_over && held && held->role == PS_ROLE_EVALUATOR
    &&  (ps_evalq_pending (host->evalq, NULL, NULL)
         || held->step == ps_schedule_done_count (host->schedule)))
        ps_evalq_requeue (host->evalq);
    if (want && may_eval && !ps_evalq_busy (host->evalq) && host->state != PS_RUN_STARTING
    &&  ps_evalq_pending (host->evalq, NULL, NULL)
    &&  (role == PS_ROLE_EVALUATOR || !s_evaluator_coming (self))) {
        const ps_eval_t *eval = ps_evalq_take (host->evalq, role, index, host->generation,
                                               ps_clock_ms ());
        if (eval) {
            s_reply (self, peer, id, "eval", eval->step, eval->epoch, 0, 0);
            return true;
        }
    }
    return false;
}

//  Answer worker index's request id with its next step. Returns true when
//  it did; false, having sent nothing, when the schedule has no step to
//  hand out now.
static bool
s_hand_out (ps_mode_ps_t *self, ps_peer_t *peer, int index, uint64_t id)
{
    ps_mode_host_t *host = self->host;
    uint64_t step, epoch, batch;
    if (ps_schedule_next (host->schedule, index, &step) != 0)
        return false;
    ps_schedule_locate (host->schedule, step, &epoch, &batch);
    s_follow_lr (self, step);
    ps_proto_work_t *work = host->work (host->loop, id, "train", step, epoch, batch, 0);
    if (self->policy && self->policy->handed)
        self->policy->handed (self->arg, index, step, work);
    host->send (host->loop, peer);
    return true;
}

//  Answer request id "wait": ask again after a short while.
static void
s_wait (ps_mode_ps_t *self, ps_peer_t *peer, uint64_t id)
{
    s_reply (self, peer, id, "wait", 0, 0, 0, S_WAIT_MS);
}

//  Answer request id of role:index (want: it asks for work): stop, an
//  evaluation, a step when the run dispatches and the policy lets the
//  worker have one, else "wait". Returns false, having sent nothing, when
//  the policy holds the request.
static bool
s_answer (ps_mode_ps_t *self, ps_peer_t *peer, ps_role_t role, int index, uint64_t id,
          bool want)
{
    ps_mode_host_t *host = self->host;
    if (s_answer_other (self, peer, role, index, id, want))
        return true;
    if (want && role == PS_ROLE_WORKER && host->state == PS_RUN_RUNNING && !self->recovering) {
        //  A worker whose last steps failed waits out its backoff first.
        double backoff = self->not_before_ms [index] - ps_clock_ms ();
        if (backoff > 0) {
            s_reply (self, peer, id, "wait", 0, 0, 0, (uint64_t) ceil (backoff));
            return true;
        }
        //  A stop signal pauses dispatch for good, as a checkpoint does
        //  for a while (sync's open round still runs to its end).
        bool paused = ps_ckpt_ctl_state (host->ckpt) != PS_CKPT_IDLE || host->stop_asked;
        bool may = self->policy && self->policy->may_hand
                   ? self->policy->may_hand (self->arg, index, paused) : !paused;
        if (may) {
            if (s_hand_out (self, peer, index, id))
                return true;
        }
        else
        if (self->policy && self->policy->hold && !paused && !s_busy (self, index))
            return false;
    }
    s_wait (self, peer, id);
    return true;
}

//  Tell the policy when worker index starts or stops evaluating.
static void
s_note_eval (ps_mode_ps_t *self, int index)
{
    const ps_eval_t *busy = ps_evalq_busy (self->host->evalq);
    bool evaluating = busy && busy->role == PS_ROLE_WORKER && busy->index == index;
    if (evaluating == self->evaluating [index])
        return;
    self->evaluating [index] = evaluating;
    if (self->policy && self->policy->evaluating)
        self->policy->evaluating (self->arg, index, evaluating);
}

//  Worker index failed or registered again: the request it had held is
//  not one it waits for, and the policy counts it back from any
//  evaluation (a result that comes yet is taken as ever).
static void
s_forget (ps_mode_ps_t *self, int index)
{
    self->holds [index].held = false;
    self->streak [index] = 0;
    self->not_before_ms [index] = 0;
    if (self->evaluating [index] && self->policy && self->policy->evaluating)
        self->policy->evaluating (self->arg, index, false);
    self->evaluating [index] = false;
}

//  Serve the held requests the policy lets go now (a completion moved
//  the slowest worker on, or a worker left), and answer "wait" to those
//  held long, so that their workers do not take them for lost.
static void
s_serve_held (ps_mode_ps_t *self, double now)
{
    for (int w = 0; w < self->nworkers; w++) {
        s_hold_t *hold = &self->holds [w];
        if (!hold->held)
            continue;
        ps_peer_t *peer = ps_roster_peer (self->host->roster, PS_ROLE_WORKER, w);
        if (s_answer (self, peer, PS_ROLE_WORKER, w, hold->id, true)) {
            hold->held = false;
            s_note_eval (self, w);
        }
        else
        if (now - hold->since_ms > PS_MODE_HOLD_MS) {
            s_wait (self, peer, hold->id);
            hold->held = false;
        }
    }
}

void
ps_mode_ps_request (void *self_, ps_peer_t *peer, ps_role_t role, int index, uint64_t id,
                    const ps_proto_work_request_t *req)
{
    ps_mode_ps_t *self = self_;
    s_take_reports (self, peer, role, index, req);
    bool want = req->want > 0;
    //  A task asks for work once its evaluation is done and reported (its
    //  report was taken above): one whose evaluation the queue still holds
    //  never had the answer that handed it over (a registration of its
    //  link swallowed it), so the evaluation goes to the next that asks.
    const ps_eval_t *busy = ps_evalq_busy (self->host->evalq);
    if (want && busy && busy->role == role && busy->index == index)
        ps_evalq_lost (self->host->evalq, role, index);
    if (role != PS_ROLE_WORKER) {
        s_answer (self, peer, role, index, id, want);
        return;
    }
    //  A worker asks again only when it gave up on its last request: a
    //  request held still is one it no longer waits for. It is back from
    //  any evaluation before it is answered, and may be evaluating once
    //  answered.
    s_hold_t *hold = &self->holds [index];
    hold->held = false;
    s_note_eval (self, index);
    if (!s_answer (self, peer, role, index, id, want))
        *hold = (s_hold_t) { .held = true, .id = id, .since_ms = ps_clock_ms () };
    s_note_eval (self, index);
}

//  A worker's registration: a new process, or the same one again, holds
//  no request of before.
void
ps_mode_ps_joined (void *self_, ps_role_t role, int index, bool fresh)
{
    (void) fresh;
    ps_mode_ps_t *self = self_;
    if (role != PS_ROLE_WORKER)
        return;
    s_forget (self, index);
    if (self->policy && self->policy->joined)
        self->policy->joined (self->arg, index);
}

//  A worker declared failed was heard again.
void
ps_mode_ps_rejoined (void *self_, ps_role_t role, int index)
{
    ps_mode_ps_t *self = self_;
    if (role == PS_ROLE_WORKER && self->policy && self->policy->joined)
        self->policy->joined (self->arg, index);
}

size_t
ps_mode_ps_task_failed (void *self_, ps_role_t role, int index)
{
    ps_mode_ps_t *self = self_;
    if (role != PS_ROLE_WORKER)
        return 0;
    s_forget (self, index);
    size_t released = ps_schedule_release_worker (self->host->schedule, index);
    if (self->policy && self->policy->left)
        self->policy->left (self->arg, index);
    return released;
}

void
ps_mode_ps_server_failed (void *self_, int index, const char *reason)
{
    ps_mode_ps_t *self = self_;
    ps_mode_host_t *host = self->host;
    ps_metrics_tty_clear (host->report);
    ps_warn ("ps:%d failed (%s)%s", index, reason,
             self->recovering ? "" : "; pausing to restore every server from the newest "
             "checkpoint");
    ps_metrics_event (host->report, "server_failed",
                      json_pack ("{s:i, s:s}", "task", index, "reason", reason));
    if (!ps_ckpt_ctl_enabled (host->ckpt)) {
        ps_mode_fail (host, PS_EIO, "ps:%d failed and the job has no checkpoint directory to "
                      "recover from (set checkpoint.dir)", index);
        return;
    }
    if (!self->recovering) {
        //  A checkpoint drained for is impossible now: the restore makes
        //  the cut.
        ps_ckpt_ctl_cancel (host->ckpt);
        self->recovering = true;
        self->recover_ms = ps_clock_ms ();
        self->recover_log_ms = 0;
    }
}

//  Paused for a failed server: once every server is back and no step is
//  in flight, restore them all.
static void
s_recover (ps_mode_ps_t *self, double now)
{
    ps_mode_host_t *host = self->host;
    int alive = ps_roster_alive (host->roster, PS_ROLE_PS);
    int servers = ps_roster_count (host->roster, PS_ROLE_PS);
    size_t in_flight = ps_schedule_in_flight (host->schedule);
    if (alive == servers && in_flight == 0 && now >= self->recover_retry_ms) {
        int rc = s_restore (self, "recovering from a server failure");
        if (rc == 0) {
            host->recoveries++;
            self->recovering = false;
        }
        else
        if (rc == PS_ENOTFOUND)
            ps_mode_fail (host, PS_ENOTFOUND, "a server failed and \"%s\" holds no valid "
                          "checkpoint to recover from", host->job->checkpoint_dir);
        else
            self->recover_retry_ms = now + 1000;
        return;
    }
    if (now - self->recover_ms > host->job->register_timeout_ms) {
        ps_mode_fail (host, PS_ETIMEDOUT, "%s", "a failed server did not come back within "
                      "the registration timeout");
        return;
    }
    if (now - self->recover_log_ms >= 2000) {
        ps_metrics_tty_clear (host->report);
        ps_info ("recovering: %d/%d servers alive, %zu step%s in flight", alive, servers,
                 in_flight, in_flight == 1 ? "" : "s");
        self->recover_log_ms = now;
    }
}

static void
s_advance (ps_mode_ps_t *self, double now)
{
    ps_mode_host_t *host = self->host;
    if (self->recovering) {
        s_recover (self, now);
        return;
    }
    if (ps_ckpt_ctl_state (host->ckpt) == PS_CKPT_IDLE) {
        if (ps_schedule_finished (host->schedule)) {
            host->finish (host->loop, now);
            return;
        }
        if (!ps_ckpt_ctl_due (host->ckpt, now))
            return;
        ps_ckpt_ctl_pause (host->ckpt, now);
    }
    //  The checkpoint is taken once the steps in flight are done (and, for
    //  a policy, what it drains).
    if (ps_schedule_in_flight (host->schedule) == 0
    &&  (!self->policy || !self->policy->drained || self->policy->drained (self->arg)))
        s_take_checkpoint (self);
}

void
ps_mode_ps_advance (void *self_, double now)
{
    ps_mode_ps_t *self = self_;
    s_advance (self, now);
    if (!self->host->failed)
        s_serve_held (self, now);
}

int
ps_mode_ps_final_checkpoint (void *self_, double now)
{
    (void) now;
    return s_take_checkpoint (self_);
}

void
ps_mode_ps_report (void *self_, json_t *record, json_t *mismatches, uint64_t done)
{
    (void) mismatches, (void) done;
    ps_mode_ps_t *self = self_;
    if (self->policy && self->policy->report)
        self->policy->report (self->arg, record);
}

//  The done record is written: the held requests are answered "stop".
void
ps_mode_ps_stop (void *self_)
{
    s_serve_held (self_, ps_clock_ms ());
}
