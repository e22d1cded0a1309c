//  The CPU engine behind ps_backend.h. It splits each batch over its
//  threads (the caller plus threads - 1 workers started once): every thread
//  runs the whole network on its slice with the single-threaded kernels of
//  ps_cpu_ops.h into buffers of its own, then the threads sum their
//  gradient slices in parallel. OpenBLAS is set to one thread, so each
//  GEMM runs on the thread that calls it and the process uses exactly
//  `threads` cores; letting OpenBLAS start threads of its own next to ours
//  halved throughput in the peers' measurements.

#ifndef PS_CPUNET_H_INCLUDED
#define PS_CPUNET_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include "ps_backend.h"
#include "ps_error.h"
#include "ps_model.h"

typedef struct ps_cpunet_t ps_cpunet_t;

ps_cpunet_t *ps_cpunet_new (const ps_model_t *model, int max_batch, int threads, ps_error_t *err);
void ps_cpunet_destroy (ps_cpunet_t **self_p);

int ps_cpunet_threads (const ps_cpunet_t *self);

//  The contracts of ps_backend_set_params, ps_backend_train_step and
//  ps_backend_forward (labels were already checked by the caller). The
//  engine reads the parameter vector in place: copying 1.4 MB a step cost
//  7% of a CNN step on two threads.
void ps_cpunet_set_params (ps_cpunet_t *self, const float *params);
void ps_cpunet_train_step (ps_cpunet_t *self, const float *x, const uint8_t *labels,
                           int n, uint64_t dropout_seed, float *grads, ps_batch_stats_t *stats);
void ps_cpunet_forward (ps_cpunet_t *self, const float *x, const uint8_t *labels,
                        int n, float *logits, ps_batch_stats_t *stats);

void ps_cpunet_set_profiling (ps_cpunet_t *self, bool enabled);
void ps_cpunet_profile (const ps_cpunet_t *self, double *fwd_ms, double *bwd_ms);

#endif
