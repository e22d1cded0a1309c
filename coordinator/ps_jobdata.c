//  The job's data; see ps_jobdata.h.

#include "ps_jobdata.h"

#include <inttypes.h>
#include <string.h>

#include "ps_ctrdata.h"
#include "ps_dataset.h"
#include "ps_log.h"

//  Check what the two splits show against each other and the model, and
//  set *train_count.
static int
s_check_splits (const ps_job_t *job, const ps_model_t *model, const ps_dataset_info_t *train,
                const ps_dataset_info_t *test, size_t *train_count, ps_error_t *err)
{
    if (test->rows != train->rows || test->cols != train->cols
    ||  test->channels != train->channels)
        return ps_error_set (err, PS_ESHAPE, "the test examples are %dx%dx%d, the training "
                             "examples %dx%dx%d (rows x columns x channels)", test->rows,
                             test->cols, test->channels, train->rows, train->cols,
                             train->channels);
    int classes = train->classes > test->classes ? train->classes : test->classes;
    if (job->classes > 0 && ps_model_regression (model))
        return ps_error_set (err, PS_EINVAL, "at /data/classes: model \"%s\" is a regression "
                             "model (\"loss\": \"mse\"), which has no classes; leave "
                             "classes out", ps_model_name (model));
    if (job->classes > 0 && classes > job->classes)
        return ps_error_set (err, PS_ESHAPE, "at /data/classes: %d classes, but the labels go "
                             "up to %d (%d classes)", job->classes, classes - 1, classes);
    if (job->classes > 0 && job->classes != ps_model_label_classes (model))
        return ps_error_set (err, PS_ESHAPE, "at /data/classes: %d classes, but the last layer "
                             "of model \"%s\" gives %d%s", job->classes, ps_model_name (model),
                             ps_model_label_classes (model),
                             ps_model_binary (model) ? " (one logit: binary)" : "");
    int rc = ps_model_check_input (model, train->rows, train->cols, train->channels, classes,
                                   err);
    if (rc)
        return rc;
    //  Said here once rather than by every worker's backend as it fails
    //  and is restarted (ps_backend_new).
    const char *cpu_only = ps_model_cpu_only (model);
    if (cpu_only && strcmp (job->device, "gpu") == 0)
        return ps_error_set (err, PS_EINVAL, "at /device: model \"%s\" is %s, which runs on "
                             "the CPU only; use device cpu or auto", ps_model_name (model),
                             cpu_only);
    *train_count = train->count;
    return 0;
}

//  A classifier's CSV files against the model.
static int
s_check_csv (const ps_job_t *job, const ps_model_t *model, size_t *train_count,
             ps_error_t *err)
{
    ps_dataset_info_t train, test;
    int targets = ps_model_targets (model);
    int rc = ps_dataset_probe_csv_targets (job->train_data, job->label_column, targets,
                                           (size_t) job->train_limit, &train, err);
    if (rc == 0)
        rc = ps_dataset_probe_csv_targets (job->test_data, job->label_column, targets,
                                           (size_t) job->test_limit, &test, err);
    return rc ? rc : s_check_splits (job, model, &train, &test, train_count, err);
}

//  The IDX or .npy files against an image model: their headers, and the
//  labels for the classes.
static int
s_check_idx (const ps_job_t *job, const ps_model_t *model, size_t *train_count,
             ps_error_t *err)
{
    ps_dataset_info_t train, test;
    int targets = ps_model_targets (model);
    int rc = ps_dataset_probe_targets (job->data_dir, PS_SPLIT_TRAIN, job->train_images,
                                       job->train_labels, targets, (size_t) job->train_limit,
                                       &train, err);
    if (rc == 0)
        rc = ps_dataset_probe_targets (job->data_dir, PS_SPLIT_TEST, job->test_images,
                                       job->test_labels, targets, (size_t) job->test_limit,
                                       &test, err);
    if (rc == 0)
        rc = s_check_splits (job, model, &train, &test, train_count, err);
    //  Named files say where they are themselves; the default ones are
    //  data_dir's.
    if (rc && !job->train_images [0] && !job->test_images [0])
        ps_error_prefix (err, rc, "%s", job->data_dir);
    return rc;
}

//  Open one text file (building or finding its index) and count its
//  lines, saying what the index found malformed.
static int
s_count_lines (const char *key, const char *path, ps_ctrformat_t format, uint64_t *lines,
               ps_error_t *err)
{
    ps_error_t why;
    ps_ctrfile_t *file = ps_ctrfile_open (path, format, NULL, &why);
    if (!file) {
        if (err)
            *err = why;
        return ps_error_prefix (err, why.code, "%s", key);
    }
    const ps_ctrindex_t *index = ps_ctrfile_index (file);
    *lines = ps_ctrfile_lines (file);
    if (ps_ctrindex_malformed (index))
        ps_warn ("%s %s: %" PRIu64 " of %" PRIu64 " lines are malformed and skipped (the "
                 "first, line %" PRIu64 ": %s)", key, path, ps_ctrindex_malformed (index),
                 *lines, ps_ctrindex_first_malformed (index), ps_ctrindex_first_reason (index));
    ps_ctrfile_destroy (&file);
    if (*lines == 0)
        return ps_error_set (err, PS_EINVAL, "%s %s: expected examples, got an empty file",
                             key, path);
    return 0;
}

//  The text files against a click-through-rate model, and the mode.
static int
s_check_text (const ps_job_t *job, const ps_model_t *model, const ps_ctrmodel_t *ctr,
              size_t *train_count, ps_error_t *err)
{
    const char *name = ps_model_name (model);
    if (job->mode != PS_MODE_ASYNC && job->mode != PS_MODE_SSP)
        return ps_error_set (err, PS_EINVAL, "at /mode: mode %s cannot train model \"%s\", a "
                             "click-through-rate model whose embedding tables live on the "
                             "servers and take each step's rows on their own; use async or "
                             "ssp", ps_mode_name (job->mode), name);
    ps_ctrformat_t format;
    int rc = ps_ctrformat_parse (job->data_format, &format, err);
    if (rc)
        return ps_error_prefix (err, rc, "at /data_format");
    //  What a line of each format gives (ps_ctrbatch.h).
    int dense = format == PS_CTR_CRITEO ? PS_CTR_CRITEO_DENSE : 0;
    int fields = format == PS_CTR_CRITEO ? PS_CTR_CRITEO_FIELDS : 1;
    if (ctr->dense != dense || ctr->fields != fields)
        return ps_error_set (err, PS_EINVAL, "at /data_format: model \"%s\" takes %d dense "
                             "features and %d categorical fields, but a %s line has %d and %d",
                             name, ctr->dense, ctr->fields, job->data_format, dense, fields);
    uint64_t train_lines, test_lines;
    if ((rc = s_count_lines ("train_data", job->train_data, format, &train_lines, err))
    ||  (rc = s_count_lines ("test_data", job->test_data, format, &test_lines, err)))
        return rc;
    *train_count = (size_t) train_lines;
    return 0;
}

int
ps_jobdata_check (const ps_job_t *job, const ps_model_t *model, size_t *train_count,
                  ps_error_t *err)
{
    const ps_ctrmodel_t *ctr = ps_model_ctr (model);
    if (strcmp (job->data_format, "csv") == 0)
        return ctr ? ps_error_set (err, PS_EINVAL, "at /data_format: model \"%s\" is a "
                                   "click-through-rate model and reads criteo or libsvm text, "
                                   "not csv", ps_model_name (model))
                   : s_check_csv (job, model, train_count, err);
    bool text = strcmp (job->data_format, "idx") != 0;
    if (ctr && !text)
        return ps_error_set (err, PS_EINVAL, "at /data_format: model \"%s\" is a "
                             "click-through-rate model and reads criteo or libsvm text, not "
                             "the IDX images of %s; set data_format, train_data and test_data",
                             ps_model_name (model), job->data_dir);
    if (!ctr && text)
        return ps_error_set (err, PS_EINVAL, "at /data_format: model \"%s\" is an image "
                             "classifier and reads IDX or .npy files (data_format idx) or CSV "
                             "(data_format csv), not %s text", ps_model_name (model),
                             job->data_format);
    return ctr ? s_check_text (job, model, ctr, train_count, err)
               : s_check_idx (job, model, train_count, err);
}
