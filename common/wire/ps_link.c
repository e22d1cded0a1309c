//  A process's link to the coordinator; see ps_link.h.
//
//  The link thread owns the DEALER socket and its end of an inproc PAIR
//  pipe; the owner thread owns the other end of the pipe. Both ends and the
//  DEALER are made in ps_link_new, so a bad endpoint is reported there, and
//  handed to the thread, which alone uses them until it is joined. Every
//  send on the thread is non-blocking: a message that cannot be queued is
//  dropped, because a thread stuck on a send would stop the heartbeats.

#include "ps_link.h"
#include "ps_clock.h"
#include "ps_log.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <zmq.h>

#define S_DEFAULT_HEARTBEAT_MS  500
#define S_DEFAULT_TIMEOUT_MS    3000

//  The coordinator's heartbeat interval and timeout are taken from
//  register_ok within these bounds, so a bad value cannot make the thread
//  spin or stop watching. They are the job's bounds (schemas/job.schema.json).
#define S_MIN_MS                10
#define S_MAX_INTERVAL_MS       60000
#define S_MAX_TIMEOUT_MS        600000

//  A register answered "busy" is sent again after this long, doubling with
//  each busy in a row up to the heartbeat interval: the coordinator says
//  busy while its run waits for the servers (a local cluster's first half
//  second), and a worker should start soon after they are there, not a
//  heartbeat interval later; a busy for another live incarnation of the
//  task, which lasts up to the heartbeat timeout, is soon asked at the
//  heartbeat interval again.
#define S_BUSY_RETRY_MS         50

//  Received messages queued for the owner before new ones are dropped.
#define S_PIPE_HWM              1000

//  What the DEALER queues while there is no connection to the coordinator
//  (its registers and heartbeats, the owner's requests): a few, which go
//  out the moment the connection is up; past them sends fail and are
//  dropped, so a coordinator that comes back after a long absence is not
//  flooded with stale registers. The DEALER keeps the default
//  ZMQ_IMMEDIATE of 0 for another reason: with 1, ZeroMQ discards the
//  messages received but not yet read when the connection drops, and the
//  coordinator's last messages ("stop", the heartbeat saying the run is
//  over) arrive just before it exits and closes the connection.
#define S_DEALER_HWM            16

//  Messages read from one socket before the timers get a look, so a flood
//  cannot hold back the heartbeats.
#define S_DRAIN_MAX             1000

//  A wake-up this much later than the poll asked for means the process was
//  stopped (SIGSTOP) or not scheduled; that time does not count as silence
//  of the coordinator, whose heartbeats could not be read meanwhile.
#define S_LATE_MS               100

//  How long ps_link_send may wait to queue a message for the link thread,
//  which reads its pipe at once; only a failed thread makes it wait.
#define S_OWNER_SNDTIMEO_MS     1000

//  ps_link_recv checks this often whether the link thread has failed.
#define S_FAILED_CHECK_MS       100

struct _ps_link_t {
    void *ctx;
    void *dealer;               //  link thread: to the coordinator
    void *pipe;                 //  link thread: its end of the pipe
    void *owner;                //  owner thread: the other end
    char *coordinator;
    char *role;
    char *endpoint;
    int index;
    bool deliver;
    ps_curve_t *curve;          //  the owner's; NULL: unsecured
    uint64_t incarnation;
    pthread_t thread;
    bool started;
    atomic_bool registered;
    atomic_bool finished;       //  the coordinator's heartbeats say the run is over
    atomic_bool failed;
    atomic_bool stopping;

    //  The rest belongs to the link thread.
    int heartbeat_ms;
    int timeout_ms;
    uint64_t next_id;
    uint64_t coordinator_incarnation;
    double last_seen;           //  last message from the coordinator
    double next_heartbeat;
    double next_register;
    bool register_blocked;      //  the last register found the queue full
    bool busy_logged;           //  a register was refused as "busy", and said so
    double busy_retry_ms;       //  the next register's delay after a busy
    ps_msg_t *incoming;
    ps_writer_t writer;
};

static int
s_clamp_ms (uint64_t ms, int max)
{
    return ms < S_MIN_MS ? S_MIN_MS : ms > (uint64_t) max ? max : (int) ms;
}

//  A random incarnation, never 0. The pid is mixed in so that two processes
//  started in the same instant differ even if the kernel's pool were weak.
static int
s_incarnation (uint64_t *incarnation, ps_error_t *err)
{
    uint64_t bits = 0;
    ssize_t got;
    do
        got = getrandom (&bits, sizeof bits, 0);
    while (got < 0 && errno == EINTR);
    if (got != (ssize_t) sizeof bits)
        return ps_error_set (err, PS_EIO, "getrandom: %s",
                             got < 0 ? strerror (errno) : "short read");
    bits ^= (uint64_t) getpid () * 0x9E3779B97F4A7C15ull;
    *incarnation = bits ? bits : 1;
    return PS_OK;
}

static int
s_setopt_int (void *socket, int option, int value)
{
    return zmq_setsockopt (socket, option, &value, sizeof value);
}

//  Whether a socket has a whole message to read (ZMQ_POLLIN) or room to
//  send one (ZMQ_POLLOUT). Returns the event mask or -1.
static int
s_events (void *socket)
{
    int events = 0;
    size_t size = sizeof events;
    if (zmq_getsockopt (socket, ZMQ_EVENTS, &events, &size) != 0)
        return -1;
    return events;
}

//  Send the header packed in the writer without waiting. Returns true when
//  ZeroMQ queued it; a message that cannot be queued is dropped.
static bool
s_send_now (ps_link_t *self, void *socket)
{
    return zmq_send (socket, self->writer.sbuf.data, self->writer.sbuf.size, ZMQ_DONTWAIT) >= 0;
}

static void
s_send_register (ps_link_t *self, double now)
{
    ps_proto_t msg = { .type = PS_PROTO_REGISTER, .id = self->next_id++,
                       .register_ = { self->role, (uint64_t) self->index, self->incarnation,
                                      self->endpoint, (uint64_t) getpid () } };
    ps_writer_encode (&self->writer, &msg);
    //  A register is queued while there is no connection and leaves as
    //  soon as it is up. Once S_DEALER_HWM are queued a send fails; the
    //  thread then polls for room, which comes with the connection, and
    //  registers at once rather than a heartbeat interval later.
    self->register_blocked = !s_send_now (self, self->dealer);
    self->next_register = now + self->heartbeat_ms;
}

static void
s_send_heartbeat (ps_link_t *self, double now)
{
    ps_proto_t msg = { .type = PS_PROTO_HEARTBEAT, .id = self->next_id++,
                       .heartbeat = { .incarnation = self->incarnation } };
    ps_writer_encode (&self->writer, &msg);
    s_send_now (self, self->dealer);
    self->next_heartbeat = now + self->heartbeat_ms;
}

//  Forget the registration and register again at once.
static void
s_reregister (ps_link_t *self, double now)
{
    atomic_store (&self->registered, false);
    self->next_register = now;
    self->register_blocked = false;
    self->busy_retry_ms = S_BUSY_RETRY_MS;
}

//  Hand the message just received to the owner, when it wants messages.
//  The header is encoded again from its decoded form: the coordinator's
//  messages carry no tensor frames, and ps_msg_t does not expose its own.
static void
s_deliver (ps_link_t *self)
{
    if (!self->deliver)
        return;
    ps_writer_encode (&self->writer, ps_msg_proto (self->incoming));
    if (!s_send_now (self, self->pipe))
        ps_debug ("link to %s: the owner's queue is full, %s dropped",
                  self->coordinator, ps_msg_type (self->incoming));
}

static void
s_on_register_ok (ps_link_t *self, const ps_proto_register_ok_t *reply, double now)
{
    self->heartbeat_ms = s_clamp_ms (reply->heartbeat_ms, S_MAX_INTERVAL_MS);
    self->timeout_ms = s_clamp_ms (reply->timeout_ms, S_MAX_TIMEOUT_MS);
    self->coordinator_incarnation = reply->coordinator;
    self->next_heartbeat = now + self->heartbeat_ms;
    self->register_blocked = false;
    //  A later refusal is news again.
    self->busy_logged = false;
    self->busy_retry_ms = S_BUSY_RETRY_MS;
    //  A coordinator that registers this process runs a job, even one that
    //  resumes a finished run: its own heartbeats will say so.
    atomic_store (&self->finished, false);
    atomic_store (&self->registered, true);
    s_deliver (self);
}

//  An error reply from the coordinator: some are the link's business, the
//  others the owner's.
static void
s_on_error (ps_link_t *self, const ps_proto_error_t *error, bool registered, double now)
{
    int code = ps_error_from_name (error->code);
    if (code == PS_ENOTFOUND) {
        //  The coordinator does not know this process: it restarted or
        //  declared the process failed. That is the link's business, not
        //  the owner's; while unregistered it answers a stale message and
        //  the registering is under way anyway.
        if (registered) {
            ps_info ("link to %s: the coordinator does not know this process, "
                     "registering again", self->coordinator);
            s_reregister (self, now);
        }
    }
    else
    if (code == PS_EBUSY && !registered) {
        //  The coordinator waits for its servers, or another incarnation
        //  of this task is alive to it (this one is taken once that one's
        //  death is known or its silence has lasted the timeout).
        //  Registering on, soon, is right; say so once.
        if (!self->busy_logged) {
            ps_info ("link to %s: waiting to register: %s", self->coordinator, error->message);
            self->busy_logged = true;
        }
        if (self->next_register > now + self->busy_retry_ms)
            self->next_register = now + self->busy_retry_ms;
        self->busy_retry_ms = fmin (2 * self->busy_retry_ms, self->heartbeat_ms);
    }
    else
        s_deliver (self);
}

//  Read one message from the coordinator and act on it. Returns 0, or
//  PS_EIO when the socket fails.
static int
s_from_coordinator (ps_link_t *self, double now)
{
    ps_error_t err;
    int rc = ps_msg_recv (self->incoming, self->dealer, false, &err);
    if (rc == PS_EIO) {
        ps_error ("link to %s: %s", self->coordinator, err.msg);
        return rc;
    }
    //  Whatever it holds, a message shows the coordinator is alive.
    self->last_seen = now;
    if (rc == PS_OK)
        rc = ps_msg_decode (self->incoming, &err);
    if (rc) {
        ps_warn ("link to %s: dropping a message: %s", self->coordinator, err.msg);
        return PS_OK;
    }
    bool registered = atomic_load (&self->registered);
    const ps_proto_t *msg = ps_msg_proto (self->incoming);
    switch (msg->type) {
        case PS_PROTO_REGISTER_OK:
            s_on_register_ok (self, &msg->register_ok, now);
            break;
        case PS_PROTO_HEARTBEAT:
            //  A new incarnation means the coordinator restarted and knows
            //  nothing of this process.
            if (registered && msg->heartbeat.incarnation != self->coordinator_incarnation) {
                ps_info ("link to %s: coordinator incarnation %" PRIx64 " replaced %" PRIx64
                         ", registering again", self->coordinator, msg->heartbeat.incarnation,
                         self->coordinator_incarnation);
                s_reregister (self, now);
            }
            else
            //  Kept past the coordinator's silence: it is how the owner
            //  tells a coordinator that finished and exited from one that
            //  crashed and will be restarted.
            if (registered && msg->heartbeat.has_done && msg->heartbeat.done)
                atomic_store (&self->finished, true);
            break;
        case PS_PROTO_ERROR:
            s_on_error (self, &msg->error, registered, now);
            break;
        default:
            s_deliver (self);
    }
    return PS_OK;
}

//  Read one message from the owner: the stop signal (one empty frame), or
//  a message to forward to the coordinator, dropped while unregistered.
//  Returns 0, 1 for stop, or PS_EIO.
static int
s_from_owner (ps_link_t *self)
{
    bool forward = atomic_load (&self->registered);
    bool first = true;
    bool more = true;
    while (more) {
        zmq_msg_t part;
        if (zmq_msg_init (&part) != 0)
            abort ();
        if (zmq_msg_recv (&part, self->pipe, 0) < 0) {
            int saved = errno;
            zmq_msg_close (&part);
            ps_error ("link to %s: reading the owner's pipe: %s", self->coordinator,
                      zmq_strerror (saved));
            return PS_EIO;
        }
        more = zmq_msg_more (&part);
        if (first && !more && zmq_msg_size (&part) == 0) {
            zmq_msg_close (&part);
            return 1;
        }
        //  ZeroMQ queues the parts of a message all or none, so only the
        //  first send can fail for want of room or of a connection.
        if (forward
        &&  zmq_msg_send (&part, self->dealer, (more ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0) {
            forward = false;
            ps_debug ("link to %s: the owner's message could not be queued: %s",
                      self->coordinator, zmq_strerror (errno));
        }
        zmq_msg_close (&part);
        first = false;
    }
    return PS_OK;
}

//  Read every message waiting on both sockets, so that the timers judge
//  silence only after all that has come in was seen. Returns 0, 1 when the
//  owner asked the thread to stop, or PS_EIO.
static int
s_drain (ps_link_t *self, double now)
{
    for (int n = 0; n < S_DRAIN_MAX; n++) {
        int events = s_events (self->dealer);
        if (events < 0) {
            ps_error ("link to %s: ZMQ_EVENTS: %s", self->coordinator, zmq_strerror (errno));
            return PS_EIO;
        }
        if (!(events & ZMQ_POLLIN))
            break;
        int rc = s_from_coordinator (self, now);
        if (rc)
            return rc;
    }
    for (int n = 0; n < S_DRAIN_MAX; n++) {
        int events = s_events (self->pipe);
        if (events < 0) {
            ps_error ("link to %s: ZMQ_EVENTS: %s", self->coordinator, zmq_strerror (errno));
            return PS_EIO;
        }
        if (!(events & ZMQ_POLLIN))
            break;
        int rc = s_from_owner (self);
        if (rc)
            return rc;
    }
    return PS_OK;
}

//  Send what is due, and declare the coordinator gone after its timeout.
static void
s_timers (ps_link_t *self, double now, bool writable)
{
    if (atomic_load (&self->registered) && now - self->last_seen >= self->timeout_ms) {
        char message [512];
        snprintf (message, sizeof message, "coordinator at %s silent for %.0f ms",
                  self->coordinator, now - self->last_seen);
        ps_warn ("link: %s, registering again", message);
        s_reregister (self, now);
        ps_error_t err;
        if (self->deliver
        &&  ps_msg_send_error (self->pipe, NULL, 0, 0, PS_ETIMEDOUT, message, &err))
            ps_debug ("link to %s: the owner's queue is full, timeout dropped: %s",
                      self->coordinator, err.msg);
    }
    if (atomic_load (&self->registered)) {
        if (now >= self->next_heartbeat)
            s_send_heartbeat (self, now);
    }
    else
    if (now >= self->next_register || (self->register_blocked && writable))
        s_send_register (self, now);
}

//  The time the next timer falls due.
static double
s_next_due (ps_link_t *self)
{
    if (!atomic_load (&self->registered))
        return self->next_register;
    double silence = self->last_seen + self->timeout_ms;
    return self->next_heartbeat < silence ? self->next_heartbeat : silence;
}

static void *
s_run (void *arg)
{
    ps_link_t *self = arg;
    self->next_register = ps_clock_ms ();
    self->last_seen = self->next_register;
    bool failed = false;
    while (!failed && !atomic_load (&self->stopping)) {
        double before = ps_clock_ms ();
        double due = s_next_due (self);
        long wait = due > before ? (long) ceil (due - before) : 0;
        //  While a register waits for a connection, a writable DEALER
        //  means the connection is up.
        short dealer_events = ZMQ_POLLIN;
        if (self->register_blocked && !atomic_load (&self->registered))
            dealer_events |= ZMQ_POLLOUT;
        zmq_pollitem_t items [] = {
            { self->dealer, 0, dealer_events, 0 },
            { self->pipe, 0, ZMQ_POLLIN, 0 },
        };
        if (zmq_poll (items, 2, wait) < 0) {
            if (errno == EINTR)
                continue;
            ps_error ("link to %s: zmq_poll: %s", self->coordinator, zmq_strerror (errno));
            failed = true;
            break;
        }
        double now = ps_clock_ms ();
        double late = now - (before + (double) wait);
        if (late > S_LATE_MS)
            self->last_seen += late;
        int rc = s_drain (self, now);
        if (rc == 1)
            break;              //  the owner is destroying the link
        failed = rc != PS_OK;
        if (!failed)
            s_timers (self, now, (items [0].revents & ZMQ_POLLOUT) != 0);
    }
    if (failed) {
        //  The owner learns of it from ps_link_recv and ps_link_send.
        atomic_store (&self->registered, false);
        atomic_store (&self->failed, true);
    }
    return NULL;
}

//  Make the sockets and connect them. Returns 0 or a code with err set.
static int
s_open (ps_link_t *self, ps_error_t *err)
{
    self->ctx = zmq_ctx_new ();
    if (!self->ctx)
        return ps_error_set (err, PS_EIO, "zmq_ctx_new: %s", zmq_strerror (errno));
    self->dealer = zmq_socket (self->ctx, ZMQ_DEALER);
    self->pipe = zmq_socket (self->ctx, ZMQ_PAIR);
    self->owner = zmq_socket (self->ctx, ZMQ_PAIR);
    if (!self->dealer || !self->pipe || !self->owner)
        return ps_error_set (err, PS_EIO, "zmq_socket: %s", zmq_strerror (errno));

    char routing_id [256];
    int length = snprintf (routing_id, sizeof routing_id, "%s:%d:%" PRIx64,
                           self->role, self->index, self->incarnation);
    if (length < 0 || length >= (int) sizeof routing_id)
        return ps_error_set (err, PS_EINVAL, "role %s makes a routing id over 255 bytes",
                             self->role);
    int ipv6 = strchr (self->coordinator, '[') != NULL;      //  an IPv6 literal
    if (zmq_setsockopt (self->dealer, ZMQ_ROUTING_ID, routing_id, (size_t) length) != 0
    ||  s_setopt_int (self->dealer, ZMQ_LINGER, 0) != 0
    ||  s_setopt_int (self->dealer, ZMQ_SNDHWM, S_DEALER_HWM) != 0
    ||  s_setopt_int (self->dealer, ZMQ_SNDTIMEO, 0) != 0
    ||  s_setopt_int (self->dealer, ZMQ_IPV6, ipv6) != 0
    ||  s_setopt_int (self->pipe, ZMQ_LINGER, 0) != 0
    ||  s_setopt_int (self->pipe, ZMQ_SNDHWM, S_PIPE_HWM) != 0
    ||  s_setopt_int (self->pipe, ZMQ_SNDTIMEO, 0) != 0
    ||  s_setopt_int (self->owner, ZMQ_LINGER, 0) != 0
    ||  s_setopt_int (self->owner, ZMQ_RCVHWM, S_PIPE_HWM) != 0
    ||  s_setopt_int (self->owner, ZMQ_SNDTIMEO, S_OWNER_SNDTIMEO_MS) != 0)
        return ps_error_set (err, PS_EIO, "link to %s: zmq_setsockopt: %s",
                             self->coordinator, zmq_strerror (errno));
    int rc;
    if (self->curve && (rc = ps_curve_client (self->curve, self->dealer, "chief:0", err)))
        return rc;
    if (zmq_connect (self->dealer, self->coordinator) != 0)
        return ps_error_set (err, PS_EINVAL, "cannot connect to coordinator at %s: %s",
                             self->coordinator, zmq_strerror (errno));

    //  The context is the link's own, so the name only has to be unique
    //  within it; the address makes it unique in the process anyway.
    char pipe_endpoint [64];
    snprintf (pipe_endpoint, sizeof pipe_endpoint, "inproc://ps-link-%p", (void *) self);
    if (zmq_bind (self->pipe, pipe_endpoint) != 0
    ||  zmq_connect (self->owner, pipe_endpoint) != 0)
        return ps_error_set (err, PS_EIO, "link to %s: pipe %s: %s", self->coordinator,
                             pipe_endpoint, zmq_strerror (errno));
    return PS_OK;
}

static char *
s_strdup (const char *s)
{
    char *copy = strdup (s);
    if (!copy)
        abort ();
    return copy;
}

ps_link_t *
ps_link_new (const ps_link_config_t *config, ps_error_t *err)
{
    assert (config);
    if (!config->coordinator || !config->role || !*config->role || config->index < 0) {
        ps_error_set (err, PS_EINVAL, "link needs a coordinator endpoint, a role and an index >= 0");
        return NULL;
    }
    ps_link_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->coordinator = s_strdup (config->coordinator);
    self->role = s_strdup (config->role);
    self->endpoint = s_strdup (config->endpoint ? config->endpoint : "");
    self->index = config->index;
    self->deliver = config->deliver;
    self->curve = config->curve;
    self->heartbeat_ms = s_clamp_ms (config->heartbeat_ms > 0
                                     ? (uint64_t) config->heartbeat_ms : S_DEFAULT_HEARTBEAT_MS,
                                     S_MAX_INTERVAL_MS);
    self->timeout_ms = s_clamp_ms (config->timeout_ms > 0
                                   ? (uint64_t) config->timeout_ms : S_DEFAULT_TIMEOUT_MS,
                                   S_MAX_TIMEOUT_MS);
    self->busy_retry_ms = S_BUSY_RETRY_MS;
    self->next_id = 1;
    atomic_init (&self->registered, false);
    atomic_init (&self->finished, false);
    atomic_init (&self->failed, false);
    atomic_init (&self->stopping, false);
    self->incoming = ps_msg_new ();
    ps_writer_init (&self->writer);
    if (s_incarnation (&self->incarnation, err) || s_open (self, err))
        goto fail;
    //  pthread_create orders the socket set-up above before the thread's
    //  first use of them, as ZeroMQ requires when a socket changes thread.
    int rc = pthread_create (&self->thread, NULL, s_run, self);
    if (rc != 0) {
        ps_error_set (err, PS_EIO, "link to %s: pthread_create: %s", self->coordinator,
                      strerror (rc));
        goto fail;
    }
    self->started = true;
    return self;
fail:
    ps_link_destroy (&self);
    return NULL;
}

void
ps_link_destroy (ps_link_t **self_p)
{
    assert (self_p);
    ps_link_t *self = *self_p;
    if (!self)
        return;
    if (self->started) {
        //  The flag stops the thread at its next wake-up; the empty message
        //  wakes it now. The thread reads its pipe at once, so the send only
        //  fails when the thread has already ended.
        atomic_store (&self->stopping, true);
        if (zmq_send (self->owner, "", 0, ZMQ_DONTWAIT) < 0 && !atomic_load (&self->failed))
            ps_warn ("link to %s: cannot wake the link thread: %s", self->coordinator,
                     zmq_strerror (errno));
        int rc = pthread_join (self->thread, NULL);
        if (rc != 0)
            ps_error ("link to %s: pthread_join: %s", self->coordinator, strerror (rc));
    }
    //  Closing cannot fail on a valid socket; every socket has linger 0, so
    //  terminating the context does not wait for unsent messages.
    if (self->dealer)
        zmq_close (self->dealer);
    if (self->pipe)
        zmq_close (self->pipe);
    if (self->owner)
        zmq_close (self->owner);
    if (self->ctx)
        while (zmq_ctx_term (self->ctx) != 0 && errno == EINTR)
            ;
    ps_msg_destroy (&self->incoming);
    ps_writer_fini (&self->writer);
    free (self->coordinator);
    free (self->role);
    free (self->endpoint);
    free (self);
    *self_p = NULL;
}

uint64_t
ps_link_incarnation (const ps_link_t *self)
{
    assert (self);
    return self->incarnation;
}

bool
ps_link_registered (ps_link_t *self)
{
    assert (self);
    return atomic_load (&self->registered);
}

bool
ps_link_finished (ps_link_t *self)
{
    assert (self);
    return atomic_load (&self->finished);
}

int
ps_link_recv (ps_link_t *self, ps_msg_t *msg, int timeout_ms, ps_error_t *err)
{
    assert (self && msg);
    double deadline = ps_clock_ms () + (timeout_ms < 0 ? 0 : timeout_ms);
    while (true) {
        //  Waits are cut into slices so that a failed thread is noticed
        //  even by a caller who waits forever.
        long wait = S_FAILED_CHECK_MS;
        if (timeout_ms >= 0) {
            double left = deadline - ps_clock_ms ();
            wait = left <= 0 ? 0 : left < wait ? (long) ceil (left) : wait;
        }
        zmq_pollitem_t item = { self->owner, 0, ZMQ_POLLIN, 0 };
        int ready = zmq_poll (&item, 1, wait);
        if (ready < 0 && errno == EINTR) {
            ps_error_set (err, PS_ETIMEDOUT, "waiting for coordinator at %s: "
                          "interrupted by a signal", self->coordinator);
            errno = EINTR;
            return PS_ETIMEDOUT;
        }
        if (ready < 0)
            return ps_error_set (err, PS_EIO, "link to %s: zmq_poll: %s", self->coordinator,
                                 zmq_strerror (errno));
        if (ready > 0) {
            int rc = ps_msg_recv (msg, self->owner, false, err);
            if (rc == PS_OK)
                rc = ps_msg_decode (msg, err);
            if (rc)
                ps_error_prefix (err, rc, "link to %s", self->coordinator);
            return rc;
        }
        if (atomic_load (&self->failed))
            return ps_error_set (err, PS_EIO, "the link thread to coordinator at %s has failed",
                                 self->coordinator);
        if (timeout_ms >= 0 && ps_clock_ms () >= deadline)
            return ps_error_set (err, PS_ETIMEDOUT, "no message from coordinator at %s in %d ms",
                                 self->coordinator, timeout_ms);
    }
}

void *
ps_link_pollable (ps_link_t *self)
{
    assert (self);
    return self->owner;
}

int
ps_link_send (ps_link_t *self, ps_writer_t *writer, ps_error_t *err)
{
    assert (self && writer);
    if (atomic_load (&self->failed))
        return ps_error_set (err, PS_EIO, "the link thread to coordinator at %s has failed",
                             self->coordinator);
    int rc = ps_writer_send (writer, self->owner, NULL, 0, NULL, 0, err);
    if (rc)
        ps_error_prefix (err, rc, "link to %s", self->coordinator);
    return rc;
}
