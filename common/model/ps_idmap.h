//  A batch's ids mapped to the distinct ids among them. A batch of
//  click-through examples names the same row many times (a popular ad, a
//  common device type), but a table's rows are pulled once, their
//  gradients summed and pushed once: the server refuses a push that holds
//  an id twice, and a row fetched once is a row fetched cheaply. The map
//  takes the ids of a batch's (example, field) entries, in order, and gives
//  back the distinct ids in the order they were first seen and, for every
//  id added, its index among them. Gathering rows, summing the rows'
//  gradients and the push all read those two arrays.
//
//  A map serves one table for one batch after another: ps_idmap_reset
//  empties it in constant time, and memory grows only when one add brings
//  more ids (repeats counted) than the map has room for, so a training loop
//  allocates nothing once its largest batch has been seen. A map is used
//  by one thread at a time.

#ifndef PS_IDMAP_H_INCLUDED
#define PS_IDMAP_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"

typedef struct _ps_idmap_t ps_idmap_t;

//  An empty map with room for capacity distinct ids before it grows
//  (0: a small default). NULL when the memory cannot be had.
ps_idmap_t *ps_idmap_new (size_t capacity);
void ps_idmap_destroy (ps_idmap_t **self_p);

//  Forget every id, keeping the memory.
void ps_idmap_reset (ps_idmap_t *self);

//  Add ids[0..n) in order: index[i] receives the position of ids[i] among
//  the distinct ids (an id seen before, in this call or an earlier one
//  since the reset, keeps its position). Returns 0, or PS_ETOOBIG when the
//  map would hold more than UINT32_MAX ids or memory is short; then the
//  map is as before the call.
int ps_idmap_add (ps_idmap_t *self, const uint64_t *ids, size_t n, uint32_t *index,
                  ps_error_t *err);

//  The distinct ids in the order first seen, and their number. The array
//  stays valid until the next add or reset.
size_t ps_idmap_count (const ps_idmap_t *self);
const uint64_t *ps_idmap_ids (const ps_idmap_t *self);

#endif
