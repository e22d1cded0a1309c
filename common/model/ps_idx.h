//  IDX files: the format of MNIST and Fashion-MNIST (a big-endian header
//  of magic, element type and dimensions, then the elements), read through
//  zlib so that gzip-compressed and raw files are both accepted.
//
//  The reader checks the magic number, the element type (only unsigned
//  bytes, 0x08, which is what the data sets use), the rank and dimensions,
//  and that the data is exactly as long as the header says. Any failure,
//  a truncated or corrupt gzip stream included, gives an error naming the
//  file and what was wrong; nothing is returned half read.

#ifndef PS_IDX_H_INCLUDED
#define PS_IDX_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"

#define PS_IDX_MAX_RANK 4

typedef struct {
    int rank;
    uint32_t dims [PS_IDX_MAX_RANK];
    size_t count;               //  product of dims
    uint8_t *data;              //  count bytes, owned
} ps_idx_t;

//  Read the file at path into *out (freed with ps_idx_free). Returns 0,
//  PS_ENOTFOUND when it is missing, PS_EINVAL when it is not a regular
//  file (ps_file_open_regular: a FIFO is never waited on), PS_EIO when it
//  cannot be opened or read, PS_ECORRUPT when its contents are not a valid
//  unsigned-byte IDX file.
int ps_idx_read (const char *path, ps_idx_t *out, ps_error_t *err);
void ps_idx_free (ps_idx_t *idx);

//  Read only the header of the file at path: *out receives rank, dims and
//  count, with data NULL (ps_idx_free is not needed, but harmless). The
//  header is checked as ps_idx_read checks it; the data is neither read
//  nor checked, so a file whose data is short passes here and fails
//  ps_idx_read. Returns 0 or an error code as ps_idx_read does.
int ps_idx_read_header (const char *path, ps_idx_t *out, ps_error_t *err);

#endif
