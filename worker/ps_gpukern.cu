//  The GPU engine's arithmetic: see ps_gpukern.cuh.

#include "ps_dropout.h"
#include "ps_gpucall.cuh"
#include "ps_gpukern.cuh"

#include <math.h>

//  --------------------------------------------------------------------------
//  Kernels. Each walks its elements with a grid stride and 64-bit indices,
//  so any count the buffers can hold is covered by any grid.

#define S_FOR_EACH(i, count)                                                  \
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;         \
         i < (count); i += (int64_t) blockDim.x * gridDim.x)

__global__ void
ps_gpukern_fill (int64_t count, float value, float *out)
{
    S_FOR_EACH (i, count)
        out [i] = value;
}

//  col [n * out_h * out_w, kh * kw * in_c] from x [n, in_h, in_w, in_c]:
//  row (e, oy, ox), column (ky, kx, c) holds the input pixel under that
//  kernel tap, or zero where the tap falls in the padding.
__global__ void
ps_gpukern_im2col (int64_t count, ps_gpukern_geom_t g, const float *x, float *col)
{
    int64_t k_size = (int64_t) g.kh * g.kw * g.in_c;
    S_FOR_EACH (i, count) {
        int64_t row = i / k_size;
        int k = (int) (i - row * k_size);
        int c = k % g.in_c;
        int tap = k / g.in_c;
        int kx = tap % g.kw;
        int ky = tap / g.kw;
        int ox = (int) (row % g.out_w);
        int64_t t = row / g.out_w;
        int oy = (int) (t % g.out_h);
        int64_t e = t / g.out_h;
        int iy = oy * g.stride_h - g.pad_top + ky;
        int ix = ox * g.stride_w - g.pad_left + kx;
        float v = 0.0f;
        if (iy >= 0 && iy < g.in_h && ix >= 0 && ix < g.in_w)
            v = x [((e * g.in_h + iy) * g.in_w + ix) * g.in_c + c];
        col [i] = v;
    }
}

//  dx [n, in_h, in_w, in_c] from dcol: each input element sums the column
//  entries that read it. The CPU scatters row by row, adding into dx in
//  increasing (oy, ox); walking the taps backwards visits the same rows in
//  that same order, so the float sums agree exactly.
__global__ void
ps_gpukern_col2im (int64_t count, ps_gpukern_geom_t g, const float *dcol, float *dx)
{
    int k_size = g.kh * g.kw * g.in_c;
    S_FOR_EACH (i, count) {
        int c = (int) (i % g.in_c);
        int64_t t = i / g.in_c;
        int ix = (int) (t % g.in_w);
        t /= g.in_w;
        int iy = (int) (t % g.in_h);
        int64_t e = t / g.in_h;
        float sum = 0.0f;
        for (int ky = g.kh - 1; ky >= 0; ky--) {
            int ty = iy + g.pad_top - ky;
            if (ty < 0 || ty % g.stride_h != 0)
                continue;
            int oy = ty / g.stride_h;
            if (oy >= g.out_h)
                continue;
            for (int kx = g.kw - 1; kx >= 0; kx--) {
                int tx = ix + g.pad_left - kx;
                if (tx < 0 || tx % g.stride_w != 0)
                    continue;
                int ox = tx / g.stride_w;
                if (ox >= g.out_w)
                    continue;
                int64_t row = (e * g.out_h + oy) * g.out_w + ox;
                sum += dcol [row * k_size + (ky * g.kw + kx) * g.in_c + c];
            }
        }
        dx [i] = sum;
    }
}

//  y [rows, cols] += bias, then the fused ReLU; bias may be NULL.
__global__ void
ps_gpukern_bias_relu (int64_t count, int cols, const float *bias, int relu, float *y)
{
    S_FOR_EACH (i, count) {
        float v = y [i];
        if (bias)
            v += bias [i % cols];
        if (relu)
            v = v > 0.0f ? v : 0.0f;
        y [i] = v;
    }
}

__global__ void
ps_gpukern_relu_forward (int64_t count, const float *x, float *y)
{
    S_FOR_EACH (i, count) {
        float v = x [i];
        y [i] = v > 0.0f ? v : 0.0f;
    }
}

//  dx = dy where the ReLU's output was positive, else 0 (dx may be dy).
__global__ void
ps_gpukern_relu_backward (int64_t count, const float *y, const float *dy, float *dx)
{
    S_FOR_EACH (i, count)
        dx [i] = y [i] > 0.0f ? dy [i] : 0.0f;
}

//  Max pooling over NHWC windows: the first maximum of each window in
//  (ky, kx) order, which is increasing input index, so ties go to the
//  lowest index as on the CPU. Padded taps are skipped, never compared.
__global__ void
ps_gpukern_maxpool_forward (int64_t count, ps_gpukern_geom_t g, const float *x, float *y,
                            int32_t *argmax)
{
    int64_t in_size = (int64_t) g.in_h * g.in_w * g.in_c;
    S_FOR_EACH (i, count) {
        int c = (int) (i % g.out_c);
        int64_t t = i / g.out_c;
        int ox = (int) (t % g.out_w);
        t /= g.out_w;
        int oy = (int) (t % g.out_h);
        int64_t e = t / g.out_h;
        const float *xe = x + e * in_size;
        float best = 0.0f;
        int32_t best_index = -1;
        for (int ky = 0; ky < g.kh; ky++) {
            int iy = oy * g.stride_h - g.pad_top + ky;
            if (iy < 0 || iy >= g.in_h)
                continue;
            for (int kx = 0; kx < g.kw; kx++) {
                int ix = ox * g.stride_w - g.pad_left + kx;
                if (ix < 0 || ix >= g.in_w)
                    continue;
                int32_t index = (iy * g.in_w + ix) * g.in_c + c;
                float v = xe [index];
                if (best_index < 0 || v > best) {
                    best = v;
                    best_index = index;
                }
            }
        }
        y [i] = best;
        argmax [i] = best_index;
    }
}

//  dx of max pooling: each input element gathers dy from the outputs whose
//  winner it was. As in ps_gpukern_col2im the outputs are visited in increasing
//  (oy, ox), the order in which the CPU adds them, so overlapping windows
//  sum identically and no atomics are needed.
__global__ void
ps_gpukern_maxpool_backward (int64_t count, ps_gpukern_geom_t g, const int32_t *argmax,
                             const float *dy, float *dx)
{
    S_FOR_EACH (i, count) {
        int c = (int) (i % g.in_c);
        int64_t t = i / g.in_c;
        int ix = (int) (t % g.in_w);
        t /= g.in_w;
        int iy = (int) (t % g.in_h);
        int64_t e = t / g.in_h;
        int32_t index = (iy * g.in_w + ix) * g.in_c + c;
        float sum = 0.0f;
        for (int ky = g.kh - 1; ky >= 0; ky--) {
            int ty = iy + g.pad_top - ky;
            if (ty < 0 || ty % g.stride_h != 0)
                continue;
            int oy = ty / g.stride_h;
            if (oy >= g.out_h)
                continue;
            for (int kx = g.kw - 1; kx >= 0; kx--) {
                int tx = ix + g.pad_left - kx;
                if (tx < 0 || tx % g.stride_w != 0)
                    continue;
                int ox = tx / g.stride_w;
                if (ox >= g.out_w)
                    continue;
                int64_t o = ((e * g.out_h + oy) * g.out_w + ox) * g.out_c + c;
                if (argmax [o] == index)
                    sum += dy [o];
            }
        }
        dx [i] = sum;
    }
}

//  Inverted dropout over examples of `size` floats; element j of example e
//  is kept exactly when ps_dropout_keep says so on the CPU too. The same
//  kernel serves the backward pass, where x is dy (and y may be x).
__global__ void
ps_gpukern_dropout (int64_t count, int64_t size, uint64_t seed, uint32_t threshold, float scale,
                    const float *x, float *y)
{
    S_FOR_EACH (i, count) {
        int64_t e = i / size;
        int64_t j = i - e * size;
        y [i] = ps_dropout_keep (seed, (uint64_t) e, (uint64_t) j, threshold)
              ? x [i] * scale : 0.0f;
    }
}

//  Softmax cross-entropy on logits [n, classes], in one block: each thread
//  takes whole examples (classes are few, examples at most a batch), then
//  the block sums the losses in double and counts the correct predictions.
//  Writes dlogits = (softmax - onehot) * scale unless dlogits is NULL.
//  Labels were checked by the caller; one out of range still cannot read
//  out of bounds here, and poisons the loss with a NaN instead.
__global__ void
ps_gpukern_softmax_xent (int n, int classes, const float *logits, const uint8_t *labels,
                         float scale, float *dlogits, ps_gpukern_stats_t *stats)
{
    __shared__ double loss_part [PS_GPU_THREADS];
    __shared__ int correct_part [PS_GPU_THREADS];
    double loss = 0.0;
    int correct = 0;
    for (int e = threadIdx.x; e < n; e += blockDim.x) {
        const float *z = logits + (int64_t) e * classes;
        int label = labels [e];
        float max = z [0];
        int arg = 0;
        for (int j = 1; j < classes; j++)
            if (z [j] > max) {
                max = z [j];
                arg = j;
            }
        float sum = 0.0f;
        for (int j = 0; j < classes; j++)
            sum += expf (z [j] - max);
        //  The same expressions as the CPU's, rounding included.
        if (label < classes)
            loss += (double) logf (sum) - (double) (z [label] - max);
        else
            loss += (double) NAN;
        correct += arg == label;
        if (dlogits) {
            float *d = dlogits + (int64_t) e * classes;
            for (int j = 0; j < classes; j++) {
                float v = expf (z [j] - max) / sum * scale;
                d [j] = j == label ? v - scale : v;
            }
        }
    }
    loss_part [threadIdx.x] = loss;
    correct_part [threadIdx.x] = correct;
    __syncthreads ();
    for (int half = PS_GPU_THREADS / 2; half > 0; half /= 2) {
        if ((int) threadIdx.x < half) {
            loss_part [threadIdx.x] += loss_part [threadIdx.x + half];
            correct_part [threadIdx.x] += correct_part [threadIdx.x + half];
        }
        __syncthreads ();
    }
    if (threadIdx.x == 0) {
        stats->loss_sum = loss_part [0];
        stats->correct = correct_part [0];
    }
}


//  --------------------------------------------------------------------------
//  GEMMs. cuBLAS is column-major and our matrices are row-major; a
//  row-major [r, c] matrix is the column-major [c, r] matrix, its
//  transpose, so each product is computed transposed with the operands
//  swapped: row-major C = A B is column-major C^T = B^T A^T.
//
//  The handle runs in CUBLAS_DEFAULT_MATH, set explicitly: single-precision
//  GEMMs then compute in true float32. TF32 tensor-core math (the
//  CUBLAS_TF32_TENSOR_OP_MATH mode) keeps only 10 mantissa bits of each
//  operand and would put the engine about 1e-3 away from the CPU, outside
//  the 1e-4 the tests hold the two engines to.

static const float s_one = 1.0f;
static const float s_zero = 0.0f;

//  y [rows, out] = x [rows, k] w [k, out]
int
ps_gpukern_gemm_forward (cublasHandle_t blas, int rows, int k, int out, const float *x,
                         const float *w, float *y, ps_error_t *err)
{
    PS_CUBLAS (cublasSgemm (blas, CUBLAS_OP_N, CUBLAS_OP_N, out, rows, k,
                            &s_one, w, out, x, k, &s_zero, y, out));
    return PS_OK;
}

//  dw [k, out] = x^T [k, rows] dy [rows, out]
int
ps_gpukern_gemm_dweights (cublasHandle_t blas, int rows, int k, int out, const float *x,
                          const float *dy, float *dw, ps_error_t *err)
{
    PS_CUBLAS (cublasSgemm (blas, CUBLAS_OP_N, CUBLAS_OP_T, out, k, rows,
                            &s_one, dy, out, x, k, &s_zero, dw, out));
    return PS_OK;
}

//  dx [rows, k] = dy [rows, out] w^T [out, k]
int
ps_gpukern_gemm_dinput (cublasHandle_t blas, int rows, int k, int out, const float *dy,
                        const float *w, float *dx, ps_error_t *err)
{
    PS_CUBLAS (cublasSgemm (blas, CUBLAS_OP_T, CUBLAS_OP_N, k, rows, out,
                            &s_one, w, out, dy, out, &s_zero, dx, k));
    return PS_OK;
}

//  dbias [out] = the column sums of dy [rows, out], as dy^T times ones.
int
ps_gpukern_gemv_dbias (cublasHandle_t blas, int rows, int out, const float *dy,
                       const float *ones, float *dbias, ps_error_t *err)
{
    PS_CUBLAS (cublasSgemv (blas, CUBLAS_OP_N, out, rows, &s_one, dy, out,
                            ones, 1, &s_zero, dbias, 1));
    return PS_OK;
}
