//  Cluster training; see ps_trainer.h.
//
//  The trainer is one thread and one loop; it owns the modules and wires
//  them: the link to the coordinator (common/wire/ps_link.h), the reports
//  (ps_reports.h), the step plan built from the coordinator's plan
//  (ps_stepplan.h), and the consistency mode of that plan (ps_wmode.h),
//  which does the steps. It keeps at most one work_request outstanding
//  and matches the coordinator's replies to it by id. Every message from
//  the link goes through s_receive, which sorts it into one of a few
//  events: the reply awaited, a new registration (its plan is applied
//  there), the loss of the coordinator, or nothing. Work comes in replies
//  only, so whatever else arrives (a reply to a request given up on) is
//  noted and given back.
//
//  While the mode runs a step, it may poll the link through the host's
//  poll (a collective waiting on its peers): a plan that comes then waits
//  until the step has returned, and an event that ends the step (the loss
//  of the coordinator, a new registration, a failed link) is noted for it.

#include "ps_trainer.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_clock.h"
#include "ps_link.h"
#include "ps_log.h"
#include "ps_msg.h"
#include "ps_plan.h"
#include "ps_reports.h"
#include "ps_stepplan.h"
#include "ps_wmode.h"

//  The slice of every wait: how soon a stop signal is noticed while the
//  trainer waits for the coordinator.
#define S_SLICE_MS          100
//  How long an unanswered work request is waited for before it is sent again.
#define S_REPLY_MS          10000

//  After a registration, how long the trainer listens for more before it
//  asks for work: a coordinator that was stalled answers every register
//  the link sent meanwhile, all at once, and a request sent between two of
//  those register_oks would be given up at the second.
#define S_SETTLE_MS         20

//  The pause before asking again after the coordinator refused a request.
#define S_RETRY_MS          500

//  How long the trainer waits, when stopping, for the answer to a request
//  still in flight and for the answer to its last reports. The link sends
//  nothing once it is destroyed, so waiting for the answer is how the
//  trainer knows its last reports left the process.
#define S_FINAL_WAIT_MS     2000

//  Milliseconds between reminders that the coordinator has not answered
//  the registration yet.
#define S_REGISTER_LOG_MS   30000

//  What s_receive saw.
typedef enum {
    S_EV_NONE,                  //  nothing within the time, or nothing that matters
    S_EV_STOP,                  //  stop_fd is readable
    S_EV_REPLY,                 //  the answer to the outstanding request is in msg
    S_EV_LOST,                  //  the link lost the coordinator
    S_EV_REGISTERED,            //  a register_ok came and its plan is in use
    S_EV_DONE,                  //  the run is over, though no answer said "stop"
} s_event_t;

typedef struct {
    const ps_trainer_config_t *config;
    bool evaluator;
    ps_link_t *link;
    ps_msg_t *msg;
    ps_reports_t *reports;

    //  The plan in use and what was built from it (NULL before the first),
    //  and its mode.
    ps_stepplan_t *stepplan;
    const ps_wmode_ops_t *ops;
    ps_wmode_t *mode;
    ps_wmode_host_t host;

    //  While the mode runs a step: a plan that comes waits here, an event
    //  that ends the step is noted, and so is a link that failed.
    bool in_step, interrupted;
    ps_plan_t deferred;
    bool have_deferred;
    int poll_rc;
    ps_error_t poll_err;

    bool registered;
    bool settling;              //  a register_ok came within S_SETTLE_MS
    bool over;                  //  S_EV_DONE was seen: the trainer stops
    uint64_t coordinator;       //  the coordinator's incarnation
} s_trainer_t;


//  ---------------------------------------------------------------------
//  The plan and its mode

static bool s_poll (void *arg);

//  What plan changes from the plan in use: the step plan's comparison,
//  and a change of the mode or of the mode's own settings as a change of
//  layout (the mode is built again).
static ps_stepplan_change_t
s_change (const s_trainer_t *self, const ps_wmode_ops_t *ops, const ps_plan_t *plan)
{
    if (!self->stepplan)
        return PS_STEPPLAN_COMPUTE;
    const ps_plan_t *old = ps_stepplan_plan (self->stepplan);
    ps_stepplan_change_t change = ps_stepplan_compare (old, plan);
    if (change == PS_STEPPLAN_SAME
    &&  (ops != self->ops || (ops->same && !ops->same (old, plan))))
        change = PS_STEPPLAN_LAYOUT;
    return change;
}

//  Use plan (taking it over, whatever the result): build what differs from
//  the plan in use. Returns 0, or a code with err set when the plan cannot
//  be used; the trainer cannot go on then.
static int
s_apply_plan (s_trainer_t *self, ps_plan_t *plan, ps_error_t *err)
{
    //  A plan that arrives while a step runs (read by the host's poll)
    //  would rebuild what the step uses: it waits until the step has
    //  returned, which it makes return soon.
    if (self->in_step) {
        if (self->have_deferred)
            ps_plan_release (&self->deferred);
        self->deferred = *plan;
        self->have_deferred = true;
        self->interrupted = true;
        memset (plan, 0, sizeof *plan);
        return 0;
    }
    //  What a step left in flight uses what may be rebuilt.
    int rc = self->mode ? self->ops->settle (self->mode, err) : 0;
    if (rc) {
        ps_plan_release (plan);
        return rc;
    }
    const ps_wmode_ops_t *ops = ps_wmode_find (plan);
    ps_stepplan_change_t change = s_change (self, ops, plan);
    if (change != PS_STEPPLAN_SAME && self->mode)
        self->ops->destroy (&self->mode);
    if (change == PS_STEPPLAN_COMPUTE) {
        if (self->stepplan)
            ps_info ("the plan's model, data or compute settings changed; rebuilding");
        ps_stepplan_destroy (&self->stepplan);
        if (!(self->stepplan = ps_stepplan_new (plan, !self->evaluator, self->config->device,
                                                self->config->threads, err)))
            return err->code;
    }
    else {
        if (change == PS_STEPPLAN_LAYOUT)
            ps_info ("the plan's servers, placement or mode settings changed; reconnecting");
        if ((rc = ps_stepplan_replace (self->stepplan, plan, err)))
            return rc;
    }
    self->ops = ops;
    if (!self->mode) {
        ps_wmode_env_t env = {
            .stepplan = self->stepplan, .reports = self->reports, .host = &self->host,
            .evaluator = self->evaluator, .index = self->config->index,
            .bind = self->config->ring_bind, .curve = self->config->curve,
        };
        if (!(self->mode = ops->create (&env, err)))
            return err->code;
    }
    return 0;
}


//  ---------------------------------------------------------------------
//  Messages

static bool
s_stop_requested (s_trainer_t *self)
{
    if (self->config->stop_fd < 0)
        return false;
    struct pollfd item = { .fd = self->config->stop_fd, .events = POLLIN };
    int ready;
    do
        ready = poll (&item, 1, 0);
    while (ready < 0 && errno == EINTR);
    if (ready < 0) {
        //  A stop signal that cannot be read is no reason to stop training.
        ps_warn ("poll on the stop signal: %s", strerror (errno));
        return false;
    }
    return ready > 0;
}

//  A "work" message's fields that every kind has.
static void
s_read_work (ps_msg_t *msg, ps_work_t *work)
{
    const msgpack_object *header = ps_msg_header (msg);
    if (ps_obj_str (ps_obj_get (header, "kind"), work->name, sizeof work->name))
        snprintf (work->name, sizeof work->name, "?");
    work->kind = ps_work_kind_find (work->name);
    work->step = ps_obj_get (header, "step")->via.u64;
    work->epoch = ps_obj_get (header, "epoch")->via.u64;
    work->batch = ps_obj_get (header, "batch")->via.u64;
    work->generation = ps_obj_get (header, "generation")->via.u64;
    work->wait_ms = ps_obj_get (header, "wait_ms")->via.u64;
    const msgpack_object *order = ps_obj_get (header, "order");
    work->order = order ? order->via.u64 : 0;
    work->header = header;
}

//  Give back a piece of work that will not be done (handed out in answer
//  to a request that was given up on, or when stopping): a failed report
//  lets the coordinator hand it to another worker at once.
static void
s_give_back (s_trainer_t *self, const ps_work_t *work)
{
    if (work->kind > PS_WORK_SAVE)
        return;
    ps_info ("giving back %s step %" PRIu64 " (generation %" PRIu64 ") undone", work->name,
             work->step, work->generation);
    ps_report_t report = { .kind = work->kind, .step = work->step,
                           .generation = work->generation };
    if (self->mode && self->ops->give_back)
        self->ops->give_back (self->mode, work, &report);
    ps_reports_add (self->reports, &report);
}

//  A register_ok: use its plan. Whatever request was outstanding is given
//  up, since the link may have swallowed its answer (a not_found error)
//  while it registered again.
static int
s_on_register_ok (s_trainer_t *self, ps_error_t *err)
{
    const msgpack_object *header = ps_msg_header (self->msg);
    const msgpack_object *plan_obj = ps_obj_get (header, "plan");
    if (!plan_obj)
        return ps_error_set (err, PS_EPROTO, "the coordinator at %s accepted the registration "
                             "but sent no plan", self->config->coordinator);
    ps_plan_t plan;
    int rc = ps_plan_unpack (&plan, plan_obj, err);
    if (rc)
        return ps_error_prefix (err, rc, "the coordinator at %s", self->config->coordinator);
    //  A coordinator that was stalled answers every register the link sent
    //  meanwhile; the repeats need no line of their own.
    uint64_t coordinator = ps_obj_get (header, "coordinator")->via.u64;
    bool repeat = self->registered && coordinator == self->coordinator
               && s_change (self, ps_wmode_find (&plan), &plan) == PS_STEPPLAN_SAME;
    if ((rc = s_apply_plan (self, &plan, err)))
        return rc;
    ps_reports_forget (self->reports);
    self->registered = true;
    self->settling = true;
    self->coordinator = coordinator;
    //  A coordinator that comes back may have restored the servers from a
    //  checkpoint; the next step must not use the parameters it holds.
    self->ops->stale (self->mode);
    const ps_plan_t *in_use = ps_stepplan_plan (self->stepplan);
    ps_log (repeat ? PS_LOG_DEBUG : PS_LOG_INFO, "registered with the coordinator at %s as %s "
            "%d (coordinator incarnation %" PRIx64 "): model %s, batch %d, %d servers, %" PRIu64
            " steps, %s mode", self->config->coordinator, self->config->role,
            self->config->index, self->coordinator,
            ps_model_name (ps_stepplan_model (self->stepplan)), in_use->batch_size,
            in_use->nservers, in_use->total_steps, self->ops->name);
    return 0;
}

//  The code and message of an "error" header, with stand-ins for values
//  that do not fit.
static void
s_error_fields (const msgpack_object *header, char *code, size_t code_len, char *message,
                size_t message_len)
{
    if (ps_obj_str (ps_obj_get (header, "code"), code, code_len))
        snprintf (code, code_len, "?");
    if (ps_obj_str (ps_obj_get (header, "message"), message, message_len))
        snprintf (message, message_len, "(message too long)");
}

//  An "error" message: the link's word that the coordinator fell silent,
//  the answer to the outstanding request, to an earlier one, or to the
//  registration.
static int
s_on_error (s_trainer_t *self, s_event_t *event, ps_error_t *err)
{
    const msgpack_object *header = ps_msg_header (self->msg);
    uint64_t id = ps_msg_id (self->msg);
    char code [32], message [PS_ERROR_MSG_MAX];
    s_error_fields (header, code, sizeof code, message, sizeof message);
    if (ps_error_from_name (code) == PS_ETIMEDOUT) {
        //  Before the first registration there is nothing to lose.
        if (!self->registered)
            return 0;
        self->registered = false;
        ps_reports_forget (self->reports);
        self->ops->stale (self->mode);
        //  A coordinator that had said the run is over exited; one that had
        //  not may be restarted and resume the run.
        if (ps_link_finished (self->link)) {
            ps_info ("the coordinator finished the run and has gone (%s); stopping", message);
            self->over = true;
            *event = S_EV_DONE;
        }
        else {
            ps_warn ("lost the coordinator (%s); waiting for it to come back", message);
            *event = S_EV_LOST;
        }
        return 0;
    }
    uint64_t outstanding = ps_reports_outstanding (self->reports);
    if (outstanding && id == outstanding)
        *event = S_EV_REPLY;
    else
    if (ps_reports_ours (self->reports, id))
        ps_debug ("the coordinator refused an earlier request: %s: %s", code, message);
    else
        //  An answer to the link's register (the link handles not_found
        //  itself): the coordinator will not have this task.
        return ps_error_set (err, PS_EINVAL, "the coordinator at %s refused to register %s "
                             "%d: %s", self->config->coordinator, self->config->role,
                             self->config->index, message);
    return 0;
}

//  A "work" message: the answer to the outstanding request, or to one
//  given up on, whose work was never started here. A "stop" holds
//  whichever request it answers: the coordinator may not answer another.
static void
s_on_work (s_trainer_t *self, s_event_t *event)
{
    uint64_t outstanding = ps_reports_outstanding (self->reports);
    if (outstanding && ps_msg_id (self->msg) == outstanding) {
        *event = S_EV_REPLY;
        return;
    }
    ps_work_t work;
    s_read_work (self->msg, &work);
    if (work.kind == PS_WORK_STOP) {
        ps_info ("the coordinator says training is over (answering an earlier request)");
        self->over = true;
        *event = S_EV_DONE;
    }
    else
        s_give_back (self, &work);
}

//  An "abort": the mode's collective or round in progress ends.
static void
s_on_abort (s_trainer_t *self)
{
    uint64_t generation = ps_obj_get (ps_msg_header (self->msg), "generation")->via.u64;
    if (self->mode && self->ops->abort)
        self->ops->abort (self->mode, generation);
}

//  Wait up to timeout_ms for a message from the coordinator and sort it
//  into *event. With check_stop, a readable stop_fd comes first (S_EV_STOP).
//  Returns 0, or a code with err set when the trainer cannot go on: the
//  link failed, the coordinator refused the registration, or its plan
//  cannot be used.
static int
s_receive (s_trainer_t *self, int timeout_ms, bool check_stop, s_event_t *event,
           ps_error_t *err)
{
    *event = S_EV_NONE;
    if (check_stop && s_stop_requested (self)) {
        *event = S_EV_STOP;
        return 0;
    }
    ps_error_t local;
    int rc = ps_link_recv (self->link, self->msg, timeout_ms, &local);
    if (rc == PS_ETIMEDOUT)
        return 0;
    if (rc == PS_EIO) {
        *err = local;
        return rc;
    }
    if (rc) {
        //  A message that does not decode is the coordinator's mistake; the
        //  request it may have answered is answered again after the
        //  coordinator is lost, so it is dropped here.
        ps_warn ("%s", local.msg);
        return 0;
    }
    const char *type = ps_msg_type (self->msg);
    if (strcmp (type, "register_ok") == 0) {
        if ((rc = s_on_register_ok (self, err)))
            return rc;
        *event = S_EV_REGISTERED;
    }
    else
    if (strcmp (type, "error") == 0)
        return s_on_error (self, event, err);
    else
    if (strcmp (type, "work") == 0)
        s_on_work (self, event);
    else
    if (strcmp (type, "abort") == 0)
        s_on_abort (self);
    else
        ps_debug ("ignoring a %s message from the coordinator", type);
    return 0;
}

//  The host's poll, while the mode's step waits on other processes: read
//  what the link has. The loss of the coordinator, a new registration or
//  the end of the run ends the step; so does a link that failed, whose
//  error is kept for s_step.
static bool
s_poll (void *arg)
{
    s_trainer_t *self = arg;
    if (self->poll_rc)
        return true;
    s_event_t event;
    int rc = s_receive (self, 0, false, &event, &self->poll_err);
    if (rc)
        self->poll_rc = rc;
    if (event == S_EV_LOST || event == S_EV_REGISTERED || event == S_EV_DONE)
        self->interrupted = true;
    return self->interrupted || self->poll_rc;
}

//  Wait for the answer to the outstanding request, for a new registration
//  or for the loss of the coordinator, noticing a stop signal within
//  S_SLICE_MS.
static int
s_wait_event (s_trainer_t *self, s_event_t *event, ps_error_t *err)
{
    double deadline = ps_clock_ms () + S_REPLY_MS;
    while (true) {
        int rc = s_receive (self, S_SLICE_MS, true, event, err);
        if (rc || *event != S_EV_NONE)
            return rc;
        //  A request or its answer can be lost on a connection that drops
        //  and comes back within the heartbeat timeout, which nobody else
        //  notices: ask again rather than wait for ever. A late answer is
        //  given back like any answer to a request given up on.
        if (ps_reports_outstanding (self->reports) && ps_clock_ms () > deadline) {
            ps_warn ("no answer from the coordinator to a work request in %d ms; asking again",
                     S_REPLY_MS);
            ps_reports_forget (self->reports);
            *event = S_EV_LOST;
            return 0;
        }
    }
}

//  Sleep for ms, cut short by an event (the stop signal, a registration,
//  the loss of the coordinator), which is left in *event.
static int
s_sleep (s_trainer_t *self, uint64_t ms, s_event_t *event, ps_error_t *err)
{
    double deadline = ps_clock_ms () + (double) ms;
    *event = S_EV_NONE;
    while (true) {
        double left = deadline - ps_clock_ms ();
        if (left <= 0)
            return 0;
        int slice = left < S_SLICE_MS ? (int) left + 1 : S_SLICE_MS;
        int rc = s_receive (self, slice, true, event, err);
        if (rc || *event != S_EV_NONE)
            return rc;
    }
}


//  ---------------------------------------------------------------------
//  Work

typedef int (s_step_fn) (ps_wmode_t *self, const ps_work_t *work, ps_error_t *err);

//  Run one of the mode's steps. After it, a link failure seen by the
//  host's poll ends the trainer, and a plan that came meanwhile is used
//  now. Returns what the step returned (1: not a kind of the mode's), or
//  a code with err set.
static int
s_step (s_trainer_t *self, s_step_fn *fn, const ps_work_t *work, ps_error_t *err)
{
    self->in_step = true;
    self->interrupted = false;
    int rc = fn (self->mode, work, err);
    self->in_step = false;
    if (rc < 0)
        return rc;
    if (self->poll_rc) {
        int poll_rc = self->poll_rc;
        *err = self->poll_err;
        self->poll_rc = 0;
        return poll_rc;
    }
    if (self->have_deferred) {
        ps_plan_t plan = self->deferred;
        memset (&self->deferred, 0, sizeof self->deferred);
        self->have_deferred = false;
        int plan_rc = s_apply_plan (self, &plan, err);
        if (plan_rc)
            return plan_rc;
    }
    return rc;
}

//  Do the work the coordinator answered with. Returns 0, 1 when the
//  trainer stops (a stop order or signal), or a code with err set.
static int
s_work (s_trainer_t *self, ps_error_t *err)
{
    ps_work_t work;
    s_read_work (self->msg, &work);
    //  Anything but the next step waits for what the last step left in
    //  flight, whose report should go out with the next request.
    int rc;
    if (work.kind != PS_WORK_TRAIN && (rc = self->ops->settle (self->mode, err)))
        return rc;
    s_event_t event = S_EV_NONE;
    rc = 0;
    switch (work.kind) {
        case PS_WORK_TRAIN:
            rc = s_step (self, self->ops->train, &work, err);
            break;
        case PS_WORK_EVAL:
            rc = s_step (self, self->ops->eval, &work, err);
            break;
        case PS_WORK_RING:
        case PS_WORK_SAVE:
            rc = self->ops->order ? s_step (self, self->ops->order, &work, err) : 1;
            break;
        case PS_WORK_WAIT:
            //  Reports waiting go out at once; otherwise ask again later.
            if (!ps_reports_pending (self->reports))
                rc = s_sleep (self, work.wait_ms, &event, err);
            break;
        case PS_WORK_STOP:
            ps_info ("the coordinator says training is over");
            return 1;
        case PS_WORK_KINDS:
            rc = 1;
            break;
    }
    if (rc == 1) {
        ps_warn ("the coordinator sent work of unknown kind \"%s\"; asking again", work.name);
        rc = s_sleep (self, S_RETRY_MS, &event, err);
    }
    if (rc)
        return rc;
    return event == S_EV_STOP ? 1 : 0;
}

//  Stop: wait a little for the answer to a request still in flight (with
//  stop_fd: work it hands out is given back), then send the reports not
//  yet delivered, want 0, and wait a little for each answer so they have
//  surely left. Nothing here is fatal; the trainer stops either way.
static void
s_finish (s_trainer_t *self)
{
    ps_error_t local;
    s_event_t event;
    if (self->mode && self->ops->settle (self->mode, &local))
        ps_warn ("%s", local.msg);
    for (int rounds = 0; rounds < 8 && self->registered; rounds++) {
        if (!ps_reports_outstanding (self->reports)) {
            if (!ps_reports_pending (self->reports))
                break;
            if (ps_reports_send (self->reports, false, &local)) {
                ps_warn ("cannot send the last reports: %s", local.msg);
                break;
            }
        }
        double deadline = ps_clock_ms () + S_FINAL_WAIT_MS;
        event = S_EV_NONE;
        while (event == S_EV_NONE && ps_clock_ms () < deadline)
            if (s_receive (self, S_SLICE_MS, false, &event, &local)) {
                ps_warn ("%s", local.msg);
                return;
            }
        if (event != S_EV_REPLY) {
            ps_warn ("the coordinator did not answer the last request; %zu reports undelivered",
                     ps_reports_undelivered (self->reports));
            return;
        }
        ps_reports_answered (self->reports);
        if (strcmp (ps_msg_type (self->msg), "work") == 0) {
            ps_work_t work;
            s_read_work (self->msg, &work);
            s_give_back (self, &work);
        }
    }
}

//  Ask for work and do it until the run is over or the trainer stops.
//  Returns 0, or a code with err set when the trainer cannot go on.
static int
s_run (s_trainer_t *self, ps_error_t *err)
{
    const ps_trainer_config_t *config = self->config;
    double since = ps_clock_ms ();
    s_event_t event;
    int rc;
    //  Every wait below returns on S_EV_DONE, which sets over; the next
    //  round ends the loop.
    while (!self->over) {
        if (!self->registered) {
            if ((rc = s_receive (self, S_SLICE_MS, true, &event, err)))
                return rc;
            if (event == S_EV_STOP)
                break;
            if (!self->registered && ps_clock_ms () - since >= S_REGISTER_LOG_MS) {
                ps_warn ("still waiting for the coordinator at %s to register %s %d",
                         config->coordinator, config->role, config->index);
                since = ps_clock_ms ();
            }
            continue;
        }
        if (self->settling) {
            //  Until a while passes without another register_ok.
            self->settling = false;
            if ((rc = s_receive (self, S_SETTLE_MS, true, &event, err)))
                return rc;
            if (event == S_EV_STOP)
                break;
            continue;
        }
        if (!ps_reports_outstanding (self->reports)
        &&  (rc = ps_reports_send (self->reports, true, err)))
            return rc;
        if ((rc = s_wait_event (self, &event, err)))
            return rc;
        if (event == S_EV_STOP)
            break;
        if (event != S_EV_REPLY) {
            since = ps_clock_ms ();
            continue;
        }
        //  The answer to the outstanding request.
        if (strcmp (ps_msg_type (self->msg), "error") == 0) {
            char code [32], message [PS_ERROR_MSG_MAX];
            s_error_fields (ps_msg_header (self->msg), code, sizeof code, message,
                            sizeof message);
            //  The request changed nothing, so its reports go again with the
            //  next: dropping them would leave their steps in flight at the
            //  coordinator for good.
            ps_warn ("the coordinator refused work_request: %s: %s; asking again in %d ms",
                     code, message, S_RETRY_MS);
            ps_reports_forget (self->reports);
            if ((rc = s_sleep (self, S_RETRY_MS, &event, err)))
                return rc;
            if (event == S_EV_STOP)
                break;
            continue;
        }
        ps_reports_answered (self->reports);
        if ((rc = s_work (self, err)) < 0)
            return rc;
        if (rc == 1)
            break;
    }
    s_finish (self);
    ps_reports_progress (self->reports, true);
    ps_reports_totals (self->reports);
    return 0;
}

//  How the reports go to the coordinator: over the link.
static int
s_send_to_link (void *arg, ps_writer_t *writer, ps_error_t *err)
{
    return ps_link_send (arg, writer, err);
}

int
ps_trainer_run (const ps_trainer_config_t *config, ps_error_t *err)
{
    ps_error_t local;
    if (!err)
        err = &local;
    if (!config->coordinator || !config->role
    ||  (strcmp (config->role, "worker") != 0 && strcmp (config->role, "evaluator") != 0)
    ||  config->index < 0)
        return ps_error_set (err, PS_EINVAL, "a trainer needs a coordinator endpoint, the role "
                             "worker or evaluator, and an index >= 0");
    s_trainer_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->config = config;
    self->evaluator = strcmp (config->role, "evaluator") == 0;
    self->msg = ps_msg_new ();
    ps_link_config_t link_config = {
        .coordinator = config->coordinator, .role = config->role, .index = config->index,
        .deliver = true, .curve = config->curve,
    };
    int rc;
    if (!(self->link = ps_link_new (&link_config, err)))
        rc = err->code;
    else {
        self->reports = ps_reports_new (s_send_to_link, self->link);
        self->host = (ps_wmode_host_t) {
            .poll = s_poll, .arg = self, .socket = ps_link_pollable (self->link),
        };
        ps_info ("registering with the coordinator at %s as %s %d", config->coordinator,
                 config->role, config->index);
        rc = s_run (self, err);
    }
    //  The mode first: a push still in flight uses the step plan's model.
    if (self->mode)
        self->ops->destroy (&self->mode);
    ps_reports_destroy (&self->reports);
    ps_link_destroy (&self->link);
    ps_stepplan_destroy (&self->stepplan);
    if (self->have_deferred)
        ps_plan_release (&self->deferred);
    ps_msg_destroy (&self->msg);
    free (self);
    return rc;
}
