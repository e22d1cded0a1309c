//  A training run's metrics: what a person watching the run sees, and
//  what a program reading the metrics file gets. The coordinator and
//  standalone training (ps-worker --standalone) both report through it, so
//  their metrics files have one record format (schemas/metrics.md, checked
//  by schemas/metrics.schema.json).
//
//  It owns the metrics file (one JSON object per line, each with its
//  "event" and the seconds since the run began as "time_s"), the live
//  progress line on a terminal (redrawn at most twice a second, cleared
//  before any log line so the two never mix), the progress window (steps,
//  examples, loss and time spent since the last "progress" record), the
//  run's totals (also as Prometheus text, for an HTTP endpoint to serve),
//  and the divergence watch: the training loss of the steps
//  done is judged in windows of a fixed number of steps, so what is judged
//  does not depend on the machine's speed. It knows nothing of modes,
//  peers or the schedule: the loop hands it numbers.

#ifndef PS_METRICS_H_INCLUDED
#define PS_METRICS_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "ps_error.h"

typedef struct _ps_metrics_t ps_metrics_t;

//  One completed step as a worker reported it: its examples, the correct
//  predictions, its summed loss, the time it spent computing and waiting
//  on the servers or the ring, and the pushes the servers' ledgers
//  ignored as duplicates.
typedef struct {
    uint64_t count, correct, duplicates;
    double loss, compute_ms, comm_ms;
} ps_step_report_t;

//  Where the run stands, for a progress line; lr is the learning rate the
//  schedule gives now; with has_auc, the latest evaluation's AUC of a
//  click-through-rate model.
typedef struct {
    uint64_t done, total, steps_per_epoch;
    double lr;
    int workers_alive, workers;
    bool has_auc;
    double test_auc;
} ps_progress_t;

//  Open the report. metrics_path (NULL: none) is opened for appending;
//  tty draws a live progress line on stderr instead of logging one every
//  log_seconds; stop_on_divergence only changes what the divergence
//  warning says. now is the run's start, from which time_s counts.
//  Returns NULL with err set when the metrics file cannot be opened.
ps_metrics_t *ps_metrics_new (const char *metrics_path, bool tty, double log_seconds,
                            bool stop_on_divergence, double now, ps_error_t *err);

//  Clear the progress line, close the metrics file, free, set *self_p NULL.
void ps_metrics_destroy (ps_metrics_t **self_p);

//  Clear the terminal's progress line, if drawn, before a log line.
void ps_metrics_tty_clear (ps_metrics_t *self);

//  Write one metrics line {event, time_s, ...obj}, and release obj (NULL:
//  no other keys). A write error is warned about, not fatal. After a done
//  record only a failed one is written (a run that did not verify), and
//  after a failed one nothing (the events still count for the Prometheus
//  text).
void ps_metrics_event (ps_metrics_t *self, const char *event, json_t *obj);

//  Training begins now: the progress window and the wall clock of the
//  done record count from here.
void ps_metrics_start (ps_metrics_t *self, double now);
double ps_metrics_start_ms (const ps_metrics_t *self);

//  A step completed by worker (its task index; the counters of the
//  Prometheus text are kept per worker), done steps being done now.
//  Returns true when this
//  step's window found the run diverging for the first time (the loss not
//  finite, or far above its lowest): the warning and the "diverging"
//  record are written; failing the run is the caller's choice.
bool ps_metrics_step (ps_metrics_t *self, const ps_step_report_t *step, int worker,
                      uint64_t done);

//  Redraw the progress line and, every log_seconds, log it and write a
//  "progress" record for the window, which then starts again.
void ps_metrics_progress (ps_metrics_t *self, double now, const ps_progress_t *where);

//  Examples trained in steps that completed, over the whole run.
uint64_t ps_metrics_samples (const ps_metrics_t *self);

//  Whether the run was found diverging; if so, and loss / lowest are not
//  NULL, the mean loss of the window that diverged and the lowest before.
bool ps_metrics_diverging (const ps_metrics_t *self, double *loss, double *lowest);

//  The run's numbers in the Prometheus text format (ps_promtext.h): steps,
//  samples, the last window's rate, loss and accuracy, the learning rate,
//  the latest evaluation, failures, recoveries and checkpoints (counted
//  from the events written), a histogram of step times and one of
//  checkpoint times, and per-worker and per-server counters. The caller
//  frees the text.
char *ps_metrics_prometheus (const ps_metrics_t *self);

#endif
