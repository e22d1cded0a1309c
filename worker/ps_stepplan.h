//  The step plan: the job plan a worker was given at registration
//  (common/wire/ps_plan.h) and what a step needs from it: the model, the
//  training and test data, the compute backend and the batch buffers;
//  which batch a step trains (epoch, batch, the seed that shuffles and
//  drops units), and which variables live on which servers.
//
//  The step plan checks that a plan can be used here: that its variables
//  are the model's, in the model's order, and that the data makes as many
//  batches per epoch as the coordinator counts. It says what a new plan
//  changes, so that the worker rebuilds only that. It knows nothing of
//  the coordinator, of servers' sockets or of the consistency mode: those
//  are the trainer's (ps_trainer.h) and the mode's (ps_wmode.h).

#ifndef PS_STEPPLAN_H_INCLUDED
#define PS_STEPPLAN_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_backend.h"
#include "ps_ctrplan.h"
#include "ps_dataset.h"
#include "ps_error.h"
#include "ps_model.h"
#include "ps_plan.h"

//  What a new plan changes, in increasing cost of what must be rebuilt.
typedef enum {
    PS_STEPPLAN_SAME,           //  nothing the step plan compares
    PS_STEPPLAN_LAYOUT,         //  the servers, the variables' placement or the timeout
    PS_STEPPLAN_COMPUTE,        //  the model, the data, the batch or the compute settings
} ps_stepplan_change_t;

//  What differs between plans a and b. The consistency mode's own settings
//  are the mode's to compare (ps_wmode_ops_t.same).
ps_stepplan_change_t ps_stepplan_compare (const ps_plan_t *a, const ps_plan_t *b);

//  Check that the plan's variables are model's, in model's order (the
//  worker's buffers point into one flat vector at the model's offsets).
//  Returns 0, or PS_EINVAL / PS_ESHAPE with err naming the variable.
int ps_stepplan_check_variables (const ps_plan_t *plan, const ps_model_t *model,
                                 ps_error_t *err);

typedef struct _ps_stepplan_t ps_stepplan_t;

//  Build what plan asks for: the model, the data (the test split only when
//  train is false: an evaluator), for an image model the backend on
//  device (NULL: the plan's), for a CTR model its files and engine
//  (ps_ctrplan.h, on the CPU: device gpu is refused)
//  with threads (0: the plan's) and the buffers of the larger of the
//  training and evaluation batches; then check the plan as
//  ps_stepplan_replace does. Takes the plan over, whatever the result.
//  Returns NULL with err set when the plan cannot be used.
ps_stepplan_t *ps_stepplan_new (ps_plan_t *plan, bool train, const char *device, int threads,
                                ps_error_t *err);

void ps_stepplan_destroy (ps_stepplan_t **self_p);

//  Use plan, which ps_stepplan_compare finds no more than LAYOUT away from
//  the plan in use, instead of it. Takes the plan over, whatever the
//  result. Returns 0, or PS_EINVAL / PS_ESHAPE with err set when its
//  variables are not the model's or its steps per epoch not the data's;
//  the plan in use then stays.
int ps_stepplan_replace (ps_stepplan_t *self, ps_plan_t *plan, ps_error_t *err);

const ps_plan_t *ps_stepplan_plan (const ps_stepplan_t *self);
const ps_model_t *ps_stepplan_model (const ps_stepplan_t *self);
//  An image model's backend and test set (NULL for a CTR model).
ps_backend_t *ps_stepplan_backend (ps_stepplan_t *self);
const ps_dataset_t *ps_stepplan_test (const ps_stepplan_t *self);
//  A CTR model's files and engine (NULL for an image model).
ps_ctrplan_t *ps_stepplan_ctr (ps_stepplan_t *self);

//  Whether the training data was loaded (a worker, not an evaluator).
bool ps_stepplan_trains (const ps_stepplan_t *self);

//  Load training batch (epoch, batch) of step `step` into the batch
//  buffers. Returns its number of examples, or a negative code with err
//  naming the step.
int ps_stepplan_batch (ps_stepplan_t *self, uint64_t step, uint64_t epoch, uint64_t batch,
                       ps_error_t *err);

//  The gradient of the n examples loaded for step `step` (counted from 1),
//  with the parameters the backend holds, into grad; the step's dropout
//  units are those standalone training drops at its step - 1. Returns 0
//  or the backend's error, naming the step.
int ps_stepplan_compute (ps_stepplan_t *self, uint64_t step, int n, float *grad,
                         ps_batch_stats_t *stats, ps_error_t *err);

//  Evaluate the backend's parameters on test examples [first, first +
//  count) (clipped to the test set), in the plan's evaluation batches.
int ps_stepplan_evaluate (ps_stepplan_t *self, size_t first, size_t count,
                          ps_batch_stats_t *stats, ps_error_t *err);

//  The exact AUC of the last evaluation's predictions (a binary
//  classifier's), or NaN: another model, or examples of one class only
//  (logged as a warning).
double ps_stepplan_test_auc (ps_stepplan_t *self);

#endif
