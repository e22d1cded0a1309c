//  Little-endian integer encoding for the on-disk formats (snapshot files
//  and the step ledger), written byte by byte so the files are the same on
//  every host whatever its byte order or alignment rules.

#ifndef PS_BYTES_H_INCLUDED
#define PS_BYTES_H_INCLUDED

#include <stdint.h>

static inline void
ps_put_u32 (uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p [i] = (uint8_t) (v >> (8 * i));
}

static inline void
ps_put_u64 (uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p [i] = (uint8_t) (v >> (8 * i));
}

static inline uint32_t
ps_get_u32 (const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t) p [i] << (8 * i);
    return v;
}

static inline uint64_t
ps_get_u64 (const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t) p [i] << (8 * i);
    return v;
}

#endif
