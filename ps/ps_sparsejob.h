//  One sparse_pull, sparse_push or sparse_push_pull request in progress on
//  a ps-server: the embedding tables' counterpart of ps_job.
//
//  A sparse job is prepared on the serving thread: checked against the
//  fence, resolved against the server's tables (every table found, its
//  row width as the request says, every id of this server's shard, no id
//  twice in a push, the step free in each pushed table's ledger), and
//  given its reply frames, so that a request is refused whole before
//  anything is applied. Under a memory budget (ps_tables.h) a push also
//  reserves the most its new rows could take, or is refused (too_big)
//  when that could pass the budget; the job gives the reservation back
//  when it is destroyed. Its tasks then run on the calling thread or on the
//  pool (ps_pool.h): one per pushed table, each followed by the pulls of
//  that table a push-pull asks for (so they read the rows after the push),
//  and the other pulls cut into tasks of a few thousand ids. (A table's
//  push is one task: its ledger records the step once, for all its ids.) A push's gradients are all scanned for
//  NaN and infinities before any table applies its own. Ids and gradients
//  are read in place from the request's frames; rows are pulled straight
//  into the reply frames. What the job holds is charged to its peer
//  (ps_peers.h) until it is destroyed or its reply frames are sent.

#ifndef PS_SPARSEJOB_H_INCLUDED
#define PS_SPARSEJOB_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"
#include "ps_msg.h"
#include "ps_peers.h"
#include "ps_pool.h"
#include "ps_tables.h"

typedef struct _ps_sparsejob_t ps_sparsejob_t;

//  A job for msg, a decoded sparse_pull, sparse_push or sparse_push_pull
//  from peer. The job takes msg and charges its frames' bytes to peer.
ps_sparsejob_t *ps_sparsejob_new (ps_msg_t *msg, ps_peer_t *peer);

//  Destroy the job, releasing what it holds, and give back its request
//  message for reuse.
ps_msg_t *ps_sparsejob_destroy (ps_sparsejob_t **self_p);

//  Check the job against fence (the generation a push must carry, 0: none
//  yet) and tables (see above), and make its reply frames. Returns 0, or
//  an error code with err naming the table, id, step or generation that
//  was wrong, or PS_ETOOBIG naming the budget a push could pass; nothing
//  was applied.
int ps_sparsejob_prepare (ps_sparsejob_t *self, ps_tables_t *tables, uint64_t fence,
                          ps_error_t *err);

//  The bytes a prepared job moves, in and out, and the rows it pushes and
//  pulls in tasks of their own (a pull of a pushed table is part of the
//  push's task): what decides between running it inline and on the pool.
size_t ps_sparsejob_bytes (ps_sparsejob_t *self);
size_t ps_sparsejob_rows (ps_sparsejob_t *self);

//  Run every task of a prepared job on the calling thread.
void ps_sparsejob_run (ps_sparsejob_t *self);

//  The job as the pool runs it (ps_pool_submit, scanning first), and the
//  job the pool gives back: NULL when that pool job is not a sparse job.
ps_pool_job_t *ps_sparsejob_pool_job (ps_sparsejob_t *self);
ps_sparsejob_t *ps_sparsejob_from_pool (ps_pool_job_t *job);

//  After its tasks ran: encode the reply into writer and point *frames at
//  its *nframes row frames, which sending consumes; or return
//  PS_ENONFINITE for a push whose gradients held NaN or an infinity, with
//  err naming the table, the row and the element.
int ps_sparsejob_reply (ps_sparsejob_t *self, ps_writer_t *writer, zmq_msg_t **frames,
                        size_t *nframes, ps_error_t *err);

//  The request and its sender.
ps_msg_t *ps_sparsejob_msg (ps_sparsejob_t *self);
ps_peer_t *ps_sparsejob_peer (ps_sparsejob_t *self);

#endif
