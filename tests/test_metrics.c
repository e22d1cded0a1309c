//  Unit tests for a run's metrics (common/base/ps_metrics.c) and the
//  Prometheus text format it is served in (common/base/ps_promtext.c): the
//  format's lines exactly (families, labels, NaN and infinities, a
//  histogram's cumulative buckets), a progress record's learning rate and
//  mean step and wait times, and the Prometheus text of a run's steps and
//  events (per-worker and per-server counters, failures, recoveries, the
//  step and checkpoint histograms, the latest evaluation).

#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "ps_metrics.h"
#include "ps_promtext.h"

static void
test_promtext_format (void **state)
{
    (void) state;
    ps_promtext_t *text = ps_promtext_new ();
    ps_promtext_family (text, "x_total", "counter", "Things counted.");
    ps_promtext_sample (text, "x_total", NULL, NULL, 3);
    ps_promtext_family (text, "y", "gauge", "A level.");
    ps_promtext_sample (text, "y", "worker", "1", 0.25);
    ps_promtext_sample (text, "y", "worker", "2", NAN);
    ps_promtext_sample (text, "y", "worker", "3", -INFINITY);
    const double bounds [] = { 0.5, 1 };
    const uint64_t counts [] = { 2, 0 };
    ps_promtext_histogram (text, "z_seconds", "Durations.", bounds, counts, 2, 1, 4.5);
    char *got = ps_promtext_take (text);
    assert_string_equal (got,
        "# HELP x_total Things counted.\n# TYPE x_total counter\nx_total 3\n"
        "# HELP y A level.\n# TYPE y gauge\ny{worker=\"1\"} 0.25\ny{worker=\"2\"} NaN\n"
        "y{worker=\"3\"} -Inf\n"
        "# HELP z_seconds Durations.\n# TYPE z_seconds histogram\n"
        "z_seconds_bucket{le=\"0.5\"} 2\nz_seconds_bucket{le=\"1\"} 2\n"
        "z_seconds_bucket{le=\"+Inf\"} 3\nz_seconds_sum 4.5\nz_seconds_count 3\n");
    free (got);
    //  Taken, the text starts again empty.
    got = ps_promtext_take (text);
    assert_string_equal (got, "");
    free (got);
    ps_promtext_destroy (&text);
    assert_null (text);
}

//  Two steps: worker 1's of 40 ms (10 of them waiting), worker 0's of 3 s
//  (1 s waiting).
static void
s_two_steps (ps_metrics_t *metrics)
{
    ps_step_report_t a = { .count = 64, .correct = 32, .loss = 64.0, .compute_ms = 30,
                           .comm_ms = 10 };
    ps_step_report_t b = { .count = 64, .correct = 48, .loss = 32.0, .compute_ms = 2000,
                           .comm_ms = 1000, .duplicates = 1 };
    ps_metrics_step (metrics, &a, 1, 1);
    ps_metrics_step (metrics, &b, 0, 2);
}

//  A metrics report writing to a new file at path (a mkstemp template,
//  filled in), with a window of one second.
static ps_metrics_t *
s_metrics_file (char *path)
{
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    close (fd);
    ps_error_t err = { 0 };
    ps_metrics_t *metrics = ps_metrics_new (path, false, 1, false, 0, &err);
    if (!metrics)
        fail_msg ("%s: %s", path, err.msg);
    return metrics;
}

static void
test_progress_record (void **state)
{
    (void) state;
    char path [] = "/tmp/test_metrics-XXXXXX";
    ps_metrics_t *metrics = s_metrics_file (path);
    ps_metrics_start (metrics, 0);
    s_two_steps (metrics);
    ps_progress_t where = { .done = 2, .total = 10, .steps_per_epoch = 5, .lr = 0.5,
                            .workers_alive = 2, .workers = 2 };
    ps_metrics_progress (metrics, 2000, &where);
    ps_metrics_destroy (&metrics);

    json_error_t jerr;
    json_t *record = json_load_file (path, JSON_DISABLE_EOF_CHECK, &jerr);
    unlink (path);
    assert_non_null (record);
    assert_string_equal (json_string_value (json_object_get (record, "event")), "progress");
    assert_float_equal (json_number_value (json_object_get (record, "lr")), 0.5, 0);
    //  Means per step: (40 + 3000) / 2 and (10 + 1000) / 2.
    assert_float_equal (json_number_value (json_object_get (record, "step_ms")), 1520, 1e-9);
    assert_float_equal (json_number_value (json_object_get (record, "wait_ms")), 505, 1e-9);
    assert_float_equal (json_number_value (json_object_get (record, "samples_per_s")), 64, 1e-9);
    assert_float_equal (json_number_value (json_object_get (record, "accuracy")), 80.0 / 128,
                        1e-12);
    assert_int_equal (json_integer_value (json_object_get (record, "window_steps")), 2);
    json_decref (record);
}

//  The file at path holds exactly these n events, in order; it is removed.
static void
s_assert_events (const char *path, const char *const *events, int n)
{
    FILE *file = fopen (path, "r");
    assert_non_null (file);
    char line [256], wanted [64];
    int lines = 0;
    while (fgets (line, sizeof line, file)) {
        assert_true (lines < n);
        snprintf (wanted, sizeof wanted, "\"event\":\"%s\"", events [lines]);
        assert_non_null (strstr (line, wanted));
        lines++;
    }
    fclose (file);
    unlink (path);
    assert_int_equal (lines, n);
}

//  A run's file ends with its done record: an event after it (a worker
//  registering after the last step) is not written, but for the failed
//  record of a run that did not verify; after failed, nothing. test_own_data read
//  the last record for the accuracy and found that one, now and then.
static void
test_done_is_last (void **state)
{
    (void) state;
    char path [] = "/tmp/test_metrics-XXXXXX";
    ps_metrics_t *metrics = s_metrics_file (path);
    ps_metrics_event (metrics, "registered", json_pack ("{s:s}", "role", "worker"));
    ps_metrics_event (metrics, "done", json_pack ("{s:f}", "test_accuracy", 0.5));
    ps_metrics_event (metrics, "registered", json_pack ("{s:s}", "role", "worker"));
    //  A run whose end did not verify: its failed record follows done.
    ps_metrics_event (metrics, "failed", NULL);
    ps_metrics_event (metrics, "registered", json_pack ("{s:s}", "role", "worker"));
    ps_metrics_destroy (&metrics);
    const char *events [] = { "registered", "done", "failed" };
    s_assert_events (path, events, 3);
}

//  So does a stopped run's: an evaluation that comes back after the stop
//  signal's record (test_stop_signal once found its eval record last) is
//  not written.
static void
test_stopped_is_last (void **state)
{
    (void) state;
    char path [] = "/tmp/test_metrics-XXXXXX";
    ps_metrics_t *metrics = s_metrics_file (path);
    ps_metrics_event (metrics, "eval", json_pack ("{s:i}", "step", 40));
    ps_metrics_event (metrics, "stopped", json_pack ("{s:i}", "steps", 47));
    ps_metrics_event (metrics, "eval", json_pack ("{s:i}", "step", 47));
    ps_metrics_destroy (&metrics);
    const char *events [] = { "eval", "stopped" };
    s_assert_events (path, events, 2);
}

static void
s_expect_line (const char *text, const char *line)
{
    char wanted [256];
    snprintf (wanted, sizeof wanted, "\n%s\n", line);
    if (!strstr (text, wanted))
        fail_msg ("no line \"%s\" in:\n%s", line, text);
}

static void
test_prometheus_text (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    ps_metrics_t *metrics = ps_metrics_new (NULL, false, 1e9, false, 0, &err);
    assert_non_null (metrics);
    char *text = ps_metrics_prometheus (metrics);
    //  Nothing known yet: no steps, and no loss rather than a made-up one.
    s_expect_line (text, "ps_steps_total 0");
    s_expect_line (text, "ps_loss NaN");
    s_expect_line (text, "ps_test_accuracy NaN");
    free (text);

    s_two_steps (metrics);
    ps_metrics_event (metrics, "registered", json_pack ("{s:s, s:i}", "role", "ps", "task", 0));
    ps_metrics_event (metrics, "registered",
                      json_pack ("{s:s, s:i}", "role", "worker", "task", 1));
    ps_metrics_event (metrics, "worker_failed",
                      json_pack ("{s:s, s:i, s:s}", "role", "worker", "task", 1, "reason", "x"));
    ps_metrics_event (metrics, "server_failed", json_pack ("{s:i, s:s}", "task", 0, "reason", "y"));
    ps_metrics_event (metrics, "registered", json_pack ("{s:s, s:i}", "role", "ps", "task", 0));
    ps_metrics_event (metrics, "recovered", json_pack ("{s:I}", "step", (json_int_t) 1));
    ps_metrics_event (metrics, "checkpoint", json_pack ("{s:f}", "write_ms", 120.0));
    ps_metrics_event (metrics, "checkpoint_failed", NULL);
    ps_metrics_event (metrics, "eval", json_pack ("{s:f, s:f}", "test_accuracy", 0.75,
                                                  "test_loss", 0.5));
    //  An evaluator's failure, and a task index out of range, count in the
    //  total, not per worker.
    ps_metrics_event (metrics, "worker_failed",
                      json_pack ("{s:s, s:i, s:s}", "role", "evaluator", "task", 0,
                                 "reason", "z"));
    ps_metrics_event (metrics, "worker_failed", json_pack ("{s:i}", "task", 1 << 30));
    ps_progress_t where = { .done = 2, .total = 10, .steps_per_epoch = 5, .lr = 0.5,
                            .workers_alive = 1, .workers = 2 };
    ps_metrics_progress (metrics, 0, &where);
    text = ps_metrics_prometheus (metrics);
    s_expect_line (text, "# TYPE ps_steps_total counter");
    s_expect_line (text, "ps_steps_total 2");
    s_expect_line (text, "ps_samples_total 128");
    s_expect_line (text, "ps_step 2");
    s_expect_line (text, "ps_epoch 1");
    s_expect_line (text, "ps_learning_rate 0.5");
    s_expect_line (text, "ps_workers_alive 1");
    s_expect_line (text, "ps_duplicates_total 1");
    s_expect_line (text, "ps_step_wait_seconds_total 1.01");
    s_expect_line (text, "# TYPE ps_step_seconds histogram");
    s_expect_line (text, "ps_step_seconds_bucket{le=\"0.025\"} 0");
    s_expect_line (text, "ps_step_seconds_bucket{le=\"0.05\"} 1");
    s_expect_line (text, "ps_step_seconds_bucket{le=\"2.5\"} 1");
    s_expect_line (text, "ps_step_seconds_bucket{le=\"5\"} 2");
    s_expect_line (text, "ps_step_seconds_count 2");
    s_expect_line (text, "ps_worker_steps_total{worker=\"0\"} 1");
    s_expect_line (text, "ps_worker_steps_total{worker=\"1\"} 1");
    s_expect_line (text, "ps_worker_samples_total{worker=\"1\"} 64");
    s_expect_line (text, "ps_worker_failures_total{worker=\"0\"} 0");
    s_expect_line (text, "ps_worker_failures_total{worker=\"1\"} 1");
    s_expect_line (text, "ps_server_failures_total{server=\"0\"} 1");
    s_expect_line (text, "ps_server_registrations_total{server=\"0\"} 2");
    s_expect_line (text, "ps_failures_total 4");
    s_expect_line (text, "ps_recoveries_total 1");
    s_expect_line (text, "ps_checkpoints_total 1");
    s_expect_line (text, "ps_checkpoint_failures_total 1");
    s_expect_line (text, "ps_checkpoint_seconds_bucket{le=\"0.1\"} 0");
    s_expect_line (text, "ps_checkpoint_seconds_bucket{le=\"0.25\"} 1");
    s_expect_line (text, "ps_test_accuracy 0.75");
    s_expect_line (text, "ps_test_loss 0.5");
    s_expect_line (text, "ps_evaluations_total 1");
    //  A classifier's evaluation has no errors and this one no AUC.
    s_expect_line (text, "ps_test_mse NaN");
    s_expect_line (text, "ps_test_auc NaN");
    //  Only workers 0 and 1 have counters of their own.
    assert_null (strstr (text, "worker=\"2\""));
    free (text);

    //  A regression model's evaluation: its errors, and no accuracy; then a
    //  binary classifier's AUC.
    ps_metrics_event (metrics, "eval", json_pack ("{s:f, s:f, s:f}", "test_loss", 0.25,
                                                  "test_mse", 0.25, "test_mae", 0.125));
    text = ps_metrics_prometheus (metrics);
    s_expect_line (text, "# TYPE ps_test_mse gauge");
    s_expect_line (text, "ps_test_mse 0.25");
    s_expect_line (text, "ps_test_mae 0.125");
    s_expect_line (text, "ps_test_accuracy NaN");
    s_expect_line (text, "ps_evaluations_total 2");
    free (text);
    ps_metrics_event (metrics, "eval", json_pack ("{s:f, s:f, s:f}", "test_loss", 0.3,
                                                  "test_accuracy", 0.9, "test_auc", 0.875));
    text = ps_metrics_prometheus (metrics);
    s_expect_line (text, "ps_test_auc 0.875");
    s_expect_line (text, "ps_test_mae NaN");
    free (text);
    ps_metrics_destroy (&metrics);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_promtext_format),
        cmocka_unit_test (test_progress_record),
        cmocka_unit_test (test_done_is_last),
        cmocka_unit_test (test_stopped_is_last),
        cmocka_unit_test (test_prometheus_text),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
