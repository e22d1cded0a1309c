//  The CTR cluster tests' library: harness_ctr.h.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "harness_ctr.h"

static char s_root [64];        //  where the data sets live

const char *
harness_ctr_root (void)
{
    if (!s_root [0])
        harness_tmpdir (s_root, sizeof s_root);
    return s_root;
}

void
harness_ctr_cleanup (void)
{
    if (s_root [0])
        harness_rmtree (s_root);
}

//  Generate (once) a data set of train_rows and test_rows lines in the
//  data sets' directory under name, gzip-compressed or not, and read the
//  planted model's test AUC.
static const harness_ctr_data_t *
s_data (harness_ctr_data_t *data, const char *name, int train_rows, int test_rows, int seed,
        bool gzip)
{
    if (data->rows)
        return data;
    const char *gen = getenv ("PS_GEN_CTR");
    if (!gen)
        fail_msg ("PS_GEN_CTR is not set");
    char dir [PATH_MAX / 2], log [PATH_MAX], rows [32], test [32], seeds [32];
    snprintf (dir, sizeof dir, "%s/%s", harness_ctr_root (), name);
    snprintf (log, sizeof log, "%s.log", dir);
    snprintf (rows, sizeof rows, "%d", train_rows);
    snprintf (test, sizeof test, "%d", test_rows);
    snprintf (seeds, sizeof seeds, "%d", seed);
    const char *argv [] = { gen, "--out", dir, "--train-rows", rows, "--test-rows", test,
                            "--seed", seeds, "--cardinalities", "small",
                            gzip ? "--gzip" : NULL, NULL };
    pid_t pid = harness_spawn (argv, NULL, log);
    assert_true (pid > 0);
    if (harness_wait_or_kill (pid, CLUSTER_RUN_MS) != 0) {
        harness_print_log (log);
        fail_msg ("gen_ctr failed for %s", dir);
    }
    char planted [PATH_MAX];
    snprintf (planted, sizeof planted, "%s/planted.json", dir);
    json_error_t error;
    json_t *root = json_load_file (planted, 0, &error);
    if (!root)
        fail_msg ("%s: %s", planted, error.text);
    json_t *split = json_object_get (json_object_get (root, "splits"), "test");
    data->planted_auc = cluster_real (split, "auc");
    json_decref (root);
    const char *suffix = gzip ? ".gz" : "";
    snprintf (data->train, sizeof data->train, "%s/train.txt%s", dir, suffix);
    snprintf (data->test, sizeof data->test, "%s/test.txt%s", dir, suffix);
    data->rows = train_rows;
    return data;
}

//  The data sets (harness_ctr.h says what each is for).
static harness_ctr_data_t s_large_data, s_small_data, s_small_gz_data;

const harness_ctr_data_t *
harness_ctr_large (void)
{
    return s_data (&s_large_data, "large", 100000, 20000, 1, false);
}

static int
s_small_rows (void)
{
    int rows = (int) (128 * HARNESS_CTR_BATCH * cluster_scale ());
    return rows < 32 * HARNESS_CTR_BATCH ? 32 * HARNESS_CTR_BATCH : rows;
}

const harness_ctr_data_t *
harness_ctr_small (void)
{
    return s_data (&s_small_data, "small", s_small_rows (), 4000, 2, false);
}

const harness_ctr_data_t *
harness_ctr_small_gz (void)
{
    return s_data (&s_small_gz_data, "small-gz", s_small_rows (), 4000, 2, true);
}

uint64_t
harness_ctr_steps_per_epoch (const harness_ctr_data_t *data)
{
    return ((uint64_t) data->rows + HARNESS_CTR_BATCH - 1) / HARNESS_CTR_BATCH;
}

static const char *const s_lr_vars [] = { "dense/kernel", "dense/bias" };
const harness_ctr_model_t harness_ctr_lr = { "lr", s_lr_vars, 2, 1 };
static const char *const s_dlrm_vars [] = {
    "dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias", "dense_2/kernel",
    "dense_2/bias",
};
const harness_ctr_model_t harness_ctr_dlrm = { "dlrm", s_dlrm_vars, 6, 26 };

//  The job file of a run: progress events every 50 ms (a run here takes
//  a second or two, and the failure cases act on what the events say),
//  and with full_every (0: no checkpoints) checkpoints, every full_every-th
//  one full and the others incremental.
static void
s_job_file (cluster_run_t *run, int full_every)
{
    char text [128];
    if (full_every)
        snprintf (text, sizeof text, "{\"log_seconds\": 0.05, \"checkpoint\": {\"full_every\": "
                  "%d}}\n", full_every);
    else
        snprintf (text, sizeof text, "{\"log_seconds\": 0.05}\n");
    assert_int_equal (harness_write_file (run->job, text), 0);
}

//  A run of model on data for epochs epochs, evaluated once, at the end.
cluster_run_t *
harness_ctr_run_new (const char *name, const harness_ctr_model_t *model,
                     const harness_ctr_data_t *data, int epochs)
{
    cluster_run_t *run = cluster_run_new (name);
    s_job_file (run, 0);
    cluster_args (run, (const char *[]) { "--local", "--log-dir", run->log_dir, "--job", run->job,
                                          "--model", model->name, "--seed", "1",
                                          "--metrics", run->metrics, "--data-format", "criteo",
                                          "--train-data", data->train, "--test-data", data->test,
                                          NULL });
    cluster_arg (run, "--batch");
    cluster_arg (run, "%d", HARNESS_CTR_BATCH);
    cluster_arg (run, "--epochs");
    cluster_arg (run, "%d", epochs);
    cluster_arg (run, "--eval-epochs");
    cluster_arg (run, "%d", epochs);
    return run;
}

//  Checkpoints into run's directory every `every` steps, every third one
//  full and the others incremental, the newest keep kept.
void
harness_ctr_checkpoint_args (cluster_run_t *run, char *root, size_t len, uint64_t every, int keep)
{
    snprintf (root, len, "%s/checkpoints", run->dir);
    s_job_file (run, 3);
    cluster_args (run, (const char *[]) { "--checkpoint-dir", root, "--keep", NULL });
    cluster_arg (run, "%d", keep);
    cluster_arg (run, "--checkpoint-steps");
    cluster_arg (run, "%" PRIu64, every);
}

//  The run completed, every step applied exactly once by every dense
//  partition (cluster_check_done_vars) and by every shard of every table
//  (the done record's per-shard steps), with the binary metrics in the
//  done record and in its last eval record. Returns the done record.
json_t *
harness_ctr_check_done (cluster_run_t *run, uint64_t total, const harness_ctr_model_t *model)
{
    cluster_check_done_vars (run, total, HARNESS_CTR_SERVERS, model->vars, model->nvars);
    json_t *done = cluster_find (run->rows, "done", -1);
    json_t *tables = json_object_get (done, "tables");
    if (json_array_size (tables) != model->ntables)
        fail_msg ("%s: the done record has %zu tables, expected %zu: %s", run->name,
                  json_array_size (tables), model->ntables,
                  json_dumps (tables, JSON_COMPACT));
    //  A table's counters since it was created or restored: every push
    //  applied when nothing was restored.
    bool restored = cluster_count (run->rows, "recovered") > 0;
    size_t t;
    json_t *table;
    json_array_foreach (tables, t, table) {
        const char *name = cluster_str (table, "table");
        json_t *steps = json_object_get (table, "shard_steps");
        json_t *pushes = json_object_get (table, "shard_pushes");
        if (json_array_size (steps) != HARNESS_CTR_SERVERS
            ||  json_array_size (pushes) != HARNESS_CTR_SERVERS)
            fail_msg ("%s: table %s: %s, expected the steps and pushes of each of %d shards",
                      run->name, name, json_dumps (table, JSON_COMPACT), HARNESS_CTR_SERVERS);
        for (size_t k = 0; k < HARNESS_CTR_SERVERS; k++) {
            json_int_t applied = json_integer_value (json_array_get (steps, k));
            json_int_t pushed = json_integer_value (json_array_get (pushes, k));
            if (applied != (json_int_t) total || (!restored && pushed != (json_int_t) total))
                fail_msg ("%s: table %s on ps:%zu: %lld steps in its ledger, %lld pushes "
                          "applied; expected %" PRIu64 " (every step exactly once)", run->name,
                          name, k, (long long) applied, (long long) pushed, total);
        }
        //  No admission filter and no eviction: every id pushed has a row
        //  (created since the start, or since the restore).
        if (cluster_int (table, "rows") < 1 || cluster_int (table, "evicted") != 0
            ||  cluster_int (table, "dropped") != 0
            ||  (!restored && cluster_int (table, "created") != cluster_int (table, "rows")))
            fail_msg ("%s: table %s: %s, expected rows, none evicted or dropped", run->name,
                      name, json_dumps (table, JSON_COMPACT));
    }
    double auc = cluster_real (done, "test_auc");
    double logloss = cluster_real (done, "test_logloss");
    if (!(auc > 0 && auc <= 1 && logloss > 0))
        fail_msg ("%s: test AUC %g, log loss %g", run->name, auc, logloss);
    json_t *eval = cluster_find (run->rows, "eval", -1);
    assert_non_null (eval);
    assert_true (cluster_real (eval, "test_auc") == auc);
    assert_true (cluster_real (eval, "test_logloss") == logloss);
    cluster_check_eval_step (eval, 0, total, total);
    return done;
}
