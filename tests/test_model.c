//  Unit tests for models (common/model/ps_model.c): the built-in specs against
//  parameter counts, variable layouts, layer geometry and multiply-add
//  counts worked out by hand from the Keras definitions; Keras's automatic
//  layer names; TensorFlow's "same" and "valid" geometry; every class of
//  spec error, each checked for its code and for a message that says where
//  (the layer's index and name, or the line and column) and what (the
//  field); the check of a server's variables against the model; and the
//  initial parameters (determinism, zero biases, Glorot limits and
//  variance).
//
//  Expected numbers are written out as literals with the arithmetic that
//  gives them in a comment, not computed by code resembling the code under
//  test, so a shared mistake cannot hide.
//
//  This file is longer than the project's 800 lines on purpose: its cases
//  check one module, ps_model, against figures worked out by hand for the
//  same built-in specs.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ps_model.h"

//  ---------------------------------------------------------------------
//  Helpers

static ps_model_t *
s_parse_ok (const char *json)
{
    ps_error_t err = { 0 };
    ps_model_t *model = ps_model_parse (json, "test", &err);
    if (!model)
        fail_msg ("spec refused: %s\n%s", err.msg, json);
    return model;
}

static ps_model_t *
s_load_ok (const char *name)
{
    ps_error_t err = { 0 };
    ps_model_t *model = ps_model_load (name, &err);
    if (!model)
        fail_msg ("model %s refused: %s", name, err.msg);
    return model;
}

//  Check that msg contains every string of the NULL-terminated list.
static void
s_assert_says (const char *msg, va_list words)
{
    const char *word;
    while ((word = va_arg (words, const char *)) != NULL)
        if (!strstr (msg, word))
            fail_msg ("the message \"%s\" does not say \"%s\"", msg, word);
}

//  Parse a spec that must be refused with `code`, and a message that says
//  each of the words that follow (NULL-terminated). The message is printed
//  so that the log shows what a user would see.
static void
s_expect_error (const char *json, int code, ...)
{
    ps_error_t err = { 0 };
    ps_model_t *model = ps_model_parse (json, "spec.json", &err);
    if (model) {
        ps_model_destroy (&model);
        fail_msg ("spec accepted, expected an error:\n%s", json);
    }
    printf ("  refused: %s\n", err.msg);
    assert_int_equal (err.code, code);
    va_list words;
    va_start (words, code);
    s_assert_says (err.msg, words);
    va_end (words);
}

static void
s_assert_variable (const ps_model_t *model, int index, const char *name,
                   const int64_t *dims, int rank, size_t offset)
{
    const ps_variable_t *v = ps_model_variable (model, index);
    assert_non_null (v);
    assert_string_equal (v->name, name);
    assert_int_equal (v->shape.rank, rank);
    size_t count = 1;
    for (int i = 0; i < rank; i++) {
        assert_int_equal (v->shape.dims [i], dims [i]);
        count *= (size_t) dims [i];
    }
    assert_int_equal (v->count, count);
    assert_int_equal (v->offset, offset);
    assert_int_equal (ps_model_find_variable (model, name), index);
}

static void
s_assert_geometry (const ps_layer_t *l, int out_h, int out_w, int out_c,
                   int pad_top, int pad_left)
{
    assert_non_null (l);
    assert_int_equal (l->out_h, out_h);
    assert_int_equal (l->out_w, out_w);
    assert_int_equal (l->out_c, out_c);
    assert_int_equal (l->pad_top, pad_top);
    assert_int_equal (l->pad_left, pad_left);
}

//  ---------------------------------------------------------------------
//  Built-in models

static void
test_cnn (void **state)
{
    (void) state;
    ps_model_t *model = s_load_ok ("cnn");
    assert_string_equal (ps_model_name (model), "cnn");
    //  conv2d 3*3*1*32 + 32 = 320; dense 5408*64 + 64 = 346176;
    //  dense_1 64*10 + 10 = 650; 320 + 346176 + 650 = 347146.
    assert_int_equal (ps_model_param_count (model), 347146);
    assert_int_equal (ps_model_variable_count (model), 6);
    //  Offsets: each variable starts where the previous one ends.
    s_assert_variable (model, 0, "conv2d/kernel", (int64_t []) { 3, 3, 1, 32 }, 4, 0);
    s_assert_variable (model, 1, "conv2d/bias", (int64_t []) { 32 }, 1, 288);
    s_assert_variable (model, 2, "dense/kernel", (int64_t []) { 5408, 64 }, 2, 320);
    s_assert_variable (model, 3, "dense/bias", (int64_t []) { 64 }, 1, 346432);
    s_assert_variable (model, 4, "dense_1/kernel", (int64_t []) { 64, 10 }, 2, 346496);
    s_assert_variable (model, 5, "dense_1/bias", (int64_t []) { 10 }, 1, 347136);
    assert_null (ps_model_variable (model, 6));
    assert_null (ps_model_variable (model, -1));
    assert_int_equal (ps_model_find_variable (model, "dense_2/kernel"), -1);

    int h, w, c;
    ps_model_input_shape (model, &h, &w, &c);
    assert_int_equal (h, 28);
    assert_int_equal (w, 28);
    assert_int_equal (c, 1);
    assert_int_equal (ps_model_input_size (model), 784);
    assert_int_equal (ps_model_classes (model), 10);

    assert_int_equal (ps_model_layer_count (model), 5);
    const ps_layer_t *conv = ps_model_layer (model, 0);
    assert_int_equal (conv->kind, PS_LAYER_CONV2D);
    assert_string_equal (conv->name, "conv2d");
    assert_int_equal (conv->in_h, 28);
    assert_int_equal (conv->in_c, 1);
    assert_int_equal (conv->kh, 3);
    assert_int_equal (conv->kw, 3);
    assert_int_equal (conv->stride_h, 1);
    assert_int_equal (conv->stride_w, 1);
    assert_true (conv->relu);
    assert_int_equal (conv->kernel, 0);
    assert_int_equal (conv->bias, 1);
    //  Valid 3x3 on 28x28: 28 - 3 + 1 = 26.
    s_assert_geometry (conv, 26, 26, 32, 0, 0);
    const ps_layer_t *pool = ps_model_layer (model, 1);
    assert_int_equal (pool->kind, PS_LAYER_MAXPOOL2D);
    assert_string_equal (pool->name, "max_pooling2d");
    //  Pool 2 with the default strides 2: 26 / 2 = 13.
    assert_int_equal (pool->stride_h, 2);
    assert_int_equal (pool->stride_w, 2);
    assert_int_equal (pool->kernel, -1);
    assert_int_equal (pool->bias, -1);
    s_assert_geometry (pool, 13, 13, 32, 0, 0);
    const ps_layer_t *flatten = ps_model_layer (model, 2);
    assert_int_equal (flatten->kind, PS_LAYER_FLATTEN);
    assert_string_equal (flatten->name, "flatten");
    //  13 * 13 * 32 = 5408.
    s_assert_geometry (flatten, 1, 1, 5408, 0, 0);
    const ps_layer_t *dense = ps_model_layer (model, 3);
    assert_int_equal (dense->kind, PS_LAYER_DENSE);
    assert_string_equal (dense->name, "dense");
    assert_true (dense->relu);
    s_assert_geometry (dense, 1, 1, 64, 0, 0);
    const ps_layer_t *logits = ps_model_layer (model, 4);
    assert_string_equal (logits->name, "dense_1");
    assert_false (logits->relu);
    assert_int_equal (logits->kernel, 4);
    assert_int_equal (logits->bias, 5);
    s_assert_geometry (logits, 1, 1, 10, 0, 0);
    assert_null (ps_model_layer (model, 5));

    //  The largest activation is the convolution's output, 26 * 26 * 32.
    assert_int_equal (ps_model_max_activation (model), 21632);
    //  conv 26*26*32*9 = 194688, dense 5408*64 = 346112, dense_1 64*10 =
    //  640; 541440 in all.
    assert_true (ps_model_forward_macs (model) == 541440.0);
    ps_model_destroy (&model);
    assert_null (model);
    ps_model_destroy (&model);
}

static void
test_cnn2 (void **state)
{
    (void) state;
    ps_model_t *model = s_load_ok ("cnn2");
    //  conv2d 288 + 32 = 320; conv2d_1 3*3*32*64 + 64 = 18496; the second
    //  convolution gives 11x11, pooled to 5x5x64 = 1600; dense 1600*128 +
    //  128 = 204928; dense_1 128*10 + 10 = 1290; 225034 in all.
    assert_int_equal (ps_model_param_count (model), 225034);
    assert_int_equal (ps_model_variable_count (model), 8);
    s_assert_variable (model, 0, "conv2d/kernel", (int64_t []) { 3, 3, 1, 32 }, 4, 0);
    s_assert_variable (model, 1, "conv2d/bias", (int64_t []) { 32 }, 1, 288);
    s_assert_variable (model, 2, "conv2d_1/kernel", (int64_t []) { 3, 3, 32, 64 }, 4, 320);
    s_assert_variable (model, 3, "conv2d_1/bias", (int64_t []) { 64 }, 1, 18752);
    s_assert_variable (model, 4, "dense/kernel", (int64_t []) { 1600, 128 }, 2, 18816);
    s_assert_variable (model, 5, "dense/bias", (int64_t []) { 128 }, 1, 223616);
    s_assert_variable (model, 6, "dense_1/kernel", (int64_t []) { 128, 10 }, 2, 223744);
    s_assert_variable (model, 7, "dense_1/bias", (int64_t []) { 10 }, 1, 225024);
    assert_string_equal (ps_model_layer (model, 3)->name, "max_pooling2d_1");
    s_assert_geometry (ps_model_layer (model, 2), 11, 11, 64, 0, 0);
    s_assert_geometry (ps_model_layer (model, 3), 5, 5, 64, 0, 0);
    s_assert_geometry (ps_model_layer (model, 4), 1, 1, 1600, 0, 0);
    ps_model_destroy (&model);
}

static void
test_mlp (void **state)
{
    (void) state;
    ps_model_t *model = s_load_ok ("mlp");
    //  dense 784*128 + 128 = 100480; dense_1 128*10 + 10 = 1290.
    assert_int_equal (ps_model_param_count (model), 101770);
    s_assert_variable (model, 0, "dense/kernel", (int64_t []) { 784, 128 }, 2, 0);
    s_assert_variable (model, 3, "dense_1/bias", (int64_t []) { 10 }, 1, 101760);
    //  784*128 + 128*10.
    assert_true (ps_model_forward_macs (model) == 101632.0);
    ps_model_destroy (&model);
}

static void
test_builtin_list (void **state)
{
    (void) state;
    const char *const *names = ps_model_builtins ();
    assert_string_equal (names [0], "cnn");
    assert_string_equal (names [1], "cnn2");
    assert_string_equal (names [2], "mlp");
    assert_string_equal (names [3], "lr");
    assert_string_equal (names [4], "dlrm");
    assert_null (names [5]);
}

//  The summary is what `ps-worker --summary` prints: a header, one line per
//  layer and the total.
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
    ps_model_t *model = s_load_ok ("cnn");
    char text [4096] = "";
    ps_model_summary (model, s_collect, text);
    int lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    assert_int_equal (lines, 7);
    assert_non_null (strstr (text, "total parameters: 347146"));
    assert_non_null (strstr (text, "[26, 26, 32]"));
    assert_non_null (strstr (text, "[5408]"));
    assert_non_null (strstr (text, "346176"));
    ps_model_destroy (&model);
}

//  ---------------------------------------------------------------------
//  Names

static void
test_auto_names (void **state)
{
    (void) state;
    ps_model_t *model = s_parse_ok (
        "{\"input_shape\": [12, 12, 1], \"layers\": ["
        " {\"type\": \"Conv2D\", \"filters\": 2, \"kernel_size\": 3},"
        " {\"type\": \"Conv2D\", \"filters\": 2, \"kernel_size\": 3},"
        " {\"type\": \"MaxPool2D\"},"
        " {\"type\": \"MaxPool2D\", \"pool_size\": 1},"
        " {\"type\": \"ReLU\"},"
        " {\"type\": \"Dropout\", \"rate\": 0.5},"
        " {\"type\": \"ReLU\"},"
        " {\"type\": \"Flatten\"},"
        " {\"type\": \"Dropout\", \"rate\": 0},"
        " {\"type\": \"Dense\", \"units\": 4},"
        " {\"type\": \"Dense\", \"units\": 3}]}");
    const char *want [] = {
        "conv2d", "conv2d_1", "max_pooling2d", "max_pooling2d_1", "re_lu", "dropout",
        "re_lu_1", "flatten", "dropout_1", "dense", "dense_1",
    };
    assert_int_equal (ps_model_layer_count (model), 11);
    for (int i = 0; i < 11; i++)
        assert_string_equal (ps_model_layer (model, i)->name, want [i]);
    assert_int_equal (ps_model_layer (model, 4)->kind, PS_LAYER_RELU);
    assert_true (ps_model_layer (model, 4)->relu);
    assert_int_equal (ps_model_layer (model, 5)->kind, PS_LAYER_DROPOUT);
    assert_true (ps_model_layer (model, 5)->rate == 0.5);
    assert_string_equal (ps_model_variable (model, 2)->name, "conv2d_1/kernel");
    assert_string_equal (ps_model_variable (model, 6)->name, "dense_1/kernel");
    //  No name given: the spec's origin names the model.
    assert_string_equal (ps_model_name (model), "test");
    ps_model_destroy (&model);
}

static void
test_user_names (void **state)
{
    (void) state;
    //  As in Keras, a layer given a name takes no number from its type's
    //  counter, so the next unnamed Conv2D is still plain conv2d.
    ps_model_t *model = s_parse_ok (
        "{\"name\": \"mine\", \"input_shape\": [8, 8, 1], \"layers\": ["
        " {\"type\": \"Conv2D\", \"filters\": 2, \"kernel_size\": 3, \"name\": \"features\"},"
        " {\"type\": \"Conv2D\", \"filters\": 2, \"kernel_size\": 3},"
        " {\"type\": \"Flatten\", \"name\": \"flat\"},"
        " {\"type\": \"Dense\", \"units\": 3, \"name\": \"logits\", \"use_bias\": false}]}");
    assert_string_equal (ps_model_name (model), "mine");
    assert_string_equal (ps_model_layer (model, 0)->name, "features");
    assert_string_equal (ps_model_layer (model, 1)->name, "conv2d");
    assert_string_equal (ps_model_layer (model, 2)->name, "flat");
    assert_string_equal (ps_model_layer (model, 3)->name, "logits");
    assert_int_equal (ps_model_variable_count (model), 5);
    assert_string_equal (ps_model_variable (model, 0)->name, "features/kernel");
    assert_string_equal (ps_model_variable (model, 1)->name, "features/bias");
    assert_string_equal (ps_model_variable (model, 2)->name, "conv2d/kernel");
    //  use_bias false: a kernel and no bias.
    assert_string_equal (ps_model_variable (model, 4)->name, "logits/kernel");
    assert_int_equal (ps_model_layer (model, 3)->bias, -1);
    //  features 9*2 + 2 = 20; conv2d 9*2*2 + 2 = 38; 4x4x2 = 32 features;
    //  logits 32*3 = 96; 154 in all.
    assert_int_equal (ps_model_param_count (model), 154);
    ps_model_destroy (&model);
}

//  Limits the engines rely on are enforced where a spec is read: an input
//  larger than 2^30 floats per example, a model with nothing to train, and
//  a batch whose im2col matrix would not fit BLAS's int dimensions.
static void
test_error_limits (void **state)
{
    (void) state;
    s_expect_error (
        "{\"input_shape\": [65536, 65536, 1], \"layers\": ["
        " {\"type\": \"Flatten\"}, {\"type\": \"Dense\", \"units\": 10}]}",
        PS_ETOOBIG, "input_shape", "4294967296 floats per example", NULL);
    s_expect_error (
        "{\"input_shape\": [28, 28, 1], \"layers\": ["
        " {\"type\": \"MaxPool2D\", \"pool_size\": [14, 4], \"strides\": [14, 6]},"
        " {\"type\": \"Flatten\"}]}",
        PS_EINVAL, "no parameters to train", NULL);

    //  1024 x 1024 "same" gives 2^20 rows per example: 2047 examples fit
    //  in INT_MAX rows, 2048 do not.
    ps_model_t *model = s_parse_ok (
        "{\"input_shape\": [1024, 1024, 1], \"layers\": ["
        " {\"type\": \"Conv2D\", \"filters\": 2, \"kernel_size\": 3, \"padding\": \"same\"},"
        " {\"type\": \"MaxPool2D\", \"pool_size\": 64}, {\"type\": \"Flatten\"},"
        " {\"type\": \"Dense\", \"units\": 10}]}");
    ps_error_t err = { 0 };
    assert_int_equal (ps_model_check_batch (model, 2047, &err), 0);
    assert_int_equal (ps_model_check_batch (model, 2048, &err), PS_ETOOBIG);
    printf ("  refused: %s\n", err.msg);
    assert_non_null (strstr (err.msg, "layer 0 (conv2d)"));
    assert_non_null (strstr (err.msg, "2147483648 x 9"));
    ps_model_destroy (&model);
}

static void
test_duplicate_names (void **state)
{
    (void) state;
    //  A user name that an automatic name later collides with.
    s_expect_error (
        "{\"input_shape\": [4], \"layers\": ["
        " {\"type\": \"Dense\", \"units\": 3, \"name\": \"dense_1\"},"
        " {\"type\": \"Dense\", \"units\": 3},"
        " {\"type\": \"Dense\", \"units\": 3}]}",
        PS_EINVAL, "layer 2", "\"dense_1\"", "already used by layer 0", NULL);
    //  Two user names alike.
    s_expect_error (
        "{\"input_shape\": [4], \"layers\": ["
        " {\"type\": \"Dense\", \"units\": 3, \"name\": \"a\"},"
        " {\"type\": \"Dense\", \"units\": 3, \"name\": \"a\"}]}",
        PS_EINVAL, "layer 1", "\"a\"", "already used by layer 0", NULL);
    //  A name with '/' would make variable names ambiguous.
    s_expect_error (
        "{\"input_shape\": [4], \"layers\": ["
        " {\"type\": \"Dense\", \"units\": 3, \"name\": \"a/b\"}]}",
        PS_EINVAL, "at /layers/0/name", "matching ^[^/]+$", "got \"a/b\"", NULL);
    //  A control character: a variable name must be printable.
    s_expect_error (
        "{\"input_shape\": [4], \"layers\": ["
        " {\"type\": \"Dense\", \"units\": 3, \"name\": \"a\\tb\"}]}",
        PS_EINVAL, "layer 0", "bad name", NULL);
}

//  ---------------------------------------------------------------------
//  Geometry

//  The layer of a one-layer spec on an input, for geometry checks; the
//  spec ends with Flatten and Dense so that it is a valid model.
static ps_model_t *
s_window_model (const char *input, const char *layer)
{
    char json [1024];
    snprintf (json, sizeof json,
              "{\"input_shape\": %s, \"layers\": [%s, {\"type\": \"Flatten\"},"
              " {\"type\": \"Dense\", \"units\": 2}]}", input, layer);
    return s_parse_ok (json);
}

static void
test_same_padding (void **state)
{
    (void) state;
    //  TensorFlow's "same": out = ceil (in / s); pad_total = max ((out - 1)
    //  * s + k - in, 0), the smaller half (pad_total / 2) at the top/left.
    //  7x5, 3x3, stride 2: out ceil (7/2) = 4, ceil (5/2) = 3; pad_total
    //  3*2 + 3 - 7 = 2 -> top 1; 2*2 + 3 - 5 = 2 -> left 1.
    ps_model_t *model = s_window_model ("[7, 5, 2]",
        "{\"type\": \"Conv2D\", \"filters\": 3, \"kernel_size\": 3, \"strides\": 2,"
        " \"padding\": \"same\"}");
    const ps_layer_t *l = ps_model_layer (model, 0);
    s_assert_geometry (l, 4, 3, 3, 1, 1);
    assert_int_equal (l->stride_h, 2);
    assert_int_equal (l->stride_w, 2);
    assert_false (l->relu);
    ps_model_destroy (&model);

    //  Odd totals: 7x5, kernel [4, 2], stride 1: out 7x5; pad_total 6 + 4
    //  - 7 = 3 -> top 1 (the extra row goes to the bottom); 4 + 2 - 5 = 1
    //  -> left 0.
    model = s_window_model ("[7, 5, 1]",
        "{\"type\": \"Conv2D\", \"filters\": 1, \"kernel_size\": [4, 2],"
        " \"padding\": \"same\"}");
    l = ps_model_layer (model, 0);
    assert_int_equal (l->kh, 4);
    assert_int_equal (l->kw, 2);
    s_assert_geometry (l, 7, 5, 1, 1, 0);
    ps_model_destroy (&model);

    //  A stride larger than the kernel: 7 wide, k 1, s 3: out 3, pad_total
    //  2*3 + 1 - 7 = 0.
    model = s_window_model ("[7, 7, 1]",
        "{\"type\": \"Conv2D\", \"filters\": 1, \"kernel_size\": 1, \"strides\": 3,"
        " \"padding\": \"same\"}");
    s_assert_geometry (ps_model_layer (model, 0), 3, 3, 1, 0, 0);
    ps_model_destroy (&model);
}

static void
test_valid_padding (void **state)
{
    (void) state;
    //  "valid": out = floor ((in - k) / s) + 1. 7x5, 3x3, stride 2:
    //  (7-3)/2 + 1 = 3, (5-3)/2 + 1 = 2.
    ps_model_t *model = s_window_model ("[7, 5, 2]",
        "{\"type\": \"Conv2D\", \"filters\": 3, \"kernel_size\": 3, \"strides\": 2,"
        " \"activation\": \"relu\"}");
    const ps_layer_t *l = ps_model_layer (model, 0);
    s_assert_geometry (l, 3, 2, 3, 0, 0);
    assert_true (l->relu);
    //  3*3*2*3 + 3 = 57 conv; 3*2*3 = 18 features, 18*2 + 2 = 38 dense.
    assert_int_equal (ps_model_param_count (model), 95);
    ps_model_destroy (&model);

    //  size2 [h, w] for kernel and strides: 9x8, kernel [3, 2], strides
    //  [2, 3]: (9-3)/2 + 1 = 4, (8-2)/3 + 1 = 3.
    model = s_window_model ("[9, 8, 1]",
        "{\"type\": \"Conv2D\", \"filters\": 2, \"kernel_size\": [3, 2],"
        " \"strides\": [2, 3]}");
    l = ps_model_layer (model, 0);
    assert_int_equal (l->kh, 3);
    assert_int_equal (l->kw, 2);
    assert_int_equal (l->stride_h, 2);
    assert_int_equal (l->stride_w, 3);
    s_assert_geometry (l, 4, 3, 2, 0, 0);
    s_assert_variable (model, 0, "conv2d/kernel", (int64_t []) { 3, 2, 1, 2 }, 4, 0);
    ps_model_destroy (&model);

    //  A kernel exactly the input's size gives 1x1.
    model = s_window_model ("[5, 4, 1]",
        "{\"type\": \"Conv2D\", \"filters\": 2, \"kernel_size\": [5, 4]}");
    s_assert_geometry (ps_model_layer (model, 0), 1, 1, 2, 0, 0);
    ps_model_destroy (&model);
}

static void
test_maxpool_geometry (void **state)
{
    (void) state;
    //  Default pool 2, strides default to the pool size: 7x5 -> 3x2.
    ps_model_t *model = s_window_model ("[7, 5, 3]", "{\"type\": \"MaxPool2D\"}");
    const ps_layer_t *l = ps_model_layer (model, 0);
    assert_int_equal (l->kh, 2);
    assert_int_equal (l->stride_h, 2);
    assert_int_equal (l->stride_w, 2);
    s_assert_geometry (l, 3, 2, 3, 0, 0);
    assert_int_equal (l->kernel, -1);
    ps_model_destroy (&model);

    //  Pool 3 with its default strides 3: 7x5 -> 2x1.
    model = s_window_model ("[7, 5, 1]", "{\"type\": \"MaxPool2D\", \"pool_size\": 3}");
    l = ps_model_layer (model, 0);
    assert_int_equal (l->stride_h, 3);
    s_assert_geometry (l, 2, 1, 1, 0, 0);
    ps_model_destroy (&model);

    //  Explicit strides 1: 7x5 -> 6x4.
    model = s_window_model ("[7, 5, 1]",
        "{\"type\": \"MaxPool2D\", \"pool_size\": 2, \"strides\": 1}");
    l = ps_model_layer (model, 0);
    assert_int_equal (l->stride_h, 1);
    assert_int_equal (l->stride_w, 1);
    s_assert_geometry (l, 6, 4, 1, 0, 0);
    ps_model_destroy (&model);

    //  Pool [2, 3], strides [1, 2]: (7-2)/1 + 1 = 6, (5-3)/2 + 1 = 2.
    model = s_window_model ("[7, 5, 1]",
        "{\"type\": \"MaxPool2D\", \"pool_size\": [2, 3], \"strides\": [1, 2]}");
    l = ps_model_layer (model, 0);
    assert_int_equal (l->kh, 2);
    assert_int_equal (l->kw, 3);
    s_assert_geometry (l, 6, 2, 1, 0, 0);
    ps_model_destroy (&model);

    //  Same padding, pool 2 stride 2 on 7x5: out 4x3; pad_total 3*2 + 2 -
    //  7 = 1 -> top 0; 2*2 + 2 - 5 = 1 -> left 0.
    model = s_window_model ("[7, 5, 1]",
        "{\"type\": \"MaxPool2D\", \"padding\": \"same\"}");
    s_assert_geometry (ps_model_layer (model, 0), 4, 3, 1, 0, 0);
    ps_model_destroy (&model);
}

static void
test_flat_input (void **state)
{
    (void) state;
    //  A [features] input is flat: Dense applies directly.
    ps_model_t *model = s_parse_ok (
        "{\"input_shape\": [20], \"layers\": ["
        " {\"type\": \"Dense\", \"units\": 8, \"activation\": \"relu\"},"
        " {\"type\": \"Dropout\", \"rate\": 0.25},"
        " {\"type\": \"Dense\", \"units\": 4}]}");
    int h, w, c;
    ps_model_input_shape (model, &h, &w, &c);
    assert_int_equal (h, 1);
    assert_int_equal (w, 1);
    assert_int_equal (c, 20);
    assert_int_equal (ps_model_classes (model), 4);
    //  20*8 + 8 + 8*4 + 4 = 204.
    assert_int_equal (ps_model_param_count (model), 204);
    assert_true (ps_model_layer (model, 1)->rate == 0.25);
    ps_model_destroy (&model);
}

//  ---------------------------------------------------------------------
//  Errors

static void
test_error_malformed_json (void **state)
{
    (void) state;
    //  The error is on line 2: a '}' where a value must come.
    s_expect_error ("{\"input_shape\": [4],\n \"layers\": [}", PS_EINVAL,
                    "spec.json", "line 2, column", NULL);
    s_expect_error ("", PS_EINVAL, "spec.json", "line", NULL);
    //  Valid JSON that is not an object.
    s_expect_error ("[1, 2]", PS_EINVAL, "spec.json: at the top level: expected an object, got [1,2]", NULL);
}

static void
test_error_duplicate_key (void **state)
{
    (void) state;
    //  The second "units" on line 3 is the error. jansson reports the
    //  position, which is what lets a user find the key.
    s_expect_error ("{\"input_shape\": [4], \"layers\": [\n"
                    " {\"type\": \"Dense\",\n"
                    "  \"units\": 3, \"units\": 4}]}",
                    PS_EINVAL, "spec.json", "line 3", "duplicate", NULL);
}

static void
test_error_layer_type (void **state)
{
    (void) state;
    s_expect_error ("{\"input_shape\": [8, 8, 1], \"layers\": ["
                    " {\"type\": \"Conv3D\", \"filters\": 2, \"kernel_size\": 3}]}",
                    PS_EINVAL, "at /layers/0/type: expected one of \"Conv2D\"", "got \"Conv3D\"", NULL);
    s_expect_error ("{\"input_shape\": [4], \"layers\": [{\"units\": 2}]}",
                    PS_EINVAL, "at /layers/0: missing required key \"type\"", NULL);
    s_expect_error ("{\"input_shape\": [4], \"layers\": [3]}",
                    PS_EINVAL, "at /layers/0: expected an object, got 3", NULL);
    s_expect_error ("{\"input_shape\": [4], \"layers\": [{\"type\": 5, \"units\": 2}]}",
                    PS_EINVAL, "at /layers/0/type: expected one of", "got 5", NULL);
}

static void
test_error_fields (void **state)
{
    (void) state;
    //  A typo: "filter" for "filters". The message names the layer by
    //  index, type and name, the bad field, and the fields there are.
    s_expect_error ("{\"input_shape\": [8, 8, 1], \"layers\": ["
                    " {\"type\": \"Conv2D\", \"filter\": 2, \"kernel_size\": 3},"
                    " {\"type\": \"Flatten\"}, {\"type\": \"Dense\", \"units\": 2}]}",
                    PS_EINVAL, "at /layers/0/filter: unknown key \"filter\"",
                    "filters", NULL);
    //  A model-level typo.
    s_expect_error ("{\"input_shape\": [4], \"layer\": []}",
                    PS_EINVAL, "at /layer: unknown key \"layer\"", NULL);
    s_expect_error ("{\"input_shape\": [4], \"layers\": ["
                    " {\"type\": \"Dense\", \"units\": 4},"
                    " {\"type\": \"Dense\", \"activation\": \"relu\"}]}",
                    PS_EINVAL, "at /layers/1: missing required key \"units\"", NULL);
    s_expect_error ("{\"layers\": [{\"type\": \"Dense\", \"units\": 4}]}",
                    PS_EINVAL, "at the top level: missing required key \"input_shape\"", NULL);
    s_expect_error ("{\"input_shape\": [4]}",
                    PS_EINVAL, "at the top level: missing required key \"layers\"", NULL);
    s_expect_error ("{\"input_shape\": [4], \"layers\": [{\"type\": \"Dense\", \"units\": \"64\"}]}",
                    PS_EINVAL, "at /layers/0/units: expected an integer in 1 .. 1048576, got \"64\"", NULL);
    s_expect_error ("{\"input_shape\": [4], \"layers\": [{\"type\": \"Dense\", \"units\": 2.5}]}",
                    PS_EINVAL, "at /layers/0/units: expected an integer", "got 2.5", NULL);
    s_expect_error ("{\"input_shape\": [4], \"layers\": ["
                    " {\"type\": \"Dense\", \"units\": 2, \"use_bias\": 1}]}",
                    PS_EINVAL, "at /layers/0/use_bias: expected true or false, got 1", NULL);
    s_expect_error ("{\"input_shape\": [8, 8, 1], \"layers\": ["
                    " {\"type\": \"Conv2D\", \"filters\": 2, \"kernel_size\": [3]}]}",
                    PS_EINVAL, "at /layers/0/kernel_size: expected an integer in 1 .. 64 or an array of 2 items",
                    "got [3]", NULL);
}

//  A name that is not a string is a type error like any other, refused
//  with a message, never a crash: the name is read before the layer's
//  other fields are checked, so this case gets a test of its own.
static void
test_error_name_type (void **state)
{
    (void) state;
    s_expect_error ("{\"input_shape\": [4], \"layers\": ["
                    " {\"type\": \"Dense\", \"units\": 2, \"name\": 7}]}",
                    PS_EINVAL, "at /layers/0/name: expected a non-empty string", "got 7", NULL);
}

static void
test_error_ranges (void **state)
{
    (void) state;
    s_expect_error ("{\"input_shape\": [8, 8, 1], \"layers\": ["
                    " {\"type\": \"Conv2D\", \"filters\": 0, \"kernel_size\": 3}]}",
                    PS_EINVAL, "spec.json: at /layers/0/filters: expected an integer in 1 .. 65536, got 0",
                    NULL);
    s_expect_error ("{\"input_shape\": [8, 8, 1], \"layers\": ["
                    " {\"type\": \"Conv2D\", \"filters\": 2, \"kernel_size\": 3, \"strides\": 0}]}",
                    PS_EINVAL, "at /layers/0/strides: expected an integer in 1 .. 64", "got 0", NULL);
    //  The second int of a size2 is checked too.
    s_expect_error ("{\"input_shape\": [8, 8, 1], \"layers\": ["
                    " {\"type\": \"MaxPool2D\", \"strides\": [1, 0]}]}",
                    PS_EINVAL, "at /layers/0/strides/1: expected an integer in 1 .. 64, got 0", NULL);
    //  Dropout rate is in [0, 1): 1.0 would drop everything.
    s_expect_error ("{\"input_shape\": [4], \"layers\": ["
                    " {\"type\": \"Dropout\", \"rate\": 1.0}, {\"type\": \"Dense\", \"units\": 2}]}",
                    PS_EINVAL, "at /layers/0/rate: expected a number in [0, 1), got 1", NULL);
    s_expect_error ("{\"input_shape\": [4], \"layers\": ["
                    " {\"type\": \"Dropout\", \"rate\": -0.1}, {\"type\": \"Dense\", \"units\": 2}]}",
                    PS_EINVAL, "at /layers/0/rate: expected a number in [0, 1), got -0.1", NULL);
    s_expect_error ("{\"input_shape\": [0], \"layers\": [{\"type\": \"Dense\", \"units\": 2}]}",
                    PS_EINVAL, "at /input_shape/0: expected an integer in 1 .. 65536, got 0", NULL);
}

//  A number too large to read (beyond 64-bit integers or doubles), which
//  jansson refuses with a position only, is named by its key and bound.
static void
test_error_too_large (void **state)
{
    (void) state;
    s_expect_error ("{\"input_shape\": [4], \"layers\": ["
                    " {\"type\": \"Dense\", \"units\": 4},"
                    " {\"type\": \"Dense\", \"units\": 99999999999999999999}]}",
                    PS_EINVAL, "spec.json: at /layers/1/units: expected an integer in 1 .. 1048576, "
                    "got 99999999999999999999", NULL);
    s_expect_error ("{\"input_shape\": [8, -9223372036854775809, 1], \"layers\": []}",
                    PS_EINVAL, "spec.json: at /input_shape/1: expected an integer in 1 .. 65536, "
                    "got -9223372036854775809", NULL);
    s_expect_error ("{\"input_shape\": [4], \"layers\": ["
                    " {\"type\": \"Dropout\", \"rate\": 1e999}]}",
                    PS_EINVAL, "spec.json: at /layers/0/rate: expected a number in [0, 1), got 1e999", NULL);
    s_expect_error ("{\"input_shape\": [4], \"name\": 1e999, \"layers\": []}",
                    PS_EINVAL, "spec.json: at /name: expected a string, got 1e999", NULL);
}

static void
test_error_enums (void **state)
{
    (void) state;
    s_expect_error ("{\"input_shape\": [8, 8, 1], \"layers\": ["
                    " {\"type\": \"Conv2D\", \"filters\": 2, \"kernel_size\": 3,"
                    "  \"padding\": \"full\"}]}",
                    PS_EINVAL, "at /layers/0/padding: expected one of \"valid\", \"same\", got \"full\"",
                    NULL);
    s_expect_error ("{\"input_shape\": [4], \"layers\": ["
                    " {\"type\": \"Dense\", \"units\": 4},"
                    " {\"type\": \"Dense\", \"units\": 2, \"activation\": \"tanh\"}]}",
                    PS_EINVAL, "at /layers/1/activation: expected one of \"linear\", \"relu\", got \"tanh\"",
                    NULL);
}

static void
test_error_shapes (void **state)
{
    (void) state;
    //  Dense straight on an image.
    s_expect_error ("{\"input_shape\": [8, 8, 1], \"layers\": ["
                    " {\"type\": \"Conv2D\", \"filters\": 2, \"kernel_size\": 3},"
                    " {\"type\": \"Dense\", \"units\": 2}]}",
                    PS_ESHAPE, "layer 1 (Dense \"dense\")", "flat input", "[6, 6, 2]",
                    "Flatten", NULL);
    //  A convolution on a flat activation.
    s_expect_error ("{\"input_shape\": [8, 8, 1], \"layers\": ["
                    " {\"type\": \"Flatten\"},"
                    " {\"type\": \"Conv2D\", \"filters\": 2, \"kernel_size\": 3},"
                    " {\"type\": \"Dense\", \"units\": 2}]}",
                    PS_ESHAPE, "layer 1 (Conv2D \"conv2d\")", "[h, w, c]", "[64]", NULL);
    s_expect_error ("{\"input_shape\": [16], \"layers\": ["
                    " {\"type\": \"MaxPool2D\"}, {\"type\": \"Dense\", \"units\": 2}]}",
                    PS_ESHAPE, "layer 0 (MaxPool2D \"max_pooling2d\")", "[h, w, c]", NULL);
    //  A 5x5 window on a 4x4 input with valid padding.
    s_expect_error ("{\"input_shape\": [4, 4, 1], \"layers\": ["
                    " {\"type\": \"Conv2D\", \"filters\": 2, \"kernel_size\": 5},"
                    " {\"type\": \"Flatten\"}, {\"type\": \"Dense\", \"units\": 2}]}",
                    PS_ESHAPE, "layer 0 (Conv2D \"conv2d\")", "5x5", "4x4", "\"valid\"", NULL);
    //  Too tall only.
    s_expect_error ("{\"input_shape\": [4, 9, 1], \"layers\": ["
                    " {\"type\": \"MaxPool2D\", \"pool_size\": [5, 2]},"
                    " {\"type\": \"Flatten\"}, {\"type\": \"Dense\", \"units\": 2}]}",
                    PS_ESHAPE, "layer 0 (MaxPool2D \"max_pooling2d\")", "5x2", NULL);
}

static void
test_error_model_level (void **state)
{
    (void) state;
    //  The last layer must give flat logits.
    s_expect_error ("{\"input_shape\": [8, 8, 1], \"layers\": ["
                    " {\"type\": \"Conv2D\", \"filters\": 2, \"kernel_size\": 3}]}",
                    PS_ESHAPE, "spec.json", "last layer", "[6, 6, 2]", NULL);
    //  More than 256 classes is more than a byte label can name.
    s_expect_error ("{\"input_shape\": [4], \"layers\": [{\"type\": \"Dense\", \"units\": 257}]}",
                    PS_ESHAPE, "spec.json", "257 logits", "1 (binary) or 2 to 256 classes", NULL);
    //  A flat input with no layer changing it gives logits, but there is
    //  nothing to train.
    s_expect_error ("{\"input_shape\": [1], \"layers\": [{\"type\": \"ReLU\"}]}",
                    PS_EINVAL, "no Conv2D or Dense layer", NULL);
    //  An activation after the logits would be applied twice.
    s_expect_error ("{\"input_shape\": [4], \"layers\": [{\"type\": \"Dense\", \"units\": 3}, "
                    "{\"type\": \"Activation\", \"activation\": \"softmax\"}]}",
                    PS_EINVAL, "is an Activation \"softmax\", but the loss takes logits", NULL);
    s_expect_error ("{\"input_shape\": [4], \"layers\": [{\"type\": \"Activation\", "
                    "\"activation\": \"swish\"}, {\"type\": \"Dense\", \"units\": 3}]}",
                    PS_EINVAL, "at /layers/0/activation", NULL);
    s_expect_error ("{\"input_shape\": [4], \"layers\": [{\"type\": \"GlobalAveragePooling2D\"}, "
                    "{\"type\": \"Dense\", \"units\": 3}]}",
                    PS_ESHAPE, "GlobalAveragePooling2D needs an [h, w, c] input", NULL);
    //  The new layers' shapes and what runs them.
    ps_model_t *pooled = ps_model_parse ("{\"input_shape\": [5, 7, 2], \"layers\": ["
                                         "{\"type\": \"AveragePooling2D\", \"pool_size\": 3, "
                                         "\"strides\": 2, \"padding\": \"same\"}, "
                                         "{\"type\": \"Activation\", \"activation\": \"gelu\"}, "
                                         "{\"type\": \"GlobalAveragePooling2D\"}, "
                                         "{\"type\": \"Dense\", \"units\": 3}]}", "pooled.json",
                                         NULL);
    assert_non_null (pooled);
    const ps_layer_t *avg = ps_model_layer (pooled, 0);
    assert_int_equal (avg->kind, PS_LAYER_AVGPOOL2D);
    assert_int_equal (avg->out_h, 3);
    assert_int_equal (avg->out_w, 4);
    assert_int_equal (avg->out_c, 2);
    assert_string_equal (avg->name, "average_pooling2d");
    assert_int_equal (ps_model_layer (pooled, 1)->activation, PS_ACT_GELU);
    const ps_layer_t *gap = ps_model_layer (pooled, 2);
    assert_int_equal (gap->out_h * gap->out_w, 1);
    assert_int_equal (gap->out_c, 2);
    assert_non_null (ps_model_cpu_only (pooled));
    ps_model_destroy (&pooled);
    //  One logit is a binary classifier, of labels 0 and 1.
    ps_error_t err = { 0 };
    ps_model_t *binary = ps_model_parse ("{\"input_shape\": [4], \"layers\": "
                                         "[{\"type\": \"Dense\", \"units\": 1}]}",
                                         "binary.json", &err);
    assert_non_null (binary);
    assert_true (ps_model_binary (binary));
    assert_int_equal (ps_model_classes (binary), 1);
    assert_int_equal (ps_model_label_classes (binary), 2);
    assert_int_equal (ps_model_check_input (binary, 2, 2, 1, 2, &err), PS_OK);
    assert_int_equal (ps_model_check_input (binary, 2, 2, 1, 3, &err), PS_ESHAPE);
    assert_non_null (strstr (err.msg, "gives 2 classes (one logit: binary), but the data has "
                                      "labels up to 2 (3 classes)"));
    ps_model_destroy (&binary);
    //  "loss": "mse" makes the same last layer a regression model of one
    //  output; 3 units are 3 outputs, none of them classes.
    ps_model_t *reg = ps_model_parse ("{\"input_shape\": [4], \"loss\": \"mse\", \"layers\": "
                                      "[{\"type\": \"Dense\", \"units\": 3}]}", "reg.json", &err);
    assert_non_null (reg);
    assert_true (ps_model_regression (reg));
    assert_false (ps_model_binary (reg));
    assert_int_equal (ps_model_targets (reg), 3);
    assert_int_equal (ps_model_label_size (reg), 12);
    assert_non_null (ps_model_cpu_only (reg));
    assert_int_equal (ps_model_check_input (reg, 2, 2, 1, 0, &err), PS_OK);
    ps_model_destroy (&reg);
    //  Its outputs are the values themselves: nothing may bend them.
    s_expect_error ("{\"input_shape\": [4], \"loss\": \"mse\", \"layers\": "
                    "[{\"type\": \"Dense\", \"units\": 1, \"activation\": \"relu\"}]}",
                    PS_EINVAL, "applies relu, but \"loss\": \"mse\" needs linear outputs", NULL);
    s_expect_error ("{\"input_shape\": [4], \"loss\": \"mse\", \"layers\": "
                    "[{\"type\": \"Dense\", \"units\": 2}, {\"type\": \"Activation\", "
                    "\"activation\": \"sigmoid\"}]}",
                    PS_EINVAL, "is an Activation \"sigmoid\", but \"loss\": \"mse\"", NULL);
    s_expect_error ("{\"input_shape\": [4, 4, 1], \"loss\": \"mse\", \"layers\": "
                    "[{\"type\": \"Conv2D\", \"filters\": 1, \"kernel_size\": 1}]}",
                    PS_ESHAPE, "\"loss\": \"mse\" needs a flat last layer", NULL);
    s_expect_error ("{\"input_shape\": [4], \"loss\": \"mae\", \"layers\": "
                    "[{\"type\": \"Dense\", \"units\": 1}]}", PS_EINVAL, "/loss", NULL);
    //  Many outputs are fine for regression (no byte label names them).
    reg = ps_model_parse ("{\"input_shape\": [4], \"loss\": \"mse\", \"layers\": "
                          "[{\"type\": \"Dense\", \"units\": 300}]}", "reg.json", &err);
    assert_non_null (reg);
    ps_model_destroy (&reg);
    s_expect_error ("{\"input_shape\": [28, 28], \"layers\": [{\"type\": \"Flatten\"}]}",
                    PS_EINVAL, "spec.json: at /input_shape: expected an array of 1 item or an array of 3 items",
                    NULL);
    s_expect_error ("{\"input_shape\": [28, 28, 1, 1], \"layers\": [{\"type\": \"Flatten\"}]}",
                    PS_EINVAL, "at /input_shape:", NULL);
    s_expect_error ("{\"input_shape\": [28, 28, 1], \"layers\": []}",
                    PS_EINVAL, "spec.json: at /layers: expected an array of 1 to 1024 items, got []", NULL);
}

static void
test_load_file (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    const char *missing = "/nonexistent/ps-test/model.json";
    ps_model_t *model = ps_model_load (missing, &err);
    assert_null (model);
    printf ("  refused: %s\n", err.msg);
    //  Either code says it well; the header promises only a message that
    //  names the file.
    assert_true (err.code == PS_EINVAL || err.code == PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, missing));

    //  A spec in a file works like the same text parsed.
    char path [] = "/tmp/ps-test-model-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    FILE *file = fdopen (fd, "w");
    assert_non_null (file);
    fputs ("{\"input_shape\": [6, 6, 1], \"layers\": [\n"
           "  {\"type\": \"Conv2D\", \"filters\": 4, \"kernel_size\": 3, \"activation\": \"relu\"},\n"
           "  {\"type\": \"Flatten\"},\n"
           "  {\"type\": \"Dense\", \"units\": 3}\n"
           "]}\n", file);
    assert_int_equal (fclose (file), 0);
    model = ps_model_load (path, &err);
    if (!model)
        fail_msg ("%s refused: %s", path, err.msg);
    //  Without a "name" the path names the model. 9*4 + 4 = 40; 4x4x4 =
    //  64 features, 64*3 + 3 = 195; 235 in all.
    assert_string_equal (ps_model_name (model), path);
    assert_int_equal (ps_model_param_count (model), 235);
    assert_int_equal (ps_model_classes (model), 3);
    ps_model_destroy (&model);

    //  An error in a file names the file and the layer.
    file = fopen (path, "w");
    assert_non_null (file);
    fputs ("{\"input_shape\": [6, 6, 1], \"layers\": [\n"
           "  {\"type\": \"Dense\", \"units\": 3}]}\n", file);
    assert_int_equal (fclose (file), 0);
    model = ps_model_load (path, &err);
    assert_null (model);
    printf ("  refused: %s\n", err.msg);
    assert_int_equal (err.code, PS_ESHAPE);
    assert_non_null (strstr (err.msg, path));
    assert_non_null (strstr (err.msg, "layer 0 (Dense \"dense\")"));

    //  Bad JSON in a file: the file, line and column.
    file = fopen (path, "w");
    assert_non_null (file);
    fputs ("{\"input_shape\": [6, 6, 1],\n\"layers\": [,]}\n", file);
    assert_int_equal (fclose (file), 0);
    model = ps_model_load (path, &err);
    assert_null (model);
    printf ("  refused: %s\n", err.msg);
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, path));
    assert_non_null (strstr (err.msg, "line 2, column"));
    assert_int_equal (unlink (path), 0);
}

//  ---------------------------------------------------------------------
//  Checking a server's variables

typedef struct {
    const char *names [8];
    ps_shape_t shapes [8];
    int count;
} s_varset_t;

static void
s_varset_add (s_varset_t *set, const char *name, const int64_t *dims, int rank)
{
    set->names [set->count] = name;
    assert_int_equal (ps_shape_set (&set->shapes [set->count], dims, rank, NULL), 0);
    set->count++;
}

//  The cnn's variables, in the model's order.
static void
s_cnn_varset (s_varset_t *set)
{
    memset (set, 0, sizeof *set);
    s_varset_add (set, "conv2d/kernel", (int64_t []) { 3, 3, 1, 32 }, 4);
    s_varset_add (set, "conv2d/bias", (int64_t []) { 32 }, 1);
    s_varset_add (set, "dense/kernel", (int64_t []) { 5408, 64 }, 2);
    s_varset_add (set, "dense/bias", (int64_t []) { 64 }, 1);
    s_varset_add (set, "dense_1/kernel", (int64_t []) { 64, 10 }, 2);
    s_varset_add (set, "dense_1/bias", (int64_t []) { 10 }, 1);
}

static void
s_expect_mismatch (const ps_model_t *model, const s_varset_t *set, const char *variable,
                   const char *word)
{
    ps_error_t err = { 0 };
    int rc = ps_model_check_variables (model, set->names, set->shapes, set->count, &err);
    printf ("  refused: %s\n", err.msg);
    assert_int_equal (rc, PS_ESHAPE);
    assert_int_equal (err.code, PS_ESHAPE);
    if (!strstr (err.msg, variable) || !strstr (err.msg, word))
        fail_msg ("the message \"%s\" should name \"%s\" and say \"%s\"", err.msg,
                  variable, word);
}

static void
test_check_variables (void **state)
{
    (void) state;
    ps_model_t *model = s_load_ok ("cnn");
    ps_error_t err = { 0 };
    s_varset_t set;
    s_cnn_varset (&set);
    assert_int_equal (ps_model_check_variables (model, set.names, set.shapes, set.count, &err), 0);

    //  A server lists its variables in its own order; the set is what
    //  matters.
    s_varset_t reversed = { .count = set.count };
    for (int i = 0; i < set.count; i++) {
        reversed.names [i] = set.names [set.count - 1 - i];
        reversed.shapes [i] = set.shapes [set.count - 1 - i];
    }
    assert_int_equal (ps_model_check_variables (model, reversed.names, reversed.shapes,
                                                reversed.count, &err), 0);

    //  Missing: dense/bias (index 3) dropped.
    s_varset_t missing = set;
    missing.names [3] = set.names [5];
    missing.shapes [3] = set.shapes [5];
    missing.count = 5;
    s_expect_mismatch (model, &missing, "dense/bias", "missing");

    //  Extra: a variable the model does not have.
    s_varset_t extra = set;
    s_varset_add (&extra, "dense_2/kernel", (int64_t []) { 10, 10 }, 2);
    s_expect_mismatch (model, &extra, "dense_2/kernel", "not in model");

    //  Wrong shape: one unit too many, and the right count in the wrong rank.
    s_varset_t wrong = set;
    assert_int_equal (ps_shape_set (&wrong.shapes [2], (int64_t []) { 5408, 65 }, 2, NULL), 0);
    s_expect_mismatch (model, &wrong, "dense/kernel", "shape");
    wrong = set;
    assert_int_equal (ps_shape_set (&wrong.shapes [0], (int64_t []) { 9, 32 }, 2, NULL), 0);
    s_expect_mismatch (model, &wrong, "conv2d/kernel", "shape");

    //  Listed twice: all the model's names are present, plus a repeat.
    s_varset_t twice = set;
    s_varset_add (&twice, "conv2d/bias", (int64_t []) { 32 }, 1);
    s_expect_mismatch (model, &twice, "conv2d/bias", "twice");

    //  An empty set misses the first variable.
    s_varset_t none = { .count = 0 };
    s_expect_mismatch (model, &none, "conv2d/kernel", "missing");
    ps_model_destroy (&model);
}

//  ---------------------------------------------------------------------
//  Initial parameters

static void
test_init_params (void **state)
{
    (void) state;
    ps_model_t *model = s_load_ok ("cnn");
    size_t count = ps_model_param_count (model);
    float *a = malloc (count * sizeof (float));
    float *b = malloc (count * sizeof (float));
    float *c = malloc (count * sizeof (float));
    assert_non_null (a);
    assert_non_null (b);
    assert_non_null (c);
    //  NaN everywhere first, so an element left unwritten shows.
    for (size_t i = 0; i < count; i++)
        a [i] = b [i] = c [i] = NAN;
    ps_model_init_params (model, 42, a);
    ps_model_init_params (model, 42, b);
    ps_model_init_params (model, 43, c);
    assert_memory_equal (a, b, count * sizeof (float));

    //  Keras's Glorot fans: a conv kernel [kh, kw, in, out] has fan_in =
    //  kh*kw*in and fan_out = kh*kw*out; a dense kernel [in, out] the
    //  obvious ones. conv2d: 6 / (9 + 288); dense: 6 / (5408 + 64);
    //  dense_1: 6 / (64 + 10).
    const struct {
        const char *name;
        double limit;
    } kernels [] = {
        { "conv2d/kernel", sqrt (6.0 / 297.0) },
        { "dense/kernel", sqrt (6.0 / 5472.0) },
        { "dense_1/kernel", sqrt (6.0 / 74.0) },
    };
    for (int k = 0; k < 3; k++) {
        int index = ps_model_find_variable (model, kernels [k].name);
        const ps_variable_t *v = ps_model_variable (model, index);
        assert_non_null (v);
        double limit = kernels [k].limit, largest = 0, sum = 0, sum2 = 0;
        size_t differ = 0;
        for (size_t i = 0; i < v->count; i++) {
            double x = a [v->offset + i];
            if (!(fabs (x) <= limit))
                fail_msg ("%s [%zu] = %g is outside the Glorot limit %g", v->name, i, x, limit);
            largest = fmax (largest, fabs (x));
            sum += x;
            sum2 += x * x;
            differ += a [v->offset + i] != c [v->offset + i];
        }
        double mean = sum / v->count, variance = sum2 / v->count - mean * mean;
        printf ("  %-15s limit %.5f, largest %.5f, mean %+.2e, variance %.4e "
                "(uniform %.4e), %zu of %zu differ for another seed\n", v->name, limit,
                largest, mean, variance, limit * limit / 3, differ, v->count);
        //  The limit is reached, not just respected: with 288 draws or more
        //  the largest lies within 5% of it unless the fans were wrong
        //  (the chance otherwise is 0.95^288, below 1e-6).
        assert_true (largest > 0.95 * limit);
        //  Another seed changes (nearly) every weight.
        assert_true (differ > v->count * 99 / 100);
        if (strcmp (v->name, "dense/kernel") == 0) {
            //  U(-l, l) has variance l^2 / 3; over 346112 draws the sample
            //  variance's relative standard error is about 0.2%, so 2%
            //  leaves a margin of ten deviations. The mean's standard error
            //  is l / sqrt (3 * 346112), about 6e-5.
            double want = limit * limit / 3;
            assert_true (fabs (variance - want) < 0.02 * want);
            assert_true (fabs (mean) < 5e-4);
        }
    }
    //  Biases start at zero.
    for (int i = 0; i < ps_model_variable_count (model); i++) {
        const ps_variable_t *v = ps_model_variable (model, i);
        if (strstr (v->name, "/bias") == NULL)
            continue;
        for (size_t j = 0; j < v->count; j++)
            if (a [v->offset + j] != 0.0f || c [v->offset + j] != 0.0f)
                fail_msg ("%s [%zu] = %g, expected 0", v->name, j, a [v->offset + j]);
    }
    //  Variables draw from seeds of their own: the first elements of two
    //  kernels are not one stream scaled.
    assert_true (ps_model_variable_seed (42, 0) != ps_model_variable_seed (42, 2));
    assert_true (ps_model_variable_seed (42, 0) != ps_model_variable_seed (43, 0));
    free (a);
    free (b);
    free (c);
    ps_model_destroy (&model);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_cnn),
        cmocka_unit_test (test_cnn2),
        cmocka_unit_test (test_mlp),
        cmocka_unit_test (test_builtin_list),
        cmocka_unit_test (test_summary),
        cmocka_unit_test (test_auto_names),
        cmocka_unit_test (test_user_names),
        cmocka_unit_test (test_duplicate_names),
        cmocka_unit_test (test_same_padding),
        cmocka_unit_test (test_valid_padding),
        cmocka_unit_test (test_maxpool_geometry),
        cmocka_unit_test (test_flat_input),
        cmocka_unit_test (test_error_malformed_json),
        cmocka_unit_test (test_error_duplicate_key),
        cmocka_unit_test (test_error_layer_type),
        cmocka_unit_test (test_error_fields),
        cmocka_unit_test (test_error_ranges),
        cmocka_unit_test (test_error_too_large),
        cmocka_unit_test (test_error_enums),
        cmocka_unit_test (test_error_shapes),
        cmocka_unit_test (test_error_model_level),
        cmocka_unit_test (test_error_limits),
        cmocka_unit_test (test_load_file),
        cmocka_unit_test (test_check_variables),
        cmocka_unit_test (test_init_params),
        //  Last: in a sanitizer build the crash it guards against ends the
        //  program, and the other tests should have run by then.
        cmocka_unit_test (test_error_name_type),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
