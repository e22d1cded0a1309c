//  The run's layout (see ps_layout.h).

#include "ps_layout.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
ps_layout_plan (ps_plan_t *plan, const ps_job_t *job, const ps_model_t *model,
                const ps_placement_t *placement, const char *const *servers, int nservers,
                uint64_t steps_per_epoch, uint64_t total)
{
    int nvars = ps_model_variable_count (model);
    plan->model = strdup (ps_model_spec (model));
    plan->data_dir = strdup (job->data_dir);
    plan->servers = calloc ((size_t) nservers + 1, sizeof (char *));
    plan->vars = calloc ((size_t) nvars + 1, sizeof (ps_plan_var_t));
    if (!plan->model || !plan->data_dir || !plan->servers || !plan->vars)
        abort ();
    plan->batch_size = job->batch_size;
    plan->seed = job->seed;
    snprintf (plan->data_format, sizeof plan->data_format, "%s", job->data_format);
    if (strcmp (job->data_format, "idx") != 0
    &&  (!(plan->train_data = strdup (job->train_data))
         || !(plan->test_data = strdup (job->test_data))))
        abort ();
    //  An image model's IDX files go by name only when the job names them.
    const char *idx_files [] = { job->train_images, job->train_labels, job->test_images,
                                 job->test_labels };
    char **plan_files [] = { &plan->train_images, &plan->train_labels, &plan->test_images,
                             &plan->test_labels };
    for (int i = 0; i < 4; i++)
        if (idx_files [i][0] && !(*plan_files [i] = strdup (idx_files [i])))
            abort ();
    if (strcmp (job->data_format, "csv") == 0 && !(plan->label_column = strdup (job->label_column)))
        abort ();
    plan->train_limit = job->train_limit;
    plan->test_limit = job->test_limit;
    plan->threads = job->worker_threads;
    snprintf (plan->device, sizeof plan->device, "%s", job->device);
    plan->nservers = placement ? nservers : 0;
    plan->optimizer = job->optimizer;
    for (int s = 0; s < plan->nservers; s++)
        if (!(plan->servers [s] = strdup (servers [s])))
            abort ();
    plan->nvars = nvars;
    for (int v = 0; v < nvars; v++) {
        const ps_variable_t *var = ps_model_variable (model, v);
        const ps_placed_var_t *placed = placement ? ps_placement_var (placement, v) : NULL;
        ps_plan_var_t *out = &plan->vars [v];
        snprintf (out->var, sizeof out->var, "%s", var->name);
        out->shape = var->shape;
        out->nparts = placed ? placed->nparts : 1;
        out->splits = calloc ((size_t) out->nparts + 1, sizeof (int64_t));
        out->servers = calloc ((size_t) out->nparts, sizeof (int));
        if (!out->splits || !out->servers)
            abort ();
        if (placed) {
            memcpy (out->splits, placed->splits, ((size_t) out->nparts + 1) * sizeof (int64_t));
            memcpy (out->servers, placed->servers, (size_t) out->nparts * sizeof (int));
        }
        else
            out->splits [1] = var->shape.dims [0];
    }
    plan->client_timeout_ms = job->heartbeat_timeout_ms;
    plan->steps_per_epoch = steps_per_epoch;
    plan->total_steps = total;
    plan->eval_batch = job->batch_size > 256 ? job->batch_size : 256;
    plan->overlap = job->overlap;
}

//  The placement as JSON: what a checkpoint records and a resume compares.
json_t *
ps_layout_json (const ps_plan_t *plan)
{
    json_t *layout = json_array ();
    for (int v = 0; v < plan->nvars; v++) {
        const ps_plan_var_t *var = &plan->vars [v];
        json_t *shape = json_array (), *splits = json_array (), *servers = json_array ();
        for (int d = 0; d < var->shape.rank; d++)
            json_array_append_new (shape, json_integer (var->shape.dims [d]));
        for (int k = 0; k <= var->nparts; k++)
            json_array_append_new (splits, json_integer (var->splits [k]));
        for (int k = 0; k < var->nparts; k++)
            json_array_append_new (servers, json_integer (var->servers [k]));
        json_array_append_new (layout, json_pack ("{s:s, s:o, s:o, s:o}", "var", var->var,
                                                  "shape", shape, "splits", splits,
                                                  "servers", servers));
    }
    return layout;
}

json_t *
ps_layout_tables_json (const ps_model_t *model)
{
    json_t *tables = json_array ();
    const ps_ctrmodel_t *ctr = ps_model_ctr (model);
    for (int t = 0; ctr && t < ctr->table_count; t++) {
        const ps_tablespec_t *spec = &ctr->tables [t].spec;
        const ps_rowopt_t *opt = &spec->opt;
        //  Seeds are 64-bit and JSON integers are signed: they are written
        //  as decimal strings.
        char seed [24], shard_seed [24];
        snprintf (seed, sizeof seed, "%" PRIu64, spec->init.seed);
        snprintf (shard_seed, sizeof shard_seed, "%" PRIu64, spec->shard_seed);
        json_t *init = json_pack ("{s:s, s:s, s:f, s:f, s:f, s:f, s:f}",
                                  "kind", ps_init_kind_name (spec->init.kind), "seed", seed,
                                  "value", spec->init.value, "low", spec->init.low,
                                  "high", spec->init.high, "mean", spec->init.mean,
                                  "stddev", spec->init.stddev);
        json_t *optimizer = json_pack ("{s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
                                       "kind", ps_rowopt_kind_name (opt->kind), "lr", opt->lr,
                                       "beta1", opt->beta1, "beta2", opt->beta2,
                                       "epsilon", opt->epsilon,
                                       "initial_accumulator", opt->initial_accumulator,
                                       "l1", opt->l1, "l2", opt->l2, "lr_power", opt->lr_power,
                                       "beta", opt->beta);
        json_array_append_new (tables,
                               json_pack ("{s:s, s:i, s:o, s:o, s:i, s:f, s:I, s:I, s:s, s:s}",
                                          "name", spec->name, "dim", (int) spec->dim,
                                          "init", init, "optimizer", optimizer,
                                          "admit_count", (int) spec->admit_count,
                                          "admit_prob", spec->admit_prob,
                                          "capacity", (json_int_t) spec->capacity,
                                          "ttl", (json_int_t) spec->ttl,
                                          "policy", ps_evict_policy_name (spec->policy),
                                          "shard_seed", shard_seed));
    }
    return tables;
}
