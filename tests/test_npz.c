//  Unit tests for NumPy .npz files (common/store/ps_npz.c): a one-array
//  archive compared byte for byte with one worked out by hand from the
//  zip and .npy format descriptions (its .npy entry is also exactly what
//  numpy.save writes for np.array([1.0], np.float32)), the .npy headers
//  of other shapes, a uint64 array ('<u8', an embedding table's ids) and
//  a float32 one filled through the writer's buffer in several chunks
//  (their CRC-32, put into the local header after the data, checked
//  against zlib's), the metadata entry, and an unwritable path.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "harness_case.h"
#include "ps_npz.h"

typedef struct {
    char dir [HARNESS_DIR_SIZE];
    char path [HARNESS_DIR_SIZE + 32];
} fixture_t;

static int
s_setup (void **state)
{
    int rc = harness_dir_setup (state, sizeof (fixture_t));
    fixture_t *f = *state;
    snprintf (f->path, sizeof f->path, "%s/w.npz", f->dir);
    return rc;
}

//  Little-endian fields, for writing out the expected records.
static uint8_t *
s_le (uint8_t *at, uint32_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        *at++ = (uint8_t) (v >> (8 * i));
    return at;
}

//  The .npy file of float32 [1] {1.0}: magic, version 1.0, header length
//  118, the dict (57 bytes), 60 spaces and a newline (10 + 118 = 128, a
//  multiple of 64), then 00 00 80 3f. Its CRC-32 is 0x73573651.
static size_t
s_npy (uint8_t *out)
{
    static const char dict [] = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
    memcpy (out, "\x93NUMPY\x01\x00\x76\x00", 10);
    memcpy (out + 10, dict, 57);
    memset (out + 67, ' ', 60);
    out [127] = '\n';
    memcpy (out + 128, "\x00\x00\x80\x3f", 4);
    return 132;
}

static void
test_bytes (void **state)
{
    fixture_t *f = *state;
    static const float one = 1.0f;
    ps_tensor_t t = { .name = "w", .shape = { .rank = 1, .dims = { 1 } }, .data = &one };
    ps_error_t err;
    harness_ok (ps_npz_write (f->path, &t, 1, NULL, &err), &err);

    //  Local header (30) + "w.npy" (5) + the entry (132) = 167; the central
    //  directory header (46) + name (5) = 51 at offset 167; the end record
    //  (22) at 218: 240 bytes. Version 2.0, stored, 1980-01-01 00:00.
    uint8_t want [240], *at = want;
    at = s_le (at, 0x04034b50, 4);
    at = s_le (at, 20, 2);
    at = s_le (at, 0, 2);
    at = s_le (at, 0, 2);
    at = s_le (at, 0, 2);
    at = s_le (at, 0x21, 2);
    at = s_le (at, 0x73573651, 4);
    at = s_le (at, 132, 4);
    at = s_le (at, 132, 4);
    at = s_le (at, 5, 2);
    at = s_le (at, 0, 2);
    memcpy (at, "w.npy", 5);
    at += 5;
    at += s_npy (at);
    assert_int_equal (at - want, 167);
    at = s_le (at, 0x02014b50, 4);
    at = s_le (at, 20, 2);
    at = s_le (at, 20, 2);
    at = s_le (at, 0, 2);
    at = s_le (at, 0, 2);
    at = s_le (at, 0, 2);
    at = s_le (at, 0x21, 2);
    at = s_le (at, 0x73573651, 4);
    at = s_le (at, 132, 4);
    at = s_le (at, 132, 4);
    at = s_le (at, 5, 2);
    at = s_le (at, 0, 2);
    at = s_le (at, 0, 2);
    at = s_le (at, 0, 2);
    at = s_le (at, 0, 2);
    at = s_le (at, 0, 4);
    at = s_le (at, 0, 4);
    memcpy (at, "w.npy", 5);
    at += 5;
    at = s_le (at, 0x06054b50, 4);
    at = s_le (at, 0, 2);
    at = s_le (at, 0, 2);
    at = s_le (at, 1, 2);
    at = s_le (at, 1, 2);
    at = s_le (at, 51, 4);
    at = s_le (at, 167, 4);
    at = s_le (at, 0, 2);
    assert_int_equal (at - want, sizeof want);

    harness_file_is (f->path, want, sizeof want);
    assert_int_equal (harness_dir_entries (f->dir), 1);
}

//  The .npy header's shape of a rank-3 array, and the metadata entry after
//  the arrays, stored as it is.
static void
test_shape_and_metadata (void **state)
{
    fixture_t *f = *state;
    float values [2 * 3 * 4] = { 0 };
    ps_tensor_t t = { .name = "conv2d/kernel", .shape = { .rank = 3, .dims = { 2, 3, 4 } },
                      .data = values };
    ps_error_t err;
    harness_ok (ps_npz_write (f->path, &t, 1, "{\"step\":\"7\"}", &err), &err);
    size_t len;
    uint8_t *got = harness_slurp (f->path, &len);
    //  The first entry: its name, then the .npy magic and header.
    assert_memory_equal (got + 30, "conv2d/kernel.npy\x93NUMPY", 23);
    assert_non_null (strstr ((char *) got + 57, "'shape': (2, 3, 4), }"));
    //  The second entry, right after the first's 128 + 96 bytes: the text.
    size_t second = 30 + 17 + 128 + sizeof values;
    assert_memory_equal (got + second + 30, PS_NPZ_METADATA "{\"step\":\"7\"}",
                         strlen (PS_NPZ_METADATA) + 12);
    free (got);
}

static uint32_t
s_get_u32 (const uint8_t *p)
{
    return (uint32_t) p [0] | (uint32_t) p [1] << 8 | (uint32_t) p [2] << 16
         | (uint32_t) p [3] << 24;
}

//  Check the entry whose local header is at got + at: its name, its .npy
//  dict, its data, and its CRC-32 (local and central) against zlib's.
//  Returns the offset after it.
static size_t
s_check_entry (const uint8_t *got, size_t len, size_t at, const char *name, const char *dict,
               const void *data, size_t data_len, size_t central)
{
    size_t nlen = strlen (name);
    assert_true (at + 30 + nlen + 128 + data_len <= len);
    assert_int_equal (s_get_u32 (got + at), 0x04034b50);
    assert_memory_equal (got + at + 30, name, nlen);
    const uint8_t *npy = got + at + 30 + nlen;
    assert_memory_equal (npy + 10, dict, strlen (dict));
    assert_memory_equal (npy + 128, data, data_len);
    uint32_t crc = (uint32_t) crc32 (0L, Z_NULL, 0);
    crc = (uint32_t) crc32_z (crc, npy, 128 + data_len);
    assert_int_equal (s_get_u32 (got + at + 14), crc);
    assert_int_equal (s_get_u32 (got + central + 16), crc);
    return at + 30 + nlen + 128 + data_len;
}

static void
test_u64_and_filled (void **state)
{
    fixture_t *f = *state;
    static const uint64_t ids [3] = { 1, (UINT64_C (1) << 40) + 5, UINT64_MAX };
    enum { N = 600 * 1000 };
    float *values = malloc (N * sizeof (float));
    assert_non_null (values);
    for (int i = 0; i < N; i++)
        values [i] = (float) i * 0.5f - 7;
    harness_filler_t ids_filler = { .bytes = (const uint8_t *) ids };
    harness_filler_t filler = { .bytes = (const uint8_t *) values };
    ps_tensor_t t [2] = {
        { .name = "t/ids", .shape = { .rank = 1, .dims = { 3 } }, .dtype = PS_DTYPE_U64,
          .fill = harness_fill, .fill_arg = &ids_filler },
        { .name = "t/embeddings", .shape = { .rank = 2, .dims = { N / 3, 3 } },
          .fill = harness_fill, .fill_arg = &filler },
    };
    ps_error_t err;
    harness_ok (ps_npz_write (f->path, t, 2, NULL, &err), &err);
    assert_true (filler.calls > 1);
    assert_int_equal (filler.next, (uint64_t) N * sizeof (float));
    size_t len;
    uint8_t *got = harness_slurp (f->path, &len);
    //  The central directory: from the end record, its first and second
    //  headers (46 bytes and the name each).
    size_t central = s_get_u32 (got + len - 22 + 16);
    size_t second = s_check_entry (got, len, 0, "t/ids.npy",
                                   "{'descr': '<u8', 'fortran_order': False, 'shape': (3,), }",
                                   ids, sizeof ids, central);
    s_check_entry (got, len, second, "t/embeddings.npy",
                   "{'descr': '<f4', 'fortran_order': False, 'shape': (200000, 3), }",
                   values, N * sizeof (float), central + 46 + strlen ("t/ids.npy"));
    free (got);
    free (values);
}

static void
test_unwritable (void **state)
{
    fixture_t *f = *state;
    static const float one = 1.0f;
    ps_tensor_t t = { .name = "w", .shape = { .rank = 1, .dims = { 1 } }, .data = &one };
    char path [HARNESS_DIR_SIZE + 32];
    snprintf (path, sizeof path, "%s/no/w.npz", f->dir);
    ps_error_t err;
    assert_int_equal (ps_npz_write (path, &t, 1, NULL, &err), PS_EIO);
    assert_non_null (strstr (err.msg, path));
    assert_int_equal (harness_dir_entries (f->dir), 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_bytes, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_shape_and_metadata, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_u64_and_filled, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_unwritable, s_setup, harness_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
