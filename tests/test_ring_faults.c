//  Ring members that fail or misbehave, between real processes on real
//  sockets (the fixture of tests/harness_ring.h): a member that never
//  joins and one killed mid-run (PS_ETIMEDOUT within the timeout and some
//  slack, then the survivors' next ring works); malformed messages from a
//  raw PUSH at live members, counted and harmless; a trusted worker that
//  is not a member's predecessor, dropped and counted as malformed while
//  the collective is still right; and members whose counts disagree
//  (PS_EPROTO naming the sizes). The members that never join, die and
//  disagree do so over sockets and again in the shared memory of a ring
//  of one host.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "harness.h"
#include "harness_ring.h"
#include "harness_ring_wire.h"
#include "ps_clock.h"


//  Run all-reduces of count floats until one fails; it must fail with
//  PS_ETIMEDOUT within the timeout and the slack, and the ring must then
//  refuse collectives until it is formed again. limit: collectives to
//  run at most (0: one). Reports "timedout MS".
static int
s_child_until_timeout (harness_ring_child_t *child, size_t count, int limit)
{
    float *data = calloc (count, sizeof (float));
    if (!data)
        return HARNESS_RING_EXIT_MEMORY;
    ps_error_t err;
    int rc = 0;
    double elapsed = 0;
    double give_up = ps_clock_ms () + HARNESS_RING_WAIT_MS;
    for (int i = 0; rc == 0 && (i < limit || i == 0) && ps_clock_ms () < give_up; i++) {
        double start = ps_clock_ms ();
        rc = ps_ring_allreduce (child->ring, data, count, &err);
        elapsed = ps_clock_ms () - start;
    }
    free (data);
    if (rc == 0)
        return HARNESS_RING_EXIT_NO_FAILURE;
    if (rc != PS_ETIMEDOUT) {
        harness_ring_child_say (child, "expected a timeout, got %d: %s", rc, err.msg);
        return HARNESS_RING_EXIT_WRONG_CODE;
    }
    if (elapsed < HARNESS_RING_TIMEOUT_MS - 1) {
        harness_ring_child_say (child, "timed out after %.0f ms: %s", elapsed, err.msg);
        return HARNESS_RING_EXIT_TOO_FAST;
    }
    if (elapsed > HARNESS_RING_TIMEOUT_MS + HARNESS_RING_SLACK_MS) {
        harness_ring_child_say (child, "timed out after %.0f ms: %s", elapsed, err.msg);
        return HARNESS_RING_EXIT_TOO_SLOW;
    }
    float one = 1;
    if (ps_ring_allreduce (child->ring, &one, 1, &err) != PS_EINVAL) {
        harness_ring_child_say (child, "a broken ring ran another all-reduce");
        return HARNESS_RING_EXIT_WRONG_CODE;
    }
    return harness_write_line (child->out, "timedout %.0f", elapsed) ? HARNESS_RING_EXIT_PIPE : 0;
}

//  Child 2 forms and then does nothing until told to exit; the others
//  time out, form ring 2 without it, and run a case.
static int
s_scenario_never_joins (harness_ring_child_t *child, const char *arg)
{
    (void) arg;
    int rc = harness_ring_child_form (child);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (child->index == 2)
        return harness_ring_child_expect (child, "exit");
    if ((rc = s_child_until_timeout (child, 100000, 1)))
        return rc;
    if ((rc = harness_ring_child_form (child)))
        return rc == 1 ? 0 : rc;
    harness_ring_case_t c = { 30011, 5, false };
    if ((rc = harness_ring_child_case (child, "after-absent", 0, &c)))
        return rc;
    return harness_write_line (child->out, "done") ? HARNESS_RING_EXIT_PIPE : 0;
}

static void
s_never_joins (const char *transport)
{
    harness_ring_net_t net = { .transport = transport, .timeout_ms = HARNESS_RING_TIMEOUT_MS };
    harness_ring_cluster_t cluster;
    harness_ring_cluster_start (&cluster, 3, &net, "never_joins", NULL);
    harness_ring_cluster_form_all (&cluster, 1);
    char line [HARNESS_RING_LINE_MAX];
    for (int i = 0; i < 2; i++)
        harness_ring_cluster_expect (&cluster, i, "timedout ", line, sizeof line);
    harness_ring_cluster_say (&cluster, 2, "exit");
    assert_int_equal (harness_ring_cluster_reap (&cluster, 2), 0);
    int survivors [] = { 0, 1 };
    harness_ring_cluster_form (&cluster, 2, survivors, 2);
    for (int i = 0; i < 2; i++)
        harness_ring_cluster_expect (&cluster, i, "done", line, sizeof line);
    harness_ring_cluster_finish (&cluster);
    harness_ring_case_t c = { 30011, 5, false };
    harness_ring_check_case ("after-absent", 0, &c, survivors, 2);
}

//  Over sockets, and in the shared memory of members of one host.
static void
test_never_joins (void **state)
{
    (void) state;
    s_never_joins ("tcp");
    s_never_joins ("host");
}

//  Every child says "running" and all-reduces until one fails; child 2 is
//  killed meanwhile. The survivors then form ring 2 and run a case.
static int
s_scenario_killed (harness_ring_child_t *child, const char *arg)
{
    (void) arg;
    int rc = harness_ring_child_form (child);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (harness_write_line (child->out, "running"))
        return HARNESS_RING_EXIT_PIPE;
    if ((rc = s_child_until_timeout (child, 262147, INT32_MAX)))
        return rc;
    if ((rc = harness_ring_child_form (child)))
        return rc == 1 ? 0 : rc;
    harness_ring_case_t c = { HARNESS_RING_LARGE, 6, false };
    if ((rc = harness_ring_child_case (child, "after-kill", 0, &c)))
        return rc;
    return harness_write_line (child->out, "done") ? HARNESS_RING_EXIT_PIPE : 0;
}

static void
s_killed_member (const char *transport)
{
    //  A small shared-memory slot too, so that the member dies between
    //  passes as well as between collectives.
    harness_ring_net_t net = { .transport = transport, .timeout_ms = HARNESS_RING_TIMEOUT_MS,
                               .chunk_bytes = 65536, .shm_bytes = 65536 };
    harness_ring_cluster_t cluster;
    harness_ring_cluster_start (&cluster, 3, &net, "killed", NULL);
    harness_ring_cluster_form_all (&cluster, 1);
    char line [HARNESS_RING_LINE_MAX];
    for (int i = 0; i < 3; i++)
        harness_ring_cluster_expect (&cluster, i, "running", line, sizeof line);
    harness_sleep_ms (100);
    assert_int_equal (kill (cluster.pid [2], SIGKILL), 0);
    assert_int_equal (harness_ring_cluster_reap (&cluster, 2), 128 + SIGKILL);
    for (int i = 0; i < 2; i++)
        harness_ring_cluster_expect (&cluster, i, "timedout ", line, sizeof line);
    int survivors [] = { 1, 0 };
    harness_ring_cluster_form (&cluster, 2, survivors, 2);
    for (int i = 0; i < 2; i++)
        harness_ring_cluster_expect (&cluster, i, "done", line, sizeof line);
    harness_ring_cluster_finish (&cluster);
    harness_ring_case_t c = { HARNESS_RING_LARGE, 6, false };
    harness_ring_check_case ("after-kill", 0, &c, survivors, 2);
}

static void
test_killed_member (void **state)
{
    (void) state;
    s_killed_member ("tcp");
    s_killed_member ("host");
}


//  ---------------------------------------------------------------------

//  The four all-reduce cases of s_run_four: count floats, seeds 300 + k.
static harness_ring_case_t
s_four_case (size_t count, int k)
{
    return (harness_ring_case_t) { count, 300 + (uint64_t) k, false };
}

//  Form, say "formed", wait for "go", run four cases (arg: "TAG COUNT"),
//  report the stats and wait for "exit".
static int
s_scenario_four (harness_ring_child_t *child, const char *arg)
{
    char tag [32];
    size_t count;
    if (sscanf (arg, "%31s %zu", tag, &count) != 2)
        return HARNESS_RING_EXIT_EXEC;
    int rc = harness_ring_child_form (child);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (harness_write_line (child->out, "formed") || harness_ring_child_expect (child, "go"))
        return HARNESS_RING_EXIT_PIPE;
    for (int k = 0; rc == 0 && k < 4; k++) {
        harness_ring_case_t c = s_four_case (count, k);
        rc = harness_ring_child_case (child, tag, k, &c);
    }
    if (rc || (rc = harness_ring_child_stats (child)))
        return rc;
    return harness_ring_child_expect (child, "exit");
}

//  A ring of n children in index order runs four all-reduces of count
//  floats over TCP in chunks of 1 KiB; once it is formed, and before they
//  start, inject (cluster, arg) sends messages to its members and returns
//  how many each must count as malformed. Checks those counts, and the
//  results.
typedef void (s_inject_fn) (harness_ring_cluster_t *cluster, int *malformed, void *arg);

static void
s_run_four (int n, const char *tag, size_t count, s_inject_fn *inject, void *arg)
{
    harness_ring_net_t net = { .transport = "tcp", .chunk_bytes = 1024 };
    char text [64];
    snprintf (text, sizeof text, "%s %zu", tag, count);
    harness_ring_cluster_t cluster;
    harness_ring_cluster_start (&cluster, n, &net, "four", text);
    harness_ring_cluster_form_all (&cluster, 1);
    char line [HARNESS_RING_LINE_MAX];
    for (int i = 0; i < n; i++)
        harness_ring_cluster_expect (&cluster, i, "formed", line, sizeof line);
    int expected [HARNESS_RING_MAX_CHILDREN] = { 0 };
    inject (&cluster, expected, arg);
    for (int i = 0; i < n; i++)
        harness_ring_cluster_say (&cluster, i, "go");
    for (int i = 0; i < n; i++) {
        const char *stats = harness_ring_cluster_expect (&cluster, i, "stats ", line, sizeof line);
        char *cursor;
        uint64_t collectives = strtoull (stats, &cursor, 10);
        strtoull (cursor, &cursor, 10);
        uint64_t malformed = strtoull (cursor, &cursor, 10);
        assert_int_equal (collectives, 4);
        if (malformed != (uint64_t) expected [i])
            fail_msg ("member %d counted %" PRIu64 " malformed messages, expected %d", i,
                      malformed, expected [i]);
        harness_ring_cluster_say (&cluster, i, "exit");
    }
    harness_ring_cluster_finish (&cluster);
    int members [HARNESS_RING_MAX_CHILDREN];
    for (int i = 0; i < n; i++)
        members [i] = i;
    for (int k = 0; k < 4; k++) {
        harness_ring_case_t c = s_four_case (count, k);
        harness_ring_check_case (tag, k, &c, members, n);
    }
}

//  Malformed messages from the predecessor of each member of two.
static void
s_inject_live_malformed (harness_ring_cluster_t *cluster, int *malformed, void *arg)
{
    (void) arg;
    for (int i = 0; i < 2; i++) {
        char member [16], predecessor [16];
        snprintf (member, sizeof member, "worker:%d", i);
        snprintf (predecessor, sizeof predecessor, "worker:%d", 1 - i);
        harness_injector_t injector;
        harness_inject_open (&injector, cluster->endpoint [i], predecessor, member);
        malformed [i] = harness_inject_malformed (&injector, 1, 0);
        harness_inject_close (&injector);
    }
}

static void
test_malformed_live (void **state)
{
    (void) state;
    s_run_four (2, "malformed", 10007, s_inject_live_malformed, NULL);
}

//  In ring 1 of children 0, 1, 2 (3000 floats: segments of 4000 bytes),
//  the first message each member expects is the first chunk of its
//  predecessor's own segment. Member 0 gets exactly that message, of
//  huge values, from worker:1, a member of the ring but not its
//  predecessor; member 1 gets it from worker:5, a worker of the cluster
//  outside the ring. Each drops its message and counts it as malformed,
//  and every sum is still right.
static void
s_inject_strangers (harness_ring_cluster_t *cluster, int *malformed, void *arg)
{
    (void) arg;
    static const struct { int member; const char *sender; } strangers [] = {
        { 0, "worker:1" }, { 1, "worker:5" },
    };
    float poison [256];
    for (size_t i = 0; i < 256; i++)
        poison [i] = 1e30f;
    for (size_t s = 0; s < 2; s++) {
        int m = strangers [s].member;
        char member [16];
        snprintf (member, sizeof member, "worker:%d", m);
        harness_injector_t injector;
        harness_inject_open (&injector, cluster->endpoint [m], strangers [s].sender, member);
        uint64_t segment = (uint64_t) (m + 2) % 3;
        harness_wire_t wire = harness_wire (1, 0, segment * 4000, sizeof poison, 12000);
        harness_inject (&injector, &wire, poison, sizeof poison);
        harness_inject_close (&injector);
        malformed [m] = 1;
    }
}

static void
test_stranger_dropped (void **state)
{
    (void) state;
    s_run_four (3, "stranger", 3000, s_inject_strangers, NULL);
}

//  Members whose counts differ: each receives slices of another vector.
static int
s_scenario_mismatch (harness_ring_child_t *child, const char *arg)
{
    (void) arg;
    int rc = harness_ring_child_form (child);
    if (rc)
        return rc == 1 ? 0 : rc;
    size_t count = child->index == 0 ? 1000 : 2000;
    float *data = calloc (count, sizeof (float));
    if (!data)
        return HARNESS_RING_EXIT_MEMORY;
    ps_error_t err;
    rc = ps_ring_allreduce (child->ring, data, count, &err);
    free (data);
    if (rc == PS_EPROTO && !strstr (err.msg, "this member's is")) {
        harness_ring_child_say (child, "PS_EPROTO does not name the sizes: %s", err.msg);
        return HARNESS_RING_EXIT_WRONG_CODE;
    }
    return harness_write_line (child->out, "code %d", rc) ? HARNESS_RING_EXIT_PIPE : 0;
}

static void
s_count_mismatch (const char *transport)
{
    harness_ring_net_t net = { .transport = transport, .timeout_ms = 2000 };
    harness_ring_cluster_t cluster;
    harness_ring_cluster_start (&cluster, 2, &net, "mismatch", NULL);
    harness_ring_cluster_form_all (&cluster, 1);
    char line [HARNESS_RING_LINE_MAX];
    int eproto = 0;
    for (int i = 0; i < 2; i++) {
        int code = atoi (harness_ring_cluster_expect (&cluster, i, "code ", line, sizeof line));
        //  The first to see the other's slice fails and closes its socket,
        //  which may drop its own slice before the other member saw it.
        if (code != PS_EPROTO && code != PS_ETIMEDOUT)
            fail_msg ("child %d: all-reduce returned %d", i, code);
        eproto += code == PS_EPROTO;
    }
    //  In shared memory both compare the announcements, so both see it.
    assert_true (eproto >= (strcmp (transport, "host") == 0 ? 2 : 1));
    harness_ring_cluster_finish (&cluster);
}

static void
test_count_mismatch (void **state)
{
    (void) state;
    s_count_mismatch ("tcp");
    s_count_mismatch ("host");
}


//  The scenarios a child can run, by name.
static const harness_ring_scenario_t s_scenarios [] = {
    { "never_joins", s_scenario_never_joins },
    { "killed", s_scenario_killed },
    { "four", s_scenario_four },
    { "mismatch", s_scenario_mismatch },
};

int
main (int argc, char *argv [])
{
    int status;
    if (harness_ring_start ("test_ring_faults", argc, argv, s_scenarios,
                            sizeof s_scenarios / sizeof s_scenarios [0], &status))
        return status;
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_malformed_live, harness_ring_teardown),
        cmocka_unit_test_teardown (test_stranger_dropped, harness_ring_teardown),
        cmocka_unit_test_teardown (test_count_mismatch, harness_ring_teardown),
        cmocka_unit_test_teardown (test_never_joins, harness_ring_teardown),
        cmocka_unit_test_teardown (test_killed_member, harness_ring_teardown),
    };
    return harness_finish (cmocka_run_group_tests (tests, harness_ring_setup_group,
                                                   harness_ring_teardown_group));
}
