//  The ring's transport; see ps_ring_transport.h.
//
//  Zero-copy. Payloads are sent straight from the caller's vector. Each
//  buffer handed to ZeroMQ counts in `outstanding` until ZeroMQ's free
//  callback (on its I/O thread) drops it; the callback that brings it to
//  zero writes the eventfd `release_fd`, so that the owner can sleep in
//  zmq_poll until ZeroMQ lets go of the last one.
//
//  A transport is used by one thread at a time.

#include "ps_ring_transport.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
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

#include "ps_clock.h"
#include "ps_host.h"
#include "ps_log.h"

//  ZeroMQ I/O threads: with two, the socket sending to the successor and
//  the connection from the predecessor are served by different threads,
//  so the kernel's copies of both directions overlap. On two cores, two
//  members took 4.9 ms for 16 MiB over TCP with two threads against 5.6
//  with one (medians of 6 runs).
#define S_IO_THREADS            2

//  Messages queued per socket before ZeroMQ pushes back. A collective
//  sends at most one message per chunk and round; this leaves the whole
//  pipeline of a large vector in flight and bounds a peer that floods.
#define S_HWM                   100000

#define S_MAGIC                 0x47525350u     //  "PSRG" as read little-endian
#define S_VERSION               1

//  At most one warning about malformed messages this often.
#define S_WARN_INTERVAL_MS      1000

//  How often the wait for ZeroMQ's release of the buffers looks again, and
//  how often it says (an error: the caller is stuck until ZeroMQ lets go)
//  that it still waits.
#define S_RELEASE_POLL_MS       100
#define S_RELEASE_WARN_MS       5000

struct _ps_ring_transport_t {
    void *ctx;                  //  the sending sockets'
    ps_curve_t *curve;          //  the owner's; NULL: unsecured
    void *pull;                 //  bound for the transport's whole life, in ps_curve_context ()
    void *push;                 //  to the successor; NULL while there is none
    void *monitor;              //  the push socket's connection events
    uint64_t attempts;          //  connections tried, which name their monitors
    int release_fd;             //  eventfd: ZeroMQ let go of the last buffer
    atomic_size_t outstanding;  //  zero-copy buffers ZeroMQ holds
    char endpoint [256];
    char ipc [256];             //  the same-host endpoint also bound, or ""
    char advert [PS_HOST_SET_MAX]; //  what peers are told (ps_host.h's set)
    char *successor;
    char *predecessor;
    char predecessor_task [32]; //  "worker:N", the only sender read when secured
    int item_monitor, item_release; //  their places in the last poll's items, or -1

    uint64_t malformed;
    bool warned;
    double warned_at;           //  the last warning about a malformed message
    uint64_t unwarned;          //  malformed messages since, not warned of
};

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
s_encode (const ps_ring_header_t *h, unsigned char *p)
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
s_decode (const unsigned char *p, ps_ring_header_t *h)
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

const char *
ps_ring_kind_name (unsigned kind)
{
    return kind == PS_RING_KIND_REDUCE_SCATTER ? "reduce-scatter"
         : kind == PS_RING_KIND_ALL_GATHER ? "all-gather"
         : kind == PS_RING_KIND_BROADCAST ? "broadcast" : "unknown";
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

void
ps_ring_payload_close (zmq_msg_t *msg)
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
    ps_ring_transport_t *self = hint;
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
s_drain_release (ps_ring_transport_t *self, ps_error_t *err)
{
    uint64_t count;
    if (read (self->release_fd, &count, sizeof count) < 0 && errno != EAGAIN && errno != EINTR)
        return ps_error_set (err, PS_EIO, "ring at %s: reading its eventfd: %s", self->endpoint,
                             strerror (errno));
    return PS_OK;
}

void
ps_ring_transport_malformed (ps_ring_transport_t *self, const char *fmt, ...)
{
    self->malformed++;
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

uint64_t
ps_ring_transport_malformed_count (const ps_ring_transport_t *self)
{
    return self->malformed;
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
s_tune_connection (ps_ring_transport_t *self, int fd, const char *endpoint)
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
s_monitor_read (ps_ring_transport_t *self)
{
    while (self->monitor) {
        zmq_msg_t part;
        if (zmq_msg_init (&part) != 0)
            abort ();
        if (zmq_msg_recv (&part, self->monitor, ZMQ_DONTWAIT) < 0) {
            if (errno != EAGAIN && errno != EINTR)
                ps_warn ("ring at %s: reading connection events: %s", self->endpoint,
                         zmq_strerror (errno));
            ps_ring_payload_close (&part);
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
        ps_ring_payload_close (&part);
        if (event == ZMQ_EVENT_CONNECTED)
            s_tune_connection (self, (int) value, endpoint);
    }
}


//  ---------------------------------------------------------------------
//  Construction and connection

//  Bind the receiving socket also to an ipc:// endpoint for members on
//  this host (ps_host.h), when it serves TCP and same-host peers are on.
//  It is the same socket, so CurveZMQ guards both endpoints alike. A
//  failure costs only speed: it is logged and the ring goes on over TCP.
static void
s_bind_ipc (ps_ring_transport_t *self, const char *given)
{
    if (strncmp (self->endpoint, "tcp://", 6) != 0 || !ps_host_same_host ()
    ||  (given && !*given))
        return;
    ps_error_t err = { 0 };
    char ipc [sizeof self->ipc];
    if (given && strlen (given) >= sizeof ipc) {
        ps_warn ("ring at %s: members on this host use tcp: %s is too long", self->endpoint,
                 given);
        return;
    }
    if (given)
        snprintf (ipc, sizeof ipc, "%s", given);
    else
    if (ps_host_ipc_endpoint ("ring", self->endpoint, ipc, sizeof ipc, &err)) {
        ps_warn ("ring at %s: members on this host use tcp: %s", self->endpoint, err.msg);
        return;
    }
    if (zmq_bind (self->pull, ipc) != 0) {
        ps_warn ("ring at %s: members on this host use tcp: cannot bind %s: %s",
                 self->endpoint, ipc, zmq_strerror (errno));
        return;
    }
    memcpy (self->ipc, ipc, sizeof self->ipc);
}

//  Remove the ipc:// endpoint's file now: ZeroMQ would only when its
//  reaper closes the listener, which the process's exit may come before.
static void
s_unbind_ipc (ps_ring_transport_t *self)
{
    if (!self->ipc [0])
        return;
    if (zmq_unbind (self->pull, self->ipc) != 0)
        ps_debug ("ring at %s: unbinding %s: %s", self->endpoint, self->ipc,
                  zmq_strerror (errno));
    if (unlink (self->ipc + 6) != 0 && errno != ENOENT)
        ps_warn ("ring at %s: removing %s: %s", self->endpoint, self->ipc + 6, strerror (errno));
    self->ipc [0] = '\0';
}

//  Make the context, the eventfd and the bound PULL socket. Returns 0 or
//  a code with err set.
static int
s_open (ps_ring_transport_t *self, const char *bind, const char *ipc, ps_error_t *err)
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
    //  the sending ones stay in the transport's own context.
    self->pull = zmq_socket (ps_curve_context (), ZMQ_PULL);
    if (!self->pull)
        return ps_error_set (err, PS_EIO, "ring at %s: zmq_socket: %s", bind,
                             zmq_strerror (errno));
    int64_t max_size = (int64_t) PS_RING_HEADER_SIZE + PS_RING_MAX_CHUNK;
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
    s_bind_ipc (self, ipc);
    return ps_host_set (self->endpoint, self->ipc [0] ? self->ipc : NULL, false, self->advert,
                        sizeof self->advert, err);
}

ps_ring_transport_t *
ps_ring_transport_new (const char *bind, const char *ipc, ps_curve_t *curve, ps_error_t *err)
{
    ps_ring_transport_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->release_fd = -1;
    self->item_monitor = self->item_release = -1;
    atomic_init (&self->outstanding, 0);
    self->curve = curve;
    if (s_open (self, bind, ipc, err))
        ps_ring_transport_destroy (&self);
    return self;
}

void
ps_ring_transport_destroy (ps_ring_transport_t **self_p)
{
    assert (self_p);
    ps_ring_transport_t *self = *self_p;
    if (!self)
        return;
    //  Collectives return only after ZeroMQ let go of the caller's
    //  buffers, so closing cannot leave it reading freed memory.
    assert (atomic_load (&self->outstanding) == 0);
    s_close_push (&self->push, &self->monitor);
    s_unbind_ipc (self);
    s_close (&self->pull);
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
ps_ring_transport_endpoint (const ps_ring_transport_t *self)
{
    return self->endpoint;
}

const char *
ps_ring_transport_advert (const ps_ring_transport_t *self)
{
    return self->advert;
}

int
ps_ring_transport_connect (ps_ring_transport_t *self, uint64_t ring_id,
                           const char *successor, int successor_rank,
                           const char *successor_task, const char *predecessor,
                           const char *predecessor_task, ps_error_t *err)
{
    assert (atomic_load (&self->outstanding) == 0);
    void *push = NULL;
    void *monitor = NULL;
    //  A member given as an endpoint set is reached over ipc:// from its
    //  own host, over TCP from any other (ps_host.h).
    char picked [sizeof self->endpoint], from [sizeof self->endpoint];
    bool local = false;
    if (successor) {
        int rc = ps_host_pick (successor, false, picked, sizeof picked, &local, NULL, err);
        if (rc)
            return rc;
        successor = picked;
    }
    if (predecessor && ps_host_pick (predecessor, false, from, sizeof from, NULL, NULL, err) == 0)
        predecessor = from;
    if (successor) {
        //  The monitor's inproc endpoint is unique to this transport and
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
                                   "%d at %s: %s", ring_id, successor_rank, successor,
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
    self->successor = s_strdup (successor ? successor : self->endpoint);
    self->predecessor = s_strdup (predecessor);
    if (local)
        ps_info ("ring %" PRIx64 ": member %d is on this host, reached at %s", ring_id,
                  successor_rank, successor);
    snprintf (self->predecessor_task, sizeof self->predecessor_task, "%s", predecessor_task);
    return PS_OK;
}

const char *
ps_ring_transport_successor (const ps_ring_transport_t *self)
{
    return self->successor ? self->successor : "no successor";
}

const char *
ps_ring_transport_predecessor (const ps_ring_transport_t *self)
{
    return self->predecessor ? self->predecessor : "no predecessor";
}

//  ---------------------------------------------------------------------
//  Sending and receiving

int
ps_ring_transport_send (ps_ring_transport_t *self, ps_ring_header_t *h,
                        const unsigned char *vector, ps_error_t *err)
{
    h->magic = S_MAGIC;
    h->version = S_VERSION;
    unsigned char header [PS_RING_HEADER_SIZE];
    s_encode (h, header);

    //  The payload is made first so that a failure cannot leave a header
    //  queued without it. Closing it (when it is not sent) releases it.
    //  ZeroMQ only reads it, whatever its signature says.
    zmq_msg_t payload;
    atomic_fetch_add_explicit (&self->outstanding, 1, memory_order_relaxed);
    if (zmq_msg_init_data (&payload, (void *) (vector + h->offset), h->length, s_released,
                           self) != 0) {
        atomic_fetch_sub_explicit (&self->outstanding, 1, memory_order_relaxed);
        return ps_error_set (err, PS_EIO, "ring %" PRIx64 ": zmq_msg_init_data: %s", h->ring,
                             zmq_strerror (errno));
    }
    int rc = PS_OK;
    if (zmq_send (self->push, header, sizeof header, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        rc = errno == EAGAIN || errno == EINTR ? 1
           : ps_error_set (err, PS_EIO, "ring %" PRIx64 ": sending to %s: %s", h->ring,
                           self->successor, zmq_strerror (errno));
    else
    //  ZeroMQ takes a message's parts all or none: the payload finds room
    //  where the header did. Only a connection torn down in between fails
    //  it, and then ZeroMQ drops the header too (EFAULT, or EAGAIN), so the
    //  whole message is sent again later.
    if (zmq_msg_send (&payload, self->push, ZMQ_DONTWAIT) < 0)
        rc = errno == EAGAIN || errno == EINTR || errno == EFAULT ? 1
           : ps_error_set (err, PS_EIO, "ring %" PRIx64 ": sending to %s: %s", h->ring,
                           self->successor, zmq_strerror (errno));
    if (rc != PS_OK)
        ps_ring_payload_close (&payload);
    return rc;
}

int
ps_ring_transport_read (ps_ring_transport_t *self, ps_ring_header_t *h, zmq_msg_t *payload,
                        ps_error_t *err)
{
    zmq_msg_t first;
    if (zmq_msg_init (&first) != 0)
        abort ();
    if (zmq_msg_recv (&first, self->pull, ZMQ_DONTWAIT) < 0) {
        int saved = errno;
        ps_ring_payload_close (&first);
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
            ps_ring_payload_close (&extra);
    }
    size_t header_size = zmq_msg_size (&first);
    if (rc == 1 && header_size == PS_RING_HEADER_SIZE)
        s_decode (zmq_msg_data (&first), h);
    //  In a secured ring only the predecessor's key may feed this member:
    //  another worker of the cluster, even a trusted one, has no business
    //  adding into the sum.
    const char *sender = self->curve ? ps_curve_peer_task (&first) : NULL;
    bool stranger = self->curve && (!sender || strcmp (sender, self->predecessor_task) != 0);
    char sender_task [32];
    snprintf (sender_task, sizeof sender_task, "%s", sender ? sender : "no task");
    ps_ring_payload_close (&first);
    if (rc != 1)
        return rc;
    if (stranger) {
        ps_ring_transport_malformed (self, "a message from %s, not from the predecessor %s", sender_task,
                     self->predecessor_task);
        return 2;
    }

    if (header_size != PS_RING_HEADER_SIZE) {
        ps_ring_transport_malformed (self, "a first frame of %zu bytes, expected a %d-byte header (%zu frames)",
                     header_size, PS_RING_HEADER_SIZE, parts);
        return 2;
    }
    if (h->magic != S_MAGIC || h->version != S_VERSION) {
        ps_ring_transport_malformed (self, "magic 0x%08" PRIx32 " version %u, expected 0x%08x version %d",
                     h->magic, h->version, S_MAGIC, S_VERSION);
        return 2;
    }
    size_t size = parts == 2 ? zmq_msg_size (payload) : 0;
    if (parts != 2)
        ps_ring_transport_malformed (self, "%zu frames from ring %" PRIx64 " collective %" PRIu64 ", expected a "
                     "header and a payload", parts, h->ring, h->seq);
    else
    if (h->kind < PS_RING_KIND_REDUCE_SCATTER || h->kind > PS_RING_KIND_BROADCAST)
        ps_ring_transport_malformed (self, "unknown kind %u from ring %" PRIx64 " collective %" PRIu64,
                     h->kind, h->ring, h->seq);
    else
    if (h->length != size || size == 0)
        ps_ring_transport_malformed (self, "a payload of %zu bytes from ring %" PRIx64 " collective %" PRIu64
                     " whose header says %" PRIu64, size, h->ring, h->seq, h->length);
    else
    if (h->offset > h->total || h->length > h->total - h->offset)
        ps_ring_transport_malformed (self, "bytes [%" PRIu64 ", +%" PRIu64 ") of a %" PRIu64 "-byte vector from "
                     "ring %" PRIx64 " collective %" PRIu64, h->offset, h->length, h->total,
                     h->ring, h->seq);
    else
        return 1;
    return 2;
}

size_t
ps_ring_transport_outstanding (ps_ring_transport_t *self)
{
    return atomic_load (&self->outstanding);
}

//  ---------------------------------------------------------------------
//  Waiting

int
ps_ring_transport_poll_items (ps_ring_transport_t *self, zmq_pollitem_t *items, bool recv,
                              bool send, bool release)
{
    int count = 0;
    self->item_monitor = self->item_release = -1;
    if (recv)
        items [count++] = (zmq_pollitem_t) { self->pull, 0, ZMQ_POLLIN, 0 };
    if (send)
        items [count++] = (zmq_pollitem_t) { self->push, 0, ZMQ_POLLOUT, 0 };
    if (release) {
        self->item_release = count;
        items [count++] = (zmq_pollitem_t) { NULL, self->release_fd, ZMQ_POLLIN, 0 };
    }
    if (self->monitor) {
        self->item_monitor = count;
        items [count++] = (zmq_pollitem_t) { self->monitor, 0, ZMQ_POLLIN, 0 };
    }
    return count;
}

int
ps_ring_transport_polled (ps_ring_transport_t *self, const zmq_pollitem_t *items,
                          ps_error_t *err)
{
    if (!items || (self->item_monitor >= 0 && (items [self->item_monitor].revents & ZMQ_POLLIN)))
        s_monitor_read (self);
    if (items && self->item_release >= 0 && (items [self->item_release].revents & ZMQ_POLLIN))
        return s_drain_release (self, err);
    return PS_OK;
}

void
ps_ring_transport_abandon (ps_ring_transport_t *self)
{
    s_close_push (&self->push, &self->monitor);
    double start = ps_clock_ms ();
    double warned_at = start;
    //  This waits without a deadline: returning earlier would let ZeroMQ
    //  read memory the caller owns again.
    while (atomic_load (&self->outstanding) > 0) {
        struct pollfd item = { .fd = self->release_fd, .events = POLLIN };
        int ready = poll (&item, 1, S_RELEASE_POLL_MS);
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
