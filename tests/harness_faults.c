//  The failure cases that every mode whose variables live on the servers
//  runs (see harness_faults.h).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"
#include "harness_cluster.h"
#include "harness_faults.h"
#include "ps_clock.h"

void
cluster_kill_worker (const char *name, bool restart, const char *const *mode, int examples)
{
    cluster_run_t *run = cluster_run_new (name);
    int limit = cluster_limit (examples);
    int test_limit = cluster_test_limit (1000), epochs = 3;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    cluster_local_args (run, limit, test_limit, epochs);
    cluster_mode_args (run, mode);
    cluster_heartbeat_args (run, CLUSTER_KILL_TIMEOUT_MS);
    if (!restart)
        cluster_arg (run, "--no-restart");
    cluster_run_start (run, NULL);
    //  Mid-epoch: a sixth of the way in.
    cluster_match_t due = cluster_ev_min ("progress", NULL, -1, "step", (json_int_t) total / 6);
    json_t *progress = cluster_wait_event (run, due, CLUSTER_RUN_MS);
    json_int_t at_step = cluster_int (progress, "step");
    json_decref (progress);
    pid_t victim = cluster_task_pid (run, "worker", 1);
    double t_kill = ps_clock_ms ();
    assert_int_equal (kill (victim, SIGKILL), 0);
    json_t *failed = cluster_wait_event (run, cluster_ev ("worker_failed", "worker", 1),
                                         CLUSTER_EVENT_MS);
    double latency = ps_clock_ms () - t_kill;
    //  The supervisor sees the death at once, before the heartbeat timeout
    //  would: the reason says which of the two declared it (the time it
    //  took, in the summary, depends on the load).
    char reason [128];
    snprintf (reason, sizeof reason, "process %d killed by signal %d", (int) victim, SIGKILL);
    assert_string_equal (cluster_str (failed, "reason"), reason);
    json_int_t released = cluster_int (failed, "steps_released");
    json_decref (failed);
    pid_t again = 0;
    if (restart) {
        cluster_match_t due = cluster_ev_min ("registered", "worker", 1, "restarted", 1);
        json_t *back = cluster_wait_event (run, due, CLUSTER_EVENT_MS);
        again = (pid_t) cluster_int (back, "pid");
        assert_true (again != victim);
        json_decref (back);
    }
    cluster_run_finish (run, 0);
    uint64_t duplicates = cluster_check_done (run, total, 2);
    json_t *done = cluster_find (run->rows, "done", -1);
    assert_int_equal (cluster_int (done, "worker_failures"), 1);
    json_t *fail_event = cluster_find (run->rows, "worker_failed", 0);
    size_t after = cluster_index_of (run->rows, fail_event);
    if (!restart) {
        //  Nobody came back, and the progress after the failure counts one
        //  worker; the other did every step from then on.
        assert_int_equal (cluster_count (run->rows, "registered"), 4);
        size_t i;
        json_t *row;
        json_array_foreach (run->rows, i, row)
            if (i > after && harness_event_is (row, "progress"))
                assert_int_equal (cluster_int (row, "workers_alive"), 1);
    }
    else {
        assert_int_equal (cluster_count_match (run->rows, cluster_ev ("registered", "worker", 1)),
                          2);
        assert_true (harness_pid_gone (again));
    }
    assert_true (harness_pid_gone (victim));
    cluster_check_staleness (run, mode);
    cluster_check_no_children (run, 0, NULL);
    cluster_summary (run,
                     "%" PRIu64 " steps, killed at step %lld, detected in %.0f ms, %lld step%s "
                     "released, %" PRIu64 " duplicate pushes", total, (long long) at_step, latency,
                     (long long) released, released == 1 ? "" : "s", duplicates);
    cluster_run_destroy (run);
}


//  Wait for the stopped worker to be back: an event after the one at
//  index `after`, either "rejoined" (its heartbeat came back) or a
//  registration of the same process (its link gave up on the coordinator
//  while stopped and registered again). Returns the event's name.
static const char *
s_wait_back (cluster_run_t *run, size_t after, pid_t pid, int timeout_ms)
{
    cluster_match_t rejoined = cluster_ev ("rejoined", "worker", 1);
    cluster_match_t registered = cluster_ev ("registered", "worker", 1);
    double deadline = ps_clock_ms () + timeout_ms;
    while (true) {
        bool ended = !cluster_running (run);
        json_t *rows = harness_jsonl_read (run->metrics);
        assert_non_null (rows);
        size_t i;
        json_t *row;
        json_array_foreach (rows, i, row)
            if (i > after
            &&  (cluster_match (row, &rejoined)
                 || (cluster_match (row, &registered) && cluster_int (row, "pid") == pid))) {
                const char *how = cluster_match (row, &rejoined) ? "rejoined" : "registered again";
                json_decref (rows);
                return how;
            }
        json_decref (rows);
        if (ended || ps_clock_ms () > deadline) {
            cluster_print_logs (run);
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
s_wait_clock_moves (cluster_run_t *run, size_t failed_at)
{
    json_t *rows = harness_jsonl_read (run->metrics);
    assert_non_null (rows);
    json_int_t before = 0;
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row)
        if (i < failed_at && harness_event_is (row, "progress"))
            before = cluster_int (row, "step");
    json_decref (rows);
    cluster_match_t due = cluster_ev_min ("progress", NULL, -1, "step",
                                          before + 2 * (CLUSTER_STALENESS + 1) + 2);
    json_decref (cluster_wait_event (run, due, CLUSTER_EVENT_MS));
}

void
cluster_stop_worker (const char *name, const char *const *mode, int examples,
                     bool holds_step)
{
    cluster_run_t *run = cluster_run_new (name);
    int limit = cluster_limit (examples), test_limit = cluster_test_limit (1000), epochs = 4;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    cluster_local_args (run, limit, test_limit, epochs);
    cluster_mode_args (run, mode);
    cluster_heartbeat_args (run, CLUSTER_TIMEOUT_MS);
    cluster_run_start (run, NULL);
    //  The worker must be stopped in its training loop, holding a step:
    //  after it has its plan, model and data (its log says so once it
    //  registered), and right after a progress event, when both workers
    //  are in the middle of steps. The step it holds goes to the other
    //  worker when it is declared failed, and its push of that step after
    //  SIGCONT comes too late: a duplicate on every partition it reaches.
    char worker_log [PATH_MAX + 32];
    snprintf (worker_log, sizeof worker_log, "%s/worker1.log", run->log_dir);
    double deadline = ps_clock_ms () + CLUSTER_RUN_MS;
    while (!harness_file_contains (worker_log, "registered with the coordinator")) {
        if (ps_clock_ms () > deadline || !cluster_running (run)) {
            cluster_print_logs (run);
            fail_msg ("worker:1 did not say that it registered");
        }
        usleep (10000);
    }
    cluster_match_t due = cluster_ev_min ("progress", NULL, -1, "step", (json_int_t) total / 8);
    json_t *progress = cluster_wait_event (run, due, CLUSTER_RUN_MS);
    json_decref (progress);
    json_t *rows = harness_jsonl_read (run->metrics);
    assert_non_null (rows);
    size_t seen = cluster_count (rows, "progress");
    json_decref (rows);
    while ((rows = harness_jsonl_read (run->metrics)) && cluster_count (rows, "progress") == seen) {
        json_decref (rows);
        usleep (5000);
    }
    json_int_t at_step = cluster_int (cluster_find (rows, "progress", -1), "step");
    json_decref (rows);
    pid_t victim = cluster_task_pid (run, "worker", 1);
    double t_stop = ps_clock_ms ();
    assert_int_equal (kill (victim, SIGSTOP), 0);
    json_t *failed = cluster_wait_event (run, cluster_ev ("worker_failed", "worker", 1),
                                         CLUSTER_EVENT_MS);
    double latency = ps_clock_ms () - t_stop;
    double silent = cluster_real (failed, "silent_ms");
    json_int_t released = cluster_int (failed, "steps_released");
    assert_non_null (strstr (cluster_str (failed, "reason"), "no heartbeat"));
    json_decref (failed);
    rows = harness_jsonl_read (run->metrics);
    assert_non_null (rows);
    json_t *failed_row = cluster_find_match (rows, cluster_ev ("worker_failed", "worker", 1), 0);
    size_t failed_at = cluster_index_of (rows, failed_row);
    json_decref (rows);
    //  Declared failed by the heartbeat timeout: not before it, on the
    //  coordinator's clock (when the worker went silent, by the test's
    //  clock, depends on how its link thread was scheduled before the
    //  stop), and before the default timeout of 3 s would have run out, so
    //  that a coordinator which ignored --heartbeat-timeout-ms fails. The
    //  coordinator checks every 50 ms; only its not being scheduled for 2 s
    //  could make it that late.
    if (silent < CLUSTER_TIMEOUT_MS || silent >= CLUSTER_DEFAULT_TIMEOUT_MS)
        fail_msg ("worker declared failed after %.0f ms of silence (%.0f ms after SIGSTOP): "
                  "expected past the %d ms timeout, and before the default %d ms", silent,
                  latency, CLUSTER_TIMEOUT_MS, CLUSTER_DEFAULT_TIMEOUT_MS);
    if (holds_step && released < 1)
        fail_msg ("the stopped worker held no step (steps_released 0): it was not training");
    if (mode)
        s_wait_clock_moves (run, failed_at);
    usleep (1000 * 1000);
    if (!cluster_running (run)) {
        kill (victim, SIGCONT);
        fail_msg ("the run ended while the worker was stopped: make it longer");
    }
    double t_cont = ps_clock_ms ();
    assert_int_equal (kill (victim, SIGCONT), 0);
    const char *how = s_wait_back (run, failed_at, victim, CLUSTER_EVENT_MS);
    double rejoin = ps_clock_ms () - t_cont;
    cluster_run_finish (run, 0);
    uint64_t duplicates = cluster_check_done (run, total, 2);
    //  The late push was refused by the servers' ledgers: duplicates, and
    //  still exactly total updates everywhere (checked above).
    if (holds_step && duplicates == 0) {
        cluster_print_logs (run);
        fail_msg ("no duplicate push: the stopped worker's step was not pushed late, or was "
                  "applied twice");
    }
    //  The same process came back: no new incarnation.
    assert_int_equal (cluster_count_match (run->rows, cluster_ev_min ("registered", "worker", 1,
                                                                      "restarted", 1)), 0);
    assert_int_equal (cluster_int (cluster_find (run->rows, "done", -1), "worker_failures"), 1);
    cluster_check_staleness (run, mode);
    cluster_check_no_children (run, 0, NULL);
    cluster_summary (run, "%" PRIu64 " steps, stopped at step %lld, declared failed after %.0f ms "
                     "(silent %.0f ms), %lld step%s released, back %.0f ms after SIGCONT (%s), %"
                     PRIu64 " duplicate pushes", total, (long long) at_step, latency, silent,
                     (long long) released, released == 1 ? "" : "s", rejoin, how, duplicates);
    cluster_run_destroy (run);
}


void
cluster_kill_server (const char *name, const char *const *mode, int examples)
{
    cluster_run_t *run = cluster_run_new (name);
    int limit = cluster_limit (examples);
    int test_limit = cluster_test_limit (1000), epochs = 3;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    cluster_local_args (run, limit, test_limit, epochs);
    cluster_mode_args (run, mode);
    cluster_heartbeat_args (run, CLUSTER_TIMEOUT_MS);
    cluster_arg (run, "--checkpoint-steps");
    cluster_arg (run, "%" PRIu64, total / 6);
    cluster_run_start (run, NULL);
    //  A third of the way in, a few steps after the checkpoint there (the
    //  next is a sixth of the run away). Not during a checkpoint: a server
    //  that dies while the coordinator waits for its snapshot stalls the
    //  coordinator for its 30 s client timeout (a known limitation).
    cluster_match_t due = cluster_ev_min ("checkpoint", NULL, -1, "step", (json_int_t) total / 3);
    json_t *ckpt = cluster_wait_event (run, due, CLUSTER_RUN_MS);
    json_int_t at_step = cluster_int (ckpt, "step");
    json_decref (ckpt);
    usleep (50 * 1000);
    json_t *rows;
    pid_t victim = cluster_task_pid (run, "ps", 1);
    double t_kill = ps_clock_ms ();
    assert_int_equal (kill (victim, SIGKILL), 0);
    json_t *failed = cluster_wait_event (run, cluster_ev ("server_failed", NULL, 1),
                                         CLUSTER_EVENT_MS);
    double latency = ps_clock_ms () - t_kill;
    char reason [128];
    snprintf (reason, sizeof reason, "process %d killed by signal %d", (int) victim, SIGKILL);
    assert_string_equal (cluster_str (failed, "reason"), reason);
    json_decref (failed);
    json_t *recovered = cluster_wait_event (run, cluster_ev ("recovered", NULL, -1),
                                            CLUSTER_EVENT_MS);
    //  One failure, one event: the restart that follows is a "registered"
    //  event, not a second failure.
    double recovery = ps_clock_ms () - t_kill;
    json_decref (recovered);
    cluster_run_finish (run, 0);
    //  Restored counters plus the rewound steps trained once more: exactly
    //  total updates on every partition, and no duplicates.
    assert_int_equal (cluster_check_done (run, total, 2), 0);
    rows = run->rows;
    assert_int_equal (cluster_count (rows, "server_failed"), 1);
    assert_int_equal (cluster_count (rows, "recovered"), 1);
    recovered = cluster_find (rows, "recovered", 0);
    assert_string_equal (cluster_str (recovered, "reason"), "recovering from a server failure");
    //  A new generation: work handed out before the restore is told apart.
    assert_true (cluster_int (recovered, "generation") > 0);
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
    assert_string_equal (cluster_str (recovered, "checkpoint"), cluster_str (ckpt, "dir"));
    assert_int_equal (cluster_int (recovered, "step"), cluster_int (ckpt, "step"));
    assert_true (cluster_int (ckpt, "step") >= (json_int_t) total / 6);
    json_int_t lost = cluster_int (recovered, "steps_lost");
    assert_true (lost >= 0);
    //  The server was restarted as a new incarnation; the failure is in
    //  the record.
    json_t *back = cluster_find_match (rows, cluster_ev_min ("registered", "ps", 1, "restarted",
                                                             1), 0);
    assert_non_null (back);
    assert_true (cluster_int (back, "pid") != victim);
    assert_true (cluster_index_of (rows, back) < cluster_index_of (rows, recovered));
    assert_int_equal (cluster_int (cluster_find (rows, "done", -1), "recoveries"), 1);
    assert_int_equal (cluster_int (cluster_find (rows, "done", -1), "worker_failures"), 0);
    cluster_check_staleness (run, mode);
    cluster_check_no_children (run, 0, NULL);
    cluster_summary (run,
                     "%" PRIu64 " steps, killed 50 ms after checkpoint %lld, detected in %.0f ms, "
                     "recovered from step %lld in %.0f ms, %lld steps trained again", total,
                     (long long) at_step,
                     latency, (long long) cluster_int (recovered,
                                                       "step"), recovery, (long long) lost);
    cluster_run_destroy (run);
}

void
cluster_kill_coordinator (const char *name, const char *const *mode, int examples)
{
    cluster_run_t *run = cluster_run_new (name);
    char root [PATH_MAX];
    snprintf (root, sizeof root, "%s/checkpoints", run->dir);
    int limit = cluster_limit (examples), test_limit = cluster_test_limit (1000), epochs = 3;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    cluster_local_args (run, limit, test_limit, epochs);
    cluster_mode_args (run, mode);
    cluster_heartbeat_args (run, CLUSTER_KILL_TIMEOUT_MS);
    cluster_args (run, (const char *[]) { "--checkpoint-dir", root, NULL });
    cluster_arg (run, "--checkpoint-steps");
    cluster_arg (run, "%" PRIu64, total / 6);
    //  The same command resumes, with --resume.
    int base_argc = run->argc;
    cluster_run_start (run, NULL);
    cluster_match_t due = cluster_ev_min ("checkpoint", NULL, -1, "step", (json_int_t) total / 3);
    json_t *ckpt = cluster_wait_event (run, due, CLUSTER_RUN_MS);
    json_int_t ckpt_step = cluster_int (ckpt, "step");
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
    //  PR_SET_PDEATHSIG: every child dies with the coordinator. Without it
    //  none would ever exit; 10 s leaves room for sanitized processes
    //  tearing down on a loaded machine (gone_ms below says how long it took).
    cluster_check_no_children (run, (int) (10000 - (ps_clock_ms () - t_kill)), NULL);
    double gone_ms = ps_clock_ms () - t_kill;
    cluster_check_logs (run);
    assert_int_equal (cluster_count (run->rows, "done"), 0);

    //  Resume: the newest checkpoint there is (the coordinator may have
    //  written one more after the event we saw).
    char names [16][64];
    int count;
    cluster_checkpoints (root, names, 16, &count);
    assert_true (count >= 1);
    char newest [PATH_MAX + 64];
    snprintf (newest, sizeof newest, "%s/%s", root, names [count - 1]);
    json_int_t newest_step = strtoll (names [count - 1] + 5, NULL, 10);
    assert_true (newest_step >= ckpt_step);
    char resumed_name [128];
    snprintf (resumed_name, sizeof resumed_name, "%s, resumed", name);
    cluster_run_t *resumed = cluster_run_resumed (run, base_argc, resumed_name);
    cluster_run_start (resumed, NULL);
    cluster_run_finish (resumed, 0);
    //  Nothing after the checkpoint is trained twice: exactly total
    //  updates per partition, no duplicates, and the workers completed
    //  exactly the steps the checkpoint had not.
    assert_int_equal (cluster_check_done (resumed, total, 2), 0);
    assert_int_equal (cluster_count (resumed->rows, "recovered"), 1);
    json_t *recovered = cluster_find (resumed->rows, "recovered", 0);
    assert_string_equal (cluster_str (recovered, "reason"), "resuming");
    assert_string_equal (cluster_str (recovered, "checkpoint"), newest);
    assert_int_equal (cluster_int (recovered, "step"), newest_step);
    json_t *started = cluster_find (resumed->rows, "started", 0);
    assert_true (cluster_index_of (resumed->rows, recovered) < cluster_index_of (resumed->rows,
                                                                                 started));
    cluster_check_no_children (resumed, 0, NULL);
    cluster_summary (run,
                     "%" PRIu64 " steps, killed after checkpoint %lld, it and its children gone "
                     "in %.0f ms",
                     total, (long long) ckpt_step, gone_ms);
    cluster_summary (resumed, "resumed from step %lld, trained the other %lld",
                     (long long) newest_step, (long long) (total - (uint64_t) newest_step));
    cluster_check_staleness (resumed, mode);
    cluster_run_destroy (run);
    cluster_run_destroy (resumed);
}
