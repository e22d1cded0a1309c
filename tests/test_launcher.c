//  Tests of the launcher interface (coordinator/ps_launcher.h) through
//  its local implementation (ps_launcher_local.c), with real processes:
//  /bin/sh stands in for ps-server and ps-worker. A task that exits is
//  reported by role and index with what ended it; a task stopped through
//  the interface ends cleanly; one restarted comes back and is reported
//  as a death that is no failure to give up on; the local cluster's spec
//  lists a free port for every task; an unknown task is refused by name.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ps_clock.h"
#include "ps_launcher_local.h"

typedef struct {
    char dir [512];
    ps_launcher_t *launcher;
} s_fixture_t;

static int
s_setup (void **state)
{
    static s_fixture_t fx;
    memset (&fx, 0, sizeof fx);
    harness_tmpdir (fx.dir, sizeof fx.dir);
    setenv ("PS_SERVER", "/bin/sh", 1);
    setenv ("PS_WORKER", "/bin/sh", 1);
    *state = &fx;
    return 0;
}

static int
s_teardown (void **state)
{
    s_fixture_t *fx = *state;
    ps_launcher_destroy (&fx->launcher);
    harness_rmtree (fx->dir);
    return 0;
}

//  Wait up to 20 s for the launcher's next event.
static ps_task_event_t
s_next_event (ps_launcher_t *launcher)
{
    ps_task_event_t event;
    double deadline = ps_clock_ms () + 20000;
    while (ps_clock_ms () < deadline) {
        if (ps_launcher_poll (launcher, &event, 1) == 1)
            return event;
        usleep (10000);
    }
    fail_msg ("no task ended within 20 s");
    return event;
}

static void
s_start (s_fixture_t *fx, ps_role_t role, int index, const char *script)
{
    const char *args [] = { "-c", script, NULL };
    const char *env [] = { "PS_TEST_TASK=1", NULL };
    ps_launch_spec_t spec = { args, env };
    ps_error_t err;
    assert_int_equal (ps_launcher_start (fx->launcher, role, index, &spec, &err), 0);
}

static void
test_task_ends (void **state)
{
    s_fixture_t *fx = *state;
    ps_error_t err;
    fx->launcher = ps_launcher_local_new (false, fx->dir, &err);
    assert_non_null (fx->launcher);
    assert_string_equal (ps_launcher_name (fx->launcher), "local");
    s_start (fx, PS_ROLE_WORKER, 1, "echo started; exit 3");
    ps_task_event_t event = s_next_event (fx->launcher);
    assert_int_equal (event.role, PS_ROLE_WORKER);
    assert_int_equal (event.index, 1);
    assert_false (event.clean);
    assert_non_null (strstr (event.reason, "exited with status 3"));
    //  Its output went to its log, named after the task.
    char log [600];
    snprintf (log, sizeof log, "%s/worker1.log", fx->dir);
    assert_true (harness_file_contains (log, "started"));
}

static void
test_stop_and_restart (void **state)
{
    s_fixture_t *fx = *state;
    ps_error_t err;
    fx->launcher = ps_launcher_local_new (true, fx->dir, &err);
    assert_non_null (fx->launcher);
    //  A task that counts its starts in a file, then waits; SIGTERM ends it
    //  cleanly (status 0), as ps-server and ps-worker do.
    char script [700];
    snprintf (script, sizeof script, "echo x >> %s/starts; trap 'exit 0' TERM; "
              "while :; do sleep 0.05; done", fx->dir);
    s_start (fx, PS_ROLE_PS, 0, script);
    char starts [600];
    snprintf (starts, sizeof starts, "%s/starts", fx->dir);
    double deadline = ps_clock_ms () + 20000;
    while (!harness_file_contains (starts, "x") && ps_clock_ms () < deadline)
        usleep (10000);
    //  Restarted: it died (by a signal), and it is started again.
    assert_int_equal (ps_launcher_restart (fx->launcher, PS_ROLE_PS, 0, &err), 0);
    ps_task_event_t event = s_next_event (fx->launcher);
    assert_int_equal (event.role, PS_ROLE_PS);
    assert_false (event.clean);
    assert_false (event.gave_up);
    assert_non_null (strstr (event.reason, "killed by signal 9"));
    deadline = ps_clock_ms () + 20000;
    int lines = 0;
    while (lines < 2 && ps_clock_ms () < deadline) {
        FILE *file = fopen (starts, "r");
        char line [8];
        lines = 0;
        while (file && fgets (line, sizeof line, file))
            lines++;
        if (file)
            fclose (file);
        //  Polling is what lets the local launcher restart a task due.
        ps_task_event_t none;
        assert_int_equal (ps_launcher_poll (fx->launcher, &none, 1), 0);
        usleep (10000);
    }
    assert_int_equal (lines, 2);
    //  Stopped: it ends cleanly and is not started again.
    assert_int_equal (ps_launcher_stop (fx->launcher, PS_ROLE_PS, 0, &err), 0);
    event = s_next_event (fx->launcher);
    assert_true (event.clean);
    //  A task it never started is refused by name.
    assert_int_not_equal (ps_launcher_stop (fx->launcher, PS_ROLE_WORKER, 3, &err), 0);
    assert_non_null (strstr (err.msg, "worker:3"));
}

static void
test_spec (void **state)
{
    (void) state;
    int counts [PS_ROLES] = { 2, 3, 1 };
    char *spec = NULL;
    ps_error_t err;
    assert_int_equal (ps_launcher_local_spec (counts, &spec, &err), 0);
    json_error_t error;
    json_t *cluster = json_loads (spec, 0, &error);
    assert_non_null (cluster);
    assert_int_equal (json_array_size (json_object_get (cluster, "chief")), 1);
    assert_int_equal (json_array_size (json_object_get (cluster, "ps")), 2);
    assert_int_equal (json_array_size (json_object_get (cluster, "worker")), 3);
    assert_int_equal (json_array_size (json_object_get (cluster, "evaluator")), 1);
    //  Seven tasks, seven different ports.
    const char *keys [] = { "chief", "ps", "worker", "evaluator" };
    char seen [7][32];
    int n = 0;
    for (int k = 0; k < 4; k++) {
        json_t *list = json_object_get (cluster, keys [k]);
        for (size_t i = 0; i < json_array_size (list); i++) {
            const char *address = json_string_value (json_array_get (list, i));
            assert_non_null (strstr (address, "127.0.0.1:"));
            for (int j = 0; j < n; j++)
                assert_string_not_equal (seen [j], address);
            snprintf (seen [n++], sizeof seen [0], "%s", address);
        }
    }
    json_decref (cluster);
    free (spec);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_task_ends, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_stop_and_restart, s_setup, s_teardown),
        cmocka_unit_test (test_spec),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
