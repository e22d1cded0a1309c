//  The clock of ssp mode (bounded staleness; Ho et al., "More Effective
//  Distributed ML via a Stale Synchronous Parallel Parameter Server",
//  NIPS 2013). Each worker's clock counts the steps it has finished. A
//  worker whose clock is c may start its next step only while every live
//  worker has finished at least c - S steps: no worker runs more than S
//  steps ahead of the slowest, so no gradient is computed on parameters
//  that miss more than S of any worker's steps. S = PS_SSPCLOCK_UNBOUNDED
//  never holds a worker back (async).
//
//  Only live workers count. A worker that fails, or stops answering until
//  its heartbeat timeout, leaves the clock, so it cannot hold the others
//  back; when it (or its replacement) joins again its clock starts at the
//  slowest live worker's, so it neither waits nor holds anyone back.
//  A worker that evaluates is away for as long: while it does not train,
//  it does not hold the others back either.
//
//  The clock also measures what it bounds: at every start, how far the
//  starting worker is ahead of the slowest live one (0 .. S), as a
//  histogram the report prints.

#ifndef PS_SSPCLOCK_H_INCLUDED
#define PS_SSPCLOCK_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PS_SSPCLOCK_UNBOUNDED  UINT32_MAX

//  Histogram buckets: 0 .. PS_SSPCLOCK_BUCKETS - 2, and the last bucket
//  for everything at or above PS_SSPCLOCK_BUCKETS - 1.
#define PS_SSPCLOCK_BUCKETS    17

typedef struct _ps_sspclock_t ps_sspclock_t;

//  A clock for workers 0 .. workers - 1, none of them live yet.
ps_sspclock_t *ps_sspclock_new (uint32_t workers, uint32_t staleness);
void ps_sspclock_destroy (ps_sspclock_t **self_p);

//  Worker w is live (again): its clock becomes the slowest live worker's,
//  or 0 when it is the only one. Joining twice changes nothing.
void ps_sspclock_join (ps_sspclock_t *self, uint32_t w);

//  Worker w failed or was stopped: it no longer holds anyone back.
void ps_sspclock_leave (ps_sspclock_t *self, uint32_t w);

//  Live worker w is away from training (it evaluates): it keeps its
//  clock but no longer holds anyone back, as if it had left. Back, its
//  clock becomes the slowest of the others' if it fell behind it, so that
//  it neither holds anyone back on its return nor, since its clock never
//  goes back, runs further ahead of them than the bound. Leaving or
//  joining ends an absence.
void ps_sspclock_away (ps_sspclock_t *self, uint32_t w, bool away);

//  Whether live worker w, not away, may start a step now.
bool ps_sspclock_may_start (const ps_sspclock_t *self, uint32_t w);

//  Worker w starts a step (ps_sspclock_may_start said yes): count how far
//  it is ahead of the slowest live worker.
void ps_sspclock_started (ps_sspclock_t *self, uint32_t w);

//  Worker w finished a step: its clock advances by one.
void ps_sspclock_finished (ps_sspclock_t *self, uint32_t w);

//  Worker w's clock, and the slowest live worker's (0 when none is live).
uint64_t ps_sspclock_of (const ps_sspclock_t *self, uint32_t w);
uint64_t ps_sspclock_slowest (const ps_sspclock_t *self);

//  The staleness histogram: counts [d] starts made d steps ahead of the
//  slowest live worker (the last bucket: that many or more); returns the
//  largest d seen.
uint64_t ps_sspclock_histogram (const ps_sspclock_t *self,
                                uint64_t counts [PS_SSPCLOCK_BUCKETS]);

#endif
