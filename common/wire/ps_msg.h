//  The message codec: one ZeroMQ multipart message of the wire protocol
//  (schemas/protocol.json) as it is received or sent.
//
//  A received message keeps its ZeroMQ frames; tensors are read in place
//  from them, never copied, except for the rare small frame that ZeroMQ
//  delivers at an address that is not 4-byte aligned, which is copied once
//  into an aligned buffer owned by the message so readers always see
//  aligned floats. A ps_msg_t is reused from message to message, so its
//  buffers are allocated once.
//
//  Messages are read and written as typed structs of the generated codec
//  (ps_proto.h), never field by field by name. Sending goes through a
//  ps_writer_t, which holds the header that codec encodes from a typed
//  message; the tensor frames are handed over as zmq_msg_t, so the caller
//  decides between zero-copy (zmq_msg_init_data) and an owned buffer.

#ifndef PS_MSG_H_INCLUDED
#define PS_MSG_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>
#include <zmq.h>

#include "ps_error.h"
#include "ps_proto.h"

//  Limits that protect a receiver from a peer; larger is refused.
#define PS_MSG_MAX_FRAMES     4096
#define PS_MSG_MAX_HEADER     (1 << 20)
#define PS_MSG_MAX_ENVELOPE   4

typedef struct _ps_msg_t ps_msg_t;

ps_msg_t *ps_msg_new (void);
void ps_msg_destroy (ps_msg_t **self_p);

//  Receive one whole multipart message from socket, replacing the message
//  held before. With routed (a ROUTER socket) the leading routing-id frame,
//  and an empty delimiter frame after it when a REQ peer sent one, form the
//  envelope that ps_msg_envelope gives back. Returns 0, or PS_EPROTO
//  when the message has no header, too many frames or an oversized header
//  (the whole message has been drained and the envelope kept, so the caller
//  can reply), or PS_EIO when ZeroMQ fails (err says why; errno is kept,
//  EINTR and ETERM included).
int ps_msg_recv (ps_msg_t *self, void *socket, bool routed, ps_error_t *err);

//  Set the message's frames from buffers (a header then tensor frames), as
//  if received. Used by the codec tests to feed the schema's test vectors.
int ps_msg_set (ps_msg_t *self, const void *const *frames, const size_t *sizes,
                size_t nframes);

//  Parse the header and decode it with the generated codec (ps_proto.h),
//  which checks it and the frames against the protocol. Returns 0, or
//  PS_EVERSION / PS_EPROTO / PS_ESHAPE / PS_EINVAL (a value out of its
//  field's bounds) with a message naming the problem.
//  The request id is available even when decoding fails, if the header got
//  as far as holding one.
int ps_msg_decode (ps_msg_t *self, ps_error_t *err);

//  After a successful decode: the typed message, valid until the message
//  is received into, set or cleared again. Handlers read its fields
//  (proto->push.step); the tensor frames stay where ps_msg_tensor reads them.
const ps_proto_t *ps_msg_proto (ps_msg_t *self);

//  After a successful decode: the type's name (static string), id, number
//  of tensor frames, and frame i's data as aligned floats.
const char *ps_msg_type (ps_msg_t *self);
uint64_t ps_msg_id (ps_msg_t *self);
size_t ps_msg_tensor_count (ps_msg_t *self);
const float *ps_msg_tensor (ps_msg_t *self, size_t index);

//  After a successful decode of a sparse message: frame i (counted as
//  ps_msg_tensor counts) as the row ids it holds, aligned.
const uint64_t *ps_msg_ids (ps_msg_t *self, size_t index);

//  Move tensor frame `index` out of the message into *frame (initialised by
//  this call), so a reply can reuse its buffer: a push-pull writes the fresh
//  values over the gradient it has applied and sends that frame back,
//  allocating nothing. ps_msg_tensor (index) stays valid while *frame
//  lives. Returns PS_EINVAL, moving nothing, when the tensor's aligned view
//  is a copy rather than the frame itself.
int ps_msg_take_tensor (ps_msg_t *self, size_t index, zmq_msg_t *frame);

//  Release the frames held, keeping the buffers of the codec for reuse.
//  A message parked for reuse should not pin a large received frame.
void ps_msg_clear (ps_msg_t *self);

//  Total bytes of the tensor frames.
size_t ps_msg_tensor_bytes (ps_msg_t *self);

//  The envelope frames (routing id, optional delimiter) to echo back.
size_t ps_msg_envelope (ps_msg_t *self, zmq_msg_t **frames);

//  A ZeroMQ metadata property of the received message (for example the
//  sender's authenticated task, see ps_curve.h), or NULL when it has none.
const char *ps_msg_property (ps_msg_t *self, const char *name);
//  The address of the peer that sent a received message (its IP for tcp),
//  for logs, or NULL when ZeroMQ does not say.
const char *ps_msg_peer_address (ps_msg_t *self);

//  ---------------------------------------------------------------------
//  Writing a message.

typedef struct {
    msgpack_sbuffer sbuf;
    msgpack_packer pk;
} ps_writer_t;

//  An empty writer; ps_writer_encode packs a header into it, and its buffer
//  is kept from message to message until ps_writer_fini.
void ps_writer_init (ps_writer_t *self);
void ps_writer_fini (ps_writer_t *self);

//  Send envelope frames (may be 0), the header, then nframes tensor frames.
//  The tensor frames are consumed (closed) whatever the result. Returns 0
//  or PS_EIO with errno kept.
int ps_writer_send (ps_writer_t *self, void *socket, zmq_msg_t *envelope,
                    size_t nenvelope, zmq_msg_t *frames, size_t nframes, ps_error_t *err);

//  Send envelope frames (may be 0), then header, a frame made by the
//  caller (zero-copy if it likes), then nframes tensor frames. header and
//  the tensor frames are consumed (closed) whatever the result. Returns 0
//  or PS_EIO with errno kept.
int ps_msg_send_frames (void *socket, zmq_msg_t *envelope, size_t nenvelope,
                        zmq_msg_t *header, zmq_msg_t *frames, size_t nframes,
                        ps_error_t *err);

//  Replace the writer's header with msg, encoded by the generated codec.
//  Aborts when its buffer cannot grow (out of memory).
void ps_writer_encode (ps_writer_t *self, const ps_proto_t *msg);

//  Restart the writer's header as an error reply to request id.
void ps_writer_error (ps_writer_t *self, uint64_t id, int code, const char *message);

//  Send an error reply with code and message.
int ps_msg_send_error (void *socket, zmq_msg_t *envelope, size_t nenvelope,
                       uint64_t id, int code, const char *message, ps_error_t *err);

#endif
