//  Unit tests for ps_init: values independent of partitioning, seeds that
//  matter, distributions with the right moments and bounds, and parameter
//  checks. Expected bounds are computed here by hand from the formulas, not
//  taken from the library.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ps_init.h"

#define S_LARGE  (1 << 20)

static const ps_init_kind_t s_all_kinds [] = {
    PS_INIT_ZEROS, PS_INIT_CONSTANT, PS_INIT_UNIFORM,
    PS_INIT_GLOROT_UNIFORM, PS_INIT_NORMAL,
};

#define S_KIND_COUNT  (sizeof s_all_kinds / sizeof s_all_kinds [0])

static void
s_shape (ps_shape_t *shape, const int64_t *dims, int rank)
{
    assert_int_equal (ps_shape_set (shape, dims, rank, NULL), PS_OK);
}

//  An initializer of kind with non-trivial parameters, so that the constant
//  and the normal mean are not zero by accident.
static void
s_init (ps_init_t *init, ps_init_kind_t kind, uint64_t seed)
{
    ps_init_default (init, kind);
    init->seed = seed;
    init->value = 0.25;
    init->mean = 0.5;
    init->stddev = 2.0;
}

static void
test_partition_independent (void **state)
{
    (void) state;
    ps_shape_t shape;
    s_shape (&shape, (int64_t []) { 10, 7 }, 2);
    const int64_t cuts [] = { 0, 3, 4, 10 };
    for (size_t k = 0; k < S_KIND_COUNT; k++) {
        ps_init_t init;
        s_init (&init, s_all_kinds [k], 12345);
        float whole [70], parts [70];
        memset (parts, 0xff, sizeof parts);
        assert_int_equal (ps_init_fill (&init, &shape, 0, 10, whole, NULL), PS_OK);
        for (size_t c = 0; c + 1 < sizeof cuts / sizeof cuts [0]; c++)
            assert_int_equal (ps_init_fill (&init, &shape, cuts [c], cuts [c + 1],
                                            parts + cuts [c] * 7, NULL), PS_OK);
        assert_memory_equal (whole, parts, sizeof whole);
    }
}

static void
test_seeds_differ (void **state)
{
    (void) state;
    ps_shape_t shape;
    s_shape (&shape, (int64_t []) { 64, 16 }, 2);
    const ps_init_kind_t random_kinds [] = {
        PS_INIT_UNIFORM, PS_INIT_GLOROT_UNIFORM, PS_INIT_NORMAL,
    };
    for (size_t k = 0; k < 3; k++) {
        ps_init_t a, b;
        s_init (&a, random_kinds [k], 1);
        s_init (&b, random_kinds [k], 2);
        float va [1024], vb [1024];
        assert_int_equal (ps_init_fill (&a, &shape, 0, 64, va, NULL), PS_OK);
        assert_int_equal (ps_init_fill (&b, &shape, 0, 64, vb, NULL), PS_OK);
        int same = 0;
        for (int i = 0; i < 1024; i++)
            same += va [i] == vb [i];
        //  Independent draws coincide in float only by rare accident.
        assert_true (same < 4);
        //  Neighbouring elements of one seed differ too.
        int repeats = 0;
        for (int i = 1; i < 1024; i++)
            repeats += va [i] == va [i - 1];
        assert_true (repeats < 4);
    }
}

//  Mean, variance, minimum and maximum of values, in double.
typedef struct {
    double mean, var, min, max;
} s_stats_t;

static s_stats_t
s_stats (const float *values, size_t n)
{
    s_stats_t s = { 0, 0, INFINITY, -INFINITY };
    for (size_t i = 0; i < n; i++) {
        s.mean += values [i];
        s.min = fmin (s.min, values [i]);
        s.max = fmax (s.max, values [i]);
    }
    s.mean /= (double) n;
    for (size_t i = 0; i < n; i++)
        s.var += (values [i] - s.mean) * (values [i] - s.mean);
    s.var /= (double) n;
    return s;
}

static void
test_uniform_statistics (void **state)
{
    (void) state;
    ps_shape_t shape;
    s_shape (&shape, (int64_t []) { S_LARGE }, 1);
    float *values = malloc (sizeof (float) * S_LARGE);
    assert_non_null (values);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_UNIFORM);
    init.seed = 7;
    assert_int_equal (ps_init_fill (&init, &shape, 0, S_LARGE, values, NULL), PS_OK);
    s_stats_t s = s_stats (values, S_LARGE);
    //  U[-0.05, 0.05): mean 0, variance 0.1^2 / 12. With 2^20 samples the
    //  standard error of the mean is about 3e-5.
    assert_true (fabs (s.mean) < 2e-4);
    assert_true (fabs (s.var / (0.01 / 12) - 1) < 0.01);
    assert_true (s.min >= -0.05f && s.max < 0.05f);
    //  The samples reach close to both ends.
    assert_true (s.min < -0.0499 && s.max > 0.0499);
    free (values);
}

static void
test_glorot_bounds (void **state)
{
    (void) state;
    //  A 3x3 convolution from 1 to 32 channels: receptive field 9,
    //  fan_in = 1 * 9 = 9, fan_out = 32 * 9 = 288.
    ps_shape_t shape;
    s_shape (&shape, (int64_t []) { 3, 3, 1, 32 }, 4);
    double limit = sqrt (6.0 / (9 + 288));
    ps_init_t init;
    ps_init_default (&init, PS_INIT_GLOROT_UNIFORM);
    init.seed = 99;
    float values [288];
    assert_int_equal (ps_init_fill (&init, &shape, 0, 3, values, NULL), PS_OK);
    s_stats_t s = s_stats (values, 288);
    assert_true (s.min >= (float) -limit && s.max < (float) limit);
    assert_true (s.min < -0.8 * limit && s.max > 0.8 * limit);

    //  A dense kernel [in, out] = [1000, 24] on many samples: the variance of
    //  U[-l, l) is l^2 / 3 = 2 / (fan_in + fan_out).
    s_shape (&shape, (int64_t []) { 1000, 24 }, 2);
    float *many = malloc (sizeof (float) * 24000);
    assert_non_null (many);
    assert_int_equal (ps_init_fill (&init, &shape, 0, 1000, many, NULL), PS_OK);
    limit = sqrt (6.0 / 1024);
    s = s_stats (many, 24000);
    assert_true (s.min >= (float) -limit && s.max < (float) limit);
    assert_true (fabs (s.var / (2.0 / 1024) - 1) < 0.05);
    free (many);

    //  A vector has fan_in = fan_out = its length.
    s_shape (&shape, (int64_t []) { 6 }, 1);
    assert_int_equal (ps_init_fill (&init, &shape, 0, 6, values, NULL), PS_OK);
    limit = sqrt (6.0 / 12);
    for (int i = 0; i < 6; i++)
        assert_true (values [i] >= (float) -limit && values [i] < (float) limit);
}

static void
test_normal_statistics (void **state)
{
    (void) state;
    ps_shape_t shape;
    s_shape (&shape, (int64_t []) { 1024, 1024 }, 2);
    float *values = malloc (sizeof (float) * S_LARGE);
    assert_non_null (values);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_NORMAL);
    init.seed = 3;
    init.mean = 1.5;
    init.stddev = 0.5;
    assert_int_equal (ps_init_fill (&init, &shape, 0, 1024, values, NULL), PS_OK);
    s_stats_t s = s_stats (values, S_LARGE);
    //  The standard error of the mean is 0.5 / 1024 ~ 5e-4.
    assert_true (fabs (s.mean - 1.5) < 3e-3);
    assert_true (fabs (sqrt (s.var) - 0.5) < 3e-3);
    //  Tails: about 4.55% of a normal lies beyond 2 stddev; 2^20 samples
    //  put the observed fraction within a few tenths of a percent.
    size_t beyond = 0;
    for (size_t i = 0; i < S_LARGE; i++)
        beyond += fabs (values [i] - 1.5) > 1.0;
    assert_true (fabs ((double) beyond / S_LARGE - 0.0455) < 0.002);

    //  Keras' default is N(0, 0.05^2).
    ps_init_default (&init, PS_INIT_NORMAL);
    assert_int_equal (ps_init_fill (&init, &shape, 0, 1024, values, NULL), PS_OK);
    s = s_stats (values, S_LARGE);
    assert_true (fabs (s.mean) < 3e-4);
    assert_true (fabs (sqrt (s.var) - 0.05) < 3e-4);
    free (values);
}

static void
test_constant_and_zeros (void **state)
{
    (void) state;
    ps_shape_t shape;
    s_shape (&shape, (int64_t []) { 5, 3, 2 }, 3);
    float values [30];
    ps_init_t init;
    ps_init_default (&init, PS_INIT_CONSTANT);
    init.value = -1.25;
    assert_int_equal (ps_init_fill (&init, &shape, 1, 5, values, NULL), PS_OK);
    for (int i = 0; i < 24; i++)
        assert_true (values [i] == -1.25f);

    memset (values, 0xff, sizeof values);
    ps_init_default (&init, PS_INIT_ZEROS);
    assert_int_equal (ps_init_fill (&init, &shape, 0, 5, values, NULL), PS_OK);
    float zeros [30] = { 0 };
    assert_memory_equal (values, zeros, sizeof zeros);
}

static void
test_names (void **state)
{
    (void) state;
    for (size_t k = 0; k < S_KIND_COUNT; k++) {
        ps_init_kind_t parsed;
        const char *name = ps_init_kind_name (s_all_kinds [k]);
        assert_int_equal (ps_init_kind_parse (name, &parsed, NULL), PS_OK);
        assert_int_equal (parsed, s_all_kinds [k]);
    }
    assert_string_equal (ps_init_kind_name (PS_INIT_GLOROT_UNIFORM), "glorot_uniform");
    ps_error_t err;
    ps_init_kind_t parsed;
    assert_int_equal (ps_init_kind_parse ("he_normal", &parsed, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "he_normal"));
}

static void
test_bad_parameters (void **state)
{
    (void) state;
    ps_shape_t shape;
    s_shape (&shape, (int64_t []) { 4, 2 }, 2);
    float values [8];
    ps_error_t err;
    ps_init_t init;

    ps_init_default (&init, PS_INIT_UNIFORM);
    init.low = 0.1;
    init.high = 0.1;
    assert_int_equal (ps_init_validate (&init, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "low < high"));
    init.high = -0.1;
    assert_int_equal (ps_init_fill (&init, &shape, 0, 4, values, &err), PS_EINVAL);
    init.high = NAN;
    assert_int_equal (ps_init_validate (&init, &err), PS_EINVAL);

    ps_init_default (&init, PS_INIT_NORMAL);
    init.stddev = -1;
    assert_int_equal (ps_init_validate (&init, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "stddev"));
    init.stddev = NAN;
    assert_int_equal (ps_init_validate (&init, &err), PS_EINVAL);
    init.stddev = 1;
    init.mean = NAN;
    assert_int_equal (ps_init_validate (&init, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "mean"));

    ps_init_default (&init, PS_INIT_CONSTANT);
    init.value = INFINITY;
    assert_int_equal (ps_init_validate (&init, &err), PS_EINVAL);
    init.value = 1e300;
    assert_int_equal (ps_init_validate (&init, &err), PS_EINVAL);

    ps_init_default (&init, (ps_init_kind_t) 17);
    assert_int_equal (ps_init_validate (&init, &err), PS_EINVAL);

    //  Defaults are valid for every kind.
    for (size_t k = 0; k < S_KIND_COUNT; k++) {
        ps_init_default (&init, s_all_kinds [k]);
        assert_int_equal (ps_init_validate (&init, NULL), PS_OK);
    }
}

static void
test_bad_rows (void **state)
{
    (void) state;
    ps_shape_t shape;
    s_shape (&shape, (int64_t []) { 4, 2 }, 2);
    float values [8];
    ps_error_t err;
    ps_init_t init;
    ps_init_default (&init, PS_INIT_UNIFORM);
    assert_int_equal (ps_init_fill (&init, &shape, 0, 5, values, &err), PS_ESHAPE);
    assert_non_null (strstr (err.msg, "[0,5)"));
    assert_int_equal (ps_init_fill (&init, &shape, 2, 2, values, &err), PS_ESHAPE);
    assert_int_equal (ps_init_fill (&init, &shape, -1, 2, values, &err), PS_ESHAPE);
    assert_int_equal (ps_init_fill (&init, &shape, 3, 1, values, &err), PS_ESHAPE);
    shape.rank = 0;
    assert_int_equal (ps_init_fill (&init, &shape, 0, 1, values, &err), PS_ESHAPE);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_partition_independent),
        cmocka_unit_test (test_seeds_differ),
        cmocka_unit_test (test_uniform_statistics),
        cmocka_unit_test (test_glorot_bounds),
        cmocka_unit_test (test_normal_statistics),
        cmocka_unit_test (test_constant_and_zeros),
        cmocka_unit_test (test_names),
        cmocka_unit_test (test_bad_parameters),
        cmocka_unit_test (test_bad_rows),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
