//  Heap tuning; see ps_heap.h.

#include "ps_heap.h"

#include <malloc.h>

//  The largest block glibc keeps in the heap, and the free heap it keeps
//  mapped; see ps_heap.h for why these values.
#define S_MMAP_THRESHOLD  (32 * 1024 * 1024)
#define S_TRIM_THRESHOLD  (32 * 1024 * 1024)

int
ps_heap_tune (ps_error_t *err)
{
    //  mallopt returns 1 on success and 0 on error.
    if (mallopt (M_MMAP_THRESHOLD, S_MMAP_THRESHOLD) != 1)
        return ps_error_set (err, PS_EINVAL, "mallopt (M_MMAP_THRESHOLD, %d) was refused",
                             S_MMAP_THRESHOLD);
    if (mallopt (M_TRIM_THRESHOLD, S_TRIM_THRESHOLD) != 1)
        return ps_error_set (err, PS_EINVAL, "mallopt (M_TRIM_THRESHOLD, %d) was refused",
                             S_TRIM_THRESHOLD);
    return PS_OK;
}

int
ps_heap_one_arena (ps_error_t *err)
{
    if (mallopt (M_ARENA_MAX, 1) != 1)
        return ps_error_set (err, PS_EINVAL, "mallopt (M_ARENA_MAX, 1) was refused");
    return PS_OK;
}

void
ps_heap_release (void)
{
    malloc_trim (0);
}
