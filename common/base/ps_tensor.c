//  Tensor views: see ps_tensor.h.

#include <stdlib.h>

#include "ps_file.h"
#include "ps_tensor.h"

//  The buffer a filled tensor goes through: large enough that a write is
//  a few hundred thousand elements, small enough not to count beside the
//  tables being written.
#define S_CHUNK  ((size_t) 1 << 20)

int
ps_tensor_write (const ps_tensor_t *t, int fd, uint32_t *crc)
{
    uint64_t bytes = ps_tensor_bytes (t);
    if (!t->fill)
        return ps_file_write_all (fd, t->data, (size_t) bytes, crc);
    uint8_t *buf = malloc (S_CHUNK);
    if (!buf)
        abort ();
    int rc = 0;
    for (uint64_t at = 0; rc == 0 && at < bytes; ) {
        size_t len = bytes - at < S_CHUNK ? (size_t) (bytes - at) : S_CHUNK;
        t->fill (t->fill_arg, at, buf, len);
        rc = ps_file_write_all (fd, buf, len, crc);
        at += len;
    }
    free (buf);
    return rc;
}
