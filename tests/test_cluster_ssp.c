//  The cluster in ssp mode (bounded staleness):
//    m. a run in lockstep (S = 0), and the failure cases of async
//       (harness_faults.h: kill -9 of a worker, of a server and of the
//       coordinator, SIGSTOP of a worker) again under ssp, each done record's staleness
//       within the bound; a killed worker leaves the clock, and a stopped
//       one leaves it once declared failed, so the other goes on without
//       it and is never held.

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

//  A short ssp run in lockstep (S = 0): it trains every step once, and no
//  step starts ahead of the slowest worker.
static void
test_ssp_run (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("ssp run, staleness 0");
    int limit = cluster_limit (3200), test_limit = cluster_test_limit (1000), epochs = 2;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    const char *const lockstep [] = { "--mode", "ssp", "--staleness", "0", NULL };
    cluster_local_args (run, limit, test_limit, epochs);
    cluster_mode_args (run, lockstep);
    cluster_run_start (run, NULL);
    cluster_run_finish (run, 0);
    cluster_check_done (run, total, 2);
    cluster_check_staleness (run, lockstep);
    json_t *done = cluster_find (run->rows, "done", -1);
    json_t *histogram = json_object_get (json_object_get (done, "staleness"), "histogram");
    cluster_check_no_children (run, 0, NULL);
    cluster_summary (run, "%" PRIu64 " steps, %lld started level with the slowest worker", total,
                     (long long) json_integer_value (json_array_get (histogram, 0)));
    cluster_run_destroy (run);
}


//  Under ssp the killed worker leaves the clock, so the survivor is never
//  held for it, and its restarted process joins the clock again.
static void
test_ssp_kill_worker (void **state)
{
    (void) state;
    cluster_kill_worker ("ssp: kill -9 worker, restart", true, cluster_ssp_args, 12800);
}


//  Under ssp the stopped worker, declared failed, leaves the clock: the
//  other goes on past the bound while it is stopped, and it joins the
//  clock again once it is back.
static void
test_ssp_stop_worker (void **state)
{
    (void) state;
    cluster_stop_worker ("ssp: SIGSTOP worker", cluster_ssp_args, 12800, true);
}


//  Under ssp a failed server is recovered as in async: the clock, which
//  counts the workers' completions, does not hold the restored run back.
static void
test_ssp_kill_server (void **state)
{
    (void) state;
    cluster_kill_server ("ssp: kill -9 server", cluster_ssp_args, 12800);
}

//  The coordinator killed and the run resumed from its checkpoint, as in
//  async: the clock starts afresh with every worker level, and no step
//  starts further ahead than the bound.
static void
test_ssp_kill_coordinator (void **state)
{
    (void) state;
    cluster_kill_coordinator ("ssp: kill -9 coordinator", cluster_ssp_args, 12800);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_ssp_run, cluster_teardown),
        cmocka_unit_test_teardown (test_ssp_kill_worker, cluster_teardown),
        cmocka_unit_test_teardown (test_ssp_stop_worker, cluster_teardown),
        cmocka_unit_test_teardown (test_ssp_kill_server, cluster_teardown),
        cmocka_unit_test_teardown (test_ssp_kill_coordinator, cluster_teardown),
    };
    return CLUSTER_MAIN ("ssp", tests);
}
