//  Unit tests for one server's embedding table shard (common/store/ps_sparse.c,
//  ps_sparse_stripe.c) against a reference written here, a plain array of
//  rows with the rules documented at the top of ps_sparse_stripe.c
//  (admission by a count-min sketch, TTL sweeps, capacity per stripe with
//  LRU and LFU order). The shard is run under random pushes and compared
//  after every push: every row's value by pull, the stats, and every row's
//  counters and slots, the admission counters and the evicted ids through
//  full and incremental snapshot files. The spec and the shard's single
//  behaviours are test_sparse_table.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness_case.h"
#include "harness_rand.h"
#include "ps_bytes.h"
#include "ps_rowopt.h"
#include "ps_sparse.h"
#include "ps_sparse_file.h"

typedef struct {
    char dir [HARNESS_DIR_SIZE];
    char full [256];
    char incr [256];
} fixture_t;

static int
s_setup (void **state)
{
    int rc = harness_dir_setup (state, sizeof (fixture_t));
    if (rc == 0) {
        fixture_t *fx = *state;
        snprintf (fx->full, sizeof fx->full, "%s/emb.full", fx->dir);
        snprintf (fx->incr, sizeof fx->incr, "%s/emb.incr", fx->dir);
    }
    return rc;
}

//  --------------------------------------------------------------------
//  The reference model

#define R_IDS     3000
#define R_DIM     4
#define R_BATCH   64
#define R_PUSHES  160
#define R_STEPS   400

typedef struct {
    bool live;
    uint64_t last_step, count;
    float data [3 * R_DIM];
    bool dirty;                 //  changed since the last full save
} r_row_t;

typedef struct {
    ps_tablespec_t spec;
    uint64_t ids [R_IDS];
    uint64_t sorted [R_IDS][2];
    r_row_t rows [R_IDS];
    bool in_base [R_IDS];       //  held by the last full save
    uint32_t width;
    uint8_t *sketch [PS_SPARSE_STRIPES];
    uint64_t last_sweep [PS_SPARSE_STRIPES];
    bool applied [R_STEPS + 1];
    uint64_t newest;
    ps_sparse_stats_t stats;
} r_table_t;

static uint32_t
r_sketch_width (const ps_tablespec_t *spec)
{
    if (spec->admit_count < 2 && spec->admit_prob >= 1.0)
        return 0;
    if (!spec->capacity)
        return 1u << 14;
    uint32_t width = 64;
    while (width < (1u << 16) && (uint64_t) width * PS_SPARSE_STRIPES < 2 * spec->capacity)
        width *= 2;
    return width;
}

static int
r_cmp_id (const void *a, const void *b)
{
    uint64_t x = ((const uint64_t *) a) [0], y = ((const uint64_t *) b) [0];
    return x < y ? -1 : x > y;
}

static r_table_t *
r_new (const ps_tablespec_t *spec, uint64_t seed)
{
    r_table_t *ref = calloc (1, sizeof *ref);
    assert_non_null (ref);
    ref->spec = *spec;
    uint64_t rng = seed;
    for (int u = 0; u < R_IDS; u++)
        ref->ids [u] = u % 5 == 0 ? (uint64_t) u : harness_splitmix (&rng);
    for (int u = 0; u < R_IDS; u++) {
        ref->sorted [u][0] = ref->ids [u];
        ref->sorted [u][1] = (uint64_t) u;
    }
    qsort (ref->sorted, R_IDS, sizeof ref->sorted [0], r_cmp_id);
    ref->width = r_sketch_width (spec);
    for (int s = 0; s < PS_SPARSE_STRIPES; s++)
        if (ref->width)
            ref->sketch [s] = calloc (PS_SPARSE_SKETCH_DEPTH, ref->width);
    return ref;
}

static void
r_destroy (r_table_t *ref)
{
    for (int s = 0; s < PS_SPARSE_STRIPES; s++)
        free (ref->sketch [s]);
    free (ref);
}

static bool
r_admit (r_table_t *ref, uint64_t id)
{
    uint64_t hash = ps_sparse_hash (id);
    uint8_t *sketch = ref->sketch [hash >> 58];
    if (!sketch)
        return true;
    unsigned count = 255;
    for (uint32_t r = 0; r < PS_SPARSE_SKETCH_DEPTH; r++) {
        uint8_t *c = sketch + r * ref->width + (ps_mix_draw (hash, r) & (ref->width - 1));
        if (*c < 255)
            (*c)++;
        if (*c < count)
            count = *c;
    }
    if (count < ref->spec.admit_count)
        return false;
    if (ref->spec.admit_prob >= 1.0)
        return true;
    uint64_t key = ps_mix64 (ref->spec.shard_seed) ^ ps_mix64 (id + 1);
    return (double) (ps_mix_draw (key, count) >> 11) * 0x1.0p-53 < ref->spec.admit_prob;
}

static void
r_evict (r_table_t *ref, int u)
{
    ref->rows [u].live = false;
    ref->rows [u].dirty = false;
    ref->stats.evicted++;
    ref->stats.rows--;
}

//  Eviction order: the smallest key first.
typedef struct {
    uint64_t a, b, c;
    int u;
} r_key_t;

static int
r_key_cmp (const void *x, const void *y)
{
    const r_key_t *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    if (p->b != q->b)
        return p->b < q->b ? -1 : 1;
    return p->c < q->c ? -1 : p->c > q->c;
}

static size_t
r_evict_stripe (r_table_t *ref, uint32_t s, uint64_t now)
{
    size_t evicted = 0;
    uint64_t ttl = ref->spec.ttl;
    if (ttl && now >= ref->last_sweep [s] + (ttl / 8 ? ttl / 8 : 1)) {
        ref->last_sweep [s] = now;
        for (int u = 0; u < R_IDS; u++) {
            r_row_t *row = &ref->rows [u];
            if (row->live && ps_sparse_stripe_of (ref->ids [u]) == s
            &&  row->last_step < now && now - row->last_step > ttl) {
                r_evict (ref, u);
                evicted++;
            }
        }
    }
    if (ref->spec.capacity) {
        uint64_t cap = ps_sparse_stripe_capacity (ref->spec.capacity, s);
        static r_key_t keys [R_IDS];
        size_t n = 0;
        for (int u = 0; u < R_IDS; u++) {
            r_row_t *row = &ref->rows [u];
            if (row->live && ps_sparse_stripe_of (ref->ids [u]) == s)
                keys [n++] = ref->spec.policy == PS_EVICT_LRU
                           ? (r_key_t) { row->last_step, ref->ids [u], 0, u }
                           : (r_key_t) { row->count, row->last_step, ref->ids [u], u };
        }
        if (n > cap) {
            qsort (keys, n, sizeof keys [0], r_key_cmp);
            size_t k = n - (size_t) (cap - cap / 16);
            for (size_t i = 0; i < k; i++)
                r_evict (ref, keys [i].u);
            evicted += k;
        }
    }
    return evicted;
}

static int
r_push (r_table_t *ref, uint64_t step, const int *us, size_t n, const float *grads,
        ps_sparse_push_result_t *result)
{
    memset (result, 0, sizeof *result);
    if (ref->applied [step]) {
        ref->stats.duplicates++;
        return PS_DUPLICATE;
    }
    ref->applied [step] = true;
    ref->stats.pushes++;
    if (step > ref->newest)
        ref->newest = step;
    uint64_t touched = 0;
    const ps_rowopt_t *opt = &ref->spec.opt;
    for (size_t i = 0; i < n; i++) {
        int u = us [i];
        uint64_t id = ref->ids [u];
        r_row_t *row = &ref->rows [u];
        touched |= UINT64_C (1) << ps_sparse_stripe_of (id);
        if (!row->live) {
            if (!r_admit (ref, id)) {
                result->dropped++;
                ref->stats.dropped++;
                continue;
            }
            row->live = true;
            row->count = 0;
            row->last_step = 0;
            ps_tablespec_init_row (&ref->spec, id, row->data);
            ps_rowopt_init_slots (opt, row->data + R_DIM, R_DIM);
            result->created++;
            ref->stats.created++;
            ref->stats.rows++;
        }
        row->count++;
        if (step > row->last_step)
            row->last_step = step;
        ps_rowopt_apply (opt, row->data, row->data + R_DIM, grads + i * R_DIM, R_DIM, row->count);
        row->dirty = true;
        result->applied++;
        ref->stats.row_updates++;
    }
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++)
        if (touched >> s & 1)
            result->evicted += r_evict_stripe (ref, s, ref->newest);
    return PS_OK;
}

//  The place of id among the reference's ids, by its sorted (id, place)
//  pairs; -1 when it is none of them.
static int
r_find (const r_table_t *ref, uint64_t id)
{
    const uint64_t *hit = bsearch (&id, ref->sorted, R_IDS, sizeof ref->sorted [0], r_cmp_id);
    return hit ? (int) hit [1] : -1;
}

//  Compare a snapshot file of the table with the reference: every row's
//  counters, value and slots, the admission counters and sweep steps, and
//  for an incremental file exactly the dirty rows and the evicted ids: the
//  ids the last full file holds that have no row now.
static void
r_check_file (const r_table_t *ref, const char *path, bool full)
{
    ps_sparse_file_t file;
    ps_error_t err;
    harness_ok (ps_sparse_file_open (path, &file, &err), &err);
    assert_int_equal (file.header.full, full);
    assert_int_equal (file.header.newest_step, ref->newest);
    size_t floats = R_DIM * (1 + (size_t) ps_rowopt_slot_count (ref->spec.opt.kind));
    size_t row_bytes = ps_sparse_file_row_bytes (&ref->spec);
    size_t rows = 0, evicted = 0;
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++) {
        const ps_sparse_file_section_t *section = &file.sections [s];
        assert_int_equal (section->last_sweep, ref->last_sweep [s]);
        if (ref->width)
            assert_memory_equal (section->sketch, ref->sketch [s],
                                 PS_SPARSE_SKETCH_DEPTH * ref->width);
        for (uint64_t i = 0; i < section->nrows; i++) {
            const uint8_t *p = section->rows + i * row_bytes;
            int u = r_find (ref, ps_get_u64 (p));
            assert_true (u >= 0);
            const r_row_t *row = &ref->rows [u];
            assert_true (row->live);
            assert_true (full || row->dirty);
            assert_int_equal (ps_get_u64 (p + 8), row->last_step);
            assert_int_equal (ps_get_u64 (p + 16), row->count);
            assert_memory_equal (p + 24, row->data, floats * sizeof (float));
            rows++;
        }
        for (uint64_t i = 0; i < section->nevicted; i++) {
            int u = r_find (ref, ps_get_u64 (section->evicted + 8 * i));
            assert_true (u >= 0);
            assert_true (ref->in_base [u] && !ref->rows [u].live);
            evicted++;
        }
    }
    size_t expect_rows = 0, expect_evicted = 0;
    for (int u = 0; u < R_IDS; u++) {
        expect_rows += ref->rows [u].live && (full || ref->rows [u].dirty);
        expect_evicted += !full && ref->in_base [u] && !ref->rows [u].live;
    }
    assert_int_equal (rows, expect_rows);
    assert_int_equal (evicted, expect_evicted);
    ps_sparse_file_close (&file);
}

static void
r_mark_saved (r_table_t *ref)
{
    for (int u = 0; u < R_IDS; u++) {
        ref->rows [u].dirty = false;
        ref->in_base [u] = ref->rows [u].live;
    }
}

//  Run random pushes on the table and the reference and compare them.
//  Steps mostly come in order; some repeat (refused) and some come late.
static void
r_run (const fixture_t *fx, const ps_tablespec_t *spec, uint64_t seed, double skew)
{
    ps_error_t err;
    ps_sparse_t *table = ps_sparse_new (spec, &err);
    harness_ok (table ? 0 : err.code, &err);
    r_table_t *ref = r_new (spec, seed);
    uint64_t rng = seed * 7 + 1;
    int us [R_BATCH];
    uint64_t ids [R_BATCH];
    float grads [R_BATCH * R_DIM];
    static float pulled [R_IDS * R_DIM], expect [R_IDS * R_DIM];
    bool saved_full = false;
    uint64_t step = 0;
    for (int push = 0; push < R_PUSHES; push++) {
        uint64_t this_step;
        double r = harness_unit (&rng);
        if (r < 0.05 && step > 3)
            this_step = step - 2;           //  a repeat or a late step
        else
        if (r < 0.1)
            this_step = (step += 2) - 1;    //  skip one; it may come later
        else
            this_step = ++step;
        assert_true (this_step <= R_STEPS);
        bool used [R_IDS] = { false };
        for (int i = 0; i < R_BATCH; i++) {
            int u;
            do
                u = (int) (R_IDS * pow (harness_unit (&rng), skew));
            while (used [u]);
            used [u] = true;
            us [i] = u;
            ids [i] = ref->ids [u];
            for (int j = 0; j < R_DIM; j++)
                grads [i * R_DIM + j] = (float) (harness_unit (&rng) - 0.5);
        }
        int rc = ps_sparse_check_push (table, this_step, ids, R_BATCH, &err);
        assert_int_equal (rc, ref->applied [this_step] ? PS_DUPLICATE : PS_OK);
        ps_sparse_push_result_t got, want;
        assert_int_equal (ps_sparse_push (table, this_step, ids, R_BATCH, grads, &got),
                          r_push (ref, this_step, us, R_BATCH, grads, &want));
        assert_int_equal (got.applied, want.applied);
        assert_int_equal (got.created, want.created);
        assert_int_equal (got.dropped, want.dropped);
        assert_int_equal (got.evicted, want.evicted);

        ps_sparse_stats_t stats;
        ps_sparse_stats (table, &stats);
        assert_int_equal (stats.rows, ref->stats.rows);
        assert_int_equal (stats.created, ref->stats.created);
        assert_int_equal (stats.evicted, ref->stats.evicted);
        assert_int_equal (stats.dropped, ref->stats.dropped);
        assert_int_equal (stats.row_updates, ref->stats.row_updates);
        assert_int_equal (stats.pushes, ref->stats.pushes);
        assert_int_equal (stats.duplicates, ref->stats.duplicates);
        assert_int_equal (ps_sparse_steps_applied (table), ref->stats.pushes);

        //  Every id's value, live or not.
        ps_sparse_pull (table, ref->ids, R_IDS, pulled);
        for (int u = 0; u < R_IDS; u++)
            if (ref->rows [u].live)
                memcpy (expect + u * R_DIM, ref->rows [u].data, sizeof (float) * R_DIM);
            else
                ps_tablespec_init_row (spec, ref->ids [u], expect + u * R_DIM);
        assert_memory_equal (pulled, expect, sizeof pulled);

        if (push % 40 == 39) {
            harness_ok (ps_sparse_save (table, fx->full, true, &err), &err);
            r_check_file (ref, fx->full, true);
            r_mark_saved (ref);
            saved_full = true;
        }
        else
        if (push % 10 == 9 && saved_full) {
            harness_ok (ps_sparse_save (table, fx->incr, false, &err), &err);
            r_check_file (ref, fx->incr, false);
        }
    }
    //  The pulls changed nothing but their count.
    ps_sparse_stats_t stats;
    ps_sparse_stats (table, &stats);
    assert_int_equal (stats.pulls, (uint64_t) R_PUSHES * R_IDS);
    ps_sparse_destroy (&table);
    r_destroy (ref);
}

static void
test_reference (void **state)
{
    const fixture_t *fx = *state;
    ps_tablespec_t spec;
    //  No limits.
    ps_tablespec_default (&spec, "plain", R_DIM);
    r_run (fx, &spec, 1, 1.0);
    //  Capacity, LRU: about 20 rows per stripe, each evicting to 19.
    spec.capacity = 1300;
    r_run (fx, &spec, 2, 1.0);
    //  Capacity, LFU, hot ids.
    ps_tablespec_default (&spec, "lfu", R_DIM);
    spec.capacity = 1300;
    spec.policy = PS_EVICT_LFU;
    r_run (fx, &spec, 3, 3.0);
    //  TTL, Adam.
    ps_tablespec_default (&spec, "ttl", R_DIM);
    ps_rowopt_default (&spec.opt, PS_ROWOPT_ADAM);
    spec.ttl = 24;
    r_run (fx, &spec, 4, 2.0);
    //  Admission after 3 pushes, and capacity, FTRL.
    ps_tablespec_default (&spec, "admit", R_DIM);
    ps_rowopt_default (&spec.opt, PS_ROWOPT_FTRL);
    spec.opt.l1 = 0.001;
    spec.admit_count = 3;
    spec.capacity = 1300;
    r_run (fx, &spec, 5, 2.0);
    //  Admission with probability 1/2, TTL and LFU, SGD, normal init.
    ps_tablespec_default (&spec, "prob", R_DIM);
    ps_rowopt_default (&spec.opt, PS_ROWOPT_SGD);
    spec.init.kind = PS_INIT_NORMAL;
    spec.admit_prob = 0.5;
    spec.ttl = 9;
    spec.capacity = 2000;
    spec.policy = PS_EVICT_LFU;
    r_run (fx, &spec, 6, 2.0);
    //  A capacity below the stripe count: some stripes hold nothing.
    ps_tablespec_default (&spec, "tiny", R_DIM);
    spec.capacity = 40;
    r_run (fx, &spec, 7, 1.0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_reference, s_setup, harness_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
