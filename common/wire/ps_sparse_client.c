//  The worker's client of embedding tables; see ps_sparse_client.h.
//
//  A call splits each table's ids over the servers, builds one request
//  per server (its table entries, and per entry the frames the protocol
//  lists: a push's ids then gradients, a pull's ids), and hands them all
//  to the dense client's request machinery (ps_client_exchange), which
//  owns the sockets. The ids frames point into the splits and the
//  gradient frames into per-server buffers the gradients are scattered
//  into, both kept from call to call; the rows are gathered from the
//  reply frames in place.

#include "ps_sparse_client.h"

#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_alloc.h"
#include "ps_client.h"
#include "ps_idsplit.h"
#include "ps_msg.h"

typedef struct {
    char name [PS_NAME_MAX];
    uint32_t dim;
    ps_idsplit_t *push_split;   //  a push's ids, by server
    ps_idsplit_t *pull_split;   //  a pull's ids, by server
    float **grads;              //  per server: the push's rows scattered
    size_t *grads_cap;          //  and their capacity in floats
} s_table_t;

typedef struct {
    ps_proto_t msg;
    ps_proto_sparse_ref_t *push_refs, *pull_refs;   //  one per table
    const void **data;          //  the request's frames: 3 per table at most
    size_t *sizes;
} s_server_t;

struct _ps_sparse_client_t {
    ps_client_t *client;
    int nservers, ntables;
    uint64_t generation;
    s_table_t *tables;
    s_server_t *servers;
    ps_client_request_t *requests;  //  the call's, at most one per server
    int *asked;                 //  the server of each request
    ps_msg_t **replies;
    const float **rows;         //  per server: one table's rows in a reply
};

ps_sparse_client_t *
ps_sparse_client_new (const char *const *endpoints, int nservers, int timeout_ms,
                      ps_curve_t *curve, const ps_tablespec_t *specs, int ntables,
                      ps_error_t *err)
{
    if (ntables < 1) {
        ps_error_set (err, PS_EINVAL, "a sparse client needs at least one table");
        return NULL;
    }
    for (int t = 0; t < ntables; t++)
        if (!specs [t].name [0] || specs [t].dim < 1) {
            ps_error_set (err, PS_EINVAL, "table %d (\"%s\") needs a name and a row width "
                          "of at least 1, has %u", t, specs [t].name, specs [t].dim);
            return NULL;
        }
    ps_client_t *client = ps_client_new (endpoints, nservers, timeout_ms, curve, err);
    if (!client)
        return NULL;
    ps_sparse_client_t *self = ps_calloc_or_abort (1, sizeof *self);
    self->client = client;
    self->nservers = nservers;
    self->ntables = ntables;
    self->tables = ps_calloc_or_abort ((size_t) ntables, sizeof *self->tables);
    for (int t = 0; t < ntables; t++) {
        s_table_t *table = &self->tables [t];
        snprintf (table->name, sizeof table->name, "%s", specs [t].name);
        table->dim = specs [t].dim;
        table->push_split = ps_idsplit_new ((uint32_t) nservers, specs [t].shard_seed);
        table->pull_split = ps_idsplit_new ((uint32_t) nservers, specs [t].shard_seed);
        table->grads = ps_calloc_or_abort ((size_t) nservers, sizeof *table->grads);
        table->grads_cap = ps_calloc_or_abort ((size_t) nservers, sizeof *table->grads_cap);
    }
    self->servers = ps_calloc_or_abort ((size_t) nservers, sizeof *self->servers);
    for (int s = 0; s < nservers; s++) {
        s_server_t *server = &self->servers [s];
        server->push_refs = ps_calloc_or_abort ((size_t) ntables, sizeof *server->push_refs);
        server->pull_refs = ps_calloc_or_abort ((size_t) ntables, sizeof *server->pull_refs);
        server->data = ps_calloc_or_abort (3 * (size_t) ntables, sizeof *server->data);
        server->sizes = ps_calloc_or_abort (3 * (size_t) ntables, sizeof *server->sizes);
    }
    self->requests = ps_calloc_or_abort ((size_t) nservers, sizeof *self->requests);
    self->asked = ps_calloc_or_abort ((size_t) nservers, sizeof *self->asked);
    self->replies = ps_calloc_or_abort ((size_t) nservers, sizeof *self->replies);
    self->rows = ps_calloc_or_abort ((size_t) nservers, sizeof *self->rows);
    return self;
}

void
ps_sparse_client_destroy (ps_sparse_client_t **self_p)
{
    assert (self_p);
    ps_sparse_client_t *self = *self_p;
    if (!self)
        return;
    //  The client first: it lets go of every frame that points into the
    //  buffers below.
    ps_client_destroy (&self->client);
    for (int t = 0; t < self->ntables; t++) {
        s_table_t *table = &self->tables [t];
        ps_idsplit_destroy (&table->push_split);
        ps_idsplit_destroy (&table->pull_split);
        for (int s = 0; s < self->nservers; s++)
            free (table->grads [s]);
        free (table->grads);
        free (table->grads_cap);
    }
    for (int s = 0; s < self->nservers; s++) {
        free (self->servers [s].push_refs);
        free (self->servers [s].pull_refs);
        free (self->servers [s].data);
        free (self->servers [s].sizes);
    }
    free (self->tables);
    free (self->servers);
    free (self->requests);
    free (self->asked);
    free (self->replies);
    free (self->rows);
    free (self);
    *self_p = NULL;
}

void
ps_sparse_client_set_generation (ps_sparse_client_t *self, uint64_t generation)
{
    assert (self);
    self->generation = generation;
}

//  Split each table's push ids over the servers and scatter its gradients
//  into the servers' buffers.
static void
s_split_push (ps_sparse_client_t *self, const uint64_t *const *ids, const size_t *counts,
              const float *const *grads)
{
    for (int t = 0; t < self->ntables; t++) {
        s_table_t *table = &self->tables [t];
        ps_idsplit_split (table->push_split, ids [t], counts [t]);
        for (int s = 0; s < self->nservers; s++) {
            size_t count;
            ps_idsplit_ids (table->push_split, (uint32_t) s, &count);
            size_t floats = count * table->dim;
            if (floats > table->grads_cap [s]) {
                free (table->grads [s]);
                table->grads [s] = malloc (floats * sizeof (float));
                if (!table->grads [s])
                    abort ();
                table->grads_cap [s] = floats;
            }
        }
        ps_idsplit_scatter (table->push_split, grads [t], table->dim, table->grads);
    }
}

//  Add server s's push entries to its request: per table its ids and
//  their gradients, an empty entry where it has none.
static void
s_add_push (ps_sparse_client_t *self, int s, size_t *nframes)
{
    s_server_t *server = &self->servers [s];
    for (int t = 0; t < self->ntables; t++) {
        s_table_t *table = &self->tables [t];
        size_t count;
        const uint64_t *ids = ps_idsplit_ids (table->push_split, (uint32_t) s, &count);
        server->push_refs [t] = (ps_proto_sparse_ref_t) { table->name, count, table->dim };
        server->data [*nframes] = ids;
        server->sizes [(*nframes)++] = count * sizeof (uint64_t);
        server->data [*nframes] = table->grads [s];
        server->sizes [(*nframes)++] = count * table->dim * sizeof (float);
    }
}

//  Add server s's pull entries to its request. Returns the ids it is
//  asked for.
static size_t
s_add_pull (ps_sparse_client_t *self, int s, size_t *nframes)
{
    s_server_t *server = &self->servers [s];
    size_t total = 0;
    for (int t = 0; t < self->ntables; t++) {
        s_table_t *table = &self->tables [t];
        size_t count;
        const uint64_t *ids = ps_idsplit_ids (table->pull_split, (uint32_t) s, &count);
        server->pull_refs [t] = (ps_proto_sparse_ref_t) { table->name, count, table->dim };
        server->data [*nframes] = ids;
        server->sizes [(*nframes)++] = count * sizeof (uint64_t);
        total += count;
    }
    return total;
}

//  Check a reply's push outcome, one entry per table in order, and add it
//  to *info.
static int
s_read_applied (ps_sparse_client_t *self, const ps_proto_sparse_applied_array_t *applied,
                ps_sparse_push_info_t *info, ps_error_t *err)
{
    if (applied->count != (size_t) self->ntables)
        return ps_error_set (err, PS_EPROTO, "answered a push of %d tables with %zu entries",
                             self->ntables, applied->count);
    for (int t = 0; t < self->ntables; t++) {
        const ps_proto_sparse_applied_t *entry = &applied->items [t];
        if (strcmp (entry->table, self->tables [t].name) != 0)
            return ps_error_set (err, PS_EPROTO, "answered entry %d of a push with table %s, "
                                 "expected %s", t, entry->table, self->tables [t].name);
        info->applied += entry->applied;
        info->created += entry->created;
        info->dropped += entry->dropped;
        if (entry->duplicate)
            info->duplicates++;
        else
            info->shards++;
    }
    return 0;
}

//  Check a reply's pulled entries against the request's, and point
//  self->rows at each table's rows in turn to gather them into rows [t].
static int
s_read_rows (ps_sparse_client_t *self, const ps_proto_sparse_ref_array_t *tables, int s,
             ps_error_t *err)
{
    const s_server_t *server = &self->servers [s];
    if (tables->count != (size_t) self->ntables)
        return ps_error_set (err, PS_EPROTO, "answered a pull of %d tables with %zu entries",
                             self->ntables, tables->count);
    for (int t = 0; t < self->ntables; t++) {
        const ps_proto_sparse_ref_t *got = &tables->items [t], *asked = &server->pull_refs [t];
        if (strcmp (got->table, asked->table) != 0 || got->count != asked->count
        ||  got->dim != asked->dim)
            return ps_error_set (err, PS_EPROTO, "answered pull entry %d with %llu rows of "
                                 "%s of width %llu, expected %llu rows of %s of width %llu", t,
                                 (unsigned long long) got->count, got->table,
                                 (unsigned long long) got->dim,
                                 (unsigned long long) asked->count, asked->table,
                                 (unsigned long long) asked->dim);
    }
    return 0;
}

//  The shared body of pull, push and push-pull: a push when grads is not
//  NULL, a pull into rows when rows is not NULL.
static int
s_call (ps_sparse_client_t *self, uint64_t step, uint32_t worker, const uint64_t *const *ids,
        const size_t *counts, const float *const *grads, const uint64_t *const *pull_ids,
        const size_t *pull_counts, float *const *rows, ps_sparse_push_info_t *info,
        ps_error_t *err)
{
    bool push = grads != NULL, pull = rows != NULL;
    ps_proto_type_t type = push && pull ? PS_PROTO_SPARSE_PUSH_PULL
                         : push ? PS_PROTO_SPARSE_PUSH : PS_PROTO_SPARSE_PULL;
    if (push)
        s_split_push (self, ids, counts, grads);
    if (pull)
        for (int t = 0; t < self->ntables; t++)
            ps_idsplit_split (self->tables [t].pull_split, pull_ids [t], pull_counts [t]);
    size_t n = 0;
    for (int s = 0; s < self->nservers; s++) {
        s_server_t *server = &self->servers [s];
        size_t nframes = 0;
        if (push)
            s_add_push (self, s, &nframes);
        //  A pull alone asks only the servers that hold some of its ids.
        if (pull && s_add_pull (self, s, &nframes) == 0 && !push)
            continue;
        ps_proto_sparse_ref_array_t push_refs = { (size_t) self->ntables, server->push_refs };
        ps_proto_sparse_ref_array_t pull_refs = { (size_t) self->ntables, server->pull_refs };
        server->msg = (ps_proto_t) { .type = type };
        if (type == PS_PROTO_SPARSE_PULL)
            server->msg.sparse_pull.tables = pull_refs;
        else
        if (type == PS_PROTO_SPARSE_PUSH)
            server->msg.sparse_push = (ps_proto_sparse_push_t) {
                .step = step, .worker = worker, .has_generation = self->generation != 0,
                .generation = self->generation, .tables = push_refs };
        else
            server->msg.sparse_push_pull = (ps_proto_sparse_push_pull_t) {
                .step = step, .worker = worker, .has_generation = self->generation != 0,
                .generation = self->generation, .push = push_refs, .pull = pull_refs };
        self->requests [n] = (ps_client_request_t) { s, &server->msg, server->data,
                                                     server->sizes, nframes };
        self->asked [n++] = s;
    }
    if (info)
        memset (info, 0, sizeof *info);
    int rc = ps_client_exchange (self->client, self->requests, n, ps_proto_info [type].reply,
                                 self->replies, err);
    ps_sparse_push_info_t sum = { 0 };
    for (size_t r = 0; r < n && rc == 0; r++) {
        int s = self->asked [r];
        const ps_proto_t *reply = ps_msg_proto (self->replies [r]);
        if (push)
            rc = s_read_applied (self, type == PS_PROTO_SPARSE_PUSH
                                       ? &reply->sparse_push_ok.applied
                                       : &reply->sparse_push_pull_ok.applied, &sum, err);
        if (rc == 0 && pull)
            rc = s_read_rows (self, type == PS_PROTO_SPARSE_PULL
                                    ? &reply->sparse_pull_ok.tables
                                    : &reply->sparse_push_pull_ok.tables, s, err);
        if (rc)
            ps_error_prefix (err, rc, "server %d (ps:%d)", s, s);
    }
    //  Each reply's frame t holds table t's rows of that server.
    for (int t = 0; pull && rc == 0 && t < self->ntables; t++) {
        for (size_t r = 0; r < n; r++)
            self->rows [self->asked [r]] = ps_msg_tensor (self->replies [r], (size_t) t);
        ps_idsplit_gather (self->tables [t].pull_split, self->rows, self->tables [t].dim,
                           rows [t]);
    }
    if (info && rc == 0)
        *info = sum;
    return rc;
}

int
ps_sparse_client_pull (ps_sparse_client_t *self, const uint64_t *const *ids,
                       const size_t *counts, float *const *rows, ps_error_t *err)
{
    assert (self && ids && counts && rows);
    return s_call (self, 0, 0, NULL, NULL, NULL, ids, counts, rows, NULL, err);
}

int
ps_sparse_client_push (ps_sparse_client_t *self, uint64_t step, uint32_t worker,
                       const uint64_t *const *ids, const size_t *counts,
                       const float *const *grads, ps_sparse_push_info_t *info,
                       ps_error_t *err)
{
    assert (self && ids && counts && grads);
    return s_call (self, step, worker, ids, counts, grads, NULL, NULL, NULL, info, err);
}

int
ps_sparse_client_push_pull (ps_sparse_client_t *self, uint64_t step, uint32_t worker,
                            const uint64_t *const *ids, const size_t *counts,
                            const float *const *grads, const uint64_t *const *pull_ids,
                            const size_t *pull_counts, float *const *rows,
                            ps_sparse_push_info_t *info, ps_error_t *err)
{
    assert (self && ids && counts && grads && pull_ids && pull_counts && rows);
    return s_call (self, step, worker, ids, counts, grads, pull_ids, pull_counts, rows, info,
                   err);
}
