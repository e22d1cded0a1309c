//  Unit tests for the CPU layer kernels (ps_cpu_ops.h). Every backward pass
//  is checked against central finite differences of a float64 reference
//  forward pass written here with naive loops straight from the definitions,
//  without calling the kernels under test; every forward pass is checked
//  against the same reference. Sizes are small and odd, so that every input
//  and parameter element gets its own numeric derivative and the kernels'
//  remainder loops run.
//
//  The objective is L = sum (y * r) for fixed random weights r (the mean
//  cross-entropy for the loss layer), so dL/dy = r is what the backward pass
//  receives. The weights r are drawn as floats and widened, so that the
//  float32 kernels and the float64 reference differentiate exactly the same
//  function.
//
//  This file is longer than the project's 800 lines on purpose: its cases
//  check one module, the layer kernels of ps_cpu_ops.h, and most of its
//  length is the float64 reference and finite-difference helpers they all
//  use.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness_case.h"
#include "harness_rand.h"
#include "ps_cpu_ops.h"
#include "ps_dropout.h"
#include "ps_model.h"

//  Gradients: float32 kernels against float64 finite differences.
#define S_GRAD_TOL     1e-4
//  Forward passes: float32 kernels against the float64 reference.
#define S_FORWARD_TOL  1e-5
//  The same gradient computed two ways by the kernels (a reused im2col
//  buffer or a rebuilt one, dx wanted or not): only rounding may differ.
#define S_SAME_TOL     1e-6
//  No pre-activation of a fused or separate ReLU comes closer to its kink.
#define S_KINK_MARGIN  1e-3
//  Finite-difference step, relative to the element's magnitude.
#define S_FD_STEP      1e-6

//  ---------------------------------------------------------------------
//  Random numbers, buffers and error measures

static void
s_fill_uniform (float *v, size_t count, uint64_t *state, double scale)
{
    for (size_t i = 0; i < count; i++)
        v [i] = (float) ((2 * harness_unit (state) - 1) * scale);
}

//  Sentinel contents for output and scratch buffers: a kernel that reads a
//  buffer it should have written, or leaves part of an output unwritten,
//  spreads NaN into the result and fails every comparison.
static void
s_fill_nan (float *v, size_t count)
{
    for (size_t i = 0; i < count; i++)
        v [i] = NAN;
}

static float *
s_floats (size_t count)
{
    float *v = malloc ((count ? count : 1) * sizeof (float));
    assert_non_null (v);
    return v;
}

static double *
s_doubles (size_t count)
{
    double *v = calloc (count ? count : 1, sizeof (double));
    assert_non_null (v);
    return v;
}

static float *
s_copy (const float *v, size_t count)
{
    float *copy = s_floats (count);
    memcpy (copy, v, count * sizeof (float));
    return copy;
}

static void
s_widen (const float *v, double *out, size_t count)
{
    for (size_t i = 0; i < count; i++)
        out [i] = v [i];
}

//  ||a - b|| / max (||a||, ||b||) over the whole tensor. NaN anywhere gives
//  NaN, which no `err < tol` check lets through.
static double
s_rel_err (const float *a, const double *b, size_t count)
{
    double diff = 0, norm_a = 0, norm_b = 0;
    for (size_t i = 0; i < count; i++) {
        double d = (double) a [i] - b [i];
        diff += d * d;
        norm_a += (double) a [i] * a [i];
        norm_b += b [i] * b [i];
    }
    double scale = sqrt (fmax (norm_a, norm_b));
    return scale > 0 ? sqrt (diff) / scale : sqrt (diff);
}

static void
s_check (const char *name, const char *what, double err, double tol)
{
    if (!(err < tol))
        fail_msg ("%s: %s relative error %.3g, limit %.1g", name, what, err, tol);
}

//  Central differences of objective (ctx) with respect to each of the count
//  doubles at p, which the objective reads through ctx. The step is taken
//  as the difference of the two perturbed values actually stored, so that
//  its rounding does not enter the quotient.
static void
s_numeric_grad (double (*objective) (const void *ctx), const void *ctx,
                double *p, size_t count, double *grad)
{
    for (size_t i = 0; i < count; i++) {
        double saved = p [i];
        double h = S_FD_STEP * fmax (1.0, fabs (saved));
        p [i] = saved + h;
        double plus_at = p [i];
        double plus = objective (ctx);
        p [i] = saved - h;
        double minus_at = p [i];
        double minus = objective (ctx);
        p [i] = saved;
        grad [i] = (plus - minus) / (plus_at - minus_at);
    }
}

//  ---------------------------------------------------------------------
//  Layers built by hand, as ps_model.c resolves them

//  TensorFlow's output size and leading padding for one spatial dimension:
//  valid out = floor ((in - k) / s) + 1; same out = ceil (in / s) with
//  pad_total = max ((out - 1) * s + k - in, 0) and the smaller half first.
static void
s_tf_dim (int in, int k, int s, bool same, int *out, int *pad_before)
{
    if (same) {
        *out = (in + s - 1) / s;
        int total = (*out - 1) * s + k - in;
        *pad_before = total > 0 ? total / 2 : 0;
    }
    else {
        *out = (in - k) / s + 1;
        *pad_before = 0;
    }
}

static ps_layer_t
s_window_layer (ps_layer_kind_t kind, const char *name, int in_h, int in_w, int in_c,
                int out_c, int kh, int kw, int stride_h, int stride_w, bool same, bool relu)
{
    ps_layer_t l;
    memset (&l, 0, sizeof l);
    l.kind = kind;
    snprintf (l.name, sizeof l.name, "%s", name);
    l.in_h = in_h;
    l.in_w = in_w;
    l.in_c = in_c;
    l.out_c = out_c;
    l.kh = kh;
    l.kw = kw;
    l.stride_h = stride_h;
    l.stride_w = stride_w;
    s_tf_dim (in_h, kh, stride_h, same, &l.out_h, &l.pad_top);
    s_tf_dim (in_w, kw, stride_w, same, &l.out_w, &l.pad_left);
    l.relu = relu;
    l.kernel = kind == PS_LAYER_CONV2D ? 0 : -1;
    l.bias = kind == PS_LAYER_CONV2D ? 1 : -1;
    return l;
}

//  A flat layer (Dense, ReLU, Dropout): h = w = 1, c = features.
static ps_layer_t
s_flat_layer (ps_layer_kind_t kind, const char *name, int in, int out, bool relu)
{
    ps_layer_t l;
    memset (&l, 0, sizeof l);
    l.kind = kind;
    snprintf (l.name, sizeof l.name, "%s", name);
    l.in_h = l.in_w = l.out_h = l.out_w = 1;
    l.in_c = in;
    l.out_c = out;
    l.kh = l.kw = l.stride_h = l.stride_w = 1;
    l.relu = relu;
    l.kernel = kind == PS_LAYER_DENSE ? 0 : -1;
    l.bias = kind == PS_LAYER_DENSE ? 1 : -1;
    return l;
}

static size_t
s_in_size (const ps_layer_t *l)
{
    return (size_t) l->in_h * (size_t) l->in_w * (size_t) l->in_c;
}

static size_t
s_out_size (const ps_layer_t *l)
{
    return (size_t) l->out_h * (size_t) l->out_w * (size_t) l->out_c;
}

//  ---------------------------------------------------------------------
//  The float64 reference, from the definitions

//  out [n, oy, ox, o] = b [o] + sum over (ky, kx, c) of
//  x [n, oy * sh + ky - pad_top, ox * sw + kx - pad_left, c] * k [ky, kx, c, o],
//  with x zero outside the image; then max (., 0) when relu.
static void
s_ref_conv (const ps_layer_t *l, int n, const double *x, const double *k,
            const double *b, bool relu, double *y)
{
    for (int e = 0; e < n; e++)
        for (int oy = 0; oy < l->out_h; oy++)
            for (int ox = 0; ox < l->out_w; ox++)
                for (int o = 0; o < l->out_c; o++) {
                    double sum = b [o];
                    for (int ky = 0; ky < l->kh; ky++) {
                        int iy = oy * l->stride_h + ky - l->pad_top;
                        if (iy < 0 || iy >= l->in_h)
                            continue;
                        for (int kx = 0; kx < l->kw; kx++) {
                            int ix = ox * l->stride_w + kx - l->pad_left;
                            if (ix < 0 || ix >= l->in_w)
                                continue;
                            for (int c = 0; c < l->in_c; c++)
                                sum += x [((size_t) (e * l->in_h + iy) * l->in_w + ix) * l->in_c + c]
                                     * k [((size_t) (ky * l->kw + kx) * l->in_c + c) * l->out_c + o];
                        }
                    }
                    if (relu)
                        sum = fmax (sum, 0);
                    y [((size_t) (e * l->out_h + oy) * l->out_w + ox) * l->out_c + o] = sum;
                }
}

//  y [n, o] = b [o] + sum over i of x [n, i] * k [i, o]; then max (., 0).
static void
s_ref_dense (const ps_layer_t *l, int n, const double *x, const double *k,
             const double *b, bool relu, double *y)
{
    for (int e = 0; e < n; e++)
        for (int o = 0; o < l->out_c; o++) {
            double sum = b [o];
            for (int i = 0; i < l->in_c; i++)
                sum += x [(size_t) e * l->in_c + i] * k [(size_t) i * l->out_c + o];
            if (relu)
                sum = fmax (sum, 0);
            y [(size_t) e * l->out_c + o] = sum;
        }
}

//  The maximum over the window's positions inside the image: padding is
//  never a candidate. argmax (unless NULL) receives the winner's index
//  within the example's input.
static void
s_ref_maxpool (const ps_layer_t *l, int n, const double *x, double *y, int32_t *argmax)
{
    size_t in_size = s_in_size (l);
    for (int e = 0; e < n; e++)
        for (int oy = 0; oy < l->out_h; oy++)
            for (int ox = 0; ox < l->out_w; ox++)
                for (int c = 0; c < l->in_c; c++) {
                    double best = -INFINITY;
                    int32_t best_at = -1;
                    for (int ky = 0; ky < l->kh; ky++) {
                        int iy = oy * l->stride_h + ky - l->pad_top;
                        if (iy < 0 || iy >= l->in_h)
                            continue;
                        for (int kx = 0; kx < l->kw; kx++) {
                            int ix = ox * l->stride_w + kx - l->pad_left;
                            if (ix < 0 || ix >= l->in_w)
                                continue;
                            int32_t at = (int32_t) ((iy * l->in_w + ix) * l->in_c + c);
                            double v = x [(size_t) e * in_size + (size_t) at];
                            if (v > best) {
                                best = v;
                                best_at = at;
                            }
                        }
                    }
                    size_t j = ((size_t) (e * l->out_h + oy) * l->out_w + ox) * l->out_c + c;
                    y [j] = best;
                    if (argmax)
                        argmax [j] = best_at;
                }
}

//  Keras inverted dropout: element i of example first + e is kept, scaled
//  by 1 / (1 - rate), or zeroed, by the shared mask.
static void
s_ref_dropout (double rate, int n, size_t size, uint64_t seed, int first,
               const double *x, double *y)
{
    uint32_t threshold = ps_dropout_threshold (rate);
    for (int e = 0; e < n; e++)
        for (size_t i = 0; i < size; i++) {
            size_t j = (size_t) e * size + i;
            bool keep = ps_dropout_keep (seed, (uint64_t) (first + e), i, threshold);
            y [j] = keep ? x [j] / (1 - rate) : 0;
        }
}

//  Summed softmax cross-entropy (natural log) over n examples, and the
//  number whose first maximal logit is the label.
static double
s_ref_xent (int n, int classes, const double *logits, const uint8_t *labels, int *correct)
{
    double total = 0;
    int right = 0;
    for (int e = 0; e < n; e++) {
        const double *row = logits + (size_t) e * classes;
        int best = 0;
        for (int j = 1; j < classes; j++)
            if (row [j] > row [best])
                best = j;
        double sum = 0;
        for (int j = 0; j < classes; j++)
            sum += exp (row [j] - row [best]);
        total += row [best] + log (sum) - row [labels [e]];
        right += best == labels [e];
    }
    if (correct)
        *correct = right;
    return total;
}

//  Activation layer l on count doubles, in double and the plain textbook
//  forms (softmax over each position's out_c channels).
static void
s_ref_activation (const ps_layer_t *l, size_t count, const double *x, double *y)
{
    for (size_t i = 0; i < count; i++)
        switch (l->activation) {
            case PS_ACT_RELU:    y [i] = fmax (x [i], 0); break;
            case PS_ACT_SIGMOID: y [i] = 1 / (1 + exp (-x [i])); break;
            case PS_ACT_TANH:    y [i] = tanh (x [i]); break;
            case PS_ACT_GELU:    y [i] = x [i] * 0.5 * erfc (-x [i] / sqrt (2)); break;
            default:             y [i] = x [i]; break;
        }
    if (l->activation == PS_ACT_SOFTMAX)
        for (size_t at = 0; at < count; at += (size_t) l->out_c) {
            double sum = 0;
            for (int k = 0; k < l->out_c; k++)
                sum += exp (x [at + k]);
            for (int k = 0; k < l->out_c; k++)
                y [at + k] = exp (x [at + k]) / sum;
        }
}

//  AveragePooling2D: each window's mean over its positions in the input.
static void
s_ref_avgpool (const ps_layer_t *l, int n, const double *x, double *y)
{
    for (int e = 0; e < n; e++)
        for (int oy = 0; oy < l->out_h; oy++)
            for (int ox = 0; ox < l->out_w; ox++)
                for (int k = 0; k < l->out_c; k++) {
                    double sum = 0;
                    int count = 0;
                    for (int dy = 0; dy < l->kh; dy++)
                        for (int dx = 0; dx < l->kw; dx++) {
                            int iy = oy * l->stride_h - l->pad_top + dy;
                            int ix = ox * l->stride_w - l->pad_left + dx;
                            if (iy < 0 || iy >= l->in_h || ix < 0 || ix >= l->in_w)
                                continue;
                            sum += x [(((size_t) e * l->in_h + iy) * l->in_w + ix) * l->in_c + k];
                            count++;
                        }
                    y [(((size_t) e * l->out_h + oy) * l->out_w + ox) * l->out_c + k] = sum / count;
                }
}

//  GlobalAveragePooling2D: each channel's mean over the positions.
static void
s_ref_gap (const ps_layer_t *l, int n, const double *x, double *y)
{
    size_t positions = (size_t) l->in_h * l->in_w;
    for (int e = 0; e < n; e++)
        for (int k = 0; k < l->in_c; k++) {
            double sum = 0;
            for (size_t p = 0; p < positions; p++)
                sum += x [((size_t) e * positions + p) * l->in_c + k];
            y [(size_t) e * l->in_c + k] = sum / (double) positions;
        }
}

//  One layer's reference problem: its inputs and parameters in double (the
//  float32 values widened), the objective's weights r, and scratch for y.
typedef struct {
    const ps_layer_t *l;
    int n;
    size_t x_count, y_count;
    uint64_t seed;          //  Dropout: the step's seed
    int first;              //  Dropout: the batch index of example 0
    double *x, *k, *b, *r;
    double *y;
} s_ref_t;

static void
s_ref_forward (const s_ref_t *ref, double *y)
{
    const ps_layer_t *l = ref->l;
    switch (l->kind) {
        case PS_LAYER_CONV2D:
            s_ref_conv (l, ref->n, ref->x, ref->k, ref->b, l->relu, y);
            break;
        case PS_LAYER_DENSE:
            s_ref_dense (l, ref->n, ref->x, ref->k, ref->b, l->relu, y);
            break;
        case PS_LAYER_MAXPOOL2D:
            s_ref_maxpool (l, ref->n, ref->x, y, NULL);
            break;
        case PS_LAYER_RELU:
            for (size_t i = 0; i < ref->x_count; i++)
                y [i] = fmax (ref->x [i], 0);
            break;
        case PS_LAYER_DROPOUT:
            s_ref_dropout (l->rate, ref->n, s_in_size (l), ref->seed, ref->first, ref->x, y);
            break;
        case PS_LAYER_ACTIVATION:
            s_ref_activation (l, ref->x_count, ref->x, y);
            break;
        case PS_LAYER_AVGPOOL2D:
            s_ref_avgpool (l, ref->n, ref->x, y);
            break;
        case PS_LAYER_GLOBALAVGPOOL2D:
            s_ref_gap (l, ref->n, ref->x, y);
            break;
        default:
            fail_msg ("no reference for layer kind %d", (int) l->kind);
    }
}

//  L = sum (y * r).
static double
s_ref_objective (const void *ctx)
{
    const s_ref_t *ref = ctx;
    s_ref_forward (ref, ref->y);
    double sum = 0;
    for (size_t i = 0; i < ref->y_count; i++)
        sum += ref->y [i] * ref->r [i];
    return sum;
}

//  Smallest |value| over count doubles: how close a ReLU input comes to the
//  kink.
static double
s_min_abs (const double *v, size_t count)
{
    double m = INFINITY;
    for (size_t i = 0; i < count; i++)
        m = fmin (m, fabs (v [i]));
    return m;
}

//  Whether a ReLU input set exercises both sides of the kink.
static void
s_check_both_sides (const char *name, const double *pre, size_t count)
{
    size_t positive = 0;
    for (size_t i = 0; i < count; i++)
        positive += pre [i] > 0;
    if (positive == 0 || positive == count)
        fail_msg ("%s: all %zu pre-activations on one side of zero", name, count);
}

//  ---------------------------------------------------------------------
//  Conv2D

typedef struct {
    int in_h, in_w, in_c, out_c;
    int kh, kw, stride_h, stride_w;
    bool same, relu;
} s_conv_case_t;

static void
s_check_conv (const s_conv_case_t *cc, uint64_t seed)
{
    const int n = 3;
    ps_layer_t l = s_window_layer (PS_LAYER_CONV2D, "conv2d", cc->in_h, cc->in_w, cc->in_c,
                                   cc->out_c, cc->kh, cc->kw, cc->stride_h, cc->stride_w,
                                   cc->same, cc->relu);
    char name [160];
    snprintf (name, sizeof name,
              "conv2d %dx%dx%d->%dx%dx%d %s k%dx%d s%dx%d pad %d,%d%s",
              l.in_h, l.in_w, l.in_c, l.out_h, l.out_w, l.out_c, cc->same ? "same" : "valid",
              l.kh, l.kw, l.stride_h, l.stride_w, l.pad_top, l.pad_left,
              l.relu ? " relu" : "");

    size_t x_count = (size_t) n * s_in_size (&l);
    size_t y_count = (size_t) n * s_out_size (&l);
    size_t k_count = (size_t) l.kh * l.kw * l.in_c * l.out_c;
    size_t b_count = (size_t) l.out_c;
    size_t col_count = ps_cpu_conv2d_col_size (&l, n);
    assert_true (col_count >= (size_t) n * l.out_h * l.out_w * l.kh * l.kw * l.in_c);

    float *x = s_floats (x_count), *k = s_floats (k_count), *b = s_floats (b_count);
    float *r = s_floats (y_count);
    s_ref_t ref = {
        .l = &l, .n = n, .x_count = x_count, .y_count = y_count,
        .x = s_doubles (x_count), .k = s_doubles (k_count), .b = s_doubles (b_count),
        .r = s_doubles (y_count), .y = s_doubles (y_count),
    };
    double *want = s_doubles (y_count);

    //  With a fused ReLU, redraw until no pre-activation lies near the kink,
    //  where neither finite differences nor a float32 forward pass decide
    //  the side reliably.
    uint64_t state = seed;
    for (int attempt = 0;; attempt++) {
        assert_true (attempt < 1000);
        s_fill_uniform (x, x_count, &state, 1.0);
        s_fill_uniform (k, k_count, &state, 0.5);
        s_fill_uniform (b, b_count, &state, 0.5);
        s_widen (x, ref.x, x_count);
        s_widen (k, ref.k, k_count);
        s_widen (b, ref.b, b_count);
        s_ref_conv (&l, n, ref.x, ref.k, ref.b, false, want);
        if (!l.relu || s_min_abs (want, y_count) >= S_KINK_MARGIN)
            break;
    }
    if (l.relu)
        s_check_both_sides (name, want, y_count);
    s_fill_uniform (r, y_count, &state, 1.0);
    s_widen (r, ref.r, y_count);
    s_ref_forward (&ref, want);

    //  Forward, with scratch that starts as NaN so that every column the
    //  GEMM reads must have been written by the im2col.
    float *y = s_floats (y_count), *col = s_floats (col_count);
    s_fill_nan (y, y_count);
    s_fill_nan (col, col_count);
    ps_cpu_conv2d_forward (&l, n, x, k, b, y, col);
    double err_forward = s_rel_err (y, want, y_count);
    s_check (name, "forward", err_forward, S_FORWARD_TOL);

    //  Backward with the forward's im2col (col_valid = 1) and dx wanted.
    float *dy = s_copy (r, y_count), *col_a = s_copy (col, col_count);
    float *dx = s_floats (x_count), *dk = s_floats (k_count), *db = s_floats (b_count);
    s_fill_nan (dx, x_count);
    s_fill_nan (dk, k_count);
    s_fill_nan (db, b_count);
    ps_cpu_conv2d_backward (&l, n, x, y, k, dy, dx, dk, db, col_a, 1);

    double *gx = s_doubles (x_count), *gk = s_doubles (k_count), *gb = s_doubles (b_count);
    s_numeric_grad (s_ref_objective, &ref, ref.x, x_count, gx);
    s_numeric_grad (s_ref_objective, &ref, ref.k, k_count, gk);
    s_numeric_grad (s_ref_objective, &ref, ref.b, b_count, gb);
    double err_dx = s_rel_err (dx, gx, x_count);
    double err_dk = s_rel_err (dk, gk, k_count);
    double err_db = s_rel_err (db, gb, b_count);
    s_check (name, "dx", err_dx, S_GRAD_TOL);
    s_check (name, "dkernel", err_dk, S_GRAD_TOL);
    s_check (name, "dbias", err_db, S_GRAD_TOL);

    //  The other three ways of calling the backward pass must give the same
    //  gradients: the im2col rebuilt from x into NaN scratch (col_valid = 0),
    //  and dx NULL with the forward's columns or rebuilt ones.
    double err_same = 0;
    for (int variant = 0; variant < 3; variant++) {
        bool want_dx = variant == 0;
        int col_valid = variant == 1;
        float *dy2 = s_copy (r, y_count), *col2 = s_copy (col, col_count);
        if (!col_valid)
            s_fill_nan (col2, col_count);
        float *dx2 = s_floats (x_count), *dk2 = s_floats (k_count), *db2 = s_floats (b_count);
        s_fill_nan (dx2, x_count);
        s_fill_nan (dk2, k_count);
        s_fill_nan (db2, b_count);
        ps_cpu_conv2d_backward (&l, n, x, y, k, dy2, want_dx ? dx2 : NULL, dk2, db2,
                                col2, col_valid);
        char what [96];
        snprintf (what, sizeof what, "%s, col_valid %d against dx, col_valid 1:",
                  want_dx ? "dx" : "dx NULL", col_valid);
        double e_dk = harness_rel_error (dk2, dk, k_count);
        double e_db = harness_rel_error (db2, db, b_count);
        double e_dx = want_dx ? harness_rel_error (dx2, dx, x_count) : 0;
        if (!(e_dk < S_SAME_TOL) || !(e_db < S_SAME_TOL) || !(e_dx < S_SAME_TOL))
            fail_msg ("%s: %s dkernel %.3g, dbias %.3g, dx %.3g", name, what, e_dk, e_db, e_dx);
        err_same = fmax (err_same, fmax (e_dk, fmax (e_db, e_dx)));
        free (dy2);
        free (col2);
        free (dx2);
        free (dk2);
        free (db2);
    }
    printf ("  %-52s fwd %.1e dx %.1e dk %.1e db %.1e variants %.1e\n", name,
            err_forward, err_dx, err_dk, err_db, err_same);

    free (x);
    free (k);
    free (b);
    free (r);
    free (ref.x);
    free (ref.k);
    free (ref.b);
    free (ref.r);
    free (ref.y);
    free (want);
    free (y);
    free (col);
    free (dy);
    free (col_a);
    free (dx);
    free (dk);
    free (db);
    free (gx);
    free (gk);
    free (gb);
}

//  A 7x5 image with 3 channels into 5 filters, square and non-square
//  kernels, every padding and stride combination, with and without the
//  fused ReLU. Kernel 2 on odd sizes gives the asymmetric "same" padding
//  (all of it at the bottom or right) and, with stride 2 "valid", rows the
//  windows never reach.
static const s_conv_case_t s_conv_cases [] = {
    { 7, 5, 3, 5, 3, 3, 1, 1, false, false },
    { 7, 5, 3, 5, 3, 3, 1, 1, false, true },
    { 7, 5, 3, 5, 2, 3, 1, 1, false, true },
    { 7, 5, 3, 5, 3, 3, 1, 1, true, false },
    { 7, 5, 3, 5, 3, 3, 1, 1, true, true },
    { 7, 5, 3, 5, 2, 3, 1, 1, true, false },
    { 7, 5, 3, 5, 3, 3, 2, 2, false, false },
    { 7, 5, 3, 5, 3, 3, 2, 2, false, true },
    { 7, 5, 3, 5, 2, 3, 2, 2, false, false },
    { 7, 5, 3, 5, 3, 3, 2, 2, true, false },
    { 7, 5, 3, 5, 3, 3, 2, 2, true, true },
    { 7, 5, 3, 5, 2, 3, 2, 2, true, true },
    //  Unequal strides and a kernel wider than tall on a wide image.
    { 5, 9, 3, 5, 3, 2, 2, 1, true, true },
    { 5, 9, 3, 5, 2, 3, 1, 2, false, false },
    //  A single input channel, as in a first layer on grayscale images.
    { 7, 5, 1, 5, 3, 3, 1, 1, true, true },
};

static void
test_conv2d (void **state)
{
    (void) state;
    printf ("\n");
    for (size_t i = 0; i < sizeof s_conv_cases / sizeof s_conv_cases [0]; i++)
        s_check_conv (&s_conv_cases [i], UINT64_C (1000) + i);
}

//  ---------------------------------------------------------------------
//  Dense

static void
s_check_dense (int n, int in, int out, bool relu, uint64_t seed)
{
    ps_layer_t l = s_flat_layer (PS_LAYER_DENSE, "dense", in, out, relu);
    char name [96];
    snprintf (name, sizeof name, "dense n=%d %d->%d%s", n, in, out, relu ? " relu" : "");
    size_t x_count = (size_t) n * in, y_count = (size_t) n * out;
    size_t k_count = (size_t) in * out, b_count = (size_t) out;

    float *x = s_floats (x_count), *k = s_floats (k_count), *b = s_floats (b_count);
    float *r = s_floats (y_count);
    s_ref_t ref = {
        .l = &l, .n = n, .x_count = x_count, .y_count = y_count,
        .x = s_doubles (x_count), .k = s_doubles (k_count), .b = s_doubles (b_count),
        .r = s_doubles (y_count), .y = s_doubles (y_count),
    };
    double *want = s_doubles (y_count);
    uint64_t state = seed;
    for (int attempt = 0;; attempt++) {
        assert_true (attempt < 1000);
        s_fill_uniform (x, x_count, &state, 1.0);
        s_fill_uniform (k, k_count, &state, 0.5);
        s_fill_uniform (b, b_count, &state, 0.5);
        s_widen (x, ref.x, x_count);
        s_widen (k, ref.k, k_count);
        s_widen (b, ref.b, b_count);
        s_ref_dense (&l, n, ref.x, ref.k, ref.b, false, want);
        if (!relu || s_min_abs (want, y_count) >= S_KINK_MARGIN)
            break;
    }
    if (relu)
        s_check_both_sides (name, want, y_count);
    s_fill_uniform (r, y_count, &state, 1.0);
    s_widen (r, ref.r, y_count);
    s_ref_forward (&ref, want);

    float *y = s_floats (y_count);
    s_fill_nan (y, y_count);
    ps_cpu_dense_forward (&l, n, x, k, b, y);
    double err_forward = s_rel_err (y, want, y_count);
    s_check (name, "forward", err_forward, S_FORWARD_TOL);

    float *dy = s_copy (r, y_count);
    float *dx = s_floats (x_count), *dk = s_floats (k_count), *db = s_floats (b_count);
    s_fill_nan (dx, x_count);
    s_fill_nan (dk, k_count);
    s_fill_nan (db, b_count);
    ps_cpu_dense_backward (&l, n, x, y, k, dy, dx, dk, db);

    double *gx = s_doubles (x_count), *gk = s_doubles (k_count), *gb = s_doubles (b_count);
    s_numeric_grad (s_ref_objective, &ref, ref.x, x_count, gx);
    s_numeric_grad (s_ref_objective, &ref, ref.k, k_count, gk);
    s_numeric_grad (s_ref_objective, &ref, ref.b, b_count, gb);
    double err_dx = s_rel_err (dx, gx, x_count);
    double err_dk = s_rel_err (dk, gk, k_count);
    double err_db = s_rel_err (db, gb, b_count);
    s_check (name, "dx", err_dx, S_GRAD_TOL);
    s_check (name, "dkernel", err_dk, S_GRAD_TOL);
    s_check (name, "dbias", err_db, S_GRAD_TOL);

    //  dx NULL (a first layer) must give the same parameter gradients.
    float *dy2 = s_copy (r, y_count), *dk2 = s_floats (k_count), *db2 = s_floats (b_count);
    s_fill_nan (dk2, k_count);
    s_fill_nan (db2, b_count);
    ps_cpu_dense_backward (&l, n, x, y, k, dy2, NULL, dk2, db2);
    double err_same = fmax (harness_rel_error (dk2, dk, k_count),
                            harness_rel_error (db2, db, b_count));
    s_check (name, "dx NULL against dx wanted", err_same, S_SAME_TOL);

    printf ("  %-52s fwd %.1e dx %.1e dk %.1e db %.1e variants %.1e\n", name,
            err_forward, err_dx, err_dk, err_db, err_same);

    free (x);
    free (k);
    free (b);
    free (r);
    free (ref.x);
    free (ref.k);
    free (ref.b);
    free (ref.r);
    free (ref.y);
    free (want);
    free (y);
    free (dy);
    free (dx);
    free (dk);
    free (db);
    free (gx);
    free (gk);
    free (gb);
    free (dy2);
    free (dk2);
    free (db2);
}

static void
test_dense (void **state)
{
    (void) state;
    printf ("\n");
    s_check_dense (3, 7, 5, false, 2001);
    s_check_dense (3, 7, 5, true, 2002);
    //  One example, and sizes past a typical vector width with remainders.
    s_check_dense (1, 7, 5, true, 2003);
    s_check_dense (5, 37, 11, true, 2004);
}

//  ---------------------------------------------------------------------
//  MaxPool2D

typedef struct {
    int in_h, in_w, in_c;
    int kh, kw, stride_h, stride_w;
    bool same;
} s_pool_case_t;

static void
s_check_maxpool (const s_pool_case_t *pc, uint64_t seed)
{
    const int n = 3;
    ps_layer_t l = s_window_layer (PS_LAYER_MAXPOOL2D, "max_pooling2d", pc->in_h, pc->in_w,
                                   pc->in_c, pc->in_c, pc->kh, pc->kw, pc->stride_h,
                                   pc->stride_w, pc->same, false);
    char name [160];
    snprintf (name, sizeof name, "maxpool %dx%dx%d->%dx%dx%d %s k%dx%d s%dx%d pad %d,%d",
              l.in_h, l.in_w, l.in_c, l.out_h, l.out_w, l.out_c, pc->same ? "same" : "valid",
              l.kh, l.kw, l.stride_h, l.stride_w, l.pad_top, l.pad_left);
    size_t in_size = s_in_size (&l);
    size_t x_count = (size_t) n * in_size, y_count = (size_t) n * s_out_size (&l);

    //  Distinct values 1/32 apart in shuffled order: no window has a near
    //  tie, so the finite-difference steps never change a winner. All are
    //  negative, so a zero from padding would win wherever a kernel let it.
    uint64_t state = seed;
    float *x = s_floats (x_count), *r = s_floats (y_count);
    for (size_t i = 0; i < x_count; i++)
        x [i] = -1.0f - (float) i / 32.0f;
    for (size_t i = x_count - 1; i > 0; i--) {
        size_t j = (size_t) (harness_splitmix (&state) % (i + 1));
        float t = x [i];
        x [i] = x [j];
        x [j] = t;
    }
    s_fill_uniform (r, y_count, &state, 1.0);
    s_ref_t ref = {
        .l = &l, .n = n, .x_count = x_count, .y_count = y_count,
        .x = s_doubles (x_count), .r = s_doubles (y_count), .y = s_doubles (y_count),
    };
    s_widen (x, ref.x, x_count);
    s_widen (r, ref.r, y_count);
    double *want = s_doubles (y_count);
    int32_t *want_argmax = malloc (y_count * sizeof (int32_t));
    assert_non_null (want_argmax);
    s_ref_maxpool (&l, n, ref.x, want, want_argmax);

    float *y = s_floats (y_count);
    int32_t *argmax = malloc (y_count * sizeof (int32_t));
    assert_non_null (argmax);
    s_fill_nan (y, y_count);
    memset (argmax, 0xff, y_count * sizeof (int32_t));
    ps_cpu_maxpool_forward (&l, n, x, y, argmax);
    double err_forward = s_rel_err (y, want, y_count);
    s_check (name, "forward", err_forward, S_FORWARD_TOL);
    //  The maximum is unique, so its position is too.
    for (size_t j = 0; j < y_count; j++)
        if (argmax [j] != want_argmax [j])
            fail_msg ("%s: argmax [%zu] is %d, expected %d", name, j, (int) argmax [j],
                      (int) want_argmax [j]);

    float *dy = s_copy (r, y_count), *dx = s_floats (x_count);
    s_fill_nan (dx, x_count);
    ps_cpu_maxpool_backward (&l, n, argmax, dy, dx);
    assert_memory_equal (dy, r, y_count * sizeof (float));
    double *gx = s_doubles (x_count);
    s_numeric_grad (s_ref_objective, &ref, ref.x, x_count, gx);
    double err_dx = s_rel_err (dx, gx, x_count);
    s_check (name, "dx", err_dx, S_GRAD_TOL);
    printf ("  %-52s fwd %.1e dx %.1e\n", name, err_forward, err_dx);

    free (x);
    free (r);
    free (ref.x);
    free (ref.r);
    free (ref.y);
    free (want);
    free (want_argmax);
    free (y);
    free (argmax);
    free (dy);
    free (dx);
    free (gx);
}

static const s_pool_case_t s_pool_cases [] = {
    //  2x2 stride 2 "valid" on odd sizes: the last row and column are
    //  never read and get zero gradient.
    { 7, 5, 3, 2, 2, 2, 2, false },
    //  3x3 stride 2 "same": padding on every side.
    { 7, 5, 3, 3, 3, 2, 2, true },
    //  2x2 stride 2 "same": padding at the bottom and right only.
    { 7, 5, 3, 2, 2, 2, 2, true },
    //  2x2 stride 1: overlapping windows, so one input can win several
    //  and its gradient is a sum.
    { 7, 5, 3, 2, 2, 1, 1, false },
    //  3x3 stride 1 "same": heavy overlap and padding.
    { 5, 7, 2, 3, 3, 1, 1, true },
};

static void
test_maxpool (void **state)
{
    (void) state;
    printf ("\n");
    for (size_t i = 0; i < sizeof s_pool_cases / sizeof s_pool_cases [0]; i++)
        s_check_maxpool (&s_pool_cases [i], UINT64_C (3000) + i);
}

//  ---------------------------------------------------------------------
//  ReLU and Dropout

static void
test_relu (void **state)
{
    (void) state;
    const int n = 3;
    ps_layer_t l = s_flat_layer (PS_LAYER_RELU, "re_lu", 5 * 3 * 7, 5 * 3 * 7, true);
    const char *name = "relu n=3 size=105";
    size_t count = (size_t) n * s_in_size (&l);

    //  Inputs at least S_KINK_MARGIN from zero, of both signs.
    uint64_t state_rng = 4001;
    float *x = s_floats (count), *r = s_floats (count);
    for (size_t i = 0; i < count; i++)
        do
            s_fill_uniform (x + i, 1, &state_rng, 1.0);
        while (fabsf (x [i]) < (float) S_KINK_MARGIN);
    s_fill_uniform (r, count, &state_rng, 1.0);
    s_ref_t ref = {
        .l = &l, .n = n, .x_count = count, .y_count = count,
        .x = s_doubles (count), .r = s_doubles (count), .y = s_doubles (count),
    };
    s_widen (x, ref.x, count);
    s_widen (r, ref.r, count);
    s_check_both_sides (name, ref.x, count);
    double *want = s_doubles (count);
    s_ref_forward (&ref, want);

    float *y = s_floats (count);
    s_fill_nan (y, count);
    ps_cpu_relu_forward (count, x, y);
    double err_forward = s_rel_err (y, want, count);
    s_check (name, "forward", err_forward, S_FORWARD_TOL);

    float *dx = s_floats (count);
    s_fill_nan (dx, count);
    ps_cpu_relu_backward (count, y, r, dx);
    double *gx = s_doubles (count);
    s_numeric_grad (s_ref_objective, &ref, ref.x, count, gx);
    double err_dx = s_rel_err (dx, gx, count);
    s_check (name, "dx", err_dx, S_GRAD_TOL);

    //  In place (dx = dy), as the backends call it.
    float *inplace = s_copy (r, count);
    ps_cpu_relu_backward (count, y, inplace, inplace);
    assert_memory_equal (inplace, dx, count * sizeof (float));
    printf ("\n  %-52s fwd %.1e dx %.1e\n", name, err_forward, err_dx);

    free (x);
    free (r);
    free (ref.x);
    free (ref.r);
    free (ref.y);
    free (want);
    free (y);
    free (dx);
    free (gx);
    free (inplace);
}

//  ---------------------------------------------------------------------
//  Activation, AveragePooling2D, GlobalAveragePooling2D

//  Forward against the double reference and dx against its finite
//  differences, for a parameterless layer l on n examples whose inputs
//  are drawn in [-scale, scale] (kept from 0 for relu's kink).
static void
s_check_plain_layer (const char *name, const ps_layer_t *l, int n, double scale, uint64_t seed)
{
    size_t x_count = (size_t) n * s_in_size (l);
    size_t y_count = (size_t) n * s_out_size (l);
    uint64_t state = seed;
    float *x = s_floats (x_count), *r = s_floats (y_count);
    for (size_t i = 0; i < x_count; i++)
        do
            s_fill_uniform (x + i, 1, &state, scale);
        while (l->kind == PS_LAYER_ACTIVATION && l->activation == PS_ACT_RELU
               && fabsf (x [i]) < (float) S_KINK_MARGIN);
    s_fill_uniform (r, y_count, &state, 1.0);
    s_ref_t ref = {
        .l = l, .n = n, .x_count = x_count, .y_count = y_count,
        .x = s_doubles (x_count), .r = s_doubles (y_count), .y = s_doubles (y_count),
    };
    s_widen (x, ref.x, x_count);
    s_widen (r, ref.r, y_count);
    double *want = s_doubles (y_count);
    s_ref_forward (&ref, want);

    float *y = s_floats (y_count), *dx = s_floats (x_count);
    s_fill_nan (y, y_count);
    s_fill_nan (dx, x_count);
    float *dy = s_copy (r, y_count);
    if (l->kind == PS_LAYER_ACTIVATION) {
        ps_cpu_activation_forward (l->activation, x_count, l->out_c, x, y);
        //  In place (dx = dy), as the engine calls it.
        ps_cpu_activation_backward (l->activation, x_count, l->out_c, x, y, dy, dy);
        memcpy (dx, dy, x_count * sizeof (float));
    }
    else
    if (l->kind == PS_LAYER_AVGPOOL2D) {
        ps_cpu_avgpool_forward (l, n, x, y);
        ps_cpu_avgpool_backward (l, n, r, dx);
    }
    else {
        ps_cpu_gap_forward (l, n, x, y);
        ps_cpu_gap_backward (l, n, r, dx);
    }
    double err_forward = s_rel_err (y, want, y_count);
    s_check (name, "forward", err_forward, S_FORWARD_TOL);
    double *gx = s_doubles (x_count);
    s_numeric_grad (s_ref_objective, &ref, ref.x, x_count, gx);
    double err_dx = s_rel_err (dx, gx, x_count);
    s_check (name, "dx", err_dx, S_GRAD_TOL);
    printf ("  %-52s fwd %.1e dx %.1e\n", name, err_forward, err_dx);
    free (x);
    free (r);
    free (ref.x);
    free (ref.r);
    free (ref.y);
    free (want);
    free (y);
    free (dx);
    free (dy);
    free (gx);
}

static void
test_activations (void **state)
{
    (void) state;
    printf ("\n");
    const struct {
        ps_activation_t act;
        const char *name;
        double scale;
    } cases [] = {
        { PS_ACT_LINEAR, "activation linear", 2.0 },
        { PS_ACT_RELU, "activation relu", 2.0 },
        { PS_ACT_SIGMOID, "activation sigmoid", 6.0 },
        { PS_ACT_TANH, "activation tanh", 3.0 },
        { PS_ACT_GELU, "activation gelu", 4.0 },
        { PS_ACT_SOFTMAX, "activation softmax over 5 channels", 4.0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        //  [3, 2, 5]: softmax normalises each of the 6 positions' 5 channels.
        ps_layer_t l;
        memset (&l, 0, sizeof l);
        l.kind = PS_LAYER_ACTIVATION;
        l.activation = cases [i].act;
        l.in_h = l.out_h = 3;
        l.in_w = l.out_w = 2;
        l.in_c = l.out_c = 5;
        l.kernel = l.bias = -1;
        s_check_plain_layer (cases [i].name, &l, 3, cases [i].scale, 7001 + i);
    }
}

static void
test_avgpool (void **state)
{
    (void) state;
    printf ("\n");
    //  2x2 valid (the default), 3x3 stride 2 same (padded windows average
    //  fewer positions), 2x3 stride 1 overlapping.
    ps_layer_t valid = s_window_layer (PS_LAYER_AVGPOOL2D, "average_pooling2d", 6, 4, 3, 3,
                                       2, 2, 2, 2, false, false);
    s_check_plain_layer ("avgpool 6x4x3 k2x2 s2 valid", &valid, 2, 1.0, 7101);
    ps_layer_t same = s_window_layer (PS_LAYER_AVGPOOL2D, "average_pooling2d", 5, 7, 2, 2,
                                      3, 3, 2, 2, true, false);
    s_check_plain_layer ("avgpool 5x7x2 k3x3 s2 same", &same, 2, 1.0, 7102);
    ps_layer_t overlap = s_window_layer (PS_LAYER_AVGPOOL2D, "average_pooling2d", 4, 5, 2, 2,
                                         2, 3, 1, 1, false, false);
    s_check_plain_layer ("avgpool 4x5x2 k2x3 s1 valid", &overlap, 3, 1.0, 7103);
}

static void
test_gap (void **state)
{
    (void) state;
    printf ("\n");
    ps_layer_t l;
    memset (&l, 0, sizeof l);
    l.kind = PS_LAYER_GLOBALAVGPOOL2D;
    l.in_h = 3, l.in_w = 4, l.in_c = 5;
    l.out_h = l.out_w = 1, l.out_c = 5;
    l.kernel = l.bias = -1;
    s_check_plain_layer ("global avgpool 3x4x5", &l, 3, 1.0, 7201);
}

static void
test_dropout (void **state)
{
    (void) state;
    //  Examples 5..8 of a batch: the mask must follow the batch index.
    const int n = 4, first = 5;
    const uint64_t seed = UINT64_C (0x5eed5eed);
    ps_layer_t l = s_flat_layer (PS_LAYER_DROPOUT, "dropout", 3 * 5 * 3, 3 * 5 * 3, false);
    l.in_h = l.out_h = 3;
    l.in_w = l.out_w = 5;
    l.in_c = l.out_c = 3;
    l.rate = 0.3;
    const char *name = "dropout rate 0.3 n=4 size=45 first=5";
    size_t size = s_in_size (&l), count = (size_t) n * size;

    uint64_t state_rng = 5001;
    float *x = s_floats (count), *r = s_floats (count);
    for (size_t i = 0; i < count; i++)
        do
            s_fill_uniform (x + i, 1, &state_rng, 1.0);
        while (x [i] == 0);
    s_fill_uniform (r, count, &state_rng, 1.0);
    s_ref_t ref = {
        .l = &l, .n = n, .x_count = count, .y_count = count, .seed = seed, .first = first,
        .x = s_doubles (count), .r = s_doubles (count), .y = s_doubles (count),
    };
    s_widen (x, ref.x, count);
    s_widen (r, ref.r, count);
    double *want = s_doubles (count);
    s_ref_forward (&ref, want);

    //  A rate of 0.3 over 180 elements drops some and keeps most.
    size_t dropped = 0;
    for (size_t i = 0; i < count; i++)
        dropped += want [i] == 0;
    assert_true (dropped > count / 10 && dropped < count / 2);

    float *y = s_floats (count);
    s_fill_nan (y, count);
    ps_cpu_dropout_forward (&l, n, size, seed, first, x, y);
    double err_forward = s_rel_err (y, want, count);
    s_check (name, "forward", err_forward, S_FORWARD_TOL);
    //  Exactly the reference's elements are dropped.
    for (size_t i = 0; i < count; i++)
        if ((y [i] == 0) != (want [i] == 0))
            fail_msg ("%s: element %zu is %g, reference %g", name, i, (double) y [i], want [i]);

    float *dy = s_copy (r, count), *dx = s_floats (count);
    s_fill_nan (dx, count);
    ps_cpu_dropout_backward (&l, n, size, seed, first, dy, dx);
    assert_memory_equal (dy, r, count * sizeof (float));
    double *gx = s_doubles (count);
    s_numeric_grad (s_ref_objective, &ref, ref.x, count, gx);
    double err_dx = s_rel_err (dx, gx, count);
    s_check (name, "dx", err_dx, S_GRAD_TOL);

    //  The batch split in two calls, as over two threads, gives the same.
    float *halves = s_floats (count);
    ps_cpu_dropout_forward (&l, 1, size, seed, first, x, halves);
    ps_cpu_dropout_forward (&l, n - 1, size, seed, first + 1, x + size, halves + size);
    assert_memory_equal (halves, y, count * sizeof (float));
    printf ("\n  %-52s fwd %.1e dx %.1e (dropped %zu of %zu)\n", name, err_forward, err_dx,
            dropped, count);

    free (x);
    free (r);
    free (ref.x);
    free (ref.r);
    free (ref.y);
    free (want);
    free (y);
    free (dy);
    free (dx);
    free (gx);
    free (halves);
}

//  ---------------------------------------------------------------------
//  Softmax cross-entropy

typedef struct {
    int n, classes;
    double *logits;
    const uint8_t *labels;
} s_xent_t;

static double
s_xent_objective (const void *ctx)
{
    const s_xent_t *xe = ctx;
    return s_ref_xent (xe->n, xe->classes, xe->logits, xe->labels, NULL);
}

//  Loss sum, correct count (added to what *correct held) and dlogits at two
//  scales: 1 / n, the gradient of this batch's mean, and 1 / 16, a shard of
//  a larger batch. offsets [e] is added to every logit of example e.
static void
s_check_xent (const char *name, int n, int classes, const float *offsets, uint64_t seed)
{
    size_t count = (size_t) n * classes;
    uint64_t state = seed;
    float *logits = s_floats (count);
    uint8_t *labels = malloc ((size_t) n);
    assert_non_null (labels);
    s_fill_uniform (logits, count, &state, 3.0);
    for (int e = 0; e < n; e++)
        for (int j = 0; j < classes; j++)
            logits [(size_t) e * classes + j] += offsets ? offsets [e] : 0;
    double *wide = s_doubles (count);
    s_widen (logits, wide, count);

    //  Even examples are labelled with their argmax, odd ones with another
    //  class, so that a count of zero or of n means a miscount.
    for (int e = 0; e < n; e++) {
        int best = 0;
        for (int j = 1; j < classes; j++)
            if (wide [(size_t) e * classes + j] > wide [(size_t) e * classes + best])
                best = j;
        int wrong = (best + 1 + (int) (harness_splitmix (&state) % (uint64_t) (classes - 1)))
                  % classes;
        labels [e] = (uint8_t) (e % 2 == 0 ? best : wrong);
    }
    int want_correct;
    double want_loss = s_ref_xent (n, classes, wide, labels, &want_correct);

    s_xent_t xe = { n, classes, wide, labels };
    double *grad = s_doubles (count);
    s_numeric_grad (s_xent_objective, &xe, wide, count, grad);

    double err_loss = 0, err_grad = 0;
    const float scales [] = { 1.0f / (float) n, 1.0f / 16.0f };
    for (int s = 0; s < 2; s++) {
        float *dlogits = s_floats (count);
        s_fill_nan (dlogits, count);
        int correct = 7;
        double loss = ps_cpu_softmax_xent (n, classes, logits, labels, scales [s], dlogits,
                                           &correct);
        double e_loss = fabs (loss - want_loss) / fabs (want_loss);
        s_check (name, "loss sum", e_loss, S_FORWARD_TOL);
        if (correct != 7 + want_correct)
            fail_msg ("%s: correct count %d, expected %d (added to 7)", name, correct - 7,
                      want_correct);
        double *scaled = s_doubles (count);
        for (size_t i = 0; i < count; i++)
            scaled [i] = grad [i] * scales [s];
        double e_grad = s_rel_err (dlogits, scaled, count);
        s_check (name, "dlogits", e_grad, S_GRAD_TOL);
        err_loss = fmax (err_loss, e_loss);
        err_grad = fmax (err_grad, e_grad);
        free (dlogits);
        free (scaled);
    }

    //  Without dlogits (evaluation) the loss and the count are the same.
    int correct = 0;
    double loss = ps_cpu_softmax_xent (n, classes, logits, labels, 1.0f, NULL, &correct);
    s_check (name, "loss sum without dlogits", fabs (loss - want_loss) / fabs (want_loss),
             S_FORWARD_TOL);
    assert_int_equal (correct, want_correct);
    printf ("  %-52s loss %.1e dlogits %.1e correct %d of %d\n", name, err_loss, err_grad,
            want_correct, n);

    free (logits);
    free (labels);
    free (wide);
    free (grad);
}

static void
test_softmax_xent (void **state)
{
    (void) state;
    printf ("\n");
    s_check_xent ("softmax xent n=5 classes=7", 5, 7, NULL, 6001);
    s_check_xent ("softmax xent n=1 classes=10", 1, 10, NULL, 6002);
}

//  Logits far from zero, where exp overflows or underflows in float32
//  unless the maximum is subtracted first.
static void
test_softmax_xent_large_logits (void **state)
{
    (void) state;
    const float offsets [] = { 100.0f, -100.0f, 0.0f, 60.0f, -60.0f };
    printf ("\n");
    s_check_xent ("softmax xent n=5 classes=7 logits +-100", 5, 7, offsets, 6003);
}

//  Summed sigmoid cross-entropy, log (1 + e^z) - y z computed the plain
//  way in double, and the number of examples whose z > 0 says y.
typedef struct {
    int n;
    const double *logits;
    const uint8_t *labels;
} s_bxent_t;

static double
s_ref_bxent (const s_bxent_t *bx, int *correct)
{
    double total = 0;
    int right = 0;
    for (int e = 0; e < bx->n; e++) {
        double z = bx->logits [e];
        total += log1p (exp (z)) - (bx->labels [e] ? z : 0);
        right += (z > 0) == (bx->labels [e] != 0);
    }
    if (correct)
        *correct = right;
    return total;
}

static double
s_bxent_objective (const void *ctx)
{
    return s_ref_bxent (ctx, NULL);
}

//  A binary classifier's loss: the sum, the count and dlogits at the batch
//  mean's scale, against the reference and its finite differences, over
//  logits of both signs; offset is added to every logit.
static void
s_check_bxent (const char *name, int n, float offset, uint64_t seed)
{
    uint64_t state = seed;
    float *logits = s_floats ((size_t) n);
    uint8_t *labels = malloc ((size_t) n);
    assert_non_null (labels);
    s_fill_uniform (logits, (size_t) n, &state, 3.0);
    for (int e = 0; e < n; e++) {
        logits [e] += offset;
        //  Every third example is labelled against its logit's sign.
        labels [e] = (uint8_t) ((logits [e] > 0) != (e % 3 == 0));
    }
    double *wide = s_doubles ((size_t) n);
    s_widen (logits, wide, (size_t) n);
    s_bxent_t bx = { n, wide, labels };
    int want_correct;
    double want_loss = s_ref_bxent (&bx, &want_correct);
    double *grad = s_doubles ((size_t) n);
    s_numeric_grad (s_bxent_objective, &bx, wide, (size_t) n, grad);

    float *dlogits = s_floats ((size_t) n);
    s_fill_nan (dlogits, (size_t) n);
    int correct = 7;
    float scale = 1.0f / (float) n;
    double loss = ps_cpu_sigmoid_xent (n, logits, labels, scale, dlogits, &correct);
    double e_loss = fabs (loss - want_loss) / fabs (want_loss);
    s_check (name, "loss sum", e_loss, S_FORWARD_TOL);
    if (correct != 7 + want_correct)
        fail_msg ("%s: correct count %d, expected %d (added to 7)", name, correct - 7,
                  want_correct);
    for (int e = 0; e < n; e++)
        grad [e] *= scale;
    double e_grad = s_rel_err (dlogits, grad, (size_t) n);
    s_check (name, "dlogits", e_grad, S_GRAD_TOL);
    correct = 0;
    assert_true (fabs (ps_cpu_sigmoid_xent (n, logits, labels, 1.0f, NULL, &correct) - loss)
                 <= 1e-12 * fabs (loss));
    assert_int_equal (correct, want_correct);
    printf ("  %-52s loss %.1e dlogits %.1e correct %d of %d\n", name, e_loss, e_grad,
            want_correct, n);
    free (logits);
    free (labels);
    free (wide);
    free (grad);
    free (dlogits);
}

static void
test_sigmoid_xent (void **state)
{
    (void) state;
    printf ("\n");
    s_check_bxent ("sigmoid xent n=9", 9, 0.0f, 6101);
    //  Far from zero, where e^z overflows float32 unless |z| is used.
    s_check_bxent ("sigmoid xent n=6 logits +30", 6, 30.0f, 6102);
    s_check_bxent ("sigmoid xent n=6 logits -30", 6, -30.0f, 6103);
}

//  Mean squared error, Keras's mse: each example's mean over its k outputs
//  of (y - t)^2, summed over the examples, computed the plain way in double.
typedef struct {
    int n, k;
    const double *outputs;
    const float *targets;
} s_mse_t;

static double
s_ref_mse (const s_mse_t *m, double *abs_sum)
{
    double total = 0, abs_total = 0;
    for (int e = 0; e < m->n; e++)
        for (int j = 0; j < m->k; j++) {
            double d = m->outputs [e * m->k + j] - (double) m->targets [e * m->k + j];
            total += d * d / m->k;
            abs_total += fabs (d) / m->k;
        }
    if (abs_sum)
        *abs_sum = abs_total;
    return total;
}

static double
s_mse_objective (const void *ctx)
{
    return s_ref_mse (ctx, NULL);
}

//  A regression model's loss: the sum, the absolute error and dlogits at
//  the batch mean's scale, against the float64 reference and its finite
//  differences. The targets go in as bytes, as the label buffers hold
//  them, at an odd offset so that nothing assumes they are aligned.
static void
s_check_mse (const char *name, int n, int k, uint64_t seed)
{
    uint64_t state = seed;
    size_t count = (size_t) n * (size_t) k;
    float *outputs = s_floats (count);
    float *targets = s_floats (count);
    s_fill_uniform (outputs, count, &state, 3.0);
    s_fill_uniform (targets, count, &state, 2.0);
    uint8_t *bytes = malloc (count * sizeof (float) + 1);
    assert_non_null (bytes);
    memcpy (bytes + 1, targets, count * sizeof (float));
    double *wide = s_doubles (count);
    s_widen (outputs, wide, count);
    s_mse_t m = { n, k, wide, targets };
    double want_abs;
    double want_loss = s_ref_mse (&m, &want_abs);
    double *grad = s_doubles (count);
    s_numeric_grad (s_mse_objective, &m, wide, count, grad);

    float *dlogits = s_floats (count);
    s_fill_nan (dlogits, count);
    double abs_sum = 0.5;
    float scale = 1.0f / (float) n;
    double loss = ps_cpu_mse (n, k, outputs, bytes + 1, scale, dlogits, &abs_sum);
    double e_loss = fabs (loss - want_loss) / fabs (want_loss);
    s_check (name, "loss sum", e_loss, S_FORWARD_TOL);
    double e_abs = fabs (abs_sum - 0.5 - want_abs) / fabs (want_abs);
    s_check (name, "abs sum (added)", e_abs, S_FORWARD_TOL);
    for (size_t i = 0; i < count; i++)
        grad [i] *= scale;
    double e_grad = s_rel_err (dlogits, grad, count);
    s_check (name, "dlogits", e_grad, S_GRAD_TOL);
    abs_sum = 0;
    assert_true (fabs (ps_cpu_mse (n, k, outputs, bytes + 1, 1.0f, NULL, &abs_sum) - loss)
                 <= 1e-12 * fabs (loss));
    printf ("  %-52s loss %.1e abs %.1e dlogits %.1e\n", name, e_loss, e_abs, e_grad);
    free (outputs);
    free (targets);
    free (bytes);
    free (wide);
    free (grad);
    free (dlogits);
}

static void
test_mse (void **state)
{
    (void) state;
    printf ("\n");
    s_check_mse ("mse n=7 k=1", 7, 1, 6201);
    s_check_mse ("mse n=5 k=3", 5, 3, 6202);
    s_check_mse ("mse n=1 k=16", 1, 16, 6203);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_conv2d),
        cmocka_unit_test (test_dense),
        cmocka_unit_test (test_maxpool),
        cmocka_unit_test (test_relu),
        cmocka_unit_test (test_dropout),
        cmocka_unit_test (test_softmax_xent),
        cmocka_unit_test (test_softmax_xent_large_logits),
        cmocka_unit_test (test_sigmoid_xent),
        cmocka_unit_test (test_mse),
        cmocka_unit_test (test_activations),
        cmocka_unit_test (test_avgpool),
        cmocka_unit_test (test_gap),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
