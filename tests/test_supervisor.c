//  Tests for the local cluster's supervisor (coordinator/ps_supervisor.c),
//  on real processes (/bin/sh scripts and /bin/sleep): starting, restarts
//  with backoff, exits that are not restarted, giving up, exec failures,
//  the environment overlay, log files, stopping stubborn children, death of
//  the parent (PR_SET_PDEATHSIG) and the signal state a child starts with.
//  Every test ends by checking that none of the processes it started is
//  still running and that it has no unreaped children.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "ps_clock.h"
#include "ps_log.h"
#include "ps_supervisor.h"

#define S_MAX_PIDS 64

//  How long a test waits for what it expects (an event, a process gone, a
//  file): spent only when it fails, and long enough that a loaded machine,
//  where a process may go unscheduled for a second or more, does not.
#define S_WAIT_MS  10000

//  What one test started, so that its end can check none of it is left.
typedef struct {
    ps_supervisor_t *sup;
    char dir [64];
    pid_t pids [S_MAX_PIDS];
    int npids;
} s_test_t;

//  The state letter of /proc/PID/stat, and the process group in *pgrp;
//  0 when the process does not exist.
static char
s_proc_state (pid_t pid, pid_t *pgrp)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *file = fopen (path, "r");
    if (!file)
        return 0;
    char line [1024];
    char *got = fgets (line, sizeof line, file);
    fclose (file);
    //  The command name may hold spaces and parentheses; the fields after
    //  it start after the last ')'.
    char *end = got ? strrchr (line, ')') : NULL;
    char state = 0;
    int group = 0;
    if (!end || sscanf (end + 1, " %c %*d %d", &state, &group) != 2)
        return 0;
    if (pgrp)
        *pgrp = (pid_t) group;
    return state;
}

//  True when the process no longer runs. A zombie counts as gone: an
//  orphan is reaped by init, and the init of a container may never do so.
static bool
s_gone (pid_t pid)
{
    if (kill (pid, 0) != 0 && errno == ESRCH)
        return true;
    char state = s_proc_state (pid, NULL);
    return state == 0 || state == 'Z' || state == 'X';
}

//  True when no live process is left in the process group.
static bool
s_group_gone (pid_t pgid)
{
    DIR *proc = opendir ("/proc");
    assert_non_null (proc);
    bool gone = true;
    struct dirent *entry;
    while (gone && (entry = readdir (proc))) {
        pid_t pid = (pid_t) atoi (entry->d_name);
        pid_t pgrp = 0;
        if (pid <= 0)
            continue;
        char state = s_proc_state (pid, &pgrp);
        if (state && state != 'Z' && state != 'X' && pgrp == pgid)
            gone = false;
    }
    closedir (proc);
    return gone;
}

static bool
s_wait_gone (pid_t pid, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 5) {
        if (s_gone (pid))
            return true;
        harness_sleep_ms (5);
    }
    return s_gone (pid);
}

//  SIGKILL sent to a group takes effect a moment later for the members
//  that are not our children, so their end is waited for.
static bool
s_wait_group_gone (pid_t pgid, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 5) {
        if (s_group_gone (pgid))
            return true;
        harness_sleep_ms (5);
    }
    return s_group_gone (pgid);
}

static void
s_track (s_test_t *test, pid_t pid)
{
    assert_true (pid > 0);
    for (int i = 0; i < test->npids; i++)
        if (test->pids [i] == pid)
            return;
    assert_true (test->npids < S_MAX_PIDS);
    test->pids [test->npids++] = pid;
}

static void
s_path (const s_test_t *test, const char *name, char *path, size_t len)
{
    snprintf (path, len, "%s/%s", test->dir, name);
}

//  The whole file as a string (at most 4 KiB), or "" when it is missing.
static void
s_read_file (const char *path, char *buf, size_t len)
{
    buf [0] = 0;
    FILE *file = fopen (path, "r");
    if (!file)
        return;
    size_t got = fread (buf, 1, len - 1, file);
    buf [got] = 0;
    fclose (file);
}

static bool
s_wait_file (const char *path, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 5) {
        if (access (path, F_OK) == 0)
            return true;
        harness_sleep_ms (5);
    }
    return false;
}

//  Add a child and check it runs; returns its index.
static int
s_add (s_test_t *test, const char *name, const char *const *argv,
       const char *const *env, const char *log_path)
{
    ps_error_t err = { 0 };
    int child = ps_supervisor_add (test->sup, name, argv, env, log_path, &err);
    if (child < 0)
        fail_msg ("ps_supervisor_add %s: %s", name, err.msg);
    s_track (test, ps_supervisor_pid (test->sup, child));
    return child;
}

//  Poll until one event arrives; false after timeout_ms.
static bool
s_next_event (s_test_t *test, ps_child_event_t *event, int timeout_ms)
{
    double deadline = ps_clock_ms () + timeout_ms;
    while (ps_clock_ms () < deadline) {
        size_t n = ps_supervisor_poll (test->sup, event, 1);
        for (int i = 0; i < ps_supervisor_count (test->sup); i++)
            if (ps_supervisor_pid (test->sup, i) > 0)
                s_track (test, ps_supervisor_pid (test->sup, i));
        if (n == 1)
            return true;
        harness_sleep_ms (2);
    }
    return false;
}

//  Poll until the child is in the state, failing on any event; false after
//  timeout_ms.
static bool
s_wait_state (s_test_t *test, int child, ps_child_state_t state, int timeout_ms)
{
    double deadline = ps_clock_ms () + timeout_ms;
    while (ps_supervisor_state (test->sup, child) != state) {
        if (ps_clock_ms () >= deadline)
            return false;
        ps_child_event_t event;
        if (ps_supervisor_poll (test->sup, &event, 1))
            fail_msg ("unexpected event for child %d: status %d", event.child, event.status);
        harness_sleep_ms (2);
    }
    if (ps_supervisor_pid (test->sup, child) > 0)
        s_track (test, ps_supervisor_pid (test->sup, child));
    return true;
}

//  Poll for a while and check nothing happens.
static void
s_assert_quiet (s_test_t *test, int ms)
{
    ps_child_event_t event;
    assert_false (s_next_event (test, &event, ms));
}

//  The end of every test: destroy the supervisor, then check that nothing
//  it started runs and that it left no unreaped child.
static void
s_finish (s_test_t *test)
{
    ps_supervisor_destroy (&test->sup);
    assert_null (test->sup);
    for (int i = 0; i < test->npids; i++) {
        if (!s_gone (test->pids [i]))
            fail_msg ("pid %d is still running", (int) test->pids [i]);
        if (!s_wait_group_gone (test->pids [i], S_WAIT_MS))
            fail_msg ("process group %d still has processes running", (int) test->pids [i]);
    }
    assert_int_equal (waitpid (-1, NULL, WNOHANG), -1);
    assert_int_equal (errno, ECHILD);
}

static int
s_setup (void **state)
{
    s_test_t *test = calloc (1, sizeof (s_test_t));
    if (!test)
        return -1;
    harness_tmpdir (test->dir, sizeof test->dir);
    test->sup = ps_supervisor_new (true);
    if (!test->sup)
        return -1;
    *state = test;
    return 0;
}

//  Also runs after a failed test, which may have left children running.
static int
s_teardown (void **state)
{
    s_test_t *test = *state;
    ps_supervisor_destroy (&test->sup);
    harness_rmtree (test->dir);
    free (test);
    return 0;
}

static const char *const s_sleep_argv [] = { "/bin/sleep", "100", NULL };

static void
test_start_running (void **state)
{
    s_test_t *test = *state;
    int child = s_add (test, "sleep:0", s_sleep_argv, NULL, NULL);
    assert_int_equal (child, 0);
    assert_int_equal (ps_supervisor_count (test->sup), 1);
    assert_int_equal (ps_supervisor_running (test->sup), 1);
    assert_int_equal (ps_supervisor_state (test->sup, child), PS_CHILD_RUNNING);
    assert_string_equal (ps_supervisor_name (test->sup, child), "sleep:0");
    pid_t pid = ps_supervisor_pid (test->sup, child);
    assert_int_equal (kill (pid, 0), 0);
    //  Each child leads its own process group (see ps_supervisor.c).
    assert_int_equal (getpgid (pid), pid);
    s_assert_quiet (test, 50);
    assert_int_equal (ps_supervisor_pid (test->sup, child), pid);
    s_finish (test);
}

static void
test_killed_child_restarts_after_backoff (void **state)
{
    s_test_t *test = *state;
    int child = s_add (test, "sleep:0", s_sleep_argv, NULL, NULL);
    //  The first restart waits 100 ms, the second 200 ms.
    int backoff [] = { 100, 200 };
    for (int round = 0; round < 2; round++) {
        pid_t old = ps_supervisor_pid (test->sup, child);
        //  The backoff runs from when the supervisor saw the death, which
        //  is after the kill: timed from before the kill, the restart can
        //  come no sooner than the backoff, however late this thread runs.
        double killed = ps_clock_ms ();
        assert_int_equal (kill (old, SIGKILL), 0);
        ps_child_event_t event;
        assert_true (s_next_event (test, &event, S_WAIT_MS));
        assert_int_equal (event.child, child);
        assert_int_equal (event.pid, old);
        assert_true (event.signaled);
        assert_int_equal (event.status, 128 + SIGKILL);
        assert_int_equal (event.state, PS_CHILD_BACKOFF);
        assert_int_equal (ps_supervisor_pid (test->sup, child), 0);
        assert_int_equal (ps_supervisor_running (test->sup), 0);

        assert_true (s_wait_state (test, child, PS_CHILD_RUNNING, S_WAIT_MS));
        double waited = ps_clock_ms () - killed;
        if (waited < backoff [round])
            fail_msg ("restarted after %.0f ms, expected a backoff of %d ms", waited, backoff [round]);
        pid_t pid = ps_supervisor_pid (test->sup, child);
        assert_true (pid > 0);
        assert_int_not_equal (pid, old);
        assert_int_equal (kill (pid, 0), 0);
        assert_true (s_gone (old));
    }
    s_finish (test);
}

static void
test_exit_zero_is_not_restarted (void **state)
{
    s_test_t *test = *state;
    int child = s_add (test, "done:0", (const char *[]) { "/bin/sh", "-c", "exit 0", NULL },
                       NULL, NULL);
    pid_t pid = ps_supervisor_pid (test->sup, child);
    ps_child_event_t event;
    assert_true (s_next_event (test, &event, S_WAIT_MS));
    assert_int_equal (event.pid, pid);
    assert_false (event.signaled);
    assert_int_equal (event.status, 0);
    assert_int_equal (event.state, PS_CHILD_EXITED);
    s_assert_quiet (test, 300);
    assert_int_equal (ps_supervisor_state (test->sup, child), PS_CHILD_EXITED);
    assert_int_equal (ps_supervisor_pid (test->sup, child), 0);
    assert_int_equal (ps_supervisor_running (test->sup), 0);
    s_finish (test);
}

static void
test_restart_off (void **state)
{
    s_test_t *test = *state;
    ps_supervisor_destroy (&test->sup);
    test->sup = ps_supervisor_new (false);
    assert_non_null (test->sup);
    int child = s_add (test, "sleep:0", s_sleep_argv, NULL, NULL);
    pid_t pid = ps_supervisor_pid (test->sup, child);
    assert_int_equal (kill (pid, SIGKILL), 0);
    ps_child_event_t event;
    assert_true (s_next_event (test, &event, S_WAIT_MS));
    assert_true (event.signaled);
    assert_int_equal (event.status, 128 + SIGKILL);
    assert_int_equal (event.state, PS_CHILD_EXITED);
    s_assert_quiet (test, 300);
    assert_int_equal (ps_supervisor_pid (test->sup, child), 0);
    s_finish (test);
}

static void
test_failing_child_is_given_up (void **state)
{
    s_test_t *test = *state;
    double start = ps_clock_ms ();
    int child = s_add (test, "bad:0", (const char *[]) { "/bin/sh", "-c", "exit 1", NULL },
                       NULL, NULL);
    ps_child_event_t events [5];
    for (int i = 0; i < 5; i++) {
        assert_true (s_next_event (test, &events [i], S_WAIT_MS));
        assert_int_equal (events [i].child, child);
        assert_false (events [i].signaled);
        assert_int_equal (events [i].status, 1);
        assert_int_equal (events [i].state, i < 4 ? PS_CHILD_BACKOFF : PS_CHILD_GAVE_UP);
    }
    //  Four backoffs of 100, 200, 400 and 800 ms lie between the five deaths.
    double elapsed = ps_clock_ms () - start;
    if (elapsed < 1400 || elapsed > 10000)
        fail_msg ("gave up after %.0f ms, expected about 1500", elapsed);
    assert_int_equal (ps_supervisor_state (test->sup, child), PS_CHILD_GAVE_UP);
    s_assert_quiet (test, 300);
    assert_int_equal (ps_supervisor_pid (test->sup, child), 0);
    s_finish (test);
}

static void
test_missing_program (void **state)
{
    s_test_t *test = *state;
    const char *program = "/nonexistent/ps-no-such-program";
    ps_error_t err = { 0 };
    int rc = ps_supervisor_add (test->sup, "ghost:0", (const char *[]) { program, NULL },
                                NULL, NULL, &err);
    assert_int_equal (rc, PS_EIO);
    assert_int_equal (err.code, PS_EIO);
    assert_non_null (strstr (err.msg, program));
    assert_non_null (strstr (err.msg, "ghost:0"));
    assert_non_null (strstr (err.msg, "No such file"));
    assert_int_equal (ps_supervisor_count (test->sup), 0);

    //  A log file that cannot be opened is named too.
    const char *log = "/nonexistent/ps-no-such-dir/child.log";
    rc = ps_supervisor_add (test->sup, "sleep:0", s_sleep_argv, NULL, log, &err);
    assert_int_equal (rc, PS_EIO);
    assert_non_null (strstr (err.msg, log));
    assert_int_equal (ps_supervisor_count (test->sup), 0);
    s_finish (test);
}

static void
test_invalid_arguments (void **state)
{
    s_test_t *test = *state;
    ps_error_t err = { 0 };
    assert_int_equal (ps_supervisor_add (test->sup, "none:0", (const char *[]) { NULL },
                                         NULL, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "none:0"));
    assert_int_equal (ps_supervisor_add (test->sup, "env:0", s_sleep_argv,
                                         (const char *[]) { "NO_EQUALS_SIGN", NULL }, NULL, &err),
                      PS_EINVAL);
    assert_non_null (strstr (err.msg, "NO_EQUALS_SIGN"));
    assert_int_equal (ps_supervisor_count (test->sup), 0);
    s_finish (test);
}

static void
test_env_overlay (void **state)
{
    s_test_t *test = *state;
    char out [128];
    s_path (test, "env.out", out, sizeof out);
    assert_int_equal (setenv ("PS_TEST_INHERITED", "kept", 1), 0);
    assert_int_equal (setenv ("PS_TEST_REPLACED", "old", 1), 0);
    const char *script =
        "printf '%s|%s|%s|' \"$PS_TEST_VAR\" \"$PS_TEST_REPLACED\" \"$PS_TEST_INHERITED\" > \"$0\";"
        "env | grep -c '^PS_TEST_REPLACED=' >> \"$0\"";
    int child = s_add (test, "env:0", (const char *[]) { "/bin/sh", "-c", script, out, NULL },
                       (const char *[]) { "PS_TEST_VAR=hello world", "PS_TEST_REPLACED=new", NULL },
                       NULL);
    assert_int_equal (unsetenv ("PS_TEST_INHERITED"), 0);
    assert_int_equal (unsetenv ("PS_TEST_REPLACED"), 0);
    ps_child_event_t event;
    assert_true (s_next_event (test, &event, S_WAIT_MS));
    assert_int_equal (event.child, child);
    assert_int_equal (event.status, 0);
    char text [4096];
    s_read_file (out, text, sizeof text);
    assert_string_equal (text, "hello world|new|kept|1\n");
    //  The overlay is the child's, not the coordinator's.
    assert_null (getenv ("PS_TEST_VAR"));
    s_finish (test);
}

static void
test_log_file_gets_output (void **state)
{
    s_test_t *test = *state;
    char log [128];
    s_path (test, "child.log", log, sizeof log);
    FILE *file = fopen (log, "w");
    assert_non_null (file);
    fputs ("before\n", file);
    fclose (file);
    int child = s_add (test, "log:0",
                       (const char *[]) { "/bin/sh", "-c", "echo out; echo err >&2", NULL },
                       NULL, log);
    ps_child_event_t event;
    assert_true (s_next_event (test, &event, S_WAIT_MS));
    assert_int_equal (event.child, child);
    assert_int_equal (event.status, 0);
    char text [4096];
    s_read_file (log, text, sizeof text);
    //  Appended, stdout and stderr both.
    assert_string_equal (text, "before\nout\nerr\n");
    s_finish (test);
}

//  Stdin is /dev/null, and a descriptor the coordinator opened without
//  close-on-exec does not leak into the child.
static void
test_stdin_and_descriptors (void **state)
{
    s_test_t *test = *state;
    char out [128];
    s_path (test, "fds.out", out, sizeof out);
    int fd = open ("/dev/null", O_RDONLY);
    assert_true (fd >= 0);
    assert_int_equal (dup2 (fd, 50), 50);
    assert_int_equal (close (fd), 0);
    //  Our stdin becomes a pipe for the while, so that a child that merely
    //  inherited it would show that and not /dev/null.
    int saved_stdin = dup (STDIN_FILENO);
    int pipe_fds [2];
    assert_true (saved_stdin >= 0);
    assert_int_equal (pipe (pipe_fds), 0);
    assert_int_equal (dup2 (pipe_fds [0], STDIN_FILENO), STDIN_FILENO);
    //  test is a builtin of the shell, so /proc/self is the shell itself.
    const char *script =
        "readlink /proc/self/fd/0 > \"$0\";"
        "if [ -e /proc/self/fd/50 ]; then echo leaked; else echo closed; fi >> \"$0\"";
    int child = s_add (test, "fds:0", (const char *[]) { "/bin/sh", "-c", script, out, NULL },
                       NULL, NULL);
    assert_int_equal (close (50), 0);
    assert_int_equal (dup2 (saved_stdin, STDIN_FILENO), STDIN_FILENO);
    assert_int_equal (close (saved_stdin), 0);
    assert_int_equal (close (pipe_fds [0]), 0);
    assert_int_equal (close (pipe_fds [1]), 0);
    ps_child_event_t event;
    assert_true (s_next_event (test, &event, S_WAIT_MS));
    assert_int_equal (event.child, child);
    assert_int_equal (event.status, 0);
    char text [4096];
    s_read_file (out, text, sizeof text);
    assert_string_equal (text, "/dev/null\nclosed\n");
    s_finish (test);
}

//  What a child leaves running in its process group dies with it.
static void
test_leftovers_die_with_child (void **state)
{
    s_test_t *test = *state;
    char pid_file [128];
    s_path (test, "leftover.pid", pid_file, sizeof pid_file);
    int child = s_add (test, "leaver:0",
                       (const char *[]) { "/bin/sh", "-c",
                                          "sleep 100 & echo $! > \"$0\"; exit 0", pid_file, NULL },
                       NULL, NULL);
    ps_child_event_t event;
    assert_true (s_next_event (test, &event, S_WAIT_MS));
    assert_int_equal (event.child, child);
    assert_int_equal (event.state, PS_CHILD_EXITED);
    char text [64];
    s_read_file (pid_file, text, sizeof text);
    pid_t leftover = (pid_t) atoi (text);
    assert_true (leftover > 0);
    s_track (test, leftover);
    if (!s_wait_gone (leftover, S_WAIT_MS)) {
        kill (leftover, SIGKILL);
        fail_msg ("pid %d, started by a child, outlived it", (int) leftover);
    }
    s_finish (test);
}

static void
test_stop_all_kills_stubborn_child (void **state)
{
    s_test_t *test = *state;
    char ready [128];
    s_path (test, "ready", ready, sizeof ready);
    //  The shell ignores SIGTERM, and so does the sleep it starts, which
    //  inherits the ignored disposition; the marker says the trap is set.
    int child = s_add (test, "stubborn:0",
                       (const char *[]) { "/bin/sh", "-c",
                                          "trap '' TERM; : > \"$0\"; sleep 100", ready, NULL },
                       NULL, NULL);
    pid_t pid = ps_supervisor_pid (test->sup, child);
    assert_true (s_wait_file (ready, S_WAIT_MS));
    double start = ps_clock_ms ();
    ps_supervisor_stop_all (test->sup, SIGTERM, 500);
    double elapsed = ps_clock_ms () - start;
    //  It waits out the 500 ms, then kills; later only by as much as the
    //  load delays it, and within 10 s (a stop_all that waited for the
    //  sleep of 100 s would not end).
    if (elapsed < 450 || elapsed > 10000)
        fail_msg ("stop_all took %.0f ms, expected about 500", elapsed);
    assert_int_equal (ps_supervisor_state (test->sup, child), PS_CHILD_EXITED);
    assert_int_equal (ps_supervisor_pid (test->sup, child), 0);
    assert_int_equal (ps_supervisor_running (test->sup), 0);
    assert_true (s_gone (pid));
    //  The sleep went with the shell: the child's whole group was killed.
    assert_true (s_wait_group_gone (pid, S_WAIT_MS));
    s_assert_quiet (test, 50);
    s_finish (test);
}

static void
test_stop_all_stops_running_and_waiting (void **state)
{
    s_test_t *test = *state;
    int running = s_add (test, "sleep:0", s_sleep_argv, NULL, NULL);
    int waiting = s_add (test, "sleep:1", s_sleep_argv, NULL, NULL);
    assert_int_equal (kill (ps_supervisor_pid (test->sup, waiting), SIGKILL), 0);
    ps_child_event_t event;
    assert_true (s_next_event (test, &event, S_WAIT_MS));
    assert_int_equal (event.child, waiting);
    assert_int_equal (event.state, PS_CHILD_BACKOFF);

    double start = ps_clock_ms ();
    ps_supervisor_stop_all (test->sup, SIGTERM, 30000);
    //  sleep dies of SIGTERM at once; nothing waits for the timeout (the
    //  bound leaves a loaded machine 10 s).
    double elapsed = ps_clock_ms () - start;
    if (elapsed > 10000)
        fail_msg ("stop_all took %.0f ms for children that die of SIGTERM", elapsed);
    assert_int_equal (ps_supervisor_state (test->sup, running), PS_CHILD_EXITED);
    assert_int_equal (ps_supervisor_state (test->sup, waiting), PS_CHILD_EXITED);
    assert_int_equal (ps_supervisor_running (test->sup), 0);
    //  The child that was waiting for its restart is not restarted.
    s_assert_quiet (test, 300);
    assert_int_equal (ps_supervisor_pid (test->sup, waiting), 0);
    s_finish (test);
}

//  The helper process of test_parent_death: supervise a sleep, publish its
//  pid, and wait to be killed.
static void __attribute__ ((noreturn))
s_parent_death_helper (const char *pid_file)
{
    ps_supervisor_t *sup = ps_supervisor_new (true);
    ps_error_t err = { 0 };
    int child = sup ? ps_supervisor_add (sup, "orphan:0", s_sleep_argv, NULL, NULL, &err) : -1;
    if (child < 0)
        _exit (1);
    char tmp [160];
    snprintf (tmp, sizeof tmp, "%s.tmp", pid_file);
    FILE *file = fopen (tmp, "w");
    if (!file)
        _exit (1);
    fprintf (file, "%d\n", (int) ps_supervisor_pid (sup, child));
    if (fclose (file) != 0 || rename (tmp, pid_file) != 0)
        _exit (1);
    while (true)
        pause ();
}

static void
test_parent_death_kills_child (void **state)
{
    s_test_t *test = *state;
    char pid_file [128];
    s_path (test, "grandchild.pid", pid_file, sizeof pid_file);
    fflush (NULL);
    pid_t helper = fork ();
    assert_true (helper >= 0);
    if (helper == 0)
        s_parent_death_helper (pid_file);
    bool ready = s_wait_file (pid_file, S_WAIT_MS);
    pid_t grandchild = 0;
    if (ready) {
        char text [64];
        s_read_file (pid_file, text, sizeof text);
        grandchild = (pid_t) atoi (text);
    }
    assert_int_equal (kill (helper, SIGKILL), 0);
    assert_int_equal (waitpid (helper, NULL, 0), helper);
    assert_true (ready);
    assert_true (grandchild > 0);
    s_track (test, grandchild);
    if (!s_wait_gone (grandchild, S_WAIT_MS)) {
        kill (grandchild, SIGKILL);
        fail_msg ("pid %d outlived its supervisor by %d s", (int) grandchild, S_WAIT_MS / 1000);
    }
    s_finish (test);
}

static void
test_child_starts_with_clean_signals (void **state)
{
    s_test_t *test = *state;
    char out [128];
    s_path (test, "signals.out", out, sizeof out);
    //  As the coordinator does: SIGTERM and SIGCHLD blocked (for its
    //  signalfd), and some signals ignored.
    sigset_t block, old_mask;
    sigemptyset (&block);
    sigaddset (&block, SIGTERM);
    sigaddset (&block, SIGCHLD);
    assert_int_equal (sigprocmask (SIG_BLOCK, &block, &old_mask), 0);
    struct sigaction ignore = { .sa_handler = SIG_IGN }, old_pipe, old_hup;
    sigemptyset (&ignore.sa_mask);
    assert_int_equal (sigaction (SIGPIPE, &ignore, &old_pipe), 0);
    assert_int_equal (sigaction (SIGHUP, &ignore, &old_hup), 0);
    //  grep is the child itself, not started through a shell: dash clears
    //  the signal mask when it starts, which would hide a mask left set.
    int child = s_add (test, "signals:0",
                       (const char *[]) { "/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status",
                                          NULL },
                       NULL, out);
    assert_int_equal (sigaction (SIGHUP, &old_hup, NULL), 0);
    assert_int_equal (sigaction (SIGPIPE, &old_pipe, NULL), 0);
    assert_int_equal (sigprocmask (SIG_SETMASK, &old_mask, NULL), 0);
    ps_child_event_t event;
    assert_true (s_next_event (test, &event, S_WAIT_MS));
    assert_int_equal (event.child, child);
    assert_int_equal (event.status, 0);
    char text [4096];
    s_read_file (out, text, sizeof text);
    assert_string_equal (text, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
    s_finish (test);
}

//  The coordinator may have children of its own; poll must not reap them.
static void
test_poll_leaves_other_children (void **state)
{
    s_test_t *test = *state;
    fflush (NULL);
    pid_t own = fork ();
    assert_true (own >= 0);
    if (own == 0)
        _exit (7);
    int child = s_add (test, "done:0", (const char *[]) { "/bin/sh", "-c", "exit 0", NULL },
                       NULL, NULL);
    ps_child_event_t event;
    assert_true (s_next_event (test, &event, S_WAIT_MS));
    assert_int_equal (event.child, child);
    s_assert_quiet (test, 50);
    int status = 0;
    assert_int_equal (waitpid (own, &status, 0), own);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 7);
    s_finish (test);
}

//  With room for one event per call, two deaths take two calls and none is
//  lost.
static void
test_poll_keeps_events_beyond_max (void **state)
{
    s_test_t *test = *state;
    int first = s_add (test, "sleep:0", s_sleep_argv, NULL, NULL);
    int second = s_add (test, "sleep:1", s_sleep_argv, NULL, NULL);
    pid_t pids [2] = { ps_supervisor_pid (test->sup, first), ps_supervisor_pid (test->sup, second) };
    for (int i = 0; i < 2; i++) {
        assert_int_equal (kill (pids [i], SIGKILL), 0);
        assert_true (s_wait_gone (pids [i], S_WAIT_MS));
    }
    ps_child_event_t events [2];
    assert_int_equal (ps_supervisor_poll (test->sup, &events [0], 1), 1);
    assert_int_equal (ps_supervisor_poll (test->sup, &events [1], 1), 1);
    assert_int_equal (events [0].pid, pids [0]);
    assert_int_equal (events [1].pid, pids [1]);
    assert_int_equal (ps_supervisor_running (test->sup), 0);
    s_finish (test);
}

int
main (void)
{
    ps_log_init ("test_supervisor", PS_LOG_WARN);
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_start_running, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_killed_child_restarts_after_backoff, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_exit_zero_is_not_restarted, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_restart_off, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_failing_child_is_given_up, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_missing_program, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_invalid_arguments, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_env_overlay, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_log_file_gets_output, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_stdin_and_descriptors, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_leftovers_die_with_child, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_stop_all_kills_stubborn_child, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_stop_all_stops_running_and_waiting, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_parent_death_kills_child, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_child_starts_with_clean_signals, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_poll_leaves_other_children, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_poll_keeps_events_beyond_max, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
