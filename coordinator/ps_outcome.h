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
//  `done` steps, or each server that could not be asked.
json_t *ps_outcome_servers (ps_client_t *client, int nservers, uint64_t done,
                            json_t *mismatches);

//  The mismatches as one line ("ps:0 w part 1 recorded 9; ..."), cut
//  with "..." to fit len bytes.
void ps_outcome_describe (const json_t *mismatches, char *list, size_t len);

#endif
