//  ps-server against malformed and hostile input, on a real process and
//  loopback TCP. A raw DEALER socket sends hand-built messages: header
//  bytes that are not msgpack, msgpack that is not a map, oversized headers
//  and too many frames, a foreign protocol version, unknown types, missing,
//  unknown, duplicated and wrongly typed fields, reply types sent as
//  requests, frame counts and byte lengths that disagree with the header,
//  gradients whose shape does not match their partition, partitions that do
//  not exist, and an empty message. Each must get an error reply with the
//  right code, a message naming the problem and the request's id (0 where
//  the header could not be read), and the same socket's next ping must get
//  ping_ok. None of them may change the partition: its values, update
//  count and step ledger are checked at the end through the client. Also
//  covered: a REQ peer's envelope, raw TCP bytes that are not ZeroMQ at
//  all, a frame above --max-message (that peer is dropped without a reply,
//  other peers are served), the error count in stats, and exit status 0 on
//  SIGTERM.
//
//  The hand-built headers are packed with msgpack-c's packer, so they can
//  be wrong in any way; the requests that are not under test (the create,
//  pings, pulls, stats) are encoded by the generated codec, and every reply
//  is read through it.
//
//  The servers are secured, and every hand-built message comes from a key
//  the server trusts with what its type asks, so that it reaches the code
//  under test rather than the authorization in front of it: data-shaped
//  requests (push, push_pull, pull, ping, stats and the undecodable) as
//  worker:0, control-shaped ones (create, and reply types sent as
//  requests) as chief:0.
//
//  This file is longer than the project's 800 lines on purpose: its cases
//  send one kind of thing, malformed input, to the same server through the
//  same raw socket.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "harness_wire.h"
#include "ps_client.h"
#include "ps_msg.h"

#define S_TIMEOUT_MS    5000    //  every receive is bounded by this
#define S_SILENCE_MS    500     //  how long "no reply" is waited for
#define S_STEP          7       //  the step of every refused push
#define S_ROWS          4       //  the partition m/w/0: [4,3] of zeros
#define S_COLS          3
#define S_BYTES         (S_ROWS * S_COLS * 4)

static harness_server_t s_server;      //  the server every bad request goes to
static harness_server_t s_limited;     //  started with --max-message 1
static void *s_ctx;
static void *s_dealer;                 //  worker:0's: sends every bad request but...
static void *s_chief;                  //  ...the control-shaped ones, chief:0's
static ps_msg_t *s_reply;
static uint64_t s_next_id = 1000;
static unsigned s_refused;             //  error replies s_server has sent us
static float s_ones [64];              //  gradient frames: applying one shows

//  A socket of s_ctx connected to endpoint, as a CURVE client of the
//  server task server_task with task's identity, or NULL.
static void *
s_connect (int type, const char *endpoint, const char *task, const char *server_task)
{
    void *socket = zmq_socket (s_ctx, type);
    int linger = 0;
    ps_error_t err;
    if (!socket || zmq_setsockopt (socket, ZMQ_LINGER, &linger, sizeof linger) != 0
    ||  ps_curve_client (harness_curve (task), socket, server_task, &err) != 0
    ||  zmq_connect (socket, endpoint) != 0) {
        if (socket)
            zmq_close (socket);
        return NULL;
    }
    return socket;
}

static int
s_setup (void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof s_ones / sizeof s_ones [0]; i++)
        s_ones [i] = 1.0f;
    if (harness_server_start (&s_server, 0, (const char *[]) { "--threads", "2", NULL }))
        return -1;
    s_ctx = zmq_ctx_new ();
    if (!s_ctx)
        return -1;
    s_dealer = s_connect (ZMQ_DEALER, s_server.endpoint, "worker:0", "ps:0");
    s_chief = s_connect (ZMQ_DEALER, s_server.endpoint, "chief:0", "ps:0");
    if (!s_dealer || !s_chief)
        return -1;
    s_reply = ps_msg_new ();
    return 0;
}

static int
s_teardown (void **state)
{
    (void) state;
    ps_msg_destroy (&s_reply);
    if (s_dealer)
        zmq_close (s_dealer);
    if (s_chief)
        zmq_close (s_chief);
    if (s_ctx)
        zmq_ctx_term (s_ctx);
    if (s_server.pid > 0)
        harness_server_stop (&s_server, SIGKILL);
    if (s_limited.pid > 0)
        harness_server_stop (&s_limited, SIGKILL);
    return 0;
}

//  A socket of worker:0's connected to the server task server_task at
//  endpoint.
static void *
s_socket (int type, const char *endpoint, const char *server_task)
{
    void *socket = s_connect (type, endpoint, "worker:0", server_task);
    assert_non_null (socket);
    return socket;
}

//  ---------------------------------------------------------------------
//  Sending

//  Send nframes raw frames as one multipart message.
static void
s_send_frames (void *socket, size_t nframes, const void *const *frames, const size_t *sizes)
{
    for (size_t i = 0; i < nframes; i++) {
        int rc = zmq_send (socket, frames [i], sizes [i], i + 1 < nframes ? ZMQ_SNDMORE : 0);
        if (rc != (int) sizes [i])
            fail_msg ("zmq_send of frame %zu: %s", i, zmq_strerror (zmq_errno ()));
    }
}

static void
s_send_raw (void *socket, const void *data, size_t size)
{
    s_send_frames (socket, 1, (const void *[]) { data }, (size_t []) { size });
}

//  Send the header packed in writer, then ntensors tensor frames of the
//  given sizes, all cut from s_ones (or from data when given); finishes
//  the writer.
static void
s_send_message (void *socket, ps_writer_t *writer, size_t ntensors, const size_t *sizes,
                const void *data)
{
    const void *frames [8] = { writer->sbuf.data };
    size_t lengths [8] = { writer->sbuf.size };
    assert_true (ntensors < 8);
    for (size_t i = 0; i < ntensors; i++) {
        assert_true (data || sizes [i] <= sizeof s_ones);
        frames [i + 1] = data ? data : s_ones;
        lengths [i + 1] = sizes [i];
    }
    s_send_frames (socket, ntensors + 1, frames, lengths);
    ps_writer_fini (writer);
}

//  A writer holding msg, encoded by the generated codec: a well-formed
//  header, for the requests that are not under test.
static void
s_typed (ps_writer_t *writer, const ps_proto_t *msg)
{
    ps_writer_init (writer);
    ps_writer_encode (writer, msg);
}

//  Pack a str by hand.
static void
s_pack_str (msgpack_packer *pk, const char *s)
{
    size_t len = strlen (s);
    msgpack_pack_str (pk, len);
    msgpack_pack_str_body (pk, s, len);
}

//  Start a header by hand in a fresh writer: a map of the common fields
//  (version, type, id) and nfields more, which the caller packs next,
//  right or wrong as the test wants them.
static void
s_hand_header (ps_writer_t *writer, const char *type, uint64_t id, size_t nfields)
{
    ps_writer_init (writer);
    msgpack_pack_map (&writer->pk, (uint32_t) (3 + nfields));
    s_pack_str (&writer->pk, "version");
    msgpack_pack_uint32 (&writer->pk, PS_PROTO_VERSION);
    s_pack_str (&writer->pk, "type");
    s_pack_str (&writer->pk, type);
    s_pack_str (&writer->pk, "id");
    msgpack_pack_uint64 (&writer->pk, id);
}

static void
s_pack_uints (msgpack_packer *pk, const uint64_t *values, size_t count)
{
    msgpack_pack_array (pk, count);
    for (size_t i = 0; i < count; i++)
        msgpack_pack_uint64 (pk, values [i]);
}

//  One entry of a push's "tensors": {var, part, shape, bytes}.
static void
s_pack_tensor (msgpack_packer *pk, const char *var, uint64_t part, const uint64_t *dims,
               size_t rank, uint64_t bytes)
{
    msgpack_pack_map (pk, 4);
    s_pack_str (pk, "var");
    s_pack_str (pk, var);
    s_pack_str (pk, "part");
    msgpack_pack_uint64 (pk, part);
    s_pack_str (pk, "shape");
    s_pack_uints (pk, dims, rank);
    s_pack_str (pk, "bytes");
    msgpack_pack_uint64 (pk, bytes);
}

//  The m/w/0 gradient description, right in every way.
static void
s_pack_good_tensor (msgpack_packer *pk)
{
    s_pack_tensor (pk, "m/w", 0, (uint64_t []) { S_ROWS, S_COLS }, 2, S_BYTES);
}

//  Start a push (or push_pull) header for step S_STEP with ntensors
//  descriptions, which the caller packs next.
static void
s_begin_push (ps_writer_t *writer, const char *type, uint64_t id, size_t ntensors)
{
    s_hand_header (writer, type, id, 3);
    s_pack_str (&writer->pk, "step");
    msgpack_pack_uint64 (&writer->pk, S_STEP);
    s_pack_str (&writer->pk, "worker");
    msgpack_pack_uint32 (&writer->pk, 0);
    s_pack_str (&writer->pk, "tensors");
    msgpack_pack_array (&writer->pk, ntensors);
}

//  ---------------------------------------------------------------------
//  Receiving

//  True when a message is ready on socket within timeout_ms.
static bool
s_wait (void *socket, int timeout_ms)
{
    zmq_pollitem_t item = { socket, 0, ZMQ_POLLIN, 0 };
    int rc = zmq_poll (&item, 1, timeout_ms);
    if (rc < 0)
        fail_msg ("zmq_poll: %s", zmq_strerror (zmq_errno ()));
    return rc > 0;
}

//  Receive and decode one reply into s_reply, or fail after S_TIMEOUT_MS.
static const ps_proto_t *
s_recv (void *socket)
{
    const ps_proto_t *reply = harness_recv (socket, s_reply, false, S_TIMEOUT_MS);
    if (!reply)
        fail_msg ("no reply within %d ms", S_TIMEOUT_MS);
    return reply;
}

//  A ping from socket gets ping_ok with its id; returns the partition count.
static uint64_t
s_ping (void *socket)
{
    uint64_t id = s_next_id++;
    ps_writer_t writer;
    s_typed (&writer, &(ps_proto_t) { .type = PS_PROTO_PING, .id = id });
    s_send_message (socket, &writer, 0, NULL, NULL);
    const ps_proto_t *reply = s_recv (socket);
    if (reply->type != PS_PROTO_PING_OK)
        fail_msg ("ping %llu got %s", (unsigned long long) id, ps_msg_type (s_reply));
    assert_int_equal (reply->id, id);
    return reply->ping_ok.partitions;
}

//  The reply on socket is an error with the given code and id whose message
//  mentions every one of words; then the same socket is still served.
static void
s_expect_error (void *socket, uint64_t id, const char *code, const char *const *words)
{
    const ps_proto_t *reply = s_recv (socket);
    if (reply->type != PS_PROTO_ERROR)
        fail_msg ("expected an error reply (%s), got %s", code, ps_msg_type (s_reply));
    const char *got = reply->error.code, *message = reply->error.message;
    print_message ("    refused %llu: %s: %s\n", (unsigned long long) id, got, message);
    if (strcmp (got, code) != 0)
        fail_msg ("expected code %s, got %s: %s", code, got, message);
    for (size_t i = 0; words && words [i]; i++)
        if (!strstr (message, words [i]))
            fail_msg ("error message \"%s\" does not mention \"%s\"", message, words [i]);
    if (reply->id != id)
        fail_msg ("error reply carries id %llu, the request had %llu",
                  (unsigned long long) reply->id, (unsigned long long) id);
    s_refused++;
    s_ping (socket);
}

//  Shorthand for the common case: s_dealer, expecting code and words.
#define S_REFUSED(id, code, ...) \
    s_expect_error (s_dealer, (id), (code), (const char *[]) { __VA_ARGS__, NULL })

//  ---------------------------------------------------------------------
//  Tests

//  The partition every later test tries to damage: m/w part 0, [4,3] of
//  zeros, made with a hand-built create.
static void
test_create_partition (void **state)
{
    (void) state;
    uint64_t id = s_next_id++;
    ps_writer_t writer;
    ps_proto_partition_t part = {
        .var = "m/w", .part = 0, .shape = { 2, (uint64_t []) { S_ROWS, S_COLS } },
        .rows = { 2, (uint64_t []) { 0, S_ROWS } }, .init = { .kind = "zeros" } };
    s_typed (&writer, &(ps_proto_t) { .type = PS_PROTO_CREATE, .id = id,
                                      .create.partitions = { 1, &part } });
    s_send_message (s_chief, &writer, 0, NULL, NULL);
    const ps_proto_t *reply = s_recv (s_chief);
    assert_int_equal (reply->type, PS_PROTO_CREATE_OK);
    assert_int_equal (reply->id, id);
    assert_int_equal (reply->create_ok.created, 1);
    assert_int_equal (reply->create_ok.existing, 0);
    assert_int_equal (s_ping (s_dealer), 1);
}

//  Header frames that cannot be read at all: the reply carries id 0.
static void
test_undecodable_headers (void **state)
{
    (void) state;
    //  0xc1 is the one byte msgpack never uses.
    static const char garbage [] = "\xc1\x07garbage\xff\x00\x13 header";
    s_send_raw (s_dealer, garbage, sizeof garbage - 1);
    S_REFUSED (0, "bad_message", "msgpack");

    //  Text: its first byte is a complete msgpack integer, the rest is trailing junk.
    static const char text [] = "this is not msgpack";
    s_send_raw (s_dealer, text, sizeof text - 1);
    S_REFUSED (0, "bad_message", "msgpack");

    //  A map that promises three entries and holds one.
    ps_writer_t writer;
    ps_writer_init (&writer);
    msgpack_pack_map (&writer.pk, 3);
    s_pack_str (&writer.pk, "version");
    msgpack_pack_uint32 (&writer.pk, 1);
    s_send_message (s_dealer, &writer, 0, NULL, NULL);
    S_REFUSED (0, "bad_message", "more elements than it holds");

    //  Five bytes declaring an array of 2^32-1 elements, and a map of as
    //  many entries: refused before the unpacker would allocate for them.
    s_send_raw (s_dealer, "\xdd\xff\xff\xff\xff", 5);
    S_REFUSED (0, "bad_message", "more elements than it holds");
    s_send_raw (s_dealer, "\xdf\xff\xff\xff\xff", 5);
    S_REFUSED (0, "bad_message", "more elements than it holds");

    //  Valid msgpack, but an array, not a map.
    ps_writer_init (&writer);
    msgpack_pack_array (&writer.pk, 3);
    msgpack_pack_uint32 (&writer.pk, 1);
    s_pack_str (&writer.pk, "ping");
    msgpack_pack_uint64 (&writer.pk, s_next_id++);
    s_send_message (s_dealer, &writer, 0, NULL, NULL);
    S_REFUSED (0, "bad_message", "map", "array");

    //  A bare string.
    ps_writer_init (&writer);
    s_pack_str (&writer.pk, "ping");
    s_send_message (s_dealer, &writer, 0, NULL, NULL);
    S_REFUSED (0, "bad_message", "map", "str");

    //  An empty message body: one empty frame.
    s_send_raw (s_dealer, "", 0);
    S_REFUSED (0, "bad_message", "header");

    //  A header frame above the 1 MiB header limit.
    size_t big = PS_MSG_MAX_HEADER + 1;
    char *huge = calloc (1, big);
    assert_non_null (huge);
    s_send_raw (s_dealer, huge, big);
    free (huge);
    S_REFUSED (0, "bad_message", "limit");

    //  More frames than a message may have: a ping followed by 4200 empty frames.
    size_t nframes = PS_MSG_MAX_FRAMES + 105;
    const void **frames = calloc (nframes, sizeof *frames);
    size_t *sizes = calloc (nframes, sizeof *sizes);
    assert_true (frames && sizes);
    s_typed (&writer, &(ps_proto_t) { .type = PS_PROTO_PING, .id = s_next_id++ });
    frames [0] = writer.sbuf.data;
    sizes [0] = writer.sbuf.size;
    for (size_t i = 1; i < nframes; i++)
        frames [i] = "";
    s_send_frames (s_dealer, nframes, frames, sizes);
    ps_writer_fini (&writer);
    free (frames);
    free (sizes);
    S_REFUSED (0, "bad_message", "frames", "limit");
}

//  Headers that decode but break the protocol: version, type, fields.
static void
test_header_errors (void **state)
{
    (void) state;
    ps_writer_t writer;
    size_t one [] = { S_BYTES };

    //  Protocol version 2, otherwise a good ping.
    uint64_t id = s_next_id++;
    ps_writer_init (&writer);
    msgpack_pack_map (&writer.pk, 3);
    s_pack_str (&writer.pk, "version");
    msgpack_pack_uint32 (&writer.pk, 2);
    s_pack_str (&writer.pk, "type");
    s_pack_str (&writer.pk, "ping");
    s_pack_str (&writer.pk, "id");
    msgpack_pack_uint64 (&writer.pk, id);
    s_send_message (s_dealer, &writer, 0, NULL, NULL);
    S_REFUSED (id, "bad_version", "version 2");

    //  No version at all.
    id = s_next_id++;
    ps_writer_init (&writer);
    msgpack_pack_map (&writer.pk, 2);
    s_pack_str (&writer.pk, "type");
    s_pack_str (&writer.pk, "ping");
    s_pack_str (&writer.pk, "id");
    msgpack_pack_uint64 (&writer.pk, id);
    s_send_message (s_dealer, &writer, 0, NULL, NULL);
    S_REFUSED (id, "bad_message", "version");

    //  An unknown message type.
    id = s_next_id++;
    s_hand_header (&writer, "frobnicate", id, 0);
    s_send_message (s_dealer, &writer, 0, NULL, NULL);
    S_REFUSED (id, "bad_message", "frobnicate");

    //  A push without its step.
    id = s_next_id++;
    s_hand_header (&writer, "push", id, 2);
    s_pack_str (&writer.pk, "worker");
    msgpack_pack_uint32 (&writer.pk, 0);
    s_pack_str (&writer.pk, "tensors");
    msgpack_pack_array (&writer.pk, 1);
    s_pack_good_tensor (&writer.pk);
    s_send_message (s_dealer, &writer, 1, one, NULL);
    S_REFUSED (id, "bad_message", "'step'", "missing");

    //  A push whose step is a string.
    id = s_next_id++;
    s_hand_header (&writer, "push", id, 3);
    s_pack_str (&writer.pk, "step");
    s_pack_str (&writer.pk, "seven");
    s_pack_str (&writer.pk, "worker");
    msgpack_pack_uint32 (&writer.pk, 0);
    s_pack_str (&writer.pk, "tensors");
    msgpack_pack_array (&writer.pk, 1);
    s_pack_good_tensor (&writer.pk);
    s_send_message (s_dealer, &writer, 1, one, NULL);
    S_REFUSED (id, "bad_message", "step", "expected uint", "str");

    //  A negative worker.
    id = s_next_id++;
    s_hand_header (&writer, "push", id, 3);
    s_pack_str (&writer.pk, "step");
    msgpack_pack_uint64 (&writer.pk, S_STEP);
    s_pack_str (&writer.pk, "worker");
    msgpack_pack_int32 (&writer.pk, -1);
    s_pack_str (&writer.pk, "tensors");
    msgpack_pack_array (&writer.pk, 1);
    s_pack_good_tensor (&writer.pk);
    s_send_message (s_dealer, &writer, 1, one, NULL);
    S_REFUSED (id, "bad_message", "worker", "expected uint");

    //  A wrongly typed field deep inside: a shape dimension as a string.
    id = s_next_id++;
    s_begin_push (&writer, "push", id, 1);
    msgpack_pack_map (&writer.pk, 4);
    s_pack_str (&writer.pk, "var");
    s_pack_str (&writer.pk, "m/w");
    s_pack_str (&writer.pk, "part");
    msgpack_pack_uint32 (&writer.pk, 0);
    s_pack_str (&writer.pk, "shape");
    msgpack_pack_array (&writer.pk, 2);
    s_pack_str (&writer.pk, "4");
    msgpack_pack_uint32 (&writer.pk, S_COLS);
    s_pack_str (&writer.pk, "bytes");
    msgpack_pack_uint32 (&writer.pk, S_BYTES);
    s_send_message (s_dealer, &writer, 1, one, NULL);
    S_REFUSED (id, "bad_message", "tensors[0].shape[0]", "expected uint");

    //  The id itself is a string: it cannot be echoed, so 0 comes back.
    ps_writer_init (&writer);
    msgpack_pack_map (&writer.pk, 3);
    s_pack_str (&writer.pk, "version");
    msgpack_pack_uint32 (&writer.pk, 1);
    s_pack_str (&writer.pk, "type");
    s_pack_str (&writer.pk, "ping");
    s_pack_str (&writer.pk, "id");
    s_pack_str (&writer.pk, "one");
    s_send_message (s_dealer, &writer, 0, NULL, NULL);
    S_REFUSED (0, "bad_message", "id", "expected uint");

    //  A key the schema does not know.
    id = s_next_id++;
    s_hand_header (&writer, "ping", id, 1);
    s_pack_str (&writer.pk, "colour");
    s_pack_str (&writer.pk, "blue");
    s_send_message (s_dealer, &writer, 0, NULL, NULL);
    S_REFUSED (id, "bad_message", "unknown field 'colour'");

    //  The same key twice.
    id = s_next_id++;
    s_hand_header (&writer, "ping", id, 1);
    s_pack_str (&writer.pk, "type");
    s_pack_str (&writer.pk, "ping");
    s_send_message (s_dealer, &writer, 0, NULL, NULL);
    S_REFUSED (id, "bad_message", "'type'", "twice");

    //  A key that is not a string.
    id = s_next_id++;
    s_hand_header (&writer, "ping", id, 1);
    msgpack_pack_uint32 (&writer.pk, 5);
    s_pack_str (&writer.pk, "five");
    s_send_message (s_dealer, &writer, 0, NULL, NULL);
    S_REFUSED (id, "bad_message", "key", "expected str");

    //  Reply types sent as requests, with all of their fields, by the one
    //  key that may send anything but data.
    id = s_next_id++;
    s_typed (&writer, &(ps_proto_t) { .type = PS_PROTO_PING_OK, .id = id,
                                      .ping_ok = { "impostor", 0 } });
    s_send_message (s_chief, &writer, 0, NULL, NULL);
    s_expect_error (s_chief, id, "bad_message", (const char *[]) { "reply", NULL });

    id = s_next_id++;
    s_typed (&writer, &(ps_proto_t) { .type = PS_PROTO_ERROR, .id = id,
                                      .error = { "io", "disk on fire" } });
    s_send_message (s_chief, &writer, 0, NULL, NULL);
    s_expect_error (s_chief, id, "bad_message", (const char *[]) { "reply", NULL });

    //  A frame after a message type that carries none.
    id = s_next_id++;
    s_typed (&writer, &(ps_proto_t) { .type = PS_PROTO_PING, .id = id });
    s_send_message (s_dealer, &writer, 1, one, NULL);
    S_REFUSED (id, "bad_message", "frames");
}

//  Well-formed headers whose frames or partitions do not fit.
static void
test_frame_errors (void **state)
{
    (void) state;
    ps_writer_t writer;

    //  "tensors" describes two frames, one follows: a truncated message.
    uint64_t id = s_next_id++;
    s_begin_push (&writer, "push", id, 2);
    s_pack_good_tensor (&writer.pk);
    s_pack_good_tensor (&writer.pk);
    s_send_message (s_dealer, &writer, 1, (size_t []) { S_BYTES }, NULL);
    S_REFUSED (id, "bad_message", "describes 2", "got 1");

    //  One described, two follow.
    id = s_next_id++;
    s_begin_push (&writer, "push", id, 1);
    s_pack_good_tensor (&writer.pk);
    s_send_message (s_dealer, &writer, 2, (size_t []) { S_BYTES, S_BYTES }, NULL);
    S_REFUSED (id, "bad_message", "describes 1", "got 2");

    //  The frame is 8 bytes shorter than the header says.
    id = s_next_id++;
    s_begin_push (&writer, "push", id, 1);
    s_pack_good_tensor (&writer.pk);
    s_send_message (s_dealer, &writer, 1, (size_t []) { S_BYTES - 8 }, NULL);
    S_REFUSED (id, "bad_shape", "40 bytes", "48");

    //  Frame and 'bytes' agree with each other but not with the shape.
    id = s_next_id++;
    s_begin_push (&writer, "push", id, 1);
    s_pack_tensor (&writer.pk, "m/w", 0, (uint64_t []) { S_ROWS, S_COLS }, 2, S_BYTES - 8);
    s_send_message (s_dealer, &writer, 1, (size_t []) { S_BYTES - 8 }, NULL);
    S_REFUSED (id, "bad_shape", "needs 48 bytes");

    //  A zero dimension.
    id = s_next_id++;
    s_begin_push (&writer, "push", id, 1);
    s_pack_tensor (&writer.pk, "m/w", 0, (uint64_t []) { 0, S_COLS }, 2, 0);
    s_send_message (s_dealer, &writer, 1, (size_t []) { 0 }, NULL);
    S_REFUSED (id, "bad_shape", "dimension 0");

    //  The right byte count in the wrong shape for the partition.
    id = s_next_id++;
    s_begin_push (&writer, "push", id, 1);
    s_pack_tensor (&writer.pk, "m/w", 0, (uint64_t []) { S_COLS, S_ROWS }, 2, S_BYTES);
    s_send_message (s_dealer, &writer, 1, (size_t []) { S_BYTES }, NULL);
    S_REFUSED (id, "bad_shape", "m/w", "[3,4]", "[4,3]");

    //  The same, flattened, through push_pull.
    id = s_next_id++;
    s_begin_push (&writer, "push_pull", id, 1);
    s_pack_tensor (&writer.pk, "m/w", 0, (uint64_t []) { S_ROWS * S_COLS }, 1, S_BYTES);
    s_send_message (s_dealer, &writer, 1, (size_t []) { S_BYTES }, NULL);
    S_REFUSED (id, "bad_shape", "m/w", "[12]", "[4,3]");

    //  A good gradient for m/w next to one for a partition that does not
    //  exist: the request is refused whole, m/w included.
    id = s_next_id++;
    s_begin_push (&writer, "push", id, 2);
    s_pack_good_tensor (&writer.pk);
    s_pack_tensor (&writer.pk, "m/other", 0, (uint64_t []) { 2 }, 1, 8);
    s_send_message (s_dealer, &writer, 2, (size_t []) { S_BYTES, 8 }, NULL);
    S_REFUSED (id, "not_found", "m/other");

    //  Two gradients for the same partition in one push.
    id = s_next_id++;
    s_begin_push (&writer, "push", id, 2);
    s_pack_good_tensor (&writer.pk);
    s_pack_good_tensor (&writer.pk);
    s_send_message (s_dealer, &writer, 2, (size_t []) { S_BYTES, S_BYTES }, NULL);
    S_REFUSED (id, "bad_message", "m/w", "twice");

    //  Pulls of partitions that do not exist: another name, another part.
    const struct { const char *var; uint32_t part; const char *named; } missing [] = {
        { "m/none", 0, "m/none/0" }, { "m/w", 1, "m/w/1" },
    };
    for (size_t i = 0; i < 2; i++) {
        id = s_next_id++;
        ps_proto_partref_t part = { missing [i].var, missing [i].part };
        s_typed (&writer, &(ps_proto_t) { .type = PS_PROTO_PULL, .id = id,
                                          .pull.parts = { 1, &part } });
        s_send_message (s_dealer, &writer, 0, NULL, NULL);
        S_REFUSED (id, "not_found", missing [i].named);
    }
}

//  A sync-mode push names its round and the round's step count together:
//  one without the other, a round 0 and a round of no steps are refused,
//  naming the field (the last two by the decoder, naming the bound), and
//  nothing is added.
static void
test_round_fields (void **state)
{
    (void) state;
    const struct {
        bool round, steps;
        uint64_t round_value, steps_value;
        const char *named, *why;
    } cases [] = {
        { true, false, 1, 0, "'round_steps' is missing", "both" },
        { false, true, 0, 2, "'round' is missing", "both" },
        { true, true, 0, 2, "round: 0 is out of bounds", "at least 1" },
        { true, true, 1, 0, "round_steps: 0 is out of bounds", "expected 1 to 4294967295" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        uint64_t id = s_next_id++;
        ps_writer_t writer;
        s_hand_header (&writer, "push", id, 3 + cases [i].round + cases [i].steps);
        s_pack_str (&writer.pk, "step");
        msgpack_pack_uint64 (&writer.pk, S_STEP);
        s_pack_str (&writer.pk, "worker");
        msgpack_pack_uint32 (&writer.pk, 0);
        if (cases [i].round) {
            s_pack_str (&writer.pk, "round");
            msgpack_pack_uint64 (&writer.pk, cases [i].round_value);
        }
        if (cases [i].steps) {
            s_pack_str (&writer.pk, "round_steps");
            msgpack_pack_uint64 (&writer.pk, cases [i].steps_value);
        }
        s_pack_str (&writer.pk, "tensors");
        msgpack_pack_array (&writer.pk, 1);
        s_pack_good_tensor (&writer.pk);
        s_send_message (s_dealer, &writer, 1, (size_t []) { S_BYTES }, NULL);
        S_REFUSED (id, "invalid", cases [i].named, cases [i].why);
    }
}

//  A REQ peer adds an empty delimiter; the server echoes it, on ping_ok and
//  on an error reply alike, or the REQ socket would drop the reply.
static void
test_req_envelope (void **state)
{
    (void) state;
    void *req = s_socket (ZMQ_REQ, s_server.endpoint, "ps:0");
    assert_int_equal (s_ping (req), 1);
    static const char garbage [] = "\xc1\xc1\xc1";
    s_send_raw (req, garbage, sizeof garbage - 1);
    s_expect_error (req, 0, "bad_message", (const char *[]) { "msgpack", NULL });
    zmq_close (req);
}

//  Write count pseudo-random bytes (a fixed xorshift sequence, after
//  prefix) to a plain TCP connection to the server's port, then close it.
static void
s_tcp_garbage (const char *endpoint, const void *prefix, size_t prefix_size, size_t count,
               uint32_t seed)
{
    const char *colon = strrchr (endpoint, ':');
    assert_non_null (colon);
    int port = atoi (colon + 1);
    assert_true (port > 0 && port < 65536);
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    assert_true (fd >= 0);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port) };
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    assert_int_equal (connect (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    unsigned char *bytes = malloc (count);
    assert_non_null (bytes);
    uint32_t x = seed;
    for (size_t i = 0; i < count; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        bytes [i] = (unsigned char) x;
    }
    memcpy (bytes, prefix, prefix_size);
    //  The server may hang up part way; that is its right, not a failure.
    for (size_t sent = 0; sent < count; ) {
        ssize_t rc = send (fd, bytes + sent, count - sent, MSG_NOSIGNAL);
        if (rc <= 0)
            break;
        sent += (size_t) rc;
    }
    free (bytes);
    close (fd);
}

//  Bytes that are not ZeroMQ at all, straight to the TCP port.
static void
test_raw_tcp_garbage (void **state)
{
    (void) state;
    //  Random bytes from the first byte on.
    s_tcp_garbage (s_server.endpoint, "", 0, 4096, 2463534242u);
    usleep (100 * 1000);
    assert_true (harness_server_alive (&s_server));
    s_ping (s_dealer);
    //  A valid ZMTP 3 signature, then random bytes where the rest of the
    //  greeting and the handshake should be.
    static const unsigned char signature [] = { 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0 };
    s_tcp_garbage (s_server.endpoint, signature, sizeof signature, 4096, 88172645u);
    usleep (100 * 1000);
    assert_true (harness_server_alive (&s_server));
    s_ping (s_dealer);
    //  A fresh peer connects and is served too.
    void *fresh = s_socket (ZMQ_DEALER, s_server.endpoint, "ps:0");
    assert_int_equal (s_ping (fresh), 1);
    zmq_close (fresh);
}

//  The server counted every refusal, and none of them touched m/w.
static void
test_stats_count_refusals (void **state)
{
    (void) state;
    assert_true (s_refused > 0);
    uint64_t id = s_next_id++;
    ps_writer_t writer;
    s_typed (&writer, &(ps_proto_t) { .type = PS_PROTO_STATS, .id = id });
    s_send_message (s_dealer, &writer, 0, NULL, NULL);
    const ps_proto_t *reply = s_recv (s_dealer);
    assert_int_equal (reply->type, PS_PROTO_STATS_OK);
    assert_int_equal (reply->id, id);
    uint64_t errors = reply->stats_ok.errors;
    uint64_t requests = reply->stats_ok.requests;
    print_message ("    stats: %llu requests, %llu errors; %u refusals seen\n",
                   (unsigned long long) requests, (unsigned long long) errors, s_refused);
    assert_true (errors >= s_refused);
    assert_true (requests >= errors);
    assert_int_equal (reply->stats_ok.partitions.count, 1);
    const ps_proto_part_stats_t *part = &reply->stats_ok.partitions.items [0];
    assert_string_equal (part->var, "m/w");
    assert_int_equal (part->updates, 0);
    assert_int_equal (part->duplicates, 0);
}

//  Through the client library: m/w still holds zeros, and step S_STEP,
//  which every refused push carried, is new to its ledger.
static void
test_nothing_applied (void **state)
{
    (void) state;
    ps_error_t err;
    const char *endpoints [] = { s_server.endpoint };
    ps_client_t *client = ps_client_new (endpoints, 1, S_TIMEOUT_MS, harness_curve ("worker:0"),
                                         &err);
    if (!client)
        fail_msg ("client: %s", err.msg);
    ps_shape_t shape;
    ps_shape_set (&shape, (int64_t []) { S_ROWS, S_COLS }, 2, NULL);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_ZEROS);
    assert_int_equal (ps_client_add_variable (client, "m/w", &shape, &init, 1,
                                              (int64_t []) { 0, S_ROWS }, (int []) { 0 }, &err), 0);
    float values [S_ROWS * S_COLS];
    float *outs [] = { values };
    memset (values, 0xff, sizeof values);
    if (ps_client_pull (client, outs, &err))
        fail_msg ("pull: %s", err.msg);
    for (int i = 0; i < S_ROWS * S_COLS; i++)
        assert_true (values [i] == 0.0f);
    ps_push_info_t info;
    const float *grads [] = { s_ones };
    if (ps_client_push (client, S_STEP, 0, grads, &info, &err))
        fail_msg ("push: %s", err.msg);
    assert_int_equal (info.applied, 1);
    assert_int_equal (info.duplicates, 0);
    if (ps_client_pull (client, outs, &err))
        fail_msg ("pull: %s", err.msg);
    for (int i = 0; i < S_ROWS * S_COLS; i++)
        assert_true (values [i] < 0.0f && values [i] == values [0]);
    ps_client_destroy (&client);
}

//  A frame above --max-message: ZeroMQ drops that peer's connection, so no
//  reply comes; other peers, and frames under the limit, are served.
static void
test_size_limit (void **state)
{
    (void) state;
    if (harness_server_start (&s_limited, 1, (const char *[]) { "--max-message", "1", NULL }))
        fail_msg ("cannot start a server with --max-message 1");
    void *big_sender = s_socket (ZMQ_DEALER, s_limited.endpoint, "ps:1");
    s_ping (big_sender);

    size_t floats = 512 * 1024;         //  2 MiB
    float *grad = calloc (floats, sizeof (float));
    assert_non_null (grad);
    ps_writer_t writer;
    s_begin_push (&writer, "push", s_next_id++, 1);
    s_pack_tensor (&writer.pk, "big/w", 0, (uint64_t []) { floats }, 1, floats * 4);
    s_send_message (big_sender, &writer, 1, (size_t []) { floats * 4 }, grad);
    assert_false (s_wait (big_sender, S_SILENCE_MS));

    void *other = s_socket (ZMQ_DEALER, s_limited.endpoint, "ps:1");
    assert_int_equal (s_ping (other), 0);
    assert_true (harness_server_alive (&s_limited));

    //  Half a MiB is under the limit: it reaches the server, which has no
    //  such partition.
    uint64_t id = s_next_id++;
    s_begin_push (&writer, "push", id, 1);
    s_pack_tensor (&writer.pk, "big/w", 0, (uint64_t []) { floats / 4 }, 1, floats);
    s_send_message (other, &writer, 1, (size_t []) { floats }, grad);
    s_expect_error (other, id, "not_found", (const char *[]) { "big/w", NULL });
    free (grad);

    zmq_close (big_sender);
    zmq_close (other);
    assert_true (harness_server_alive (&s_limited));
    assert_int_equal (harness_server_stop (&s_limited, SIGTERM), 0);
}

//  After all of it, SIGTERM still ends the server with status 0.
static void
test_clean_exit (void **state)
{
    (void) state;
    assert_true (harness_server_alive (&s_server));
    assert_int_equal (harness_server_stop (&s_server, SIGTERM), 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_create_partition),
        cmocka_unit_test (test_undecodable_headers),
        cmocka_unit_test (test_header_errors),
        cmocka_unit_test (test_frame_errors),
        cmocka_unit_test (test_round_fields),
        cmocka_unit_test (test_req_envelope),
        cmocka_unit_test (test_raw_tcp_garbage),
        cmocka_unit_test (test_stats_count_refusals),
        cmocka_unit_test (test_nothing_applied),
        cmocka_unit_test (test_size_limit),
        cmocka_unit_test (test_clean_exit),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
