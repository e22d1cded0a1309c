//  Sparse embedding table benchmark (issue 17, section 3, first bullet):
//  rows per second of a sparse pull and of a push with per-row Adagrad, for
//  a table of 10M x 16 float32 (--rows, --dim shrink it) whose ids follow a
//  power law, 26 x 512 ids per request, against its ceilings in one run:
//
//    (a) the ceiling: the same gather and the same scatter-add Adagrad on a
//        plain float array in this process, each row's weights and
//        accumulator side by side (two cache lines per row at dim 16), no
//        hash lookup, no lock, no ledger;
//    (h) the same array on transparent huge pages (madvise), as the
//        table's slabs are (common/store/ps_slabs.h): the stricter
//        ceiling, since most of a random row's cost on 4 KiB pages is its
//        page walk, which huge pages take away from the array too;
//    (b) the table in this process: ps_sparse_pull and ps_sparse_push
//        (common/store/ps_sparse.h), the code a server runs;
//    (c) the same table in a real ps-server over tcp loopback, through the
//        sparse pull and push messages, one request at a time: each
//        request's time includes its round trip;
//    (p) the same, with up to S_DEPTH requests in flight, as a server
//        serving several workers has: the server's throughput, its round
//        trips overlapped with its work.
//
//  Every path gets the same requests: ids drawn from a Zipf law over the
//  rows (exponent 1.1, which leaves about 42% of a request's 13,312 ids
//  unique at 10M rows, as ../shared/ANCHORS.md's micro-anchor), each with a
//  random gradient. A worker sums a request's duplicate ids before it pulls
//  or pushes; that step is timed on its own (row "dedup") and the paths
//  then pull and push the unique rows, so that their ratios compare the
//  table with the array and nothing else. Ids/s counts a request's ids
//  (duplicates included), unique rows/s the rows it touched. Every path
//  holds all the rows before it is timed (the table is filled by pushes of
//  zero gradients, which create each row at its initial value), so that
//  none is timed on a smaller, more cache-friendly table.
//
//  Each table's memory (its stats' bytes, and the growth of this process's
//  RSS or the server's RSS) is compared with the issue's bound for Adagrad,
//  1.3 x R x d x 4 x 2 bytes plus 64 MiB. And PyTorch,
//  tests/bench/torch_sparse.py, times its gather and torch.optim.Adagrad
//  on a sparse gradient on the same requests (one thread, like every path
//  here), after this program's own measurements; the table's dedup + push
//  is compared with it (the issue's goal: 5x).
//
//  With --check it is a test instead (seconds, a small table): the same
//  pushes through (a) and (b), and through (c), must leave the same rows,
//  bit for bit.
//
//  A benchmark prints and never fails on timings: the goals say "met" or
//  "NOT met" for information only. It exits non-zero only when something
//  could not be set up, a request failed, or --check found a difference.
//
//  Usage: bench_sparse [--quick] [--check] [--rows N] [--dim D] [--zipf S]
//                      [--no-peer] [--python PATH] [--server PATH]
//  The server binary is --server, else $PS_SERVER, else the one meson
//  built, else build/ps/ps-server relative to the current directory.

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>

#include <jansson.h>
#include <zmq.h>

#include "harness.h"
#include "harness_benchrow.h"
#include "harness_rand.h"
#include "ps_cpus.h"
#include "ps_floats.h"
#include "ps_heap.h"
#include "ps_idmap.h"
#include "ps_msg.h"
#include "ps_proto.h"
#include "ps_proto_conv.h"
#include "ps_rowopt.h"
#include "ps_sparse.h"
#include "ps_tablespec.h"

#define S_FIELDS        26
#define S_BATCH         512
#define S_SEED          17
#define S_MAX_REPS      9
#define S_MIB           (1024.0 * 1024.0)
#define S_PEER_TIMEOUT  (30 * 60 * 1000)
#define S_TIMEOUT_MS    120000
#define S_DEPTH         4
#define S_HUGE          ((size_t) 2 << 20)
#define S_RTT_PULLS     501             //  pulls of one row timed for the round trip

//  The PyTorch peer, tests/bench/torch_sparse.py, as the build knows it.
#ifndef BENCH_TORCH_SCRIPT
#   define BENCH_TORCH_SCRIPT "tests/bench/torch_sparse.py"
#endif

//  What to measure and for how long.
typedef struct {
    uint64_t rows;              //  of the table
    uint32_t dim;
    double zipf;                //  exponent of the id law
    size_t ids;                 //  per request: fields x batch
    int nbatches;               //  distinct requests, cycled
    int reps;                   //  timed repetitions per cell
    double rep_s;               //  seconds per repetition
    bool check;
    bool peer;
    const char *python;
    const char *server;         //  the ps-server binary
} s_plan_t;

//  One request: its ids with a gradient each, and the same summed over
//  duplicates (what a worker sends).
typedef struct {
    uint64_t *ids;
    float *grads;               //  ids x dim
    size_t n;
    uint64_t *uids;
    float *ugrads;              //  uids x dim
    size_t m;
} s_batch_t;

//  The ceiling: row r's weights at rows [r * 2 * dim], its Adagrad
//  accumulator right after them.
typedef struct {
    float *rows;
    uint32_t dim;
    ps_rowopt_t opt;
    void *map;                  //  on huge pages: the mapping that holds rows
    size_t map_len;
} s_ceiling_t;

//  A ps-server of one table shard and a socket to it, spoken to as a
//  worker would: the sparse messages of schemas/protocol.json, encoded by
//  the generated codec, ids and rows lent to ZeroMQ zero-copy.
typedef struct {
    harness_server_t server;
    void *ctx;
    void *socket;
    ps_writer_t writer;
    ps_msg_t *reply;
    uint64_t next_id;
    uint64_t step;
    char table [PS_NAME_MAX];
    uint32_t dim;
    //  The requests sent and not answered yet: the server answers each
    //  when its work is done, not in the order they came.
    struct {
        bool used;
        ps_proto_type_t expect;
        uint64_t id, step;
        size_t n;
        float *out;             //  a pull's: where its rows go
    } inflight [S_DEPTH];
    int ninflight;
} s_remote_t;

//  A way to use the server: at most depth requests in flight.
typedef struct {
    s_remote_t *remote;
    int depth;
} s_remote_view_t;

//  The one server, which s_fail stops.
static s_remote_t s_remote;

//  A path to the rows: how it pulls and pushes the unique ids of a request.
typedef struct {
    char tag;                   //  'a', 'h', 'b', 'c' or 'p'
    const char *name;
    void (*pull) (void *ctx, const uint64_t *ids, size_t n, float *out);
    int (*push) (void *ctx, const uint64_t *ids, size_t n, const float *grads);
    //  Wait for every request sent (NULL: each is done when it returns).
    int (*flush) (void *ctx);
    void *ctx;
} s_path_t;

//  What is timed on each request: the worker's sum of duplicates, or a
//  path's pull or push of the unique ids.
typedef enum { S_DEDUP, S_PULL, S_PUSH } s_op_t;
static const char *s_op_names [] = { "dedup", "pull", "push" };

//  The worker's buffers, which every timed operation writes to.
typedef struct {
    ps_idmap_t *map;
    uint32_t *index;            //  ids x 1
    float *ugrads;              //  ids x dim
    float *out;                 //  ids x dim
    uint32_t dim;
} s_worker_t;

//  One line of the table.
typedef struct {
    s_op_t op;
    char tag;                   //  the path's, or '-' for the worker's dedup
    const char *name;
    double seconds;             //  the fastest repetition's, per request
    double unique;              //  mean unique rows per request timed
    double cpu_self;            //  CPU seconds per request over the timed
    double cpu_server;          //  repetitions: this process's (every thread:
                                //  the client's side) and the server's, or -1
} s_row_t;

#define S_MAX_ROWS 12
static s_row_t s_rows [S_MAX_ROWS];
static int s_nrows;

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static void
s_fail (const char *what, const char *detail)
{
    fprintf (stderr, "bench_sparse: %s: %s\n", what, detail);
    if (s_remote.server.pid > 0)
        harness_server_stop (&s_remote.server, SIGTERM);
    exit (EXIT_FAILURE);
}

//  The CPU time of this process, every thread's, in seconds.
static double
s_cpu_self (void)
{
    struct timespec ts;
    if (clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        s_fail ("clock_gettime", strerror (errno));
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

//  The CPU time of the server while one runs, in seconds, else -1.
static double
s_cpu_server (void)
{
    static long ticks_per_s;
    if (!ticks_per_s)
        ticks_per_s = sysconf (_SC_CLK_TCK);
    long ticks = s_remote.socket ? harness_cpu_ticks (s_remote.server.pid) : -1;
    return ticks < 0 || ticks_per_s <= 0 ? -1 : (double) ticks / (double) ticks_per_s;
}

static void *
s_alloc (size_t bytes)
{
    void *p = aligned_alloc (64, (bytes + 63) / 64 * 64);
    if (!p)
        s_fail ("aligned_alloc", strerror (ENOMEM));
    return p;
}

static char *
s_thousands (char *buf, size_t len, double value)
{
    char digits [32];
    snprintf (digits, sizeof digits, "%.0f", value);
    size_t n = strlen (digits), out = 0;
    for (size_t i = 0; i < n && out + 2 < len; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buf [out++] = ',';
        buf [out++] = digits [i];
    }
    buf [out] = 0;
    return buf;
}

//  ---------------------------------------------------------------------
//  Requests

//  Rank k of the Zipf law (k = 0 the most frequent) drawn by inverting the
//  continuous law's CDF on [1, rows + 1): close to the discrete law and
//  needs no table of rows entries.
static uint64_t
s_zipf_rank (uint64_t *state, uint64_t rows, double s)
{
    double u = harness_unit (state);
    double x = fabs (s - 1) < 1e-9
             ? exp (u * log ((double) rows + 1))
             : pow ((pow ((double) rows + 1, 1 - s) - 1) * u + 1, 1 / (1 - s));
    uint64_t rank = (uint64_t) x - 1;
    return rank < rows ? rank : rows - 1;
}

static uint64_t
s_gcd (uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

//  The worker's side of a request: its ids mapped to the distinct ones
//  (ps_idmap, as the worker does it) and their gradients summed into
//  ugrads. Returns the number of distinct ids, whose list stays in the map
//  until its next reset.
static size_t
s_dedup (ps_idmap_t *map, uint32_t *index, const s_batch_t *batch, uint32_t dim,
         float *ugrads)
{
    ps_error_t err;
    ps_idmap_reset (map);
    if (ps_idmap_add (map, batch->ids, batch->n, index, &err))
        s_fail ("ps_idmap_add", err.msg);
    size_t m = ps_idmap_count (map);
    memset (ugrads, 0, m * dim * sizeof (float));
    for (size_t i = 0; i < batch->n; i++) {
        float *sum = ugrads + (size_t) index [i] * dim;
        const float *g = batch->grads + i * dim;
        for (uint32_t j = 0; j < dim; j++)
            sum [j] += g [j];
    }
    return m;
}

static ps_idmap_t *
s_idmap_new (size_t ids)
{
    ps_idmap_t *map = ps_idmap_new (ids);
    if (!map)
        s_fail ("ps_idmap_new", strerror (ENOMEM));
    return map;
}

//  The plan's requests: ids of Zipf ranks, each rank sent to a row by a
//  multiplicative permutation so that the hot rows lie all over the table
//  rather than in its first cache lines, and gradients uniform in
//  [-0.01, 0.01).
static s_batch_t *
s_batches_new (const s_plan_t *plan)
{
    uint64_t stride = 2654435761ULL % plan->rows;
    while (stride == 0 || s_gcd (stride, plan->rows) != 1)
        stride++;
    uint64_t state = S_SEED;
    s_batch_t *batches = calloc ((size_t) plan->nbatches, sizeof (s_batch_t));
    if (!batches)
        s_fail ("calloc", strerror (ENOMEM));
    ps_idmap_t *map = s_idmap_new (plan->ids);
    uint32_t *index = s_alloc (plan->ids * sizeof (uint32_t));
    for (int b = 0; b < plan->nbatches; b++) {
        s_batch_t *batch = &batches [b];
        batch->n = plan->ids;
        batch->ids = s_alloc (batch->n * sizeof (uint64_t));
        batch->grads = s_alloc (batch->n * plan->dim * sizeof (float));
        for (size_t i = 0; i < batch->n; i++) {
            uint64_t rank = s_zipf_rank (&state, plan->rows, plan->zipf);
            batch->ids [i] = (uint64_t) (((unsigned __int128) rank * stride) % plan->rows);
            for (uint32_t j = 0; j < plan->dim; j++)
                batch->grads [i * plan->dim + j] =
                    (float) (harness_unit (&state) * 0.02 - 0.01);
        }
        batch->uids = s_alloc (batch->n * sizeof (uint64_t));
        batch->ugrads = s_alloc (batch->n * plan->dim * sizeof (float));
        batch->m = s_dedup (map, index, batch, plan->dim, batch->ugrads);
        memcpy (batch->uids, ps_idmap_ids (map), batch->m * sizeof (uint64_t));
    }
    ps_idmap_destroy (&map);
    free (index);
    return batches;
}

static void
s_batches_destroy (s_batch_t *batches, int n)
{
    for (int b = 0; b < n; b++) {
        free (batches [b].ids);
        free (batches [b].grads);
        free (batches [b].uids);
        free (batches [b].ugrads);
    }
    free (batches);
}

//  The requests' ids, raw, for the PyTorch peer: nbatches x ids uint64 in
//  this machine's byte order.
static void
s_batches_write (const s_batch_t *batches, const s_plan_t *plan, const char *path)
{
    FILE *file = fopen (path, "wb");
    if (!file)
        s_fail (path, strerror (errno));
    for (int b = 0; b < plan->nbatches; b++)
        if (fwrite (batches [b].ids, sizeof (uint64_t), batches [b].n, file) != batches [b].n)
            s_fail (path, strerror (errno));
    if (fclose (file) != 0)
        s_fail (path, strerror (errno));
}

//  ---------------------------------------------------------------------
//  Timing

static int
s_run (s_op_t op, const s_path_t *path, s_worker_t *worker, s_batch_t *batch)
{
    switch (op) {
        case S_DEDUP:
            s_dedup (worker->map, worker->index, batch, worker->dim, worker->ugrads);
            return 0;
        case S_PULL:
            path->pull (path->ctx, batch->uids, batch->m, worker->out);
            return 0;
        case S_PUSH:
            return path->push (path->ctx, batch->uids, batch->m, batch->ugrads);
    }
    return -1;
}

//  Run op (through path, NULL for the dedup) over the requests in turn:
//  one warm-up pass over all of them, then plan->reps repetitions of about
//  plan->rep_s seconds each. Adds a row with the fastest repetition's time
//  per request: on a machine shared with other work, the repetition that
//  other processes disturbed least is the one that measures the code
//  (every path is timed the same way, so their ratios stay fair).
static void
s_time (s_op_t op, const s_path_t *path, s_worker_t *worker, s_batch_t *batches,
        const s_plan_t *plan)
{
    const char *name = path ? path->name : "worker: ps_idmap + sum of grads";
    for (int b = 0; b < plan->nbatches; b++)
        if (s_run (op, path, worker, &batches [b]))
            s_fail (s_op_names [op], name);
    if (path && path->flush && path->flush (path->ctx))
        s_fail (s_op_names [op], name);
    double times [S_MAX_REPS] = { 0 };     //  plan->reps is at least 1
    double unique = 0, requests = 0;
    int next = 0;
    double cpu_self = s_cpu_self (), cpu_server = s_cpu_server ();
    for (int r = 0; r < plan->reps; r++) {
        int count = 0;
        double start = s_now (), elapsed;
        do {
            s_batch_t *batch = &batches [next];
            next = (next + 1) % plan->nbatches;
            if (s_run (op, path, worker, batch))
                s_fail (s_op_names [op], name);
            unique += (double) batch->m;
            count++;
            elapsed = s_now () - start;
        } while (elapsed < plan->rep_s);
        if (path && path->flush) {
            if (path->flush (path->ctx))
                s_fail (s_op_names [op], name);
            elapsed = s_now () - start;
        }
        requests += count;
        times [r] = elapsed / count;
    }
    cpu_self = (s_cpu_self () - cpu_self) / requests;
    double server_end = s_cpu_server ();
    cpu_server = cpu_server >= 0 && server_end >= 0 ? (server_end - cpu_server) / requests : -1;
    double best = times [0];
    for (int r = 1; r < plan->reps; r++)
        if (times [r] < best)
            best = times [r];
    if (s_nrows == S_MAX_ROWS)
        s_fail ("table", "too many rows");
    s_rows [s_nrows++] = (s_row_t) {
        op, path ? path->tag : '-', name, best, unique / requests, cpu_self, cpu_server
    };
    fprintf (stderr, "bench_sparse: %s %s: %.3f ms per request\n", s_op_names [op], name,
             best * 1e3);
}

static const s_path_t *
s_path_find (const s_path_t *paths, size_t npaths, char tag)
{
    for (size_t i = 0; i < npaths; i++)
        if (paths [i].tag == tag)
            return &paths [i];
    s_fail ("paths", "no such path");
    return NULL;
}

static const s_row_t *
s_row_find (s_op_t op, char tag)
{
    for (int i = 0; i < s_nrows; i++)
        if (s_rows [i].op == op && s_rows [i].tag == tag)
            return &s_rows [i];
    return NULL;
}

//  Create every row through path->push: zero gradients (Adagrad then
//  leaves a row at its initial value) in requests of plan->ids rows.
//  Returns the rows created per second.
static double
s_fill (const s_path_t *path, const s_plan_t *plan)
{
    uint64_t *ids = s_alloc (plan->ids * sizeof (uint64_t));
    float *zeros = s_alloc (plan->ids * plan->dim * sizeof (float));
    memset (zeros, 0, plan->ids * plan->dim * sizeof (float));
    double start = s_now ();
    for (uint64_t first = 0; first < plan->rows; first += plan->ids) {
        size_t n = plan->rows - first < plan->ids ? (size_t) (plan->rows - first) : plan->ids;
        for (size_t i = 0; i < n; i++)
            ids [i] = first + i;
        if (path->push (path->ctx, ids, n, zeros))
            s_fail ("fill", path->name);
    }
    if (path->flush && path->flush (path->ctx))
        s_fail ("fill", path->name);
    double rate = (double) plan->rows / (s_now () - start);
    free (ids);
    free (zeros);
    return rate;
}

//  ---------------------------------------------------------------------
//  (a) the ceiling

//  Every row at its initial value and its accumulator at its first value,
//  as the table starts a row (ps_tablespec_init_row, ps_rowopt_init_slots).
static void
s_ceiling_init (s_ceiling_t *self, const ps_tablespec_t *spec, uint64_t rows, bool huge)
{
    self->opt = spec->opt;
    self->dim = spec->dim;
    size_t bytes = rows * 2 * spec->dim * sizeof (float);
    self->map = NULL;
    if (huge) {
        //  Mapped with room to align the array to a huge page, and every
        //  2 MiB of it asked for as one.
        self->map_len = bytes + S_HUGE;
        self->map = mmap (NULL, self->map_len, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (self->map == MAP_FAILED)
            s_fail ("mmap", strerror (errno));
        uintptr_t start = ((uintptr_t) self->map + S_HUGE - 1) & ~(uintptr_t) (S_HUGE - 1);
        self->rows = (float *) start;
        if (madvise (self->rows, bytes / S_HUGE * S_HUGE, MADV_HUGEPAGE) != 0)
            fprintf (stderr, "bench_sparse: madvise (MADV_HUGEPAGE): %s: (h) is on 4 KiB "
                     "pages\n", strerror (errno));
    }
    else
        self->rows = s_alloc (bytes);
    for (uint64_t r = 0; r < rows; r++) {
        float *row = self->rows + r * 2 * spec->dim;
        ps_tablespec_init_row (spec, r, row);
        ps_rowopt_init_slots (&spec->opt, row + spec->dim, spec->dim);
    }
}

static void
s_ceiling_free (s_ceiling_t *self)
{
    if (self->map && munmap (self->map, self->map_len) != 0)
        s_fail ("munmap", strerror (errno));
    if (!self->map)
        free (self->rows);
    self->rows = NULL;
    self->map = NULL;
}

static void
s_ceiling_pull (void *ctx, const uint64_t *ids, size_t n, float *out)
{
    s_ceiling_t *self = ctx;
    for (size_t i = 0; i < n; i++)
        memcpy (out + i * self->dim, self->rows + ids [i] * 2 * self->dim,
                self->dim * sizeof (float));
}

//  The optimizer is the table's own (ps_rowopt_apply), so that the two
//  differ only in how they find and hold rows.
static int
s_ceiling_push (void *ctx, const uint64_t *ids, size_t n, const float *grads)
{
    s_ceiling_t *self = ctx;
    uint32_t dim = self->dim;
    for (size_t i = 0; i < n; i++) {
        float *w = self->rows + ids [i] * 2 * dim;
        //  t (the row's update count) is Adam's alone; the bench runs Adagrad.
        ps_rowopt_apply (&self->opt, w, w + dim, grads + i * dim, dim, 1);
    }
    return 0;
}

//  ---------------------------------------------------------------------
//  (b) the table in process

typedef struct {
    ps_sparse_t *sparse;
    uint64_t step;              //  of the last push
} s_table_t;

static void
s_table_pull (void *ctx, const uint64_t *ids, size_t n, float *out)
{
    s_table_t *self = ctx;
    ps_sparse_pull (self->sparse, ids, n, out);
}

//  A push as a server makes it: the checks first (ledger, repeated ids,
//  non-finite gradients), then the update.
static int
s_table_push (void *ctx, const uint64_t *ids, size_t n, const float *grads)
{
    s_table_t *self = ctx;
    ps_sparse_push_result_t result = { 0 };
    ps_error_t err;
    self->step++;
    int rc = ps_sparse_check_push (self->sparse, self->step, ids, n, &err);
    size_t floats = n * ps_sparse_spec (self->sparse)->dim;
    if (rc == 0 && ps_floats_find_nonfinite (grads, floats) != floats)
        rc = ps_error_set (&err, PS_EINVAL, "a non-finite gradient");
    if (rc == 0)
        rc = ps_sparse_push (self->sparse, self->step, ids, n, grads, &result);
    if (rc != 0 || result.applied != n) {
        fprintf (stderr, "bench_sparse: table push of step %llu: rc %d (%s), %zu of %zu rows "
                 "applied\n", (unsigned long long) self->step, rc, rc ? err.msg : "",
                 result.applied, n);
        return -1;
    }
    return 0;
}

static void
s_table_new (s_table_t *self, const ps_tablespec_t *spec)
{
    ps_error_t err;
    self->step = 0;
    self->sparse = ps_sparse_new (spec, &err);
    if (!self->sparse)
        s_fail ("ps_sparse_new", err.msg);
}

//  ---------------------------------------------------------------------
//  (c) the table in a ps-server over loopback


//  ZeroMQ frees nothing: the frames are the requests' own buffers, which
//  outlive every request (a reply comes after its request was sent).
static void
s_no_free (void *data, void *hint)
{
    (void) data;
    (void) hint;
}

static void
s_frame (zmq_msg_t *frame, const void *data, size_t bytes)
{
    if (zmq_msg_init_data (frame, (void *) data, bytes, s_no_free, NULL) != 0)
        s_fail ("zmq_msg_init_data", zmq_strerror (errno));
}

static void
s_remote_stop (s_remote_t *self)
{
    if (!self->socket)
        return;
    ps_msg_destroy (&self->reply);
    ps_writer_fini (&self->writer);
    zmq_close (self->socket);
    zmq_ctx_term (self->ctx);
    self->socket = NULL;
    if (harness_server_stop (&self->server, SIGTERM) != 0)
        fprintf (stderr, "bench_sparse: the server did not exit cleanly (log in %s)\n",
                 self->server.log);
    else
        unlink (self->server.log);
}

//  Send msg with nframes frames, giving it the next request id.
static void
s_remote_send (s_remote_t *self, ps_proto_t *msg, zmq_msg_t *frames, size_t nframes)
{
    ps_error_t err;
    msg->id = self->next_id++;
    ps_writer_encode (&self->writer, msg);
    if (ps_writer_send (&self->writer, self->socket, NULL, 0, frames, nframes, &err))
        s_fail ("send to the server", err.msg);
}

//  Wait for the next reply, which must be of type expect, answer a
//  request of type type and, with id not 0, to request id; returns it,
//  valid until the next receive. An error reply fails the run, or, with
//  why, is returned as NULL with its code and message in why.
static const ps_proto_t *
s_remote_recv (s_remote_t *self, uint64_t id, ps_proto_type_t type, ps_proto_type_t expect,
               char *why, size_t why_len)
{
    ps_error_t err;
    zmq_pollitem_t item = { self->socket, 0, ZMQ_POLLIN, 0 };
    int ready = zmq_poll (&item, 1, S_TIMEOUT_MS);
    if (ready < 0)
        s_fail ("zmq_poll", zmq_strerror (errno));
    if (ready == 0)
        s_fail (ps_proto_info [type].name, "the server did not answer in time");
    if (ps_msg_recv (self->reply, self->socket, false, &err)
    ||  ps_msg_decode (self->reply, &err))
        s_fail ("the server's reply", err.msg);
    const ps_proto_t *reply = ps_msg_proto (self->reply);
    if (reply->type == PS_PROTO_ERROR) {
        char detail [1024];
        snprintf (detail, sizeof detail, "%s: %s", reply->error.code, reply->error.message);
        if (!why)
            s_fail (ps_proto_info [type].name, detail);
        snprintf (why, why_len, "%s: %s: %s", ps_proto_info [type].name,
                  reply->error.code, reply->error.message);
        return NULL;
    }
    if (reply->type != expect || (id && reply->id != id))
        s_fail (ps_proto_info [type].name, "a reply of another type or request");
    return reply;
}

//  Send msg and wait for its reply (see s_remote_recv), no other request
//  being in flight.
static const ps_proto_t *
s_remote_call (s_remote_t *self, ps_proto_t *msg, zmq_msg_t *frames, size_t nframes,
               ps_proto_type_t expect, char *why, size_t why_len)
{
    assert (self->ninflight == 0);
    s_remote_send (self, msg, frames, nframes);
    return s_remote_recv (self, msg->id, msg->type, expect, why, why_len);
}

//  Start an insecure ps-server (as bench_ps's unsecured cells: raw
//  ZeroMQ encrypts nothing either) and create the table there, whole, as
//  shard 0 of 1. Returns 0, or -1 with why saying what the server answered
//  (and the server stopped) when it refused the table.
static int
s_remote_start (s_remote_t *self, const ps_tablespec_t *spec, char *why, size_t why_len)
{
    const char *args [] = { "--insecure", NULL };
    if (harness_server_start (&self->server, 0, args) != 0)
        s_fail ("ps-server", "did not start");
    self->ctx = zmq_ctx_new ();
    self->socket = self->ctx ? zmq_socket (self->ctx, ZMQ_DEALER) : NULL;
    int linger = 0;
    if (!self->socket
    ||  zmq_setsockopt (self->socket, ZMQ_LINGER, &linger, sizeof linger) != 0
    ||  zmq_connect (self->socket, self->server.endpoint) != 0)
        s_fail ("socket to the server", zmq_strerror (errno));
    ps_writer_init (&self->writer);
    self->reply = ps_msg_new ();
    self->next_id = 1;
    self->step = 0;
    snprintf (self->table, sizeof self->table, "%s", spec->name);
    self->dim = spec->dim;
    ps_proto_tablespec_t wire;
    ps_proto_tablespec_set (&wire, spec);
    ps_proto_t msg = { .type = PS_PROTO_TABLE_CREATE };
    msg.table_create = (ps_proto_table_create_t) { .tables = { 1, &wire }, .shard = 0,
                                                   .shards = 1 };
    const ps_proto_t *reply = s_remote_call (self, &msg, NULL, 0, PS_PROTO_TABLE_CREATE_OK,
                                             why, why_len);
    if (reply && reply->table_create_ok.created == 1)
        return 0;
    if (reply)
        snprintf (why, why_len, "table_create: the server created no table");
    s_remote_stop (self);
    return -1;
}

//  Take the next reply to a request in flight: a pull's rows go where it
//  asked, a push must have applied every row. Returns 0, or -1 when a
//  push did not.
static int
s_remote_reap (s_remote_t *self)
{
    assert (self->ninflight > 0);
    //  Requests in flight are all pulls or all pushes (a path times one
    //  operation at a time).
    ps_proto_type_t expect = PS_PROTO_SPARSE_PULL_OK;
    for (int i = 0; i < S_DEPTH; i++)
        if (self->inflight [i].used)
            expect = self->inflight [i].expect;
    bool pull = expect == PS_PROTO_SPARSE_PULL_OK;
    const ps_proto_t *reply = s_remote_recv (self, 0, pull ? PS_PROTO_SPARSE_PULL
                                                           : PS_PROTO_SPARSE_PUSH,
                                             expect, NULL, 0);
    int slot = -1;
    for (int i = 0; i < S_DEPTH && slot < 0; i++)
        if (self->inflight [i].used && self->inflight [i].id == reply->id)
            slot = i;
    if (slot < 0 || self->inflight [slot].expect != expect)
        s_fail (ps_proto_info [reply->type].name, "a reply to no request in flight");
    __typeof__ (self->inflight [0]) *req = &self->inflight [slot];
    req->used = false;
    self->ninflight--;
    if (pull) {
        if (ps_msg_tensor_count (self->reply) != 1)
            s_fail ("sparse_pull_ok", "not one frame of rows");
        memcpy (req->out, ps_msg_tensor (self->reply, 0), req->n * self->dim * sizeof (float));
        return 0;
    }
    const ps_proto_sparse_applied_array_t *applied = &reply->sparse_push_ok.applied;
    if (applied->count != 1 || applied->items [0].duplicate
    ||  applied->items [0].applied != req->n) {
        fprintf (stderr, "bench_sparse: server push of step %llu: %zu of %zu rows applied\n",
                 (unsigned long long) req->step,
                 applied->count ? (size_t) applied->items [0].applied : 0, req->n);
        return -1;
    }
    return 0;
}

//  Send a sparse request as msg with its frames, and take replies until
//  fewer than the view's depth are in flight.
static int
s_remote_issue (s_remote_view_t *view, ps_proto_t *msg, zmq_msg_t *frames, size_t nframes,
                ps_proto_type_t expect, size_t n, float *out)
{
    s_remote_t *self = view->remote;
    assert (self->ninflight < S_DEPTH);
    s_remote_send (self, msg, frames, nframes);
    int slot = 0;
    while (self->inflight [slot].used)
        slot++;
    self->inflight [slot].used = true;
    self->inflight [slot].expect = expect;
    self->inflight [slot].id = msg->id;
    self->inflight [slot].step = self->step;
    self->inflight [slot].n = n;
    self->inflight [slot].out = out;
    self->ninflight++;
    int rc = 0;
    while (self->ninflight >= view->depth && rc == 0)
        rc = s_remote_reap (self);
    return rc;
}

//  Take every reply still due. The requests' ids and rows, lent to
//  ZeroMQ, stay the caller's until then.
static int
s_remote_flush (void *ctx)
{
    s_remote_view_t *view = ctx;
    int rc = 0;
    while (view->remote->ninflight > 0)
        if (s_remote_reap (view->remote))
            rc = -1;
    return rc;
}

static void
s_remote_pull (void *ctx, const uint64_t *ids, size_t n, float *out)
{
    s_remote_view_t *view = ctx;
    ps_proto_sparse_ref_t ref = { view->remote->table, n, view->remote->dim };
    ps_proto_t msg = { .type = PS_PROTO_SPARSE_PULL };
    msg.sparse_pull.tables = (ps_proto_sparse_ref_array_t) { 1, &ref };
    zmq_msg_t frame;
    s_frame (&frame, ids, n * sizeof (uint64_t));
    s_remote_issue (view, &msg, &frame, 1, PS_PROTO_SPARSE_PULL_OK, n, out);
}

static int
s_remote_push (void *ctx, const uint64_t *ids, size_t n, const float *grads)
{
    s_remote_view_t *view = ctx;
    s_remote_t *self = view->remote;
    ps_proto_sparse_ref_t ref = { self->table, n, self->dim };
    ps_proto_t msg = { .type = PS_PROTO_SPARSE_PUSH };
    msg.sparse_push = (ps_proto_sparse_push_t) {
        .step = ++self->step, .worker = 0, .tables = { 1, &ref }
    };
    zmq_msg_t frames [2];
    s_frame (&frames [0], ids, n * sizeof (uint64_t));
    s_frame (&frames [1], grads, n * self->dim * sizeof (float));
    return s_remote_issue (view, &msg, frames, 2, PS_PROTO_SPARSE_PUSH_OK, n, NULL);
}

//  The server's counters of the table.
static ps_sparse_stats_t
s_remote_stats (s_remote_t *self)
{
    ps_proto_t msg = { .type = PS_PROTO_STATS };
    const ps_proto_t *reply = s_remote_call (self, &msg, NULL, 0, PS_PROTO_STATS_OK, NULL, 0);
    const ps_proto_table_stats_array_t *tables = &reply->stats_ok.tables;
    if (tables->count != 1)
        s_fail ("stats_ok", "not one table");
    const ps_proto_table_stats_t *t = &tables->items [0];
    return (ps_sparse_stats_t) {
        .rows = t->rows, .created = t->created, .evicted = t->evicted, .dropped = t->dropped,
        .pushes = t->pushes, .duplicates = t->duplicates, .row_updates = t->row_updates,
        .pulls = t->pulls, .bytes = t->bytes
    };
}
//  ---------------------------------------------------------------------
//  The check

//  Push every request once through each path (after filling the tables),
//  then compare every row with the ceiling's, bit for bit: all start rows
//  the same way and apply the same optimizer code to the same summed
//  gradients in the same order. Returns the number of elements that
//  differ (the first few are printed).
static int
s_check (const s_path_t *paths, int npaths, s_batch_t *batches, const s_plan_t *plan)
{
    for (int p = 1; p < npaths; p++)
        s_fill (&paths [p], plan);
    for (int p = 0; p < npaths; p++)
        for (int b = 0; b < plan->nbatches; b++)
            if (paths [p].push (paths [p].ctx, batches [b].uids, batches [b].m,
                                batches [b].ugrads))
                s_fail ("check", paths [p].name);
    int bad = 0;
    float *expect = s_alloc (plan->ids * plan->dim * sizeof (float));
    float *got = s_alloc (plan->ids * plan->dim * sizeof (float));
    uint64_t *ids = s_alloc (plan->ids * sizeof (uint64_t));
    for (uint64_t first = 0; first < plan->rows; first += plan->ids) {
        size_t n = plan->rows - first < plan->ids ? (size_t) (plan->rows - first) : plan->ids;
        for (size_t i = 0; i < n; i++)
            ids [i] = first + i;
        paths [0].pull (paths [0].ctx, ids, n, expect);
        for (int p = 1; p < npaths; p++) {
            paths [p].pull (paths [p].ctx, ids, n, got);
            for (size_t k = 0; k < n * plan->dim; k++)
                if (memcmp (&expect [k], &got [k], sizeof (float)) != 0 && bad++ < 5)
                    fprintf (stderr, "bench_sparse: check: row %llu element %zu: %s holds "
                             "%.9g, %s %.9g\n", (unsigned long long) (first + k / plan->dim),
                             k % plan->dim, paths [0].name, (double) expect [k],
                             paths [p].name, (double) got [k]);
        }
    }
    free (expect);
    free (got);
    free (ids);
    return bad;
}

//  ---------------------------------------------------------------------
//  PyTorch

//  What the peer measured, in requests' ids and unique rows per second.
typedef struct {
    bool ran;
    char note [512];            //  its version, or why there is no figure
    double gather_ids, adagrad_ids, adagrad_unique;
} s_peer_t;

static double
s_json_number (json_t *obj, const char *key)
{
    json_t *value = json_object_get (obj, key);
    return json_is_number (value) ? json_number_value (value) : -1;
}

static void
s_run_peer (const s_plan_t *plan, s_batch_t *batches, s_peer_t *peer)
{
    char dir [256], ids [320], out [320], log [320], rows [32], dim [16], n [32], reps [16],
         rep_s [32];
    harness_tmpdir (dir, sizeof dir);
    snprintf (ids, sizeof ids, "%s/ids.u64", dir);
    snprintf (out, sizeof out, "%s/peer.jsonl", dir);
    snprintf (log, sizeof log, "%s/peer.log", dir);
    snprintf (rows, sizeof rows, "%llu", (unsigned long long) plan->rows);
    snprintf (dim, sizeof dim, "%u", plan->dim);
    snprintf (n, sizeof n, "%zu", plan->ids);
    snprintf (reps, sizeof reps, "%d", plan->reps);
    snprintf (rep_s, sizeof rep_s, "%g", plan->rep_s);
    s_batches_write (batches, plan, ids);
    const char *argv [] = {
        plan->python, BENCH_TORCH_SCRIPT, "--rows", rows, "--dim", dim, "--ids", ids,
        "--request", n, "--reps", reps, "--rep-seconds", rep_s, "--out", out, NULL
    };
    fprintf (stderr, "bench_sparse: timing PyTorch: %s %s\n", plan->python,
             BENCH_TORCH_SCRIPT);
    json_t *lines = harness_peer_run (argv, out, log, S_PEER_TIMEOUT, peer->note,
                                      sizeof peer->note, NULL);
    if (lines) {
        json_t *result = json_array_get (lines, 0);
        peer->ran = true;
        peer->gather_ids = s_json_number (result, "gather_ids_per_s");
        peer->adagrad_ids = s_json_number (result, "adagrad_ids_per_s");
        peer->adagrad_unique = s_json_number (result, "adagrad_unique_per_s");
        json_t *version = json_object_get (result, "torch");
        snprintf (peer->note, sizeof peer->note, "PyTorch %s, 1 thread, timed in this run by "
                  "%s %s", json_is_string (version) ? json_string_value (version) : "?",
                  plan->python, BENCH_TORCH_SCRIPT);
    }
    json_decref (lines);
    harness_rmtree (dir);
}

//  ---------------------------------------------------------------------
//  Report

static void
s_print_table (const s_plan_t *plan)
{
    char a [32], b [32];
    printf ("\n%-6s %-40s %11s %14s %15s %8s %8s\n", "op", "path", "ms/request", "ids/s",
            "unique rows/s", "vs (a)", "vs (h)");
    for (int i = 0; i < s_nrows; i++) {
        const s_row_t *row = &s_rows [i];
        char ratio [2][16] = { "-", "-" };
        for (int c = 0; c < 2; c++) {
            const s_row_t *ceiling = s_row_find (row->op, "ah" [c]);
            if (ceiling && row->tag != '-')
                snprintf (ratio [c], sizeof ratio [c], "%.2f", ceiling->seconds / row->seconds);
        }
        printf ("%-6s %-40s %11.3f %14s %15s %8s %8s\n", s_op_names [row->op], row->name,
                row->seconds * 1e3,
                s_thousands (a, sizeof a, (double) plan->ids / row->seconds),
                s_thousands (b, sizeof b, row->unique / row->seconds), ratio [0], ratio [1]);
    }
}

//  A table's memory against the issue's bound for Adagrad: R x d floats
//  of weights and as many of accumulator, with 30% to spare, plus 64 MiB.
static void
s_print_memory (const char *where, const s_plan_t *plan, const ps_sparse_stats_t *stats,
                double rss, const char *rss_what, double fill_rate)
{
    double data = (double) stats->rows * plan->dim * 4 * 2;
    double bound = 1.3 * data + 64 * S_MIB;
    char rows [32], rate [32];
    printf ("\nMemory of the table %s, %s rows of %u (filled at %s rows/s):\n", where,
            s_thousands (rows, sizeof rows, (double) stats->rows), plan->dim,
            s_thousands (rate, sizeof rate, fill_rate));
    printf ("  weights + accumulators      %10.1f MiB\n", data / S_MIB);
    printf ("  bound: 1.3 x that + 64 MiB  %10.1f MiB\n", bound / S_MIB);
    printf ("  the table's stats bytes     %10.1f MiB  (%.2f x the data; %s)\n",
            (double) stats->bytes / S_MIB, (double) stats->bytes / data,
            (double) stats->bytes <= bound ? "within the bound" : "OVER the bound");
    if (rss >= 0)
        printf ("  %-27s %10.1f MiB  (%s)\n", rss_what, rss / S_MIB,
                rss <= bound ? "within the bound" : "OVER the bound");
    char row [96];
    snprintf (row, sizeof row, "table memory %s, %s", where, rss >= 0 ? rss_what : "stats bytes");
    harness_benchrow ("bench_sparse", row, "weights + accumulators", data / S_MIB,
                      (rss >= 0 ? rss : (double) stats->bytes) / S_MIB, "MiB",
                      HARNESS_LOWER_BETTER, "ours <= 1.3 x anchor + 64 MiB",
                      harness_goal ((rss >= 0 ? rss : (double) stats->bytes) <= bound));
}

static void
s_print_peer (const s_peer_t *peer, const s_plan_t *plan)
{
    char a [32], b [32];
    printf ("\nPeer: %s\n", peer->note);
    if (!peer->ran) {
        //  A row that says the peer is missing, rather than no row at all.
        char anchor [160];
        snprintf (anchor, sizeof anchor, "PyTorch sparse Adagrad: not run (%.100s)", peer->note);
        harness_benchrow ("bench_sparse", "Adagrad push in process (dedup + push)", anchor, NAN,
                          NAN, "unique rows/s", HARNESS_HIGHER_BETTER, "ratio >= 5",
                          HARNESS_GOAL_NONE);
        return;
    }
    printf ("%-50s %14s %15s\n", "", "ids/s", "unique rows/s");
    printf ("%-50s %14s %15s\n", "torch index_select over a request's ids",
            s_thousands (a, sizeof a, peer->gather_ids), "-");
    printf ("%-50s %14s %15s\n", "torch Adagrad, sparse gradient (coalesce incl.)",
            s_thousands (a, sizeof a, peer->adagrad_ids),
            s_thousands (b, sizeof b, peer->adagrad_unique));
    const s_row_t *dedup = s_row_find (S_DEDUP, '-'), *push = s_row_find (S_PUSH, 'b');
    if (!dedup || !push)
        return;
    //  PyTorch's step sums the duplicates (coalesce) too.
    double per_request = dedup->seconds + push->seconds;
    double ours = push->unique / per_request;
    printf ("%-50s %14s %15s\n", "(b) ps_sparse in process: dedup + push",
            s_thousands (a, sizeof a, (double) plan->ids / per_request),
            s_thousands (b, sizeof b, ours));
    printf ("Adagrad: the table in process does %.1fx PyTorch's unique rows/s "
            "(goal >= 5x: %s)\n", ours / peer->adagrad_unique,
            ours >= 5 * peer->adagrad_unique ? "met" : "NOT met");
    harness_benchrow ("bench_sparse", "Adagrad push in process (dedup + push)",
                      "PyTorch sparse Adagrad", peer->adagrad_unique, ours, "unique rows/s",
                      HARNESS_HIGHER_BETTER, "ratio >= 5",
                      harness_goal (ours >= 5 * peer->adagrad_unique));
}

//  The server's CPU per request beyond the table's work in process, at
//  least zero (see s_print_floors).
static double
s_beyond (double server, double table)
{
    return server > table ? server - table : 0;
}

//  Where the CPU of a request over loopback goes, and what that leaves the
//  goal on this machine: the floor of each remote path were the table as
//  fast as the array (a), from this run's own figures. One request at a
//  time (c) cannot take less than a request's round trip (that of a pull
//  of one row) and the array's work. Requests in flight (p) cannot take
//  less than the CPU the client and the server spend on one, over the
//  cores this process may use (ps_cpus.h), with the server's table work
//  ((b)'s CPU per request) at (a)'s. That is an estimate: (b) ran in this process a
//  minute before, and the same work in the server, on its serving thread
//  or its pool's, may cost more or less (a push's measured less), so the
//  server's CPU beyond it counts as at least zero. Every CPU figure is a
//  mean over the timed repetitions; the floors are compared with (a)'s
//  fastest repetition, as the goal is. A push's round trip is taken as a
//  one-row pull's.
static void
s_print_floors (double round_trip)
{
    long cores = ps_cpus_available (NULL, 0);
    printf ("\nWhere a request's CPU goes (ms per request, the mean over the timed "
            "repetitions; %ld cores):\n", cores);
    printf ("%-6s %-40s %8s %8s %16s\n", "op", "path", "client", "server",
            "server less (b)");
    for (s_op_t op = S_PULL; op <= S_PUSH; op++)
        for (const char *tag = "cp"; *tag; tag++) {
            const s_row_t *row = s_row_find (op, *tag), *b = s_row_find (op, 'b');
            if (row && b && row->cpu_server >= 0)
                printf ("%-6s %-40s %8.3f %8.3f %16.3f\n", s_op_names [op], row->name,
                        row->cpu_self * 1e3, row->cpu_server * 1e3,
                        s_beyond (row->cpu_server, b->cpu_self) * 1e3);
        }
    printf ("\nThe floors with a table as fast as the array (a), on this machine:\n");
    for (s_op_t op = S_PULL; op <= S_PUSH; op++) {
        const s_row_t *a = s_row_find (op, 'a'), *b = s_row_find (op, 'b'),
                      *p = s_row_find (op, 'p');
        if (!a || !b || !p || p->cpu_server < 0 || round_trip <= 0)
            continue;
        double beyond = s_beyond (p->cpu_server, b->cpu_self);
        double floors [2] = {
            round_trip + a->seconds, (p->cpu_self + beyond + a->cpu_self) / (double) cores
        };
        printf ("  %-5s (c) >= a round trip %.3f + (a) %.3f = %.3f ms: at most %.1f%% of (a)\n",
                s_op_names [op], round_trip * 1e3, a->seconds * 1e3, floors [0] * 1e3,
                100 * a->seconds / floors [0]);
        printf ("  %-5s (p) >= (client %.3f + server less (b) %.3f + (a) %.3f) / %ld cores = "
                "%.3f ms: at most %.1f%% of (a)\n", s_op_names [op], p->cpu_self * 1e3,
                beyond * 1e3, a->cpu_self * 1e3, cores, floors [1] * 1e3,
                100 * a->seconds / floors [1]);
        for (int f = 0; f < 2; f++) {
            char row [96];
            snprintf (row, sizeof row, "%s, ps-server (%c), floor at the array's speed",
                      s_op_names [op], "cp" [f]);
            harness_benchrow ("bench_sparse", row, "ceiling (a)", a->seconds * 1e3,
                              floors [f] * 1e3, "ms per request", HARNESS_LOWER_BETTER, NULL,
                              HARNESS_GOAL_NONE);
        }
    }
}

//  This process's resident memory in bytes, or -1.
static double
s_rss (pid_t pid)
{
    long kib = harness_status_kib (pid, "VmRSS");
    return kib < 0 ? -1 : (double) kib * 1024;
}

static void
s_usage (void)
{
    fprintf (stderr,
        "usage: bench_sparse [--quick] [--check] [--rows N] [--dim D] [--zipf S]\n"
        "                    [--batches N] [--no-peer] [--python PATH] [--server PATH]\n"
        "  --quick      1M rows, shorter repetitions\n"
        "  --check      a test: the three paths must hold the same rows; no timings\n"
        "  --rows N     rows of the table (10,000,000)\n"
        "  --dim D      floats per row (16)\n"
        "  --zipf S     exponent of the ids' power law (1.1)\n"
        "  --batches N  distinct requests, cycled (32)\n"
        "  --no-peer    do not time PyTorch\n"
        "  --python P   the Python that runs the PyTorch peer (/usr/bin/python3)\n"
        "  --server P   the ps-server to start (default $PS_SERVER, else the one\n"
        "               meson built)\n");
}

static int
s_parse (int argc, char *argv [], s_plan_t *plan)
{
    *plan = (s_plan_t) {
        .rows = 10000000, .dim = 16, .zipf = 1.1, .ids = S_FIELDS * S_BATCH, .nbatches = 32,
        .reps = 5, .rep_s = 1.0, .peer = true, .python = "/usr/bin/python3",
        .server = getenv ("PS_SERVER")
    };
    long long rows = -1, dim = -1;
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv [i + 1] : NULL;
        if (strcmp (argv [i], "--quick") == 0) {
            plan->rows = 1000000;
            plan->reps = 3;
            plan->rep_s = 0.3;
        }
        else
        if (strcmp (argv [i], "--check") == 0)
            plan->check = true;
        else
        if (strcmp (argv [i], "--no-peer") == 0)
            plan->peer = false;
        else
        if (strcmp (argv [i], "--rows") == 0 && value && (rows = atoll (value)) > 0)
            i++;
        else
        if (strcmp (argv [i], "--dim") == 0 && value && (dim = atoll (value)) > 0
        &&  dim <= PS_TABLESPEC_MAX_DIM)
            i++;
        else
        if (strcmp (argv [i], "--zipf") == 0 && value && (plan->zipf = atof (value)) > 0)
            i++;
        else
        if (strcmp (argv [i], "--batches") == 0 && value && atoi (value) > 0) {
            plan->nbatches = atoi (value);
            i++;
        }
        else
        if (strcmp (argv [i], "--python") == 0 && value)
            plan->python = argv [++i];
        else
        if (strcmp (argv [i], "--server") == 0 && value)
            plan->server = argv [++i];
        else {
            fprintf (stderr, "bench_sparse: unknown or invalid argument %s\n", argv [i]);
            s_usage ();
            return -1;
        }
    }
    if (plan->check) {
        //  Small enough for seconds under the sanitizers, with requests that
        //  repeat ids and rows that no request touches.
        plan->rows = 20000;
        plan->dim = 8;
        plan->ids = S_FIELDS * 64;
        plan->nbatches = 8;
        plan->peer = false;
    }
    if (rows > 0)
        plan->rows = (uint64_t) rows;
    if (dim > 0)
        plan->dim = (uint32_t) dim;
#ifdef BENCH_SPARSE_SERVER
    if (!plan->server && access (BENCH_SPARSE_SERVER, X_OK) == 0)
        plan->server = BENCH_SPARSE_SERVER;
#endif
    if (!plan->server)
        plan->server = "build/ps/ps-server";
    if (access (plan->server, X_OK) != 0) {
        fprintf (stderr, "bench_sparse: cannot run the server %s: %s\n", plan->server,
                 strerror (errno));
        return -1;
    }
    //  The harness starts whatever PS_SERVER names.
    if (setenv ("PS_SERVER", plan->server, 1) != 0) {
        perror ("setenv");
        return -1;
    }
    return 0;
}

//  The median round trip of a pull of one row through a path (the first
//  id of each request in turn): what a request costs before its rows do.
static double
s_round_trip (const s_path_t *path, s_batch_t *batches)
{
    double times [S_RTT_PULLS];
    float row [PS_TABLESPEC_MAX_DIM];
    for (int i = 0; i < S_RTT_PULLS; i++) {
        double start = s_now ();
        path->pull (path->ctx, batches [i % 2].uids, 1, row);
        if (path->flush && path->flush (path->ctx))
            s_fail ("round trip", path->name);
        times [i] = s_now () - start;
    }
    return harness_median (times, S_RTT_PULLS);
}

//  Time the worker's dedup and every path, (a) first, each table made and
//  filled just before its turn and freed after it, PyTorch right after
//  (b); print.
static void
s_bench (const s_path_t *paths, size_t npaths, const ps_tablespec_t *spec, s_worker_t *worker,
         s_batch_t *batches, const s_plan_t *plan)
{
    const s_path_t *array = s_path_find (paths, npaths, 'a'),
                   *huge = s_path_find (paths, npaths, 'h'),
                   *in_process = s_path_find (paths, npaths, 'b'),
                   *remote = s_path_find (paths, npaths, 'c'),
                   *pipelined = s_path_find (paths, npaths, 'p');
    s_ceiling_t *ceiling = array->ctx;
    s_table_t *table = in_process->ctx;
    s_time (S_DEDUP, NULL, worker, batches, plan);
    s_time (S_PULL, array, worker, batches, plan);
    s_time (S_PUSH, array, worker, batches, plan);
    //  One array at a time, and none when the table comes, so that this
    //  process's RSS grows by the table's memory alone.
    s_ceiling_free (ceiling);
    s_ceiling_init (ceiling, spec, plan->rows, true);
    s_time (S_PULL, huge, worker, batches, plan);
    s_time (S_PUSH, huge, worker, batches, plan);
    s_ceiling_free (ceiling);

    double rss_before = s_rss (getpid ());
    s_table_new (table, spec);
    double fill_b = s_fill (in_process, plan);
    double rss_b = s_rss (getpid ());
    rss_b = rss_before >= 0 && rss_b >= 0 ? rss_b - rss_before : -1;
    ps_sparse_stats_t stats_b;
    ps_sparse_stats (table->sparse, &stats_b);
    s_time (S_PULL, in_process, worker, batches, plan);
    s_time (S_PUSH, in_process, worker, batches, plan);
    ps_sparse_destroy (&table->sparse);

    //  PyTorch right after the table it is compared with, so that the two
    //  run in the same state of a shared machine.
    s_peer_t peer = { .note = "not run (--no-peer)" };
    if (plan->peer)
        s_run_peer (plan, batches, &peer);

    //  (c) has no figure, and says why, where the server refuses the table.
    char why [1024] = "";
    ps_sparse_stats_t stats_c = { 0 };
    double fill_c = 0, rss_c = -1, round_trip = -1;
    if (s_remote_start (&s_remote, spec, why, sizeof why) == 0) {
        fill_c = s_fill (remote, plan);
        stats_c = s_remote_stats (&s_remote);
        rss_c = s_rss (s_remote.server.pid);
        s_time (S_PULL, remote, worker, batches, plan);
        s_time (S_PUSH, remote, worker, batches, plan);
        s_time (S_PULL, pipelined, worker, batches, plan);
        s_time (S_PUSH, pipelined, worker, batches, plan);
        round_trip = s_round_trip (remote, batches);
        s_remote_stop (&s_remote);
    }

    s_print_table (plan);
    s_print_memory ("in process", plan, &stats_b, rss_b, "this process's RSS growth", fill_b);
    if (*why)
        printf ("\n(c) ps-server over loopback: no figure: %s\n", why);
    else
        s_print_memory ("in the ps-server", plan, &stats_c, rss_c, "the server's RSS", fill_c);
    s_print_peer (&peer, plan);
    if (round_trip > 0) {
        const s_row_t *a = s_row_find (S_PULL, 'a');
        printf ("\n(c) a pull of one row, its round trip: %.1f us (median of %d), against the "
                "%.1f us (a) takes for a whole request\n", round_trip * 1e6, S_RTT_PULLS,
                a->seconds * 1e6);
        harness_benchrow ("bench_sparse", "pull of one row, ps-server (c), round trip",
                          "ceiling (a), a whole request", a->seconds * 1e3, round_trip * 1e3,
                          "ms per request", HARNESS_LOWER_BETTER, NULL, HARNESS_GOAL_NONE);
        s_print_floors (round_trip);
    }
    printf ("\nGoal: the ps-server over loopback at >= 50%% of the ceiling's rows/s\n"
            "(against (a), the plain array, and (h), the array on huge pages):\n");
    for (s_op_t op = S_PULL; op <= S_PUSH; op++)
        for (const char *tag = "cp"; *tag; tag++) {
            const s_row_t *c = s_row_find (op, *tag);
            if (!c) {
                printf ("  %-5s (%c) no figure (see (c) above)\n", s_op_names [op], *tag);
                continue;
            }
            for (const char *ceiling = "ah"; *ceiling; ceiling++) {
                const s_row_t *a = s_row_find (op, *ceiling);
                printf ("  %-5s (%c) vs (%c) %5.1f%% (%s)\n", s_op_names [op], *tag, *ceiling,
                        100 * a->seconds / c->seconds,
                        2 * a->seconds >= c->seconds ? "met" : "NOT met");
                char row [64], anchor [64];
                snprintf (row, sizeof row, "%s, ps-server (%c)", s_op_names [op], *tag);
                snprintf (anchor, sizeof anchor, "ceiling (%c)", *ceiling);
                harness_benchrow ("bench_sparse", row, anchor, a->seconds * 1e3,
                                  c->seconds * 1e3, "ms per request", HARNESS_LOWER_BETTER,
                                  "ratio >= 0.50", harness_goal (2 * a->seconds >= c->seconds));
            }
        }
}

int
main (int argc, char *argv [])
{
    //  Tuned as a ps-server's heap is (ps_heap.h), so that the table in
    //  process pays for no fresh pages that the server's would not: the
    //  buffers a push allocates and frees stay in the heap.
    ps_error_t err;
    if (ps_heap_tune (&err))
        fprintf (stderr, "bench_sparse: %s\n", err.msg);
    s_plan_t plan;
    if (s_parse (argc, argv, &plan))
        return EXIT_FAILURE;
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "bench", plan.dim);
    ps_rowopt_default (&spec.opt, PS_ROWOPT_ADAGRAD);
    spec.opt.lr = 0.05;
    if (ps_tablespec_validate (&spec, &err))
        s_fail ("table spec", err.msg);

    s_batch_t *batches = s_batches_new (&plan);
    double unique = 0;
    for (int b = 0; b < plan.nbatches; b++)
        unique += (double) batches [b].m;
    unique /= plan.nbatches;
    char rows [32], ids [32];
    printf ("bench_sparse: table %s x %u float32, Adagrad lr %g; requests of %s ids, Zipf "
            "exponent %.2f over the rows: %.1f%% unique per request (%.0f rows)\n",
            s_thousands (rows, sizeof rows, (double) plan.rows), plan.dim, spec.opt.lr,
            s_thousands (ids, sizeof ids, (double) plan.ids), plan.zipf,
            100 * unique / (double) plan.ids, unique);
    //  The requests are cycled: the rows they touch between them, and so
    //  whether the timed paths run from the caches, are printed.
    ps_idmap_t *all = s_idmap_new ((size_t) (unique * plan.nbatches));
    uint32_t *index = s_alloc (plan.ids * sizeof (uint32_t));
    for (int b = 0; b < plan.nbatches; b++)
        if (ps_idmap_add (all, batches [b].uids, batches [b].m, index, &err))
            s_fail ("ps_idmap_add", err.msg);
    double touched = (double) ps_idmap_count (all);
    printf ("bench_sparse: %d distinct requests, cycled, touch %.0f rows between them: "
            "%.1f MiB of a plain array's rows, %.1f MiB of weights and accumulators\n",
            plan.nbatches, touched, touched * plan.dim * sizeof (float) / S_MIB,
            touched * plan.dim * sizeof (float) * 2 / S_MIB);
    ps_idmap_destroy (&all);
    free (index);
    fflush (stdout);

    s_worker_t worker = {
        .map = s_idmap_new (plan.ids), .index = s_alloc (plan.ids * sizeof (uint32_t)),
        .ugrads = s_alloc (plan.ids * plan.dim * sizeof (float)),
        .out = s_alloc (plan.ids * plan.dim * sizeof (float)), .dim = plan.dim
    };
    s_ceiling_t ceiling;
    s_ceiling_init (&ceiling, &spec, plan.rows, false);
    s_table_t table = { NULL, 0 };
    s_remote_view_t one = { &s_remote, 1 }, several = { &s_remote, S_DEPTH };
    char pipelined [64];
    snprintf (pipelined, sizeof pipelined, "(p) ps-server over loopback, %d in flight",
              S_DEPTH);
    s_path_t paths [] = {
        { 'a', "(a) ceiling: float array", s_ceiling_pull, s_ceiling_push, NULL, &ceiling },
        { 'h', "(h) ceiling: float array, huge pages", s_ceiling_pull, s_ceiling_push, NULL,
          &ceiling },
        { 'b', "(b) ps_sparse in process", s_table_pull, s_table_push, NULL, &table },
        { 'c', "(c) ps-server over loopback", s_remote_pull, s_remote_push, s_remote_flush,
          &one },
        { 'p', pipelined, s_remote_pull, s_remote_push, s_remote_flush, &several },
    };
    int status = EXIT_SUCCESS;
    if (plan.check) {
        char why [1024];
        s_table_new (&table, &spec);
        if (s_remote_start (&s_remote, &spec, why, sizeof why))
            s_fail ("check", why);
        const s_path_t checked [] = { paths [0], paths [2], paths [3] };
        int bad = s_check (checked, 3, batches, &plan);
        s_remote_stop (&s_remote);
        if (bad) {
            fprintf (stderr, "bench_sparse: check: %d elements differ from the array's\n",
                     bad);
            status = EXIT_FAILURE;
        }
        else
            printf ("bench_sparse: check: the array, the table in process and the table in "
                    "a ps-server hold the same %s rows after %d requests\n", rows,
                    plan.nbatches);
    }
    else
        s_bench (paths, sizeof paths / sizeof paths [0], &spec, &worker, batches, &plan);
    ps_sparse_destroy (&table.sparse);
    s_ceiling_free (&ceiling);
    ps_idmap_destroy (&worker.map);
    free (worker.index);
    free (worker.ugrads);
    free (worker.out);
    s_batches_destroy (batches, plan.nbatches);
    return status;
}
