//  Unit tests for ssp mode's clock (coordinator/ps_sspclock.c), without
//  processes: the bound holds at every start in long random schedules,
//  checked against the clocks the test keeps itself; the slowest live
//  worker can always start, so the clock never deadlocks; S = 0 is lock
//  step; a worker that leaves stops holding the others back and joins
//  again at the slowest live worker's clock; a worker away evaluating
//  holds nobody back and comes back no further behind than the slowest
//  other, its clock never going back; the histogram counts what the
//  starts saw.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>

#include "ps_sspclock.h"

static void
test_lock_step (void **state)
{
    (void) state;
    ps_sspclock_t *clock = ps_sspclock_new (2, 0);
    ps_sspclock_join (clock, 0);
    ps_sspclock_join (clock, 1);
    assert_true (ps_sspclock_may_start (clock, 0));
    ps_sspclock_started (clock, 0);
    ps_sspclock_finished (clock, 0);
    //  Worker 0 finished step 0; worker 1 has not: 0 waits for it.
    assert_false (ps_sspclock_may_start (clock, 0));
    assert_true (ps_sspclock_may_start (clock, 1));
    ps_sspclock_started (clock, 1);
    ps_sspclock_finished (clock, 1);
    assert_true (ps_sspclock_may_start (clock, 0));
    assert_int_equal (ps_sspclock_slowest (clock), 1);
    uint64_t counts [PS_SSPCLOCK_BUCKETS];
    assert_int_equal (ps_sspclock_histogram (clock, counts), 0);
    assert_int_equal (counts [0], 2);
    ps_sspclock_destroy (&clock);
    assert_null (clock);
}

static void
test_leave_and_join (void **state)
{
    (void) state;
    ps_sspclock_t *clock = ps_sspclock_new (3, 1);
    for (uint32_t w = 0; w < 3; w++)
        ps_sspclock_join (clock, w);
    //  Workers 0 and 1 run 5 steps each, two ahead of worker 2 at most,
    //  which never starts: they stop at clock 2.
    for (int i = 0; i < 5; i++)
        for (uint32_t w = 0; w < 2; w++)
            if (ps_sspclock_may_start (clock, w)) {
                ps_sspclock_started (clock, w);
                ps_sspclock_finished (clock, w);
            }
    assert_int_equal (ps_sspclock_of (clock, 0), 2);
    assert_int_equal (ps_sspclock_of (clock, 1), 2);
    assert_false (ps_sspclock_may_start (clock, 0));
    //  Worker 2 is declared failed (killed, or stopped past its heartbeat
    //  timeout): the others go on.
    ps_sspclock_leave (clock, 2);
    assert_true (ps_sspclock_may_start (clock, 0));
    ps_sspclock_started (clock, 0);
    ps_sspclock_finished (clock, 0);
    ps_sspclock_started (clock, 0);
    ps_sspclock_finished (clock, 0);
    assert_int_equal (ps_sspclock_of (clock, 0), 4);
    //  It comes back at the slowest live clock (worker 1's 2), so it may
    //  start at once and holds worker 0 back no more than worker 1 does.
    ps_sspclock_join (clock, 2);
    assert_int_equal (ps_sspclock_of (clock, 2), 2);
    assert_true (ps_sspclock_may_start (clock, 2));
    assert_false (ps_sspclock_may_start (clock, 0));
    //  Joining again changes nothing.
    ps_sspclock_finished (clock, 2);
    ps_sspclock_join (clock, 2);
    assert_int_equal (ps_sspclock_of (clock, 2), 3);
    ps_sspclock_destroy (&clock);
}

//  A worker that evaluates is away: the others run past the bound while it
//  is, and back, it starts where the slowest other is, not behind them
//  (which would hold them back again until it caught up).
static void
test_away (void **state)
{
    (void) state;
    ps_sspclock_t *clock = ps_sspclock_new (3, 1);
    for (uint32_t w = 0; w < 3; w++)
        ps_sspclock_join (clock, w);
    //  Worker 2 takes one step, then evaluates; workers 0 and 1 run 6
    //  steps each, which the bound of 1 would stop at 2 were it counted.
    ps_sspclock_started (clock, 2);
    ps_sspclock_finished (clock, 2);
    ps_sspclock_away (clock, 2, true);
    ps_sspclock_away (clock, 2, true);
    for (int i = 0; i < 6; i++)
        for (uint32_t w = 0; w < 2; w++) {
            assert_true (ps_sspclock_may_start (clock, w));
            ps_sspclock_started (clock, w);
            ps_sspclock_finished (clock, w);
        }
    assert_int_equal (ps_sspclock_slowest (clock), 6);
    assert_int_equal (ps_sspclock_of (clock, 2), 1);
    //  Back, it is at the slowest other's clock: it may start, and so may
    //  the others, none ahead of anyone.
    ps_sspclock_away (clock, 2, false);
    assert_int_equal (ps_sspclock_of (clock, 2), 6);
    for (uint32_t w = 0; w < 3; w++)
        assert_true (ps_sspclock_may_start (clock, w));
    //  A worker ahead of the others when it leaves to evaluate keeps its
    //  clock: it is not let further ahead of them than the bound.
    ps_sspclock_started (clock, 0);
    ps_sspclock_finished (clock, 0);
    ps_sspclock_away (clock, 0, true);
    ps_sspclock_away (clock, 0, false);
    assert_int_equal (ps_sspclock_of (clock, 0), 7);
    ps_sspclock_started (clock, 0);
    ps_sspclock_finished (clock, 0);
    assert_false (ps_sspclock_may_start (clock, 0));
    //  Leaving ends an absence: joining again counts it at once.
    ps_sspclock_away (clock, 1, true);
    ps_sspclock_leave (clock, 1);
    ps_sspclock_join (clock, 1);
    assert_int_equal (ps_sspclock_slowest (clock), 6);
    uint64_t counts [PS_SSPCLOCK_BUCKETS];
    assert_true (ps_sspclock_histogram (clock, counts) <= 1);
    ps_sspclock_destroy (&clock);
}

//  Random schedules: workers start and finish steps in random order, a
//  few leave and join again, for several staleness bounds. At every
//  start the bound is checked against the test's own copy of the clocks;
//  at every moment some live worker may start.
static void
test_random_schedules (void **state)
{
    (void) state;
    enum { WORKERS = 5, EVENTS = 200000 };
    const uint32_t bounds [] = { 0, 1, 3, 8, PS_SSPCLOCK_UNBOUNDED };
    unsigned seed = 12345;
    for (size_t b = 0; b < sizeof bounds / sizeof bounds [0]; b++) {
        uint32_t s = bounds [b];
        ps_sspclock_t *clock = ps_sspclock_new (WORKERS, s);
        uint64_t mine [WORKERS] = { 0 };
        bool live [WORKERS], busy [WORKERS] = { false };
        for (uint32_t w = 0; w < WORKERS; w++) {
            ps_sspclock_join (clock, w);
            live [w] = true;
        }
        uint64_t starts = 0, widest = 0;
        for (int e = 0; e < EVENTS; e++) {
            uint32_t w = (uint32_t) rand_r (&seed) % WORKERS;
            int what = rand_r (&seed) % 100;
            if (!live [w]) {
                if (what < 5) {
                    //  Rejoin at the slowest live clock.
                    uint64_t slowest = UINT64_MAX;
                    for (int u = 0; u < WORKERS; u++)
                        if (live [u] && mine [u] < slowest)
                            slowest = mine [u];
                    ps_sspclock_join (clock, w);
                    live [w] = true;
                    mine [w] = slowest == UINT64_MAX ? 0 : slowest;
                    assert_int_equal (ps_sspclock_of (clock, w), mine [w]);
                }
                continue;
            }
            if (what < 1) {
                ps_sspclock_leave (clock, w);
                live [w] = busy [w] = false;
                continue;
            }
            if (busy [w]) {
                ps_sspclock_finished (clock, w);
                mine [w]++;
                busy [w] = false;
                continue;
            }
            bool allowed = true;
            for (int u = 0; u < WORKERS; u++)
                if (live [u] && mine [w] > mine [u] + (s == PS_SSPCLOCK_UNBOUNDED ? mine [w] : s))
                    allowed = false;
            assert_int_equal (ps_sspclock_may_start (clock, w), allowed);
            if (allowed) {
                ps_sspclock_started (clock, w);
                busy [w] = true;
                starts++;
            }
            //  No deadlock: the slowest live worker may always start.
            for (int u = 0; u < WORKERS; u++)
                if (live [u] && mine [u] == ps_sspclock_slowest (clock))
                    assert_true (ps_sspclock_may_start (clock, (uint32_t) u));
        }
        uint64_t counts [PS_SSPCLOCK_BUCKETS], total = 0;
        widest = ps_sspclock_histogram (clock, counts);
        for (int i = 0; i < PS_SSPCLOCK_BUCKETS; i++)
            total += counts [i];
        assert_int_equal (total, starts);
        if (s != PS_SSPCLOCK_UNBOUNDED)
            assert_true (widest <= s);
        print_message ("    S = %u: %llu starts, widest lead %llu\n", (unsigned) s,
                       (unsigned long long) starts, (unsigned long long) widest);
        ps_sspclock_destroy (&clock);
    }
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_lock_step),
        cmocka_unit_test (test_leave_and_join),
        cmocka_unit_test (test_away),
        cmocka_unit_test (test_random_schedules),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
