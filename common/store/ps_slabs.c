//  The memory of a sparse table's slabs; see ps_slabs.h.

#include "ps_log.h"
#include "ps_slabs.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>

#define S_REGION  ((size_t) 2 << 20)

//  A mapping: a shared region of S_REGION bytes, or one large slab's own.
typedef struct {
    uint8_t *base;
    size_t len;
} s_map_t;

//  Block sizes that share regions: PS_SLABS_BLOCK_MIN << c for class c.
#define S_CLASSES  5

//  A region of blocks of one size: bit b of used is block b, held now.
typedef struct {
    uint8_t *base;
    uint32_t used;
} s_blocks_t;

struct _ps_slabs_t {
    pthread_mutex_t lock;
    s_map_t *maps;
    size_t nmaps, cap;
    uint8_t *region;            //  the region slabs are carved out of now
    size_t used;                //  bytes handed out of it
    s_blocks_t *blocks [S_CLASSES];
    size_t nblocks [S_CLASSES], blocks_cap [S_CLASSES];
    size_t block_mapped;        //  bytes mapped for blocks
};

ps_slabs_t *
ps_slabs_new (void)
{
    ps_slabs_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    if (pthread_mutex_init (&self->lock, NULL) != 0)
        abort ();
    return self;
}

void
ps_slabs_destroy (ps_slabs_t **self_p)
{
    assert (self_p);
    ps_slabs_t *self = *self_p;
    if (!self)
        return;
    //  Unmapping a region from the middle of a larger mapping splits it,
    //  which fails past the kernel's limit of mappings: the region then
    //  stays until the process exits, said once.
    bool logged = false;
    for (size_t i = 0; i < self->nmaps; i++)
        if (munmap (self->maps [i].base, self->maps [i].len) != 0 && !logged) {
            ps_error ("sparse table slabs: munmap: %s (memory kept until exit)",
                      strerror (errno));
            logged = true;
        }
    free (self->maps);
    //  Blocks are freed by their holders first; a region some still hold
    //  is unmapped all the same.
    for (int c = 0; c < S_CLASSES; c++) {
        for (size_t i = 0; i < self->nblocks [c]; i++)
            if (munmap (self->blocks [c][i].base, S_REGION) != 0 && !logged) {
                ps_error ("sparse table index blocks: munmap: %s", strerror (errno));
                logged = true;
            }
        free (self->blocks [c]);
    }
    pthread_mutex_destroy (&self->lock);
    free (self);
    *self_p = NULL;
}

//  A new mapping of len bytes (a multiple of S_REGION) aligned to
//  S_REGION: mapped a region larger, and the unaligned head and tail given
//  back. NULL when memory cannot be had.
static void *
s_map_aligned (size_t len)
{
    uint8_t *base = mmap (NULL, len + S_REGION, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    uintptr_t start = ((uintptr_t) base + S_REGION - 1) & ~(uintptr_t) (S_REGION - 1);
    uint8_t *region = (uint8_t *) start;
    size_t head = (size_t) (region - base);
    size_t tail = S_REGION - head;
    //  Trimming splits the mapping, which fails past the kernel's limit of
    //  mappings. What is left mapped is then never touched (it holds no
    //  memory, only addresses), and memory could not be had.
    if ((head && munmap (base, head) != 0)
    ||  (tail && munmap (region + len, tail) != 0)) {
        ps_error ("sparse table slabs: munmap: %s", strerror (errno));
        return NULL;
    }
    //  A kernel without transparent huge pages refuses (EINVAL): the region
    //  is then ordinary memory, and only the speed differs.
    if (madvise (region, len, MADV_HUGEPAGE) != 0 && errno != EINVAL)
        ps_error ("sparse table slabs: madvise: %s", strerror (errno));
    return region;
}

static void *
s_region_map (void)
{
    return s_map_aligned (S_REGION);
}

//  Record a mapping, to be unmapped with the slabs. Returns 0, or -1
//  when the list cannot grow (the mapping is then the caller's).
static int
s_record (ps_slabs_t *self, uint8_t *base, size_t len)
{
    if (self->nmaps == self->cap) {
        size_t cap = self->cap ? 2 * self->cap : 16;
        s_map_t *maps = realloc (self->maps, cap * sizeof *maps);
        if (!maps)
            return -1;
        self->maps = maps;
        self->cap = cap;
    }
    self->maps [self->nmaps++] = (s_map_t) { base, len };
    return 0;
}

void *
ps_slabs_alloc (ps_slabs_t *self, size_t bytes)
{
    assert (self);
    bytes = (bytes + 63) & ~(size_t) 63;
    uint8_t *slab = NULL;
    pthread_mutex_lock (&self->lock);
    if (bytes > PS_SLABS_MAX) {
        //  A slab of a few very wide rows: its own mapping, since it would
        //  leave too much of a region unused.
        slab = mmap (NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (slab == MAP_FAILED)
            slab = NULL;
        else
        if (s_record (self, slab, bytes)) {
            if (munmap (slab, bytes) != 0)
                ps_error ("sparse table slabs: munmap: %s", strerror (errno));
            slab = NULL;
        }
    }
    else {
        if (!self->region || self->used + bytes > S_REGION) {
            uint8_t *region = s_region_map ();
            if (!region)
                goto done;
            if (s_record (self, region, S_REGION)) {
                if (munmap (region, S_REGION) != 0)
                    ps_error ("sparse table slabs: munmap: %s", strerror (errno));
                goto done;
            }
            self->region = region;
            self->used = 0;
        }
        //  A fresh mapping reads as zeros, and no slab is handed out twice.
        slab = self->region + self->used;
        self->used += bytes;
    }
done:
    pthread_mutex_unlock (&self->lock);
    return slab;
}

//  --------------------------------------------------------------------
//  Index blocks

//  The class of a block size shared in regions, or -1.
static int
s_block_class (size_t bytes)
{
    for (int c = 0; c < S_CLASSES; c++)
        if (bytes == (size_t) PS_SLABS_BLOCK_MIN << c)
            return c;
    return -1;
}

//  A block of class c: one free in a region of the class, else the first
//  of a new region. Under the lock.
static void *
s_block_take (ps_slabs_t *self, int c)
{
    size_t size = (size_t) PS_SLABS_BLOCK_MIN << c;
    uint32_t full = (uint32_t) ((UINT64_C (1) << (S_REGION / size)) - 1);
    s_blocks_t *r = NULL;
    for (size_t i = 0; i < self->nblocks [c] && !r; i++)
        if (self->blocks [c][i].used != full)
            r = &self->blocks [c][i];
    if (!r) {
        if (self->nblocks [c] == self->blocks_cap [c]) {
            size_t cap = self->blocks_cap [c] ? 2 * self->blocks_cap [c] : 8;
            s_blocks_t *grown = realloc (self->blocks [c], cap * sizeof *grown);
            if (!grown)
                return NULL;
            self->blocks [c] = grown;
            self->blocks_cap [c] = cap;
        }
        uint8_t *base = s_region_map ();
        if (!base)
            return NULL;
        self->block_mapped += S_REGION;
        r = &self->blocks [c][self->nblocks [c]++];
        *r = (s_blocks_t) { base, 0 };
    }
    uint32_t b = (uint32_t) __builtin_ctz (~r->used);
    uint8_t *block = r->base + (size_t) b * size;
    //  A block may have been held before; the index that takes it writes
    //  most of its pages anyway.
    memset (block, 0, size);
    r->used |= UINT32_C (1) << b;
    return block;
}

void *
ps_slabs_block (ps_slabs_t *self, size_t bytes)
{
    assert (self);
    assert (bytes && (bytes & (bytes - 1)) == 0);
    if (bytes < PS_SLABS_BLOCK_MIN)
        return calloc (1, bytes);
    void *block = NULL;
    pthread_mutex_lock (&self->lock);
    int c = s_block_class (bytes);
    if (c >= 0)
        block = s_block_take (self, c);
    else {
        //  A fresh mapping reads as zeros.
        block = s_map_aligned (bytes);
        if (block)
            self->block_mapped += bytes;
    }
    pthread_mutex_unlock (&self->lock);
    return block;
}

void
ps_slabs_block_free (ps_slabs_t *self, void *block, size_t bytes)
{
    assert (self);
    if (!block)
        return;
    if (bytes < PS_SLABS_BLOCK_MIN) {
        free (block);
        return;
    }
    pthread_mutex_lock (&self->lock);
    int c = s_block_class (bytes);
    if (c < 0) {
        if (munmap (block, bytes) != 0)
            ps_error ("sparse table index blocks: munmap: %s", strerror (errno));
        else
            self->block_mapped -= bytes;
    }
    else {
        size_t size = (size_t) PS_SLABS_BLOCK_MIN << c;
        uint8_t *p = block;
        size_t i = 0;
        while (i < self->nblocks [c]
           &&  !(p >= self->blocks [c][i].base && p < self->blocks [c][i].base + S_REGION))
            i++;
        assert (i < self->nblocks [c]);
        s_blocks_t *r = &self->blocks [c][i];
        r->used &= ~(UINT32_C (1) << ((size_t) (p - r->base) / size));
        //  An empty region goes back to the kernel; one that cannot be
        //  unmapped stays, to be used again.
        if (r->used == 0) {
            if (munmap (r->base, S_REGION) != 0)
                ps_error ("sparse table index blocks: munmap: %s", strerror (errno));
            else {
                self->block_mapped -= S_REGION;
                *r = self->blocks [c][--self->nblocks [c]];
            }
        }
    }
    pthread_mutex_unlock (&self->lock);
}

size_t
ps_slabs_block_mapped (ps_slabs_t *self)
{
    assert (self);
    pthread_mutex_lock (&self->lock);
    size_t mapped = self->block_mapped;
    pthread_mutex_unlock (&self->lock);
    return mapped;
}
