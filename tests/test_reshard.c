//  Unit tests for re-partitioning a checkpoint (common/store/ps_reshard.c). The
//  sources are real ps-server partitions (ps_partition_new, a few Adam
//  pushes of random gradients, ps_partition_save) in a temporary
//  directory; the targets are read back with ps_snapshot_read and compared
//  row for row with the sources: values and slots bitwise, and the counters
//  and ledgers by the merge rules of ps_reshard.h. A round trip gives back
//  the original files byte for byte. Then every refusal, each checked for
//  its code, a message naming the culprit, and nothing written.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "harness_case.h"
#include "harness_case.h"
#include "harness_rand.h"
#include "ps_partition.h"
#include "ps_reshard.h"
#include "ps_snapshot.h"

#define MAX_PARTS  8

typedef struct {
    char src [HARNESS_DIR_SIZE];
    char dst [96];
    char dst2 [96];
} fixture_t;

static int
s_setup (void **state)
{
    int rc = harness_dir_setup (state, sizeof (fixture_t));
    if (rc == 0) {
        //  The targets go into directories that do not exist yet: reshard
        //  creates them.
        fixture_t *fx = *state;
        snprintf (fx->dst, sizeof fx->dst, "%s/out", fx->src);
        snprintf (fx->dst2, sizeof fx->dst2, "%s/back", fx->src);
    }
    return rc;
}

static void
s_fill (float *out, size_t n, uint64_t *seed)
{
    for (size_t i = 0; i < n; i++)
        out [i] = (float) (harness_lcg (seed) % 2000001) / 1e7f - 0.1f;
}

//  A source variable: its name, shape and partitions.
typedef struct {
    const char *var;
    ps_shape_t shape;
    int nparts;
    int64_t splits [MAX_PARTS + 1];
} s_layout_t;

static s_layout_t
s_layout (const char *var, const int64_t *dims, int rank, int nparts, const int64_t *splits)
{
    s_layout_t layout = { .var = var, .nparts = nparts };
    assert_int_equal (ps_shape_set (&layout.shape, dims, rank, NULL), PS_OK);
    memcpy (layout.splits, splits, (size_t) (nparts + 1) * sizeof (int64_t));
    return layout;
}

static ps_reshard_var_t
s_target (const s_layout_t *layout)
{
    return (ps_reshard_var_t) {
        .var = layout->var, .shape = layout->shape, .nparts = layout->nparts,
        .splits = layout->splits, .servers = NULL,
    };
}

static ps_opt_config_t
s_adam (void)
{
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    opt.lr = 0.01;
    return opt;
}

//  Create the partitions of layout, push steps 1..steps to each (random
//  gradients), and save them into dir.
static void
s_make_sources (const char *dir, const s_layout_t *layout, const ps_opt_config_t *opt,
                uint64_t steps, uint64_t seed)
{
    ps_init_t init;
    ps_init_default (&init, PS_INIT_UNIFORM);
    init.seed = seed;
    for (int k = 0; k < layout->nparts; k++) {
        ps_error_t err = { 0 };
        ps_partition_t *part = ps_partition_new (layout->var, (uint32_t) k, &layout->shape,
                                                 layout->splits [k], layout->splits [k + 1],
                                                 &init, opt, &err);
        if (!part)
            fail_msg ("partition refused: %s", err.msg);
        size_t n = ps_partition_count (part);
        float *grad = malloc (n * sizeof (float));
        assert_non_null (grad);
        uint64_t rng = seed * 100 + (uint64_t) k;
        for (uint64_t step = 1; step <= steps; step++) {
            s_fill (grad, n, &rng);
            uint64_t version;
            assert_int_equal (ps_partition_push (part, step, grad, NULL, &version, &err), PS_OK);
        }
        free (grad);
        char file [512];
        uint64_t bytes, version;
        uint32_t crc;
        if (ps_partition_save (part, dir, file, sizeof file, &bytes, &crc, &version, &err))
            fail_msg ("save failed: %s", err.msg);
        ps_partition_destroy (&part);
    }
}

static void
s_path (const char *dir, const char *var, uint32_t part, char *path, size_t len)
{
    char file [512];
    assert_int_equal (ps_snapshot_filename (var, part, file, sizeof file), PS_OK);
    snprintf (path, len, "%s/%s", dir, file);
}

static void
s_read (const char *dir, const char *var, uint32_t part, ps_snapshot_t *snap)
{
    char path [1024];
    s_path (dir, var, part, path, sizeof path);
    ps_error_t err = { 0 };
    if (ps_snapshot_read (path, snap, &err))
        fail_msg ("cannot read a target: %s", err.msg);
}

//  A whole variable assembled from its partitions' files in dir.
typedef struct {
    float *values;
    float *slots [PS_OPT_MAX_SLOTS];
    int nslots;
} s_whole_t;

static void
s_assemble (const char *dir, const s_layout_t *layout, s_whole_t *whole)
{
    memset (whole, 0, sizeof *whole);
    size_t count = (size_t) ps_shape_count (&layout->shape);
    size_t row = (size_t) ps_shape_row_count (&layout->shape);
    whole->values = calloc (count, sizeof (float));
    assert_non_null (whole->values);
    for (int k = 0; k < layout->nparts; k++) {
        ps_snapshot_t snap;
        s_read (dir, layout->var, (uint32_t) k, &snap);
        assert_string_equal (snap.var, layout->var);
        assert_int_equal (snap.part, k);
        assert_true (ps_shape_equal (&snap.shape, &layout->shape));
        assert_int_equal (snap.row_begin, layout->splits [k]);
        assert_int_equal (snap.row_end, layout->splits [k + 1]);
        if (k == 0) {
            whole->nslots = ps_opt_slot_count (snap.opt.kind);
            for (int i = 0; i < whole->nslots; i++) {
                whole->slots [i] = calloc (count, sizeof (float));
                assert_non_null (whole->slots [i]);
            }
        }
        size_t offset = (size_t) snap.row_begin * row;
        size_t bytes = (size_t) (snap.row_end - snap.row_begin) * row * sizeof (float);
        memcpy (whole->values + offset, snap.values, bytes);
        for (int i = 0; i < whole->nslots; i++)
            memcpy (whole->slots [i] + offset, snap.slots [i], bytes);
        ps_snapshot_release (&snap);
    }
}

static void
s_whole_free (s_whole_t *whole)
{
    free (whole->values);
    for (int i = 0; i < PS_OPT_MAX_SLOTS; i++)
        free (whole->slots [i]);
}

//  The target's rows are the source's, bit for bit.
static void
s_assert_same_rows (const char *src, const s_layout_t *from, const char *dst,
                    const s_layout_t *to)
{
    s_whole_t a, b;
    s_assemble (src, from, &a);
    s_assemble (dst, to, &b);
    size_t bytes = (size_t) ps_shape_count (&from->shape) * sizeof (float);
    assert_int_equal (a.nslots, b.nslots);
    assert_memory_equal (a.values, b.values, bytes);
    for (int i = 0; i < a.nslots; i++)
        assert_memory_equal (a.slots [i], b.slots [i], bytes);
    s_whole_free (&a);
    s_whole_free (&b);
}

//  Every target partition carries t, version, duplicates and the ledger
//  of steps 1..steps.
static void
s_assert_counters (const char *dir, const s_layout_t *layout, uint64_t steps,
                   uint64_t duplicates)
{
    for (int k = 0; k < layout->nparts; k++) {
        ps_snapshot_t snap;
        s_read (dir, layout->var, (uint32_t) k, &snap);
        assert_int_equal (snap.opt_t, steps);
        assert_int_equal (snap.version, steps);
        assert_int_equal (snap.duplicates, duplicates);
        assert_int_equal (ps_ledger_count (snap.ledger), steps);
        for (uint64_t s = 1; s <= steps; s++)
            assert_true (ps_ledger_contains (snap.ledger, s));
        assert_false (ps_ledger_contains (snap.ledger, steps + 1));
        ps_snapshot_release (&snap);
    }
}

static void
s_reshard_ok (const char *src, const ps_reshard_var_t *vars, int nvars, const char *dst,
              ps_snap_file_t **files, size_t *nfiles)
{
    ps_error_t err = { 0 };
    if (ps_reshard (src, vars, nvars, dst, files, nfiles, &err))
        fail_msg ("reshard failed: %s", err.msg);
}

//  The list of files written: one per target partition, in order, with
//  what the file itself says.
static void
s_assert_files (const char *dst, const ps_reshard_var_t *vars, int nvars,
                const ps_snap_file_t *files, size_t nfiles, uint64_t version)
{
    size_t i = 0;
    for (int v = 0; v < nvars; v++)
        for (int k = 0; k < vars [v].nparts; k++, i++) {
            assert_true (i < nfiles);
            const ps_snap_file_t *f = &files [i];
            assert_string_equal (f->var, vars [v].var);
            assert_int_equal (f->part, k);
            assert_int_equal (f->server, vars [v].servers ? vars [v].servers [k] : -1);
            assert_int_equal (f->version, version);
            char path [1024], file [512];
            assert_int_equal (ps_snapshot_filename (vars [v].var, (uint32_t) k, file, sizeof file),
                              PS_OK);
            assert_string_equal (f->file, file);
            snprintf (path, sizeof path, "%s/%s", dst, file);
            uint64_t bytes;
            uint32_t crc;
            assert_int_equal (ps_snapshot_summary (path, &bytes, &crc, NULL), PS_OK);
            assert_int_equal (f->bytes, bytes);
            assert_int_equal (f->crc, crc);
        }
    assert_int_equal (i, nfiles);
}

//  Number of entries in dir besides . and .. (0 when it does not exist).
static int
s_entries (const char *path)
{
    return access (path, F_OK) == 0 ? harness_dir_entries (path) : 0;
}

//  ---------------------------------------------------------------------
//  Layout changes

static void
test_two_to_one (void **state)
{
    fixture_t *fx = *state;
    ps_opt_config_t opt = s_adam ();
    s_layout_t kernel = s_layout ("dense/kernel", (int64_t []) { 10, 6 }, 2, 2,
                                  (int64_t []) { 0, 4, 10 });
    s_layout_t bias = s_layout ("dense/bias", (int64_t []) { 6 }, 1, 1, (int64_t []) { 0, 6 });
    s_make_sources (fx->src, &kernel, &opt, 5, 1);
    s_make_sources (fx->src, &bias, &opt, 5, 2);
    s_layout_t kernel1 = s_layout ("dense/kernel", (int64_t []) { 10, 6 }, 2, 1,
                                   (int64_t []) { 0, 10 });
    ps_reshard_var_t vars [] = { s_target (&kernel1), s_target (&bias) };
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    s_reshard_ok (fx->src, vars, 2, fx->dst, &files, &nfiles);
    s_assert_files (fx->dst, vars, 2, files, nfiles, 5);
    free (files);
    assert_int_equal (s_entries (fx->dst), 2);
    s_assert_same_rows (fx->src, &kernel, fx->dst, &kernel1);
    s_assert_same_rows (fx->src, &bias, fx->dst, &bias);
    s_assert_counters (fx->dst, &kernel1, 5, 0);
    s_assert_counters (fx->dst, &bias, 5, 0);
    //  The merged partition loads as a ps-server would load it.
    char path [1024];
    s_path (fx->dst, "dense/kernel", 0, path, sizeof path);
    ps_error_t err = { 0 };
    ps_partition_t *part = ps_partition_load (path, &err);
    if (!part)
        fail_msg ("load failed: %s", err.msg);
    assert_int_equal (ps_partition_row_end (part), 10);
    ps_partition_destroy (&part);
}

static void
test_one_to_three_uneven (void **state)
{
    fixture_t *fx = *state;
    ps_opt_config_t opt = s_adam ();
    opt.clip_norm = 0.5;
    s_layout_t whole = s_layout ("conv2d/kernel", (int64_t []) { 17, 3 }, 2, 1,
                                 (int64_t []) { 0, 17 });
    s_make_sources (fx->src, &whole, &opt, 4, 3);
    s_layout_t three = s_layout ("conv2d/kernel", (int64_t []) { 17, 3 }, 2, 3,
                                 (int64_t []) { 0, 2, 9, 17 });
    ps_reshard_var_t var = s_target (&three);
    int servers [] = { 2, 0, 1 };
    var.servers = servers;
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    s_reshard_ok (fx->src, &var, 1, fx->dst, &files, &nfiles);
    s_assert_files (fx->dst, &var, 1, files, nfiles, 4);
    free (files);
    s_assert_same_rows (fx->src, &whole, fx->dst, &three);
    s_assert_counters (fx->dst, &three, 4, 0);
    //  The optimizer configuration is carried over, bit for bit.
    ps_snapshot_t snap;
    s_read (fx->dst, "conv2d/kernel", 2, &snap);
    assert_int_equal (snap.opt.kind, PS_OPT_ADAM);
    assert_true (snap.opt.clip_norm == 0.5 && snap.opt.lr == 0.01);
    ps_snapshot_release (&snap);
}

static void
test_three_to_two_unaligned (void **state)
{
    fixture_t *fx = *state;
    ps_opt_config_t opt = s_adam ();
    s_layout_t three = s_layout ("w", (int64_t []) { 23, 2, 2 }, 3, 3,
                                 (int64_t []) { 0, 5, 14, 23 });
    s_make_sources (fx->src, &three, &opt, 6, 4);
    //  Row 9 lies inside the middle source piece.
    s_layout_t two = s_layout ("w", (int64_t []) { 23, 2, 2 }, 3, 2, (int64_t []) { 0, 9, 23 });
    ps_reshard_var_t var = s_target (&two);
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    s_reshard_ok (fx->src, &var, 1, fx->dst, &files, &nfiles);
    s_assert_files (fx->dst, &var, 1, files, nfiles, 6);
    free (files);
    s_assert_same_rows (fx->src, &three, fx->dst, &two);
    s_assert_counters (fx->dst, &two, 6, 0);
}

//  2 -> 1 -> 2 gives back the original files, byte for byte.
static void
test_round_trip (void **state)
{
    fixture_t *fx = *state;
    ps_opt_config_t opt = s_adam ();
    opt.weight_decay = 0.004;
    s_layout_t two = s_layout ("dense_1/kernel", (int64_t []) { 12, 5 }, 2, 2,
                               (int64_t []) { 0, 7, 12 });
    s_layout_t one = s_layout ("dense_1/kernel", (int64_t []) { 12, 5 }, 2, 1,
                               (int64_t []) { 0, 12 });
    s_make_sources (fx->src, &two, &opt, 7, 5);
    ps_reshard_var_t var = s_target (&one);
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    s_reshard_ok (fx->src, &var, 1, fx->dst, &files, &nfiles);
    free (files);
    var = s_target (&two);
    s_reshard_ok (fx->dst, &var, 1, fx->dst2, &files, &nfiles);
    free (files);
    for (uint32_t k = 0; k < 2; k++) {
        char a [1024], b [1024];
        s_path (fx->src, "dense_1/kernel", k, a, sizeof a);
        s_path (fx->dst2, "dense_1/kernel", k, b, sizeof b);
        size_t alen, blen;
        uint8_t *adata = harness_slurp (a, &alen);
        uint8_t *bdata = harness_slurp (b, &blen);
        assert_int_equal (alen, blen);
        assert_memory_equal (adata, bdata, alen);
        free (adata);
        free (bdata);
    }
    s_assert_same_rows (fx->src, &two, fx->dst2, &two);
}

//  One piece applied a step the other did not (its push failed part-way):
//  the merged partition has the steps both applied and the smaller t; its
//  rows are still copied as they are. Duplicates take the larger count.
static void
test_ledger_intersection (void **state)
{
    fixture_t *fx = *state;
    ps_opt_config_t opt = s_adam ();
    s_layout_t two = s_layout ("v", (int64_t []) { 10, 3 }, 2, 2, (int64_t []) { 0, 4, 10 });
    s_make_sources (fx->src, &two, &opt, 5, 6);
    //  Piece 1 gets step 6 and three repeated pushes; piece 0 one repeat.
    char path [1024];
    s_path (fx->src, "v", 1, path, sizeof path);
    ps_error_t err = { 0 };
    ps_partition_t *part = ps_partition_load (path, &err);
    assert_non_null (part);
    float grad [18] = { 0.5f, -0.25f, 0.125f };
    uint64_t version;
    assert_int_equal (ps_partition_push (part, 6, grad, NULL, &version, NULL), PS_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal (ps_partition_push (part, 2, grad, NULL, &version, NULL), PS_DUPLICATE);
    char file [512];
    uint64_t bytes;
    uint32_t crc;
    assert_int_equal (ps_partition_save (part, fx->src, file, sizeof file, &bytes, &crc, &version,
                                         NULL), PS_OK);
    ps_partition_destroy (&part);
    s_path (fx->src, "v", 0, path, sizeof path);
    part = ps_partition_load (path, &err);
    assert_non_null (part);
    assert_int_equal (ps_partition_push (part, 1, grad, NULL, &version, NULL), PS_DUPLICATE);
    assert_int_equal (ps_partition_save (part, fx->src, file, sizeof file, &bytes, &crc, &version,
                                         NULL), PS_OK);
    ps_partition_destroy (&part);

    s_layout_t one = s_layout ("v", (int64_t []) { 10, 3 }, 2, 1, (int64_t []) { 0, 10 });
    ps_reshard_var_t var = s_target (&one);
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    s_reshard_ok (fx->src, &var, 1, fx->dst, &files, &nfiles);
    assert_int_equal (files [0].version, 5);
    free (files);
    s_assert_same_rows (fx->src, &two, fx->dst, &one);
    s_assert_counters (fx->dst, &one, 5, 3);

    //  Resharded to the same layout, each partition is its one piece again,
    //  step 6 and t 6 included.
    var = s_target (&two);
    s_reshard_ok (fx->src, &var, 1, fx->dst2, &files, &nfiles);
    free (files);
    ps_snapshot_t snap;
    s_read (fx->dst2, "v", 1, &snap);
    assert_int_equal (snap.opt_t, 6);
    assert_int_equal (snap.duplicates, 3);
    assert_true (ps_ledger_contains (snap.ledger, 6));
    ps_snapshot_release (&snap);
    s_read (fx->dst2, "v", 0, &snap);
    assert_int_equal (snap.opt_t, 5);
    assert_int_equal (snap.duplicates, 1);
    ps_snapshot_release (&snap);
}

//  ---------------------------------------------------------------------
//  Refusals

//  Reshard must fail with code and a message holding every string of the
//  NULL-terminated list, having written nothing.
static void
s_expect_error (const fixture_t *fx, const ps_reshard_var_t *vars, int nvars, int code, ...)
{
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    ps_error_t err = { 0 };
    int rc = ps_reshard (fx->src, vars, nvars, fx->dst, &files, &nfiles, &err);
    printf ("  refused: %s\n", err.msg);
    if (rc != code)
        fail_msg ("reshard returned %d (%s), expected %d", rc, err.msg, code);
    assert_int_equal (err.code, code);
    assert_null (files);
    va_list words;
    va_start (words, code);
    const char *word;
    while ((word = va_arg (words, const char *)) != NULL)
        if (!strstr (err.msg, word))
            fail_msg ("\"%s\" does not say \"%s\"", err.msg, word);
    va_end (words);
    assert_int_equal (s_entries (fx->dst), 0);
}

static void
test_errors (void **state)
{
    fixture_t *fx = *state;
    ps_opt_config_t opt = s_adam ();
    s_layout_t kernel = s_layout ("dense/kernel", (int64_t []) { 10, 6 }, 2, 2,
                                  (int64_t []) { 0, 4, 10 });
    s_layout_t bias = s_layout ("dense/bias", (int64_t []) { 6 }, 1, 1, (int64_t []) { 0, 6 });
    s_make_sources (fx->src, &kernel, &opt, 3, 1);
    s_make_sources (fx->src, &bias, &opt, 3, 2);
    s_layout_t kernel1 = s_layout ("dense/kernel", (int64_t []) { 10, 6 }, 2, 1,
                                   (int64_t []) { 0, 10 });
    ps_reshard_var_t vars [3] = { s_target (&kernel1), s_target (&bias) };
    char path [1024], kernel1_path [1024];
    s_path (fx->src, "dense/kernel", 1, kernel1_path, sizeof kernel1_path);

    //  A target variable no file holds.
    s_layout_t extra = s_layout ("dense_9/bias", (int64_t []) { 4 }, 1, 1, (int64_t []) { 0, 4 });
    vars [2] = s_target (&extra);
    s_expect_error (fx, vars, 3, PS_ENOTFOUND, "dense_9/bias", "no snapshot file", NULL);

    //  A source variable the target does not name.
    s_expect_error (fx, vars, 1, PS_EINVAL, "dense/bias", "not in the target layout", NULL);

    //  The target's shape differs from the files'.
    s_layout_t wide = s_layout ("dense/kernel", (int64_t []) { 10, 7 }, 2, 1,
                                (int64_t []) { 0, 10 });
    ps_reshard_var_t wrong [2] = { s_target (&wide), s_target (&bias) };
    s_expect_error (fx, wrong, 2, PS_ESHAPE, "dense%2Fkernel.part0.snap", "[10,6]", "[10,7]", NULL);

    //  Rows no file covers: a piece deleted.
    size_t len;
    uint8_t *saved = harness_slurp (kernel1_path, &len);
    assert_int_equal (unlink (kernel1_path), 0);
    s_expect_error (fx, vars, 2, PS_ENOTFOUND, "rows [4,10)", "dense/kernel", NULL);

    //  A corrupt piece: one flipped byte.
    saved [len / 2] ^= 0x40;
    harness_spit (kernel1_path, saved, len);
    s_expect_error (fx, vars, 2, PS_ECORRUPT, kernel1_path, "checksum", NULL);
    saved [len / 2] ^= 0x40;
    harness_spit (kernel1_path, saved, len);
    free (saved);

    //  Overlapping pieces: rows [2, 6) in a third file.
    ps_init_t init;
    ps_init_default (&init, PS_INIT_ZEROS);
    ps_error_t err = { 0 };
    ps_partition_t *part = ps_partition_new ("dense/kernel", 5, &kernel.shape, 2, 6, &init, &opt,
                                             &err);
    assert_non_null (part);
    char file [512];
    uint64_t bytes, version;
    uint32_t crc;
    assert_int_equal (ps_partition_save (part, fx->src, file, sizeof file, &bytes, &crc, &version,
                                         NULL), PS_OK);
    ps_partition_destroy (&part);
    s_path (fx->src, "dense/kernel", 5, path, sizeof path);
    s_expect_error (fx, vars, 2, PS_EINVAL, "rows [2,4)", "dense%2Fkernel.part0.snap",
                    "dense%2Fkernel.part5.snap", NULL);
    assert_int_equal (unlink (path), 0);

    //  Pieces with different optimizer settings: piece 1 with another
    //  learning rate.
    part = ps_partition_load (kernel1_path, &err);
    assert_non_null (part);
    ps_opt_config_t slower = opt;
    slower.lr = 0.005;
    assert_int_equal (ps_partition_set_optimizer (part, &slower, NULL), PS_OK);
    assert_int_equal (ps_partition_save (part, fx->src, file, sizeof file, &bytes, &crc, &version,
                                         NULL), PS_OK);
    ps_partition_destroy (&part);
    s_expect_error (fx, vars, 2, PS_EINVAL, kernel1_path, "lr 0.005", NULL);
    //  ... and with another kind.
    part = ps_partition_load (kernel1_path, &err);
    assert_non_null (part);
    ps_opt_config_t momentum;
    ps_opt_config_default (&momentum, PS_OPT_MOMENTUM);
    assert_int_equal (ps_partition_set_optimizer (part, &momentum, NULL), PS_OK);
    assert_int_equal (ps_partition_save (part, fx->src, file, sizeof file, &bytes, &crc, &version,
                                         NULL), PS_OK);
    ps_partition_destroy (&part);
    s_expect_error (fx, vars, 2, PS_EINVAL, kernel1_path, "momentum", NULL);
    part = ps_partition_load (kernel1_path, &err);
    assert_non_null (part);
    assert_int_equal (ps_partition_set_optimizer (part, &opt, NULL), PS_OK);
    assert_int_equal (ps_partition_save (part, fx->src, file, sizeof file, &bytes, &crc, &version,
                                         NULL), PS_OK);
    ps_partition_destroy (&part);

    //  Bad target layouts.
    s_layout_t bad = s_layout ("dense/kernel", (int64_t []) { 10, 6 }, 2, 2, (int64_t []) { 0, 0, 10 });
    ps_reshard_var_t layouts [2] = { s_target (&bad), s_target (&bias) };
    s_expect_error (fx, layouts, 2, PS_EINVAL, "dense/kernel", "increasing", NULL);
    bad = s_layout ("dense/kernel", (int64_t []) { 10, 6 }, 2, 1, (int64_t []) { 0, 9 });
    layouts [0] = s_target (&bad);
    s_expect_error (fx, layouts, 2, PS_EINVAL, "expected 0 to 10", NULL);
    layouts [0] = s_target (&bias);
    s_expect_error (fx, layouts, 2, PS_EINVAL, "listed twice", NULL);
    //  The source directory as the target.
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    assert_int_equal (ps_reshard (fx->src, vars, 2, fx->src, &files, &nfiles, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "source directory"));
    //  A source directory that does not exist.
    assert_int_equal (ps_reshard ("/nonexistent/ps-reshard", vars, 2, fx->dst, &files, &nfiles,
                                  &err), PS_ENOTFOUND);

    //  With everything put right, it works.
    s_reshard_ok (fx->src, vars, 2, fx->dst, &files, &nfiles);
    assert_int_equal (nfiles, 2);
    free (files);
    s_assert_same_rows (fx->src, &kernel, fx->dst, &kernel1);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_two_to_one, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_one_to_three_uneven, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_three_to_two_unaligned, s_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_round_trip, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_ledger_intersection, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_errors, s_setup, harness_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
