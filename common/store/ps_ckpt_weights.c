//  A checkpoint's weights: see ps_ckpt_weights.h.

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ps_ckpt_verify.h"
#include "ps_ckpt_layout.h"
#include "ps_ckpt_tables.h"
#include "ps_ckpt_weights.h"
#include "ps_snapshot.h"

struct _ps_ckpt_weights_t {
    ps_model_t *model;
    float *params;
    ps_ckpt_tables_t *tables;   //  read_all only
    char dir [PATH_MAX];
    uint64_t step;
};

//  Find the checkpoint at path (a checkpoint directory, or a root) and
//  verify it: self->dir and *manifest receive it.
static int
s_find (ps_ckpt_weights_t *self, const char *path, json_t **manifest, ps_error_t *err)
{
    struct stat st;
    if (stat (path, &st) != 0 || !S_ISDIR (st.st_mode))
        return ps_error_set (err, PS_ENOTFOUND, "checkpoint %s: not a directory (expected a "
                             "checkpoint directory or a checkpoint root)", path);
    char manifest_path [PATH_MAX];
    int rc = ps_ckpt_layout_join (manifest_path, sizeof manifest_path, path,
                                  PS_CHECKPOINT_MANIFEST, err);
    if (rc)
        return rc;
    if (stat (manifest_path, &st) == 0) {
        snprintf (self->dir, sizeof self->dir, "%s", path);
        return ps_checkpoint_verify (path, manifest, err);
    }
    rc = ps_checkpoint_latest (path, self->dir, sizeof self->dir, manifest, err);
    if (rc == PS_ENOTFOUND)
        return ps_error_set (err, PS_ENOTFOUND, "checkpoint %s: no " PS_CHECKPOINT_MANIFEST
                             " here, and no ckpt-<step> directory in it that verifies", path);
    return rc;
}

//  Copy one listed file's rows into the vector, after checking that the
//  file is a partition of a variable of the model, with its shape, whose
//  rows are not held yet (covered: one flag per row of every variable,
//  at the variable's offset / row elements).
static int
s_load_file (ps_ckpt_weights_t *self, const json_t *entry, uint8_t **covered, ps_error_t *err)
{
    const char *file = json_string_value (json_object_get (entry, "file"));
    const char *var = json_string_value (json_object_get (entry, "var"));
    int index = ps_model_find_variable (self->model, var);
    if (index < 0)
        return ps_error_set (err, PS_EINVAL, "checkpoint %s: file %s holds variable \"%s\", "
                             "which model \"%s\" does not have", self->dir, file, var,
                             ps_model_name (self->model));
    const ps_variable_t *v = ps_model_variable (self->model, index);
    char path [PATH_MAX];
    int rc = ps_ckpt_layout_join (path, sizeof path, self->dir, file, err);
    if (rc)
        return rc;
    ps_snapshot_t snap;
    if ((rc = ps_snapshot_read (path, &snap, err)))
        return rc;
    char want [128], got [128];
    if (!ps_shape_equal (&snap.shape, &v->shape))
        rc = ps_error_set (err, PS_ESHAPE, "checkpoint %s: variable \"%s\" is %s in file %s, "
                           "but %s in model \"%s\"", self->dir, var,
                           ps_shape_str (&snap.shape, got, sizeof got), file,
                           ps_shape_str (&v->shape, want, sizeof want),
                           ps_model_name (self->model));
    for (int64_t r = snap.row_begin; !rc && r < snap.row_end; r++)
        if (covered [index][r])
            rc = ps_error_set (err, PS_EINVAL, "checkpoint %s: row %lld of variable \"%s\" is "
                               "in two files (%s is one); expected each row in one file",
                               self->dir, (long long) r, var, file);
    if (!rc) {
        size_t row = (size_t) ps_shape_row_count (&v->shape);
        memset (covered [index] + snap.row_begin, 1, (size_t) (snap.row_end - snap.row_begin));
        memcpy (self->params + v->offset + (size_t) snap.row_begin * row, snap.values,
                (size_t) (snap.row_end - snap.row_begin) * row * sizeof (float));
    }
    ps_snapshot_release (&snap);
    return rc;
}

//  Fill the vector from the manifest's files and check that every row of
//  every variable came from one.
static int
s_load (ps_ckpt_weights_t *self, const json_t *manifest, ps_error_t *err)
{
    int count = ps_model_variable_count (self->model);
    uint8_t **covered = calloc ((size_t) count + 1, sizeof (uint8_t *));
    if (!covered)
        abort ();
    for (int i = 0; i < count; i++)
        if (!(covered [i] = calloc ((size_t) ps_model_variable (self->model, i)->shape.dims [0],
                                    1)))
            abort ();
    int rc = PS_OK;
    size_t at;
    const json_t *entry;
    json_array_foreach (json_object_get (manifest, "files"), at, entry)
        if ((rc = s_load_file (self, entry, covered, err)))
            break;
    for (int i = 0; !rc && i < count; i++) {
        const ps_variable_t *v = ps_model_variable (self->model, i);
        for (int64_t r = 0; r < v->shape.dims [0]; r++)
            if (!covered [i][r]) {
                rc = ps_error_set (err, PS_ENOTFOUND, "checkpoint %s: row %lld of variable "
                                   "\"%s\" is in none of its files", self->dir, (long long) r,
                                   v->name);
                break;
            }
    }
    for (int i = 0; i < count; i++)
        free (covered [i]);
    free (covered);
    return rc;
}

//  Check that the model has every table of the checkpoint, with its row
//  width: the export's metadata describes the tables by the model.
static int
s_check_tables (ps_ckpt_weights_t *self, const json_t *tables, ps_error_t *err)
{
    const ps_ctrmodel_t *ctr = ps_model_ctr (self->model);
    size_t at;
    const json_t *spec;
    json_array_foreach (tables, at, spec) {
        const char *name = json_string_value (json_object_get (spec, "name"));
        int t = ctr && name ? ps_ctrmodel_find_table (ctr, name) : -1;
        if (t < 0)
            return ps_error_set (err, PS_EINVAL, "checkpoint %s holds embedding table \"%s\", "
                                 "which model \"%s\" does not have", self->dir,
                                 name ? name : "(no name)", ps_model_name (self->model));
        json_int_t dim = json_integer_value (json_object_get (spec, "dim"));
        if (dim != (json_int_t) ctr->tables [t].spec.dim)
            return ps_error_set (err, PS_ESHAPE, "checkpoint %s: table \"%s\" has rows of %lld "
                                 "floats, but %u in model \"%s\"", self->dir, name,
                                 (long long) dim, ctr->tables [t].spec.dim,
                                 ps_model_name (self->model));
    }
    return PS_OK;
}

//  Read the checkpoint at path: its dense variables, and its tables too
//  when with_tables (else a checkpoint with tables is refused).
static ps_ckpt_weights_t *
s_read (const char *path, const char *model, bool with_tables, ps_error_t *err)
{
    ps_ckpt_weights_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    json_t *manifest = NULL;
    if (s_find (self, path, &manifest, err))
        goto fail;
    self->step = (uint64_t) json_integer_value (json_object_get (manifest, "step"));
    const json_t *tables = json_object_get (json_object_get (manifest, "tables"), "specs");
    if (!with_tables && json_array_size (tables) > 0) {
        ps_error_set (err, PS_EINVAL, "checkpoint %s holds embedding table \"%s\" (a "
                      "click-through-rate model): its rows are not dense variables, and only "
                      "dense variables are read here", self->dir,
                      json_string_value (json_object_get (json_array_get (tables, 0), "name")));
        goto fail;
    }
    if (!model)
        model = json_string_value (json_object_get (json_object_get (manifest, "job"), "model"));
    if (!model) {
        ps_error_set (err, PS_EINVAL, "checkpoint %s: its manifest names no job.model; give "
                      "the model", self->dir);
        goto fail;
    }
    if (!(self->model = ps_model_load (model, err))) {
        ps_error_prefix (err, PS_EINVAL, "checkpoint %s: model", self->dir);
        goto fail;
    }
    if (!with_tables && ps_model_ctr (self->model)) {
        ps_error_set (err, PS_EINVAL, "checkpoint %s: model \"%s\" is a click-through-rate "
                      "model; only image classifiers' weights are read", self->dir,
                      ps_model_name (self->model));
        goto fail;
    }
    if (with_tables && s_check_tables (self, tables, err))
        goto fail;
    if (!(self->params = calloc (ps_model_param_count (self->model) + 1, sizeof (float))))
        abort ();
    if (s_load (self, manifest, err))
        goto fail;
    if (with_tables && !(self->tables = ps_ckpt_tables_read (self->dir, manifest, err)))
        goto fail;
    json_decref (manifest);
    return self;
fail:
    json_decref (manifest);
    ps_ckpt_weights_destroy (&self);
    return NULL;
}

ps_ckpt_weights_t *
ps_ckpt_weights_read (const char *path, const char *model, ps_error_t *err)
{
    return s_read (path, model, false, err);
}

ps_ckpt_weights_t *
ps_ckpt_weights_read_all (const char *path, const char *model, ps_error_t *err)
{
    return s_read (path, model, true, err);
}

void
ps_ckpt_weights_destroy (ps_ckpt_weights_t **self_p)
{
    ps_ckpt_weights_t *self = *self_p;
    if (!self)
        return;
    ps_model_destroy (&self->model);
    ps_ckpt_tables_destroy (&self->tables);
    free (self->params);
    free (self);
    *self_p = NULL;
}

const ps_model_t *
ps_ckpt_weights_model (const ps_ckpt_weights_t *self)
{
    return self->model;
}

const float *
ps_ckpt_weights_params (const ps_ckpt_weights_t *self)
{
    return self->params;
}

const char *
ps_ckpt_weights_dir (const ps_ckpt_weights_t *self)
{
    return self->dir;
}

uint64_t
ps_ckpt_weights_step (const ps_ckpt_weights_t *self)
{
    return self->step;
}

ps_ckpt_tables_t *
ps_ckpt_weights_tables (ps_ckpt_weights_t *self)
{
    return self->tables;
}
