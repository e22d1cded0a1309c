//  The link to the coordinator, on real sockets and loopback TCP, with the
//  test playing the coordinator on a ROUTER socket: registration repeated
//  until answered, with its fields and routing id; heartbeats at the
//  interval register_ok gives; messages both ways; registering again on an
//  error of code not_found, on a new coordinator incarnation and after the
//  coordinator's silence (which the owner hears of); the coordinator's word
//  that the run is over, kept through its silence; a link that delivers
//  nothing; receive timeouts; an owner that never reads; prompt destroy;
//  two links side by side; a coordinator that starts after the link; and a
//  process that is stopped and resumed while the coordinator keeps
//  talking, which must not count that time as the coordinator's silence.
//
//  Secured, as a cluster runs: the test's coordinator is a CURVE server
//  with chief:0's key, each link has the identity of its own task, and the
//  coordinator checks that every message comes from the task the routing
//  id names. A link never talks to a coordinator without chief:0's key.
//
//  This file is longer than the project's 800 lines on purpose: its cases
//  check one module, the link, against the same hand-played, secured
//  coordinator.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "harness.h"
#include "harness_case.h"
#include "harness_wire.h"
#include "ps_clock.h"
#include "ps_link.h"
#include "ps_msg.h"

//  The coordinator incarnation the test answers with.
#define S_COORDINATOR   77

//  The timing of these tests holds on a loaded machine, where any process
//  may go unscheduled for a second or more. A test waits for what it
//  expects for S_WAIT_MS (time spent only when it fails), a coordinator
//  stays registered for S_QUIET_MS of silence where silence is not what the
//  test is about, and a rate is judged on average over a window measured
//  with the clock (s_assert_rate).
#define S_WAIT_MS       10000
#define S_QUIET_MS      60000

//  Destroying a link must take less than this: it says the destroy does
//  not wait for the link's next tick, which test_destroy_prompt sets far
//  beyond it (S_LONG_MS), nor hang on unsent messages.
#define S_DESTROY_MS    5000

//  An interval or timeout that no test reaches, so that a link which waits
//  for it, or uses it where register_ok said otherwise, is caught.
#define S_LONG_MS       60000

//  The test's coordinator: a ROUTER and the last message it received.
typedef struct {
    void *router;
    char endpoint [64];
    ps_msg_t *msg;
    char peer [256];            //  routing id of the last message
} s_coord_t;

//  Fail unless count messages in elapsed ms were sent every interval_ms on
//  average. The link never catches up on an interval it missed, so a link
//  thread that went unscheduled sends fewer: the lower bound allows for
//  three quarters of the window lost that way. More than twice the rate
//  (and the one or two sent before the window) is a link that sends faster
//  than it was told; a quarter is one that uses another, longer interval.
static void
s_assert_rate (int count, double elapsed, int interval_ms, const char *what)
{
    double expected = elapsed / interval_ms;
    print_message ("%d %s in %.0f ms, about %.0f expected\n", count, what, elapsed, expected);
    if (count < expected / 4 || count > expected * 2 + 2)
        fail_msg ("%d %s in %.0f ms, expected about %.0f at a %d ms interval", count, what,
                  elapsed, expected, interval_ms);
}

//  Bind a coordinator with task's key (chief:0's, or an impostor's; NULL:
//  no CURVE) on bind, retrying while a port that was just released is
//  still held by the kernel. Listening sockets live in ps_curve_context (),
//  where the authenticator serves them.
static void
s_coord_open_as (s_coord_t *coord, const char *bind, const char *task)
{
    memset (coord, 0, sizeof *coord);
    coord->router = zmq_socket (ps_curve_context (), ZMQ_ROUTER);
    assert_non_null (coord->router);
    int linger = 0;
    assert_int_equal (zmq_setsockopt (coord->router, ZMQ_LINGER, &linger, sizeof linger), 0);
    ps_error_t err;
    if (task && ps_curve_server (harness_curve (task), coord->router, &err))
        fail_msg ("coordinator: %s", err.msg);
    int rc = -1;
    for (int attempt = 0; attempt < 100 && rc != 0; attempt++) {
        rc = zmq_bind (coord->router, bind);
        if (rc != 0)
            harness_sleep_ms (10);
    }
    if (rc != 0)
        fail_msg ("cannot bind %s: %s", bind, zmq_strerror (errno));
    size_t size = sizeof coord->endpoint;
    assert_int_equal (zmq_getsockopt (coord->router, ZMQ_LAST_ENDPOINT, coord->endpoint, &size), 0);
    coord->msg = ps_msg_new ();
}

static void
s_coord_open (s_coord_t *coord, const char *bind)
{
    s_coord_open_as (coord, bind, "chief:0");
}

static void
s_coord_close (s_coord_t *coord)
{
    ps_msg_destroy (&coord->msg);
    assert_int_equal (zmq_close (coord->router), 0);
}

//  Receive the next message within timeout_ms: the message, or NULL.
static const ps_proto_t *
s_coord_recv (s_coord_t *coord, int timeout_ms)
{
    const ps_proto_t *got = harness_recv (coord->router, coord->msg, true, timeout_ms);
    if (!got)
        return NULL;
    zmq_msg_t *envelope;
    assert_int_equal (ps_msg_envelope (coord->msg, &envelope), 1);
    size_t size = zmq_msg_size (&envelope [0]);
    assert_true (size < sizeof coord->peer);
    memcpy (coord->peer, zmq_msg_data (&envelope [0]), size);
    coord->peer [size] = 0;
    //  The routing id "role:index:incarnation" starts with the task that
    //  the sender's certificate names.
    const char *task = ps_msg_property (coord->msg, PS_CURVE_PEER_TASK);
    if (!task || strncmp (coord->peer, task, strlen (task)) != 0
    ||  coord->peer [strlen (task)] != ':')
        fail_msg ("coordinator: a message from %s under the routing id %s", task ? task : "no task",
                  coord->peer);
    return got;
}

//  Wait for a message of type from peer (any peer when NULL), skipping
//  others, and return it.
static const ps_proto_t *
s_coord_expect (s_coord_t *coord, const char *peer, ps_proto_type_t type, int timeout_ms)
{
    double deadline = ps_clock_ms () + timeout_ms;
    while (true) {
        int left = (int) (deadline - ps_clock_ms ());
        const ps_proto_t *got = s_coord_recv (coord, left > 0 ? left : 0);
        if (!got)
            fail_msg ("coordinator: no %s from %s within %d ms", ps_proto_info [type].name,
                      peer ? peer : "anyone", timeout_ms);
        if (got->type == type && (!peer || strcmp (coord->peer, peer) == 0))
            return got;
    }
}

//  Fail when a message of type comes from anyone within ms.
static void
s_coord_refute (s_coord_t *coord, ps_proto_type_t type, int ms)
{
    double deadline = ps_clock_ms () + ms;
    int left;
    while ((left = (int) (deadline - ps_clock_ms ())) > 0) {
        const ps_proto_t *got = s_coord_recv (coord, left);
        if (got && got->type == type)
            fail_msg ("coordinator: unexpected %s from %s", ps_proto_info [type].name,
                      coord->peer);
    }
}

//  Send msg to peer.
static void
s_coord_send (s_coord_t *coord, const char *peer, const ps_proto_t *msg)
{
    int size = (int) strlen (peer);
    assert_int_equal (zmq_send (coord->router, peer, (size_t) size, ZMQ_SNDMORE), size);
    harness_send (coord->router, NULL, 0, msg);
}

static void
s_send_register_ok (s_coord_t *coord, const char *peer, uint64_t incarnation,
                    int heartbeat_ms, int timeout_ms)
{
    ps_proto_t msg = { .type = PS_PROTO_REGISTER_OK, .id = ps_msg_id (coord->msg),
                       .register_ok = { .coordinator = incarnation,
                                        .heartbeat_ms = (uint64_t) heartbeat_ms,
                                        .timeout_ms = (uint64_t) timeout_ms } };
    s_coord_send (coord, peer, &msg);
}

//  A heartbeat; with done, one of a coordinator whose run is over.
static void
s_send_heartbeat_done (s_coord_t *coord, const char *peer, uint64_t incarnation, bool done)
{
    ps_proto_t msg = { .type = PS_PROTO_HEARTBEAT,
                       .heartbeat = { .incarnation = incarnation, .has_done = done,
                                      .done = done } };
    s_coord_send (coord, peer, &msg);
}

static void
s_send_heartbeat (s_coord_t *coord, const char *peer, uint64_t incarnation)
{
    s_send_heartbeat_done (coord, peer, incarnation, false);
}

static void
s_send_error (s_coord_t *coord, const char *peer, uint64_t id, int code)
{
    ps_proto_t msg = { .type = PS_PROTO_ERROR, .id = id,
                       .error = { ps_error_name (code), "from the test" } };
    s_coord_send (coord, peer, &msg);
}

static void
s_send_work (s_coord_t *coord, const char *peer, uint64_t id, uint64_t step)
{
    ps_proto_t msg = { .type = PS_PROTO_WORK, .id = id,
                       .work = { .kind = "train", .step = step, .epoch = 1, .batch = 2,
                                 .generation = 3, .wait_ms = 4 } };
    s_coord_send (coord, peer, &msg);
}

//  A link as task role:index, with that task's identity.
static ps_link_t *
s_link_new (const char *coordinator, const char *role, int index, const char *endpoint,
            bool deliver, int heartbeat_ms, int timeout_ms)
{
    char task [32];
    snprintf (task, sizeof task, "%s:%d", role, index);
    ps_link_config_t config = {
        .coordinator = coordinator, .role = role, .index = index, .endpoint = endpoint,
        .heartbeat_ms = heartbeat_ms, .timeout_ms = timeout_ms, .deliver = deliver,
        .curve = harness_curve (task),
    };
    ps_error_t err;
    ps_link_t *link = ps_link_new (&config, &err);
    if (!link)
        fail_msg ("ps_link_new: %s", err.msg);
    return link;
}

static void
s_link_destroy (ps_link_t **link)
{
    double start = ps_clock_ms ();
    ps_link_destroy (link);
    double took = ps_clock_ms () - start;
    assert_null (*link);
    if (took >= S_DESTROY_MS)
        fail_msg ("destroy took %.0f ms", took);
}

static void
s_routing_id (ps_link_t *link, const char *role, int index, char *buf, size_t len)
{
    snprintf (buf, len, "%s:%d:%" PRIx64, role, index, ps_link_incarnation (link));
}

//  The owner's next message, which must be of type.
static const ps_proto_t *
s_owner_expect (ps_link_t *link, ps_msg_t *msg, ps_proto_type_t type, int timeout_ms)
{
    ps_error_t err;
    int rc = ps_link_recv (link, msg, timeout_ms, &err);
    if (rc)
        fail_msg ("owner expected %s: %s", ps_proto_info [type].name, err.msg);
    const ps_proto_t *got = ps_msg_proto (msg);
    if (got->type != type)
        fail_msg ("owner expected %s, got %s", ps_proto_info [type].name,
                  ps_proto_info [got->type].name);
    return got;
}

//  The owner gets nothing within timeout_ms.
static void
s_owner_nothing (ps_link_t *link, ps_msg_t *msg, int timeout_ms)
{
    ps_error_t err;
    int rc = ps_link_recv (link, msg, timeout_ms, &err);
    if (rc == 0)
        fail_msg ("owner got an unexpected %s", ps_msg_type (msg));
    assert_int_equal (rc, PS_ETIMEDOUT);
}

//  Wait until the link's flag (ps_link_registered, ps_link_finished) is
//  expected, failing after timeout_ms.
static void
s_wait_flag (ps_link_t *link, bool (*flag) (ps_link_t *), const char *name, bool expected,
             int timeout_ms)
{
    double deadline = ps_clock_ms () + timeout_ms;
    while (flag (link) != expected) {
        if (ps_clock_ms () > deadline)
            fail_msg ("%s did not become %s within %d ms", name, expected ? "true" : "false",
                      timeout_ms);
        harness_sleep_ms (2);
    }
}

static void
s_wait_registered (ps_link_t *link, bool registered, int timeout_ms)
{
    s_wait_flag (link, ps_link_registered, "ps_link_registered", registered, timeout_ms);
}

//  Answer the link's register and wait until it is registered; when msg is
//  given the owner must receive the register_ok.
static void
s_register (s_coord_t *coord, ps_link_t *link, const char *peer, ps_msg_t *msg,
            int heartbeat_ms, int timeout_ms)
{
    s_coord_expect (coord, peer, PS_PROTO_REGISTER, S_WAIT_MS);
    s_send_register_ok (coord, peer, S_COORDINATOR, heartbeat_ms, timeout_ms);
    if (msg) {
        const ps_proto_t *got = s_owner_expect (link, msg, PS_PROTO_REGISTER_OK, S_WAIT_MS);
        assert_int_equal (got->register_ok.coordinator, S_COORDINATOR);
        assert_int_equal (got->register_ok.heartbeat_ms, (uint64_t) heartbeat_ms);
        assert_int_equal (got->register_ok.timeout_ms, (uint64_t) timeout_ms);
        assert_true (ps_link_registered (link));
    }
    else
        s_wait_registered (link, true, S_WAIT_MS);
}

//  The register the coordinator just received is worker:3's, from link,
//  with its fields and an id above the last one (*last_id, updated).
static void
s_check_register (s_coord_t *coord, ps_link_t *link, const char *peer, uint64_t *last_id)
{
    const ps_proto_register_t *reg = &ps_msg_proto (coord->msg)->register_;
    assert_string_equal (coord->peer, peer);
    assert_string_equal (reg->role, "worker");
    assert_string_equal (reg->endpoint, "");
    assert_int_equal (reg->index, 3);
    assert_int_equal (reg->incarnation, ps_link_incarnation (link));
    assert_int_equal (reg->pid, (uint64_t) getpid ());
    assert_true (ps_msg_id (coord->msg) > *last_id);
    *last_id = ps_msg_id (coord->msg);
    assert_false (ps_link_registered (link));
}

//  ---------------------------------------------------------------------

//  Until answered, the link registers every heartbeat interval, under the
//  routing id role:index:incarnation, with its fields.
static void
test_register_repeats (void **state)
{
    (void) state;
    s_coord_t coord;
    s_coord_open (&coord, "tcp://127.0.0.1:*");
    ps_link_t *link = s_link_new (coord.endpoint, "worker", 3, NULL, true, 50, 1000);
    uint64_t incarnation = ps_link_incarnation (link);
    assert_true (incarnation != 0);
    char peer [256];
    s_routing_id (link, "worker", 3, peer, sizeof peer);

    //  Registers are counted over 2 s from the first one on (while the
    //  connection is made the first few may come together).
    uint64_t last_id = 0;
    s_coord_expect (&coord, NULL, PS_PROTO_REGISTER, S_WAIT_MS);
    s_check_register (&coord, link, peer, &last_id);
    int registers = 0;
    double start = ps_clock_ms ();
    double now;
    while ((now = ps_clock_ms ()) < start + 2000) {
        const ps_proto_t *got = s_coord_recv (&coord, 10);
        if (!got)
            continue;
        assert_int_equal (got->type, PS_PROTO_REGISTER);
        s_check_register (&coord, link, peer, &last_id);
        registers++;
    }
    s_assert_rate (registers, now - start, 50, "registers");
    s_link_destroy (&link);
    s_coord_close (&coord);
}

//  After register_ok the link heartbeats at the interval it gives,
//  carrying its incarnation, and registers no more.
static void
test_heartbeats (void **state)
{
    (void) state;
    s_coord_t coord;
    s_coord_open (&coord, "tcp://127.0.0.1:*");
    //  The interval before register_ok is another, 20 times longer, so the
    //  test sees which one is used.
    ps_link_t *link = s_link_new (coord.endpoint, "worker", 0, NULL, true, 1000, S_QUIET_MS);
    ps_msg_t *msg = ps_msg_new ();
    char peer [256];
    s_routing_id (link, "worker", 0, peer, sizeof peer);
    s_register (&coord, link, peer, msg, 50, S_QUIET_MS);

    int heartbeats = 0;
    double start = ps_clock_ms ();
    double next_beat = start;
    double now;
    while ((now = ps_clock_ms ()) < start + 2000) {
        //  The coordinator's own heartbeats keep the link from timing out.
        if (now >= next_beat) {
            s_send_heartbeat (&coord, peer, S_COORDINATOR);
            next_beat += 100;
        }
        const ps_proto_t *got = s_coord_recv (&coord, 10);
        if (!got)
            continue;
        if (got->type == PS_PROTO_REGISTER)
            fail_msg ("a registered link sent register");
        assert_int_equal (got->type, PS_PROTO_HEARTBEAT);
        assert_string_equal (coord.peer, peer);
        assert_int_equal (got->heartbeat.incarnation, ps_link_incarnation (link));
        heartbeats++;
    }
    s_assert_rate (heartbeats, now - start, 50, "heartbeats");
    assert_true (ps_link_registered (link));
    s_owner_nothing (link, msg, 50);
    ps_msg_destroy (&msg);
    s_link_destroy (&link);
    s_coord_close (&coord);
}

//  work and other errors reach the owner; the owner's work_request
//  reaches the coordinator under the link's routing id.
static void
test_messages_both_ways (void **state)
{
    (void) state;
    s_coord_t coord;
    s_coord_open (&coord, "tcp://127.0.0.1:*");
    ps_link_t *link = s_link_new (coord.endpoint, "evaluator", 0, NULL, true, 50, S_QUIET_MS);
    ps_msg_t *msg = ps_msg_new ();
    char peer [256];
    s_routing_id (link, "evaluator", 0, peer, sizeof peer);
    s_register (&coord, link, peer, msg, 50, S_QUIET_MS);

    s_send_work (&coord, peer, 9, 42);
    const ps_proto_t *got = s_owner_expect (link, msg, PS_PROTO_WORK, S_WAIT_MS);
    assert_int_equal (ps_msg_id (msg), 9);
    assert_string_equal (got->work.kind, "train");
    assert_int_equal (got->work.step, 42);
    assert_int_equal (got->work.wait_ms, 4);

    s_send_error (&coord, peer, 10, PS_EINVAL);
    got = s_owner_expect (link, msg, PS_PROTO_ERROR, S_WAIT_MS);
    assert_string_equal (got->error.code, "invalid");

    ps_writer_t writer;
    ps_writer_init (&writer);
    ps_writer_encode (&writer, &(ps_proto_t) { .type = PS_PROTO_WORK_REQUEST, .id = 1234,
                                               .work_request.want = 1 });
    ps_error_t err;
    if (ps_link_send (link, &writer, &err))
        fail_msg ("ps_link_send: %s", err.msg);
    ps_writer_fini (&writer);
    got = s_coord_expect (&coord, NULL, PS_PROTO_WORK_REQUEST, S_WAIT_MS);
    assert_string_equal (coord.peer, peer);
    assert_int_equal (ps_msg_id (coord.msg), 1234);
    assert_int_equal (got->work_request.want, 1);
    assert_int_equal (got->work_request.reports.count, 0);

    ps_msg_destroy (&msg);
    s_link_destroy (&link);
    s_coord_close (&coord);
}

//  An error of code not_found makes the link register again, and is not
//  handed to the owner.
static void
test_not_found_reregisters (void **state)
{
    (void) state;
    s_coord_t coord;
    s_coord_open (&coord, "tcp://127.0.0.1:*");
    ps_link_t *link = s_link_new (coord.endpoint, "worker", 2, NULL, true, 50, S_QUIET_MS);
    ps_msg_t *msg = ps_msg_new ();
    char peer [256];
    s_routing_id (link, "worker", 2, peer, sizeof peer);
    s_register (&coord, link, peer, msg, 50, S_QUIET_MS);

    s_coord_expect (&coord, peer, PS_PROTO_HEARTBEAT, S_WAIT_MS);
    s_send_error (&coord, peer, ps_msg_id (coord.msg), PS_ENOTFOUND);
    const ps_proto_t *got = s_coord_expect (&coord, peer, PS_PROTO_REGISTER, S_WAIT_MS);
    assert_int_equal (got->register_.incarnation, ps_link_incarnation (link));
    assert_false (ps_link_registered (link));
    s_owner_nothing (link, msg, 100);

    s_send_register_ok (&coord, peer, S_COORDINATOR, 50, S_QUIET_MS);
    s_owner_expect (link, msg, PS_PROTO_REGISTER_OK, S_WAIT_MS);
    assert_true (ps_link_registered (link));
    ps_msg_destroy (&msg);
    s_link_destroy (&link);
    s_coord_close (&coord);
}

//  A heartbeat from the registered coordinator changes nothing; one with a
//  new incarnation (the coordinator restarted) makes the link register.
static void
test_new_coordinator_incarnation (void **state)
{
    (void) state;
    s_coord_t coord;
    s_coord_open (&coord, "tcp://127.0.0.1:*");
    ps_link_t *link = s_link_new (coord.endpoint, "worker", 0, NULL, true, 50, S_QUIET_MS);
    ps_msg_t *msg = ps_msg_new ();
    char peer [256];
    s_routing_id (link, "worker", 0, peer, sizeof peer);
    s_register (&coord, link, peer, msg, 50, S_QUIET_MS);

    //  Registers sent before the answer arrived may still be on their way;
    //  the link's messages come in order, so none follows its first
    //  heartbeat. The same below.
    s_coord_expect (&coord, peer, PS_PROTO_HEARTBEAT, S_WAIT_MS);
    s_send_heartbeat (&coord, peer, S_COORDINATOR);
    s_coord_refute (&coord, PS_PROTO_REGISTER, 200);
    assert_true (ps_link_registered (link));

    s_send_heartbeat (&coord, peer, S_COORDINATOR + 1);
    s_coord_expect (&coord, peer, PS_PROTO_REGISTER, S_WAIT_MS);
    s_owner_nothing (link, msg, 50);
    s_send_register_ok (&coord, peer, S_COORDINATOR + 1, 50, S_QUIET_MS);
    const ps_proto_t *got = s_owner_expect (link, msg, PS_PROTO_REGISTER_OK, S_WAIT_MS);
    assert_int_equal (got->register_ok.coordinator, S_COORDINATOR + 1);
    s_coord_expect (&coord, peer, PS_PROTO_HEARTBEAT, S_WAIT_MS);
    //  The new incarnation is the registered one now.
    s_send_heartbeat (&coord, peer, S_COORDINATOR + 1);
    s_coord_refute (&coord, PS_PROTO_REGISTER, 150);
    ps_msg_destroy (&msg);
    s_link_destroy (&link);
    s_coord_close (&coord);
}

//  A coordinator silent for timeout_ms is declared gone: the owner gets an
//  error of code timeout naming it, and the link registers again.
static void
test_silence_times_out (void **state)
{
    (void) state;
    s_coord_t coord;
    s_coord_open (&coord, "tcp://127.0.0.1:*");
    //  Until register_ok the link waits S_LONG_MS: for the register_ok,
    //  which therefore wakes it and is seen no earlier than sent, and
    //  before it declares silence, so that a link which kept this timeout
    //  instead of register_ok's 300 ms fails.
    ps_link_t *link = s_link_new (coord.endpoint, "worker", 5, NULL, true, S_LONG_MS, S_LONG_MS);
    ps_msg_t *msg = ps_msg_new ();
    char peer [256];
    s_routing_id (link, "worker", 5, peer, sizeof peer);
    s_coord_expect (&coord, peer, PS_PROTO_REGISTER, S_WAIT_MS);
    double sent = ps_clock_ms ();
    s_send_register_ok (&coord, peer, S_COORDINATOR, 50, 300);
    s_owner_expect (link, msg, PS_PROTO_REGISTER_OK, S_WAIT_MS);

    //  The silence counts from the register_ok on, so the error comes 300
    //  ms after it was sent or later; how much later depends on the load.
    const ps_proto_t *got = s_owner_expect (link, msg, PS_PROTO_ERROR, S_WAIT_MS);
    double silent = ps_clock_ms () - sent;
    print_message ("timed out %.0f ms after register_ok\n", silent);
    if (silent < 300)
        fail_msg ("timed out after %.0f ms of silence, before the 300 ms of register_ok", silent);
    assert_int_equal (ps_error_from_name (got->error.code), PS_ETIMEDOUT);
    const char *message = got->error.message;
    if (!strstr (message, coord.endpoint) || !strstr (message, "silent"))
        fail_msg ("timeout message \"%s\" does not name %s", message, coord.endpoint);
    assert_false (ps_link_registered (link));

    //  Registering resumes, and succeeds.
    s_register (&coord, link, peer, msg, 50, S_QUIET_MS);
    ps_msg_destroy (&msg);
    s_link_destroy (&link);
    s_coord_close (&coord);
}

//  A coordinator's heartbeat with done marks the run finished; the mark
//  outlives the coordinator's silence (that is what it is for) and the
//  re-registering that follows, and a register_ok clears it. Heartbeats
//  without done, or with done from another coordinator incarnation, do
//  not set it.
static void
test_finished_outlives_silence (void **state)
{
    (void) state;
    s_coord_t coord;
    s_coord_open (&coord, "tcp://127.0.0.1:*");
    ps_link_t *link = s_link_new (coord.endpoint, "worker", 2, NULL, true, 50, S_QUIET_MS);
    ps_msg_t *msg = ps_msg_new ();
    char peer [256];
    s_routing_id (link, "worker", 2, peer, sizeof peer);
    assert_false (ps_link_finished (link));
    s_register (&coord, link, peer, msg, 50, S_QUIET_MS);

    //  Plain heartbeats, then one with done from a coordinator that is not
    //  the registered one (which makes the link register again instead).
    for (int i = 0; i < 3; i++) {
        s_send_heartbeat (&coord, peer, S_COORDINATOR);
        harness_sleep_ms (20);
    }
    assert_false (ps_link_finished (link));
    s_send_heartbeat_done (&coord, peer, S_COORDINATOR + 1, true);
    s_wait_registered (link, false, S_WAIT_MS);
    assert_false (ps_link_finished (link));

    //  The registered coordinator says the run is over, then falls silent
    //  for its timeout of 1 s. The heartbeat with done follows register_ok
    //  at once, so the link reads it long before the silence is up (and
    //  the test need not be scheduled in time to send it).
    s_coord_expect (&coord, peer, PS_PROTO_REGISTER, S_WAIT_MS);
    s_send_register_ok (&coord, peer, S_COORDINATOR, 50, 1000);
    s_send_heartbeat_done (&coord, peer, S_COORDINATOR, true);
    s_owner_expect (link, msg, PS_PROTO_REGISTER_OK, S_WAIT_MS);
    s_wait_flag (link, ps_link_finished, "ps_link_finished", true, S_WAIT_MS);
    const ps_proto_t *got = s_owner_expect (link, msg, PS_PROTO_ERROR, S_WAIT_MS);
    assert_int_equal (ps_error_from_name (got->error.code), PS_ETIMEDOUT);
    assert_false (ps_link_registered (link));
    assert_true (ps_link_finished (link));

    //  A coordinator that registers the process again runs a job anew.
    s_register (&coord, link, peer, msg, 50, S_QUIET_MS);
    assert_false (ps_link_finished (link));
    ps_msg_destroy (&msg);
    s_link_destroy (&link);
    s_coord_close (&coord);
}

//  A link that does not deliver (a ps-server's) hands the owner nothing:
//  neither register_ok, nor work, nor the timeout.
static void
test_no_delivery (void **state)
{
    (void) state;
    s_coord_t coord;
    s_coord_open (&coord, "tcp://127.0.0.1:*");
    ps_link_t *link = s_link_new (coord.endpoint, "ps", 1, "tcp://127.0.0.1:7777", false, 50,
                                  S_QUIET_MS);
    ps_msg_t *msg = ps_msg_new ();
    char peer [256];
    s_routing_id (link, "ps", 1, peer, sizeof peer);
    const ps_proto_t *got = s_coord_expect (&coord, peer, PS_PROTO_REGISTER, S_WAIT_MS);
    assert_string_equal (got->register_.role, "ps");
    assert_string_equal (got->register_.endpoint, "tcp://127.0.0.1:7777");
    //  Its heartbeats say the link registered (it may time out soon after,
    //  so its flag could be missed); registers before them are stale.
    s_send_register_ok (&coord, peer, S_COORDINATOR, 50, 300);
    s_coord_expect (&coord, peer, PS_PROTO_HEARTBEAT, S_WAIT_MS);
    s_send_work (&coord, peer, 3, 1);
    s_owner_nothing (link, msg, 200);

    //  Silence: the link registers again, the owner hears nothing.
    s_coord_expect (&coord, peer, PS_PROTO_REGISTER, S_WAIT_MS);
    assert_false (ps_link_registered (link));
    s_owner_nothing (link, msg, 50);
    ps_msg_destroy (&msg);
    s_link_destroy (&link);
    s_coord_close (&coord);
}

//  ps_link_recv gives up after its timeout.
static void
test_recv_timeout (void **state)
{
    (void) state;
    char endpoint [64];
    harness_free_endpoint (endpoint, sizeof endpoint);
    ps_link_t *link = s_link_new (endpoint, "worker", 0, NULL, true, 0, 0);
    ps_msg_t *msg = ps_msg_new ();
    ps_error_t err;
    //  It waits out its deadline on the monotonic clock, never less;
    //  longer only as long as the load delays it.
    double start = ps_clock_ms ();
    assert_int_equal (ps_link_recv (link, msg, 200, &err), PS_ETIMEDOUT);
    double took = ps_clock_ms () - start;
    if (took < 200 || took > S_WAIT_MS)
        fail_msg ("ps_link_recv with 200 ms returned after %.0f ms", took);
    assert_non_null (strstr (err.msg, endpoint));
    start = ps_clock_ms ();
    assert_int_equal (ps_link_recv (link, msg, 0, &err), PS_ETIMEDOUT);
    took = ps_clock_ms () - start;
    if (took > S_WAIT_MS)
        fail_msg ("ps_link_recv with 0 ms returned after %.0f ms", took);
    ps_msg_destroy (&msg);
    s_link_destroy (&link);
}

//  An owner that never reads costs only dropped messages: heartbeats go on,
//  and destroy stays prompt with the queue full.
static void
test_owner_never_reads (void **state)
{
    (void) state;
    s_coord_t coord;
    s_coord_open (&coord, "tcp://127.0.0.1:*");
    ps_link_t *link = s_link_new (coord.endpoint, "worker", 0, NULL, true, 50, S_QUIET_MS);
    char peer [256];
    s_routing_id (link, "worker", 0, peer, sizeof peer);
    s_register (&coord, link, peer, NULL, 50, S_QUIET_MS);

    const int flood = 5000;
    for (int i = 0; i < flood; i++)
        s_send_work (&coord, peer, (uint64_t) i + 1, (uint64_t) i);
    //  Heartbeats continue while the owner's queue is full.
    for (int i = 0; i < 4; i++)
        s_coord_expect (&coord, peer, PS_PROTO_HEARTBEAT, S_WAIT_MS);
    assert_true (ps_link_registered (link));

    //  The owner then finds register_ok and the messages that fitted, in
    //  order.
    ps_msg_t *msg = ps_msg_new ();
    s_owner_expect (link, msg, PS_PROTO_REGISTER_OK, S_WAIT_MS);
    int works = 0;
    uint64_t last_step = 0;
    ps_error_t err;
    while (ps_link_recv (link, msg, 100, &err) == 0) {
        assert_int_equal (ps_msg_proto (msg)->type, PS_PROTO_WORK);
        uint64_t step = ps_msg_proto (msg)->work.step;
        assert_true (works == 0 || step > last_step);
        last_step = step;
        works++;
    }
    if (works < 100 || works >= flood)
        fail_msg ("%d of %d messages reached the owner that did not read", works, flood);
    ps_msg_destroy (&msg);

    //  Fill the queue again and destroy with it full.
    for (int i = 0; i < flood; i++)
        s_send_work (&coord, peer, (uint64_t) i + 1, (uint64_t) i);
    s_coord_expect (&coord, peer, PS_PROTO_HEARTBEAT, S_WAIT_MS);
    s_link_destroy (&link);
    s_coord_close (&coord);
}

//  Destroy is prompt whatever the link is doing, also with intervals far
//  longer than S_DESTROY_MS: registering, and registered.
static void
test_destroy_prompt (void **state)
{
    (void) state;
    s_coord_t coord;
    s_coord_open (&coord, "tcp://127.0.0.1:*");
    ps_link_t *link = s_link_new (coord.endpoint, "worker", 0, NULL, true, S_LONG_MS, S_LONG_MS);
    s_coord_expect (&coord, NULL, PS_PROTO_REGISTER, S_WAIT_MS);
    s_link_destroy (&link);

    link = s_link_new (coord.endpoint, "worker", 0, NULL, true, 500, 3000);
    char peer [256];
    s_routing_id (link, "worker", 0, peer, sizeof peer);
    s_register (&coord, link, peer, NULL, S_LONG_MS, S_LONG_MS);
    s_link_destroy (&link);
    s_link_destroy (&link);     //  harmless on NULL
    s_coord_close (&coord);
}

//  Two links in one process keep apart: their own incarnations, routing
//  ids and messages.
static void
test_two_links (void **state)
{
    (void) state;
    s_coord_t coord;
    s_coord_open (&coord, "tcp://127.0.0.1:*");
    ps_link_t *links [2];
    ps_msg_t *msgs [2];
    char peers [2][256];
    for (int i = 0; i < 2; i++) {
        links [i] = s_link_new (coord.endpoint, "worker", i, NULL, true, 50, S_QUIET_MS);
        msgs [i] = ps_msg_new ();
        s_routing_id (links [i], "worker", i, peers [i], sizeof peers [i]);
    }
    assert_true (ps_link_incarnation (links [0]) != ps_link_incarnation (links [1]));
    for (int i = 0; i < 2; i++) {
        const ps_proto_t *got = s_coord_expect (&coord, peers [i], PS_PROTO_REGISTER, S_WAIT_MS);
        assert_int_equal (got->register_.index, (uint64_t) i);
        assert_int_equal (got->register_.incarnation, ps_link_incarnation (links [i]));
        s_send_register_ok (&coord, peers [i], S_COORDINATOR, 50, S_QUIET_MS);
    }
    for (int i = 0; i < 2; i++)
        s_owner_expect (links [i], msgs [i], PS_PROTO_REGISTER_OK, S_WAIT_MS);
    s_send_work (&coord, peers [0], 1, 100);
    s_send_work (&coord, peers [1], 2, 200);
    for (int i = 0; i < 2; i++) {
        const ps_proto_t *got = s_owner_expect (links [i], msgs [i], PS_PROTO_WORK, S_WAIT_MS);
        assert_int_equal (got->work.step, (uint64_t) (i + 1) * 100);
        s_owner_nothing (links [i], msgs [i], 20);
    }
    for (int i = 0; i < 2; i++) {
        ps_msg_destroy (&msgs [i]);
        s_link_destroy (&links [i]);
    }
    s_coord_close (&coord);
}

//  A coordinator that starts after the link still gets its registration.
static void
test_late_coordinator (void **state)
{
    (void) state;
    char endpoint [64];
    harness_free_endpoint (endpoint, sizeof endpoint);
    ps_link_t *link = s_link_new (endpoint, "worker", 4, NULL, true, 50, S_QUIET_MS);
    harness_sleep_ms (300);
    s_coord_t coord;
    s_coord_open (&coord, endpoint);
    ps_msg_t *msg = ps_msg_new ();
    char peer [256];
    s_routing_id (link, "worker", 4, peer, sizeof peer);
    s_register (&coord, link, peer, msg, 50, S_QUIET_MS);
    ps_msg_destroy (&msg);
    s_link_destroy (&link);
    s_coord_close (&coord);
}

//  A link talks to the holder of chief:0's key only: a coordinator with
//  another key of the cluster (ps:0's), or with no CURVE at all, never
//  hears from it, and the link does not count itself registered. The real
//  coordinator, bound on the same endpoint after the first impostor, gets
//  the register. (The second impostor has a link of its own: ZeroMQ may
//  take the mismatch of mechanisms for a protocol error, after which a
//  socket stops reconnecting to that endpoint.)
static void
test_impostor_coordinator (void **state)
{
    (void) state;
    s_coord_t impostor;
    s_coord_open_as (&impostor, "tcp://127.0.0.1:*", "ps:0");
    char endpoint [64];
    snprintf (endpoint, sizeof endpoint, "%s", impostor.endpoint);
    ps_link_t *link = s_link_new (endpoint, "worker", 1, NULL, true, 50, S_QUIET_MS);
    s_coord_refute (&impostor, PS_PROTO_REGISTER, 500);
    s_coord_close (&impostor);
    assert_false (ps_link_registered (link));

    s_coord_open_as (&impostor, "tcp://127.0.0.1:*", NULL);
    ps_link_t *other = s_link_new (impostor.endpoint, "worker", 2, NULL, true, 50, S_QUIET_MS);
    s_coord_refute (&impostor, PS_PROTO_REGISTER, 500);
    assert_false (ps_link_registered (other));
    s_link_destroy (&other);
    s_coord_close (&impostor);

    s_coord_t coord;
    s_coord_open (&coord, endpoint);
    char peer [256];
    s_routing_id (link, "worker", 1, peer, sizeof peer);
    s_register (&coord, link, peer, NULL, 50, S_QUIET_MS);
    s_link_destroy (&link);
    s_coord_close (&coord);
}

//  Bad configurations are refused at ps_link_new, naming the problem.
static void
test_bad_config (void **state)
{
    (void) state;
    ps_error_t err;
    ps_link_config_t config = { .coordinator = "nonsense", .role = "worker", .deliver = true };
    assert_null (ps_link_new (&config, &err));
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "nonsense"));
    config.coordinator = "tcp://127.0.0.1:1";
    config.role = NULL;
    assert_null (ps_link_new (&config, &err));
    assert_int_equal (err.code, PS_EINVAL);
    config.role = "worker";
    config.index = -1;
    assert_null (ps_link_new (&config, &err));
    assert_int_equal (err.code, PS_EINVAL);
}

//  The coordinator's timeout in test_stopped_process: the test's
//  coordinator must not go unscheduled that long, and the child is stopped
//  for twice as long.
#define S_STOP_TIMEOUT_MS   3000

//  The child of test_stopped_process: registers as worker:7, then counts
//  the timeouts it is told of until the coordinator's work says the test
//  is over. Exits with that count, or 100 on failure.
static int
s_stopped_child (const char *endpoint, ps_curve_t *curve)
{
    ps_link_config_t config = {
        .coordinator = endpoint, .role = "worker", .index = 7,
        .heartbeat_ms = 50, .timeout_ms = S_QUIET_MS, .deliver = true, .curve = curve,
    };
    ps_error_t err;
    ps_link_t *link = ps_link_new (&config, &err);
    if (!link)
        return 100;
    ps_msg_t *msg = ps_msg_new ();
    int timeouts = 0;
    if (ps_link_recv (link, msg, S_WAIT_MS, &err) != 0
    ||  ps_msg_proto (msg)->type != PS_PROTO_REGISTER_OK)
        timeouts = 100;
    bool over = false;
    double end = ps_clock_ms () + S_QUIET_MS;
    while (!over && timeouts < 100 && ps_clock_ms () < end) {
        if (ps_link_recv (link, msg, 50, &err) != 0)
            continue;
        if (ps_msg_proto (msg)->type == PS_PROTO_ERROR)
            timeouts++;
        over = ps_msg_proto (msg)->type == PS_PROTO_WORK;
    }
    if (!over)
        timeouts = 100;
    ps_msg_destroy (&msg);
    ps_link_destroy (&link);
    return timeouts;
}

//  A process stopped (SIGSTOP) longer than the timeout while the
//  coordinator kept sending heartbeats finds them on resuming, and does not
//  declare the coordinator gone.
static void
test_stopped_process (void **state)
{
    (void) state;
    char endpoint [64];
    harness_free_endpoint (endpoint, sizeof endpoint);
    //  The child links from a ZeroMQ context of its own, made after the
    //  fork, with an identity made before it: a connecting socket needs no
    //  authenticator, and one started in the child would run in a copy of
    //  this process's ZeroMQ context whose threads the child does not have.
    //  The coordinator binds once the child runs.
    ps_curve_t *curve = harness_curve ("worker:7");
    pid_t child = fork ();
    assert_true (child >= 0);
    if (child == 0)
        _exit (s_stopped_child (endpoint, curve));
    s_coord_t coord;
    s_coord_open (&coord, endpoint);
    s_coord_expect (&coord, NULL, PS_PROTO_REGISTER, S_WAIT_MS);
    char peer [256];
    snprintf (peer, sizeof peer, "%s", coord.peer);
    s_send_register_ok (&coord, peer, S_COORDINATOR, 50, S_STOP_TIMEOUT_MS);
    //  The registers the child queued before this coordinator was bound
    //  come in before its first heartbeat; only one after it would be new.
    s_coord_expect (&coord, peer, PS_PROTO_HEARTBEAT, S_WAIT_MS);

    //  Stopped for twice the timeout, then a second of heartbeats after
    //  resuming, then the work that ends the child's count.
    double start = ps_clock_ms ();
    double stop_at = start + 200;
    double resume_at = stop_at + 2 * S_STOP_TIMEOUT_MS;
    double next_beat = start;
    bool stopped = false, resumed = false;
    double now;
    while ((now = ps_clock_ms ()) < resume_at + 1000) {
        if (!stopped && now > stop_at) {
            assert_int_equal (kill (child, SIGSTOP), 0);
            stopped = true;
        }
        if (stopped && !resumed && now > resume_at) {
            assert_int_equal (kill (child, SIGCONT), 0);
            resumed = true;
        }
        if (now >= next_beat) {
            s_send_heartbeat (&coord, peer, S_COORDINATOR);
            next_beat += 50;
        }
        const ps_proto_t *got = s_coord_recv (&coord, 5);
        if (got && got->type == PS_PROTO_REGISTER)
            fail_msg ("the resumed process registered again");
    }
    s_send_work (&coord, peer, 1, 1);
    int status = 0;
    assert_int_equal (waitpid (child, &status, 0), child);
    assert_true (WIFEXITED (status));
    if (WEXITSTATUS (status) != 0)
        fail_msg ("the resumed process was told of %d coordinator timeouts%s",
                  WEXITSTATUS (status), WEXITSTATUS (status) == 100 ? " (or failed)" : "");
    s_coord_close (&coord);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_register_repeats),
        cmocka_unit_test (test_heartbeats),
        cmocka_unit_test (test_messages_both_ways),
        cmocka_unit_test (test_not_found_reregisters),
        cmocka_unit_test (test_new_coordinator_incarnation),
        cmocka_unit_test (test_silence_times_out),
        cmocka_unit_test (test_finished_outlives_silence),
        cmocka_unit_test (test_no_delivery),
        cmocka_unit_test (test_recv_timeout),
        cmocka_unit_test (test_owner_never_reads),
        cmocka_unit_test (test_destroy_prompt),
        cmocka_unit_test (test_two_links),
        cmocka_unit_test (test_late_coordinator),
        cmocka_unit_test (test_impostor_coordinator),
        cmocka_unit_test (test_bad_config),
        cmocka_unit_test (test_stopped_process),
    };
    return harness_finish (cmocka_run_group_tests (tests, NULL, NULL));
}
