//  The memory of a sparse table's slabs, on transparent huge pages.
//
//  A table of millions of rows is read and written at random: every row
//  a pull or push touches is a TLB miss on 4 KiB pages, whose page walk
//  costs about as much as the row's own cache misses (bench_sparse measured
//  1.5x on pulls and pushes of a 10M-row table). On 2 MiB pages the walks
//  mostly vanish. The kernel gives huge pages to a range only when asked
//  (madvise MADV_HUGEPAGE, the default "madvise" setting of
//  /sys/kernel/mm/transparent_hugepage/enabled) and only for whole,
//  aligned 2 MiB ranges, while a stripe's slabs are at most 256 KiB so
//  that a small stripe stays small. So the slabs of all of a table's
//  stripes are carved, in turn, out of shared 2 MiB regions: a table
//  wastes at most the unused end of its last region. Slabs are never freed
//  one by one (a stripe reuses its rows' slots instead); every region goes
//  when the table does.
//
//  Where the kernel has no huge pages to give (disabled, or none free),
//  the regions are ordinary memory and only the speed differs.

#ifndef PS_SLABS_H_INCLUDED
#define PS_SLABS_H_INCLUDED

#include <stddef.h>

typedef struct _ps_slabs_t ps_slabs_t;

//  Slabs with no region yet.
ps_slabs_t *ps_slabs_new (void);

//  Free every slab; sets *self_p to NULL.
void ps_slabs_destroy (ps_slabs_t **self_p);

//  A slab of bytes, 64-byte aligned and zeroed, or NULL when memory cannot
//  be had. Safe from several threads. A slab over PS_SLABS_MAX bytes (16
//  rows of thousands of floats) gets a mapping of its own.
void *ps_slabs_alloc (ps_slabs_t *self, size_t bytes);

//  The largest slab carved out of a region: an eighth of it, so a region's
//  unused end is never more than that when a slab does not fit.
#define PS_SLABS_MAX  (256 * 1024)

//  A block of bytes (a power of two) for a stripe's index, zeroed, or NULL
//  when memory cannot be had. Safe from several threads. An index is read
//  at random like the rows, and a table's indexes together are tens of
//  MiB, so on 4 KiB pages each lookup's entry would cost a TLB miss too.
//  Unlike slabs, an index is freed when it doubles, so blocks are not
//  carved for good: from PS_SLABS_BLOCK_MIN to half a region, blocks of
//  one size share regions, a freed block is the next of its size handed
//  out, and a region whose blocks are all free is unmapped (the stripes
//  of a table grow together, so the regions of the smaller sizes empty as
//  they do); from a region's size up, a block is a huge-page mapping of
//  its own; below PS_SLABS_BLOCK_MIN, it is calloc's.
void *ps_slabs_block (ps_slabs_t *self, size_t bytes);

//  Give back a block of ps_slabs_block of this size (NULL: nothing).
void ps_slabs_block_free (ps_slabs_t *self, void *block, size_t bytes);

//  Bytes mapped for blocks now, regions and own mappings (not calloc's).
size_t ps_slabs_block_mapped (ps_slabs_t *self);

#define PS_SLABS_BLOCK_MIN  (64 * 1024)

#endif
