//  Unit tests for the job's data checked against its model before a run
//  (coordinator/ps_jobdata.c) and the rules between the data keys
//  (ps_job_validate): a click-through-rate model's text files are opened
//  and their lines counted, and each refusal names what was wrong: a
//  missing train or test file, an empty or mostly malformed one, a format
//  whose lines the model cannot take, a CTR model with IDX data or an
//  image model with text, the sync and mirrored modes with a CTR model, a
//  text format without its files or IDX with them, and a limit with text
//  data. The files are real ones in a mkdtemp directory.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "ps_job.h"
#include "ps_jobdata.h"
#include "ps_model.h"

static char s_dir [64];
static char s_train [128], s_test [128], s_bad [128], s_empty [128];

//  A Criteo line: label, 13 counts (one empty), 26 categorical values (one
//  empty), tab-separated.
static void
s_criteo_line (FILE *file, int i)
{
    fprintf (file, "%d", i % 4 == 0);
    for (int f = 0; f < 13; f++)
        f == 3 ? fprintf (file, "\t") : fprintf (file, "\t%d", (i * 7 + f) % 50);
    for (int f = 0; f < 26; f++)
        f == 5 ? fprintf (file, "\t") : fprintf (file, "\t%08x", (unsigned) (i * 31 + f) % 97);
    fprintf (file, "\n");
}

static void
s_write (const char *path, int good, int bad)
{
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    for (int i = 0; i < good; i++)
        s_criteo_line (file, i);
    for (int i = 0; i < bad; i++)
        fprintf (file, "1\tnot\ta\tcriteo\tline\n");
    assert_int_equal (fclose (file), 0);
}

static int
s_setup (void **state)
{
    (void) state;
    harness_tmpdir (s_dir, sizeof s_dir);
    snprintf (s_train, sizeof s_train, "%s/train.txt", s_dir);
    snprintf (s_test, sizeof s_test, "%s/test.txt", s_dir);
    snprintf (s_bad, sizeof s_bad, "%s/bad.txt", s_dir);
    snprintf (s_empty, sizeof s_empty, "%s/empty.txt", s_dir);
    s_write (s_train, 37, 0);
    s_write (s_test, 9, 1);
    s_write (s_bad, 2, 10);
    s_write (s_empty, 0, 0);
    return 0;
}

static int
s_teardown (void **state)
{
    (void) state;
    harness_rmtree (s_dir);
    return 0;
}

//  A CTR job on criteo files: the default job with its data set.
static void
s_ctr_job (ps_job_t *job, const char *train, const char *test)
{
    ps_job_default (job, 2);
    snprintf (job->model, sizeof job->model, "lr");
    snprintf (job->data_format, sizeof job->data_format, "criteo");
    snprintf (job->train_data, sizeof job->train_data, "%s", train);
    snprintf (job->test_data, sizeof job->test_data, "%s", test);
}

//  Check job against model name; expect code and, unless it is 0, a
//  message holding each of the texts given.
static void
s_expect (const ps_job_t *job, const char *model_name, int code, const char *text,
          const char *also)
{
    ps_error_t err = { 0 };
    ps_model_t *model = ps_model_load (model_name, &err);
    if (!model)
        fail_msg ("model %s: %s", model_name, err.msg);
    size_t count = 0;
    int rc = ps_jobdata_check (job, model, &count, &err);
    ps_model_destroy (&model);
    if (rc != code)
        fail_msg ("expected %d, got %d: %s", code, rc, err.msg);
    if (code && (!strstr (err.msg, text) || (also && !strstr (err.msg, also))))
        fail_msg ("expected a message holding '%s' and '%s', got: %s", text, also ? also : "",
                  err.msg);
}

//  Good files: the training lines, malformed ones included, are what steps
//  are cut from; async and ssp both take a CTR model.
static void
test_counts_lines (void **state)
{
    (void) state;
    ps_job_t job;
    s_ctr_job (&job, s_train, s_test);
    for (int m = 0; m < 2; m++) {
        job.mode = m ? PS_MODE_SSP : PS_MODE_ASYNC;
        ps_error_t err = { 0 };
        ps_model_t *model = ps_model_load ("lr", &err);
        assert_non_null (model);
        size_t count = 0;
        if (ps_jobdata_check (&job, model, &count, &err))
            fail_msg ("check: %s", err.msg);
        assert_int_equal (count, 37);
        ps_model_destroy (&model);
    }
    //  The test file's malformed line is skipped, not refused.
    s_ctr_job (&job, s_test, s_train);
    s_expect (&job, "dlrm", 0, NULL, NULL);
}

//  Each refusal names the file or key and what was expected.
static void
test_refusals (void **state)
{
    (void) state;
    ps_job_t job;
    char missing [160];
    snprintf (missing, sizeof missing, "%s/missing.txt", s_dir);
    s_ctr_job (&job, missing, s_test);
    s_expect (&job, "lr", PS_ENOTFOUND, "train_data", missing);
    s_ctr_job (&job, s_train, missing);
    s_expect (&job, "lr", PS_ENOTFOUND, "test_data", missing);
    s_ctr_job (&job, s_empty, s_test);
    s_expect (&job, "lr", PS_EINVAL, "empty file", s_empty);
    s_ctr_job (&job, s_bad, s_test);
    s_expect (&job, "lr", PS_ECORRUPT, "train_data", s_bad);
    //  A format whose lines the model cannot take.
    s_ctr_job (&job, s_train, s_test);
    snprintf (job.data_format, sizeof job.data_format, "libsvm");
    s_expect (&job, "lr", PS_EINVAL, "at /data_format", "13 dense features and 26");
    //  A CTR model with the IDX data, an image model with text.
    ps_job_default (&job, 2);
    snprintf (job.model, sizeof job.model, "dlrm");
    s_expect (&job, "dlrm", PS_EINVAL, "\"dlrm\" is a click-through-rate model", job.data_dir);
    s_ctr_job (&job, s_train, s_test);
    s_expect (&job, "mlp", PS_EINVAL, "\"mlp\" is an image classifier", "criteo");
    //  The modes that keep no tables on the servers, or train in rounds.
    job.mode = PS_MODE_SYNC;
    s_expect (&job, "lr", PS_EINVAL, "mode sync cannot train model \"lr\"", "async or ssp");
    job.mode = PS_MODE_MIRRORED;
    s_expect (&job, "dlrm", PS_EINVAL, "mode mirrored cannot train model \"dlrm\"", NULL);
}

//  The rules between the data keys, which flags may still settle, are
//  ps_job_validate's.
static void
test_key_rules (void **state)
{
    (void) state;
    ps_job_t job;
    ps_error_t err = { 0 };
    s_ctr_job (&job, s_train, s_test);
    assert_int_equal (ps_job_validate (&job, &err), 0);
    job.test_data [0] = 0;
    assert_int_equal (ps_job_validate (&job, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "at /test_data: expected a file of criteo data"));
    s_ctr_job (&job, s_train, s_test);
    job.train_limit = 5;
    assert_int_equal (ps_job_validate (&job, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "at /train_limit: expected 0 with criteo data"));
    s_ctr_job (&job, s_train, s_test);
    snprintf (job.data_format, sizeof job.data_format, "idx");
    assert_int_equal (ps_job_validate (&job, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "at /train_data: expected no file while data_format is "
                                      "idx"));
    //  And the schema's: a format it does not know, a full_every below 1.
    s_ctr_job (&job, s_train, s_test);
    snprintf (job.data_format, sizeof job.data_format, "arff");
    assert_int_equal (ps_job_validate (&job, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "/data_format"));
    s_ctr_job (&job, s_train, s_test);
    job.checkpoint_full_every = 0;
    assert_int_equal (ps_job_validate (&job, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "/checkpoint/full_every"));
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_counts_lines),
        cmocka_unit_test (test_refusals),
        cmocka_unit_test (test_key_rules),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
