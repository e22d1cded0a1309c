//  ps-server end to end through the client library, on real processes and
//  loopback TCP: creation and initial values across partitionings, pushes
//  with known gradients, duplicate steps, push-pull, optimizer changes,
//  error replies for wrong layouts, and clean exit on SIGTERM. The servers
//  are secured: each test creates and sets the optimizer as chief:0 and
//  pushes and pulls as worker:0 (harness_clients_t).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include <zmq.h>

#include "harness.h"
#include "harness_case.h"
#include "ps_client.h"
#include "ps_msg.h"

static harness_server_t s_servers [2];

static int
s_setup (void **state)
{
    (void) state;
    for (int i = 0; i < 2; i++)
        if (harness_server_start (&s_servers [i], i, (const char *[]) { "--threads", "2", NULL }))
            return -1;
    return 0;
}

static int
s_teardown (void **state)
{
    (void) state;
    for (int i = 0; i < 2; i++)
        if (s_servers [i].pid > 0)
            harness_server_stop (&s_servers [i], SIGKILL);
    return 0;
}

//  A client of the first nservers servers as task.
static ps_client_t *
s_client (int nservers, const char *task)
{
    const char *endpoints [2] = { s_servers [0].endpoint, s_servers [1].endpoint };
    ps_error_t err;
    ps_client_t *client = ps_client_new (endpoints, nservers, 5000, harness_curve (task), &err);
    if (!client)
        fail_msg ("client: %s", err.msg);
    return client;
}

//  The control and data clients of the first nservers servers.
static void
s_clients (harness_clients_t *clients, int nservers)
{
    const char *endpoints [2] = { s_servers [0].endpoint, s_servers [1].endpoint };
    ps_error_t err;
    if (harness_clients_open (clients, endpoints, nservers, 5000, false, &err))
        fail_msg ("clients: %s", err.msg);
}

//  Initial values do not depend on how a variable is partitioned: a kernel
//  split in three over two servers pulls back exactly the local fill.
static void
test_create_matches_local_fill (void **state)
{
    (void) state;
    harness_clients_t clients;
    s_clients (&clients, 2);
    ps_error_t err;
    ps_shape_t shape;
    ps_shape_set (&shape, (int64_t []) { 5, 3, 1, 8 }, 4, NULL);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_GLOROT_UNIFORM);
    init.seed = 1234;
    int var = harness_clients_add_variable (&clients, "glorot/kernel", &shape, &init, 3,
                                            (int64_t []) { 0, 2, 3, 5 }, (int []) { 0, 1, 0 },
                                            &err);
    assert_int_equal (var, 0);
    harness_ok (ps_client_create (clients.control, &err), &err);
    //  Creating again is a no-op.
    harness_ok (ps_client_create (clients.control, &err), &err);
    size_t n = ps_client_variable_size (clients.data, var);
    float *pulled = calloc (n, sizeof (float));
    float *expect = calloc (n, sizeof (float));
    harness_ok (ps_client_pull (clients.data, &pulled, &err), &err);
    harness_ok (ps_init_fill (&init, &shape, 0, 5, expect, &err), &err);
    assert_memory_equal (pulled, expect, n * sizeof (float));
    harness_clients_close (&clients);
    free (pulled);
    free (expect);
}

//  SGD with lr = 1 subtracts the gradient exactly; a repeated step is
//  ignored and counted; push-pull returns the values after the push.
static void
test_push_duplicate_push_pull (void **state)
{
    (void) state;
    harness_clients_t clients;
    s_clients (&clients, 2);
    ps_client_t *client = clients.data;
    ps_error_t err;
    ps_shape_t wshape, bshape;
    ps_shape_set (&wshape, (int64_t []) { 6, 4 }, 2, NULL);
    ps_shape_set (&bshape, (int64_t []) { 4 }, 1, NULL);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_CONSTANT);
    init.value = 10;
    assert_int_equal (harness_clients_add_variable (&clients, "sgd/w", &wshape, &init, 2,
                                                    (int64_t []) { 0, 3, 6 }, (int []) { 0, 1 },
                                                    &err), 0);
    assert_int_equal (harness_clients_add_variable (&clients, "sgd/b", &bshape, &init, 1,
                                                    (int64_t []) { 0, 4 }, (int []) { 1 }, &err),
                      1);
    harness_ok (ps_client_create (clients.control, &err), &err);
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_SGD);
    opt.lr = 1;
    harness_ok (ps_client_set_optimizer (clients.control, &opt, &err), &err);

    float w [24], b [4], gw [24], gb [4];
    for (int i = 0; i < 24; i++)
        gw [i] = (float) (i % 5);
    for (int i = 0; i < 4; i++)
        gb [i] = (float) (i + 1);
    const float *grads [] = { gw, gb };
    float *values [] = { w, b };
    ps_push_info_t info;
    harness_ok (ps_client_push (client, 0, 0, grads, &info, &err), &err);
    assert_int_equal (info.applied, 3);
    assert_int_equal (info.duplicates, 0);
    //  The same step again: every partition says duplicate, nothing changes.
    harness_ok (ps_client_push (client, 0, 1, grads, &info, &err), &err);
    assert_int_equal (info.applied, 0);
    assert_int_equal (info.duplicates, 3);
    harness_ok (ps_client_push_pull (client, 1, 0, grads, values, &info, &err), &err);
    assert_int_equal (info.applied, 3);
    for (int i = 0; i < 24; i++)
        assert_true (w [i] == 10.0f - 2.0f * (float) (i % 5));
    for (int i = 0; i < 4; i++)
        assert_true (b [i] == 10.0f - 2.0f * (float) (i + 1));

    //  Server 1 holds sgd/w part 1 and sgd/b: two updates and one duplicate each.
    ps_part_stats_t *stats;
    size_t count;
    harness_ok (ps_client_stats (clients.control, 1, &stats, &count, &err), &err);
    int seen = 0;
    for (size_t i = 0; i < count; i++)
        if (strncmp (stats [i].var, "sgd/", 4) == 0) {
            assert_int_equal (stats [i].updates, 2);
            assert_int_equal (stats [i].duplicates, 1);
            assert_true (stats [i].bytes_in > 0);
            seen++;
        }
    assert_int_equal (seen, 2);
    free (stats);

    //  A learning-rate change keeps the kind: lr 0.5 halves the next step.
    opt.lr = 0.5;
    harness_ok (ps_client_set_optimizer (clients.control, &opt, &err), &err);
    harness_ok (ps_client_push_pull (client, 2, 0, grads, values, &info, &err), &err);
    for (int i = 0; i < 4; i++)
        assert_true (b [i] == 10.0f - 2.5f * (float) (i + 1));
    harness_clients_close (&clients);
}

//  Sync mode through the wire: the two steps of a round, on two servers,
//  are applied once as their mean when the second arrives; a repeat of a
//  step changes nothing; a step of another round while one is open, and a
//  round already applied, are refused naming the partition and both
//  rounds, and add nothing (the stats count one update per partition).
static void
test_push_rounds (void **state)
{
    (void) state;
    harness_clients_t clients;
    s_clients (&clients, 2);
    ps_client_t *client = clients.data;
    ps_error_t err;
    ps_shape_t shape;
    ps_shape_set (&shape, (int64_t []) { 4 }, 1, NULL);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_ZEROS);
    assert_int_equal (harness_clients_add_variable (&clients, "round/v", &shape, &init, 2,
                                                    (int64_t []) { 0, 2, 4 }, (int []) { 0, 1 },
                                                    &err), 0);
    harness_ok (ps_client_create (clients.control, &err), &err);
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_SGD);
    opt.lr = 1;
    harness_ok (ps_client_set_optimizer (clients.control, &opt, &err), &err);

    float g1 [4] = { 1, 2, 3, 4 }, g2 [4] = { 3, 2, 1, 0 }, v [4];
    float *values [] = { v };
    ps_push_info_t info;
    //  Round 1 has steps 10 and 11: the first is added, nothing moves.
    harness_ok (ps_client_push_round (client, 10, 0, 1, 2, (const float *[]) { g1 }, &info,
                                      &err), &err);
    assert_int_equal (info.applied, 2);
    harness_ok (ps_client_pull (client, values, &err), &err);
    for (int i = 0; i < 4; i++)
        assert_true (v [i] == 0.0f);
    //  A step of round 2 while round 1 is open is refused whole.
    assert_int_equal (ps_client_push_round (client, 12, 0, 2, 2, (const float *[]) { g2 },
                                            &info, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "round/v/"));
    assert_non_null (strstr (err.msg, "round 2 while round 1"));
    //  The repeat of step 10 is a duplicate everywhere.
    harness_ok (ps_client_push_round (client, 10, 0, 1, 2, (const float *[]) { g1 }, &info,
                                      &err), &err);
    assert_int_equal (info.applied, 0);
    assert_int_equal (info.duplicates, 2);
    //  Step 11 completes the round: the mean, 2 everywhere, applied once.
    harness_ok (ps_client_push_round (client, 11, 1, 1, 2, (const float *[]) { g2 }, &info,
                                      &err), &err);
    assert_int_equal (info.applied, 2);
    harness_ok (ps_client_pull (client, values, &err), &err);
    for (int i = 0; i < 4; i++)
        assert_true (v [i] == -2.0f);
    //  Round 1 again, with a new step: refused, it was applied.
    assert_int_equal (ps_client_push_round (client, 13, 0, 1, 2, (const float *[]) { g1 },
                                            &info, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "round 1 is not after round 1"));
    //  One update per partition, and one duplicate.
    for (int s = 0; s < 2; s++) {
        ps_part_stats_t *stats;
        size_t count;
        harness_ok (ps_client_stats (clients.control, s, &stats, &count, &err), &err);
        int seen = 0;
        for (size_t i = 0; i < count; i++)
            if (strcmp (stats [i].var, "round/v") == 0) {
                assert_int_equal (stats [i].updates, 1);
                assert_int_equal (stats [i].duplicates, 1);
                seen++;
            }
        assert_int_equal (seen, 1);
        free (stats);
    }
    harness_clients_close (&clients);
}

//  Large push-pulls go through the servers' thread pools, several requests
//  per server in flight, and answer in the gradient's own frame; the values
//  returned must still be exact, and a later pull must agree with them.
static void
test_push_pull_large (void **state)
{
    (void) state;
    harness_clients_t clients;
    s_clients (&clients, 2);
    ps_client_t *client = clients.data;
    ps_error_t err;
    ps_shape_t shape;
    ps_shape_set (&shape, (int64_t []) { 2048, 1024 }, 2, NULL);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_CONSTANT);
    init.value = 1;
    //  8 MiB in four partitions: server 0 holds 5 MiB, which the client
    //  sends as two requests in flight at once; server 1 holds 3 MiB.
    assert_int_equal (harness_clients_add_variable (&clients, "large/w", &shape, &init, 4,
                                                    (int64_t []) { 0, 300, 1024, 1500, 2048 },
                                                    (int []) { 1, 0, 1, 0 }, &err), 0);
    harness_ok (ps_client_create (clients.control, &err), &err);
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_SGD);
    opt.lr = 1;
    harness_ok (ps_client_set_optimizer (clients.control, &opt, &err), &err);
    size_t n = ps_client_variable_size (client, 0);
    float *grad = malloc (n * sizeof (float));
    float *values = malloc (n * sizeof (float));
    float *pulled = malloc (n * sizeof (float));
    for (size_t i = 0; i < n; i++)
        grad [i] = (float) (i % 3);
    const float *grads [] = { grad };
    float *outs [] = { values }, *pulls [] = { pulled };
    for (uint64_t step = 0; step < 3; step++) {
        harness_ok (ps_client_push_pull (client, step, 0, grads, outs, NULL, &err), &err);
        for (size_t i = 0; i < n; i++)
            if (values [i] != 1.0f - (float) (step + 1) * (float) (i % 3))
                fail_msg ("step %llu: value %zu is %g", (unsigned long long) step, i, values [i]);
        //  The gradient buffer the client sent is left untouched.
        for (size_t i = 0; i < n; i++)
            assert_true (grad [i] == (float) (i % 3));
    }
    harness_ok (ps_client_pull (client, pulls, &err), &err);
    assert_memory_equal (values, pulled, n * sizeof (float));
    free (grad);
    free (values);
    free (pulled);
    harness_clients_close (&clients);
}

//  A push touching two partitions whose ledgers disagree is refused whole:
//  v1 has applied steps 0..10, v2 none, so a step 2^24 + 5 is within v1's
//  window but beyond v2's, and neither may apply it.
static void
test_push_refused_whole (void **state)
{
    (void) state;
    ps_error_t err;
    ps_shape_t shape;
    ps_shape_set (&shape, (int64_t []) { 3 }, 1, NULL);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_ZEROS);
    ps_client_t *first = s_client (1, "worker:0");
    harness_clients_t both;
    s_clients (&both, 1);
    ps_client_add_variable (first, "whole/v1", &shape, &init, 1, (int64_t []) { 0, 3 }, (int []) { 0 }, &err);
    harness_clients_add_variable (&both, "whole/v1", &shape, &init, 1, (int64_t []) { 0, 3 }, (int []) { 0 }, &err);
    harness_clients_add_variable (&both, "whole/v2", &shape, &init, 1, (int64_t []) { 0, 3 }, (int []) { 0 }, &err);
    harness_ok (ps_client_create (both.control, &err), &err);
    float grad [3] = { 1, 1, 1 };
    const float *grads [] = { grad, grad };
    for (uint64_t step = 0; step <= 10; step++)
        harness_ok (ps_client_push (first, step, 0, grads, NULL, &err), &err);
    uint64_t far = (UINT64_C (1) << 24) + 5;
    assert_int_equal (ps_client_push (both.data, far, 0, grads, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "whole/v2"));
    ps_part_stats_t *stats;
    size_t count;
    harness_ok (ps_client_stats (both.control, 0, &stats, &count, &err), &err);
    for (size_t i = 0; i < count; i++) {
        if (strcmp (stats [i].var, "whole/v1") == 0)
            assert_int_equal (stats [i].updates, 11);
        if (strcmp (stats [i].var, "whole/v2") == 0)
            assert_int_equal (stats [i].updates, 0);
    }
    free (stats);
    ps_client_destroy (&first);
    harness_clients_close (&both);
}

//  After a fence at generation 7, pushes and push-pulls tagged with another
//  generation, or with none, are refused and change nothing; pushes tagged
//  7 are applied. A fence at generation 0 (which the client cannot tag) is
//  refused. The test has a server of its own, since a fenced server
//  refuses the untagged pushes of the other tests.
static void
test_push_fenced (void **state)
{
    (void) state;
    harness_server_t server;
    assert_int_equal (harness_server_start (&server, 0, NULL), 0);
    const char *endpoints [] = { server.endpoint };
    ps_error_t err;
    harness_clients_t clients;
    harness_ok (harness_clients_open (&clients, endpoints, 1, 5000, false, &err), &err);
    ps_client_t *client = clients.data;
    ps_shape_t shape;
    ps_shape_set (&shape, (int64_t []) { 4 }, 1, NULL);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_ZEROS);
    harness_clients_add_variable (&clients, "fence/v", &shape, &init, 2, (int64_t []) { 0, 2, 4 },
                                  (int []) { 0, 0 }, &err);
    harness_ok (ps_client_create (clients.control, &err), &err);
    float grad [4] = { 1, 1, 1, 1 }, values [4];
    const float *grads [] = { grad };
    float *outs [] = { values };
    //  Before any fence, untagged pushes are applied.
    harness_ok (ps_client_push (client, 1, 0, grads, NULL, &err), &err);
    assert_int_equal (ps_client_fence (clients.control, 0, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "fence: generation: 0 is out of bounds, expected at least 1"));
    harness_ok (ps_client_fence (clients.control, 7, &err), &err);
    ps_client_set_generation (client, 6);
    assert_int_equal (ps_client_push (client, 2, 0, grads, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "stale generation 6"));
    assert_int_equal (ps_client_push_pull (client, 3, 0, grads, outs, NULL, &err), PS_EINVAL);
    ps_client_set_generation (client, 0);
    assert_int_equal (ps_client_push (client, 4, 0, grads, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "no generation"));
    assert_non_null (strstr (err.msg, "fenced at generation 7"));
    assert_int_equal (ps_client_push_pull (client, 5, 0, grads, outs, NULL, &err), PS_EINVAL);
    harness_ok (ps_client_pull (client, outs, &err), &err);
    for (int i = 0; i < 4; i++)
        assert_true (values [i] == -0.01f);
    ps_client_set_generation (client, 7);
    harness_ok (ps_client_push (client, 6, 0, grads, NULL, &err), &err);
    ps_part_stats_t *stats;
    size_t count;
    harness_ok (ps_client_stats (clients.control, 0, &stats, &count, &err), &err);
    assert_int_equal (count, 2);
    for (size_t i = 0; i < count; i++)
        assert_int_equal (stats [i].updates, 2);
    free (stats);
    harness_clients_close (&clients);
    assert_int_equal (harness_server_stop (&server, SIGTERM), 0);
}

//  One round of test_nonfinite_refused: a gradient for variable var (two
//  partitions of rows [0, rows/2) and [rows/2, rows)) whose element `at`
//  is bad, pushed and push-pulled with the server's current optimizer. Both
//  are refused with the distinct code, naming the variable and the
//  partition holding the bad value; nothing changes, and the refused step
//  is still free for a good gradient.
static void
s_nonfinite_round (harness_clients_t *clients, size_t n, size_t at, float bad, uint64_t *step)
{
    ps_client_t *client = clients->data;
    ps_error_t err;
    float *grad = malloc (n * sizeof (float)), *before = malloc (n * sizeof (float));
    float *after = malloc (n * sizeof (float));
    assert_true (grad && before && after);
    for (size_t i = 0; i < n; i++)
        grad [i] = (float) (i % 7) - 3.0f;
    const float *grads [] = { grad };
    float *outs [] = { before };
    harness_ok (ps_client_pull (client, outs, &err), &err);
    ps_part_stats_t *stats;
    size_t count;
    harness_ok (ps_client_stats (clients->control, 0, &stats, &count, &err), &err);
    assert_int_equal (count, 2);
    uint64_t updates = stats [0].updates, nonfinite [2] = { stats [0].nonfinite, stats [1].nonfinite };
    free (stats);
    size_t bad_part = at < n / 2 ? 0 : 1;
    char expect [32];
    snprintf (expect, sizeof expect, "nan/w/%zu", bad_part);

    grad [at] = bad;
    assert_int_equal (ps_client_push (client, *step, 0, grads, NULL, &err), PS_ENONFINITE);
    if (!strstr (err.msg, expect) || !strstr (err.msg, "non-finite"))
        fail_msg ("message \"%s\" lacks \"%s\" or \"non-finite\"", err.msg, expect);
    outs [0] = after;
    assert_int_equal (ps_client_push_pull (client, *step, 0, grads, outs, NULL, &err), PS_ENONFINITE);
    assert_non_null (strstr (err.msg, expect));
    harness_ok (ps_client_pull (client, outs, &err), &err);
    assert_memory_equal (before, after, n * sizeof (float));
    harness_ok (ps_client_stats (clients->control, 0, &stats, &count, &err), &err);
    for (size_t i = 0; i < count; i++) {
        assert_int_equal (stats [i].updates, updates);
        assert_int_equal (stats [i].nonfinite, nonfinite [i] + (i == bad_part ? 2 : 0));
    }
    free (stats);

    //  The step the refused gradient carried is applied when it comes good.
    grad [at] = 1.0f;
    ps_push_info_t info;
    harness_ok (ps_client_push (client, *step, 0, grads, &info, &err), &err);
    assert_int_equal (info.applied, 2);
    (*step)++;
    harness_ok (ps_client_pull (client, outs, &err), &err);
    for (size_t i = 0; i < n; i++)
        if (!isfinite (after [i]))
            fail_msg ("element %zu is %g after a finite push", i, after [i]);
    free (grad);
    free (before);
    free (after);
}

//  A gradient holding NaN, +Inf or -Inf anywhere is refused whole, under
//  every optimizer, with clipping too, in small requests (applied inline)
//  and large ones (applied on the pool): one bad value would poison the
//  partition for good. A server of its own, since it changes optimizers.
static void
test_nonfinite_refused (void **state)
{
    (void) state;
    harness_server_t server;
    assert_int_equal (harness_server_start (&server, 0, (const char *[]) { "--threads", "2", NULL }), 0);
    const char *endpoints [] = { server.endpoint };
    ps_error_t err;
    static const int64_t sizes [] = { 8, 4096 };     //  rows of 64 floats: 2 KiB and 1 MiB
    static const float bads [] = { NAN, INFINITY, -INFINITY };
    uint64_t step = 0;
    for (size_t z = 0; z < 2; z++) {
        harness_clients_t clients;
        harness_ok (harness_clients_open (&clients, endpoints, 1, 5000, false, &err), &err);
        ps_shape_t shape;
        ps_shape_set (&shape, (int64_t []) { sizes [z], 64 }, 2, NULL);
        ps_init_t init;
        ps_init_default (&init, PS_INIT_CONSTANT);
        init.value = 0.5;
        harness_clients_add_variable (&clients, "nan/w", &shape, &init, 2,
                                      (int64_t []) { 0, sizes [z] / 2, sizes [z] }, (int []) { 0, 0 },
                                      &err);
        harness_ok (ps_client_create (clients.control, &err), &err);
        size_t n = ps_client_variable_size (clients.data, 0);
        for (int kind = PS_OPT_SGD; kind <= PS_OPT_ADAM; kind++)
            for (int clip = 0; clip < 3; clip++) {
                ps_opt_config_t opt;
                ps_opt_config_default (&opt, (ps_opt_kind_t) kind);
                opt.clip_value = clip == 1 ? 1.0 : 0;
                opt.clip_norm = clip == 2 ? 1.0 : 0;
                harness_ok (ps_client_set_optimizer (clients.control, &opt, &err), &err);
                float bad = bads [(size_t) (kind + clip) % 3];
                //  In the first partition, then at the very end of the second.
                s_nonfinite_round (&clients, n, (size_t) (kind + clip) * 5, bad, &step);
                s_nonfinite_round (&clients, n, n - 1, bad, &step);
            }
        harness_clients_close (&clients);
        //  The next size starts from a fresh variable.
        assert_int_equal (harness_server_stop (&server, SIGTERM), 0);
        if (z == 0)
            assert_int_equal (harness_server_start (&server, 0, (const char *[]) { "--threads", "2", NULL }), 0);
    }
}

//  A partition too large for the machine is an error reply, not a crash.
static void
test_huge_create_refused (void **state)
{
    (void) state;
    ps_error_t err;
    ps_shape_t shape;
    ps_shape_set (&shape, (int64_t []) { INT64_C (1) << 20, INT64_C (1) << 20 }, 2, NULL);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_ZEROS);
    ps_client_t *client = s_client (1, "chief:0");
    ps_client_add_variable (client, "huge/w", &shape, &init, 1,
                            (int64_t []) { 0, INT64_C (1) << 20 }, (int []) { 0 }, &err);
    assert_int_equal (ps_client_create (client, &err), PS_ETOOBIG);
    assert_non_null (strstr (err.msg, "huge/w"));
    harness_ok (ps_client_ping (client, 0, &err), &err);
    ps_client_destroy (&client);
}

//  A server that answers with an error reply naming the code "ok" (or any
//  code) is reporting an error: the client must not take it for success,
//  even from a server that holds the key of the one it asked (ps:0).
static void *
s_hostile_server (void *arg)
{
    void *router = arg;
    zmq_pollitem_t item = { router, 0, ZMQ_POLLIN, 0 };
    if (zmq_poll (&item, 1, 5000) != 1)
        return NULL;
    ps_msg_t *msg = ps_msg_new ();
    ps_error_t err;
    if (ps_msg_recv (msg, router, true, &err) == 0 && ps_msg_decode (msg, &err) == 0) {
        ps_proto_t reply = { .type = PS_PROTO_ERROR, .id = ps_msg_id (msg),
                             .error = { "ok", "all is well, honestly" } };
        ps_writer_t writer;
        ps_writer_init (&writer);
        ps_writer_encode (&writer, &reply);
        zmq_msg_t *envelope;
        size_t nenvelope = ps_msg_envelope (msg, &envelope);
        ps_writer_send (&writer, router, envelope, nenvelope, NULL, 0, &err);
        ps_writer_fini (&writer);
    }
    ps_msg_destroy (&msg);
    return NULL;
}

static void
test_hostile_error_reply (void **state)
{
    (void) state;
    ps_error_t err;
    void *router = zmq_socket (ps_curve_context (), ZMQ_ROUTER);
    assert_non_null (router);
    harness_ok (ps_curve_server (harness_curve ("ps:0"), router, &err), &err);
    assert_int_equal (zmq_bind (router, "tcp://127.0.0.1:*"), 0);
    char endpoint [256];
    size_t len = sizeof endpoint;
    assert_int_equal (zmq_getsockopt (router, ZMQ_LAST_ENDPOINT, endpoint, &len), 0);
    pthread_t thread;
    assert_int_equal (pthread_create (&thread, NULL, s_hostile_server, router), 0);
    const char *endpoints [] = { endpoint };
    ps_client_t *client = ps_client_new (endpoints, 1, 5000, harness_curve ("worker:0"), &err);
    assert_non_null (client);
    ps_shape_t shape;
    ps_shape_set (&shape, (int64_t []) { 4 }, 1, NULL);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_ZEROS);
    ps_client_add_variable (client, "hostile/w", &shape, &init, 1, (int64_t []) { 0, 4 }, (int []) { 0 }, &err);
    float values [4];
    float *outs [] = { values };
    assert_int_equal (ps_client_pull (client, outs, &err), PS_EREMOTE);
    assert_non_null (strstr (err.msg, "all is well"));
    pthread_join (thread, NULL);
    ps_client_destroy (&client);
    assert_int_equal (zmq_close (router), 0);
}

//  A client whose layout disagrees with the server gets clear errors.
static void
test_layout_errors (void **state)
{
    (void) state;
    ps_error_t err;
    ps_init_t init;
    ps_init_default (&init, PS_INIT_ZEROS);
    ps_shape_t right, wrong;
    ps_shape_set (&right, (int64_t []) { 4, 2 }, 2, NULL);
    ps_shape_set (&wrong, (int64_t []) { 4, 3 }, 2, NULL);

    harness_clients_t good;
    s_clients (&good, 1);
    harness_clients_add_variable (&good, "layout/w", &right, &init, 1, (int64_t []) { 0, 4 }, (int []) { 0 }, &err);
    harness_ok (ps_client_create (good.control, &err), &err);

    harness_clients_t bad;
    s_clients (&bad, 1);
    harness_clients_add_variable (&bad, "layout/w", &wrong, &init, 1, (int64_t []) { 0, 4 }, (int []) { 0 }, &err);
    assert_int_equal (ps_client_create (bad.control, &err), PS_EEXIST);
    assert_non_null (strstr (err.msg, "layout/w"));
    float grad [12] = { 0 };
    const float *grads [] = { grad };
    assert_int_equal (ps_client_push (bad.data, 0, 0, grads, NULL, &err), PS_ESHAPE);
    assert_non_null (strstr (err.msg, "does not match"));
    assert_non_null (strstr (err.msg, "[4,3]"));

    ps_client_t *missing = s_client (1, "worker:0");
    ps_client_add_variable (missing, "layout/none", &right, &init, 1, (int64_t []) { 0, 4 }, (int []) { 0 }, &err);
    float values [8];
    float *outs [] = { values };
    assert_int_equal (ps_client_pull (missing, outs, &err), PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "layout/none"));

    //  Invalid optimizer settings are refused before anything is sent.
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    opt.beta1 = 1.5;
    assert_int_equal (ps_client_set_optimizer (good.control, &opt, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "beta1"));
    //  The server still serves the good client.
    harness_ok (ps_client_pull (good.data, outs, &err), &err);
    harness_clients_close (&good);
    harness_clients_close (&bad);
    ps_client_destroy (&missing);
}

//  A server that is not there makes calls time out with its name.
static void
test_timeout_names_server (void **state)
{
    (void) state;
    ps_error_t err;
    const char *endpoints [] = { "tcp://127.0.0.1:9" };
    ps_client_t *client = ps_client_new (endpoints, 1, 200, harness_curve ("worker:0"), &err);
    assert_non_null (client);
    assert_int_equal (ps_client_ping (client, 0, &err), PS_ETIMEDOUT);
    assert_non_null (strstr (err.msg, "tcp://127.0.0.1:9"));
    ps_client_destroy (&client);
}

//  A server with no work uses no CPU: once the idle heap release after the
//  last request is done, it sleeps until a request comes. It is measured
//  beside a busy loop that gets 2 s of CPU: a server that spins uses about
//  as much, one that wakes every millisecond several ticks; an idle one
//  uses nothing, with room for a tick or two of work a loaded machine may
//  have delayed into the window.
static void
test_idle_uses_no_cpu (void **state)
{
    (void) state;
    ps_client_t *client = s_client (2, "worker:0");
    ps_error_t err;
    harness_ok (ps_client_ping (client, 0, &err), &err);
    ps_client_destroy (&client);
    long used, spin;
    double wall_ms;
    if (harness_cpu_beside_spinner (s_servers [0].pid, 2 * sysconf (_SC_CLK_TCK), &used, &spin,
                                    &wall_ms))
        fail_msg ("cannot measure the server's CPU time beside a busy loop");
    print_message ("    an idle ps-server used %ld CPU ticks while a busy loop used %ld "
                   "(%.0f ms)\n", used, spin, wall_ms);
    if (used * 50 > spin)
        fail_msg ("an idle ps-server used %ld CPU ticks while a busy loop beside it used %ld",
                  used, spin);
}

//  SIGTERM ends the server cleanly with status 0; so does a shutdown request.
static void
test_clean_exit (void **state)
{
    (void) state;
    assert_int_equal (harness_server_stop (&s_servers [0], SIGTERM), 0);
    ps_client_t *client = s_client (2, "chief:0");
    ps_error_t err;
    harness_ok (ps_client_shutdown (client, 1, &err), &err);
    ps_client_destroy (&client);
    assert_int_equal (harness_server_stop (&s_servers [1], 0), 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_create_matches_local_fill),
        cmocka_unit_test (test_push_duplicate_push_pull),
        cmocka_unit_test (test_push_pull_large),
        cmocka_unit_test (test_layout_errors),
        cmocka_unit_test (test_push_refused_whole),
        cmocka_unit_test (test_push_rounds),
        cmocka_unit_test (test_push_fenced),
        cmocka_unit_test (test_nonfinite_refused),
        cmocka_unit_test (test_huge_create_refused),
        cmocka_unit_test (test_hostile_error_reply),
        cmocka_unit_test (test_timeout_names_server),
        cmocka_unit_test (test_idle_uses_no_cpu),
        cmocka_unit_test (test_clean_exit),
    };
    return harness_finish (cmocka_run_group_tests (tests, s_setup, s_teardown));
}
