//  Fuzz target: the model spec parser (common/model/ps_model). The input is the
//  JSON text of a spec, up to its first NUL byte, checked against
//  schemas/model.schema.json and resolved into layers and variables as ps-worker
//  and the coordinator load one. A spec that resolves is then asked what
//  its users ask: layers, variables, sizes, the batch check, the summary,
//  and (when it is small enough to be worth it) its initial parameters.
//
//  Oracles, beyond the sanitizers: a refusal has a message naming the
//  origin; the variables of a resolved model tile its flat parameter
//  vector exactly, each as large as its shape; each variable is found by
//  its name; the model's own variables pass ps_model_check_variables.

#include "fuzz_input.h"
#include "ps_model.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  Models above this many parameters are not initialised: the work grows
//  with the size and finds nothing new.
#define S_MAX_INIT_PARAMS  ((size_t) 1 << 20)

static void
s_fail (const char *what, const char *detail)
{
    fprintf (stderr, "fuzz_model: %s: %s\n", what, detail);
    abort ();
}

static void
s_line (const char *line, void *arg)
{
    *(size_t *) arg += strlen (line);
}

static void
s_check (const ps_model_t *model)
{
    int layers = ps_model_layer_count (model);
    for (int i = 0; i < layers; i++) {
        const ps_layer_t *layer = ps_model_layer (model, i);
        if (layer->kernel >= ps_model_variable_count (model)
        ||  layer->bias >= ps_model_variable_count (model))
            s_fail ("a layer names a variable the model lacks", layer->name);
    }
    size_t offset = 0;
    for (int i = 0; i < ps_model_variable_count (model); i++) {
        const ps_variable_t *var = ps_model_variable (model, i);
        if (var->offset != offset || (int64_t) var->count != ps_shape_count (&var->shape))
            s_fail ("variables do not tile the parameters at", var->name);
        if (ps_model_find_variable (model, var->name) != i)
            s_fail ("a variable is not found by its name", var->name);
        offset += var->count;
    }
    if (offset != ps_model_param_count (model))
        s_fail ("the parameter count differs from the variables'", ps_model_name (model));
    int count = ps_model_variable_count (model);
    const char **names = calloc ((size_t) count + 1, sizeof *names);
    ps_shape_t *shapes = calloc ((size_t) count + 1, sizeof *shapes);
    if (!names || !shapes)
        abort ();
    for (int i = 0; i < count; i++) {
        names [i] = ps_model_variable (model, i)->name;
        shapes [i] = ps_model_variable (model, i)->shape;
    }
    ps_error_t err;
    if (ps_model_check_variables (model, names, shapes, count, &err) != 0)
        s_fail ("the model's own variables do not pass", err.msg);
    free (names);
    free (shapes);
    int h, w, c;
    ps_model_input_shape (model, &h, &w, &c);
    volatile size_t sink = ps_model_input_size (model) + (size_t) ps_model_classes (model)
                         + ps_model_max_activation (model);
    sink += (size_t) ps_model_forward_macs (model);
    ps_model_check_batch (model, 64, &err);
    ps_model_check_input (model, 28, 28, 1, 10, &err);
    size_t chars = 0;
    ps_model_summary (model, s_line, &chars);
    sink += chars;
    (void) sink;
    if (offset > 0 && offset <= S_MAX_INIT_PARAMS) {
        float *params = malloc (offset * sizeof (float));
        if (!params)
            abort ();
        ps_model_init_params (model, 42, params);
        free (params);
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *text = fuzz_input_text (data, size);
    ps_error_t err = { 0 };
    ps_model_t *model = ps_model_parse (text, "fuzz.json", &err);
    if (model) {
        s_check (model);
        ps_model_destroy (&model);
    }
    else
    if (!strstr (err.msg, "fuzz.json"))
        s_fail ("a refusal does not name the spec", err.msg);
    free (text);
    return 0;
}
