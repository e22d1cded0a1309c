//  Float arrays for tensors held in memory: partition values, optimizer
//  slots, arrays read from snapshots. They are 64-byte aligned, so the
//  vectorised kernels load whole cache lines, and their size usually comes
//  from a peer's request or a file, so failing to allocate one is an error
//  to report, not a reason to abort.

#ifndef PS_FLOATS_H_INCLUDED
#define PS_FLOATS_H_INCLUDED

#include <stddef.h>

//  Allocate n floats, 64-byte aligned (free with free ()). Returns NULL
//  when the memory cannot be had or n * 4 bytes overflows.
float *ps_floats_alloc (size_t n);

#endif
