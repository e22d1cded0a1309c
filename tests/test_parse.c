//  Strict number parsing (common/base/ps_parse.h): the forms people write are
//  read exactly, and every near miss (space, sign, hex, a trailing letter,
//  overflow, inf, nan, out of range) is refused with a message naming what
//  was parsed, the text and the range, leaving the value untouched. Byte
//  counts take K, M or G (powers of 1024) and nothing else.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <stdio.h>
#include <string.h>

#include "ps_parse.h"

static void
test_uint_accepts (void **state)
{
    (void) state;
    ps_error_t err;
    uint64_t v = 7;
    assert_int_equal (ps_parse_uint ("--n", "0", 0, 10, &v, &err), PS_OK);
    assert_int_equal (v, 0);
    assert_int_equal (ps_parse_uint ("--n", "10", 0, 10, &v, &err), PS_OK);
    assert_int_equal (v, 10);
    assert_int_equal (ps_parse_uint ("--n", "007", 0, 10, &v, &err), PS_OK);
    assert_int_equal (v, 7);
    //  Every bit of a 64-bit seed.
    assert_int_equal (ps_parse_uint ("--seed", "18446744073709551615", 0, UINT64_MAX, &v, &err),
                      PS_OK);
    assert_true (v == UINT64_MAX);
}

static void
test_uint_refuses (void **state)
{
    (void) state;
    const char *bad [] = {
        "", " 3", "3 ", "\t3", "+3", "-0", "-1", "0x10", "1e3", "1.0", "3x", "x",
        "18446744073709551616", "99999999999999999999999", "11", "٣",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        ps_error_t err = { 0, "" };
        uint64_t v = 42;
        assert_int_equal (ps_parse_uint ("--threads", bad [i], 0, 10, &v, &err), PS_EINVAL);
        assert_int_equal (v, 42);
        char want [96];
        snprintf (want, sizeof want, "--threads \"%s\": expected a whole number in 0..10", bad [i]);
        if (strcmp (err.msg, want) != 0)
            fail_msg ("for \"%s\": message '%s', expected '%s'", bad [i], err.msg, want);
    }
    //  Below the least.
    ps_error_t err;
    uint64_t v = 0;
    assert_int_equal (ps_parse_uint ("--ps", "0", 1, 256, &v, &err), PS_EINVAL);
    assert_string_equal (err.msg, "--ps \"0\": expected a whole number in 1..256");
    //  The whole range needs no bounds in the message.
    assert_int_equal (ps_parse_uint ("--steps", "x", 0, UINT64_MAX, &v, &err), PS_EINVAL);
    assert_string_equal (err.msg, "--steps \"x\": expected a whole number (decimal digits only)");
}

static void
test_double_accepts (void **state)
{
    (void) state;
    ps_error_t err;
    const struct { const char *text; double value; } good [] = {
        { "0", 0 }, { "1", 1 }, { "0.5", 0.5 }, { ".5", 0.5 }, { "5.", 5 },
        { "1e-3", 1e-3 }, { "1E3", 1e3 }, { "2.5e+2", 250 }, { "1000000", 1e6 },
    };
    for (size_t i = 0; i < sizeof good / sizeof good [0]; i++) {
        double v = -1;
        if (ps_parse_double ("--x", good [i].text, 0, false, 1e6, &v, &err) != PS_OK)
            fail_msg ("refused \"%s\": %s", good [i].text, err.msg);
        assert_true (v == good [i].value);
    }
    //  A sign where the range has negative numbers.
    double v = 0;
    assert_int_equal (ps_parse_double ("--x", "-2.5", -10, false, 10, &v, &err), PS_OK);
    assert_true (v == -2.5);
    //  No upper bound.
    assert_int_equal (ps_parse_double ("--x", "1e300", 0, true, DBL_MAX, &v, &err), PS_OK);
    assert_true (v == 1e300);
}

static void
test_double_refuses (void **state)
{
    (void) state;
    const char *bad [] = {
        "", " 1", "1 ", "+1", "-0", "-1", "0x10", "0x1p-3", "inf", "-inf", "nan", "infinity",
        ".", "-", "e5", "1e", "1e+", "1.2.3", "1,5", "1e999", "1e-400", "1000001", "0",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        ps_error_t err = { 0, "" };
        double v = 42;
        assert_int_equal (ps_parse_double ("--lr", bad [i], 0, true, 1e6, &v, &err), PS_EINVAL);
        assert_true (v == 42);
        char want [96];
        snprintf (want, sizeof want, "--lr \"%s\": expected a number in (0, 1e+06]", bad [i]);
        if (strcmp (err.msg, want) != 0)
            fail_msg ("for \"%s\": message '%s', expected '%s'", bad [i], err.msg, want);
    }
    ps_error_t err;
    double v = 0;
    assert_int_equal (ps_parse_double ("--s", "-1", 0, false, DBL_MAX, &v, &err), PS_EINVAL);
    assert_string_equal (err.msg, "--s \"-1\": expected a number >= 0");
    assert_int_equal (ps_parse_double ("--s", "-11", -10, false, 10, &v, &err), PS_EINVAL);
    assert_string_equal (err.msg, "--s \"-11\": expected a number in [-10, 10]");
}

static void
test_bytes (void **state)
{
    (void) state;
    ps_error_t err;
    uint64_t v = 0;
    assert_int_equal (ps_parse_bytes ("--memory-limit", "1", &v, &err), PS_OK);
    assert_true (v == 1);
    assert_int_equal (ps_parse_bytes ("--memory-limit", "256K", &v, &err), PS_OK);
    assert_true (v == 262144);
    assert_int_equal (ps_parse_bytes ("--memory-limit", "3M", &v, &err), PS_OK);
    assert_true (v == 3145728);
    assert_int_equal (ps_parse_bytes ("--memory-limit", "2G", &v, &err), PS_OK);
    assert_true (v == UINT64_C (2147483648));
    const char *bad [] = {
        "", "0", "0K", "-1", "+1", " 1", "1 ", "K", "1k", "1KB", "1T", "1.5G", "0x10",
        "18446744073709551616", "17179869184G",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        v = 42;
        assert_int_equal (ps_parse_bytes ("--memory-limit", bad [i], &v, &err), PS_EINVAL);
        assert_true (v == 42);
        char want [64];
        snprintf (want, sizeof want, "--memory-limit \"%s\": expected a number of bytes", bad [i]);
        if (strncmp (err.msg, want, strlen (want)) != 0)
            fail_msg ("for \"%s\": message '%s', expected it to start '%s'", bad [i], err.msg,
                      want);
    }
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_uint_accepts),
        cmocka_unit_test (test_uint_refuses),
        cmocka_unit_test (test_double_accepts),
        cmocka_unit_test (test_double_refuses),
        cmocka_unit_test (test_bytes),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
