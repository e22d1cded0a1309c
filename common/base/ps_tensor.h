//  A tensor view: a named float32 array of some shape, borrowed from its
//  owner. It is how a set of whole variables (a model's, joined from a
//  checkpoint's partitions) is handed to the writers of the tensor file
//  formats (ps_safetensors.h, ps_npz.h), which know nothing of models or
//  checkpoints, and how ps_safetensors.h hands back what it read.

#ifndef PS_TENSOR_H_INCLUDED
#define PS_TENSOR_H_INCLUDED

#include "ps_shape.h"

typedef struct {
    const char *name;           //  the variable's name: conv2d/kernel
    ps_shape_t shape;
    const float *data;          //  ps_shape_count (&shape) floats, row-major
} ps_tensor_t;

#endif
