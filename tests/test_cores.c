//  Unit tests for a local cluster's split of its cores (coordinator/ps_cores.c)
//  and the cores a process may use (common/base/ps_cpus.c):
//  worked examples, and over many shapes that the split never gives more
//  threads than cores (unless every worker's one thread already does) and
//  never fewer than one compute thread a worker; an evaluator on cores of
//  its own only where every worker and server keeps a core, else one in
//  the cores' idle time, which takes none.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "ps_cores.h"
#include "ps_cpus.h"

//  The shapes worked by hand (README, Running a local cluster).
static void
test_worked_examples (void **state)
{
    (void) state;
    const struct {
        int cores, nworkers, nservers;
        bool may_evaluate;
        int worker, server, evaluator;
        bool idle;
    } cases [] = {
        //  The 2-core machine: nothing to spare, evaluations in idle time.
        { 2, 2, 2, true, 1, 0, 2, true },
        { 2, 2, 2, false, 1, 0, 0, false },     //  --no-evaluator: a worker evaluates
        { 4, 2, 2, true, 2, 0, 2, true },
        { 6, 2, 2, true, 2, 0, 2, false },      //  a core each, and 2 for evaluations
        { 8, 2, 2, true, 3, 0, 2, false },
        { 8, 2, 2, false, 3, 1, 0, false },     //  no evaluator (mirrored, --no-evaluator)
        { 16, 2, 2, true, 6, 1, 2, false },
        { 64, 4, 2, true, 12, 7, 2, false },
        { 1, 4, 2, true, 1, 0, 1, true },       //  fewer cores than workers: one thread each
        { 8, 2, 0, false, 4, 0, 0, false },     //  mirrored: no servers, every core a worker's
        { 0, 2, 2, true, 1, 0, 1, true },       //  nonsense in, one thread out
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        ps_cores_split_t split;
        ps_cores_split (cases [i].cores, cases [i].nworkers, cases [i].nservers,
                        cases [i].may_evaluate, &split);
        assert_int_equal (split.worker_threads, cases [i].worker);
        assert_int_equal (split.server_threads, cases [i].server);
        assert_int_equal (split.evaluator_threads, cases [i].evaluator);
        assert_int_equal (split.evaluator, cases [i].evaluator > 0);
        assert_int_equal (split.evaluator_idle, cases [i].idle);
        assert_int_equal (split.io_threads, 1);
    }
}

static void
test_never_oversubscribes (void **state)
{
    (void) state;
    for (int cores = 1; cores <= 256; cores++)
        for (int w = 1; w <= 16; w++)
            for (int s = 0; s <= 8; s++) {
                ps_cores_split_t split;
                ps_cores_split (cores, w, s, (cores + w + s) % 2 == 0, &split);
                assert_int_equal (split.cores, cores);
                assert_true (split.worker_threads >= 1);
                assert_true (split.server_threads >= 0);
                //  An evaluator in the idle time takes no one's cores.
                int used = w * split.worker_threads + s * split.server_threads
                           + (split.evaluator_idle ? 0 : split.evaluator_threads);
                if (cores >= w)
                    assert_true (used <= cores);
                else
                    assert_int_equal (split.worker_threads, 1);
                //  The servers get at most a quarter.
                assert_true (4 * s * split.server_threads <= cores);
                //  Every mode that may evaluate has an evaluator: on
                //  cores of its own where every worker and server keeps
                //  one, else in the idle time, on at most 2 threads.
                assert_int_equal (split.evaluator, (cores + w + s) % 2 == 0);
                if (split.evaluator && !split.evaluator_idle)
                    assert_true (cores >= w + s + split.evaluator_threads);
                if (split.evaluator_idle)
                    assert_true (cores < w + s + 2 && split.evaluator_threads >= 1
                                 && split.evaluator_threads <= 2);
            }
}

static void
test_available (void **state)
{
    (void) state;
    char source [32] = "";
    int cores = ps_cpus_available (source, sizeof source);
    assert_true (cores >= 1);
    assert_true (cores <= sysconf (_SC_NPROCESSORS_ONLN));
    assert_true (source [0] != '\0');
    assert_int_equal (ps_cpus_available (NULL, 0), cores);
}

//  A process whose affinity allows one CPU may use one core, and says why
//  (as under taskset -c N or a cpuset of one CPU), however many are online.
static void
test_available_affinity (void **state)
{
    (void) state;
    cpu_set_t mask;
    assert_int_equal (sched_getaffinity (0, sizeof mask, &mask), 0);
    if (CPU_COUNT (&mask) < 2 || sysconf (_SC_NPROCESSORS_ONLN) < 2) {
        printf ("SKIP: this process may run on one CPU only, no affinity to narrow\n");
        return;
    }
    //  The first CPU this process may run on: CPU 0 may not be one of them.
    int first = 0;
    while (!CPU_ISSET (first, &mask))
        first++;
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        cpu_set_t one;
        CPU_ZERO (&one);
        CPU_SET (first, &one);
        if (sched_setaffinity (0, sizeof one, &one) != 0)
            _exit (2);
        char source [32] = "";
        int cores = ps_cpus_available (source, sizeof source);
        _exit (cores == 1 && strcmp (source, "CPU affinity") == 0 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_worked_examples),
        cmocka_unit_test (test_never_oversubscribes),
        cmocka_unit_test (test_available),
        cmocka_unit_test (test_available_affinity),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
