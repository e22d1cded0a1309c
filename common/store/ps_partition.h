//  A partition is a contiguous range of rows of one named float32
//  variable, with its optimizer slots and the ledger of steps applied to it.
//  It is the unit a ps-server holds, updates, serves and snapshots.
//
//  Each partition has its own lock: one update at a time is applied to it,
//  so no update tears another, while different partitions are updated in
//  parallel. Pulls copy the values under the same lock, so a reader never
//  sees half an update.
//
//  Partitions are reference counted, so a request being applied on a pool
//  thread keeps its partition alive even if a restore replaces it in the
//  server's table meanwhile. ps_partition_link takes a reference,
//  ps_partition_destroy drops one.

#ifndef PS_PARTITION_H_INCLUDED
#define PS_PARTITION_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include "ps_error.h"
#include "ps_init.h"
#include "ps_optimizer.h"
#include "ps_shape.h"

typedef struct _ps_partition_t ps_partition_t;

typedef struct {
    uint64_t updates;           //  updates applied: the partition's version
    uint64_t duplicates;        //  pushes ignored as repeats of a step
    uint64_t recorded;          //  distinct steps in the ledger
    uint64_t bytes_in;          //  gradient bytes received
    uint64_t bytes_out;         //  value bytes served
    uint64_t nonfinite;         //  gradients refused for holding NaN or an infinity
} ps_partition_stats_t;

//  Create rows [row_begin, row_end) of variable var (full shape `shape`),
//  initialised by init, updated by opt. Returns NULL and sets err when the
//  name, shape, rows, initializer or optimizer is invalid (PS_EINVAL,
//  PS_ESHAPE), or when the memory cannot be allocated (PS_ETOOBIG).
ps_partition_t *ps_partition_new (const char *var, uint32_t part, const ps_shape_t *shape,
                                  int64_t row_begin, int64_t row_end,
                                  const ps_init_t *init, const ps_opt_config_t *opt,
                                  ps_error_t *err);

//  Load a partition from a snapshot file, verified. Returns NULL and sets
//  err (naming the file) when it is missing, torn or corrupt.
ps_partition_t *ps_partition_load (const char *path, ps_error_t *err);

//  Take one more reference; returns self.
ps_partition_t *ps_partition_link (ps_partition_t *self);

//  Drop the caller's reference and set *self_p to NULL; the partition is
//  freed with its last reference.
void ps_partition_destroy (ps_partition_t **self_p);

const char *ps_partition_var (ps_partition_t *self);
uint32_t ps_partition_part (ps_partition_t *self);
const ps_shape_t *ps_partition_shape (ps_partition_t *self);
int64_t ps_partition_row_begin (ps_partition_t *self);
int64_t ps_partition_row_end (ps_partition_t *self);

//  The shape of the rows held here (first dimension = row count).
const ps_shape_t *ps_partition_local_shape (ps_partition_t *self);

//  Number of floats held (values only).
size_t ps_partition_count (ps_partition_t *self);

//  Apply the gradient of step `step` (count floats, the local shape).
//  When `out` is not NULL, the values after this push are copied to it in
//  the same critical section (push-pull); out may be grad itself, which is
//  overwritten only after the update has read it. *version receives the update
//  count after the call. Returns 0 when applied, PS_DUPLICATE when the
//  step was applied before (values unchanged, still copied to out), or
//  the ledger's PS_EINVAL or PS_ETOOBIG, which a successful
//  ps_partition_reserve_step for this step rules out.
int ps_partition_push (ps_partition_t *self, uint64_t step, const float *grad,
                       float *out, uint64_t *version, ps_error_t *err);

//  A partition of at least this many floats is updated in ranges of
//  PS_PARTITION_GRAIN floats on several threads when a push is given a
//  runner (ps_partition_push_on): 512K floats (2 MB an array), where a range
//  of Adam's moves 7 MB and the hand-off costs a few microseconds. Smaller
//  ones are updated by the pushing thread alone.
#define PS_PARTITION_GRAIN      ((size_t) 256 * 1024)
#define PS_PARTITION_SPLIT_MIN  (2 * PS_PARTITION_GRAIN)

//  ps_partition_push, with a large partition's update (and push-pull's
//  copy of the values) run in ranges by runner (NULL: by the calling
//  thread). The semantics are push's: the lock is held across every range,
//  so no other push, pull or save of the partition sees half an update;
//  the step is marked, the optimizer's count and the version advanced once;
//  each element's arithmetic is the single-threaded one, bit for bit.
int ps_partition_push_on (ps_partition_t *self, uint64_t step, const float *grad,
                          float *out, uint64_t *version, const ps_opt_runner_t *runner,
                          ps_error_t *err);

//  Synchronous training on the servers (sync mode): add the gradient of
//  step `step`, one of the `steps` steps of round `round`, to the round's
//  sum; the arrival of its last step applies the round's mean as one update
//  (the version rises by one per round, not per step), as TensorFlow's
//  SyncReplicasOptimizer does. A partition holds one open round at a time:
//  the coordinator hands out round r + 1 only after every step of round r
//  was pushed. The ledger records each step as it is added, so a retried or
//  re-handed step is added once. *applied tells whether this push applied
//  the round. Returns 0 when added, PS_DUPLICATE when the step was added
//  before (nothing changes), PS_EINVAL (naming the partition and both
//  rounds) for a round other than the open one, a round at or below the
//  last one applied, or a step count that disagrees with the round's, and
//  the ledger's errors; nothing changes on an error.
int ps_partition_push_round (ps_partition_t *self, uint64_t step, uint64_t round,
                             uint32_t steps, const float *grad, bool *applied,
                             uint64_t *version, ps_error_t *err);

//  ps_partition_push_round for the n partitions of one request (each named
//  once; grads [i] for parts [i]), as one step: every partition is locked
//  while the round is checked on all of them and the step added to all,
//  so that a push racing another (of the same round, or of another round
//  on the same partitions) is added whole or refused whole, never added to
//  some partitions and refused by others. outcomes [i] receives PS_OK or
//  PS_DUPLICATE, applied [i] whether the push applied the round there and
//  versions [i] the update count. Returns 0, or the first partition's
//  error, naming it, with nothing changed anywhere; the ledgers' room for
//  step must have been reserved (ps_partition_reserve_step).
//  runner (NULL: none) applies a round's mean in ranges, as
//  ps_partition_push_on does.
int ps_partition_push_rounds (ps_partition_t *const *parts, size_t n, uint64_t step,
                              uint64_t round, uint32_t steps, const float *const *grads,
                              int *outcomes, bool *applied, uint64_t *versions,
                              const ps_opt_runner_t *runner, ps_error_t *err);

//  Whether ps_partition_push_round would take step of round (of steps
//  steps) now: 0 when it would add it or answer it as a repeat, else the
//  error it would give, naming the partition. A server checks every
//  partition of a push with this when the request arrives, to refuse it
//  before reserving anything; ps_partition_push_rounds checks again with
//  the partitions locked, since another push may change their rounds
//  before this one runs.
int ps_partition_check_round (ps_partition_t *self, uint64_t step, uint64_t round,
                              uint32_t steps, ps_error_t *err);

//  Copy the values to out; *version receives the update count.
void ps_partition_pull (ps_partition_t *self, float *out, uint64_t *version);

//  Make sure a later push of step cannot be refused by the ledger (see
//  ps_ledger_reserve). Returns 0, or PS_EINVAL / PS_ETOOBIG naming the
//  partition.
int ps_partition_reserve_step (ps_partition_t *self, uint64_t step, ps_error_t *err);

//  Switch to optimizer opt. With the same kind the slots are kept (a new
//  learning rate, say); with another kind they start afresh. Returns 0, or
//  PS_ETOOBIG when new slots cannot be allocated, changing nothing.
int ps_partition_set_optimizer (ps_partition_t *self, const ps_opt_config_t *opt,
                                ps_error_t *err);

void ps_partition_stats (ps_partition_t *self, ps_partition_stats_t *stats);

//  Count a gradient refused because it held NaN or an infinity
//  (stats.nonfinite); the values are not touched.
void ps_partition_count_nonfinite (ps_partition_t *self);

//  Write the partition to dir/ps_snapshot_filename (var, part), crash-safely,
//  as one consistent state. file receives the file name (not the path),
//  bytes its size and crc its CRC-32 trailer, version the update count
//  saved. Returns 0, PS_EIO with a message naming the file, or PS_EBUSY
//  while a round is partly added (ps_partition_push_round): its ledger
//  would hold steps whose gradients are in no file.
int ps_partition_save (ps_partition_t *self, const char *dir, char *file, size_t file_len,
                       uint64_t *bytes, uint32_t *crc, uint64_t *version, ps_error_t *err);

#endif
