//  Benchmark of the optimizer kernels: the time of one update over n floats
//  (16M unless argv [1] says otherwise) for each rule, on 1 thread
//  (ps_opt_apply) and on 2 (the calling thread and a pool thread sharing
//  the ranges, as a ps-server with --threads 2 or more applies a partition
//  of PS_PARTITION_SPLIT_MIN floats or more: ps_opt_prepare, then
//  ps_opt_apply_range over ps_pool_for's ranges of PS_PARTITION_GRAIN),
//  and the memory traffic that implies, next to a memcpy of 64 MB as the
//  machine's reference. The kernels are memory bound, so GB/s is the figure
//  to compare with memcpy; the target for Adam is 35 GB/s on 2 threads.
//
//  Traffic counts the arrays each kernel reads and writes, 4 bytes an
//  element each: SGD reads p, g and writes p (12 B); momentum and Adagrad
//  add one slot read and written (20 B); Adam two slots (28 B). The scan a
//  ps-server runs over every pushed gradient for NaN and infinities before
//  applying it reads g once (4 B). Each kernel's 2 threads against its 1,
//  and Adam's 2 threads against memcpy, are BENCHROW lines too
//  (harness_benchrow.h). It prints and never asserts: timings on
//  shared machines vary.

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness_benchrow.h"
#include "ps_floats.h"
#include "ps_optimizer.h"
#include "ps_partition.h"
#include "ps_pool.h"

#define S_REPEATS    5
#define S_MEMCPY_MB  64
//  The project's goal for Adam on 2 threads, GB/s of memory traffic.
#define S_ADAM_GOAL  35.0

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

//  A 64-byte aligned array of n floats, every page written so that page
//  faults fall outside the timed region.
static float *
s_array (size_t n, float value)
{
    size_t bytes = (sizeof (float) * n + 63) / 64 * 64;
    float *array = aligned_alloc (64, bytes);
    if (!array) {
        fprintf (stderr, "bench_apply: cannot allocate %zu bytes\n", bytes);
        exit (EXIT_FAILURE);
    }
    for (size_t i = 0; i < n; i++)
        array [i] = value;
    return array;
}

static void
s_row (const char *name, double seconds, double bytes)
{
    printf ("%-10s | %9.2f | %8.1f\n", name, seconds * 1e3, bytes / seconds * 1e-9);
}

typedef struct {
    const ps_opt_update_t *update;
    float *params;
    const float *grad;
    float **slots;
} s_ranges_t;

static void
s_apply_range (void *arg, size_t begin, size_t end)
{
    s_ranges_t *ranges = arg;
    ps_opt_apply_range (ranges->update, ranges->params, ranges->grad, ranges->slots, begin, end);
}

//  Update t over n elements, on the calling thread alone (pool NULL) or in
//  ranges shared with pool's threads.
static void
s_apply (ps_pool_t *pool, const ps_opt_config_t *cfg, float *params, const float *grad,
         float **slots, size_t n, uint64_t t)
{
    if (!pool) {
        ps_opt_apply (cfg, params, grad, slots, n, t);
        return;
    }
    ps_opt_update_t update;
    ps_opt_prepare (cfg, grad, n, t, &update);
    s_ranges_t ranges = { &update, params, grad, slots };
    ps_pool_for (pool, n, PS_PARTITION_GRAIN, s_apply_range, &ranges);
}

//  Best time of S_REPEATS updates after one warm-up update.
static double
s_time_apply (ps_pool_t *pool, const ps_opt_config_t *cfg, float *params, const float *grad,
              float **slots, size_t n)
{
    uint64_t t = 1;
    s_apply (pool, cfg, params, grad, slots, n, t++);
    double best = 1e30;
    for (int r = 0; r < S_REPEATS; r++) {
        double start = s_now ();
        s_apply (pool, cfg, params, grad, slots, n, t++);
        double elapsed = s_now () - start;
        best = elapsed < best ? elapsed : best;
    }
    return best;
}

int
main (int argc, char *argv [])
{
    //  The arithmetic mode ps-server applies gradients in.
    ps_floats_flush_subnormals ();
    size_t n = (size_t) 16 << 20;
    if (argc > 1) {
        char *end;
        unsigned long long value = strtoull (argv [1], &end, 10);
        if (*end || value == 0) {
            fprintf (stderr, "usage: bench_apply [elements > 0]\n");
            return EXIT_FAILURE;
        }
        n = (size_t) value;
    }
    float *params = s_array (n, 0.5f);
    float *grad = s_array (n, 0.01f);
    float *slot0 = s_array (n, 0.0f);
    float *slot1 = s_array (n, 0.0f);
    float *slots [PS_OPT_MAX_SLOTS] = { slot0, slot1 };

    static const struct {
        const char *name;
        ps_opt_kind_t kind;
        int arrays;     //  arrays read plus arrays written
    } kernels [] = {
        { "sgd",      PS_OPT_SGD,      3 },
        { "momentum", PS_OPT_MOMENTUM, 5 },
        { "adagrad",  PS_OPT_ADAGRAD,  5 },
        { "adam",     PS_OPT_ADAM,     7 },
    };
    //  One pool thread: with the calling thread, 2 threads apply.
    ps_error_t err;
    ps_pool_t *pool = ps_pool_new (1, &err);
    if (!pool) {
        fprintf (stderr, "bench_apply: %s\n", err.msg);
        return EXIT_FAILURE;
    }
    printf ("n = %zu floats (%.1f MB per array), ranges of %zu floats\n", n, (double) n * 4 / 1e6,
            PS_PARTITION_GRAIN);
    printf ("%-10s | %9s | %8s | %9s | %8s | %6s\n", "kernel", "1 thr ms", "GB/s",
            "2 thr ms", "GB/s", "2 / 1");
    double adam_gbs = 0;
    for (size_t k = 0; k < sizeof kernels / sizeof kernels [0]; k++) {
        ps_opt_config_t cfg;
        ps_opt_config_default (&cfg, kernels [k].kind);
        ps_opt_init_slots (&cfg, slots, n);
        double one = s_time_apply (NULL, &cfg, params, grad, slots, n);
        double two = s_time_apply (pool, &cfg, params, grad, slots, n);
        double bytes = (double) kernels [k].arrays * 4 * (double) n;
        printf ("%-10s | %9.2f | %8.1f | %9.2f | %8.1f | %5.2fx\n", kernels [k].name,
                one * 1e3, bytes / one * 1e-9, two * 1e3, bytes / two * 1e-9, one / two);
        char row [64];
        snprintf (row, sizeof row, "%s apply, 2 threads", kernels [k].name);
        bool adam = kernels [k].kind == PS_OPT_ADAM;
        harness_benchrow ("bench_apply", row, "1 thread", bytes / one * 1e-9,
                          bytes / two * 1e-9, "GB/s", HARNESS_HIGHER_BETTER,
                          adam ? "ours >= 35 GB/s" : NULL,
                          adam ? harness_goal (bytes / two * 1e-9 >= S_ADAM_GOAL)
                               : HARNESS_GOAL_NONE);
        if (adam)
            adam_gbs = bytes / two * 1e-9;
    }
    ps_pool_destroy (&pool);

    //  The scan of a gradient for non-finite values, which every push pays
    //  on top of its kernel.
    size_t found = ps_floats_find_nonfinite (grad, n);
    double scan = 1e30;
    for (int r = 0; r < S_REPEATS; r++) {
        double start = s_now ();
        found += ps_floats_find_nonfinite (grad, n);
        double elapsed = s_now () - start;
        scan = elapsed < scan ? elapsed : scan;
    }
    s_row ("scan", scan, 4.0 * (double) n);
    if (found != (S_REPEATS + 1) * n)
        printf ("(the scan found a non-finite value: %zu)\n", found);

    //  memcpy moves each byte twice (read and write); both figures are
    //  printed so either can be compared with the kernels' traffic.
    size_t bytes = (size_t) S_MEMCPY_MB << 20;
    char *src = (char *) s_array (bytes / 4, 1.0f);
    char *dst = (char *) s_array (bytes / 4, 0.0f);
    memcpy (dst, src, bytes);
    double best = 1e30;
    for (int r = 0; r < S_REPEATS; r++) {
        double start = s_now ();
        memcpy (dst, src, bytes);
        double elapsed = s_now () - start;
        best = elapsed < best ? elapsed : best;
    }
    printf ("memcpy %d MB: %.2f ms, %.1f GB/s copied, %.1f GB/s read+written\n",
            S_MEMCPY_MB, best * 1e3, (double) bytes / best * 1e-9,
            2.0 * (double) bytes / best * 1e-9);
    harness_benchrow ("bench_apply", "adam apply, 2 threads vs memcpy", "memcpy read+written",
                      2.0 * (double) bytes / best * 1e-9, adam_gbs, "GB/s",
                      HARNESS_HIGHER_BETTER, NULL, HARNESS_GOAL_NONE);
    //  Read the destination so the copies cannot be optimised away.
    printf ("(check %d)\n", dst [bytes - 1]);

    free (params);
    free (grad);
    free (slot0);
    free (slot1);
    free (src);
    free (dst);
    return EXIT_SUCCESS;
}
