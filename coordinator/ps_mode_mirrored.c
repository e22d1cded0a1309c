//  The mirrored mode (see ps_mode_mirrored.h).

#include "ps_mode_mirrored.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ps_checkpoint.h"
#include "ps_clock.h"
#include "ps_log.h"
#include "ps_snapshot.h"

//  How many ring formations in a row may fail before the run gives up.
#define S_MAX_FORM_FAILURES 8

//  What the ring is doing. Every member holds work of the phase until it
//  reports; then the coordinator decides the next phase.
typedef enum {
    S_IDLE,                     //  every member's request is held, nothing in hand
    S_FORM,                     //  joining a ring (and taking over the root's replica)
    S_STEP,                     //  one synchronous global step
    S_EVAL,                     //  each member evaluates its shard of the test set
    S_SAVE,                     //  the first member writes the replica for a checkpoint
} s_phase_t;

//  A worker as the ring knows it.
typedef struct {
    bool held;                  //  its work_request waits for the ring to go on
    uint64_t held_id;
    double held_ms;
    bool busy;                  //  holds work of the current phase
    bool ok;                    //  its part of the current phase succeeded
    bool in_ring;               //  a member of the current ring
    bool current;               //  its replica is the run's, at `committed` updates
    uint64_t updates;           //  its replica's update count, as last reported
    uint64_t checksum;          //  of its replica, at the last evaluation
    uint64_t batch;             //  its batch in the global step in hand (0: none)
    ps_step_report_t stats;     //  that batch's report, counted once the step commits
    uint64_t recorded, duplicates;  //  its replica's ledger count and refused updates
} s_member_t;

typedef struct {
    ps_mode_host_t *host;
    int nworkers;
    s_member_t *members;        //  one per worker task
    s_phase_t phase;
    bool need_ring;             //  the membership changed: form the ring again
    int ring_n;
    int *ring;                  //  the worker index of each rank
    const char **ring_members;  //  a "ring" order's members and tasks, in rank order
    char **ring_sets;           //  the members' endpoint sets made for it (ps_host.h)
    uint64_t *ring_tasks;
    uint64_t committed;         //  updates every current replica has applied
    uint64_t *g_steps;          //  the batches of the global step in hand
    int *g_owner;               //  and the worker that has each
    int g_n;
    bool g_active;
    bool load_pending;          //  the next ring's root loads load_dir first
    char load_dir [PS_JOB_PATH_MAX + 64];
    int form_failures;
    uint64_t order;             //  the current phase's number, echoed by its reports
    char save_tmp [PS_JOB_PATH_MAX + 64];
    double ev_loss;             //  the evaluation's sums over the shards
    uint64_t ev_correct, ev_count;
    double ev_abs;              //  a regression model's absolute error, else NaN
    uint64_t replica_checks, replica_mismatches, replica_checksum;
} s_mirror_t;

static void *
s_new (ps_mode_host_t *host, ps_error_t *err)
{
    //  A ring's ids must grow from one formation to the next, also across
    //  a restart of the coordinator (workers that outlive it keep their
    //  rings' ids): its generations count from the wall clock's seconds,
    //  which a restart, taking longer than a second, moves on.
    struct timespec now;
    if (clock_gettime (CLOCK_REALTIME, &now) != 0) {
        ps_error_set (err, PS_EIO, "clock_gettime: %s", strerror (errno));
        return NULL;
    }
    host->generation = (uint64_t) now.tv_sec << 24;
    s_mirror_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->host = host;
    self->nworkers = ps_roster_count (host->roster, PS_ROLE_WORKER);
    int n = self->nworkers + 1;
    self->members = calloc ((size_t) n, sizeof *self->members);
    self->ring = calloc ((size_t) n, sizeof (int));
    self->g_owner = calloc ((size_t) n, sizeof (int));
    self->g_steps = calloc ((size_t) n, sizeof (uint64_t));
    self->ring_members = calloc ((size_t) n, sizeof (const char *));
    self->ring_sets = calloc ((size_t) n, sizeof (char *));
    self->ring_tasks = calloc ((size_t) n, sizeof (uint64_t));
    if (!self->members || !self->ring || !self->g_owner || !self->g_steps
    ||  !self->ring_members || !self->ring_sets || !self->ring_tasks)
        abort ();
    return self;
}

static void
s_free_sets (s_mirror_t *self)
{
    for (int w = 0; w <= self->nworkers; w++) {
        free (self->ring_sets [w]);
        self->ring_sets [w] = NULL;
    }
}

static void
s_destroy (void **self_p)
{
    s_mirror_t *self = *self_p;
    if (!self)
        return;
    free (self->members);
    free (self->ring);
    free (self->g_owner);
    free (self->g_steps);
    free (self->ring_members);
    s_free_sets (self);
    free (self->ring_sets);
    free (self->ring_tasks);
    free (self);
    *self_p = NULL;
}

//  A mirrored run places nothing: every worker holds every variable.
static void
s_plan (void *self_, ps_plan_t *plan)
{
    s_mirror_t *self = self_;
    int nservers = ps_roster_count (self->host->roster, PS_ROLE_PS);
    plan->mirrored = true;
    if (nservers)
        ps_warn ("mirrored mode keeps no variables on servers; the cluster's %d ps task%s "
                 "%s not used", nservers, nservers == 1 ? "" : "s", nservers == 1 ? "is" : "are");
}

static ps_peer_t *
s_peer (s_mirror_t *self, int worker)
{
    return ps_roster_peer (self->host->roster, PS_ROLE_WORKER, worker);
}

//  Start an answer of kind to worker's held request with the base fields
//  of "work" and the phase's order, for the caller to add to; s_send
//  sends it.
static ps_proto_work_t *
s_begin (s_mirror_t *self, int worker, const char *kind, uint64_t step)
{
    ps_mode_host_t *host = self->host;
    uint64_t epoch = 0, batch = 0;
    if (step && strcmp (kind, "train") == 0)
        ps_schedule_locate (host->schedule, step, &epoch, &batch);
    ps_proto_work_t *work = host->work (host->loop, self->members [worker].held_id, kind, step,
                                        epoch, batch, 0);
    work->has_order = true;
    work->order = self->order;
    return work;
}

static void
s_send (s_mirror_t *self, int worker, bool work)
{
    s_member_t *member = &self->members [worker];
    self->host->send (self->host->loop, s_peer (self, worker));
    member->held = false;
    member->busy = work;
    member->ok = false;
}

//  Tell worker to abandon any collective of the current ring or an older one.
static void
s_send_abort (s_mirror_t *self, int worker)
{
    ps_mode_host_t *host = self->host;
    host->message (host->loop, PS_PROTO_ABORT)->abort.generation = host->generation;
    host->send (host->loop, s_peer (self, worker));
}

//  Tell the live members still busy in the current phase to abandon it.
static void
s_abort (s_mirror_t *self)
{
    for (int r = 0; r < self->ring_n; r++) {
        int w = self->ring [r];
        if (s_peer (self, w)->alive && self->members [w].busy)
            s_send_abort (self, w);
    }
}

static void
s_joined (void *self_, ps_role_t role, int index, bool fresh)
{
    s_mirror_t *self = self_;
    //  A new process holds a fresh replica.
    if (role == PS_ROLE_WORKER && fresh) {
        s_member_t *member = &self->members [index];
        member->updates = 0;
        member->held = member->busy = member->current = false;
    }
}

//  A member that was stopped may still wait in a collective of a ring
//  formed without it since: end that at once.
static void
s_rejoined (void *self_, ps_role_t role, int index)
{
    if (role == PS_ROLE_WORKER)
        s_send_abort (self_, index);
}

//  A worker failed: the ring must be formed again. An evaluator has no
//  part in a mirrored run.
static size_t
s_task_failed (void *self_, ps_role_t role, int index)
{
    s_mirror_t *self = self_;
    if (role != PS_ROLE_WORKER)
        return 0;
    s_member_t *member = &self->members [index];
    bool was_member = member->in_ring || member->busy;
    member->held = member->busy = member->ok = false;
    member->in_ring = member->current = false;
    if (was_member) {
        self->need_ring = true;
        s_abort (self);
    }
    return 0;
}

static void
s_stop (void *self_)
{
    s_mirror_t *self = self_;
    for (int w = 0; w < self->nworkers; w++) {
        ps_peer_t *peer = s_peer (self, w);
        if (peer->alive && self->members [w].held) {
            s_begin (self, w, "stop", 0);
            s_send (self, w, false);
            peer->stopped = true;
        }
    }
}

//  Prepare the ring's next formation to load the newest checkpoint (at
//  start, or when no replica of the run survived): rewind the schedule to
//  it. Returns 0, PS_ENOTFOUND, or another code after failing the run.
static int
s_prepare_load (void *self_, const char *why)
{
    s_mirror_t *self = self_;
    ps_mode_host_t *host = self->host;
    char dir [PS_JOB_PATH_MAX + 64];
    json_t *manifest;
    ps_error_t err;
    int rc = ps_ckpt_ctl_open (host->ckpt, dir, self->load_dir, sizeof dir, &manifest, &err);
    if (rc) {
        if (rc != PS_ENOTFOUND)
            ps_mode_fail (host, rc, "%s", err.msg);
        return rc;
    }
    uint64_t before = ps_schedule_done_count (host->schedule);
    rc = ps_ckpt_ctl_rewind (host->ckpt, manifest, ps_clock_ms (), NULL, &err);
    json_decref (manifest);
    if (rc) {
        ps_mode_fail (host, rc, "restoring from %s: %s", dir, err.msg);
        return rc;
    }
    uint64_t after = ps_schedule_done_count (host->schedule);
    self->g_active = false;
    self->load_pending = true;
    self->need_ring = true;
    for (int w = 0; w < self->nworkers; w++)
        self->members [w].current = false;
    ps_evalq_rewind (host->evalq, after);
    ps_metrics_tty_clear (host->report);
    ps_info ("%s: the ring will load %s (step %" PRIu64 "); %" PRIu64 " step%s to train "
             "again", why, dir, after, before > after ? before - after : 0,
             before - after == 1 ? "" : "s");
    ps_metrics_event (host->report, "recovered",
                      json_pack ("{s:s, s:s, s:I, s:I}", "reason", why, "checkpoint", dir,
                                 "step", (json_int_t) after, "steps_lost",
                                 (json_int_t) (before > after ? before - after : 0)));
    return 0;
}

//  The examples in batch `step`: the last batch of an epoch may be short.
static uint64_t
s_batch_examples (s_mirror_t *self, uint64_t step)
{
    ps_mode_host_t *host = self->host;
    uint64_t epoch, batch, size = (uint64_t) host->job->batch_size;
    ps_schedule_locate (host->schedule, step, &epoch, &batch);
    uint64_t first = batch * size;
    return first + size <= host->cfg->train_count ? size : host->cfg->train_count - first;
}

//  A global step cut short by a failure counts when a survivor completed
//  it; otherwise its batches go back to the front of the queue.
static void
s_resolve_step (s_mirror_t *self)
{
    if (!self->g_active)
        return;
    ps_mode_host_t *host = self->host;
    self->g_active = false;
    bool completed = false;
    for (int w = 0; w < self->nworkers; w++) {
        const s_member_t *member = &self->members [w];
        if (s_peer (self, w)->alive && member->current
        &&  member->updates == self->committed + 1)
            completed = true;
    }
    if (completed) {
        self->committed++;
        for (int g = 0; g < self->g_n; g++)
            if (ps_schedule_complete (host->schedule, self->g_steps [g]) == 0)
                host->completed (host->loop, self->g_steps [g], NULL, NULL);
    }
    else
        for (int g = self->g_n - 1; g >= 0; g--)
            ps_schedule_release (host->schedule, self->g_owner [g], self->g_steps [g]);
    //  Only replicas at the committed count are the run's now.
    for (int w = 0; w < self->nworkers; w++)
        if (self->members [w].updates != self->committed)
            self->members [w].current = false;
    ps_metrics_tty_clear (host->report);
    ps_info ("the global step cut short %s (%d batch%s)", completed ? "had completed on a "
             "survivor and counts" : "goes back to the queue", self->g_n,
             self->g_n == 1 ? "" : "es");
}

//  Form a ring of every live worker, in task order. Called when every live
//  worker's request is held.
static void
s_form_ring (s_mirror_t *self)
{
    ps_mode_host_t *host = self->host;
    s_resolve_step (self);
    int n = 0;
    for (int w = 0; w < self->nworkers; w++)
        if (s_peer (self, w)->alive && self->members [w].held)
            self->ring [n++] = w;
    int root = -1;
    bool agree = true;
    if (!self->load_pending) {
        for (int r = 0; r < n; r++) {
            const s_member_t *member = &self->members [self->ring [r]];
            if (member->current && member->updates == self->committed) {
                if (root < 0)
                    root = r;
            }
            else
                agree = false;
        }
        //  Before the first update every replica holds the seed's values.
        if (root < 0 && self->committed == 0)
            for (int r = 0; r < n && root < 0; r++)
                if (self->members [self->ring [r]].updates == 0)
                    root = r;
        if (root < 0) {
            bool keeps = ps_ckpt_ctl_enabled (host->ckpt);
            int rc = keeps ? s_prepare_load (self, "no replica of the run survived")
                           : PS_ENOTFOUND;
            if (rc == PS_ENOTFOUND)
                ps_mode_fail (host, PS_ENOTFOUND, "every replica of the run was lost and %s",
                              keeps ? "the checkpoint directory holds no valid checkpoint"
                              : "the job has no checkpoint directory to resume from (set "
                              "checkpoint.dir)");
            if (rc)
                return;
        }
    }
    if (self->load_pending) {
        root = 0;
        agree = false;
    }
    else
    if (agree)
        root = -1;
    self->ring_n = n;
    host->generation++;
    self->order++;
    self->phase = S_FORM;
    self->need_ring = false;
    for (int w = 0; w < self->nworkers; w++)
        self->members [w].in_ring = false;
    //  A member is given at its address in the cluster spec, followed by
    //  the ipc:// endpoint and host identity it registered, if any, so
    //  that its predecessor on the same host reaches it over ipc://.
    s_free_sets (self);
    for (int m = 0; m < n; m++) {
        const char *tcp = host->cfg->workers [self->ring [m]];
        const char *tail = strchr (s_peer (self, self->ring [m])->endpoint, ',');
        self->ring_members [m] = tcp;
        if (tail && asprintf (&self->ring_sets [m], "%s%s", tcp, tail) >= 0)
            self->ring_members [m] = self->ring_sets [m];
        else
            self->ring_sets [m] = NULL;
        self->ring_tasks [m] = (uint64_t) self->ring [m];
    }
    for (int r = 0; r < n; r++) {
        self->members [self->ring [r]].in_ring = true;
        ps_proto_work_t *work = s_begin (self, self->ring [r], "ring", 0);
        work->has_ring = true;
        work->ring = (ps_proto_ring_spec_t) {
            .rank = (uint64_t) r,
            .members = { (size_t) n, self->ring_members },
            .tasks = { (size_t) n, self->ring_tasks },
            .root = root,
            .load = self->load_pending ? self->load_dir : "",
        };
        s_send (self, self->ring [r], true);
    }
    ps_metrics_tty_clear (host->report);
    ps_info ("forming ring %" PRIx64 " of %d worker%s%s", host->generation, n, n == 1 ? "" : "s",
             self->load_pending ? "; its first member loads the checkpoint"
             : root >= 0 ? "; the others take over the first current replica" : "");
}

//  Hand every member its batch of the next global step.
static void
s_start_step (s_mirror_t *self)
{
    ps_mode_host_t *host = self->host;
    self->g_n = 0;
    uint64_t examples = 0;
    for (int r = 0; r < self->ring_n; r++) {
        int w = self->ring [r];
        uint64_t step = 0;
        if (ps_schedule_next (host->schedule, w, &step) == 0) {
            self->g_steps [self->g_n] = step;
            self->g_owner [self->g_n++] = w;
            examples += s_batch_examples (self, step);
        }
        self->members [w].batch = step;
    }
    if (self->g_n == 0)
        return;
    double lr = ps_lr_at (&host->job->lr_schedule, host->job->optimizer.lr, self->g_steps [0],
                          host->steps_per_epoch, host->total);
    //  The job's rate is for the whole cluster's global batch. A ring that
    //  has shrunk (a member failed) makes smaller global batches, and so
    //  more updates per epoch: the rate scales with the batches in the
    //  step, as Horovod Elastic recommends, so that a run that lost a
    //  member for a while trains as far as one that did not (measured:
    //  without it, a run whose ring ran short for a third of its steps
    //  ended a point above the fault-free run; with it, within 0.2).
    lr *= (double) self->g_n / (double) self->nworkers;
    host->lr = lr;
    self->order++;
    for (int r = 0; r < self->ring_n; r++) {
        int w = self->ring [r];
        ps_proto_work_t *work = s_begin (self, w, "train", self->members [w].batch);
        work->has_steps = work->has_examples = work->has_lr = work->has_update = true;
        work->steps = (ps_proto_uint_array_t) { (size_t) self->g_n, self->g_steps };
        work->examples = examples;
        work->lr = lr;
        work->update = self->committed + 1;
        s_send (self, w, true);
    }
    self->g_active = true;
    self->phase = S_STEP;
}

static void
s_start_eval (s_mirror_t *self)
{
    ps_mode_host_t *host = self->host;
    const ps_eval_t *eval = ps_evalq_take (host->evalq, PS_ROLE_WORKER, 0, host->generation,
                                           ps_clock_ms ());
    self->ev_loss = 0;
    self->ev_correct = self->ev_count = 0;
    self->ev_abs = NAN;
    self->order++;
    for (int r = 0; r < self->ring_n; r++) {
        ps_proto_work_t *work = s_begin (self, self->ring [r], "eval", eval->step);
        work->has_shard = work->has_shards = true;
        work->shard = (uint64_t) r;
        work->shards = (uint64_t) self->ring_n;
        s_send (self, self->ring [r], true);
    }
    self->phase = S_EVAL;
}

//  A checkpoint: the ring's first member writes its replica into the
//  checkpoint's directory; the others wait.
static void
s_start_save (s_mirror_t *self)
{
    ps_mode_host_t *host = self->host;
    uint64_t step;
    ps_error_t err;
    if (ps_ckpt_ctl_begin (host->ckpt, ps_clock_ms (), &step, self->save_tmp,
                           sizeof self->save_tmp, &err))
        return;
    self->order++;
    ps_proto_work_t *work = s_begin (self, self->ring [0], "save", step);
    work->has_dir = true;
    work->dir = self->save_tmp;
    s_send (self, self->ring [0], true);
    self->phase = S_SAVE;
}

//  The replica's files are written: list them as a server would have
//  reported them, then write the manifest.
static void
s_finish_save (s_mirror_t *self, bool ok)
{
    ps_mode_host_t *host = self->host;
    ps_error_t err = { 0 };
    int rc = ok ? 0 : ps_error_set (&err, PS_EIO, "worker:%d could not write its replica "
                                    "(see its log)", self->ring [0]);
    const ps_plan_t *plan = host->plan;
    ps_snap_file_t *files = calloc ((size_t) plan->nvars + 1, sizeof *files);
    if (!files)
        abort ();
    size_t nfiles = 0;
    for (int v = 0; v < plan->nvars && rc == 0; v++) {
        ps_snap_file_t *file = &files [nfiles++];
        snprintf (file->var, sizeof file->var, "%s", plan->vars [v].var);
        char path [PS_JOB_PATH_MAX + 64 + sizeof file->file];
        rc = ps_snapshot_filename (file->var, 0, file->file, sizeof file->file);
        if (rc)
            ps_error_set (&err, rc, "no file name for variable %s", file->var);
        else {
            snprintf (path, sizeof path, "%s/%s", self->save_tmp, file->file);
            rc = ps_snapshot_summary (path, &file->bytes, &file->crc, &err);
        }
        file->version = self->committed;
    }
    //  Written by the ring's first member; "updates" is the replicas'
    //  update count, which a mirrored resume goes on from.
    ps_ckpt_cut_t cut = {
        .generation = host->generation, .lr = host->lr,
        .extra = json_pack ("{s:I, s:{s:s, s:i}}", "updates", (json_int_t) self->committed,
                            "writer", "role", "worker", "task", self->ring [0])
    };
    ps_ckpt_ctl_commit (host->ckpt, &cut, files, rc ? 0 : nfiles, rc, &err, ps_clock_ms ());
}

//  A member's report of the current phase.
static void
s_on_report (s_mirror_t *self, int worker, const ps_proto_report_t *report)
{
    ps_mode_host_t *host = self->host;
    s_member_t *member = &self->members [worker];
    //  Reports of an older ring (repeats, or work of a ring since
    //  replaced) say nothing about the current phase.
    if (!member->busy || !report->has_order || report->order != self->order
    ||  report->generation != host->generation)
        return;
    const char *expect [] = { "", "ring", "train", "eval", "save" };
    if (strcmp (report->kind, expect [self->phase]) != 0)
        return;
    member->busy = false;
    member->ok = strcmp (report->status, "done") == 0;
    if (report->has_update)
        member->updates = report->update;
    //  A global step whose summed gradient is not finite: every member
    //  refused it, and computing it again would give the same sum.
    const char *text = report->has_error ? report->error : "";
    if (!member->ok && strncmp (text, "nonfinite", 9) == 0 && self->phase == S_STEP) {
        host->nonfinite_failures++;
        ps_mode_fail (host, PS_ENONFINITE, "mirrored mode: the summed gradient of update %"
                      PRIu64 " was refused by every replica (%s); retrying would give the same "
                      "sum. Lower the learning rate, clip the gradients (optimizer.clip_norm), "
                      "or check the data", self->committed + 1, text);
        return;
    }
    //  The others wait for this member in the collective: end it for them
    //  now rather than at their ring timeout.
    if (!member->ok && (self->phase == S_FORM || self->phase == S_STEP))
        s_abort (self);
    member->recorded = report->applied;
    member->duplicates = report->duplicates;
    if (self->phase == S_STEP)
        member->stats = (ps_step_report_t) {
            .loss = report->loss,
            .correct = report->correct,
            .count = report->count,
            .compute_ms = report->compute_ms,
            .comm_ms = report->comm_ms,
        };
    else
    if (self->phase == S_EVAL && member->ok) {
        member->checksum = report->has_checksum ? report->checksum : 0;
        self->ev_loss += report->loss;
        self->ev_correct += report->correct;
        if (report->has_abs_error)
            self->ev_abs = (isnan (self->ev_abs) ? 0 : self->ev_abs) + report->abs_error;
        self->ev_count += report->count;
    }
}

//  The ring formation ended, all: every member joined.
static void
s_end_form (s_mirror_t *self, bool all)
{
    ps_mode_host_t *host = self->host;
    //  After a load the root's count is the run's; otherwise every member
    //  must be at the committed count.
    uint64_t target = self->load_pending ? self->members [self->ring [0]].updates
                                         : self->committed;
    for (int r = 0; r < self->ring_n && all; r++)
        if (self->members [self->ring [r]].updates != target)
            all = false;
    if (!all) {
        //  A failed join leaves a replica as it was (or the root's whole):
        //  those still at the committed count stay the run's.
        for (int r = 0; r < self->ring_n && !self->load_pending; r++) {
            s_member_t *member = &self->members [self->ring [r]];
            if (member->updates != self->committed)
                member->current = false;
        }
        self->need_ring = true;
        if (++self->form_failures >= S_MAX_FORM_FAILURES)
            ps_mode_fail (host, PS_EIO, "the ring could not be formed %d times in a row (see "
                          "the workers' logs)", self->form_failures);
        return;
    }
    self->committed = target;
    self->load_pending = false;
    self->form_failures = 0;
    json_t *members = json_array ();
    for (int r = 0; r < self->ring_n; r++) {
        self->members [self->ring [r]].current = true;
        json_array_append_new (members, json_integer (self->ring [r]));
    }
    ps_metrics_tty_clear (host->report);
    ps_info ("ring %" PRIx64 " formed: %d worker%s, replicas at update %" PRIu64,
             host->generation, self->ring_n, self->ring_n == 1 ? "" : "s", target);
    ps_metrics_event (host->report, "ring",
                      json_pack ("{s:I, s:o, s:I}", "generation", (json_int_t) host->generation,
                                 "workers", members, "updates", (json_int_t) target));
}

//  The global step ended, all: every member reported it done.
static void
s_end_step (s_mirror_t *self, bool all)
{
    ps_mode_host_t *host = self->host;
    for (int r = 0; r < self->ring_n && all; r++)
        if (self->members [self->ring [r]].updates != self->committed + 1)
            all = false;
    if (!all) {
        self->need_ring = true;
        return;
    }
    self->g_active = false;
    self->committed++;
    for (int r = 0; r < self->ring_n; r++) {
        int w = self->ring [r];
        s_member_t *member = &self->members [w];
        if (member->batch && ps_schedule_complete (host->schedule, member->batch) == 0)
            host->completed (host->loop, member->batch, s_peer (self, w), &member->stats);
    }
}

//  The evaluation ended, all: every member evaluated its shard.
static void
s_end_eval (s_mirror_t *self, bool all)
{
    ps_mode_host_t *host = self->host;
    if (!all) {
        ps_evalq_requeue (host->evalq);
        self->need_ring = true;
        return;
    }
    uint64_t first = self->members [self->ring [0]].checksum;
    bool equal = true;
    for (int r = 1; r < self->ring_n; r++)
        if (self->members [self->ring [r]].checksum != first)
            equal = false;
    self->replica_checks++;
    self->replica_checksum = first;
    if (!equal) {
        //  Never expected; repaired by forming the ring again, the members
        //  that differ from the first taking over its replica.
        self->replica_mismatches++;
        for (int r = 1; r < self->ring_n; r++) {
            s_member_t *member = &self->members [self->ring [r]];
            if (member->checksum != first)
                member->current = false;
        }
        self->need_ring = true;
        ps_metrics_tty_clear (host->report);
        ps_error ("the replicas differ after %" PRIu64 " updates (checksums of worker:%d and "
                  "another member differ); forming the ring again", self->committed,
                  self->ring [0]);
    }
    json_t *sums = json_array ();
    for (int r = 0; r < self->ring_n; r++) {
        char hex [24];
        snprintf (hex, sizeof hex, "%016" PRIx64, self->members [self->ring [r]].checksum);
        json_array_append_new (sums, json_string (hex));
    }
    const ps_eval_t *eval = ps_evalq_busy (host->evalq);
    ps_metrics_event (host->report, "replicas",
                      json_pack ("{s:I, s:I, s:b, s:o}", "step",
                                 (json_int_t) (eval ? eval->step : 0), "updates",
                                 (json_int_t) self->committed, "equal", equal,
                                 "checksums", sums));
    //  The ring trains no step while it evaluates: its parameters are the
    //  hand-out's.
    ps_evalq_result (host->evalq, self->ev_loss, self->ev_correct, self->ev_count, NAN,
                     self->ev_abs, "ring", self->ring_n, NAN, ps_clock_ms ());
}

//  Every live member has reported the current phase: act on the outcome.
static void
s_end_phase (s_mirror_t *self)
{
    bool all = true;
    for (int r = 0; r < self->ring_n; r++) {
        int w = self->ring [r];
        if (!s_peer (self, w)->alive || !self->members [w].ok)
            all = false;
    }
    s_phase_t phase = self->phase;
    self->phase = S_IDLE;
    int first = self->ring [0];
    switch (phase) {
        case S_IDLE:
            return;
        case S_FORM:
            s_end_form (self, all);
            return;
        case S_STEP:
            s_end_step (self, all);
            return;
        case S_EVAL:
            s_end_eval (self, all);
            return;
        case S_SAVE:
            s_finish_save (self, self->members [first].ok);
            if (!s_peer (self, first)->alive)
                self->need_ring = true;
            return;
    }
}

//  A work_request from a worker: take its reports and hold it until the
//  ring goes on. An evaluator has no part in a mirrored run: the ring
//  evaluates, each member a shard.
static void
s_request (void *self_, ps_peer_t *peer, ps_role_t role, int index, uint64_t id,
           const ps_proto_work_request_t *req)
{
    s_mirror_t *self = self_;
    ps_mode_host_t *host = self->host;
    if (role != PS_ROLE_WORKER) {
        if (!peer->stopped)
            ps_info ("evaluator:%d is not used in mirrored mode; telling it to stop", index);
        peer->stopped = true;
        host->work (host->loop, id, "stop", 0, 0, 0, 0);
        host->send (host->loop, peer);
        return;
    }
    s_member_t *member = &self->members [index];
    for (size_t i = 0; i < req->reports.count; i++)
        s_on_report (self, index, &req->reports.items [i]);
    //  A worker asks only when it has nothing in hand: still busy here, it
    //  never got its order (lost on a connection that dropped, or given up
    //  on), and the phase goes on without it.
    if (member->busy) {
        member->busy = member->ok = false;
        if (self->phase == S_FORM || self->phase == S_STEP)
            s_abort (self);
    }
    member->held = true;
    member->held_id = id;
    member->held_ms = ps_clock_ms ();
    bool stopping = host->state == PS_RUN_STOPPING;
    if (stopping || req->want == 0) {
        s_begin (self, index, stopping ? "stop" : "wait", 0);
        s_send (self, index, false);
        peer->stopped = stopping;
    }
}

//  The ring's state machine, run after every burst of messages.
static void
s_advance (void *self_, double now)
{
    s_mirror_t *self = self_;
    ps_mode_host_t *host = self->host;
    //  Requests held long (the ring waits for a worker that is slow to
    //  come, or for a long phase) are answered, so their workers do not
    //  take them for lost.
    for (int w = 0; w < self->nworkers; w++)
        if (s_peer (self, w)->alive && self->members [w].held
        &&  now - self->members [w].held_ms > PS_MODE_HOLD_MS) {
            s_begin (self, w, "wait", 0);
            s_send (self, w, false);
        }
    if (self->phase != S_IDLE) {
        for (int r = 0; r < self->ring_n; r++) {
            int w = self->ring [r];
            if (s_peer (self, w)->alive && self->members [w].busy)
                return;
        }
        s_end_phase (self);
        if (host->failed)
            return;
    }
    int alive = 0, held = 0;
    for (int w = 0; w < self->nworkers; w++) {
        bool live = s_peer (self, w)->alive;
        alive += live;
        held += live && self->members [w].held;
        //  A worker that joins, or comes back, is taken in at a step boundary.
        if (live && self->members [w].held && !self->members [w].in_ring)
            self->need_ring = true;
    }
    bool ready = held > 0;
    for (int r = 0; r < self->ring_n && !self->need_ring; r++)
        if (!self->members [self->ring [r]].held)
            ready = false;
    if (self->need_ring && held < alive)
        ready = false;
    if (!ready)
        return;
    //  After a stop signal the ring starts no global step: the checkpoint
    //  it asked for (taken here once due) is where the run stops.
    if (self->need_ring)
        s_form_ring (self);
    else
    if (ps_ckpt_ctl_due (host->ckpt, now))
        s_start_save (self);
    else
    if (ps_evalq_pending (host->evalq, NULL, NULL))
        s_start_eval (self);
    else
    if (ps_schedule_finished (host->schedule))
        host->finish (host->loop, now);
    else
    if (!host->stop_asked)
        s_start_step (self);
}

//  The last checkpoint: the ring's first member writes it when the ring
//  is next ready; the loop's finish runs again when it has.
static int
s_final_checkpoint (void *self_, double now)
{
    (void) now;
    s_start_save (self_);
    return 1;
}

//  Set up a mirrored run once the workers are there: from the newest
//  checkpoint when there is one, else from the seed's initial values.
static int
s_setup (void *self_)
{
    s_mirror_t *self = self_;
    ps_mode_host_t *host = self->host;
    int rc = ps_mode_resume (host, s_prepare_load, self);
    if (rc < 0 && rc != PS_ENOTFOUND)
        return -1;
    if (rc == PS_ENOTFOUND) {
        self->committed = 0;
        //  A checkpoint of the initial state, so that losing every worker
        //  before the first interval can be recovered too.
        if (ps_ckpt_ctl_enabled (host->ckpt))
            ps_ckpt_ctl_force (host->ckpt);
    }
    self->need_ring = true;
    host->lr = host->job->optimizer.lr;
    return 0;
}

//  What the replicas hold: every member's ledger should record each batch
//  once (recorded = steps), none refused as a repeat, and every
//  evaluation found the replicas bitwise equal.
static void
s_report (void *self_, json_t *record, json_t *mismatches, uint64_t done)
{
    s_mirror_t *self = self_;
    json_t *replicas = json_array ();
    for (int r = 0; r < self->ring_n; r++) {
        int w = self->ring [r];
        const s_member_t *member = &self->members [w];
        json_array_append_new (replicas,
            json_pack ("{s:i, s:I, s:I, s:I}", "task", w,
                       "updates", (json_int_t) member->updates,
                       "recorded", (json_int_t) member->recorded,
                       "duplicates", (json_int_t) member->duplicates));
        if (member->recorded != done)
            json_array_append_new (mismatches,
                json_pack ("{s:s, s:i, s:I, s:I}", "role", "worker", "task", w,
                           "recorded", (json_int_t) member->recorded,
                           "expected", (json_int_t) done));
    }
    char hex [24];
    snprintf (hex, sizeof hex, "%016" PRIx64, self->replica_checksum);
    json_object_set_new (record, "replicas", replicas);
    json_object_set_new (record, "updates", json_integer ((json_int_t) self->committed));
    json_object_set_new (record, "replica_checks",
                         json_integer ((json_int_t) self->replica_checks));
    json_object_set_new (record, "replica_mismatches",
                         json_integer ((json_int_t) self->replica_mismatches));
    json_object_set_new (record, "replica_checksum", json_string (hex));
}

const ps_mode_ops_t ps_mode_mirrored = {
    .name = "mirrored",
    .holders = PS_ROLE_WORKER,
    .start_partial = true,
    .min_servers = 0,
    .local_servers = 0,
    .no_servers = "mirrored mode uses no servers (every worker holds the variables)",
    .no_evaluator = "in mirrored mode the workers evaluate, each a shard of the test set",
    .new = s_new,
    .destroy = s_destroy,
    .plan = s_plan,
    .setup = s_setup,
    .joined = s_joined,
    .rejoined = s_rejoined,
    .request = s_request,
    .task_failed = s_task_failed,
    .advance = s_advance,
    .final_checkpoint = s_final_checkpoint,
    .report = s_report,
    .stop = s_stop,
};
