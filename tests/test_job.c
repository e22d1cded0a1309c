//  Unit tests for jobs (coordinator/ps_job.c): the defaults, and the
//  defaults and keys of schemas/job.schema.json against them; a job file naming
//  every key; a second file changing only what it names, an optimizer kind
//  that resets the other optimizer keys; the rules between keys that flags
//  may settle (a checkpoint interval without a directory, the heartbeat
//  timeout), which reading a file leaves to ps_job_validate; a missing job
//  file and one that is not a regular file; the source named for a JSON
//  object; ps_job_validate on jobs set in code; ps_job_to_json read back to
//  an identical job, directly and through text; and the example job file.
//  The refusals of bad job files, each naming the file and the key, are
//  test_job_errors; the learning-rate schedules are test_lr_schedule.
//  Job files are written into a mkdtemp directory under /tmp, removed
//  afterwards (harness_job.h). The schema and the example come from
//  $PS_SOURCE_ROOT, which meson sets; without it the tests that need them
//  fail, saying so.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness_job.h"
#include "ps_job.h"

//  Every field of two jobs is the same (the values past the piecewise
//  schedule's count excepted: they mean nothing).
static void
s_assert_jobs_equal (const ps_job_t *a, const ps_job_t *b)
{
    assert_string_equal (a->model, b->model);
    assert_int_equal (a->optimizer.kind, b->optimizer.kind);
    assert_true (a->optimizer.lr == b->optimizer.lr);
    assert_true (a->optimizer.momentum == b->optimizer.momentum);
    assert_int_equal (a->optimizer.nesterov, b->optimizer.nesterov);
    assert_true (a->optimizer.beta1 == b->optimizer.beta1);
    assert_true (a->optimizer.beta2 == b->optimizer.beta2);
    assert_true (a->optimizer.epsilon == b->optimizer.epsilon);
    assert_true (a->optimizer.initial_accumulator == b->optimizer.initial_accumulator);
    assert_true (a->optimizer.weight_decay == b->optimizer.weight_decay);
    assert_true (a->optimizer.clip_value == b->optimizer.clip_value);
    assert_true (a->optimizer.clip_norm == b->optimizer.clip_norm);
    assert_int_equal (a->lr_schedule.kind, b->lr_schedule.kind);
    assert_int_equal (a->lr_schedule.nboundaries, b->lr_schedule.nboundaries);
    int n = a->lr_schedule.nboundaries;
    for (int i = 0; i < n; i++)
        assert_true (a->lr_schedule.boundaries [i] == b->lr_schedule.boundaries [i]);
    for (int i = 0; n > 0 && i <= n; i++)
        assert_true (a->lr_schedule.values [i] == b->lr_schedule.values [i]);
    assert_true (a->lr_schedule.alpha == b->lr_schedule.alpha);
    assert_int_equal (a->lr_schedule.decay_steps, b->lr_schedule.decay_steps);
    assert_int_equal (a->lr_schedule.warmup_steps, b->lr_schedule.warmup_steps);
    assert_int_equal (a->batch_size, b->batch_size);
    assert_int_equal (a->epochs, b->epochs);
    assert_int_equal (a->steps, b->steps);
    assert_int_equal (a->mode, b->mode);
    assert_string_equal (a->checkpoint_dir, b->checkpoint_dir);
    assert_int_equal (a->checkpoint_steps, b->checkpoint_steps);
    assert_true (a->checkpoint_seconds == b->checkpoint_seconds);
    assert_int_equal (a->checkpoint_keep, b->checkpoint_keep);
    assert_true (a->seed == b->seed);
    assert_string_equal (a->data_dir, b->data_dir);
    assert_int_equal (a->train_limit, b->train_limit);
    assert_int_equal (a->test_limit, b->test_limit);
    assert_int_equal (a->partitioner.kind, b->partitioner.kind);
    assert_int_equal (a->partitioner.num_shards, b->partitioner.num_shards);
    assert_int_equal (a->partitioner.min_shard_bytes, b->partitioner.min_shard_bytes);
    assert_int_equal (a->partitioner.max_shard_bytes, b->partitioner.max_shard_bytes);
    assert_int_equal (a->partitioner.max_shards, b->partitioner.max_shards);
    assert_int_equal (a->eval_epochs, b->eval_epochs);
    assert_int_equal (a->eval_steps, b->eval_steps);
    assert_int_equal (a->heartbeat_ms, b->heartbeat_ms);
    assert_int_equal (a->heartbeat_timeout_ms, b->heartbeat_timeout_ms);
    assert_int_equal (a->register_timeout_ms, b->register_timeout_ms);
    assert_int_equal (a->worker_threads, b->worker_threads);
    assert_string_equal (a->device, b->device);
    assert_true (a->log_seconds == b->log_seconds);
}

//  A job file naming every key, each with a value other than its default.
//  The seed is past 2^53 and odd, which a double would round.
static const char *s_full_file =
    "{\n"
    "  \"model\": \"mlp\",\n"
    "  \"optimizer\": {\"kind\": \"momentum\", \"lr\": 0.05, \"momentum\": 0.8,\n"
    "                \"nesterov\": true, \"beta1\": 0.85, \"beta2\": 0.99, \"epsilon\": 1e-6,\n"
    "                \"initial_accumulator\": 0.2, \"weight_decay\": 0.0001,\n"
    "                \"clip_value\": 5, \"clip_norm\": 1.5},\n"
    "  \"lr_schedule\": {\"kind\": \"piecewise\", \"boundaries\": [2, 4.5],\n"
    "                  \"values\": [0.1, 0.01, 0.001], \"alpha\": 0.25,\n"
    "                  \"decay_steps\": 1000, \"warmup_steps\": 50},\n"
    "  \"batch_size\": 128,\n"
    "  \"epochs\": 7,\n"
    "  \"steps\": 5000,\n"
    "  \"mode\": \"mirrored\",\n"
    "  \"seed\": 12345678901234567,\n"
    "  \"data_dir\": \"/data/fashion\",\n"
    "  \"train_limit\": 1000,\n"
    "  \"test_limit\": 500,\n"
    "  \"partitioner\": {\"kind\": \"fixed\", \"num_shards\": 4, \"min_shard_bytes\": 1024,\n"
    "                  \"max_shard_bytes\": 65536, \"max_shards\": 8},\n"
    "  \"checkpoint\": {\"dir\": \"/tmp/ckpt\", \"every_steps\": 100, \"every_seconds\": 30.5,\n"
    "                 \"keep\": 5},\n"
    "  \"eval\": {\"every_epochs\": 2, \"every_steps\": 250},\n"
    "  \"heartbeat\": {\"interval_ms\": 250, \"timeout_ms\": 2000},\n"
    "  \"register_timeout_ms\": 30000,\n"
    "  \"worker_threads\": 4,\n"
    "  \"device\": \"auto\",\n"
    "  \"log_seconds\": 2.5\n"
    "}\n";

static void
s_assert_full (const ps_job_t *job)
{
    assert_string_equal (job->model, "mlp");
    assert_int_equal (job->optimizer.kind, PS_OPT_MOMENTUM);
    assert_true (job->optimizer.lr == 0.05);
    assert_true (job->optimizer.momentum == 0.8);
    assert_true (job->optimizer.nesterov);
    assert_true (job->optimizer.beta1 == 0.85);
    assert_true (job->optimizer.beta2 == 0.99);
    assert_true (job->optimizer.epsilon == 1e-6);
    assert_true (job->optimizer.initial_accumulator == 0.2);
    assert_true (job->optimizer.weight_decay == 0.0001);
    assert_true (job->optimizer.clip_value == 5.0);
    assert_true (job->optimizer.clip_norm == 1.5);
    assert_int_equal (job->lr_schedule.kind, PS_LR_PIECEWISE);
    assert_int_equal (job->lr_schedule.nboundaries, 2);
    assert_true (job->lr_schedule.boundaries [0] == 2.0);
    assert_true (job->lr_schedule.boundaries [1] == 4.5);
    assert_true (job->lr_schedule.values [0] == 0.1);
    assert_true (job->lr_schedule.values [1] == 0.01);
    assert_true (job->lr_schedule.values [2] == 0.001);
    assert_true (job->lr_schedule.alpha == 0.25);
    assert_int_equal (job->lr_schedule.decay_steps, 1000);
    assert_int_equal (job->lr_schedule.warmup_steps, 50);
    assert_int_equal (job->batch_size, 128);
    assert_int_equal (job->epochs, 7);
    assert_int_equal (job->steps, 5000);
    assert_int_equal (job->mode, PS_MODE_MIRRORED);
    assert_true (job->seed == 12345678901234567ULL);
    assert_string_equal (job->data_dir, "/data/fashion");
    assert_int_equal (job->train_limit, 1000);
    assert_int_equal (job->test_limit, 500);
    assert_int_equal (job->partitioner.kind, PS_PARTITIONER_FIXED);
    assert_int_equal (job->partitioner.num_shards, 4);
    assert_int_equal (job->partitioner.min_shard_bytes, 1024);
    assert_int_equal (job->partitioner.max_shard_bytes, 65536);
    assert_int_equal (job->partitioner.max_shards, 8);
    assert_string_equal (job->checkpoint_dir, "/tmp/ckpt");
    assert_int_equal (job->checkpoint_steps, 100);
    assert_true (job->checkpoint_seconds == 30.5);
    assert_int_equal (job->checkpoint_keep, 5);
    assert_int_equal (job->eval_epochs, 2);
    assert_int_equal (job->eval_steps, 250);
    assert_int_equal (job->heartbeat_ms, 250);
    assert_int_equal (job->heartbeat_timeout_ms, 2000);
    assert_int_equal (job->register_timeout_ms, 30000);
    assert_int_equal (job->worker_threads, 4);
    assert_string_equal (job->device, "auto");
    assert_true (job->log_seconds == 2.5);
}

//  $PS_SOURCE_ROOT/rel parsed. Without the variable the test was not

//  ---------------------------------------------------------------------
//  Defaults and the schema

static void
test_defaults (void **state)
{
    (void) state;
    ps_job_t job;
    ps_job_default (&job, 3);
    assert_string_equal (job.model, "cnn");
    ps_opt_config_t adam;
    ps_opt_config_default (&adam, PS_OPT_ADAM);
    assert_int_equal (job.optimizer.kind, PS_OPT_ADAM);
    assert_true (job.optimizer.lr == 1e-3);
    assert_memory_equal (&job.optimizer, &adam, sizeof adam);
    assert_int_equal (job.lr_schedule.kind, PS_LR_CONSTANT);
    assert_int_equal (job.lr_schedule.nboundaries, 0);
    assert_int_equal (job.lr_schedule.warmup_steps, 0);
    assert_int_equal (job.batch_size, 64);
    assert_int_equal (job.epochs, 3);
    assert_int_equal (job.steps, 0);
    assert_int_equal (job.mode, PS_MODE_ASYNC);
    assert_int_equal (job.staleness, 3);
    assert_string_equal (job.checkpoint_dir, "");
    assert_int_equal (job.checkpoint_steps, 0);
    assert_true (job.checkpoint_seconds == 0);
    assert_int_equal (job.checkpoint_keep, 3);
    assert_int_equal (job.seed, 1);
    assert_string_equal (job.data_dir, "/usr/share/datasets/fashion-mnist");
    assert_int_equal (job.train_limit, 0);
    assert_int_equal (job.test_limit, 0);
    ps_partitioner_t partitioner;
    ps_partitioner_default (&partitioner, 3);
    assert_int_equal (job.partitioner.kind, PS_PARTITIONER_MIN_SIZE);
    assert_int_equal (job.partitioner.min_shard_bytes, 256 * 1024);
    assert_int_equal (job.partitioner.max_shards, 3);
    assert_memory_equal (&job.partitioner, &partitioner, sizeof partitioner);
    assert_int_equal (job.eval_epochs, 1);
    assert_int_equal (job.eval_steps, 0);
    assert_int_equal (job.heartbeat_ms, 500);
    assert_int_equal (job.heartbeat_timeout_ms, 3000);
    assert_int_equal (job.register_timeout_ms, 60000);
    assert_int_equal (job.worker_threads, 1);
    assert_string_equal (job.device, "cpu");
    assert_true (job.log_seconds == 5.0);
    ps_error_t err = { 0 };
    if (ps_job_validate (&job, &err))
        fail_msg ("the defaults do not validate: %s", err.msg);

    //  An empty file changes nothing.
    harness_job_fixture_t *fx = *state;
    ps_job_t loaded = job;
    harness_job_load (&loaded, harness_job_write (fx, "empty.json", "{}"));
    s_assert_jobs_equal (&loaded, &job);
}

//  Compare the schema's properties with obj (ps_job_to_json of the
//  defaults): the same keys, and each default the schema gives is the
//  default job's value. Only a computed default (the partitioner's
//  max_shards: the number of servers) is left out of the schema.
static void
s_compare_schema (const json_t *properties, const json_t *obj, const char *prefix)
{
    const char *key;
    const json_t *field;
    assert_int_equal (json_object_size (properties), json_object_size (obj));
    json_object_foreach ((json_t *) properties, key, field) {
        char path [96];
        snprintf (path, sizeof path, "%s/%s", prefix, key);
        const json_t *value = json_object_get (obj, key);
        if (!value)
            fail_msg ("schema key %s is not in ps_job_to_json's output", path);
        if (!json_object_get (field, "description"))
            fail_msg ("schema key %s has no description", path);
        const char *type = json_string_value (json_object_get (field, "type"));
        if (type && strcmp (type, "object") == 0) {
            s_compare_schema (json_object_get (field, "properties"), value, path);
            continue;
        }
        const json_t *dflt = json_object_get (field, "default");
        if (!dflt && strcmp (path, "/partitioner/max_shards") == 0)
            continue;
        if (!dflt)
            fail_msg ("schema key %s has no default", path);
        bool same = json_is_number (dflt) ? json_is_number (value)
                                            && json_number_value (dflt) == json_number_value (value)
                                          : json_equal ((json_t *) dflt, (json_t *) value);
        if (!same) {
            char *want = json_dumps (dflt, JSON_ENCODE_ANY);
            char *have = json_dumps (value, JSON_ENCODE_ANY);
            fail_msg ("schema key %s: default %s, but ps_job_default gives %s", path, want, have);
        }
    }
}

//  The default of optimizer key `key` for kind: the one under the kind's
//  condition in the optimizer's allOf, else the key's own.
static const json_t *
s_kind_default (const json_t *optimizer, const char *kind, const char *key)
{
    size_t i;
    const json_t *member;
    json_array_foreach (json_object_get (optimizer, "allOf"), i, member) {
        const json_t *condition = json_object_get (json_object_get (json_object_get (
            json_object_get (member, "if"), "properties"), "kind"), "const");
        const json_t *dflt = json_object_get (json_object_get (json_object_get (json_object_get (
            member, "then"), "properties"), key), "default");
        if (dflt && strcmp (json_string_value (condition), kind) == 0)
            return dflt;
    }
    return json_object_get (json_object_get (json_object_get (optimizer, "properties"), key),
                            "default");
}

static void
test_schema (void **state)
{
    (void) state;
    char path [512];
    json_t *schema = harness_job_source_json ("schemas/job.schema.json", path, sizeof path);
    ps_job_t job;
    ps_job_default (&job, 2);
    json_t *obj = ps_job_to_json (&job);
    assert_non_null (obj);
    const json_t *properties = json_object_get (schema, "properties");
    s_compare_schema (properties, obj, "");

    //  The optimizer's defaults, kind by kind, are ps_opt_config_default's.
    const json_t *optimizer = json_object_get (properties, "optimizer");
    for (int kind = PS_OPT_SGD; kind <= PS_OPT_ADAM; kind++) {
        ps_job_t other = job;
        ps_opt_config_default (&other.optimizer, (ps_opt_kind_t) kind);
        json_t *other_obj = ps_job_to_json (&other);
        assert_non_null (other_obj);
        const json_t *opt = json_object_get (other_obj, "optimizer");
        const char *key;
        const json_t *field;
        json_object_foreach (json_object_get (optimizer, "properties"), key, field) {
            const char *name = ps_opt_kind_name ((ps_opt_kind_t) kind);
            const json_t *dflt = s_kind_default (optimizer, name, key);
            if (strcmp (key, "kind") == 0)
                continue;
            if (!json_equal ((json_t *) dflt, json_object_get (opt, key))
            &&  !(json_is_number (dflt)
                  && json_number_value (dflt) == json_number_value (json_object_get (opt, key))))
                fail_msg ("/optimizer/%s of %s: the schema's default differs from "
                          "ps_opt_config_default", key, name);
        }
        json_decref (other_obj);
    }
    json_decref (obj);
    json_decref (schema);
}

//  ---------------------------------------------------------------------
//  Reading files

static void
test_full_file (void **state)
{
    harness_job_fixture_t *fx = *state;
    ps_job_t job;
    ps_job_default (&job, 2);
    harness_job_load (&job, harness_job_write (fx, "full.json", s_full_file));
    s_assert_full (&job);
    ps_error_t err = { 0 };
    if (ps_job_validate (&job, &err))
        fail_msg ("validate: %s", err.msg);
    //  The same keys from a parsed object, under another source name.
    json_t *obj = json_loads (s_full_file, 0, NULL);
    assert_non_null (obj);
    ps_job_t again;
    ps_job_default (&again, 5);
    assert_int_equal (ps_job_load_json (&again, obj, "checkpoint MANIFEST.json job", &err), 0);
    s_assert_jobs_equal (&again, &job);
    json_decref (obj);
}

static void
test_overlay (void **state)
{
    harness_job_fixture_t *fx = *state;
    ps_job_t job;
    ps_job_default (&job, 2);
    harness_job_load (&job, harness_job_write (fx, "full.json", s_full_file));
    ps_job_t before = job;

    //  Only what the second file names changes.
    harness_job_load (&job, harness_job_write (fx, "second.json",
                                               "{\"optimizer\": {\"lr\": 0.2}, \"epochs\": 9,\n"
                                               " \"checkpoint\": {\"keep\": 10}, \"lr_schedule\": "
                                               "{\"values\": [0.3, 0.03, 0.003]}}"));
    ps_job_t expect = before;
    expect.optimizer.lr = 0.2;
    expect.epochs = 9;
    expect.checkpoint_keep = 10;
    expect.lr_schedule.values [0] = 0.3;
    expect.lr_schedule.values [1] = 0.03;
    expect.lr_schedule.values [2] = 0.003;
    s_assert_jobs_equal (&job, &expect);

    //  Naming the kind in force keeps the other optimizer keys.
    harness_job_load (&job, harness_job_write (fx, "same_kind.json",
                                               "{\"optimizer\": {\"kind\": \"momentum\"}}"));
    s_assert_jobs_equal (&job, &expect);

    //  Another kind resets every optimizer key to that kind's defaults,
    //  then applies the keys given beside it, wherever they stand.
    harness_job_load (&job, harness_job_write (fx, "adam.json",
                                               "{\"optimizer\": {\"beta2\": 0.98, "
                                               "\"kind\": \"adam\"}}"));
    ps_opt_config_default (&expect.optimizer, PS_OPT_ADAM);
    expect.optimizer.beta2 = 0.98;
    s_assert_jobs_equal (&job, &expect);
    assert_true (job.optimizer.lr == 0.001);
    assert_true (job.optimizer.weight_decay == 0);
    assert_false (job.optimizer.nesterov);

    //  Both piecewise arrays replaced, then the schedule back to constant.
    harness_job_load (&job, harness_job_write (fx, "three.json",
                                               "{\"lr_schedule\": {\"boundaries\": [1, 2, 3], "
                                               "\"values\": [4, 3, 2, 1]}}"));
    assert_int_equal (job.lr_schedule.nboundaries, 3);
    assert_true (job.lr_schedule.values [3] == 1.0);
    harness_job_load (&job, harness_job_write (fx, "constant.json",
                                               "{\"lr_schedule\": {\"kind\": \"cosine\", "
                                               "\"boundaries\": [], \"values\": []}}"));
    assert_int_equal (job.lr_schedule.kind, PS_LR_COSINE);
    assert_int_equal (job.lr_schedule.nboundaries, 0);
}

//  The rules between keys that flags may still settle are left to
//  ps_job_validate: a file may leave the checkpoint directory or the
//  heartbeat timeout to the command line.
static void
test_between_keys (void **state)
{
    harness_job_fixture_t *fx = *state;
    ps_job_t job;
    ps_job_default (&job, 2);
    harness_job_load (&job, harness_job_write (fx, "steps.json",
                                               "{\"checkpoint\": {\"every_steps\": 100}}"));
    assert_int_equal (job.checkpoint_steps, 100);
    ps_error_t err = { 0 };
    assert_int_equal (ps_job_validate (&job, &err), PS_EINVAL);
    assert_int_equal (err.code, PS_EINVAL);
    assert_string_equal (err.msg, "at /checkpoint/every_steps: expected 0 while "
                                  "checkpoint.dir is empty (no checkpoints), got 100");
    //  What --checkpoint-dir does.
    snprintf (job.checkpoint_dir, sizeof job.checkpoint_dir, "/tmp/ckpt");
    assert_int_equal (ps_job_validate (&job, &err), 0);

    ps_job_default (&job, 2);
    harness_job_load (&job, harness_job_write (fx, "seconds.json",
                                               "{\"checkpoint\": {\"every_seconds\": 60}}"));
    assert_int_equal (ps_job_validate (&job, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "at /checkpoint/every_seconds"));
    assert_non_null (strstr (err.msg, "checkpoint.dir"));

    //  A later file that empties the directory of an earlier one.
    ps_job_default (&job, 2);
    harness_job_load (&job, harness_job_write (fx, "ckpt.json",
                                               "{\"checkpoint\": {\"dir\": \"/tmp/c\", "
                                               "\"every_steps\": 100}}"));
    assert_int_equal (ps_job_validate (&job, &err), 0);
    harness_job_load (&job, harness_job_write (fx, "nodir.json",
                                               "{\"checkpoint\": {\"dir\": \"\"}}"));
    assert_int_equal (ps_job_validate (&job, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "at /checkpoint/every_steps"));

    //  A heartbeat interval longer than the default timeout, and the
    //  timeout that --heartbeat-timeout-ms would give.
    ps_job_default (&job, 2);
    harness_job_load (&job, harness_job_write (fx, "heartbeat.json",
                                               "{\"heartbeat\": {\"interval_ms\": 5000}}"));
    assert_int_equal (ps_job_validate (&job, &err), PS_EINVAL);
    assert_string_equal (err.msg, "at /heartbeat/timeout_ms: expected more than "
                                  "heartbeat.interval_ms (5000), got 3000");
    job.heartbeat_timeout_ms = 20000;
    assert_int_equal (ps_job_validate (&job, &err), 0);
}

static void
test_missing_file (void **state)
{
    harness_job_fixture_t *fx = *state;
    ps_job_t job;
    ps_job_default (&job, 2);
    ps_job_t before;
    memcpy (&before, &job, sizeof job);
    char path [128];
    snprintf (path, sizeof path, "%s/no-such-job.json", fx->dir);
    ps_error_t err = { 0 };
    assert_int_equal (ps_job_load_file (&job, path, &err), PS_ENOTFOUND);
    assert_int_equal (err.code, PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, path));
    assert_memory_equal (&job, &before, sizeof job);
}

//  A job path that is not a regular file (a FIFO nobody writes to, a
//  directory) is refused at once, naming it, instead of blocking in open or
//  read. The alarm turns a hang into a failure.
static void
test_not_regular (void **state)
{
    harness_job_fixture_t *fx = *state;
    char fifo [160];
    snprintf (fifo, sizeof fifo, "%s/job.fifo", fx->dir);
    assert_int_equal (mkfifo (fifo, 0600), 0);
    const char *paths [] = { fifo, fx->dir };
    const char *kinds [] = { "a FIFO", "a directory" };
    for (int i = 0; i < 2; i++) {
        ps_job_t job;
        ps_job_default (&job, 2);
        ps_error_t err = { 0 };
        alarm (30);
        int rc = ps_job_load_file (&job, paths [i], &err);
        alarm (0);
        assert_int_equal (rc, PS_EINVAL);
        if (!strstr (err.msg, paths [i]) || !strstr (err.msg, kinds [i])
        ||  !strstr (err.msg, "not a regular file"))
            fail_msg ("message '%s' does not name %s as %s", err.msg, paths [i], kinds [i]);
    }
}

//  The source named for a JSON object, and a key error in it.
static void
test_load_json_source (void **state)
{
    (void) state;
    ps_job_t job;
    ps_job_default (&job, 2);
    ps_job_t before;
    memcpy (&before, &job, sizeof job);
    json_t *obj = json_pack ("{s:{s:f}}", "optimizer", "lr", -1.0);
    ps_error_t err = { 0 };
    assert_int_equal (ps_job_load_json (&job, obj, "checkpoint MANIFEST.json job", &err),
                      PS_EINVAL);
    assert_string_equal (err.msg, "checkpoint MANIFEST.json job: at /optimizer/lr: "
                                  "expected a number > 0, got -1");
    assert_memory_equal (&job, &before, sizeof job);
    json_decref (obj);
    assert_int_equal (ps_job_load_json (&job, NULL, "manifest", &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "manifest: at the top level: expected an object (the job), "
                                  "got nothing"));
    //  A NUL inside a string, which JSON_ALLOW_NUL lets through, would cut
    //  the path short.
    obj = json_pack ("{s:s%}", "data_dir", "/data\0/x", (size_t) 8);
    assert_non_null (obj);
    assert_int_equal (ps_job_load_json (&job, obj, "manifest", &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "manifest: at /data_dir"));
    assert_memory_equal (&job, &before, sizeof job);
    json_decref (obj);
}

//  ---------------------------------------------------------------------
//  Checking jobs set in code

//  ps_job_validate refuses job with a message naming key.
static void
s_assert_invalid (const ps_job_t *job, const char *key)
{
    ps_error_t err = { 0 };
    int rc = ps_job_validate (job, &err);
    if (rc == 0)
        fail_msg ("a job with a bad %s validated", key);
    assert_int_equal (rc, PS_EINVAL);
    char quoted [96];
    snprintf (quoted, sizeof quoted, "at %s", key);
    if (!strstr (err.msg, quoted))
        fail_msg ("message \"%s\" does not name %s", err.msg, key);
}

static void
test_validate (void **state)
{
    (void) state;
    ps_job_t good;
    ps_job_default (&good, 4);
    ps_job_t job = good;
    job.optimizer.lr = 0;
    s_assert_invalid (&job, "/optimizer/lr");
    job = good;
    job.optimizer.lr = NAN;
    s_assert_invalid (&job, "/optimizer/lr");
    job = good;
    job.log_seconds = INFINITY;
    s_assert_invalid (&job, "/log_seconds");
    job = good;
    job.seed = UINT64_MAX;
    s_assert_invalid (&job, "/seed");
    job = good;
    job.batch_size = 0;
    s_assert_invalid (&job, "/batch_size");
    job = good;
    job.epochs = 0;
    s_assert_invalid (&job, "/epochs");
    job = good;
    job.worker_threads = 0;
    s_assert_invalid (&job, "/worker_threads");
    job = good;
    snprintf (job.device, sizeof job.device, "tpu");
    s_assert_invalid (&job, "/device");
    job = good;
    job.model [0] = 0;
    s_assert_invalid (&job, "/model");
    job = good;
    memset (job.data_dir, 'x', sizeof job.data_dir);
    s_assert_invalid (&job, "/data_dir");
    job = good;
    job.mode = (ps_mode_t) 7;
    s_assert_invalid (&job, "/mode");
    job = good;
    job.optimizer.kind = (ps_opt_kind_t) 9;
    s_assert_invalid (&job, "/optimizer/kind");
    job = good;
    job.lr_schedule.nboundaries = PS_JOB_MAX_BOUNDARIES + 1;
    s_assert_invalid (&job, "/lr_schedule/boundaries");
    job = good;
    job.lr_schedule.kind = PS_LR_PIECEWISE;
    s_assert_invalid (&job, "/lr_schedule/boundaries");
    job.lr_schedule.nboundaries = 2;
    job.lr_schedule.boundaries [0] = 3;
    job.lr_schedule.boundaries [1] = 1;
    job.lr_schedule.values [0] = 0.1;
    job.lr_schedule.values [1] = 0.01;
    job.lr_schedule.values [2] = 0.001;
    s_assert_invalid (&job, "/lr_schedule/boundaries/1");
    job.lr_schedule.boundaries [1] = 4;
    job.lr_schedule.values [2] = 0;
    s_assert_invalid (&job, "/lr_schedule/values/2");
    job.lr_schedule.values [2] = 0.001;
    assert_int_equal (ps_job_validate (&job, NULL), 0);
    job = good;
    job.checkpoint_seconds = 10;
    s_assert_invalid (&job, "/checkpoint/every_seconds");
    snprintf (job.checkpoint_dir, sizeof job.checkpoint_dir, "/tmp/ckpt");
    assert_int_equal (ps_job_validate (&job, NULL), 0);
    job = good;
    job.heartbeat_timeout_ms = job.heartbeat_ms;
    s_assert_invalid (&job, "/heartbeat/timeout_ms");
    job = good;
    job.partitioner.max_shards = 0;
    s_assert_invalid (&job, "/partitioner/max_shards");
    //  Keys the kind does not read may hold anything in their own range.
    job = good;
    job.optimizer.kind = PS_OPT_SGD;
    job.partitioner.num_shards = 0;
    assert_int_equal (ps_job_validate (&job, NULL), 0);
}

//  ---------------------------------------------------------------------
//  Round trips

static void
s_assert_round_trip (const ps_job_t *job)
{
    json_t *obj = ps_job_to_json (job);
    assert_non_null (obj);
    //  Read back over a job that differs in every field.
    ps_job_t back;
    ps_job_default (&back, 7);
    json_t *other = json_loads (s_full_file, 0, NULL);
    assert_non_null (other);
    ps_error_t err = { 0 };
    assert_int_equal (ps_job_load_json (&back, other, "full", &err), 0);
    json_decref (other);
    if (ps_job_load_json (&back, obj, "to_json", &err))
        fail_msg ("reading ps_job_to_json's output back failed: %s", err.msg);
    s_assert_jobs_equal (&back, job);

    //  And through text, as a checkpoint manifest carries it.
    char *text = json_dumps (obj, JSON_INDENT (2));
    assert_non_null (text);
    json_t *parsed = json_loads (text, JSON_REJECT_DUPLICATES, NULL);
    assert_non_null (parsed);
    ps_job_default (&back, 1);
    if (ps_job_load_json (&back, parsed, "text", &err))
        fail_msg ("reading the text back failed: %s", err.msg);
    s_assert_jobs_equal (&back, job);
    json_t *again = ps_job_to_json (&back);
    assert_true (json_equal (obj, again));
    free (text);
    json_decref (again);
    json_decref (parsed);
    json_decref (obj);
}

static void
test_round_trip (void **state)
{
    harness_job_fixture_t *fx = *state;
    ps_job_t job;
    ps_job_default (&job, 2);
    s_assert_round_trip (&job);
    harness_job_load (&job, harness_job_write (fx, "full.json", s_full_file));
    s_assert_round_trip (&job);

    //  Doubles that need all 17 digits, a seed at the top of the range,
    //  and the other kinds.
    job.optimizer.kind = PS_OPT_ADAGRAD;
    job.optimizer.lr = 1.0 / 3.0;
    job.optimizer.epsilon = 1e-300;
    job.optimizer.initial_accumulator = 0.1 + 0.2;
    job.optimizer.clip_norm = 4.9406564584124654e-324;
    job.seed = INT64_MAX;
    job.steps = (uint64_t) 1 << 62;
    job.lr_schedule.kind = PS_LR_COSINE;
    job.lr_schedule.boundaries [0] = 2.0 / 3.0;
    job.lr_schedule.values [1] = 0.7;
    job.lr_schedule.alpha = 0.1;
    job.lr_schedule.decay_steps = 123456789;
    job.partitioner.kind = PS_PARTITIONER_MAX_SIZE;
    job.partitioner.max_shard_bytes = INT64_MAX;
    job.partitioner.max_shards = 0;
    job.partitioner.min_shard_bytes = 0;
    job.mode = PS_MODE_ASYNC;
    snprintf (job.device, sizeof job.device, "gpu");
    snprintf (job.model, sizeof job.model, "/srv/models/my \"model\" \xc3\xa9.json");
    job.checkpoint_seconds = 0.1;
    assert_int_equal (ps_job_validate (&job, NULL), 0);
    s_assert_round_trip (&job);

    //  No schedule arrays.
    job.lr_schedule.nboundaries = 0;
    s_assert_round_trip (&job);

    //  What JSON cannot hold gives no JSON.
    job.log_seconds = NAN;
    assert_null (ps_job_to_json (&job));
    job.log_seconds = 1;
    job.seed = UINT64_MAX;
    assert_null (ps_job_to_json (&job));
}

static void
test_example (void **state)
{
    (void) state;
    char path [512];
    json_t *example = harness_job_source_json ("schemas/jobs/example.json", path, sizeof path);
    json_decref (example);
    ps_job_t job;
    ps_job_default (&job, 2);
    harness_job_load (&job, path);
    assert_int_equal (ps_job_validate (&job, NULL), 0);
    s_assert_round_trip (&job);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_defaults, harness_job_setup, harness_dir_teardown),
        cmocka_unit_test (test_schema),
        cmocka_unit_test_setup_teardown (test_full_file, harness_job_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_overlay, harness_job_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_between_keys, harness_job_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_missing_file, harness_job_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_not_regular, harness_job_setup, harness_dir_teardown),
        cmocka_unit_test (test_load_json_source),
        cmocka_unit_test (test_validate),
        cmocka_unit_test_setup_teardown (test_round_trip, harness_job_setup, harness_dir_teardown),
        cmocka_unit_test (test_example),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
