//  Float arrays for tensors held in memory: partition values, optimizer
//  slots, arrays read from snapshots. They are 64-byte aligned, so the
//  vectorised kernels load whole cache lines, and their size usually comes
//  from a peer's request or a file, so failing to allocate one is an error
//  to report, not a reason to abort. Also the scan that keeps NaN and
//  infinities out of them.

#ifndef PS_FLOATS_H_INCLUDED
#define PS_FLOATS_H_INCLUDED

#include <stddef.h>

//  Allocate n floats, 64-byte aligned (free with free ()). Returns NULL
//  when the memory cannot be had or n * 4 bytes overflows.
float *ps_floats_alloc (size_t n);

//  The index of the first element of x [0..n) that is NaN or infinite, or n
//  when every one is finite. x need not be aligned. The scan is
//  vectorised and reads x once, at close to memory bandwidth.
size_t ps_floats_find_nonfinite (const float *x, size_t n);

#endif
