//  The job's data, checked against its model before a run starts: what
//  the coordinator reads of the data itself, and the number of training
//  examples that the schedule cuts into steps.
//
//  An image model reads Fashion-MNIST IDX files from data_dir: only their
//  headers are read here, to check the images' shape and the classes
//  against the model. A click-through-rate model (ps_model_ctr) reads
//  Criteo or LIBSVM text (data_format, train_data, test_data): both files
//  are opened here (ps_ctrfile_open), which builds or finds each line
//  index, so that the workers find it made and the coordinator knows the
//  lines that steps are cut from. Such a model trains only where its
//  tables live on the servers and every step is its own (async and ssp):
//  the sync and mirrored modes are refused for it here, naming both.

#ifndef PS_JOBDATA_H_INCLUDED
#define PS_JOBDATA_H_INCLUDED

#include <stddef.h>

#include "ps_error.h"
#include "ps_job.h"
#include "ps_model.h"

//  Check job's data and mode against model, and set *train_count to the
//  training examples (an IDX file's images, after train_limit) or lines
//  (a text file's, malformed ones included: every line is in some step).
//  Returns 0; or PS_EINVAL (a mode or format the model cannot take, a CTR
//  model with IDX data or the reverse), PS_ESHAPE (the data does not fit
//  the model) or what reading the data gave (PS_ENOTFOUND, PS_EIO,
//  PS_ECORRUPT, ...), with err naming the file or key and what was
//  expected.
int ps_jobdata_check (const ps_job_t *job, const ps_model_t *model, size_t *train_count,
                      ps_error_t *err);

#endif
