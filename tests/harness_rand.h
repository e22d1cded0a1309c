//  Deterministic random numbers for tests: every test draws its inputs
//  from a seed of its own, so that a failure reproduces exactly, run after
//  run and machine after machine. Two generators, kept because tests'
//  inputs (and the cases their seeds were chosen for) depend on their
//  exact sequences: splitmix64, the generator whose finalizer
//  common/base/ps_mix.h holds, and Knuth's 64-bit linear congruential
//  generator (MMIX's constants), of which the tests use the high 31 bits.
//  Neither is for anything but tests.

#ifndef PS_HARNESS_RAND_H_INCLUDED
#define PS_HARNESS_RAND_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

//  The next output of the splitmix64 generator whose state is *state:
//  the state moves on by the golden gamma and its ps_mix64 is returned.
uint64_t harness_splitmix (uint64_t *state);

//  A double uniform in [0, 1), from the top 53 bits of harness_splitmix.
double harness_unit (uint64_t *state);

//  The next output of the linear congruential generator whose state is
//  *state (state = state * 6364136223846793005 + 1442695040888963407):
//  the new state's top 31 bits, in [0, 2^31).
uint64_t harness_lcg (uint64_t *state);

#endif
