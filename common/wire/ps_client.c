//  The client of a set of ps-servers; see ps_client.h.
//
//  This file is over 800 lines and is kept whole because it is one
//  concept: one call's conversation with the servers. The variables'
//  layout (ps_client_add_variable: about 60 lines) only fills the
//  partition table that every request is cut from; the request machinery
//  (the header and zero-copy frames being built, the requests in flight,
//  matching replies and waiting for ZeroMQ to release the caller's
//  buffers) is shared by every call; and the calls themselves (pull, push,
//  stats, snapshot, restore, fence, and the coordinator's calls for
//  embedding tables: table_create, their stats, snapshot and restore) are
//  each a short use of it. Cutting either part out would make the
//  client's private state (servers, partitions, the request being built) a
//  header shared by two files, which is the coupling the split of
//  ps_coord.c removed.

#include "ps_client.h"
#include "ps_clock.h"
#include "ps_host.h"
#include "ps_log.h"
#include "ps_msg.h"
#include "ps_proto_conv.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

//  Partitions of one server are sent in requests of about this many tensor
//  bytes, all in flight at once, so that the server applies one request
//  while the next is still arriving and its replies flow back meanwhile.
//  A partition larger than this travels alone.
#define S_REQUEST_BYTES  (4u << 20)

//  How long a socket closed with a request still going out (a call that
//  timed out) keeps its pipe open. With a linger of 0, libzmq 4.3.4 closes
//  the pipe at once, and a connection that fails before that close has
//  gone round ZeroMQ's threads, while the engine is between two frames of
//  a message, makes it assert ("Resource temporarily unavailable
//  (src/session_base.cpp:260)", libzmq issue #3442): seen in a worker that
//  resumed after a SIGSTOP to find its push timed out and its servers gone
//  at once (tests/test_client_close.c reproduces it). While the linger
//  lasts, a failing connection finds the rest of the message readable and
//  drops it cleanly. The risk is only moved to the end of the linger, where
//  a server must have read nothing for the call's timeout plus the linger
//  and its connection fail at that very moment. 200 ms outlasts any delay
//  between ZeroMQ's threads on a loaded machine (the race was seen up to 8
//  ms after the close), yet keeps the price small: a call to a server that
//  is down returns its buffers this much after its timeout, and a process
//  that exits just after such a call waits as long in zmq_ctx_term.
#define S_CLOSE_LINGER_MS 200

//  How long to wait for ZeroMQ to release zero-copy frames after a socket
//  was closed on timeout. It drops them at the end of the linger at the
//  latest; past this the caller's buffers could still be read later,
//  which is not survivable.
#define S_RELEASE_WAIT_MS (S_CLOSE_LINGER_MS + 10000)

typedef struct {
    int var;
    uint32_t part;
    int64_t row_begin, row_end;
    int server;
    size_t offset;              //  first element within the variable
    size_t count;               //  elements
    ps_shape_t local;
} s_part_t;

typedef struct {
    char name [PS_NAME_MAX];
    ps_shape_t shape;
    ps_init_t init;
    size_t size;
} s_var_t;

typedef struct {
    char endpoint [256];
    char connect [256];         //  where it is reached from here (ps_host.h: ipc:// on its host)
    bool plain;                 //  connect takes PLAIN (ps_curve.h, the same-host plane)
    void *socket;
    size_t *parts;              //  indices into the client's parts, in order
    size_t nparts;
    size_t unanswered;          //  requests in flight during a call
} s_server_t;

//  One request of the current call: partitions [first, first + count) of
//  a server's list.
typedef struct {
    int server;
    size_t first, count;
    uint64_t id;
    bool answered;
    ps_msg_t *reply;            //  kept across calls for its buffers
} s_request_t;

struct _ps_client_t {
    void *ctx;
    ps_curve_t *curve;          //  the caller's; NULL: unsecured
    int timeout_ms;
    s_server_t *servers;
    int nservers;
    s_var_t *vars;
    int nvars;
    s_part_t *parts;
    size_t nparts;
    uint64_t next_id;
    uint64_t generation;        //  carried by pushes when not 0
    atomic_long outstanding;    //  zero-copy frames ZeroMQ still holds
    ps_writer_t writer;         //  header of the request being built
    void *entries;              //  its arrays of entries, kept across calls
    size_t entries_size;
    uint64_t *dims;             //  and the shapes and rows those entries hold
    size_t dims_count;
    zmq_msg_t *frames;          //  its tensor frames
    size_t frames_cap;
    s_request_t *requests;      //  the current call's requests
    size_t nrequests, requests_cap;
    ps_msg_t *incoming;         //  receives replies before they are matched
    zmq_pollitem_t *items;      //  s_collect's poll set, one per server
    int *index;                 //  server of each poll item
};

//  Open the server's socket. On failure nothing is left open and the
//  socket is NULL; the next call tries again.
static int
s_connect (ps_client_t *self, s_server_t *server, ps_error_t *err)
{
    //  Server i of the client is task ps:i of the cluster, whose public
    //  key the client must know (ps_curve.h).
    char task [32];
    snprintf (task, sizeof task, "ps:%d", (int) (server - self->servers));
    server->socket = zmq_socket (self->ctx, ZMQ_DEALER);
    int linger = S_CLOSE_LINGER_MS;
    //  No send limit: frames are the caller's buffers, lent zero-copy, and
    //  a server that is down must not block a send past the call's timeout.
    int hwm = 0;
    int ipv6 = strchr (server->connect, '[') != NULL;      //  an IPv6 literal
    int rc = PS_OK;
    if (!server->socket
    ||  zmq_setsockopt (server->socket, ZMQ_LINGER, &linger, sizeof linger) != 0
    ||  zmq_setsockopt (server->socket, ZMQ_IPV6, &ipv6, sizeof ipv6) != 0
    ||  zmq_setsockopt (server->socket, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0)
        rc = ps_error_set (err, PS_EIO, "zmq_socket: %s", zmq_strerror (errno));
    else
    if (self->curve && (rc = server->plain
                             ? ps_curve_local_client (self->curve, server->socket, err)
                             : ps_curve_data_client (self->curve, server->socket, task, err)))
        ;                       //  err names what is missing (a certificate)
    else
    if (zmq_connect (server->socket, server->connect) != 0)
        rc = ps_error_set (err, PS_EINVAL, "cannot connect to %s: %s",
                           server->connect, zmq_strerror (errno));
    if (rc && server->socket) {
        zmq_close (server->socket);
        server->socket = NULL;
    }
    return rc;
}

ps_client_t *
ps_client_new (const char *const *endpoints, int nservers, int timeout_ms, ps_curve_t *curve,
               ps_error_t *err)
{
    if (nservers < 1 || timeout_ms < 1) {
        ps_error_set (err, PS_EINVAL, "need at least one server and a timeout > 0 ms");
        return NULL;
    }
    ps_client_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->timeout_ms = timeout_ms;
    self->curve = curve;
    self->next_id = 1;
    atomic_init (&self->outstanding, 0);
    self->servers = calloc ((size_t) nservers, sizeof (s_server_t));
    if (!self->servers)
        abort ();
    ps_writer_init (&self->writer);
    self->incoming = ps_msg_new ();
    self->items = calloc ((size_t) nservers, sizeof (zmq_pollitem_t));
    self->index = calloc ((size_t) nservers, sizeof (int));
    if (!self->items || !self->index)
        abort ();
    self->ctx = zmq_ctx_new ();
    if (!self->ctx) {
        ps_error_set (err, PS_EIO, "zmq_ctx_new: %s", zmq_strerror (errno));
        goto fail;
    }
    for (int i = 0; i < nservers; i++) {
        s_server_t *server = &self->servers [i];
        self->nservers++;
        //  An endpoint set (ps_host.h) is named by its tcp endpoint, the
        //  cluster's address for the server, and reached at the endpoint
        //  for this host.
        size_t name_len = strcspn (endpoints [i], ",");
        bool local;
        if (name_len >= sizeof server->endpoint) {
            ps_error_set (err, PS_EINVAL, "endpoint %s is too long", endpoints [i]);
            goto fail;
        }
        memcpy (server->endpoint, endpoints [i], name_len);
        server->endpoint [name_len] = '\0';
        bool plain_ok = curve && ps_curve_local_connects (curve);
        if (ps_host_pick (endpoints [i], plain_ok, server->connect, sizeof server->connect,
                          &local, &server->plain, err))
            goto fail;
        if (local)
            ps_info ("server %d is on this host: reached at %s (for %s)%s", i, server->connect,
                     server->endpoint, server->plain ? " with PLAIN, as only this user can "
                     "reach it" : "");
        if (s_connect (self, server, err))
            goto fail;
    }
    return self;
fail:
    ps_client_destroy (&self);
    return NULL;
}

void
ps_client_destroy (ps_client_t **self_p)
{
    assert (self_p);
    ps_client_t *self = *self_p;
    if (!self)
        return;
    for (int i = 0; i < self->nservers; i++) {
        s_server_t *server = &self->servers [i];
        if (server->socket)
            zmq_close (server->socket);
        free (server->parts);
    }
    for (size_t i = 0; i < self->requests_cap; i++)
        ps_msg_destroy (&self->requests [i].reply);
    free (self->requests);
    free (self->frames);
    ps_msg_destroy (&self->incoming);
    free (self->items);
    free (self->index);
    free (self->entries);
    free (self->dims);
    ps_writer_fini (&self->writer);
    if (self->ctx)
        zmq_ctx_term (self->ctx);
    free (self->servers);
    free (self->vars);
    free (self->parts);
    free (self);
    *self_p = NULL;
}

int
ps_client_add_variable (ps_client_t *self, const char *name, const ps_shape_t *shape,
                        const ps_init_t *init, int nparts, const int64_t *splits,
                        const int *servers, ps_error_t *err)
{
    assert (self);
    if (ps_name_check (name, strlen (name), err))
        return err->code;
    for (int v = 0; v < self->nvars; v++)
        if (strcmp (self->vars [v].name, name) == 0)
            return ps_error_set (err, PS_EINVAL, "variable %s is declared twice", name);
    if (nparts < 1 || splits [0] != 0 || splits [nparts] != shape->dims [0])
        return ps_error_set (err, PS_EINVAL, "%s: partitions must cover rows 0..%lld",
                             name, (long long) shape->dims [0]);
    for (int k = 0; k < nparts; k++) {
        if (splits [k + 1] <= splits [k])
            return ps_error_set (err, PS_EINVAL, "%s: partition %d has no rows", name, k);
        if (servers [k] < 0 || servers [k] >= self->nservers)
            return ps_error_set (err, PS_EINVAL, "%s: partition %d is placed on server %d of %d",
                                 name, k, servers [k], self->nservers);
    }
    self->vars = realloc (self->vars, (size_t) (self->nvars + 1) * sizeof (s_var_t));
    self->parts = realloc (self->parts, (self->nparts + (size_t) nparts) * sizeof (s_part_t));
    if (!self->vars || !self->parts)
        abort ();
    s_var_t *var = &self->vars [self->nvars];
    snprintf (var->name, sizeof var->name, "%s", name);
    var->shape = *shape;
    var->init = *init;
    var->size = (size_t) ps_shape_count (shape);
    size_t row = (size_t) ps_shape_row_count (shape);
    for (int k = 0; k < nparts; k++) {
        s_part_t *part = &self->parts [self->nparts + (size_t) k];
        part->var = self->nvars;
        part->part = (uint32_t) k;
        part->row_begin = splits [k];
        part->row_end = splits [k + 1];
        part->server = servers [k];
        part->offset = (size_t) splits [k] * row;
        part->count = (size_t) (splits [k + 1] - splits [k]) * row;
        ps_shape_rows (shape, splits [k], splits [k + 1], &part->local, NULL);
        s_server_t *server = &self->servers [servers [k]];
        server->parts = realloc (server->parts, (server->nparts + 1) * sizeof (size_t));
        if (!server->parts)
            abort ();
        server->parts [server->nparts++] = self->nparts + (size_t) k;
        if (server->nparts > self->frames_cap) {
            self->frames_cap = server->nparts;
            self->frames = realloc (self->frames, self->frames_cap * sizeof (zmq_msg_t));
            if (!self->frames)
                abort ();
        }
    }
    self->nparts += (size_t) nparts;
    return self->nvars++;
}

size_t
ps_client_variable_size (ps_client_t *self, int var)
{
    assert (self && var >= 0 && var < self->nvars);
    return self->vars [var].size;
}

//  ---------------------------------------------------------------------
//  Requests and replies

static void
s_frame_release (void *data, void *hint)
{
    (void) data;
    atomic_fetch_sub ((atomic_long *) hint, 1);
}

//  Wait until ZeroMQ has released every zero-copy frame, so the caller may
//  reuse or free its buffers.
static void
s_wait_released (ps_client_t *self)
{
    int64_t deadline = (int64_t) ps_clock_ms () + S_RELEASE_WAIT_MS;
    while (atomic_load (&self->outstanding) > 0) {
        if ((int64_t) ps_clock_ms () > deadline) {
            fprintf (stderr, "ps_client: ZeroMQ kept %ld zero-copy frames past %d ms\n",
                     (long) atomic_load (&self->outstanding), S_RELEASE_WAIT_MS);
            abort ();
        }
        struct timespec pause = { 0, 100000 };
        nanosleep (&pause, NULL);
    }
}

//  Forget the requests of the previous call.
static void
s_start (ps_client_t *self)
{
    //  Replies of the last call are let go: a pull's hold the whole model.
    for (size_t i = 0; i < self->nrequests; i++)
        ps_msg_clear (self->requests [i].reply);
    self->nrequests = 0;
    for (int i = 0; i < self->nservers; i++)
        self->servers [i].unanswered = 0;
}

//  Room for count entries of size bytes each, and for ndims dimensions, in
//  the request being built; both are reused from request to request.
static void *
s_items (ps_client_t *self, size_t count, size_t size, size_t ndims, uint64_t **dims)
{
    if (count * size > self->entries_size) {
        free (self->entries);
        self->entries_size = count * size;
        self->entries = malloc (self->entries_size);
        if (!self->entries)
            abort ();
    }
    if (ndims > self->dims_count) {
        free (self->dims);
        self->dims_count = ndims;
        self->dims = malloc (ndims * sizeof (uint64_t));
        if (!self->dims)
            abort ();
    }
    if (dims)
        *dims = self->dims;
    return self->entries;
}

//  Start a request of type to a server for partitions [first, first +
//  count) of its list: *msg gets the type and the request's id, and the
//  caller fills its fields.
static void
s_begin (ps_client_t *self, int server, size_t first, size_t count, ps_proto_type_t type,
         ps_proto_t *msg)
{
    if (self->nrequests == self->requests_cap) {
        size_t cap = self->requests_cap ? 2 * self->requests_cap : 8;
        self->requests = realloc (self->requests, cap * sizeof (s_request_t));
        if (!self->requests)
            abort ();
        for (size_t i = self->requests_cap; i < cap; i++)
            self->requests [i].reply = ps_msg_new ();
        self->requests_cap = cap;
    }
    s_request_t *request = &self->requests [self->nrequests++];
    request->server = server;
    request->first = first;
    request->count = count;
    request->id = self->next_id++;
    request->answered = false;
    *msg = (ps_proto_t) { .type = type, .id = request->id };
}

//  Send the request begun last, msg, with nframes of self->frames.
static int
s_send (ps_client_t *self, const ps_proto_t *msg, size_t nframes, ps_error_t *err)
{
    s_request_t *request = &self->requests [self->nrequests - 1];
    ps_writer_encode (&self->writer, msg);
    s_server_t *server = &self->servers [request->server];
    int rc = server->socket ? PS_OK : s_connect (self, server, err);
    if (rc == PS_OK)
        rc = ps_writer_send (&self->writer, server->socket, NULL, 0, self->frames, nframes, err);
    else
        for (size_t i = 0; i < nframes; i++)
            zmq_msg_close (&self->frames [i]);
    if (rc) {
        self->nrequests--;      //  never sent, so never answered
        return ps_error_prefix (err, rc, "server %s", server->endpoint);
    }
    server->unanswered++;
    return PS_OK;
}

//  The request of the current call that a reply from server answers.
static s_request_t *
s_match (ps_client_t *self, int server, uint64_t id)
{
    for (size_t i = 0; i < self->nrequests; i++) {
        s_request_t *request = &self->requests [i];
        if (request->server == server && request->id == id && !request->answered)
            return request;
    }
    return NULL;
}

//  Check one received reply: an error reply or a reply of the wrong type
//  becomes an error naming the server.
static int
s_check_reply (ps_msg_t *reply, ps_proto_type_t reply_type, ps_error_t *err)
{
    const ps_proto_t *msg = ps_msg_proto (reply);
    if (msg->type == PS_PROTO_ERROR) {
        //  An error reply is an error, whatever code it names.
        int result = ps_error_from_name (msg->error.code);
        return ps_error_set (err, result < 0 ? result : PS_EREMOTE, "%s (%s)",
                             msg->error.message, msg->error.code);
    }
    if (msg->type != reply_type)
        return ps_error_set (err, PS_EPROTO, "expected %s, got %s",
                             ps_proto_info [reply_type].name, ps_proto_info [msg->type].name);
    return PS_OK;
}

//  Gather the replies to every request sent in this call. A server that
//  does not answer in time gets a fresh socket, so its late replies can
//  never be taken for answers to a later call. Returns the first error;
//  every reply has been read or abandoned when it returns.
static int
s_collect (ps_client_t *self, ps_proto_type_t reply_type, ps_error_t *err)
{
    int64_t deadline = (int64_t) ps_clock_ms () + self->timeout_ms;
    int rc = PS_OK;
    zmq_pollitem_t *items = self->items;
    int *index = self->index;
    while (true) {
        int nitems = 0;
        for (int i = 0; i < self->nservers; i++)
            if (self->servers [i].unanswered) {
                items [nitems] = (zmq_pollitem_t) { self->servers [i].socket, 0, ZMQ_POLLIN, 0 };
                index [nitems++] = i;
            }
        if (nitems == 0)
            break;
        int64_t left = deadline - (int64_t) ps_clock_ms ();
        int ready = left > 0 ? zmq_poll (items, nitems, (long) left) : 0;
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready < 0) {
            rc = ps_error_set (err, PS_EIO, "zmq_poll: %s", zmq_strerror (errno));
            break;
        }
        if (ready == 0) {
            for (int n = 0; n < nitems; n++) {
                s_server_t *server = &self->servers [index [n]];
                if (rc == PS_OK)
                    rc = ps_error_set (err, PS_ETIMEDOUT, "server %s did not answer within %d ms",
                                       server->endpoint, self->timeout_ms);
                zmq_close (server->socket);
                server->socket = NULL;
                server->unanswered = 0;
                s_connect (self, server, NULL);
            }
            break;
        }
        for (int n = 0; n < nitems; n++) {
            if (!(items [n].revents & ZMQ_POLLIN))
                continue;
            s_server_t *server = &self->servers [index [n]];
            ps_error_t local;
            int result = ps_msg_recv (self->incoming, server->socket, false, &local);
            if (result == PS_OK)
                result = ps_msg_decode (self->incoming, &local);
            s_request_t *request = result == PS_OK
                                 ? s_match (self, index [n], ps_msg_id (self->incoming)) : NULL;
            if (result == PS_OK && !request)
                continue;       //  a stale reply to an abandoned request
            if (request) {
                //  The request keeps the reply; its old message is reused
                //  for the next receive.
                ps_msg_t *reply = request->reply;
                request->reply = self->incoming;
                self->incoming = reply;
                request->answered = true;
                result = s_check_reply (request->reply, reply_type, &local);
            }
            //  A reply that cannot be read cannot be matched either; it is
            //  counted against this server so the call ends.
            server->unanswered--;
            if (result && rc == PS_OK) {
                rc = result;
                if (err) {
                    *err = local;
                    ps_error_prefix (err, result, "server %s", server->endpoint);
                }
            }
        }
    }
    s_wait_released (self);
    return rc;
}

//  The part behind position i of a request.
static const s_part_t *
s_request_part (ps_client_t *self, const s_request_t *request, size_t i)
{
    return &self->parts [self->servers [request->server].parts [request->first + i]];
}

//  ---------------------------------------------------------------------
//  Operations

int
ps_client_create (ps_client_t *self, ps_error_t *err)
{
    assert (self);
    s_start (self);
    int rc = PS_OK;
    for (int s = 0; s < self->nservers && rc == PS_OK; s++) {
        s_server_t *server = &self->servers [s];
        if (server->nparts == 0)
            continue;
        ps_proto_t msg;
        s_begin (self, s, 0, server->nparts, PS_PROTO_CREATE, &msg);
        uint64_t *dims;
        ps_proto_partition_t *specs = s_items (self, server->nparts, sizeof *specs,
                                               server->nparts * (PS_MAX_RANK + 2), &dims);
        for (size_t i = 0; i < server->nparts; i++) {
            const s_part_t *part = &self->parts [server->parts [i]];
            const s_var_t *var = &self->vars [part->var];
            uint64_t *rows = dims + i * (PS_MAX_RANK + 2);
            rows [0] = (uint64_t) part->row_begin;
            rows [1] = (uint64_t) part->row_end;
            specs [i] = (ps_proto_partition_t) {
                .var = var->name, .part = part->part, .rows = { 2, rows },
                .init = { .kind = ps_init_kind_name (var->init.kind),
                          .has_seed = true, .seed = var->init.seed,
                          .has_value = true, .value = var->init.value,
                          .has_low = true, .low = var->init.low,
                          .has_high = true, .high = var->init.high,
                          .has_mean = true, .mean = var->init.mean,
                          .has_stddev = true, .stddev = var->init.stddev } };
            ps_proto_shape_set (&specs [i].shape, rows + 2, &var->shape);
        }
        msg.create.partitions = (ps_proto_partition_array_t) { server->nparts, specs };
        rc = s_send (self, &msg, 0, err);
    }
    int collected = s_collect (self, PS_PROTO_CREATE_OK, err);
    return rc ? rc : collected;
}

int
ps_client_set_optimizer (ps_client_t *self, const ps_opt_config_t *opt, ps_error_t *err)
{
    assert (self);
    int rc = ps_opt_config_validate (opt, err);
    if (rc)
        return rc;
    s_start (self);
    for (int s = 0; s < self->nservers && rc == PS_OK; s++) {
        ps_proto_t msg;
        s_begin (self, s, 0, 0, PS_PROTO_SET_OPTIMIZER, &msg);
        ps_proto_optimizer_set (&msg.set_optimizer.optimizer, opt);
        rc = s_send (self, &msg, 0, err);
    }
    int collected = s_collect (self, PS_PROTO_SET_OPTIMIZER_OK, err);
    return rc ? rc : collected;
}

//  Copy the values of a pull or push-pull reply into the caller's buffers,
//  checking that each frame is the partition asked for.
static int
s_scatter_values (ps_client_t *self, s_request_t *request, float *const *values, ps_error_t *err)
{
    const char *endpoint = self->servers [request->server].endpoint;
    const ps_proto_t *reply = ps_msg_proto (request->reply);
    const ps_proto_pulled_array_t *tensors = reply->type == PS_PROTO_PULL_OK
                                           ? &reply->pull_ok.tensors
                                           : &reply->push_pull_ok.tensors;
    if (tensors->count != request->count)
        return ps_error_set (err, PS_EPROTO, "server %s returned %zu tensors for %zu partitions",
                             endpoint, tensors->count, request->count);
    for (size_t i = 0; i < request->count; i++) {
        const s_part_t *part = s_request_part (self, request, i);
        const ps_proto_pulled_t *desc = &tensors->items [i];
        if (strcmp (desc->var, self->vars [part->var].name) != 0 || desc->part != part->part
        ||  desc->bytes != part->count * sizeof (float))
            return ps_error_set (err, PS_EPROTO,
                                 "server %s: tensor %zu is not partition %s/%u of %zu floats",
                                 endpoint, i, self->vars [part->var].name, part->part, part->count);
        memcpy (values [part->var] + part->offset, ps_msg_tensor (request->reply, i),
                part->count * sizeof (float));
    }
    return PS_OK;
}

static void
s_count_applied (s_request_t *request, ps_push_info_t *info)
{
    const ps_proto_t *reply = ps_msg_proto (request->reply);
    const ps_proto_applied_array_t *applied = reply->type == PS_PROTO_PUSH_OK
                                            ? &reply->push_ok.applied
                                            : &reply->push_pull_ok.applied;
    for (size_t i = 0; i < applied->count; i++) {
        if (applied->items [i].duplicate)
            info->duplicates++;
        else
            info->applied++;
    }
}

//  Send one pull, push or push-pull request for partitions [first, first +
//  count) of server s; a push with round != 0 carries round and
//  round_steps.
static int
s_send_data (ps_client_t *self, int s, size_t first, size_t count, ps_proto_type_t type,
             uint64_t step, uint32_t worker, uint64_t round, uint32_t round_steps,
             const float *const *grads, ps_error_t *err)
{
    ps_proto_t msg;
    s_begin (self, s, first, count, type, &msg);
    const s_request_t *request = &self->requests [self->nrequests - 1];
    if (!grads) {
        ps_proto_partref_t *refs = s_items (self, count, sizeof *refs, 0, NULL);
        for (size_t i = 0; i < count; i++) {
            const s_part_t *part = s_request_part (self, request, i);
            refs [i] = (ps_proto_partref_t) { self->vars [part->var].name, part->part };
        }
        msg.pull.parts = (ps_proto_partref_array_t) { count, refs };
        return s_send (self, &msg, 0, err);
    }
    uint64_t *dims;
    ps_proto_tensor_t *tensors = s_items (self, count, sizeof *tensors, count * PS_MAX_RANK,
                                          &dims);
    for (size_t i = 0; i < count; i++) {
        const s_part_t *part = s_request_part (self, request, i);
        tensors [i] = (ps_proto_tensor_t) { .var = self->vars [part->var].name,
                                            .part = part->part,
                                            .bytes = part->count * sizeof (float) };
        ps_proto_shape_set (&tensors [i].shape, dims + i * PS_MAX_RANK, &part->local);
        //  Zero-copy: ZeroMQ reads the caller's buffer while sending.
        atomic_fetch_add (&self->outstanding, 1);
        if (zmq_msg_init_data (&self->frames [i], (void *) (grads [part->var] + part->offset),
                               part->count * sizeof (float), s_frame_release,
                               &self->outstanding) != 0)
            abort ();
    }
    //  A push and a push-pull carry the same fields.
    ps_proto_push_t push = { .step = step, .worker = worker,
                             .has_generation = self->generation != 0,
                             .generation = self->generation,
                             .has_round = round != 0, .round = round,
                             .has_round_steps = round != 0, .round_steps = round_steps,
                             .tensors = { count, tensors } };
    if (type == PS_PROTO_PUSH)
        msg.push = push;
    else
        msg.push_pull = (ps_proto_push_pull_t) { push.step, push.worker, push.has_generation,
                                                 push.generation, push.tensors };
    return s_send (self, &msg, count, err);
}

//  The shared body of pull, push and push-pull (round: see s_send_data).
static int
s_data (ps_client_t *self, ps_proto_type_t type, uint64_t step, uint32_t worker,
        uint64_t round, uint32_t round_steps, const float *const *grads, float *const *values, ps_push_info_t *info, ps_error_t *err)
{
    s_start (self);
    int rc = PS_OK;
    for (int s = 0; s < self->nservers && rc == PS_OK; s++) {
        s_server_t *server = &self->servers [s];
        size_t first = 0;
        while (first < server->nparts && rc == PS_OK) {
            //  Batch consecutive partitions up to S_REQUEST_BYTES.
            size_t count = 0, bytes = 0;
            do {
                bytes += self->parts [server->parts [first + count]].count * sizeof (float);
                count++;
            } while (first + count < server->nparts
                  && bytes + self->parts [server->parts [first + count]].count * sizeof (float)
                     <= S_REQUEST_BYTES);
            rc = s_send_data (self, s, first, count, type, step, worker, round, round_steps,
                              grads, err);
            first += count;
        }
    }
    int collected = s_collect (self, ps_proto_info [type].reply, err);
    if (rc == PS_OK)
        rc = collected;
    if (info)
        *info = (ps_push_info_t) { 0, 0 };
    for (size_t r = 0; r < self->nrequests && rc == PS_OK; r++) {
        s_request_t *request = &self->requests [r];
        if (grads && info)
            s_count_applied (request, info);
        if (values)
            rc = s_scatter_values (self, request, values, err);
    }
    return rc;
}

int
ps_client_pull (ps_client_t *self, float *const *values, ps_error_t *err)
{
    assert (self);
    return s_data (self, PS_PROTO_PULL, 0, 0, 0, 0, NULL, values, NULL, err);
}

int
ps_client_push (ps_client_t *self, uint64_t step, uint32_t worker,
                const float *const *grads, ps_push_info_t *info, ps_error_t *err)
{
    assert (self && grads);
    return s_data (self, PS_PROTO_PUSH, step, worker, 0, 0, grads, NULL, info, err);
}

int
ps_client_push_round (ps_client_t *self, uint64_t step, uint32_t worker, uint64_t round,
                      uint32_t round_steps, const float *const *grads, ps_push_info_t *info,
                      ps_error_t *err)
{
    assert (self && grads && round > 0);
    return s_data (self, PS_PROTO_PUSH, step, worker, round, round_steps, grads, NULL, info,
                   err);
}

int
ps_client_push_pull (ps_client_t *self, uint64_t step, uint32_t worker,
                     const float *const *grads, float *const *values,
                     ps_push_info_t *info, ps_error_t *err)
{
    assert (self && grads && values);
    return s_data (self, PS_PROTO_PUSH_PULL, step, worker, 0, 0, grads, values, info, err);
}

//  Send a request without fields to one server and wait for its reply.
static int
s_simple (ps_client_t *self, int server, ps_proto_type_t type, ps_error_t *err)
{
    if (server < 0 || server >= self->nservers)
        return ps_error_set (err, PS_EINVAL, "no server %d", server);
    s_start (self);
    ps_proto_t msg;
    s_begin (self, server, 0, 0, type, &msg);
    int rc = s_send (self, &msg, 0, err);
    int collected = s_collect (self, ps_proto_info [type].reply, err);
    return rc ? rc : collected;
}

int
ps_client_ping (ps_client_t *self, int server, ps_error_t *err)
{
    assert (self);
    return s_simple (self, server, PS_PROTO_PING, err);
}

void
ps_client_set_generation (ps_client_t *self, uint64_t generation)
{
    assert (self);
    self->generation = generation;
}

int
ps_client_fence (ps_client_t *self, uint64_t generation, ps_error_t *err)
{
    assert (self);
    s_start (self);
    int rc = PS_OK;
    for (int s = 0; s < self->nservers && rc == PS_OK; s++) {
        ps_proto_t msg;
        s_begin (self, s, 0, 0, PS_PROTO_FENCE, &msg);
        msg.fence.generation = generation;
        rc = s_send (self, &msg, 0, err);
    }
    int collected = s_collect (self, PS_PROTO_FENCE_OK, err);
    return rc ? rc : collected;
}

int
ps_client_probe_root (ps_client_t *self, int server, const char *name, const char *token,
                      char *root, size_t len, ps_error_t *err)
{
    assert (self);
    if (server < 0 || server >= self->nservers)
        return ps_error_set (err, PS_EINVAL, "no server %d", server);
    s_start (self);
    ps_proto_t msg;
    s_begin (self, server, 0, 0, PS_PROTO_PROBE_ROOT, &msg);
    msg.probe_root = (ps_proto_probe_root_t) { .name = name, .token = token };
    int rc = s_send (self, &msg, 0, err);
    int collected = s_collect (self, PS_PROTO_PROBE_ROOT_OK, err);
    if (rc == PS_OK)
        rc = collected;
    if (rc == PS_OK)
        snprintf (root, len, "%s", ps_msg_proto (self->requests [0].reply)->probe_root_ok.root);
    return rc;
}

int
ps_client_shutdown (ps_client_t *self, int server, ps_error_t *err)
{
    assert (self);
    return s_simple (self, server, PS_PROTO_SHUTDOWN, err);
}

int
ps_client_stats (ps_client_t *self, int server, ps_part_stats_t **stats, size_t *count,
                 ps_error_t *err)
{
    assert (self);
    int rc = s_simple (self, server, PS_PROTO_STATS, err);
    if (rc)
        return rc;
    const ps_proto_part_stats_array_t *list
        = &ps_msg_proto (self->requests [0].reply)->stats_ok.partitions;
    *count = list->count;
    *stats = calloc (*count + 1, sizeof (ps_part_stats_t));
    if (!*stats)
        abort ();
    for (size_t i = 0; i < *count; i++) {
        const ps_proto_part_stats_t *entry = &list->items [i];
        ps_part_stats_t *out = &(*stats) [i];
        snprintf (out->var, sizeof out->var, "%s", entry->var);
        out->part = (uint32_t) entry->part;
        if (entry->rows.count == 2) {
            out->row_begin = (int64_t) entry->rows.items [0];
            out->row_end = (int64_t) entry->rows.items [1];
        }
        out->updates = entry->updates;
        out->duplicates = entry->duplicates;
        out->recorded = entry->recorded;
        out->bytes_in = entry->bytes_in;
        out->bytes_out = entry->bytes_out;
        out->nonfinite = entry->nonfinite;
    }
    return PS_OK;
}

//  The table files of the snapshot replies of the current call.
static void
s_table_files (ps_client_t *self, ps_table_file_t **tables, size_t *ntables)
{
    size_t total = 0;
    for (size_t r = 0; r < self->nrequests; r++)
        total += ps_msg_proto (self->requests [r].reply)->snapshot_ok.tables.count;
    *tables = calloc (total + 1, sizeof (ps_table_file_t));
    if (!*tables)
        abort ();
    *ntables = 0;
    for (size_t r = 0; r < self->nrequests; r++) {
        const ps_proto_table_file_array_t *list
            = &ps_msg_proto (self->requests [r].reply)->snapshot_ok.tables;
        for (size_t i = 0; i < list->count; i++) {
            const ps_proto_table_file_t *entry = &list->items [i];
            ps_table_file_t *out = &(*tables) [(*ntables)++];
            out->server = self->requests [r].server;
            snprintf (out->table, sizeof out->table, "%s", entry->table);
            snprintf (out->file, sizeof out->file, "%s", entry->file);
            out->shard = (uint32_t) entry->shard;
            out->shards = (uint32_t) entry->shards;
            out->full = entry->full;
            out->rows = entry->rows;
            out->steps = entry->steps;
        }
    }
}

int
ps_client_snapshot_tables (ps_client_t *self, const char *dir, const char *base,
                           ps_snap_file_t **files, size_t *count, ps_table_file_t **tables,
                           size_t *ntables, ps_error_t *err)
{
    assert (self);
    s_start (self);
    int rc = PS_OK;
    for (int s = 0; s < self->nservers && rc == PS_OK; s++) {
        ps_proto_t msg;
        s_begin (self, s, 0, 0, PS_PROTO_SNAPSHOT, &msg);
        msg.snapshot = (ps_proto_snapshot_t) { .dir = dir, .has_incremental = base != NULL,
                                               .incremental = base != NULL,
                                               .has_base = base != NULL, .base = base };
        rc = s_send (self, &msg, 0, err);
    }
    int collected = s_collect (self, PS_PROTO_SNAPSHOT_OK, err);
    if (rc == PS_OK)
        rc = collected;
    if (rc)
        return rc;
    size_t total = 0;
    for (size_t r = 0; r < self->nrequests; r++)
        total += ps_msg_proto (self->requests [r].reply)->snapshot_ok.files.count;
    *files = calloc (total + 1, sizeof (ps_snap_file_t));
    if (!*files)
        abort ();
    *count = 0;
    for (size_t r = 0; r < self->nrequests; r++) {
        const ps_proto_snap_file_array_t *list
            = &ps_msg_proto (self->requests [r].reply)->snapshot_ok.files;
        for (size_t i = 0; i < list->count; i++) {
            const ps_proto_snap_file_t *entry = &list->items [i];
            ps_snap_file_t *out = &(*files) [(*count)++];
            out->server = self->requests [r].server;
            snprintf (out->var, sizeof out->var, "%s", entry->var);
            snprintf (out->file, sizeof out->file, "%s", entry->file);
            out->part = (uint32_t) entry->part;
            out->bytes = entry->bytes;
            out->crc = (uint32_t) entry->crc32;
            out->version = entry->version;
        }
    }
    if (tables)
        s_table_files (self, tables, ntables);
    return PS_OK;
}

int
ps_client_snapshot (ps_client_t *self, const char *dir, ps_snap_file_t **files, size_t *count,
                    ps_error_t *err)
{
    return ps_client_snapshot_tables (self, dir, NULL, files, count, NULL, NULL, err);
}

//  Restore from dir (and base, unless NULL): every server with
//  partitions of the layout, or with all_servers every server, each
//  naming its own partitions.
static int
s_restore (ps_client_t *self, const char *dir, const char *base, bool all_servers,
           ps_error_t *err)
{
    s_start (self);
    int rc = PS_OK;
    for (int s = 0; s < self->nservers && rc == PS_OK; s++) {
        s_server_t *server = &self->servers [s];
        if (server->nparts == 0 && !all_servers)
            continue;
        ps_proto_t msg;
        s_begin (self, s, 0, server->nparts, PS_PROTO_RESTORE, &msg);
        ps_proto_partref_t *refs = s_items (self, server->nparts + 1, sizeof *refs, 0, NULL);
        for (size_t i = 0; i < server->nparts; i++) {
            const s_part_t *part = &self->parts [server->parts [i]];
            refs [i] = (ps_proto_partref_t) { self->vars [part->var].name, part->part };
        }
        msg.restore = (ps_proto_restore_t) { .dir = dir, .has_parts = true,
                                             .parts = { server->nparts, refs },
                                             .has_base = base != NULL, .base = base,
                                             .has_generation = self->generation != 0,
                                             .generation = self->generation };
        rc = s_send (self, &msg, 0, err);
    }
    int collected = s_collect (self, PS_PROTO_RESTORE_OK, err);
    return rc ? rc : collected;
}

int
ps_client_restore (ps_client_t *self, const char *dir, ps_error_t *err)
{
    assert (self);
    return s_restore (self, dir, NULL, false, err);
}

int
ps_client_restore_tables (ps_client_t *self, const char *dir, const char *base,
                          size_t ntables, ps_error_t *err)
{
    assert (self);
    int rc = s_restore (self, dir, base, true, err);
    for (size_t r = 0; rc == PS_OK && r < self->nrequests; r++) {
        size_t restored = ps_msg_proto (self->requests [r].reply)->restore_ok.tables.count;
        if (restored != ntables)
            rc = ps_error_set (err, PS_ENOTFOUND, "server %s restored %zu table shards from "
                               "%s, expected %zu (one per table): a table file is missing",
                               self->servers [self->requests [r].server].endpoint, restored,
                               dir, ntables);
    }
    return rc;
}

int
ps_client_table_create (ps_client_t *self, const ps_tablespec_t *specs, size_t count,
                        ps_error_t *err)
{
    assert (self);
    s_start (self);
    int rc = PS_OK;
    for (int s = 0; s < self->nservers && rc == PS_OK; s++) {
        ps_proto_t msg;
        s_begin (self, s, 0, 0, PS_PROTO_TABLE_CREATE, &msg);
        ps_proto_tablespec_t *out = s_items (self, count + 1, sizeof *out, 0, NULL);
        for (size_t t = 0; t < count; t++)
            ps_proto_tablespec_set (&out [t], &specs [t]);
        msg.table_create = (ps_proto_table_create_t) { .tables = { count, out },
                                                       .shard = (uint64_t) s,
                                                       .shards = (uint64_t) self->nservers };
        rc = s_send (self, &msg, 0, err);
    }
    int collected = s_collect (self, PS_PROTO_TABLE_CREATE_OK, err);
    return rc ? rc : collected;
}

int
ps_client_table_stats (ps_client_t *self, int server, ps_table_stats_t **stats, size_t *count,
                       ps_error_t *err)
{
    assert (self);
    int rc = s_simple (self, server, PS_PROTO_STATS, err);
    if (rc)
        return rc;
    const ps_proto_table_stats_array_t *list
        = &ps_msg_proto (self->requests [0].reply)->stats_ok.tables;
    *count = list->count;
    *stats = calloc (*count + 1, sizeof (ps_table_stats_t));
    if (!*stats)
        abort ();
    for (size_t i = 0; i < *count; i++) {
        const ps_proto_table_stats_t *in = &list->items [i];
        ps_table_stats_t *out = &(*stats) [i];
        snprintf (out->table, sizeof out->table, "%s", in->table);
        out->dim = (uint32_t) in->dim;
        out->shard = (uint32_t) in->shard;
        out->shards = (uint32_t) in->shards;
        out->rows = in->rows;
        out->created = in->created;
        out->evicted = in->evicted;
        out->dropped = in->dropped;
        out->oom = in->oom;
        out->pushes = in->pushes;
        out->duplicates = in->duplicates;
        out->row_updates = in->row_updates;
        out->pulls = in->pulls;
        out->steps = in->steps;
        out->nonfinite = in->nonfinite;
        out->bytes = in->bytes;
    }
    return PS_OK;
}

//  Room for n frames in the request being built.
static void
s_frames_reserve (ps_client_t *self, size_t n)
{
    if (n <= self->frames_cap)
        return;
    self->frames_cap = n;
    self->frames = realloc (self->frames, self->frames_cap * sizeof (zmq_msg_t));
    if (!self->frames)
        abort ();
}

int
ps_client_exchange (ps_client_t *self, const ps_client_request_t *requests, size_t n,
                    ps_proto_type_t reply_type, ps_msg_t **replies, ps_error_t *err)
{
    assert (self && (requests || n == 0) && (replies || n == 0));
    s_start (self);
    int rc = PS_OK;
    for (size_t r = 0; r < n && rc == PS_OK; r++) {
        const ps_client_request_t *request = &requests [r];
        if (request->server < 0 || request->server >= self->nservers) {
            rc = ps_error_set (err, PS_EINVAL, "no server %d", request->server);
            break;
        }
        ps_proto_t head;
        s_begin (self, request->server, 0, 0, request->msg->type, &head);
        request->msg->id = head.id;
        s_frames_reserve (self, request->nframes);
        for (size_t i = 0; i < request->nframes; i++) {
            //  An empty frame (a table with no id on this server) has no
            //  buffer for ZeroMQ to release.
            if (request->sizes [i] == 0) {
                zmq_msg_init (&self->frames [i]);
                continue;
            }
            atomic_fetch_add (&self->outstanding, 1);
            if (zmq_msg_init_data (&self->frames [i], (void *) request->data [i],
                                   request->sizes [i], s_frame_release,
                                   &self->outstanding) != 0)
                abort ();
        }
        rc = s_send (self, request->msg, request->nframes, err);
    }
    int collected = s_collect (self, reply_type, err);
    if (rc == PS_OK)
        rc = collected;
    for (size_t r = 0; r < n && rc == PS_OK; r++)
        replies [r] = self->requests [r].reply;
    return rc;
}
