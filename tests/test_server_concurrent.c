//  Asynchronous pushes from several client processes at once. Each process
//  pushes its own steps (known integer gradients, SGD with lr = 1) to two
//  servers, both to a large variable (applied on the servers' thread pools)
//  and a small one (applied inline). Integer-valued floats add exactly in
//  any order, so the final values must equal the exact expected sum: no
//  update may be lost or torn, whatever the interleaving. The servers are
//  secured: the test creates as chief:0, and client c pushes as worker:c.
//  Then sync mode's rounds from two clients at once, each push applied
//  whole or refused whole on every server.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ps_client.h"

#define S_CLIENTS   4
#define S_STEPS     10          //  per client
#define S_BIG_ROWS  4000        //  x 300 floats: 4.8 MB, goes to the pool
#define S_BIG_COLS  300

static harness_server_t s_servers [2];

//  The rows of "big" that its partitions 0, 1 and 2 begin at, and its end;
//  the elements of "small" likewise.
static const int64_t s_big_split [] = { 0, 1600, 2800, S_BIG_ROWS };
static const int64_t s_small_split [] = { 0, 5, 10 };

static const char *s_endpoints [] = { s_servers [0].endpoint, s_servers [1].endpoint };

//  Declare the variables "big" and "small" on client.
static int
s_declare (ps_client_t *client, ps_error_t *err)
{
    ps_shape_t big, small;
    ps_shape_set (&big, (int64_t []) { S_BIG_ROWS, S_BIG_COLS }, 2, NULL);
    ps_shape_set (&small, (int64_t []) { 10 }, 1, NULL);
    ps_init_t zeros;
    ps_init_default (&zeros, PS_INIT_ZEROS);
    if (ps_client_add_variable (client, "big", &big, &zeros, 3,
                                s_big_split, (int []) { 0, 1, 0 }, err) < 0
    ||  ps_client_add_variable (client, "small", &small, &zeros, 2,
                                s_small_split, (int []) { 1, 0 }, err) < 0)
        return err->code;
    return 0;
}

//  Start both servers with threads apply threads each, open the test's
//  clients (chief:0) on them, create the variables, and set SGD with
//  lr = 1.
static void
s_start (harness_clients_t *clients, const char *threads)
{
    for (int i = 0; i < 2; i++)
        assert_int_equal (harness_server_start (&s_servers [i], i,
                                                (const char *[]) { "--threads", threads, NULL }),
                          0);
    ps_error_t err;
    assert_int_equal (harness_clients_open (clients, s_endpoints, 2, 10000, false, &err), 0);
    assert_int_equal (s_declare (clients->control, &err), 0);
    assert_int_equal (s_declare (clients->data, &err), 0);
    assert_int_equal (ps_client_create (clients->control, &err), 0);
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_SGD);
    opt.lr = 1;
    assert_int_equal (ps_client_set_optimizer (clients->control, &opt, &err), 0);
}

//  Run n client processes at once, client c as worker:c running fn (c),
//  and wait until each has exited 0. The children inherit their
//  identities: one made after the fork would start its authenticator in
//  the ZeroMQ context that this process's threads serve, which a child
//  does not have.
static void
s_run_clients (int n, int (*fn) (int))
{
    for (int c = 0; c < n; c++) {
        char task [16];
        snprintf (task, sizeof task, "worker:%d", c);
        harness_curve (task);
    }
    pid_t pids [8];
    assert_true (n <= 8);
    for (int c = 0; c < n; c++) {
        pids [c] = fork ();
        assert_true (pids [c] >= 0);
        if (pids [c] == 0)
            _exit (fn (c));
    }
    for (int c = 0; c < n; c++) {
        int status;
        assert_int_equal (waitpid (pids [c], &status, 0), pids [c]);
        assert_true (WIFEXITED (status));
        assert_int_equal (WEXITSTATUS (status), 0);
    }
}

//  The gradient of client c at its k-th step: small integers, different
//  per element, client and step.
static float
s_grad (int c, int k, size_t i)
{
    return (float) ((int) ((size_t) c * 7 + (size_t) k * 3 + i) % 5 - 2);
}

static int
s_pusher (int c)
{
    char task [16];
    snprintf (task, sizeof task, "worker:%d", c);
    ps_error_t err;
    ps_client_t *client = ps_client_new (s_endpoints, 2, 10000, harness_curve (task), &err);
    if (!client || s_declare (client, &err)) {
        fprintf (stderr, "client %d: %s\n", c, err.msg);
        return 1;
    }
    size_t nbig = ps_client_variable_size (client, 0);
    float *big = malloc (nbig * sizeof (float));
    float small [10];
    for (int k = 0; k < S_STEPS; k++) {
        for (size_t i = 0; i < nbig; i++)
            big [i] = s_grad (c, k, i);
        for (size_t i = 0; i < 10; i++)
            small [i] = s_grad (c, k, i);
        const float *grads [] = { big, small };
        //  Step ids are dense and distinct across clients.
        uint64_t step = (uint64_t) k * S_CLIENTS + (uint64_t) c;
        ps_push_info_t info;
        if (ps_client_push (client, step, (uint32_t) c, grads, &info, &err) || info.applied != 5) {
            fprintf (stderr, "client %d step %d: %s (applied %zu)\n", c, k, err.msg, info.applied);
            return 1;
        }
    }
    free (big);
    ps_client_destroy (&client);
    return 0;
}

static void
test_concurrent_pushes_sum_exactly (void **state)
{
    (void) state;
    ps_error_t err;
    harness_clients_t clients;
    s_start (&clients, "2");
    s_run_clients (S_CLIENTS, s_pusher);
    size_t nbig = ps_client_variable_size (clients.data, 0);
    float *big = malloc (nbig * sizeof (float));
    float small [10];
    float *values [] = { big, small };
    assert_int_equal (ps_client_pull (clients.data, values, &err), 0);
    for (size_t i = 0; i < nbig; i++) {
        double expect = 0;
        for (int c = 0; c < S_CLIENTS; c++)
            for (int k = 0; k < S_STEPS; k++)
                expect -= s_grad (c, k, i);
        if (big [i] != (float) expect)
            fail_msg ("big[%zu] = %g, expected %g", i, big [i], expect);
    }
    for (size_t i = 0; i < 10; i++) {
        double expect = 0;
        for (int c = 0; c < S_CLIENTS; c++)
            for (int k = 0; k < S_STEPS; k++)
                expect -= s_grad (c, k, i);
        assert_true (small [i] == (float) expect);
    }
    //  Every partition applied every step once and saw no duplicate.
    for (int s = 0; s < 2; s++) {
        ps_part_stats_t *stats;
        size_t count;
        assert_int_equal (ps_client_stats (clients.control, s, &stats, &count, &err), 0);
        assert_true (count >= 2);
        for (size_t i = 0; i < count; i++) {
            assert_int_equal (stats [i].updates, S_CLIENTS * S_STEPS);
            assert_int_equal (stats [i].duplicates, 0);
        }
        free (stats);
    }
    free (big);
    harness_clients_close (&clients);
    for (int i = 0; i < 2; i++)
        assert_int_equal (harness_server_stop (&s_servers [i], SIGTERM), 0);
}

//  Client c pushes S_ROUND_PUSHES one-step rounds of gradient 1, its k-th
//  round numbered S_ROUND_CLIENTS k + c + 1, so that the clients' rounds
//  interleave
//  and a server often takes one's round after the other's later one:
//  such a push is refused. Refused or not, each push is whole on each
//  server. Exits 0, or 1 when a server gave an answer other than success
//  or a refusal of the round.
#define S_ROUND_PUSHES  300
#define S_ROUND_CLIENTS 2

static int
s_round_pusher (int c)
{
    char task [16];
    snprintf (task, sizeof task, "worker:%d", c);
    ps_error_t err;
    ps_client_t *client = ps_client_new (s_endpoints, 2, 10000, harness_curve (task), &err);
    if (!client || s_declare (client, &err)) {
        fprintf (stderr, "client %d: %s\n", c, err.msg);
        return 1;
    }
    size_t nbig = ps_client_variable_size (client, 0);
    float *big = malloc (nbig * sizeof (float));
    float small [10];
    for (size_t i = 0; i < nbig; i++)
        big [i] = 1;
    for (size_t i = 0; i < 10; i++)
        small [i] = 1;
    const float *grads [] = { big, small };
    for (int k = 0; k < S_ROUND_PUSHES; k++) {
        uint64_t round = S_ROUND_CLIENTS * (uint64_t) k + (uint64_t) c + 1;
        ps_push_info_t info;
        int rc = ps_client_push_round (client, round, (uint32_t) c, round, 1, grads, &info, &err);
        if (rc && !(rc == PS_EINVAL && strstr (err.msg, "round"))) {
            fprintf (stderr, "client %d round %llu: %s\n", c, (unsigned long long) round,
                     err.msg);
            return 1;
        }
    }
    free (big);
    ps_client_destroy (&client);
    return 0;
}

//  Sync mode's pushes from two clients at once, on the servers' pools:
//  a round's check against the partition's open and last applied rounds
//  and its addition must be one step for the whole push. A push refused
//  by one partition after another added it would leave the server's
//  partitions at different rounds, different values and different
//  ledgers (and the next rounds refused on some partitions only).
static void
test_concurrent_rounds_whole (void **state)
{
    (void) state;
    ps_error_t err;
    harness_clients_t clients;
    s_start (&clients, "4");
    s_run_clients (S_ROUND_CLIENTS, s_round_pusher);
    //  On each server every partition applied the same rounds: the same
    //  number of updates, as many steps in its ledger, and every value
    //  minus that count (gradient 1, SGD with lr = 1).
    size_t nbig = ps_client_variable_size (clients.data, 0);
    float *big = malloc (nbig * sizeof (float));
    float small [10];
    float *values [] = { big, small };
    assert_int_equal (ps_client_pull (clients.data, values, &err), 0);
    uint64_t total = 0;
    for (int s = 0; s < 2; s++) {
        ps_part_stats_t *stats;
        size_t count;
        assert_int_equal (ps_client_stats (clients.control, s, &stats, &count, &err), 0);
        assert_int_equal (count, s == 0 ? 3 : 2);
        for (size_t i = 0; i < count; i++) {
            if (stats [i].updates != stats [0].updates || stats [i].recorded != stats [0].updates)
                fail_msg ("ps:%d: %s/%u applied %llu rounds (%llu steps in its ledger), %s/%u "
                          "%llu: a push was applied on some partitions only", s, stats [i].var,
                          stats [i].part, (unsigned long long) stats [i].updates,
                          (unsigned long long) stats [i].recorded, stats [0].var,
                          stats [0].part, (unsigned long long) stats [0].updates);
            //  The rows of big, or the elements of small, the partition holds.
            bool is_big = strcmp (stats [i].var, "big") == 0;
            const int64_t *split = is_big ? s_big_split : s_small_split;
            size_t row = is_big ? S_BIG_COLS : 1;
            size_t from = (size_t) split [stats [i].part] * row;
            size_t to = (size_t) split [stats [i].part + 1] * row;
            float *v = is_big ? big : small;
            for (size_t e = from; e < to; e++)
                if (v [e] != -(float) stats [0].updates)
                    fail_msg ("ps:%d: %s[%zu] = %g after %llu rounds of gradient 1", s,
                              stats [i].var, e, v [e], (unsigned long long) stats [0].updates);
        }
        total += stats [0].updates;
        free (stats);
    }
    //  Some rounds went through on each server.
    assert_true (total > 0);
    print_message ("    rounds applied on the 2 servers together: %llu of 2 x %d pushed\n",
                   (unsigned long long) total, S_ROUND_CLIENTS * S_ROUND_PUSHES);
    free (big);
    harness_clients_close (&clients);
    for (int i = 0; i < 2; i++)
        assert_int_equal (harness_server_stop (&s_servers [i], SIGTERM), 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_concurrent_pushes_sum_exactly),
        cmocka_unit_test (test_concurrent_rounds_whole),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
