//  The lines of a CTR data file, plain or gzip-compressed, read from the
//  start or from an access point in the middle, in bounded memory.
//
//  An access point lets a reader start in the middle of the file: for a
//  plain file it is the byte offset of a line; for a gzip file it is a
//  deflate block boundary, as in zlib's examples/zran.c: the compressed
//  offset and bit where the block starts, and the 32 KiB of uncompressed
//  data before it, which the block may refer back to. A point also names
//  the first line that starts at or after it, and how many bytes lie
//  between, so that a reader starting there knows which line it is on.
//  While reading from the start a source can record points every `span`
//  bytes of uncompressed data: that is how the line index is built
//  (ps_ctrindex.h). Lines longer than PS_CTRSOURCE_LINE_MAX are skipped
//  whole and reported as such; the source never holds more than about
//  that much of the file.

#ifndef PS_CTRSOURCE_H_INCLUDED
#define PS_CTRSOURCE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"

//  The longest line read; a longer one is reported as too long.
#define PS_CTRSOURCE_LINE_MAX (1u << 20)

//  The bytes of uncompressed data a gzip access point holds.
#define PS_CTRSOURCE_WINDOW 32768u

typedef struct {
    uint64_t line;              //  the first line starting at or after out
    uint64_t out;               //  uncompressed offset of the point
    uint64_t skip;              //  bytes from out to the start of `line`
    uint64_t in;                //  compressed offset of the point's first whole byte
    uint32_t bits;              //  gzip: bits of the byte before `in` that belong to it
    uint32_t window_len;        //  gzip, after the start: bytes in window, else 0
    uint8_t *window;            //  the uncompressed data before out, or NULL
} ps_ctrpoint_t;

typedef struct _ps_ctrsource_t ps_ctrsource_t;

//  A source on the open file fd, which it reads with pread only (so the
//  caller's offset does not matter) and does not close. path names the
//  file in messages; gzip says whether it is gzip-compressed. NULL and
//  PS_ETOOBIG when out of memory.
ps_ctrsource_t *ps_ctrsource_new (const char *path, int fd, bool gzip, ps_error_t *err);

//  Destroy a source, with the points it recorded, and set the caller's
//  pointer to NULL.
void ps_ctrsource_destroy (ps_ctrsource_t **self_p);

//  Start reading at point (NULL: the start of the file). When span > 0,
//  and only from the start, record an access point every span bytes of
//  uncompressed data. Returns 0, or PS_EIO or PS_ECORRUPT naming the file.
int ps_ctrsource_start (ps_ctrsource_t *self, const ps_ctrpoint_t *point, uint64_t span,
                        ps_error_t *err);

//  The next line: 1 with *line and *len set (the line without its newline;
//  line [len] is a newline or a NUL byte, and the text stays valid until
//  the next call); 2 when the next line was longer than
//  PS_CTRSOURCE_LINE_MAX and was skipped; 0 at the end of the file; or
//  PS_EIO, or PS_ECORRUPT for a damaged or truncated gzip stream, naming
//  the file.
int ps_ctrsource_next (ps_ctrsource_t *self, const char **line, size_t *len,
                       ps_error_t *err);

//  The number (from 0) of the line the next call returns.
uint64_t ps_ctrsource_line (const ps_ctrsource_t *self);

//  Hand the points recorded since the start (when it was given a span) to
//  the caller: *points (free each window, then the array) and their
//  count. Call it at the end of the file, when every point has its line.
void ps_ctrsource_take_points (ps_ctrsource_t *self, ps_ctrpoint_t **points, size_t *count);

#endif
