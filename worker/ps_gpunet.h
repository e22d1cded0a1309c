//  The GPU engine behind ps_backend.h: the model's forward and backward
//  passes as CUDA kernels (im2col/col2im, bias, activations, pooling,
//  dropout, the loss) with every GEMM through cuBLAS.
//
//  Everything is allocated once in ps_gpunet_new: device buffers for the
//  parameters, gradients, every layer's activations and the im2col
//  workspace, pinned host staging buffers, one stream and one cuBLAS
//  handle bound to it. A step copies the batch in through pinned memory,
//  runs on the stream, and copies the gradient out; nothing is allocated.
//  Every CUDA and cuBLAS call is checked and a failure names the call.
//
//  The arithmetic matches the CPU kernels (ps_cpu_ops.h) operation for
//  operation, the dropout mask included (ps_dropout.h), so the two agree
//  to float rounding; tests/test_gpu_backend.c holds them to it.
//
//  ps_gpunet.cu (with its kernels in ps_gpukern.cu and its call checks in
//  ps_gpucall.cu) implements it in the module ps-gpu.so, built when meson
//  finds CUDA. Programs call ps_gpuload.c's forwarders, which load the
//  module on first use (see ps_gpu_plugin.h); without it, ps_gpunet_new
//  fails saying why, and there is no engine to call the rest on.

#ifndef PS_GPUNET_H_INCLUDED
#define PS_GPUNET_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include "ps_backend.h"
#include "ps_error.h"
#include "ps_model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_gpunet_t ps_gpunet_t;

//  NULL with a message when the build has no CUDA (PS_EINVAL), no device
//  is present (PS_ENOTFOUND), or a CUDA call fails.
ps_gpunet_t *ps_gpunet_new (const ps_model_t *model, int max_batch, ps_error_t *err);
void ps_gpunet_destroy (ps_gpunet_t **self_p);

//  The device's name, as CUDA reports it.
const char *ps_gpunet_device_name (const ps_gpunet_t *self);

//  The same contracts as ps_backend_set_params, ps_backend_train_step and
//  ps_backend_forward (labels were already checked by the caller).
int ps_gpunet_set_params (ps_gpunet_t *self, const float *params, ps_error_t *err);
int ps_gpunet_train_step (ps_gpunet_t *self, const float *x, const uint8_t *labels,
                          int n, uint64_t dropout_seed, float *grads,
                          ps_batch_stats_t *stats, ps_error_t *err);
int ps_gpunet_forward (ps_gpunet_t *self, const float *x, const uint8_t *labels,
                       int n, float *logits, ps_batch_stats_t *stats, ps_error_t *err);

void ps_gpunet_set_profiling (ps_gpunet_t *self, bool enabled);
void ps_gpunet_profile (const ps_gpunet_t *self, double *fwd_ms, double *bwd_ms);

#ifdef __cplusplus
}
#endif

#endif
