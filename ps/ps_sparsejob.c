//  A sparse pull, push or push-pull in progress; see ps_sparsejob.h.

#include "ps_sparsejob.h"
#include "ps_floats.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

//  A pull that no push precedes is cut into tasks of at most this many
//  ids, so that the pool's threads share a large one: a pull changes
//  nothing, and its ids' rows land in disjoint parts of the reply frame.
#define S_PULL_CHUNK  4096

//  A pushed table: its ids and gradients, read in place, and the outcome.
typedef struct {
    ps_tshard_t *tshard;        //  linked
    const uint64_t *ids;
    const float *grads;
    size_t count;
    bool duplicate;             //  the table had applied the step before
    ps_sparse_push_result_t result;
    size_t nonfinite;           //  index + 1 of the first NaN or infinity, or 0
} s_push_entry_t;

//  A part of a pull that is a task of its own: ids [begin, end) of entry.
typedef struct {
    size_t entry, begin, end;
} s_chunk_t;

//  A pulled table: its ids, read in place, and the task that pulls it.
typedef struct {
    ps_tshard_t *tshard;        //  linked
    const uint64_t *ids;
    size_t count;
    size_t after;               //  the push entry whose task pulls it after
                                //  pushing, or SIZE_MAX: a task of its own
} s_pull_entry_t;

struct _ps_sparsejob_t {
    ps_pool_job_t base;         //  its tasks; first, for the pool
    ps_msg_t *msg;
    ps_peer_t *peer;            //  who sent it, charged with what it holds
    size_t held;                //  request bytes charged to the peer
    size_t bytes;               //  bytes in and out
    size_t nrows;               //  rows pushed, and pulled by tasks of their own
    const char *type;           //  the request's type name, for errors
    const char *push_field;     //  the fields that list pushed and pulled
    const char *pull_field;     //  tables, for errors
    bool push;                  //  carries gradients
    uint64_t step;
    bool has_generation;
    uint64_t generation;
    const ps_proto_sparse_ref_array_t *push_refs;
    const ps_proto_sparse_ref_array_t *pull_refs;
    s_push_entry_t *pushes;
    size_t npush;
    s_pull_entry_t *pulls;
    size_t npull;
    s_chunk_t *chunks;          //  the pulls that are tasks of their own
    size_t nchunks;
    zmq_msg_t *out;             //  one reply frame per pull entry
    size_t nout;                //  reply frames made
    ps_proto_sparse_applied_t *applied;     //  the reply's entries
    ps_proto_sparse_ref_t *rows;
    ps_tables_t *tables;        //  where the job reserved memory, or NULL
    uint64_t reserved;          //  the bytes it reserved for rows it may create
};

//  ---------------------------------------------------------------------
//  Tasks, on the serving thread or the pool's

//  Pull ids [begin, end) of pull entry j into their rows of its reply frame.
static void
s_pull_entry (ps_sparsejob_t *self, size_t j, size_t begin, size_t end)
{
    s_pull_entry_t *entry = &self->pulls [j];
    float *rows = zmq_msg_data (&self->out [j]);
    ps_sparse_pull (ps_tshard_table (entry->tshard), entry->ids + begin, end - begin,
                    rows + begin * ps_tshard_dim (entry->tshard));
}

//  Task i: push entry i, then the pulls that follow it; or, past the
//  pushes, a chunk of a pull.
static void
s_run_task (ps_sparsejob_t *self, size_t i)
{
    if (i >= self->npush) {
        const s_chunk_t *chunk = &self->chunks [i - self->npush];
        s_pull_entry (self, chunk->entry, chunk->begin, chunk->end);
        return;
    }
    //  The table's ledger decides, under its lock, whether the step was
    //  applied before (also by a request of the same step since this one
    //  was prepared): then nothing is applied, and the table counts it.
    s_push_entry_t *entry = &self->pushes [i];
    int rc = ps_sparse_push (ps_tshard_table (entry->tshard), self->step, entry->ids,
                             entry->count, entry->grads, &entry->result);
    //  The step was reserved in the table's ledger when the job was
    //  prepared (ps_sparse_check_push), and a reserved step cannot leave
    //  the ledger's window, so the table applies it or finds it applied:
    //  never some tables of a request and not the others.
    assert (rc == PS_OK || rc == PS_DUPLICATE);
    entry->duplicate = rc == PS_DUPLICATE;
    for (size_t j = 0; j < self->npull; j++)
        if (self->pulls [j].after == i)
            s_pull_entry (self, j, 0, self->pulls [j].count);
}

static void
s_scan_task (ps_sparsejob_t *self, size_t i)
{
    if (i >= self->npush)
        return;
    s_push_entry_t *entry = &self->pushes [i];
    size_t n = entry->count * ps_tshard_dim (entry->tshard);
    size_t at = ps_floats_find_nonfinite (entry->grads, n);
    entry->nonfinite = at < n ? at + 1 : 0;
}

static bool
s_has_nonfinite (ps_sparsejob_t *self)
{
    for (size_t i = 0; i < self->npush; i++)
        if (self->pushes [i].nonfinite)
            return true;
    return false;
}

static void
s_scan_op (ps_pool_job_t *base, size_t i)
{
    s_scan_task ((ps_sparsejob_t *) base, i);
}

static bool
s_scanned_op (ps_pool_job_t *base)
{
    return !s_has_nonfinite ((ps_sparsejob_t *) base);
}

static void
s_run_op (ps_pool_job_t *base, size_t i)
{
    s_run_task ((ps_sparsejob_t *) base, i);
}

static const ps_pool_ops_t s_ops = { s_scan_op, s_scanned_op, s_run_op };

void
ps_sparsejob_run (ps_sparsejob_t *self)
{
    assert (self);
    for (size_t i = 0; i < self->npush; i++)
        s_scan_task (self, i);
    if (s_has_nonfinite (self))
        return;
    for (size_t i = 0; i < self->base.ntasks; i++)
        s_run_task (self, i);
}

//  ---------------------------------------------------------------------
//  Life cycle

ps_sparsejob_t *
ps_sparsejob_new (ps_msg_t *msg, ps_peer_t *peer)
{
    const ps_proto_t *req = ps_msg_proto (msg);
    ps_sparsejob_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->base.ops = &s_ops;
    self->msg = msg;
    self->type = ps_proto_info [req->type].name;
    self->push_field = self->pull_field = "tables";
    static const ps_proto_sparse_ref_array_t none = { 0, NULL };
    switch (req->type) {
        case PS_PROTO_SPARSE_PULL:
            self->push_refs = &none;
            self->pull_refs = &req->sparse_pull.tables;
            break;
        case PS_PROTO_SPARSE_PUSH:
            self->push = true;
            self->step = req->sparse_push.step;
            self->has_generation = req->sparse_push.has_generation;
            self->generation = req->sparse_push.generation;
            self->push_refs = &req->sparse_push.tables;
            self->pull_refs = &none;
            break;
        default:
            assert (req->type == PS_PROTO_SPARSE_PUSH_PULL);
            self->push = true;
            self->step = req->sparse_push_pull.step;
            self->has_generation = req->sparse_push_pull.has_generation;
            self->generation = req->sparse_push_pull.generation;
            self->push_refs = &req->sparse_push_pull.push;
            self->push_field = "push";
            self->pull_field = "pull";
            self->pull_refs = &req->sparse_push_pull.pull;
    }
    self->npush = self->push_refs->count;
    self->npull = self->pull_refs->count;
    self->pushes = calloc (self->npush + 1, sizeof *self->pushes);
    self->pulls = calloc (self->npull + 1, sizeof *self->pulls);
    self->out = calloc (self->npull + 1, sizeof *self->out);
    self->applied = calloc (self->npush + 1, sizeof *self->applied);
    self->rows = calloc (self->npull + 1, sizeof *self->rows);
    if (!self->pushes || !self->pulls || !self->out || !self->applied
    ||  !self->rows)
        abort ();
    self->bytes = ps_msg_tensor_bytes (msg);
    self->peer = ps_peer_link (peer);
    self->held = self->bytes;
    ps_peer_charge (peer, self->held);
    return self;
}

ps_msg_t *
ps_sparsejob_destroy (ps_sparsejob_t **self_p)
{
    assert (self_p);
    ps_sparsejob_t *self = *self_p;
    if (!self)
        return NULL;
    for (size_t i = 0; i < self->npush; i++)
        ps_tshard_unlink (&self->pushes [i].tshard);
    for (size_t j = 0; j < self->npull; j++)
        ps_tshard_unlink (&self->pulls [j].tshard);
    for (size_t j = 0; j < self->nout; j++)
        zmq_msg_close (&self->out [j]);
    if (self->tables)
        ps_tables_release (self->tables, self->reserved);
    ps_peer_discharge (self->peer, self->held);
    ps_peer_unlink (&self->peer);
    ps_msg_t *msg = self->msg;
    free (self->pushes);
    free (self->pulls);
    free (self->chunks);
    free (self->out);
    free (self->applied);
    free (self->rows);
    free (self);
    *self_p = NULL;
    return msg;
}

//  The table shard entry i of field names, with the row width it says,
//  holding every one of its ids.
static int
s_resolve (ps_sparsejob_t *self, ps_tables_t *tables, const char *field, size_t i,
           const ps_proto_sparse_ref_t *ref, const uint64_t *ids, ps_tshard_t **tshard,
           ps_error_t *err)
{
    ps_tshard_t *found = ps_tables_lookup (tables, ref->table);
    if (!found)
        return ps_error_set (err, PS_ENOTFOUND, "%s: %s[%zu]: no table %s on this server",
                             self->type, field, i, ref->table);
    if (ref->dim != ps_tshard_dim (found))
        return ps_error_set (err, PS_ESHAPE, "%s: %s[%zu]: table %s has rows of %" PRIu32
                             " floats, the request says %" PRIu64, self->type, field, i,
                             ref->table, ps_tshard_dim (found), ref->dim);
    for (size_t k = 0; k < ref->count; k++)
        if (!ps_tshard_holds (found, ids [k]))
            return ps_error_set (err, PS_EINVAL, "%s: %s[%zu]: id %" PRIu64 " (element %zu) "
                                 "of table %s belongs to shard %" PRIu32 ", not to this "
                                 "server's shard %" PRIu32 " of %" PRIu32, self->type, field,
                                 i, ids [k], k, ref->table,
                                 ps_tablespec_shard_of (ids [k],
                                                        ps_sparse_spec (ps_tshard_table (found))->shard_seed,
                                                        ps_tshard_shards (found)),
                                 ps_tshard_shard (found), ps_tshard_shards (found));
    *tshard = ps_tshard_link (found);
    return PS_OK;
}

static int
s_prepare_pushes (ps_sparsejob_t *self, ps_tables_t *tables, ps_error_t *err)
{
    const char *field = self->push_field;
    for (size_t i = 0; i < self->npush; i++) {
        const ps_proto_sparse_ref_t *ref = &self->push_refs->items [i];
        s_push_entry_t *entry = &self->pushes [i];
        entry->ids = ps_msg_ids (self->msg, 2 * i);
        entry->grads = ps_msg_tensor (self->msg, 2 * i + 1);
        entry->count = ref->count;
        for (size_t j = 0; j < i; j++)
            if (strcmp (self->push_refs->items [j].table, ref->table) == 0)
                return ps_error_set (err, PS_EINVAL, "%s: %s[%zu]: table %s appears twice "
                                     "(also %s[%zu])", self->type, field, i, ref->table,
                                     field, j);
        int rc = s_resolve (self, tables, field, i, ref, entry->ids, &entry->tshard, err);
        if (rc)
            return rc;
        //  Tables have ledgers of their own; checking the step and the ids
        //  on every one now means none applies the push if another refuses.
        //  A step applied before is no refusal: the push answers duplicate.
        rc = ps_sparse_check_push (ps_tshard_table (entry->tshard), self->step, entry->ids,
                                   entry->count, err);
        if (rc && rc != PS_DUPLICATE)
            return ps_error_prefix (err, rc, "%s: %s[%zu]: table %s: step %" PRIu64,
                                    self->type, field, i, ref->table, self->step);
    }
    return PS_OK;
}

//  Under a memory budget, reserve the most the push's new rows could take
//  (every id of it that has no row creates one), or refuse it whole when
//  that could pass the budget: naming the budget and the table with the
//  most to create. The exact count of absent ids is taken only when the
//  cheap bound (every id new) does not fit already. Slabs grow by doubling
//  chunks (ps_sparse_stripe.c), so the bytes held may pass the budget by
//  the spare room of each stripe's last chunk; what a push adds beyond
//  that is bounded.
static int
s_reserve (ps_sparsejob_t *self, ps_tables_t *tables, ps_error_t *err)
{
    uint64_t budget = ps_tables_budget (tables);
    if (!budget || self->npush == 0)
        return PS_OK;
    uint64_t held = ps_tables_bytes (tables);
    uint64_t worst = 0;
    for (size_t i = 0; i < self->npush; i++)
        worst += self->pushes [i].count * ps_sparse_row_bytes (ps_tshard_table (self->pushes [i].tshard));
    if (held + worst > budget) {
        size_t most = 0;
        uint64_t most_bytes = 0, absent_total = 0;
        worst = 0;
        for (size_t i = 0; i < self->npush; i++) {
            s_push_entry_t *entry = &self->pushes [i];
            ps_sparse_t *table = ps_tshard_table (entry->tshard);
            uint64_t absent = ps_sparse_count_absent (table, entry->ids, entry->count);
            uint64_t bytes = absent * ps_sparse_row_bytes (table);
            absent_total += absent;
            worst += bytes;
            if (bytes > most_bytes) {
                most = i;
                most_bytes = bytes;
            }
        }
        //  A push that creates no row takes no memory: it is taken even
        //  when the slabs' last growth left the tables past the budget.
        if (worst > 0 && held + worst > budget) {
            ps_tshard_t *tshard = self->pushes [most].tshard;
            ps_sparse_stats_t stats;
            ps_sparse_stats (ps_tshard_table (tshard), &stats);
            return ps_error_set (err, PS_ETOOBIG, "%s: %s of %" PRIu64 " bytes "
                                 "(--memory-limit): table %s holds %" PRIu64 " rows here "
                                 "(shard %" PRIu32 " of %" PRIu32 "), the tables %" PRIu64
                                 " bytes, and this push could add %" PRIu64 " rows (%" PRIu64
                                 " bytes); nothing was applied", self->type,
                                 PS_MEMORY_LIMIT_TEXT, budget, ps_tshard_name (tshard),
                                 stats.rows, ps_tshard_shard (tshard), ps_tshard_shards (tshard),
                                 held, absent_total, worst);
        }
    }
    ps_tables_reserve (tables, worst);
    self->tables = tables;
    self->reserved = worst;
    return PS_OK;
}

static int
s_prepare_pulls (ps_sparsejob_t *self, ps_tables_t *tables, ps_error_t *err)
{
    const char *field = self->pull_field;
    size_t first = 2 * self->npush;     //  the pulls' ids come after the push's frames
    for (size_t j = 0; j < self->npull; j++) {
        const ps_proto_sparse_ref_t *ref = &self->pull_refs->items [j];
        s_pull_entry_t *entry = &self->pulls [j];
        entry->ids = ps_msg_ids (self->msg, first + j);
        entry->count = ref->count;
        int rc = s_resolve (self, tables, field, j, ref, entry->ids, &entry->tshard, err);
        if (rc)
            return rc;
        entry->after = SIZE_MAX;
        for (size_t i = 0; i < self->npush; i++)
            if (self->pushes [i].tshard == entry->tshard)
                entry->after = i;
    }
    //  The pulls no push precedes, in chunks.
    size_t nchunks = 0;
    for (size_t j = 0; j < self->npull; j++)
        if (self->pulls [j].after == SIZE_MAX)
            nchunks += (self->pulls [j].count + S_PULL_CHUNK - 1) / S_PULL_CHUNK;
    self->chunks = calloc (nchunks + 1, sizeof *self->chunks);
    if (!self->chunks)
        abort ();
    //  A pull's chunks are of equal size, so that the threads sharing it
    //  finish together (5,000 ids are two chunks of 2,500, not 4,096 and
    //  904).
    for (size_t j = 0; j < self->npull; j++) {
        size_t count = self->pulls [j].count;
        size_t pieces = (count + S_PULL_CHUNK - 1) / S_PULL_CHUNK;
        for (size_t k = 0; self->pulls [j].after == SIZE_MAX && k < pieces; k++)
            self->chunks [self->nchunks++] = (s_chunk_t) { j, count * k / pieces,
                                                           count * (k + 1) / pieces };
    }
    return PS_OK;
}

int
ps_sparsejob_prepare (ps_sparsejob_t *self, ps_tables_t *tables, uint64_t fence,
                      ps_error_t *err)
{
    assert (self);
    //  Once fenced, a push must say which generation of the parameters it
    //  was computed against, as for dense pushes (ps_job.c).
    if (self->push && fence && (!self->has_generation || self->generation != fence)) {
        if (self->has_generation)
            return ps_error_set (err, PS_EINVAL, "%s: stale generation %" PRIu64 ": the server "
                                 "was fenced at generation %" PRIu64 " (restored since this "
                                 "gradient was computed)", self->type, self->generation, fence);
        return ps_error_set (err, PS_EINVAL, "%s carries no generation: the server was fenced "
                             "at generation %" PRIu64 " and takes only gradients tagged with it",
                             self->type, fence);
    }
    int rc = s_prepare_pushes (self, tables, err);
    if (rc == PS_OK)
        rc = s_reserve (self, tables, err);
    if (rc == PS_OK)
        rc = s_prepare_pulls (self, tables, err);
    while (rc == PS_OK && self->nout < self->npull) {
        s_pull_entry_t *entry = &self->pulls [self->nout];
        size_t size = entry->count * ps_tshard_dim (entry->tshard) * sizeof (float);
        if (!ps_peer_frame_new (self->peer, size, &self->out [self->nout]))
            return ps_error_set (err, PS_ETOOBIG, "%s: cannot allocate a reply of %zu bytes",
                                 self->type, size);
        self->nout++;
        self->bytes += size;
    }
    for (size_t i = 0; rc == PS_OK && i < self->npush; i++)
        self->nrows += self->pushes [i].count;
    for (size_t j = 0; rc == PS_OK && j < self->npull; j++)
        if (self->pulls [j].after == SIZE_MAX)
            self->nrows += self->pulls [j].count;
    self->base.ntasks = self->npush + self->nchunks;
    return rc;
}

size_t
ps_sparsejob_bytes (ps_sparsejob_t *self)
{
    assert (self);
    return self->bytes;
}

size_t
ps_sparsejob_rows (ps_sparsejob_t *self)
{
    assert (self);
    return self->nrows;
}

ps_pool_job_t *
ps_sparsejob_pool_job (ps_sparsejob_t *self)
{
    assert (self);
    return &self->base;
}

ps_sparsejob_t *
ps_sparsejob_from_pool (ps_pool_job_t *job)
{
    assert (job);
    return job->ops == &s_ops ? (ps_sparsejob_t *) job : NULL;
}

ps_msg_t *
ps_sparsejob_msg (ps_sparsejob_t *self)
{
    assert (self);
    return self->msg;
}

ps_peer_t *
ps_sparsejob_peer (ps_sparsejob_t *self)
{
    assert (self);
    return self->peer;
}

//  ---------------------------------------------------------------------
//  The reply

//  When a push's gradients hold NaN or an infinity, count that on every
//  table concerned and describe the first in err.
static int
s_check_nonfinite (ps_sparsejob_t *self, ps_error_t *err)
{
    size_t first = self->npush, count = 0;
    for (size_t i = 0; i < self->npush; i++)
        if (self->pushes [i].nonfinite) {
            ps_tshard_count_nonfinite (self->pushes [i].tshard);
            first = count++ ? first : i;
        }
    if (count == 0)
        return PS_OK;
    s_push_entry_t *entry = &self->pushes [first];
    size_t at = entry->nonfinite - 1;
    uint32_t dim = ps_tshard_dim (entry->tshard);
    return ps_error_set (err, PS_ENONFINITE,
                         "%s: the gradient of table %s holds a non-finite value (%g) at row "
                         "%zu (id %" PRIu64 ") element %zu (%zu of the request's %zu tables "
                         "do); nothing was applied", self->type, ps_tshard_name (entry->tshard),
                         entry->grads [at], at / dim, entry->ids [at / dim], at % dim, count,
                         self->npush);
}

int
ps_sparsejob_reply (ps_sparsejob_t *self, ps_writer_t *writer, zmq_msg_t **frames,
                    size_t *nframes, ps_error_t *err)
{
    assert (self);
    int rc = s_check_nonfinite (self, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < self->npush; i++) {
        s_push_entry_t *entry = &self->pushes [i];
        self->applied [i] = (ps_proto_sparse_applied_t) {
            ps_tshard_name (entry->tshard), entry->result.applied, entry->result.created,
            entry->result.dropped, entry->duplicate };
    }
    for (size_t j = 0; j < self->npull; j++)
        self->rows [j] = (ps_proto_sparse_ref_t) { ps_tshard_name (self->pulls [j].tshard),
                                                   self->pulls [j].count,
                                                   ps_tshard_dim (self->pulls [j].tshard) };
    const ps_proto_t *req = ps_msg_proto (self->msg);
    ps_proto_t reply = { .type = ps_proto_info [req->type].reply, .id = req->id };
    ps_proto_sparse_applied_array_t applied = { self->npush, self->applied };
    ps_proto_sparse_ref_array_t rows = { self->npull, self->rows };
    switch (reply.type) {
        case PS_PROTO_SPARSE_PUSH_OK:
            reply.sparse_push_ok.applied = applied;
            break;
        case PS_PROTO_SPARSE_PULL_OK:
            reply.sparse_pull_ok.tables = rows;
            break;
        default:
            assert (reply.type == PS_PROTO_SPARSE_PUSH_PULL_OK);
            reply.sparse_push_pull_ok.applied = applied;
            reply.sparse_push_pull_ok.tables = rows;
    }
    ps_writer_encode (writer, &reply);
    //  Sending consumes the frames: the job no longer closes them.
    *frames = self->out;
    *nframes = self->nout;
    self->nout = 0;
    return PS_OK;
}
