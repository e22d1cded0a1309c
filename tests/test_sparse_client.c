//  The worker's client of embedding tables (common/wire/ps_sparse_client.h)
//  against real ps-server processes on loopback.
//
//  Over 1, 2 and 3 servers, a pull of ids never pushed reads each row's
//  initial value, in the caller's order (repeats included); a push lands
//  each id on the server of its shard, and the rows pulled back in
//  another order are the SGD reference's. A push reaches every table
//  shard, the ones with no id of the step (an empty entry) included, and
//  the same step pushed again is answered duplicate by every shard and
//  changes no row. A push-pull reads the rows after its push. A table
//  spec that disagrees with the servers' is refused, naming the table;
//  and a server that stops answering in the middle of a call gives a
//  timeout naming it, within the client's timeout.

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
#include "ps_clock.h"
#include "ps_proto_conv.h"
#include "ps_sparse_client.h"

#define S_SERVERS     3
#define S_TABLES      2
#define S_TIMEOUT_MS  20000
#define S_IDS         300

static harness_server_t s_servers [S_SERVERS];
static const char *s_endpoints [S_SERVERS];
static void *s_ctx;
static ps_msg_t *s_reply;
static uint64_t s_id = 1;

//  The tables of a cluster of nservers: named after the count, so each
//  server holds its shard of each count's tables side by side. Table 0
//  has rows of 4, table 1 rows of 3; plain SGD (lr 1) makes the reference
//  a subtraction.
static void
s_specs (int nservers, ps_tablespec_t *specs)
{
    for (int t = 0; t < S_TABLES; t++) {
        char name [32];
        snprintf (name, sizeof name, "n%d/emb%d", nservers, t);
        ps_tablespec_default (&specs [t], name, t == 0 ? 4 : 3);
        specs [t].init.seed = (uint64_t) (7 + t);
        specs [t].shard_seed = (uint64_t) (100 + nservers + t);
        specs [t].opt.kind = PS_ROWOPT_SGD;
        specs [t].opt.lr = 1.0;
    }
}

//  Create the tables of a cluster of nservers on its servers, as the
//  coordinator does: server i holds shard i of nservers.
static void
s_create_tables (int nservers)
{
    ps_tablespec_t specs [S_TABLES];
    s_specs (nservers, specs);
    ps_proto_tablespec_t items [S_TABLES];
    for (int t = 0; t < S_TABLES; t++)
        ps_proto_tablespec_set (&items [t], &specs [t]);
    for (int s = 0; s < nservers; s++) {
        char task [16];
        snprintf (task, sizeof task, "ps:%d", s);
        void *chief = harness_dealer (s_ctx, s_servers [s].endpoint, "chief:0", task);
        ps_proto_t msg = { .type = PS_PROTO_TABLE_CREATE, .id = s_id++,
                           .table_create = { { S_TABLES, items }, (uint64_t) s,
                                             (uint64_t) nservers } };
        harness_send (chief, NULL, 0, &msg);
        harness_expect (chief, s_reply, PS_PROTO_TABLE_CREATE_OK, S_TIMEOUT_MS);
        zmq_close (chief);
    }
}

static ps_sparse_client_t *
s_client (int nservers, const ps_tablespec_t *specs, int timeout_ms)
{
    ps_error_t err;
    ps_sparse_client_t *client = ps_sparse_client_new (s_endpoints, nservers, timeout_ms,
                                                       harness_curve ("worker:0"), specs,
                                                       S_TABLES, &err);
    if (!client)
        fail_msg ("ps_sparse_client_new: %s", err.msg);
    return client;
}

//  n distinct ids from state.
static void
s_distinct_ids (uint64_t *state, uint64_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        bool repeat;
        do {
            ids [i] = harness_splitmix (state);
            repeat = false;
            for (size_t j = 0; j < i; j++)
                repeat |= ids [j] == ids [i];
        } while (repeat);
    }
}

//  Pull ids [t][0..counts [t]) of every table and check them against
//  expect (a row per id, looked up by id in known [t]).
static void
s_pull_and_check (ps_sparse_client_t *client, const ps_tablespec_t *specs,
                  const uint64_t *const *ids, const size_t *counts,
                  const uint64_t *const *known, const float *const *expect, size_t nknown)
{
    float *rows [S_TABLES];
    for (int t = 0; t < S_TABLES; t++)
        rows [t] = calloc (counts [t] * specs [t].dim + 1, sizeof (float));
    ps_error_t err;
    harness_ok (ps_sparse_client_pull (client, ids, counts, rows, &err), &err);
    for (int t = 0; t < S_TABLES; t++) {
        uint32_t dim = specs [t].dim;
        for (size_t i = 0; i < counts [t]; i++) {
            size_t k = 0;
            while (k < nknown && known [t][k] != ids [t][i])
                k++;
            assert_true (k < nknown);
            for (uint32_t d = 0; d < dim; d++)
                if (rows [t][i * dim + d] != expect [t][k * dim + d])
                    fail_msg ("%s: id %llu (position %zu), element %u: %g, expected %g",
                              specs [t].name, (unsigned long long) ids [t][i], i, d,
                              rows [t][i * dim + d], expect [t][k * dim + d]);
        }
        free (rows [t]);
    }
}

//  ---------------------------------------------------------------------

//  Over 1, 2 and 3 servers: initial rows in order, a push spread over the
//  shards, the rows after it in another order, and a repeated step.
static void
test_split_push_pull_duplicate (void **state)
{
    (void) state;
    for (int nservers = 1; nservers <= S_SERVERS; nservers++) {
        ps_tablespec_t specs [S_TABLES];
        s_specs (nservers, specs);
        s_create_tables (nservers);
        ps_sparse_client_t *client = s_client (nservers, specs, S_TIMEOUT_MS);
        uint64_t rng = (uint64_t) nservers;
        uint64_t *ids [S_TABLES], *reversed [S_TABLES];
        float *init [S_TABLES], *grads [S_TABLES], *after [S_TABLES];
        size_t counts [S_TABLES], twice [S_TABLES];
        for (int t = 0; t < S_TABLES; t++) {
            uint32_t dim = specs [t].dim;
            counts [t] = S_IDS - (size_t) t * 100;
            ids [t] = calloc (counts [t], sizeof (uint64_t));
            s_distinct_ids (&rng, ids [t], counts [t]);
            //  The pull back: reversed, every id twice.
            twice [t] = 2 * counts [t];
            reversed [t] = calloc (twice [t], sizeof (uint64_t));
            for (size_t i = 0; i < counts [t]; i++)
                reversed [t][i] = reversed [t][twice [t] - 1 - i] = ids [t][counts [t] - 1 - i];
            init [t] = calloc (counts [t] * dim, sizeof (float));
            grads [t] = calloc (counts [t] * dim, sizeof (float));
            after [t] = calloc (counts [t] * dim, sizeof (float));
            for (size_t i = 0; i < counts [t]; i++)
                ps_tablespec_init_row (&specs [t], ids [t][i], init [t] + i * dim);
            for (size_t j = 0; j < counts [t] * dim; j++) {
                grads [t][j] = (float) harness_unit (&rng) - 0.5f;
                after [t][j] = init [t][j] - grads [t][j];
            }
        }
        s_pull_and_check (client, specs, (const uint64_t *const *) ids, counts,
                          (const uint64_t *const *) ids, (const float *const *) init,
                          S_IDS);
        ps_sparse_push_info_t info;
        ps_error_t err;
        harness_ok (ps_sparse_client_push (client, 1, 0, (const uint64_t *const *) ids, counts,
                                           (const float *const *) grads, &info, &err), &err);
        assert_int_equal (info.applied, counts [0] + counts [1]);
        assert_int_equal (info.created, counts [0] + counts [1]);
        assert_int_equal (info.shards, (uint64_t) nservers * S_TABLES);
        assert_int_equal (info.duplicates, 0);
        s_pull_and_check (client, specs, (const uint64_t *const *) reversed, twice,
                          (const uint64_t *const *) ids, (const float *const *) after, S_IDS);
        //  The same step again: every shard has it in its ledger.
        harness_ok (ps_sparse_client_push (client, 1, 0, (const uint64_t *const *) ids, counts,
                                           (const float *const *) grads, &info, &err), &err);
        assert_int_equal (info.applied, 0);
        assert_int_equal (info.shards, 0);
        assert_int_equal (info.duplicates, (uint64_t) nservers * S_TABLES);
        s_pull_and_check (client, specs, (const uint64_t *const *) ids, counts,
                          (const uint64_t *const *) ids, (const float *const *) after, S_IDS);
        for (int t = 0; t < S_TABLES; t++) {
            free (ids [t]);
            free (reversed [t]);
            free (init [t]);
            free (grads [t]);
            free (after [t]);
        }
        ps_sparse_client_destroy (&client);
        assert_null (client);
    }
}

//  A step whose ids all fall on server 0, and none at all in table 1:
//  every shard of every table still records it (empty entries), so the
//  step pushed again is a duplicate everywhere. Then a push-pull reads
//  the rows after its own push.
static void
test_empty_entries_and_push_pull (void **state)
{
    (void) state;
    int nservers = S_SERVERS;
    ps_tablespec_t specs [S_TABLES];
    s_specs (nservers, specs);
    ps_sparse_client_t *client = s_client (nservers, specs, S_TIMEOUT_MS);
    uint64_t rng = 99, ids [8];
    for (size_t i = 0; i < 8; i++)
        do
            ids [i] = harness_splitmix (&rng);
        while (ps_tablespec_shard_of (ids [i], specs [0].shard_seed, (uint32_t) nservers) != 0);
    float grads [8 * 4], init [8 * 4], after [8 * 4];
    for (size_t i = 0; i < 8; i++)
        ps_tablespec_init_row (&specs [0], ids [i], init + i * 4);
    for (size_t j = 0; j < 8 * 4; j++) {
        grads [j] = 0.25f;
        after [j] = init [j] - 0.25f;
    }
    const uint64_t *push_ids [S_TABLES] = { ids, NULL };
    size_t counts [S_TABLES] = { 8, 0 };
    const float *push_grads [S_TABLES] = { grads, NULL };
    ps_sparse_push_info_t info;
    ps_error_t err;
    harness_ok (ps_sparse_client_push (client, 50, 0, push_ids, counts, push_grads, &info,
                                       &err), &err);
    assert_int_equal (info.applied, 8);
    assert_int_equal (info.shards, (uint64_t) nservers * S_TABLES);
    harness_ok (ps_sparse_client_push (client, 50, 0, push_ids, counts, push_grads, &info,
                                       &err), &err);
    assert_int_equal (info.duplicates, (uint64_t) nservers * S_TABLES);
    assert_int_equal (info.applied, 0);
    const uint64_t *known [S_TABLES] = { ids, NULL };
    const float *expect [S_TABLES] = { after, NULL };
    s_pull_and_check (client, specs, push_ids, counts, known, expect, 8);
    //  Step 51 pushes the same gradient and pulls the rows after it.
    float rows0 [8 * 4], rows1 [1];
    float *rows [S_TABLES] = { rows0, rows1 };
    harness_ok (ps_sparse_client_push_pull (client, 51, 0, push_ids, counts, push_grads,
                                            push_ids, counts, rows, &info, &err), &err);
    assert_int_equal (info.applied, 8);
    for (size_t j = 0; j < 8 * 4; j++)
        assert_true (rows0 [j] == after [j] - 0.25f);
    ps_sparse_client_destroy (&client);
}

//  A spec whose row width is not the servers': refused, naming the table.
static void
test_wrong_width_refused (void **state)
{
    (void) state;
    ps_tablespec_t specs [S_TABLES];
    s_specs (2, specs);
    specs [1].dim = 5;
    ps_sparse_client_t *client = s_client (2, specs, S_TIMEOUT_MS);
    uint64_t a = 1, b = 2;
    const uint64_t *ids [S_TABLES] = { &a, &b };
    size_t counts [S_TABLES] = { 1, 1 };
    float r0 [4], r1 [5];
    float *rows [S_TABLES] = { r0, r1 };
    ps_error_t err;
    int rc = ps_sparse_client_pull (client, ids, counts, rows, &err);
    assert_true (rc < 0);
    if (!strstr (err.msg, "n2/emb1"))
        fail_msg ("the refusal does not name the table: %s", err.msg);
    ps_sparse_client_destroy (&client);
}

//  A server stopped in the middle of a call (SIGSTOP: it holds the
//  connection but never answers, as one that hangs or dies unseen), and
//  then one killed: the call fails with a timeout naming that server,
//  within the client's timeout and its linger.
static void
test_server_stops_answering (void **state)
{
    (void) state;
    harness_server_t victim;
    assert_int_equal (harness_server_start (&victim, 1, NULL), 0);
    const char *endpoints [2] = { s_servers [0].endpoint, victim.endpoint };
    ps_tablespec_t specs [S_TABLES];
    s_specs (2, specs);
    //  The victim's tables: the same as the cluster of two's, as shard 1.
    ps_proto_tablespec_t items [S_TABLES];
    for (int t = 0; t < S_TABLES; t++)
        ps_proto_tablespec_set (&items [t], &specs [t]);
    void *chief = harness_dealer (s_ctx, victim.endpoint, "chief:0", "ps:1");
    ps_proto_t msg = { .type = PS_PROTO_TABLE_CREATE, .id = s_id++,
                       .table_create = { { S_TABLES, items }, 1, 2 } };
    harness_send (chief, NULL, 0, &msg);
    harness_expect (chief, s_reply, PS_PROTO_TABLE_CREATE_OK, S_TIMEOUT_MS);
    zmq_close (chief);
    int timeout_ms = 1500;
    ps_error_t err;
    ps_sparse_client_t *client = ps_sparse_client_new (endpoints, 2, timeout_ms,
                                                       harness_curve ("worker:0"), specs,
                                                       S_TABLES, &err);
    if (!client)
        fail_msg ("ps_sparse_client_new: %s", err.msg);
    uint64_t rng = 5, ids0 [64], ids1 [64];
    s_distinct_ids (&rng, ids0, 64);
    s_distinct_ids (&rng, ids1, 64);
    const uint64_t *ids [S_TABLES] = { ids0, ids1 };
    size_t counts [S_TABLES] = { 64, 64 };
    float r0 [64 * 4], r1 [64 * 3];
    float *rows [S_TABLES] = { r0, r1 };
    harness_ok (ps_sparse_client_pull (client, ids, counts, rows, &err), &err);
    assert_int_equal (kill (victim.pid, SIGSTOP), 0);
    double t0 = ps_clock_ms ();
    int rc = ps_sparse_client_pull (client, ids, counts, rows, &err);
    double ms = ps_clock_ms () - t0;
    assert_int_equal (rc, PS_ETIMEDOUT);
    if (!strstr (err.msg, victim.endpoint))
        fail_msg ("the timeout does not name the server %s: %s", victim.endpoint, err.msg);
    //  The call's timeout, the linger, and room for a loaded machine.
    assert_true (ms >= timeout_ms - 50);
    assert_true (ms < timeout_ms + 10000);
    //  A push fails the same way; the server that answered keeps it, and
    //  the retry after the victim is back is a duplicate there only.
    float g0 [64 * 4] = { 0 }, g1 [64 * 3] = { 0 };
    const float *grads [S_TABLES] = { g0, g1 };
    ps_sparse_push_info_t info;
    assert_int_equal (ps_sparse_client_push (client, 7, 0, ids, counts, grads, &info, &err),
                      PS_ETIMEDOUT);
    assert_int_equal (kill (victim.pid, SIGCONT), 0);
    harness_ok (ps_sparse_client_push (client, 7, 0, ids, counts, grads, &info, &err), &err);
    //  The victim may have read the first push before it stopped, or not.
    assert_true (info.duplicates >= S_TABLES);
    assert_int_equal (info.shards + info.duplicates, 2 * S_TABLES);
    //  Killed outright: the same error, naming it, within the same time.
    assert_true (harness_server_stop (&victim, SIGKILL) == 128 + SIGKILL);
    t0 = ps_clock_ms ();
    assert_int_equal (ps_sparse_client_pull (client, ids, counts, rows, &err), PS_ETIMEDOUT);
    ms = ps_clock_ms () - t0;
    if (!strstr (err.msg, victim.endpoint))
        fail_msg ("the timeout does not name the server %s: %s", victim.endpoint, err.msg);
    assert_true (ms < timeout_ms + 10000);
    ps_sparse_client_destroy (&client);
}

//  ---------------------------------------------------------------------

static int
s_setup (void **state)
{
    (void) state;
    for (int s = 0; s < S_SERVERS; s++) {
        if (harness_server_start (&s_servers [s], s, (const char *[]) { "--threads", "2",
                                                                        NULL }))
            return -1;
        s_endpoints [s] = s_servers [s].endpoint;
    }
    //  The context harness_finish knows: a failed case may leave sockets
    //  open, which terminating a context of our own would wait for.
    s_ctx = ps_curve_context ();
    s_reply = ps_msg_new ();
    return 0;
}

static int
s_teardown (void **state)
{
    (void) state;
    ps_msg_destroy (&s_reply);
    int failed = 0;
    for (int s = 0; s < S_SERVERS; s++)
        failed |= harness_server_stop (&s_servers [s], SIGTERM) != 0;
    return failed ? -1 : 0;
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_split_push_pull_duplicate),
        cmocka_unit_test (test_empty_entries_and_push_pull),
        cmocka_unit_test (test_wrong_width_refused),
        cmocka_unit_test (test_server_stops_answering),
    };
    return harness_finish (cmocka_run_group_tests (tests, s_setup, s_teardown));
}
