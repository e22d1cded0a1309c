//  Unit tests for the IDX reader (common/model/ps_idx.c): hand-built files, raw
//  and gzip-compressed, read back; every malformed header, short or long
//  data, and damaged gzip stream refused with a message naming the file;
//  and the real Fashion-MNIST test labels, whose class counts are known.
//  Every test works in its own mkdtemp directory under /tmp, removed
//  afterwards. The real files come from $PS_DATA_DIR (by default Debian's
//  dataset-fashion-mnist directory); the cases that need them run as a
//  meson test of their own, test_idx_real (`test_idx real`), which is
//  counted as skipped without them (harness_group).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "harness.h"
#include "harness_case.h"
#include "harness_case.h"
#include "ps_idx.h"

typedef struct {
    char dir [HARNESS_DIR_SIZE];
    char path [256];            //  dir/file.idx
    char gz_path [256];         //  dir/file.idx.gz
} fixture_t;

static int
s_setup (void **state)
{
    int rc = harness_dir_setup (state, sizeof (fixture_t));
    if (rc == 0) {
        fixture_t *fx = *state;
        snprintf (fx->path, sizeof fx->path, "%s/file.idx", fx->dir);
        snprintf (fx->gz_path, sizeof fx->gz_path, "%s/file.idx.gz", fx->dir);
    }
    return rc;
}

//  The path of the real data file `name`.
static void
s_data_path (const char *name, char *path, size_t size)
{
    snprintf (path, size, "%s/%s", harness_data_dir (), name);
}

static void
s_store (const char *path, const uint8_t *data, size_t size)
{
    FILE *file = fopen (path, "wb");
    assert_non_null (file);
    if (size)
        assert_int_equal (fwrite (data, 1, size, file), size);
    assert_int_equal (fclose (file), 0);
}

static void
s_store_gz (const char *path, const uint8_t *data, size_t size)
{
    gzFile file = gzopen (path, "wb");
    assert_non_null (file);
    //  gzwrite takes an unsigned length; test files are small.
    if (size)
        assert_int_equal (gzwrite (file, data, (unsigned) size), (int) size);
    assert_int_equal (gzclose (file), Z_OK);
}

//  An IDX file of unsigned bytes: header for dims, then `data_len` bytes
//  of element i = (i * 7 + 3) mod 256. Returns a new buffer of *size bytes.
static uint8_t *
s_make_idx (const uint32_t *dims, int rank, size_t data_len, size_t *size)
{
    *size = 4 + 4 * (size_t) rank + data_len;
    uint8_t *file = malloc (*size);
    assert_non_null (file);
    file [0] = 0;
    file [1] = 0;
    file [2] = 0x08;
    file [3] = (uint8_t) rank;
    for (int i = 0; i < rank; i++)
        for (int k = 0; k < 4; k++)
            file [4 + 4 * i + k] = (uint8_t) (dims [i] >> (24 - 8 * k));
    uint8_t *data = file + 4 + 4 * rank;
    for (size_t i = 0; i < data_len; i++)
        data [i] = (uint8_t) (i * 7 + 3);
    return file;
}

//  Reading path succeeds with the given dims and s_make_idx's data.
static void
s_assert_reads (const char *path, const uint32_t *dims, int rank)
{
    ps_idx_t idx;
    ps_error_t err = { 0 };
    if (ps_idx_read (path, &idx, &err))
        fail_msg ("read failed: %s", err.msg);
    assert_int_equal (idx.rank, rank);
    size_t count = 1;
    for (int i = 0; i < rank; i++) {
        assert_int_equal (idx.dims [i], dims [i]);
        count *= dims [i];
    }
    assert_int_equal (idx.count, count);
    assert_non_null (idx.data);
    for (size_t i = 0; i < count; i++)
        if (idx.data [i] != (uint8_t) (i * 7 + 3))
            fail_msg ("byte %zu is %u, expected %u", i, idx.data [i], (uint8_t) (i * 7 + 3));
    ps_idx_free (&idx);
    assert_null (idx.data);
    assert_int_equal (idx.count, 0);
}

//  Reading path fails with code, a message that starts with the path and
//  contains `expect`, and leaves the struct empty.
static void
s_assert_fails (const char *path, int code, const char *expect)
{
    ps_idx_t idx;
    memset (&idx, 0xab, sizeof idx);
    ps_error_t err = { 0 };
    int rc = ps_idx_read (path, &idx, &err);
    if (rc != code)
        fail_msg ("%s: expected %s, got %s: %s", path, ps_error_name (code),
                  ps_error_name (rc), err.msg);
    assert_int_equal (err.code, code);
    if (strncmp (err.msg, path, strlen (path)) != 0)
        fail_msg ("message \"%s\" does not start with the path", err.msg);
    if (expect && !strstr (err.msg, expect))
        fail_msg ("message \"%s\" lacks \"%s\"", err.msg, expect);
    assert_null (idx.data);
    assert_int_equal (idx.count, 0);
    assert_int_equal (idx.rank, 0);
}

//  Store file raw and gzipped, and expect both to fail alike.
static void
s_assert_both_fail (fixture_t *fx, const uint8_t *file, size_t size, int code,
                    const char *expect)
{
    s_store (fx->path, file, size);
    s_assert_fails (fx->path, code, expect);
    s_store_gz (fx->gz_path, file, size);
    s_assert_fails (fx->gz_path, code, expect);
}

static void
test_read_raw_and_gz (void **state)
{
    fixture_t *fx = *state;
    struct {
        int rank;
        uint32_t dims [PS_IDX_MAX_RANK];
    } cases [] = {
        { 3, { 2, 3, 4 } },
        { 1, { 1 } },
        { 4, { 2, 1, 3, 5 } },
        //  Larger than the reader's first buffer, which must grow.
        { 2, { 1500, 1001 } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        size_t count = 1;
        for (int d = 0; d < cases [i].rank; d++)
            count *= cases [i].dims [d];
        size_t size;
        uint8_t *file = s_make_idx (cases [i].dims, cases [i].rank, count, &size);
        s_store (fx->path, file, size);
        s_assert_reads (fx->path, cases [i].dims, cases [i].rank);
        s_store_gz (fx->gz_path, file, size);
        s_assert_reads (fx->gz_path, cases [i].dims, cases [i].rank);
        free (file);
    }
}

static void
test_missing_and_empty (void **state)
{
    fixture_t *fx = *state;
    char path [320];
    snprintf (path, sizeof path, "%s/absent.idx", fx->dir);
    s_assert_fails (path, PS_ENOTFOUND, "not found");
    //  A directory or a FIFO is refused before anything is read: the FIFO
    //  would block the reader until someone wrote to it.
    s_assert_fails (fx->dir, PS_EINVAL, "a directory, not a regular file");
    snprintf (path, sizeof path, "%s/fifo.idx", fx->dir);
    assert_int_equal (mkfifo (path, 0600), 0);
    alarm (30);
    s_assert_fails (path, PS_EINVAL, "a FIFO, not a regular file");
    alarm (0);

    s_store (fx->path, NULL, 0);
    s_assert_fails (fx->path, PS_ECORRUPT, "0 bytes");
    s_store_gz (fx->gz_path, NULL, 0);
    s_assert_fails (fx->gz_path, PS_ECORRUPT, "0 bytes");
    s_store (fx->path, (const uint8_t []) { 0, 0, 8 }, 3);
    s_assert_fails (fx->path, PS_ECORRUPT, "3 bytes");
}

static void
test_bad_header (void **state)
{
    fixture_t *fx = *state;
    const uint32_t dims [] = { 2, 3, 4 };
    size_t size;
    uint8_t *good = s_make_idx (dims, 3, 24, &size);
    uint8_t *file = malloc (size);
    assert_non_null (file);

    struct {
        size_t offset;
        uint8_t value;
        const char *expect;
    } cases [] = {
        { 0, 0x01, "bad magic" },
        { 1, 0x08, "bad magic" },
        { 2, 0x09, "element type 0x09" },
        { 2, 0x0d, "element type 0x0d" },
        { 3, 0, "rank 0" },
        { 3, PS_IDX_MAX_RANK + 1, "rank 5" },
        { 3, 255, "rank 255" },
        //  The second dimension, 3, becomes 0.
        { 11, 0, "dimension 1 is 0" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        memcpy (file, good, size);
        file [cases [i].offset] = cases [i].value;
        s_assert_both_fail (fx, file, size, PS_ECORRUPT, cases [i].expect);
    }
    //  The header says rank 3 but ends after two dimensions.
    s_assert_both_fail (fx, good, 12, PS_ECORRUPT, "header ends after 8 of its 12");

    //  Dimensions whose product does not fit in size_t.
    const uint32_t huge [] = { 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff };
    uint8_t *big = s_make_idx (huge, 4, 16, &size);
    s_assert_both_fail (fx, big, size, PS_ECORRUPT, "overflow");
    free (big);
    free (file);
    free (good);
}

static void
test_data_length (void **state)
{
    fixture_t *fx = *state;
    const uint32_t dims [] = { 2, 3, 4 };
    size_t size;
    uint8_t *file = s_make_idx (dims, 3, 24 + 3, &size);
    s_assert_both_fail (fx, file, size - 3 - 5, PS_ECORRUPT,
                        "truncated: expected 24 bytes of data, got 19");
    s_assert_both_fail (fx, file, size - 3 - 24, PS_ECORRUPT,
                        "truncated: expected 24 bytes of data, got 0");
    s_assert_both_fail (fx, file, size, PS_ECORRUPT, "trailing bytes: 3 after");
    s_assert_both_fail (fx, file, size - 2, PS_ECORRUPT, "trailing bytes: 1 after");
    free (file);

    //  A header that claims far more than the file holds costs no more
    //  than what is there, and is reported as truncated.
    const uint32_t claimed [] = { 0x7fffffff, 0x10 };
    file = s_make_idx (claimed, 2, 1000, &size);
    s_assert_both_fail (fx, file, size, PS_ECORRUPT, "got 1000");
    free (file);
}

//  A real gzip file cut short, and one with a byte of its compressed data
//  flipped: zlib notices, and its message comes through.
static void
test_damaged_gzip (void **state)
{
    fixture_t *fx = *state;
    char real [512];
    s_data_path ("t10k-labels-idx1-ubyte.gz", real, sizeof real);
    size_t size;
    uint8_t *data = harness_slurp (real, &size);
    assert_true (size > 1000);

    s_store (fx->gz_path, data, size / 2);
    s_assert_fails (fx->gz_path, PS_ECORRUPT, "unexpected end of file");
    //  Only the 8-byte trailer (CRC and length) missing.
    s_store (fx->gz_path, data, size - 8);
    s_assert_fails (fx->gz_path, PS_ECORRUPT, "corrupt gzip stream");

    //  The middle of the deflate data, and a byte of the stored CRC.
    size_t positions [] = { size / 2, size / 3, size - 6 };
    for (size_t i = 0; i < sizeof positions / sizeof positions [0]; i++) {
        data [positions [i]] ^= 0x5a;
        s_store (fx->gz_path, data, size);
        s_assert_fails (fx->gz_path, PS_ECORRUPT, "corrupt gzip stream");
        data [positions [i]] ^= 0x5a;
    }
    //  Restored, the copy reads again.
    s_store (fx->gz_path, data, size);
    ps_idx_t idx;
    assert_int_equal (ps_idx_read (fx->gz_path, &idx, NULL), PS_OK);
    ps_idx_free (&idx);
    free (data);
}

//  Fashion-MNIST's test set has exactly 1000 examples of each class.
static void
test_real_labels (void **state)
{
    (void) state;
    char path [512];
    s_data_path ("t10k-labels-idx1-ubyte.gz", path, sizeof path);
    ps_idx_t idx;
    ps_error_t err = { 0 };
    if (ps_idx_read (path, &idx, &err))
        fail_msg ("read failed: %s", err.msg);
    assert_int_equal (idx.rank, 1);
    assert_int_equal (idx.dims [0], 10000);
    assert_int_equal (idx.count, 10000);
    size_t counts [256] = { 0 };
    for (size_t i = 0; i < idx.count; i++)
        counts [idx.data [i]]++;
    for (int c = 0; c < 10; c++)
        assert_int_equal (counts [c], 1000);
    ps_idx_free (&idx);
}

int
main (int argc, char **argv)
{
    if (harness_group (argc, argv, "real")) {
        harness_need_data ();
        const struct CMUnitTest real [] = {
            cmocka_unit_test_setup_teardown (test_damaged_gzip, s_setup, harness_dir_teardown),
            cmocka_unit_test (test_real_labels),
        };
        return cmocka_run_group_tests_name ("real data", real, NULL, NULL);
    }
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_read_raw_and_gz, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_missing_and_empty, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_bad_header, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_data_length, s_setup, harness_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
