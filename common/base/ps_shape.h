//  Tensor shapes: the rank and dimensions of a float32 variable or of one
//  partition of it. Every module that checks or prints a shape uses these
//  helpers, so overflow checks and error wording are the same everywhere.

#ifndef PS_SHAPE_H_INCLUDED
#define PS_SHAPE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PS_MAX_RANK  8
#define PS_NAME_MAX  128     //  variable names, including the terminating NUL

typedef struct {
    int rank;
    int64_t dims [PS_MAX_RANK];
} ps_shape_t;

//  Fill a shape from an array. Returns PS_ESHAPE when rank is out of range
//  (1..PS_MAX_RANK), a dimension is not positive, or the element count
//  overflows.
int ps_shape_set (ps_shape_t *self, const int64_t *dims, int rank, ps_error_t *err);

//  Number of elements; the shape must be valid.
int64_t ps_shape_count (const ps_shape_t *self);

//  Elements in one row (product of all dimensions but the first).
int64_t ps_shape_row_count (const ps_shape_t *self);

//  True when both shapes have the same rank and dimensions.
bool ps_shape_equal (const ps_shape_t *a, const ps_shape_t *b);

//  The shape of rows [row_begin, row_end) of self: the first dimension
//  replaced by the row count. Returns PS_ESHAPE when the range is empty or
//  falls outside the first dimension.
int ps_shape_rows (const ps_shape_t *self, int64_t row_begin, int64_t row_end,
                   ps_shape_t *out, ps_error_t *err);

//  Format as "[3,3,1,32]" into buf; returns buf.
const char *ps_shape_str (const ps_shape_t *self, char *buf, size_t len);

//  Check a variable name: 1..PS_NAME_MAX-1 bytes of printable ASCII.
int ps_name_check (const char *name, size_t len, ps_error_t *err);

//  Check a name as files store it: a field of PS_NAME_MAX bytes holding the
//  name, NUL-terminated and zero-padded, so that a name has one encoding.
//  Returns 0, or PS_ECORRUPT naming path and what the name is ("variable",
//  "table").
int ps_name_field_check (const char *field, const char *path, const char *what,
                         ps_error_t *err);

#ifdef __cplusplus
}
#endif

#endif
