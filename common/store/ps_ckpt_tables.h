//  A checkpoint's embedding tables, as a trained click-through-rate model
//  leaves the cluster: each table's live rows, joined from every server's
//  shard file, as the table's ids (uint64, sorted ascending, unique) and
//  embeddings (float32 [rows, dim], row i the embedding of ids [i]). The
//  optimizer slots and per-row counters stay behind: a model, not a
//  training state.
//
//  A shard is what a resume restores (schemas/checkpoint.md): its full
//  file and, in an incremental checkpoint, its incremental file on top
//  (the rows it holds replace the full file's, the ids it lists as evicted
//  are gone). Both are opened and checked by ps_sparse_file_open_pair, as
//  ps_sparse_load opens them; the full file of an incremental checkpoint
//  is the one its base checkpoint (the manifest's "base", verified as a
//  resume verifies it) lists for the same table and shard.
//
//  Memory: the files are mapped read-only, never copied; a table is
//  joined as one array of 16 bytes per row (the id, and where its row lies
//  in the mapping), sorted by id, and written from the mappings through
//  a bounded buffer (ps_tensor.h's fill). For a table of 10M rows of dim
//  16 that is 160 MB beside an output of 720 MB, however many shards,
//  and the same for every incremental file: rows the incremental file
//  replaces or evicts cost their 16 bytes only while the table is joined.

#ifndef PS_CKPT_TABLES_H_INCLUDED
#define PS_CKPT_TABLES_H_INCLUDED

#include <stdint.h>

#include <jansson.h>

#include "ps_error.h"
#include "ps_tablespec.h"
#include "ps_tensor.h"

typedef struct _ps_ckpt_tables_t ps_ckpt_tables_t;

//  Join the tables of the verified checkpoint at dir, whose manifest is
//  manifest (a checkpoint without "tables" has none). NULL on error, with
//  a message naming the checkpoint, table, shard or file: PS_ENOTFOUND
//  (a shard with no file, a base that is not there), PS_ECORRUPT /
//  PS_EVERSION / PS_EIO from a file, PS_EINVAL (a file of another table,
//  spec or base than the manifest says, a manifest that is not one a
//  coordinator writes), PS_ECORRUPT (an id twice, or in the wrong shard).
ps_ckpt_tables_t *ps_ckpt_tables_read (const char *dir, const json_t *manifest,
                                       ps_error_t *err);
void ps_ckpt_tables_destroy (ps_ckpt_tables_t **self_p);

//  The tables, in the manifest's order.
int ps_ckpt_tables_count (const ps_ckpt_tables_t *self);

//  Table index's spec (the one its files hold) and the rows joined.
const ps_tablespec_t *ps_ckpt_tables_spec (const ps_ckpt_tables_t *self, int index);
uint64_t ps_ckpt_tables_rows (const ps_ckpt_tables_t *self, int index);

//  The id of row `row` of table index (row < its rows).
uint64_t ps_ckpt_tables_id (const ps_ckpt_tables_t *self, int index, uint64_t row);

//  Table index as two tensors: "NAME/ids" (uint64 [rows]) and
//  "NAME/embeddings" (float32 [rows, dim]), filled from the mappings; the
//  names and the data are self's, valid while it lives. A table without
//  rows has no tensors (a shape has positive dimensions): returns 0 then,
//  else 2.
int ps_ckpt_tables_tensors (ps_ckpt_tables_t *self, int index, ps_tensor_t *ids,
                            ps_tensor_t *embeddings);

#endif
