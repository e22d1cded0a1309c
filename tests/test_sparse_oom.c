//  An embedding table whose rows cannot be allocated (common/store/
//  ps_sparse.h): in a child process whose data segment is capped
//  (RLIMIT_DATA), pushes of ever new ids go on until malloc fails. An id
//  admitted whose row cannot be had is counted in oom (the push's result
//  and the table's stats), never in dropped, which is admission's alone;
//  every id pushed is either a row or an oom; and the table still serves
//  the rows it holds. The sanitizer builds reserve memory of their own
//  that the cap would refuse, so there the case is skipped (exit 77).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "harness_rand.h"
#include "ps_sparse.h"

#define S_DIM    16
#define S_BATCH  4096
#define S_CAP    (64 * 1024 * 1024)     //  bytes of data segment above the start
#define S_MAX_STEPS  2000               //  far more than S_CAP holds

//  What the child found, written to its pipe.
typedef struct {
    uint64_t pushed, oom, dropped, rows;
    uint64_t stats_oom, stats_dropped, stats_rows;
    int pull_ok;
} s_outcome_t;

static void
s_child (int fd)
{
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "emb", S_DIM);
    ps_error_t err;
    ps_sparse_t *table = ps_sparse_new (&spec, &err);
    static uint64_t ids [S_BATCH];
    static float grads [S_BATCH * S_DIM];
    static float row [S_DIM];
    for (size_t i = 0; i < S_BATCH * S_DIM; i++)
        grads [i] = 0.25f;
    uint64_t first = 0;
    uint64_t state = 99;
    s_outcome_t out = { 0 };
    //  Cap the data segment a little above what the process holds now.
    struct rlimit limit;
    if (!table || getrlimit (RLIMIT_DATA, &limit) != 0)
        _exit (3);
    long vmdata = harness_status_kib (getpid (), "VmData:");
    limit.rlim_cur = (rlim_t) vmdata * 1024 + S_CAP;
    if (setrlimit (RLIMIT_DATA, &limit) != 0)
        _exit (4);
    for (uint64_t step = 1; step <= S_MAX_STEPS && out.oom == 0; step++) {
        for (size_t i = 0; i < S_BATCH; i++)
            ids [i] = harness_splitmix (&state);
        if (step == 1)
            first = ids [0];
        ps_sparse_push_result_t result;
        if (ps_sparse_push (table, step, ids, S_BATCH, grads, &result) != PS_OK)
            _exit (5);
        out.pushed += S_BATCH;
        out.oom += result.oom;
        out.dropped += result.dropped;
        out.rows += result.created;
    }
    ps_sparse_stats_t stats;
    ps_sparse_stats (table, &stats);
    out.stats_oom = stats.oom;
    out.stats_dropped = stats.dropped;
    out.stats_rows = stats.rows;
    //  The first id's row was updated once: no longer its initial value.
    float initial [S_DIM];
    ps_tablespec_init_row (&spec, first, initial);
    ps_sparse_pull (table, &first, 1, row);
    out.pull_ok = memcmp (row, initial, sizeof row) != 0;
    if (write (fd, &out, sizeof out) != (ssize_t) sizeof out)
        _exit (6);
    _exit (0);
}

static void
test_rows_that_cannot_be_allocated_are_oom (void **state)
{
    (void) state;
    int fds [2];
    assert_int_equal (pipe (fds), 0);
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        close (fds [0]);
        s_child (fds [1]);
    }
    close (fds [1]);
    s_outcome_t out;
    ssize_t got = read (fds [0], &out, sizeof out);
    close (fds [0]);
    int status = 0;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
        fail_msg ("the child ended with status 0x%x", status);
    assert_int_equal (got, sizeof out);
    printf ("oom: %llu ids pushed, %llu rows, %llu oom\n", (unsigned long long) out.pushed,
            (unsigned long long) out.rows, (unsigned long long) out.oom);
    assert_true (out.oom > 0);                  //  the cap was reached
    assert_int_equal (out.dropped, 0);          //  no admission: nothing dropped
    assert_int_equal (out.stats_dropped, 0);
    assert_int_equal (out.stats_oom, out.oom);
    assert_int_equal (out.rows + out.oom, out.pushed);
    assert_int_equal (out.stats_rows, out.rows);
    assert_true (out.pull_ok);
}

int
main (void)
{
#if defined (__SANITIZE_ADDRESS__)
    printf ("SKIP: the sanitizer's own memory cannot live under RLIMIT_DATA\n");
    return 77;
#elif defined (__has_feature)
#if __has_feature (address_sanitizer)
    printf ("SKIP: the sanitizer's own memory cannot live under RLIMIT_DATA\n");
    return 77;
#endif
#endif
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_rows_that_cannot_be_allocated_are_oom),
    };
    return harness_finish (cmocka_run_group_tests (tests, NULL, NULL));
}
