//  CPU kernels; see ps_cpu_ops.h.
//
//  GEMMs go to OpenBLAS (row-major cblas_sgemm); everything else is plain
//  loops over NHWC data with the channel innermost, which the compiler
//  vectorises. The backends call these single-threaded: parallelism comes
//  from splitting the batch (ps_cpunet.c).

#include "ps_cpu_ops.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "ps_dropout.h"

//  y [rows, cols] += bias [cols], then the fused activation.
static void
s_bias_act (size_t rows, int cols, const float *bias, bool relu, float *y)
{
    for (size_t r = 0; r < rows; r++) {
        float *row = y + r * cols;
        if (bias)
            for (int c = 0; c < cols; c++)
                row [c] += bias [c];
        if (relu)
            for (int c = 0; c < cols; c++)
                row [c] = row [c] > 0.0f ? row [c] : 0.0f;
    }
}

//  The backward half of s_bias_act: mask dy where the ReLU was off, and sum
//  dy's rows into dbias.
static void
s_bias_act_backward (size_t rows, int cols, const float *y, bool relu, float *dy,
                     float *dbias)
{
    if (relu)
        for (size_t i = 0; i < rows * cols; i++)
            dy [i] = y [i] > 0.0f ? dy [i] : 0.0f;
    if (dbias) {
        memset (dbias, 0, cols * sizeof (float));
        for (size_t r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++)
                dbias [c] += dy [r * cols + c];
    }
}

size_t
ps_cpu_conv2d_col_size (const ps_layer_t *l, int n)
{
    return (size_t) n * l->out_h * l->out_w * l->kh * l->kw * l->in_c;
}

//  Unfold x into col: one row per output position, holding the kh x kw
//  window of in_c channels it sees, zeros where the window hangs over the
//  padding.
static void
s_im2col (const ps_layer_t *l, int n, const float *x, float *col)
{
    const int c = l->in_c;
    const size_t image = (size_t) l->in_h * l->in_w * c;
    float *out = col;
    for (int e = 0; e < n; e++) {
        const float *img = x + e * image;
        for (int oy = 0; oy < l->out_h; oy++)
            for (int ox = 0; ox < l->out_w; ox++) {
                int iy0 = oy * l->stride_h - l->pad_top;
                int ix0 = ox * l->stride_w - l->pad_left;
                //  A window wholly inside the image: straight copies.
                if (iy0 >= 0 && iy0 + l->kh <= l->in_h && ix0 >= 0 && ix0 + l->kw <= l->in_w) {
                    const size_t span = (size_t) l->kw * c;
                    for (int ky = 0; ky < l->kh; ky++, out += span) {
                        const float *src = img + ((size_t) (iy0 + ky) * l->in_w + ix0) * c;
                        if (c == 1)
                            for (int kx = 0; kx < l->kw; kx++)
                                out [kx] = src [kx];
                        else
                            memcpy (out, src, span * sizeof (float));
                    }
                    continue;
                }
                for (int ky = 0; ky < l->kh; ky++) {
                    int iy = oy * l->stride_h + ky - l->pad_top;
                    for (int kx = 0; kx < l->kw; kx++, out += c) {
                        int ix = ox * l->stride_w + kx - l->pad_left;
                        if (iy < 0 || iy >= l->in_h || ix < 0 || ix >= l->in_w)
                            memset (out, 0, c * sizeof (float));
                        else
                        if (c == 1)
                            *out = img [iy * l->in_w + ix];
                        else
                            memcpy (out, img + ((size_t) iy * l->in_w + ix) * c,
                                    c * sizeof (float));
                    }
                }
            }
    }
}

//  The adjoint of s_im2col: add every column entry back onto the input
//  position it came from.
static void
s_col2im (const ps_layer_t *l, int n, const float *col, float *dx)
{
    const int c = l->in_c;
    const size_t image = (size_t) l->in_h * l->in_w * c;
    memset (dx, 0, n * image * sizeof (float));
    const float *in = col;
    for (int e = 0; e < n; e++) {
        float *img = dx + e * image;
        for (int oy = 0; oy < l->out_h; oy++)
            for (int ox = 0; ox < l->out_w; ox++)
                for (int ky = 0; ky < l->kh; ky++) {
                    int iy = oy * l->stride_h + ky - l->pad_top;
                    for (int kx = 0; kx < l->kw; kx++, in += c) {
                        int ix = ox * l->stride_w + kx - l->pad_left;
                        if (iy < 0 || iy >= l->in_h || ix < 0 || ix >= l->in_w)
                            continue;
                        float *p = img + ((size_t) iy * l->in_w + ix) * c;
                        for (int k = 0; k < c; k++)
                            p [k] += in [k];
                    }
                }
    }
}

void
ps_cpu_conv2d_forward (const ps_layer_t *l, int n, const float *x,
                       const float *kernel, const float *bias, float *y, float *col)
{
    const int m = n * l->out_h * l->out_w;
    const int k = l->kh * l->kw * l->in_c;
    s_im2col (l, n, x, col);
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, m, l->out_c, k,
                 1.0f, col, k, kernel, l->out_c, 0.0f, y, l->out_c);
    s_bias_act ((size_t) m, l->out_c, bias, l->relu, y);
}

void
ps_cpu_conv2d_backward (const ps_layer_t *l, int n, const float *x, const float *y,
                        const float *kernel, float *dy, float *dx,
                        float *dkernel, float *dbias, float *col, int col_valid)
{
    const int m = n * l->out_h * l->out_w;
    const int k = l->kh * l->kw * l->in_c;
    s_bias_act_backward ((size_t) m, l->out_c, y, l->relu, dy, dbias);
    if (!col_valid)
        s_im2col (l, n, x, col);
    //  dkernel [k, out] = col^T [k, m] dy [m, out]
    cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, k, l->out_c, m,
                 1.0f, col, k, dy, l->out_c, 0.0f, dkernel, l->out_c);
    if (dx) {
        //  dcol [m, k] = dy [m, out] kernel^T [out, k], folded back onto dx.
        cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, m, k, l->out_c,
                     1.0f, dy, l->out_c, kernel, l->out_c, 0.0f, col, k);
        s_col2im (l, n, col, dx);
    }
}

void
ps_cpu_dense_forward (const ps_layer_t *l, int n, const float *x,
                      const float *kernel, const float *bias, float *y)
{
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, n, l->out_c, l->in_c,
                 1.0f, x, l->in_c, kernel, l->out_c, 0.0f, y, l->out_c);
    s_bias_act ((size_t) n, l->out_c, bias, l->relu, y);
}

void
ps_cpu_dense_backward (const ps_layer_t *l, int n, const float *x, const float *y,
                       const float *kernel, float *dy, float *dx,
                       float *dkernel, float *dbias)
{
    s_bias_act_backward ((size_t) n, l->out_c, y, l->relu, dy, dbias);
    //  dkernel [in, out] = x^T [in, n] dy [n, out]
    cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, l->in_c, l->out_c, n,
                 1.0f, x, l->in_c, dy, l->out_c, 0.0f, dkernel, l->out_c);
    //  dx [n, in] = dy [n, out] kernel^T [out, in]
    if (dx)
        cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, n, l->in_c, l->out_c,
                     1.0f, dy, l->out_c, kernel, l->out_c, 0.0f, dx, l->in_c);
}

void
ps_cpu_maxpool_forward (const ps_layer_t *l, int n, const float *x, float *y,
                        int32_t *argmax)
{
    const int c = l->in_c;
    const size_t in_image = (size_t) l->in_h * l->in_w * c;
    const size_t out_image = (size_t) l->out_h * l->out_w * c;
    for (int e = 0; e < n; e++) {
        const float *img = x + e * in_image;
        for (int oy = 0; oy < l->out_h; oy++)
            for (int ox = 0; ox < l->out_w; ox++) {
                float *best = y + e * out_image + ((size_t) oy * l->out_w + ox) * c;
                int32_t *where = argmax + e * out_image + ((size_t) oy * l->out_w + ox) * c;
                //  The first position inside the input seeds the maximum, so
                //  that padding never wins and a NaN input cannot leave an
                //  output without a source.
                bool first = true;
                for (int ky = 0; ky < l->kh; ky++) {
                    int iy = oy * l->stride_h + ky - l->pad_top;
                    if (iy < 0 || iy >= l->in_h)
                        continue;
                    for (int kx = 0; kx < l->kw; kx++) {
                        int ix = ox * l->stride_w + kx - l->pad_left;
                        if (ix < 0 || ix >= l->in_w)
                            continue;
                        int32_t base = (iy * l->in_w + ix) * c;
                        const float *p = img + base;
                        if (first) {
                            for (int k = 0; k < c; k++) {
                                best [k] = p [k];
                                where [k] = base + k;
                            }
                            first = false;
                        }
                        else {
                            //  Branch-free, the index chosen with an integer
                            //  mask: written this way the loop vectorises,
                            //  while a branch or a select of the index does
                            //  not, and pooling was 40% of a CNN step.
                            const float *restrict pr = p;
                            float *restrict br = best;
                            int32_t *restrict wr = where;
                            for (int k = 0; k < c; k++) {
                                float v = pr [k], b = br [k];
                                int32_t m = -(int32_t) (v > b);
                                br [k] = v > b ? v : b;
                                wr [k] = (wr [k] & ~m) | ((base + k) & m);
                            }
                        }
                    }
                }
            }
    }
}

void
ps_cpu_maxpool_backward (const ps_layer_t *l, int n, const int32_t *argmax,
                         const float *dy, float *dx)
{
    const size_t in_image = (size_t) l->in_h * l->in_w * l->in_c;
    const size_t out_image = (size_t) l->out_h * l->out_w * l->out_c;
    memset (dx, 0, n * in_image * sizeof (float));
    for (int e = 0; e < n; e++) {
        float *img = dx + e * in_image;
        const float *g = dy + e * out_image;
        const int32_t *where = argmax + e * out_image;
        for (size_t i = 0; i < out_image; i++)
            img [where [i]] += g [i];
    }
}

void
ps_cpu_relu_forward (size_t count, const float *x, float *y)
{
    for (size_t i = 0; i < count; i++)
        y [i] = x [i] > 0.0f ? x [i] : 0.0f;
}

void
ps_cpu_relu_backward (size_t count, const float *y, const float *dy, float *dx)
{
    for (size_t i = 0; i < count; i++)
        dx [i] = y [i] > 0.0f ? dy [i] : 0.0f;
}

//  Both directions of dropout apply the same scaled mask.
static void
s_dropout (const ps_layer_t *l, int n, size_t size, uint64_t seed, int first,
           const float *in, float *out)
{
    const uint32_t threshold = ps_dropout_threshold (l->rate);
    const float scale = (float) (1.0 / (1.0 - l->rate));
    for (int e = 0; e < n; e++)
        for (size_t i = 0; i < size; i++) {
            size_t at = e * size + i;
            out [at] = ps_dropout_keep (seed, (uint64_t) (first + e), i, threshold)
                     ? in [at] * scale : 0.0f;
        }
}

void
ps_cpu_dropout_forward (const ps_layer_t *l, int n, size_t size, uint64_t seed,
                        int first, const float *x, float *y)
{
    s_dropout (l, n, size, seed, first, x, y);
}

void
ps_cpu_dropout_backward (const ps_layer_t *l, int n, size_t size, uint64_t seed,
                         int first, const float *dy, float *dx)
{
    s_dropout (l, n, size, seed, first, dy, dx);
}

double
ps_cpu_softmax_xent (int n, int classes, const float *logits, const uint8_t *labels,
                     float scale, float *dlogits, int *correct)
{
    double loss = 0;
    for (int e = 0; e < n; e++) {
        const float *z = logits + (size_t) e * classes;
        int best = 0;
        for (int k = 1; k < classes; k++)
            if (z [k] > z [best])
                best = k;
        float max = z [best];
        float sum = 0.0f;
        for (int k = 0; k < classes; k++)
            sum += expf (z [k] - max);
        //  log softmax [label] = z [label] - max - log (sum)
        loss += (double) logf (sum) - (double) (z [labels [e]] - max);
        *correct += best == labels [e];
        if (dlogits) {
            float *d = dlogits + (size_t) e * classes;
            for (int k = 0; k < classes; k++)
                d [k] = expf (z [k] - max) / sum * scale;
            d [labels [e]] -= scale;
        }
    }
    return loss;
}

double
ps_cpu_sigmoid_xent (int n, const float *logits, const uint8_t *labels, float scale,
                     float *dlogits, int *correct)
{
    double loss = 0;
    for (int e = 0; e < n; e++) {
        float z = logits [e];
        float y = labels [e] ? 1.0f : 0.0f;
        //  log (1 + e^z) - y z = max (z, 0) - y z + log (1 + e^-|z|), which
        //  neither overflows nor loses the small terms far from zero.
        loss += (double) fmaxf (z, 0.0f) - (double) (y * z)
              + (double) log1pf (expf (-fabsf (z)));
        *correct += (z > 0.0f) == (labels [e] != 0);
        if (dlogits) {
            //  The sigmoid, through e^-|z| so that it cannot overflow.
            float t = expf (-fabsf (z));
            float p = z >= 0.0f ? 1.0f / (1.0f + t) : t / (1.0f + t);
            dlogits [e] = (p - y) * scale;
        }
    }
    return loss;
}

void
ps_cpu_activation_forward (ps_activation_t act, size_t count, int channels, const float *x,
                           float *y)
{
    if (act == PS_ACT_SOFTMAX) {
        for (size_t at = 0; at < count; at += (size_t) channels) {
            float max = x [at];
            for (int k = 1; k < channels; k++)
                max = fmaxf (max, x [at + k]);
            float sum = 0.0f;
            for (int k = 0; k < channels; k++)
                sum += (y [at + k] = expf (x [at + k] - max));
            for (int k = 0; k < channels; k++)
                y [at + k] /= sum;
        }
        return;
    }
    for (size_t i = 0; i < count; i++) {
        float v = x [i];
        switch (act) {
            case PS_ACT_RELU:    y [i] = v > 0.0f ? v : 0.0f; break;
            case PS_ACT_SIGMOID: {
                //  Through e^-|v|, which cannot overflow.
                float t = expf (-fabsf (v));
                y [i] = v >= 0.0f ? 1.0f / (1.0f + t) : t / (1.0f + t);
                break;
            }
            case PS_ACT_TANH:    y [i] = tanhf (v); break;
            case PS_ACT_GELU:    y [i] = 0.5f * v * (1.0f + erff (v * (float) M_SQRT1_2)); break;
            default:             y [i] = v; break;
        }
    }
}

void
ps_cpu_activation_backward (ps_activation_t act, size_t count, int channels, const float *x,
                            const float *y, const float *dy, float *dx)
{
    if (act == PS_ACT_SOFTMAX) {
        //  dx_k = y_k (dy_k - sum_j dy_j y_j), the sum taken before dx
        //  overwrites dy.
        for (size_t at = 0; at < count; at += (size_t) channels) {
            float dot = 0.0f;
            for (int k = 0; k < channels; k++)
                dot += dy [at + k] * y [at + k];
            for (int k = 0; k < channels; k++)
                dx [at + k] = y [at + k] * (dy [at + k] - dot);
        }
        return;
    }
    //  1 / sqrt (2 pi), the standard normal density's factor.
    const float inv_sqrt_2pi = 0.3989422804014327f;
    for (size_t i = 0; i < count; i++) {
        float g = dy [i];
        switch (act) {
            case PS_ACT_RELU:    dx [i] = y [i] > 0.0f ? g : 0.0f; break;
            case PS_ACT_SIGMOID: dx [i] = g * y [i] * (1.0f - y [i]); break;
            case PS_ACT_TANH:    dx [i] = g * (1.0f - y [i] * y [i]); break;
            case PS_ACT_GELU: {
                float v = x [i];
                float cdf = 0.5f * (1.0f + erff (v * (float) M_SQRT1_2));
                dx [i] = g * (cdf + v * inv_sqrt_2pi * expf (-0.5f * v * v));
                break;
            }
            default:             dx [i] = g; break;
        }
    }
}

//  The window of output (oy, ox) clipped to the input: rows [*y0, *y1),
//  columns [*x0, *x1).
static void
s_window (const ps_layer_t *l, int oy, int ox, int *y0, int *y1, int *x0, int *x1)
{
    *y0 = oy * l->stride_h - l->pad_top;
    *x0 = ox * l->stride_w - l->pad_left;
    *y1 = *y0 + l->kh < l->in_h ? *y0 + l->kh : l->in_h;
    *x1 = *x0 + l->kw < l->in_w ? *x0 + l->kw : l->in_w;
    *y0 = *y0 > 0 ? *y0 : 0;
    *x0 = *x0 > 0 ? *x0 : 0;
}

void
ps_cpu_avgpool_forward (const ps_layer_t *l, int n, const float *x, float *y)
{
    const int c = l->in_c;
    for (int e = 0; e < n; e++) {
        const float *xe = x + (size_t) e * l->in_h * l->in_w * c;
        float *ye = y + (size_t) e * l->out_h * l->out_w * c;
        for (int oy = 0; oy < l->out_h; oy++)
            for (int ox = 0; ox < l->out_w; ox++) {
                int y0, y1, x0, x1;
                s_window (l, oy, ox, &y0, &y1, &x0, &x1);
                float *out = ye + ((size_t) oy * l->out_w + ox) * c;
                for (int k = 0; k < c; k++)
                    out [k] = 0.0f;
                for (int iy = y0; iy < y1; iy++)
                    for (int ix = x0; ix < x1; ix++)
                        for (int k = 0; k < c; k++)
                            out [k] += xe [((size_t) iy * l->in_w + ix) * c + k];
                float scale = 1.0f / (float) ((y1 - y0) * (x1 - x0));
                for (int k = 0; k < c; k++)
                    out [k] *= scale;
            }
    }
}

void
ps_cpu_avgpool_backward (const ps_layer_t *l, int n, const float *dy, float *dx)
{
    const int c = l->in_c;
    memset (dx, 0, (size_t) n * l->in_h * l->in_w * c * sizeof (float));
    for (int e = 0; e < n; e++) {
        float *dxe = dx + (size_t) e * l->in_h * l->in_w * c;
        const float *dye = dy + (size_t) e * l->out_h * l->out_w * c;
        for (int oy = 0; oy < l->out_h; oy++)
            for (int ox = 0; ox < l->out_w; ox++) {
                int y0, y1, x0, x1;
                s_window (l, oy, ox, &y0, &y1, &x0, &x1);
                const float *g = dye + ((size_t) oy * l->out_w + ox) * c;
                float scale = 1.0f / (float) ((y1 - y0) * (x1 - x0));
                for (int iy = y0; iy < y1; iy++)
                    for (int ix = x0; ix < x1; ix++)
                        for (int k = 0; k < c; k++)
                            dxe [((size_t) iy * l->in_w + ix) * c + k] += g [k] * scale;
            }
    }
}

void
ps_cpu_gap_forward (const ps_layer_t *l, int n, const float *x, float *y)
{
    const int c = l->in_c;
    const size_t positions = (size_t) l->in_h * l->in_w;
    for (int e = 0; e < n; e++) {
        const float *xe = x + (size_t) e * positions * c;
        float *ye = y + (size_t) e * c;
        for (int k = 0; k < c; k++)
            ye [k] = 0.0f;
        for (size_t p = 0; p < positions; p++)
            for (int k = 0; k < c; k++)
                ye [k] += xe [p * c + k];
        for (int k = 0; k < c; k++)
            ye [k] /= (float) positions;
    }
}

void
ps_cpu_gap_backward (const ps_layer_t *l, int n, const float *dy, float *dx)
{
    const int c = l->in_c;
    const size_t positions = (size_t) l->in_h * l->in_w;
    for (int e = 0; e < n; e++)
        for (size_t p = 0; p < positions; p++)
            for (int k = 0; k < c; k++)
                dx [((size_t) e * positions + p) * c + k] = dy [(size_t) e * c + k]
                                                            / (float) positions;
}

double
ps_cpu_mse (int n, int k, const float *outputs, const uint8_t *targets, float scale,
            float *dlogits, double *abs_sum)
{
    double loss = 0, abs_total = 0;
    for (int e = 0; e < n; e++) {
        const float *y = outputs + (size_t) e * k;
        const uint8_t *at = targets + (size_t) e * k * sizeof (float);
        //  Summed in double: the per-example mean of k squares is what
        //  Keras reports, and float would drop the small terms of a large k.
        double sq = 0, ab = 0;
        for (int j = 0; j < k; j++) {
            float t;
            memcpy (&t, at + (size_t) j * sizeof t, sizeof t);
            double d = (double) y [j] - (double) t;
            sq += d * d;
            ab += fabs (d);
            if (dlogits)
                dlogits [(size_t) e * k + j] = (float) (2.0 * d / k) * scale;
        }
        loss += sq / k;
        abs_total += ab / k;
    }
    *abs_sum += abs_total;
    return loss;
}
