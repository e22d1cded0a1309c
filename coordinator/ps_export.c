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
                 "activations NHWC, Flatten in (h, w, c) order"

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

int
ps_export_run (const char *checkpoint, ps_export_format_t format, const char *out,
               const char *model, ps_export_result_t *result, ps_error_t *err)
{
    ps_ckpt_weights_t *weights = ps_ckpt_weights_read (checkpoint, model, err);
    if (!weights)
        return err ? err->code : PS_EINVAL;
    const ps_model_t *m = ps_ckpt_weights_model (weights);
    int count = ps_model_variable_count (m);
    ps_tensor_t *tensors = calloc ((size_t) count + 1, sizeof (ps_tensor_t));
    if (!tensors)
        abort ();
    for (int i = 0; i < count; i++) {
        const ps_variable_t *v = ps_model_variable (m, i);
        tensors [i] = (ps_tensor_t) { .name = v->name, .shape = v->shape,
                                      .data = ps_ckpt_weights_params (weights) + v->offset };
    }
    char step [24];
    snprintf (step, sizeof step, "%" PRIu64, ps_ckpt_weights_step (weights));
    json_t *metadata = json_pack ("{s:s, s:s, s:s, s:s, s:s}", "model", ps_model_spec (m),
                                  "model_name", ps_model_name (m), "step", step,
                                  "checkpoint", ps_ckpt_weights_dir (weights),
                                  "layout", S_LAYOUT);
    if (!metadata)
        abort ();
    int rc;
    if (format == PS_EXPORT_SAFETENSORS)
        rc = ps_safetensors_write (out, tensors, count, metadata, err);
    else {
        char *text = json_dumps (metadata, JSON_COMPACT);
        if (!text)
            abort ();
        rc = ps_npz_write (out, tensors, count, text, err);
        free (text);
    }
    if (rc == 0 && result) {
        result->variables = count;
        result->step = ps_ckpt_weights_step (weights);
        snprintf (result->dir, sizeof result->dir, "%s", ps_ckpt_weights_dir (weights));
    }
    json_decref (metadata);
    free (tensors);
    ps_ckpt_weights_destroy (&weights);
    return rc;
}
