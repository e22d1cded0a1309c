//  A step ledger records which step ids have been applied to a partition, so
//  that a push repeated for the same step (a re-run of a failed worker's
//  step, or a late push from a worker that was presumed dead) is ignored.
//
//  Step ids are dense: the coordinator numbers steps 1, 2, 3, ... and every
//  one is eventually applied. The ledger therefore stores a watermark `base`
//  below which every step from 1 is known to be applied, plus a bitmap for
//  the window of steps above it. Memory is proportional to the spread
//  between the oldest missing step and the newest applied one, not to the
//  number of steps seen. Step 0, which no cluster uses but clients may, is
//  recorded apart, so that its absence never holds the watermark back.

#ifndef PS_LEDGER_H_INCLUDED
#define PS_LEDGER_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"

//  Steps this far or further above the watermark are refused: they can only
//  come from a corrupt or hostile request, and would cost memory (the
//  window is a bitmap, at most 2 MiB at this span, 4 with slack). 2^24 steps
//  is far more than the coordinator ever has between its oldest unfinished
//  step and its newest.
#define PS_LEDGER_MAX_SPAN  (UINT64_C (1) << 24)

typedef struct _ps_ledger_t ps_ledger_t;

ps_ledger_t *ps_ledger_new (void);
void ps_ledger_destroy (ps_ledger_t **self_p);

//  Record step. Returns 0 when it is new, PS_DUPLICATE when it was recorded
//  before; PS_EINVAL (changing nothing) when it is PS_LEDGER_MAX_SPAN or
//  more above the watermark or is 2^64-1; PS_ETOOBIG when the window
//  cannot be allocated.
int ps_ledger_mark (ps_ledger_t *self, uint64_t step, ps_error_t *err);

//  Make sure a later ps_ledger_mark (step) cannot fail: run its checks and
//  allocate its window now, recording nothing. The watermark only moves
//  up, so once this succeeds the mark succeeds or reports a duplicate.
//  This is how a request touching several partitions is refused whole
//  before any of them applies it. Returns 0, PS_EINVAL or PS_ETOOBIG as
//  ps_ledger_mark would.
int ps_ledger_reserve (ps_ledger_t *self, uint64_t step, ps_error_t *err);

//  True when step was recorded.
bool ps_ledger_contains (const ps_ledger_t *self, uint64_t step);

//  Number of distinct steps recorded.
uint64_t ps_ledger_count (const ps_ledger_t *self);

//  The watermark, at least 1: every step from 1 below it has been
//  recorded, and it has not. Step 0 is outside it (ps_ledger_contains
//  tells).
uint64_t ps_ledger_base (const ps_ledger_t *self);

//  Serialize into a self-describing little-endian byte string (format in
//  schemas/snapshot.md). ps_ledger_encoded_size gives the exact length.
size_t ps_ledger_encoded_size (const ps_ledger_t *self);
void ps_ledger_encode (const ps_ledger_t *self, uint8_t *buf);

//  Parse what ps_ledger_encode wrote, or what it wrote before step 0 was
//  recorded apart (a watermark of 0 over steps from 1, which is moved up
//  here). Returns NULL with PS_ECORRUPT when the bytes are inconsistent
//  (wrong length, bits set past the end, counts that do not match the
//  bitmap).
ps_ledger_t *ps_ledger_decode (const uint8_t *buf, size_t len, ps_error_t *err);

//  True when both ledgers hold the same steps.
bool ps_ledger_equal (const ps_ledger_t *a, const ps_ledger_t *b);

//  A new ledger holding the steps recorded in both a and b: what pieces of
//  one variable that applied different steps have applied in common (see
//  ps_reshard.h). It costs time in proportion to the windows, not to the
//  watermarks, which marking the common steps one by one into a new ledger
//  would. Returns NULL with PS_ETOOBIG when the memory cannot be had.
ps_ledger_t *ps_ledger_intersect (const ps_ledger_t *a, const ps_ledger_t *b, ps_error_t *err);

#endif
