//  The click-through-rate part of a model; see ps_ctrmodel.h.
//
//  The spec reached here after the schema (schemas/model.schema.json)
//  accepted it, so every field has its type and range; a field left out
//  takes the schema's default (ps_schemadoc_field). What the schema cannot
//  say is checked here: the fields an embedding names exist, and a wide
//  embedding has rows of one float.

#include "ps_ctrmodel.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_jsonvalue.h"
#include "ps_schemadoc.h"

//  The numbers of a row optimizer's object, by their key in the spec.
static const struct {
    const char *key;
    size_t offset;
} s_rowopt_keys [] = {
    { "lr", offsetof (ps_rowopt_t, lr) },
    { "beta1", offsetof (ps_rowopt_t, beta1) },
    { "beta2", offsetof (ps_rowopt_t, beta2) },
    { "epsilon", offsetof (ps_rowopt_t, epsilon) },
    { "initial_accumulator", offsetof (ps_rowopt_t, initial_accumulator) },
    { "l1", offsetof (ps_rowopt_t, l1) },
    { "l2", offsetof (ps_rowopt_t, l2) },
    { "lr_power", offsetof (ps_rowopt_t, lr_power) },
    { "beta", offsetof (ps_rowopt_t, beta) },
};

//  The value of key in obj or its default in the schema's definition def.
static const json_t *
s_get (const json_t *obj, const json_t *defs, const char *def, const char *key)
{
    return ps_schemadoc_field (obj, json_object_get (json_object_get (defs, def), "properties"),
                               key);
}

static const char *
s_string (const json_t *obj, const json_t *defs, const char *def, const char *key)
{
    return json_string_value (s_get (obj, defs, def, key));
}

static double
s_number (const json_t *obj, const json_t *defs, const char *def, const char *key)
{
    return json_number_value (s_get (obj, defs, def, key));
}

static uint64_t
s_uint (const json_t *obj, const json_t *defs, const char *def, const char *key)
{
    return (uint64_t) ps_jsonvalue_integer (s_get (obj, defs, def, key));
}

ps_ctrmodel_t *
ps_ctrmodel_new (const json_t *inputs, const json_t *optimizer, const char *where,
                 ps_error_t *err)
{
    ps_ctrmodel_t *self = calloc (1, sizeof *self);
    if (!self) {
        ps_error_set (err, PS_ETOOBIG, "%s: out of memory", where);
        return NULL;
    }
    const json_t *dense = json_object_get (inputs, "dense");
    self->dense = dense ? (int) ps_jsonvalue_integer (dense) : 0;
    self->fields = (int) ps_jsonvalue_integer (json_object_get (inputs, "fields"));
    ps_opt_config_default (&self->optimizer, PS_OPT_ADAM);
    if (optimizer) {
        ps_opt_kind_t kind;
        //  The schema let through only the kinds there are.
        ps_opt_kind_parse (json_string_value (json_object_get (optimizer, "kind")), &kind, NULL);
        ps_opt_config_default (&self->optimizer, kind);
        const json_t *lr = json_object_get (optimizer, "lr");
        if (lr)
            self->optimizer.lr = json_number_value (lr);
    }
    return self;
}

void
ps_ctrmodel_destroy (ps_ctrmodel_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ps_ctrmodel_t *self = *self_p;
    free (self->embeddings);
    free (self->tables);
    free (self);
    *self_p = NULL;
}

//  The tables' initializer, optimizer, admission and eviction from the
//  layer's objects (absent ones keep ps_tablespec_default's values, which
//  are the schema's defaults).
static void
s_table_options (ps_tablespec_t *spec, const json_t *obj, const json_t *defs)
{
    const json_t *init = json_object_get (obj, "initializer");
    if (init) {
        //  The schema let through only the kinds there are.
        ps_init_kind_parse (s_string (init, defs, "row_initializer", "kind"), &spec->init.kind,
                            NULL);
        spec->init.value = s_number (init, defs, "row_initializer", "value");
        spec->init.low = s_number (init, defs, "row_initializer", "low");
        spec->init.high = s_number (init, defs, "row_initializer", "high");
        spec->init.mean = s_number (init, defs, "row_initializer", "mean");
        spec->init.stddev = s_number (init, defs, "row_initializer", "stddev");
        spec->init.seed = s_uint (init, defs, "row_initializer", "seed");
    }
    const json_t *opt = json_object_get (obj, "optimizer");
    if (opt) {
        ps_rowopt_kind_t kind;
        ps_rowopt_kind_parse (json_string_value (json_object_get (opt, "kind")), &kind, NULL);
        ps_rowopt_default (&spec->opt, kind);
        for (size_t i = 0; i < sizeof s_rowopt_keys / sizeof s_rowopt_keys [0]; i++) {
            const json_t *value = json_object_get (opt, s_rowopt_keys [i].key);
            if (value)
                *(double *) ((char *) &spec->opt + s_rowopt_keys [i].offset)
                    = json_number_value (value);
        }
    }
    const json_t *admission = json_object_get (obj, "admission");
    if (admission) {
        spec->admit_count = (uint32_t) s_uint (admission, defs, "admission", "count");
        spec->admit_prob = s_number (admission, defs, "admission", "probability");
    }
    const json_t *eviction = json_object_get (obj, "eviction");
    if (eviction) {
        spec->capacity = s_uint (eviction, defs, "eviction", "capacity");
        spec->ttl = s_uint (eviction, defs, "eviction", "ttl");
        ps_evict_policy_parse (s_string (eviction, defs, "eviction", "policy"), &spec->policy,
                               NULL);
    }
}

//  Append the tables of embedding e; every table of the layer gets the
//  same options, and a seed of its own for its rows.
static int
s_add_tables (ps_ctrmodel_t *self, ps_ctr_embedding_t *e, const char *name, const json_t *obj,
              const json_t *defs, const char *where, ps_error_t *err)
{
    int count = e->shared ? 1 : e->nfields;
    ps_ctr_table_t *tables = realloc (self->tables,
                                      (size_t) (self->table_count + count) * sizeof *tables);
    if (!tables)
        return ps_error_set (err, PS_ETOOBIG, "%s: out of memory for %d tables", where, count);
    self->tables = tables;
    e->table = self->table_count;
    for (int j = 0; j < count; j++) {
        ps_ctr_table_t *t = &tables [self->table_count + j];
        char table_name [PS_NAME_MAX];
        if (e->shared)
            snprintf (table_name, sizeof table_name, "%s/table", name);
        else
            snprintf (table_name, sizeof table_name, "%s/f%d", name, e->fields [j]);
        ps_tablespec_default (&t->spec, table_name, e->dim);
        s_table_options (&t->spec, obj, defs);
        //  Tables of one layer draw their rows from streams of their own,
        //  so that two fields' rows of the same id differ.
        t->spec.init.seed = ps_mix_draw (ps_mix64 (t->spec.init.seed),
                                         (uint64_t) (self->table_count + j));
        t->embedding = self->embedding_count - 1;
        t->field = e->shared ? -1 : e->fields [j];
        int rc = ps_tablespec_validate (&t->spec, err);
        if (rc)
            return ps_error_prefix (err, rc, "%s", where);
    }
    self->table_count += count;
    return 0;
}

int
ps_ctrmodel_add_embedding (ps_ctrmodel_t *self, int layer, const char *name, const json_t *obj,
                           const json_t *defs, const char *where, int *out_size,
                           ps_error_t *err)
{
    ps_ctr_embedding_t *list = realloc (self->embeddings,
                                        (size_t) (self->embedding_count + 1) * sizeof *list);
    if (!list)
        return ps_error_set (err, PS_ETOOBIG, "%s: out of memory", where);
    self->embeddings = list;
    ps_ctr_embedding_t *e = &list [self->embedding_count++];
    memset (e, 0, sizeof *e);
    e->layer = layer;
    e->dim = (uint32_t) ps_jsonvalue_integer (json_object_get (obj, "dim"));
    const json_t *fields = s_get (obj, defs, "Embedding", "fields");
    e->nfields = fields ? (int) json_array_size (fields) : self->fields;
    for (int j = 0; j < e->nfields; j++) {
        e->fields [j] = fields ? (int) ps_jsonvalue_integer (json_array_get (fields, j)) : j;
        if (e->fields [j] >= self->fields)
            return ps_error_set (err, PS_EINVAL, "%s: field %d is not among the model's %d "
                                 "inputs.fields (they count from 0)", where, e->fields [j],
                                 self->fields);
        for (int k = 0; k < j; k++)
            if (e->fields [k] == e->fields [j])
                return ps_error_set (err, PS_EINVAL, "%s: field %d is listed twice in "
                                     "\"fields\"", where, e->fields [j]);
    }
    e->shared = strcmp (s_string (obj, defs, "Embedding", "tables"), "shared") == 0;
    e->pooling = strcmp (s_string (obj, defs, "Embedding", "pooling"), "mean") == 0
               ? PS_CTR_POOL_MEAN : PS_CTR_POOL_SUM;
    e->sum_fields = strcmp (s_string (obj, defs, "Embedding", "combine"), "sum") == 0;
    e->wide = json_is_true (s_get (obj, defs, "Embedding", "wide"));
    if (e->wide && e->dim != 1)
        return ps_error_set (err, PS_EINVAL, "%s: a wide embedding adds its rows to the logit, "
                             "so its dim must be 1, not %u", where, e->dim);
    e->out_size = e->wide ? 0 : (int) e->dim * (e->sum_fields ? 1 : e->nfields);
    e->out_offset = -1;
    self->has_wide |= e->wide;
    *out_size = e->out_size;
    return s_add_tables (self, e, name, obj, defs, where, err);
}

int
ps_ctrmodel_concatenate (ps_ctrmodel_t *self)
{
    int at = 0;
    for (int i = 0; i < self->embedding_count; i++) {
        ps_ctr_embedding_t *e = &self->embeddings [i];
        if (!e->wide) {
            e->out_offset = at;
            at += e->out_size;
        }
    }
    self->concat = at + self->dense;
    return self->concat;
}

int
ps_ctrmodel_find_table (const ps_ctrmodel_t *self, const char *name)
{
    for (int i = 0; i < self->table_count; i++)
        if (strcmp (self->tables [i].spec.name, name) == 0)
            return i;
    return -1;
}
