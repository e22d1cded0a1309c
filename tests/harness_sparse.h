//  The fixture of the tests that talk to a real ps-server about embedding
//  tables (test_sparse_server, test_sparse_snapshot): one server started
//  with a checkpoint root, the coordinator's, a worker's and an
//  evaluator's sockets on it, and the table requests of the wire protocol
//  (table_create, sparse_pull, sparse_push, stats, snapshot, restore) sent
//  and received as typed messages. The server is shard 0 of
//  HARNESS_SPARSE_SHARDS of every table it is given. The fixture keeps the
//  specs of the tables it created, so that a test can create them on a
//  second server before restoring a snapshot of the first into it. Each
//  helper fails the running cmocka case, naming what went wrong.

#ifndef PS_HARNESS_SPARSE_H_INCLUDED
#define PS_HARNESS_SPARSE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "ps_msg.h"
#include "ps_proto.h"
#include "ps_tablespec.h"

#define HARNESS_SPARSE_TIMEOUT_MS  20000
#define HARNESS_SPARSE_SHARDS      2    //  the server is shard 0 of 2
#define HARNESS_SPARSE_HELD        32

//  The fixture: a plain struct, as harness_server_t is, since the cases
//  use its sockets and directory directly.
typedef struct {
    harness_server_t server;
    char root [64];                     //  the server's checkpoint root
    void *ctx;                          //  ps_curve_context (), as harness_finish expects
    void *chief, *worker, *evaluator;   //  DEALERs on the server as chief:0, worker:0, evaluator:0
    ps_msg_t *reply;                    //  the last reply received
    uint64_t id;                        //  the next request id
    ps_tablespec_t held [HARNESS_SPARSE_HELD];
    size_t nheld;
} harness_sparse_t;

//  One table entry of a push: its ids and gradients.
typedef struct {
    const char *table;
    uint32_t dim;
    const uint64_t *ids;
    size_t count;
    const float *grads;
} harness_sparse_entry_t;

//  Start the server (with threads pool threads) under a new temporary
//  checkpoint root and connect the three sockets. Returns 0, or -1 when
//  the server does not start (for a cmocka group setup).
int harness_sparse_start (harness_sparse_t *self, const char *threads);

//  Close the sockets, stop the server with SIGTERM and remove the root.
//  Returns 0, or -1 when the server did not exit cleanly.
int harness_sparse_stop (harness_sparse_t *self);

//  A table spec: name and dim, the rest table defaults (Adagrad lr 0.05),
//  initializer seed 11.
ps_tablespec_t harness_sparse_spec (const char *name, uint32_t dim);

//  Create specs[0..n) (n <= 4) as shard `shard` of `shards` over socket;
//  returns the reply (table_create_ok or error).
const ps_proto_t *harness_sparse_create_on (harness_sparse_t *self, void *socket,
                                            const ps_tablespec_t *specs, size_t n,
                                            uint64_t shard, uint64_t shards);

//  Create spec on the server as its shard 0, failing the case unless it
//  is created, and remember it among the tables the server holds.
void harness_sparse_create (harness_sparse_t *self, const ps_tablespec_t *spec);

//  Create every table the server holds on another server, over its chief
//  socket, as shard `shard`: what a coordinator does before a restore.
void harness_sparse_create_held_on (harness_sparse_t *self, void *chief, uint64_t shard);

//  Ids of the server's shard (0) of spec: n of them from state.
void harness_sparse_ids (const ps_tablespec_t *spec, uint64_t *state, uint64_t *ids, size_t n);

//  Send a sparse_pull of n ids of table (rows of dim) from socket; returns
//  the reply.
const ps_proto_t *harness_sparse_pull_on (harness_sparse_t *self, void *socket, const char *table,
                                          uint32_t dim, const uint64_t *ids, size_t n);

//  Pull rows of ids as worker:0 into out, failing the case on an error.
void harness_sparse_pull (harness_sparse_t *self, const char *table, uint32_t dim,
                          const uint64_t *ids, size_t n, float *out);

//  Send a sparse_push of entries[0..n) (n <= 4) for step from socket
//  (generation when has_generation); returns the reply.
const ps_proto_t *harness_sparse_push_on (harness_sparse_t *self, void *socket, uint64_t step,
                                          bool has_generation, uint64_t generation,
                                          const harness_sparse_entry_t *entries, size_t n);

//  Push one table's gradients for step as worker:0, failing the case on
//  an error; returns the entry of the reply.
ps_proto_sparse_applied_t harness_sparse_push (harness_sparse_t *self, uint64_t step,
                                               const harness_sparse_entry_t *entry);

//  Fail the case unless reply is an error of code whose message holds text.
void harness_sparse_expect_error (const ps_proto_t *reply, const char *code, const char *text);

//  The stats of table on the server of socket (worker:0's, for
//  harness_sparse_table_stats). Fails the case when it holds no such table.
ps_proto_table_stats_t harness_sparse_table_stats_on (harness_sparse_t *self, void *socket,
                                                      const char *table);
ps_proto_table_stats_t harness_sparse_table_stats (harness_sparse_t *self, const char *table);

//  Send a snapshot into dir (incremental on base when base is not NULL),
//  or a restore from dir (with base), over socket, a chief's; returns the
//  reply.
const ps_proto_t *harness_sparse_snapshot (harness_sparse_t *self, void *socket, const char *dir,
                                           const char *base);
const ps_proto_t *harness_sparse_restore (harness_sparse_t *self, void *socket, const char *dir,
                                          const char *base);

#endif
