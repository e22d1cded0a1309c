//  Strict number parsing; see ps_parse.h.

#include "ps_parse.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool
s_digit (char c)
{
    return c >= '0' && c <= '9';
}

//  The end of the run of digits starting at p.
static const char *
s_digits (const char *p)
{
    while (s_digit (*p))
        p++;
    return p;
}

int
ps_parse_uint (const char *what, const char *text, uint64_t min, uint64_t max,
               uint64_t *value, ps_error_t *err)
{
    //  strtoull alone would take leading space, a sign (negating "-1" into
    //  2^64 - 1) and, with base 0, hex: only the digits get to it.
    bool ok = s_digit (*text) && *s_digits (text) == 0;
    unsigned long long n = 0;
    if (ok) {
        errno = 0;
        n = strtoull (text, NULL, 10);
        ok = errno == 0 && n >= min && n <= max;
    }
    if (ok) {
        *value = n;
        return PS_OK;
    }
    if (min == 0 && max == UINT64_MAX)
        return ps_error_set (err, PS_EINVAL, "%s \"%s\": expected a whole number (decimal "
                             "digits only)", what, text);
    return ps_error_set (err, PS_EINVAL, "%s \"%s\": expected a whole number in %llu..%llu",
                         what, text, (unsigned long long) min, (unsigned long long) max);
}

int
ps_parse_bytes (const char *what, const char *text, uint64_t *value, ps_error_t *err)
{
    const char *end = s_digits (text);
    static const char units [] = "KMG";
    const char *unit = *end ? strchr (units, *end) : NULL;
    int shift = unit ? 10 * (int) (unit - units + 1) : 0;
    bool ok = end > text && (*end == 0 || (unit && end [1] == 0));
    unsigned long long n = 0;
    if (ok) {
        errno = 0;
        n = strtoull (text, NULL, 10);
        ok = errno == 0 && n >= 1 && n <= UINT64_MAX >> shift;
    }
    if (!ok)
        return ps_error_set (err, PS_EINVAL, "%s \"%s\": expected a number of bytes of at "
                             "least 1, optionally followed by K, M or G (times 1024, 1024^2, "
                             "1024^3)", what, text);
    *value = (uint64_t) n << shift;
    return PS_OK;
}

//  Whether text is a number as ps_parse.h defines it.
static bool
s_number_form (const char *text, bool signed_ok)
{
    const char *p = text;
    if (*p == '-' && signed_ok)
        p++;
    const char *whole = p;
    p = s_digits (p);
    bool digits = p > whole;
    if (*p == '.') {
        const char *fraction = ++p;
        p = s_digits (p);
        digits = digits || p > fraction;
    }
    if (!digits)
        return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!s_digit (*p))
            return false;
        p = s_digits (p);
    }
    return *p == 0;
}

int
ps_parse_double (const char *what, const char *text, double min, bool min_open,
                 double max, double *value, ps_error_t *err)
{
    bool ok = s_number_form (text, min < 0);
    double v = 0;
    if (ok) {
        //  ERANGE: too large for a double (it would be infinite) or too
        //  small to be held other than as 0 or a denormal.
        errno = 0;
        v = strtod (text, NULL);
        ok = errno == 0 && isfinite (v) && (min_open ? v > min : v >= min) && v <= max;
    }
    if (ok) {
        *value = v;
        return PS_OK;
    }
    char range [64];
    if (max >= DBL_MAX)
        snprintf (range, sizeof range, "%s %g", min_open ? ">" : ">=", min);
    else
        snprintf (range, sizeof range, "in %c%g, %g]", min_open ? '(' : '[', min, max);
    return ps_error_set (err, PS_EINVAL, "%s \"%s\": expected a number %s", what, text, range);
}
