//  Unit tests for the refusals of bad job files (coordinator/ps_job.c):
//  every kind of error (bad JSON, numbers beyond what JSON is read into,
//  unknown keys, wrong types, what JSON Schema counts against what a field
//  holds, values out of range, bad enum values, the piecewise arrays'
//  lengths and order), each with its code, a message naming the file and
//  the key, and the job left as it was. Job files are written into a
//  mkdtemp directory under /tmp, removed afterwards (harness_job.h).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "harness_job.h"
#include "ps_job.h"

//  Loading text from a file fails with code; the message names the file
//  and holds each of the fragments given (NULL-terminated), and the job is
//  left exactly as it was.
static void
s_assert_fails (harness_job_fixture_t *fx, const char *text, int code, ...)
{
    ps_job_t job;
    ps_job_default (&job, 2);
    ps_job_t before;
    memcpy (&before, &job, sizeof job);
    const char *path = harness_job_write (fx, "bad.json", text);
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
    harness_job_fixture_t *fx = *state;
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
    harness_job_fixture_t *fx = *state;
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
    harness_job_fixture_t *fx = *state;
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
    harness_job_fixture_t *fx = *state;
    //  The whole message, once.
    ps_job_t job;
    ps_job_default (&job, 2);
    const char *path = harness_job_write (fx, "fast.json", "{\"optimizer\": {\"lr\": \"fast\"}}");
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
    harness_job_fixture_t *fx = *state;
    ps_job_t job;
    ps_job_default (&job, 2);
    harness_job_load (&job, harness_job_write (fx, "real.json",
                                               "{\"epochs\": 7.0, \"seed\": 1e3}"));
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
    harness_job_load (&job, harness_job_write (fx, "wide.json", text));
    assert_int_equal (strlen (job.data_dir), 1022);
}

static void
test_out_of_range (void **state)
{
    harness_job_fixture_t *fx = *state;
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
    harness_job_load (&job, harness_job_write (fx, "max_size.json",
                                               "{\"partitioner\": {\"kind\": \"max_size\", "
                                               "\"max_shard_bytes\": 4096, \"max_shards\": 0}}"));
    assert_int_equal (job.partitioner.max_shards, 0);

    //  ssp's staleness: a whole number from 0 (lockstep) to 2147483647
    //  (unbounded, as async); the word is the command line's, not the file's.
    s_assert_fails (fx, "{\"mode\": \"ssp\", \"staleness\": -1}", PS_EINVAL,
                    "at /staleness: expected an integer in 0 .. 2147483647, got -1", NULL);
    s_assert_fails (fx, "{\"staleness\": \"unbounded\"}", PS_EINVAL, "at /staleness", NULL);
    harness_job_load (&job, harness_job_write (fx, "ssp.json",
                                               "{\"mode\": \"ssp\", \"staleness\": 0}"));
    assert_int_equal (job.mode, PS_MODE_SSP);
    assert_int_equal (job.staleness, 0);
}

static void
test_bad_enum (void **state)
{
    harness_job_fixture_t *fx = *state;
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
    harness_job_fixture_t *fx = *state;
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
    harness_job_load (&job, harness_job_write (fx, "sixteen.json",
                                               "{\"lr_schedule\": {\"kind\": \"piecewise\", "
                                               "\"boundaries\": "
                                               "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16], "
                                               "\"values\": "
                                               "[17,16,15,14,13,12,11,10,9,8,7,6,5,4,3,2,1]}}"));
    assert_int_equal (job.lr_schedule.nboundaries, 16);
    assert_true (job.lr_schedule.values [16] == 1.0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_bad_json, harness_job_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_too_large, harness_job_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_unknown_key, harness_job_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_wrong_type, harness_job_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_schema_counts, harness_job_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_out_of_range, harness_job_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_bad_enum, harness_job_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_piecewise, harness_job_setup, harness_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
