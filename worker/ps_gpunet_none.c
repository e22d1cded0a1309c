//  The GPU engine of a build without CUDA: every call fails, saying so.
//  See ps_gpunet.h.

#include "ps_gpunet.h"

#include <stddef.h>

ps_gpunet_t *
ps_gpunet_new (const ps_model_t *model, int max_batch, ps_error_t *err)
{
    (void) model;
    (void) max_batch;
    ps_error_set (err, PS_EINVAL, "this ps-worker was built without CUDA; "
                  "rebuild with the CUDA toolkit installed, or use --device cpu");
    return NULL;
}

void
ps_gpunet_destroy (ps_gpunet_t **self_p)
{
    if (self_p)
        *self_p = NULL;
}

const char *
ps_gpunet_device_name (const ps_gpunet_t *self)
{
    (void) self;
    return "none";
}

int
ps_gpunet_set_params (ps_gpunet_t *self, const float *params, ps_error_t *err)
{
    (void) self;
    (void) params;
    return ps_error_set (err, PS_EINVAL, "this ps-worker was built without CUDA");
}

int
ps_gpunet_train_step (ps_gpunet_t *self, const float *x, const uint8_t *labels,
                      int n, uint64_t dropout_seed, float *grads,
                      ps_batch_stats_t *stats, ps_error_t *err)
{
    (void) self, (void) x, (void) labels, (void) n, (void) dropout_seed;
    (void) grads, (void) stats;
    return ps_error_set (err, PS_EINVAL, "this ps-worker was built without CUDA");
}

int
ps_gpunet_forward (ps_gpunet_t *self, const float *x, const uint8_t *labels,
                   int n, float *logits, ps_batch_stats_t *stats, ps_error_t *err)
{
    (void) self, (void) x, (void) labels, (void) n, (void) logits, (void) stats;
    return ps_error_set (err, PS_EINVAL, "this ps-worker was built without CUDA");
}

void
ps_gpunet_set_profiling (ps_gpunet_t *self, bool enabled)
{
    (void) self;
    (void) enabled;
}

void
ps_gpunet_profile (const ps_gpunet_t *self, double *fwd_ms, double *bwd_ms)
{
    (void) self;
    (void) fwd_ms;
    (void) bwd_ms;
}
