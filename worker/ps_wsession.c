//  The worker's session with the coordinator; see ps_wsession.h.
//
//  Every message from the link goes through ps_wsession_receive, which
//  sorts it into one of a few events: the reply awaited, a new
//  registration (its plan handed to the owner there), the loss of the
//  coordinator, the end of the run, or nothing. Work comes in replies
//  only, so whatever else arrives (a reply to a request given up on) is
//  noted and given back.

#include "ps_wsession.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_clock.h"
#include "ps_link.h"
#include "ps_log.h"
#include "ps_msg.h"

//  The slice of every wait: how soon a stop signal is noticed while the
//  worker waits for the coordinator.
#define S_SLICE_MS          100
//  How long an unanswered work request is waited for before it is sent again.
#define S_REPLY_MS          10000

//  After a registration, how long the session listens for more before it
//  asks for work: a coordinator that was stalled answers every register
//  the link sent meanwhile, all at once, and a request sent between two of
//  those register_oks would be given up at the second.
#define S_SETTLE_MS         20

//  How long the session waits, when stopping, for the answer to a request
//  still in flight and for the answer to its last reports. The link sends
//  nothing once it is destroyed, so waiting for the answer is how the
//  worker knows its last reports left the process.
#define S_FINAL_WAIT_MS     2000

//  Milliseconds between reminders that the coordinator has not answered
//  the registration yet.
#define S_REGISTER_LOG_MS   30000

struct _ps_wsession_t {
    const ps_wsession_config_t *config;
    const ps_wsession_handler_t *handler;
    ps_link_t *link;
    ps_msg_t *msg;
    ps_reports_t *reports;
    bool registered;
    bool settling;              //  a register_ok came within S_SETTLE_MS
    bool over;                  //  the run is over: the session ends
    uint64_t coordinator;       //  the coordinator's incarnation
    double since;               //  of the last registration reminder
};

//  How the reports go to the coordinator: over the link.
static int
s_send (void *arg, ps_writer_t *writer, ps_error_t *err)
{
    ps_wsession_t *self = arg;
    return ps_link_send (self->link, writer, err);
}

ps_wsession_t *
ps_wsession_new (const ps_wsession_config_t *config, const ps_wsession_handler_t *handler,
                 ps_error_t *err)
{
    ps_wsession_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->config = config;
    self->handler = handler;
    self->since = ps_clock_ms ();
    ps_link_config_t link_config = {
        .coordinator = config->coordinator, .role = config->role, .index = config->index,
        .deliver = true, .curve = config->curve, .endpoint = config->endpoint,
    };
    if (!(self->link = ps_link_new (&link_config, err))) {
        free (self);
        return NULL;
    }
    self->msg = ps_msg_new ();
    self->reports = ps_reports_new (s_send, self);
    ps_info ("registering with the coordinator at %s as %s %d", config->coordinator,
             config->role, config->index);
    return self;
}

void
ps_wsession_destroy (ps_wsession_t **self_p)
{
    ps_wsession_t *self = *self_p;
    if (!self)
        return;
    ps_link_destroy (&self->link);
    ps_reports_destroy (&self->reports);
    ps_msg_destroy (&self->msg);
    free (self);
    *self_p = NULL;
}

ps_reports_t *
ps_wsession_reports (ps_wsession_t *self)
{
    return self->reports;
}

void *
ps_wsession_socket (ps_wsession_t *self)
{
    return ps_link_pollable (self->link);
}

static bool
s_stop_requested (ps_wsession_t *self)
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

//  A "work" message's fields that every kind has. A kind too long for
//  name is one no mode knows, named by its first letters.
static void
s_read_work (const ps_proto_work_t *in, ps_work_t *work)
{
    *work = (ps_work_t) {
        .kind = ps_work_kind_find (in->kind),
        .step = in->step, .epoch = in->epoch, .batch = in->batch,
        .generation = in->generation, .wait_ms = in->wait_ms,
        .order = in->has_order ? in->order : 0,
        .round = in->has_round ? in->round : 0,
        .round_steps = in->has_round_steps ? in->round_steps : 0,
        .msg = in,
    };
    snprintf (work->name, sizeof work->name, "%s", in->kind);
}

//  Work that will not be done: the owner reports it failed.
static void
s_give_back (ps_wsession_t *self, const ps_work_t *work)
{
    if (work->kind > PS_WORK_SAVE)
        return;
    ps_info ("giving back %s step %" PRIu64 " (generation %" PRIu64 ") undone", work->name,
             work->step, work->generation);
    self->handler->give_back (self->handler->arg, work);
}

//  A register_ok: hand its plan over. Whatever request was outstanding is
//  given up, since the link may have swallowed its answer (a not_found
//  error) while it registered again.
static int
s_on_register_ok (ps_wsession_t *self, const ps_proto_register_ok_t *in, ps_error_t *err)
{
    if (!in->has_plan)
        return ps_error_set (err, PS_EPROTO, "the coordinator at %s accepted the registration "
                             "but sent no plan", self->config->coordinator);
    ps_plan_t plan;
    int rc = ps_plan_read (&plan, &in->plan, err);
    if (rc)
        return ps_error_prefix (err, rc, "the coordinator at %s", self->config->coordinator);
    uint64_t coordinator = in->coordinator;
    bool again = self->registered && coordinator == self->coordinator;
    if ((rc = self->handler->plan (self->handler->arg, &plan, coordinator, again, err)))
        return rc;
    ps_reports_forget (self->reports);
    self->registered = true;
    self->settling = true;
    self->coordinator = coordinator;
    //  A coordinator that comes back may have restored the servers from a
    //  checkpoint.
    self->handler->stale (self->handler->arg);
    return 0;
}

//  An "error" message: the link's word that the coordinator fell silent,
//  the answer to the outstanding request, to an earlier one, or to the
//  registration.
static int
s_on_error (ps_wsession_t *self, uint64_t id, const ps_proto_error_t *in,
            ps_wsession_event_t *event, ps_error_t *err)
{
    const char *code = in->code, *message = in->message;
    if (ps_error_from_name (code) == PS_ETIMEDOUT) {
        //  Before the first registration there is nothing to lose.
        if (!self->registered)
            return 0;
        self->registered = false;
        ps_reports_forget (self->reports);
        self->handler->stale (self->handler->arg);
        //  A coordinator that had said the run is over exited; one that had
        //  not may be restarted and resume the run.
        if (ps_link_finished (self->link)) {
            ps_info ("the coordinator finished the run and has gone (%s); stopping", message);
            self->over = true;
            *event = PS_WSESSION_DONE;
        }
        else {
            ps_warn ("lost the coordinator (%s); waiting for it to come back", message);
            *event = PS_WSESSION_LOST;
        }
        return 0;
    }
    uint64_t outstanding = ps_reports_outstanding (self->reports);
    if (outstanding && id == outstanding)
        *event = PS_WSESSION_REPLY;
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
s_on_work (ps_wsession_t *self, uint64_t id, const ps_proto_work_t *in,
           ps_wsession_event_t *event)
{
    uint64_t outstanding = ps_reports_outstanding (self->reports);
    if (outstanding && id == outstanding) {
        *event = PS_WSESSION_REPLY;
        return;
    }
    ps_work_t work;
    s_read_work (in, &work);
    if (work.kind == PS_WORK_STOP) {
        ps_info ("the coordinator says training is over (answering an earlier request)");
        self->over = true;
        *event = PS_WSESSION_DONE;
    }
    else
        s_give_back (self, &work);
}

//  An "abort": the collective or round in progress ends.
static void
s_on_abort (ps_wsession_t *self, const ps_proto_abort_t *in)
{
    self->handler->abort (self->handler->arg, in->generation);
}

int
ps_wsession_receive (ps_wsession_t *self, int timeout_ms, bool check_stop,
                     ps_wsession_event_t *event, ps_error_t *err)
{
    *event = PS_WSESSION_NONE;
    if (check_stop && s_stop_requested (self)) {
        *event = PS_WSESSION_STOP;
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
    const ps_proto_t *msg = ps_msg_proto (self->msg);
    switch (msg->type) {
        case PS_PROTO_REGISTER_OK:
            if ((rc = s_on_register_ok (self, &msg->register_ok, err)))
                return rc;
            *event = PS_WSESSION_REGISTERED;
            break;
        case PS_PROTO_ERROR:
            return s_on_error (self, msg->id, &msg->error, event, err);
        case PS_PROTO_WORK:
            s_on_work (self, msg->id, &msg->work, event);
            break;
        case PS_PROTO_ABORT:
            s_on_abort (self, &msg->abort);
            break;
        default:
            ps_debug ("ignoring a %s message from the coordinator",
                      ps_proto_info [msg->type].name);
            break;
    }
    return 0;
}

//  Wait for the answer to the outstanding request, for a new registration
//  or for the loss of the coordinator, noticing a stop signal within
//  S_SLICE_MS.
static int
s_wait_event (ps_wsession_t *self, ps_wsession_event_t *event, ps_error_t *err)
{
    double deadline = ps_clock_ms () + S_REPLY_MS;
    while (true) {
        int rc = ps_wsession_receive (self, S_SLICE_MS, true, event, err);
        if (rc || *event != PS_WSESSION_NONE)
            return rc;
        //  A request or its answer can be lost on a connection that drops
        //  and comes back within the heartbeat timeout, which nobody else
        //  notices: ask again rather than wait for ever. A late answer is
        //  given back like any answer to a request given up on.
        if (ps_reports_outstanding (self->reports) && ps_clock_ms () > deadline) {
            ps_warn ("no answer from the coordinator to a work request in %d ms; asking again",
                     S_REPLY_MS);
            ps_reports_forget (self->reports);
            *event = PS_WSESSION_LOST;
            return 0;
        }
    }
}

int
ps_wsession_sleep (ps_wsession_t *self, uint64_t ms, ps_wsession_event_t *event,
                   ps_error_t *err)
{
    double deadline = ps_clock_ms () + (double) ms;
    *event = PS_WSESSION_NONE;
    while (true) {
        double left = deadline - ps_clock_ms ();
        if (left <= 0)
            return 0;
        int slice = left < S_SLICE_MS ? (int) left + 1 : S_SLICE_MS;
        int rc = ps_wsession_receive (self, slice, true, event, err);
        if (rc || *event != PS_WSESSION_NONE)
            return rc;
    }
}

int
ps_wsession_next (ps_wsession_t *self, ps_work_t *work, ps_error_t *err)
{
    const ps_wsession_config_t *config = self->config;
    ps_wsession_event_t event;
    int rc;
    //  Every wait below returns on PS_WSESSION_DONE, which sets over.
    while (!self->over) {
        if (!self->registered) {
            if ((rc = ps_wsession_receive (self, S_SLICE_MS, true, &event, err)))
                return rc;
            if (event == PS_WSESSION_STOP)
                return 1;
            if (!self->registered && ps_clock_ms () - self->since >= S_REGISTER_LOG_MS) {
                ps_warn ("still waiting for the coordinator at %s to register %s %d",
                         config->coordinator, config->role, config->index);
                self->since = ps_clock_ms ();
            }
            continue;
        }
        if (self->settling) {
            //  Until a while passes without another register_ok.
            self->settling = false;
            if ((rc = ps_wsession_receive (self, S_SETTLE_MS, true, &event, err)))
                return rc;
            if (event == PS_WSESSION_STOP)
                return 1;
            continue;
        }
        if (!ps_reports_outstanding (self->reports)
        &&  (rc = ps_reports_send (self->reports, true, err)))
            return rc;
        if ((rc = s_wait_event (self, &event, err)))
            return rc;
        if (event == PS_WSESSION_STOP)
            return 1;
        if (event != PS_WSESSION_REPLY) {
            self->since = ps_clock_ms ();
            continue;
        }
        //  The answer to the outstanding request.
        const ps_proto_t *msg = ps_msg_proto (self->msg);
        if (msg->type == PS_PROTO_ERROR) {
            //  The request changed nothing, so its reports go again with the
            //  next: dropping them would leave their steps in flight at the
            //  coordinator for good.
            ps_warn ("the coordinator refused work_request: %s: %s; asking again in %d ms",
                     msg->error.code, msg->error.message, PS_WSESSION_RETRY_MS);
            ps_reports_forget (self->reports);
            if ((rc = ps_wsession_sleep (self, PS_WSESSION_RETRY_MS, &event, err)))
                return rc;
            if (event == PS_WSESSION_STOP)
                return 1;
            continue;
        }
        ps_reports_answered (self->reports);
        s_read_work (&msg->work, work);
        return 0;
    }
    return 1;
}

void
ps_wsession_finish (ps_wsession_t *self)
{
    ps_error_t local;
    ps_wsession_event_t event;
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
        event = PS_WSESSION_NONE;
        while (event == PS_WSESSION_NONE && ps_clock_ms () < deadline)
            if (ps_wsession_receive (self, S_SLICE_MS, false, &event, &local)) {
                ps_warn ("%s", local.msg);
                return;
            }
        if (event != PS_WSESSION_REPLY) {
            ps_warn ("the coordinator did not answer the last request; %zu reports undelivered",
                     ps_reports_undelivered (self->reports));
            return;
        }
        ps_reports_answered (self->reports);
        const ps_proto_t *msg = ps_msg_proto (self->msg);
        if (msg->type == PS_PROTO_WORK) {
            ps_work_t work;
            s_read_work (&msg->work, &work);
            s_give_back (self, &work);
        }
    }
}
