//  Float arrays; see ps_floats.h.

#include "ps_floats.h"

#include <stdint.h>
#include <stdlib.h>

float *
ps_floats_alloc (size_t n)
{
    if (n == 0 || n > (SIZE_MAX - 63) / sizeof (float))
        return NULL;
    size_t bytes = (n * sizeof (float) + 63) & ~(size_t) 63;
    return aligned_alloc (64, bytes);
}
