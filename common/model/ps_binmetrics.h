//  Metrics of binary predictions: the log loss and the area under the ROC
//  curve (AUC) of predicted probabilities against 0/1 labels, what a
//  click-through-rate model is judged by.
//
//  An accumulator takes predictions a batch at a time (an evaluation pass
//  over a test split, the generator's planted model) and keeps each one,
//  eight bytes per example, so that the AUC it gives is exact: the
//  Mann-Whitney statistic over all pairs of a positive and a negative,
//  with a tie between them counted as one half (scikit-learn's
//  roc_auc_score gives the same number). The sort is a radix sort on the
//  probabilities' bits, linear in the count. The log loss is the mean of
//  -(y log p + (1 - y) log (1 - p)) with p clipped to [1e-7, 1 - 1e-7]
//  (Keras's epsilon), so that a confident wrong prediction costs a large
//  but finite amount.

#ifndef PS_BINMETRICS_H_INCLUDED
#define PS_BINMETRICS_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"

//  Predictions are clipped to [PS_BINMETRICS_EPS, 1 - PS_BINMETRICS_EPS]
//  for the log loss only; the AUC uses them as they are.
#define PS_BINMETRICS_EPS 1e-7

typedef struct _ps_binmetrics_t ps_binmetrics_t;

//  An empty accumulator, or NULL when out of memory.
ps_binmetrics_t *ps_binmetrics_new (void);

//  Destroy an accumulator and set the caller's pointer to NULL.
void ps_binmetrics_destroy (ps_binmetrics_t **self_p);

//  Add n predictions: labels [i] is 0 or 1, probs [i] the predicted
//  probability of a 1, in [0, 1]. Returns 0; PS_EINVAL naming the first
//  example whose label is not 0 or 1 or whose probability is outside
//  [0, 1]; PS_ENONFINITE naming the first NaN or infinite probability;
//  PS_ETOOBIG when out of memory. On error nothing is added.
int ps_binmetrics_add (ps_binmetrics_t *self, const float *labels, const float *probs,
                       size_t n, ps_error_t *err);

//  Forget every prediction, keeping the memory for the next pass.
void ps_binmetrics_reset (ps_binmetrics_t *self);

//  The number of predictions added, and how many of them have label 1.
size_t ps_binmetrics_count (const ps_binmetrics_t *self);
size_t ps_binmetrics_positives (const ps_binmetrics_t *self);

//  The mean log loss of the predictions added; NaN when there are none.
double ps_binmetrics_logloss (const ps_binmetrics_t *self);

//  Set *auc to the exact AUC of the predictions added. Returns 0, or
//  PS_EINVAL when they do not hold both a positive and a negative (the AUC
//  is undefined), saying how many of each there are.
int ps_binmetrics_auc (ps_binmetrics_t *self, double *auc, ps_error_t *err);

//  Both metrics of n predictions at once, for a caller that holds them all:
//  returns what ps_binmetrics_add or ps_binmetrics_auc returns, or
//  PS_ETOOBIG when out of memory.
int ps_binmetrics_compute (const float *labels, const float *probs, size_t n,
                           double *logloss, double *auc, ps_error_t *err);

//  Of n predictions, those whose predicted class (p >= 0.5) is their
//  label: the accuracy's numerator.
uint64_t ps_binmetrics_correct (const float *labels, const float *probs, size_t n);

#endif
