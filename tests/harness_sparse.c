//  The embedding table tests' fixture on a real ps-server: harness_sparse.h.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <string.h>

#include "harness_rand.h"
#include "harness_sparse.h"
#include "harness_wire.h"
#include "ps_proto_conv.h"

int
harness_sparse_start (harness_sparse_t *self, const char *threads)
{
    memset (self, 0, sizeof *self);
    self->id = 1;
    harness_tmpdir (self->root, sizeof self->root);
    if (harness_server_start (&self->server, 0, (const char *[]) {
            "--threads", threads, "--checkpoint-root", self->root, NULL }))
        return -1;
    //  The context harness_finish knows: a failed case may leave sockets
    //  open, which terminating a context of our own would wait for.
    self->ctx = ps_curve_context ();
    self->chief = harness_dealer (self->ctx, self->server.endpoint, "chief:0", "ps:0");
    self->worker = harness_dealer (self->ctx, self->server.endpoint, "worker:0", "ps:0");
    self->evaluator = harness_dealer (self->ctx, self->server.endpoint, "evaluator:0", "ps:0");
    self->reply = ps_msg_new ();
    return 0;
}

int
harness_sparse_stop (harness_sparse_t *self)
{
    ps_msg_destroy (&self->reply);
    zmq_close (self->chief);
    zmq_close (self->worker);
    zmq_close (self->evaluator);
    int status = harness_server_stop (&self->server, SIGTERM);
    harness_rmtree (self->root);
    return status == 0 ? 0 : -1;
}

ps_tablespec_t
harness_sparse_spec (const char *name, uint32_t dim)
{
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, name, dim);
    spec.init.seed = 11;
    return spec;
}

const ps_proto_t *
harness_sparse_create_on (harness_sparse_t *self, void *socket, const ps_tablespec_t *specs,
                          size_t n, uint64_t shard, uint64_t shards)
{
    ps_proto_tablespec_t items [4];
    assert_true (n <= 4);
    for (size_t i = 0; i < n; i++)
        ps_proto_tablespec_set (&items [i], &specs [i]);
    ps_proto_t msg = { .type = PS_PROTO_TABLE_CREATE, .id = self->id++,
                       .table_create = { { n, items }, shard, shards } };
    harness_send (socket, NULL, 0, &msg);
    const ps_proto_t *reply = harness_recv (socket, self->reply, false,
                                            HARNESS_SPARSE_TIMEOUT_MS);
    assert_non_null (reply);
    return reply;
}

void
harness_sparse_create (harness_sparse_t *self, const ps_tablespec_t *spec)
{
    const ps_proto_t *reply = harness_sparse_create_on (self, self->chief, spec, 1, 0,
                                                        HARNESS_SPARSE_SHARDS);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("table_create: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (reply->table_create_ok.created, 1);
    assert_true (self->nheld < HARNESS_SPARSE_HELD);
    self->held [self->nheld++] = *spec;
}

void
harness_sparse_create_held_on (harness_sparse_t *self, void *chief, uint64_t shard)
{
    for (size_t i = 0; i < self->nheld; i++) {
        const ps_proto_t *reply = harness_sparse_create_on (self, chief, &self->held [i], 1,
                                                            shard, HARNESS_SPARSE_SHARDS);
        if (reply->type == PS_PROTO_ERROR)
            fail_msg ("table_create: %s: %s", reply->error.code, reply->error.message);
    }
}

void
harness_sparse_ids (const ps_tablespec_t *spec, uint64_t *state, uint64_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        do
            ids [i] = harness_splitmix (state);
        while (ps_tablespec_shard_of (ids [i], spec->shard_seed, HARNESS_SPARSE_SHARDS) != 0);
    }
}

const ps_proto_t *
harness_sparse_pull_on (harness_sparse_t *self, void *socket, const char *table, uint32_t dim,
                        const uint64_t *ids, size_t n)
{
    ps_proto_sparse_ref_t ref = { table, n, dim };
    ps_proto_t msg = { .type = PS_PROTO_SPARSE_PULL, .id = self->id++,
                       .sparse_pull.tables = { 1, &ref } };
    const void *data [] = { ids };
    size_t sizes [] = { n * sizeof (uint64_t) };
    harness_send_frames (socket, &msg, data, sizes, 1);
    const ps_proto_t *reply = harness_recv (socket, self->reply, false,
                                            HARNESS_SPARSE_TIMEOUT_MS);
    assert_non_null (reply);
    return reply;
}

void
harness_sparse_pull (harness_sparse_t *self, const char *table, uint32_t dim,
                     const uint64_t *ids, size_t n, float *out)
{
    const ps_proto_t *reply = harness_sparse_pull_on (self, self->worker, table, dim, ids, n);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("sparse_pull: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (reply->type, PS_PROTO_SPARSE_PULL_OK);
    assert_int_equal (reply->sparse_pull_ok.tables.count, 1);
    assert_int_equal (reply->sparse_pull_ok.tables.items [0].count, n);
    memcpy (out, ps_msg_tensor (self->reply, 0), n * dim * sizeof (float));
}

const ps_proto_t *
harness_sparse_push_on (harness_sparse_t *self, void *socket, uint64_t step, bool has_generation,
                        uint64_t generation, const harness_sparse_entry_t *entries, size_t n)
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
    ps_proto_t msg = { .type = PS_PROTO_SPARSE_PUSH, .id = self->id++,
                       .sparse_push = { step, 0, has_generation, generation, { n, refs } } };
    harness_send_frames (socket, &msg, data, sizes, 2 * n);
    const ps_proto_t *reply = harness_recv (socket, self->reply, false,
                                            HARNESS_SPARSE_TIMEOUT_MS);
    assert_non_null (reply);
    return reply;
}

ps_proto_sparse_applied_t
harness_sparse_push (harness_sparse_t *self, uint64_t step, const harness_sparse_entry_t *entry)
{
    const ps_proto_t *reply = harness_sparse_push_on (self, self->worker, step, false, 0, entry, 1);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("sparse_push: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (reply->type, PS_PROTO_SPARSE_PUSH_OK);
    assert_int_equal (reply->sparse_push_ok.applied.count, 1);
    return reply->sparse_push_ok.applied.items [0];
}

void
harness_sparse_expect_error (const ps_proto_t *reply, const char *code, const char *text)
{
    if (reply->type != PS_PROTO_ERROR)
        fail_msg ("expected error %s (%s), got a %s", code, text, ps_proto_info [reply->type].name);
    if (strcmp (reply->error.code, code) != 0 || !strstr (reply->error.message, text))
        fail_msg ("expected error %s holding '%s', got %s: %s", code, text, reply->error.code,
                  reply->error.message);
}

ps_proto_table_stats_t
harness_sparse_table_stats_on (harness_sparse_t *self, void *socket, const char *table)
{
    ps_proto_t msg = { .type = PS_PROTO_STATS, .id = self->id++ };
    harness_send (socket, NULL, 0, &msg);
    const ps_proto_t *reply = harness_expect (socket, self->reply, PS_PROTO_STATS_OK,
                                              HARNESS_SPARSE_TIMEOUT_MS);
    for (size_t i = 0; i < reply->stats_ok.tables.count; i++)
        if (strcmp (reply->stats_ok.tables.items [i].table, table) == 0)
            return reply->stats_ok.tables.items [i];
    fail_msg ("stats_ok holds no table %s", table);
    return (ps_proto_table_stats_t) { 0 };
}

ps_proto_table_stats_t
harness_sparse_table_stats (harness_sparse_t *self, const char *table)
{
    return harness_sparse_table_stats_on (self, self->worker, table);
}

const ps_proto_t *
harness_sparse_snapshot (harness_sparse_t *self, void *socket, const char *dir, const char *base)
{
    ps_proto_t msg = { .type = PS_PROTO_SNAPSHOT, .id = self->id++,
                       .snapshot = { dir, base != NULL, base != NULL, base != NULL,
                                     base ? base : "" } };
    harness_send (socket, NULL, 0, &msg);
    const ps_proto_t *reply = harness_recv (socket, self->reply, false,
                                            HARNESS_SPARSE_TIMEOUT_MS);
    assert_non_null (reply);
    return reply;
}

const ps_proto_t *
harness_sparse_restore (harness_sparse_t *self, void *socket, const char *dir, const char *base)
{
    ps_proto_t msg = { .type = PS_PROTO_RESTORE, .id = self->id++,
                       .restore = { .dir = dir, .has_base = base != NULL,
                                    .base = base ? base : "" } };
    harness_send (socket, NULL, 0, &msg);
    const ps_proto_t *reply = harness_recv (socket, self->reply, false,
                                            HARNESS_SPARSE_TIMEOUT_MS);
    assert_non_null (reply);
    return reply;
}
