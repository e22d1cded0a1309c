//  The schedule of a ring collective: which bytes of the vector each of a
//  member's send and receive rounds moves, and what the wire calls each
//  round. ps_ring.c runs every collective by it (its comment "The
//  schedule" says why the rounds are these); this is the arithmetic
//  alone, with no sockets and no state but the collective's shape, so
//  that each member computes its own part and all members agree.

#ifndef PS_RING_SCHEDULE_H_INCLUDED
#define PS_RING_SCHEDULE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    bool broadcast;             //  else an all-reduce of floats
    size_t total;               //  bytes of the vector
    int n, rank;                //  the ring's size and this member's place
    int root;                   //  of a broadcast
    int send_rounds, recv_rounds;
    int free_rounds;            //  send rounds that wait for no receive round
} ps_ring_schedule_t;

//  The schedule of member rank of n (n >= 2) in an all-reduce of total
//  bytes of floats: reduce-scatter, then all-gather, n - 1 rounds each.
ps_ring_schedule_t ps_ring_schedule_allreduce (size_t total, int n, int rank);

//  The schedule of member rank of n (n >= 2) in a broadcast of total bytes
//  from member root: the root only sends, the member before it only
//  receives, and the others forward each chunk as soon as it has come.
ps_ring_schedule_t ps_ring_schedule_broadcast (size_t total, int n, int rank, int root);

//  The bytes [*begin, *begin + *len) that send round `round` moves
//  (sending), or receive round `round`, which is the predecessor's send
//  round of that number.
void ps_ring_schedule_range (const ps_ring_schedule_t *self, bool sending, int round,
                             size_t *begin, size_t *len);

//  The bytes [*begin, *begin + *len) of segment s (0 .. n - 1) of an
//  all-reduce of total bytes of floats among n members: the range whose
//  sum starts at member s and runs along the ring from there.
void ps_ring_schedule_segment (size_t total, int n, int s, size_t *begin, size_t *len);

//  A round's kind on the wire (PS_RING_KIND_*, ps_ring_transport.h) and
//  its number within that kind.
void ps_ring_schedule_round_kind (const ps_ring_schedule_t *self, int round, unsigned *kind,
                                  unsigned *within);

#endif
