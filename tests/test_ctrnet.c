//  Tests of the click-through-rate engine (worker/ps_ctrnet.c) against a
//  float64 reference written here from schemas/model.md alone: the loss
//  and the probabilities of the forward pass, and every gradient (dense
//  variables and the rows of every distinct key) against central finite
//  differences of the reference's mean loss. The models cover lr (a wide
//  shared table plus a linear term), a small DLRM (per-field tables into
//  an MLP), sum and mean pooling, fields side by side and summed, shared
//  tables salted by field, multi-valued weighted fields with empty ones,
//  and ids repeated within an example, across examples and across fields,
//  whose gradients must come out summed on one row. Also: the keys of a
//  table are distinct, and bad batches are refused.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness_rand.h"
#include "ps_ctrnet.h"
#include "ps_mix.h"
#include "ps_model.h"

#define S_MAX_N      8
#define S_MAX_IDS    512

//  A batch and the values the tables hold for it.
typedef struct {
    const ps_model_t *model;
    const ps_ctrmodel_t *ctr;
    size_t n;
    float labels [S_MAX_N];
    float dense [S_MAX_N * 8];
    uint32_t offsets [S_MAX_N * 8 + 1];
    uint64_t ids [S_MAX_IDS];
    float weights [S_MAX_IDS];
    bool weighted;
    //  Each table's row of each key: keys [t][r], rows [t][r * dim + d].
    size_t nkeys [16];
    uint64_t keys [16][S_MAX_IDS];
    double rows [16][S_MAX_IDS * 4];
} s_case_t;

//  The row of key in table t (added to the case when first asked for):
//  numbers in [-0.5, 0.5) drawn from the key.
static double *
s_row (s_case_t *c, int t, uint64_t key)
{
    uint32_t dim = c->ctr->tables [t].spec.dim;
    for (size_t r = 0; r < c->nkeys [t]; r++)
        if (c->keys [t][r] == key)
            return &c->rows [t][r * dim];
    assert_true (c->nkeys [t] < S_MAX_IDS);
    size_t r = c->nkeys [t]++;
    c->keys [t][r] = key;
    uint64_t state = key * 31 + (uint64_t) t;
    for (uint32_t d = 0; d < dim; d++)
        c->rows [t][r * dim + d] = harness_unit (&state) - 0.5;
    return &c->rows [t][r * dim];
}

//  The key of an id of field f in a table: salted by the field when the
//  table is shared (schemas/model.md: id ^ mix64 (f + 1)).
static uint64_t
s_key (const ps_ctr_embedding_t *e, int f, uint64_t id)
{
    return e->shared ? id ^ ps_mix64 ((uint64_t) f + 1) : id;
}

//  The reference: the mean binary cross-entropy of the batch with dense
//  variables p (float64) and the case's rows; probs (may be NULL)
//  receives the probabilities.
static double
s_reference (s_case_t *c, const double *p, double *probs)
{
    const ps_ctrmodel_t *ctr = c->ctr;
    const int nf = ctr->fields;
    double loss = 0;
    for (size_t i = 0; i < c->n; i++) {
        double x [1024] = { 0 }, y [1024];
        double wide = 0;
        for (int ei = 0; ei < ctr->embedding_count; ei++) {
            const ps_ctr_embedding_t *e = &ctr->embeddings [ei];
            for (int j = 0; j < e->nfields; j++) {
                int f = e->fields [j];
                int t = e->table + (e->shared ? 0 : j);
                uint32_t a = c->offsets [i * nf + f], b = c->offsets [i * nf + f + 1];
                double pooled [16] = { 0 }, wsum = 0;
                for (uint32_t k = a; k < b; k++) {
                    double w = c->weighted ? c->weights [k] : 1.0;
                    const double *row = s_row (c, t, s_key (e, f, c->ids [k]));
                    for (uint32_t d = 0; d < e->dim; d++)
                        pooled [d] += w * row [d];
                    wsum += w;
                }
                if (e->pooling == PS_CTR_POOL_MEAN)
                    for (uint32_t d = 0; d < e->dim; d++)
                        pooled [d] = wsum != 0 ? pooled [d] / wsum : 0;
                if (e->wide)
                    wide += pooled [0];
                else
                    for (uint32_t d = 0; d < e->dim; d++)
                        x [e->out_offset + (e->sum_fields ? 0 : j * (int) e->dim) + (int) d]
                            += pooled [d];
            }
        }
        for (int d = 0; d < ctr->dense; d++)
            x [ctr->concat - ctr->dense + d] = c->dense [i * (size_t) ctr->dense + d];
        int width = ctr->concat;
        for (int li = 0; li < ps_model_layer_count (c->model); li++) {
            const ps_layer_t *l = ps_model_layer (c->model, li);
            if (l->kind != PS_LAYER_DENSE)
                continue;
            const double *kernel = l->kernel >= 0
                                 ? p + ps_model_variable (c->model, l->kernel)->offset : NULL;
            const double *bias = l->bias >= 0
                               ? p + ps_model_variable (c->model, l->bias)->offset : NULL;
            for (int o = 0; o < l->out_c; o++) {
                double s = bias ? bias [o] : 0;
                for (int in = 0; in < width && kernel; in++)
                    s += x [in] * kernel [in * l->out_c + o];
                y [o] = l->relu && s < 0 ? 0 : s;
            }
            width = l->out_c;
            memcpy (x, y, (size_t) width * sizeof (double));
        }
        double z = x [0] + wide;
        double label = c->labels [i];
        loss += (z > 0 ? z + log1p (exp (-z)) : log1p (exp (z))) - label * z;
        if (probs)
            probs [i] = 1.0 / (1.0 + exp (-z));
    }
    return loss / (double) c->n;
}

//  A batch of n examples: per (example, field) up to max_ids ids (some
//  fields empty when empty_ok) from a vocabulary of vocab ids, so that ids
//  repeat within examples, across examples and, since fields share the
//  vocabulary, across fields.
static void
s_make_batch (s_case_t *c, const ps_model_t *model, size_t n, int max_ids, bool empty_ok,
              uint64_t vocab, bool weighted, uint64_t seed)
{
    memset (c, 0, sizeof *c);
    c->model = model;
    c->ctr = ps_model_ctr (model);
    c->n = n;
    c->weighted = weighted;
    uint32_t at = 0;
    int nf = c->ctr->fields;
    for (size_t i = 0; i < n; i++) {
        c->labels [i] = (float) (harness_splitmix (&seed) & 1);
        for (int d = 0; d < c->ctr->dense; d++)
            c->dense [i * (size_t) c->ctr->dense + d] = (float) (harness_unit (&seed) * 2.0);
        for (int f = 0; f < nf; f++) {
            c->offsets [i * nf + f] = at;
            int count = (int) (harness_splitmix (&seed) % (uint64_t) (max_ids + 1));
            if (!empty_ok && count == 0)
                count = 1;
            for (int k = 0; k < count; k++) {
                assert_true (at < S_MAX_IDS);
                c->ids [at] = 1000 + harness_splitmix (&seed) % vocab;
                c->weights [at] = (float) (0.5 + harness_unit (&seed));
                at++;
            }
        }
    }
    c->offsets [n * nf] = at;
}

//  Map the batch, fill the rows the engine asks for from the case, and
//  check that each table's keys are distinct.
static void
s_map_and_fill (ps_ctrnet_t *net, s_case_t *c)
{
    ps_ctrnet_batch_t batch = {
        .n = c->n, .labels = c->labels, .dense = c->dense, .offsets = c->offsets,
        .ids = c->ids, .weights = c->weighted ? c->weights : NULL,
    };
    ps_error_t err = { 0 };
    if (ps_ctrnet_map (net, &batch, &err))
        fail_msg ("map: %s", err.msg);
    for (int t = 0; t < c->ctr->table_count; t++) {
        const uint64_t *keys;
        size_t count = ps_ctrnet_keys (net, t, &keys);
        uint32_t dim = c->ctr->tables [t].spec.dim;
        float *rows = ps_ctrnet_rows (net, t);
        for (size_t r = 0; r < count; r++) {
            for (size_t q = 0; q < r; q++)
                if (keys [q] == keys [r])
                    fail_msg ("table %d: key %llu twice", t, (unsigned long long) keys [r]);
            const double *row = s_row (c, t, keys [r]);
            for (uint32_t d = 0; d < dim; d++)
                rows [r * dim + d] = (float) row [d];
        }
    }
}

//  |analytic - numeric| within float32's reach of the gradient's size.
static void
s_assert_close (double analytic, double numeric, const char *what, size_t index)
{
    if (fabs (analytic - numeric) > 2e-5 + 2e-3 * fabs (numeric))
        fail_msg ("%s %zu: backward %.8g, finite differences %.8g", what, index, analytic,
                  numeric);
}

//  The whole check for one model and batch shape.
static void
s_check_model (const char *json, size_t n, int max_ids, bool empty_ok, uint64_t vocab,
               bool weighted, uint64_t seed)
{
    ps_error_t err = { 0 };
    ps_model_t *model = ps_model_parse (json, "test", &err);
    if (!model)
        fail_msg ("%s", err.msg);
    size_t np = ps_model_param_count (model);
    float *params = malloc (np * sizeof *params);
    float *grads = malloc (np * sizeof *grads);
    double *p = malloc (np * sizeof *p);
    assert_true (params && grads && p);
    ps_model_init_params (model, seed, params);
    //  Biases away from zero, so that their gradients are tested in full.
    uint64_t state = seed;
    for (size_t i = 0; i < np; i++) {
        if (params [i] == 0.0f)
            params [i] = (float) (harness_unit (&state) - 0.5) * 0.2f;
        p [i] = params [i];
    }
    s_case_t *c = malloc (sizeof *c);
    assert_non_null (c);
    s_make_batch (c, model, n, max_ids, empty_ok, vocab, weighted, seed);
    ps_ctrnet_t *net = ps_ctrnet_new (model, S_MAX_N, &err);
    if (!net)
        fail_msg ("%s", err.msg);
    s_map_and_fill (net, c);
    float probs [S_MAX_N];
    double loss = ps_ctrnet_forward (net, params, probs) / (double) n;
    ps_ctrnet_backward (net, params, grads);
    double ref_probs [S_MAX_N];
    double ref = s_reference (c, p, ref_probs);
    if (fabs (loss - ref) > 1e-5 * fabs (ref))
        fail_msg ("loss %.8g, reference %.8g", loss, ref);
    for (size_t i = 0; i < n; i++)
        assert_true (fabs (probs [i] - ref_probs [i]) < 1e-6);

    const double h = 1e-4;
    for (size_t i = 0; i < np; i++) {
        double keep = p [i];
        p [i] = keep + h;
        double up = s_reference (c, p, NULL);
        p [i] = keep - h;
        double down = s_reference (c, p, NULL);
        p [i] = keep;
        s_assert_close (grads [i], (up - down) / (2 * h), "dense parameter", i);
    }
    size_t rows_checked = 0;
    for (int t = 0; t < c->ctr->table_count; t++) {
        const uint64_t *keys;
        size_t count = ps_ctrnet_keys (net, t, &keys);
        uint32_t dim = c->ctr->tables [t].spec.dim;
        const float *row_grads = ps_ctrnet_row_grads (net, t);
        for (size_t r = 0; r < count; r++)
            for (uint32_t d = 0; d < dim; d++) {
                double *value = &s_row (c, t, keys [r]) [d];
                double keep = *value;
                *value = keep + h;
                double up = s_reference (c, p, NULL);
                *value = keep - h;
                double down = s_reference (c, p, NULL);
                *value = keep;
                s_assert_close (row_grads [r * dim + d], (up - down) / (2 * h), "row value",
                                r * dim + d);
                rows_checked++;
            }
    }
    printf ("  %s: loss %.6f, %zu dense parameters and %zu row values checked\n",
            ps_model_name (model), loss, np, rows_checked);
    assert_true (rows_checked > 0);
    ps_ctrnet_destroy (&net);
    assert_null (net);
    free (c);
    free (p);
    free (grads);
    free (params);
    ps_model_destroy (&model);
}

static void
test_lr (void **state)
{
    (void) state;
    //  lr's shape at a small size: a shared wide table over 5 fields (the
    //  same id in two fields two rows), a linear term on 3 dense features.
    s_check_model ("{\"name\": \"lr-small\", \"inputs\": {\"dense\": 3, \"fields\": 5},"
                   " \"layers\": [{\"type\": \"Embedding\", \"dim\": 1, \"tables\": \"shared\","
                   "  \"combine\": \"sum\", \"wide\": true}, {\"type\": \"Concatenate\"},"
                   "  {\"type\": \"Dense\", \"units\": 1}]}", 8, 1, false, 6, false, 1);
}

static void
test_dlrm (void **state)
{
    (void) state;
    //  dlrm's shape at a small size: a table per field, side by side with
    //  the dense features into a relu MLP; one id per field, from a
    //  vocabulary small enough that examples share rows.
    s_check_model ("{\"name\": \"dlrm-small\", \"inputs\": {\"dense\": 3, \"fields\": 4},"
                   " \"layers\": [{\"type\": \"Embedding\", \"dim\": 4},"
                   "  {\"type\": \"Concatenate\"},"
                   "  {\"type\": \"Dense\", \"units\": 6, \"activation\": \"relu\"},"
                   "  {\"type\": \"Dense\", \"units\": 5, \"activation\": \"relu\"},"
                   "  {\"type\": \"Dense\", \"units\": 1}]}", 8, 1, false, 3, false, 2);
}

static void
test_pooling_and_sharing (void **state)
{
    (void) state;
    //  Multi-valued weighted fields, some empty: a shared table with mean
    //  pooling summed over two fields, per-field tables with sum pooling
    //  side by side, and a wide table on every field.
    const char *json =
        "{\"name\": \"mixed\", \"inputs\": {\"dense\": 2, \"fields\": 4},"
        " \"layers\": ["
        "  {\"type\": \"Embedding\", \"name\": \"s\", \"dim\": 2, \"fields\": [0, 2],"
        "   \"tables\": \"shared\", \"pooling\": \"mean\", \"combine\": \"sum\"},"
        "  {\"type\": \"Embedding\", \"name\": \"p\", \"dim\": 3, \"fields\": [3, 1]},"
        "  {\"type\": \"Embedding\", \"name\": \"w\", \"dim\": 1, \"wide\": true,"
        "   \"pooling\": \"mean\"},"
        "  {\"type\": \"Concatenate\"},"
        "  {\"type\": \"Dense\", \"units\": 4, \"activation\": \"relu\"},"
        "  {\"type\": \"Dense\", \"units\": 1}]}";
    s_check_model (json, 6, 3, true, 5, true, 3);
    s_check_model (json, 7, 4, true, 40, false, 4);
}

static void
test_wide_only (void **state)
{
    (void) state;
    //  LIBSVM's linear model: one weighted multi-valued field, no dense
    //  features, a bias alone after an empty Concatenate.
    s_check_model ("{\"name\": \"libsvm-lr\", \"inputs\": {\"fields\": 1}, \"layers\": ["
                   "  {\"type\": \"Embedding\", \"dim\": 1, \"wide\": true},"
                   "  {\"type\": \"Concatenate\"}, {\"type\": \"Dense\", \"units\": 1}]}",
                   8, 6, true, 10, true, 5);
}

//  The same row named by two examples and twice in one field: one key,
//  one gradient row holding the sum of the three contributions.
static void
test_duplicates_summed (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    ps_model_t *model = ps_model_parse (
        "{\"inputs\": {\"fields\": 1}, \"layers\": [{\"type\": \"Embedding\", \"dim\": 1,"
        " \"wide\": true}, {\"type\": \"Concatenate\"}, {\"type\": \"Dense\", \"units\": 1}]}",
        "test", &err);
    assert_non_null (model);
    ps_ctrnet_t *net = ps_ctrnet_new (model, 4, &err);
    assert_non_null (net);
    float labels [2] = { 1, 0 };
    uint32_t offsets [3] = { 0, 2, 3 };
    uint64_t ids [3] = { 7, 7, 7 };
    ps_ctrnet_batch_t batch = { .n = 2, .labels = labels, .offsets = offsets, .ids = ids };
    assert_int_equal (ps_ctrnet_map (net, &batch, &err), 0);
    const uint64_t *keys;
    assert_int_equal (ps_ctrnet_keys (net, 0, &keys), 1);
    assert_int_equal (keys [0], 7);
    ps_ctrnet_rows (net, 0) [0] = 0.0f;
    float params [1] = { 0.0f }, grads [1];
    //  Both logits are 0, so p = 1/2: dlogit = (1/2 - y) / 2, and the row
    //  is counted twice in example 0 and once in example 1.
    double loss = ps_ctrnet_forward (net, params, NULL);
    assert_true (fabs (loss - 2 * log (2.0)) < 1e-6);
    ps_ctrnet_backward (net, params, grads);
    float want = 2 * (0.5f - 1) / 2 + (0.5f - 0) / 2;
    assert_true (fabs (ps_ctrnet_row_grads (net, 0) [0] - want) < 1e-7);
    assert_true (fabs (grads [0] - ((0.5f - 1) / 2 + 0.5f / 2)) < 1e-7);
    ps_ctrnet_destroy (&net);
    ps_model_destroy (&model);
}

static void
test_refusals (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    ps_model_t *image = ps_model_load ("mlp", &err);
    assert_non_null (image);
    assert_null (ps_ctrnet_new (image, 4, &err));
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "not a click-through-rate model"));
    ps_model_destroy (&image);

    ps_model_t *model = ps_model_load ("lr", &err);
    assert_non_null (model);
    ps_ctrnet_t *net = ps_ctrnet_new (model, 2, &err);
    assert_non_null (net);
    float labels [3] = { 0, 2, 1 }, dense [3 * 13] = { 0 };
    uint32_t offsets [3 * 26 + 1] = { 0 };
    uint64_t ids [1] = { 0 };
    ps_ctrnet_batch_t batch = { .n = 3, .labels = labels, .dense = dense, .offsets = offsets,
                                .ids = ids };
    assert_int_equal (ps_ctrnet_map (net, &batch, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "a batch of 3 examples, but the engine takes 1 to 2"));
    batch.n = 2;
    assert_int_equal (ps_ctrnet_map (net, &batch, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "example 1 of the batch: label 2"));
    labels [1] = 1;
    offsets [30] = 1;
    assert_int_equal (ps_ctrnet_map (net, &batch, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "example 1 of the batch: the ids' offsets go back"));
    ps_ctrnet_destroy (&net);
    ps_model_destroy (&model);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_lr),
        cmocka_unit_test (test_dlrm),
        cmocka_unit_test (test_pooling_and_sharing),
        cmocka_unit_test (test_wide_only),
        cmocka_unit_test (test_duplicates_summed),
        cmocka_unit_test (test_refusals),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
