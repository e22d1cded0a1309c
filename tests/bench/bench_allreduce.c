//  Ring all-reduce bus bandwidth between processes on this machine, over
//  TCP and IPC loopback and "same-host" (tcp endpoints given as endpoint
//  sets, ps_host.h, by which members of one host find each other and sum
//  in shared memory, ps_ring_shm.h, as a cluster's do; PS_SAME_HOST=ipc
//  in the environment keeps them on ipc://), next to the raw throughput of ZeroMQ PUSH/PULL
//  between two processes measured in the same run, so that the ratio
//  says how much of what the transport moves the ring gets.
//
//  For each transport and process count the processes form a ring
//  (worker/ps_ring.h) and run all-reduces of 1, 16 and 64 MiB: warm-up
//  rounds, then timed ones, each after a one-float all-reduce that lines
//  the members up. An iteration's time is the slowest member's; the table
//  gives the median. algbw = bytes / time, and busbw = algbw * 2 (n - 1)
//  / n (NCCL's definition: what each member's link carries per second).
//  Each ring runs twice, secured with CurveZMQ as a cluster's is (member i
//  is worker:i of keys the bench makes) and without (--insecure), and the
//  secured row gives its time as a ratio of the unsecured one's.
//
//  The raw rows send messages of the same sizes (and of the ring's chunk
//  size) from one process to another: zero-copy sends from one buffer,
//  zmq_msg_recv at the other end, timed at the receiver in blocks of at
//  least 32 MiB; the median block gives the time per message. The raw
//  sockets get what the ring's get: two ZeroMQ I/O threads, and a
//  loopback TCP connection switched from BBR to CUBIC (or Reno), as
//  ps_ring_transport.c explains; --io-threads and --system-cc undo that.
//
//  The gloo rows are PyTorch's all-reduce (torch.distributed, backend
//  gloo, 2 processes over loopback tcp) on the same sizes, timed by
//  tests/bench/torch_allreduce.py the same way (the same fill, a
//  one-float all-reduce before each, the slower member's time, the
//  median). The machine's load drifts over the minutes a run takes, so
//  gloo is timed in alternation with the ring: three runs of a third of
//  the iterations each, one right after each transport's 2-process
//  unsecured rows (tcp, gloo, same-host, gloo, ipc, gloo), pooled into
//  one median. Each 2-process row then gives gloo's time over its own
//  ("vs gloo": how many times faster than gloo it is), and a goal line
//  states the issue's: same-host, 16 MiB, at least 3x gloo. Beside them
//  are the shared-memory bound's rows, what two processes that sum
//  vectors lying in one mapping reach on this machine (see "The
//  shared-memory bound"), against which the same-host ring's shared
//  memory, which must copy the callers' vectors in and out, is judged.
//
//  main tunes the heap with ps_heap_tune first, as ps-worker does, and
//  the children inherit the tuning through fork, so the allocator behaves
//  as the worker's does. The parent never makes a ZeroMQ context, so each
//  child starts ZeroMQ and CZMQ's authenticator afresh.
//
//  Usage: bench_allreduce [--quick] [--chunk BYTES] [--shm-bytes BYTES] [--io-threads N]
//                         [--system-cc] [--no-peer] [--python PATH] [--check]
//      --quick        fewer iterations
//      --check        the unit test bench_allreduce_check (s_check): no
//                     timings, small vectors, the rows' sums and lines
//      --chunk        the ring's chunk size (default: the ring's own)
//      --shm-bytes    each member's slot in the shared memory of the
//                     same-host rings (default: the ring's own, 4 MiB)
//      --io-threads   ZeroMQ I/O threads of the raw rows (default 2, as
//                     the ring uses)
//      --system-cc    raw rows keep the system's TCP congestion control
//      --no-peer      no gloo rows
//      --python       the Python that runs the gloo peer (/usr/bin/python3,
//                     with Debian's python3-torch)
//  It never passes or fails on a time: it exits 0 unless something broke.

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include <jansson.h>

#include "harness.h"
#include "harness_benchrow.h"
#include "ps_clock.h"
#include "ps_floats.h"
#include "ps_heap.h"
#include "ps_log.h"
#include "ps_ring.h"

#define S_MIB               (1024 * 1024)
#define S_MAX_PROCS         4
#define S_MAX_ITERS         64
#define S_GLOO_RUNS         3       //  one after each transport's 2-process rows
#define S_MAX_SIZES         8
#define S_LINE_MAX          4096

//  How long the parent waits for a line from a child before it declares
//  the run broken.
#define S_CHILD_WAIT_MS     60000
//  How long one run of the gloo peer may take (it starts three Pythons
//  that import torch, then all-reduces up to 64 MiB some twenty times).
#define S_PEER_TIMEOUT_MS   (5 * 60 * 1000)

//  The gloo peer, as the build knows it.
#ifndef BENCH_TORCH_SCRIPT
#   define BENCH_TORCH_SCRIPT "tests/bench/torch_allreduce.py"
#endif

//  Exit codes of the children.
#define S_EXIT_PIPE         10      //  talking to the parent failed
#define S_EXIT_RING         11      //  making or forming the ring failed
#define S_EXIT_COLLECTIVE   12      //  an all-reduce failed
#define S_EXIT_WRONG        13      //  an all-reduce gave a wrong sum
#define S_EXIT_ZMQ          14      //  the raw ZeroMQ rows failed
#define S_EXIT_MEMORY       15

typedef struct {
    bool quick;
    bool check;                 //  the unit test: see s_check
    size_t chunk;               //  0: the ring's default
    size_t shm_bytes;           //  the same-host rings' shared-memory slot (0: the default)
    int io_threads;             //  of the raw rows
    bool system_cc;             //  raw rows keep the system's congestion control
    bool peer;                  //  time gloo too
    const char *python;         //  that runs the gloo peer
} s_options_t;

typedef struct {
    int n;
    pid_t pid [S_MAX_PROCS];
    int to [S_MAX_PROCS];       //  parent writes, child reads
    int from [S_MAX_PROCS];     //  child writes, parent reads
} s_procs_t;

//  A child's end of its pipes.
typedef struct {
    int index;
    int in, out;
} s_child_t;

//  The sizes of the rows; --check makes them small.
#define S_SIZES ((size_t) 3)
static size_t s_sizes [S_SIZES] = { 1 * S_MIB, 16 * S_MIB, 64 * S_MIB };

//  ---------------------------------------------------------------------
//  Processes

//  Close a descriptor of the bench's own; a failure is reported, it
//  changes no result.
static void
s_close_fd (int fd)
{
    if (close (fd) != 0)
        fprintf (stderr, "bench_allreduce: close (%d): %s\n", fd, strerror (errno));
}

//  Close a ZeroMQ socket and terminate its context, reporting failures.
static void
s_zmq_end (void *socket, void *ctx)
{
    if (socket && zmq_close (socket) != 0)
        fprintf (stderr, "bench_allreduce: zmq_close: %s\n", zmq_strerror (errno));
    while (ctx && zmq_ctx_term (ctx) != 0) {
        if (errno != EINTR) {
            fprintf (stderr, "bench_allreduce: zmq_ctx_term: %s\n", zmq_strerror (errno));
            break;
        }
    }
}

//  Fork n children, each running fn (child, arg) and exiting with what it
//  returns. Returns 0 or -1.
static int
s_spawn (s_procs_t *procs, int n, int (*fn) (s_child_t *, void *), void *arg)
{
    memset (procs, 0, sizeof *procs);
    procs->n = 0;
    fflush (stdout);
    fflush (stderr);
    for (int i = 0; i < n; i++) {
        int down [2], up [2];
        if (pipe (down) != 0 || pipe (up) != 0) {
            perror ("pipe");
            return -1;
        }
        pid_t pid = fork ();
        if (pid < 0) {
            perror ("fork");
            return -1;
        }
        if (pid == 0) {
            //  A child never outlives the bench.
            if (prctl (PR_SET_PDEATHSIG, SIGKILL) != 0)
                _exit (S_EXIT_PIPE);
            for (int j = 0; j < procs->n; j++) {
                s_close_fd (procs->to [j]);
                s_close_fd (procs->from [j]);
            }
            s_close_fd (down [1]);
            s_close_fd (up [0]);
            s_child_t child = { .index = i, .in = down [0], .out = up [1] };
            _exit (fn (&child, arg));
        }
        s_close_fd (down [0]);
        s_close_fd (up [1]);
        procs->pid [i] = pid;
        procs->to [i] = down [1];
        procs->from [i] = up [0];
        procs->n++;
    }
    return 0;
}

//  Wait for every child. Returns 0 when all exited with 0.
static int
s_reap (s_procs_t *procs, const char *what)
{
    int failed = 0;
    for (int i = 0; i < procs->n; i++) {
        s_close_fd (procs->to [i]);
        s_close_fd (procs->from [i]);
        int status = 0;
        pid_t got;
        while ((got = waitpid (procs->pid [i], &status, 0)) < 0 && errno == EINTR)
            ;
        if (got < 0) {
            perror ("waitpid");
            failed = -1;
        }
        else
        if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
            fprintf (stderr, "bench_allreduce: %s: process %d %s %d\n", what, i,
                     WIFEXITED (status) ? "exited with" : "was killed by signal",
                     WIFEXITED (status) ? WEXITSTATUS (status) : WTERMSIG (status));
            failed = -1;
        }
    }
    procs->n = 0;
    return failed;
}

static void
s_kill_all (s_procs_t *procs)
{
    for (int i = 0; i < procs->n; i++)
        if (kill (procs->pid [i], SIGKILL) != 0 && errno != ESRCH)
            perror ("kill");
}

static void
s_size_name (size_t bytes, char *buf, size_t size)
{
    if (bytes >= S_MIB && bytes % S_MIB == 0)
        snprintf (buf, size, "%zu MiB", bytes / S_MIB);
    else
    if (bytes >= 1024 && bytes % 1024 == 0)
        snprintf (buf, size, "%zu KiB", bytes / 1024);
    else
        snprintf (buf, size, "%zu B", bytes);
}

//  ---------------------------------------------------------------------
//  The ring rows

typedef struct {
    const s_options_t *options;
    const char *transport;      //  "tcp", "ipc" or "same-host"
    const char *dir;            //  for IPC endpoints
    int n;
    int warmup, iters;
    bool secured;               //  member i is worker:i, with CURVE
} s_ring_run_t;

static int
s_ring_child (s_child_t *child, void *arg)
{
    s_ring_run_t *run = arg;
    ps_error_t err;
    char bind [256];
    if (strcmp (run->transport, "ipc") == 0)
        snprintf (bind, sizeof bind, "ipc://%s/ring-%d", run->dir, child->index);
    else
        snprintf (bind, sizeof bind, "tcp://127.0.0.1:*");
    //  "same-host" binds tcp and hands out the ring's endpoint set, as a
    //  cluster's worker does, so that the members pick ipc:// themselves.
    bool set = strcmp (run->transport, "same-host") == 0;
    char task [32];
    snprintf (task, sizeof task, "worker:%d", child->index);
    ps_ring_config_t config = { .bind = bind, .chunk_bytes = run->options->chunk,
                                .shm_bytes = run->options->shm_bytes,
                                .timeout_ms = 20000,
                                .curve = run->secured ? harness_curve (task) : NULL };
    ps_ring_t *ring = ps_ring_new (&config, &err);
    if (!ring) {
        fprintf (stderr, "bench_allreduce: %s\n", err.msg);
        return S_EXIT_RING;
    }
    char line [S_LINE_MAX];
    if (harness_write_line (child->out, "%s", set ? ps_ring_advert (ring) : ps_ring_endpoint (ring))
    ||  harness_read_line (child->in, line, sizeof line, S_CHILD_WAIT_MS))
        return S_EXIT_PIPE;
    //  The parent sends the members' endpoints, separated by spaces.
    //  Member i is worker:i.
    const char *members [S_MAX_PROCS];
    int tasks [S_MAX_PROCS];
    int n = 0;
    for (char *save = NULL, *token = strtok_r (line, " ", &save); token && n < S_MAX_PROCS;
         token = strtok_r (NULL, " ", &save)) {
        tasks [n] = n;
        members [n++] = token;
    }
    if (n != run->n
    ||  ps_ring_form (ring, 1, child->index, n, members, run->secured ? tasks : NULL, &err)) {
        fprintf (stderr, "bench_allreduce: forming the ring: %s\n", n == run->n ? err.msg : "");
        return S_EXIT_RING;
    }
    size_t largest = s_sizes [S_SIZES - 1];
    float *data = aligned_alloc (64, largest);
    if (!data)
        return S_EXIT_MEMORY;
    for (size_t s = 0; s < S_SIZES; s++) {
        size_t count = s_sizes [s] / sizeof (float);
        double times [S_MAX_ITERS];
        for (int it = 0; it < run->warmup + run->iters; it++) {
            //  Small integers, refilled every time, so the sum is exact
            //  and can be checked; filling also leaves the vector in the
            //  cache state a freshly computed gradient would be in.
            for (size_t i = 0; i < count; i++)
                data [i] = (float) (child->index + 1 + (int) (i & 7));
            float one = 1;
            if (ps_ring_allreduce (ring, &one, 1, &err)) {
                fprintf (stderr, "bench_allreduce: barrier: %s\n", err.msg);
                return S_EXIT_COLLECTIVE;
            }
            double start = ps_clock_ms ();
            if (ps_ring_allreduce (ring, data, count, &err)) {
                fprintf (stderr, "bench_allreduce: %s\n", err.msg);
                return S_EXIT_COLLECTIVE;
            }
            if (it >= run->warmup)
                times [it - run->warmup] = ps_clock_ms () - start;
        }
        //  The last iteration's sum: n (n + 1) / 2 + n (i & 7).
        for (size_t i = 0; i < count; i++) {
            float expected = (float) (n * (n + 1) / 2 + n * (int) (i & 7));
            if (data [i] != expected) {
                fprintf (stderr, "bench_allreduce: member %d: element %zu is %g, expected %g\n",
                         child->index, i, data [i], expected);
                return S_EXIT_WRONG;
            }
        }
        //  One line per size: the iteration times in ms.
        char out [S_LINE_MAX];
        int used = 0;
        for (int it = 0; it < run->iters; it++)
            used += snprintf (out + used, sizeof out - (size_t) used, "%s%.4f", it ? " " : "",
                              times [it]);
        if (harness_write_line (child->out, "%s", out))
            return S_EXIT_PIPE;
    }
    free (data);
    ps_ring_destroy (&ring);
    return 0;
}

//  Run the ring rows of one transport and process count, secured or not,
//  printing them. medians [s] is the median time of size s of the
//  unsecured ring: filled in unsecured, compared with secured; own [s] is
//  this run's either way. Returns 0 or -1.
static int
s_ring_rows (const s_options_t *options, const char *transport, const char *dir, int n,
             bool secured, double *medians, double *own)
{
    s_ring_run_t run = {
        .options = options, .transport = transport, .dir = dir, .n = n,
        .warmup = options->quick ? 2 : 5, .iters = options->quick ? 5 : 41, .secured = secured
    };
    s_procs_t procs;
    if (s_spawn (&procs, n, s_ring_child, &run)) {
        s_kill_all (&procs);
        s_reap (&procs, "ring");
        return -1;
    }
    char members [S_LINE_MAX] = "";
    char line [S_LINE_MAX];
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        if (harness_read_line (procs.from [i], line, sizeof line, S_CHILD_WAIT_MS))
            rc = -1;
        else {
            strncat (members, i ? " " : "", sizeof members - strlen (members) - 1);
            strncat (members, line, sizeof members - strlen (members) - 1);
        }
    }
    for (int i = 0; i < n && rc == 0; i++)
        rc = harness_write_line (procs.to [i], "%s", members);
    for (size_t s = 0; s < S_SIZES && rc == 0; s++) {
        double slowest [S_MAX_ITERS] = { 0 };
        for (int i = 0; i < n && rc == 0; i++) {
            if (harness_read_line (procs.from [i], line, sizeof line, S_CHILD_WAIT_MS)) {
                rc = -1;
                break;
            }
            char *cursor = line;
            for (int it = 0; it < run.iters; it++) {
                double ms = strtod (cursor, &cursor);
                if (ms > slowest [it])
                    slowest [it] = ms;
            }
        }
        if (rc)
            break;
        double ms = harness_median (slowest, run.iters);
        own [s] = ms;
        double algbw = (double) s_sizes [s] / (ms * 1e6);
        double busbw = algbw * 2.0 * (n - 1) / n;
        char size_name [32], ratio [16] = "-";
        s_size_name (s_sizes [s], size_name, sizeof size_name);
        if (secured)
            snprintf (ratio, sizeof ratio, "%.2fx", ms / medians [s]);
        else
            medians [s] = ms;
        printf ("%-9s  %-5d  %-6s  %-8s  %10.3f  %10.2f  %10.2f  %8s\n", transport, n,
                secured ? "curve" : "none", size_name, ms, algbw, busbw, ratio);
        fflush (stdout);
    }
    if (rc)
        s_kill_all (&procs);
    if (s_reap (&procs, "ring"))
        rc = -1;
    return rc;
}

//  ---------------------------------------------------------------------
//  The raw ZeroMQ rows

typedef struct {
    const s_options_t *options;
    const char *transport;
    const char *dir;
    const size_t *sizes;
    int nsizes;
    int blocks;
} s_raw_run_t;

//  Messages per timed block: at least 32 MiB, and at least 4 messages.
static int
s_block_messages (size_t size)
{
    size_t messages = 32 * (size_t) S_MIB / size;
    return messages < 4 ? 4 : (int) messages;
}

static void *
s_raw_context (const s_options_t *options)
{
    void *ctx = zmq_ctx_new ();
    if (ctx && zmq_ctx_set (ctx, ZMQ_IO_THREADS, options->io_threads) != 0) {
        s_zmq_end (NULL, ctx);
        return NULL;
    }
    return ctx;
}

//  Child 0 receives: binds a PULL, tells the parent its endpoint, and
//  reports the median block time per message for each size.
static int
s_raw_receiver (s_raw_run_t *run, s_child_t *child)
{
    void *ctx = s_raw_context (run->options);
    void *pull = ctx ? zmq_socket (ctx, ZMQ_PULL) : NULL;
    int hwm = 100000, linger = 0;
    char bind [256];
    if (strcmp (run->transport, "ipc") == 0)
        snprintf (bind, sizeof bind, "ipc://%s/raw", run->dir);
    else
        snprintf (bind, sizeof bind, "tcp://127.0.0.1:*");
    char endpoint [256];
    size_t size = sizeof endpoint;
    if (!pull
    ||  zmq_setsockopt (pull, ZMQ_RCVHWM, &hwm, sizeof hwm) != 0
    ||  zmq_setsockopt (pull, ZMQ_LINGER, &linger, sizeof linger) != 0
    ||  zmq_bind (pull, bind) != 0
    ||  zmq_getsockopt (pull, ZMQ_LAST_ENDPOINT, endpoint, &size) != 0) {
        fprintf (stderr, "bench_allreduce: raw receiver: %s\n", zmq_strerror (errno));
        return S_EXIT_ZMQ;
    }
    if (harness_write_line (child->out, "%s", endpoint))
        return S_EXIT_PIPE;
    for (int s = 0; s < run->nsizes; s++) {
        int per_block = s_block_messages (run->sizes [s]);
        double times [S_MAX_ITERS];
        double start = 0;
        //  The first block is a warm-up whose end starts the clock.
        for (int b = 0; b <= run->blocks; b++) {
            for (int m = 0; m < per_block; m++) {
                zmq_msg_t msg;
                if (zmq_msg_init (&msg) != 0
                ||  zmq_msg_recv (&msg, pull, 0) < 0
                ||  zmq_msg_size (&msg) != run->sizes [s]
                ||  zmq_msg_close (&msg) != 0) {
                    fprintf (stderr, "bench_allreduce: raw receiver: %s\n",
                             zmq_strerror (errno));
                    return S_EXIT_ZMQ;
                }
            }
            double now = ps_clock_ms ();
            if (b > 0)
                times [b - 1] = (now - start) / per_block;
            start = now;
        }
        if (harness_write_line (child->out, "%.6f", harness_median (times, run->blocks)))
            return S_EXIT_PIPE;
    }
    s_zmq_end (pull, ctx);
    return 0;
}

//  Switch the raw sender's connection from BBR as the ring does with its
//  own (see ps_ring_transport.c): wait for the monitor's connection event,
//  which carries the descriptor. Returns 0 or -1.
static int
s_raw_tune (void *ctx, void *push, const char *endpoint)
{
    void *monitor = zmq_socket (ctx, ZMQ_PAIR);
    if (!monitor
    ||  zmq_socket_monitor (push, "inproc://bench-monitor", ZMQ_EVENT_CONNECTED) != 0
    ||  zmq_connect (monitor, "inproc://bench-monitor") != 0
    ||  zmq_connect (push, endpoint) != 0)
        return -1;
    if (strncmp (endpoint, "tcp://", 6) == 0) {
        zmq_pollitem_t item = { monitor, 0, ZMQ_POLLIN, 0 };
        unsigned char event [6];
        if (zmq_poll (&item, 1, 5000) != 1
        ||  zmq_recv (monitor, event, sizeof event, 0) != (int) sizeof event)
            return -1;
        uint32_t fd;
        memcpy (&fd, event + 2, sizeof fd);
        char algorithm [32] = "";
        socklen_t size = sizeof algorithm - 1;
        if (getsockopt ((int) fd, IPPROTO_TCP, TCP_CONGESTION, algorithm, &size) == 0
        &&  strcmp (algorithm, "bbr") == 0
        &&  setsockopt ((int) fd, IPPROTO_TCP, TCP_CONGESTION, "cubic", 5) != 0
        &&  setsockopt ((int) fd, IPPROTO_TCP, TCP_CONGESTION, "reno", 4) != 0)
            fprintf (stderr, "bench_allreduce: raw sender keeps bbr: %s\n", strerror (errno));
    }
    if (zmq_socket_monitor (push, NULL, 0) != 0)
        return -1;
    return zmq_close (monitor);
}

//  Child 1 sends every message zero-copy from one buffer; ZeroMQ only
//  reads it, and the buffer lives until the context has sent everything.
static int
s_raw_sender (s_raw_run_t *run, s_child_t *child)
{
    char endpoint [S_LINE_MAX];
    if (harness_read_line (child->in, endpoint, sizeof endpoint, S_CHILD_WAIT_MS))
        return S_EXIT_PIPE;
    size_t largest = 0;
    for (int s = 0; s < run->nsizes; s++)
        if (run->sizes [s] > largest)
            largest = run->sizes [s];
    char *buffer = aligned_alloc (64, largest);
    if (!buffer)
        return S_EXIT_MEMORY;
    memset (buffer, 1, largest);
    void *ctx = s_raw_context (run->options);
    void *push = ctx ? zmq_socket (ctx, ZMQ_PUSH) : NULL;
    int hwm = 100000;
    if (!push
    ||  zmq_setsockopt (push, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0
    ||  (run->options->system_cc ? zmq_connect (push, endpoint)
                                 : s_raw_tune (ctx, push, endpoint)) != 0) {
        fprintf (stderr, "bench_allreduce: raw sender: %s\n", zmq_strerror (errno));
        return S_EXIT_ZMQ;
    }
    for (int s = 0; s < run->nsizes; s++) {
        int total = (run->blocks + 1) * s_block_messages (run->sizes [s]);
        for (int m = 0; m < total; m++) {
            zmq_msg_t msg;
            if (zmq_msg_init_data (&msg, buffer, run->sizes [s], NULL, NULL) != 0
            ||  zmq_msg_send (&msg, push, 0) < 0) {
                fprintf (stderr, "bench_allreduce: raw sender: %s\n", zmq_strerror (errno));
                return S_EXIT_ZMQ;
            }
        }
    }
    //  The default linger makes this wait until everything was sent.
    s_zmq_end (push, ctx);
    free (buffer);
    return 0;
}

static int
s_raw_child (s_child_t *child, void *arg)
{
    return child->index == 0 ? s_raw_receiver (arg, child) : s_raw_sender (arg, child);
}

static int
s_raw_rows (const s_options_t *options, const char *transport, const char *dir,
            size_t chunk)
{
    size_t sizes [S_MAX_SIZES];
    int nsizes = 0;
    sizes [nsizes++] = chunk;
    for (size_t s = 0; s < S_SIZES; s++)
        if (s_sizes [s] != chunk)
            sizes [nsizes++] = s_sizes [s];
    s_raw_run_t run = {
        .options = options, .transport = transport, .dir = dir, .sizes = sizes,
        .nsizes = nsizes, .blocks = options->quick ? 3 : 15
    };
    s_procs_t procs;
    if (s_spawn (&procs, 2, s_raw_child, &run)) {
        s_kill_all (&procs);
        s_reap (&procs, "raw");
        return -1;
    }
    char line [S_LINE_MAX];
    int rc = harness_read_line (procs.from [0], line, sizeof line, S_CHILD_WAIT_MS)
          || harness_write_line (procs.to [1], "%s", line) ? -1 : 0;
    for (int s = 0; s < nsizes && rc == 0; s++) {
        if (harness_read_line (procs.from [0], line, sizeof line, S_CHILD_WAIT_MS)) {
            rc = -1;
            break;
        }
        double ms = strtod (line, NULL);
        char size_name [32];
        s_size_name (sizes [s], size_name, sizeof size_name);
        printf ("%-9s  %-5s  %-6s  %-8s  %10.3f  %10.2f  %10s  %8s\n", transport, "raw", "none",
                size_name, ms, (double) sizes [s] / (ms * 1e6), "-", "-");
        fflush (stdout);
    }
    if (rc)
        s_kill_all (&procs);
    if (s_reap (&procs, "raw"))
        rc = -1;
    return rc;
}

//  ---------------------------------------------------------------------
//  The shared-memory bound (an estimate, not a transport)
//
//  What a same-host transport that shares memory instead of copying
//  through the kernel could reach at best, measured here on this machine
//  in this run: two processes whose vectors both lie in one shared
//  mapping. Member i adds the other's half i into its own (read 2 x n/2,
//  write n/2 floats), waits for the other, and copies the other's summed
//  half (read and write n/2): every byte crosses memory once, against the
//  kernel's two copies per byte sent over tcp or ipc (into the socket
//  buffer, out of it) plus the ring's reduce and all-gather copies. In
//  "shm-staged" the vectors are each member's own (private) memory, as a
//  transport's callers' are: member i first copies the half the other
//  reads into its buffer in the mapping, writes its sum both into its
//  vector and into that buffer, and copies the other's sum out of the
//  other's buffer: half a vector more copied and written. The members
//  meet at spin barriers that yield the core while they wait (two members
//  spinning on two loaded cores would starve each other); on a loaded
//  machine a barrier can still cost a time slice, so the figures err on
//  the slow side. The time is from the barrier before the reduce to the
//  one after both copies, so it is the slower member's.

typedef struct {
    atomic_int arrived;         //  barrier: members arrived in this generation
    atomic_int generation;
    float *vector [2];          //  in the mapping
} s_shm_head_t;

typedef struct {
    s_shm_head_t *head;
    float *private [2];         //  each member's own vector, for shm-staged
    size_t count;
    int warmup, iters;
    bool staged;
} s_shm_run_t;

static void
s_shm_barrier (s_shm_head_t *head)
{
    int generation = atomic_load (&head->generation);
    if (atomic_fetch_add (&head->arrived, 1) == 1) {
        atomic_store (&head->arrived, 0);
        atomic_fetch_add (&head->generation, 1);
    }
    else
        while (atomic_load (&head->generation) == generation)
            sched_yield ();
}

static int
s_shm_child (s_child_t *child, void *arg)
{
    s_shm_run_t *run = arg;
    int me = child->index, other = 1 - me;
    //  Unstaged, a member's vector is its buffer in the mapping.
    float *shared = run->head->vector [me], *theirs = run->head->vector [other];
    float *mine = run->staged ? run->private [me] : shared;
    size_t half = run->count / 2;
    size_t begin [2] = { 0, half }, end [2] = { half, run->count };
    size_t their_bytes = (end [other] - begin [other]) * sizeof (float);
    double times [S_MAX_ITERS];
    for (int it = 0; it < run->warmup + run->iters; it++) {
        //  The other has copied out of this member's buffer before it
        //  is written again.
        s_shm_barrier (run->head);
        for (size_t i = 0; i < run->count; i++)
            mine [i] = (float) (me + 1 + (int) (i & 7));
        s_shm_barrier (run->head);
        double start = ps_clock_ms ();
        if (run->staged) {
            memcpy (shared + begin [other], mine + begin [other], their_bytes);
            s_shm_barrier (run->head);
            for (size_t i = begin [me]; i < end [me]; i++)
                shared [i] = mine [i] = mine [i] + theirs [i];
        }
        else
            for (size_t i = begin [me]; i < end [me]; i++)
                mine [i] += theirs [i];
        s_shm_barrier (run->head);
        memcpy (mine + begin [other], theirs + begin [other], their_bytes);
        s_shm_barrier (run->head);
        if (it >= run->warmup)
            times [it - run->warmup] = ps_clock_ms () - start;
    }
    for (size_t i = 0; i < run->count; i++)
        if (mine [i] != (float) (3 + 2 * (int) (i & 7))) {
            fprintf (stderr, "bench_allreduce: shm member %d: element %zu is %g\n", me, i,
                     mine [i]);
            return S_EXIT_WRONG;
        }
    if (me == 0 && harness_write_line (child->out, "%.6f", harness_median (times, run->iters)))
        return S_EXIT_PIPE;
    return 0;
}

//  Time the shared-memory bound of size s_sizes [s] for 2 processes,
//  staged or not. Sets *ms and returns 0, or returns -1.
static int
s_shm_time (const s_options_t *options, size_t s, bool staged, double *ms)
{
    size_t bytes = s_sizes [s], page = 4096;
    size_t head_bytes = (sizeof (s_shm_head_t) + page - 1) / page * page;
    size_t total = head_bytes + 2 * bytes;
    char *map = mmap (NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        perror ("bench_allreduce: mmap");
        return -1;
    }
    s_shm_head_t *head = (s_shm_head_t *) map;
    atomic_init (&head->arrived, 0);
    atomic_init (&head->generation, 0);
    head->vector [0] = (float *) (map + head_bytes);
    head->vector [1] = (float *) (map + head_bytes + bytes);
    //  The staged members' own vectors come from the heap, which each
    //  child has a private copy of after the fork (the mapping is shared).
    s_shm_run_t run = {
        .head = head, .count = bytes / sizeof (float), .staged = staged,
        .warmup = options->quick ? 2 : 5, .iters = options->quick ? 5 : 41
    };
    //  aligned_alloc takes a multiple of the alignment (ASan holds it to that).
    float *own = staged ? aligned_alloc (64, (2 * bytes + 63) / 64 * 64) : NULL;
    if (staged && !own) {
        if (munmap (map, total) != 0)
            perror ("bench_allreduce: munmap");
        return -1;
    }
    run.private [0] = own;
    run.private [1] = own ? own + run.count : NULL;
    s_procs_t procs;
    char line [S_LINE_MAX];
    int rc = s_spawn (&procs, 2, s_shm_child, &run);
    if (rc == 0 && harness_read_line (procs.from [0], line, sizeof line, S_CHILD_WAIT_MS) == 0)
        *ms = strtod (line, NULL);
    else {
        rc = -1;
        s_kill_all (&procs);
    }
    if (s_reap (&procs, "shm"))
        rc = -1;
    free (own);
    if (munmap (map, total) != 0)
        perror ("bench_allreduce: munmap");
    return rc;
}

//  ---------------------------------------------------------------------
//  The gloo rows

//  What the gloo peer measured over its runs: every timed iteration's
//  time (the slower member's) per size, pooled.
typedef struct {
    int runs;                   //  that gave figures
    bool failed;                //  a run gave none: no gloo rows
    int status;                 //  the last run's exit status
    char note [512];            //  torch's version, or why there are no rows
    int count [S_SIZES];
    double times [S_SIZES][S_MAX_ITERS];
} s_gloo_t;

//  Run the gloo peer once, on every size, with iters timed iterations,
//  and add its times to gloo. A run that gives no figures sets failed and
//  says why in note; the bench goes on without gloo rows.
static void
s_gloo_run (const s_options_t *options, int warmup, int iters, s_gloo_t *gloo)
{
    if (gloo->failed)
        return;
    char dir [256], out [320], log [320], warmups [16], counts [16], sizes [S_SIZES][32];
    harness_tmpdir (dir, sizeof dir);
    snprintf (out, sizeof out, "%s/peer.jsonl", dir);
    snprintf (log, sizeof log, "%s/peer.log", dir);
    snprintf (warmups, sizeof warmups, "%d", warmup);
    snprintf (counts, sizeof counts, "%d", iters);
    const char *argv [12 + S_SIZES] = {
        options->python, BENCH_TORCH_SCRIPT, "--warmup", warmups, "--iters", counts,
        "--out", out, "--bytes"
    };
    int argc = 9;
    for (size_t s = 0; s < S_SIZES; s++) {
        snprintf (sizes [s], sizeof sizes [s], "%zu", s_sizes [s]);
        argv [argc++] = sizes [s];
    }
    argv [argc] = NULL;
    fprintf (stderr, "bench_allreduce: timing gloo (%d of %d): %s %s\n", gloo->runs + 1,
             S_GLOO_RUNS, options->python, BENCH_TORCH_SCRIPT);
    json_t *lines = harness_peer_run (argv, out, log, S_PEER_TIMEOUT_MS, gloo->note,
                                      sizeof gloo->note, &gloo->status);
    size_t index;
    json_t *line;
    int sizes_seen = 0;
    json_array_foreach (lines, index, line) {
        json_int_t bytes = json_integer_value (json_object_get (line, "bytes"));
        json_t *times = json_object_get (line, "times_ms");
        for (size_t s = 0; s < S_SIZES; s++) {
            if ((size_t) bytes != s_sizes [s] || !json_is_array (times))
                continue;
            sizes_seen++;
            size_t it;
            json_t *ms;
            json_array_foreach (times, it, ms)
                if (gloo->count [s] < S_MAX_ITERS && json_is_number (ms))
                    gloo->times [s][gloo->count [s]++] = json_number_value (ms);
        }
        json_t *version = json_object_get (line, "torch");
        snprintf (gloo->note, sizeof gloo->note, "PyTorch %s, backend gloo, 2 processes over "
                  "loopback tcp, timed in this run by %s %s",
                  json_is_string (version) ? json_string_value (version) : "?",
                  options->python, BENCH_TORCH_SCRIPT);
    }
    if (lines && sizes_seen != (int) S_SIZES) {
        snprintf (gloo->note, sizeof gloo->note, "%s %s gave %d of the %zu sizes",
                  options->python, BENCH_TORCH_SCRIPT, sizes_seen, S_SIZES);
        json_decref (lines);
        lines = NULL;
    }
    if (lines)
        gloo->runs++;
    else
        gloo->failed = true;
    json_decref (lines);
    harness_rmtree (dir);
}

//  One row of the gloo table: ratio is gloo's median time over ms, or
//  none when gloo_ms is 0.
static void
s_gloo_row (const char *transport, const char *curve, size_t s, double ms, double gloo_ms)
{
    double algbw = (double) s_sizes [s] / (ms * 1e6);
    char size_name [32], ratio [16] = "-";
    s_size_name (s_sizes [s], size_name, sizeof size_name);
    if (gloo_ms > 0)
        snprintf (ratio, sizeof ratio, "%.2fx", gloo_ms / ms);
    printf ("%-10s %-5d  %-6s  %-8s  %10.3f  %10.2f  %10.2f  %8s\n", transport, 2, curve,
            size_name, ms, algbw, algbw, ratio);
}

//  Print gloo's rows, each 2-process ring row and the shared-memory
//  bounds with their ratio to gloo (gloo's median time over the row's:
//  how many times faster than gloo the row is), and the goal line.
//  two [t][secured][s] are the rings' medians, shm [staged][s] the bounds'.
static void
s_gloo_print (s_gloo_t *gloo, const char *const *transports, int ntransports,
              double two [][2][S_SIZES], double shm [2][S_SIZES])
{
    bool measured = !gloo->failed && gloo->runs > 0;
    printf ("\ngloo: %s\n", gloo->note);
    if (measured)
        printf ("gloo's %d iterations per size pooled from %d runs, one after each "
                "transport's 2-process unsecured rows\n", gloo->count [0], gloo->runs);
    printf ("shm-bound, shm-staged: the shared-memory bound, an estimate, not a transport "
            "(see bench_allreduce.c)\nvs gloo: gloo's median time over the row's\n");
    printf ("%-10s %-5s  %-6s  %-8s  %10s  %10s  %10s  %8s\n", "transport", "procs", "curve",
            "size", "median ms", "algbw GB/s", "busbw GB/s", "vs gloo");
    double gloo_ms [S_SIZES] = { 0 };
    for (size_t s = 0; s < S_SIZES && measured; s++) {
        gloo_ms [s] = harness_median (gloo->times [s], gloo->count [s]);
        s_gloo_row ("gloo", "none", s, gloo_ms [s], 0);
    }
    for (int t = 0; t < ntransports; t++)
        for (int secured = 0; secured < 2; secured++)
            for (size_t s = 0; s < S_SIZES; s++)
                s_gloo_row (transports [t], secured ? "curve" : "none", s, two [t][secured][s],
                            gloo_ms [s]);
    for (int staged = 0; staged < 2; staged++)
        for (size_t s = 0; s < S_SIZES; s++)
            s_gloo_row (staged ? "shm-staged" : "shm-bound", "none", s, shm [staged][s],
                        gloo_ms [s]);
    if (!measured) {
        printf ("all-reduce 16 MiB same host vs gloo: not measured\n");
        return;
    }
    //  The goal: the automatic same-host transport, unsecured as
    //  gloo is, at 16 MiB; the CurveZMQ ring's figure beside it.
    size_t s16 = 1;
    double ratio = gloo_ms [s16] / two [1][0][s16];
    printf ("all-reduce 16 MiB same host vs gloo: %.2fx (goal >= 3x: %s); with CurveZMQ "
            "%.2fx\n", ratio, ratio >= 3 ? "met" : "NOT met", gloo_ms [s16] / two [1][1][s16]);
    harness_benchrow ("bench_allreduce", "ring 16 MiB, 2 procs, same-host", "gloo",
                      gloo_ms [s16], two [1][0][s16], "ms", HARNESS_LOWER_BETTER, "ratio >= 3",
                      harness_goal (ratio >= 3));
    harness_benchrow ("bench_allreduce", "shared-memory estimate 16 MiB, 2 procs, staged", "gloo",
                      gloo_ms [s16], shm [1][s16], "ms", HARNESS_LOWER_BETTER, NULL,
                      HARNESS_GOAL_NONE);
}

//  ---------------------------------------------------------------------
//  --check: the unit test bench_allreduce_check, on small vectors, which
//  asserts no time. What the rows rest on: the shared-memory bound's
//  members end with the right sums (both ways; they check them and exit
//  S_EXIT_WRONG), and the gloo peer's lines are read back with every
//  iteration's time for every size (the peer checks its own sums). A
//  peer that cannot import torch exits 3, as the peers say: the test is
//  then skipped (77), once the bound's sums have passed; any other
//  failure of the peer fails it. Returns the exit status.
static int
s_check (s_options_t *options)
{
    const size_t small [S_SIZES] = { 64 * 1024, 256 * 1024 + 8, 1 * S_MIB };
    memcpy (s_sizes, small, sizeof small);
    for (int staged = 0; staged < 2; staged++)
        for (size_t s = 0; s < S_SIZES; s++) {
            double ms;
            if (s_shm_time (options, s, staged, &ms)) {
                fprintf (stderr, "bench_allreduce: check: the shared-memory bound%s of %zu "
                         "bytes failed\n", staged ? " (staged)" : "", s_sizes [s]);
                return 1;
            }
        }
    printf ("shared-memory bound: sums right, in place and staged, %zu to %zu bytes\n",
            s_sizes [0], s_sizes [S_SIZES - 1]);
    if (!options->peer)
        return 0;
    s_gloo_t gloo = { .note = "" };
    int iters = 2;
    s_gloo_run (options, 1, iters, &gloo);
    if (gloo.failed && gloo.status == 3) {
        printf ("SKIP: gloo peer: %s\n", gloo.note);
        return 77;
    }
    if (gloo.failed) {
        fprintf (stderr, "bench_allreduce: check: gloo peer: %s\n", gloo.note);
        return 1;
    }
    for (size_t s = 0; s < S_SIZES; s++)
        if (gloo.count [s] != iters) {
            fprintf (stderr, "bench_allreduce: check: gloo peer gave %d times of %zu bytes, "
                     "expected %d\n", gloo.count [s], s_sizes [s], iters);
            return 1;
        }
    printf ("gloo peer: %d times per size read back; %s\n", iters, gloo.note);
    return 0;
}

//  ---------------------------------------------------------------------

static void
s_usage (void)
{
    fprintf (stderr, "usage: bench_allreduce [--quick] [--chunk BYTES] [--shm-bytes BYTES] "
             "[--io-threads N] [--system-cc] [--no-peer] [--python PATH] [--check]\n");
}

int
main (int argc, char **argv)
{
    //  The arithmetic mode ps-worker sums in; the children inherit it.
    ps_floats_flush_subnormals ();
    s_options_t options = { .io_threads = 2, .peer = true, .python = "/usr/bin/python3" };
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv [i], "--quick") == 0)
            options.quick = true;
        else
        if (strcmp (argv [i], "--chunk") == 0 && i + 1 < argc)
            options.chunk = strtoull (argv [++i], NULL, 0);
        else
        if (strcmp (argv [i], "--shm-bytes") == 0 && i + 1 < argc)
            options.shm_bytes = strtoull (argv [++i], NULL, 0);
        else
        if (strcmp (argv [i], "--io-threads") == 0 && i + 1 < argc)
            options.io_threads = atoi (argv [++i]);
        else
        if (strcmp (argv [i], "--system-cc") == 0)
            options.system_cc = true;
        else
        if (strcmp (argv [i], "--no-peer") == 0)
            options.peer = false;
        else
        if (strcmp (argv [i], "--check") == 0)
            options.check = options.quick = true;
        else
        if (strcmp (argv [i], "--python") == 0 && i + 1 < argc)
            options.python = argv [++i];
        else {
            s_usage ();
            return 2;
        }
    }
    if (options.io_threads < 1) {
        s_usage ();
        return 2;
    }
    ps_log_init ("bench_allreduce", PS_LOG_WARN);
    ps_error_t err;
    if (ps_heap_tune (&err))
        fprintf (stderr, "bench_allreduce: %s\n", err.msg);
    if (options.check)
        return s_check (&options);

    //  IPC endpoints live in a fresh directory.
    char dir [] = "/tmp/bench_allreduce-XXXXXX";
    if (!mkdtemp (dir)) {
        perror ("mkdtemp");
        return 1;
    }
    size_t chunk = options.chunk ? options.chunk : PS_RING_DEFAULT_CHUNK;
    printf ("ring all-reduce and raw ZeroMQ PUSH/PULL on loopback; chunk %zu bytes%s; raw rows "
            "with %d I/O thread%s, %s\nvs none: the CurveZMQ ring's median time over the "
            "unsecured ring's, run just before it\n", chunk, options.chunk ? "" : " (the ring's default)",
            options.io_threads, options.io_threads == 1 ? "" : "s",
            options.system_cc ? "the system's TCP congestion control" : "BBR switched off as "
            "in the ring");
    printf ("%-9s  %-5s  %-6s  %-8s  %10s  %10s  %10s  %8s\n", "transport", "procs", "curve",
            "size", "median ms", "algbw GB/s", "busbw GB/s", "vs none");
    //  The children share the keys made here, before the first fork.
    harness_keys ();
    int rc = 0;
    //  same-host: tcp endpoints given as endpoint sets (ps_host.h), which
    //  the members of one host turn into ipc:// as a cluster's do.
    const char *transports [] = { "tcp", "same-host", "ipc" };
    double two [3][2][S_SIZES]; //  2 processes, per transport, unsecured and secured
    s_gloo_t gloo = { .note = "not run (--no-peer)", .failed = !options.peer };
    //  gloo's share of the ring's iterations per run, with as many warm-ups.
    int gloo_warmup = options.quick ? 2 : 5, gloo_iters = options.quick ? 3 : 14;
    for (int t = 0; t < 3 && rc == 0; t++) {
        for (int n = 2; n <= 3 && rc == 0; n++) {
            double medians [S_SIZES], secured [S_SIZES];
            rc = s_ring_rows (&options, transports [t], dir, n, false, medians, medians);
            if (n == 2 && rc == 0) {
                memcpy (two [t][0], medians, sizeof medians);
                s_gloo_run (&options, gloo_warmup, gloo_iters, &gloo);
            }
            if (rc == 0)
                rc = s_ring_rows (&options, transports [t], dir, n, true, medians, secured);
            if (n == 2 && rc == 0)
                memcpy (two [t][1], secured, sizeof secured);
        }
        if (rc == 0 && t != 1)
            rc = s_raw_rows (&options, transports [t], dir, chunk);
    }
    //  The ratio the same-host goal is stated in: 16 MiB, 2 processes.
    for (size_t s = 0; s < S_SIZES && rc == 0; s++)
        printf ("%zu MiB, 2 procs, unsecured: tcp / same-host time %.2f, tcp / ipc %.2f\n",
                s_sizes [s] / S_MIB, two [0][0][s] / two [1][0][s],
                two [0][0][s] / two [2][0][s]);
    //  The same as BENCHROW lines (harness_benchrow.h), and the goal's bus bandwidth.
    for (size_t s = 0; s < S_SIZES && rc == 0; s++) {
        char row [64];
        snprintf (row, sizeof row, "ring %zu MiB, 2 procs, same-host", s_sizes [s] / S_MIB);
        harness_benchrow ("bench_allreduce", row, "ring over tcp", two [0][0][s], two [1][0][s],
                          "ms", HARNESS_LOWER_BETTER, NULL, HARNESS_GOAL_NONE);
        if (s_sizes [s] == 16 * S_MIB)
            harness_benchrow ("bench_allreduce", "ring 16 MiB, 2 procs, tcp, bus bandwidth", NULL,
                              0, (double) s_sizes [s] / two [0][0][s] * 1e-6, "GB/s",
                              HARNESS_HIGHER_BETTER, "ours >= 2.6 GB/s",
                              harness_goal ((double) s_sizes [s] / two [0][0][s] * 1e-6 >= 2.6));
    }
    //  The shared-memory bounds, once, after the rings.
    double shm [2][S_SIZES];
    for (int staged = 0; staged < 2 && rc == 0; staged++)
        for (size_t s = 0; s < S_SIZES && rc == 0; s++)
            rc = s_shm_time (&options, s, staged, &shm [staged][s]);
    if (rc == 0)
        s_gloo_print (&gloo, transports, 3, two, shm);
    char path [512];
    //  ZeroMQ removes the IPC files of the sockets it closes; what a
    //  broken run left goes here.
    for (int i = 0; i <= S_MAX_PROCS; i++) {
        if (i < S_MAX_PROCS)
            snprintf (path, sizeof path, "%s/ring-%d", dir, i);
        else
            snprintf (path, sizeof path, "%s/raw", dir);
        if (unlink (path) != 0 && errno != ENOENT)
            perror (path);
    }
    if (rmdir (dir) != 0)
        perror (dir);
    if (rc)
        fprintf (stderr, "bench_allreduce: a run broke; see above\n");
    return rc ? 1 : 0;
}
