//  Tests of CurveZMQ identities and trust (common/wire/ps_curve.c): the key
//  directory ps_curve_keygen makes, the checks ps_curve_new runs on it
//  (private secret files, matching pairs, one trust directory), and real
//  sockets on 127.0.0.1: a trusted client is answered and named by its
//  certificate's task; a client with an unknown key, one without CURVE,
//  and one that expects another server's key are refused in the handshake
//  (seen on the client's socket monitor) and reach nothing. The same for a
//  PLAIN data plane, by passwords.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <czmq.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "ps_curve.h"

static const char *s_tasks [] = { "chief:0", "ps:0", "ps:1", "worker:0", "worker:1" };
#define S_NTASKS (sizeof s_tasks / sizeof s_tasks [0])

static void
s_keys (char *dir, size_t len)
{
    char tmp [256];
    harness_tmpdir (tmp, sizeof tmp);
    snprintf (dir, len, "%s/keys", tmp);
    ps_error_t err;
    if (ps_curve_keygen (dir, s_tasks, S_NTASKS, false, &err) != 0)
        fail_msg ("keygen: %s", err.msg);
}

static void
s_rm_keys (const char *dir)
{
    char parent [PATH_MAX];
    snprintf (parent, sizeof parent, "%s", dir);
    *strrchr (parent, '/') = 0;
    harness_rmtree (parent);
}

static mode_t
s_mode (const char *path)
{
    struct stat st;
    assert_int_equal (stat (path, &st), 0);
    return st.st_mode & 07777;
}

//  A task's password (64 hex digits) from its file, stem.password in
//  dir, which must be private.
#define S_PASSWORD_MAX 128
static void
s_read_password (const char *dir, const char *stem, char *password, size_t len)
{
    char path [PATH_MAX + 64];
    snprintf (path, sizeof path, "%s/%s.password", dir, stem);
    assert_int_equal (s_mode (path), 0600);
    FILE *file = fopen (path, "r");
    assert_non_null (file);
    assert_non_null (fgets (password, (int) len, file));
    fclose (file);
    *strchr (password, '\n') = 0;
    assert_int_equal (strlen (password), 64);
}

static void
test_keygen (void **state)
{
    (void) state;
    char dir [PATH_MAX], path [PATH_MAX + 64];
    s_keys (dir, sizeof dir);
    assert_int_equal (s_mode (dir), 0700);
    for (size_t i = 0; i < S_NTASKS; i++) {
        char stem [32];
        snprintf (stem, sizeof stem, "%s", s_tasks [i]);
        *strchr (stem, ':') = '-';
        snprintf (path, sizeof path, "%s/%s.cert_secret", dir, stem);
        assert_int_equal (s_mode (path), 0600);
        //  The public certificate names its task; the secret file holds
        //  the pair.
        snprintf (path, sizeof path, "%s/public/%s.cert", dir, stem);
        zcert_t *cert = zcert_load (path);
        assert_non_null (cert);
        assert_string_equal (zcert_meta (cert, "task"), s_tasks [i]);
        assert_true (strncmp (zcert_meta (cert, "role"), s_tasks [i],
                              strlen (zcert_meta (cert, "role"))) == 0);
        zcert_destroy (&cert);
    }
    //  Never over old keys; names checked before anything is written.
    ps_error_t err;
    assert_int_equal (ps_curve_keygen (dir, s_tasks, S_NTASKS, false, &err), PS_EEXIST);
    assert_non_null (strstr (err.msg, "not empty"));
    char other [PATH_MAX + 16];
    snprintf (other, sizeof other, "%s-2", dir);
    const char *bad [][2] = {
        { "ps:0", "ps:0" }, { "ps:0", "boss:1" }, { "chief:1", "ps:0" }, { "ps", "ps:0" },
        { "ps:-1", "ps:0" },
    };
    const char *expect [] = { "twice", "role", "chief:0", "TYPE:INDEX", "index" };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        assert_int_equal (ps_curve_keygen (other, bad [i], 2, false, &err), PS_EINVAL);
        if (!strstr (err.msg, expect [i]))
            fail_msg ("keygen %s, %s: \"%s\" does not say \"%s\"", bad [i][0], bad [i][1],
                      err.msg, expect [i]);
        assert_int_not_equal (access (other, F_OK), 0);
    }
    s_rm_keys (dir);
}

static void
test_load_refusals (void **state)
{
    (void) state;
    char dir [PATH_MAX], path [PATH_MAX + 64], other [PATH_MAX];
    s_keys (dir, sizeof dir);
    s_keys (other, sizeof other);
    ps_error_t err;
    ps_curve_t *curve = ps_curve_new (dir, "worker:1", &err);
    if (!curve)
        fail_msg ("%s", err.msg);
    assert_string_equal (ps_curve_task (curve), "worker:1");
    //  A second identity of the process must trust the same directory.
    ps_curve_t *second = ps_curve_new (dir, "ps:0", &err);
    assert_non_null (second);
    ps_curve_destroy (&second);
    assert_null (ps_curve_new (other, "ps:0", &err));
    assert_non_null (strstr (err.msg, "already trusts"));
    ps_curve_destroy (&curve);
    assert_null (curve);

    //  A task with no secret file, or not in the cluster.
    assert_null (ps_curve_new (dir, "worker:7", &err));
    assert_int_equal (err.code, PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "worker-7.cert_secret"));
    assert_null (ps_curve_new (dir, "janitor:0", &err));
    assert_int_equal (err.code, PS_EINVAL);
    //  A secret file others can read, as ssh refuses a private key.
    snprintf (path, sizeof path, "%s/ps-1.cert_secret", dir);
    assert_int_equal (chmod (path, 0640), 0);
    assert_null (ps_curve_new (dir, "ps:1", &err));
    assert_non_null (strstr (err.msg, "chmod 600"));
    assert_int_equal (chmod (path, 0600), 0);
    //  A secret file from another cluster: its pair is not the public one.
    char foreign [PATH_MAX + 64];
    snprintf (foreign, sizeof foreign, "%s/ps-1.cert_secret", other);
    FILE *in = fopen (foreign, "r");
    assert_non_null (in);
    char text [4096];
    size_t n = fread (text, 1, sizeof text, in);
    fclose (in);
    FILE *out = fopen (path, "w");
    assert_non_null (out);
    assert_int_equal (fwrite (text, 1, n, out), n);
    fclose (out);
    assert_null (ps_curve_new (dir, "ps:1", &err));
    assert_non_null (strstr (err.msg, "does not match"));
    //  A secret key that is not the public key's.
    char *secret = strstr (text, "secret-key = \"");
    assert_non_null (secret);
    secret [14] = secret [14] == 'a' ? 'b' : 'a';
    out = fopen (path, "w");
    assert_non_null (out);
    assert_int_equal (fwrite (text, 1, n, out), n);
    fclose (out);
    assert_null (ps_curve_new (dir, "ps:1", &err));
    assert_int_equal (err.code, PS_ECORRUPT);
    //  Garbage.
    out = fopen (path, "w");
    assert_non_null (out);
    fputs ("not a certificate\n", out);
    fclose (out);
    assert_null (ps_curve_new (dir, "ps:1", &err));
    assert_int_equal (err.code, PS_ECORRUPT);
    //  No public/ at all.
    snprintf (path, sizeof path, "%s/public", other);
    harness_rmtree (path);
    assert_null (ps_curve_new (other, "ps:0", &err));
    assert_non_null (strstr (err.msg, "public/"));
    s_rm_keys (dir);
    s_rm_keys (other);
}

//  A request from client, answered by the server loop below; returns the
//  task the server saw (or "" when nothing came back within timeout_ms).
static void
s_round_trip (void *server, void *client, char *task, size_t len, int timeout_ms, bool curve)
{
    *task = 0;
    assert_int_equal (zmq_send (client, "hello", 5, 0), 5);
    zmq_pollitem_t item = { server, 0, ZMQ_POLLIN, 0 };
    if (zmq_poll (&item, 1, timeout_ms) <= 0)
        return;
    zmq_msg_t id, body;
    zmq_msg_init (&id);
    zmq_msg_init (&body);
    assert_true (zmq_msg_recv (&id, server, 0) >= 0);
    assert_true (zmq_msg_recv (&body, server, 0) >= 0);
    //  CURVE names the peer by its certificate's task and its key; PLAIN
    //  by the user name whose password it proved (ps_curve_data_task).
    const char *peer = ps_curve_data_task (zmq_msg_gets (&body, PS_CURVE_PEER_KEY),
                                           ps_curve_peer_task (&body));
    snprintf (task, len, "%s", peer ? peer : "?");
    if (curve)
        assert_int_equal (strlen (ps_curve_peer_key (&body)), 40);
    int id_size = (int) zmq_msg_size (&id);
    assert_int_equal (zmq_msg_send (&id, server, ZMQ_SNDMORE), id_size);
    assert_int_equal (zmq_send (server, "hi", 2, 0), 2);
    zmq_msg_close (&body);
    char reply [8];
    item = (zmq_pollitem_t) { client, 0, ZMQ_POLLIN, 0 };
    assert_int_equal (zmq_poll (&item, 1, timeout_ms), 1);
    assert_int_equal (zmq_recv (client, reply, sizeof reply, 0), 2);
}

//  Connects client to endpoint and sends a request that the server must
//  never see: the handshake is refused. The client's own monitor tells
//  when (a handshake that failed, or a connection dropped before it
//  succeeded), so a refusal is observed rather than assumed from silence
//  after a guessed while; a handshake that succeeds fails the case, and so
//  does any message on the server. what names the client in a failure.
static void
s_refused (void *ctx, void *client, const char *endpoint, void *server, const char *what)
{
    static int monitors;
    char monitor_endpoint [64];
    snprintf (monitor_endpoint, sizeof monitor_endpoint, "inproc://test-curve-monitor-%d",
              monitors++);
    int events = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
               | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
               | ZMQ_EVENT_DISCONNECTED;
    assert_int_equal (zmq_socket_monitor (client, monitor_endpoint, events), 0);
    void *monitor = zmq_socket (ctx, ZMQ_PAIR);
    assert_non_null (monitor);
    assert_int_equal (zmq_connect (monitor, monitor_endpoint), 0);
    assert_int_equal (zmq_connect (client, endpoint), 0);
    assert_int_equal (zmq_send (client, "hello", 5, 0), 5);

    //  The first event of the connection; a loaded machine gets 10 s.
    zmq_pollitem_t item = { monitor, 0, ZMQ_POLLIN, 0 };
    if (zmq_poll (&item, 1, 10000) != 1)
        fail_msg ("%s: no handshake result within 10 s", what);
    zmq_msg_t frame;
    zmq_msg_init (&frame);
    assert_true (zmq_msg_recv (&frame, monitor, 0) >= 6);
    uint16_t event;
    memcpy (&event, zmq_msg_data (&frame), sizeof event);
    assert_true (zmq_msg_more (&frame));
    assert_true (zmq_msg_recv (&frame, monitor, 0) >= 0);     //  the endpoint
    zmq_msg_close (&frame);
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
        fail_msg ("%s completed the handshake", what);

    //  Messages pass only after a handshake, so nothing can have come.
    item = (zmq_pollitem_t) { server, 0, ZMQ_POLLIN, 0 };
    if (zmq_poll (&item, 1, 0) != 0)
        fail_msg ("%s reached the server", what);
    assert_int_equal (zmq_socket_monitor (client, NULL, 0), 0);
    assert_int_equal (zmq_close (monitor), 0);
}

static void *
s_client (void *ctx)
{
    void *client = zmq_socket (ctx, ZMQ_DEALER);
    assert_non_null (client);
    int linger = 0;
    assert_int_equal (zmq_setsockopt (client, ZMQ_LINGER, &linger, sizeof linger), 0);
    return client;
}

//  A client of ctx with PLAIN credentials user and password (none for a
//  NULL user) that s_refused checks is refused at endpoint; returned, for
//  the caller to close.
static void *
s_plain_refused (void *ctx, const char *user, const char *password, const char *endpoint,
                 void *server, const char *what)
{
    void *client = s_client (ctx);
    if (user) {
        assert_int_equal (zmq_setsockopt (client, ZMQ_PLAIN_USERNAME, user, strlen (user)), 0);
        assert_int_equal (zmq_setsockopt (client, ZMQ_PLAIN_PASSWORD, password,
                                          strlen (password)), 0);
    }
    s_refused (ctx, client, endpoint, server, what);
    return client;
}

//  A ROUTER bound on a free port of 127.0.0.1 in ps_curve_context, secured
//  by server_fn (ps_curve_server or ps_curve_data_server) with curve's
//  identity; endpoint gets where it listens.
static void *
s_listener (ps_curve_t *curve, int (*server_fn) (ps_curve_t *, void *, ps_error_t *),
            char *endpoint, size_t len)
{
    void *server = zmq_socket (ps_curve_context (), ZMQ_ROUTER);
    assert_non_null (server);
    int linger = 0;
    assert_int_equal (zmq_setsockopt (server, ZMQ_LINGER, &linger, sizeof linger), 0);
    ps_error_t err;
    assert_int_equal (server_fn (curve, server, &err), 0);
    assert_int_equal (zmq_bind (server, "tcp://127.0.0.1:*"), 0);
    assert_int_equal (zmq_getsockopt (server, ZMQ_LAST_ENDPOINT, endpoint, &len), 0);
    return server;
}

static void
test_sockets (void **state)
{
    (void) state;
    char dir [PATH_MAX];
    s_keys (dir, sizeof dir);
    ps_error_t err;
    ps_curve_t *ps0 = ps_curve_new (dir, "ps:0", &err);
    ps_curve_t *worker = ps_curve_new (dir, "worker:1", &err);
    assert_non_null (ps0);
    assert_non_null (worker);
    assert_ptr_equal (ps_curve_context (), ps_curve_context ());
    char endpoint [128];
    void *server = s_listener (ps0, ps_curve_server, endpoint, sizeof endpoint);
    //  The clients live in a context of their own, as ps_client's do.
    void *client_ctx = zmq_ctx_new ();
    assert_non_null (client_ctx);
    char task [64];

    //  A trusted worker is answered, and named by its certificate.
    void *good = s_client (client_ctx);
    assert_int_equal (ps_curve_client (worker, good, "ps:0", &err), 0);
    assert_int_equal (zmq_connect (good, endpoint), 0);
    s_round_trip (server, good, task, sizeof task, 5000, true);
    assert_string_equal (task, "worker:1");

    //  A key the cluster does not know: zauth refuses it, and nothing
    //  reaches the server nor comes back.
    void *stranger = s_client (client_ctx);
    zcert_t *cert = zcert_new ();
    char server_key [41];
    zcert_t *ps0_public;
    char path [PATH_MAX + 32];
    snprintf (path, sizeof path, "%s/public/ps-0.cert", dir);
    ps0_public = zcert_load (path);
    assert_non_null (ps0_public);
    snprintf (server_key, sizeof server_key, "%s", zcert_public_txt (ps0_public));
    zcert_destroy (&ps0_public);
    assert_int_equal (zmq_setsockopt (stranger, ZMQ_CURVE_SERVERKEY, server_key, 40), 0);
    assert_int_equal (zmq_setsockopt (stranger, ZMQ_CURVE_PUBLICKEY, zcert_public_txt (cert), 40), 0);
    assert_int_equal (zmq_setsockopt (stranger, ZMQ_CURVE_SECRETKEY, zcert_secret_txt (cert), 40), 0);
    zcert_destroy (&cert);
    s_refused (client_ctx, stranger, endpoint, server, "a key the cluster does not know");

    //  A client without CURVE.
    void *plain = s_client (client_ctx);
    s_refused (client_ctx, plain, endpoint, server, "a client without CURVE");

    //  A trusted client that expects another server (ps:1's key) never
    //  completes the handshake with ps:0: no impostor can serve it.
    void *misled = s_client (client_ctx);
    assert_int_equal (ps_curve_client (worker, misled, "ps:1", &err), 0);
    s_refused (client_ctx, misled, endpoint, server, "a client that expects ps:1");
    assert_int_equal (ps_curve_client (worker, misled, "ps:9", &err), PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "ps-9.cert"));

    //  The good client is still served after all that.
    s_round_trip (server, good, task, sizeof task, 5000, true);
    assert_string_equal (task, "worker:1");

    //  Refusals are remembered per key.
    assert_true (ps_curve_first_refusal (ps0, "key-a"));
    assert_false (ps_curve_first_refusal (ps0, "key-a"));
    assert_true (ps_curve_first_refusal (ps0, "key-b"));

    void *clients [] = { good, stranger, plain, misled };
    for (size_t i = 0; i < 4; i++)
        assert_int_equal (zmq_close (clients [i]), 0);
    assert_int_equal (zmq_ctx_term (client_ctx), 0);
    assert_int_equal (zmq_close (server), 0);
    ps_curve_destroy (&worker);
    ps_curve_destroy (&ps0);
    s_rm_keys (dir);
}

//  A PLAIN data plane (keygen with plain): each task's password and the
//  servers' file of them, private; the certificates say so; a server
//  needs the file, a client its password. On real sockets a data-plane
//  server answers a client that proves its task's password, and names it
//  by that task; a wrong password, a password claimed for another task
//  (a worker posing as chief:0), and a client without credentials are
//  refused in the handshake and reach nothing.
static void
test_plain_data_plane (void **state)
{
    (void) state;
    char tmp [256], dir [PATH_MAX], path [PATH_MAX + 64];
    harness_tmpdir (tmp, sizeof tmp);
    snprintf (dir, sizeof dir, "%s/keys", tmp);
    ps_error_t err;
    if (ps_curve_keygen (dir, s_tasks, S_NTASKS, true, &err) != 0)
        fail_msg ("keygen: %s", err.msg);
    snprintf (path, sizeof path, "%s/passwords", dir);
    assert_int_equal (s_mode (path), 0600);
    char password [S_PASSWORD_MAX];
    s_read_password (dir, "worker-1", password, sizeof password);
    snprintf (path, sizeof path, "%s/public/ps-0.cert", dir);
    zcert_t *cert = zcert_load (path);
    assert_non_null (cert);
    assert_string_equal (zcert_meta (cert, "data-plane"), "plain");
    zcert_destroy (&cert);

    ps_curve_t *ps0 = ps_curve_new (dir, "ps:0", &err);
    ps_curve_t *worker = ps_curve_new (dir, "worker:1", &err);
    assert_non_null (ps0);
    assert_non_null (worker);
    assert_true (ps_curve_plain (ps0));
    assert_false (ps_curve_local_serves (ps0));
    assert_false (ps_curve_local_connects (worker));
    char endpoint [128];
    void *server = s_listener (ps0, ps_curve_data_server, endpoint, sizeof endpoint);
    void *client_ctx = zmq_ctx_new ();
    assert_non_null (client_ctx);
    char task [64];

    void *good = s_client (client_ctx);
    assert_int_equal (ps_curve_data_client (worker, good, "ps:0", &err), 0);
    assert_int_equal (zmq_connect (good, endpoint), 0);
    s_round_trip (server, good, task, sizeof task, 5000, false);
    assert_string_equal (task, "worker:1");

    struct { const char *user, *password, *what; } bad [] = {
        { "worker:1", "00", "a wrong password" },
        { "chief:0", password, "worker:1's password claimed for chief:0" },
        { NULL, NULL, "no credentials" },
    };
    void *clients [4] = { good };
    for (int i = 0; i < 3; i++)
        clients [i + 1] = s_plain_refused (client_ctx, bad [i].user, bad [i].password, endpoint,
                                           server, bad [i].what);
    s_round_trip (server, good, task, sizeof task, 5000, false);
    assert_string_equal (task, "worker:1");
    for (int i = 0; i < 4; i++)
        assert_int_equal (zmq_close (clients [i]), 0);
    assert_int_equal (zmq_ctx_term (client_ctx), 0);
    assert_int_equal (zmq_close (server), 0);
    ps_curve_destroy (&worker);
    ps_curve_destroy (&ps0);

    //  Without its password a task cannot join; without the file, a server.
    snprintf (path, sizeof path, "%s/worker-0.password", dir);
    assert_int_equal (unlink (path), 0);
    assert_null (ps_curve_new (dir, "worker:0", &err));
    assert_non_null (strstr (err.msg, "no password file for worker:0"));
    snprintf (path, sizeof path, "%s/passwords", dir);
    assert_int_equal (chmod (path, 0644), 0);
    assert_null (ps_curve_new (dir, "ps:1", &err));
    assert_non_null (strstr (err.msg, "chmod 600"));
    harness_rmtree (tmp);
}

//  The same-host plane of a CurveZMQ cluster: keygen gives every task a
//  password and the servers their file, private; one ROUTER serves tcp
//  with CurveZMQ and, bound after ps_curve_local_server, ipc with PLAIN.
//  Over ipc a task that proves its password is served and named by its
//  task; over tcp the same credentials are refused, as are CurveZMQ over
//  ipc, a wrong password and a password claimed for another task. Keys
//  without passwords (made before keygen wrote them) keep ipc CurveZMQ;
//  a password file open to others is refused, and so is a servers' file
//  with a user that is no task. And ps_curve_data_task reads a PLAIN
//  peer's task only from the user name it proved.
static void
test_local_plane (void **state)
{
    (void) state;
    char dir [1024], path [PATH_MAX];
    s_keys (dir, sizeof dir);
    for (size_t i = 0; i < S_NTASKS; i++) {
        char stem [32];
        snprintf (stem, sizeof stem, "%s", s_tasks [i]);
        *strchr (stem, ':') = '-';
        snprintf (path, sizeof path, "%s/%s.password", dir, stem);
        assert_int_equal (s_mode (path), 0600);
    }
    snprintf (path, sizeof path, "%s/passwords", dir);
    assert_int_equal (s_mode (path), 0600);
    ps_error_t err;
    ps_curve_t *ps0 = ps_curve_new (dir, "ps:0", &err);
    ps_curve_t *worker = ps_curve_new (dir, "worker:1", &err);
    assert_non_null (ps0);
    assert_non_null (worker);
    assert_false (ps_curve_plain (worker));
    assert_true (ps_curve_local_serves (ps0));
    assert_true (ps_curve_local_connects (ps0));
    assert_true (ps_curve_local_connects (worker));
    assert_false (ps_curve_local_serves (worker));

    char tcp [128], ipc [PATH_MAX];
    void *server = s_listener (ps0, ps_curve_data_server, tcp, sizeof tcp);
    char sockdir [1100];
    snprintf (sockdir, sizeof sockdir, "%s/ipc", dir);
    assert_int_equal (mkdir (sockdir, 0700), 0);
    snprintf (ipc, sizeof ipc, "ipc://%s/ps-0", sockdir);
    assert_int_equal (ps_curve_local_server (ps0, server, &err), 0);
    assert_int_equal (zmq_bind (server, ipc), 0);
    void *client_ctx = zmq_ctx_new ();
    assert_non_null (client_ctx);
    char task [64];

    //  CurveZMQ over tcp, as before; PLAIN over ipc, named by its task.
    void *curve = s_client (client_ctx);
    assert_int_equal (ps_curve_data_client (worker, curve, "ps:0", &err), 0);
    assert_int_equal (zmq_connect (curve, tcp), 0);
    s_round_trip (server, curve, task, sizeof task, 5000, true);
    assert_string_equal (task, "worker:1");
    void *local = s_client (client_ctx);
    assert_int_equal (ps_curve_local_client (worker, local, &err), 0);
    assert_int_equal (zmq_connect (local, ipc), 0);
    s_round_trip (server, local, task, sizeof task, 5000, false);
    assert_string_equal (task, "worker:1");

    //  The refusals.
    char password [S_PASSWORD_MAX];
    s_read_password (dir, "worker-1", password, sizeof password);
    void *plain_tcp = s_client (client_ctx);
    assert_int_equal (ps_curve_local_client (worker, plain_tcp, &err), 0);
    s_refused (client_ctx, plain_tcp, tcp, server, "PLAIN over tcp");
    void *curve_ipc = s_client (client_ctx);
    assert_int_equal (ps_curve_data_client (worker, curve_ipc, "ps:0", &err), 0);
    s_refused (client_ctx, curve_ipc, ipc, server, "CurveZMQ over the PLAIN ipc endpoint");
    struct { const char *user, *password, *what; } bad [] = {
        { "worker:1", "00", "a wrong password over ipc" },
        { "chief:0", password, "worker:1's password claimed for chief:0 over ipc" },
    };
    void *clients [6] = { curve, local, plain_tcp, curve_ipc };
    for (int i = 0; i < 2; i++)
        clients [4 + i] = s_plain_refused (client_ctx, bad [i].user, bad [i].password, ipc,
                                           server, bad [i].what);
    s_round_trip (server, local, task, sizeof task, 5000, false);
    assert_string_equal (task, "worker:1");
    for (int i = 0; i < 6; i++)
        assert_int_equal (zmq_close (clients [i]), 0);
    assert_int_equal (zmq_ctx_term (client_ctx), 0);
    assert_int_equal (zmq_close (server), 0);
    ps_curve_destroy (&worker);
    ps_curve_destroy (&ps0);

    //  The task read from a message's properties.
    const char *key = "rq:JM7ed[9(]!X<ra^R]Dm0BE<w.wKt1o2VzJDkJ";
    assert_int_equal (strlen (key), 40);
    assert_string_equal (ps_curve_data_task ("worker:1", "chief:0"), "worker:1");
    assert_string_equal (ps_curve_data_task (key, "worker:2"), "worker:2");
    assert_string_equal (ps_curve_data_task ("ab:12345", "worker:2"), "worker:2");
    assert_string_equal (ps_curve_data_task (NULL, "worker:2"), "worker:2");
    assert_null (ps_curve_data_task ("", NULL));

    //  Keys without passwords: ipc stays CurveZMQ. A password file open
    //  to others is refused, as a secret certificate would be.
    snprintf (path, sizeof path, "%s/worker-0.password", dir);
    assert_int_equal (chmod (path, 0644), 0);
    assert_null (ps_curve_new (dir, "worker:0", &err));
    assert_non_null (strstr (err.msg, "chmod 600"));
    assert_int_equal (unlink (path), 0);
    snprintf (path, sizeof path, "%s/passwords", dir);
    assert_int_equal (chmod (path, 0644), 0);
    assert_null (ps_curve_new (dir, "ps:1", &err));
    assert_non_null (strstr (err.msg, "chmod 600"));
    assert_int_equal (chmod (path, 0600), 0);
    //  A user that is no task (a hand-edited file) would let a PLAIN peer
    //  name its own task: the file is refused.
    FILE *file = fopen (path, "a");
    assert_non_null (file);
    fprintf (file, "someone=%064d\n", 0);
    assert_int_equal (fclose (file), 0);
    assert_null (ps_curve_new (dir, "ps:1", &err));
    assert_int_equal (err.code, PS_ECORRUPT);
    assert_non_null (strstr (err.msg, "line 6: expected TASK=PASSWORD"));
    assert_int_equal (unlink (path), 0);
    ps_curve_t *old_worker = ps_curve_new (dir, "worker:0", &err);
    ps_curve_t *old_ps = ps_curve_new (dir, "ps:1", &err);
    assert_non_null (old_worker);
    assert_non_null (old_ps);
    assert_false (ps_curve_local_connects (old_worker));
    assert_false (ps_curve_local_serves (old_ps));
    ps_curve_destroy (&old_ps);
    ps_curve_destroy (&old_worker);
    s_rm_keys (dir);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_keygen),
        cmocka_unit_test (test_load_refusals),
        cmocka_unit_test (test_sockets),
        cmocka_unit_test (test_plain_data_plane),
        cmocka_unit_test (test_local_plane),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
