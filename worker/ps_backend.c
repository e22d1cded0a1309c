//  The compute backend: checks the arguments once, then hands each call to
//  the CPU engine (ps_cpunet.c) or the GPU engine (ps_gpunet.cu). See
//  ps_backend.h.

#include "ps_backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_cpunet.h"
#include "ps_gpu.h"
#include "ps_gpunet.h"

struct ps_backend_t {
    const ps_model_t *model;
    int max_batch;
    ps_device_t device;         //  CPU or GPU, never AUTO
    bool has_params;
    ps_cpunet_t *cpu;
    ps_gpunet_t *gpu;
    char description [320];
};

int
ps_device_parse (const char *name, ps_device_t *device, ps_error_t *err)
{
    if (strcmp (name, "cpu") == 0)
        *device = PS_DEVICE_CPU;
    else
    if (strcmp (name, "gpu") == 0)
        *device = PS_DEVICE_GPU;
    else
    if (strcmp (name, "auto") == 0)
        *device = PS_DEVICE_AUTO;
    else
        return ps_error_set (err, PS_EINVAL, "unknown device \"%s\" (cpu, gpu or auto)", name);
    return 0;
}

int
ps_device_check (ps_device_t device, ps_error_t *err)
{
    if (device != PS_DEVICE_GPU)
        return 0;
    ps_gpu_info_t info;
    int rc = ps_gpu_probe (&info, err);
    if (rc == 0 && info.count < 1)
        rc = ps_error_set (err, PS_ENOTFOUND, "no CUDA device was found");
    return rc ? ps_error_prefix (err, rc, "--device gpu: no usable GPU") : 0;
}

//  The device auto means for model: the GPU when one is usable and the
//  model runs there.
static ps_device_t
s_resolve (const ps_model_t *model, ps_device_t device)
{
    if (device != PS_DEVICE_AUTO)
        return device;
    ps_gpu_info_t info;
    return !ps_model_cpu_only (model) && ps_gpu_probe (&info, NULL) == 0 && info.count > 0
         ? PS_DEVICE_GPU : PS_DEVICE_CPU;
}

int
ps_backend_eval_batch (const ps_model_t *model, ps_device_t device, int wanted)
{
    if (s_resolve (model, device) == PS_DEVICE_GPU || wanted <= PS_BACKEND_CPU_EVAL_BATCH)
        return wanted;
    return PS_BACKEND_CPU_EVAL_BATCH;
}

ps_backend_t *
ps_backend_new (const ps_model_t *model, ps_device_t device, int max_batch, int threads,
                ps_error_t *err)
{
    if (max_batch < 1) {
        ps_error_set (err, PS_EINVAL, "backend: the batch size must be positive, not %d",
                      max_batch);
        return NULL;
    }
    if (ps_model_check_batch (model, max_batch, err))
        return NULL;
    ps_backend_t *self = calloc (1, sizeof *self);
    if (!self) {
        ps_error_set (err, PS_ETOOBIG, "backend: out of memory");
        return NULL;
    }
    self->model = model;
    self->max_batch = max_batch;
    //  The GPU engine has kernels for softmax cross-entropy and the
    //  original layers only, so other models run on the CPU: chosen by
    //  auto, refused by gpu.
    const char *cpu_only = ps_model_cpu_only (model);
    if (device == PS_DEVICE_GPU && cpu_only) {
        ps_error_set (err, PS_EINVAL, "backend: model \"%s\" is %s, which runs on the CPU "
                      "only; use --device cpu or auto", ps_model_name (model), cpu_only);
        free (self);
        return NULL;
    }
    device = s_resolve (model, device);
    self->device = device;
    if (device == PS_DEVICE_GPU) {
        self->gpu = ps_gpunet_new (model, max_batch, err);
        if (!self->gpu)
            goto fail;
        snprintf (self->description, sizeof self->description, "gpu (%s)",
                  ps_gpunet_device_name (self->gpu));
    }
    else {
        self->cpu = ps_cpunet_new (model, max_batch, threads, err);
        if (!self->cpu)
            goto fail;
        snprintf (self->description, sizeof self->description, "cpu (OpenBLAS, %d thread%s)",
                  threads, threads == 1 ? "" : "s");
    }
    return self;
fail:
    free (self);
    return NULL;
}

void
ps_backend_destroy (ps_backend_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ps_backend_t *self = *self_p;
    ps_cpunet_destroy (&self->cpu);
    ps_gpunet_destroy (&self->gpu);
    free (self);
    *self_p = NULL;
}

const char *
ps_backend_describe (const ps_backend_t *self)
{
    return self->description;
}

ps_device_t
ps_backend_device (const ps_backend_t *self)
{
    return self->device;
}

int
ps_backend_set_params (ps_backend_t *self, const float *params, ps_error_t *err)
{
    if (self->gpu) {
        int rc = ps_gpunet_set_params (self->gpu, params, err);
        self->has_params = rc == 0;
        return rc;
    }
    ps_cpunet_set_params (self->cpu, params);
    self->has_params = true;
    return 0;
}

//  Refuse a batch the buffers were not sized for, or a label the model has
//  no logit for.
static int
s_check_batch (const ps_backend_t *self, const uint8_t *labels, int n, ps_error_t *err)
{
    if (!self->has_params)
        return ps_error_set (err, PS_EINVAL, "backend: no parameters loaded yet "
                             "(ps_backend_set_params)");
    if (n < 1 || n > self->max_batch)
        return ps_error_set (err, PS_EINVAL, "backend: a batch of %d examples, but this "
                             "backend takes 1 to %d", n, self->max_batch);
    int targets = ps_model_targets (self->model);
    for (int i = 0; targets && i < n; i++)
        for (int j = 0; j < targets; j++) {
            float t;
            memcpy (&t, labels + ((size_t) i * targets + j) * sizeof t, sizeof t);
            if (!isfinite (t))
                return ps_error_set (err, PS_EINVAL, "backend: target %d of example %d is "
                                     "%g, not a finite number", j, i, (double) t);
        }
    if (targets)
        return 0;
    int classes = ps_model_label_classes (self->model);
    for (int i = 0; i < n; i++)
        if (labels [i] >= classes)
            return ps_error_set (err, PS_EINVAL, "backend: label %d of example %d is not "
                                 "below the model's %d classes", labels [i], i, classes);
    return 0;
}

int
ps_backend_train_step (ps_backend_t *self, const float *x, const uint8_t *labels,
                       int n, uint64_t dropout_seed, float *grads,
                       ps_batch_stats_t *stats, ps_error_t *err)
{
    int rc = s_check_batch (self, labels, n, err);
    if (rc)
        return rc;
    if (self->gpu)
        return ps_gpunet_train_step (self->gpu, x, labels, n, dropout_seed, grads, stats, err);
    ps_cpunet_train_step (self->cpu, x, labels, n, dropout_seed, grads, stats);
    return 0;
}

int
ps_backend_forward (ps_backend_t *self, const float *x, const uint8_t *labels,
                    int n, float *logits, ps_batch_stats_t *stats, ps_error_t *err)
{
    int rc = s_check_batch (self, labels, n, err);
    if (rc)
        return rc;
    if (self->gpu)
        return ps_gpunet_forward (self->gpu, x, labels, n, logits, stats, err);
    ps_cpunet_forward (self->cpu, x, labels, n, logits, stats);
    return 0;
}

void
ps_backend_set_profiling (ps_backend_t *self, bool enabled)
{
    if (self->gpu)
        ps_gpunet_set_profiling (self->gpu, enabled);
    else
        ps_cpunet_set_profiling (self->cpu, enabled);
}

void
ps_backend_profile (const ps_backend_t *self, double *fwd_ms, double *bwd_ms)
{
    if (self->gpu)
        ps_gpunet_profile (self->gpu, fwd_ms, bwd_ms);
    else
        ps_cpunet_profile (self->cpu, fwd_ms, bwd_ms);
}
