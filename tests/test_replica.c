//  Unit tests for the mirrored replica (worker/ps_replica.c), against a
//  ps-server's own code: every update is run through one ps_partition per
//  variable (holding all its rows) as well, and the values, slots and files
//  must come out bitwise the same, for every optimizer with weight decay
//  and both kinds of clipping. One Adam update is checked against a float64
//  computation written out here. Then the bookkeeping (duplicates, invalid
//  ids, all-or-nothing), the checksum, the snapshot files (byte for byte
//  what a server writes; load refusing missing, torn, misshapen and partial
//  files without changing anything) and the packed state (every truncation
//  and every flipped byte refused, changing nothing).
//
//  A tiny convolutional model keeps most cases fast; the built-in "cnn"
//  model is used for the initial values and a save/load round trip.
//
//  This file is longer than the project's 800 lines on purpose: its cases
//  check one object, the replica (its optimizer, files and state transfer),
//  against the same ps_partition reference and tiny model.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "harness.h"
#include "harness_case.h"
#include "harness_rand.h"
#include "ps_bytes.h"
#include "ps_mix.h"
#include "ps_model.h"
#include "ps_partition.h"
#include "ps_replica.h"
#include "ps_snapshot.h"

//  Packed state layout, from schemas/snapshot.md ("Replica state").
#define PACK_OFF_FORMAT      8
#define PACK_OFF_NVARS      12
#define PACK_OFF_COUNT      16
#define PACK_OFF_KIND       24
#define PACK_OFF_SLOTS      32
#define PACK_OFF_LR         40
#define PACK_OFF_LEDGER_LEN 112
#define PACK_HEADER         120
#define PACK_VAR             32

//  conv2d/kernel [3,3,1,2] = 18, conv2d/bias [2]; flatten 3*3*2 = 18;
//  dense/kernel [18,3] = 54, dense/bias [3]: 77 floats in 4 variables.
static const char *s_tiny_spec =
    "{\"name\": \"tiny\", \"input_shape\": [5, 5, 1], \"layers\": ["
    "{\"type\": \"Conv2D\", \"filters\": 2, \"kernel_size\": 3, \"activation\": \"relu\"},"
    "{\"type\": \"Flatten\"},"
    "{\"type\": \"Dense\", \"units\": 3}]}";

#define TINY_COUNT  77
#define TINY_VARS    4

//  ---------------------------------------------------------------------
//  Helpers

//  Uniform in [-scale, scale).
static void
s_fill (float *out, size_t n, float scale, uint64_t *seed)
{
    for (size_t i = 0; i < n; i++)
        out [i] = scale * ((float) (harness_lcg (seed) % 2000001) / 1e6f - 1.0f);
}

static ps_model_t *
s_tiny (void)
{
    ps_error_t err = { 0 };
    ps_model_t *model = ps_model_parse (s_tiny_spec, "tiny", &err);
    if (!model)
        fail_msg ("tiny model refused: %s", err.msg);
    assert_int_equal (ps_model_param_count (model), TINY_COUNT);
    assert_int_equal (ps_model_variable_count (model), TINY_VARS);
    return model;
}

static ps_model_t *
s_cnn (void)
{
    ps_error_t err = { 0 };
    ps_model_t *model = ps_model_load ("cnn", &err);
    if (!model)
        fail_msg ("cnn refused: %s", err.msg);
    return model;
}

static ps_replica_t *
s_replica (const ps_model_t *model, uint64_t seed, const ps_opt_config_t *opt)
{
    ps_error_t err = { 0 };
    ps_replica_t *replica = ps_replica_new (model, seed, opt, &err);
    if (!replica)
        fail_msg ("replica refused: %s", err.msg);
    return replica;
}

//  One partition per variable holding all of its rows, created as the
//  coordinator has the servers create them (ps_coord.c s_setup,
//  ps_plan_client): the variable's initializer with seed
//  ps_model_variable_seed (seed, v).
static ps_partition_t **
s_partitions (const ps_model_t *model, uint64_t seed, const ps_opt_config_t *opt)
{
    int nvars = ps_model_variable_count (model);
    ps_partition_t **parts = calloc ((size_t) nvars, sizeof *parts);
    assert_non_null (parts);
    for (int v = 0; v < nvars; v++) {
        const ps_variable_t *var = ps_model_variable (model, v);
        ps_init_t init = var->init;
        init.seed = ps_model_variable_seed (seed, v);
        ps_error_t err = { 0 };
        parts [v] = ps_partition_new (var->name, 0, &var->shape, 0, var->shape.dims [0],
                                      &init, opt, &err);
        if (!parts [v])
            fail_msg ("partition refused: %s", err.msg);
    }
    return parts;
}

static void
s_partitions_destroy (const ps_model_t *model, ps_partition_t ***parts_p)
{
    for (int v = 0; v < ps_model_variable_count (model); v++)
        ps_partition_destroy (&(*parts_p) [v]);
    free (*parts_p);
    *parts_p = NULL;
}

//  Push each variable's slice of grad to its partition for step.
static void
s_push (const ps_model_t *model, ps_partition_t **parts, uint64_t step, const float *grad,
        int expect)
{
    for (int v = 0; v < ps_model_variable_count (model); v++) {
        const ps_variable_t *var = ps_model_variable (model, v);
        uint64_t version;
        ps_error_t err = { 0 };
        int rc = ps_partition_push (parts [v], step, grad + var->offset, NULL, &version, &err);
        if (rc != expect)
            fail_msg ("push of step %llu returned %d (%s), expected %d",
                      (unsigned long long) step, rc, err.msg, expect);
    }
}

//  The partitions' values, pulled into one flat vector.
static float *
s_pull (const ps_model_t *model, ps_partition_t **parts)
{
    float *values = malloc (ps_model_param_count (model) * sizeof (float));
    assert_non_null (values);
    for (int v = 0; v < ps_model_variable_count (model); v++) {
        uint64_t version;
        ps_partition_pull (parts [v], values + ps_model_variable (model, v)->offset, &version);
    }
    return values;
}

static void
s_assert_values_match (const ps_model_t *model, ps_partition_t **parts, ps_replica_t *replica)
{
    float *values = s_pull (model, parts);
    size_t n = ps_model_param_count (model);
    assert_int_equal (ps_replica_count (replica), n);
    assert_memory_equal (values, ps_replica_params (replica), n * sizeof (float));
    free (values);
}

static void
s_apply_ok (ps_replica_t *replica, const float *grad, const uint64_t *steps, size_t n)
{
    ps_error_t err = { 0 };
    int rc = ps_replica_apply (replica, grad, steps, n, &err);
    if (rc != PS_OK)
        fail_msg ("apply returned %d: %s", rc, err.msg);
}

static void
s_assert_same_file (const char *a, const char *b)
{
    size_t alen, blen;
    uint8_t *adata = harness_slurp (a, &alen);
    uint8_t *bdata = harness_slurp (b, &blen);
    if (alen != blen)
        fail_msg ("%s has %zu bytes, %s %zu", a, alen, b, blen);
    assert_memory_equal (adata, bdata, alen);
    free (adata);
    free (bdata);
}

//  The path of variable v's file (partition 0) in dir.
static void
s_var_file (const ps_model_t *model, int v, const char *dir, char *path, size_t len)
{
    char file [512];
    assert_int_equal (ps_snapshot_filename (ps_model_variable (model, v)->name, 0, file,
                                            sizeof file), PS_OK);
    snprintf (path, len, "%s/%s", dir, file);
}

static void
s_save_ok (const ps_replica_t *replica, const char *dir)
{
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    ps_error_t err = { 0 };
    if (ps_replica_save (replica, dir, &files, &nfiles, &err))
        fail_msg ("save failed: %s", err.msg);
    free (files);
}

//  Rewrite the CRC-32 trailer of a packed state after a deliberate edit,
//  so that the edit reaches the field checks.
static void
s_fix_crc (uint8_t *buf, size_t len)
{
    uint32_t crc = (uint32_t) crc32 (crc32 (0, Z_NULL, 0), buf, (uInt) (len - 4));
    ps_put_u32 (buf + len - 4, crc);
}

//  The optimizer configurations every comparison runs: each kind, plain
//  and with decoupled weight decay and clipping by norm and by value.
static size_t
s_configs (ps_opt_config_t *configs)
{
    size_t n = 0;
    ps_opt_config_default (&configs [n], PS_OPT_SGD);
    configs [n++].lr = 0.1;
    ps_opt_config_default (&configs [n], PS_OPT_SGD);
    configs [n].weight_decay = 0.01;
    configs [n++].clip_norm = 0.5;
    ps_opt_config_default (&configs [n++], PS_OPT_MOMENTUM);
    ps_opt_config_default (&configs [n], PS_OPT_MOMENTUM);
    configs [n].nesterov = true;
    configs [n].clip_value = 0.1;
    configs [n++].weight_decay = 0.02;
    ps_opt_config_default (&configs [n], PS_OPT_ADAGRAD);
    configs [n].lr = 0.05;
    configs [n++].clip_norm = 0.7;
    ps_opt_config_default (&configs [n], PS_OPT_ADAGRAD);
    configs [n++].weight_decay = 0.004;
    ps_opt_config_default (&configs [n], PS_OPT_ADAM);
    configs [n++].lr = 0.01;
    ps_opt_config_default (&configs [n], PS_OPT_ADAM);
    configs [n].lr = 0.01;
    configs [n].weight_decay = 0.004;
    configs [n].clip_norm = 0.5;
    configs [n++].clip_value = 0.2;
    return n;
}

//  The checksum as schemas/snapshot.md describes it, computed from a packed
//  state (which holds every field it covers), so that the description and
//  the code are held to each other.
static uint64_t
s_documented_checksum (const uint8_t *buf, size_t len)
{
    const uint64_t gamma = 0x9e3779b97f4a7c15ULL;
    uint64_t words [8];
    size_t nwords = 0;
    uint32_t nvars = ps_get_u32 (buf + PACK_OFF_NVARS);
    uint64_t count = ps_get_u64 (buf + PACK_OFF_COUNT);
    uint32_t nslots = ps_get_u32 (buf + PACK_OFF_SLOTS);
    size_t ledger_len = (size_t) ps_get_u64 (buf + PACK_OFF_LEDGER_LEN);
    words [nwords++] = nvars;
    words [nwords++] = count;
    words [nwords++] = ps_get_u32 (buf + PACK_OFF_KIND);
    uint64_t h = 0;
    for (size_t i = 0; i < nwords; i++)
        h = ps_mix64 ((h ^ words [i]) + gamma);
    for (uint32_t v = 0; v < nvars; v++) {
        const uint8_t *entry = buf + PACK_HEADER + PACK_VAR * v;
        h = ps_mix64 ((h ^ ps_get_u64 (entry + 8)) + gamma);
        h = ps_mix64 ((h ^ ps_get_u64 (entry + 16)) + gamma);
    }
    //  Values, slots, then the ledger, each as its length and its bytes.
    const uint8_t *at = buf + PACK_HEADER + PACK_VAR * nvars;
    for (uint32_t section = 0; section <= 1 + nslots; section++) {
        size_t size = section <= nslots ? 4 * (size_t) count : ledger_len;
        h = ps_mix64 ((h ^ (uint64_t) size) + gamma);
        for (size_t i = 0; i < size; i += 8) {
            uint8_t word [8] = { 0 };
            memcpy (word, at + i, size - i < 8 ? size - i : 8);
            h = ps_mix64 ((h ^ ps_get_u64 (word)) + gamma);
        }
        at += size;
    }
    assert_ptr_equal (at, buf + len - 4);
    return h;
}

//  ---------------------------------------------------------------------
//  Initial values

static void
s_check_initial (const ps_model_t *model, uint64_t seed)
{
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    ps_replica_t *replica = s_replica (model, seed, &opt);
    ps_partition_t **parts = s_partitions (model, seed, &opt);
    s_assert_values_match (model, parts, replica);
    assert_int_equal (ps_replica_updates (replica), 0);
    assert_int_equal (ps_replica_duplicates (replica), 0);
    assert_int_equal (ps_ledger_count (ps_replica_ledger (replica)), 0);
    //  Another seed gives other values: the seed is used at all.
    ps_replica_t *other = s_replica (model, seed + 1, &opt);
    assert_memory_not_equal (ps_replica_params (replica), ps_replica_params (other),
                             ps_replica_count (replica) * sizeof (float));
    ps_replica_destroy (&other);
    s_partitions_destroy (model, &parts);
    ps_replica_destroy (&replica);
    assert_null (replica);
    ps_replica_destroy (&replica);
}

static void
test_initial_values (void **state)
{
    (void) state;
    ps_model_t *model = s_tiny ();
    s_check_initial (model, 7);
    ps_model_destroy (&model);
    model = s_cnn ();
    s_check_initial (model, 1);
    ps_model_destroy (&model);
}

static void
test_new_refuses (void **state)
{
    (void) state;
    ps_model_t *model = s_tiny ();
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    opt.beta1 = 1.5;
    ps_error_t err = { 0 };
    assert_null (ps_replica_new (model, 1, &opt, &err));
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "beta1"));
    ps_model_destroy (&model);
}

//  ---------------------------------------------------------------------
//  Updates against the server's partitions

//  Run updates through the replica and the partitions and compare the
//  values after each, then the saved files byte for byte.
static void
s_compare_with_partitions (const ps_model_t *model, const ps_opt_config_t *opt, int updates,
                           uint64_t seed)
{
    ps_replica_t *replica = s_replica (model, seed, opt);
    ps_partition_t **parts = s_partitions (model, seed, opt);
    size_t n = ps_model_param_count (model);
    float *grad = malloc (n * sizeof (float));
    float *copy = malloc (n * sizeof (float));
    assert_non_null (grad);
    assert_non_null (copy);
    uint64_t rng = seed * 31 + 5;
    for (int u = 1; u <= updates; u++) {
        //  Gradients of varying size, so that clipping by norm bites on
        //  some updates and variables and not on others.
        s_fill (grad, n, 0.05f * (float) (1 + u % 4), &rng);
        memcpy (copy, grad, n * sizeof (float));
        uint64_t step = (uint64_t) u;
        s_apply_ok (replica, grad, &step, 1);
        assert_memory_equal (grad, copy, n * sizeof (float));
        s_push (model, parts, step, grad, PS_OK);
        s_assert_values_match (model, parts, replica);
        assert_int_equal (ps_replica_updates (replica), (uint64_t) u);
    }
    //  A repeated step, refused by both.
    uint64_t step = 2;
    assert_int_equal (ps_replica_apply (replica, grad, &step, 1, NULL), PS_DUPLICATE);
    s_push (model, parts, step, grad, PS_DUPLICATE);
    assert_int_equal (ps_replica_duplicates (replica), 1);

    //  The files, slots and counters included, are what the servers write.
    char dir_a [64], dir_b [64];
    harness_tmpdir (dir_a, sizeof dir_a);
    harness_tmpdir (dir_b, sizeof dir_b);
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    ps_error_t err = { 0 };
    if (ps_replica_save (replica, dir_a, &files, &nfiles, &err))
        fail_msg ("save failed: %s", err.msg);
    assert_int_equal (nfiles, (size_t) ps_model_variable_count (model));
    for (int v = 0; v < ps_model_variable_count (model); v++) {
        char file [512], path_a [1024], path_b [1024];
        uint64_t bytes, version;
        uint32_t crc;
        if (ps_partition_save (parts [v], dir_b, file, sizeof file, &bytes, &crc, &version, &err))
            fail_msg ("partition save failed: %s", err.msg);
        assert_string_equal (files [v].file, file);
        assert_string_equal (files [v].var, ps_model_variable (model, v)->name);
        assert_int_equal (files [v].server, -1);
        assert_int_equal (files [v].part, 0);
        assert_int_equal (files [v].bytes, bytes);
        assert_int_equal (files [v].crc, crc);
        assert_int_equal (files [v].version, version);
        assert_int_equal (version, (uint64_t) updates);
        snprintf (path_a, sizeof path_a, "%s/%s", dir_a, file);
        snprintf (path_b, sizeof path_b, "%s/%s", dir_b, file);
        s_assert_same_file (path_a, path_b);
    }
    free (files);
    harness_rmtree (dir_a);
    harness_rmtree (dir_b);
    free (grad);
    free (copy);
    s_partitions_destroy (model, &parts);
    ps_replica_destroy (&replica);
}

static void
test_apply_matches_partitions (void **state)
{
    (void) state;
    ps_model_t *model = s_tiny ();
    ps_opt_config_t configs [16];
    size_t nconfigs = s_configs (configs);
    for (size_t i = 0; i < nconfigs; i++) {
        printf ("  %s%s, weight decay %g, clip norm %g, clip value %g\n",
                ps_opt_kind_name (configs [i].kind), configs [i].nesterov ? " (nesterov)" : "",
                configs [i].weight_decay, configs [i].clip_norm, configs [i].clip_value);
        s_compare_with_partitions (model, &configs [i], 25, 100 + i);
    }
    ps_model_destroy (&model);
    //  The real model, with the full set of features, for a few updates.
    model = s_cnn ();
    s_compare_with_partitions (model, &configs [nconfigs - 1], 4, 3);
    ps_model_destroy (&model);
}

//  A mirrored update of several batches records them all, and updates the
//  values once, as one push of the summed gradient would.
static void
test_apply_several_steps (void **state)
{
    (void) state;
    ps_model_t *model = s_tiny ();
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    ps_replica_t *replica = s_replica (model, 5, &opt);
    ps_partition_t **parts = s_partitions (model, 5, &opt);
    float grad [TINY_COUNT];
    uint64_t rng = 9;
    for (uint64_t u = 0; u < 6; u++) {
        s_fill (grad, TINY_COUNT, 0.1f, &rng);
        uint64_t steps [3] = { 3 * u + 3, 3 * u + 1, 3 * u + 2 };
        s_apply_ok (replica, grad, steps, 3);
        s_push (model, parts, u + 1, grad, PS_OK);
        s_assert_values_match (model, parts, replica);
    }
    const ps_ledger_t *ledger = ps_replica_ledger (replica);
    assert_int_equal (ps_ledger_count (ledger), 18);
    for (uint64_t s = 1; s <= 18; s++)
        assert_true (ps_ledger_contains (ledger, s));
    assert_false (ps_ledger_contains (ledger, 19));
    assert_int_equal (ps_replica_updates (replica), 6);
    s_partitions_destroy (model, &parts);
    ps_replica_destroy (&replica);
    ps_model_destroy (&model);
}

//  Two Adam updates with weight decay and clipping by norm, against the
//  rule of ps_optimizer.h evaluated in double here.
static void
test_adam_by_hand (void **state)
{
    (void) state;
    ps_model_t *model = s_tiny ();
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    opt.lr = 0.01;
    opt.beta1 = 0.8;
    opt.beta2 = 0.99;
    opt.epsilon = 1e-6;
    opt.weight_decay = 0.05;
    opt.clip_norm = 0.3;
    ps_replica_t *replica = s_replica (model, 11, &opt);
    double p [TINY_COUNT], m [TINY_COUNT] = { 0 }, v [TINY_COUNT] = { 0 };
    for (int i = 0; i < TINY_COUNT; i++)
        p [i] = ps_replica_params (replica) [i];
    float grad [TINY_COUNT];
    uint64_t rng = 77;
    for (uint64_t t = 1; t <= 2; t++) {
        s_fill (grad, TINY_COUNT, 0.2f, &rng);
        //  Clipping by norm takes each variable's own norm.
        double scale [TINY_COUNT];
        for (int k = 0; k < TINY_VARS; k++) {
            const ps_variable_t *var = ps_model_variable (model, k);
            double sum = 0;
            for (size_t i = var->offset; i < var->offset + var->count; i++)
                sum += (double) grad [i] * grad [i];
            double norm = sqrt (sum);
            for (size_t i = var->offset; i < var->offset + var->count; i++)
                scale [i] = norm > opt.clip_norm ? opt.clip_norm / norm : 1.0;
        }
        double alpha = opt.lr * sqrt (1 - pow (opt.beta2, (double) t))
                     / (1 - pow (opt.beta1, (double) t));
        for (int i = 0; i < TINY_COUNT; i++) {
            double g = grad [i] * scale [i];
            p [i] -= opt.lr * opt.weight_decay * p [i];
            m [i] = opt.beta1 * m [i] + (1 - opt.beta1) * g;
            v [i] = opt.beta2 * v [i] + (1 - opt.beta2) * g * g;
            p [i] -= alpha * m [i] / (sqrt (v [i]) + opt.epsilon);
        }
        s_apply_ok (replica, grad, &t, 1);
    }
    const float *got = ps_replica_params (replica);
    for (int i = 0; i < TINY_COUNT; i++)
        if (fabs (got [i] - p [i]) > 1e-6 + 1e-5 * fabs (p [i]))
            fail_msg ("element %d is %.9g, expected %.9g", i, got [i], p [i]);
    ps_replica_destroy (&replica);
    ps_model_destroy (&model);
}

//  ---------------------------------------------------------------------
//  Bookkeeping

static void
test_duplicates_and_invalid (void **state)
{
    (void) state;
    ps_model_t *model = s_tiny ();
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_MOMENTUM);
    ps_replica_t *replica = s_replica (model, 2, &opt);
    float grad [TINY_COUNT], before [TINY_COUNT];
    uint64_t rng = 4;
    s_fill (grad, TINY_COUNT, 0.1f, &rng);
    s_apply_ok (replica, grad, (uint64_t []) { 1, 2 }, 2);
    uint64_t checksum = ps_replica_checksum (replica);
    memcpy (before, ps_replica_params (replica), sizeof before);
    const ps_ledger_t *ledger = ps_replica_ledger (replica);

    //  Repeats, alone or with a new step: nothing applied, nothing recorded,
    //  the duplicates counted.
    assert_int_equal (ps_replica_apply (replica, grad, (uint64_t []) { 2 }, 1, NULL), PS_DUPLICATE);
    assert_int_equal (ps_replica_apply (replica, grad, (uint64_t []) { 3, 1 }, 2, NULL),
                      PS_DUPLICATE);
    assert_false (ps_ledger_contains (ledger, 3));
    assert_int_equal (ps_replica_duplicates (replica), 2);
    assert_int_equal (ps_replica_updates (replica), 1);
    assert_int_equal (ps_replica_checksum (replica), checksum);
    assert_memory_equal (ps_replica_params (replica), before, sizeof before);

    //  Invalid ids: refused whole, naming the problem, not counted.
    struct {
        uint64_t steps [3];
        size_t n;
        const char *says;
    } bad [] = {
        { { 0 }, 0, "no step" },
        { { 0 }, 1, "step id 0" },
        { { 4, 0 }, 2, "step id 0" },
        { { 4, 5, 4 }, 3, "listed twice" },
        { { UINT64_MAX }, 1, "18446744073709551615" },
        { { 4, UINT64_C (1) << 40 }, 2, "above the watermark" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        ps_error_t err = { 0 };
        int rc = ps_replica_apply (replica, grad, bad [i].steps, bad [i].n, &err);
        printf ("  refused: %s\n", err.msg);
        assert_int_equal (rc, PS_EINVAL);
        assert_int_equal (err.code, PS_EINVAL);
        if (!strstr (err.msg, bad [i].says))
            fail_msg ("\"%s\" does not say \"%s\"", err.msg, bad [i].says);
        assert_false (ps_ledger_contains (ledger, 4));
        assert_int_equal (ps_replica_checksum (replica), checksum);
        assert_memory_equal (ps_replica_params (replica), before, sizeof before);
    }
    assert_int_equal (ps_replica_duplicates (replica), 2);
    assert_int_equal (ps_ledger_count (ledger), 2);

    //  A gradient holding NaN or an infinity, in any variable: refused
    //  whole, naming the variable, with nothing applied or recorded.
    const float poison [] = { NAN, INFINITY, -INFINITY };
    for (size_t p = 0; p < 3; p++)
        for (size_t at = 0; at < TINY_COUNT; at += TINY_COUNT / 5 + 1) {
            float bad_grad [TINY_COUNT];
            memcpy (bad_grad, grad, sizeof bad_grad);
            bad_grad [at] = poison [p];
            ps_error_t err = { 0 };
            assert_int_equal (ps_replica_apply (replica, bad_grad, (uint64_t []) { 4 }, 1, &err),
                              PS_ENONFINITE);
            assert_non_null (strstr (err.msg, "nothing applied"));
            assert_false (ps_ledger_contains (ledger, 4));
            assert_int_equal (ps_replica_checksum (replica), checksum);
            assert_memory_equal (ps_replica_params (replica), before, sizeof before);
        }
    //  And it still applies new steps.
    s_apply_ok (replica, grad, (uint64_t []) { 4 }, 1);
    assert_int_equal (ps_replica_updates (replica), 2);
    ps_replica_destroy (&replica);
    ps_model_destroy (&model);
}

//  Switching optimizers does what ps_partition_set_optimizer does.
static void
test_set_optimizer (void **state)
{
    (void) state;
    ps_model_t *model = s_tiny ();
    ps_opt_config_t adam, adam2, sgd, bad;
    ps_opt_config_default (&adam, PS_OPT_ADAM);
    adam2 = adam;
    adam2.lr = 0.0005;
    ps_opt_config_default (&sgd, PS_OPT_MOMENTUM);
    bad = sgd;
    bad.lr = -1;
    ps_replica_t *replica = s_replica (model, 8, &adam);
    ps_partition_t **parts = s_partitions (model, 8, &adam);
    float grad [TINY_COUNT];
    uint64_t rng = 6, step = 0;
    for (int phase = 0; phase < 3; phase++) {
        const ps_opt_config_t *opt = phase == 1 ? &adam2 : phase == 2 ? &sgd : &adam;
        ps_error_t err = { 0 };
        assert_int_equal (ps_replica_set_optimizer (replica, opt, &err), PS_OK);
        for (int v = 0; v < TINY_VARS; v++)
            assert_int_equal (ps_partition_set_optimizer (parts [v], opt, &err), PS_OK);
        for (int u = 0; u < 3; u++) {
            s_fill (grad, TINY_COUNT, 0.1f, &rng);
            step++;
            s_apply_ok (replica, grad, &step, 1);
            s_push (model, parts, step, grad, PS_OK);
            s_assert_values_match (model, parts, replica);
        }
    }
    uint64_t checksum = ps_replica_checksum (replica);
    ps_error_t err = { 0 };
    assert_int_equal (ps_replica_set_optimizer (replica, &bad, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "lr"));
    assert_int_equal (ps_replica_checksum (replica), checksum);
    //  The slots and t match the partitions': the files are the same.
    char dir_a [64], dir_b [64];
    harness_tmpdir (dir_a, sizeof dir_a);
    harness_tmpdir (dir_b, sizeof dir_b);
    s_save_ok (replica, dir_a);
    for (int v = 0; v < TINY_VARS; v++) {
        char file [512], path_a [1024], path_b [1024];
        uint64_t bytes, version;
        uint32_t crc;
        assert_int_equal (ps_partition_save (parts [v], dir_b, file, sizeof file, &bytes, &crc,
                                             &version, NULL), PS_OK);
        snprintf (path_a, sizeof path_a, "%s/%s", dir_a, file);
        snprintf (path_b, sizeof path_b, "%s/%s", dir_b, file);
        s_assert_same_file (path_a, path_b);
    }
    harness_rmtree (dir_a);
    harness_rmtree (dir_b);
    s_partitions_destroy (model, &parts);
    ps_replica_destroy (&replica);
    ps_model_destroy (&model);
}

//  ---------------------------------------------------------------------
//  Checksum

static void
test_checksum (void **state)
{
    (void) state;
    ps_model_t *model = s_tiny ();
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    ps_replica_t *a = s_replica (model, 3, &opt);
    ps_replica_t *b = s_replica (model, 3, &opt);
    assert_int_equal (ps_replica_checksum (a), ps_replica_checksum (b));
    float grad [TINY_COUNT];
    uint64_t rng = 12;
    for (uint64_t step = 1; step <= 5; step++) {
        s_fill (grad, TINY_COUNT, 0.1f, &rng);
        s_apply_ok (a, grad, &step, 1);
        s_apply_ok (b, grad, &step, 1);
        assert_int_equal (ps_replica_checksum (a), ps_replica_checksum (b));
    }
    uint64_t checksum = ps_replica_checksum (a);
    //  Not part of it: duplicates (diagnostics) and the optimizer settings
    //  (set from the schedule every step).
    assert_int_equal (ps_replica_apply (a, grad, (uint64_t []) { 1 }, 1, NULL), PS_DUPLICATE);
    ps_opt_config_t slower = opt;
    slower.lr /= 2;
    assert_int_equal (ps_replica_set_optimizer (a, &slower, NULL), PS_OK);
    assert_int_equal (ps_replica_checksum (a), checksum);

    //  One bit of one value, anywhere.
    float *params = ps_replica_params (a);
    for (int i = 0; i < TINY_COUNT; i += 7)
        for (int bit = 0; bit < 32; bit += 5) {
            uint32_t word;
            memcpy (&word, &params [i], 4);
            word ^= UINT32_C (1) << bit;
            memcpy (&params [i], &word, 4);
            assert_int_not_equal (ps_replica_checksum (a), checksum);
            word ^= UINT32_C (1) << bit;
            memcpy (&params [i], &word, 4);
            assert_int_equal (ps_replica_checksum (a), checksum);
        }

    //  One bit of a slot, and one step more in the ledger: edited in the
    //  packed state (the only way in from outside), and unpacked into b.
    uint8_t *buf;
    size_t len;
    ps_replica_pack (a, &buf, &len);
    assert_int_equal (s_documented_checksum (buf, len), checksum);
    uint8_t *edit = malloc (len);
    assert_non_null (edit);
    size_t arrays = PACK_HEADER + PACK_VAR * TINY_VARS;
    for (int slot = 0; slot < 2; slot++) {
        memcpy (edit, buf, len);
        edit [arrays + 4 * TINY_COUNT * (size_t) (1 + slot) + 4 * 40 + 1] ^= 0x10;
        s_fix_crc (edit, len);
        ps_error_t err = { 0 };
        if (ps_replica_unpack (b, edit, len, &err))
            fail_msg ("unpack refused an edited slot: %s", err.msg);
        assert_int_not_equal (ps_replica_checksum (b), checksum);
    }
    //  Steps 1..5 give watermark 6, count 5 and no bitmap word; step 6
    //  joins them.
    size_t ledger_len = (size_t) ps_get_u64 (buf + PACK_OFF_LEDGER_LEN);
    assert_int_equal (ledger_len, 20);
    size_t ledger_at = len - 4 - ledger_len;
    memcpy (edit, buf, len);
    assert_int_equal (ps_get_u64 (edit + ledger_at), 6);
    assert_int_equal (ps_get_u64 (edit + ledger_at + 8), 5);
    ps_put_u64 (edit + ledger_at, 7);
    ps_put_u64 (edit + ledger_at + 8, 6);
    s_fix_crc (edit, len);
    ps_error_t err = { 0 };
    if (ps_replica_unpack (b, edit, len, &err))
        fail_msg ("unpack refused an edited ledger: %s", err.msg);
    assert_true (ps_ledger_contains (ps_replica_ledger (b), 6));
    assert_int_not_equal (ps_replica_checksum (b), checksum);
    assert_int_equal (ps_replica_checksum (b), s_documented_checksum (edit, len));
    //  The unedited state gives the checksum back.
    assert_int_equal (ps_replica_unpack (b, buf, len, NULL), PS_OK);
    assert_int_equal (ps_replica_checksum (b), checksum);
    free (edit);
    free (buf);
    ps_replica_destroy (&a);
    ps_replica_destroy (&b);
    ps_model_destroy (&model);
}

//  ---------------------------------------------------------------------
//  Snapshot files

static void
s_check_round_trip (const ps_model_t *model, int updates)
{
    ps_opt_config_t opt, sgd;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    opt.clip_norm = 1.0;
    ps_opt_config_default (&sgd, PS_OPT_SGD);
    ps_replica_t *a = s_replica (model, 21, &opt);
    size_t n = ps_replica_count (a);
    float *grad = malloc (n * sizeof (float));
    assert_non_null (grad);
    uint64_t rng = 5;
    for (int u = 1; u <= updates; u++) {
        s_fill (grad, n, 0.1f, &rng);
        s_apply_ok (a, grad, (uint64_t []) { 2 * (uint64_t) u, 2 * (uint64_t) u + 1 }, 2);
    }
    assert_int_equal (ps_replica_apply (a, grad, (uint64_t []) { 2 }, 1, NULL), PS_DUPLICATE);
    char dir [64];
    harness_tmpdir (dir, sizeof dir);
    s_save_ok (a, dir);
    //  Loaded into a replica of another seed and optimizer.
    ps_replica_t *b = s_replica (model, 99, &sgd);
    float *params = ps_replica_params (b);
    ps_error_t err = { 0 };
    if (ps_replica_load (b, dir, &err))
        fail_msg ("load failed: %s", err.msg);
    assert_ptr_equal (ps_replica_params (b), params);
    assert_int_equal (ps_replica_checksum (b), ps_replica_checksum (a));
    assert_memory_equal (ps_replica_params (b), ps_replica_params (a), n * sizeof (float));
    assert_int_equal (ps_replica_updates (b), (uint64_t) updates);
    assert_int_equal (ps_replica_duplicates (b), 1);
    assert_true (ps_ledger_equal (ps_replica_ledger (a), ps_replica_ledger (b)));
    //  The loaded optimizer (Adam, with its t) goes on like the original.
    s_fill (grad, n, 0.1f, &rng);
    s_apply_ok (a, grad, (uint64_t []) { 1000 }, 1);
    s_apply_ok (b, grad, (uint64_t []) { 1000 }, 1);
    assert_int_equal (ps_replica_checksum (b), ps_replica_checksum (a));
    harness_rmtree (dir);
    free (grad);
    ps_replica_destroy (&a);
    ps_replica_destroy (&b);
}

static void
test_save_load (void **state)
{
    (void) state;
    ps_model_t *model = s_tiny ();
    s_check_round_trip (model, 6);
    ps_model_destroy (&model);
    model = s_cnn ();
    s_check_round_trip (model, 2);
    ps_model_destroy (&model);
}

//  Load must fail with code, a message naming path, and no change.
static void
s_expect_load_error (ps_replica_t *replica, const char *dir, int code, const char *path)
{
    uint64_t checksum = ps_replica_checksum (replica);
    uint64_t updates = ps_replica_updates (replica);
    ps_error_t err = { 0 };
    int rc = ps_replica_load (replica, dir, &err);
    printf ("  refused: %s\n", err.msg);
    assert_int_equal (rc, code);
    assert_int_equal (err.code, code);
    if (!strstr (err.msg, path))
        fail_msg ("\"%s\" does not name %s", err.msg, path);
    assert_int_equal (ps_replica_checksum (replica), checksum);
    assert_int_equal (ps_replica_updates (replica), updates);
}

//  Write a partition of rows [begin, end) of a variable of shape dims as
//  partition 0 of var into dir.
static void
s_write_partition (const char *dir, const char *var, const int64_t *dims, int rank,
                   int64_t begin, int64_t end, ps_opt_kind_t kind)
{
    ps_shape_t shape;
    assert_int_equal (ps_shape_set (&shape, dims, rank, NULL), PS_OK);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_UNIFORM);
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, kind);
    ps_error_t err = { 0 };
    ps_partition_t *part = ps_partition_new (var, 0, &shape, begin, end, &init, &opt, &err);
    if (!part)
        fail_msg ("partition refused: %s", err.msg);
    char file [512];
    uint64_t bytes, version;
    uint32_t crc;
    assert_int_equal (ps_partition_save (part, dir, file, sizeof file, &bytes, &crc, &version, &err),
                      PS_OK);
    ps_partition_destroy (&part);
}

static void
test_load_errors (void **state)
{
    (void) state;
    ps_model_t *model = s_tiny ();
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    ps_replica_t *source = s_replica (model, 1, &opt);
    ps_replica_t *replica = s_replica (model, 2, &opt);
    float grad [TINY_COUNT];
    uint64_t rng = 8;
    s_fill (grad, TINY_COUNT, 0.1f, &rng);
    s_apply_ok (source, grad, (uint64_t []) { 1 }, 1);
    s_apply_ok (replica, grad, (uint64_t []) { 7, 8 }, 2);
    char dir [64], path [1024];
    harness_tmpdir (dir, sizeof dir);

    //  A missing file.
    s_save_ok (source, dir);
    s_var_file (model, 2, dir, path, sizeof path);
    assert_int_equal (unlink (path), 0);
    s_expect_load_error (replica, dir, PS_ENOTFOUND, path);

    //  A truncated file.
    s_save_ok (source, dir);
    s_var_file (model, 1, dir, path, sizeof path);
    struct stat st;
    assert_int_equal (stat (path, &st), 0);
    assert_int_equal (truncate (path, st.st_size / 2), 0);
    s_expect_load_error (replica, dir, PS_ECORRUPT, path);

    //  A flipped byte in the values.
    s_save_ok (source, dir);
    s_var_file (model, 0, dir, path, sizeof path);
    size_t len;
    uint8_t *data = harness_slurp (path, &len);
    data [len - 20] ^= 1;
    harness_spit (path, data, len);
    free (data);
    s_expect_load_error (replica, dir, PS_ECORRUPT, path);

    //  The wrong shape: dense/bias as [4] instead of [3].
    s_save_ok (source, dir);
    s_var_file (model, 3, dir, path, sizeof path);
    s_write_partition (dir, "dense/bias", (int64_t []) { 4 }, 1, 0, 4, PS_OPT_ADAM);
    s_expect_load_error (replica, dir, PS_ESHAPE, path);

    //  Rows [0, 10) of dense/kernel's 18 only.
    s_save_ok (source, dir);
    s_var_file (model, 2, dir, path, sizeof path);
    s_write_partition (dir, "dense/kernel", (int64_t []) { 18, 3 }, 2, 0, 10, PS_OPT_ADAM);
    s_expect_load_error (replica, dir, PS_ESHAPE, path);

    //  One variable with another optimizer.
    s_save_ok (source, dir);
    s_var_file (model, 1, dir, path, sizeof path);
    s_write_partition (dir, "conv2d/bias", (int64_t []) { 2 }, 1, 0, 2, PS_OPT_MOMENTUM);
    s_expect_load_error (replica, dir, PS_EINVAL, path);

    //  Another variable's file under this one's name.
    s_save_ok (source, dir);
    char other [1024];
    s_var_file (model, 3, dir, path, sizeof path);
    s_var_file (model, 1, dir, other, sizeof other);
    data = harness_slurp (other, &len);
    harness_spit (path, data, len);
    free (data);
    s_expect_load_error (replica, dir, PS_ECORRUPT, path);

    //  After all that, the intact files load.
    s_save_ok (source, dir);
    assert_int_equal (ps_replica_load (replica, dir, NULL), PS_OK);
    assert_int_equal (ps_replica_checksum (replica), ps_replica_checksum (source));
    harness_rmtree (dir);
    ps_replica_destroy (&source);
    ps_replica_destroy (&replica);
    ps_model_destroy (&model);
}

//  Files whose ledgers differ (a step that reached some servers only):
//  the replica keeps the steps every variable applied.
static void
test_load_ledger_intersection (void **state)
{
    (void) state;
    ps_model_t *model = s_tiny ();
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_SGD);
    ps_partition_t **parts = s_partitions (model, 4, &opt);
    float grad [TINY_COUNT];
    uint64_t rng = 3;
    for (uint64_t step = 1; step <= 3; step++) {
        s_fill (grad, TINY_COUNT, 0.1f, &rng);
        s_push (model, parts, step, grad, PS_OK);
    }
    //  Step 4 reaches variable 0 only.
    uint64_t version;
    assert_int_equal (ps_partition_push (parts [0], 4, grad, NULL, &version, NULL), PS_OK);
    char dir [64];
    harness_tmpdir (dir, sizeof dir);
    for (int v = 0; v < TINY_VARS; v++) {
        char file [512];
        uint64_t bytes;
        uint32_t crc;
        assert_int_equal (ps_partition_save (parts [v], dir, file, sizeof file, &bytes, &crc,
                                             &version, NULL), PS_OK);
    }
    ps_replica_t *replica = s_replica (model, 4, &opt);
    ps_error_t err = { 0 };
    if (ps_replica_load (replica, dir, &err))
        fail_msg ("load failed: %s", err.msg);
    const ps_ledger_t *ledger = ps_replica_ledger (replica);
    assert_int_equal (ps_ledger_count (ledger), 3);
    assert_false (ps_ledger_contains (ledger, 4));
    assert_int_equal (ps_replica_updates (replica), 3);
    s_assert_values_match (model, parts, replica);
    //  Step 4 can be applied again.
    s_apply_ok (replica, grad, (uint64_t []) { 4 }, 1);
    harness_rmtree (dir);
    s_partitions_destroy (model, &parts);
    ps_replica_destroy (&replica);
    ps_model_destroy (&model);
}

//  ---------------------------------------------------------------------
//  Packed state

static void
s_expect_unpack_error (ps_replica_t *replica, const uint8_t *buf, size_t len, int code,
                       const char *says)
{
    uint64_t checksum = ps_replica_checksum (replica);
    ps_error_t err = { 0 };
    int rc = ps_replica_unpack (replica, buf, len, &err);
    if (rc != code)
        fail_msg ("unpack of %zu bytes returned %d (%s), expected %d", len, rc, err.msg, code);
    assert_int_equal (err.code, code);
    if (says && !strstr (err.msg, says))
        fail_msg ("\"%s\" does not say \"%s\"", err.msg, says);
    assert_int_equal (ps_replica_checksum (replica), checksum);
}

static void
test_pack_unpack (void **state)
{
    (void) state;
    ps_model_t *model = s_tiny ();
    ps_opt_config_t opt, sgd;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    opt.nesterov = true;
    opt.clip_value = 0.3;
    ps_opt_config_default (&sgd, PS_OPT_SGD);
    ps_replica_t *a = s_replica (model, 1, &opt);
    ps_replica_t *b = s_replica (model, 2, &sgd);
    float grad [TINY_COUNT];
    uint64_t rng = 2;
    for (uint64_t u = 1; u <= 4; u++) {
        s_fill (grad, TINY_COUNT, 0.2f, &rng);
        s_apply_ok (a, grad, (uint64_t []) { u, u + 100 }, 2);
    }
    assert_int_equal (ps_replica_apply (a, grad, (uint64_t []) { 3 }, 1, NULL), PS_DUPLICATE);
    uint8_t *buf;
    size_t len;
    ps_replica_pack (a, &buf, &len);
    //  Header, 4 variables, values and two Adam slots, the ledger (steps
    //  1..4 and 101..104: watermark 5, two words), the trailer.
    assert_int_equal (len, PACK_HEADER + PACK_VAR * TINY_VARS + 3 * 4 * TINY_COUNT + 20 + 16 + 4);
    assert_int_equal (ps_get_u32 (buf + PACK_OFF_NVARS), TINY_VARS);
    assert_int_equal (ps_get_u64 (buf + PACK_OFF_COUNT), TINY_COUNT);
    assert_int_equal (ps_get_u32 (buf + PACK_OFF_KIND), PS_OPT_ADAM);

    float *params = ps_replica_params (b);
    ps_error_t err = { 0 };
    if (ps_replica_unpack (b, buf, len, &err))
        fail_msg ("unpack failed: %s", err.msg);
    assert_ptr_equal (ps_replica_params (b), params);
    assert_int_equal (ps_replica_checksum (b), ps_replica_checksum (a));
    assert_memory_equal (ps_replica_params (b), ps_replica_params (a), sizeof grad);
    assert_int_equal (ps_replica_updates (b), 4);
    assert_int_equal (ps_replica_duplicates (b), 1);
    //  The packed state of the copy is the same bytes, optimizer included.
    uint8_t *again;
    size_t again_len;
    ps_replica_pack (b, &again, &again_len);
    assert_int_equal (again_len, len);
    assert_memory_equal (again, buf, len);
    free (again);

    //  Every truncation, and bytes added.
    ps_replica_t *c = s_replica (model, 3, &opt);
    s_apply_ok (c, grad, (uint64_t []) { 50 }, 1);
    for (size_t cut = 0; cut < len; cut++)
        s_expect_unpack_error (c, buf, cut, PS_ECORRUPT, "replica state");
    uint8_t *edit = malloc (len + 8);
    assert_non_null (edit);
    memcpy (edit, buf, len);
    memset (edit + len, 0, 8);
    s_expect_unpack_error (c, edit, len + 1, PS_ECORRUPT, "replica state");
    s_expect_unpack_error (c, edit, len + 8, PS_ECORRUPT, "replica state");
    //  Every flipped byte, header or not: the checksum catches them all.
    for (size_t i = 0; i < len; i++) {
        memcpy (edit, buf, len);
        edit [i] ^= (uint8_t) (1 + i % 255);
        s_expect_unpack_error (c, edit, len, PS_ECORRUPT, "replica state");
    }

    //  Fields wrong under a good checksum.
    struct {
        size_t offset;
        uint32_t value;
        int code;
        const char *says;
    } fields [] = {
        { PACK_OFF_FORMAT, 2, PS_ECORRUPT, "format version 2" },
        { PACK_OFF_NVARS, 3, PS_ESHAPE, "model \"tiny\"" },
        { PACK_OFF_KIND, 9, PS_ECORRUPT, "optimizer kind 9" },
        { PACK_OFF_KIND, PS_OPT_MOMENTUM, PS_ECORRUPT, "slots" },
        { PACK_OFF_SLOTS, 1, PS_ECORRUPT, "slots" },
        { 28, 2, PS_ECORRUPT, "nesterov" },
        { 36, 1, PS_ECORRUPT, "reserved" },
        { PACK_OFF_LEDGER_LEN, 35, PS_ECORRUPT, "bytes" },
        //  Variable 1's element count 3, total unchanged.
        { PACK_HEADER + PACK_VAR, 3, PS_ESHAPE, "conv2d/bias" },
        //  The ledger's count one short (one more would be a ledger that
        //  also holds step 0).
        { len - 4 - 36 + 8, 7, PS_ECORRUPT, "ledger" },
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields [0]; i++) {
        memcpy (edit, buf, len);
        ps_put_u32 (edit + fields [i].offset, fields [i].value);
        s_fix_crc (edit, len);
        s_expect_unpack_error (c, edit, len, fields [i].code, fields [i].says);
    }
    //  A learning rate out of range.
    memcpy (edit, buf, len);
    double lr = -1;
    uint64_t bits;
    memcpy (&bits, &lr, sizeof bits);
    ps_put_u64 (edit + PACK_OFF_LR, bits);
    s_fix_crc (edit, len);
    s_expect_unpack_error (c, edit, len, PS_ECORRUPT, "lr");
    //  The state of another model.
    ps_model_t *cnn = s_cnn ();
    ps_replica_t *big = s_replica (cnn, 1, &opt);
    uint8_t *big_buf;
    size_t big_len;
    ps_replica_pack (big, &big_buf, &big_len);
    s_expect_unpack_error (c, big_buf, big_len, PS_ESHAPE, "347146");
    free (big_buf);
    ps_replica_destroy (&big);
    ps_model_destroy (&cnn);

    free (edit);
    free (buf);
    ps_replica_destroy (&a);
    ps_replica_destroy (&b);
    ps_replica_destroy (&c);
    ps_model_destroy (&model);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_initial_values),
        cmocka_unit_test (test_new_refuses),
        cmocka_unit_test (test_apply_matches_partitions),
        cmocka_unit_test (test_apply_several_steps),
        cmocka_unit_test (test_adam_by_hand),
        cmocka_unit_test (test_duplicates_and_invalid),
        cmocka_unit_test (test_set_optimizer),
        cmocka_unit_test (test_checksum),
        cmocka_unit_test (test_save_load),
        cmocka_unit_test (test_load_errors),
        cmocka_unit_test (test_load_ledger_intersection),
        cmocka_unit_test (test_pack_unpack),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
