//  A batch's ids of one embedding table, split over the servers that hold
//  the table's shards: the worker's side of the hash sharding that
//  ps_tablespec_shard_of defines.
//
//  Given the batch's unique ids of a table (the worker sums the gradients
//  of a repeated id first) and the server count, it gives each server the
//  list of its ids, in the order they came, and keeps the inverse map, so
//  that the rows each server returns are put back in the batch's order
//  (ps_idsplit_gather) and the batch's gradients are cut into the
//  per-server frames of a push (ps_idsplit_scatter). A split is reused
//  from batch to batch: its arrays grow to the largest batch and stay.
//  Every id goes to exactly one server, the one ps-server checks it
//  against, so no key is lost or held twice however the ids fall.

#ifndef PS_IDSPLIT_H_INCLUDED
#define PS_IDSPLIT_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_tablespec.h"

typedef struct _ps_idsplit_t ps_idsplit_t;

//  A split over nshards servers (>= 1) by the table's shard_seed.
ps_idsplit_t *ps_idsplit_new (uint32_t nshards, uint64_t shard_seed);
void ps_idsplit_destroy (ps_idsplit_t **self_p);

//  Split ids[0..n) over the servers, replacing the split before.
void ps_idsplit_split (ps_idsplit_t *self, const uint64_t *ids, size_t n);

//  Server shard's ids, in batch order, and their count: what its pull or
//  push entry carries. Valid until the next split.
const uint64_t *ps_idsplit_ids (ps_idsplit_t *self, uint32_t shard, size_t *count);

//  Put the rows the servers returned back in batch order: rows [s] holds
//  server s's rows (count of s times dim floats, in the order of
//  ps_idsplit_ids), out receives n * dim floats.
void ps_idsplit_gather (ps_idsplit_t *self, const float *const *rows, uint32_t dim,
                        float *out);

//  The reverse: cut the batch's gradients grads[0..n * dim) into each
//  server's rows, out [s] receiving count of s times dim floats.
void ps_idsplit_scatter (ps_idsplit_t *self, const float *grads, uint32_t dim,
                         float *const *out);

#endif
