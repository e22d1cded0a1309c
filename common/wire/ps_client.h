//  The client of a set of ps-servers: the one way the worker, the
//  coordinator, the tests and the benchmarks talk to servers.
//
//  A client knows the model's layout: its variables, how each is split into
//  partitions along the first axis, and which server holds each partition.
//  The caller works with whole variables in contiguous buffers; the client
//  sends each server the slices it holds, all servers' requests in flight at
//  once, and gathers the replies. Gradients are sent zero-copy straight
//  from the caller's buffers, which is why every call waits until ZeroMQ has
//  let go of them before it returns, on success, error and timeout alike.
//  After a timeout that takes up to 200 ms more: the sockets of servers
//  that did not answer are closed with that linger, since closing them
//  at once in the middle of a message can abort the process (ps_client.c).
//
//  Every reply is validated against the protocol schema. Errors come back
//  as codes with a message naming the server and what it said.

#ifndef PS_CLIENT_H_INCLUDED
#define PS_CLIENT_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_curve.h"
#include "ps_error.h"
#include "ps_init.h"
#include "ps_msg.h"
#include "ps_optimizer.h"
#include "ps_shape.h"
#include "ps_tablespec.h"

typedef struct _ps_client_t ps_client_t;

//  What a push did, over all partitions.
typedef struct {
    size_t applied;             //  partitions that applied the gradient
    size_t duplicates;          //  partitions that had seen the step before
} ps_push_info_t;

//  One partition's counters, from ps_client_stats.
typedef struct {
    char var [PS_NAME_MAX];
    uint32_t part;
    int64_t row_begin, row_end;
    uint64_t updates, duplicates, bytes_in, bytes_out;
    uint64_t recorded;          //  distinct steps in the partition's ledger
    uint64_t nonfinite;         //  gradients refused for holding NaN or an infinity
} ps_part_stats_t;

//  One snapshot file, from ps_client_snapshot.
typedef struct {
    int server;
    char var [PS_NAME_MAX];
    uint32_t part;
    char file [PS_NAME_MAX * 3 + 32];
    uint64_t bytes;
    uint32_t crc;
    uint64_t version;
} ps_snap_file_t;

//  One table shard's counters, from ps_client_table_stats (stats_ok's
//  tables in schemas/protocol.json).
typedef struct {
    char table [PS_NAME_MAX];
    uint32_t dim, shard, shards;
    uint64_t rows, created, evicted, dropped;
    uint64_t oom;               //  id gradients lost: their row could not be allocated
    uint64_t pushes, duplicates, row_updates, pulls;
    uint64_t steps;             //  distinct steps in the shard's ledger
    uint64_t nonfinite, bytes;
} ps_table_stats_t;

//  One table shard's snapshot file, from ps_client_snapshot_tables.
typedef struct {
    int server;
    char table [PS_NAME_MAX];
    uint32_t shard, shards;
    char file [PS_NAME_MAX * 3 + 64];
    bool full;                  //  false: incremental, after its base
    uint64_t rows, steps;
} ps_table_file_t;

//  Connect to nservers servers; server i is task ps:i of the cluster, at
//  endpoints [i], a ZeroMQ endpoint or an endpoint set (ps_host.h: the
//  ipc:// endpoint is used on the server's host, and the tcp one names the
//  server in messages). timeout_ms bounds each call's wait for replies. With curve (this
//  process's identity, which the caller keeps until the client is
//  destroyed; NULL: unsecured) every connection is a CURVE client of its
//  server's key. Returns NULL and sets err when an endpoint is invalid or
//  a server's public key is unknown.
ps_client_t *ps_client_new (const char *const *endpoints, int nservers, int timeout_ms,
                            ps_curve_t *curve, ps_error_t *err);

void ps_client_destroy (ps_client_t **self_p);

//  Declare a variable of full shape `shape`, split into nparts partitions:
//  partition k holds rows [splits[k], splits[k+1]) on server servers[k];
//  splits[0] = 0 and splits[nparts] = shape->dims[0]. init is used by
//  ps_client_create. Returns the variable's index (>= 0), or PS_EINVAL when
//  the splits, servers or name are invalid or the name is taken.
int ps_client_add_variable (ps_client_t *self, const char *name, const ps_shape_t *shape,
                            const ps_init_t *init, int nparts, const int64_t *splits,
                            const int *servers, ps_error_t *err);

//  Elements in variable var.
size_t ps_client_variable_size (ps_client_t *self, int var);

//  Create every partition on its server (idempotent; see "create" in the
//  protocol).
int ps_client_create (ps_client_t *self, ps_error_t *err);

//  Set the optimizer on every server.
int ps_client_set_optimizer (ps_client_t *self, const ps_opt_config_t *opt, ps_error_t *err);

//  Read every variable into values[var] (ps_client_variable_size floats).
int ps_client_pull (ps_client_t *self, float *const *values, ps_error_t *err);

//  Push the gradient of every variable, grads[var], for step `step`.
//  info (may be NULL) says how many partitions applied it.
int ps_client_push (ps_client_t *self, uint64_t step, uint32_t worker,
                    const float *const *grads, ps_push_info_t *info, ps_error_t *err);

//  Sync mode: push the gradient of every variable for step `step`, one of
//  the round_steps steps of round `round` (from 1). The servers add it to
//  the round's sum and apply the round's mean when its last step arrives;
//  info's applied counts the partitions that added it. A server refuses a
//  step of a round other than the one it has open (PS_EINVAL naming the
//  partition and both rounds).
int ps_client_push_round (ps_client_t *self, uint64_t step, uint32_t worker, uint64_t round,
                          uint32_t round_steps, const float *const *grads,
                          ps_push_info_t *info, ps_error_t *err);

//  Push, then read the values after the push, in one round trip.
int ps_client_push_pull (ps_client_t *self, uint64_t step, uint32_t worker,
                         const float *const *grads, float *const *values,
                         ps_push_info_t *info, ps_error_t *err);

//  Round trip to one server.
int ps_client_ping (ps_client_t *self, int server, ps_error_t *err);

//  The counters of every partition on server. *stats is allocated (free
//  it) with *count entries.
int ps_client_stats (ps_client_t *self, int server, ps_part_stats_t **stats, size_t *count,
                     ps_error_t *err);

//  Have every server write its partitions into dir. *files (free it)
//  receives the *count files written.
int ps_client_snapshot (ps_client_t *self, const char *dir, ps_snap_file_t **files,
                        size_t *count, ps_error_t *err);

//  Have every server load its partitions of the layout from dir.
int ps_client_restore (ps_client_t *self, const char *dir, ps_error_t *err);

//  Embedding tables: create server i's shard i of each of the count
//  tables in specs on every server i of the nservers (table_create: a
//  table that exists with the same spec and shard is kept as it is, so
//  this may be repeated, as after a server's restart).
int ps_client_table_create (ps_client_t *self, const ps_tablespec_t *specs, size_t count,
                            ps_error_t *err);

//  The counters of every table shard on server. *stats is allocated (free
//  it) with *count entries, in table name order.
int ps_client_table_stats (ps_client_t *self, int server, ps_table_stats_t **stats,
                           size_t *count, ps_error_t *err);

//  As ps_client_snapshot, and the table shards too: whole, or with base
//  (not NULL) only what changed since each shard's last full snapshot,
//  which must be base. *tables (free it) receives the *ntables table
//  files written.
int ps_client_snapshot_tables (ps_client_t *self, const char *dir, const char *base,
                               ps_snap_file_t **files, size_t *count, ps_table_file_t **tables,
                               size_t *ntables, ps_error_t *err);

//  As ps_client_restore, on every server, and each server's table shards
//  from the table files in dir: full ones, or with base (not NULL) the
//  incremental ones in dir read on top of the full ones in base. Every
//  server must restore ntables shards (its shard of each table): one that
//  found fewer files is PS_ENOTFOUND naming it, since its tables would
//  otherwise go on empty.
int ps_client_restore_tables (ps_client_t *self, const char *dir, const char *base,
                              size_t ntables, ps_error_t *err);

//  Tag every later push and push-pull with generation (0: untagged), so
//  that a server fenced at another generation refuses it; and every later
//  restore, which then fences each server it restores at generation in
//  the same step (protocol.json, restore).
void ps_client_set_generation (ps_client_t *self, uint64_t generation);

//  Fence every server at generation: pushes tagged with another one are
//  refused from now on (the coordinator's guard after a restore).
int ps_client_fence (ps_client_t *self, uint64_t generation, ps_error_t *err);

//  Ask server to stop.
int ps_client_shutdown (ps_client_t *self, int server, ps_error_t *err);

//  Have server write the file name holding token into its checkpoint root
//  (protocol.json, probe_root), and copy the root's path on the server
//  into root (len bytes). Returns 0, or the server's refusal (no root, a
//  name that is not one component) or the call's failure with err.
int ps_client_probe_root (ps_client_t *self, int server, const char *name, const char *token,
                          char *root, size_t len, ps_error_t *err);

//  A request that another client of the same servers builds (the
//  worker's sparse client, ps_sparse_client.h) and this client's request
//  machinery sends: msg (its type and fields; the client sets the id) to
//  server, followed by nframes frames, frame i the sizes [i] bytes at
//  data [i], lent zero-copy as a push's gradients are.
typedef struct {
    int server;
    ps_proto_t *msg;
    const void *const *data;
    const size_t *sizes;
    size_t nframes;
} ps_client_request_t;

//  Send requests [0..n), all in flight at once, and gather their replies
//  of type reply_type with the timeout and error reporting of every call
//  here; replies [i] receives the reply to requests [i], decoded and
//  checked against the protocol, valid until the next call on self.
//  Returns 0, or the first error naming the server (its error reply, a
//  reply of another type, a timeout); the frames have been let go of in
//  every case.
int ps_client_exchange (ps_client_t *self, const ps_client_request_t *requests, size_t n,
                        ps_proto_type_t reply_type, ps_msg_t **replies, ps_error_t *err);

#endif
