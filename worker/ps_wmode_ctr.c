//  Click-through-rate models on the servers, the worker's side; see
//  ps_wmode_ctr.h.

#include "ps_wmode_ctr.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_alloc.h"
#include "ps_binmetrics.h"
#include "ps_client.h"
#include "ps_clock.h"
#include "ps_floats.h"
#include "ps_log.h"
#include "ps_pusher.h"
#include "ps_sparse_client.h"

struct _ps_wmode_t {
    ps_stepplan_t *stepplan;
    ps_reports_t *reports;
    int index;
    const ps_ctrmodel_t *ctr;
    int ntables;
    ps_client_t *client;        //  the dense variables
    ps_pusher_t *pusher;        //  pushes them while the rows are pushed
    ps_sparse_client_t *sparse; //  the tables
    int nvars;
    float *params, *grads;      //  the flat dense vectors (ps_model.h's offsets)
    float *probs;               //  a batch's predictions
    float **values;             //  per variable, into params
    const float **grad_parts;   //  per variable, into grads
    //  Per table: the batch's distinct ids, their count, their rows and
    //  their gradients, all the engine's.
    const uint64_t **ids;
    size_t *counts;
    float **rows;
    const float **row_grads;
    ps_binmetrics_t *metrics;
    //  Whether params hold the servers' values of generation `generation`.
    bool fresh;
    uint64_t generation;
};

bool
ps_wmode_ctr_plan (const ps_plan_t *plan)
{
    return strcmp (plan->data_format, "criteo") == 0 || strcmp (plan->data_format, "libsvm") == 0;
}

static void
s_destroy (ps_wmode_t **self_p)
{
    ps_wmode_t *self = *self_p;
    if (!self)
        return;
    //  A push still in flight (after a fatal error) ends within the
    //  client's timeout first.
    ps_pusher_destroy (&self->pusher);
    ps_client_destroy (&self->client);
    ps_sparse_client_destroy (&self->sparse);
    ps_binmetrics_destroy (&self->metrics);
    free (self->params);
    free (self->grads);
    free (self->probs);
    free (self->values);
    free (self->grad_parts);
    free (self->ids);
    free (self->counts);
    free (self->rows);
    free (self->row_grads);
    free (self);
    *self_p = NULL;
}

static ps_wmode_t *
s_create (const ps_wmode_env_t *env, ps_error_t *err)
{
    const ps_plan_t *plan = ps_stepplan_plan (env->stepplan);
    const ps_model_t *model = ps_stepplan_model (env->stepplan);
    const ps_ctrmodel_t *ctr = ps_model_ctr (model);
    ps_ctrplan_t *ctrplan = ps_stepplan_ctr (env->stepplan);
    if (!ctr || !ctrplan) {
        ps_error_set (err, PS_EINVAL, "the plan's data is %s text, but model \"%s\" is not a "
                      "click-through-rate model", plan->data_format, ps_model_name (model));
        return NULL;
    }
    if (plan->sync || plan->mirrored) {
        ps_error_set (err, PS_EINVAL, "%s mode does not train click-through-rate model \"%s\" "
                      "(its tables live on the servers): use async or ssp",
                      plan->sync ? "sync" : "mirrored", ps_model_name (model));
        return NULL;
    }
    ps_wmode_t *self = ps_calloc_or_abort (1, sizeof *self);
    self->stepplan = env->stepplan;
    self->reports = env->reports;
    self->index = env->index;
    self->ctr = ctr;
    self->ntables = ctr->table_count;
    self->nvars = plan->nvars;
    size_t param_count = ps_model_param_count (model);
    int max_n = plan->batch_size > plan->eval_batch ? plan->batch_size : plan->eval_batch;
    self->params = ps_floats_alloc (param_count + 1);
    self->grads = ps_floats_alloc (param_count + 1);
    self->probs = ps_floats_alloc ((size_t) max_n + 1);
    self->metrics = ps_binmetrics_new ();
    if (!self->params || !self->grads || !self->probs || !self->metrics) {
        ps_error_set (err, PS_ETOOBIG, "out of memory for the parameters of model \"%s\"",
                      ps_model_name (model));
        s_destroy (&self);
        return NULL;
    }
    self->values = ps_calloc_or_abort ((size_t) self->nvars, sizeof *self->values);
    self->grad_parts = ps_calloc_or_abort ((size_t) self->nvars, sizeof *self->grad_parts);
    for (int v = 0; v < self->nvars; v++) {
        size_t offset = ps_model_variable (model, v)->offset;
        self->values [v] = self->params + offset;
        self->grad_parts [v] = self->grads + offset;
    }
    self->ids = ps_calloc_or_abort ((size_t) self->ntables, sizeof *self->ids);
    self->counts = ps_calloc_or_abort ((size_t) self->ntables, sizeof *self->counts);
    self->rows = ps_calloc_or_abort ((size_t) self->ntables, sizeof *self->rows);
    self->row_grads = ps_calloc_or_abort ((size_t) self->ntables, sizeof *self->row_grads);
    ps_tablespec_t *specs = ps_calloc_or_abort ((size_t) self->ntables, sizeof *specs);
    for (int t = 0; t < self->ntables; t++)
        specs [t] = ctr->tables [t].spec;
    if (!(self->client = ps_plan_client (plan, NULL, env->curve, err))
    ||  !(self->sparse = ps_sparse_client_new ((const char *const *) plan->servers,
                                               plan->nservers, plan->client_timeout_ms,
                                               env->curve, specs, self->ntables, err))) {
        ps_error_prefix (err, err->code, "the plan's servers");
        free (specs);
        s_destroy (&self);
        return NULL;
    }
    free (specs);
    self->pusher = ps_pusher_new ();
    return self;
}

//  A failed pull or push: what the worker holds may be half overwritten,
//  so the next step pulls afresh. The report says why (the first failure's
//  reason, when a step has two), so that the coordinator can name the
//  error of a step that keeps failing.
static void
s_comm_failed (ps_wmode_t *self, const char *what, const ps_work_t *work,
               const ps_error_t *local, ps_report_t *report)
{
    ps_warn ("%s step %" PRIu64 ": %s failed: %s", work->name, work->step, what, local->msg);
    self->fresh = false;
    if (!*report->error)
        snprintf (report->error, sizeof report->error, "%s: %s: %.300s",
                  ps_error_name (local->code), what, local->msg);
}

//  Pull the dense variables of the work's generation when params do not
//  hold them. Returns 0, or 1 when the pull failed (said in report, which
//  the caller sends).
static int
s_pull_dense (ps_wmode_t *self, const ps_work_t *work, bool always, ps_report_t *report)
{
    if (!always && self->fresh && self->generation == work->generation)
        return 0;
    ps_error_t local;
    if (self->nvars && ps_client_pull (self->client, self->values, &local)) {
        s_comm_failed (self, "pulling the dense variables", work, &local, report);
        return 1;
    }
    self->fresh = true;
    self->generation = work->generation;
    return 0;
}

//  Pull the rows of the batch mapped in the engine. Returns 0, or 1 when
//  the pull failed (said in report).
static int
s_pull_rows (ps_wmode_t *self, const ps_work_t *work, ps_report_t *report)
{
    ps_ctrnet_t *net = ps_ctrplan_net (ps_stepplan_ctr (self->stepplan));
    for (int t = 0; t < self->ntables; t++) {
        self->counts [t] = ps_ctrnet_keys (net, t, &self->ids [t]);
        self->rows [t] = ps_ctrnet_rows (net, t);
    }
    ps_error_t local;
    if (ps_sparse_client_pull (self->sparse, self->ids, self->counts, self->rows, &local)) {
        s_comm_failed (self, "pulling the rows", work, &local, report);
        return 1;
    }
    return 0;
}

//  A push refused or lost: the step is reported failed; a gradient the
//  servers refused as not finite says so above any other reason, since
//  the coordinator bounds its retries apart.
static void
s_push_failed (ps_wmode_t *self, const ps_work_t *work, ps_report_t *report, int rc,
               const char *what, const ps_error_t *local)
{
    s_comm_failed (self, what, work, local, report);
    if (rc == PS_ENONFINITE)
        snprintf (report->error, sizeof report->error, "%s: %.380s",
                  ps_error_name (PS_ENONFINITE), local->msg);
}

//  Push the step's dense gradient with push-pull, which brings back the
//  dense values after it, on the pusher's thread, while this thread
//  pushes its row gradients to every server; then wait for both. A batch
//  with no example pushes empty entries and a zero gradient, so that the
//  step is recorded everywhere all the same. Fills report.
static void
s_push (ps_wmode_t *self, const ps_work_t *work, ps_report_t *report, int n)
{
    ps_ctrnet_t *net = ps_ctrplan_net (ps_stepplan_ctr (self->stepplan));
    for (int t = 0; t < self->ntables; t++) {
        self->counts [t] = n ? ps_ctrnet_keys (net, t, &self->ids [t]) : 0;
        self->row_grads [t] = n ? ps_ctrnet_row_grads (net, t) : NULL;
    }
    //  The servers refuse the push if they were restored since this
    //  generation's parameters (a fence).
    ps_sparse_client_set_generation (self->sparse, work->generation);
    ps_client_set_generation (self->client, work->generation);
    if (self->nvars)
        ps_pusher_post (self->pusher, self->client, work->step, (uint32_t) self->index,
                        self->grad_parts, self->values);
    ps_sparse_push_info_t sparse;
    ps_error_t sparse_err, dense_err;
    int sparse_rc = ps_sparse_client_push (self->sparse, work->step, (uint32_t) self->index,
                                           self->ids, self->counts, self->row_grads, &sparse,
                                           &sparse_err);
    ps_push_info_t dense = { 0, 0 };
    double ms;
    int dense_rc = self->nvars ? ps_pusher_wait (self->pusher, &dense, &ms, &dense_err) : 0;
    //  Either push may have been applied when the other failed: the step
    //  tried again is answered duplicate where it was.
    if (sparse_rc)
        s_push_failed (self, work, report, sparse_rc, "pushing the row gradients", &sparse_err);
    if (dense_rc)
        s_push_failed (self, work, report, dense_rc, "pushing the dense gradient", &dense_err);
    if (sparse_rc || dense_rc)
        return;
    //  Push-pull brought back the dense values after this push: the
    //  freshest there are.
    self->fresh = true;
    self->generation = work->generation;
    report->done = true;
    report->applied = dense.applied + sparse.shards;
    report->duplicates = dense.duplicates + sparse.duplicates;
}

static int
s_train (ps_wmode_t *self, const ps_work_t *work, ps_error_t *err)
{
    ps_report_t report = { .kind = PS_WORK_TRAIN, .step = work->step,
                           .generation = work->generation };
    if (!ps_stepplan_trains (self->stepplan)) {
        ps_warn ("train step %" PRIu64 ": an evaluator does not train; giving it back",
                 work->step);
        ps_reports_add (self->reports, &report);
        return 0;
    }
    ps_ctrplan_t *ctrplan = ps_stepplan_ctr (self->stepplan);
    const ps_plan_t *plan = ps_stepplan_plan (self->stepplan);
    double t0 = ps_clock_ms ();
    int n = ps_ctrplan_load_train (ctrplan, plan->seed, work->epoch, work->batch,
                                   plan->batch_size, err);
    if (n < 0)
        return ps_error_prefix (err, n, "train step %" PRIu64 " (epoch %" PRIu64 ", batch %"
                                PRIu64 ")", work->step, work->epoch, work->batch);
    double t1 = ps_clock_ms ();
    if (s_pull_dense (self, work, false, &report) || (n && s_pull_rows (self, work, &report))) {
        report.comm_ms = ps_clock_ms () - t1;
        ps_reports_work (self->reports, &report);
        return 0;
    }
    double t2 = ps_clock_ms ();
    ps_ctrnet_t *net = ps_ctrplan_net (ctrplan);
    const ps_ctrbatch_t *batch = ps_ctrplan_batch (ctrplan);
    if (n) {
        report.loss = ps_ctrnet_forward (net, self->params, self->probs);
        report.correct = ps_binmetrics_correct (batch->labels, self->probs, (size_t) n);
        ps_ctrnet_backward (net, self->params, self->grads);
    }
    else
        memset (self->grads, 0, ps_model_param_count (ps_stepplan_model (self->stepplan))
                                * sizeof (float));
    report.count = (uint64_t) n;
    double t3 = ps_clock_ms ();
    s_push (self, work, &report, n);
    report.compute_ms = (t1 - t0) + (t3 - t2);
    report.comm_ms = (t2 - t1) + (ps_clock_ms () - t3);
    ps_reports_work (self->reports, &report);
    return 0;
}

static int
s_eval (ps_wmode_t *self, const ps_work_t *work, ps_error_t *err)
{
    ps_report_t report = { .kind = PS_WORK_EVAL, .step = work->step,
                           .generation = work->generation };
    ps_ctrplan_t *ctrplan = ps_stepplan_ctr (self->stepplan);
    ps_ctrnet_t *net = ps_ctrplan_net (ctrplan);
    const ps_ctrbatch_t *batch = ps_ctrplan_batch (ctrplan);
    const ps_plan_t *plan = ps_stepplan_plan (self->stepplan);
    uint64_t lines = ps_ctrplan_test_lines (ctrplan);
    uint64_t eval_batch = (uint64_t) (plan->eval_batch > 0 ? plan->eval_batch : 1);
    double t0 = ps_clock_ms (), comm_ms = 0;
    //  The evaluation reads the servers' values now, whatever it holds.
    bool failed = s_pull_dense (self, work, true, &report);
    comm_ms += ps_clock_ms () - t0;
    ps_binmetrics_reset (self->metrics);
    for (uint64_t at = 0; !failed && at < lines; at += eval_batch) {
        uint64_t count = lines - at < eval_batch ? lines - at : eval_batch;
        int n = ps_ctrplan_load_test (ctrplan, at, count, err);
        if (n < 0)
            return ps_error_prefix (err, n, "eval at step %" PRIu64 " on %s", work->step,
                                    plan->test_data);
        if (n == 0)
            continue;
        double t1 = ps_clock_ms ();
        failed = s_pull_rows (self, work, &report);
        comm_ms += ps_clock_ms () - t1;
        if (failed)
            break;
        report.loss += ps_ctrnet_forward (net, self->params, self->probs);
        report.correct += ps_binmetrics_correct (batch->labels, self->probs, (size_t) n);
        report.count += (uint64_t) n;
        int rc = ps_binmetrics_add (self->metrics, batch->labels, self->probs, (size_t) n, err);
        if (rc)
            return ps_error_prefix (err, rc, "eval at step %" PRIu64, work->step);
    }
    if (!failed) {
        int rc = ps_binmetrics_auc (self->metrics, &report.auc, err);
        if (rc)
            return ps_error_prefix (err, rc, "eval at step %" PRIu64 " on %s", work->step,
                                    plan->test_data);
        report.has_auc = true;
        report.done = true;
        ps_info ("evaluation after %" PRIu64 " steps (epoch %" PRIu64 "): test log loss %.4f, "
                 "AUC %.4f, accuracy %.4f on %" PRIu64 " examples", work->step, work->epoch,
                 report.count ? report.loss / (double) report.count : 0, report.auc,
                 report.count ? (double) report.correct / (double) report.count : 0,
                 report.count);
    }
    else
        report = (ps_report_t) { .kind = PS_WORK_EVAL, .step = work->step,
                                 .generation = work->generation };
    report.comm_ms = comm_ms;
    report.compute_ms = ps_clock_ms () - t0 - comm_ms;
    ps_reports_work (self->reports, &report);
    return 0;
}

//  Every push is waited for: nothing is ever in flight.
static int
s_settle (ps_wmode_t *self, ps_error_t *err)
{
    (void) self;
    (void) err;
    return 0;
}

static void
s_stale (ps_wmode_t *self)
{
    self->fresh = false;
}

const ps_wmode_ops_t ps_wmode_ctr = {
    .name = "async (tables)",
    .same = NULL,
    .create = s_create,
    .destroy = s_destroy,
    .train = s_train,
    .eval = s_eval,
    .order = NULL,
    .settle = s_settle,
    .stale = s_stale,
    .give_back = NULL,
    .abort = NULL,
};
