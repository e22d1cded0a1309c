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

struct _ps_slabs_t {
    pthread_mutex_t lock;
    s_map_t *maps;
    size_t nmaps, cap;
    uint8_t *region;            //  the region slabs are carved out of now
    size_t used;                //  bytes handed out of it
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
    pthread_mutex_destroy (&self->lock);
    free (self);
    *self_p = NULL;
}

//  A new region, aligned to its size: mapped twice as large, and the
//  unaligned head and tail given back. NULL when memory cannot be had.
static void *
s_region_map (void)
{
    uint8_t *base = mmap (NULL, 2 * S_REGION, PROT_READ | PROT_WRITE,
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
    ||  (tail && munmap (region + S_REGION, tail) != 0)) {
        ps_error ("sparse table slabs: munmap: %s", strerror (errno));
        return NULL;
    }
    //  A kernel without transparent huge pages refuses (EINVAL): the region
    //  is then ordinary memory, and only the speed differs.
    if (madvise (region, S_REGION, MADV_HUGEPAGE) != 0 && errno != EINVAL)
        ps_error ("sparse table slabs: madvise: %s", strerror (errno));
    return region;
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
