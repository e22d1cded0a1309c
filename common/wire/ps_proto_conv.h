//  Conversions between the generated protocol structs (ps_proto.h) and
//  ps-cluster's own types: a shape, an optimizer configuration, an
//  initializer. The codec checks a field's wire type; these check what the
//  value means (a shape's rank and dimensions, an optimizer's ranges, a
//  table's spec), so a handler gets a value it can use or an error naming
//  what was wrong.

#ifndef PS_PROTO_CONV_H_INCLUDED
#define PS_PROTO_CONV_H_INCLUDED

#include <stdint.h>

#include "ps_error.h"
#include "ps_init.h"
#include "ps_optimizer.h"
#include "ps_proto.h"
#include "ps_shape.h"
#include "ps_tablespec.h"

//  Read a "shape" field into shape, with ps_shape_set's checks. Returns 0
//  or PS_ESHAPE.
int ps_proto_shape_get (const ps_proto_uint_array_t *dims, ps_shape_t *shape, ps_error_t *err);

//  Point dims at shape's dimensions, copied into storage (PS_MAX_RANK
//  entries), for encoding.
void ps_proto_shape_set (ps_proto_uint_array_t *dims, uint64_t *storage,
                         const ps_shape_t *shape);

//  Read an "optimizer" field into *opt: fields left out take the kind's
//  Keras defaults, and the result is validated. Returns 0, or PS_EINVAL
//  naming the field (*opt is then undefined).
int ps_proto_optimizer_get (const ps_proto_optimizer_t *in, ps_opt_config_t *opt,
                            ps_error_t *err);

//  Describe opt as an "optimizer" field, every field present.
void ps_proto_optimizer_set (ps_proto_optimizer_t *out, const ps_opt_config_t *opt);

//  Read an "init" field into *init: fields left out take the kind's
//  defaults, and the result is validated. Returns 0 or PS_EINVAL.
int ps_proto_init_get (const ps_proto_init_t *in, ps_init_t *init, ps_error_t *err);

//  Describe init as an "init" field, the fields of its kind present.
void ps_proto_init_set (ps_proto_init_t *out, const ps_init_t *init);

//  Read a "tablespec" field into *spec: fields left out take
//  ps_tablespec_default's values (an optimizer's, its kind's Keras
//  defaults), and the result is validated (ps_tablespec_validate). Returns
//  0, or PS_EINVAL naming the table and the field.
int ps_proto_tablespec_get (const ps_proto_tablespec_t *in, ps_tablespec_t *spec,
                            ps_error_t *err);

//  Describe spec as a "tablespec" field, every field present; out points
//  into spec (its name), which must outlive the encoding.
void ps_proto_tablespec_set (ps_proto_tablespec_t *out, const ps_tablespec_t *spec);

#endif
