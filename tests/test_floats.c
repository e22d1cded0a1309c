//  Unit tests for the float arrays of common/base/ps_floats.c: the scan for NaN
//  and infinities finds the first one wherever it sits (in either pass,
//  across block boundaries, at unaligned starts), whatever its sign and
//  payload, and takes every finite value for finite, the largest, the
//  smallest and -0 included. And the arithmetic mode the programs set:
//  subnormal results and operands flushed to zero on the calling thread and
//  on the threads it creates afterwards.

#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ps_floats.h"

#define S_COUNT  9000           //  more than two of the scan's blocks

static float
s_bits (uint32_t bits)
{
    float value;
    memcpy (&value, &bits, sizeof value);
    return value;
}

static void
test_finite_values (void **state)
{
    (void) state;
    float *x = ps_floats_alloc (S_COUNT);
    assert_non_null (x);
    const float finite [] = { 0.0f, -0.0f, 1.0f, -1.0f, FLT_MAX, -FLT_MAX, FLT_MIN,
                              s_bits (0x00000001u), s_bits (0x80000001u), s_bits (0x7f7fffffu) };
    for (size_t k = 0; k < sizeof finite / sizeof finite [0]; k++) {
        for (size_t i = 0; i < S_COUNT; i++)
            x [i] = finite [k];
        assert_int_equal (ps_floats_find_nonfinite (x, S_COUNT), S_COUNT);
        assert_int_equal (ps_floats_find_nonfinite (x + 1, S_COUNT - 1), S_COUNT - 1);
    }
    assert_int_equal (ps_floats_find_nonfinite (x, 0), 0);
    free (x);
}

static void
test_first_nonfinite (void **state)
{
    (void) state;
    float *x = ps_floats_alloc (S_COUNT);
    assert_non_null (x);
    for (size_t i = 0; i < S_COUNT; i++)
        x [i] = (float) (i % 11) - 5.0f;
    const float bad [] = { NAN, -NAN, INFINITY, -INFINITY, s_bits (0x7f800001u),
                           s_bits (0xff800001u), s_bits (0x7fffffffu) };
    const size_t positions [] = { 0, 1, 7, 8, 4095, 4096, 4097, 8191, 8192, S_COUNT - 1 };
    for (size_t b = 0; b < sizeof bad / sizeof bad [0]; b++)
        for (size_t p = 0; p < sizeof positions / sizeof positions [0]; p++) {
            size_t at = positions [p];
            float saved = x [at];
            x [at] = bad [b];
            assert_int_equal (ps_floats_find_nonfinite (x, S_COUNT), at);
            if (at > 0)
                assert_int_equal (ps_floats_find_nonfinite (x + 1, S_COUNT - 1), at - 1);
            //  A second bad value further on: the first is the one found.
            if (at + 3 < S_COUNT) {
                x [at + 3] = INFINITY;
                assert_int_equal (ps_floats_find_nonfinite (x, S_COUNT), at);
                x [at + 3] = 0.0f;
            }
            x [at] = saved;
        }
    assert_int_equal (ps_floats_find_nonfinite (x, S_COUNT), S_COUNT);
    free (x);
}

//  The product of two normal floats whose exact value is subnormal, and a
//  subnormal operand times one. Volatile, so the compiler computes neither
//  in advance in its own arithmetic mode.
static float
s_subnormal_product (void)
{
    volatile float small = 1e-30f, factor = 1e-10f;
    return small * factor;
}

static float
s_subnormal_operand (void)
{
    volatile float subnormal = s_bits (0x00000010u), one = 1.0f;
    return subnormal * one;
}

static void *
s_thread_flushes (void *arg)
{
    bool *flushes = arg;
    *flushes = s_subnormal_product () == 0.0f && s_subnormal_operand () == 0.0f;
    return NULL;
}

static void
test_flush_subnormals (void **state)
{
    (void) state;
    //  The default mode keeps them: without that, the checks below would
    //  prove nothing.
    assert_true (s_subnormal_product () != 0.0f);
    assert_true (fpclassify (s_subnormal_product ()) == FP_SUBNORMAL);
    assert_true (s_subnormal_operand () != 0.0f);
    ps_floats_flush_subnormals ();
    assert_true (s_subnormal_product () == 0.0f);
    assert_true (s_subnormal_operand () == 0.0f);
    //  Normal values are untouched.
    volatile float normal = FLT_MIN;
    assert_true (normal * 1.0f == FLT_MIN);
    pthread_t thread;
    bool flushes = false;
    assert_int_equal (pthread_create (&thread, NULL, s_thread_flushes, &flushes), 0);
    assert_int_equal (pthread_join (thread, NULL), 0);
    assert_true (flushes);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_finite_values),
        cmocka_unit_test (test_first_nonfinite),
        cmocka_unit_test (test_flush_subnormals),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
