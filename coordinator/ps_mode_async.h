//  The asynchronous mode: the parameters live on the servers, partitioned
//  by the placement; each worker asks for one step at a time, pulls,
//  computes and pushes, and the servers' ledgers apply every step once
//  however often it is pushed.
//
//  The mode hands out the schedule's steps and an evaluation to an
//  evaluator (or, with none alive, the first worker that asks); takes a
//  completion only from the worker that holds the step; gives a failed
//  worker's steps back to the queue; retries a step whose gradient the
//  servers refused as not finite, a few times. A checkpoint pauses
//  dispatch, waits for the steps in flight, has every server snapshot
//  its partitions, and commits the manifest. A failed server pauses the
//  run until it is back; then every server is restored from the newest
//  checkpoint (a consistent cut), the schedule rewound to it, and the
//  servers fenced at a new generation so that no gradient computed
//  against the rewound values lands. Its operations are ps_mode_async
//  (ps_mode.h); nothing else is public.

#ifndef PS_MODE_ASYNC_H_INCLUDED
#define PS_MODE_ASYNC_H_INCLUDED

#include "ps_mode.h"

extern const ps_mode_ops_t ps_mode_async;

#endif
