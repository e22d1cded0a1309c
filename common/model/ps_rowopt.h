//  Per-row optimizers for embedding tables: one gradient applied to one
//  row, its value and its optimizer slots side by side as a table stores
//  them (ps_sparse.h). The formulas are those written in ps_tablespec.h
//  (Keras's SGD, Adagrad, Adam and Ftrl); Adam's bias correction uses the
//  row's own update count, so a row seen rarely is corrected for its own
//  few updates rather than for the global step.
//
//  Values and slots are float32; the arithmetic of Adam's step size and of
//  FTRL's powers is done in double, since a float pow over many updates
//  drifts further than the tests' tolerance against a float64 reference.

#ifndef PS_ROWOPT_H_INCLUDED
#define PS_ROWOPT_H_INCLUDED

#include <stdint.h>

#include "ps_tablespec.h"

#ifdef __cplusplus
extern "C" {
#endif

//  Set slots [0, dim * ps_rowopt_slot_count (opt->kind)) to their values at
//  a row's creation: Adagrad's accumulator and FTRL's n to
//  initial_accumulator, Adam's m and v and FTRL's z to 0. Slot k of
//  element j is slots [k * dim + j].
void ps_rowopt_init_slots (const ps_rowopt_t *opt, float *slots, uint32_t dim);

//  Apply gradient g [0, dim) to the row w [0, dim) with its slots (as
//  above). t is the row's update count including this update (1 at its
//  first): Adam's per-row step. opt is valid (ps_tablespec_validate).
void ps_rowopt_apply (const ps_rowopt_t *opt, float *w, float *slots, const float *g,
                      uint32_t dim, uint64_t t);

#ifdef __cplusplus
}
#endif

#endif
