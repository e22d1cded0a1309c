//  One stripe of a sparse table shard; see ps_sparse_stripe.h.
//
//  This file is over 800 lines and kept whole: it is one concept, a
//  stripe's rows, and its parts (the index, the slabs and free list, the
//  admission sketch, eviction, and reading and writing the stripe's
//  section of a table file) all work on the same private row layout,
//  which a split would have to publish in a header.
//
//  Layout. A stripe has an index and slabs. A row is a slot of a slab: its
//  last-update step and update count (also Adam's per-row t), and its
//  data, value [dim] then slots [dim * nslots]. A slab ("chunk") holds,
//  in this order, the two bitmaps of its rows' marks (dirty, then in base;
//  see Snapshots below), padded to 64 bytes, its rows' counters, 16 bytes
//  each, and its rows' data: a row's value thus starts on a cache line
//  whenever the data's size is a multiple of 64 bytes (16 floats of value
//  and one slot of Adagrad's), and a pull reads one line of it. Slabs are
//  allocated as the stripe grows, from the table's huge-page regions
//  (ps_slabs.h), and never moved or freed before the table is: chunk k
//  holds 16 << min (k, K) rows, K chosen so that a chunk stays within
//  PS_SLABS_MAX (256 KiB). An evicted row's slot goes on a free list and is
//  the next one used: eviction bounds memory.
//
//  The index is open addressing with linear probing over 2^bits entries,
//  placed by the low bits of h = ps_sparse_hash (id), doubled when it would
//  pass a load of 3/4 or an entry would lie more than 63 places past its
//  home (up to 16 entries a row: past that the row is refused, as one that
//  cannot be allocated, so that ids chosen to share their hashes' low bits
//  cannot take the server's memory), and emptied by backward shifting, so
//  it never holds tombstones;
//  its memory is a block of the table's (ps_slabs_block: from 64 KiB on, on
//  huge pages, since every lookup starts with a random read of it). An
//  entry (0: empty) is 64 bits: from the top, bits [bits, 58) of h, then
//  slot + 1 in `bits` bits, then in 6 bits the distance d from its home.
//  With the home (its place less d), which gives h's low bits, and the
//  stripe, h's top 6, an entry holds all of h, and so the id (the hash is
//  a bijection, ps_sparse_unhash): a probe compares entries and reads no
//  row, and a pull reads the index and the row's value, two cache lines,
//  where an index of fingerprints would read the row's id too. A slot + 1
//  fits in `bits` bits because a slot is handed out only when every slot
//  before it holds a row, and the index holds rows + 1 <= 3/4 of 2^bits.
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
//  An index entry's bits for its distance from its home, and the most.
#define S_DIST_BITS        6
#define S_MAX_DIST         ((UINT32_C (1) << S_DIST_BITS) - 1)
//  The bits of h an entry holds end below the stripe's.
#define S_HASH_BITS        58

//  A row's counters.
typedef struct {
    uint64_t last_step;         //  on the free list: the next free slot
    uint64_t count;
} s_meta_t;

//  A row: its counters and its data, value [dim] then slots [nslots * dim].
typedef struct {
    s_meta_t *meta;
    float *data;
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

//  Where a chunk of this many rows keeps their counters: after the marks,
//  on a line of its own. Their data follows them, also on a line (rows is
//  a multiple of 16, so the counters take whole lines).
static size_t
s_meta_offset (uint32_t rows)
{
    return (s_marks_bytes (rows) + 63) / 64 * 64;
}

static size_t
s_chunk_bytes (const ps_sparse_layout_t *lay, uint32_t rows)
{
    return s_meta_offset (rows) + (size_t) rows * (sizeof (s_meta_t) + lay->data_bytes);
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

static inline s_row_t
s_row (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st, uint32_t slot)
{
    uint32_t k, offset;
    s_locate (lay, slot, &k, &offset);
    uint32_t rows = s_chunk_rows (lay, k);
    uint8_t *meta = st->chunks [k] + s_meta_offset (rows);
    uint8_t *data = meta + (size_t) rows * sizeof (s_meta_t);
    return (s_row_t) {
        (s_meta_t *) meta + offset, (float *) (data + (size_t) offset * lay->data_bytes)
    };
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

//  --------------------------------------------------------------------
//  Index entries

//  The bits of h that an index of 2^bits entries keeps in an entry.
static inline uint64_t
s_key (uint32_t bits, uint64_t hash)
{
    return (hash >> bits) & ((UINT64_C (1) << (S_HASH_BITS - bits)) - 1);
}

static inline uint64_t
s_entry_make (uint32_t bits, uint64_t hash, uint32_t slot, uint32_t dist)
{
    return s_key (bits, hash) << (bits + S_DIST_BITS)
         | (uint64_t) (slot + 1) << S_DIST_BITS | dist;
}

static inline uint32_t
s_entry_slot (const ps_sparse_stripe_t *st, uint64_t entry)
{
    return (uint32_t) ((entry >> S_DIST_BITS) & st->mask) - 1;
}

static inline uint32_t
s_entry_dist (uint64_t entry)
{
    return (uint32_t) (entry & S_MAX_DIST);
}

//  The hash of the id whose entry lies at pos.
static uint64_t
s_entry_hash (const ps_sparse_stripe_t *st, uint32_t pos, uint64_t entry)
{
    uint64_t home = (pos - s_entry_dist (entry)) & st->mask;
    return (uint64_t) st->number << S_HASH_BITS
         | (entry >> (st->bits + S_DIST_BITS)) << st->bits | home;
}

static uint64_t
s_entry_id (const ps_sparse_stripe_t *st, uint32_t pos)
{
    return ps_sparse_unhash (s_entry_hash (st, pos, st->index [pos]));
}

//  --------------------------------------------------------------------
//  Slots

//  A free slot: a freed one, or the next of the chunks (a new chunk when
//  they are full). S_NO_SLOT when memory cannot be had.
static uint32_t
s_slot_alloc (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st)
{
    if (st->free_head != S_NO_SLOT) {
        uint32_t slot = st->free_head;
        st->free_head = (uint32_t) s_row (lay, st, slot).meta->last_step;
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
        size_t bytes = s_chunk_bytes (lay, rows);
        uint8_t *chunk = ps_slabs_alloc (lay->slabs, bytes);
        if (!chunk)
            return S_NO_SLOT;
        st->chunks [st->nchunks++] = chunk;
        st->capacity += rows;
        st->bytes += bytes;
    }
    return st->used++;
}

//  --------------------------------------------------------------------
//  The index

//  The position of the entry of the id with this hash, with *found, or
//  else of the empty entry where it would go, *dist places past its home
//  (more than S_MAX_DIST: it cannot go there).
static inline uint32_t
s_probe (const ps_sparse_stripe_t *st, uint64_t hash, bool *found, uint32_t *dist)
{
    uint64_t key = s_key (st->bits, hash);
    uint32_t pos = (uint32_t) hash & st->mask;
    uint32_t d = 0;
    *found = false;
    for (uint64_t entry; (entry = st->index [pos]); pos = (pos + 1) & st->mask, d++) {
        if (d > S_MAX_DIST)
            break;
        if (s_entry_dist (entry) == d && entry >> (st->bits + S_DIST_BITS) == key) {
            *found = true;
            break;
        }
    }
    *dist = d;
    return pos;
}

//  The slot of the row of the id with this hash, or S_NO_SLOT.
static inline uint32_t
s_find (const ps_sparse_stripe_t *st, uint64_t hash)
{
    if (!st->index)
        return S_NO_SLOT;
    bool found;
    uint32_t dist;
    uint32_t pos = s_probe (st, hash, &found, &dist);
    return found ? s_entry_slot (st, st->index [pos]) : S_NO_SLOT;
}

//  The most index bits a stripe may have for its rows: 16 entries a row.
//  An index grows past its load only for entries that would lie too far
//  from their home, which ids whose hashes share their low bits make; ids
//  chosen to do so thus cost their rows, not the server's memory.
static uint32_t
s_bits_cap (const ps_sparse_stripe_t *st)
{
    uint64_t most = 16 * ((uint64_t) st->rows + 1);
    uint32_t bits = 4;
    while (bits < 32 && (UINT64_C (1) << (bits + 1)) <= most)
        bits++;
    return bits;
}

//  Move the index to 2^bits entries, or more up to 2^cap while an entry
//  would lie too far from its home. Returns 0, or PS_ETOOBIG.
static int
s_index_grow (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, uint32_t bits,
              uint32_t cap)
{
    uint64_t size = st->index ? (uint64_t) st->mask + 1 : 0;
    for (; bits <= cap; bits++) {
        uint64_t grown = UINT64_C (1) << bits;
        uint64_t *index = ps_slabs_block (lay->slabs, (size_t) grown * sizeof *index);
        if (!index)
            return PS_ETOOBIG;
        uint32_t mask = (uint32_t) (grown - 1);
        bool placed = true;
        for (uint64_t i = 0; i < size && placed; i++) {
            uint64_t entry = st->index [i];
            if (!entry)
                continue;
            uint64_t hash = s_entry_hash (st, (uint32_t) i, entry);
            uint32_t pos = (uint32_t) hash & mask, dist = 0;
            while (index [pos] && dist <= S_MAX_DIST) {
                pos = (pos + 1) & mask;
                dist++;
            }
            placed = dist <= S_MAX_DIST;
            if (placed)
                index [pos] = s_entry_make (bits, hash, s_entry_slot (st, entry), dist);
        }
        if (!placed) {
            ps_slabs_block_free (lay->slabs, index, (size_t) grown * sizeof *index);
            continue;
        }
        ps_slabs_block_free (lay->slabs, st->index, (size_t) size * sizeof *index);
        st->bytes += (grown - size) * sizeof *index;
        st->index = index;
        st->mask = mask;
        st->bits = bits;
        return PS_OK;
    }
    return PS_ETOOBIG;
}

//  Empty the index entry at pos, shifting back the entries of the probe
//  run after it that may move closer to their home.
static void
s_index_remove_at (ps_sparse_stripe_t *st, uint32_t pos)
{
    uint32_t hole = pos;
    uint32_t j = pos;
    for (;;) {
        j = (j + 1) & st->mask;
        uint64_t entry = st->index [j];
        if (!entry)
            break;
        //  The entry moves when its home is at or before the hole.
        uint32_t gap = (j - hole) & st->mask;
        if (s_entry_dist (entry) >= gap) {
            st->index [hole] = entry - gap;
            hole = j;
        }
    }
    st->index [hole] = 0;
}

//  --------------------------------------------------------------------
//  Rows created, evicted

//  A new row for the id with this hash (which has none), its marks clear
//  and nothing else set: its slot, or S_NO_SLOT when memory cannot be had.
static uint32_t
s_insert (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, uint64_t hash)
{
    uint64_t size = st->index ? (uint64_t) st->mask + 1 : 0;
    uint32_t cap = s_bits_cap (st);
    if (4 * ((uint64_t) st->rows + 1) > 3 * size
    &&  s_index_grow (lay, st, size ? st->bits + 1 : 4, cap))
        return S_NO_SLOT;
    bool found;
    uint32_t dist;
    uint32_t pos = s_probe (st, hash, &found, &dist);
    assert (!found);
    while (dist > S_MAX_DIST) {
        if (st->bits >= cap || s_index_grow (lay, st, st->bits + 1, cap))
            return S_NO_SLOT;
        pos = s_probe (st, hash, &found, &dist);
    }
    uint32_t slot = s_slot_alloc (lay, st);
    if (slot == S_NO_SLOT)
        return S_NO_SLOT;
    assert (slot < st->mask);
    st->index [pos] = s_entry_make (st->bits, hash, slot, dist);
    st->rows++;
    s_set_mark (lay, st, slot, S_DIRTY, false);
    s_set_mark (lay, st, slot, S_IN_BASE, false);
    return slot;
}

//  As s_insert, the row in its initial state.
static uint32_t
s_create (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, uint64_t id, uint64_t hash)
{
    uint32_t slot = s_insert (lay, st, hash);
    if (slot == S_NO_SLOT)
        return S_NO_SLOT;
    s_row_t row = s_row (lay, st, slot);
    row.meta->last_step = 0;
    row.meta->count = 0;
    ps_tablespec_init_row (&lay->spec, id, row.data);
    ps_rowopt_init_slots (&lay->spec.opt, row.data + lay->spec.dim, lay->spec.dim);
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
        uint32_t slot = s_find (st, ps_sparse_hash (id));
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
s_entry_in_base (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st, uint64_t entry)
{
    return s_marked (lay, st, s_entry_slot (st, entry), S_IN_BASE);
}

//  True when the row in the slot an index entry names is dirty: an
//  incremental snapshot writes it.
static bool
s_entry_dirty (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st, uint64_t entry)
{
    return s_marked (lay, st, s_entry_slot (st, entry), S_DIRTY);
}

//  Evict the row whose index entry is at pos, listing its id when it is
//  in base; s_evicted_reserve made room to list it.
static void
s_evict_at (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, uint32_t pos)
{
    uint32_t slot = s_entry_slot (st, st->index [pos]);
    if (s_marked (lay, st, slot, S_IN_BASE))
        st->evicted [st->nevicted++] = s_entry_id (st, pos);
    s_index_remove_at (st, pos);
    s_row (lay, st, slot).meta->last_step = st->free_head;
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
            const s_meta_t *meta = s_row (lay, st, s_entry_slot (st, st->index [pos])).meta;
            bool old = meta->last_step < now && now - meta->last_step > ttl;
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
            const s_meta_t *meta = s_row (lay, st, s_entry_slot (st, st->index [pos])).meta;
            if (!(meta->last_step < now && now - meta->last_step > ttl))
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
            const s_meta_t *meta = s_row (lay, st, s_entry_slot (st, st->index [pos])).meta;
            uint64_t id = s_entry_id (st, (uint32_t) pos);
            s_key_t key = { meta->last_step, id, 0, (uint32_t) pos };
            if (lay->spec.policy == PS_EVICT_LFU)
                key = (s_key_t) { meta->count, meta->last_step, id, (uint32_t) pos };
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
    //  The victims are removed by hash, since each removal may move others'
    //  index entries.
    for (size_t i = 0; i < k; i++)
        keys [i].a = s_entry_hash (st, keys [i].pos, st->index [keys [i].pos]);
    for (size_t i = 0; i < k; i++) {
        bool found;
        uint32_t dist;
        uint32_t pos = s_probe (st, keys [i].a, &found, &dist);
        assert (found);
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
    layout->data_bytes = 4 * (size_t) spec->dim * (1 + layout->nslots);
    //  Slabs grow while they fit a slab of the shared regions (ps_slabs.h).
    while (layout->chunk_k < 12
       &&  s_chunk_bytes (layout, S_FIRST_CHUNK_ROWS << (layout->chunk_k + 1)) <= PS_SLABS_MAX)
        layout->chunk_k++;
    layout->sketch_width = s_sketch_width (spec);
    layout->slabs = slabs;
}

int
ps_sparse_stripe_init (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout, uint32_t s)
{
    memset (self, 0, sizeof *self);
    if (pthread_mutex_init (&self->lock, NULL) != 0)
        abort ();
    self->number = s;
    self->free_head = S_NO_SLOT;
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
//  A slot the pipeline has not looked up (S_NO_SLOT: the id has no row).
#define S_UNKNOWN  (UINT32_MAX - 1)

static inline void
s_load_entry (const ps_sparse_stripe_t *st, uint64_t hash)
{
    uint32_t home = (uint32_t) hash & st->mask;
    __builtin_prefetch (&st->index [home]);
    //  A probe run mostly ends within 3 entries of its home (at a load of
    //  3/4 at most): the next line too when they reach it.
    if ((home & 7) > 4)
        __builtin_prefetch (&st->index [(home + 3) & st->mask]);
}

//  Start loading bytes from p, for writing when write.
static inline void
s_load_bytes (const void *p, size_t bytes, int write)
{
    const uint8_t *b = p;
    //  Every line of the part used: the data is on a line only when its
    //  size is a multiple of the line's.
    if (write) {
        for (size_t off = 0; off < bytes; off += 64)
            __builtin_prefetch (b + off, 1);
        __builtin_prefetch (b + bytes - 1, 1);
    }
    else {
        for (size_t off = 0; off < bytes; off += 64)
            __builtin_prefetch (b + off, 0);
        __builtin_prefetch (b + bytes - 1, 0);
    }
}

//  A row found, and its slot (S_NO_SLOT: none; S_UNKNOWN: not looked up).
typedef struct {
    s_row_t row;
    uint32_t slot;
} s_hit_t;

static inline s_hit_t
s_hit (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st, uint32_t slot)
{
    s_hit_t hit = { { NULL, NULL }, slot };
    if (slot != S_NO_SLOT && slot != S_UNKNOWN)
        hit.row = s_row (lay, st, slot);
    return hit;
}

//  The row of the id with this hash, its data loaded (bytes of it, for
//  writing when write, with the counters then).
static inline s_hit_t
s_load_row (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st, uint64_t hash,
            size_t bytes, int write)
{
    s_hit_t hit = s_hit (lay, st, s_find (st, hash));
    if (hit.slot == S_NO_SLOT)
        return hit;
    s_load_bytes (hit.row.data, bytes, write);
    if (write)
        __builtin_prefetch (hit.row.meta, 1);
    return hit;
}

//  Start the pipeline of a group: the entries of its first 2 * S_AHEAD
//  ids, then the rows of its first S_AHEAD, into slots. A stripe without
//  an index yet has nothing to load: its slots stay unknown.
static void
s_pipeline_start (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st,
                  const ps_sparse_group_t *g, size_t bytes, int write, s_hit_t *slots)
{
    for (uint32_t k = 0; k < S_RING; k++)
        slots [k] = s_hit (lay, st, S_UNKNOWN);
    if (!st->index)
        return;
    for (uint32_t k = 0; k < g->n && k < 2 * S_AHEAD; k++)
        s_load_entry (st, g->hashes [g->order [k]]);
    for (uint32_t k = 0; k < g->n && k < S_AHEAD; k++)
        slots [k] = s_load_row (lay, st, g->hashes [g->order [k]], bytes, write);
}

//  Advance it before id k is used.
static inline void
s_pipeline_step (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st,
                 const ps_sparse_group_t *g, uint32_t k, size_t bytes, int write,
                 s_hit_t *slots)
{
    if (!st->index)
        return;
    if (k + 2 * S_AHEAD < g->n)
        s_load_entry (st, g->hashes [g->order [k + 2 * S_AHEAD]]);
    if (k + S_AHEAD < g->n)
        slots [(k + S_AHEAD) % S_RING] =
            s_load_row (lay, st, g->hashes [g->order [k + S_AHEAD]], bytes, write);
}

//  The row of id k of the group: the pipeline's, or found now when it had
//  no index to look in.
static inline s_hit_t
s_pipeline_hit (const ps_sparse_layout_t *lay, const ps_sparse_stripe_t *st,
                const ps_sparse_group_t *g, uint32_t k, const s_hit_t *slots)
{
    s_hit_t hit = slots [k % S_RING];
    return hit.slot == S_UNKNOWN ? s_hit (lay, st, s_find (st, g->hashes [g->order [k]])) : hit;
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
    //  Only the index when the values are not wanted.
    size_t bytes = out ? 4 * (size_t) dim : 0;
    s_hit_t slots [S_RING];
    s_pipeline_start (layout, self, group, bytes, 0, slots);
    for (uint32_t k = 0; k < group->n; k++) {
        s_pipeline_step (layout, self, group, k, bytes, 0, slots);
        uint32_t i = group->order [k];
        s_hit_t hit = s_pipeline_hit (layout, self, group, k, slots);
        found [i] = hit.slot != S_NO_SLOT;
        if (hit.slot != S_NO_SLOT && out)
            s_copy_value (out + (size_t) i * dim, hit.row.data, dim);
    }
}

//  Apply grad to id's row (hit's, none when its slot is S_NO_SLOT) for step, creating
//  the row when admission lets it in, else dropping the gradient; counted
//  in result.
static void
s_push_one (const ps_sparse_layout_t *lay, ps_sparse_stripe_t *st, s_hit_t hit, uint64_t id,
            uint64_t hash, const float *grad, uint64_t step, ps_sparse_push_result_t *result)
{
    uint32_t slot = hit.slot;
    if (slot == S_NO_SLOT) {
        if (!s_admit (lay, st, id, hash)) {
            st->dropped++;
            result->dropped++;
            return;
        }
        //  An admitted id whose row cannot be allocated loses an update:
        //  counted apart from admission's drops, so that it is seen.
        slot = s_create (lay, st, id, hash);
        if (slot == S_NO_SLOT) {
            st->oom++;
            result->oom++;
            return;
        }
        result->created++;
        hit.row = s_row (lay, st, slot);
    }
    s_row_t row = hit.row;
    row.meta->count++;
    if (step > row.meta->last_step)
        row.meta->last_step = step;
    uint32_t dim = lay->spec.dim;
    ps_rowopt_apply (&lay->spec.opt, row.data, row.data + dim, grad, dim, row.meta->count);
    s_set_mark (lay, st, slot, S_DIRTY, true);
    st->row_updates++;
    result->applied++;
}

void
ps_sparse_stripe_push (ps_sparse_stripe_t *self, const ps_sparse_layout_t *layout,
                       const ps_sparse_group_t *group, const float *grads, uint64_t step,
                       ps_sparse_push_result_t *result)
{
    uint32_t dim = layout->spec.dim;
    s_hit_t slots [S_RING];
    s_pipeline_start (layout, self, group, layout->data_bytes, 1, slots);
    for (uint32_t k = 0; k < group->n; k++) {
        //  A row created by this loop may have made or grown the index: the
        //  slots found before stay right (rows do not move, and the group's
        //  ids are distinct, so none of theirs was created since).
        s_pipeline_step (layout, self, group, k, layout->data_bytes, 1, slots);
        uint32_t i = group->order [k];
        s_push_one (layout, self, s_pipeline_hit (layout, self, group, k, slots), group->ids [i],
                    group->hashes [i], grads + (size_t) i * dim, step, result);
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
        uint64_t entry = self->index [pos];
        if (entry && (full || s_entry_dirty (layout, self, entry))) {
            s_row_t row = s_row (layout, self, s_entry_slot (self, entry));
            ps_put_u64 (p, s_entry_id (self, (uint32_t) pos));
            ps_put_u64 (p + 8, row.meta->last_step);
            ps_put_u64 (p + 16, row.meta->count);
            memcpy (p + 24, row.data, layout->data_bytes);
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
        uint32_t slot = s_find (st, hash);
        if (slot != S_NO_SLOT && (!incremental || s_marked (lay, st, slot, S_DIRTY)))
            return ps_error_set (err, PS_ECORRUPT, "file %s: row %llu appears twice",
                                 file->path, (unsigned long long) id);
        if (slot == S_NO_SLOT)
            slot = s_insert (lay, st, hash);
        if (slot == S_NO_SLOT)
            return ps_error_set (err, PS_ETOOBIG, "file %s: cannot allocate row %llu",
                                 file->path, (unsigned long long) id);
        s_row_t row = s_row (lay, st, slot);
        row.meta->last_step = last_step;
        row.meta->count = count;
        memcpy (row.data, src + 24, lay->data_bytes);
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
        bool found = false;
        uint32_t dist;
        uint32_t pos = st->index ? s_probe (st, hash, &found, &dist) : 0;
        if (found)
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
        uint64_t id = s_entry_id (x, (uint32_t) pos);
        s_row_t p = s_row (layout, x, s_entry_slot (x, x->index [pos]));
        uint32_t slot = s_find (y, ps_sparse_hash (id));
        if (slot == S_NO_SLOT) {
            snprintf (buf, len, "table %s: row %llu is missing", name, (unsigned long long) id);
            return true;
        }
        s_row_t q = s_row (layout, y, slot);
        if (p.meta->last_step != q.meta->last_step || p.meta->count != q.meta->count) {
            snprintf (buf, len, "table %s: row %llu has %llu updates, the last at step %llu, "
                      "not %llu at %llu", name, (unsigned long long) id,
                      (unsigned long long) p.meta->count, (unsigned long long) p.meta->last_step,
                      (unsigned long long) q.meta->count, (unsigned long long) q.meta->last_step);
            return true;
        }
        for (uint32_t j = 0; j < floats; j++)
            if (memcmp (&p.data [j], &q.data [j], sizeof (float)) != 0) {
                snprintf (buf, len, "table %s: row %llu: %s [%u] is %.9g, not %.9g", name,
                          (unsigned long long) id, j < dim ? "value" : "slots",
                          j < dim ? j : j - dim, p.data [j], q.data [j]);
                return true;
            }
    }
    return false;
}
