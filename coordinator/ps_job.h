//  The job: what a training run does (schemas/job.md, checked against
//  the JSON Schema schemas/job.schema.json). The coordinator reads it from --job FILE, applies its
//  command-line flags on top, validates the result and hands workers the
//  parts they need in their plan; a checkpoint records it so that a resumed
//  run trains the same job.
//
//  The learning-rate schedule is a concept of its own: ps_lr_schedule.h.

#ifndef PS_JOB_H_INCLUDED
#define PS_JOB_H_INCLUDED

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "ps_error.h"
#include "ps_lr_schedule.h"
#include "ps_optimizer.h"
#include "ps_partitioner.h"

#define PS_JOB_PATH_MAX 1024

typedef enum { PS_MODE_ASYNC, PS_MODE_MIRRORED, PS_MODE_SSP, PS_MODE_SYNC } ps_mode_t;

//  The staleness that bounds nothing: ssp with it is async (the job key's
//  largest value, and what `--staleness unbounded` sets).
#define PS_JOB_STALENESS_UNBOUNDED  INT_MAX

typedef struct {
    char model [PS_JOB_PATH_MAX];       //  built-in name (cnn, cnn2, mlp) or spec path
    ps_opt_config_t optimizer;          //  "optimizer": {"kind": ..., "lr": ..., ...}
    bool optimizer_given;               //  the file or a flag set the optimizer, so a
                                        //  model's own (ps_job_model_optimizer) yields
    ps_lr_schedule_t lr_schedule;       //  "lr_schedule": {"kind": ..., ...}
    int batch_size;                     //  per worker; 1 .. 65536
    int epochs;                         //  >= 1
    uint64_t steps;                     //  0 = epochs * batches per epoch; else the run's length
    ps_mode_t mode;                     //  "async", "mirrored", "ssp" or "sync"
    int staleness;                      //  ssp: steps a worker may run ahead of the
                                        //  slowest; >= 0 (default 3)
    char checkpoint_dir [PS_JOB_PATH_MAX];  //  "" = no checkpoints
    uint64_t checkpoint_steps;          //  every N steps; 0 = not by steps
    double checkpoint_seconds;          //  every T seconds; 0 = not by time
    int checkpoint_keep;                //  newest K kept; >= 1 (default 3)
    int checkpoint_full_every;          //  every K-th checkpoint full, the others
                                        //  incremental (tables only); >= 1 (default 1)
    uint64_t seed;                      //  weights, shuffle, dropout
    char data_dir [PS_JOB_PATH_MAX];
    //  A click-through-rate model's data: "criteo" or "libsvm" text files
    //  (schemas/data.md); "idx" for the image models, whose files are in
    //  data_dir.
    char data_format [8];
    char train_data [PS_JOB_PATH_MAX];  //  "" unless data_format is criteo or libsvm
    char test_data [PS_JOB_PATH_MAX];
    //  "data": an image model's IDX files by name, each pair given whole or
    //  not at all; "" takes data_dir's file of Fashion-MNIST's name.
    char train_images [PS_JOB_PATH_MAX];
    char train_labels [PS_JOB_PATH_MAX];
    char test_images [PS_JOB_PATH_MAX];
    char test_labels [PS_JOB_PATH_MAX];
    //  data_format "csv": the column of train_data and test_data that
    //  holds the labels; the others are features.
    char label_column [128];
    int classes;                        //  data.classes: 0 = inferred from the labels
    uint64_t train_limit;               //  first N training examples; 0 = all
    uint64_t test_limit;                //  first N test examples; 0 = all
    ps_partitioner_t partitioner;       //  "partitioner": {"kind": ..., ...}
    int eval_epochs;                    //  evaluate every N epochs; 0 = never
    uint64_t eval_steps;                //  also every N steps; 0 = not by steps
    int heartbeat_ms;                   //  "heartbeat": {"interval_ms", "timeout_ms"}
    int heartbeat_timeout_ms;
    int register_timeout_ms;            //  wait for servers at start-up
    bool overlap;                       //  workers push step k while computing k + 1
    int worker_threads;                 //  compute threads per worker
    bool worker_threads_given;          //  the file or --threads set them, so a local
                                        //  cluster's split of its cores (ps_cores.h) yields
    char device [8];                    //  "cpu", "gpu" or "auto"
    double log_seconds;                 //  metrics window; > 0
    int nonfinite_retries;              //  a step whose gradient is not finite is tried
                                        //  this many times more before the run fails
    int step_retries;                   //  a step that fails otherwise (a server's error
                                        //  reply, a lost push) is tried this many times
                                        //  more in a row before the run fails
    bool stop_on_divergence;            //  fail a run whose training loss diverges
} ps_job_t;

//  The defaults: cnn, Adam 1e-3 constant, batch 64, 3 epochs, async, no
//  checkpoints (keep 3 once a directory is set), seed 1, Debian's
//  Fashion-MNIST directory, the default partitioner for nservers servers,
//  evaluation every epoch, heartbeats 500 ms / 3000 ms, 60 s to register,
//  1 thread per worker, device cpu, a metrics window of 5 s, 2 retries of
//  a step with a non-finite gradient, 100 of a step that fails otherwise,
//  a warning only when the loss diverges. For a cluster of no servers
//  (nservers 0) the mode is mirrored, and the partitioner is one server's.
void ps_job_default (ps_job_t *job, int nservers);

//  Overlay the keys of a job file (or of a JSON object from a checkpoint
//  manifest; source names it in messages) onto *job. The object is first
//  validated against the schema: unknown keys, wrong types and
//  out-of-range values are errors naming source, the key's JSON pointer
//  ("at /optimizer/lr") and what was expected.
//  An optimizer kind other than the current one first resets every
//  optimizer field to that kind's defaults. The result is then checked as
//  ps_job_validate checks it, except for the rules between keys that
//  command-line flags may still settle (a checkpoint interval without
//  checkpoint.dir, heartbeat.timeout_ms not above interval_ms): call
//  ps_job_validate after applying the flags. On error *job is unchanged.
//  A missing file is PS_ENOTFOUND; one that cannot be read (a FIFO or a
//  directory, refused without waiting on it; a read error) or anything
//  wrong inside it is PS_EINVAL.
int ps_job_load_file (ps_job_t *job, const char *path, ps_error_t *err);
int ps_job_load_json (ps_job_t *job, const json_t *obj, const char *source, ps_error_t *err);

//  Give the job the optimizer a model names for its dense variables (a
//  click-through-rate model's spec does: ps_ctrmodel.h; model_optimizer
//  NULL for a model that names none), unless the job file's "optimizer",
//  --optimizer or --lr set it (optimizer_given). The precedence is then:
//  the job's default, the model's, the job file's, the flags'. The model's
//  optimizer passed its schema, so the job stays valid.
void ps_job_model_optimizer (ps_job_t *job, const ps_opt_config_t *model_optimizer);

//  Check the combination (ranges, piecewise lengths, a checkpoint interval
//  without a directory, ...). Errors name the key by its JSON pointer.
int ps_job_validate (const ps_job_t *job, ps_error_t *err);

//  The whole job as a JSON object that ps_job_load_json reads back to an
//  identical job. NULL when memory runs out or a value cannot be written
//  in JSON (a number that is not finite, an integer past INT64_MAX, a
//  string that is not UTF-8), all of which ps_job_validate refuses.
json_t *ps_job_to_json (const ps_job_t *job);

//  Parse "async", "mirrored" or "sync".
int ps_mode_parse (const char *name, ps_mode_t *mode, ps_error_t *err);
const char *ps_mode_name (ps_mode_t mode);

#endif
