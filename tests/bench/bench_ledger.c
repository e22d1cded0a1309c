//  Benchmark of the step ledger (common/store/ps_ledger.c): the time and
//  memory of recording a run's steps, 10^8 unless argv [1] says otherwise,
//  numbered from 1 as a cluster numbers them. Two orders: strictly
//  increasing, and shuffled within blocks of 4096 steps, as steps arrive
//  from many workers at once. For each it prints the time per step (wall
//  clock, and the process's CPU time, which a loaded machine disturbs
//  less), the
//  growth of the process's peak resident memory over the run, and the
//  length of the encoded ledger at the end, and the CPU time and length
//  as BENCHROW lines (harness_benchrow.h). It prints and never asserts:
//  timings on shared machines vary.

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "harness_benchrow.h"
#include "harness_rand.h"
#include "ps_ledger.h"

#define S_BLOCK  4096

static double
s_now (clockid_t clock)
{
    struct timespec ts;
    clock_gettime (clock, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

//  The peak resident set size of this process, in KiB.
static long
s_peak_kib (void)
{
    struct rusage usage;
    if (getrusage (RUSAGE_SELF, &usage) != 0)
        return -1;
    return usage.ru_maxrss;
}

//  The figures of a run that its BENCHROW lines give, printed after the
//  table so that they do not split it.
typedef struct {
    double cpu_ns;              //  CPU time per step
    size_t encoded;             //  the encoded ledger's bytes
} s_figures_t;

//  Record steps 1..total, in order or shuffled within blocks; print a row.
static int
s_run (const char *order, uint64_t total, bool shuffled, s_figures_t *figures)
{
    ps_ledger_t *ledger = ps_ledger_new ();
    if (!ledger) {
        fprintf (stderr, "bench_ledger: cannot allocate a ledger\n");
        return -1;
    }
    uint64_t block [S_BLOCK];
    uint64_t seed = 7;
    long peak_before = s_peak_kib ();
    double start = s_now (CLOCK_MONOTONIC);
    double start_cpu = s_now (CLOCK_PROCESS_CPUTIME_ID);
    ps_error_t err = { 0 };
    uint64_t done = 0;
    int rc = PS_OK;
    for (uint64_t first = 1; first <= total && rc == PS_OK; first += S_BLOCK) {
        size_t n = (size_t) (total - first + 1 < S_BLOCK ? total - first + 1 : S_BLOCK);
        for (size_t i = 0; i < n; i++)
            block [i] = first + i;
        if (shuffled)
            for (size_t i = n; i > 1; i--) {
                size_t j = (size_t) (harness_lcg (&seed) % i);
                uint64_t tmp = block [i - 1];
                block [i - 1] = block [j];
                block [j] = tmp;
            }
        for (size_t i = 0; i < n && rc == PS_OK; i++)
            if ((rc = ps_ledger_mark (ledger, block [i], &err)) == PS_OK)
                done++;
    }
    double seconds = s_now (CLOCK_MONOTONIC) - start;
    double cpu = s_now (CLOCK_PROCESS_CPUTIME_ID) - start_cpu;
    printf ("| %-20s | %11" PRIu64 " | %8.2f | %8.2f | %10ld | %12zu |%s%s\n", order, done,
            done ? seconds * 1e9 / (double) done : 0.0, done ? cpu * 1e9 / (double) done : 0.0,
            s_peak_kib () - peak_before,
            ps_ledger_encoded_size (ledger), rc == PS_OK ? "" : " stopped: ",
            rc == PS_OK ? "" : err.msg);
    figures->cpu_ns = done ? cpu * 1e9 / (double) done : 0.0;
    figures->encoded = ps_ledger_encoded_size (ledger);
    ps_ledger_destroy (&ledger);
    return 0;
}

int
main (int argc, char **argv)
{
    uint64_t total = 100000000;
    if (argc > 1) {
        char *end;
        total = strtoull (argv [1], &end, 10);
        if (*end || total == 0) {
            fprintf (stderr, "bench_ledger: steps \"%s\", expected a positive integer\n",
                     argv [1]);
            return 2;
        }
    }
    printf ("| order                | steps       | ns/step  | CPU ns   | peak +KiB  | encoded B    |\n");
    printf ("|---|---|---|---|---|---|\n");
    const char *orders [] = { "in order", "shuffled in 4096s" };
    s_figures_t figures [2];
    for (int i = 0; i < 2; i++)
        if (s_run (orders [i], total, i == 1, &figures [i]))
            return 1;
    //  Absolute figures, with no anchor: CPU time, which load disturbs less.
    for (int i = 0; i < 2; i++) {
        char row [64];
        snprintf (row, sizeof row, "%s, CPU per step", orders [i]);
        harness_benchrow ("bench_ledger", row, NULL, 0, figures [i].cpu_ns, "ns",
                          HARNESS_LOWER_BETTER, NULL, HARNESS_GOAL_NONE);
        snprintf (row, sizeof row, "%s, encoded ledger", orders [i]);
        harness_benchrow ("bench_ledger", row, NULL, 0, (double) figures [i].encoded, "B",
                          HARNESS_LOWER_BETTER, NULL, HARNESS_GOAL_NONE);
    }
    return 0;
}
