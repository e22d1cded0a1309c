//  What a click-through-rate step takes from the plan on the cluster: the
//  plan's training and test files (Criteo or LIBSVM text,
//  common/model/ps_ctrdata.h), which batch of lines a step reads, the
//  batch reader and the engine (ps_ctrnet.h) the step maps and computes
//  with. The step plan (ps_stepplan.h) holds one in place of a data set
//  and a backend when the plan's model is a CTR model; the mode
//  (ps_wmode_ctr.h) pulls and pushes.
//
//  Batch b of epoch e is block pi_e (b) of the training file, block k
//  being lines [k * batch, (k + 1) * batch) (the last may be short) and
//  pi_e the epoch's shuffle of the blocks for the plan's seed
//  (ps_dataset_shuffle; schemas/data.md, "Batches on the cluster"): every
//  line is read once per epoch, and any worker can compute any step's
//  lines. Malformed lines are skipped: a batch holds the well-formed
//  lines of its block, and may hold none.

#ifndef PS_CTRPLAN_H_INCLUDED
#define PS_CTRPLAN_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include "ps_ctrbatch.h"
#include "ps_ctrdata.h"
#include "ps_ctrnet.h"
#include "ps_error.h"
#include "ps_model.h"
#include "ps_plan.h"

typedef struct _ps_ctrplan_t ps_ctrplan_t;

//  Open the data file at path in format, warning with the first
//  malformed line when its index found some. NULL with err naming the
//  file otherwise (ps_ctrfile_open's errors).
ps_ctrfile_t *ps_ctrplan_open_data (const char *path, ps_ctrformat_t format, ps_error_t *err);

//  Check that model, a CTR model, takes the dense features and fields of
//  batch, read from path. Returns 0 or PS_ESHAPE naming both.
int ps_ctrplan_check_shape (const ps_model_t *model, const ps_ctrbatch_t *batch,
                            const char *path, ps_error_t *err);

//  Map the examples of batch (as ps_ctrfile_read leaves it, holding at
//  least one) into net: its ids per table (ps_ctrnet_map). Returns 0 or
//  the engine's error. The cluster's step and the standalone trainer both
//  hand their batches to the engine through this one view.
int ps_ctrplan_map_batch (ps_ctrnet_t *net, const ps_ctrbatch_t *batch, ps_error_t *err);

//  Open plan's files (the test file alone unless train) in its
//  data_format and make the batch and the engine for model (borrowed;
//  it must outlive the plan) for the larger of the plan's training and
//  evaluation batches. NULL with err naming the file, the format or the
//  shape that is wrong.
ps_ctrplan_t *ps_ctrplan_new (const ps_plan_t *plan, const ps_model_t *model, bool train,
                              ps_error_t *err);
void ps_ctrplan_destroy (ps_ctrplan_t **self_p);

//  The training lines a step is cut from (the plan's train_limit when it
//  has one and it is smaller than the file), 0 for an evaluator; the
//  test lines an evaluation reads, likewise limited by test_limit.
uint64_t ps_ctrplan_train_lines (const ps_ctrplan_t *self);
uint64_t ps_ctrplan_test_lines (const ps_ctrplan_t *self);

//  The blocks of batch lines in an epoch: ceil (train lines / batch).
uint64_t ps_ctrplan_blocks (const ps_ctrplan_t *self, int batch);

//  Read batch b of epoch `epoch` for seed (block pi_e (b), batch lines a
//  block) and map its ids. Returns the examples read (0 when every line
//  was malformed), or PS_EINVAL naming the batch when it is past the
//  epoch's end, or the reader's or the engine's error.
int ps_ctrplan_load_train (ps_ctrplan_t *self, uint64_t seed, uint64_t epoch, uint64_t b,
                           int batch, ps_error_t *err);

//  Read test lines [first, first + count) and map their ids. Returns the
//  examples read, or the reader's or the engine's error.
int ps_ctrplan_load_test (ps_ctrplan_t *self, uint64_t first, uint64_t count, ps_error_t *err);

//  The batch loaded last, and the engine it is mapped in.
const ps_ctrbatch_t *ps_ctrplan_batch (const ps_ctrplan_t *self);
ps_ctrnet_t *ps_ctrplan_net (ps_ctrplan_t *self);

#endif
