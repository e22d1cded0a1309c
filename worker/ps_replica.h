//  A mirrored replica: a worker's full copy of the model's variables, with
//  their optimizer slots and the ledger of the batches applied, updated by
//  the same optimizer code a ps-server runs (common/model/ps_optimizer.h).
//  Replicas that start equal and apply the same summed gradients stay
//  bitwise identical, which is what lets a mirrored ring lose a member and
//  go on from any survivor.
//
//  The values are one flat vector in the model's layout (ps_model.h), so
//  the compute backend reads them in place; each slot is a vector of the
//  same layout. Every variable is updated as a ps-server updates one
//  partition holding the whole variable (norm clipping is per variable),
//  and the replica keeps what a partition keeps: the update count, Adam's
//  t, and a step ledger (common/store/ps_ledger.h) of the batch ids applied. A
//  mirrored update applies the summed gradient of several batches at once
//  (one per member), so it records all of their ids.
//
//  On disk a replica is a set of snapshot files (schemas/snapshot.md), one
//  per variable as partition 0 holding every row: exactly what a ps-server
//  writes for such a partition, so a checkpoint's manifest lists them the
//  same way. For a ring's state transfer it packs into one byte string.
//
//  The update count, Adam's t and the duplicates counter are kept per
//  variable, as each file holds them; every update and every refused
//  repeat reaches all variables, so they differ only when a loaded
//  checkpoint had them differ. A replica is used by one thread at a time.

#ifndef PS_REPLICA_H_INCLUDED
#define PS_REPLICA_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_client.h"
#include "ps_error.h"
#include "ps_ledger.h"
#include "ps_model.h"
#include "ps_optimizer.h"

typedef struct _ps_replica_t ps_replica_t;

//  A replica of model with the initial values every process computes for
//  seed (ps_model_init_params: the same values the servers give their
//  partitions), zero updates and optimizer opt. Returns NULL with err set
//  when opt is invalid or memory is short. model is borrowed: it must
//  outlive the replica.
ps_replica_t *ps_replica_new (const ps_model_t *model, uint64_t seed,
                              const ps_opt_config_t *opt, ps_error_t *err);

void ps_replica_destroy (ps_replica_t **self_p);

//  The flat value vector (ps_model_param_count floats). It stays at one
//  address for the replica's life: load and unpack copy into it.
float *ps_replica_params (ps_replica_t *self);
size_t ps_replica_count (const ps_replica_t *self);

//  Updates applied since the initial values (or as loaded): the smallest
//  per-variable count, that is the updates every variable has had.
uint64_t ps_replica_updates (const ps_replica_t *self);
const ps_ledger_t *ps_replica_ledger (const ps_replica_t *self);

//  Repeated updates refused: the largest per-variable count.
uint64_t ps_replica_duplicates (const ps_replica_t *self);

//  Switch to optimizer opt, as ps_partition_set_optimizer: the same kind
//  keeps the slots (a new learning rate); another kind starts them afresh
//  (and Adam's t with them). PS_EINVAL when opt is invalid, PS_ETOOBIG when
//  new slots cannot be had; either changes nothing.
int ps_replica_set_optimizer (ps_replica_t *self, const ps_opt_config_t *opt,
                              ps_error_t *err);

//  Apply one update with gradient grad (the flat layout) for the batches
//  steps [0, nsteps) (nsteps >= 1; ids > 0, distinct). When any of them is
//  in the ledger already nothing changes and PS_DUPLICATE is returned, err
//  naming the step (the duplicates counter grows by one); PS_EINVAL for bad
//  ids (as ps_ledger_mark), and PS_ENONFINITE naming the variable when grad
//  holds NaN or an infinity, changing nothing. grad is not modified.
int ps_replica_apply (ps_replica_t *self, const float *grad, const uint64_t *steps,
                      size_t nsteps, ps_error_t *err);

//  A 64-bit checksum of the whole state: values, slots, update count,
//  Adam's t and the ledger. Equal replicas give equal checksums. The
//  duplicates counters and the optimizer's settings (not its kind) are
//  left out: a member that refused a repeated message, or has yet to be
//  given this step's learning rate, holds the same model. States that
//  differ in one bit of the values, slots or counters always give
//  different checksums; other differences do but for a 2^-64 chance.
uint64_t ps_replica_checksum (const ps_replica_t *self);

//  Write one snapshot file per variable into dir (which must exist), each
//  crash-safely, named ps_snapshot_filename (var, 0). *files (free it)
//  receives nvars entries (server -1, var, part 0, file, bytes, crc,
//  version = update count) in the model's order. Returns 0 or PS_EIO
//  naming the file.
int ps_replica_save (const ps_replica_t *self, const char *dir, ps_snap_file_t **files,
                     size_t *nfiles, ps_error_t *err);

//  Replace the state with the one in dir: for every variable the snapshot
//  file of partition 0, which must hold all of its rows with the model's
//  shape, and optimizers of one kind. Everything is read and checked
//  before anything changes. The loaded optimizer configuration is kept
//  (set_optimizer after, to change the rate); when the files' settings of
//  that one kind differ, the first variable's are kept, with a warning.
//  When the files' ledgers differ (a checkpoint of servers that a step
//  reached in part), the replica keeps the steps every file has, with a
//  warning, as ps_reshard does. Returns 0, or PS_ENOTFOUND / PS_ECORRUPT /
//  PS_ESHAPE / PS_EINVAL (or the reader's PS_EIO / PS_EVERSION) naming the
//  file and what is wrong.
int ps_replica_load (ps_replica_t *self, const char *dir, ps_error_t *err);

//  The whole state as one byte string for a state transfer: *buf (free it)
//  receives *len bytes, little-endian, self-describing, with a CRC-32
//  trailer (documented in schemas/snapshot.md under "Replica state").
//  Aborts when the memory for it cannot be had.
void ps_replica_pack (const ps_replica_t *self, uint8_t **buf, size_t *len);

//  Replace the state with a packed one, checked in full first (length,
//  counts, the model's parameter count, the optimizer kind and slot count,
//  the ledger). Returns 0 or PS_ECORRUPT / PS_ESHAPE, changing nothing.
int ps_replica_unpack (ps_replica_t *self, const uint8_t *buf, size_t len, ps_error_t *err);

#endif
