//  Variable initializers; see ps_init.h.
//
//  The random source is counter based, so that an element's value depends
//  only on the seed and on its flat index in the whole variable. Draw number
//  c of seed s is
//
//      key  = mix64 (s)
//      u64  = mix64 (key + (c + 1) * 0x9e3779b97f4a7c15)
//      u    = (u64 >> 11) * 2^-53                      a double in [0, 1)
//
//  where mix64 and the draw are those of ps_mix.h.
//
//  Element i of a uniform variable uses draw i. Element i of a normal
//  variable uses draws 2i and 2i + 1 for one Box-Muller transform,
//
//      z = sqrt (-2 ln (1 - u0)) * cos (2 pi u1)
//
//  (1 - u0 lies in (0, 1], so the logarithm is finite), and keeps only the
//  cosine half, which is what makes each element independent of the others.
//  All arithmetic is in double; the result is rounded to float once.

#include "ps_init.h"
#include "ps_mix.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <string.h>

static const char *s_kind_names [] = {
    [PS_INIT_ZEROS]          = "zeros",
    [PS_INIT_CONSTANT]       = "constant",
    [PS_INIT_UNIFORM]        = "uniform",
    [PS_INIT_GLOROT_UNIFORM] = "glorot_uniform",
    [PS_INIT_NORMAL]         = "normal",
};

#define S_KIND_COUNT  (sizeof s_kind_names / sizeof s_kind_names [0])

//  Draw number counter of the stream whose hashed seed is key, as a double
//  in [0, 1) with 53 random bits.
static inline double
s_draw (uint64_t key, uint64_t counter)
{
    uint64_t bits = ps_mix_draw (key, counter);
    return (double) (bits >> 11) * 0x1.0p-53;
}

//  True when x is finite and representable as a finite float, so that the
//  values written to the variable cannot overflow to infinity.
static bool
s_float_range (double x)
{
    return isfinite (x) && fabs (x) <= FLT_MAX;
}

//  Fill out [0, count) with U[low, high) for flat indices offset, offset+1,
//  ... The rounding to float can carry a value just below high up to high
//  itself; such values are moved to the largest float below high so that
//  the interval stays half open, as the header promises.
static void
s_fill_uniform (uint64_t key, double low, double high, int64_t offset,
                int64_t count, float *out)
{
    double width = high - low;
    float top = (float) high;
    float below_top = nextafterf (top, -INFINITY);
    for (int64_t i = 0; i < count; i++) {
        float value = (float) (low + width * s_draw (key, (uint64_t) (offset + i)));
        out [i] = value < top ? value : below_top;
    }
}

static void
s_fill_normal (uint64_t key, double mean, double stddev, int64_t offset,
               int64_t count, float *out)
{
    for (int64_t i = 0; i < count; i++) {
        uint64_t counter = 2 * (uint64_t) (offset + i);
        double u0 = s_draw (key, counter);
        double u1 = s_draw (key, counter + 1);
        double z = sqrt (-2.0 * log (1.0 - u0)) * cos (2.0 * M_PI * u1);
        out [i] = (float) (mean + stddev * z);
    }
}

//  The Glorot limit with the fans Keras computes: a vector has fan_in =
//  fan_out = its length, a dense kernel [in, out] has the obvious fans, and
//  a convolution kernel [..., in, out] multiplies both by the receptive
//  field size (the product of the leading spatial dimensions).
static double
s_glorot_limit (const ps_shape_t *shape)
{
    double fan_in, fan_out;
    if (shape->rank == 1)
        fan_in = fan_out = (double) shape->dims [0];
    else {
        double receptive = 1.0;
        for (int i = 0; i < shape->rank - 2; i++)
            receptive *= (double) shape->dims [i];
        fan_in = (double) shape->dims [shape->rank - 2] * receptive;
        fan_out = (double) shape->dims [shape->rank - 1] * receptive;
    }
    return sqrt (6.0 / (fan_in + fan_out));
}

void
ps_init_default (ps_init_t *init, ps_init_kind_t kind)
{
    memset (init, 0, sizeof *init);
    init->kind = kind;
    init->low = -0.05;
    init->high = 0.05;
    init->mean = 0.0;
    init->stddev = 0.05;
}

int
ps_init_kind_parse (const char *name, ps_init_kind_t *kind, ps_error_t *err)
{
    for (size_t i = 0; i < S_KIND_COUNT; i++)
        if (strcmp (name, s_kind_names [i]) == 0) {
            *kind = (ps_init_kind_t) i;
            return PS_OK;
        }
    return ps_error_set (err, PS_EINVAL,
                         "unknown initializer '%s', expected zeros, constant, uniform, "
                         "glorot_uniform or normal", name);
}

const char *
ps_init_kind_name (ps_init_kind_t kind)
{
    if ((unsigned) kind >= S_KIND_COUNT)
        return "unknown";
    return s_kind_names [kind];
}

int
ps_init_validate (const ps_init_t *init, ps_error_t *err)
{
    switch (init->kind) {
        case PS_INIT_ZEROS:
        case PS_INIT_GLOROT_UNIFORM:
            return PS_OK;
        case PS_INIT_CONSTANT:
            if (!s_float_range (init->value))
                return ps_error_set (err, PS_EINVAL,
                                     "constant initializer value is %g, expected a finite "
                                     "float32 number", init->value);
            return PS_OK;
        case PS_INIT_UNIFORM:
            if (!s_float_range (init->low) || !s_float_range (init->high))
                return ps_error_set (err, PS_EINVAL,
                                     "uniform initializer bounds are [%g, %g), expected finite "
                                     "float32 numbers", init->low, init->high);
            //  Compare after rounding: bounds that differ only in double
            //  precision would leave no float inside the interval.
            if (!((float) init->low < (float) init->high))
                return ps_error_set (err, PS_EINVAL,
                                     "uniform initializer bounds are [%g, %g), expected "
                                     "low < high in float32", init->low, init->high);
            return PS_OK;
        case PS_INIT_NORMAL:
            if (!s_float_range (init->mean))
                return ps_error_set (err, PS_EINVAL,
                                     "normal initializer mean is %g, expected a finite "
                                     "float32 number", init->mean);
            if (!s_float_range (init->stddev) || init->stddev < 0)
                return ps_error_set (err, PS_EINVAL,
                                     "normal initializer stddev is %g, expected a finite "
                                     "number >= 0", init->stddev);
            return PS_OK;
    }
    return ps_error_set (err, PS_EINVAL, "initializer kind is %d, expected 0..%d",
                         (int) init->kind, (int) S_KIND_COUNT - 1);
}

int
ps_init_fill (const ps_init_t *init, const ps_shape_t *shape,
              int64_t row_begin, int64_t row_end, float *out, ps_error_t *err)
{
    int rc = ps_init_validate (init, err);
    if (rc)
        return rc;
    //  Re-checking the full shape costs a few comparisons and catches a
    //  shape that was never filled by ps_shape_set before it is used to
    //  compute an element count.
    ps_shape_t checked, rows;
    rc = ps_shape_set (&checked, shape->dims, shape->rank, err);
    if (rc == PS_OK)
        rc = ps_shape_rows (shape, row_begin, row_end, &rows, err);
    if (rc)
        return rc;

    int64_t offset = row_begin * ps_shape_row_count (shape);
    int64_t count = ps_shape_count (&rows);
    switch (init->kind) {
        case PS_INIT_ZEROS:
            memset (out, 0, sizeof (float) * (size_t) count);
            break;
        case PS_INIT_CONSTANT:
            for (int64_t i = 0; i < count; i++)
                out [i] = (float) init->value;
            break;
        case PS_INIT_UNIFORM:
            s_fill_uniform (ps_mix64 (init->seed), init->low, init->high, offset, count, out);
            break;
        case PS_INIT_GLOROT_UNIFORM: {
            double limit = s_glorot_limit (shape);
            s_fill_uniform (ps_mix64 (init->seed), -limit, limit, offset, count, out);
            break;
        }
        case PS_INIT_NORMAL:
            s_fill_normal (ps_mix64 (init->seed), init->mean, init->stddev, offset, count, out);
            break;
    }
    return PS_OK;
}

void
ps_init_fill_keyed (const ps_init_t *init, uint64_t key, size_t count, float *out)
{
    switch (init->kind) {
        case PS_INIT_ZEROS:
            memset (out, 0, sizeof (float) * count);
            break;
        case PS_INIT_CONSTANT:
            for (size_t i = 0; i < count; i++)
                out [i] = (float) init->value;
            break;
        case PS_INIT_UNIFORM:
            s_fill_uniform (key, init->low, init->high, 0, (int64_t) count, out);
            break;
        case PS_INIT_GLOROT_UNIFORM:
            //  No shape, no fans: ps_init.h says the caller refuses it.
            assert (!"glorot_uniform needs a shape");
            break;
        case PS_INIT_NORMAL:
            s_fill_normal (key, init->mean, init->stddev, 0, (int64_t) count, out);
            break;
    }
}
