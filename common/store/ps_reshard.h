//  Re-partitioning a checkpoint: the snapshot files of one layout rewritten
//  as those of another, so a run can resume with another placement than the
//  one that wrote the checkpoint: an asynchronous run's partitions spread
//  over servers become a mirrored replica's whole variables, and back, or
//  partitions over two servers become partitions over three.
//
//  Each target partition (rows [a, b) of a variable) is assembled from the
//  source partitions that overlap it, row by row: values and optimizer
//  slots are copied, never recomputed, so a round trip gives back the same
//  bits. The bookkeeping of the pieces must agree to be merged: the same
//  optimizer kind and configuration (a piece with another one is an
//  error). Update counts, Adam's t and ledgers can differ only when a step
//  reached some servers and not others (its push failed part-way and it is
//  queued to run again): the target then takes the smallest counts and the
//  steps every piece applied (the ledgers' intersection), so that step is
//  applied again to all rows, and a warning says how many steps differed.
//  The duplicates counter takes the largest of the pieces': each piece
//  counted the repeated pushes it refused, and one repeated step refused by
//  several pieces is still one (a sum would count it once per piece).

#ifndef PS_RESHARD_H_INCLUDED
#define PS_RESHARD_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_client.h"
#include "ps_error.h"
#include "ps_shape.h"

//  One variable of the target layout: nparts partitions, partition k
//  holding rows [splits [k], splits [k + 1]) (splits [0] = 0, splits
//  [nparts] = shape.dims [0], increasing), partition k on server
//  servers [k] (NULL: -1 for every partition; only copied to the files).
typedef struct {
    const char *var;
    ps_shape_t shape;
    int nparts;
    const int64_t *splits;
    const int *servers;
} ps_reshard_var_t;

//  Read the snapshot files in src_dir (every file ending in ".snap", each
//  verified in full), and write into dst_dir (created when missing; must
//  not be src_dir) one snapshot file per target partition, named
//  ps_snapshot_filename (var, k), crash-safely. *files (free it) receives
//  the files written, in the order of vars and partitions (server, var,
//  part, file, bytes, crc, version). Returns 0; PS_ENOTFOUND when a target
//  variable has no source piece or rows no piece covers; PS_ESHAPE when a
//  source piece's variable shape differs from the target's; PS_EINVAL for
//  a bad target layout, rows covered twice, or pieces whose optimizers
//  differ; PS_ECORRUPT / PS_EIO from reading or writing, naming the file.
//  Source variables that the target does not name are an error too
//  (PS_EINVAL naming one), so nothing in a checkpoint is silently left out.
//  Every check above runs before the first file is written, so only a
//  failure to read or write leaves some target files behind; files already
//  in dst_dir under other names are left as they are.
int ps_reshard (const char *src_dir, const ps_reshard_var_t *vars, int nvars,
                const char *dst_dir, ps_snap_file_t **files, size_t *nfiles, ps_error_t *err);

#endif
