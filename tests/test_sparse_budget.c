//  A ps-server under a memory limit for its embedding tables
//  (ps-server --memory-limit; ps/ps_tables.h, ps/ps_sparsejob.c), on a
//  real server process over the wire.
//
//  Pushes of new ids are taken while the tables' bytes plus the most the
//  push could add stay within the limit. The first push that could pass
//  it is refused whole with error too_big naming the limit, the table and
//  the rows it holds: no row is created or changed, its step is not
//  recorded (the same step is taken later), and the server goes on
//  serving. A push of ids that all have rows creates nothing and is taken
//  however close to the limit the tables are. A malformed limit stops the
//  server at start, naming the option.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "harness_case.h"
#include "harness_rand.h"
#include "harness_wire.h"
#include "ps_error.h"
#include "ps_proto_conv.h"
#include "ps_tablespec.h"

#define S_TIMEOUT_MS  20000
#define S_DIM         16
#define S_LIMIT       "1M"      //  about 6,000 rows of 16 floats with Adagrad
#define S_BATCH       1500      //  new ids per push
#define S_MAX_PUSHES  100       //  far more than the limit lets in

static harness_server_t s_server;
static void *s_chief, *s_worker;
static ps_msg_t *s_reply;
static uint64_t s_id = 1;

//  Push gradients of ids[0..n) (each element 0.5) for step to table emb;
//  returns the reply.
static const ps_proto_t *
s_push (uint64_t step, const uint64_t *ids, size_t n)
{
    float *grads = malloc (n * S_DIM * sizeof *grads);
    assert_non_null (grads);
    for (size_t i = 0; i < n * S_DIM; i++)
        grads [i] = 0.5f;
    ps_proto_sparse_ref_t ref = { "emb", n, S_DIM };
    ps_proto_t msg = { .type = PS_PROTO_SPARSE_PUSH, .id = s_id++,
                       .sparse_push = { .step = step, .tables = { 1, &ref } } };
    const void *data [] = { ids, grads };
    size_t sizes [] = { n * sizeof (uint64_t), n * S_DIM * sizeof (float) };
    harness_send_frames (s_worker, &msg, data, sizes, 2);
    free (grads);
    const ps_proto_t *reply = harness_recv (s_worker, s_reply, false, S_TIMEOUT_MS);
    assert_non_null (reply);
    return reply;
}

//  The stats of table emb.
static ps_proto_table_stats_t
s_stats (void)
{
    ps_proto_t msg = { .type = PS_PROTO_STATS, .id = s_id++ };
    harness_send (s_worker, NULL, 0, &msg);
    const ps_proto_t *reply = harness_expect (s_worker, s_reply, PS_PROTO_STATS_OK,
                                              S_TIMEOUT_MS);
    assert_int_equal (reply->stats_ok.tables.count, 1);
    return reply->stats_ok.tables.items [0];
}

static void
test_push_past_the_limit_is_refused_whole (void **state)
{
    (void) state;
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "emb", S_DIM);
    ps_proto_tablespec_t item;
    ps_proto_tablespec_set (&item, &spec);
    ps_proto_t create = { .type = PS_PROTO_TABLE_CREATE, .id = s_id++,
                          .table_create = { { 1, &item }, 0, 1 } };
    harness_send (s_chief, NULL, 0, &create);
    harness_expect (s_chief, s_reply, PS_PROTO_TABLE_CREATE_OK, S_TIMEOUT_MS);

    //  New ids, S_BATCH a push, until the server refuses one.
    uint64_t state_ids = 7;
    uint64_t *ids = malloc ((size_t) S_MAX_PUSHES * S_BATCH * sizeof *ids);
    assert_non_null (ids);
    for (size_t i = 0; i < (size_t) S_MAX_PUSHES * S_BATCH; i++)
        ids [i] = harness_splitmix (&state_ids);
    uint64_t step = 1;
    const ps_proto_t *reply = NULL;
    uint64_t bytes = 0;                 //  the table's bytes before the last push
    for (; step <= S_MAX_PUSHES; step++) {
        bytes = s_stats ().bytes;
        reply = s_push (step, ids + (step - 1) * S_BATCH, S_BATCH);
        if (reply->type == PS_PROTO_ERROR)
            break;
        assert_int_equal (reply->type, PS_PROTO_SPARSE_PUSH_OK);
        assert_int_equal (reply->sparse_push_ok.applied.items [0].created, S_BATCH);
    }
    assert_true (step > 1);             //  pushes within the limit were taken
    assert_true (step <= S_MAX_PUSHES); //  and one past it refused
    uint64_t taken = (step - 1) * S_BATCH;
    assert_string_equal (reply->error.code, "too_big");
    char rows [64];
    snprintf (rows, sizeof rows, "holds %llu rows", (unsigned long long) taken);
    const char *message = reply->error.message;
    if (!strstr (message, PS_MEMORY_LIMIT_TEXT " of 1048576 bytes") || !strstr (message, "table emb")
    ||  !strstr (message, rows) || !strstr (message, "nothing was applied"))
        fail_msg ("the refusal does not name the limit, the table and its rows: %s", message);

    //  Nothing of the refused push was applied, and the server goes on.
    ps_proto_table_stats_t stats = s_stats ();
    assert_int_equal (stats.rows, taken);
    assert_int_equal (stats.created, taken);
    assert_int_equal (stats.pushes, step - 1);
    assert_int_equal (stats.bytes, bytes);

    //  Ids that all have rows create nothing: taken at the refused step,
    //  which the refusal left free.
    reply = s_push (step, ids, S_BATCH);
    if (reply->type == PS_PROTO_ERROR)
        fail_msg ("a push of held ids: %s: %s", reply->error.code, reply->error.message);
    assert_int_equal (reply->sparse_push_ok.applied.items [0].applied, S_BATCH);
    assert_int_equal (reply->sparse_push_ok.applied.items [0].created, 0);
    assert_false (reply->sparse_push_ok.applied.items [0].duplicate);
    stats = s_stats ();
    assert_int_equal (stats.rows, taken);
    assert_int_equal (stats.row_updates, taken + S_BATCH);
    free (ids);
}

static void
test_bad_limit_is_refused_at_start (void **state)
{
    (void) state;
    const char *bad [] = { "0", "12X", "-5", "G", "99999999999G" };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        char log [300];
        snprintf (log, sizeof log, "%s.bad", s_server.log);
        pid_t pid = harness_spawn ((const char *[]) { getenv ("PS_SERVER"), "--bind",
                                                      "tcp://127.0.0.1:0", "--insecure",
                                                      "--memory-limit", bad [i], NULL },
                                   NULL, log);
        assert_true (pid > 0);
        assert_int_equal (harness_wait (pid, S_TIMEOUT_MS), 2);
        if (!harness_file_contains (log, "--memory-limit"))
            fail_msg ("ps-server --memory-limit %s: the error does not name the option", bad [i]);
        unlink (log);
    }
}

static int
s_setup (void **state)
{
    (void) state;
    if (harness_server_start (&s_server, 0, (const char *[]) {
            "--threads", "2", "--memory-limit", S_LIMIT, NULL }))
        return -1;
    void *ctx = ps_curve_context ();
    s_chief = harness_dealer (ctx, s_server.endpoint, "chief:0", "ps:0");
    s_worker = harness_dealer (ctx, s_server.endpoint, "worker:0", "ps:0");
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
    return harness_server_stop (&s_server, SIGTERM) == 0 ? 0 : -1;
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_push_past_the_limit_is_refused_whole),
        cmocka_unit_test (test_bad_limit_is_refused_at_start),
    };
    return harness_finish (cmocka_run_group_tests (tests, s_setup, s_teardown));
}
