//  What the modes that keep the variables on the servers share (async and
//  ssp; sync is planned to use it too): the parameters live on the
//  servers, partitioned by the placement; each worker asks for one step
//  at a time, pulls, computes and pushes, and the servers' ledgers apply
//  every step once however often it is pushed.
//
//  This module sets up the servers (or restores them from the newest
//  checkpoint), takes a work_request's reports (a completion only from
//  the worker that holds the step; a gradient the servers refused as not
//  finite retried a few times; evaluation results), answers what needs no
//  step (stop, an evaluation for an evaluator or, with none alive, the
//  first worker that asks), hands out the schedule's steps, and gives a
//  failed worker's steps back to the queue. A checkpoint pauses dispatch,
//  waits for the steps in flight, has every server snapshot its
//  partitions, and commits the manifest. A failed server pauses the run
//  until it is back; then every server is restored from the newest
//  checkpoint (a consistent cut), the schedule rewound to it, and the
//  servers fenced at a new generation so that no gradient computed
//  against the rewound values lands.
//
//  A mode built on it decides only when a worker may have a step: async
//  whenever the schedule has one, ssp while the worker is no more than
//  S steps ahead of the slowest. The functions whose first argument is
//  `void *self` have the signatures of ps_mode_ops_t's operations, so a
//  mode whose state is a ps_mode_ps_t uses them directly.

#ifndef PS_MODE_PS_H_INCLUDED
#define PS_MODE_PS_H_INCLUDED

#include "ps_mode.h"

typedef struct _ps_mode_ps_t ps_mode_ps_t;

//  The operations of ps_mode_ops_t, on a ps_mode_ps_t: new never fails.
void *ps_mode_ps_new (ps_mode_host_t *host, ps_error_t *err);
void ps_mode_ps_destroy (void **self_p);
int ps_mode_ps_setup (void *self);
//  Gives worker role:index's steps back to the queue; nothing for an
//  evaluator.
size_t ps_mode_ps_task_failed (void *self, ps_role_t role, int index);
void ps_mode_ps_server_failed (void *self, int index, const char *reason);
void ps_mode_ps_advance (void *self, double now);
int ps_mode_ps_final_checkpoint (void *self, double now);

//  Take the reports of work_request req from role:index (peer). Returns
//  how many training steps of worker index it completed.
uint64_t ps_mode_ps_take_reports (ps_mode_ps_t *self, ps_peer_t *peer, ps_role_t role,
                                  int index, const ps_proto_work_request_t *req);

//  Answer request id of role:index, if it needs no training step: "stop"
//  when the run is stopping, an evaluation when one is due and role:index
//  should have it (want: the task asks for work). Returns true when it
//  answered.
bool ps_mode_ps_answer (ps_mode_ps_t *self, ps_peer_t *peer, ps_role_t role, int index,
                        uint64_t id, bool want);

//  Whether steps may be handed out: training, and neither a checkpoint
//  nor a recovery pauses dispatch.
bool ps_mode_ps_dispatching (const ps_mode_ps_t *self);

//  Answer worker index's request id with its next step. Returns true when
//  it did; false, having sent nothing, when the schedule has no step to
//  hand out now.
bool ps_mode_ps_hand_out (ps_mode_ps_t *self, ps_peer_t *peer, int index, uint64_t id);

//  Answer request id "wait": ask again after a short while.
void ps_mode_ps_wait (ps_mode_ps_t *self, ps_peer_t *peer, uint64_t id);

#endif
