//  The file of an embedding table shard (schemas/checkpoint.md, "Embedding
//  table shards"), as bytes: the fixed header that carries the table's
//  spec, and the reading of a whole file, mapped read-only and verified
//  (magic, version, checksum, then every length and the sections'
//  structure) before anything is built from it. ps_sparse.c writes the
//  sections and builds a table from a verified file; this module knows no
//  table, only the layout.

#ifndef PS_SPARSE_FILE_H_INCLUDED
#define PS_SPARSE_FILE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"
#include "ps_sparse.h"
#include "ps_tablespec.h"

#define PS_SPARSE_FILE_VERSION  1
//  Bytes of the fixed header, of a stripe section's counts, and of the
//  CRC-32 trailer.
#define PS_SPARSE_FILE_HEADER   352
#define PS_SPARSE_FILE_SECTION  24
#define PS_SPARSE_FILE_TRAILER  4
//  Rows of the admission filter (a count-min sketch) in each stripe.
#define PS_SPARSE_SKETCH_DEPTH  4

typedef struct {
    bool full;                  //  a full snapshot, else an incremental one
    uint64_t base_size;         //  incremental: the size and CRC-32 trailer of
    uint32_t base_crc;          //  the full snapshot it follows; full: 0
    ps_tablespec_t spec;
    uint32_t sketch_width;      //  counters per sketch row in a stripe; 0: no filter
    uint64_t newest_step;       //  the newest step the table had applied
    uint64_t ledger_len;        //  bytes of the encoded ledger after the header
} ps_sparse_file_header_t;

//  Write header into buf [0, PS_SPARSE_FILE_HEADER).
void ps_sparse_file_encode (const ps_sparse_file_header_t *header, uint8_t *buf);

//  Bytes of one row in a file: id, last step and update count (u64 each),
//  then the value and the slots (f32 each).
size_t ps_sparse_file_row_bytes (const ps_tablespec_t *spec);

//  One stripe's section of a mapped file. The pointers point into the
//  mapping and are not aligned: read them with ps_get_u64 or memcpy.
typedef struct {
    uint64_t last_sweep;        //  the step of the stripe's last TTL sweep
    uint64_t nevicted;
    uint64_t nrows;
    const uint8_t *sketch;      //  DEPTH x sketch_width counters
    const uint8_t *evicted;     //  nevicted u64 ids
    const uint8_t *rows;        //  nrows rows of ps_sparse_file_row_bytes
} ps_sparse_file_section_t;

//  A verified file, mapped read-only.
typedef struct {
    const char *path;           //  borrowed from the caller of open
    ps_sparse_file_header_t header;
    const uint8_t *ledger;      //  ledger_len bytes
    ps_sparse_file_section_t sections [PS_SPARSE_STRIPES];
    uint64_t size;              //  the file's size and its CRC-32 trailer: what
    uint32_t crc;               //  an incremental file names its full one by
    void *map;
} ps_sparse_file_t;

//  Map and verify the file at path: size, magic, version, checksum, the
//  header's fields (a valid spec), and sections that fill the file
//  exactly, a full file's without evicted ids. Returns 0, or with err
//  naming the file PS_ENOTFOUND, PS_EINVAL (not a regular file), PS_EIO,
//  PS_EVERSION or PS_ECORRUPT; *file then holds nothing.
int ps_sparse_file_open (const char *path, ps_sparse_file_t *file, ps_error_t *err);

//  Open what a shard is restored from (ps_sparse_load) or exported from
//  (ps_ckpt_tables.h): the full file at full_path and, when incr_path is
//  not NULL, the incremental one written after it, checked to follow that
//  full file (its base size and CRC) with the same spec. Returns 0 with
//  both open, or the error of opening either, or PS_EINVAL naming the file
//  of the wrong kind or the pair that does not belong together; then
//  neither is open.
int ps_sparse_file_open_pair (const char *full_path, const char *incr_path,
                              ps_sparse_file_t *full, ps_sparse_file_t *incr, ps_error_t *err);

//  Unmap what ps_sparse_file_open mapped.
void ps_sparse_file_close (ps_sparse_file_t *file);

#endif
