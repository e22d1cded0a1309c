//  The asynchronous mode: the parameters live on the servers, partitioned
//  by the placement; each worker asks for one step at a time, pulls,
//  computes and pushes, and the servers' ledgers apply every step once
//  however often it is pushed.
//
//  The mode is the servers' side that async, ssp and sync share
//  (ps_mode_ps.h: hand-out, reports, evaluations, failed workers,
//  checkpoints, a failed server's recovery), with no policy of its own:
//  a worker has the schedule's next step whenever it asks, the schedule
//  has one, and no checkpoint pauses dispatch. Its operations are ps_mode_async
//  (ps_mode.h); nothing else is public.

#ifndef PS_MODE_ASYNC_H_INCLUDED
#define PS_MODE_ASYNC_H_INCLUDED

#include "ps_mode.h"

extern const ps_mode_ops_t ps_mode_async;

#endif
