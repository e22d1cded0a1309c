//  Unit tests for the coordinator's checkpoint control
//  (coordinator/ps_ckpt_ctl.c), on real files in a temporary directory
//  and with a fake clock: when a checkpoint is due, the state machine
//  IDLE -> DRAINING -> WRITING -> IDLE, a failure held back before the
//  next try, the final checkpoint's retries and give-up, opening the
//  newest checkpoint (and refusing one of another job), and a run with
//  tables: full and incremental checkpoints by checkpoint.full_every, and
//  a full one after a failed incremental one.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ps_ckpt_ctl.h"

typedef struct {
    char root [512];
    ps_job_t job;
    ps_plan_t plan;             //  no variables: a checkpoint is its manifest
    json_t *layout, *job_json;
    ps_schedule_t *schedule;
    ps_metrics_t *report;
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
    fx.report = ps_metrics_new (NULL, false, 1e9, false, 0, &err);
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
    ps_metrics_destroy (&fx->report);
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

//  Take one checkpoint of a run with one table on its one server at now:
//  the server writes the kind the control asks for, or the other kind with
//  wrong_kind. Returns what commit returns; *base gets the base asked for
//  ("" when full).
static int
s_take_table (s_fixture_t *fx, double now, bool wrong_kind, char *base, size_t len)
{
    ps_ckpt_ctl_pause (fx->ctl, now);
    char tmp [600];
    uint64_t step;
    ps_error_t err = { 0 };
    assert_int_equal (ps_ckpt_ctl_begin (fx->ctl, now + 1, &step, tmp, sizeof tmp, &err), 0);
    const char *asked = ps_ckpt_ctl_base (fx->ctl);
    snprintf (base, len, "%s", asked ? asked : "");
    ps_ckpt_cut_t cut = { .generation = 9, .lr = 0.5, .ntables = 1,
                          .tables = calloc (1, sizeof (ps_table_file_t)) };
    assert_non_null (cut.tables);
    bool full = (asked == NULL) != wrong_kind;
    cut.tables [0] = (ps_table_file_t) { .server = 0, .shard = 0, .shards = 1, .full = full };
    snprintf (cut.tables [0].table, sizeof cut.tables [0].table, "t");
    snprintf (cut.tables [0].file, sizeof cut.tables [0].file, "t.shard0of1.%s.table",
              full ? "full" : "incr");
    return ps_ckpt_ctl_commit (fx->ctl, &cut, NULL, 0, 0, &err, now + 2);
}

//  With tables and full_every 3, every third checkpoint is full and the
//  others name the last full one as their base; a commit whose table files
//  are of the other kind fails, and the checkpoint after a failed full one
//  is full. A checkpoint restored from an incremental one leaves the
//  servers' tables following no full one, so the next is full; one of a
//  run with other tables (or none) is refused by name.
static void
test_tables_full_every (void **state)
{
    s_fixture_t *fx = *state;
    fx->job.checkpoint_full_every = 3;
    json_t *specs = json_pack ("[{s:s, s:i}]", "name", "t", "dim", 4);
    ps_ckpt_ctl_set_tables (fx->ctl, specs);
    char base [600], first [64];
    double now = 100;
    const char *expect [] = { "", "first", "first", "", "fourth", "fourth" };
    char fourth [64] = "";
    for (int i = 0; i < 6; i++, now += 10) {
        s_train (fx, 1);
        assert_int_equal (s_take_table (fx, now, false, base, sizeof base), 0);
        const char *want = strcmp (expect [i], "first") == 0 ? first
                         : strcmp (expect [i], "fourth") == 0 ? fourth : "";
        if (strcmp (base, want) != 0)
            fail_msg ("checkpoint %d: base \"%s\", expected \"%s\"", i, base, want);
        char name [64];
        snprintf (name, sizeof name, "ckpt-%012llu",
                  (unsigned long long) ps_schedule_done_count (fx->schedule));
        if (i == 0)
            snprintf (first, sizeof first, "%s", name);
        if (i == 3)
            snprintf (fourth, sizeof fourth, "%s", name);
    }
    //  The newest is incremental: its manifest names its base, and its
    //  files are listed with their kind.
    char dir [600], src [600];
    json_t *manifest;
    ps_error_t err;
    assert_int_equal (ps_ckpt_ctl_open (fx->ctl, dir, src, sizeof dir, &manifest, &err), 0);
    assert_string_equal (json_string_value (json_object_get (manifest, "base")), fourth);
    json_t *tables = json_object_get (manifest, "tables");
    assert_int_equal (json_integer_value (json_object_get (tables, "shards")), 1);
    assert_true (json_equal (json_object_get (tables, "specs"), specs));
    assert_false (json_is_true (json_object_get (json_array_get (json_object_get (tables,
                                                                                  "files"), 0),
                                                 "full")));
    //  A full checkpoint was due; the server wrote an incremental file.
    s_train (fx, 1);
    assert_int_equal (s_take_table (fx, now, true, base, sizeof base), PS_ESHAPE);
    assert_string_equal (base, "");
    //  An incremental one was due after the full one that then failed:
    //  none is, the next is full.
    s_train (fx, 1);
    assert_int_equal (s_take_table (fx, now + 5000, false, base, sizeof base), 0);
    assert_string_equal (base, "");
    s_train (fx, 1);
    assert_int_equal (s_take_table (fx, now + 5010, false, base, sizeof base), 0);
    assert_true (base [0] != 0);
    //  Restored from the incremental checkpoint opened above: the next is
    //  full.
    assert_int_equal (ps_ckpt_ctl_rewind (fx->ctl, manifest, now + 5020, NULL, &err), 0);
    s_train (fx, 1);
    assert_int_equal (s_take_table (fx, now + 5030, false, base, sizeof base), 0);
    assert_string_equal (base, "");
    json_decref (manifest);
    //  A run without tables does not resume from a checkpoint with them.
    ps_ckpt_ctl_t *plain = ps_ckpt_ctl_new (&fx->job, &fx->plan, fx->layout, fx->job_json, 1,
                                            fx->schedule, fx->report);
    assert_int_equal (ps_ckpt_ctl_open (plain, dir, src, sizeof dir, &manifest, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "set of embedding tables"));
    ps_ckpt_ctl_destroy (&plain);
    json_decref (specs);
}

//  A failed incremental checkpoint (here the server wrote the other kind
//  of file, as one that refuses the base would fail it) is followed by a
//  full one, not by the same incremental one again and again.
static void
test_tables_failed_incremental (void **state)
{
    s_fixture_t *fx = *state;
    fx->job.checkpoint_full_every = 3;
    json_t *specs = json_pack ("[{s:s, s:i}]", "name", "t", "dim", 4);
    ps_ckpt_ctl_set_tables (fx->ctl, specs);
    char base [600];
    s_train (fx, 1);
    assert_int_equal (s_take_table (fx, 100, false, base, sizeof base), 0);
    assert_string_equal (base, "");
    s_train (fx, 1);
    assert_int_equal (s_take_table (fx, 110, true, base, sizeof base), PS_ESHAPE);
    assert_true (base [0] != 0);
    s_train (fx, 1);
    assert_int_equal (s_take_table (fx, 5000, false, base, sizeof base), 0);
    assert_string_equal (base, "");
    //  The full one counts anew: the next is incremental on it.
    s_train (fx, 1);
    assert_int_equal (s_take_table (fx, 5010, false, base, sizeof base), 0);
    char newest [64];
    snprintf (newest, sizeof newest, "ckpt-%012llu",
              (unsigned long long) ps_schedule_done_count (fx->schedule) - 1);
    assert_string_equal (base, newest);
    json_decref (specs);
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
        cmocka_unit_test_setup_teardown (test_tables_full_every, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_tables_failed_incremental, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
