//  A checkpoint's weights: every dense variable of a checkpoint, whole,
//  joined from the partitions the servers wrote, in the flat parameter
//  vector of its model (ps_model.h). This is what leaves the cluster when
//  a user takes the trained model away: coordinator export writes it as a
//  safetensors or npz file, and ps-worker predict runs it.
//
//  The checkpoint is found and verified as a resume finds it
//  (ps_ckpt_verify.h): a checkpoint directory is verified whole, a root
//  gives its newest checkpoint that verifies. The model is the job's
//  (the manifest's job.model, a built-in name or a spec path) unless the
//  caller names one; every variable's partitions must cover its rows
//  exactly once with the model's shape, and every file must belong to a
//  variable of the model. Embedding tables are not variables and have no
//  place in the vector: ps_ckpt_weights_read refuses a checkpoint with
//  tables, naming one (ps-worker predict runs image classifiers only);
//  ps_ckpt_weights_read_all reads a click-through-rate checkpoint's dense
//  variables here and its tables with ps_ckpt_tables.h (coordinator
//  export writes both).

#ifndef PS_CKPT_WEIGHTS_H_INCLUDED
#define PS_CKPT_WEIGHTS_H_INCLUDED

#include <stdint.h>

#include "ps_ckpt_tables.h"
#include "ps_error.h"
#include "ps_model.h"

typedef struct _ps_ckpt_weights_t ps_ckpt_weights_t;

//  Read the weights of the checkpoint at path: a checkpoint directory
//  (one holding MANIFEST.json) or a checkpoint root. model (may be NULL:
//  the job's) is a built-in name or a spec file. NULL on error, with a
//  message that names the checkpoint and what is wrong: PS_ENOTFOUND (no
//  checkpoint, a variable's rows in no file), PS_ECORRUPT / PS_EVERSION /
//  PS_EIO from verifying or reading a file, PS_ESHAPE (a file's variable
//  has another shape than the model's: both are named), PS_EINVAL (tables,
//  a file of a variable the model lacks, rows held twice, a bad model).
ps_ckpt_weights_t *ps_ckpt_weights_read (const char *path, const char *model, ps_error_t *err);

//  As ps_ckpt_weights_read, and a checkpoint with embedding tables too (a
//  click-through-rate model's): every table of the checkpoint must be one
//  of the model's with its row width (PS_EINVAL, PS_ESHAPE naming it), and
//  the tables are read and joined as ps_ckpt_tables_read says, with its
//  errors.
ps_ckpt_weights_t *ps_ckpt_weights_read_all (const char *path, const char *model,
                                             ps_error_t *err);
void ps_ckpt_weights_destroy (ps_ckpt_weights_t **self_p);

//  The tables read by ps_ckpt_weights_read_all (none for a checkpoint
//  without tables), owned by self; NULL after ps_ckpt_weights_read.
ps_ckpt_tables_t *ps_ckpt_weights_tables (ps_ckpt_weights_t *self);

//  The model whose flat vector the weights fill.
const ps_model_t *ps_ckpt_weights_model (const ps_ckpt_weights_t *self);

//  The flat parameter vector (ps_model_param_count floats).
const float *ps_ckpt_weights_params (const ps_ckpt_weights_t *self);

//  The checkpoint directory read, and its step.
const char *ps_ckpt_weights_dir (const ps_ckpt_weights_t *self);
uint64_t ps_ckpt_weights_step (const ps_ckpt_weights_t *self);

#endif
