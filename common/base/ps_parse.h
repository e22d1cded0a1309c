//  Strict parsing of the numbers people write: command-line values and the
//  ports of addresses. Every program of ps-cluster reads its numeric flags
//  through these two functions, so that they all accept the same forms and
//  refuse the same mistakes with the same words.
//
//  A whole number is decimal digits and nothing else: no space before or
//  after, no sign, no "0x", not empty, and not beyond 2^64 - 1. A number is
//  an optional minus sign, digits with an optional fraction (or a fraction
//  alone, ".5"), and an optional exponent ("1e-3"), finite: no space, no
//  "+", no hex, no "inf" or "nan". Where the range starts at zero or above,
//  a minus sign is refused too, so "-0" is not taken for 0.
//
//  Errors name what was parsed (a flag, "--threads", or a key), quote the
//  text, and give the range expected:
//
//    --threads " 3": expected a whole number in 0..256
//    --lr "0x10": expected a number in (0, 1e+06]

#ifndef PS_PARSE_H_INCLUDED
#define PS_PARSE_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include "ps_error.h"

//  Parse a whole number in [min, max] into *value. Returns 0, or PS_EINVAL
//  naming `what` and the text; *value is unchanged then.
int ps_parse_uint (const char *what, const char *text, uint64_t min, uint64_t max,
                   uint64_t *value, ps_error_t *err);

//  Parse a finite number in [min, max], or in (min, max] when min_open,
//  into *value. Returns 0, or PS_EINVAL naming `what` and the text; *value
//  is unchanged then.
int ps_parse_double (const char *what, const char *text, double min, bool min_open,
                     double max, double *value, ps_error_t *err);

//  Parse a byte count: a whole number, optionally followed by K, M or G
//  (times 1024, 1024^2, 1024^3), into *value (at least 1). Returns 0, or
//  PS_EINVAL naming `what` and the text; *value is unchanged then.
int ps_parse_bytes (const char *what, const char *text, uint64_t *value, ps_error_t *err);

#endif
