//  The coordinator's job flags; see ps_jobflags.h.

#include "ps_jobflags.h"

#include <float.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ps_mode.h"
#include "ps_optimizer.h"
#include "ps_parse.h"

enum {
    O_MODEL = PS_JOBFLAGS_FIRST,
    O_EPOCHS, O_STEPS, O_BATCH, O_OPTIMIZER, O_LR, O_MODE, O_STALENESS, O_SEED, O_DATA, O_LIMIT,
    O_TEST_LIMIT, O_CKPT_DIR, O_CKPT_STEPS, O_CKPT_SECONDS, O_KEEP, O_EVAL_EPOCHS, O_EVAL_STEPS,
    O_HEARTBEAT, O_HEARTBEAT_TIMEOUT, O_REGISTER_TIMEOUT, O_THREADS, O_DEVICE, O_OVERLAP,
    O_NONFINITE_RETRIES, O_STOP_ON_DIVERGENCE, O_DATA_FORMAT, O_TRAIN_DATA, O_TEST_DATA,
    O_FULL_EVERY, O_STEP_RETRIES, O_TRAIN_IMAGES, O_TRAIN_LABELS, O_TEST_IMAGES, O_TEST_LABELS,
    O_LABEL_COLUMN, O_CLASSES,
};

const struct option ps_jobflags_options [] = {
    { "model", required_argument, NULL, O_MODEL },
    { "epochs", required_argument, NULL, O_EPOCHS },
    { "steps", required_argument, NULL, O_STEPS },
    { "batch", required_argument, NULL, O_BATCH },
    { "optimizer", required_argument, NULL, O_OPTIMIZER },
    { "lr", required_argument, NULL, O_LR },
    { "mode", required_argument, NULL, O_MODE },
    { "staleness", required_argument, NULL, O_STALENESS },
    { "seed", required_argument, NULL, O_SEED },
    { "data", required_argument, NULL, O_DATA },
    { "limit", required_argument, NULL, O_LIMIT },
    { "test-limit", required_argument, NULL, O_TEST_LIMIT },
    { "checkpoint-dir", required_argument, NULL, O_CKPT_DIR },
    { "checkpoint-steps", required_argument, NULL, O_CKPT_STEPS },
    { "checkpoint-seconds", required_argument, NULL, O_CKPT_SECONDS },
    { "keep", required_argument, NULL, O_KEEP },
    { "eval-epochs", required_argument, NULL, O_EVAL_EPOCHS },
    { "eval-steps", required_argument, NULL, O_EVAL_STEPS },
    { "heartbeat-ms", required_argument, NULL, O_HEARTBEAT },
    { "heartbeat-timeout-ms", required_argument, NULL, O_HEARTBEAT_TIMEOUT },
    { "register-timeout-ms", required_argument, NULL, O_REGISTER_TIMEOUT },
    { "threads", required_argument, NULL, O_THREADS },
    { "device", required_argument, NULL, O_DEVICE },
    { "overlap", no_argument, NULL, O_OVERLAP },
    { "nonfinite-retries", required_argument, NULL, O_NONFINITE_RETRIES },
    { "stop-on-divergence", no_argument, NULL, O_STOP_ON_DIVERGENCE },
    { "data-format", required_argument, NULL, O_DATA_FORMAT },
    { "train-data", required_argument, NULL, O_TRAIN_DATA },
    { "test-data", required_argument, NULL, O_TEST_DATA },
    { "full-every", required_argument, NULL, O_FULL_EVERY },
    { "step-retries", required_argument, NULL, O_STEP_RETRIES },
    { "train-images", required_argument, NULL, O_TRAIN_IMAGES },
    { "train-labels", required_argument, NULL, O_TRAIN_LABELS },
    { "test-images", required_argument, NULL, O_TEST_IMAGES },
    { "test-labels", required_argument, NULL, O_TEST_LABELS },
    { "label-column", required_argument, NULL, O_LABEL_COLUMN },
    { "classes", required_argument, NULL, O_CLASSES },
    { NULL, 0, NULL, 0 },
};

bool
ps_jobflags_is (int option)
{
    for (int i = 0; ps_jobflags_options [i].name; i++)
        if (ps_jobflags_options [i].val == option)
            return true;
    return false;
}

static const char *
s_name (int option)
{
    for (int i = 0; ps_jobflags_options [i].name; i++)
        if (ps_jobflags_options [i].val == option)
            return ps_jobflags_options [i].name;
    return "?";
}

//  Copy a string flag into its field of len bytes.
static int
s_copy (const char *flag, const char *text, char *buf, size_t len)
{
    if (strlen (text) >= len) {
        fprintf (stderr, "coordinator: %s: longer than %zu bytes\n", flag, len - 1);
        return -1;
    }
    strcpy (buf, text);
    return 0;
}

int
ps_jobflags_apply (ps_job_t *job, int option, const char *value)
{
    char flag [64];
    snprintf (flag, sizeof flag, "--%s", s_name (option));
    uint64_t u;
    double d;
    ps_error_t err;
    switch (option) {
        case O_MODEL:
            return s_copy (flag, value, job->model, sizeof job->model);
        case O_DATA:
            return s_copy (flag, value, job->data_dir, sizeof job->data_dir);
        case O_CKPT_DIR:
            return s_copy (flag, value, job->checkpoint_dir, sizeof job->checkpoint_dir);
        case O_TRAIN_DATA:
            return s_copy (flag, value, job->train_data, sizeof job->train_data);
        case O_TEST_DATA:
            return s_copy (flag, value, job->test_data, sizeof job->test_data);
        case O_TRAIN_IMAGES:
            return s_copy (flag, value, job->train_images, sizeof job->train_images);
        case O_TRAIN_LABELS:
            return s_copy (flag, value, job->train_labels, sizeof job->train_labels);
        case O_TEST_IMAGES:
            return s_copy (flag, value, job->test_images, sizeof job->test_images);
        case O_TEST_LABELS:
            return s_copy (flag, value, job->test_labels, sizeof job->test_labels);
        case O_LABEL_COLUMN:
            return s_copy (flag, value, job->label_column, sizeof job->label_column);
        case O_CLASSES:
            if (ps_parse_uint (flag, value, 2, 256, &u, &err)) {
                fprintf (stderr, "coordinator: %s\n", err.msg);
                return -1;
            }
            job->classes = (int) u;
            return 0;
        case O_DATA_FORMAT:
            if (strcmp (value, "idx") && strcmp (value, "criteo") && strcmp (value, "libsvm")
            &&  strcmp (value, "csv")) {
                fprintf (stderr, "coordinator: %s \"%s\": expected idx, criteo, libsvm or csv\n",
                         flag, value);
                return -1;
            }
            return s_copy (flag, value, job->data_format, sizeof job->data_format);
        case O_OVERLAP:
            job->overlap = true;
            return 0;
        case O_STOP_ON_DIVERGENCE:
            job->stop_on_divergence = true;
            return 0;
        case O_DEVICE:
            if (strcmp (value, "cpu") && strcmp (value, "gpu") && strcmp (value, "auto")) {
                fprintf (stderr, "coordinator: %s \"%s\": expected cpu, gpu or auto\n", flag, value);
                return -1;
            }
            return s_copy (flag, value, job->device, sizeof job->device);
        case O_OPTIMIZER: {
            ps_opt_kind_t kind;
            if (ps_opt_kind_parse (value, &kind, &err)) {
                fprintf (stderr, "coordinator: %s: %s\n", flag, err.msg);
                return -1;
            }
            //  Another kind starts from its own defaults, as in a job file.
            if (kind != job->optimizer.kind)
                ps_opt_config_default (&job->optimizer, kind);
            job->optimizer_given = true;
            return 0;
        }
        case O_MODE:
            if (ps_mode_parse (value, &job->mode, &err)) {
                fprintf (stderr, "coordinator: %s: %s\n", flag, err.msg);
                return -1;
            }
            return 0;
        case O_STALENESS:
            if (strcmp (value, "unbounded") == 0) {
                job->staleness = PS_JOB_STALENESS_UNBOUNDED;
                return 0;
            }
            if (ps_parse_uint (flag, value, 0, INT_MAX, &u, &err)) {
                fprintf (stderr, "coordinator: %s, or unbounded\n", err.msg);
                return -1;
            }
            job->staleness = (int) u;
            return 0;
        //  Ranges are checked by ps_job_validate, which names the key;
        //  here only the form of the number.
        case O_LR:
        case O_CKPT_SECONDS:
            if (ps_parse_double (flag, value, 0, false, DBL_MAX, &d, &err)) {
                fprintf (stderr, "coordinator: %s\n", err.msg);
                return -1;
            }
            *(option == O_LR ? &job->optimizer.lr : &job->checkpoint_seconds) = d;
            //  A rate alone sets the optimizer too, of the kind in force
            //  (the job's default unless the file named one), as
            //  ps-worker --standalone takes it.
            if (option == O_LR)
                job->optimizer_given = true;
            return 0;
        default:
            break;
    }
    //  Whole numbers: their ranges are checked by ps_job_validate, which
    //  names the key; here their form, and that they fit their field.
    int *int_field = NULL;
    uint64_t *u64_field = NULL;
    switch (option) {
        case O_EPOCHS: int_field = &job->epochs; break;
        case O_BATCH: int_field = &job->batch_size; break;
        case O_KEEP: int_field = &job->checkpoint_keep; break;
        case O_EVAL_EPOCHS: int_field = &job->eval_epochs; break;
        case O_HEARTBEAT: int_field = &job->heartbeat_ms; break;
        case O_HEARTBEAT_TIMEOUT: int_field = &job->heartbeat_timeout_ms; break;
        case O_REGISTER_TIMEOUT: int_field = &job->register_timeout_ms; break;
        case O_THREADS: int_field = &job->worker_threads; break;
        case O_STEPS: u64_field = &job->steps; break;
        case O_SEED: u64_field = &job->seed; break;
        case O_LIMIT: u64_field = &job->train_limit; break;
        case O_TEST_LIMIT: u64_field = &job->test_limit; break;
        case O_CKPT_STEPS: u64_field = &job->checkpoint_steps; break;
        case O_EVAL_STEPS: u64_field = &job->eval_steps; break;
        case O_NONFINITE_RETRIES: int_field = &job->nonfinite_retries; break;
        case O_FULL_EVERY: int_field = &job->checkpoint_full_every; break;
        case O_STEP_RETRIES: int_field = &job->step_retries; break;
        default: return -1;
    }
    if (ps_parse_uint (flag, value, 0, int_field ? INT_MAX : UINT64_MAX, &u, &err)) {
        fprintf (stderr, "coordinator: %s\n", err.msg);
        return -1;
    }
    if (int_field)
        *int_field = (int) u;
    else
        *u64_field = u;
    return 0;
}
