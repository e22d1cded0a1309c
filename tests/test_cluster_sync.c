//  The cluster in sync mode (synchronous training on the servers):
//    n. a run in which every step is recorded once and every partition
//       applies one update per round (--overlap ignored, with a warning),
//       the kill -9 cases of a worker (without restarts), of a server and
//       of the coordinator, and SIGSTOP of a worker (harness_faults.h), on
//       half of async's data: a round waits for its slowest step, so sync
//       trains more slowly on 2 cores.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>

#include <jansson.h>

#include "harness.h"
#include "harness_cluster.h"
#include "harness_faults.h"

//  ---------------------------------------------------------------------
//  n. Sync mode

//  A short sync run: every step recorded once, one update per round on
//  every partition (cluster_check_done), rounds of two steps while both workers
//  live, an evaluation after each epoch, and --overlap ignored with a
//  warning.
static void
test_sync_run (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("sync run");
    int limit = cluster_limit (3200), test_limit = cluster_test_limit (500), epochs = 2;
    uint64_t per_epoch = cluster_steps_per_epoch (limit), total = per_epoch * (uint64_t) epochs;
    cluster_local_args (run, limit, test_limit, epochs);
    cluster_args (run, (const char *[]) { "--mode", "sync", "--overlap", NULL });
    cluster_run_start (run, NULL);
    cluster_run_finish (run, 0);
    assert_int_equal (cluster_check_done (run, total, 2), 0);
    assert_true (harness_file_contains (run->log, "is ignored in sync mode"));
    json_t *done = cluster_find (run->rows, "done", -1);
    assert_string_equal (cluster_str (done, "mode"), "sync");
    //  Two workers throughout: every round but an epoch's last odd one has
    //  two steps.
    json_int_t rounds = cluster_int (done, "rounds");
    assert_true (rounds >= (json_int_t) ((total + 1) / 2) && rounds <= (json_int_t) total);
    assert_int_equal (cluster_count (run->rows, "eval"), epochs);
    for (int e = 0; e < epochs; e++)
        cluster_check_eval_step (cluster_find (run->rows, "eval", e), e, per_epoch, total);
    cluster_summary (run, "%" PRIu64 " steps in %lld rounds, test accuracy %.3f, %.0f samples/s",
                     total, (long long) rounds, cluster_real (done, "test_accuracy"),
                     cluster_real (done, "samples_per_s"));
    cluster_run_destroy (run);
}

static void
test_sync_kill_worker (void **state)
{
    (void) state;
    cluster_kill_worker ("sync: kill -9 worker, no restart", false, cluster_sync_args, 6400);
}

static void
test_sync_kill_server (void **state)
{
    (void) state;
    cluster_kill_server ("sync: kill -9 server", cluster_sync_args, 6400);
}

//  The coordinator killed and the run resumed from its checkpoint, as in
//  async: rounds go on from the checkpoint's step, each applied once.
static void
test_sync_kill_coordinator (void **state)
{
    (void) state;
    cluster_kill_coordinator ("sync: kill -9 coordinator", cluster_sync_args, 6400);
}

//  Under sync the stopped worker, declared failed, no longer counts: its
//  step goes to the other worker, which finishes the open round and trains
//  the next rounds alone (no deadlock: the steps done pass the last
//  progress before by several rounds while it is stopped), and it trains
//  rounds again once it is back; every round is applied once on every
//  partition. That it held a step, and pushed it late, is not required: a
//  sync worker waits between rounds with no step in hand (its request is
//  held until the next round opens), and one stopped while waiting for
//  the answer that hands it a step wakes to find that step given up
//  (about one run in ten), so it pushes nothing late.
static void
test_sync_stop_worker (void **state)
{
    (void) state;
    cluster_stop_worker ("sync: SIGSTOP worker", cluster_sync_args, 6400, false);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_sync_run, cluster_teardown),
        cmocka_unit_test_teardown (test_sync_kill_worker, cluster_teardown),
        cmocka_unit_test_teardown (test_sync_kill_server, cluster_teardown),
        cmocka_unit_test_teardown (test_sync_stop_worker, cluster_teardown),
        cmocka_unit_test_teardown (test_sync_kill_coordinator, cluster_teardown),
    };
    return CLUSTER_MAIN ("sync", tests);
}
