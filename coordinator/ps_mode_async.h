//  The asynchronous mode: the parameters live on the servers, partitioned
//  by the placement; each worker asks for one step at a time, pulls,
//  computes and pushes, and the servers' ledgers apply every step once
//  however often it is pushed.
//
//  The mode is the servers' side that async, ssp and sync share
//  (ps_mode_ps.h: hand-out, completion, failures, checkpoints, recovery),
//  with nothing of its own: any worker may take the next step whenever
//  no checkpoint pauses dispatch. Its operations are ps_mode_async
//  (ps_mode.h); nothing else is public.

#ifndef PS_MODE_ASYNC_H_INCLUDED
#define PS_MODE_ASYNC_H_INCLUDED

#include "ps_mode.h"

extern const ps_mode_ops_t ps_mode_async;

#endif
