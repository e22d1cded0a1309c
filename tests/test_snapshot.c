//  Unit tests for snapshot files (common/store/ps_snapshot.c): round trips for
//  every optimizer kind, the crash-safe write, and the detection of
//  truncated, corrupted, inconsistent and missing files. Every test works in
//  its own mkdtemp directory under /tmp, removed afterwards.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "harness.h"
#include "harness_case.h"
#include "harness_case.h"
#include "harness_rand.h"
#include "ps_bytes.h"
#include "ps_snapshot.h"

//  Byte offsets from schemas/snapshot.md, for the corruption tests.
#define OFF_FORMAT       8
#define OFF_PART        12
#define OFF_RANK        16
#define OFF_KIND        20
#define OFF_NESTEROV    24
#define OFF_SLOTS       28
#define OFF_NAME        32
#define OFF_DIMS       160
#define OFF_ROW_END    232
#define OFF_DOUBLES    240
#define OFF_ELEMENTS   336
#define OFF_LEDGER_LEN 344
#define HEADER_SIZE    352

typedef struct {
    char dir [HARNESS_DIR_SIZE];
    char path [256];
} fixture_t;

static int
s_setup (void **state)
{
    int rc = harness_dir_setup (state, sizeof (fixture_t));
    if (rc == 0) {
        fixture_t *fx = *state;
        snprintf (fx->path, sizeof fx->path, "%s/dense_1%%2Fkernel.part3.snap", fx->dir);
    }
    return rc;
}

//  A partition of rows [2, 7) of a [10, 3, 4] variable with random values
//  and slots, distinct optimizer settings, and a ledger with holes.
static void
s_make (ps_snapshot_t *snap, ps_opt_kind_t kind, uint64_t seed)
{
    memset (snap, 0, sizeof *snap);
    strcpy (snap->var, "dense_1/kernel");
    snap->part = 3;
    int64_t dims [] = { 10, 3, 4 };
    assert_int_equal (ps_shape_set (&snap->shape, dims, 3, NULL), PS_OK);
    snap->row_begin = 2;
    snap->row_end = 7;
    snap->opt.kind = kind;
    snap->opt.lr = 0.001 + (double) seed;
    snap->opt.momentum = 0.9;
    snap->opt.nesterov = true;
    snap->opt.beta1 = 0.875;
    snap->opt.beta2 = 0.999;
    snap->opt.epsilon = 1e-7;
    snap->opt.initial_accumulator = 0.1;
    snap->opt.weight_decay = 4e-5;
    snap->opt.clip_value = 2.5;
    snap->opt.clip_norm = -0.0;
    snap->opt_t = 1000 + seed;
    snap->version = 2000 + seed;
    snap->duplicates = 7;
    size_t n = 5 * 12;
    snap->values = malloc (n * sizeof (float));
    assert_non_null (snap->values);
    for (size_t i = 0; i < n; i++)
        snap->values [i] = (float) harness_lcg (&seed) / 1e6f - 1000.0f;
    for (int k = 0; k < ps_opt_slot_count (kind); k++) {
        snap->slots [k] = malloc (n * sizeof (float));
        assert_non_null (snap->slots [k]);
        for (size_t i = 0; i < n; i++)
            snap->slots [k][i] = (float) harness_lcg (&seed) / 1e9f;
    }
    snap->ledger = ps_ledger_new ();
    assert_non_null (snap->ledger);
    for (uint64_t s = 0; s < 500; s++)
        if (s != 123 && s % 97 != 5)
            assert_int_equal (ps_ledger_mark (snap->ledger, s, NULL), PS_OK);
    assert_int_equal (ps_ledger_mark (snap->ledger, 5000, NULL), PS_OK);
}

//  Free what s_make allocated.
static void
s_unmake (ps_snapshot_t *snap)
{
    free (snap->values);
    for (int k = 0; k < PS_OPT_MAX_SLOTS; k++)
        free (snap->slots [k]);
    ps_ledger_destroy (&snap->ledger);
}

static void
s_assert_same (const ps_snapshot_t *a, const ps_snapshot_t *b)
{
    assert_string_equal (a->var, b->var);
    assert_int_equal (a->part, b->part);
    assert_true (ps_shape_equal (&a->shape, &b->shape));
    assert_int_equal (a->row_begin, b->row_begin);
    assert_int_equal (a->row_end, b->row_end);
    assert_int_equal (a->opt.kind, b->opt.kind);
    assert_int_equal (a->opt.nesterov, b->opt.nesterov);
    //  Bitwise, so that -0.0 and every last bit survive.
    assert_memory_equal (&a->opt.lr, &b->opt.lr, sizeof (double));
    assert_memory_equal (&a->opt.momentum, &b->opt.momentum, sizeof (double));
    assert_memory_equal (&a->opt.beta1, &b->opt.beta1, sizeof (double));
    assert_memory_equal (&a->opt.beta2, &b->opt.beta2, sizeof (double));
    assert_memory_equal (&a->opt.epsilon, &b->opt.epsilon, sizeof (double));
    assert_memory_equal (&a->opt.initial_accumulator, &b->opt.initial_accumulator, sizeof (double));
    assert_memory_equal (&a->opt.weight_decay, &b->opt.weight_decay, sizeof (double));
    assert_memory_equal (&a->opt.clip_value, &b->opt.clip_value, sizeof (double));
    assert_memory_equal (&a->opt.clip_norm, &b->opt.clip_norm, sizeof (double));
    assert_int_equal (a->opt_t, b->opt_t);
    assert_int_equal (a->version, b->version);
    assert_int_equal (a->duplicates, b->duplicates);
    size_t n = (size_t) ((a->row_end - a->row_begin) * ps_shape_row_count (&a->shape));
    assert_memory_equal (a->values, b->values, n * sizeof (float));
    int nslots = ps_opt_slot_count (a->opt.kind);
    for (int k = 0; k < nslots; k++)
        assert_memory_equal (a->slots [k], b->slots [k], n * sizeof (float));
    for (int k = nslots; k < PS_OPT_MAX_SLOTS; k++)
        assert_null (b->slots [k]);
    assert_true (ps_ledger_equal (a->ledger, b->ledger));
}

static void
test_round_trip (void **state)
{
    fixture_t *fx = *state;
    ps_opt_kind_t kinds [] = { PS_OPT_SGD, PS_OPT_MOMENTUM, PS_OPT_ADAGRAD, PS_OPT_ADAM };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds [0]; i++) {
        ps_snapshot_t snap;
        s_make (&snap, kinds [i], i + 1);
        ps_error_t err = { 0 };
        if (ps_snapshot_write (fx->path, &snap, &err))
            fail_msg ("write failed: %s", err.msg);
        //  Only the final file remains: the temporary one was renamed.
        assert_int_equal (harness_dir_entries (fx->dir), 1);

        ps_snapshot_t back;
        if (ps_snapshot_read (fx->path, &back, &err))
            fail_msg ("read failed: %s", err.msg);
        s_assert_same (&snap, &back);
        assert_int_equal ((uintptr_t) back.values % 64, 0);
        for (int k = 0; k < ps_opt_slot_count (kinds [i]); k++)
            assert_int_equal ((uintptr_t) back.slots [k] % 64, 0);

        ps_snapshot_release (&back);
        assert_null (back.values);
        assert_null (back.ledger);
        assert_int_equal (back.version, 0);
        s_unmake (&snap);
    }
}

//  A rank-1 variable held whole, with an empty ledger, overwriting an
//  existing file.
static void
test_overwrite_and_edges (void **state)
{
    fixture_t *fx = *state;
    ps_snapshot_t first;
    s_make (&first, PS_OPT_ADAM, 9);
    assert_int_equal (ps_snapshot_write (fx->path, &first, NULL), PS_OK);

    ps_snapshot_t snap;
    memset (&snap, 0, sizeof snap);
    strcpy (snap.var, "bias");
    int64_t dims [] = { 1 };
    assert_int_equal (ps_shape_set (&snap.shape, dims, 1, NULL), PS_OK);
    snap.row_begin = 0;
    snap.row_end = 1;
    snap.opt.kind = PS_OPT_SGD;
    snap.opt.lr = 0.5;
    float value = -3.25f;
    snap.values = &value;
    snap.ledger = ps_ledger_new ();
    assert_non_null (snap.ledger);
    assert_int_equal (ps_snapshot_write (fx->path, &snap, NULL), PS_OK);
    assert_int_equal (harness_dir_entries (fx->dir), 1);

    ps_snapshot_t back;
    assert_int_equal (ps_snapshot_read (fx->path, &back, NULL), PS_OK);
    s_assert_same (&snap, &back);
    assert_int_equal (ps_ledger_count (back.ledger), 0);
    ps_snapshot_release (&back);
    ps_ledger_destroy (&snap.ledger);
    s_unmake (&first);
}

static uint8_t *
s_load (const char *path, size_t *size)
{
    FILE *file = fopen (path, "rb");
    assert_non_null (file);
    assert_int_equal (fseek (file, 0, SEEK_END), 0);
    long end = ftell (file);
    assert_true (end > 0);
    rewind (file);
    uint8_t *data = malloc ((size_t) end);
    assert_non_null (data);
    assert_int_equal (fread (data, 1, (size_t) end, file), (size_t) end);
    fclose (file);
    *size = (size_t) end;
    return data;
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

//  Reading path fails with code, a message naming the file and containing
//  `expect`, and leaves the struct empty.
static void
s_assert_read_fails (const char *path, int code, const char *expect)
{
    ps_snapshot_t back;
    memset (&back, 0xab, sizeof back);
    ps_error_t err = { 0 };
    int rc = ps_snapshot_read (path, &back, &err);
    if (rc != code)
        fail_msg ("expected %s, got %s: %s", ps_error_name (code), ps_error_name (rc), err.msg);
    assert_int_equal (err.code, code);
    assert_non_null (strstr (err.msg, path));
    if (expect && !strstr (err.msg, expect))
        fail_msg ("message \"%s\" lacks \"%s\"", err.msg, expect);
    assert_null (back.values);
    assert_null (back.slots [0]);
    assert_null (back.slots [1]);
    assert_null (back.ledger);
}

static void
test_truncated (void **state)
{
    fixture_t *fx = *state;
    ps_snapshot_t snap;
    s_make (&snap, PS_OPT_ADAM, 3);
    assert_int_equal (ps_snapshot_write (fx->path, &snap, NULL), PS_OK);
    size_t size;
    uint8_t *data = s_load (fx->path, &size);
    size_t ledger_len = ps_ledger_encoded_size (snap.ledger);

    char path [320];
    snprintf (path, sizeof path, "%s/truncated.snap", fx->dir);
    size_t lengths [] = {
        0, 1, 8, 11, 12, 100, HEADER_SIZE, HEADER_SIZE + 4, HEADER_SIZE + ledger_len,
        HEADER_SIZE + ledger_len + 4, size / 2, size - 5, size - 4, size - 1,
    };
    for (size_t i = 0; i < sizeof lengths / sizeof lengths [0]; i++) {
        s_store (path, data, lengths [i]);
        s_assert_read_fails (path, PS_ECORRUPT, NULL);
    }
    free (data);
    s_unmake (&snap);
}

static void
test_flipped_byte (void **state)
{
    fixture_t *fx = *state;
    ps_snapshot_t snap;
    s_make (&snap, PS_OPT_MOMENTUM, 4);
    assert_int_equal (ps_snapshot_write (fx->path, &snap, NULL), PS_OK);
    size_t size;
    uint8_t *data = s_load (fx->path, &size);
    size_t ledger_len = ps_ledger_encoded_size (snap.ledger);

    char path [320];
    snprintf (path, sizeof path, "%s/flipped.snap", fx->dir);
    //  The magic is checked first, then the format version, then the
    //  checksum, which covers every other byte.
    s_store (path, data, size);
    data [0] ^= 0x01;
    s_store (path, data, size);
    s_assert_read_fails (path, PS_ECORRUPT, "bad magic");
    data [0] ^= 0x01;
    data [OFF_FORMAT] ^= 0x04;
    s_store (path, data, size);
    s_assert_read_fails (path, PS_EVERSION, "version");
    data [OFF_FORMAT] ^= 0x04;

    size_t positions [] = {
        OFF_PART, OFF_RANK, OFF_KIND, OFF_NAME + 3, OFF_NAME + 100, OFF_DIMS + 1,
        OFF_DOUBLES + 7, OFF_ELEMENTS, OFF_LEDGER_LEN, HEADER_SIZE + 3, HEADER_SIZE + ledger_len - 1,
        HEADER_SIZE + ledger_len, size / 2, size - 5, size - 4, size - 1,
    };
    for (size_t i = 0; i < sizeof positions / sizeof positions [0]; i++) {
        for (uint8_t bit = 1; bit; bit <<= 1) {
            data [positions [i]] ^= bit;
            s_store (path, data, size);
            s_assert_read_fails (path, PS_ECORRUPT, "checksum mismatch");
            data [positions [i]] ^= bit;
        }
    }
    //  The restored bytes read again.
    s_store (path, data, size);
    ps_snapshot_t back;
    assert_int_equal (ps_snapshot_read (path, &back, NULL), PS_OK);
    s_assert_same (&snap, &back);
    ps_snapshot_release (&back);
    free (data);
    s_unmake (&snap);
}

static void
s_store_with_crc (const char *path, uint8_t *data, size_t size)
{
    ps_put_u32 (data + size - 4, (uint32_t) crc32 (crc32 (0, Z_NULL, 0), data, (uInt) (size - 4)));
    s_store (path, data, size);
}

//  Field checks behind the checksum: a writer bug or a hand-made file with
//  a correct CRC must still be refused.
static void
test_inconsistent_fields (void **state)
{
    fixture_t *fx = *state;
    ps_snapshot_t snap;
    s_make (&snap, PS_OPT_ADAGRAD, 5);
    assert_int_equal (ps_snapshot_write (fx->path, &snap, NULL), PS_OK);
    size_t size;
    uint8_t *good = s_load (fx->path, &size);
    uint8_t *data = malloc (size + 8);
    assert_non_null (data);
    char path [320];
    snprintf (path, sizeof path, "%s/inconsistent.snap", fx->dir);

    //  The unmodified file, with its CRC recomputed, reads back.
    memcpy (data, good, size);
    s_store_with_crc (path, data, size);
    ps_snapshot_t back;
    assert_int_equal (ps_snapshot_read (path, &back, NULL), PS_OK);
    ps_snapshot_release (&back);

    struct {
        size_t offset;
        int width;
        uint64_t value;
        const char *expect;
    } cases [] = {
        { OFF_RANK, 4, 0, "rank" },
        { OFF_RANK, 4, 9, "rank" },
        { OFF_RANK, 4, 2, "beyond rank" },
        { OFF_KIND, 4, 4, "optimizer kind" },
        { OFF_KIND, 4, PS_OPT_ADAM, "slot count" },
        { OFF_NESTEROV, 4, 2, "nesterov" },
        { OFF_SLOTS, 4, 2, "bytes" },
        { OFF_SLOTS, 4, 3, "bytes" },
        { OFF_NAME, 1, 0, "name" },
        { OFF_NAME + 2, 1, ' ', "name" },
        { OFF_NAME + 100, 1, 'x', "padding" },
        { OFF_DIMS, 8, 0, "dimension" },
        { OFF_DIMS, 8, 6, "row range" },
        { OFF_DIMS + 8 * 4, 8, 1, "dimension 4" },
        { OFF_ROW_END, 8, 2, "row range" },
        { OFF_ROW_END, 8, 11, "row range" },
        { OFF_ELEMENTS, 8, 61, "bytes" },
        { OFF_LEDGER_LEN, 8, 0, "bytes" },
        { OFF_LEDGER_LEN, 8, UINT64_MAX, "bytes" },
        { HEADER_SIZE + 8, 8, 0, "ledger" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        memcpy (data, good, size);
        if (cases [i].width == 1)
            data [cases [i].offset] = (uint8_t) cases [i].value;
        else
        if (cases [i].width == 4)
            ps_put_u32 (data + cases [i].offset, (uint32_t) cases [i].value);
        else
            ps_put_u64 (data + cases [i].offset, cases [i].value);
        s_store_with_crc (path, data, size);
        s_assert_read_fails (path, PS_ECORRUPT, cases [i].expect);
    }
    //  An element count that fits the file size (the ledger shrunk to make
    //  room) but not the row range.
    memcpy (data, good, size);
    ps_put_u64 (data + OFF_ELEMENTS, 61);
    ps_put_u64 (data + OFF_LEDGER_LEN, ps_ledger_encoded_size (snap.ledger) - 8);
    s_store_with_crc (path, data, size);
    s_assert_read_fails (path, PS_ECORRUPT, "element count");

    //  Extra bytes before the trailer.
    memcpy (data, good, size - 4);
    memset (data + size - 4, 0, 8);
    s_store_with_crc (path, data, size + 4);
    s_assert_read_fails (path, PS_ECORRUPT, "bytes");
    free (data);
    free (good);
    s_unmake (&snap);
}

//  The optimizer settings behind the checksum: a file whose learning rate
//  or clipping is NaN, infinite or negative would poison every value at
//  the first update after a restore, so the reader refuses it with the
//  checks set_optimizer applies (ps_opt_config_validate), naming the field.
static void
test_bad_optimizer_values (void **state)
{
    fixture_t *fx = *state;
    ps_snapshot_t snap;
    s_make (&snap, PS_OPT_ADAM, 6);
    assert_int_equal (ps_snapshot_write (fx->path, &snap, NULL), PS_OK);
    size_t size;
    uint8_t *good = s_load (fx->path, &size);
    uint8_t *data = malloc (size);
    assert_non_null (data);
    char path [320];
    snprintf (path, sizeof path, "%s/optimizer.snap", fx->dir);
    //  Field index in the header's doubles (lr, momentum, beta1, beta2,
    //  epsilon, initial_accumulator, weight_decay, clip_value, clip_norm).
    struct {
        int field;
        double value;
        const char *expect;
    } cases [] = {
        { 0, NAN, "lr" }, { 0, INFINITY, "lr" }, { 0, -1, "lr" }, { 0, 0, "lr" },
        { 2, NAN, "beta1" }, { 3, 1, "beta2" }, { 4, -INFINITY, "epsilon" },
        { 6, NAN, "weight_decay" }, { 7, NAN, "clip_value" }, { 7, INFINITY, "clip_value" },
        { 7, -1, "clip_value" }, { 8, NAN, "clip_norm" }, { 8, -1, "clip_norm" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        memcpy (data, good, size);
        uint64_t bits;
        memcpy (&bits, &cases [i].value, sizeof bits);
        ps_put_u64 (data + OFF_DOUBLES + 8 * (size_t) cases [i].field, bits);
        s_store_with_crc (path, data, size);
        s_assert_read_fails (path, PS_ECORRUPT, cases [i].expect);
    }
    //  The same bytes with the good values read back.
    s_store_with_crc (path, good, size);
    ps_snapshot_t back;
    assert_int_equal (ps_snapshot_read (path, &back, NULL), PS_OK);
    ps_snapshot_release (&back);
    free (data);
    free (good);
    s_unmake (&snap);
}

static void
test_missing_and_unwritable (void **state)
{
    fixture_t *fx = *state;
    char path [320];
    snprintf (path, sizeof path, "%s/absent.snap", fx->dir);
    s_assert_read_fails (path, PS_ENOTFOUND, "not found");

    ps_snapshot_t snap;
    s_make (&snap, PS_OPT_SGD, 6);
    snprintf (path, sizeof path, "%s/no/such/dir/x.snap", fx->dir);
    ps_error_t err = { 0 };
    assert_int_equal (ps_snapshot_write (path, &snap, &err), PS_EIO);
    assert_int_equal (err.code, PS_EIO);
    assert_non_null (strstr (err.msg, path));
    assert_non_null (strstr (err.msg, "open"));
    assert_non_null (strstr (err.msg, "No such file or directory"));

    //  A failing rename (the target is a non-empty directory) removes the
    //  temporary file and leaves the target alone.
    char inner [352];
    snprintf (path, sizeof path, "%s/target.snap", fx->dir);
    snprintf (inner, sizeof inner, "%s/keep", path);
    assert_int_equal (mkdir (path, 0700), 0);
    s_store (inner, (const uint8_t *) "x", 1);
    assert_int_equal (ps_snapshot_write (path, &snap, &err), PS_EIO);
    assert_non_null (strstr (err.msg, path));
    assert_non_null (strstr (err.msg, "rename"));
    assert_int_equal (harness_dir_entries (fx->dir), 1);
    assert_int_equal (harness_dir_entries (path), 1);
    assert_int_equal (unlink (inner), 0);
    assert_int_equal (rmdir (path), 0);

    //  An invalid snapshot is refused before any file is created.
    snap.row_end = 11;
    assert_int_equal (ps_snapshot_write (fx->path, &snap, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, fx->path));
    assert_non_null (strstr (err.msg, "row range"));
    assert_int_equal (harness_dir_entries (fx->dir), 0);
    s_unmake (&snap);
}

static void
s_assert_filename (const char *var, uint32_t part, const char *expect)
{
    char buf [512];
    assert_int_equal (ps_snapshot_filename (var, part, buf, sizeof buf), PS_OK);
    assert_string_equal (buf, expect);
    //  The exact size fits; one byte less does not.
    size_t need = strlen (expect) + 1;
    assert_int_equal (ps_snapshot_filename (var, part, buf, need), PS_OK);
    assert_string_equal (buf, expect);
    assert_int_equal (ps_snapshot_filename (var, part, buf, need - 1), PS_EINVAL);
}

static void
test_filename (void **state)
{
    (void) state;
    s_assert_filename ("dense_1/kernel", 0, "dense_1%2Fkernel.part0.snap");
    s_assert_filename ("Az09_.-", 4294967295u, "Az09_.-.part4294967295.snap");
    s_assert_filename ("a b:c", 12, "a%20b%3Ac.part12.snap");
    s_assert_filename ("100%", 1, "100%25.part1.snap");
    s_assert_filename ("\x7f~\xff", 2, "%7F%7E%FF.part2.snap");
    s_assert_filename ("", 0, ".part0.snap");

    //  Escaping "%" keeps the mapping injective.
    char a [64], b [64];
    assert_int_equal (ps_snapshot_filename ("a/b", 0, a, sizeof a), PS_OK);
    assert_int_equal (ps_snapshot_filename ("a%2Fb", 0, b, sizeof b), PS_OK);
    assert_string_equal (a, "a%2Fb.part0.snap");
    assert_string_equal (b, "a%252Fb.part0.snap");
    assert_string_not_equal (a, b);
    assert_int_equal (ps_snapshot_filename ("x", 0, a, 0), PS_EINVAL);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_round_trip, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_overwrite_and_edges, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_truncated, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_flipped_byte, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_inconsistent_fields, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_bad_optimizer_values, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_missing_and_unwritable, s_setup,
                                         harness_dir_teardown),
        cmocka_unit_test (test_filename),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
