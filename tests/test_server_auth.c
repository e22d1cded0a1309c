//  Who may ask what of a secured ps-server, on a real process and loopback
//  TCP. A peer without a key the cluster trusts gets no answer at all,
//  whether it speaks no CURVE (a plain DEALER) or holds a key pair of its
//  own (zcert_new): its ping, pull and shutdown go unanswered, and the
//  server serves a trusted client on. A trusted key is trusted for its
//  own task only: worker:0 is refused "forbidden" for every control
//  request (create, set_optimizer, fence, snapshot, restore, shutdown),
//  chief:0 for pushes and push-pulls, evaluator:0 for pushes and
//  push-pulls but not pulls; nothing a refused request asked for happens,
//  and the server stays up. Each key's refusals are logged once, not once
//  per request. A server started with --insecure serves a plain client.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <czmq.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zmq.h>

#include "harness.h"
#include "harness_case.h"
#include "harness_wire.h"
#include "ps_client.h"
#include "ps_msg.h"

#define S_TIMEOUT_MS    5000    //  a reply that should come comes within this
#define S_SILENCE_MS    1000    //  how long "no reply at all" is waited for
#define S_ROWS          4       //  the variable auth/w: [4, 2], ones, SGD lr 1
#define S_COLS          2
#define S_N             (S_ROWS * S_COLS)

static harness_server_t s_server;       //  ps:0, secured, with a checkpoint root
static char s_root [64];
static harness_clients_t s_clients;     //  chief:0 and worker:0
static void *s_ctx;                     //  the raw sockets'
static uint64_t s_step;                 //  the next step to push
static float s_values [S_N];            //  what auth/w holds now

//  Declare auth/w on client.
static void
s_declare (ps_client_t *client)
{
    ps_shape_t shape;
    ps_shape_set (&shape, (int64_t []) { S_ROWS, S_COLS }, 2, NULL);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_CONSTANT);
    init.value = 1;
    ps_error_t err;
    if (ps_client_add_variable (client, "auth/w", &shape, &init, 1, (int64_t []) { 0, S_ROWS },
                                (int []) { 0 }, &err) != 0)
        fail_msg ("auth/w: %s", err.msg);
}

//  A client of the server as task, holding auth/w.
static ps_client_t *
s_client (const char *task)
{
    const char *endpoints [] = { s_server.endpoint };
    ps_error_t err;
    ps_client_t *client = ps_client_new (endpoints, 1, S_TIMEOUT_MS, harness_curve (task), &err);
    if (!client)
        fail_msg ("client as %s: %s", task, err.msg);
    s_declare (client);
    return client;
}

static int
s_setup (void **state)
{
    (void) state;
    harness_tmpdir (s_root, sizeof s_root);
    if (harness_server_start (&s_server, 0, (const char *[]) { "--threads", "2",
                                                               "--checkpoint-root", s_root,
                                                               NULL }))
        return -1;
    const char *endpoints [] = { s_server.endpoint };
    ps_error_t err;
    if (harness_clients_open (&s_clients, endpoints, 1, S_TIMEOUT_MS, false, &err)) {
        fprintf (stderr, "clients: %s\n", err.msg);
        return -1;
    }
    s_declare (s_clients.control);
    s_declare (s_clients.data);
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_SGD);
    opt.lr = 1;
    if (ps_client_create (s_clients.control, &err)
    ||  ps_client_set_optimizer (s_clients.control, &opt, &err)) {
        fprintf (stderr, "setup: %s\n", err.msg);
        return -1;
    }
    for (int i = 0; i < S_N; i++)
        s_values [i] = 1;
    s_ctx = zmq_ctx_new ();
    return s_ctx ? 0 : -1;
}

static int
s_teardown (void **state)
{
    (void) state;
    harness_clients_close (&s_clients);
    if (s_ctx)
        zmq_ctx_term (s_ctx);
    if (s_server.pid > 0)
        harness_server_stop (&s_server, SIGKILL);
    harness_rmtree (s_root);
    return 0;
}

//  auth/w, pulled as worker:0, still holds s_values.
static void
s_expect_values (void)
{
    float values [S_N];
    float *outs [] = { values };
    ps_error_t err;
    harness_ok (ps_client_pull (s_clients.data, outs, &err), &err);
    assert_memory_equal (values, s_values, sizeof values);
}

//  Push a gradient of ones as worker:0 (lr 1: every value drops by 1).
static void
s_good_push (void)
{
    float grad [S_N];
    for (int i = 0; i < S_N; i++)
        grad [i] = 1;
    const float *grads [] = { grad };
    ps_push_info_t info;
    ps_error_t err;
    harness_ok (ps_client_push (s_clients.data, s_step++, 0, grads, &info, &err), &err);
    assert_int_equal (info.applied, 1);
    for (int i = 0; i < S_N; i++)
        s_values [i] -= 1;
}

//  A request refused as forbidden: the code, and a message naming the
//  request and the task that asked.
static void
s_forbidden (int rc, const ps_error_t *err, const char *type, const char *task)
{
    if (rc != PS_EPERM || !strstr (err->msg, type) || !strstr (err->msg, task))
        fail_msg ("%s as %s: %s: %s, expected forbidden naming both", type, task,
                  ps_error_name (rc), rc ? err->msg : "");
}

//  ---------------------------------------------------------------------
//  Peers without a trusted key

//  Send a ping, a pull of auth/w and a shutdown on dealer; returns how many
//  replies came within S_SILENCE_MS.
static int
s_three_requests (void *dealer)
{
    static uint64_t id = 1;
    ps_proto_partref_t part = { "auth/w", 0 };
    harness_send (dealer, NULL, 0, &(ps_proto_t) { .type = PS_PROTO_PING, .id = id++ });
    harness_send (dealer, NULL, 0, &(ps_proto_t) { .type = PS_PROTO_PULL, .id = id++,
                                                   .pull.parts = { 1, &part } });
    harness_send (dealer, NULL, 0, &(ps_proto_t) { .type = PS_PROTO_SHUTDOWN, .id = id++ });
    ps_error_t err;
    int replies = 0;
    ps_msg_t *reply = ps_msg_new ();
    zmq_pollitem_t item = { dealer, 0, ZMQ_POLLIN, 0 };
    while (replies < 3 && zmq_poll (&item, 1, S_SILENCE_MS) == 1) {
        harness_ok (ps_msg_recv (reply, dealer, false, &err), &err);
        replies++;
    }
    ps_msg_destroy (&reply);
    return replies;
}

//  A DEALER of s_ctx with linger 0, not connected.
static void *
s_dealer (void)
{
    void *dealer = zmq_socket (s_ctx, ZMQ_DEALER);
    assert_non_null (dealer);
    int linger = 0;
    assert_int_equal (zmq_setsockopt (dealer, ZMQ_LINGER, &linger, sizeof linger), 0);
    return dealer;
}

//  A DEALER that speaks CURVE to ps:0's real key with a key pair of its
//  own, which the cluster never issued.
static void *
s_stranger (void)
{
    void *dealer = s_dealer ();
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/public/ps-0.cert", harness_keys ());
    zcert_t *server = zcert_load (path);
    zcert_t *own = zcert_new ();
    assert_non_null (server);
    assert_non_null (own);
    assert_int_equal (zmq_setsockopt (dealer, ZMQ_CURVE_SERVERKEY, zcert_public_txt (server), 40), 0);
    assert_int_equal (zmq_setsockopt (dealer, ZMQ_CURVE_PUBLICKEY, zcert_public_txt (own), 40), 0);
    assert_int_equal (zmq_setsockopt (dealer, ZMQ_CURVE_SECRETKEY, zcert_secret_txt (own), 40), 0);
    zcert_destroy (&server);
    zcert_destroy (&own);
    return dealer;
}

//  The same three requests from a trusted chief:0 get their three replies
//  (the shutdown aside, which is last and would end the server: a raw
//  chief asks ping, pull and shutdown of a server of its own below); from
//  a plain DEALER and from a stranger's key, nothing at all comes back,
//  and the server serves on.
static void
test_strangers_unanswered (void **state)
{
    (void) state;
    void *plain = s_dealer ();
    assert_int_equal (zmq_connect (plain, s_server.endpoint), 0);
    assert_int_equal (s_three_requests (plain), 0);
    void *stranger = s_stranger ();
    assert_int_equal (zmq_connect (stranger, s_server.endpoint), 0);
    assert_int_equal (s_three_requests (stranger), 0);
    assert_int_equal (zmq_close (plain), 0);
    assert_int_equal (zmq_close (stranger), 0);
    assert_true (harness_server_alive (&s_server));
    s_expect_values ();
    ps_error_t err;
    harness_ok (ps_client_ping (s_clients.data, 0, &err), &err);

    //  The raw requests themselves are right: a server of its own answers
    //  all three to chief:0 (a pull is forbidden to chief:0, which is an
    //  answer too), and the shutdown ends it.
    harness_server_t own;
    assert_int_equal (harness_server_start (&own, 1, NULL), 0);
    void *chief = s_dealer ();
    harness_ok (ps_curve_client (harness_curve ("chief:0"), chief, "ps:1", &err), &err);
    assert_int_equal (zmq_connect (chief, own.endpoint), 0);
    assert_int_equal (s_three_requests (chief), 3);
    assert_int_equal (zmq_close (chief), 0);
    assert_int_equal (harness_server_stop (&own, 0), 0);
}

//  ---------------------------------------------------------------------
//  Trusted keys, each for its own task

//  worker:0 may not ask a single control request, and none of them has
//  any effect: no partition is created, the optimizer stays, the server is
//  not fenced, no snapshot is written, nothing is restored, and it runs on.
static void
test_worker_refused_control (void **state)
{
    (void) state;
    ps_error_t err;
    //  A good snapshot to restore from, taken by the coordinator.
    ps_snap_file_t *files;
    size_t nfiles;
    harness_ok (ps_client_snapshot (s_clients.control, "ckpt-good", &files, &nfiles, &err), &err);
    free (files);
    s_good_push ();

    ps_client_t *worker = s_client ("worker:0");
    ps_shape_t shape;
    ps_shape_set (&shape, (int64_t []) { 3 }, 1, NULL);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_ZEROS);
    assert_int_equal (ps_client_add_variable (worker, "auth/new", &shape, &init, 1,
                                              (int64_t []) { 0, 3 }, (int []) { 0 }, &err), 1);
    s_forbidden (ps_client_create (worker, &err), &err, "create", "worker:0");
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_SGD);
    opt.lr = 0.5;
    s_forbidden (ps_client_set_optimizer (worker, &opt, &err), &err, "set_optimizer", "worker:0");
    s_forbidden (ps_client_fence (worker, 7, &err), &err, "fence", "worker:0");
    ps_snap_file_t *none = NULL;
    size_t nnone = 0;
    s_forbidden (ps_client_snapshot (worker, "ckpt-worker", &none, &nnone, &err), &err,
                 "snapshot", "worker:0");
    free (none);
    s_forbidden (ps_client_restore (worker, "ckpt-good", &err), &err, "restore", "worker:0");
    s_forbidden (ps_client_shutdown (worker, 0, &err), &err, "shutdown", "worker:0");
    ps_client_destroy (&worker);

    assert_true (harness_server_alive (&s_server));
    //  Not restored: the push after the snapshot is still there.
    s_expect_values ();
    //  Not created.
    ps_client_t *reader = s_client ("worker:1");
    assert_int_equal (ps_client_add_variable (reader, "auth/new", &shape, &init, 1,
                                              (int64_t []) { 0, 3 }, (int []) { 0 }, &err), 1);
    float values [S_N], fresh [3];
    float *outs [] = { values, fresh };
    assert_int_equal (ps_client_pull (reader, outs, &err), PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "auth/new"));
    ps_client_destroy (&reader);
    //  Not fenced (an untagged push is applied), and still at lr 1.
    s_good_push ();
    s_expect_values ();
    //  No snapshot written.
    char path [128];
    struct stat st;
    snprintf (path, sizeof path, "%s/ckpt-worker", s_root);
    assert_int_equal (stat (path, &st), -1);
}

//  chief:0 may not push; evaluator:0 may pull, but not push. Nothing a
//  refused push carried is applied.
static void
test_data_roles (void **state)
{
    (void) state;
    float grad [S_N], values [S_N];
    for (int i = 0; i < S_N; i++)
        grad [i] = 100;
    const float *grads [] = { grad };
    float *outs [] = { values };
    ps_error_t err;
    const char *refused [] = { "chief:0", "evaluator:0" };
    for (int r = 0; r < 2; r++) {
        ps_client_t *client = s_client (refused [r]);
        s_forbidden (ps_client_push (client, s_step, 0, grads, NULL, &err), &err, "push",
                     refused [r]);
        s_forbidden (ps_client_push_pull (client, s_step, 0, grads, outs, NULL, &err), &err,
                     "push_pull", refused [r]);
        ps_client_destroy (&client);
    }
    ps_client_t *evaluator = s_client ("evaluator:0");
    harness_ok (ps_client_pull (evaluator, outs, &err), &err);
    assert_memory_equal (values, s_values, sizeof values);
    ps_client_destroy (&evaluator);
    //  The step the refused pushes carried is still free.
    s_good_push ();
    s_expect_values ();
}

//  How many lines of the server's log hold both texts.
static int
s_log_lines (const char *first, const char *second)
{
    FILE *file = fopen (s_server.log, "r");
    assert_non_null (file);
    char line [2048];
    int count = 0;
    while (fgets (line, sizeof line, file))
        count += strstr (line, first) && strstr (line, second);
    fclose (file);
    return count;
}

//  More refusals for each key, on new connections too: still one line per
//  key in the log.
static void
test_refusals_logged_once (void **state)
{
    (void) state;
    float grad [S_N] = { 0 };
    const float *grads [] = { grad };
    ps_error_t err;
    for (int round = 0; round < 2; round++) {
        ps_client_t *worker = s_client ("worker:0");
        ps_client_t *chief = s_client ("chief:0");
        ps_client_t *evaluator = s_client ("evaluator:0");
        for (int i = 0; i < 3; i++) {
            assert_int_equal (ps_client_fence (worker, 9, &err), PS_EPERM);
            assert_int_equal (ps_client_push (chief, s_step, 0, grads, NULL, &err), PS_EPERM);
            assert_int_equal (ps_client_push (evaluator, s_step, 0, grads, NULL, &err), PS_EPERM);
        }
        ps_client_destroy (&worker);
        ps_client_destroy (&chief);
        ps_client_destroy (&evaluator);
    }
    const char *tasks [] = { "not worker:0", "not chief:0", "not evaluator:0" };
    for (int t = 0; t < 3; t++) {
        int lines = s_log_lines ("refused", tasks [t]);
        if (lines != 1) {
            harness_print_log (s_server.log);
            fail_msg ("%d log lines of refusals \"%s\", expected 1", lines, tasks [t]);
        }
    }
    assert_true (harness_server_alive (&s_server));
}

//  The one unsecured case: a server started with --insecure serves a
//  client without keys, and says at start that it is unprotected.
static void
test_insecure_serves_plain (void **state)
{
    (void) state;
    harness_server_t server;
    assert_int_equal (harness_server_start (&server, 1, (const char *[]) { "--insecure", NULL }),
                      0);
    assert_true (harness_file_contains (server.log, "--insecure"));
    const char *endpoints [] = { server.endpoint };
    harness_clients_t clients;
    ps_error_t err;
    harness_ok (harness_clients_open (&clients, endpoints, 1, S_TIMEOUT_MS, true, &err), &err);
    s_declare (clients.control);
    s_declare (clients.data);
    harness_ok (ps_client_create (clients.control, &err), &err);
    float grad [S_N], values [S_N];
    for (int i = 0; i < S_N; i++)
        grad [i] = 2;
    const float *grads [] = { grad };
    float *outs [] = { values };
    ps_push_info_t info;
    harness_ok (ps_client_push_pull (clients.data, 0, 0, grads, outs, &info, &err), &err);
    assert_int_equal (info.applied, 1);
    for (int i = 0; i < S_N; i++)
        assert_true (values [i] < 1.0f);
    harness_ok (ps_client_shutdown (clients.control, 0, &err), &err);
    harness_clients_close (&clients);
    assert_int_equal (harness_server_stop (&server, 0), 0);
}

//  After all of it, only chief:0's shutdown ends the server, with status 0.
static void
test_chief_shutdown (void **state)
{
    (void) state;
    assert_true (harness_server_alive (&s_server));
    ps_error_t err;
    harness_ok (ps_client_shutdown (s_clients.control, 0, &err), &err);
    assert_int_equal (harness_server_stop (&s_server, 0), 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_strangers_unanswered),
        cmocka_unit_test (test_worker_refused_control),
        cmocka_unit_test (test_data_roles),
        cmocka_unit_test (test_refusals_logged_once),
        cmocka_unit_test (test_insecure_serves_plain),
        cmocka_unit_test (test_chief_shutdown),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
