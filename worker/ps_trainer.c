//  Cluster training; see ps_trainer.h.
//
//  The trainer is one thread and one loop; it owns the modules and wires
//  them: the session with the coordinator (ps_wsession.h: the link, the
//  reports and the coordinator's messages), the step plan built from the
//  coordinator's plan (ps_stepplan.h), and the consistency mode of that
//  plan (ps_wmode.h), which does the steps. The loop asks the session for
//  work and hands each piece to the mode.
//
//  While the mode runs a step, it may poll the session through the
//  host's poll (a collective waiting on its peers): a plan that comes then
//  waits until the step has returned, and an event that ends the step
//  (the loss of the coordinator, a new registration, a failed link) is
//  noted for it.

#include "ps_trainer.h"

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ps_log.h"
#include "ps_plan.h"
#include "ps_reports.h"
#include "ps_stepplan.h"
#include "ps_wmode.h"
#include "ps_wsession.h"

typedef struct {
    const ps_trainer_config_t *config;
    bool evaluator;
    ps_wsession_t *session;
    ps_wsession_handler_t handler;
    ps_reports_t *reports;      //  the session's

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
} s_trainer_t;

//  ---------------------------------------------------------------------
//  The plan and its mode

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
            .bind = self->config->ring_bind, .ipc = self->config->ring_ipc,
            .curve = self->config->curve,
        };
        if (!(self->mode = ops->create (&env, err)))
            return err->code;
    }
    return 0;
}


//  The host's poll, while the mode's step waits on other processes: read
//  what the session has. The loss of the coordinator, a new registration or
//  the end of the run ends the step; so does a link that failed, whose
//  error is kept for s_step.
static bool
s_poll (void *arg)
{
    s_trainer_t *self = arg;
    if (self->poll_rc)
        return true;
    ps_wsession_event_t event;
    int rc = ps_wsession_receive (self->session, 0, false, &event, &self->poll_err);
    if (rc)
        self->poll_rc = rc;
    if (event == PS_WSESSION_LOST || event == PS_WSESSION_REGISTERED
    ||  event == PS_WSESSION_DONE)
        self->interrupted = true;
    return self->interrupted || self->poll_rc;
}

//  ---------------------------------------------------------------------
//  What the session tells the trainer

static int
s_on_plan (void *arg, ps_plan_t *plan, uint64_t coordinator, bool again, ps_error_t *err)
{
    s_trainer_t *self = arg;
    //  The repeats of a stalled coordinator need no line of their own.
    bool repeat = again && s_change (self, ps_wmode_find (plan), plan) == PS_STEPPLAN_SAME;
    int rc = s_apply_plan (self, plan, err);
    if (rc)
        return rc;
    const ps_trainer_config_t *config = self->config;
    const ps_plan_t *in_use = ps_stepplan_plan (self->stepplan);
    ps_log (repeat ? PS_LOG_DEBUG : PS_LOG_INFO, "registered with the coordinator at %s as %s "
            "%d (coordinator incarnation %" PRIx64 "): model %s, batch %d, %d servers, %" PRIu64
            " steps, %s mode", config->coordinator, config->role, config->index, coordinator,
            ps_model_name (ps_stepplan_model (self->stepplan)), in_use->batch_size,
            in_use->nservers, in_use->total_steps, self->ops->name);
    return 0;
}

//  The next step must not use the parameters the mode holds.
static void
s_on_stale (void *arg)
{
    s_trainer_t *self = arg;
    if (self->mode)
        self->ops->stale (self->mode);
}

static void
s_on_abort (void *arg, uint64_t generation)
{
    s_trainer_t *self = arg;
    if (self->mode && self->ops->abort)
        self->ops->abort (self->mode, generation);
}

//  A failed report lets the coordinator hand the work to another worker
//  at once.
static void
s_on_give_back (void *arg, const ps_work_t *work)
{
    s_trainer_t *self = arg;
    ps_report_t report = { .kind = work->kind, .step = work->step,
                           .generation = work->generation };
    if (self->mode && self->ops->give_back)
        self->ops->give_back (self->mode, work, &report);
    ps_reports_add (self->reports, &report);
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
s_work (s_trainer_t *self, const ps_work_t *work, ps_error_t *err)
{
    //  Anything but the next step waits for what the last step left in
    //  flight, whose report should go out with the next request.
    int rc;
    if (work->kind != PS_WORK_TRAIN && (rc = self->ops->settle (self->mode, err)))
        return rc;
    ps_wsession_event_t event = PS_WSESSION_NONE;
    rc = 0;
    switch (work->kind) {
        case PS_WORK_TRAIN:
            rc = s_step (self, self->ops->train, work, err);
            break;
        case PS_WORK_EVAL:
            rc = s_step (self, self->ops->eval, work, err);
            break;
        case PS_WORK_RING:
        case PS_WORK_SAVE:
            rc = self->ops->order ? s_step (self, self->ops->order, work, err) : 1;
            break;
        case PS_WORK_WAIT:
            //  Reports waiting go out at once; otherwise ask again later.
            if (!ps_reports_pending (self->reports))
                rc = ps_wsession_sleep (self->session, work->wait_ms, &event, err);
            break;
        case PS_WORK_STOP:
            ps_info ("the coordinator says training is over");
            return 1;
        case PS_WORK_KINDS:
            rc = 1;
            break;
    }
    if (rc == 1) {
        ps_warn ("the coordinator sent work of unknown kind \"%s\"; asking again", work->name);
        rc = ps_wsession_sleep (self->session, PS_WSESSION_RETRY_MS, &event, err);
    }
    if (rc)
        return rc;
    return event == PS_WSESSION_STOP ? 1 : 0;
}

//  Ask for work and do it until the run is over or the trainer stops;
//  then settle the last step and deliver its report. Returns 0, or a code
//  with err set when the trainer cannot go on.
static int
s_run (s_trainer_t *self, ps_error_t *err)
{
    int rc;
    while (true) {
        ps_work_t work;
        if ((rc = ps_wsession_next (self->session, &work, err)) < 0)
            return rc;
        if (rc == 1)
            break;
        if ((rc = s_work (self, &work, err)) < 0)
            return rc;
        if (rc == 1)
            break;
    }
    ps_error_t local;
    if (self->mode && self->ops->settle (self->mode, &local))
        ps_warn ("%s", local.msg);
    ps_wsession_finish (self->session);
    ps_reports_progress (self->reports, true);
    ps_reports_totals (self->reports);
    return 0;
}

//  Take SCHED_IDLE for this thread and those it starts (ps_trainer_run).
static void
s_idle_priority (void)
{
    struct sched_param param = { .sched_priority = 0 };
    int rc = pthread_setschedparam (pthread_self (), SCHED_IDLE, &param);
    if (rc != 0)
        ps_warn ("--idle-priority: cannot take SCHED_IDLE (%s); computing at normal priority",
                 strerror (rc));
    else
        ps_info ("computing in the cores' idle time (SCHED_IDLE); heartbeats at normal "
                 "priority");
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
    self->handler = (ps_wsession_handler_t) {
        .plan = s_on_plan, .stale = s_on_stale, .abort = s_on_abort,
        .give_back = s_on_give_back, .arg = self,
    };
    ps_wsession_config_t session_config = {
        .coordinator = config->coordinator, .role = config->role, .index = config->index,
        .stop_fd = config->stop_fd, .curve = config->curve, .endpoint = config->ring_advert,
    };
    int rc;
    if (!(self->session = ps_wsession_new (&session_config, &self->handler, err)))
        rc = err->code;
    else {
        self->reports = ps_wsession_reports (self->session);
        if (config->idle_priority)
            s_idle_priority ();
        self->host = (ps_wmode_host_t) {
            .poll = s_poll, .arg = self, .socket = ps_wsession_socket (self->session),
        };
        rc = s_run (self, err);
    }
    //  The mode first: a push still in flight uses the step plan's model.
    if (self->mode)
        self->ops->destroy (&self->mode);
    ps_wsession_destroy (&self->session);
    ps_stepplan_destroy (&self->stepplan);
    if (self->have_deferred)
        ps_plan_release (&self->deferred);
    free (self);
    return rc;
}
