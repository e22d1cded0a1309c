//  JSON values as JSON Schema sees them; see ps_jsonvalue.h.

#include "ps_jsonvalue.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


bool
ps_jsonvalue_is_integer (const json_t *value)
{
    if (json_is_integer (value))
        return true;
    if (!json_is_real (value))
        return false;
    double x = json_real_value (value);
    return isfinite (x) && floor (x) == x;
}

json_int_t
ps_jsonvalue_integer (const json_t *value)
{
    if (json_is_integer (value))
        return json_integer_value (value);
    double x = json_real_value (value);
    //  A validator's bounds keep x within 64 bits; this guards the cast.
    if (!(x > -9.3e18 && x < 9.2e18))
        return x < 0 ? INT64_MIN : INT64_MAX;
    return (json_int_t) x;
}

//  A long double holds every 64-bit integer and every double, so mixed
//  comparisons round nothing.
int
ps_jsonvalue_compare (const json_t *a, const json_t *b)
{
    if (json_is_integer (a) && json_is_integer (b)) {
        json_int_t x = json_integer_value (a), y = json_integer_value (b);
        return (x > y) - (x < y);
    }
    long double x = json_is_integer (a) ? (long double) json_integer_value (a)
                                        : (long double) json_real_value (a);
    long double y = json_is_integer (b) ? (long double) json_integer_value (b)
                                        : (long double) json_real_value (b);
    return (x > y) - (x < y);
}

bool
ps_jsonvalue_equal (const json_t *a, const json_t *b)
{
    if (json_is_number (a) && json_is_number (b))
        return ps_jsonvalue_compare (a, b) == 0;
    if (json_typeof (a) != json_typeof (b))
        return false;
    if (json_is_array (a)) {
        if (json_array_size (a) != json_array_size (b))
            return false;
        for (size_t i = 0; i < json_array_size (a); i++)
            if (!ps_jsonvalue_equal (json_array_get (a, i), json_array_get (b, i)))
                return false;
        return true;
    }
    if (json_is_object (a)) {
        if (json_object_size (a) != json_object_size (b))
            return false;
        const char *key;
        const json_t *value;
        json_object_foreach ((json_t *) a, key, value) {
            const json_t *other = json_object_get (b, key);
            if (!other || !ps_jsonvalue_equal (value, other))
                return false;
        }
        return true;
    }
    return json_equal ((json_t *) a, (json_t *) b);
}

//  jansson has checked the encoding, so every byte that does not continue
//  a character starts one.
size_t
ps_jsonvalue_length (const json_t *string)
{
    const unsigned char *p = (const unsigned char *) json_string_value (string);
    size_t bytes = json_string_length (string), n = 0;
    for (size_t i = 0; i < bytes; i++)
        n += (p [i] & 0xC0) != 0x80;
    return n;
}

void
ps_jsonvalue_number (const json_t *number, char *buf, size_t size)
{
    if (json_is_integer (number)) {
        snprintf (buf, size, "%lld", (long long) json_integer_value (number));
        return;
    }
    double value = json_number_value (number);
    for (int digits = 15; digits <= 17; digits++) {
        snprintf (buf, size, "%.*g", digits, value);
        if (strtod (buf, NULL) == value)
            return;
    }
}

void
ps_jsonvalue_quote (const json_t *value, char *buf, size_t size)
{
    assert (buf && size > 4);
    if (json_is_real (value)) {
        ps_jsonvalue_number (value, buf, size);
        return;
    }
    char *text = json_dumps (value, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!text) {
        snprintf (buf, size, "(a value)");
        return;
    }
    if (strlen (text) < size)
        snprintf (buf, size, "%s", text);
    else
        snprintf (buf, size, "%.*s...", (int) size - 4, text);
    free (text);
}
