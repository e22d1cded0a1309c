//  The wire protocol's schema, compiled in from schemas/protocol.json.
//
//  Every header that crosses a socket, in either direction, is checked here
//  against that file: its protocol version, its type, every field's presence
//  and type (recursively), no unknown keys, and, for messages that carry
//  tensors, that the frames match the descriptions (count, byte length and
//  shape). Handlers can then read fields without re-checking them. Because
//  the JSON file is the only definition, changing the protocol means
//  changing that file, and the codec follows.

#ifndef PS_SCHEMA_H_INCLUDED
#define PS_SCHEMA_H_INCLUDED

#include <stddef.h>

#include <msgpack.h>

#include "ps_error.h"

//  The protocol version this build speaks.
#define PS_PROTOCOL_VERSION 1

//  Validate header (a decoded msgpack object) followed by nframes frames
//  of the given sizes. Returns 0 and sets *type to the message type (a
//  string with static lifetime); PS_EVERSION for another protocol version;
//  PS_EPROTO for an unknown type, a missing, unknown or wrongly typed field
//  or a wrong frame count; PS_ESHAPE when a tensor's shape, byte length and
//  frame size disagree. The message names the field by path, for example
//  "push: tensors[1].shape[0]: expected uint, got str".
int ps_schema_validate (const msgpack_object *header, const size_t *frame_sizes,
                        size_t nframes, const char **type, ps_error_t *err);

//  The reply type of a request type, or NULL when type is not a request.
const char *ps_schema_reply_type (const char *type);

//  The value of key in a msgpack map, or NULL when absent (or map is not a
//  map). The validator and every reader of headers use it.
const msgpack_object *ps_obj_get (const msgpack_object *map, const char *key);

#endif
