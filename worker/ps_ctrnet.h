//  The CPU engine of click-through-rate models (ps_ctrmodel.h): for a
//  batch of examples, the predicted click probabilities, the mean binary
//  cross-entropy, the gradient of the dense variables (the flat vector of
//  ps_model.h) and one gradient row per distinct id of each table.
//
//  The engine does not hold the tables: a step maps the batch's ids to
//  each table's distinct keys (ps_ctrnet_map, with ps_idmap.h), the caller
//  fills each table's rows for those keys, in that order, from wherever
//  the table lives (ps_sparse_pull in process, a sparse pull from the
//  servers), and then runs the forward pass, and the backward pass when
//  training. The row gradients come out one per distinct key with the
//  gradients of its repeats summed, in the keys' order: what a sparse
//  push takes. A pull for evaluation is the same pull: it creates no row.
//
//  The dense layers are ps_cpu_ops.h's kernels (OpenBLAS sgemm), on the
//  caller's thread. Buffers are sized for the largest batch at creation;
//  the per-table key and row buffers grow only when a batch holds more ids
//  than any before, so a training loop allocates nothing per step. An
//  engine is used by one thread at a time.

#ifndef PS_CTRNET_H_INCLUDED
#define PS_CTRNET_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"
#include "ps_model.h"

//  A batch as the engine reads it (the data readers' ps_ctrbatch_t points
//  into the same arrays): n examples; example i's dense features are
//  dense [i * D .. (i + 1) * D) and its ids of field f are ids [offsets
//  [i * F + f] .. offsets [i * F + f + 1]), with weights at the same
//  positions (NULL: every weight 1), D and F the model's inputs.
typedef struct {
    size_t n;
    const float *labels;        //  n labels, 0 or 1
    const float *dense;         //  n * D; may be NULL when D is 0
    const uint32_t *offsets;    //  n * F + 1
    const uint64_t *ids;
    const float *weights;
} ps_ctrnet_batch_t;

typedef struct _ps_ctrnet_t ps_ctrnet_t;

//  An engine for batches of up to max_batch examples of model, a
//  click-through-rate model (borrowed: it must outlive the engine). NULL
//  with err set otherwise, or when memory is short.
ps_ctrnet_t *ps_ctrnet_new (const ps_model_t *model, int max_batch, ps_error_t *err);
void ps_ctrnet_destroy (ps_ctrnet_t **self_p);

//  Take batch (borrowed until the next map) and map its ids to each
//  table's distinct keys. Returns 0, PS_EINVAL naming the example when the
//  batch is larger than the engine's, a label is not 0 or 1 or the offsets
//  do not grow, or PS_ETOOBIG when memory is short.
int ps_ctrnet_map (ps_ctrnet_t *self, const ps_ctrnet_batch_t *batch, ps_error_t *err);

//  Table t's distinct keys in the mapped batch (*keys, in the order first
//  seen) and their count; and the buffer of count * dim floats the caller
//  fills with their rows before the forward pass.
size_t ps_ctrnet_keys (const ps_ctrnet_t *self, int table, const uint64_t **keys);
float *ps_ctrnet_rows (ps_ctrnet_t *self, int table);

//  The forward pass of the mapped batch with the dense variables params:
//  probs (n floats, may be NULL) receives the click probabilities, and
//  the function returns the summed binary cross-entropy over the batch
//  (natural log, from the logits: softplus (z) - y z).
double ps_ctrnet_forward (ps_ctrnet_t *self, const float *params, float *probs);

//  The backward pass of the batch the last forward pass ran (with the
//  same params): grads (ps_model_param_count floats) receives the gradient
//  of the batch's mean loss with respect to the dense variables, and each
//  table's row gradients (ps_ctrnet_row_grads) that with respect to its
//  rows, one row per distinct key.
void ps_ctrnet_backward (ps_ctrnet_t *self, const float *params, float *grads);

//  Table t's row gradients from the last backward pass: count * dim
//  floats, in the order of ps_ctrnet_keys.
const float *ps_ctrnet_row_grads (const ps_ctrnet_t *self, int table);

#endif
