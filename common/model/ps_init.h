//  Variable initializers: zeros, constant, uniform, glorot-uniform, normal.
//
//  The value of every element is a pure function of (seed, flat index of the
//  element in the whole variable). A server that holds rows [b, e) of a
//  variable computes exactly the values those rows would have in an
//  unpartitioned variable, so a model re-partitioned over a different number
//  of servers starts with bitwise the same weights. The random source is a
//  counter-based generator (a 64-bit mixing function of seed and index), not
//  a sequential stream, which is what makes this possible.

#ifndef PS_INIT_H_INCLUDED
#define PS_INIT_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"
#include "ps_shape.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PS_INIT_ZEROS,
    PS_INIT_CONSTANT,          //  every element = value
    PS_INIT_UNIFORM,           //  U[low, high)
    PS_INIT_GLOROT_UNIFORM,    //  U[-l, l), l = sqrt (6 / (fan_in + fan_out)), Keras fans
    PS_INIT_NORMAL,            //  N(mean, stddev^2)
} ps_init_kind_t;

typedef struct {
    ps_init_kind_t kind;
    uint64_t seed;
    double value;              //  constant
    double low, high;          //  uniform
    double mean, stddev;       //  normal
} ps_init_t;

//  Set *init to the kind with its defaults: value 0, U[-0.05, 0.05),
//  N(0, 0.05^2) (Keras' defaults), seed 0.
void ps_init_default (ps_init_t *init, ps_init_kind_t kind);

//  Parse "zeros", "constant", "uniform", "glorot_uniform" or "normal".
int ps_init_kind_parse (const char *name, ps_init_kind_t *kind, ps_error_t *err);
const char *ps_init_kind_name (ps_init_kind_t kind);

//  Check the parameters (low < high, stddev >= 0, finite numbers).
int ps_init_validate (const ps_init_t *init, ps_error_t *err);

//  Fill out [0, (row_end - row_begin) * row elements) with rows
//  [row_begin, row_end) of a variable of full shape `shape`.
int ps_init_fill (const ps_init_t *init, const ps_shape_t *shape,
                  int64_t row_begin, int64_t row_end, float *out, ps_error_t *err);

//  Fill out [0, count) with draws 0, 1, ... of the stream whose hashed
//  seed is key (ps_mix.h), by the same formulas as ps_init_fill: what an
//  embedding row uses, keyed by its table's seed and its id
//  (ps_tablespec_init_row), having no place in a shaped variable. The
//  parameters are valid (ps_init_validate) and the kind is not
//  glorot_uniform, which needs a shape for its fans.
void ps_init_fill_keyed (const ps_init_t *init, uint64_t key, size_t count, float *out);

#ifdef __cplusplus
}
#endif

#endif
