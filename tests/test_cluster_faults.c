//  The cluster under failures, in async mode (the cases that ssp and sync
//  run too are in harness_faults.c):
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
//    h. after the last step, during the final evaluation: kill -9 of a
//       server (it is restored from the final checkpoint), and SIGINT to
//       the coordinator (it stops at once, with that checkpoint).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"
#include "harness_cluster.h"
#include "harness_faults.h"
#include "ps_clock.h"

//  ---------------------------------------------------------------------
//  c. A worker killed


static void
test_kill_worker_no_restart (void **state)
{
    (void) state;
    cluster_kill_worker ("kill -9 worker, no restart", false, NULL, 12800);
}

static void
test_kill_worker_restart (void **state)
{
    (void) state;
    cluster_kill_worker ("kill -9 worker, restart", true, NULL, 12800);
}


//  ---------------------------------------------------------------------
//  d. A worker stopped past the heartbeat timeout


static void
test_stop_worker (void **state)
{
    (void) state;
    cluster_stop_worker ("SIGSTOP worker", NULL, 12800, true);
}


//  ---------------------------------------------------------------------
//  e. A server killed


static void
test_kill_server (void **state)
{
    (void) state;
    cluster_kill_server ("kill -9 server", NULL, 12800);
}


//  ---------------------------------------------------------------------
//  f. The coordinator killed, then resumed


static void
test_kill_coordinator_resume (void **state)
{
    (void) state;
    cluster_kill_coordinator ("kill -9 coordinator", NULL, 12800);
    int limit = cluster_limit (12800), test_limit = cluster_test_limit (1000), epochs = 3;

    //  --resume with no checkpoint: a clear failure, naming the directory,
    //  before anything is started (exit 2, a mistake in the command).
    cluster_run_t *empty = cluster_run_new ("resume, no checkpoint");
    char none [PATH_MAX + 16];
    snprintf (none, sizeof none, "%s/none", empty->dir);
    assert_int_equal (mkdir (none, 0755), 0);
    cluster_local_args (empty, limit, test_limit, epochs);
    cluster_args (empty, (const char *[]) { "--checkpoint-dir", none, "--resume", NULL });
    cluster_run_start (empty, NULL);
    cluster_run_finish (empty, 2);
    char message [PATH_MAX + 128];
    snprintf (message, sizeof message, "checkpoint directory %s: no usable checkpoint to "
              "resume from", none);
    if (!harness_file_contains (empty->log, message)) {
        harness_print_log (empty->log);
        fail_msg ("the coordinator does not say: %s", message);
    }
    //  No run began: nothing registered, nothing was written.
    assert_int_equal (json_array_size (empty->rows), 0);
    cluster_check_logs (empty);
    cluster_summary (empty, "refused: %s", message);
    cluster_run_destroy (empty);
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
    cluster_run_t *run = cluster_run_new (name);
    cluster_local_args (run, limit, test_limit, epochs);
    cluster_args (run, (const char *[]) { "--checkpoint-dir", root, "--keep", "3", "--resume",
                                          NULL });
    cluster_arg (run, "--checkpoint-steps");
    cluster_arg (run, "%" PRIu64, total / 4);
    cluster_run_start (run, NULL);
    cluster_run_finish (run, 0);
    char warning [PATH_MAX + 64];
    snprintf (warning, sizeof warning, "checkpoint %s is not usable", damaged);
    if (!harness_file_contains (run->log, warning)) {
        harness_print_log (run->log);
        fail_msg ("the coordinator does not warn: %s", warning);
    }
    assert_int_equal (cluster_check_done (run, total, 2), 0);
    json_t *recovered = cluster_find (run->rows, "recovered", 0);
    assert_non_null (recovered);
    assert_string_equal (cluster_str (recovered, "reason"), "resuming");
    assert_string_equal (cluster_str (recovered, "checkpoint"), expect);
    cluster_summary (run, "skipped %s, resumed from %s", strrchr (damaged, '/') + 1,
                     strrchr (expect, '/') + 1);
    cluster_run_destroy (run);
}

static void
test_damaged_checkpoint (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("checkpoints, keep 3");
    char root [PATH_MAX];
    snprintf (root, sizeof root, "%s/checkpoints", run->dir);
    int limit = cluster_limit (6400), test_limit = cluster_test_limit (1000), epochs = 2;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    cluster_local_args (run, limit, test_limit, epochs);
    cluster_args (run, (const char *[]) { "--checkpoint-dir", root, "--keep", "3", NULL });
    cluster_arg (run, "--checkpoint-steps");
    cluster_arg (run, "%" PRIu64, total / 4);
    cluster_run_start (run, NULL);
    cluster_run_finish (run, 0);
    assert_int_equal (cluster_check_done (run, total, 2), 0);
    //  Five checkpoints were written (the initial state, every quarter);
    //  the newest three are kept, the last holding the finished run.
    assert_true (cluster_count (run->rows, "checkpoint") >= 4);
    char names [16][64];
    int count;
    cluster_checkpoints (root, names, 16, &count);
    assert_int_equal (count, 3);
    char newest [PATH_MAX + 64], before [PATH_MAX + 64], path [2 * PATH_MAX];
    snprintf (newest, sizeof newest, "%s/%s", root, names [2]);
    snprintf (before, sizeof before, "%s/%s", root, names [1]);
    assert_string_equal (cluster_str (cluster_find (run->rows, "checkpoint", -1), "dir"), newest);
    assert_int_equal (strtoll (names [2] + 5, NULL, 10), total);
    cluster_summary (run, "%" PRIu64 " steps, %zu checkpoints written, kept %s %s %s", total,
                     cluster_count (run->rows, "checkpoint"), names [0], names [1], names [2]);

    //  A snapshot file of the newest cut in half.
    s_largest_snap (newest, path, sizeof path);
    s_truncate_half (path);
    s_resume_damaged ("truncated snapshot file", root, limit, test_limit, epochs, total, newest,
                      before);
    //  That run wrote the final checkpoint anew; now its manifest is cut.
    cluster_checkpoints (root, names, 16, &count);
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
    cluster_run_t *other = cluster_run_new ("resume, another job");
    cluster_local_args (other, limit, test_limit, epochs);
    cluster_args (other, (const char *[]) { "--checkpoint-dir", root, "--batch", "32", "--resume",
                                            NULL });
    cluster_run_start (other, NULL);
    cluster_run_finish (other, 1);
    cluster_check_logs (other);
    if (!harness_file_contains (other->log, "was written by a job with another batch_size")
        ||  !harness_file_contains (other->log, root)) {
        harness_print_log (other->log);
        fail_msg ("resuming with another batch size: no message naming the checkpoint and "
                  "batch_size");
    }
    assert_int_equal (cluster_count (other->rows, "done") + cluster_count (other->rows,
                                                                           "progress"), 0);
    assert_int_equal (cluster_count (other->rows, "failed"), 1);
    cluster_check_no_children (other, 0, NULL);
    cluster_summary (other, "refused: another batch_size");
    cluster_run_destroy (other);
    cluster_run_destroy (run);
}

//  ---------------------------------------------------------------------
//  h. After the last step: a server killed, a stop signal

//  A run whose evaluator is stopped (SIGSTOP) as soon as it registers,
//  so that every evaluation, the final one included, waits for it for as
//  long as the test holds it: the heartbeat timeout is far beyond the
//  run, so nothing is declared failed that the test does not kill, and
//  workers never evaluate while the evaluator lives. Returns the run at
//  its final checkpoint, whose directory is in final_dir, the evaluator's
//  pid in *evaluator. (Should an assertion fail while it is stopped, it
//  dies with its coordinator: children have PR_SET_PDEATHSIG SIGKILL.)
static cluster_run_t *
s_at_final_checkpoint (const char *name, uint64_t *total, char *final_dir, size_t len,
                       pid_t *evaluator)
{
    cluster_run_t *run = cluster_run_new (name);
    int limit = cluster_limit (12800), test_limit = cluster_test_limit (1000), epochs = 3;
    *total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    cluster_local_args (run, limit, test_limit, epochs);
    //  An evaluator of cores of its own (--cores 8), which the final
    //  evaluation waits for (one in the idle time would leave it to a
    //  worker once the steps are done).
    cluster_args (run, (const char *[]) { "--evaluator", "--cores", "8", "--heartbeat-ms", "100",
                                          "--heartbeat-timeout-ms", "120000", NULL });
    cluster_arg (run, "--checkpoint-steps");
    cluster_arg (run, "%" PRIu64, *total / 6);
    cluster_run_start (run, NULL);
    json_decref (cluster_wait_event (run, cluster_ev ("registered", "evaluator", 0),
                                     CLUSTER_EVENT_MS));
    *evaluator = cluster_task_pid (run, "evaluator", 0);
    assert_int_equal (kill (*evaluator, SIGSTOP), 0);
    json_t *final = cluster_wait_event (run, cluster_ev_min ("checkpoint", NULL, -1, "step",
                                                             (json_int_t) *total),
                                        CLUSTER_RUN_MS);
    snprintf (final_dir, len, "%s", cluster_str (final, "dir"));
    json_decref (final);
    return run;
}

//  The final checkpoint is written as soon as the last step is done, and
//  the final evaluation comes after it: a server lost while that runs is
//  restored from the final checkpoint, and no step is trained again.
static void
test_kill_server_after_last_step (void **state)
{
    (void) state;
    uint64_t total;
    char final_dir [PATH_MAX];
    pid_t evaluator;
    cluster_run_t *run = s_at_final_checkpoint ("kill -9 server after the last step", &total,
                                                final_dir, sizeof final_dir, &evaluator);
    pid_t victim = cluster_task_pid (run, "ps", 1);
    assert_int_equal (kill (victim, SIGKILL), 0);
    json_decref (cluster_wait_event (run, cluster_ev ("recovered", NULL, -1), CLUSTER_EVENT_MS));
    assert_int_equal (kill (evaluator, SIGCONT), 0);
    cluster_run_finish (run, 0);
    assert_int_equal (cluster_check_done (run, total, 2), 0);
    json_t *rows = run->rows;
    //  Restored from the final checkpoint: nothing to train again, and no
    //  second final checkpoint.
    assert_int_equal (cluster_count (rows, "server_failed"), 1);
    assert_int_equal (cluster_count (rows, "recovered"), 1);
    json_t *recovered = cluster_find (rows, "recovered", 0);
    assert_string_equal (cluster_str (recovered, "checkpoint"), final_dir);
    assert_int_equal (cluster_int (recovered, "step"), (json_int_t) total);
    assert_int_equal (cluster_int (recovered, "steps_lost"), 0);
    assert_int_equal (cluster_count_match (rows, cluster_ev_min ("checkpoint", NULL, -1, "step",
                                                                 (json_int_t) total)), 1);
    //  The final evaluation, of the parameters after the last step, is in
    //  the done record.
    json_t *eval = cluster_find (rows, "eval", -1);
    assert_non_null (eval);
    assert_int_equal (cluster_int (eval, "step"), (json_int_t) total);
    json_t *done = cluster_find (rows, "done", 0);
    assert_true (json_is_real (json_object_get (done, "test_accuracy")));
    cluster_summary (run, "ps:1 killed after %s; restored from it, 0 steps lost",
                     strrchr (final_dir, '/') + 1);
    cluster_run_destroy (run);
}

//  A stop signal once the final checkpoint is written stops the run at
//  once (after a few heartbeats for an evaluation in flight), with that
//  checkpoint as its own: it neither writes another nor waits for the
//  final evaluation.
static void
test_stop_signal_after_last_step (void **state)
{
    (void) state;
    uint64_t total;
    char final_dir [PATH_MAX];
    pid_t evaluator;
    cluster_run_t *run = s_at_final_checkpoint ("SIGINT after the last step", &total, final_dir,
                                                sizeof final_dir, &evaluator);
    assert_int_equal (kill (run->pid, SIGINT), 0);
    json_t *stopped = cluster_wait_event (run, cluster_ev ("stopped", NULL, -1),
                                          CLUSTER_EVENT_MS);
    assert_int_equal (kill (evaluator, SIGCONT), 0);
    assert_true (json_is_true (json_object_get (stopped, "checkpointed")));
    assert_int_equal (cluster_int (stopped, "checkpoint_step"), (json_int_t) total);
    assert_int_equal (cluster_int (stopped, "steps"), (json_int_t) total);
    json_decref (stopped);
    cluster_run_finish (run, 128 + SIGINT);
    //  Its last word names that checkpoint, as any stop's does.
    char said [96];
    snprintf (said, sizeof said, "steps; the checkpoint of step %" PRIu64 " in ", total);
    if (!harness_file_contains (run->log, said)) {
        harness_print_log (run->log);
        fail_msg ("the coordinator's exit message does not say: %s", said);
    }
    assert_int_equal (cluster_count_match (run->rows, cluster_ev_min ("checkpoint", NULL, -1,
                                                                      "step",
                                                                      (json_int_t) total)), 1);
    assert_int_equal (cluster_count (run->rows, "done"), 0);
    cluster_summary (run, "stopped with %s, no checkpoint after it", strrchr (final_dir, '/') + 1);
    cluster_run_destroy (run);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_kill_worker_no_restart, cluster_teardown),
        cmocka_unit_test_teardown (test_kill_worker_restart, cluster_teardown),
        cmocka_unit_test_teardown (test_stop_worker, cluster_teardown),
        cmocka_unit_test_teardown (test_kill_server, cluster_teardown),
        cmocka_unit_test_teardown (test_kill_coordinator_resume, cluster_teardown),
        cmocka_unit_test_teardown (test_damaged_checkpoint, cluster_teardown),
        cmocka_unit_test_teardown (test_kill_server_after_last_step, cluster_teardown),
        cmocka_unit_test_teardown (test_stop_signal_after_last_step, cluster_teardown),
    };
    return CLUSTER_MAIN ("faults", tests);
}
