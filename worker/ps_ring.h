//  Ring collectives over ZeroMQ: the all-reduce that sums the gradients of
//  mirrored replicas, and the broadcast that brings a replica that joins
//  (or fell behind) up to the others' state.
//
//  Members 0 .. n-1 form a ring in rank order (the coordinator ranks
//  workers by task index). Every member binds one PULL socket on its own
//  endpoint for its whole life, and connects one PUSH socket to its
//  successor, (rank + 1) % n; ps_ring_form re-makes that connection
//  whenever the ring is re-formed (a member died, or one joined). Data only
//  ever flows to the successor, so each member sends on one connection
//  and receives on one.
//
//  The all-reduce is the bandwidth-optimal ring algorithm: the vector is
//  cut into n segments; a reduce-scatter of n - 1 rounds leaves each member
//  owning one fully summed segment, and an all-gather of n - 1 rounds hands
//  every summed segment to everyone. Each segment travels in chunks, and a
//  chunk is forwarded as soon as it has been added to, so sending one chunk
//  overlaps receiving and reducing the next. Each segment is summed along
//  the ring in one fixed order and then copied, never summed again, so
//  every member ends with bitwise the same result.
//
//  A ring whose members all run on this host sums in shared memory
//  instead (ps_ring_shm.h), in the same order, so to the same bits; its
//  broadcasts still travel over the sockets.
//
//  Sends are zero-copy (ZeroMQ reads the caller's vector on its I/O
//  thread); a collective returns only after ZeroMQ has let go of every
//  buffer it was handed, so the caller may change the vector at once.
//  A loopback TCP connection to the successor is switched from BBR to
//  CUBIC (or Reno), whose lack of pacing suits loopback (see
//  ps_ring_transport.c, which holds the sockets; ps_ring.c is the algorithm).
//
//  Every message carries the ring id and the number of the collective in
//  that ring, so that chunks left over from an aborted collective or from
//  an older ring are recognised and dropped, never added in. A message
//  that does not parse is dropped with a warning naming its sender's
//  ring and sequence, never trusted.
//
//  A collective can be aborted from outside: while it waits it also polls
//  a "watch" (a ZeroMQ socket or a file descriptor, such as the worker's
//  link to the coordinator), and calls the watch function whenever that
//  is readable, or at least every 100 ms; when the function says abort,
//  the collective returns PS_ECANCELED. A collective that sees no progress
//  for the configured timeout returns PS_ETIMEDOUT. After either, or any
//  other failure, the ring must be formed again before the next
//  collective (which returns PS_EINVAL until then).

#ifndef PS_RING_H_INCLUDED
#define PS_RING_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_curve.h"
#include "ps_error.h"

typedef struct _ps_ring_t ps_ring_t;

//  Called while a collective waits (when the watch is readable, and at
//  least every 100 ms). Returns true to abort the collective.
typedef bool (ps_ring_watch_fn) (void *arg);

//  The chunk size a config of 0 stands for, tuned with
//  tests/bench/bench_allreduce (see ps_ring.c for the measurements).
#define PS_RING_DEFAULT_CHUNK   (1024 * 1024)

typedef struct {
    const char *bind;           //  this member's ZeroMQ endpoint, e.g. tcp://*:2222
    ps_curve_t *curve;          //  this worker's identity (NULL: unsecured), kept by the
                                //  caller until the ring is destroyed
    size_t chunk_bytes;         //  bytes per message, 4 .. 64 MiB (0: PS_RING_DEFAULT_CHUNK)
    int timeout_ms;             //  no progress for this long: PS_ETIMEDOUT (0: 10000)
    //  The ipc:// endpoint to bind beside a tcp bind for members on this
    //  host (ps_host.h): the one this worker registered; "" none; NULL
    //  one named after the tcp endpoint bound (ps_host_ipc_endpoint).
    const char *ipc;
    //  Bytes of each member's slot in the shared memory of a ring whose
    //  members all share this host (ps_ring_shm.h; 0:
    //  PS_RING_SHM_DEFAULT_SLOT): a multiple of 64 from 4096 to 1 GiB, the
    //  same in every member (one that differs fails to join, PS_EPROTO).
    size_t shm_bytes;
} ps_ring_config_t;

//  Bind this member's receiving socket. Returns NULL and sets err when the
//  endpoint cannot be bound (naming it and ZeroMQ's reason).
ps_ring_t *ps_ring_new (const ps_ring_config_t *config, ps_error_t *err);

//  Close the sockets and free; sets *self_p to NULL.
void ps_ring_destroy (ps_ring_t **self_p);

//  The endpoint actually bound (with the port filled in when the config
//  asked for a wildcard port, tcp://127.0.0.1:*).
const char *ps_ring_endpoint (const ps_ring_t *self);

//  What other members are to be given as this one's member endpoint: the
//  endpoint and, when same-host peers are on, an ipc:// endpoint and this
//  host's identity (ps_host.h), so that members on this host use ipc://.
const char *ps_ring_advert (const ps_ring_t *self);

//  The endpoint this member sends to: its successor's, as picked from the
//  member list (ipc:// for a successor on this host), or "no successor".
const char *ps_ring_successor (const ps_ring_t *self);

//  Poll `socket` (a ZeroMQ socket of any context, or NULL) or else `fd`
//  (or -1) while a collective waits, calling fn (arg) as described above,
//  on the collective's thread. fn should read what made the watch
//  readable, or it is called again at once. fn NULL: no watch.
void ps_ring_set_watch (ps_ring_t *self, void *socket, int fd, ps_ring_watch_fn *fn, void *arg);

//  Join ring `ring_id` as member `rank` of n; members [i] is member i's
//  endpoint to connect to (members [rank] is this member's own, as others
//  reach it), and tasks [i] its worker task index (NULL: unknown, allowed
//  only in an unsecured ring). Connects the sending socket to the
//  successor (dropping whatever was still queued for the previous one)
//  and forgets the previous ring. ring_id must grow from one formation to
//  the next. In a secured ring the successor must prove it holds worker
//  task tasks [successor]'s key, and only messages from the predecessor's
//  key are read; others are dropped and counted as malformed. A ring of
//  one host maps its shared memory here (see ps_ring_allreduce); that
//  memory is this user's alone, whom CurveZMQ's keys, files of this user,
//  do not keep out either. A formation that fails leaves the previous
//  ring as it was, but for one case: when there was no room for the new
//  ring's shared memory beside the previous ring's, that is let go and
//  the previous ring broken. Returns 0,
//  or PS_EINVAL (bad rank, n < 1, an empty endpoint, a ring id not above
//  the last, no tasks in a secured ring), PS_ENOTFOUND (no public key
//  for the successor) or PS_EIO naming the endpoint (or the shared
//  memory, when it cannot be had).
int ps_ring_form (ps_ring_t *self, uint64_t ring_id, int rank, int n,
                  const char *const *members, const int *tasks, ps_error_t *err);

//  This member's rank and the ring's size as last formed (0 and 0 before
//  the first formation).
int ps_ring_rank (const ps_ring_t *self);
int ps_ring_size (const ps_ring_t *self);

//  Sum data [0, count) over all members, in place; on return every member
//  holds bitwise the same sum. When every member of the ring is on this
//  host (each one's endpoint set names this host and an ipc:// socket
//  this process sees, ps_host.h) and PS_SAME_HOST is neither tcp nor ipc,
//  the members sum in shared memory (ps_ring_shm.h), in the same order and
//  so to the same bits as over sockets. count must be the same on every member
//  (a member that receives a chunk that does not fit says so: PS_EPROTO).
//  With one member it returns at once. Returns 0, PS_ECANCELED (the
//  watch said abort), PS_ETIMEDOUT, PS_EPROTO or PS_EIO, data then being
//  undefined; or PS_EINVAL, data untouched, when the ring is not formed
//  (or must be formed again) or data is NULL.
int ps_ring_allreduce (ps_ring_t *self, float *data, size_t count, ps_error_t *err);

//  Copy the root's data [0, bytes) to every member (bytes the same on
//  all), along the ring, chunked and pipelined like the all-reduce.
//  Returns as ps_ring_allreduce, and PS_EINVAL for a root not in the ring.
int ps_ring_broadcast (ps_ring_t *self, int root, void *data, size_t bytes, ps_error_t *err);

//  Counters since ps_ring_new.
typedef struct {
    uint64_t collectives;       //  completed
    uint64_t bytes_sent, bytes_received;
    uint64_t stale_dropped;     //  messages of an older ring or collective
    uint64_t malformed;         //  messages that did not parse
    uint64_t shared_memory;     //  all-reduces completed over shared memory
} ps_ring_stats_t;

void ps_ring_stats (const ps_ring_t *self, ps_ring_stats_t *stats);

#endif
