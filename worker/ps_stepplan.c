//  The step plan; see ps_stepplan.h.

#include "ps_stepplan.h"

#include <cblas.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ps_floats.h"
#include "ps_log.h"
#include "ps_standalone.h"

struct _ps_stepplan_t {
    ps_plan_t plan;
    ps_model_t *model;
    bool trains;                //  false for an evaluator
    //  An image model's data and backend, or a CTR model's files and
    //  engine (ps_ctrplan.h): one or the other.
    ps_dataset_t *train;        //  NULL for an evaluator
    ps_dataset_t *test;
    ps_backend_t *backend;
    ps_ctrplan_t *ctr;
    float *x;                   //  a batch of inputs and its labels
    uint8_t *labels;
    int eval_batch;             //  the plan's, or less on the CPU (ps_backend_eval_batch)
    ps_binmetrics_t *bin;       //  a binary classifier's test predictions, for the AUC
};

static bool
s_str_eq (const char *a, const char *b)
{
    return strcmp (a, b) == 0;
}

//  Equal strings, or both absent.
static bool
s_opt_eq (const char *a, const char *b)
{
    return a == b || (a && b && strcmp (a, b) == 0);
}

ps_stepplan_change_t
ps_stepplan_compare (const ps_plan_t *a, const ps_plan_t *b)
{
    if (!s_str_eq (a->model, b->model) || !s_str_eq (a->data_dir, b->data_dir)
    ||  !s_str_eq (a->data_format, b->data_format) || !s_opt_eq (a->train_data, b->train_data)
    ||  !s_opt_eq (a->test_data, b->test_data)
    ||  !s_opt_eq (a->train_images, b->train_images) || !s_opt_eq (a->train_labels, b->train_labels)
    ||  !s_opt_eq (a->test_images, b->test_images) || !s_opt_eq (a->test_labels, b->test_labels)
    ||  !s_opt_eq (a->label_column, b->label_column)
    ||  a->batch_size != b->batch_size || a->eval_batch != b->eval_batch
    ||  a->train_limit != b->train_limit || a->test_limit != b->test_limit
    ||  a->threads != b->threads || !s_str_eq (a->device, b->device))
        return PS_STEPPLAN_COMPUTE;
    if (a->nservers != b->nservers || a->nvars != b->nvars
    ||  a->client_timeout_ms != b->client_timeout_ms)
        return PS_STEPPLAN_LAYOUT;
    for (int s = 0; s < a->nservers; s++)
        if (!s_str_eq (a->servers [s], b->servers [s]))
            return PS_STEPPLAN_LAYOUT;
    for (int v = 0; v < a->nvars; v++) {
        const ps_plan_var_t *x = &a->vars [v], *y = &b->vars [v];
        if (!s_str_eq (x->var, y->var) || !ps_shape_equal (&x->shape, &y->shape)
        ||  x->nparts != y->nparts
        ||  memcmp (x->splits, y->splits, (x->nparts + 1) * sizeof (int64_t)) != 0
        ||  memcmp (x->servers, y->servers, x->nparts * sizeof (int)) != 0)
            return PS_STEPPLAN_LAYOUT;
    }
    return PS_STEPPLAN_SAME;
}

int
ps_stepplan_check_variables (const ps_plan_t *plan, const ps_model_t *model, ps_error_t *err)
{
    int nvars = plan->nvars;
    const char **names = calloc ((size_t) nvars + 1, sizeof *names);
    ps_shape_t *shapes = calloc ((size_t) nvars + 1, sizeof *shapes);
    if (!names || !shapes)
        abort ();
    for (int v = 0; v < nvars; v++) {
        names [v] = plan->vars [v].var;
        shapes [v] = plan->vars [v].shape;
    }
    int rc = ps_model_check_variables (model, names, shapes, nvars, err);
    free (names);
    free (shapes);
    if (rc)
        return ps_error_prefix (err, rc, "the plan's variables are not those of model \"%s\"",
                                ps_model_name (model));
    //  The buffers of each variable point into the flat vector at the
    //  model's offsets, so the order must agree too.
    for (int v = 0; v < nvars; v++) {
        const ps_variable_t *var = ps_model_variable (model, v);
        if (!s_str_eq (plan->vars [v].var, var->name))
            return ps_error_set (err, PS_EINVAL, "the plan lists variable %d as %s, but model "
                                 "\"%s\" has %s there (expected the model's order)", v,
                                 plan->vars [v].var, ps_model_name (model), var->name);
    }
    return 0;
}

//  Check plan against what self holds: its variables against the model,
//  its steps per epoch against the training data. The coordinator numbers
//  steps from its own count of batches; data that gives another count
//  (other files, another limit) would train the wrong batches or none.
static int
s_check (const ps_stepplan_t *self, const ps_plan_t *plan, ps_error_t *err)
{
    int rc = ps_stepplan_check_variables (plan, self->model, err);
    if (rc)
        return rc;
    if (self->ctr && self->trains && plan->steps_per_epoch
    &&  plan->steps_per_epoch != ps_ctrplan_blocks (self->ctr, plan->batch_size))
        return ps_error_set (err, PS_EINVAL, "the plan has %" PRIu64 " steps per epoch, but "
                             "the %" PRIu64 " training lines of %s make %" PRIu64 " batches "
                             "of %d", plan->steps_per_epoch,
                             ps_ctrplan_train_lines (self->ctr), plan->train_data,
                             ps_ctrplan_blocks (self->ctr, plan->batch_size), plan->batch_size);
    if (self->train && plan->steps_per_epoch
    &&  plan->steps_per_epoch != ps_dataset_batches (self->train, plan->batch_size))
        return ps_error_set (err, PS_EINVAL, "the plan has %" PRIu64 " steps per epoch, but "
                             "the %zu training examples in %s make %zu batches of %d",
                             plan->steps_per_epoch, ps_dataset_count (self->train),
                             plan->data_dir, ps_dataset_batches (self->train, plan->batch_size),
                             plan->batch_size);
    return 0;
}

//  A CTR model: open its files and make its engine, on the CPU (the
//  engine has no GPU backend yet, so a GPU asked for by name is refused;
//  "auto" takes the CPU).
static int
s_build_ctr (ps_stepplan_t *self, const char *device_name, ps_error_t *err)
{
    const ps_plan_t *plan = &self->plan;
    ps_device_t device;
    int rc = ps_device_parse (device_name ? device_name : plan->device, &device, err);
    if (rc)
        return rc;
    if (device == PS_DEVICE_GPU)
        return ps_error_set (err, PS_EINVAL, "model \"%s\" is a click-through-rate model, "
                             "which trains on the CPU only; device gpu is not available for "
                             "it (use cpu or auto)", ps_model_name (self->model));
    if (!(self->ctr = ps_ctrplan_new (plan, self->model, self->trains, err)))
        return err->code;
    //  At a batch of 512 the MLP's GEMMs are too small for OpenBLAS's
    //  threads to pay for their hand-offs (ps_ctrstandalone.c measured it),
    //  and the cluster's other processes want the cores.
    openblas_set_num_threads (1);
    return s_check (self, plan, err);
}

//  Build the model, load the data and make the backend and buffers.
static int
s_build (ps_stepplan_t *self, bool train, const char *device_name, int threads,
         ps_error_t *err)
{
    const ps_plan_t *plan = &self->plan;
    if (!(self->model = ps_model_parse (plan->model, "the plan's model", err)))
        return err->code;
    self->trains = train;
    if (ps_model_ctr (self->model))
        return s_build_ctr (self, device_name, err);
    bool csv = strcmp (plan->data_format, "csv") == 0;
    int targets = ps_model_targets (self->model);
    if (csv && train
    &&  !(self->train = ps_dataset_open_csv_targets (plan->train_data, plan->label_column,
                                                     targets, (size_t) plan->train_limit, err)))
        return err->code;
    if (csv && !(self->test = ps_dataset_open_csv_targets (plan->test_data, plan->label_column,
                                                           targets, (size_t) plan->test_limit,
                                                           err)))
        return err->code;
    if (!csv && train
    &&  !(self->train = ps_dataset_open_targets (plan->data_dir, PS_SPLIT_TRAIN,
                                                 plan->train_images, plan->train_labels,
                                                 targets, (size_t) plan->train_limit, err)))
        return err->code;
    if (!csv && !(self->test = ps_dataset_open_targets (plan->data_dir, PS_SPLIT_TEST,
                                                        plan->test_images, plan->test_labels,
                                                        targets, (size_t) plan->test_limit,
                                                        err)))
        return err->code;
    int rc = ps_dataset_check_model (self->test, self->model, err);
    if (rc || (self->train && (rc = ps_dataset_check_model (self->train, self->model, err))))
        return rc;
    ps_device_t device;
    if ((rc = ps_device_parse (device_name ? device_name : plan->device, &device, err)))
        return rc;
    if (threads <= 0)
        threads = plan->threads;
    self->eval_batch = ps_backend_eval_batch (self->model, device, plan->eval_batch);
    int max_batch = plan->batch_size > self->eval_batch ? plan->batch_size : self->eval_batch;
    if (!(self->backend = ps_backend_new (self->model, device, max_batch, threads, err)))
        return err->code;
    self->x = ps_floats_alloc ((size_t) max_batch * ps_model_input_size (self->model));
    self->labels = malloc ((size_t) max_batch * ps_model_label_size (self->model));
    if (ps_model_binary (self->model) && !(self->bin = ps_binmetrics_new ()))
        return ps_error_set (err, PS_ETOOBIG, "out of memory for the AUC");
    if (!self->x || !self->labels)
        return ps_error_set (err, PS_ETOOBIG, "out of memory for a batch of %d examples of "
                             "model \"%s\"", max_batch, ps_model_name (self->model));
    ps_info ("model %s (%zu parameters) on %s; %zu training and %zu test examples from %s",
             ps_model_name (self->model), ps_model_param_count (self->model),
             ps_backend_describe (self->backend),
             self->train ? ps_dataset_count (self->train) : 0, ps_dataset_count (self->test),
             plan->data_dir);
    return s_check (self, plan, err);
}

ps_stepplan_t *
ps_stepplan_new (ps_plan_t *plan, bool train, const char *device, int threads, ps_error_t *err)
{
    ps_stepplan_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->plan = *plan;
    memset (plan, 0, sizeof *plan);
    if (s_build (self, train, device, threads, err))
        ps_stepplan_destroy (&self);
    return self;
}

void
ps_stepplan_destroy (ps_stepplan_t **self_p)
{
    ps_stepplan_t *self = *self_p;
    if (!self)
        return;
    ps_backend_destroy (&self->backend);
    ps_ctrplan_destroy (&self->ctr);
    ps_dataset_destroy (&self->train);
    ps_dataset_destroy (&self->test);
    ps_model_destroy (&self->model);
    free (self->x);
    free (self->labels);
    ps_binmetrics_destroy (&self->bin);
    ps_plan_release (&self->plan);
    free (self);
    *self_p = NULL;
}

int
ps_stepplan_replace (ps_stepplan_t *self, ps_plan_t *plan, ps_error_t *err)
{
    int rc = s_check (self, plan, err);
    if (rc) {
        ps_plan_release (plan);
        return rc;
    }
    ps_plan_release (&self->plan);
    self->plan = *plan;
    memset (plan, 0, sizeof *plan);
    return 0;
}

const ps_plan_t *
ps_stepplan_plan (const ps_stepplan_t *self)
{
    return &self->plan;
}

const ps_model_t *
ps_stepplan_model (const ps_stepplan_t *self)
{
    return self->model;
}

ps_backend_t *
ps_stepplan_backend (ps_stepplan_t *self)
{
    return self->backend;
}

const ps_dataset_t *
ps_stepplan_test (const ps_stepplan_t *self)
{
    return self->test;
}

bool
ps_stepplan_trains (const ps_stepplan_t *self)
{
    return self->trains;
}

ps_ctrplan_t *
ps_stepplan_ctr (ps_stepplan_t *self)
{
    return self->ctr;
}

int
ps_stepplan_batch (ps_stepplan_t *self, uint64_t step, uint64_t epoch, uint64_t batch,
                   ps_error_t *err)
{
    int n = ps_dataset_batch (self->train, self->plan.seed, epoch, (size_t) batch,
                              self->plan.batch_size, self->x, self->labels, err);
    if (n < 0)
        return ps_error_prefix (err, n, "train step %" PRIu64 " (epoch %" PRIu64 ", batch %"
                                PRIu64 ")", step, epoch, batch);
    return n;
}

int
ps_stepplan_compute (ps_stepplan_t *self, uint64_t step, int n, float *grad,
                     ps_batch_stats_t *stats, ps_error_t *err)
{
    //  Steps count from 1 and standalone steps from 0: with the same seed a
    //  step drops the same units in both.
    int rc = ps_backend_train_step (self->backend, self->x, self->labels, n,
                                    ps_step_dropout_seed (self->plan.seed, step - 1), grad,
                                    stats, err);
    if (rc)
        return ps_error_prefix (err, rc, "train step %" PRIu64, step);
    return 0;
}

int
ps_stepplan_evaluate (ps_stepplan_t *self, size_t first, size_t count,
                      ps_batch_stats_t *stats, ps_error_t *err)
{
    if (self->bin)
        ps_binmetrics_reset (self->bin);
    return ps_evaluate_range (self->backend, self->test, first, count, self->eval_batch,
                              self->x, self->labels, self->bin, stats, err);
}

double
ps_stepplan_test_auc (ps_stepplan_t *self)
{
    double auc = NAN;
    ps_error_t err;
    if (self->bin && ps_binmetrics_auc (self->bin, &auc, &err)) {
        ps_warn ("test AUC: %s", err.msg);
        auc = NAN;
    }
    return auc;
}
