//  Models: load a JSON spec, check it against schemas/model.json, resolve
//  the layers' geometry and lay out the variables. See ps_model.h.
//
//  The schema is compiled in (ps_model_schema_json) and drives the checks:
//  which fields a layer type takes, their types, ranges and defaults. The
//  code below reads values only after the checks passed, through the same
//  field descriptions, so a default lives in one place.

#include "ps_model.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_file.h"
#include "ps_json.h"
#include "ps_mix.h"

extern const char ps_model_schema_json [];
extern const char ps_model_cnn_json [];
extern const char ps_model_cnn2_json [];
extern const char ps_model_mlp_json [];

static const char *const s_builtin_names [] = { "cnn", "cnn2", "mlp", NULL };
static const char *const s_builtin_specs [] = {
    ps_model_cnn_json, ps_model_cnn2_json, ps_model_mlp_json
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
};

//  ---------------------------------------------------------------------
//  Checking a JSON object against a field table of the schema

//  Read an int or a pair [h, w] into out [2].
static void
s_size2 (const json_t *value, int out [2])
{
    if (json_is_integer (value))
        out [0] = out [1] = (int) json_integer_value (value);
    else {
        out [0] = (int) json_integer_value (json_array_get (value, 0));
        out [1] = (int) json_integer_value (json_array_get (value, 1));
    }
}

//  Check one number against the field's min, max and below bounds.
static int
s_check_range (double v, const json_t *field, const char *where, const char *key,
               ps_error_t *err)
{
    const json_t *min = json_object_get (field, "min");
    const json_t *max = json_object_get (field, "max");
    const json_t *below = json_object_get (field, "below");
    if (min && v < json_number_value (min))
        return ps_error_set (err, PS_EINVAL, "%s: '%s' is %.15g, below the minimum %.15g",
                             where, key, v, json_number_value (min));
    if (max && v > json_number_value (max))
        return ps_error_set (err, PS_EINVAL, "%s: '%s' is %.15g, above the maximum %.15g",
                             where, key, v, json_number_value (max));
    if (below && v >= json_number_value (below))
        return ps_error_set (err, PS_EINVAL, "%s: '%s' is %.15g, must be below %.15g",
                             where, key, v, json_number_value (below));
    return 0;
}

//  Check that value has the type the field describes and lies in range.
static int
s_check_value (const json_t *value, const json_t *field, const char *where,
               const char *key, ps_error_t *err)
{
    const char *type = json_string_value (json_object_get (field, "type"));
    if (strcmp (type, "int") == 0) {
        if (!json_is_integer (value))
            return ps_error_set (err, PS_EINVAL, "%s: '%s' must be an integer", where, key);
        return s_check_range ((double) json_integer_value (value), field, where, key, err);
    }
    if (strcmp (type, "number") == 0) {
        if (!json_is_number (value))
            return ps_error_set (err, PS_EINVAL, "%s: '%s' must be a number", where, key);
        return s_check_range (json_number_value (value), field, where, key, err);
    }
    if (strcmp (type, "str") == 0) {
        if (!json_is_string (value))
            return ps_error_set (err, PS_EINVAL, "%s: '%s' must be a string", where, key);
        return 0;
    }
    if (strcmp (type, "bool") == 0) {
        if (!json_is_boolean (value))
            return ps_error_set (err, PS_EINVAL, "%s: '%s' must be true or false", where, key);
        return 0;
    }
    if (strcmp (type, "enum") == 0) {
        const json_t *values = json_object_get (field, "values");
        size_t i;
        const json_t *v;
        if (json_is_string (value))
            json_array_foreach (values, i, v)
                if (strcmp (json_string_value (v), json_string_value (value)) == 0)
                    return 0;
        char list [256] = "";
        json_array_foreach (values, i, v) {
            size_t used = strlen (list);
            snprintf (list + used, sizeof list - used, "%s\"%s\"", i ? ", " : "",
                      json_string_value (v));
        }
        return ps_error_set (err, PS_EINVAL, "%s: '%s' must be one of %s", where, key, list);
    }
    if (strcmp (type, "size2") == 0) {
        if (json_is_array (value) && json_array_size (value) == 2
        &&  json_is_integer (json_array_get (value, 0))
        &&  json_is_integer (json_array_get (value, 1))) {
            int rc = s_check_range ((double) json_integer_value (json_array_get (value, 0)),
                                    field, where, key, err);
            if (rc == 0)
                rc = s_check_range ((double) json_integer_value (json_array_get (value, 1)),
                                    field, where, key, err);
            return rc;
        }
        if (!json_is_integer (value))
            return ps_error_set (err, PS_EINVAL, "%s: '%s' must be an integer or [h, w]",
                                 where, key);
        return s_check_range ((double) json_integer_value (value), field, where, key, err);
    }
    if (strcmp (type, "dims") == 0) {
        size_t n = json_array_size (value);
        if (!json_is_array (value) || (n != 1 && n != 3))
            return ps_error_set (err, PS_EINVAL,
                                 "%s: '%s' must be [height, width, channels] or [features]",
                                 where, key);
        for (size_t i = 0; i < n; i++) {
            const json_t *d = json_array_get (value, i);
            if (!json_is_integer (d))
                return ps_error_set (err, PS_EINVAL, "%s: '%s' must hold integers", where, key);
            int rc = s_check_range ((double) json_integer_value (d), field, where, key, err);
            if (rc)
                return rc;
        }
        return 0;
    }
    if (strcmp (type, "layers") == 0) {
        if (!json_is_array (value) || json_array_size (value) == 0)
            return ps_error_set (err, PS_EINVAL, "%s: '%s' must be a non-empty array",
                                 where, key);
        return 0;
    }
    return ps_error_set (err, PS_EINVAL, "%s: the schema gives '%s' an unknown type '%s'",
                         where, key, type);
}

//  Check every key of obj against fields (skipping `skip`, the layer's
//  "type"), then that every required field is present.
static int
s_check_object (const json_t *obj, const json_t *fields, const char *skip,
                const char *where, ps_error_t *err)
{
    const char *key;
    const json_t *value;
    json_object_foreach ((json_t *) obj, key, value) {
        if (skip && strcmp (key, skip) == 0)
            continue;
        const json_t *field = json_object_get (fields, key);
        if (!field) {
            char list [256] = "";
            const char *k;
            const json_t *f;
            json_object_foreach ((json_t *) fields, k, f) {
                size_t used = strlen (list);
                snprintf (list + used, sizeof list - used, "%s%s", used ? ", " : "", k);
            }
            return ps_error_set (err, PS_EINVAL, "%s: unknown field '%s' (expected %s)",
                                 where, key, list);
        }
        int rc = s_check_value (value, field, where, key, err);
        if (rc)
            return rc;
    }
    const json_t *field;
    json_object_foreach ((json_t *) fields, key, field)
        if (json_is_true (json_object_get (field, "required")) && !json_object_get (obj, key))
            return ps_error_set (err, PS_EINVAL, "%s: missing required field '%s'", where, key);
    return 0;
}

//  The value of a field: the spec's own, or the schema's default (NULL
//  when the default is null, meaning "computed").
static const json_t *
s_field (const json_t *obj, const json_t *fields, const char *key)
{
    const json_t *value = json_object_get (obj, key);
    if (value)
        return value;
    const json_t *dflt = json_object_get (json_object_get (fields, key), "default");
    return json_is_null (dflt) ? NULL : dflt;
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
//  and, when it uses one, its bias of out_c zeros.
static int
s_add_weights (ps_model_t *self, ps_layer_t *l, const int64_t *kdims, int rank, bool bias,
               ps_error_t *err)
{
    l->kernel = self->variable_count;
    int rc = s_add_variable (self, l, "kernel", kdims, rank, PS_INIT_GLOROT_UNIFORM, err);
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
    l->kernel = l->bias = -1;
    l->kh = l->kw = l->stride_h = l->stride_w = 1;
    const json_t *activation = s_field (obj, fields, "activation");
    l->relu = kind == PS_LAYER_RELU
           || (activation && strcmp (json_string_value (activation), "relu") == 0);
    const json_t *padding = s_field (obj, fields, "padding");
    bool same = padding && strcmp (json_string_value (padding), "same") == 0;
    const json_t *use_bias = s_field (obj, fields, "use_bias");
    bool bias = use_bias && json_is_true (use_bias);

    if (kind == PS_LAYER_CONV2D || kind == PS_LAYER_MAXPOOL2D) {
        if (*flat)
            return ps_error_set (err, PS_ESHAPE, "%s: %s needs an [h, w, c] input, "
                                 "but its input is flat ([%d])", where,
                                 kind == PS_LAYER_CONV2D ? "Conv2D" : "MaxPool2D", *c);
        int k [2], s [2];
        s_size2 (s_field (obj, fields, kind == PS_LAYER_CONV2D ? "kernel_size" : "pool_size"), k);
        const json_t *strides = s_field (obj, fields, "strides");
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
            l->out_c = (int) json_integer_value (json_object_get (obj, "filters"));
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
        l->out_c = (int) json_integer_value (json_object_get (obj, "units"));
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
         || ((kind == PS_LAYER_RELU || kind == PS_LAYER_DROPOUT) && *flat);
    return s_check_size (self, *h, *w, *c, where, err);
}

//  Give layer `index` its name: the spec's, or Keras's automatic one
//  (stem, stem_1, stem_2, ... counted per type), and check it is unique.
static int
s_name_layer (ps_model_t *self, int index, const json_t *obj, int type, int *counters,
              const char *where, ps_error_t *err)
{
    ps_layer_t *l = &self->layers [index];
    const json_t *name = json_object_get (obj, "name");
    if (name && !json_is_string (name))
        return ps_error_set (err, PS_EINVAL, "%s: 'name' must be a string", where);
    if (name) {
        const char *s = json_string_value (name);
        //  Room for "/kernel" keeps every variable name within PS_NAME_MAX.
        if (strlen (s) == 0 || strlen (s) > PS_NAME_MAX - 16 || strchr (s, '/')
        ||  ps_name_check (s, strlen (s), NULL))
            return ps_error_set (err, PS_EINVAL, "%s: bad name \"%s\" (1 to %d printable "
                                 "characters, no '/')", where, s, PS_NAME_MAX - 16);
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

static int
s_build (ps_model_t *self, const json_t *spec, const json_t *schema, const char *origin,
         ps_error_t *err)
{
    const json_t *model_fields = json_object_get (schema, "model");
    const json_t *layer_schemas = json_object_get (schema, "layers");
    if (!json_is_object (spec))
        return ps_error_set (err, PS_EINVAL, "%s: a model spec is a JSON object", origin);
    int rc = s_check_object (spec, model_fields, NULL, origin, err);
    if (rc)
        return rc;
    const json_t *name = json_object_get (spec, "name");
    snprintf (self->name, sizeof self->name, "%s", name ? json_string_value (name) : origin);

    const json_t *input = json_object_get (spec, "input_shape");
    bool flat = json_array_size (input) == 1;
    int h = flat ? 1 : (int) json_integer_value (json_array_get (input, 0));
    int w = flat ? 1 : (int) json_integer_value (json_array_get (input, 1));
    int c = (int) json_integer_value (json_array_get (input, flat ? 0 : 2));
    self->in_h = h, self->in_w = w, self->in_c = c;
    char where [PS_ERROR_MSG_MAX / 2];
    snprintf (where, sizeof where, "%s: input_shape", origin);
    if ((rc = s_check_size (self, h, w, c, where, err)))
        return rc;

    const json_t *layers = json_object_get (spec, "layers");
    size_t count = json_array_size (layers);
    if (count > 1024)
        return ps_error_set (err, PS_EINVAL, "%s: %zu layers are more than 1024", origin, count);
    self->layers = calloc (count, sizeof (ps_layer_t));
    self->variables = calloc (2 * count, sizeof (ps_variable_t));
    if (!self->layers || !self->variables)
        return ps_error_set (err, PS_ETOOBIG, "%s: out of memory for %zu layers", origin, count);
    int counters [S_TYPE_COUNT] = { 0 };
    for (size_t i = 0; i < count; i++) {
        const json_t *obj = json_array_get (layers, i);
        snprintf (where, sizeof where, "%s: layer %zu", origin, i);
        if (!json_is_object (obj))
            return ps_error_set (err, PS_EINVAL, "%s: a layer is a JSON object", where);
        const char *type = json_string_value (json_object_get (obj, "type"));
        if (!type)
            return ps_error_set (err, PS_EINVAL, "%s: %s 'type' (a string such as "
                                 "\"Conv2D\")", where,
                                 json_object_get (obj, "type") ? "a non-string" : "missing");
        int t = 0;
        while (t < S_TYPE_COUNT && strcmp (s_layer_types [t].type, type) != 0)
            t++;
        if (t == S_TYPE_COUNT)
            return ps_error_set (err, PS_EINVAL, "%s: unknown layer type \"%s\" (known: "
                                 "Conv2D, Dense, MaxPool2D, ReLU, Flatten, Dropout)", where, type);
        const json_t *fields = json_object_get (layer_schemas, type);
        if ((rc = s_name_layer (self, (int) i, obj, t, counters, where, err)))
            return rc;
        snprintf (where, sizeof where, "%s: layer %zu (%s \"%s\")", origin, i, type,
                  self->layers [i].name);
        if ((rc = s_check_object (obj, fields, "type", where, err))
        ||  (rc = s_resolve_layer (self, (int) i, obj, fields, s_layer_types [t].kind,
                                   &h, &w, &c, &flat, where, err)))
            return rc;
        self->layer_count++;
    }
    if (!flat)
        return ps_error_set (err, PS_ESHAPE, "%s: the last layer must give flat logits "
                             "[classes], but it gives [%d, %d, %d]; end with Flatten and Dense",
                             origin, h, w, c);
    if (c < 2 || c > 256)
        return ps_error_set (err, PS_ESHAPE, "%s: the last layer gives %d logits; "
                             "classification needs 2 to 256 classes", origin, c);
    if (self->param_count == 0)
        return ps_error_set (err, PS_EINVAL, "%s: the model has no Conv2D or Dense layer, "
                             "so no parameters to train", origin);
    return 0;
}

//  Build a model from a parsed spec; takes the reference to spec.
static ps_model_t *
s_from_json (json_t *spec, const char *origin, ps_error_t *err)
{
    ps_model_t *self = calloc (1, sizeof *self);
    json_error_t jerr;
    if (!self) {
        json_decref (spec);
        ps_error_set (err, PS_ETOOBIG, "%s: out of memory", origin);
        return NULL;
    }
    json_t *schema = json_loads (ps_model_schema_json, JSON_REJECT_DUPLICATES, &jerr);
    if (!schema)
        ps_error_set (err, PS_EINVAL, "schemas/model.json (built in): %s", jerr.text);
    if (!schema || s_build (self, spec, schema, origin, err))
        ps_model_destroy (&self);
    else {
        self->spec = json_dumps (spec, JSON_COMPACT);
        if (!self->spec)
            abort ();           //  json_dumps fails only when out of memory
    }
    json_decref (spec);
    json_decref (schema);
    return self;
}

//  A number too large to read (ps_json.h) at big->path, "KEY[...]" or
//  "layers[i].KEY[...]", worded as s_check_range words a number out of
//  range, with the key's bound from the schema (a key of that name in any
//  layer type: the types agree on the bounds of the keys they share).
static int
s_too_large (const ps_json_overflow_t *big, const char *origin, ps_error_t *err)
{
    json_error_t jerr;
    json_t *schema = json_loads (ps_model_schema_json, JSON_REJECT_DUPLICATES, &jerr);
    if (!schema)
        return ps_error_set (err, PS_EINVAL, "schemas/model.json (built in): %s", jerr.text);
    char where [PS_ERROR_MSG_MAX / 2];
    snprintf (where, sizeof where, "%s", origin);
    const char *key = big->path;
    const json_t *field = NULL;
    unsigned layer;
    int skip = 0;
    if (sscanf (big->path, "layers[%u].%n", &layer, &skip) == 1 && skip > 0) {
        snprintf (where, sizeof where, "%s: layer %u", origin, layer);
        key = big->path + skip;
    }
    //  The key itself, without what follows it (an index, a deeper key).
    char name [sizeof big->path];
    size_t n = strcspn (key, ".[");
    memcpy (name, key, n);
    name [n] = 0;
    if (key == big->path)
        field = json_object_get (json_object_get (schema, "model"), name);
    else {
        const char *type;
        const json_t *fields;
        json_object_foreach (json_object_get (schema, "layers"), type, fields)
            if (!field)
                field = json_object_get (fields, name);
    }
    const json_t *min = json_object_get (field, "min");
    const json_t *max = json_object_get (field, "max");
    const json_t *below = json_object_get (field, "below");
    int rc;
    if (!*name)
        rc = ps_error_set (err, PS_EINVAL, "%s: a model spec is a JSON object, not %s", origin,
                           big->literal);
    else
    if (big->literal [0] == '-' && min)
        rc = ps_error_set (err, PS_EINVAL, "%s: '%s' is %s, below the minimum %.15g", where, name,
                           big->literal, json_number_value (min));
    else
    if (big->literal [0] != '-' && max)
        rc = ps_error_set (err, PS_EINVAL, "%s: '%s' is %s, above the maximum %.15g", where, name,
                           big->literal, json_number_value (max));
    else
    if (big->literal [0] != '-' && below)
        rc = ps_error_set (err, PS_EINVAL, "%s: '%s' is %s, must be below %.15g", where, name,
                           big->literal, json_number_value (below));
    else
        rc = ps_error_set (err, PS_EINVAL, "%s: '%s' is %s, too large to read", where, name,
                           big->literal);
    json_decref (schema);
    return rc;
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
                      "mlp) nor a file", name_or_path);
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
    free (self->spec);
    free (self->layers);
    free (self->variables);
    free (self);
    *self_p = NULL;
}

int
ps_model_check_input (const ps_model_t *self, int rows, int cols, int classes, ps_error_t *err)
{
    if ((size_t) self->in_h * self->in_w * self->in_c != (size_t) rows * cols
    ||  ps_model_classes (self) != classes)
        return ps_error_set (err, PS_ESHAPE, "model \"%s\" does not fit the data: it takes "
                             "%dx%dx%d inputs and gives %d classes, but the data has %dx%dx1 "
                             "images of %d classes", self->name, self->in_h, self->in_w,
                             self->in_c, ps_model_classes (self), rows, cols, classes);
    return 0;
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

size_t
ps_model_max_activation (const ps_model_t *self)
{
    return self->max_activation;
}

int
ps_model_check_batch (const ps_model_t *self, int max_batch, ps_error_t *err)
{
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
    char line [256];
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
        &&  (l->kind == PS_LAYER_FLATTEN || l->kind == PS_LAYER_DENSE || l->in_h * l->in_w == 1))
            snprintf (shape, sizeof shape, "[%d]", l->out_c);
        else
            snprintf (shape, sizeof shape, "[%d, %d, %d]", l->out_h, l->out_w, l->out_c);
        const char *type = "?";
        for (int t = 0; t < S_TYPE_COUNT; t++)
            if (s_layer_types [t].kind == l->kind)
                type = s_layer_types [t].type;
        snprintf (line, sizeof line, "  %-16s %-10s %-16s %10zu%s", l->name, type, shape,
                  params, l->relu && l->kind != PS_LAYER_RELU ? "  relu" : "");
        out (line, arg);
    }
    snprintf (line, sizeof line, "  total parameters: %zu", self->param_count);
    out (line, arg);
}
