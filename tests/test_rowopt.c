//  Unit tests for the per-row optimizers (common/model/ps_rowopt.c). Each
//  kind is run over many steps of random gradients against a reference
//  written here in double precision straight from the formulas in
//  ps_tablespec.h, without calling the library, and a hand-computed first
//  step pins the absolute values. Adam's t is the row's own count: a row
//  updated at its 1st and 2nd update is corrected as such whatever the
//  global step.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "harness_case.h"
#include "harness_rand.h"
#include "ps_rowopt.h"

//  An odd width, and enough steps for float drift to show if it were
//  there.
#define S_DIM    13
#define S_STEPS  400

typedef struct {
    double w [S_DIM];
    double s0 [S_DIM];
    double s1 [S_DIM];
} s_ref_t;

static void
s_ref_init (s_ref_t *ref, const ps_rowopt_t *opt, const float *w)
{
    for (int j = 0; j < S_DIM; j++) {
        ref->w [j] = w [j];
        ref->s0 [j] = opt->kind == PS_ROWOPT_ADAGRAD ? opt->initial_accumulator : 0.0;
        ref->s1 [j] = opt->kind == PS_ROWOPT_FTRL ? opt->initial_accumulator : 0.0;
    }
}

//  One step of the formulas of ps_tablespec.h, in double.
static void
s_ref_step (s_ref_t *ref, const ps_rowopt_t *opt, const float *g, uint64_t t)
{
    for (int j = 0; j < S_DIM; j++) {
        double gj = g [j];
        switch (opt->kind) {
            case PS_ROWOPT_SGD:
                ref->w [j] -= opt->lr * gj;
                break;
            case PS_ROWOPT_ADAGRAD:
                ref->s0 [j] += gj * gj;
                ref->w [j] -= opt->lr * gj / sqrt (ref->s0 [j] + opt->epsilon);
                break;
            case PS_ROWOPT_ADAM: {
                ref->s0 [j] = opt->beta1 * ref->s0 [j] + (1 - opt->beta1) * gj;
                ref->s1 [j] = opt->beta2 * ref->s1 [j] + (1 - opt->beta2) * gj * gj;
                double alpha = opt->lr * sqrt (1 - pow (opt->beta2, (double) t))
                             / (1 - pow (opt->beta1, (double) t));
                ref->w [j] -= alpha * ref->s0 [j] / (sqrt (ref->s1 [j]) + opt->epsilon);
                break;
            }
            case PS_ROWOPT_FTRL: {
                double n = ref->s1 [j];
                double sigma = (pow (n + gj * gj, -opt->lr_power) - pow (n, -opt->lr_power))
                             / opt->lr;
                ref->s0 [j] += gj - sigma * ref->w [j];
                ref->s1 [j] = n + gj * gj;
                double z = ref->s0 [j];
                double sign = z < 0 ? -1.0 : 1.0;
                ref->w [j] = fabs (z) <= opt->l1 ? 0.0
                           : -(z - sign * opt->l1) / (pow (ref->s1 [j], -opt->lr_power) / opt->lr
                                                      + opt->beta / opt->lr + 2 * opt->l2);
                break;
            }
        }
    }
}

//  ||a - b|| / max (||a||, ||b||) of a float row against a double one.
static double
s_rel (const float *a, const double *b)
{
    float fb [S_DIM];
    for (int j = 0; j < S_DIM; j++)
        fb [j] = (float) b [j];
    return harness_rel_error (a, fb, S_DIM);
}

//  Run opt for S_STEPS steps of random gradients (some rows of zeros, as a
//  row that was pulled but got no gradient) against the reference.
static void
s_run (const ps_rowopt_t *opt, uint64_t seed)
{
    uint64_t rng = seed;
    float w [S_DIM], slots [2 * S_DIM], g [S_DIM];
    for (int j = 0; j < S_DIM; j++)
        w [j] = (float) (harness_unit (&rng) - 0.5);
    s_ref_t ref;
    s_ref_init (&ref, opt, w);
    ps_rowopt_init_slots (opt, slots, S_DIM);
    int nslots = ps_rowopt_slot_count (opt->kind);
    for (int k = 0; k < nslots; k++)
        assert_true (s_rel (slots + k * S_DIM, k == 0 ? ref.s0 : ref.s1) == 0.0);
    for (uint64_t t = 1; t <= S_STEPS; t++) {
        bool zero = t % 17 == 0;
        for (int j = 0; j < S_DIM; j++)
            g [j] = zero ? 0.0f : (float) ((harness_unit (&rng) - 0.5) * (j % 3 ? 1.0 : 0.01));
        ps_rowopt_apply (opt, w, slots, g, S_DIM, t);
        s_ref_step (&ref, opt, g, t);
    }
    double e = s_rel (w, ref.w);
    if (!(e < 1e-5))
        fail_msg ("%s: value relative error %g after %d steps, expected < 1e-5",
                  ps_rowopt_kind_name (opt->kind), e, S_STEPS);
    for (int k = 0; k < nslots; k++) {
        e = s_rel (slots + k * S_DIM, k == 0 ? ref.s0 : ref.s1);
        if (!(e < 1e-5))
            fail_msg ("%s: slot %d relative error %g, expected < 1e-5",
                      ps_rowopt_kind_name (opt->kind), k, e);
    }
}

static void
test_against_reference (void **state)
{
    (void) state;
    for (int kind = PS_ROWOPT_SGD; kind <= PS_ROWOPT_FTRL; kind++) {
        ps_rowopt_t opt;
        ps_rowopt_default (&opt, (ps_rowopt_kind_t) kind);
        opt.lr = 0.05;
        s_run (&opt, 100 + (uint64_t) kind);
    }
    //  FTRL with every term in play, and a power other than the square
    //  root's fast path.
    ps_rowopt_t ftrl;
    ps_rowopt_default (&ftrl, PS_ROWOPT_FTRL);
    ftrl.lr = 0.1;
    ftrl.l1 = 0.01;
    ftrl.l2 = 0.5;
    ftrl.beta = 1.0;
    s_run (&ftrl, 7);
    ftrl.lr_power = -0.3;
    s_run (&ftrl, 8);
    //  Adam with other betas.
    ps_rowopt_t adam;
    ps_rowopt_default (&adam, PS_ROWOPT_ADAM);
    adam.lr = 0.01;
    adam.beta1 = 0.5;
    adam.beta2 = 0.9;
    s_run (&adam, 9);
}

//  First steps worked by hand, for one element.
static void
test_first_steps (void **state)
{
    (void) state;
    ps_rowopt_t opt;
    float w, slots [2], g = 0.5f;

    ps_rowopt_default (&opt, PS_ROWOPT_SGD);
    opt.lr = 0.1;
    w = 1.0f;
    ps_rowopt_apply (&opt, &w, slots, &g, 1, 1);
    assert_float_equal (w, 0.95f, 1e-7);

    //  Adagrad: a = 0.1 + 0.25 = 0.35; w = 1 - 0.1 * 0.5 / sqrt (0.35 + 1e-7).
    ps_rowopt_default (&opt, PS_ROWOPT_ADAGRAD);
    opt.lr = 0.1;
    w = 1.0f;
    ps_rowopt_init_slots (&opt, slots, 1);
    assert_float_equal (slots [0], 0.1f, 0);
    ps_rowopt_apply (&opt, &w, slots, &g, 1, 1);
    assert_float_equal (slots [0], 0.35f, 1e-7);
    assert_float_equal (w, 1.0 - 0.05 / sqrt (0.35 + 1e-7), 1e-6);

    //  Adam at t = 1: m = 0.05, v = 0.00025, alpha = 0.1 * sqrt (0.001) / 0.1,
    //  w = 1 - alpha * 0.05 / (sqrt (0.00025) + 1e-7) = 1 - 0.1 (almost).
    //  At the row's t = 1 whatever the global step: the same step again.
    ps_rowopt_default (&opt, PS_ROWOPT_ADAM);
    opt.lr = 0.1;
    w = 1.0f;
    ps_rowopt_init_slots (&opt, slots, 1);
    ps_rowopt_apply (&opt, &w, slots, &g, 1, 1);
    double alpha = 0.1 * sqrt (1 - 0.999) / (1 - 0.9);
    assert_float_equal (slots [0], 0.05f, 1e-8);
    assert_float_equal (slots [1], 0.00025f, 1e-10);
    assert_float_equal (w, 1.0 - alpha * 0.05 / (sqrt (0.00025) + 1e-7), 1e-6);

    //  FTRL, lr 0.1, n0 = 0.1, w0 = 1: n = 0.35, sigma = (sqrt 0.35 -
    //  sqrt 0.1) / 0.1, z = 0.5 - sigma, w = -z / (sqrt 0.35 / 0.1), l1 = 0.
    ps_rowopt_default (&opt, PS_ROWOPT_FTRL);
    opt.lr = 0.1;
    w = 1.0f;
    ps_rowopt_init_slots (&opt, slots, 1);
    assert_float_equal (slots [0], 0.0f, 0);
    assert_float_equal (slots [1], 0.1f, 0);
    ps_rowopt_apply (&opt, &w, slots, &g, 1, 1);
    double sigma = (sqrt (0.35) - sqrt (0.1)) / 0.1;
    double z = 0.5 - sigma;
    assert_float_equal (slots [0], z, 1e-6);
    assert_float_equal (slots [1], 0.35f, 1e-7);
    assert_float_equal (w, -z / (sqrt (0.35) / 0.1), 1e-6);

    //  With l1 above |z| the weight is exactly 0: FTRL's sparsity.
    opt.l1 = 10.0;
    w = 1.0f;
    ps_rowopt_init_slots (&opt, slots, 1);
    ps_rowopt_apply (&opt, &w, slots, &g, 1, 1);
    assert_true (w == 0.0f);
}

//  A row is updated element by element with the same bits whatever its
//  width: the vector body (8 lanes in the AVX2 clone the loader picks
//  where the CPU has it, 4 in the default one) and the scalar tail
//  compute the same IEEE operations, neither fusing a multiply and an add
//  (the clone is not built for FMA), so the width of a table's rows and
//  the CPU a server runs on change no bit. A row of width 37 against 37
//  rows of width 1.
static void
test_same_bits_any_width (void **state)
{
    (void) state;
    enum { W = 37 };
    ps_rowopt_kind_t kinds [] = { PS_ROWOPT_SGD, PS_ROWOPT_ADAGRAD, PS_ROWOPT_ADAM,
                                  PS_ROWOPT_FTRL };
    uint64_t rng = 99;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds [0]; k++) {
        ps_rowopt_t opt;
        ps_rowopt_default (&opt, kinds [k]);
        opt.lr = 0.05;
        float w [W], slots [2 * W], one_w [W], one_slots [W][2], g [W];
        ps_rowopt_init_slots (&opt, slots, W);
        for (int j = 0; j < W; j++) {
            w [j] = one_w [j] = (float) (harness_unit (&rng) - 0.5);
            ps_rowopt_init_slots (&opt, one_slots [j], 1);
        }
        for (uint64_t t = 1; t <= 50; t++) {
            for (int j = 0; j < W; j++)
                g [j] = (float) (harness_unit (&rng) - 0.5) * 0.2f;
            ps_rowopt_apply (&opt, w, slots, g, W, t);
            for (int j = 0; j < W; j++)
                ps_rowopt_apply (&opt, &one_w [j], one_slots [j], &g [j], 1, t);
        }
        int nslots = ps_rowopt_slot_count (kinds [k]);
        for (int j = 0; j < W; j++) {
            if (memcmp (&w [j], &one_w [j], sizeof w [j]) != 0)
                fail_msg ("%s: element %d of 37: %.9g, alone %.9g",
                          ps_rowopt_kind_name (kinds [k]), j, w [j], one_w [j]);
            for (int s = 0; s < nslots; s++)
                assert_memory_equal (&slots [s * W + j], &one_slots [j][s], sizeof (float));
        }
    }
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_against_reference),
        cmocka_unit_test (test_first_steps),
        cmocka_unit_test (test_same_bits_any_width),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
