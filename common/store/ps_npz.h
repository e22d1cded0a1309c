//  NumPy .npz files: what numpy.load reads a set of named arrays from. An
//  .npz file is a zip archive holding one NAME.npy file per array; a .npy
//  file is the magic "\x93NUMPY", format version 1.0, a little-endian
//  16-bit header length, a Python dict literal giving dtype, order and
//  shape (padded with spaces and a newline so that the data starts at a
//  multiple of 64 bytes), then the raw data
//  (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
//
//  We write float32 ('<f4') and uint64 ('<u8': an embedding table's ids)
//  arrays in C order, stored in the zip without compression (weights
//  hardly compress, and stored entries need no inflater to check), with a
//  fixed 1980-01-01 time so that the same tensors give the same bytes. An
//  entry's CRC-32 is summed as its data is written and then put into its
//  local header, so that a tensor with a fill function (ps_tensor.h) is
//  produced once, through a bounded buffer. An optional text entry "__metadata__.json"
//  carries what safetensors keeps in its header; numpy.load hands it back
//  as bytes (np.load(f)["__metadata__.json"]). Archives past the classic
//  zip limits (4 GiB, 65535 entries) would need zip64, which we do not
//  write; they are refused. The file is replaced atomically: a failed
//  write leaves no partial file.

#ifndef PS_NPZ_H_INCLUDED
#define PS_NPZ_H_INCLUDED

#include "ps_error.h"
#include "ps_tensor.h"

//  The name of the metadata entry.
#define PS_NPZ_METADATA "__metadata__.json"

//  Write count tensors to path, each as entry NAME.npy in the order given,
//  then metadata (may be NULL: no entry) as PS_NPZ_METADATA. Returns 0,
//  PS_ETOOBIG when the archive would need zip64, or PS_EIO naming path and
//  the failing call; the file at path is then as it was.
int ps_npz_write (const char *path, const ps_tensor_t *tensors, int count,
                  const char *metadata, ps_error_t *err);

#endif
