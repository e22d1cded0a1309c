//  The cluster tests' library (see harness_cluster.h).

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
#include <unistd.h>

#include <jansson.h>

#include "harness.h"
#include "harness_cluster.h"
#include "ps_clock.h"

//  PS_TEST_SCALE: the factor of the data subsets (cluster_main).
static double s_scale = 1.0;

//  ---------------------------------------------------------------------
//  Runs of the coordinator

//  What the teardown cleans up when a test fails half-way: runs still
//  going (their children die with them) and processes started by hand.
static cluster_run_t *s_runs [CLUSTER_MAX_RUNS];
static pid_t s_extra_pids [CLUSTER_MAX_PIDS];

void
cluster_track_pid (pid_t pid)
{
    for (int i = 0; i < CLUSTER_MAX_PIDS; i++)
        if (!s_extra_pids [i]) {
            s_extra_pids [i] = pid;
            return;
        }
}

void
cluster_untrack_pid (pid_t pid)
{
    for (int i = 0; i < CLUSTER_MAX_PIDS; i++)
        if (s_extra_pids [i] == pid)
            s_extra_pids [i] = 0;
}

cluster_run_t *
cluster_run_new (const char *name)
{
    cluster_run_t *run = calloc (1, sizeof *run);
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
    for (int i = 0; i < CLUSTER_MAX_RUNS; i++)
        if (!s_runs [i]) {
            s_runs [i] = run;
            break;
        }
    return run;
}

void
cluster_run_destroy (cluster_run_t *run)
{
    if (run->pid > 0)
        harness_wait_or_kill (run->pid, 0);
    for (int i = 0; i < run->nowned; i++)
        free (run->owned [i]);
    json_decref (run->rows);
    harness_rmtree (run->dir);
    for (int i = 0; i < CLUSTER_MAX_RUNS; i++)
        if (s_runs [i] == run)
            s_runs [i] = NULL;
    free (run);
}

int
cluster_teardown (void **state)
{
    (void) state;
    for (int i = 0; i < CLUSTER_MAX_RUNS; i++)
        if (s_runs [i])
            cluster_run_destroy (s_runs [i]);
    for (int i = 0; i < CLUSTER_MAX_PIDS; i++)
        if (s_extra_pids [i]) {
            harness_wait_or_kill (s_extra_pids [i], 0);
            s_extra_pids [i] = 0;
        }
    return 0;
}

const char *
cluster_arg (cluster_run_t *run, const char *fmt, ...)
{
    assert_true (run->argc < CLUSTER_MAX_ARGS - 1 && run->nowned < CLUSTER_MAX_ARGS);
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

void
cluster_args (cluster_run_t *run, const char *const *args)
{
    for (int i = 0; args [i]; i++)
        cluster_arg (run, "%s", args [i]);
}

cluster_run_t *
cluster_run_resumed (const cluster_run_t *run, int argc, const char *name)
{
    cluster_run_t *resumed = cluster_run_new (name);
    for (int i = 1; i < argc; i++)
        if (strcmp (run->argv [i], run->metrics) == 0)
            cluster_arg (resumed, "%s", resumed->metrics);
        else
        if (strcmp (run->argv [i], run->log_dir) == 0)
            cluster_arg (resumed, "%s", resumed->log_dir);
        else
            cluster_arg (resumed, "%s", run->argv [i]);
    cluster_arg (resumed, "--resume");
    return resumed;
}

int
cluster_limit (int n)
{
    int scaled = (int) (n * s_scale) / CLUSTER_BATCH * CLUSTER_BATCH;
    return scaled < 10 * CLUSTER_BATCH ? 10 * CLUSTER_BATCH : scaled;
}

int
cluster_test_limit (int n)
{
    int scaled = (int) (n * s_scale);
    return scaled < 256 ? 256 : scaled;
}

uint64_t
cluster_steps_per_epoch (int limit)
{
    return ((uint64_t) limit + CLUSTER_BATCH - 1) / CLUSTER_BATCH;
}

void
cluster_job_args (cluster_run_t *run, int limit, int test_limit, int epochs)
{
    cluster_args (run, (const char *[]) { "--job", run->job, "--model", "cnn", "--seed", "1",
                                          "--metrics", run->metrics, NULL });
    cluster_arg (run, "--limit");
    cluster_arg (run, "%d", limit);
    cluster_arg (run, "--test-limit");
    cluster_arg (run, "%d", test_limit);
    cluster_arg (run, "--epochs");
    cluster_arg (run, "%d", epochs);
}

void
cluster_local_args (cluster_run_t *run, int limit, int test_limit, int epochs)
{
    cluster_args (run, (const char *[]) { "--local", "--log-dir", run->log_dir, NULL });
    cluster_job_args (run, limit, test_limit, epochs);
}

void
cluster_heartbeat_args (cluster_run_t *run, int timeout_ms)
{
    cluster_arg (run, "--heartbeat-ms");
    cluster_arg (run, "%d", CLUSTER_HEARTBEAT_MS);
    cluster_arg (run, "--heartbeat-timeout-ms");
    cluster_arg (run, "%d", timeout_ms);
}

//  The ssp cases' mode: the default bound, named.
const char *const cluster_ssp_args [] = { "--mode", "ssp", "--staleness", "3", NULL };
const char *const cluster_sync_args [] = { "--mode", "sync", NULL };

void
cluster_mode_args (cluster_run_t *run, const char *const *mode)
{
    if (mode)
        cluster_args (run, mode);
}

bool
cluster_has_arg (const char *const *argv, const char *arg)
{
    for (int i = 0; argv && argv [i]; i++)
        if (strcmp (argv [i], arg) == 0)
            return true;
    return false;
}

void
cluster_run_start (cluster_run_t *run, const char *const *env)
{
    run->argv [run->argc] = NULL;
    if (!cluster_has_arg (run->argv, "--local") && !cluster_has_arg (run->argv, "--insecure")
        &&  !cluster_has_arg (run->argv, "--keys"))
        cluster_args (run, (const char *[]) { "--keys", harness_keys (), NULL });
    //  A local cluster splits the cores it finds (coordinator/ps_cores.h),
    //  and starts an evaluator: on cores of its own with 6 or more, else
    //  in the cores' idle time, where how many evaluations it gets done
    //  depends on how busy the machine is. These tests count their
    //  processes and evaluations as a worker does them, on any machine,
    //  unless they name the cores or the evaluator (test_metrics_records
    //  tests the split and both kinds of evaluator).
    if (cluster_has_arg (run->argv, "--local") && !cluster_has_arg (run->argv, "--cores"))
        cluster_args (run, (const char *[]) { "--cores", "2", NULL });
    if (cluster_has_arg (run->argv, "--local") && !cluster_has_arg (run->argv, "--evaluator")
    &&  !cluster_has_arg (run->argv, "--no-evaluator"))
        cluster_args (run, (const char *[]) { "--no-evaluator", NULL });
    run->argv [run->argc] = NULL;
    run->start_ms = ps_clock_ms ();
    run->pid = harness_spawn (run->argv, env, run->log);
    assert_true (run->pid > 0);
}

bool
cluster_running (cluster_run_t *run)
{
    return harness_running (run->pid);
}

void
cluster_run_finish (cluster_run_t *run, int expect_status)
{
    run->status = harness_wait_or_kill (run->pid, CLUSTER_RUN_MS);
    run->pid = 0;
    run->wall_s = (ps_clock_ms () - run->start_ms) / 1e3;
    json_decref (run->rows);
    run->rows = harness_jsonl_read (run->metrics);
    if (run->status != expect_status) {
        harness_print_log (run->log);
        fail_msg ("%s: the coordinator exited with status %d (expected %d; -1: it did not "
                  "exit within %d s)", run->name, run->status, expect_status,
                  CLUSTER_RUN_MS / 1000);
    }
    assert_non_null (run->rows);
}

void
cluster_print_logs (cluster_run_t *run)
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

void
cluster_check_logs (cluster_run_t *run)
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

json_int_t
cluster_int (const json_t *obj, const char *key)
{
    json_t *value = json_object_get (obj, key);
    if (!json_is_integer (value))
        fail_msg ("\"%s\" is not an integer in %s", key, json_dumps (obj, JSON_COMPACT));
    return json_integer_value (value);
}

double
cluster_real (const json_t *obj, const char *key)
{
    json_t *value = json_object_get (obj, key);
    if (!json_is_number (value))
        fail_msg ("\"%s\" is not a number in %s", key, json_dumps (obj, JSON_COMPACT));
    return json_number_value (value);
}

const char *
cluster_str (const json_t *obj, const char *key)
{
    const char *value = json_string_value (json_object_get (obj, key));
    if (!value)
        fail_msg ("\"%s\" is not a string in %s", key, json_dumps (obj, JSON_COMPACT));
    return value;
}


cluster_match_t
cluster_ev (const char *event, const char *role, int task)
{
    return (cluster_match_t) { .event = event, .role = role, .task = task };
}

cluster_match_t
cluster_ev_min (const char *event, const char *role, int task, const char *key, json_int_t min)
{
    return (cluster_match_t) { .event = event, .role = role, .task = task, .key = key, .min = min };
}

bool
cluster_match (const json_t *row, void *arg)
{
    const cluster_match_t *match = arg;
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

size_t
cluster_count_match (const json_t *rows, cluster_match_t match)
{
    size_t n = 0, i;
    json_t *row;
    json_array_foreach (rows, i, row)
        n += cluster_match (row, &match);
    return n;
}

size_t
cluster_count (const json_t *rows, const char *event)
{
    return cluster_count_match (rows, (cluster_match_t) { .event = event, .task = -1 });
}

json_t *
cluster_find_match (const json_t *rows, cluster_match_t match, int nth)
{
    json_t *found = NULL;
    size_t i;
    json_t *row;
    int seen = 0;
    json_array_foreach (rows, i, row)
        if (cluster_match (row, &match)) {
            if (nth < 0)
                found = row;
            else
            if (seen++ == nth)
                return row;
        }
    return found;
}

json_t *
cluster_find (const json_t *rows, const char *event, int nth)
{
    return cluster_find_match (rows, (cluster_match_t) { .event = event, .task = -1 }, nth);
}

size_t
cluster_index_of (const json_t *rows, const json_t *event)
{
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row)
        if (row == event)
            return i;
    fail_msg ("event not in the rows");
    return 0;
}

json_t *
cluster_wait_event (cluster_run_t *run, cluster_match_t match, int timeout_ms)
{
    json_t *row = harness_jsonl_wait (run->metrics, cluster_match, &match, run->pid, timeout_ms);
    if (!row) {
        cluster_print_logs (run);
        fail_msg ("%s: no \"%s\" event (role %s, task %d, %s >= %lld) within %d ms%s",
                  run->name, match.event, match.role ? match.role : "any", match.task,
                  match.key ? match.key : "-", (long long) match.min, timeout_ms,
                  cluster_running (run) ? "" : "; the coordinator has exited");
    }
    return row;
}

pid_t
cluster_task_pid (cluster_run_t *run, const char *role, int task)
{
    json_t *rows = harness_jsonl_read (run->metrics);
    assert_non_null (rows);
    json_t *row = cluster_find_match (rows, (cluster_match_t) { .event = "registered", .role = role,
                                                                .task = task }, -1);
    if (!row)
        fail_msg ("%s: %s:%d has not registered", run->name, role, task);
    pid_t pid = (pid_t) cluster_int (row, "pid");
    json_decref (rows);
    return pid;
}

void
cluster_check_no_children (cluster_run_t *run, int timeout_ms, double *gone_ms)
{
    pid_t pids [CLUSTER_MAX_PIDS];
    size_t n = 0, i;
    json_t *row;
    json_array_foreach (run->rows, i, row)
        if (harness_event_is (row, "registered") && n < CLUSTER_MAX_PIDS)
            pids [n++] = (pid_t) cluster_int (row, "pid");
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

const char *const cluster_cnn_vars [CLUSTER_CNN_VARS] = {
    "conv2d/kernel", "conv2d/bias", "dense/kernel", "dense/bias", "dense_1/kernel",
    "dense_1/bias",
};
#define CLUSTER_MAX_PARTS 16

//  The step of the checkpoint this run resumed from (its "recovered" event
//  with reason "resuming"), 0 when it did not resume.
static json_int_t
s_resumed_at (const json_t *rows)
{
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row)
        if (harness_event_is (row, "recovered")
            &&  strcmp (cluster_str (row, "reason"), "resuming") == 0)
            return cluster_int (row, "step");
    return 0;
}

uint64_t
cluster_check_done (cluster_run_t *run, uint64_t total, int nservers)
{
    return cluster_check_done_vars (run, total, nservers, cluster_cnn_vars, CLUSTER_CNN_VARS);
}

uint64_t
cluster_check_done_vars (cluster_run_t *run, uint64_t total, int nservers,
                         const char *const *vars, size_t nvars)
{
    assert_true (nvars >= 1 && nvars <= CLUSTER_MAX_VARS);
    assert_int_equal (run->status, 0);
    cluster_check_logs (run);
    assert_int_equal (cluster_count (run->rows, "failed"), 0);
    assert_int_equal (cluster_count (run->rows, "done"), 1);
    json_t *done = cluster_find (run->rows, "done", -1);
    assert_non_null (done);
    //  Nothing comes after the done record.
    assert_int_equal (cluster_index_of (run->rows, done), json_array_size (run->rows) - 1);
    assert_int_equal (cluster_int (done, "steps"), total);
    assert_int_equal (cluster_int (done, "total"), total);
    //  The coordinator's own cross-check agrees.
    assert_true (json_is_true (json_object_get (done, "verified")));
    assert_int_equal (json_array_size (json_object_get (done, "mismatches")), 0);
    json_t *started = cluster_find (run->rows, "started", 0);
    assert_non_null (started);
    assert_int_equal (cluster_int (started, "total"), total);
    //  The events are in the order they happened.
    double time_s = 0;
    size_t i;
    json_t *row;
    json_array_foreach (run->rows, i, row) {
        if (cluster_real (row, "time_s") < time_s)
            fail_msg ("%s: event %zu (%s) has time_s %.6f, before the one ahead of it (%.6f)",
                      run->name, i, cluster_str (row, "event"), cluster_real (row,
                                                                              "time_s"), time_s);
        time_s = cluster_real (row, "time_s");
    }

    json_t *servers = json_object_get (done, "servers");
    assert_int_equal (json_array_size (servers), nservers);
    //  One update per step; in sync mode, one per round, as many on every
    //  partition as on the first, and at least a step per worker each.
    uint64_t updates_each = total;
    if (strcmp (cluster_str (done, "mode"), "sync") == 0) {
        json_t *first = json_array_get (json_object_get (json_array_get (servers, 0),
                                                         "partitions"), 0);
        assert_non_null (first);
        updates_each = (uint64_t) cluster_int (first, "updates");
        json_int_t workers = json_array_size (json_object_get (done, "worker_steps"));
        if (updates_each * (uint64_t) workers < total || updates_each > total)
            fail_msg ("%s: %" PRIu64 " updates of %" PRIu64 " steps by %lld workers: expected "
                      "one per round of at most a step per worker", run->name, updates_each,
                      total, (long long) workers);
        //  The done record counts the rounds of this coordinator's run: all
        //  of them, unless it resumed from a checkpoint (whose updates came
        //  before it) or recovered a server (which rewinds rounds).
        json_int_t rounds = cluster_int (done, "rounds");
        if (cluster_int (done, "recoveries") == 0) {
            if (s_resumed_at (run->rows) == 0)
                assert_int_equal (rounds, updates_each);
            else
                assert_true (rounds > 0 && rounds < (json_int_t) updates_each);
        }
    }
    int seen [CLUSTER_MAX_VARS][CLUSTER_MAX_PARTS];
    memset (seen, 0, sizeof seen);
    uint64_t duplicates = 0;
    size_t s;
    json_t *server;
    json_array_foreach (servers, s, server) {
        assert_int_equal (cluster_int (server, "task"), s);
        if (json_object_get (server, "error"))
            fail_msg ("%s: ps:%zu: %s", run->name, s, cluster_str (server, "error"));
        json_t *parts = json_object_get (server, "partitions");
        assert_true (json_array_size (parts) > 0);
        json_int_t updates = 0, dups = 0;
        size_t p;
        json_t *part;
        json_array_foreach (parts, p, part) {
            const char *var = cluster_str (part, "var");
            json_int_t index = cluster_int (part, "part");
            size_t v = 0;
            while (v < nvars && strcmp (vars [v], var) != 0)
                v++;
            if (v == nvars || index < 0 || index >= CLUSTER_MAX_PARTS)
                fail_msg ("%s: ps:%zu holds an unexpected partition %s part %lld", run->name, s,
                          var, (long long) index);
            seen [v][index]++;
            if (cluster_int (part, "updates") != (json_int_t) updates_each
                ||  cluster_int (part, "recorded") != (json_int_t) total)
                fail_msg ("%s: ps:%zu %s part %lld: %lld updates, %lld steps in its ledger, "
                          "expected %" PRIu64 " (every step applied exactly once)", run->name, s,
                          var, (long long) index, (long long) cluster_int (part, "updates"),
                          (long long) cluster_int (part, "recorded"), updates_each);
            assert_true (cluster_int (part, "duplicates") >= 0);
            updates += cluster_int (part, "updates");
            dups += cluster_int (part, "duplicates");
        }
        assert_int_equal (cluster_int (server, "updates"), updates);
        assert_int_equal (cluster_int (server, "duplicates"), dups);
        duplicates += (uint64_t) dups;
    }
    //  Each variable is split into parts 0..n-1, each held once.
    for (size_t v = 0; v < nvars; v++) {
        int parts = 0;
        while (parts < CLUSTER_MAX_PARTS && seen [v][parts] == 1)
            parts++;
        if (parts == 0)
            fail_msg ("%s: no server holds %s", run->name, vars [v]);
        for (int p = parts; p < CLUSTER_MAX_PARTS; p++)
            if (seen [v][p])
                fail_msg ("%s: %s part %d is held %d times, or parts before it are missing",
                          run->name, vars [v], p, seen [v][p]);
    }

    //  The counters agree with the events.
    assert_int_equal (cluster_int (done, "checkpoints"), cluster_count (run->rows, "checkpoint"));
    assert_int_equal (cluster_int (done, "worker_failures"),
                      cluster_count_match (run->rows, cluster_ev ("worker_failed", "worker", -1)));
    json_int_t recoveries = 0, lost = 0, resumed_at = 0;
    json_array_foreach (run->rows, i, row)
        if (harness_event_is (row, "recovered")) {
            if (strcmp (cluster_str (row, "reason"), "resuming") == 0)
                resumed_at += cluster_int (row, "step");
            else {
                recoveries++;
                lost += cluster_int (row, "steps_lost");
            }
        }
    assert_int_equal (cluster_int (done, "recoveries"), recoveries);
    json_t *steps = json_object_get (done, "worker_steps");
    json_int_t trained = 0;
    json_array_foreach (steps, i, row)
        trained += json_integer_value (row);
    if (trained != (json_int_t) total + lost - resumed_at)
        fail_msg ("%s: the workers completed %lld steps, expected %lld (total %" PRIu64 " + "
                  "%lld rewound - %lld resumed)", run->name, (long long) trained,
                  (long long) ((json_int_t) total + lost - resumed_at), total, (long long) lost,
                  (long long) resumed_at);
    double accuracy = cluster_real (done, "test_accuracy");
    assert_true (accuracy > 0 && accuracy <= 1);
    assert_true (cluster_real (done, "test_loss") > 0);
    return duplicates;
}

void
cluster_check_staleness (cluster_run_t *run, const char *const *mode)
{
    if (!cluster_has_arg (mode, "ssp"))
        return;
    json_int_t bound = -1;
    for (int i = 0; mode [i] && mode [i + 1]; i++)
        if (strcmp (mode [i], "--staleness") == 0)
            bound = strtoll (mode [i + 1], NULL, 10);
    assert_true (bound >= 0 && bound < 16);
    json_t *done = cluster_find (run->rows, "done", -1);
    assert_string_equal (cluster_str (done, "mode"), "ssp");
    json_t *staleness = json_object_get (done, "staleness");
    assert_int_equal (cluster_int (staleness, "bound"), bound);
    json_int_t widest = cluster_int (staleness, "max");
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
    //  A resumed run started only the steps after its checkpoint.
    json_int_t started = cluster_int (done, "steps") - s_resumed_at (run->rows);
    if (widest > bound || widest != largest || starts < started)
        fail_msg ("%s: staleness %s: expected at most %lld ahead, the largest non-zero entry "
                  "of the histogram, and at least %lld starts", run->name,
                  json_dumps (staleness, JSON_COMPACT), (long long) bound,
                  (long long) started);
}

void
cluster_summary (cluster_run_t *run, const char *fmt, ...)
{
    char text [512];
    va_list args;
    va_start (args, fmt);
    vsnprintf (text, sizeof text, fmt, args);
    va_end (args);
    printf ("[ cluster  ] %-28s %5.1f s  %s\n", run->name, run->wall_s, text);
    fflush (stdout);
}

void
cluster_check_eval_step (const json_t *eval, int e, uint64_t per_epoch, uint64_t total)
{
    json_int_t step = cluster_int (eval, "step");
    uint64_t end = (uint64_t) (e + 1) * per_epoch;
    if (step < (json_int_t) end || step > (json_int_t) total
        ||  (end == total && step != (json_int_t) total))
        fail_msg ("the evaluation after epoch %d is at step %lld: expected %" PRIu64 " to %"
                  PRIu64, e + 1, (long long) step, end, end == total ? total : total - 1);
}


void
cluster_free_ports (int *ports, int n)
{
    for (int i = 0; i < n; i++) {
        bool taken;
        do {
            ports [i] = harness_free_port ();
            assert_true (ports [i] > 0);
            taken = false;
            for (int j = 0; j < i; j++)
                taken |= ports [j] == ports [i];
        } while (taken);
    }
}

pid_t
cluster_start_task (cluster_run_t *run, const char *program, const char *const *args,
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
    if (!cluster_has_arg (args, "--insecure") && !cluster_has_arg (args, "--keys")) {
        argv [argc++] = "--keys";
        argv [argc++] = harness_keys ();
    }
    argv [argc] = NULL;
    char log [PATH_MAX + 80];
    snprintf (log, sizeof log, "%s/%s.log", run->dir, name);
    pid_t pid = harness_spawn (argv, env, log);
    assert_true (pid > 0);
    cluster_track_pid (pid);
    return pid;
}


void
cluster_checkpoints (const char *root, char names [][64], int max, int *count)
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


json_t *
cluster_check_mirrored (cluster_run_t *run, uint64_t total, int members)
{
    assert_int_equal (run->status, 0);
    cluster_check_logs (run);
    assert_int_equal (cluster_count (run->rows, "failed"), 0);
    assert_int_equal (cluster_count (run->rows, "done"), 1);
    json_t *done = cluster_find (run->rows, "done", -1);
    assert_int_equal (cluster_index_of (run->rows, done), json_array_size (run->rows) - 1);
    assert_string_equal (cluster_str (done, "mode"), "mirrored");
    assert_int_equal (cluster_int (done, "steps"), total);
    assert_int_equal (json_array_size (json_object_get (done, "servers")), 0);
    assert_int_equal (cluster_count_match (run->rows, cluster_ev ("registered", "ps", -1)), 0);
    json_t *replicas = json_object_get (done, "replicas");
    if ((int) json_array_size (replicas) != members)
        fail_msg ("%s: the final ring has %zu members, expected %d", run->name,
                  json_array_size (replicas), members);
    size_t i;
    json_t *row;
    json_array_foreach (replicas, i, row) {
        if (cluster_int (row, "recorded") != (json_int_t) total || cluster_int (row,
                                                                                "duplicates") != 0)
            fail_msg ("%s: worker:%lld's replica recorded %lld batches and refused %lld "
                      "updates as repeats; expected %" PRIu64 " and 0 (every batch applied "
                      "exactly once)", run->name, (long long) cluster_int (row, "task"),
                      (long long) cluster_int (row, "recorded"),
                      (long long) cluster_int (row, "duplicates"), total);
        assert_int_equal (cluster_int (row, "updates"), cluster_int (done, "updates"));
    }
    //  Every evaluation compared the replicas' checksums: all equal.
    assert_true (cluster_int (done, "replica_checks") >= 1);
    assert_int_equal (cluster_int (done, "replica_mismatches"), 0);
    assert_int_equal (cluster_count (run->rows, "replicas"), cluster_int (done, "replica_checks"));
    json_array_foreach (run->rows, i, row)
        if (harness_event_is (row, "replicas")) {
            json_t *sums = json_object_get (row, "checksums");
            assert_true (json_is_true (json_object_get (row, "equal")));
            assert_true (json_array_size (sums) >= 1);
            for (size_t k = 1; k < json_array_size (sums); k++)
                assert_string_equal (json_string_value (json_array_get (sums, k)),
                                     json_string_value (json_array_get (sums, 0)));
        }
    json_t *checks = json_object_get (cluster_find (run->rows, "replicas", -1), "checksums");
    assert_string_equal (cluster_str (done, "replica_checksum"),
                         json_string_value (json_array_get (checks, 0)));
    assert_int_equal (cluster_int (done, "checkpoints"), cluster_count (run->rows, "checkpoint"));
    assert_int_equal (cluster_int (done, "worker_failures"),
                      cluster_count_match (run->rows, cluster_ev ("worker_failed", "worker", -1)));
    double accuracy = cluster_real (done, "test_accuracy");
    assert_true (accuracy > 0 && accuracy <= 1);
    return done;
}


cluster_run_t *
cluster_full_run (const char *name, const char *const *mode)
{
    cluster_run_t *run = cluster_run_new (name);
    cluster_args (run, (const char *[]) { "--local", "--log-dir", run->log_dir,
                                          "--job", run->job, "--model", "cnn", "--seed", "1",
                                          "--metrics", run->metrics, "--epochs", "5", NULL });
    cluster_mode_args (run, mode);
    cluster_run_start (run, NULL);
    cluster_run_finish (run, 0);
    return run;
}

double
cluster_scale (void)
{
    return s_scale;
}

int
cluster_main (const char *name, const struct CMUnitTest *tests, size_t count)
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
    return _cmocka_run_group_tests (name, tests, count, NULL, NULL);
}
