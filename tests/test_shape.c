//  Shapes: validation, counts, row ranges and formatting, including the
//  truncation of a formatted shape into a small buffer.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "ps_shape.h"

static void
test_counts_and_rows (void **state)
{
    (void) state;
    ps_shape_t shape, rows;
    assert_int_equal (ps_shape_set (&shape, (int64_t []) { 3, 3, 1, 32 }, 4, NULL), 0);
    assert_int_equal (ps_shape_count (&shape), 288);
    assert_int_equal (ps_shape_row_count (&shape), 96);
    assert_int_equal (ps_shape_rows (&shape, 1, 3, &rows, NULL), 0);
    assert_int_equal (rows.dims [0], 2);
    assert_int_equal (ps_shape_count (&rows), 192);
    ps_error_t err;
    assert_int_equal (ps_shape_rows (&shape, 2, 2, &rows, &err), PS_ESHAPE);
    assert_int_equal (ps_shape_rows (&shape, 0, 4, &rows, &err), PS_ESHAPE);
    assert_non_null (strstr (err.msg, "[0,4)"));
}

static void
test_invalid_shapes (void **state)
{
    (void) state;
    ps_shape_t shape;
    ps_error_t err;
    assert_int_equal (ps_shape_set (&shape, (int64_t []) { 4, 0 }, 2, &err), PS_ESHAPE);
    assert_non_null (strstr (err.msg, "dimension 1"));
    assert_int_equal (ps_shape_set (&shape, (int64_t []) { 4 }, 0, &err), PS_ESHAPE);
    assert_int_equal (ps_shape_set (&shape, (int64_t []) { 1 << 21, 1 << 21 }, 2, &err), PS_ESHAPE);
    int64_t nine [9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
    assert_int_equal (ps_shape_set (&shape, nine, 9, &err), PS_ESHAPE);
}

static void
test_format (void **state)
{
    (void) state;
    ps_shape_t shape;
    ps_shape_set (&shape, (int64_t []) { 123456, 7, 89 }, 3, NULL);
    char buf [64];
    assert_string_equal (ps_shape_str (&shape, buf, sizeof buf), "[123456,7,89]");
    //  A small buffer truncates without writing past its end.
    char small [8];
    memset (small, 'x', sizeof small);
    ps_shape_str (&shape, small, 6);
    assert_int_equal (strlen (small), 5);
    assert_int_equal (small [6], 'x');
    assert_memory_equal (small, "[1234", 5);
}

static void
test_names (void **state)
{
    (void) state;
    ps_error_t err;
    assert_int_equal (ps_name_check ("dense_1/kernel", 14, NULL), 0);
    assert_int_equal (ps_name_check ("", 0, &err), PS_EINVAL);
    assert_int_equal (ps_name_check ("a b", 3, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "0x20"));
    char long_name [PS_NAME_MAX + 1];
    memset (long_name, 'a', sizeof long_name);
    assert_int_equal (ps_name_check (long_name, PS_NAME_MAX, &err), PS_EINVAL);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_counts_and_rows),
        cmocka_unit_test (test_invalid_shapes),
        cmocka_unit_test (test_format),
        cmocka_unit_test (test_names),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
