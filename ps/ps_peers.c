//  The peers of a ps-server and the bytes held for each; see ps_peers.h.

#include "ps_peers.h"
#include "ps_log.h"

#include <assert.h>
#include <czmq.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  Error replies are charged to the peer they go to like any reply. A peer
//  over its limit is refused until its refusals, unread as well, hold this
//  much more; then its requests are dropped, so that a flood of small
//  requests from a peer that never reads cannot grow the server either.
#define S_REFUSAL_SLACK  ((size_t) 1 << 20)

//  The table is swept when it has grown this much since the last sweep.
#define S_SWEEP_SLACK  64

//  The header before a reply frame's data (ps_peer_frame_new). 32 bytes
//  keep the data 16-byte aligned and make the block of an n-byte reply the
//  same malloc chunk as ZeroMQ's block for an n-byte received frame (n plus
//  its 40-byte header, rounded to 16): a pull's reply then reuses the
//  memory a push's gradient has just freed, and the other way round,
//  rather than each holding a block of its own (a 64-byte header made the
//  reply 32 bytes too large for the gradient's freed block).
#define S_FRAME_PREFIX  32

struct _ps_peer_t {
    atomic_int refs;
    atomic_size_t pending;      //  bytes held for this peer
    atomic_size_t *total;       //  the table's, which outlives every peer
    char name [96];             //  for logs: address and routing id
    bool refusing, dropping;    //  serving thread: logged in this episode
};

struct _ps_peers_t {
    zhashx_t *table;            //  routing id in hex -> ps_peer_t *
    atomic_size_t total;        //  bytes held for every peer
    size_t max_total, max_peer;
    size_t swept_size;          //  table size after the last sweep
    uint64_t refused, dropped;
};

static void
s_peer_free (void **item)
{
    ps_peer_unlink ((ps_peer_t **) item);
}

ps_peers_t *
ps_peers_new (size_t max_total, size_t max_peer)
{
    ps_peers_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->table = zhashx_new ();
    if (!self->table)
        abort ();
    zhashx_set_destructor (self->table, s_peer_free);
    atomic_init (&self->total, 0);
    self->max_total = max_total;
    self->max_peer = max_peer;
    return self;
}

void
ps_peers_destroy (ps_peers_t **self_p)
{
    assert (self_p);
    ps_peers_t *self = *self_p;
    if (!self)
        return;
    zhashx_destroy (&self->table);
    free (self);
    *self_p = NULL;
}

bool
ps_peers_idle (ps_peers_t *self)
{
    assert (self);
    if (atomic_load (&self->total) > 0)
        return false;
    for (ps_peer_t *peer = zhashx_first (self->table); peer; peer = zhashx_next (self->table))
        if (atomic_load (&peer->refs) > 1)
            return false;
    return true;
}

void
ps_peers_sweep (ps_peers_t *self)
{
    assert (self);
    //  Only the serving thread adds references and charges, so a peer seen
    //  here with the table's reference alone and nothing held stays so.
    //  The table may not change while it is walked: the keys are copied
    //  out first.
    zlistx_t *idle = zlistx_new ();
    if (!idle)
        abort ();
    zlistx_set_duplicator (idle, (zlistx_duplicator_fn *) strdup);
    zlistx_set_destructor (idle, (zlistx_destructor_fn *) zstr_free);
    for (ps_peer_t *peer = zhashx_first (self->table); peer; peer = zhashx_next (self->table))
        if (atomic_load (&peer->refs) == 1 && atomic_load (&peer->pending) == 0)
            zlistx_add_end (idle, (void *) zhashx_cursor (self->table));
    for (const char *key = zlistx_first (idle); key; key = zlistx_next (idle))
        zhashx_delete (self->table, key);
    zlistx_destroy (&idle);
    self->swept_size = zhashx_size (self->table);
}

//  The table's key for a routing id: its bytes in hex (ids are at most 255
//  bytes).
static void
s_key (const void *id, size_t size, char *key, size_t len)
{
    static const char hex [] = "0123456789abcdef";
    const unsigned char *bytes = id;
    size_t at = 0;
    for (size_t i = 0; i < size && at + 2 < len; i++) {
        key [at++] = hex [bytes [i] >> 4];
        key [at++] = hex [bytes [i] & 15];
    }
    key [at] = 0;
}

ps_peer_t *
ps_peers_lookup (ps_peers_t *self, const void *id, size_t size)
{
    assert (self);
    char key [512];
    s_key (id, size, key, sizeof key);
    return zhashx_lookup (self->table, key);
}

ps_peer_t *
ps_peers_add (ps_peers_t *self, const void *id, size_t size, const char *address)
{
    assert (self);
    char key [512];
    s_key (id, size, key, sizeof key);
    if (zhashx_size (self->table) > 2 * self->swept_size + S_SWEEP_SLACK)
        ps_peers_sweep (self);
    ps_peer_t *peer = calloc (1, sizeof *peer);
    if (!peer)
        abort ();
    atomic_init (&peer->refs, 1);
    atomic_init (&peer->pending, 0);
    peer->total = &self->total;
    snprintf (peer->name, sizeof peer->name, "%s (id %.16s)", address ? address : "?", key);
    if (zhashx_insert (self->table, key, peer) != 0)
        abort ();
    return peer;
}

ps_peer_verdict_t
ps_peers_admit (ps_peers_t *self, ps_peer_t *peer, char *reason, size_t len)
{
    assert (self);
    assert (peer);
    size_t pending = atomic_load (&peer->pending);
    size_t limit = self->max_peer;
    const char *which = "its limit";
    if (atomic_load (&self->total) > self->max_total) {
        //  Over the ceiling, each peer holding anything may hold an equal
        //  share of it: those that hold more are the ones not reading.
        size_t holders = 0;
        for (ps_peer_t *p = zhashx_first (self->table); p; p = zhashx_next (self->table))
            holders += atomic_load (&p->pending) > 0;
        size_t share = self->max_total / (holders ? holders : 1);
        if (share < limit) {
            limit = share;
            which = "its share of the server's limit";
        }
    }
    if (pending <= limit) {
        if (peer->refusing || peer->dropping)
            ps_info ("peer %s holds %zu bytes, within %s (%zu): served again", peer->name,
                     pending, which, limit);
        peer->refusing = peer->dropping = false;
        return PS_PEER_SERVE;
    }
    if (pending <= limit + S_REFUSAL_SLACK) {
        self->refused++;
        snprintf (reason, len, "back-pressure: the server holds %zu bytes for your requests "
                  "and unsent replies, over %s of %zu: read your replies before sending more",
                  pending, which, limit);
        if (!peer->refusing)
            ps_warn ("peer %s holds %zu bytes of requests and unsent replies, over %s of "
                     "%zu: refusing its requests until it reads", peer->name, pending, which,
                     limit);
        peer->refusing = true;
        return PS_PEER_REFUSE;
    }
    self->dropped++;
    if (!peer->dropping)
        ps_warn ("peer %s holds %zu bytes, its refusals unread too: dropping its requests "
                 "unanswered until it reads", peer->name, pending);
    peer->dropping = true;
    return PS_PEER_DROP;
}

void
ps_peers_stats (ps_peers_t *self, ps_peers_stats_t *stats)
{
    assert (self);
    stats->pending = atomic_load (&self->total);
    stats->refused = self->refused;
    stats->dropped = self->dropped;
}

ps_peer_t *
ps_peer_link (ps_peer_t *peer)
{
    assert (peer);
    atomic_fetch_add (&peer->refs, 1);
    return peer;
}

void
ps_peer_unlink (ps_peer_t **peer_p)
{
    assert (peer_p);
    ps_peer_t *peer = *peer_p;
    if (peer && atomic_fetch_sub (&peer->refs, 1) == 1)
        free (peer);
    *peer_p = NULL;
}

void
ps_peer_charge (ps_peer_t *peer, size_t bytes)
{
    assert (peer);
    atomic_fetch_add (&peer->pending, bytes);
    atomic_fetch_add (peer->total, bytes);
}

void
ps_peer_discharge (ps_peer_t *peer, size_t bytes)
{
    assert (peer);
    atomic_fetch_sub (&peer->pending, bytes);
    atomic_fetch_sub (peer->total, bytes);
}

//  ZeroMQ's free callback for frames of ps_peer_frame_new: give back what
//  was charged to the peer.
static void
s_frame_freed (void *data, void *hint)
{
    char *block = (char *) data - S_FRAME_PREFIX;
    size_t charged;
    memcpy (&charged, block, sizeof charged);
    ps_peer_t *peer = hint;
    ps_peer_discharge (peer, charged);
    ps_peer_unlink (&peer);
    free (block);
}

//  The amount charged sits in a prefix of S_FRAME_PREFIX bytes, which
//  keeps the data as aligned as malloc's block.
void *
ps_peer_frame_new (ps_peer_t *peer, size_t size, zmq_msg_t *frame)
{
    char *block = size <= SIZE_MAX - S_FRAME_PREFIX ? malloc (size + S_FRAME_PREFIX) : NULL;
    if (!block)
        return NULL;
    size_t charged = size + PS_PEER_FRAME_COST;
    memcpy (block, &charged, sizeof charged);
    ps_peer_charge (peer, charged);
    if (zmq_msg_init_data (frame, block + S_FRAME_PREFIX, size, s_frame_freed,
                           ps_peer_link (peer)) != 0)
        abort ();
    return block + S_FRAME_PREFIX;
}
