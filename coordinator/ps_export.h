//  coordinator export: a checkpoint's weights written as one file that a
//  PyTorch or NumPy user loads without ps-cluster, in safetensors or npz
//  format (ps_safetensors.h, ps_npz.h). Every dense variable goes in under
//  its model-spec name (conv2d/kernel), whole (partitions joined), float32,
//  in its shape and Keras's layout (schemas/model.md), and the model spec
//  goes with it as metadata, so that the file says what network it is.
//  A click-through-rate checkpoint's embedding tables go in too, each as
//  two tensors: "TABLE/ids" (uint64 [n], ascending) and "TABLE/embeddings"
//  (float32 [n, dim], row i the embedding of ids [i]), the live rows of
//  every server's shard as a resume restores them (ps_ckpt_tables.h),
//  without optimizer slots; the ids of a shared table are the salted keys
//  it stores (ps_ctrmodel_key). A user loads one as an nn.Embedding of
//  the rows and a dict from id to row (README.md, "Export and predict").
//
//  The checkpoint is read and verified by ps_ckpt_weights.h and
//  ps_ckpt_tables.h; this module only names the formats and builds the
//  metadata. The file is written under a temporary name and renamed, so a
//  failed export leaves nothing. The tables' rows are written from the
//  mapped shard files through a bounded buffer, never held whole.

#ifndef PS_EXPORT_H_INCLUDED
#define PS_EXPORT_H_INCLUDED

#include <stdint.h>

#include "ps_error.h"

typedef enum {
    PS_EXPORT_SAFETENSORS,
    PS_EXPORT_NPZ,
} ps_export_format_t;

//  Parse "safetensors" or "npz". PS_EINVAL names the text and both choices.
int ps_export_format_parse (const char *text, ps_export_format_t *format, ps_error_t *err);

//  What an export wrote.
typedef struct {
    int variables;
    int tables;                 //  embedding tables, and their rows in all
    uint64_t table_rows;
    uint64_t step;
    char dir [4096];            //  the checkpoint directory read
} ps_export_result_t;

//  Export the checkpoint at checkpoint (a checkpoint directory or a root:
//  its newest valid checkpoint) to out in format. model (may be NULL)
//  overrides the job's model. The metadata holds "model" (the spec as
//  compact JSON), "model_name", "step", "checkpoint" (the directory read),
//  "layout" (Keras's, in words) and "tables" (compact JSON: [{"name",
//  "dim", "rows"}], the rows exported; [] without tables). A table with no
//  rows has no tensors. Returns 0, or the error of reading
//  the checkpoint or writing out, with a message naming it; out is then
//  as it was.
int ps_export_run (const char *checkpoint, ps_export_format_t format, const char *out,
                   const char *model, ps_export_result_t *result, ps_error_t *err);

#endif
