//  Tensor shapes; see ps_shape.h.

#include "ps_shape.h"

#include <stdio.h>
#include <string.h>

//  Limit element counts so that byte counts (4 per element) never overflow
//  size_t or int64_t arithmetic anywhere downstream.
#define S_MAX_ELEMENTS  (INT64_C (1) << 40)

int
ps_shape_set (ps_shape_t *self, const int64_t *dims, int rank, ps_error_t *err)
{
    if (rank < 1 || rank > PS_MAX_RANK)
        return ps_error_set (err, PS_ESHAPE, "rank %d is outside 1..%d", rank, PS_MAX_RANK);
    int64_t count = 1;
    for (int i = 0; i < rank; i++) {
        if (dims [i] <= 0)
            return ps_error_set (err, PS_ESHAPE, "dimension %d is %lld, expected > 0",
                                 i, (long long) dims [i]);
        if (dims [i] > S_MAX_ELEMENTS / count)
            return ps_error_set (err, PS_ESHAPE, "shape has more than 2^40 elements");
        count *= dims [i];
    }
    self->rank = rank;
    memcpy (self->dims, dims, sizeof (int64_t) * (size_t) rank);
    return PS_OK;
}

int64_t
ps_shape_count (const ps_shape_t *self)
{
    int64_t count = 1;
    for (int i = 0; i < self->rank; i++)
        count *= self->dims [i];
    return count;
}

int64_t
ps_shape_row_count (const ps_shape_t *self)
{
    int64_t count = 1;
    for (int i = 1; i < self->rank; i++)
        count *= self->dims [i];
    return count;
}

bool
ps_shape_equal (const ps_shape_t *a, const ps_shape_t *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims [i] != b->dims [i])
            return false;
    return true;
}

int
ps_shape_rows (const ps_shape_t *self, int64_t row_begin, int64_t row_end,
               ps_shape_t *out, ps_error_t *err)
{
    if (row_begin < 0 || row_end <= row_begin || row_end > self->dims [0])
        return ps_error_set (err, PS_ESHAPE, "row range [%lld,%lld) is not inside [0,%lld)",
                             (long long) row_begin, (long long) row_end,
                             (long long) self->dims [0]);
    *out = *self;
    out->dims [0] = row_end - row_begin;
    return PS_OK;
}

const char *
ps_shape_str (const ps_shape_t *self, char *buf, size_t len)
{
    //  Track the used length clamped to the buffer: snprintf returns what it
    //  would have written, which may exceed what fits.
    size_t used = 0;
    buf [0] = 0;
    for (int i = 0; i <= self->rank && used + 1 < len; i++) {
        int n = i == self->rank
              ? snprintf (buf + used, len - used, "]")
              : snprintf (buf + used, len - used, "%s%lld", i ? "," : "[",
                          (long long) self->dims [i]);
        used += n > 0 ? (size_t) n : 0;
        if (used >= len)
            used = len - 1;
    }
    return buf;
}

int
ps_name_check (const char *name, size_t len, ps_error_t *err)
{
    if (len == 0 || len >= PS_NAME_MAX)
        return ps_error_set (err, PS_EINVAL, "variable name has %zu bytes, expected 1..%d",
                             len, PS_NAME_MAX - 1);
    for (size_t i = 0; i < len; i++)
        if (name [i] < 0x21 || name [i] > 0x7e)
            return ps_error_set (err, PS_EINVAL,
                                 "variable name has a byte 0x%02x at %zu, expected printable ASCII",
                                 (unsigned char) name [i], i);
    return PS_OK;
}

int
ps_name_field_check (const char *field, const char *path, const char *what, ps_error_t *err)
{
    size_t len = strnlen (field, PS_NAME_MAX);
    if (len == PS_NAME_MAX)
        return ps_error_set (err, PS_ECORRUPT, "file %s: %s name has no NUL in %d bytes",
                             path, what, PS_NAME_MAX);
    for (size_t i = len; i < PS_NAME_MAX; i++)
        if (field [i] != 0)
            return ps_error_set (err, PS_ECORRUPT,
                                 "file %s: name padding byte %zu is 0x%02x, expected 0",
                                 path, i, (unsigned char) field [i]);
    return PS_OK;
}
