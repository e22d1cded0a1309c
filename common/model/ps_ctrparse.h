//  The line parsers of the CTR data formats: one line of Criteo or LIBSVM
//  text in, one example appended to a batch out, or the reason the line is
//  malformed (schemas/data.md gives the formats as read).
//
//  Criteo: 40 tab-separated fields, the label (0 or 1), I1..I13 (integers,
//  possibly empty; the feature is log (1 + x), with an empty field and a
//  negative x, which the Kaggle data holds in I2, taken as 0, as DLRM's
//  preprocessing does) and C1..C26 (8 hex digits or empty). Categorical
//  value v of field f (0-based) becomes the id ps_ctrparse_criteo_id (f,
//  v), an empty one that of v = PS_CTR_CRITEO_EMPTY. LIBSVM/SVMlight: a
//  label (0, 1, -1 or +1; -1 is taken as 0), then index:value pairs
//  separated by blanks, the index a 64-bit whole number used as the id,
//  the value a finite float used as its weight; "qid:N" and a trailing
//  "# comment" are skipped. A carriage return before the end of a line is
//  ignored in both.

#ifndef PS_CTRPARSE_H_INCLUDED
#define PS_CTRPARSE_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_ctrbatch.h"
#include "ps_error.h"

//  The value of an empty categorical field: above every 8-hex-digit value,
//  so that it is an id of its own in each field.
#define PS_CTR_CRITEO_EMPTY (UINT64_C (1) << 32)

//  The id of categorical value v (< 2^32, or PS_CTR_CRITEO_EMPTY) of field
//  f (0..25): ps_mix64 (((f + 1) << 40) ^ v). The argument of ps_mix64 is
//  different for every (f, v), and ps_mix64 is a bijection, so no two
//  values of any fields share an id, while ids stay spread evenly over
//  64 bits for the servers' hash.
uint64_t ps_ctrparse_criteo_id (unsigned field, uint64_t value);

//  Parse line (len bytes, without its newline; line [len] must be readable
//  and be a newline or a NUL byte) in batch's format and append the
//  example to batch, which must have room for one more. Returns 0;
//  PS_ECORRUPT when the line is malformed, with err saying which field
//  and what was expected; PS_ETOOBIG when out of memory for its ids. On
//  error the batch is unchanged.
int ps_ctrparse_line (ps_ctrbatch_t *batch, const char *line, size_t len, ps_error_t *err);

#endif
