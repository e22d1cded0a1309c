//  The compute backend: one interface over the CPU engine (OpenBLAS, the
//  batch split over the process's threads) and the GPU engine (CUDA kernels
//  and cuBLAS), chosen at run time.
//
//  A backend is built once for a model and a largest batch; every buffer it
//  needs is allocated then, so a training step allocates nothing. Parameters
//  come in and gradients go out as the model's flat host vector
//  (ps_model.h): that is what a ps-server serves and takes, and what the
//  local optimizer in common/model/ps_optimizer.h updates, so the trainer does not
//  care where the arithmetic ran.
//
//  Gradients are those of the batch's mean loss. A step with the same
//  parameters, data and dropout seed gives the same result whatever the
//  thread count, up to float summation order.

#ifndef PS_BACKEND_H_INCLUDED
#define PS_BACKEND_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include "ps_error.h"
#include "ps_model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PS_DEVICE_CPU,
    PS_DEVICE_GPU,
    PS_DEVICE_AUTO,             //  the GPU when one is present, else the CPU
} ps_device_t;

//  Parse "cpu", "gpu" or "auto".
int ps_device_parse (const char *name, ps_device_t *device, ps_error_t *err);

//  Whether device can be used on this machine, checked before any work is
//  taken on: gpu needs a CUDA device (ps_gpu_probe), cpu and auto always
//  do. Returns 0, or the probe's PS_ENOTFOUND (no device or driver) or
//  PS_EINVAL (a build without CUDA) with err saying so in one line.
int ps_device_check (ps_device_t device, ps_error_t *err);

typedef struct ps_backend_t ps_backend_t;

//  Build a backend for model, for batches of up to max_batch examples, with
//  `threads` CPU threads (the CPU engine's parallelism, and OpenBLAS's: every
//  BLAS call runs on the thread that makes it). `--device gpu` without CUDA
//  in the build, or without a device, fails with a message saying which.
ps_backend_t *ps_backend_new (const ps_model_t *model, ps_device_t device,
                              int max_batch, int threads, ps_error_t *err);
void ps_backend_destroy (ps_backend_t **self_p);

//  The batch to evaluate model in on device (auto resolved as
//  ps_backend_new resolves it), at most wanted: the GPU takes wanted
//  whole, since a large batch is what hides its per-call overheads; the
//  CPU engine at most PS_BACKEND_CPU_EVAL_BATCH. Its buffers take about
//  0.27 MB an example for the seed CNN, so evaluating 500 at once held
//  65 MiB more than the training batch needs, where 128 examples already
//  make its GEMMs large. Size the backend's max_batch with it.
#define PS_BACKEND_CPU_EVAL_BATCH  128
int ps_backend_eval_batch (const ps_model_t *model, ps_device_t device, int wanted);

//  "cpu (OpenBLAS, 2 threads)" or "gpu (NVIDIA H100 80GB HBM3)".
const char *ps_backend_describe (const ps_backend_t *self);
ps_device_t ps_backend_device (const ps_backend_t *self);

//  Load the flat parameter vector (ps_model_param_count floats); steps
//  refuse to run before it. The CPU engine reads the vector in place, so
//  the caller keeps it alive and changes it only between steps (updating
//  it and calling this again, as a trainer does); the GPU copies it.
int ps_backend_set_params (ps_backend_t *self, const float *params, ps_error_t *err);

//  The outcome of a batch: summed loss and correct predictions. For a
//  regression model the loss is the squared error (each example's mean
//  over its outputs, so loss_sum / count is Keras's mse), abs_sum the
//  same of the absolute error (abs_sum / count is the mae) and correct 0;
//  a classifier's abs_sum is 0.
typedef struct {
    double loss_sum;
    int correct;
    int count;
    double abs_sum;
} ps_batch_stats_t;

//  One training step on n <= max_batch examples: x holds n inputs of
//  ps_model_input_size floats, labels n labels of ps_model_label_size
//  bytes: a class index (each < classes, or PS_EINVAL) or a regression
//  model's k float32 targets (each finite, or PS_EINVAL). Dropout is
//  active and seeded by dropout_seed. Writes the gradient of the mean loss
//  into grads (ps_model_param_count floats) and the batch's stats into
//  *stats.
int ps_backend_train_step (ps_backend_t *self, const float *x, const uint8_t *labels,
                           int n, uint64_t dropout_seed, float *grads,
                           ps_batch_stats_t *stats, ps_error_t *err);

//  Forward pass without dropout on n <= max_batch examples (labels as for
//  ps_backend_train_step): loss and accuracy (or a regression model's
//  errors) into *stats and, unless logits is NULL, the logits [n, classes]
//  (a regression model's outputs).
int ps_backend_forward (ps_backend_t *self, const float *x, const uint8_t *labels,
                        int n, float *logits, ps_batch_stats_t *stats, ps_error_t *err);

//  Per-layer timing. While enabled, each step adds the wall time of every
//  layer's forward and backward pass (on the GPU, with a synchronise per
//  layer; on the CPU, as seen by the first thread) to the totals, which
//  ps_backend_profile reads in ms, layer by layer, with the loss as one
//  extra entry at the end (fwd_ms and bwd_ms hold layer_count + 1 values).
void ps_backend_set_profiling (ps_backend_t *self, bool enabled);
void ps_backend_profile (const ps_backend_t *self, double *fwd_ms, double *bwd_ms);

#ifdef __cplusplus
}
#endif

#endif
