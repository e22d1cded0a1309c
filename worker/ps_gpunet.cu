//  The GPU engine: the model's forward and backward passes as CUDA kernels,
//  every GEMM through cuBLAS; see ps_gpunet.h.
//
//  Buffers. Everything is allocated in ps_gpunet_new for max_batch
//  examples: the parameters and their gradient (both laid out as the flat
//  host vector, so each layer's kernel and bias are pointers into them and
//  the gradient leaves in one copy), the input batch and labels, one output
//  buffer per layer (Flatten has none: its output is its input, read with
//  another shape), an argmax buffer per MaxPool2D, one im2col workspace
//  sized for the largest convolution, two gradient buffers that the
//  backward pass ping-pongs between, a vector of ones for the bias
//  gradients, and the stats of the last batch. Host traffic goes through
//  pinned staging buffers, so the copies are true DMA and can be queued on
//  the stream without the driver staging them again.
//
//  Execution. One non-blocking stream carries every copy, kernel and
//  cuBLAS call of a step in order; the host waits once, at the end, when it
//  needs the gradient and stats (or once per layer while profiling).
//
//  Arithmetic. Each layer does what its CPU kernel does (ps_cpu_ops.h):
//  convolutions are im2col with columns ordered (ky, kx, c) and a GEMM
//  against the Keras kernel read as a [kh * kw * in, out] matrix; dense
//  layers are a GEMM; bias and fused ReLU follow the GEMM; the backward
//  pass masks dy by the ReLU first, then takes dK = col^T dY, dbias = the
//  column sums of dY and dcol = dY K^T, which col2im folds back into dx.
//  Max pooling records the first maximum of each window (padding never
//  wins) and routes the gradient to it. Dropout draws its mask from
//  ps_dropout.h, which both engines share, so it drops the same elements.
//  The softmax cross-entropy subtracts the row maximum before exponentiating
//  and its gradient is that of the batch mean. Where the CPU accumulates
//  several terms into one element (col2im, max pooling's backward), the
//  kernels here gather the same terms in the same order, so those sums come
//  out bit for bit equal; GEMM sums differ only in their order.
//
//  Errors. Every CUDA and cuBLAS call is checked; a failure becomes PS_EIO
//  with the call's name and CUDA's (or our cuBLAS table's) words for it.
//  Kernel launches are checked with cudaGetLastError; faults inside a
//  kernel surface at the next synchronising call, which names itself.

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_backend.h"
#include "ps_dropout.h"
#include "ps_error.h"
#include "ps_gpunet.h"
#include "ps_model.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  Threads per block for the element-wise kernels, and a cap on the grid:
//  the kernels loop with a grid stride, so a larger batch only means more
//  iterations per thread, never a launch that exceeds the grid limits.
#define S_THREADS       256
#define S_MAX_BLOCKS    65536

//  The workspace cuBLAS is given up front, so that it never allocates on
//  its own during a step; 32 MiB is NVIDIA's recommendation for Hopper and
//  is plenty for earlier parts.
#define S_BLAS_WORKSPACE  ((size_t) 32 << 20)

//  The stats of a batch as the loss kernel leaves them on the device.
typedef struct {
    double loss_sum;
    int correct;
} s_stats_t;

//  The geometry a kernel needs, passed by value: a small copy of the
//  layer's integers (the layer itself carries a name we do not want to ship
//  with every launch).
typedef struct {
    int in_h, in_w, in_c;
    int out_h, out_w, out_c;
    int kh, kw;
    int stride_h, stride_w;
    int pad_top, pad_left;
} s_geom_t;

//  One layer as the engine runs it.
typedef struct {
    ps_layer_t def;             //  the model's layer, copied
    s_geom_t geom;
    size_t in_size;             //  floats per example in
    size_t out_size;            //  floats per example out
    //  Convolutions and dense layers are a GEMM of rows x k by k x out,
    //  with rows = n * rows_per_example.
    int rows_per_example;
    int gemm_k;
    int gemm_out;
    float *y;                   //  output, max_batch examples; NULL for Flatten
    int32_t *argmax;            //  MaxPool2D: the winner of each output
    const float *kernel;        //  into d_params, NULL when absent
    const float *bias;
    float *dkernel;             //  into d_grads, NULL when absent
    float *dbias;
} s_layer_t;

struct ps_gpunet_t {
    int layer_count;
    int max_batch;
    int classes;
    int first_trainable;        //  first layer with variables (layer_count if none)
    size_t input_size;          //  floats per example
    size_t param_count;         //  floats
    size_t max_activation;      //  floats per example, input and logits included
    size_t col_size;            //  floats of the im2col workspace
    size_t ones_size;           //  floats of the ones vector
    char device_name [256];
    s_layer_t *layers;
    //  Per step: acts [i] is the input of layer i, acts [layer_count] the
    //  logits. Flatten, and Dropout when not training, pass their input on.
    const float **acts;
    int col_layer;              //  the layer whose im2col d_col holds, or -1

    cudaStream_t stream;
    cublasHandle_t blas;
    cudaEvent_t ev_start;       //  profiling: brackets one layer
    cudaEvent_t ev_stop;

    float *d_params;
    float *d_grads;
    float *d_x;
    uint8_t *d_labels;
    float *d_col;
    float *d_ones;
    float *d_g0;                //  the backward pass's dy and dx, in turn
    float *d_g1;
    s_stats_t *d_stats;
    void *d_blas_workspace;

    float *h_params;            //  pinned: parameters in, gradients out
    float *h_x;                 //  pinned: the batch's inputs
    uint8_t *h_labels;          //  pinned: the batch's labels
    float *h_logits;            //  pinned: logits out
    s_stats_t *h_stats;         //  pinned: stats out

    bool profiling;
    double *fwd_ms;             //  layer_count + 1, the loss last
    double *bwd_ms;
};


//  --------------------------------------------------------------------------
//  Error reporting

//  cuBLAS's status names. The library has cublasGetStatusString, but its
//  wording varies across versions and its absence on old toolkits would
//  break the build; the enum itself is stable.
static const char *
s_cublas_status_name (cublasStatus_t status)
{
    switch (status) {
        case CUBLAS_STATUS_SUCCESS:          return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED:  return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED:     return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE:    return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH:    return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR:    return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR:   return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED:    return "CUBLAS_STATUS_NOT_SUPPORTED";
        case CUBLAS_STATUS_LICENSE_ERROR:    return "CUBLAS_STATUS_LICENSE_ERROR";
        default:                             return "unknown cuBLAS status";
    }
}

//  The called function's name: the text of the call up to its argument
//  list, so that messages say "cudaMemcpyAsync: ..." and not the whole
//  expression.
static int
s_call_name_length (const char *call)
{
    return (int) strcspn (call, " (");
}

static int
s_cuda_failed (ps_error_t *err, const char *call, cudaError_t rc)
{
    //  A failed runtime call also sets CUDA's last-error state; clear it,
    //  or the next kernel launch's cudaGetLastError would report this
    //  failure again as its own.
    (void) cudaGetLastError ();
    return ps_error_set (err, PS_EIO, "%.*s: %s", s_call_name_length (call), call,
                         cudaGetErrorString (rc));
}

static int
s_cublas_failed (ps_error_t *err, const char *call, cublasStatus_t status)
{
    return ps_error_set (err, PS_EIO, "%.*s: %s", s_call_name_length (call), call,
                         s_cublas_status_name (status));
}

//  These macros return from the enclosing function, which has a
//  ps_error_t *err in scope; the constructor frees what was built on its
//  one exit path, so no function needs to undo anything itself.
#define S_CUDA(call)                                                          \
    do {                                                                      \
        cudaError_t s_rc_ = (call);                                           \
        if (s_rc_ != cudaSuccess)                                             \
            return s_cuda_failed (err, #call, s_rc_);                         \
    } while (0)

#define S_CUBLAS(call)                                                        \
    do {                                                                      \
        cublasStatus_t s_status_ = (call);                                    \
        if (s_status_ != CUBLAS_STATUS_SUCCESS)                               \
            return s_cublas_failed (err, #call, s_status_);                   \
    } while (0)

#define S_TRY(expr)                                                           \
    do {                                                                      \
        int s_try_ = (expr);                                                  \
        if (s_try_ != PS_OK)                                                  \
            return s_try_;                                                    \
    } while (0)

//  Launch an element-wise kernel over `count` elements on the engine's
//  stream. Nothing is launched for zero elements (a grid of zero blocks is
//  a launch error).
#define S_LAUNCH(kernel, count, ...)                                          \
    do {                                                                      \
        int64_t s_count_ = (int64_t) (count);                                 \
        if (s_count_ > 0) {                                                   \
            kernel <<<s_blocks (s_count_), S_THREADS, 0, self->stream>>> (__VA_ARGS__); \
            cudaError_t s_rc_ = cudaGetLastError ();                          \
            if (s_rc_ != cudaSuccess)                                         \
                return ps_error_set (err, PS_EIO, "launching %s: %s", #kernel, \
                                     cudaGetErrorString (s_rc_));             \
        }                                                                     \
    } while (0)

static unsigned int
s_blocks (int64_t count)
{
    int64_t blocks = (count + S_THREADS - 1) / S_THREADS;
    return (unsigned int) (blocks < S_MAX_BLOCKS ? blocks : S_MAX_BLOCKS);
}


//  --------------------------------------------------------------------------
//  Kernels. Each walks its elements with a grid stride and 64-bit indices,
//  so any count the buffers can hold is covered by any grid.

#define S_FOR_EACH(i, count)                                                  \
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;         \
         i < (count); i += (int64_t) blockDim.x * gridDim.x)

static __global__ void
s_fill (int64_t count, float value, float *out)
{
    S_FOR_EACH (i, count)
        out [i] = value;
}

//  col [n * out_h * out_w, kh * kw * in_c] from x [n, in_h, in_w, in_c]:
//  row (e, oy, ox), column (ky, kx, c) holds the input pixel under that
//  kernel tap, or zero where the tap falls in the padding.
static __global__ void
s_im2col (int64_t count, s_geom_t g, const float *x, float *col)
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
static __global__ void
s_col2im (int64_t count, s_geom_t g, const float *dcol, float *dx)
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
static __global__ void
s_bias_relu (int64_t count, int cols, const float *bias, int relu, float *y)
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

static __global__ void
s_relu_forward (int64_t count, const float *x, float *y)
{
    S_FOR_EACH (i, count) {
        float v = x [i];
        y [i] = v > 0.0f ? v : 0.0f;
    }
}

//  dx = dy where the ReLU's output was positive, else 0 (dx may be dy).
static __global__ void
s_relu_backward (int64_t count, const float *y, const float *dy, float *dx)
{
    S_FOR_EACH (i, count)
        dx [i] = y [i] > 0.0f ? dy [i] : 0.0f;
}

//  Max pooling over NHWC windows: the first maximum of each window in
//  (ky, kx) order, which is increasing input index, so ties go to the
//  lowest index as on the CPU. Padded taps are skipped, never compared.
static __global__ void
s_maxpool_forward (int64_t count, s_geom_t g, const float *x, float *y, int32_t *argmax)
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
//  winner it was. As in s_col2im the outputs are visited in increasing
//  (oy, ox), the order in which the CPU adds them, so overlapping windows
//  sum identically and no atomics are needed.
static __global__ void
s_maxpool_backward (int64_t count, s_geom_t g, const int32_t *argmax, const float *dy,
                    float *dx)
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
static __global__ void
s_dropout (int64_t count, int64_t size, uint64_t seed, uint32_t threshold, float scale,
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
static __global__ void
s_softmax_xent (int n, int classes, const float *logits, const uint8_t *labels,
                float scale, float *dlogits, s_stats_t *stats)
{
    __shared__ double loss_part [S_THREADS];
    __shared__ int correct_part [S_THREADS];
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
    for (int half = S_THREADS / 2; half > 0; half /= 2) {
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
static int
s_gemm_forward (ps_gpunet_t *self, int rows, int k, int out, const float *x,
                const float *w, float *y, ps_error_t *err)
{
    S_CUBLAS (cublasSgemm (self->blas, CUBLAS_OP_N, CUBLAS_OP_N, out, rows, k,
                           &s_one, w, out, x, k, &s_zero, y, out));
    return PS_OK;
}

//  dw [k, out] = x^T [k, rows] dy [rows, out]
static int
s_gemm_dweights (ps_gpunet_t *self, int rows, int k, int out, const float *x,
                 const float *dy, float *dw, ps_error_t *err)
{
    S_CUBLAS (cublasSgemm (self->blas, CUBLAS_OP_N, CUBLAS_OP_T, out, k, rows,
                           &s_one, dy, out, x, k, &s_zero, dw, out));
    return PS_OK;
}

//  dx [rows, k] = dy [rows, out] w^T [out, k]
static int
s_gemm_dinput (ps_gpunet_t *self, int rows, int k, int out, const float *dy,
               const float *w, float *dx, ps_error_t *err)
{
    S_CUBLAS (cublasSgemm (self->blas, CUBLAS_OP_T, CUBLAS_OP_N, k, rows, out,
                           &s_one, w, out, dy, out, &s_zero, dx, k));
    return PS_OK;
}

//  dbias [out] = the column sums of dy [rows, out], as dy^T times ones.
static int
s_gemv_dbias (ps_gpunet_t *self, int rows, int out, const float *dy, float *dbias,
              ps_error_t *err)
{
    S_CUBLAS (cublasSgemv (self->blas, CUBLAS_OP_N, out, rows, &s_one, dy, out,
                           self->d_ones, 1, &s_zero, dbias, 1));
    return PS_OK;
}


//  --------------------------------------------------------------------------
//  The passes

static int
s_profile_begin (ps_gpunet_t *self, ps_error_t *err)
{
    if (self->profiling)
        S_CUDA (cudaEventRecord (self->ev_start, self->stream));
    return PS_OK;
}

//  Add the time since s_profile_begin to *total; this waits for the layer.
static int
s_profile_end (ps_gpunet_t *self, double *total, ps_error_t *err)
{
    if (self->profiling) {
        float ms = 0.0f;
        S_CUDA (cudaEventRecord (self->ev_stop, self->stream));
        S_CUDA (cudaEventSynchronize (self->ev_stop));
        S_CUDA (cudaEventElapsedTime (&ms, self->ev_start, self->ev_stop));
        *total += ms;
    }
    return PS_OK;
}

static int
s_im2col_launch (ps_gpunet_t *self, int index, int n, ps_error_t *err)
{
    s_layer_t *layer = &self->layers [index];
    int64_t rows = (int64_t) n * layer->rows_per_example;
    S_LAUNCH (s_im2col, rows * layer->gemm_k, rows * layer->gemm_k, layer->geom,
              self->acts [index], self->d_col);
    self->col_layer = index;
    return PS_OK;
}

static int
s_forward_layer (ps_gpunet_t *self, int index, int n, bool training, uint64_t seed,
                 ps_error_t *err)
{
    s_layer_t *layer = &self->layers [index];
    const ps_layer_t *l = &layer->def;
    const float *x = self->acts [index];
    int64_t out_count = (int64_t) n * (int64_t) layer->out_size;
    int rows = n * layer->rows_per_example;
    switch (l->kind) {
        case PS_LAYER_CONV2D:
            S_TRY (s_im2col_launch (self, index, n, err));
            S_TRY (s_gemm_forward (self, rows, layer->gemm_k, layer->gemm_out, self->d_col,
                                   layer->kernel, layer->y, err));
            if (layer->bias || l->relu)
                S_LAUNCH (s_bias_relu, out_count, out_count, layer->gemm_out, layer->bias,
                          (int) l->relu, layer->y);
            self->acts [index + 1] = layer->y;
            break;
        case PS_LAYER_DENSE:
            S_TRY (s_gemm_forward (self, rows, layer->gemm_k, layer->gemm_out, x,
                                   layer->kernel, layer->y, err));
            if (layer->bias || l->relu)
                S_LAUNCH (s_bias_relu, out_count, out_count, layer->gemm_out, layer->bias,
                          (int) l->relu, layer->y);
            self->acts [index + 1] = layer->y;
            break;
        case PS_LAYER_MAXPOOL2D:
            S_LAUNCH (s_maxpool_forward, out_count, out_count, layer->geom, x, layer->y,
                      layer->argmax);
            self->acts [index + 1] = layer->y;
            break;
        case PS_LAYER_RELU:
            S_LAUNCH (s_relu_forward, out_count, out_count, x, layer->y);
            self->acts [index + 1] = layer->y;
            break;
        case PS_LAYER_FLATTEN:
            //  NHWC per example is already the flat order.
            self->acts [index + 1] = x;
            break;
        case PS_LAYER_DROPOUT:
            if (training) {
                float scale = (float) (1.0 / (1.0 - l->rate));
                S_LAUNCH (s_dropout, out_count, out_count, (int64_t) layer->out_size, seed,
                          ps_dropout_threshold (l->rate), scale, x, layer->y);
                self->acts [index + 1] = layer->y;
            }
            else
                self->acts [index + 1] = x;
            break;
    }
    return PS_OK;
}

static int
s_forward (ps_gpunet_t *self, int n, bool training, uint64_t seed, ps_error_t *err)
{
    self->acts [0] = self->d_x;
    self->col_layer = -1;
    for (int i = 0; i < self->layer_count; i++) {
        S_TRY (s_profile_begin (self, err));
        S_TRY (s_forward_layer (self, i, n, training, seed, err));
        S_TRY (s_profile_end (self, &self->fwd_ms [i], err));
    }
    return PS_OK;
}

//  The loss and its stats; with dlogits, also the gradient of the batch
//  mean loss with respect to the logits, into d_g0. As on the CPU, the
//  loss's time counts as backward in training (where it starts the
//  backward pass) and as forward in evaluation.
static int
s_loss (ps_gpunet_t *self, int n, bool dlogits, ps_error_t *err)
{
    S_TRY (s_profile_begin (self, err));
    s_softmax_xent <<<1, S_THREADS, 0, self->stream>>> (
        n, self->classes, self->acts [self->layer_count], self->d_labels,
        1.0f / (float) n, dlogits ? self->d_g0 : NULL, self->d_stats);
    cudaError_t rc = cudaGetLastError ();
    if (rc != cudaSuccess)
        return ps_error_set (err, PS_EIO, "launching s_softmax_xent: %s",
                             cudaGetErrorString (rc));
    double *total = dlogits ? self->bwd_ms : self->fwd_ms;
    S_TRY (s_profile_end (self, &total [self->layer_count], err));
    return PS_OK;
}

//  One layer's backward pass. *dy holds the gradient of its output and may
//  be overwritten; a layer that writes dx elsewhere swaps *dy and *spare,
//  so that *dy holds the gradient of its input afterwards. need_dx is false
//  for the first trainable layer, before which no gradient is wanted.
static int
s_backward_layer (ps_gpunet_t *self, int index, int n, bool need_dx, uint64_t seed,
                  float **dy, float **spare, ps_error_t *err)
{
    s_layer_t *layer = &self->layers [index];
    const ps_layer_t *l = &layer->def;
    int64_t out_count = (int64_t) n * (int64_t) layer->out_size;
    int64_t in_count = (int64_t) n * (int64_t) layer->in_size;
    int rows = n * layer->rows_per_example;
    float *tmp;
    switch (l->kind) {
        case PS_LAYER_CONV2D:
            if (l->relu)
                S_LAUNCH (s_relu_backward, out_count, out_count, layer->y, *dy, *dy);
            //  The workspace holds the im2col of the last convolution run
            //  forward; any other convolution rebuilds its own.
            if (self->col_layer != index)
                S_TRY (s_im2col_launch (self, index, n, err));
            S_TRY (s_gemm_dweights (self, rows, layer->gemm_k, layer->gemm_out, self->d_col,
                                    *dy, layer->dkernel, err));
            if (layer->dbias)
                S_TRY (s_gemv_dbias (self, rows, layer->gemm_out, *dy, layer->dbias, err));
            if (need_dx) {
                S_TRY (s_gemm_dinput (self, rows, layer->gemm_k, layer->gemm_out, *dy,
                                      layer->kernel, self->d_col, err));
                self->col_layer = -1;
                S_LAUNCH (s_col2im, in_count, in_count, layer->geom, self->d_col, *spare);
                tmp = *dy, *dy = *spare, *spare = tmp;
            }
            break;
        case PS_LAYER_DENSE:
            if (l->relu)
                S_LAUNCH (s_relu_backward, out_count, out_count, layer->y, *dy, *dy);
            S_TRY (s_gemm_dweights (self, rows, layer->gemm_k, layer->gemm_out,
                                    self->acts [index], *dy, layer->dkernel, err));
            if (layer->dbias)
                S_TRY (s_gemv_dbias (self, rows, layer->gemm_out, *dy, layer->dbias, err));
            if (need_dx) {
                S_TRY (s_gemm_dinput (self, rows, layer->gemm_k, layer->gemm_out, *dy,
                                      layer->kernel, *spare, err));
                tmp = *dy, *dy = *spare, *spare = tmp;
            }
            break;
        case PS_LAYER_MAXPOOL2D:
            if (need_dx) {
                S_LAUNCH (s_maxpool_backward, in_count, in_count, layer->geom, layer->argmax,
                          *dy, *spare);
                tmp = *dy, *dy = *spare, *spare = tmp;
            }
            break;
        case PS_LAYER_RELU:
            if (need_dx)
                S_LAUNCH (s_relu_backward, out_count, out_count, layer->y, *dy, *dy);
            break;
        case PS_LAYER_FLATTEN:
            break;
        case PS_LAYER_DROPOUT:
            //  Forward and backward both run in training, with the same
            //  seed, so the mask drawn here is the one that was applied.
            if (need_dx) {
                float scale = (float) (1.0 / (1.0 - l->rate));
                S_LAUNCH (s_dropout, out_count, out_count, (int64_t) layer->out_size,
                          seed, ps_dropout_threshold (l->rate), scale, *dy, *dy);
            }
            break;
    }
    return PS_OK;
}

//  The backward pass, after s_loss has left dlogits in d_g0. It stops at
//  the first layer with variables: nothing before it needs a gradient, and
//  that layer itself needs no dx (for the usual first convolution, the
//  largest GEMM of the step).
static int
s_backward (ps_gpunet_t *self, int n, uint64_t seed, ps_error_t *err)
{
    float *dy = self->d_g0;
    float *spare = self->d_g1;
    for (int i = self->layer_count - 1; i >= self->first_trainable; i--) {
        S_TRY (s_profile_begin (self, err));
        S_TRY (s_backward_layer (self, i, n, i > self->first_trainable, seed, &dy, &spare,
                                 err));
        S_TRY (s_profile_end (self, &self->bwd_ms [i], err));
    }
    return PS_OK;
}


//  --------------------------------------------------------------------------
//  Construction

//  Allocate device memory, or pinned host memory when `pinned`; nothing
//  for zero bytes. A failure names the call and the size.
static int
s_alloc (void **ptr, size_t bytes, bool pinned, ps_error_t *err)
{
    if (bytes == 0)
        return PS_OK;
    cudaError_t rc = pinned ? cudaMallocHost (ptr, bytes) : cudaMalloc (ptr, bytes);
    if (rc != cudaSuccess) {
        (void) cudaGetLastError ();
        return ps_error_set (err, PS_EIO, "%s (%zu bytes): %s",
                             pinned ? "cudaMallocHost" : "cudaMalloc", bytes,
                             cudaGetErrorString (rc));
    }
    return PS_OK;
}

//  Point a layer at variable `index` in the device parameters and
//  gradients, after checking that it holds the floats the layer's geometry
//  says it must.
static int
s_bind_variable (ps_gpunet_t *self, const ps_model_t *model, int layer_index, int index,
                 int64_t expected, const float **value, float **grad, ps_error_t *err)
{
    const ps_layer_t *l = &self->layers [layer_index].def;
    if (index < 0 || index >= ps_model_variable_count (model))
        return ps_error_set (err, PS_EINVAL, "layer %d (%s): variable index %d out of range",
                             layer_index, l->name, index);
    const ps_variable_t *v = ps_model_variable (model, index);
    if ((int64_t) v->count != expected || v->offset > self->param_count
    ||  v->count > self->param_count - v->offset)
        return ps_error_set (err, PS_ESHAPE, "layer %d (%s): variable %s holds %zu floats "
                             "at offset %zu, the layer needs %lld of the %zu parameters",
                             layer_index, l->name, v->name, v->count, v->offset,
                             (long long) expected, self->param_count);
    *value = self->d_params + v->offset;
    *grad = self->d_grads + v->offset;
    return PS_OK;
}

//  Read layer `index` from the model: its geometry, GEMM shape and
//  variables, checked against each other and against the layer before, and
//  its share of the workspaces. Allocates its output and argmax buffers.
static int
s_layer_setup (ps_gpunet_t *self, const ps_model_t *model, int index, size_t in_size,
               ps_error_t *err)
{
    s_layer_t *layer = &self->layers [index];
    layer->def = *ps_model_layer (model, index);
    const ps_layer_t *l = &layer->def;
    s_geom_t *g = &layer->geom;
    g->in_h = l->in_h, g->in_w = l->in_w, g->in_c = l->in_c;
    g->out_h = l->out_h, g->out_w = l->out_w, g->out_c = l->out_c;
    g->kh = l->kh, g->kw = l->kw;
    g->stride_h = l->stride_h, g->stride_w = l->stride_w;
    g->pad_top = l->pad_top, g->pad_left = l->pad_left;
    if (l->in_h < 1 || l->in_w < 1 || l->in_c < 1
    ||  l->out_h < 1 || l->out_w < 1 || l->out_c < 1)
        return ps_error_set (err, PS_ESHAPE, "layer %d (%s): empty input or output shape",
                             index, l->name);
    int64_t in_floats = (int64_t) l->in_h * l->in_w * l->in_c;
    int64_t out_floats = (int64_t) l->out_h * l->out_w * l->out_c;
    //  Per-example element indices are int32 in the argmax buffers and
    //  GEMM dimensions are int in cuBLAS.
    if (in_floats > INT_MAX || out_floats > INT_MAX)
        return ps_error_set (err, PS_ETOOBIG, "layer %d (%s): activations too large for the "
                             "GPU engine", index, l->name);
    layer->in_size = (size_t) in_floats;
    layer->out_size = (size_t) out_floats;
    if (layer->in_size != in_size)
        return ps_error_set (err, PS_ESHAPE, "layer %d (%s): takes %zu floats per example, "
                             "but is given %zu", index, l->name, layer->in_size, in_size);

    bool windowed = l->kind == PS_LAYER_CONV2D || l->kind == PS_LAYER_MAXPOOL2D;
    if (windowed && (l->kh < 1 || l->kw < 1 || l->stride_h < 1 || l->stride_w < 1
                 ||  l->pad_top < 0 || l->pad_left < 0))
        return ps_error_set (err, PS_EINVAL, "layer %d (%s): bad window geometry",
                             index, l->name);
    int64_t rows_per_example = 0;
    int64_t k = 0;
    switch (l->kind) {
        case PS_LAYER_CONV2D:
            rows_per_example = (int64_t) l->out_h * l->out_w;
            k = (int64_t) l->kh * l->kw * l->in_c;
            break;
        case PS_LAYER_DENSE:
            //  The model puts a Flatten before every Dense layer, as the
            //  CPU engine assumes: one GEMM row per example.
            if (l->in_h != 1 || l->in_w != 1 || l->out_h != 1 || l->out_w != 1)
                return ps_error_set (err, PS_ESHAPE, "layer %d (%s): Dense needs a flat "
                                     "input and output", index, l->name);
            rows_per_example = 1;
            k = l->in_c;
            break;
        case PS_LAYER_MAXPOOL2D:
            if (l->out_c != l->in_c)
                return ps_error_set (err, PS_ESHAPE, "layer %d (%s): pooling changes the "
                                     "channel count", index, l->name);
            break;
        case PS_LAYER_RELU:
        case PS_LAYER_FLATTEN:
        case PS_LAYER_DROPOUT:
            if (out_floats != in_floats)
                return ps_error_set (err, PS_ESHAPE, "layer %d (%s): output size differs "
                                     "from input size", index, l->name);
            if (l->kind == PS_LAYER_DROPOUT && !(l->rate >= 0.0 && l->rate < 1.0))
                return ps_error_set (err, PS_EINVAL, "layer %d (%s): dropout rate %g outside "
                                     "[0, 1)", index, l->name, l->rate);
            break;
        default:
            return ps_error_set (err, PS_EINVAL, "layer %d (%s): unknown layer kind %d",
                                 index, l->name, (int) l->kind);
    }

    if (l->kind == PS_LAYER_CONV2D || l->kind == PS_LAYER_DENSE) {
        int64_t rows = rows_per_example * self->max_batch;
        if (rows > INT_MAX || k > INT_MAX)
            return ps_error_set (err, PS_ETOOBIG, "layer %d (%s): a batch of %d is too "
                                 "large for one GEMM", index, l->name, self->max_batch);
        layer->rows_per_example = (int) rows_per_example;
        layer->gemm_k = (int) k;
        layer->gemm_out = l->out_c;
        if (l->kernel < 0)
            return ps_error_set (err, PS_EINVAL, "layer %d (%s): has no kernel", index, l->name);
        S_TRY (s_bind_variable (self, model, index, l->kernel, k * l->out_c,
                                &layer->kernel, &layer->dkernel, err));
        if (l->bias >= 0)
            S_TRY (s_bind_variable (self, model, index, l->bias, l->out_c,
                                    &layer->bias, &layer->dbias, err));
        if ((size_t) rows > self->ones_size)
            self->ones_size = (size_t) rows;
        if (l->kind == PS_LAYER_CONV2D && (size_t) (rows * k) > self->col_size)
            self->col_size = (size_t) (rows * k);
        if (self->first_trainable == self->layer_count)
            self->first_trainable = index;
    }
    else
    if (l->kernel >= 0 || l->bias >= 0)
        return ps_error_set (err, PS_EINVAL, "layer %d (%s): only Conv2D and Dense layers "
                             "have variables", index, l->name);

    size_t batch_out = (size_t) self->max_batch * layer->out_size;
    if (l->kind != PS_LAYER_FLATTEN)
        S_TRY (s_alloc ((void **) &layer->y, batch_out * sizeof (float), false, err));
    if (l->kind == PS_LAYER_MAXPOOL2D)
        S_TRY (s_alloc ((void **) &layer->argmax, batch_out * sizeof (int32_t), false, err));
    if (layer->out_size > self->max_activation)
        self->max_activation = layer->out_size;
    return PS_OK;
}

static int
s_setup (ps_gpunet_t *self, const ps_model_t *model, int max_batch, ps_error_t *err)
{
    cudaDeviceProp prop;
    S_CUDA (cudaSetDevice (0));
    S_CUDA (cudaGetDeviceProperties (&prop, 0));
    snprintf (self->device_name, sizeof self->device_name, "%s", prop.name);

    self->max_batch = max_batch;
    self->layer_count = ps_model_layer_count (model);
    self->first_trainable = self->layer_count;
    self->classes = ps_model_classes (model);
    self->input_size = ps_model_input_size (model);
    self->param_count = ps_model_param_count (model);
    self->max_activation = self->input_size;
    self->col_layer = -1;

    size_t layers = (size_t) self->layer_count;
    self->layers = (s_layer_t *) calloc (layers + 1, sizeof (s_layer_t));
    self->acts = (const float **) calloc (layers + 1, sizeof (float *));
    self->fwd_ms = (double *) calloc (layers + 1, sizeof (double));
    self->bwd_ms = (double *) calloc (layers + 1, sizeof (double));
    if (!self->layers || !self->acts || !self->fwd_ms || !self->bwd_ms)
        return ps_error_set (err, PS_EIO, "out of host memory");

    //  One stream for everything; non-blocking, so that work other code
    //  puts on the legacy default stream never serialises with ours.
    S_CUDA (cudaStreamCreateWithFlags (&self->stream, cudaStreamNonBlocking));
    S_CUBLAS (cublasCreate (&self->blas));
    S_CUBLAS (cublasSetStream (self->blas, self->stream));
    //  True float32 GEMMs, never TF32: see the note above s_gemm_forward.
    S_CUBLAS (cublasSetMathMode (self->blas, CUBLAS_DEFAULT_MATH));
    S_CUBLAS (cublasSetPointerMode (self->blas, CUBLAS_POINTER_MODE_HOST));
    S_TRY (s_alloc (&self->d_blas_workspace, S_BLAS_WORKSPACE, false, err));
    S_CUBLAS (cublasSetWorkspace (self->blas, self->d_blas_workspace, S_BLAS_WORKSPACE));
    S_CUDA (cudaEventCreate (&self->ev_start));
    S_CUDA (cudaEventCreate (&self->ev_stop));

    //  The parameters first: the layers point into them.
    size_t param_bytes = self->param_count * sizeof (float);
    S_TRY (s_alloc ((void **) &self->d_params, param_bytes, false, err));
    S_TRY (s_alloc ((void **) &self->d_grads, param_bytes, false, err));
    size_t in_size = self->input_size;
    for (int i = 0; i < self->layer_count; i++) {
        S_TRY (s_layer_setup (self, model, i, in_size, err));
        in_size = self->layers [i].out_size;
    }
    if (in_size != (size_t) self->classes)
        return ps_error_set (err, PS_ESHAPE, "model %s: the last layer gives %zu floats per "
                             "example, not one logit per class (%d)", ps_model_name (model),
                             in_size, self->classes);

    size_t batch = (size_t) max_batch;
    size_t grad_bytes = batch * self->max_activation * sizeof (float);
    S_TRY (s_alloc ((void **) &self->d_x, batch * self->input_size * sizeof (float), false, err));
    S_TRY (s_alloc ((void **) &self->d_labels, batch, false, err));
    S_TRY (s_alloc ((void **) &self->d_col, self->col_size * sizeof (float), false, err));
    S_TRY (s_alloc ((void **) &self->d_ones, self->ones_size * sizeof (float), false, err));
    S_TRY (s_alloc ((void **) &self->d_g0, grad_bytes, false, err));
    S_TRY (s_alloc ((void **) &self->d_g1, grad_bytes, false, err));
    S_TRY (s_alloc ((void **) &self->d_stats, sizeof (s_stats_t), false, err));

    S_TRY (s_alloc ((void **) &self->h_params, param_bytes, true, err));
    S_TRY (s_alloc ((void **) &self->h_x, batch * self->input_size * sizeof (float), true, err));
    S_TRY (s_alloc ((void **) &self->h_labels, batch, true, err));
    S_TRY (s_alloc ((void **) &self->h_logits,
                    batch * (size_t) self->classes * sizeof (float), true, err));
    S_TRY (s_alloc ((void **) &self->h_stats, sizeof (s_stats_t), true, err));

    //  Parameters start at zero, so a step before the first set_params is
    //  defined (if useless) rather than a read of garbage.
    if (param_bytes > 0)
        S_CUDA (cudaMemsetAsync (self->d_params, 0, param_bytes, self->stream));
    S_LAUNCH (s_fill, self->ones_size, (int64_t) self->ones_size, 1.0f, self->d_ones);
    S_CUDA (cudaStreamSynchronize (self->stream));
    return PS_OK;
}

ps_gpunet_t *
ps_gpunet_new (const ps_model_t *model, int max_batch, ps_error_t *err)
{
    //  Without a driver or a device the count fails; both mean the same to
    //  the user: there is no GPU here.
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount (&count);
    if (rc != cudaSuccess) {
        (void) cudaGetLastError ();
        ps_error_set (err, PS_ENOTFOUND, "no CUDA device found (cudaGetDeviceCount: %s)",
                      cudaGetErrorString (rc));
        return NULL;
    }
    if (count < 1) {
        ps_error_set (err, PS_ENOTFOUND, "no CUDA device found (cudaGetDeviceCount: 0 devices)");
        return NULL;
    }
    if (!model || max_batch < 1) {
        ps_error_set (err, PS_EINVAL, "GPU engine: no model, or a largest batch of %d",
                      max_batch);
        return NULL;
    }
    ps_gpunet_t *self = (ps_gpunet_t *) calloc (1, sizeof (ps_gpunet_t));
    if (!self) {
        ps_error_set (err, PS_EIO, "out of host memory");
        return NULL;
    }
    if (s_setup (self, model, max_batch, err) != PS_OK)
        ps_gpunet_destroy (&self);
    return self;
}

void
ps_gpunet_destroy (ps_gpunet_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ps_gpunet_t *self = *self_p;
    //  Let queued work finish before its buffers go. Failures here have no
    //  one to be reported to, and freeing goes on regardless.
    if (self->stream)
        (void) cudaStreamSynchronize (self->stream);
    if (self->blas)
        (void) cublasDestroy (self->blas);
    if (self->layers)
        for (int i = 0; i < self->layer_count; i++) {
            (void) cudaFree (self->layers [i].y);
            (void) cudaFree (self->layers [i].argmax);
        }
    (void) cudaFree (self->d_blas_workspace);
    (void) cudaFree (self->d_params);
    (void) cudaFree (self->d_grads);
    (void) cudaFree (self->d_x);
    (void) cudaFree (self->d_labels);
    (void) cudaFree (self->d_col);
    (void) cudaFree (self->d_ones);
    (void) cudaFree (self->d_g0);
    (void) cudaFree (self->d_g1);
    (void) cudaFree (self->d_stats);
    if (self->h_params)
        (void) cudaFreeHost (self->h_params);
    if (self->h_x)
        (void) cudaFreeHost (self->h_x);
    if (self->h_labels)
        (void) cudaFreeHost (self->h_labels);
    if (self->h_logits)
        (void) cudaFreeHost (self->h_logits);
    if (self->h_stats)
        (void) cudaFreeHost (self->h_stats);
    if (self->ev_start)
        (void) cudaEventDestroy (self->ev_start);
    if (self->ev_stop)
        (void) cudaEventDestroy (self->ev_stop);
    if (self->stream)
        (void) cudaStreamDestroy (self->stream);
    (void) cudaGetLastError ();
    free (self->layers);
    free (self->acts);
    free (self->fwd_ms);
    free (self->bwd_ms);
    free (self);
    *self_p = NULL;
}

const char *
ps_gpunet_device_name (const ps_gpunet_t *self)
{
    return self->device_name;
}


//  --------------------------------------------------------------------------
//  Steps

int
ps_gpunet_set_params (ps_gpunet_t *self, const float *params, ps_error_t *err)
{
    size_t bytes = self->param_count * sizeof (float);
    if (bytes == 0)
        return PS_OK;
    //  A step that failed half way may have left copies from the staging
    //  buffer queued; wait for them before overwriting it.
    S_CUDA (cudaStreamSynchronize (self->stream));
    memcpy (self->h_params, params, bytes);
    S_CUDA (cudaMemcpyAsync (self->d_params, self->h_params, bytes, cudaMemcpyHostToDevice,
                             self->stream));
    S_CUDA (cudaStreamSynchronize (self->stream));
    return PS_OK;
}

//  Check the batch size and queue the batch's copy to the device.
static int
s_upload_batch (ps_gpunet_t *self, const float *x, const uint8_t *labels, int n,
                ps_error_t *err)
{
    if (n < 1 || n > self->max_batch)
        return ps_error_set (err, PS_EINVAL, "a batch of %d examples; the GPU engine takes "
                             "1 to %d", n, self->max_batch);
    size_t x_bytes = (size_t) n * self->input_size * sizeof (float);
    //  A step that failed part way may have left copies queued that still
    //  read the staging buffers; wait for them (normally a no-op).
    S_CUDA (cudaStreamSynchronize (self->stream));
    memcpy (self->h_x, x, x_bytes);
    memcpy (self->h_labels, labels, (size_t) n);
    S_CUDA (cudaMemcpyAsync (self->d_x, self->h_x, x_bytes, cudaMemcpyHostToDevice,
                             self->stream));
    S_CUDA (cudaMemcpyAsync (self->d_labels, self->h_labels, (size_t) n,
                             cudaMemcpyHostToDevice, self->stream));
    return PS_OK;
}

static void
s_stats_out (const ps_gpunet_t *self, int n, ps_batch_stats_t *stats)
{
    if (stats) {
        stats->loss_sum = self->h_stats->loss_sum;
        stats->correct = self->h_stats->correct;
        stats->count = n;
    }
}

int
ps_gpunet_train_step (ps_gpunet_t *self, const float *x, const uint8_t *labels,
                      int n, uint64_t dropout_seed, float *grads,
                      ps_batch_stats_t *stats, ps_error_t *err)
{
    size_t grad_bytes = self->param_count * sizeof (float);
    S_TRY (s_upload_batch (self, x, labels, n, err));
    //  Every variable's gradient is written by its layer each step; the
    //  clear costs microseconds and keeps a gap from ever carrying over.
    if (grad_bytes > 0)
        S_CUDA (cudaMemsetAsync (self->d_grads, 0, grad_bytes, self->stream));
    S_TRY (s_forward (self, n, true, dropout_seed, err));
    S_TRY (s_loss (self, n, true, err));
    S_TRY (s_backward (self, n, dropout_seed, err));
    if (grad_bytes > 0)
        S_CUDA (cudaMemcpyAsync (self->h_params, self->d_grads, grad_bytes,
                                 cudaMemcpyDeviceToHost, self->stream));
    S_CUDA (cudaMemcpyAsync (self->h_stats, self->d_stats, sizeof (s_stats_t),
                             cudaMemcpyDeviceToHost, self->stream));
    S_CUDA (cudaStreamSynchronize (self->stream));
    if (grad_bytes > 0)
        memcpy (grads, self->h_params, grad_bytes);
    s_stats_out (self, n, stats);
    return PS_OK;
}

int
ps_gpunet_forward (ps_gpunet_t *self, const float *x, const uint8_t *labels,
                   int n, float *logits, ps_batch_stats_t *stats, ps_error_t *err)
{
    size_t logit_bytes = (size_t) n * (size_t) self->classes * sizeof (float);
    S_TRY (s_upload_batch (self, x, labels, n, err));
    S_TRY (s_forward (self, n, false, 0, err));
    S_TRY (s_loss (self, n, false, err));
    if (logits)
        S_CUDA (cudaMemcpyAsync (self->h_logits, self->acts [self->layer_count], logit_bytes,
                                 cudaMemcpyDeviceToHost, self->stream));
    S_CUDA (cudaMemcpyAsync (self->h_stats, self->d_stats, sizeof (s_stats_t),
                             cudaMemcpyDeviceToHost, self->stream));
    S_CUDA (cudaStreamSynchronize (self->stream));
    if (logits)
        memcpy (logits, self->h_logits, logit_bytes);
    s_stats_out (self, n, stats);
    return PS_OK;
}

void
ps_gpunet_set_profiling (ps_gpunet_t *self, bool enabled)
{
    self->profiling = enabled;
}

void
ps_gpunet_profile (const ps_gpunet_t *self, double *fwd_ms, double *bwd_ms)
{
    size_t bytes = ((size_t) self->layer_count + 1) * sizeof (double);
    if (fwd_ms)
        memcpy (fwd_ms, self->fwd_ms, bytes);
    if (bwd_ms)
        memcpy (bwd_ms, self->bwd_ms, bytes);
}
