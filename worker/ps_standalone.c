//  Standalone training; see ps_standalone.h.

#include "ps_standalone.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ps_clock.h"
#include "ps_cpus.h"
#include "ps_floats.h"
#include "ps_log.h"
#include "ps_metrics.h"
#include "ps_mix.h"
#include "ps_model.h"
#include "ps_replica.h"
#include "ps_signal.h"
#include "ps_standalone_ckpt.h"

//  The evaluation batch wanted: large enough that a GPU's per-call
//  overheads vanish; the CPU engine takes less (ps_backend_eval_batch).
#define S_EVAL_BATCH  500

void
ps_standalone_config_default (ps_standalone_config_t *cfg)
{
    memset (cfg, 0, sizeof *cfg);
    cfg->model = "cnn";
    cfg->data_dir = PS_DATASET_DEFAULT_DIR;
    cfg->device = PS_DEVICE_AUTO;
    //  The cores it may use (ps_cpus.h), not those online: a worker in a
    //  cpuset or under a CPU quota would oversubscribe its share. The CPU
    //  engine takes at most 256 threads.
    int cores = ps_cpus_available (NULL, 0);
    cfg->threads = cores > 256 ? 256 : cores;
    cfg->epochs = 3;
    cfg->batch = 64;
    cfg->seed = 1;
    ps_opt_config_default (&cfg->optimizer, PS_OPT_ADAM);
    cfg->progress_s = 5;
    cfg->stop_fd = -1;
}

uint64_t
ps_step_dropout_seed (uint64_t seed, uint64_t step)
{
    return ps_mix_draw (ps_mix64 (seed ^ 0x64726f706f7574ULL), step);
}

int
ps_evaluate (ps_backend_t *backend, const ps_dataset_t *data, int batch,
             float *x, uint8_t *labels, ps_binmetrics_t *bin, ps_batch_stats_t *stats,
             ps_error_t *err)
{
    return ps_evaluate_range (backend, data, 0, ps_dataset_count (data), batch, x, labels,
                              bin, stats, err);
}

//  Add a binary classifier's n predictions (logits) and labels to bin.
static int
s_add_binary (ps_binmetrics_t *bin, const float *logits, const uint8_t *labels, int n,
              float *probs, float *ys, ps_error_t *err)
{
    for (int i = 0; i < n; i++) {
        //  The sigmoid through e^-|z|, which cannot overflow.
        float t = expf (-fabsf (logits [i]));
        probs [i] = logits [i] >= 0 ? 1.0f / (1.0f + t) : t / (1.0f + t);
        ys [i] = labels [i] ? 1.0f : 0.0f;
    }
    return ps_binmetrics_add (bin, ys, probs, (size_t) n, err);
}

int
ps_evaluate_range (ps_backend_t *backend, const ps_dataset_t *data, size_t first,
                   size_t count, int batch, float *x, uint8_t *labels, ps_binmetrics_t *bin,
                   ps_batch_stats_t *stats, ps_error_t *err)
{
    memset (stats, 0, sizeof *stats);
    size_t end = ps_dataset_count (data);
    if (first > end)
        first = end;
    if (count < end - first)
        end = first + count;
    //  A binary classifier's logits, and its probabilities and labels as
    //  ps_binmetrics takes them: one float each an example.
    float *scratch = bin ? ps_floats_alloc (3 * (size_t) batch) : NULL;
    if (bin && !scratch)
        return ps_error_set (err, PS_ETOOBIG, "out of memory for the AUC's predictions");
    int rc = 0;
    for (size_t at = first; rc == 0 && at < end; at += (size_t) batch) {
        int n = ps_dataset_slice (data, at, (int) (end - at < (size_t) batch ? end - at
                                                                               : (size_t) batch),
                                  x, labels);
        ps_batch_stats_t part;
        rc = ps_backend_forward (backend, x, labels, n, scratch, &part, err);
        if (rc == 0 && bin)
            rc = s_add_binary (bin, scratch, labels, n, scratch + batch, scratch + 2 * batch,
                               err);
        if (rc)
            break;
        stats->loss_sum += part.loss_sum;
        stats->correct += part.correct;
        stats->count += part.count;
        stats->abs_sum += part.abs_sum;
    }
    free (scratch);
    return rc;
}

static void
s_log_line (const char *line, void *arg)
{
    (void) arg;
    ps_info ("%s", line);
}

//  The run's clock: when training started, and how much of the time since
//  went to evaluations.
typedef struct {
    double start_ms;
    double eval_ms;
} s_timer_t;

//  One evaluation of the parameters on the test set.
typedef struct {
    double test_loss;
    double test_accuracy;       //  NaN for a regression model
    double test_mae;            //  a regression model's, else NaN
    double test_auc;            //  a binary classifier's, else NaN
    double time_s;              //  since training started, when it began
    double train_s;             //  time_s less the earlier evaluations
    double ms;                  //  how long it took
} s_eval_t;

//  Load params into the backend, evaluate them on the whole test set and
//  add the time taken to timer. Returns 0 or the backend's error.
static int
s_evaluate_test (ps_backend_t *backend, const float *params, const ps_dataset_t *test,
                 int eval_batch, float *x, uint8_t *labels, ps_binmetrics_t *bin,
                 s_timer_t *timer, s_eval_t *eval, ps_error_t *err)
{
    double t0 = ps_clock_ms ();
    eval->time_s = (t0 - timer->start_ms) / 1e3;
    eval->train_s = (t0 - timer->start_ms - timer->eval_ms) / 1e3;
    ps_batch_stats_t stats;
    if (bin)
        ps_binmetrics_reset (bin);
    int rc = ps_backend_set_params (backend, params, err);
    if (rc == 0)
        rc = ps_evaluate (backend, test, eval_batch, x, labels, bin, &stats, err);
    if (rc)
        return rc;
    eval->ms = ps_clock_ms () - t0;
    timer->eval_ms += eval->ms;
    bool regression = ps_dataset_targets (test) > 0;
    eval->test_loss = stats.loss_sum / stats.count;
    eval->test_accuracy = regression ? NAN : (double) stats.correct / stats.count;
    eval->test_mae = regression ? stats.abs_sum / stats.count : NAN;
    eval->test_auc = NAN;
    //  A test set of one class has no AUC: said once per evaluation, and
    //  the records leave it out.
    ps_error_t auc_err;
    if (bin && ps_binmetrics_auc (bin, &eval->test_auc, &auc_err))
        ps_warn ("test AUC: %s", auc_err.msg);
    return 0;
}

//  The metrics after the test loss, for a log line: "test accuracy A",
//  "test mse M, test mae E" (regression), and ", test auc U" when known.
static void
s_eval_text (const s_eval_t *eval, char *text, size_t size)
{
    int len = isnan (eval->test_accuracy)
            ? snprintf (text, size, "test mse %.4f, test mae %.4f", eval->test_loss,
                        eval->test_mae)
            : snprintf (text, size, "test accuracy %.4f", eval->test_accuracy);
    if (len > 0 && (size_t) len < size && isfinite (eval->test_auc))
        snprintf (text + len, size - (size_t) len, ", test auc %.4f", eval->test_auc);
}

//  Put into record the metrics a regression model or a binary classifier
//  has in place of, or beside, the accuracy.
static void
s_eval_json (const s_eval_t *eval, json_t *record)
{
    if (isnan (eval->test_accuracy)) {
        json_object_del (record, "test_accuracy");
        json_object_set_new (record, "test_mse", json_real (eval->test_loss));
        json_object_set_new (record, "test_mae", json_real (eval->test_mae));
    }
    if (isfinite (eval->test_auc))
        json_object_set_new (record, "test_auc", json_real (eval->test_auc));
}

//  Log an evaluation after `step` steps and write its "eval" record.
static void
s_report_eval (ps_metrics_t *metrics, uint64_t step, size_t batches, const s_eval_t *eval)
{
    double epoch_f = (double) step / batches;
    char text [128];
    s_eval_text (eval, text, sizeof text);
    ps_info ("evaluation after %llu steps (epoch %.2f): test loss %.4f, %s "
             "(%.0f ms; %.1f s since the start, %.1f s training)", (unsigned long long) step,
             epoch_f, eval->test_loss, text, eval->ms, eval->time_s, eval->train_s);
    json_t *record = json_pack ("{s:I, s:f, s:I, s:f, s:f, s:f, s:f, s:f}",
                                "epoch", (json_int_t) (step / batches), "epoch_f", epoch_f,
                                "step", (json_int_t) step, "test_loss", eval->test_loss,
                                "test_accuracy", isnan (eval->test_accuracy)
                                                 ? 0.0 : eval->test_accuracy,
                                "params_at_s", eval->time_s, "train_s", eval->train_s,
                                "eval_ms", eval->ms);
    if (record)
        s_eval_json (eval, record);
    ps_metrics_event (metrics, "eval", record);
}

//  A stop signal (signo) came after `step` of total steps: the checkpoint
//  of the steps done unless the last one written (kept) is of them, a
//  "stopped" record, and PS_ECANCELED saying where to continue from.
static int
s_stop (const ps_standalone_config_t *cfg, int signo, const ps_model_t *model,
        const ps_replica_t *replica, uint64_t step, uint64_t kept, uint64_t batches,
        uint64_t total, ps_metrics_t *metrics, ps_error_t *err)
{
    //  A second signal while the checkpoint is written ends the process at
    //  once, as the user asked: its default action, no longer blocked.
    sigset_t mask;
    ps_signal_stop_set (&mask);
    if (sigprocmask (SIG_UNBLOCK, &mask, NULL) != 0)
        ps_warn ("sigprocmask: %s; a second signal will not stop at once", strerror (errno));
    char name [32];
    ps_signal_name (signo, name, sizeof name);
    ps_warn ("%s: %s, then stopping (a second signal stops at once)", name,
             cfg->checkpoint_dir ? "writing a final checkpoint" : "no checkpoint directory, so "
             "the model is not kept");
    int rc = cfg->checkpoint_dir && kept != step
           ? ps_standalone_ckpt_save (cfg, model, replica, step, batches, total, err) : 0;
    if (rc)
        return rc;
    ps_metrics_event (metrics, "stopped",
                      json_pack ("{s:s, s:I, s:I, s:b}", "signal", name, "steps", (json_int_t) step,
                                 "total", (json_int_t) total,
                                 "checkpointed", cfg->checkpoint_dir != NULL));
    if (cfg->checkpoint_dir)
        return ps_error_set (err, PS_ECANCELED, "stopped by %s after %llu of %llu steps; the "
                             "checkpoint of step %llu in %s continues it with --resume", name,
                             (unsigned long long) step, (unsigned long long) total,
                             (unsigned long long) step, cfg->checkpoint_dir);
    return ps_error_set (err, PS_ECANCELED, "stopped by %s after %llu of %llu steps; no "
                         "--checkpoint-dir, so nothing was kept", name, (unsigned long long) step,
                         (unsigned long long) total);
}

int
ps_standalone_run (const ps_standalone_config_t *cfg, ps_standalone_result_t *result,
                   ps_error_t *err)
{
    int rc = 0;
    ps_model_t *model = NULL;
    ps_dataset_t *train = NULL, *test = NULL;
    ps_backend_t *backend = NULL;
    ps_replica_t *replica = NULL;
    float *grads = NULL, *x = NULL;
    uint8_t *labels = NULL;
    ps_binmetrics_t *bin = NULL;
    ps_metrics_t *metrics = NULL;
    int eval_batch = S_EVAL_BATCH;
    ps_error_t local;
    //  The codes below come from err, so it must exist.
    if (!err)
        err = &local;
    memset (result, 0, sizeof *result);

    if (cfg->epochs < 1 || cfg->batch < 1) {
        rc = ps_error_set (err, PS_EINVAL, "epochs (%d) and batch (%d) must be positive",
                           cfg->epochs, cfg->batch);
        goto done;
    }
    if ((rc = ps_opt_config_validate (&cfg->optimizer, err)))
        goto done;
    if (cfg->checkpoint_dir && (rc = ps_standalone_ckpt_check (cfg, err)))
        goto done;
    if (!(model = ps_model_load (cfg->model, err))) {
        rc = err->code;
        goto done;
    }
    int targets = ps_model_targets (model);
    train = cfg->train_csv
          ? ps_dataset_open_csv_targets (cfg->train_csv, cfg->label_column, targets,
                                         cfg->train_limit, err)
          : ps_dataset_open_targets (cfg->data_dir, PS_SPLIT_TRAIN, cfg->train_images,
                                     cfg->train_labels, targets, cfg->train_limit, err);
    test = !train ? NULL : cfg->test_csv
         ? ps_dataset_open_csv_targets (cfg->test_csv, cfg->label_column, targets,
                                        cfg->test_limit, err)
         : ps_dataset_open_targets (cfg->data_dir, PS_SPLIT_TEST, cfg->test_images,
                                    cfg->test_labels, targets, cfg->test_limit, err);
    if (!train || !test) {
        rc = err->code;
        goto done;
    }
    if ((rc = ps_dataset_check_model (train, model, err))
    ||  (rc = ps_dataset_check_model (test, model, err)))
        goto done;
    eval_batch = ps_backend_eval_batch (model, cfg->device, S_EVAL_BATCH);
    int max_batch = cfg->batch > eval_batch ? cfg->batch : eval_batch;
    if (!(backend = ps_backend_new (model, cfg->device, max_batch, cfg->threads, err))) {
        rc = err->code;
        goto done;
    }
    //  The metrics file and the progress lines are the coordinator's
    //  (ps_metrics.h): a progress record every progress_s seconds (none
    //  with 0), an eval record per evaluation, an epoch record per epoch and
    //  a done record.
    double progress_s = cfg->progress_s > 0 ? cfg->progress_s : HUGE_VAL;
    if (!(metrics = ps_metrics_new (cfg->metrics_path, false, progress_s, false, ps_clock_ms (),
                                    err))) {
        rc = err->code;
        goto done;
    }

    size_t param_count = ps_model_param_count (model);
    size_t input_size = ps_model_input_size (model);
    //  The parameters and their optimizer state are a replica, updated by
    //  the optimizer code a ps-server runs (one update per batch).
    if (!(replica = ps_replica_new (model, cfg->seed, &cfg->optimizer, err))) {
        rc = err->code;
        goto done;
    }
    float *params = ps_replica_params (replica);
    grads = ps_floats_alloc (param_count);
    x = ps_floats_alloc ((size_t) max_batch * input_size);
    labels = malloc ((size_t) max_batch * ps_model_label_size (model));
    bin = ps_model_binary (model) ? ps_binmetrics_new () : NULL;
    if (!grads || !x || !labels || (ps_model_binary (model) && !bin)) {
        rc = ps_error_set (err, PS_ETOOBIG, "out of memory for the gradients and a batch of "
                           "model \"%s\"", ps_model_name (model));
        goto done;
    }
    ps_model_summary (model, s_log_line, NULL);
    ps_info ("training on %s: %zu training and %zu test examples, batch %d, %d epochs, "
             "%s lr %g, seed %llu", ps_backend_describe (backend), ps_dataset_count (train),
             ps_dataset_count (test), cfg->batch, cfg->epochs,
             ps_opt_kind_name (cfg->optimizer.kind), cfg->optimizer.lr,
             (unsigned long long) cfg->seed);

    size_t batches = ps_dataset_batches (train, cfg->batch);
    uint64_t step = 0, total = (uint64_t) cfg->epochs * batches;
    if (cfg->resume && (rc = ps_standalone_ckpt_resume (cfg, replica, batches, &step, err)))
        goto done;
    //  The steps of the newest checkpoint written (or resumed from).
    uint64_t kept = cfg->resume ? step : UINT64_MAX;
    if (step >= total)
        ps_info ("the checkpoint has all %llu steps of %d epochs: nothing is left to train",
                 (unsigned long long) total, cfg->epochs);
    s_timer_t timer = { .start_ms = ps_clock_ms () };
    ps_metrics_start (metrics, timer.start_ms);
    ps_progress_t where = {
        .total = (uint64_t) batches * (uint64_t) cfg->epochs, .steps_per_epoch = batches,
        .lr = cfg->optimizer.lr, .workers_alive = 1, .workers = 1,
    };
    //  Filled by each evaluation; a run with nothing left to train has none.
    s_eval_t eval = { .test_accuracy = 0, .test_mae = NAN, .test_auc = NAN };
    double train_s = 0;
    for (int epoch = (int) (step / batches); epoch < cfg->epochs; epoch++) {
        double busy = 0, loss_sum = 0;
        size_t seen = 0;
        //  A resumed run starts in the middle of its first epoch.
        for (size_t b = step % batches; b < batches; b++) {
            int signo = cfg->stop_fd >= 0 ? ps_signal_take (cfg->stop_fd) : 0;
            if (signo) {
                result->stopped_by = signo;
                rc = s_stop (cfg, signo, model, replica, step, kept, batches, total, metrics,
                             err);
                goto done;
            }
            int n = ps_dataset_batch (train, cfg->seed, (uint64_t) epoch, b, cfg->batch,
                                      x, labels, err);
            if (n < 0) {
                rc = n;
                goto done;
            }
            double t0 = ps_clock_ms () / 1e3;
            ps_batch_stats_t stats;
            if ((rc = ps_backend_set_params (backend, params, err))
            ||  (rc = ps_backend_train_step (backend, x, labels, n,
                                             ps_step_dropout_seed (cfg->seed, step),
                                             grads, &stats, err)))
                goto done;
            //  Batch ids count from 1, as a cluster's steps do.
            uint64_t id = step + 1;
            if ((rc = ps_replica_apply (replica, grads, &id, 1, err)))
                goto done;
            double t1 = ps_clock_ms () / 1e3;
            busy += t1 - t0;
            step++;
            loss_sum += stats.loss_sum;
            seen += n;
            //  One process computes and waits on nothing: the whole step
            //  is computing.
            ps_step_report_t report = {
                .count = stats.count, .correct = stats.correct, .loss = stats.loss_sum,
                .compute_ms = (t1 - t0) * 1e3,
            };
            ps_metrics_step (metrics, &report, 0, step);
            where.done = step;
            ps_metrics_progress (metrics, t1 * 1e3, &where);
            //  The epoch's end has its own checkpoint and evaluation below.
            if (cfg->checkpoint_dir && cfg->checkpoint_every && step % cfg->checkpoint_every == 0
            &&  b + 1 < batches) {
                if ((rc = ps_standalone_ckpt_save (cfg, model, replica, step, batches, total, err)))
                    goto done;
                kept = step;
            }
            if (cfg->eval_steps && step % cfg->eval_steps == 0 && b + 1 < batches) {
                if ((rc = s_evaluate_test (backend, params, test, eval_batch, x, labels, bin,
                                           &timer, &eval, err)))
                    goto done;
                s_report_eval (metrics, step, batches, &eval);
            }
        }
        if ((rc = s_evaluate_test (backend, params, test, eval_batch, x, labels, bin, &timer,
                                   &eval, err))
        ||  (cfg->checkpoint_dir
             && (rc = ps_standalone_ckpt_save (cfg, model, replica, step, batches, total, err))))
            goto done;
        kept = cfg->checkpoint_dir ? step : kept;
        result->train_loss = loss_sum / seen;
        result->test_loss = eval.test_loss;
        result->test_accuracy = eval.test_accuracy;
        result->test_mae = eval.test_mae;
        result->test_auc = eval.test_auc;
        result->samples_per_s = seen / busy;
        //  The last epoch's line is the run's result, printed even when
        //  quiet; the others are progress.
        if (!cfg->quiet || epoch + 1 == cfg->epochs) {
            char text [128];
            s_eval_text (&eval, text, sizeof text);
            printf ("epoch %d/%d: train loss %.4f, test loss %.4f, %s, "
                    "%.0f samples/s (train %.1f s, test %.1f s)\n", epoch + 1, cfg->epochs,
                    result->train_loss, result->test_loss, text,
                    result->samples_per_s, busy, eval.ms / 1e3);
            fflush (stdout);
        }
        train_s += busy;
        json_t *record = json_pack ("{s:i, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:s}",
                                    "epoch", epoch + 1, "steps", (json_int_t) step,
                                    "train_loss", result->train_loss,
                                    "test_loss", result->test_loss,
                                    "test_accuracy", isnan (result->test_accuracy)
                                                     ? 0.0 : result->test_accuracy,
                                    "samples_per_s", result->samples_per_s, "train_s", busy,
                                    "test_s", eval.ms / 1e3,
                                    "device", ps_backend_describe (backend));
        if (record)
            s_eval_json (&eval, record);
        ps_metrics_event (metrics, "epoch", record);
        if (cfg->eval_steps)
            s_report_eval (metrics, step, batches, &eval);
    }
    //  The cluster's done record's keys that mean something here.
    json_t *record = json_pack ("{s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:s}",
                                "steps", (json_int_t) step, "total", (json_int_t) where.total,
                                "steps_per_epoch", (json_int_t) batches,
                                "wall_s", (ps_clock_ms () - timer.start_ms) / 1e3,
                                "samples_per_s", train_s > 0
                                    ? ps_metrics_samples (metrics) / train_s : 0.0,
                                "test_accuracy", isnan (result->test_accuracy)
                                                 ? 0.0 : result->test_accuracy,
                                "test_loss", result->test_loss, "mode", "standalone");
    if (record)
        s_eval_json (&eval, record);
    ps_metrics_event (metrics, "done", record);
done:
    ps_metrics_destroy (&metrics);
    ps_replica_destroy (&replica);
    free (grads);
    free (x);
    free (labels);
    ps_binmetrics_destroy (&bin);
    ps_backend_destroy (&backend);
    ps_dataset_destroy (&train);
    ps_dataset_destroy (&test);
    ps_model_destroy (&model);
    return rc;
}
