//  NumPy .npy files: one array, a header that says its element type,
//  order and shape, then the elements. The file is memory-mapped, not
//  read, so an array larger than the machine's memory is paged in as it
//  is used: a data set of features is read a batch at a time.
//
//  Formats 1.0, 2.0 and 3.0 are read (they differ in the header's length
//  field and encoding). Little-endian and single-byte element types are
//  taken; C order only (a Fortran-order array is refused, naming it).
//  Every failure names the file and what was wrong: a header that does
//  not parse, an element type that is not one of ps_npy_dtype_t, data
//  shorter than the shape says (a truncated file).

#ifndef PS_NPY_H_INCLUDED
#define PS_NPY_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"

#define PS_NPY_MAX_RANK 8

typedef enum {
    PS_NPY_U8, PS_NPY_I8, PS_NPY_U16, PS_NPY_I16, PS_NPY_U32, PS_NPY_I32, PS_NPY_U64,
    PS_NPY_I64, PS_NPY_F32, PS_NPY_F64,
} ps_npy_dtype_t;

typedef struct {
    ps_npy_dtype_t dtype;
    char descr [8];             //  as the header says it: "<f4", "|u1"
    int itemsize;               //  bytes per element
    int rank;
    uint64_t dims [PS_NPY_MAX_RANK];
    size_t count;               //  product of dims
    const void *data;           //  count elements in the map; NULL after a header read
    void *map;                  //  the mapping, or NULL
    size_t map_len;
} ps_npy_t;

//  True when the file at path starts with the .npy magic (\x93NUMPY).
//  Returns 0 with *is_npy set, or PS_ENOTFOUND / PS_EIO naming the file.
int ps_npy_sniff (const char *path, bool *is_npy, ps_error_t *err);

//  Map the file at path into *out (ps_npy_close unmaps it). Returns 0,
//  PS_ENOTFOUND, PS_EIO, or PS_ECORRUPT for a header that does not parse,
//  an element type not supported, Fortran order or a truncated file.
int ps_npy_open (const char *path, ps_npy_t *out, ps_error_t *err);

//  Read only the header, checked as ps_npy_open checks it (the file's
//  length included), into *out, whose data stays NULL.
int ps_npy_read_header (const char *path, ps_npy_t *out, ps_error_t *err);

//  Unmap and zero *npy; harmless on a zeroed one.
void ps_npy_close (ps_npy_t *npy);

//  Element i as an integer, for an integer type (labels); the caller
//  checked the type.
int64_t ps_npy_int (const ps_npy_t *npy, size_t i);

#endif
