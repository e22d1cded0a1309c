//  The coordinator's loop: it owns the socket and the modules, reads the
//  messages, and moves the run from start-up through training to its end
//  (see ps_coord.h). What differs between consistency modes is behind the
//  mode's operations (ps_mode.h); this file never asks which mode it runs.
//
//  Everything happens on one thread, so the state needs no locks. The
//  calls that block are the client's requests to the servers (create,
//  set_optimizer, fence, snapshot, restore, stats, shutdown), each bounded
//  by the heartbeat timeout and made only while every server is thought
//  alive, and a checkpoint's disk work (verifying one reads its files in
//  full). The heartbeats of the other processes queue in the meantime and
//  are read as soon as the call returns, so no one is declared failed for
//  it.
//
//  At about 1150 lines this file is over the 800 the project
//  aims for. It is one concept, the loop's state machine: start-up (the
//  servers, the placement, the workers), the dispatch of messages, and the
//  end (the final checkpoint and evaluation, the done record, the stop;
//  or, on a stop signal, a checkpoint of the steps done and the stop).
//  Each step reads and moves the same run state, and what it calls into
//  (roster, modes, evaluation queue, checkpoint control, report, outcome)
//  already lives in modules of its own.

#include "ps_coord.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <jansson.h>
#include <zmq.h>

#include "ps_admit.h"
#include "ps_ckpt_ctl.h"
#include "ps_client.h"
#include "ps_clock.h"
#include "ps_evalq.h"
#include "ps_exporter.h"
#include "ps_layout.h"
#include "ps_log.h"
#include "ps_lr_schedule.h"
#include "ps_metrics.h"
#include "ps_mode.h"
#include "ps_msg.h"
#include "ps_outcome.h"
#include "ps_partitioner.h"
#include "ps_plan.h"
#include "ps_roster.h"
#include "ps_schedule.h"
#include "ps_signal.h"

//  How long the last replies may take to leave when the coordinator exits.
#define S_CLOSE_LINGER_MS 500
//  How often the Prometheus text is rendered for the endpoint: well within
//  any scrape interval, and rare enough to cost the loop nothing.
#define S_PUBLISH_MS      500

typedef struct {
    const ps_coord_config_t *cfg;
    const ps_job_t *job;
    ps_error_t *err;
    int rc;                     //  set when the run must end in failure
    bool finished;              //  the loop may end

    void *router;
    ps_msg_t *msg;
    ps_writer_t writer;
    ps_proto_t out;             //  the message being built, which s_send encodes
    uint64_t incarnation;
    uint64_t next_id;

    ps_roster_t *roster;
    ps_admit_t *admit;
    ps_metrics_t *report;
    ps_evalq_t *evalq;
    ps_ckpt_ctl_t *ckpt;
    ps_schedule_t *schedule;
    ps_placement_t *placement;
    ps_plan_t plan;
    json_t *layout;             //  the placement, as a checkpoint records it
    json_t *job_json;           //  the job, as a checkpoint records it
    json_t *tables;             //  the embedding tables' specs, likewise

    const ps_mode_ops_t *ops;
    void *mode;
    ps_mode_host_t host;        //  what the mode may use; holds the run's state

    int worker_failures;
    double no_worker_ms;        //  since when no worker has been alive, or 0
    double unanswered_ms;       //  since when a server has not answered the final query, or 0
    int unanswered;             //  that server
    double finish_retry_ms;     //  when it may be asked again
    double next_heartbeat_ms;
    double next_publish_ms;     //  when the Prometheus text is due again
    double wait_log_ms;
    double stop_deadline_ms;

    //  A stop signal while training: the first one's number, and the
    //  checkpoints written and failed when it came (s_on_signal).
    int stop_signal;
    int ckpts_at_signal, failures_at_signal;
    bool final_at_signal;       //  it came with the final checkpoint written already
    double stop_eval_deadline_ms;   //  until when the stop waits for an evaluation
    bool stopped;               //  the run stopped on it, its checkpoint taken
} s_coord_t;

//  ---------------------------------------------------------------------
//  Sending, failing: the services a mode may call

//  Encode the message built in self->out and send it to routing id id.
static void
s_send (s_coord_t *self, const char *id, size_t id_len)
{
    ps_writer_encode (&self->writer, &self->out);
    zmq_msg_t envelope;
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
}

static void
s_host_send (void *loop, const ps_peer_t *peer)
{
    s_send (loop, peer->id, peer->id_len);
}

static ps_proto_work_t *
s_host_work (void *loop, uint64_t id, const char *kind, uint64_t step, uint64_t epoch,
             uint64_t batch, uint64_t wait_ms)
{
    s_coord_t *self = loop;
    self->out = (ps_proto_t) {
        .type = PS_PROTO_WORK, .id = id,
        .work = { .kind = kind, .step = step, .epoch = epoch, .batch = batch,
                  .generation = self->host.generation, .wait_ms = wait_ms },
    };
    return &self->out.work;
}

static ps_proto_t *
s_host_message (void *loop, ps_proto_type_t type)
{
    s_coord_t *self = loop;
    self->out = (ps_proto_t) { .type = type, .id = ++self->next_id };
    return &self->out;
}

//  End the run with code and a message; the first failure is the one
//  reported.
static void
s_host_fail (void *loop, int code, const char *message)
{
    s_coord_t *self = loop;
    self->host.failed = true;
    if (self->rc)
        return;
    self->rc = ps_error_set (self->err, code, "%s", message);
    self->finished = true;
}

static void s_fail (s_coord_t *self, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_fail (s_coord_t *self, int code, const char *fmt, ...)
{
    char message [PS_ERROR_MSG_MAX];
    va_list args;
    va_start (args, fmt);
    vsnprintf (message, sizeof message, fmt, args);
    va_end (args);
    s_host_fail (self, code, message);
}

//  The task index of worker peer, or -1 when it is not a worker.
static int
s_worker_index (s_coord_t *self, const ps_peer_t *peer)
{
    for (int w = 0; w < ps_roster_count (self->roster, PS_ROLE_WORKER); w++)
        if (ps_roster_peer (self->roster, PS_ROLE_WORKER, w) == peer)
            return w;
    return -1;
}

//  A step is done (with peer's stats, when they count): the end of an
//  epoch, and the evaluations due.
static void
s_host_completed (void *loop, uint64_t step, ps_peer_t *peer, const ps_step_report_t *stats)
{
    s_coord_t *self = loop;
    uint64_t done = ps_schedule_done_count (self->schedule);
    uint64_t per_epoch = self->host.steps_per_epoch;
    if (peer && stats) {
        peer->steps++;
        double loss, lowest;
        if (ps_metrics_step (self->report, stats, s_worker_index (self, peer), done)
        &&  self->job->stop_on_divergence
        &&  ps_metrics_diverging (self->report, &loss, &lowest))
            s_fail (self, PS_ECANCELED, "the training loss diverged (%g in the window before "
                    "step %" PRIu64 ", %g at its lowest) and the job says stop_on_divergence",
                    loss, done, lowest);
    }
    uint64_t epoch, batch;
    ps_schedule_locate (self->schedule, step, &epoch, &batch);
    if (ps_schedule_epoch_done (self->schedule, epoch)) {
        ps_metrics_tty_clear (self->report);
        ps_info ("epoch %" PRIu64 " done (%" PRIu64 "/%" PRIu64 " steps)", epoch + 1, done,
                 self->host.total);
        if (self->job->eval_epochs > 0 && (epoch + 1) % (uint64_t) self->job->eval_epochs == 0)
            ps_evalq_ask (self->evalq, epoch + 1, done);
    }
    if (self->job->eval_steps > 0 && done % self->job->eval_steps == 0)
        ps_evalq_ask (self->evalq, done / per_epoch, done);
}

//  Send a heartbeat to every live peer; with silent_too, also to those
//  only silent (a stopped or starved process may yet read it). Once the
//  run is over they carry done, so a worker whose answer "stop" was lost
//  still learns that the coordinator exits because it finished.
static void
s_send_heartbeats (s_coord_t *self, bool silent_too)
{
    bool done = self->host.state == PS_RUN_STOPPING;
    for (int r = 0; r < PS_ROLES; r++)
        for (int i = 0; i < ps_roster_count (self->roster, (ps_role_t) r); i++) {
            const ps_peer_t *peer = ps_roster_peer (self->roster, (ps_role_t) r, i);
            if (!peer->alive && !(silent_too && peer->silent))
                continue;
            self->out = (ps_proto_t) {
                .type = PS_PROTO_HEARTBEAT, .id = ++self->next_id,
                .heartbeat = { .incarnation = self->incarnation, .has_done = done,
                               .done = done },
            };
            s_send (self, peer->id, peer->id_len);
        }
}

//  ---------------------------------------------------------------------
//  Failures

//  Worker or evaluator role:index, alive until now, failed.
static void
s_task_failed (s_coord_t *self, ps_role_t role, int index, const char *reason)
{
    const ps_peer_t *peer = ps_roster_peer (self->roster, role, index);
    size_t released = self->ops->task_failed ? self->ops->task_failed (self->mode, role, index)
                                             : 0;
    ps_evalq_lost (self->evalq, role, index);
    if (role == PS_ROLE_WORKER)
        self->worker_failures++;
    ps_metrics_tty_clear (self->report);
    ps_warn ("%s:%d failed (%s); %zu step%s in flight go back to the queue", ps_role_name (role),
             index, reason, released, released == 1 ? "" : "s");
    ps_metrics_event (self->report, "worker_failed",
                      json_pack ("{s:s, s:i, s:s, s:I, s:f}", "role", ps_role_name (role),
                                 "task", index, "reason", reason,
                                 "steps_released", (json_int_t) released,
                                 "silent_ms", ps_clock_ms () - peer->last_seen));
}

//  Task role:index, alive until now, failed (reason: why it is thought so).
static void
s_failed (s_coord_t *self, ps_role_t role, int index, const char *reason)
{
    if (role != PS_ROLE_PS)
        s_task_failed (self, role, index, reason);
    else
    if (self->host.state == PS_RUN_RUNNING && self->ops->server_failed) {
        //  A wait for a server's answer to the final query ends here: the
        //  server is restored, and the query is asked afresh after that.
        self->unanswered_ms = 0;
        self->ops->server_failed (self->mode, index, reason);
    }
}

//  The deaths the launcher saw, then silences past the heartbeat timeout.
//  In that order: a process that died and fell silent long enough for
//  both (a loaded machine can keep this loop from running for a second)
//  is failed with the reason its exit gives, not with its silence.
static void
s_check_peers (s_coord_t *self, double now)
{
    ps_task_event_t events [16];
    size_t n = self->cfg->launcher ? ps_launcher_poll (self->cfg->launcher, events, 16) : 0;
    for (size_t e = 0; e < n; e++) {
        const ps_task_event_t *event = &events [e];
        if (event->index >= ps_roster_count (self->roster, event->role))
            continue;
        //  A task that exits cleanly was told to stop. A worker that stops
        //  is a failure like any other; a server that stops before the end
        //  leaves the run without its partitions.
        if (event->clean && self->host.state == PS_RUN_STOPPING) {
            //  Nor does the stop wait for it any longer: it may have
            //  exited on a signal of its own before being told.
            ps_roster_gone (self->roster, event->role, event->index);
            ps_roster_fail (self->roster, event->role, event->index);
            continue;
        }
        if (event->clean && event->role == PS_ROLE_PS && self->host.state != PS_RUN_STARTING) {
            s_fail (self, PS_EIO, "ps:%d stopped (%s) before training completed; the %s "
                    "launcher restarts only servers that die", event->index, event->reason,
                    ps_launcher_name (self->cfg->launcher));
            return;
        }
        //  A task that cannot run on its machine as told (a GPU it lacks)
        //  leaves the run unable to go on as the job asks: it ends now,
        //  with the task's own word for why.
        if (event->unusable) {
            s_fail (self, PS_EINVAL, "%s:%d cannot run: %s", ps_role_name (event->role),
                    event->index, event->reason);
            return;
        }
        //  Its process is gone: no longer one that may come back.
        ps_roster_gone (self->roster, event->role, event->index);
        if (ps_roster_fail (self->roster, event->role, event->index))
            s_failed (self, event->role, event->index, event->reason);
        if (event->gave_up) {
            ps_roster_peer (self->roster, event->role, event->index)->abandoned = true;
            ps_metrics_tty_clear (self->report);
            ps_error ("%s:%d keeps failing; no more restarts (see its log)",
                      ps_role_name (event->role), event->index);
        }
    }
    ps_role_t role;
    int index;
    while (ps_roster_expire (self->roster, now, self->job->heartbeat_timeout_ms, &role, &index)) {
        //  The run is over and its done record written: a process told to
        //  stop falls silent as it exits, and one that is silent otherwise
        //  only changes whom the stop waits for.
        if (self->host.state == PS_RUN_STOPPING)
            continue;
        char reason [96];
        snprintf (reason, sizeof reason, "no heartbeat for %.0f ms",
                  now - ps_roster_peer (self->roster, role, index)->last_seen);
        s_failed (self, role, index, reason);
        //  A launcher that cannot see this task's process starts it
        //  again; a new process is taken when it registers (the roster
        //  refuses none while this one is silent).
        ps_error_t err;
        if (self->cfg->launcher && ps_launcher_silent (self->cfg->launcher, role, index, &err))
            ps_warn ("%s:%d: %s", ps_role_name (role), index, err.msg);
    }
}

//  ---------------------------------------------------------------------
//  Messages

//  Give the plan's servers that have registered an ipc:// endpoint their
//  endpoint sets (ps_host.h): the plan's tcp endpoint (the cluster spec's,
//  as every worker can reach it) followed by the server's ipc endpoint and
//  host identity, so that a worker on the server's host uses ipc://. A
//  server not registered yet is given as the plan has it, and is reached
//  over tcp. The message's array of servers is replaced by one made here
//  (the plan's own stays as it is): free *items and the strings returned
//  (NULL: none) once the message is sent.
static char **
s_server_sets (s_coord_t *self, ps_proto_plan_t *out, const char ***items_p)
{
    *items_p = NULL;
    int n = self->plan.nservers;
    if (n == 0 || out->servers.count != (size_t) n)
        return NULL;
    char **sets = calloc ((size_t) n, sizeof (char *));
    const char **items = calloc ((size_t) n, sizeof (char *));
    if (!sets || !items)
        abort ();
    for (int s = 0; s < n; s++) {
        const ps_peer_t *peer = ps_roster_peer (self->roster, PS_ROLE_PS, s);
        const char *tail = peer->alive ? strchr (peer->endpoint, ',') : NULL;
        items [s] = self->plan.servers [s];
        if (tail && asprintf (&sets [s], "%s%s", self->plan.servers [s], tail) >= 0)
            items [s] = sets [s];
        else
            sets [s] = NULL;
    }
    out->servers.items = items;
    *items_p = items;
    return sets;
}

//  A registration: taken (the task's process, told the heartbeat and, for
//  a worker or evaluator, the plan), or refused by admission.
static void
s_on_register (s_coord_t *self, const char *id, size_t id_len)
{
    ps_role_t role;
    int index;
    ps_join_t join;
    //  Until the servers that hold the variables have all registered,
    //  workers wait (ps_admit.h), so that their plans name every server's
    //  endpoint set.
    bool servers_awaited = self->host.state == PS_RUN_STARTING
                        && self->ops->holders == PS_ROLE_PS;
    ps_peer_t *peer = ps_admit_register (self->admit, self->msg, self->router, id, id_len,
                                         ps_clock_ms (), servers_awaited, &role, &index, &join);
    if (!peer)
        return;
    if (self->ops->joined)
        self->ops->joined (self->mode, role, index,
                           join == PS_JOIN_FIRST || join == PS_JOIN_RESTARTED);
    self->out = (ps_proto_t) {
        .type = PS_PROTO_REGISTER_OK, .id = ps_msg_id (self->msg),
        .register_ok = { .coordinator = self->incarnation,
                         .heartbeat_ms = (uint64_t) self->job->heartbeat_ms,
                         .timeout_ms = (uint64_t) self->job->heartbeat_timeout_ms,
                         .has_plan = role != PS_ROLE_PS },
    };
    char **sets = NULL;
    const char **items = NULL;
    if (self->out.register_ok.has_plan) {
        ps_plan_to_proto (&self->plan, &self->out.register_ok.plan);
        sets = s_server_sets (self, &self->out.register_ok.plan, &items);
    }
    s_send (self, peer->id, peer->id_len);
    if (self->out.register_ok.has_plan) {
        ps_plan_proto_release (&self->out.register_ok.plan);
        for (int s = 0; sets && s < self->plan.nservers; s++)
            free (sets [s]);
        free (sets);
        free (items);
    }
}

//  Whether task role:index may send a message of type, as the protocol's
//  senders column says; if not, it is answered "invalid", naming who may.
static bool
s_may_send (s_coord_t *self, ps_proto_type_t type, ps_role_t role, int index)
{
    char task [48];
    snprintf (task, sizeof task, "%s:%d", ps_role_name (role), index);
    if (ps_proto_may_send (type, task))
        return true;
    char message [160];
    snprintf (message, sizeof message, "%s from %s: only %s may send it",
              ps_proto_info [type].name, task, ps_proto_info [type].senders_text);
    zmq_msg_t *envelope;
    size_t nenvelope = ps_msg_envelope (self->msg, &envelope);
    ps_msg_send_error (self->router, envelope, nenvelope, ps_msg_id (self->msg), PS_EINVAL,
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
    const ps_proto_t *m = ps_msg_proto (self->msg);
    if (m->type == PS_PROTO_REGISTER) {
        if (ps_admit_authorized (self->admit, self->msg, self->router, m->register_.role,
                                 m->register_.index))
            s_on_register (self, id, id_len);
        return;
    }
    ps_role_t role;
    int index;
    ps_peer_t *peer = ps_roster_find (self->roster, id, id_len, &role, &index);
    if (peer && !ps_admit_authorized (self->admit, self->msg, self->router, ps_role_name (role),
                                      (uint64_t) index))
        return;
    if (!peer) {
        //  A process this coordinator does not know (it restarted, or the
        //  process's registration was superseded): tell it to register.
        ps_msg_send_error (self->router, envelope, nenvelope, ps_msg_id (self->msg),
                           PS_ENOTFOUND, "unknown peer: register first", NULL);
        return;
    }
    if (ps_roster_heard (self->roster, peer, ps_clock_ms ())) {
        //  Declared failed but alive after all (it was stopped, or its
        //  network was cut): use it again. Its steps were handed to others
        //  already; the servers' ledgers ignore its late pushes.
        ps_metrics_tty_clear (self->report);
        ps_info ("%s:%d is back", ps_role_name (role), index);
        //  Nothing follows the done record in the metrics.
        if (self->host.state != PS_RUN_STOPPING)
            ps_metrics_event (self->report, "rejoined",
                              json_pack ("{s:s, s:i}", "role", ps_role_name (role),
                                         "task", index));
        if (self->ops->rejoined)
            self->ops->rejoined (self->mode, role, index);
    }
    switch (m->type) {
        case PS_PROTO_HEARTBEAT:
            return;
        case PS_PROTO_WORK_REQUEST:
            if (s_may_send (self, m->type, role, index))
                self->ops->request (self->mode, peer, role, index, m->id, &m->work_request);
            return;
        default: {
            char message [96];
            snprintf (message, sizeof message, "the coordinator does not serve \"%s\"",
                      ps_proto_info [m->type].name);
            ps_msg_send_error (self->router, envelope, nenvelope, m->id, PS_EINVAL, message,
                               NULL);
        }
    }
}

//  ---------------------------------------------------------------------
//  The end of the run

//  The servers' ledgers (or the replicas') disagree with the steps done:
//  the run fails, naming what disagrees. Unlike s_fail it lets the run
//  stop as a finished one does, so every process is told to stop.
static void
s_fail_verify (s_coord_t *self, const json_t *mismatches, uint64_t done)
{
    char list [PS_ERROR_MSG_MAX - 160];
    ps_outcome_describe (mismatches, list, sizeof list);
    ps_metrics_tty_clear (self->report);
    ps_error ("the run is not what was scheduled: %" PRIu64 " steps were done, but %s",
              done, list);
    size_t n = json_array_size (mismatches);
    if (!self->rc)
        self->rc = ps_error_set (self->err, PS_ECORRUPT, "%zu partition%s or replica%s disagree "
                                 "with the %" PRIu64 " steps done (%s)", n, n == 1 ? "" : "s",
                                 n == 1 ? "" : "s", done, list);
}

//  Every step is done: the final checkpoint; the final evaluation, of the
//  parameters after the last step; the done record; then stop. The
//  checkpoint does not wait for the evaluation (which may be running
//  already, asked at the last step, and can take a while), so that the
//  run's result is safe as soon as it exists: a server lost during the
//  evaluation is restored from it, and no step is trained again. (The
//  mirrored mode runs an evaluation asked at the last step before it
//  calls this: its replicas need no server.)
static void
s_host_finish (void *loop, double now)
{
    s_coord_t *self = loop;
    uint64_t done = ps_schedule_done_count (self->schedule);
    switch (ps_ckpt_ctl_final (self->ckpt, now)) {
        case PS_CKPT_FINAL_FAILED:
            s_fail (self, PS_EIO, "the final checkpoint in \"%s\" failed %d times (see above)",
                    self->job->checkpoint_dir, ps_ckpt_ctl_failures (self->ckpt));
            return;
        case PS_CKPT_FINAL_WAIT:
            return;
        case PS_CKPT_FINAL_TAKE:
            if (self->ops->final_checkpoint (self->mode, now) != 0)
                return;
            break;
        case PS_CKPT_FINAL_DONE:
            break;
    }
    if ((self->job->eval_epochs > 0 || self->job->eval_steps > 0)
    &&  !ps_evalq_final (self->evalq, done / self->host.steps_per_epoch, done))
        return;
    //  A server that does not answer has died or hangs since the final
    //  checkpoint, which is not a ledger that disagrees: the run waits for
    //  it to answer, or to be declared failed and restored from that
    //  checkpoint as during training. While it waits, only that server is
    //  asked again, a second apart, each time after the heartbeats (a
    //  call blocks the loop for up to the client timeout). One that stays
    //  unanswering for the registration and heartbeat timeouts together,
    //  while not declared failed, ends the run.
    if (self->unanswered_ms > 0) {
        if (now < self->finish_retry_ms)
            return;
        s_send_heartbeats (self, false);
        ps_error_t err;
        if (ps_client_ping (self->host.client, self->unanswered, &err) != 0) {
            if (now - self->unanswered_ms
                > (double) self->job->register_timeout_ms + self->job->heartbeat_timeout_ms)
                s_fail (self, PS_ETIMEDOUT, "training done, but ps:%d did not answer for "
                        "%.0f s and was not declared failed (%s)", self->unanswered,
                        (now - self->unanswered_ms) / 1e3, err.msg);
            else
                self->finish_retry_ms = ps_clock_ms () + 1000;
            return;
        }
    }
    json_t *mismatches = json_array ();
    int unanswered;
    json_t *servers = ps_outcome_servers (self->host.client, self->cfg->nservers, done,
                                          mismatches, &unanswered);
    if (unanswered >= 0) {
        if (self->unanswered_ms == 0) {
            self->unanswered_ms = now;
            ps_metrics_tty_clear (self->report);
            ps_warn ("training done, but ps:%d did not answer the query of its ledger; waiting "
                     "for it to answer or be declared failed", unanswered);
        }
        self->unanswered = unanswered;
        self->finish_retry_ms = ps_clock_ms () + 1000;
        json_decref (servers);
        json_decref (mismatches);
        return;
    }
    self->unanswered_ms = 0;
    double wall = (now - ps_metrics_start_ms (self->report)) / 1e3;
    double samples_s = wall > 0 ? ps_metrics_samples (self->report) / wall : 0;
    double test_loss = NAN, test_accuracy = NAN, test_auc = NAN;
    bool have_eval = ps_evalq_latest (self->evalq, &test_loss, &test_accuracy, &test_auc);
    json_t *tables = ps_model_ctr (self->cfg->model)
                   ? ps_outcome_tables (self->host.client, self->cfg->nservers, done, mismatches)
                   : NULL;
    json_t *workers = json_array ();
    for (int w = 0; w < ps_roster_count (self->roster, PS_ROLE_WORKER); w++)
        json_array_append_new (workers, json_integer (
            (json_int_t) ps_roster_peer (self->roster, PS_ROLE_WORKER, w)->steps));
    ps_metrics_tty_clear (self->report);
    double test_mae = ps_evalq_latest_mae (self->evalq);
    if (isfinite (test_mae))
        ps_info ("training done: %" PRIu64 " steps in %.1f s (%.0f samples/s), test mse %.4f, "
                 "test mae %.4f", done, wall, samples_s, test_loss, test_mae);
    else
    if (isfinite (test_auc))
        ps_info ("training done: %" PRIu64 " steps in %.1f s (%.0f samples/s), test AUC %.4f, "
                 "test log loss %.4f", done, wall, samples_s, test_auc, test_loss);
    else
    if (have_eval)
        ps_info ("training done: %" PRIu64 " steps in %.1f s (%.0f samples/s), test accuracy "
                 "%.4f", done, wall, samples_s, test_accuracy);
    else
        ps_info ("training done: %" PRIu64 " steps in %.1f s (%.0f samples/s), not evaluated",
                 done, wall, samples_s);
    json_t *record = json_pack ("{s:I, s:I, s:I, s:f, s:f, s:o, s:i, s:i, s:i, s:o, s:o}",
                                "steps", (json_int_t) done, "total", (json_int_t) self->host.total,
                                "steps_per_epoch", (json_int_t) self->host.steps_per_epoch,
                                "wall_s", wall, "samples_per_s", samples_s,
                                "test_accuracy", have_eval && isfinite (test_accuracy)
                                                 ? json_real (test_accuracy) : json_null (),
                                "checkpoints", ps_ckpt_ctl_count (self->ckpt),
                                "worker_failures", self->worker_failures,
                                "recoveries", self->host.recoveries,
                                "servers", servers, "worker_steps", workers);
    json_object_set_new (record, "refused_reports",
                         json_integer ((json_int_t) self->host.refused_reports));
    json_object_set_new (record, "refused_registrations",
                         json_integer ((json_int_t) ps_admit_refused (self->admit)));
    json_object_set_new (record, "nonfinite_failures",
                         json_integer ((json_int_t) self->host.nonfinite_failures));
    json_object_set_new (record, "diverged",
                         json_boolean (ps_metrics_diverging (self->report, NULL, NULL)));
    json_object_set_new (record, "test_loss", have_eval && isfinite (test_loss)
                                              ? json_real (test_loss) : json_null ());
    json_object_set_new (record, "mode", json_string (self->ops->name));
    //  A regression model's errors stand in for its accuracy, and a binary
    //  image classifier's AUC joins it.
    if (ps_model_regression (self->cfg->model)) {
        json_object_del (record, "test_accuracy");
        json_object_set_new (record, "test_mse", have_eval && isfinite (test_loss)
                                                 ? json_real (test_loss) : json_null ());
        json_object_set_new (record, "test_mae", isfinite (test_mae) ? json_real (test_mae)
                                                                     : json_null ());
    }
    if (!tables && ps_model_binary (self->cfg->model))
        json_object_set_new (record, "test_auc", isfinite (test_auc) ? json_real (test_auc)
                                                                     : json_null ());
    if (tables) {
        json_object_set_new (record, "test_auc", isfinite (test_auc) ? json_real (test_auc)
                                                                     : json_null ());
        json_object_set_new (record, "test_logloss", have_eval && isfinite (test_loss)
                                                     ? json_real (test_loss) : json_null ());
        json_object_set_new (record, "tables", tables);
    }
    if (self->ops->report)
        self->ops->report (self->mode, record, mismatches, done);
    json_object_set_new (record, "verified", json_boolean (json_array_size (mismatches) == 0));
    if (json_array_size (mismatches) > 0)
        s_fail_verify (self, mismatches, done);
    json_object_set_new (record, "mismatches", mismatches);
    ps_metrics_event (self->report, "done", record);
    self->host.state = PS_RUN_STOPPING;
    //  Every process hears that the run is over at once, not a heartbeat
    //  interval later: the stop may take less than that.
    s_send_heartbeats (self, true);
    if (self->ops->stop)
        self->ops->stop (self->mode);
    //  Workers learn they are done when they next ask; give them a few
    //  heartbeats to do so.
    self->stop_deadline_ms = now + 4.0 * self->job->heartbeat_ms + 1000;
}

//  ---------------------------------------------------------------------
//  The state machine

//  Waiting for the tasks that hold the variables: the run starts when all
//  have registered (or, where the mode allows, some, past the timeout).
static void
s_advance_starting (s_coord_t *self, double now)
{
    ps_role_t role = self->ops->holders;
    int want = ps_roster_count (self->roster, role);
    const char *const *endpoints = role == PS_ROLE_PS ? self->cfg->servers : self->cfg->workers;
    const char *noun = role == PS_ROLE_PS ? "servers" : "workers";
    int alive = ps_roster_alive (self->roster, role);
    bool late = now - ps_metrics_start_ms (self->report) > self->job->register_timeout_ms;
    if (alive == want || (self->ops->start_partial && late && alive > 0)) {
        ps_metrics_tty_clear (self->report);
        if (alive == want)
            ps_info ("all %d %s registered", alive, noun);
        else
            ps_warn ("%d of %d %s registered within %d ms; starting with them", alive, want,
                     noun, self->job->register_timeout_ms);
        if (self->ops->setup (self->mode) == 0) {
            self->host.state = PS_RUN_RUNNING;
            ps_metrics_start (self->report, ps_clock_ms ());
            ps_metrics_event (self->report, "started",
                              json_pack ("{s:I, s:I, s:i, s:i}",
                                         "total", (json_int_t) self->host.total,
                                         "steps_per_epoch", (json_int_t) self->host.steps_per_epoch,
                                         "servers", self->cfg->nservers,
                                         "workers", self->cfg->nworkers));
        }
        return;
    }
    if (late) {
        char missing [512] = "";
        for (int s = 0; s < want; s++)
            if (!ps_roster_peer (self->roster, role, s)->alive) {
                size_t len = strlen (missing);
                snprintf (missing + len, sizeof missing - len, "%s%s:%d at %s",
                          len ? ", " : "", ps_role_name (role), s, endpoints [s]);
            }
        s_fail (self, PS_ETIMEDOUT, "%d of %d %s registered within %d ms; missing %s",
                alive, want, noun, self->job->register_timeout_ms, missing);
        return;
    }
    if (now - self->wait_log_ms >= 1000) {
        ps_metrics_tty_clear (self->report);
        ps_info ("waiting for %s: %d/%d registered", noun, alive, want);
        self->wait_log_ms = now;
    }
}

//  Training done: wait for the workers to be told, then stop the servers.
static void
s_advance_stopping (s_coord_t *self, double now)
{
    //  A worker declared failed only for its silence (stopped, or starved
    //  of CPU) may be alive yet: it gets the same grace to ask and be told
    //  to stop, rather than being left waiting for a coordinator that has
    //  gone.
    bool all = true;
    for (int r = PS_ROLE_WORKER; r < PS_ROLES; r++)
        for (int i = 0; i < ps_roster_count (self->roster, (ps_role_t) r); i++) {
            const ps_peer_t *peer = ps_roster_peer (self->roster, (ps_role_t) r, i);
            if ((peer->alive || peer->silent) && !peer->stopped)
                all = false;
        }
    if (!all && now < self->stop_deadline_ms)
        return;
    for (int s = 0; s < self->cfg->nservers && self->host.client; s++) {
        //  A server the launcher saw exit has nobody to answer.
        const ps_peer_t *peer = ps_roster_peer (self->roster, PS_ROLE_PS, s);
        if (!peer->alive && !peer->silent)
            continue;
        ps_error_t err;
        if (ps_client_shutdown (self->host.client, s, &err))
            ps_warn ("ps:%d did not acknowledge shutdown: %s", s, err.msg);
    }
    //  The last word to every process that may still listen: one not yet
    //  told to stop, or whose answer was lost, stops when this coordinator
    //  falls silent instead of waiting for it.
    s_send_heartbeats (self, true);
    self->finished = true;
}

static void
s_advance (s_coord_t *self, double now)
{
    switch (self->host.state) {
        case PS_RUN_STARTING:
            s_advance_starting (self, now);
            return;
        case PS_RUN_RUNNING:
            //  Without a live worker nothing can progress; wait for one as
            //  long as for the servers at start-up, then give up.
            if (ps_roster_alive (self->roster, PS_ROLE_WORKER) == 0
            &&  ps_roster_alive (self->roster, PS_ROLE_EVALUATOR) == 0) {
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
            self->ops->advance (self->mode, now);
            return;
        case PS_RUN_STOPPING:
            s_advance_stopping (self, now);
            return;
    }
}

//  ---------------------------------------------------------------------
//  The run

//  Build the placement, schedule, plan and the modules that need them.
//  Returns 0 or fails the run.
static int
s_prepare (s_coord_t *self)
{
    const ps_job_t *job = self->job;
    ps_error_t err;
    const ps_model_t *model = self->cfg->model;
    int nvars = ps_model_variable_count (model);
    //  The variables are placed on the servers when the mode keeps them
    //  there; otherwise every worker holds every variable.
    if (self->ops->holders == PS_ROLE_PS) {
        ps_shape_t *shapes = calloc ((size_t) nvars + 1, sizeof (ps_shape_t));
        if (!shapes)
            abort ();
        for (int v = 0; v < nvars; v++)
            shapes [v] = ps_model_variable (model, v)->shape;
        self->placement = ps_placement_new (&job->partitioner, shapes, nvars,
                                            self->cfg->nservers, &err);
        free (shapes);
        if (!self->placement)
            return s_fail (self, err.code, "%s", err.msg), -1;
    }
    uint64_t per_epoch = (self->cfg->train_count + (size_t) job->batch_size - 1)
                       / (size_t) job->batch_size;
    self->host.steps_per_epoch = per_epoch;
    self->host.total = job->steps ? job->steps : per_epoch * (uint64_t) job->epochs;
    self->schedule = ps_schedule_new (per_epoch, self->host.total, &err);
    if (!self->schedule)
        return s_fail (self, err.code, "%s", err.msg), -1;
    self->host.schedule = self->schedule;
    ps_layout_plan (&self->plan, job, model, self->placement, self->cfg->servers,
                    self->cfg->nservers, per_epoch, self->host.total);
    if (self->ops->plan)
        self->ops->plan (self->mode, &self->plan);
    self->layout = ps_layout_json (&self->plan);
    if (!(self->job_json = ps_job_to_json (job)))
        return s_fail (self, PS_EINVAL, "%s", "the job cannot be written as JSON"), -1;
    self->ckpt = ps_ckpt_ctl_new (job, &self->plan, self->layout, self->job_json,
                                  self->cfg->nservers, self->schedule, self->report);
    if (!(self->tables = ps_layout_tables_json (model)))
        return s_fail (self, PS_ETOOBIG, "%s", "no memory for the tables' specs"), -1;
    ps_ckpt_ctl_set_tables (self->ckpt, self->tables);
    self->host.ckpt = self->ckpt;
    for (int s = 0; s < self->cfg->nservers && self->placement; s++)
        ps_info ("ps:%d holds %.2f MB", s, ps_placement_server_bytes (self->placement, s) / 1e6);
    return 0;
}

static int
s_open (s_coord_t *self)
{
    const ps_coord_config_t *cfg = self->cfg;
    ps_error_t err;
    self->report = ps_metrics_new (cfg->metrics_path, cfg->progress_tty, self->job->log_seconds,
                                   self->job->stop_on_divergence, ps_clock_ms (), &err);
    if (!self->report)
        return s_fail (self, err.code, "%s", err.msg), -1;
    self->ops = ps_mode_lookup (self->job->mode);
    //  TensorFlow starts its side-car evaluator with a cluster that does
    //  not list it (ps_tfconfig.h): evaluator:0 has a place in the roster
    //  whenever the mode uses an evaluator, listed or not. The evaluator
    //  is optional either way: evaluation goes to a worker until it comes.
    int nevaluators = cfg->nevaluators < 1 && !self->ops->no_evaluator ? 1 : cfg->nevaluators;
    self->roster = ps_roster_new (cfg->nservers, cfg->nworkers, nevaluators);
    self->evalq = ps_evalq_new (self->report);
    self->admit = ps_admit_new (self->roster, self->report, cfg->curve,
                                self->job->heartbeat_timeout_ms);
    if (getrandom (&self->incarnation, sizeof self->incarnation, 0) != sizeof self->incarnation)
        return s_fail (self, PS_EIO, "getrandom: %s", strerror (errno)), -1;
    self->incarnation |= 1;
    self->host = (ps_mode_host_t) {
        .loop = self, .cfg = cfg, .job = self->job, .roster = self->roster,
        .report = self->report, .evalq = self->evalq, .plan = &self->plan,
        .state = PS_RUN_STARTING,
        //  Generations are unique to this coordinator, so a report of work
        //  handed out by a coordinator before it (whose restores may have
        //  counted to the same number) is never taken for current work. A
        //  mode may count them otherwise.
        .generation = (self->incarnation & 0xffffffffu) << 24,
        .work = s_host_work, .message = s_host_message, .send = s_host_send,
        .fail = s_host_fail, .completed = s_host_completed, .finish = s_host_finish,
    };
    if (!(self->mode = self->ops->new (&self->host, &err)))
        return s_fail (self, err.code, "%s", err.msg), -1;
    //  The ROUTER lives in the context where zauth authenticates peers.
    self->router = zmq_socket (ps_curve_context (), ZMQ_ROUTER);
    int zero = 0;
    if (!self->router || zmq_setsockopt (self->router, ZMQ_LINGER, &zero, sizeof zero) != 0)
        return s_fail (self, PS_EIO, "ROUTER socket: %s", zmq_strerror (errno)), -1;
    if (cfg->curve && ps_curve_server (cfg->curve, self->router, &err))
        return s_fail (self, err.code, "%s", err.msg), -1;
    if (zmq_bind (self->router, cfg->bind) != 0)
        return s_fail (self, PS_EIO, "cannot bind %s: %s", cfg->bind, zmq_strerror (errno)), -1;
    self->msg = ps_msg_new ();
    ps_writer_init (&self->writer);
    return 0;
}

static void
s_close (s_coord_t *self)
{
    if (self->mode)
        self->ops->destroy (&self->mode);
    ps_client_destroy (&self->host.client);
    ps_ckpt_ctl_destroy (&self->ckpt);
    ps_schedule_destroy (&self->schedule);
    ps_placement_destroy (&self->placement);
    ps_plan_release (&self->plan);
    json_decref (self->layout);
    json_decref (self->tables);
    json_decref (self->job_json);
    ps_evalq_destroy (&self->evalq);
    ps_admit_destroy (&self->admit);
    ps_roster_destroy (&self->roster);
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
    ps_metrics_destroy (&self->report);
}

//  A stop signal, signo. The first while training makes a checkpoint due
//  at once, the same consistent cut a scheduled one is, and ends the
//  hand-out of steps (host.stop_asked); the run stops once that checkpoint
//  is written (s_stop_on_signal), so that --resume continues from where
//  the user stopped it and no step is trained past it. One after the last
//  step, once the final checkpoint is written, takes that one. A second
//  signal, or one before training has started or after it ended, stops
//  the loop now: the caller then stops the processes it started. Returns
//  -1 when the loop must end.
static int
s_on_signal (s_coord_t *self, int signo)
{
    ps_metrics_tty_clear (self->report);
    char name [32];
    ps_signal_name (signo, name, sizeof name);
    if (self->stop_signal || self->host.state != PS_RUN_RUNNING) {
        ps_warn ("%s: stopping at once", name);
        const char *when = !self->stop_signal
                           ? (self->host.state == PS_RUN_STARTING ? "before training started"
                                                                  : "while the run was ending")
                           : self->final_at_signal ? "again, while the run was ending"
                           : "again, before the final checkpoint was written";
        s_fail (self, PS_ECANCELED, "stopped by %s %s", name, when);
        if (!self->stop_signal)
            self->stop_signal = signo;
        return -1;
    }
    self->stop_signal = signo;
    self->host.stop_asked = true;
    self->stop_eval_deadline_ms = ps_clock_ms () + 4.0 * self->job->heartbeat_ms + 1000;
    if (!ps_ckpt_ctl_enabled (self->ckpt)) {
        ps_warn ("%s: stopping; the job has no checkpoint directory, so the model is not kept",
                 name);
        return 0;
    }
    self->ckpts_at_signal = ps_ckpt_ctl_count (self->ckpt);
    self->failures_at_signal = ps_ckpt_ctl_failures (self->ckpt);
    //  Past the last step, once its checkpoint is written (the final
    //  evaluation or the servers' last query may be what the run waits
    //  for), that checkpoint is the stop's: nothing is trained after it.
    if (ps_schedule_finished (self->schedule)
    &&  ps_ckpt_ctl_final (self->ckpt, ps_clock_ms ()) == PS_CKPT_FINAL_DONE) {
        ps_warn ("%s: stopping; every step is done and in the final checkpoint", name);
        self->final_at_signal = true;
        return 0;
    }
    ps_warn ("%s: writing a final checkpoint, then stopping (a second signal stops at once)",
             name);
    ps_ckpt_ctl_force (self->ckpt);
    return 0;
}

//  After a stop signal: once the checkpoint it asked for is written (or
//  was the final one, written before it came, or has failed, or the job
//  keeps none), record the stop and tell every process to stop, as the
//  end of a finished run does.
static void
s_stop_on_signal (s_coord_t *self, double now)
{
    bool keeps = ps_ckpt_ctl_enabled (self->ckpt);
    bool written = keeps && (self->final_at_signal
                             || ps_ckpt_ctl_count (self->ckpt) > self->ckpts_at_signal);
    bool failed = keeps && ps_ckpt_ctl_failures (self->ckpt) > self->failures_at_signal;
    if (keeps && !written && !failed)
        return;
    //  An evaluation in flight (an epoch's end often asks for one just as
    //  the signal comes) is waited for, a few heartbeats at most, so that
    //  its record comes before the stopped record, which closes the file.
    if (ps_evalq_busy (self->evalq) && now < self->stop_eval_deadline_ms)
        return;
    uint64_t done = ps_schedule_done_count (self->schedule);
    char name [32];
    ps_signal_name (self->stop_signal, name, sizeof name);
    json_t *record = json_pack ("{s:s, s:I, s:I, s:b, s:i}", "signal", name,
                                "steps", (json_int_t) done, "total", (json_int_t) self->host.total,
                                "checkpointed", written, "checkpoints",
                                ps_ckpt_ctl_count (self->ckpt));
    if (written) {
        json_object_set_new (record, "checkpoint_step",
                             json_integer ((json_int_t) ps_ckpt_ctl_last_step (self->ckpt)));
        json_object_set_new (record, "checkpoint_dir", json_string (self->job->checkpoint_dir));
    }
    ps_metrics_tty_clear (self->report);
    ps_metrics_event (self->report, "stopped", record);
    self->stopped = true;
    self->host.state = PS_RUN_STOPPING;
    s_send_heartbeats (self, true);
    if (self->ops->stop)
        self->ops->stop (self->mode);
    self->stop_deadline_ms = now + 4.0 * self->job->heartbeat_ms + 1000;
}

//  One turn of the loop: wait for a message, the stop signal or the next
//  heartbeat (at most 50 ms), read every message queued, then judge
//  silences and move the run on. Returns -1 when the loop must end.
static int
s_turn (s_coord_t *self)
{
    const ps_coord_config_t *cfg = self->cfg;
    zmq_pollitem_t items [2] = {
        { self->router, 0, ZMQ_POLLIN, 0 },
        { NULL, cfg->stop_fd, ZMQ_POLLIN, 0 },
    };
    double now = ps_clock_ms ();
    long timeout = (long) (self->next_heartbeat_ms - now);
    if (timeout > 50)
        timeout = 50;
    if (timeout < 0)
        timeout = 0;
    int n = zmq_poll (items, cfg->stop_fd >= 0 ? 2 : 1, timeout);
    if (n < 0 && errno != EINTR) {
        s_fail (self, PS_EIO, "zmq_poll: %s", zmq_strerror (errno));
        return -1;
    }
    if (n > 0 && (items [1].revents & ZMQ_POLLIN)) {
        int signo = ps_signal_take (cfg->stop_fd);
        if (signo && s_on_signal (self, signo))
            return -1;
    }
    //  Read everything that is queued before judging silences.
    for (int burst = 0; burst < 1000; burst++) {
        int events;
        size_t size = sizeof events;
        if (zmq_getsockopt (self->router, ZMQ_EVENTS, &events, &size) != 0
        ||  !(events & ZMQ_POLLIN))
            break;
        s_handle_message (self);
    }
    now = ps_clock_ms ();
    if (now >= self->next_heartbeat_ms) {
        s_send_heartbeats (self, false);
        self->next_heartbeat_ms = now + cfg->job.heartbeat_ms;
    }
    s_check_peers (self, now);
    if (!self->finished)
        s_advance (self, now);
    if (self->stop_signal && !self->finished && self->host.state == PS_RUN_RUNNING)
        s_stop_on_signal (self, now);
    if (self->host.state == PS_RUN_RUNNING) {
        double loss, accuracy, auc;
        ps_evalq_latest (self->evalq, &loss, &accuracy, &auc);
        uint64_t done = ps_schedule_done_count (self->schedule);
        //  The rate the schedule gives the next step (the last one's, once
        //  every step is done).
        uint64_t next = done < self->host.total ? done + 1 : self->host.total;
        ps_progress_t where = {
            .has_auc = isfinite (auc), .test_auc = auc,
            .lr = ps_lr_at (&self->job->lr_schedule, self->job->optimizer.lr, next,
                            self->host.steps_per_epoch, self->host.total),
            .done = done, .total = self->host.total,
            .steps_per_epoch = self->host.steps_per_epoch,
            .workers_alive = ps_roster_alive (self->roster, PS_ROLE_WORKER),
            .workers = ps_roster_count (self->roster, PS_ROLE_WORKER),
        };
        ps_metrics_progress (self->report, now, &where);
    }
    if (cfg->exporter && now >= self->next_publish_ms) {
        ps_exporter_publish (cfg->exporter, ps_metrics_prometheus (self->report));
        self->next_publish_ms = now + S_PUBLISH_MS;
    }
    return 0;
}

int
ps_coord_run (const ps_coord_config_t *cfg, ps_error_t *err)
{
    s_coord_t self;
    memset (&self, 0, sizeof self);
    self.cfg = cfg;
    self.job = &cfg->job;
    self.err = err;
    if (s_open (&self) == 0 && s_prepare (&self) == 0) {
        ps_info ("coordinator on %s: %d servers, %d workers%s; %" PRIu64 " steps (%" PRIu64
                 " per epoch)", cfg->bind, cfg->nservers, cfg->nworkers,
                 cfg->nevaluators ? ", an evaluator" : "", self.host.total,
                 self.host.steps_per_epoch);
        self.next_heartbeat_ms = ps_clock_ms ();
        while (!self.finished && s_turn (&self) == 0)
            ;
    }
    if (self.rc && self.report) {
        ps_metrics_tty_clear (self.report);
        ps_metrics_event (self.report, "failed",
                          json_pack ("{s:s}", "error", err ? err->msg : "failed"));
    }
    //  A run stopped by a signal did not complete: the caller says how it
    //  ended and where to continue from.
    if (self.rc == 0 && self.stopped) {
        char name [32];
        ps_signal_name (self.stop_signal, name, sizeof name);
        uint64_t done = ps_schedule_done_count (self.schedule);
        if (self.final_at_signal || ps_ckpt_ctl_count (self.ckpt) > self.ckpts_at_signal)
            self.rc = ps_error_set (err, PS_ECANCELED, "stopped by %s after %" PRIu64 " of %"
                                    PRIu64 " steps; the checkpoint of step %" PRIu64 " in %s "
                                    "continues it with --resume", name,
                                    done, self.host.total, ps_ckpt_ctl_last_step (self.ckpt),
                                    self.job->checkpoint_dir);
        else
            self.rc = ps_error_set (err, PS_ECANCELED, "stopped by %s after %" PRIu64 " of %"
                                    PRIu64 " steps; %s", name, done,
                                    self.host.total, ps_ckpt_ctl_enabled (self.ckpt)
                                    ? "the final checkpoint failed (see above)"
                                    : "no checkpoint directory, so nothing was kept");
    }
    if (cfg->stopped_by)
        *cfg->stopped_by = self.stop_signal;
    int rc = self.rc;
    s_close (&self);
    return rc;
}
