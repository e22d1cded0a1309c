//  The ring collectives (worker/ps_ring.h) between real processes on real
//  sockets (the fixture of tests/harness_ring.h): all-reduces of odd sizes
//  (1, 7, n - 1, fewer than n, not a multiple of the chunk, 1000003) for
//  n = 1..5 over TCP and IPC, several in a row, against a float64 sum of
//  the inputs, and in shared memory between members of one host, to the
//  same bits; re-forming with a member gone and a new order while stale
//  messages of the old ring and of earlier collectives are injected; and
//  broadcasts from every root. One all-reduce case runs unsecured (no
//  identity, no tasks).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "harness_ring.h"
#include "harness_ring_wire.h"
#include "ps_file.h"
#include "ps_host.h"


#define S_MAX_CASES 16

typedef struct {
    harness_ring_case_t cases [S_MAX_CASES];
    int count;
    const char *tag;
} s_cases_t;

static void
s_cases_for (s_cases_t *cases, int n, const char *tag, uint64_t seed)
{
    size_t sizes [] = { 1, 7, (size_t) n - 1, (size_t) n + 1, 2, 4099, 0, HARNESS_RING_LARGE };
    cases->count = 0;
    cases->tag = tag;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes [0]; s++) {
        if (sizes [s] == 0 && s != 6)
            continue;
        cases->cases [cases->count++] = (harness_ring_case_t) { sizes [s], seed + s, false };
    }
    //  The large case again with integers, whose sums are exact.
    cases->cases [cases->count++] = (harness_ring_case_t) { HARNESS_RING_LARGE, seed + 100, true };
    cases->cases [cases->count++] = (harness_ring_case_t) { 33, seed + 101, true };
}

//  Form, run every case of s_cases_for (arg: "TAG N SEED"), say "done".
static int
s_scenario_cases (harness_ring_child_t *child, const char *arg)
{
    char tag [32];
    int n;
    uint64_t seed;
    if (sscanf (arg, "%31s %d %" SCNu64, tag, &n, &seed) != 3)
        return HARNESS_RING_EXIT_EXEC;
    s_cases_t cases;
    s_cases_for (&cases, n, tag, seed);
    int rc = harness_ring_child_form (child);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (harness_write_line (child->out, "successor %s", ps_ring_successor (child->ring)))
        return HARNESS_RING_EXIT_PIPE;
    for (int k = 0; k < cases.count; k++)
        if ((rc = harness_ring_child_case (child, cases.tag, k, &cases.cases [k])))
            return rc;
    if ((rc = harness_ring_child_stats (child)))
        return rc;
    return harness_write_line (child->out, "done") ? HARNESS_RING_EXIT_PIPE : 0;
}

static void
s_run_cases (int n, const harness_ring_net_t *net, const char *tag)
{
    uint64_t seed = 1000 * (uint64_t) n;
    s_cases_t cases;
    s_cases_for (&cases, n, tag, seed);
    char arg [64];
    snprintf (arg, sizeof arg, "%s %d %" PRIu64, tag, n, seed);
    harness_ring_cluster_t cluster;
    harness_ring_cluster_start (&cluster, n, net, "cases", arg);
    harness_ring_cluster_form_all (&cluster, 1);
    char line [HARNESS_RING_LINE_MAX];
    //  Which transport each member sends on: ipc:// where the members are
    //  given as endpoint sets of one host (ps_host.h) or bound on ipc.
    bool sets = strcmp (net->transport, "host") == 0 || strcmp (net->transport, "mixed") == 0;
    const char *want = strcmp (net->transport, "ipc") == 0 || (sets && ps_host_same_host ())
                     ? "ipc://" : "tcp://";
    for (int i = 0; i < n; i++) {
        const char *successor = harness_ring_cluster_expect (&cluster, i, "successor ", line,
                                                             sizeof line);
        if (n > 1 && strncmp (successor, want, strlen (want)) != 0)
            fail_msg ("%s: member %d sends to %s, not over %s", tag, i, successor, want);
    }
    //  Which all-reduces went over shared memory: all of a ring of more
    //  than one member on one host, unless PS_SAME_HOST says otherwise.
    bool shared = n > 1 && strcmp (net->transport, "host") == 0 && ps_host_shared_memory ();
    for (int i = 0; i < n; i++) {
        const char *stats = harness_ring_cluster_expect (&cluster, i, "stats ", line, sizeof line);
        uint64_t counters [6];
        char *cursor = (char *) stats;
        for (int c = 0; c < 6; c++)
            counters [c] = strtoull (cursor, &cursor, 10);
        assert_int_equal (counters [0], cases.count);
        if (counters [5] != (shared ? (uint64_t) cases.count : 0))
            fail_msg ("%s: member %d did %" PRIu64 " of %d all-reduces over shared memory, "
                      "expected %d", tag, i, counters [5], cases.count,
                      shared ? cases.count : 0);
        harness_ring_cluster_expect (&cluster, i, "done", line, sizeof line);
    }
    harness_ring_cluster_finish (&cluster);
    int members [HARNESS_RING_MAX_CHILDREN];
    for (int i = 0; i < n; i++)
        members [i] = i;
    for (int k = 0; k < cases.count; k++)
        harness_ring_check_case (tag, k, &cases.cases [k], members, n);
}

static void
test_allreduce_tcp (void **state)
{
    (void) state;
    //  A small chunk, so that the large cases travel in many messages
    //  and the small ones in one.
    harness_ring_net_t net = { .transport = "tcp", .chunk_bytes = 4096 };
    char tag [32];
    for (int n = 1; n <= 5; n++) {
        snprintf (tag, sizeof tag, "tcp%d", n);
        s_run_cases (n, &net, tag);
    }
}

static void
test_allreduce_ipc (void **state)
{
    (void) state;
    harness_ring_net_t net = { .transport = "ipc" };
    s_run_cases (3, &net, "ipc3");
    //  An odd chunk that is not a multiple of a float, and the one ring of
    //  processes without CURVE (no identities, no member tasks), which
    //  --insecure clusters run.
    harness_ring_net_t odd = { .transport = "ipc", .chunk_bytes = 1001, .insecure = true };
    s_run_cases (2, &odd, "ipc2");
}

//  Whether cases of tags a and b (n members each) are bitwise the same.
static void
s_same_results (const char *a, const char *b, int n)
{
    s_cases_t cases;
    s_cases_for (&cases, n, a, 1000 * (uint64_t) n);
    for (int k = 0; k < cases.count; k++)
        for (int i = 0; i < n; i++) {
            char pa [512], pb [512];
            snprintf (pa, sizeof pa, "%s/%s-%d-%d.f32", harness_ring_dir (), a, k, i);
            snprintf (pb, sizeof pb, "%s/%s-%d-%d.f32", harness_ring_dir (), b, k, i);
            size_t na, nb;
            char *da = NULL, *db = NULL;
            ps_error_t err;
            if (ps_file_read (pa, SIZE_MAX, &da, &na, &err)
            ||  ps_file_read (pb, SIZE_MAX, &db, &nb, &err))
                fail_msg ("%s", err.msg);
            if (na != nb || memcmp (da, db, na) != 0)
                fail_msg ("case %d of member %d: %s differs from %s", k, i, pb, pa);
            free (da);
            free (db);
        }
}

//  Members of one host, given as endpoint sets, all-reduce in shared
//  memory (and broadcast over ipc://), secured and not, and sum bitwise
//  as they do over tcp, in one pass or in many (a slot of 16 KiB: the
//  large case takes 245 passes), for 2 to 5 members; under
//  PS_SAME_HOST=ipc, in all of them or in one, they keep to ipc://, again
//  to the same bits. Members
//  of different host identities, or of one with same-host peers turned
//  off, use tcp.
static void
test_allreduce_same_host (void **state)
{
    (void) state;
    harness_ring_net_t tcp = { .transport = "tcp", .chunk_bytes = 4096 };
    harness_ring_net_t host = { .transport = "host", .chunk_bytes = 4096 };
    s_run_cases (3, &tcp, "st3");
    s_run_cases (3, &host, "sh3");
    s_same_results ("st3", "sh3", 3);
    harness_ring_net_t plain = { .transport = "host", .insecure = true };
    s_run_cases (2, &plain, "sh2");
    harness_ring_net_t small = { .transport = "host", .shm_bytes = 16384 };
    char tag [2][32];
    for (int n = 2; n <= 5; n += n == 2 ? 2 : 1) {
        snprintf (tag [0], sizeof tag [0], "mt%d", n);
        snprintf (tag [1], sizeof tag [1], "mh%d", n);
        s_run_cases (n, &tcp, tag [0]);
        s_run_cases (n, &small, tag [1]);
        s_same_results (tag [0], tag [1], n);
    }
    harness_ring_net_t hosts = { .transport = "hosts", .chunk_bytes = 4096 };
    s_run_cases (3, &hosts, "sd3");
    s_same_results ("st3", "sd3", 3);
    assert_int_equal (setenv ("PS_SAME_HOST", "ipc", 1), 0);
    s_run_cases (3, &host, "si3");
    s_same_results ("st3", "si3", 3);
    assert_int_equal (unsetenv ("PS_SAME_HOST"), 0);
    //  One member that shares no memory keeps the whole ring on ipc://.
    harness_ring_net_t mixed = { .transport = "mixed", .chunk_bytes = 4096 };
    s_run_cases (3, &mixed, "sx3");
    s_same_results ("st3", "sx3", 3);
    assert_int_equal (setenv ("PS_SAME_HOST", "tcp", 1), 0);
    s_run_cases (2, &host, "so2");
    assert_int_equal (unsetenv ("PS_SAME_HOST"), 0);
}

//  ---------------------------------------------------------------------
//  Several collectives, then a new ring without one member and in a new
//  order, with stale messages injected

static const harness_ring_case_t s_reform_first [] = {
    { 1000, 11, false }, { 7, 12, false }, { HARNESS_RING_LARGE, 13, true }
};
static const harness_ring_case_t s_reform_second [] = {
    { 5003, 21, false }, { 2, 22, false }, { 65537, 23, false }
};

static int
s_scenario_reform (harness_ring_child_t *child, const char *arg)
{
    (void) arg;
    int rc = harness_ring_child_form (child);
    for (int k = 0; rc == 0 && k < 3; k++)
        rc = harness_ring_child_case (child, "reform1", k, &s_reform_first [k]);
    if (rc)
        return rc;
    if (harness_write_line (child->out, "done"))
        return HARNESS_RING_EXIT_PIPE;
    rc = harness_ring_child_form (child);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (harness_write_line (child->out, "formed") || harness_ring_child_expect (child, "go"))
        return HARNESS_RING_EXIT_PIPE;
    if ((rc = harness_ring_child_case (child, "reform2", 0, &s_reform_second [0])))
        return rc;
    if (harness_write_line (child->out, "first") || harness_ring_child_expect (child, "go"))
        return HARNESS_RING_EXIT_PIPE;
    for (int k = 1; rc == 0 && k < 3; k++)
        rc = harness_ring_child_case (child, "reform2", k, &s_reform_second [k]);
    if (rc || (rc = harness_ring_child_stats (child)))
        return rc;
    return harness_ring_child_expect (child, "exit");
}

static void
test_reform (void **state)
{
    (void) state;
    harness_ring_net_t net = { .transport = "tcp", .chunk_bytes = 8192 };
    harness_ring_cluster_t cluster;
    harness_ring_cluster_start (&cluster, 4, &net, "reform", NULL);
    harness_ring_cluster_form_all (&cluster, 1);
    char line [HARNESS_RING_LINE_MAX];
    for (int i = 0; i < 4; i++)
        harness_ring_cluster_expect (&cluster, i, "done", line, sizeof line);
    int first [] = { 0, 1, 2, 3 };
    for (int k = 0; k < 3; k++)
        harness_ring_check_case ("reform1", k, &s_reform_first [k], first, 4);

    //  Child 2 leaves; the others form ring 5 as 3, 0, 1.
    harness_ring_cluster_say (&cluster, 2, "leave");
    assert_int_equal (harness_ring_cluster_reap (&cluster, 2), 0);
    int second [] = { 3, 0, 1 };
    harness_ring_cluster_form (&cluster, 5, second, 3);
    for (int p = 0; p < 3; p++)
        harness_ring_cluster_expect (&cluster, second [p], "formed", line, sizeof line);
    //  Messages of ring 1 wait at every member before its first collective
    //  of ring 5 starts; messages of ring 5's collective 0 after it ended.
    //  Each comes with the key of the member's predecessor in ring 5, the
    //  one key it reads.
    char member [3][16], predecessor [3][16];
    for (int p = 0; p < 3; p++) {
        snprintf (member [p], sizeof member [p], "worker:%d", second [p]);
        snprintf (predecessor [p], sizeof predecessor [p], "worker:%d", second [(p + 2) % 3]);
    }
    for (int p = 0; p < 3; p++)
        harness_inject_stale (cluster.endpoint [second [p]], 1, 3, predecessor [p], member [p]);
    for (int p = 0; p < 3; p++)
        harness_ring_cluster_say (&cluster, second [p], "go");
    for (int p = 0; p < 3; p++)
        harness_ring_cluster_expect (&cluster, second [p], "first", line, sizeof line);
    for (int p = 0; p < 3; p++)
        harness_inject_stale (cluster.endpoint [second [p]], 5, 1, predecessor [p], member [p]);
    for (int p = 0; p < 3; p++)
        harness_ring_cluster_say (&cluster, second [p], "go");
    for (int p = 0; p < 3; p++) {
        const char *stats = harness_ring_cluster_expect (&cluster, second [p], "stats ", line,
                                                         sizeof line);
        char *cursor;
        uint64_t collectives = strtoull (stats, &cursor, 10);
        uint64_t stale = strtoull (cursor, &cursor, 10);
        uint64_t malformed = strtoull (cursor, &cursor, 10);
        assert_int_equal (collectives, 6);
        if (stale == 0)
            fail_msg ("child %d dropped no stale message", second [p]);
        assert_int_equal (malformed, 0);
        harness_ring_cluster_say (&cluster, second [p], "exit");
    }
    harness_ring_cluster_finish (&cluster);
    for (int k = 0; k < 3; k++)
        harness_ring_check_case ("reform2", k, &s_reform_second [k], second, 3);
}

//  ---------------------------------------------------------------------
//  Broadcast from every root

//  arg: the chunk size, in bytes.
static int
s_scenario_broadcast (harness_ring_child_t *child, const char *arg)
{
    size_t chunk = strtoul (arg, NULL, 10);
    int rc = harness_ring_child_form (child);
    if (rc)
        return rc == 1 ? 0 : rc;
    int n = ps_ring_size (child->ring);
    int rank = ps_ring_rank (child->ring);
    size_t sizes [] = { 1, 13, 100003, 3 * chunk + 1, 0, chunk };
    size_t largest = 100003 > 3 * chunk + 1 ? 100003 : 3 * chunk + 1;
    unsigned char *data = malloc (largest);
    unsigned char *expected = malloc (largest);
    if (!data || !expected)
        return HARNESS_RING_EXIT_MEMORY;
    for (int root = 0; root < n && rc == 0; root++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes [0] && rc == 0; s++) {
            uint64_t seed = 100 * (uint64_t) root + s;
            harness_ring_fill_bytes (expected, sizes [s], seed, root);
            if (rank == root)
                memcpy (data, expected, sizes [s]);
            else
                memset (data, 0xA5, largest);
            ps_error_t err;
            if (ps_ring_broadcast (child->ring, root, data, sizes [s], &err)) {
                harness_ring_child_say (child, "broadcast of %zu bytes from %d: %s",
                                        sizes [s], root, err.msg);
                rc = HARNESS_RING_EXIT_BROADCAST;
            }
            else
            if (memcmp (data, expected, sizes [s]) != 0) {
                harness_ring_child_say (child, "broadcast of %zu bytes from %d differs",
                                        sizes [s], root);
                rc = HARNESS_RING_EXIT_BROADCAST_DATA;
            }
        }
    free (data);
    free (expected);
    //  An all-reduce after the broadcasts, in the same sequence.
    harness_ring_case_t last = { 999, 77, false };
    if (rc == 0)
        rc = harness_ring_child_case (child, "bcast-last", n, &last);
    if (rc == 0 && harness_write_line (child->out, "done"))
        rc = HARNESS_RING_EXIT_PIPE;
    return rc;
}

static void
s_run_broadcast (int n, const char *transport, size_t chunk)
{
    harness_ring_net_t net = { .transport = transport, .chunk_bytes = chunk };
    char arg [32];
    snprintf (arg, sizeof arg, "%zu", chunk ? chunk : (size_t) PS_RING_DEFAULT_CHUNK);
    harness_ring_cluster_t cluster;
    harness_ring_cluster_start (&cluster, n, &net, "broadcast", arg);
    harness_ring_cluster_form_all (&cluster, 3);
    char line [HARNESS_RING_LINE_MAX];
    for (int i = 0; i < n; i++)
        harness_ring_cluster_expect (&cluster, i, "done", line, sizeof line);
    harness_ring_cluster_finish (&cluster);
    int members [HARNESS_RING_MAX_CHILDREN];
    for (int i = 0; i < n; i++)
        members [i] = i;
    harness_ring_case_t last = { 999, 77, false };
    harness_ring_check_case ("bcast-last", n, &last, members, n);
}

static void
test_broadcast (void **state)
{
    (void) state;
    for (int n = 1; n <= 4; n++)
        s_run_broadcast (n, "tcp", 1000);
    s_run_broadcast (3, "ipc", 0);
}


//  The scenarios a child can run, by name.
static const harness_ring_scenario_t s_scenarios [] = {
    { "cases", s_scenario_cases },
    { "reform", s_scenario_reform },
    { "broadcast", s_scenario_broadcast },
};

int
main (int argc, char *argv [])
{
    int status;
    if (harness_ring_start ("test_ring_allreduce", argc, argv, s_scenarios,
                            sizeof s_scenarios / sizeof s_scenarios [0], &status))
        return status;
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_allreduce_tcp, harness_ring_teardown),
        cmocka_unit_test_teardown (test_allreduce_ipc, harness_ring_teardown),
        cmocka_unit_test_teardown (test_allreduce_same_host, harness_ring_teardown),
        cmocka_unit_test_teardown (test_reform, harness_ring_teardown),
        cmocka_unit_test_teardown (test_broadcast, harness_ring_teardown),
    };
    return harness_finish (cmocka_run_group_tests (tests, harness_ring_setup_group,
                                                   harness_ring_teardown_group));
}
