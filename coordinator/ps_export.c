//  coordinator export: see ps_export.h.

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ps_ckpt_weights.h"
#include "ps_export.h"
#include "ps_npz.h"
#include "ps_safetensors.h"

//  How the arrays are laid out, for a reader of the metadata who would
//  rebuild the network in another framework.
#define S_LAYOUT "keras: Conv2D kernel [kh, kw, in, out], Dense kernel [in, out], " \
                 "activations NHWC, Flatten in (h, w, c) order; embedding table T: T/ids " \
                 "uint64 [n] sorted, T/embeddings float32 [n, dim], row i of id ids[i]"

int
ps_export_format_parse (const char *text, ps_export_format_t *format, ps_error_t *err)
{
    if (strcmp (text, "safetensors") == 0)
        *format = PS_EXPORT_SAFETENSORS;
    else
    if (strcmp (text, "npz") == 0)
        *format = PS_EXPORT_NPZ;
    else
        return ps_error_set (err, PS_EINVAL, "--format \"%s\": expected safetensors or npz", text);
    return PS_OK;
}

//  The tables' part of the metadata: name, row width and rows exported of
//  each, as compact JSON text (safetensors metadata values are strings).
static char *
s_tables_json (const ps_ckpt_tables_t *tables)
{
    json_t *list = json_array ();
    if (!list)
        abort ();
    for (int i = 0; tables && i < ps_ckpt_tables_count (tables); i++) {
        const ps_tablespec_t *spec = ps_ckpt_tables_spec (tables, i);
        if (json_array_append_new (list, json_pack ("{s:s, s:i, s:I}", "name", spec->name,
                                                    "dim", (int) spec->dim, "rows",
                                                    (json_int_t) ps_ckpt_tables_rows (tables,
                                                                                      i))))
            abort ();
    }
    char *text = json_dumps (list, JSON_COMPACT);
    json_decref (list);
    if (!text)
        abort ();
    return text;
}

int
ps_export_run (const char *checkpoint, ps_export_format_t format, const char *out,
               const char *model, ps_export_result_t *result, ps_error_t *err)
{
    ps_ckpt_weights_t *weights = ps_ckpt_weights_read_all (checkpoint, model, err);
    if (!weights)
        return err ? err->code : PS_EINVAL;
    const ps_model_t *m = ps_ckpt_weights_model (weights);
    ps_ckpt_tables_t *tables = ps_ckpt_weights_tables (weights);
    int ntables = tables ? ps_ckpt_tables_count (tables) : 0;
    int count = ps_model_variable_count (m);
    ps_tensor_t *tensors = calloc ((size_t) count + 2 * (size_t) ntables + 1,
                                   sizeof (ps_tensor_t));
    if (!tensors)
        abort ();
    for (int i = 0; i < count; i++) {
        const ps_variable_t *v = ps_model_variable (m, i);
        tensors [i] = (ps_tensor_t) { .name = v->name, .shape = v->shape,
                                      .data = ps_ckpt_weights_params (weights) + v->offset };
    }
    int ntensors = count;
    uint64_t rows = 0;
    for (int i = 0; i < ntables; i++) {
        ntensors += ps_ckpt_tables_tensors (tables, i, &tensors [ntensors],
                                            &tensors [ntensors + 1]);
        rows += ps_ckpt_tables_rows (tables, i);
    }
    char step [24];
    snprintf (step, sizeof step, "%" PRIu64, ps_ckpt_weights_step (weights));
    char *tables_text = s_tables_json (tables);
    json_t *metadata = json_pack ("{s:s, s:s, s:s, s:s, s:s, s:s}", "model", ps_model_spec (m),
                                  "model_name", ps_model_name (m), "step", step,
                                  "checkpoint", ps_ckpt_weights_dir (weights),
                                  "layout", S_LAYOUT, "tables", tables_text);
    free (tables_text);
    if (!metadata)
        abort ();
    int rc;
    if (format == PS_EXPORT_SAFETENSORS)
        rc = ps_safetensors_write (out, tensors, ntensors, metadata, err);
    else {
        char *text = json_dumps (metadata, JSON_COMPACT);
        if (!text)
            abort ();
        rc = ps_npz_write (out, tensors, ntensors, text, err);
        free (text);
    }
    if (rc == 0 && result) {
        result->variables = count;
        result->tables = ntables;
        result->table_rows = rows;
        result->step = ps_ckpt_weights_step (weights);
        snprintf (result->dir, sizeof result->dir, "%s", ps_ckpt_weights_dir (weights));
    }
    json_decref (metadata);
    free (tensors);
    ps_ckpt_weights_destroy (&weights);
    return rc;
}
