//  The GPU engine's arithmetic: the CUDA kernels of the layers (im2col and
//  col2im, bias and ReLU, max pooling, dropout, the softmax cross-entropy)
//  and the cuBLAS products. The engine (ps_gpunet.cu) owns the buffers and
//  the stream, and launches these in order; nothing here allocates or waits.
//  For the files nvcc compiles only.
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

#ifndef PS_GPUKERN_CUH_INCLUDED
#define PS_GPUKERN_CUH_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "ps_error.h"

//  The stats of a batch as the loss kernel leaves them on the device.
typedef struct {
    double loss_sum;
    int correct;
} ps_gpukern_stats_t;

//  The geometry a kernel needs, passed by value: a small copy of the
//  layer's integers (the layer itself carries a name we do not want to ship
//  with every launch).
typedef struct {
    int in_h, in_w, in_c;
    int out_h, out_w, out_c;
    int kh, kw;
    int stride_h, stride_w;
    int pad_top, pad_left;
} ps_gpukern_geom_t;

//  The kernels, launched with a grid stride over count elements
//  (PS_LAUNCH in ps_gpucall.cuh); ps_gpukern.cu says what each computes.
__global__ void ps_gpukern_fill (int64_t count, float value, float *out);
__global__ void ps_gpukern_im2col (int64_t count, ps_gpukern_geom_t g, const float *x,
                                   float *col);
__global__ void ps_gpukern_col2im (int64_t count, ps_gpukern_geom_t g, const float *dcol,
                                   float *dx);
__global__ void ps_gpukern_bias_relu (int64_t count, int cols, const float *bias, int relu,
                                      float *y);
__global__ void ps_gpukern_relu_forward (int64_t count, const float *x, float *y);
__global__ void ps_gpukern_relu_backward (int64_t count, const float *y, const float *dy,
                                          float *dx);
__global__ void ps_gpukern_maxpool_forward (int64_t count, ps_gpukern_geom_t g, const float *x,
                                            float *y, int32_t *argmax);
__global__ void ps_gpukern_maxpool_backward (int64_t count, ps_gpukern_geom_t g,
                                             const int32_t *argmax, const float *dy, float *dx);
__global__ void ps_gpukern_dropout (int64_t count, int64_t size, uint64_t seed,
                                    uint32_t threshold, float scale, const float *x, float *y);
__global__ void ps_gpukern_softmax_xent (int n, int classes, const float *logits,
                                         const uint8_t *labels, float scale, float *dlogits,
                                         ps_gpukern_stats_t *stats);

//  The products, on the stream the handle is bound to; each returns 0 or
//  PS_EIO naming the cuBLAS call. Row-major matrices throughout.
int ps_gpukern_gemm_forward (cublasHandle_t blas, int rows, int k, int out, const float *x,
                             const float *w, float *y, ps_error_t *err);
int ps_gpukern_gemm_dweights (cublasHandle_t blas, int rows, int k, int out, const float *x,
                              const float *dy, float *dw, ps_error_t *err);
int ps_gpukern_gemm_dinput (cublasHandle_t blas, int rows, int k, int out, const float *dy,
                            const float *w, float *dx, ps_error_t *err);
int ps_gpukern_gemv_dbias (cublasHandle_t blas, int rows, int out, const float *dy,
                           const float *ones, float *dbias, ps_error_t *err);

#endif
