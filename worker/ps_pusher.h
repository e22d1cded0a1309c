//  The pusher: a thread that runs one push-pull (ps_client_push_pull) at a
//  time, so that the worker computes step k while step k - 1's gradient
//  travels to the servers and the values after it come back (the plan's
//  "overlap"). It owns its thread and nothing else: the client and the
//  buffers are the caller's, lent for the time of one push, and the caller
//  touches them again only after ps_pusher_wait.

#ifndef PS_PUSHER_H_INCLUDED
#define PS_PUSHER_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include "ps_client.h"
#include "ps_error.h"

typedef struct _ps_pusher_t ps_pusher_t;

//  Start the thread. Aborts only for lack of memory or threads.
ps_pusher_t *ps_pusher_new (void);

//  Wait for a push in flight (it ends within the client's timeout), stop
//  the thread and set the caller's pointer to NULL.
void ps_pusher_destroy (ps_pusher_t **self_p);

//  Start pushing grads for step on client as worker `worker`, the values
//  after the push to come into values (ps_client_push_pull's arguments).
//  None may be in flight.
void ps_pusher_post (ps_pusher_t *self, ps_client_t *client, uint64_t step, uint32_t worker,
                     const float *const *grads, float *const *values);

//  Whether a push was posted and not waited for yet.
bool ps_pusher_busy (const ps_pusher_t *self);

//  Wait for the push in flight to end. Returns its result (0, or the
//  client's code with err set), its counters in *info and its time in
//  *ms. A push must be in flight.
int ps_pusher_wait (ps_pusher_t *self, ps_push_info_t *info, double *ms, ps_error_t *err);

#endif
