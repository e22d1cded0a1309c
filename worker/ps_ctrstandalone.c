//  Standalone click-through-rate training; see ps_ctrstandalone.h.

#include "ps_ctrstandalone.h"

#include <cblas.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_binmetrics.h"
#include "ps_clock.h"
#include "ps_ctrdata.h"
#include "ps_ctrnet.h"
#include "ps_ctrplan.h"
#include "ps_floats.h"
#include "ps_log.h"
#include "ps_metrics.h"
#include "ps_model.h"
#include "ps_replica.h"
#include "ps_sparse.h"

//  The evaluation batch: large enough that per-batch costs vanish, small
//  enough that the engine's buffers stay a few MiB for dlrm.
#define S_EVAL_BATCH  2048

void
ps_ctrstandalone_config_default (ps_ctrstandalone_config_t *cfg)
{
    memset (cfg, 0, sizeof *cfg);
    cfg->format = PS_CTR_CRITEO;
    //  At a batch of 512 the MLP's GEMMs are too small for OpenBLAS's
    //  threads to pay for their hand-offs (dlrm: 70,000 examples/s on one
    //  thread, 50,000 on two, on a loaded 2-core machine).
    cfg->threads = 1;
    cfg->epochs = 1;
    cfg->batch = 512;
    cfg->seed = 1;
    ps_opt_config_default (&cfg->optimizer, PS_OPT_ADAM);
    cfg->progress_s = 5;
}

//  What a run holds; s_close frees all of it.
typedef struct {
    const ps_ctrstandalone_config_t *cfg;
    ps_model_t *model;
    const ps_ctrmodel_t *ctr;
    ps_ctrfile_t *train, *test;
    ps_ctrbatch_t *batch;
    ps_ctrnet_t *net;
    ps_sparse_t **tables;
    ps_replica_t *replica;
    ps_binmetrics_t *metrics;
    float *grads;
    float *probs;
    ps_metrics_t *out;          //  the metrics file and the progress line
    double start_ms;            //  when training started
    double eval_ms;             //  spent in evaluations since
} s_run_t;

static void
s_close (s_run_t *run)
{
    for (int t = 0; run->tables && t < run->ctr->table_count; t++)
        ps_sparse_destroy (&run->tables [t]);
    free (run->tables);
    ps_replica_destroy (&run->replica);
    ps_binmetrics_destroy (&run->metrics);
    ps_ctrnet_destroy (&run->net);
    ps_ctrbatch_destroy (&run->batch);
    ps_ctrfile_destroy (&run->train);
    ps_ctrfile_destroy (&run->test);
    free (run->grads);
    free (run->probs);
    ps_model_destroy (&run->model);
}

//  Load the model and the data, and make the tables, the replica and the
//  engine. Returns 0 or the error.
static int
s_open (s_run_t *run, ps_error_t *err)
{
    const ps_ctrstandalone_config_t *cfg = run->cfg;
    if (cfg->epochs < 1 || cfg->batch < 1)
        return ps_error_set (err, PS_EINVAL, "epochs (%d) and batch (%d) must be positive",
                             cfg->epochs, cfg->batch);
    if (!cfg->train_path || !cfg->test_path)
        return ps_error_set (err, PS_EINVAL, "a click-through-rate model trains on --data "
                             "FILE and evaluates on --test-data FILE (Criteo or LIBSVM text)");
    if (!(run->model = ps_model_load (cfg->model, err)))
        return err->code;
    if (!(run->ctr = ps_model_ctr (run->model)))
        return ps_error_set (err, PS_EINVAL, "model \"%s\" is an image classifier; "
                             "--test-data and --format are for click-through-rate models "
                             "(lr, dlrm or a spec with \"inputs\")", ps_model_name (run->model));
    int max_n = cfg->batch > S_EVAL_BATCH ? cfg->batch : S_EVAL_BATCH;
    if (!(run->train = ps_ctrplan_open_data (cfg->train_path, cfg->format, err))
    ||  !(run->test = ps_ctrplan_open_data (cfg->test_path, cfg->format, err))
    ||  !(run->batch = ps_ctrbatch_new (cfg->format, (size_t) max_n, err)))
        return err->code;
    int rc = ps_ctrplan_check_shape (run->model, run->batch, cfg->train_path, err);
    if (rc)
        return rc;
    ps_opt_config_t opt = cfg->optimizer_given ? cfg->optimizer : run->ctr->optimizer;
    rc = ps_opt_config_validate (&opt, err);
    if (rc)
        return rc;
    if (!(run->net = ps_ctrnet_new (run->model, max_n, err))
    ||  !(run->replica = ps_replica_new (run->model, cfg->seed, &opt, err)))
        return err->code;
    run->tables = calloc ((size_t) run->ctr->table_count, sizeof *run->tables);
    run->metrics = ps_binmetrics_new ();
    run->grads = ps_floats_alloc (ps_model_param_count (run->model));
    run->probs = ps_floats_alloc ((size_t) max_n);
    if (!run->tables || !run->metrics || !run->grads || !run->probs)
        return ps_error_set (err, PS_ETOOBIG, "out of memory for model \"%s\"",
                             ps_model_name (run->model));
    for (int t = 0; t < run->ctr->table_count; t++)
        if (!(run->tables [t] = ps_sparse_new (&run->ctr->tables [t].spec, err)))
            return err->code;
    openblas_set_num_threads (cfg->threads);
    return 0;
}

//  Read lines [first, first + count) of file and map them; the batch may
//  hold no example when every line was malformed. Then pull each table's
//  rows. Returns 0 or the reader's or the engine's error.
static int
s_load_batch (s_run_t *run, ps_ctrfile_t *file, uint64_t first, uint64_t count,
              ps_error_t *err)
{
    int rc = ps_ctrfile_read (file, first, count, run->batch, err);
    if (rc || run->batch->n == 0)
        return rc;
    if ((rc = ps_ctrplan_map_batch (run->net, run->batch, err)))
        return rc;
    for (int t = 0; t < run->ctr->table_count; t++) {
        const uint64_t *keys;
        size_t n = ps_ctrnet_keys (run->net, t, &keys);
        ps_sparse_pull (run->tables [t], keys, n, ps_ctrnet_rows (run->net, t));
    }
    return 0;
}

//  Check, before anything is applied, that every table takes its rows'
//  gradients for step: each finite, each push one the table records.
//  Returns 0, or PS_ENONFINITE naming the table and the id, or
//  ps_sparse_check_push's error naming the table.
static int
s_check_tables (s_run_t *run, uint64_t step, ps_error_t *err)
{
    for (int t = 0; t < run->ctr->table_count; t++) {
        const ps_tablespec_t *spec = &run->ctr->tables [t].spec;
        const uint64_t *keys;
        size_t n = ps_ctrnet_keys (run->net, t, &keys);
        size_t bad = ps_floats_find_nonfinite (ps_ctrnet_row_grads (run->net, t), n * spec->dim);
        if (bad < n * spec->dim)
            return ps_error_set (err, PS_ENONFINITE, "step %llu: table %s: the gradient of "
                                 "id %llu is not finite; training diverged",
                                 (unsigned long long) step, spec->name,
                                 (unsigned long long) keys [bad / spec->dim]);
        int rc = ps_sparse_check_push (run->tables [t], step, keys, n, err);
        if (rc)
            return ps_error_prefix (err, rc, "table %s", spec->name);
    }
    return 0;
}

//  One training step on the batch loaded: forward, backward, the dense
//  update and a push to every table, all as step `step`. Every gradient
//  is checked before any is applied, so a step refused leaves the model
//  as it was. *loss_sum gains the batch's summed loss.
static int
s_train_step (s_run_t *run, uint64_t step, double *loss_sum, uint64_t *correct,
              ps_error_t *err)
{
    double loss = ps_ctrnet_forward (run->net, ps_replica_params (run->replica), run->probs);
    if (!isfinite (loss))
        return ps_error_set (err, PS_ENONFINITE, "step %llu: the loss is %g; training "
                             "diverged (a smaller learning rate may help)",
                             (unsigned long long) step, loss);
    ps_ctrnet_backward (run->net, ps_replica_params (run->replica), run->grads);
    //  ps_replica_apply checks the dense gradient itself and changes
    //  nothing when it refuses it; the tables are checked before it.
    int rc = s_check_tables (run, step, err);
    if (rc == 0)
        rc = ps_replica_apply (run->replica, run->grads, &step, 1, err);
    for (int t = 0; rc == 0 && t < run->ctr->table_count; t++) {
        const uint64_t *keys;
        size_t n = ps_ctrnet_keys (run->net, t, &keys);
        ps_sparse_push_result_t result;
        rc = ps_sparse_push (run->tables [t], step, keys, n, ps_ctrnet_row_grads (run->net, t),
                             &result);
        if (rc)
            ps_error_set (err, rc, "table %s: step %llu was not applied",
                          run->ctr->tables [t].spec.name, (unsigned long long) step);
    }
    if (rc == 0) {
        *loss_sum += loss;
        *correct = ps_binmetrics_correct (run->batch->labels, run->probs,
                                          (size_t) run->batch->n);
    }
    return rc;
}

//  Evaluate the current model on the test file (its first test_limit
//  lines when that is set): *logloss, *auc and *accuracy (p >= 0.5 taken
//  as a click), and in *ms and run->eval_ms the time it took.
static int
s_evaluate (s_run_t *run, double *logloss, double *auc, double *accuracy, double *ms,
            ps_error_t *err)
{
    double t0 = ps_clock_ms ();
    uint64_t lines = ps_ctrfile_lines (run->test);
    if (run->cfg->test_limit && run->cfg->test_limit < lines)
        lines = run->cfg->test_limit;
    ps_binmetrics_reset (run->metrics);
    uint64_t correct = 0;
    for (uint64_t at = 0; at < lines; at += S_EVAL_BATCH) {
        uint64_t count = lines - at < S_EVAL_BATCH ? lines - at : S_EVAL_BATCH;
        int rc = s_load_batch (run, run->test, at, count, err);
        if (rc == 0 && run->batch->n) {
            ps_ctrnet_forward (run->net, ps_replica_params (run->replica), run->probs);
            rc = ps_binmetrics_add (run->metrics, run->batch->labels, run->probs,
                                    run->batch->n, err);
            correct += ps_binmetrics_correct (run->batch->labels, run->probs,
                                              (size_t) run->batch->n);
        }
        if (rc)
            return ps_error_prefix (err, rc, "evaluating on %s", run->cfg->test_path);
    }
    *logloss = ps_binmetrics_logloss (run->metrics);
    size_t count = ps_binmetrics_count (run->metrics);
    *accuracy = count ? (double) correct / (double) count : 0;
    int rc = ps_binmetrics_auc (run->metrics, auc, err);
    if (rc)
        return ps_error_prefix (err, rc, "%s", run->cfg->test_path);
    *ms = ps_clock_ms () - t0;
    run->eval_ms += *ms;
    return 0;
}

//  The done record's tables: each one's counters.
static json_t *
s_tables_json (s_run_t *run)
{
    json_t *list = json_array ();
    for (int t = 0; list && t < run->ctr->table_count; t++) {
        ps_sparse_stats_t s;
        ps_sparse_stats (run->tables [t], &s);
        json_array_append_new (list, json_pack (
            "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "name", run->ctr->tables [t].spec.name,
            "rows", (json_int_t) s.rows, "created", (json_int_t) s.created,
            "row_updates", (json_int_t) s.row_updates, "dropped", (json_int_t) s.dropped,
            "evicted", (json_int_t) s.evicted,
            "steps", (json_int_t) ps_sparse_steps_applied (run->tables [t]),
            "bytes", (json_int_t) s.bytes));
    }
    return list;
}

//  Train every epoch; result holds the last one's figures.
static int
s_train (s_run_t *run, ps_ctrstandalone_result_t *result, ps_error_t *err)
{
    const ps_ctrstandalone_config_t *cfg = run->cfg;
    uint64_t lines = ps_ctrfile_lines (run->train);
    if (cfg->train_limit && cfg->train_limit < lines)
        lines = cfg->train_limit;
    uint64_t batch = (uint64_t) cfg->batch;
    uint64_t steps = (lines + batch - 1) / batch;
    if (steps == 0)
        return ps_error_set (err, PS_EINVAL, "%s: no lines to train on", cfg->train_path);
    size_t dense_params = ps_model_param_count (run->model);
    const ps_opt_config_t *opt = cfg->optimizer_given ? &cfg->optimizer : &run->ctr->optimizer;
    ps_info ("training model \"%s\" (%d tables, %zu dense parameters, %s %g) on %s: %llu "
             "lines, batch %d, %d epoch%s; testing on %s: %llu lines", ps_model_name (run->model),
             run->ctr->table_count, dense_params, ps_opt_kind_name (opt->kind), opt->lr,
             cfg->train_path, (unsigned long long) lines, cfg->batch, cfg->epochs,
             cfg->epochs == 1 ? "" : "s", cfg->test_path,
             (unsigned long long) ps_ctrfile_lines (run->test));
    uint64_t step = 0, malformed = 0, examples = 0, total_examples = 0;
    double loss_sum = 0, busy = 0, train_ms = 0, test_loss = 0, test_auc = 0, test_accuracy = 0;
    run->start_ms = ps_clock_ms ();
    ps_metrics_start (run->out, run->start_ms);
    ps_progress_t where = {
        .total = steps * (uint64_t) cfg->epochs, .steps_per_epoch = steps, .lr = opt->lr,
        .workers_alive = 1, .workers = 1,
    };
    for (int epoch = 0; epoch < cfg->epochs; epoch++) {
        loss_sum = busy = 0;
        examples = 0;
        for (uint64_t b = 0; b < steps; b++) {
            double t0 = ps_clock_ms ();
            uint64_t first = b * batch;
            int rc = s_load_batch (run, run->train, first,
                                   lines - first < batch ? lines - first : batch, err);
            if (rc)
                return rc;
            malformed += run->batch->malformed;
            //  Steps count from 1, as a cluster's do; a batch of
            //  malformed lines alone is a step that changes nothing.
            step++;
            double before = loss_sum;
            uint64_t correct = 0;
            if (run->batch->n && (rc = s_train_step (run, step, &loss_sum, &correct, err)))
                return rc;
            examples += run->batch->n;
            double t1 = ps_clock_ms ();
            busy += t1 - t0;
            //  One process computes and waits on nothing: the whole step
            //  is computing.
            ps_step_report_t report = {
                .count = run->batch->n, .correct = correct, .loss = loss_sum - before,
                .compute_ms = t1 - t0,
            };
            ps_metrics_step (run->out, &report, 0, step);
            where.done = step;
            ps_metrics_progress (run->out, t1, &where);
        }
        train_ms += busy;
        total_examples += examples;
        double t_eval = ps_clock_ms (), eval_ms = 0;
        double params_at_s = (t_eval - run->start_ms) / 1e3;
        double train_s = (t_eval - run->start_ms - run->eval_ms) / 1e3;
        int rc = s_evaluate (run, &test_loss, &test_auc, &test_accuracy, &eval_ms, err);
        if (rc)
            return rc;
        result->steps = step;
        result->train_loss = loss_sum / (double) (examples ? examples : 1);
        result->test_loss = test_loss;
        result->test_auc = test_auc;
        result->examples_per_s = examples / (busy / 1e3);
        //  The last epoch's line is the run's result, printed even when
        //  quiet; the others are progress.
        if (!cfg->quiet || epoch + 1 == cfg->epochs) {
            printf ("epoch %d/%d: train loss %.4f, test loss %.4f, test AUC %.4f, "
                    "%.0f examples/s (train %.1f s, test %.1f s)\n", epoch + 1, cfg->epochs,
                    result->train_loss, test_loss, test_auc, result->examples_per_s,
                    busy / 1e3, eval_ms / 1e3);
            fflush (stdout);
        }
        ps_metrics_event (run->out, "eval",
                          json_pack ("{s:i, s:I, s:f, s:f, s:f, s:f, s:f, s:f}",
                                     "epoch", epoch + 1, "step", (json_int_t) step,
                                     "test_loss", test_loss, "test_auc", test_auc,
                                     "test_accuracy", test_accuracy,
                                     "params_at_s", params_at_s, "train_s", train_s,
                                     "eval_ms", eval_ms));
        where.has_auc = true;
        where.test_auc = test_auc;
    }
    //  The cluster's done record's keys that mean something here, and the
    //  tables'.
    json_t *done = json_pack ("{s:i, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, "
                              "s:f, s:I, s:s, s:o}",
                              "epochs", cfg->epochs, "steps", (json_int_t) step,
                              "total", (json_int_t) where.total,
                              "steps_per_epoch", (json_int_t) steps,
                              "examples", (json_int_t) examples,
                              "wall_s", (ps_clock_ms () - run->start_ms) / 1e3,
                              "samples_per_s", train_ms > 0 ? total_examples / (train_ms / 1e3)
                                                            : 0.0,
                              "train_loss", result->train_loss, "test_loss", test_loss,
                              "test_auc", test_auc, "test_logloss", test_loss,
                              "test_accuracy", test_accuracy,
                              "examples_per_s", result->examples_per_s,
                              "malformed", (json_int_t) malformed, "mode", "standalone",
                              "tables", s_tables_json (run));
    ps_metrics_event (run->out, "done", done);
    return 0;
}

int
ps_ctrstandalone_run (const ps_ctrstandalone_config_t *cfg, ps_ctrstandalone_result_t *result,
                      ps_error_t *err)
{
    ps_error_t local;
    //  The codes below come from err, so it must exist.
    if (!err)
        err = &local;
    memset (result, 0, sizeof *result);
    s_run_t run = { .cfg = cfg };
    int rc = s_open (&run, err);
    //  The metrics file and the progress line are the coordinator's
    //  (ps_metrics.h): a progress record every progress_s seconds (none
    //  with 0), an eval record per epoch and a done record.
    if (rc == 0
    &&  !(run.out = ps_metrics_new (cfg->metrics_path, false,
                                    cfg->progress_s > 0 ? cfg->progress_s : HUGE_VAL, false,
                                    ps_clock_ms (), err)))
        rc = err->code;
    if (rc == 0)
        rc = s_train (&run, result, err);
    ps_metrics_destroy (&run.out);
    s_close (&run);
    return rc;
}
