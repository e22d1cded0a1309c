//  The ring collectives (worker/ps_ring.h) between real processes on real
//  sockets. Each multi-process test forks its members; every child binds
//  its own ring on loopback TCP (a wildcard port) or IPC, sends its
//  endpoint up a pipe, and forms the ring from the member list the parent
//  sends back. Children write their results to files, which the parent
//  compares: bitwise between members, and against a float64 sum of the
//  inputs, which are generated from (seed, rank), within the rounding
//  bound n * FLT_EPSILON * sum |x| (exactly for integer-valued inputs).
//
//  Covered: all-reduces of odd sizes (1, 7, n - 1, fewer than n, not a
//  multiple of the chunk, 1000003) for n = 1..5 over TCP and IPC, several
//  in a row; re-forming with a member gone and a new order while stale
//  messages of the old ring and of earlier collectives are injected;
//  broadcasts from every root; a member that never joins and one killed
//  mid-run (PS_ETIMEDOUT within the timeout and some slack, then the
//  survivors' next ring works); the watch (a file descriptor, a ZeroMQ
//  socket, and the 100 ms calls) returning PS_ECANCELED; malformed
//  messages from a raw PUSH, counted and harmless; a chunk that does not
//  fit (PS_EPROTO); the wire format against a peer played on raw ZeroMQ,
//  with messages of the next collective held until it starts; and bad
//  arguments.
//
//  Children never call cmocka: they report failures with distinct exit
//  codes (s_exit_name), which the parent asserts on. A teardown kills and
//  reaps whatever children a failed test left.
//
//  The rings are secured as a cluster's are: child i is worker:i (the
//  harness's keys), the parent's "form" order carries each member's task,
//  and messages injected on raw sockets come with the key of the member's
//  predecessor, so that they reach the checks for stale and malformed
//  messages; a trusted worker that is not the predecessor is dropped and
//  counted as malformed, and the collective is still right. One
//  all-reduce case, and the argument checks, run unsecured (no identity,
//  no tasks). A child runs this program anew (exec) rather than going on
//  from the fork: CZMQ's authenticator, which a secured member needs,
//  lives in a process-wide ZeroMQ context that a forked child would
//  inherit without its threads once the parent has made one.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "harness.h"
#include "harness_case.h"
#include "harness_rand.h"
#include "ps_clock.h"
#include "ps_heap.h"
#include "ps_log.h"
#include "ps_ring.h"

#define S_MAX_CHILDREN      6
#define S_LINE_MAX          4096

//  How long the parent waits for a child's line or exit.
#define S_WAIT_MS           30000

//  The short no-progress timeout of the abort tests, and how much later
//  than a deadline a collective or a watch may act on a loaded machine (or
//  under ASan), where a process may go unscheduled for a second or more:
//  still far below the ring's default timeout of 10 s, and the 20 s of the
//  rings a watch must abort early, so that waiting for those fails. The
//  survivors' ring after an abort keeps the timeout, and its members learn
//  to form it one after another from the parent, so the timeout must also
//  cover that skew on a loaded machine: at 300 ms a member once gave up
//  waiting for a peer that had not yet been told to form.
#define S_TIMEOUT_MS        2000
#define S_SLACK_MS          5000

//  The large size of the all-reduce cases.
#define S_LARGE             1000003

//  Exit codes of the children.
#define S_EXIT_PIPE         20
#define S_EXIT_RING_NEW     21
#define S_EXIT_FORM         22
#define S_EXIT_ALLREDUCE    23
#define S_EXIT_BROADCAST    24
#define S_EXIT_BROADCAST_DATA 25
#define S_EXIT_WRONG_CODE   26
#define S_EXIT_TOO_SLOW     27
#define S_EXIT_TOO_FAST     28
#define S_EXIT_FILE         29
#define S_EXIT_NO_FAILURE   30
#define S_EXIT_MEMORY       31
#define S_EXIT_EXEC         32

//  The first argument of this program when it runs as a child.
#define S_CHILD_FLAG        "--ring-child"

static const char *
s_exit_name (int code)
{
    switch (code) {
        case -1: return "did not exit in time, killed";
        case 0: return "success";
        case S_EXIT_PIPE: return "talking to the parent failed";
        case S_EXIT_RING_NEW: return "ps_ring_new failed";
        case S_EXIT_FORM: return "ps_ring_form failed";
        case S_EXIT_ALLREDUCE: return "an all-reduce failed";
        case S_EXIT_BROADCAST: return "a broadcast failed";
        case S_EXIT_BROADCAST_DATA: return "a broadcast delivered other bytes than the root's";
        case S_EXIT_WRONG_CODE: return "a collective returned an unexpected code";
        case S_EXIT_TOO_SLOW: return "a collective returned later than allowed";
        case S_EXIT_TOO_FAST: return "a collective gave up before its timeout";
        case S_EXIT_FILE: return "writing a result file failed";
        case S_EXIT_NO_FAILURE: return "the collective never failed";
        case S_EXIT_MEMORY: return "out of memory";
        case S_EXIT_EXEC: return "running this program as a child failed";
        default: return "unknown";
    }
}

//  The test's directory for result files and IPC endpoints.
static char s_dir [256];

//  Clusters started so far: IPC endpoints are named after the count.
static int s_clusters;

//  ---------------------------------------------------------------------
//  Inputs and references

typedef struct {
    size_t count;
    uint64_t seed;
    bool integers;              //  small integers: every sum is exact
} s_case_t;

//  Output number 0 of a splitmix64 generator whose state is x: a hash of
//  x.
static uint64_t
s_mix (uint64_t x)
{
    return harness_splitmix (&x);
}

//  Member rank's input of a case: uniform in [-1, 1) times a power of two
//  in [2^-4, 2^4] (so that sums round), or integers in [-1000, 1000].
static void
s_fill (float *data, size_t count, uint64_t seed, int rank, bool integers)
{
    uint64_t base = s_mix (seed * 1000003u + (uint64_t) rank);
    for (size_t i = 0; i < count; i++) {
        uint64_t r = s_mix (base + i);
        if (integers)
            data [i] = (float) ((int) (r % 2001) - 1000);
        else {
            double unit = (double) (r >> 11) * 0x1p-53 * 2 - 1;
            data [i] = (float) ldexp (unit, (int) ((r & 0xF) % 9) - 4);
        }
    }
}

//  The bytes a broadcast root sends.
static void
s_fill_bytes (unsigned char *data, size_t bytes, uint64_t seed, int root)
{
    uint64_t base = s_mix (seed * 7919u + (uint64_t) root);
    for (size_t i = 0; i < bytes; i++)
        data [i] = (unsigned char) s_mix (base + i);
}

//  ---------------------------------------------------------------------
//  Children

typedef struct {
    const char *transport;      //  "tcp" or "ipc"
    size_t chunk_bytes;         //  0: the ring's default
    int timeout_ms;             //  0: the ring's default
    bool insecure;              //  no CURVE: no identity, no member tasks
} s_net_t;

typedef struct {
    int index;                  //  among the cluster's children; task worker:index
    int in, out;                //  pipes from and to the parent
    bool secured;
    ps_ring_t *ring;
} s_child_t;

//  What a child does once its ring is bound; arg is the scenario's own
//  text, from the parent.
typedef int (s_scenario_fn) (s_child_t *child, const char *arg);

static void
s_child_say (const s_child_t *child, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
s_child_say (const s_child_t *child, const char *fmt, ...)
{
    char text [S_LINE_MAX];
    va_list args;
    va_start (args, fmt);
    vsnprintf (text, sizeof text, fmt, args);
    va_end (args);
    fprintf (stderr, "test_ring: child %d (pid %d): %s\n", child->index, (int) getpid (), text);
}

//  Wait for the parent's next order: "form ID RANK N ENDPOINT... TASK..."
//  forms the ring (the tasks are the members' worker task indices);
//  "leave" makes the child exit. Returns 0 when formed, 1 for leave, or an
//  exit code.
static int
s_child_form (s_child_t *child)
{
    char line [S_LINE_MAX];
    if (harness_read_line (child->in, line, sizeof line, S_WAIT_MS))
        return S_EXIT_PIPE;
    if (strcmp (line, "leave") == 0)
        return 1;
    char *save = NULL;
    char *word = strtok_r (line, " ", &save);
    if (!word || strcmp (word, "form") != 0)
        return S_EXIT_PIPE;
    uint64_t ring_id = strtoull (strtok_r (NULL, " ", &save), NULL, 10);
    int rank = atoi (strtok_r (NULL, " ", &save));
    int n = atoi (strtok_r (NULL, " ", &save));
    const char *members [S_MAX_CHILDREN];
    int tasks [S_MAX_CHILDREN];
    for (int i = 0; i < n && i < S_MAX_CHILDREN; i++)
        members [i] = strtok_r (NULL, " ", &save);
    for (int i = 0; i < n && i < S_MAX_CHILDREN; i++) {
        const char *task = strtok_r (NULL, " ", &save);
        if (!task)
            return S_EXIT_PIPE;
        tasks [i] = atoi (task);
    }
    ps_error_t err;
    if (ps_ring_form (child->ring, ring_id, rank, n, members, child->secured ? tasks : NULL,
                      &err)) {
        s_child_say (child, "ps_ring_form: %s", err.msg);
        return S_EXIT_FORM;
    }
    return 0;
}

//  Wait for the parent to say `word`.
static int
s_child_expect (s_child_t *child, const char *word)
{
    char line [S_LINE_MAX];
    if (harness_read_line (child->in, line, sizeof line, S_WAIT_MS) || strcmp (line, word) != 0)
        return S_EXIT_PIPE;
    return 0;
}

//  Run one all-reduce case as the current rank and write the result to
//  <dir>/<tag>-<case>-<child>.f32.
static int
s_child_case (s_child_t *child, const char *tag, int k, const s_case_t *c)
{
    float *data = malloc ((c->count ? c->count : 1) * sizeof (float));
    if (!data)
        return S_EXIT_MEMORY;
    s_fill (data, c->count, c->seed, ps_ring_rank (child->ring), c->integers);
    ps_error_t err;
    int rc = ps_ring_allreduce (child->ring, data, c->count, &err);
    if (rc) {
        s_child_say (child, "all-reduce of case %s-%d (%zu floats): %s", tag, k, c->count,
                     err.msg);
        free (data);
        return S_EXIT_ALLREDUCE;
    }
    char path [512];
    snprintf (path, sizeof path, "%s/%s-%d-%d.f32", s_dir, tag, k, child->index);
    FILE *file = fopen (path, "wb");
    rc = !file || fwrite (data, sizeof (float), c->count, file) != c->count;
    if (file && fclose (file) != 0)
        rc = 1;
    free (data);
    if (rc) {
        s_child_say (child, "cannot write %s", path);
        return S_EXIT_FILE;
    }
    return 0;
}

static int
s_child_stats (s_child_t *child)
{
    ps_ring_stats_t stats;
    ps_ring_stats (child->ring, &stats);
    return harness_write_line (child->out, "stats %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
                         " %" PRIu64, stats.collectives, stats.stale_dropped, stats.malformed,
                         stats.bytes_sent, stats.bytes_received) ? S_EXIT_PIPE : 0;
}

//  The body of a child: bind, report the endpoint, run the scenario.
static int
s_child_main (int index, int in, int out, const s_net_t *net, s_scenario_fn *fn, const char *arg)
{
    s_child_t child = { .index = index, .in = in, .out = out, .secured = !net->insecure };
    ps_error_t err;
    char bind [512];
    if (strcmp (net->transport, "ipc") == 0)
        snprintf (bind, sizeof bind, "ipc://%s/ring-%d-%d", s_dir, s_clusters, index);
    else
        snprintf (bind, sizeof bind, "tcp://127.0.0.1:*");
    char task [32];
    snprintf (task, sizeof task, "worker:%d", index);
    ps_ring_config_t config = { .bind = bind, .chunk_bytes = net->chunk_bytes,
                                .timeout_ms = net->timeout_ms,
                                .curve = child.secured ? harness_curve (task) : NULL };
    child.ring = ps_ring_new (&config, &err);
    if (!child.ring) {
        s_child_say (&child, "ps_ring_new: %s", err.msg);
        return S_EXIT_RING_NEW;
    }
    if (harness_write_line (out, "endpoint %s", ps_ring_endpoint (child.ring)))
        return S_EXIT_PIPE;
    int rc = fn (&child, arg);
    ps_ring_destroy (&child.ring);
    return rc;
}

//  ---------------------------------------------------------------------
//  Clusters (the parent's side)

typedef struct {
    int n;
    pid_t pid [S_MAX_CHILDREN];
    int to [S_MAX_CHILDREN];
    int from [S_MAX_CHILDREN];
    bool reaped [S_MAX_CHILDREN];
    char endpoint [S_MAX_CHILDREN][256];
} s_cluster_t;

//  The cluster of the test under way, for the teardown.
static s_cluster_t *s_live;

//  Start n children running the scenario named scenario with its text arg,
//  and read their endpoints.
static void
s_cluster_start (s_cluster_t *cluster, int n, const s_net_t *net, const char *scenario,
                 const char *arg)
{
    memset (cluster, 0, sizeof *cluster);
    s_live = cluster;
    s_clusters++;
    fflush (stdout);
    fflush (stderr);
    for (int i = 0; i < n; i++) {
        int down [2], up [2];
        assert_int_equal (pipe (down), 0);
        assert_int_equal (pipe (up), 0);
        //  The program again, with what the child needs on its command
        //  line (made before the fork, which leaves a child of a threaded
        //  process little it may safely do before exec).
        char words [9][512];
        snprintf (words [0], sizeof words [0], "%d", i);
        snprintf (words [1], sizeof words [1], "%d", down [0]);
        snprintf (words [2], sizeof words [2], "%d", up [1]);
        snprintf (words [3], sizeof words [3], "%s", s_dir);
        snprintf (words [4], sizeof words [4], "%d", s_clusters);
        snprintf (words [5], sizeof words [5], "%s", net->transport);
        snprintf (words [6], sizeof words [6], "%zu", net->chunk_bytes);
        snprintf (words [7], sizeof words [7], "%d", net->timeout_ms);
        snprintf (words [8], sizeof words [8], "%d", net->insecure);
        const char *argv [] = { "test_ring", S_CHILD_FLAG, words [0], words [1], words [2],
                                words [3], words [4], words [5], words [6], words [7],
                                words [8], scenario, arg ? arg : "", NULL };
        pid_t pid = fork ();
        assert_true (pid >= 0);
        if (pid == 0) {
            //  A child must never outlive the test.
            if (prctl (PR_SET_PDEATHSIG, SIGKILL) != 0)
                _exit (S_EXIT_PIPE);
            for (int j = 0; j < cluster->n; j++)
                if (close (cluster->to [j]) != 0 || close (cluster->from [j]) != 0)
                    _exit (S_EXIT_PIPE);
            if (close (down [1]) != 0 || close (up [0]) != 0)
                _exit (S_EXIT_PIPE);
            execv ("/proc/self/exe", (char *const *) argv);
            _exit (S_EXIT_EXEC);
        }
        assert_int_equal (close (down [0]), 0);
        assert_int_equal (close (up [1]), 0);
        cluster->pid [i] = pid;
        cluster->to [i] = down [1];
        cluster->from [i] = up [0];
        cluster->n++;
    }
    for (int i = 0; i < n; i++) {
        char line [S_LINE_MAX];
        if (harness_read_line (cluster->from [i], line, sizeof line, S_WAIT_MS)
        ||  strncmp (line, "endpoint ", 9) != 0)
            fail_msg ("child %d sent no endpoint", i);
        if (strlen (line + 9) >= sizeof cluster->endpoint [i])
            fail_msg ("child %d sent an endpoint of %zu bytes", i, strlen (line + 9));
        memcpy (cluster->endpoint [i], line + 9, strlen (line + 9) + 1);
    }
}

//  Reap child i and return its exit code (128 + signal when killed), or
//  -1 when it had to be killed for not exiting in time.
static int
s_cluster_reap (s_cluster_t *cluster, int i)
{
    assert_false (cluster->reaped [i]);
    int status = harness_wait_or_kill (cluster->pid [i], S_WAIT_MS);
    cluster->reaped [i] = true;
    return status;
}

//  Read child i's next line, which must start with prefix; returns what
//  follows the prefix (in line). A child that died instead is reported
//  with its exit code.
static const char *
s_cluster_expect (s_cluster_t *cluster, int i, const char *prefix, char *line, size_t size)
{
    if (harness_read_line (cluster->from [i], line, size, S_WAIT_MS)) {
        int code = cluster->reaped [i] ? -1 : s_cluster_reap (cluster, i);
        fail_msg ("child %d sent no \"%s\" line; it exited with %d (%s)", i, prefix, code,
                  s_exit_name (code));
    }
    if (strncmp (line, prefix, strlen (prefix)) != 0)
        fail_msg ("child %d said \"%s\", expected \"%s...\"", i, line, prefix);
    return line + strlen (prefix);
}

static void
s_cluster_say (s_cluster_t *cluster, int i, const char *word)
{
    assert_int_equal (harness_write_line (cluster->to [i], "%s", word), 0);
}

//  Form ring ring_id of the children order [0 .. n): child order [p] is
//  member p, of task worker:order [p].
static void
s_cluster_form (s_cluster_t *cluster, uint64_t ring_id, const int *order, int n)
{
    char members [S_LINE_MAX] = "";
    for (int p = 0; p < n; p++) {
        strncat (members, " ", sizeof members - strlen (members) - 1);
        strncat (members, cluster->endpoint [order [p]], sizeof members - strlen (members) - 1);
    }
    for (int p = 0; p < n; p++) {
        char task [16];
        snprintf (task, sizeof task, " %d", order [p]);
        strncat (members, task, sizeof members - strlen (members) - 1);
    }
    for (int p = 0; p < n; p++)
        assert_int_equal (harness_write_line (cluster->to [order [p]], "form %" PRIu64 " %d %d%s",
                                        ring_id, p, n, members), 0);
}

//  Form the ring of all children in index order.
static void
s_cluster_form_all (s_cluster_t *cluster, uint64_t ring_id)
{
    int order [S_MAX_CHILDREN] = { 0 };
    for (int i = 0; i < cluster->n; i++)
        order [i] = i;
    s_cluster_form (cluster, ring_id, order, cluster->n);
}

//  Wait for every child not reaped yet and assert it exited with 0.
static void
s_cluster_finish (s_cluster_t *cluster)
{
    for (int i = 0; i < cluster->n; i++) {
        if (cluster->reaped [i])
            continue;
        int code = s_cluster_reap (cluster, i);
        if (code != 0)
            fail_msg ("child %d exited with %d (%s)", i, code, s_exit_name (code));
    }
    for (int i = 0; i < cluster->n; i++) {
        assert_int_equal (close (cluster->to [i]), 0);
        assert_int_equal (close (cluster->from [i]), 0);
    }
    cluster->n = 0;
    s_live = NULL;
}

//  Kill and reap whatever a failed test left running.
static int
s_teardown (void **state)
{
    (void) state;
    if (s_live) {
        for (int i = 0; i < s_live->n; i++)
            if (!s_live->reaped [i]) {
                if (kill (s_live->pid [i], SIGKILL) != 0 && errno != ESRCH)
                    fprintf (stderr, "test_ring: kill %d: %s\n", (int) s_live->pid [i],
                             strerror (errno));
                harness_wait_or_kill (s_live->pid [i], S_WAIT_MS);
                s_live->reaped [i] = true;
            }
        for (int i = 0; i < s_live->n; i++)
            if (close (s_live->to [i]) != 0 || close (s_live->from [i]) != 0)
                fprintf (stderr, "test_ring: closing the pipes of child %d: %s\n", i,
                         strerror (errno));
        s_live->n = 0;
        s_live = NULL;
    }
    return 0;
}

//  Read the result of case k written by child i: count floats.
static float *
s_read_result (const char *tag, int k, int i, size_t count)
{
    char path [512];
    snprintf (path, sizeof path, "%s/%s-%d-%d.f32", s_dir, tag, k, i);
    float *data = malloc ((count ? count : 1) * sizeof (float));
    assert_non_null (data);
    FILE *file = fopen (path, "rb");
    if (!file)
        fail_msg ("no result file %s", path);
    size_t got = fread (data, sizeof (float), count, file);
    int extra = fgetc (file);
    assert_int_equal (fclose (file), 0);
    if (got != count || extra != EOF)
        fail_msg ("%s holds %s than %zu floats", path, got != count ? "fewer" : "more", count);
    return data;
}

//  Check case k of the children in members (n of them, each in its
//  ring's rank order): bitwise the same everywhere, and the sum of the
//  n ranks' inputs within rounding.
static void
s_check_case (const char *tag, int k, const s_case_t *c, const int *members, int n)
{
    float *results [S_MAX_CHILDREN];
    for (int m = 0; m < n; m++)
        results [m] = s_read_result (tag, k, members [m], c->count);
    for (int m = 1; m < n; m++)
        for (size_t i = 0; i < c->count; i++)
            if (memcmp (&results [m][i], &results [0][i], sizeof (float)) != 0)
                fail_msg ("case %s-%d (%zu floats, n %d): element %zu is %a at child %d and %a "
                          "at child %d", tag, k, c->count, n, i, results [m][i], members [m],
                          results [0][i], members [0]);
    double *sum = calloc (c->count ? c->count : 1, sizeof (double));
    double *magnitude = calloc (c->count ? c->count : 1, sizeof (double));
    float *input = malloc ((c->count ? c->count : 1) * sizeof (float));
    assert_true (sum && magnitude && input);
    for (int r = 0; r < n; r++) {
        s_fill (input, c->count, c->seed, r, c->integers);
        for (size_t i = 0; i < c->count; i++) {
            sum [i] += input [i];
            magnitude [i] += fabs ((double) input [i]);
        }
    }
    for (size_t i = 0; i < c->count; i++) {
        double bound = c->integers ? 0 : magnitude [i] * n * FLT_EPSILON;
        if (fabs ((double) results [0][i] - sum [i]) > bound)
            fail_msg ("case %s-%d (%zu floats, n %d): element %zu is %.9g, the sum is %.9g "
                      "(bound %.3g)", tag, k, c->count, n, i, results [0][i], sum [i], bound);
    }
    free (sum);
    free (magnitude);
    free (input);
    for (int m = 0; m < n; m++)
        free (results [m]);
}

//  ---------------------------------------------------------------------
//  Raw ZeroMQ: a PUSH that sends hand-made messages to a member

//  The wire header, as ps_ring_transport.h documents it.
typedef struct {
    uint32_t magic;
    uint16_t version, kind;
    uint32_t round, root;
    uint64_t ring, seq, index, offset, length, total;
} s_wire_t;

#define S_WIRE_SIZE         64
#define S_WIRE_MAGIC        0x47525350u
#define S_KIND_RS           1
#define S_KIND_AG           2

static void
s_wire_encode (const s_wire_t *w, unsigned char *p)
{
    const uint64_t fields [] = { w->ring, w->seq, w->index, w->offset, w->length, w->total };
    for (int i = 0; i < 4; i++) {
        p [i] = (unsigned char) (w->magic >> (8 * i));
        p [8 + i] = (unsigned char) (w->round >> (8 * i));
        p [12 + i] = (unsigned char) (w->root >> (8 * i));
    }
    p [4] = (unsigned char) w->version;
    p [5] = (unsigned char) (w->version >> 8);
    p [6] = (unsigned char) w->kind;
    p [7] = (unsigned char) (w->kind >> 8);
    for (int f = 0; f < 6; f++)
        for (int i = 0; i < 8; i++)
            p [16 + 8 * f + i] = (unsigned char) (fields [f] >> (8 * i));
}

static void
s_wire_decode (const unsigned char *p, s_wire_t *w)
{
    uint64_t fields [6] = { 0 };
    w->magic = w->round = w->root = 0;
    for (int i = 0; i < 4; i++) {
        w->magic |= (uint32_t) p [i] << (8 * i);
        w->round |= (uint32_t) p [8 + i] << (8 * i);
        w->root |= (uint32_t) p [12 + i] << (8 * i);
    }
    w->version = (uint16_t) (p [4] | p [5] << 8);
    w->kind = (uint16_t) (p [6] | p [7] << 8);
    for (int f = 0; f < 6; f++)
        for (int i = 0; i < 8; i++)
            fields [f] |= (uint64_t) p [16 + 8 * f + i] << (8 * i);
    w->ring = fields [0];
    w->seq = fields [1];
    w->index = fields [2];
    w->offset = fields [3];
    w->length = fields [4];
    w->total = fields [5];
}

//  A well-formed header of ring `ring`, collective seq: the reduce-scatter
//  round 0 slice [offset, offset + length) of a vector of total bytes.
static s_wire_t
s_wire (uint64_t ring, uint64_t seq, uint64_t offset, uint64_t length, uint64_t total)
{
    return (s_wire_t) { .magic = S_WIRE_MAGIC, .version = 1, .kind = S_KIND_RS, .ring = ring,
                        .seq = seq, .offset = offset, .length = length, .total = total };
}

typedef struct {
    void *ctx;
    void *push;
} s_injector_t;

//  Connect an injector to the member of task member at endpoint, sending
//  with the key of task sender.
static void
s_inject_open (s_injector_t *injector, const char *endpoint, const char *sender,
               const char *member)
{
    injector->ctx = zmq_ctx_new ();
    assert_non_null (injector->ctx);
    injector->push = zmq_socket (injector->ctx, ZMQ_PUSH);
    assert_non_null (injector->push);
    //  Close waits (up to the linger) until everything went out, so what
    //  was injected is queued at the member before the test goes on.
    int linger = 5000;
    assert_int_equal (zmq_setsockopt (injector->push, ZMQ_LINGER, &linger, sizeof linger), 0);
    ps_error_t err;
    if (ps_curve_client (harness_curve (sender), injector->push, member, &err))
        fail_msg ("injector as %s: %s", sender, err.msg);
    assert_int_equal (zmq_connect (injector->push, endpoint), 0);
}

//  Send frames [0, count) as one message.
static void
s_inject_frames (s_injector_t *injector, const void *const *frames, const size_t *sizes,
                 int count)
{
    for (int i = 0; i < count; i++)
        if (zmq_send (injector->push, frames [i], sizes [i], i + 1 < count ? ZMQ_SNDMORE : 0) < 0)
            fail_msg ("injecting: %s", zmq_strerror (errno));
}

//  Send a header and a payload.
static void
s_inject (s_injector_t *injector, const s_wire_t *wire, const void *payload, size_t size)
{
    unsigned char header [S_WIRE_SIZE];
    s_wire_encode (wire, header);
    const void *frames [] = { header, payload };
    size_t sizes [] = { sizeof header, size };
    s_inject_frames (injector, frames, sizes, 2);
}

static void
s_inject_close (s_injector_t *injector)
{
    assert_int_equal (zmq_close (injector->push), 0);
    assert_int_equal (zmq_ctx_term (injector->ctx), 0);
}

//  Stale messages of ring `ring`, collectives [0, seqs), from sender to
//  member: payloads of huge values that would show in any sum they got
//  into.
static void
s_inject_stale (const char *endpoint, uint64_t ring, uint64_t seqs, const char *sender,
                const char *member)
{
    s_injector_t injector;
    s_inject_open (&injector, endpoint, sender, member);
    float poison [4] = { 1e30f, -1e30f, 1e30f, 3e30f };
    for (uint64_t seq = 0; seq < seqs; seq++) {
        s_wire_t wire = s_wire (ring, seq, 0, sizeof poison, sizeof poison);
        s_inject (&injector, &wire, poison, sizeof poison);
    }
    s_inject_close (&injector);
}

//  Send the malformed messages every member must drop; returns how many.
static int
s_inject_malformed (s_injector_t *injector, uint64_t ring, uint64_t seq)
{
    unsigned char payload [64] = { 0 };
    unsigned char header [S_WIRE_SIZE];
    int sent = 0;

    //  A single frame, shorter than a header.
    const void *one [] = { payload };
    size_t short_size [] = { 10 };
    s_inject_frames (injector, one, short_size, 1);
    sent++;

    //  A short header and a payload.
    const void *two [] = { payload, payload };
    size_t two_sizes [] = { 10, 16 };
    s_inject_frames (injector, two, two_sizes, 2);
    sent++;

    //  A bad magic.
    s_wire_t wire = s_wire (ring, seq, 0, 16, 16);
    wire.magic = 0xDEADBEEF;
    s_inject (injector, &wire, payload, 16);
    sent++;

    //  An oversize payload: 1 MiB where the header says 16 bytes.
    size_t big_size = 1024 * 1024;
    unsigned char *big = calloc (1, big_size);
    assert_non_null (big);
    wire = s_wire (ring, seq, 0, 16, 16);
    s_inject (injector, &wire, big, big_size);
    free (big);
    sent++;

    //  Three frames.
    wire = s_wire (ring, seq, 0, 16, 16);
    s_wire_encode (&wire, header);
    const void *three [] = { header, payload, payload };
    size_t three_sizes [] = { sizeof header, 16, 16 };
    s_inject_frames (injector, three, three_sizes, 3);
    sent++;

    //  An unknown kind.
    wire = s_wire (ring, seq, 0, 16, 16);
    wire.kind = 9;
    s_inject (injector, &wire, payload, 16);
    sent++;

    //  A slice past the end of its own vector.
    wire = s_wire (ring, seq, 8, 16, 16);
    s_inject (injector, &wire, payload, 16);
    sent++;

    //  An empty payload.
    wire = s_wire (ring, seq, 0, 0, 16);
    s_inject (injector, &wire, payload, 0);
    sent++;
    return sent;
}

//  ---------------------------------------------------------------------
//  All-reduce of odd sizes, n = 1..5

#define S_MAX_CASES 16

typedef struct {
    s_case_t cases [S_MAX_CASES];
    int count;
    const char *tag;
} s_cases_t;

static void
s_cases_for (s_cases_t *cases, int n, const char *tag, uint64_t seed)
{
    size_t sizes [] = { 1, 7, (size_t) n - 1, (size_t) n + 1, 2, 4099, 0, S_LARGE };
    cases->count = 0;
    cases->tag = tag;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes [0]; s++) {
        if (sizes [s] == 0 && s != 6)
            continue;
        cases->cases [cases->count++] = (s_case_t) { sizes [s], seed + s, false };
    }
    //  The large case again with integers, whose sums are exact.
    cases->cases [cases->count++] = (s_case_t) { S_LARGE, seed + 100, true };
    cases->cases [cases->count++] = (s_case_t) { 33, seed + 101, true };
}

//  Form, run every case of s_cases_for (arg: "TAG N SEED"), say "done".
static int
s_scenario_cases (s_child_t *child, const char *arg)
{
    char tag [32];
    int n;
    uint64_t seed;
    if (sscanf (arg, "%31s %d %" SCNu64, tag, &n, &seed) != 3)
        return S_EXIT_EXEC;
    s_cases_t cases;
    s_cases_for (&cases, n, tag, seed);
    int rc = s_child_form (child);
    if (rc)
        return rc == 1 ? 0 : rc;
    for (int k = 0; k < cases.count; k++)
        if ((rc = s_child_case (child, cases.tag, k, &cases.cases [k])))
            return rc;
    if ((rc = s_child_stats (child)))
        return rc;
    return harness_write_line (child->out, "done") ? S_EXIT_PIPE : 0;
}

static void
s_run_cases (int n, const s_net_t *net, const char *tag)
{
    uint64_t seed = 1000 * (uint64_t) n;
    s_cases_t cases;
    s_cases_for (&cases, n, tag, seed);
    char arg [64];
    snprintf (arg, sizeof arg, "%s %d %" PRIu64, tag, n, seed);
    s_cluster_t cluster;
    s_cluster_start (&cluster, n, net, "cases", arg);
    s_cluster_form_all (&cluster, 1);
    char line [S_LINE_MAX];
    for (int i = 0; i < n; i++) {
        const char *stats = s_cluster_expect (&cluster, i, "stats ", line, sizeof line);
        uint64_t collectives = strtoull (stats, NULL, 10);
        assert_int_equal (collectives, cases.count);
        s_cluster_expect (&cluster, i, "done", line, sizeof line);
    }
    s_cluster_finish (&cluster);
    int members [S_MAX_CHILDREN];
    for (int i = 0; i < n; i++)
        members [i] = i;
    for (int k = 0; k < cases.count; k++)
        s_check_case (tag, k, &cases.cases [k], members, n);
}

static void
test_allreduce_tcp (void **state)
{
    (void) state;
    //  A small chunk, so that the large cases travel in many messages
    //  and the small ones in one.
    s_net_t net = { .transport = "tcp", .chunk_bytes = 4096 };
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
    s_net_t net = { .transport = "ipc" };
    s_run_cases (3, &net, "ipc3");
    //  An odd chunk that is not a multiple of a float, and the one ring of
    //  processes without CURVE (no identities, no member tasks), which
    //  --insecure clusters run.
    s_net_t odd = { .transport = "ipc", .chunk_bytes = 1001, .insecure = true };
    s_run_cases (2, &odd, "ipc2");
}

//  ---------------------------------------------------------------------
//  Several collectives, then a new ring without one member and in a new
//  order, with stale messages injected

static const s_case_t s_reform_first [] = {
    { 1000, 11, false }, { 7, 12, false }, { S_LARGE, 13, true }
};
static const s_case_t s_reform_second [] = {
    { 5003, 21, false }, { 2, 22, false }, { 65537, 23, false }
};

static int
s_scenario_reform (s_child_t *child, const char *arg)
{
    (void) arg;
    int rc = s_child_form (child);
    for (int k = 0; rc == 0 && k < 3; k++)
        rc = s_child_case (child, "reform1", k, &s_reform_first [k]);
    if (rc)
        return rc;
    if (harness_write_line (child->out, "done"))
        return S_EXIT_PIPE;
    rc = s_child_form (child);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (harness_write_line (child->out, "formed") || s_child_expect (child, "go"))
        return S_EXIT_PIPE;
    if ((rc = s_child_case (child, "reform2", 0, &s_reform_second [0])))
        return rc;
    if (harness_write_line (child->out, "first") || s_child_expect (child, "go"))
        return S_EXIT_PIPE;
    for (int k = 1; rc == 0 && k < 3; k++)
        rc = s_child_case (child, "reform2", k, &s_reform_second [k]);
    if (rc || (rc = s_child_stats (child)))
        return rc;
    return s_child_expect (child, "exit");
}

static void
test_reform (void **state)
{
    (void) state;
    s_net_t net = { .transport = "tcp", .chunk_bytes = 8192 };
    s_cluster_t cluster;
    s_cluster_start (&cluster, 4, &net, "reform", NULL);
    s_cluster_form_all (&cluster, 1);
    char line [S_LINE_MAX];
    for (int i = 0; i < 4; i++)
        s_cluster_expect (&cluster, i, "done", line, sizeof line);
    int first [] = { 0, 1, 2, 3 };
    for (int k = 0; k < 3; k++)
        s_check_case ("reform1", k, &s_reform_first [k], first, 4);

    //  Child 2 leaves; the others form ring 5 as 3, 0, 1.
    s_cluster_say (&cluster, 2, "leave");
    assert_int_equal (s_cluster_reap (&cluster, 2), 0);
    int second [] = { 3, 0, 1 };
    s_cluster_form (&cluster, 5, second, 3);
    for (int p = 0; p < 3; p++)
        s_cluster_expect (&cluster, second [p], "formed", line, sizeof line);
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
        s_inject_stale (cluster.endpoint [second [p]], 1, 3, predecessor [p], member [p]);
    for (int p = 0; p < 3; p++)
        s_cluster_say (&cluster, second [p], "go");
    for (int p = 0; p < 3; p++)
        s_cluster_expect (&cluster, second [p], "first", line, sizeof line);
    for (int p = 0; p < 3; p++)
        s_inject_stale (cluster.endpoint [second [p]], 5, 1, predecessor [p], member [p]);
    for (int p = 0; p < 3; p++)
        s_cluster_say (&cluster, second [p], "go");
    for (int p = 0; p < 3; p++) {
        const char *stats = s_cluster_expect (&cluster, second [p], "stats ", line, sizeof line);
        char *cursor;
        uint64_t collectives = strtoull (stats, &cursor, 10);
        uint64_t stale = strtoull (cursor, &cursor, 10);
        uint64_t malformed = strtoull (cursor, &cursor, 10);
        assert_int_equal (collectives, 6);
        if (stale == 0)
            fail_msg ("child %d dropped no stale message", second [p]);
        assert_int_equal (malformed, 0);
        s_cluster_say (&cluster, second [p], "exit");
    }
    s_cluster_finish (&cluster);
    for (int k = 0; k < 3; k++)
        s_check_case ("reform2", k, &s_reform_second [k], second, 3);
}

//  ---------------------------------------------------------------------
//  Broadcast from every root

//  arg: the chunk size, in bytes.
static int
s_scenario_broadcast (s_child_t *child, const char *arg)
{
    size_t chunk = strtoul (arg, NULL, 10);
    int rc = s_child_form (child);
    if (rc)
        return rc == 1 ? 0 : rc;
    int n = ps_ring_size (child->ring);
    int rank = ps_ring_rank (child->ring);
    size_t sizes [] = { 1, 13, 100003, 3 * chunk + 1, 0, chunk };
    size_t largest = 100003 > 3 * chunk + 1 ? 100003 : 3 * chunk + 1;
    unsigned char *data = malloc (largest);
    unsigned char *expected = malloc (largest);
    if (!data || !expected)
        return S_EXIT_MEMORY;
    for (int root = 0; root < n && rc == 0; root++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes [0] && rc == 0; s++) {
            uint64_t seed = 100 * (uint64_t) root + s;
            s_fill_bytes (expected, sizes [s], seed, root);
            if (rank == root)
                memcpy (data, expected, sizes [s]);
            else
                memset (data, 0xA5, largest);
            ps_error_t err;
            if (ps_ring_broadcast (child->ring, root, data, sizes [s], &err)) {
                s_child_say (child, "broadcast of %zu bytes from %d: %s", sizes [s], root,
                             err.msg);
                rc = S_EXIT_BROADCAST;
            }
            else
            if (memcmp (data, expected, sizes [s]) != 0) {
                s_child_say (child, "broadcast of %zu bytes from %d differs", sizes [s], root);
                rc = S_EXIT_BROADCAST_DATA;
            }
        }
    free (data);
    free (expected);
    //  An all-reduce after the broadcasts, in the same sequence.
    s_case_t last = { 999, 77, false };
    if (rc == 0)
        rc = s_child_case (child, "bcast-last", n, &last);
    if (rc == 0 && harness_write_line (child->out, "done"))
        rc = S_EXIT_PIPE;
    return rc;
}

static void
s_run_broadcast (int n, const char *transport, size_t chunk)
{
    s_net_t net = { .transport = transport, .chunk_bytes = chunk };
    char arg [32];
    snprintf (arg, sizeof arg, "%zu", chunk ? chunk : (size_t) PS_RING_DEFAULT_CHUNK);
    s_cluster_t cluster;
    s_cluster_start (&cluster, n, &net, "broadcast", arg);
    s_cluster_form_all (&cluster, 3);
    char line [S_LINE_MAX];
    for (int i = 0; i < n; i++)
        s_cluster_expect (&cluster, i, "done", line, sizeof line);
    s_cluster_finish (&cluster);
    int members [S_MAX_CHILDREN];
    for (int i = 0; i < n; i++)
        members [i] = i;
    s_case_t last = { 999, 77, false };
    s_check_case ("bcast-last", n, &last, members, n);
}

static void
test_broadcast (void **state)
{
    (void) state;
    for (int n = 1; n <= 4; n++)
        s_run_broadcast (n, "tcp", 1000);
    s_run_broadcast (3, "ipc", 0);
}

//  ---------------------------------------------------------------------
//  Timeouts: a member that never joins, and one killed mid-run

//  Run all-reduces of count floats until one fails; it must fail with
//  PS_ETIMEDOUT within the timeout and the slack, and the ring must then
//  refuse collectives until it is formed again. limit: collectives to
//  run at most (0: one). Reports "timedout MS".
static int
s_child_until_timeout (s_child_t *child, size_t count, int limit)
{
    float *data = calloc (count, sizeof (float));
    if (!data)
        return S_EXIT_MEMORY;
    ps_error_t err;
    int rc = 0;
    double elapsed = 0;
    double give_up = ps_clock_ms () + S_WAIT_MS;
    for (int i = 0; rc == 0 && (i < limit || i == 0) && ps_clock_ms () < give_up; i++) {
        double start = ps_clock_ms ();
        rc = ps_ring_allreduce (child->ring, data, count, &err);
        elapsed = ps_clock_ms () - start;
    }
    free (data);
    if (rc == 0)
        return S_EXIT_NO_FAILURE;
    if (rc != PS_ETIMEDOUT) {
        s_child_say (child, "expected a timeout, got %d: %s", rc, err.msg);
        return S_EXIT_WRONG_CODE;
    }
    if (elapsed < S_TIMEOUT_MS - 1) {
        s_child_say (child, "timed out after %.0f ms: %s", elapsed, err.msg);
        return S_EXIT_TOO_FAST;
    }
    if (elapsed > S_TIMEOUT_MS + S_SLACK_MS) {
        s_child_say (child, "timed out after %.0f ms: %s", elapsed, err.msg);
        return S_EXIT_TOO_SLOW;
    }
    float one = 1;
    if (ps_ring_allreduce (child->ring, &one, 1, &err) != PS_EINVAL) {
        s_child_say (child, "a broken ring ran another all-reduce");
        return S_EXIT_WRONG_CODE;
    }
    return harness_write_line (child->out, "timedout %.0f", elapsed) ? S_EXIT_PIPE : 0;
}

//  Child 2 forms and then does nothing until told to exit; the others
//  time out, form ring 2 without it, and run a case.
static int
s_scenario_never_joins (s_child_t *child, const char *arg)
{
    (void) arg;
    int rc = s_child_form (child);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (child->index == 2)
        return s_child_expect (child, "exit");
    if ((rc = s_child_until_timeout (child, 100000, 1)))
        return rc;
    if ((rc = s_child_form (child)))
        return rc == 1 ? 0 : rc;
    s_case_t c = { 30011, 5, false };
    if ((rc = s_child_case (child, "after-absent", 0, &c)))
        return rc;
    return harness_write_line (child->out, "done") ? S_EXIT_PIPE : 0;
}

static void
test_never_joins (void **state)
{
    (void) state;
    s_net_t net = { .transport = "tcp", .timeout_ms = S_TIMEOUT_MS };
    s_cluster_t cluster;
    s_cluster_start (&cluster, 3, &net, "never_joins", NULL);
    s_cluster_form_all (&cluster, 1);
    char line [S_LINE_MAX];
    for (int i = 0; i < 2; i++)
        s_cluster_expect (&cluster, i, "timedout ", line, sizeof line);
    s_cluster_say (&cluster, 2, "exit");
    assert_int_equal (s_cluster_reap (&cluster, 2), 0);
    int survivors [] = { 0, 1 };
    s_cluster_form (&cluster, 2, survivors, 2);
    for (int i = 0; i < 2; i++)
        s_cluster_expect (&cluster, i, "done", line, sizeof line);
    s_cluster_finish (&cluster);
    s_case_t c = { 30011, 5, false };
    s_check_case ("after-absent", 0, &c, survivors, 2);
}

//  Every child says "running" and all-reduces until one fails; child 2 is
//  killed meanwhile. The survivors then form ring 2 and run a case.
static int
s_scenario_killed (s_child_t *child, const char *arg)
{
    (void) arg;
    int rc = s_child_form (child);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (harness_write_line (child->out, "running"))
        return S_EXIT_PIPE;
    if ((rc = s_child_until_timeout (child, 262147, INT32_MAX)))
        return rc;
    if ((rc = s_child_form (child)))
        return rc == 1 ? 0 : rc;
    s_case_t c = { S_LARGE, 6, false };
    if ((rc = s_child_case (child, "after-kill", 0, &c)))
        return rc;
    return harness_write_line (child->out, "done") ? S_EXIT_PIPE : 0;
}

static void
test_killed_member (void **state)
{
    (void) state;
    s_net_t net = { .transport = "tcp", .timeout_ms = S_TIMEOUT_MS, .chunk_bytes = 65536 };
    s_cluster_t cluster;
    s_cluster_start (&cluster, 3, &net, "killed", NULL);
    s_cluster_form_all (&cluster, 1);
    char line [S_LINE_MAX];
    for (int i = 0; i < 3; i++)
        s_cluster_expect (&cluster, i, "running", line, sizeof line);
    harness_sleep_ms (100);
    assert_int_equal (kill (cluster.pid [2], SIGKILL), 0);
    assert_int_equal (s_cluster_reap (&cluster, 2), 128 + SIGKILL);
    for (int i = 0; i < 2; i++)
        s_cluster_expect (&cluster, i, "timedout ", line, sizeof line);
    int survivors [] = { 1, 0 };
    s_cluster_form (&cluster, 2, survivors, 2);
    for (int i = 0; i < 2; i++)
        s_cluster_expect (&cluster, i, "done", line, sizeof line);
    s_cluster_finish (&cluster);
    s_case_t c = { S_LARGE, 6, false };
    s_check_case ("after-kill", 0, &c, survivors, 2);
}

//  ---------------------------------------------------------------------
//  In-process rings whose only peer is missing or played by the test

//  The member tasks of the in-process rings: this process is worker:0,
//  its peer worker:1.
static const int s_lone_tasks [] = { 0, 1 };

//  A ring in this process as member 0 of two, whose member 1 is `peer`.
static ps_ring_t *
s_lone_ring (uint64_t ring_id, const char *peer, int timeout_ms)
{
    ps_ring_config_t config = { .bind = "tcp://127.0.0.1:*", .timeout_ms = timeout_ms,
                                .curve = harness_curve ("worker:0") };
    ps_error_t err;
    ps_ring_t *ring = ps_ring_new (&config, &err);
    if (!ring)
        fail_msg ("ps_ring_new: %s", err.msg);
    const char *members [] = { ps_ring_endpoint (ring), peer };
    if (ps_ring_form (ring, ring_id, 0, 2, members, s_lone_tasks, &err))
        fail_msg ("ps_ring_form: %s", err.msg);
    return ring;
}

//  Something that pokes the watch from a thread after a delay.
typedef struct {
    int delay_ms;
    int fd;                     //  written when >= 0
    void *socket;               //  sent "abort" when not NULL
    double poked_at;
} s_poke_t;

static void *
s_poke (void *arg)
{
    s_poke_t *poke = arg;
    harness_sleep_ms (poke->delay_ms);
    poke->poked_at = ps_clock_ms ();
    if (poke->fd >= 0 && write (poke->fd, "x", 1) != 1)
        fprintf (stderr, "test_ring: poking the watch pipe: %s\n", strerror (errno));
    if (poke->socket && zmq_send (poke->socket, "abort", 5, 0) != 5)
        fprintf (stderr, "test_ring: poking the watch socket: %s\n", zmq_strerror (errno));
    return NULL;
}

//  What the watch functions see.
typedef struct {
    int fd;
    void *socket;
    double start;
    double abort_after_ms;      //  the periodic watch aborts this long after start
    int calls;
} s_watch_t;

static bool
s_watch_fd (void *arg)
{
    s_watch_t *watch = arg;
    watch->calls++;
    struct pollfd item = { .fd = watch->fd, .events = POLLIN };
    return poll (&item, 1, 0) == 1;
}

static bool
s_watch_socket (void *arg)
{
    s_watch_t *watch = arg;
    watch->calls++;
    char buf [16];
    return zmq_recv (watch->socket, buf, sizeof buf, ZMQ_DONTWAIT) == 5;
}

static bool
s_watch_clock (void *arg)
{
    s_watch_t *watch = arg;
    watch->calls++;
    return ps_clock_ms () - watch->start >= watch->abort_after_ms;
}

//  Run an all-reduce that only the watch can end; check PS_ECANCELED and
//  return how long it took.
static double
s_cancel_run (ps_ring_t *ring)
{
    float data [1000] = { 0 };
    ps_error_t err;
    double start = ps_clock_ms ();
    int rc = ps_ring_allreduce (ring, data, 1000, &err);
    double elapsed = ps_clock_ms () - start;
    if (rc != PS_ECANCELED)
        fail_msg ("expected PS_ECANCELED, got %d: %s", rc, rc ? err.msg : "");
    assert_non_null (strstr (err.msg, "aborted by the watch"));
    //  The ring is broken until it is formed again.
    assert_int_equal (ps_ring_allreduce (ring, data, 1000, &err), PS_EINVAL);
    return elapsed;
}

static void
test_watch (void **state)
{
    (void) state;
    char absent [64];
    harness_free_endpoint (absent, sizeof absent);

    //  A file descriptor.
    ps_ring_t *ring = s_lone_ring (1, absent, 20000);
    int fds [2];
    assert_int_equal (pipe (fds), 0);
    s_watch_t watch = { .fd = fds [0] };
    ps_ring_set_watch (ring, NULL, fds [0], s_watch_fd, &watch);
    s_poke_t poke = { .delay_ms = 200, .fd = fds [1] };
    pthread_t thread;
    assert_int_equal (pthread_create (&thread, NULL, s_poke, &poke), 0);
    double start = ps_clock_ms ();
    double elapsed = s_cancel_run (ring);
    assert_int_equal (pthread_join (thread, NULL), 0);
    double late = start + elapsed - poke.poked_at;
    if (late > S_SLACK_MS || elapsed < poke.delay_ms - 1)
        fail_msg ("the fd watch aborted %.0f ms after the poke (after %.0f ms)", late, elapsed);
    assert_true (watch.calls >= 2);         //  the periodic calls came too
    ps_ring_destroy (&ring);
    assert_null (ring);
    assert_int_equal (close (fds [0]), 0);
    assert_int_equal (close (fds [1]), 0);

    //  A ZeroMQ socket of another context.
    ring = s_lone_ring (1, absent, 20000);
    void *ctx = zmq_ctx_new ();
    void *reader = zmq_socket (ctx, ZMQ_PAIR);
    void *writer = zmq_socket (ctx, ZMQ_PAIR);
    assert_int_equal (zmq_bind (reader, "inproc://test-ring-watch"), 0);
    assert_int_equal (zmq_connect (writer, "inproc://test-ring-watch"), 0);
    watch = (s_watch_t) { .socket = reader };
    ps_ring_set_watch (ring, reader, -1, s_watch_socket, &watch);
    poke = (s_poke_t) { .delay_ms = 200, .fd = -1, .socket = writer };
    assert_int_equal (pthread_create (&thread, NULL, s_poke, &poke), 0);
    start = ps_clock_ms ();
    elapsed = s_cancel_run (ring);
    assert_int_equal (pthread_join (thread, NULL), 0);
    late = start + elapsed - poke.poked_at;
    if (late > S_SLACK_MS || elapsed < poke.delay_ms - 1)
        fail_msg ("the socket watch aborted %.0f ms after the poke (after %.0f ms)", late,
                  elapsed);
    ps_ring_destroy (&ring);
    assert_int_equal (zmq_close (reader), 0);
    assert_int_equal (zmq_close (writer), 0);
    assert_int_equal (zmq_ctx_term (ctx), 0);

    //  No socket or descriptor: the function is called every 100 ms, on
    //  average over 2 s; a process that went unscheduled misses calls, so
    //  a quarter of them will do, and twice as many is a watch called too
    //  often.
    ring = s_lone_ring (1, absent, 20000);
    watch = (s_watch_t) { .start = ps_clock_ms (), .abort_after_ms = 2000 };
    ps_ring_set_watch (ring, NULL, -1, s_watch_clock, &watch);
    elapsed = s_cancel_run (ring);
    //  (The watch's clock started just before the all-reduce's.)
    if (elapsed < 1999 || elapsed > 2000 + S_SLACK_MS)
        fail_msg ("the periodic watch aborted after %.0f ms", elapsed);
    double expected = elapsed / 100;
    print_message ("    the periodic watch: %d calls in %.0f ms\n", watch.calls, elapsed);
    if (watch.calls < expected / 4 || watch.calls > expected * 2 + 2)
        fail_msg ("the watch was called %d times in %.0f ms, expected about %.0f", watch.calls,
                  elapsed, expected);

    //  Formed again (alone), the ring works, and the watch stays quiet.
    ps_error_t err;
    const char *alone [] = { ps_ring_endpoint (ring) };
    assert_int_equal (ps_ring_form (ring, 2, 0, 1, alone, s_lone_tasks, &err), 0);
    float one = 1;
    assert_int_equal (ps_ring_allreduce (ring, &one, 1, &err), 0);
    assert_true (one == 1);
    ps_ring_destroy (&ring);
}

//  Malformed, stale and future messages at a member whose only peer is
//  the injector, ending with a chunk of the collective under way that
//  does not fit: PS_EPROTO, every bad message counted.
static void
test_malformed_in_process (void **state)
{
    (void) state;
    char absent [64];
    harness_free_endpoint (absent, sizeof absent);
    ps_ring_t *ring = s_lone_ring (7, absent, S_TIMEOUT_MS);
    const char *endpoint = ps_ring_endpoint (ring);
    //  One connection, so that the member reads the messages in order,
    //  from the predecessor's key.
    s_injector_t injector;
    s_inject_open (&injector, endpoint, "worker:1", "worker:0");
    int malformed = s_inject_malformed (&injector, 7, 0);

    //  A stale message (ring 3), one of a later ring (9), held, and then
    //  a reduce-scatter slice of this collective at bytes [0, 4000) of the
    //  4000-byte vector, where the predecessor's segment is [2000, 4000).
    float payload [1000] = { 0 };
    s_wire_t wire = s_wire (3, 0, 0, 16, 16);
    s_inject (&injector, &wire, payload, 16);
    wire = s_wire (9, 0, 0, 16, 16);
    s_inject (&injector, &wire, payload, 16);
    wire = s_wire (7, 0, 0, sizeof payload, sizeof payload);
    s_inject (&injector, &wire, payload, sizeof payload);
    s_inject_close (&injector);

    float data [1000] = { 0 };
    ps_error_t err;
    int rc = ps_ring_allreduce (ring, data, 1000, &err);
    if (rc != PS_EPROTO)
        fail_msg ("expected PS_EPROTO, got %d: %s", rc, rc ? err.msg : "");
    assert_non_null (strstr (err.msg, "do not fit"));
    ps_ring_stats_t stats;
    ps_ring_stats (ring, &stats);
    assert_int_equal (stats.malformed, malformed);
    assert_int_equal (stats.stale_dropped, 1);
    assert_int_equal (stats.collectives, 0);

    //  Ring 8 keeps the message of ring 9 held (it is not of ring 8, so
    //  the collective times out); ring 10 drops it as stale.
    const char *members [] = { endpoint, absent };
    assert_int_equal (ps_ring_form (ring, 8, 0, 2, members, s_lone_tasks, &err), 0);
    float one = 1;
    assert_int_equal (ps_ring_allreduce (ring, &one, 1, &err), PS_ETIMEDOUT);
    ps_ring_stats (ring, &stats);
    assert_int_equal (stats.stale_dropped, 1);
    assert_int_equal (ps_ring_form (ring, 10, 0, 2, members, s_lone_tasks, &err), 0);
    ps_ring_stats (ring, &stats);
    assert_int_equal (stats.stale_dropped, 2);
    ps_ring_destroy (&ring);
}

//  The test plays member 1 of a ring of two (worker:1) on raw ZeroMQ,
//  checking what member 0 sends against the wire format. Before
//  collective 0 it also sends its first message of collective 1, which
//  member 0 must hold until collective 1 starts.
typedef struct {
    const char *ring_endpoint;  //  member 0's
    void *ctx;                  //  the sending socket's
    void *pull;                 //  member 1's, bound in ps_curve_context ()
    char endpoint [256];
    float mine [2][10];         //  member 1's inputs of collectives 0 and 1
    float theirs [2][10];       //  member 0's
    char failure [512];
} s_peer_t;

//  Receive one message from member 0 and check its header; the payload
//  goes to floats.
static bool
s_peer_expect (s_peer_t *peer, uint64_t seq, unsigned kind, uint64_t offset, uint64_t length,
               float *floats)
{
    zmq_pollitem_t item = { peer->pull, 0, ZMQ_POLLIN, 0 };
    unsigned char header [S_WIRE_SIZE];
    if (zmq_poll (&item, 1, 10000) != 1
    ||  zmq_recv (peer->pull, header, sizeof header, 0) != S_WIRE_SIZE) {
        snprintf (peer->failure, sizeof peer->failure, "no header from member 0");
        return false;
    }
    s_wire_t w;
    s_wire_decode (header, &w);
    int more = 0;
    size_t size = sizeof more;
    int got = zmq_getsockopt (peer->pull, ZMQ_RCVMORE, &more, &size) == 0 && more
            ? zmq_recv (peer->pull, floats, 64, 0) : -1;
    if (w.magic != S_WIRE_MAGIC || w.version != 1 || w.kind != kind || w.round != 0
    ||  w.ring != 4 || w.seq != seq || w.index != 0 || w.offset != offset
    ||  w.length != length || w.total != 40 || got != (int) length) {
        snprintf (peer->failure, sizeof peer->failure, "member 0 sent magic %x version %u kind "
                  "%u round %u ring %" PRIu64 " seq %" PRIu64 " index %" PRIu64 " [%" PRIu64
                  ", +%" PRIu64 ") of %" PRIu64 " with a %d-byte payload; expected kind %u seq %"
                  PRIu64 " [%" PRIu64 ", +%" PRIu64 ") of 40", w.magic, w.version, w.kind,
                  w.round, w.ring, w.seq, w.index, w.offset, w.length, w.total, got, kind, seq,
                  offset, length);
        return false;
    }
    return true;
}

static void
s_peer_send (s_peer_t *peer, void *push, uint64_t seq, unsigned kind, uint64_t offset,
             const float *floats)
{
    s_wire_t wire = s_wire (4, seq, offset, 20, 40);
    wire.kind = (uint16_t) kind;
    unsigned char header [S_WIRE_SIZE];
    s_wire_encode (&wire, header);
    if (zmq_send (push, header, sizeof header, ZMQ_SNDMORE) < 0
    ||  zmq_send (push, floats, 20, 0) < 0)
        snprintf (peer->failure, sizeof peer->failure, "sending: %s", zmq_strerror (errno));
}

//  Member 1 of two: it owns segment 0 ([0, 5)) after the reduce-scatter
//  and sends segment 1 ([5, 10)) in round 0.
static void *
s_peer_run (void *arg)
{
    s_peer_t *peer = arg;
    void *push = zmq_socket (peer->ctx, ZMQ_PUSH);
    int linger = 5000;
    ps_error_t err;
    if (!push || zmq_setsockopt (push, ZMQ_LINGER, &linger, sizeof linger) != 0
    ||  ps_curve_client (harness_curve ("worker:1"), push, "worker:0", &err) != 0
    ||  zmq_connect (push, peer->ring_endpoint) != 0) {
        snprintf (peer->failure, sizeof peer->failure, "peer socket: %s", zmq_strerror (errno));
        if (push)
            zmq_close (push);
        return NULL;
    }
    s_peer_send (peer, push, 1, S_KIND_RS, 20, peer->mine [1] + 5);
    s_peer_send (peer, push, 0, S_KIND_RS, 20, peer->mine [0] + 5);
    for (int seq = 0; seq < 2 && !peer->failure [0]; seq++) {
        float got [16];
        if (!s_peer_expect (peer, (uint64_t) seq, S_KIND_RS, 0, 20, got))
            break;
        float sum [5];
        for (int i = 0; i < 5; i++) {
            sum [i] = got [i] + peer->mine [seq][i];
            if (memcmp (&got [i], &peer->theirs [seq][i], sizeof (float)) != 0)
                snprintf (peer->failure, sizeof peer->failure, "member 0 sent %g as element %d "
                          "of collective %d, its input is %g", got [i], i, seq,
                          peer->theirs [seq][i]);
        }
        s_peer_send (peer, push, (uint64_t) seq, S_KIND_AG, 0, sum);
        if (!s_peer_expect (peer, (uint64_t) seq, S_KIND_AG, 20, 20, got))
            break;
    }
    if (zmq_close (push) != 0)
        snprintf (peer->failure, sizeof peer->failure, "zmq_close: %s", zmq_strerror (errno));
    return NULL;
}

static void
test_wire_peer (void **state)
{
    (void) state;
    s_peer_t peer = { 0 };
    peer.ctx = zmq_ctx_new ();
    peer.pull = zmq_socket (ps_curve_context (), ZMQ_PULL);
    assert_non_null (peer.pull);
    ps_error_t err;
    assert_int_equal (ps_curve_server (harness_curve ("worker:1"), peer.pull, &err), 0);
    assert_int_equal (zmq_bind (peer.pull, "tcp://127.0.0.1:*"), 0);
    size_t size = sizeof peer.endpoint;
    assert_int_equal (zmq_getsockopt (peer.pull, ZMQ_LAST_ENDPOINT, peer.endpoint, &size), 0);
    ps_ring_t *ring = s_lone_ring (4, peer.endpoint, 10000);
    peer.ring_endpoint = ps_ring_endpoint (ring);
    for (int seq = 0; seq < 2; seq++) {
        s_fill (peer.mine [seq], 10, 50 + (uint64_t) seq, 1, false);
        s_fill (peer.theirs [seq], 10, 50 + (uint64_t) seq, 0, false);
    }
    pthread_t thread;
    assert_int_equal (pthread_create (&thread, NULL, s_peer_run, &peer), 0);
    float data [2][10];
    for (int seq = 0; seq < 2; seq++) {
        memcpy (data [seq], peer.theirs [seq], sizeof data [seq]);
        int rc = ps_ring_allreduce (ring, data [seq], 10, &err);
        if (rc)
            fail_msg ("collective %d: %s (peer: %s)", seq, err.msg, peer.failure);
    }
    assert_int_equal (pthread_join (thread, NULL), 0);
    if (peer.failure [0])
        fail_msg ("%s", peer.failure);
    //  Segment 0 is the peer's sum, copied; segment 1 member 0's own, in
    //  the order the ring sums: what came in plus the member's own.
    for (int seq = 0; seq < 2; seq++)
        for (int i = 0; i < 10; i++) {
            float expected = i < 5 ? peer.theirs [seq][i] + peer.mine [seq][i]
                                   : peer.mine [seq][i] + peer.theirs [seq][i];
            assert_memory_equal (&data [seq][i], &expected, sizeof (float));
        }
    ps_ring_stats_t stats;
    ps_ring_stats (ring, &stats);
    assert_int_equal (stats.collectives, 2);
    assert_int_equal (stats.stale_dropped, 0);
    assert_int_equal (stats.bytes_sent, 80);
    assert_int_equal (stats.bytes_received, 80);
    ps_ring_destroy (&ring);
    assert_int_equal (zmq_close (peer.pull), 0);
    assert_int_equal (zmq_ctx_term (peer.ctx), 0);
}

//  ---------------------------------------------------------------------
//  Malformed messages at live members, and members that disagree

//  The four all-reduce cases of s_run_four: count floats, seeds 300 + k.
static s_case_t
s_four_case (size_t count, int k)
{
    return (s_case_t) { count, 300 + (uint64_t) k, false };
}

//  Form, say "formed", wait for "go", run four cases (arg: "TAG COUNT"),
//  report the stats and wait for "exit".
static int
s_scenario_four (s_child_t *child, const char *arg)
{
    char tag [32];
    size_t count;
    if (sscanf (arg, "%31s %zu", tag, &count) != 2)
        return S_EXIT_EXEC;
    int rc = s_child_form (child);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (harness_write_line (child->out, "formed") || s_child_expect (child, "go"))
        return S_EXIT_PIPE;
    for (int k = 0; rc == 0 && k < 4; k++) {
        s_case_t c = s_four_case (count, k);
        rc = s_child_case (child, tag, k, &c);
    }
    if (rc || (rc = s_child_stats (child)))
        return rc;
    return s_child_expect (child, "exit");
}

//  A ring of n children in index order runs four all-reduces of count
//  floats over TCP in chunks of 1 KiB; once it is formed, and before they
//  start, inject (cluster, arg) sends messages to its members and returns
//  how many each must count as malformed. Checks those counts, and the
//  results.
typedef void (s_inject_fn) (s_cluster_t *cluster, int *malformed, void *arg);

static void
s_run_four (int n, const char *tag, size_t count, s_inject_fn *inject, void *arg)
{
    s_net_t net = { .transport = "tcp", .chunk_bytes = 1024 };
    char text [64];
    snprintf (text, sizeof text, "%s %zu", tag, count);
    s_cluster_t cluster;
    s_cluster_start (&cluster, n, &net, "four", text);
    s_cluster_form_all (&cluster, 1);
    char line [S_LINE_MAX];
    for (int i = 0; i < n; i++)
        s_cluster_expect (&cluster, i, "formed", line, sizeof line);
    int expected [S_MAX_CHILDREN] = { 0 };
    inject (&cluster, expected, arg);
    for (int i = 0; i < n; i++)
        s_cluster_say (&cluster, i, "go");
    for (int i = 0; i < n; i++) {
        const char *stats = s_cluster_expect (&cluster, i, "stats ", line, sizeof line);
        char *cursor;
        uint64_t collectives = strtoull (stats, &cursor, 10);
        strtoull (cursor, &cursor, 10);
        uint64_t malformed = strtoull (cursor, &cursor, 10);
        assert_int_equal (collectives, 4);
        if (malformed != (uint64_t) expected [i])
            fail_msg ("member %d counted %" PRIu64 " malformed messages, expected %d", i,
                      malformed, expected [i]);
        s_cluster_say (&cluster, i, "exit");
    }
    s_cluster_finish (&cluster);
    int members [S_MAX_CHILDREN];
    for (int i = 0; i < n; i++)
        members [i] = i;
    for (int k = 0; k < 4; k++) {
        s_case_t c = s_four_case (count, k);
        s_check_case (tag, k, &c, members, n);
    }
}

//  Malformed messages from the predecessor of each member of two.
static void
s_inject_live_malformed (s_cluster_t *cluster, int *malformed, void *arg)
{
    (void) arg;
    for (int i = 0; i < 2; i++) {
        char member [16], predecessor [16];
        snprintf (member, sizeof member, "worker:%d", i);
        snprintf (predecessor, sizeof predecessor, "worker:%d", 1 - i);
        s_injector_t injector;
        s_inject_open (&injector, cluster->endpoint [i], predecessor, member);
        malformed [i] = s_inject_malformed (&injector, 1, 0);
        s_inject_close (&injector);
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
s_inject_strangers (s_cluster_t *cluster, int *malformed, void *arg)
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
        s_injector_t injector;
        s_inject_open (&injector, cluster->endpoint [m], strangers [s].sender, member);
        uint64_t segment = (uint64_t) (m + 2) % 3;
        s_wire_t wire = s_wire (1, 0, segment * 4000, sizeof poison, 12000);
        s_inject (&injector, &wire, poison, sizeof poison);
        s_inject_close (&injector);
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
s_scenario_mismatch (s_child_t *child, const char *arg)
{
    (void) arg;
    int rc = s_child_form (child);
    if (rc)
        return rc == 1 ? 0 : rc;
    size_t count = child->index == 0 ? 1000 : 2000;
    float *data = calloc (count, sizeof (float));
    if (!data)
        return S_EXIT_MEMORY;
    ps_error_t err;
    rc = ps_ring_allreduce (child->ring, data, count, &err);
    free (data);
    if (rc == PS_EPROTO && !strstr (err.msg, "this member's is")) {
        s_child_say (child, "PS_EPROTO does not name the sizes: %s", err.msg);
        return S_EXIT_WRONG_CODE;
    }
    return harness_write_line (child->out, "code %d", rc) ? S_EXIT_PIPE : 0;
}

static void
test_count_mismatch (void **state)
{
    (void) state;
    s_net_t net = { .transport = "tcp", .timeout_ms = 2000 };
    s_cluster_t cluster;
    s_cluster_start (&cluster, 2, &net, "mismatch", NULL);
    s_cluster_form_all (&cluster, 1);
    char line [S_LINE_MAX];
    int eproto = 0;
    for (int i = 0; i < 2; i++) {
        int code = atoi (s_cluster_expect (&cluster, i, "code ", line, sizeof line));
        //  The first to see the other's slice fails and closes its socket,
        //  which may drop its own slice before the other member saw it.
        if (code != PS_EPROTO && code != PS_ETIMEDOUT)
            fail_msg ("child %d: all-reduce returned %d", i, code);
        eproto += code == PS_EPROTO;
    }
    assert_true (eproto >= 1);
    s_cluster_finish (&cluster);
}

//  ---------------------------------------------------------------------
//  Arguments and endpoints

static void
test_bad_arguments (void **state)
{
    (void) state;
    ps_error_t err;
    ps_ring_config_t config = { .bind = "tcp://256.1.2.3:5555" };
    assert_null (ps_ring_new (&config, &err));
    assert_int_equal (err.code, PS_EIO);
    assert_non_null (strstr (err.msg, "tcp://256.1.2.3:5555"));
    config.bind = "nonsense://x";
    assert_null (ps_ring_new (&config, &err));
    assert_non_null (strstr (err.msg, "nonsense://x"));
    config.bind = NULL;
    assert_null (ps_ring_new (&config, &err));
    assert_int_equal (err.code, PS_EINVAL);
    config = (ps_ring_config_t) { .bind = "tcp://127.0.0.1:*", .chunk_bytes = 2 };
    assert_null (ps_ring_new (&config, &err));
    assert_non_null (strstr (err.msg, "chunk_bytes"));
    config = (ps_ring_config_t) { .bind = "tcp://127.0.0.1:*", .chunk_bytes = 1u << 30 };
    assert_null (ps_ring_new (&config, &err));
    config = (ps_ring_config_t) { .bind = "tcp://127.0.0.1:*", .timeout_ms = -1 };
    assert_null (ps_ring_new (&config, &err));
    assert_non_null (strstr (err.msg, "timeout_ms"));

    config = (ps_ring_config_t) { .bind = "tcp://127.0.0.1:*" };
    ps_ring_t *ring = ps_ring_new (&config, &err);
    assert_non_null (ring);
    const char *endpoint = ps_ring_endpoint (ring);
    assert_int_equal (strncmp (endpoint, "tcp://127.0.0.1:", 16), 0);
    assert_true (atoi (endpoint + 16) > 0);

    //  Nothing runs before the first formation.
    float data [4] = { 1, 2, 3, 4 };
    assert_int_equal (ps_ring_allreduce (ring, data, 4, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "never formed"));
    assert_int_equal (ps_ring_broadcast (ring, 0, data, 4, &err), PS_EINVAL);

    const char *members [] = { endpoint, "tcp://127.0.0.1:1", "" , NULL };
    assert_int_equal (ps_ring_form (ring, 1, 0, 0, members, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "0 members"));
    assert_int_equal (ps_ring_form (ring, 1, -1, 2, members, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "rank -1"));
    assert_int_equal (ps_ring_form (ring, 1, 2, 2, members, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "rank 2"));
    assert_int_equal (ps_ring_form (ring, 1, 0, 3, members, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "member 2 has no endpoint"));
    const char *missing [] = { endpoint, "tcp://127.0.0.1:1", "tcp://127.0.0.1:2", NULL };
    assert_int_equal (ps_ring_form (ring, 1, 0, 4, missing, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "member 3 has no endpoint"));
    assert_int_equal (ps_ring_form (ring, 1, 0, 1, NULL, NULL, &err), PS_EINVAL);

    //  A ring of one: collectives return at once.
    assert_int_equal (ps_ring_form (ring, 5, 0, 1, members, NULL, &err), 0);
    assert_int_equal (ps_ring_rank (ring), 0);
    assert_int_equal (ps_ring_size (ring), 1);
    assert_int_equal (ps_ring_allreduce (ring, data, 4, &err), 0);
    assert_true (data [0] == 1 && data [3] == 4);
    assert_int_equal (ps_ring_broadcast (ring, 0, data, sizeof data, &err), 0);
    assert_true (data [1] == 2);
    assert_int_equal (ps_ring_broadcast (ring, 1, data, sizeof data, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "root 1"));
    assert_int_equal (ps_ring_allreduce (ring, NULL, 4, &err), PS_EINVAL);
    assert_int_equal (ps_ring_allreduce (ring, NULL, 0, &err), 0);

    //  Ring ids only grow.
    assert_int_equal (ps_ring_form (ring, 5, 0, 1, members, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "not above"));
    assert_int_equal (ps_ring_form (ring, 4, 0, 1, members, NULL, &err), PS_EINVAL);

    //  A successor that cannot be connected to: PS_EIO naming it, and the
    //  ring formed before stays.
    const char *bad [] = { endpoint, "nonsense://successor" };
    assert_int_equal (ps_ring_form (ring, 6, 0, 2, bad, NULL, &err), PS_EIO);
    assert_non_null (strstr (err.msg, "nonsense://successor"));
    assert_int_equal (ps_ring_size (ring), 1);
    assert_int_equal (ps_ring_allreduce (ring, data, 4, &err), 0);
    assert_int_equal (ps_ring_form (ring, 6, 0, 1, members, NULL, &err), 0);

    ps_ring_stats_t stats;
    ps_ring_stats (ring, &stats);
    assert_int_equal (stats.collectives, 4);
    ps_ring_destroy (&ring);
    assert_null (ring);
    ps_ring_destroy (&ring);

    //  A secured ring needs every member's task, and the successor's key.
    config = (ps_ring_config_t) { .bind = "tcp://127.0.0.1:*", .curve = harness_curve ("worker:0") };
    ring = ps_ring_new (&config, &err);
    assert_non_null (ring);
    const char *pair [] = { ps_ring_endpoint (ring), "tcp://127.0.0.1:1" };
    assert_int_equal (ps_ring_form (ring, 1, 0, 2, pair, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "task"));
    assert_int_equal (ps_ring_form (ring, 1, 0, 2, pair, (const int []) { 0, 42 }, &err),
                      PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "worker-42"));
    assert_int_equal (ps_ring_form (ring, 1, 0, 2, pair, (const int []) { 0, 1 }, &err), 0);
    ps_ring_destroy (&ring);

    //  An IPC endpoint is reported as bound.
    char bind [512];
    snprintf (bind, sizeof bind, "ipc://%s/bad-arguments", s_dir);
    config = (ps_ring_config_t) { .bind = bind };
    ring = ps_ring_new (&config, &err);
    assert_non_null (ring);
    assert_string_equal (ps_ring_endpoint (ring), bind);
    ps_ring_destroy (&ring);
}

static int
s_setup_group (void **state)
{
    (void) state;
    harness_tmpdir (s_dir, sizeof s_dir);
    //  The children are worker:0, worker:1, ... of this process's keys.
    return setenv (HARNESS_KEYS_ENV, harness_keys (), 1);
}

static int
s_teardown_group (void **state)
{
    (void) state;
    harness_rmtree (s_dir);
    return 0;
}

//  The scenarios a child can run, by name.
static const struct {
    const char *name;
    s_scenario_fn *fn;
} s_scenarios [] = {
    { "cases", s_scenario_cases },
    { "reform", s_scenario_reform },
    { "broadcast", s_scenario_broadcast },
    { "never_joins", s_scenario_never_joins },
    { "killed", s_scenario_killed },
    { "four", s_scenario_four },
    { "mismatch", s_scenario_mismatch },
};

//  This program as a child (s_cluster_start): test_ring --ring-child INDEX
//  IN OUT DIR CLUSTER TRANSPORT CHUNK TIMEOUT INSECURE SCENARIO ARG.
static int
s_child_run (int argc, char *argv [])
{
    if (argc != 13 || strlen (argv [5]) >= sizeof s_dir)
        return S_EXIT_EXEC;
    snprintf (s_dir, sizeof s_dir, "%s", argv [5]);
    s_clusters = atoi (argv [6]);
    s_net_t net = { .transport = argv [7], .chunk_bytes = strtoul (argv [8], NULL, 10),
                    .timeout_ms = atoi (argv [9]), .insecure = atoi (argv [10]) != 0 };
    for (size_t i = 0; i < sizeof s_scenarios / sizeof s_scenarios [0]; i++)
        if (strcmp (s_scenarios [i].name, argv [11]) == 0)
            return s_child_main (atoi (argv [2]), atoi (argv [3]), atoi (argv [4]), &net,
                                 s_scenarios [i].fn, argv [12]);
    fprintf (stderr, "test_ring: no scenario %s\n", argv [11]);
    return S_EXIT_EXEC;
}

int
main (int argc, char *argv [])
{
    //  The heap is tuned as in ps-worker, so messages are allocated as
    //  the worker's are.
    ps_error_t err;
    if (ps_heap_tune (&err))
        fprintf (stderr, "test_ring: %s\n", err.msg);
    ps_log_init ("test_ring", PS_LOG_ERROR);
    if (argc > 1 && strcmp (argv [1], S_CHILD_FLAG) == 0)
        return s_child_run (argc, argv);
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_bad_arguments, s_teardown),
        cmocka_unit_test_teardown (test_wire_peer, s_teardown),
        cmocka_unit_test_teardown (test_malformed_in_process, s_teardown),
        cmocka_unit_test_teardown (test_watch, s_teardown),
        cmocka_unit_test_teardown (test_allreduce_tcp, s_teardown),
        cmocka_unit_test_teardown (test_allreduce_ipc, s_teardown),
        cmocka_unit_test_teardown (test_reform, s_teardown),
        cmocka_unit_test_teardown (test_broadcast, s_teardown),
        cmocka_unit_test_teardown (test_malformed_live, s_teardown),
        cmocka_unit_test_teardown (test_stranger_dropped, s_teardown),
        cmocka_unit_test_teardown (test_count_mismatch, s_teardown),
        cmocka_unit_test_teardown (test_never_joins, s_teardown),
        cmocka_unit_test_teardown (test_killed_member, s_teardown),
    };
    return harness_finish (cmocka_run_group_tests (tests, s_setup_group, s_teardown_group));
}
