//  The coordinator's job flags; see ps_jobflags.h.

#include "ps_jobflags.h"

#include <assert.h>
#include <float.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_dataset.h"
#include "ps_mode.h"
#include "ps_optimizer.h"
#include "ps_parse.h"

//  The flags with a short form are keyed by it; the others from
//  PS_JOBFLAGS_FIRST.
enum {
    O_MODEL = 'm', O_EPOCHS = 'e', O_BATCH = 'b', O_DATA = 'd', O_CKPT_DIR = 'C',
    O_THREADS = 'T',
    O_STEPS = PS_JOBFLAGS_FIRST,
    O_OPTIMIZER, O_LR, O_MODE, O_STALENESS, O_SEED, O_LIMIT,
    O_TEST_LIMIT, O_CKPT_STEPS, O_CKPT_SECONDS, O_KEEP, O_EVAL_EPOCHS, O_EVAL_STEPS,
    O_HEARTBEAT, O_HEARTBEAT_TIMEOUT, O_REGISTER_TIMEOUT, O_DEVICE, O_OVERLAP, O_NO_OVERLAP,
    O_NONFINITE_RETRIES, O_STOP_ON_DIVERGENCE, O_DATA_FORMAT, O_TRAIN_DATA, O_TEST_DATA,
    O_FULL_EVERY, O_STEP_RETRIES, O_TRAIN_IMAGES, O_TRAIN_LABELS, O_TEST_IMAGES, O_TEST_LABELS,
    O_LABEL_COLUMN, O_CLASSES,
};

//  The group of the job flags in a program's help.
#define S_GROUP  10

static const struct argp_option s_options [] = {
    { NULL, 0, NULL, 0, "Job (schemas/job.md): these flags override the job file", S_GROUP },
    { "model", O_MODEL, "NAME|FILE", 0, "cnn, cnn2, mlp, lr, dlrm or a spec file (default cnn)",
      S_GROUP },
    { "epochs", O_EPOCHS, "N", 0, "Epochs to train (default 3)", S_GROUP },
    { "steps", O_STEPS, "N", 0, "Train N steps instead of epochs", S_GROUP },
    { "batch", O_BATCH, "N", 0, "Batch size per worker (default 64)", S_GROUP },
    { "optimizer", O_OPTIMIZER, "KIND", 0,
      "sgd, momentum, adagrad or adam (default adam), with that kind's defaults", S_GROUP },
    { "lr", O_LR, "RATE", 0,
      "Learning rate (default 0.001); it wins over --optimizer's default, in either order",
      S_GROUP },
    { "mode", O_MODE, "MODE", 0,
      "async (default); mirrored: synchronous, every worker a replica, gradients summed by "
      "ring all-reduce; ssp: async with no worker more than S steps ahead of the slowest "
      "live one (bounded staleness); or sync: synchronous on the servers, which apply each "
      "round's mean gradient once", S_GROUP },
    { "staleness", O_STALENESS, "S", 0,
      "ssp's bound, a whole number (default 3; 0 = lockstep) or unbounded (as async)",
      S_GROUP },
    { "seed", O_SEED, "N", 0, "Random seed (default 1)", S_GROUP },
    { "data", O_DATA, "DIR", 0, "The data directory (default " PS_DATASET_DEFAULT_DIR ")",
      S_GROUP },
    { "limit", O_LIMIT, "N", 0, "Train on the first N training examples", S_GROUP },
    { "test-limit", O_TEST_LIMIT, "N", 0, "Evaluate on the first N test examples", S_GROUP },
    { "data-format", O_DATA_FORMAT, "F", 0,
      "idx (default: IDX files in --data); criteo or libsvm text for a click-through-rate "
      "model (lr, dlrm); or csv, a classifier's CSV files", S_GROUP },
    { "train-data", O_TRAIN_DATA, "FILE", 0,
      "The training data's text or CSV file (an absolute path)", S_GROUP },
    { "test-data", O_TEST_DATA, "FILE", 0, "The test data's text or CSV file", S_GROUP },
    { "train-images", O_TRAIN_IMAGES, "FILE", 0,
      "An image model's training images, an IDX or .npy file in place of that in --data",
      S_GROUP },
    { "train-labels", O_TRAIN_LABELS, "FILE", 0, "Its training labels, the same way", S_GROUP },
    { "test-images", O_TEST_IMAGES, "FILE", 0, "Its test images, the same way", S_GROUP },
    { "test-labels", O_TEST_LABELS, "FILE", 0, "Its test labels, the same way", S_GROUP },
    { "label-column", O_LABEL_COLUMN, "NAME", 0,
      "The CSV files' column of labels, or of a regression model's target (default label)",
      S_GROUP },
    { "classes", O_CLASSES, "N", 0,
      "The data's classes, 2 to 256, checked against the labels and the model's last layer "
      "(default: from the labels); refused for a regression model", S_GROUP },
    { "checkpoint-dir", O_CKPT_DIR, "DIR", 0, "Where checkpoints are written", S_GROUP },
    { "checkpoint-steps", O_CKPT_STEPS, "N", 0, "A checkpoint every N steps", S_GROUP },
    { "checkpoint-seconds", O_CKPT_SECONDS, "S", 0, "A checkpoint every S seconds", S_GROUP },
    { "keep", O_KEEP, "K", 0, "Checkpoints kept", S_GROUP },
    { "full-every", O_FULL_EVERY, "K", 0,
      "Every K-th checkpoint writes the tables whole, the others incremental (default 1: "
      "always whole)", S_GROUP },
    { "eval-epochs", O_EVAL_EPOCHS, "N", 0, "Evaluate every N epochs (default 1; 0 = never)",
      S_GROUP },
    { "eval-steps", O_EVAL_STEPS, "N", 0, "Also evaluate every N steps", S_GROUP },
    { "heartbeat-ms", O_HEARTBEAT, "N", 0, "Heartbeat interval (default 500)", S_GROUP },
    { "heartbeat-timeout-ms", O_HEARTBEAT_TIMEOUT, "N", 0,
      "A task silent this long has failed (default 3000)", S_GROUP },
    { "register-timeout-ms", O_REGISTER_TIMEOUT, "N", 0,
      "Wait this long for the servers (default 60000)", S_GROUP },
    { "threads", O_THREADS, "N", 0,
      "Compute threads per worker (default 1; a local cluster splits its cores: README)",
      S_GROUP },
    { "device", O_DEVICE, "D", 0, "cpu, gpu or auto for the workers (default cpu)", S_GROUP },
    { "overlap", O_OVERLAP, NULL, 0,
      "Workers push a step while computing the next (faster, one step staler: README, "
      "Benchmarks)", S_GROUP },
    { "no-overlap", O_NO_OVERLAP, NULL, 0,
      "Workers wait for a step's push before computing the next (the default; overrides a "
      "job file's overlap)", S_GROUP },
    { "nonfinite-retries", O_NONFINITE_RETRIES, "N", 0,
      "Retries of a step whose gradient is NaN or infinite before the run fails (default 2)",
      S_GROUP },
    { "step-retries", O_STEP_RETRIES, "N", 0,
      "Retries in a row of a step failing otherwise (a server's error) before the run fails "
      "(default 100)", S_GROUP },
    { "stop-on-divergence", O_STOP_ON_DIVERGENCE, NULL, 0,
      "Fail a run whose training loss diverges (default: warn)", S_GROUP },
    { 0 },
};

typedef struct {
    int key;
    const char *value;
} s_flag_t;

struct _ps_jobflags_t {
    s_flag_t *flags;
    int count;
    int size;
};

ps_jobflags_t *
ps_jobflags_new (void)
{
    ps_jobflags_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    return self;
}

void
ps_jobflags_destroy (ps_jobflags_t **self_p)
{
    assert (self_p);
    if (*self_p) {
        free ((*self_p)->flags);
        free (*self_p);
        *self_p = NULL;
    }
}

int
ps_jobflags_count (const ps_jobflags_t *self)
{
    assert (self);
    return self->count;
}

static const char *
s_name (int key)
{
    for (int i = 0; s_options [i].name || s_options [i].doc; i++)
        if (s_options [i].name && s_options [i].key == key)
            return s_options [i].name;
    return NULL;
}

//  Copy a string flag into its field of len bytes.
static int
s_copy (const char *flag, const char *text, char *buf, size_t len, ps_error_t *err)
{
    if (strlen (text) >= len)
        return ps_error_set (err, PS_EINVAL, "%s: longer than %zu bytes", flag, len - 1);
    strcpy (buf, text);
    return 0;
}

//  Put "FLAG: " before the message of err, code rc. Returns rc.
static int
s_prefix (ps_error_t *err, int rc, const char *flag)
{
    char msg [sizeof err->msg];
    snprintf (msg, sizeof msg, "%s", err->msg);
    return ps_error_set (err, rc, "%s: %s", flag, msg);
}

//  Apply the flag keyed key with its value to job. Returns 0, or a
//  negative error code with *err naming the flag.
static int
s_apply (ps_job_t *job, int key, const char *value, ps_error_t *err)
{
    char flag [64];
    snprintf (flag, sizeof flag, "--%s", s_name (key));
    uint64_t u;
    double d;
    int rc;
    switch (key) {
        case O_MODEL:
            return s_copy (flag, value, job->model, sizeof job->model, err);
        case O_DATA:
            return s_copy (flag, value, job->data_dir, sizeof job->data_dir, err);
        case O_CKPT_DIR:
            return s_copy (flag, value, job->checkpoint_dir, sizeof job->checkpoint_dir, err);
        case O_TRAIN_DATA:
            return s_copy (flag, value, job->train_data, sizeof job->train_data, err);
        case O_TEST_DATA:
            return s_copy (flag, value, job->test_data, sizeof job->test_data, err);
        case O_TRAIN_IMAGES:
            return s_copy (flag, value, job->train_images, sizeof job->train_images, err);
        case O_TRAIN_LABELS:
            return s_copy (flag, value, job->train_labels, sizeof job->train_labels, err);
        case O_TEST_IMAGES:
            return s_copy (flag, value, job->test_images, sizeof job->test_images, err);
        case O_TEST_LABELS:
            return s_copy (flag, value, job->test_labels, sizeof job->test_labels, err);
        case O_LABEL_COLUMN:
            return s_copy (flag, value, job->label_column, sizeof job->label_column, err);
        case O_CLASSES:
            if ((rc = ps_parse_uint (flag, value, 2, 256, &u, err)))
                return rc;
            job->classes = (int) u;
            return 0;
        case O_DATA_FORMAT:
            if (strcmp (value, "idx") && strcmp (value, "criteo") && strcmp (value, "libsvm")
            &&  strcmp (value, "csv"))
                return ps_error_set (err, PS_EINVAL,
                                     "%s \"%s\": expected idx, criteo, libsvm or csv", flag,
                                     value);
            return s_copy (flag, value, job->data_format, sizeof job->data_format, err);
        case O_OVERLAP:
        case O_NO_OVERLAP:
            job->overlap = key == O_OVERLAP;
            return 0;
        case O_STOP_ON_DIVERGENCE:
            job->stop_on_divergence = true;
            return 0;
        case O_DEVICE:
            if (strcmp (value, "cpu") && strcmp (value, "gpu") && strcmp (value, "auto"))
                return ps_error_set (err, PS_EINVAL, "%s \"%s\": expected cpu, gpu or auto",
                                     flag, value);
            return s_copy (flag, value, job->device, sizeof job->device, err);
        case O_OPTIMIZER: {
            ps_opt_kind_t kind;
            if ((rc = ps_opt_kind_parse (value, &kind, err)))
                return s_prefix (err, rc, flag);
            //  Another kind starts from its own defaults, as in a job file.
            if (kind != job->optimizer.kind)
                ps_opt_config_default (&job->optimizer, kind);
            job->optimizer_given = true;
            return 0;
        }
        case O_MODE:
            if ((rc = ps_mode_parse (value, &job->mode, err)))
                return s_prefix (err, rc, flag);
            return 0;
        case O_STALENESS:
            if (strcmp (value, "unbounded") == 0) {
                job->staleness = PS_JOB_STALENESS_UNBOUNDED;
                return 0;
            }
            if ((rc = ps_parse_uint (flag, value, 0, INT_MAX, &u, err))) {
                size_t len = strlen (err->msg);
                snprintf (err->msg + len, sizeof err->msg - len, ", or unbounded");
                return rc;
            }
            job->staleness = (int) u;
            return 0;
        //  Ranges are checked by ps_job_validate, which names the key;
        //  here only the form of the number.
        case O_LR:
        case O_CKPT_SECONDS:
            if ((rc = ps_parse_double (flag, value, 0, false, DBL_MAX, &d, err)))
                return rc;
            *(key == O_LR ? &job->optimizer.lr : &job->checkpoint_seconds) = d;
            //  A rate alone sets the optimizer too, of the kind in force
            //  (the job's default unless the file named one), as
            //  ps-worker --standalone takes it.
            if (key == O_LR)
                job->optimizer_given = true;
            return 0;
        default:
            break;
    }
    //  Whole numbers: their ranges are checked by ps_job_validate, which
    //  names the key; here their form, and that they fit their field.
    int *int_field = NULL;
    uint64_t *u64_field = NULL;
    switch (key) {
        case O_EPOCHS: int_field = &job->epochs; break;
        case O_BATCH: int_field = &job->batch_size; break;
        case O_KEEP: int_field = &job->checkpoint_keep; break;
        case O_EVAL_EPOCHS: int_field = &job->eval_epochs; break;
        case O_HEARTBEAT: int_field = &job->heartbeat_ms; break;
        case O_HEARTBEAT_TIMEOUT: int_field = &job->heartbeat_timeout_ms; break;
        case O_REGISTER_TIMEOUT: int_field = &job->register_timeout_ms; break;
        case O_THREADS:
            int_field = &job->worker_threads;
            job->worker_threads_given = true;
            break;
        case O_STEPS: u64_field = &job->steps; break;
        case O_SEED: u64_field = &job->seed; break;
        case O_LIMIT: u64_field = &job->train_limit; break;
        case O_TEST_LIMIT: u64_field = &job->test_limit; break;
        case O_CKPT_STEPS: u64_field = &job->checkpoint_steps; break;
        case O_EVAL_STEPS: u64_field = &job->eval_steps; break;
        case O_NONFINITE_RETRIES: int_field = &job->nonfinite_retries; break;
        case O_FULL_EVERY: int_field = &job->checkpoint_full_every; break;
        case O_STEP_RETRIES: int_field = &job->step_retries; break;
        default: return ps_error_set (err, PS_ENOTFOUND, "no job flag keyed %d", key);
    }
    if ((rc = ps_parse_uint (flag, value, 0, int_field ? INT_MAX : UINT64_MAX, &u, err)))
        return rc;
    if (int_field)
        *int_field = (int) u;
    else
        *u64_field = u;
    return 0;
}

//  Check the flag keyed key and record it. The check applies it to a job
//  of no consequence: the same code then applies it to the real one.
static int
s_add (ps_jobflags_t *self, int key, const char *value, ps_error_t *err)
{
    static ps_job_t scratch;
    ps_job_default (&scratch, 1);
    int rc = s_apply (&scratch, key, value, err);
    if (rc)
        return rc;
    if (self->count == self->size) {
        self->size = self->size ? 2 * self->size : 16;
        self->flags = realloc (self->flags, (size_t) self->size * sizeof self->flags [0]);
        if (!self->flags)
            abort ();
    }
    self->flags [self->count].key = key;
    self->flags [self->count++].value = value;
    return 0;
}

int
ps_jobflags_add (ps_jobflags_t *self, const char *name, const char *value, ps_error_t *err)
{
    assert (self);
    for (int i = 0; s_options [i].name || s_options [i].doc; i++)
        if (s_options [i].name && strcmp (s_options [i].name, name) == 0)
            return s_add (self, s_options [i].key, value, err);
    return ps_error_set (err, PS_ENOTFOUND, "--%s: no such job flag", name);
}

int
ps_jobflags_apply (const ps_jobflags_t *self, ps_job_t *job, ps_error_t *err)
{
    assert (self);
    const char *lr = NULL;
    for (int f = 0; f < self->count; f++) {
        int rc = s_apply (job, self->flags [f].key, self->flags [f].value, err);
        if (rc)
            return rc;
        if (self->flags [f].key == O_LR)
            lr = self->flags [f].value;
    }
    //  An --optimizer after --lr reset the rate to its kind's default: the
    //  rate given wins, as it does when it comes after.
    return lr ? s_apply (job, O_LR, lr, err) : 0;
}

static error_t
s_parse (int key, char *arg, struct argp_state *state)
{
    ps_jobflags_t *self = state->input;
    if (!s_name (key))
        return ARGP_ERR_UNKNOWN;
    ps_error_t err;
    if (s_add (self, key, arg, &err))
        argp_error (state, "%s", err.msg);
    return 0;
}

const struct argp ps_jobflags_argp = { s_options, s_parse, NULL, NULL, NULL, NULL, NULL };
