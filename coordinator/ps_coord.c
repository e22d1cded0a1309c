//  The coordinator's run: registration, placement, dispatch, heartbeats,
//  checkpoints, recovery, evaluation and reporting (see ps_coord.h).
//
//  Everything happens on one thread, so the state needs no locks. The
//  calls that block are the client's requests to the servers (create,
//  set_optimizer, fence, snapshot, restore, stats, shutdown), each bounded
//  by the heartbeat timeout and made only while every server is thought
//  alive, and a checkpoint's disk work (verifying one reads its files in
//  full). The heartbeats of the other processes queue in the meantime and
//  are read as soon as the call returns, so no one is declared failed for
//  it.

#include "ps_coord.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <zmq.h>

#include "ps_checkpoint.h"
#include "ps_client.h"
#include "ps_clock.h"
#include "ps_log.h"
#include "ps_model.h"
#include "ps_msg.h"
#include "ps_partitioner.h"
#include "ps_plan.h"
#include "ps_reshard.h"
#include "ps_schedule.h"
#include "ps_schema.h"
#include "ps_snapshot.h"

#define S_MAX_ROUTING_ID 128
//  How long a waiting worker sleeps before it asks again.
#define S_WAIT_MS        20
//  How often the terminal progress line is redrawn.
#define S_TTY_MS         500
//  Mirrored mode: how long a worker's request is held at most before it is
//  answered "wait" (a worker asks again after 10 s without an answer), and
//  how many ring formations in a row may fail before the run gives up.
#define S_HOLD_MS        4000
#define S_MAX_FORM_FAILURES 8
//  A failed checkpoint (a full disk, say) is tried again after this long;
//  the final one, which holds the run's result, up to this many times in
//  a row (about a minute) before the run fails.
#define S_CKPT_RETRY_MS  2000
#define S_FINAL_CKPT_TRIES 30
//  How long the last replies may take to leave when the coordinator exits.
#define S_CLOSE_LINGER_MS 500
//  Steps whose non-finite gradients are counted at once, and how far a
//  window's training loss may rise above the lowest before the run is
//  said to diverge.
#define S_NONFINITE_STEPS 16
#define S_DIVERGE_FACTOR  4.0
#define S_DIVERGE_STEPS   20

typedef enum {
    S_WAIT_SERVERS,             //  not every server has registered yet
    S_RUNNING,                  //  handing out steps
    S_CHECKPOINT,               //  paused: draining steps in flight to snapshot
    S_RECOVER,                  //  paused: a server failed; waiting to restore
    S_STOPPING,                 //  training done; telling everyone to stop
} s_state_t;

typedef enum { S_PS, S_WORKER, S_EVALUATOR, S_ROLES } s_role_t;

//  Mirrored mode: what the ring is doing. Every member holds work of the
//  phase until it reports; then the coordinator decides the next phase.
typedef enum {
    M_IDLE,                     //  every member's request is held, nothing in hand
    M_FORM,                     //  joining a ring (and taking over the root's replica)
    M_STEP,                     //  one synchronous global step
    M_EVAL,                     //  each member evaluates its shard of the test set
    M_SAVE,                     //  the first member writes the replica for a checkpoint
} m_phase_t;

static const char *s_role_names [S_ROLES] = { "ps", "worker", "evaluator" };

typedef struct {
    bool known;                 //  registered at least once
    bool alive;
    bool stopped;               //  told to stop
    bool silent;                //  declared failed for its silence: it may come back
    uint64_t incarnation;
    char id [S_MAX_ROUTING_ID];
    size_t id_len;
    double last_seen;
    uint64_t pid;
    uint64_t steps;             //  train reports accepted
    //  What this peer asked for and was refused: completions of steps it
    //  did not hold, and registrations of new incarnations while it lived.
    //  Each kind is logged once per incarnation, and counted always.
    uint64_t refused_reports;
    bool refused_report_logged;
    bool refused_register_logged;

    //  Mirrored mode.
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
    double loss;                //  that batch's report, counted once the step commits
    uint64_t correct, count;
    double compute_ms, comm_ms;
    uint64_t recorded, duplicates;  //  its replica's ledger count and refused updates
} s_peer_t;

typedef struct {
    const ps_coord_config_t *cfg;
    const ps_job_t *job;
    ps_error_t *err;
    int rc;                     //  set when the run must end in failure
    bool finished;              //  the loop may end

    void *router;
    ps_msg_t *msg;
    ps_writer_t writer;
    uint64_t incarnation;
    uint64_t next_id;

    s_peer_t *peers [S_ROLES];
    int npeers [S_ROLES];

    const ps_model_t *model;    //  the caller's
    ps_placement_t *placement;
    ps_plan_t plan;
    ps_client_t *client;
    ps_schedule_t *schedule;
    uint64_t steps_per_epoch;
    uint64_t total;
    json_t *layout;             //  the placement, as a checkpoint records it
    json_t *job_json;           //  the job, as a checkpoint records it

    s_state_t state;
    uint64_t generation;        //  unique to this coordinator, + 1 at every restore
    double lr;                  //  the learning rate the servers use now

    //  Evaluation: one waiting (the newest asked for) and one in flight.
    bool eval_pending;
    uint64_t eval_epoch, eval_step;
    bool eval_busy;
    s_role_t eval_role;
    int eval_index;
    uint64_t eval_busy_epoch, eval_busy_step, eval_gen;
    double eval_sent_ms;
    bool have_eval;
    uint64_t last_eval_step;
    double test_loss, test_accuracy;

    //  Checkpoints.
    uint64_t ckpt_done;         //  steps done at the last checkpoint
    double ckpt_ms;             //  when it was taken
    double pause_ms;            //  when dispatch paused for the current one
    double ckpt_retry_ms;       //  no new attempt before this, after a failure
    int checkpoints;

    //  Recovery.
    double recover_ms;
    double recover_log_ms;
    double recover_retry_ms;
    double no_worker_ms;        //  since when no worker has been alive, or 0
    int recoveries;
    int worker_failures;
    uint64_t refused_reports;   //  completions of steps the reporter did not hold
    uint64_t refused_registrations;  //  new incarnations of a live task

    //  Gradients the servers refused as not finite: in all, and per step
    //  for the few steps tried again lately (a step that keeps failing is
    //  retried at once, so it stays in the table until the run stops).
    uint64_t nonfinite_failures;
    struct { uint64_t step; int failures; } nonfinite [S_NONFINITE_STEPS];
    int nonfinite_next;

    //  Divergence: the training loss of the steps done, in windows of
    //  S_DIVERGE_STEPS steps (counted in steps, so what is judged does not
    //  depend on the machine's speed); the lowest window's loss, or the
    //  first step's (the parameters as the run began) when lower; and
    //  whether the run was found diverging (said once).
    double d_loss;
    uint64_t d_count, d_steps;
    double best_loss;
    bool have_best_loss;
    bool diverging;

    //  Progress: the current window and the whole run.
    double open_ms;             //  when the run began: the metrics' time_s counts from here
    double start_ms;
    double window_ms;
    double tty_ms;
    uint64_t w_steps, w_count, w_correct, w_duplicates;
    double w_loss, w_compute_ms, w_comm_ms;
    uint64_t samples;
    double rate;                //  steps per second, smoothed
    bool tty_dirty;
    FILE *metrics;

    double next_heartbeat_ms;
    double wait_log_ms;
    double stop_deadline_ms;

    //  Mirrored mode: the ring, the global step in hand, the state to load.
    bool mirrored;
    m_phase_t phase;
    bool need_ring;             //  the membership changed: form the ring again
    int ring_n;
    int *ring;                  //  the worker index of each rank
    uint64_t committed;         //  updates every current replica has applied
    uint64_t *g_steps;          //  the batches of the global step in hand
    int *g_owner;               //  and the worker that has each
    int g_n;
    bool g_active;
    bool load_pending;          //  the next ring's root loads load_dir first
    char load_dir [PS_JOB_PATH_MAX + 64];
    int form_failures;
    uint64_t order;             //  the current phase's number, echoed by its reports
    int ckpt_failures;          //  checkpoints failed since the last good one
    bool ckpt_force;            //  the first checkpoint is due at once
    char save_tmp [PS_JOB_PATH_MAX + 64];
    uint64_t save_step;
    double save_t0;
    double ev_loss;             //  the evaluation's sums over the shards
    uint64_t ev_correct, ev_count;
    uint64_t replica_checks, replica_mismatches, replica_checksum;
} s_coord_t;

//  ---------------------------------------------------------------------
//  Reporting

static void
s_tty_clear (s_coord_t *self)
{
    if (self->tty_dirty) {
        fputs ("\r\033[K", stderr);
        self->tty_dirty = false;
    }
}

//  Write one JSON line to the metrics file, adding the time since start,
//  and release the object.
static void
s_event (s_coord_t *self, const char *event, json_t *obj)
{
    if (!obj)
        obj = json_object ();
    if (self->metrics) {
        json_t *line = json_object ();
        json_object_set_new (line, "event", json_string (event));
        json_object_set_new (line, "time_s",
                             json_real ((ps_clock_ms () - self->open_ms) / 1e3));
        json_object_update (line, obj);
        if (json_dumpf (line, self->metrics, JSON_COMPACT | JSON_PRESERVE_ORDER) != 0
        ||  fputc ('\n', self->metrics) == EOF || fflush (self->metrics) != 0)
            ps_warn ("cannot write the metrics file: %s", strerror (errno));
        json_decref (line);
    }
    json_decref (obj);
}

static int
s_alive (const s_coord_t *self, s_role_t role)
{
    int n = 0;
    for (int i = 0; i < self->npeers [role]; i++)
        n += self->peers [role][i].alive;
    return n;
}

static void s_fail (s_coord_t *self, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

//  A step done, with its summed training loss over count examples. Every
//  S_DIVERGE_STEPS steps the window's mean loss is judged: a run whose loss
//  is not finite, or has risen far above the lowest (a window's, or the
//  first step's), diverges. Said once; with stop_on_divergence the run
//  fails.
static void
s_track_loss (s_coord_t *self, double loss_sum, uint64_t count)
{
    if (count == 0)
        return;
    if (!self->have_best_loss && isfinite (loss_sum)) {
        self->best_loss = loss_sum / count;
        self->have_best_loss = true;
    }
    self->d_loss += loss_sum;
    self->d_count += count;
    if (++self->d_steps < S_DIVERGE_STEPS)
        return;
    double loss = self->d_loss / self->d_count;
    self->d_loss = 0;
    self->d_count = self->d_steps = 0;
    uint64_t done = ps_schedule_done_count (self->schedule);
    bool diverges = !isfinite (loss)
                 || (self->have_best_loss && loss > S_DIVERGE_FACTOR * self->best_loss);
    if (isfinite (loss) && (!self->have_best_loss || loss < self->best_loss)) {
        self->best_loss = loss;
        self->have_best_loss = true;
    }
    if (!diverges || self->diverging)
        return;
    self->diverging = true;
    s_tty_clear (self);
    ps_warn ("the training loss diverges: %g over the last %d steps, %g at its lowest (step %"
             PRIu64 "); lower the learning rate or clip the gradients%s", loss,
             S_DIVERGE_STEPS, self->best_loss, done, self->job->stop_on_divergence
             ? "; stopping (stop_on_divergence)" : " (stop_on_divergence would stop the run)");
    s_event (self, "diverging",
             json_pack ("{s:I, s:o, s:f}", "step", (json_int_t) done,
                        "loss", isfinite (loss) ? json_real (loss) : json_null (),
                        "lowest_loss", self->best_loss));
    if (self->job->stop_on_divergence)
        s_fail (self, PS_ECANCELED, "the training loss diverged (%g in the window before step %"
                PRIu64 ", %g at its lowest) and the job says stop_on_divergence", loss, done,
                self->best_loss);
}

static void
s_progress (s_coord_t *self, double now)
{
    double window_s = (now - self->window_ms) / 1e3;
    bool log_due = window_s >= self->job->log_seconds;
    bool tty_due = self->cfg->progress_tty && now - self->tty_ms >= S_TTY_MS;
    if (!log_due && !tty_due)
        return;
    uint64_t done = ps_schedule_done_count (self->schedule);
    double samples_s = window_s > 0 ? self->w_count / window_s : 0;
    double steps_s = window_s > 0 ? self->w_steps / window_s : 0;
    if (log_due && window_s > 0)
        self->rate = self->rate > 0 ? 0.5 * self->rate + 0.5 * steps_s : steps_s;
    double rate = self->rate > 0 ? self->rate : steps_s;
    double eta = rate > 0 ? (self->total - done) / rate : -1;
    double loss = self->w_count ? self->w_loss / self->w_count : NAN;
    double acc = self->w_count ? (double) self->w_correct / self->w_count : NAN;
    uint64_t epoch = done < self->total ? done / self->steps_per_epoch + 1
                                        : (self->total - 1) / self->steps_per_epoch + 1;
    uint64_t epochs = (self->total + self->steps_per_epoch - 1) / self->steps_per_epoch;
    char line [256];
    char eta_text [32] = "-";
    if (eta >= 0)
        snprintf (eta_text, sizeof eta_text, "%d:%02d", (int) (eta / 60), (int) fmod (eta, 60));
    char loss_text [32] = "-", acc_text [32] = "-";
    if (self->w_count) {
        snprintf (loss_text, sizeof loss_text, "%.4f", loss);
        snprintf (acc_text, sizeof acc_text, "%.4f", acc);
    }
    snprintf (line, sizeof line, "epoch %" PRIu64 "/%" PRIu64 "  step %" PRIu64 "/%" PRIu64
              "  %.0f samples/s  loss %s  acc %s  ETA %s  workers %d/%d",
              epoch, epochs, done, self->total, samples_s, loss_text, acc_text, eta_text,
              s_alive (self, S_WORKER), self->npeers [S_WORKER]);
    if (tty_due) {
        fprintf (stderr, "\r\033[K%s", line);
        fflush (stderr);
        self->tty_dirty = true;
        self->tty_ms = now;
    }
    if (!log_due)
        return;
    if (!self->cfg->progress_tty && self->w_steps)
        ps_info ("%s", line);
    if (self->w_steps) {
        json_t *obj = json_pack ("{s:I, s:I, s:I, s:f, s:f, s:f, s:I, s:i}",
                                 "epoch", (json_int_t) epoch, "step", (json_int_t) done,
                                 "total", (json_int_t) self->total,
                                 "samples_per_s", samples_s,
                                 "loss", isfinite (loss) ? loss : 0.0,
                                 "accuracy", isfinite (acc) ? acc : 0.0,
                                 "window_steps", (json_int_t) self->w_steps,
                                 "workers_alive", s_alive (self, S_WORKER));
        json_object_set_new (obj, "eta_s", eta >= 0 ? json_real (eta) : json_null ());
        //  How the workers spent their steps: computing, or waiting on the
        //  servers (pulls and pushes), and pushes the ledgers ignored.
        double busy = self->w_compute_ms + self->w_comm_ms;
        json_object_set_new (obj, "compute_fraction",
                             json_real (busy > 0 ? self->w_compute_ms / busy : 0));
        json_object_set_new (obj, "duplicates", json_integer ((json_int_t) self->w_duplicates));
        s_event (self, "progress", obj);
    }
    self->window_ms = now;
    self->w_steps = self->w_count = self->w_correct = self->w_duplicates = 0;
    self->w_loss = self->w_compute_ms = self->w_comm_ms = 0;
}

//  ---------------------------------------------------------------------
//  Sending

static int
s_send (s_coord_t *self, const s_peer_t *peer, const char *id, size_t id_len)
{
    zmq_msg_t envelope;
    if (peer) {
        id = peer->id;
        id_len = peer->id_len;
    }
    if (zmq_msg_init_size (&envelope, id_len) != 0)
        abort ();
    memcpy (zmq_msg_data (&envelope), id, id_len);
    ps_error_t err;
    //  A peer that went away makes ZeroMQ drop the message; that is what
    //  the heartbeats are for.
    int rc = ps_writer_send (&self->writer, self->router, &envelope, 1, NULL, 0, &err);
    zmq_msg_close (&envelope);
    if (rc)
        ps_debug ("send: %s", err.msg);
    return rc;
}

//  Send a heartbeat to every live peer; with silent_too, also to those
//  only silent (a stopped or starved process may yet read it). Once the
//  run is over they carry done, so a worker whose answer "stop" was lost
//  still learns that the coordinator exits because it finished.
static void
s_send_heartbeats (s_coord_t *self, bool silent_too)
{
    bool done = self->state == S_STOPPING;
    for (int r = 0; r < S_ROLES; r++)
        for (int i = 0; i < self->npeers [r]; i++) {
            s_peer_t *peer = &self->peers [r][i];
            if (!peer->alive && !(silent_too && peer->silent))
                continue;
            ps_writer_reset (&self->writer, "heartbeat", ++self->next_id, done ? 2 : 1);
            ps_pack_uint (&self->writer.pk, "incarnation", self->incarnation);
            if (done) {
                ps_pack_key (&self->writer.pk, "done");
                msgpack_pack_true (&self->writer.pk);
            }
            s_send (self, peer, NULL, 0);
        }
}

//  Start a "work" answer to request id with its six fields and room for
//  extra more (mirrored mode's), which the caller packs before sending.
static msgpack_packer *
s_begin_work (s_coord_t *self, uint64_t id, const char *kind, uint64_t step, uint64_t epoch,
              uint64_t batch, uint64_t wait_ms, size_t extra)
{
    ps_writer_reset (&self->writer, "work", id, 6 + extra);
    msgpack_packer *pk = &self->writer.pk;
    ps_pack_key (pk, "kind");
    ps_pack_str (pk, kind);
    ps_pack_uint (pk, "step", step);
    ps_pack_uint (pk, "epoch", epoch);
    ps_pack_uint (pk, "batch", batch);
    ps_pack_uint (pk, "generation", self->generation);
    ps_pack_uint (pk, "wait_ms", wait_ms);
    return pk;
}

static void
s_reply_work (s_coord_t *self, s_peer_t *peer, uint64_t id, const char *kind, uint64_t step,
              uint64_t epoch, uint64_t batch, uint64_t wait_ms)
{
    s_begin_work (self, id, kind, step, epoch, batch, wait_ms, 0);
    s_send (self, peer, NULL, 0);
}

//  ---------------------------------------------------------------------
//  Failures

//  End the run with code and a message; the first failure is the one
//  reported.
static void
s_fail (s_coord_t *self, int code, const char *fmt, ...)
{
    if (self->rc)
        return;
    char message [PS_ERROR_MSG_MAX];
    va_list args;
    va_start (args, fmt);
    vsnprintf (message, sizeof message, fmt, args);
    va_end (args);
    self->rc = ps_error_set (self->err, code, "%s", message);
    self->finished = true;
}

static void
s_requeue_eval (s_coord_t *self)
{
    if (!self->eval_busy)
        return;
    self->eval_busy = false;
    //  A newer evaluation asked for meanwhile supersedes the lost one.
    if (!self->eval_pending) {
        self->eval_pending = true;
        self->eval_epoch = self->eval_busy_epoch;
        self->eval_step = self->eval_busy_step;
    }
}

//  Mirrored mode's part of failures and requests (see "Mirrored mode").
static void m_worker_failed (s_coord_t *self, s_peer_t *peer);
static void m_on_request (s_coord_t *self, s_peer_t *peer, uint64_t id);
static void m_send_abort (s_coord_t *self, s_peer_t *peer);

static void
s_worker_failed (s_coord_t *self, s_role_t role, int index, const char *reason)
{
    s_peer_t *peer = &self->peers [role][index];
    if (!peer->alive)
        return;
    peer->alive = false;
    //  In mirrored mode the ring decides what becomes of the global step
    //  the worker had a batch of (m_resolve_step).
    size_t released = role == S_WORKER && self->schedule && !self->mirrored
                    ? ps_schedule_release_worker (self->schedule, index) : 0;
    if (self->mirrored && role == S_WORKER)
        m_worker_failed (self, peer);
    if (self->eval_busy && self->eval_role == role && self->eval_index == index)
        s_requeue_eval (self);
    if (role == S_WORKER)
        self->worker_failures++;
    s_tty_clear (self);
    ps_warn ("%s:%d failed (%s); %zu step%s in flight go back to the queue", s_role_names [role],
             index, reason, released, released == 1 ? "" : "s");
    s_event (self, "worker_failed",
             json_pack ("{s:s, s:i, s:s, s:I, s:f}", "role", s_role_names [role], "task", index,
                        "reason", reason, "steps_released", (json_int_t) released,
                        "silent_ms", ps_clock_ms () - peer->last_seen));
}

static void
s_server_failed (s_coord_t *self, int index, const char *reason)
{
    s_peer_t *peer = &self->peers [S_PS][index];
    peer->alive = false;
    //  A mirrored run keeps no variables on servers.
    if (self->state == S_WAIT_SERVERS || self->state == S_STOPPING || self->mirrored)
        return;
    s_tty_clear (self);
    ps_warn ("ps:%d failed (%s)%s", index, reason,
             self->state == S_RECOVER ? "" : "; pausing to restore every server from the "
             "newest checkpoint");
    s_event (self, "server_failed", json_pack ("{s:i, s:s}", "task", index, "reason", reason));
    if (!*self->job->checkpoint_dir) {
        s_fail (self, PS_EIO, "ps:%d failed and the job has no checkpoint directory to "
                "recover from (set checkpoint.dir)", index);
        return;
    }
    if (self->state != S_RECOVER) {
        self->state = S_RECOVER;
        self->recover_ms = ps_clock_ms ();
        self->recover_log_ms = 0;
    }
}

//  ---------------------------------------------------------------------
//  Learning rate, evaluation, checkpoints

static int
s_set_lr (s_coord_t *self, double lr)
{
    ps_opt_config_t opt = self->job->optimizer;
    opt.lr = lr;
    ps_error_t err;
    int rc = ps_client_set_optimizer (self->client, &opt, &err);
    if (rc)
        ps_warn ("cannot set the learning rate to %g: %s", lr, err.msg);
    else
        self->lr = lr;
    return rc;
}

//  Follow the schedule: change the servers' rate when the scheduled one
//  has moved by more than 1% (every change for piecewise), not every step.
static void
s_follow_lr (s_coord_t *self, uint64_t step)
{
    double lr = ps_lr_at (&self->job->lr_schedule, self->job->optimizer.lr, step,
                          self->steps_per_epoch, self->total);
    if (lr != self->lr && (self->job->lr_schedule.kind == PS_LR_PIECEWISE
                           || fabs (lr - self->lr) > 0.01 * self->lr))
        s_set_lr (self, lr);
}

static void
s_queue_eval (s_coord_t *self, uint64_t epoch, uint64_t step)
{
    self->eval_pending = true;
    self->eval_epoch = epoch;
    self->eval_step = step;
}

//  The done set as a checkpoint records it, and the data cursor: the first
//  step not done, right after the watermark.
static int
s_done_set_json (s_coord_t *self, json_t **done, json_t **cursor, ps_error_t *err)
{
    uint64_t watermark, *above;
    size_t count;
    if (ps_schedule_done_set (self->schedule, &watermark, &above, &count))
        return ps_error_set (err, PS_ETOOBIG, "no memory for the done set");
    json_t *list = json_array ();
    for (size_t i = 0; i < count; i++)
        json_array_append_new (list, json_integer ((json_int_t) above [i]));
    free (above);
    *done = json_pack ("{s:I, s:o}", "watermark", (json_int_t) watermark, "above", list);
    bool finished = watermark >= self->total;
    uint64_t epoch = 0, batch = 0;
    if (!finished)
        ps_schedule_locate (self->schedule, watermark + 1, &epoch, &batch);
    *cursor = json_pack ("{s:I, s:I, s:b}", "epoch", (json_int_t) epoch, "batch",
                         (json_int_t) batch, "finished", finished);
    return 0;
}

//  Finish the checkpoint of step begun at t0 in tmp, whose snapshot files
//  are written (rc 0) or failed (rc and *err say why): write the manifest
//  and commit, or report the failure and retry later. Takes files.
static int
s_finish_checkpoint (s_coord_t *self, uint64_t step, const char *tmp, ps_snap_file_t *files,
                     size_t nfiles, int rc, ps_error_t *err_in, double t0)
{
    const char *root = self->job->checkpoint_dir;
    char dir [PS_JOB_PATH_MAX + 64];
    ps_error_t err = *err_in;
    size_t expected = 0;
    for (int v = 0; v < self->plan.nvars; v++)
        expected += (size_t) self->plan.vars [v].nparts;
    if (rc == 0 && nfiles != expected)
        rc = ps_error_set (&err, PS_ESHAPE, "%zu snapshot files were written for %zu "
                           "partitions", nfiles, expected);
    json_t *done = NULL, *cursor = NULL;
    if (rc == 0)
        rc = s_done_set_json (self, &done, &cursor, &err);
    if (rc == 0) {
        json_t *manifest = json_object ();
        json_object_set_new (manifest, "global_step", json_integer ((json_int_t) step));
        json_object_set_new (manifest, "mode", json_string (ps_mode_name (self->job->mode)));
        json_object_set_new (manifest, "generation", json_integer ((json_int_t) self->generation));
        json_object_set_new (manifest, "done", done);
        json_object_set_new (manifest, "data_cursor", cursor);
        json_object_set_new (manifest, "seeds",
                             json_pack ("{s:I, s:s}", "seed", (json_int_t) self->job->seed,
                                        "derivation", "weights: ps_model_variable_seed (seed, "
                                        "variable); epoch order: ps_dataset_permutation (seed, "
                                        "epoch); dropout: ps_step_dropout_seed (seed, step - 1)"));
        json_object_set_new (manifest, "lr", json_real (self->lr));
        json_object_set_new (manifest, "servers", json_integer (self->cfg->nservers));
        json_object_set_new (manifest, "steps_per_epoch",
                             json_integer ((json_int_t) self->steps_per_epoch));
        json_object_set_new (manifest, "total_steps", json_integer ((json_int_t) self->total));
        json_object_set_new (manifest, "job", json_incref (self->job_json));
        json_object_set_new (manifest, "layout", json_incref (self->layout));
        if (self->mirrored) {
            //  Written by the ring's first member; "updates" is the
            //  replicas' update count, which a mirrored resume goes on from.
            json_object_set_new (manifest, "updates", json_integer ((json_int_t) self->committed));
            json_object_set_new (manifest, "writer", json_pack ("{s:s, s:i}", "role", "worker",
                                                                "task", self->ring [0]));
        }
        rc = ps_checkpoint_commit (root, step, tmp, manifest, files, nfiles,
                                   self->job->checkpoint_keep, dir, sizeof dir, &err);
        json_decref (manifest);
    }
    double now = ps_clock_ms ();
    uint64_t bytes = 0;
    for (size_t i = 0; i < nfiles; i++)
        bytes += files [i].bytes;
    free (files);
    s_tty_clear (self);
    if (rc) {
        ps_warn ("checkpoint at step %" PRIu64 " failed: %s", step, err.msg);
        s_event (self, "checkpoint_failed",
                 json_pack ("{s:I, s:s}", "step", (json_int_t) step, "error", err.msg));
        //  Try again after a while rather than at once; the step count of
        //  the last good checkpoint stays, so the final one is still taken.
        self->ckpt_retry_ms = now + S_CKPT_RETRY_MS;
        self->ckpt_failures++;
        self->pause_ms = 0;
        return rc;
    }
    double pause = self->pause_ms > 0 ? now - self->pause_ms : now - t0;
    ps_info ("checkpoint %s: step %" PRIu64 ", %zu files, %.1f MB, written in %.1f ms, "
             "dispatch paused %.1f ms", dir, step, nfiles, bytes / 1e6, now - t0, pause);
    s_event (self, "checkpoint",
             json_pack ("{s:I, s:s, s:I, s:I, s:f, s:f}", "step", (json_int_t) step, "dir", dir,
                        "files", (json_int_t) nfiles, "bytes", (json_int_t) bytes,
                        "write_ms", now - t0, "pause_ms", pause));
    self->checkpoints++;
    self->ckpt_failures = 0;
    self->ckpt_ms = now;
    self->ckpt_done = step;
    self->pause_ms = 0;
    return 0;
}

//  Async mode: every server snapshots its partitions, then the manifest.
static int
s_take_checkpoint (s_coord_t *self)
{
    uint64_t step = ps_schedule_done_count (self->schedule);
    double t0 = ps_clock_ms ();
    char tmp [PS_JOB_PATH_MAX + 64];
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    ps_error_t err;
    int rc = ps_checkpoint_begin (self->job->checkpoint_dir, step, tmp, sizeof tmp, &err);
    if (rc == 0)
        rc = ps_client_snapshot (self->client, ps_checkpoint_name (self->job->checkpoint_dir, tmp),
                                 &files, &nfiles, &err);
    return s_finish_checkpoint (self, step, tmp, files, nfiles, rc, &err, t0);
}

//  Whether a checkpoint's layout holds this job's variables (the same
//  names and shapes, in order), however they were partitioned.
static bool
s_same_variables (const json_t *a, const json_t *b)
{
    if (!json_is_array (a) || !json_is_array (b) || json_array_size (a) != json_array_size (b))
        return false;
    for (size_t i = 0; i < json_array_size (a); i++) {
        const json_t *x = json_array_get (a, i), *y = json_array_get (b, i);
        if (!json_equal (json_object_get (x, "var"), json_object_get (y, "var"))
        ||  !json_equal (json_object_get (x, "shape"), json_object_get (y, "shape")))
            return false;
    }
    return true;
}

//  A verified manifest's done set: the watermark and the steps done above
//  it (*above: free it).
static void
s_done_set_read (const json_t *manifest, uint64_t *watermark, uint64_t **above, size_t *count)
{
    json_t *done = json_object_get (manifest, "done");
    json_t *list = json_object_get (done, "above");
    *count = json_array_size (list);
    *above = calloc (*count ? *count : 1, sizeof (uint64_t));
    if (!*above)
        abort ();
    for (size_t i = 0; i < *count; i++)
        (*above) [i] = (uint64_t) json_integer_value (json_array_get (list, i));
    *watermark = (uint64_t) json_integer_value (json_object_get (done, "watermark"));
}

//  Open the newest valid checkpoint for this job. It must come from a job
//  with the same variables and data order; when it lays the variables out
//  otherwise than this run (the other mode, another placement), it is
//  re-partitioned into the scratch directory <root>/reshard.tmp, which is
//  then what to load. dir receives the checkpoint, src the directory to
//  load from, *manifest the manifest. Returns 0, PS_ENOTFOUND when there
//  is none, or another code after failing the run.
static int
s_checkpoint_open (s_coord_t *self, char *dir, char *src, size_t len, json_t **manifest)
{
    ps_error_t err;
    *manifest = NULL;
    int rc = ps_checkpoint_latest (self->job->checkpoint_dir, dir, len, manifest, &err);
    if (rc) {
        if (rc != PS_ENOTFOUND)
            s_fail (self, rc, "%s", err.msg);
        json_decref (*manifest);
        *manifest = NULL;
        return rc;
    }
    const char *mismatch = NULL;
    json_t *job = json_object_get (*manifest, "job");
    json_t *layout = json_object_get (*manifest, "layout");
    if (!s_same_variables (layout, self->layout))
        mismatch = "model (the variables' names or shapes)";
    else
    if (json_integer_value (json_object_get (job, "batch_size")) != self->job->batch_size)
        mismatch = "batch_size";
    else
    if ((uint64_t) json_integer_value (json_object_get (job, "seed")) != self->job->seed)
        mismatch = "seed";
    else
    if ((uint64_t) json_integer_value (json_object_get (job, "train_limit"))
        != self->job->train_limit)
        mismatch = "train_limit";
    if (mismatch) {
        s_fail (self, PS_EINVAL, "checkpoint %s was written by a job with another %s; use "
                "another checkpoint directory or the same job", dir, mismatch);
        json_decref (*manifest);
        *manifest = NULL;
        return PS_EINVAL;
    }
    if (json_equal (layout, self->layout)) {
        snprintf (src, len, "%s", dir);
        return 0;
    }
    //  Written in the other mode, or with another placement: the same
    //  values and optimizer state, cut into this run's partitions.
    int nvars = self->plan.nvars;
    ps_reshard_var_t *vars = calloc ((size_t) nvars, sizeof *vars);
    if (!vars)
        abort ();
    for (int v = 0; v < nvars; v++) {
        const ps_plan_var_t *var = &self->plan.vars [v];
        vars [v] = (ps_reshard_var_t) { .var = var->var, .shape = var->shape,
                                        .nparts = var->nparts, .splits = var->splits,
                                        .servers = var->servers };
    }
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    double t0 = ps_clock_ms ();
    rc = ps_checkpoint_scratch (self->job->checkpoint_dir, "reshard.tmp", src, len, &err);
    if (rc == 0)
        rc = ps_reshard (dir, vars, nvars, src, &files, &nfiles, &err);
    free (vars);
    free (files);
    if (rc) {
        s_fail (self, rc, "re-partitioning checkpoint %s for this run: %s", dir, err.msg);
        json_decref (*manifest);
        *manifest = NULL;
        return rc;
    }
    const char *mode = json_string_value (json_object_get (*manifest, "mode"));
    ps_info ("checkpoint %s (%s mode) re-partitioned for this %s run into %s (%zu files, "
             "%.0f ms)", dir, mode ? mode : "async", ps_mode_name (self->job->mode), src, nfiles,
             ps_clock_ms () - t0);
    return 0;
}

//  Restore every server from the newest valid checkpoint and rewind the
//  schedule to it. Returns PS_ENOTFOUND when there is none.
static int
s_restore (s_coord_t *self, const char *why)
{
    char dir [PS_JOB_PATH_MAX + 64], src [PS_JOB_PATH_MAX + 64];
    json_t *manifest = NULL;
    ps_error_t err;
    int rc = s_checkpoint_open (self, dir, src, sizeof dir, &manifest);
    if (rc)
        return rc;
    uint64_t watermark, *above;
    size_t count;
    s_done_set_read (manifest, &watermark, &above, &count);
    uint64_t before = ps_schedule_done_count (self->schedule);
    double t0 = ps_clock_ms ();
    rc = ps_client_restore (self->client, ps_checkpoint_name (self->job->checkpoint_dir, src),
                            &err);
    if (rc && self->state == S_RECOVER
    &&  (rc == PS_ETIMEDOUT || rc == PS_EIO || rc == PS_EREMOTE)) {
        //  Another server failed meanwhile, or is not serving yet: stay
        //  paused and try again once the failure handling has caught up.
        ps_warn ("restoring from %s: %s; trying again", dir, err.msg);
        free (above);
        json_decref (manifest);
        return PS_ETIMEDOUT;
    }
    if (rc == 0)
        rc = ps_schedule_restore (self->schedule, watermark, above, count, &err);
    free (above);
    if (rc) {
        s_fail (self, rc, "restoring from %s: %s", dir, err.msg);
        json_decref (manifest);
        return rc;
    }
    uint64_t after = ps_schedule_done_count (self->schedule);
    self->generation++;
    //  From now on the servers refuse pushes of older generations: a
    //  gradient computed against the values just rewound (by a worker that
    //  was stopped or cut off, or queued at a server that was stopped)
    //  cannot land on the restored values.
    if (ps_client_fence (self->client, self->generation, &err))
        ps_warn ("fencing the servers at generation %" PRIu64 ": %s", self->generation, err.msg);
    //  Evaluations of steps past the checkpoint would now measure rewound
    //  parameters under a later step's name: they are asked for again when
    //  training gets there.
    if (self->eval_pending && self->eval_step > after)
        self->eval_pending = false;
    if (self->eval_busy && self->eval_busy_step > after)
        self->eval_busy = false;
    if (self->have_eval && self->last_eval_step > after)
        self->have_eval = false;
    self->lr = 0;
    s_set_lr (self, ps_lr_at (&self->job->lr_schedule, self->job->optimizer.lr, watermark + 1,
                              self->steps_per_epoch, self->total));
    self->ckpt_done = after;
    self->ckpt_ms = ps_clock_ms ();
    s_tty_clear (self);
    ps_info ("%s: restored every server from %s (step %" PRIu64 "); %" PRIu64
             " step%s to train again", why, dir, after, before > after ? before - after : 0,
             before - after == 1 ? "" : "s");
    s_event (self, "recovered",
             json_pack ("{s:s, s:s, s:I, s:I, s:I, s:f}", "reason", why, "checkpoint", dir,
                        "step", (json_int_t) after, "steps_lost",
                        (json_int_t) (before > after ? before - after : 0),
                        "generation", (json_int_t) self->generation,
                        "restore_ms", ps_clock_ms () - t0));
    json_decref (manifest);
    return 0;
}

//  ---------------------------------------------------------------------
//  Start-up

//  Resume from the newest checkpoint when the job has a checkpoint
//  directory, with load (s_restore, or mirrored mode's m_prepare_load).
//  Returns 0 when one was loaded, PS_ENOTFOUND when there is none and
//  --resume did not ask for one, or -1 after failing the run.
static int
s_resume (s_coord_t *self, int (*load) (s_coord_t *, const char *))
{
    int rc = PS_ENOTFOUND;
    if (*self->job->checkpoint_dir) {
        rc = load (self, self->cfg->resume ? "resuming" : "resuming the run found in the "
                   "checkpoint directory");
        if (self->rc)
            return -1;
    }
    if (rc == PS_ENOTFOUND && self->cfg->resume) {
        s_fail (self, PS_ENOTFOUND, "--resume: no valid checkpoint in \"%s\"",
                *self->job->checkpoint_dir ? self->job->checkpoint_dir : "(no checkpoint.dir)");
        return -1;
    }
    return rc;
}

static int
s_setup (s_coord_t *self)
{
    ps_error_t err;
    int nvars = ps_model_variable_count (self->model);
    ps_init_t *inits = calloc ((size_t) nvars, sizeof (ps_init_t));
    if (!inits)
        abort ();
    for (int v = 0; v < nvars; v++) {
        inits [v] = ps_model_variable (self->model, v)->init;
        inits [v].seed = ps_model_variable_seed (self->job->seed, v);
    }
    //  The coordinator's own calls block its loop, heartbeats included, so
    //  they wait no longer than the heartbeat timeout (at least 2 s): a
    //  server that died in the middle of one is noticed in that time. A
    //  model whose snapshot takes longer needs a longer heartbeat timeout.
    int timeout = self->plan.client_timeout_ms;
    self->plan.client_timeout_ms = timeout > 2000 ? timeout : 2000;
    self->client = ps_plan_client (&self->plan, inits, self->cfg->curve, &err);
    self->plan.client_timeout_ms = timeout;
    free (inits);
    if (!self->client) {
        s_fail (self, err.code, "%s", err.msg);
        return -1;
    }
    int rc = s_resume (self, s_restore);
    if (rc < 0 && rc != PS_ENOTFOUND)
        return -1;
    if (rc == PS_ENOTFOUND) {
        //  Servers keep partitions that exist already (create is
        //  idempotent), so a coordinator restarted without checkpoints goes
        //  on from the servers' current values.
        if ((rc = ps_client_create (self->client, &err)) != 0) {
            s_fail (self, rc, "creating the partitions: %s", err.msg);
            return -1;
        }
        if (s_set_lr (self, ps_lr_at (&self->job->lr_schedule, self->job->optimizer.lr, 1,
                                      self->steps_per_epoch, self->total))) {
            s_fail (self, PS_EIO, "%s", "cannot set the optimizer on the servers");
            return -1;
        }
        if ((rc = ps_client_fence (self->client, self->generation, &err)) != 0) {
            s_fail (self, rc, "fencing the servers: %s", err.msg);
            return -1;
        }
        //  A checkpoint of the initial state, so that a server failure
        //  before the first interval can be recovered too.
        if (*self->job->checkpoint_dir && s_take_checkpoint (self)) {
            s_fail (self, PS_EIO, "cannot write the first checkpoint in \"%s\"",
                    self->job->checkpoint_dir);
            return -1;
        }
    }
    self->state = S_RUNNING;
    return 0;
}

//  ---------------------------------------------------------------------
//  Messages

static s_peer_t *
s_find_peer (s_coord_t *self, const char *id, size_t len, s_role_t *role, int *index)
{
    for (int r = 0; r < S_ROLES; r++)
        for (int i = 0; i < self->npeers [r]; i++) {
            s_peer_t *peer = &self->peers [r][i];
            if (peer->known && peer->id_len == len && memcmp (peer->id, id, len) == 0) {
                *role = (s_role_t) r;
                *index = i;
                return peer;
            }
        }
    return NULL;
}

static void
s_on_register (s_coord_t *self, const char *id, size_t id_len)
{
    const msgpack_object *h = ps_msg_header (self->msg);
    char role_name [32];
    s_role_t role = S_ROLES;
    if (ps_obj_str (ps_obj_get (h, "role"), role_name, sizeof role_name) == 0)
        for (int r = 0; r < S_ROLES; r++)
            if (strcmp (role_name, s_role_names [r]) == 0)
                role = (s_role_t) r;
    uint64_t index = ps_obj_get (h, "index")->via.u64;
    uint64_t incarnation = ps_obj_get (h, "incarnation")->via.u64;
    zmq_msg_t *envelope;
    size_t nenvelope = ps_msg_envelope (self->msg, &envelope);
    char message [256];
    if (role == S_ROLES || index >= (uint64_t) self->npeers [role]) {
        if (role == S_ROLES)
            snprintf (message, sizeof message, "unknown role: expected ps, worker or evaluator");
        else
            snprintf (message, sizeof message, "unknown task %s:%" PRIu64 ": the cluster has "
                      "%d %s task%s", role_name, index, self->npeers [role], role_name,
                      self->npeers [role] == 1 ? "" : "s");
        ps_warn ("refused a registration: %s", message);
        ps_msg_send_error (self->router, envelope, nenvelope, ps_msg_id (self->msg), PS_EINVAL,
                           message, NULL);
        return;
    }
    s_peer_t *peer = &self->peers [role][index];
    if (id_len > sizeof peer->id) {
        ps_msg_send_error (self->router, envelope, nenvelope, ps_msg_id (self->msg), PS_EINVAL,
                           "routing id too long", NULL);
        return;
    }
    bool again = peer->known && peer->incarnation == incarnation;
    bool restarted = peer->known && peer->incarnation != incarnation;
    //  A new incarnation of a task whose process is alive (it heartbeats,
    //  and no death was seen) is refused: taking it would declare a
    //  working process failed on the word of any process that claims its
    //  task. A process that really restarted is taken once the old one's
    //  death is known (a local cluster's supervisor sees it at once) or
    //  its silence passes the heartbeat timeout; until then its link keeps
    //  registering, and the code "busy" tells it that waiting is right.
    if (restarted && peer->alive) {
        self->refused_registrations++;
        double quiet = ps_clock_ms () - peer->last_seen;
        snprintf (message, sizeof message, "%s:%" PRIu64 " is held by a live process (pid %"
                  PRIu64 ", heard from %.0f ms ago); a new incarnation is taken once that "
                  "one's death is known or it has been silent for %d ms", role_name, index,
                  peer->pid, quiet, self->job->heartbeat_timeout_ms);
        if (!peer->refused_register_logged) {
            s_tty_clear (self);
            ps_warn ("refused a registration (pid %" PRIu64 "): %s", ps_obj_get (h, "pid")->via.u64,
                     message);
            s_event (self, "refused",
                     json_pack ("{s:s, s:s, s:I, s:I}", "what", "registration", "role",
                                role_name, "task", (json_int_t) index, "pid",
                                (json_int_t) ps_obj_get (h, "pid")->via.u64));
            peer->refused_register_logged = true;
        }
        ps_msg_send_error (self->router, envelope, nenvelope, ps_msg_id (self->msg), PS_EBUSY,
                           message, NULL);
        return;
    }
    //  A new process holds a fresh replica, if any, and has been refused
    //  nothing yet.
    if (restarted || !peer->known) {
        peer->updates = 0;
        peer->held = peer->busy = peer->current = false;
        peer->refused_report_logged = peer->refused_register_logged = false;
    }
    bool was_alive = peer->alive;
    peer->known = true;
    peer->alive = true;
    peer->silent = false;
    peer->stopped = false;
    peer->incarnation = incarnation;
    memcpy (peer->id, id, id_len);
    peer->id_len = id_len;
    peer->last_seen = ps_clock_ms ();
    peer->pid = ps_obj_get (h, "pid")->via.u64;
    if (!again || !was_alive) {
        s_tty_clear (self);
        ps_info ("%s:%" PRIu64 " registered (pid %" PRIu64 ")%s", role_name, index, peer->pid,
                 restarted ? ", a new incarnation" : again ? ", back after a silence" : "");
        char endpoint [256] = "";
        ps_obj_str (ps_obj_get (h, "endpoint"), endpoint, sizeof endpoint);
        s_event (self, "registered",
                 json_pack ("{s:s, s:I, s:I, s:b, s:s}", "role", role_name,
                            "task", (json_int_t) index, "pid", (json_int_t) peer->pid,
                            "restarted", restarted, "endpoint", endpoint));
    }
    bool plan = role != S_PS;
    ps_writer_reset (&self->writer, "register_ok", ps_msg_id (self->msg), plan ? 4 : 3);
    msgpack_packer *pk = &self->writer.pk;
    ps_pack_uint (pk, "coordinator", self->incarnation);
    ps_pack_uint (pk, "heartbeat_ms", (uint64_t) self->job->heartbeat_ms);
    ps_pack_uint (pk, "timeout_ms", (uint64_t) self->job->heartbeat_timeout_ms);
    if (plan) {
        ps_pack_key (pk, "plan");
        ps_plan_pack (&self->plan, pk);
    }
    s_send (self, peer, NULL, 0);
}

static void s_eval_result (s_coord_t *self, double loss, uint64_t correct, uint64_t count,
                           const char *role, int task);

static void
s_on_eval_report (s_coord_t *self, s_role_t role, int index, const msgpack_object *report,
                  bool done)
{
    if (!self->eval_busy || self->eval_role != role || self->eval_index != index
    ||  ps_obj_get (report, "step")->via.u64 != self->eval_busy_step)
        return;
    if (!done || ps_obj_get (report, "generation")->via.u64 != self->eval_gen) {
        s_requeue_eval (self);
        return;
    }
    self->eval_busy = false;
    s_eval_result (self, ps_obj_double (ps_obj_get (report, "loss")),
                   ps_obj_get (report, "correct")->via.u64, ps_obj_get (report, "count")->via.u64,
                   s_role_names [role], index);
}

//  An evaluation's result (summed loss, correct predictions, examples),
//  computed by task `task` of role (a mirrored ring's evaluation: role
//  "ring", task its size).
static void
s_eval_result (s_coord_t *self, double loss, uint64_t correct, uint64_t count, const char *role,
               int task)
{
    if (count == 0)
        return;
    self->test_loss = loss / count;
    self->test_accuracy = (double) correct / count;
    self->have_eval = true;
    self->last_eval_step = self->eval_busy_step;
    double now = ps_clock_ms ();
    s_tty_clear (self);
    ps_info ("evaluation after epoch %" PRIu64 " (step %" PRIu64 "): test loss %.4f, test "
             "accuracy %.4f (%s:%d, %.0f ms)", self->eval_busy_epoch, self->eval_busy_step,
             self->test_loss, self->test_accuracy, role, task, now - self->eval_sent_ms);
    s_event (self, "eval",
             json_pack ("{s:I, s:I, s:f, s:f, s:I, s:f, s:f, s:s, s:i}",
                        "epoch", (json_int_t) self->eval_busy_epoch,
                        "step", (json_int_t) self->eval_busy_step,
                        "test_loss", isfinite (self->test_loss) ? self->test_loss : -1.0,
                        "test_accuracy", self->test_accuracy,
                        "count", (json_int_t) count,
                        "params_at_s", (self->eval_sent_ms - self->start_ms) / 1e3,
                        "eval_ms", now - self->eval_sent_ms, "role", role, "task", task));
}

static void s_after_complete (s_coord_t *self, uint64_t step);

//  The servers refused worker:index's gradient of step as not finite (it
//  changed nothing). The step goes back to the queue, to be computed again
//  on fresher parameters, up to the job's nonfinite_retries; then the run
//  fails, naming the step and what the servers said.
static void
s_on_nonfinite (s_coord_t *self, int index, uint64_t step, const char *text)
{
    self->nonfinite_failures++;
    int slot = -1;
    for (int i = 0; i < S_NONFINITE_STEPS; i++)
        if (self->nonfinite [i].step == step)
            slot = i;
    if (slot < 0) {
        slot = self->nonfinite_next;
        self->nonfinite_next = (self->nonfinite_next + 1) % S_NONFINITE_STEPS;
        self->nonfinite [slot].step = step;
        self->nonfinite [slot].failures = 0;
    }
    int failures = ++self->nonfinite [slot].failures;
    uint64_t epoch, batch;
    ps_schedule_locate (self->schedule, step, &epoch, &batch);
    s_tty_clear (self);
    s_event (self, "nonfinite",
             json_pack ("{s:I, s:I, s:I, s:s, s:i, s:i, s:s}", "step", (json_int_t) step,
                        "epoch", (json_int_t) epoch, "batch", (json_int_t) batch,
                        "role", "worker", "task", index, "failures", failures, "error", text));
    if (failures > self->job->nonfinite_retries) {
        s_fail (self, PS_ENONFINITE, "step %" PRIu64 " (epoch %" PRIu64 ", batch %" PRIu64 ") "
                "gave a gradient with NaN or an infinity %d times, last from worker:%d (%s); "
                "no server applied it. Lower the learning rate, clip the gradients "
                "(optimizer.clip_norm), or check the batch's data; nonfinite_retries is %d",
                step, epoch, batch, failures, index, text, self->job->nonfinite_retries);
        return;
    }
    ps_warn ("step %" PRIu64 " (epoch %" PRIu64 ", batch %" PRIu64 "): worker:%d's gradient "
             "was refused (%s); trying the step again (%d of %d retries)", step, epoch, batch,
             index, text, failures, self->job->nonfinite_retries);
}

//  A worker reported a step done that it does not hold: counted, and
//  logged once for its incarnation.
static void
s_refuse_report (s_coord_t *self, s_peer_t *peer, int index, uint64_t step)
{
    peer->refused_reports++;
    self->refused_reports++;
    if (peer->refused_report_logged)
        return;
    peer->refused_report_logged = true;
    int holder = ps_schedule_holder (self->schedule, step);
    char held [48] = "nobody";
    if (holder >= 0)
        snprintf (held, sizeof held, "worker:%d", holder);
    s_tty_clear (self);
    ps_warn ("refused worker:%d's completion of step %" PRIu64 ": %s holds it (further refusals "
             "of this process are counted in the done record, not logged)", index, step, held);
    s_event (self, "refused",
             json_pack ("{s:s, s:s, s:i, s:I, s:i}", "what", "completion", "role", "worker",
                        "task", index, "step", (json_int_t) step, "holder", holder));
}

static void
s_on_train_report (s_coord_t *self, s_peer_t *peer, int index, const msgpack_object *report,
                   bool done)
{
    uint64_t step = ps_obj_get (report, "step")->via.u64;
    //  Work of an older generation ran against parameters since rewound;
    //  the restore emptied the schedule's in-flight lists already.
    if (ps_obj_get (report, "generation")->via.u64 != self->generation || !self->schedule)
        return;
    if (!done) {
        if (ps_schedule_release (self->schedule, index, step) == 0) {
            const msgpack_object *error = ps_obj_get (report, "error");
            char text [PS_ERROR_MSG_MAX] = "";
            if (error)
                ps_obj_str (error, text, sizeof text);
            if (strncmp (text, "nonfinite", 9) == 0)
                s_on_nonfinite (self, index, step, text);
        }
        return;
    }
    //  A completion counts only from the worker (and, since a restart
    //  releases its steps, the incarnation) that holds the step. A step
    //  taken back from a worker declared failed, a step never handed out,
    //  or one handed to another worker is not its to complete: if it was
    //  trained at all, the servers' ledgers make the holder's push of it a
    //  duplicate, and the holder's report completes it.
    if (ps_schedule_holder (self->schedule, step) != index) {
        if (!ps_schedule_is_done (self->schedule, step))
            s_refuse_report (self, peer, index, step);
        return;
    }
    int rc = ps_schedule_complete (self->schedule, step);
    if (rc != 0)
        return;             //  a duplicate, or a step out of range
    peer->steps++;
    uint64_t count = ps_obj_get (report, "count")->via.u64;
    self->w_steps++;
    self->w_count += count;
    self->samples += count;
    self->w_correct += ps_obj_get (report, "correct")->via.u64;
    self->w_loss += ps_obj_double (ps_obj_get (report, "loss"));
    s_track_loss (self, ps_obj_double (ps_obj_get (report, "loss")), count);
    self->w_compute_ms += ps_obj_double (ps_obj_get (report, "compute_ms"));
    self->w_comm_ms += ps_obj_double (ps_obj_get (report, "comm_ms"));
    self->w_duplicates += ps_obj_get (report, "duplicates")->via.u64;
    s_after_complete (self, step);
}

//  A step just completed: the end of an epoch and evaluations due.
static void
s_after_complete (s_coord_t *self, uint64_t step)
{
    uint64_t epoch, batch;
    ps_schedule_locate (self->schedule, step, &epoch, &batch);
    if (ps_schedule_epoch_done (self->schedule, epoch)) {
        uint64_t done_steps = ps_schedule_done_count (self->schedule);
        s_tty_clear (self);
        ps_info ("epoch %" PRIu64 " done (%" PRIu64 "/%" PRIu64 " steps)", epoch + 1,
                 done_steps, self->total);
        if (self->job->eval_epochs > 0 && (epoch + 1) % (uint64_t) self->job->eval_epochs == 0)
            s_queue_eval (self, epoch + 1, done_steps);
    }
    if (self->job->eval_steps > 0
    &&  ps_schedule_done_count (self->schedule) % self->job->eval_steps == 0)
        s_queue_eval (self, ps_schedule_done_count (self->schedule) / self->steps_per_epoch,
                      ps_schedule_done_count (self->schedule));
}

static void
s_on_work_request (s_coord_t *self, s_peer_t *peer, s_role_t role, int index)
{
    const msgpack_object *h = ps_msg_header (self->msg);
    uint64_t id = ps_msg_id (self->msg);
    if (role == S_PS) {
        zmq_msg_t *envelope;
        size_t nenvelope = ps_msg_envelope (self->msg, &envelope);
        ps_msg_send_error (self->router, envelope, nenvelope, id, PS_EINVAL,
                           "work_request from a ps task", NULL);
        return;
    }
    if (self->mirrored) {
        if (role == S_WORKER)
            m_on_request (self, peer, id);
        else {
            //  An evaluator has no part in a mirrored run: the ring
            //  evaluates, each member a shard.
            if (!peer->stopped)
                ps_info ("evaluator:%d is not used in mirrored mode; telling it to stop", index);
            peer->stopped = true;
            s_reply_work (self, peer, id, "stop", 0, 0, 0, 0);
        }
        return;
    }
    const msgpack_object *reports = ps_obj_get (h, "reports");
    for (uint32_t i = 0; i < reports->via.array.size; i++) {
        const msgpack_object *report = &reports->via.array.ptr [i];
        bool done = ps_obj_str_eq (ps_obj_get (report, "status"), "done");
        if (ps_obj_str_eq (ps_obj_get (report, "kind"), "eval"))
            s_on_eval_report (self, role, index, report, done);
        else
        if (role == S_WORKER && ps_obj_str_eq (ps_obj_get (report, "kind"), "train"))
            s_on_train_report (self, peer, index, report, done);
    }
    if (self->state == S_STOPPING) {
        peer->stopped = true;
        s_reply_work (self, peer, id, "stop", 0, 0, 0, 0);
        return;
    }
    bool want = ps_obj_get (h, "want")->via.u64 > 0;
    //  Evaluation goes to the evaluator when one is alive, else to the
    //  first worker that asks.
    if (want && self->eval_pending && !self->eval_busy && self->state != S_WAIT_SERVERS
    &&  (role == S_EVALUATOR || s_alive (self, S_EVALUATOR) == 0)) {
        self->eval_pending = false;
        self->eval_busy = true;
        self->eval_role = role;
        self->eval_index = index;
        self->eval_busy_epoch = self->eval_epoch;
        self->eval_busy_step = self->eval_step;
        self->eval_gen = self->generation;
        self->eval_sent_ms = ps_clock_ms ();
        s_reply_work (self, peer, id, "eval", self->eval_step, self->eval_epoch, 0, 0);
        return;
    }
    uint64_t step;
    if (want && role == S_WORKER && self->state == S_RUNNING
    &&  ps_schedule_next (self->schedule, index, &step) == 0) {
        uint64_t epoch, batch;
        ps_schedule_locate (self->schedule, step, &epoch, &batch);
        s_follow_lr (self, step);
        s_reply_work (self, peer, id, "train", step, epoch, batch, 0);
        return;
    }
    s_reply_work (self, peer, id, "wait", 0, 0, 0, S_WAIT_MS);
}

//  In a secured cluster, whether the message in hand comes from the
//  process whose key is task role:index's, the task it claims (by its
//  register, or by the routing id of that task's registration). If not,
//  it is answered "forbidden", logged once per key.
static bool
s_authorized (s_coord_t *self, const char *role, uint64_t index)
{
    if (!self->cfg->curve)
        return true;
    char claimed [48];
    snprintf (claimed, sizeof claimed, "%s:%" PRIu64, role, index);
    const char *peer = ps_msg_property (self->msg, PS_CURVE_PEER_TASK);
    if (peer && strcmp (peer, claimed) == 0)
        return true;
    const char *key = ps_msg_property (self->msg, PS_CURVE_PEER_KEY);
    char message [160];
    snprintf (message, sizeof message, "%s as %s: this key is %s's", ps_msg_type (self->msg),
              claimed, peer ? peer : "no task");
    if (ps_curve_first_refusal (self->cfg->curve, key ? key : "")) {
        s_tty_clear (self);
        ps_warn ("refused %s (key %s; its later refusals are not logged)", message,
                 key ? key : "none");
        s_event (self, "refused", json_pack ("{s:s, s:s, s:s}", "what", "key", "claimed",
                                             claimed, "key_task", peer ? peer : ""));
    }
    zmq_msg_t *envelope;
    size_t nenvelope = ps_msg_envelope (self->msg, &envelope);
    ps_msg_send_error (self->router, envelope, nenvelope, ps_msg_id (self->msg), PS_EPERM,
                       message, NULL);
    return false;
}

static void
s_handle_message (s_coord_t *self)
{
    ps_error_t err;
    int rc = ps_msg_recv (self->msg, self->router, true, &err);
    if (rc == PS_EIO) {
        ps_warn ("receive: %s", err.msg);
        return;
    }
    zmq_msg_t *envelope;
    size_t nenvelope = ps_msg_envelope (self->msg, &envelope);
    if (rc == 0)
        rc = ps_msg_decode (self->msg, &err);
    if (rc) {
        ps_msg_send_error (self->router, envelope, nenvelope, ps_msg_id (self->msg), rc,
                           err.msg, NULL);
        return;
    }
    const char *id = zmq_msg_data (&envelope [0]);
    size_t id_len = zmq_msg_size (&envelope [0]);
    const char *type = ps_msg_type (self->msg);
    if (strcmp (type, "register") == 0) {
        const msgpack_object *h = ps_msg_header (self->msg);
        char role_name [16] = "?";
        ps_obj_str (ps_obj_get (h, "role"), role_name, sizeof role_name);
        if (s_authorized (self, role_name, ps_obj_get (h, "index")->via.u64))
            s_on_register (self, id, id_len);
        return;
    }
    s_role_t role;
    int index;
    s_peer_t *peer = s_find_peer (self, id, id_len, &role, &index);
    if (peer && !s_authorized (self, s_role_names [role], (uint64_t) index))
        return;
    if (!peer) {
        //  A process this coordinator does not know (it restarted, or the
        //  process's registration was superseded): tell it to register.
        ps_msg_send_error (self->router, envelope, nenvelope, ps_msg_id (self->msg),
                           PS_ENOTFOUND, "unknown peer: register first", NULL);
        return;
    }
    peer->last_seen = ps_clock_ms ();
    if (!peer->alive) {
        //  Declared failed but alive after all (it was stopped, or its
        //  network was cut): use it again. Its steps were handed to others
        //  already; the servers' ledgers ignore its late pushes.
        peer->alive = true;
        peer->silent = false;
        s_tty_clear (self);
        ps_info ("%s:%d is back", s_role_names [role], index);
        //  Nothing follows the done record in the metrics.
        if (self->state != S_STOPPING)
            s_event (self, "rejoined", json_pack ("{s:s, s:i}", "role", s_role_names [role],
                                                  "task", index));
        //  A member that was stopped may still wait in a collective of a
        //  ring formed without it since: end that at once.
        if (self->mirrored && role == S_WORKER)
            m_send_abort (self, peer);
    }
    if (strcmp (type, "heartbeat") == 0)
        return;
    if (strcmp (type, "work_request") == 0) {
        s_on_work_request (self, peer, role, index);
        return;
    }
    char message [96];
    snprintf (message, sizeof message, "the coordinator does not serve \"%s\"", type);
    ps_msg_send_error (self->router, envelope, nenvelope, ps_msg_id (self->msg), PS_EINVAL,
                       message, NULL);
}

//  ---------------------------------------------------------------------
//  Mirrored mode
//
//  Every worker holds a replica and the coordinator moves the whole ring
//  from one phase to the next: it holds each member's work_request until
//  every member has asked, then answers them all with the next phase's
//  work (join a ring, run a global step, evaluate a shard, save the
//  replica). A global step hands each member one batch of the schedule,
//  so the schedule counts batches exactly as in async mode and a
//  checkpoint's done set means the same in both modes.
//
//  When a member dies the members still in the phase are told to abort,
//  and once every live worker is held again the ring is formed anew. A
//  global step cut short counts if any survivor completed it (the
//  all-reduce gave every member that finished the same sum, and a
//  survivor that finished applied it), and goes back to the queue
//  otherwise. The root of the new ring is a survivor whose replica is at
//  the committed count; every other member (a survivor that fell behind,
//  a worker that joins or comes back) takes over its replica. With no
//  such survivor, the root loads the newest checkpoint.

static void s_finish (s_coord_t *self, double now);
static bool s_checkpoint_due (s_coord_t *self, double now);

//  Start an answer of kind to peer's held request with the base fields of
//  "work" and room for extra more; m_send sends it.
static msgpack_packer *
m_begin (s_coord_t *self, s_peer_t *peer, const char *kind, uint64_t step, size_t extra)
{
    uint64_t epoch = 0, batch = 0;
    if (step && self->schedule && strcmp (kind, "train") == 0)
        ps_schedule_locate (self->schedule, step, &epoch, &batch);
    msgpack_packer *pk = s_begin_work (self, peer->held_id, kind, step, epoch, batch, 0,
                                       extra + 1);
    ps_pack_uint (pk, "order", self->order);
    return pk;
}

static void
m_send (s_coord_t *self, s_peer_t *peer, bool work)
{
    s_send (self, peer, NULL, 0);
    peer->held = false;
    peer->busy = work;
    peer->ok = false;
}

//  Tell peer to abandon any collective of the current ring or an older one.
static void
m_send_abort (s_coord_t *self, s_peer_t *peer)
{
    ps_writer_reset (&self->writer, "abort", ++self->next_id, 1);
    ps_pack_uint (&self->writer.pk, "generation", self->generation);
    s_send (self, peer, NULL, 0);
}

//  Tell the live members still busy in the current phase to abandon it.
static void
m_abort (s_coord_t *self)
{
    for (int r = 0; r < self->ring_n; r++) {
        s_peer_t *peer = &self->peers [S_WORKER][self->ring [r]];
        if (peer->alive && peer->busy)
            m_send_abort (self, peer);
    }
}

//  A worker failed (s_worker_failed): the ring must be formed again.
static void
m_worker_failed (s_coord_t *self, s_peer_t *peer)
{
    bool member = peer->in_ring || peer->busy;
    peer->held = peer->busy = peer->ok = false;
    peer->in_ring = peer->current = false;
    if (member) {
        self->need_ring = true;
        m_abort (self);
    }
}

static void
m_stop_all (s_coord_t *self)
{
    for (int w = 0; w < self->npeers [S_WORKER]; w++) {
        s_peer_t *peer = &self->peers [S_WORKER][w];
        if (peer->alive && peer->held) {
            m_begin (self, peer, "stop", 0, 0);
            m_send (self, peer, false);
            peer->stopped = true;
        }
    }
}

//  Prepare the ring's next formation to load the newest checkpoint (at
//  start, or when no replica of the run survived): rewind the schedule to
//  it. Returns 0, PS_ENOTFOUND, or another code after failing the run.
static int
m_prepare_load (s_coord_t *self, const char *why)
{
    char dir [PS_JOB_PATH_MAX + 64];
    json_t *manifest;
    int rc = s_checkpoint_open (self, dir, self->load_dir, sizeof dir, &manifest);
    if (rc)
        return rc;
    uint64_t watermark, *above;
    size_t count;
    s_done_set_read (manifest, &watermark, &above, &count);
    uint64_t before = ps_schedule_done_count (self->schedule);
    ps_error_t err;
    rc = ps_schedule_restore (self->schedule, watermark, above, count, &err);
    free (above);
    json_decref (manifest);
    if (rc) {
        s_fail (self, rc, "restoring from %s: %s", dir, err.msg);
        return rc;
    }
    uint64_t after = ps_schedule_done_count (self->schedule);
    self->g_active = false;
    self->load_pending = true;
    self->need_ring = true;
    for (int w = 0; w < self->npeers [S_WORKER]; w++)
        self->peers [S_WORKER][w].current = false;
    if (self->eval_pending && self->eval_step > after)
        self->eval_pending = false;
    if (self->have_eval && self->last_eval_step > after)
        self->have_eval = false;
    self->ckpt_done = after;
    self->ckpt_ms = ps_clock_ms ();
    s_tty_clear (self);
    ps_info ("%s: the ring will load %s (step %" PRIu64 "); %" PRIu64 " step%s to train "
             "again", why, dir, after, before > after ? before - after : 0,
             before - after == 1 ? "" : "s");
    s_event (self, "recovered",
             json_pack ("{s:s, s:s, s:I, s:I}", "reason", why, "checkpoint", dir,
                        "step", (json_int_t) after, "steps_lost",
                        (json_int_t) (before > after ? before - after : 0)));
    return 0;
}

//  The examples in batch `step`: the last batch of an epoch may be short.
static uint64_t
m_batch_examples (s_coord_t *self, uint64_t step)
{
    uint64_t epoch, batch, size = (uint64_t) self->job->batch_size;
    ps_schedule_locate (self->schedule, step, &epoch, &batch);
    uint64_t first = batch * size;
    return first + size <= self->cfg->train_count ? size : self->cfg->train_count - first;
}

//  A global step cut short by a failure counts when a survivor completed
//  it; otherwise its batches go back to the front of the queue.
static void
m_resolve_step (s_coord_t *self)
{
    if (!self->g_active)
        return;
    self->g_active = false;
    bool completed = false;
    for (int w = 0; w < self->npeers [S_WORKER]; w++) {
        s_peer_t *peer = &self->peers [S_WORKER][w];
        if (peer->alive && peer->current && peer->updates == self->committed + 1)
            completed = true;
    }
    if (completed) {
        self->committed++;
        for (int g = 0; g < self->g_n; g++)
            if (ps_schedule_complete (self->schedule, self->g_steps [g]) == 0)
                s_after_complete (self, self->g_steps [g]);
    }
    else
        for (int g = self->g_n - 1; g >= 0; g--)
            ps_schedule_release (self->schedule, self->g_owner [g], self->g_steps [g]);
    //  Only replicas at the committed count are the run's now.
    for (int w = 0; w < self->npeers [S_WORKER]; w++) {
        s_peer_t *peer = &self->peers [S_WORKER][w];
        if (peer->updates != self->committed)
            peer->current = false;
    }
    s_tty_clear (self);
    ps_info ("the global step cut short %s (%d batch%s)", completed ? "had completed on a "
             "survivor and counts" : "goes back to the queue", self->g_n,
             self->g_n == 1 ? "" : "es");
}

//  Form a ring of every live worker, in task order. Called when every live
//  worker's request is held.
static void
m_form_ring (s_coord_t *self)
{
    m_resolve_step (self);
    int n = 0;
    for (int w = 0; w < self->npeers [S_WORKER]; w++)
        if (self->peers [S_WORKER][w].alive && self->peers [S_WORKER][w].held)
            self->ring [n++] = w;
    int root = -1;
    bool agree = true;
    if (!self->load_pending) {
        for (int r = 0; r < n; r++) {
            s_peer_t *peer = &self->peers [S_WORKER][self->ring [r]];
            if (peer->current && peer->updates == self->committed) {
                if (root < 0)
                    root = r;
            }
            else
                agree = false;
        }
        //  Before the first update every replica holds the seed's values.
        if (root < 0 && self->committed == 0)
            for (int r = 0; r < n && root < 0; r++)
                if (self->peers [S_WORKER][self->ring [r]].updates == 0)
                    root = r;
        if (root < 0) {
            int rc = *self->job->checkpoint_dir
                   ? m_prepare_load (self, "no replica of the run survived") : PS_ENOTFOUND;
            if (rc == PS_ENOTFOUND)
                s_fail (self, PS_ENOTFOUND, "every replica of the run was lost and %s",
                        *self->job->checkpoint_dir ? "the checkpoint directory holds no "
                        "valid checkpoint" : "the job has no checkpoint directory to resume "
                        "from (set checkpoint.dir)");
            if (self->rc)
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
    self->generation++;
    self->order++;
    self->phase = M_FORM;
    self->need_ring = false;
    for (int w = 0; w < self->npeers [S_WORKER]; w++)
        self->peers [S_WORKER][w].in_ring = false;
    for (int r = 0; r < n; r++) {
        s_peer_t *peer = &self->peers [S_WORKER][self->ring [r]];
        peer->in_ring = true;
        msgpack_packer *pk = m_begin (self, peer, "ring", 0, 1);
        ps_pack_key (pk, "ring");
        msgpack_pack_map (pk, 5);
        ps_pack_uint (pk, "rank", (uint64_t) r);
        ps_pack_key (pk, "members");
        msgpack_pack_array (pk, (size_t) n);
        for (int m = 0; m < n; m++)
            ps_pack_str (pk, self->cfg->workers [self->ring [m]]);
        ps_pack_key (pk, "tasks");
        msgpack_pack_array (pk, (size_t) n);
        for (int m = 0; m < n; m++)
            msgpack_pack_uint64 (pk, (uint64_t) self->ring [m]);
        ps_pack_key (pk, "root");
        msgpack_pack_int64 (pk, root);
        ps_pack_key (pk, "load");
        ps_pack_str (pk, self->load_pending ? self->load_dir : "");
        m_send (self, peer, true);
    }
    s_tty_clear (self);
    ps_info ("forming ring %" PRIx64 " of %d worker%s%s", self->generation, n, n == 1 ? "" : "s",
             self->load_pending ? "; its first member loads the checkpoint"
             : root >= 0 ? "; the others take over the first current replica" : "");
}

//  Hand every member its batch of the next global step.
static void
m_start_step (s_coord_t *self)
{
    self->g_n = 0;
    uint64_t examples = 0;
    for (int r = 0; r < self->ring_n; r++) {
        s_peer_t *peer = &self->peers [S_WORKER][self->ring [r]];
        uint64_t step = 0;
        if (ps_schedule_next (self->schedule, self->ring [r], &step) == 0) {
            self->g_steps [self->g_n] = step;
            self->g_owner [self->g_n++] = self->ring [r];
            examples += m_batch_examples (self, step);
        }
        peer->batch = step;
    }
    if (self->g_n == 0)
        return;
    double lr = ps_lr_at (&self->job->lr_schedule, self->job->optimizer.lr, self->g_steps [0],
                          self->steps_per_epoch, self->total);
    //  The job's rate is for the whole cluster's global batch. A ring that
    //  has shrunk (a member failed) makes smaller global batches, and so
    //  more updates per epoch: the rate scales with the batches in the
    //  step, as Horovod Elastic recommends, so that a run that lost a
    //  member for a while trains as far as one that did not (measured:
    //  without it, a run whose ring ran short for a third of its steps
    //  ended a point above the fault-free run; with it, within 0.2).
    lr *= (double) self->g_n / (double) self->npeers [S_WORKER];
    self->lr = lr;
    self->order++;
    for (int r = 0; r < self->ring_n; r++) {
        s_peer_t *peer = &self->peers [S_WORKER][self->ring [r]];
        msgpack_packer *pk = m_begin (self, peer, "train", peer->batch, 4);
        ps_pack_key (pk, "steps");
        msgpack_pack_array (pk, (size_t) self->g_n);
        for (int g = 0; g < self->g_n; g++)
            msgpack_pack_uint64 (pk, self->g_steps [g]);
        ps_pack_uint (pk, "examples", examples);
        ps_pack_double (pk, "lr", lr);
        ps_pack_uint (pk, "update", self->committed + 1);
        m_send (self, peer, true);
    }
    self->g_active = true;
    self->phase = M_STEP;
}

static void
m_start_eval (s_coord_t *self)
{
    self->eval_pending = false;
    self->eval_busy = true;
    self->eval_role = S_WORKER;
    self->eval_index = 0;
    self->eval_busy_epoch = self->eval_epoch;
    self->eval_busy_step = self->eval_step;
    self->eval_gen = self->generation;
    self->eval_sent_ms = ps_clock_ms ();
    self->ev_loss = 0;
    self->ev_correct = self->ev_count = 0;
    self->order++;
    for (int r = 0; r < self->ring_n; r++) {
        s_peer_t *peer = &self->peers [S_WORKER][self->ring [r]];
        msgpack_packer *pk = m_begin (self, peer, "eval", self->eval_step, 2);
        ps_pack_uint (pk, "shard", (uint64_t) r);
        ps_pack_uint (pk, "shards", (uint64_t) self->ring_n);
        m_send (self, peer, true);
    }
    self->phase = M_EVAL;
}

//  A checkpoint: the ring's first member writes its replica into the
//  checkpoint's directory; the others wait.
static void
m_start_save (s_coord_t *self)
{
    self->ckpt_force = false;
    self->save_step = ps_schedule_done_count (self->schedule);
    self->save_t0 = ps_clock_ms ();
    if (self->pause_ms == 0)
        self->pause_ms = self->save_t0;
    ps_error_t err;
    int rc = ps_checkpoint_begin (self->job->checkpoint_dir, self->save_step, self->save_tmp,
                                  sizeof self->save_tmp, &err);
    if (rc) {
        s_finish_checkpoint (self, self->save_step, self->save_tmp, NULL, 0, rc, &err,
                             self->save_t0);
        return;
    }
    s_peer_t *peer = &self->peers [S_WORKER][self->ring [0]];
    self->order++;
    msgpack_packer *pk = m_begin (self, peer, "save", self->save_step, 1);
    ps_pack_key (pk, "dir");
    ps_pack_str (pk, self->save_tmp);
    m_send (self, peer, true);
    self->phase = M_SAVE;
}

//  The replica's files are written: list them as a server would have
//  reported them, then write the manifest.
static void
m_finish_save (s_coord_t *self, bool ok)
{
    ps_error_t err = { 0 };
    int rc = ok ? 0 : ps_error_set (&err, PS_EIO, "worker:%d could not write its replica "
                                    "(see its log)", self->ring [0]);
    ps_snap_file_t *files = calloc ((size_t) self->plan.nvars, sizeof *files);
    if (!files)
        abort ();
    size_t nfiles = 0;
    for (int v = 0; v < self->plan.nvars && rc == 0; v++) {
        ps_snap_file_t *file = &files [nfiles++];
        snprintf (file->var, sizeof file->var, "%s", self->plan.vars [v].var);
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
    s_finish_checkpoint (self, self->save_step, self->save_tmp, files, rc ? 0 : nfiles, rc, &err,
                         self->save_t0);
}

//  A member's report of the current phase.
static void
m_on_report (s_coord_t *self, s_peer_t *peer, const msgpack_object *report)
{
    //  Reports of an older ring (repeats, or work of a ring since
    //  replaced) say nothing about the current phase.
    const msgpack_object *order = ps_obj_get (report, "order");
    if (!peer->busy || !order || order->via.u64 != self->order
    ||  ps_obj_get (report, "generation")->via.u64 != self->generation)
        return;
    const msgpack_object *update = ps_obj_get (report, "update");
    const char *expect [] = { "", "ring", "train", "eval", "save" };
    if (!ps_obj_str_eq (ps_obj_get (report, "kind"), expect [self->phase]))
        return;
    peer->busy = false;
    peer->ok = ps_obj_str_eq (ps_obj_get (report, "status"), "done");
    if (update)
        peer->updates = update->via.u64;
    //  A global step whose summed gradient is not finite: every member
    //  refused it, and computing it again would give the same sum.
    const msgpack_object *error = ps_obj_get (report, "error");
    char text [PS_ERROR_MSG_MAX] = "";
    if (!peer->ok && error && ps_obj_str (error, text, sizeof text) == 0
    &&  strncmp (text, "nonfinite", 9) == 0 && self->phase == M_STEP) {
        self->nonfinite_failures++;
        s_fail (self, PS_ENONFINITE, "mirrored mode: the summed gradient of update %" PRIu64
                " was refused by every replica (%s); retrying would give the same sum. Lower "
                "the learning rate, clip the gradients (optimizer.clip_norm), or check the data",
                self->committed + 1, text);
        return;
    }
    //  The others wait for this member in the collective: end it for them
    //  now rather than at their ring timeout.
    if (!peer->ok && (self->phase == M_FORM || self->phase == M_STEP))
        m_abort (self);
    peer->recorded = ps_obj_get (report, "applied")->via.u64;
    peer->duplicates = ps_obj_get (report, "duplicates")->via.u64;
    if (self->phase == M_STEP) {
        peer->loss = ps_obj_double (ps_obj_get (report, "loss"));
        peer->correct = ps_obj_get (report, "correct")->via.u64;
        peer->count = ps_obj_get (report, "count")->via.u64;
        peer->compute_ms = ps_obj_double (ps_obj_get (report, "compute_ms"));
        peer->comm_ms = ps_obj_double (ps_obj_get (report, "comm_ms"));
    }
    else
    if (self->phase == M_EVAL && peer->ok) {
        const msgpack_object *checksum = ps_obj_get (report, "checksum");
        peer->checksum = checksum ? checksum->via.u64 : 0;
        self->ev_loss += ps_obj_double (ps_obj_get (report, "loss"));
        self->ev_correct += ps_obj_get (report, "correct")->via.u64;
        self->ev_count += ps_obj_get (report, "count")->via.u64;
    }
}

//  Every live member has reported the current phase: act on the outcome.
static void
m_end_phase (s_coord_t *self)
{
    bool all = true;
    for (int r = 0; r < self->ring_n; r++) {
        s_peer_t *peer = &self->peers [S_WORKER][self->ring [r]];
        if (!peer->alive || !peer->ok)
            all = false;
    }
    m_phase_t phase = self->phase;
    self->phase = M_IDLE;
    s_peer_t *first = &self->peers [S_WORKER][self->ring [0]];
    switch (phase) {
        case M_IDLE:
            return;
        case M_FORM: {
            //  After a load the root's count is the run's; otherwise every
            //  member must be at the committed count.
            uint64_t target = self->load_pending ? first->updates : self->committed;
            for (int r = 0; r < self->ring_n && all; r++)
                if (self->peers [S_WORKER][self->ring [r]].updates != target)
                    all = false;
            if (!all) {
                //  A failed join leaves a replica as it was (or the root's
                //  whole): those still at the committed count stay the run's.
                for (int r = 0; r < self->ring_n && !self->load_pending; r++) {
                    s_peer_t *peer = &self->peers [S_WORKER][self->ring [r]];
                    if (peer->updates != self->committed)
                        peer->current = false;
                }
                self->need_ring = true;
                if (++self->form_failures >= S_MAX_FORM_FAILURES)
                    s_fail (self, PS_EIO, "the ring could not be formed %d times in a row "
                            "(see the workers' logs)", self->form_failures);
                return;
            }
            self->committed = target;
            self->load_pending = false;
            self->form_failures = 0;
            for (int r = 0; r < self->ring_n; r++)
                self->peers [S_WORKER][self->ring [r]].current = true;
            json_t *members = json_array ();
            for (int r = 0; r < self->ring_n; r++)
                json_array_append_new (members, json_integer (self->ring [r]));
            s_tty_clear (self);
            ps_info ("ring %" PRIx64 " formed: %d worker%s, replicas at update %" PRIu64,
                     self->generation, self->ring_n, self->ring_n == 1 ? "" : "s", target);
            s_event (self, "ring", json_pack ("{s:I, s:o, s:I}", "generation",
                                              (json_int_t) self->generation, "workers", members,
                                              "updates", (json_int_t) target));
            return;
        }
        case M_STEP:
            for (int r = 0; r < self->ring_n && all; r++)
                if (self->peers [S_WORKER][self->ring [r]].updates != self->committed + 1)
                    all = false;
            if (!all) {
                self->need_ring = true;
                return;
            }
            self->g_active = false;
            self->committed++;
            for (int r = 0; r < self->ring_n; r++) {
                s_peer_t *peer = &self->peers [S_WORKER][self->ring [r]];
                if (!peer->batch || ps_schedule_complete (self->schedule, peer->batch) != 0)
                    continue;
                peer->steps++;
                self->w_steps++;
                self->w_count += peer->count;
                self->samples += peer->count;
                self->w_correct += peer->correct;
                self->w_loss += peer->loss;
                s_track_loss (self, peer->loss, peer->count);
                self->w_compute_ms += peer->compute_ms;
                self->w_comm_ms += peer->comm_ms;
                s_after_complete (self, peer->batch);
            }
            return;
        case M_EVAL: {
            if (!all) {
                s_requeue_eval (self);
                self->need_ring = true;
                return;
            }
            self->eval_busy = false;
            bool equal = true;
            for (int r = 1; r < self->ring_n; r++)
                if (self->peers [S_WORKER][self->ring [r]].checksum != first->checksum)
                    equal = false;
            self->replica_checks++;
            self->replica_checksum = first->checksum;
            if (!equal) {
                //  Never expected; repaired by forming the ring again, the
                //  members that differ from the first taking over its replica.
                self->replica_mismatches++;
                for (int r = 1; r < self->ring_n; r++) {
                    s_peer_t *peer = &self->peers [S_WORKER][self->ring [r]];
                    if (peer->checksum != first->checksum)
                        peer->current = false;
                }
                self->need_ring = true;
                s_tty_clear (self);
                ps_error ("the replicas differ after %" PRIu64 " updates (checksums of worker:%d "
                          "and another member differ); forming the ring again", self->committed,
                          self->ring [0]);
            }
            json_t *sums = json_array ();
            for (int r = 0; r < self->ring_n; r++) {
                char hex [24];
                snprintf (hex, sizeof hex, "%016" PRIx64,
                          self->peers [S_WORKER][self->ring [r]].checksum);
                json_array_append_new (sums, json_string (hex));
            }
            s_event (self, "replicas", json_pack ("{s:I, s:I, s:b, s:o}", "step",
                                                  (json_int_t) self->eval_busy_step, "updates",
                                                  (json_int_t) self->committed, "equal", equal,
                                                  "checksums", sums));
            s_eval_result (self, self->ev_loss, self->ev_correct, self->ev_count, "ring",
                           self->ring_n);
            return;
        }
        case M_SAVE:
            m_finish_save (self, first->ok);
            if (!first->alive)
                self->need_ring = true;
            return;
    }
}

//  A work_request from a worker in mirrored mode: take its reports and
//  hold it until the ring goes on.
static void
m_on_request (s_coord_t *self, s_peer_t *peer, uint64_t id)
{
    const msgpack_object *h = ps_msg_header (self->msg);
    const msgpack_object *reports = ps_obj_get (h, "reports");
    for (uint32_t i = 0; i < reports->via.array.size; i++)
        m_on_report (self, peer, &reports->via.array.ptr [i]);
    //  A worker asks only when it has nothing in hand: still busy here, it
    //  never got its order (lost on a connection that dropped, or given up
    //  on), and the phase goes on without it.
    if (peer->busy) {
        peer->busy = peer->ok = false;
        if (self->phase == M_FORM || self->phase == M_STEP)
            m_abort (self);
    }
    peer->held = true;
    peer->held_id = id;
    peer->held_ms = ps_clock_ms ();
    if (self->state == S_STOPPING || ps_obj_get (h, "want")->via.u64 == 0) {
        m_begin (self, peer, self->state == S_STOPPING ? "stop" : "wait", 0, 0);
        m_send (self, peer, false);
        peer->stopped = self->state == S_STOPPING;
    }
}

//  The ring's state machine, run after every burst of messages.
static void
m_advance (s_coord_t *self, double now)
{
    //  Requests held long (the ring waits for a worker that is slow to
    //  come, or for a long phase) are answered, so their workers do not
    //  take them for lost.
    for (int w = 0; w < self->npeers [S_WORKER]; w++) {
        s_peer_t *peer = &self->peers [S_WORKER][w];
        if (peer->alive && peer->held && now - peer->held_ms > S_HOLD_MS) {
            m_begin (self, peer, "wait", 0, 0);
            m_send (self, peer, false);
        }
    }
    if (self->phase != M_IDLE) {
        for (int r = 0; r < self->ring_n; r++) {
            s_peer_t *peer = &self->peers [S_WORKER][self->ring [r]];
            if (peer->alive && peer->busy)
                return;
        }
        m_end_phase (self);
        if (self->rc)
            return;
    }
    int alive = 0, held = 0;
    for (int w = 0; w < self->npeers [S_WORKER]; w++) {
        s_peer_t *peer = &self->peers [S_WORKER][w];
        alive += peer->alive;
        held += peer->alive && peer->held;
        //  A worker that joins, or comes back, is taken in at a step boundary.
        if (peer->alive && peer->held && !peer->in_ring)
            self->need_ring = true;
    }
    bool ready = held > 0;
    for (int r = 0; r < self->ring_n && !self->need_ring; r++)
        if (!self->peers [S_WORKER][self->ring [r]].held)
            ready = false;
    if (self->need_ring && held < alive)
        ready = false;
    if (ready) {
        if (self->need_ring)
            m_form_ring (self);
        else
        if (self->ckpt_force || s_checkpoint_due (self, now))
            m_start_save (self);
        else
        if (self->eval_pending)
            m_start_eval (self);
        else
        if (ps_schedule_finished (self->schedule))
            s_finish (self, now);
        else
            m_start_step (self);
    }
}

//  Set up a mirrored run once the workers are there: from the newest
//  checkpoint when there is one, else from the seed's initial values.
static int
m_setup (s_coord_t *self)
{
    int rc = s_resume (self, m_prepare_load);
    if (rc < 0 && rc != PS_ENOTFOUND)
        return -1;
    if (rc == PS_ENOTFOUND) {
        self->committed = 0;
        //  A checkpoint of the initial state, so that losing every worker
        //  before the first interval can be recovered too.
        self->ckpt_force = *self->job->checkpoint_dir != 0;
    }
    self->need_ring = true;
    self->lr = self->job->optimizer.lr;
    self->state = S_RUNNING;
    return 0;
}

//  ---------------------------------------------------------------------
//  Timers and the state machine

static void
s_check_peers (s_coord_t *self, double now)
{
    for (int r = 0; r < S_ROLES; r++)
        for (int i = 0; i < self->npeers [r]; i++) {
            s_peer_t *peer = &self->peers [r][i];
            if (!peer->alive || now - peer->last_seen <= self->job->heartbeat_timeout_ms)
                continue;
            char reason [96];
            snprintf (reason, sizeof reason, "no heartbeat for %.0f ms", now - peer->last_seen);
            peer->silent = true;
            if (self->state == S_STOPPING) {
                //  The run is over and its done record written: a process
                //  told to stop falls silent as it exits, and one that is
                //  silent otherwise only changes whom the stop waits for.
                peer->alive = false;
                continue;
            }
            if (r == S_PS)
                s_server_failed (self, i, reason);
            else
                s_worker_failed (self, (s_role_t) r, i, reason);
        }
    if (!self->cfg->supervisor)
        return;
    ps_child_event_t events [16];
    size_t n = ps_supervisor_poll (self->cfg->supervisor, events, 16);
    for (size_t e = 0; e < n; e++) {
        const char *role_name = self->cfg->child_role [events [e].child];
        int index = self->cfg->child_index [events [e].child];
        char reason [96];
        if (events [e].signaled)
            snprintf (reason, sizeof reason, "process %d killed by signal %d", (int) events [e].pid,
                      events [e].status - 128);
        else
            snprintf (reason, sizeof reason, "process %d exited with status %d",
                      (int) events [e].pid, events [e].status);
        //  Exit status 0 is a child that was told to stop (SIGTERM, or a
        //  shutdown request): the supervisor does not restart it. A worker
        //  that stops is a failure like any other; a server that stops
        //  before the end leaves the run without its partitions.
        bool clean = events [e].status == 0 && !events [e].signaled;
        if (clean && self->state == S_STOPPING)
            continue;
        if (clean && strcmp (role_name, "ps") == 0 && self->state != S_WAIT_SERVERS) {
            s_fail (self, PS_EIO, "ps:%d stopped (exit status 0, pid %d) before training "
                    "completed; a local cluster restarts only servers that die", index,
                    (int) events [e].pid);
            return;
        }
        for (int r = 0; r < S_ROLES; r++)
            if (strcmp (role_name, s_role_names [r]) == 0 && index < self->npeers [r]) {
                //  Its process is gone: no longer one that may come back.
                self->peers [r][index].silent = false;
                if (!self->peers [r][index].alive)
                    continue;
                if (r == S_PS)
                    s_server_failed (self, index, reason);
                else
                    s_worker_failed (self, (s_role_t) r, index, reason);
            }
        if (events [e].state == PS_CHILD_GAVE_UP) {
            s_tty_clear (self);
            ps_error ("%s:%d keeps failing; no more restarts (see its log)", role_name, index);
        }
    }
}

static bool
s_checkpoint_due (s_coord_t *self, double now)
{
    if (!*self->job->checkpoint_dir || now < self->ckpt_retry_ms)
        return false;
    uint64_t done = ps_schedule_done_count (self->schedule);
    return (self->job->checkpoint_steps && done - self->ckpt_done >= self->job->checkpoint_steps)
        || (self->job->checkpoint_seconds > 0 && done > self->ckpt_done
            && now - self->ckpt_ms >= self->job->checkpoint_seconds * 1e3);
}

//  The servers' ledgers (or the replicas') disagree with the steps done:
//  the run fails, naming what disagrees. Unlike s_fail it lets the run
//  stop as a finished one does, so every process is told to stop.
static void
s_fail_verify (s_coord_t *self, const json_t *mismatches, uint64_t done)
{
    char list [PS_ERROR_MSG_MAX - 160] = "";
    size_t len = 0, i;
    json_t *m;
    json_array_foreach (mismatches, i, m) {
        const char *role = json_string_value (json_object_get (m, "role"));
        int task = (int) json_integer_value (json_object_get (m, "task"));
        const char *var = json_string_value (json_object_get (m, "var"));
        const char *error = json_string_value (json_object_get (m, "error"));
        char item [192];
        if (error)
            snprintf (item, sizeof item, "%s:%d could not be asked (%s)", role, task, error);
        else
        if (var)
            snprintf (item, sizeof item, "%s:%d %s part %d recorded %" JSON_INTEGER_FORMAT,
                      role, task, var, (int) json_integer_value (json_object_get (m, "part")),
                      json_integer_value (json_object_get (m, "recorded")));
        else
            snprintf (item, sizeof item, "%s:%d's replica recorded %" JSON_INTEGER_FORMAT,
                      role, task, json_integer_value (json_object_get (m, "recorded")));
        int n = snprintf (list + len, sizeof list - len, "%s%s", i ? "; " : "", item);
        if (n < 0 || (size_t) n >= sizeof list - len) {
            snprintf (list + len, sizeof list - len, "; ...");
            break;
        }
        len += (size_t) n;
    }
    s_tty_clear (self);
    ps_error ("the run is not what was scheduled: %" PRIu64 " steps were done, but %s",
              done, list);
    if (!self->rc)
        self->rc = ps_error_set (self->err, PS_ECORRUPT, "%zu partition%s or replica%s disagree "
                                 "with the %" PRIu64 " steps done (%s)", json_array_size (mismatches),
                                 json_array_size (mismatches) == 1 ? "" : "s",
                                 json_array_size (mismatches) == 1 ? "" : "s", done, list);
}

static void
s_finish (s_coord_t *self, double now)
{
    //  The final evaluation, of the parameters after the last step.
    uint64_t done = ps_schedule_done_count (self->schedule);
    if (self->job->eval_epochs > 0 || self->job->eval_steps > 0) {
        if (!self->have_eval || self->last_eval_step != done) {
            if (!self->eval_busy && (!self->eval_pending || self->eval_step != done))
                s_queue_eval (self, done / self->steps_per_epoch, done);
            return;
        }
    }
    if (*self->job->checkpoint_dir && self->ckpt_done != done) {
        //  Training is over, but until this checkpoint is written its
        //  result lives only in the servers (or the replicas): a full disk
        //  or another passing failure is retried every few seconds, and
        //  only one that lasts about a minute fails the run.
        if (self->ckpt_failures >= S_FINAL_CKPT_TRIES) {
            s_fail (self, PS_EIO, "the final checkpoint in \"%s\" failed %d times (see above)",
                    self->job->checkpoint_dir, self->ckpt_failures);
            return;
        }
        if (now < self->ckpt_retry_ms)
            return;
        if (self->mirrored) {
            //  The ring's first member writes it; this runs again when it
            //  has reported.
            m_start_save (self);
            return;
        }
        if (s_take_checkpoint (self))
            return;
    }
    //  The done record: what was trained, and what every server applied.
    //  Each partition's ledger must hold exactly the steps done: one step
    //  more or less means a gradient applied that was never scheduled, or
    //  a step counted that no server applied, and the run says so.
    double wall = (now - self->start_ms) / 1e3;
    json_t *servers = json_array ();
    json_t *mismatches = json_array ();
    for (int s = 0; s < self->cfg->nservers && self->client; s++) {
        ps_part_stats_t *stats = NULL;
        size_t count = 0;
        ps_error_t err;
        json_t *server = json_object ();
        json_object_set_new (server, "task", json_integer (s));
        if (ps_client_stats (self->client, s, &stats, &count, &err) == 0) {
            uint64_t updates = 0, duplicates = 0;
            json_t *parts = json_array ();
            for (size_t p = 0; p < count; p++) {
                updates += stats [p].updates;
                duplicates += stats [p].duplicates;
                json_array_append_new (parts,
                    json_pack ("{s:s, s:i, s:I, s:I, s:I}", "var", stats [p].var,
                               "part", (int) stats [p].part,
                               "updates", (json_int_t) stats [p].updates,
                               "recorded", (json_int_t) stats [p].recorded,
                               "duplicates", (json_int_t) stats [p].duplicates));
                if (stats [p].recorded != done)
                    json_array_append_new (mismatches,
                        json_pack ("{s:s, s:i, s:s, s:i, s:I, s:I}", "role", "ps", "task", s,
                                   "var", stats [p].var, "part", (int) stats [p].part,
                                   "recorded", (json_int_t) stats [p].recorded,
                                   "expected", (json_int_t) done));
            }
            json_object_set_new (server, "updates", json_integer ((json_int_t) updates));
            json_object_set_new (server, "duplicates", json_integer ((json_int_t) duplicates));
            json_object_set_new (server, "partitions", parts);
        }
        else {
            json_object_set_new (server, "error", json_string (err.msg));
            json_array_append_new (mismatches,
                json_pack ("{s:s, s:i, s:s}", "role", "ps", "task", s, "error", err.msg));
        }
        free (stats);
        json_array_append_new (servers, server);
    }
    json_t *workers = json_array ();
    for (int w = 0; w < self->npeers [S_WORKER]; w++)
        json_array_append_new (workers, json_integer ((json_int_t) self->peers [S_WORKER][w].steps));
    s_tty_clear (self);
    ps_info ("training done: %" PRIu64 " steps in %.1f s (%.0f samples/s), test accuracy %.4f",
             done, wall, wall > 0 ? self->samples / wall : 0, self->have_eval ? self->test_accuracy : NAN);
    json_t *record = json_pack ("{s:I, s:I, s:I, s:f, s:f, s:o, s:i, s:i, s:i, s:o, s:o}",
                                "steps", (json_int_t) done, "total", (json_int_t) self->total,
                                "steps_per_epoch", (json_int_t) self->steps_per_epoch,
                                "wall_s", wall, "samples_per_s", wall > 0 ? self->samples / wall : 0,
                                "test_accuracy", self->have_eval ? json_real (self->test_accuracy)
                                                                 : json_null (),
                                "checkpoints", self->checkpoints,
                                "worker_failures", self->worker_failures,
                                "recoveries", self->recoveries,
                                "servers", servers, "worker_steps", workers);
    json_object_set_new (record, "refused_reports",
                         json_integer ((json_int_t) self->refused_reports));
    json_object_set_new (record, "refused_registrations",
                         json_integer ((json_int_t) self->refused_registrations));
    json_object_set_new (record, "nonfinite_failures",
                         json_integer ((json_int_t) self->nonfinite_failures));
    json_object_set_new (record, "diverged", json_boolean (self->diverging));
    json_object_set_new (record, "test_loss", self->have_eval && isfinite (self->test_loss)
                                              ? json_real (self->test_loss) : json_null ());
    json_object_set_new (record, "mode", json_string (ps_mode_name (self->job->mode)));
    if (self->mirrored) {
        //  What the replicas hold: every member's ledger should record each
        //  batch once (recorded = steps), none refused as a repeat, and
        //  every evaluation found the replicas bitwise equal.
        json_t *replicas = json_array ();
        for (int r = 0; r < self->ring_n; r++) {
            const s_peer_t *peer = &self->peers [S_WORKER][self->ring [r]];
            json_array_append_new (replicas,
                json_pack ("{s:i, s:I, s:I, s:I}", "task", self->ring [r],
                           "updates", (json_int_t) peer->updates,
                           "recorded", (json_int_t) peer->recorded,
                           "duplicates", (json_int_t) peer->duplicates));
            if (peer->recorded != done)
                json_array_append_new (mismatches,
                    json_pack ("{s:s, s:i, s:I, s:I}", "role", "worker", "task", self->ring [r],
                               "recorded", (json_int_t) peer->recorded,
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
    json_object_set_new (record, "verified", json_boolean (json_array_size (mismatches) == 0));
    if (json_array_size (mismatches) > 0)
        s_fail_verify (self, mismatches, done);
    json_object_set_new (record, "mismatches", mismatches);
    s_event (self, "done", record);
    self->state = S_STOPPING;
    //  Every process hears that the run is over at once, not a heartbeat
    //  interval later: the stop may take less than that.
    s_send_heartbeats (self, true);
    if (self->mirrored)
        m_stop_all (self);
    //  Workers learn they are done when they next ask; give them a few
    //  heartbeats to do so.
    self->stop_deadline_ms = now + 4.0 * self->job->heartbeat_ms + 1000;
}

static void
s_advance (s_coord_t *self, double now)
{
    switch (self->state) {
        case S_WAIT_SERVERS: {
            //  A mirrored run waits for its workers instead: they hold the
            //  variables. Past the timeout it starts with those there, and
            //  takes the others into the ring when they come.
            s_role_t role = self->mirrored ? S_WORKER : S_PS;
            int want = self->mirrored ? self->cfg->nworkers : self->cfg->nservers;
            const char *const *endpoints = self->mirrored ? self->cfg->workers : self->cfg->servers;
            const char *noun = self->mirrored ? "workers" : "servers";
            int alive = s_alive (self, role);
            bool late = now - self->start_ms > self->job->register_timeout_ms;
            if (alive == want || (self->mirrored && late && alive > 0)) {
                s_tty_clear (self);
                if (alive == want)
                    ps_info ("all %d %s registered", alive, noun);
                else
                    ps_warn ("%d of %d workers registered within %d ms; starting with them",
                             alive, want, self->job->register_timeout_ms);
                if ((self->mirrored ? m_setup (self) : s_setup (self)) == 0) {
                    self->start_ms = self->window_ms = ps_clock_ms ();
                    s_event (self, "started",
                             json_pack ("{s:I, s:I, s:i, s:i}", "total", (json_int_t) self->total,
                                        "steps_per_epoch", (json_int_t) self->steps_per_epoch,
                                        "servers", self->cfg->nservers,
                                        "workers", self->cfg->nworkers));
                }
                return;
            }
            if (late) {
                char missing [512] = "";
                for (int s = 0; s < want; s++)
                    if (!self->peers [role][s].alive) {
                        size_t len = strlen (missing);
                        snprintf (missing + len, sizeof missing - len, "%s%s:%d at %s",
                                  len ? ", " : "", s_role_names [role], s, endpoints [s]);
                    }
                s_fail (self, PS_ETIMEDOUT, "%d of %d %s registered within %d ms; missing %s",
                        alive, want, noun, self->job->register_timeout_ms, missing);
                return;
            }
            if (now - self->wait_log_ms >= 1000) {
                s_tty_clear (self);
                ps_info ("waiting for %s: %d/%d registered", noun, alive, want);
                self->wait_log_ms = now;
            }
            return;
        }
        case S_RUNNING:
            //  Without a live worker nothing can progress; wait for one as
            //  long as for the servers at start-up, then give up.
            if (s_alive (self, S_WORKER) == 0 && s_alive (self, S_EVALUATOR) == 0) {
                if (self->no_worker_ms == 0)
                    self->no_worker_ms = now;
                else
                if (now - self->no_worker_ms > self->job->register_timeout_ms) {
                    s_fail (self, PS_ETIMEDOUT, "%s", "no worker has been alive for the "
                            "registration timeout; training cannot go on");
                    return;
                }
            }
            else
                self->no_worker_ms = 0;
            if (self->mirrored) {
                m_advance (self, now);
                return;
            }
            if (ps_schedule_finished (self->schedule)) {
                s_finish (self, now);
                return;
            }
            if (s_checkpoint_due (self, now)) {
                self->state = S_CHECKPOINT;
                self->pause_ms = now;
            }
            else
                return;
            //  The checkpoint may be taken at once.
            __attribute__ ((fallthrough));
        case S_CHECKPOINT:
            if (ps_schedule_in_flight (self->schedule) == 0) {
                s_take_checkpoint (self);
                self->state = S_RUNNING;
            }
            return;
        case S_RECOVER: {
            int alive = s_alive (self, S_PS);
            size_t in_flight = ps_schedule_in_flight (self->schedule);
            if (alive == self->cfg->nservers && in_flight == 0 && now >= self->recover_retry_ms) {
                int rc = s_restore (self, "recovering from a server failure");
                if (rc == 0) {
                    self->recoveries++;
                    self->state = S_RUNNING;
                }
                else
                if (rc == PS_ENOTFOUND && !self->rc)
                    s_fail (self, PS_ENOTFOUND, "a server failed and \"%s\" holds no valid "
                            "checkpoint to recover from", self->job->checkpoint_dir);
                else
                    self->recover_retry_ms = now + 1000;
                return;
            }
            if (now - self->recover_ms > self->job->register_timeout_ms) {
                s_fail (self, PS_ETIMEDOUT, "%s", "a failed server did not come back within "
                        "the registration timeout");
                return;
            }
            if (now - self->recover_log_ms >= 2000) {
                s_tty_clear (self);
                ps_info ("recovering: %d/%d servers alive, %zu step%s in flight", alive,
                         self->cfg->nservers, in_flight, in_flight == 1 ? "" : "s");
                self->recover_log_ms = now;
            }
            return;
        }
        case S_STOPPING: {
            //  A worker declared failed only for its silence (stopped, or
            //  starved of CPU) may be alive yet: it gets the same grace to
            //  ask and be told to stop, rather than being left waiting for
            //  a coordinator that has gone.
            bool all = true;
            for (int r = S_WORKER; r < S_ROLES; r++)
                for (int i = 0; i < self->npeers [r]; i++) {
                    const s_peer_t *peer = &self->peers [r][i];
                    if ((peer->alive || peer->silent) && !peer->stopped)
                        all = false;
                }
            if (!all && now < self->stop_deadline_ms)
                return;
            for (int s = 0; s < self->cfg->nservers && self->client; s++) {
                ps_error_t err;
                if (ps_client_shutdown (self->client, s, &err))
                    ps_warn ("ps:%d did not acknowledge shutdown: %s", s, err.msg);
            }
            //  The last word to every process that may still listen: one
            //  not yet told to stop, or whose answer was lost, stops when
            //  this coordinator falls silent instead of waiting for it.
            s_send_heartbeats (self, true);
            self->finished = true;
            return;
        }
    }
}

//  ---------------------------------------------------------------------
//  The run

//  The placement as JSON: what a checkpoint records and a resume compares.
static json_t *
s_layout_json (const ps_plan_t *plan)
{
    json_t *layout = json_array ();
    for (int v = 0; v < plan->nvars; v++) {
        const ps_plan_var_t *var = &plan->vars [v];
        json_t *shape = json_array (), *splits = json_array (), *servers = json_array ();
        for (int d = 0; d < var->shape.rank; d++)
            json_array_append_new (shape, json_integer (var->shape.dims [d]));
        for (int k = 0; k <= var->nparts; k++)
            json_array_append_new (splits, json_integer (var->splits [k]));
        for (int k = 0; k < var->nparts; k++)
            json_array_append_new (servers, json_integer (var->servers [k]));
        json_array_append_new (layout, json_pack ("{s:s, s:o, s:o, s:o}", "var", var->var,
                                                  "shape", shape, "splits", splits,
                                                  "servers", servers));
    }
    return layout;
}

//  Build the model, placement, schedule and plan. Returns 0 or fails.
static int
s_prepare (s_coord_t *self)
{
    const ps_job_t *job = self->job;
    ps_error_t err;
    self->model = self->cfg->model;
    int nvars = ps_model_variable_count (self->model);
    ps_shape_t *shapes = calloc ((size_t) nvars, sizeof (ps_shape_t));
    if (!shapes)
        abort ();
    for (int v = 0; v < nvars; v++)
        shapes [v] = ps_model_variable (self->model, v)->shape;
    //  A mirrored run places nothing: every worker holds every variable.
    if (!self->mirrored)
        self->placement = ps_placement_new (&job->partitioner, shapes, nvars,
                                            self->cfg->nservers, &err);
    free (shapes);
    if (!self->mirrored && !self->placement)
        return s_fail (self, err.code, "%s", err.msg), -1;
    self->steps_per_epoch = (self->cfg->train_count + (size_t) job->batch_size - 1)
                          / (size_t) job->batch_size;
    self->total = job->steps ? job->steps : self->steps_per_epoch * (uint64_t) job->epochs;
    self->schedule = ps_schedule_new (self->steps_per_epoch, self->total, &err);
    if (!self->schedule)
        return s_fail (self, err.code, "%s", err.msg), -1;
    ps_plan_t *plan = &self->plan;
    plan->model = strdup (ps_model_spec (self->model));
    plan->data_dir = strdup (job->data_dir);
    plan->servers = calloc ((size_t) self->cfg->nservers + 1, sizeof (char *));
    plan->vars = calloc ((size_t) nvars, sizeof (ps_plan_var_t));
    if (!plan->model || !plan->data_dir || !plan->servers || !plan->vars)
        abort ();
    plan->batch_size = job->batch_size;
    plan->seed = job->seed;
    plan->train_limit = job->train_limit;
    plan->test_limit = job->test_limit;
    plan->threads = job->worker_threads;
    snprintf (plan->device, sizeof plan->device, "%s", job->device);
    plan->nservers = self->mirrored ? 0 : self->cfg->nservers;
    plan->mirrored = self->mirrored;
    plan->optimizer = job->optimizer;
    for (int s = 0; s < plan->nservers; s++)
        if (!(plan->servers [s] = strdup (self->cfg->servers [s])))
            abort ();
    plan->nvars = nvars;
    for (int v = 0; v < nvars; v++) {
        const ps_variable_t *var = ps_model_variable (self->model, v);
        ps_plan_var_t *out = &plan->vars [v];
        snprintf (out->var, sizeof out->var, "%s", var->name);
        out->shape = var->shape;
        out->nparts = self->mirrored ? 1 : ps_placement_var (self->placement, v)->nparts;
        out->splits = calloc ((size_t) out->nparts + 1, sizeof (int64_t));
        out->servers = calloc ((size_t) out->nparts, sizeof (int));
        if (!out->splits || !out->servers)
            abort ();
        if (self->mirrored)
            out->splits [1] = var->shape.dims [0];
        else {
            const ps_placed_var_t *placed = ps_placement_var (self->placement, v);
            memcpy (out->splits, placed->splits, ((size_t) out->nparts + 1) * sizeof (int64_t));
            memcpy (out->servers, placed->servers, (size_t) out->nparts * sizeof (int));
        }
    }
    plan->client_timeout_ms = job->heartbeat_timeout_ms;
    plan->steps_per_epoch = self->steps_per_epoch;
    plan->total_steps = self->total;
    plan->eval_batch = job->batch_size > 256 ? job->batch_size : 256;
    plan->overlap = job->overlap;
    self->layout = s_layout_json (plan);
    if (!(self->job_json = ps_job_to_json (job)))
        return s_fail (self, PS_EINVAL, "%s", "the job cannot be written as JSON"), -1;
    for (int s = 0; s < self->cfg->nservers && self->placement; s++)
        ps_info ("ps:%d holds %.2f MB", s, ps_placement_server_bytes (self->placement, s) / 1e6);
    if (self->mirrored && self->cfg->nservers)
        ps_warn ("mirrored mode keeps no variables on servers; the cluster's %d ps task%s "
                 "%s not used", self->cfg->nservers, self->cfg->nservers == 1 ? "" : "s",
                 self->cfg->nservers == 1 ? "is" : "are");
    return 0;
}

static int
s_open (s_coord_t *self)
{
    const ps_coord_config_t *cfg = self->cfg;
    if (getrandom (&self->incarnation, sizeof self->incarnation, 0) != sizeof self->incarnation)
        return s_fail (self, PS_EIO, "getrandom: %s", strerror (errno)), -1;
    self->incarnation |= 1;
    //  Generations are unique to this coordinator, so a report of work
    //  handed out by a coordinator before it (whose restores may have
    //  counted to the same number) is never taken for current work.
    self->generation = (self->incarnation & 0xffffffffu) << 24;
    //  A mirrored ring's ids must grow from one formation to the next, also
    //  across a restart of the coordinator (workers that outlive it keep
    //  their rings' ids): its generations count from the wall clock's
    //  seconds instead, which a restart, taking longer than a second, moves on.
    if (cfg->job.mode == PS_MODE_MIRRORED) {
        struct timespec now;
        if (clock_gettime (CLOCK_REALTIME, &now) != 0)
            return s_fail (self, PS_EIO, "clock_gettime: %s", strerror (errno)), -1;
        self->generation = (uint64_t) now.tv_sec << 24;
    }
    //  The ROUTER lives in the context where zauth authenticates peers.
    self->router = zmq_socket (ps_curve_context (), ZMQ_ROUTER);
    int zero = 0;
    if (!self->router || zmq_setsockopt (self->router, ZMQ_LINGER, &zero, sizeof zero) != 0)
        return s_fail (self, PS_EIO, "ROUTER socket: %s", zmq_strerror (errno)), -1;
    ps_error_t err;
    if (cfg->curve && ps_curve_server (cfg->curve, self->router, &err))
        return s_fail (self, err.code, "%s", err.msg), -1;
    if (zmq_bind (self->router, cfg->bind) != 0) {
        return s_fail (self, PS_EIO, "cannot bind %s: %s", cfg->bind, zmq_strerror (errno)), -1;
    }
    self->msg = ps_msg_new ();
    ps_writer_init (&self->writer, "heartbeat", 0, 0);
    self->mirrored = cfg->job.mode == PS_MODE_MIRRORED;
    int ring = cfg->nworkers + 1;
    self->ring = calloc ((size_t) ring, sizeof (int));
    self->g_owner = calloc ((size_t) ring, sizeof (int));
    self->g_steps = calloc ((size_t) ring, sizeof (uint64_t));
    if (!self->ring || !self->g_owner || !self->g_steps)
        abort ();
    int counts [S_ROLES] = { cfg->nservers, cfg->nworkers, cfg->nevaluators };
    for (int r = 0; r < S_ROLES; r++) {
        self->npeers [r] = counts [r];
        self->peers [r] = calloc ((size_t) counts [r] + 1, sizeof (s_peer_t));
        if (!self->peers [r])
            abort ();
    }
    if (cfg->metrics_path && !(self->metrics = fopen (cfg->metrics_path, "a"))) {
        return s_fail (self, PS_EIO, "cannot open the metrics file %s: %s", cfg->metrics_path,
                       strerror (errno)), -1;
    }
    return 0;
}

static void
s_close (s_coord_t *self)
{
    s_tty_clear (self);
    ps_client_destroy (&self->client);
    ps_schedule_destroy (&self->schedule);
    ps_placement_destroy (&self->placement);
    ps_plan_release (&self->plan);
    json_decref (self->layout);
    json_decref (self->job_json);
    for (int r = 0; r < S_ROLES; r++)
        free (self->peers [r]);
    free (self->ring);
    free (self->g_owner);
    free (self->g_steps);
    if (self->msg) {
        ps_msg_destroy (&self->msg);
        ps_writer_fini (&self->writer);
    }
    if (self->router) {
        //  The last replies (the workers' "stop") may still be queued: with
        //  the linger of 0 that the run keeps, closing would drop them, and
        //  a worker told nothing waits for a coordinator that has gone
        //  (seen once in containers). A bounded linger lets them leave
        //  without letting a dead peer hold the exit up.
        int linger = S_CLOSE_LINGER_MS;
        if (zmq_setsockopt (self->router, ZMQ_LINGER, &linger, sizeof linger) != 0)
            ps_warn ("ROUTER linger: %s", zmq_strerror (errno));
        zmq_close (self->router);
    }
    if (self->metrics && fclose (self->metrics) != 0)
        ps_warn ("closing the metrics file: %s", strerror (errno));
}

int
ps_coord_run (const ps_coord_config_t *cfg, ps_error_t *err)
{
    s_coord_t self;
    memset (&self, 0, sizeof self);
    self.cfg = cfg;
    self.job = &cfg->job;
    self.err = err;
    self.state = S_WAIT_SERVERS;
    self.open_ms = self.start_ms = self.window_ms = ps_clock_ms ();
    if (s_open (&self) == 0 && s_prepare (&self) == 0) {
        ps_info ("coordinator on %s: %d servers, %d workers%s; %" PRIu64 " steps (%" PRIu64
                 " per epoch)", cfg->bind, cfg->nservers, cfg->nworkers,
                 cfg->nevaluators ? ", an evaluator" : "", self.total, self.steps_per_epoch);
        self.next_heartbeat_ms = ps_clock_ms ();
        while (!self.finished) {
            zmq_pollitem_t items [2] = {
                { self.router, 0, ZMQ_POLLIN, 0 },
                { NULL, cfg->stop_fd, ZMQ_POLLIN, 0 },
            };
            double now = ps_clock_ms ();
            long timeout = (long) (self.next_heartbeat_ms - now);
            if (timeout > 50)
                timeout = 50;
            if (timeout < 0)
                timeout = 0;
            int n = zmq_poll (items, cfg->stop_fd >= 0 ? 2 : 1, timeout);
            if (n < 0 && errno != EINTR) {
                s_fail (&self, PS_EIO, "zmq_poll: %s", zmq_strerror (errno));
                break;
            }
            if (n > 0 && (items [1].revents & ZMQ_POLLIN)) {
                struct signalfd_siginfo info;
                if (read (cfg->stop_fd, &info, sizeof info) == (ssize_t) sizeof info)
                    ps_warn ("stopping on signal %u", info.ssi_signo);
                s_fail (&self, PS_EIO, "%s", "interrupted by a signal before training completed");
                break;
            }
            //  Read everything that is queued before judging silences.
            for (int burst = 0; burst < 1000; burst++) {
                int events;
                size_t size = sizeof events;
                if (zmq_getsockopt (self.router, ZMQ_EVENTS, &events, &size) != 0
                ||  !(events & ZMQ_POLLIN))
                    break;
                s_handle_message (&self);
            }
            now = ps_clock_ms ();
            if (now >= self.next_heartbeat_ms) {
                s_send_heartbeats (&self, false);
                self.next_heartbeat_ms = now + cfg->job.heartbeat_ms;
            }
            s_check_peers (&self, now);
            if (!self.finished)
                s_advance (&self, now);
            if (self.state != S_WAIT_SERVERS && self.state != S_STOPPING && self.schedule)
                s_progress (&self, now);
        }
    }
    if (self.rc) {
        s_tty_clear (&self);
        s_event (&self, "failed", json_pack ("{s:s}", "error", err ? err->msg : "failed"));
    }
    int rc = self.rc;
    s_close (&self);
    return rc;
}
