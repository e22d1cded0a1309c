//  A member of a mirrored ring: the worker's replica (ps_replica.h) and its
//  place in the ring (ps_ring.h), and the two things a member does with
//  them: join a ring, taking over one member's replica so that every
//  member holds the same state, and run one synchronous update, summing
//  every member's gradient over the ring and applying the sum to the
//  replica.
//
//  It knows nothing of the coordinator: the worker's mirrored mode
//  (ps_wmode_mirrored.c) reads the coordinator's orders and calls these,
//  and an order to abort reaches a collective in progress through the
//  ring's watch.

#ifndef PS_MIRROR_H_INCLUDED
#define PS_MIRROR_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"
#include "ps_model.h"
#include "ps_replica.h"
#include "ps_ring.h"

typedef struct _ps_mirror_t ps_mirror_t;

//  A member for model whose replica starts from seed's initial values with
//  optimizer opt, receiving on bind and ipc (ps_ring_config_t; timeout_ms is the
//  ring's no-progress timeout; curve this worker's identity or NULL).
//  Returns NULL with err set when the endpoint cannot be bound or memory
//  is short.
ps_mirror_t *ps_mirror_new (const ps_model_t *model, uint64_t seed, const ps_opt_config_t *opt,
                            const char *bind, const char *ipc, int timeout_ms,
                            ps_curve_t *curve, ps_error_t *err);

void ps_mirror_destroy (ps_mirror_t **self_p);

ps_replica_t *ps_mirror_replica (ps_mirror_t *self);
ps_ring_t *ps_mirror_ring (ps_mirror_t *self);

//  The gradient buffer (the model's flat layout) that ps_mirror_update sums
//  and applies.
float *ps_mirror_grad (ps_mirror_t *self);

//  Join ring `ring_id` as member rank of n (endpoints in members, worker
//  task indices in tasks, as ps_ring_form takes them). When
//  load is not NULL and this member is the root, it first loads its
//  replica from the checkpoint directory load (mirrored layout). When root
//  >= 0, every member then takes over the root's replica by a broadcast.
//  Returns 0 or the error of the formation, load or broadcast (PS_ECANCELED
//  when the watch aborted it); the replica is then unchanged, or the
//  root's whole (the broadcast is checked in full before it is used).
int ps_mirror_join (ps_mirror_t *self, uint64_t ring_id, int rank, int n,
                    const char *const *members, const int *tasks, int root, const char *load,
                    ps_error_t *err);

//  One synchronous update: sum ps_mirror_grad over the ring, then apply the
//  sum with learning rate lr for the batches steps [0, nsteps). The caller
//  has scaled its gradient by its share of the global batch, so the sum is
//  the global batch's mean gradient. Returns 0; PS_DUPLICATE when the
//  replica had applied one of the steps (nothing applied); or the
//  all-reduce's error, the replica unchanged.
int ps_mirror_update (ps_mirror_t *self, const uint64_t *steps, size_t nsteps, double lr,
                      ps_error_t *err);

#endif
