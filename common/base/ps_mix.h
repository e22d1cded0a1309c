//  Counter-based randomness: the splitmix64 finalizer and the draw built on
//  it. Everything in ps-cluster that must be random yet reproducible from a
//  seed alone (initial weights, the per-epoch shuffle, dropout masks) draws
//  from here, so that any process, or a GPU thread, can compute draw c of
//  seed s without running a generator through draws 0..c-1.
//
//  Draw c of seed s is  mix64 (mix64 (s) + (c + 1) * golden_gamma): exactly
//  the c-th output of a splitmix64 generator seeded with mix64 (s). Hashing
//  the seed first keeps neighbouring seeds from giving shifted copies of
//  one stream. The functions are inline and usable in CUDA device code.

#ifndef PS_MIX_H_INCLUDED
#define PS_MIX_H_INCLUDED

#include <stdint.h>

#if defined(__CUDACC__)
#   define PS_HOST_DEVICE __host__ __device__
#else
#   define PS_HOST_DEVICE
#endif

#define PS_MIX_GOLDEN_GAMMA  0x9e3779b97f4a7c15ULL

//  The splitmix64 finalizer (Stafford's "Mix13" variant): a bijection on
//  64-bit words in which every input bit affects every output bit.
static inline PS_HOST_DEVICE uint64_t
ps_mix64 (uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

//  Draw number `counter` of the stream whose hashed seed is key
//  (key = ps_mix64 (seed)), as 64 random bits.
static inline PS_HOST_DEVICE uint64_t
ps_mix_draw (uint64_t key, uint64_t counter)
{
    return ps_mix64 (key + (counter + 1) * PS_MIX_GOLDEN_GAMMA);
}

#endif
