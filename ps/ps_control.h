//  The control requests of a ps-server, which only the coordinator sends:
//  create partitions and embedding table shards, set the optimizer,
//  snapshot to and restore from the checkpoint root (partitions and
//  tables together), and fence at a generation.
//
//  It owns what those requests change beyond the partition table: the
//  optimizer given to partitions created later, the checkpoint root and
//  the fence, which the data path reads (ps_control_fence_generation).
//  Each request is all or nothing: on an error the table is as it was (a
//  snapshot may have written some files; see protocol.json). Runs on the
//  serving thread.

#ifndef PS_CONTROL_H_INCLUDED
#define PS_CONTROL_H_INCLUDED

#include <stdint.h>

#include "ps_ckpt_root.h"
#include "ps_error.h"
#include "ps_msg.h"
#include "ps_optimizer.h"
#include "ps_table.h"
#include "ps_tables.h"

typedef struct _ps_control_t ps_control_t;

//  Control over table and tables (borrowed) with opt for new partitions, snapshots
//  inside checkpoint_root (created when missing; NULL: snapshot and restore
//  are refused). Returns NULL and sets err when opt is invalid or the root
//  cannot be made.
ps_control_t *ps_control_new (ps_table_t *table, ps_tables_t *tables, const ps_opt_config_t *opt,
                              const char *checkpoint_root, ps_error_t *err);
void ps_control_destroy (ps_control_t **self_p);

//  The generation pushes must carry, or 0 before any fence.
uint64_t ps_control_fence_generation (ps_control_t *self);

//  A control request's handler: serves req (of its type), fills reply (its
//  type and id already set) and encodes it into writer. Returns 0, or an
//  error code with err saying why, writer then holding nothing to send.
typedef int (ps_control_fn) (ps_control_t *self, const ps_proto_t *req, ps_proto_t *reply,
                             ps_writer_t *writer, ps_error_t *err);

ps_control_fn ps_control_create;
ps_control_fn ps_control_set_optimizer;
ps_control_fn ps_control_snapshot;
ps_control_fn ps_control_restore;
ps_control_fn ps_control_fence;
ps_control_fn ps_control_probe_root;
ps_control_fn ps_control_table_create;

#endif
