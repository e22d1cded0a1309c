//  Fuzz target: the IDX reader (common/model/ps_idx), which reads the data
//  sets, raw or gzip-compressed (zlib tells them apart by the gzip magic).
//  The input is the file; it is written to the scratch directory and read
//  whole (ps_idx_read) and header only (ps_idx_read_header), as the data
//  set loader and the coordinator's data check do.
//
//  Oracles, beyond the sanitizers: a refusal names the file; an accepted
//  file's count is the product of its dimensions and every byte of its
//  data can be read; whatever the whole read accepts, the header read
//  accepts with the same rank and dimensions.

#include "fuzz_scratch.h"
#include "ps_idx.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
s_fail (const char *what, const char *detail)
{
    fprintf (stderr, "fuzz_idx: %s: %s\n", what, detail);
    abort ();
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char path [512];
    fuzz_scratch_write ("input.idx", data, size, path, sizeof path);
    ps_idx_t whole, header;
    ps_error_t err = { 0 };
    int rc = ps_idx_read (path, &whole, &err);
    if (rc != 0 && !strstr (err.msg, path))
        s_fail ("a refusal does not name the file", err.msg);
    int header_rc = ps_idx_read_header (path, &header, &err);
    if (header_rc != 0 && !strstr (err.msg, path))
        s_fail ("a refusal does not name the file", err.msg);
    if (rc == 0) {
        size_t count = 1;
        for (int i = 0; i < whole.rank; i++)
            count *= whole.dims [i];
        if (count != whole.count)
            s_fail ("the count is not the product of the dimensions", path);
        volatile unsigned sum = 0;
        for (size_t i = 0; i < whole.count; i++)
            sum += whole.data [i];
        (void) sum;
        if (header_rc != 0)
            s_fail ("the header read refuses what the whole read accepts", err.msg);
        if (header.rank != whole.rank || header.count != whole.count
        ||  memcmp (header.dims, whole.dims, sizeof header.dims) != 0 || header.data)
            s_fail ("the header read differs from the whole read", path);
        ps_idx_free (&whole);
    }
    if (header_rc == 0)
        ps_idx_free (&header);
    return 0;
}
