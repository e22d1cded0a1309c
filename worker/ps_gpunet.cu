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
//  The arithmetic (the kernels and the cuBLAS products) is in
//  ps_gpukern.cu, and the checks of every CUDA and cuBLAS call in
//  ps_gpucall.cu; this file is the engine that owns the buffers and runs
//  the layers over them.

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_backend.h"
#include "ps_dropout.h"
#include "ps_error.h"
#include "ps_gpucall.cuh"
#include "ps_gpukern.cuh"
#include "ps_gpunet.h"
#include "ps_model.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  The workspace cuBLAS is given up front, so that it never allocates on
//  its own during a step; 32 MiB is NVIDIA's recommendation for Hopper and
//  is plenty for earlier parts.
#define S_BLAS_WORKSPACE  ((size_t) 32 << 20)

//  One layer as the engine runs it.
typedef struct {
    ps_layer_t def;             //  the model's layer, copied
    ps_gpukern_geom_t geom;
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
    ps_gpukern_stats_t *d_stats;
    void *d_blas_workspace;

    float *h_params;            //  pinned: parameters in, gradients out
    float *h_x;                 //  pinned: the batch's inputs
    uint8_t *h_labels;          //  pinned: the batch's labels
    float *h_logits;            //  pinned: logits out
    ps_gpukern_stats_t *h_stats; //  pinned: stats out

    bool profiling;
    double *fwd_ms;             //  layer_count + 1, the loss last
    double *bwd_ms;
};


//  --------------------------------------------------------------------------
//  The passes

static int
s_profile_begin (ps_gpunet_t *self, ps_error_t *err)
{
    if (self->profiling)
        PS_CUDA (cudaEventRecord (self->ev_start, self->stream));
    return PS_OK;
}

//  Add the time since s_profile_begin to *total; this waits for the layer.
static int
s_profile_end (ps_gpunet_t *self, double *total, ps_error_t *err)
{
    if (self->profiling) {
        float ms = 0.0f;
        PS_CUDA (cudaEventRecord (self->ev_stop, self->stream));
        PS_CUDA (cudaEventSynchronize (self->ev_stop));
        PS_CUDA (cudaEventElapsedTime (&ms, self->ev_start, self->ev_stop));
        *total += ms;
    }
    return PS_OK;
}

static int
s_im2col_launch (ps_gpunet_t *self, int index, int n, ps_error_t *err)
{
    s_layer_t *layer = &self->layers [index];
    int64_t rows = (int64_t) n * layer->rows_per_example;
    PS_LAUNCH (ps_gpukern_im2col, rows * layer->gemm_k, rows * layer->gemm_k, layer->geom,
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
            PS_TRY (s_im2col_launch (self, index, n, err));
            PS_TRY (ps_gpukern_gemm_forward (self->blas, rows, layer->gemm_k, layer->gemm_out,
                                             self->d_col, layer->kernel, layer->y, err));
            if (layer->bias || l->relu)
                PS_LAUNCH (ps_gpukern_bias_relu, out_count, out_count, layer->gemm_out, layer->bias,
                           (int) l->relu, layer->y);
            self->acts [index + 1] = layer->y;
            break;
        case PS_LAYER_DENSE:
            PS_TRY (ps_gpukern_gemm_forward (self->blas, rows, layer->gemm_k, layer->gemm_out, x,
                                             layer->kernel, layer->y, err));
            if (layer->bias || l->relu)
                PS_LAUNCH (ps_gpukern_bias_relu, out_count, out_count, layer->gemm_out, layer->bias,
                           (int) l->relu, layer->y);
            self->acts [index + 1] = layer->y;
            break;
        case PS_LAYER_MAXPOOL2D:
            PS_LAUNCH (ps_gpukern_maxpool_forward, out_count, out_count, layer->geom, x, layer->y,
                       layer->argmax);
            self->acts [index + 1] = layer->y;
            break;
        case PS_LAYER_RELU:
            PS_LAUNCH (ps_gpukern_relu_forward, out_count, out_count, x, layer->y);
            self->acts [index + 1] = layer->y;
            break;
        case PS_LAYER_FLATTEN:
            //  NHWC per example is already the flat order.
            self->acts [index + 1] = x;
            break;
        case PS_LAYER_DROPOUT:
            if (training) {
                float scale = (float) (1.0 / (1.0 - l->rate));
                PS_LAUNCH (ps_gpukern_dropout, out_count, out_count, (int64_t) layer->out_size,
                           seed, ps_dropout_threshold (l->rate), scale, x, layer->y);
                self->acts [index + 1] = layer->y;
            }
            else
                self->acts [index + 1] = x;
            break;
        case PS_LAYER_EMBEDDING:
        case PS_LAYER_CONCATENATE:
            //  Click-through-rate layers never reach this engine:
            //  ps_model_check_batch refuses their models.
            break;
        case PS_LAYER_ACTIVATION:
        case PS_LAYER_AVGPOOL2D:
        case PS_LAYER_GLOBALAVGPOOL2D:
            //  Nor do the CPU engine's own layers: ps_backend_new and the
            //  layer check here refuse their models (ps_model_cpu_only).
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
        PS_TRY (s_profile_begin (self, err));
        PS_TRY (s_forward_layer (self, i, n, training, seed, err));
        PS_TRY (s_profile_end (self, &self->fwd_ms [i], err));
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
    PS_TRY (s_profile_begin (self, err));
    ps_gpukern_softmax_xent <<<1, PS_GPU_THREADS, 0, self->stream>>> (
        n, self->classes, self->acts [self->layer_count], self->d_labels,
        1.0f / (float) n, dlogits ? self->d_g0 : NULL, self->d_stats);
    cudaError_t rc = cudaGetLastError ();
    if (rc != cudaSuccess)
        return ps_error_set (err, PS_EIO, "launching ps_gpukern_softmax_xent: %s",
                             cudaGetErrorString (rc));
    double *total = dlogits ? self->bwd_ms : self->fwd_ms;
    PS_TRY (s_profile_end (self, &total [self->layer_count], err));
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
                PS_LAUNCH (ps_gpukern_relu_backward, out_count, out_count, layer->y, *dy, *dy);
            //  The workspace holds the im2col of the last convolution run
            //  forward; any other convolution rebuilds its own.
            if (self->col_layer != index)
                PS_TRY (s_im2col_launch (self, index, n, err));
            PS_TRY (ps_gpukern_gemm_dweights (self->blas, rows, layer->gemm_k, layer->gemm_out,
                                              self->d_col, *dy, layer->dkernel, err));
            if (layer->dbias)
                PS_TRY (ps_gpukern_gemv_dbias (self->blas, rows, layer->gemm_out, *dy, self->d_ones,
                                               layer->dbias, err));
            if (need_dx) {
                PS_TRY (ps_gpukern_gemm_dinput (self->blas, rows, layer->gemm_k, layer->gemm_out,
                                                *dy, layer->kernel, self->d_col, err));
                self->col_layer = -1;
                PS_LAUNCH (ps_gpukern_col2im, in_count, in_count, layer->geom, self->d_col, *spare);
                tmp = *dy, *dy = *spare, *spare = tmp;
            }
            break;
        case PS_LAYER_DENSE:
            if (l->relu)
                PS_LAUNCH (ps_gpukern_relu_backward, out_count, out_count, layer->y, *dy, *dy);
            PS_TRY (ps_gpukern_gemm_dweights (self->blas, rows, layer->gemm_k, layer->gemm_out,
                                              self->acts [index], *dy, layer->dkernel, err));
            if (layer->dbias)
                PS_TRY (ps_gpukern_gemv_dbias (self->blas, rows, layer->gemm_out, *dy, self->d_ones,
                                               layer->dbias, err));
            if (need_dx) {
                PS_TRY (ps_gpukern_gemm_dinput (self->blas, rows, layer->gemm_k, layer->gemm_out,
                                                *dy, layer->kernel, *spare, err));
                tmp = *dy, *dy = *spare, *spare = tmp;
            }
            break;
        case PS_LAYER_MAXPOOL2D:
            if (need_dx) {
                PS_LAUNCH (ps_gpukern_maxpool_backward, in_count, in_count, layer->geom,
                           layer->argmax, *dy, *spare);
                tmp = *dy, *dy = *spare, *spare = tmp;
            }
            break;
        case PS_LAYER_RELU:
            if (need_dx)
                PS_LAUNCH (ps_gpukern_relu_backward, out_count, out_count, layer->y, *dy, *dy);
            break;
        case PS_LAYER_FLATTEN:
            break;
        case PS_LAYER_DROPOUT:
            //  Forward and backward both run in training, with the same
            //  seed, so the mask drawn here is the one that was applied.
            if (need_dx) {
                float scale = (float) (1.0 / (1.0 - l->rate));
                PS_LAUNCH (ps_gpukern_dropout, out_count, out_count, (int64_t) layer->out_size,
                           seed, ps_dropout_threshold (l->rate), scale, *dy, *dy);
            }
            break;
        case PS_LAYER_EMBEDDING:
        case PS_LAYER_CONCATENATE:
            //  Click-through-rate layers never reach this engine:
            //  ps_model_check_batch refuses their models.
            break;
        case PS_LAYER_ACTIVATION:
        case PS_LAYER_AVGPOOL2D:
        case PS_LAYER_GLOBALAVGPOOL2D:
            //  Nor do the CPU engine's own layers: ps_backend_new and the
            //  layer check here refuse their models (ps_model_cpu_only).
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
        PS_TRY (s_profile_begin (self, err));
        PS_TRY (s_backward_layer (self, i, n, i > self->first_trainable, seed, &dy, &spare,
                                  err));
        PS_TRY (s_profile_end (self, &self->bwd_ms [i], err));
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
    ps_gpukern_geom_t *g = &layer->geom;
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
        PS_TRY (s_bind_variable (self, model, index, l->kernel, k * l->out_c,
                                 &layer->kernel, &layer->dkernel, err));
        if (l->bias >= 0)
            PS_TRY (s_bind_variable (self, model, index, l->bias, l->out_c,
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
        PS_TRY (s_alloc ((void **) &layer->y, batch_out * sizeof (float), false, err));
    if (l->kind == PS_LAYER_MAXPOOL2D)
        PS_TRY (s_alloc ((void **) &layer->argmax, batch_out * sizeof (int32_t), false, err));
    if (layer->out_size > self->max_activation)
        self->max_activation = layer->out_size;
    return PS_OK;
}

static int
s_setup (ps_gpunet_t *self, const ps_model_t *model, int max_batch, ps_error_t *err)
{
    cudaDeviceProp prop;
    PS_CUDA (cudaSetDevice (0));
    PS_CUDA (cudaGetDeviceProperties (&prop, 0));
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
    PS_CUDA (cudaStreamCreateWithFlags (&self->stream, cudaStreamNonBlocking));
    PS_CUBLAS (cublasCreate (&self->blas));
    PS_CUBLAS (cublasSetStream (self->blas, self->stream));
    //  True float32 GEMMs, never TF32: see ps_gpukern.cuh.
    PS_CUBLAS (cublasSetMathMode (self->blas, CUBLAS_DEFAULT_MATH));
    PS_CUBLAS (cublasSetPointerMode (self->blas, CUBLAS_POINTER_MODE_HOST));
    PS_TRY (s_alloc (&self->d_blas_workspace, S_BLAS_WORKSPACE, false, err));
    PS_CUBLAS (cublasSetWorkspace (self->blas, self->d_blas_workspace, S_BLAS_WORKSPACE));
    PS_CUDA (cudaEventCreate (&self->ev_start));
    PS_CUDA (cudaEventCreate (&self->ev_stop));

    //  The parameters first: the layers point into them.
    size_t param_bytes = self->param_count * sizeof (float);
    PS_TRY (s_alloc ((void **) &self->d_params, param_bytes, false, err));
    PS_TRY (s_alloc ((void **) &self->d_grads, param_bytes, false, err));
    size_t in_size = self->input_size;
    for (int i = 0; i < self->layer_count; i++) {
        PS_TRY (s_layer_setup (self, model, i, in_size, err));
        in_size = self->layers [i].out_size;
    }
    if (in_size != (size_t) self->classes)
        return ps_error_set (err, PS_ESHAPE, "model %s: the last layer gives %zu floats per "
                             "example, not one logit per class (%d)", ps_model_name (model),
                             in_size, self->classes);

    size_t batch = (size_t) max_batch;
    size_t grad_bytes = batch * self->max_activation * sizeof (float);
    PS_TRY (s_alloc ((void **) &self->d_x, batch * self->input_size * sizeof (float), false, err));
    PS_TRY (s_alloc ((void **) &self->d_labels, batch, false, err));
    PS_TRY (s_alloc ((void **) &self->d_col, self->col_size * sizeof (float), false, err));
    PS_TRY (s_alloc ((void **) &self->d_ones, self->ones_size * sizeof (float), false, err));
    PS_TRY (s_alloc ((void **) &self->d_g0, grad_bytes, false, err));
    PS_TRY (s_alloc ((void **) &self->d_g1, grad_bytes, false, err));
    PS_TRY (s_alloc ((void **) &self->d_stats, sizeof (ps_gpukern_stats_t), false, err));

    PS_TRY (s_alloc ((void **) &self->h_params, param_bytes, true, err));
    PS_TRY (s_alloc ((void **) &self->h_x, batch * self->input_size * sizeof (float), true, err));
    PS_TRY (s_alloc ((void **) &self->h_labels, batch, true, err));
    PS_TRY (s_alloc ((void **) &self->h_logits,
                     batch * (size_t) self->classes * sizeof (float), true, err));
    PS_TRY (s_alloc ((void **) &self->h_stats, sizeof (ps_gpukern_stats_t), true, err));

    //  Parameters start at zero, so a step before the first set_params is
    //  defined (if useless) rather than a read of garbage.
    if (param_bytes > 0)
        PS_CUDA (cudaMemsetAsync (self->d_params, 0, param_bytes, self->stream));
    PS_LAUNCH (ps_gpukern_fill, self->ones_size, (int64_t) self->ones_size, 1.0f, self->d_ones);
    PS_CUDA (cudaStreamSynchronize (self->stream));
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
    PS_CUDA (cudaStreamSynchronize (self->stream));
    memcpy (self->h_params, params, bytes);
    PS_CUDA (cudaMemcpyAsync (self->d_params, self->h_params, bytes, cudaMemcpyHostToDevice,
                              self->stream));
    PS_CUDA (cudaStreamSynchronize (self->stream));
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
    PS_CUDA (cudaStreamSynchronize (self->stream));
    memcpy (self->h_x, x, x_bytes);
    memcpy (self->h_labels, labels, (size_t) n);
    PS_CUDA (cudaMemcpyAsync (self->d_x, self->h_x, x_bytes, cudaMemcpyHostToDevice,
                              self->stream));
    PS_CUDA (cudaMemcpyAsync (self->d_labels, self->h_labels, (size_t) n,
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
        stats->abs_sum = 0;     //  no regression models on the GPU
    }
}

int
ps_gpunet_train_step (ps_gpunet_t *self, const float *x, const uint8_t *labels,
                      int n, uint64_t dropout_seed, float *grads,
                      ps_batch_stats_t *stats, ps_error_t *err)
{
    size_t grad_bytes = self->param_count * sizeof (float);
    PS_TRY (s_upload_batch (self, x, labels, n, err));
    //  Every variable's gradient is written by its layer each step; the
    //  clear costs microseconds and keeps a gap from ever carrying over.
    if (grad_bytes > 0)
        PS_CUDA (cudaMemsetAsync (self->d_grads, 0, grad_bytes, self->stream));
    PS_TRY (s_forward (self, n, true, dropout_seed, err));
    PS_TRY (s_loss (self, n, true, err));
    PS_TRY (s_backward (self, n, dropout_seed, err));
    if (grad_bytes > 0)
        PS_CUDA (cudaMemcpyAsync (self->h_params, self->d_grads, grad_bytes,
                                  cudaMemcpyDeviceToHost, self->stream));
    PS_CUDA (cudaMemcpyAsync (self->h_stats, self->d_stats, sizeof (ps_gpukern_stats_t),
                              cudaMemcpyDeviceToHost, self->stream));
    PS_CUDA (cudaStreamSynchronize (self->stream));
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
    PS_TRY (s_upload_batch (self, x, labels, n, err));
    PS_TRY (s_forward (self, n, false, 0, err));
    PS_TRY (s_loss (self, n, false, err));
    if (logits)
        PS_CUDA (cudaMemcpyAsync (self->h_logits, self->acts [self->layer_count], logit_bytes,
                                  cudaMemcpyDeviceToHost, self->stream));
    PS_CUDA (cudaMemcpyAsync (self->h_stats, self->d_stats, sizeof (ps_gpukern_stats_t),
                              cudaMemcpyDeviceToHost, self->stream));
    PS_CUDA (cudaStreamSynchronize (self->stream));
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
