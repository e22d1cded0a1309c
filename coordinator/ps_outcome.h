//  The run's outcome as the servers saw it: each server's ledger counts
//  for the done record, and the check that every partition recorded
//  exactly the steps done. One step more or less means a gradient applied
//  that was never scheduled, or a step counted that no server applied,
//  and the run says so, naming each partition (or replica) that
//  disagrees.

#ifndef PS_OUTCOME_H_INCLUDED
#define PS_OUTCOME_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "ps_client.h"

//  Ask each of nservers servers (none when client is NULL) for its
//  partitions' ledgers: returns the done record's "servers" array, and
//  appends to mismatches each partition whose ledger did not record
//  `done` steps, or each server that could not be asked. Sets
//  *unanswered to the first server that did not answer in time (or could
//  not be reached), -1 when every one answered: such a server may have
//  died or hung, which is not a ledger that disagrees.
json_t *ps_outcome_servers (ps_client_t *client, int nservers, uint64_t done,
                            json_t *mismatches, int *unanswered);

//  Ask each of nservers servers for its embedding table shards' counters:
//  returns the done record's "tables" array, one object per table, in name
//  order, with its rows, created, evicted and dropped counts summed over
//  the servers, "shard_steps", the distinct steps each shard's ledger
//  holds (by server: what a restore keeps), and "shard_pushes", the pushes
//  each shard applied since it was created or last restored; appends to mismatches each shard that did not apply `done`
//  steps (every step pushes to every shard, so each shard applies each
//  step once), and each server that could not be asked.
json_t *ps_outcome_tables (ps_client_t *client, int nservers, uint64_t done,
                           json_t *mismatches);

//  The mismatches as one line ("ps:0 w part 1 recorded 9; ..."), cut
//  with "..." to fit len bytes.
void ps_outcome_describe (const json_t *mismatches, char *list, size_t len);

#endif
