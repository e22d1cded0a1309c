//  The contract between ps-worker and its GPU backend, ps-gpu.so.
//
//  The GPU engine (ps_gpu.cu, ps_gpunet.cu and their kernels) links
//  cudart and cuBLAS, whose libraries are large: loading them costs a
//  process about 150 MiB of resident memory and a slower start even when
//  it never touches a GPU. So the engine is built as a module of its own,
//  and ps-worker loads it (ps_gpuload.c) only when the GPU is asked for
//  or probed on a machine that has an NVIDIA driver. The module exports
//  one symbol, PS_GPU_PLUGIN_SYMBOL, a table of the functions of ps_gpu.h
//  and ps_gpunet.h; everything else in it is hidden. The table starts
//  with its ABI version and size, which the loader checks, so that a
//  module from another build is refused with a message rather than
//  called through a table of another shape.

#ifndef PS_GPU_PLUGIN_H_INCLUDED
#define PS_GPU_PLUGIN_H_INCLUDED

#include <stddef.h>

#include "ps_gpu.h"
#include "ps_gpunet.h"

#ifdef __cplusplus
extern "C" {
#endif

//  Raised whenever a function's signature changes or one is added.
#define PS_GPU_PLUGIN_ABI     1
#define PS_GPU_PLUGIN_SYMBOL  "ps_gpu_plugin"
//  The module's file name, looked for as ps_gpuload.c says.
#define PS_GPU_PLUGIN_FILE    "ps-gpu.so"

typedef struct {
    int abi;                    //  PS_GPU_PLUGIN_ABI
    size_t size;                //  sizeof (ps_gpu_plugin_t)
    int (*probe) (ps_gpu_info_t *info, ps_error_t *err);
    int (*roundtrip) (const float *data, size_t n, ps_error_t *err);
    ps_gpunet_t *(*net_new) (const ps_model_t *model, int max_batch, ps_error_t *err);
    void (*net_destroy) (ps_gpunet_t **self_p);
    const char *(*net_device_name) (const ps_gpunet_t *self);
    int (*net_set_params) (ps_gpunet_t *self, const float *params, ps_error_t *err);
    int (*net_train_step) (ps_gpunet_t *self, const float *x, const uint8_t *labels, int n,
                           uint64_t dropout_seed, float *grads, ps_batch_stats_t *stats,
                           ps_error_t *err);
    int (*net_forward) (ps_gpunet_t *self, const float *x, const uint8_t *labels, int n,
                        float *logits, ps_batch_stats_t *stats, ps_error_t *err);
    void (*net_set_profiling) (ps_gpunet_t *self, bool enabled);
    void (*net_profile) (const ps_gpunet_t *self, double *fwd_ms, double *bwd_ms);
} ps_gpu_plugin_t;

#ifdef __cplusplus
}
#endif

#endif
