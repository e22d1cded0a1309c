//  Standalone training's checkpoints: the format a cluster writes
//  (schemas/checkpoint.md), so that coordinator export, ps-worker predict
//  and the same checks read them. The model's variables are a replica's
//  (ps_replica.h): one snapshot file per variable, partition 0 holding
//  every row, with its optimizer slots and the ledger of the batch ids
//  applied, as a mirrored cluster writes them. The manifest carries the
//  coordinator's keys with "mode": "standalone", "servers": 0, a job
//  object of what standalone training was given (model, batch_size,
//  epochs, seed, train_limit, test_limit, data_dir, optimizer) and a
//  layout of whole variables.
//
//  Training is sequential, so the steps done are always 1..S: a resume
//  checks that the replica's ledger says exactly that, then trains from
//  step S + 1 (epoch S / steps_per_epoch, batch S % steps_per_epoch) with
//  the same data order and dropout seeds as a run that never stopped, and
//  a step applied twice fails the run (ps_replica_apply's PS_DUPLICATE).

#ifndef PS_STANDALONE_CKPT_H_INCLUDED
#define PS_STANDALONE_CKPT_H_INCLUDED

#include <stdint.h>

#include "ps_error.h"
#include "ps_replica.h"
#include "ps_standalone.h"

//  Checkpoints kept in the directory, the newest first.
#define PS_STANDALONE_CKPT_KEEP 3

//  Check cfg->checkpoint_dir before training: it can take checkpoints
//  (ps_checkpoint_check_root), and holds none when the run does not
//  resume, so that no two runs' checkpoints mix. Returns 0, or PS_EINVAL /
//  PS_ENOTFOUND with a message naming the directory.
int ps_standalone_ckpt_check (const ps_standalone_config_t *cfg, ps_error_t *err);

//  Write the checkpoint of step (steps done) of a run of total steps,
//  batches a epoch, in cfg->checkpoint_dir, keeping the newest
//  PS_STANDALONE_CKPT_KEEP. model is the replica's. Returns 0 or the
//  error of writing it, naming the file or directory.
int ps_standalone_ckpt_save (const ps_standalone_config_t *cfg, const ps_model_t *model,
                             const ps_replica_t *replica, uint64_t step, uint64_t batches,
                             uint64_t total, ps_error_t *err);

//  Load the newest checkpoint of cfg->checkpoint_dir that verifies into
//  replica and set *step to its steps done. Its job must be this run's in
//  everything that fixes the data order and the variables (model,
//  batch_size, seed, train_limit, data_dir) and its steps per epoch
//  batches: PS_EINVAL names the key and both values. Its ledger must hold
//  exactly steps 1..step (PS_ECORRUPT). The run's optimizer (cfg) is set
//  on the loaded slots. Returns 0, PS_ENOTFOUND (no checkpoint) or the
//  error of reading it.
int ps_standalone_ckpt_resume (const ps_standalone_config_t *cfg, ps_replica_t *replica,
                               uint64_t batches, uint64_t *step, ps_error_t *err);

#endif
