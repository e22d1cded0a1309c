//  The CPU engine of click-through-rate models; see ps_ctrnet.h.
//
//  The batch's (example, field) entries are walked in one order everywhere:
//  embedding by embedding, example by example, field by field, id by id.
//  Mapping records, in that order, each table's keys and their positions
//  among its distinct keys (occ_index); the forward and backward passes
//  walk the same order with a cursor per table, so entry k of a table's
//  walk reads row occ_index [k].

#include "ps_ctrnet.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ps_cpu_ops.h"
#include "ps_floats.h"
#include "ps_idmap.h"

typedef struct {
    uint32_t dim;
    ps_idmap_t *map;
    uint64_t *occ_keys;         //  the keys of the batch's entries, in walk order
    uint32_t *occ_index;        //  their positions among the distinct keys
    size_t occ_count;
    size_t occ_capacity;
    float *rows;                //  count * dim: filled by the caller
    float *row_grads;           //  count * dim
    size_t rows_capacity;       //  keys the two have room for
    size_t cursor;              //  the walk's position in occ_index
} s_table_t;

struct _ps_ctrnet_t {
    const ps_model_t *model;
    const ps_ctrmodel_t *ctr;
    int max_batch;
    int ntables;
    s_table_t *tables;
    int first_dense;            //  the layer after Concatenate
    int last;                   //  the last layer, the logit's
    float *x0;                  //  [max_batch, concat]: Concatenate's output
    float **acts;               //  per Dense layer, [max_batch, units]
    float *dy_a, *dy_b;         //  [max_batch, widest]: the backward pass's gradients
    float *wide;                //  [max_batch]: what wide embeddings add to the logit
    float *logits;              //  [max_batch]
    float *dlogits;             //  [max_batch]
    ps_ctrnet_batch_t batch;
};

//  Room for count floats (at least one, so that an empty layer has a
//  buffer too).
static float *
s_alloc (size_t count)
{
    return ps_floats_alloc (count ? count : 1);
}

ps_ctrnet_t *
ps_ctrnet_new (const ps_model_t *model, int max_batch, ps_error_t *err)
{
    const ps_ctrmodel_t *ctr = ps_model_ctr (model);
    if (!ctr) {
        ps_error_set (err, PS_EINVAL, "model \"%s\" is not a click-through-rate model (a spec "
                      "with \"inputs\")", ps_model_name (model));
        return NULL;
    }
    if (max_batch < 1) {
        ps_error_set (err, PS_EINVAL, "the batch size must be positive, not %d", max_batch);
        return NULL;
    }
    ps_ctrnet_t *self = calloc (1, sizeof *self);
    if (!self) {
        ps_error_set (err, PS_ETOOBIG, "out of memory for the engine of model \"%s\"",
                      ps_model_name (model));
        return NULL;
    }
    self->model = model;
    self->ctr = ctr;
    self->max_batch = max_batch;
    self->ntables = ctr->table_count;
    self->last = ps_model_layer_count (model) - 1;
    self->first_dense = self->last;
    while (ps_model_layer (model, self->first_dense - 1)->kind == PS_LAYER_DENSE)
        self->first_dense--;
    size_t widest = (size_t) ctr->concat;
    for (int i = self->first_dense; i <= self->last; i++)
        if ((size_t) ps_model_layer (model, i)->out_c > widest)
            widest = (size_t) ps_model_layer (model, i)->out_c;
    size_t n = (size_t) max_batch;
    self->tables = calloc ((size_t) self->ntables, sizeof *self->tables);
    self->acts = calloc ((size_t) self->last + 1, sizeof *self->acts);
    bool ok = self->tables && self->acts;
    for (int t = 0; ok && t < self->ntables; t++) {
        self->tables [t].dim = ctr->tables [t].spec.dim;
        ok = (self->tables [t].map = ps_idmap_new (n)) != NULL;
    }
    for (int i = self->first_dense; ok && i <= self->last; i++)
        ok = (self->acts [i] = s_alloc (n * (size_t) ps_model_layer (model, i)->out_c)) != NULL;
    if (ok) {
        self->x0 = s_alloc (n * (size_t) ctr->concat);
        self->dy_a = s_alloc (n * widest);
        self->dy_b = s_alloc (n * widest);
        self->wide = s_alloc (n);
        self->logits = s_alloc (n);
        self->dlogits = s_alloc (n);
        ok = self->x0 && self->dy_a && self->dy_b && self->wide && self->logits
          && self->dlogits;
    }
    if (!ok) {
        ps_error_set (err, PS_ETOOBIG, "out of memory for the engine of model \"%s\" and "
                      "batches of %d", ps_model_name (model), max_batch);
        ps_ctrnet_destroy (&self);
    }
    return self;
}

void
ps_ctrnet_destroy (ps_ctrnet_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ps_ctrnet_t *self = *self_p;
    for (int t = 0; self->tables && t < self->ntables; t++) {
        s_table_t *table = &self->tables [t];
        ps_idmap_destroy (&table->map);
        free (table->occ_keys);
        free (table->occ_index);
        free (table->rows);
        free (table->row_grads);
    }
    free (self->tables);
    for (int i = 0; self->acts && i <= self->last; i++)
        free (self->acts [i]);
    free (self->acts);
    free (self->x0);
    free (self->dy_a);
    free (self->dy_b);
    free (self->wide);
    free (self->logits);
    free (self->dlogits);
    free (self);
    *self_p = NULL;
}

//  The table embedding e reads for its field j.
static s_table_t *
s_table (ps_ctrnet_t *self, const ps_ctr_embedding_t *e, int j)
{
    return &self->tables [e->table + (e->shared ? 0 : j)];
}

//  Check what the engine relies on: the batch's size, its labels and
//  offsets that never go back.
static int
s_check_batch (const ps_ctrnet_t *self, const ps_ctrnet_batch_t *b, ps_error_t *err)
{
    if (b->n < 1 || b->n > (size_t) self->max_batch)
        return ps_error_set (err, PS_EINVAL, "a batch of %zu examples, but the engine takes "
                             "1 to %d", b->n, self->max_batch);
    size_t entries = b->n * (size_t) self->ctr->fields;
    for (size_t i = 0; i < b->n; i++)
        if (b->labels [i] != 0.0f && b->labels [i] != 1.0f)
            return ps_error_set (err, PS_EINVAL, "example %zu of the batch: label %g, not 0 "
                                 "or 1", i, (double) b->labels [i]);
    for (size_t k = 0; k < entries; k++)
        if (b->offsets [k + 1] < b->offsets [k])
            return ps_error_set (err, PS_EINVAL, "example %zu of the batch: the ids' offsets "
                                 "go back (%u after %u)", k / (size_t) self->ctr->fields,
                                 b->offsets [k + 1], b->offsets [k]);
    return 0;
}

//  Make room for the entries counted in occ_count, keeping nothing.
static int
s_reserve_entries (s_table_t *table)
{
    if (table->occ_count <= table->occ_capacity)
        return 0;
    free (table->occ_keys);
    free (table->occ_index);
    table->occ_keys = malloc (table->occ_count * sizeof *table->occ_keys);
    table->occ_index = malloc (table->occ_count * sizeof *table->occ_index);
    table->occ_capacity = table->occ_keys && table->occ_index ? table->occ_count : 0;
    return table->occ_capacity ? 0 : PS_ETOOBIG;
}

//  Make room for the rows of the distinct keys, keeping nothing.
static int
s_reserve_rows (s_table_t *table, size_t count)
{
    if (count <= table->rows_capacity)
        return 0;
    free (table->rows);
    free (table->row_grads);
    table->rows = ps_floats_alloc (count * table->dim);
    table->row_grads = ps_floats_alloc (count * table->dim);
    table->rows_capacity = table->rows && table->row_grads ? count : 0;
    return table->rows_capacity ? 0 : PS_ETOOBIG;
}

int
ps_ctrnet_map (ps_ctrnet_t *self, const ps_ctrnet_batch_t *batch, ps_error_t *err)
{
    int rc = s_check_batch (self, batch, err);
    if (rc)
        return rc;
    self->batch = *batch;
    const ps_ctrmodel_t *ctr = self->ctr;
    const size_t nf = (size_t) ctr->fields;
    const uint32_t *off = batch->offsets;
    for (int t = 0; t < self->ntables; t++)
        self->tables [t].occ_count = 0;
    for (int ei = 0; ei < ctr->embedding_count; ei++) {
        const ps_ctr_embedding_t *e = &ctr->embeddings [ei];
        for (size_t i = 0; i < batch->n; i++)
            for (int j = 0; j < e->nfields; j++) {
                size_t at = i * nf + (size_t) e->fields [j];
                s_table (self, e, j)->occ_count += off [at + 1] - off [at];
            }
    }
    for (int t = 0; t < self->ntables; t++) {
        if (s_reserve_entries (&self->tables [t]))
            return ps_error_set (err, PS_ETOOBIG, "out of memory for the %zu ids of table %s "
                                 "in a batch", self->tables [t].occ_count,
                                 ctr->tables [t].spec.name);
        self->tables [t].cursor = 0;
    }
    for (int ei = 0; ei < ctr->embedding_count; ei++) {
        const ps_ctr_embedding_t *e = &ctr->embeddings [ei];
        for (size_t i = 0; i < batch->n; i++)
            for (int j = 0; j < e->nfields; j++) {
                size_t at = i * nf + (size_t) e->fields [j];
                s_table_t *table = s_table (self, e, j);
                for (uint32_t k = off [at]; k < off [at + 1]; k++)
                    table->occ_keys [table->cursor++] = ps_ctrmodel_key (e, j, batch->ids [k]);
            }
    }
    for (int t = 0; t < self->ntables; t++) {
        s_table_t *table = &self->tables [t];
        ps_idmap_reset (table->map);
        if ((rc = ps_idmap_add (table->map, table->occ_keys, table->occ_count,
                                table->occ_index, err))
        ||  (rc = s_reserve_rows (table, ps_idmap_count (table->map))))
            return ps_error_set (err, PS_ETOOBIG, "out of memory for the %zu ids of table %s "
                                 "in a batch", table->occ_count, ctr->tables [t].spec.name);
    }
    return 0;
}

size_t
ps_ctrnet_keys (const ps_ctrnet_t *self, int table, const uint64_t **keys)
{
    *keys = ps_idmap_ids (self->tables [table].map);
    return ps_idmap_count (self->tables [table].map);
}

float *
ps_ctrnet_rows (ps_ctrnet_t *self, int table)
{
    return self->tables [table].rows;
}

const float *
ps_ctrnet_row_grads (const ps_ctrnet_t *self, int table)
{
    return self->tables [table].row_grads;
}

//  The factor of each row of entry [a, b): 1 for sum pooling; for mean
//  pooling one over the weights' sum, and 0 when they sum to 0 (TF's
//  divide_no_nan), so that an empty field gives zeros.
static float
s_pool_scale (const ps_ctr_embedding_t *e, const float *weights, uint32_t a, uint32_t b)
{
    if (e->pooling == PS_CTR_POOL_SUM)
        return 1.0f;
    double sum = 0;
    for (uint32_t k = a; k < b; k++)
        sum += weights ? weights [k] : 1.0;
    return sum != 0 ? (float) (1.0 / sum) : 0.0f;
}

//  Where embedding e puts field j's vector of example i: in the wide sum
//  or in Concatenate's output.
static float *
s_target (ps_ctrnet_t *self, float *x, const ps_ctr_embedding_t *e, size_t i, int j)
{
    if (e->wide)
        return &self->wide [i];
    return x + i * (size_t) self->ctr->concat + (size_t) e->out_offset
         + (e->sum_fields ? 0 : (size_t) j * e->dim);
}

//  Walk every entry in the mapping's order: for each, scale = the entry's
//  weight times its pooling factor, vec = its place in x (Concatenate's
//  output or its gradient) or the wide sum, row = its table row's index.
//  forward adds scale * row to vec; otherwise scale * vec is added to the
//  row's gradient.
static void
s_walk (ps_ctrnet_t *self, float *x, bool forward)
{
    const ps_ctrmodel_t *ctr = self->ctr;
    const ps_ctrnet_batch_t *b = &self->batch;
    const size_t nf = (size_t) ctr->fields;
    for (int t = 0; t < self->ntables; t++)
        self->tables [t].cursor = 0;
    for (int ei = 0; ei < ctr->embedding_count; ei++) {
        const ps_ctr_embedding_t *e = &ctr->embeddings [ei];
        const uint32_t dim = e->dim;
        for (size_t i = 0; i < b->n; i++)
            for (int j = 0; j < e->nfields; j++) {
                size_t at = i * nf + (size_t) e->fields [j];
                uint32_t first = b->offsets [at], end = b->offsets [at + 1];
                s_table_t *table = s_table (self, e, j);
                float pool = s_pool_scale (e, b->weights, first, end);
                float *vec = s_target (self, x, e, i, j);
                for (uint32_t k = first; k < end; k++) {
                    float scale = pool * (b->weights ? b->weights [k] : 1.0f);
                    size_t row = (size_t) table->occ_index [table->cursor++] * dim;
                    if (forward) {
                        const float *value = table->rows + row;
                        for (uint32_t d = 0; d < dim; d++)
                            vec [d] += scale * value [d];
                    }
                    else {
                        float *grad = table->row_grads + row;
                        for (uint32_t d = 0; d < dim; d++)
                            grad [d] += scale * vec [d];
                    }
                }
            }
    }
}

//  A Dense layer without a kernel (on an empty Concatenate): its bias, and
//  the ReLU when it has one.
static void
s_bias_only (const ps_layer_t *l, size_t n, const float *bias, float *y)
{
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < l->out_c; c++) {
            float v = bias ? bias [c] : 0.0f;
            y [i * (size_t) l->out_c + c] = l->relu && v < 0.0f ? 0.0f : v;
        }
}

double
ps_ctrnet_forward (ps_ctrnet_t *self, const float *params, float *probs)
{
    const ps_ctrmodel_t *ctr = self->ctr;
    const ps_ctrnet_batch_t *b = &self->batch;
    const size_t n = b->n, concat = (size_t) ctr->concat, nd = (size_t) ctr->dense;
    memset (self->x0, 0, n * concat * sizeof (float));
    memset (self->wide, 0, n * sizeof (float));
    s_walk (self, self->x0, true);
    for (size_t i = 0; i < n && nd; i++)
        memcpy (self->x0 + i * concat + concat - nd, b->dense + i * nd, nd * sizeof (float));
    const float *x = self->x0;
    for (int li = self->first_dense; li <= self->last; li++) {
        const ps_layer_t *l = ps_model_layer (self->model, li);
        const float *kernel = l->kernel >= 0
                            ? params + ps_model_variable (self->model, l->kernel)->offset : NULL;
        const float *bias = l->bias >= 0
                          ? params + ps_model_variable (self->model, l->bias)->offset : NULL;
        if (kernel)
            ps_cpu_dense_forward (l, (int) n, x, kernel, bias, self->acts [li]);
        else
            s_bias_only (l, n, bias, self->acts [li]);
        x = self->acts [li];
    }
    double loss = 0;
    for (size_t i = 0; i < n; i++) {
        float z = x [i] + self->wide [i];
        self->logits [i] = z;
        //  softplus (z) - y z, with softplus (z) = max (z, 0) + log1p (exp (-|z|)),
        //  which neither overflows nor loses the small values.
        loss += fmax (z, 0.0) - b->labels [i] * (double) z + log1p (exp (-fabs ((double) z)));
        if (probs)
            probs [i] = (float) (z >= 0 ? 1.0 / (1.0 + exp (-(double) z))
                                        : exp ((double) z) / (1.0 + exp ((double) z)));
    }
    return loss;
}

void
ps_ctrnet_backward (ps_ctrnet_t *self, const float *params, float *grads)
{
    const ps_ctrmodel_t *ctr = self->ctr;
    const ps_ctrnet_batch_t *b = &self->batch;
    const size_t n = b->n;
    for (size_t i = 0; i < n; i++) {
        double z = self->logits [i];
        double p = z >= 0 ? 1.0 / (1.0 + exp (-z)) : exp (z) / (1.0 + exp (z));
        self->dlogits [i] = (float) ((p - b->labels [i]) / (double) n);
    }
    memcpy (self->dy_a, self->dlogits, n * sizeof (float));
    float *dy = self->dy_a, *spare = self->dy_b;
    //  Concatenate's gradient is wanted only when some embedding feeds it.
    bool need_dx0 = ctr->concat > ctr->dense;
    for (int li = self->last; li >= self->first_dense; li--) {
        const ps_layer_t *l = ps_model_layer (self->model, li);
        const ps_variable_t *kv = l->kernel >= 0 ? ps_model_variable (self->model, l->kernel)
                                                 : NULL;
        const ps_variable_t *bv = l->bias >= 0 ? ps_model_variable (self->model, l->bias)
                                               : NULL;
        const float *x = li == self->first_dense ? self->x0 : self->acts [li - 1];
        float *dx = li > self->first_dense || need_dx0 ? spare : NULL;
        if (kv)
            ps_cpu_dense_backward (l, (int) n, x, self->acts [li], params + kv->offset, dy, dx,
                                   grads + kv->offset, bv ? grads + bv->offset : NULL);
        else
        if (bv) {
            //  A bias alone: its gradient is dy's sum where the ReLU let
            //  the value through.
            float *dbias = grads + bv->offset;
            memset (dbias, 0, (size_t) l->out_c * sizeof (float));
            for (size_t i = 0; i < n; i++)
                for (int c = 0; c < l->out_c; c++) {
                    size_t at = i * (size_t) l->out_c + c;
                    if (!l->relu || self->acts [li][at] > 0.0f)
                        dbias [c] += dy [at];
                }
        }
        float *tmp = dy;
        dy = spare;
        spare = tmp;
    }
    //  dy is now Concatenate's gradient (when wanted); the wide embeddings'
    //  is the logit's.
    for (int t = 0; t < self->ntables; t++)
        memset (self->tables [t].row_grads, 0,
                ps_idmap_count (self->tables [t].map) * self->tables [t].dim * sizeof (float));
    memcpy (self->wide, self->dlogits, n * sizeof (float));
    s_walk (self, dy, false);
}
