//  The ring tests' fixture; see harness_ring.h.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "harness.h"
#include "harness_rand.h"
#include "harness_ring.h"
#include "ps_heap.h"
#include "ps_log.h"

//  The first argument of this program when it runs as a child.
#define S_CHILD_FLAG        "--ring-child"

const char *
harness_ring_exit_name (int code)
{
    switch (code) {
        case -1: return "did not exit in time, killed";
        case 0: return "success";
        case HARNESS_RING_EXIT_PIPE: return "talking to the parent failed";
        case HARNESS_RING_EXIT_RING_NEW: return "ps_ring_new failed";
        case HARNESS_RING_EXIT_FORM: return "ps_ring_form failed";
        case HARNESS_RING_EXIT_ALLREDUCE: return "an all-reduce failed";
        case HARNESS_RING_EXIT_BROADCAST: return "a broadcast failed";
        case HARNESS_RING_EXIT_BROADCAST_DATA:
            return "a broadcast delivered other bytes than the root's";
        case HARNESS_RING_EXIT_WRONG_CODE: return "a collective returned an unexpected code";
        case HARNESS_RING_EXIT_TOO_SLOW: return "a collective returned later than allowed";
        case HARNESS_RING_EXIT_TOO_FAST: return "a collective gave up before its timeout";
        case HARNESS_RING_EXIT_FILE: return "writing a result file failed";
        case HARNESS_RING_EXIT_NO_FAILURE: return "the collective never failed";
        case HARNESS_RING_EXIT_MEMORY: return "out of memory";
        case HARNESS_RING_EXIT_EXEC: return "running this program as a child failed";
        default: return "unknown";
    }
}

//  The test's directory for result files and IPC endpoints.
static char s_dir [256];

//  Clusters started so far: IPC endpoints are named after the count.
static int s_clusters;


//  This program's name, for the children's command line and messages.
static const char *s_program = "test_ring";

const char *
harness_ring_dir (void)
{
    return s_dir;
}

//  ---------------------------------------------------------------------
//  Inputs


//  Output number 0 of a splitmix64 generator whose state is x: a hash of
//  x.
static uint64_t
s_mix (uint64_t x)
{
    return harness_splitmix (&x);
}

//  Member rank's input of a case: uniform in [-1, 1) times a power of two
//  in [2^-4, 2^4] (so that sums round), or integers in [-1000, 1000].
void
harness_ring_fill (float *data, size_t count, uint64_t seed, int rank, bool integers)
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
void
harness_ring_fill_bytes (unsigned char *data, size_t bytes, uint64_t seed, int root)
{
    uint64_t base = s_mix (seed * 7919u + (uint64_t) root);
    for (size_t i = 0; i < bytes; i++)
        data [i] = (unsigned char) s_mix (base + i);
}


//  ---------------------------------------------------------------------
//  Children


void
harness_ring_child_say (const harness_ring_child_t *child, const char *fmt, ...)
{
    char text [HARNESS_RING_LINE_MAX];
    va_list args;
    va_start (args, fmt);
    vsnprintf (text, sizeof text, fmt, args);
    va_end (args);
    fprintf (stderr, "%s: child %d (pid %d): %s\n", s_program, child->index, (int) getpid (), text);
}

//  Wait for the parent's next order: "form ID RANK N ENDPOINT... TASK..."
//  forms the ring (the tasks are the members' worker task indices);
//  "leave" makes the child exit. Returns 0 when formed, 1 for leave, or an
//  exit code.
int
harness_ring_child_form (harness_ring_child_t *child)
{
    char line [HARNESS_RING_LINE_MAX];
    if (harness_read_line (child->in, line, sizeof line, HARNESS_RING_WAIT_MS))
        return HARNESS_RING_EXIT_PIPE;
    if (strcmp (line, "leave") == 0)
        return 1;
    char *save = NULL;
    char *word = strtok_r (line, " ", &save);
    if (!word || strcmp (word, "form") != 0)
        return HARNESS_RING_EXIT_PIPE;
    uint64_t ring_id = strtoull (strtok_r (NULL, " ", &save), NULL, 10);
    int rank = atoi (strtok_r (NULL, " ", &save));
    int n = atoi (strtok_r (NULL, " ", &save));
    const char *members [HARNESS_RING_MAX_CHILDREN];
    int tasks [HARNESS_RING_MAX_CHILDREN];
    for (int i = 0; i < n && i < HARNESS_RING_MAX_CHILDREN; i++)
        members [i] = strtok_r (NULL, " ", &save);
    for (int i = 0; i < n && i < HARNESS_RING_MAX_CHILDREN; i++) {
        const char *task = strtok_r (NULL, " ", &save);
        if (!task)
            return HARNESS_RING_EXIT_PIPE;
        tasks [i] = atoi (task);
    }
    ps_error_t err;
    if (ps_ring_form (child->ring, ring_id, rank, n, members, child->secured ? tasks : NULL,
                      &err)) {
        harness_ring_child_say (child, "ps_ring_form: %s", err.msg);
        return HARNESS_RING_EXIT_FORM;
    }
    return 0;
}

//  Wait for the parent to say `word`.
int
harness_ring_child_expect (harness_ring_child_t *child, const char *word)
{
    char line [HARNESS_RING_LINE_MAX];
    if (harness_read_line (child->in, line, sizeof line, HARNESS_RING_WAIT_MS)
    ||  strcmp (line, word) != 0)
        return HARNESS_RING_EXIT_PIPE;
    return 0;
}

//  Run one all-reduce case as the current rank and write the result to
//  <dir>/<tag>-<case>-<child>.f32.
int
harness_ring_child_case (harness_ring_child_t *child, const char *tag, int k,
                         const harness_ring_case_t *c)
{
    float *data = malloc ((c->count ? c->count : 1) * sizeof (float));
    if (!data)
        return HARNESS_RING_EXIT_MEMORY;
    harness_ring_fill (data, c->count, c->seed, ps_ring_rank (child->ring), c->integers);
    ps_error_t err;
    int rc = ps_ring_allreduce (child->ring, data, c->count, &err);
    if (rc) {
        harness_ring_child_say (child, "all-reduce of case %s-%d (%zu floats): %s", tag, k,
                                c->count, err.msg);
        free (data);
        return HARNESS_RING_EXIT_ALLREDUCE;
    }
    char path [512];
    snprintf (path, sizeof path, "%s/%s-%d-%d.f32", s_dir, tag, k, child->index);
    FILE *file = fopen (path, "wb");
    rc = !file || fwrite (data, sizeof (float), c->count, file) != c->count;
    if (file && fclose (file) != 0)
        rc = 1;
    free (data);
    if (rc) {
        harness_ring_child_say (child, "cannot write %s", path);
        return HARNESS_RING_EXIT_FILE;
    }
    return 0;
}

int
harness_ring_child_stats (harness_ring_child_t *child)
{
    ps_ring_stats_t stats;
    ps_ring_stats (child->ring, &stats);
    return harness_write_line (child->out, "stats %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
                         " %" PRIu64 " %" PRIu64, stats.collectives, stats.stale_dropped,
                         stats.malformed, stats.bytes_sent, stats.bytes_received,
                         stats.shared_memory) ? HARNESS_RING_EXIT_PIPE : 0;
}

//  The body of a child: bind, report the endpoint, run the scenario.
static int
s_child_main (int index, int in, int out, const harness_ring_net_t *net,
              harness_ring_scenario_fn *fn, const char *arg)
{
    harness_ring_child_t child = { .index = index, .in = in, .out = out,
                                   .secured = !net->insecure };
    ps_error_t err;
    char bind [512];
    //  "host", "hosts" and "mixed" bind tcp and hand out the ring's
    //  endpoint set (ps_host.h); under "hosts" every child has a host
    //  identity of its own, as the members of a ring over several machines
    //  have, and under "mixed" child 0 shares no memory (PS_SAME_HOST=ipc).
    bool set = strcmp (net->transport, "host") == 0 || strcmp (net->transport, "hosts") == 0
            || strcmp (net->transport, "mixed") == 0;
    if (strcmp (net->transport, "mixed") == 0 && index == 0
    &&  setenv ("PS_SAME_HOST", "ipc", 1) != 0)
        return HARNESS_RING_EXIT_EXEC;
    if (strcmp (net->transport, "hosts") == 0) {
        char host [32];
        snprintf (host, sizeof host, "harness-host-%d", index);
        if (setenv ("PS_HOST_ID", host, 1) != 0)
            return HARNESS_RING_EXIT_EXEC;
    }
    if (strcmp (net->transport, "ipc") == 0)
        snprintf (bind, sizeof bind, "ipc://%s/ring-%d-%d", s_dir, s_clusters, index);
    else
        snprintf (bind, sizeof bind, "tcp://127.0.0.1:*");
    char task [32];
    snprintf (task, sizeof task, "worker:%d", index);
    ps_ring_config_t config = { .bind = bind, .chunk_bytes = net->chunk_bytes,
                                .timeout_ms = net->timeout_ms, .shm_bytes = net->shm_bytes,
                                .curve = child.secured ? harness_curve (task) : NULL };
    child.ring = ps_ring_new (&config, &err);
    if (!child.ring) {
        harness_ring_child_say (&child, "ps_ring_new: %s", err.msg);
        return HARNESS_RING_EXIT_RING_NEW;
    }
    if (harness_write_line (out, "endpoint %s", set ? ps_ring_advert (child.ring)
                                                    : ps_ring_endpoint (child.ring)))
        return HARNESS_RING_EXIT_PIPE;
    int rc = fn (&child, arg);
    ps_ring_destroy (&child.ring);
    return rc;
}


//  ---------------------------------------------------------------------
//  Clusters (the parent's side)


//  The cluster of the test under way, for the teardown.
static harness_ring_cluster_t *s_live;

//  Start n children running the scenario named scenario with its text arg,
//  and read their endpoints.
void
harness_ring_cluster_start (harness_ring_cluster_t *cluster, int n, const harness_ring_net_t *net,
                            const char *scenario, const char *arg)
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
        char words [10][512];
        snprintf (words [0], sizeof words [0], "%d", i);
        snprintf (words [1], sizeof words [1], "%d", down [0]);
        snprintf (words [2], sizeof words [2], "%d", up [1]);
        snprintf (words [3], sizeof words [3], "%s", s_dir);
        snprintf (words [4], sizeof words [4], "%d", s_clusters);
        snprintf (words [5], sizeof words [5], "%s", net->transport);
        snprintf (words [6], sizeof words [6], "%zu", net->chunk_bytes);
        snprintf (words [7], sizeof words [7], "%d", net->timeout_ms);
        snprintf (words [8], sizeof words [8], "%d", net->insecure);
        snprintf (words [9], sizeof words [9], "%zu", net->shm_bytes);
        const char *argv [] = { s_program, S_CHILD_FLAG, words [0], words [1], words [2],
                                words [3], words [4], words [5], words [6], words [7],
                                words [8], words [9], scenario, arg ? arg : "", NULL };
        pid_t pid = fork ();
        assert_true (pid >= 0);
        if (pid == 0) {
            //  A child must never outlive the test.
            if (prctl (PR_SET_PDEATHSIG, SIGKILL) != 0)
                _exit (HARNESS_RING_EXIT_PIPE);
            for (int j = 0; j < cluster->n; j++)
                if (close (cluster->to [j]) != 0 || close (cluster->from [j]) != 0)
                    _exit (HARNESS_RING_EXIT_PIPE);
            if (close (down [1]) != 0 || close (up [0]) != 0)
                _exit (HARNESS_RING_EXIT_PIPE);
            execv ("/proc/self/exe", (char *const *) argv);
            _exit (HARNESS_RING_EXIT_EXEC);
        }
        assert_int_equal (close (down [0]), 0);
        assert_int_equal (close (up [1]), 0);
        cluster->pid [i] = pid;
        cluster->to [i] = down [1];
        cluster->from [i] = up [0];
        cluster->n++;
    }
    for (int i = 0; i < n; i++) {
        char line [HARNESS_RING_LINE_MAX];
        if (harness_read_line (cluster->from [i], line, sizeof line, HARNESS_RING_WAIT_MS)
        ||  strncmp (line, "endpoint ", 9) != 0)
            fail_msg ("child %d sent no endpoint", i);
        if (strlen (line + 9) >= sizeof cluster->endpoint [i])
            fail_msg ("child %d sent an endpoint of %zu bytes", i, strlen (line + 9));
        memcpy (cluster->endpoint [i], line + 9, strlen (line + 9) + 1);
    }
}

//  Reap child i and return its exit code (128 + signal when killed), or
//  -1 when it had to be killed for not exiting in time.
int
harness_ring_cluster_reap (harness_ring_cluster_t *cluster, int i)
{
    assert_false (cluster->reaped [i]);
    int status = harness_wait_or_kill (cluster->pid [i], HARNESS_RING_WAIT_MS);
    cluster->reaped [i] = true;
    return status;
}

//  Read child i's next line, which must start with prefix; returns what
//  follows the prefix (in line). A child that died instead is reported
//  with its exit code.
const char *
harness_ring_cluster_expect (harness_ring_cluster_t *cluster, int i, const char *prefix,
                             char *line, size_t size)
{
    if (harness_read_line (cluster->from [i], line, size, HARNESS_RING_WAIT_MS)) {
        int code = cluster->reaped [i] ? -1 : harness_ring_cluster_reap (cluster, i);
        fail_msg ("child %d sent no \"%s\" line; it exited with %d (%s)", i, prefix, code,
                  harness_ring_exit_name (code));
    }
    if (strncmp (line, prefix, strlen (prefix)) != 0)
        fail_msg ("child %d said \"%s\", expected \"%s...\"", i, line, prefix);
    return line + strlen (prefix);
}

void
harness_ring_cluster_say (harness_ring_cluster_t *cluster, int i, const char *word)
{
    assert_int_equal (harness_write_line (cluster->to [i], "%s", word), 0);
}

//  Form ring ring_id of the children order [0 .. n): child order [p] is
//  member p, of task worker:order [p].
void
harness_ring_cluster_form (harness_ring_cluster_t *cluster, uint64_t ring_id, const int *order,
                           int n)
{
    char members [HARNESS_RING_LINE_MAX] = "";
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
void
harness_ring_cluster_form_all (harness_ring_cluster_t *cluster, uint64_t ring_id)
{
    int order [HARNESS_RING_MAX_CHILDREN] = { 0 };
    for (int i = 0; i < cluster->n; i++)
        order [i] = i;
    harness_ring_cluster_form (cluster, ring_id, order, cluster->n);
}

//  Wait for every child not reaped yet and assert it exited with 0.
void
harness_ring_cluster_finish (harness_ring_cluster_t *cluster)
{
    for (int i = 0; i < cluster->n; i++) {
        if (cluster->reaped [i])
            continue;
        int code = harness_ring_cluster_reap (cluster, i);
        if (code != 0)
            fail_msg ("child %d exited with %d (%s)", i, code, harness_ring_exit_name (code));
    }
    for (int i = 0; i < cluster->n; i++) {
        assert_int_equal (close (cluster->to [i]), 0);
        assert_int_equal (close (cluster->from [i]), 0);
    }
    cluster->n = 0;
    s_live = NULL;
}

//  Kill and reap whatever a failed test left running.
int
harness_ring_teardown (void **state)
{
    (void) state;
    if (s_live) {
        for (int i = 0; i < s_live->n; i++)
            if (!s_live->reaped [i]) {
                if (kill (s_live->pid [i], SIGKILL) != 0 && errno != ESRCH)
                    fprintf (stderr, "%s: kill %d: %s\n", s_program, (int) s_live->pid [i],
                             strerror (errno));
                harness_wait_or_kill (s_live->pid [i], HARNESS_RING_WAIT_MS);
                s_live->reaped [i] = true;
            }
        for (int i = 0; i < s_live->n; i++)
            if (close (s_live->to [i]) != 0 || close (s_live->from [i]) != 0)
                fprintf (stderr, "%s: closing the pipes of child %d: %s\n", s_program, i,
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
void
harness_ring_check_case (const char *tag, int k, const harness_ring_case_t *c, const int *members,
                         int n)
{
    float *results [HARNESS_RING_MAX_CHILDREN];
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
        harness_ring_fill (input, c->count, c->seed, r, c->integers);
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
//  The program

int
harness_ring_setup_group (void **state)
{
    (void) state;
    harness_tmpdir (s_dir, sizeof s_dir);
    //  The children are worker:0, worker:1, ... of this process's keys.
    return setenv (HARNESS_KEYS_ENV, harness_keys (), 1);
}

int
harness_ring_teardown_group (void **state)
{
    (void) state;
    harness_rmtree (s_dir);
    return 0;
}

//  This program as a child (harness_ring_cluster_start): PROGRAM
//  --ring-child INDEX IN OUT DIR CLUSTER TRANSPORT CHUNK TIMEOUT INSECURE
//  SCENARIO ARG.
static int
s_child_run (int argc, char *argv [], const harness_ring_scenario_t *scenarios, size_t count)
{
    if (argc != 14 || strlen (argv [5]) >= sizeof s_dir)
        return HARNESS_RING_EXIT_EXEC;
    snprintf (s_dir, sizeof s_dir, "%s", argv [5]);
    s_clusters = atoi (argv [6]);
    harness_ring_net_t net = { .transport = argv [7], .chunk_bytes = strtoul (argv [8], NULL, 10),
                               .timeout_ms = atoi (argv [9]), .insecure = atoi (argv [10]) != 0,
                               .shm_bytes = strtoul (argv [11], NULL, 10) };
    for (size_t i = 0; i < count; i++)
        if (strcmp (scenarios [i].name, argv [12]) == 0)
            return s_child_main (atoi (argv [2]), atoi (argv [3]), atoi (argv [4]), &net,
                                 scenarios [i].fn, argv [13]);
    fprintf (stderr, "%s: no scenario %s\n", s_program, argv [12]);
    return HARNESS_RING_EXIT_EXEC;
}

bool
harness_ring_start (const char *program, int argc, char *argv [],
                    const harness_ring_scenario_t *scenarios, size_t count, int *status)
{
    s_program = program;
    ps_error_t err;
    if (ps_heap_tune (&err))
        fprintf (stderr, "%s: %s\n", program, err.msg);
    ps_log_init (program, PS_LOG_ERROR);
    if (argc > 1 && strcmp (argv [1], S_CHILD_FLAG) == 0) {
        *status = s_child_run (argc, argv, scenarios, count);
        return true;
    }
    return false;
}
