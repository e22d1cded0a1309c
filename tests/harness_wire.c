//  The harness's side of the wire protocol; see harness_wire.h.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "harness_wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void
harness_send (void *socket, zmq_msg_t *envelope, size_t nenvelope, const ps_proto_t *msg)
{
    ps_writer_t writer;
    ps_writer_init (&writer);
    ps_writer_encode (&writer, msg);
    ps_error_t err;
    int rc = ps_writer_send (&writer, socket, envelope, nenvelope, NULL, 0, &err);
    ps_writer_fini (&writer);
    if (rc)
        fail_msg ("cannot send a %s: %s", ps_proto_info [msg->type].name, err.msg);
}

void
harness_send_frames (void *socket, const ps_proto_t *msg, const void *const *data,
                     const size_t *sizes, size_t nframes)
{
    zmq_msg_t *frames = calloc (nframes + 1, sizeof *frames);
    if (!frames)
        fail_msg ("out of memory");
    for (size_t i = 0; i < nframes; i++) {
        if (zmq_msg_init_size (&frames [i], sizes [i]) != 0)
            fail_msg ("zmq_msg_init_size: %s", zmq_strerror (errno));
        if (sizes [i])
            memcpy (zmq_msg_data (&frames [i]), data [i], sizes [i]);
    }
    ps_writer_t writer;
    ps_writer_init (&writer);
    ps_writer_encode (&writer, msg);
    ps_error_t err;
    int rc = ps_writer_send (&writer, socket, NULL, 0, frames, nframes, &err);
    ps_writer_fini (&writer);
    free (frames);
    if (rc)
        fail_msg ("cannot send a %s: %s", ps_proto_info [msg->type].name, err.msg);
}

void *
harness_dealer (void *ctx, const char *endpoint, const char *task, const char *server_task)
{
    void *socket = zmq_socket (ctx, ZMQ_DEALER);
    int linger = 0;
    ps_error_t err = { 0 };
    if (!socket || zmq_setsockopt (socket, ZMQ_LINGER, &linger, sizeof linger) != 0
    ||  ps_curve_client (harness_curve (task), socket, server_task, &err) != 0
    ||  zmq_connect (socket, endpoint) != 0)
        fail_msg ("cannot connect %s to %s at %s: %s", task, server_task, endpoint,
                  err.msg [0] ? err.msg : zmq_strerror (errno));
    return socket;
}

const ps_proto_t *
harness_recv (void *socket, ps_msg_t *msg, bool routed, int timeout_ms)
{
    zmq_pollitem_t item = { socket, 0, ZMQ_POLLIN, 0 };
    int ready = zmq_poll (&item, 1, timeout_ms);
    if (ready < 0)
        fail_msg ("zmq_poll: %s", zmq_strerror (errno));
    if (ready == 0)
        return NULL;
    ps_error_t err;
    if (ps_msg_recv (msg, socket, routed, &err) || ps_msg_decode (msg, &err))
        fail_msg ("a message received does not decode: %s", err.msg);
    return ps_msg_proto (msg);
}

const ps_proto_t *
harness_expect (void *socket, ps_msg_t *msg, ps_proto_type_t type, int timeout_ms)
{
    const ps_proto_t *got = harness_recv (socket, msg, false, timeout_ms);
    if (!got)
        fail_msg ("no %s within %d ms", ps_proto_info [type].name, timeout_ms);
    if (got->type == PS_PROTO_ERROR && type != PS_PROTO_ERROR)
        fail_msg ("expected a %s, got an error: %s: %s", ps_proto_info [type].name,
                  got->error.code, got->error.message);
    if (got->type != type)
        fail_msg ("expected a %s, got a %s", ps_proto_info [type].name,
                  ps_proto_info [got->type].name);
    return got;
}
