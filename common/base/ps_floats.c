//  Float arrays; see ps_floats.h.

#include "ps_floats.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined (__SSE__)
#   include <xmmintrin.h>
#endif

//  The AVX2 copy of the scan runs 8 lanes wide where the CPU has it (see
//  ps_optimizer.c for the same choice).
#if defined (__x86_64__)
#   define S_HOT  __attribute__ ((target_clones ("avx2", "default")))
#else
#   define S_HOT
#endif

//  Floats scanned per block: the fast pass only says whether a block holds
//  a non-finite value, and the slow pass finds which one in that block.
#define S_BLOCK  4096

//  The bits of +infinity: a float is NaN or infinite exactly when its
//  magnitude, read as an integer, is at least this.
#define S_INFINITY  0x7f800000u

//  The control bits that flush subnormals: MXCSR's flush-to-zero (results)
//  and denormals-are-zero (operands); AArch64's FPCR.FZ does both.
#define S_MXCSR_FTZ  0x8000u
#define S_MXCSR_DAZ  0x0040u
#define S_FPCR_FZ    (UINT64_C (1) << 24)

float *
ps_floats_alloc (size_t n)
{
    if (n == 0 || n > (SIZE_MAX - 63) / sizeof (float))
        return NULL;
    size_t bytes = (n * sizeof (float) + 63) & ~(size_t) 63;
    return aligned_alloc (64, bytes);
}

//  True when x [0..n) holds a non-finite value: the largest magnitude,
//  taken on the bits as integers, reaches infinity's. An integer maximum
//  is a loop the compiler vectorises (one AND and one VPMAXUD per eight
//  floats with AVX2) without reordering any float arithmetic; memcpy
//  keeps the type punning defined.
S_HOT static bool
s_block_nonfinite (const float *restrict x, size_t n)
{
    uint32_t largest = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy (&bits, &x [i], sizeof bits);
        bits &= 0x7fffffffu;
        largest = bits > largest ? bits : largest;
    }
    return largest >= S_INFINITY;
}

size_t
ps_floats_find_nonfinite (const float *x, size_t n)
{
    for (size_t at = 0; at < n; at += S_BLOCK) {
        size_t len = n - at < S_BLOCK ? n - at : S_BLOCK;
        if (s_block_nonfinite (x + at, len))
            for (size_t i = at; i < at + len; i++)
                if (!isfinite (x [i]))
                    return i;
    }
    return n;
}

void
ps_floats_flush_subnormals (void)
{
    //  A new thread starts with its creator's floating-point environment
    //  (pthread_create (3)), which holds these bits.
#if defined (__SSE__)
    _mm_setcsr (_mm_getcsr () | S_MXCSR_FTZ | S_MXCSR_DAZ);
#elif defined (__aarch64__)
    uint64_t fpcr;
    __asm__ __volatile__ ("mrs %0, fpcr" : "=r" (fpcr));
    fpcr |= S_FPCR_FZ;
    __asm__ __volatile__ ("msr fpcr, %0" : : "r" (fpcr));
#endif
}
