//  CTR data files, Criteo or LIBSVM text, plain or gzip, read as line
//  ranges: what a step of CTR training is made of.
//
//  Opening a file finds or builds its line index (ps_ctrindex.h), so the
//  number of lines is known at once and a read of lines [first, first +
//  count) starts at the nearest access point instead of the file's start:
//  the coordinator can hand out batch b as lines [b * batch, (b + 1) *
//  batch) to any worker, and a resumed run reads exactly what it would
//  have read. The data is streamed: memory stays bounded (a few MiB per
//  open file) whatever the file's size. Malformed lines are skipped and
//  counted, in the index for the whole file and in each batch for its
//  range; a file of which more than half of the lines are malformed is
//  refused at open, naming the first bad line and what was wrong with it.
//  An open file serves one thread at a time.

#ifndef PS_CTRDATA_H_INCLUDED
#define PS_CTRDATA_H_INCLUDED

#include <stdint.h>

#include "ps_ctrbatch.h"
#include "ps_ctrindex.h"
#include "ps_error.h"

typedef struct _ps_ctrfile_t ps_ctrfile_t;

//  Open the data file at path in format. opts (NULL: the defaults) says
//  where an index that cannot go next to the file goes. NULL on error with
//  err naming the file: PS_ENOTFOUND, PS_EINVAL for what is not a regular
//  file, PS_EIO, PS_ECORRUPT for a damaged or truncated gzip stream or a
//  file mostly malformed, PS_ETOOBIG when out of memory.
ps_ctrfile_t *ps_ctrfile_open (const char *path, ps_ctrformat_t format,
                               const ps_ctrindex_opts_t *opts, ps_error_t *err);

//  Close the file and set the caller's pointer to NULL.
void ps_ctrfile_destroy (ps_ctrfile_t **self_p);

//  The file's index: its line counts, where it is stored, whether this
//  open built it.
const ps_ctrindex_t *ps_ctrfile_index (const ps_ctrfile_t *self);

//  The number of lines, malformed ones included: the range steps are cut
//  from.
uint64_t ps_ctrfile_lines (const ps_ctrfile_t *self);

//  Read lines [first_line, first_line + count) into batch (emptied
//  first), skipping the malformed ones: batch->lines = count and
//  batch->malformed say how many were skipped. Reading on from where the
//  last read ended continues without seeking. Returns 0; PS_EINVAL when
//  the range is not inside the file, the batch has room for fewer than
//  count examples or is of another format; PS_EIO or PS_ECORRUPT naming
//  the file (a damaged gzip stream, a file changed since it was indexed).
//  On error the batch is left empty.
int ps_ctrfile_read (ps_ctrfile_t *self, uint64_t first_line, uint64_t count,
                     ps_ctrbatch_t *batch, ps_error_t *err);

#endif
