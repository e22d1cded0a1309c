//  What the consistency modes that keep the variables on the servers
//  share (async, ssp and sync): the servers' side of a run. The
//  parameters live on the servers, partitioned by the placement; each
//  worker asks for one step at a time, pulls, computes and pushes, and
//  the servers' ledgers apply every step once however often it is
//  pushed.
//
//  This module sets up the servers (or restores them from the newest
//  checkpoint), takes a work_request's reports (a completion only from
//  the worker that holds the step; a gradient the servers refused as not
//  finite retried a few times; a step failing otherwise retried after a
//  backoff of its worker, up to the job's step_retries in a row;
//  evaluation results), answers what needs no step (stop, an evaluation
//  for an evaluator or, with none alive, the first worker that asks),
//  hands out the schedule's steps, and gives a
//  failed worker's steps back to the queue. A checkpoint pauses dispatch,
//  waits for the steps in flight, has every server snapshot its
//  partitions, and commits the manifest. A failed server pauses the run
//  until it is back; then every server is restored from the newest
//  checkpoint (a consistent cut), the schedule rewound to it, and the
//  servers fenced at a new generation so that no gradient computed
//  against the rewound values lands.
//
//  What a mode adds to this comes in as a policy (ps_mode_ps_policy_t):
//  when a worker may have a step (ssp: while it is no more than S steps
//  ahead of the slowest; sync: while the open round has one), whether a
//  refused request is held rather than answered "wait", who may evaluate
//  and what an evaluating worker changes, what a train answer carries
//  besides the step, what a checkpoint waits for, what a rewind resets,
//  what a worker's start, completion, departure and return move, and what
//  the done record adds. Async has none. A mode's
//  operations (ps_mode.h) are then these functions, whose `self` is the
//  ps_mode_ps_t its new made.

#ifndef PS_MODE_PS_H_INCLUDED
#define PS_MODE_PS_H_INCLUDED

#include "ps_mode.h"

typedef struct _ps_mode_ps_t ps_mode_ps_t;

//  What a mode changes in the servers' side; arg is the mode's own state.
//  Every hook may be NULL (async's behaviour).
typedef struct {
    //  Whether worker index may be handed a step now, training with no
    //  recovery under way; paused: a checkpoint waits to be taken, or a
    //  stop signal came, which pauses dispatch for good (async hands out
    //  nothing then). NULL: !paused.
    bool (*may_hand) (void *arg, int index, bool paused);
    //  A request may_hand refused while nothing pauses dispatch is
    //  held, not answered "wait": it is served as soon as may_hand lets
    //  it (advance tries), or answered "wait" after PS_MODE_HOLD_MS. Only
    //  a worker that holds no step in flight is held: a worker asks for
    //  its next work before it pushes its step, and the step's completion
    //  goes with its next request, which a held one would keep back.
    bool hold;
    //  An evaluation goes only to a worker that holds no step in flight,
    //  whose completion would otherwise wait for the evaluation (sync: a
    //  round closes only once every step of it is reported).
    bool eval_idle;
    //  Worker index was handed an evaluation (evaluating true), or is back
    //  from it: its report came, it asks for other work, it failed or
    //  registered again.
    void (*evaluating) (void *arg, int index, bool evaluating);
    //  Worker index is handed step: work is the answer, not sent yet, for
    //  the policy to set the optional fields it carries.
    void (*handed) (void *arg, int index, uint64_t step, ps_proto_work_t *work);
    //  Worker index completed step.
    void (*completed) (void *arg, int index, uint64_t step);
    //  With nothing in flight: whether a paused checkpoint may be taken.
    bool (*drained) (void *arg);
    //  The servers and the schedule were rewound to a checkpoint.
    void (*rewound) (void *arg);
    //  Worker index registered, or was heard again after it was declared
    //  failed.
    void (*joined) (void *arg, int index);
    //  Worker index failed (or fell silent); its steps are back in the
    //  queue.
    void (*left) (void *arg, int index);
    //  The done record (ps_mode.h's report).
    void (*report) (void *arg, json_t *record);
} ps_mode_ps_policy_t;

//  The servers' side of host's run, with policy (NULL: async's) and its
//  arg, which stays the caller's. Never fails.
ps_mode_ps_t *ps_mode_ps_new (ps_mode_host_t *host, const ps_mode_ps_policy_t *policy,
                              void *arg);
void ps_mode_ps_destroy (ps_mode_ps_t **self_p);
//  The arg given to new.
void *ps_mode_ps_arg (ps_mode_ps_t *self);

//  The mode operations of the same names (ps_mode.h), on a ps_mode_ps_t.
int ps_mode_ps_setup (void *self);
void ps_mode_ps_joined (void *self, ps_role_t role, int index, bool fresh);
void ps_mode_ps_rejoined (void *self, ps_role_t role, int index);
void ps_mode_ps_request (void *self, ps_peer_t *peer, ps_role_t role, int index, uint64_t id,
                         const ps_proto_work_request_t *req);
//  Gives worker role:index's steps back to the queue; nothing for an
//  evaluator.
size_t ps_mode_ps_task_failed (void *self, ps_role_t role, int index);
void ps_mode_ps_server_failed (void *self, int index, const char *reason);
void ps_mode_ps_advance (void *self, double now);
int ps_mode_ps_final_checkpoint (void *self, double now);
void ps_mode_ps_report (void *self, json_t *record, json_t *mismatches, uint64_t done);
void ps_mode_ps_stop (void *self);

#endif
