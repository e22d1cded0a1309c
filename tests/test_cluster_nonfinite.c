//  The cluster and numbers that go wrong:
//    l. gradients that are not finite (refused, retried, then the run
//       fails), in async and mirrored mode, and a training loss that
//       diverges (warned, or stopped).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "harness.h"
#include "harness_cluster.h"

//  ---------------------------------------------------------------------
//  l. Gradients that are not finite, and a loss that diverges

//  The same 20 steps of the same examples in every build: when the
//  gradients turn non-finite depends on the examples, so PS_TEST_SCALE
//  does not apply (the runs are short anyway).
#define S_LIMIT         1280
#define S_TEST_LIMIT    500

//  SGD at a learning rate of 1e8 makes the parameters huge within a few
//  steps and the gradients NaN after that (one worker: deterministic). The
//  servers refuse every such push whole; the coordinator tries each refused
//  step again, on fresher parameters, twice (nonfinite_retries), then fails
//  the run naming the step and the variable. Before, the NaN were applied
//  and the run ended at chance accuracy with exit 0.
static void
test_nonfinite (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("non-finite gradients");
    int limit = S_LIMIT, epochs = 2;
    cluster_local_args (run, limit, S_TEST_LIMIT, epochs);
    //  One worker: each try of a refused step computes on the same
    //  parameters (nothing was applied), so the outcome does not depend on
    //  how two workers' steps interleave.
    cluster_args (run, (const char *[]) { "--workers", "1", "--optimizer", "sgd", "--lr", "1e8",
                                          NULL });
    cluster_run_start (run, NULL);
    cluster_run_finish (run, 1);
    assert_true (harness_file_contains (run->log, "gave a gradient with NaN or an infinity 3 "
                                        "times"));
    assert_true (harness_file_contains (run->log, "holds a non-finite value"));
    assert_int_equal (cluster_count (run->rows, "done"), 0);
    assert_non_null (cluster_find (run->rows, "failed", -1));
    //  Each refusal is an event; the step that failed the run was refused
    //  three times, each time on a new try.
    size_t refusals = cluster_count (run->rows, "nonfinite");
    json_t *last = cluster_find (run->rows, "nonfinite", -1);
    assert_non_null (last);
    assert_int_equal (cluster_int (last, "failures"), 3);
    assert_non_null (strstr (cluster_str (last, "error"), "nonfinite"));
    cluster_summary (run, "%zu refused pushes; step %lld refused 3 times; exit 1", refusals,
                     (long long) cluster_int (last, "step"));
    cluster_run_destroy (run);
}

//  In mirrored mode every replica would apply the same non-finite sum:
//  each refuses it, and the run fails at once (a retry would sum the same
//  gradients again).
static void
test_nonfinite_mirrored (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("non-finite gradients, mirrored");
    int limit = S_LIMIT, epochs = 2;
    cluster_local_args (run, limit, S_TEST_LIMIT, epochs);
    cluster_args (run, (const char *[]) { "--mode", "mirrored", "--workers", "1", "--optimizer",
                                          "sgd",
                                          "--lr", "1e8", NULL });
    cluster_run_start (run, NULL);
    cluster_run_finish (run, 1);
    assert_true (harness_file_contains (run->log, "was refused by every replica"));
    assert_int_equal (cluster_count (run->rows, "done"), 0);
    cluster_summary (run, "the ring refused a non-finite sum; exit 1");
    cluster_run_destroy (run);
}

//  SGD at 10 keeps the gradients finite but sends the loss from 2.3 to
//  hundreds: the coordinator says so once (a warning and a "diverging"
//  event, diverged in the done record), and with --stop-on-divergence the
//  run fails instead of training on to chance accuracy.
static void
test_divergence (void **state)
{
    (void) state;
    int limit = S_LIMIT, epochs = 2;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    cluster_run_t *run = cluster_run_new ("a loss that diverges");
    cluster_local_args (run, limit, S_TEST_LIMIT, epochs);
    cluster_args (run, (const char *[]) { "--optimizer", "sgd", "--lr", "10", NULL });
    cluster_run_start (run, NULL);
    cluster_run_finish (run, 0);
    cluster_check_done (run, total, 2);
    assert_int_equal (cluster_count (run->rows, "diverging"), 1);
    assert_true (json_is_true (json_object_get (cluster_find (run->rows, "done", -1), "diverged")));
    assert_true (harness_file_contains (run->log, "the training loss diverges"));
    double loss = cluster_real (cluster_find (run->rows, "diverging", 0), "loss");
    cluster_run_destroy (run);

    run = cluster_run_new ("a loss that diverges, stop");
    cluster_local_args (run, limit, S_TEST_LIMIT, epochs);
    cluster_args (run, (const char *[]) { "--optimizer", "sgd", "--lr", "10",
                                          "--stop-on-divergence",
                                          NULL });
    cluster_run_start (run, NULL);
    cluster_run_finish (run, 1);
    assert_int_equal (cluster_count (run->rows, "diverging"), 1);
    assert_int_equal (cluster_count (run->rows, "done"), 0);
    assert_true (harness_file_contains (run->log, "and the job says stop_on_divergence"));
    cluster_summary (run, "loss %.3g over 20 steps: warned once; with --stop-on-divergence, exit 1",
                     loss);
    cluster_run_destroy (run);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_nonfinite, cluster_teardown),
        cmocka_unit_test_teardown (test_nonfinite_mirrored, cluster_teardown),
        cmocka_unit_test_teardown (test_divergence, cluster_teardown),
    };
    return CLUSTER_MAIN ("nonfinite", tests);
}
