//  CPU kernels: the forward and backward pass of each layer kind, on
//  float32 NHWC activations, single-threaded. The CPU engine (ps_cpunet.h)
//  runs them on its threads, each thread on its own slice of the batch, so
//  every GEMM here calls OpenBLAS with the caller's thread only.
//
//  Geometry comes from the resolved layer (ps_model.h); n is the number of
//  examples in this call. Convolutions are im2col + GEMM: the column matrix
//  `col` holds n * out_h * out_w rows of kh * kw * in_c values, ordered
//  (ky, kx, c) to match the Keras kernel [kh, kw, in, out] read as a
//  [kh * kw * in, out] matrix, so the GEMM writes NHWC output directly.
//
//  Backward passes take dy and may overwrite it (a fused ReLU masks it in
//  place); parameter gradients are written, not accumulated. dx may be NULL
//  when the layer is the first one, which saves the largest GEMM of the
//  first convolution.

#ifndef PS_CPU_OPS_H_INCLUDED
#define PS_CPU_OPS_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_model.h"

//  Floats of the im2col buffer a convolution needs for n examples.
size_t ps_cpu_conv2d_col_size (const ps_layer_t *l, int n);

//  y = act (conv (x, kernel) + bias).
void ps_cpu_conv2d_forward (const ps_layer_t *l, int n, const float *x,
                            const float *kernel, const float *bias, float *y, float *col);

//  Given y from the forward pass and dy: dkernel, dbias and, unless NULL, dx.
//  col must hold the im2col of x from the forward pass (it is rebuilt only
//  when `col_valid` is 0); it is overwritten with the column gradient when
//  dx is wanted.
void ps_cpu_conv2d_backward (const ps_layer_t *l, int n, const float *x, const float *y,
                             const float *kernel, float *dy, float *dx,
                             float *dkernel, float *dbias, float *col, int col_valid);

//  y [n, out] = act (x [n, in] kernel [in, out] + bias).
void ps_cpu_dense_forward (const ps_layer_t *l, int n, const float *x,
                           const float *kernel, const float *bias, float *y);
void ps_cpu_dense_backward (const ps_layer_t *l, int n, const float *x, const float *y,
                            const float *kernel, float *dy, float *dx,
                            float *dkernel, float *dbias);

//  Max pooling; argmax receives, per output element, the index within the
//  example's input of the maximum (the first one on ties), for the backward
//  pass. Padded positions never win.
void ps_cpu_maxpool_forward (const ps_layer_t *l, int n, const float *x, float *y,
                             int32_t *argmax);
void ps_cpu_maxpool_backward (const ps_layer_t *l, int n, const int32_t *argmax,
                              const float *dy, float *dx);

//  y = max (x, 0) over count floats; dx = dy where y > 0, else 0 (dx may be dy).
void ps_cpu_relu_forward (size_t count, const float *x, float *y);
void ps_cpu_relu_backward (size_t count, const float *y, const float *dy, float *dx);

//  Inverted dropout over n examples of `size` floats; example k of this call
//  is example first + k of the batch (ps_dropout.h). dx = dy where kept,
//  scaled like the forward pass.
void ps_cpu_dropout_forward (const ps_layer_t *l, int n, size_t size, uint64_t seed,
                             int first, const float *x, float *y);
void ps_cpu_dropout_backward (const ps_layer_t *l, int n, size_t size, uint64_t seed,
                              int first, const float *dy, float *dx);

//  Activation `act` (ps_model.h) on count values, which are positions of
//  `channels` values each (softmax normalises each position's channels).
//  y may be x.
void ps_cpu_activation_forward (ps_activation_t act, size_t count, int channels,
                                const float *x, float *y);

//  Its backward pass: dx from dy, the forward pass's input x and output y.
//  dx may be dy (in place, as the engine calls it).
void ps_cpu_activation_backward (ps_activation_t act, size_t count, int channels,
                                 const float *x, const float *y, const float *dy, float *dx);

//  AveragePooling2D on n NHWC examples: each output is the mean of its
//  window's positions inside the input (padding does not count, as in
//  Keras). The backward pass writes all of dx.
void ps_cpu_avgpool_forward (const ps_layer_t *l, int n, const float *x, float *y);
void ps_cpu_avgpool_backward (const ps_layer_t *l, int n, const float *dy, float *dx);

//  GlobalAveragePooling2D: [h, w, c] to the per-channel means [c].
void ps_cpu_gap_forward (const ps_layer_t *l, int n, const float *x, float *y);
void ps_cpu_gap_backward (const ps_layer_t *l, int n, const float *dy, float *dx);

//  Softmax cross-entropy on logits [n, classes] with integer labels.
//  Returns the summed loss (natural log) over the n examples, adds the
//  number of correct argmax predictions to *correct and, unless dlogits is
//  NULL, writes dlogits = (softmax - onehot) * scale (scale = 1 / batch,
//  so the gradient is that of the batch mean). Labels out of range are the
//  caller's to refuse.
double ps_cpu_softmax_xent (int n, int classes, const float *logits, const uint8_t *labels,
                            float scale, float *dlogits, int *correct);

//  Sigmoid cross-entropy on one logit z per example with labels y in
//  {0, 1} (a binary classifier): the loss is log (1 + e^z) - y z, summed
//  over the n examples and returned; a prediction is class 1 when z > 0
//  (p > 0.5), and the correct ones are added to *correct. Unless dlogits
//  is NULL, writes dlogits = (sigmoid (z) - y) * scale.
double ps_cpu_sigmoid_xent (int n, const float *logits, const uint8_t *labels, float scale,
                            float *dlogits, int *correct);

//  Mean squared error (a regression model, Keras's mse) of n examples of
//  k outputs y against k float32 targets t each, which `targets` holds as
//  bytes (the label buffers are bytes; read with memcpy): an example's
//  loss is the mean over its outputs of (y - t)^2, summed over the n
//  examples and returned; the same mean of |y - t| is summed into
//  *abs_sum. Unless dlogits is NULL, writes dlogits = 2 (y - t) / k * scale.
double ps_cpu_mse (int n, int k, const float *outputs, const uint8_t *targets, float scale,
                   float *dlogits, double *abs_sum);

#endif
