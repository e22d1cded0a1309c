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

//  How often the terminal progress line is redrawn.
#define S_TTY_MS          500
//  How far a window's training loss may rise above the lowest before the
//  run is said to diverge, and the window's length in steps.
#define S_DIVERGE_FACTOR  4.0
#define S_DIVERGE_STEPS   20

struct _ps_metrics_t {
    FILE *metrics;
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

void
ps_metrics_event (ps_metrics_t *self, const char *event, json_t *obj)
{
    if (!obj)
        obj = json_object ();
    if (self->metrics) {
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
ps_metrics_step (ps_metrics_t *self, const ps_step_report_t *step, uint64_t done)
{
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
