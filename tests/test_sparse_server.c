//  Embedding tables on a real ps-server process (ps/ps_tables.c,
//  ps/ps_sparsejob.c, the table requests of ps/ps_control.c), over the
//  wire as the protocol says (schemas/protocol.json: table_create,
//  sparse_pull, sparse_push, sparse_push_pull, stats_ok.tables): the
//  requests and their refusals. Snapshots and restores of tables are
//  test_sparse_snapshot; both use the fixture of harness_sparse.h.
//
//  Creating a table twice with the same spec keeps it; a different spec,
//  shard or count is refused by name, and a request with one bad table
//  creates none. A pull of ids never pushed reads each row's initial value
//  (ps_tablespec_init_row) and creates no row. Pushes follow a float64
//  Adagrad reference; a repeated step applies nothing and says duplicate.
//  Each refusal (unknown table, wrong row width, frames that disagree with
//  the counts, an id of another server's shard, an id twice, a table
//  twice, NaN, a stale generation) names what was wrong and leaves every
//  row as it was, the good tables of the same push included. Admission
//  drops an id's gradients until its count is reached, and counts them. A
//  push-pull reads the rows after its push, on the pool for a large one.
//  Evaluators may pull but not push, workers may not create tables.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "harness_case.h"
#include "harness_rand.h"
#include "harness_sparse.h"
#include "harness_wire.h"
#include "ps_proto_conv.h"
#include "ps_sparse.h"
#include "ps_tablespec.h"

static harness_sparse_t s_fx;

//  ---------------------------------------------------------------------
//  Cases

static void
test_create_repeat_and_conflicts (void **state)
{
    (void) state;
    ps_tablespec_t spec = harness_sparse_spec ("create/emb", 4);
    harness_sparse_create (&s_fx, &spec);
    //  The same again: a no-op.
    const ps_proto_t *reply =
        harness_sparse_create_on (&s_fx, s_fx.chief, &spec, 1, 0, HARNESS_SPARSE_SHARDS);
    assert_int_equal (reply->type, PS_PROTO_TABLE_CREATE_OK);
    assert_int_equal (reply->table_create_ok.created, 0);
    assert_int_equal (reply->table_create_ok.existing, 1);
    //  Another row width, another shard: refused by name.
    ps_tablespec_t wider = harness_sparse_spec ("create/emb", 8);
    harness_sparse_expect_error (harness_sparse_create_on (&s_fx, s_fx.chief, &wider, 1, 0,
                                                           HARNESS_SPARSE_SHARDS),
                                 "exists", "create/emb");
    harness_sparse_expect_error (harness_sparse_create_on (&s_fx, s_fx.chief, &spec, 1, 1,
                                                           HARNESS_SPARSE_SHARDS),
                                 "exists", "exists as shard 0 of 2, asked for shard 1 of 2");
    //  All or nothing: a new table beside a conflicting one is not made.
    ps_tablespec_t pair [] = { harness_sparse_spec ("create/new", 2), wider };
    harness_sparse_expect_error (harness_sparse_create_on (&s_fx, s_fx.chief, pair, 2, 0,
                                                           HARNESS_SPARSE_SHARDS),
                                 "exists", "create/emb");
    uint64_t id = 0;
    harness_sparse_expect_error (harness_sparse_pull_on (&s_fx, s_fx.worker, "create/new", 2, &id,
                                                         1),
                                 "not_found", "no table create/new");
    //  A table twice, a shard past the count, a spec out of range.
    ps_tablespec_t twice [] = { harness_sparse_spec ("create/twice", 2),
                                harness_sparse_spec ("create/twice", 2) };
    harness_sparse_expect_error (harness_sparse_create_on (&s_fx, s_fx.chief, twice, 2, 0,
                                                           HARNESS_SPARSE_SHARDS),
                                 "invalid", "appears twice");
    harness_sparse_expect_error (harness_sparse_create_on (&s_fx, s_fx.chief, &spec, 1, 2,
                                                           HARNESS_SPARSE_SHARDS),
                                 "invalid", "shard 2 is not below shards 2");
    ps_tablespec_t bad = harness_sparse_spec ("create/bad", 2);
    bad.opt.lr = -1;
    harness_sparse_expect_error (harness_sparse_create_on (&s_fx, s_fx.chief, &bad, 1, 0,
                                                           HARNESS_SPARSE_SHARDS),
                                 "invalid", "create/bad");
}

static void
test_pull_creates_nothing (void **state)
{
    (void) state;
    ps_tablespec_t spec = harness_sparse_spec ("pull/emb", 5);
    spec.init.kind = PS_INIT_NORMAL;
    spec.init.stddev = 0.1;
    harness_sparse_create (&s_fx, &spec);
    uint64_t rand = 3, ids [40];
    harness_sparse_ids (&spec, &rand, ids, 40);
    ids [7] = ids [3];          //  a pull may repeat an id
    float got [40 * 5], want [5];
    harness_sparse_pull (&s_fx, "pull/emb", 5, ids, 40, got);
    for (size_t i = 0; i < 40; i++) {
        ps_tablespec_init_row (&spec, ids [i], want);
        assert_memory_equal (got + i * 5, want, sizeof want);
    }
    //  An evaluator's pull too, and neither created anything.
    assert_int_equal (harness_sparse_pull_on (&s_fx, s_fx.evaluator, "pull/emb", 5, ids, 40)->type,
                      PS_PROTO_SPARSE_PULL_OK);
    ps_proto_table_stats_t stats = harness_sparse_table_stats (&s_fx, "pull/emb");
    assert_int_equal (stats.rows, 0);
    assert_int_equal (stats.created, 0);
    assert_int_equal (stats.pulls, 80);
    assert_int_equal (stats.shard, 0);
    assert_int_equal (stats.shards, HARNESS_SPARSE_SHARDS);
}

//  Adagrad as ps_tablespec.h writes it, in float64: a += g^2;
//  w -= lr * g / sqrt (a + eps).
static void
test_push_adagrad_and_duplicate (void **state)
{
    (void) state;
    const uint32_t dim = 3;
    ps_tablespec_t spec = harness_sparse_spec ("adagrad/emb", dim);
    harness_sparse_create (&s_fx, &spec);
    uint64_t rand = 9, ids [6];
    harness_sparse_ids (&spec, &rand, ids, 6);
    double w [6][3], a [6][3];
    for (size_t i = 0; i < 6; i++) {
        float row [3];
        ps_tablespec_init_row (&spec, ids [i], row);
        for (uint32_t j = 0; j < dim; j++) {
            w [i][j] = row [j];
            a [i][j] = spec.opt.initial_accumulator;
        }
    }
    for (uint64_t step = 1; step <= 3; step++) {
        //  Each step touches ids [step - 1 .. step + 2].
        const uint64_t *mine = ids + step - 1;
        float grads [4 * 3];
        for (size_t k = 0; k < 4; k++)
            for (uint32_t j = 0; j < dim; j++) {
                float g = (float) sin ((double) (step * 7 + k * 3 + j)) * 0.5f;
                grads [k * dim + j] = g;
                double *wij = &w [step - 1 + k][j], *aij = &a [step - 1 + k][j];
                *aij += (double) g * g;
                *wij -= spec.opt.lr * g / sqrt (*aij + spec.opt.epsilon);
            }
        harness_sparse_entry_t entry = { "adagrad/emb", dim, mine, 4, grads };
        ps_proto_sparse_applied_t applied = harness_sparse_push (&s_fx, step, &entry);
        assert_string_equal (applied.table, "adagrad/emb");
        assert_int_equal (applied.applied, 4);
        assert_int_equal (applied.created, step == 1 ? 4 : 1);
        assert_false (applied.duplicate);
    }
    float got [6 * 3];
    harness_sparse_pull (&s_fx, "adagrad/emb", dim, ids, 6, got);
    for (size_t i = 0; i < 6; i++)
        for (uint32_t j = 0; j < dim; j++)
            assert_true (fabs (got [i * dim + j] - w [i][j]) <= 1e-5 * (1 + fabs (w [i][j])));
    //  Step 2 again: nothing applied, the reply says so.
    float ones [4 * 3];
    for (size_t k = 0; k < 12; k++)
        ones [k] = 1;
    harness_sparse_entry_t again = { "adagrad/emb", dim, ids + 1, 4, ones };
    ps_proto_sparse_applied_t applied = harness_sparse_push (&s_fx, 2, &again);
    assert_true (applied.duplicate);
    assert_int_equal (applied.applied, 0);
    float after [6 * 3];
    harness_sparse_pull (&s_fx, "adagrad/emb", dim, ids, 6, after);
    assert_memory_equal (after, got, sizeof got);
    ps_proto_table_stats_t stats = harness_sparse_table_stats (&s_fx, "adagrad/emb");
    assert_int_equal (stats.rows, 6);
    assert_int_equal (stats.created, 6);
    assert_int_equal (stats.pushes, 3);
    assert_int_equal (stats.duplicates, 1);
    assert_int_equal (stats.row_updates, 12);
    assert_int_equal (stats.steps, 3);
    assert_true (stats.bytes >= 6 * 3 * 4 * 2);
}

static void
test_refusals_change_nothing (void **state)
{
    (void) state;
    const uint32_t dim = 2;
    ps_tablespec_t spec = harness_sparse_spec ("refuse/emb", dim),
                   other = harness_sparse_spec ("refuse/other", dim);
    harness_sparse_create (&s_fx, &spec);
    harness_sparse_create (&s_fx, &other);
    uint64_t rand = 21, ids [3];
    harness_sparse_ids (&spec, &rand, ids, 3);
    float grads [3 * 2] = { 0.5f, -0.5f, 1, 2, 3, 4 };
    float before [3 * 2], after [3 * 2];
    harness_sparse_pull (&s_fx, "refuse/emb", dim, ids, 3, before);
    harness_sparse_entry_t good = { "refuse/emb", dim, ids, 3, grads };

    //  Each bad entry rides beside a good one, which must not be applied.
    harness_sparse_entry_t bad = { "refuse/nope", dim, ids, 3, grads };
    harness_sparse_entry_t pair [2] = { good, bad };
    harness_sparse_expect_error (harness_sparse_push_on (&s_fx, s_fx.worker, 1, false, 0, pair, 2),
                                 "not_found", "tables[1]: no table refuse/nope");
    pair [1] = (harness_sparse_entry_t) { "refuse/other", 1, ids, 3, grads };
    harness_sparse_expect_error (harness_sparse_push_on (&s_fx, s_fx.worker, 1, false, 0, pair, 2),
                                 "bad_shape",
                                 "table refuse/other has rows of 2 floats, the request says 1");
    uint64_t foreign [3] = { ids [0], ids [1], 0 };
    do
        foreign [2] = harness_splitmix (&rand);
    while (ps_tablespec_shard_of (foreign [2], spec.shard_seed, HARNESS_SPARSE_SHARDS) != 1);
    pair [1] = (harness_sparse_entry_t) { "refuse/other", dim, foreign, 3, grads };
    char text [128];
    snprintf (text, sizeof text, "id %llu (element 2) of table refuse/other belongs to "
              "shard 1, not to this server's shard 0 of 2", (unsigned long long) foreign [2]);
    harness_sparse_expect_error (harness_sparse_push_on (&s_fx, s_fx.worker, 1, false, 0, pair, 2),
                                 "invalid", text);
    uint64_t repeated [3] = { ids [0], ids [1], ids [0] };
    pair [1] = (harness_sparse_entry_t) { "refuse/other", dim, repeated, 3, grads };
    snprintf (text, sizeof text, "%llu", (unsigned long long) ids [0]);
    harness_sparse_expect_error (harness_sparse_push_on (&s_fx, s_fx.worker, 1, false, 0, pair, 2),
                                 "invalid", text);
    pair [1] = good;
    harness_sparse_expect_error (harness_sparse_push_on (&s_fx, s_fx.worker, 1, false, 0, pair, 2),
                                 "invalid", "table refuse/emb appears twice");
    float nan_grads [3 * 2] = { 0, 0, 0, 0, 0, NAN };
    pair [1] = (harness_sparse_entry_t) { "refuse/other", dim, ids, 3, nan_grads };
    harness_sparse_expect_error (harness_sparse_push_on (&s_fx, s_fx.worker, 1, false, 0, pair, 2),
                                 "nonfinite",
                                 "table refuse/other holds a non-finite value (nan) at row 2");
    //  Frames that disagree with the counts: the codec's refusal.
    ps_proto_sparse_ref_t ref = { "refuse/emb", 3, dim };
    ps_proto_t msg = { .type = PS_PROTO_SPARSE_PUSH, .id = s_fx.id++,
                       .sparse_push = { 1, 0, false, 0, { 1, &ref } } };
    const void *data [] = { ids, grads };
    size_t sizes [] = { 3 * sizeof (uint64_t), 2 * dim * sizeof (float) };
    harness_send_frames (s_fx.worker, &msg, data, sizes, 2);
    harness_sparse_expect_error (harness_recv (s_fx.worker, s_fx.reply, false,
                                               HARNESS_SPARSE_TIMEOUT_MS),
                                 "bad_shape",
                                 "tables[0]: rows frame has 16 bytes, expected 3 rows of 8 bytes");

    harness_sparse_pull (&s_fx, "refuse/emb", dim, ids, 3, after);
    assert_memory_equal (after, before, sizeof before);
    assert_int_equal (harness_sparse_table_stats (&s_fx, "refuse/emb").rows, 0);
    assert_int_equal (harness_sparse_table_stats (&s_fx, "refuse/other").rows, 0);
    assert_int_equal (harness_sparse_table_stats (&s_fx, "refuse/other").nonfinite, 1);
    //  The step stayed free: the good push alone applies it now.
    assert_int_equal (harness_sparse_push (&s_fx, 1, &good).applied, 3);
}

static void
test_admission (void **state)
{
    (void) state;
    const uint32_t dim = 2;
    ps_tablespec_t spec = harness_sparse_spec ("admit/emb", dim);
    spec.admit_count = 3;
    harness_sparse_create (&s_fx, &spec);
    uint64_t rand = 33, ids [2];
    harness_sparse_ids (&spec, &rand, ids, 2);
    float grads [2 * 2] = { 1, 1, 1, 1 }, init [2 * 2], got [2 * 2];
    harness_sparse_pull (&s_fx, "admit/emb", dim, ids, 2, init);
    //  ids [0] is pushed at every step, ids [1] at the first only.
    for (uint64_t step = 1; step <= 3; step++) {
        harness_sparse_entry_t entry = { "admit/emb", dim, ids, step == 1 ? 2 : 1, grads };
        ps_proto_sparse_applied_t applied = harness_sparse_push (&s_fx, step, &entry);
        assert_int_equal (applied.created, step == 3);
        assert_int_equal (applied.applied, step == 3);
        assert_int_equal (applied.dropped, step == 1 ? 2 : step == 2);
        harness_sparse_pull (&s_fx, "admit/emb", dim, ids, 2, got);
        if (step < 3)
            assert_memory_equal (got, init, sizeof init);
        else
            assert_memory_not_equal (got, init, dim * sizeof (float));
        assert_memory_equal (got + dim, init + dim, dim * sizeof (float));
    }
    ps_proto_table_stats_t stats = harness_sparse_table_stats (&s_fx, "admit/emb");
    assert_int_equal (stats.rows, 1);
    assert_int_equal (stats.created, 1);
    assert_int_equal (stats.dropped, 3);
}

//  A push-pull reads its own push, inline for a small one and on the pool
//  for one over the server's inline limit (26 * 512 ids of 16 floats);
//  a pull of a table not pushed rides along.
static void
test_push_pull (void **state)
{
    (void) state;
    const uint32_t dim = 16;
    const size_t n = 26 * 512;
    ps_tablespec_t spec = harness_sparse_spec ("pp/emb", dim),
                   side = harness_sparse_spec ("pp/side", 1);
    spec.opt.kind = PS_ROWOPT_SGD;
    spec.opt.lr = 0.5;
    harness_sparse_create (&s_fx, &spec);
    harness_sparse_create (&s_fx, &side);
    uint64_t rand = 44;
    uint64_t *ids = malloc (n * sizeof *ids);
    float *grads = malloc (n * dim * sizeof *grads);
    float *want = malloc (n * dim * sizeof *want);
    assert_true (ids && grads && want);
    harness_sparse_ids (&spec, &rand, ids, n);
    const size_t sizes_n [] = { 5, n };
    for (int round = 0; round < 2; round++) {
        size_t count = sizes_n [round];
        for (size_t i = 0; i < count * dim; i++)
            grads [i] = (float) ((i % 7) + 1);
        harness_sparse_pull (&s_fx, "pp/emb", dim, ids, count, want);
        for (size_t i = 0; i < count * dim; i++)
            want [i] -= 0.5f * grads [i];
        ps_proto_sparse_ref_t push = { "pp/emb", count, dim };
        ps_proto_sparse_ref_t pulls [] = { { "pp/side", 1, 1 }, { "pp/emb", count, dim } };
        ps_proto_t msg = { .type = PS_PROTO_SPARSE_PUSH_PULL, .id = s_fx.id++,
                           .sparse_push_pull = { 10 + (uint64_t) round, 0, false, 0, { 1, &push },
                                                 { 2, pulls } } };
        const void *data [] = { ids, grads, ids, ids };
        size_t sizes [] = { count * 8, count * dim * 4, 8, count * 8 };
        harness_send_frames (s_fx.worker, &msg, data, sizes, 4);
        const ps_proto_t *reply =
            harness_expect (s_fx.worker, s_fx.reply, PS_PROTO_SPARSE_PUSH_PULL_OK,
                            HARNESS_SPARSE_TIMEOUT_MS);
        assert_int_equal (reply->sparse_push_pull_ok.applied.count, 1);
        assert_int_equal (reply->sparse_push_pull_ok.applied.items [0].applied, count);
        assert_int_equal (reply->sparse_push_pull_ok.tables.count, 2);
        assert_string_equal (reply->sparse_push_pull_ok.tables.items [1].table, "pp/emb");
        float side_row;
        ps_tablespec_init_row (&side, ids [0], &side_row);
        assert_true (ps_msg_tensor (s_fx.reply, 0) [0] == side_row);
        assert_memory_equal (ps_msg_tensor (s_fx.reply, 1), want, count * dim * sizeof (float));
    }
    free (ids);
    free (grads);
    free (want);
}

//  Three workers' pushes in flight at once, each over the inline limit so
//  that the pool applies them side by side, onto overlapping ids of one
//  table that grows as they land: every step is applied exactly once, and
//  each row ends as the reference says (SGD of gradient 1 per push that
//  names it: its initial value less 0.5 per push, in float as the server
//  does it).
static void
test_concurrent_growth (void **state)
{
    (void) state;
    enum { WORKERS = 3, STEPS = 6, PER_PUSH = 13312, POOL = 30000 };
    const uint32_t dim = 4;
    ps_tablespec_t spec = harness_sparse_spec ("grow/emb", dim);
    spec.opt.kind = PS_ROWOPT_SGD;
    spec.opt.lr = 0.5;
    harness_sparse_create (&s_fx, &spec);
    uint64_t rand = 77;
    uint64_t *pool = malloc (POOL * sizeof *pool);
    uint32_t *touches = calloc (POOL, sizeof *touches);
    uint64_t *ids = malloc ((size_t) WORKERS * STEPS * PER_PUSH * sizeof *ids);
    float *ones = malloc ((size_t) PER_PUSH * dim * sizeof *ones);
    assert_true (pool && touches && ids && ones);
    harness_sparse_ids (&spec, &rand, pool, POOL);
    for (size_t k = 0; k < (size_t) PER_PUSH * dim; k++)
        ones [k] = 1;
    //  Each push names PER_PUSH distinct ids of the pool: a window of it
    //  at a random start.
    for (size_t p = 0; p < WORKERS * STEPS; p++) {
        size_t start = (size_t) (harness_splitmix (&rand) % POOL);
        for (size_t k = 0; k < PER_PUSH; k++) {
            size_t at = (start + k) % POOL;
            ids [p * PER_PUSH + k] = pool [at];
            touches [at]++;
        }
    }
    void *workers [WORKERS];
    char task [32];
    for (int w = 0; w < WORKERS; w++) {
        snprintf (task, sizeof task, "worker:%d", w);
        workers [w] = harness_dealer (s_fx.ctx, s_fx.server.endpoint, task, "ps:0");
    }
    for (size_t step = 0; step < STEPS; step++)
        for (int w = 0; w < WORKERS; w++) {
            size_t p = step * WORKERS + (size_t) w;
            ps_proto_sparse_ref_t ref = { "grow/emb", PER_PUSH, dim };
            ps_proto_t msg = { .type = PS_PROTO_SPARSE_PUSH, .id = s_fx.id++,
                               .sparse_push = { 100 + p, (uint64_t) w, false, 0, { 1, &ref } } };
            const void *data [] = { ids + p * PER_PUSH, ones };
            size_t sizes [] = { PER_PUSH * sizeof (uint64_t), PER_PUSH * dim * sizeof (float) };
            harness_send_frames (workers [w], &msg, data, sizes, 2);
        }
    size_t updated = 0;
    for (int w = 0; w < WORKERS; w++)
        for (size_t step = 0; step < STEPS; step++) {
            const ps_proto_t *reply =
                harness_expect (workers [w], s_fx.reply, PS_PROTO_SPARSE_PUSH_OK,
                                HARNESS_SPARSE_TIMEOUT_MS);
            assert_false (reply->sparse_push_ok.applied.items [0].duplicate);
            updated += reply->sparse_push_ok.applied.items [0].applied;
        }
    assert_int_equal (updated, (size_t) WORKERS * STEPS * PER_PUSH);
    //  A step pushed again by another worker: applied once, so a duplicate.
    ps_proto_sparse_ref_t ref = { "grow/emb", PER_PUSH, dim };
    ps_proto_t msg = { .type = PS_PROTO_SPARSE_PUSH, .id = s_fx.id++,
                       .sparse_push = { 100, 2, false, 0, { 1, &ref } } };
    const void *data [] = { ids, ones };
    size_t sizes [] = { PER_PUSH * sizeof (uint64_t), PER_PUSH * dim * sizeof (float) };
    harness_send_frames (workers [2], &msg, data, sizes, 2);
    assert_true (
        harness_expect (workers [2], s_fx.reply, PS_PROTO_SPARSE_PUSH_OK, HARNESS_SPARSE_TIMEOUT_MS)
            ->sparse_push_ok.applied.items [0]
            .duplicate);

    size_t live = 0;
    for (size_t i = 0; i < POOL; i++)
        live += touches [i] > 0;
    ps_proto_table_stats_t stats = harness_sparse_table_stats (&s_fx, "grow/emb");
    assert_int_equal (stats.rows, live);
    assert_int_equal (stats.created, live);
    assert_int_equal (stats.pushes, WORKERS * STEPS);
    assert_int_equal (stats.steps, WORKERS * STEPS);
    assert_int_equal (stats.duplicates, 1);
    assert_int_equal (stats.row_updates, (uint64_t) WORKERS * STEPS * PER_PUSH);
    float *got = malloc ((size_t) POOL * dim * sizeof *got);
    assert_non_null (got);
    harness_sparse_pull (&s_fx, "grow/emb", dim, pool, POOL, got);
    for (size_t i = 0; i < POOL; i++) {
        float want [4];
        ps_tablespec_init_row (&spec, pool [i], want);
        for (uint32_t t = 0; t < touches [i]; t++)
            for (uint32_t j = 0; j < dim; j++)
                want [j] = want [j] - 0.5f;
        assert_memory_equal (got + i * dim, want, sizeof want);
    }
    for (int w = 0; w < WORKERS; w++)
        zmq_close (workers [w]);
    free (got);
    free (pool);
    free (touches);
    free (ids);
    free (ones);
}

static void
test_authorization (void **state)
{
    (void) state;
    ps_tablespec_t spec = harness_sparse_spec ("auth/emb", 1);
    harness_sparse_create (&s_fx, &spec);
    uint64_t id = 0;
    float grad = 1;
    harness_sparse_entry_t entry = { "auth/emb", 1, &id, 1, &grad };
    harness_sparse_expect_error (harness_sparse_push_on (&s_fx, s_fx.evaluator, 1, false, 0, &entry,
                                                         1),
                                 "forbidden", "sparse_push: only a worker may ask this");
    harness_sparse_expect_error (harness_sparse_create_on (&s_fx, s_fx.worker, &spec, 1, 0,
                                                           HARNESS_SPARSE_SHARDS),
                                 "forbidden", "table_create: only the coordinator may ask this");
}
//  ---------------------------------------------------------------------

static int
s_setup (void **state)
{
    (void) state;
    return harness_sparse_start (&s_fx, "2");
}

static int
s_teardown (void **state)
{
    (void) state;
    return harness_sparse_stop (&s_fx);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_create_repeat_and_conflicts),
        cmocka_unit_test (test_pull_creates_nothing),
        cmocka_unit_test (test_push_adagrad_and_duplicate),
        cmocka_unit_test (test_refusals_change_nothing),
        cmocka_unit_test (test_admission),
        cmocka_unit_test (test_push_pull),
        cmocka_unit_test (test_concurrent_growth),
        cmocka_unit_test (test_authorization),
    };
    return harness_finish (cmocka_run_group_tests (tests, s_setup, s_teardown));
}
