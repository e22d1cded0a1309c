//  Fuzz target: the ps-server's request handling, through a real server.
//
//  Each input is a run of multipart messages in the framing of
//  fuzz_frames.h (a frame with the message-end bit closes a message). For
//  every input a ps_server (ps/ps_server.h) is started on an ipc://
//  endpoint in the fuzz process's scratch directory, served by a thread,
//  with one apply thread so that large requests cross the pool; a DEALER
//  sends the messages one at a time and waits for each reply; the server is
//  stopped through its stop descriptor and destroyed at the end of the
//  input. A fresh server per input keeps inputs independent, so a finding
//  replays from its input alone and memory cannot pile up across inputs.
//
//  Findings, beyond the sanitizers: a message that gets no reply within
//  S_REPLY_TIMEOUT_MS (the server must answer every request, refusing or
//  not), a reply that the generated codec does not decode, a reply of
//  another type than the request's reply (the dispatch table's) or
//  "error", and a reply that carries another id than the request's.
//
//  Two kinds of request are adjusted before they are sent, because they
//  are legitimate and would otherwise harm the machine rather than find
//  anything: "snapshot" and "restore" have their "dir" moved inside the
//  scratch directory ("/" and ".." components cannot leave it; the
//  request is encoded again by the generated codec), and a
//  "create" that would bring the partitions this input has created above
//  S_MAX_FLOATS floats is not sent, nor a "table_create" of more than
//  S_MAX_TABLES tables or that would go over that budget, each table
//  counting for S_MAX_FLOATS / S_MAX_TABLES floats (an empty table shard
//  holds a few MiB of stripes).

#include "fuzz_frames.h"
#include "fuzz_scratch.h"
#include "ps_clock.h"
#include "ps_log.h"
#include "ps_msg.h"
#include "ps_proto_conv.h"
#include "ps_server.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

//  Generous for a loaded 2-core machine: the server answers in well under
//  a millisecond.
#define S_REPLY_TIMEOUT_MS  15000
#define S_MAX_FRAMES        512
#define S_MAX_FLOATS        ((int64_t) 1 << 20)
#define S_MAX_TABLES        8

typedef struct {
    ps_server_t *server;
    int stop_fd;
    pthread_t thread;
    atomic_bool returned;
    int rc;
} s_running_t;

static void *s_ctx;
static char s_endpoint [512];
static char s_snap_root [512];
static ps_msg_t *s_request;
static ps_msg_t *s_reply;

static void __attribute__ ((format (printf, 1, 2), noreturn))
s_fail (const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    fprintf (stderr, "fuzz_server: ");
    vfprintf (stderr, fmt, args);
    fprintf (stderr, "\n");
    va_end (args);
    abort ();
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
    (void) argc;
    (void) argv;
    //  Every refused request would log a warning.
    ps_log_init ("fuzz_server", PS_LOG_ERROR);
    snprintf (s_endpoint, sizeof s_endpoint, "ipc://%s/ps.sock", fuzz_scratch_dir ());
    snprintf (s_snap_root, sizeof s_snap_root, "%s/snap", fuzz_scratch_dir ());
    s_ctx = zmq_ctx_new ();
    s_request = ps_msg_new ();
    s_reply = ps_msg_new ();
    if (!s_ctx)
        s_fail ("zmq_ctx_new: %s", zmq_strerror (errno));
    return 0;
}

static void *
s_serve (void *arg)
{
    s_running_t *running = arg;
    running->rc = ps_server_run (running->server, running->stop_fd);
    atomic_store (&running->returned, true);
    return NULL;
}

static void
s_start (s_running_t *running)
{
    ps_server_config_t config = {
        .bind = s_endpoint, .name = "ps:0", .threads = 1, .max_message = -1,
        .max_pending = (size_t) 256 << 20,
    };
    ps_opt_config_default (&config.opt, PS_OPT_SGD);
    ps_error_t err;
    running->server = ps_server_new (&config, &err);
    if (!running->server)
        s_fail ("cannot start the server: %s", err.msg);
    running->stop_fd = eventfd (0, EFD_CLOEXEC);
    atomic_init (&running->returned, false);
    if (running->stop_fd < 0 || pthread_create (&running->thread, NULL, s_serve, running) != 0)
        s_fail ("cannot run the server: %s", strerror (errno));
}

static void
s_stop (s_running_t *running)
{
    uint64_t one = 1;
    ssize_t n;
    while ((n = write (running->stop_fd, &one, sizeof one)) < 0 && errno == EINTR)
        ;
    if (n != sizeof one)
        s_fail ("cannot signal the server to stop: %s", strerror (errno));
    pthread_join (running->thread, NULL);
    close (running->stop_fd);
    ps_server_destroy (&running->server);
}

//  The floats a decoded create request would allocate, counting every
//  partition it lists as new (those it cannot create count nothing).
static int64_t
s_create_floats (const ps_proto_create_t *create)
{
    int64_t total = 0;
    for (size_t i = 0; i < create->partitions.count; i++) {
        const ps_proto_partition_t *spec = &create->partitions.items [i];
        const ps_proto_uint_array_t *rows = &spec->rows;
        ps_shape_t shape, local;
        if (ps_proto_shape_get (&spec->shape, &shape, NULL) != 0
        ||  rows->count != 2 || rows->items [0] > INT64_MAX || rows->items [1] > INT64_MAX
        ||  ps_shape_rows (&shape, (int64_t) rows->items [0], (int64_t) rows->items [1],
                           &local, NULL) != 0)
            continue;
        int64_t count = ps_shape_count (&local);
        if (count > S_MAX_FLOATS)
            return S_MAX_FLOATS + 1;
        total += count;
    }
    return total;
}

//  Write path under the snapshot root: its components follow the root,
//  "." and ".." becoming "_", so the result stays inside the root. Other
//  bytes are kept (the codec has refused a NUL).
static void
s_confine (const char *path, char *out, size_t out_len)
{
    size_t len = strlen (path);
    size_t used = (size_t) snprintf (out, out_len, "%s", s_snap_root);
    size_t pos = 0;
    while (pos < len) {
        size_t end = pos;
        while (end < len && path [end] != '/')
            end++;
        size_t n = end - pos;
        const char *part = path + pos;
        if ((n == 1 && part [0] == '.') || (n == 2 && part [0] == '.' && part [1] == '.')) {
            part = "_";
            n = 1;
        }
        if (n > 0 && used + 1 + n < out_len) {
            out [used++] = '/';
            memcpy (out + used, part, n);
            used += n;
        }
        pos = end + 1;
    }
    out [used] = 0;
}

//  Encode request (a snapshot or restore) again into sbuf, with its "dir"
//  confined to the snapshot root.
static void
s_encode_confined (const ps_proto_t *request, msgpack_sbuffer *sbuf)
{
    static char dir [4096];
    ps_proto_t confined = *request;
    if (confined.type == PS_PROTO_SNAPSHOT) {
        s_confine (request->snapshot.dir, dir, sizeof dir);
        confined.snapshot.dir = dir;
    }
    else {
        s_confine (request->restore.dir, dir, sizeof dir);
        confined.restore.dir = dir;
    }
    msgpack_packer pk;
    msgpack_packer_init (&pk, sbuf, msgpack_sbuffer_write);
    if (ps_proto_encode (&confined, &pk) != 0)
        s_fail ("cannot encode a confined %s", ps_proto_info [confined.type].name);
}

//  Send one message and check its reply. Returns false when the server has
//  been told to shut down and said yes, so nothing more can be sent.
static bool
s_exchange (void *dealer, s_running_t *running, fuzz_frame_t *frames, size_t count,
            int64_t *floats)
{
    //  The server takes an empty first frame followed by others as a REQ
    //  peer's delimiter, and echoes it before its reply.
    bool delimited = count > 1 && frames [0].size == 0;
    size_t first = delimited ? 1 : 0;
    const void *parts [S_MAX_FRAMES];
    size_t sizes [S_MAX_FRAMES];
    for (size_t i = 0; i < count; i++) {
        parts [i] = frames [i].data;
        sizes [i] = frames [i].size;
    }
    if (ps_msg_set (s_request, parts + first, sizes + first, count - first) != 0)
        s_fail ("ps_msg_set refused the request");
    ps_error_t err;
    //  The request's type; PS_PROTO_NONE when the codec refused it.
    ps_proto_type_t type = PS_PROTO_NONE;
    //  Owns the header sent in place of a snapshot's or restore's.
    msgpack_sbuffer confined;
    msgpack_sbuffer_init (&confined);
    if (ps_msg_decode (s_request, &err) == 0) {
        const ps_proto_t *request = ps_msg_proto (s_request);
        type = request->type;
        if (type == PS_PROTO_CREATE) {
            int64_t more = s_create_floats (&request->create);
            if (more > S_MAX_FLOATS - *floats)
                return true;
            *floats += more;
        }
        //  Counted as floats' worth of S_MAX_FLOATS / S_MAX_TABLES each.
        if (type == PS_PROTO_TABLE_CREATE) {
            int64_t more = (int64_t) request->table_create.tables.count
                         * (S_MAX_FLOATS / S_MAX_TABLES);
            if (request->table_create.tables.count > S_MAX_TABLES
            ||  more > S_MAX_FLOATS - *floats)
                return true;
            *floats += more;
        }
        if (type == PS_PROTO_SNAPSHOT || type == PS_PROTO_RESTORE) {
            s_encode_confined (request, &confined);
            parts [first] = confined.data;
            sizes [first] = confined.size;
        }
    }
    uint64_t id = ps_msg_id (s_request);
    //  libFuzzer's timer signal interrupts blocking calls now and then.
    for (size_t i = 0; i < count; i++)
        while (zmq_send (dealer, parts [i], sizes [i], i + 1 < count ? ZMQ_SNDMORE : 0) < 0)
            if (errno != EINTR)
                s_fail ("cannot send a request: %s", zmq_strerror (errno));
    msgpack_sbuffer_destroy (&confined);

    zmq_pollitem_t item = { dealer, 0, ZMQ_POLLIN, 0 };
    double deadline = ps_clock_ms () + S_REPLY_TIMEOUT_MS;
    int ready;
    do {
        double left = deadline - ps_clock_ms ();
        ready = zmq_poll (&item, 1, left > 0 ? (long) left : 0);
        if (ready < 0 && errno != EINTR)
            s_fail ("zmq_poll: %s", zmq_strerror (errno));
    } while (ready < 0);
    if (ready == 0)
        s_fail ("no reply within the timeout to a request of type %s (%s)",
                type ? ps_proto_info [type].name : "(refused by the codec)",
                atomic_load (&running->returned) ? "the server's loop has returned"
                                                 : "the server's loop is still running");
    //  Receive the reply's frames, dropping the echoed delimiter.
    zmq_msg_t got [S_MAX_FRAMES];
    size_t nreply = 0;
    int more = 1;
    while (more) {
        zmq_msg_t part;
        if (zmq_msg_init (&part) != 0)
            s_fail ("zmq_msg_init: %s", zmq_strerror (errno));
        while (zmq_msg_recv (&part, dealer, 0) < 0)
            if (errno != EINTR)
                s_fail ("cannot receive a reply: %s", zmq_strerror (errno));
        more = zmq_msg_more (&part);
        if (nreply == S_MAX_FRAMES)
            s_fail ("a reply has more than %d frames", S_MAX_FRAMES);
        got [nreply++] = part;
    }
    if (delimited && zmq_msg_size (&got [0]) != 0)
        s_fail ("the reply does not echo the request's empty delimiter");
    const void *reply_parts [S_MAX_FRAMES];
    size_t reply_sizes [S_MAX_FRAMES];
    for (size_t i = 0; i < nreply; i++) {
        reply_parts [i] = zmq_msg_data (&got [i]);
        reply_sizes [i] = zmq_msg_size (&got [i]);
    }
    if (ps_msg_set (s_reply, reply_parts + first, reply_sizes + first, nreply - first) != 0)
        s_fail ("the reply has no header");
    for (size_t i = 0; i < nreply; i++)
        zmq_msg_close (&got [i]);
    if (ps_msg_decode (s_reply, &err) != 0)
        s_fail ("the reply does not validate: %s", err.msg);
    ps_proto_type_t reply = ps_msg_proto (s_reply)->type;
    ps_proto_type_t expect = ps_proto_info [type].reply;
    if (reply != PS_PROTO_ERROR && (expect == PS_PROTO_NONE || reply != expect))
        s_fail ("a %s request got a %s reply", type ? ps_proto_info [type].name : "refused",
                ps_proto_info [reply].name);
    if (ps_msg_id (s_reply) != id)
        s_fail ("a %s reply carries id %llu, its request %llu", ps_proto_info [reply].name,
                (unsigned long long) ps_msg_id (s_reply), (unsigned long long) id);
    return !(type == PS_PROTO_SHUTDOWN && reply == PS_PROTO_SHUTDOWN_OK);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    static fuzz_frame_t frames [S_MAX_FRAMES];
    size_t count = fuzz_frames_split (data, size, frames, S_MAX_FRAMES);
    if (count == 0)
        return 0;
    char path [512];
    fuzz_scratch_mkdir ("snap", path, sizeof path);
    s_running_t running;
    s_start (&running);
    void *dealer = zmq_socket (s_ctx, ZMQ_DEALER);
    int linger = 0;
    if (!dealer || zmq_setsockopt (dealer, ZMQ_LINGER, &linger, sizeof linger) != 0
    ||  zmq_connect (dealer, s_endpoint) != 0)
        s_fail ("cannot connect to %s: %s", s_endpoint, zmq_strerror (errno));
    int64_t floats = 0;
    size_t begin = 0;
    for (size_t i = 0; i < count; i++) {
        if (!frames [i].last && i + 1 < count)
            continue;
        if (!s_exchange (dealer, &running, frames + begin, i + 1 - begin, &floats))
            break;
        begin = i + 1;
    }
    zmq_close (dealer);
    s_stop (&running);
    ps_msg_clear (s_request);
    ps_msg_clear (s_reply);
    fuzz_scratch_clear ();
    return 0;
}
