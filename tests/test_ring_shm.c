//  The shared-memory all-reduce (worker/ps_ring_shm.h) on its own, with
//  the members as threads of this process, each with a mapping of its
//  own, and a dead member as a child process killed in a barrier: sums
//  of 2 and 3 members against a float64 reference and bitwise alike; an
//  object left by a dead ring of the same name (a member counted at its
//  barrier) made anew rather than joined; a member made for another
//  layout refused (PS_EPROTO) rather than summing wrong; and bad sizes.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ps_ring_shm.h"

#define S_MAX_MEMBERS   3
#define S_COUNT         100003

//  Members named after this process, so that runs beside this one (the
//  suite runs two programs at a time) never share an object.
static char s_members [S_MAX_MEMBERS][64];
static const char *s_member_list [S_MAX_MEMBERS];

static int
s_setup (void **state)
{
    (void) state;
    for (int i = 0; i < S_MAX_MEMBERS; i++) {
        snprintf (s_members [i], sizeof s_members [i], "test_ring_shm-%d-member-%d",
                  (int) getpid (), i);
        s_member_list [i] = s_members [i];
    }
    return 0;
}

//  Give up after limit_ms without progress.
static int
s_wait_limit (void *arg, double since_ms, ps_error_t *err)
{
    double limit = *(double *) arg;
    if (since_ms >= limit)
        return ps_error_set (err, PS_ETIMEDOUT, "no progress for %.0f ms", since_ms);
    return 0;
}

typedef struct {
    ps_ring_shm_t *shm;
    float *data;
    size_t count;
    uint64_t seq;
    int rc;
    ps_error_t err;
} s_member_t;

static void *
s_member_run (void *arg)
{
    s_member_t *m = arg;
    double limit = 20000;
    m->rc = ps_ring_shm_allreduce (m->shm, m->seq, m->data, m->count, s_wait_limit, &limit,
                                   &m->err);
    return NULL;
}

//  Member k's value of element i.
static float
s_value (int k, size_t i)
{
    return (float) ((double) ((i * 2654435761u + (size_t) k * 40503u) % 20011) / 1013.0 - 9.5);
}

//  n members of ring ring_id (each with its own mapping, as processes have)
//  sum count floats as collective seq on threads; check rc, the sums
//  against float64 within n roundings, and that all members hold the
//  same bits.
static void
s_sum_on_threads (ps_ring_shm_t **shm, int n, uint64_t seq, size_t count)
{
    s_member_t members [S_MAX_MEMBERS];
    pthread_t threads [S_MAX_MEMBERS];
    for (int k = 0; k < n; k++) {
        members [k] = (s_member_t) { .shm = shm [k], .count = count, .seq = seq };
        members [k].data = malloc ((count ? count : 1) * sizeof (float));
        assert_non_null (members [k].data);
        for (size_t i = 0; i < count; i++)
            members [k].data [i] = s_value (k, i);
        assert_int_equal (pthread_create (&threads [k], NULL, s_member_run, &members [k]), 0);
    }
    for (int k = 0; k < n; k++)
        assert_int_equal (pthread_join (threads [k], NULL), 0);
    for (int k = 0; k < n; k++)
        if (members [k].rc)
            fail_msg ("member %d: %d: %s", k, members [k].rc, members [k].err.msg);
    for (size_t i = 0; i < count; i++) {
        double sum = 0, magnitude = 0;
        for (int k = 0; k < n; k++) {
            sum += s_value (k, i);
            magnitude += fabs (s_value (k, i));
        }
        if (fabs (members [0].data [i] - sum) > n * 1.2e-7 * magnitude)
            fail_msg ("element %zu is %.9g, expected %.9g", i, members [0].data [i], sum);
    }
    for (int k = 1; k < n; k++)
        if (memcmp (members [0].data, members [k].data, count * sizeof (float)) != 0)
            fail_msg ("members 0 and %d differ", k);
    for (int k = 0; k < n; k++)
        free (members [k].data);
}

static ps_ring_shm_t *
s_new (uint64_t ring_id, int n, int rank, size_t slot)
{
    ps_error_t err;
    ps_ring_shm_t *shm = ps_ring_shm_new (ring_id, s_member_list, n, rank, slot, &err);
    if (!shm)
        fail_msg ("ps_ring_shm_new: %s", err.msg);
    return shm;
}

//  Whether the ring's object still has its name.
static bool
s_named (const ps_ring_shm_t *shm)
{
    char path [160];
    snprintf (path, sizeof path, "/dev/shm%s", ps_ring_shm_name (shm));
    struct stat st;
    return stat (path, &st) == 0;
}

//  Sums of 2 and 3 members, in one pass and in many, in collectives of
//  different lengths one after another (a longer one's parts written
//  while a shorter one's are still read), and the name gone after the
//  first barrier.
static void
test_sums (void **state)
{
    (void) state;
    for (int n = 2; n <= 3; n++) {
        ps_ring_shm_t *shm [S_MAX_MEMBERS];
        for (int k = 0; k < n; k++)
            shm [k] = s_new (100 + (uint64_t) n, n, k, 16384);
        assert_true (s_named (shm [0]));
        size_t counts [] = { S_COUNT, 1, 0, 4097, 7, S_COUNT };
        for (uint64_t seq = 0; seq < sizeof counts / sizeof counts [0]; seq++)
            s_sum_on_threads (shm, n, seq, counts [seq]);
        assert_false (s_named (shm [0]));
        for (int k = 0; k < n; k++)
            ps_ring_shm_destroy (&shm [k]);
        assert_null (shm [0]);
    }
}

//  A member of ring 200 in a child process that arrives at the first
//  barrier and is killed there: it leaves the object, its name and a
//  member counted at the barrier. Two members of ring 200 made afterwards
//  must make a new object rather than join that one (where the first to
//  arrive would pass the barrier alone and sum wrong).
static void
test_dead_ring_left (void **state)
{
    (void) state;
    int ready [2];
    assert_int_equal (pipe (ready), 0);
    fflush (stdout);
    fflush (stderr);
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        ps_error_t err;
        ps_ring_shm_t *shm = ps_ring_shm_new (200, s_member_list, 2, 0, 16384, &err);
        if (!shm || write (ready [1], "x", 1) != 1)
            _exit (1);
        float data [10] = { 0 };
        double limit = 60000;
        (void) ps_ring_shm_allreduce (shm, 0, data, 10, s_wait_limit, &limit, &err);
        _exit (2);
    }
    assert_int_equal (close (ready [1]), 0);
    char byte;
    assert_int_equal (read (ready [0], &byte, 1), 1);
    assert_int_equal (close (ready [0]), 0);
    //  Long enough to arrive at the barrier and fall asleep there.
    harness_sleep_ms (300);
    assert_int_equal (kill (pid, SIGKILL), 0);
    int status;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFSIGNALED (status));

    ps_ring_shm_t *shm [2] = { s_new (200, 2, 0, 16384), s_new (200, 2, 1, 16384) };
    s_sum_on_threads (shm, 2, 0, 1000);
    s_sum_on_threads (shm, 2, 1, S_COUNT);
    ps_ring_shm_destroy (&shm [0]);
    ps_ring_shm_destroy (&shm [1]);
}

//  A member made for other slots than the object's is refused, and the
//  object is left to the member that made it.
static void
test_other_layout (void **state)
{
    (void) state;
    ps_ring_shm_t *first = s_new (300, 2, 0, 16384);
    ps_error_t err;
    assert_null (ps_ring_shm_new (300, s_member_list, 2, 1, 32768, &err));
    assert_int_equal (err.code, PS_EPROTO);
    assert_non_null (strstr (err.msg, "another layout"));
    assert_true (s_named (first));
    ps_ring_shm_destroy (&first);
    //  Bad slots: too small, not a multiple of 64, too large.
    size_t bad [] = { 2048, 4096 + 32, (size_t) PS_RING_SHM_MAX_SLOT + 64 };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        assert_null (ps_ring_shm_new (301, s_member_list, 2, 0, bad [i], &err));
        assert_int_equal (err.code, PS_EINVAL);
    }
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_sums),
        cmocka_unit_test (test_dead_ring_left),
        cmocka_unit_test (test_other_layout),
    };
    return cmocka_run_group_tests (tests, s_setup, NULL);
}
