//  Unit tests for embedding tables: the spec (common/model/ps_tablespec.c)
//  and one server's shard (common/store/ps_sparse.c, ps_sparse_stripe.c)
//  in single behaviours: pulls never create rows (PERSIA PR #56), pushes
//  and pulls of many ids, the checks before a push, eviction gives memory
//  back (Paddle #10155), the memory bound of the issue, growth under
//  concurrent pushes (TFRA discussion #259) and the sharding property
//  (ps-lite #185). The shard under random pushes against a reference is
//  test_sparse_reference.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness_case.h"
#include "harness_rand.h"
#include "ps_ledger.h"
#include "ps_rowopt.h"
#include "ps_slabs.h"
#include "ps_sparse.h"

//  --------------------------------------------------------------------
//  The spec

static void
test_spec (void **state)
{
    (void) state;
    ps_tablespec_t spec, other;
    ps_tablespec_default (&spec, "emb_c1", 16);
    ps_error_t err;
    harness_ok (ps_tablespec_validate (&spec, &err), &err);
    assert_int_equal (spec.opt.kind, PS_ROWOPT_ADAGRAD);
    assert_true (spec.opt.lr == 0.05);
    assert_int_equal (spec.init.kind, PS_INIT_UNIFORM);

    //  Each bad field is refused, naming the table and the field.
    other = spec;
    other.dim = 0;
    assert_int_equal (ps_tablespec_validate (&other, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "table emb_c1: dim is 0"));
    other = spec;
    other.dim = PS_TABLESPEC_MAX_DIM + 1;
    assert_int_equal (ps_tablespec_validate (&other, &err), PS_EINVAL);
    other = spec;
    other.opt.lr = NAN;
    assert_int_equal (ps_tablespec_validate (&other, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "optimizer lr"));
    other = spec;
    other.opt.lr_power = 0.5;
    assert_int_equal (ps_tablespec_validate (&other, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "lr_power"));
    other = spec;
    other.opt.beta1 = 1.0;
    assert_int_equal (ps_tablespec_validate (&other, &err), PS_EINVAL);
    other = spec;
    other.opt.kind = PS_ROWOPT_ADAM;
    other.opt.epsilon = 0;
    assert_int_equal (ps_tablespec_validate (&other, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "epsilon"));
    other = spec;
    other.admit_prob = 0;
    assert_int_equal (ps_tablespec_validate (&other, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "admit_prob"));
    other = spec;
    other.admit_count = PS_TABLESPEC_MAX_ADMIT_COUNT + 1;
    assert_int_equal (ps_tablespec_validate (&other, &err), PS_EINVAL);
    other = spec;
    other.init.kind = PS_INIT_GLOROT_UNIFORM;
    assert_int_equal (ps_tablespec_validate (&other, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "glorot_uniform"));
    other = spec;
    other.name [0] = 0;
    assert_int_equal (ps_tablespec_validate (&other, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "table name"));
    other = spec;
    other.policy = (ps_evict_policy_t) 7;
    assert_int_equal (ps_tablespec_validate (&other, &err), PS_EINVAL);

    //  differs names the first field that differs.
    char buf [256];
    other = spec;
    assert_false (ps_tablespec_differs (&spec, &other, buf, sizeof buf));
    other.dim = 8;
    assert_true (ps_tablespec_differs (&spec, &other, buf, sizeof buf));
    assert_string_equal (buf, "table emb_c1: dim 16, not 8");
    other = spec;
    other.opt.l2 = 0.5;
    assert_true (ps_tablespec_differs (&spec, &other, buf, sizeof buf));
    assert_non_null (strstr (buf, "optimizer l2"));
    other = spec;
    other.shard_seed = 3;
    assert_true (ps_tablespec_differs (&spec, &other, NULL, 0));

    //  Names both ways.
    ps_rowopt_kind_t kind;
    for (int k = PS_ROWOPT_SGD; k <= PS_ROWOPT_FTRL; k++) {
        harness_ok (ps_rowopt_kind_parse (ps_rowopt_kind_name ((ps_rowopt_kind_t) k), &kind, &err),
                    &err);
        assert_int_equal (kind, k);
    }
    assert_int_equal (ps_rowopt_kind_parse ("rmsprop", &kind, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "rmsprop"));
    ps_evict_policy_t policy;
    harness_ok (ps_evict_policy_parse ("lfu", &policy, &err), &err);
    assert_int_equal (policy, PS_EVICT_LFU);
    assert_string_equal (ps_evict_policy_name (PS_EVICT_LRU), "lru");
    assert_int_equal (ps_evict_policy_parse ("fifo", &policy, &err), PS_EINVAL);
    assert_int_equal (ps_rowopt_slot_count (PS_ROWOPT_SGD), 0);
    assert_int_equal (ps_rowopt_slot_count (PS_ROWOPT_ADAGRAD), 1);
    assert_int_equal (ps_rowopt_slot_count (PS_ROWOPT_ADAM), 2);
    assert_int_equal (ps_rowopt_slot_count (PS_ROWOPT_FTRL), 2);
}

//  A row's first value is a pure function of (seed, id), inside the
//  initializer's range, and different for different ids and seeds.
static void
test_init_row (void **state)
{
    (void) state;
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "emb", 33);
    float a [33], b [33], c [33];
    ps_tablespec_init_row (&spec, 12345, a);
    ps_tablespec_init_row (&spec, 12345, b);
    assert_memory_equal (a, b, sizeof a);
    for (int j = 0; j < 33; j++)
        assert_true (a [j] >= -0.05f && a [j] < 0.05f);
    ps_tablespec_init_row (&spec, 12346, c);
    assert_memory_not_equal (a, c, sizeof a);
    spec.init.seed = 1;
    ps_tablespec_init_row (&spec, 12345, c);
    assert_memory_not_equal (a, c, sizeof a);
    //  Element 0 of id 12345, seed 0, by the formula at the top of
    //  ps_tablespec.c.
    uint64_t key = ps_mix64 (0) ^ ps_mix64 (12345 + 1);
    double u = (double) (ps_mix_draw (key, 0) >> 11) * 0x1.0p-53;
    assert_true (a [0] == (float) (-0.05 + 0.1 * u));
    spec.init.kind = PS_INIT_NORMAL;
    spec.init.stddev = 1.0;
    double sum = 0, sum2 = 0;
    for (uint64_t id = 0; id < 300; id++) {
        ps_tablespec_init_row (&spec, id, a);
        for (int j = 0; j < 33; j++) {
            sum += a [j];
            sum2 += (double) a [j] * a [j];
        }
    }
    double n = 300 * 33;
    assert_true (fabs (sum / n) < 0.05);
    assert_true (fabs (sum2 / n - 1.0) < 0.05);
    spec.init.kind = PS_INIT_ZEROS;
    ps_tablespec_init_row (&spec, 9, a);
    for (int j = 0; j < 33; j++)
        assert_true (a [j] == 0.0f);
}

//  Every id maps to exactly one shard in range, and any set of ids splits
//  evenly: ids in a contiguous range, ids with a common stride, random
//  ids, for shard counts that do and do not divide anything.
static void
test_shard_of (void **state)
{
    (void) state;
    uint32_t counts [13];
    uint64_t rng = 5;
    for (uint32_t n = 1; n <= 13; n++)
        for (int set = 0; set < 3; set++) {
            memset (counts, 0, sizeof counts);
            uint64_t seed = harness_splitmix (&rng);
            for (uint64_t i = 0; i < 26000; i++) {
                uint64_t id = set == 0 ? i : set == 1 ? i << 20 : harness_splitmix (&rng);
                uint32_t shard = ps_tablespec_shard_of (id, seed, n);
                assert_true (shard < n);
                assert_int_equal (shard, ps_tablespec_shard_of (id, seed, n));
                counts [shard]++;
            }
            for (uint32_t k = 0; k < n; k++) {
                double expect = 26000.0 / n;
                if (fabs (counts [k] - expect) > 5 * sqrt (expect) + 1)
                    fail_msg ("%u shards, set %d: shard %u got %u ids, expected about %.0f",
                              n, set, k, counts [k], expect);
            }
        }
    //  The stripes of one server's ids still spread: the ids of shard 0 of
    //  2 fill every stripe.
    uint32_t stripes [PS_SPARSE_STRIPES] = { 0 };
    for (uint64_t id = 0, taken = 0; taken < 6400; id++)
        if (ps_tablespec_shard_of (id, 0, 2) == 0) {
            stripes [ps_sparse_stripe_of (id)]++;
            taken++;
        }
    for (int s = 0; s < PS_SPARSE_STRIPES; s++)
        assert_true (stripes [s] > 50 && stripes [s] < 150);
}

//  --------------------------------------------------------------------
//  Single behaviours

//  Pulls of ids without rows read their initial value and create nothing,
//  however many times (PERSIA PR #56).
static void
test_pull_never_creates (void **state)
{
    (void) state;
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "eval", 8);
    spec.admit_count = 2;
    ps_sparse_t *table = ps_sparse_new (&spec, NULL);
    assert_non_null (table);
    uint64_t ids [100];
    float out [100 * 8], init [8];
    for (int i = 0; i < 100; i++)
        ids [i] = (uint64_t) i * 977;
    for (int round = 0; round < 5; round++)
        ps_sparse_pull (table, ids, 100, out);
    for (int i = 0; i < 100; i++) {
        ps_tablespec_init_row (&spec, ids [i], init);
        assert_memory_equal (out + i * 8, init, sizeof init);
    }
    ps_sparse_stats_t stats;
    ps_sparse_stats (table, &stats);
    assert_int_equal (stats.rows, 0);
    assert_int_equal (stats.created, 0);
    assert_int_equal (stats.pulls, 500);
    //  Pulls do not count toward admission: one push after them still
    //  only counts once.
    float grads [8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
    ps_sparse_push_result_t result;
    harness_ok (ps_sparse_push (table, 1, ids, 1, grads, &result), NULL);
    assert_int_equal (result.dropped, 1);
    harness_ok (ps_sparse_push (table, 2, ids, 1, grads, &result), NULL);
    assert_int_equal (result.created, 1);
    ps_sparse_destroy (&table);
}

//  A push and a pull of more ids than the table groups at a time (its
//  windows of a few thousand ids) leave and read the same rows as the
//  same ids pushed and pulled one by one: every window's ids reach their
//  rows, and the pull's ids without rows read their initial values.
#define W_IDS  10000

static void
test_many_ids (void **state)
{
    (void) state;
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "wide", 4);
    ps_rowopt_default (&spec.opt, PS_ROWOPT_ADAGRAD);
    ps_sparse_t *whole = ps_sparse_new (&spec, NULL);
    ps_sparse_t *single = ps_sparse_new (&spec, NULL);
    assert_non_null (whole);
    assert_non_null (single);
    uint64_t *ids = malloc (2 * W_IDS * sizeof *ids);
    float *grads = malloc (W_IDS * 4 * sizeof *grads);
    float *got = malloc (2 * W_IDS * 4 * sizeof *got);
    float *expect = malloc (2 * W_IDS * 4 * sizeof *expect);
    assert_non_null (ids && grads && got && expect);
    //  Pushed ids first, then as many never pushed, in one pull mixed.
    for (size_t i = 0; i < 2 * W_IDS; i++)
        ids [i] = ps_mix64 (i + 1);
    for (size_t i = 0; i < W_IDS * 4; i++)
        grads [i] = (float) (i % 13) * 0.01f - 0.06f;
    ps_sparse_push_result_t result;
    harness_ok (ps_sparse_push (whole, 1, ids, W_IDS, grads, &result), NULL);
    assert_int_equal (result.applied, W_IDS);
    for (size_t i = 0; i < W_IDS; i++)
        harness_ok (ps_sparse_push (single, i + 1, ids + i, 1, grads + 4 * i, &result), NULL);
    //  Interleave the two halves so that every window holds both.
    for (size_t i = 0; i < W_IDS; i += 2) {
        uint64_t t = ids [i];
        ids [i] = ids [W_IDS + i];
        ids [W_IDS + i] = t;
    }
    ps_sparse_pull (whole, ids, 2 * W_IDS, got);
    for (size_t i = 0; i < 2 * W_IDS; i++)
        ps_sparse_pull (single, ids + i, 1, expect + 4 * i);
    assert_memory_equal (got, expect, 2 * W_IDS * 4 * sizeof *got);
    ps_sparse_stats_t stats;
    ps_sparse_stats (whole, &stats);
    assert_int_equal (stats.rows, W_IDS);
    free (ids);
    free (grads);
    free (got);
    free (expect);
    ps_sparse_destroy (&whole);
    ps_sparse_destroy (&single);
}

//  Rows of the widest width with Adam's two slots: a stripe's first slab
//  (16 rows of 48 KiB) is larger than a slab of the shared huge-page
//  regions (ps_slabs.h), so each gets a mapping of its own. Every row must
//  hold what the optimizer makes of its own start and gradients, twice
//  applied, untouched by its neighbours.
static void
test_widest_rows (void **state)
{
    (void) state;
    enum { N = 40, DIM = PS_TABLESPEC_MAX_DIM };
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "widest", DIM);
    ps_rowopt_default (&spec.opt, PS_ROWOPT_ADAM);
    ps_sparse_t *table = ps_sparse_new (&spec, NULL);
    assert_non_null (table);
    uint64_t ids [N];
    float *grads = malloc ((size_t) N * DIM * sizeof *grads);
    float *got = malloc ((size_t) N * DIM * sizeof *got);
    float *w = malloc (DIM * sizeof *w), *slots = malloc (2 * DIM * sizeof *slots);
    assert_non_null (grads && got && w && slots);
    for (size_t i = 0; i < N; i++)
        ids [i] = ps_mix64 (1000 + i);
    for (size_t i = 0; i < (size_t) N * DIM; i++)
        grads [i] = (float) ((i * 7) % 23) * 0.01f - 0.11f;
    ps_sparse_push_result_t result;
    for (uint64_t step = 1; step <= 2; step++) {
        harness_ok (ps_sparse_push (table, step, ids, N, grads, &result), NULL);
        assert_int_equal (result.applied, N);
    }
    ps_sparse_pull (table, ids, N, got);
    for (size_t i = 0; i < N; i++) {
        ps_tablespec_init_row (&spec, ids [i], w);
        ps_rowopt_init_slots (&spec.opt, slots, DIM);
        for (uint64_t t = 1; t <= 2; t++)
            ps_rowopt_apply (&spec.opt, w, slots, grads + i * DIM, DIM, t);
        assert_memory_equal (got + i * DIM, w, DIM * sizeof *w);
    }
    free (grads);
    free (got);
    free (w);
    free (slots);
    ps_sparse_destroy (&table);
}

static void
test_check_push (void **state)
{
    (void) state;
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "emb_c7", 2);
    ps_sparse_t *table = ps_sparse_new (&spec, NULL);
    uint64_t ids [] = { 5, 9, 1u << 31, 77, 9 };
    ps_error_t err;
    assert_int_equal (ps_sparse_check_push (table, 1, ids, 5, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "table emb_c7: id 9 is pushed twice (at 1 and 4)"));
    harness_ok (ps_sparse_check_push (table, 1, ids, 4, &err), &err);
    assert_int_equal (ps_sparse_check_push (table, PS_LEDGER_MAX_SPAN + 5, ids, 4, &err),
                      PS_EINVAL);
    assert_non_null (strstr (err.msg, "table emb_c7: ledger: step"));
    float grads [8] = { 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f };
    ps_sparse_push_result_t result;
    harness_ok (ps_sparse_push (table, 1, ids, 4, grads, &result), NULL);
    assert_int_equal (result.applied, 4);
    assert_int_equal (result.created, 4);
    //  The step again: refused before and at the push, nothing applied.
    float before [8], after [8];
    ps_sparse_pull (table, ids, 4, before);
    assert_int_equal (ps_sparse_check_push (table, 1, ids, 4, &err), PS_DUPLICATE);
    assert_int_equal (ps_sparse_push (table, 1, ids, 4, grads, &result), PS_DUPLICATE);
    assert_int_equal (result.applied, 0);
    ps_sparse_pull (table, ids, 4, after);
    assert_memory_equal (before, after, sizeof before);
    assert_int_equal (ps_sparse_steps_applied (table), 1);
    //  A bad spec is refused by the constructor, naming the field.
    spec.dim = 0;
    assert_null (ps_sparse_new (&spec, &err));
    assert_non_null (strstr (err.msg, "dim"));
    ps_sparse_destroy (&table);
    ps_sparse_destroy (&table);
}

//  With a capacity, a table that sees ever new ids holds its memory flat:
//  evicted rows' slots are reused (Paddle #10155). With a TTL too.
static void
test_eviction_frees (void **state)
{
    (void) state;
    for (int ttl = 0; ttl <= 1; ttl++) {
        ps_tablespec_t spec;
        ps_tablespec_default (&spec, "churn", 16);
        spec.capacity = ttl ? 0 : 4096;
        spec.ttl = ttl ? 3 : 0;
        ps_sparse_t *table = ps_sparse_new (&spec, NULL);
        static uint64_t ids [512];
        static float grads [512 * 16];
        for (int i = 0; i < 512 * 16; i++)
            grads [i] = 0.01f;
        uint64_t next = 1, bytes_warm = 0;
        ps_sparse_stats_t stats;
        for (uint64_t step = 1; step <= 120; step++) {
            for (int i = 0; i < 512; i++)
                ids [i] = next++ * 0x9e3779b97f4a7c15ULL;
            ps_sparse_push_result_t result;
            harness_ok (ps_sparse_push (table, step, ids, 512, grads, &result), NULL);
            ps_sparse_stats (table, &stats);
            assert_true (ttl || stats.rows <= spec.capacity);
            if (step == 30)
                bytes_warm = stats.bytes;
        }
        //  A stripe's memory is that of the most rows it ever held, which
        //  creeps up as chance makes new peaks: with a capacity, not at
        //  all; with a TTL, far less than the 4x the rows grew by.
        if (ttl ? stats.bytes > bytes_warm * 5 / 4 : stats.bytes != bytes_warm)
            fail_msg ("ttl %d: %llu bytes after 30 pushes of new ids, %llu after 120, "
                      "expected no growth", ttl, (unsigned long long) bytes_warm,
                      (unsigned long long) stats.bytes);
        assert_true (stats.evicted > 50000);
        ps_sparse_destroy (&table);
    }
}

//  R rows of width 16 with Adagrad hold at most 1.3 R d 4 2 bytes plus
//  64 MB (the bound); the part beyond the rows themselves is
//  measured too, so the test would notice a bound met only by the slack.
static void
test_memory_bound (void **state)
{
    (void) state;
    enum { ROWS = 200000, DIM = 16, BATCH = 4000 };
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "mem", DIM);
    ps_sparse_t *table = ps_sparse_new (&spec, NULL);
    ps_sparse_stats_t stats;
    ps_sparse_stats (table, &stats);
    uint64_t empty = stats.bytes;
    static uint64_t ids [BATCH];
    static float grads [BATCH * DIM];
    for (uint64_t step = 1; step <= ROWS / BATCH; step++) {
        for (int i = 0; i < BATCH; i++)
            ids [i] = (step - 1) * BATCH + (uint64_t) i;
        ps_sparse_push_result_t result;
        harness_ok (ps_sparse_push (table, step, ids, BATCH, grads, &result), NULL);
    }
    ps_sparse_stats (table, &stats);
    assert_int_equal (stats.rows, ROWS);
    double bound = 1.3 * ROWS * DIM * 4 * 2;
    double rows_only = ROWS * (24.0 + DIM * 4 * 2);
    printf ("memory: %d rows of %d floats + Adagrad: %llu bytes, %.1f per row (bound %.1f + "
            "64 MB), %llu bytes empty\n", ROWS, DIM, (unsigned long long) stats.bytes,
            (double) stats.bytes / ROWS, bound / ROWS, (unsigned long long) empty);
    assert_true (stats.bytes >= rows_only);
    assert_true (stats.bytes <= bound + 64e6);
    //  Beyond the bound by at most the slabs' slack: one partly filled
    //  slab of at most 256 KiB per stripe.
    assert_true (stats.bytes <= bound + PS_SPARSE_STRIPES * 256.0 * 1024 + empty);
    ps_sparse_destroy (&table);
}

//  --------------------------------------------------------------------
//  Index blocks

//  Blocks of every kind: calloc's below PS_SLABS_BLOCK_MIN, shared
//  regions up to half a region, mappings of their own above. Each comes
//  zeroed (a reused one too), blocks held together are disjoint, shared
//  ones are aligned to their size, and when the last block of a region
//  goes, so does the region's mapping.
static void
test_index_blocks (void **state)
{
    (void) state;
    enum { REGION = 2 << 20, MAX_BLOCKS = 2 * 32 + 1 };
    ps_slabs_t *slabs = ps_slabs_new ();
    assert_non_null (slabs);
    size_t sizes [] = { 4096, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20,
                        2 << 20, 4 << 20 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes [0]; k++) {
        size_t size = sizes [k];
        bool shared = size >= PS_SLABS_BLOCK_MIN && size < REGION;
        //  Two full regions and one block of a third, where they share.
        size_t per = shared ? REGION / size : 1;
        size_t n = shared ? 2 * per + 1 : 3;
        uint8_t *blocks [MAX_BLOCKS];
        for (size_t i = 0; i < n; i++) {
            blocks [i] = ps_slabs_block (slabs, size);
            assert_non_null (blocks [i]);
            for (size_t b = 0; b < size; b += 512)
                assert_int_equal (blocks [i][b] | blocks [i][size - 1], 0);
            if (shared)
                assert_int_equal ((uintptr_t) blocks [i] % size, 0);
            memset (blocks [i], (int) (i + 1), size);
        }
        size_t mapped = shared ? 3 * (size_t) REGION : size >= REGION ? n * size : 0;
        assert_int_equal (ps_slabs_block_mapped (slabs), mapped);
        for (size_t i = 0; i < n; i++)
            assert_true (blocks [i][0] == i + 1 && blocks [i][size - 1] == i + 1
                         && blocks [i][size / 2] == i + 1);
        //  A block given back and taken again reads as zeros.
        ps_slabs_block_free (slabs, blocks [0], size);
        blocks [0] = ps_slabs_block (slabs, size);
        assert_non_null (blocks [0]);
        for (size_t b = 0; b < size; b += 64)
            assert_int_equal (blocks [0][b], 0);
        assert_int_equal (ps_slabs_block_mapped (slabs), mapped);
        //  The lone block of the third region goes, and its region.
        ps_slabs_block_free (slabs, blocks [n - 1], size);
        if (shared)
            assert_int_equal (ps_slabs_block_mapped (slabs), 2 * (size_t) REGION);
        for (size_t i = 0; i + 1 < n; i++)
            ps_slabs_block_free (slabs, blocks [i], size);
        assert_int_equal (ps_slabs_block_mapped (slabs), 0);
    }
    ps_slabs_block_free (slabs, NULL, 1 << 20);
    ps_slabs_destroy (&slabs);
    assert_null (slabs);
}

//  A table of 800,000 rows: its stripes' indexes grow out of calloc into
//  blocks of 64 KiB and then 128 KiB, the smaller ones freed as they
//  double; every row still holds its own value (SGD: start - lr g).
static void
test_large_index (void **state)
{
    (void) state;
    enum { ROWS = 800000, DIM = 2, BATCH = 10000 };
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "large", DIM);
    ps_rowopt_default (&spec.opt, PS_ROWOPT_SGD);
    spec.opt.lr = 0.5;
    ps_sparse_t *table = ps_sparse_new (&spec, NULL);
    assert_non_null (table);
    uint64_t *ids = malloc (BATCH * sizeof *ids);
    float *grads = malloc (BATCH * DIM * sizeof *grads);
    float *got = malloc (BATCH * DIM * sizeof *got);
    assert_non_null (ids && grads && got);
    for (uint64_t step = 1; step <= ROWS / BATCH; step++) {
        for (size_t i = 0; i < BATCH; i++) {
            uint64_t n = (step - 1) * BATCH + i;
            ids [i] = ps_mix64 (n) | 1;
            grads [i * DIM] = (float) (n % 1000) * 0.001f;
            grads [i * DIM + 1] = -1.0f;
        }
        ps_sparse_push_result_t result;
        harness_ok (ps_sparse_push (table, step, ids, BATCH, grads, &result), NULL);
        assert_int_equal (result.created, BATCH);
    }
    ps_sparse_stats_t stats;
    ps_sparse_stats (table, &stats);
    assert_int_equal (stats.rows, ROWS);
    float start [DIM];
    for (uint64_t base = 0; base < ROWS; base += BATCH) {
        for (size_t i = 0; i < BATCH; i++)
            ids [i] = ps_mix64 (base + i) | 1;
        ps_sparse_pull (table, ids, BATCH, got);
        for (size_t i = 0; i < BATCH; i++) {
            ps_tablespec_init_row (&spec, ids [i], start);
            float want0 = start [0] - 0.5f * ((float) ((base + i) % 1000) * 0.001f);
            float want1 = start [1] - 0.5f * -1.0f;
            if (got [i * DIM] != want0 || got [i * DIM + 1] != want1)
                fail_msg ("row %llu (id %llu): %.9g %.9g, expected %.9g %.9g",
                          (unsigned long long) (base + i), (unsigned long long) ids [i],
                          got [i * DIM], got [i * DIM + 1], want0, want1);
        }
    }
    free (ids);
    free (grads);
    free (got);
    ps_sparse_destroy (&table);
}

//  --------------------------------------------------------------------
//  Concurrency

#define C_THREADS  4
#define C_PUSHES   60
#define C_BATCH    400
#define C_DIM      8

typedef struct {
    ps_sparse_t *table;
    int thread;
    volatile int *stop;
} c_arg_t;

//  Thread t's push k: step t * C_PUSHES + k + 1, ids of its own (t in the
//  low bits), new ones and some seen before, so stripes grow meanwhile.
static void
c_batch (int t, int k, uint64_t *ids, float *grads)
{
    uint64_t rng = (uint64_t) (t * 1000 + k);
    for (int i = 0; i < C_BATCH; i++) {
        //  Odd places: new ids; even ones: ids that come back every third
        //  push.
        uint64_t n = i % 2 ? (uint64_t) k * C_BATCH + (uint64_t) i
                           : 1000000 + (uint64_t) i / 2 + (uint64_t) (k % 3) * C_BATCH;
        ids [i] = n * C_THREADS + (uint64_t) t;
        for (int j = 0; j < C_DIM; j++)
            grads [i * C_DIM + j] = (float) (harness_unit (&rng) - 0.5);
    }
}

static void *
c_pusher (void *arg)
{
    c_arg_t *a = arg;
    uint64_t ids [C_BATCH];
    float grads [C_BATCH * C_DIM];
    for (int k = 0; k < C_PUSHES; k++) {
        c_batch (a->thread, k, ids, grads);
        ps_sparse_push_result_t result;
        if (ps_sparse_push (a->table, (uint64_t) (a->thread * C_PUSHES + k + 1), ids, C_BATCH,
                            grads, &result) != PS_OK)
            return (void *) 1;
    }
    return NULL;
}

static void *
c_puller (void *arg)
{
    c_arg_t *a = arg;
    uint64_t ids [256];
    float out [256 * C_DIM];
    uint64_t rng = 99;
    while (!*a->stop) {
        for (int i = 0; i < 256; i++)
            ids [i] = harness_splitmix (&rng) % 200000;
        ps_sparse_pull (a->table, ids, 256, out);
        for (int i = 0; i < 256 * C_DIM; i++)
            if (!isfinite (out [i]))
                return (void *) 1;
    }
    return NULL;
}

//  Four threads push disjoint ids while a fifth pulls, from an empty table
//  whose stripes grow all the while; the result equals the same pushes
//  applied one after another.
static void
test_concurrent (void **state)
{
    (void) state;
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "conc", C_DIM);
    ps_rowopt_default (&spec.opt, PS_ROWOPT_ADAM);
    ps_sparse_t *table = ps_sparse_new (&spec, NULL);
    ps_sparse_t *serial = ps_sparse_new (&spec, NULL);
    volatile int stop = 0;
    pthread_t threads [C_THREADS + 1];
    c_arg_t args [C_THREADS + 1];
    for (int t = 0; t <= C_THREADS; t++) {
        args [t] = (c_arg_t) { table, t, &stop };
        assert_int_equal (pthread_create (&threads [t], NULL, t < C_THREADS ? c_pusher : c_puller,
                                          &args [t]), 0);
    }
    for (int t = 0; t < C_THREADS; t++) {
        void *ret;
        assert_int_equal (pthread_join (threads [t], &ret), 0);
        assert_null (ret);
    }
    stop = 1;
    void *ret;
    assert_int_equal (pthread_join (threads [C_THREADS], &ret), 0);
    assert_null (ret);

    uint64_t ids [C_BATCH];
    float grads [C_BATCH * C_DIM];
    for (int t = 0; t < C_THREADS; t++)
        for (int k = 0; k < C_PUSHES; k++) {
            c_batch (t, k, ids, grads);
            ps_error_t err;
            harness_ok (ps_sparse_check_push (serial, (uint64_t) (t * C_PUSHES + k + 1), ids,
                                              C_BATCH, &err), &err);
            ps_sparse_push_result_t result;
            harness_ok (ps_sparse_push (serial, (uint64_t) (t * C_PUSHES + k + 1), ids, C_BATCH,
                                        grads, &result), NULL);
        }
    char diff [256];
    if (ps_sparse_differs (table, serial, diff, sizeof diff))
        fail_msg ("concurrent and serial pushes differ: %s", diff);
    ps_sparse_stats_t stats;
    ps_sparse_stats (table, &stats);
    assert_true (stats.rows > 40000);
    assert_int_equal (stats.pushes, C_THREADS * C_PUSHES);
    ps_sparse_destroy (&table);
    ps_sparse_destroy (&serial);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_spec),
        cmocka_unit_test (test_init_row),
        cmocka_unit_test (test_shard_of),
        cmocka_unit_test (test_pull_never_creates),
        cmocka_unit_test (test_many_ids),
        cmocka_unit_test (test_widest_rows),
        cmocka_unit_test (test_check_push),
        cmocka_unit_test (test_eviction_frees),
        cmocka_unit_test (test_memory_bound),
        cmocka_unit_test (test_index_blocks),
        cmocka_unit_test (test_large_index),
        cmocka_unit_test (test_concurrent),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
