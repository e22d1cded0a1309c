//  Embedding tables on a real ps-server process (ps/ps_tables.c,
//  ps/ps_sparsejob.c, the table requests of ps/ps_control.c), over the
//  wire as the protocol says (schemas/protocol.json: table_create,
//  sparse_pull, sparse_push, sparse_push_pull, stats_ok.tables, snapshot
//  and restore of tables).
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
//  A full snapshot and an incremental one after it, restored into a fresh
//  server, give bit-identical pulls, the same counters and ledger, and
//  the same admission counts. A cluster's checkpoint directory, renamed
//  after the servers wrote into it, is the base of the next incremental
//  snapshot, and restoring it gives each server its own shard. A snapshot
//  taken while large pushes run on the pool is a cut: each row holds
//  exactly the steps of its file's ledger. A restore reads only the
//  server's own shard's file, refuses a table the server holds no shard of
//  and a file of another spec, installing nothing. A restore that carries
//  a generation fences the server at it. Evaluators may pull but not push,
//  workers may not create tables.

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
#include "harness_wire.h"
#include "ps_proto_conv.h"
#include "ps_sparse.h"
#include "ps_tablespec.h"

#define S_TIMEOUT_MS  20000
#define S_SHARDS      2         //  the server is shard 0 of 2

static harness_server_t s_server;
static harness_server_t s_fresh;       //  the one a snapshot is restored into
static harness_server_t s_busy;        //  many pool threads, for the cut
static char s_root [64];
static void *s_ctx;
static void *s_chief, *s_worker, *s_evaluator;
static ps_msg_t *s_reply;
static uint64_t s_id = 1;

//  ---------------------------------------------------------------------
//  Requests

//  A table spec: name and dim, the rest table defaults (Adagrad lr 0.05).
static ps_tablespec_t
s_spec (const char *name, uint32_t dim)
{
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, name, dim);
    spec.init.seed = 11;
    return spec;
}

//  Create specs[0..n) as shard `shard` of `shards` over socket; returns the
//  reply (table_create_ok or error).
static const ps_proto_t *
s_create_on (void *socket, const ps_tablespec_t *specs, size_t n, uint64_t shard,
             uint64_t shards)
{
    ps_proto_tablespec_t items [4];
    assert_true (n <= 4);
    for (size_t i = 0; i < n; i++)
        ps_proto_tablespec_set (&items [i], &specs [i]);
    ps_proto_t msg = { .type = PS_PROTO_TABLE_CREATE, .id = s_id++,
                       .table_create = { { n, items }, shard, shards } };
    harness_send (socket, NULL, 0, &msg);
    const ps_proto_t *reply = harness_recv (socket, s_reply, false, S_TIMEOUT_MS);
    assert_non_null (reply);
    return reply;
}

//  The specs of the tables created on the server, which snapshots of it
//  hold and a server restoring them must hold shards of.
static ps_tablespec_t s_held [32];
static size_t s_nheld;

static void
s_create (const ps_tablespec_t *spec)
{
    const ps_proto_t *reply = s_create_on (s_chief, spec, 1, 0, S_SHARDS);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("table_create: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (reply->table_create_ok.created, 1);
    assert_true (s_nheld < sizeof s_held / sizeof s_held [0]);
    s_held [s_nheld++] = *spec;
}

//  Create every table the server holds on another server, over its chief
//  socket, as shard `shard`: what a coordinator does before a restore.
static void
s_create_held_on (void *chief, uint64_t shard)
{
    for (size_t i = 0; i < s_nheld; i++) {
        const ps_proto_t *reply = s_create_on (chief, &s_held [i], 1, shard, S_SHARDS);
        if (reply->type == PS_PROTO_ERROR)
            fail_msg ("table_create: %s: %s", reply->error.code, reply->error.message);
    }
}

//  Ids of this server's shard of spec: n of them from state.
static void
s_ids (const ps_tablespec_t *spec, uint64_t *state, uint64_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        do
            ids [i] = harness_splitmix (state);
        while (ps_tablespec_shard_of (ids [i], spec->shard_seed, S_SHARDS) != 0);
    }
}

//  Send a sparse_pull of n ids of table (rows of dim) from socket.
static const ps_proto_t *
s_pull_on (void *socket, const char *table, uint32_t dim, const uint64_t *ids, size_t n)
{
    ps_proto_sparse_ref_t ref = { table, n, dim };
    ps_proto_t msg = { .type = PS_PROTO_SPARSE_PULL, .id = s_id++,
                       .sparse_pull.tables = { 1, &ref } };
    const void *data [] = { ids };
    size_t sizes [] = { n * sizeof (uint64_t) };
    harness_send_frames (socket, &msg, data, sizes, 1);
    const ps_proto_t *reply = harness_recv (socket, s_reply, false, S_TIMEOUT_MS);
    assert_non_null (reply);
    return reply;
}

//  Pull rows of ids into out, failing the case on an error.
static void
s_pull (const char *table, uint32_t dim, const uint64_t *ids, size_t n, float *out)
{
    const ps_proto_t *reply = s_pull_on (s_worker, table, dim, ids, n);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("sparse_pull: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (reply->type, PS_PROTO_SPARSE_PULL_OK);
    assert_int_equal (reply->sparse_pull_ok.tables.count, 1);
    assert_int_equal (reply->sparse_pull_ok.tables.items [0].count, n);
    memcpy (out, ps_msg_tensor (s_reply, 0), n * dim * sizeof (float));
}

//  One table entry of a push: its ids and gradients.
typedef struct {
    const char *table;
    uint32_t dim;
    const uint64_t *ids;
    size_t count;
    const float *grads;
} s_entry_t;

//  Send a sparse_push of entries[0..n) for step from socket (generation
//  when has_generation); returns the reply.
static const ps_proto_t *
s_push_on (void *socket, uint64_t step, bool has_generation, uint64_t generation,
           const s_entry_t *entries, size_t n)
{
    ps_proto_sparse_ref_t refs [4];
    const void *data [8];
    size_t sizes [8];
    assert_true (n <= 4);
    for (size_t i = 0; i < n; i++) {
        refs [i] = (ps_proto_sparse_ref_t) { entries [i].table, entries [i].count,
                                             entries [i].dim };
        data [2 * i] = entries [i].ids;
        sizes [2 * i] = entries [i].count * sizeof (uint64_t);
        data [2 * i + 1] = entries [i].grads;
        sizes [2 * i + 1] = entries [i].count * entries [i].dim * sizeof (float);
    }
    ps_proto_t msg = { .type = PS_PROTO_SPARSE_PUSH, .id = s_id++,
                       .sparse_push = { step, 0, has_generation, generation, { n, refs } } };
    harness_send_frames (socket, &msg, data, sizes, 2 * n);
    const ps_proto_t *reply = harness_recv (socket, s_reply, false, S_TIMEOUT_MS);
    assert_non_null (reply);
    return reply;
}

//  Push one table's gradients for step as worker:0; returns the entry of
//  the reply.
static ps_proto_sparse_applied_t
s_push (uint64_t step, const s_entry_t *entry)
{
    const ps_proto_t *reply = s_push_on (s_worker, step, false, 0, entry, 1);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("sparse_push: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (reply->type, PS_PROTO_SPARSE_PUSH_OK);
    assert_int_equal (reply->sparse_push_ok.applied.count, 1);
    return reply->sparse_push_ok.applied.items [0];
}

//  Fail the case unless reply is an error of code whose message holds text.
static void
s_expect_error (const ps_proto_t *reply, const char *code, const char *text)
{
    if (reply->type != PS_PROTO_ERROR)
        fail_msg ("expected error %s (%s), got a %s", code, text, ps_proto_info [reply->type].name);
    if (strcmp (reply->error.code, code) != 0 || !strstr (reply->error.message, text))
        fail_msg ("expected error %s holding '%s', got %s: %s", code, text, reply->error.code,
                  reply->error.message);
}

//  The stats of table on server socket.
static ps_proto_table_stats_t
s_table_stats_on (void *socket, const char *table)
{
    ps_proto_t msg = { .type = PS_PROTO_STATS, .id = s_id++ };
    harness_send (socket, NULL, 0, &msg);
    const ps_proto_t *reply = harness_expect (socket, s_reply, PS_PROTO_STATS_OK, S_TIMEOUT_MS);
    for (size_t i = 0; i < reply->stats_ok.tables.count; i++)
        if (strcmp (reply->stats_ok.tables.items [i].table, table) == 0)
            return reply->stats_ok.tables.items [i];
    fail_msg ("stats_ok holds no table %s", table);
    return (ps_proto_table_stats_t) { 0 };
}

static ps_proto_table_stats_t
s_table_stats (const char *table)
{
    return s_table_stats_on (s_worker, table);
}

//  ---------------------------------------------------------------------
//  Cases

static void
test_create_repeat_and_conflicts (void **state)
{
    (void) state;
    ps_tablespec_t spec = s_spec ("create/emb", 4);
    s_create (&spec);
    //  The same again: a no-op.
    const ps_proto_t *reply = s_create_on (s_chief, &spec, 1, 0, S_SHARDS);
    assert_int_equal (reply->type, PS_PROTO_TABLE_CREATE_OK);
    assert_int_equal (reply->table_create_ok.created, 0);
    assert_int_equal (reply->table_create_ok.existing, 1);
    //  Another row width, another shard: refused by name.
    ps_tablespec_t wider = s_spec ("create/emb", 8);
    s_expect_error (s_create_on (s_chief, &wider, 1, 0, S_SHARDS), "exists", "create/emb");
    s_expect_error (s_create_on (s_chief, &spec, 1, 1, S_SHARDS), "exists",
                    "exists as shard 0 of 2, asked for shard 1 of 2");
    //  All or nothing: a new table beside a conflicting one is not made.
    ps_tablespec_t pair [] = { s_spec ("create/new", 2), wider };
    s_expect_error (s_create_on (s_chief, pair, 2, 0, S_SHARDS), "exists", "create/emb");
    uint64_t id = 0;
    s_expect_error (s_pull_on (s_worker, "create/new", 2, &id, 1), "not_found",
                    "no table create/new");
    //  A table twice, a shard past the count, a spec out of range.
    ps_tablespec_t twice [] = { s_spec ("create/twice", 2), s_spec ("create/twice", 2) };
    s_expect_error (s_create_on (s_chief, twice, 2, 0, S_SHARDS), "invalid", "appears twice");
    s_expect_error (s_create_on (s_chief, &spec, 1, 2, S_SHARDS), "invalid",
                    "shard 2 is not below shards 2");
    ps_tablespec_t bad = s_spec ("create/bad", 2);
    bad.opt.lr = -1;
    s_expect_error (s_create_on (s_chief, &bad, 1, 0, S_SHARDS), "invalid", "create/bad");
}

static void
test_pull_creates_nothing (void **state)
{
    (void) state;
    ps_tablespec_t spec = s_spec ("pull/emb", 5);
    spec.init.kind = PS_INIT_NORMAL;
    spec.init.stddev = 0.1;
    s_create (&spec);
    uint64_t rand = 3, ids [40];
    s_ids (&spec, &rand, ids, 40);
    ids [7] = ids [3];          //  a pull may repeat an id
    float got [40 * 5], want [5];
    s_pull ("pull/emb", 5, ids, 40, got);
    for (size_t i = 0; i < 40; i++) {
        ps_tablespec_init_row (&spec, ids [i], want);
        assert_memory_equal (got + i * 5, want, sizeof want);
    }
    //  An evaluator's pull too, and neither created anything.
    assert_int_equal (s_pull_on (s_evaluator, "pull/emb", 5, ids, 40)->type,
                      PS_PROTO_SPARSE_PULL_OK);
    ps_proto_table_stats_t stats = s_table_stats ("pull/emb");
    assert_int_equal (stats.rows, 0);
    assert_int_equal (stats.created, 0);
    assert_int_equal (stats.pulls, 80);
    assert_int_equal (stats.shard, 0);
    assert_int_equal (stats.shards, S_SHARDS);
}

//  Adagrad as ps_tablespec.h writes it, in float64: a += g^2;
//  w -= lr * g / sqrt (a + eps).
static void
test_push_adagrad_and_duplicate (void **state)
{
    (void) state;
    const uint32_t dim = 3;
    ps_tablespec_t spec = s_spec ("adagrad/emb", dim);
    s_create (&spec);
    uint64_t rand = 9, ids [6];
    s_ids (&spec, &rand, ids, 6);
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
        s_entry_t entry = { "adagrad/emb", dim, mine, 4, grads };
        ps_proto_sparse_applied_t applied = s_push (step, &entry);
        assert_string_equal (applied.table, "adagrad/emb");
        assert_int_equal (applied.applied, 4);
        assert_int_equal (applied.created, step == 1 ? 4 : 1);
        assert_false (applied.duplicate);
    }
    float got [6 * 3];
    s_pull ("adagrad/emb", dim, ids, 6, got);
    for (size_t i = 0; i < 6; i++)
        for (uint32_t j = 0; j < dim; j++)
            assert_true (fabs (got [i * dim + j] - w [i][j]) <= 1e-5 * (1 + fabs (w [i][j])));
    //  Step 2 again: nothing applied, the reply says so.
    float ones [4 * 3];
    for (size_t k = 0; k < 12; k++)
        ones [k] = 1;
    s_entry_t again = { "adagrad/emb", dim, ids + 1, 4, ones };
    ps_proto_sparse_applied_t applied = s_push (2, &again);
    assert_true (applied.duplicate);
    assert_int_equal (applied.applied, 0);
    float after [6 * 3];
    s_pull ("adagrad/emb", dim, ids, 6, after);
    assert_memory_equal (after, got, sizeof got);
    ps_proto_table_stats_t stats = s_table_stats ("adagrad/emb");
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
    ps_tablespec_t spec = s_spec ("refuse/emb", dim), other = s_spec ("refuse/other", dim);
    s_create (&spec);
    s_create (&other);
    uint64_t rand = 21, ids [3];
    s_ids (&spec, &rand, ids, 3);
    float grads [3 * 2] = { 0.5f, -0.5f, 1, 2, 3, 4 };
    float before [3 * 2], after [3 * 2];
    s_pull ("refuse/emb", dim, ids, 3, before);
    s_entry_t good = { "refuse/emb", dim, ids, 3, grads };

    //  Each bad entry rides beside a good one, which must not be applied.
    s_entry_t bad = { "refuse/nope", dim, ids, 3, grads };
    s_entry_t pair [2] = { good, bad };
    s_expect_error (s_push_on (s_worker, 1, false, 0, pair, 2), "not_found",
                    "tables[1]: no table refuse/nope");
    pair [1] = (s_entry_t) { "refuse/other", 1, ids, 3, grads };
    s_expect_error (s_push_on (s_worker, 1, false, 0, pair, 2), "bad_shape",
                    "table refuse/other has rows of 2 floats, the request says 1");
    uint64_t foreign [3] = { ids [0], ids [1], 0 };
    do
        foreign [2] = harness_splitmix (&rand);
    while (ps_tablespec_shard_of (foreign [2], spec.shard_seed, S_SHARDS) != 1);
    pair [1] = (s_entry_t) { "refuse/other", dim, foreign, 3, grads };
    char text [128];
    snprintf (text, sizeof text, "id %llu (element 2) of table refuse/other belongs to "
              "shard 1, not to this server's shard 0 of 2", (unsigned long long) foreign [2]);
    s_expect_error (s_push_on (s_worker, 1, false, 0, pair, 2), "invalid", text);
    uint64_t repeated [3] = { ids [0], ids [1], ids [0] };
    pair [1] = (s_entry_t) { "refuse/other", dim, repeated, 3, grads };
    snprintf (text, sizeof text, "%llu", (unsigned long long) ids [0]);
    s_expect_error (s_push_on (s_worker, 1, false, 0, pair, 2), "invalid", text);
    pair [1] = good;
    s_expect_error (s_push_on (s_worker, 1, false, 0, pair, 2), "invalid",
                    "table refuse/emb appears twice");
    float nan_grads [3 * 2] = { 0, 0, 0, 0, 0, NAN };
    pair [1] = (s_entry_t) { "refuse/other", dim, ids, 3, nan_grads };
    s_expect_error (s_push_on (s_worker, 1, false, 0, pair, 2), "nonfinite",
                    "table refuse/other holds a non-finite value (nan) at row 2");
    //  Frames that disagree with the counts: the codec's refusal.
    ps_proto_sparse_ref_t ref = { "refuse/emb", 3, dim };
    ps_proto_t msg = { .type = PS_PROTO_SPARSE_PUSH, .id = s_id++,
                       .sparse_push = { 1, 0, false, 0, { 1, &ref } } };
    const void *data [] = { ids, grads };
    size_t sizes [] = { 3 * sizeof (uint64_t), 2 * dim * sizeof (float) };
    harness_send_frames (s_worker, &msg, data, sizes, 2);
    s_expect_error (harness_recv (s_worker, s_reply, false, S_TIMEOUT_MS), "bad_shape",
                    "tables[0]: rows frame has 16 bytes, expected 3 rows of 8 bytes");

    s_pull ("refuse/emb", dim, ids, 3, after);
    assert_memory_equal (after, before, sizeof before);
    assert_int_equal (s_table_stats ("refuse/emb").rows, 0);
    assert_int_equal (s_table_stats ("refuse/other").rows, 0);
    assert_int_equal (s_table_stats ("refuse/other").nonfinite, 1);
    //  The step stayed free: the good push alone applies it now.
    assert_int_equal (s_push (1, &good).applied, 3);
}

static void
test_admission (void **state)
{
    (void) state;
    const uint32_t dim = 2;
    ps_tablespec_t spec = s_spec ("admit/emb", dim);
    spec.admit_count = 3;
    s_create (&spec);
    uint64_t rand = 33, ids [2];
    s_ids (&spec, &rand, ids, 2);
    float grads [2 * 2] = { 1, 1, 1, 1 }, init [2 * 2], got [2 * 2];
    s_pull ("admit/emb", dim, ids, 2, init);
    //  ids [0] is pushed at every step, ids [1] at the first only.
    for (uint64_t step = 1; step <= 3; step++) {
        s_entry_t entry = { "admit/emb", dim, ids, step == 1 ? 2 : 1, grads };
        ps_proto_sparse_applied_t applied = s_push (step, &entry);
        assert_int_equal (applied.created, step == 3);
        assert_int_equal (applied.applied, step == 3);
        assert_int_equal (applied.dropped, step == 1 ? 2 : step == 2);
        s_pull ("admit/emb", dim, ids, 2, got);
        if (step < 3)
            assert_memory_equal (got, init, sizeof init);
        else
            assert_memory_not_equal (got, init, dim * sizeof (float));
        assert_memory_equal (got + dim, init + dim, dim * sizeof (float));
    }
    ps_proto_table_stats_t stats = s_table_stats ("admit/emb");
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
    ps_tablespec_t spec = s_spec ("pp/emb", dim), side = s_spec ("pp/side", 1);
    spec.opt.kind = PS_ROWOPT_SGD;
    spec.opt.lr = 0.5;
    s_create (&spec);
    s_create (&side);
    uint64_t rand = 44;
    uint64_t *ids = malloc (n * sizeof *ids);
    float *grads = malloc (n * dim * sizeof *grads);
    float *want = malloc (n * dim * sizeof *want);
    assert_true (ids && grads && want);
    s_ids (&spec, &rand, ids, n);
    const size_t sizes_n [] = { 5, n };
    for (int round = 0; round < 2; round++) {
        size_t count = sizes_n [round];
        for (size_t i = 0; i < count * dim; i++)
            grads [i] = (float) ((i % 7) + 1);
        s_pull ("pp/emb", dim, ids, count, want);
        for (size_t i = 0; i < count * dim; i++)
            want [i] -= 0.5f * grads [i];
        ps_proto_sparse_ref_t push = { "pp/emb", count, dim };
        ps_proto_sparse_ref_t pulls [] = { { "pp/side", 1, 1 }, { "pp/emb", count, dim } };
        ps_proto_t msg = { .type = PS_PROTO_SPARSE_PUSH_PULL, .id = s_id++,
                           .sparse_push_pull = { 10 + (uint64_t) round, 0, false, 0, { 1, &push },
                                                 { 2, pulls } } };
        const void *data [] = { ids, grads, ids, ids };
        size_t sizes [] = { count * 8, count * dim * 4, 8, count * 8 };
        harness_send_frames (s_worker, &msg, data, sizes, 4);
        const ps_proto_t *reply = harness_expect (s_worker, s_reply, PS_PROTO_SPARSE_PUSH_PULL_OK,
                                                  S_TIMEOUT_MS);
        assert_int_equal (reply->sparse_push_pull_ok.applied.count, 1);
        assert_int_equal (reply->sparse_push_pull_ok.applied.items [0].applied, count);
        assert_int_equal (reply->sparse_push_pull_ok.tables.count, 2);
        assert_string_equal (reply->sparse_push_pull_ok.tables.items [1].table, "pp/emb");
        float side_row;
        ps_tablespec_init_row (&side, ids [0], &side_row);
        assert_true (ps_msg_tensor (s_reply, 0) [0] == side_row);
        assert_memory_equal (ps_msg_tensor (s_reply, 1), want, count * dim * sizeof (float));
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
    ps_tablespec_t spec = s_spec ("grow/emb", dim);
    spec.opt.kind = PS_ROWOPT_SGD;
    spec.opt.lr = 0.5;
    s_create (&spec);
    uint64_t rand = 77;
    uint64_t *pool = malloc (POOL * sizeof *pool);
    uint32_t *touches = calloc (POOL, sizeof *touches);
    uint64_t *ids = malloc ((size_t) WORKERS * STEPS * PER_PUSH * sizeof *ids);
    float *ones = malloc ((size_t) PER_PUSH * dim * sizeof *ones);
    assert_true (pool && touches && ids && ones);
    s_ids (&spec, &rand, pool, POOL);
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
        workers [w] = harness_dealer (s_ctx, s_server.endpoint, task, "ps:0");
    }
    for (size_t step = 0; step < STEPS; step++)
        for (int w = 0; w < WORKERS; w++) {
            size_t p = step * WORKERS + (size_t) w;
            ps_proto_sparse_ref_t ref = { "grow/emb", PER_PUSH, dim };
            ps_proto_t msg = { .type = PS_PROTO_SPARSE_PUSH, .id = s_id++,
                               .sparse_push = { 100 + p, (uint64_t) w, false, 0, { 1, &ref } } };
            const void *data [] = { ids + p * PER_PUSH, ones };
            size_t sizes [] = { PER_PUSH * sizeof (uint64_t), PER_PUSH * dim * sizeof (float) };
            harness_send_frames (workers [w], &msg, data, sizes, 2);
        }
    size_t updated = 0;
    for (int w = 0; w < WORKERS; w++)
        for (size_t step = 0; step < STEPS; step++) {
            const ps_proto_t *reply = harness_expect (workers [w], s_reply,
                                                      PS_PROTO_SPARSE_PUSH_OK, S_TIMEOUT_MS);
            assert_false (reply->sparse_push_ok.applied.items [0].duplicate);
            updated += reply->sparse_push_ok.applied.items [0].applied;
        }
    assert_int_equal (updated, (size_t) WORKERS * STEPS * PER_PUSH);
    //  A step pushed again by another worker: applied once, so a duplicate.
    ps_proto_sparse_ref_t ref = { "grow/emb", PER_PUSH, dim };
    ps_proto_t msg = { .type = PS_PROTO_SPARSE_PUSH, .id = s_id++,
                       .sparse_push = { 100, 2, false, 0, { 1, &ref } } };
    const void *data [] = { ids, ones };
    size_t sizes [] = { PER_PUSH * sizeof (uint64_t), PER_PUSH * dim * sizeof (float) };
    harness_send_frames (workers [2], &msg, data, sizes, 2);
    assert_true (harness_expect (workers [2], s_reply, PS_PROTO_SPARSE_PUSH_OK, S_TIMEOUT_MS)
                 ->sparse_push_ok.applied.items [0].duplicate);

    size_t live = 0;
    for (size_t i = 0; i < POOL; i++)
        live += touches [i] > 0;
    ps_proto_table_stats_t stats = s_table_stats ("grow/emb");
    assert_int_equal (stats.rows, live);
    assert_int_equal (stats.created, live);
    assert_int_equal (stats.pushes, WORKERS * STEPS);
    assert_int_equal (stats.steps, WORKERS * STEPS);
    assert_int_equal (stats.duplicates, 1);
    assert_int_equal (stats.row_updates, (uint64_t) WORKERS * STEPS * PER_PUSH);
    float *got = malloc ((size_t) POOL * dim * sizeof *got);
    assert_non_null (got);
    s_pull ("grow/emb", dim, pool, POOL, got);
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
    ps_tablespec_t spec = s_spec ("auth/emb", 1);
    s_create (&spec);
    uint64_t id = 0;
    float grad = 1;
    s_entry_t entry = { "auth/emb", 1, &id, 1, &grad };
    s_expect_error (s_push_on (s_evaluator, 1, false, 0, &entry, 1), "forbidden",
                    "sparse_push: only a worker may ask this");
    s_expect_error (s_create_on (s_worker, &spec, 1, 0, S_SHARDS), "forbidden",
                    "table_create: only the coordinator may ask this");
}

//  Snapshot and restore, with a request over chief:0.
static const ps_proto_t *
s_snapshot (void *socket, const char *dir, const char *base)
{
    ps_proto_t msg = { .type = PS_PROTO_SNAPSHOT, .id = s_id++,
                       .snapshot = { dir, base != NULL, base != NULL, base != NULL,
                                     base ? base : "" } };
    harness_send (socket, NULL, 0, &msg);
    const ps_proto_t *reply = harness_recv (socket, s_reply, false, S_TIMEOUT_MS);
    assert_non_null (reply);
    return reply;
}

static const ps_proto_t *
s_restore (void *socket, const char *dir, const char *base)
{
    ps_proto_t msg = { .type = PS_PROTO_RESTORE, .id = s_id++,
                       .restore = { .dir = dir, .has_base = base != NULL,
                                    .base = base ? base : "" } };
    harness_send (socket, NULL, 0, &msg);
    const ps_proto_t *reply = harness_recv (socket, s_reply, false, S_TIMEOUT_MS);
    assert_non_null (reply);
    return reply;
}

static void
test_snapshot_full_incremental_restore (void **state)
{
    (void) state;
    const uint32_t dim = 4;
    ps_tablespec_t spec = s_spec ("snap/emb", dim);
    spec.opt.kind = PS_ROWOPT_ADAM;
    spec.admit_count = 2;
    //  A table created after the last full snapshot has none to follow.
    assert_int_equal (s_snapshot (s_chief, "snap-pre", NULL)->type, PS_PROTO_SNAPSHOT_OK);
    s_create (&spec);
    s_expect_error (s_snapshot (s_chief, "snap-inc0", "snap-pre"), "invalid",
                    "table snap/emb has had no full snapshot");
    uint64_t rand = 55, ids [10];
    s_ids (&spec, &rand, ids, 10);
    float grads [10 * 4];
    for (size_t i = 0; i < 40; i++)
        grads [i] = (float) cos ((double) i) * 0.3f;
    for (uint64_t step = 1; step <= 4; step++) {
        s_entry_t entry = { "snap/emb", dim, ids, step < 4 ? 8 : 10, grads };
        s_push (step, &entry);
    }
    const ps_proto_t *reply = s_snapshot (s_chief, "snap-full", NULL);
    assert_int_equal (reply->type, PS_PROTO_SNAPSHOT_OK);
    assert_true (reply->snapshot_ok.tables.count >= 1);
    float at_full [10 * 4];
    s_pull ("snap/emb", dim, ids, 10, at_full);
    for (uint64_t step = 5; step <= 6; step++) {
        s_entry_t entry = { "snap/emb", dim, ids + 2, 5, grads };
        s_push (step, &entry);
    }
    s_expect_error (s_snapshot (s_chief, "snap-inc0", "snap-pre"), "invalid",
                    "its last full snapshot is in snap-full, not in base snap-pre");
    reply = s_snapshot (s_chief, "snap-inc", "snap-full");
    assert_int_equal (reply->type, PS_PROTO_SNAPSHOT_OK);
    bool incremental = false;
    for (size_t i = 0; i < reply->snapshot_ok.tables.count; i++)
        if (strcmp (reply->snapshot_ok.tables.items [i].table, "snap/emb") == 0) {
            assert_false (reply->snapshot_ok.tables.items [i].full);
            assert_string_equal (reply->snapshot_ok.tables.items [i].file,
                                 "snap%2Femb.shard0of2.incr.table");
            incremental = true;
        }
    assert_true (incremental);
    float want [10 * 4], got [10 * 4];
    s_pull ("snap/emb", dim, ids, 10, want);
    ps_proto_table_stats_t before = s_table_stats ("snap/emb");

    //  A fresh server restores the pair exactly. Its counters count from
    //  the restore (ps_sparse_stats); rows and ledger are the table's.
    assert_int_equal (harness_server_start (&s_fresh, 1, (const char *[]) {
        "--checkpoint-root", s_root, NULL }), 0);
    void *chief = harness_dealer (s_ctx, s_fresh.endpoint, "chief:0", "ps:1");
    void *worker = harness_dealer (s_ctx, s_fresh.endpoint, "worker:0", "ps:1");
    //  A restore fills the shards a server holds, as a coordinator's does.
    s_create_held_on (chief, 0);
    //  The full snapshot alone, then the pair over it.
    reply = s_restore (chief, "snap-full", NULL);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("restore: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (s_pull_on (worker, "snap/emb", dim, ids, 10)->type, PS_PROTO_SPARSE_PULL_OK);
    assert_memory_equal (ps_msg_tensor (s_reply, 0), at_full, sizeof at_full);
    //  An incremental file whose full file is not in base: refused by name.
    s_expect_error (s_restore (chief, "snap-inc", "snap-pre"), "not_found",
                    "snap-pre/snap%2Femb.shard0of2.full.table");
    reply = s_restore (chief, "snap-inc", "snap-full");
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("restore: %s: %s", reply->error.code, reply->error.message);
    ps_proto_table_stats_t after = s_table_stats_on (worker, "snap/emb");
    assert_int_equal (after.rows, before.rows);
    assert_int_equal (after.created, 0);
    assert_int_equal (after.steps, before.steps);
    assert_int_equal (after.shard, 0);
    assert_int_equal (after.shards, S_SHARDS);
    const ps_proto_t *pulled = s_pull_on (worker, "snap/emb", dim, ids, 10);
    assert_int_equal (pulled->type, PS_PROTO_SPARSE_PULL_OK);
    memcpy (got, ps_msg_tensor (s_reply, 0), sizeof got);
    assert_memory_equal (got, want, sizeof want);
    //  The ledger came along: step 6 is a duplicate there too. The
    //  admission counts too: ids [8] was pushed once (step 4), and a
    //  second push admits it on both servers alike.
    s_entry_t entry = { "snap/emb", dim, ids + 2, 5, grads };
    reply = s_push_on (worker, 6, false, 0, &entry, 1);
    assert_int_equal (reply->type, PS_PROTO_SPARSE_PUSH_OK);
    assert_true (reply->sparse_push_ok.applied.items [0].duplicate);
    s_entry_t late = { "snap/emb", dim, ids + 8, 1, grads };
    reply = s_push_on (worker, 7, false, 0, &late, 1);
    assert_int_equal (reply->type, PS_PROTO_SPARSE_PUSH_OK);
    assert_int_equal (reply->sparse_push_ok.applied.items [0].created, 1);
    assert_int_equal (s_push (7, &late).created, 1);
    s_pull ("snap/emb", dim, ids, 10, want);
    pulled = s_pull_on (worker, "snap/emb", dim, ids, 10);
    assert_memory_equal (ps_msg_tensor (s_reply, 0), want, sizeof want);
    //  After a restore from an incremental snapshot, the next one must be full.
    s_expect_error (s_snapshot (chief, "snap-inc2", "snap-full"), "invalid",
                    "no full snapshot since it was created or restored");
    zmq_close (chief);
    zmq_close (worker);
    assert_int_equal (harness_server_stop (&s_fresh, SIGTERM), 0);
}

//  A snapshot is a cut: taken while large pushes are still being applied
//  on the pool, each table file holds exactly the steps of its ledger.
//  Every push adds a gradient of 1 to every row of the set, so a row of a
//  consistent file is its initial value less lr once per step the ledger
//  holds; a push that the save caught half-way would leave some stripes
//  with its step and others without, or a ledger that disagrees with all
//  of them. The server runs many pool threads, and several workers keep
//  pushes queued at every snapshot, so that a save beside a push is likely.
static void
test_snapshot_is_a_cut (void **state)
{
    (void) state;
    enum { WORKERS = 6, ROUNDS = 24, ROWS = 24000 };
    const uint32_t dim = 8;
    ps_tablespec_t spec = s_spec ("cut/emb", dim);
    spec.opt.kind = PS_ROWOPT_SGD;
    spec.opt.lr = 0.5;
    assert_int_equal (harness_server_start (&s_busy, 2, (const char *[]) {
        "--threads", "8", "--checkpoint-root", s_root, NULL }), 0);
    void *chief = harness_dealer (s_ctx, s_busy.endpoint, "chief:0", "ps:2");
    const ps_proto_t *reply = s_create_on (chief, &spec, 1, 0, 1);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("table_create: %s: %s", reply->error.code, reply->error.message);
    uint64_t *ids = malloc (ROWS * sizeof *ids);
    float *ones = malloc ((size_t) ROWS * dim * sizeof *ones);
    float *got = malloc ((size_t) ROWS * dim * sizeof *got);
    float *init = malloc ((size_t) ROWS * dim * sizeof *init);
    assert_true (ids && ones && got && init);
    uint64_t rand = 99;
    for (size_t i = 0; i < ROWS; i++) {
        ids [i] = harness_splitmix (&rand);
        ps_tablespec_init_row (&spec, ids [i], init + i * dim);
    }
    for (size_t k = 0; k < (size_t) ROWS * dim; k++)
        ones [k] = 1;
    void *workers [WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        char task [32];
        snprintf (task, sizeof task, "worker:%d", w);
        workers [w] = harness_dealer (s_ctx, s_busy.endpoint, task, "ps:2");
    }
    uint64_t step = 1;
    for (int round = 0; round < ROUNDS; round++) {
        for (int w = 0; w < WORKERS; w++) {
            ps_proto_sparse_ref_t ref = { "cut/emb", ROWS, dim };
            ps_proto_t msg = { .type = PS_PROTO_SPARSE_PUSH, .id = s_id++,
                               .sparse_push = { step++, (uint64_t) w, false, 0, { 1, &ref } } };
            const void *data [] = { ids, ones };
            size_t sizes [] = { ROWS * sizeof (uint64_t), (size_t) ROWS * dim * sizeof (float) };
            harness_send_frames (workers [w], &msg, data, sizes, 2);
        }
        char dir [32];
        snprintf (dir, sizeof dir, "cut-%d", round);
        reply = s_snapshot (chief, dir, NULL);
        if (reply->type == PS_PROTO_ERROR)
            fail_msg ("snapshot: %s: %s", reply->error.code, reply->error.message);
        for (int w = 0; w < WORKERS; w++)
            harness_expect (workers [w], s_reply, PS_PROTO_SPARSE_PUSH_OK, S_TIMEOUT_MS);
        char path [256];
        snprintf (path, sizeof path, "%s/%s/cut%%2Femb.shard0of1.full.table", s_root, dir);
        ps_error_t err;
        ps_sparse_t *table = ps_sparse_load (path, NULL, &err);
        if (!table)
            fail_msg ("snapshot %d is not loadable: %s", round, err.msg);
        uint64_t steps = ps_sparse_steps_applied (table);
        ps_sparse_pull (table, ids, ROWS, got);
        for (size_t i = 0; i < ROWS; i++) {
            float want [8];
            memcpy (want, init + i * dim, sizeof want);
            for (uint64_t t = 0; t < steps; t++)
                for (uint32_t j = 0; j < dim; j++)
                    want [j] = want [j] - 0.5f;
            if (memcmp (got + i * dim, want, sizeof want) != 0)
                fail_msg ("snapshot %d: row %zu (id %llu) is %g, expected %g: its ledger holds "
                          "%llu steps", round, i, (unsigned long long) ids [i],
                          (double) got [i * dim], (double) want [0],
                          (unsigned long long) steps);
        }
        ps_sparse_destroy (&table);
        char tree [128];
        snprintf (tree, sizeof tree, "%s/%s", s_root, dir);
        harness_rmtree (tree);
    }
    for (int w = 0; w < WORKERS; w++)
        zmq_close (workers [w]);
    zmq_close (chief);
    assert_int_equal (harness_server_stop (&s_busy, SIGTERM), 0);
    free (ids);
    free (ones);
    free (got);
    free (init);
}

//  What a coordinator does with a cluster's checkpoint: every server
//  snapshots into one directory, ckpt-<step>.tmp, which is then renamed
//  ckpt-<step> (common/store/ps_checkpoint.h). The next incremental
//  snapshot names the renamed directory as its base, and a restore from
//  it gives each server its own shard of a table whose other shards'
//  files lie beside it.
static void
test_cluster_checkpoint_dir (void **state)
{
    (void) state;
    const uint32_t dim = 2;
    ps_tablespec_t spec = s_spec ("ckpt/emb", dim);
    s_create (&spec);
    assert_int_equal (harness_server_start (&s_fresh, 1, (const char *[]) {
        "--checkpoint-root", s_root, NULL }), 0);
    void *chief = harness_dealer (s_ctx, s_fresh.endpoint, "chief:0", "ps:1");
    void *worker = harness_dealer (s_ctx, s_fresh.endpoint, "worker:0", "ps:1");
    s_create_held_on (chief, 1);
    uint64_t rand = 77, ids0 [4], ids1 [4];
    s_ids (&spec, &rand, ids0, 4);
    for (size_t i = 0; i < 4; i++)
        do
            ids1 [i] = harness_splitmix (&rand);
        while (ps_tablespec_shard_of (ids1 [i], spec.shard_seed, S_SHARDS) != 1);
    float grads [4 * 2] = { 0.5f, -0.25f, 0.125f, 1, -1, 0.75f, 0.5f, -0.5f };
    s_entry_t entry0 = { "ckpt/emb", dim, ids0, 4, grads }, entry1 = { "ckpt/emb", dim, ids1, 4,
                                                                      grads };
    s_push (1, &entry0);
    assert_int_equal (s_push_on (worker, 1, false, 0, &entry1, 1)->type, PS_PROTO_SPARSE_PUSH_OK);
    assert_int_equal (s_snapshot (s_chief, "ckpt-000000000001.tmp", NULL)->type,
                      PS_PROTO_SNAPSHOT_OK);
    assert_int_equal (s_snapshot (chief, "ckpt-000000000001.tmp", NULL)->type,
                      PS_PROTO_SNAPSHOT_OK);
    float want0 [4 * 2], want1 [4 * 2];
    s_pull ("ckpt/emb", dim, ids0, 4, want0);
    assert_int_equal (s_pull_on (worker, "ckpt/emb", dim, ids1, 4)->type,
                      PS_PROTO_SPARSE_PULL_OK);
    memcpy (want1, ps_msg_tensor (s_reply, 0), sizeof want1);
    char from [128], to [128];
    snprintf (from, sizeof from, "%s/ckpt-000000000001.tmp", s_root);
    snprintf (to, sizeof to, "%s/ckpt-000000000001", s_root);
    assert_int_equal (rename (from, to), 0);

    //  The incremental snapshot after the commit names the committed
    //  directory as its base.
    s_push (2, &entry0);
    const ps_proto_t *reply = s_snapshot (s_chief, "ckpt-000000000002.tmp", "ckpt-000000000001");
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("incremental snapshot: %s: %s", reply->error.code, reply->error.message);
    //  Restoring the full checkpoint, each server takes its own shard's
    //  file and leaves the other's.
    reply = s_restore (s_chief, "ckpt-000000000001", NULL);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("restore: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (s_table_stats ("ckpt/emb").shard, 0);
    float got [4 * 2];
    s_pull ("ckpt/emb", dim, ids0, 4, got);
    assert_memory_equal (got, want0, sizeof got);
    reply = s_restore (chief, "ckpt-000000000001", NULL);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("restore: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (s_table_stats_on (worker, "ckpt/emb").shard, 1);
    assert_int_equal (s_pull_on (worker, "ckpt/emb", dim, ids1, 4)->type,
                      PS_PROTO_SPARSE_PULL_OK);
    assert_memory_equal (ps_msg_tensor (s_reply, 0), want1, sizeof want1);
    zmq_close (chief);
    zmq_close (worker);
    assert_int_equal (harness_server_stop (&s_fresh, SIGTERM), 0);
}

//  A restore reads the file of the shard the server holds and no other:
//  another server's file beside it is left unread (here it is garbage,
//  which reading would refuse). A server that holds no shard of a table in
//  the directory refuses the restore, and one whose shard has another spec
//  than the file's refuses it too, with nothing installed.
static void
test_restore_own_shard_only (void **state)
{
    (void) state;
    const uint32_t dim = 2;
    ps_tablespec_t spec = s_spec ("own/emb", dim);
    assert_int_equal (harness_server_start (&s_fresh, 1, (const char *[]) {
        "--checkpoint-root", s_root, NULL }), 0);
    void *chief = harness_dealer (s_ctx, s_fresh.endpoint, "chief:0", "ps:1");
    void *worker = harness_dealer (s_ctx, s_fresh.endpoint, "worker:0", "ps:1");
    assert_int_equal (s_create_on (chief, &spec, 1, 0, S_SHARDS)->type,
                      PS_PROTO_TABLE_CREATE_OK);
    uint64_t rand = 88, ids [4];
    s_ids (&spec, &rand, ids, 4);
    float grads [4 * 2] = { 0.5f, -0.25f, 0.125f, 1, -1, 0.75f, 0.5f, -0.5f };
    s_entry_t entry = { "own/emb", dim, ids, 4, grads };
    assert_int_equal (s_push_on (worker, 1, false, 0, &entry, 1)->type, PS_PROTO_SPARSE_PUSH_OK);
    assert_int_equal (s_snapshot (chief, "own-1", NULL)->type, PS_PROTO_SNAPSHOT_OK);
    assert_int_equal (s_pull_on (worker, "own/emb", dim, ids, 4)->type, PS_PROTO_SPARSE_PULL_OK);
    float want [4 * 2];
    memcpy (want, ps_msg_tensor (s_reply, 0), sizeof want);
    char path [256];
    snprintf (path, sizeof path, "%s/own-1/own%%2Femb.shard1of2.full.table", s_root);
    FILE *other = fopen (path, "w");
    assert_non_null (other);
    assert_true (fputs ("shard 1 is another server's, and not a table file\n", other) >= 0);
    assert_int_equal (fclose (other), 0);
    assert_int_equal (s_push_on (worker, 2, false, 0, &entry, 1)->type, PS_PROTO_SPARSE_PUSH_OK);
    const ps_proto_t *reply = s_restore (chief, "own-1", NULL);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("restore: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (reply->restore_ok.tables.count, 1);
    assert_int_equal (s_pull_on (worker, "own/emb", dim, ids, 4)->type, PS_PROTO_SPARSE_PULL_OK);
    assert_memory_equal (ps_msg_tensor (s_reply, 0), want, sizeof want);
    zmq_close (chief);
    zmq_close (worker);
    assert_int_equal (harness_server_stop (&s_fresh, SIGTERM), 0);

    //  A server that holds no shard of the table does not guess one.
    assert_int_equal (harness_server_start (&s_fresh, 1, (const char *[]) {
        "--checkpoint-root", s_root, NULL }), 0);
    chief = harness_dealer (s_ctx, s_fresh.endpoint, "chief:0", "ps:1");
    worker = harness_dealer (s_ctx, s_fresh.endpoint, "worker:0", "ps:1");
    s_expect_error (s_restore (chief, "own-1", NULL), "not_found",
                    "own%2Femb.shard0of2.full.table is a shard of a table this server holds "
                    "none of");
    //  Nor does it take a file whose spec is not its shard's.
    ps_tablespec_t other_spec = spec;
    other_spec.opt.lr = spec.opt.lr * 2;
    assert_int_equal (s_create_on (chief, &other_spec, 1, 0, S_SHARDS)->type,
                      PS_PROTO_TABLE_CREATE_OK);
    s_expect_error (s_restore (chief, "own-1", NULL), "invalid",
                    "holds table own/emb with another spec than the server's");
    ps_proto_table_stats_t stats = s_table_stats_on (worker, "own/emb");
    assert_int_equal (stats.rows, 0);
    assert_int_equal (stats.steps, 0);
    zmq_close (chief);
    zmq_close (worker);
    assert_int_equal (harness_server_stop (&s_fresh, SIGTERM), 0);
}

//  Last: once fenced, a push must carry the fence's generation.
static void
test_fence (void **state)
{
    (void) state;
    ps_tablespec_t spec = s_spec ("fence/emb", 1);
    s_create (&spec);
    ps_proto_t msg = { .type = PS_PROTO_FENCE, .id = s_id++, .fence.generation = 3 };
    harness_send (s_chief, NULL, 0, &msg);
    harness_expect (s_chief, s_reply, PS_PROTO_FENCE_OK, S_TIMEOUT_MS);
    uint64_t rand = 66, id;
    s_ids (&spec, &rand, &id, 1);
    float grad = 1;
    s_entry_t entry = { "fence/emb", 1, &id, 1, &grad };
    s_expect_error (s_push_on (s_worker, 1, true, 2, &entry, 1), "invalid",
                    "sparse_push: stale generation 2");
    s_expect_error (s_push_on (s_worker, 1, false, 0, &entry, 1), "invalid",
                    "sparse_push carries no generation");
    assert_int_equal (s_table_stats ("fence/emb").rows, 0);
    const ps_proto_t *reply = s_push_on (s_worker, 1, true, 3, &entry, 1);
    assert_int_equal (reply->type, PS_PROTO_SPARSE_PUSH_OK);
    assert_int_equal (reply->sparse_push_ok.applied.items [0].created, 1);
}

//  After test_fence: a restore that carries a generation fences the
//  server at it in the same step, so a push of the generation before it
//  is refused on the restored values; a restore that fails moves no fence.
static void
test_restore_fences (void **state)
{
    (void) state;
    assert_int_equal (s_snapshot (s_chief, "fence-snap", NULL)->type, PS_PROTO_SNAPSHOT_OK);
    ps_tablespec_t spec = s_spec ("fence/emb", 1);
    uint64_t rand = 67, id;
    s_ids (&spec, &rand, &id, 1);
    float grad = 1;
    s_entry_t entry = { "fence/emb", 1, &id, 1, &grad };
    ps_proto_t msg = { .type = PS_PROTO_RESTORE, .id = s_id++,
                       .restore = { .dir = "fence-snap", .has_generation = true,
                                    .generation = 4 } };
    harness_send (s_chief, NULL, 0, &msg);
    const ps_proto_t *reply = harness_recv (s_chief, s_reply, false, S_TIMEOUT_MS);
    assert_non_null (reply);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("restore: %s: %s", reply->error.code, reply->error.message);
    s_expect_error (s_push_on (s_worker, 2, true, 3, &entry, 1), "invalid",
                    "sparse_push: stale generation 3");
    msg.id = s_id++;
    msg.restore.dir = "no-such-snap";
    msg.restore.generation = 5;
    harness_send (s_chief, NULL, 0, &msg);
    s_expect_error (harness_recv (s_chief, s_reply, false, S_TIMEOUT_MS), "not_found",
                    "no-such-snap");
    reply = s_push_on (s_worker, 2, true, 4, &entry, 1);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("sparse_push: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (reply->sparse_push_ok.applied.items [0].applied, 1);
}

//  ---------------------------------------------------------------------

static int
s_setup (void **state)
{
    (void) state;
    harness_tmpdir (s_root, sizeof s_root);
    if (harness_server_start (&s_server, 0, (const char *[]) {
            "--threads", "2", "--checkpoint-root", s_root, NULL }))
        return -1;
    //  The context harness_finish knows: a failed case may leave sockets
    //  open, which terminating a context of our own would wait for.
    s_ctx = ps_curve_context ();
    s_chief = harness_dealer (s_ctx, s_server.endpoint, "chief:0", "ps:0");
    s_worker = harness_dealer (s_ctx, s_server.endpoint, "worker:0", "ps:0");
    s_evaluator = harness_dealer (s_ctx, s_server.endpoint, "evaluator:0", "ps:0");
    s_reply = ps_msg_new ();
    return 0;
}

static int
s_teardown (void **state)
{
    (void) state;
    ps_msg_destroy (&s_reply);
    zmq_close (s_chief);
    zmq_close (s_worker);
    zmq_close (s_evaluator);
    if (s_fresh.pid > 0 && harness_server_alive (&s_fresh))
        harness_server_stop (&s_fresh, SIGKILL);
    if (s_busy.pid > 0 && harness_server_alive (&s_busy))
        harness_server_stop (&s_busy, SIGKILL);
    int status = harness_server_stop (&s_server, SIGTERM);
    harness_rmtree (s_root);
    return status == 0 ? 0 : -1;
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
        cmocka_unit_test (test_snapshot_full_incremental_restore),
        cmocka_unit_test (test_snapshot_is_a_cut),
        cmocka_unit_test (test_cluster_checkpoint_dir),
        cmocka_unit_test (test_restore_own_shard_only),
        cmocka_unit_test (test_fence),
        cmocka_unit_test (test_restore_fences),
    };
    return harness_finish (cmocka_run_group_tests (tests, s_setup, s_teardown));
}
