//  The dropout mask, shared by the CPU and GPU backends so that both drop
//  exactly the same elements.
//
//  Whether element i of example e is kept is a pure function of (seed, e, i),
//  drawn from ps_mix.h: draw i of the stream keyed by the step's seed and the
//  example. A batch split over threads, or run on a GPU with one thread per
//  element, therefore gets the same mask, and a step replayed with the same
//  seed drops the same units. The trainer derives the step's seed from its
//  run seed and the step number. Keras semantics: a kept element is scaled by
//  1 / (1 - rate); at evaluation dropout is the identity.

#ifndef PS_DROPOUT_H_INCLUDED
#define PS_DROPOUT_H_INCLUDED

#include <stdint.h>

#include "ps_mix.h"

//  The integer threshold for a drop rate in [0, 1): the top 24 bits of a
//  draw are uniform on [0, 2^24), compared in integers so that host and
//  device agree exactly.
static inline PS_HOST_DEVICE uint32_t
ps_dropout_threshold (double rate)
{
    return (uint32_t) (rate * 16777216.0);
}

//  True when element `index` of example `example` survives.
static inline PS_HOST_DEVICE int
ps_dropout_keep (uint64_t seed, uint64_t example, uint64_t index, uint32_t threshold)
{
    uint64_t key = ps_mix64 (seed ^ ps_mix64 (example + PS_MIX_GOLDEN_GAMMA));
    return (uint32_t) (ps_mix_draw (key, index) >> 40) >= threshold;
}

#endif
