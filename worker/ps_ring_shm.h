//  The shared-memory all-reduce of a ring whose members all run on one
//  host (ps_host.h), as NCCL and gloo have an intra-node transport beside
//  their network one. Over ipc:// or loopback TCP every byte a member
//  sends is copied twice by the kernel (into the socket's buffer and out
//  of it) and crosses two ZeroMQ I/O threads; here the members copy their
//  vectors into one mapping that all of them share, and each sums its
//  part straight out of the others' copies.
//
//  The mapping is a POSIX shared-memory object of this user's alone
//  (mode 0600, refused when someone else's or open to others), named
//  after the user, the ring id and the members' endpoints, so that the
//  members of one ring, and only they, open the same one without a word
//  on the wire. It holds a header (the layout it was made for, the
//  barrier, each member's announcement), an input slot of slot_bytes per
//  member and an output of a part per member. The member that makes it
//  makes it whole under a name of its own and then links it to the
//  ring's name, so a member that joins never sees half an object, and
//  checks the layout before it uses it. Each member holds a shared lock
//  on the object while it has it: an object of the ring's name that no
//  one holds is a dead ring's, whose barrier holds whatever its members
//  left, and is made anew rather than joined. Member 0 removes the name
//  once all have passed the first barrier, so no file is left behind once
//  the ring works; a member that lets go of the ring removes it too, in
//  case the first barrier was never passed; and making a ring removes the
//  names of this user's ring objects that no process holds and that are
//  more than a minute old (rings whose members all died before their
//  first barrier).
//
//  A collective runs in passes over pieces of the vector of at most
//  slot_bytes. In a pass, member m copies the parts of its piece that the
//  others sum into its slot; all meet at a barrier; member m sums part m
//  of the piece over every member's copy (its own from its vector) into
//  its vector and its output; all meet again; and member m copies every
//  other part's sum out of its summing member's output. The first barrier
//  of the next pass is also what lets a member overwrite its output, so a
//  pass needs two barriers.
//
//  Every element is summed in the ring's own order (ps_ring.c, "The
//  schedule"): an element of the ring's segment s as member s's value plus
//  member s + 1's, plus member s + 2's, and so on around the ring. So a
//  ring sums bitwise alike over shared memory and over sockets, and every
//  member ends with bitwise the same vector.
//
//  The barriers spin briefly and then sleep on a futex in the mapping.
//  While a member waits it calls the caller's wait function at least every
//  PS_RING_SHM_POLL_MS with the time since the last barrier was passed;
//  the function gives up (the watch said abort, or no progress for the
//  timeout) by returning an error. A member that gives up, or dies, leaves
//  the others at a barrier until they give up too; after any failure the
//  mapping is not used again (the ring must be formed anew, which maps
//  another).
//
//  Before summing, the members compare what each announced in the header:
//  the collective's sequence number and the vector's length. Members that
//  disagree all see it after the first barrier and all fail with
//  PS_EPROTO, rather than sum vectors of different lengths.

#ifndef PS_RING_SHM_H_INCLUDED
#define PS_RING_SHM_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"

//  The bytes of a member's slot when the ring's config gives 0. A 16 MiB
//  vector takes four passes: larger slots only cost memory, smaller ones
//  more barriers (see ps_ring_shm.c for the measurements).
#define PS_RING_SHM_DEFAULT_SLOT    (4 * 1024 * 1024)

//  The smallest slot (a part of every member in one cache line at least),
//  and the largest.
#define PS_RING_SHM_MIN_SLOT        4096
#define PS_RING_SHM_MAX_SLOT        (1024 * 1024 * 1024)

//  How often at least a waiting member calls the wait function.
#define PS_RING_SHM_POLL_MS         10

typedef struct _ps_ring_shm_t ps_ring_shm_t;

//  Called while a member waits for the others, with the milliseconds since
//  the collective started or last passed a barrier. Returns 0 to go on
//  waiting, or an error code with err set to give up.
typedef int (ps_ring_shm_wait_fn) (void *arg, double since_ms, ps_error_t *err);

//  Open (making it if this member is the first) and map the shared memory
//  of ring ring_id, whose n members (n >= 2) advertise members [0 .. n),
//  as member rank, with slots of slot_bytes (a multiple of 64 from
//  PS_RING_SHM_MIN_SLOT to PS_RING_SHM_MAX_SLOT). Returns NULL with err
//  set when it cannot: PS_EIO naming the object and the reason (such as
//  no room in /dev/shm), PS_EPROTO when another member made it for
//  another layout (another build, another slot size), PS_EINVAL for bad
//  sizes.
ps_ring_shm_t *ps_ring_shm_new (uint64_t ring_id, const char *const *members, int n, int rank,
                                size_t slot_bytes, ps_error_t *err);

//  Unmap, remove the name if it is still there, and free; sets *self_p to
//  NULL.
void ps_ring_shm_destroy (ps_ring_shm_t **self_p);

//  The shared-memory object's name, for messages.
const char *ps_ring_shm_name (const ps_ring_shm_t *self);

//  Sum data [0, count) over all members in place, as collective seq of the
//  ring. Returns 0; PS_EPROTO when the members' counts or sequence numbers
//  differ; PS_EIO when a futex call fails; or what wait returned. After a
//  failure the data is undefined and the mapping must not be used again.
int ps_ring_shm_allreduce (ps_ring_shm_t *self, uint64_t seq, float *data, size_t count,
                           ps_ring_shm_wait_fn *wait, void *arg, ps_error_t *err);

//  Where a waiting member stands, for messages: "pass P of Q, K of N
//  members at the barrier".
void ps_ring_shm_describe (const ps_ring_shm_t *self, char *buf, size_t size);

#endif
