//  The transport under the ring collectives (ps_ring.h): one member's
//  connections, as gloo's transport::Pair is to its algorithms. It binds
//  the receiving socket for the member's whole life, connects the sending
//  socket to the successor (again at every formation), sends slices of
//  the caller's vector zero-copy and counts the buffers ZeroMQ still
//  holds, and reads the predecessor's messages, dropping (and counting)
//  those that do not parse or, in a secured ring, come from anyone else.
//
//  It knows the wire format of one message but nothing of collectives:
//  which slice goes in which round, and whether a message belongs to the
//  collective under way, are ps_ring.c's. Members on one host reach each
//  other over ipc:// (ps_host.h): the receiving socket binds an ipc://
//  endpoint beside its TCP one, members advertise both, and a member
//  connects to the ipc:// one of a successor on its own host.
//
//  Wire format. Every message has two frames: a header of
//  PS_RING_HEADER_SIZE bytes and the payload, a slice of the vector. The
//  header is little-endian:
//      0   u32  magic, "PSRG"
//      4   u16  version (1)
//      6   u16  kind: 1 reduce-scatter, 2 all-gather, 3 broadcast
//      8   u32  round within the kind (0 .. n - 2; 0 in a broadcast)
//      12  u32  root of a broadcast (0 otherwise)
//      16  u64  ring id
//      24  u64  sequence number of the collective within the ring
//      32  u64  index of the message within its round (for reports only)
//      40  u64  byte offset of the payload in the vector
//      48  u64  byte length of the payload (the payload frame's size)
//      56  u64  the vector's length in bytes

#ifndef PS_RING_TRANSPORT_H_INCLUDED
#define PS_RING_TRANSPORT_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "ps_curve.h"
#include "ps_error.h"

#define PS_RING_HEADER_SIZE         64

#define PS_RING_KIND_REDUCE_SCATTER 1
#define PS_RING_KIND_ALL_GATHER     2
#define PS_RING_KIND_BROADCAST      3

//  The largest payload a message may carry.
#define PS_RING_MAX_CHUNK           (64 * 1024 * 1024)

typedef struct {
    uint32_t magic;             //  filled in by the transport when sending
    uint16_t version;           //  likewise
    uint16_t kind;
    uint32_t round;
    uint32_t root;
    uint64_t ring;
    uint64_t seq;
    uint64_t index;
    uint64_t offset;
    uint64_t length;
    uint64_t total;
} ps_ring_header_t;

//  The name of a header's kind, for messages.
const char *ps_ring_kind_name (unsigned kind);

typedef struct _ps_ring_transport_t ps_ring_transport_t;

//  Bind the receiving socket on bind (curve: the member's identity, or
//  NULL), and beside a tcp bind on ipc (as ps_ring_config_t's ipc says).
//  Returns NULL with err set, naming the endpoint, when it cannot.
ps_ring_transport_t *ps_ring_transport_new (const char *bind, const char *ipc,
                                            ps_curve_t *curve, ps_error_t *err);

//  Close the sockets; ZeroMQ must hold none of the caller's buffers.
void ps_ring_transport_destroy (ps_ring_transport_t **self_p);

//  The endpoint actually bound.
const char *ps_ring_transport_endpoint (const ps_ring_transport_t *self);

//  What other members are to be told to reach this one at: the endpoint
//  set of ps_host.h, the endpoint bound and, when same-host peers are on,
//  an ipc:// endpoint bound beside it and this host's identity.
const char *ps_ring_transport_advert (const ps_ring_transport_t *self);

//  Connect to the successor at endpoint successor (an endpoint set of
//  ps_host.h, from which the ipc:// endpoint is picked on its host; rank successor_rank,
//  worker task successor_task, "" when unknown, which a secured transport
//  refuses), or to none when successor is NULL (a ring of one), and read
//  only predecessor_task's messages when secured. The new connection is
//  made before the old one is dropped (with whatever was still queued on
//  it), so a failure leaves the previous one as it was. ring_id names the
//  ring in messages. Returns 0, PS_ENOTFOUND (no key for the successor)
//  or PS_EIO naming the endpoint.
int ps_ring_transport_connect (ps_ring_transport_t *self, uint64_t ring_id,
                               const char *successor, int successor_rank,
                               const char *successor_task, const char *predecessor,
                               const char *predecessor_task, ps_error_t *err);

//  The endpoints of the successor and the predecessor, for messages.
const char *ps_ring_transport_successor (const ps_ring_transport_t *self);
const char *ps_ring_transport_predecessor (const ps_ring_transport_t *self);

//  Queue one message: header h and bytes [h->offset, h->offset +
//  h->length) of vector, sent from the vector itself. Returns 0, 1 when
//  ZeroMQ has no room now (nothing queued), or PS_EIO.
int ps_ring_transport_send (ps_ring_transport_t *self, ps_ring_header_t *h,
                            const unsigned char *vector, ps_error_t *err);

//  Read one message from the predecessor into h and payload (an
//  initialised message). Returns 1 when a well-formed message was read, 2
//  when a malformed one was read and dropped, 0 when none is waiting, or
//  PS_EIO.
int ps_ring_transport_read (ps_ring_transport_t *self, ps_ring_header_t *h, zmq_msg_t *payload,
                            ps_error_t *err);

//  Close a payload (or any message); closing a valid message cannot fail,
//  but it is said in the log if it ever does.
void ps_ring_payload_close (zmq_msg_t *msg);

//  Count a message dropped as malformed and warn, at most once a second.
void ps_ring_transport_malformed (ps_ring_transport_t *self, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

//  Messages dropped as malformed since ps_ring_transport_new.
uint64_t ps_ring_transport_malformed_count (const ps_ring_transport_t *self);

//  How many of the caller's buffers ZeroMQ still holds.
size_t ps_ring_transport_outstanding (ps_ring_transport_t *self);

//  Add the transport's items to a zmq_poll: the receiving socket with
//  recv, the sending socket's room with send, ZeroMQ's release of the last
//  buffer with release, and always the connection events. Returns how
//  many items it wrote at items (at most 4).
int ps_ring_transport_poll_items (ps_ring_transport_t *self, zmq_pollitem_t *items, bool recv,
                                  bool send, bool release);

//  After zmq_poll over those items: take in what the transport's own
//  items showed. Also called before a collective starts, with items NULL.
//  Returns 0 or PS_EIO.
int ps_ring_transport_polled (ps_ring_transport_t *self, const zmq_pollitem_t *items,
                              ps_error_t *err);

//  Drop the connection to the successor with whatever is queued on it,
//  and wait until ZeroMQ has let go of every buffer of the caller's
//  vector (after a failed collective: ZeroMQ drops what it still held on
//  its threads within milliseconds).
void ps_ring_transport_abandon (ps_ring_transport_t *self);

#endif
