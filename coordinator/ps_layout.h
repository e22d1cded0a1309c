//  The run's layout: the plan every worker gets when it registers (the
//  job's model, data, batch size, seed and optimizer, and each variable's
//  partitions: the placement's over the servers, or the variable whole
//  when the servers hold none), and the same placement as JSON, as a
//  checkpoint's manifest records it and a resume compares it; and the
//  embedding tables' specs, likewise.

#ifndef PS_LAYOUT_H_INCLUDED
#define PS_LAYOUT_H_INCLUDED

#include <stdint.h>

#include <jansson.h>

#include "ps_job.h"
#include "ps_model.h"
#include "ps_partitioner.h"
#include "ps_plan.h"

//  Fill the zeroed plan (ps_plan_release frees it) for job and model,
//  partitioned as placement (NULL: whole variables, no servers) over the
//  nservers servers at the endpoints servers, with the schedule's
//  steps_per_epoch and total steps.
void ps_layout_plan (ps_plan_t *plan, const ps_job_t *job, const ps_model_t *model,
                     const ps_placement_t *placement, const char *const *servers, int nservers,
                     uint64_t steps_per_epoch, uint64_t total);

//  The plan's variables as a new JSON array of {var, shape, splits,
//  servers}.
json_t *ps_layout_json (const ps_plan_t *plan);

//  The embedding tables of model (none for an image model) as a new JSON
//  array of their specs, one object per table in the model's order (name,
//  dim, init, optimizer, admission, eviction, shard_seed), as a
//  checkpoint's manifest records them and a resume compares them. Each
//  table has one shard on every server: shard i on server i.
json_t *ps_layout_tables_json (const ps_model_t *model);

#endif
