//  Float arrays for tensors held in memory: partition values, optimizer
//  slots, arrays read from snapshots. They are 64-byte aligned, so the
//  vectorised kernels load whole cache lines, and their size usually comes
//  from a peer's request or a file, so failing to allocate one is an error
//  to report, not a reason to abort. Also the scan that keeps NaN and
//  infinities out of them, and the arithmetic mode the programs compute in.

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

//  Make the calling thread, and the threads it creates afterwards, flush
//  subnormal results and operands to zero (x86-64: MXCSR's FTZ and DAZ;
//  AArch64: FPCR.FZ), as TensorFlow's compute threads do. Adam's second
//  moment of a weight whose gradients are tiny sinks into the subnormal
//  range (a few percent of the seed CNN's dense kernel after two epochs),
//  and the CPU takes a slow microcode path for every operation on such a
//  value: on an Intel Xeon a training step took twice as long in the
//  second epoch as in the first. Values that small carry nothing a model
//  uses. Each program calls this at the top of main.
void ps_floats_flush_subnormals (void);

#endif
