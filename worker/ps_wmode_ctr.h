//  Click-through-rate models on the servers, the worker's side (see
//  ps_wmode.h): the async mode, which ssp's workers use as it is, for a
//  model with embedding tables. The dense variables are partitions on the
//  servers as for any model (common/wire/ps_client.h); every table has a
//  shard on every server (common/wire/ps_sparse_client.h).
//
//  A train step reads its batch of lines (ps_ctrplan.h) and maps its ids,
//  pulls the rows of the batch's distinct ids of every table (and the
//  dense variables when the values it holds are not the servers' of the
//  work's generation), computes with the engine (ps_ctrnet.h), and pushes
//  the row gradients to every server (an empty entry where a table has no
//  id of the step, so every shard's ledger records the step) while the
//  pusher's thread (ps_pusher.h) pushes the dense gradient with
//  push-pull, both tagged with the step id and the generation. Both are
//  waited for before the step ends: the overlap of step k's push with
//  step k + 1's computation is not done for these models. A failed pull
//  or push is reported failed and the next step pulls afresh; a step that
//  is tried again is answered duplicate by the ledgers that have it.
//
//  An evaluation pulls the dense variables, then reads the whole test
//  file in evaluation batches, pulling each batch's rows (a pull never
//  creates a row), and reports the summed log loss, the examples whose
//  predicted class (p >= 0.5) is the label, their count, and the AUC
//  over the whole test file (ps_binmetrics.h).
//
//  Sync and mirrored mode do not train these models: creating the mode
//  for such a plan fails, naming the mode and the model.

#ifndef PS_WMODE_CTR_H_INCLUDED
#define PS_WMODE_CTR_H_INCLUDED

#include "ps_wmode.h"

//  Whether plan's data is text for a CTR model (data_format criteo or
//  libsvm), which ps_wmode_ctr serves whatever the plan's mode.
bool ps_wmode_ctr_plan (const ps_plan_t *plan);

#endif
