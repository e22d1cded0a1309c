//  ps-worker predict: see ps_predict.h.

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ps_ckpt_weights.h"
#include "ps_file.h"
#include "ps_idx.h"
#include "ps_npy.h"
#include "ps_predict.h"
#include "ps_safetensors.h"

//  One prediction run: the model and its weights, the images, the backend,
//  and the first error met while writing (the file writer can return only
//  -1 and errno).
typedef struct {
    const ps_predict_config_t *cfg;
    const ps_model_t *net;      //  the model run: model's or the checkpoint's
    ps_model_t *model;          //  owned, when read for a safetensors file
    ps_ckpt_weights_t *weights; //  when read from a checkpoint
    float *params;              //  owned when read from a safetensors file
    ps_idx_t images;            //  an IDX file's bytes, or
    ps_npy_t npy;               //  a .npy file's bytes or float32 values, mapped
    size_t count, size;         //  examples, floats per example
    bool jsonl;
    ps_backend_t *backend;
    ps_error_t error;
    int rc;
    size_t written;
} s_run_t;

void
ps_predict_config_default (ps_predict_config_t *cfg)
{
    *cfg = (ps_predict_config_t) { .batch = 256, .device = PS_DEVICE_CPU, .threads = 1 };
}

//  The model's parameters from a safetensors file: every variable there
//  with its shape, and no other tensor.
static int
s_load_safetensors (s_run_t *run, ps_error_t *err)
{
    const char *path = run->cfg->weights;
    ps_safetensors_t *file = ps_safetensors_read (path, err);
    if (!file)
        return err->code;
    int rc = PS_OK;
    if (run->cfg->model)
        run->model = ps_model_load (run->cfg->model, err);
    else
    if (ps_safetensors_metadata (file, "model"))
        run->model = ps_model_parse (ps_safetensors_metadata (file, "model"), path, err);
    else
        rc = ps_error_set (err, PS_EINVAL, "weights %s: no \"model\" in its metadata; give "
                           "--model NAME|FILE", path);
    if (!rc && !run->model)
        rc = ps_error_prefix (err, err->code, "--model");
    if (!rc && ps_model_ctr (run->model))
        rc = ps_error_set (err, PS_EINVAL, "model \"%s\" is a click-through-rate model; "
                           "predict runs image classifiers", ps_model_name (run->model));
    if (!rc && !(run->params = calloc (ps_model_param_count (run->model) + 1, sizeof (float))))
        abort ();
    int count = rc ? 0 : ps_model_variable_count (run->model);
    for (int i = 0; !rc && i < count; i++) {
        const ps_variable_t *v = ps_model_variable (run->model, i);
        const ps_tensor_t *t = ps_safetensors_find (file, v->name);
        char want [128], got [128];
        ps_shape_str (&v->shape, want, sizeof want);
        if (!t)
            rc = ps_error_set (err, PS_ENOTFOUND, "weights %s: variable \"%s\" (%s in model "
                               "\"%s\") is missing", path, v->name, want,
                               ps_model_name (run->model));
        else
        if (!ps_shape_equal (&t->shape, &v->shape))
            rc = ps_error_set (err, PS_ESHAPE, "weights %s: variable \"%s\" is %s in the file, "
                               "but %s in model \"%s\"", path, v->name,
                               ps_shape_str (&t->shape, got, sizeof got), want,
                               ps_model_name (run->model));
        else
            memcpy (run->params + v->offset, t->data, v->count * sizeof (float));
    }
    for (int i = 0; !rc && i < ps_safetensors_count (file); i++) {
        const char *name = ps_safetensors_tensor (file, i)->name;
        if (ps_model_find_variable (run->model, name) < 0)
            rc = ps_error_set (err, PS_EINVAL, "weights %s: tensor \"%s\" is not a variable of "
                               "model \"%s\"; are these the weights of another model?", path,
                               name, ps_model_name (run->model));
    }
    ps_safetensors_destroy (&file);
    return rc;
}

//  A .npy file of examples: uint8 (scaled as training scales them) or
//  float32 (taken as they are), [N, F] flat features or [N, H, W(, C)].
static int
s_load_npy (s_run_t *run, size_t *per, int *rank, ps_error_t *err)
{
    const char *path = run->cfg->data;
    int rc = ps_npy_open (path, &run->npy, err);
    if (rc)
        return rc;
    if (run->npy.dtype != PS_NPY_U8 && run->npy.dtype != PS_NPY_F32)
        return ps_error_set (err, PS_ESHAPE, "data %s: element type '%s', expected uint8 or "
                             "float32 examples", path, run->npy.descr);
    *rank = run->npy.rank;
    *per = *rank >= 2 && *rank <= 4 ? 1 : 0;
    for (int i = 1; *per && i < *rank; i++)
        *per *= (size_t) run->npy.dims [i];
    run->count = *rank >= 1 ? (size_t) run->npy.dims [0] : 0;
    return PS_OK;
}

//  The images: an IDX file, or a .npy file (s_load_npy), that fits the
//  model's input, one example per first-axis entry.
static int
s_load_images (s_run_t *run, ps_error_t *err)
{
    const char *path = run->cfg->data;
    bool is_npy;
    int rc = ps_npy_sniff (path, &is_npy, err);
    int h, w, c;
    ps_model_input_shape (run->net, &h, &w, &c);
    run->size = ps_model_input_size (run->net);
    size_t per = 0;
    int rank = 0;
    if (rc == 0 && is_npy)
        rc = s_load_npy (run, &per, &rank, err);
    else
    if (rc == 0)
        rc = ps_idx_read (path, &run->images, err);
    if (rc)
        return rc;
    const uint32_t *d = run->images.dims;
    if (!is_npy) {
        rank = run->images.rank;
        per = rank == 3 ? (size_t) d [1] * d [2] : rank == 4 ? (size_t) d [1] * d [2] * d [3]
            : 0;
        run->count = d [0];
    }
    if (per != run->size)
        return ps_error_set (err, PS_ESHAPE, "data %s: expected images of %dx%dx%d values for "
                             "model \"%s\" ([N, %d, %d] or [N, %d, %d, %d]), but the file holds "
                             "a rank-%d array of %zu values per example", path, h, w, c,
                             ps_model_name (run->net), h, w, h, w, c, rank, per);
    return PS_OK;
}

//  Copy examples [first, first + n) to x as the model's floats.
static void
s_inputs (const s_run_t *run, size_t first, int n, float *x)
{
    size_t values = (size_t) n * run->size;
    if (run->npy.data && run->npy.dtype == PS_NPY_F32) {
        memcpy (x, (const char *) run->npy.data + first * run->size * sizeof (float),
                values * sizeof (float));
        return;
    }
    const uint8_t *pixels = (run->npy.data ? (const uint8_t *) run->npy.data
                                           : run->images.data) + first * run->size;
    for (size_t i = 0; i < values; i++)
        x [i] = (float) pixels [i] / 255.0f;
}

//  Write one example's row of a regression model: its k outputs.
static int
s_write_values (FILE *out, bool jsonl, size_t index, const float *outputs, int k)
{
    fprintf (out, jsonl ? "{\"index\": %zu, \"outputs\": [" : "%zu", index);
    for (int j = 0; j < k; j++)
        fprintf (out, "%s%.9g", jsonl && j == 0 ? "" : jsonl ? ", " : ",", (double) outputs [j]);
    return fputs (jsonl ? "]}\n" : "\n", out) < 0 ? -1 : 0;
}

//  Write one example's row of a binary classifier: class 1 when its logit
//  z > 0, and the probabilities 1 - p and p of p = sigmoid (z).
static int
s_write_binary (FILE *out, bool jsonl, size_t index, float z)
{
    double p = 1.0 / (1.0 + exp (-(double) z));
    fprintf (out, jsonl ? "{\"index\": %zu, \"predicted\": %d, \"probabilities\": "
                          "[%.9g, %.9g]}\n" : "%zu,%d,%.9g,%.9g\n", index, z > 0, 1 - p, p);
    return ferror (out) ? -1 : 0;
}

//  Write one example's row.
static int
s_write_row (FILE *out, bool jsonl, size_t index, const float *logits, int classes)
{
    //  A stable softmax: shift by the largest logit, in double.
    double top = logits [0], sum = 0;
    int best = 0;
    for (int k = 1; k < classes; k++)
        if (logits [k] > top) {
            top = logits [k];
            best = k;
        }
    for (int k = 0; k < classes; k++)
        sum += exp ((double) logits [k] - top);
    fprintf (out, jsonl ? "{\"index\": %zu, \"predicted\": %d, \"probabilities\": ["
                        : "%zu,%d", index, best);
    for (int k = 0; k < classes; k++)
        fprintf (out, "%s%.9g", jsonl && k == 0 ? "" : jsonl ? ", " : ",",
                 exp ((double) logits [k] - top) / sum);
    return fputs (jsonl ? "]}\n" : "\n", out) < 0 ? -1 : 0;
}

//  Run the batches and write the rows to fd (a ps_file_writer_fn).
static int
s_write (int fd, void *arg)
{
    s_run_t *run = arg;
    int copy = dup (fd);
    FILE *out = copy >= 0 ? fdopen (copy, "w") : NULL;
    if (!out) {
        int saved = errno;
        if (copy >= 0)
            close (copy);
        errno = saved;
        return -1;
    }
    int classes = ps_model_classes (run->net);
    bool regression = ps_model_regression (run->net);
    bool binary = ps_model_binary (run->net);
    int batch = run->cfg->batch;
    float *x = malloc ((size_t) batch * run->size * sizeof (float));
    float *logits = malloc ((size_t) batch * (size_t) classes * sizeof (float));
    //  The forward pass takes labels for its loss, which is not used here:
    //  zeros are a class 0, or targets 0, for every model.
    uint8_t *labels = calloc ((size_t) batch, ps_model_label_size (run->net));
    if (!x || !logits || !labels)
        abort ();
    int rc = 0;
    if (!run->jsonl) {
        fputs (regression ? "index" : "index,predicted", out);
        for (int k = 0; k < (binary ? 2 : classes); k++)
            fprintf (out, regression ? ",y%d" : ",p%d", k);
        fputs ("\n", out);
    }
    for (size_t first = 0; !rc && first < run->count; first += (size_t) batch) {
        int n = run->count - first < (size_t) batch ? (int) (run->count - first) : batch;
        s_inputs (run, first, n, x);
        ps_batch_stats_t stats;
        if ((run->rc = ps_backend_forward (run->backend, x, labels, n, logits, &stats,
                                           &run->error))) {
            errno = EIO;
            rc = -1;
        }
        for (int i = 0; !rc && i < n; i++) {
            size_t index = first + (size_t) i;
            const float *row = logits + (size_t) i * classes;
            rc = regression ? s_write_values (out, run->jsonl, index, row, classes)
               : binary ? s_write_binary (out, run->jsonl, index, row [0])
               : s_write_row (out, run->jsonl, index, row, classes);
        }
        if (!rc)
            run->written += (size_t) n;
    }
    free (x);
    free (logits);
    free (labels);
    int saved = errno;
    if (fclose (out) != 0 && !rc)
        return -1;
    errno = saved;
    return rc;
}

//  The output's format from its name: .csv or .jsonl.
static int
s_output_format (const char *out, bool *jsonl, ps_error_t *err)
{
    size_t len = strlen (out);
    *jsonl = len > 6 && strcmp (out + len - 6, ".jsonl") == 0;
    if (!*jsonl && !(len > 4 && strcmp (out + len - 4, ".csv") == 0))
        return ps_error_set (err, PS_EINVAL, "--out %s: expected a name ending in .csv or "
                             ".jsonl (the format is chosen by it)", out);
    return PS_OK;
}

int
ps_predict_run (const ps_predict_config_t *cfg, size_t *examples, ps_error_t *err)
{
    s_run_t run = { .cfg = cfg };
    int rc = cfg->out ? s_output_format (cfg->out, &run.jsonl, err) : PS_OK;
    struct stat st;
    if (rc)
        return rc;
    if (stat (cfg->weights, &st) == 0 && S_ISDIR (st.st_mode)) {
        if (!(run.weights = ps_ckpt_weights_read (cfg->weights, cfg->model, err)))
            return err->code;
    }
    else
    if ((rc = s_load_safetensors (&run, err)))
        goto done;
    run.net = run.weights ? ps_ckpt_weights_model (run.weights) : run.model;
    const float *params = run.weights ? ps_ckpt_weights_params (run.weights) : run.params;
    if ((rc = s_load_images (&run, err)))
        goto done;
    if (!(run.backend = ps_backend_new (run.net, cfg->device, cfg->batch, cfg->threads, err))) {
        rc = err->code;
        goto done;
    }
    if ((rc = ps_backend_set_params (run.backend, params, err)))
        goto done;
    if (cfg->out)
        rc = ps_file_write_beside (cfg->out, s_write, &run, err);
    else
    if ((rc = s_write (STDOUT_FILENO, &run)))
        rc = ps_error_set (err, PS_EIO, "writing to stdout: %s", strerror (errno));
    if (rc && run.rc) {
        *err = run.error;
        rc = run.rc;
    }
    *examples = run.written;
done:
    ps_backend_destroy (&run.backend);
    ps_idx_free (&run.images);
    ps_npy_close (&run.npy);
    ps_ckpt_weights_destroy (&run.weights);
    ps_model_destroy (&run.model);
    free (run.params);
    return rc;
}
