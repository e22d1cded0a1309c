//  safetensors files (https://github.com/huggingface/safetensors): the
//  format PyTorch and NumPy users load a set of named tensors from. A file
//  is an 8-byte little-endian header length N, N bytes of JSON, then the
//  raw data. The JSON object maps each tensor's name to {"dtype", "shape",
//  "data_offsets": [begin, end]}, the offsets counted from the start of
//  the data; an optional "__metadata__" maps strings to strings.
//
//  We write float32 ("F32") and uint64 ("U64": an embedding table's ids)
//  tensors, in the order given, packed one after the other, with the
//  header padded with spaces to a multiple of 8 bytes (as the reference
//  writer does) so that the data is aligned; a tensor with a fill
//  function is written through a bounded buffer (ps_tensor.h). The
//  file is replaced atomically (ps_file_write_atomic): a failed write
//  leaves no partial file. The reader takes what the writer writes and
//  checks everything the format promises, so ps-worker predict can load
//  an export's float32 tensors; other dtypes (U64 included) are refused,
//  naming the tensor.

#ifndef PS_SAFETENSORS_H_INCLUDED
#define PS_SAFETENSORS_H_INCLUDED

#include <jansson.h>

#include "ps_error.h"
#include "ps_tensor.h"

typedef struct _ps_safetensors_t ps_safetensors_t;

//  Write count tensors to path, with metadata (may be NULL; an object of
//  string values only, or PS_EINVAL) as "__metadata__". Tensor names must
//  be distinct and not "__metadata__" (PS_EINVAL). Returns 0, or PS_EIO
//  naming path and the failing call; the file at path is then as it was.
int ps_safetensors_write (const char *path, const ps_tensor_t *tensors, int count,
                          const json_t *metadata, ps_error_t *err);

//  Read and check the file at path: a header length that fits the file, a
//  JSON object with no duplicate key, F32 tensors of rank 1..8 with
//  positive dimensions whose data_offsets lie in the data and hold exactly
//  their elements, and string metadata. NULL on error with a message
//  naming the file (and the tensor): PS_ENOTFOUND, PS_EIO, PS_EINVAL (not
//  a regular file) or PS_ECORRUPT.
ps_safetensors_t *ps_safetensors_read (const char *path, ps_error_t *err);
void ps_safetensors_destroy (ps_safetensors_t **self_p);

//  The tensors read, in the header's order (each data owned by self).
int ps_safetensors_count (const ps_safetensors_t *self);
const ps_tensor_t *ps_safetensors_tensor (const ps_safetensors_t *self, int index);

//  The tensor called name, or NULL.
const ps_tensor_t *ps_safetensors_find (const ps_safetensors_t *self, const char *name);

//  The metadata value of key, or NULL when the file has none.
const char *ps_safetensors_metadata (const ps_safetensors_t *self, const char *key);

#endif
