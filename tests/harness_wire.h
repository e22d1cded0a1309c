//  The harness's side of the wire protocol, for tests that talk to a
//  process on a raw ZeroMQ socket (a DEALER playing a client, a ROUTER
//  playing the coordinator or a hostile server): send a typed message
//  (ps_proto.h) encoded by the generated codec, and receive one decoded by
//  it, so that a test reads msg->stats_ok.errors rather than a field by
//  its name. Each helper fails the running cmocka case, naming what went
//  wrong, where ZeroMQ or the codec refuses. Tests that send malformed
//  messages on purpose pack those bytes themselves with msgpack-c.

#ifndef PS_HARNESS_WIRE_H_INCLUDED
#define PS_HARNESS_WIRE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#include <zmq.h>

#include "ps_msg.h"
#include "ps_proto.h"

//  Send nenvelope envelope frames (a ROUTER's routing id; may be 0), then
//  msg's header, encoded by the generated codec. Fails the case when the
//  message cannot be sent.
void harness_send (void *socket, zmq_msg_t *envelope, size_t nenvelope, const ps_proto_t *msg);

//  harness_send with nframes frames after the header, frame i holding
//  sizes [i] bytes copied from data [i] (the ids and rows of a sparse
//  message, or tensors).
void harness_send_frames (void *socket, const ps_proto_t *msg, const void *const *data,
                          const size_t *sizes, size_t nframes);

//  A DEALER socket of ctx connected to endpoint as a CURVE client of
//  server_task with task's identity (harness_curve), lingering 0. Fails
//  the case when it cannot be made.
void *harness_dealer (void *ctx, const char *endpoint, const char *task,
                      const char *server_task);

//  Receive and decode the next message on socket within timeout_ms into
//  msg (routed: socket is a ROUTER, see ps_msg_recv). Returns the typed
//  message, valid until msg is received into again, or NULL when nothing
//  came in time. Fails the case when the message does not decode.
const ps_proto_t *harness_recv (void *socket, ps_msg_t *msg, bool routed, int timeout_ms);

//  harness_recv on a DEALER or REQ socket, failing the case unless a
//  message of type comes within timeout_ms (an error reply in its place is
//  named with its code and message).
const ps_proto_t *harness_expect (void *socket, ps_msg_t *msg, ps_proto_type_t type,
                                  int timeout_ms);

#endif
