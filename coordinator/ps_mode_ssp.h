//  The bounded-staleness mode, ssp (Ho et al., "More Effective Distributed
//  ML via a Stale Synchronous Parallel Parameter Server", NIPS 2013;
//  Petuum Bösen): async, whose servers apply each push as it arrives
//  through the same ledgers, checkpoints and recovery (ps_mode_ps.h), with
//  a policy of that side around a clock (ps_sspclock.h) that keeps every
//  worker within the job's staleness S of the slowest live one.
//
//  A worker that has finished c steps is handed its next only while every
//  live worker has finished at least c - S. Until then its request is
//  held, not answered "wait": it is served as soon as a completion frees
//  it (or answered "wait" after a few seconds, so that the worker does not
//  take it for lost). A worker that fails, or is silent past the heartbeat
//  timeout, leaves the clock, and its steps go back to the queue, so it
//  never holds the others back; when it is heard again, or a new process
//  registers for it, it joins at the slowest live worker's clock. A
//  worker that evaluates is away from the clock until its result comes,
//  so that the others do not wait for it meanwhile. The done record's
//  "staleness" says how far ahead of the slowest each step started. Its operations are ps_mode_ssp (ps_mode.h); nothing else is
//  public.

#ifndef PS_MODE_SSP_H_INCLUDED
#define PS_MODE_SSP_H_INCLUDED

#include "ps_mode.h"

extern const ps_mode_ops_t ps_mode_ssp;

#endif
