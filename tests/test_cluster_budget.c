//  A local cluster whose embedding tables do not fit in its servers'
//  memory limit (coordinator --ps-memory-limit, which the local launcher
//  passes to each ps-server as --memory-limit) fails cleanly and soon:
//  the server refuses the first push that could pass its limit (too_big,
//  naming the limit), the coordinator fails the run at once on that
//  refusal rather than retrying the step for minutes, and its message
//  names the server, the limit and what to do. The data comes from
//  tests/gen_ctr.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "harness_cluster.h"
#include "ps_error.h"

//  The run must end within this long; it takes a few seconds unloaded
//  (the first push is refused), so only a retried step could come near.
#define S_BOUND_S  60

static void
test_tables_past_the_limit_fail_the_run (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("budget");
    char data [PATH_MAX / 2], log [PATH_MAX], train [PATH_MAX], test [PATH_MAX];
    snprintf (data, sizeof data, "%s/data", run->dir);
    snprintf (log, sizeof log, "%s.log", data);
    const char *gen [] = { getenv ("PS_GEN_CTR"), "--out", data, "--train-rows", "8192",
                           "--test-rows", "512", "--seed", "3", "--cardinalities", "small",
                           NULL };
    assert_non_null (gen [0]);
    pid_t pid = harness_spawn (gen, NULL, log);
    assert_true (pid > 0);
    if (harness_wait_or_kill (pid, CLUSTER_RUN_MS) != 0) {
        harness_print_log (log);
        fail_msg ("gen_ctr failed for %s", data);
    }
    snprintf (train, sizeof train, "%s/train.txt", data);
    snprintf (test, sizeof test, "%s/test.txt", data);
    //  lr's one table takes some 13,000 new rows in the first batch, far
    //  more than 256 KiB hold.
    cluster_args (run, (const char *[]) { "--local", "--ps", "1", "--workers", "1",
                                          "--ps-memory-limit", "256K", "--log-dir", run->log_dir,
                                          "--model", "lr", "--metrics", run->metrics,
                                          "--data-format", "criteo", "--train-data", train,
                                          "--test-data", test, "--batch", "512", "--epochs",
                                          "1", NULL });
    cluster_run_start (run, NULL);
    cluster_run_finish (run, 1);
    const char *expect [] = { PS_MEMORY_LIMIT_TEXT " of 262144 bytes", "server tcp://127.0.0.1:",
                              "run more servers, raise the limit" };
    for (size_t i = 0; i < sizeof expect / sizeof expect [0]; i++)
        if (!harness_file_contains (run->log, expect [i])) {
            cluster_print_logs (run);
            fail_msg ("the coordinator's log does not say '%s'", expect [i]);
        }
    if (run->wall_s > S_BOUND_S)
        fail_msg ("the run took %.1f s to fail, expected at most %d", run->wall_s, S_BOUND_S);
    printf ("budget: 1 server under 256 KiB failed in %.1f s\n", run->wall_s);
    cluster_check_logs (run);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_tables_past_the_limit_fail_the_run, cluster_teardown),
    };
    return cluster_main ("test_cluster_budget", tests, sizeof tests / sizeof tests [0]);
}
