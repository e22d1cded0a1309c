//  A shard of a sparse embedding table; see ps_sparse.h.
//
//  Layout. Each of the PS_SPARSE_STRIPES stripes (ps_sparse_stripe_of) has
//  a mutex, an index and slabs. A row is a slot of a slab: id, last-update
//  step, update count (also Adam's per-row t), then value [dim] and slots
//  [dim * nslots], padded to 8 bytes. Slabs ("chunks") are allocated as
//  the stripe grows and never moved or freed before the table is: chunk k
//  holds 16 << min (k, K) rows, K chosen so that a chunk stays within
//  256 KiB, and starts with a bitmap of its rows' dirty marks. The index
//  is open addressing with linear probing over slot numbers + 1 (0:
//  empty), placed by the low bits of ps_sparse_hash (id), doubled when it
//  would pass a load of 3/4, and emptied by backward shifting, so it never
//  holds tombstones. An evicted row's slot goes on a free list and is the
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
//  the power of two nearest above 2 * capacity / 64, from 64 to 2^16, and
//  2^14 without a capacity: 4 MiB per shard at most.
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
//  marked dirty, and after the first full snapshot each stripe lists the
//  ids it evicted (kept sorted and unique by compaction, live ids taken
//  out). A full save clears both, stripe by stripe under its lock; a
//  failed full save leaves the table without a full snapshot, so that an
//  incremental one is refused until a full one succeeds.

#include "ps_bytes.h"
#include "ps_file.h"
#include "ps_ledger.h"
#include "ps_rowopt.h"
#include "ps_sparse.h"
#include "ps_sparse_file.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define S_MAX_CHUNK_BYTES  (256 * 1024)
#define S_FIRST_CHUNK_ROWS 16
//  Ids of a push or pull grouped by stripe at a time, on the stack.
#define S_WINDOW           1024
#define S_NO_SLOT          UINT32_MAX

typedef struct {
    uint64_t id;
    uint64_t last_step;         //  on the free list: the next free slot
    uint64_t count;
    float data [];              //  value [dim], then slots [nslots * dim]
} s_row_t;

typedef struct {
    pthread_mutex_t lock;
    uint32_t *index;            //  mask + 1 entries: slot + 1, or 0 for empty
    uint32_t mask;
    uint32_t rows;              //  live rows
    uint32_t used;              //  slots ever handed out
    uint32_t capacity;          //  slots in the chunks allocated
    uint32_t free_head;         //  a freed slot, or S_NO_SLOT
    uint8_t **chunks;
    uint32_t nchunks, chunks_cap;
    uint8_t *sketch;            //  DEPTH x width counters, or NULL
    uint64_t *evicted;          //  ids evicted since the last full snapshot
    size_t nevicted, evicted_cap, evicted_clean;
    bool track_evicted;         //  a full snapshot exists
    uint64_t last_sweep;
    uint64_t created, evictions, dropped, row_updates;
    uint64_t bytes;
} s_stripe_t;

struct _ps_sparse_t {
    ps_tablespec_t spec;
    uint32_t nslots;            //  slot floats per element
    size_t stride;              //  bytes of a row in a chunk
    uint32_t chunk_k;           //  K: chunk k holds 16 << min (k, K) rows
    uint32_t sketch_width;
    pthread_mutex_t ledger_lock;
    ps_ledger_t *ledger;
    uint64_t newest_step;
    uint64_t pushes, duplicates;
    atomic_uint_fast64_t pulls;
    pthread_mutex_t save_lock;
    bool has_base;              //  the last full save succeeded (or the
    uint64_t base_size;         //  table was loaded): its size and CRC
    uint32_t base_crc;
    s_stripe_t stripes [PS_SPARSE_STRIPES];
};

//  --------------------------------------------------------------------
//  Chunks and rows

static uint32_t
s_chunk_rows (const ps_sparse_t *self, uint32_t k)
{
    return S_FIRST_CHUNK_ROWS << (k < self->chunk_k ? k : self->chunk_k);
}

static size_t
s_bitmap_bytes (uint32_t rows)
{
    return (rows + 63) / 64 * 8;
}

//  The chunk and offset of a slot: chunks 0..K double from 16 rows, the
//  rest all hold 16 << K.
static void
s_locate (const ps_sparse_t *self, uint32_t slot, uint32_t *k, uint32_t *offset)
{
    uint32_t geometric = S_FIRST_CHUNK_ROWS * ((UINT32_C (2) << self->chunk_k) - 1);
    if (slot < geometric) {
        *k = (uint32_t) (63 - __builtin_clzll (slot / S_FIRST_CHUNK_ROWS + 1));
        *offset = slot - S_FIRST_CHUNK_ROWS * ((UINT32_C (1) << *k) - 1);
    }
    else {
        uint32_t big = S_FIRST_CHUNK_ROWS << self->chunk_k;
        *k = self->chunk_k + 1 + (slot - geometric) / big;
        *offset = (slot - geometric) % big;
    }
}

static s_row_t *
s_row (const ps_sparse_t *self, const s_stripe_t *st, uint32_t slot)
{
    uint32_t k, offset;
    s_locate (self, slot, &k, &offset);
    return (s_row_t *) (st->chunks [k] + s_bitmap_bytes (s_chunk_rows (self, k))
                        + (size_t) offset * self->stride);
}

static void
s_set_dirty (const ps_sparse_t *self, s_stripe_t *st, uint32_t slot, bool dirty)
{
    uint32_t k, offset;
    s_locate (self, slot, &k, &offset);
    uint64_t *bits = (uint64_t *) st->chunks [k];
    if (dirty)
        bits [offset / 64] |= UINT64_C (1) << (offset % 64);
    else
        bits [offset / 64] &= ~(UINT64_C (1) << (offset % 64));
}

static bool
s_dirty (const ps_sparse_t *self, const s_stripe_t *st, uint32_t slot)
{
    uint32_t k, offset;
    s_locate (self, slot, &k, &offset);
    return (((const uint64_t *) st->chunks [k]) [offset / 64] >> (offset % 64)) & 1;
}

//  A free slot: a freed one, or the next of the chunks (a new chunk when
//  they are full). S_NO_SLOT when memory cannot be had.
static uint32_t
s_slot_alloc (ps_sparse_t *self, s_stripe_t *st)
{
    if (st->free_head != S_NO_SLOT) {
        uint32_t slot = st->free_head;
        st->free_head = (uint32_t) s_row (self, st, slot)->last_step;
        return slot;
    }
    if (st->used == st->capacity) {
        uint32_t rows = s_chunk_rows (self, st->nchunks);
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
        size_t bytes = s_bitmap_bytes (rows) + (size_t) rows * self->stride;
        uint8_t *chunk = malloc (bytes);
        if (!chunk)
            return S_NO_SLOT;
        memset (chunk, 0, s_bitmap_bytes (rows));
        st->chunks [st->nchunks++] = chunk;
        st->capacity += rows;
        st->bytes += bytes;
    }
    return st->used++;
}

//  --------------------------------------------------------------------
//  The index

//  The position of id's entry, or of the empty entry where it would go.
static uint32_t
s_probe (const ps_sparse_t *self, const s_stripe_t *st, uint64_t id, uint64_t hash,
         s_row_t **row)
{
    uint32_t pos = (uint32_t) hash & st->mask;
    *row = NULL;
    while (st->index [pos]) {
        s_row_t *candidate = s_row (self, st, st->index [pos] - 1);
        if (candidate->id == id) {
            *row = candidate;
            break;
        }
        pos = (pos + 1) & st->mask;
    }
    return pos;
}

//  The slot of id's row, or S_NO_SLOT.
static uint32_t
s_find (const ps_sparse_t *self, const s_stripe_t *st, uint64_t id, uint64_t hash)
{
    if (!st->index)
        return S_NO_SLOT;
    s_row_t *row;
    uint32_t pos = s_probe (self, st, id, hash, &row);
    return row ? st->index [pos] - 1 : S_NO_SLOT;
}

//  Make room in the index for one more row, doubling it (or creating it)
//  when it would pass a load of 3/4.
static int
s_index_reserve (ps_sparse_t *self, s_stripe_t *st)
{
    uint64_t size = st->index ? (uint64_t) st->mask + 1 : 0;
    if (4 * ((uint64_t) st->rows + 1) <= 3 * size)
        return PS_OK;
    uint64_t grown = size ? 2 * size : 16;
    if (grown > (UINT64_C (1) << 32))
        return PS_ETOOBIG;
    uint32_t *index = calloc ((size_t) grown, sizeof *index);
    if (!index)
        return PS_ETOOBIG;
    uint32_t mask = (uint32_t) (grown - 1);
    for (uint64_t i = 0; i < size; i++) {
        uint32_t entry = st->index [i];
        if (!entry)
            continue;
        uint32_t pos = (uint32_t) ps_sparse_hash (s_row (self, st, entry - 1)->id) & mask;
        while (index [pos])
            pos = (pos + 1) & mask;
        index [pos] = entry;
    }
    free (st->index);
    st->bytes += (grown - size) * sizeof *index;
    st->index = index;
    st->mask = mask;
    return PS_OK;
}

//  Empty the index entry at pos, shifting back the entries of the probe
//  run after it that may move closer to their home.
static void
s_index_remove_at (const ps_sparse_t *self, s_stripe_t *st, uint32_t pos)
{
    uint32_t hole = pos;
    uint32_t j = pos;
    for (;;) {
        j = (j + 1) & st->mask;
        uint32_t entry = st->index [j];
        if (!entry)
            break;
        uint32_t home = (uint32_t) ps_sparse_hash (s_row (self, st, entry - 1)->id) & st->mask;
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

//  A new row for id, its id set and nothing else: its slot, or S_NO_SLOT
//  when memory cannot be had.
static uint32_t
s_insert (ps_sparse_t *self, s_stripe_t *st, uint64_t id, uint64_t hash)
{
    if (s_index_reserve (self, st))
        return S_NO_SLOT;
    uint32_t slot = s_slot_alloc (self, st);
    if (slot == S_NO_SLOT)
        return S_NO_SLOT;
    s_row_t *row;
    uint32_t pos = s_probe (self, st, id, hash, &row);
    st->index [pos] = slot + 1;
    st->rows++;
    s_row (self, st, slot)->id = id;
    return slot;
}

//  As s_insert, the row in its initial state.
static uint32_t
s_create (ps_sparse_t *self, s_stripe_t *st, uint64_t id, uint64_t hash)
{
    uint32_t slot = s_insert (self, st, id, hash);
    if (slot == S_NO_SLOT)
        return S_NO_SLOT;
    s_row_t *row = s_row (self, st, slot);
    row->last_step = 0;
    row->count = 0;
    ps_tablespec_init_row (&self->spec, id, row->data);
    ps_rowopt_init_slots (&self->spec.opt, row->data + self->spec.dim, self->spec.dim);
    st->created++;
    return slot;
}

static int
s_cmp_u64 (const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

//  Sort the evicted list, drop repeats and the ids that have a row again.
static void
s_evicted_compact (ps_sparse_t *self, s_stripe_t *st)
{
    qsort (st->evicted, st->nevicted, sizeof (uint64_t), s_cmp_u64);
    size_t kept = 0;
    for (size_t i = 0; i < st->nevicted; i++) {
        uint64_t id = st->evicted [i];
        if ((kept && st->evicted [kept - 1] == id)
        ||  s_find (self, st, id, ps_sparse_hash (id)) != S_NO_SLOT)
            continue;
        st->evicted [kept++] = id;
    }
    st->nevicted = kept;
    st->evicted_clean = kept;
}

//  Make room to list more evicted ids, compacting when the list has
//  doubled since its last compaction. Without the room nothing may be
//  evicted: an incremental snapshot would miss the eviction.
static int
s_evicted_reserve (ps_sparse_t *self, s_stripe_t *st, size_t more)
{
    if (!st->track_evicted)
        return PS_OK;
    if (st->nevicted > 2 * st->evicted_clean + 64)
        s_evicted_compact (self, st);
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

//  Evict the row whose index entry is at pos; s_evicted_reserve made room
//  to list it.
static void
s_evict_at (ps_sparse_t *self, s_stripe_t *st, uint32_t pos)
{
    uint32_t slot = st->index [pos] - 1;
    s_row_t *row = s_row (self, st, slot);
    if (st->track_evicted)
        st->evicted [st->nevicted++] = row->id;
    s_index_remove_at (self, st, pos);
    s_set_dirty (self, st, slot, false);
    row->last_step = st->free_head;
    st->free_head = slot;
    st->rows--;
    st->evictions++;
}

//  The TTL sweep (see the top of this file).
static size_t
s_sweep (ps_sparse_t *self, s_stripe_t *st, uint64_t now)
{
    uint64_t ttl = self->spec.ttl;
    uint64_t interval = ttl / 8 ? ttl / 8 : 1;
    if (!ttl || now < st->last_sweep + interval)
        return 0;
    size_t expired = 0;
    for (uint64_t pos = 0; st->index && pos <= st->mask; pos++)
        if (st->index [pos]) {
            s_row_t *row = s_row (self, st, st->index [pos] - 1);
            expired += row->last_step < now && now - row->last_step > ttl;
        }
    if (s_evicted_reserve (self, st, expired))
        return 0;
    st->last_sweep = now;
    //  Each removal may shift a later entry into pos, which is looked at
    //  again; an entry shifted across the end of the array was looked at
    //  already and stays.
    size_t evicted = 0;
    for (uint64_t pos = 0; expired && pos <= st->mask; pos++)
        while (st->index [pos]) {
            s_row_t *row = s_row (self, st, st->index [pos] - 1);
            if (!(row->last_step < now && now - row->last_step > ttl))
                break;
            s_evict_at (self, st, (uint32_t) pos);
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
s_trim (ps_sparse_t *self, s_stripe_t *st, uint32_t s)
{
    if (!self->spec.capacity)
        return 0;
    uint64_t cap = ps_sparse_stripe_capacity (self->spec.capacity, s);
    if (st->rows <= cap)
        return 0;
    size_t k = st->rows - (size_t) (cap - cap / 16);
    s_key_t *keys = malloc (st->rows * sizeof *keys);
    if (!keys || s_evicted_reserve (self, st, k)) {
        free (keys);
        return 0;
    }
    size_t n = 0;
    for (uint64_t pos = 0; pos <= st->mask; pos++)
        if (st->index [pos]) {
            const s_row_t *row = s_row (self, st, st->index [pos] - 1);
            s_key_t key = { row->last_step, row->id, 0, (uint32_t) pos };
            if (self->spec.policy == PS_EVICT_LFU)
                key = (s_key_t) { row->count, row->last_step, row->id, (uint32_t) pos };
            keys [n++] = key;
        }
    s_select (keys, n, k);
    //  The victims are removed by id, since each removal may move others'
    //  index entries.
    for (size_t i = 0; i < k; i++) {
        uint64_t id = s_row (self, st, st->index [keys [i].pos] - 1)->id;
        keys [i].a = id;
    }
    for (size_t i = 0; i < k; i++) {
        s_row_t *row;
        uint32_t pos = s_probe (self, st, keys [i].a, ps_sparse_hash (keys [i].a), &row);
        assert (row);
        s_evict_at (self, st, pos);
    }
    free (keys);
    return k;
}

//  --------------------------------------------------------------------
//  Admission

//  Count a push to id, which has no row, and tell whether it earns one.
static bool
s_admit (const ps_sparse_t *self, s_stripe_t *st, uint64_t id, uint64_t hash)
{
    if (!st->sketch)
        return true;
    uint32_t width = self->sketch_width;
    unsigned count = 255;
    for (uint32_t r = 0; r < PS_SPARSE_SKETCH_DEPTH; r++) {
        uint8_t *counter = st->sketch + (size_t) r * width + (ps_mix_draw (hash, r) & (width - 1));
        if (*counter < 255)
            (*counter)++;
        if (*counter < count)
            count = *counter;
    }
    if (count < self->spec.admit_count)
        return false;
    if (self->spec.admit_prob >= 1.0)
        return true;
    uint64_t key = ps_mix64 (self->spec.shard_seed) ^ ps_mix64 (id + 1);
    double draw = (double) (ps_mix_draw (key, count) >> 11) * 0x1.0p-53;
    return draw < self->spec.admit_prob;
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
    while (width < (UINT32_C (1) << 16) && (uint64_t) width * PS_SPARSE_STRIPES < 2 * spec->capacity)
        width *= 2;
    return width;
}

//  --------------------------------------------------------------------
//  The table

ps_sparse_t *
ps_sparse_new (const ps_tablespec_t *spec, ps_error_t *err)
{
    if (ps_tablespec_validate (spec, err))
        return NULL;
    size_t size = (sizeof (ps_sparse_t) + 63) / 64 * 64;
    ps_sparse_t *self = aligned_alloc (64, size);
    if (!self) {
        ps_error_set (err, PS_ETOOBIG, "table %s: cannot allocate the table", spec->name);
        return NULL;
    }
    memset (self, 0, size);
    self->spec = *spec;
    self->nslots = (uint32_t) ps_rowopt_slot_count (spec->opt.kind);
    self->stride = (sizeof (s_row_t) + 4 * (size_t) spec->dim * (1 + self->nslots) + 7) / 8 * 8;
    while (self->chunk_k < 12
       &&  ((size_t) S_FIRST_CHUNK_ROWS << (self->chunk_k + 1)) * self->stride <= S_MAX_CHUNK_BYTES)
        self->chunk_k++;
    self->sketch_width = s_sketch_width (spec);
    self->ledger = ps_ledger_new ();
    atomic_init (&self->pulls, 0);
    bool ok = self->ledger != NULL;
    pthread_mutex_init (&self->ledger_lock, NULL);
    pthread_mutex_init (&self->save_lock, NULL);
    size_t sketch_bytes = (size_t) PS_SPARSE_SKETCH_DEPTH * self->sketch_width;
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++) {
        s_stripe_t *st = &self->stripes [s];
        pthread_mutex_init (&st->lock, NULL);
        st->free_head = S_NO_SLOT;
        if (sketch_bytes) {
            st->sketch = calloc (1, sketch_bytes);
            ok = ok && st->sketch;
            st->bytes += sketch_bytes;
        }
    }
    if (!ok) {
        ps_sparse_destroy (&self);
        ps_error_set (err, PS_ETOOBIG, "table %s: cannot allocate its ledger and filters",
                      spec->name);
    }
    return self;
}

void
ps_sparse_destroy (ps_sparse_t **self_p)
{
    assert (self_p);
    ps_sparse_t *self = *self_p;
    if (!self)
        return;
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++) {
        s_stripe_t *st = &self->stripes [s];
        for (uint32_t k = 0; k < st->nchunks; k++)
            free (st->chunks [k]);
        free (st->chunks);
        free (st->index);
        free (st->sketch);
        free (st->evicted);
        pthread_mutex_destroy (&st->lock);
    }
    ps_ledger_destroy (&self->ledger);
    pthread_mutex_destroy (&self->ledger_lock);
    pthread_mutex_destroy (&self->save_lock);
    free (self);
    *self_p = NULL;
}

const ps_tablespec_t *
ps_sparse_spec (ps_sparse_t *self)
{
    assert (self);
    return &self->spec;
}

void
ps_sparse_pull (ps_sparse_t *self, const uint64_t *ids, size_t n, float *out)
{
    assert (self);
    uint32_t dim = self->spec.dim;
    for (size_t i = 0; i < n; i++) {
        uint64_t hash = ps_sparse_hash (ids [i]);
        s_stripe_t *st = &self->stripes [hash >> 58];
        pthread_mutex_lock (&st->lock);
        uint32_t slot = s_find (self, st, ids [i], hash);
        if (slot != S_NO_SLOT)
            memcpy (out + i * dim, s_row (self, st, slot)->data, dim * sizeof (float));
        pthread_mutex_unlock (&st->lock);
        if (slot == S_NO_SLOT)
            ps_tablespec_init_row (&self->spec, ids [i], out + i * dim);
    }
    atomic_fetch_add_explicit (&self->pulls, n, memory_order_relaxed);
}

int
ps_sparse_check_push (ps_sparse_t *self, uint64_t step, const uint64_t *ids, size_t n,
                      ps_error_t *err)
{
    assert (self);
    pthread_mutex_lock (&self->ledger_lock);
    int rc = ps_ledger_contains (self->ledger, step) ? PS_DUPLICATE
           : ps_ledger_reserve (self->ledger, step, err);
    pthread_mutex_unlock (&self->ledger_lock);
    if (rc)
        return rc == PS_DUPLICATE ? rc : ps_error_prefix (err, rc, "table %s: ", self->spec.name);
    //  Repeated ids: a table of positions + 1, open addressing, at most
    //  half full.
    size_t size = 16;
    while (size < 2 * n)
        size *= 2;
    uint32_t *seen = calloc (size, sizeof *seen);
    if (!seen)
        return ps_error_set (err, PS_ETOOBIG, "table %s: cannot allocate a check of %zu ids",
                             self->spec.name, n);
    for (size_t i = 0; i < n && rc == PS_OK; i++) {
        size_t pos = (size_t) ps_sparse_hash (ids [i]) & (size - 1);
        while (seen [pos] && ids [seen [pos] - 1] != ids [i])
            pos = (pos + 1) & (size - 1);
        if (seen [pos])
            rc = ps_error_set (err, PS_EINVAL, "table %s: id %llu is pushed twice (at %u and "
                               "%zu), expected a batch's duplicates summed", self->spec.name,
                               (unsigned long long) ids [i], seen [pos] - 1, i);
        else
            seen [pos] = (uint32_t) (i + 1);
    }
    free (seen);
    return rc;
}

//  Apply one id's gradient for step in its stripe, whose lock is held.
static void
s_push_one (ps_sparse_t *self, s_stripe_t *st, uint64_t id, uint64_t hash, const float *grad,
            uint64_t step, ps_sparse_push_result_t *result)
{
    uint32_t slot = s_find (self, st, id, hash);
    if (slot == S_NO_SLOT) {
        if (s_admit (self, st, id, hash))
            slot = s_create (self, st, id, hash);
        if (slot == S_NO_SLOT) {
            st->dropped++;
            result->dropped++;
            return;
        }
        result->created++;
    }
    s_row_t *row = s_row (self, st, slot);
    row->count++;
    if (step > row->last_step)
        row->last_step = step;
    uint32_t dim = self->spec.dim;
    ps_rowopt_apply (&self->spec.opt, row->data, row->data + dim, grad, dim, row->count);
    s_set_dirty (self, st, slot, true);
    st->row_updates++;
    result->applied++;
}

int
ps_sparse_push (ps_sparse_t *self, uint64_t step, const uint64_t *ids, size_t n,
                const float *grads, ps_sparse_push_result_t *result)
{
    assert (self);
    assert (result);
    memset (result, 0, sizeof *result);
    pthread_mutex_lock (&self->ledger_lock);
    int rc = ps_ledger_mark (self->ledger, step, NULL);
    if (rc == PS_DUPLICATE)
        self->duplicates++;
    if (rc == PS_OK) {
        self->pushes++;
        if (step > self->newest_step)
            self->newest_step = step;
    }
    uint64_t now = self->newest_step;
    pthread_mutex_unlock (&self->ledger_lock);
    if (rc)
        return rc;

    //  Ids go to their stripes a window at a time, each stripe locked once
    //  per window; the counting sort keeps a stripe's ids in their order.
    uint32_t dim = self->spec.dim;
    uint64_t touched = 0;
    uint64_t hashes [S_WINDOW];
    uint16_t order [S_WINDOW];
    uint32_t begin [PS_SPARSE_STRIPES + 1];
    for (size_t start = 0; start < n; start += S_WINDOW) {
        size_t m = n - start < S_WINDOW ? n - start : S_WINDOW;
        memset (begin, 0, sizeof begin);
        for (size_t i = 0; i < m; i++) {
            hashes [i] = ps_sparse_hash (ids [start + i]);
            begin [(hashes [i] >> 58) + 1]++;
        }
        for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++)
            begin [s + 1] += begin [s];
        uint32_t next [PS_SPARSE_STRIPES];
        memcpy (next, begin, sizeof next);
        for (size_t i = 0; i < m; i++)
            order [next [hashes [i] >> 58]++] = (uint16_t) i;
        for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++) {
            if (begin [s] == begin [s + 1])
                continue;
            touched |= UINT64_C (1) << s;
            s_stripe_t *st = &self->stripes [s];
            pthread_mutex_lock (&st->lock);
            for (uint32_t j = begin [s]; j < begin [s + 1]; j++) {
                size_t i = order [j];
                s_push_one (self, st, ids [start + i], hashes [i], grads + (start + i) * dim,
                            step, result);
            }
            pthread_mutex_unlock (&st->lock);
        }
    }
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++)
        if (touched >> s & 1) {
            s_stripe_t *st = &self->stripes [s];
            pthread_mutex_lock (&st->lock);
            result->evicted += s_sweep (self, st, now);
            result->evicted += s_trim (self, st, s);
            pthread_mutex_unlock (&st->lock);
        }
    return PS_OK;
}

void
ps_sparse_stats (ps_sparse_t *self, ps_sparse_stats_t *stats)
{
    assert (self);
    memset (stats, 0, sizeof *stats);
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++) {
        s_stripe_t *st = &self->stripes [s];
        pthread_mutex_lock (&st->lock);
        stats->rows += st->rows;
        stats->created += st->created;
        stats->evicted += st->evictions;
        stats->dropped += st->dropped;
        stats->row_updates += st->row_updates;
        stats->bytes += st->bytes;
        pthread_mutex_unlock (&st->lock);
    }
    pthread_mutex_lock (&self->ledger_lock);
    stats->pushes = self->pushes;
    stats->duplicates = self->duplicates;
    stats->bytes += ps_ledger_encoded_size (self->ledger);
    pthread_mutex_unlock (&self->ledger_lock);
    stats->pulls = atomic_load_explicit (&self->pulls, memory_order_relaxed);
    stats->bytes += sizeof *self;
}

uint64_t
ps_sparse_steps_applied (ps_sparse_t *self)
{
    assert (self);
    pthread_mutex_lock (&self->ledger_lock);
    uint64_t count = ps_ledger_count (self->ledger);
    pthread_mutex_unlock (&self->ledger_lock);
    return count;
}

//  --------------------------------------------------------------------
//  Saving

//  What the file writer needs, and what it learns: the file's size and
//  CRC, which an incremental snapshot names its full one by.
typedef struct {
    ps_sparse_t *self;
    bool full;
    uint8_t *head;              //  header and ledger, encoded
    size_t head_len;
    uint8_t *buf;               //  a stripe's section, copied under its lock
    size_t buf_cap;
    uint64_t size;
    uint32_t crc;
} s_save_t;

//  Copy stripe s's section into save->buf under its lock: the rows to
//  write (all, or the dirty ones), and for an incremental snapshot the
//  ids evicted since the full one. A full snapshot clears the marks as it
//  copies. Returns the section's length, or 0 with errno set.
static size_t
s_copy_section (s_save_t *save, uint32_t s)
{
    ps_sparse_t *self = save->self;
    s_stripe_t *st = &self->stripes [s];
    size_t row_bytes = ps_sparse_file_row_bytes (&self->spec);
    size_t sketch_bytes = (size_t) PS_SPARSE_SKETCH_DEPTH * self->sketch_width;
    pthread_mutex_lock (&st->lock);
    if (!save->full && st->track_evicted)
        s_evicted_compact (self, st);
    size_t nevicted = save->full ? 0 : st->nevicted;
    size_t nrows = 0;
    for (uint64_t pos = 0; st->index && pos <= st->mask; pos++)
        nrows += st->index [pos] && (save->full || s_dirty (self, st, st->index [pos] - 1));
    size_t len = PS_SPARSE_FILE_SECTION + sketch_bytes + 8 * nevicted + nrows * row_bytes;
    if (len > save->buf_cap) {
        uint8_t *buf = realloc (save->buf, len);
        if (!buf) {
            pthread_mutex_unlock (&st->lock);
            errno = ENOMEM;
            return 0;
        }
        save->buf = buf;
        save->buf_cap = len;
    }
    uint8_t *p = save->buf;
    ps_put_u64 (p, st->last_sweep);
    ps_put_u64 (p + 8, nevicted);
    ps_put_u64 (p + 16, nrows);
    p += PS_SPARSE_FILE_SECTION;
    if (sketch_bytes)
        memcpy (p, st->sketch, sketch_bytes);
    p += sketch_bytes;
    for (size_t i = 0; i < nevicted; i++, p += 8)
        ps_put_u64 (p, st->evicted [i]);
    for (uint64_t pos = 0; st->index && pos <= st->mask; pos++) {
        uint32_t entry = st->index [pos];
        if (entry && (save->full || s_dirty (self, st, entry - 1))) {
            memcpy (p, s_row (self, st, entry - 1), row_bytes);
            p += row_bytes;
        }
    }
    if (save->full) {
        for (uint32_t k = 0; k < st->nchunks; k++)
            memset (st->chunks [k], 0, s_bitmap_bytes (s_chunk_rows (self, k)));
        st->nevicted = 0;
        st->evicted_clean = 0;
        st->track_evicted = true;
    }
    pthread_mutex_unlock (&st->lock);
    return len;
}

static int
s_write_file (int fd, void *arg)
{
    s_save_t *save = arg;
    uint32_t crc = (uint32_t) crc32 (0, Z_NULL, 0);
    if (ps_file_write_all (fd, save->head, save->head_len, &crc))
        return -1;
    uint64_t size = save->head_len;
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++) {
        size_t len = s_copy_section (save, s);
        if (!len || ps_file_write_all (fd, save->buf, len, &crc))
            return -1;
        size += len;
    }
    uint8_t trailer [PS_SPARSE_FILE_TRAILER];
    ps_put_u32 (trailer, crc);
    if (ps_file_write_all (fd, trailer, sizeof trailer, NULL))
        return -1;
    save->size = size + sizeof trailer;
    save->crc = crc;
    return 0;
}

int
ps_sparse_save (ps_sparse_t *self, const char *path, bool full, ps_error_t *err)
{
    assert (self);
    assert (path);
    pthread_mutex_lock (&self->save_lock);
    if (!full && !self->has_base) {
        pthread_mutex_unlock (&self->save_lock);
        return ps_error_set (err, PS_EINVAL, "table %s: file %s: no full snapshot to be "
                             "incremental to, expected a full save first", self->spec.name, path);
    }
    ps_sparse_file_header_t header = {
        .full = full,
        .base_size = full ? 0 : self->base_size,
        .base_crc = full ? 0 : self->base_crc,
        .spec = self->spec,
        .sketch_width = self->sketch_width,
    };
    s_save_t save = { .self = self, .full = full };
    pthread_mutex_lock (&self->ledger_lock);
    header.newest_step = self->newest_step;
    header.ledger_len = ps_ledger_encoded_size (self->ledger);
    save.head_len = PS_SPARSE_FILE_HEADER + (size_t) header.ledger_len;
    save.head = malloc (save.head_len);
    if (save.head)
        ps_ledger_encode (self->ledger, save.head + PS_SPARSE_FILE_HEADER);
    pthread_mutex_unlock (&self->ledger_lock);
    size_t tmp_len = strlen (path) + 32;
    char *tmp = malloc (tmp_len);
    int rc;
    if (!save.head || !tmp)
        rc = ps_error_set (err, PS_EIO, "table %s: file %s: cannot allocate the header",
                           self->spec.name, path);
    else {
        ps_sparse_file_encode (&header, save.head);
        snprintf (tmp, tmp_len, "%s.tmp.%ld", path, (long) getpid ());
        rc = ps_file_write_atomic (path, tmp, s_write_file, &save, err);
    }
    if (full) {
        //  The marks of the stripes copied are gone whether the file made
        //  it or not: only a full snapshot that is on disk may be one that
        //  incremental snapshots follow.
        self->has_base = rc == PS_OK;
        self->base_size = save.size;
        self->base_crc = save.crc;
    }
    pthread_mutex_unlock (&self->save_lock);
    free (save.head);
    free (save.buf);
    free (tmp);
    return rc;
}

//  --------------------------------------------------------------------
//  Loading

//  Put the rows of a file's section of stripe s into it: new rows, or, for
//  an incremental file, over the rows the full one had (marked dirty, as
//  they were when it was written). A row of another stripe, one the full
//  file holds twice, a row never updated or one updated after the newest
//  step are refused.
static int
s_load_rows (ps_sparse_t *self, uint32_t s, const ps_sparse_file_t *file, uint64_t newest,
             ps_error_t *err)
{
    s_stripe_t *st = &self->stripes [s];
    const ps_sparse_file_section_t *section = &file->sections [s];
    size_t row_bytes = ps_sparse_file_row_bytes (&self->spec);
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
        uint32_t slot = s_find (self, st, id, hash);
        if (slot != S_NO_SLOT && !incremental)
            return ps_error_set (err, PS_ECORRUPT, "file %s: row %llu appears twice",
                                 file->path, (unsigned long long) id);
        if (slot == S_NO_SLOT)
            slot = s_insert (self, st, id, hash);
        if (slot == S_NO_SLOT)
            return ps_error_set (err, PS_ETOOBIG, "file %s: cannot allocate row %llu",
                                 file->path, (unsigned long long) id);
        memcpy (s_row (self, st, slot), src, row_bytes);
        s_set_dirty (self, st, slot, incremental);
    }
    return PS_OK;
}

//  Apply an incremental file's evicted ids of stripe s: each row goes, and
//  each id is listed as evicted since the full snapshot, as it was.
static int
s_load_evicted (ps_sparse_t *self, uint32_t s, const ps_sparse_file_t *file, ps_error_t *err)
{
    s_stripe_t *st = &self->stripes [s];
    const ps_sparse_file_section_t *section = &file->sections [s];
    for (uint64_t i = 0; i < section->nevicted; i++) {
        uint64_t id = ps_get_u64 (section->evicted + 8 * i);
        uint64_t hash = ps_sparse_hash (id);
        if (hash >> 58 != s)
            return ps_error_set (err, PS_ECORRUPT, "file %s: evicted id %llu in stripe %u, "
                                 "expected stripe %u", file->path, (unsigned long long) id, s,
                                 (unsigned) (hash >> 58));
        if (s_evicted_reserve (self, st, 1))
            return ps_error_set (err, PS_ETOOBIG, "file %s: cannot allocate the evicted ids",
                                 file->path);
        s_row_t *row = NULL;
        uint32_t pos = st->index ? s_probe (self, st, id, hash, &row) : 0;
        if (row)
            s_evict_at (self, st, pos);
        else
            st->evicted [st->nevicted++] = id;
    }
    return PS_OK;
}

//  Build the table from a verified full file and, when incr is not NULL,
//  the verified incremental file that follows it.
static ps_sparse_t *
s_build (const ps_sparse_file_t *full, const ps_sparse_file_t *incr, ps_error_t *err)
{
    const ps_sparse_file_t *last = incr ? incr : full;
    ps_sparse_t *self = ps_sparse_new (&full->header.spec, err);
    if (!self)
        return NULL;
    int rc = PS_OK;
    if (self->sketch_width != last->header.sketch_width)
        rc = ps_error_set (err, PS_ECORRUPT, "file %s: sketch width %u, expected %u for the "
                           "table's admission settings", last->path, last->header.sketch_width,
                           self->sketch_width);
    ps_ledger_t *ledger = NULL;
    if (rc == PS_OK) {
        ps_error_t ledger_err;
        ledger = ps_ledger_decode (last->ledger, (size_t) last->header.ledger_len, &ledger_err);
        if (!ledger)
            rc = ps_error_set (err, PS_ECORRUPT, "file %s: %s", last->path, ledger_err.msg);
    }
    if (ledger) {
        ps_ledger_destroy (&self->ledger);
        self->ledger = ledger;
    }
    self->newest_step = last->header.newest_step;
    size_t sketch_bytes = (size_t) PS_SPARSE_SKETCH_DEPTH * self->sketch_width;
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES && rc == PS_OK; s++) {
        s_stripe_t *st = &self->stripes [s];
        st->track_evicted = true;
        st->last_sweep = last->sections [s].last_sweep;
        if (sketch_bytes)
            memcpy (st->sketch, last->sections [s].sketch, sketch_bytes);
        rc = s_load_rows (self, s, full, self->newest_step, err);
        if (rc == PS_OK && incr)
            rc = s_load_evicted (self, s, incr, err);
        if (rc == PS_OK && incr)
            rc = s_load_rows (self, s, incr, self->newest_step, err);
        //  Counters start again at a restore (ps_sparse.h).
        st->created = st->evictions = st->dropped = st->row_updates = 0;
    }
    if (rc) {
        ps_sparse_destroy (&self);
        return NULL;
    }
    self->has_base = true;
    self->base_size = full->size;
    self->base_crc = full->crc;
    return self;
}

ps_sparse_t *
ps_sparse_load (const char *full_path, const char *incr_path, ps_error_t *err)
{
    assert (full_path);
    ps_sparse_file_t full, incr;
    int rc = ps_sparse_file_open (full_path, &full, err);
    if (rc)
        return NULL;
    if (!full.header.full) {
        ps_error_set (err, PS_EINVAL, "file %s: an incremental snapshot, expected a full one",
                      full_path);
        ps_sparse_file_close (&full);
        return NULL;
    }
    if (incr_path) {
        rc = ps_sparse_file_open (incr_path, &incr, err);
        if (rc) {
            ps_sparse_file_close (&full);
            return NULL;
        }
        char diff [256];
        if (incr.header.full)
            rc = ps_error_set (err, PS_EINVAL, "file %s: a full snapshot, expected an "
                               "incremental one", incr_path);
        else
        if (incr.header.base_size != full.size || incr.header.base_crc != full.crc)
            rc = ps_error_set (err, PS_EINVAL, "file %s: follows a full snapshot of %llu bytes "
                               "with CRC 0x%08x, not %s (%llu bytes, CRC 0x%08x)", incr_path,
                               (unsigned long long) incr.header.base_size, incr.header.base_crc,
                               full_path, (unsigned long long) full.size, full.crc);
        else
        if (ps_tablespec_differs (&incr.header.spec, &full.header.spec, diff, sizeof diff))
            rc = ps_error_set (err, PS_EINVAL, "file %s: the spec differs from %s's: %s",
                               incr_path, full_path, diff);
    }
    ps_sparse_t *self = rc ? NULL : s_build (&full, incr_path ? &incr : NULL, err);
    ps_sparse_file_close (&full);
    if (incr_path)
        ps_sparse_file_close (&incr);
    return self;
}

//  --------------------------------------------------------------------
//  Comparing

//  Compare stripe s of a and b, whose locks are held.
static bool
s_stripe_differs (ps_sparse_t *a, ps_sparse_t *b, uint32_t s, char *buf, size_t len)
{
    const char *name = a->spec.name;
    const s_stripe_t *x = &a->stripes [s], *y = &b->stripes [s];
    if (x->rows != y->rows) {
        snprintf (buf, len, "table %s: stripe %u holds %u rows, not %u", name, s, x->rows, y->rows);
        return true;
    }
    if (x->last_sweep != y->last_sweep) {
        snprintf (buf, len, "table %s: stripe %u was swept at step %llu, not %llu", name, s,
                  (unsigned long long) x->last_sweep, (unsigned long long) y->last_sweep);
        return true;
    }
    size_t sketch_bytes = (size_t) PS_SPARSE_SKETCH_DEPTH * a->sketch_width;
    if (sketch_bytes && memcmp (x->sketch, y->sketch, sketch_bytes) != 0) {
        snprintf (buf, len, "table %s: stripe %u's admission counters differ", name, s);
        return true;
    }
    uint32_t floats = a->spec.dim * (1 + a->nslots);
    for (uint64_t pos = 0; x->index && pos <= x->mask; pos++) {
        if (!x->index [pos])
            continue;
        const s_row_t *p = s_row (a, x, x->index [pos] - 1);
        uint32_t slot = s_find (b, y, p->id, ps_sparse_hash (p->id));
        if (slot == S_NO_SLOT) {
            snprintf (buf, len, "table %s: row %llu is missing", name, (unsigned long long) p->id);
            return true;
        }
        const s_row_t *q = s_row (b, y, slot);
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
                          (unsigned long long) p->id, j < a->spec.dim ? "value" : "slots",
                          j < a->spec.dim ? j : j - a->spec.dim, p->data [j], q->data [j]);
                return true;
            }
    }
    return false;
}

bool
ps_sparse_differs (ps_sparse_t *a, ps_sparse_t *b, char *buf, size_t len)
{
    assert (a);
    assert (b);
    char scratch [8];
    if (!buf || !len) {
        buf = scratch;
        len = sizeof scratch;
    }
    if (ps_tablespec_differs (&a->spec, &b->spec, buf, len))
        return true;
    const char *name = a->spec.name;
    pthread_mutex_lock (&a->ledger_lock);
    pthread_mutex_lock (&b->ledger_lock);
    bool differs = true;
    if (!ps_ledger_equal (a->ledger, b->ledger))
        snprintf (buf, len, "table %s: the ledgers differ (%llu and %llu steps)", name,
                  (unsigned long long) ps_ledger_count (a->ledger),
                  (unsigned long long) ps_ledger_count (b->ledger));
    else
    if (a->newest_step != b->newest_step)
        snprintf (buf, len, "table %s: newest step %llu, not %llu", name,
                  (unsigned long long) a->newest_step, (unsigned long long) b->newest_step);
    else
        differs = false;
    pthread_mutex_unlock (&b->ledger_lock);
    pthread_mutex_unlock (&a->ledger_lock);
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES && !differs; s++) {
        pthread_mutex_lock (&a->stripes [s].lock);
        pthread_mutex_lock (&b->stripes [s].lock);
        differs = s_stripe_differs (a, b, s, buf, len);
        pthread_mutex_unlock (&b->stripes [s].lock);
        pthread_mutex_unlock (&a->stripes [s].lock);
    }
    return differs;
}
