//  Heap tuning for processes that move large tensors through ZeroMQ.
//
//  ZeroMQ allocates every received message above a few kilobytes with
//  malloc, and frees it when the message is closed. With glibc's defaults a
//  freed 16 MB block tends to be returned to the kernel, so the next
//  message of the same size lands in fresh pages and pays a page fault per
//  4 KiB (about 4,000 per 16 MB). ps_heap_tune keeps blocks below 32 MiB in
//  the heap and lets up to 32 MiB of free heap stay mapped, so receive and
//  reply buffers are reused hot. Blocks of 32 MiB and more are still
//  mapped and unmapped per message: glibc cannot keep them in the heap,
//  and keeping them would break the server's memory bound.

#ifndef PS_HEAP_H_INCLUDED
#define PS_HEAP_H_INCLUDED

#include "ps_error.h"

//  Apply the tuning to this process. Call it once at start, before threads
//  are created. Returns 0, or PS_EINVAL when glibc refused a setting (the
//  process works as before, only slower).
int ps_heap_tune (ps_error_t *err);

//  Have every thread allocate from one heap (glibc's main arena) rather
//  than from an arena per thread: what a ps-server does, where ZeroMQ's I/O
//  thread allocates the received gradients and the serving thread the
//  pulls' replies. With an arena each, the free 16 MB block of the last
//  push could not hold the next pull's reply, so each kind of request kept
//  a block of its own; with one, they take turns in the same memory. The
//  server's threads allocate little else, so sharing one lock costs
//  nothing measurable. Call it before threads are created. Returns 0, or
//  PS_EINVAL when glibc refused.
int ps_heap_one_arena (ps_error_t *err);

//  Return the free heap to the kernel (malloc_trim): what a server does once
//  it falls idle after moving tensors, so a quiet server holds its model and
//  little else.
void ps_heap_release (void);

#endif
