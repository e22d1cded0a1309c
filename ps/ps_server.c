//  The ps-server; see ps_server.h for the concurrency model.

#include "ps_server.h"
#include "ps_clock.h"
#include "ps_control.h"
#include "ps_cpus.h"
#include "ps_heap.h"
#include "ps_job.h"
#include "ps_listener.h"
#include "ps_host.h"
#include "ps_log.h"
#include "ps_msg.h"
#include "ps_peers.h"
#include "ps_pool.h"
#include "ps_proto_conv.h"
#include "ps_signal.h"
#include "ps_sparsejob.h"
#include "ps_table.h"
#include "ps_tables.h"

#include <assert.h>
#include <czmq.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

//  Requests moving fewer tensor bytes than this are served inline on the
//  main thread: below it a hand-off to the pool costs more than it saves.
#define S_INLINE_BYTES  (256 * 1024)

//  A sparse request costs the server its rows' lookups more than its
//  bytes. Where the server may use at most S_FEW_CORES cores (ps_cpus.h:
//  online, affinity, cgroup quota), so that the pool's threads share the
//  cores with the clients, one is also served inline while it holds
//  fewer rows than S_INLINE_SPARSE_ROWS and fewer bytes than
//  S_INLINE_SPARSE_BYTES: the pool's hand-off (wakeups of threads on
//  other cores, and the reply's trip back) costs more than its tasks side
//  by side save. Measured with bench_sparse (10M rows, 2 cores, runs
//  interleaved; README, "Sparse requests served inline on a small
//  machine"). With more cores the pool keeps such requests, from several
//  workers at once, on its threads side by side; that was not measured.
#define S_FEW_CORES            2
#define S_INLINE_SPARSE_ROWS   8192
#define S_INLINE_SPARSE_BYTES  (1024 * 1024)

//  After this long without a request, a server that has moved tensors since
//  it last fell idle returns its free heap to the kernel (see ps_heap.h).
#define S_IDLE_RELEASE_MS  500

//  How often a server serving on after a stop signal checks its link.
#define S_GRACE_POLL_MS  100

//  How long the last replies may take to leave when the server closes.
#define S_LINGER_MS  1000

struct _ps_server_t {
    void *router;               //  in ps_curve_context (), where zauth serves
    ps_listener_t *listener;    //  the bound endpoint and its connections
    char ipc [256];             //  the same-host endpoint bound beside it, or ""
    bool ipc_plain;             //  its connections use PLAIN (ps_curve.h, same-host plane)
    char advert [PS_HOST_SET_MAX];  //  what peers are told (ps_host.h)
    char name [64];
    ps_curve_t *curve;          //  the caller's; NULL: unsecured
    ps_table_t *table;          //  the partitions held
    ps_tables_t *tables;        //  the embedding table shards held
    ps_control_t *control;      //  the coordinator's requests, and the fence
    ps_pool_t *pool;            //  applies large requests' partitions in parallel
    bool few_cores;             //  S_FEW_CORES or fewer to use
    ps_msg_t **spare_msgs;      //  received-message objects for reuse
    size_t nspare, spare_cap;
    ps_writer_t writer;         //  reply headers; main thread only
    uint64_t requests, errors;
    bool shutdown;              //  a shutdown request was answered
    int stop_grace_ms;          //  serving on after a stop signal (ps_server_set_stop_grace)
    ps_link_t *link;
    //  The bytes held for each peer: gradients being applied and replies
    //  ZeroMQ has not sent yet, and the back-pressure they decide.
    ps_peers_t *peers;
};

//  ---------------------------------------------------------------------
//  Construction

//  Bind the router also to an ipc:// endpoint for peers on this host
//  (ps_host.h), when it serves tcp. The same socket: where the keys have
//  passwords, its ipc endpoint takes PLAIN, the same-host data plane of
//  ps_curve.h, and its tcp endpoint stays CurveZMQ (ZeroMQ fixes each
//  endpoint's mechanism when it binds); else CurveZMQ guards both alike.
//  A failure costs only speed: it is logged, and peers on this host use
//  tcp.
static void
s_bind_ipc (ps_server_t *self)
{
    const char *tcp = ps_listener_endpoint (self->listener);
    if (strncmp (tcp, "tcp://", 6) != 0)
        return;
    ps_error_t err = { 0 };
    char ipc [sizeof self->ipc];
    bool plain = self->curve && ps_curve_local_serves (self->curve);
    if (ps_host_ipc_endpoint ("ps", tcp, ipc, sizeof ipc, &err)
    ||  (plain && ps_curve_local_server (self->curve, self->router, &err))
    ||  ps_listener_bind_also (self->listener, ipc, &err)) {
        ps_warn ("peers on this host use %s: %s", tcp, err.msg);
        return;
    }
    memcpy (self->ipc, ipc, sizeof self->ipc);
    self->ipc_plain = plain;
    if (plain)
        ps_info ("peers of this user on this host connect at %s with PLAIN: each proves its "
                 "task by its password, and nothing is encrypted, since only this user can "
                 "reach the socket (README.md, \"Security\")", ipc);
}

ps_server_t *
ps_server_new (const ps_server_config_t *config, ps_error_t *err)
{
    if (config->max_pending == 0) {
        ps_error_set (err, PS_EINVAL, "max_pending is 0, expected a number of bytes");
        return NULL;
    }
    if (config->threads < 0 || config->threads > 256) {
        ps_error_set (err, PS_EINVAL, "threads is %d, expected 0..256", config->threads);
        return NULL;
    }
    ps_table_t *table = ps_table_new ();
    ps_tables_t *tables = ps_tables_new ();
    ps_tables_set_budget (tables, config->memory_limit);
    ps_control_t *control = ps_control_new (table, tables, &config->opt,
                                            config->checkpoint_root, err);
    if (!control) {
        ps_table_destroy (&table);
        ps_tables_destroy (&tables);
        return NULL;
    }
    ps_server_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->table = table;
    self->tables = tables;
    self->control = control;
    snprintf (self->name, sizeof self->name, "%s", config->name ? config->name : "ps");
    self->curve = config->curve;
    self->peers = ps_peers_new (config->max_pending, config->max_peer_pending
                                                     ? config->max_peer_pending
                                                     : config->max_pending);
    ps_writer_init (&self->writer);
    self->router = zmq_socket (ps_curve_context (), ZMQ_ROUTER);
    int linger = S_LINGER_MS;   //  flush the last replies, but never hang
    int hwm = 0;                //  replies are never dropped; memory is bounded per peer
    //  IPv6 only for an IPv6 literal: with it on, IPv4 endpoints would be
    //  reported in their mapped form.
    int ipv6 = strchr (config->bind, '[') != NULL;
    if (!self->router
    ||  zmq_setsockopt (self->router, ZMQ_IPV6, &ipv6, sizeof ipv6) != 0
    ||  zmq_setsockopt (self->router, ZMQ_LINGER, &linger, sizeof linger) != 0
    ||  zmq_setsockopt (self->router, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0
    ||  zmq_setsockopt (self->router, ZMQ_MAXMSGSIZE, &config->max_message,
                        sizeof config->max_message) != 0) {
        ps_error_set (err, PS_EIO, "creating sockets: %s", zmq_strerror (errno));
        goto fail;
    }
    if (self->curve && ps_curve_data_server (self->curve, self->router, err))
        goto fail;
    //  The connection monitor's socket lives with the ROUTER it watches.
    self->listener = ps_listener_new (ps_curve_context (), self->router, config->bind, err);
    if (!self->listener)
        goto fail;
    if (config->same_host)
        s_bind_ipc (self);
    if (ps_host_set (ps_listener_endpoint (self->listener), self->ipc [0] ? self->ipc : NULL,
                     self->ipc_plain, self->advert, sizeof self->advert, err))
        goto fail;
    self->few_cores = ps_cpus_available (NULL, 0) <= S_FEW_CORES;
    self->pool = ps_pool_new (config->threads, err);
    if (!self->pool)
        goto fail;
    return self;
fail:
    ps_server_destroy (&self);
    return NULL;
}

void
ps_server_destroy (ps_server_t **self_p)
{
    assert (self_p);
    ps_server_t *self = *self_p;
    if (!self)
        return;
    ps_pool_destroy (&self->pool);
    ps_listener_destroy (&self->listener);
    //  The ipc endpoint's file goes before the tcp endpoint is let go of,
    //  so a server restarted on the same tcp endpoint, which binds the
    //  same file, never has it removed under it.
    if (self->ipc [0] && unlink (self->ipc + 6) != 0 && errno != ENOENT)
        ps_warn ("removing %s: %s", self->ipc + 6, strerror (errno));
    if (self->router) {
        zmq_close (self->router);
        //  The router's context outlives this server, so closing it does
        //  not wait for the replies still queued: ZeroMQ releases them
        //  (sent, or dropped once the linger has passed) later, calling
        //  back into the pending count. Wait for that, or the callbacks
        //  would write into freed memory.
        double deadline = ps_clock_ms () + S_LINGER_MS + 2000;
        while (!ps_peers_idle (self->peers) && ps_clock_ms () < deadline)
            usleep (1000);
        if (!ps_peers_idle (self->peers)) {
            ps_peers_stats_t stats;
            ps_peers_stats (self->peers, &stats);
            ps_error ("%zu reply bytes still held by ZeroMQ %d ms after closing; not freeing "
                      "the server", stats.pending, S_LINGER_MS + 2000);
            *self_p = NULL;
            return;
        }
    }
    //  Every reply frame is freed now (waited for above): no peer is
    //  referenced but by the table.
    ps_peers_destroy (&self->peers);
    ps_control_destroy (&self->control);
    ps_table_destroy (&self->table);
    ps_tables_destroy (&self->tables);
    for (size_t i = 0; i < self->nspare; i++)
        ps_msg_destroy (&self->spare_msgs [i]);
    free (self->spare_msgs);
    ps_writer_fini (&self->writer);
    free (self);
    *self_p = NULL;
}

const char *
ps_server_endpoint (ps_server_t *self)
{
    assert (self);
    return ps_listener_endpoint (self->listener);
}

const char *
ps_server_advert (ps_server_t *self)
{
    assert (self);
    return self->advert;
}

//  ---------------------------------------------------------------------
//  Replies

//  Send the reply packed in writer, and nframes tensor frames, to the peer
//  that sent msg. The header frame is charged to the peer like the tensor
//  frames, so that small replies a peer does not read count too.
static void
s_reply (ps_server_t *self, ps_msg_t *msg, ps_peer_t *peer, ps_writer_t *writer,
         zmq_msg_t *frames, size_t nframes)
{
    zmq_msg_t *envelope;
    size_t nenvelope = ps_msg_envelope (msg, &envelope);
    zmq_msg_t header;
    void *data = ps_peer_frame_new (peer, writer->sbuf.size, &header);
    if (!data)
        abort ();
    memcpy (data, writer->sbuf.data, writer->sbuf.size);
    ps_error_t err;
    //  A peer that left before its reply is not the server's failure.
    if (ps_msg_send_frames (self->router, envelope, nenvelope, &header, frames, nframes, &err))
        ps_warn ("cannot send reply to request %llu: %s",
                 (unsigned long long) ps_msg_id (msg), err.msg);
}

//  Send an error reply, unlogged: see s_reply_error.
static void
s_reply_refusal (ps_server_t *self, ps_msg_t *msg, ps_peer_t *peer, int code,
                 const char *message)
{
    self->errors++;
    ps_writer_error (&self->writer, ps_msg_id (msg), code, message);
    s_reply (self, msg, peer, &self->writer, NULL, 0);
}

static void
s_reply_error (ps_server_t *self, ps_msg_t *msg, ps_peer_t *peer, int code, const char *text)
{
    //  Messages quote what the peer sent (names, types, keys); its control
    //  bytes must not reach the log or the reply as they came.
    char message [PS_ERROR_MSG_MAX];
    size_t len = 0;
    for (; text [len] && len + 1 < sizeof message; len++)
        message [len] = text [len] >= 0x20 && text [len] < 0x7f ? text [len] : '?';
    message [len] = 0;
    //  A forbidden request was logged once for its sender's key already.
    if (code != PS_EPERM)
        ps_warn ("request %llu refused: %s: %s", (unsigned long long) ps_msg_id (msg),
                 ps_error_name (code), message);
    s_reply_refusal (self, msg, peer, code, message);
}

//  ---------------------------------------------------------------------
//  Push, pull and push-pull

static ps_msg_t *
s_msg_take (ps_server_t *self)
{
    return self->nspare ? self->spare_msgs [--self->nspare] : ps_msg_new ();
}

static void
s_msg_give (ps_server_t *self, ps_msg_t *msg)
{
    ps_msg_clear (msg);
    if (self->nspare == self->spare_cap) {
        self->spare_cap = self->spare_cap ? 2 * self->spare_cap : 8;
        self->spare_msgs = realloc (self->spare_msgs, self->spare_cap * sizeof (ps_msg_t *));
        if (!self->spare_msgs)
            abort ();
    }
    self->spare_msgs [self->nspare++] = msg;
}

//  Answer a job whose tasks are done, and destroy it.
static void
s_job_finish (ps_server_t *self, ps_job_t *job)
{
    ps_error_t err;
    zmq_msg_t *frames;
    size_t nframes;
    int rc = ps_job_reply (job, &self->writer, &frames, &nframes, &err);
    if (rc)
        s_reply_error (self, ps_job_msg (job), ps_job_peer (job), rc, err.msg);
    else
        s_reply (self, ps_job_msg (job), ps_job_peer (job), &self->writer, frames, nframes);
    s_msg_give (self, ps_job_destroy (&job));
}

//  Serve a push, pull or push-pull: the job owns msg from here on. Small
//  ones run inline, where a hand-off to the pool would cost more than it
//  saves.
static void
s_handle_data (ps_server_t *self, ps_msg_t *msg, ps_peer_t *peer)
{
    ps_job_t *job = ps_job_new (msg, peer);
    ps_job_apply_on (job, self->pool);
    ps_error_t err;
    int rc = ps_job_prepare (job, self->table, ps_control_fence_generation (self->control), &err);
    if (rc) {
        s_reply_error (self, msg, peer, rc, err.msg);
        s_msg_give (self, ps_job_destroy (&job));
    }
    else
    if (ps_pool_size (self->pool) == 0 || ps_job_bytes (job) < S_INLINE_BYTES
    ||  ps_job_tasks (job) == 0) {
        ps_job_run (job);
        s_job_finish (self, job);
    }
    else
        ps_pool_submit (self->pool, ps_job_pool_job (job), ps_job_scans (job));
}

//  Answer a sparse job whose tasks are done, and destroy it.
static void
s_sparsejob_finish (ps_server_t *self, ps_sparsejob_t *job)
{
    ps_error_t err;
    zmq_msg_t *frames;
    size_t nframes;
    int rc = ps_sparsejob_reply (job, &self->writer, &frames, &nframes, &err);
    if (rc)
        s_reply_error (self, ps_sparsejob_msg (job), ps_sparsejob_peer (job), rc, err.msg);
    else
        s_reply (self, ps_sparsejob_msg (job), ps_sparsejob_peer (job), &self->writer, frames,
                 nframes);
    s_msg_give (self, ps_sparsejob_destroy (&job));
}

//  Whether a prepared sparse job is served inline (S_INLINE_SPARSE_ROWS
//  says why).
static bool
s_sparse_inline (ps_server_t *self, ps_sparsejob_t *job)
{
    size_t bytes = ps_sparsejob_bytes (job);
    return ps_pool_size (self->pool) == 0 || bytes < S_INLINE_BYTES
        || (self->few_cores && ps_sparsejob_rows (job) < S_INLINE_SPARSE_ROWS
            && bytes < S_INLINE_SPARSE_BYTES);
}

//  Serve a sparse pull, push or push-pull as s_handle_data serves a dense
//  one, small ones inline: the job owns msg from here on.
static void
s_handle_sparse (ps_server_t *self, ps_msg_t *msg, ps_peer_t *peer)
{
    ps_sparsejob_t *job = ps_sparsejob_new (msg, peer);
    ps_error_t err;
    int rc = ps_sparsejob_prepare (job, self->tables,
                                   ps_control_fence_generation (self->control), &err);
    if (rc) {
        s_reply_error (self, msg, peer, rc, err.msg);
        s_msg_give (self, ps_sparsejob_destroy (&job));
    }
    else
    if (s_sparse_inline (self, job)) {
        ps_sparsejob_run (job);
        s_sparsejob_finish (self, job);
    }
    else
        ps_pool_submit (self->pool, ps_sparsejob_pool_job (job), true);
}

//  ---------------------------------------------------------------------
//  The server's own requests (the coordinator's are in ps_control.c)

//  The stats of every table shard, in name order, into a new array of
//  *count entries that the caller frees.
static ps_proto_table_stats_t *
s_table_stats (ps_server_t *self, size_t *count)
{
    ps_tshard_t **list = ps_tables_sorted (self->tables, count);
    ps_proto_table_stats_t *entries = calloc (*count + 1, sizeof *entries);
    if (!entries)
        abort ();
    for (size_t i = 0; i < *count; i++) {
        ps_sparse_stats_t stats;
        ps_sparse_t *table = ps_tshard_table (list [i]);
        ps_sparse_stats (table, &stats);
        entries [i] = (ps_proto_table_stats_t) {
            .table = ps_tshard_name (list [i]), .dim = ps_tshard_dim (list [i]),
            .shard = ps_tshard_shard (list [i]), .shards = ps_tshard_shards (list [i]),
            .rows = stats.rows, .created = stats.created, .evicted = stats.evicted,
            .dropped = stats.dropped, .oom = stats.oom, .pushes = stats.pushes, .duplicates = stats.duplicates,
            .row_updates = stats.row_updates, .pulls = stats.pulls,
            .steps = ps_sparse_steps_applied (table),
            .nonfinite = ps_tshard_nonfinite (list [i]), .bytes = stats.bytes };
    }
    free (list);
    return entries;
}

//  Log the memory the table shards hold, so that it can be measured
//  against their rows (README.md, Training a CTR model).
static void
s_log_table_memory (ps_server_t *self)
{
    size_t count;
    ps_proto_table_stats_t *entries = s_table_stats (self, &count);
    uint64_t rows = 0, bytes = 0;
    for (size_t i = 0; i < count; i++) {
        rows += entries [i].rows;
        bytes += entries [i].bytes;
        ps_info ("table %s shard %llu of %llu: %llu rows of %llu floats, %llu bytes",
                 entries [i].table, (unsigned long long) entries [i].shard,
                 (unsigned long long) entries [i].shards, (unsigned long long) entries [i].rows,
                 (unsigned long long) entries [i].dim, (unsigned long long) entries [i].bytes);
    }
    if (count)
        ps_info ("tables: %zu shards, %llu rows, %llu bytes (%.1f MiB)", count,
                 (unsigned long long) rows, (unsigned long long) bytes, bytes / 1048576.0);
    free (entries);
}

static int
s_handle_stats (ps_server_t *self, const ps_proto_t *req, ps_proto_t *reply, ps_error_t *err)
{
    (void) req;
    (void) err;
    size_t count;
    ps_partition_t **list = ps_table_sorted (self->table, &count);
    ps_proto_part_stats_t *entries = calloc (count + 1, sizeof *entries);
    uint64_t *dims = calloc ((count + 1) * (PS_MAX_RANK + 2), sizeof *dims);
    if (!entries || !dims)
        abort ();
    for (size_t i = 0; i < count; i++) {
        ps_partition_stats_t stats;
        ps_partition_stats (list [i], &stats);
        ps_proto_part_stats_t *entry = &entries [i];
        uint64_t *rows = dims + i * (PS_MAX_RANK + 2);
        rows [0] = (uint64_t) ps_partition_row_begin (list [i]);
        rows [1] = (uint64_t) ps_partition_row_end (list [i]);
        *entry = (ps_proto_part_stats_t) {
            .var = ps_partition_var (list [i]), .part = ps_partition_part (list [i]),
            .rows = { 2, rows }, .updates = stats.updates, .duplicates = stats.duplicates,
            .recorded = stats.recorded, .bytes_in = stats.bytes_in,
            .bytes_out = stats.bytes_out, .nonfinite = stats.nonfinite };
        ps_proto_shape_set (&entry->shape, rows + 2, ps_partition_shape (list [i]));
    }
    ps_peers_stats_t peers;
    ps_peers_stats (self->peers, &peers);
    size_t ntables;
    ps_proto_table_stats_t *tables = s_table_stats (self, &ntables);
    reply->stats_ok = (ps_proto_stats_ok_t) {
        .partitions = { count, entries }, .requests = self->requests, .errors = self->errors,
        .pending = peers.pending, .refused = peers.refused, .dropped = peers.dropped,
        .tables = { ntables, tables } };
    ps_writer_encode (&self->writer, reply);
    free (tables);
    free (dims);
    free (entries);
    free (list);
    return PS_OK;
}

static int
s_handle_ping (ps_server_t *self, const ps_proto_t *req, ps_proto_t *reply, ps_error_t *err)
{
    (void) req;
    (void) err;
    reply->ping_ok = (ps_proto_ping_ok_t) { self->name, ps_table_size (self->table) };
    ps_writer_encode (&self->writer, reply);
    return PS_OK;
}

static int
s_handle_shutdown (ps_server_t *self, const ps_proto_t *req, ps_proto_t *reply,
                   ps_error_t *err)
{
    (void) req;
    (void) err;
    ps_info ("shutdown requested");
    self->shutdown = true;
    ps_writer_encode (&self->writer, reply);
    return PS_OK;
}

//  Answer the jobs the pool has finished.
static int
s_collect_done (ps_server_t *self)
{
    while (true) {
        ps_pool_job_t *job;
        int rc = ps_pool_collect (self->pool, &job);
        if (rc <= 0)
            return rc;
        ps_sparsejob_t *sparse = ps_sparsejob_from_pool (job);
        if (sparse)
            s_sparsejob_finish (self, sparse);
        else
            s_job_finish (self, ps_job_from_pool (job));
    }
}

//  Answer every job of the pool, waiting for the ones still running.
//  Called on the serving thread, which alone submits jobs, so none starts
//  meanwhile: once it returns 0, every push received so far is applied
//  and answered and none is half-way, a cut of partitions and tables
//  alike. PS_EIO when the pool's socket fails (errno kept).
static int
s_drain_pool (ps_server_t *self)
{
    while (ps_pool_busy (self->pool) > 0) {
        zmq_pollitem_t done = { ps_pool_done_socket (self->pool), 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&done, 1, -1) < 0 && errno != EINTR)
            return PS_EIO;
        if (s_collect_done (self))
            return PS_EIO;
    }
    return PS_OK;
}

//  ---------------------------------------------------------------------
//  Dispatch

//  A handler of the server's own requests: it fills and encodes reply
//  (type and id already set) into the server's writer, or returns an error
//  code with err saying why, having changed nothing.
typedef int (s_server_fn) (ps_server_t *self, const ps_proto_t *req, ps_proto_t *reply,
                           ps_error_t *err);

//  The requests ps-server serves, by type: data requests (push, pull,
//  push-pull) become jobs, which may run on the pool; the others are
//  answered on the main thread, by the server itself or by its control
//  module. A type without a row is not a request of ps-server. Who may send
//  each is protocol.json's 'senders' column.
static const struct {
    bool data;
    bool sparse;
    bool cut;                   //  served once the pool holds no job (s_drain_pool)
    s_server_fn *server;
    ps_control_fn *control;
} s_serves [PS_PROTO_NTYPES] = {
    [PS_PROTO_PUSH] = { .data = true },
    [PS_PROTO_PULL] = { .data = true },
    [PS_PROTO_PUSH_PULL] = { .data = true },
    [PS_PROTO_SPARSE_PULL] = { .sparse = true },
    [PS_PROTO_SPARSE_PUSH] = { .sparse = true },
    [PS_PROTO_SPARSE_PUSH_PULL] = { .sparse = true },
    [PS_PROTO_PING] = { .server = s_handle_ping },
    [PS_PROTO_STATS] = { .server = s_handle_stats },
    [PS_PROTO_SHUTDOWN] = { .server = s_handle_shutdown },
    [PS_PROTO_CREATE] = { .control = ps_control_create },
    [PS_PROTO_SET_OPTIMIZER] = { .control = ps_control_set_optimizer },
    [PS_PROTO_SNAPSHOT] = { .cut = true, .control = ps_control_snapshot },
    [PS_PROTO_RESTORE] = { .cut = true, .control = ps_control_restore },
    [PS_PROTO_FENCE] = { .control = ps_control_fence },
    [PS_PROTO_PROBE_ROOT] = { .control = ps_control_probe_root },
    [PS_PROTO_TABLE_CREATE] = { .control = ps_control_table_create },
};

//  Serve a request answered on the main thread.
static void
s_handle_control (ps_server_t *self, ps_msg_t *msg, ps_peer_t *peer)
{
    const ps_proto_t *req = ps_msg_proto (msg);
    ps_proto_t reply = { .type = ps_proto_info [req->type].reply, .id = req->id };
    ps_error_t err;
    int rc = PS_OK;
    //  A snapshot of a push half-way applied would hold some of its rows
    //  and not others, or a ledger that disagrees with its rows; a restore
    //  under one would have it land on the restored values. Neither runs
    //  beside a job.
    if (s_serves [req->type].cut && s_drain_pool (self))
        rc = ps_error_set (&err, PS_EIO, "%s: waiting for the updates in progress: %s",
                           ps_proto_info [req->type].name, zmq_strerror (errno));
    if (rc == PS_OK)
        rc = s_serves [req->type].server
           ? s_serves [req->type].server (self, req, &reply, &err)
           : s_serves [req->type].control (self->control, req, &reply, &self->writer, &err);
    if (rc)
        s_reply_error (self, msg, peer, rc, err.msg);
    else
        s_reply (self, msg, peer, &self->writer, NULL, 0);
}

//  Whether the sender of a secured request may make it (see ps_server.h and
//  the 'senders' column of schemas/protocol.json); if not, answers
//  "forbidden" and logs it once per key.
static bool
s_authorized (ps_server_t *self, ps_msg_t *msg, ps_peer_t *client)
{
    const ps_proto_info_t *info = &ps_proto_info [ps_msg_proto (msg)->type];
    const char *task = ps_curve_data_task (ps_msg_property (msg, PS_CURVE_PEER_KEY),
                                           ps_msg_property (msg, PS_CURVE_PEER_TASK));
    if (ps_proto_may_send (ps_msg_proto (msg)->type, task))
        return true;
    char text [192];
    snprintf (text, sizeof text, "%s: only %s may ask this of %s, not %s", info->name,
              info->senders_text, self->name, task ? task : "an unnamed peer");
    const char *key = ps_msg_property (msg, PS_CURVE_PEER_KEY);
    if (ps_curve_first_refusal (self->curve, key ? key : ""))
        ps_warn ("refused %s (key %s; its later refusals are not logged)", text,
                 key ? key : "none");
    s_reply_error (self, msg, client, PS_EPERM, text);
    return false;
}

//  Whether type answers a request (error answers any).
static bool
s_is_reply (ps_proto_type_t type)
{
    for (int request = 1; request < PS_PROTO_NTYPES; request++)
        if (ps_proto_info [request].reply == type)
            return true;
    return type == PS_PROTO_ERROR;
}

//  Receive and serve one request; returns true when the server should stop.
static bool
s_handle_request (ps_server_t *self)
{
    ps_msg_t *msg = s_msg_take (self);
    ps_error_t err;
    int rc = ps_msg_recv (msg, self->router, true, &err);
    self->requests++;
    if (rc == PS_EIO) {
        ps_warn ("receive failed: %s", err.msg);
        s_msg_give (self, msg);
        return false;
    }
    //  The ROUTER puts the peer's routing id first: whatever else the
    //  message holds, the peer is known, and is served or turned away
    //  before any work is done for it.
    zmq_msg_t *envelope;
    size_t nenvelope = ps_msg_envelope (msg, &envelope);
    assert (nenvelope > 0);
    const void *id = zmq_msg_data (&envelope [0]);
    size_t id_size = zmq_msg_size (&envelope [0]);
    ps_peer_t *peer = ps_peers_lookup (self->peers, id, id_size);
    if (!peer)
        peer = ps_peers_add (self->peers, id, id_size, ps_msg_peer_address (msg));
    char reason [PS_ERROR_MSG_MAX];
    ps_peer_verdict_t verdict = ps_peers_admit (self->peers, peer, reason, sizeof reason);
    if (verdict == PS_PEER_DROP) {
        s_msg_give (self, msg);
        return false;
    }
    if (rc == PS_OK)
        rc = ps_msg_decode (msg, &err);
    if (rc == PS_OK)
        ps_debug ("request %llu: %s, %zu tensor bytes", (unsigned long long) ps_msg_id (msg),
                  ps_msg_type (msg), ps_msg_tensor_bytes (msg));
    ps_proto_type_t type = rc == PS_OK ? ps_msg_proto (msg)->type : PS_PROTO_NONE;
    //  Back-pressure refusals are logged once per episode, not each.
    if (verdict == PS_PEER_REFUSE)
        s_reply_refusal (self, msg, peer, PS_ETOOBIG, reason);
    else
    if (rc)
        s_reply_error (self, msg, peer, rc, err.msg);
    else
    if (!s_serves [type].data && !s_serves [type].sparse && !s_serves [type].server
    &&  !s_serves [type].control) {
        char text [128];
        snprintf (text, sizeof text, "header: '%s' is %s", ps_proto_info [type].name,
                  s_is_reply (type) ? "a reply type, not a request"
                                    : "not a request ps-server serves");
        s_reply_error (self, msg, peer, PS_EPROTO, text);
    }
    else
    if (self->curve && !s_authorized (self, msg, peer))
        ;                       //  answered "forbidden"
    else
    if (s_serves [type].data) {
        s_handle_data (self, msg, peer);
        return false;           //  the job owns msg now
    }
    else
    if (s_serves [type].sparse) {
        s_handle_sparse (self, msg, peer);
        return false;           //  the job owns msg now
    }
    else
        s_handle_control (self, msg, peer);
    s_msg_give (self, msg);
    return self->shutdown;
}

void
ps_server_set_stop_grace (ps_server_t *self, int grace_ms, ps_link_t *link)
{
    assert (self);
    self->stop_grace_ms = grace_ms;
    self->link = link;
}

//  Whether the coordinator may still need this server after a stop signal:
//  it is linked, registered and has not said the run is over.
static bool
s_coordinator_needs (ps_server_t *self)
{
    return self->link && ps_link_registered (self->link) && !ps_link_finished (self->link);
}

//  A stop signal on stop_fd. Returns true when the server stops now; the
//  first signal to a server whose coordinator still needs it sets
//  *grace_end (ps_clock_ms) instead.
static bool
s_on_stop_signal (ps_server_t *self, int stop_fd, double *grace_end)
{
    int signo = ps_signal_take (stop_fd);
    if (signo == 0)
        return false;
    char name [32];
    ps_signal_name (signo, name, sizeof name);
    if (*grace_end > 0) {
        ps_warn ("%s again: stopping at once", name);
        return true;
    }
    if (self->stop_grace_ms <= 0 || !s_coordinator_needs (self)) {
        ps_info ("%s: stopping", name);
        return true;
    }
    *grace_end = ps_clock_ms () + self->stop_grace_ms;
    ps_warn ("%s: serving on until the coordinator has written its final checkpoint and says "
             "stop (at most %d s; a second signal stops at once)", name,
             self->stop_grace_ms / 1000);
    return false;
}

int
ps_server_run (ps_server_t *self, int stop_fd)
{
    assert (self);
    zmq_pollitem_t items [] = {
        { self->router, 0, ZMQ_POLLIN, 0 },
        { ps_pool_done_socket (self->pool), 0, ZMQ_POLLIN, 0 },
        { ps_listener_events (self->listener), 0, ZMQ_POLLIN, 0 },
        { NULL, stop_fd, ZMQ_POLLIN, 0 },
    };
    int nitems = stop_fd >= 0 ? 4 : 3;
    bool stop = false;
    bool busy = false;          //  requests served since the heap was released
    double grace_end = 0;       //  serving on after a stop signal until then
    int rc = PS_OK;
    ps_error_t err;
    while (!stop) {
        //  After a stop signal the server looks at its coordinator at
        //  least every S_GRACE_POLL_MS, and stops once it is not needed.
        int timeout = busy ? S_IDLE_RELEASE_MS : -1;
        if (grace_end > 0) {
            //  The run's end is not enough: the coordinator's shutdown
            //  request follows it, and should find the server there.
            if (!ps_link_registered (self->link)) {
                ps_info ("the coordinator has gone: stopping");
                stop = true;
                break;
            }
            if (ps_clock_ms () >= grace_end) {
                ps_warn ("no stop from the coordinator within %d s of the stop signal: "
                         "stopping", self->stop_grace_ms / 1000);
                stop = true;
                break;
            }
            timeout = S_GRACE_POLL_MS;
        }
        //  The socket is read whatever the server holds: back-pressure is
        //  per peer (ps_peers.h), and reading is also what lets ZeroMQ
        //  process a departed peer's disconnection and free its replies.
        int ready = zmq_poll (items, nitems, timeout);
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            ps_error ("zmq_poll: %s", zmq_strerror (errno));
            rc = PS_EIO;
            break;
        }
        if (ready == 0) {
            if (busy && ps_pool_busy (self->pool) == 0) {
                ps_heap_release ();
                ps_peers_sweep (self->peers);
                busy = false;
            }
            continue;
        }
        busy = true;
        if ((items [1].revents & ZMQ_POLLIN) && s_collect_done (self)) {
            ps_error ("pool notification failed: %s", zmq_strerror (errno));
            rc = PS_EIO;
            break;
        }
        if ((items [2].revents & ZMQ_POLLIN) && ps_listener_handle (self->listener, &err)) {
            ps_error ("%s", err.msg);
            rc = PS_EIO;
            break;
        }
        if (items [0].revents & ZMQ_POLLIN)
            stop = s_handle_request (self);
        if (nitems == 4 && (items [3].revents & ZMQ_POLLIN)
        &&  s_on_stop_signal (self, stop_fd, &grace_end))
            stop = true;
    }
    if (rc == PS_OK && stop)
        s_log_table_memory (self);
    //  Finish and answer the updates in progress before returning.
    if (s_drain_pool (self))
        ps_error ("pool notification failed: %s", zmq_strerror (errno));
    return rc;
}
