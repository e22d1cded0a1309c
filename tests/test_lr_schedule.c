//  Unit tests for the learning-rate schedules (coordinator/ps_lr_schedule.c):
//  ps_lr_at for each kind, with and without a warm-up, against the
//  header's formulas written out again here for every step of a run, and
//  against numbers worked by hand.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "ps_lr_schedule.h"

//  ---------------------------------------------------------------------
//  Learning-rate schedules

//  The formulas of ps_lr_schedule.h, written out again.
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
        cmocka_unit_test (test_lr_constant),
        cmocka_unit_test (test_lr_piecewise),
        cmocka_unit_test (test_lr_cosine),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
