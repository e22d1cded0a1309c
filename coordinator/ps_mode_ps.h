//  What the consistency modes that keep the variables on the servers
//  share (async and sync; ssp is planned on it too): the servers' side of
//  a run. It creates or restores the partitions and sets the optimizer
//  and its learning-rate schedule on the servers; hands out the
//  schedule's steps and an evaluation to an evaluator (or, with none
//  alive, the first worker that asks); takes a completion only from the
//  worker that holds the step; gives a failed worker's steps back to the
//  queue; retries a step whose gradient the servers refused as not
//  finite, a few times. A checkpoint pauses dispatch, waits for the steps
//  in flight, has every server snapshot its partitions, and commits the
//  manifest. A failed server pauses the run until it is back; then every
//  server is restored from the newest checkpoint (a consistent cut), the
//  schedule rewound to it, and the servers fenced at a new generation so
//  that no gradient computed against the rewound values lands.
//
//  What a mode adds to this comes in as a policy (ps_mode_ps_policy_t):
//  when a step may be handed out, what a train answer carries besides the
//  step, what a checkpoint waits for, and what a rewind resets. Async has
//  none. A mode's operations (ps_mode.h) are then mostly these functions,
//  whose `self` is the ps_mode_ps_t its new made.

#ifndef PS_MODE_PS_H_INCLUDED
#define PS_MODE_PS_H_INCLUDED

#include "ps_mode.h"

typedef struct _ps_mode_ps_t ps_mode_ps_t;

//  What a mode changes in the servers' side; arg is the mode's own state.
typedef struct {
    //  Whether a step may be handed out now, training with no recovery
    //  under way; paused: a checkpoint waits to be taken (async hands out
    //  nothing then).
    bool (*may_hand) (void *arg, bool paused);
    //  The fields a train answer for step carries besides the six every
    //  work answer has, packed by pack.
    size_t extra_fields;
    void (*pack) (void *arg, msgpack_packer *pk, uint64_t step);
    //  With nothing in flight: whether a paused checkpoint may be taken.
    bool (*drained) (void *arg);
    //  The servers and the schedule were rewound to a checkpoint.
    void (*rewound) (void *arg);
    //  How long a worker told to wait sleeps before it asks again (0: the
    //  default, 20 ms).
    uint64_t wait_ms;
} ps_mode_ps_policy_t;

//  The servers' side of host's run, with policy (NULL: async's) and its
//  arg, which stays the caller's.
ps_mode_ps_t *ps_mode_ps_new (ps_mode_host_t *host, const ps_mode_ps_policy_t *policy,
                              void *arg);
void ps_mode_ps_destroy (ps_mode_ps_t **self_p);
//  The arg given to new.
void *ps_mode_ps_arg (ps_mode_ps_t *self);

//  The mode operations of the same names (ps_mode.h), on a ps_mode_ps_t.
int ps_mode_ps_setup (void *self);
void ps_mode_ps_request (void *self, ps_peer_t *peer, ps_role_t role, int index, uint64_t id,
                         const msgpack_object *h);
size_t ps_mode_ps_task_failed (void *self, ps_role_t role, int index);
void ps_mode_ps_server_failed (void *self, int index, const char *reason);
void ps_mode_ps_advance (void *self, double now);
int ps_mode_ps_final_checkpoint (void *self, double now);

#endif
