//  Unit tests for jobs (coordinator/ps_job.c): the defaults, and the
//  defaults and keys of schemas/job.schema.json against them; a job file naming
//  every key; a second file changing only what it names, an optimizer kind
//  that resets the other optimizer keys; every kind of error (bad JSON,
//  unknown keys, wrong types, values out of range, bad enum values, the
//  piecewise arrays' lengths and order, a missing file), each with its
//  code, a message naming the file and the key, and the job left as it
//  was; the rules between keys that flags may settle (a checkpoint
//  interval without a directory, the heartbeat timeout), which reading a
//  file leaves to ps_job_validate; ps_job_validate on jobs set in code; ps_job_to_json read back to an identical job, directly and
//  through text; the example job file; and ps_lr_at against the header's
//  formulas written out again here and against numbers worked by hand.
//  Job files are written into a mkdtemp directory under /tmp, removed
//  afterwards. The schema and the example come from $PS_SOURCE_ROOT, which
//  meson sets; without it the tests that need them fail, saying so.

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

#include "harness.h"
#include "harness_case.h"
#include "ps_job.h"

typedef struct {
    char dir [HARNESS_DIR_SIZE];
    char path [128];            //  the last file written
} fixture_t;

static int
s_setup (void **state)
{
    return harness_dir_setup (state, sizeof (fixture_t));
}

//  Write text to dir/name; fx->path receives the path.
static const char *
s_write (fixture_t *fx, const char *name, const char *text)
{
    snprintf (fx->path, sizeof fx->path, "%s/%s", fx->dir, name);
    FILE *file = fopen (fx->path, "w");
    assert_non_null (file);
    assert_int_equal (fputs (text, file) >= 0, 1);
    assert_int_equal (fclose (file), 0);
    return fx->path;
}

static void
s_load (ps_job_t *job, const char *path)
{
    ps_error_t err = { 0 };
    if (ps_job_load_file (job, path, &err))
        fail_msg ("loading %s failed: %s", path, err.msg);
}

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
//  started as meson starts it, which is a broken set-up, not a reason to
//  leave the schema unchecked.
static json_t *
s_source_json (const char *rel, char *path, size_t size)
{
    const char *root = getenv ("PS_SOURCE_ROOT");
    if (!root || !*root)
        fail_msg ("PS_SOURCE_ROOT is not set: it names the source tree, which holds %s; "
                  "meson test sets it (tests/meson.build)", rel);
    snprintf (path, size, "%s/%s", root, rel);
    json_error_t jerr;
    json_t *obj = json_load_file (path, JSON_REJECT_DUPLICATES, &jerr);
    if (!obj)
        fail_msg ("%s: line %d: %s", path, jerr.line, jerr.text);
    return obj;
}

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
    fixture_t *fx = *state;
    ps_job_t loaded = job;
    s_load (&loaded, s_write (fx, "empty.json", "{}"));
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
    json_t *schema = s_source_json ("schemas/job.schema.json", path, sizeof path);
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
    fixture_t *fx = *state;
    ps_job_t job;
    ps_job_default (&job, 2);
    s_load (&job, s_write (fx, "full.json", s_full_file));
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
    fixture_t *fx = *state;
    ps_job_t job;
    ps_job_default (&job, 2);
    s_load (&job, s_write (fx, "full.json", s_full_file));
    ps_job_t before = job;

    //  Only what the second file names changes.
    s_load (&job, s_write (fx, "second.json",
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
    s_load (&job, s_write (fx, "same_kind.json", "{\"optimizer\": {\"kind\": \"momentum\"}}"));
    s_assert_jobs_equal (&job, &expect);

    //  Another kind resets every optimizer key to that kind's defaults,
    //  then applies the keys given beside it, wherever they stand.
    s_load (&job, s_write (fx, "adam.json",
                           "{\"optimizer\": {\"beta2\": 0.98, \"kind\": \"adam\"}}"));
    ps_opt_config_default (&expect.optimizer, PS_OPT_ADAM);
    expect.optimizer.beta2 = 0.98;
    s_assert_jobs_equal (&job, &expect);
    assert_true (job.optimizer.lr == 0.001);
    assert_true (job.optimizer.weight_decay == 0);
    assert_false (job.optimizer.nesterov);

    //  Both piecewise arrays replaced, then the schedule back to constant.
    s_load (&job, s_write (fx, "three.json",
                           "{\"lr_schedule\": {\"boundaries\": [1, 2, 3], "
                           "\"values\": [4, 3, 2, 1]}}"));
    assert_int_equal (job.lr_schedule.nboundaries, 3);
    assert_true (job.lr_schedule.values [3] == 1.0);
    s_load (&job, s_write (fx, "constant.json",
                           "{\"lr_schedule\": {\"kind\": \"cosine\", \"boundaries\": [], "
                           "\"values\": []}}"));
    assert_int_equal (job.lr_schedule.kind, PS_LR_COSINE);
    assert_int_equal (job.lr_schedule.nboundaries, 0);
}

//  Loading text from a file fails with code; the message names the file
//  and holds each of the fragments given (NULL-terminated), and the job is
//  left exactly as it was.
static void
s_assert_fails (fixture_t *fx, const char *text, int code, ...)
{
    ps_job_t job;
    ps_job_default (&job, 2);
    ps_job_t before;
    memcpy (&before, &job, sizeof job);
    const char *path = s_write (fx, "bad.json", text);
    ps_error_t err = { 0 };
    int rc = ps_job_load_file (&job, path, &err);
    if (rc == 0)
        fail_msg ("loading %s succeeded, expected %s", text, ps_error_name (code));
    if (rc != code || err.code != code)
        fail_msg ("loading %s gave %s (%s), expected %s", text, ps_error_name (rc), err.msg,
                  ps_error_name (code));
    if (strncmp (err.msg, path, strlen (path)) != 0)
        fail_msg ("message \"%s\" does not start with the file %s", err.msg, path);
    va_list args;
    va_start (args, code);
    const char *fragment;
    while ((fragment = va_arg (args, const char *)))
        if (!strstr (err.msg, fragment))
            fail_msg ("message \"%s\" lacks \"%s\"", err.msg, fragment);
    va_end (args);
    assert_memory_equal (&job, &before, sizeof job);
}

static void
test_bad_json (void **state)
{
    fixture_t *fx = *state;
    s_assert_fails (fx, "{\"epochs\": 3,\n  \"batch_size\": }\n", PS_EINVAL, "bad JSON",
                    "line 2", "column", NULL);
    s_assert_fails (fx, "{\"epochs\": 3, \"epochs\": 4}", PS_EINVAL, "line 1", "duplicate", NULL);
    s_assert_fails (fx, "{\"epochs\": 3} trailing", PS_EINVAL, "line 1", NULL);
    s_assert_fails (fx, "", PS_EINVAL, "bad JSON", NULL);
}

//  A number beyond what JSON is read into (64-bit integers, doubles), which
//  jansson refuses with a position only, is reported as any value out of
//  range: by its key, with the key's range and the number as written.
static void
test_too_large (void **state)
{
    fixture_t *fx = *state;
    s_assert_fails (fx, "{\"seed\": 18446744073709551615}", PS_EINVAL,
                    "at /seed: expected an integer in 0 .. 9223372036854775807, "
                    "got 18446744073709551615", NULL);
    s_assert_fails (fx, "{\"epochs\": 3,\n \"steps\": 9223372036854775808}", PS_EINVAL,
                    "at /steps: expected an integer in 0 .. 9223372036854775807, "
                    "got 9223372036854775808", NULL);
    s_assert_fails (fx, "{\"epochs\": 99999999999999999999}", PS_EINVAL,
                    "at /epochs: expected an integer in 1 .. 2147483647, "
                    "got 99999999999999999999", NULL);
    s_assert_fails (fx, "{\"checkpoint\": {\"dir\": \"/tmp/x\", \"keep\": -9223372036854775809}}",
                    PS_EINVAL, "at /checkpoint/keep: expected an integer in 1 .. 1000000, "
                    "got -9223372036854775809", NULL);
    s_assert_fails (fx, "{\"optimizer\": {\"kind\": \"adam\", \"lr\": 1e999}}", PS_EINVAL,
                    "at /optimizer/lr: expected a number > 0, got 1e999", NULL);
    s_assert_fails (fx, "{\"lr_schedule\": {\"kind\": \"piecewise\", \"boundaries\": "
                        "[1, 99999999999999999999], \"values\": [0.1, 0.01, 0.001]}}", PS_EINVAL,
                    "at /lr_schedule/boundaries/1: expected a number > 0, "
                    "got 99999999999999999999", NULL);
    //  Strings with quotes, brackets and commas before it do not confuse
    //  the search for its key.
    s_assert_fails (fx, "{\"model\": \"a\\\"{[,:b\", \"data_dir\": \"]}\",\n"
                        " \"seed\": 18446744073709551616}", PS_EINVAL, "at /seed",
                    "got 18446744073709551616", NULL);
    //  A key the schema does not have is unknown, whatever its value.
    s_assert_fails (fx, "{\"frob\": 99999999999999999999}", PS_EINVAL,
                    "at /frob: unknown key \"frob\" (expected one of model, ", NULL);
    s_assert_fails (fx, "{\"optimizer\": {\"frob\": 1e999}}", PS_EINVAL,
                    "at /optimizer/frob: unknown key \"frob\"", NULL);
    s_assert_fails (fx, "99999999999999999999", PS_EINVAL,
                    "at the top level: expected an object (the job), got 99999999999999999999", NULL);
    //  A key whose value has the wrong shape around the number: an array
    //  or an object where the schema has neither (found by fuzz_job: the
    //  search followed the schema off its end).
    s_assert_fails (fx, "{\"model\": [99999999999999999999]}", PS_EINVAL,
                    "at /model", NULL);
    s_assert_fails (fx, "{\"epochs\": {\"x\": 99999999999999999999}}", PS_EINVAL,
                    "at /epochs", NULL);
    s_assert_fails (fx, "{\"optimizer\": {\"lr\": [1e999]}}", PS_EINVAL,
                    "at /optimizer/lr", NULL);
    s_assert_fails (fx, "{\"optimizer\": 1e999}", PS_EINVAL, "at /optimizer", NULL);
}

static void
test_unknown_key (void **state)
{
    fixture_t *fx = *state;
    s_assert_fails (fx, "{\"epoch\": 3}", PS_EINVAL, "at /epoch: unknown key \"epoch\"", "epochs", NULL);
    s_assert_fails (fx, "{\"optimizer\": {\"lr\": 0.1, \"lrate\": 0.1}}", PS_EINVAL,
                    "at /optimizer/lrate: unknown key \"lrate\"", "kind, lr, momentum", NULL);
    s_assert_fails (fx, "{\"checkpoint\": {\"directory\": \"/tmp\"}}", PS_EINVAL,
                    "at /checkpoint/directory: unknown key \"directory\"", NULL);
    s_assert_fails (fx, "{\"heartbeat\": {\"kind\": \"fast\"}}", PS_EINVAL,
                    "at /heartbeat/kind: unknown key \"kind\"", NULL);
}

static void
test_wrong_type (void **state)
{
    fixture_t *fx = *state;
    //  The whole message, once.
    ps_job_t job;
    ps_job_default (&job, 2);
    const char *path = s_write (fx, "fast.json", "{\"optimizer\": {\"lr\": \"fast\"}}");
    ps_error_t err = { 0 };
    assert_int_equal (ps_job_load_file (&job, path, &err), PS_EINVAL);
    char expect [256];
    snprintf (expect, sizeof expect,
              "%s: at /optimizer/lr: expected a number > 0, got \"fast\"", path);
    assert_string_equal (err.msg, expect);

    s_assert_fails (fx, "{\"batch_size\": 64.5}", PS_EINVAL,
                    "at /batch_size: expected an integer in 1 .. 65536, got 64.5", NULL);
    s_assert_fails (fx, "{\"epochs\": \"3\"}", PS_EINVAL, "at /epochs", "got \"3\"", NULL);
    s_assert_fails (fx, "{\"optimizer\": 3}", PS_EINVAL,
                    "at /optimizer: expected an object, got 3", NULL);
    s_assert_fails (fx, "{\"optimizer\": {\"nesterov\": 1}}", PS_EINVAL,
                    "at /optimizer/nesterov: expected true or false, got 1", NULL);
    s_assert_fails (fx, "{\"model\": null}", PS_EINVAL, "at /model", "got null", NULL);
    s_assert_fails (fx, "{\"model\": \"\"}", PS_EINVAL, "at /model", "non-empty string", NULL);
    s_assert_fails (fx, "{\"data_dir\": \"a\\u0000b\"}", PS_EINVAL, "bad JSON", "u0000", NULL);
    s_assert_fails (fx, "{\"lr_schedule\": {\"boundaries\": 5}}", PS_EINVAL,
                    "at /lr_schedule/boundaries", "an array of at most 16 items", NULL);
    s_assert_fails (fx, "{\"lr_schedule\": {\"values\": [0.1, \"x\"]}}", PS_EINVAL,
                    "at /lr_schedule/values/1: expected a number > 0, got \"x\"", NULL);
    s_assert_fails (fx, "[1, 2]", PS_EINVAL, "at the top level: expected an object, got [1,2]", NULL);
}

//  What JSON Schema counts differs from what a C field holds in two ways,
//  both settled here: a number with no fraction is an integer (3.0 is 3),
//  and a string's length is in characters, while a path must also fit its
//  1024-byte field.
static void
test_schema_counts (void **state)
{
    fixture_t *fx = *state;
    ps_job_t job;
    ps_job_default (&job, 2);
    s_load (&job, s_write (fx, "real.json", "{\"epochs\": 7.0, \"seed\": 1e3}"));
    assert_int_equal (job.epochs, 7);
    assert_int_equal (job.seed, 1000);
    //  600 two-byte characters (UTF-8 for e acute): within the schema's
    //  1023 characters, but 1200 bytes.
    char text [1400] = "{\"model\": \"";
    for (int i = 0; i < 600; i++)
        strcat (text, "\xc3\xa9");
    strcat (text, "\"}");
    s_assert_fails (fx, text, PS_EINVAL,
                    "at /model: expected a string of at most 1023 bytes, got 1200 bytes", NULL);
    //  511 of them fit.
    snprintf (text, sizeof text, "{\"data_dir\": \"");
    for (int i = 0; i < 511; i++)
        strcat (text, "\xc3\xa9");
    strcat (text, "\"}");
    s_load (&job, s_write (fx, "wide.json", text));
    assert_int_equal (strlen (job.data_dir), 1022);
}

static void
test_out_of_range (void **state)
{
    fixture_t *fx = *state;
    s_assert_fails (fx, "{\"batch_size\": 0}", PS_EINVAL,
                    "at /batch_size: expected an integer in 1 .. 65536, got 0", NULL);
    s_assert_fails (fx, "{\"batch_size\": 65537}", PS_EINVAL, "at /batch_size", NULL);
    s_assert_fails (fx, "{\"optimizer\": {\"lr\": 0}}", PS_EINVAL,
                    "at /optimizer/lr: expected a number > 0, got 0", NULL);
    s_assert_fails (fx, "{\"optimizer\": {\"momentum\": 1}}", PS_EINVAL,
                    "at /optimizer/momentum: expected a number in [0, 1), got 1", NULL);
    s_assert_fails (fx, "{\"optimizer\": {\"clip_norm\": -0.5}}", PS_EINVAL,
                    "at /optimizer/clip_norm: expected a number >= 0, got -0.5", NULL);
    s_assert_fails (fx, "{\"lr_schedule\": {\"alpha\": 1.5}}", PS_EINVAL,
                    "at /lr_schedule/alpha: expected a number in [0, 1], got 1.5", NULL);
    s_assert_fails (fx, "{\"seed\": -1}", PS_EINVAL,
                    "at /seed: expected an integer in 0 .. 9223372036854775807, got -1", NULL);
    s_assert_fails (fx, "{\"log_seconds\": 0}", PS_EINVAL,
                    "at /log_seconds: expected a number in (0, 86400], got 0", NULL);
    s_assert_fails (fx, "{\"heartbeat\": {\"interval_ms\": 0}}", PS_EINVAL,
                    "at /heartbeat/interval_ms", NULL);
    s_assert_fails (fx, "{\"checkpoint\": {\"dir\": \"/tmp/x\", \"keep\": 0}}", PS_EINVAL,
                    "at /checkpoint/keep: expected an integer in 1 .. 1000000, got 0", NULL);
    s_assert_fails (fx, "{\"lr_schedule\": {\"kind\": \"piecewise\", \"boundaries\": [1, 2], "
                        "\"values\": [0.1, 0, 0.01]}}", PS_EINVAL,
                    "at /lr_schedule/values/1: expected a number > 0, got 0", NULL);
    //  Bounds that depend on the kind: a fixed partitioner needs shards,
    //  whether its count is given as 0 or left unset.
    s_assert_fails (fx, "{\"partitioner\": {\"kind\": \"fixed\", \"num_shards\": 0}}", PS_EINVAL,
                    "at /partitioner/num_shards: expected an integer >= 1, got 0 "
                    "(as kind is \"fixed\")", NULL);
    s_assert_fails (fx, "{\"partitioner\": {\"kind\": \"fixed\"}}", PS_EINVAL,
                    "at /partitioner/num_shards", "(as kind is \"fixed\")", NULL);
    s_assert_fails (fx, "{\"partitioner\": {\"kind\": \"max_size\", \"max_shards\": 0}}",
                    PS_EINVAL, "at /partitioner/max_shard_bytes", NULL);
    s_assert_fails (fx, "{\"partitioner\": {\"num_shards\": -1}}", PS_EINVAL,
                    "at /partitioner/num_shards: expected an integer in 0 .. 2147483647, "
                    "got -1", NULL);
    //  A key the kind does not read is still checked against its own range.
    s_assert_fails (fx, "{\"optimizer\": {\"kind\": \"sgd\", \"beta1\": 2}}", PS_EINVAL,
                    "at /optimizer/beta1", NULL);

    //  A min_size partitioner ignores num_shards, and a max_size one takes
    //  0 shards to mean no cap.
    ps_job_t job;
    ps_job_default (&job, 2);
    s_load (&job, s_write (fx, "max_size.json", "{\"partitioner\": {\"kind\": \"max_size\", "
                                                "\"max_shard_bytes\": 4096, \"max_shards\": 0}}"));
    assert_int_equal (job.partitioner.max_shards, 0);

    //  ssp's staleness: a whole number from 0 (lockstep) to 2147483647
    //  (unbounded, as async); the word is the command line's, not the file's.
    s_assert_fails (fx, "{\"mode\": \"ssp\", \"staleness\": -1}", PS_EINVAL,
                    "at /staleness: expected an integer in 0 .. 2147483647, got -1", NULL);
    s_assert_fails (fx, "{\"staleness\": \"unbounded\"}", PS_EINVAL, "at /staleness", NULL);
    s_load (&job, s_write (fx, "ssp.json", "{\"mode\": \"ssp\", \"staleness\": 0}"));
    assert_int_equal (job.mode, PS_MODE_SSP);
    assert_int_equal (job.staleness, 0);
}

static void
test_bad_enum (void **state)
{
    fixture_t *fx = *state;
    s_assert_fails (fx, "{\"mode\": \"bsp\"}", PS_EINVAL,
                    "at /mode: expected one of \"async\", \"mirrored\", \"ssp\", \"sync\"",
                    "got \"bsp\"", NULL);
    s_assert_fails (fx, "{\"optimizer\": {\"kind\": \"rmsprop\"}}", PS_EINVAL,
                    "at /optimizer/kind", "\"sgd\", \"momentum\", \"adagrad\", \"adam\"",
                    "got \"rmsprop\"", NULL);
    s_assert_fails (fx, "{\"lr_schedule\": {\"kind\": \"linear\"}}", PS_EINVAL,
                    "at /lr_schedule/kind", "\"cosine\"", NULL);
    s_assert_fails (fx, "{\"partitioner\": {\"kind\": \"even\"}}", PS_EINVAL,
                    "at /partitioner/kind", "\"min_size\"", NULL);
    s_assert_fails (fx, "{\"device\": \"tpu\"}", PS_EINVAL,
                    "at /device: expected one of \"cpu\", \"gpu\", \"auto\", got \"tpu\"", NULL);
    s_assert_fails (fx, "{\"device\": 1}", PS_EINVAL, "at /device", NULL);
}

static void
test_piecewise (void **state)
{
    fixture_t *fx = *state;
    //  Two boundaries take three values.
    s_assert_fails (fx, "{\"lr_schedule\": {\"kind\": \"piecewise\", \"boundaries\": [2, 5], "
                        "\"values\": [0.1, 0.01]}}", PS_EINVAL,
                    "at /lr_schedule/values: expected 3 values", "got 2", NULL);
    s_assert_fails (fx, "{\"lr_schedule\": {\"kind\": \"piecewise\", \"boundaries\": [2, 5], "
                        "\"values\": [0.1, 0.01, 0.001, 0.0001]}}", PS_EINVAL,
                    "at /lr_schedule/values: expected 3 values", "got 4", NULL);
    //  Boundaries alone, over a job that has no values.
    s_assert_fails (fx, "{\"lr_schedule\": {\"boundaries\": [2, 5]}}", PS_EINVAL,
                    "at /lr_schedule/values: expected 3 values", "got 0", NULL);
    s_assert_fails (fx, "{\"lr_schedule\": {\"values\": [0.1]}}", PS_EINVAL,
                    "at /lr_schedule/values: expected no values", NULL);
    //  A piecewise schedule needs a boundary.
    s_assert_fails (fx, "{\"lr_schedule\": {\"kind\": \"piecewise\"}}", PS_EINVAL,
                    "at /lr_schedule/boundaries: expected an array of at least 1 item, got [] "
                    "(as kind is \"piecewise\")", NULL);
    //  Boundaries increase strictly.
    s_assert_fails (fx, "{\"lr_schedule\": {\"kind\": \"piecewise\", \"boundaries\": [2, 2], "
                        "\"values\": [0.1, 0.01, 0.001]}}", PS_EINVAL,
                    "at /lr_schedule/boundaries/1: expected a number > 2", "got 2", NULL);
    s_assert_fails (fx, "{\"lr_schedule\": {\"kind\": \"piecewise\", \"boundaries\": [1, 5, 3], "
                        "\"values\": [0.4, 0.3, 0.2, 0.1]}}", PS_EINVAL,
                    "at /lr_schedule/boundaries/2: expected a number > 5", NULL);
    s_assert_fails (fx, "{\"lr_schedule\": {\"boundaries\": [0], \"values\": [1, 2]}}", PS_EINVAL,
                    "at /lr_schedule/boundaries/0: expected a number > 0, got 0", NULL);
    s_assert_fails (fx, "{\"lr_schedule\": {\"boundaries\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,"
                        "16,17]}}", PS_EINVAL, "at /lr_schedule/boundaries", "got [1,2,3",
                    NULL);
    //  Sixteen are allowed.
    ps_job_t job;
    ps_job_default (&job, 2);
    s_load (&job, s_write (fx, "sixteen.json",
                           "{\"lr_schedule\": {\"kind\": \"piecewise\", \"boundaries\": "
                           "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16], \"values\": "
                           "[17,16,15,14,13,12,11,10,9,8,7,6,5,4,3,2,1]}}"));
    assert_int_equal (job.lr_schedule.nboundaries, 16);
    assert_true (job.lr_schedule.values [16] == 1.0);
}

//  The rules between keys that flags may still settle are left to
//  ps_job_validate: a file may leave the checkpoint directory or the
//  heartbeat timeout to the command line.
static void
test_between_keys (void **state)
{
    fixture_t *fx = *state;
    ps_job_t job;
    ps_job_default (&job, 2);
    s_load (&job, s_write (fx, "steps.json", "{\"checkpoint\": {\"every_steps\": 100}}"));
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
    s_load (&job, s_write (fx, "seconds.json", "{\"checkpoint\": {\"every_seconds\": 60}}"));
    assert_int_equal (ps_job_validate (&job, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "at /checkpoint/every_seconds"));
    assert_non_null (strstr (err.msg, "checkpoint.dir"));

    //  A later file that empties the directory of an earlier one.
    ps_job_default (&job, 2);
    s_load (&job, s_write (fx, "ckpt.json",
                           "{\"checkpoint\": {\"dir\": \"/tmp/c\", \"every_steps\": 100}}"));
    assert_int_equal (ps_job_validate (&job, &err), 0);
    s_load (&job, s_write (fx, "nodir.json", "{\"checkpoint\": {\"dir\": \"\"}}"));
    assert_int_equal (ps_job_validate (&job, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "at /checkpoint/every_steps"));

    //  A heartbeat interval longer than the default timeout, and the
    //  timeout that --heartbeat-timeout-ms would give.
    ps_job_default (&job, 2);
    s_load (&job, s_write (fx, "heartbeat.json", "{\"heartbeat\": {\"interval_ms\": 5000}}"));
    assert_int_equal (ps_job_validate (&job, &err), PS_EINVAL);
    assert_string_equal (err.msg, "at /heartbeat/timeout_ms: expected more than "
                                  "heartbeat.interval_ms (5000), got 3000");
    job.heartbeat_timeout_ms = 20000;
    assert_int_equal (ps_job_validate (&job, &err), 0);
}

static void
test_missing_file (void **state)
{
    fixture_t *fx = *state;
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
    fixture_t *fx = *state;
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
    fixture_t *fx = *state;
    ps_job_t job;
    ps_job_default (&job, 2);
    s_assert_round_trip (&job);
    s_load (&job, s_write (fx, "full.json", s_full_file));
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
    json_t *example = s_source_json ("schemas/jobs/example.json", path, sizeof path);
    json_decref (example);
    ps_job_t job;
    ps_job_default (&job, 2);
    s_load (&job, path);
    assert_int_equal (ps_job_validate (&job, NULL), 0);
    s_assert_round_trip (&job);
}

//  ---------------------------------------------------------------------
//  Learning-rate schedules

//  The formulas of ps_job.h, written out again.
static double
s_expected_lr (const ps_lr_schedule_t *sc, double lr, uint64_t s, uint64_t e, uint64_t t)
{
    double first = sc->kind == PS_LR_PIECEWISE ? sc->values [0] : lr;
    double w = (double) sc->warmup_steps;
    if (sc->warmup_steps > 0 && (double) s <= w)
        return first * (double) s / w;
    if (sc->kind == PS_LR_CONSTANT)
        return lr;
    if (sc->kind == PS_LR_PIECEWISE) {
        int i = 0;
        while (i < sc->nboundaries && !((double) s - 1 < sc->boundaries [i] * (double) e))
            i++;
        return sc->values [i];
    }
    double d = sc->decay_steps ? (double) sc->decay_steps : (double) t;
    double dp = d - w > 1 ? d - w : 1;
    double x = (double) s - 1 - w;
    double p = (x < dp ? x : dp) / dp;
    return lr * ((1 - sc->alpha) * 0.5 * (1 + cos (M_PI * p)) + sc->alpha);
}

static void
s_assert_near (double got, double want)
{
    if (!(fabs (got - want) <= 1e-15 * fmax (1.0, fabs (want))))
        fail_msg ("learning rate %.17g, expected %.17g", got, want);
}

//  Every step of a run against the formula.
static void
s_assert_formula (const ps_lr_schedule_t *sc, double lr, uint64_t e, uint64_t t)
{
    for (uint64_t s = 1; s <= t + 5; s++)
        s_assert_near (ps_lr_at (sc, lr, s, e, t), s_expected_lr (sc, lr, s, e, t));
}

static void
test_lr_constant (void **state)
{
    (void) state;
    ps_lr_schedule_t sc = { .kind = PS_LR_CONSTANT };
    assert_true (ps_lr_at (&sc, 0.01, 1, 10, 100) == 0.01);
    assert_true (ps_lr_at (&sc, 0.01, 100, 10, 100) == 0.01);
    assert_true (ps_lr_at (&sc, 0.01, 1000, 10, 100) == 0.01);
    s_assert_formula (&sc, 0.01, 10, 100);
    //  A warm-up of 10 steps: 1/10, 2/10, ... of the rate, then the rate.
    sc.warmup_steps = 10;
    s_assert_near (ps_lr_at (&sc, 0.01, 1, 10, 100), 0.001);
    s_assert_near (ps_lr_at (&sc, 0.01, 5, 10, 100), 0.005);
    assert_true (ps_lr_at (&sc, 0.01, 10, 10, 100) == 0.01);
    assert_true (ps_lr_at (&sc, 0.01, 11, 10, 100) == 0.01);
    s_assert_formula (&sc, 0.01, 10, 100);
}

static void
test_lr_piecewise (void **state)
{
    (void) state;
    //  E = 10 steps per epoch, boundaries at epochs 2 and 5: steps 1..20
    //  (0-based 0..19) take 0.1, steps 21..50 take 0.01, later ones 0.001.
    ps_lr_schedule_t sc = {
        .kind = PS_LR_PIECEWISE, .nboundaries = 2,
        .boundaries = { 2, 5 }, .values = { 0.1, 0.01, 0.001 },
    };
    const struct { uint64_t step; double lr; } cases [] = {
        { 1, 0.1 }, { 19, 0.1 }, { 20, 0.1 }, { 21, 0.01 }, { 22, 0.01 },
        { 50, 0.01 }, { 51, 0.001 }, { 1000, 0.001 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++)
        if (ps_lr_at (&sc, 123.0, cases [i].step, 10, 100) != cases [i].lr)
            fail_msg ("step %llu: %g, expected %g", (unsigned long long) cases [i].step,
                      ps_lr_at (&sc, 123.0, cases [i].step, 10, 100), cases [i].lr);
    s_assert_formula (&sc, 123.0, 10, 100);
    //  A fractional boundary: epoch 1.5 of 10 steps is step 15 (0-based).
    ps_lr_schedule_t half = {
        .kind = PS_LR_PIECEWISE, .nboundaries = 1, .boundaries = { 1.5 }, .values = { 1, 2 },
    };
    assert_true (ps_lr_at (&half, 0, 15, 10, 100) == 1);
    assert_true (ps_lr_at (&half, 0, 16, 10, 100) == 2);
    s_assert_formula (&half, 0, 10, 100);
    //  A warm-up ramps to values [0], not to the optimizer's rate.
    sc.warmup_steps = 4;
    s_assert_near (ps_lr_at (&sc, 123.0, 1, 10, 100), 0.025);
    s_assert_near (ps_lr_at (&sc, 123.0, 2, 10, 100), 0.05);
    assert_true (ps_lr_at (&sc, 123.0, 4, 10, 100) == 0.1);
    assert_true (ps_lr_at (&sc, 123.0, 5, 10, 100) == 0.1);
    assert_true (ps_lr_at (&sc, 123.0, 21, 10, 100) == 0.01);
    s_assert_formula (&sc, 123.0, 10, 100);
}

static void
test_lr_cosine (void **state)
{
    (void) state;
    //  lr 0.1, floor alpha 0.1, 100 steps: p = (s - 1) / 100, so the
    //  last step of the run is at p = 0.99, and the floor comes after it,
    //  as in Keras, whose 0-based step reaches decay_steps only then.
    ps_lr_schedule_t sc = { .kind = PS_LR_COSINE, .alpha = 0.1 };
    s_assert_near (ps_lr_at (&sc, 0.1, 1, 10, 100), 0.1);
    //  Halfway, cos (pi / 2) = 0: 0.1 * (0.9 * 0.5 + 0.1) = 0.055.
    s_assert_near (ps_lr_at (&sc, 0.1, 51, 10, 100), 0.055);
    //  A quarter of the way: 0.1 * (0.9 * 0.5 * (1 + cos (pi / 4)) + 0.1).
    s_assert_near (ps_lr_at (&sc, 0.1, 26, 10, 100), 0.08681980515339464);
    //  Past the end, at the floor 0.1 * 0.1.
    s_assert_near (ps_lr_at (&sc, 0.1, 101, 10, 100), 0.01);
    s_assert_near (ps_lr_at (&sc, 0.1, 500, 10, 100), 0.01);
    s_assert_formula (&sc, 0.1, 10, 100);
    //  A run of 101 steps decays over 101: halfway is no longer step 51.
    s_assert_near (ps_lr_at (&sc, 0.1, 51, 10, 101),
                   0.1 * (0.9 * 0.5 * (1 + cos (M_PI * 50.0 / 101.0)) + 0.1));
    s_assert_formula (&sc, 0.1, 10, 101);
    //  Without a floor the rate reaches 0.
    sc.alpha = 0;
    s_assert_near (ps_lr_at (&sc, 0.1, 51, 10, 100), 0.05);
    assert_true (fabs (ps_lr_at (&sc, 0.1, 101, 10, 100)) < 1e-17);
    s_assert_formula (&sc, 0.1, 10, 100);

    //  A warm-up of 10 steps over a run of 110: the ramp, then the decay
    //  over D' = 100 steps from step 11.
    sc.alpha = 0.1;
    sc.warmup_steps = 10;
    s_assert_near (ps_lr_at (&sc, 0.1, 5, 10, 110), 0.05);
    s_assert_near (ps_lr_at (&sc, 0.1, 10, 10, 110), 0.1);
    s_assert_near (ps_lr_at (&sc, 0.1, 11, 10, 110), 0.1);
    s_assert_near (ps_lr_at (&sc, 0.1, 61, 10, 110), 0.055);
    s_assert_near (ps_lr_at (&sc, 0.1, 111, 10, 110), 0.01);
    s_assert_formula (&sc, 0.1, 10, 110);

    //  decay_steps shorter than the run: the floor after it.
    sc.warmup_steps = 0;
    sc.decay_steps = 50;
    s_assert_near (ps_lr_at (&sc, 0.1, 26, 10, 1000), 0.055);
    s_assert_near (ps_lr_at (&sc, 0.1, 51, 10, 1000), 0.01);
    s_assert_near (ps_lr_at (&sc, 0.1, 900, 10, 1000), 0.01);
    s_assert_formula (&sc, 0.1, 10, 200);
    //  A warm-up as long as the decay leaves D' = 1.
    sc.warmup_steps = 60;
    s_assert_near (ps_lr_at (&sc, 0.1, 61, 10, 1000), 0.1);
    s_assert_near (ps_lr_at (&sc, 0.1, 62, 10, 1000), 0.01);
    s_assert_formula (&sc, 0.1, 10, 200);
    //  A run of 0 steps divides by nothing.
    sc.warmup_steps = 0;
    sc.decay_steps = 0;
    s_assert_near (ps_lr_at (&sc, 0.1, 1, 10, 0), 0.1);
    s_assert_near (ps_lr_at (&sc, 0.1, 2, 10, 0), 0.01);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_defaults, s_setup, harness_dir_teardown),
        cmocka_unit_test (test_schema),
        cmocka_unit_test_setup_teardown (test_full_file, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_overlay, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_bad_json, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_too_large, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_unknown_key, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_wrong_type, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_schema_counts, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_out_of_range, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_bad_enum, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_piecewise, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_between_keys, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_missing_file, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_not_regular, s_setup, harness_dir_teardown),
        cmocka_unit_test (test_load_json_source),
        cmocka_unit_test (test_validate),
        cmocka_unit_test_setup_teardown (test_round_trip, s_setup, harness_dir_teardown),
        cmocka_unit_test (test_example),
        cmocka_unit_test (test_lr_constant),
        cmocka_unit_test (test_lr_piecewise),
        cmocka_unit_test (test_lr_cosine),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
