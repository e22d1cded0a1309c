//  Ring collectives over ZeroMQ; see ps_ring.h.
//
//  Wire format. Every message has two frames: a header of S_HEADER_SIZE
//  bytes and the payload, a slice of the vector. The header is
//  little-endian:
//      0   u32  magic, "PSRG"
//      4   u16  version (1)
//      6   u16  kind: 1 reduce-scatter, 2 all-gather, 3 broadcast
//      8   u32  round within the kind (0 .. n - 2; 0 in a broadcast)
//      12  u32  root of a broadcast (0 otherwise)
//      16  u64  ring id
//      24  u64  sequence number of the collective within the ring
//      32  u64  index of the message within its round (for reports only)
//      40  u64  byte offset of the payload in the vector
//      48  u64  byte length of the payload (the payload frame's size)
//      56  u64  the vector's length in bytes
//
//  The schedule. A collective is a list of send rounds and a list of
//  receive rounds; each round moves one contiguous range of the vector
//  (a segment) in messages of at most chunk_bytes. A member's receive
//  rounds are exactly its predecessor's send rounds, in the same order.
//  The first free_rounds send rounds wait for nothing (a member's own
//  segment in the all-reduce, the root's vector in a broadcast); send
//  round r >= free_rounds moves the same segment as receive round
//  r - free_rounds, and may send any byte of it that has been received
//  (and reduced) there. So one cursor per direction (round, byte within
//  the round) is the whole state: a chunk goes out as soon as it has come
//  in and been added to, which is the pipelining. The sender alone picks
//  where its messages are cut, and each receiver only checks that they
//  arrive in order, so the members need not agree on chunk_bytes.
//
//  In the all-reduce of n members, send round r of member m moves
//  segment (m - r) mod n for r < n - 1 (reduce-scatter: the segment it
//  received and added to in round r - 1, or its own in round 0) and
//  segment (m + 1 - (r - n + 1)) mod n after (all-gather: first the
//  segment it finished summing, then those it was handed). Segment s is
//  summed at members s, s + 1, ..., s - 1 in that order, always as
//  (partial sum from the predecessor) + (own value), and then only
//  copied: every member holds bitwise the same sum.
//
//  Zero-copy. Payloads are sent straight from the caller's vector. Each
//  buffer handed to ZeroMQ counts in `outstanding` until ZeroMQ's free
//  callback (on its I/O thread) drops it; the callback that brings it to
//  zero writes the eventfd `release_fd`, so that the owner can sleep in
//  zmq_poll until ZeroMQ lets go of the last one. A range is never
//  written while ZeroMQ may still read it for sending: every range this
//  member sends is overwritten later only by a message whose existence
//  proves that the successor has received the range sent before.
//
//  Messages of a later ring or collective (a member that formed the next
//  ring before this one, or started the next collective) are held until
//  this member gets there; messages of an earlier one are dropped.
//
//  A ring is used by one thread at a time.

#include "ps_ring.h"
#include "ps_clock.h"
#include "ps_log.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

//  The default chunk is PS_RING_DEFAULT_CHUNK (ps_ring.h), 1 MiB. Swept
//  with tests/bench/bench_allreduce --chunk on a 2-core machine (medians
//  of 3 or 4 runs; the machine was noisy, +-20% between runs):
//      chunk               128K   256K   512K    1M    2M
//      tcp 2 procs 16 MiB   6.8    6.2    4.6   4.8   5.9  ms
//      tcp 2 procs 64 MiB  23.6   23.2   17.7  15.8  19.0
//      tcp 3 procs 64 MiB     -   53.1   40.3  44.0  41.1
//      ipc 2 procs 16 MiB     -    6.1    6.6   4.0     -
//      ipc 2 procs 64 MiB     -   23.8   25.7  16.9     -
//  Below 512 KiB the per-message costs (two frames, a free callback, a
//  wake-up of the owner) show; 512 KiB to 2 MiB is flat within the noise,
//  with 1 MiB ahead on large vectors and on IPC. A chunk also bounds the
//  pipeline's granularity: a segment of a few chunks already overlaps
//  reducing one chunk with sending the last, so larger chunks only delay
//  the start of the pipeline on smaller vectors.
#define S_MIN_CHUNK             4
#define S_MAX_CHUNK             (64 * 1024 * 1024)

#define S_DEFAULT_TIMEOUT_MS    10000

//  ZeroMQ I/O threads: with two, the socket sending to the successor and
//  the connection from the predecessor are served by different threads,
//  so the kernel's copies of both directions overlap. On two cores, two
//  members took 4.9 ms for 16 MiB over TCP with two threads against 5.6
//  with one (medians of 6 runs).
#define S_IO_THREADS            2

//  The watch function is called at least this often while a collective
//  waits.
#define S_WATCH_MS              100

//  Messages queued per socket before ZeroMQ pushes back. A collective
//  sends at most one message per chunk and round; this leaves the whole
//  pipeline of a large vector in flight and bounds a peer that floods.
#define S_HWM                   100000

#define S_HEADER_SIZE           64
#define S_MAGIC                 0x47525350u     //  "PSRG" as read little-endian
#define S_VERSION               1

#define S_KIND_REDUCE_SCATTER   1
#define S_KIND_ALL_GATHER       2
#define S_KIND_BROADCAST        3

//  Messages of later rings or collectives held at most; past this they are
//  dropped (a peer that floods the ring must not exhaust memory).
#define S_HELD_MAX              65536

//  At most one warning about malformed messages this often.
#define S_WARN_INTERVAL_MS      1000

//  While ZeroMQ still holds buffers after an abort, say so this often (an
//  error: the caller is stuck until it lets go).
#define S_RELEASE_WARN_MS       5000

typedef struct {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;
    uint32_t round;
    uint32_t root;
    uint64_t ring;
    uint64_t seq;
    uint64_t index;
    uint64_t offset;
    uint64_t length;
    uint64_t total;
} s_header_t;

//  A message of a later ring or collective, kept until this member gets
//  there.
typedef struct {
    s_header_t header;
    zmq_msg_t payload;
} s_held_t;

struct _ps_ring_t {
    void *ctx;                  //  the sending sockets'
    ps_curve_t *curve;          //  the owner's; NULL: unsecured
    void *pull;                 //  bound for the ring's whole life, in ps_curve_context ()
    void *push;                 //  to the successor; NULL while there is none
    void *monitor;              //  the push socket's connection events
    uint64_t attempts;          //  formations tried, which name their monitors
    int release_fd;             //  eventfd: ZeroMQ let go of the last buffer
    atomic_size_t outstanding;  //  zero-copy buffers ZeroMQ holds
    char endpoint [256];
    size_t chunk_bytes;
    int timeout_ms;

    void *watch_socket;
    int watch_fd;
    ps_ring_watch_fn *watch_fn;
    void *watch_arg;

    bool formed;                //  ps_ring_form succeeded at least once
    bool broken;                //  a collective failed since the last formation
    uint64_t ring_id;
    uint64_t seq;               //  of the next collective
    int rank, n;
    char *successor;
    char *predecessor;
    char predecessor_task [32]; //  "worker:N", the only sender read in a secured ring

    s_held_t **held;
    size_t held_count, held_max;

    ps_ring_stats_t stats;
    bool warned;
    double warned_at;           //  the last warning about a malformed message
    uint64_t unwarned;          //  malformed messages since, not warned of
};

typedef enum { S_ALLREDUCE, S_BROADCAST } s_op_kind_t;

//  One collective in progress; see "The schedule" above.
typedef struct {
    ps_ring_t *ring;
    s_op_kind_t kind;
    unsigned char *data;
    size_t total;               //  bytes
    size_t elem;                //  bytes per element: 4 (floats) or 1
    size_t chunk;               //  bytes per message at most, a multiple of elem
    int root;                   //  of a broadcast
    int send_rounds, recv_rounds, free_rounds;

    int send_round;
    size_t send_pos;            //  bytes of the round sent
    uint64_t send_index;        //  messages of the round sent
    bool send_blocked;          //  ZeroMQ had no room: poll for POLLOUT

    int recv_round;
    size_t recv_pos;
    uint64_t recv_index;
    bool held_done;             //  no held message is of this collective
} s_op_t;

//  ---------------------------------------------------------------------
//  Headers

static void
s_put32 (unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p [i] = (unsigned char) (v >> (8 * i));
}

static void
s_put64 (unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p [i] = (unsigned char) (v >> (8 * i));
}

static uint32_t
s_get32 (const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t) p [i] << (8 * i);
    return v;
}

static uint64_t
s_get64 (const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t) p [i] << (8 * i);
    return v;
}

static void
s_encode (const s_header_t *h, unsigned char *p)
{
    s_put32 (p, h->magic);
    p [4] = (unsigned char) h->version;
    p [5] = (unsigned char) (h->version >> 8);
    p [6] = (unsigned char) h->kind;
    p [7] = (unsigned char) (h->kind >> 8);
    s_put32 (p + 8, h->round);
    s_put32 (p + 12, h->root);
    s_put64 (p + 16, h->ring);
    s_put64 (p + 24, h->seq);
    s_put64 (p + 32, h->index);
    s_put64 (p + 40, h->offset);
    s_put64 (p + 48, h->length);
    s_put64 (p + 56, h->total);
}

static void
s_decode (const unsigned char *p, s_header_t *h)
{
    h->magic = s_get32 (p);
    h->version = (uint16_t) (p [4] | p [5] << 8);
    h->kind = (uint16_t) (p [6] | p [7] << 8);
    h->round = s_get32 (p + 8);
    h->root = s_get32 (p + 12);
    h->ring = s_get64 (p + 16);
    h->seq = s_get64 (p + 24);
    h->index = s_get64 (p + 32);
    h->offset = s_get64 (p + 40);
    h->length = s_get64 (p + 48);
    h->total = s_get64 (p + 56);
}

static const char *
s_kind_name (unsigned kind)
{
    return kind == S_KIND_REDUCE_SCATTER ? "reduce-scatter"
         : kind == S_KIND_ALL_GATHER ? "all-gather"
         : kind == S_KIND_BROADCAST ? "broadcast" : "unknown";
}

//  ---------------------------------------------------------------------
//  Small helpers

static int
s_setopt_int (void *socket, int option, int value)
{
    return zmq_setsockopt (socket, option, &value, sizeof value);
}

//  Close a socket and set the pointer to NULL. Every socket has linger 0,
//  so what was still queued on it is dropped, and its buffers released.
static void
s_close (void **socket_p)
{
    if (*socket_p && zmq_close (*socket_p) != 0)
        ps_error ("ring: zmq_close: %s", zmq_strerror (errno));
    *socket_p = NULL;
}

//  Close a message; closing a valid message cannot fail, but say so if
//  it ever does.
static void
s_msg_close (zmq_msg_t *msg)
{
    if (zmq_msg_close (msg) != 0)
        ps_error ("ring: zmq_msg_close: %s", zmq_strerror (errno));
}

//  Close a sending socket and the PAIR that reads its monitor's events.
//  The monitor is stopped first: ZeroMQ's I/O thread sends each event
//  with a blocking send, so an event sent to a PAIR already closed would
//  block that thread for good, and with it the release of every buffer.
static void
s_close_push (void **push_p, void **monitor_p)
{
    if (*push_p && *monitor_p && zmq_socket_monitor (*push_p, NULL, 0) != 0)
        ps_error ("ring: stopping a socket monitor: %s", zmq_strerror (errno));
    s_close (monitor_p);
    s_close (push_p);
}

static char *
s_strdup (const char *s)
{
    char *copy = strdup (s);
    if (!copy)
        abort ();
    return copy;
}

//  ZeroMQ's free callback for payloads sent from the caller's vector; it
//  runs on ZeroMQ's threads (or the owner's, when a send is undone).
static void
s_released (void *data, void *hint)
{
    (void) data;
    ps_ring_t *self = hint;
    if (atomic_fetch_sub_explicit (&self->outstanding, 1, memory_order_acq_rel) == 1) {
        uint64_t one = 1;
        //  An eventfd write fails only when its counter would overflow
        //  2^64 - 1, which the owner's reads prevent; a missed wake-up
        //  would still be caught by the owner's next timed poll.
        if (write (self->release_fd, &one, sizeof one) != (ssize_t) sizeof one)
            ps_error ("ring at %s: cannot signal released buffers: %s", self->endpoint,
                      strerror (errno));
    }
}

//  Reset the eventfd after it was seen readable. Returns 0 or PS_EIO.
static int
s_drain_release (ps_ring_t *self, ps_error_t *err)
{
    uint64_t count;
    if (read (self->release_fd, &count, sizeof count) < 0 && errno != EAGAIN && errno != EINTR)
        return ps_error_set (err, PS_EIO, "ring at %s: reading its eventfd: %s", self->endpoint,
                             strerror (errno));
    return PS_OK;
}

//  Wait until ZeroMQ has let go of every buffer of the caller's vector.
//  Called after the sending socket was closed, which makes ZeroMQ drop
//  (and release) whatever was still queued; that happens on its threads
//  within milliseconds, so this waits without a deadline: returning
//  earlier would let ZeroMQ read memory the caller owns again.
static void
s_wait_released (ps_ring_t *self)
{
    double start = ps_clock_ms ();
    double warned_at = start;
    while (atomic_load (&self->outstanding) > 0) {
        struct pollfd item = { .fd = self->release_fd, .events = POLLIN };
        int ready = poll (&item, 1, S_WATCH_MS);
        if (ready < 0 && errno != EINTR)
            ps_error ("ring at %s: poll: %s", self->endpoint, strerror (errno));
        if (ready > 0) {
            ps_error_t err;
            if (s_drain_release (self, &err))
                ps_error ("%s", err.msg);
        }
        double now = ps_clock_ms ();
        if (now - warned_at >= S_RELEASE_WARN_MS) {
            ps_error ("ring at %s: ZeroMQ still holds %zu buffers of the vector after %.0f ms",
                     self->endpoint, atomic_load (&self->outstanding), now - start);
            warned_at = now;
        }
    }
}

//  Count a malformed message and warn, at most once a second.
static void
s_malformed (ps_ring_t *self, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
s_malformed (ps_ring_t *self, const char *fmt, ...)
{
    self->stats.malformed++;
    double now = ps_clock_ms ();
    if (self->warned && now - self->warned_at < S_WARN_INTERVAL_MS) {
        self->unwarned++;
        return;
    }
    char text [PS_ERROR_MSG_MAX];
    va_list args;
    va_start (args, fmt);
    vsnprintf (text, sizeof text, fmt, args);
    va_end (args);
    if (self->unwarned)
        ps_warn ("ring at %s: dropped a malformed message: %s (and %" PRIu64 " more since "
                 "the last warning)", self->endpoint, text, self->unwarned);
    else
        ps_warn ("ring at %s: dropped a malformed message: %s", self->endpoint, text);
    self->warned = true;
    self->warned_at = now;
    self->unwarned = 0;
}

//  ---------------------------------------------------------------------
//  Messages held for a later ring or collective

//  Where a message stands relative to this member: -1 of an earlier ring
//  or collective, 0 of the collective under way (or next), 1 later.
static int
s_age (const ps_ring_t *self, const s_header_t *h)
{
    if (h->ring != self->ring_id)
        return h->ring < self->ring_id ? -1 : 1;
    return h->seq < self->seq ? -1 : h->seq > self->seq ? 1 : 0;
}

static void
s_held_remove (ps_ring_t *self, size_t i, bool stale)
{
    s_held_t *held = self->held [i];
    if (stale)
        self->stats.stale_dropped++;
    s_msg_close (&held->payload);
    free (held);
    memmove (self->held + i, self->held + i + 1, (self->held_count - i - 1) * sizeof *self->held);
    self->held_count--;
}

//  Keep a message of a later ring or collective; its payload moves into
//  the held copy.
static void
s_hold (ps_ring_t *self, const s_header_t *h, zmq_msg_t *payload)
{
    if (self->held_count == S_HELD_MAX) {
        s_malformed (self, "ring %" PRIx64 " collective %" PRIu64 " is ahead of this member, "
                     "which holds %d such messages already", h->ring, h->seq, S_HELD_MAX);
        return;
    }
    if (self->held_count == self->held_max) {
        size_t max = self->held_max ? 2 * self->held_max : 16;
        s_held_t **grown = realloc (self->held, max * sizeof *grown);
        if (!grown)
            abort ();
        self->held = grown;
        self->held_max = max;
    }
    s_held_t *held = malloc (sizeof *held);
    if (!held || zmq_msg_init (&held->payload) != 0)
        abort ();
    held->header = *h;
    if (zmq_msg_move (&held->payload, payload) != 0)
        abort ();
    self->held [self->held_count++] = held;
}

//  ---------------------------------------------------------------------
//  Loopback connections
//
//  Where the kernel's default congestion control is BBR, a TCP connection
//  paces its packets at the bandwidth BBR estimates. On loopback there is
//  no queue to protect, and with the sender and receiver sharing the CPU
//  the estimate swings, so pacing throttles the ring: on two cores, two
//  members over loopback took 7.3 ms for a 16 MiB all-reduce with BBR and
//  4.9 ms with CUBIC or Reno (medians of 6 runs). So every loopback
//  connection the ring makes to its successor (ZeroMQ's monitor reports
//  each one with its descriptor) is switched from BBR to CUBIC, or to
//  Reno where an unprivileged process may not choose CUBIC. Other
//  connections, and other algorithms, are left as the system set them.

static bool
s_is_loopback (const struct sockaddr_storage *addr, int *port)
{
    if (addr->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *) addr;
        *port = ntohs (in->sin_port);
        return (ntohl (in->sin_addr.s_addr) >> 24) == 127;
    }
    if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) addr;
        const unsigned char *bytes = in6->sin6_addr.s6_addr;
        static const unsigned char mapped [12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
        *port = ntohs (in6->sin6_port);
        return IN6_IS_ADDR_LOOPBACK (&in6->sin6_addr)
            || (memcmp (bytes, mapped, sizeof mapped) == 0 && bytes [12] == 127);
    }
    return false;
}

//  Tune the new connection fd to the successor at endpoint. The monitor
//  says a descriptor may be closed (and reused) by the time the event is
//  read, so the descriptor must still be a TCP connection to that
//  endpoint's port; anything else is left alone.
static void
s_tune_connection (ps_ring_t *self, int fd, const char *endpoint)
{
    int protocol = 0;
    socklen_t size = sizeof protocol;
    struct sockaddr_storage peer;
    socklen_t peer_size = sizeof peer;
    int port = -1;
    const char *colon = strrchr (endpoint, ':');
    if (getsockopt (fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &size) != 0
    ||  protocol != IPPROTO_TCP
    ||  getpeername (fd, (struct sockaddr *) &peer, &peer_size) != 0
    ||  !s_is_loopback (&peer, &port)
    ||  !colon || atoi (colon + 1) != port)
        return;
    char algorithm [32] = "";
    size = sizeof algorithm - 1;
    if (getsockopt (fd, IPPROTO_TCP, TCP_CONGESTION, algorithm, &size) != 0
    ||  strcmp (algorithm, "bbr") != 0)
        return;
    static const char *instead [] = { "cubic", "reno" };
    for (int i = 0; i < 2; i++)
        if (setsockopt (fd, IPPROTO_TCP, TCP_CONGESTION, instead [i],
                        (socklen_t) strlen (instead [i])) == 0) {
            ps_debug ("ring at %s: loopback connection to %s uses %s instead of bbr",
                      self->endpoint, endpoint, instead [i]);
            return;
        }
    ps_debug ("ring at %s: loopback connection to %s keeps bbr: %s", self->endpoint, endpoint,
              strerror (errno));
}

//  Read the connection events of the sending socket, without waiting.
//  An event that cannot be read is only logged: it costs speed, not
//  correctness.
static void
s_monitor_read (ps_ring_t *self)
{
    while (self->monitor) {
        zmq_msg_t part;
        if (zmq_msg_init (&part) != 0)
            abort ();
        if (zmq_msg_recv (&part, self->monitor, ZMQ_DONTWAIT) < 0) {
            if (errno != EAGAIN && errno != EINTR)
                ps_warn ("ring at %s: reading connection events: %s", self->endpoint,
                         zmq_strerror (errno));
            s_msg_close (&part);
            return;
        }
        //  An event is two parts: the event number (16 bits) and its value
        //  (32 bits, the descriptor), then the endpoint.
        uint16_t event = 0;
        uint32_t value = 0;
        if (zmq_msg_size (&part) >= sizeof event + sizeof value) {
            memcpy (&event, zmq_msg_data (&part), sizeof event);
            memcpy (&value, (char *) zmq_msg_data (&part) + sizeof event, sizeof value);
        }
        char endpoint [256] = "";
        for (int index = 1; zmq_msg_more (&part); index++) {
            if (zmq_msg_recv (&part, self->monitor, ZMQ_DONTWAIT) < 0) {
                ps_warn ("ring at %s: reading connection events: %s", self->endpoint,
                         zmq_strerror (errno));
                break;
            }
            size_t size = zmq_msg_size (&part);
            if (index == 1 && size < sizeof endpoint) {
                memcpy (endpoint, zmq_msg_data (&part), size);
                endpoint [size] = 0;
            }
        }
        s_msg_close (&part);
        if (event == ZMQ_EVENT_CONNECTED)
            s_tune_connection (self, (int) value, endpoint);
    }
}

//  ---------------------------------------------------------------------
//  Construction and formation

//  Make the context, the eventfd and the bound PULL socket. Returns 0 or
//  a code with err set.
static int
s_open (ps_ring_t *self, const char *bind, ps_error_t *err)
{
    self->release_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (self->release_fd < 0)
        return ps_error_set (err, PS_EIO, "ring at %s: eventfd: %s", bind, strerror (errno));
    self->ctx = zmq_ctx_new ();
    if (!self->ctx)
        return ps_error_set (err, PS_EIO, "ring at %s: zmq_ctx_new: %s", bind,
                             zmq_strerror (errno));
    //  Terminating the context never waits: every socket has linger 0.
    if (zmq_ctx_set (self->ctx, ZMQ_IO_THREADS, S_IO_THREADS) != 0
    ||  zmq_ctx_set (self->ctx, ZMQ_BLOCKY, 0) != 0)
        return ps_error_set (err, PS_EIO, "ring at %s: zmq_ctx_set: %s", bind,
                             zmq_strerror (errno));
    //  The receiving socket lives where zauth authenticates its peers;
    //  the sending ones stay in the ring's own context.
    self->pull = zmq_socket (ps_curve_context (), ZMQ_PULL);
    if (!self->pull)
        return ps_error_set (err, PS_EIO, "ring at %s: zmq_socket: %s", bind,
                             zmq_strerror (errno));
    int64_t max_size = (int64_t) S_HEADER_SIZE + S_MAX_CHUNK;
    if (s_setopt_int (self->pull, ZMQ_LINGER, 0) != 0
    ||  s_setopt_int (self->pull, ZMQ_RCVHWM, S_HWM) != 0
    ||  zmq_setsockopt (self->pull, ZMQ_MAXMSGSIZE, &max_size, sizeof max_size) != 0)
        return ps_error_set (err, PS_EIO, "ring at %s: zmq_setsockopt: %s", bind,
                             zmq_strerror (errno));
    int rc;
    if (self->curve && (rc = ps_curve_server (self->curve, self->pull, err)))
        return rc;
    if (zmq_bind (self->pull, bind) != 0)
        return ps_error_set (err, PS_EIO, "ring: cannot bind %s: %s", bind, zmq_strerror (errno));
    size_t size = sizeof self->endpoint;
    if (zmq_getsockopt (self->pull, ZMQ_LAST_ENDPOINT, self->endpoint, &size) != 0)
        return ps_error_set (err, PS_EIO, "ring at %s: ZMQ_LAST_ENDPOINT: %s", bind,
                             zmq_strerror (errno));
    return PS_OK;
}

ps_ring_t *
ps_ring_new (const ps_ring_config_t *config, ps_error_t *err)
{
    assert (config);
    if (!config->bind || !*config->bind) {
        ps_error_set (err, PS_EINVAL, "ring: no endpoint to bind");
        return NULL;
    }
    if (config->chunk_bytes && (config->chunk_bytes < S_MIN_CHUNK
                             || config->chunk_bytes > S_MAX_CHUNK)) {
        ps_error_set (err, PS_EINVAL, "ring at %s: chunk_bytes %zu is outside [%d, %d]",
                      config->bind, config->chunk_bytes, S_MIN_CHUNK, S_MAX_CHUNK);
        return NULL;
    }
    if (config->timeout_ms < 0) {
        ps_error_set (err, PS_EINVAL, "ring at %s: timeout_ms %d is negative", config->bind,
                      config->timeout_ms);
        return NULL;
    }
    ps_ring_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->release_fd = -1;
    self->watch_fd = -1;
    atomic_init (&self->outstanding, 0);
    self->curve = config->curve;
    self->chunk_bytes = config->chunk_bytes ? config->chunk_bytes : PS_RING_DEFAULT_CHUNK;
    self->timeout_ms = config->timeout_ms ? config->timeout_ms : S_DEFAULT_TIMEOUT_MS;
    if (s_open (self, config->bind, err)) {
        ps_ring_destroy (&self);
        return NULL;
    }
    return self;
}

void
ps_ring_destroy (ps_ring_t **self_p)
{
    assert (self_p);
    ps_ring_t *self = *self_p;
    if (!self)
        return;
    //  Collectives return only after ZeroMQ let go of the caller's
    //  buffers, so closing cannot leave it reading freed memory.
    assert (atomic_load (&self->outstanding) == 0);
    s_close_push (&self->push, &self->monitor);
    s_close (&self->pull);
    while (self->held_count)
        s_held_remove (self, self->held_count - 1, false);
    free (self->held);
    if (self->ctx)
        while (zmq_ctx_term (self->ctx) != 0 && errno == EINTR)
            ;
    if (self->release_fd >= 0 && close (self->release_fd) != 0)
        ps_error ("ring at %s: closing its eventfd: %s", self->endpoint, strerror (errno));
    free (self->successor);
    free (self->predecessor);
    free (self);
    *self_p = NULL;
}

const char *
ps_ring_endpoint (const ps_ring_t *self)
{
    assert (self);
    return self->endpoint;
}

void
ps_ring_set_watch (ps_ring_t *self, void *socket, int fd, ps_ring_watch_fn *fn, void *arg)
{
    assert (self);
    self->watch_socket = socket;
    self->watch_fd = socket ? -1 : fd;
    self->watch_fn = fn;
    self->watch_arg = arg;
}

int
ps_ring_form (ps_ring_t *self, uint64_t ring_id, int rank, int n,
              const char *const *members, const int *tasks, ps_error_t *err)
{
    assert (self);
    if (n < 1)
        return ps_error_set (err, PS_EINVAL, "ring %" PRIx64 ": %d members, expected at least 1",
                             ring_id, n);
    if (rank < 0 || rank >= n)
        return ps_error_set (err, PS_EINVAL, "ring %" PRIx64 ": rank %d is outside [0, %d)",
                             ring_id, rank, n);
    if (!members)
        return ps_error_set (err, PS_EINVAL, "ring %" PRIx64 ": no member endpoints", ring_id);
    for (int i = 0; i < n; i++)
        if (!members [i] || !*members [i])
            return ps_error_set (err, PS_EINVAL, "ring %" PRIx64 ": member %d has no endpoint",
                                 ring_id, i);
    if (self->formed && ring_id <= self->ring_id)
        return ps_error_set (err, PS_EINVAL, "ring id %" PRIx64 " is not above the last "
                             "ring's, %" PRIx64, ring_id, self->ring_id);
    if (self->curve && !tasks)
        return ps_error_set (err, PS_EINVAL, "ring %" PRIx64 ": a secured ring needs each "
                             "member's task", ring_id);
    char successor_task [32] = "", predecessor_task [32] = "";
    if (tasks) {
        snprintf (successor_task, sizeof successor_task, "worker:%d", tasks [(rank + 1) % n]);
        snprintf (predecessor_task, sizeof predecessor_task, "worker:%d",
                  tasks [(rank + n - 1) % n]);
    }
    assert (atomic_load (&self->outstanding) == 0);

    //  The new connection is made before the old one is dropped, so a
    //  formation that fails leaves the previous ring as it was.
    void *push = NULL;
    void *monitor = NULL;
    const char *successor = members [(rank + 1) % n];
    if (n > 1) {
        //  The monitor's inproc endpoint is unique to this ring object and
        //  attempt: a failed attempt's endpoint stays bound until ZeroMQ's
        //  reaper has closed its socket, so a retry of the same ring id
        //  needs a name of its own. Its PAIR connects before the PUSH does,
        //  so that the connection's event cannot be sent before anyone
        //  listens, and queues without limit, so that the I/O thread's
        //  blocking send of an event never waits for the owner to read
        //  (events are a few bytes per connection).
        char monitor_endpoint [64];
        snprintf (monitor_endpoint, sizeof monitor_endpoint, "inproc://ps-ring-%p-%" PRIx64,
                  (void *) self, self->attempts++);
        push = zmq_socket (self->ctx, ZMQ_PUSH);
        monitor = zmq_socket (self->ctx, ZMQ_PAIR);
        if (!push || !monitor) {
            int rc = ps_error_set (err, PS_EIO, "ring %" PRIx64 ": zmq_socket: %s", ring_id,
                                   zmq_strerror (errno));
            s_close_push (&push, &monitor);
            return rc;
        }
        if (s_setopt_int (monitor, ZMQ_LINGER, 0) != 0
        ||  s_setopt_int (monitor, ZMQ_RCVHWM, 0) != 0
        ||  zmq_socket_monitor (push, monitor_endpoint, ZMQ_EVENT_CONNECTED) != 0
        ||  zmq_connect (monitor, monitor_endpoint) != 0) {
            int rc = ps_error_set (err, PS_EIO, "ring %" PRIx64 ": monitor %s: %s", ring_id,
                                   monitor_endpoint, zmq_strerror (errno));
            s_close_push (&push, &monitor);
            return rc;
        }
        int rc;
        if (self->curve && (rc = ps_curve_client (self->curve, push, successor_task, err))) {
            s_close_push (&push, &monitor);
            return rc;
        }
        //  Without ZMQ_IMMEDIATE, messages queue for a successor whose
        //  connection is not up yet, so a collective may start at once.
        if (s_setopt_int (push, ZMQ_LINGER, 0) != 0
        ||  s_setopt_int (push, ZMQ_SNDHWM, S_HWM) != 0
        ||  zmq_connect (push, successor) != 0) {
            int rc = ps_error_set (err, PS_EIO, "ring %" PRIx64 ": cannot connect to member "
                                   "%d at %s: %s", ring_id, (rank + 1) % n, successor,
                                   zmq_strerror (errno));
            s_close_push (&push, &monitor);
            return rc;
        }
    }
    s_close_push (&self->push, &self->monitor);
    self->push = push;
    self->monitor = monitor;
    free (self->successor);
    free (self->predecessor);
    self->successor = s_strdup (successor);
    self->predecessor = s_strdup (members [(rank + n - 1) % n]);
    snprintf (self->predecessor_task, sizeof self->predecessor_task, "%s", predecessor_task);
    self->formed = true;
    self->broken = false;
    self->ring_id = ring_id;
    self->seq = 0;
    self->rank = rank;
    self->n = n;
    for (size_t i = 0; i < self->held_count; )
        if (s_age (self, &self->held [i]->header) < 0)
            s_held_remove (self, i, true);
        else
            i++;
    return PS_OK;
}

int
ps_ring_rank (const ps_ring_t *self)
{
    assert (self);
    return self->rank;
}

int
ps_ring_size (const ps_ring_t *self)
{
    assert (self);
    return self->n;
}

void
ps_ring_stats (const ps_ring_t *self, ps_ring_stats_t *stats)
{
    assert (self && stats);
    *stats = self->stats;
}

//  ---------------------------------------------------------------------
//  The schedule

//  The segment that member sends in all-reduce round `round`.
static int
s_segment (int n, int member, int round)
{
    int s = round < n - 1 ? member - round : member + 1 - (round - (n - 1));
    return ((s % n) + n) % n;
}

//  The byte range moved in a send round (or a receive round, which is the
//  predecessor's send round).
static void
s_range (const s_op_t *op, bool sending, int round, size_t *begin, size_t *len)
{
    if (op->kind == S_BROADCAST) {
        *begin = 0;
        *len = op->total;
        return;
    }
    ps_ring_t *self = op->ring;
    int n = self->n;
    int member = sending ? self->rank : (self->rank + n - 1) % n;
    size_t s = (size_t) s_segment (n, member, round);
    size_t count = op->total / sizeof (float);
    size_t base = count / (size_t) n;
    size_t extra = count % (size_t) n;
    *begin = (s * base + (s < extra ? s : extra)) * sizeof (float);
    *len = (base + (s < extra)) * sizeof (float);
}

static void
s_round_kind (const s_op_t *op, int round, unsigned *kind, unsigned *within)
{
    int n = op->ring->n;
    if (op->kind == S_BROADCAST) {
        *kind = S_KIND_BROADCAST;
        *within = 0;
    }
    else
    if (round < n - 1) {
        *kind = S_KIND_REDUCE_SCATTER;
        *within = (unsigned) round;
    }
    else {
        *kind = S_KIND_ALL_GATHER;
        *within = (unsigned) (round - (n - 1));
    }
}

//  Move the cursors past finished (and empty) rounds.
static void
s_skip_done (s_op_t *op)
{
    size_t begin, len;
    while (op->send_round < op->send_rounds) {
        s_range (op, true, op->send_round, &begin, &len);
        if (op->send_pos < len)
            break;
        op->send_round++;
        op->send_pos = 0;
        op->send_index = 0;
    }
    while (op->recv_round < op->recv_rounds) {
        s_range (op, false, op->recv_round, &begin, &len);
        if (op->recv_pos < len)
            break;
        op->recv_round++;
        op->recv_pos = 0;
        op->recv_index = 0;
    }
}

//  What the error messages say the collective was.
static void
s_describe (const s_op_t *op, char *buf, size_t size)
{
    const ps_ring_t *self = op->ring;
    if (op->kind == S_ALLREDUCE)
        snprintf (buf, size, "all-reduce of %zu floats (ring %" PRIx64 ", collective %" PRIu64
                  ", member %d of %d)", op->total / sizeof (float), self->ring_id, self->seq,
                  self->rank, self->n);
    else
        snprintf (buf, size, "broadcast of %zu bytes from member %d (ring %" PRIx64
                  ", collective %" PRIu64 ", member %d of %d)", op->total, op->root,
                  self->ring_id, self->seq, self->rank, self->n);
}

//  ---------------------------------------------------------------------
//  Sending

//  Queue one message: bytes [offset, offset + size) of the vector.
//  Returns 0, 1 when ZeroMQ has no room now, or PS_EIO.
static int
s_send (s_op_t *op, size_t offset, size_t size, ps_error_t *err)
{
    ps_ring_t *self = op->ring;
    unsigned kind, within;
    s_round_kind (op, op->send_round, &kind, &within);
    s_header_t h = {
        .magic = S_MAGIC, .version = S_VERSION, .kind = (uint16_t) kind, .round = within,
        .root = (uint32_t) (op->kind == S_BROADCAST ? op->root : 0),
        .ring = self->ring_id, .seq = self->seq, .index = op->send_index,
        .offset = offset, .length = size, .total = op->total
    };
    unsigned char header [S_HEADER_SIZE];
    s_encode (&h, header);

    //  The payload is made first so that a failure cannot leave a header
    //  queued without it. Closing it (when it is not sent) releases it.
    zmq_msg_t payload;
    atomic_fetch_add_explicit (&self->outstanding, 1, memory_order_relaxed);
    if (zmq_msg_init_data (&payload, op->data + offset, size, s_released, self) != 0) {
        atomic_fetch_sub_explicit (&self->outstanding, 1, memory_order_relaxed);
        return ps_error_set (err, PS_EIO, "ring %" PRIx64 ": zmq_msg_init_data: %s",
                             self->ring_id, zmq_strerror (errno));
    }
    int rc = PS_OK;
    if (zmq_send (self->push, header, sizeof header, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        rc = errno == EAGAIN || errno == EINTR ? 1
           : ps_error_set (err, PS_EIO, "ring %" PRIx64 ": sending to %s: %s", self->ring_id,
                           self->successor, zmq_strerror (errno));
    else
    //  ZeroMQ takes a message's parts all or none: the payload finds room
    //  where the header did. Only a connection torn down in between fails
    //  it, and then ZeroMQ drops the header too (EFAULT, or EAGAIN), so the
    //  whole message is sent again later.
    if (zmq_msg_send (&payload, self->push, ZMQ_DONTWAIT) < 0)
        rc = errno == EAGAIN || errno == EINTR || errno == EFAULT ? 1
           : ps_error_set (err, PS_EIO, "ring %" PRIx64 ": sending to %s: %s", self->ring_id,
                           self->successor, zmq_strerror (errno));
    if (rc != PS_OK)
        s_msg_close (&payload);
    return rc;
}

//  Queue every message that is ready, until ZeroMQ has no room. Sets
//  *progress when one was queued.
static int
s_send_ready (s_op_t *op, bool *progress, ps_error_t *err)
{
    op->send_blocked = false;
    while (op->send_round < op->send_rounds) {
        size_t begin, len;
        s_range (op, true, op->send_round, &begin, &len);
        //  How much of the round's range may go: all of it in a free
        //  round, else what the receive round it depends on has brought.
        size_t ready = len;
        if (op->send_round >= op->free_rounds) {
            int needs = op->send_round - op->free_rounds;
            ready = op->recv_round > needs ? len : op->recv_round == needs ? op->recv_pos : 0;
        }
        if (ready <= op->send_pos)
            return PS_OK;
        size_t size = ready - op->send_pos;
        if (size > op->chunk)
            size = op->chunk;
        int rc = s_send (op, begin + op->send_pos, size, err);
        if (rc == 1) {
            op->send_blocked = true;
            return PS_OK;
        }
        if (rc)
            return rc;
        op->send_pos += size;
        op->send_index++;
        op->ring->stats.bytes_sent += size;
        *progress = true;
        s_skip_done (op);
    }
    return PS_OK;
}

//  ---------------------------------------------------------------------
//  Receiving

//  Add count floats, stored at bytes in whatever alignment ZeroMQ gave
//  them (small messages land at any offset of its receive buffer), to sum.
//  The byte-wise loads compile to unaligned vector loads at -O3.
static void
s_add (float *restrict sum, const unsigned char *restrict bytes, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        float value;
        memcpy (&value, bytes + i * sizeof value, sizeof value);
        sum [i] += value;
    }
}

//  Read one message from the socket into header and payload. Returns 1
//  when a well-formed message was read, 2 when a malformed one was read
//  and dropped, 0 when none is waiting, or PS_EIO.
static int
s_read (ps_ring_t *self, s_header_t *h, zmq_msg_t *payload, ps_error_t *err)
{
    zmq_msg_t first;
    if (zmq_msg_init (&first) != 0)
        abort ();
    if (zmq_msg_recv (&first, self->pull, ZMQ_DONTWAIT) < 0) {
        int saved = errno;
        s_msg_close (&first);
        if (saved == EAGAIN || saved == EINTR)
            return 0;
        return ps_error_set (err, PS_EIO, "ring at %s: zmq_msg_recv: %s", self->endpoint,
                             zmq_strerror (saved));
    }
    //  The other parts of a message come with its first, so they are read
    //  without waiting; parts past the second are read and dropped.
    size_t parts = 1;
    bool more = zmq_msg_more (&first);
    int rc = 1;
    while (more && rc == 1) {
        zmq_msg_t extra;
        zmq_msg_t *part = parts == 1 ? payload : &extra;
        if (part == &extra && zmq_msg_init (&extra) != 0)
            abort ();
        if (zmq_msg_recv (part, self->pull, ZMQ_DONTWAIT) < 0)
            rc = ps_error_set (err, PS_EIO, "ring at %s: zmq_msg_recv: %s", self->endpoint,
                               zmq_strerror (errno));
        else
            more = zmq_msg_more (part);
        parts++;
        if (part == &extra)
            s_msg_close (&extra);
    }
    size_t header_size = zmq_msg_size (&first);
    if (rc == 1 && header_size == S_HEADER_SIZE)
        s_decode (zmq_msg_data (&first), h);
    //  In a secured ring only the predecessor's key may feed this member:
    //  another worker of the cluster, even a trusted one, has no business
    //  adding into the sum.
    const char *sender = self->curve ? ps_curve_peer_task (&first) : NULL;
    bool stranger = self->curve && (!sender || strcmp (sender, self->predecessor_task) != 0);
    char sender_task [32];
    snprintf (sender_task, sizeof sender_task, "%s", sender ? sender : "no task");
    s_msg_close (&first);
    if (rc != 1)
        return rc;
    if (stranger) {
        s_malformed (self, "a message from %s, not from the predecessor %s", sender_task,
                     self->predecessor_task);
        return 2;
    }

    if (header_size != S_HEADER_SIZE) {
        s_malformed (self, "a first frame of %zu bytes, expected a %d-byte header (%zu frames)",
                     header_size, S_HEADER_SIZE, parts);
        return 2;
    }
    if (h->magic != S_MAGIC || h->version != S_VERSION) {
        s_malformed (self, "magic 0x%08" PRIx32 " version %u, expected 0x%08x version %d",
                     h->magic, h->version, S_MAGIC, S_VERSION);
        return 2;
    }
    size_t size = parts == 2 ? zmq_msg_size (payload) : 0;
    if (parts != 2)
        s_malformed (self, "%zu frames from ring %" PRIx64 " collective %" PRIu64 ", expected a "
                     "header and a payload", parts, h->ring, h->seq);
    else
    if (h->kind < S_KIND_REDUCE_SCATTER || h->kind > S_KIND_BROADCAST)
        s_malformed (self, "unknown kind %u from ring %" PRIx64 " collective %" PRIu64,
                     h->kind, h->ring, h->seq);
    else
    if (h->length != size || size == 0)
        s_malformed (self, "a payload of %zu bytes from ring %" PRIx64 " collective %" PRIu64
                     " whose header says %" PRIu64, size, h->ring, h->seq, h->length);
    else
    if (h->offset > h->total || h->length > h->total - h->offset)
        s_malformed (self, "bytes [%" PRIu64 ", +%" PRIu64 ") of a %" PRIu64 "-byte vector from "
                     "ring %" PRIx64 " collective %" PRIu64, h->offset, h->length, h->total,
                     h->ring, h->seq);
    else
        return 1;
    return 2;
}

//  Add (reduce-scatter) or copy (all-gather, broadcast) one message of
//  this collective into the vector, after checking that it is the one
//  expected next. Returns 0 or PS_EPROTO.
static int
s_apply (s_op_t *op, const s_header_t *h, zmq_msg_t *payload, ps_error_t *err)
{
    ps_ring_t *self = op->ring;
    char what [256];
    if (op->recv_round >= op->recv_rounds) {
        s_describe (op, what, sizeof what);
        return ps_error_set (err, PS_EPROTO, "%s: an unexpected %s message %" PRIu64 " from %s "
                             "after all this member expects (do the members run the same "
                             "collectives?)", what, s_kind_name (h->kind), h->index,
                             self->predecessor);
    }
    unsigned kind, within;
    s_round_kind (op, op->recv_round, &kind, &within);
    if (h->kind != kind || h->round != within
    ||  (op->kind == S_BROADCAST && h->root != (uint32_t) op->root)) {
        s_describe (op, what, sizeof what);
        return ps_error_set (err, PS_EPROTO, "%s: %s round %" PRIu32 " (root %" PRIu32 ") came "
                             "from %s where %s round %u was expected (do the members run the "
                             "same collectives?)", what, s_kind_name (h->kind), h->round, h->root,
                             self->predecessor, s_kind_name (kind), within);
    }
    if (h->total != op->total) {
        s_describe (op, what, sizeof what);
        return ps_error_set (err, PS_EPROTO, "%s: %s sent a slice of a %" PRIu64 "-byte vector; "
                             "this member's is %zu bytes", what, self->predecessor, h->total,
                             op->total);
    }
    size_t begin, len;
    s_range (op, false, op->recv_round, &begin, &len);
    if (h->offset != begin + op->recv_pos || h->length > len - op->recv_pos
    ||  h->length % op->elem) {
        s_describe (op, what, sizeof what);
        return ps_error_set (err, PS_EPROTO, "%s: bytes [%" PRIu64 ", +%" PRIu64 ") from %s do "
                             "not fit: bytes from %zu of [%zu, %zu) were expected", what,
                             h->offset, h->length, self->predecessor, begin + op->recv_pos,
                             begin, begin + len);
    }
    const unsigned char *bytes = zmq_msg_data (payload);
    if (kind == S_KIND_REDUCE_SCATTER)
        s_add ((float *) (op->data + h->offset), bytes, h->length / sizeof (float));
    else
        memcpy (op->data + h->offset, bytes, h->length);
    op->recv_pos += h->length;
    op->recv_index++;
    self->stats.bytes_received += h->length;
    s_skip_done (op);
    return PS_OK;
}

//  Take one message, held or from the socket, if one is waiting. Sets
//  *busy when a message was taken (whatever became of it), and *progress
//  when it was one of this collective. Returns 0 or a code.
static int
s_receive_one (s_op_t *op, bool *busy, bool *progress, ps_error_t *err)
{
    ps_ring_t *self = op->ring;
    s_header_t h;
    zmq_msg_t payload;
    if (zmq_msg_init (&payload) != 0)
        abort ();
    int rc = 0;
    //  Held messages came before anything still in the socket.
    for (size_t i = 0; !op->held_done && i < self->held_count; ) {
        int age = s_age (self, &self->held [i]->header);
        if (age < 0)
            s_held_remove (self, i, true);
        else
        if (age == 0) {
            h = self->held [i]->header;
            if (zmq_msg_move (&payload, &self->held [i]->payload) != 0)
                abort ();
            s_held_remove (self, i, false);
            rc = 1;
            break;
        }
        else
            i++;
    }
    if (rc == 0) {
        op->held_done = true;
        rc = s_read (self, &h, &payload, err);
    }
    if (rc > 0)
        *busy = true;
    if (rc == 1) {
        int age = s_age (self, &h);
        if (age < 0) {
            self->stats.stale_dropped++;
            rc = PS_OK;
        }
        else
        if (age > 0) {
            s_hold (self, &h, &payload);
            rc = PS_OK;
        }
        else {
            rc = s_apply (op, &h, &payload, err);
            *progress = rc == PS_OK;
        }
    }
    else
    if (rc == 2)
        rc = PS_OK;
    s_msg_close (&payload);
    return rc;
}

//  ---------------------------------------------------------------------
//  The collective

static int
s_timed_out (s_op_t *op, double since, ps_error_t *err)
{
    ps_ring_t *self = op->ring;
    char what [256];
    s_describe (op, what, sizeof what);
    char waiting [512];
    if (op->recv_round < op->recv_rounds) {
        size_t begin, len;
        s_range (op, false, op->recv_round, &begin, &len);
        snprintf (waiting, sizeof waiting, "waiting for round %d of %d from %s (%zu of its %zu "
                  "bytes came)", op->recv_round + 1, op->recv_rounds, self->predecessor,
                  op->recv_pos, len);
    }
    else
    if (op->send_round < op->send_rounds)
        snprintf (waiting, sizeof waiting, "%s takes no more (round %d of %d)", self->successor,
                  op->send_round + 1, op->send_rounds);
    else
        snprintf (waiting, sizeof waiting, "%s has not taken the last %zu messages",
                  self->successor, atomic_load (&self->outstanding));
    return ps_error_set (err, PS_ETIMEDOUT, "%s: no progress for %.0f ms, %s", what,
                         ps_clock_ms () - since, waiting);
}

static int
s_canceled (s_op_t *op, ps_error_t *err)
{
    char what [256];
    s_describe (op, what, sizeof what);
    return ps_error_set (err, PS_ECANCELED, "%s: aborted by the watch", what);
}

//  Call the watch function. Returns true to abort.
static bool
s_watch (ps_ring_t *self, double *watched_at)
{
    *watched_at = ps_clock_ms ();
    return self->watch_fn (self->watch_arg);
}

//  Run the collective op to its end: every message sent and received,
//  and every buffer released by ZeroMQ.
static int
s_run (s_op_t *op, ps_error_t *err)
{
    ps_ring_t *self = op->ring;
    s_skip_done (op);
    s_monitor_read (self);
    double progress_at = ps_clock_ms ();
    double watched_at = progress_at;
    size_t outstanding_was = atomic_load (&self->outstanding);
    while (true) {
        bool progress = false, busy = false;
        int rc = s_send_ready (op, &progress, err);
        //  One message at a time, so that what it made ready to send goes
        //  out before the next is reduced.
        if (rc == PS_OK && op->recv_round < op->recv_rounds)
            rc = s_receive_one (op, &busy, &progress, err);
        if (rc)
            return rc;
        bool sent_all = op->send_round >= op->send_rounds;
        bool received_all = op->recv_round >= op->recv_rounds;
        size_t outstanding = atomic_load (&self->outstanding);
        if (outstanding < outstanding_was)
            progress = true;
        outstanding_was = outstanding;
        if (sent_all && received_all && outstanding == 0)
            return PS_OK;

        double now = ps_clock_ms ();
        if (progress)
            progress_at = now;
        if (self->watch_fn && now - watched_at >= S_WATCH_MS && s_watch (self, &watched_at))
            return s_canceled (op, err);
        if (now - progress_at >= self->timeout_ms)
            return s_timed_out (op, progress_at, err);
        if (progress || busy)
            continue;

        //  Nothing to do: wait for a message, room to send, ZeroMQ
        //  releasing the last buffers, the watch, or the next deadline.
        zmq_pollitem_t items [5];
        int count = 0, pull = -1, push = -1, release = -1, watch = -1, monitor = -1;
        if (!received_all) {
            pull = count++;
            items [pull] = (zmq_pollitem_t) { self->pull, 0, ZMQ_POLLIN, 0 };
        }
        if (op->send_blocked) {
            push = count++;
            items [push] = (zmq_pollitem_t) { self->push, 0, ZMQ_POLLOUT, 0 };
        }
        if (sent_all && outstanding > 0) {
            release = count++;
            items [release] = (zmq_pollitem_t) { NULL, self->release_fd, ZMQ_POLLIN, 0 };
        }
        if (self->watch_fn && (self->watch_socket || self->watch_fd >= 0)) {
            watch = count++;
            items [watch] = (zmq_pollitem_t) { self->watch_socket, self->watch_fd,
                                               ZMQ_POLLIN, 0 };
        }
        if (self->monitor) {
            monitor = count++;
            items [monitor] = (zmq_pollitem_t) { self->monitor, 0, ZMQ_POLLIN, 0 };
        }
        double deadline = progress_at + self->timeout_ms;
        if (self->watch_fn && watched_at + S_WATCH_MS < deadline)
            deadline = watched_at + S_WATCH_MS;
        long wait = deadline > now ? (long) ceil (deadline - now) : 0;
        if (zmq_poll (items, count, wait) < 0) {
            if (errno == EINTR)
                continue;
            char what [256];
            s_describe (op, what, sizeof what);
            return ps_error_set (err, PS_EIO, "%s: zmq_poll: %s", what, zmq_strerror (errno));
        }
        if (monitor >= 0 && (items [monitor].revents & ZMQ_POLLIN))
            s_monitor_read (self);
        if (release >= 0 && (items [release].revents & ZMQ_POLLIN)
        &&  (rc = s_drain_release (self, err)) != PS_OK)
            return rc;
        if (watch >= 0 && (items [watch].revents & ZMQ_POLLIN) && s_watch (self, &watched_at))
            return s_canceled (op, err);
    }
}

//  Check that a collective may run now.
static int
s_ready (ps_ring_t *self, const char *what, ps_error_t *err)
{
    if (!self->formed)
        return ps_error_set (err, PS_EINVAL, "%s on the ring at %s: the ring was never formed",
                             what, self->endpoint);
    if (self->broken)
        return ps_error_set (err, PS_EINVAL, "%s on ring %" PRIx64 ": a collective of this ring "
                             "failed, so it must be formed again first", what, self->ring_id);
    return PS_OK;
}

//  Run op and account for it. A failed collective leaves messages of its
//  own in flight and its members at different places, so the ring is
//  marked broken; the sending socket is closed, which drops what ZeroMQ
//  still had queued for the successor and releases the caller's buffers.
static int
s_collective (s_op_t *op, ps_error_t *err)
{
    ps_ring_t *self = op->ring;
    int rc = s_run (op, err);
    self->seq++;
    if (rc == PS_OK) {
        self->stats.collectives++;
        return PS_OK;
    }
    self->broken = true;
    s_close_push (&self->push, &self->monitor);
    s_wait_released (self);
    return rc;
}

int
ps_ring_allreduce (ps_ring_t *self, float *data, size_t count, ps_error_t *err)
{
    assert (self);
    int rc = s_ready (self, "all-reduce", err);
    if (rc)
        return rc;
    if (count && !data)
        return ps_error_set (err, PS_EINVAL, "all-reduce of %zu floats: no data", count);
    if (count > SIZE_MAX / sizeof (float))
        return ps_error_set (err, PS_EINVAL, "all-reduce of %zu floats: too many", count);
    if (self->n == 1) {
        self->seq++;
        self->stats.collectives++;
        return PS_OK;
    }
    size_t chunk = self->chunk_bytes / sizeof (float) * sizeof (float);
    s_op_t op = {
        .ring = self, .kind = S_ALLREDUCE, .data = (unsigned char *) data,
        .total = count * sizeof (float), .elem = sizeof (float),
        .chunk = chunk ? chunk : sizeof (float),
        .send_rounds = 2 * (self->n - 1), .recv_rounds = 2 * (self->n - 1), .free_rounds = 1
    };
    return s_collective (&op, err);
}

int
ps_ring_broadcast (ps_ring_t *self, int root, void *data, size_t bytes, ps_error_t *err)
{
    assert (self);
    int rc = s_ready (self, "broadcast", err);
    if (rc)
        return rc;
    if (root < 0 || root >= self->n)
        return ps_error_set (err, PS_EINVAL, "broadcast on ring %" PRIx64 ": root %d is outside "
                             "[0, %d)", self->ring_id, root, self->n);
    if (bytes && !data)
        return ps_error_set (err, PS_EINVAL, "broadcast of %zu bytes: no data", bytes);
    if (self->n == 1) {
        self->seq++;
        self->stats.collectives++;
        return PS_OK;
    }
    //  The root only sends, the member before it only receives, and the
    //  others forward each chunk as soon as it has come.
    int place = (self->rank - root + self->n) % self->n;
    s_op_t op = {
        .ring = self, .kind = S_BROADCAST, .data = data, .total = bytes, .elem = 1,
        .chunk = self->chunk_bytes, .root = root,
        .send_rounds = place < self->n - 1, .recv_rounds = place > 0, .free_rounds = place == 0
    };
    return s_collective (&op, err);
}
