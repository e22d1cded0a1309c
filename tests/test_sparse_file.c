//  Unit tests for embedding table snapshots (ps_sparse_save and
//  ps_sparse_load, common/store/ps_sparse.c and ps_sparse_file.c): full and
//  incremental round trips of every optimizer kind with their slots and
//  the admission counters (DeepRec #999, TFRA #451), a row updated between
//  the full and the incremental snapshot, rows created and evicted in
//  between, a restored table that goes on exactly as the original, the
//  list of evicted ids bounded by the full snapshot while new ids churn
//  through a capacity, a row of the full snapshot evicted twice, and
//  the refusals: truncated and bit-flipped files, fields changed under a
//  good checksum, an incremental snapshot applied to the wrong full one,
//  missing files, and an incremental save with no full one. Every case
//  works in a directory of its own.

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
#include "harness_rand.h"
#include "ps_bytes.h"
#include "ps_sparse.h"
#include "ps_sparse_file.h"

typedef struct {
    char dir [HARNESS_DIR_SIZE];
    char full [256];
    char full2 [256];
    char incr [256];
    char bad [256];
} fixture_t;

static int
s_setup (void **state)
{
    int rc = harness_dir_setup (state, sizeof (fixture_t));
    if (rc == 0) {
        fixture_t *fx = *state;
        snprintf (fx->full, sizeof fx->full, "%s/emb.full", fx->dir);
        snprintf (fx->full2, sizeof fx->full2, "%s/emb2.full", fx->dir);
        snprintf (fx->incr, sizeof fx->incr, "%s/emb.incr", fx->dir);
        snprintf (fx->bad, sizeof fx->bad, "%s/bad.snap", fx->dir);
    }
    return rc;
}

#define DIM    6
#define BATCH  96

//  Push number k of a run: BATCH distinct ids, hot ones and ones seen at
//  two pushes in a row (admitted at the second), random gradients, at
//  step k.
static void
s_push (ps_sparse_t *table, uint64_t k)
{
    uint64_t ids [BATCH];
    float grads [BATCH * DIM];
    uint64_t rng = k * 31 + 7;
    for (int i = 0; i < BATCH; i++) {
        ids [i] = i % 3 ? (uint64_t) i : k / 2 * 1000 + (uint64_t) i;
        for (int j = 0; j < DIM; j++)
            grads [i * DIM + j] = (float) (harness_unit (&rng) - 0.5);
    }
    ps_sparse_push_result_t result;
    harness_ok (ps_sparse_push (table, k, ids, BATCH, grads, &result), NULL);
}

static void
s_assert_same (ps_sparse_t *a, ps_sparse_t *b)
{
    char diff [256];
    if (ps_sparse_differs (a, b, diff, sizeof diff))
        fail_msg ("restored table differs: %s", diff);
}

static ps_sparse_t *
s_load (const char *full, const char *incr)
{
    ps_error_t err;
    ps_sparse_t *table = ps_sparse_load (full, incr, &err);
    if (!table)
        fail_msg ("load %s + %s: %s", full, incr ? incr : "-", err.msg);
    return table;
}

//  A spec with every feature in play: admission after 2 pushes, a
//  capacity that evicts, a TTL.
static void
s_spec (ps_tablespec_t *spec, ps_rowopt_kind_t kind)
{
    ps_tablespec_default (spec, "emb_c3", DIM);
    ps_rowopt_default (&spec->opt, kind);
    spec->opt.l1 = 0.001;
    spec->admit_count = 2;
    spec->capacity = 700;
    spec->ttl = 12;
    spec->policy = PS_EVICT_LFU;
    spec->shard_seed = 11;
}

//  Full snapshot, restore, and both tables go on alike, for each kind.
static void
test_full_round_trip (void **state)
{
    const fixture_t *fx = *state;
    for (int kind = PS_ROWOPT_SGD; kind <= PS_ROWOPT_FTRL; kind++) {
        ps_tablespec_t spec;
        s_spec (&spec, (ps_rowopt_kind_t) kind);
        ps_sparse_t *table = ps_sparse_new (&spec, NULL);
        for (uint64_t k = 1; k <= 30; k++)
            s_push (table, k);
        ps_error_t err;
        harness_ok (ps_sparse_save (table, fx->full, true, &err), &err);
        ps_sparse_t *copy = s_load (fx->full, NULL);
        s_assert_same (table, copy);
        s_assert_same (table, table);
        ps_sparse_stats_t stats;
        ps_sparse_stats (copy, &stats);
        assert_true (stats.rows > 150);
        assert_int_equal (ps_sparse_steps_applied (copy), 30);
        //  The restored table admits, evicts and updates as the original.
        for (uint64_t k = 31; k <= 50; k++) {
            s_push (table, k);
            s_push (copy, k);
        }
        s_assert_same (table, copy);
        //  The step ledger came back: a step is not applied twice.
        ps_sparse_push_result_t result;
        uint64_t id = 1;
        float grad [DIM] = { 1, 1, 1, 1, 1, 1 };
        assert_int_equal (ps_sparse_push (copy, 7, &id, 1, grad, &result), PS_DUPLICATE);
        ps_sparse_destroy (&copy);
        ps_sparse_destroy (&table);
    }
}

//  Incremental snapshots: rows updated, created and evicted after the full
//  one come back, cumulatively; a restored table writes incremental
//  snapshots that follow the same full one.
static void
test_incremental_round_trip (void **state)
{
    const fixture_t *fx = *state;
    for (int kind = PS_ROWOPT_ADAGRAD; kind <= PS_ROWOPT_FTRL; kind++) {
        ps_tablespec_t spec;
        s_spec (&spec, (ps_rowopt_kind_t) kind);
        ps_sparse_t *table = ps_sparse_new (&spec, NULL);
        ps_error_t err;
        for (uint64_t k = 1; k <= 20; k++)
            s_push (table, k);
        harness_ok (ps_sparse_save (table, fx->full, true, &err), &err);
        ps_sparse_stats_t before, after;
        ps_sparse_stats (table, &before);
        for (uint64_t k = 21; k <= 30; k++)
            s_push (table, k);
        ps_sparse_stats (table, &after);
        assert_true (after.evicted > before.evicted);
        assert_true (after.created > before.created);
        harness_ok (ps_sparse_save (table, fx->incr, false, &err), &err);
        ps_sparse_t *copy = s_load (fx->full, fx->incr);
        s_assert_same (table, copy);

        //  The incremental file is smaller than a full one would be.
        size_t full_len, incr_len;
        free (harness_slurp (fx->full, &full_len));
        free (harness_slurp (fx->incr, &incr_len));
        assert_true (incr_len < full_len);

        //  Cumulative: a second incremental replaces the first.
        for (uint64_t k = 31; k <= 36; k++) {
            s_push (table, k);
            s_push (copy, k);
        }
        harness_ok (ps_sparse_save (table, fx->incr, false, &err), &err);
        ps_sparse_t *again = s_load (fx->full, fx->incr);
        s_assert_same (table, again);
        //  The restored copy writes the same incremental snapshot, which
        //  belongs to the same full one.
        harness_ok (ps_sparse_save (copy, fx->bad, false, &err), &err);
        ps_sparse_t *from_copy = s_load (fx->full, fx->bad);
        s_assert_same (table, from_copy);
        ps_sparse_destroy (&from_copy);
        ps_sparse_destroy (&again);
        ps_sparse_destroy (&copy);

        //  A new full snapshot starts the marks again.
        harness_ok (ps_sparse_save (table, fx->full, true, &err), &err);
        harness_ok (ps_sparse_save (table, fx->incr, false, &err), &err);
        ps_sparse_file_t file;
        harness_ok (ps_sparse_file_open (fx->incr, &file, &err), &err);
        for (int s = 0; s < PS_SPARSE_STRIPES; s++) {
            assert_int_equal (file.sections [s].nrows, 0);
            assert_int_equal (file.sections [s].nevicted, 0);
        }
        ps_sparse_file_close (&file);
        copy = s_load (fx->full, fx->incr);
        s_assert_same (table, copy);
        ps_sparse_destroy (&copy);
        ps_sparse_destroy (&table);
    }
}

//  One row updated between the full and the incremental snapshot, one
//  evicted: the restore has the new value and slots, and not the row.
static void
test_update_and_evict_between (void **state)
{
    const fixture_t *fx = *state;
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "emb_small", 2);
    ps_rowopt_default (&spec.opt, PS_ROWOPT_ADAM);
    spec.ttl = 2;
    ps_sparse_t *table = ps_sparse_new (&spec, NULL);
    ps_error_t err;
    //  a and b share a stripe, so that b's pushes sweep a's.
    uint64_t a = 42, b = 43;
    while (ps_sparse_stripe_of (b) != ps_sparse_stripe_of (a))
        b++;
    float g [2] = { 0.25f, -0.5f };
    ps_sparse_push_result_t result;
    harness_ok (ps_sparse_push (table, 1, &a, 1, g, &result), NULL);
    harness_ok (ps_sparse_push (table, 2, &b, 1, g, &result), NULL);
    harness_ok (ps_sparse_save (table, fx->full, true, &err), &err);
    float full_b [2];
    ps_sparse_pull (table, &b, 1, full_b);
    //  b is updated; a is left behind and its TTL runs out at step 4.
    harness_ok (ps_sparse_push (table, 3, &b, 1, g, &result), NULL);
    harness_ok (ps_sparse_push (table, 4, &b, 1, g, &result), NULL);
    assert_int_equal (result.evicted, 1);
    harness_ok (ps_sparse_save (table, fx->incr, false, &err), &err);
    ps_sparse_t *copy = s_load (fx->full, fx->incr);
    s_assert_same (table, copy);
    ps_sparse_stats_t stats;
    ps_sparse_stats (copy, &stats);
    assert_int_equal (stats.rows, 1);
    float got [2];
    ps_sparse_pull (copy, &b, 1, got);
    assert_memory_not_equal (got, full_b, sizeof got);
    //  Without the incremental file: the full one's state, a included.
    ps_sparse_t *old = s_load (fx->full, NULL);
    ps_sparse_stats (old, &stats);
    assert_int_equal (stats.rows, 2);
    ps_sparse_pull (old, &b, 1, got);
    assert_memory_equal (got, full_b, sizeof got);
    ps_sparse_destroy (&old);
    ps_sparse_destroy (&copy);
    ps_sparse_destroy (&table);
}

//  An incremental snapshot belongs to the full snapshot it was written
//  after; any other pairing is refused, naming the files.
static void
test_wrong_pairings (void **state)
{
    const fixture_t *fx = *state;
    ps_tablespec_t spec;
    s_spec (&spec, PS_ROWOPT_ADAGRAD);
    ps_sparse_t *table = ps_sparse_new (&spec, NULL);
    ps_error_t err;
    //  No full snapshot yet: no incremental one.
    assert_int_equal (ps_sparse_save (table, fx->incr, false, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "no full snapshot"));
    s_push (table, 1);
    harness_ok (ps_sparse_save (table, fx->full, true, &err), &err);
    s_push (table, 2);
    harness_ok (ps_sparse_save (table, fx->full2, true, &err), &err);
    s_push (table, 3);
    harness_ok (ps_sparse_save (table, fx->incr, false, &err), &err);
    assert_null (ps_sparse_load (fx->full, fx->incr, &err));
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, fx->incr));
    assert_non_null (strstr (err.msg, "not"));
    ps_sparse_t *copy = s_load (fx->full2, fx->incr);
    s_assert_same (table, copy);
    ps_sparse_destroy (&copy);
    assert_null (ps_sparse_load (fx->incr, NULL, &err));
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "expected a full one"));
    assert_null (ps_sparse_load (fx->full, fx->full2, &err));
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "expected an incremental one"));
    ps_sparse_destroy (&table);
}

//  A file cut anywhere is refused, naming it; so is every single flipped
//  bit (sampled), by the checksum.
static void
test_damaged_files (void **state)
{
    const fixture_t *fx = *state;
    ps_tablespec_t spec;
    s_spec (&spec, PS_ROWOPT_FTRL);
    ps_sparse_t *table = ps_sparse_new (&spec, NULL);
    for (uint64_t k = 1; k <= 5; k++)
        s_push (table, k);
    ps_error_t err;
    harness_ok (ps_sparse_save (table, fx->full, true, &err), &err);
    size_t len;
    uint8_t *data = harness_slurp (fx->full, &len);
    size_t cuts [] = { 0, 5, 11, 12, 100, PS_SPARSE_FILE_HEADER, PS_SPARSE_FILE_HEADER + 3,
                       len / 2, len - 4, len - 1 };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts [0]; i++) {
        harness_spit (fx->bad, data, cuts [i]);
        assert_null (ps_sparse_load (fx->bad, NULL, &err));
        if (err.code != PS_ECORRUPT || !strstr (err.msg, fx->bad))
            fail_msg ("cut at %zu: %s (%d), expected corrupt naming the file", cuts [i],
                      err.msg, err.code);
    }
    uint64_t rng = 3;
    for (int i = 0; i < 200; i++) {
        size_t at = (size_t) (harness_splitmix (&rng) % len);
        uint8_t bit = (uint8_t) (1u << (harness_splitmix (&rng) % 8));
        data [at] ^= bit;
        harness_spit (fx->bad, data, len);
        data [at] ^= bit;
        assert_null (ps_sparse_load (fx->bad, NULL, &err));
        //  The version field gets its own code; every other byte fails
        //  the magic or the checksum.
        int expect = at >= 8 && at < 12 ? PS_EVERSION : PS_ECORRUPT;
        if (err.code != expect || !strstr (err.msg, fx->bad))
            fail_msg ("bit flipped at byte %zu: %s (%d), expected %d naming the file", at,
                      err.msg, err.code, expect);
    }
    free (data);
    ps_sparse_destroy (&table);
}

//  Rewrite the checksum of data [0, len) after an edit.
static void
s_reseal (uint8_t *data, size_t len)
{
    ps_put_u32 (data + len - 4, (uint32_t) crc32 (0, data, (uInt) (len - 4)));
}

static void
s_assert_refused (const fixture_t *fx, const uint8_t *data, size_t len, int code,
                  const char *words)
{
    ps_error_t err;
    harness_spit (fx->bad, data, len);
    assert_null (ps_sparse_load (fx->bad, NULL, &err));
    if (err.code != code || !strstr (err.msg, fx->bad) || !strstr (err.msg, words))
        fail_msg ("got '%s' (%d), expected %d with '%s'", err.msg, err.code, code, words);
}

//  Fields that are wrong under a good checksum: each refused with a
//  message that says what is wrong.
static void
test_bad_fields (void **state)
{
    const fixture_t *fx = *state;
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "emb", 2);
    ps_sparse_t *table = ps_sparse_new (&spec, NULL);
    uint64_t ids [3] = { 1, 2, 3 };
    float grads [6] = { 1, 2, 3, 4, 5, 6 };
    ps_sparse_push_result_t result;
    harness_ok (ps_sparse_push (table, 1, ids, 3, grads, &result), NULL);
    ps_error_t err;
    harness_ok (ps_sparse_save (table, fx->full, true, &err), &err);
    size_t len;
    uint8_t *data = harness_slurp (fx->full, &len);
    uint8_t *copy = malloc (len + 8);

    memcpy (copy, data, len);
    ps_put_u32 (copy + 8, 2);
    s_reseal (copy, len);
    s_assert_refused (fx, copy, len, PS_EVERSION, "format version 2");

    memcpy (copy, data, len);
    ps_put_u32 (copy + 28, 32);
    s_reseal (copy, len);
    s_assert_refused (fx, copy, len, PS_ECORRUPT, "32 stripes");

    memcpy (copy, data, len);
    ps_put_u32 (copy + 160, 0);
    s_reseal (copy, len);
    s_assert_refused (fx, copy, len, PS_ECORRUPT, "dim is 0");

    memcpy (copy, data, len);
    ps_put_u32 (copy + 12, 1);
    s_reseal (copy, len);
    ps_error_t load_err;
    harness_spit (fx->bad, copy, len);
    assert_null (ps_sparse_load (fx->bad, NULL, &load_err));
    assert_non_null (strstr (load_err.msg, "expected a full one"));

    //  A row's id moved to another stripe's section: find the first row
    //  (the only section with rows is that of ids 1..3's stripes).
    ps_sparse_file_t file;
    harness_ok (ps_sparse_file_open (fx->full, &file, &err), &err);
    size_t row_at = 0;
    for (int s = 0; s < PS_SPARSE_STRIPES && !row_at; s++)
        if (file.sections [s].nrows)
            row_at = (size_t) (file.sections [s].rows - (const uint8_t *) file.map);
    ps_sparse_file_close (&file);
    memcpy (copy, data, len);
    uint64_t other = 4;
    while (ps_sparse_stripe_of (other) == ps_sparse_stripe_of (ps_get_u64 (copy + row_at)))
        other++;
    ps_put_u64 (copy + row_at, other);
    s_reseal (copy, len);
    s_assert_refused (fx, copy, len, PS_ECORRUPT, "expected stripe");

    //  A row never updated, and one from after the newest step.
    memcpy (copy, data, len);
    ps_put_u64 (copy + row_at + 16, 0);
    s_reseal (copy, len);
    s_assert_refused (fx, copy, len, PS_ECORRUPT, "expected at least one");
    memcpy (copy, data, len);
    ps_put_u64 (copy + row_at + 8, 99);
    s_reseal (copy, len);
    s_assert_refused (fx, copy, len, PS_ECORRUPT, "none after step 1");

    //  Extra bytes at the end.
    memcpy (copy, data, len - 4);
    memset (copy + len - 4, 0, 8);
    s_reseal (copy, len + 4);
    s_assert_refused (fx, copy, len + 4, PS_ECORRUPT, "after the last stripe");

    //  Not a table file at all, a missing one, a directory.
    memset (copy, 'x', len);
    s_assert_refused (fx, copy, len, PS_ECORRUPT, "bad magic");
    assert_null (ps_sparse_load ("/nonexistent/emb.full", NULL, &err));
    assert_int_equal (err.code, PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "/nonexistent/emb.full"));
    assert_null (ps_sparse_load (fx->dir, NULL, &err));
    assert_int_equal (err.code, PS_EINVAL);
    free (copy);
    free (data);
    ps_sparse_destroy (&table);
}

//  An incremental file that holds one row twice (its second copy would
//  silently replace the first) is refused, naming the row.
static void
test_incremental_row_twice (void **state)
{
    const fixture_t *fx = *state;
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "emb", 2);
    ps_sparse_t *table = ps_sparse_new (&spec, NULL);
    ps_error_t err;
    harness_ok (ps_sparse_save (table, fx->full, true, &err), &err);
    //  Enough rows that some stripe holds two of them.
    uint64_t ids [512];
    float grads [1024];
    for (int i = 0; i < 512; i++) {
        ids [i] = (uint64_t) i + 1;
        grads [2 * i] = grads [2 * i + 1] = 0.5f;
    }
    ps_sparse_push_result_t result;
    harness_ok (ps_sparse_push (table, 1, ids, 512, grads, &result), NULL);
    harness_ok (ps_sparse_save (table, fx->incr, false, &err), &err);
    size_t len;
    uint8_t *data = harness_slurp (fx->incr, &len);
    ps_sparse_file_t file;
    harness_ok (ps_sparse_file_open (fx->incr, &file, &err), &err);
    size_t row_bytes = ps_sparse_file_row_bytes (&spec);
    size_t first = 0;
    for (int s = 0; s < PS_SPARSE_STRIPES && !first; s++)
        if (file.sections [s].nrows >= 2)
            first = (size_t) (file.sections [s].rows - (const uint8_t *) file.map);
    ps_sparse_file_close (&file);
    assert_true (first > 0);
    uint64_t id = ps_get_u64 (data + first);
    ps_put_u64 (data + first + row_bytes, id);
    s_reseal (data, len);
    harness_spit (fx->bad, data, len);
    assert_null (ps_sparse_load (fx->full, fx->bad, &err));
    assert_int_equal (err.code, PS_ECORRUPT);
    char words [64];
    snprintf (words, sizeof words, "row %llu appears twice", (unsigned long long) id);
    if (!strstr (err.msg, words) || !strstr (err.msg, fx->bad))
        fail_msg ("got '%s', expected '%s' naming %s", err.msg, words, fx->bad);
    free (data);
    ps_sparse_destroy (&table);
}

//  A save that cannot be written reports the path; a failed full save
//  leaves no full snapshot to be incremental to.
static void
test_failed_save (void **state)
{
    const fixture_t *fx = *state;
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "emb", 2);
    ps_sparse_t *table = ps_sparse_new (&spec, NULL);
    s_push (table, 1);
    ps_error_t err;
    harness_ok (ps_sparse_save (table, fx->full, true, &err), &err);
    harness_ok (ps_sparse_save (table, fx->incr, false, &err), &err);
    char path [300];
    snprintf (path, sizeof path, "%s/missing/emb.full", fx->dir);
    assert_int_equal (ps_sparse_save (table, path, true, &err), PS_EIO);
    assert_non_null (strstr (err.msg, path));
    assert_int_equal (ps_sparse_save (table, fx->incr, false, &err), PS_EINVAL);
    harness_ok (ps_sparse_save (table, fx->full, true, &err), &err);
    harness_ok (ps_sparse_save (table, fx->incr, false, &err), &err);
    ps_sparse_t *copy = s_load (fx->full, fx->incr);
    s_assert_same (table, copy);
    ps_sparse_destroy (&copy);
    ps_sparse_destroy (&table);
}

//  A table that keeps seeing new ids under capacity eviction after a full
//  snapshot: its memory stays flat, since an id is listed as evicted for
//  the next incremental snapshot only when the full file holds it, so the
//  list is bounded by the full snapshot's rows however many rows come and
//  go after it. The incremental snapshot still restores the table exactly.
static void
test_evicted_list_bounded (void **state)
{
    const fixture_t *fx = *state;
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "emb_churn", 2);
    spec.capacity = 640;
    ps_sparse_t *table = ps_sparse_new (&spec, NULL);
    ps_error_t err;
    enum { IDS = 256 };
    uint64_t ids [IDS];
    float grads [2 * IDS];
    for (int i = 0; i < 2 * IDS; i++)
        grads [i] = 0.5f;
    ps_sparse_push_result_t result;
    //  Every push brings IDS ids never seen before.
    uint64_t step = 0, next_id = 1;
    for (; step < 10; ) {
        for (int i = 0; i < IDS; i++)
            ids [i] = next_id++;
        harness_ok (ps_sparse_push (table, ++step, ids, IDS, grads, &result), NULL);
    }
    harness_ok (ps_sparse_save (table, fx->full, true, &err), &err);
    ps_sparse_stats_t base, mid, end;
    ps_sparse_stats (table, &base);
    uint64_t mid_step = step + 40, end_step = step + 400;
    while (step < end_step) {
        for (int i = 0; i < IDS; i++)
            ids [i] = next_id++;
        harness_ok (ps_sparse_push (table, ++step, ids, IDS, grads, &result), NULL);
        if (step == mid_step)
            ps_sparse_stats (table, &mid);
    }
    ps_sparse_stats (table, &end);
    assert_true (end.evicted - mid.evicted > 80000);
    if (end.bytes > mid.bytes)
        fail_msg ("table bytes grew from %llu to %llu over %llu evictions of rows created "
                  "after the full snapshot, expected them flat",
                  (unsigned long long) mid.bytes, (unsigned long long) end.bytes,
                  (unsigned long long) (end.evicted - mid.evicted));
    harness_ok (ps_sparse_save (table, fx->incr, false, &err), &err);
    ps_sparse_file_t file;
    harness_ok (ps_sparse_file_open (fx->incr, &file, &err), &err);
    uint64_t listed = 0;
    for (int s = 0; s < PS_SPARSE_STRIPES; s++)
        listed += file.sections [s].nevicted;
    ps_sparse_file_close (&file);
    assert_true (listed > 0);
    assert_true (listed <= base.rows);
    ps_sparse_t *copy = s_load (fx->full, fx->incr);
    s_assert_same (table, copy);
    ps_sparse_destroy (&copy);
    ps_sparse_destroy (&table);
}

//  A row of the full snapshot evicted, created again, the incremental
//  snapshot written (which takes its id off the evicted list, since it has
//  a row), then evicted again: the next incremental snapshot still lists
//  it, and the restore does not bring back the full file's old row.
static void
test_evicted_twice_after_full (void **state)
{
    const fixture_t *fx = *state;
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "emb_small", 2);
    spec.ttl = 2;
    ps_sparse_t *table = ps_sparse_new (&spec, NULL);
    ps_error_t err;
    //  a and b share a stripe, so that b's pushes sweep a's.
    uint64_t a = 42, b = 43;
    while (ps_sparse_stripe_of (b) != ps_sparse_stripe_of (a))
        b++;
    float g [2] = { 0.25f, -0.5f };
    ps_sparse_push_result_t result;
    harness_ok (ps_sparse_push (table, 1, &a, 1, g, &result), NULL);
    harness_ok (ps_sparse_push (table, 2, &b, 1, g, &result), NULL);
    harness_ok (ps_sparse_save (table, fx->full, true, &err), &err);
    harness_ok (ps_sparse_push (table, 3, &b, 1, g, &result), NULL);
    harness_ok (ps_sparse_push (table, 4, &b, 1, g, &result), NULL);
    assert_int_equal (result.evicted, 1);
    harness_ok (ps_sparse_push (table, 5, &a, 1, g, &result), NULL);
    assert_int_equal (result.created, 1);
    harness_ok (ps_sparse_save (table, fx->incr, false, &err), &err);
    for (uint64_t step = 6; step <= 8; step++)
        harness_ok (ps_sparse_push (table, step, &b, 1, g, &result), NULL);
    assert_int_equal (result.evicted, 1);
    harness_ok (ps_sparse_save (table, fx->incr, false, &err), &err);
    ps_sparse_t *copy = s_load (fx->full, fx->incr);
    s_assert_same (table, copy);
    ps_sparse_stats_t stats;
    ps_sparse_stats (copy, &stats);
    assert_int_equal (stats.rows, 1);
    ps_sparse_destroy (&copy);
    ps_sparse_destroy (&table);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_full_round_trip, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_incremental_round_trip, s_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_update_and_evict_between, s_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_wrong_pairings, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_damaged_files, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_bad_fields, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_incremental_row_twice, s_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_failed_save, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_evicted_list_bounded, s_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_evicted_twice_after_full, s_setup,
                                         harness_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
