//  Standalone training: the whole model trained in one process with the
//  local optimizer (common/model/ps_optimizer.h, the code ps-server applies), on
//  the deterministic per-epoch batches of ps_dataset.h. It is the
//  single-process baseline a cluster is measured against.
//
//  Each epoch prints one line (and, with a metrics file, one "epoch"
//  record): the mean training loss, the test loss and accuracy, and
//  training samples per second (training steps only; evaluation is timed
//  apart). While an epoch runs, the coordinator's progress line goes to
//  the log every few seconds, with its "progress" record, and the run ends
//  with a "done" record: the metrics file has the cluster's record format
//  (common/base/ps_metrics.h, schemas/metrics.md).
//
//  With eval_steps N > 0 the test set is also evaluated after every N
//  steps, so that time-to-accuracy can be measured at the granularity of a
//  cluster's --eval-steps. Each such evaluation, and the one at the end of
//  each epoch, logs a line and writes a metrics record
//      {"event": "eval", "time_s": W, "epoch": E, "epoch_f": F, "step": S,
//       "test_loss": L, "test_accuracy": A, "params_at_s": T, "train_s": R,
//       "eval_ms": M}
//  where W is when the record was written (as in every record), E is the
//  number of completed epochs, F = S / steps per epoch, T (as in the
//  coordinator's eval records) the wall seconds from the start of training
//  (after loading the model and the data) to the moment the evaluated
//  parameters existed (the start of this evaluation), R the same less the
//  time spent in every earlier evaluation, and M this evaluation's
//  milliseconds. At an epoch's end the one evaluation feeds both the epoch
//  record and the eval record. A regression model ("loss": "mse") has no
//  accuracy: its lines and records give "test_mse" and "test_mae" in its
//  place (test_loss is the mse too); a binary classifier's add
//  "test_auc", the exact AUC of its test predictions (ps_binmetrics.h).
//
//  With a checkpoint directory the run also writes the checkpoints a
//  cluster writes (ps_standalone_ckpt.h) at every epoch's end and every
//  checkpoint_every steps, and with resume it continues from the newest
//  one, training each remaining step once. A stop signal (Ctrl-C) ends the
//  run between two steps, after the checkpoint of the steps done.

#ifndef PS_STANDALONE_H_INCLUDED
#define PS_STANDALONE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_backend.h"
#include "ps_binmetrics.h"
#include "ps_dataset.h"
#include "ps_error.h"
#include "ps_model.h"
#include "ps_optimizer.h"

typedef struct {
    const char *model;          //  built-in name or spec file
    const char *data_dir;
    //  IDX files by name, in place of data_dir's (NULL: data_dir's); each
    //  split's two are given together.
    const char *train_images, *train_labels, *test_images, *test_labels;
    //  CSV files in place of any of those (NULL: none), and their column
    //  of labels.
    const char *train_csv, *test_csv, *label_column;
    ps_device_t device;
    int threads;
    int epochs;
    int batch;
    uint64_t seed;              //  weights, shuffle and dropout
    ps_opt_config_t optimizer;
    size_t train_limit;         //  0 = the whole training set
    size_t test_limit;          //  0 = the whole test set
    const char *metrics_path;   //  JSON lines, appended to; NULL = none
    double progress_s;          //  seconds between progress lines; 0 = none
    bool quiet;                 //  print only the last epoch's line on stdout (--quiet)
    uint64_t eval_steps;        //  also evaluate every N steps; 0 = only per epoch
    const char *checkpoint_dir; //  checkpoints (ps_standalone_ckpt.h); NULL = none
    uint64_t checkpoint_every;  //  also every N steps; 0 = at each epoch's end only
    bool resume;                //  continue from checkpoint_dir's newest checkpoint
    int stop_fd;                //  a signalfd for SIGINT/SIGTERM, or -1 (the default)
} ps_standalone_config_t;

//  The defaults: cnn, Debian's Fashion-MNIST directory, auto device, all
//  cores, 3 epochs of batch 64, seed 1, Adam 1e-3, progress every 5 s,
//  evaluation once per epoch.
void ps_standalone_config_default (ps_standalone_config_t *cfg);

//  The outcome of the last epoch.
typedef struct {
    double train_loss;
    double test_loss;
    double test_accuracy;       //  NaN for a regression model
    double test_mae;            //  a regression model's, else NaN
    double test_auc;            //  a binary classifier's, else NaN
    double samples_per_s;
    int stopped_by;             //  the stop signal that ended the run, or 0
} ps_standalone_result_t;

//  Train. Returns 0, or a negative code with a message naming what failed
//  (model, data file, device, metrics file). A stop signal on stop_fd is
//  taken between steps: the run writes the checkpoint of the steps done
//  (with a checkpoint directory; --resume continues from it) and a
//  "stopped" metrics record, and returns PS_ECANCELED with the signal in
//  result->stopped_by. The stop signals are unblocked on the calling
//  thread first, so that a second one ends the process at once.
int ps_standalone_run (const ps_standalone_config_t *cfg, ps_standalone_result_t *result,
                       ps_error_t *err);

//  The seed of the dropout masks of step `step` (counted from 0) of a run
//  seeded with `seed`, so that standalone and cluster training drop the same
//  units in the same step.
uint64_t ps_step_dropout_seed (uint64_t seed, uint64_t step);

//  Loss and accuracy (a regression model's squared and absolute errors,
//  ps_batch_stats_t) of the backend's current parameters over a whole data
//  set, in file order, in batches of up to `batch` (at most the backend's
//  largest batch). x and labels are scratch space for one batch (labels
//  of ps_dataset_label_size bytes an example). Unless bin is NULL, which
//  it must be unless the model is a binary classifier, every example's
//  predicted probability and label are added to bin, for the exact AUC.
int ps_evaluate (ps_backend_t *backend, const ps_dataset_t *data, int batch,
                 float *x, uint8_t *labels, ps_binmetrics_t *bin, ps_batch_stats_t *stats,
                 ps_error_t *err);

//  The same over examples [first, first + count) only (clipped to the data
//  set): one member's share of a mirrored evaluation.
int ps_evaluate_range (ps_backend_t *backend, const ps_dataset_t *data, size_t first,
                       size_t count, int batch, float *x, uint8_t *labels,
                       ps_binmetrics_t *bin, ps_batch_stats_t *stats, ps_error_t *err);

#endif
