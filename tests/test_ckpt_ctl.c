//  Unit tests for the coordinator's checkpoint control
//  (coordinator/ps_ckpt_ctl.c), on real files in a temporary directory
//  and with a fake clock: when a checkpoint is due, the state machine
//  IDLE -> DRAINING -> WRITING -> IDLE, a failure held back before the
//  next try, the final checkpoint's retries and give-up, and opening the
//  newest checkpoint (and refusing one of another job).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "ps_ckpt_ctl.h"

typedef struct {
    char root [512];
    ps_job_t job;
    ps_plan_t plan;             //  no variables: a checkpoint is its manifest
    json_t *layout, *job_json;
    ps_schedule_t *schedule;
    ps_report_t *report;
    ps_ckpt_ctl_t *ctl;
} s_fixture_t;

static int
s_setup (void **state)
{
    static s_fixture_t fx;
    memset (&fx, 0, sizeof fx);
    harness_tmpdir (fx.root, sizeof fx.root);
    ps_job_default (&fx.job, 1);
    snprintf (fx.job.checkpoint_dir, sizeof fx.job.checkpoint_dir, "%s", fx.root);
    fx.job.checkpoint_steps = 5;
    fx.layout = json_array ();
    fx.job_json = ps_job_to_json (&fx.job);
    ps_error_t err;
    fx.schedule = ps_schedule_new (10, 20, &err);
    fx.report = ps_report_new (NULL, false, 1e9, false, 0, &err);
    assert_non_null (fx.schedule);
    assert_non_null (fx.report);
    fx.ctl = ps_ckpt_ctl_new (&fx.job, &fx.plan, fx.layout, fx.job_json, 1, fx.schedule,
                              fx.report);
    *state = &fx;
    return 0;
}

static int
s_teardown (void **state)
{
    s_fixture_t *fx = *state;
    ps_ckpt_ctl_destroy (&fx->ctl);
    ps_report_destroy (&fx->report);
    ps_schedule_destroy (&fx->schedule);
    json_decref (fx->layout);
    json_decref (fx->job_json);
    harness_rmtree (fx->root);
    return 0;
}

//  Train n more steps.
static void
s_train (s_fixture_t *fx, int n)
{
    for (int i = 0; i < n; i++) {
        uint64_t step;
        assert_int_equal (ps_schedule_next (fx->schedule, 0, &step), 0);
        assert_int_equal (ps_schedule_complete (fx->schedule, step), 0);
    }
}

//  Take one checkpoint at now through the whole state machine; rc is what
//  the snapshot's writers say.
static int
s_take (s_fixture_t *fx, double now, int rc)
{
    ps_ckpt_ctl_pause (fx->ctl, now);
    assert_int_equal (ps_ckpt_ctl_state (fx->ctl), PS_CKPT_DRAINING);
    char tmp [600];
    uint64_t step;
    ps_error_t err = { 0 };
    assert_int_equal (ps_ckpt_ctl_begin (fx->ctl, now + 1, &step, tmp, sizeof tmp, &err), 0);
    assert_int_equal (ps_ckpt_ctl_state (fx->ctl), PS_CKPT_WRITING);
    assert_int_equal (step, ps_schedule_done_count (fx->schedule));
    if (rc)
        ps_error_set (&err, rc, "the disk is full");
    ps_ckpt_cut_t cut = { .generation = 9, .lr = 0.5,
                          .extra = json_pack ("{s:i}", "updates", 3) };
    int out = ps_ckpt_ctl_commit (fx->ctl, &cut, NULL, 0, rc, &err, now + 2);
    assert_int_equal (ps_ckpt_ctl_state (fx->ctl), PS_CKPT_IDLE);
    return out;
}

static void
test_due_and_commit (void **state)
{
    s_fixture_t *fx = *state;
    assert_true (ps_ckpt_ctl_enabled (fx->ctl));
    assert_int_equal (ps_ckpt_ctl_state (fx->ctl), PS_CKPT_IDLE);
    assert_false (ps_ckpt_ctl_due (fx->ctl, 0));
    s_train (fx, 4);
    assert_false (ps_ckpt_ctl_due (fx->ctl, 10));
    s_train (fx, 1);
    assert_true (ps_ckpt_ctl_due (fx->ctl, 10));
    assert_int_equal (s_take (fx, 20, 0), 0);
    assert_int_equal (ps_ckpt_ctl_count (fx->ctl), 1);
    assert_false (ps_ckpt_ctl_due (fx->ctl, 30));
    //  Forced: due at once, with no step since.
    ps_ckpt_ctl_force (fx->ctl);
    assert_true (ps_ckpt_ctl_due (fx->ctl, 30));
    assert_int_equal (s_take (fx, 40, 0), 0);
    assert_false (ps_ckpt_ctl_due (fx->ctl, 50));
    //  What was committed opens as the newest, with the cut's keys.
    char dir [600], src [600];
    json_t *manifest;
    ps_error_t err;
    assert_int_equal (ps_ckpt_ctl_open (fx->ctl, dir, src, sizeof dir, &manifest, &err), 0);
    assert_string_equal (dir, src);
    assert_int_equal (json_integer_value (json_object_get (manifest, "global_step")), 5);
    assert_int_equal (json_integer_value (json_object_get (manifest, "generation")), 9);
    assert_int_equal (json_integer_value (json_object_get (manifest, "updates")), 3);
    //  Rewinding a schedule that went on restores the cut.
    s_train (fx, 3);
    assert_int_equal (ps_ckpt_ctl_rewind (fx->ctl, manifest, 60, NULL, &err), 0);
    assert_int_equal (ps_schedule_done_count (fx->schedule), 5);
    json_decref (manifest);
}

static void
test_failure_held_back (void **state)
{
    s_fixture_t *fx = *state;
    s_train (fx, 5);
    assert_int_not_equal (s_take (fx, 100, PS_EIO), 0);
    assert_int_equal (ps_ckpt_ctl_failures (fx->ctl), 1);
    assert_int_equal (ps_ckpt_ctl_count (fx->ctl), 0);
    //  Held back for a while, then due again: the steps still count.
    assert_false (ps_ckpt_ctl_due (fx->ctl, 1000));
    assert_true (ps_ckpt_ctl_due (fx->ctl, 2200));
    assert_int_equal (s_take (fx, 2200, 0), 0);
    assert_int_equal (ps_ckpt_ctl_failures (fx->ctl), 0);
    //  A pause given up (a server failed meanwhile) dispatches again.
    s_train (fx, 5);
    ps_ckpt_ctl_pause (fx->ctl, 3000);
    ps_ckpt_ctl_cancel (fx->ctl);
    assert_int_equal (ps_ckpt_ctl_state (fx->ctl), PS_CKPT_IDLE);
}

static void
test_begin_fails (void **state)
{
    s_fixture_t *fx = *state;
    //  A checkpoint root that cannot hold a directory.
    snprintf (fx->job.checkpoint_dir, sizeof fx->job.checkpoint_dir, "/dev/null/ckpt");
    s_train (fx, 5);
    char tmp [600];
    uint64_t step;
    ps_error_t err;
    assert_int_not_equal (ps_ckpt_ctl_begin (fx->ctl, 0, &step, tmp, sizeof tmp, &err), 0);
    assert_non_null (strstr (err.msg, "/dev/null/ckpt"));
    assert_int_equal (ps_ckpt_ctl_state (fx->ctl), PS_CKPT_IDLE);
    assert_int_equal (ps_ckpt_ctl_failures (fx->ctl), 1);
}

static void
test_final (void **state)
{
    s_fixture_t *fx = *state;
    s_train (fx, 20);
    assert_int_equal (ps_ckpt_ctl_final (fx->ctl, 0), PS_CKPT_FINAL_TAKE);
    double now = 0;
    for (int i = 0; i < 29; i++) {
        assert_int_not_equal (s_take (fx, now, PS_EIO), 0);
        assert_int_equal (ps_ckpt_ctl_final (fx->ctl, now + 10), PS_CKPT_FINAL_WAIT);
        now += 2100;
        assert_int_equal (ps_ckpt_ctl_final (fx->ctl, now), PS_CKPT_FINAL_TAKE);
    }
    //  About a minute of failures in a row: the run gives up.
    assert_int_not_equal (s_take (fx, now, PS_EIO), 0);
    assert_int_equal (ps_ckpt_ctl_final (fx->ctl, now + 1e6), PS_CKPT_FINAL_FAILED);
}

static void
test_final_written (void **state)
{
    s_fixture_t *fx = *state;
    s_train (fx, 20);
    assert_int_equal (s_take (fx, 0, 0), 0);
    assert_int_equal (ps_ckpt_ctl_final (fx->ctl, 10), PS_CKPT_FINAL_DONE);
}

static void
test_other_job (void **state)
{
    s_fixture_t *fx = *state;
    s_train (fx, 5);
    assert_int_equal (s_take (fx, 0, 0), 0);
    ps_job_t other = fx->job;
    other.seed = fx->job.seed + 1;
    ps_ckpt_ctl_t *ctl = ps_ckpt_ctl_new (&other, &fx->plan, fx->layout, fx->job_json, 1,
                                          fx->schedule, fx->report);
    char dir [600], src [600];
    json_t *manifest = NULL;
    ps_error_t err;
    assert_int_equal (ps_ckpt_ctl_open (ctl, dir, src, sizeof dir, &manifest, &err), PS_EINVAL);
    assert_null (manifest);
    assert_non_null (strstr (err.msg, "another seed"));
    ps_ckpt_ctl_destroy (&ctl);
}

static void
test_none (void **state)
{
    s_fixture_t *fx = *state;
    char dir [600], src [600];
    json_t *manifest = NULL;
    ps_error_t err;
    assert_int_equal (ps_ckpt_ctl_open (fx->ctl, dir, src, sizeof dir, &manifest, &err),
                      PS_ENOTFOUND);
    assert_null (manifest);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_due_and_commit, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_failure_held_back, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_begin_fails, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_final, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_final_written, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_other_job, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_none, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
