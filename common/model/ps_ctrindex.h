//  The line index of a CTR data file: how many lines it has, how many of
//  them are malformed and where the first one is, and access points from
//  which a reader can start at any line without reading what comes before
//  (ps_ctrsource.h), for plain and gzip files alike.
//
//  The index is built once, by reading the whole file, and kept in a file
//  next to the data, `<file>.psidx`, or, when that cannot be written,
//  under the cache directory (schemas/data.md gives its format). It is
//  keyed by the data file's size and modification time and the format it
//  was parsed as: an index that does not match, or fails its checksum, is
//  rebuilt. Every process of a cluster that opens the same file therefore
//  agrees on its line numbers, which is what steps are made of.

#ifndef PS_CTRINDEX_H_INCLUDED
#define PS_CTRINDEX_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include "ps_ctrbatch.h"
#include "ps_ctrsource.h"
#include "ps_error.h"

//  Access points every this many bytes of uncompressed data, by default: a
//  plain file's point costs 40 bytes of index, a gzip file's 32 KiB more,
//  and a read starting between two points first reads what lies between.
#define PS_CTRINDEX_SPAN_PLAIN (1u << 20)
#define PS_CTRINDEX_SPAN_GZIP  (8u << 20)

//  The longest malformed-line reason kept in the index.
#define PS_CTRINDEX_REASON 200

typedef struct {
    uint64_t span;              //  bytes between access points; 0: the defaults above
    //  Where an index goes when the data's directory cannot take it. NULL:
    //  $XDG_CACHE_HOME/ps-cluster, or $HOME/.cache/ps-cluster.
    const char *cache_dir;
} ps_ctrindex_opts_t;

typedef struct _ps_ctrindex_t ps_ctrindex_t;

//  The index of the data file path, open as fd, parsed as format: loaded
//  when a matching one exists, built and saved otherwise (a save that
//  fails is logged as a warning: the index still serves this process).
//  opts may be NULL. NULL on error, with err naming the file: PS_EIO,
//  PS_ECORRUPT for a damaged or truncated gzip stream, PS_ETOOBIG.
ps_ctrindex_t *ps_ctrindex_open (const char *path, int fd, ps_ctrformat_t format,
                                 const ps_ctrindex_opts_t *opts, ps_error_t *err);

//  Destroy an index and set the caller's pointer to NULL.
void ps_ctrindex_destroy (ps_ctrindex_t **self_p);

//  Whether the data file is gzip-compressed.
bool ps_ctrindex_gzip (const ps_ctrindex_t *self);

//  Whether this open built the index (false: it was loaded).
bool ps_ctrindex_built (const ps_ctrindex_t *self);

//  The index file's path, or "" when it could not be saved anywhere.
const char *ps_ctrindex_file (const ps_ctrindex_t *self);

//  Lines, of which good and malformed; the number (from 1) of the first
//  malformed line, 0 when there is none, and why it is malformed.
uint64_t ps_ctrindex_lines (const ps_ctrindex_t *self);
uint64_t ps_ctrindex_good (const ps_ctrindex_t *self);
uint64_t ps_ctrindex_malformed (const ps_ctrindex_t *self);
uint64_t ps_ctrindex_first_malformed (const ps_ctrindex_t *self);
const char *ps_ctrindex_first_reason (const ps_ctrindex_t *self);

//  The access point to start from to read line `line`: the last one at
//  or before it.
const ps_ctrpoint_t *ps_ctrindex_point (const ps_ctrindex_t *self, uint64_t line);

#endif
