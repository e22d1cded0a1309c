//  The message codec; see ps_msg.h.

#include "ps_msg.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct _ps_msg_t {
    zmq_msg_t envelope [PS_MSG_MAX_ENVELOPE];
    size_t nenvelope;
    zmq_msg_t *frames;          //  frames [0] is the header
    size_t *sizes;
    size_t nframes;
    size_t capacity;
    const float **tensors;      //  aligned view of each tensor frame
    msgpack_unpacked unpacked;
    bool decoded;
    ps_proto_t proto;           //  the decoded header, typed
    char *scratch;              //  aligned copies of misaligned frames
    size_t scratch_size;
};

ps_msg_t *
ps_msg_new (void)
{
    ps_msg_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    msgpack_unpacked_init (&self->unpacked);
    return self;
}

static void
s_clear (ps_msg_t *self)
{
    for (size_t i = 0; i < self->nenvelope; i++)
        zmq_msg_close (&self->envelope [i]);
    for (size_t i = 0; i < self->nframes; i++)
        zmq_msg_close (&self->frames [i]);
    self->nenvelope = 0;
    self->nframes = 0;
    self->decoded = false;
    self->proto.type = PS_PROTO_NONE;
    self->proto.id = 0;
}

void
ps_msg_destroy (ps_msg_t **self_p)
{
    assert (self_p);
    ps_msg_t *self = *self_p;
    if (self) {
        s_clear (self);
        msgpack_unpacked_destroy (&self->unpacked);
        free (self->frames);
        free (self->sizes);
        free (self->tensors);
        free (self->scratch);
        free (self);
        *self_p = NULL;
    }
}

//  Make room for one more frame; the arrays grow geometrically and are kept
//  across messages.
static zmq_msg_t *
s_next_frame (ps_msg_t *self)
{
    if (self->nframes == self->capacity) {
        size_t capacity = self->capacity ? self->capacity * 2 : 16;
        self->frames = realloc (self->frames, capacity * sizeof (zmq_msg_t));
        self->sizes = realloc (self->sizes, capacity * sizeof (size_t));
        self->tensors = realloc (self->tensors, capacity * sizeof (float *));
        if (!self->frames || !self->sizes || !self->tensors)
            abort ();
        self->capacity = capacity;
    }
    return &self->frames [self->nframes];
}

int
ps_msg_recv (ps_msg_t *self, void *socket, bool routed, ps_error_t *err)
{
    assert (self);
    s_clear (self);
    bool more = true;
    size_t received = 0;
    size_t dropped = 0;
    while (more) {
        zmq_msg_t part;
        if (zmq_msg_init (&part) != 0)
            return ps_error_set (err, PS_EIO, "zmq_msg_init: %s", zmq_strerror (errno));
        if (zmq_msg_recv (&part, socket, 0) < 0) {
            int saved = errno;
            zmq_msg_close (&part);
            errno = saved;
            return ps_error_set (err, PS_EIO, "zmq_msg_recv: %s", zmq_strerror (saved));
        }
        more = zmq_msg_more (&part);
        received++;
        //  The routing id always comes first on a ROUTER; a REQ peer then
        //  sends an empty delimiter, which belongs to the envelope too.
        bool envelope = routed && self->nframes == 0
                     && (received == 1 || (received == 2 && zmq_msg_size (&part) == 0 && more));
        if (envelope && self->nenvelope < PS_MSG_MAX_ENVELOPE) {
            self->envelope [self->nenvelope++] = part;
            continue;
        }
        if (self->nframes > PS_MSG_MAX_FRAMES) {
            //  Keep draining so the next receive starts at a message boundary.
            zmq_msg_close (&part);
            dropped++;
            continue;
        }
        *s_next_frame (self) = part;
        self->sizes [self->nframes] = zmq_msg_size (&part);
        self->nframes++;
    }
    if (dropped)
        return ps_error_set (err, PS_EPROTO, "message has %zu frames, the limit is %d",
                             self->nframes + dropped, PS_MSG_MAX_FRAMES + 1);
    if (self->nframes == 0)
        return ps_error_set (err, PS_EPROTO, "message has no header frame");
    return PS_OK;
}

int
ps_msg_set (ps_msg_t *self, const void *const *frames, const size_t *sizes, size_t nframes)
{
    assert (self);
    s_clear (self);
    for (size_t i = 0; i < nframes; i++) {
        zmq_msg_t *part = s_next_frame (self);
        if (zmq_msg_init_size (part, sizes [i]) != 0)
            return PS_EIO;
        if (sizes [i])
            memcpy (zmq_msg_data (part), frames [i], sizes [i]);
        self->sizes [i] = sizes [i];
        self->nframes++;
    }
    return self->nframes ? PS_OK : PS_EPROTO;
}

//  Give every tensor frame an address aligned for its widest element (the
//  uint64 ids of a sparse message). ZeroMQ hands out large frames in their
//  own malloc'd block (aligned), but small ones may sit at any offset
//  inside its shared receive buffer; those few get copied.
static void
s_align_tensors (ps_msg_t *self)
{
    size_t needed = 0;
    for (size_t i = 1; i < self->nframes; i++)
        if ((uintptr_t) zmq_msg_data (&self->frames [i]) % sizeof (uint64_t))
            needed += (self->sizes [i] + 63) & ~(size_t) 63;
    if (needed > self->scratch_size) {
        free (self->scratch);
        self->scratch = aligned_alloc (64, needed);
        if (!self->scratch)
            abort ();
        self->scratch_size = needed;
    }
    size_t used = 0;
    for (size_t i = 1; i < self->nframes; i++) {
        const char *data = zmq_msg_data (&self->frames [i]);
        if ((uintptr_t) data % sizeof (uint64_t)) {
            memcpy (self->scratch + used, data, self->sizes [i]);
            data = self->scratch + used;
            used += (self->sizes [i] + 63) & ~(size_t) 63;
        }
        self->tensors [i - 1] = (const float *) data;
    }
}

//  msgpack-c allocates an array's or map's element table as soon as it reads
//  the declared count, before any element: five bytes claiming 2^32
//  elements would ask for 64 GiB. Every element takes at least one byte,
//  so a header whose pending element count ever exceeds the bytes left is
//  refused before msgpack-c sees it. Lengths of strings, bins and exts are
//  bounded the same way. A truncated header passes here and is reported by
//  the unpacker.
static bool
s_counts_fit (const uint8_t *data, size_t size)
{
    size_t pos = 0;
    uint64_t pending = 1;
    while (pending > 0 && pos < size) {
        uint8_t b = data [pos++];
        pending--;
        uint64_t count = 0, skip = 0;
        size_t width = 0;
        if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
            continue;
        else
        if (b >= 0x80 && b <= 0x8f)
            count = 2 * (uint64_t) (b & 0x0f);
        else
        if (b >= 0x90 && b <= 0x9f)
            count = b & 0x0f;
        else
        if (b >= 0xa0 && b <= 0xbf)
            skip = b & 0x1f;
        else {
            //  Types with a big-endian length or count after the type byte.
            static const struct { uint8_t type; uint8_t width; uint8_t fixed; uint8_t kind; } table [] = {
                //  kind: 0 fixed payload, 1 length, 2 array count, 3 map count
                { 0xc4, 1, 0, 1 }, { 0xc5, 2, 0, 1 }, { 0xc6, 4, 0, 1 },
                { 0xc7, 1, 1, 1 }, { 0xc8, 2, 1, 1 }, { 0xc9, 4, 1, 1 },
                { 0xca, 0, 4, 0 }, { 0xcb, 0, 8, 0 },
                { 0xcc, 0, 1, 0 }, { 0xcd, 0, 2, 0 }, { 0xce, 0, 4, 0 }, { 0xcf, 0, 8, 0 },
                { 0xd0, 0, 1, 0 }, { 0xd1, 0, 2, 0 }, { 0xd2, 0, 4, 0 }, { 0xd3, 0, 8, 0 },
                { 0xd4, 0, 2, 0 }, { 0xd5, 0, 3, 0 }, { 0xd6, 0, 5, 0 }, { 0xd7, 0, 9, 0 },
                { 0xd8, 0, 17, 0 },
                { 0xd9, 1, 0, 1 }, { 0xda, 2, 0, 1 }, { 0xdb, 4, 0, 1 },
                { 0xdc, 2, 0, 2 }, { 0xdd, 4, 0, 2 }, { 0xde, 2, 0, 3 }, { 0xdf, 4, 0, 3 },
            };
            size_t i = 0;
            while (i < sizeof table / sizeof table [0] && table [i].type != b)
                i++;
            if (i == sizeof table / sizeof table [0])
                return true;    //  0xc1, never valid: the unpacker says so
            width = table [i].width;
            if (pos + width > size)
                return true;    //  truncated: the unpacker says so
            uint64_t value = 0;
            for (size_t k = 0; k < width; k++)
                value = value << 8 | data [pos + k];
            pos += width;
            skip = table [i].fixed;
            if (table [i].kind == 1)
                skip += value;
            else
            if (table [i].kind == 2)
                count = value;
            else
            if (table [i].kind == 3)
                count = 2 * value;
        }
        if (skip > size - pos)
            return skip <= size;    //  a truncated payload is the unpacker's to report
        pos += skip;
        pending += count;
        if (pending > size - pos)
            return false;
    }
    return true;
}

int
ps_msg_decode (ps_msg_t *self, ps_error_t *err)
{
    assert (self);
    assert (self->nframes > 0);
    self->decoded = false;
    size_t size = self->sizes [0];
    if (size > PS_MSG_MAX_HEADER)
        return ps_error_set (err, PS_EPROTO, "header frame has %zu bytes, the limit is %d",
                             size, PS_MSG_MAX_HEADER);
    if (!s_counts_fit (zmq_msg_data (&self->frames [0]), size))
        return ps_error_set (err, PS_EPROTO,
                             "header frame (%zu bytes) declares more elements than it holds", size);
    size_t offset = 0;
    int rc = msgpack_unpack_next (&self->unpacked, zmq_msg_data (&self->frames [0]), size, &offset);
    if (rc != MSGPACK_UNPACK_SUCCESS)
        return ps_error_set (err, PS_EPROTO, "header frame (%zu bytes) is not %s msgpack",
                             size, rc == MSGPACK_UNPACK_CONTINUE ? "complete" : "valid");
    if (offset != size)
        return ps_error_set (err, PS_EPROTO, "header frame has %zu bytes after the msgpack value",
                             size - offset);
    //  The decoded strings and arrays live in the unpacker's zone, with the
    //  msgpack objects they came from, until the next message.
    rc = ps_proto_decode (&self->unpacked.data, self->sizes + 1, self->nframes - 1,
                          self->unpacked.zone, &self->proto, err);
    if (rc)
        return rc;
    s_align_tensors (self);
    self->decoded = true;
    return PS_OK;
}

const char *
ps_msg_type (ps_msg_t *self)
{
    assert (self && self->decoded);
    return ps_proto_info [self->proto.type].name;
}

const ps_proto_t *
ps_msg_proto (ps_msg_t *self)
{
    assert (self && self->decoded);
    return &self->proto;
}

uint64_t
ps_msg_id (ps_msg_t *self)
{
    assert (self);
    return self->proto.id;
}

size_t
ps_msg_tensor_count (ps_msg_t *self)
{
    assert (self && self->decoded);
    return self->nframes - 1;
}

const float *
ps_msg_tensor (ps_msg_t *self, size_t index)
{
    assert (self && self->decoded && index + 1 < self->nframes);
    return self->tensors [index];
}

const uint64_t *
ps_msg_ids (ps_msg_t *self, size_t index)
{
    assert (self && self->decoded && index + 1 < self->nframes);
    return (const uint64_t *) (const void *) self->tensors [index];
}

int
ps_msg_take_tensor (ps_msg_t *self, size_t index, zmq_msg_t *frame)
{
    assert (self && self->decoded && index + 1 < self->nframes);
    zmq_msg_t *source = &self->frames [index + 1];
    if ((const void *) self->tensors [index] != zmq_msg_data (source))
        return PS_EINVAL;
    if (zmq_msg_init (frame) != 0 || zmq_msg_move (frame, source) != 0)
        abort ();
    return PS_OK;
}

void
ps_msg_clear (ps_msg_t *self)
{
    assert (self);
    s_clear (self);
}

size_t
ps_msg_tensor_bytes (ps_msg_t *self)
{
    assert (self);
    size_t total = 0;
    for (size_t i = 1; i < self->nframes; i++)
        total += self->sizes [i];
    return total;
}

const char *
ps_msg_peer_address (ps_msg_t *self)
{
    assert (self);
    return self->nframes ? zmq_msg_gets (&self->frames [0], "Peer-Address") : NULL;
}

size_t
ps_msg_envelope (ps_msg_t *self, zmq_msg_t **frames)
{
    assert (self);
    *frames = self->envelope;
    return self->nenvelope;
}

const char *
ps_msg_property (ps_msg_t *self, const char *name)
{
    assert (self);
    //  ZeroMQ attaches the connection's metadata to every frame it
    //  receives, but not to the routing id a ROUTER prepends: the header
    //  frame is the one to ask.
    return self->nframes > 0 ? zmq_msg_gets (&self->frames [0], name) : NULL;
}

void
ps_writer_init (ps_writer_t *self)
{
    msgpack_sbuffer_init (&self->sbuf);
    msgpack_packer_init (&self->pk, &self->sbuf, msgpack_sbuffer_write);
}

void
ps_writer_fini (ps_writer_t *self)
{
    msgpack_sbuffer_destroy (&self->sbuf);
}

int
ps_writer_send (ps_writer_t *self, void *socket, zmq_msg_t *envelope, size_t nenvelope,
                zmq_msg_t *frames, size_t nframes, ps_error_t *err)
{
    zmq_msg_t header;
    if (zmq_msg_init_size (&header, self->sbuf.size) != 0) {
        for (size_t i = 0; i < nframes; i++)
            zmq_msg_close (&frames [i]);
        return ps_error_set (err, PS_EIO, "zmq_msg_init_size: %s", zmq_strerror (errno));
    }
    memcpy (zmq_msg_data (&header), self->sbuf.data, self->sbuf.size);
    return ps_msg_send_frames (socket, envelope, nenvelope, &header, frames, nframes, err);
}

int
ps_msg_send_frames (void *socket, zmq_msg_t *envelope, size_t nenvelope, zmq_msg_t *header,
                    zmq_msg_t *frames, size_t nframes, ps_error_t *err)
{
    int rc = PS_OK;
    for (size_t i = 0; i < nenvelope && rc == PS_OK; i++) {
        zmq_msg_t copy;
        if (zmq_msg_init (&copy) != 0 || zmq_msg_copy (&copy, &envelope [i]) != 0
        ||  zmq_msg_send (&copy, socket, ZMQ_SNDMORE) < 0) {
            rc = ps_error_set (err, PS_EIO, "sending envelope: %s", zmq_strerror (errno));
            zmq_msg_close (&copy);
        }
    }
    if (rc == PS_OK && zmq_msg_send (header, socket, nframes ? ZMQ_SNDMORE : 0) < 0)
        rc = ps_error_set (err, PS_EIO, "sending header: %s", zmq_strerror (errno));
    zmq_msg_close (header);
    for (size_t i = 0; i < nframes; i++) {
        if (rc == PS_OK
        &&  zmq_msg_send (&frames [i], socket, i + 1 < nframes ? ZMQ_SNDMORE : 0) < 0)
            rc = ps_error_set (err, PS_EIO, "sending frame %zu: %s", i, zmq_strerror (errno));
        //  A sent frame is already empty; closing it again is harmless, and
        //  closing the unsent ones is what keeps them from leaking.
        zmq_msg_close (&frames [i]);
    }
    return rc;
}

void
ps_writer_encode (ps_writer_t *self, const ps_proto_t *msg)
{
    msgpack_sbuffer_clear (&self->sbuf);
    //  The packer fails only when its buffer cannot grow: out of memory,
    //  which ps-cluster treats as fatal everywhere.
    if (ps_proto_encode (msg, &self->pk))
        abort ();
}

void
ps_writer_error (ps_writer_t *self, uint64_t id, int code, const char *message)
{
    ps_proto_t reply = { .type = PS_PROTO_ERROR, .id = id,
                         .error = { ps_error_name (code), message } };
    ps_writer_encode (self, &reply);
}

int
ps_msg_send_error (void *socket, zmq_msg_t *envelope, size_t nenvelope,
                   uint64_t id, int code, const char *message, ps_error_t *err)
{
    ps_writer_t writer;
    ps_writer_init (&writer);
    ps_writer_error (&writer, id, code, message);
    int rc = ps_writer_send (&writer, socket, envelope, nenvelope, NULL, 0, err);
    ps_writer_fini (&writer);
    return rc;
}
