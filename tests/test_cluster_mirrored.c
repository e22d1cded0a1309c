//  The cluster in mirrored mode:
//    k. a ring of replicas trains every batch once with the replicas equal
//       at every evaluation; a worker killed (kill -9) leaves a smaller
//       ring that goes on; and a run resumes across modes (async ->
//       mirrored -> async) from the other mode's checkpoints.

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
#include "ps_clock.h"

//  ---------------------------------------------------------------------
//  k. Mirrored mode: a ring of replicas


//  Three workers, one replica each: the ring trains every batch once, the
//  global step is one batch per member, the replicas stay bitwise equal,
//  and the model learns.
static void
test_mirrored_run (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("mirrored, 3 workers");
    int limit = cluster_limit (6400), test_limit = cluster_test_limit (1000), epochs = 3;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    cluster_local_args (run, limit, test_limit, epochs);
    cluster_args (run, (const char *[]) { "--mode", "mirrored", "--workers", "3", NULL });
    cluster_run_start (run, NULL);
    cluster_run_finish (run, 0);
    json_t *done = cluster_check_mirrored (run, total, 3);
    //  One update per global step of three batches (the last may be short).
    assert_int_equal (cluster_int (done, "updates"), (total + 2) / 3);
    assert_int_equal (cluster_count (run->rows, "registered"), 3);
    assert_int_equal (cluster_count (run->rows, "ring"), 1);
    //  Each member trained a third of the batches.
    json_t *steps = json_object_get (done, "worker_steps");
    for (int w = 0; w < 3; w++) {
        json_int_t n = json_integer_value (json_array_get (steps, (size_t) w));
        assert_true (n >= (json_int_t) total / 3 && n <= (json_int_t) total / 3 + 1);
    }
    //  The ring evaluates, each member a shard, the whole test subset.
    assert_int_equal (cluster_count (run->rows, "eval"), epochs);
    json_t *first = cluster_find (run->rows, "eval", 0), *last = cluster_find (run->rows, "eval",
                                                                               -1);
    assert_string_equal (cluster_str (last, "role"), "ring");
    assert_int_equal (cluster_int (last, "task"), 3);
    assert_int_equal (cluster_int (last, "count"), test_limit);
    double acc0 = cluster_real (first, "test_accuracy"), acc = cluster_real (last, "test_accuracy");
    double bound = cluster_scale () >= 1 ? 0.7 : 0.5;
    if (!(acc > acc0 && acc > bound))
        fail_msg ("test accuracy %.4f after epoch 1, %.4f after epoch %d: expected a rise, "
                  "to above %.2f", acc0, acc, epochs, bound);
    cluster_check_no_children (run, 0, NULL);
    cluster_summary (run, "%" PRIu64 " batches in %lld updates, %lld replica checks equal, test "
                     "accuracy %.3f -> %.3f, %.0f samples/s", total,
                     (long long) cluster_int (done, "updates"),
                     (long long) cluster_int (done, "replica_checks"), acc0, acc,
                     cluster_real (done, "samples_per_s"));
    cluster_run_destroy (run);
}

//  Members of one host reach each other over ipc:// (each worker
//  registers its ring's ipc:// endpoint, ps_host.h), and over tcp with
//  same-host peers turned off (PS_SAME_HOST=tcp); every batch is trained
//  once and the replicas stay equal either way.
static void
s_same_host (bool off)
{
    cluster_run_t *run = cluster_run_new (off ? "mirrored, PS_SAME_HOST=tcp"
                                          : "mirrored, ring over ipc");
    int limit = cluster_limit (1600), test_limit = cluster_test_limit (500), epochs = 1;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    cluster_local_args (run, limit, test_limit, epochs);
    cluster_args (run, (const char *[]) { "--mode", "mirrored", "--workers", "2", NULL });
    const char *env [] = { "PS_SAME_HOST=tcp", NULL };
    cluster_run_start (run, off ? env : NULL);
    cluster_run_finish (run, 0);
    cluster_check_mirrored (run, total, 2);
    for (int w = 0; w < 2; w++) {
        char log [PATH_MAX + 32];
        snprintf (log, sizeof log, "%s/worker%d.log", run->log_dir, w);
        const char *said = "is on this host, reached at ipc://";
        if (harness_file_contains (log, said) == off) {
            harness_print_log (log);
            fail_msg ("%s: worker:%d %s \"%s\"", run->name, w, off ? "said" : "did not say",
                      said);
        }
    }
    cluster_summary (run, "%" PRIu64 " batches, ring over %s", total, off ? "tcp" : "ipc");
    cluster_run_destroy (run);
}

static void
test_mirrored_same_host (void **state)
{
    (void) state;
    s_same_host (false);
    s_same_host (true);
}

//  kill -9 of a member mid-run: the ring aborts the step, re-forms from the
//  survivors, takes the restarted worker back in at a step boundary, and
//  every batch is still trained exactly once.
static void
test_mirrored_kill_worker (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("mirrored, kill -9 worker");
    int limit = cluster_limit (12800), test_limit = cluster_test_limit (1000), epochs = 3;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    cluster_local_args (run, limit, test_limit, epochs);
    cluster_heartbeat_args (run, CLUSTER_TIMEOUT_MS);
    cluster_args (run, (const char *[]) { "--mode", "mirrored", "--workers", "3", NULL });
    cluster_run_start (run, NULL);
    cluster_match_t due = cluster_ev_min ("progress", NULL, -1, "step", (json_int_t) total / 4);
    json_t *progress = cluster_wait_event (run, due, CLUSTER_RUN_MS);
    json_decref (progress);
    pid_t victim = cluster_task_pid (run, "worker", 1);
    assert_int_equal (kill (victim, SIGKILL), 0);
    json_decref (cluster_wait_event (run, cluster_ev ("worker_failed", "worker", 1),
                                     CLUSTER_EVENT_MS));
    due = cluster_ev_min ("registered", "worker", 1, "restarted", 1);
    json_t *back = cluster_wait_event (run, due, CLUSTER_EVENT_MS);
    pid_t again = (pid_t) cluster_int (back, "pid");
    json_decref (back);
    cluster_run_finish (run, 0);
    json_t *done = cluster_check_mirrored (run, total, 3);
    assert_int_equal (cluster_int (done, "worker_failures"), 1);
    //  The ring was formed at start, without worker:1, and with it again.
    size_t rings = cluster_count (run->rows, "ring");
    assert_true (rings >= 3);
    json_t *last_ring = cluster_find (run->rows, "ring", -1);
    assert_int_equal (json_array_size (json_object_get (last_ring, "workers")), 3);
    bool without = false;
    for (size_t r = 1; r < rings; r++)
        if (json_array_size (json_object_get (cluster_find (run->rows, "ring", (int) r),
                                              "workers")) == 2)
            without = true;
    assert_true (without);
    assert_true (harness_pid_gone (victim));
    assert_true (harness_pid_gone (again));
    cluster_check_no_children (run, 0, NULL);
    cluster_summary (run, "%zu rings; every batch once; replicas equal in %lld checks", rings,
                     (long long) cluster_int (done, "replica_checks"));
    cluster_run_destroy (run);
}

//  A checkpoint of one mode resumes in the other: async for an epoch,
//  mirrored for the second from its checkpoint (re-partitioned into whole
//  variables), async again for the third from the mirrored one. No batch
//  is trained twice or lost across the three runs.
static void
test_mirrored_resume_across_modes (void **state)
{
    (void) state;
    int limit = cluster_limit (6400), test_limit = cluster_test_limit (1000);
    uint64_t per_epoch = cluster_steps_per_epoch (limit);
    char ckpt [PATH_MAX];
    cluster_run_t *first = cluster_run_new ("async, then resumed");
    snprintf (ckpt, sizeof ckpt, "%s/checkpoints", first->dir);
    cluster_local_args (first, limit, test_limit, 1);
    cluster_args (first, (const char *[]) { "--checkpoint-dir", ckpt, NULL });
    cluster_run_start (first, NULL);
    cluster_run_finish (first, 0);
    cluster_check_done (first, per_epoch, 2);

    cluster_run_t *second = cluster_run_new ("mirrored from async");
    cluster_local_args (second, limit, test_limit, 2);
    cluster_args (second, (const char *[]) { "--checkpoint-dir", ckpt, "--resume", "--mode",
                                             "mirrored", NULL });
    cluster_run_start (second, NULL);
    cluster_run_finish (second, 0);
    json_t *recovered = cluster_find (second->rows, "recovered", 0);
    assert_non_null (recovered);
    assert_string_equal (cluster_str (recovered, "reason"), "resuming");
    assert_int_equal (cluster_int (recovered, "step"), per_epoch);
    //  The replicas' ledgers hold the first run's batches and their own.
    cluster_check_mirrored (second, 2 * per_epoch, 2);
    assert_true (harness_file_contains (second->log, "re-partitioned"));

    cluster_run_t *third = cluster_run_new ("async from mirrored");
    cluster_local_args (third, limit, test_limit, 3);
    cluster_args (third, (const char *[]) { "--checkpoint-dir", ckpt, "--resume", NULL });
    cluster_run_start (third, NULL);
    cluster_run_finish (third, 0);
    assert_int_equal (cluster_int (cluster_find (third->rows, "recovered", 0), "step"),
                      2 * per_epoch);
    json_t *done = cluster_find (third->rows, "done", -1);
    assert_int_equal (cluster_int (done, "steps"), 3 * per_epoch);
    //  No server saw a batch it had applied before.
    size_t s;
    json_t *server;
    json_array_foreach (json_object_get (done, "servers"), s, server)
        assert_int_equal (cluster_int (server, "duplicates"), 0);
    assert_true (harness_file_contains (third->log, "re-partitioned"));
    double accuracy = cluster_real (done, "test_accuracy");
    assert_true (accuracy > cluster_real (cluster_find (first->rows, "done", -1),
                                          "test_accuracy") - 0.02);
    cluster_summary (third, "async -> mirrored -> async: %" PRIu64 " steps, test accuracy %.3f",
                     3 * per_epoch, accuracy);
    cluster_run_destroy (first);
    cluster_run_destroy (second);
    cluster_run_destroy (third);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_mirrored_run, cluster_teardown),
        cmocka_unit_test_teardown (test_mirrored_same_host, cluster_teardown),
        cmocka_unit_test_teardown (test_mirrored_kill_worker, cluster_teardown),
        cmocka_unit_test_teardown (test_mirrored_resume_across_modes, cluster_teardown),
    };
    return CLUSTER_MAIN ("mirrored", tests);
}
