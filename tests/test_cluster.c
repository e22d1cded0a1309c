//  The cluster, end to end: the coordinator, ps-servers and ps-workers as
//  real processes on 127.0.0.1, training the cnn on subsets of the real
//  Fashion-MNIST, with failures injected by signals. Every run that must
//  complete ends with exit status 0 and a "done" record in which every step
//  was trained and every partition of every variable was updated exactly
//  once per step (a server's ledger applies a step id once and counts a
//  second push of it as a duplicate), with the record's counters agreeing
//  with the events before it:
//    a. coordinator --local: an evaluation after each epoch, test accuracy
//       rising, the training loss falling, no child process left behind;
//    b. the same cluster started by hand, each process with its TF_CONFIG;
//       and again from cluster files, the workers with --task; and a
//       worker hung (SIGSTOP) until after the coordinator has exited, which
//       then stops by itself since the coordinator had said it finished;
//    c. kill -9 of a worker mid-epoch, with and without restarts;
//    d. SIGSTOP of a worker past the heartbeat timeout, then SIGCONT: its
//       steps go to the other worker, its late push is a duplicate, and it
//       rejoins;
//    e. kill -9 of a server: recovery from the newest checkpoint;
//    f. kill -9 of the coordinator: its children die with it, and --resume
//       finishes the run from the newest checkpoint; --resume with no
//       checkpoint fails at once and says so;
//    g. damaged newest checkpoints (a truncated snapshot file, a truncated
//       manifest): --resume warns and resumes from the one before;
//    h. an evaluator task does the evaluations;
//    i. processes that lie to the coordinator (completing steps they do
//       not hold, or never trained; registering as a live task) cannot
//       make it count a step that was not trained once, nor evict a live
//       worker: the run completes, or fails naming what disagrees;
//    j. a secured cluster: processes without its keys get no answer, a
//       worker's key may not control a server; the one run with
//       --insecure, which warns; and a PLAIN data plane;
//    l. gradients that are not finite (refused, retried, then the run
//       fails) and a training loss that diverges (warned, or stopped);
//    m. ssp (bounded staleness), the group "ssp" (`test_cluster ssp`, which
//       meson runs as test_cluster_ssp): a run in lockstep, and c, d and e
//       again under ssp, each done record's staleness within the bound; a
//       stopped worker leaves the clock, so the other goes on without it;
//    n. sync mode: a run in which every step is recorded once and every
//       partition applies one update per round (--overlap ignored, with a
//       warning), the kill -9 cases of c. (without restarts) and e., and
//       d.: a stopped worker is dropped from the rounds and comes back.
//  In sync mode a partition applies a round's steps as one update, so
//  "exactly once per step" reads there as: every step in every
//  partition's ledger once, and the same number of updates everywhere,
//  one per round.
//  Each case prints a one-line summary (time, steps, failure detection).
//  PS_TEST_SCALE (default 1) scales the data subsets, for slow builds;
//  PS_TEST_FILTER (a cmocka pattern) runs only the cases it matches.
//  Mirrored and ssp training on all of Fashion-MNIST, to the accuracy
//  target, is the group "accuracy" (`test_cluster accuracy`), which meson runs as
//  test_cluster_accuracy and sanitizer builds skip (harness_group).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include <czmq.h>
#include <zmq.h>

#include "harness.h"
#include "ps_clock.h"
#include "ps_msg.h"
#include "ps_proto_conv.h"

#define S_BATCH         64
#define S_MAX_ARGS      64
#define S_MAX_RUNS      8
#define S_MAX_PIDS      32
//  A whole run, however slow the build; a hang fails the test instead.
#define S_RUN_MS        240000
//  Waiting for an event that follows a failure at once.
#define S_EVENT_MS      20000
//  The heartbeat settings of the failure cases.
#define S_HEARTBEAT_MS  100
#define S_TIMEOUT_MS    1000
//  The coordinator's heartbeat timeout when none is given.
#define S_DEFAULT_TIMEOUT_MS 3000

static double s_scale = 1.0;

//  ---------------------------------------------------------------------
//  Runs of the coordinator

typedef struct {
    const char *name;
    char dir [64];              //  everything of this run lives here
    char metrics [PATH_MAX];
    char log [PATH_MAX];        //  the coordinator's stdout and stderr
    char log_dir [PATH_MAX];    //  --log-dir: the local children's logs
    char job [PATH_MAX];
    const char *argv [S_MAX_ARGS];
    int argc;
    char *owned [S_MAX_ARGS];
    int nowned;
    pid_t pid;
    double start_ms;
    int status;
    double wall_s;
    json_t *rows;
} s_run_t;

//  What the teardown cleans up when a test fails half-way: runs still
//  going (their children die with them) and processes started by hand.
static s_run_t *s_runs [S_MAX_RUNS];
static pid_t s_extra_pids [S_MAX_PIDS];

static void
s_track_pid (pid_t pid)
{
    for (int i = 0; i < S_MAX_PIDS; i++)
        if (!s_extra_pids [i]) {
            s_extra_pids [i] = pid;
            return;
        }
}

//  A new run in a fresh directory, with a job file whose metrics window is
//  short enough to give several progress events in a run of seconds.
static s_run_t *
s_run_new (const char *name)
{
    s_run_t *run = calloc (1, sizeof *run);
    assert_non_null (run);
    run->name = name;
    harness_tmpdir (run->dir, sizeof run->dir);
    snprintf (run->metrics, sizeof run->metrics, "%s/metrics.jsonl", run->dir);
    snprintf (run->log, sizeof run->log, "%s/coordinator.log", run->dir);
    snprintf (run->log_dir, sizeof run->log_dir, "%s/logs", run->dir);
    snprintf (run->job, sizeof run->job, "%s/job.json", run->dir);
    assert_int_equal (harness_write_file (run->job, "{\"log_seconds\": 0.2}\n"), 0);
    const char *coordinator = getenv ("PS_COORDINATOR");
    if (!coordinator)
        fail_msg ("PS_COORDINATOR is not set");
    run->argv [run->argc++] = coordinator;
    for (int i = 0; i < S_MAX_RUNS; i++)
        if (!s_runs [i]) {
            s_runs [i] = run;
            break;
        }
    return run;
}

static void
s_run_destroy (s_run_t *run)
{
    if (run->pid > 0)
        harness_wait_or_kill (run->pid, 0);
    for (int i = 0; i < run->nowned; i++)
        free (run->owned [i]);
    json_decref (run->rows);
    harness_rmtree (run->dir);
    for (int i = 0; i < S_MAX_RUNS; i++)
        if (s_runs [i] == run)
            s_runs [i] = NULL;
    free (run);
}

static int
s_teardown (void **state)
{
    (void) state;
    for (int i = 0; i < S_MAX_RUNS; i++)
        if (s_runs [i])
            s_run_destroy (s_runs [i]);
    for (int i = 0; i < S_MAX_PIDS; i++)
        if (s_extra_pids [i]) {
            harness_wait_or_kill (s_extra_pids [i], 0);
            s_extra_pids [i] = 0;
        }
    return 0;
}

static const char *
s_arg (s_run_t *run, const char *fmt, ...)
{
    assert_true (run->argc < S_MAX_ARGS - 1 && run->nowned < S_MAX_ARGS);
    char buf [PATH_MAX];
    va_list args;
    va_start (args, fmt);
    vsnprintf (buf, sizeof buf, fmt, args);
    va_end (args);
    char *copy = strdup (buf);
    assert_non_null (copy);
    run->owned [run->nowned++] = copy;
    run->argv [run->argc++] = copy;
    return copy;
}

static void
s_args (s_run_t *run, const char *const *args)
{
    for (int i = 0; args [i]; i++)
        s_arg (run, "%s", args [i]);
}

//  The data subsets, scaled by PS_TEST_SCALE: whole batches, never tiny.
static int
s_limit (int n)
{
    int scaled = (int) (n * s_scale) / S_BATCH * S_BATCH;
    return scaled < 10 * S_BATCH ? 10 * S_BATCH : scaled;
}

static int
s_test_limit (int n)
{
    int scaled = (int) (n * s_scale);
    return scaled < 256 ? 256 : scaled;
}

static uint64_t
s_steps_per_epoch (int limit)
{
    return ((uint64_t) limit + S_BATCH - 1) / S_BATCH;
}

//  The job of a run: the cnn on limit training examples for epochs epochs.
static void
s_job_args (s_run_t *run, int limit, int test_limit, int epochs)
{
    s_args (run, (const char *[]) { "--job", run->job, "--model", "cnn", "--seed", "1",
                                    "--metrics", run->metrics, NULL });
    s_arg (run, "--limit");
    s_arg (run, "%d", limit);
    s_arg (run, "--test-limit");
    s_arg (run, "%d", test_limit);
    s_arg (run, "--epochs");
    s_arg (run, "%d", epochs);
}

//  A local cluster of 2 servers and 2 workers.
static void
s_local_args (s_run_t *run, int limit, int test_limit, int epochs)
{
    s_args (run, (const char *[]) { "--local", "--log-dir", run->log_dir, NULL });
    s_job_args (run, limit, test_limit, epochs);
}

//  Heartbeats fast enough for the failure cases to detect in a second.
static void
s_heartbeat_args (s_run_t *run)
{
    s_arg (run, "--heartbeat-ms");
    s_arg (run, "%d", S_HEARTBEAT_MS);
    s_arg (run, "--heartbeat-timeout-ms");
    s_arg (run, "%d", S_TIMEOUT_MS);
}

//  The ssp cases' mode: the default bound, named.
#define S_STALENESS     3
static const char *const s_ssp_args [] = { "--mode", "ssp", "--staleness", "3", NULL };
static const char *const s_sync_args [] = { "--mode", "sync", NULL };

//  A run's mode flags (NULL: the default, async).
static void
s_mode_args (s_run_t *run, const char *const *mode)
{
    if (mode)
        s_args (run, mode);
}

//  Whether argv (NULL-terminated) holds arg.
static bool
s_has_arg (const char *const *argv, const char *arg)
{
    for (int i = 0; argv && argv [i]; i++)
        if (strcmp (argv [i], arg) == 0)
            return true;
    return false;
}

//  A coordinator started by hand is secured by the test's keys (a local
//  one makes its own), unless the run asks for --insecure or other keys.
static void
s_run_start (s_run_t *run, const char *const *env)
{
    run->argv [run->argc] = NULL;
    if (!s_has_arg (run->argv, "--local") && !s_has_arg (run->argv, "--insecure")
    &&  !s_has_arg (run->argv, "--keys"))
        s_args (run, (const char *[]) { "--keys", harness_keys (), NULL });
    run->argv [run->argc] = NULL;
    run->start_ms = ps_clock_ms ();
    run->pid = harness_spawn (run->argv, env, run->log);
    assert_true (run->pid > 0);
}

static bool
s_running (s_run_t *run)
{
    return harness_running (run->pid);
}

//  Wait for the coordinator to exit and read its metrics. The log is
//  printed when the exit status is not the one expected.
static void
s_run_finish (s_run_t *run, int expect_status)
{
    run->status = harness_wait_or_kill (run->pid, S_RUN_MS);
    run->pid = 0;
    run->wall_s = (ps_clock_ms () - run->start_ms) / 1e3;
    json_decref (run->rows);
    run->rows = harness_jsonl_read (run->metrics);
    if (run->status != expect_status) {
        harness_print_log (run->log);
        fail_msg ("%s: the coordinator exited with status %d (expected %d; -1: it did not "
                  "exit within %d s)", run->name, run->status, expect_status, S_RUN_MS / 1000);
    }
    assert_non_null (run->rows);
}

static void
s_print_logs (s_run_t *run)
{
    harness_print_log (run->log);
    DIR *dir = opendir (run->log_dir);
    struct dirent *entry;
    while (dir && (entry = readdir (dir)))
        if (strstr (entry->d_name, ".log")) {
            char path [PATH_MAX + 300];
            snprintf (path, sizeof path, "%s/%s", run->log_dir, entry->d_name);
            harness_print_log (path);
        }
    if (dir)
        closedir (dir);
}

//  No log of the run (the coordinator's, its children's, and those of the
//  processes started by hand) holds a sanitizer's report: a child that a
//  sanitizer stopped would be restarted, and the run could still pass.
static void
s_check_logs (s_run_t *run)
{
    static const char *reports [] = {
        "runtime error:", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
    };
    const char *dirs [] = { run->dir, run->log_dir };
    for (int d = 0; d < 2; d++) {
        DIR *dir = opendir (dirs [d]);
        struct dirent *entry;
        while (dir && (entry = readdir (dir))) {
            size_t n = strlen (entry->d_name);
            if (n < 4 || strcmp (entry->d_name + n - 4, ".log") != 0)
                continue;
            char path [PATH_MAX + 300];
            snprintf (path, sizeof path, "%s/%s", dirs [d], entry->d_name);
            for (size_t r = 0; r < sizeof reports / sizeof reports [0]; r++)
                if (harness_file_contains (path, reports [r])) {
                    harness_print_log (path);
                    closedir (dir);
                    fail_msg ("%s: %s says \"%s\"", run->name, path, reports [r]);
                }
        }
        if (dir)
            closedir (dir);
    }
}

//  ---------------------------------------------------------------------
//  Events

static json_int_t
s_int (const json_t *obj, const char *key)
{
    json_t *value = json_object_get (obj, key);
    if (!json_is_integer (value))
        fail_msg ("\"%s\" is not an integer in %s", key, json_dumps (obj, JSON_COMPACT));
    return json_integer_value (value);
}

static double
s_real (const json_t *obj, const char *key)
{
    json_t *value = json_object_get (obj, key);
    if (!json_is_number (value))
        fail_msg ("\"%s\" is not a number in %s", key, json_dumps (obj, JSON_COMPACT));
    return json_number_value (value);
}

static const char *
s_str (const json_t *obj, const char *key)
{
    const char *value = json_string_value (json_object_get (obj, key));
    if (!value)
        fail_msg ("\"%s\" is not a string in %s", key, json_dumps (obj, JSON_COMPACT));
    return value;
}

//  What an event must be: its name, and when given its role, its task and
//  a minimum of one integer field.
typedef struct {
    const char *event;
    const char *role;           //  NULL: any
    int task;                   //  -1: any
    const char *key;            //  NULL: no minimum (booleans count as 0 or 1)
    json_int_t min;
} s_match_t;

static s_match_t
s_ev (const char *event, const char *role, int task)
{
    return (s_match_t) { .event = event, .role = role, .task = task };
}

static s_match_t
s_ev_min (const char *event, const char *role, int task, const char *key, json_int_t min)
{
    return (s_match_t) { .event = event, .role = role, .task = task, .key = key, .min = min };
}

static bool
s_match (const json_t *row, void *arg)
{
    const s_match_t *match = arg;
    if (!harness_event_is (row, match->event))
        return false;
    if (match->role) {
        const char *role = json_string_value (json_object_get (row, "role"));
        if (!role || strcmp (role, match->role) != 0)
            return false;
    }
    if (match->task >= 0 && json_integer_value (json_object_get (row, "task")) != match->task)
        return false;
    if (match->key) {
        //  A boolean counts as 0 or 1.
        json_t *value = json_object_get (row, match->key);
        json_int_t n = json_is_boolean (value) ? json_is_true (value)
                                                : json_integer_value (value);
        if (!value || n < match->min)
            return false;
    }
    return true;
}

//  The rows that match, in order.
static size_t
s_count_match (const json_t *rows, s_match_t match)
{
    size_t n = 0, i;
    json_t *row;
    json_array_foreach (rows, i, row)
        n += s_match (row, &match);
    return n;
}

static size_t
s_count (const json_t *rows, const char *event)
{
    return s_count_match (rows, (s_match_t) { .event = event, .task = -1 });
}

//  The nth event (0-based; -1: the last) that matches, borrowed, or NULL.
static json_t *
s_find_match (const json_t *rows, s_match_t match, int nth)
{
    json_t *found = NULL;
    size_t i;
    json_t *row;
    int seen = 0;
    json_array_foreach (rows, i, row)
        if (s_match (row, &match)) {
            if (nth < 0)
                found = row;
            else
            if (seen++ == nth)
                return row;
        }
    return found;
}

static json_t *
s_find (const json_t *rows, const char *event, int nth)
{
    return s_find_match (rows, (s_match_t) { .event = event, .task = -1 }, nth);
}

//  The position of an event in the rows.
static size_t
s_index_of (const json_t *rows, const json_t *event)
{
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row)
        if (row == event)
            return i;
    fail_msg ("event not in the rows");
    return 0;
}

//  Wait for an event of the running coordinator; fails the test, with
//  the logs, when none comes within timeout_ms or the coordinator ends.
static json_t *
s_wait_event (s_run_t *run, s_match_t match, int timeout_ms)
{
    json_t *row = harness_jsonl_wait (run->metrics, s_match, &match, run->pid, timeout_ms);
    if (!row) {
        s_print_logs (run);
        fail_msg ("%s: no \"%s\" event (role %s, task %d, %s >= %lld) within %d ms%s",
                  run->name, match.event, match.role ? match.role : "any", match.task,
                  match.key ? match.key : "-", (long long) match.min, timeout_ms,
                  s_running (run) ? "" : "; the coordinator has exited");
    }
    return row;
}

//  The pid of the newest process that registered as role:task.
static pid_t
s_task_pid (s_run_t *run, const char *role, int task)
{
    json_t *rows = harness_jsonl_read (run->metrics);
    assert_non_null (rows);
    json_t *row = s_find_match (rows, (s_match_t) { .event = "registered", .role = role,
                                                    .task = task }, -1);
    if (!row)
        fail_msg ("%s: %s:%d has not registered", run->name, role, task);
    pid_t pid = (pid_t) s_int (row, "pid");
    json_decref (rows);
    return pid;
}

//  Every process that registered is gone within timeout_ms.
static void
s_check_no_children (s_run_t *run, int timeout_ms, double *gone_ms)
{
    pid_t pids [S_MAX_PIDS];
    size_t n = 0, i;
    json_t *row;
    json_array_foreach (run->rows, i, row)
        if (harness_event_is (row, "registered") && n < S_MAX_PIDS)
            pids [n++] = (pid_t) s_int (row, "pid");
    //  At least the servers registered before anything could fail.
    assert_true (n >= 2);
    double t0 = ps_clock_ms ();
    int left = harness_wait_gone (pids, n, timeout_ms);
    if (gone_ms)
        *gone_ms = ps_clock_ms () - t0;
    if (left) {
        for (i = 0; i < n; i++)
            if (!harness_pid_gone (pids [i]))
                fprintf (stderr, "%s: process %d is still running\n", run->name, (int) pids [i]);
        fail_msg ("%s: %d of the %zu processes that registered are still running %d ms after "
                  "the coordinator ended", run->name, left, n, timeout_ms);
    }
}

//  ---------------------------------------------------------------------
//  The done record

static const char *s_cnn_vars [] = {
    "conv2d/kernel", "conv2d/bias", "dense/kernel", "dense/bias", "dense_1/kernel",
    "dense_1/bias",
};
#define S_CNN_VARS (sizeof s_cnn_vars / sizeof s_cnn_vars [0])
#define S_MAX_PARTS 16

//  The run completed: exit status 0, no "failed" event, one "done" record
//  with every one of total steps trained, every partition of every cnn
//  variable (each part of each variable exactly once over the servers)
//  updated exactly total times, and the record's counters agreeing with
//  the events: checkpoints, worker failures, recoveries, and the steps the
//  workers completed (total, plus the steps a recovery rewound, less the
//  steps a resumed checkpoint held). Returns the duplicate pushes summed
//  over the partitions.
static uint64_t
s_check_done (s_run_t *run, uint64_t total, int nservers)
{
    assert_int_equal (run->status, 0);
    s_check_logs (run);
    assert_int_equal (s_count (run->rows, "failed"), 0);
    assert_int_equal (s_count (run->rows, "done"), 1);
    json_t *done = s_find (run->rows, "done", -1);
    assert_non_null (done);
    //  Nothing comes after the done record.
    assert_int_equal (s_index_of (run->rows, done), json_array_size (run->rows) - 1);
    assert_int_equal (s_int (done, "steps"), total);
    assert_int_equal (s_int (done, "total"), total);
    //  The coordinator's own cross-check agrees.
    assert_true (json_is_true (json_object_get (done, "verified")));
    assert_int_equal (json_array_size (json_object_get (done, "mismatches")), 0);
    json_t *started = s_find (run->rows, "started", 0);
    assert_non_null (started);
    assert_int_equal (s_int (started, "total"), total);
    //  The events are in the order they happened.
    double time_s = 0;
    size_t i;
    json_t *row;
    json_array_foreach (run->rows, i, row) {
        if (s_real (row, "time_s") < time_s)
            fail_msg ("%s: event %zu (%s) has time_s %.6f, before the one ahead of it (%.6f)",
                      run->name, i, s_str (row, "event"), s_real (row, "time_s"), time_s);
        time_s = s_real (row, "time_s");
    }

    json_t *servers = json_object_get (done, "servers");
    assert_int_equal (json_array_size (servers), nservers);
    //  One update per step; in sync mode, one per round, as many on every
    //  partition as on the first, and at least a step per worker each.
    uint64_t updates_each = total;
    if (strcmp (s_str (done, "mode"), "sync") == 0) {
        json_t *first = json_array_get (json_object_get (json_array_get (servers, 0),
                                                         "partitions"), 0);
        assert_non_null (first);
        updates_each = (uint64_t) s_int (first, "updates");
        json_int_t workers = json_array_size (json_object_get (done, "worker_steps"));
        if (updates_each * (uint64_t) workers < total || updates_each > total)
            fail_msg ("%s: %" PRIu64 " updates of %" PRIu64 " steps by %lld workers: expected "
                      "one per round of at most a step per worker", run->name, updates_each,
                      total, (long long) workers);
        if (s_int (done, "recoveries") == 0)
            assert_int_equal (s_int (done, "rounds"), updates_each);
    }
    int seen [S_CNN_VARS][S_MAX_PARTS];
    memset (seen, 0, sizeof seen);
    uint64_t duplicates = 0;
    size_t s;
    json_t *server;
    json_array_foreach (servers, s, server) {
        assert_int_equal (s_int (server, "task"), s);
        if (json_object_get (server, "error"))
            fail_msg ("%s: ps:%zu: %s", run->name, s, s_str (server, "error"));
        json_t *parts = json_object_get (server, "partitions");
        assert_true (json_array_size (parts) > 0);
        json_int_t updates = 0, dups = 0;
        size_t p;
        json_t *part;
        json_array_foreach (parts, p, part) {
            const char *var = s_str (part, "var");
            json_int_t index = s_int (part, "part");
            size_t v = 0;
            while (v < S_CNN_VARS && strcmp (s_cnn_vars [v], var) != 0)
                v++;
            if (v == S_CNN_VARS || index < 0 || index >= S_MAX_PARTS)
                fail_msg ("%s: ps:%zu holds an unexpected partition %s part %lld", run->name, s,
                          var, (long long) index);
            seen [v][index]++;
            if (s_int (part, "updates") != (json_int_t) updates_each
            ||  s_int (part, "recorded") != (json_int_t) total)
                fail_msg ("%s: ps:%zu %s part %lld: %lld updates, %lld steps in its ledger, "
                          "expected %" PRIu64 " (every step applied exactly once)", run->name, s,
                          var, (long long) index, (long long) s_int (part, "updates"),
                          (long long) s_int (part, "recorded"), updates_each);
            assert_true (s_int (part, "duplicates") >= 0);
            updates += s_int (part, "updates");
            dups += s_int (part, "duplicates");
        }
        assert_int_equal (s_int (server, "updates"), updates);
        assert_int_equal (s_int (server, "duplicates"), dups);
        duplicates += (uint64_t) dups;
    }
    //  Each variable is split into parts 0..n-1, each held once.
    for (size_t v = 0; v < S_CNN_VARS; v++) {
        int parts = 0;
        while (parts < S_MAX_PARTS && seen [v][parts] == 1)
            parts++;
        if (parts == 0)
            fail_msg ("%s: no server holds %s", run->name, s_cnn_vars [v]);
        for (int p = parts; p < S_MAX_PARTS; p++)
            if (seen [v][p])
                fail_msg ("%s: %s part %d is held %d times, or parts before it are missing",
                          run->name, s_cnn_vars [v], p, seen [v][p]);
    }

    //  The counters agree with the events.
    assert_int_equal (s_int (done, "checkpoints"), s_count (run->rows, "checkpoint"));
    assert_int_equal (s_int (done, "worker_failures"),
                      s_count_match (run->rows, (s_match_t) { .event = "worker_failed",
                                                              .role = "worker", .task = -1 }));
    json_int_t recoveries = 0, lost = 0, resumed_at = 0;
    json_array_foreach (run->rows, i, row)
        if (harness_event_is (row, "recovered")) {
            if (strcmp (s_str (row, "reason"), "resuming") == 0)
                resumed_at += s_int (row, "step");
            else {
                recoveries++;
                lost += s_int (row, "steps_lost");
            }
        }
    assert_int_equal (s_int (done, "recoveries"), recoveries);
    json_t *steps = json_object_get (done, "worker_steps");
    json_int_t trained = 0;
    json_array_foreach (steps, i, row)
        trained += json_integer_value (row);
    if (trained != (json_int_t) total + lost - resumed_at)
        fail_msg ("%s: the workers completed %lld steps, expected %lld (total %" PRIu64 " + "
                  "%lld rewound - %lld resumed)", run->name, (long long) trained,
                  (long long) ((json_int_t) total + lost - resumed_at), total, (long long) lost,
                  (long long) resumed_at);
    double accuracy = s_real (done, "test_accuracy");
    assert_true (accuracy > 0 && accuracy <= 1);
    assert_true (s_real (done, "test_loss") > 0);
    return duplicates;
}

//  An ssp run's done record (mode: the run's mode flags; NULL, async, or
//  another mode than ssp: nothing to check) says how far ahead of the
//  slowest live worker each step started: never more than the bound, in a
//  histogram of 0 .. S that counts every step handed out (each of the
//  run's steps at least once).
static void
s_check_staleness (s_run_t *run, const char *const *mode)
{
    if (!s_has_arg (mode, "ssp"))
        return;
    json_int_t bound = -1;
    for (int i = 0; mode [i] && mode [i + 1]; i++)
        if (strcmp (mode [i], "--staleness") == 0)
            bound = strtoll (mode [i + 1], NULL, 10);
    assert_true (bound >= 0 && bound < 16);
    json_t *done = s_find (run->rows, "done", -1);
    assert_string_equal (s_str (done, "mode"), "ssp");
    json_t *staleness = json_object_get (done, "staleness");
    assert_int_equal (s_int (staleness, "bound"), bound);
    json_int_t widest = s_int (staleness, "max");
    json_t *histogram = json_object_get (staleness, "histogram");
    assert_int_equal (json_array_size (histogram), (size_t) bound + 1);
    json_int_t starts = 0, largest = 0;
    size_t d;
    json_t *count;
    json_array_foreach (histogram, d, count) {
        starts += json_integer_value (count);
        if (json_integer_value (count) > 0)
            largest = (json_int_t) d;
    }
    if (widest > bound || widest != largest || starts < s_int (done, "steps"))
        fail_msg ("%s: staleness %s: expected at most %lld ahead, the largest non-zero entry "
                  "of the histogram, and at least %lld starts", run->name,
                  json_dumps (staleness, JSON_COMPACT), (long long) bound,
                  (long long) s_int (done, "steps"));
}

//  A line for the log of the test run.
static void
s_summary (s_run_t *run, const char *fmt, ...)
{
    char text [512];
    va_list args;
    va_start (args, fmt);
    vsnprintf (text, sizeof text, fmt, args);
    va_end (args);
    printf ("[ cluster  ] %-28s %5.1f s  %s\n", run->name, run->wall_s, text);
    fflush (stdout);
}

//  The evaluation after epoch e + 1 (0-based e) is of the parameters once
//  that epoch's steps were all done: the steps done then, at least the
//  epoch's end (asynchronous workers may have finished a step or two of the
//  next epoch before the epoch's last). The last is after the last step.
static void
s_check_eval_step (const json_t *eval, int e, uint64_t per_epoch, uint64_t total)
{
    json_int_t step = s_int (eval, "step");
    uint64_t end = (uint64_t) (e + 1) * per_epoch;
    if (step < (json_int_t) end || step > (json_int_t) total
    ||  (end == total && step != (json_int_t) total))
        fail_msg ("the evaluation after epoch %d is at step %lld: expected %" PRIu64 " to %"
                  PRIu64, e + 1, (long long) step, end, end == total ? total : total - 1);
}

//  ---------------------------------------------------------------------
//  a. A local cluster trains

static void
test_local_run (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("local run");
    int limit = s_limit (6400), test_limit = s_test_limit (1000), epochs = 3;
    uint64_t per_epoch = s_steps_per_epoch (limit), total = per_epoch * (uint64_t) epochs;
    s_local_args (run, limit, test_limit, epochs);
    s_run_start (run, NULL);
    s_run_finish (run, 0);
    uint64_t duplicates = s_check_done (run, total, 2);
    //  A healthy run is not taken for a diverging one.
    assert_int_equal (s_count (run->rows, "diverging"), 0);
    assert_false (json_is_true (json_object_get (s_find (run->rows, "done", -1), "diverged")));
    assert_int_equal (duplicates, 0);
    json_t *rows = run->rows;
    json_t *started = s_find (rows, "started", 0);
    assert_int_equal (s_int (started, "steps_per_epoch"), per_epoch);
    assert_int_equal (s_int (started, "servers"), 2);
    assert_int_equal (s_int (started, "workers"), 2);
    //  Two servers and two workers registered, once each.
    for (int task = 0; task < 2; task++) {
        assert_int_equal (s_count_match (rows, s_ev ("registered", "ps", task)), 1);
        assert_int_equal (s_count_match (rows, s_ev ("registered", "worker", task)), 1);
    }
    assert_int_equal (s_count (rows, "registered"), 4);
    assert_int_equal (s_count (rows, "worker_failed") + s_count (rows, "server_failed")
                      + s_count (rows, "recovered"), 0);

    //  An evaluation after each epoch, of the whole test subset, by a
    //  worker; accuracy and loss improve from the first to the last.
    assert_int_equal (s_count (rows, "eval"), epochs);
    for (int e = 0; e < epochs; e++) {
        json_t *eval = s_find (rows, "eval", e);
        assert_int_equal (s_int (eval, "epoch"), e + 1);
        s_check_eval_step (eval, e, per_epoch, total);
        assert_int_equal (s_int (eval, "count"), test_limit);
        assert_string_equal (s_str (eval, "role"), "worker");
    }
    json_t *first = s_find (rows, "eval", 0), *last = s_find (rows, "eval", -1);
    double acc0 = s_real (first, "test_accuracy"), acc = s_real (last, "test_accuracy");
    //  Measured: 0.78 after one epoch, 0.83 after three (release build,
    //  6400 examples); smaller subsets learn less.
    double bound = s_scale >= 1 ? 0.75 : 0.6;
    if (!(acc > acc0 && acc > bound))
        fail_msg ("test accuracy %.4f after epoch 1, %.4f after epoch %d: expected a rise, "
                  "to above %.2f", acc0, acc, epochs, bound);
    assert_true (s_real (last, "test_loss") < s_real (first, "test_loss"));
    json_t *done = s_find (rows, "done", -1);
    assert_true (s_real (done, "test_accuracy") == acc);

    //  Progress: steps move forward within the run, the workers alive (both,
    //  once both have registered), and the training loss of the last window
    //  is below the first's.
    size_t nprogress = s_count (rows, "progress");
    assert_true (nprogress >= 2);
    json_int_t step = 0;
    for (size_t p = 0; p < nprogress; p++) {
        json_t *progress = s_find (rows, "progress", (int) p);
        assert_true (s_int (progress, "step") >= step);
        step = s_int (progress, "step");
        assert_true (step > 0 && step <= (json_int_t) total);
        assert_int_equal (s_int (progress, "total"), total);
        assert_true (s_int (progress, "epoch") >= 1 && s_int (progress, "epoch") <= epochs);
        assert_true (s_int (progress, "workers_alive") >= 1);
        assert_true (s_int (progress, "workers_alive") <= 2);
        assert_true (s_real (progress, "samples_per_s") > 0);
        assert_true (s_real (progress, "accuracy") >= 0 && s_real (progress, "accuracy") <= 1);
    }
    assert_int_equal (s_int (s_find (rows, "progress", -1), "workers_alive"), 2);
    double loss0 = s_real (s_find (rows, "progress", 0), "loss");
    double loss = s_real (s_find (rows, "progress", -1), "loss");
    if (!(loss < loss0))
        fail_msg ("training loss %.4f in the first window, %.4f in the last: expected a fall",
                  loss0, loss);
    //  The supervisor stopped every child before the coordinator exited.
    s_check_no_children (run, 0, NULL);
    s_summary (run, "%" PRIu64 " steps, %zu progress events, loss %.3f -> %.3f, test "
               "accuracy %.3f -> %.3f, %.0f samples/s", total, nprogress, loss0, loss, acc0,
               acc, s_real (done, "samples_per_s"));
    s_run_destroy (run);
}

//  ---------------------------------------------------------------------
//  b. A cluster started by hand

//  Start ps-server or ps-worker with args, env and a log in the run's
//  directory; the teardown kills it if the test fails.
static pid_t
s_start_task (s_run_t *run, const char *program, const char *const *args,
              const char *const *env, const char *name)
{
    const char *binary = getenv (program);
    if (!binary)
        fail_msg ("%s is not set", program);
    const char *argv [20] = { binary };
    int argc = 1;
    for (int i = 0; args && args [i] && argc < 17; i++)
        argv [argc++] = args [i];
    //  Secured by the test's keys unless the test says otherwise.
    if (!s_has_arg (args, "--insecure") && !s_has_arg (args, "--keys")) {
        argv [argc++] = "--keys";
        argv [argc++] = harness_keys ();
    }
    argv [argc] = NULL;
    char log [PATH_MAX + 80];
    snprintf (log, sizeof log, "%s/%s.log", run->dir, name);
    pid_t pid = harness_spawn (argv, env, log);
    assert_true (pid > 0);
    s_track_pid (pid);
    return pid;
}

//  With hang, worker:1 is stopped (SIGSTOP) within the run and resumed
//  only after the coordinator has exited: it never asks for work again, so
//  no answer "stop" reaches it, yet it must stop by itself (exit 0) once it
//  finds the coordinator silent, knowing from the coordinator's heartbeats
//  that the run finished, instead of waiting for a coordinator that has
//  gone. Started by hand, since a --local coordinator's children die with it.
static void
s_manual (bool files, bool hang)
{
    s_run_t *run = s_run_new (hang ? "by hand, a worker hung across the end"
                              : files ? "by hand, cluster files" : "by hand, TF_CONFIG");
    int ports [5];
    for (int i = 0; i < 5; i++) {
        bool taken;
        do {
            ports [i] = harness_free_port ();
            assert_true (ports [i] > 0);
            taken = false;
            for (int j = 0; j < i; j++)
                taken |= ports [j] == ports [i];
        } while (taken);
    }
    char cluster [512];
    snprintf (cluster, sizeof cluster, "{\"chief\": [\"127.0.0.1:%d\"], \"ps\": [\"127.0.0.1:%d\", "
              "\"127.0.0.1:%d\"], \"worker\": [\"127.0.0.1:%d\", \"127.0.0.1:%d\"]}", ports [0],
              ports [1], ports [2], ports [3], ports [4]);
    //  Each process's TF_CONFIG or file: the cluster and its own task.
    char specs [5][700], paths [5][PATH_MAX + 32], names [5][16];
    const char *types [5] = { "chief", "ps", "ps", "worker", "worker" };
    int indices [5] = { 0, 0, 1, 0, 1 };
    for (int t = 0; t < 5; t++) {
        snprintf (names [t], sizeof names [t], "%s%d", types [t], indices [t]);
        snprintf (specs [t], sizeof specs [t], "%s{\"cluster\": %s, \"task\": {\"type\": \"%s\", "
                  "\"index\": %d}}", files ? "" : "TF_CONFIG=", cluster, types [t], indices [t]);
        snprintf (paths [t], sizeof paths [t], "%s/%s.json", run->dir, names [t]);
        if (files)
            assert_int_equal (harness_write_file (paths [t], specs [t]), 0);
    }
    //  With files, TF_CONFIG holds something that is not JSON: every
    //  process must read its file, not the environment. The coordinator
    //  and the workers share one file that names no task (the workers say
    //  theirs with --task); ps-server has no --task, so each server has a
    //  file with its task.
    char shared [PATH_MAX + 32], tasks [2][32];
    snprintf (shared, sizeof shared, "%s/cluster.json", run->dir);
    char shared_text [600];
    snprintf (shared_text, sizeof shared_text, "{\"cluster\": %s}\n", cluster);
    if (files)
        assert_int_equal (harness_write_file (shared, shared_text), 0);
    const char *bad_env [] = { "TF_CONFIG=this is not JSON", NULL };
    pid_t pids [5];
    //  The workers first, then the servers, the coordinator last: the
    //  others wait for it.
    for (int t = 3; t < 5; t++) {
        snprintf (tasks [t - 3], sizeof tasks [t - 3], "worker:%d", indices [t]);
        const char *file_args [] = { "--cluster", shared, "--task", tasks [t - 3], NULL };
        const char *env [] = { specs [t], NULL };
        pids [t] = s_start_task (run, "PS_WORKER", files ? file_args : NULL,
                                 files ? bad_env : env, names [t]);
    }
    //  As documented for a cluster started by hand, every server's
    //  checkpoint root is the coordinator's checkpoint directory: the
    //  coordinator checkpoints at the start and at the end.
    char root [PATH_MAX + 32];
    snprintf (root, sizeof root, "%s/checkpoints", run->dir);
    for (int t = 1; t < 3; t++) {
        const char *file_args [] = { "--cluster", paths [t], "--threads", "0",
                                     "--checkpoint-root", root, NULL };
        const char *env_args [] = { "--threads", "0", "--checkpoint-root", root, NULL };
        const char *env [] = { specs [t], NULL };
        pids [t] = s_start_task (run, "PS_SERVER", files ? file_args : env_args,
                                 files ? bad_env : env, names [t]);
    }
    //  A hung worker is stopped after the first epoch's evaluation, with
    //  two more epochs to go.
    int limit = s_limit (6400), test_limit = s_test_limit (1000), epochs = hang ? 3 : 2;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    if (files)
        s_args (run, (const char *[]) { "--cluster", shared, NULL });
    s_args (run, (const char *[]) { "--checkpoint-dir", root, NULL });
    s_job_args (run, limit, test_limit, epochs);
    if (hang)
        s_heartbeat_args (run);
    const char *env [] = { specs [0], NULL };
    s_run_start (run, files ? bad_env : env);
    pids [0] = run->pid;
    double t_cont = 0;
    if (hang) {
        json_t *eval = s_wait_event (run, s_ev_min ("eval", NULL, -1, "epoch", 1), S_RUN_MS);
        json_decref (eval);
        assert_int_equal (kill (pids [4], SIGSTOP), 0);
    }
    s_run_finish (run, 0);
    if (hang) {
        if (!harness_running (pids [4])) {
            s_print_logs (run);
            fail_msg ("%s: worker:1 ended while stopped", run->name);
        }
        //  Past the coordinator's exit; the resumed worker's first look at
        //  the link finds only what was queued before.
        usleep (500 * 1000);
        t_cont = ps_clock_ms ();
        assert_int_equal (kill (pids [4], SIGCONT), 0);
    }
    //  Every server and worker ends on its own, with status 0: the
    //  coordinator told the workers to stop and shut the servers down.
    for (int t = 1; t < 5; t++) {
        int status = harness_wait_or_kill (pids [t], 20000);
        if (status != 0) {
            char log [PATH_MAX + 80];
            snprintf (log, sizeof log, "%s/%s.log", run->dir, names [t]);
            harness_print_log (log);
            fail_msg ("%s: %s exited with status %d (-1: still running 20 s after the "
                      "coordinator)", run->name, names [t], status);
        }
        for (int i = 0; i < S_MAX_PIDS; i++)
            if (s_extra_pids [i] == pids [t])
                s_extra_pids [i] = 0;
    }
    if (hang) {
        double stopped_after = ps_clock_ms () - t_cont;
        char log [PATH_MAX + 80];
        snprintf (log, sizeof log, "%s/%s.log", run->dir, names [4]);
        if (!harness_file_contains (log, "the coordinator finished the run and has gone")) {
            harness_print_log (log);
            fail_msg ("%s: worker:1 exited without saying that the run had finished", run->name);
        }
        //  Its step was handed to worker:0; its push after SIGCONT, if any,
        //  found the servers gone. Every step was still trained once.
        s_check_done (run, total, 2);
        s_summary (run, "%" PRIu64 " steps; worker:1 stopped after epoch 1, resumed after "
                   "the coordinator exited, stopped by itself %.0f ms later (heartbeat timeout "
                   "%d ms)", total, stopped_after, S_TIMEOUT_MS);
        s_run_destroy (run);
        return;
    }
    assert_int_equal (s_check_done (run, total, 2), 0);
    //  The processes that registered are the ones started here.
    for (int t = 1; t < 5; t++) {
        const char *role = t < 3 ? "ps" : "worker";
        json_t *row = s_find_match (run->rows, s_ev ("registered", role, indices [t]),
                                    -1);
        assert_non_null (row);
        assert_int_equal (s_int (row, "pid"), pids [t]);
        assert_false (json_is_true (json_object_get (row, "restarted")));
    }
    assert_int_equal (s_count (run->rows, "eval"), epochs);
    assert_true (s_count (run->rows, "checkpoint") >= 2);
    assert_int_equal (s_count (run->rows, "checkpoint_failed"), 0);
    json_t *done = s_find (run->rows, "done", -1);
    s_summary (run, "%" PRIu64 " steps, test accuracy %.3f, worker steps %lld + %lld", total,
               s_real (done, "test_accuracy"),
               (long long) json_integer_value (json_array_get (json_object_get (done,
                                               "worker_steps"), 0)),
               (long long) json_integer_value (json_array_get (json_object_get (done,
                                               "worker_steps"), 1)));
    s_run_destroy (run);
}

static void
test_manual_tfconfig (void **state)
{
    (void) state;
    s_manual (false, false);
}

static void
test_manual_files (void **state)
{
    (void) state;
    s_manual (true, false);
}

static void
test_manual_hung_worker (void **state)
{
    (void) state;
    s_manual (false, true);
}

//  ---------------------------------------------------------------------
//  c. A worker killed

static void
s_kill_worker (const char *name, bool restart, const char *const *mode)
{
    s_run_t *run = s_run_new (name);
    //  Sync's case is half as long, for the suite's time.
    int limit = s_limit (s_has_arg (mode, "sync") ? 6400 : 12800);
    int test_limit = s_test_limit (1000), epochs = 3;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    s_local_args (run, limit, test_limit, epochs);
    s_mode_args (run, mode);
    s_heartbeat_args (run);
    if (!restart)
        s_arg (run, "--no-restart");
    s_run_start (run, NULL);
    //  Mid-epoch: a sixth of the way in.
    json_t *progress = s_wait_event (run, s_ev_min ("progress", NULL, -1, "step",
                                                       (json_int_t) total / 6), S_RUN_MS);
    json_int_t at_step = s_int (progress, "step");
    json_decref (progress);
    pid_t victim = s_task_pid (run, "worker", 1);
    double t_kill = ps_clock_ms ();
    assert_int_equal (kill (victim, SIGKILL), 0);
    json_t *failed = s_wait_event (run, s_ev ("worker_failed", "worker", 1),
                                   S_EVENT_MS);
    double latency = ps_clock_ms () - t_kill;
    //  The supervisor sees the death at once, before the heartbeat timeout
    //  would: the reason says which of the two declared it (the time it
    //  took, in the summary, depends on the load).
    char reason [128];
    snprintf (reason, sizeof reason, "process %d killed by signal %d", (int) victim, SIGKILL);
    assert_string_equal (s_str (failed, "reason"), reason);
    json_int_t released = s_int (failed, "steps_released");
    json_decref (failed);
    pid_t again = 0;
    if (restart) {
        json_t *back = s_wait_event (run, s_ev_min ("registered", "worker", 1, "restarted", 1),
                                    S_EVENT_MS);
        again = (pid_t) s_int (back, "pid");
        assert_true (again != victim);
        json_decref (back);
    }
    s_run_finish (run, 0);
    uint64_t duplicates = s_check_done (run, total, 2);
    json_t *done = s_find (run->rows, "done", -1);
    assert_int_equal (s_int (done, "worker_failures"), 1);
    json_t *fail_event = s_find (run->rows, "worker_failed", 0);
    size_t after = s_index_of (run->rows, fail_event);
    if (!restart) {
        //  Nobody came back, and the progress after the failure counts one
        //  worker; the other did every step from then on.
        assert_int_equal (s_count (run->rows, "registered"), 4);
        size_t i;
        json_t *row;
        json_array_foreach (run->rows, i, row)
            if (i > after && harness_event_is (row, "progress"))
                assert_int_equal (s_int (row, "workers_alive"), 1);
    }
    else {
        assert_int_equal (s_count_match (run->rows, s_ev ("registered", "worker", 1)),
                          2);
        assert_true (harness_pid_gone (again));
    }
    assert_true (harness_pid_gone (victim));
    s_check_staleness (run, mode);
    s_check_no_children (run, 0, NULL);
    s_summary (run, "%" PRIu64 " steps, killed at step %lld, detected in %.0f ms, %lld step%s "
               "released, %" PRIu64 " duplicate pushes", total, (long long) at_step, latency,
               (long long) released, released == 1 ? "" : "s", duplicates);
    s_run_destroy (run);
}

//  A short ssp run in lockstep (S = 0): it trains every step once, and no
//  step starts ahead of the slowest worker.
static void
test_ssp_run (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("ssp run, staleness 0");
    int limit = s_limit (3200), test_limit = s_test_limit (1000), epochs = 2;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    const char *const lockstep [] = { "--mode", "ssp", "--staleness", "0", NULL };
    s_local_args (run, limit, test_limit, epochs);
    s_mode_args (run, lockstep);
    s_run_start (run, NULL);
    s_run_finish (run, 0);
    s_check_done (run, total, 2);
    s_check_staleness (run, lockstep);
    json_t *done = s_find (run->rows, "done", -1);
    json_t *histogram = json_object_get (json_object_get (done, "staleness"), "histogram");
    s_check_no_children (run, 0, NULL);
    s_summary (run, "%" PRIu64 " steps, %lld started level with the slowest worker", total,
               (long long) json_integer_value (json_array_get (histogram, 0)));
    s_run_destroy (run);
}

static void
test_kill_worker_no_restart (void **state)
{
    (void) state;
    s_kill_worker ("kill -9 worker, no restart", false, NULL);
}

static void
test_kill_worker_restart (void **state)
{
    (void) state;
    s_kill_worker ("kill -9 worker, restart", true, NULL);
}

//  Under ssp the killed worker leaves the clock, so the survivor is never
//  held for it, and its restarted process joins the clock again.
static void
test_ssp_kill_worker (void **state)
{
    (void) state;
    s_kill_worker ("ssp: kill -9 worker, restart", true, s_ssp_args);
}

//  ---------------------------------------------------------------------
//  d. A worker stopped past the heartbeat timeout

//  Wait for the stopped worker to be back: an event after the one at
//  index `after`, either "rejoined" (its heartbeat came back) or a
//  registration of the same process (its link gave up on the coordinator
//  while stopped and registered again). Returns the event's name.
static const char *
s_wait_back (s_run_t *run, size_t after, pid_t pid, int timeout_ms)
{
    s_match_t rejoined = s_ev ("rejoined", "worker", 1);
    s_match_t registered = s_ev ("registered", "worker", 1);
    double deadline = ps_clock_ms () + timeout_ms;
    while (true) {
        bool ended = !s_running (run);
        json_t *rows = harness_jsonl_read (run->metrics);
        assert_non_null (rows);
        size_t i;
        json_t *row;
        json_array_foreach (rows, i, row)
            if (i > after && (s_match (row, &rejoined)
                              || (s_match (row, &registered) && s_int (row, "pid") == pid))) {
                const char *how = s_match (row, &rejoined) ? "rejoined" : "registered again";
                json_decref (rows);
                return how;
            }
        json_decref (rows);
        if (ended || ps_clock_ms () > deadline) {
            s_print_logs (run);
            fail_msg ("worker:1 did not come back within %d ms of SIGCONT", timeout_ms);
        }
        usleep (5000);
    }
}

//  Under ssp or sync, wait while worker:1 is stopped (declared failed at
//  event index failed_at) for the steps done to pass, by more than twice
//  the ssp bound, the last progress before: had it stayed in the clock,
//  the other worker would be held within S + 1 steps of it; had it stayed
//  in sync's rounds, no round would close.
static void
s_wait_clock_moves (s_run_t *run, size_t failed_at)
{
    json_t *rows = harness_jsonl_read (run->metrics);
    assert_non_null (rows);
    json_int_t before = 0;
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row)
        if (i < failed_at && harness_event_is (row, "progress"))
            before = s_int (row, "step");
    json_decref (rows);
    json_decref (s_wait_event (run, s_ev_min ("progress", NULL, -1, "step",
                                              before + 2 * (S_STALENESS + 1) + 2), S_EVENT_MS));
}

static void
s_stop_worker (const char *name, const char *const *mode)
{
    s_run_t *run = s_run_new (name);
    int limit = s_limit (12800), test_limit = s_test_limit (1000), epochs = 4;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    s_local_args (run, limit, test_limit, epochs);
    s_mode_args (run, mode);
    s_heartbeat_args (run);
    s_run_start (run, NULL);
    //  The worker must be stopped in its training loop, holding a step:
    //  after it has its plan, model and data (its log says so once it
    //  registered), and right after a progress event, when both workers
    //  are in the middle of steps. The step it holds goes to the other
    //  worker when it is declared failed, and its push of that step after
    //  SIGCONT comes too late: a duplicate on every partition it reaches.
    char worker_log [PATH_MAX + 32];
    snprintf (worker_log, sizeof worker_log, "%s/worker1.log", run->log_dir);
    double deadline = ps_clock_ms () + S_RUN_MS;
    while (!harness_file_contains (worker_log, "registered with the coordinator")) {
        if (ps_clock_ms () > deadline || !s_running (run)) {
            s_print_logs (run);
            fail_msg ("worker:1 did not say that it registered");
        }
        usleep (10000);
    }
    json_t *progress = s_wait_event (run, s_ev_min ("progress", NULL, -1, "step",
                                                       (json_int_t) total / 8), S_RUN_MS);
    json_decref (progress);
    json_t *rows = harness_jsonl_read (run->metrics);
    assert_non_null (rows);
    size_t seen = s_count (rows, "progress");
    json_decref (rows);
    while ((rows = harness_jsonl_read (run->metrics)) && s_count (rows, "progress") == seen) {
        json_decref (rows);
        usleep (5000);
    }
    json_int_t at_step = s_int (s_find (rows, "progress", -1), "step");
    json_decref (rows);
    pid_t victim = s_task_pid (run, "worker", 1);
    double t_stop = ps_clock_ms ();
    assert_int_equal (kill (victim, SIGSTOP), 0);
    json_t *failed = s_wait_event (run, s_ev ("worker_failed", "worker", 1),
                                   S_EVENT_MS);
    double latency = ps_clock_ms () - t_stop;
    double silent = s_real (failed, "silent_ms");
    json_int_t released = s_int (failed, "steps_released");
    assert_non_null (strstr (s_str (failed, "reason"), "no heartbeat"));
    json_decref (failed);
    rows = harness_jsonl_read (run->metrics);
    assert_non_null (rows);
    size_t failed_at = s_index_of (rows, s_find_match (rows, s_ev ("worker_failed", "worker",
                                                                   1), 0));
    json_decref (rows);
    //  Declared failed by the heartbeat timeout: not before it, on the
    //  coordinator's clock (when the worker went silent, by the test's
    //  clock, depends on how its link thread was scheduled before the
    //  stop), and before the default timeout of 3 s would have run out, so
    //  that a coordinator which ignored --heartbeat-timeout-ms fails. The
    //  coordinator checks every 50 ms; only its not being scheduled for 2 s
    //  could make it that late.
    if (silent < S_TIMEOUT_MS || silent >= S_DEFAULT_TIMEOUT_MS)
        fail_msg ("worker declared failed after %.0f ms of silence (%.0f ms after SIGSTOP): "
                  "expected past the %d ms timeout, and before the default %d ms", silent,
                  latency, S_TIMEOUT_MS, S_DEFAULT_TIMEOUT_MS);
    if (released < 1)
        fail_msg ("the stopped worker held no step (steps_released 0): it was not training");
    if (mode)
        s_wait_clock_moves (run, failed_at);
    usleep (1000 * 1000);
    if (!s_running (run)) {
        kill (victim, SIGCONT);
        fail_msg ("the run ended while the worker was stopped: make it longer");
    }
    double t_cont = ps_clock_ms ();
    assert_int_equal (kill (victim, SIGCONT), 0);
    const char *how = s_wait_back (run, failed_at, victim, S_EVENT_MS);
    double rejoin = ps_clock_ms () - t_cont;
    s_run_finish (run, 0);
    uint64_t duplicates = s_check_done (run, total, 2);
    //  The late push was refused by the servers' ledgers: duplicates, and
    //  still exactly total updates everywhere (checked above). A sync
    //  worker may push nothing late: it pulls before every step and, between
    //  rounds, waits for the answer that hands it the next step; stopped in
    //  one of those waits it can wake to find that step given up (about one
    //  run in ten here), and exactly once is then all there is to see.
    if (duplicates == 0 && !s_has_arg (mode, "sync")) {
        s_print_logs (run);
        fail_msg ("no duplicate push: the stopped worker's step was not pushed late, or was "
                  "applied twice");
    }
    //  The same process came back: no new incarnation.
    assert_int_equal (s_count_match (run->rows, s_ev_min ("registered", "worker", 1,
                                                          "restarted", 1)), 0);
    assert_int_equal (s_int (s_find (run->rows, "done", -1), "worker_failures"), 1);
    s_check_staleness (run, mode);
    s_check_no_children (run, 0, NULL);
    s_summary (run, "%" PRIu64 " steps, stopped at step %lld, declared failed after %.0f ms "
               "(silent %.0f ms), %lld step%s released, back %.0f ms after SIGCONT (%s), %"
               PRIu64 " duplicate pushes", total, (long long) at_step, latency, silent,
               (long long) released, released == 1 ? "" : "s", rejoin, how, duplicates);
    s_run_destroy (run);
}

static void
test_stop_worker (void **state)
{
    (void) state;
    s_stop_worker ("SIGSTOP worker", NULL);
}

//  Under ssp the stopped worker, declared failed, leaves the clock: the
//  other goes on past the bound while it is stopped, and it joins the
//  clock again once it is back.
static void
test_ssp_stop_worker (void **state)
{
    (void) state;
    s_stop_worker ("ssp: SIGSTOP worker", s_ssp_args);
}

//  ---------------------------------------------------------------------
//  e. A server killed

//  A server killed a third of the way into a run of mode (NULL: the
//  default) recovers from the newest checkpoint.
static void
s_kill_server (const char *name, const char *const *mode)
{
    s_run_t *run = s_run_new (name);
    //  Sync's case is half as long, for the suite's time.
    int limit = s_limit (s_has_arg (mode, "sync") ? 6400 : 12800);
    int test_limit = s_test_limit (1000), epochs = 3;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    s_local_args (run, limit, test_limit, epochs);
    s_mode_args (run, mode);
    s_heartbeat_args (run);
    s_arg (run, "--checkpoint-steps");
    s_arg (run, "%" PRIu64, total / 6);
    s_run_start (run, NULL);
    //  A third of the way in, a few steps after the checkpoint there (the
    //  next is a sixth of the run away). Not during a checkpoint: a server
    //  that dies while the coordinator waits for its snapshot stalls the
    //  coordinator for its 30 s client timeout (a known limitation).
    json_t *ckpt = s_wait_event (run, s_ev_min ("checkpoint", NULL, -1, "step",
                                                (json_int_t) total / 3), S_RUN_MS);
    json_int_t at_step = s_int (ckpt, "step");
    json_decref (ckpt);
    usleep (50 * 1000);
    json_t *rows;
    pid_t victim = s_task_pid (run, "ps", 1);
    double t_kill = ps_clock_ms ();
    assert_int_equal (kill (victim, SIGKILL), 0);
    json_t *failed = s_wait_event (run, s_ev ("server_failed", NULL, 1), S_EVENT_MS);
    double latency = ps_clock_ms () - t_kill;
    char reason [128];
    snprintf (reason, sizeof reason, "process %d killed by signal %d", (int) victim, SIGKILL);
    assert_string_equal (s_str (failed, "reason"), reason);
    json_decref (failed);
    json_t *recovered = s_wait_event (run, s_ev ("recovered", NULL, -1), S_EVENT_MS);
    //  One failure, one event: the restart that follows is a "registered"
    //  event, not a second failure.
    double recovery = ps_clock_ms () - t_kill;
    json_decref (recovered);
    s_run_finish (run, 0);
    //  Restored counters plus the rewound steps trained once more: exactly
    //  total updates on every partition, and no duplicates.
    assert_int_equal (s_check_done (run, total, 2), 0);
    rows = run->rows;
    assert_int_equal (s_count (rows, "server_failed"), 1);
    assert_int_equal (s_count (rows, "recovered"), 1);
    recovered = s_find (rows, "recovered", 0);
    assert_string_equal (s_str (recovered, "reason"), "recovering from a server failure");
    //  A new generation: work handed out before the restore is told apart.
    assert_true (s_int (recovered, "generation") > 0);
    //  It restored the newest checkpoint written before it.
    ckpt = NULL;
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        if (row == recovered)
            break;
        if (harness_event_is (row, "checkpoint"))
            ckpt = row;
    }
    assert_non_null (ckpt);
    assert_string_equal (s_str (recovered, "checkpoint"), s_str (ckpt, "dir"));
    assert_int_equal (s_int (recovered, "step"), s_int (ckpt, "step"));
    assert_true (s_int (ckpt, "step") >= (json_int_t) total / 6);
    json_int_t lost = s_int (recovered, "steps_lost");
    assert_true (lost >= 0);
    //  The server was restarted as a new incarnation; the failure is in
    //  the record.
    json_t *back = s_find_match (rows, s_ev_min ("registered", "ps", 1, "restarted", 1), 0);
    assert_non_null (back);
    assert_true (s_int (back, "pid") != victim);
    assert_true (s_index_of (rows, back) < s_index_of (rows, recovered));
    assert_int_equal (s_int (s_find (rows, "done", -1), "recoveries"), 1);
    assert_int_equal (s_int (s_find (rows, "done", -1), "worker_failures"), 0);
    s_check_staleness (run, mode);
    s_check_no_children (run, 0, NULL);
    s_summary (run, "%" PRIu64 " steps, killed 50 ms after checkpoint %lld, detected in %.0f ms, "
               "recovered from step %lld in %.0f ms, %lld steps trained again", total,
               (long long) at_step,
               latency, (long long) s_int (recovered, "step"), recovery, (long long) lost);
    s_run_destroy (run);
}

static void
test_kill_server (void **state)
{
    (void) state;
    s_kill_server ("kill -9 server", NULL);
}

//  Under ssp a failed server is recovered as in async: the clock, which
//  counts the workers' completions, does not hold the restored run back.
static void
test_ssp_kill_server (void **state)
{
    (void) state;
    s_kill_server ("ssp: kill -9 server", s_ssp_args);
}

//  ---------------------------------------------------------------------
//  f. The coordinator killed, then resumed

//  The newest ckpt-* directory in root (empty when none); count gets how
//  many there are. Names sort by step (a fixed number of digits).
static void
s_checkpoints (const char *root, char names [][64], int max, int *count)
{
    *count = 0;
    DIR *dir = opendir (root);
    assert_non_null (dir);
    struct dirent *entry;
    while ((entry = readdir (dir)))
        if (strncmp (entry->d_name, "ckpt-", 5) == 0 && !strchr (entry->d_name, '.')
        &&  *count < max)
            snprintf (names [(*count)++], 64, "%.63s", entry->d_name);
    closedir (dir);
    //  Sort, oldest first.
    for (int i = 1; i < *count; i++)
        for (int j = i; j > 0 && strcmp (names [j - 1], names [j]) > 0; j--) {
            char swap [64];
            memcpy (swap, names [j], 64);
            memcpy (names [j], names [j - 1], 64);
            memcpy (names [j - 1], swap, 64);
        }
}

static void
test_kill_coordinator_resume (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("kill -9 coordinator");
    char root [PATH_MAX];
    snprintf (root, sizeof root, "%s/checkpoints", run->dir);
    int limit = s_limit (12800), test_limit = s_test_limit (1000), epochs = 3;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    s_local_args (run, limit, test_limit, epochs);
    s_heartbeat_args (run);
    s_args (run, (const char *[]) { "--checkpoint-dir", root, NULL });
    s_arg (run, "--checkpoint-steps");
    s_arg (run, "%" PRIu64, total / 6);
    //  The same command resumes, with --resume.
    int base_argc = run->argc;
    s_run_start (run, NULL);
    json_t *ckpt = s_wait_event (run, s_ev_min ("checkpoint", NULL, -1, "step",
                                                   (json_int_t) total / 3), S_RUN_MS);
    json_int_t ckpt_step = s_int (ckpt, "step");
    json_decref (ckpt);
    pid_t coordinator = run->pid;
    double t_kill = ps_clock_ms ();
    assert_int_equal (kill (coordinator, SIGKILL), 0);
    run->status = harness_wait (coordinator, 5000);
    run->pid = 0;
    run->wall_s = (ps_clock_ms () - run->start_ms) / 1e3;
    assert_int_equal (run->status, 128 + SIGKILL);
    run->rows = harness_jsonl_read (run->metrics);
    assert_non_null (run->rows);
    //  PR_SET_PDEATHSIG: every child dies with the coordinator, within 2 s.
    s_check_no_children (run, (int) (2000 - (ps_clock_ms () - t_kill)), NULL);
    double gone_ms = ps_clock_ms () - t_kill;
    s_check_logs (run);
    assert_int_equal (s_count (run->rows, "done"), 0);

    //  Resume: the newest checkpoint there is (the coordinator may have
    //  written one more after the event we saw).
    char names [16][64];
    int count;
    s_checkpoints (root, names, 16, &count);
    assert_true (count >= 1);
    char newest [PATH_MAX + 64];
    snprintf (newest, sizeof newest, "%s/%s", root, names [count - 1]);
    json_int_t newest_step = strtoll (names [count - 1] + 5, NULL, 10);
    assert_true (newest_step >= ckpt_step);
    s_run_t *resumed = s_run_new ("resume after kill -9");
    for (int i = 1; i < base_argc; i++)
        if (strcmp (run->argv [i], run->metrics) == 0)
            s_arg (resumed, "%s", resumed->metrics);
        else
        if (strcmp (run->argv [i], run->log_dir) == 0)
            s_arg (resumed, "%s", resumed->log_dir);
        else
            s_arg (resumed, "%s", run->argv [i]);
    s_arg (resumed, "--resume");
    s_run_start (resumed, NULL);
    s_run_finish (resumed, 0);
    //  Nothing after the checkpoint is trained twice: exactly total
    //  updates per partition, no duplicates, and the workers completed
    //  exactly the steps the checkpoint had not.
    assert_int_equal (s_check_done (resumed, total, 2), 0);
    assert_int_equal (s_count (resumed->rows, "recovered"), 1);
    json_t *recovered = s_find (resumed->rows, "recovered", 0);
    assert_string_equal (s_str (recovered, "reason"), "resuming");
    assert_string_equal (s_str (recovered, "checkpoint"), newest);
    assert_int_equal (s_int (recovered, "step"), newest_step);
    json_t *started = s_find (resumed->rows, "started", 0);
    assert_true (s_index_of (resumed->rows, recovered) < s_index_of (resumed->rows, started));
    s_check_no_children (resumed, 0, NULL);
    s_summary (run, "%" PRIu64 " steps, killed after checkpoint %lld, it and its children gone "
               "in %.0f ms",
               total, (long long) ckpt_step, gone_ms);
    s_summary (resumed, "resumed from step %lld, trained the other %lld",
               (long long) newest_step, (long long) (total - (uint64_t) newest_step));

    //  --resume with no checkpoint: a clear failure, naming the directory,
    //  before anything is started (exit 2, a mistake in the command).
    s_run_t *empty = s_run_new ("resume, no checkpoint");
    char none [PATH_MAX + 16];
    snprintf (none, sizeof none, "%s/none", empty->dir);
    assert_int_equal (mkdir (none, 0755), 0);
    s_local_args (empty, limit, test_limit, epochs);
    s_args (empty, (const char *[]) { "--checkpoint-dir", none, "--resume", NULL });
    s_run_start (empty, NULL);
    s_run_finish (empty, 2);
    char message [PATH_MAX + 128];
    snprintf (message, sizeof message, "checkpoint directory %s: no usable checkpoint to "
              "resume from", none);
    if (!harness_file_contains (empty->log, message)) {
        harness_print_log (empty->log);
        fail_msg ("the coordinator does not say: %s", message);
    }
    //  No run began: nothing registered, nothing was written.
    assert_int_equal (json_array_size (empty->rows), 0);
    s_check_logs (empty);
    s_summary (empty, "refused: %s", message);
    s_run_destroy (run);
    s_run_destroy (resumed);
    s_run_destroy (empty);
}

//  ---------------------------------------------------------------------
//  g. Damaged checkpoints

//  The largest snapshot file in a checkpoint directory.
static void
s_largest_snap (const char *ckpt, char *path, size_t len)
{
    DIR *dir = opendir (ckpt);
    assert_non_null (dir);
    struct dirent *entry;
    off_t largest = -1;
    while ((entry = readdir (dir))) {
        size_t n = strlen (entry->d_name);
        if (n < 5 || strcmp (entry->d_name + n - 5, ".snap") != 0)
            continue;
        char candidate [PATH_MAX + 300];
        snprintf (candidate, sizeof candidate, "%s/%s", ckpt, entry->d_name);
        struct stat st;
        if (stat (candidate, &st) == 0 && st.st_size > largest) {
            largest = st.st_size;
            snprintf (path, len, "%s", candidate);
        }
    }
    closedir (dir);
    assert_true (largest > 0);
}

static void
s_truncate_half (const char *path)
{
    struct stat st;
    assert_int_equal (stat (path, &st), 0);
    assert_true (st.st_size > 16);
    assert_int_equal (truncate (path, st.st_size / 2), 0);
}

//  Resume the job in root after damage to the newest checkpoint: the run
//  warns about it, resumes from the one before and completes.
static void
s_resume_damaged (const char *name, const char *root, int limit, int test_limit, int epochs,
                  uint64_t total, const char *damaged, const char *expect)
{
    s_run_t *run = s_run_new (name);
    s_local_args (run, limit, test_limit, epochs);
    s_args (run, (const char *[]) { "--checkpoint-dir", root, "--keep", "3", "--resume", NULL });
    s_arg (run, "--checkpoint-steps");
    s_arg (run, "%" PRIu64, total / 4);
    s_run_start (run, NULL);
    s_run_finish (run, 0);
    char warning [PATH_MAX + 64];
    snprintf (warning, sizeof warning, "checkpoint %s is not usable", damaged);
    if (!harness_file_contains (run->log, warning)) {
        harness_print_log (run->log);
        fail_msg ("the coordinator does not warn: %s", warning);
    }
    assert_int_equal (s_check_done (run, total, 2), 0);
    json_t *recovered = s_find (run->rows, "recovered", 0);
    assert_non_null (recovered);
    assert_string_equal (s_str (recovered, "reason"), "resuming");
    assert_string_equal (s_str (recovered, "checkpoint"), expect);
    s_summary (run, "skipped %s, resumed from %s", strrchr (damaged, '/') + 1,
               strrchr (expect, '/') + 1);
    s_run_destroy (run);
}

static void
test_damaged_checkpoint (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("checkpoints, keep 3");
    char root [PATH_MAX];
    snprintf (root, sizeof root, "%s/checkpoints", run->dir);
    int limit = s_limit (6400), test_limit = s_test_limit (1000), epochs = 2;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    s_local_args (run, limit, test_limit, epochs);
    s_args (run, (const char *[]) { "--checkpoint-dir", root, "--keep", "3", NULL });
    s_arg (run, "--checkpoint-steps");
    s_arg (run, "%" PRIu64, total / 4);
    s_run_start (run, NULL);
    s_run_finish (run, 0);
    assert_int_equal (s_check_done (run, total, 2), 0);
    //  Five checkpoints were written (the initial state, every quarter);
    //  the newest three are kept, the last holding the finished run.
    assert_true (s_count (run->rows, "checkpoint") >= 4);
    char names [16][64];
    int count;
    s_checkpoints (root, names, 16, &count);
    assert_int_equal (count, 3);
    char newest [PATH_MAX + 64], before [PATH_MAX + 64], path [2 * PATH_MAX];
    snprintf (newest, sizeof newest, "%s/%s", root, names [2]);
    snprintf (before, sizeof before, "%s/%s", root, names [1]);
    assert_string_equal (s_str (s_find (run->rows, "checkpoint", -1), "dir"), newest);
    assert_int_equal (strtoll (names [2] + 5, NULL, 10), total);
    s_summary (run, "%" PRIu64 " steps, %zu checkpoints written, kept %s %s %s", total,
               s_count (run->rows, "checkpoint"), names [0], names [1], names [2]);

    //  A snapshot file of the newest cut in half.
    s_largest_snap (newest, path, sizeof path);
    s_truncate_half (path);
    s_resume_damaged ("truncated snapshot file", root, limit, test_limit, epochs, total, newest,
                      before);
    //  That run wrote the final checkpoint anew; now its manifest is cut.
    s_checkpoints (root, names, 16, &count);
    assert_int_equal (count, 3);
    snprintf (newest, sizeof newest, "%s/%s", root, names [2]);
    snprintf (before, sizeof before, "%s/%s", root, names [1]);
    assert_int_equal (strtoll (names [2] + 5, NULL, 10), total);
    snprintf (path, sizeof path, "%s/MANIFEST.json", newest);
    s_truncate_half (path);
    s_resume_damaged ("truncated manifest", root, limit, test_limit, epochs, total, newest,
                      before);

    //  The checkpoints belong to this job: resuming another batch size
    //  fails, naming the checkpoint and the key, and trains nothing.
    s_run_t *other = s_run_new ("resume, another job");
    s_local_args (other, limit, test_limit, epochs);
    s_args (other, (const char *[]) { "--checkpoint-dir", root, "--batch", "32", "--resume",
                                      NULL });
    s_run_start (other, NULL);
    s_run_finish (other, 1);
    s_check_logs (other);
    if (!harness_file_contains (other->log, "was written by a job with another batch_size")
    ||  !harness_file_contains (other->log, root)) {
        harness_print_log (other->log);
        fail_msg ("resuming with another batch size: no message naming the checkpoint and "
                  "batch_size");
    }
    assert_int_equal (s_count (other->rows, "done") + s_count (other->rows, "progress"), 0);
    assert_int_equal (s_count (other->rows, "failed"), 1);
    s_check_no_children (other, 0, NULL);
    s_summary (other, "refused: another batch_size");
    s_run_destroy (other);
    s_run_destroy (run);
}

//  ---------------------------------------------------------------------
//  h. An evaluator

static void
test_evaluator (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("local run with evaluator");
    int limit = s_limit (6400), test_limit = s_test_limit (1000), epochs = 2;
    uint64_t per_epoch = s_steps_per_epoch (limit), total = per_epoch * (uint64_t) epochs;
    s_local_args (run, limit, test_limit, epochs);
    s_arg (run, "--evaluator");
    s_run_start (run, NULL);
    s_run_finish (run, 0);
    assert_int_equal (s_check_done (run, total, 2), 0);
    assert_int_equal (s_count_match (run->rows, s_ev ("registered", "evaluator", 0)), 1);
    assert_int_equal (s_count (run->rows, "registered"), 5);
    //  Every evaluation, after each epoch, came from the evaluator; the
    //  workers only trained.
    assert_int_equal (s_count (run->rows, "eval"), epochs);
    for (int e = 0; e < epochs; e++) {
        json_t *eval = s_find (run->rows, "eval", e);
        assert_string_equal (s_str (eval, "role"), "evaluator");
        assert_int_equal (s_int (eval, "task"), 0);
        assert_int_equal (s_int (eval, "epoch"), e + 1);
        s_check_eval_step (eval, e, per_epoch, total);
        assert_int_equal (s_int (eval, "count"), test_limit);
    }
    json_t *last = s_find (run->rows, "eval", -1);
    assert_true (s_real (s_find (run->rows, "done", -1), "test_accuracy")
                 == s_real (last, "test_accuracy"));
    s_check_no_children (run, 0, NULL);
    s_summary (run, "%" PRIu64 " steps, %d evaluations by evaluator:0, test accuracy %.3f",
               total, epochs, s_real (last, "test_accuracy"));
    s_run_destroy (run);
}

//  ---------------------------------------------------------------------
//  i. Strangers and liars: processes that speak the protocol to the
//  coordinator but do not do what they say. However they lie, the run
//  trains every step exactly once, or fails and says what is wrong.

//  A hand-made peer of the coordinator or of a server: one DEALER socket,
//  the codec, and nothing of a real worker.
typedef struct {
    void *ctx;
    void *dealer;
    ps_curve_t *curve;
    ps_msg_t *msg;
    ps_writer_t writer;
    uint64_t next_id;
} s_rogue_t;

//  How a rogue connects: with the key of a task of the cluster (an
//  insider), with a key the cluster does not know, or without CURVE.
typedef enum { S_KEY_TASK, S_KEY_STRANGER, S_KEY_NONE } s_key_t;

//  Connect to endpoint, served by task server ("chief:0", "ps:1"), as
//  described by key (with task's key for S_KEY_TASK).
static void
s_rogue_open (s_rogue_t *rogue, const char *endpoint, const char *server, s_key_t key,
              const char *task)
{
    memset (rogue, 0, sizeof *rogue);
    rogue->ctx = zmq_ctx_new ();
    assert_non_null (rogue->ctx);
    rogue->dealer = zmq_socket (rogue->ctx, ZMQ_DEALER);
    assert_non_null (rogue->dealer);
    int linger = 0;
    assert_int_equal (zmq_setsockopt (rogue->dealer, ZMQ_LINGER, &linger, sizeof linger), 0);
    ps_error_t err;
    if (key == S_KEY_TASK) {
        rogue->curve = harness_curve (task);
        assert_int_equal (ps_curve_client (rogue->curve, rogue->dealer, server, &err), 0);
    }
    else
    if (key == S_KEY_STRANGER) {
        //  A stranger knows the server's public key (it is public) but
        //  holds a key pair of its own.
        char path [PATH_MAX];
        snprintf (path, sizeof path, "%s/public/%s.cert", harness_keys (), server);
        *strchr (strrchr (path, '/'), ':') = '-';
        zcert_t *server_cert = zcert_load (path);
        assert_non_null (server_cert);
        zcert_t *mine = zcert_new ();
        assert_non_null (mine);
        assert_int_equal (zmq_setsockopt (rogue->dealer, ZMQ_CURVE_SERVERKEY,
                                          zcert_public_key (server_cert), 32), 0);
        zcert_apply (mine, rogue->dealer);
        zcert_destroy (&mine);
        zcert_destroy (&server_cert);
    }
    assert_int_equal (zmq_connect (rogue->dealer, endpoint), 0);
    rogue->msg = ps_msg_new ();
    ps_writer_init (&rogue->writer, "heartbeat", 0, 0);
    rogue->next_id = 1;
}

static void
s_rogue_close (s_rogue_t *rogue)
{
    ps_msg_destroy (&rogue->msg);
    ps_writer_fini (&rogue->writer);
    assert_int_equal (zmq_close (rogue->dealer), 0);
    assert_int_equal (zmq_ctx_term (rogue->ctx), 0);
}

//  Encode msg, with the rogue's next id, and send it.
static void
s_rogue_send (s_rogue_t *rogue, ps_proto_t *msg)
{
    msg->id = rogue->next_id++;
    ps_writer_encode (&rogue->writer, msg);
    ps_error_t err;
    if (ps_writer_send (&rogue->writer, rogue->dealer, NULL, 0, NULL, 0, &err) != 0)
        fail_msg ("rogue: send: %s", err.msg);
}

//  The next message from the coordinator within timeout_ms, decoded, or
//  NULL at the deadline.
static const ps_proto_t *
s_rogue_recv (s_rogue_t *rogue, int timeout_ms)
{
    zmq_pollitem_t item = { rogue->dealer, 0, ZMQ_POLLIN, 0 };
    if (zmq_poll (&item, 1, timeout_ms) <= 0)
        return NULL;
    ps_error_t err;
    if (ps_msg_recv (rogue->msg, rogue->dealer, false, &err) != 0
    ||  ps_msg_decode (rogue->msg, &err) != 0)
        fail_msg ("rogue: a message from the coordinator: %s", err.msg);
    return ps_msg_proto (rogue->msg);
}

//  The next message of type (heartbeats are skipped), or NULL.
static const ps_proto_t *
s_rogue_expect (s_rogue_t *rogue, ps_proto_type_t type, int timeout_ms)
{
    double deadline = ps_clock_ms () + timeout_ms;
    while (ps_clock_ms () < deadline) {
        const ps_proto_t *m = s_rogue_recv (rogue, 50);
        if (m && m->type == type)
            return m;
        if (m && m->type == PS_PROTO_ERROR)
            fail_msg ("rogue: expected %s, the coordinator answered an error: %s",
                      ps_proto_info [type].name, m->error.message);
    }
    return NULL;
}

static void
s_rogue_register (s_rogue_t *rogue, const char *role, int index, uint64_t incarnation)
{
    ps_proto_t msg = {
        .type = PS_PROTO_REGISTER,
        .register_ = { .role = role, .index = (uint64_t) index, .incarnation = incarnation,
                       .endpoint = "", .pid = (uint64_t) getpid () },
    };
    s_rogue_send (rogue, &msg);
}

//  A work_request that reports steps [first, last] except `skip` trained
//  (status done) at generation, and asks for work when want.
static void
s_rogue_work_request (s_rogue_t *rogue, uint64_t first, uint64_t last, uint64_t skip,
                      uint64_t generation, bool want)
{
    size_t n = 0;
    ps_proto_report_t *reports = calloc (last >= first ? last - first + 1 : 1,
                                         sizeof *reports);
    assert_non_null (reports);
    for (uint64_t step = first; step <= last; step++)
        if (step != skip)
            reports [n++] = (ps_proto_report_t) {
                .kind = "train", .status = "done", .step = step, .generation = generation,
                .loss = 1.0, .correct = 64, .count = 64, .applied = 8, .duplicates = 0,
                .compute_ms = 1.0, .comm_ms = 1.0,
            };
    ps_proto_t msg = {
        .type = PS_PROTO_WORK_REQUEST,
        .work_request = { .reports = { n, reports }, .want = want ? 1 : 0 },
    };
    s_rogue_send (rogue, &msg);
    free (reports);
}

//  Register as role:index (again and again until answered, as a link
//  does), then ask for work until a train step comes; *step and
//  *generation get it.
static void
s_rogue_take_step (s_rogue_t *rogue, const char *role, int index, uint64_t *step,
                   uint64_t *generation)
{
    double deadline = ps_clock_ms () + S_EVENT_MS;
    const ps_proto_t *m = NULL;
    while (!m && ps_clock_ms () < deadline) {
        s_rogue_register (rogue, role, index, 0x5eed);
        m = s_rogue_expect (rogue, PS_PROTO_REGISTER_OK, 100);
    }
    if (!m)
        fail_msg ("rogue: %s:%d was not registered within %d ms", role, index, S_EVENT_MS);
    while (ps_clock_ms () < deadline) {
        s_rogue_work_request (rogue, 1, 0, 0, 0, true);
        m = s_rogue_expect (rogue, PS_PROTO_WORK, 1000);
        if (!m)
            continue;
        if (strcmp (m->work.kind, "train") == 0) {
            *step = m->work.step;
            *generation = m->work.generation;
            return;
        }
        if (strcmp (m->work.kind, "wait") != 0)
            fail_msg ("rogue: expected work of kind train or wait, got %s", m->work.kind);
        usleep (20 * 1000);
    }
    fail_msg ("rogue: no train step within %d ms", S_EVENT_MS);
}

//  A cluster started by hand from TF_CONFIG with nslots worker tasks, of
//  which the first nworkers are started (the rest are free for a rogue);
//  2 servers. endpoints gets the coordinator's address, then the servers'.
static void
s_rogue_cluster (s_run_t *run, int nslots, int nworkers, int limit, int test_limit,
                 int epochs, char endpoints [3][64])
{
    int ports [3 + 4];
    assert_true (nslots <= 4);
    for (int i = 0; i < 3 + nslots; i++) {
        bool taken;
        do {
            ports [i] = harness_free_port ();
            assert_true (ports [i] > 0);
            taken = false;
            for (int j = 0; j < i; j++)
                taken |= ports [j] == ports [i];
        } while (taken);
    }
    char workers [256] = "";
    for (int w = 0; w < nslots; w++)
        snprintf (workers + strlen (workers), sizeof workers - strlen (workers),
                  "%s\"127.0.0.1:%d\"", w ? ", " : "", ports [3 + w]);
    char cluster [512];
    snprintf (cluster, sizeof cluster, "{\"chief\": [\"127.0.0.1:%d\"], \"ps\": "
              "[\"127.0.0.1:%d\", \"127.0.0.1:%d\"], \"worker\": [%s]}", ports [0], ports [1],
              ports [2], workers);
    for (int i = 0; i < 3; i++)
        snprintf (endpoints [i], 64, "tcp://127.0.0.1:%d", ports [i]);
    char spec [700];
    for (int w = 0; w < nworkers; w++) {
        char name [16];
        snprintf (name, sizeof name, "worker%d", w);
        snprintf (spec, sizeof spec, "TF_CONFIG={\"cluster\": %s, \"task\": {\"type\": "
                  "\"worker\", \"index\": %d}}", cluster, w);
        s_start_task (run, "PS_WORKER", NULL, (const char *[]) { spec, NULL }, name);
    }
    for (int p = 0; p < 2; p++) {
        char name [16];
        snprintf (name, sizeof name, "ps%d", p);
        snprintf (spec, sizeof spec, "TF_CONFIG={\"cluster\": %s, \"task\": {\"type\": \"ps\", "
                  "\"index\": %d}}", cluster, p);
        s_start_task (run, "PS_SERVER", (const char *[]) { "--threads", "0", NULL },
                      (const char *[]) { spec, NULL }, name);
    }
    s_job_args (run, limit, test_limit, epochs);
    s_heartbeat_args (run);
    snprintf (spec, sizeof spec, "TF_CONFIG={\"cluster\": %s, \"task\": {\"type\": \"chief\", "
              "\"index\": 0}}", cluster);
    s_run_start (run, (const char *[]) { spec, NULL });
}

//  A process that registers in a free worker slot takes a step, then says
//  every other step of the run is done, and falls silent. Only the holder
//  of a step may complete it: every report is refused (logged once), the
//  rogue is declared failed for its silence, its step goes to a real
//  worker, and every step is trained once.
static void
test_rogue_completions (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("rogue: completes others' steps");
    int limit = s_limit (2560), epochs = 2;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    char endpoints [3][64];
    s_rogue_cluster (run, 3, 2, limit, s_test_limit (500), epochs, endpoints);
    s_rogue_t rogue;
    s_rogue_open (&rogue, endpoints [0], "chief:0", S_KEY_TASK, "worker:2");
    uint64_t step, generation;
    s_rogue_take_step (&rogue, "worker", 2, &step, &generation);
    s_rogue_work_request (&rogue, 1, total, step, generation, false);
    assert_non_null (s_rogue_expect (&rogue, PS_PROTO_WORK, S_EVENT_MS));
    s_rogue_close (&rogue);
    s_run_finish (run, 0);
    s_check_done (run, total, 2);
    json_t *done = s_find (run->rows, "done", -1);
    json_int_t refused = s_int (done, "refused_reports");
    assert_true (refused > 0 && refused <= (json_int_t) total - 1);
    assert_int_equal (s_count_match (run->rows, s_ev ("refused", "worker", 2)), 1);
    assert_string_equal (s_str (s_find (run->rows, "refused", 0), "what"), "completion");
    //  The rogue held its step until it fell silent; the step went back.
    json_t *failed = s_find_match (run->rows, s_ev ("worker_failed", "worker", 2), 0);
    assert_non_null (failed);
    assert_int_equal (s_int (failed, "steps_released"), 1);
    assert_true (harness_file_contains (run->log, "refused worker:2's completion"));
    s_summary (run, "%" PRIu64 " steps, rogue held step %" PRIu64 " and reported %" PRIu64
               " others: %lld refused, every step trained once", total, step, total - 1,
               (long long) refused);
    s_run_destroy (run);
}

//  A process that takes a step and says it is done without pushing it.
//  The coordinator cannot tell until the end, where every partition's
//  ledger holds one step fewer than were done: the run fails, naming the
//  partitions and the counts.
static void
test_rogue_holder_lies (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("rogue: completes its step untrained");
    int limit = s_limit (1280), epochs = 1;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    char endpoints [3][64];
    s_rogue_cluster (run, 3, 2, limit, s_test_limit (500), epochs, endpoints);
    s_rogue_t rogue;
    s_rogue_open (&rogue, endpoints [0], "chief:0", S_KEY_TASK, "worker:2");
    uint64_t step, generation;
    s_rogue_take_step (&rogue, "worker", 2, &step, &generation);
    s_rogue_work_request (&rogue, step, step, 0, generation, false);
    assert_non_null (s_rogue_expect (&rogue, PS_PROTO_WORK, S_EVENT_MS));
    s_rogue_close (&rogue);
    s_run_finish (run, 1);
    json_t *done = s_find (run->rows, "done", -1);
    assert_non_null (done);
    assert_int_equal (s_int (done, "steps"), total);
    assert_false (json_is_true (json_object_get (done, "verified")));
    json_t *mismatches = json_object_get (done, "mismatches");
    //  Every partition of every server is short of the one step.
    size_t parts = 0, i;
    json_t *server;
    json_array_foreach (json_object_get (done, "servers"), i, server)
        parts += json_array_size (json_object_get (server, "partitions"));
    assert_true (parts >= S_CNN_VARS);
    assert_int_equal (json_array_size (mismatches), parts);
    json_t *m;
    json_array_foreach (mismatches, i, m) {
        assert_int_equal (s_int (m, "recorded"), total - 1);
        assert_int_equal (s_int (m, "expected"), total);
    }
    assert_non_null (s_find (run->rows, "failed", -1));
    char expect [128];
    snprintf (expect, sizeof expect, "recorded %" PRIu64, total - 1);
    assert_true (harness_file_contains (run->log, "the run is not what was scheduled"));
    assert_true (harness_file_contains (run->log, expect));
    s_summary (run, "%" PRIu64 " steps, rogue completed step %" PRIu64 " untrained: exit 1, "
               "%zu partitions named", total, step, parts);
    s_run_destroy (run);
}

//  While worker:1 trains, another process registers as worker:1 again and
//  again, each time as a new incarnation. The live worker is never
//  evicted: each registration is refused as busy (logged once), and the
//  run completes with no worker failure.
static void
test_rogue_registrations (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("rogue: re-registers a live task");
    int limit = s_limit (2560), epochs = 2;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    char endpoints [3][64];
    s_rogue_cluster (run, 2, 2, limit, s_test_limit (500), epochs, endpoints);
    json_decref (s_wait_event (run, s_ev ("registered", "worker", 1), S_RUN_MS));
    //  A second process of worker:1, with its key: a duplicate launch.
    s_rogue_t rogue;
    s_rogue_open (&rogue, endpoints [0], "chief:0", S_KEY_TASK, "worker:1");
    int attempts = 0, refusals = 0;
    while (s_running (run)) {
        s_rogue_register (&rogue, "worker", 1, 0xbad0000 + (uint64_t) attempts++);
        const ps_proto_t *m = s_rogue_recv (&rogue, 50);
        if (m && m->type == PS_PROTO_ERROR) {
            assert_string_equal (m->error.code, "busy");
            refusals++;
        }
        else
        if (m && m->type == PS_PROTO_REGISTER_OK)
            fail_msg ("a new incarnation of the live worker:1 was registered");
    }
    s_rogue_close (&rogue);
    s_run_finish (run, 0);
    s_check_done (run, total, 2);
    json_t *done = s_find (run->rows, "done", -1);
    assert_int_equal (s_int (done, "worker_failures"), 0);
    assert_int_equal (s_count (run->rows, "worker_failed"), 0);
    //  Those refused after the done record was written are not in it.
    assert_true (refusals > 0);
    assert_true (s_int (done, "refused_registrations") > 0);
    assert_true (s_int (done, "refused_registrations") <= refusals);
    assert_int_equal (s_count_match (run->rows, s_ev ("refused", "worker", 1)), 1);
    assert_int_equal (s_count_match (run->rows, s_ev_min ("registered", "worker", 1,
                                                          "restarted", 1)), 0);
    s_summary (run, "%" PRIu64 " steps, %d registrations as the live worker:1, %d refused as "
               "busy, no worker failure", total, attempts, refusals);
    s_run_destroy (run);
}

//  The control requests only the coordinator may send a server.
static const ps_proto_type_t s_control [] = {
    PS_PROTO_SHUTDOWN, PS_PROTO_FENCE, PS_PROTO_SNAPSHOT, PS_PROTO_RESTORE,
    PS_PROTO_SET_OPTIMIZER, PS_PROTO_CREATE,
};
#define S_NCONTROL (sizeof s_control / sizeof s_control [0])

//  Send control request c, its fields filled with harmless values (an
//  empty create, a fence and checkpoint names that match nothing), but
//  for an optimizer that would wreck the run.
static void
s_rogue_request (s_rogue_t *rogue, size_t c)
{
    ps_proto_t msg = { .type = s_control [c] };
    switch (msg.type) {
        case PS_PROTO_FENCE:
            msg.fence.generation = 5;
            break;
        case PS_PROTO_SNAPSHOT:
            msg.snapshot.dir = "ckpt-000000000001";
            break;
        case PS_PROTO_RESTORE:
            msg.restore.dir = "ckpt-000000000001";
            break;
        case PS_PROTO_SET_OPTIMIZER: {
            ps_opt_config_t opt;
            ps_opt_config_default (&opt, PS_OPT_SGD);
            opt.lr = 1e6;
            ps_proto_optimizer_set (&msg.set_optimizer.optimizer, &opt);
            break;
        }
        default:
            break;
    }
    s_rogue_send (rogue, &msg);
}

//  No answer at all within timeout_ms.
static void
s_rogue_silence (s_rogue_t *rogue, const char *who, int timeout_ms)
{
    const ps_proto_t *m = s_rogue_recv (rogue, timeout_ms);
    if (m)
        fail_msg ("%s got an answer (%s) from a secured process", who,
                  ps_proto_info [m->type].name);
}

//  A secured cluster, attacked while it trains. Processes without the
//  cluster's keys (no CURVE at all, or a key pair of their own) send the
//  coordinator and a server registrations, work requests and every control
//  request: they get no answer at all. A worker's key, which the servers
//  do trust, asks ps:0 to shut down, fence, snapshot, restore, change the
//  optimizer and create partitions: each is refused as forbidden, logged
//  once; and it cannot register as another worker. The run is unharmed:
//  every step is trained once.
static void
test_strangers (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("secured: strangers and a worker's key");
    //  Long enough to outlast the attacks (about 2 s) many times over.
    int limit = s_limit (12800), epochs = 4;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    char endpoints [3][64];
    s_rogue_cluster (run, 2, 2, limit, s_test_limit (500), epochs, endpoints);
    json_decref (s_wait_event (run, s_ev ("started", NULL, -1), S_RUN_MS));
    //  Strangers, at the coordinator and at ps:0.
    s_key_t strangers [] = { S_KEY_NONE, S_KEY_STRANGER };
    const char *names [] = { "a client without CURVE", "a client with an unknown key" };
    for (int k = 0; k < 2; k++) {
        s_rogue_t rogue;
        s_rogue_open (&rogue, endpoints [0], "chief:0", strangers [k], NULL);
        s_rogue_register (&rogue, "worker", 0, 0x5eed);
        s_rogue_work_request (&rogue, 1, 0, 0, 0, true);
        s_rogue_silence (&rogue, names [k], 500);
        s_rogue_close (&rogue);
        s_rogue_open (&rogue, endpoints [1], "ps:0", strangers [k], NULL);
        for (size_t c = 0; c < S_NCONTROL; c++)
            s_rogue_request (&rogue, c);
        s_rogue_silence (&rogue, names [k], 500);
        s_rogue_close (&rogue);
    }
    //  An insider: worker:0's key at ps:0 may push and pull, nothing more.
    s_rogue_t rogue;
    s_rogue_open (&rogue, endpoints [1], "ps:0", S_KEY_TASK, "worker:0");
    for (size_t c = 0; c < S_NCONTROL; c++) {
        s_rogue_request (&rogue, c);
        const ps_proto_t *m = s_rogue_expect (&rogue, PS_PROTO_ERROR, S_EVENT_MS);
        const char *type = ps_proto_info [s_control [c]].name;
        if (!m) {
            char log [PATH_MAX + 16];
            snprintf (log, sizeof log, "%s/ps0.log", run->dir);
            harness_print_log (log);
            fail_msg ("ps:0 did not answer %s from worker:0's key", type);
        }
        if (strcmp (m->error.code, "forbidden") != 0)
            fail_msg ("%s from worker:0's key was not refused as forbidden (%s: %s)", type,
                      m->error.code, m->error.message);
    }
    s_rogue_close (&rogue);
    //  ... and at the coordinator it is worker:0, not worker:1.
    s_rogue_open (&rogue, endpoints [0], "chief:0", S_KEY_TASK, "worker:0");
    s_rogue_register (&rogue, "worker", 1, 0x5eed);
    const ps_proto_t *m = s_rogue_expect (&rogue, PS_PROTO_ERROR, S_EVENT_MS);
    assert_non_null (m);
    assert_string_equal (m->error.code, "forbidden");
    s_rogue_close (&rogue);
    //  The attacks came while the cluster was at work, not after.
    if (!s_running (run))
        fail_msg ("%s: the run ended before the attacks did: make it longer", run->name);
    s_run_finish (run, 0);
    s_check_done (run, total, 2);
    assert_int_equal (s_int (s_find (run->rows, "done", -1), "worker_failures"), 0);
    //  Logged once per key, not once per request.
    char log [PATH_MAX + 16];
    snprintf (log, sizeof log, "%s/ps0.log", run->dir);
    assert_true (harness_file_contains (log, "refused shutdown: only the coordinator"));
    assert_false (harness_file_contains (log, "refused fence"));
    assert_true (harness_file_contains (run->log, "refused register as worker:1: this key is "
                                                   "worker:0's"));
    s_summary (run, "%" PRIu64 " steps; strangers got no answer, worker:0's key was refused "
               "%zu control requests and worker:1's task", total, S_NCONTROL);
    s_run_destroy (run);
}

//  --insecure: the one run without CURVE. It trains as a secured one does,
//  and every process says, at start, that nothing is protected.
static void
test_insecure (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("local run with --insecure");
    int limit = s_limit (1280), epochs = 1;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    s_local_args (run, limit, s_test_limit (500), epochs);
    s_arg (run, "--insecure");
    s_run_start (run, NULL);
    s_run_finish (run, 0);
    s_check_done (run, total, 2);
    assert_true (harness_file_contains (run->log, "running with --insecure"));
    const char *children [] = { "ps0", "ps1", "worker0", "worker1" };
    for (size_t i = 0; i < 4; i++) {
        char log [PATH_MAX + 32];
        snprintf (log, sizeof log, "%s/%s.log", run->log_dir, children [i]);
        if (!harness_file_contains (log, "running with --insecure"))
            fail_msg ("%s does not warn that it runs unsecured", log);
    }
    s_summary (run, "%" PRIu64 " steps unsecured; all 5 processes warned", total);
    s_run_destroy (run);
}

//  ---------------------------------------------------------------------
//  k. Mirrored mode: a ring of replicas

//  The run completed in mirrored mode: every batch trained once (the
//  schedule's count, and each final member's replica ledger recording
//  every batch with none refused as a repeat), the replicas bitwise equal
//  at every evaluation, no server used, and the record's counters agreeing
//  with the events. Returns the done record.
static json_t *
s_check_mirrored (s_run_t *run, uint64_t total, int members)
{
    assert_int_equal (run->status, 0);
    s_check_logs (run);
    assert_int_equal (s_count (run->rows, "failed"), 0);
    assert_int_equal (s_count (run->rows, "done"), 1);
    json_t *done = s_find (run->rows, "done", -1);
    assert_int_equal (s_index_of (run->rows, done), json_array_size (run->rows) - 1);
    assert_string_equal (s_str (done, "mode"), "mirrored");
    assert_int_equal (s_int (done, "steps"), total);
    assert_int_equal (json_array_size (json_object_get (done, "servers")), 0);
    assert_int_equal (s_count_match (run->rows, s_ev ("registered", "ps", -1)), 0);
    json_t *replicas = json_object_get (done, "replicas");
    if ((int) json_array_size (replicas) != members)
        fail_msg ("%s: the final ring has %zu members, expected %d", run->name,
                  json_array_size (replicas), members);
    size_t i;
    json_t *row;
    json_array_foreach (replicas, i, row) {
        if (s_int (row, "recorded") != (json_int_t) total || s_int (row, "duplicates") != 0)
            fail_msg ("%s: worker:%lld's replica recorded %lld batches and refused %lld "
                      "updates as repeats; expected %" PRIu64 " and 0 (every batch applied "
                      "exactly once)", run->name, (long long) s_int (row, "task"),
                      (long long) s_int (row, "recorded"), (long long) s_int (row, "duplicates"),
                      total);
        assert_int_equal (s_int (row, "updates"), s_int (done, "updates"));
    }
    //  Every evaluation compared the replicas' checksums: all equal.
    assert_true (s_int (done, "replica_checks") >= 1);
    assert_int_equal (s_int (done, "replica_mismatches"), 0);
    assert_int_equal (s_count (run->rows, "replicas"), s_int (done, "replica_checks"));
    json_array_foreach (run->rows, i, row)
        if (harness_event_is (row, "replicas")) {
            json_t *sums = json_object_get (row, "checksums");
            assert_true (json_is_true (json_object_get (row, "equal")));
            assert_true (json_array_size (sums) >= 1);
            for (size_t k = 1; k < json_array_size (sums); k++)
                assert_string_equal (json_string_value (json_array_get (sums, k)),
                                     json_string_value (json_array_get (sums, 0)));
        }
    assert_string_equal (s_str (done, "replica_checksum"),
                         json_string_value (json_array_get (json_object_get (
                             s_find (run->rows, "replicas", -1), "checksums"), 0)));
    assert_int_equal (s_int (done, "checkpoints"), s_count (run->rows, "checkpoint"));
    assert_int_equal (s_int (done, "worker_failures"),
                      s_count_match (run->rows, (s_match_t) { .event = "worker_failed",
                                                              .role = "worker", .task = -1 }));
    double accuracy = s_real (done, "test_accuracy");
    assert_true (accuracy > 0 && accuracy <= 1);
    return done;
}

//  Three workers, one replica each: the ring trains every batch once, the
//  global step is one batch per member, the replicas stay bitwise equal,
//  and the model learns.
static void
test_mirrored_run (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("mirrored, 3 workers");
    int limit = s_limit (6400), test_limit = s_test_limit (1000), epochs = 3;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    s_local_args (run, limit, test_limit, epochs);
    s_args (run, (const char *[]) { "--mode", "mirrored", "--workers", "3", NULL });
    s_run_start (run, NULL);
    s_run_finish (run, 0);
    json_t *done = s_check_mirrored (run, total, 3);
    //  One update per global step of three batches (the last may be short).
    assert_int_equal (s_int (done, "updates"), (total + 2) / 3);
    assert_int_equal (s_count (run->rows, "registered"), 3);
    assert_int_equal (s_count (run->rows, "ring"), 1);
    //  Each member trained a third of the batches.
    json_t *steps = json_object_get (done, "worker_steps");
    for (int w = 0; w < 3; w++) {
        json_int_t n = json_integer_value (json_array_get (steps, (size_t) w));
        assert_true (n >= (json_int_t) total / 3 && n <= (json_int_t) total / 3 + 1);
    }
    //  The ring evaluates, each member a shard, the whole test subset.
    assert_int_equal (s_count (run->rows, "eval"), epochs);
    json_t *first = s_find (run->rows, "eval", 0), *last = s_find (run->rows, "eval", -1);
    assert_string_equal (s_str (last, "role"), "ring");
    assert_int_equal (s_int (last, "task"), 3);
    assert_int_equal (s_int (last, "count"), test_limit);
    double acc0 = s_real (first, "test_accuracy"), acc = s_real (last, "test_accuracy");
    double bound = s_scale >= 1 ? 0.7 : 0.5;
    if (!(acc > acc0 && acc > bound))
        fail_msg ("test accuracy %.4f after epoch 1, %.4f after epoch %d: expected a rise, "
                  "to above %.2f", acc0, acc, epochs, bound);
    s_check_no_children (run, 0, NULL);
    s_summary (run, "%" PRIu64 " batches in %lld updates, %lld replica checks equal, test "
               "accuracy %.3f -> %.3f, %.0f samples/s", total, (long long) s_int (done, "updates"),
               (long long) s_int (done, "replica_checks"), acc0, acc,
               s_real (done, "samples_per_s"));
    s_run_destroy (run);
}

//  kill -9 of a member mid-run: the ring aborts the step, re-forms from the
//  survivors, takes the restarted worker back in at a step boundary, and
//  every batch is still trained exactly once.
static void
test_mirrored_kill_worker (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("mirrored, kill -9 worker");
    int limit = s_limit (12800), test_limit = s_test_limit (1000), epochs = 3;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    s_local_args (run, limit, test_limit, epochs);
    s_heartbeat_args (run);
    s_args (run, (const char *[]) { "--mode", "mirrored", "--workers", "3", NULL });
    s_run_start (run, NULL);
    json_t *progress = s_wait_event (run, s_ev_min ("progress", NULL, -1, "step",
                                                       (json_int_t) total / 4), S_RUN_MS);
    json_decref (progress);
    pid_t victim = s_task_pid (run, "worker", 1);
    assert_int_equal (kill (victim, SIGKILL), 0);
    json_decref (s_wait_event (run, s_ev ("worker_failed", "worker", 1), S_EVENT_MS));
    json_t *back = s_wait_event (run, s_ev_min ("registered", "worker", 1, "restarted", 1),
                                 S_EVENT_MS);
    pid_t again = (pid_t) s_int (back, "pid");
    json_decref (back);
    s_run_finish (run, 0);
    json_t *done = s_check_mirrored (run, total, 3);
    assert_int_equal (s_int (done, "worker_failures"), 1);
    //  The ring was formed at start, without worker:1, and with it again.
    size_t rings = s_count (run->rows, "ring");
    assert_true (rings >= 3);
    json_t *last_ring = s_find (run->rows, "ring", -1);
    assert_int_equal (json_array_size (json_object_get (last_ring, "workers")), 3);
    bool without = false;
    for (size_t r = 1; r < rings; r++)
        if (json_array_size (json_object_get (s_find (run->rows, "ring", (int) r),
                                              "workers")) == 2)
            without = true;
    assert_true (without);
    assert_true (harness_pid_gone (victim));
    assert_true (harness_pid_gone (again));
    s_check_no_children (run, 0, NULL);
    s_summary (run, "%zu rings; every batch once; replicas equal in %lld checks", rings,
               (long long) s_int (done, "replica_checks"));
    s_run_destroy (run);
}

//  A checkpoint of one mode resumes in the other: async for an epoch,
//  mirrored for the second from its checkpoint (re-partitioned into whole
//  variables), async again for the third from the mirrored one. No batch
//  is trained twice or lost across the three runs.
static void
test_mirrored_resume_across_modes (void **state)
{
    (void) state;
    int limit = s_limit (6400), test_limit = s_test_limit (1000);
    uint64_t per_epoch = s_steps_per_epoch (limit);
    char ckpt [PATH_MAX];
    s_run_t *first = s_run_new ("async, then resumed");
    snprintf (ckpt, sizeof ckpt, "%s/checkpoints", first->dir);
    s_local_args (first, limit, test_limit, 1);
    s_args (first, (const char *[]) { "--checkpoint-dir", ckpt, NULL });
    s_run_start (first, NULL);
    s_run_finish (first, 0);
    s_check_done (first, per_epoch, 2);

    s_run_t *second = s_run_new ("mirrored from async");
    s_local_args (second, limit, test_limit, 2);
    s_args (second, (const char *[]) { "--checkpoint-dir", ckpt, "--resume", "--mode",
                                       "mirrored", NULL });
    s_run_start (second, NULL);
    s_run_finish (second, 0);
    json_t *recovered = s_find (second->rows, "recovered", 0);
    assert_non_null (recovered);
    assert_string_equal (s_str (recovered, "reason"), "resuming");
    assert_int_equal (s_int (recovered, "step"), per_epoch);
    //  The replicas' ledgers hold the first run's batches and their own.
    s_check_mirrored (second, 2 * per_epoch, 2);
    assert_true (harness_file_contains (second->log, "re-partitioned"));

    s_run_t *third = s_run_new ("async from mirrored");
    s_local_args (third, limit, test_limit, 3);
    s_args (third, (const char *[]) { "--checkpoint-dir", ckpt, "--resume", NULL });
    s_run_start (third, NULL);
    s_run_finish (third, 0);
    assert_int_equal (s_int (s_find (third->rows, "recovered", 0), "step"), 2 * per_epoch);
    json_t *done = s_find (third->rows, "done", -1);
    assert_int_equal (s_int (done, "steps"), 3 * per_epoch);
    //  No server saw a batch it had applied before.
    size_t s;
    json_t *server;
    json_array_foreach (json_object_get (done, "servers"), s, server)
        assert_int_equal (s_int (server, "duplicates"), 0);
    assert_true (harness_file_contains (third->log, "re-partitioned"));
    double accuracy = s_real (done, "test_accuracy");
    assert_true (accuracy > s_real (s_find (first->rows, "done", -1), "test_accuracy") - 0.02);
    s_summary (third, "async -> mirrored -> async: %" PRIu64 " steps, test accuracy %.3f",
               3 * per_epoch, accuracy);
    s_run_destroy (first);
    s_run_destroy (second);
    s_run_destroy (third);
}

//  Mirrored training on all of Fashion-MNIST comes near the 89% target:
//  2 workers, global batch 128, 5 epochs (0.8984 measured; 0.8935 after
//  epoch 3). About 20 s in a release build and many minutes under
//  AddressSanitizer: it is the group "accuracy", a meson test of its own
//  (test_cluster_accuracy), which sanitizer builds count as skipped (the
//  cases above still train for real there).
//  Run the cnn on a local cluster on all of the data for 5 epochs in mode
//  (its flags), to its end.
static s_run_t *
s_full_run (const char *name, const char *const *mode)
{
    s_run_t *run = s_run_new (name);
    s_args (run, (const char *[]) { "--local", "--log-dir", run->log_dir, "--job", run->job,
                                    "--model", "cnn", "--seed", "1", "--metrics", run->metrics,
                                    "--epochs", "5", NULL });
    s_mode_args (run, mode);
    s_run_start (run, NULL);
    s_run_finish (run, 0);
    return run;
}

static void
test_mirrored_accuracy (void **state)
{
    (void) state;
    s_run_t *run = s_full_run ("mirrored, full data",
                               (const char *[]) { "--mode", "mirrored", NULL });
    uint64_t total = s_steps_per_epoch (60000) * 5;
    json_t *done = s_check_mirrored (run, total, 2);
    //  The run is the same on one machine (the replicas are bitwise equal,
    //  the data order follows the seed), but other BLAS kernels, CPUs or
    //  thread counts sum in another order and so train another model.
    //  Measured with seed 1: 0.8984, and 0.8997 on another machine (also
    //  with one BLAS thread); with seed 2, a bigger change, 0.9045. The
    //  floor keeps a margin of four times that spread; whether the run made
    //  the 89% target is in the summary (bench_cluster.py times it).
    double accuracy = s_real (done, "test_accuracy");
    if (accuracy < 0.88)
        fail_msg ("mirrored training on Fashion-MNIST: test accuracy %.4f, expected >= 0.88",
                  accuracy);
    assert_int_equal (s_int (s_find (run->rows, "eval", -1), "count"), 10000);
    s_summary (run, "test accuracy %.4f after 5 epochs (%s the 89%% target), %.0f samples/s",
               accuracy, accuracy >= 0.89 ? "reached" : "below", s_real (done, "samples_per_s"));
    s_run_destroy (run);
}

//  Ssp (S = 3) on all of Fashion-MNIST, 2 workers, 5 epochs: every step
//  applied once, the staleness within its bound, and the accuracy of async
//  training (0.8973 measured, 0.8971 after epoch 3; about 70 s in a
//  release build). Which steps each worker trains depends on the timing,
//  so the floor keeps the margin of the mirrored case.
static void
test_ssp_accuracy (void **state)
{
    (void) state;
    s_run_t *run = s_full_run ("ssp, full data", s_ssp_args);
    uint64_t total = s_steps_per_epoch (60000) * 5;
    s_check_done (run, total, 2);
    s_check_staleness (run, s_ssp_args);
    json_t *done = s_find (run->rows, "done", -1);
    double accuracy = s_real (done, "test_accuracy");
    if (accuracy < 0.88)
        fail_msg ("ssp training on Fashion-MNIST: test accuracy %.4f, expected >= 0.88",
                  accuracy);
    json_t *histogram = json_object_get (json_object_get (done, "staleness"), "histogram");
    char *text = json_dumps (histogram, JSON_COMPACT);
    assert_non_null (text);
    s_summary (run, "test accuracy %.4f after 5 epochs (%s the 89%% target), %.0f samples/s, "
               "staleness histogram %s", accuracy, accuracy >= 0.89 ? "reached" : "below",
               s_real (done, "samples_per_s"), text);
    free (text);
    s_run_destroy (run);
}

//  --data-plane plain: the servers' connections authenticated by per-task
//  passwords and not encrypted (the faster choice for a network no one
//  else reaches). It trains as a CurveZMQ cluster does, and every process
//  says so at start (test_curve checks the passwords on real sockets).
static void
test_plain_data_plane (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("local run, PLAIN data plane");
    int limit = s_limit (1280), epochs = 1;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    s_local_args (run, limit, s_test_limit (500), epochs);
    s_args (run, (const char *[]) { "--data-plane", "plain", NULL });
    s_run_start (run, NULL);
    s_run_finish (run, 0);
    s_check_done (run, total, 2);
    const char *logs [] = { "ps0", "ps1", "worker0", "worker1" };
    for (size_t i = 0; i < 4; i++) {
        char log [PATH_MAX + 32];
        snprintf (log, sizeof log, "%s/%s.log", run->log_dir, logs [i]);
        if (!harness_file_contains (log, "the cluster's data plane is PLAIN"))
            fail_msg ("%s does not say that the data plane is PLAIN", log);
    }
    assert_true (harness_file_contains (run->log, "the cluster's data plane is PLAIN"));
    s_summary (run, "%" PRIu64 " steps over a PLAIN data plane; every process said so", total);
    s_run_destroy (run);
}

//  ---------------------------------------------------------------------
//  l. Gradients that are not finite, and a loss that diverges

//  SGD at a learning rate of 1e8 makes the parameters huge within a few
//  steps and the gradients NaN after that (one worker: deterministic).
//  The servers refuse every such push whole; the coordinator tries each refused step again, on fresher
//  parameters, twice (nonfinite_retries), then fails the run naming the
//  step and the variable. Before, the NaN were applied and the run ended
//  at chance accuracy with exit 0.
static void
test_nonfinite (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("non-finite gradients");
    int limit = s_limit (1280), epochs = 2;
    s_local_args (run, limit, s_test_limit (500), epochs);
    //  One worker: each try of a refused step computes on the same
    //  parameters (nothing was applied), so the outcome does not depend on
    //  how two workers' steps interleave.
    s_args (run, (const char *[]) { "--workers", "1", "--optimizer", "sgd", "--lr", "1e8", NULL });
    s_run_start (run, NULL);
    s_run_finish (run, 1);
    assert_true (harness_file_contains (run->log, "gave a gradient with NaN or an infinity 3 "
                                                   "times"));
    assert_true (harness_file_contains (run->log, "holds a non-finite value"));
    assert_int_equal (s_count (run->rows, "done"), 0);
    assert_non_null (s_find (run->rows, "failed", -1));
    //  Each refusal is an event; the step that failed the run was refused
    //  three times, each time on a new try.
    size_t refusals = s_count (run->rows, "nonfinite");
    json_t *last = s_find (run->rows, "nonfinite", -1);
    assert_non_null (last);
    assert_int_equal (s_int (last, "failures"), 3);
    assert_non_null (strstr (s_str (last, "error"), "nonfinite"));
    s_summary (run, "%zu refused pushes; step %lld refused 3 times; exit 1", refusals,
               (long long) s_int (last, "step"));
    s_run_destroy (run);
}

//  In mirrored mode every replica would apply the same non-finite sum:
//  each refuses it, and the run fails at once (a retry would sum the same
//  gradients again).
static void
test_nonfinite_mirrored (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("non-finite gradients, mirrored");
    int limit = s_limit (1280), epochs = 2;
    s_local_args (run, limit, s_test_limit (500), epochs);
    s_args (run, (const char *[]) { "--mode", "mirrored", "--workers", "1", "--optimizer", "sgd",
                                    "--lr", "1e8", NULL });
    s_run_start (run, NULL);
    s_run_finish (run, 1);
    assert_true (harness_file_contains (run->log, "was refused by every replica"));
    assert_int_equal (s_count (run->rows, "done"), 0);
    s_summary (run, "the ring refused a non-finite sum; exit 1");
    s_run_destroy (run);
}

//  SGD at 10 keeps the gradients finite but sends the loss from 2.3 to
//  hundreds: the coordinator says so once (a warning and a "diverging"
//  event, diverged in the done record), and with --stop-on-divergence the
//  run fails instead of training on to chance accuracy.
static void
test_divergence (void **state)
{
    (void) state;
    int limit = s_limit (1280), epochs = 2;
    uint64_t total = s_steps_per_epoch (limit) * (uint64_t) epochs;
    s_run_t *run = s_run_new ("a loss that diverges");
    s_local_args (run, limit, s_test_limit (500), epochs);
    s_args (run, (const char *[]) { "--optimizer", "sgd", "--lr", "10", NULL });
    s_run_start (run, NULL);
    s_run_finish (run, 0);
    s_check_done (run, total, 2);
    assert_int_equal (s_count (run->rows, "diverging"), 1);
    assert_true (json_is_true (json_object_get (s_find (run->rows, "done", -1), "diverged")));
    assert_true (harness_file_contains (run->log, "the training loss diverges"));
    double loss = s_real (s_find (run->rows, "diverging", 0), "loss");
    s_run_destroy (run);

    run = s_run_new ("a loss that diverges, stop");
    s_local_args (run, limit, s_test_limit (500), epochs);
    s_args (run, (const char *[]) { "--optimizer", "sgd", "--lr", "10", "--stop-on-divergence",
                                    NULL });
    s_run_start (run, NULL);
    s_run_finish (run, 1);
    assert_int_equal (s_count (run->rows, "diverging"), 1);
    assert_int_equal (s_count (run->rows, "done"), 0);
    assert_true (harness_file_contains (run->log, "and the job says stop_on_divergence"));
    s_summary (run, "loss %.3g over 20 steps: warned once; with --stop-on-divergence, exit 1",
               loss);
    s_run_destroy (run);
}

//  ---------------------------------------------------------------------
//  n. Sync mode

//  A short sync run: every step recorded once, one update per round on
//  every partition (s_check_done), rounds of two steps while both workers
//  live, an evaluation after each epoch, and --overlap ignored with a
//  warning.
static void
test_sync_run (void **state)
{
    (void) state;
    s_run_t *run = s_run_new ("sync run");
    int limit = s_limit (3200), test_limit = s_test_limit (500), epochs = 2;
    uint64_t per_epoch = s_steps_per_epoch (limit), total = per_epoch * (uint64_t) epochs;
    s_local_args (run, limit, test_limit, epochs);
    s_args (run, (const char *[]) { "--mode", "sync", "--overlap", NULL });
    s_run_start (run, NULL);
    s_run_finish (run, 0);
    assert_int_equal (s_check_done (run, total, 2), 0);
    assert_true (harness_file_contains (run->log, "is ignored in sync mode"));
    json_t *done = s_find (run->rows, "done", -1);
    assert_string_equal (s_str (done, "mode"), "sync");
    //  Two workers throughout: every round but an epoch's last odd one has
    //  two steps.
    json_int_t rounds = s_int (done, "rounds");
    assert_true (rounds >= (json_int_t) ((total + 1) / 2) && rounds <= (json_int_t) total);
    assert_int_equal (s_count (run->rows, "eval"), epochs);
    for (int e = 0; e < epochs; e++)
        s_check_eval_step (s_find (run->rows, "eval", e), e, per_epoch, total);
    s_summary (run, "%" PRIu64 " steps in %lld rounds, test accuracy %.3f, %.0f samples/s",
               total, (long long) rounds, s_real (done, "test_accuracy"),
               s_real (done, "samples_per_s"));
    s_run_destroy (run);
}

static void
test_sync_kill_worker (void **state)
{
    (void) state;
    s_kill_worker ("sync: kill -9 worker, no restart", false, s_sync_args);
}

static void
test_sync_kill_server (void **state)
{
    (void) state;
    s_kill_server ("sync: kill -9 server", s_sync_args);
}

//  Under sync the stopped worker, declared failed, no longer counts: its
//  step goes to the other worker, which finishes the open round and trains
//  the next rounds alone (no deadlock: the steps done pass the last
//  progress before by several rounds while it is stopped), and it trains
//  rounds again once it is back; its late push of the step it held is a
//  duplicate, and every round is applied once on every partition.
static void
test_sync_stop_worker (void **state)
{
    (void) state;
    s_stop_worker ("sync: SIGSTOP worker", s_sync_args);
}

int
main (int argc, char **argv)
{
    const char *scale = getenv ("PS_TEST_SCALE");
    if (scale && *scale) {
        s_scale = strtod (scale, NULL);
        if (!(s_scale > 0 && s_scale <= 10)) {
            fprintf (stderr, "PS_TEST_SCALE \"%s\": expected a number in (0, 10]\n", scale);
            return 1;
        }
    }
    //  Orphans (the children of a coordinator killed here) become this
    //  process's children, so that the tests can see them die and reap
    //  them.
    if (prctl (PR_SET_CHILD_SUBREAPER, 1) != 0) {
        perror ("prctl (PR_SET_CHILD_SUBREAPER)");
        return 1;
    }
    //  PS_TEST_FILTER runs only the cases whose names match (cmocka's
    //  pattern: * and ?), to repeat one while debugging.
    const char *filter = getenv ("PS_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter (filter);
    //  The ssp cases are a group of their own, which meson runs as
    //  test_cluster_ssp, so that neither program's runs approach its
    //  meson timeout in a sanitizer build on a loaded machine.
    if (argc == 2 && strcmp (argv [1], "ssp") == 0) {
        const struct CMUnitTest ssp [] = {
            cmocka_unit_test_teardown (test_ssp_run, s_teardown),
            cmocka_unit_test_teardown (test_ssp_kill_worker, s_teardown),
            cmocka_unit_test_teardown (test_ssp_stop_worker, s_teardown),
            cmocka_unit_test_teardown (test_ssp_kill_server, s_teardown),
        };
        return cmocka_run_group_tests_name ("ssp", ssp, NULL, NULL);
    }
    if (harness_group (argc, argv, "accuracy")) {
#ifdef __SANITIZE_ADDRESS__
        harness_skip ("test_cluster_accuracy: mirrored and ssp training on all of "
                      "Fashion-MNIST take many minutes in a sanitizer build; test_cluster's "
                      "runs train for real");
#endif
        const struct CMUnitTest accuracy [] = {
            cmocka_unit_test_teardown (test_mirrored_accuracy, s_teardown),
            cmocka_unit_test_teardown (test_ssp_accuracy, s_teardown),
        };
        return cmocka_run_group_tests_name ("accuracy", accuracy, NULL, NULL);
    }
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_sync_run, s_teardown),
        cmocka_unit_test_teardown (test_sync_kill_worker, s_teardown),
        cmocka_unit_test_teardown (test_sync_kill_server, s_teardown),
        cmocka_unit_test_teardown (test_sync_stop_worker, s_teardown),
        cmocka_unit_test_teardown (test_local_run, s_teardown),
        cmocka_unit_test_teardown (test_manual_tfconfig, s_teardown),
        cmocka_unit_test_teardown (test_manual_files, s_teardown),
        cmocka_unit_test_teardown (test_manual_hung_worker, s_teardown),
        cmocka_unit_test_teardown (test_kill_worker_no_restart, s_teardown),
        cmocka_unit_test_teardown (test_kill_worker_restart, s_teardown),
        cmocka_unit_test_teardown (test_stop_worker, s_teardown),
        cmocka_unit_test_teardown (test_kill_server, s_teardown),
        cmocka_unit_test_teardown (test_kill_coordinator_resume, s_teardown),
        cmocka_unit_test_teardown (test_damaged_checkpoint, s_teardown),
        cmocka_unit_test_teardown (test_evaluator, s_teardown),
        cmocka_unit_test_teardown (test_rogue_completions, s_teardown),
        cmocka_unit_test_teardown (test_rogue_holder_lies, s_teardown),
        cmocka_unit_test_teardown (test_rogue_registrations, s_teardown),
        cmocka_unit_test_teardown (test_strangers, s_teardown),
        cmocka_unit_test_teardown (test_insecure, s_teardown),
        cmocka_unit_test_teardown (test_plain_data_plane, s_teardown),
        cmocka_unit_test_teardown (test_nonfinite, s_teardown),
        cmocka_unit_test_teardown (test_nonfinite_mirrored, s_teardown),
        cmocka_unit_test_teardown (test_divergence, s_teardown),
        cmocka_unit_test_teardown (test_mirrored_run, s_teardown),
        cmocka_unit_test_teardown (test_mirrored_kill_worker, s_teardown),
        cmocka_unit_test_teardown (test_mirrored_resume_across_modes, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
