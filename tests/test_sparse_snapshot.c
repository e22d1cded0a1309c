//  Snapshots and restores of embedding tables on a real ps-server process
//  (ps/ps_tables.c, the snapshot, restore and fence requests of
//  ps/ps_control.c), over the wire as the protocol says
//  (schemas/protocol.json). The requests themselves are
//  test_sparse_server; both use the fixture of harness_sparse.h.
//
//  A full snapshot and an incremental one after it, restored into a fresh
//  server, give bit-identical pulls, the same counters and ledger, and
//  the same admission counts. A cluster's checkpoint directory, renamed
//  after the servers wrote into it, is the base of the next incremental
//  snapshot, and restoring it gives each server its own shard. A snapshot
//  taken while large pushes run on the pool is a cut: each row holds
//  exactly the steps of its file's ledger. A restore reads only the
//  server's own shard's file, refuses a table the server holds no shard of
//  and a file of another spec, installing nothing. A restore that carries
//  a generation fences the server at it.

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
static harness_server_t s_fresh;       //  the one a snapshot is restored into
static harness_server_t s_busy;        //  many pool threads, for the cut

//  ---------------------------------------------------------------------
//  Cases

static void
test_snapshot_full_incremental_restore (void **state)
{
    (void) state;
    const uint32_t dim = 4;
    ps_tablespec_t spec = harness_sparse_spec ("snap/emb", dim);
    spec.opt.kind = PS_ROWOPT_ADAM;
    spec.admit_count = 2;
    //  A table created after the last full snapshot has none to follow.
    assert_int_equal (harness_sparse_snapshot (&s_fx, s_fx.chief, "snap-pre", NULL)->type,
                      PS_PROTO_SNAPSHOT_OK);
    harness_sparse_create (&s_fx, &spec);
    harness_sparse_expect_error (harness_sparse_snapshot (&s_fx, s_fx.chief, "snap-inc0",
                                                          "snap-pre"),
                                 "invalid", "table snap/emb has had no full snapshot");
    uint64_t rand = 55, ids [10];
    harness_sparse_ids (&spec, &rand, ids, 10);
    float grads [10 * 4];
    for (size_t i = 0; i < 40; i++)
        grads [i] = (float) cos ((double) i) * 0.3f;
    for (uint64_t step = 1; step <= 4; step++) {
        harness_sparse_entry_t entry = { "snap/emb", dim, ids, step < 4 ? 8 : 10, grads };
        harness_sparse_push (&s_fx, step, &entry);
    }
    const ps_proto_t *reply = harness_sparse_snapshot (&s_fx, s_fx.chief, "snap-full", NULL);
    assert_int_equal (reply->type, PS_PROTO_SNAPSHOT_OK);
    assert_true (reply->snapshot_ok.tables.count >= 1);
    float at_full [10 * 4];
    harness_sparse_pull (&s_fx, "snap/emb", dim, ids, 10, at_full);
    for (uint64_t step = 5; step <= 6; step++) {
        harness_sparse_entry_t entry = { "snap/emb", dim, ids + 2, 5, grads };
        harness_sparse_push (&s_fx, step, &entry);
    }
    harness_sparse_expect_error (harness_sparse_snapshot (&s_fx, s_fx.chief, "snap-inc0",
                                                          "snap-pre"),
                                 "invalid",
                                 "its last full snapshot is in snap-full, not in base snap-pre");
    reply = harness_sparse_snapshot (&s_fx, s_fx.chief, "snap-inc", "snap-full");
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
    harness_sparse_pull (&s_fx, "snap/emb", dim, ids, 10, want);
    ps_proto_table_stats_t before = harness_sparse_table_stats (&s_fx, "snap/emb");

    //  A fresh server restores the pair exactly. Its counters count from
    //  the restore (ps_sparse_stats); rows and ledger are the table's.
    assert_int_equal (harness_server_start (&s_fresh, 1, (const char *[]) {
        "--checkpoint-root", s_fx.root, NULL }), 0);
    void *chief = harness_dealer (s_fx.ctx, s_fresh.endpoint, "chief:0", "ps:1");
    void *worker = harness_dealer (s_fx.ctx, s_fresh.endpoint, "worker:0", "ps:1");
    //  A restore fills the shards a server holds, as a coordinator's does.
    harness_sparse_create_held_on (&s_fx, chief, 0);
    //  The full snapshot alone, then the pair over it.
    reply = harness_sparse_restore (&s_fx, chief, "snap-full", NULL);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("restore: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (harness_sparse_pull_on (&s_fx, worker, "snap/emb", dim, ids, 10)->type,
                      PS_PROTO_SPARSE_PULL_OK);
    assert_memory_equal (ps_msg_tensor (s_fx.reply, 0), at_full, sizeof at_full);
    //  An incremental file whose full file is not in base: refused by name.
    harness_sparse_expect_error (harness_sparse_restore (&s_fx, chief, "snap-inc", "snap-pre"),
                                 "not_found", "snap-pre/snap%2Femb.shard0of2.full.table");
    reply = harness_sparse_restore (&s_fx, chief, "snap-inc", "snap-full");
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("restore: %s: %s", reply->error.code, reply->error.message);
    ps_proto_table_stats_t after = harness_sparse_table_stats_on (&s_fx, worker, "snap/emb");
    assert_int_equal (after.rows, before.rows);
    assert_int_equal (after.created, 0);
    assert_int_equal (after.steps, before.steps);
    assert_int_equal (after.shard, 0);
    assert_int_equal (after.shards, HARNESS_SPARSE_SHARDS);
    const ps_proto_t *pulled = harness_sparse_pull_on (&s_fx, worker, "snap/emb", dim, ids, 10);
    assert_int_equal (pulled->type, PS_PROTO_SPARSE_PULL_OK);
    memcpy (got, ps_msg_tensor (s_fx.reply, 0), sizeof got);
    assert_memory_equal (got, want, sizeof want);
    //  The ledger came along: step 6 is a duplicate there too. The
    //  admission counts too: ids [8] was pushed once (step 4), and a
    //  second push admits it on both servers alike.
    harness_sparse_entry_t entry = { "snap/emb", dim, ids + 2, 5, grads };
    reply = harness_sparse_push_on (&s_fx, worker, 6, false, 0, &entry, 1);
    assert_int_equal (reply->type, PS_PROTO_SPARSE_PUSH_OK);
    assert_true (reply->sparse_push_ok.applied.items [0].duplicate);
    harness_sparse_entry_t late = { "snap/emb", dim, ids + 8, 1, grads };
    reply = harness_sparse_push_on (&s_fx, worker, 7, false, 0, &late, 1);
    assert_int_equal (reply->type, PS_PROTO_SPARSE_PUSH_OK);
    assert_int_equal (reply->sparse_push_ok.applied.items [0].created, 1);
    assert_int_equal (harness_sparse_push (&s_fx, 7, &late).created, 1);
    harness_sparse_pull (&s_fx, "snap/emb", dim, ids, 10, want);
    pulled = harness_sparse_pull_on (&s_fx, worker, "snap/emb", dim, ids, 10);
    assert_memory_equal (ps_msg_tensor (s_fx.reply, 0), want, sizeof want);
    //  After a restore from an incremental snapshot, the next one must be full.
    harness_sparse_expect_error (harness_sparse_snapshot (&s_fx, chief, "snap-inc2", "snap-full"),
                                 "invalid", "no full snapshot since it was created or restored");
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
    ps_tablespec_t spec = harness_sparse_spec ("cut/emb", dim);
    spec.opt.kind = PS_ROWOPT_SGD;
    spec.opt.lr = 0.5;
    assert_int_equal (harness_server_start (&s_busy, 2, (const char *[]) {
        "--threads", "8", "--checkpoint-root", s_fx.root, NULL }), 0);
    void *chief = harness_dealer (s_fx.ctx, s_busy.endpoint, "chief:0", "ps:2");
    const ps_proto_t *reply = harness_sparse_create_on (&s_fx, chief, &spec, 1, 0, 1);
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
        workers [w] = harness_dealer (s_fx.ctx, s_busy.endpoint, task, "ps:2");
    }
    uint64_t step = 1;
    for (int round = 0; round < ROUNDS; round++) {
        for (int w = 0; w < WORKERS; w++) {
            ps_proto_sparse_ref_t ref = { "cut/emb", ROWS, dim };
            ps_proto_t msg = { .type = PS_PROTO_SPARSE_PUSH, .id = s_fx.id++,
                               .sparse_push = { step++, (uint64_t) w, false, 0, { 1, &ref } } };
            const void *data [] = { ids, ones };
            size_t sizes [] = { ROWS * sizeof (uint64_t), (size_t) ROWS * dim * sizeof (float) };
            harness_send_frames (workers [w], &msg, data, sizes, 2);
        }
        char dir [32];
        snprintf (dir, sizeof dir, "cut-%d", round);
        reply = harness_sparse_snapshot (&s_fx, chief, dir, NULL);
        if (reply->type == PS_PROTO_ERROR)
            fail_msg ("snapshot: %s: %s", reply->error.code, reply->error.message);
        for (int w = 0; w < WORKERS; w++)
            harness_expect (workers [w], s_fx.reply, PS_PROTO_SPARSE_PUSH_OK,
                            HARNESS_SPARSE_TIMEOUT_MS);
        char path [256];
        snprintf (path, sizeof path, "%s/%s/cut%%2Femb.shard0of1.full.table", s_fx.root, dir);
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
        snprintf (tree, sizeof tree, "%s/%s", s_fx.root, dir);
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
    ps_tablespec_t spec = harness_sparse_spec ("ckpt/emb", dim);
    harness_sparse_create (&s_fx, &spec);
    assert_int_equal (harness_server_start (&s_fresh, 1, (const char *[]) {
        "--checkpoint-root", s_fx.root, NULL }), 0);
    void *chief = harness_dealer (s_fx.ctx, s_fresh.endpoint, "chief:0", "ps:1");
    void *worker = harness_dealer (s_fx.ctx, s_fresh.endpoint, "worker:0", "ps:1");
    harness_sparse_create_held_on (&s_fx, chief, 1);
    uint64_t rand = 77, ids0 [4], ids1 [4];
    harness_sparse_ids (&spec, &rand, ids0, 4);
    for (size_t i = 0; i < 4; i++)
        do
            ids1 [i] = harness_splitmix (&rand);
        while (ps_tablespec_shard_of (ids1 [i], spec.shard_seed, HARNESS_SPARSE_SHARDS) != 1);
    float grads [4 * 2] = { 0.5f, -0.25f, 0.125f, 1, -1, 0.75f, 0.5f, -0.5f };
    harness_sparse_entry_t entry0 = { "ckpt/emb", dim, ids0, 4, grads },
                           entry1 = { "ckpt/emb", dim, ids1, 4, grads };
    harness_sparse_push (&s_fx, 1, &entry0);
    assert_int_equal (harness_sparse_push_on (&s_fx, worker, 1, false, 0, &entry1, 1)->type,
                      PS_PROTO_SPARSE_PUSH_OK);
    const ps_proto_t *reply = harness_sparse_snapshot (&s_fx, s_fx.chief,
                                                       "ckpt-000000000001.tmp", NULL);
    assert_int_equal (reply->type, PS_PROTO_SNAPSHOT_OK);
    assert_int_equal (harness_sparse_snapshot (&s_fx, chief, "ckpt-000000000001.tmp", NULL)->type,
                      PS_PROTO_SNAPSHOT_OK);
    float want0 [4 * 2], want1 [4 * 2];
    harness_sparse_pull (&s_fx, "ckpt/emb", dim, ids0, 4, want0);
    assert_int_equal (harness_sparse_pull_on (&s_fx, worker, "ckpt/emb", dim, ids1, 4)->type,
                      PS_PROTO_SPARSE_PULL_OK);
    memcpy (want1, ps_msg_tensor (s_fx.reply, 0), sizeof want1);
    char from [128], to [128];
    snprintf (from, sizeof from, "%s/ckpt-000000000001.tmp", s_fx.root);
    snprintf (to, sizeof to, "%s/ckpt-000000000001", s_fx.root);
    assert_int_equal (rename (from, to), 0);

    //  The incremental snapshot after the commit names the committed
    //  directory as its base.
    harness_sparse_push (&s_fx, 2, &entry0);
    reply = harness_sparse_snapshot (&s_fx, s_fx.chief, "ckpt-000000000002.tmp",
                                     "ckpt-000000000001");
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("incremental snapshot: %s: %s", reply->error.code, reply->error.message);
    //  Restoring the full checkpoint, each server takes its own shard's
    //  file and leaves the other's.
    reply = harness_sparse_restore (&s_fx, s_fx.chief, "ckpt-000000000001", NULL);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("restore: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (harness_sparse_table_stats (&s_fx, "ckpt/emb").shard, 0);
    float got [4 * 2];
    harness_sparse_pull (&s_fx, "ckpt/emb", dim, ids0, 4, got);
    assert_memory_equal (got, want0, sizeof got);
    reply = harness_sparse_restore (&s_fx, chief, "ckpt-000000000001", NULL);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("restore: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (harness_sparse_table_stats_on (&s_fx, worker, "ckpt/emb").shard, 1);
    assert_int_equal (harness_sparse_pull_on (&s_fx, worker, "ckpt/emb", dim, ids1, 4)->type,
                      PS_PROTO_SPARSE_PULL_OK);
    assert_memory_equal (ps_msg_tensor (s_fx.reply, 0), want1, sizeof want1);
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
    ps_tablespec_t spec = harness_sparse_spec ("own/emb", dim);
    assert_int_equal (harness_server_start (&s_fresh, 1, (const char *[]) {
        "--checkpoint-root", s_fx.root, NULL }), 0);
    void *chief = harness_dealer (s_fx.ctx, s_fresh.endpoint, "chief:0", "ps:1");
    void *worker = harness_dealer (s_fx.ctx, s_fresh.endpoint, "worker:0", "ps:1");
    const ps_proto_t *created = harness_sparse_create_on (&s_fx, chief, &spec, 1, 0,
                                                          HARNESS_SPARSE_SHARDS);
    assert_int_equal (created->type, PS_PROTO_TABLE_CREATE_OK);
    uint64_t rand = 88, ids [4];
    harness_sparse_ids (&spec, &rand, ids, 4);
    float grads [4 * 2] = { 0.5f, -0.25f, 0.125f, 1, -1, 0.75f, 0.5f, -0.5f };
    harness_sparse_entry_t entry = { "own/emb", dim, ids, 4, grads };
    assert_int_equal (harness_sparse_push_on (&s_fx, worker, 1, false, 0, &entry, 1)->type,
                      PS_PROTO_SPARSE_PUSH_OK);
    assert_int_equal (harness_sparse_snapshot (&s_fx, chief, "own-1", NULL)->type,
                      PS_PROTO_SNAPSHOT_OK);
    assert_int_equal (harness_sparse_pull_on (&s_fx, worker, "own/emb", dim, ids, 4)->type,
                      PS_PROTO_SPARSE_PULL_OK);
    float want [4 * 2];
    memcpy (want, ps_msg_tensor (s_fx.reply, 0), sizeof want);
    char path [256];
    snprintf (path, sizeof path, "%s/own-1/own%%2Femb.shard1of2.full.table", s_fx.root);
    FILE *other = fopen (path, "w");
    assert_non_null (other);
    assert_true (fputs ("shard 1 is another server's, and not a table file\n", other) >= 0);
    assert_int_equal (fclose (other), 0);
    assert_int_equal (harness_sparse_push_on (&s_fx, worker, 2, false, 0, &entry, 1)->type,
                      PS_PROTO_SPARSE_PUSH_OK);
    const ps_proto_t *reply = harness_sparse_restore (&s_fx, chief, "own-1", NULL);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("restore: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (reply->restore_ok.tables.count, 1);
    assert_int_equal (harness_sparse_pull_on (&s_fx, worker, "own/emb", dim, ids, 4)->type,
                      PS_PROTO_SPARSE_PULL_OK);
    assert_memory_equal (ps_msg_tensor (s_fx.reply, 0), want, sizeof want);
    zmq_close (chief);
    zmq_close (worker);
    assert_int_equal (harness_server_stop (&s_fresh, SIGTERM), 0);

    //  A server that holds no shard of the table does not guess one.
    assert_int_equal (harness_server_start (&s_fresh, 1, (const char *[]) {
        "--checkpoint-root", s_fx.root, NULL }), 0);
    chief = harness_dealer (s_fx.ctx, s_fresh.endpoint, "chief:0", "ps:1");
    worker = harness_dealer (s_fx.ctx, s_fresh.endpoint, "worker:0", "ps:1");
    harness_sparse_expect_error (harness_sparse_restore (&s_fx, chief, "own-1", NULL), "not_found",
                                 "own%2Femb.shard0of2.full.table is a shard of a table this "
                                 "server holds none of");
    //  Nor does it take a file whose spec is not its shard's.
    ps_tablespec_t other_spec = spec;
    other_spec.opt.lr = spec.opt.lr * 2;
    created = harness_sparse_create_on (&s_fx, chief, &other_spec, 1, 0, HARNESS_SPARSE_SHARDS);
    assert_int_equal (created->type, PS_PROTO_TABLE_CREATE_OK);
    harness_sparse_expect_error (harness_sparse_restore (&s_fx, chief, "own-1", NULL), "invalid",
                                 "holds table own/emb with another spec than the server's");
    ps_proto_table_stats_t stats = harness_sparse_table_stats_on (&s_fx, worker, "own/emb");
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
    ps_tablespec_t spec = harness_sparse_spec ("fence/emb", 1);
    harness_sparse_create (&s_fx, &spec);
    ps_proto_t msg = { .type = PS_PROTO_FENCE, .id = s_fx.id++, .fence.generation = 3 };
    harness_send (s_fx.chief, NULL, 0, &msg);
    harness_expect (s_fx.chief, s_fx.reply, PS_PROTO_FENCE_OK, HARNESS_SPARSE_TIMEOUT_MS);
    uint64_t rand = 66, id;
    harness_sparse_ids (&spec, &rand, &id, 1);
    float grad = 1;
    harness_sparse_entry_t entry = { "fence/emb", 1, &id, 1, &grad };
    harness_sparse_expect_error (harness_sparse_push_on (&s_fx, s_fx.worker, 1, true, 2, &entry, 1),
                                 "invalid", "sparse_push: stale generation 2");
    harness_sparse_expect_error (harness_sparse_push_on (&s_fx, s_fx.worker, 1, false, 0, &entry,
                                                         1),
                                 "invalid", "sparse_push carries no generation");
    assert_int_equal (harness_sparse_table_stats (&s_fx, "fence/emb").rows, 0);
    const ps_proto_t *reply = harness_sparse_push_on (&s_fx, s_fx.worker, 1, true, 3, &entry, 1);
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
    assert_int_equal (harness_sparse_snapshot (&s_fx, s_fx.chief, "fence-snap", NULL)->type,
                      PS_PROTO_SNAPSHOT_OK);
    ps_tablespec_t spec = harness_sparse_spec ("fence/emb", 1);
    uint64_t rand = 67, id;
    harness_sparse_ids (&spec, &rand, &id, 1);
    float grad = 1;
    harness_sparse_entry_t entry = { "fence/emb", 1, &id, 1, &grad };
    ps_proto_t msg = { .type = PS_PROTO_RESTORE, .id = s_fx.id++,
                       .restore = { .dir = "fence-snap", .has_generation = true,
                                    .generation = 4 } };
    harness_send (s_fx.chief, NULL, 0, &msg);
    const ps_proto_t *reply =
        harness_recv (s_fx.chief, s_fx.reply, false, HARNESS_SPARSE_TIMEOUT_MS);
    assert_non_null (reply);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("restore: %s: %s", reply->error.code, reply->error.message);
    harness_sparse_expect_error (harness_sparse_push_on (&s_fx, s_fx.worker, 2, true, 3, &entry, 1),
                                 "invalid", "sparse_push: stale generation 3");
    msg.id = s_fx.id++;
    msg.restore.dir = "no-such-snap";
    msg.restore.generation = 5;
    harness_send (s_fx.chief, NULL, 0, &msg);
    harness_sparse_expect_error (harness_recv (s_fx.chief, s_fx.reply, false,
                                               HARNESS_SPARSE_TIMEOUT_MS),
                                 "not_found", "no-such-snap");
    reply = harness_sparse_push_on (&s_fx, s_fx.worker, 2, true, 4, &entry, 1);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("sparse_push: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (reply->sparse_push_ok.applied.items [0].applied, 1);
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
    if (s_fresh.pid > 0 && harness_server_alive (&s_fresh))
        harness_server_stop (&s_fresh, SIGKILL);
    if (s_busy.pid > 0 && harness_server_alive (&s_busy))
        harness_server_stop (&s_busy, SIGKILL);
    return harness_sparse_stop (&s_fx);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_snapshot_full_incremental_restore),
        cmocka_unit_test (test_snapshot_is_a_cut),
        cmocka_unit_test (test_cluster_checkpoint_dir),
        cmocka_unit_test (test_restore_own_shard_only),
        cmocka_unit_test (test_fence),
        cmocka_unit_test (test_restore_fences),
    };
    return harness_finish (cmocka_run_group_tests (tests, s_setup, s_teardown));
}
