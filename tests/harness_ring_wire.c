//  Hand-made ring messages; see harness_ring_wire.h.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>

#include <zmq.h>

#include "harness.h"
#include "harness_ring_wire.h"
#include "ps_curve.h"


void
harness_wire_encode (const harness_wire_t *w, unsigned char *p)
{
    const uint64_t fields [] = { w->ring, w->seq, w->index, w->offset, w->length, w->total };
    for (int i = 0; i < 4; i++) {
        p [i] = (unsigned char) (w->magic >> (8 * i));
        p [8 + i] = (unsigned char) (w->round >> (8 * i));
        p [12 + i] = (unsigned char) (w->root >> (8 * i));
    }
    p [4] = (unsigned char) w->version;
    p [5] = (unsigned char) (w->version >> 8);
    p [6] = (unsigned char) w->kind;
    p [7] = (unsigned char) (w->kind >> 8);
    for (int f = 0; f < 6; f++)
        for (int i = 0; i < 8; i++)
            p [16 + 8 * f + i] = (unsigned char) (fields [f] >> (8 * i));
}

void
harness_wire_decode (const unsigned char *p, harness_wire_t *w)
{
    uint64_t fields [6] = { 0 };
    w->magic = w->round = w->root = 0;
    for (int i = 0; i < 4; i++) {
        w->magic |= (uint32_t) p [i] << (8 * i);
        w->round |= (uint32_t) p [8 + i] << (8 * i);
        w->root |= (uint32_t) p [12 + i] << (8 * i);
    }
    w->version = (uint16_t) (p [4] | p [5] << 8);
    w->kind = (uint16_t) (p [6] | p [7] << 8);
    for (int f = 0; f < 6; f++)
        for (int i = 0; i < 8; i++)
            fields [f] |= (uint64_t) p [16 + 8 * f + i] << (8 * i);
    w->ring = fields [0];
    w->seq = fields [1];
    w->index = fields [2];
    w->offset = fields [3];
    w->length = fields [4];
    w->total = fields [5];
}

//  A well-formed header of ring `ring`, collective seq: the reduce-scatter
//  round 0 slice [offset, offset + length) of a vector of total bytes.
harness_wire_t
harness_wire (uint64_t ring, uint64_t seq, uint64_t offset, uint64_t length, uint64_t total)
{
    return (harness_wire_t) { .magic = HARNESS_WIRE_MAGIC, .version = 1, .kind = HARNESS_WIRE_RS,
                              .ring = ring,
                        .seq = seq, .offset = offset, .length = length, .total = total };
}


//  Connect an injector to the member of task member at endpoint, sending
//  with the key of task sender.
void
harness_inject_open (harness_injector_t *injector, const char *endpoint, const char *sender,
                     const char *member)
{
    injector->ctx = zmq_ctx_new ();
    assert_non_null (injector->ctx);
    injector->push = zmq_socket (injector->ctx, ZMQ_PUSH);
    assert_non_null (injector->push);
    //  Close waits (up to the linger) until everything went out, so what
    //  was injected is queued at the member before the test goes on.
    int linger = 5000;
    assert_int_equal (zmq_setsockopt (injector->push, ZMQ_LINGER, &linger, sizeof linger), 0);
    ps_error_t err;
    if (ps_curve_client (harness_curve (sender), injector->push, member, &err))
        fail_msg ("injector as %s: %s", sender, err.msg);
    assert_int_equal (zmq_connect (injector->push, endpoint), 0);
}

//  Send frames [0, count) as one message.
void
harness_inject_frames (harness_injector_t *injector, const void *const *frames, const size_t *sizes,
                       int count)
{
    for (int i = 0; i < count; i++)
        if (zmq_send (injector->push, frames [i], sizes [i], i + 1 < count ? ZMQ_SNDMORE : 0) < 0)
            fail_msg ("injecting: %s", zmq_strerror (errno));
}

//  Send a header and a payload.
void
harness_inject (harness_injector_t *injector, const harness_wire_t *wire, const void *payload,
                size_t size)
{
    unsigned char header [HARNESS_WIRE_SIZE];
    harness_wire_encode (wire, header);
    const void *frames [] = { header, payload };
    size_t sizes [] = { sizeof header, size };
    harness_inject_frames (injector, frames, sizes, 2);
}

void
harness_inject_close (harness_injector_t *injector)
{
    assert_int_equal (zmq_close (injector->push), 0);
    assert_int_equal (zmq_ctx_term (injector->ctx), 0);
}

//  Stale messages of ring `ring`, collectives [0, seqs), from sender to
//  member: payloads of huge values that would show in any sum they got
//  into.
void
harness_inject_stale (const char *endpoint, uint64_t ring, uint64_t seqs, const char *sender,
                      const char *member)
{
    harness_injector_t injector;
    harness_inject_open (&injector, endpoint, sender, member);
    float poison [4] = { 1e30f, -1e30f, 1e30f, 3e30f };
    for (uint64_t seq = 0; seq < seqs; seq++) {
        harness_wire_t wire = harness_wire (ring, seq, 0, sizeof poison, sizeof poison);
        harness_inject (&injector, &wire, poison, sizeof poison);
    }
    harness_inject_close (&injector);
}

//  Send the malformed messages every member must drop; returns how many.
int
harness_inject_malformed (harness_injector_t *injector, uint64_t ring, uint64_t seq)
{
    unsigned char payload [64] = { 0 };
    unsigned char header [HARNESS_WIRE_SIZE];
    int sent = 0;

    //  A single frame, shorter than a header.
    const void *one [] = { payload };
    size_t short_size [] = { 10 };
    harness_inject_frames (injector, one, short_size, 1);
    sent++;

    //  A short header and a payload.
    const void *two [] = { payload, payload };
    size_t two_sizes [] = { 10, 16 };
    harness_inject_frames (injector, two, two_sizes, 2);
    sent++;

    //  A bad magic.
    harness_wire_t wire = harness_wire (ring, seq, 0, 16, 16);
    wire.magic = 0xDEADBEEF;
    harness_inject (injector, &wire, payload, 16);
    sent++;

    //  An oversize payload: 1 MiB where the header says 16 bytes.
    size_t big_size = 1024 * 1024;
    unsigned char *big = calloc (1, big_size);
    assert_non_null (big);
    wire = harness_wire (ring, seq, 0, 16, 16);
    harness_inject (injector, &wire, big, big_size);
    free (big);
    sent++;

    //  Three frames.
    wire = harness_wire (ring, seq, 0, 16, 16);
    harness_wire_encode (&wire, header);
    const void *three [] = { header, payload, payload };
    size_t three_sizes [] = { sizeof header, 16, 16 };
    harness_inject_frames (injector, three, three_sizes, 3);
    sent++;

    //  An unknown kind.
    wire = harness_wire (ring, seq, 0, 16, 16);
    wire.kind = 9;
    harness_inject (injector, &wire, payload, 16);
    sent++;

    //  A slice past the end of its own vector.
    wire = harness_wire (ring, seq, 8, 16, 16);
    harness_inject (injector, &wire, payload, 16);
    sent++;

    //  An empty payload.
    wire = harness_wire (ring, seq, 0, 0, 16);
    harness_inject (injector, &wire, payload, 0);
    sent++;
    return sent;
}

