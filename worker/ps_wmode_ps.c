//  The worker's side of the modes that keep the variables on the servers;
//  see ps_wmode_ps.h.
//
//  Async: a train step pulls the parameters (only when it has none of the work's
//  generation: after each step the fresh values come back from the push
//  itself), computes the gradient of batch (epoch, batch), and pushes it
//  tagged with the step id, reading back the values in the same round
//  trip (push-pull). The push runs on the pusher's thread (ps_pusher.h):
//  while the backend computes step k from params [cur] into grads [g], the
//  pusher pushes step k - 1's gradient from grads [1 - g] and receives the
//  values after it into params [1 - cur]. Without the plan's overlap the
//  push is waited for at once.
//
//  To keep the worker busy, the request for the next work (carrying the
//  report of the previous step) goes out before the push, so the
//  coordinator's answer is already there when the push returns.
//
//  Sync: a train step of a round pulls the parameters (always: the round
//  before it was applied since the last step), computes the gradient and
//  pushes it with the round on the loop's thread; no values come back,
//  since those after a step that is not the round's last are not the
//  round's result. The plan's overlap does not apply.
//
//  A failed pull or push (a server died) is reported as failed and the
//  parameters are pulled afresh for the next step.

#include "ps_wmode_ps.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ps_client.h"
#include "ps_clock.h"
#include "ps_floats.h"
#include "ps_log.h"
#include "ps_pusher.h"

struct _ps_wmode_t {
    ps_stepplan_t *stepplan;
    ps_reports_t *reports;
    int index;
    ps_client_t *client;
    ps_pusher_t *pusher;
    float *params [2], *grads [2];
    float **values [2];         //  per variable, into params [i]
    const float **grad_parts [2];   //  per variable, into grads [i]
    int cur, g;
    //  The push in flight: its values come into params [push_p], and its
    //  report is completed when it ends.
    int push_p;
    ps_report_t push_report;
    //  Whether params [cur] hold the servers' values of generation `generation`.
    bool fresh;
    uint64_t generation;
};

void
ps_wmode_ps_destroy (ps_wmode_t **self_p)
{
    ps_wmode_t *self = *self_p;
    if (!self)
        return;
    //  A push still in flight (after a fatal error) ends within the
    //  client's timeout first.
    ps_pusher_destroy (&self->pusher);
    ps_client_destroy (&self->client);
    for (int i = 0; i < 2; i++) {
        free (self->params [i]);
        free (self->grads [i]);
        free (self->values [i]);
        free (self->grad_parts [i]);
    }
    free (self);
    *self_p = NULL;
}

//  Make the client of the plan's servers, its buffers pointing into the
//  flat parameter and gradient vectors at the model's offsets.
ps_wmode_t *
ps_wmode_ps_create (const ps_wmode_env_t *env, ps_error_t *err)
{
    ps_wmode_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->stepplan = env->stepplan;
    self->reports = env->reports;
    self->index = env->index;
    const ps_plan_t *plan = ps_stepplan_plan (env->stepplan);
    const ps_model_t *model = ps_stepplan_model (env->stepplan);
    size_t param_count = ps_model_param_count (model);
    int nvars = plan->nvars;
    for (int i = 0; i < 2; i++) {
        self->params [i] = ps_floats_alloc (param_count);
        self->grads [i] = ps_floats_alloc (param_count);
        if (!self->params [i] || !self->grads [i]) {
            ps_error_set (err, PS_ETOOBIG, "out of memory for the parameters of model \"%s\"",
                          ps_model_name (model));
            ps_wmode_ps_destroy (&self);
            return NULL;
        }
        self->values [i] = calloc ((size_t) nvars + 1, sizeof *self->values [i]);
        self->grad_parts [i] = calloc ((size_t) nvars + 1, sizeof *self->grad_parts [i]);
        if (!self->values [i] || !self->grad_parts [i])
            abort ();
        for (int v = 0; v < nvars; v++) {
            size_t offset = ps_model_variable (model, v)->offset;
            self->values [i][v] = self->params [i] + offset;
            self->grad_parts [i][v] = self->grads [i] + offset;
        }
    }
    if (!(self->client = ps_plan_client (plan, NULL, env->curve, err))) {
        ps_error_prefix (err, err->code, "the plan's servers");
        ps_wmode_ps_destroy (&self);
        return NULL;
    }
    self->pusher = ps_pusher_new ();
    return self;
}

//  A failed pull or push: the parameters may be half overwritten, so the
//  next step pulls them afresh.
static void
s_comm_failed (ps_wmode_t *self, const char *what, const ps_work_t *work,
               const ps_error_t *local)
{
    ps_warn ("%s step %" PRIu64 ": %s failed: %s", work->name, work->step, what, local->msg);
    self->fresh = false;
}

//  Pull the parameters of the work's generation and load them into the
//  backend. Returns 0, 1 when the pull failed (not fatal), or a backend
//  error.
static int
s_pull (ps_wmode_t *self, const ps_work_t *work, ps_error_t *err)
{
    ps_error_t local;
    if (ps_client_pull (self->client, self->values [self->cur], &local)) {
        s_comm_failed (self, "pulling the parameters", work, &local);
        return 1;
    }
    int rc = ps_backend_set_params (ps_stepplan_backend (self->stepplan),
                                    self->params [self->cur], err);
    if (rc)
        return rc;
    self->fresh = true;
    self->generation = work->generation;
    return 0;
}

//  Hand the push of the step just computed (grads [g], its report in
//  *report) to the pusher, the values to come into params [1 - cur].
static void
s_post (ps_wmode_t *self, const ps_report_t *report)
{
    //  The servers refuse the push if they were restored since this
    //  generation's parameters (a fence).
    ps_client_set_generation (self->client, report->generation);
    self->push_report = *report;
    self->push_p = 1 - self->cur;
    ps_pusher_post (self->pusher, self->client, report->step, (uint32_t) self->index,
                    self->grad_parts [self->g], self->values [self->push_p]);
    self->g = 1 - self->g;
}

//  Wait for the push in flight, if any, and account for it: on success
//  the values it brought back become the parameters and its step is
//  reported done; on failure the step is reported failed and the next
//  step pulls afresh. Returns 0, or a backend error.
//  A push that failed with push_rc: the step is reported failed and the
//  next step pulls afresh.
static void
s_push_failed (ps_wmode_t *self, ps_report_t *report, int push_rc, const ps_error_t *push_err)
{
    ps_warn ("train step %" PRIu64 ": pushing the gradient failed: %s", report->step,
             push_err->msg);
    self->fresh = false;
    report->done = false;
    //  The coordinator decides whether the step is tried again or the run
    //  stops (a gradient the servers refused as not finite, or a step that
    //  keeps failing), and names the error.
    snprintf (report->error, sizeof report->error, "%s: %.380s", ps_error_name (push_rc),
              push_err->msg);
}

int
ps_wmode_ps_settle (ps_wmode_t *self, ps_error_t *err)
{
    if (!ps_pusher_busy (self->pusher))
        return 0;
    ps_push_info_t info;
    ps_error_t push_err;
    double ms;
    int push_rc = ps_pusher_wait (self->pusher, &info, &ms, &push_err);
    ps_report_t report = self->push_report;
    report.comm_ms += ms;
    if (push_rc)
        s_push_failed (self, &report, push_rc, &push_err);
    else {
        //  Push-pull brought back every partition's values after this
        //  push: the freshest parameters there are.
        self->cur = self->push_p;
        self->fresh = true;
        self->generation = report.generation;
        int rc = ps_backend_set_params (ps_stepplan_backend (self->stepplan),
                                        self->params [self->cur], err);
        if (rc)
            return rc;
        report.done = true;
        report.applied = info.applied;
        report.duplicates = info.duplicates;
    }
    ps_reports_work (self->reports, &report);
    return 0;
}

//  Push a round's step (the gradient in grads [g]) and report it; the
//  next step pulls, whatever came of it.
static int
s_push_round (ps_wmode_t *self, const ps_work_t *work, ps_report_t *report, ps_error_t *err)
{
    //  The decoder holds a round_steps it got to 1..2^32-1; 0 means the
    //  work came with a round but without its step count.
    if (work->round_steps == 0)
        return ps_error_set (err, PS_EPROTO, "train step %" PRIu64 " of round %" PRIu64
                             ": the work carries 'round' but no 'round_steps'",
                             work->step, work->round);
    double t0 = ps_clock_ms ();
    ps_client_set_generation (self->client, work->generation);
    ps_push_info_t info;
    ps_error_t push_err;
    int push_rc = ps_client_push_round (self->client, work->step, (uint32_t) self->index,
                                        work->round, (uint32_t) work->round_steps,
                                        self->grad_parts [self->g], &info, &push_err);
    report->comm_ms += ps_clock_ms () - t0;
    self->fresh = false;
    if (push_rc)
        s_push_failed (self, report, push_rc, &push_err);
    else {
        report->done = true;
        report->applied = info.applied;
        report->duplicates = info.duplicates;
    }
    ps_reports_work (self->reports, report);
    return 0;
}

//  Train one step: pull when the parameters are not this generation's,
//  compute the gradient, collect the previous step's push (which ran
//  while this step computed), ask for the next work, and hand this step's
//  push to the pusher. Computing step k thus overlaps pushing step k - 1,
//  at the price of one more step of staleness. A step of a round (sync)
//  is pushed at once instead (s_push_round).
int
ps_wmode_ps_train (ps_wmode_t *self, const ps_work_t *work, ps_error_t *err)
{
    ps_report_t report = { .kind = PS_WORK_TRAIN, .step = work->step,
                           .generation = work->generation };
    if (!ps_stepplan_trains (self->stepplan)) {
        ps_warn ("train step %" PRIu64 ": an evaluator does not train; giving it back",
                 work->step);
        ps_reports_add (self->reports, &report);
        return 0;
    }
    double t0 = ps_clock_ms ();
    int rc;
    if (!self->fresh || self->generation != work->generation) {
        //  The push in flight may bring this generation's values yet.
        if ((rc = ps_wmode_ps_settle (self, err)))
            return rc;
    }
    if (!self->fresh || self->generation != work->generation) {
        if ((rc = s_pull (self, work, err)) < 0)
            return rc;
        if (rc) {
            report.comm_ms = ps_clock_ms () - t0;
            ps_reports_work (self->reports, &report);
            return 0;
        }
    }
    double t1 = ps_clock_ms ();
    int n = ps_stepplan_batch (self->stepplan, work->step, work->epoch, work->batch, err);
    if (n < 0)
        return n;
    ps_batch_stats_t stats;
    if ((rc = ps_stepplan_compute (self->stepplan, work->step, n, self->grads [self->g],
                                   &stats, err)))
        return rc;
    double t2 = ps_clock_ms ();
    report.compute_ms = t2 - t1;
    report.comm_ms = t1 - t0;
    report.loss = stats.loss_sum;
    report.correct = (uint64_t) stats.correct;
    report.count = (uint64_t) stats.count;
    //  The previous push has had this whole step's computation to finish;
    //  its report goes with the next request, which goes out before this
    //  push so that its answer is here when the next step wants it.
    if ((rc = ps_wmode_ps_settle (self, err)) || (rc = ps_reports_send (self->reports, true, err)))
        return rc;
    if (work->round)
        return s_push_round (self, work, &report, err);
    s_post (self, &report);
    return ps_stepplan_plan (self->stepplan)->overlap ? 0 : ps_wmode_ps_settle (self, err);
}

//  Evaluate the servers' current parameters on the test set.
int
ps_wmode_ps_eval (ps_wmode_t *self, const ps_work_t *work, ps_error_t *err)
{
    ps_report_t report = { .kind = PS_WORK_EVAL, .step = work->step,
                           .generation = work->generation };
    double t0 = ps_clock_ms ();
    int rc = ps_wmode_ps_settle (self, err);
    if (rc)
        return rc;
    rc = s_pull (self, work, err);
    if (rc < 0)
        return rc;
    double t1 = ps_clock_ms ();
    report.comm_ms = t1 - t0;
    if (rc == 0) {
        const ps_dataset_t *test = ps_stepplan_test (self->stepplan);
        ps_batch_stats_t stats;
        if ((rc = ps_stepplan_evaluate (self->stepplan, 0, ps_dataset_count (test), &stats,
                                        err)))
            return ps_error_prefix (err, rc, "eval at step %" PRIu64, work->step);
        report.compute_ms = ps_clock_ms () - t1;
        report.done = true;
        report.loss = stats.loss_sum;
        report.correct = (uint64_t) stats.correct;
        report.count = (uint64_t) stats.count;
        //  A binary classifier's AUC and a regression model's absolute
        //  error go with the loss, so the coordinator reports them too.
        report.auc = ps_stepplan_test_auc (self->stepplan);
        report.has_auc = isfinite (report.auc);
        report.has_abs_error = ps_dataset_targets (test) > 0;
        report.abs_error = stats.abs_sum;
        if (report.has_abs_error)
            ps_info ("evaluation after %" PRIu64 " steps (epoch %" PRIu64 "): test mse %.4f, "
                     "mae %.4f on %d examples", work->step, work->epoch,
                     stats.count ? stats.loss_sum / stats.count : 0,
                     stats.count ? stats.abs_sum / stats.count : 0, stats.count);
        else
            ps_info ("evaluation after %" PRIu64 " steps (epoch %" PRIu64 "): test loss %.4f, "
                     "accuracy %.4f on %d examples", work->step, work->epoch,
                     stats.count ? stats.loss_sum / stats.count : 0,
                     stats.count ? (double) stats.correct / stats.count : 0, stats.count);
    }
    ps_reports_work (self->reports, &report);
    return 0;
}

void
ps_wmode_ps_stale (ps_wmode_t *self)
{
    self->fresh = false;
}
