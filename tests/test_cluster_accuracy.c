//  Mirrored and ssp training on all of Fashion-MNIST, to the accuracy
//  target (89% test accuracy): many minutes under AddressSanitizer, so
//  sanitizer builds count this test as skipped (the other cluster tests
//  still train for real there).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "harness.h"
#include "harness_cluster.h"

//  Mirrored training on all of Fashion-MNIST comes near the 89% target:
//  2 workers, global batch 128, 5 epochs (0.8984 measured; 0.8935 after
//  epoch 3; about 20 s in a release build).
static void
test_mirrored_accuracy (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_full_run ("mirrored, full data",
                                           (const char *[]) { "--mode", "mirrored", NULL });
    uint64_t total = cluster_steps_per_epoch (60000) * 5;
    json_t *done = cluster_check_mirrored (run, total, 2);
    //  The run is the same on one machine (the replicas are bitwise equal,
    //  the data order follows the seed), but other BLAS kernels, CPUs or
    //  thread counts sum in another order and so train another model.
    //  Measured with seed 1: 0.8984, and 0.8997 on another machine (also
    //  with one BLAS thread); with seed 2, a bigger change, 0.9045. The
    //  floor keeps a margin of four times that spread; whether the run made
    //  the 89% target is in the summary (bench_cluster.py times it).
    double accuracy = cluster_real (done, "test_accuracy");
    if (accuracy < 0.88)
        fail_msg ("mirrored training on Fashion-MNIST: test accuracy %.4f, expected >= 0.88",
                  accuracy);
    assert_int_equal (cluster_int (cluster_find (run->rows, "eval", -1), "count"), 10000);
    cluster_summary (run, "test accuracy %.4f after 5 epochs (%s the 89%% target), %.0f samples/s",
                     accuracy, accuracy >= 0.89 ? "reached" : "below",
                     cluster_real (done, "samples_per_s"));
    cluster_run_destroy (run);
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
    cluster_run_t *run = cluster_full_run ("ssp, full data", cluster_ssp_args);
    uint64_t total = cluster_steps_per_epoch (60000) * 5;
    cluster_check_done (run, total, 2);
    cluster_check_staleness (run, cluster_ssp_args);
    json_t *done = cluster_find (run->rows, "done", -1);
    double accuracy = cluster_real (done, "test_accuracy");
    if (accuracy < 0.88)
        fail_msg ("ssp training on Fashion-MNIST: test accuracy %.4f, expected >= 0.88",
                  accuracy);
    json_t *histogram = json_object_get (json_object_get (done, "staleness"), "histogram");
    char *text = json_dumps (histogram, JSON_COMPACT);
    assert_non_null (text);
    cluster_summary (run, "test accuracy %.4f after 5 epochs (%s the 89%% target), %.0f samples/s, "
                     "staleness histogram %s", accuracy, accuracy >= 0.89 ? "reached" : "below",
                     cluster_real (done, "samples_per_s"), text);
    free (text);
    cluster_run_destroy (run);
}

int
main (void)
{
#ifdef __SANITIZE_ADDRESS__
    harness_skip ("test_cluster_accuracy: mirrored and ssp training on all of Fashion-MNIST "
                  "take many minutes in a sanitizer build; the other cluster tests train for "
                  "real");
#endif
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_mirrored_accuracy, cluster_teardown),
        cmocka_unit_test_teardown (test_ssp_accuracy, cluster_teardown),
    };
    return CLUSTER_MAIN ("accuracy", tests);
}
