//  One stripe of a sparse table shard (ps_sparse.h): its rows in slabs,
//  the index from ids to rows, the free list of evicted rows' slots, the
//  admission filter and the ids of the last full snapshot's rows evicted
//  since, with the rules that create, update and evict its rows. The table
//  (ps_sparse.c) holds one per stripe, embedded, and the stripe's lock
//  around every call; nothing here locks. The rules and the memory
//  layout are described at the top of ps_sparse_stripe.c.

#ifndef PS_SPARSE_STRIPE_H_INCLUDED
#define PS_SPARSE_STRIPE_H_INCLUDED

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"
#include "ps_slabs.h"
#include "ps_sparse.h"
#include "ps_sparse_file.h"
#include "ps_tablespec.h"

//  What every stripe of a table shares: the spec and the sizes derived
//  from it.
typedef struct {
    ps_tablespec_t spec;
    uint32_t nslots;            //  slot floats per element
    size_t stride;              //  bytes of a row in a slab
    size_t value_end;           //  bytes of a row up to its value's end
    uint32_t chunk_k;           //  slab k holds 16 << min (k, K) rows
    uint32_t sketch_width;      //  admission counters per sketch row; 0: none
    ps_slabs_t *slabs;          //  where every stripe's slabs come from
} ps_sparse_layout_t;

//  Derive the layout of a valid spec, its slabs to come from slabs (which
//  outlive every stripe of the layout).
void ps_sparse_layout_init (ps_sparse_layout_t *layout, const ps_tablespec_t *spec,
                            ps_slabs_t *slabs);

typedef struct {
    pthread_mutex_t lock;       //  taken by the table, never here
    uint32_t *index;            //  mask + 1 entries: fingerprint | slot + 1, or 0
    uint32_t mask;
    uint32_t slot_mask;         //  an entry's bits for slot + 1
    uint32_t rows;              //  live rows
    uint32_t used;              //  slots ever handed out
    uint32_t capacity;          //  slots in the slabs allocated
    uint32_t free_head;         //  a freed slot, or UINT32_MAX
    uint8_t **chunks;           //  the slabs
    uint32_t nchunks, chunks_cap;
    uint8_t *sketch;            //  DEPTH x sketch_width counters, or NULL
    uint64_t *evicted;          //  ids of the full snapshot's rows evicted since
    size_t nevicted, evicted_cap, evicted_clean;
    uint64_t last_sweep;        //  the step of the last TTL sweep
    uint64_t created, evictions, dropped, row_updates;
    uint64_t oom;               //  admitted ids whose row could not be allocated
    uint64_t bytes;             //  memory held: slabs, index, sketch, evicted list
} ps_sparse_stripe_t;

//  An empty stripe, with its admission filter when the layout has one.
//  Returns 0, or PS_ETOOBIG when the filter cannot be had; either way
//  ps_sparse_stripe_fini releases what the stripe holds.
int ps_sparse_stripe_init (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout);
void ps_sparse_stripe_fini (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout);

//  A stripe's ids of a request, in the order they are used: for k in
//  [0, n), id ids [order [k]], whose ps_sparse_hash is hashes [order [k]].
//  Its ids are distinct.
typedef struct {
    const uint64_t *ids;
    const uint64_t *hashes;
    const uint16_t *order;
    uint32_t n;
} ps_sparse_group_t;

//  For each id i = order [k] of the group, set found [i] to whether it
//  has a row, and copy the row's value to out [i * dim, (i + 1) * dim)
//  when it has one and out is not NULL.
void ps_sparse_stripe_read (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout,
                            const ps_sparse_group_t *group, float *out, bool *found);

//  Apply each id i's gradient grads [i * dim, (i + 1) * dim) to its row
//  for step, creating the row when admission lets it in, else dropping
//  the gradient; counted in result.
void ps_sparse_stripe_push (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout,
                            const ps_sparse_group_t *group, const float *grads, uint64_t step,
                            ps_sparse_push_result_t *result);

//  Evict what the TTL and stripe s's share of the capacity ask for, now
//  being the newest step the table has applied. Returns the rows evicted.
size_t ps_sparse_stripe_evict (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout,
                               uint32_t s, uint64_t now);

//  Write the stripe's file section (schemas/checkpoint.md) into *buf,
//  grown as needed (*cap bytes): every row when full, and the marks
//  started again; else the rows changed since the last full snapshot and
//  the ids of its rows evicted since. Returns its length, or 0 with errno set when *buf cannot
//  grow.
size_t ps_sparse_stripe_copy (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout,
                              bool full, uint8_t **buf, size_t *cap);

//  Fill an empty stripe s from its sections of a verified full file and,
//  when incr is not NULL, the incremental file that follows it, newest
//  being the newest step of the last of them. Returns 0, or PS_ECORRUPT
//  or PS_ETOOBIG naming the file.
int ps_sparse_stripe_restore (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout,
                              uint32_t s, const ps_sparse_file_t *full,
                              const ps_sparse_file_t *incr, uint64_t newest, ps_error_t *err);

//  True when stripe s of two tables of the same layout differs in its
//  rows (counters, value, slots), admission counters or last sweep; buf
//  receives the first difference.
bool ps_sparse_stripe_differs (const ps_sparse_stripe_t *self, const ps_sparse_stripe_t *other,
                               const ps_sparse_layout_t *layout, uint32_t s, char *buf,
                               size_t len);

#endif
