//  Network benchmark of ps-cluster against its own ceilings, in one run.
//  For payloads of 4 KB, 1 MB, 16 MB and 64 MB of float32 over tcp loopback
//  it first measures what ZeroMQ alone can do on this machine: one-way
//  PUSH/PULL streaming with zero-copy sends (the throughput ceiling), a
//  64-byte REQ/REP round trip (the latency ceiling), and, as extra
//  references, a REQ/REP round trip carrying the payload one way (the best
//  a push can do) and both ways (the best a push-pull can do). It then
//  starts real ps-server processes and times push, pull and push-pull
//  through ps_client, with SGD and with Adam, against 1 server and against
//  2 servers that hold half of the variable each. Every such cell runs
//  twice, back to back: with --insecure servers and unsecured clients,
//  then secured with CurveZMQ as a cluster is by default (keys the bench
//  makes; chief:0 creates and sets the optimizer, worker:0 pushes and
//  pulls), and the secured row gives its throughput as a share of the
//  unsecured one's.
//
//  Every cell reports the median time per request, the throughput that
//  implies (payload bytes / median; push-pull counts the payload once), and
//  its ratio to the raw one-way throughput of the same size; at 4 KB the
//  ratio is of latencies instead, against the 64-byte round trip. Servers'
//  CPU time (from /proc/PID/task/*/schedstat) and minor page faults (from
//  /proc/PID/stat), and the client process's own, are reported per request
//  so that a gap to the ceiling can be attributed. After the Adam runs at
//  the largest size the server's VmRSS and VmHWM are compared with the
//  memory its parameters and optimizer slots need.
//
//  A benchmark prints and never fails on timings: the targets in the
//  summary (set against the unsecured cells, since raw ZeroMQ encrypts
//  nothing either) say "met" or "NOT met" for information only, and are
//  BENCHROW lines too (harness_benchrow.h). It exits non-zero
//  only when something could not be set up or a request failed.
//
//  Usage: bench_ps [--quick | --memory] [--server PATH] [--threads N] [--parts K|default]
//  The variable is laid out as the coordinator lays it out by default
//  (ps_partitioner_default, ps_placement_new), or in K partitions per
//  server of equal rows.
//  --memory measures only a server's peak memory under a stream of
//  requests on one 16 MB variable with Adam (s_memory_mode).
//  The server binary is --server, else $PS_SERVER, else the one meson
//  built, else build/ps/ps-server relative to the current directory.
//
//  This file is longer than the project's 800 lines on purpose: it is one
//  benchmark, whose tables share the server processes, the clients and the
//  raw ZeroMQ baseline.

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "harness.h"
#include "harness_benchrow.h"
#include "ps_client.h"
#include "ps_heap.h"
#include "ps_partitioner.h"

#define S_MIB           ((size_t) 1 << 20)
#define S_ROW           1024                //  floats in one row of the variable
#define S_MAX_SERVERS   2
#define S_MAX_PARTS     (S_MAX_SERVERS * 16) //  --parts is at most 16
#define S_MAX_ROWS      256
#define S_TIMEOUT_MS    120000
#define S_SETTLE_S      0.3                 //  of pings before timing a server
#define S_RTT_BLOCKS    3                   //  before, between, after the 4 KB servers
#define S_BATCHES       5                   //  of the raw one-way stream

//  One payload size and how many times to repeat each measurement of it.
typedef struct {
    const char *label;
    size_t bytes;
    int reps;                   //  timed requests per ps-cluster cell
    int warmups;                //  untimed requests before them
    int stream;                 //  messages in the raw one-way stream
} s_size_t;

//  One line of the final table.
typedef struct {
    char op [16];
    char servers [4];
    char opt [8];
    char sec [8];               //  "curve", "none", or "-" for raw ZeroMQ
    int size;                   //  index into the sizes
    double median, mean;        //  seconds per request
    //  Per request, summed over the servers of the cell; negative = unknown.
    double srv_cpu, srv_faults;
    double cli_cpu, cli_faults;
} s_row_t;

typedef enum { S_PUSH, S_PULL, S_PUSH_PULL } s_op_t;
static const char *s_op_names [] = { "push", "pull", "push-pull" };

static s_row_t s_rows [S_MAX_ROWS];
static int s_nrows;

//  Servers currently running, so that a failure can stop them.
static harness_server_t s_servers [S_MAX_SERVERS];
static int s_nservers;

//  ---------------------------------------------------------------------
//  Helpers

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static void
s_stop_servers (void)
{
    for (int i = 0; i < s_nservers; i++) {
        char log [sizeof s_servers [i].log];
        snprintf (log, sizeof log, "%s", s_servers [i].log);
        if (s_servers [i].pid > 0 && harness_server_stop (&s_servers [i], SIGTERM) != 0)
            fprintf (stderr, "bench_ps: server %d did not exit cleanly (log kept in %s)\n",
                     i, log);
        else
            unlink (log);
    }
    s_nservers = 0;
}

//  Give up: stop the servers we started and exit with failure.
static void
s_fail (const char *what, const char *detail)
{
    fprintf (stderr, "bench_ps: %s: %s\n", what, detail);
    s_stop_servers ();
    exit (EXIT_FAILURE);
}

static void
s_check_zmq (int rc, const char *what)
{
    if (rc < 0)
        s_fail (what, zmq_strerror (errno));
}

static void
s_check_ps (int rc, const char *what, const ps_error_t *err)
{
    if (rc < 0)
        s_fail (what, err->msg);
}

//  A 64-byte aligned buffer with every page written, so that the caller's
//  page faults fall outside the timed region.
static void *
s_buffer (size_t bytes, float value)
{
    size_t rounded = (bytes + 63) / 64 * 64;
    float *buffer = aligned_alloc (64, rounded);
    if (!buffer)
        s_fail ("aligned_alloc", strerror (ENOMEM));
    for (size_t i = 0; i < rounded / sizeof (float); i++)
        buffer [i] = value;
    return buffer;
}

//  Median and mean of n samples; sorts them.
static void
s_stats (double *samples, int n, double *median, double *mean)
{
    *median = harness_median (samples, n);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += samples [i];
    *mean = sum / n;
}

static s_row_t *
s_add_row (const char *op, const char *servers, const char *opt, const char *sec, int size)
{
    if (s_nrows == S_MAX_ROWS)
        s_fail ("table", "too many rows");
    s_row_t *row = &s_rows [s_nrows++];
    memset (row, 0, sizeof *row);
    snprintf (row->op, sizeof row->op, "%s", op);
    snprintf (row->servers, sizeof row->servers, "%s", servers);
    snprintf (row->opt, sizeof row->opt, "%s", opt);
    snprintf (row->sec, sizeof row->sec, "%s", sec);
    row->size = size;
    row->srv_cpu = row->srv_faults = row->cli_cpu = row->cli_faults = -1;
    return row;
}

//  ---------------------------------------------------------------------
//  Process counters

//  CPU time and minor faults of a process or of this one.
typedef struct {
    double cpu;                 //  seconds on a CPU, all threads
    double faults;              //  minor page faults
} s_usage_t;

static s_usage_t
s_self_usage (void)
{
    struct rusage usage;
    if (getrusage (RUSAGE_SELF, &usage) != 0)
        s_fail ("getrusage", strerror (errno));
    return (s_usage_t) {
        (double) usage.ru_utime.tv_sec + (double) usage.ru_utime.tv_usec * 1e-6
      + (double) usage.ru_stime.tv_sec + (double) usage.ru_stime.tv_usec * 1e-6,
        (double) usage.ru_minflt
    };
}

//  A server's counters: CPU time summed over its threads' schedstat (in
//  nanoseconds, unlike the 10 ms ticks of /proc/PID/stat), and minor
//  faults from /proc/PID/stat, field 10. Returns negative figures when the
//  files cannot be read.
static s_usage_t
s_server_usage (pid_t pid)
{
    s_usage_t usage = { 0, 0 };
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/task", (int) pid);
    DIR *dir = opendir (path);
    if (!dir)
        return (s_usage_t) { -1, -1 };
    struct dirent *entry;
    while ((entry = readdir (dir))) {
        if (entry->d_name [0] == '.')
            continue;
        char file [320];
        snprintf (file, sizeof file, "/proc/%d/task/%s/schedstat", (int) pid, entry->d_name);
        FILE *handle = fopen (file, "r");
        unsigned long long ns;
        if (handle && fscanf (handle, "%llu", &ns) == 1)
            usage.cpu += (double) ns * 1e-9;
        if (handle)
            fclose (handle);
    }
    closedir (dir);
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *handle = fopen (path, "r");
    if (!handle)
        return (s_usage_t) { -1, -1 };
    char line [1024];
    char *got = fgets (line, sizeof line, handle);
    fclose (handle);
    //  The command name may hold spaces; the fields count from its ')'.
    char *field = got ? strrchr (line, ')') : NULL;
    unsigned long long minflt;
    if (!field || sscanf (field + 1, " %*c %*d %*d %*d %*d %*d %*u %llu", &minflt) != 1)
        return (s_usage_t) { -1, -1 };
    usage.faults = (double) minflt;
    return usage;
}

static s_usage_t
s_servers_usage (void)
{
    s_usage_t total = { 0, 0 };
    for (int i = 0; i < s_nservers; i++) {
        s_usage_t usage = s_server_usage (s_servers [i].pid);
        if (usage.cpu < 0 || total.cpu < 0)
            total = (s_usage_t) { -1, -1 };
        else {
            total.cpu += usage.cpu;
            total.faults += usage.faults;
        }
    }
    return total;
}

//  ---------------------------------------------------------------------
//  Raw ZeroMQ ceilings

//  ZeroMQ may free nothing: the payload buffer outlives every message.
static void
s_no_free (void *data, void *hint)
{
    (void) data;
    (void) hint;
}

//  A socket of a fresh context (one I/O thread each, as separate
//  processes would have), bound to a free loopback port or connected to
//  endpoint.
static void *
s_raw_socket (void **ctx, int type, char *endpoint, size_t len, bool bind)
{
    *ctx = zmq_ctx_new ();
    if (!*ctx)
        s_fail ("zmq_ctx_new", zmq_strerror (errno));
    void *socket = zmq_socket (*ctx, type);
    if (!socket)
        s_fail ("zmq_socket", zmq_strerror (errno));
    if (bind) {
        s_check_zmq (zmq_bind (socket, "tcp://127.0.0.1:*"), "zmq_bind");
        s_check_zmq (zmq_getsockopt (socket, ZMQ_LAST_ENDPOINT, endpoint, &len),
                     "ZMQ_LAST_ENDPOINT");
    }
    else
        s_check_zmq (zmq_connect (socket, endpoint), "zmq_connect");
    return socket;
}

static void
s_raw_close (void *socket, void *ctx)
{
    s_check_zmq (zmq_close (socket), "zmq_close");
    s_check_zmq (zmq_ctx_term (ctx), "zmq_ctx_term");
}

//  The receiving end of the one-way stream: stamps each message's arrival.
typedef struct {
    void *socket;
    int count;
    double *stamps;
    int error;                  //  errno of a failed receive, or 0
} s_sink_t;

static void *
s_sink_thread (void *arg)
{
    s_sink_t *sink = arg;
    for (int i = 0; i < sink->count; i++) {
        zmq_msg_t msg;
        if (zmq_msg_init (&msg) != 0 || zmq_msg_recv (&msg, sink->socket, 0) < 0) {
            sink->error = errno;
            zmq_msg_close (&msg);
            return NULL;
        }
        sink->stamps [i] = s_now ();
        zmq_msg_close (&msg);
    }
    return NULL;
}

//  One-way PUSH/PULL streaming: warmups + stream messages of bytes, sent
//  back to back zero-copy from one buffer, received with zmq_msg_recv in
//  another thread, each side with its own context.
static void
s_raw_stream (int size, const s_size_t *sz, int warmups)
{
    char endpoint [256];
    void *pull_ctx, *push_ctx;
    void *pull = s_raw_socket (&pull_ctx, ZMQ_PULL, endpoint, sizeof endpoint, true);
    void *push = s_raw_socket (&push_ctx, ZMQ_PUSH, endpoint, sizeof endpoint, false);
    int total = warmups + sz->stream;
    s_sink_t sink = { pull, total, calloc ((size_t) total, sizeof (double)), 0 };
    if (!sink.stamps)
        s_fail ("calloc", strerror (ENOMEM));
    void *payload = s_buffer (sz->bytes, 1.0f);
    pthread_t thread;
    int rc = pthread_create (&thread, NULL, s_sink_thread, &sink);
    if (rc != 0)
        s_fail ("pthread_create", strerror (rc));
    for (int i = 0; i < total; i++) {
        zmq_msg_t msg;
        s_check_zmq (zmq_msg_init_data (&msg, payload, sz->bytes, s_no_free, NULL),
                     "zmq_msg_init_data");
        if (zmq_msg_send (&msg, push, 0) < 0) {
            zmq_msg_close (&msg);
            s_fail ("raw stream: zmq_msg_send", zmq_strerror (errno));
        }
    }
    rc = pthread_join (thread, NULL);
    if (rc != 0)
        s_fail ("pthread_join", strerror (rc));
    if (sink.error)
        s_fail ("raw stream: zmq_msg_recv", zmq_strerror (sink.error));
    //  Linger lets the (already delivered) stream finish before the buffer goes.
    s_raw_close (push, push_ctx);
    s_raw_close (pull, pull_ctx);
    free (payload);

    //  Arrivals come in bursts (one read can hold many small messages), so
    //  single gaps mean little: the stream is cut into S_BATCHES batches
    //  and the figure is the median over batches of time per message.
    int batch = sz->stream / S_BATCHES;
    double times [S_BATCHES];
    for (int b = 0; b < S_BATCHES; b++) {
        int first = warmups + b * batch;
        times [b] = (sink.stamps [first + batch - 1] - sink.stamps [first - 1]) / batch;
    }
    s_row_t *row = s_add_row ("raw-zmq", "-", "-", "-", size);
    double median, mean;
    s_stats (times, S_BATCHES, &median, &mean);
    row->median = median;
    row->mean = (sink.stamps [warmups + S_BATCHES * batch - 1] - sink.stamps [warmups - 1])
              / (S_BATCHES * batch);
    free (sink.stamps);
    fprintf (stderr, "bench_ps: %-5s raw-zmq one-way: %.1f us per message, %.2f GB/s\n",
             sz->label, row->median * 1e6, (double) sz->bytes / row->median * 1e-9);
}

//  The replying end of a round trip: answers every request with 64 bytes,
//  or sends the request itself back (zero-copy: the received message).
typedef struct {
    void *socket;
    int count;
    bool echo;
    int error;
} s_replier_t;

static void *
s_replier_thread (void *arg)
{
    s_replier_t *replier = arg;
    char small [64] = { 0 };
    for (int i = 0; i < replier->count; i++) {
        zmq_msg_t msg;
        if (zmq_msg_init (&msg) != 0 || zmq_msg_recv (&msg, replier->socket, 0) < 0) {
            replier->error = errno;
            zmq_msg_close (&msg);
            return NULL;
        }
        int rc;
        if (replier->echo)
            rc = zmq_msg_send (&msg, replier->socket, 0);
        else
            rc = zmq_send (replier->socket, small, sizeof small, 0);
        zmq_msg_close (&msg);
        if (rc < 0) {
            replier->error = errno;
            return NULL;
        }
    }
    return NULL;
}

//  REQ/REP round trips of a request of bytes (zero-copy above 64 bytes,
//  like ps_client's gradients) and a 64-byte or echoed reply. Adds a row
//  named op with the median and mean round trip, or, when keep is not
//  NULL, copies the reps round trips there instead.
static void
s_raw_roundtrip (const char *op, int size, size_t bytes, bool echo, int reps, int warmups,
                 double *keep)
{
    char endpoint [256];
    void *rep_ctx, *req_ctx;
    void *rep = s_raw_socket (&rep_ctx, ZMQ_REP, endpoint, sizeof endpoint, true);
    void *req = s_raw_socket (&req_ctx, ZMQ_REQ, endpoint, sizeof endpoint, false);
    int total = warmups + reps;
    s_replier_t replier = { rep, total, echo, 0 };
    void *payload = s_buffer (bytes, 1.0f);
    double *times = calloc ((size_t) reps, sizeof (double));
    if (!times)
        s_fail ("calloc", strerror (ENOMEM));
    pthread_t thread;
    int rc = pthread_create (&thread, NULL, s_replier_thread, &replier);
    if (rc != 0)
        s_fail ("pthread_create", strerror (rc));
    for (int i = 0; i < total; i++) {
        double start = s_now ();
        if (bytes <= 64)
            s_check_zmq (zmq_send (req, payload, bytes, 0), "raw round trip: zmq_send");
        else {
            zmq_msg_t msg;
            s_check_zmq (zmq_msg_init_data (&msg, payload, bytes, s_no_free, NULL),
                         "zmq_msg_init_data");
            if (zmq_msg_send (&msg, req, 0) < 0) {
                zmq_msg_close (&msg);
                s_fail ("raw round trip: zmq_msg_send", zmq_strerror (errno));
            }
        }
        zmq_msg_t reply;
        s_check_zmq (zmq_msg_init (&reply), "zmq_msg_init");
        if (zmq_msg_recv (&reply, req, 0) < 0) {
            zmq_msg_close (&reply);
            s_fail ("raw round trip: zmq_msg_recv", zmq_strerror (errno));
        }
        zmq_msg_close (&reply);
        if (i >= warmups)
            times [i - warmups] = s_now () - start;
    }
    rc = pthread_join (thread, NULL);
    if (rc != 0)
        s_fail ("pthread_join", strerror (rc));
    if (replier.error)
        s_fail ("raw replier", zmq_strerror (replier.error));
    s_raw_close (req, req_ctx);
    s_raw_close (rep, rep_ctx);
    free (payload);
    if (keep)
        memcpy (keep, times, (size_t) reps * sizeof (double));
    double median, mean;
    s_stats (times, reps, &median, &mean);
    free (times);
    fprintf (stderr, "bench_ps: %-5s %s: median %.1f us, mean %.1f us\n",
             bytes <= 64 ? "64B" : "", op, median * 1e6, mean * 1e6);
    if (!keep) {
        s_row_t *row = s_add_row (op, "-", "-", "-", size);
        row->median = median;
        row->mean = mean;
    }
}

//  ---------------------------------------------------------------------
//  ps-cluster

//  Start nservers servers (tasks ps:0 ...) with extra arguments (at most
//  a few), secured or with --insecure.
static void
s_start_servers (int nservers, const char *const *args, bool secured)
{
    assert (s_nservers == 0 && nservers <= S_MAX_SERVERS);
    const char *all [8];
    int n = 0;
    for (; args [n]; n++) {
        assert (n < 6);
        all [n] = args [n];
    }
    all [n++] = secured ? NULL : "--insecure";
    all [n] = NULL;
    for (int i = 0; i < nservers; i++) {
        if (harness_server_start (&s_servers [i], i, all) != 0)
            s_fail ("ps-server", "did not start (is --server right?)");
        s_nservers++;
    }
}

//  The control and data clients of the running servers (unsecured when
//  they are) with one variable of bytes, split into parts partitions per
//  server of equal row counts. A variable of fewer rows than partitions is
//  reshaped to as many rows as partitions, of proportionally shorter rows,
//  so that each server still holds its share.
static void
s_clients (harness_clients_t *clients, bool secured, size_t bytes, int parts_per_server,
           int *nparts_p)
{
    const char *endpoints [S_MAX_SERVERS];
    for (int i = 0; i < s_nservers; i++)
        endpoints [i] = s_servers [i].endpoint;
    ps_error_t err;
    s_check_ps (harness_clients_open (clients, endpoints, s_nservers, S_TIMEOUT_MS, !secured,
                                      &err), "ps_client_new", &err);
    int nparts = s_nservers * (parts_per_server ? parts_per_server : 1);
    int64_t floats = (int64_t) (bytes / sizeof (float));
    int64_t rows = floats / S_ROW;
    int64_t width = S_ROW;
    if (rows < nparts) {
        rows = nparts;
        width = floats / nparts;
    }
    if (rows % nparts || rows * width != floats)
        s_fail ("layout", "the size does not split into equal partitions");
    ps_shape_t shape;
    s_check_ps (ps_shape_set (&shape, (int64_t []) { rows, width }, 2, &err), "shape", &err);
    int64_t splits [S_MAX_PARTS + 1];
    int servers [S_MAX_PARTS];
    if (parts_per_server == 0) {
        //  The coordinator's default partitioner and placement.
        ps_partitioner_t partitioner;
        ps_partitioner_default (&partitioner, s_nservers);
        ps_placement_t *placement = ps_placement_new (&partitioner, &shape, 1, s_nservers, &err);
        s_check_ps (placement ? 0 : err.code, "ps_placement_new", &err);
        const ps_placed_var_t *var = ps_placement_var (placement, 0);
        nparts = var->nparts;
        if (nparts > S_MAX_PARTS)
            s_fail ("layout", "the default partitioner gives more partitions than the bench holds");
        memcpy (splits, var->splits, (size_t) (nparts + 1) * sizeof *splits);
        memcpy (servers, var->servers, (size_t) nparts * sizeof *servers);
        ps_placement_destroy (&placement);
    }
    else {
        assert (nparts <= S_MAX_PARTS);
        for (int k = 0; k <= nparts; k++)
            splits [k] = rows / nparts * k;
        //  Partitions go round-robin over the servers.
        for (int k = 0; k < nparts; k++)
            servers [k] = k % s_nservers;
    }
    ps_init_t init;
    ps_init_default (&init, PS_INIT_CONSTANT);
    init.value = 0.5;
    s_check_ps (harness_clients_add_variable (clients, "bench/w", &shape, &init, nparts, splits,
                                              servers, &err), "ps_client_add_variable", &err);
    s_check_ps (ps_client_create (clients->control, &err), "ps_client_create", &err);
    *nparts_p = nparts;
}

//  One request; a push that some partition took for a duplicate would
//  measure nothing, so that is a failure.
static void
s_ps_request (ps_client_t *client, s_op_t op, uint64_t *step, int nparts,
              const float *grad, float *values)
{
    const float *grads [] = { grad };
    float *outs [] = { values };
    ps_push_info_t info = { 0, 0 };
    ps_error_t err;
    int rc;
    if (op == S_PUSH)
        rc = ps_client_push (client, (*step)++, 0, grads, &info, &err);
    else
    if (op == S_PULL)
        rc = ps_client_pull (client, outs, &err);
    else
        rc = ps_client_push_pull (client, (*step)++, 0, grads, outs, &info, &err);
    s_check_ps (rc, s_op_names [op], &err);
    if (op != S_PULL && info.applied != (size_t) nparts) {
        char detail [128];
        snprintf (detail, sizeof detail, "%zu of %d partitions applied, %zu duplicates",
                  info.applied, nparts, info.duplicates);
        s_fail (s_op_names [op], detail);
    }
}

//  Time one cell: warm-ups, then reps requests timed one by one, with the
//  servers' and the client's counters taken around the timed part.
static void
s_ps_cell (ps_client_t *client, s_op_t op, const char *opt, const char *sec, int size,
           const s_size_t *sz, uint64_t *step, int nparts, const float *grad, float *values)
{
    for (int i = 0; i < sz->warmups; i++)
        s_ps_request (client, op, step, nparts, grad, values);
    double *times = calloc ((size_t) sz->reps, sizeof (double));
    if (!times)
        s_fail ("calloc", strerror (ENOMEM));
    s_usage_t srv_before = s_servers_usage ();
    s_usage_t cli_before = s_self_usage ();
    for (int i = 0; i < sz->reps; i++) {
        double start = s_now ();
        s_ps_request (client, op, step, nparts, grad, values);
        times [i] = s_now () - start;
    }
    s_usage_t cli_after = s_self_usage ();
    s_usage_t srv_after = s_servers_usage ();
    char servers [12];
    snprintf (servers, sizeof servers, "%d", s_nservers);
    s_row_t *row = s_add_row (s_op_names [op], servers, opt, sec, size);
    s_stats (times, sz->reps, &row->median, &row->mean);
    free (times);
    if (srv_before.cpu >= 0 && srv_after.cpu >= 0) {
        row->srv_cpu = (srv_after.cpu - srv_before.cpu) / sz->reps;
        row->srv_faults = (srv_after.faults - srv_before.faults) / sz->reps;
    }
    row->cli_cpu = (cli_after.cpu - cli_before.cpu) / sz->reps;
    row->cli_faults = (cli_after.faults - cli_before.faults) / sz->reps;
    fprintf (stderr, "bench_ps: %-5s %-9s %s server(s) %-4s %-5s: median %9.1f us, %6.2f GB/s"
             " (server %.2f ms cpu %.0f faults, client %.2f ms cpu %.0f faults per request)\n",
             sz->label, s_op_names [op], servers, opt, sec, row->median * 1e6,
             (double) sz->bytes / row->median * 1e-9, row->srv_cpu * 1e3, row->srv_faults,
             row->cli_cpu * 1e3, row->cli_faults);
}

//  Round trips to every server for S_SETTLE_S seconds before timing, so
//  that fresh processes have been scheduled, faulted in and woken often
//  enough for the first cell to be measured like the others.
static void
s_settle (ps_client_t *client)
{
    double until = s_now () + S_SETTLE_S;
    ps_error_t err;
    while (s_now () < until)
        for (int i = 0; i < s_nservers; i++)
            s_check_ps (ps_client_ping (client, i, &err), "ps_client_ping", &err);
}

//  The memory of the 1-server run at the largest size, after Adam.
typedef struct {
    bool taken;
    int size;
    long rss_kib, hwm_kib;
    long rest_kib;              //  once the server has been idle a while
} s_memory_t;

//  Start nservers servers, secured or not, then run every optimizer and
//  operation at size.
static void
s_ps_size (int nservers, int size, const s_size_t *sz, const char *const *server_args,
           bool secured, int parts_per_server, bool measure_memory, s_memory_t *memory)
{
    s_start_servers (nservers, server_args, secured);
    int nparts;
    harness_clients_t clients;
    s_clients (&clients, secured, sz->bytes, parts_per_server, &nparts);
    ps_client_t *client = clients.data;
    const char *sec = secured ? "curve" : "none";
    float *grad = s_buffer (sz->bytes, 1e-4f);
    float *values = s_buffer (sz->bytes, 0.0f);
    s_settle (client);
    uint64_t step = 0;
    static const struct { const char *name; ps_opt_kind_t kind; } opts [] = {
        { "sgd", PS_OPT_SGD }, { "adam", PS_OPT_ADAM },
    };
    for (size_t o = 0; o < sizeof opts / sizeof opts [0]; o++) {
        ps_opt_config_t opt;
        ps_opt_config_default (&opt, opts [o].kind);
        ps_error_t err;
        s_check_ps (ps_client_set_optimizer (clients.control, &opt, &err),
                    "ps_client_set_optimizer", &err);
        for (s_op_t op = S_PUSH; op <= S_PUSH_PULL; op++)
            s_ps_cell (client, op, opts [o].name, sec, size, sz, &step, nparts, grad, values);
    }
    if (measure_memory) {
        memory->taken = true;
        memory->size = size;
        memory->rss_kib = harness_status_kib (s_servers [0].pid, "VmRSS");
        memory->hwm_kib = harness_status_kib (s_servers [0].pid, "VmHWM");
        //  At rest: an idle server returns its free heap to the kernel
        //  half a second after its last request (ps_server.c).
        struct timespec pause = { 1, 0 };
        nanosleep (&pause, NULL);
        memory->rest_kib = harness_status_kib (s_servers [0].pid, "VmRSS");
    }
    harness_clients_close (&clients);
    free (grad);
    free (values);
    s_stop_servers ();
}

//  --memory: one server holding one 16 MB variable with Adam (48 MB of
//  params and slots) under a stream of pushes, push-pulls and pulls; its
//  peak RSS (VmHWM) before the variable, once it and its slots exist, and
//  after the stream, against the limit 1.1 x (params + slots) + 32 MiB.
#define S_MEMORY_BYTES     (16 * S_MIB)
#define S_MEMORY_REQUESTS  40

static int
s_memory_mode (const char *const *server_args, int parts)
{
    s_start_servers (1, server_args, false);
    pid_t pid = s_servers [0].pid;
    long empty = harness_status_kib (pid, "VmHWM");
    int nparts;
    harness_clients_t clients;
    s_clients (&clients, false, S_MEMORY_BYTES, parts, &nparts);
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    ps_error_t err;
    s_check_ps (ps_client_set_optimizer (clients.control, &opt, &err),
                "ps_client_set_optimizer", &err);
    long held = harness_status_kib (pid, "VmHWM");
    float *grad = s_buffer (S_MEMORY_BYTES, 1e-4f);
    float *values = s_buffer (S_MEMORY_BYTES, 0.0f);
    //  Each kind of request alone, then all three interleaved: the peak
    //  after each phase tells which one holds transient copies.
    uint64_t step = 0;
    long phase [S_PUSH_PULL + 1];
    for (s_op_t op = S_PUSH; op <= S_PUSH_PULL; op++) {
        for (int i = 0; i < S_MEMORY_REQUESTS; i++)
            s_ps_request (clients.data, op, &step, nparts, grad, values);
        phase [op] = harness_status_kib (pid, "VmHWM");
    }
    for (int i = 0; i < S_MEMORY_REQUESTS; i++)
        for (s_op_t op = S_PUSH; op <= S_PUSH_PULL; op++)
            s_ps_request (clients.data, op, &step, nparts, grad, values);
    long peak = harness_status_kib (pid, "VmHWM");
    long rss = harness_status_kib (pid, "VmRSS");
    harness_clients_close (&clients);
    free (grad);
    free (values);
    s_stop_servers ();
    if (empty < 0 || held < 0 || peak < 0 || rss < 0)
        s_fail ("/proc/PID/status", "no VmHWM or VmRSS");
    double need = 3.0 * (double) S_MEMORY_BYTES / (double) S_MIB;
    double limit = 1.1 * need + 32;
    printf ("bench_ps --memory: 1 server, one float32 variable of %zu MiB in %d partition(s), "
            "Adam (params + slots %.0f MiB), %d pushes, then pulls, then push-pulls, then %d of "
            "each interleaved\n",
            S_MEMORY_BYTES / S_MIB, nparts, need, S_MEMORY_REQUESTS, S_MEMORY_REQUESTS);
    printf ("%-34s | %9s | %s\n", "server", "MiB", "/ (params + slots)");
    printf ("%-34s | %9.1f |\n", "peak RSS started, no variable", (double) empty / 1024);
    printf ("%-34s | %9.1f | %.2f\n", "peak RSS with the variable, Adam", (double) held / 1024,
            (double) held / 1024 / need);
    for (s_op_t op = S_PUSH; op <= S_PUSH_PULL; op++) {
        char name [64];
        snprintf (name, sizeof name, "peak RSS after the %ss", s_op_names [op]);
        printf ("%-34s | %9.1f | %.2f\n", name, (double) phase [op] / 1024,
                (double) phase [op] / 1024 / need);
    }
    printf ("%-34s | %9.1f | %.2f\n", "peak RSS after all interleaved", (double) peak / 1024,
            (double) peak / 1024 / need);
    printf ("%-34s | %9.1f | %.2f\n", "RSS after the requests", (double) rss / 1024,
            (double) rss / 1024 / need);
    printf ("peak over the variable's own: %.1f MiB; limit 1.1 x %.0f + 32 = %.1f MiB: %s\n",
            (double) (peak - held) / 1024, need, limit,
            (double) peak / 1024 <= limit ? "met" : "NOT met");
    harness_benchrow ("bench_ps", "server peak RSS, 16 MB Adam, under requests (--memory)",
                      "params + slots", need, (double) peak / 1024, "MiB", HARNESS_LOWER_BETTER,
                      "ours <= 1.1 x anchor + 32 MiB",
                      harness_goal ((double) peak / 1024 <= limit));
    return EXIT_SUCCESS;
}

//  ---------------------------------------------------------------------
//  Report

static const s_row_t *
s_find (const char *op, const char *servers, const char *opt, const char *sec, int size)
{
    for (int i = 0; i < s_nrows; i++)
        if (strcmp (s_rows [i].op, op) == 0 && strcmp (s_rows [i].servers, servers) == 0
        &&  strcmp (s_rows [i].opt, opt) == 0 && strcmp (s_rows [i].sec, sec) == 0
        &&  s_rows [i].size == size)
            return &s_rows [i];
    return NULL;
}

static void
s_format_time (char *buf, size_t len, double seconds)
{
    if (seconds < 1e-3)
        snprintf (buf, len, "%.1f us", seconds * 1e6);
    else
        snprintf (buf, len, "%.2f ms", seconds * 1e3);
}

static void
s_format_counter (char *buf, size_t len, double value, double scale, const char *format)
{
    if (value < 0)
        snprintf (buf, len, "-");
    else
        snprintf (buf, len, format, value * scale);
}

static void
s_print_table (const s_size_t *sizes, int nsizes, const s_row_t *rtt)
{
    printf ("\n%-10s %-7s %-5s %-5s %-5s %10s %10s %7s %7s %7s | %9s %9s %9s %9s\n",
            "op", "servers", "opt", "curve", "size", "median", "mean", "GB/s", "vs raw",
            "vs none", "srv ms", "srv flt", "cli ms", "cli flt");
    for (int size = 0; size < nsizes; size++) {
        const s_row_t *raw = s_find ("raw-zmq", "-", "-", "-", size);
        for (int i = 0; i < s_nrows; i++) {
            const s_row_t *row = &s_rows [i];
            if (row->size != size)
                continue;
            char median [24], mean [24], ratio [16], rate [16], secured [16] = "-";
            char srv_cpu [16], srv_flt [16], cli_cpu [16], cli_flt [16];
            //  A secured cell's throughput as a share of the unsecured
            //  one's.
            const s_row_t *plain = strcmp (row->sec, "curve") == 0
                                 ? s_find (row->op, row->servers, row->opt, "none", size) : NULL;
            if (plain)
                snprintf (secured, sizeof secured, "%.0f%%", 100 * plain->median / row->median);
            bool rtt64 = row == rtt;
            s_format_time (median, sizeof median, row->median);
            s_format_time (mean, sizeof mean, row->mean);
            if (rtt64)
                snprintf (rate, sizeof rate, "-");
            else
                snprintf (rate, sizeof rate, "%.2f",
                          (double) sizes [size].bytes / row->median * 1e-9);
            if (rtt64 || row == raw)
                snprintf (ratio, sizeof ratio, "-");
            else
            if (size == 0)
                snprintf (ratio, sizeof ratio, "%.2fx", row->median / rtt->median);
            else
                snprintf (ratio, sizeof ratio, "%.0f%%", 100 * raw->median / row->median);
            s_format_counter (srv_cpu, sizeof srv_cpu, row->srv_cpu, 1e3, "%.2f");
            s_format_counter (srv_flt, sizeof srv_flt, row->srv_faults, 1, "%.0f");
            s_format_counter (cli_cpu, sizeof cli_cpu, row->cli_cpu, 1e3, "%.2f");
            s_format_counter (cli_flt, sizeof cli_flt, row->cli_faults, 1, "%.0f");
            printf ("%-10s %-7s %-5s %-5s %-5s %10s %10s %7s %7s %7s | %9s %9s %9s %9s\n",
                    row->op, row->servers, row->opt, row->sec, rtt64 ? "64B" : sizes [size].label,
                    median, mean, rate, ratio, secured, srv_cpu, srv_flt, cli_cpu, cli_flt);
        }
        printf ("\n");
    }
    printf ("GB/s = payload bytes / median (push-pull counts the payload once; 1 GB = 1e9 B).\n"
            "vs raw: at %s, median / raw 64-byte REQ/REP median round trip (lower is better);\n"
            "        above it, GB/s as a share of raw-zmq one-way GB/s of the same size.\n"
            "raw-zmq: PUSH/PULL stream, zero-copy send, zmq_msg_recv; median over %d batches of\n"
            "         time per message (mean: whole stream).\n"
            "vs none: a CurveZMQ cell's GB/s as a share of the same cell with --insecure servers\n"
            "         and unsecured clients, run just before it.\n"
            "raw-rt:  REQ/REP, payload request zero-copy, 64-byte reply (ceiling of a push).\n"
            "raw-rt2: REQ/REP, payload both ways, reply is the request echoed zero-copy\n"
            "         (ceiling of a push-pull).\n"
            "srv ms / srv flt: servers' CPU ms and minor page faults per request, all threads;\n"
            "cli ms / cli flt: the same for this process (client and its ZeroMQ I/O thread).\n",
            sizes [0].label, S_BATCHES);
}

static void
s_target (const char *name, bool known, bool met, const char *detail)
{
    printf ("  %-58s %-8s %s\n", name, known ? (met ? "met" : "NOT met") : "n/a", detail);
}

static void
s_print_summary (const s_size_t *sizes, int nsizes, const s_row_t *rtt, const s_memory_t *memory)
{
    printf ("\nTargets (information only; timings vary by +-30%% between runs; set against the\n"
            "unsecured cells, like the raw ZeroMQ they are compared with):\n");
    char detail [160];
    int size16 = -1;
    for (int i = 0; i < nsizes; i++)
        if (sizes [i].bytes == 16 * S_MIB)
            size16 = i;
    const s_row_t *raw = size16 >= 0 ? s_find ("raw-zmq", "-", "-", "-", size16) : NULL;
    const s_row_t *push = size16 >= 0 ? s_find ("push", "1", "sgd", "none", size16) : NULL;
    const s_row_t *pushpull = size16 >= 0 ? s_find ("push-pull", "1", "sgd", "none", size16)
                                          : NULL;
    double share = raw && push ? raw->median / push->median : 0;
    snprintf (detail, sizeof detail, "%.0f%% of raw one-way", 100 * share);
    s_target ("push 16MB, SGD, 1 server >= 80% of raw ZeroMQ", raw && push, share >= 0.8, detail);
    //  The same goals as BENCHROW lines, in GB/s (payload / median).
    double gb16 = 16.0 * S_MIB / 1e9;
    if (raw && push)
        harness_benchrow ("bench_ps", "push 16 MB, SGD, 1 server", "raw ZeroMQ one-way",
                          gb16 / raw->median, gb16 / push->median, "GB/s", HARNESS_HIGHER_BETTER,
                          "ratio >= 0.80", harness_goal (share >= 0.8));
    share = raw && pushpull ? raw->median / pushpull->median : 0;
    snprintf (detail, sizeof detail, "%.0f%% of raw one-way", 100 * share);
    s_target ("push-pull 16MB, SGD, 1 server (payload once) >= 60% of raw", raw && pushpull,
              share >= 0.60, detail);
    if (raw && pushpull)
        harness_benchrow ("bench_ps", "push-pull 16 MB, SGD, 1 server (payload once)",
                          "raw ZeroMQ one-way", gb16 / raw->median, gb16 / pushpull->median,
                          "GB/s", HARNESS_HIGHER_BETTER, "ratio >= 0.60",
                          harness_goal (share >= 0.60));
    const s_row_t *curve = size16 >= 0 ? s_find ("push", "1", "sgd", "curve", size16) : NULL;
    if (push && curve)
        printf ("  (information: CurveZMQ push 16MB, SGD, 1 server at %.0f%% of the unsecured "
                "GB/s)\n", 100 * push->median / curve->median);
    const s_row_t *small = s_find ("push-pull", "1", "sgd", "none", 0);
    double ratio = small ? small->median / rtt->median : 0;
    snprintf (detail, sizeof detail, "%.1f us vs %.1f us = %.2fx", small ? small->median * 1e6 : 0,
              rtt->median * 1e6, ratio);
    s_target ("push-pull 4KB median <= 1.2x raw 64-byte round trip", small != NULL,
              ratio <= 1.2, detail);
    if (small)
        harness_benchrow ("bench_ps", "push-pull 4 KB, SGD, 1 server, median",
                          "raw 64-byte REQ/REP round trip", rtt->median * 1e6,
                          small->median * 1e6, "us", HARNESS_LOWER_BETTER,
                          "ours <= 1.2 x anchor", harness_goal (ratio <= 1.2));
    if (memory->taken) {
        double need = 3.0 * (double) sizes [memory->size].bytes / (double) S_MIB;
        double limit = 1.1 * need + 32;
        double rss = (double) memory->rss_kib / 1024, hwm = (double) memory->hwm_kib / 1024;
        double rest = (double) memory->rest_kib / 1024;
        snprintf (detail, sizeof detail, "RSS %.1f MiB at rest; limit %.1f MiB", rest, limit);
        char name [96];
        snprintf (name, sizeof name, "secured server RSS after Adam %s <= 1.1 x %.0f MiB + 32 MiB",
                  sizes [memory->size].label, need);
        s_target (name, memory->rest_kib >= 0, rest <= limit, detail);
        snprintf (name, sizeof name, "secured server RSS at rest after Adam %s",
                  sizes [memory->size].label);
        if (memory->rest_kib >= 0)
            harness_benchrow ("bench_ps", name, "params + slots", need, rest, "MiB",
                              HARNESS_LOWER_BETTER,
                              "ours <= 1.1 x anchor + 32 MiB", harness_goal (rest <= limit));
        snprintf (detail, sizeof detail, "RSS %.1f MiB right after the last request", rss);
        s_target ("  (the same limit, before the idle release)", memory->rss_kib >= 0,
                  rss <= limit, detail);
        snprintf (detail, sizeof detail, "HWM %.1f MiB = %.2fx params+slots", hwm, hwm / need);
        s_target ("  (the same limit applied to the peak, for information)", memory->hwm_kib >= 0,
                  hwm <= limit, detail);
    }
}

//  ---------------------------------------------------------------------

static void
s_usage (void)
{
    fprintf (stderr,
        "usage: bench_ps [--quick | --memory] [--server PATH] [--threads N]\n"
        "                [--parts K|default]\n"
        "  --quick        fewer repetitions and no 64 MB, for a smoke run\n"
        "  --memory       only a server's peak RSS under requests on 16 MB with Adam\n"
        "  --server PATH  ps-server binary (default: $PS_SERVER, the meson-built one,\n"
        "                 or build/ps/ps-server)\n"
        "  --threads N    pass --threads N to the servers (default: theirs)\n"
        "  --parts K      K partitions per server of equal rows, or default: the\n"
        "                 coordinator's default partitioner and placement (the default)\n");
}

int
main (int argc, char *argv [])
{
    //  The client side stands for a worker, which tunes its heap the same
    //  way as the server (see ps_heap.h).
    ps_error_t heap_err;
    if (ps_heap_tune (&heap_err))
        fprintf (stderr, "bench_ps: %s\n", heap_err.msg);
    bool quick = false;
    bool memory_only = false;
    const char *server = NULL;
    const char *threads = NULL;
    int parts = 0;                  //  0: the default partitioner
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv [i], "--quick") == 0)
            quick = true;
        else
        if (strcmp (argv [i], "--memory") == 0)
            memory_only = true;
        else
        if (strcmp (argv [i], "--server") == 0 && i + 1 < argc)
            server = argv [++i];
        else
        if (strcmp (argv [i], "--threads") == 0 && i + 1 < argc)
            threads = argv [++i];
        else
        if (strcmp (argv [i], "--parts") == 0 && i + 1 < argc
        &&  strcmp (argv [i + 1], "default") == 0) {
            parts = 0;
            i++;
        }
        else
        if (strcmp (argv [i], "--parts") == 0 && i + 1 < argc) {
            parts = atoi (argv [++i]);
            if (parts < 1 || parts > 16) {
                s_usage ();
                return EXIT_FAILURE;
            }
        }
        else {
            s_usage ();
            return EXIT_FAILURE;
        }
    }
    if (!server)
        server = getenv ("PS_SERVER");
#ifdef BENCH_PS_SERVER
    if (!server && access (BENCH_PS_SERVER, X_OK) == 0)
        server = BENCH_PS_SERVER;
#endif
    if (!server)
        server = "build/ps/ps-server";
    if (access (server, X_OK) != 0) {
        fprintf (stderr, "bench_ps: cannot run %s: %s\n", server, strerror (errno));
        return EXIT_FAILURE;
    }
    //  The harness starts whatever PS_SERVER names.
    if (setenv ("PS_SERVER", server, 1) != 0) {
        perror ("setenv");
        return EXIT_FAILURE;
    }
    const char *server_args [] = { threads ? "--threads" : NULL, threads, NULL };
    if (memory_only)
        return s_memory_mode (server_args, parts);

    //  label, bytes, reps, warm-ups, raw stream messages
    s_size_t sizes [] = {
        { "4KB",  4096,         1000, 50, 50000 },
        { "1MB",  S_MIB,        200,  5,  500 },
        { "16MB", 16 * S_MIB,   60,   2,  60 },
        { "64MB", 64 * S_MIB,   20,   2,  20 },
    };
    int nsizes = 4;
    if (quick) {
        sizes [0].reps = 100;
        sizes [0].stream = 5000;
        sizes [1].reps = 20;
        sizes [1].stream = 50;
        sizes [2].reps = 5;
        sizes [2].stream = 10;
        sizes [2].warmups = 1;
        nsizes = 3;
    }
    fprintf (stderr, "bench_ps: server %s%s%s, %d partition(s) per server%s\n", server,
             threads ? " --threads " : "", threads ? threads : "", parts,
             quick ? ", quick run" : "");
    double start = s_now ();
    s_memory_t memory = { false, 0, -1, -1, -1 };
    //  The 64-byte round trip depends on whether the scheduler has the
    //  threads on one CPU or on two (about 2x on these machines), which can
    //  change while the benchmark runs, so it is measured in S_RTT_BLOCKS
    //  blocks around the 4 KB cells and the samples are pooled.
    s_row_t *rtt = s_add_row ("raw-rtt64", "-", "-", "-", 0);
    int rtt_reps = 2 * sizes [0].reps;
    double *rtt_samples = calloc ((size_t) (S_RTT_BLOCKS * rtt_reps), sizeof (double));
    double rtt_blocks [S_RTT_BLOCKS];
    if (!rtt_samples)
        s_fail ("calloc", strerror (ENOMEM));
    int block = 0;
    for (int size = 0; size < nsizes; size++) {
        const s_size_t *sz = &sizes [size];
        if (size == 0)
            s_raw_roundtrip ("raw-rtt64", 0, 64, true, rtt_reps, sz->warmups,
                             rtt_samples + rtt_reps * block++);
        s_raw_stream (size, sz, sz->warmups > 2 ? sz->warmups * 50 : 2);
        s_raw_roundtrip ("raw-rt", size, sz->bytes, false, sz->reps, sz->warmups, NULL);
        s_raw_roundtrip ("raw-rt2", size, sz->bytes, true, sz->reps, sz->warmups, NULL);
        for (int nservers = 1; nservers <= S_MAX_SERVERS; nservers++) {
            for (int secured = 0; secured <= 1; secured++)
                s_ps_size (nservers, size, sz, server_args, secured, parts,
                           secured && nservers == 1 && size == nsizes - 1, &memory);
            if (size == 0)
                s_raw_roundtrip ("raw-rtt64", 0, 64, true, rtt_reps, sz->warmups,
                                 rtt_samples + rtt_reps * block++);
        }
    }
    assert (block == S_RTT_BLOCKS);
    for (int b = 0; b < S_RTT_BLOCKS; b++) {
        double mean;
        s_stats (rtt_samples + rtt_reps * b, rtt_reps, &rtt_blocks [b], &mean);
    }
    s_stats (rtt_samples, S_RTT_BLOCKS * rtt_reps, &rtt->median, &rtt->mean);
    free (rtt_samples);
    fprintf (stderr, "bench_ps: finished in %.0f s\n", s_now () - start);
    printf ("bench_ps: ps-cluster vs raw ZeroMQ over tcp://127.0.0.1, %ld CPUs online%s\n",
            sysconf (_SC_NPROCESSORS_ONLN), quick ? " (quick run)" : "");
    if (parts)
        printf ("variable: one float32 [rows, 1024], %d partition(s) per server of equal rows;"
                " fewer rows than partitions\n(4KB) are reshaped to one shorter row per "
                "partition\n", parts);
    else
        printf ("variable: one float32 [rows, 1024] (4KB: [servers, 1024 / servers]), split and"
                " placed by the\ncoordinator's default partitioner (min_size, 256 KiB, chunks of"
                " %lld KiB)\n", (long long) (PS_PARTITIONER_CHUNK_BYTES >> 10));
    printf ("raw 64-byte round trip, median of each block: %.1f (before) %.1f (after 1 server)"
            " %.1f us (after 2 servers)\n", rtt_blocks [0] * 1e6, rtt_blocks [1] * 1e6,
            rtt_blocks [2] * 1e6);
    s_print_table (sizes, nsizes, rtt);
    s_print_summary (sizes, nsizes, rtt, &memory);
    return EXIT_SUCCESS;
}
