//  Unit tests for a checkpoint's tables joined for export
//  (common/store/ps_ckpt_tables.c), against the restore itself: two shards
//  of a table under capacity eviction are saved full, trained on (rows
//  updated, new ones created, old ones evicted) and saved incrementally,
//  into two checkpoint directories whose manifests say so. The join of the
//  incremental checkpoint must hold exactly the rows ps_sparse_load (what
//  a server restores) gives each shard from the same files, with their
//  values, ids ascending; the full checkpoint's likewise. Then the
//  refusals: a shard file missing, a base that is gone, a manifest's row
//  width that is not the files', a file of another table.

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

#include "harness_case.h"
#include "ps_ckpt_tables.h"
#include "ps_sparse.h"
#include "ps_sparse_file.h"

#define S_SHARDS  2
#define S_DIM     3
#define S_SEED    7

typedef struct {
    char dir [HARNESS_DIR_SIZE];
    char full [HARNESS_DIR_SIZE + 32];      //  ckpt-000000000010: full files
    char incr [HARNESS_DIR_SIZE + 32];      //  ckpt-000000000020: incremental ones
    ps_sparse_t *live [S_SHARDS];
} fixture_t;

//  Push ids [first, last) that shard k holds, one step each batch of 16.
static void
s_train (ps_sparse_t *table, uint32_t k, uint64_t *step, uint64_t first, uint64_t last)
{
    uint64_t ids [16];
    float grads [16 * S_DIM];
    size_t n = 0;
    for (uint64_t id = first; id <= last; id++) {
        if (id < last && ps_tablespec_shard_of (id, S_SEED, S_SHARDS) == k)
            ids [n++] = id;
        if (n == 16 || (id == last && n > 0)) {
            for (size_t i = 0; i < n * S_DIM; i++)
                grads [i] = (float) ((ids [i / S_DIM] * 7 + i) % 11) * 0.01f - 0.05f;
            ps_sparse_push_result_t result;
            assert_int_equal (ps_sparse_push (table, ++*step, ids, n, grads, &result), 0);
            n = 0;
        }
    }
}

static void
s_write (const char *path, const char *text)
{
    harness_spit (path, (const uint8_t *) text, strlen (text));
}

//  A manifest for checkpoint dir at step, with the table's files, and a
//  base when incremental.
static void
s_manifest (const char *dir, uint64_t step, bool full, const char *base)
{
    char files [1024] = "";
    size_t at = 0;
    for (uint32_t k = 0; k < S_SHARDS; k++)
        at += (size_t) snprintf (files + at, sizeof files - at, "%s{\"file\": "
                                 "\"emb.shard%uof%d.%s.table\", \"server\": %u, \"table\": "
                                 "\"emb\", \"shard\": %u, \"shards\": %d, \"full\": %s, "
                                 "\"rows\": 0, \"steps\": 0}", k ? ", " : "", k, S_SHARDS,
                                 full ? "full" : "incr", k, k, S_SHARDS,
                                 full ? "true" : "false");
    char text [2048], path [HARNESS_DIR_SIZE + 64];
    snprintf (text, sizeof text, "{\"format\": \"ps-cluster-checkpoint\", \"version\": 1, "
              "\"step\": %llu, \"created\": \"2026-01-01T00:00:00Z\", \"tables\": "
              "{\"shards\": %d, \"specs\": [{\"name\": \"emb\", \"dim\": %d}], \"files\": "
              "[%s]}%s%s%s, \"files\": []}\n", (unsigned long long) step, S_SHARDS, S_DIM, files,
              base ? ", \"base\": \"" : "", base ? base : "", base ? "\"" : "");
    snprintf (path, sizeof path, "%s/MANIFEST.json", dir);
    s_write (path, text);
}

static int
s_setup (void **state)
{
    int rc = harness_dir_setup (state, sizeof (fixture_t));
    fixture_t *f = *state;
    snprintf (f->full, sizeof f->full, "%s/ckpt-000000000010", f->dir);
    snprintf (f->incr, sizeof f->incr, "%s/ckpt-000000000020", f->dir);
    assert_int_equal (mkdir (f->full, 0755), 0);
    assert_int_equal (mkdir (f->incr, 0755), 0);
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "emb", S_DIM);
    spec.shard_seed = S_SEED;
    spec.capacity = 256;            //  4 rows a stripe: ids 1..1200 evict
    char path [HARNESS_DIR_SIZE + 64];
    ps_error_t err;
    for (uint32_t k = 0; k < S_SHARDS; k++) {
        f->live [k] = ps_sparse_new (&spec, &err);
        assert_non_null (f->live [k]);
        uint64_t step = 0;
        s_train (f->live [k], k, &step, 1, 400);
        snprintf (path, sizeof path, "%s/emb.shard%uof%d.full.table", f->full, k, S_SHARDS);
        harness_ok (ps_sparse_save (f->live [k], path, true, &err), &err);
        //  Old ids again (updated), then new ones (created, evicting).
        s_train (f->live [k], k, &step, 1, 100);
        s_train (f->live [k], k, &step, 400, 1200);
        snprintf (path, sizeof path, "%s/emb.shard%uof%d.incr.table", f->incr, k, S_SHARDS);
        harness_ok (ps_sparse_save (f->live [k], path, false, &err), &err);
    }
    s_manifest (f->full, 10, true, NULL);
    s_manifest (f->incr, 20, false, "ckpt-000000000010");
    return rc;
}

static int
s_teardown (void **state)
{
    fixture_t *f = *state;
    for (uint32_t k = 0; k < S_SHARDS; k++)
        ps_sparse_destroy (&f->live [k]);
    return harness_dir_teardown (state);
}

static json_t *
s_load_manifest (const char *dir)
{
    char path [HARNESS_DIR_SIZE + 64];
    snprintf (path, sizeof path, "%s/MANIFEST.json", dir);
    json_t *manifest = json_load_file (path, 0, NULL);
    assert_non_null (manifest);
    return manifest;
}

//  Join the checkpoint at dir and compare it with what ps_sparse_load
//  restores from the same files (base: the full checkpoint, when dir is
//  incremental). Returns the evicted ids the incremental files list.
static uint64_t
s_check_join (const fixture_t *f, const char *dir, bool incremental)
{
    json_t *manifest = s_load_manifest (dir);
    ps_error_t err;
    ps_ckpt_tables_t *tables = ps_ckpt_tables_read (dir, manifest, &err);
    json_decref (manifest);
    if (!tables)
        fail_msg ("%s", err.msg);
    assert_int_equal (ps_ckpt_tables_count (tables), 1);
    assert_string_equal (ps_ckpt_tables_spec (tables, 0)->name, "emb");
    uint64_t n = ps_ckpt_tables_rows (tables, 0);
    ps_tensor_t ids_t, emb_t;
    assert_int_equal (ps_ckpt_tables_tensors (tables, 0, &ids_t, &emb_t), 2);
    assert_int_equal (ids_t.dtype, PS_DTYPE_U64);
    assert_int_equal (ids_t.shape.dims [0], (int64_t) n);
    assert_int_equal (emb_t.shape.rank, 2);
    assert_int_equal (emb_t.shape.dims [1], S_DIM);
    uint64_t *ids = malloc (n * 8 + 8);
    float *emb = malloc (n * S_DIM * sizeof (float) + 4);
    assert_true (ids && emb);
    //  Filled in uneven pieces, as a writer's buffer might cut them.
    for (uint64_t at = 0; at < n * 8; at += 13)
        ids_t.fill (ids_t.fill_arg, at, (uint8_t *) ids + at, n * 8 - at < 13 ? n * 8 - at : 13);
    emb_t.fill (emb_t.fill_arg, 0, emb, n * S_DIM * sizeof (float));
    for (uint64_t i = 0; i < n; i++)
        assert_int_equal (ids [i], ps_ckpt_tables_id (tables, 0, i));
    for (uint64_t i = 1; i < n; i++)
        assert_true (ids [i - 1] < ids [i]);

    //  The restore of each shard from the same files.
    uint64_t restored_rows = 0, evicted = 0;
    for (uint32_t k = 0; k < S_SHARDS; k++) {
        char full [HARNESS_DIR_SIZE + 64], incr [HARNESS_DIR_SIZE + 64];
        snprintf (full, sizeof full, "%s/emb.shard%uof%d.full.table", f->full, k, S_SHARDS);
        snprintf (incr, sizeof incr, "%s/emb.shard%uof%d.incr.table", f->incr, k, S_SHARDS);
        ps_sparse_t *restored = ps_sparse_load (full, incremental ? incr : NULL, &err);
        if (!restored)
            fail_msg ("%s", err.msg);
        ps_sparse_stats_t stats;
        ps_sparse_stats (restored, &stats);
        restored_rows += stats.rows;
        for (uint64_t i = 0; i < n; i++) {
            if (ps_tablespec_shard_of (ids [i], S_SEED, S_SHARDS) != k)
                continue;
            assert_int_equal (ps_sparse_count_absent (restored, &ids [i], 1), 0);
            float row [S_DIM];
            ps_sparse_pull (restored, &ids [i], 1, row);
            assert_memory_equal (row, emb + i * S_DIM, sizeof row);
        }
        if (incremental) {
            //  The live table is what was restored, too.
            ps_sparse_stats_t live;
            ps_sparse_stats (f->live [k], &live);
            assert_int_equal (live.rows, stats.rows);
            ps_sparse_file_t file;
            harness_ok (ps_sparse_file_open (incr, &file, &err), &err);
            for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++)
                evicted += file.sections [s].nevicted;
            ps_sparse_file_close (&file);
        }
        ps_sparse_destroy (&restored);
    }
    assert_int_equal (n, restored_rows);
    free (ids);
    free (emb);
    ps_ckpt_tables_destroy (&tables);
    assert_null (tables);
    return evicted;
}

static void
test_joins_as_restored (void **state)
{
    fixture_t *f = *state;
    assert_int_equal (s_check_join (f, f->full, false), 0);
    //  The incremental files list evicted ids: the case is exercised.
    assert_true (s_check_join (f, f->incr, true) > 0);
}

//  Read dir's tables and expect code with a message holding words.
static void
s_refused (const char *dir, int code, const char *words)
{
    json_t *manifest = s_load_manifest (dir);
    ps_error_t err;
    ps_ckpt_tables_t *tables = ps_ckpt_tables_read (dir, manifest, &err);
    json_decref (manifest);
    assert_null (tables);
    assert_int_equal (err.code, code);
    if (!strstr (err.msg, words))
        fail_msg ("expected \"%s\" in: %s", words, err.msg);
}

static void
test_refusals (void **state)
{
    fixture_t *f = *state;
    char path [HARNESS_DIR_SIZE + 64], moved [HARNESS_DIR_SIZE + 64];
    //  A shard file that is not there.
    snprintf (path, sizeof path, "%s/emb.shard1of2.incr.table", f->incr);
    snprintf (moved, sizeof moved, "%s/moved", f->dir);
    assert_int_equal (rename (path, moved), 0);
    s_refused (f->incr, PS_ENOTFOUND, "emb.shard1of2.incr.table");
    assert_int_equal (rename (moved, path), 0);
    //  The base gone.
    snprintf (moved, sizeof moved, "%s/gone", f->dir);
    assert_int_equal (rename (f->full, moved), 0);
    s_refused (f->incr, PS_ENOTFOUND, "ckpt-000000000010");
    assert_int_equal (rename (moved, f->full), 0);
    //  A manifest whose table has another row width than its files.
    json_t *manifest = s_load_manifest (f->full);
    json_object_set_new (json_array_get (json_object_get (json_object_get (manifest, "tables"),
                                                          "specs"), 0), "dim", json_integer (5));
    ps_error_t err;
    assert_null (ps_ckpt_tables_read (f->full, manifest, &err));
    json_decref (manifest);
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "rows of 3 floats, but the manifest's table \"emb\" "
                                      "has 5"));
    //  A file of another table under this table's name.
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "other", S_DIM);
    spec.shard_seed = S_SEED;
    ps_sparse_t *other = ps_sparse_new (&spec, &err);
    assert_non_null (other);
    snprintf (path, sizeof path, "%s/emb.shard0of2.full.table", f->full);
    harness_ok (ps_sparse_save (other, path, true, &err), &err);
    ps_sparse_destroy (&other);
    s_refused (f->full, PS_EINVAL, "holds table \"other\", expected \"emb\"");
    //  The incremental files no longer follow that full file.
    s_refused (f->incr, PS_EINVAL, "follows a full snapshot");
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_joins_as_restored, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_refusals, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
