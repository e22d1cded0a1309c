//  Ring collectives; see ps_ring.h. This file is the algorithm: the
//  collective's loop over the schedule of the all-reduce and the broadcast
//  (whose arithmetic is ps_ring_schedule.h's), messages held for a later
//  ring or collective, and formation; the sockets are the transport's
//  (ps_ring_transport.h), as gloo writes its algorithms against
//  transport::Pair.
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
//  Zero-copy. Payloads are sent straight from the caller's vector by the
//  transport (ps_ring_transport.h), which counts the buffers ZeroMQ still
//  holds. A range is never written while ZeroMQ may still read it for
//  sending: every range this member sends is overwritten later only by a
//  message whose existence proves that the successor has received the
//  range sent before.
//
//  Messages of a later ring or collective (a member that formed the next
//  ring before this one, or started the next collective) are held until
//  this member gets there; messages of an earlier one are dropped.
//
//  A ring is used by one thread at a time.

#include "ps_ring.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_clock.h"
#include "ps_log.h"
#include "ps_host.h"
#include "ps_ring_schedule.h"
#include "ps_ring_shm.h"
#include "ps_ring_transport.h"

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
#define S_MAX_CHUNK             PS_RING_MAX_CHUNK

#define S_DEFAULT_TIMEOUT_MS    10000

//  The watch function is called at least this often while a collective
//  waits.
#define S_WATCH_MS              100

//  Messages of later rings or collectives held at most; past this they are
//  dropped (a peer that floods the ring must not exhaust memory).
#define S_HELD_MAX              65536

//  A message of a later ring or collective, kept until this member gets
//  there.
typedef struct {
    ps_ring_header_t header;
    zmq_msg_t payload;
} s_held_t;

struct _ps_ring_t {
    ps_ring_transport_t *transport;
    bool secured;               //  the transport has the owner's identity
    size_t chunk_bytes;
    int timeout_ms;
    size_t shm_bytes;
    ps_ring_shm_t *shm;         //  this ring's shared memory, when all members share the host

    void *watch_socket;
    int watch_fd;
    ps_ring_watch_fn *watch_fn;
    void *watch_arg;

    bool formed;                //  ps_ring_form succeeded at least once
    bool broken;                //  a collective failed since the last formation
    uint64_t ring_id;
    uint64_t seq;               //  of the next collective
    int rank, n;

    s_held_t **held;
    size_t held_count, held_max;

    ps_ring_stats_t stats;
};

//  One collective in progress: its schedule (ps_ring_schedule.h; see
//  "The schedule" above) and where this member is in it.
typedef struct {
    ps_ring_t *ring;
    ps_ring_schedule_t sched;
    unsigned char *data;
    size_t elem;                //  bytes per element: 4 (floats) or 1
    size_t chunk;               //  bytes per message at most, a multiple of elem

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
//  Messages held for a later ring or collective

//  Where a message stands relative to this member: -1 of an earlier ring
//  or collective, 0 of the collective under way (or next), 1 later.
static int
s_age (const ps_ring_t *self, const ps_ring_header_t *h)
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
    ps_ring_payload_close (&held->payload);
    free (held);
    memmove (self->held + i, self->held + i + 1, (self->held_count - i - 1) * sizeof *self->held);
    self->held_count--;
}

//  Keep a message of a later ring or collective; its payload moves into
//  the held copy.
static void
s_hold (ps_ring_t *self, const ps_ring_header_t *h, zmq_msg_t *payload)
{
    if (self->held_count == S_HELD_MAX) {
        ps_ring_transport_malformed (self->transport, "ring %" PRIx64 " collective %" PRIu64 " is ahead of this member, "
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
//  Construction and formation

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
    self->watch_fd = -1;
    self->secured = config->curve != NULL;
    self->chunk_bytes = config->chunk_bytes ? config->chunk_bytes : PS_RING_DEFAULT_CHUNK;
    self->timeout_ms = config->timeout_ms ? config->timeout_ms : S_DEFAULT_TIMEOUT_MS;
    self->shm_bytes = config->shm_bytes ? config->shm_bytes : PS_RING_SHM_DEFAULT_SLOT;
    if (self->shm_bytes < PS_RING_SHM_MIN_SLOT || self->shm_bytes > PS_RING_SHM_MAX_SLOT
    ||  self->shm_bytes % 64) {
        ps_error_set (err, PS_EINVAL, "ring at %s: shm_bytes %zu is not a multiple of 64 from "
                      "%d to %d", config->bind, config->shm_bytes, PS_RING_SHM_MIN_SLOT,
                      PS_RING_SHM_MAX_SLOT);
        free (self);
        return NULL;
    }
    if (!(self->transport = ps_ring_transport_new (config->bind, config->ipc, config->curve, err)))
        ps_ring_destroy (&self);
    return self;
}

void
ps_ring_destroy (ps_ring_t **self_p)
{
    assert (self_p);
    ps_ring_t *self = *self_p;
    if (!self)
        return;
    while (self->held_count)
        s_held_remove (self, self->held_count - 1, false);
    free (self->held);
    ps_ring_shm_destroy (&self->shm);
    ps_ring_transport_destroy (&self->transport);
    free (self);
    *self_p = NULL;
}

const char *
ps_ring_endpoint (const ps_ring_t *self)
{
    assert (self);
    return ps_ring_transport_endpoint (self->transport);
}

const char *
ps_ring_advert (const ps_ring_t *self)
{
    assert (self);
    return ps_ring_transport_advert (self->transport);
}

const char *
ps_ring_successor (const ps_ring_t *self)
{
    assert (self);
    return ps_ring_transport_successor (self->transport);
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

//  Whether the members of a ring of more than one all share memory with
//  this member (ps_host_shares_memory): all their sets name this host and
//  this member's shared-memory identity. That compares strings alone, so
//  every member, deciding from the same list, decides alike.
static bool
s_shares_memory (const char *const *members, int n)
{
    if (n < 2)
        return false;
    for (int i = 0; i < n; i++)
        if (!ps_host_shares_memory (members [i]))
            return false;
    return true;
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
    if (self->secured && !tasks)
        return ps_error_set (err, PS_EINVAL, "ring %" PRIx64 ": a secured ring needs each "
                             "member's task", ring_id);
    char successor_task [32] = "", predecessor_task [32] = "";
    if (tasks) {
        snprintf (successor_task, sizeof successor_task, "worker:%d", tasks [(rank + 1) % n]);
        snprintf (predecessor_task, sizeof predecessor_task, "worker:%d",
                  tasks [(rank + n - 1) % n]);
    }
    //  A formation that fails leaves the previous ring as it was, but for
    //  the one case of ps_ring.h's.
    ps_ring_shm_t *shm = NULL;
    ps_error_t shm_err;
    if (s_shares_memory (members, n)) {
        shm = ps_ring_shm_new (ring_id, members, n, rank, self->shm_bytes, &shm_err);
        //  The previous ring's memory may be what leaves no room for this
        //  one's: let it go, which breaks the previous ring, and try again.
        if (!shm && shm_err.code == PS_EIO && self->shm) {
            ps_ring_shm_destroy (&self->shm);
            self->broken = true;
            shm = ps_ring_shm_new (ring_id, members, n, rank, self->shm_bytes, &shm_err);
        }
        if (!shm)
            return ps_error_set (err, shm_err.code, "%s", shm_err.msg);
    }
    int rc = ps_ring_transport_connect (self->transport, ring_id,
                                        n > 1 ? members [(rank + 1) % n] : NULL, (rank + 1) % n,
                                        successor_task, members [(rank + n - 1) % n],
                                        predecessor_task, err);
    if (rc) {
        ps_ring_shm_destroy (&shm);
        return rc;
    }
    ps_ring_shm_destroy (&self->shm);
    self->shm = shm;
    if (shm)
        ps_info ("ring %" PRIx64 ": all %d members are on this host: all-reduces over the "
                 "shared memory %s", ring_id, n, ps_ring_shm_name (shm));
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
    stats->malformed = ps_ring_transport_malformed_count (self->transport);
}

//  ---------------------------------------------------------------------
//  The schedule

//  Move the cursors past finished (and empty) rounds.
static void
s_skip_done (s_op_t *op)
{
    size_t begin, len;
    while (op->send_round < op->sched.send_rounds) {
        ps_ring_schedule_range (&op->sched, true, op->send_round, &begin, &len);
        if (op->send_pos < len)
            break;
        op->send_round++;
        op->send_pos = 0;
        op->send_index = 0;
    }
    while (op->recv_round < op->sched.recv_rounds) {
        ps_ring_schedule_range (&op->sched, false, op->recv_round, &begin, &len);
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
    if (!op->sched.broadcast)
        snprintf (buf, size, "all-reduce of %zu floats (ring %" PRIx64 ", collective %" PRIu64
                  ", member %d of %d)", op->sched.total / sizeof (float), self->ring_id, self->seq,
                  self->rank, self->n);
    else
        snprintf (buf, size, "broadcast of %zu bytes from member %d (ring %" PRIx64
                  ", collective %" PRIu64 ", member %d of %d)", op->sched.total, op->sched.root,
                  self->ring_id, self->seq, self->rank, self->n);
}

//  ---------------------------------------------------------------------
//  Sending

//  Queue one message: bytes [offset, offset + size) of the vector.
//  Returns 0, 1 when the transport has no room now, or PS_EIO.
static int
s_send (s_op_t *op, size_t offset, size_t size, ps_error_t *err)
{
    ps_ring_t *self = op->ring;
    unsigned kind, within;
    ps_ring_schedule_round_kind (&op->sched, op->send_round, &kind, &within);
    ps_ring_header_t h = {
        .kind = (uint16_t) kind, .round = within,
        .root = (uint32_t) (op->sched.broadcast ? op->sched.root : 0),
        .ring = self->ring_id, .seq = self->seq, .index = op->send_index,
        .offset = offset, .length = size, .total = op->sched.total
    };
    return ps_ring_transport_send (self->transport, &h, op->data, err);
}

//  Queue every message that is ready, until ZeroMQ has no room. Sets
//  *progress when one was queued.
static int
s_send_ready (s_op_t *op, bool *progress, ps_error_t *err)
{
    op->send_blocked = false;
    while (op->send_round < op->sched.send_rounds) {
        size_t begin, len;
        ps_ring_schedule_range (&op->sched, true, op->send_round, &begin, &len);
        //  How much of the round's range may go: all of it in a free
        //  round, else what the receive round it depends on has brought.
        size_t ready = len;
        if (op->send_round >= op->sched.free_rounds) {
            int needs = op->send_round - op->sched.free_rounds;
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

//  Add (reduce-scatter) or copy (all-gather, broadcast) one message of
//  this collective into the vector, after checking that it is the one
//  expected next. Returns 0 or PS_EPROTO.
static int
s_apply (s_op_t *op, const ps_ring_header_t *h, zmq_msg_t *payload, ps_error_t *err)
{
    ps_ring_t *self = op->ring;
    const char *predecessor = ps_ring_transport_predecessor (self->transport);
    char what [256];
    if (op->recv_round >= op->sched.recv_rounds) {
        s_describe (op, what, sizeof what);
        return ps_error_set (err, PS_EPROTO, "%s: an unexpected %s message %" PRIu64 " from %s "
                             "after all this member expects (do the members run the same "
                             "collectives?)", what, ps_ring_kind_name (h->kind), h->index,
                             predecessor);
    }
    unsigned kind, within;
    ps_ring_schedule_round_kind (&op->sched, op->recv_round, &kind, &within);
    if (h->kind != kind || h->round != within
    ||  (op->sched.broadcast && h->root != (uint32_t) op->sched.root)) {
        s_describe (op, what, sizeof what);
        return ps_error_set (err, PS_EPROTO, "%s: %s round %" PRIu32 " (root %" PRIu32 ") came "
                             "from %s where %s round %u was expected (do the members run the "
                             "same collectives?)", what, ps_ring_kind_name (h->kind), h->round, h->root,
                             predecessor, ps_ring_kind_name (kind), within);
    }
    if (h->total != op->sched.total) {
        s_describe (op, what, sizeof what);
        return ps_error_set (err, PS_EPROTO, "%s: %s sent a slice of a %" PRIu64 "-byte vector; "
                             "this member's is %zu bytes", what, predecessor, h->total,
                             op->sched.total);
    }
    size_t begin, len;
    ps_ring_schedule_range (&op->sched, false, op->recv_round, &begin, &len);
    if (h->offset != begin + op->recv_pos || h->length > len - op->recv_pos
    ||  h->length % op->elem) {
        s_describe (op, what, sizeof what);
        return ps_error_set (err, PS_EPROTO, "%s: bytes [%" PRIu64 ", +%" PRIu64 ") from %s do "
                             "not fit: bytes from %zu of [%zu, %zu) were expected", what,
                             h->offset, h->length, predecessor, begin + op->recv_pos,
                             begin, begin + len);
    }
    const unsigned char *bytes = zmq_msg_data (payload);
    if (kind == PS_RING_KIND_REDUCE_SCATTER)
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
    ps_ring_header_t h;
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
        rc = ps_ring_transport_read (self->transport, &h, &payload, err);
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
    ps_ring_payload_close (&payload);
    return rc;
}

//  ---------------------------------------------------------------------
//  The collective

static int
s_timed_out (s_op_t *op, double since, ps_error_t *err)
{
    ps_ring_t *self = op->ring;
    const char *successor = ps_ring_transport_successor (self->transport);
    char what [256];
    s_describe (op, what, sizeof what);
    char waiting [512];
    if (op->recv_round < op->sched.recv_rounds) {
        size_t begin, len;
        ps_ring_schedule_range (&op->sched, false, op->recv_round, &begin, &len);
        snprintf (waiting, sizeof waiting, "waiting for round %d of %d from %s (%zu of its %zu "
                  "bytes came)", op->recv_round + 1, op->sched.recv_rounds,
                  ps_ring_transport_predecessor (self->transport),
                  op->recv_pos, len);
    }
    else
    if (op->send_round < op->sched.send_rounds)
        snprintf (waiting, sizeof waiting, "%s takes no more (round %d of %d)", successor,
                  op->send_round + 1, op->sched.send_rounds);
    else
        snprintf (waiting, sizeof waiting, "%s has not taken the last %zu messages",
                  successor, ps_ring_transport_outstanding (self->transport));
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
    int rc = ps_ring_transport_polled (self->transport, NULL, err);
    if (rc)
        return rc;
    double progress_at = ps_clock_ms ();
    double watched_at = progress_at;
    size_t outstanding_was = ps_ring_transport_outstanding (self->transport);
    while (true) {
        bool progress = false, busy = false;
        rc = s_send_ready (op, &progress, err);
        //  One message at a time, so that what it made ready to send goes
        //  out before the next is reduced.
        if (rc == PS_OK && op->recv_round < op->sched.recv_rounds)
            rc = s_receive_one (op, &busy, &progress, err);
        if (rc)
            return rc;
        bool sent_all = op->send_round >= op->sched.send_rounds;
        bool received_all = op->recv_round >= op->sched.recv_rounds;
        size_t outstanding = ps_ring_transport_outstanding (self->transport);
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
        int count = ps_ring_transport_poll_items (self->transport, items, !received_all,
                                                  op->send_blocked, sent_all && outstanding > 0);
        int watch = -1;
        if (self->watch_fn && (self->watch_socket || self->watch_fd >= 0)) {
            watch = count++;
            items [watch] = (zmq_pollitem_t) { self->watch_socket, self->watch_fd,
                                               ZMQ_POLLIN, 0 };
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
        if ((rc = ps_ring_transport_polled (self->transport, items, err)) != PS_OK)
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
                             what, ps_ring_transport_endpoint (self->transport));
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
    ps_ring_transport_abandon (self->transport);
    return rc;
}

//  What a member waiting in shared memory checks: the watch (readable,
//  or every S_WATCH_MS) and the timeout.
typedef struct {
    ps_ring_t *ring;
    size_t count;
    double watched_at;
} s_shm_wait_t;

static int
s_shm_wait (void *arg, double since_ms, ps_error_t *err)
{
    s_shm_wait_t *wait = arg;
    ps_ring_t *self = wait->ring;
    char where [256];
    if (self->watch_fn) {
        bool due = ps_clock_ms () - wait->watched_at >= S_WATCH_MS;
        if (!due && (self->watch_socket || self->watch_fd >= 0)) {
            zmq_pollitem_t item = { self->watch_socket, self->watch_fd, ZMQ_POLLIN, 0 };
            int rc = zmq_poll (&item, 1, 0);
            if (rc < 0 && errno != EINTR)
                return ps_error_set (err, PS_EIO, "all-reduce of %zu floats (ring %" PRIx64
                                     "): zmq_poll of the watch: %s", wait->count,
                                     self->ring_id, zmq_strerror (errno));
            due = rc > 0 && (item.revents & ZMQ_POLLIN);
        }
        if (due && s_watch (self, &wait->watched_at)) {
            ps_ring_shm_describe (self->shm, where, sizeof where);
            return ps_error_set (err, PS_ECANCELED, "all-reduce of %zu floats (ring %" PRIx64
                                 ", collective %" PRIu64 ", member %d of %d): aborted by the "
                                 "watch in %s", wait->count, self->ring_id, self->seq,
                                 self->rank, self->n, where);
        }
    }
    if (since_ms >= self->timeout_ms) {
        ps_ring_shm_describe (self->shm, where, sizeof where);
        return ps_error_set (err, PS_ETIMEDOUT, "all-reduce of %zu floats (ring %" PRIx64
                             ", collective %" PRIu64 ", member %d of %d): no progress for "
                             "%.0f ms, waiting in %s", wait->count, self->ring_id, self->seq,
                             self->rank, self->n, since_ms, where);
    }
    return PS_OK;
}

//  The all-reduce of a ring of one host, accounted as s_collective does;
//  a failure marks the ring broken, and its shared memory is not used
//  again.
static int
s_shm_allreduce (ps_ring_t *self, float *data, size_t count, ps_error_t *err)
{
    s_shm_wait_t wait = { .ring = self, .count = count, .watched_at = ps_clock_ms () };
    int rc = ps_ring_shm_allreduce (self->shm, self->seq, data, count, s_shm_wait, &wait, err);
    self->seq++;
    if (rc == PS_OK) {
        self->stats.collectives++;
        self->stats.shared_memory++;
        return PS_OK;
    }
    self->broken = true;
    ps_ring_shm_destroy (&self->shm);
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
    if (self->shm)
        return s_shm_allreduce (self, data, count, err);
    size_t chunk = self->chunk_bytes / sizeof (float) * sizeof (float);
    s_op_t op = {
        .ring = self, .data = (unsigned char *) data,
        .sched = ps_ring_schedule_allreduce (count * sizeof (float), self->n, self->rank),
        .elem = sizeof (float), .chunk = chunk ? chunk : sizeof (float)
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
    s_op_t op = {
        .ring = self, .data = data,
        .sched = ps_ring_schedule_broadcast (bytes, self->n, self->rank, root),
        .elem = 1, .chunk = self->chunk_bytes
    };
    return s_collective (&op, err);
}
