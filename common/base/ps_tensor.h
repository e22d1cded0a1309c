//  A tensor view: a named array of some shape, borrowed from its owner. It
//  is how a set of whole variables (a model's, joined from a checkpoint's
//  partitions) and embedding tables (ids and rows joined from a
//  checkpoint's shard files) are handed to the writers of the tensor file
//  formats (ps_safetensors.h, ps_npz.h), which know nothing of models or
//  checkpoints, and how ps_safetensors.h hands back what it read.
//
//  A tensor's elements are float32 (the default) or uint64 (a table's
//  ids). Its data is either in memory (data, float32 only) or produced on
//  demand by fill, chunk by chunk in order, so that a table of millions
//  of rows is written from the shard files it lives in without a copy of
//  it in memory.

#ifndef PS_TENSOR_H_INCLUDED
#define PS_TENSOR_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_shape.h"

typedef enum {
    PS_DTYPE_F32 = 0,           //  float32, little-endian
    PS_DTYPE_U64,               //  uint64, little-endian
} ps_dtype_t;

//  Write len bytes of the tensor's data, from byte offset at, into buf.
//  The writers call it with consecutive ranges from 0 to the tensor's
//  size; it cannot fail (what it reads is verified before the writing
//  starts).
typedef void (ps_tensor_fill_fn) (void *arg, uint64_t at, void *buf, size_t len);

typedef struct {
    const char *name;           //  the variable's name: conv2d/kernel
    ps_shape_t shape;
    const float *data;          //  ps_shape_count (&shape) floats, row-major; or NULL:
    ps_tensor_fill_fn *fill;    //  fill (fill_arg, ...) gives the bytes
    void *fill_arg;
    ps_dtype_t dtype;
} ps_tensor_t;

//  Bytes of one element of dtype.
static inline size_t
ps_dtype_size (ps_dtype_t dtype)
{
    return dtype == PS_DTYPE_U64 ? 8 : 4;
}

//  Bytes of the tensor's data.
static inline uint64_t
ps_tensor_bytes (const ps_tensor_t *t)
{
    return (uint64_t) ps_shape_count (&t->shape) * ps_dtype_size (t->dtype);
}

//  Write the tensor's data to fd (from memory, or through fill in chunks
//  of a bounded buffer), folding it into *crc (zlib's CRC-32) unless crc
//  is NULL. Returns 0, or -1 with errno set.
int ps_tensor_write (const ps_tensor_t *t, int fd, uint32_t *crc);

#endif
