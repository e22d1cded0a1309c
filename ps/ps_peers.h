//  The peers of a ps-server and the bytes it holds for each of them:
//  back-pressure per peer.
//
//  Every byte the server holds on a peer's behalf is charged to that peer:
//  the gradients of its requests in progress, and every frame of the
//  replies ZeroMQ has not yet sent it (a reply frame is discharged by
//  ZeroMQ's free callback, on its I/O thread, once written to the kernel
//  or dropped with the peer's connection). A peer that sends requests and
//  never reads its replies therefore holds more and more, and is turned
//  away alone: above its own limit its requests get a too_big error reply,
//  and once those error replies pile up unread too, its requests are
//  dropped unanswered. Everyone else is served as usual. A ceiling on the
//  bytes held for all peers together bounds the server's memory: above it,
//  a peer holding more than an equal share of the ceiling is refused in
//  the same way, so the peers holding the most unread bytes are the ones
//  turned away, and a peer that reads its replies keeps being served. The
//  server goes on reading its socket whatever happens, so ZeroMQ goes on
//  processing disconnections, and a departed peer's queued replies are
//  released at once.
//
//  The table and the verdicts belong to the serving thread; the counters
//  (charge, discharge) and the references (link, unlink) may be touched
//  from any thread. A peer is known by its ZeroMQ routing id and named in
//  logs by its address.

#ifndef PS_PEERS_H_INCLUDED
#define PS_PEERS_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

typedef struct _ps_peers_t ps_peers_t;
typedef struct _ps_peer_t ps_peer_t;

typedef enum {
    PS_PEER_SERVE,              //  serve the request
    PS_PEER_REFUSE,             //  answer it with a too_big error
    PS_PEER_DROP,               //  drop it unanswered
} ps_peer_verdict_t;

//  What the server's statistics report.
typedef struct {
    size_t pending;             //  bytes held for all peers now
    uint64_t refused;           //  requests refused for back-pressure
    uint64_t dropped;           //  requests dropped unanswered
} ps_peers_stats_t;

//  Bytes charged per frame beyond its data: the allocation around it and
//  ZeroMQ's own record of a queued message, so that a flood of small
//  replies is counted at about what it costs.
#define PS_PEER_FRAME_COST  256

//  A table for a server holding at most max_total bytes for all peers
//  together, and max_peer for any one.
ps_peers_t *ps_peers_new (size_t max_total, size_t max_peer);

//  Destroy the table. Every peer must have been unlinked by all but the
//  table (ZeroMQ's context terminated first, so every reply is freed).
void ps_peers_destroy (ps_peers_t **self_p);

//  The peer with routing id [id, id + size), or NULL when it is new. The
//  result is borrowed until the next ps_peers_sweep: link it to keep it.
ps_peer_t *ps_peers_lookup (ps_peers_t *self, const void *id, size_t size);

//  Add the peer with that routing id, which lookup did not find; address
//  (may be NULL) names it in logs. Borrowed like lookup's result.
ps_peer_t *ps_peers_add (ps_peers_t *self, const void *id, size_t size, const char *address);

//  Whether to serve a request from peer now (see above). For a refusal,
//  reason (len bytes) receives the message of the error reply. The first
//  refusal and the first drop of a peer are logged, and again only after
//  it has been served in between.
ps_peer_verdict_t ps_peers_admit (ps_peers_t *self, ps_peer_t *peer, char *reason, size_t len);

//  Forget the peers that hold nothing and that nothing references, so that
//  the table does not grow with every peer that ever connected.
void ps_peers_sweep (ps_peers_t *self);

void ps_peers_stats (ps_peers_t *self, ps_peers_stats_t *stats);

//  True when no byte is held for any peer and no peer is referenced but by
//  the table: every reply frame has been freed. A server whose socket
//  lives in a context it does not terminate waits for this before it
//  destroys the table, since ZeroMQ frees the frames of a closed socket
//  later, on its I/O thread.
bool ps_peers_idle (ps_peers_t *self);

//  Take a reference to peer; returns peer.
ps_peer_t *ps_peer_link (ps_peer_t *peer);

//  Drop a reference and set *peer_p to NULL.
void ps_peer_unlink (ps_peer_t **peer_p);

//  Count bytes held for peer, or no longer held.
void ps_peer_charge (ps_peer_t *peer, size_t bytes);
void ps_peer_discharge (ps_peer_t *peer, size_t bytes);

//  Make *frame a reply frame of size bytes for peer, charged to it (with
//  PS_PEER_FRAME_COST) until ZeroMQ frees the frame, sent or dropped.
//  Returns the frame's data, aligned as malloc's, or NULL when the memory
//  cannot be had (*frame is then untouched).
void *ps_peer_frame_new (ps_peer_t *peer, size_t size, zmq_msg_t *frame);

#endif
