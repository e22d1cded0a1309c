//  ps-worker predict: a trained image classifier run on new images, batch
//  by batch, on the CPU or a GPU (ps_backend.h), writing each example's
//  class probabilities (the softmax of its logits; for a binary classifier
//  1 - p and p, p the sigmoid of its logit) and its most likely class, or
//  a regression model's k outputs.
//
//  The weights come from a safetensors export (coordinator export,
//  ps_safetensors.h) or straight from a checkpoint (a checkpoint
//  directory or root, ps_ckpt_weights.h). The model is the one given, or
//  else the one the weights name (the export's "model" metadata, the
//  checkpoint's job); every variable of the model must be in the weights
//  with its shape, and nothing else may be, so a file of another model is
//  refused naming the variable and both shapes. The images are an IDX
//  file (gzip or raw) of [N, rows, cols] or [N, rows, cols, channels]
//  unsigned bytes, scaled to [0, 1] as training scales them (ps_dataset.h),
//  or a .npy file of uint8 (scaled so too) or float32 values (taken as
//  they are), [N, features], [N, rows, cols] or [N, rows, cols, channels].
//
//  Output is one row per example, in file order: CSV (a header "index,
//  predicted,p0,...,pK-1", then a line per example) or JSON lines
//  ({"index": i, "predicted": k, "probabilities": [...]}), to a file
//  (replaced atomically: a failed run leaves none) or to stdout as CSV.
//  A regression model's rows are "index,y0,...,yK-1" in CSV and
//  {"index": i, "outputs": [...]} in JSON lines: its K outputs as they are.

#ifndef PS_PREDICT_H_INCLUDED
#define PS_PREDICT_H_INCLUDED

#include <stddef.h>

#include "ps_backend.h"
#include "ps_error.h"

typedef struct {
    const char *model;          //  built-in name or spec file; NULL: the weights'
    const char *weights;        //  a safetensors file, or a checkpoint directory or root
    const char *data;           //  the IDX images file
    const char *out;            //  FILE.csv or FILE.jsonl; NULL: CSV to stdout
    int batch;                  //  examples per forward pass (default 256)
    ps_device_t device;
    int threads;                //  CPU threads (default 1)
} ps_predict_config_t;

//  The defaults: batch 256, the CPU, one thread, CSV to stdout.
void ps_predict_config_default (ps_predict_config_t *cfg);

//  Predict. *examples receives how many rows were written. Returns 0, or a
//  negative code with a message naming the file, variable or option at
//  fault: PS_EINVAL (an output name that is neither .csv nor .jsonl, a
//  click-through-rate model), PS_ESHAPE (weights or images that do not fit
//  the model: both shapes named), PS_ENOTFOUND (a variable missing from
//  the weights, a file missing), or the error of reading or writing.
int ps_predict_run (const ps_predict_config_t *cfg, size_t *examples, ps_error_t *err);

#endif
