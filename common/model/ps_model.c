//  Models: load a JSON spec, check it against schemas/model.schema.json,
//  resolve the layers' geometry and lay out the variables. See ps_model.h.
//
//  The schema, a standard JSON Schema compiled in (ps_model_schema_json),
//  decides which fields a layer type takes, their types and ranges
//  (common/base/ps_jsonschema.h checks them). The code below reads a spec
//  only after the schema accepted it, and takes a field's default from the
//  schema's "default", so a default lives in one place.

#include "ps_model.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_ctrmodel.h"
#include "ps_file.h"
#include "ps_json.h"
#include "ps_jsonschema.h"
#include "ps_jsonvalue.h"
#include "ps_mix.h"
#include "ps_schemadoc.h"

extern const char ps_model_schema_json [];
extern const char ps_model_cnn_json [];
extern const char ps_model_cnn2_json [];
extern const char ps_model_mlp_json [];
extern const char ps_model_lr_json [];
extern const char ps_model_dlrm_json [];

static const char *const s_builtin_names [] = { "cnn", "cnn2", "mlp", "lr", "dlrm", NULL };
static const char *const s_builtin_specs [] = {
    ps_model_cnn_json, ps_model_cnn2_json, ps_model_mlp_json, ps_model_lr_json,
    ps_model_dlrm_json
};

//  Keras's class names, and the stem of its automatic layer names.
static const struct {
    const char *type;
    const char *stem;
    ps_layer_kind_t kind;
} s_layer_types [] = {
    { "Conv2D",    "conv2d",        PS_LAYER_CONV2D },
    { "Dense",     "dense",         PS_LAYER_DENSE },
    { "MaxPool2D", "max_pooling2d", PS_LAYER_MAXPOOL2D },
    { "ReLU",      "re_lu",         PS_LAYER_RELU },
    { "Flatten",   "flatten",       PS_LAYER_FLATTEN },
    { "Dropout",   "dropout",       PS_LAYER_DROPOUT },
    { "Embedding", "embedding",     PS_LAYER_EMBEDDING },
    { "Concatenate", "concatenate", PS_LAYER_CONCATENATE },
    { "Activation", "activation",   PS_LAYER_ACTIVATION },
    { "AveragePooling2D", "average_pooling2d", PS_LAYER_AVGPOOL2D },
    { "GlobalAveragePooling2D", "global_average_pooling2d", PS_LAYER_GLOBALAVGPOOL2D },
};

//  The Activation layer's functions by their Keras names.
static const char *const s_activations [] = {
    [PS_ACT_LINEAR] = "linear", [PS_ACT_RELU] = "relu", [PS_ACT_SIGMOID] = "sigmoid",
    [PS_ACT_TANH] = "tanh", [PS_ACT_GELU] = "gelu", [PS_ACT_SOFTMAX] = "softmax",
};
#define S_TYPE_COUNT  (int) (sizeof s_layer_types / sizeof s_layer_types [0])

//  A model spec holds a line per layer; a larger file is not a spec.
#define S_FILE_MAX  ((size_t) 1 << 20)

struct ps_model_t {
    char name [PS_NAME_MAX];
    int in_h, in_w, in_c;
    int layer_count;
    ps_layer_t *layers;
    int variable_count;
    ps_variable_t *variables;
    size_t param_count;
    size_t max_activation;
    char *spec;                 //  the spec as compact JSON text
    ps_ctrmodel_t *ctr;         //  a click-through-rate model's part, or NULL
    bool regression;            //  "loss": "mse": the last layer's outputs are values
};

//  ---------------------------------------------------------------------
//  Reading a spec that the schema accepted

//  Read an int or a pair [h, w] into out [2].
static void
s_size2 (const json_t *value, int out [2])
{
    if (!json_is_array (value))
        out [0] = out [1] = (int) ps_jsonvalue_integer (value);
    else {
        out [0] = (int) ps_jsonvalue_integer (json_array_get (value, 0));
        out [1] = (int) ps_jsonvalue_integer (json_array_get (value, 1));
    }
}

//  ---------------------------------------------------------------------
//  Resolving layers

//  TensorFlow's output size and leading padding for one spatial axis.
static int
s_axis (int in, int k, int stride, bool same, int *out, int *pad)
{
    if (same) {
        *out = (in + stride - 1) / stride;
        int total = (*out - 1) * stride + k - in;
        *pad = total > 0 ? total / 2 : 0;
        return 0;
    }
    if (in < k)
        return -1;
    *out = (in - k) / stride + 1;
    *pad = 0;
    return 0;
}

static int
s_add_variable (ps_model_t *self, const ps_layer_t *l, const char *suffix,
                const int64_t *dims, int rank, ps_init_kind_t init, ps_error_t *err)
{
    ps_variable_t *v = &self->variables [self->variable_count++];
    //  Layer names are at most PS_NAME_MAX - 16 bytes (s_name_layer).
    snprintf (v->name, sizeof v->name, "%.*s/%s", PS_NAME_MAX - 16, l->name, suffix);
    int rc = ps_shape_set (&v->shape, dims, rank, err);
    if (rc)
        return ps_error_prefix (err, rc, "variable %s", v->name);
    v->count = (size_t) ps_shape_count (&v->shape);
    v->offset = self->param_count;
    self->param_count += v->count;
    ps_init_default (&v->init, init);
    return 0;
}

//  Give a Conv2D or Dense layer its kernel of shape kdims (glorot_uniform)
//  and, when it uses one, its bias of out_c zeros. A Dense layer on no
//  features (a click-through-rate model whose Concatenate has nothing to
//  pass on, its logit all wide embeddings) has only the bias.
static int
s_add_weights (ps_model_t *self, ps_layer_t *l, const int64_t *kdims, int rank, bool bias,
               ps_error_t *err)
{
    int rc = 0;
    if (kdims [0] > 0) {
        l->kernel = self->variable_count;
        rc = s_add_variable (self, l, "kernel", kdims, rank, PS_INIT_GLOROT_UNIFORM, err);
    }
    if (rc || !bias)
        return rc;
    int64_t bdims [1] = { l->out_c };
    l->bias = self->variable_count;
    return s_add_variable (self, l, "bias", bdims, 1, PS_INIT_ZEROS, err);
}

//  Refuse a per-example activation (input or layer output) of more than
//  2^30 floats: the engines index within an example with 32-bit integers.
static int
s_check_size (ps_model_t *self, int64_t h, int64_t w, int64_t c, const char *where,
              ps_error_t *err)
{
    int64_t size = h * w * c;
    if (size > (int64_t) 1 << 30)
        return ps_error_set (err, PS_ETOOBIG, "%s: %lld floats per example are more than "
                             "2^30", where, (long long) size);
    if ((size_t) size > self->max_activation)
        self->max_activation = (size_t) size;
    return 0;
}

//  Resolve layer `index` (its JSON obj, checked) on top of the current
//  activation shape *h, *w, *c (*flat when rank 1), filling *l.
static int
s_resolve_layer (ps_model_t *self, int index, const json_t *obj, const json_t *fields,
                 ps_layer_kind_t kind, int *h, int *w, int *c, bool *flat,
                 const char *where, ps_error_t *err)
{
    ps_layer_t *l = &self->layers [index];
    int rc;
    l->kind = kind;
    l->in_h = *h, l->in_w = *w, l->in_c = *c;
    l->kernel = l->bias = l->embedding = -1;
    l->kh = l->kw = l->stride_h = l->stride_w = 1;
    const json_t *activation = ps_schemadoc_field (obj, fields, "activation");
    l->relu = kind == PS_LAYER_RELU
           || (activation && strcmp (json_string_value (activation), "relu") == 0
               && kind != PS_LAYER_ACTIVATION);
    if (kind == PS_LAYER_ACTIVATION)
        for (int a = 0; a < (int) (sizeof s_activations / sizeof s_activations [0]); a++)
            if (strcmp (json_string_value (activation), s_activations [a]) == 0)
                l->activation = (ps_activation_t) a;
    const json_t *padding = ps_schemadoc_field (obj, fields, "padding");
    bool same = padding && strcmp (json_string_value (padding), "same") == 0;
    const json_t *use_bias = ps_schemadoc_field (obj, fields, "use_bias");
    bool bias = use_bias && json_is_true (use_bias);

    if (kind == PS_LAYER_GLOBALAVGPOOL2D) {
        if (*flat)
            return ps_error_set (err, PS_ESHAPE, "%s: GlobalAveragePooling2D needs an [h, w, "
                                 "c] input, but its input is flat ([%d])", where, *c);
        l->out_h = l->out_w = 1;
        l->out_c = *c;
    }
    else
    if (kind == PS_LAYER_CONV2D || kind == PS_LAYER_MAXPOOL2D || kind == PS_LAYER_AVGPOOL2D) {
        if (*flat)
            return ps_error_set (err, PS_ESHAPE, "%s: %s needs an [h, w, c] input, "
                                 "but its input is flat ([%d])", where,
                                 kind == PS_LAYER_CONV2D ? "Conv2D" : kind == PS_LAYER_MAXPOOL2D
                                 ? "MaxPool2D" : "AveragePooling2D", *c);
        int k [2], s [2];
        s_size2 (ps_schemadoc_field (obj, fields,
                                     kind == PS_LAYER_CONV2D ? "kernel_size" : "pool_size"), k);
        const json_t *strides = ps_schemadoc_field (obj, fields, "strides");
        if (strides)
            s_size2 (strides, s);
        else
            s [0] = k [0], s [1] = k [1];
        l->kh = k [0], l->kw = k [1], l->stride_h = s [0], l->stride_w = s [1];
        if (s_axis (*h, k [0], s [0], same, &l->out_h, &l->pad_top)
        ||  s_axis (*w, k [1], s [1], same, &l->out_w, &l->pad_left))
            return ps_error_set (err, PS_ESHAPE, "%s: a %dx%d window does not fit the "
                                 "%dx%d input with padding \"valid\"", where,
                                 k [0], k [1], *h, *w);
        l->out_c = *c;
        if (kind == PS_LAYER_CONV2D) {
            l->out_c = (int) ps_jsonvalue_integer (json_object_get (obj, "filters"));
            int64_t kdims [4] = { k [0], k [1], *c, l->out_c };
            if ((rc = s_add_weights (self, l, kdims, 4, bias, err)))
                return rc;
        }
    }
    else
    if (kind == PS_LAYER_DENSE) {
        if (!*flat)
            return ps_error_set (err, PS_ESHAPE, "%s: Dense needs a flat input, but its "
                                 "input is [%d, %d, %d]; add a Flatten layer before it",
                                 where, *h, *w, *c);
        l->out_h = l->out_w = 1;
        l->out_c = (int) ps_jsonvalue_integer (json_object_get (obj, "units"));
        int64_t kdims [2] = { *c, l->out_c };
        if ((rc = s_add_weights (self, l, kdims, 2, bias, err)))
            return rc;
    }
    else
    if (kind == PS_LAYER_FLATTEN) {
        //  The input's size was checked when it was made.
        l->out_h = l->out_w = 1;
        l->out_c = *h * *w * *c;
    }
    else {
        //  ReLU and Dropout keep the shape.
        l->out_h = *h, l->out_w = *w, l->out_c = *c;
        if (kind == PS_LAYER_DROPOUT)
            l->rate = json_number_value (json_object_get (obj, "rate"));
    }
    *h = l->out_h, *w = l->out_w, *c = l->out_c;
    *flat = kind == PS_LAYER_FLATTEN || kind == PS_LAYER_DENSE
         || kind == PS_LAYER_GLOBALAVGPOOL2D
         || ((kind == PS_LAYER_RELU || kind == PS_LAYER_DROPOUT || kind == PS_LAYER_ACTIVATION)
             && *flat);
    return s_check_size (self, *h, *w, *c, where, err);
}

//  Give layer `index` its name: the spec's, or Keras's automatic one
//  (stem, stem_1, stem_2, ... counted per type, whatever the position),
//  and check it is unique. The schema bounds a name in characters and
//  keeps '/' out; the bytes (room for "/kernel" within PS_NAME_MAX) and
//  the printable characters a variable name needs are checked here.
static int
s_name_layer (ps_model_t *self, int index, const json_t *obj, int type, int *counters,
              const char *where, ps_error_t *err)
{
    ps_layer_t *l = &self->layers [index];
    const json_t *name = json_object_get (obj, "name");
    if (name) {
        const char *s = json_string_value (name);
        if (strlen (s) > PS_NAME_MAX - 16 || ps_name_check (s, strlen (s), NULL))
            return ps_error_set (err, PS_EINVAL, "%s: bad name \"%s\" (1 to %d bytes of "
                                 "printable characters, no '/')", where, s, PS_NAME_MAX - 16);
        snprintf (l->name, sizeof l->name, "%s", s);
    }
    else
    if (counters [type]++ == 0)
        snprintf (l->name, sizeof l->name, "%s", s_layer_types [type].stem);
    else
        snprintf (l->name, sizeof l->name, "%s_%d", s_layer_types [type].stem,
                  counters [type] - 1);
    for (int i = 0; i < index; i++)
        if (strcmp (self->layers [i].name, l->name) == 0)
            return ps_error_set (err, PS_EINVAL, "%s: the name \"%s\" is already used by "
                                 "layer %d", where, l->name, i);
    return 0;
}

//  Resolve layer `index` of a click-through-rate model: Embedding layers,
//  then one Concatenate, then Dense layers (s_resolve_layer), on top of
//  the current width *c. layer_defs is the schema's $defs.
static int
s_resolve_ctr_layer (ps_model_t *self, int index, const json_t *obj, const json_t *layer_defs,
                     ps_layer_kind_t kind, int *c, const char *where, ps_error_t *err)
{
    ps_layer_t *l = &self->layers [index];
    bool concatenated = false;
    for (int i = 0; i < index; i++)
        concatenated |= self->layers [i].kind == PS_LAYER_CONCATENATE;
    if (kind == PS_LAYER_DENSE) {
        if (!concatenated)
            return ps_error_set (err, PS_EINVAL, "%s: Dense layers come after the "
                                 "Concatenate layer", where);
        int h = 1, w = 1;
        bool flat = true;
        return s_resolve_layer (self, index, obj,
                                json_object_get (json_object_get (layer_defs, "Dense"),
                                                 "properties"),
                                kind, &h, &w, c, &flat, where, err);
    }
    if (concatenated)
        return ps_error_set (err, PS_EINVAL, "%s: the model has a Concatenate layer already; "
                             "Embedding layers come before it, Dense layers after", where);
    l->kind = kind;
    l->kernel = l->bias = l->embedding = -1;
    l->in_h = l->in_w = l->out_h = l->out_w = 1;
    l->kh = l->kw = l->stride_h = l->stride_w = 1;
    if (kind == PS_LAYER_CONCATENATE) {
        if (index == 0)
            return ps_error_set (err, PS_EINVAL, "%s: Concatenate joins the Embedding layers "
                                 "before it and the dense inputs, but there is no Embedding "
                                 "layer before it", where);
        l->in_c = *c;
        //  With no dense inputs and only wide embeddings before it, it
        //  gives no features: the Dense layer after it holds a bias alone.
        l->out_c = *c = ps_ctrmodel_concatenate (self->ctr);
    }
    else {
        int size;
        l->embedding = self->ctr->embedding_count;
        int rc = ps_ctrmodel_add_embedding (self->ctr, index, l->name, obj, layer_defs, where,
                                            &size, err);
        if (rc)
            return rc;
        l->in_c = self->ctr->embeddings [l->embedding].nfields;
        l->out_c = size;
        *c += size;
    }
    return s_check_size (self, 1, 1, *c, where, err);
}

//  Check what only the whole of a click-through-rate model can say: it
//  ends in the one logit of a Dense layer.
static int
s_check_ctr_end (const ps_model_t *self, const char *origin, ps_error_t *err)
{
    const ps_layer_t *last = &self->layers [self->layer_count - 1];
    if (last->kind != PS_LAYER_DENSE)
        return ps_error_set (err, PS_EINVAL, "%s: a click-through-rate model ends in Dense "
                             "layers after its Concatenate layer, the last with units 1",
                             origin);
    if (last->out_c != 1 || last->relu)
        return ps_error_set (err, PS_ESHAPE, "%s: the last layer (\"%s\") must give the one "
                             "logit of a click: Dense with units 1 and activation \"linear\", "
                             "not units %d%s", origin, last->name, last->out_c,
                             last->relu ? " with relu" : "");
    return 0;
}

//  Check the end of a regression model ("loss": "mse"): its flat last
//  layer gives the k predicted values as they are, so nothing there may
//  bend them (a relu would make every negative target unreachable, a
//  sigmoid or softmax squash them), as Keras's Dense (k) with its default
//  linear activation.
static int
s_check_regression_end (const ps_model_t *self, const ps_layer_t *last, const char *origin,
                        ps_error_t *err)
{
    if (last->kind == PS_LAYER_ACTIVATION && last->activation != PS_ACT_LINEAR)
        return ps_error_set (err, PS_EINVAL, "%s: the last layer (\"%s\") is an Activation "
                             "\"%s\", but \"loss\": \"mse\" compares the outputs as they are; "
                             "end with a linear Dense layer", origin, last->name,
                             s_activations [last->activation]);
    if (last->relu)
        return ps_error_set (err, PS_EINVAL, "%s: the last layer (\"%s\") applies relu, but "
                             "\"loss\": \"mse\" needs linear outputs; give it activation "
                             "\"linear\"", origin, last->name);
    if (self->param_count == 0)
        return ps_error_set (err, PS_EINVAL, "%s: the model has no Conv2D or Dense layer, "
                             "so no parameters to train", origin);
    return 0;
}

//  Build the model from a spec that the schema accepted; what the schema
//  cannot say (shapes that chain, unique names, the logits) is checked
//  here. layer_defs is the schema's $defs, which holds each layer type's
//  fields and their defaults.
static int
s_build (ps_model_t *self, const json_t *spec, const json_t *layer_defs, const char *origin,
         ps_error_t *err)
{
    const json_t *name = json_object_get (spec, "name");
    snprintf (self->name, sizeof self->name, "%s", name ? json_string_value (name) : origin);

    //  A click-through-rate model takes no image: nothing flows into its
    //  layers until Concatenate, which gives the flat input of the Dense
    //  layers.
    const json_t *inputs = json_object_get (spec, "inputs");
    const json_t *input = json_object_get (spec, "input_shape");
    bool flat = !input || json_array_size (input) == 1;
    int h = flat ? 1 : (int) ps_jsonvalue_integer (json_array_get (input, 0));
    int w = flat ? 1 : (int) ps_jsonvalue_integer (json_array_get (input, 1));
    int c = input ? (int) ps_jsonvalue_integer (json_array_get (input, flat ? 0 : 2)) : 0;
    self->in_h = h, self->in_w = w, self->in_c = c;
    char where [PS_ERROR_MSG_MAX / 2];
    snprintf (where, sizeof where, "%s: %s", origin, input ? "input_shape" : "inputs");
    if (inputs && input)
        return ps_error_set (err, PS_EINVAL, "%s: a model has either \"input_shape\" (an image "
                             "classifier) or \"inputs\" (a click-through-rate model), not both",
                             origin);
    if (!inputs && json_object_get (spec, "optimizer"))
        return ps_error_set (err, PS_EINVAL, "%s: \"optimizer\" is for click-through-rate "
                             "models (with \"inputs\"); an image classifier's comes from "
                             "--optimizer or the job", origin);
    int rc = input ? s_check_size (self, h, w, c, where, err) : 0;
    if (rc)
        return rc;
    if (inputs
    &&  !(self->ctr = ps_ctrmodel_new (inputs, json_object_get (spec, "optimizer"), where,
                                       err)))
        return err->code;

    const json_t *loss = json_object_get (spec, "loss");
    self->regression = loss && strcmp (json_string_value (loss), "mse") == 0;
    if (self->regression && inputs)
        return ps_error_set (err, PS_EINVAL, "%s: \"loss\": \"mse\" is for image models "
                             "(with \"input_shape\"); a click-through-rate model's loss is "
                             "binary cross-entropy", origin);

    const json_t *layers = json_object_get (spec, "layers");
    size_t count = json_array_size (layers);
    self->layers = calloc (count, sizeof (ps_layer_t));
    self->variables = calloc (2 * count, sizeof (ps_variable_t));
    if (!self->layers || !self->variables)
        return ps_error_set (err, PS_ETOOBIG, "%s: out of memory for %zu layers", origin, count);
    int counters [S_TYPE_COUNT] = { 0 };
    for (size_t i = 0; i < count; i++) {
        const json_t *obj = json_array_get (layers, i);
        const char *type = json_string_value (json_object_get (obj, "type"));
        int t = 0;
        while (strcmp (s_layer_types [t].type, type) != 0)
            t++;
        const json_t *fields = json_object_get (json_object_get (layer_defs, type), "properties");
        snprintf (where, sizeof where, "%s: layer %zu", origin, i);
        if ((rc = s_name_layer (self, (int) i, obj, t, counters, where, err)))
            return rc;
        snprintf (where, sizeof where, "%s: layer %zu (%s \"%s\")", origin, i, type,
                  self->layers [i].name);
        ps_layer_kind_t kind = s_layer_types [t].kind;
        bool ctr_kind = kind == PS_LAYER_EMBEDDING || kind == PS_LAYER_CONCATENATE
                     || kind == PS_LAYER_DENSE;
        bool image_kind = kind != PS_LAYER_EMBEDDING && kind != PS_LAYER_CONCATENATE;
        if (self->ctr ? !ctr_kind : !image_kind)
            return ps_error_set (err, PS_EINVAL, "%s: %s is not a layer of %s", where, type,
                                 self->ctr ? "click-through-rate models (they take Embedding, "
                                 "Concatenate and Dense layers)" : "image classifiers (a "
                                 "model with \"inputs\" is a click-through-rate model)");
        if (self->ctr)
            rc = s_resolve_ctr_layer (self, (int) i, obj, layer_defs, kind, &c, where, err);
        else
            rc = s_resolve_layer (self, (int) i, obj, fields, kind, &h, &w, &c, &flat, where,
                                  err);
        if (rc)
            return rc;
        self->layer_count++;
    }
    if (self->ctr)
        return s_check_ctr_end (self, origin, err);
    if (!flat && self->regression)
        return ps_error_set (err, PS_ESHAPE, "%s: \"loss\": \"mse\" needs a flat last layer "
                             "[outputs], but it gives [%d, %d, %d]; end with Flatten and Dense",
                             origin, h, w, c);
    if (!flat)
        return ps_error_set (err, PS_ESHAPE, "%s: the last layer must give flat logits "
                             "[classes], but it gives [%d, %d, %d]; end with Flatten and Dense",
                             origin, h, w, c);
    const ps_layer_t *last = &self->layers [self->layer_count - 1];
    if (self->regression)
        return s_check_regression_end (self, last, origin, err);
    if (last->kind == PS_LAYER_ACTIVATION && last->activation != PS_ACT_LINEAR)
        return ps_error_set (err, PS_EINVAL, "%s: the last layer (\"%s\") is an Activation "
                             "\"%s\", but the loss takes logits and applies softmax (or, for "
                             "one logit, sigmoid) itself; end with the Dense layer", origin,
                             last->name, s_activations [last->activation]);
    if (c > 256)
        return ps_error_set (err, PS_ESHAPE, "%s: the last layer gives %d logits; "
                             "classification needs 1 (binary) or 2 to 256 classes", origin, c);
    if (self->param_count == 0)
        return ps_error_set (err, PS_EINVAL, "%s: the model has no Conv2D or Dense layer, "
                             "so no parameters to train", origin);
    return 0;
}

//  The built-in schema; NULL and err set when it is broken.
static ps_jsonschema_t *
s_schema (ps_error_t *err)
{
    return ps_jsonschema_parse (ps_model_schema_json, "schemas/model.schema.json (built in)",
                                err);
}

//  Build a model from a parsed spec; takes the reference to spec.
static ps_model_t *
s_from_json (json_t *spec, const char *origin, ps_error_t *err)
{
    ps_model_t *self = calloc (1, sizeof *self);
    ps_jsonschema_t *schema = self ? s_schema (err) : NULL;
    int rc = self ? 0 : ps_error_set (err, PS_ETOOBIG, "%s: out of memory", origin);
    if (rc == 0 && !schema)
        rc = PS_EINVAL;
    if (rc == 0 && (rc = ps_jsonschema_validate (schema, spec, err)))
        ps_error_prefix (err, rc, "%s", origin);
    if (rc == 0)
        rc = s_build (self, spec, json_object_get (ps_jsonschema_root (schema), "$defs"),
                      origin, err);
    if (rc == 0) {
        self->spec = json_dumps (spec, JSON_COMPACT);
        if (!self->spec)
            abort ();           //  json_dumps fails only when out of memory
    }
    if (rc)
        ps_model_destroy (&self);
    ps_jsonschema_destroy (&schema);
    json_decref (spec);
    return self;
}

//  A number too large to read (ps_json.h), reported by its JSON pointer
//  with what the schema expects there, as a value out of range would be.
static void
s_too_large (const ps_json_overflow_t *big, const char *origin, ps_error_t *err)
{
    const char *pointer = big->pointer;
    ps_jsonschema_t *schema = s_schema (err);
    if (!schema)
        return;
    char expected [256];
    int rc = ps_jsonschema_describe (schema, pointer, expected, sizeof expected, err);
    if (rc == PS_EINVAL)
        ps_error_prefix (err, rc, "%s", origin);
    else
    if (rc == 0)
        ps_error_set (err, PS_EINVAL, "%s: at %s: expected %s, got %s", origin,
                      *pointer ? pointer : "the top level", expected, big->literal);
    else
        ps_error_set (err, PS_EINVAL, "%s: at %s: %s is too large to read", origin,
                      *pointer ? pointer : "the top level", big->literal);
    ps_jsonschema_destroy (&schema);
}

//  Parse the len bytes of a spec's text; origin names it in messages.
static ps_model_t *
s_parse (const char *text, size_t len, const char *origin, ps_error_t *err)
{
    json_error_t jerr;
    json_t *spec = json_loadb (text, len, JSON_REJECT_DUPLICATES, &jerr);
    ps_json_overflow_t big;
    if (!spec && ps_json_overflow (text, len, &jerr, &big))
        s_too_large (&big, origin, err);
    else
    if (!spec)
        ps_error_set (err, PS_EINVAL, "%s: line %d, column %d: %s", origin,
                      jerr.line, jerr.column, jerr.text);
    return spec ? s_from_json (spec, origin, err) : NULL;
}

ps_model_t *
ps_model_parse (const char *json, const char *origin, ps_error_t *err)
{
    return s_parse (json, strlen (json), origin, err);
}

ps_model_t *
ps_model_load (const char *name_or_path, ps_error_t *err)
{
    for (int i = 0; s_builtin_names [i]; i++)
        if (strcmp (name_or_path, s_builtin_names [i]) == 0)
            return ps_model_parse (s_builtin_specs [i], name_or_path, err);
    char *text;
    size_t len;
    int rc = ps_file_read (name_or_path, S_FILE_MAX, &text, &len, err);
    if (rc == PS_ENOTFOUND) {
        ps_error_set (err, PS_EINVAL, "model \"%s\" is neither a built-in model (cnn, cnn2, "
                      "mlp, lr, dlrm) nor a file", name_or_path);
        return NULL;
    }
    if (rc) {
        ps_error_prefix (err, PS_EINVAL, "model");
        return NULL;
    }
    ps_model_t *self = s_parse (text, len, name_or_path, err);
    free (text);
    return self;
}

void
ps_model_destroy (ps_model_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ps_model_t *self = *self_p;
    ps_ctrmodel_destroy (&self->ctr);
    free (self->spec);
    free (self->layers);
    free (self->variables);
    free (self);
    *self_p = NULL;
}

int
ps_model_check_input (const ps_model_t *self, int rows, int cols, int channels, int classes,
                      ps_error_t *err)
{
    if (self->ctr)
        return ps_error_set (err, PS_ESHAPE, "model \"%s\" is a click-through-rate model: it "
                             "trains on Criteo or LIBSVM data (ps-worker --standalone --data "
                             "FILE --test-data FILE), not on %dx%dx%d images", self->name, rows,
                             cols, channels);
    //  A flat input takes the image's values in NHWC order; any other
    //  shape must be the image's own, so that a [3, 8, 8] model is not fed
    //  8x8 RGB images in an order it does not expect.
    bool flat = self->in_h == 1 && self->in_w == 1;
    bool fits = flat ? (size_t) self->in_c == (size_t) rows * cols * channels
                     : self->in_h == rows && self->in_w == cols && self->in_c == channels;
    if (!fits)
        return ps_error_set (err, PS_ESHAPE, "model \"%s\" does not fit the data: it takes "
                             "%dx%dx%d inputs, but the data has %dx%dx%d images (rows x "
                             "columns x channels)", self->name, self->in_h, self->in_w,
                             self->in_c, rows, cols, channels);
    if (self->regression)
        return 0;
    //  A label indexes the last layer's outputs, so none may reach past
    //  them; fewer classes in the data than outputs is allowed, as in
    //  Keras (a subset of the data may lack the last classes).
    if (classes > ps_model_label_classes (self))
        return ps_error_set (err, PS_ESHAPE, "model \"%s\" does not fit the data: its last "
                             "layer gives %d %s, but the data has labels up to %d (%d "
                             "classes)", self->name, ps_model_label_classes (self),
                             ps_model_binary (self) ? "classes (one logit: binary)" : "classes",
                             classes - 1, classes);
    return 0;
}

const ps_ctrmodel_t *
ps_model_ctr (const ps_model_t *self)
{
    return self->ctr;
}

const char *
ps_model_spec (const ps_model_t *self)
{
    return self->spec;
}

const char *
ps_model_name (const ps_model_t *self)
{
    return self->name;
}

const char *const *
ps_model_builtins (void)
{
    return s_builtin_names;
}

int
ps_model_layer_count (const ps_model_t *self)
{
    return self->layer_count;
}

const ps_layer_t *
ps_model_layer (const ps_model_t *self, int index)
{
    return index >= 0 && index < self->layer_count ? &self->layers [index] : NULL;
}

int
ps_model_variable_count (const ps_model_t *self)
{
    return self->variable_count;
}

const ps_variable_t *
ps_model_variable (const ps_model_t *self, int index)
{
    return index >= 0 && index < self->variable_count ? &self->variables [index] : NULL;
}

int
ps_model_find_variable (const ps_model_t *self, const char *name)
{
    for (int i = 0; i < self->variable_count; i++)
        if (strcmp (self->variables [i].name, name) == 0)
            return i;
    return -1;
}

size_t
ps_model_param_count (const ps_model_t *self)
{
    return self->param_count;
}

void
ps_model_input_shape (const ps_model_t *self, int *h, int *w, int *c)
{
    *h = self->in_h, *w = self->in_w, *c = self->in_c;
}

size_t
ps_model_input_size (const ps_model_t *self)
{
    return (size_t) self->in_h * self->in_w * self->in_c;
}

int
ps_model_classes (const ps_model_t *self)
{
    return self->layers [self->layer_count - 1].out_c;
}

bool
ps_model_binary (const ps_model_t *self)
{
    return !self->ctr && !self->regression && ps_model_classes (self) == 1;
}

bool
ps_model_regression (const ps_model_t *self)
{
    return self->regression;
}

int
ps_model_targets (const ps_model_t *self)
{
    return self->regression ? ps_model_classes (self) : 0;
}

size_t
ps_model_label_size (const ps_model_t *self)
{
    return self->regression ? (size_t) ps_model_classes (self) * sizeof (float) : 1;
}

int
ps_model_label_classes (const ps_model_t *self)
{
    return ps_model_binary (self) ? 2 : ps_model_classes (self);
}

const char *
ps_model_cpu_only (const ps_model_t *self)
{
    if (ps_model_binary (self))
        return "a binary classifier (a last layer of one logit)";
    if (self->regression)
        return "a regression model (\"loss\": \"mse\")";
    for (int i = 0; i < self->layer_count; i++)
        switch (self->layers [i].kind) {
            case PS_LAYER_ACTIVATION:
                return "a model with an Activation layer";
            case PS_LAYER_AVGPOOL2D:
            case PS_LAYER_GLOBALAVGPOOL2D:
                return "a model with average pooling";
            default:
                break;
        }
    return NULL;
}

size_t
ps_model_max_activation (const ps_model_t *self)
{
    return self->max_activation;
}

int
ps_model_check_batch (const ps_model_t *self, int max_batch, ps_error_t *err)
{
    if (self->ctr)
        return ps_error_set (err, PS_EINVAL, "model \"%s\" is a click-through-rate model; the "
                             "image engines do not run it (worker/ps_ctrnet.h does)", self->name);
    for (int i = 0; i < self->layer_count; i++) {
        const ps_layer_t *l = &self->layers [i];
        if (l->kind != PS_LAYER_CONV2D)
            continue;
        int64_t rows = (int64_t) max_batch * l->out_h * l->out_w;
        int64_t k = (int64_t) l->kh * l->kw * l->in_c;
        if (rows > INT_MAX || k > INT_MAX)
            return ps_error_set (err, PS_ETOOBIG, "layer %d (%s): a batch of %d makes a "
                                 "%lld x %lld im2col matrix, beyond the int dimensions of "
                                 "BLAS; use a smaller batch", i, l->name, max_batch,
                                 (long long) rows, (long long) k);
    }
    return 0;
}

double
ps_model_forward_macs (const ps_model_t *self)
{
    double macs = 0;
    for (int i = 0; i < self->layer_count; i++) {
        const ps_layer_t *l = &self->layers [i];
        if (l->kind == PS_LAYER_CONV2D || l->kind == PS_LAYER_DENSE)
            macs += (double) l->out_h * l->out_w * l->out_c * l->kh * l->kw * l->in_c
                  * (l->kind == PS_LAYER_DENSE ? (double) l->in_h * l->in_w : 1.0);
    }
    return macs;
}

uint64_t
ps_model_variable_seed (uint64_t seed, int index)
{
    return ps_mix_draw (ps_mix64 (seed), (uint64_t) index);
}

void
ps_model_init_params (const ps_model_t *self, uint64_t seed, float *params)
{
    for (int i = 0; i < self->variable_count; i++) {
        const ps_variable_t *v = &self->variables [i];
        ps_init_t init = v->init;
        init.seed = ps_model_variable_seed (seed, i);
        //  Cannot fail: the shape and the initializer were made valid here.
        ps_init_fill (&init, &v->shape, 0, v->shape.dims [0], params + v->offset, NULL);
    }
}

int
ps_model_check_variables (const ps_model_t *self, const char *const *names,
                          const ps_shape_t *shapes, int count, ps_error_t *err)
{
    char want [96], have [96];
    for (int i = 0; i < count; i++) {
        int index = ps_model_find_variable (self, names [i]);
        if (index < 0)
            return ps_error_set (err, PS_ESHAPE, "variable \"%s\" is not in model \"%s\"",
                                 names [i], self->name);
        const ps_variable_t *v = &self->variables [index];
        if (!ps_shape_equal (&v->shape, &shapes [i]))
            return ps_error_set (err, PS_ESHAPE, "variable \"%s\" has shape %s, but model "
                                 "\"%s\" needs %s", names [i],
                                 ps_shape_str (&shapes [i], have, sizeof have), self->name,
                                 ps_shape_str (&v->shape, want, sizeof want));
        for (int j = 0; j < i; j++)
            if (strcmp (names [j], names [i]) == 0)
                return ps_error_set (err, PS_ESHAPE, "variable \"%s\" is listed twice",
                                     names [i]);
    }
    for (int i = 0; i < self->variable_count; i++) {
        int found = 0;
        for (int j = 0; j < count && !found; j++)
            found = strcmp (names [j], self->variables [i].name) == 0;
        if (!found)
            return ps_error_set (err, PS_ESHAPE, "variable \"%s\" of model \"%s\" is missing",
                                 self->variables [i].name, self->name);
    }
    return 0;
}

void
ps_model_summary (const ps_model_t *self, void (*out) (const char *line, void *arg), void *arg)
{
    char line [512];
    if (self->ctr)
        snprintf (line, sizeof line, "model \"%s\": inputs %d dense, %d fields (a click, sigmoid "
                  "and binary cross-entropy)", self->name, self->ctr->dense, self->ctr->fields);
    else
        snprintf (line, sizeof line, "model \"%s\": input [%d, %d, %d]", self->name,
                  self->in_h, self->in_w, self->in_c);
    out (line, arg);
    for (int i = 0; i < self->layer_count; i++) {
        const ps_layer_t *l = &self->layers [i];
        size_t params = 0;
        if (l->kernel >= 0)
            params += self->variables [l->kernel].count;
        if (l->bias >= 0)
            params += self->variables [l->bias].count;
        char shape [64];
        if (l->out_h == 1 && l->out_w == 1
        &&  (l->kind == PS_LAYER_FLATTEN || l->kind == PS_LAYER_DENSE
             || l->kind == PS_LAYER_GLOBALAVGPOOL2D || l->in_h * l->in_w == 1))
            snprintf (shape, sizeof shape, "[%d]", l->out_c);
        else
            snprintf (shape, sizeof shape, "[%d, %d, %d]", l->out_h, l->out_w, l->out_c);
        const char *type = "?";
        for (int t = 0; t < S_TYPE_COUNT; t++)
            if (s_layer_types [t].kind == l->kind)
                type = s_layer_types [t].type;
        const ps_ctr_embedding_t *e = l->embedding >= 0 ? &self->ctr->embeddings [l->embedding]
                                                        : NULL;
        if (e && e->wide)
            snprintf (shape, sizeof shape, "wide (to logit)");
        snprintf (line, sizeof line, "  %-16s %-10s %-16s %10zu%s", l->name, type, shape,
                  params, l->relu && l->kind != PS_LAYER_RELU ? "  relu" : "");
        out (line, arg);
        if (e) {
            //  A layer's tables share everything but their name and seed.
            const ps_ctr_table_t *first = &self->ctr->tables [e->table];
            const ps_ctr_table_t *last = first + (e->shared ? 0 : e->nfields - 1);
            snprintf (line, sizeof line, "    %d field%s (%s pooling, %s), table%s %s%s%s: "
                      "dim %u, %s lr %g, init %s", e->nfields, e->nfields == 1 ? "" : "s",
                      e->pooling == PS_CTR_POOL_MEAN ? "mean" : "sum",
                      e->sum_fields ? "summed" : "side by side", first == last ? "" : "s",
                      first->spec.name, first == last ? "" : " .. ",
                      first == last ? "" : last->spec.name, e->dim,
                      ps_rowopt_kind_name (first->spec.opt.kind), first->spec.opt.lr,
                      ps_init_kind_name (first->spec.init.kind));
            out (line, arg);
        }
    }
    snprintf (line, sizeof line, "  total parameters: %zu%s", self->param_count,
              self->ctr ? " (dense; the tables' rows are made on first touch)" : "");
    out (line, arg);
}
