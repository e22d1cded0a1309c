//  A sparse embedding table: one server's shard of a table whose rows are
//  keyed by 64-bit ids and created on first touch (ps_tablespec.h says
//  what a table is and which shard holds an id).
//
//  Rows live in slabs, each row's value and its optimizer slots side by
//  side with its bookkeeping (id, step of its last update, update count,
//  Adam's per-row step), so that a row and its slots are always read,
//  updated, snapshotted and evicted together: a snapshot can never hold a
//  value from one moment and its slots from another. An open-addressing
//  index maps ids to rows. The table is split into stripes by id hash,
//  each with its own lock, index and slabs, so that pushes from the
//  server's pool threads update different stripes at once and a stripe
//  that grows never moves rows another thread is reading.
//
//  A pull never creates a row: an id without one reads its initial value
//  (ps_tablespec_init_row), so evaluation and prediction cannot grow the
//  table. A push creates the rows its ids earn (admission), applies the
//  per-row optimizer to each, and records its step in the table's ledger:
//  a step is applied at most once, as for dense partitions. Eviction
//  (capacity, TTL) runs as pushes create rows and frees the rows'
//  memory for reuse.
//
//  Snapshots are full (every row) or incremental (the rows created or
//  updated since the last full snapshot, and the ids of its rows evicted
//  since, so that what a shard keeps for the next one is bounded by the
//  full snapshot however many new ids come and go), each with
//  the admission counters and the ledger, so that a full snapshot and the
//  newest incremental after it restore the table exactly. The file format
//  is in schemas/checkpoint.md.

#ifndef PS_SPARSE_H_INCLUDED
#define PS_SPARSE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"
#include "ps_mix.h"
#include "ps_tablespec.h"

typedef struct _ps_sparse_t ps_sparse_t;

//  The stripes: a shard is cut into PS_SPARSE_STRIPES stripes by the top
//  bits of ps_sparse_hash (id), a hash independent of
//  ps_tablespec_shard_of's, so that the ids one server holds still spread
//  over all its stripes. Capacity eviction and the admission filter work
//  per stripe (the rules are at the top of ps_sparse_stripe.c and in
//  schemas/checkpoint.md); tests that model them and readers of the file
//  format use these.
#define PS_SPARSE_STRIPES  64

static inline uint64_t
ps_sparse_hash (uint64_t id)
{
    return ps_mix64 (ps_mix64 (id) ^ 0x5851f42d4c957f2dULL);
}

static inline uint32_t
ps_sparse_stripe_of (uint64_t id)
{
    return (uint32_t) (ps_sparse_hash (id) >> 58);
}

//  The share of a shard's capacity that stripe s holds: capacity / 64, and
//  one more for the first capacity % 64 stripes (0: no limit when capacity
//  is 0; a capacity below 64 leaves some stripes no room at all).
static inline uint64_t
ps_sparse_stripe_capacity (uint64_t capacity, uint32_t s)
{
    return capacity / PS_SPARSE_STRIPES + (s < capacity % PS_SPARSE_STRIPES ? 1 : 0);
}

//  An empty shard of the table spec describes (validated here). NULL with
//  err set when the spec is invalid.
ps_sparse_t *ps_sparse_new (const ps_tablespec_t *spec, ps_error_t *err);
void ps_sparse_destroy (ps_sparse_t **self_p);

const ps_tablespec_t *ps_sparse_spec (ps_sparse_t *self);

//  Copy the rows of ids[0..n) into out[0..n * dim): a row's current value,
//  or the initial value of an id that has none. Creates nothing, counts
//  nothing but the lookups. Safe to call from several threads at once and
//  beside pushes.
void ps_sparse_pull (ps_sparse_t *self, const uint64_t *ids, size_t n, float *out);

//  Check, before a push changes anything, that step can be recorded (as
//  ps_ledger_reserve does) and that ids[0..n) holds no id twice (the worker
//  sums a batch's duplicates before pushing). Returns 0, PS_DUPLICATE when
//  the step was applied already, PS_EINVAL naming the repeated id or the
//  step out of the ledger's window.
int ps_sparse_check_push (ps_sparse_t *self, uint64_t step, const uint64_t *ids, size_t n,
                          ps_error_t *err);

//  What one push did, for the reply and the counters.
typedef struct {
    size_t applied;             //  rows updated (created ones included)
    size_t created;             //  rows this push created
    size_t dropped;             //  ids not admitted: their gradient dropped
    size_t evicted;             //  rows evicted to make room or by TTL
    size_t oom;                 //  ids admitted whose row could not be allocated:
                                //  their gradient lost
} ps_sparse_push_result_t;

//  Apply grads[0..n * dim) to the rows of ids[0..n) for step: record the
//  step, create the rows that admission lets in, apply the optimizer to
//  each row, then evict what capacity and the TTL ask for. Returns 0, or
//  PS_DUPLICATE (nothing applied) when the step was applied before; the
//  caller ran ps_sparse_check_push and scanned grads for NaN first (a
//  step check_push would refuse returns its code, nothing applied). Safe
//  beside other pushes and pulls; pushes of different steps to the same
//  row are applied one after the other. An id whose row cannot be
//  allocated (out of memory) loses its gradient and is counted in oom,
//  apart from those not admitted; the first time, the table logs it.
int ps_sparse_push (ps_sparse_t *self, uint64_t step, const uint64_t *ids, size_t n,
                    const float *grads, ps_sparse_push_result_t *result);

//  Counters since the table was created or restored.
typedef struct {
    uint64_t rows;              //  live rows now
    uint64_t created;           //  rows created (admitted)
    uint64_t evicted;           //  rows evicted
    uint64_t dropped;           //  id gradients dropped before admission
    uint64_t oom;               //  id gradients lost: their row could not be allocated
    uint64_t pushes;            //  pushes applied
    uint64_t duplicates;        //  pushes refused as repeats
    uint64_t row_updates;       //  row updates applied
    uint64_t pulls;             //  ids looked up
    uint64_t bytes;             //  memory the table holds (slabs, indexes, filters)
} ps_sparse_stats_t;

void ps_sparse_stats (ps_sparse_t *self, ps_sparse_stats_t *stats);

//  The most bytes one row created by a push adds to the table (its slot in
//  a slab and its share of the index), for a memory budget's worst case.
size_t ps_sparse_row_bytes (ps_sparse_t *self);

//  How many of ids[0..n) have no row now: the rows a push of them could
//  create at most, were nothing else pushed meanwhile.
size_t ps_sparse_count_absent (ps_sparse_t *self, const uint64_t *ids, size_t n);

//  The number of distinct steps the table has applied (its ledger's
//  count): what the done record reports per table.
uint64_t ps_sparse_steps_applied (ps_sparse_t *self);

//  Write the shard to path (crash-safe: a temporary file renamed over it):
//  every row when full is true, and the table then counts rows changed
//  from here on; else the rows created or updated since the last full
//  snapshot and the ids of its rows evicted since. Rows and their slots are read under their
//  stripe's lock, so each row is one consistent state; pushes wait only
//  while their stripe is copied. The ledger is copied first: for a file
//  whose rows hold exactly the steps its ledger does, no push may run
//  during the save. The ps-server sees to that: it serves a snapshot on
//  its serving thread, the only one that starts jobs, once every job in
//  its pool is finished (ps_server.c, s_drain_pool). Returns 0,
//  PS_EIO naming the file, or PS_EINVAL for an incremental save with no
//  full one before it. A full save that fails leaves the table with no
//  full snapshot to be incremental to (the stripes it copied have lost
//  their marks): the next save must be full.
int ps_sparse_save (ps_sparse_t *self, const char *path, bool full, ps_error_t *err);

//  Load a shard from the full snapshot at full_path and, when incr_path
//  is not NULL, the incremental one written after it (checked to belong to
//  that full snapshot). Every file is verified (magic, version, lengths,
//  checksum) before anything is built. NULL with err naming the file:
//  PS_ENOTFOUND, PS_ECORRUPT, PS_EVERSION, or PS_EINVAL when the
//  incremental snapshot belongs to another full one.
ps_sparse_t *ps_sparse_load (const char *full_path, const char *incr_path, ps_error_t *err);

//  True when a and b hold the same spec, rows (value, slots and per-row
//  counters, bit for bit), admission counters and ledger; buf (may be
//  NULL) receives the first difference. What tests and a restore check
//  use.
bool ps_sparse_differs (ps_sparse_t *a, ps_sparse_t *b, char *buf, size_t len);

#endif
