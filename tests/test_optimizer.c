//  Unit tests for ps_optimizer. Every rule is checked against a reference
//  written here in double precision straight from the formulas in
//  ps_optimizer.h, without calling the library, over many steps of random
//  gradients, with and without weight decay and clipping. A hand-computed
//  Adam step pins the absolute values, and the configuration checks are
//  exercised field by field.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness_rand.h"
#include "ps_optimizer.h"

//  An odd size, so that the vector loops also run their scalar remainders.
#define S_N      1037
#define S_STEPS  120

//  A float uniform in [-scale, scale).
static float
s_uniform (uint64_t *state, double scale)
{
    double u = harness_unit (state);
    return (float) ((2 * u - 1) * scale);
}

//  The reference state: parameters and slots in double.
typedef struct {
    double p [S_N];
    double s0 [S_N];
    double s1 [S_N];
    int value_clipped;      //  elements clamped by clip_value, all steps
    int norm_clipped;       //  steps whose gradient norm exceeded clip_norm
} s_ref_t;

static void
s_ref_step (const ps_opt_config_t *cfg, s_ref_t *ref, const float *grad, uint64_t t)
{
    double g [S_N];
    for (int i = 0; i < S_N; i++) {
        g [i] = grad [i];
        if (cfg->clip_value > 0 && fabs (g [i]) > cfg->clip_value) {
            g [i] = g [i] > 0 ? cfg->clip_value : -cfg->clip_value;
            ref->value_clipped++;
        }
    }
    if (cfg->clip_norm > 0) {
        double sum = 0;
        for (int i = 0; i < S_N; i++)
            sum += g [i] * g [i];
        double norm = sqrt (sum);
        if (norm > cfg->clip_norm) {
            ref->norm_clipped++;
            for (int i = 0; i < S_N; i++)
                g [i] *= cfg->clip_norm / norm;
        }
    }
    double lr = cfg->lr;
    for (int i = 0; i < S_N; i++) {
        double *p = &ref->p [i];
        *p -= lr * cfg->weight_decay * *p;
        switch (cfg->kind) {
            case PS_OPT_SGD:
                *p -= lr * g [i];
                break;
            case PS_OPT_MOMENTUM: {
                double *v = &ref->s0 [i];
                *v = cfg->momentum * *v - lr * g [i];
                if (cfg->nesterov)
                    *p += cfg->momentum * *v - lr * g [i];
                else
                    *p += *v;
                break;
            }
            case PS_OPT_ADAGRAD: {
                double *a = &ref->s0 [i];
                *a += g [i] * g [i];
                *p -= lr * g [i] / sqrt (*a + cfg->epsilon);
                break;
            }
            case PS_OPT_ADAM: {
                double *m = &ref->s0 [i];
                double *v = &ref->s1 [i];
                *m += (g [i] - *m) * (1 - cfg->beta1);
                *v += (g [i] * g [i] - *v) * (1 - cfg->beta2);
                double alpha = lr * sqrt (1 - pow (cfg->beta2, (double) t))
                                  / (1 - pow (cfg->beta1, (double) t));
                *p -= alpha * *m / (sqrt (*v) + cfg->epsilon);
                break;
            }
        }
    }
}

//  The largest error of got against want, relative to the largest |want|
//  (but never to less than 1e-3). A per-element relative error would be
//  meaningless for values crossing zero: there the float rounding of the
//  O(1) terms that cancel dominates.
static double
s_rel_error (const float *got, const double *want, size_t n)
{
    double worst = 0, scale = 1e-3;
    for (size_t i = 0; i < n; i++) {
        worst = fmax (worst, fabs (got [i] - want [i]));
        scale = fmax (scale, fabs (want [i]));
    }
    return worst / scale;
}

//  Run S_STEPS updates of cfg from the same random start in the library and
//  in the reference, and compare parameters and slots after every step.
//  The reference's final state is left in *ref for the caller's clipping
//  checks.
static void
s_compare (const ps_opt_config_t *cfg, const char *label, s_ref_t *ref)
{
    static float p [S_N], s0 [S_N], s1 [S_N], grad [S_N], grad_copy [S_N];
    float *slots [PS_OPT_MAX_SLOTS] = { s0, s1 };
    uint64_t rng = 2024;
    memset (ref, 0, sizeof *ref);
    for (int i = 0; i < S_N; i++) {
        p [i] = s_uniform (&rng, 1.0);
        ref->p [i] = p [i];
        ref->s0 [i] = cfg->kind == PS_OPT_ADAGRAD ? cfg->initial_accumulator : 0;
    }
    ps_opt_init_slots (cfg, slots, S_N);
    int slot_count = ps_opt_slot_count (cfg->kind);
    for (uint64_t t = 1; t <= S_STEPS; t++) {
        for (int i = 0; i < S_N; i++)
            grad [i] = s_uniform (&rng, 2.0);
        memcpy (grad_copy, grad, sizeof grad);
        ps_opt_apply (cfg, p, grad, slots, S_N, t);
        assert_memory_equal (grad, grad_copy, sizeof grad);
        s_ref_step (cfg, ref, grad, t);

        double errors [3] = {
            s_rel_error (p, ref->p, S_N),
            slot_count > 0 ? s_rel_error (s0, ref->s0, S_N) : 0,
            slot_count > 1 ? s_rel_error (s1, ref->s1, S_N) : 0,
        };
        for (int e = 0; e < 3; e++)
            if (!(errors [e] < 1e-4)) {
                print_error ("%s: step %llu: %s relative error %g, expected < 1e-4\n",
                             label, (unsigned long long) t,
                             e == 0 ? "params" : e == 1 ? "slot 0" : "slot 1", errors [e]);
                fail ();
            }
    }
    //  The parameters must actually have moved, or the comparison proves
    //  nothing.
    double moved = 0;
    uint64_t start = 2024;
    for (int i = 0; i < S_N; i++)
        moved = fmax (moved, fabs (ref->p [i] - s_uniform (&start, 1.0)));
    assert_true (moved > 1e-3);
}

//  The five rules under test, each with its Keras defaults.
static void
s_configs (ps_opt_config_t configs [5], const char *labels [5])
{
    ps_opt_config_default (&configs [0], PS_OPT_SGD);
    ps_opt_config_default (&configs [1], PS_OPT_MOMENTUM);
    ps_opt_config_default (&configs [2], PS_OPT_MOMENTUM);
    configs [2].nesterov = true;
    ps_opt_config_default (&configs [3], PS_OPT_ADAGRAD);
    ps_opt_config_default (&configs [4], PS_OPT_ADAM);
    labels [0] = "sgd";
    labels [1] = "momentum";
    labels [2] = "nesterov";
    labels [3] = "adagrad";
    labels [4] = "adam";
}

static void
test_rules_plain (void **state)
{
    (void) state;
    ps_opt_config_t configs [5];
    const char *labels [5];
    s_configs (configs, labels);
    static s_ref_t ref;
    for (int k = 0; k < 5; k++) {
        assert_int_equal (ps_opt_config_validate (&configs [k], NULL), PS_OK);
        s_compare (&configs [k], labels [k], &ref);
        assert_int_equal (ref.value_clipped + ref.norm_clipped, 0);
    }
}

static void
test_rules_decay_and_clip_value (void **state)
{
    (void) state;
    ps_opt_config_t configs [5];
    const char *labels [5];
    s_configs (configs, labels);
    static s_ref_t ref;
    for (int k = 0; k < 5; k++) {
        configs [k].weight_decay = 0.01;
        configs [k].clip_value = 0.5;
        assert_int_equal (ps_opt_config_validate (&configs [k], NULL), PS_OK);
        s_compare (&configs [k], labels [k], &ref);
        //  Gradients in [-2, 2) exceed 0.5 three times out of four.
        assert_true (ref.value_clipped > S_STEPS * S_N / 2);
    }
}

static void
test_rules_clip_norm (void **state)
{
    (void) state;
    ps_opt_config_t configs [5];
    const char *labels [5];
    s_configs (configs, labels);
    static s_ref_t ref;
    for (int k = 0; k < 5; k++) {
        configs [k].clip_norm = 1.0;
        assert_int_equal (ps_opt_config_validate (&configs [k], NULL), PS_OK);
        s_compare (&configs [k], labels [k], &ref);
        //  The norm of 1037 gradients in [-2, 2) is about 37.
        assert_int_equal (ref.norm_clipped, S_STEPS);
    }
}

static void
test_adam_by_hand (void **state)
{
    (void) state;
    //  One step from p = 1 with g = 0.5 and the defaults:
    //    m = 0 + (0.5 - 0) * 0.1          = 0.05
    //    v = 0 + (0.25 - 0) * 0.001       = 0.00025,  sqrt (v) = 0.0158113883
    //    alpha = 0.001 * sqrt (1 - 0.999) / (1 - 0.9) = 0.000316227766
    //    m / (sqrt (v) + 1e-7)            = 3.16225766
    //    p = 1 - 0.000316227766 * 3.16225766 = 0.999000006325
    //  which is 1 - lr within epsilon's effect, as Adam's first step is.
    ps_opt_config_t cfg;
    ps_opt_config_default (&cfg, PS_OPT_ADAM);
    float p = 1.0f, g = 0.5f, m, v;
    float *slots [2] = { &m, &v };
    ps_opt_init_slots (&cfg, slots, 1);
    assert_true (m == 0.0f && v == 0.0f);
    ps_opt_apply (&cfg, &p, &g, slots, 1, 1);
    assert_true (fabs (p - 0.999000006325) < 1e-6);
    assert_true (fabs (m - 0.05) < 1e-8);
    assert_true (fabs (v - 0.00025) < 1e-9);
    assert_true (g == 0.5f);
}

static void
test_defaults_and_slots (void **state)
{
    (void) state;
    ps_opt_config_t cfg;
    ps_opt_config_default (&cfg, PS_OPT_SGD);
    assert_true (cfg.lr == 0.01 && cfg.weight_decay == 0 && cfg.clip_value == 0
                 && cfg.clip_norm == 0 && !cfg.nesterov);
    ps_opt_config_default (&cfg, PS_OPT_MOMENTUM);
    assert_true (cfg.lr == 0.01 && cfg.momentum == 0.9);
    ps_opt_config_default (&cfg, PS_OPT_ADAGRAD);
    assert_true (cfg.lr == 0.001 && cfg.initial_accumulator == 0.1 && cfg.epsilon == 1e-7);
    ps_opt_config_default (&cfg, PS_OPT_ADAM);
    assert_true (cfg.lr == 0.001 && cfg.beta1 == 0.9 && cfg.beta2 == 0.999
                 && cfg.epsilon == 1e-7);

    assert_int_equal (ps_opt_slot_count (PS_OPT_SGD), 0);
    assert_int_equal (ps_opt_slot_count (PS_OPT_MOMENTUM), 1);
    assert_int_equal (ps_opt_slot_count (PS_OPT_ADAGRAD), 1);
    assert_int_equal (ps_opt_slot_count (PS_OPT_ADAM), 2);
    assert_true (ps_opt_slot_count (PS_OPT_ADAM) <= PS_OPT_MAX_SLOTS);

    float acc [5];
    float *slots [1] = { acc };
    ps_opt_config_default (&cfg, PS_OPT_ADAGRAD);
    ps_opt_init_slots (&cfg, slots, 5);
    for (int i = 0; i < 5; i++)
        assert_true (acc [i] == 0.1f);
}

static void
test_names (void **state)
{
    (void) state;
    const ps_opt_kind_t kinds [] = { PS_OPT_SGD, PS_OPT_MOMENTUM, PS_OPT_ADAGRAD, PS_OPT_ADAM };
    for (int k = 0; k < 4; k++) {
        ps_opt_kind_t parsed;
        assert_int_equal (ps_opt_kind_parse (ps_opt_kind_name (kinds [k]), &parsed, NULL), PS_OK);
        assert_int_equal (parsed, kinds [k]);
    }
    assert_string_equal (ps_opt_kind_name (PS_OPT_ADAGRAD), "adagrad");
    ps_error_t err;
    ps_opt_kind_t parsed;
    assert_int_equal (ps_opt_kind_parse ("rmsprop", &parsed, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "rmsprop"));
}

//  Set one field of a default configuration of kind to a bad value and
//  check that validation names that field.
static void
s_expect_bad (ps_opt_kind_t kind, const char *field, double bad)
{
    ps_opt_config_t cfg;
    ps_opt_config_default (&cfg, kind);
    double *slot =
        strcmp (field, "lr") == 0 ? &cfg.lr :
        strcmp (field, "momentum") == 0 ? &cfg.momentum :
        strcmp (field, "beta1") == 0 ? &cfg.beta1 :
        strcmp (field, "beta2") == 0 ? &cfg.beta2 :
        strcmp (field, "epsilon") == 0 ? &cfg.epsilon :
        strcmp (field, "initial_accumulator") == 0 ? &cfg.initial_accumulator :
        strcmp (field, "weight_decay") == 0 ? &cfg.weight_decay :
        strcmp (field, "clip_value") == 0 ? &cfg.clip_value : &cfg.clip_norm;
    *slot = bad;
    ps_error_t err;
    int rc = ps_opt_config_validate (&cfg, &err);
    if (rc != PS_EINVAL || !strstr (err.msg, field)) {
        print_error ("%s = %g for %s: rc %d, message '%s'\n", field, bad,
                     ps_opt_kind_name (kind), rc, rc ? err.msg : "");
        fail ();
    }
}

static void
test_validate (void **state)
{
    (void) state;
    for (ps_opt_kind_t kind = PS_OPT_SGD; kind <= PS_OPT_ADAM; kind++) {
        ps_opt_config_t cfg;
        ps_opt_config_default (&cfg, kind);
        assert_int_equal (ps_opt_config_validate (&cfg, NULL), PS_OK);
        s_expect_bad (kind, "lr", 0);
        s_expect_bad (kind, "lr", -0.1);
        s_expect_bad (kind, "lr", NAN);
        s_expect_bad (kind, "lr", INFINITY);
        s_expect_bad (kind, "weight_decay", -0.01);
        s_expect_bad (kind, "weight_decay", NAN);
        s_expect_bad (kind, "clip_value", -1);
        s_expect_bad (kind, "clip_value", INFINITY);
        s_expect_bad (kind, "clip_norm", -1);
        s_expect_bad (kind, "clip_norm", NAN);
    }
    s_expect_bad (PS_OPT_MOMENTUM, "momentum", 1.0);
    s_expect_bad (PS_OPT_MOMENTUM, "momentum", -0.1);
    s_expect_bad (PS_OPT_MOMENTUM, "momentum", NAN);
    s_expect_bad (PS_OPT_ADAM, "beta1", 1.0);
    s_expect_bad (PS_OPT_ADAM, "beta1", -0.5);
    s_expect_bad (PS_OPT_ADAM, "beta2", 1.0);
    s_expect_bad (PS_OPT_ADAM, "beta2", NAN);
    s_expect_bad (PS_OPT_ADAM, "epsilon", 0);
    s_expect_bad (PS_OPT_ADAM, "epsilon", -1e-7);
    s_expect_bad (PS_OPT_ADAGRAD, "epsilon", 0);
    s_expect_bad (PS_OPT_ADAGRAD, "initial_accumulator", -0.1);
    s_expect_bad (PS_OPT_ADAGRAD, "initial_accumulator", INFINITY);

    //  The boundaries that are allowed.
    ps_opt_config_t cfg;
    ps_opt_config_default (&cfg, PS_OPT_MOMENTUM);
    cfg.momentum = 0;
    assert_int_equal (ps_opt_config_validate (&cfg, NULL), PS_OK);
    ps_opt_config_default (&cfg, PS_OPT_ADAGRAD);
    cfg.initial_accumulator = 0;
    assert_int_equal (ps_opt_config_validate (&cfg, NULL), PS_OK);

    ps_error_t err;
    cfg.kind = (ps_opt_kind_t) 9;
    assert_int_equal (ps_opt_config_validate (&cfg, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "kind"));
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_rules_plain),
        cmocka_unit_test (test_rules_decay_and_clip_value),
        cmocka_unit_test (test_rules_clip_norm),
        cmocka_unit_test (test_adam_by_hand),
        cmocka_unit_test (test_defaults_and_slots),
        cmocka_unit_test (test_names),
        cmocka_unit_test (test_validate),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
