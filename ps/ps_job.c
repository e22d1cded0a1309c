//  A push, pull or push-pull in progress; see ps_job.h.

#include "ps_job.h"
#include "ps_floats.h"
#include "ps_partition.h"
#include "ps_proto_conv.h"

#include <assert.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  The fields of a push or a push-pull, which carry the same ones.
typedef struct {
    uint64_t step;
    bool has_generation;
    uint64_t generation;
    //  Sync mode: the round the step belongs to and its step count, or 0
    //  (a push-pull, or a push outside a round).
    uint64_t round;
    uint64_t round_steps;
    const ps_proto_tensor_array_t *tensors;
} s_push_t;

struct _ps_job_t {
    ps_pool_job_t base;         //  its tasks, one per partition; first, for the pool
    ps_msg_t *msg;              //  the request; gradients are read in place
    bool push;                  //  has gradients to apply
    bool pull;                  //  answers with values
    s_push_t fields;            //  a push's fields
    ps_peer_t *peer;            //  who sent it, charged with what it holds
    size_t held;                //  request bytes charged to the peer
    size_t bytes;               //  tensor bytes in and out
    ps_partition_t **parts;     //  one reference per task
    zmq_msg_t *out;             //  reply frames when pulling
    uint64_t *versions;
    bool *duplicate;
    ps_proto_applied_t *applied;    //  the reply's entries, one per task
    ps_proto_pulled_t *pulled;
    uint64_t *dims;             //  the pulled shapes, PS_MAX_RANK per task
    size_t *nonfinite;          //  per task: index + 1 of the gradient's first
                                //  NaN or infinity, 0 when it has none
    ps_opt_runner_t runner;     //  applies large partitions in ranges (ps_job_apply_on)
    bool split;                 //  runner is set
    atomic_int failed;          //  task index + 1 of the first failure
    ps_error_t err;             //  that failure
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

//  ---------------------------------------------------------------------
//  Tasks, on the serving thread or the pool's

//  Record task i's failure, if it is the job's first.
static void
s_fail_task (ps_job_t *self, size_t i, const ps_error_t *err)
{
    int expected = 0;
    if (atomic_compare_exchange_strong (&self->failed, &expected, (int) i + 1))
        self->err = *err;
}

//  Add a sync push's step to its round on every partition at once, all or
//  nothing (ps_partition_push_rounds): its first task does it all.
static void
s_push_rounds (ps_job_t *self)
{
    size_t n = self->base.ntasks;
    const float **grads = calloc (n + 1, sizeof *grads);
    int *outcomes = calloc (n + 1, sizeof *outcomes);
    bool *applied = calloc (n + 1, sizeof *applied);    //  not in the reply
    if (!grads || !outcomes || !applied)
        abort ();
    for (size_t i = 0; i < n; i++)
        grads [i] = ps_msg_tensor (self->msg, i);
    ps_error_t err;
    int rc = ps_partition_push_rounds (self->parts, n, self->fields.step, self->fields.round,
                                       (uint32_t) self->fields.round_steps, grads, outcomes,
                                       applied, self->versions,
                                       self->split ? &self->runner : NULL, &err);
    if (rc < 0)
        s_fail_task (self, 0, &err);
    for (size_t i = 0; i < n; i++)
        self->duplicate [i] = rc == PS_OK && outcomes [i] == PS_DUPLICATE;
    free (grads);
    free (outcomes);
    free (applied);
}

//  Apply task i's gradient (and copy out the fresh values), or pull. A
//  sync push's round is added by its first task for every partition.
static void
s_run_task (ps_job_t *self, size_t i)
{
    ps_error_t err;
    float *out = self->pull ? zmq_msg_data (&self->out [i]) : NULL;
    if (self->push && self->fields.round) {
        if (i == 0)
            s_push_rounds (self);
    }
    else
    if (self->push) {
        int rc = ps_partition_push_on (self->parts [i], self->fields.step,
                                       ps_msg_tensor (self->msg, i), out, &self->versions [i],
                                       self->split ? &self->runner : NULL, &err);
        if (rc < 0)
            s_fail_task (self, i, &err);
        self->duplicate [i] = rc == PS_DUPLICATE;
    }
    else
        ps_partition_pull (self->parts [i], out, &self->versions [i]);
}

//  Scan task i's gradient for NaN and infinities.
static void
s_scan_task (ps_job_t *self, size_t i)
{
    size_t count = ps_partition_count (self->parts [i]);
    size_t at = ps_floats_find_nonfinite (ps_msg_tensor (self->msg, i), count);
    self->nonfinite [i] = at < count ? at + 1 : 0;
}

static bool
s_has_nonfinite (ps_job_t *self)
{
    for (size_t i = 0; i < self->base.ntasks; i++)
        if (self->nonfinite [i])
            return true;
    return false;
}

static void
s_scan_op (ps_pool_job_t *base, size_t i)
{
    s_scan_task ((ps_job_t *) base, i);
}

static bool
s_scanned_op (ps_pool_job_t *base)
{
    return !s_has_nonfinite ((ps_job_t *) base);
}

static void
s_run_op (ps_pool_job_t *base, size_t i)
{
    s_run_task ((ps_job_t *) base, i);
}

static const ps_pool_ops_t s_ops = { s_scan_op, s_scanned_op, s_run_op };

void
ps_job_run (ps_job_t *self)
{
    assert (self);
    bool refused = false;
    if (self->push) {
        for (size_t i = 0; i < self->base.ntasks; i++)
            s_scan_task (self, i);
        refused = s_has_nonfinite (self);
    }
    for (size_t i = 0; i < self->base.ntasks && !refused; i++)
        s_run_task (self, i);
}

//  ---------------------------------------------------------------------
//  Life cycle

//  Read the fields of a push or push-pull into *push; false for a pull.
static bool
s_push_of (const ps_proto_t *req, s_push_t *push)
{
    switch (req->type) {
        case PS_PROTO_PUSH:
            *push = (s_push_t) { req->push.step, req->push.has_generation,
                                 req->push.generation, req->push.round,
                                 req->push.round_steps, &req->push.tensors };
            return true;
        case PS_PROTO_PUSH_PULL:
            *push = (s_push_t) { req->push_pull.step, req->push_pull.has_generation,
                                 req->push_pull.generation, 0, 0, &req->push_pull.tensors };
            return true;
        default:
            return false;
    }
}

ps_job_t *
ps_job_new (ps_msg_t *msg, ps_peer_t *peer)
{
    const ps_proto_t *req = ps_msg_proto (msg);
    assert (req->type == PS_PROTO_PUSH || req->type == PS_PROTO_PULL
         || req->type == PS_PROTO_PUSH_PULL);
    ps_job_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->base.ops = &s_ops;
    self->msg = msg;
    self->push = s_push_of (req, &self->fields);
    self->base.ntasks = self->push ? self->fields.tensors->count : req->pull.parts.count;
    size_t n = self->base.ntasks + 1;
    self->parts = calloc (n, sizeof (ps_partition_t *));
    self->out = calloc (n, sizeof (zmq_msg_t));
    self->versions = calloc (n, sizeof (uint64_t));
    self->duplicate = calloc (n, sizeof (bool));
    self->nonfinite = calloc (n, sizeof (size_t));
    self->applied = calloc (n, sizeof (ps_proto_applied_t));
    self->pulled = calloc (n, sizeof (ps_proto_pulled_t));
    self->dims = calloc (n * PS_MAX_RANK, sizeof (uint64_t));
    if (!self->parts || !self->out || !self->versions || !self->duplicate || !self->nonfinite
    ||  !self->applied || !self->pulled || !self->dims)
        abort ();
    self->bytes = ps_msg_tensor_bytes (msg);
    self->peer = ps_peer_link (peer);
    self->held = self->bytes;
    ps_peer_charge (peer, self->held);
    atomic_init (&self->failed, 0);
    //  pull stays false until the reply frames exist, so that destroy
    //  closes only frames that were made.
    return self;
}

ps_msg_t *
ps_job_destroy (ps_job_t **self_p)
{
    assert (self_p);
    ps_job_t *self = *self_p;
    if (!self)
        return NULL;
    for (size_t i = 0; i < self->base.ntasks; i++) {
        ps_partition_destroy (&self->parts [i]);
        if (self->pull)
            zmq_msg_close (&self->out [i]);
    }
    ps_peer_discharge (self->peer, self->held);
    ps_peer_unlink (&self->peer);
    ps_msg_t *msg = self->msg;
    free (self->parts);
    free (self->out);
    free (self->versions);
    free (self->duplicate);
    free (self->applied);
    free (self->pulled);
    free (self->dims);
    free (self->nonfinite);
    free (self);
    *self_p = NULL;
    return msg;
}

//  Look up the partitions a request names and check the gradients' shapes,
//  so that a request is refused whole before anything is applied.
static int
s_resolve (ps_job_t *self, ps_table_t *table, ps_error_t *err)
{
    const ps_proto_t *req = ps_msg_proto (self->msg);
    const char *type = ps_proto_info [req->type].name;
    const ps_proto_tensor_array_t *tensors = self->fields.tensors;
    for (size_t i = 0; i < self->base.ntasks; i++) {
        const char *var = self->push ? tensors->items [i].var : req->pull.parts.items [i].var;
        uint64_t part = self->push ? tensors->items [i].part : req->pull.parts.items [i].part;
        //  The decoder holds names to PS_NAME_MAX - 1 bytes and parts
        //  below 2^32 (protocol.json's bounds).
        ps_partition_t *partition = ps_table_lookup (table, var, (uint32_t) part);
        if (!partition)
            return ps_error_set (err, PS_ENOTFOUND, "%s: entry %zu: no partition %s/%llu on this server",
                                 type, i, var, (unsigned long long) part);
        for (size_t j = 0; j < i; j++)
            if (self->parts [j] == partition)
                return ps_error_set (err, PS_EPROTO, "%s: partition %s/%llu appears twice",
                                     type, var, (unsigned long long) part);
        self->parts [i] = ps_partition_link (partition);
        if (self->push) {
            ps_shape_t shape;
            int rc = ps_proto_shape_get (&tensors->items [i].shape, &shape, err);
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
            rc = ps_partition_reserve_step (partition, self->fields.step, err);
            if (rc == PS_OK && self->fields.round)
                rc = ps_partition_check_round (partition, self->fields.step, self->fields.round,
                                               (uint32_t) self->fields.round_steps, err);
            if (rc)
                return ps_error_prefix (err, rc, "%s: step %llu", type,
                                        (unsigned long long) self->fields.step);
        }
    }
    return PS_OK;
}

//  The reply frame for task i of a pulling job: the request's own gradient
//  frame for a push-pull (the partition copies its fresh values over the
//  gradient once applied), else a new buffer. Either way the bytes stay
//  charged to the peer until ZeroMQ has sent the frame.
static int
s_reply_frame (ps_job_t *self, size_t i, ps_error_t *err)
{
    size_t size = ps_partition_count (self->parts [i]) * sizeof (float);
    if (self->push) {
        s_lent_t *lent = calloc (1, sizeof *lent);
        if (!lent)
            abort ();
        if (ps_msg_take_tensor (self->msg, i, &lent->frame) == PS_OK) {
            lent->peer = ps_peer_link (self->peer);
            lent->size = size;
            self->held -= size;     //  counted now until the reply is sent
            if (zmq_msg_init_data (&self->out [i], zmq_msg_data (&lent->frame), size,
                                   s_reply_sent, lent) != 0)
                abort ();
            return PS_OK;
        }
        free (lent);
    }
    if (!ps_peer_frame_new (self->peer, size, &self->out [i]))
        return ps_error_set (err, PS_ETOOBIG, "cannot allocate a reply of %zu bytes", size);
    return PS_OK;
}

//  A push names its round and the round's step count together, or
//  neither; rounds count from 1, and a round has 1 to UINT32_MAX steps.
static int
s_check_round (ps_job_t *self, ps_error_t *err)
{
    const ps_proto_t *req = ps_msg_proto (self->msg);
    if (req->type != PS_PROTO_PUSH)
        return PS_OK;
    const ps_proto_push_t *push = &req->push;
    if (push->has_round != push->has_round_steps)
        return ps_error_set (err, PS_EINVAL, "push: field '%s' is missing: a push with '%s' "
                             "must carry both 'round' and 'round_steps'",
                             push->has_round ? "round_steps" : "round",
                             push->has_round ? "round" : "round_steps");
    return PS_OK;
}

int
ps_job_prepare (ps_job_t *self, ps_table_t *table, uint64_t fence, ps_error_t *err)
{
    assert (self);
    const ps_proto_t *req = ps_msg_proto (self->msg);
    //  Once fenced, a push must say which generation of the parameters
    //  it was computed against: one that says nothing may come from before
    //  the restore as well as after it.
    const s_push_t *push = &self->fields;
    if (self->push && fence && (!push->has_generation || push->generation != fence)) {
        if (push->has_generation)
            return ps_error_set (err, PS_EINVAL, "stale generation %" PRIu64 ": the server was "
                                 "fenced at generation %" PRIu64 " (restored since this gradient "
                                 "was computed)", push->generation, fence);
        return ps_error_set (err, PS_EINVAL, "%s carries no generation: the server was fenced "
                             "at generation %" PRIu64 " and takes only gradients tagged with it",
                             ps_proto_info [req->type].name, fence);
    }
    int rc = s_check_round (self, err);
    if (rc == PS_OK)
        rc = s_resolve (self, table, err);
    bool pull = req->type != PS_PROTO_PUSH;
    size_t made = 0;
    while (pull && rc == PS_OK && made < self->base.ntasks) {
        rc = s_reply_frame (self, made, err);
        if (rc == PS_OK)
            self->bytes += ps_partition_count (self->parts [made++]) * sizeof (float);
    }
    if (rc) {
        for (size_t i = 0; i < made; i++)
            zmq_msg_close (&self->out [i]);
        return rc;
    }
    self->pull = pull;
    return PS_OK;
}

void
ps_job_apply_on (ps_job_t *self, ps_pool_t *pool)
{
    assert (self);
    self->split = pool && ps_pool_size (pool) > 0;
    if (self->split)
        self->runner = ps_pool_runner (pool);
}

size_t
ps_job_bytes (ps_job_t *self)
{
    assert (self);
    return self->bytes;
}

size_t
ps_job_tasks (ps_job_t *self)
{
    assert (self);
    return self->base.ntasks;
}

ps_pool_job_t *
ps_job_pool_job (ps_job_t *self)
{
    assert (self);
    return &self->base;
}

bool
ps_job_scans (ps_job_t *self)
{
    assert (self);
    return self->push;
}

ps_job_t *
ps_job_from_pool (ps_pool_job_t *job)
{
    assert (job && job->ops == &s_ops);
    return (ps_job_t *) job;
}

ps_msg_t *
ps_job_msg (ps_job_t *self)
{
    assert (self);
    return self->msg;
}

ps_peer_t *
ps_job_peer (ps_job_t *self)
{
    assert (self);
    return self->peer;
}

//  ---------------------------------------------------------------------
//  The reply

//  When a push's gradients hold NaN or an infinity, count that on every
//  partition concerned and describe the first in err.
static int
s_check_nonfinite (ps_job_t *self, ps_error_t *err)
{
    size_t first = self->base.ntasks, count = 0;
    for (size_t i = 0; i < self->base.ntasks; i++)
        if (self->nonfinite [i]) {
            ps_partition_count_nonfinite (self->parts [i]);
            first = count++ ? first : i;
        }
    if (count == 0)
        return PS_OK;
    ps_partition_t *part = self->parts [first];
    size_t at = self->nonfinite [first] - 1;
    return ps_error_set (err, PS_ENONFINITE,
                         "%s: tensors[%zu]: the gradient of partition %s/%u holds a non-finite "
                         "value (%g) at element %zu (%zu of the request's %zu gradients do); "
                         "nothing was applied", ps_msg_type (self->msg), first,
                         ps_partition_var (part), ps_partition_part (part),
                         ps_msg_tensor (self->msg, first) [at], at, count, self->base.ntasks);
}

//  Close the gradient frames of a push that sends no values back, once
//  nothing reads them. They are freed here, before the reply goes out,
//  rather than with the job after it: the client's next push of the same
//  size may arrive as soon as the reply does, and its frame should find
//  this one's memory free, not add a second copy to the server's peak.
static void
s_release_gradients (ps_job_t *self)
{
    if (!self->push || self->pull)
        return;
    for (size_t i = 0; i < self->base.ntasks; i++) {
        zmq_msg_t frame;
        if (ps_msg_take_tensor (self->msg, i, &frame) == PS_OK && zmq_msg_close (&frame) != 0)
            abort ();
    }
}

int
ps_job_reply (ps_job_t *self, ps_writer_t *writer, zmq_msg_t **frames, size_t *nframes,
              ps_error_t *err)
{
    assert (self);
    if (self->push) {
        int rc = s_check_nonfinite (self, err);
        if (rc) {
            s_release_gradients (self);
            return rc;
        }
    }
    s_release_gradients (self);
    if (atomic_load (&self->failed)) {
        *err = self->err;
        return self->err.code;
    }
    const ps_proto_t *req = ps_msg_proto (self->msg);
    ps_proto_t reply = { .type = ps_proto_info [req->type].reply, .id = req->id };
    for (size_t i = 0; i < self->base.ntasks; i++) {
        const char *var = ps_partition_var (self->parts [i]);
        uint32_t part = ps_partition_part (self->parts [i]);
        self->applied [i] = (ps_proto_applied_t) { var, part, self->versions [i],
                                                   self->duplicate [i] };
        ps_proto_pulled_t *pulled = &self->pulled [i];
        *pulled = (ps_proto_pulled_t) { .var = var, .part = part, .version = self->versions [i],
                                        .bytes = self->pull ? zmq_msg_size (&self->out [i]) : 0 };
        ps_proto_shape_set (&pulled->shape, self->dims + i * PS_MAX_RANK,
                            ps_partition_local_shape (self->parts [i]));
    }
    ps_proto_applied_array_t applied = { self->base.ntasks, self->applied };
    ps_proto_pulled_array_t pulled = { self->base.ntasks, self->pulled };
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
    ps_writer_encode (writer, &reply);
    *frames = self->pull ? self->out : NULL;
    *nframes = self->pull ? self->base.ntasks : 0;
    return PS_OK;
}
