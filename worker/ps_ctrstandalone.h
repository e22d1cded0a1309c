//  Standalone click-through-rate training: a CTR model (ps_ctrmodel.h)
//  trained in one process on Criteo or LIBSVM files (ps_ctrdata.h), the
//  single-process baseline a cluster is measured against. The tables are
//  in-process shards (ps_sparse.h: the code a ps-server runs, rows created
//  on first touch, each table's own per-row optimizer), the dense
//  variables a replica (ps_replica.h) updated by the dense optimizer; the
//  engine is ps_ctrnet.h.
//
//  A step is a range of lines of the training file: step b of an epoch is
//  lines [b * batch, (b + 1) * batch), read in file order (the file is
//  streamed, and Criteo's logs are in time order, which a CTR model is
//  trained in), malformed lines skipped. Each step maps its ids, pulls
//  each table's distinct rows, runs forward and backward, applies the
//  dense gradient and pushes each table's summed row gradients, all under
//  the step's id (from 1), which the tables' and the replica's ledgers
//  record. Evaluation pulls rows as a step does, and so creates none.
//
//  Each epoch prints one line: the training loss (mean binary
//  cross-entropy), the test log loss and AUC (ps_binmetrics.h) and the
//  training examples per second (training steps only); while an epoch
//  runs, the coordinator's progress line goes to the log every few
//  seconds. A metrics file has the coordinator's record format
//  (common/base/ps_metrics.h, schemas/metrics.md): a "progress" record
//  with each progress line, and each evaluation writes
//      {"event": "eval", "time_s": W, "epoch": E, "step": S, "test_loss": L,
//       "test_auc": A, "test_accuracy": C, "params_at_s": T, "train_s": R,
//       "eval_ms": M}
//  and the end of training
//      {"event": "done", "time_s": W, "epochs": E, "steps": S, "total": S,
//       "steps_per_epoch": P, "examples": N, "wall_s": D, "samples_per_s": X,
//       "train_loss": L, "test_loss": L, "test_auc": A, "test_logloss": L,
//       "test_accuracy": C, "examples_per_s": X, "malformed": M,
//       "mode": "standalone",
//       "tables": [{"name": ..., "rows": ..., "created": ..., "row_updates": ...,
//                   "dropped": ..., "evicted": ..., "steps": ..., "bytes": ...}, ...]}
//  with W when the record was written, C the share of test examples whose
//  predicted class (p >= 0.5) is their label, T the wall seconds from the start
//  of training to the evaluation, R the same less the earlier
//  evaluations, M the evaluation's milliseconds; in the done record
//  "steps" counts every epoch's and "samples_per_s" every epoch's
//  examples per second of training, while "examples", "train_loss" and
//  "examples_per_s" are the last epoch's, "malformed" counts the training
//  lines skipped, and a table's "steps" the steps its ledger holds (every
//  step, once).

#ifndef PS_CTRSTANDALONE_H_INCLUDED
#define PS_CTRSTANDALONE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_ctrbatch.h"
#include "ps_error.h"
#include "ps_optimizer.h"

typedef struct {
    const char *model;          //  lr, dlrm or a spec file with "inputs"
    const char *train_path;
    const char *test_path;
    ps_ctrformat_t format;
    int threads;                //  OpenBLAS's threads
    int epochs;
    int batch;
    uint64_t seed;              //  the dense variables' initial values
    bool optimizer_given;       //  else the spec's dense optimizer
    ps_opt_config_t optimizer;
    uint64_t train_limit;       //  lines; 0 = the whole file
    uint64_t test_limit;
    const char *metrics_path;   //  NULL = none
    double progress_s;          //  seconds between progress lines; 0 = none
    bool quiet;                 //  print only the last epoch's line on stdout (--quiet)
} ps_ctrstandalone_config_t;

//  The defaults: Criteo format, one thread, 1 epoch of batch 512, seed 1,
//  the spec's optimizer, progress every 5 s. model and the paths are left
//  NULL.
void ps_ctrstandalone_config_default (ps_ctrstandalone_config_t *cfg);

//  The outcome of the last epoch.
typedef struct {
    uint64_t steps;
    double train_loss;
    double test_loss;
    double test_auc;
    double examples_per_s;
} ps_ctrstandalone_result_t;

//  Train. Returns 0, or a negative code with a message naming what failed
//  (model, data file, a model that does not fit the data, metrics file,
//  training that diverged).
int ps_ctrstandalone_run (const ps_ctrstandalone_config_t *cfg,
                          ps_ctrstandalone_result_t *result, ps_error_t *err);

#endif
