//  Fuzz target: the wire codec. The input is one multipart message in the
//  framing of fuzz_frames.h (frame boundaries only; the message-end bit is
//  ignored). ps_msg parses its header and decodes it with the generated
//  codec (ps_proto.h, from schemas/protocol.json), which checks it and the
//  frames against the protocol, as the server and every client do with
//  what they receive. The seeds hold one message of every type
//  (fuzz_seeds.c), so each type's decoder is reached. A message that passes
//  is then read the way the handlers read one: its shapes, optimizer,
//  initializer and job plan through their conversions (ps_proto_conv.h,
//  ps_plan.h), and every float of every tensor frame.
//
//  Oracles, beyond the sanitizers: a refusal carries one of the codec's
//  codes and a message; an accepted message has a type the protocol knows,
//  its tensor frames are as long as their descriptions say, and it encodes
//  again into a header that decodes to the same type and id and encodes
//  to the very same bytes (so every field the decoder filled in is one the
//  encoder can write, and nothing is lost on the way round).

#include "fuzz_frames.h"
#include "ps_msg.h"
#include "ps_plan.h"
#include "ps_proto_conv.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_FRAMES  (PS_MSG_MAX_FRAMES + 2)

static void
s_fail (const char *what, const char *detail)
{
    fprintf (stderr, "fuzz_msg: %s: %s\n", what, detail);
    abort ();
}

//  The number of floats a shape describes, when ps_shape_set takes it.
static double
s_shape (const ps_proto_uint_array_t *dims)
{
    ps_shape_t shape;
    ps_error_t err;
    return ps_proto_shape_get (dims, &shape, &err) == 0 ? (double) ps_shape_count (&shape) : 0;
}

static double
s_tensors (const ps_proto_tensor_array_t *tensors)
{
    double sum = 0;
    for (size_t i = 0; i < tensors->count; i++)
        sum += s_shape (&tensors->items [i].shape);
    return sum;
}

static double
s_pulled (const ps_proto_pulled_array_t *pulled)
{
    double sum = 0;
    for (size_t i = 0; i < pulled->count; i++)
        sum += s_shape (&pulled->items [i].shape);
    return sum;
}

static double
s_optimizer (const ps_proto_optimizer_t *in)
{
    ps_opt_config_t opt;
    ps_error_t err;
    return ps_proto_optimizer_get (in, &opt, &err) == 0 ? opt.lr : 0;
}

//  Read the fields that handlers convert to our own types, as they would.
//  The sum keeps the reads from being optimised away.
static double
s_read (const ps_proto_t *msg)
{
    double sum = 0;
    ps_error_t err;
    switch (msg->type) {
        case PS_PROTO_CREATE:
            for (size_t i = 0; i < msg->create.partitions.count; i++) {
                const ps_proto_partition_t *part = &msg->create.partitions.items [i];
                ps_init_t init;
                sum += s_shape (&part->shape);
                if (ps_proto_init_get (&part->init, &init, &err) == 0)
                    sum += (double) init.seed;
            }
            break;
        case PS_PROTO_PUSH:
            sum += s_tensors (&msg->push.tensors);
            break;
        case PS_PROTO_PUSH_PULL:
            sum += s_tensors (&msg->push_pull.tensors);
            break;
        case PS_PROTO_PULL_OK:
            sum += s_pulled (&msg->pull_ok.tensors);
            break;
        case PS_PROTO_PUSH_PULL_OK:
            sum += s_pulled (&msg->push_pull_ok.tensors);
            break;
        case PS_PROTO_SET_OPTIMIZER:
            sum += s_optimizer (&msg->set_optimizer.optimizer);
            break;
        case PS_PROTO_STATS_OK:
            for (size_t i = 0; i < msg->stats_ok.partitions.count; i++)
                sum += s_shape (&msg->stats_ok.partitions.items [i].shape);
            break;
        case PS_PROTO_REGISTER_OK:
            if (msg->register_ok.has_plan) {
                ps_plan_t plan;
                if (ps_plan_read (&plan, &msg->register_ok.plan, &err) == 0) {
                    sum += (double) plan.nvars;
                    ps_plan_release (&plan);
                }
            }
            break;
        default:
            break;
    }
    return sum;
}

//  Encode msg into sbuf (cleared first) with the generated codec.
static void
s_encode (const ps_proto_t *msg, msgpack_sbuffer *sbuf)
{
    msgpack_sbuffer_clear (sbuf);
    msgpack_packer pk;
    msgpack_packer_init (&pk, sbuf, msgpack_sbuffer_write);
    if (ps_proto_encode (msg, &pk) != 0)
        s_fail ("ps_proto_encode", "failed on a decoded message");
}

//  An accepted message goes round the codec: encoded, decoded (with the
//  frames it came with) and encoded again, the two encodings the same.
static void
s_round_trip (const ps_proto_t *msg, const size_t *sizes, size_t count)
{
    static msgpack_sbuffer first, second;
    static msgpack_unpacked unpacked;
    static bool ready;
    if (!ready) {
        msgpack_sbuffer_init (&first);
        msgpack_sbuffer_init (&second);
        msgpack_unpacked_init (&unpacked);
        ready = true;
    }
    s_encode (msg, &first);
    size_t offset = 0;
    if (msgpack_unpack_next (&unpacked, first.data, first.size, &offset) != MSGPACK_UNPACK_SUCCESS
    ||  offset != first.size)
        s_fail ("re-encoded header", "is not one msgpack value");
    ps_proto_t again;
    ps_error_t err = { 0 };
    if (ps_proto_decode (&unpacked.data, sizes + 1, count - 1, unpacked.zone, &again, &err))
        s_fail ("re-encoded header does not decode", err.msg);
    if (again.type != msg->type || again.id != msg->id)
        s_fail ("re-encoded header", "decodes to another type or id");
    s_encode (&again, &second);
    if (second.size != first.size || memcmp (second.data, first.data, first.size) != 0)
        s_fail ("re-encoded header", "encodes to other bytes the second time");
}

static void
s_check_accepted (ps_msg_t *msg, const size_t *sizes, size_t nframes)
{
    const ps_proto_t *proto = ps_msg_proto (msg);
    if (proto->type <= PS_PROTO_NONE || proto->type >= PS_PROTO_NTYPES)
        s_fail ("accepted message", "has no type");
    const char *name = ps_msg_type (msg);
    if (ps_proto_lookup (name, strlen (name)) != proto->type)
        s_fail ("accepted message", "has a type name that names another type");
    volatile double sum = s_read (proto);
    s_round_trip (proto, sizes, nframes);
    size_t count = ps_msg_tensor_count (msg);
    if (count > 0 && !ps_proto_info [proto->type].tensors)
        s_fail ("accepted message", "has tensor frames its type does not carry");
    size_t bytes = 0;
    for (size_t i = 0; i < count; i++) {
        const float *tensor = ps_msg_tensor (msg, i);
        if ((uintptr_t) tensor % sizeof (float))
            s_fail ("tensor frame", "is not aligned");
        for (size_t k = 0; k < sizes [i + 1] / sizeof (float); k++)
            sum += tensor [k];
        bytes += sizes [i + 1];
    }
    if (bytes != ps_msg_tensor_bytes (msg))
        s_fail ("tensor bytes", "differ from the frames' sizes");
    (void) sum;
    //  A push-pull answers in its gradient's frame; taking it must leave
    //  the aligned view readable while the frame lives.
    if (count > 0) {
        zmq_msg_t frame;
        if (ps_msg_take_tensor (msg, 0, &frame) == 0) {
            if (zmq_msg_size (&frame) != sizes [1])
                s_fail ("taken frame", "has another size");
            zmq_msg_close (&frame);
        }
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    static ps_msg_t *msg;
    if (!msg)
        msg = ps_msg_new ();
    static fuzz_frame_t frames [S_MAX_FRAMES];
    static const void *parts [S_MAX_FRAMES];
    static size_t sizes [S_MAX_FRAMES];
    size_t count = fuzz_frames_split (data, size, frames, S_MAX_FRAMES);
    if (count == 0)
        return 0;
    for (size_t i = 0; i < count; i++) {
        parts [i] = frames [i].data;
        sizes [i] = frames [i].size;
    }
    if (ps_msg_set (msg, parts, sizes, count) != 0)
        s_fail ("ps_msg_set", "refused the frames");
    ps_error_t err = { 0 };
    int rc = ps_msg_decode (msg, &err);
    if (rc == 0)
        s_check_accepted (msg, sizes, count);
    else
    if (rc != PS_EPROTO && rc != PS_EVERSION && rc != PS_ESHAPE && rc != PS_EINVAL)
        s_fail ("unexpected code from ps_msg_decode", ps_error_name (rc));
    else
    if (err.code != rc || !err.msg [0])
        s_fail ("refusal without its message, code", ps_error_name (rc));
    ps_msg_clear (msg);
    return 0;
}
