//  Fuzz target: the wire codec. The input is one multipart message in the
//  framing of fuzz_frames.h (frame boundaries only; the message-end bit is
//  ignored). ps_msg decodes its header and validates header and frames
//  against schemas/protocol.json (ps_schema), as the server and every
//  client do with what they receive. A message that passes is then read the
//  way the handlers read one: every string, number, shape and optimizer in
//  the header, and every float of every tensor frame.
//
//  Oracles, beyond the sanitizers: a refusal carries one of the codec's
//  codes and a message; an accepted message has a type the schema knows,
//  and its tensor frames are as long as their shapes say.

#include "fuzz_frames.h"
#include "ps_msg.h"

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

//  Read obj as the handlers would: strings into a name-sized buffer,
//  numbers as doubles, shapes and optimizers with their parsers. The sum
//  keeps the reads from being optimised away.
static double
s_read (const msgpack_object *obj, const char *key, size_t key_len)
{
    double sum = 0;
    char text [PS_NAME_MAX];
    ps_error_t err;
    if (key && key_len == 5 && memcmp (key, "shape", 5) == 0) {
        ps_shape_t shape;
        if (ps_obj_shape (obj, &shape, &err) == 0)
            sum += (double) ps_shape_count (&shape);
    }
    if (key && key_len == 9 && memcmp (key, "optimizer", 9) == 0) {
        ps_opt_config_t opt;
        if (ps_obj_optimizer (obj, &opt, &err) == 0)
            sum += opt.lr;
    }
    switch (obj->type) {
        case MSGPACK_OBJECT_STR:
            if (ps_obj_str (obj, text, sizeof text) == 0)
                sum += ps_obj_str_eq (obj, text);
            break;
        case MSGPACK_OBJECT_ARRAY:
            for (uint32_t i = 0; i < obj->via.array.size; i++)
                sum += s_read (&obj->via.array.ptr [i], NULL, 0);
            break;
        case MSGPACK_OBJECT_MAP:
            for (uint32_t i = 0; i < obj->via.map.size; i++) {
                const msgpack_object *k = &obj->via.map.ptr [i].key;
                sum += s_read (&obj->via.map.ptr [i].val,
                               k->type == MSGPACK_OBJECT_STR ? k->via.str.ptr : NULL,
                               k->type == MSGPACK_OBJECT_STR ? k->via.str.size : 0);
            }
            break;
        default:
            sum += ps_obj_double (obj);
    }
    return sum;
}

static void
s_check_accepted (ps_msg_t *msg, const size_t *sizes)
{
    const char *type = ps_msg_type (msg);
    if (!type || !*type)
        s_fail ("accepted message", "has no type");
    const msgpack_object *header = ps_msg_header (msg);
    volatile double sum = s_read (header, NULL, 0);
    size_t count = ps_msg_tensor_count (msg);
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
        s_check_accepted (msg, sizes);
    else
    if (rc != PS_EPROTO && rc != PS_EVERSION && rc != PS_ESHAPE && rc != PS_EINVAL)
        s_fail ("unexpected code from ps_msg_decode", ps_error_name (rc));
    else
    if (err.code != rc || !err.msg [0])
        s_fail ("refusal without its message, code", ps_error_name (rc));
    ps_msg_clear (msg);
    return 0;
}
