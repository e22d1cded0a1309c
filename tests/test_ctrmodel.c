//  Unit tests for click-through-rate model specs (common/model/ps_model.c
//  with common/model/ps_ctrmodel.c): the built-in lr and dlrm resolve to
//  the layers, variables and tables schemas/model.md gives them; a spec
//  with several embeddings lays out their tables, options and outputs;
//  a model of wide embeddings alone has a bias for its only variable; the
//  salted keys of a shared table differ by field; and every mistake a
//  schema cannot catch is refused with a message naming the layer and
//  what was expected.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ps_model.h"

static ps_model_t *
s_parse_ok (const char *json)
{
    ps_error_t err = { 0 };
    ps_model_t *model = ps_model_parse (json, "test", &err);
    if (!model)
        fail_msg ("spec refused: %s\n%s", err.msg, json);
    return model;
}

static void
s_assert_variable (const ps_model_t *model, const char *name, int64_t rows, int64_t cols)
{
    int index = ps_model_find_variable (model, name);
    if (index < 0)
        fail_msg ("model %s has no variable %s", ps_model_name (model), name);
    const ps_variable_t *v = ps_model_variable (model, index);
    assert_int_equal (v->shape.rank, cols ? 2 : 1);
    assert_int_equal (v->shape.dims [0], rows);
    if (cols)
        assert_int_equal (v->shape.dims [1], cols);
}

static void
test_dlrm (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    ps_model_t *model = ps_model_load ("dlrm", &err);
    if (!model)
        fail_msg ("%s", err.msg);
    const ps_ctrmodel_t *ctr = ps_model_ctr (model);
    assert_non_null (ctr);
    assert_int_equal (ctr->dense, 13);
    assert_int_equal (ctr->fields, 26);
    assert_int_equal (ctr->embedding_count, 1);
    assert_int_equal (ctr->table_count, 26);
    assert_int_equal (ctr->concat, 26 * 16 + 13);
    assert_false (ctr->has_wide);
    assert_int_equal (ctr->optimizer.kind, PS_OPT_ADAM);
    assert_true (ctr->optimizer.lr == 0.001);
    const ps_ctr_embedding_t *e = &ctr->embeddings [0];
    assert_int_equal (e->dim, 16);
    assert_int_equal (e->out_offset, 0);
    assert_int_equal (e->out_size, 26 * 16);
    for (int f = 0; f < 26; f++) {
        const ps_ctr_table_t *t = &ctr->tables [f];
        char name [32];
        snprintf (name, sizeof name, "embedding/f%d", f);
        assert_string_equal (t->spec.name, name);
        assert_int_equal (t->field, f);
        assert_int_equal (t->spec.dim, 16);
        assert_int_equal (t->spec.opt.kind, PS_ROWOPT_ADAGRAD);
        assert_true (t->spec.opt.lr == 0.05);
        assert_int_equal (t->spec.init.kind, PS_INIT_UNIFORM);
        assert_int_equal (ps_ctrmodel_find_table (ctr, name), f);
        //  Every table draws its rows from a stream of its own.
        if (f > 0)
            assert_true (t->spec.init.seed != ctr->tables [f - 1].spec.init.seed);
    }
    //  The MLP 429-256-128-1 is the model's variables, Keras's names.
    assert_int_equal (ps_model_variable_count (model), 6);
    s_assert_variable (model, "dense/kernel", 429, 256);
    s_assert_variable (model, "dense_1/kernel", 256, 128);
    s_assert_variable (model, "dense_2/kernel", 128, 1);
    s_assert_variable (model, "dense_2/bias", 1, 0);
    assert_int_equal (ps_model_param_count (model), 429 * 256 + 256 + 256 * 128 + 128 + 129);
    //  The image engines are not for it, and say so.
    assert_int_equal (ps_model_check_batch (model, 64, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "click-through-rate"));
    assert_int_equal (ps_model_check_input (model, 28, 28, 1, 10, &err), PS_ESHAPE);
    assert_non_null (strstr (err.msg, "Criteo"));
    ps_model_destroy (&model);
}

static void
test_lr (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    ps_model_t *model = ps_model_load ("lr", &err);
    if (!model)
        fail_msg ("%s", err.msg);
    const ps_ctrmodel_t *ctr = ps_model_ctr (model);
    assert_int_equal (ctr->table_count, 1);
    assert_true (ctr->has_wide);
    assert_int_equal (ctr->concat, 13);
    const ps_ctr_embedding_t *e = &ctr->embeddings [0];
    assert_true (e->wide && e->shared && e->sum_fields);
    assert_int_equal (e->nfields, 26);
    assert_int_equal (e->out_offset, -1);
    assert_string_equal (ctr->tables [0].spec.name, "weights/table");
    assert_int_equal (ctr->tables [0].field, -1);
    assert_int_equal (ctr->tables [0].spec.init.kind, PS_INIT_ZEROS);
    //  The linear term on the dense features and the bias.
    assert_int_equal (ps_model_variable_count (model), 2);
    s_assert_variable (model, "dense/kernel", 13, 1);
    assert_int_equal (ps_model_param_count (model), 14);
    ps_model_destroy (&model);
}

static void
test_layout_and_options (void **state)
{
    (void) state;
    ps_model_t *model = s_parse_ok (
        "{\"inputs\": {\"dense\": 2, \"fields\": 4}, \"optimizer\": {\"kind\": \"sgd\"},"
        " \"layers\": ["
        "  {\"type\": \"Embedding\", \"name\": \"a\", \"dim\": 4, \"fields\": [2, 0],"
        "   \"tables\": \"shared\", \"pooling\": \"mean\", \"combine\": \"sum\","
        "   \"optimizer\": {\"kind\": \"ftrl\", \"lr\": 0.1, \"l1\": 0.5},"
        "   \"admission\": {\"count\": 3}, \"eviction\": {\"capacity\": 100, \"policy\": \"lfu\"}},"
        "  {\"type\": \"Embedding\", \"name\": \"w\", \"dim\": 1, \"wide\": true},"
        "  {\"type\": \"Embedding\", \"name\": \"b\", \"dim\": 3, \"fields\": [1, 3],"
        "   \"initializer\": {\"kind\": \"normal\", \"stddev\": 0.01, \"seed\": 5}},"
        "  {\"type\": \"Concatenate\"},"
        "  {\"type\": \"Dense\", \"units\": 5, \"activation\": \"relu\"},"
        "  {\"type\": \"Dense\", \"units\": 1}]}");
    const ps_ctrmodel_t *ctr = ps_model_ctr (model);
    assert_int_equal (ctr->optimizer.kind, PS_OPT_SGD);
    assert_int_equal (ctr->embedding_count, 3);
    assert_int_equal (ctr->table_count, 1 + 4 + 2);
    //  a: [4] at 0; w: wide; b: [2 * 3] at 4; then the 2 dense features.
    assert_int_equal (ctr->embeddings [0].out_offset, 0);
    assert_int_equal (ctr->embeddings [0].out_size, 4);
    assert_int_equal (ctr->embeddings [1].out_offset, -1);
    assert_int_equal (ctr->embeddings [2].out_offset, 4);
    assert_int_equal (ctr->embeddings [2].out_size, 6);
    assert_int_equal (ctr->concat, 12);
    assert_int_equal (ctr->embeddings [0].pooling, PS_CTR_POOL_MEAN);
    assert_int_equal (ctr->embeddings [0].fields [0], 2);
    const ps_tablespec_t *a = &ctr->tables [0].spec;
    assert_string_equal (a->name, "a/table");
    assert_int_equal (a->opt.kind, PS_ROWOPT_FTRL);
    assert_true (a->opt.lr == 0.1 && a->opt.l1 == 0.5);
    //  What the spec leaves out is Keras's default for FTRL.
    assert_true (a->opt.lr_power == -0.5);
    assert_int_equal (a->admit_count, 3);
    assert_int_equal (a->capacity, 100);
    assert_int_equal (a->policy, PS_EVICT_LFU);
    assert_string_equal (ctr->tables [5].spec.name, "b/f1");
    assert_string_equal (ctr->tables [6].spec.name, "b/f3");
    assert_int_equal (ctr->tables [6].field, 3);
    assert_int_equal (ctr->tables [6].spec.init.kind, PS_INIT_NORMAL);
    assert_true (ctr->tables [6].spec.init.stddev == 0.01);
    //  The shared table keys an id by its field; a per-field one by the id.
    const ps_ctr_embedding_t *shared = &ctr->embeddings [0];
    assert_true (ps_ctrmodel_key (shared, 0, 77) != ps_ctrmodel_key (shared, 1, 77));
    assert_int_equal (ps_ctrmodel_key (&ctr->embeddings [2], 1, 77), 77);
    s_assert_variable (model, "dense/kernel", 12, 5);
    s_assert_variable (model, "dense_1/kernel", 5, 1);
    ps_model_destroy (&model);
}

//  LIBSVM's linear model: one field, no dense features, the logit the
//  wide embedding's sum plus a bias, the model's only variable.
static void
test_wide_only (void **state)
{
    (void) state;
    ps_model_t *model = s_parse_ok (
        "{\"inputs\": {\"fields\": 1}, \"layers\": ["
        "  {\"type\": \"Embedding\", \"dim\": 1, \"wide\": true},"
        "  {\"type\": \"Concatenate\"}, {\"type\": \"Dense\", \"units\": 1}]}");
    assert_int_equal (ps_model_ctr (model)->concat, 0);
    assert_int_equal (ps_model_variable_count (model), 1);
    s_assert_variable (model, "dense/bias", 1, 0);
    assert_int_equal (ps_model_layer (model, 2)->kernel, -1);
    ps_model_destroy (&model);
}

#define S_HEAD  "{\"inputs\": {\"dense\": 1, \"fields\": 2}, \"layers\": ["
#define S_EMB   "{\"type\": \"Embedding\", \"dim\": 2},"
#define S_CAT   "{\"type\": \"Concatenate\"},"
#define S_OUT   "{\"type\": \"Dense\", \"units\": 1}]}"

static void
test_refusals (void **state)
{
    (void) state;
    static const struct {
        const char *json;
        int code;
        const char *says;
    } cases [] = {
        { S_HEAD "{\"type\": \"Embedding\", \"dim\": 2, \"fields\": [2]}," S_CAT S_OUT,
          PS_EINVAL, "layer 0 (Embedding \"embedding\"): field 2 is not among the model's 2" },
        { S_HEAD "{\"type\": \"Embedding\", \"dim\": 2, \"fields\": [1, 1]}," S_CAT S_OUT,
          PS_EINVAL, "field 1 is listed twice" },
        { S_HEAD "{\"type\": \"Embedding\", \"dim\": 2, \"wide\": true}," S_CAT S_OUT,
          PS_EINVAL, "its dim must be 1, not 2" },
        { S_HEAD S_EMB "{\"type\": \"Dense\", \"units\": 4}," S_CAT S_OUT,
          PS_EINVAL, "layer 1 (Dense \"dense\"): Dense layers come after the Concatenate" },
        { S_HEAD S_EMB S_CAT S_EMB S_OUT,
          PS_EINVAL, "layer 2 (Embedding \"embedding_1\"): the model has a Concatenate layer" },
        { S_HEAD S_CAT S_OUT, PS_EINVAL, "there is no Embedding layer before it" },
        { S_HEAD S_EMB S_CAT "{\"type\": \"Dense\", \"units\": 2}]}",
          PS_ESHAPE, "Dense with units 1 and activation \"linear\", not units 2" },
        { S_HEAD S_EMB S_CAT "{\"type\": \"Dense\", \"units\": 1, \"activation\": \"relu\"}]}",
          PS_ESHAPE, "not units 1 with relu" },
        { S_HEAD S_EMB S_CAT "{\"type\": \"Dense\", \"units\": 1}, {\"type\": \"Concatenate\"}]}",
          PS_EINVAL, "layer 3 (Concatenate \"concatenate_1\"): the model has a Concatenate" },
        { S_HEAD S_EMB "{\"type\": \"Flatten\"}," S_CAT S_OUT,
          PS_EINVAL, "Flatten is not a layer of click-through-rate models" },
        { "{\"input_shape\": [4], \"layers\": [" S_EMB S_CAT S_OUT,
          PS_EINVAL, "Embedding is not a layer of image classifiers" },
        { "{\"input_shape\": [4], \"inputs\": {\"fields\": 1}, \"layers\": [" S_EMB S_CAT S_OUT,
          PS_EINVAL, "either \"input_shape\" (an image classifier) or \"inputs\"" },
        { "{\"input_shape\": [4], \"optimizer\": {\"kind\": \"sgd\"}, \"layers\": ["
          "{\"type\": \"Dense\", \"units\": 2}]}",
          PS_EINVAL, "\"optimizer\" is for click-through-rate models" },
        { S_HEAD "{\"type\": \"Embedding\", \"dim\": 4097}," S_CAT S_OUT,
          PS_EINVAL, "at /layers/0/dim: expected an integer in 1 .. 4096, got 4097" },
        { S_HEAD "{\"type\": \"Embedding\", \"dim\": 99999999999999999999}," S_CAT S_OUT,
          PS_EINVAL, "at /layers/0/dim: expected an integer in 1 .. 4096" },
        { S_HEAD "{\"type\": \"Embedding\", \"dim\": 2, \"optimizer\": {\"kind\": \"rmsprop\"}},"
          S_CAT S_OUT, PS_EINVAL, "at /layers/0/optimizer/kind: expected one of \"sgd\"" },
        { S_HEAD "{\"type\": \"Embedding\", \"dim\": 2, \"pooling\": \"max\"}," S_CAT S_OUT,
          PS_EINVAL, "at /layers/0/pooling: expected one of \"sum\", \"mean\"" },
        { "{\"inputs\": {\"fields\": 300}, \"layers\": [" S_EMB S_CAT S_OUT,
          PS_EINVAL, "at /inputs/fields: expected an integer in 1 .. 256" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        ps_error_t err = { 0 };
        ps_model_t *model = ps_model_parse (cases [i].json, "spec.json", &err);
        if (model) {
            ps_model_destroy (&model);
            fail_msg ("case %zu: accepted, expected an error:\n%s", i, cases [i].json);
        }
        printf ("  refused: %s\n", err.msg);
        if (err.code != cases [i].code || !strstr (err.msg, cases [i].says))
            fail_msg ("case %zu: code %d, message \"%s\"; expected code %d saying \"%s\"", i,
                      err.code, err.msg, cases [i].code, cases [i].says);
    }
}

//  What `ps-worker --summary --model dlrm` prints about the tables.
static void
s_collect (const char *line, void *arg)
{
    char *buf = arg;
    strncat (buf, line, 4096 - strlen (buf) - 2);
    strcat (buf, "\n");
}

static void
test_summary (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    ps_model_t *model = ps_model_load ("dlrm", &err);
    assert_non_null (model);
    char buf [4096] = "";
    ps_model_summary (model, s_collect, buf);
    printf ("%s", buf);
    assert_non_null (strstr (buf, "inputs 13 dense, 26 fields"));
    assert_non_null (strstr (buf, "tables embedding/f0 .. embedding/f25: dim 16, adagrad"));
    assert_non_null (strstr (buf, "Concatenate [429]"));
    assert_non_null (strstr (buf, "total parameters: 143105"));
    ps_model_destroy (&model);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_dlrm),
        cmocka_unit_test (test_lr),
        cmocka_unit_test (test_layout_and_options),
        cmocka_unit_test (test_wide_only),
        cmocka_unit_test (test_refusals),
        cmocka_unit_test (test_summary),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
