//  The embedding table shards a ps-server holds, by table name.
//
//  Each entry is this server's shard of one table (ps_sparse.h): the
//  table itself, which shard of how many it is (ids belong to it when
//  ps_tablespec_shard_of says so), the directory of its last full snapshot
//  (what an incremental snapshot must name as its base) and the pushes it
//  refused for a non-finite gradient. The registry owns one reference to
//  each entry; a request in progress links its own (ps_tables_link), so a
//  restore that replaces a table never frees one a pool thread is using.
//  Listings come in name order, so stats and snapshot replies are stable.
//  The registry belongs to the serving thread; an entry's table and its
//  counter may be used from any thread.
//
//  The registry also keeps the server's memory budget for its tables
//  (ps-server --memory-limit): the bytes the shards hold, plus what the
//  pushes in progress reserved for the rows they may create, must stay
//  within it, so a push that could pass it is refused before it applies
//  anything (ps_sparsejob.c).

#ifndef PS_TABLES_H_INCLUDED
#define PS_TABLES_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_sparse.h"

typedef struct _ps_tables_t ps_tables_t;
typedef struct _ps_tshard_t ps_tshard_t;

ps_tables_t *ps_tables_new (void);
void ps_tables_destroy (ps_tables_t **self_p);

//  The shard of table name, borrowed, or NULL when the server has none.
ps_tshard_t *ps_tables_lookup (ps_tables_t *self, const char *name);

//  Add a shard, taking the caller's reference; one of the same table name
//  is replaced (and dropped).
void ps_tables_put (ps_tables_t *self, ps_tshard_t *tshard);

size_t ps_tables_size (ps_tables_t *self);

//  The tables' memory budget in bytes (0: none, the default), and set it.
uint64_t ps_tables_budget (ps_tables_t *self);
void ps_tables_set_budget (ps_tables_t *self, uint64_t budget);

//  The bytes the shards hold now (their stats' bytes, summed) plus those
//  reserved by pushes in progress.
uint64_t ps_tables_bytes (ps_tables_t *self);

//  Reserve bytes for a push in progress, and give them back when it ends.
void ps_tables_reserve (ps_tables_t *self, uint64_t bytes);
void ps_tables_release (ps_tables_t *self, uint64_t bytes);

//  The shards in name order, borrowed, in an array of *count entries (plus
//  a NULL) that the caller frees.
ps_tshard_t **ps_tables_sorted (ps_tables_t *self, size_t *count);

//  The file name of a table shard's snapshot in a snapshot directory:
//  the table name escaped as partition files' are (ps_snapshot_escape),
//  then ".shard<k>of<n>.full.table" or, for an incremental one,
//  ".incr.table". Returns 0, or PS_EINVAL when buf is too small.
int ps_tables_filename (const char *name, uint32_t shard, uint32_t shards, bool full,
                        char *buf, size_t len);

//  Whether file is named as ps_tables_filename names them; if so, its
//  shard, shard count and kind (shard < shards).
bool ps_tables_parse_filename (const char *file, uint32_t *shard, uint32_t *shards,
                               bool *full);

//  The shard held of the table whose snapshot file (any shard, either
//  kind) file is, borrowed, or NULL when file is no table file or the
//  server holds no shard of its table. Needs no reading of the file, so
//  a restore can leave the other servers' files unread.
ps_tshard_t *ps_tables_lookup_file (ps_tables_t *self, const char *file);

//  The name of the full file an incremental file (so named) follows.
//  Returns 0, or PS_EINVAL when file is no incremental file's name or buf
//  is too small.
int ps_tables_full_filename (const char *incr_file, char *buf, size_t len);

//  A shard of one reference holding table (taken), shard `shard` of
//  `shards` (shard < shards).
ps_tshard_t *ps_tshard_new (ps_sparse_t *table, uint32_t shard, uint32_t shards);

//  Take another reference, and drop one (the last frees the table).
ps_tshard_t *ps_tshard_link (ps_tshard_t *self);
void ps_tshard_unlink (ps_tshard_t **self_p);

ps_sparse_t *ps_tshard_table (ps_tshard_t *self);
const char *ps_tshard_name (ps_tshard_t *self);
uint32_t ps_tshard_dim (ps_tshard_t *self);
uint32_t ps_tshard_shard (ps_tshard_t *self);
uint32_t ps_tshard_shards (ps_tshard_t *self);

//  Whether id belongs to this shard.
bool ps_tshard_holds (ps_tshard_t *self, uint64_t id);

//  The request-relative directory of the shard's last full snapshot, or
//  "" when it has none since it was created or restored; and set it.
const char *ps_tshard_last_full (ps_tshard_t *self);
void ps_tshard_set_last_full (ps_tshard_t *self, const char *dir);

//  Pushes refused for holding a non-finite gradient for this shard.
void ps_tshard_count_nonfinite (ps_tshard_t *self);
uint64_t ps_tshard_nonfinite (ps_tshard_t *self);

#endif
