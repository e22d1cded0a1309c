//  A training run's metrics (see ps_metrics.h).

#include "ps_metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_clock.h"
#include "ps_log.h"
#include "ps_promtext.h"

//  How often the terminal progress line is redrawn.
#define S_TTY_MS          500
//  How far a window's training loss may rise above the lowest before the
//  run is said to diverge, and the window's length in steps.
#define S_DIVERGE_FACTOR  4.0
#define S_DIVERGE_STEPS   20
//  The most tasks of a role that get counters of their own: far more than
//  a cluster has, so that a bad index cannot make the counters huge.
#define S_MAX_TASK        4096

//  The buckets of the step and checkpoint histograms, in seconds:
//  Prometheus's default buckets.
static const double s_buckets [] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10
};
#define S_BUCKETS  (sizeof s_buckets / sizeof s_buckets [0])

//  Observations of durations, by bucket (not cumulative).
typedef struct {
    uint64_t counts [S_BUCKETS];
    uint64_t above;
    double sum;
} s_histogram_t;

//  Counters of the tasks of one role, by task index, grown on first use.
typedef struct {
    uint64_t (*counts) [3];
    size_t n;
} s_tasks_t;

//  The columns of s_tasks_t: a worker's steps, samples and failures; a
//  server's failures and registrations.
enum { S_W_STEPS, S_W_SAMPLES, S_W_FAILURES };
enum { S_S_FAILURES, S_S_REGISTRATIONS };

struct _ps_metrics_t {
    FILE *metrics;
    bool done, failed;          //  the run's closing records written
    bool tty;
    bool tty_dirty;
    double log_seconds;
    bool stop_on_divergence;
    double open_ms;             //  when the run began: time_s counts from here
    double start_ms;            //  when training began
    double window_ms;
    double tty_ms;
    uint64_t w_steps, w_count, w_correct, w_duplicates;
    double w_loss, w_compute_ms, w_comm_ms;
    uint64_t samples;
    double rate;                //  steps per second, smoothed

    //  The run's totals and latest values, for ps_metrics_prometheus: what
    //  the steps and events said since the start, and the last window's
    //  and evaluation's numbers (NaN until there is one).
    uint64_t steps, duplicates, evaluations, failures, recoveries;
    uint64_t checkpoints, checkpoint_failures;
    double compute_s, wait_s;
    ps_progress_t where;
    double last_samples_s, last_loss, last_accuracy, test_loss, test_accuracy;
    double test_mse, test_mae, test_auc;    //  NaN unless the latest evaluation had them
    s_histogram_t step_s, checkpoint_s;
    s_tasks_t workers, servers;

    //  Divergence: the loss of the steps in the current window, the lowest
    //  window's loss (or the first step's, the parameters as the run
    //  began, when lower), and the window that diverged, once found.
    double d_loss;
    uint64_t d_count, d_steps;
    double best_loss;
    bool have_best_loss;
    bool diverging;
    double diverged_loss;
};

ps_metrics_t *
ps_metrics_new (const char *metrics_path, bool tty, double log_seconds, bool stop_on_divergence,
                double now, ps_error_t *err)
{
    ps_metrics_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    if (metrics_path && !(self->metrics = fopen (metrics_path, "a"))) {
        ps_error_set (err, PS_EIO, "cannot open the metrics file %s: %s", metrics_path,
                      strerror (errno));
        free (self);
        return NULL;
    }
    self->tty = tty;
    self->log_seconds = log_seconds;
    self->stop_on_divergence = stop_on_divergence;
    self->open_ms = self->start_ms = self->window_ms = now;
    self->where.lr = NAN;
    self->last_samples_s = self->last_loss = self->last_accuracy = NAN;
    self->test_loss = self->test_accuracy = NAN;
    self->test_mse = self->test_mae = self->test_auc = NAN;
    return self;
}

void
ps_metrics_destroy (ps_metrics_t **self_p)
{
    ps_metrics_t *self = *self_p;
    if (!self)
        return;
    ps_metrics_tty_clear (self);
    if (self->metrics && fclose (self->metrics) != 0)
        ps_warn ("closing the metrics file: %s", strerror (errno));
    free (self->workers.counts);
    free (self->servers.counts);
    free (self);
    *self_p = NULL;
}

void
ps_metrics_tty_clear (ps_metrics_t *self)
{
    if (self->tty_dirty) {
        fputs ("\r\033[K", stderr);
        self->tty_dirty = false;
    }
}

//  Count one observation of a duration (none when it is not a number).
static void
s_observe (s_histogram_t *histogram, double seconds)
{
    if (!isfinite (seconds))
        return;
    size_t i = 0;
    while (i < S_BUCKETS && seconds > s_buckets [i])
        i++;
    if (i < S_BUCKETS)
        histogram->counts [i]++;
    else
        histogram->above++;
    histogram->sum += seconds;
}

//  Add to column of task index's counters (none for an index out of range).
static void
s_task_add (s_tasks_t *tasks, json_int_t index, int column, uint64_t n)
{
    if (index < 0 || index >= S_MAX_TASK)
        return;
    if ((size_t) index >= tasks->n) {
        size_t n_new = (size_t) index + 1;
        void *grown = realloc (tasks->counts, n_new * sizeof tasks->counts [0]);
        if (!grown)
            abort ();
        tasks->counts = grown;
        memset (tasks->counts + tasks->n, 0, (n_new - tasks->n) * sizeof tasks->counts [0]);
        tasks->n = n_new;
    }
    tasks->counts [index][column] += n;
}

//  A record's number, or NaN when it has none by that key.
static double
s_number (json_t *obj, const char *key)
{
    json_t *value = json_object_get (obj, key);
    return json_is_number (value) ? json_number_value (value) : NAN;
}

//  The run's totals follow the records: failures, recoveries, checkpoints
//  and evaluations are counted from the events that report them, so that
//  the totals and the metrics file never disagree.
static void
s_count_event (ps_metrics_t *self, const char *event, json_t *obj)
{
    json_int_t task = json_integer_value (json_object_get (obj, "task"));
    const char *role = json_string_value (json_object_get (obj, "role"));
    if (strcmp (event, "worker_failed") == 0) {
        //  The record says "worker_failed" of an evaluator too: counted in
        //  the total only.
        self->failures++;
        if (!role || strcmp (role, "worker") == 0)
            s_task_add (&self->workers, task, S_W_FAILURES, 1);
    }
    else
    if (strcmp (event, "server_failed") == 0) {
        self->failures++;
        s_task_add (&self->servers, task, S_S_FAILURES, 1);
    }
    else
    if (strcmp (event, "registered") == 0 && role && strcmp (role, "ps") == 0)
        s_task_add (&self->servers, task, S_S_REGISTRATIONS, 1);
    else
    if (strcmp (event, "recovered") == 0)
        self->recoveries++;
    else
    if (strcmp (event, "checkpoint") == 0) {
        self->checkpoints++;
        s_observe (&self->checkpoint_s, s_number (obj, "write_ms") / 1e3);
    }
    else
    if (strcmp (event, "checkpoint_failed") == 0)
        self->checkpoint_failures++;
    else
    if (strcmp (event, "eval") == 0) {
        self->evaluations++;
        self->test_loss = s_number (obj, "test_loss");
        self->test_accuracy = s_number (obj, "test_accuracy");
        self->test_mse = s_number (obj, "test_mse");
        self->test_mae = s_number (obj, "test_mae");
        self->test_auc = s_number (obj, "test_auc");
    }
}

void
ps_metrics_event (ps_metrics_t *self, const char *event, json_t *obj)
{
    if (!obj)
        obj = json_object ();
    s_count_event (self, event, obj);
    //  A run's file ends with its done, stopped or failed record
    //  (schemas/metrics.md), whatever the processes still do then: a worker
    //  that registers only after the last step, or an evaluation that comes
    //  back after a stop signal's record, is counted but not written. Only
    //  a failed record follows a done or stopped one: a run whose end was
    //  not what was scheduled.
    bool failed = strcmp (event, "failed") == 0;
    if (self->metrics && !self->failed && (!self->done || failed)) {
        self->done = self->done || strcmp (event, "done") == 0 || strcmp (event, "stopped") == 0;
        self->failed = failed;
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

void
ps_metrics_start (ps_metrics_t *self, double now)
{
    self->start_ms = self->window_ms = now;
}

double
ps_metrics_start_ms (const ps_metrics_t *self)
{
    return self->start_ms;
}

//  Every S_DIVERGE_STEPS steps the window's mean loss is judged: a run
//  whose loss is not finite, or has risen far above the lowest, diverges.
//  Said once.
static bool
s_track_loss (ps_metrics_t *self, double loss_sum, uint64_t count, uint64_t done)
{
    if (count == 0)
        return false;
    if (!self->have_best_loss && isfinite (loss_sum)) {
        self->best_loss = loss_sum / count;
        self->have_best_loss = true;
    }
    self->d_loss += loss_sum;
    self->d_count += count;
    if (++self->d_steps < S_DIVERGE_STEPS)
        return false;
    double loss = self->d_loss / self->d_count;
    self->d_loss = 0;
    self->d_count = self->d_steps = 0;
    bool diverges = !isfinite (loss)
                 || (self->have_best_loss && loss > S_DIVERGE_FACTOR * self->best_loss);
    if (isfinite (loss) && (!self->have_best_loss || loss < self->best_loss)) {
        self->best_loss = loss;
        self->have_best_loss = true;
    }
    if (!diverges || self->diverging)
        return false;
    self->diverging = true;
    self->diverged_loss = loss;
    ps_metrics_tty_clear (self);
    ps_warn ("the training loss diverges: %g over the last %d steps, %g at its lowest (step %"
             PRIu64 "); lower the learning rate or clip the gradients%s", loss,
             S_DIVERGE_STEPS, self->best_loss, done, self->stop_on_divergence
             ? "; stopping (stop_on_divergence)" : " (stop_on_divergence would stop the run)");
    ps_metrics_event (self, "diverging",
                      json_pack ("{s:I, s:o, s:f}", "step", (json_int_t) done,
                                 "loss", isfinite (loss) ? json_real (loss) : json_null (),
                                 "lowest_loss", self->best_loss));
    return true;
}

bool
ps_metrics_step (ps_metrics_t *self, const ps_step_report_t *step, int worker, uint64_t done)
{
    self->steps++;
    self->duplicates += step->duplicates;
    self->compute_s += step->compute_ms / 1e3;
    self->wait_s += step->comm_ms / 1e3;
    s_observe (&self->step_s, (step->compute_ms + step->comm_ms) / 1e3);
    s_task_add (&self->workers, worker, S_W_STEPS, 1);
    s_task_add (&self->workers, worker, S_W_SAMPLES, step->count);
    self->w_steps++;
    self->w_count += step->count;
    self->samples += step->count;
    self->w_correct += step->correct;
    self->w_loss += step->loss;
    self->w_compute_ms += step->compute_ms;
    self->w_comm_ms += step->comm_ms;
    self->w_duplicates += step->duplicates;
    return s_track_loss (self, step->loss, step->count, done);
}

void
ps_metrics_progress (ps_metrics_t *self, double now, const ps_progress_t *where)
{
    self->where = *where;
    double window_s = (now - self->window_ms) / 1e3;
    bool log_due = window_s >= self->log_seconds;
    bool tty_due = self->tty && now - self->tty_ms >= S_TTY_MS;
    if (!log_due && !tty_due)
        return;
    uint64_t done = where->done, total = where->total, per_epoch = where->steps_per_epoch;
    double samples_s = window_s > 0 ? self->w_count / window_s : 0;
    double steps_s = window_s > 0 ? self->w_steps / window_s : 0;
    if (log_due && window_s > 0)
        self->rate = self->rate > 0 ? 0.5 * self->rate + 0.5 * steps_s : steps_s;
    double rate = self->rate > 0 ? self->rate : steps_s;
    double eta = rate > 0 ? (total - done) / rate : -1;
    double loss = self->w_count ? self->w_loss / self->w_count : NAN;
    double acc = self->w_count ? (double) self->w_correct / self->w_count : NAN;
    uint64_t epoch = done < total ? done / per_epoch + 1 : (total - 1) / per_epoch + 1;
    uint64_t epochs = (total + per_epoch - 1) / per_epoch;
    char line [256];
    char eta_text [32] = "-";
    if (eta >= 0)
        snprintf (eta_text, sizeof eta_text, "%d:%02d", (int) (eta / 60), (int) fmod (eta, 60));
    char loss_text [32] = "-", acc_text [32] = "-";
    if (self->w_count) {
        snprintf (loss_text, sizeof loss_text, "%.4f", loss);
        snprintf (acc_text, sizeof acc_text, "%.4f", acc);
    }
    char auc_text [32] = "";
    if (where->has_auc)
        snprintf (auc_text, sizeof auc_text, "  test AUC %.4f", where->test_auc);
    snprintf (line, sizeof line, "epoch %" PRIu64 "/%" PRIu64 "  step %" PRIu64 "/%" PRIu64
              "  %.0f samples/s  loss %s  acc %s%s  ETA %s  workers %d/%d",
              epoch, epochs, done, total, samples_s, loss_text, acc_text, auc_text, eta_text,
              where->workers_alive, where->workers);
    if (tty_due) {
        fprintf (stderr, "\r\033[K%s", line);
        fflush (stderr);
        self->tty_dirty = true;
        self->tty_ms = now;
    }
    if (!log_due)
        return;
    if (!self->tty && self->w_steps)
        ps_info ("%s", line);
    if (self->w_steps) {
        self->last_samples_s = samples_s;
        self->last_loss = loss;
        self->last_accuracy = acc;
        json_t *obj = json_pack ("{s:I, s:I, s:I, s:f, s:f, s:f, s:I, s:i}",
                                 "epoch", (json_int_t) epoch, "step", (json_int_t) done,
                                 "total", (json_int_t) total,
                                 "samples_per_s", samples_s,
                                 "loss", isfinite (loss) ? loss : 0.0,
                                 "accuracy", isfinite (acc) ? acc : 0.0,
                                 "window_steps", (json_int_t) self->w_steps,
                                 "workers_alive", where->workers_alive);
        json_object_set_new (obj, "eta_s", eta >= 0 ? json_real (eta) : json_null ());
        if (where->has_auc)
            json_object_set_new (obj, "test_auc", json_real (where->test_auc));
        //  How the workers spent their steps: computing, or waiting on the
        //  servers (pulls and pushes) or the ring, and pushes the ledgers
        //  ignored. step_ms and wait_ms are means per step of the window.
        double busy = self->w_compute_ms + self->w_comm_ms;
        json_object_set_new (obj, "compute_fraction",
                             json_real (busy > 0 ? self->w_compute_ms / busy : 0));
        json_object_set_new (obj, "step_ms", json_real (busy / self->w_steps));
        json_object_set_new (obj, "wait_ms", json_real (self->w_comm_ms / self->w_steps));
        json_object_set_new (obj, "lr", json_real (where->lr));
        json_object_set_new (obj, "duplicates", json_integer ((json_int_t) self->w_duplicates));
        ps_metrics_event (self, "progress", obj);
    }
    self->window_ms = now;
    self->w_steps = self->w_count = self->w_correct = self->w_duplicates = 0;
    self->w_loss = self->w_compute_ms = self->w_comm_ms = 0;
}

uint64_t
ps_metrics_samples (const ps_metrics_t *self)
{
    return self->samples;
}

bool
ps_metrics_diverging (const ps_metrics_t *self, double *loss, double *lowest)
{
    if (self->diverging && loss)
        *loss = self->diverged_loss;
    if (self->diverging && lowest)
        *lowest = self->best_loss;
    return self->diverging;
}

//  One family of a single sample.
static void
s_single (ps_promtext_t *text, const char *name, const char *type, const char *help,
          double value)
{
    ps_promtext_family (text, name, type, help);
    ps_promtext_sample (text, name, NULL, NULL, value);
}

//  One family with a sample per task of a role, labelled by its index.
static void
s_per_task (ps_promtext_t *text, const char *name, const char *help, const char *label,
            const s_tasks_t *tasks, int column)
{
    ps_promtext_family (text, name, "counter", help);
    for (size_t i = 0; i < tasks->n; i++) {
        char index [24];
        snprintf (index, sizeof index, "%zu", i);
        ps_promtext_sample (text, name, label, index, (double) tasks->counts [i][column]);
    }
}

char *
ps_metrics_prometheus (const ps_metrics_t *self)
{
    ps_promtext_t *text = ps_promtext_new ();
    const ps_progress_t *at = &self->where;
    s_single (text, "ps_steps_total", "counter",
              "Training steps completed, as the workers reported them.", (double) self->steps);
    s_single (text, "ps_samples_total", "counter",
              "Training examples in the steps completed.", (double) self->samples);
    s_single (text, "ps_step", "gauge", "Steps of the run done (the global step).",
              (double) at->done);
    s_single (text, "ps_steps_planned", "gauge", "Steps the run trains in all.",
              (double) at->total);
    s_single (text, "ps_epoch", "gauge", "The epoch in progress, from 1.",
              at->steps_per_epoch ? (double) (at->done / at->steps_per_epoch + 1) : NAN);
    s_single (text, "ps_learning_rate", "gauge",
              "The learning rate the schedule gives the next step.", at->lr);
    s_single (text, "ps_samples_per_second", "gauge",
              "Training examples per second over the last progress window.",
              self->last_samples_s);
    s_single (text, "ps_loss", "gauge", "Mean training loss of the last progress window.",
              self->last_loss);
    s_single (text, "ps_accuracy", "gauge",
              "Training accuracy of the last progress window.", self->last_accuracy);
    s_single (text, "ps_test_loss", "gauge", "Test loss of the latest evaluation.",
              self->test_loss);
    s_single (text, "ps_test_accuracy", "gauge", "Test accuracy of the latest evaluation.",
              self->test_accuracy);
    s_single (text, "ps_test_mse", "gauge", "Test mean squared error of the latest "
              "evaluation (a regression model).", self->test_mse);
    s_single (text, "ps_test_mae", "gauge", "Test mean absolute error of the latest "
              "evaluation (a regression model).", self->test_mae);
    s_single (text, "ps_test_auc", "gauge", "Test AUC of the latest evaluation (a binary "
              "classifier).", self->test_auc);
    s_single (text, "ps_evaluations_total", "counter", "Evaluations of the test set.",
              (double) self->evaluations);
    s_single (text, "ps_workers_alive", "gauge", "Workers alive.", at->workers_alive);
    s_single (text, "ps_workers", "gauge", "Workers of the cluster.", at->workers);
    s_single (text, "ps_step_compute_seconds_total", "counter",
              "Seconds the workers spent computing the steps completed.", self->compute_s);
    s_single (text, "ps_step_wait_seconds_total", "counter",
              "Seconds the workers spent waiting on the servers or the ring in the steps "
              "completed.", self->wait_s);
    ps_promtext_histogram (text, "ps_step_seconds",
                           "Seconds a worker spent on a step: computing and waiting.",
                           s_buckets, self->step_s.counts, S_BUCKETS, self->step_s.above,
                           self->step_s.sum);
    s_single (text, "ps_duplicates_total", "counter",
              "Pushes the servers' ledgers ignored as already applied.",
              (double) self->duplicates);
    s_single (text, "ps_failures_total", "counter", "Workers and servers declared failed.",
              (double) self->failures);
    s_single (text, "ps_recoveries_total", "counter",
              "Restores of every server from a checkpoint: after a failure, or to resume.",
              (double) self->recoveries);
    s_single (text, "ps_checkpoints_total", "counter", "Checkpoints written.",
              (double) self->checkpoints);
    s_single (text, "ps_checkpoint_failures_total", "counter", "Checkpoints that failed.",
              (double) self->checkpoint_failures);
    ps_promtext_histogram (text, "ps_checkpoint_seconds", "Seconds a checkpoint took to write.",
                           s_buckets, self->checkpoint_s.counts, S_BUCKETS,
                           self->checkpoint_s.above, self->checkpoint_s.sum);
    s_per_task (text, "ps_worker_steps_total", "Training steps completed by each worker.",
                "worker", &self->workers, S_W_STEPS);
    s_per_task (text, "ps_worker_samples_total", "Training examples of each worker's steps.",
                "worker", &self->workers, S_W_SAMPLES);
    s_per_task (text, "ps_worker_failures_total", "Times each worker was declared failed.",
                "worker", &self->workers, S_W_FAILURES);
    s_per_task (text, "ps_server_failures_total", "Times each server was declared failed.",
                "server", &self->servers, S_S_FAILURES);
    s_per_task (text, "ps_server_registrations_total",
                "Registrations of each server: 1, and one more per restart.", "server",
                &self->servers, S_S_REGISTRATIONS);
    char *result = ps_promtext_take (text);
    ps_promtext_destroy (&text);
    return result;
}
