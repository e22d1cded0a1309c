//  The worker's client of embedding tables on the servers: sparse pulls
//  and pushes of a step's rows, the sparse side of what ps_client.h does
//  for dense variables.
//
//  Every table has a shard on each of the plan's servers, and a row with
//  id i lives on server ps_tablespec_shard_of (i, shard_seed, nservers).
//  The caller works with each table's ids of a step in its own order
//  (distinct for a push: the engine sums the gradients of a repeated id);
//  the client splits them over the servers (ps_idsplit.h), sends one
//  request per server carrying every table, all servers' requests in
//  flight at once, and puts the rows that come back in the caller's
//  order. A push goes to every server, with an empty entry (count 0) for
//  a table that has no id of the step there, so that every table shard
//  records every step in its ledger: a repeated step is answered
//  duplicate by each shard instead of being applied twice.
//
//  The sockets, their CURVE identity, the timeout, zero-copy frames and
//  the error reporting are the dense client's (ps_client_exchange): a
//  server that does not answer within the timeout gives PS_ETIMEDOUT
//  naming it, an error reply its code and message, and the caller's
//  buffers are let go of before any call returns.

#ifndef PS_SPARSE_CLIENT_H_INCLUDED
#define PS_SPARSE_CLIENT_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_curve.h"
#include "ps_error.h"
#include "ps_tablespec.h"

typedef struct _ps_sparse_client_t ps_sparse_client_t;

//  What a push did, summed over the tables and the servers.
typedef struct {
    uint64_t applied;           //  rows updated, created ones included
    uint64_t created;           //  rows created
    uint64_t dropped;           //  ids' gradients dropped before admission
    uint64_t shards;            //  table shards that applied the step
    uint64_t duplicates;        //  table shards that had applied it before
} ps_sparse_push_info_t;

//  A client of tables specs [0..ntables) (their name, dim and shard_seed
//  are read; the specs are copied) held by the nservers servers at
//  endpoints, server i being task ps:i. timeout_ms and curve as
//  ps_client_new. Returns NULL with err set when an endpoint is invalid,
//  a server's key unknown, or a spec has no name or rows.
ps_sparse_client_t *ps_sparse_client_new (const char *const *endpoints, int nservers,
                                          int timeout_ms, ps_curve_t *curve,
                                          const ps_tablespec_t *specs, int ntables,
                                          ps_error_t *err);

void ps_sparse_client_destroy (ps_sparse_client_t **self_p);

//  Tag every later push with generation (0: untagged), so that a server
//  fenced at another generation refuses it.
void ps_sparse_client_set_generation (ps_sparse_client_t *self, uint64_t generation);

//  Read the rows of table t's ids [t][0..counts [t]) into rows [t]
//  (counts [t] * dim floats, in the order of the ids; an id may repeat).
//  A pull never creates a row: one that does not exist reads as its
//  initial value. Only the servers that hold some id are asked.
int ps_sparse_client_pull (ps_sparse_client_t *self, const uint64_t *const *ids,
                           const size_t *counts, float *const *rows, ps_error_t *err);

//  Push step `step` of worker: table t's row gradients grads [t]
//  (counts [t] * dim floats) for its distinct ids [t]. Every server gets
//  an entry for every table. info (may be NULL) sums what the servers
//  did. Returns 0, or the first error (a refusal, which the server made
//  before changing any row, or a timeout, after which some servers may
//  have applied the step: a retry is answered duplicate there).
int ps_sparse_client_push (ps_sparse_client_t *self, uint64_t step, uint32_t worker,
                           const uint64_t *const *ids, const size_t *counts,
                           const float *const *grads, ps_sparse_push_info_t *info,
                           ps_error_t *err);

//  Push as ps_sparse_client_push, then read the rows of pull_ids (as
//  ps_sparse_client_pull) after the push, in one round trip per server.
int ps_sparse_client_push_pull (ps_sparse_client_t *self, uint64_t step, uint32_t worker,
                                const uint64_t *const *ids, const size_t *counts,
                                const float *const *grads,
                                const uint64_t *const *pull_ids, const size_t *pull_counts,
                                float *const *rows, ps_sparse_push_info_t *info,
                                ps_error_t *err);

#endif
