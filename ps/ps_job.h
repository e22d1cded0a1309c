//  One push, pull or push-pull request in progress on a ps-server: a job.
//
//  A job is prepared on the serving thread: checked against the fence,
//  resolved against the partition table (every partition found, every
//  gradient's shape right, the step reserved and a sync push's round
//  checked on every partition), and
//  given its reply frames, so that a request is refused whole before
//  anything is applied. Its tasks, one per partition, then run on the
//  calling thread or on the pool (ps_pool.h): a push's gradients are all
//  scanned for NaN and infinities before any partition applies its own. A
//  task whose partition is large is itself split into ranges that the
//  pool's other threads help with (ps_job_apply_on).
//  Gradients are read in place from the request's frames; a push-pull's
//  fresh values are written over its own gradient frames and sent back in
//  them. What the job holds is charged to its peer (ps_peers.h) until it
//  is destroyed or its reply frames are sent.

#ifndef PS_JOB_H_INCLUDED
#define PS_JOB_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"
#include "ps_msg.h"
#include "ps_peers.h"
#include "ps_pool.h"
#include "ps_table.h"

typedef struct _ps_job_t ps_job_t;

//  A job for msg, a decoded push, pull or push-pull from peer. The job
//  takes msg and charges its tensor bytes to peer.
ps_job_t *ps_job_new (ps_msg_t *msg, ps_peer_t *peer);

//  Destroy the job, releasing what it holds, and give back its request
//  message for reuse.
ps_msg_t *ps_job_destroy (ps_job_t **self_p);

//  Check the job against fence (the generation a push must carry, 0: none
//  yet) and table (see above), and make its reply frames. Returns 0, or an
//  error code with err naming the partition, shape, step or generation
//  that was wrong; nothing was applied.
int ps_job_prepare (ps_job_t *self, ps_table_t *table, uint64_t fence, ps_error_t *err);

//  Have the job's pushes update a partition of PS_PARTITION_SPLIT_MIN
//  floats or more in ranges on pool's threads as well as the one running
//  its task (ps_partition_push_on); a pool without threads changes nothing.
void ps_job_apply_on (ps_job_t *self, ps_pool_t *pool);

//  The tensor bytes a prepared job moves, in and out, and its task count:
//  what decides between running it inline and on the pool.
size_t ps_job_bytes (ps_job_t *self);
size_t ps_job_tasks (ps_job_t *self);

//  Run every task of a prepared job on the calling thread.
void ps_job_run (ps_job_t *self);

//  The job as the pool runs it (ps_pool_submit with ps_job_scans), and the
//  job the pool gives back.
ps_pool_job_t *ps_job_pool_job (ps_job_t *self);
bool ps_job_scans (ps_job_t *self);
ps_job_t *ps_job_from_pool (ps_pool_job_t *job);

//  After its tasks ran: encode the reply into writer and point *frames at
//  its *nframes tensor frames, which sending consumes; or return the error
//  code of a refused push (a NaN, a partition's refusal) with err saying
//  why. A push's gradient frames that the reply does not carry are freed
//  here, before the reply is sent.
int ps_job_reply (ps_job_t *self, ps_writer_t *writer, zmq_msg_t **frames, size_t *nframes,
                  ps_error_t *err);

//  The request and its sender.
ps_msg_t *ps_job_msg (ps_job_t *self);
ps_peer_t *ps_job_peer (ps_job_t *self);

#endif
