//  The synchronous mode: synchronous training on the servers, as
//  TensorFlow's SyncReplicasOptimizer (and CentralStorageStrategy with
//  one server) do it. A round (a global step) is one batch per live
//  worker: every worker pulls the parameters the last round left,
//  computes its batch's gradient and pushes it tagged with the round and
//  the round's step count; the servers sum the round's gradients and
//  apply their mean once, when its last step arrives
//  (ps_partition_push_round).
//
//  The mode is the servers' side (ps_mode_ps.h) with a policy that keeps
//  the rounds: a round is the next consecutive steps of the schedule, as
//  many as there are live workers when it opens (fewer at the end of an
//  epoch or of the run), named by its first step, so that a resumed run
//  numbers its rounds as the first did. A step is handed out only while
//  the open round has one waiting; the next round opens once every step
//  of this one is done, that is pushed to every server, so every server
//  has applied it. A failed worker's step goes back to the queue and is
//  handed to another worker with the same step id and round (a server
//  that added it already answers a repeat). A checkpoint lets the open
//  round finish and is taken between rounds, since a partition with a
//  round half added cannot be saved; a recovery discards the open round
//  with the rest of what the restore rewinds.
//
//  A worker asks for its next work before it pushes its step. Finding the
//  round handed out, it is told to wait, pushes, and asks again with the
//  step's completion; that request is held until the round closes and the
//  next one opens (no polling). An evaluation goes only to a worker whose
//  step is reported, so that no round waits for an evaluation; the others
//  take the evaluating worker's share of the rounds meanwhile. The done
//  record gains the rounds, their mean step count, and their mean and
//  longest time. Its operations are ps_mode_sync (ps_mode.h); nothing
//  else is public.

#ifndef PS_MODE_SYNC_H_INCLUDED
#define PS_MODE_SYNC_H_INCLUDED

#include "ps_mode.h"

extern const ps_mode_ops_t ps_mode_sync;

#endif
