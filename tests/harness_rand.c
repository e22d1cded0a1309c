//  Deterministic random numbers for tests; see harness_rand.h.

#include "harness_rand.h"
#include "ps_mix.h"

uint64_t
harness_splitmix (uint64_t *state)
{
    return ps_mix64 (*state += PS_MIX_GOLDEN_GAMMA);
}

double
harness_unit (uint64_t *state)
{
    return (double) (harness_splitmix (state) >> 11) * 0x1.0p-53;
}

uint64_t
harness_lcg (uint64_t *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return *state >> 33;
}
