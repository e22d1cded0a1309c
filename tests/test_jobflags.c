//  Unit tests for the coordinator's job flags (coordinator/ps_jobflags.c),
//  which test_coordinator_cli reaches only through the program: every
//  flag is an argp option with a key of its own, clear of a program's,
//  and sets its field of the job; an optimizer of another kind starts from
//  that kind's defaults while naming the kind in force keeps the rate, and
//  a rate given wins over an optimizer's default in either order; ssp's
//  staleness takes "unbounded"; and a value of the wrong form, or too long
//  or too large for its field, is refused with a message naming the flag,
//  and not recorded. Ranges are
//  ps_job_validate's (test_job), not the flags'. The dense optimizer's
//  precedence: a model's own (a CTR spec's) over the job's default, the
//  job file's over the model's, a flag's over both.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness_job.h"
#include "ps_ctrmodel.h"
#include "ps_jobflags.h"
#include "ps_model.h"

static void
s_apply (ps_job_t *job, const char *name, const char *value)
{
    ps_jobflags_t *flags = ps_jobflags_new ();
    ps_error_t err;
    if (ps_jobflags_add (flags, name, value, &err) || ps_jobflags_apply (flags, job, &err))
        fail_msg ("--%s %s was refused: %s", name, value ? value : "", err.msg);
    ps_jobflags_destroy (&flags);
    assert_null (flags);
}

//  Recording --name value fails with a message that names the flag and
//  holds fragment, and nothing is recorded.
static void
s_assert_refused (harness_job_fixture_t *fx, const char *name, const char *value,
                  const char *fragment)
{
    (void) fx;
    ps_jobflags_t *flags = ps_jobflags_new ();
    ps_error_t err;
    int rc = ps_jobflags_add (flags, name, value, &err);
    if (rc >= 0)
        fail_msg ("--%s %s gave %d, expected an error", name, value, rc);
    char flag [64];
    snprintf (flag, sizeof flag, "--%s", name);
    if (!strstr (err.msg, flag) || !strstr (err.msg, fragment))
        fail_msg ("--%s %s: message \"%s\" lacks %s or \"%s\"", name, value, err.msg, flag,
                  fragment);
    assert_int_equal (ps_jobflags_count (flags), 0);
    ps_jobflags_destroy (&flags);
}

//  Every option has a name, a key and a doc of its own (or shares the doc
//  above it), clear of a program's keys below PS_JOBFLAGS_FIRST other than
//  the short forms; an unknown name is refused.
static void
test_options (void **state)
{
    (void) state;
    const struct argp_option *options = ps_jobflags_argp.options;
    int count = 0;
    for (int i = 0; options [i].name || options [i].doc; i++) {
        if (!options [i].name)
            continue;           //  a group's heading
        count++;
        int key = options [i].key;
        assert_true (key >= PS_JOBFLAGS_FIRST || (key > 0 && key < 128));
        for (int j = 0; j < i; j++)
            if (options [j].name
            &&  (options [j].key == key || strcmp (options [j].name, options [i].name) == 0))
                fail_msg ("--%s and --%s share a key or a name", options [j].name,
                          options [i].name);
    }
    assert_true (count >= 26);
    ps_jobflags_t *flags = ps_jobflags_new ();
    ps_error_t err;
    assert_int_equal (ps_jobflags_add (flags, "frobnicate", "1", &err), PS_ENOTFOUND);
    ps_jobflags_destroy (&flags);
}

//  The rate given wins over the optimizer's default in either order, and
//  the optimizer is the one named.
static void
test_order (void **state)
{
    (void) state;
    const char *orders [2][4] = {
        { "lr", "0.1", "optimizer", "sgd" }, { "optimizer", "sgd", "lr", "0.1" },
    };
    for (int o = 0; o < 2; o++) {
        ps_job_t job;
        ps_job_default (&job, 2);
        ps_jobflags_t *flags = ps_jobflags_new ();
        ps_error_t err;
        assert_int_equal (ps_jobflags_add (flags, orders [o][0], orders [o][1], &err), 0);
        assert_int_equal (ps_jobflags_add (flags, orders [o][2], orders [o][3], &err), 0);
        assert_int_equal (ps_jobflags_apply (flags, &job, &err), 0);
        assert_int_equal (job.optimizer.kind, PS_OPT_SGD);
        assert_true (job.optimizer.lr == 0.1);
        ps_jobflags_destroy (&flags);
    }
}

static void
test_apply (void **state)
{
    (void) state;
    ps_job_t job;
    ps_job_default (&job, 2);
    s_apply (&job, "model", "/srv/models/m.json");
    s_apply (&job, "epochs", "7");
    s_apply (&job, "steps", "18446744073709551615");
    s_apply (&job, "batch", "128");
    s_apply (&job, "lr", "0.25");
    s_apply (&job, "mode", "ssp");
    s_apply (&job, "staleness", "0");
    s_apply (&job, "seed", "12345678901234567");
    s_apply (&job, "data", "/data/fashion");
    s_apply (&job, "limit", "1000");
    s_apply (&job, "test-limit", "500");
    s_apply (&job, "checkpoint-dir", "/tmp/ckpt");
    s_apply (&job, "checkpoint-steps", "100");
    s_apply (&job, "checkpoint-seconds", "30.5");
    s_apply (&job, "keep", "5");
    s_apply (&job, "eval-epochs", "2");
    s_apply (&job, "eval-steps", "250");
    s_apply (&job, "heartbeat-ms", "250");
    s_apply (&job, "heartbeat-timeout-ms", "2000");
    s_apply (&job, "register-timeout-ms", "30000");
    s_apply (&job, "threads", "4");
    s_apply (&job, "device", "auto");
    s_apply (&job, "overlap", NULL);
    s_apply (&job, "nonfinite-retries", "3");
    s_apply (&job, "step-retries", "7");
    s_apply (&job, "stop-on-divergence", NULL);
    assert_string_equal (job.model, "/srv/models/m.json");
    assert_int_equal (job.epochs, 7);
    assert_true (job.steps == UINT64_MAX);
    assert_int_equal (job.batch_size, 128);
    assert_true (job.optimizer.lr == 0.25);
    assert_int_equal (job.mode, PS_MODE_SSP);
    assert_int_equal (job.staleness, 0);
    assert_true (job.seed == 12345678901234567ULL);
    assert_string_equal (job.data_dir, "/data/fashion");
    assert_int_equal (job.train_limit, 1000);
    assert_int_equal (job.test_limit, 500);
    assert_string_equal (job.checkpoint_dir, "/tmp/ckpt");
    assert_int_equal (job.checkpoint_steps, 100);
    assert_true (job.checkpoint_seconds == 30.5);
    assert_int_equal (job.checkpoint_keep, 5);
    assert_int_equal (job.eval_epochs, 2);
    assert_int_equal (job.eval_steps, 250);
    assert_int_equal (job.heartbeat_ms, 250);
    assert_int_equal (job.heartbeat_timeout_ms, 2000);
    assert_int_equal (job.register_timeout_ms, 30000);
    assert_int_equal (job.worker_threads, 4);
    assert_string_equal (job.device, "auto");
    assert_true (job.overlap);
    assert_int_equal (job.nonfinite_retries, 3);
    assert_int_equal (job.step_retries, 7);
    assert_true (job.stop_on_divergence);

    s_apply (&job, "staleness", "unbounded");
    assert_int_equal (job.staleness, PS_JOB_STALENESS_UNBOUNDED);

    //  The kind in force keeps the rate; another kind starts from its own
    //  defaults, as in a job file.
    ps_opt_kind_t kind = job.optimizer.kind;
    s_apply (&job, "optimizer", ps_opt_kind_name (kind));
    assert_true (job.optimizer.lr == 0.25);
    s_apply (&job, "optimizer", "sgd");
    ps_opt_config_t sgd;
    ps_opt_config_default (&sgd, PS_OPT_SGD);
    assert_memory_equal (&job.optimizer, &sgd, sizeof sgd);
}

static void
test_refused (void **state)
{
    harness_job_fixture_t *fx = *state;
    s_assert_refused (fx, "epochs", "three", "three");
    s_assert_refused (fx, "epochs", "-1", "-1");
    s_assert_refused (fx, "epochs", "2147483648", "2147483648");
    s_assert_refused (fx, "steps", "18446744073709551616", "18446744073709551616");
    s_assert_refused (fx, "seed", "1.5", "1.5");
    s_assert_refused (fx, "lr", "fast", "fast");
    s_assert_refused (fx, "checkpoint-seconds", "", "");
    s_assert_refused (fx, "staleness", "-1", "or unbounded");
    s_assert_refused (fx, "mode", "bsp", "unknown mode \"bsp\"");
    s_assert_refused (fx, "optimizer", "rmsprop", "rmsprop");
    s_assert_refused (fx, "device", "tpu", "expected cpu, gpu or auto");
    //  A path longer than its field.
    ps_job_t job;
    char *path = malloc (sizeof job.data_dir + 1);
    assert_non_null (path);
    memset (path, 'x', sizeof job.data_dir);
    path [sizeof job.data_dir] = 0;
    s_assert_refused (fx, "data", path, "longer than");
    s_assert_refused (fx, "model", path, "longer than");
    s_assert_refused (fx, "checkpoint-dir", path, "longer than");
    free (path);
}

//  The job's dense optimizer for built-in model name, after the job file
//  at path (NULL: none) and the flag --flag value (flag NULL: none).
static ps_opt_config_t
s_resolved (const char *name, const char *path, const char *flag, const char *value)
{
    ps_job_t job;
    ps_job_default (&job, 2);
    if (path)
        harness_job_load (&job, path);
    if (flag)
        s_apply (&job, flag, value);
    ps_error_t err;
    ps_model_t *model = ps_model_load (name, &err);
    if (!model)
        fail_msg ("model %s: %s", name, err.msg);
    const ps_ctrmodel_t *ctr = ps_model_ctr (model);
    ps_job_model_optimizer (&job, ctr ? &ctr->optimizer : NULL);
    ps_model_destroy (&model);
    return job.optimizer;
}

//  The model's optimizer (lr: Adam 0.01 in schemas/models/lr.json) is the
//  job's when neither the file nor a flag names one; a job file's
//  "optimizer" wins over it, and --optimizer or --lr over both. An image
//  model names none: the job's stays.
static void
test_model_optimizer (void **state)
{
    harness_job_fixture_t *fx = *state;
    ps_opt_config_t opt = s_resolved ("lr", NULL, NULL, NULL);
    assert_int_equal (opt.kind, PS_OPT_ADAM);
    assert_true (opt.lr == 0.01);
    const char *sgd = harness_job_write (fx, "sgd.json",
                                         "{\"optimizer\": {\"kind\": \"sgd\", \"lr\": 0.3}}");
    opt = s_resolved ("lr", sgd, NULL, NULL);
    assert_int_equal (opt.kind, PS_OPT_SGD);
    assert_true (opt.lr == 0.3);
    opt = s_resolved ("lr", sgd, "lr", "0.5");
    assert_int_equal (opt.kind, PS_OPT_SGD);
    assert_true (opt.lr == 0.5);
    opt = s_resolved ("lr", NULL, "lr", "0.02");
    assert_int_equal (opt.kind, PS_OPT_ADAM);
    assert_true (opt.lr == 0.02);
    opt = s_resolved ("lr", NULL, "optimizer", "adagrad");
    ps_opt_config_t adagrad;
    ps_opt_config_default (&adagrad, PS_OPT_ADAGRAD);
    assert_memory_equal (&opt, &adagrad, sizeof adagrad);
    //  A file without "optimizer" leaves the model's in force.
    const char *epochs = harness_job_write (fx, "epochs.json", "{\"epochs\": 2}");
    opt = s_resolved ("lr", epochs, NULL, NULL);
    assert_true (opt.lr == 0.01);
    ps_opt_config_t adam;
    ps_opt_config_default (&adam, PS_OPT_ADAM);
    opt = s_resolved ("cnn", NULL, NULL, NULL);
    assert_memory_equal (&opt, &adam, sizeof adam);
}

//  Overlap is off by default in every mode (it cost accuracy: README,
//  Benchmarks); --no-overlap overrides a job file's "overlap": true. The
//  workers' threads are marked given by the file or --threads (a local
//  cluster splits its cores otherwise).
static void
test_overlap_threads (void **state)
{
    harness_job_fixture_t *fx = *state;
    const char *modes [] = { "async", "ssp", "sync", "mirrored" };
    for (size_t i = 0; i < sizeof modes / sizeof modes [0]; i++) {
        ps_job_t job;
        ps_job_default (&job, 2);
        s_apply (&job, "mode", modes [i]);
        assert_false (job.overlap);
        assert_false (job.worker_threads_given);
    }
    ps_job_t job;
    ps_job_default (&job, 2);
    ps_error_t err;
    assert_int_equal (ps_job_load_file (&job, harness_job_write (fx, "on.json",
                                                                 "{\"overlap\": true}"), &err), 0);
    assert_true (job.overlap);
    assert_false (job.worker_threads_given);
    s_apply (&job, "no-overlap", NULL);
    assert_false (job.overlap);
    s_apply (&job, "overlap", NULL);
    assert_true (job.overlap);
    ps_job_default (&job, 2);
    s_apply (&job, "threads", "3");
    assert_true (job.worker_threads_given);
    ps_job_default (&job, 2);
    assert_int_equal (ps_job_load_file (&job, harness_job_write (fx, "t.json",
                                                                 "{\"worker_threads\": 2}"),
                                        &err), 0);
    assert_true (job.worker_threads_given);
    assert_int_equal (job.worker_threads, 2);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_options),
        cmocka_unit_test (test_apply),
        cmocka_unit_test (test_order),
        cmocka_unit_test_setup_teardown (test_overlap_threads, harness_job_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_refused, harness_job_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_model_optimizer, harness_job_setup,
                                         harness_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
