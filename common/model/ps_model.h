//  Models: a network described by a small JSON spec in the spirit of Keras
//  Sequential (schemas/model.md), checked against schemas/model.schema.json when
//  it is loaded, and resolved into layers with their geometry and the named
//  variables they own. A spec is an image classifier or, when it has
//  "inputs", a click-through-rate model, whose embeddings and tables
//  ps_ctrmodel.h describes (ps_model_ctr).
//
//  A model knows shapes, not numbers. Its parameters live in one flat float
//  vector, variable after variable in spec order, each in Keras's layout
//  (Conv2D kernel [kh, kw, in, out], Dense kernel [in, out]); the variable
//  names (conv2d/kernel, dense_1/bias) follow Keras's automatic naming and
//  are the names a ps-server holds. Activations are NHWC per example, so
//  Flatten needs no copy and matches Keras's channels-last order.
//
//  The compute backends (ps_backend.h) read the layers; the trainer and the
//  cluster code read the variables.

#ifndef PS_MODEL_H_INCLUDED
#define PS_MODEL_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_ctrmodel.h"
#include "ps_error.h"
#include "ps_init.h"
#include "ps_shape.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PS_LAYER_CONV2D,
    PS_LAYER_DENSE,
    PS_LAYER_MAXPOOL2D,
    PS_LAYER_RELU,
    PS_LAYER_FLATTEN,
    PS_LAYER_DROPOUT,
    PS_LAYER_EMBEDDING,         //  click-through-rate models (ps_ctrmodel.h)
    PS_LAYER_CONCATENATE,
    PS_LAYER_ACTIVATION,        //  Keras's Activation layer (CPU engine only)
    PS_LAYER_AVGPOOL2D,         //  AveragePooling2D (CPU engine only)
    PS_LAYER_GLOBALAVGPOOL2D,   //  GlobalAveragePooling2D: [h, w, c] to [c] (CPU only)
} ps_layer_kind_t;

//  The function an Activation layer applies: element by element, except
//  softmax, which normalises each position's channels (the last axis, as
//  Keras's softmax does). gelu is the exact form x * Phi (x), Keras's
//  default (approximate=False).
typedef enum {
    PS_ACT_LINEAR,
    PS_ACT_RELU,
    PS_ACT_SIGMOID,
    PS_ACT_TANH,
    PS_ACT_GELU,
    PS_ACT_SOFTMAX,
} ps_activation_t;

//  One resolved layer. Input and output are per-example NHWC shapes; a flat
//  activation is h = w = 1, c = features. Conv2D and MaxPool2D use kh, kw,
//  stride_h, stride_w and the resolved padding (pad_top, pad_left; the
//  bottom and right padding follow from the output size, as in TensorFlow's
//  "same"). relu is a fused activation (Conv2D, Dense: activation "relu";
//  the ReLU layer itself).
typedef struct {
    ps_layer_kind_t kind;
    char name [PS_NAME_MAX];    //  conv2d, dense_1, max_pooling2d, ...
    int in_h, in_w, in_c;
    int out_h, out_w, out_c;
    int kh, kw;
    int stride_h, stride_w;
    int pad_top, pad_left;
    bool relu;
    double rate;                //  Dropout: fraction dropped, [0, 1)
    ps_activation_t activation; //  Activation: the function
    int kernel;                 //  variable index, or -1
    int bias;                   //  variable index, or -1
    int embedding;              //  Embedding: its index in ps_model_ctr's, else -1
} ps_layer_t;

//  One named variable: its full shape, where it sits in the flat parameter
//  vector, and how it starts (glorot_uniform kernels, zero biases).
typedef struct {
    char name [PS_NAME_MAX];    //  conv2d/kernel
    ps_shape_t shape;
    size_t offset;              //  floats from the start of the flat vector
    size_t count;               //  floats
    ps_init_t init;
} ps_variable_t;

typedef struct ps_model_t ps_model_t;

//  Load a spec: `name_or_path` is a built-in model (cnn, cnn2, mlp, lr, dlrm) or the
//  path of a JSON file. NULL on error, with a message that names the file,
//  the layer (by index and name) and the field at fault.
ps_model_t *ps_model_load (const char *name_or_path, ps_error_t *err);

//  Load a spec from JSON text; `origin` names it in error messages.
ps_model_t *ps_model_parse (const char *json, const char *origin, ps_error_t *err);

void ps_model_destroy (ps_model_t **self_p);

//  The click-through-rate part of a model whose spec has "inputs"
//  (ps_ctrmodel.h), or NULL for an image classifier.
const ps_ctrmodel_t *ps_model_ctr (const ps_model_t *self);

//  The spec's name ("cnn" for the built-in).
const char *ps_model_name (const ps_model_t *self);

//  The spec as compact JSON text, which ps_model_parse turns back into the
//  same model: what the coordinator sends workers in their plan.
const char *ps_model_spec (const ps_model_t *self);

//  The built-in model names, NULL-terminated.
const char *const *ps_model_builtins (void);

int ps_model_layer_count (const ps_model_t *self);
const ps_layer_t *ps_model_layer (const ps_model_t *self, int index);

int ps_model_variable_count (const ps_model_t *self);
const ps_variable_t *ps_model_variable (const ps_model_t *self, int index);

//  Index of the variable called name, or -1.
int ps_model_find_variable (const ps_model_t *self, const char *name);

//  Total floats in the flat parameter vector.
size_t ps_model_param_count (const ps_model_t *self);

//  Per-example input shape (h, w, c) and floats.
void ps_model_input_shape (const ps_model_t *self, int *h, int *w, int *c);
size_t ps_model_input_size (const ps_model_t *self);

//  Number of classes: the features of the last layer, read as logits.
int ps_model_classes (const ps_model_t *self);

//  An image classifier whose last layer gives one logit is a binary
//  classifier: the logit is log (p / (1 - p)) for class 1, trained with
//  sigmoid cross-entropy (Keras's binary_crossentropy from logits), and
//  its labels are 0 and 1.
bool ps_model_binary (const ps_model_t *self);

//  A regression model: its spec says "loss": "mse", and its flat last
//  layer's k outputs are the predicted values themselves (Keras's Dense (k)
//  with a linear activation, compiled with loss="mse"), trained against k
//  float targets an example with the mean over the outputs of the squared
//  error. Never binary, whatever k.
bool ps_model_regression (const ps_model_t *self);

//  The float targets an example of a regression model has (its k
//  outputs), or 0 for a classifier, whose label is one class byte.
int ps_model_targets (const ps_model_t *self);

//  Bytes of one example's label in the label buffers the backends, the
//  data sets and the trainers pass around: 1 (a class) for a classifier,
//  k float32 values (4 k bytes, host order) for a regression model.
size_t ps_model_label_size (const ps_model_t *self);

//  The labels a model takes, 0 .. n - 1: 2 for a binary classifier, else
//  ps_model_classes.
int ps_model_label_classes (const ps_model_t *self);

//  Why only the CPU engine runs this model (a binary classifier's or a
//  regression model's loss, an
//  Activation or average-pooling layer, which the GPU engine has no
//  kernels for), or NULL when the GPU engine runs it too.
const char *ps_model_cpu_only (const ps_model_t *self);

//  Largest activation (floats per example) any layer produces, input
//  included: what a backend sizes its buffers by.
size_t ps_model_max_activation (const ps_model_t *self);

//  Check that batches of up to max_batch examples fit the engines' integer
//  limits: BLAS and cuBLAS take int dimensions, so a convolution's GEMM may
//  have at most INT_MAX rows (max_batch * out_h * out_w) and columns.
//  PS_ETOOBIG names the layer otherwise; PS_EINVAL for a click-through-rate
//  model, which the image engines do not run. Both backends call it, so
//  they accept the same models.
int ps_model_check_batch (const ps_model_t *self, int max_batch, ps_error_t *err);

//  Multiply-adds per example of the forward pass (convolutions and dense
//  layers), for reporting FLOP rates.
double ps_model_forward_macs (const ps_model_t *self);

//  Fill params [0, ps_model_param_count) with every variable's initial
//  values; variable i uses seed ps_model_variable_seed (seed, i), so the
//  same seed gives the same weights on every process.
void ps_model_init_params (const ps_model_t *self, uint64_t seed, float *params);
uint64_t ps_model_variable_seed (uint64_t seed, int index);

//  Check that a set of variables held elsewhere (a ps-server's) is exactly
//  this model's: the same names with the same shapes, none missing, none
//  extra. The message names the first variable that differs.
int ps_model_check_variables (const ps_model_t *self, const char *const *names,
                              const ps_shape_t *shapes, int count, ps_error_t *err);

//  Check that the model takes images of rows x cols x channels values (in
//  any input shape of that many values, a flat [784] included) and gives
//  at least `classes` classes (the data's labels are 0 .. classes - 1).
//  The message says the model does not fit the data and names both shapes
//  or both numbers of classes.
int ps_model_check_input (const ps_model_t *self, int rows, int cols, int channels,
                          int classes, ps_error_t *err);

//  One line per layer (name, type, output shape, parameters) and a total,
//  like Keras's model.summary (); written to `out`.
void ps_model_summary (const ps_model_t *self, void (*out) (const char *line, void *arg),
                       void *arg);

#ifdef __cplusplus
}
#endif

#endif
