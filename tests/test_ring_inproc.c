//  A ring (worker/ps_ring.h) in this process, whose only peer is missing
//  or played by the test: the watch (a file descriptor, a ZeroMQ socket,
//  and the 100 ms calls) returning PS_ECANCELED, over sockets and in the
//  shared memory of a ring of one host; the names of that memory left by
//  dead rings removed, those of live ones kept; malformed, stale and
//  future messages, counted and harmless, and a chunk that does not fit
//  (PS_EPROTO); the wire format against a peer played on raw ZeroMQ, with
//  messages of the next collective held until it starts; and bad
//  arguments and endpoints.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "harness.h"
#include "harness_case.h"
#include "harness_ring.h"
#include "harness_ring_wire.h"
#include "ps_clock.h"
#include "ps_curve.h"


//  The member tasks of the in-process rings: this process is worker:0,
//  its peer worker:1.
static const int s_lone_tasks [] = { 0, 1 };

//  A ring in this process as member 0 of two, whose member 1 is `peer`.
static ps_ring_t *
s_lone_ring (uint64_t ring_id, const char *peer, int timeout_ms)
{
    ps_ring_config_t config = { .bind = "tcp://127.0.0.1:*", .timeout_ms = timeout_ms,
                                .curve = harness_curve ("worker:0") };
    ps_error_t err;
    ps_ring_t *ring = ps_ring_new (&config, &err);
    if (!ring)
        fail_msg ("ps_ring_new: %s", err.msg);
    const char *members [] = { ps_ring_endpoint (ring), peer };
    if (ps_ring_form (ring, ring_id, 0, 2, members, s_lone_tasks, &err))
        fail_msg ("ps_ring_form: %s", err.msg);
    return ring;
}

//  Something that pokes the watch from a thread after a delay.
typedef struct {
    int delay_ms;
    int fd;                     //  written when >= 0
    void *socket;               //  sent "abort" when not NULL
    double poked_at;
} s_poke_t;

static void *
s_poke (void *arg)
{
    s_poke_t *poke = arg;
    harness_sleep_ms (poke->delay_ms);
    poke->poked_at = ps_clock_ms ();
    if (poke->fd >= 0 && write (poke->fd, "x", 1) != 1)
        fprintf (stderr, "test_ring: poking the watch pipe: %s\n", strerror (errno));
    if (poke->socket && zmq_send (poke->socket, "abort", 5, 0) != 5)
        fprintf (stderr, "test_ring: poking the watch socket: %s\n", zmq_strerror (errno));
    return NULL;
}

//  What the watch functions see.
typedef struct {
    int fd;
    void *socket;
    double start;
    double abort_after_ms;      //  the periodic watch aborts this long after start
    int calls;
} s_watch_t;

static bool
s_watch_fd (void *arg)
{
    s_watch_t *watch = arg;
    watch->calls++;
    struct pollfd item = { .fd = watch->fd, .events = POLLIN };
    return poll (&item, 1, 0) == 1;
}

static bool
s_watch_socket (void *arg)
{
    s_watch_t *watch = arg;
    watch->calls++;
    char buf [16];
    return zmq_recv (watch->socket, buf, sizeof buf, ZMQ_DONTWAIT) == 5;
}

static bool
s_watch_clock (void *arg)
{
    s_watch_t *watch = arg;
    watch->calls++;
    return ps_clock_ms () - watch->start >= watch->abort_after_ms;
}

//  Run an all-reduce that only the watch can end; check PS_ECANCELED and
//  return how long it took.
static double
s_cancel_run (ps_ring_t *ring)
{
    float data [1000] = { 0 };
    ps_error_t err;
    double start = ps_clock_ms ();
    int rc = ps_ring_allreduce (ring, data, 1000, &err);
    double elapsed = ps_clock_ms () - start;
    if (rc != PS_ECANCELED)
        fail_msg ("expected PS_ECANCELED, got %d: %s", rc, rc ? err.msg : "");
    assert_non_null (strstr (err.msg, "aborted by the watch"));
    //  The ring is broken until it is formed again.
    assert_int_equal (ps_ring_allreduce (ring, data, 1000, &err), PS_EINVAL);
    return elapsed;
}

//  A watch on a pipe, poked from a thread after 200 ms, aborts an
//  all-reduce of ring (whose peer never comes) soon after the poke, and
//  is called in between too.
static void
s_fd_watch_run (ps_ring_t *ring)
{
    int fds [2];
    assert_int_equal (pipe (fds), 0);
    s_watch_t watch = { .fd = fds [0] };
    ps_ring_set_watch (ring, NULL, fds [0], s_watch_fd, &watch);
    s_poke_t poke = { .delay_ms = 200, .fd = fds [1] };
    pthread_t thread;
    assert_int_equal (pthread_create (&thread, NULL, s_poke, &poke), 0);
    double elapsed = s_cancel_run (ring);
    double end = ps_clock_ms ();
    assert_int_equal (pthread_join (thread, NULL), 0);
    //  The poke's thread may start its delay before this one starts the
    //  all-reduce, so the abort is checked against the poke's own time:
    //  the call cannot have returned before the poke, and must soon after.
    double late = end - poke.poked_at;
    if (late > HARNESS_RING_SLACK_MS || late < 0)
        fail_msg ("the fd watch aborted %.0f ms after the poke (after %.0f ms)", late, elapsed);
    assert_true (watch.calls >= 2);         //  the periodic calls came too
    ps_ring_set_watch (ring, NULL, -1, NULL, NULL);
    assert_int_equal (close (fds [0]), 0);
    assert_int_equal (close (fds [1]), 0);
}

static void
test_watch (void **state)
{
    (void) state;
    char absent [64];
    harness_free_endpoint (absent, sizeof absent);

    //  A file descriptor.
    ps_ring_t *ring = s_lone_ring (1, absent, 20000);
    s_fd_watch_run (ring);
    ps_ring_destroy (&ring);
    assert_null (ring);

    //  A ZeroMQ socket of another context.
    ring = s_lone_ring (1, absent, 20000);
    void *ctx = zmq_ctx_new ();
    void *reader = zmq_socket (ctx, ZMQ_PAIR);
    void *writer = zmq_socket (ctx, ZMQ_PAIR);
    assert_int_equal (zmq_bind (reader, "inproc://test-ring-watch"), 0);
    assert_int_equal (zmq_connect (writer, "inproc://test-ring-watch"), 0);
    s_watch_t watch = { .socket = reader };
    ps_ring_set_watch (ring, reader, -1, s_watch_socket, &watch);
    s_poke_t poke = { .delay_ms = 200, .fd = -1, .socket = writer };
    pthread_t thread;
    assert_int_equal (pthread_create (&thread, NULL, s_poke, &poke), 0);
    double elapsed = s_cancel_run (ring);
    double end = ps_clock_ms ();
    assert_int_equal (pthread_join (thread, NULL), 0);
    double late = end - poke.poked_at;
    if (late > HARNESS_RING_SLACK_MS || late < 0)
        fail_msg ("the socket watch aborted %.0f ms after the poke (after %.0f ms)", late,
                  elapsed);
    ps_ring_destroy (&ring);
    assert_int_equal (zmq_close (reader), 0);
    assert_int_equal (zmq_close (writer), 0);
    assert_int_equal (zmq_ctx_term (ctx), 0);

    //  No socket or descriptor: the function is called every 100 ms, on
    //  average over 2 s; a process that went unscheduled misses calls, so
    //  a quarter of them will do, and twice as many is a watch called too
    //  often.
    ring = s_lone_ring (1, absent, 20000);
    watch = (s_watch_t) { .start = ps_clock_ms (), .abort_after_ms = 2000 };
    ps_ring_set_watch (ring, NULL, -1, s_watch_clock, &watch);
    elapsed = s_cancel_run (ring);
    //  The watch's clock started before the all-reduce's, by however long
    //  this thread took in between: its abort is timed from the watch's start.
    double after = ps_clock_ms () - watch.start;
    if (after < 2000 || after > 2000 + HARNESS_RING_SLACK_MS)
        fail_msg ("the periodic watch aborted after %.0f ms of its clock", after);
    double expected = elapsed / 100;
    print_message ("    the periodic watch: %d calls in %.0f ms\n", watch.calls, elapsed);
    if (watch.calls < expected / 4 || watch.calls > expected * 2 + 2)
        fail_msg ("the watch was called %d times in %.0f ms, expected about %.0f", watch.calls,
                  elapsed, expected);

    //  Formed again (alone), the ring works, and the watch stays quiet.
    ps_error_t err;
    const char *alone [] = { ps_ring_endpoint (ring) };
    assert_int_equal (ps_ring_form (ring, 2, 0, 1, alone, s_lone_tasks, &err), 0);
    float one = 1;
    assert_int_equal (ps_ring_allreduce (ring, &one, 1, &err), 0);
    assert_true (one == 1);
    ps_ring_destroy (&ring);
}

//  An unsecured ring of two members of this host, both in this process,
//  of which only the first (returned) runs collectives: its all-reduces
//  wait in their shared memory for a member that never comes.
static ps_ring_t *
s_shm_pair (ps_ring_t **other, uint64_t ring_id, int timeout_ms)
{
    ps_ring_config_t config = { .bind = "tcp://127.0.0.1:*", .timeout_ms = timeout_ms };
    ps_error_t err;
    ps_ring_t *ring = ps_ring_new (&config, &err);
    if (!ring || !(*other = ps_ring_new (&config, &err)))
        fail_msg ("ps_ring_new: %s", err.msg);
    const char *members [] = { ps_ring_advert (ring), ps_ring_advert (*other) };
    if (ps_ring_form (ring, ring_id, 0, 2, members, NULL, &err))
        fail_msg ("ps_ring_form: %s", err.msg);
    return ring;
}

//  In shared memory too, a watch on a descriptor aborts an all-reduce
//  soon after it is poked (and is called in between), and without a
//  watch the all-reduce gives up after the timeout, saying where it
//  waited. Either way the ring must be formed again.
static void
test_watch_shared_memory (void **state)
{
    (void) state;
    ps_ring_t *other;
    ps_ring_t *ring = s_shm_pair (&other, 1, 20000);
    s_fd_watch_run (ring);
    ps_ring_stats_t stats;
    ps_ring_stats (ring, &stats);
    assert_int_equal (stats.collectives, 0);
    assert_int_equal (stats.shared_memory, 0);
    ps_ring_destroy (&ring);
    ps_ring_destroy (&other);

    ring = s_shm_pair (&other, 2, HARNESS_RING_TIMEOUT_MS);
    float data [1000] = { 0 };
    ps_error_t err;
    double start = ps_clock_ms ();
    int rc = ps_ring_allreduce (ring, data, 1000, &err);
    double elapsed = ps_clock_ms () - start;
    if (rc != PS_ETIMEDOUT)
        fail_msg ("expected PS_ETIMEDOUT, got %d: %s", rc, rc ? err.msg : "");
    if (elapsed < HARNESS_RING_TIMEOUT_MS - 1
    ||  elapsed > HARNESS_RING_TIMEOUT_MS + HARNESS_RING_SLACK_MS)
        fail_msg ("timed out after %.0f ms: %s", elapsed, err.msg);
    if (!strstr (err.msg, "shared memory") || !strstr (err.msg, "1 of 2 members"))
        fail_msg ("the timeout does not say where it waited: %s", err.msg);
    assert_int_equal (ps_ring_allreduce (ring, data, 1000, &err), PS_EINVAL);
    ps_ring_destroy (&ring);
    ps_ring_destroy (&other);
}

//  The names of ring memory that no process holds, left more than a
//  minute ago by rings whose members all died before their first
//  barrier, go when the next ring of this host is formed; one that a
//  process holds stays, however old.
static void
test_shm_sweep (void **state)
{
    (void) state;
    char names [2][64];
    int fds [2];
    for (int i = 0; i < 2; i++) {
        snprintf (names [i], sizeof names [i], "/ps-ring-%u-test-%s-%d", (unsigned) geteuid (),
                  i ? "held" : "stale", (int) getpid ());
        fds [i] = shm_open (names [i], O_RDWR | O_CREAT | O_EXCL, 0600);
        assert_true (fds [i] >= 0);
        struct timespec old [2] = { { time (NULL) - 120, 0 }, { time (NULL) - 120, 0 } };
        assert_int_equal (futimens (fds [i], old), 0);
    }
    assert_int_equal (close (fds [0]), 0);
    assert_int_equal (flock (fds [1], LOCK_SH), 0);
    ps_ring_t *other;
    ps_ring_t *ring = s_shm_pair (&other, 1, 20000);
    int fd = shm_open (names [0], O_RDONLY, 0);
    if (fd >= 0)
        fail_msg ("%s is still there", names [0]);
    assert_int_equal (errno, ENOENT);
    fd = shm_open (names [1], O_RDONLY, 0);
    if (fd < 0)
        fail_msg ("%s, held, was removed: %s", names [1], strerror (errno));
    assert_int_equal (close (fd), 0);
    assert_int_equal (shm_unlink (names [1]), 0);
    assert_int_equal (close (fds [1]), 0);
    ps_ring_destroy (&ring);
    ps_ring_destroy (&other);
}

//  Malformed, stale and future messages at a member whose only peer is
//  the injector, ending with a chunk of the collective under way that
//  does not fit: PS_EPROTO, every bad message counted.
static void
test_malformed_in_process (void **state)
{
    (void) state;
    char absent [64];
    harness_free_endpoint (absent, sizeof absent);
    ps_ring_t *ring = s_lone_ring (7, absent, HARNESS_RING_TIMEOUT_MS);
    const char *endpoint = ps_ring_endpoint (ring);
    //  One connection, so that the member reads the messages in order,
    //  from the predecessor's key.
    harness_injector_t injector;
    harness_inject_open (&injector, endpoint, "worker:1", "worker:0");
    int malformed = harness_inject_malformed (&injector, 7, 0);

    //  A stale message (ring 3), one of a later ring (9), held, and then
    //  a reduce-scatter slice of this collective at bytes [0, 4000) of the
    //  4000-byte vector, where the predecessor's segment is [2000, 4000).
    float payload [1000] = { 0 };
    harness_wire_t wire = harness_wire (3, 0, 0, 16, 16);
    harness_inject (&injector, &wire, payload, 16);
    wire = harness_wire (9, 0, 0, 16, 16);
    harness_inject (&injector, &wire, payload, 16);
    wire = harness_wire (7, 0, 0, sizeof payload, sizeof payload);
    harness_inject (&injector, &wire, payload, sizeof payload);
    harness_inject_close (&injector);

    float data [1000] = { 0 };
    ps_error_t err;
    int rc = ps_ring_allreduce (ring, data, 1000, &err);
    if (rc != PS_EPROTO)
        fail_msg ("expected PS_EPROTO, got %d: %s", rc, rc ? err.msg : "");
    assert_non_null (strstr (err.msg, "do not fit"));
    ps_ring_stats_t stats;
    ps_ring_stats (ring, &stats);
    assert_int_equal (stats.malformed, malformed);
    assert_int_equal (stats.stale_dropped, 1);
    assert_int_equal (stats.collectives, 0);

    //  Ring 8 keeps the message of ring 9 held (it is not of ring 8, so
    //  the collective times out); ring 10 drops it as stale.
    const char *members [] = { endpoint, absent };
    assert_int_equal (ps_ring_form (ring, 8, 0, 2, members, s_lone_tasks, &err), 0);
    float one = 1;
    assert_int_equal (ps_ring_allreduce (ring, &one, 1, &err), PS_ETIMEDOUT);
    ps_ring_stats (ring, &stats);
    assert_int_equal (stats.stale_dropped, 1);
    assert_int_equal (ps_ring_form (ring, 10, 0, 2, members, s_lone_tasks, &err), 0);
    ps_ring_stats (ring, &stats);
    assert_int_equal (stats.stale_dropped, 2);
    ps_ring_destroy (&ring);
}

//  The test plays member 1 of a ring of two (worker:1) on raw ZeroMQ,
//  checking what member 0 sends against the wire format. Before
//  collective 0 it also sends its first message of collective 1, which
//  member 0 must hold until collective 1 starts.
typedef struct {
    const char *ring_endpoint;  //  member 0's
    void *ctx;                  //  the sending socket's
    void *pull;                 //  member 1's, bound in ps_curve_context ()
    char endpoint [256];
    float mine [2][10];         //  member 1's inputs of collectives 0 and 1
    float theirs [2][10];       //  member 0's
    char failure [512];
} s_peer_t;

//  Receive one message from member 0 and check its header; the payload
//  goes to floats.
static bool
s_peer_expect (s_peer_t *peer, uint64_t seq, unsigned kind, uint64_t offset, uint64_t length,
               float *floats)
{
    zmq_pollitem_t item = { peer->pull, 0, ZMQ_POLLIN, 0 };
    unsigned char header [HARNESS_WIRE_SIZE];
    if (zmq_poll (&item, 1, 10000) != 1
    ||  zmq_recv (peer->pull, header, sizeof header, 0) != HARNESS_WIRE_SIZE) {
        snprintf (peer->failure, sizeof peer->failure, "no header from member 0");
        return false;
    }
    harness_wire_t w;
    harness_wire_decode (header, &w);
    int more = 0;
    size_t size = sizeof more;
    int got = zmq_getsockopt (peer->pull, ZMQ_RCVMORE, &more, &size) == 0 && more
            ? zmq_recv (peer->pull, floats, 64, 0) : -1;
    if (w.magic != HARNESS_WIRE_MAGIC || w.version != 1 || w.kind != kind || w.round != 0
    ||  w.ring != 4 || w.seq != seq || w.index != 0 || w.offset != offset
    ||  w.length != length || w.total != 40 || got != (int) length) {
        snprintf (peer->failure, sizeof peer->failure, "member 0 sent magic %x version %u kind "
                  "%u round %u ring %" PRIu64 " seq %" PRIu64 " index %" PRIu64 " [%" PRIu64
                  ", +%" PRIu64 ") of %" PRIu64 " with a %d-byte payload; expected kind %u seq %"
                  PRIu64 " [%" PRIu64 ", +%" PRIu64 ") of 40", w.magic, w.version, w.kind,
                  w.round, w.ring, w.seq, w.index, w.offset, w.length, w.total, got, kind, seq,
                  offset, length);
        return false;
    }
    return true;
}

static void
s_peer_send (s_peer_t *peer, void *push, uint64_t seq, unsigned kind, uint64_t offset,
             const float *floats)
{
    harness_wire_t wire = harness_wire (4, seq, offset, 20, 40);
    wire.kind = (uint16_t) kind;
    unsigned char header [HARNESS_WIRE_SIZE];
    harness_wire_encode (&wire, header);
    if (zmq_send (push, header, sizeof header, ZMQ_SNDMORE) < 0
    ||  zmq_send (push, floats, 20, 0) < 0)
        snprintf (peer->failure, sizeof peer->failure, "sending: %s", zmq_strerror (errno));
}

//  Member 1 of two: it owns segment 0 ([0, 5)) after the reduce-scatter
//  and sends segment 1 ([5, 10)) in round 0.
static void *
s_peer_run (void *arg)
{
    s_peer_t *peer = arg;
    void *push = zmq_socket (peer->ctx, ZMQ_PUSH);
    int linger = 5000;
    ps_error_t err;
    if (!push || zmq_setsockopt (push, ZMQ_LINGER, &linger, sizeof linger) != 0
    ||  ps_curve_client (harness_curve ("worker:1"), push, "worker:0", &err) != 0
    ||  zmq_connect (push, peer->ring_endpoint) != 0) {
        snprintf (peer->failure, sizeof peer->failure, "peer socket: %s", zmq_strerror (errno));
        if (push)
            zmq_close (push);
        return NULL;
    }
    s_peer_send (peer, push, 1, HARNESS_WIRE_RS, 20, peer->mine [1] + 5);
    s_peer_send (peer, push, 0, HARNESS_WIRE_RS, 20, peer->mine [0] + 5);
    for (int seq = 0; seq < 2 && !peer->failure [0]; seq++) {
        float got [16];
        if (!s_peer_expect (peer, (uint64_t) seq, HARNESS_WIRE_RS, 0, 20, got))
            break;
        float sum [5];
        for (int i = 0; i < 5; i++) {
            sum [i] = got [i] + peer->mine [seq][i];
            if (memcmp (&got [i], &peer->theirs [seq][i], sizeof (float)) != 0)
                snprintf (peer->failure, sizeof peer->failure, "member 0 sent %g as element %d "
                          "of collective %d, its input is %g", got [i], i, seq,
                          peer->theirs [seq][i]);
        }
        s_peer_send (peer, push, (uint64_t) seq, HARNESS_WIRE_AG, 0, sum);
        if (!s_peer_expect (peer, (uint64_t) seq, HARNESS_WIRE_AG, 20, 20, got))
            break;
    }
    if (zmq_close (push) != 0)
        snprintf (peer->failure, sizeof peer->failure, "zmq_close: %s", zmq_strerror (errno));
    return NULL;
}

static void
test_wire_peer (void **state)
{
    (void) state;
    s_peer_t peer = { 0 };
    peer.ctx = zmq_ctx_new ();
    peer.pull = zmq_socket (ps_curve_context (), ZMQ_PULL);
    assert_non_null (peer.pull);
    ps_error_t err;
    assert_int_equal (ps_curve_server (harness_curve ("worker:1"), peer.pull, &err), 0);
    assert_int_equal (zmq_bind (peer.pull, "tcp://127.0.0.1:*"), 0);
    size_t size = sizeof peer.endpoint;
    assert_int_equal (zmq_getsockopt (peer.pull, ZMQ_LAST_ENDPOINT, peer.endpoint, &size), 0);
    ps_ring_t *ring = s_lone_ring (4, peer.endpoint, 10000);
    peer.ring_endpoint = ps_ring_endpoint (ring);
    for (int seq = 0; seq < 2; seq++) {
        harness_ring_fill (peer.mine [seq], 10, 50 + (uint64_t) seq, 1, false);
        harness_ring_fill (peer.theirs [seq], 10, 50 + (uint64_t) seq, 0, false);
    }
    pthread_t thread;
    assert_int_equal (pthread_create (&thread, NULL, s_peer_run, &peer), 0);
    float data [2][10];
    for (int seq = 0; seq < 2; seq++) {
        memcpy (data [seq], peer.theirs [seq], sizeof data [seq]);
        int rc = ps_ring_allreduce (ring, data [seq], 10, &err);
        if (rc)
            fail_msg ("collective %d: %s (peer: %s)", seq, err.msg, peer.failure);
    }
    assert_int_equal (pthread_join (thread, NULL), 0);
    if (peer.failure [0])
        fail_msg ("%s", peer.failure);
    //  Segment 0 is the peer's sum, copied; segment 1 member 0's own, in
    //  the order the ring sums: what came in plus the member's own.
    for (int seq = 0; seq < 2; seq++)
        for (int i = 0; i < 10; i++) {
            float expected = i < 5 ? peer.theirs [seq][i] + peer.mine [seq][i]
                                   : peer.mine [seq][i] + peer.theirs [seq][i];
            assert_memory_equal (&data [seq][i], &expected, sizeof (float));
        }
    ps_ring_stats_t stats;
    ps_ring_stats (ring, &stats);
    assert_int_equal (stats.collectives, 2);
    assert_int_equal (stats.stale_dropped, 0);
    assert_int_equal (stats.bytes_sent, 80);
    assert_int_equal (stats.bytes_received, 80);
    ps_ring_destroy (&ring);
    assert_int_equal (zmq_close (peer.pull), 0);
    assert_int_equal (zmq_ctx_term (peer.ctx), 0);
}


//  ---------------------------------------------------------------------
//  Arguments and endpoints

static void
test_bad_arguments (void **state)
{
    (void) state;
    ps_error_t err;
    ps_ring_config_t config = { .bind = "tcp://256.1.2.3:5555" };
    assert_null (ps_ring_new (&config, &err));
    assert_int_equal (err.code, PS_EIO);
    assert_non_null (strstr (err.msg, "tcp://256.1.2.3:5555"));
    config.bind = "nonsense://x";
    assert_null (ps_ring_new (&config, &err));
    assert_non_null (strstr (err.msg, "nonsense://x"));
    config.bind = NULL;
    assert_null (ps_ring_new (&config, &err));
    assert_int_equal (err.code, PS_EINVAL);
    config = (ps_ring_config_t) { .bind = "tcp://127.0.0.1:*", .chunk_bytes = 2 };
    assert_null (ps_ring_new (&config, &err));
    assert_non_null (strstr (err.msg, "chunk_bytes"));
    config = (ps_ring_config_t) { .bind = "tcp://127.0.0.1:*", .chunk_bytes = 1u << 30 };
    assert_null (ps_ring_new (&config, &err));
    config = (ps_ring_config_t) { .bind = "tcp://127.0.0.1:*", .timeout_ms = -1 };
    assert_null (ps_ring_new (&config, &err));
    assert_non_null (strstr (err.msg, "timeout_ms"));

    config = (ps_ring_config_t) { .bind = "tcp://127.0.0.1:*" };
    ps_ring_t *ring = ps_ring_new (&config, &err);
    assert_non_null (ring);
    const char *endpoint = ps_ring_endpoint (ring);
    assert_int_equal (strncmp (endpoint, "tcp://127.0.0.1:", 16), 0);
    assert_true (atoi (endpoint + 16) > 0);

    //  Nothing runs before the first formation.
    float data [4] = { 1, 2, 3, 4 };
    assert_int_equal (ps_ring_allreduce (ring, data, 4, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "never formed"));
    assert_int_equal (ps_ring_broadcast (ring, 0, data, 4, &err), PS_EINVAL);

    const char *members [] = { endpoint, "tcp://127.0.0.1:1", "" , NULL };
    assert_int_equal (ps_ring_form (ring, 1, 0, 0, members, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "0 members"));
    assert_int_equal (ps_ring_form (ring, 1, -1, 2, members, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "rank -1"));
    assert_int_equal (ps_ring_form (ring, 1, 2, 2, members, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "rank 2"));
    assert_int_equal (ps_ring_form (ring, 1, 0, 3, members, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "member 2 has no endpoint"));
    const char *missing [] = { endpoint, "tcp://127.0.0.1:1", "tcp://127.0.0.1:2", NULL };
    assert_int_equal (ps_ring_form (ring, 1, 0, 4, missing, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "member 3 has no endpoint"));
    assert_int_equal (ps_ring_form (ring, 1, 0, 1, NULL, NULL, &err), PS_EINVAL);

    //  A ring of one: collectives return at once.
    assert_int_equal (ps_ring_form (ring, 5, 0, 1, members, NULL, &err), 0);
    assert_int_equal (ps_ring_rank (ring), 0);
    assert_int_equal (ps_ring_size (ring), 1);
    assert_int_equal (ps_ring_allreduce (ring, data, 4, &err), 0);
    assert_true (data [0] == 1 && data [3] == 4);
    assert_int_equal (ps_ring_broadcast (ring, 0, data, sizeof data, &err), 0);
    assert_true (data [1] == 2);
    assert_int_equal (ps_ring_broadcast (ring, 1, data, sizeof data, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "root 1"));
    assert_int_equal (ps_ring_allreduce (ring, NULL, 4, &err), PS_EINVAL);
    assert_int_equal (ps_ring_allreduce (ring, NULL, 0, &err), 0);

    //  Ring ids only grow.
    assert_int_equal (ps_ring_form (ring, 5, 0, 1, members, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "not above"));
    assert_int_equal (ps_ring_form (ring, 4, 0, 1, members, NULL, &err), PS_EINVAL);

    //  A successor that cannot be connected to: PS_EIO naming it, and the
    //  ring formed before stays.
    const char *bad [] = { endpoint, "nonsense://successor" };
    assert_int_equal (ps_ring_form (ring, 6, 0, 2, bad, NULL, &err), PS_EIO);
    assert_non_null (strstr (err.msg, "nonsense://successor"));
    assert_int_equal (ps_ring_size (ring), 1);
    assert_int_equal (ps_ring_allreduce (ring, data, 4, &err), 0);
    assert_int_equal (ps_ring_form (ring, 6, 0, 1, members, NULL, &err), 0);

    ps_ring_stats_t stats;
    ps_ring_stats (ring, &stats);
    assert_int_equal (stats.collectives, 4);
    ps_ring_destroy (&ring);
    assert_null (ring);
    ps_ring_destroy (&ring);

    //  A secured ring needs every member's task, and the successor's key.
    config = (ps_ring_config_t) { .bind = "tcp://127.0.0.1:*",
                                  .curve = harness_curve ("worker:0") };
    ring = ps_ring_new (&config, &err);
    assert_non_null (ring);
    const char *pair [] = { ps_ring_endpoint (ring), "tcp://127.0.0.1:1" };
    assert_int_equal (ps_ring_form (ring, 1, 0, 2, pair, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "task"));
    assert_int_equal (ps_ring_form (ring, 1, 0, 2, pair, (const int []) { 0, 42 }, &err),
                      PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "worker-42"));
    assert_int_equal (ps_ring_form (ring, 1, 0, 2, pair, (const int []) { 0, 1 }, &err), 0);
    ps_ring_destroy (&ring);

    //  An IPC endpoint is reported as bound.
    char bind [512];
    snprintf (bind, sizeof bind, "ipc://%s/bad-arguments", harness_ring_dir ());
    config = (ps_ring_config_t) { .bind = bind };
    ring = ps_ring_new (&config, &err);
    assert_non_null (ring);
    assert_string_equal (ps_ring_endpoint (ring), bind);
    ps_ring_destroy (&ring);
}


int
main (int argc, char *argv [])
{
    int status;
    if (harness_ring_start ("test_ring_inproc", argc, argv, NULL, 0, &status))
        return status;
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_bad_arguments, harness_ring_teardown),
        cmocka_unit_test_teardown (test_wire_peer, harness_ring_teardown),
        cmocka_unit_test_teardown (test_malformed_in_process, harness_ring_teardown),
        cmocka_unit_test_teardown (test_watch, harness_ring_teardown),
        cmocka_unit_test_teardown (test_watch_shared_memory, harness_ring_teardown),
        cmocka_unit_test_teardown (test_shm_sweep, harness_ring_teardown),
    };
    return harness_finish (cmocka_run_group_tests (tests, harness_ring_setup_group,
                                                   harness_ring_teardown_group));
}
