//  The snapshot file: one partition's complete state on disk (values,
//  optimizer configuration and slots, update counters and step ledger), so
//  that a restarted ps-server resumes exactly where the snapshot was taken.
//
//  Files are written crash-safely: to a temporary name in the same
//  directory, fsynced, renamed over the final name, then the directory is
//  fsynced. A reader therefore sees the old file or the new one, never a
//  mix. Every file carries a magic, a format version and a CRC-32 trailer
//  over all bytes before it; reading verifies all of them and refuses a
//  torn, truncated or corrupted file with an error naming the file.
//  The byte layout is documented in schemas/snapshot.md.

#ifndef PS_SNAPSHOT_H_INCLUDED
#define PS_SNAPSHOT_H_INCLUDED

#include <stdint.h>

#include "ps_error.h"
#include "ps_ledger.h"
#include "ps_optimizer.h"
#include "ps_shape.h"

#define PS_SNAPSHOT_VERSION 1

//  The state of one partition. For writing, every pointer is borrowed from
//  the caller. After ps_snapshot_read the struct owns values, slots and
//  ledger; ps_snapshot_release frees them.
typedef struct {
    char var [PS_NAME_MAX];     //  variable name
    uint32_t part;              //  partition index within the variable
    ps_shape_t shape;           //  full shape of the variable
    int64_t row_begin, row_end; //  rows of the first axis held here
    ps_opt_config_t opt;        //  optimizer in force
    uint64_t opt_t;             //  updates applied to the slots (Adam's t)
    uint64_t version;           //  updates applied to the values
    uint64_t duplicates;        //  repeated steps ignored
    float *values;              //  (row_end - row_begin) * row elements
    float *slots [PS_OPT_MAX_SLOTS];  //  ps_opt_slot_count (opt.kind) arrays
    ps_ledger_t *ledger;
} ps_snapshot_t;

//  Write snap to path atomically (see above). Returns 0, or PS_EIO with a
//  message naming the path and the failing call. On error the temporary
//  file is removed and the file at path is the old one, except when only
//  the final fsync of the directory failed: the new file is then in place
//  but may not survive a power loss.
int ps_snapshot_write (const char *path, const ps_snapshot_t *snap, ps_error_t *err);

//  Read and verify path into *snap. Returns 0; PS_ENOTFOUND or PS_EIO when
//  it cannot be read; PS_EINVAL when it is not a regular file (a FIFO is
//  never waited on); PS_ECORRUPT when magic, lengths, header fields or the
//  checksum are wrong; PS_EVERSION for an unknown format version. The
//  message names the file. On error *snap owns nothing.
int ps_snapshot_read (const char *path, ps_snapshot_t *snap, ps_error_t *err);

//  Free what ps_snapshot_read allocated, leaving *snap empty.
void ps_snapshot_release (ps_snapshot_t *snap);

//  The file name for a partition: the variable name with every byte outside
//  [A-Za-z0-9_.-] written as %XX, then ".part<k>.snap". The mapping is
//  injective, so partitions of different variables never share a file.
//  Returns PS_EINVAL when buf is too small.
int ps_snapshot_filename (const char *var, uint32_t part, char *buf, size_t len);

//  The escaped name alone, as ps_snapshot_filename writes it (the start of
//  a file name for other files named after a variable or a table). Returns
//  its length, or -1 when buf is too small.
int ps_snapshot_escape (const char *name, char *buf, size_t len);

//  The size of a snapshot file and its CRC-32 trailer (the checksum of all
//  bytes before it), read without loading the file: what a checkpoint
//  manifest records. Returns 0, or PS_EIO / PS_ENOTFOUND / PS_EINVAL (not
//  a regular file) / PS_ECORRUPT (shorter than a trailer) with a message
//  naming the file.
int ps_snapshot_summary (const char *path, uint64_t *bytes, uint32_t *crc, ps_error_t *err);

#endif
