//  The ps-server; see ps_server.h for the concurrency model.

#include "ps_server.h"
#include "ps_clock.h"
#include "ps_control.h"
#include "ps_floats.h"
#include "ps_heap.h"
#include "ps_listener.h"
#include "ps_log.h"
#include "ps_msg.h"
#include "ps_partition.h"
#include "ps_peers.h"
#include "ps_pool.h"
#include "ps_proto_conv.h"
#include "ps_table.h"

#include <assert.h>
#include <inttypes.h>
#include <czmq.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

//  Requests moving fewer tensor bytes than this are served inline on the
//  main thread: below it a hand-off to the pool costs more than it saves.
#define S_INLINE_BYTES  (256 * 1024)

//  After this long without a request, a server that has moved tensors since
//  it last fell idle returns its free heap to the kernel (see ps_heap.h).
#define S_IDLE_RELEASE_MS  500

//  How long the last replies may take to leave when the server closes.
#define S_LINGER_MS  1000

//  One push, pull or push-pull request in progress.
typedef struct {
    ps_pool_job_t base;         //  its tasks, one per partition (ps_pool.h)
    ps_msg_t *msg;              //  the request; gradients are read in place
    bool push;                  //  has gradients to apply
    bool pull;                  //  answers with values
    uint64_t step;
    ps_peer_t *peer;            //  who sent it, charged with what it holds
    size_t held;                //  request bytes charged to the peer
    ps_partition_t **parts;     //  one reference per task
    zmq_msg_t *out;             //  reply frames when pulling
    uint64_t *versions;
    bool *duplicate;
    ps_proto_applied_t *applied;    //  the reply's entries, one per task
    ps_proto_pulled_t *pulled;
    uint64_t *dims;             //  the pulled shapes, PS_MAX_RANK per task
    size_t *nonfinite;          //  per task: index + 1 of the gradient's first
                                //  NaN or infinity, 0 when it has none
    atomic_int failed;          //  task index + 1 of the first failure
    ps_error_t err;             //  that failure
} s_job_t;

//  The fields of a push or a push-pull, which carry the same ones.
typedef struct {
    uint64_t step;
    bool has_generation;
    uint64_t generation;
    const ps_proto_tensor_array_t *tensors;
} s_push_t;

struct _ps_server_t {
    void *router;               //  in ps_curve_context (), where zauth serves
    ps_listener_t *listener;    //  the bound endpoint and its connections
    char name [64];
    ps_curve_t *curve;          //  the caller's; NULL: unsecured
    ps_table_t *table;          //  the partitions held
    ps_control_t *control;      //  the coordinator's requests, and the fence
    ps_pool_t *pool;            //  applies large requests' partitions in parallel
    ps_msg_t **spare_msgs;      //  received-message objects for reuse
    size_t nspare, spare_cap;
    ps_writer_t writer;         //  reply headers; main thread only
    uint64_t requests, errors;
    bool shutdown;              //  a shutdown request was answered
    //  The bytes held for each peer: gradients being applied and replies
    //  ZeroMQ has not sent yet, and the back-pressure they decide.
    ps_peers_t *peers;
};

//  A reply frame made from a request's own gradient frame: the request
//  frame is kept alive here until ZeroMQ has sent the reply.
typedef struct {
    zmq_msg_t frame;
    ps_peer_t *peer;
    size_t size;
} s_lent_t;

//  ZeroMQ's free callback for reply frames lent from a request: give back
//  the bytes charged and release the request's frame.
static void
s_reply_sent (void *data, void *hint)
{
    (void) data;
    s_lent_t *lent = hint;
    ps_peer_discharge (lent->peer, lent->size);
    ps_peer_unlink (&lent->peer);
    if (zmq_msg_close (&lent->frame) != 0)
        abort ();
    free (lent);
}

//  ZeroMQ's free callback for reply frames the server allocated (see
//  s_frame_new): give back what was charged to the peer.
static void
s_reply_freed (void *data, void *hint)
{
    char *block = (char *) data - 64;
    size_t charged;
    memcpy (&charged, block, sizeof charged);
    ps_peer_t *peer = hint;
    ps_peer_discharge (peer, charged);
    ps_peer_unlink (&peer);
    free (block);
}

//  A reply frame of size bytes for peer, charged to it until ZeroMQ frees
//  it. The amount charged sits in a 64-byte prefix, which keeps the data
//  as aligned as malloc's block. Returns the frame's data, or NULL when
//  the memory cannot be had.
static void *
s_frame_new (ps_peer_t *peer, size_t size, zmq_msg_t *frame)
{
    char *block = size <= SIZE_MAX - 64 ? malloc (size + 64) : NULL;
    if (!block)
        return NULL;
    size_t charged = size + PS_PEER_FRAME_COST;
    memcpy (block, &charged, sizeof charged);
    ps_peer_charge (peer, charged);
    if (zmq_msg_init_data (frame, block + 64, size, s_reply_freed, ps_peer_link (peer)) != 0)
        abort ();
    return block + 64;
}

//  ---------------------------------------------------------------------
//  The tasks of a job

static void
s_job_run_task (s_job_t *job, size_t i)
{
    ps_error_t err;
    float *out = job->pull ? zmq_msg_data (&job->out [i]) : NULL;
    if (job->push) {
        int rc = ps_partition_push (job->parts [i], job->step, ps_msg_tensor (job->msg, i),
                                    out, &job->versions [i], &err);
        if (rc < 0) {
            int expected = 0;
            if (atomic_compare_exchange_strong (&job->failed, &expected, (int) i + 1))
                job->err = err;
        }
        job->duplicate [i] = rc == PS_DUPLICATE;
    }
    else
        ps_partition_pull (job->parts [i], out, &job->versions [i]);
}

//  Scan task i's gradient for NaN and infinities.
static void
s_job_scan_task (s_job_t *job, size_t i)
{
    size_t count = ps_partition_count (job->parts [i]);
    size_t at = ps_floats_find_nonfinite (ps_msg_tensor (job->msg, i), count);
    job->nonfinite [i] = at < count ? at + 1 : 0;
}

static bool
s_job_has_nonfinite (s_job_t *job)
{
    for (size_t i = 0; i < job->base.ntasks; i++)
        if (job->nonfinite [i])
            return true;
    return false;
}

//  A task scans a gradient for NaN and infinities, or applies (or pulls)
//  one partition. A push's gradients are all scanned before any is
//  applied, so a request holding one bad value changes nothing.
static void
s_job_scan_op (ps_pool_job_t *base, size_t i)
{
    s_job_scan_task ((s_job_t *) base, i);
}

static bool
s_job_scanned_op (ps_pool_job_t *base)
{
    return !s_job_has_nonfinite ((s_job_t *) base);
}

static void
s_job_run_op (ps_pool_job_t *base, size_t i)
{
    s_job_run_task ((s_job_t *) base, i);
}

static const ps_pool_ops_t s_job_ops = { s_job_scan_op, s_job_scanned_op, s_job_run_op };

//  ---------------------------------------------------------------------
//  Construction

ps_server_t *
ps_server_new (const ps_server_config_t *config, ps_error_t *err)
{
    if (config->max_pending == 0) {
        ps_error_set (err, PS_EINVAL, "max_pending is 0, expected a number of bytes");
        return NULL;
    }
    if (config->threads < 0 || config->threads > 256) {
        ps_error_set (err, PS_EINVAL, "threads is %d, expected 0..256", config->threads);
        return NULL;
    }
    ps_table_t *table = ps_table_new ();
    ps_control_t *control = ps_control_new (table, &config->opt, config->checkpoint_root, err);
    if (!control) {
        ps_table_destroy (&table);
        return NULL;
    }
    ps_server_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->table = table;
    self->control = control;
    snprintf (self->name, sizeof self->name, "%s", config->name ? config->name : "ps");
    self->curve = config->curve;
    self->peers = ps_peers_new (config->max_pending, config->max_peer_pending
                                                     ? config->max_peer_pending
                                                     : config->max_pending);
    ps_writer_init (&self->writer, "ping", 0, 0);
    self->router = zmq_socket (ps_curve_context (), ZMQ_ROUTER);
    int linger = S_LINGER_MS;   //  flush the last replies, but never hang
    int hwm = 0;                //  replies are never dropped; memory is bounded per peer
    //  IPv6 only for an IPv6 literal: with it on, IPv4 endpoints would be
    //  reported in their mapped form.
    int ipv6 = strchr (config->bind, '[') != NULL;
    if (!self->router
    ||  zmq_setsockopt (self->router, ZMQ_IPV6, &ipv6, sizeof ipv6) != 0
    ||  zmq_setsockopt (self->router, ZMQ_LINGER, &linger, sizeof linger) != 0
    ||  zmq_setsockopt (self->router, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0
    ||  zmq_setsockopt (self->router, ZMQ_MAXMSGSIZE, &config->max_message,
                        sizeof config->max_message) != 0) {
        ps_error_set (err, PS_EIO, "creating sockets: %s", zmq_strerror (errno));
        goto fail;
    }
    if (self->curve && ps_curve_data_server (self->curve, self->router, err))
        goto fail;
    //  The connection monitor's socket lives with the ROUTER it watches.
    self->listener = ps_listener_new (ps_curve_context (), self->router, config->bind, err);
    if (!self->listener)
        goto fail;
    self->pool = ps_pool_new (config->threads, err);
    if (!self->pool)
        goto fail;
    return self;
fail:
    ps_server_destroy (&self);
    return NULL;
}

void
ps_server_destroy (ps_server_t **self_p)
{
    assert (self_p);
    ps_server_t *self = *self_p;
    if (!self)
        return;
    ps_pool_destroy (&self->pool);
    ps_listener_destroy (&self->listener);
    if (self->router) {
        zmq_close (self->router);
        //  The router's context outlives this server, so closing it does
        //  not wait for the replies still queued: ZeroMQ releases them
        //  (sent, or dropped once the linger has passed) later, calling
        //  back into the pending count. Wait for that, or the callbacks
        //  would write into freed memory.
        double deadline = ps_clock_ms () + S_LINGER_MS + 2000;
        while (!ps_peers_idle (self->peers) && ps_clock_ms () < deadline)
            usleep (1000);
        if (!ps_peers_idle (self->peers)) {
            ps_peers_stats_t stats;
            ps_peers_stats (self->peers, &stats);
            ps_error ("%zu reply bytes still held by ZeroMQ %d ms after closing; not freeing "
                      "the server", stats.pending, S_LINGER_MS + 2000);
            *self_p = NULL;
            return;
        }
    }
    //  Every reply frame is freed now (waited for above): no peer is
    //  referenced but by the table.
    ps_peers_destroy (&self->peers);
    ps_control_destroy (&self->control);
    ps_table_destroy (&self->table);
    for (size_t i = 0; i < self->nspare; i++)
        ps_msg_destroy (&self->spare_msgs [i]);
    free (self->spare_msgs);
    ps_writer_fini (&self->writer);
    free (self);
    *self_p = NULL;
}

const char *
ps_server_endpoint (ps_server_t *self)
{
    assert (self);
    return ps_listener_endpoint (self->listener);
}

//  ---------------------------------------------------------------------
//  Replies

//  Send the reply packed in writer, and nframes tensor frames, to the peer
//  that sent msg. The header frame is charged to the peer like the tensor
//  frames, so that small replies a peer does not read count too.
static void
s_reply (ps_server_t *self, ps_msg_t *msg, ps_peer_t *peer, ps_writer_t *writer,
         zmq_msg_t *frames, size_t nframes)
{
    zmq_msg_t *envelope;
    size_t nenvelope = ps_msg_envelope (msg, &envelope);
    zmq_msg_t header;
    void *data = s_frame_new (peer, writer->sbuf.size, &header);
    if (!data)
        abort ();
    memcpy (data, writer->sbuf.data, writer->sbuf.size);
    ps_error_t err;
    //  A peer that left before its reply is not the server's failure.
    if (ps_msg_send_frames (self->router, envelope, nenvelope, &header, frames, nframes, &err))
        ps_warn ("cannot send reply to request %llu: %s",
                 (unsigned long long) ps_msg_id (msg), err.msg);
}

//  Send an error reply, unlogged: see s_reply_error.
static void
s_reply_refusal (ps_server_t *self, ps_msg_t *msg, ps_peer_t *peer, int code,
                 const char *message)
{
    self->errors++;
    ps_writer_error (&self->writer, ps_msg_id (msg), code, message);
    s_reply (self, msg, peer, &self->writer, NULL, 0);
}

static void
s_reply_error (ps_server_t *self, ps_msg_t *msg, ps_peer_t *peer, int code, const char *text)
{
    //  Messages quote what the peer sent (names, types, keys); its control
    //  bytes must not reach the log or the reply as they came.
    char message [PS_ERROR_MSG_MAX];
    size_t len = 0;
    for (; text [len] && len + 1 < sizeof message; len++)
        message [len] = text [len] >= 0x20 && text [len] < 0x7f ? text [len] : '?';
    message [len] = 0;
    //  A forbidden request was logged once for its sender's key already.
    if (code != PS_EPERM)
        ps_warn ("request %llu refused: %s: %s", (unsigned long long) ps_msg_id (msg),
                 ps_error_name (code), message);
    s_reply_refusal (self, msg, peer, code, message);
}

//  ---------------------------------------------------------------------
//  Push, pull and push-pull

static ps_msg_t *
s_msg_take (ps_server_t *self)
{
    return self->nspare ? self->spare_msgs [--self->nspare] : ps_msg_new ();
}

static void
s_msg_give (ps_server_t *self, ps_msg_t *msg)
{
    ps_msg_clear (msg);
    if (self->nspare == self->spare_cap) {
        self->spare_cap = self->spare_cap ? 2 * self->spare_cap : 8;
        self->spare_msgs = realloc (self->spare_msgs, self->spare_cap * sizeof (ps_msg_t *));
        if (!self->spare_msgs)
            abort ();
    }
    self->spare_msgs [self->nspare++] = msg;
}

static void
s_job_destroy (ps_server_t *self, s_job_t **job_p)
{
    s_job_t *job = *job_p;
    for (size_t i = 0; i < job->base.ntasks; i++) {
        ps_partition_destroy (&job->parts [i]);
        if (job->pull)
            zmq_msg_close (&job->out [i]);
    }
    ps_peer_discharge (job->peer, job->held);
    ps_peer_unlink (&job->peer);
    s_msg_give (self, job->msg);
    free (job->parts);
    free (job->out);
    free (job->versions);
    free (job->duplicate);
    free (job->applied);
    free (job->pulled);
    free (job->dims);
    free (job->nonfinite);
    free (job);
    *job_p = NULL;
}

//  When a push's gradients hold NaN or an infinity, count that on every
//  partition concerned and describe the first in err.
static int
s_job_check_nonfinite (s_job_t *job, ps_error_t *err)
{
    size_t first = job->base.ntasks, count = 0;
    for (size_t i = 0; i < job->base.ntasks; i++)
        if (job->nonfinite [i]) {
            ps_partition_count_nonfinite (job->parts [i]);
            first = count++ ? first : i;
        }
    if (count == 0)
        return PS_OK;
    ps_partition_t *part = job->parts [first];
    size_t at = job->nonfinite [first] - 1;
    return ps_error_set (err, PS_ENONFINITE,
                         "%s: tensors[%zu]: the gradient of partition %s/%u holds a non-finite "
                         "value (%g) at element %zu (%zu of the request's %zu gradients do); "
                         "nothing was applied", ps_msg_type (job->msg), first,
                         ps_partition_var (part), ps_partition_part (part),
                         ps_msg_tensor (job->msg, first) [at], at, count, job->base.ntasks);
}

//  Answer a finished job and free it.
static void
s_job_finish (ps_server_t *self, s_job_t *job)
{
    ps_error_t err;
    if (job->push && s_job_check_nonfinite (job, &err)) {
        s_reply_error (self, job->msg, job->peer, err.code, err.msg);
        s_job_destroy (self, &job);
        return;
    }
    int failed = atomic_load (&job->failed);
    if (failed) {
        s_reply_error (self, job->msg, job->peer, job->err.code, job->err.msg);
        s_job_destroy (self, &job);
        return;
    }
    const ps_proto_t *req = ps_msg_proto (job->msg);
    ps_proto_t reply = { .type = ps_proto_info [req->type].reply, .id = req->id };
    for (size_t i = 0; i < job->base.ntasks; i++) {
        const char *var = ps_partition_var (job->parts [i]);
        uint32_t part = ps_partition_part (job->parts [i]);
        job->applied [i] = (ps_proto_applied_t) { var, part, job->versions [i],
                                                  job->duplicate [i] };
        ps_proto_pulled_t *pulled = &job->pulled [i];
        *pulled = (ps_proto_pulled_t) { .var = var, .part = part, .version = job->versions [i],
                                        .bytes = job->pull ? zmq_msg_size (&job->out [i]) : 0 };
        ps_proto_shape_set (&pulled->shape, job->dims + i * PS_MAX_RANK,
                            ps_partition_local_shape (job->parts [i]));
    }
    ps_proto_applied_array_t applied = { job->base.ntasks, job->applied };
    ps_proto_pulled_array_t pulled = { job->base.ntasks, job->pulled };
    switch (reply.type) {
        case PS_PROTO_PUSH_OK:
            reply.push_ok.applied = applied;
            break;
        case PS_PROTO_PULL_OK:
            reply.pull_ok.tensors = pulled;
            break;
        default:
            assert (reply.type == PS_PROTO_PUSH_PULL_OK);
            reply.push_pull_ok.applied = applied;
            reply.push_pull_ok.tensors = pulled;
    }
    ps_writer_encode (&self->writer, &reply);
    s_reply (self, job->msg, job->peer, &self->writer, job->pull ? job->out : NULL,
             job->pull ? job->base.ntasks : 0);
    s_job_destroy (self, &job);
}

//  Look up the partitions a request names and check the gradients' shapes,
//  so that a request is refused whole before anything is applied.
static int
s_job_resolve (ps_server_t *self, s_job_t *job, const s_push_t *push, ps_error_t *err)
{
    const ps_proto_t *req = ps_msg_proto (job->msg);
    const char *type = ps_proto_info [req->type].name;
    for (size_t i = 0; i < job->base.ntasks; i++) {
        const char *var = push ? push->tensors->items [i].var : req->pull.parts.items [i].var;
        uint64_t part = push ? push->tensors->items [i].part : req->pull.parts.items [i].part;
        if (strlen (var) >= PS_NAME_MAX)
            return ps_error_set (err, PS_EPROTO, "%s: entry %zu: variable name is longer than %d bytes",
                                 type, i, PS_NAME_MAX - 1);
        ps_partition_t *partition = part <= UINT32_MAX
                                  ? ps_table_lookup (self->table, var, (uint32_t) part) : NULL;
        if (!partition)
            return ps_error_set (err, PS_ENOTFOUND, "%s: entry %zu: no partition %s/%llu on this server",
                                 type, i, var, (unsigned long long) part);
        for (size_t j = 0; j < i; j++)
            if (job->parts [j] == partition)
                return ps_error_set (err, PS_EPROTO, "%s: partition %s/%llu appears twice",
                                     type, var, (unsigned long long) part);
        job->parts [i] = ps_partition_link (partition);
        if (job->push) {
            ps_shape_t shape;
            int rc = ps_proto_shape_get (&push->tensors->items [i].shape, &shape, err);
            if (rc)
                return ps_error_prefix (err, rc, "%s: tensors[%zu]", type, i);
            const ps_shape_t *local = ps_partition_local_shape (partition);
            char have [128], want [128];
            if (!ps_shape_equal (&shape, local))
                return ps_error_set (err, PS_ESHAPE,
                                     "%s: tensors[%zu]: gradient shape %s does not match partition %s/%llu of shape %s",
                                     type, i, ps_shape_str (&shape, have, sizeof have), var,
                                     (unsigned long long) part, ps_shape_str (local, want, sizeof want));
            //  Partitions have watermarks of their own; checking the step
            //  on every one now means none applies it if another refuses.
            rc = ps_partition_reserve_step (partition, job->step, err);
            if (rc)
                return ps_error_prefix (err, rc, "%s: step %llu", type,
                                        (unsigned long long) job->step);
        }
    }
    return PS_OK;
}

//  Read the fields of a push or push-pull into *push; false for a pull.
static bool
s_push_of (const ps_proto_t *req, s_push_t *push)
{
    switch (req->type) {
        case PS_PROTO_PUSH:
            *push = (s_push_t) { req->push.step, req->push.has_generation,
                                 req->push.generation, &req->push.tensors };
            return true;
        case PS_PROTO_PUSH_PULL:
            *push = (s_push_t) { req->push_pull.step, req->push_pull.has_generation,
                                 req->push_pull.generation, &req->push_pull.tensors };
            return true;
        default:
            return false;
    }
}

//  The reply frame for task i of a pulling job: the request's own gradient
//  frame for a push-pull (the partition copies its fresh values over the
//  gradient once applied), else a new buffer. Either way the bytes stay
//  charged to the peer until ZeroMQ has sent the frame.
static int
s_job_reply_frame (s_job_t *job, size_t i, ps_error_t *err)
{
    size_t size = ps_partition_count (job->parts [i]) * sizeof (float);
    s_lent_t *lent = NULL;
    if (job->push) {
        lent = calloc (1, sizeof *lent);
        if (!lent)
            abort ();
        if (ps_msg_take_tensor (job->msg, i, &lent->frame) == PS_OK) {
            lent->peer = ps_peer_link (job->peer);
            lent->size = size;
            job->held -= size;  //  counted now until the reply is sent
            if (zmq_msg_init_data (&job->out [i], zmq_msg_data (&lent->frame), size,
                                   s_reply_sent, lent) != 0)
                abort ();
            return PS_OK;
        }
        free (lent);
    }
    if (!s_frame_new (job->peer, size, &job->out [i]))
        return ps_error_set (err, PS_ETOOBIG, "cannot allocate a reply of %zu bytes", size);
    return PS_OK;
}

//  Serve a push, pull or push-pull: the job owns msg from here on.
static void
s_handle_data (ps_server_t *self, ps_msg_t *msg, ps_peer_t *peer)
{
    const ps_proto_t *req = ps_msg_proto (msg);
    const char *type = ps_proto_info [req->type].name;
    s_push_t push;
    s_job_t *job = calloc (1, sizeof *job);
    if (!job)
        abort ();
    job->base.ops = &s_job_ops;
    job->msg = msg;
    job->push = s_push_of (req, &push);
    job->pull = req->type != PS_PROTO_PUSH;
    job->base.ntasks = job->push ? push.tensors->count : req->pull.parts.count;
    job->parts = calloc (job->base.ntasks + 1, sizeof (ps_partition_t *));
    job->out = calloc (job->base.ntasks + 1, sizeof (zmq_msg_t));
    job->versions = calloc (job->base.ntasks + 1, sizeof (uint64_t));
    job->duplicate = calloc (job->base.ntasks + 1, sizeof (bool));
    job->nonfinite = calloc (job->base.ntasks + 1, sizeof (size_t));
    job->applied = calloc (job->base.ntasks + 1, sizeof (ps_proto_applied_t));
    job->pulled = calloc (job->base.ntasks + 1, sizeof (ps_proto_pulled_t));
    job->dims = calloc ((job->base.ntasks + 1) * PS_MAX_RANK, sizeof (uint64_t));
    if (!job->parts || !job->out || !job->versions || !job->duplicate || !job->nonfinite
    ||  !job->applied || !job->pulled || !job->dims)
        abort ();
    if (job->push)
        job->step = push.step;
    size_t bytes = ps_msg_tensor_bytes (msg);
    job->peer = ps_peer_link (peer);
    job->held = bytes;
    ps_peer_charge (peer, job->held);
    ps_error_t err;
    bool pull = job->pull;
    job->pull = false;          //  until the reply frames exist
    //  Once fenced, a push must say which generation of the parameters
    //  it was computed against: one that says nothing may come from before
    //  the restore as well as after it.
    uint64_t fence = ps_control_fence_generation (self->control);
    if (job->push && fence && (!push.has_generation || push.generation != fence)) {
        char text [200];
        if (push.has_generation)
            snprintf (text, sizeof text, "stale generation %" PRIu64 ": the server was fenced at "
                      "generation %" PRIu64 " (restored since this gradient was computed)",
                      push.generation, fence);
        else
            snprintf (text, sizeof text, "%s carries no generation: the server was fenced at "
                      "generation %" PRIu64 " and takes only gradients tagged with it", type,
                      fence);
        s_reply_error (self, msg, peer, PS_EINVAL, text);
        s_job_destroy (self, &job);
        return;
    }
    int rc = s_job_resolve (self, job, job->push ? &push : NULL, &err);
    size_t made = 0;
    while (pull && rc == PS_OK && made < job->base.ntasks) {
        rc = s_job_reply_frame (job, made, &err);
        if (rc == PS_OK)
            bytes += ps_partition_count (job->parts [made++]) * sizeof (float);
    }
    if (rc) {
        for (size_t i = 0; i < made; i++)
            zmq_msg_close (&job->out [i]);
        s_reply_error (self, msg, peer, rc, err.msg);
        s_job_destroy (self, &job);
        return;
    }
    job->pull = pull;
    atomic_init (&job->failed, 0);
    if (ps_pool_size (self->pool) == 0 || bytes < S_INLINE_BYTES || job->base.ntasks == 0) {
        bool refused = false;
        if (job->push) {
            for (size_t i = 0; i < job->base.ntasks; i++)
                s_job_scan_task (job, i);
            refused = s_job_has_nonfinite (job);
        }
        for (size_t i = 0; i < job->base.ntasks && !refused; i++)
            s_job_run_task (job, i);
        s_job_finish (self, job);
    }
    else
        ps_pool_submit (self->pool, &job->base, job->push);
}

//  ---------------------------------------------------------------------
//  The server's own requests (the coordinator's are in ps_control.c)

static int
s_handle_stats (ps_server_t *self, const ps_proto_t *req, ps_proto_t *reply, ps_error_t *err)
{
    (void) req;
    (void) err;
    size_t count;
    ps_partition_t **list = ps_table_sorted (self->table, &count);
    ps_proto_part_stats_t *entries = calloc (count + 1, sizeof *entries);
    uint64_t *dims = calloc ((count + 1) * (PS_MAX_RANK + 2), sizeof *dims);
    if (!entries || !dims)
        abort ();
    for (size_t i = 0; i < count; i++) {
        ps_partition_stats_t stats;
        ps_partition_stats (list [i], &stats);
        ps_proto_part_stats_t *entry = &entries [i];
        uint64_t *rows = dims + i * (PS_MAX_RANK + 2);
        rows [0] = (uint64_t) ps_partition_row_begin (list [i]);
        rows [1] = (uint64_t) ps_partition_row_end (list [i]);
        *entry = (ps_proto_part_stats_t) {
            .var = ps_partition_var (list [i]), .part = ps_partition_part (list [i]),
            .rows = { 2, rows }, .updates = stats.updates, .duplicates = stats.duplicates,
            .recorded = stats.recorded, .bytes_in = stats.bytes_in,
            .bytes_out = stats.bytes_out, .nonfinite = stats.nonfinite };
        ps_proto_shape_set (&entry->shape, rows + 2, ps_partition_shape (list [i]));
    }
    ps_peers_stats_t peers;
    ps_peers_stats (self->peers, &peers);
    reply->stats_ok = (ps_proto_stats_ok_t) {
        .partitions = { count, entries }, .requests = self->requests, .errors = self->errors,
        .pending = peers.pending, .refused = peers.refused, .dropped = peers.dropped };
    ps_writer_encode (&self->writer, reply);
    free (dims);
    free (entries);
    free (list);
    return PS_OK;
}

static int
s_handle_ping (ps_server_t *self, const ps_proto_t *req, ps_proto_t *reply, ps_error_t *err)
{
    (void) req;
    (void) err;
    reply->ping_ok = (ps_proto_ping_ok_t) { self->name, ps_table_size (self->table) };
    ps_writer_encode (&self->writer, reply);
    return PS_OK;
}

static int
s_handle_shutdown (ps_server_t *self, const ps_proto_t *req, ps_proto_t *reply,
                   ps_error_t *err)
{
    (void) req;
    (void) err;
    ps_info ("shutdown requested");
    self->shutdown = true;
    ps_writer_encode (&self->writer, reply);
    return PS_OK;
}

//  ---------------------------------------------------------------------
//  Dispatch

//  A handler of the server's own requests: it fills and encodes reply
//  (type and id already set) into the server's writer, or returns an error
//  code with err saying why, having changed nothing.
typedef int (s_server_fn) (ps_server_t *self, const ps_proto_t *req, ps_proto_t *reply,
                           ps_error_t *err);

//  The requests ps-server serves, by type: data requests (push, pull,
//  push-pull) become jobs, which may run on the pool; the others are
//  answered on the main thread, by the server itself or by its control
//  module. A type without a row is not a request of ps-server. Who may send
//  each is protocol.json's 'senders' column.
static const struct {
    bool data;
    s_server_fn *server;
    ps_control_fn *control;
} s_serves [PS_PROTO_NTYPES] = {
    [PS_PROTO_PUSH] = { .data = true },
    [PS_PROTO_PULL] = { .data = true },
    [PS_PROTO_PUSH_PULL] = { .data = true },
    [PS_PROTO_PING] = { .server = s_handle_ping },
    [PS_PROTO_STATS] = { .server = s_handle_stats },
    [PS_PROTO_SHUTDOWN] = { .server = s_handle_shutdown },
    [PS_PROTO_CREATE] = { .control = ps_control_create },
    [PS_PROTO_SET_OPTIMIZER] = { .control = ps_control_set_optimizer },
    [PS_PROTO_SNAPSHOT] = { .control = ps_control_snapshot },
    [PS_PROTO_RESTORE] = { .control = ps_control_restore },
    [PS_PROTO_FENCE] = { .control = ps_control_fence },
};

//  Serve a request answered on the main thread.
static void
s_handle_control (ps_server_t *self, ps_msg_t *msg, ps_peer_t *peer)
{
    const ps_proto_t *req = ps_msg_proto (msg);
    ps_proto_t reply = { .type = ps_proto_info [req->type].reply, .id = req->id };
    ps_error_t err;
    int rc = s_serves [req->type].server
           ? s_serves [req->type].server (self, req, &reply, &err)
           : s_serves [req->type].control (self->control, req, &reply, &self->writer, &err);
    if (rc)
        s_reply_error (self, msg, peer, rc, err.msg);
    else
        s_reply (self, msg, peer, &self->writer, NULL, 0);
}

//  Whether the sender of a secured request may make it (see ps_server.h and
//  the 'senders' column of schemas/protocol.json); if not, answers
//  "forbidden" and logs it once per key.
static bool
s_authorized (ps_server_t *self, ps_msg_t *msg, ps_peer_t *client)
{
    const ps_proto_info_t *info = &ps_proto_info [ps_msg_proto (msg)->type];
    const char *task = ps_msg_property (msg, ps_curve_data_peer (self->curve));
    if (ps_proto_may_send (ps_msg_proto (msg)->type, task))
        return true;
    char text [192];
    snprintf (text, sizeof text, "%s: only %s may ask this of %s, not %s", info->name,
              info->senders_text, self->name, task ? task : "an unnamed peer");
    const char *key = ps_msg_property (msg, PS_CURVE_PEER_KEY);
    if (ps_curve_first_refusal (self->curve, key ? key : ""))
        ps_warn ("refused %s (key %s; its later refusals are not logged)", text,
                 key ? key : "none");
    s_reply_error (self, msg, client, PS_EPERM, text);
    return false;
}

//  Whether type answers a request (error answers any).
static bool
s_is_reply (ps_proto_type_t type)
{
    for (int request = 1; request < PS_PROTO_NTYPES; request++)
        if (ps_proto_info [request].reply == type)
            return true;
    return type == PS_PROTO_ERROR;
}

//  Receive and serve one request; returns true when the server should stop.
static bool
s_handle_request (ps_server_t *self)
{
    ps_msg_t *msg = s_msg_take (self);
    ps_error_t err;
    int rc = ps_msg_recv (msg, self->router, true, &err);
    self->requests++;
    if (rc == PS_EIO) {
        ps_warn ("receive failed: %s", err.msg);
        s_msg_give (self, msg);
        return false;
    }
    //  The ROUTER puts the peer's routing id first: whatever else the
    //  message holds, the peer is known, and is served or turned away
    //  before any work is done for it.
    zmq_msg_t *envelope;
    size_t nenvelope = ps_msg_envelope (msg, &envelope);
    assert (nenvelope > 0);
    const void *id = zmq_msg_data (&envelope [0]);
    size_t id_size = zmq_msg_size (&envelope [0]);
    ps_peer_t *peer = ps_peers_lookup (self->peers, id, id_size);
    if (!peer)
        peer = ps_peers_add (self->peers, id, id_size, ps_msg_peer_address (msg));
    char reason [PS_ERROR_MSG_MAX];
    ps_peer_verdict_t verdict = ps_peers_admit (self->peers, peer, reason, sizeof reason);
    if (verdict == PS_PEER_DROP) {
        s_msg_give (self, msg);
        return false;
    }
    if (rc == PS_OK)
        rc = ps_msg_decode (msg, &err);
    if (rc == PS_OK)
        ps_debug ("request %llu: %s, %zu tensor bytes", (unsigned long long) ps_msg_id (msg),
                  ps_msg_type (msg), ps_msg_tensor_bytes (msg));
    ps_proto_type_t type = rc == PS_OK ? ps_msg_proto (msg)->type : PS_PROTO_NONE;
    //  Back-pressure refusals are logged once per episode, not each.
    if (verdict == PS_PEER_REFUSE)
        s_reply_refusal (self, msg, peer, PS_ETOOBIG, reason);
    else
    if (rc)
        s_reply_error (self, msg, peer, rc, err.msg);
    else
    if (!s_serves [type].data && !s_serves [type].server && !s_serves [type].control) {
        char text [128];
        snprintf (text, sizeof text, "header: '%s' is %s", ps_proto_info [type].name,
                  s_is_reply (type) ? "a reply type, not a request"
                                    : "not a request ps-server serves");
        s_reply_error (self, msg, peer, PS_EPROTO, text);
    }
    else
    if (self->curve && !s_authorized (self, msg, peer))
        ;                       //  answered "forbidden"
    else
    if (s_serves [type].data) {
        s_handle_data (self, msg, peer);
        return false;           //  the job owns msg now
    }
    else
        s_handle_control (self, msg, peer);
    s_msg_give (self, msg);
    return self->shutdown;
}

//  Answer the jobs the pool has finished.
static int
s_collect_done (ps_server_t *self)
{
    while (true) {
        ps_pool_job_t *job;
        int rc = ps_pool_collect (self->pool, &job);
        if (rc <= 0)
            return rc;
        s_job_finish (self, (s_job_t *) job);
    }
}

int
ps_server_run (ps_server_t *self, int stop_fd)
{
    assert (self);
    zmq_pollitem_t items [] = {
        { self->router, 0, ZMQ_POLLIN, 0 },
        { ps_pool_done_socket (self->pool), 0, ZMQ_POLLIN, 0 },
        { ps_listener_events (self->listener), 0, ZMQ_POLLIN, 0 },
        { NULL, stop_fd, ZMQ_POLLIN, 0 },
    };
    int nitems = stop_fd >= 0 ? 4 : 3;
    bool stop = false;
    bool busy = false;          //  requests served since the heap was released
    int rc = PS_OK;
    ps_error_t err;
    while (!stop) {
        //  The socket is read whatever the server holds: back-pressure is
        //  per peer (ps_peers.h), and reading is also what lets ZeroMQ
        //  process a departed peer's disconnection and free its replies.
        int ready = zmq_poll (items, nitems, busy ? S_IDLE_RELEASE_MS : -1);
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            ps_error ("zmq_poll: %s", zmq_strerror (errno));
            rc = PS_EIO;
            break;
        }
        if (ready == 0 && ps_pool_busy (self->pool) == 0) {
            ps_heap_release ();
            ps_peers_sweep (self->peers);
            busy = false;
            continue;
        }
        busy = true;
        if ((items [1].revents & ZMQ_POLLIN) && s_collect_done (self)) {
            ps_error ("pool notification failed: %s", zmq_strerror (errno));
            rc = PS_EIO;
            break;
        }
        if ((items [2].revents & ZMQ_POLLIN) && ps_listener_handle (self->listener, &err)) {
            ps_error ("%s", err.msg);
            rc = PS_EIO;
            break;
        }
        if (items [0].revents & ZMQ_POLLIN)
            stop = s_handle_request (self);
        if (nitems == 4 && (items [3].revents & ZMQ_POLLIN)) {
            ps_info ("stop signal received");
            stop = true;
        }
    }
    //  Finish and answer the updates in progress before returning.
    while (ps_pool_busy (self->pool) > 0) {
        zmq_pollitem_t done = { ps_pool_done_socket (self->pool), 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&done, 1, -1) < 0 && errno != EINTR)
            break;
        if (s_collect_done (self))
            break;
    }
    return rc;
}
