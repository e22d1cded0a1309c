//  Hand-made ring messages for the ring tests (tests/test_ring_*.c): the
//  wire header as worker/ps_ring_transport.h documents it, written and
//  read independently of the ring's own code, and an injector, a raw
//  ZeroMQ PUSH that sends such messages to a member with the key of a
//  chosen task (so that they reach the member's checks for stale and
//  malformed messages), with the set of malformed messages every member
//  must drop.

#ifndef HARNESS_RING_WIRE_H_INCLUDED
#define HARNESS_RING_WIRE_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

//  The wire header, as ps_ring_transport.h documents it.
typedef struct {
    uint32_t magic;
    uint16_t version, kind;
    uint32_t round, root;
    uint64_t ring, seq, index, offset, length, total;
} harness_wire_t;

#define HARNESS_WIRE_SIZE         64
#define HARNESS_WIRE_MAGIC        0x47525350u
#define HARNESS_WIRE_RS           1
#define HARNESS_WIRE_AG           2

typedef struct {
    void *ctx;
    void *push;
} harness_injector_t;

//  Write w into the HARNESS_WIRE_SIZE bytes at p, and read it back.
void harness_wire_encode (const harness_wire_t *w, unsigned char *p);
void harness_wire_decode (const unsigned char *p, harness_wire_t *w);

//  A well-formed header of ring `ring`, collective seq: the reduce-scatter
//  round 0 slice [offset, offset + length) of a vector of total bytes.
harness_wire_t harness_wire (uint64_t ring, uint64_t seq, uint64_t offset, uint64_t length,
                             uint64_t total);

//  Connect an injector to the member of task member at endpoint, sending
//  with the key of task sender.
void harness_inject_open (harness_injector_t *injector, const char *endpoint,
                          const char *sender, const char *member);

//  Send frames [0, count) as one message.
void harness_inject_frames (harness_injector_t *injector, const void *const *frames,
                            const size_t *sizes, int count);

//  Send a header and a payload.
void harness_inject (harness_injector_t *injector, const harness_wire_t *wire,
                     const void *payload, size_t size);

//  Close the injector once everything it sent went out.
void harness_inject_close (harness_injector_t *injector);

//  Stale messages of ring `ring`, collectives [0, seqs), from sender to
//  member: payloads of huge values that would show in any sum they got
//  into.
void harness_inject_stale (const char *endpoint, uint64_t ring, uint64_t seqs,
                           const char *sender, const char *member);

//  Send the malformed messages every member must drop; returns how many.
int harness_inject_malformed (harness_injector_t *injector, uint64_t ring, uint64_t seq);

#endif
