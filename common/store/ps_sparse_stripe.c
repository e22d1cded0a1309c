//  One stripe of a sparse table shard; see ps_sparse_stripe.h.
//
//  This file is over 800 lines and kept whole: it is one concept, a
//  stripe's rows, and its parts (the index, the slabs and free list, the
//  admission sketch, eviction, and reading and writing the stripe's
//  section of a table file) all work on the same private row layout,
//  which a split would have to publish in a header.
//
//  Layout. A stripe has an index and slabs. A row is a slot of a slab:
//  id, last-update step, update count (also Adam's per-row t), then value
//  [dim] and slots [dim * nslots], padded to 8 bytes. Slabs ("chunks")
//  are allocated as the stripe grows, from the table's huge-page regions
//  (ps_slabs.h), and never moved or freed before the table is: chunk k
//  holds 16 << min (k, K) rows, K chosen so that a chunk, with the two
//  bitmaps of its rows' marks that start it (dirty, then in base; see
//  Snapshots below), stays within PS_SLABS_MAX (256 KiB). The index
//  is open addressing with linear probing, placed by the low bits of
//  ps_sparse_hash (id), doubled when it would pass a load of 3/4, and
//  emptied by backward shifting, so it never holds tombstones; its memory
//  is a block of the table's (ps_slabs_block: from 64 KiB on, on huge
//  pages, since every lookup starts with a random read of it). An entry
//  (0: empty) is 32 bits: slot + 1 in its low bits, as many as the slabs'
//  slots need (slot_mask), and in the bits above them the same bits of
//  the id's hash shifted down 26 (below the stripe's bits), a fingerprint:
//  a probe reads a row only when its fingerprint matches, so a probe run
//  past other ids costs no cache miss for each. When the slabs outgrow
//  slot_mask, every entry gives up its lowest fingerprint bit. An evicted row's slot goes on a free list and is the
//  next one used: eviction bounds memory.
//
//  Admission. With admit_count >= 2 or admit_prob < 1 each stripe has a
//  count-min sketch, PS_SPARSE_SKETCH_DEPTH rows of byte counters that
//  saturate at 255, row r of id counting at ps_mix_draw (hash, r) mod its
//  width. A push to an id without a row adds one to its counters; its
//  count is the smallest of them, and the row is created when
//  count >= admit_count and, with admit_prob < 1, when
//  (ps_mix_draw (ps_mix64 (shard_seed) ^ ps_mix64 (id + 1), count) >> 11) * 2^-53
//  < admit_prob. Counters are not decayed or reset, so an evicted id that
//  was admitted once comes back on its next push. The width per stripe is
//  the smallest power of two from 64 with 64 * width >= 2 * capacity, at
//  most 2^16 (16 MiB per shard), and 2^14 without a capacity (4 MiB).
//
//  Eviction. After a push has applied its rows, every stripe that holds
//  one of its ids (created, updated or dropped), with N the newest step
//  the table had applied when the push was recorded:
//    TTL: when N >= last_sweep + max (1, ttl / 8), every row with
//         N - last_step > ttl goes, and last_sweep = N. A row thus
//         outlives its TTL by at most ttl / 8 steps, or until a push
//         touches its stripe.
//    capacity: when the stripe holds more than its share (see
//         ps_sparse_stripe_capacity), rows go, first in policy order,
//         until it holds cap - cap / 16: LRU by (last_step, id), LFU by
//         (count, last_step, id). They are chosen by a selection over the
//         stripe's rows, so each created row costs O(16) amortized.
//  last_step is the highest step that updated the row: a late push of an
//  old step does not make a row look older.
//
//  Snapshots. A row created or updated since the last full snapshot is
//  marked dirty. A row whose id the last full snapshot holds is marked in
//  base: a full save marks every row it writes and a restore every row
//  it reads from the full file, and a created row starts unmarked. Each
//  stripe lists the ids of the rows in base that it evicted, which the
//  next incremental snapshot must name; a row created after the full
//  snapshot and evicted before the next one is not listed, since the full
//  file does not hold it. The list is kept sorted and unique by
//  compaction, which also takes out the ids that have a row again and
//  marks those rows in base (the full file holds their id), so that a
//  second eviction lists them again. Every listed id is thus one of the
//  full snapshot's rows, and the list holds at most as many ids as the
//  full snapshot has rows, however many new ids the table churns through
//  (at most about twice that between compactions); before the first full
//  snapshot no row is in base and nothing is listed. A full save clears
//  the dirty marks and the list as it copies the stripe.

#include "ps_bytes.h"
#include "ps_mix.h"
#include "ps_rowopt.h"
#include "ps_sparse_stripe.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_FIRST_CHUNK_ROWS 16
#define S_NO_SLOT          UINT32_MAX
//  An index entry's slot bits at first: enough for the first slab, so that
//  a small stripe keeps a long fingerprint (and every table that grows
//  past a slab widens its entries, which the tests thus exercise).
#define S_FIRST_SLOT_MASK  UINT32_C (0x1f)

typedef struct {
    uint64_t id;
    uint64_t last_step;         //  on the free list: the next free slot
    uint64_t count;
    float data [];              //  value [dim], then slots [nslots * dim]
} s_row_t;

//  --------------------------------------------------------------------
//  Chunks and rows

static uint32_t
s_chunk_rows (const ps_sparse_layout_t *lay, uint32_t k)
{
    return S_FIRST_CHUNK_ROWS << (k < lay->chunk_k ? k : lay->chunk_k);
}

static size_t
s_bitmap_bytes (uint32_t rows)
{
    return (rows + 63) / 64 * 8;
}

//  A row's marks, each a bitmap at the start of its chunk, in this order.
typedef enum {
    S_DIRTY,                    //  created or updated since the full snapshot
    S_IN_BASE,                  //  its id is in the full snapshot
    S_MARKS
} s_mark_t;

static size_t
s_marks_bytes (uint32_t rows)
{
    return S_MARKS * s_bitmap_bytes (rows);
}

//  The chunk and offset of a slot: chunks 0..K double from 16 rows, the
//  rest all hold 16 << K.
static inline void
s_locate (const ps_sparse_layout_t *lay, uint32_t slot, uint32_t *k, uint32_t *offset)
{
    uint32_t geometric = S_FIRST_CHUNK_ROWS * ((UINT32_C (2) << lay->chunk_k) - 1);
    if (slot < geometric) {
        *k = (uint32_t) (63 - __builtin_clzll (slot / S_FIRST_CHUNK_ROWS + 1));
        *offset = slot - S_FIRST_CHUNK_ROWS * ((UINT32_C (1) << *k) - 1);
    }
    else {
        //  The big chunks hold a power of two rows: shifts, not divisions.
        uint32_t shift = (uint32_t) __builtin_ctz (S_FIRST_CHUNK_ROWS) + lay->chunk_k;
        *k = lay->chunk_k + 1 + ((slot - geometric) >> shift);
        *offset = (slot - geometric) & ((UINT32_C (1) << shift) - 1);
    }
}

static inline s_row_t *
s_row (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st, uint32_t slot)
{
    uint32_t k, offset;
    s_locate (lay, slot, &k, &offset);
    return (s_row_t *) (st->chunks [k] + s_marks_bytes (s_chunk_rows (lay, k))
                        + (size_t) offset * lay->stride);
}

//  The word of a chunk's bitmap that holds a slot's mark, and its bit.
static uint64_t *
s_mark_word (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st, uint32_t slot,
             s_mark_t mark, uint64_t *bit)
{
    uint32_t k, offset;
    s_locate (lay, slot, &k, &offset);
    *bit = UINT64_C (1) << (offset % 64);
    uint8_t *bitmap = st->chunks [k] + mark * s_bitmap_bytes (s_chunk_rows (lay, k));
    return (uint64_t *) bitmap + offset / 64;
}

static void
s_set_mark (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, uint32_t slot,
            s_mark_t mark, bool on)
{
    uint64_t bit;
    uint64_t *word = s_mark_word (lay, st, slot, mark, &bit);
    if (on)
        *word |= bit;
    else
        *word &= ~bit;
}

static bool
s_marked (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st, uint32_t slot,
          s_mark_t mark)
{
    uint64_t bit;
    return (*s_mark_word (lay, st, slot, mark, &bit) & bit) != 0;
}

//  The slot an index entry names.
static inline uint32_t
s_entry_slot (const ps_sparse_stripe_t *st, uint32_t entry)
{
    return (entry & st->slot_mask) - 1;
}

//  The fingerprint bits of an entry for an id with this hash.
static inline uint32_t
s_entry_fingerprint (const ps_sparse_stripe_t *st, uint64_t hash)
{
    return (uint32_t) (hash >> 26) & ~st->slot_mask;
}

//  Widen the entries' slot bits until they hold capacity slots + 1, each
//  entry's lowest fingerprint bit giving way (the rest stay the hash's).
static void
s_entry_widen (ps_sparse_stripe_t *st, uint32_t capacity)
{
    while (capacity > st->slot_mask) {
        uint32_t mask = st->slot_mask << 1 | 1;
        uint32_t bit = mask & ~st->slot_mask;
        for (uint64_t pos = 0; st->index && pos <= st->mask; pos++)
            st->index [pos] &= ~bit;
        st->slot_mask = mask;
    }
}

//  A free slot: a freed one, or the next of the chunks (a new chunk when
//  they are full). S_NO_SLOT when memory cannot be had.
static uint32_t
s_slot_alloc (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st)
{
    if (st->free_head != S_NO_SLOT) {
        uint32_t slot = st->free_head;
        st->free_head = (uint32_t) s_row (lay, st, slot)->last_step;
        return slot;
    }
    if (st->used == st->capacity) {
        uint32_t rows = s_chunk_rows (lay, st->nchunks);
        if ((uint64_t) st->capacity + rows >= S_NO_SLOT)
            return S_NO_SLOT;
        if (st->nchunks == st->chunks_cap) {
            uint32_t cap = st->chunks_cap ? 2 * st->chunks_cap : 8;
            uint8_t **chunks = realloc (st->chunks, cap * sizeof *chunks);
            if (!chunks)
                return S_NO_SLOT;
            st->bytes += (cap - st->chunks_cap) * sizeof *chunks;
            st->chunks = chunks;
            st->chunks_cap = cap;
        }
        size_t bytes = s_marks_bytes (rows) + (size_t) rows * lay->stride;
        uint8_t *chunk = ps_slabs_alloc (lay->slabs, bytes);
        if (!chunk)
            return S_NO_SLOT;
        st->chunks [st->nchunks++] = chunk;
        st->capacity += rows;
        st->bytes += bytes;
        s_entry_widen (st, st->capacity);
    }
    return st->used++;
}

//  --------------------------------------------------------------------
//  The index

//  The position of id's entry, or of the empty entry where it would go.
static uint32_t
s_probe (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st, uint64_t id, uint64_t hash,
         s_row_t **row)
{
    uint32_t pos = (uint32_t) hash & st->mask;
    uint32_t fingerprint = s_entry_fingerprint (st, hash);
    *row = NULL;
    for (uint32_t entry; (entry = st->index [pos]); pos = (pos + 1) & st->mask)
        if ((entry & ~st->slot_mask) == fingerprint) {
            s_row_t *candidate = s_row (lay, st, s_entry_slot (st, entry));
            if (candidate->id == id) {
                *row = candidate;
                break;
            }
        }
    return pos;
}

//  The slot of id's row, or S_NO_SLOT.
static uint32_t
s_find (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st, uint64_t id, uint64_t hash)
{
    if (!st->index)
        return S_NO_SLOT;
    s_row_t *row;
    uint32_t pos = s_probe (lay, st, id, hash, &row);
    return row ? s_entry_slot (st, st->index [pos]) : S_NO_SLOT;
}

//  Make room in the index for one more row, doubling it (or creating it)
//  when it would pass a load of 3/4.
static int
s_index_reserve (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st)
{
    uint64_t size = st->index ? (uint64_t) st->mask + 1 : 0;
    if (4 * ((uint64_t) st->rows + 1) <= 3 * size)
        return PS_OK;
    uint64_t grown = size ? 2 * size : 16;
    if (grown > (UINT64_C (1) << 32))
        return PS_ETOOBIG;
    uint32_t *index = ps_slabs_block (lay->slabs, (size_t) grown * sizeof *index);
    if (!index)
        return PS_ETOOBIG;
    uint32_t mask = (uint32_t) (grown - 1);
    for (uint64_t i = 0; i < size; i++) {
        uint32_t entry = st->index [i];
        if (!entry)
            continue;
        uint32_t pos = (uint32_t) ps_sparse_hash (s_row (lay, st, s_entry_slot (st, entry))->id)
                     & mask;
        while (index [pos])
            pos = (pos + 1) & mask;
        index [pos] = entry;
    }
    ps_slabs_block_free (lay->slabs, st->index, (size_t) size * sizeof *index);
    st->bytes += (grown - size) * sizeof *index;
    st->index = index;
    st->mask = mask;
    return PS_OK;
}

//  Empty the index entry at pos, shifting back the entries of the probe
//  run after it that may move closer to their home.
static void
s_index_remove_at (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, uint32_t pos)
{
    uint32_t hole = pos;
    uint32_t j = pos;
    for (;;) {
        j = (j + 1) & st->mask;
        uint32_t entry = st->index [j];
        if (!entry)
            break;
        uint32_t home = (uint32_t) ps_sparse_hash (s_row (lay, st, s_entry_slot (st, entry))->id)
                      & st->mask;
        //  The entry stays when its home lies cyclically in (hole, j].
        bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            st->index [hole] = entry;
            hole = j;
        }
    }
    st->index [hole] = 0;
}

//  --------------------------------------------------------------------
//  Rows created, evicted

//  A new row for id, its id set, its marks clear and nothing else: its
//  slot, or S_NO_SLOT when memory cannot be had.
static uint32_t
s_insert (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, uint64_t id, uint64_t hash)
{
    if (s_index_reserve (lay, st))
        return S_NO_SLOT;
    uint32_t slot = s_slot_alloc (lay, st);
    if (slot == S_NO_SLOT)
        return S_NO_SLOT;
    s_row_t *row;
    uint32_t pos = s_probe (lay, st, id, hash, &row);
    st->index [pos] = s_entry_fingerprint (st, hash) | (slot + 1);
    st->rows++;
    s_row (lay, st, slot)->id = id;
    s_set_mark (lay, st, slot, S_DIRTY, false);
    s_set_mark (lay, st, slot, S_IN_BASE, false);
    return slot;
}

//  As s_insert, the row in its initial state.
static uint32_t
s_create (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, uint64_t id, uint64_t hash)
{
    uint32_t slot = s_insert (lay, st, id, hash);
    if (slot == S_NO_SLOT)
        return S_NO_SLOT;
    s_row_t *row = s_row (lay, st, slot);
    row->last_step = 0;
    row->count = 0;
    ps_tablespec_init_row (&lay->spec, id, row->data);
    ps_rowopt_init_slots (&lay->spec.opt, row->data + lay->spec.dim, lay->spec.dim);
    st->created++;
    return slot;
}

static int
s_cmp_u64 (const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

//  Sort the evicted list and drop repeats and the ids that have a row
//  again, marking those rows in base: a listed id is in the full snapshot.
static void
s_evicted_compact (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st)
{
    //  An empty list may have no array, which qsort must not be given.
    if (!st->nevicted)
        return;
    qsort (st->evicted, st->nevicted, sizeof (uint64_t), s_cmp_u64);
    size_t kept = 0;
    for (size_t i = 0; i < st->nevicted; i++) {
        uint64_t id = st->evicted [i];
        if (kept && st->evicted [kept - 1] == id)
            continue;
        uint32_t slot = s_find (lay, st, id, ps_sparse_hash (id));
        if (slot != S_NO_SLOT) {
            s_set_mark (lay, st, slot, S_IN_BASE, true);
            continue;
        }
        st->evicted [kept++] = id;
    }
    st->nevicted = kept;
    st->evicted_clean = kept;
}

//  Make room to list more evicted ids, compacting when the list has
//  doubled since its last compaction. Without the room nothing may be
//  evicted: an incremental snapshot would miss the eviction.
static int
s_evicted_reserve (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, size_t more)
{
    if (st->nevicted > 2 * st->evicted_clean + 64)
        s_evicted_compact (lay, st);
    if (st->nevicted + more <= st->evicted_cap)
        return PS_OK;
    size_t cap = 2 * (st->nevicted + more);
    uint64_t *evicted = realloc (st->evicted, cap * sizeof *evicted);
    if (!evicted)
        return PS_ETOOBIG;
    st->bytes += (cap - st->evicted_cap) * sizeof *evicted;
    st->evicted = evicted;
    st->evicted_cap = cap;
    return PS_OK;
}

//  True when the row in the slot an index entry names is in base: its
//  eviction must be listed.
static bool
s_entry_in_base (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st, uint32_t entry)
{
    return s_marked (lay, st, s_entry_slot (st, entry), S_IN_BASE);
}

//  True when the row in the slot an index entry names is dirty: an
//  incremental snapshot writes it.
static bool
s_entry_dirty (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st, uint32_t entry)
{
    return s_marked (lay, st, s_entry_slot (st, entry), S_DIRTY);
}

//  Evict the row whose index entry is at pos, listing its id when it is
//  in base; s_evicted_reserve made room to list it.
static void
s_evict_at (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, uint32_t pos)
{
    uint32_t slot = s_entry_slot (st, st->index [pos]);
    s_row_t *row = s_row (lay, st, slot);
    if (s_marked (lay, st, slot, S_IN_BASE))
        st->evicted [st->nevicted++] = row->id;
    s_index_remove_at (lay, st, pos);
    row->last_step = st->free_head;
    st->free_head = slot;
    st->rows--;
    st->evictions++;
}

//  The TTL sweep (see the top of this file).
static size_t
s_sweep (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, uint64_t now)
{
    uint64_t ttl = lay->spec.ttl;
    uint64_t interval = ttl / 8 ? ttl / 8 : 1;
    if (!ttl || now < st->last_sweep + interval)
        return 0;
    size_t expired = 0, listed = 0;
    for (uint64_t pos = 0; st->index && pos <= st->mask; pos++)
        if (st->index [pos]) {
            s_row_t *row = s_row (lay, st, s_entry_slot (st, st->index [pos]));
            bool old = row->last_step < now && now - row->last_step > ttl;
            expired += old;
            listed += old && s_entry_in_base (lay, st, st->index [pos]);
        }
    if (s_evicted_reserve (lay, st, listed))
        return 0;
    st->last_sweep = now;
    //  Each removal may shift a later entry into pos, which is looked at
    //  again; an entry shifted across the end of the array was looked at
    //  already and stays.
    size_t evicted = 0;
    for (uint64_t pos = 0; expired && pos <= st->mask; pos++)
        while (st->index [pos]) {
            s_row_t *row = s_row (lay, st, s_entry_slot (st, st->index [pos]));
            if (!(row->last_step < now && now - row->last_step > ttl))
                break;
            s_evict_at (lay, st, (uint32_t) pos);
            evicted++;
        }
    return evicted;
}

//  An eviction key: rows go in increasing order of (a, b, c).
typedef struct {
    uint64_t a, b, c;
    uint32_t pos;
} s_key_t;

static bool
s_less (const s_key_t *x, const s_key_t *y)
{
    if (x->a != y->a)
        return x->a < y->a;
    if (x->b != y->b)
        return x->b < y->b;
    return x->c < y->c;
}

static void
s_swap (s_key_t *x, s_key_t *y)
{
    s_key_t t = *x;
    *x = *y;
    *y = t;
}

//  Reorder keys [0, n) so that [0, k) are the k smallest (keys are
//  distinct: the id decides ties). Quickselect, median-of-three pivot.
static void
s_select (s_key_t *keys, size_t n, size_t k)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (s_less (&keys [mid], &keys [lo]))
            s_swap (&keys [mid], &keys [lo]);
        if (s_less (&keys [hi - 1], &keys [lo]))
            s_swap (&keys [hi - 1], &keys [lo]);
        if (s_less (&keys [mid], &keys [hi - 1]))
            s_swap (&keys [mid], &keys [hi - 1]);
        s_key_t pivot = keys [hi - 1];
        size_t store = lo;
        for (size_t i = lo; i < hi - 1; i++)
            if (s_less (&keys [i], &pivot))
                s_swap (&keys [i], &keys [store++]);
        s_swap (&keys [store], &keys [hi - 1]);
        if (store == k)
            return;
        if (k < store)
            hi = store;
        else
            lo = store + 1;
    }
}

//  Capacity eviction (see the top of this file).
static size_t
s_trim (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, uint32_t s)
{
    if (!lay->spec.capacity)
        return 0;
    uint64_t cap = ps_sparse_stripe_capacity (lay->spec.capacity, s);
    if (st->rows <= cap)
        return 0;
    size_t k = st->rows - (size_t) (cap - cap / 16);
    s_key_t *keys = malloc (st->rows * sizeof *keys);
    if (!keys)
        return 0;
    size_t n = 0;
    for (uint64_t pos = 0; pos <= st->mask; pos++)
        if (st->index [pos]) {
            const s_row_t *row = s_row (lay, st, s_entry_slot (st, st->index [pos]));
            s_key_t key = { row->last_step, row->id, 0, (uint32_t) pos };
            if (lay->spec.policy == PS_EVICT_LFU)
                key = (s_key_t) { row->count, row->last_step, row->id, (uint32_t) pos };
            keys [n++] = key;
        }
    s_select (keys, n, k);
    size_t listed = 0;
    for (size_t i = 0; i < k; i++)
        listed += s_entry_in_base (lay, st, st->index [keys [i].pos]);
    if (s_evicted_reserve (lay, st, listed)) {
        free (keys);
        return 0;
    }
    //  The victims are removed by id, since each removal may move others'
    //  index entries.
    for (size_t i = 0; i < k; i++) {
        uint64_t id = s_row (lay, st, s_entry_slot (st, st->index [keys [i].pos]))->id;
        keys [i].a = id;
    }
    for (size_t i = 0; i < k; i++) {
        s_row_t *row;
        uint32_t pos = s_probe (lay, st, keys [i].a, ps_sparse_hash (keys [i].a), &row);
        assert (row);
        s_evict_at (lay, st, pos);
    }
    free (keys);
    return k;
}

//  --------------------------------------------------------------------
//  Admission

//  Count a push to id, which has no row, and tell whether it earns one.
static bool
s_admit (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, uint64_t id, uint64_t hash)
{
    if (!st->sketch)
        return true;
    uint32_t width = lay->sketch_width;
    unsigned count = 255;
    for (uint32_t r = 0; r < PS_SPARSE_SKETCH_DEPTH; r++) {
        uint8_t *counter = st->sketch + (size_t) r * width + (ps_mix_draw (hash, r) & (width - 1));
        if (*counter < 255)
            (*counter)++;
        if (*counter < count)
            count = *counter;
    }
    if (count < lay->spec.admit_count)
        return false;
    if (lay->spec.admit_prob >= 1.0)
        return true;
    uint64_t key = ps_mix64 (lay->spec.shard_seed) ^ ps_mix64 (id + 1);
    double draw = (double) (ps_mix_draw (key, count) >> 11) * 0x1.0p-53;
    return draw < lay->spec.admit_prob;
}

//  The sketch's width per stripe (see the top of this file), 0 without one.
static uint32_t
s_sketch_width (const ps_tablespec_t *spec)
{
    if (spec->admit_count < 2 && spec->admit_prob >= 1.0)
        return 0;
    if (!spec->capacity)
        return UINT32_C (1) << 14;
    uint32_t width = 64;
    while (width < (UINT32_C (1) << 16)
       &&  (uint64_t) width * PS_SPARSE_STRIPES < 2 * spec->capacity)
        width *= 2;
    return width;
}

//  --------------------------------------------------------------------
//  The stripe

void
ps_sparse_layout_init (ps_sparse_layout_t *layout, const ps_tablespec_t *spec,
                       ps_slabs_t *slabs)
{
    memset (layout, 0, sizeof *layout);
    layout->spec = *spec;
    layout->nslots = (uint32_t) ps_rowopt_slot_count (spec->opt.kind);
    layout->stride = (sizeof (s_row_t) + 4 * (size_t) spec->dim * (1 + layout->nslots) + 7) / 8 * 8;
    layout->value_end = sizeof (s_row_t) + 4 * (size_t) spec->dim;
    //  Slabs grow while they fit a slab of the shared regions (ps_slabs.h).
    while (layout->chunk_k < 12
       &&  s_marks_bytes (S_FIRST_CHUNK_ROWS << (layout->chunk_k + 1))
           + ((size_t) S_FIRST_CHUNK_ROWS << (layout->chunk_k + 1)) * layout->stride
           <= PS_SLABS_MAX)
        layout->chunk_k++;
    layout->sketch_width = s_sketch_width (spec);
    layout->slabs = slabs;
}

int
ps_sparse_stripe_init (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout)
{
    memset (self, 0, sizeof *self);
    if (pthread_mutex_init (&self->lock, NULL) != 0)
        abort ();
    self->free_head = S_NO_SLOT;
    self->slot_mask = S_FIRST_SLOT_MASK;
    size_t sketch_bytes = (size_t) PS_SPARSE_SKETCH_DEPTH * layout->sketch_width;
    if (sketch_bytes) {
        self->sketch = calloc (1, sketch_bytes);
        if (!self->sketch)
            return PS_ETOOBIG;
        self->bytes += sketch_bytes;
    }
    return PS_OK;
}

void
ps_sparse_stripe_fini (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout)
{
    free (self->chunks);
    if (self->index)
        ps_slabs_block_free (layout->slabs, self->index,
                             ((size_t) self->mask + 1) * sizeof *self->index);
    free (self->sketch);
    free (self->evicted);
    pthread_mutex_destroy (&self->lock);
    memset (self, 0, sizeof *self);
}

//  A group's ids are used in a software pipeline: the index entry of the
//  id S_AHEAD * 2 on is loaded, then the row of the id S_AHEAD on (its
//  entry loaded S_AHEAD ids before), then the id itself is used. A table
//  several times larger than the caches would otherwise wait for two cache
//  misses per id one after the other, the entry then the row; this way
//  about 2 * S_AHEAD misses are in flight at any time, and the core waits
//  only for the first ids of a group.
#define S_AHEAD  8
#define S_RING   16             //  a power of two above S_AHEAD

static inline void
s_load_entry (const ps_sparse_stripe_t *st, uint64_t hash)
{
    __builtin_prefetch (&st->index [(uint32_t) hash & st->mask]);
}

//  A row and its slot (row NULL: none).
typedef struct {
    s_row_t *row;
    uint32_t slot;
} s_hit_t;

//  The row that the first entry of hash's probe run with its fingerprint
//  names, the bytes used loading (for writing when write), or none. It is
//  id's row only when its id is: a probe decides otherwise.
static inline s_hit_t
s_load_row (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st, uint64_t hash,
            size_t bytes, int write)
{
    //  The first entry of the probe run with the hash's fingerprint: the
    //  run is short and its entries mostly in the line loaded.
    uint32_t fingerprint = s_entry_fingerprint (st, hash);
    uint32_t pos = (uint32_t) hash & st->mask, entry;
    while ((entry = st->index [pos]) && (entry & ~st->slot_mask) != fingerprint)
        pos = (pos + 1) & st->mask;
    if (!entry)
        return (s_hit_t) { NULL, S_NO_SLOT };
    uint32_t slot = s_entry_slot (st, entry);
    const uint8_t *row = (const uint8_t *) s_row (lay, st, slot);
    //  Every line of the part used: rows are not aligned to lines.
    if (write) {
        for (size_t off = 0; off < bytes; off += 64)
            __builtin_prefetch (row + off, 1);
        __builtin_prefetch (row + bytes - 1, 1);
    }
    else {
        for (size_t off = 0; off < bytes; off += 64)
            __builtin_prefetch (row + off, 0);
        __builtin_prefetch (row + bytes - 1, 0);
    }
    return (s_hit_t) { (s_row_t *) row, slot };
}

//  Id's row, the pipeline's guess when it is id's, else found by a probe.
static inline s_hit_t
s_row_of (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st, s_hit_t guess,
          uint64_t id, uint64_t hash)
{
    if (guess.row && guess.row->id == id)
        return guess;
    uint32_t slot = s_find (lay, st, id, hash);
    return (s_hit_t) { slot == S_NO_SLOT ? NULL : s_row (lay, st, slot), slot };
}

//  Start the pipeline of a group: the entries of its first 2 * S_AHEAD
//  ids, then the rows of its first S_AHEAD, into guess. A stripe without
//  an index yet has nothing to load: its guesses stay none.
static void
s_pipeline_start (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st,
                  const ps_sparse_group_t *g, size_t bytes, int write, s_hit_t *guess)
{
    if (!st->index)
        return;
    for (uint32_t k = 0; k < g->n && k < 2 * S_AHEAD; k++)
        s_load_entry (st, g->hashes [g->order [k]]);
    for (uint32_t k = 0; k < g->n && k < S_AHEAD; k++)
        guess [k] = s_load_row (lay, st, g->hashes [g->order [k]], bytes, write);
}

//  Advance it before id k is used.
static inline void
s_pipeline_step (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st,
                 const ps_sparse_group_t *g, uint32_t k, size_t bytes, int write,
                 s_hit_t *guess)
{
    if (!st->index)
        return;
    if (k + 2 * S_AHEAD < g->n)
        s_load_entry (st, g->hashes [g->order [k + 2 * S_AHEAD]]);
    if (k + S_AHEAD < g->n)
        guess [(k + S_AHEAD) % S_RING] =
            s_load_row (lay, st, g->hashes [g->order [k + S_AHEAD]], bytes, write);
}

//  Copy a row's value: of a constant size for the common widths, a few
//  vector moves in line rather than a call to memcpy for every row.
static inline void
s_copy_value (float *restrict out, const float *restrict value, uint32_t dim)
{
    switch (dim) {
        case 8:
            memcpy (out, value, 8 * sizeof (float));
            break;
        case 16:
            memcpy (out, value, 16 * sizeof (float));
            break;
        case 32:
            memcpy (out, value, 32 * sizeof (float));
            break;
        default:
            memcpy (out, value, dim * sizeof (float));
            break;
    }
}

void
ps_sparse_stripe_read (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout,
                       const ps_sparse_group_t *group, float *out, bool *found)
{
    uint32_t dim = layout->spec.dim;
    size_t bytes = out ? layout->value_end : sizeof (uint64_t);
    s_hit_t guess [S_RING] = { { NULL, S_NO_SLOT } };
    s_pipeline_start (layout, self, group, bytes, 0, guess);
    for (uint32_t k = 0; k < group->n; k++) {
        s_pipeline_step (layout, self, group, k, bytes, 0, guess);
        uint32_t i = group->order [k];
        s_hit_t hit = s_row_of (layout, self, guess [k % S_RING], group->ids [i],
                                group->hashes [i]);
        found [i] = hit.row != NULL;
        if (hit.row && out)
            s_copy_value (out + (size_t) i * dim, hit.row->data, dim);
    }
}

//  Apply grad to id's row for step, creating the row when admission lets
//  it in, else dropping the gradient; counted in result.
static void
s_push_one (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, s_hit_t hit, uint64_t id,
            uint64_t hash, const float *grad, uint64_t step, ps_sparse_push_result_t *result)
{
    if (!hit.row) {
        if (!s_admit (lay, st, id, hash)) {
            st->dropped++;
            result->dropped++;
            return;
        }
        //  An admitted id whose row cannot be allocated loses an update:
        //  counted apart from admission's drops, so that it is seen.
        hit.slot = s_create (lay, st, id, hash);
        if (hit.slot == S_NO_SLOT) {
            st->oom++;
            result->oom++;
            return;
        }
        result->created++;
        hit.row = s_row (lay, st, hit.slot);
    }
    s_row_t *row = hit.row;
    row->count++;
    if (step > row->last_step)
        row->last_step = step;
    uint32_t dim = lay->spec.dim;
    ps_rowopt_apply (&lay->spec.opt, row->data, row->data + dim, grad, dim, row->count);
    s_set_mark (lay, st, hit.slot, S_DIRTY, true);
    st->row_updates++;
    result->applied++;
}

void
ps_sparse_stripe_push (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout,
                       const ps_sparse_group_t *group, const float *grads, uint64_t step,
                       ps_sparse_push_result_t *result)
{
    uint32_t dim = layout->spec.dim;
    s_hit_t guess [S_RING] = { { NULL, S_NO_SLOT } };
    s_pipeline_start (layout, self, group, layout->stride, 1, guess);
    for (uint32_t k = 0; k < group->n; k++) {
        //  A row created by this loop may have made or grown the index: the
        //  guesses made before stay right (rows do not move), a missing one
        //  is probed for.
        s_pipeline_step (layout, self, group, k, layout->stride, 1, guess);
        uint32_t i = group->order [k];
        uint64_t id = group->ids [i], hash = group->hashes [i];
        s_hit_t hit = s_row_of (layout, self, guess [k % S_RING], id, hash);
        s_push_one (layout, self, hit, id, hash, grads + (size_t) i * dim, step, result);
    }
}

size_t
ps_sparse_stripe_evict (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout,
                        uint32_t s, uint64_t now)
{
    size_t evicted = s_sweep (layout, self, now);
    return evicted + s_trim (layout, self, s);
}

size_t
ps_sparse_stripe_copy (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout,
                       bool full, uint8_t **buf, size_t *cap)
{
    size_t row_bytes = ps_sparse_file_row_bytes (&layout->spec);
    size_t sketch_bytes = (size_t) PS_SPARSE_SKETCH_DEPTH * layout->sketch_width;
    if (!full)
        s_evicted_compact (layout, self);
    size_t nevicted = full ? 0 : self->nevicted;
    size_t nrows = 0;
    for (uint64_t pos = 0; self->index && pos <= self->mask; pos++)
        nrows += self->index [pos]
              && (full || s_entry_dirty (layout, self, self->index [pos]));
    size_t len = PS_SPARSE_FILE_SECTION + sketch_bytes + 8 * nevicted + nrows * row_bytes;
    if (len > *cap) {
        uint8_t *grown = realloc (*buf, len);
        if (!grown) {
            errno = ENOMEM;
            return 0;
        }
        *buf = grown;
        *cap = len;
    }
    uint8_t *p = *buf;
    ps_put_u64 (p, self->last_sweep);
    ps_put_u64 (p + 8, nevicted);
    ps_put_u64 (p + 16, nrows);
    p += PS_SPARSE_FILE_SECTION;
    if (sketch_bytes)
        memcpy (p, self->sketch, sketch_bytes);
    p += sketch_bytes;
    for (size_t i = 0; i < nevicted; i++, p += 8)
        ps_put_u64 (p, self->evicted [i]);
    //  A full save starts the marks again: no row dirty, every row it
    //  writes in base, and no eviction to list.
    if (full) {
        for (uint32_t k = 0; k < self->nchunks; k++)
            memset (self->chunks [k], 0, s_marks_bytes (s_chunk_rows (layout, k)));
        self->nevicted = 0;
        self->evicted_clean = 0;
    }
    for (uint64_t pos = 0; self->index && pos <= self->mask; pos++) {
        uint32_t entry = self->index [pos];
        if (entry && (full || s_entry_dirty (layout, self, entry))) {
            memcpy (p, s_row (layout, self, s_entry_slot (self, entry)), row_bytes);
            p += row_bytes;
            if (full)
                s_set_mark (layout, self, s_entry_slot (self, entry), S_IN_BASE, true);
        }
    }
    return len;
}

//  --------------------------------------------------------------------
//  Restoring and comparing

//  Put the rows of a file's section of stripe s into it: new rows, marked
//  in base, or, for an incremental file, over the rows the full one had
//  (marked dirty, as they were when it was written; in base when the full
//  file held them). A row of another stripe, one the full
//  file holds twice, a row never updated or one updated after the newest
//  step are refused.
static int
s_load_rows (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, uint32_t s,
             const ps_sparse_file_t *file, uint64_t newest, ps_error_t *err)
{
    const ps_sparse_file_section_t *section = &file->sections [s];
    size_t row_bytes = ps_sparse_file_row_bytes (&lay->spec);
    bool incremental = !file->header.full;
    for (uint64_t i = 0; i < section->nrows; i++) {
        const uint8_t *src = section->rows + i * row_bytes;
        uint64_t id = ps_get_u64 (src);
        uint64_t last_step = ps_get_u64 (src + 8);
        uint64_t count = ps_get_u64 (src + 16);
        uint64_t hash = ps_sparse_hash (id);
        if (hash >> 58 != s)
            return ps_error_set (err, PS_ECORRUPT, "file %s: row %llu in stripe %u, expected "
                                 "stripe %u", file->path, (unsigned long long) id, s,
                                 (unsigned) (hash >> 58));
        if (count == 0 || last_step > newest)
            return ps_error_set (err, PS_ECORRUPT, "file %s: row %llu has %llu updates, the "
                                 "last at step %llu, expected at least one and none after "
                                 "step %llu", file->path, (unsigned long long) id,
                                 (unsigned long long) count, (unsigned long long) last_step,
                                 (unsigned long long) newest);
        //  A row of the full file is clean once loaded, and one of the
        //  incremental file dirty: a row found already in this file's
        //  state is there twice.
        uint32_t slot = s_find (lay, st, id, hash);
        if (slot != S_NO_SLOT && (!incremental || s_marked (lay, st, slot, S_DIRTY)))
            return ps_error_set (err, PS_ECORRUPT, "file %s: row %llu appears twice",
                                 file->path, (unsigned long long) id);
        if (slot == S_NO_SLOT)
            slot = s_insert (lay, st, id, hash);
        if (slot == S_NO_SLOT)
            return ps_error_set (err, PS_ETOOBIG, "file %s: cannot allocate row %llu",
                                 file->path, (unsigned long long) id);
        memcpy (s_row (lay, st, slot), src, row_bytes);
        s_set_mark (lay, st, slot, S_DIRTY, incremental);
        if (!incremental)
            s_set_mark (lay, st, slot, S_IN_BASE, true);
    }
    return PS_OK;
}

//  Apply an incremental file's evicted ids of stripe s: each row goes, and
//  each id is listed as evicted since the full snapshot, as it was.
static int
s_load_evicted (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, uint32_t s,
                const ps_sparse_file_t *file, ps_error_t *err)
{
    const ps_sparse_file_section_t *section = &file->sections [s];
    for (uint64_t i = 0; i < section->nevicted; i++) {
        uint64_t id = ps_get_u64 (section->evicted + 8 * i);
        uint64_t hash = ps_sparse_hash (id);
        if (hash >> 58 != s)
            return ps_error_set (err, PS_ECORRUPT, "file %s: evicted id %llu in stripe %u, "
                                 "expected stripe %u", file->path, (unsigned long long) id, s,
                                 (unsigned) (hash >> 58));
        if (s_evicted_reserve (lay, st, 1))
            return ps_error_set (err, PS_ETOOBIG, "file %s: cannot allocate the evicted ids",
                                 file->path);
        s_row_t *row = NULL;
        uint32_t pos = st->index ? s_probe (lay, st, id, hash, &row) : 0;
        if (row)
            s_evict_at (lay, st, pos);
        else
            st->evicted [st->nevicted++] = id;
    }
    return PS_OK;
}

int
ps_sparse_stripe_restore (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout,
                          uint32_t s, const ps_sparse_file_t *full,
                          const ps_sparse_file_t *incr, uint64_t newest, ps_error_t *err)
{
    const ps_sparse_file_t *last = incr ? incr : full;
    self->last_sweep = last->sections [s].last_sweep;
    size_t sketch_bytes = (size_t) PS_SPARSE_SKETCH_DEPTH * layout->sketch_width;
    if (sketch_bytes)
        memcpy (self->sketch, last->sections [s].sketch, sketch_bytes);
    int rc = s_load_rows (layout, self, s, full, newest, err);
    if (rc == PS_OK && incr)
        rc = s_load_evicted (layout, self, s, incr, err);
    if (rc == PS_OK && incr)
        rc = s_load_rows (layout, self, s, incr, newest, err);
    //  Counters start again at a restore (ps_sparse.h).
    self->created = self->evictions = self->dropped = self->row_updates = self->oom = 0;
    return rc;
}

bool
ps_sparse_stripe_differs (const ps_sparse_stripe_t *self, const ps_sparse_stripe_t *other,
                          const ps_sparse_layout_t *layout, uint32_t s, char *buf, size_t len)
{
    const char *name = layout->spec.name;
    const ps_sparse_stripe_t *x = self, *y = other;
    if (x->rows != y->rows) {
        snprintf (buf, len, "table %s: stripe %u holds %u rows, not %u", name, s, x->rows, y->rows);
        return true;
    }
    if (x->last_sweep != y->last_sweep) {
        snprintf (buf, len, "table %s: stripe %u was swept at step %llu, not %llu", name, s,
                  (unsigned long long) x->last_sweep, (unsigned long long) y->last_sweep);
        return true;
    }
    size_t sketch_bytes = (size_t) PS_SPARSE_SKETCH_DEPTH * layout->sketch_width;
    if (sketch_bytes && memcmp (x->sketch, y->sketch, sketch_bytes) != 0) {
        snprintf (buf, len, "table %s: stripe %u's admission counters differ", name, s);
        return true;
    }
    uint32_t dim = layout->spec.dim;
    uint32_t floats = dim * (1 + layout->nslots);
    for (uint64_t pos = 0; x->index && pos <= x->mask; pos++) {
        if (!x->index [pos])
            continue;
        const s_row_t *p = s_row (layout, x, s_entry_slot (x, x->index [pos]));
        uint32_t slot = s_find (layout, y, p->id, ps_sparse_hash (p->id));
        if (slot == S_NO_SLOT) {
            snprintf (buf, len, "table %s: row %llu is missing", name, (unsigned long long) p->id);
            return true;
        }
        const s_row_t *q = s_row (layout, y, slot);
        if (p->last_step != q->last_step || p->count != q->count) {
            snprintf (buf, len, "table %s: row %llu has %llu updates, the last at step %llu, "
                      "not %llu at %llu", name, (unsigned long long) p->id,
                      (unsigned long long) p->count, (unsigned long long) p->last_step,
                      (unsigned long long) q->count, (unsigned long long) q->last_step);
            return true;
        }
        for (uint32_t j = 0; j < floats; j++)
            if (memcmp (&p->data [j], &q->data [j], sizeof (float)) != 0) {
                snprintf (buf, len, "table %s: row %llu: %s [%u] is %.9g, not %.9g", name,
                          (unsigned long long) p->id, j < dim ? "value" : "slots",
                          j < dim ? j : j - dim, p->data [j], q->data [j]);
                return true;
            }
    }
    return false;
}
