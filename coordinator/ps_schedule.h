//  The step schedule: which batches remain to be trained, which are in
//  flight on which worker, and which are done, so that every batch of
//  every epoch is trained exactly once however workers come and go.
//
//  A step is one batch of one epoch. Steps are numbered from 1 in the
//  order epoch by epoch, batch by batch:
//      step = epoch * batches_per_epoch + batch + 1
//  which is also the step id a worker tags its gradients with, so that the
//  servers' per-partition ledgers can refuse a step pushed twice. A run has
//  total_steps steps (epochs * batches_per_epoch, or fewer when the job
//  asks for a number of steps).
//
//  Steps are handed out in increasing order. A step taken back from a
//  failed worker goes to the front of the queue, ahead of any new step and
//  of steps taken back earlier, so it is retried first. The done set is
//  kept as a watermark (every step up to it is done) plus the few steps
//  above it that finished out of order; that compact form is what a
//  checkpoint records.

#ifndef PS_SCHEDULE_H_INCLUDED
#define PS_SCHEDULE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"

typedef struct _ps_schedule_t ps_schedule_t;

//  A schedule of total_steps steps over epochs of batches_per_epoch
//  batches. total_steps need not be a multiple of batches_per_epoch: the
//  last epoch is then cut short. Returns NULL and sets err when either is 0
//  (PS_EINVAL) or the state cannot be allocated (PS_ETOOBIG; it takes about
//  total_steps / 8 bytes plus 8 bytes per epoch).
ps_schedule_t *ps_schedule_new (uint64_t batches_per_epoch, uint64_t total_steps,
                                ps_error_t *err);

void ps_schedule_destroy (ps_schedule_t **self_p);

uint64_t ps_schedule_total (const ps_schedule_t *self);
uint64_t ps_schedule_batches_per_epoch (const ps_schedule_t *self);

//  Split a step (>= 1) into its epoch and batch (both 0-based).
void ps_schedule_locate (const ps_schedule_t *self, uint64_t step, uint64_t *epoch,
                         uint64_t *batch);

//  Hand the next step to worker (0..65535; a worker may hold several): a
//  requeued step first, else the lowest step never handed out. Returns 0
//  with *step set; PS_ENOTFOUND when no step is waiting (all are done or
//  in flight); PS_EINVAL when worker is out of range; PS_ETOOBIG when
//  memory runs out (nothing changes).
int ps_schedule_next (ps_schedule_t *self, int worker, uint64_t *step);

//  Mark a step done. Returns 0; PS_DUPLICATE when it was done already
//  (nothing changes); PS_EINVAL when step is 0 or past the total. The
//  schedule itself marks a step done whoever had it in flight, or whether
//  anyone had it at all (a step done elsewhere is taken off the queue);
//  a caller that must accept a completion only from the worker holding
//  the step asks ps_schedule_holder first.
int ps_schedule_complete (ps_schedule_t *self, uint64_t step);

//  The worker that has step in flight, or -1 when nobody has (it waits in
//  the queue, was never handed out, is done, or is out of range).
int ps_schedule_holder (const ps_schedule_t *self, uint64_t step);

//  Give back a step handed out to worker (the worker reported it failed):
//  it goes to the front of the queue. PS_EINVAL when worker does not have
//  step in flight. Giving steps back never allocates.
int ps_schedule_release (ps_schedule_t *self, int worker, uint64_t step);

//  Give back every step worker has in flight, to the front of the queue
//  in increasing order (all ahead of steps queued before). Returns how many
//  (0 for a worker that never took a step).
size_t ps_schedule_release_worker (ps_schedule_t *self, int worker);

//  Steps in flight, in total and on one worker.
size_t ps_schedule_in_flight (const ps_schedule_t *self);
size_t ps_schedule_worker_in_flight (const ps_schedule_t *self, int worker);

//  Steps done, and whether all are.
uint64_t ps_schedule_done_count (const ps_schedule_t *self);
bool ps_schedule_finished (const ps_schedule_t *self);
bool ps_schedule_is_done (const ps_schedule_t *self, uint64_t step);

//  Whether every step of epoch (0-based) is done. For the last epoch of a
//  run cut short by total_steps, that is every step of it up to the total;
//  an epoch entirely past the total is never done.
bool ps_schedule_epoch_done (const ps_schedule_t *self, uint64_t epoch);

//  The done set in compact form: *watermark is the highest step such that
//  every step up to it is done (0 when step 1 is not); *above (allocated,
//  free it; NULL when *count is 0) lists the done steps above it, sorted.
//  Returns 0, or PS_ETOOBIG when the list cannot be allocated (then *above
//  is NULL and *count 0, so a checkpoint must not be written from it).
int ps_schedule_done_set (const ps_schedule_t *self, uint64_t *watermark, uint64_t **above,
                          size_t *count);

//  Reset the schedule to a done set saved by ps_schedule_done_set: nothing
//  is in flight, every step not in the set is waiting, in increasing
//  order. Returns PS_EINVAL (changing nothing) when the watermark or a
//  listed step is past the total, or the list is not strictly increasing
//  and above the watermark (or is NULL with count > 0). A list starting at
//  watermark + 1 is accepted: the watermark moves up over it.
int ps_schedule_restore (ps_schedule_t *self, uint64_t watermark, const uint64_t *above,
                         size_t count, ps_error_t *err);

#endif
