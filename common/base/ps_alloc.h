//  Allocation that a process cannot go on without: the small arrays a
//  module sizes once, at its creation, by counts it has already bounded
//  (servers, tables, variables). Out of memory there is no state to
//  unwind to, so the process aborts rather than hand back NULL; large or
//  data-sized buffers are not for this and report PS_ETOOBIG instead.

#ifndef PS_ALLOC_H_INCLUDED
#define PS_ALLOC_H_INCLUDED

#include <stdlib.h>

//  Zeroed memory for count elements of size bytes, at least one element
//  (so a count of zero still gives a pointer that free takes and that is
//  not NULL). Aborts when the memory cannot be had.
static inline void *
ps_calloc_or_abort (size_t count, size_t size)
{
    void *p = calloc (count ? count : 1, size);
    if (!p)
        abort ();
    return p;
}

#endif
