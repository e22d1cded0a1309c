//  Standalone training's checkpoints: see ps_standalone_ckpt.h.

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ps_checkpoint.h"
#include "ps_log.h"
#include "ps_standalone_ckpt.h"

int
ps_standalone_ckpt_check (const ps_standalone_config_t *cfg, ps_error_t *err)
{
    int rc = ps_checkpoint_check_root (cfg->checkpoint_dir, cfg->resume, err);
    if (rc || cfg->resume)
        return rc;
    uint64_t *steps;
    size_t count;
    if ((rc = ps_ckpt_layout_list (cfg->checkpoint_dir, &steps, &count, err)))
        return rc;
    free (steps);
    if (count > 0)
        return ps_error_set (err, PS_EINVAL, "checkpoint directory %s holds %zu checkpoint(s) "
                             "already; continue that run with --resume, or give another "
                             "directory", cfg->checkpoint_dir, count);
    return PS_OK;
}

//  The job as a standalone checkpoint records it.
static json_t *
s_job (const ps_standalone_config_t *cfg)
{
    json_t *job = json_pack ("{s:s, s:i, s:i, s:I, s:I, s:I, s:s, s:{s:s, s:f}}",
                             "model", cfg->model, "batch_size", cfg->batch,
                             "epochs", cfg->epochs, "seed", (json_int_t) cfg->seed,
                             "train_limit", (json_int_t) cfg->train_limit,
                             "test_limit", (json_int_t) cfg->test_limit,
                             "data_dir", cfg->data_dir,
                             "optimizer", "kind", ps_opt_kind_name (cfg->optimizer.kind),
                             "lr", cfg->optimizer.lr);
    if (!job)
        abort ();
    return job;
}

//  The layout of whole variables, as a mirrored cluster's checkpoint has
//  it (one partition, rows [0, d0), "server" 0).
static json_t *
s_layout (const ps_model_t *model)
{
    json_t *layout = json_array ();
    for (int i = 0; i < ps_model_variable_count (model); i++) {
        const ps_variable_t *v = ps_model_variable (model, i);
        json_t *shape = json_array ();
        for (int d = 0; d < v->shape.rank; d++)
            json_array_append_new (shape, json_integer (v->shape.dims [d]));
        json_array_append_new (layout, json_pack ("{s:s, s:o, s:[i, I], s:[i]}", "var", v->name,
                                                  "shape", shape, "splits", 0,
                                                  (json_int_t) v->shape.dims [0], "servers", 0));
    }
    return layout;
}

int
ps_standalone_ckpt_save (const ps_standalone_config_t *cfg, const ps_model_t *model,
                         const ps_replica_t *replica, uint64_t step, uint64_t batches,
                         uint64_t total, ps_error_t *err)
{
    char tmp [PATH_MAX];
    int rc = ps_checkpoint_begin (cfg->checkpoint_dir, step, tmp, sizeof tmp, err);
    if (rc)
        return rc;
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    if ((rc = ps_replica_save (replica, tmp, &files, &nfiles, err)))
        return rc;
    //  A replica's files have no server; the manifest's entries name
    //  server 0, as a mirrored cluster's do.
    for (size_t i = 0; i < nfiles; i++)
        files [i].server = 0;
    bool finished = step >= total;
    json_t *manifest = json_pack (
        "{s:I, s:s, s:{s:I, s:[]}, s:{s:I, s:I, s:b}, s:{s:I, s:s}, s:f, s:i, s:I, s:I, "
        "s:I, s:o, s:o}",
        "global_step", (json_int_t) step, "mode", "standalone",
        "done", "watermark", (json_int_t) step, "above",
        "data_cursor", "epoch", (json_int_t) (finished ? 0 : step / batches),
        "batch", (json_int_t) (finished ? 0 : step % batches), "finished", finished,
        "seeds", "seed", (json_int_t) cfg->seed, "derivation", PS_CHECKPOINT_SEEDS_DERIVATION,
        "lr", cfg->optimizer.lr, "servers", 0, "steps_per_epoch", (json_int_t) batches,
        "total_steps", (json_int_t) total, "updates", (json_int_t) ps_replica_updates (replica),
        "job", s_job (cfg), "layout", s_layout (model));
    if (!manifest)
        abort ();
    char dir [PATH_MAX];
    rc = ps_checkpoint_commit (cfg->checkpoint_dir, step, tmp, manifest, files, nfiles,
                               PS_STANDALONE_CKPT_KEEP, dir, sizeof dir, err);
    json_decref (manifest);
    free (files);
    if (rc == 0)
        ps_info ("checkpoint of step %llu written: %s", (unsigned long long) step, dir);
    return rc;
}

//  Check that the checkpoint's job key holds what this run has: a string
//  (text) or an integer (number).
static int
s_same (const char *dir, const json_t *job, const char *key, const char *text, json_int_t number,
        ps_error_t *err)
{
    const json_t *value = json_object_get (job, key);
    char have [PATH_MAX], want [PATH_MAX];
    if (text) {
        if (json_is_string (value) && strcmp (json_string_value (value), text) == 0)
            return PS_OK;
        snprintf (want, sizeof want, "\"%s\"", text);
    }
    else {
        if (json_is_integer (value) && json_integer_value (value) == number)
            return PS_OK;
        snprintf (want, sizeof want, "%lld", (long long) number);
    }
    char *dump = value ? json_dumps (value, JSON_ENCODE_ANY) : NULL;
    snprintf (have, sizeof have, "%s", dump ? dump : "nothing");
    free (dump);
    return ps_error_set (err, PS_EINVAL, "checkpoint %s: its job has %s %s, but this run has %s; "
                         "a resume must train the same data in the same order", dir, key, have,
                         want);
}

int
ps_standalone_ckpt_resume (const ps_standalone_config_t *cfg, ps_replica_t *replica,
                           uint64_t batches, uint64_t *step, ps_error_t *err)
{
    char dir [PATH_MAX];
    json_t *manifest;
    int rc = ps_checkpoint_latest (cfg->checkpoint_dir, dir, sizeof dir, &manifest, err);
    if (rc == PS_ENOTFOUND)
        return ps_error_set (err, rc, "--resume: no checkpoint in %s that verifies",
                             cfg->checkpoint_dir);
    if (rc)
        return rc;
    const json_t *job = json_object_get (manifest, "job");
    const json_t *per_epoch = json_object_get (manifest, "steps_per_epoch");
    if ((rc = s_same (dir, job, "model", cfg->model, 0, err))
    ||  (rc = s_same (dir, job, "batch_size", NULL, cfg->batch, err))
    ||  (rc = s_same (dir, job, "seed", NULL, (json_int_t) cfg->seed, err))
    ||  (rc = s_same (dir, job, "train_limit", NULL, (json_int_t) cfg->train_limit, err))
    ||  (rc = s_same (dir, job, "data_dir", cfg->data_dir, 0, err)))
        goto done;
    if (!json_is_integer (per_epoch) || (uint64_t) json_integer_value (per_epoch) != batches) {
        rc = ps_error_set (err, PS_EINVAL, "checkpoint %s: its steps_per_epoch is not this "
                           "run's %llu", dir, (unsigned long long) batches);
        goto done;
    }
    if ((rc = ps_replica_load (replica, dir, err))
    ||  (rc = ps_replica_set_optimizer (replica, &cfg->optimizer, err)))
        goto done;
    *step = (uint64_t) json_integer_value (json_object_get (manifest, "global_step"));
    const ps_ledger_t *ledger = ps_replica_ledger (replica);
    if (ps_ledger_count (ledger) != *step || ps_ledger_base (ledger) != *step + 1) {
        rc = ps_error_set (err, PS_ECORRUPT, "checkpoint %s: its variables recorded %llu "
                           "steps below %llu, not exactly steps 1..%llu", dir,
                           (unsigned long long) ps_ledger_count (ledger),
                           (unsigned long long) ps_ledger_base (ledger),
                           (unsigned long long) *step);
        goto done;
    }
    ps_info ("resuming from %s: %llu steps done", dir, (unsigned long long) *step);
done:
    json_decref (manifest);
    return rc;
}
