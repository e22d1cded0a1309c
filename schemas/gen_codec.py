#!/usr/bin/env python3
"""Generate the wire protocol's C codec from schemas/protocol.json.

The protocol file is the single definition of every message. This script,
which meson runs at build time, turns it into ps_proto.h and ps_proto.c, in
the way CZMQ's zproto turns a protocol model into zgossip_msg.c: per message
type a C struct with typed fields, an encoder and a decoder, then an enum of
message types and a table that says, per type, its name, its reply, whether
tensor frames follow the header and which roles may send it (the
authorization column, 'senders' in protocol.json).

The decoder checks every field's presence and type, refuses unknown and
repeated keys, strings holding a NUL byte, and tensor frames that disagree
with their descriptions, and names the message and the field in its error
("push: tensors[1].shape[0]: expected uint, got str"). It then checks the
bounds a field states in protocol.json (BOUNDS below: minimum, maximum,
finite, enum, maxLength, minItems, maxItems, and 'items' for the bounds of
an array's elements), so hand-written code never re-checks them; a value
out of bounds is refused as invalid, naming the message, the field and the
bound ("push: round_steps: 0 is out of bounds, expected 1 to 4294967295"). Strings and arrays of
a decoded message live in the msgpack zone of the header they came from, so
decoding allocates nothing of its own; tensor frames are never copied.

The output is deterministic (fields in the order protocol.json lists them),
so tests/golden/ holds a copy that a test compares with every build's.

The C code that is the same for every protocol (decoding state, the
primitive codecs, the errors, the frame checks, the decode entry point)
lives beside this script in codec_runtime.c.in and codec_decode.c.in,
copied verbatim into ps_proto.c.

Usage: gen_codec.py PROTOCOL_JSON OUTPUT_H OUTPUT_C
Python 3 standard library only.
"""

import json
import os
import sys

PRIMS = {
    # name: (C type, msgpack check, kind name in errors)
    "uint": "uint64_t",
    "int": "int64_t",
    "float": "double",
    "str": "const char *",
    "bool": "bool",
}


# The bounds a field may state, and the kinds of field each applies to.
# They read as in JSON Schema, except that maxLength counts bytes (names on
# the wire are ASCII) and 'finite' (no NaN or infinity) is ours.
BOUNDS = {
    "minimum": ("uint", "int", "float"),
    "maximum": ("uint", "int", "float"),
    "finite": ("float",),
    "enum": ("str",),
    "maxLength": ("str",),
    "minItems": ("array",),
    "maxItems": ("array",),
    "items": ("array",),
}


C_KEYWORDS = set("""auto break case char const continue default do double else enum
extern float for goto if inline int long register restrict return short signed sizeof
static struct switch typedef union unsigned void volatile while bool true false""".split())


def cname(name):
    """A protocol name as a C identifier: a C keyword gets a trailing '_'
    (the message 'register' is the union member 'register_')."""
    return name + "_" if name in C_KEYWORDS else name


class Gen:
    def __init__(self, proto):
        self.proto = proto
        self.types = proto["types"]
        self.roles = proto["roles"]
        self.arrays = {}        # elem key -> (c type name, elem type expr)
        self.maps = []          # named map types in dependency order
        self.done = set()
        self.enums = []         # the enum tables of str bounds, in emission order
        for name in self.types:
            self.visit(name)
        for spec in proto["messages"].values():
            for field in spec["fields"].values():
                self.visit_expr(self.unwrap(field)[0])
        for msg in proto["messages"]:
            if msg in self.types:
                sys.exit("gen_codec: message '%s' has the name of a type" % msg)

    # A field is a type expression, or {type: expr, optional: true} with
    # bounds beside them (BOUNDS).
    @staticmethod
    def unwrap(field):
        if isinstance(field, dict) and "type" in field:
            return field["type"], bool(field.get("optional"))
        return field, False

    # The bounds a field states, checked against what its type allows, so
    # a typo in protocol.json stops the build instead of checking nothing.
    def bounds(self, field, where):
        if not (isinstance(field, dict) and "type" in field):
            return {}
        out = {k: v for k, v in field.items() if k not in ("type", "optional", "doc")}
        self.check_bounds(field["type"], out, where)
        return out

    def check_bounds(self, expr, bounds, where):
        kind = self.kind(expr)
        for name, value in bounds.items():
            if name not in BOUNDS or kind not in BOUNDS[name]:
                sys.exit("gen_codec: %s: bound '%s' does not apply to a %s" % (where, name, kind))
            if name == "items":
                self.check_bounds(self.elem(expr), value, where + "[]")
            elif name == "enum":
                if not value or not all(isinstance(v, str) for v in value):
                    sys.exit("gen_codec: %s: enum must list strings" % where)
            elif name == "finite":
                if value is not True:
                    sys.exit("gen_codec: %s: finite must be true" % where)
            elif not isinstance(value, (int, float)) or isinstance(value, bool):
                sys.exit("gen_codec: %s: %s must be a number" % (where, name))
            elif kind == "uint" and not 0 <= value <= 2**64 - 1:
                sys.exit("gen_codec: %s: %s is outside uint" % (where, name))
            elif kind == "int" and not -2**63 <= value <= 2**63 - 1:
                sys.exit("gen_codec: %s: %s is outside int" % (where, name))
        if bounds.get("minimum", 0) > bounds.get("maximum", 2**64):
            sys.exit("gen_codec: %s: minimum is above maximum" % where)

    # The element type of an array type expression.
    def elem(self, expr):
        if isinstance(expr, str):
            return self.elem(self.types[expr])
        return expr["array"]

    def visit(self, name):
        if name in self.done:
            return
        self.done.add(name)
        spec = self.types[name]
        if isinstance(spec, dict) and "map" in spec:
            for field in spec["map"].values():
                self.visit_expr(self.unwrap(field)[0])
            self.maps.append(name)
        else:
            self.visit_expr(spec)

    def visit_expr(self, expr):
        if isinstance(expr, str):
            if expr in PRIMS:
                return
            if expr not in self.types:
                sys.exit("gen_codec: unknown type '%s'" % expr)
            self.visit(expr)
            return
        if isinstance(expr, dict) and "array" in expr:
            self.visit_expr(expr["array"])
            self.arrays.setdefault(self.key(expr), expr["array"])
            return
        sys.exit("gen_codec: bad type expression %r" % (expr,))

    # A name for a type expression, used in C identifiers.
    def key(self, expr):
        if isinstance(expr, str):
            spec = self.types.get(expr)
            if isinstance(spec, dict) and "array" in spec:
                return self.key(spec["array"]) + "_array"
            return expr
        return self.key(expr["array"]) + "_array"

    def ctype(self, expr):
        if isinstance(expr, str):
            if expr in PRIMS:
                return PRIMS[expr]
            return "ps_proto_%s_t" % self.key(expr)
        return "ps_proto_%s_t" % self.key(expr)

    # The kind a type expression resolves to: a primitive, 'array' or 'map'.
    def kind(self, expr):
        if isinstance(expr, str):
            if expr in PRIMS:
                return expr
            spec = self.types[expr]
            if isinstance(spec, dict) and "map" in spec:
                return "map"
            return self.kind(spec)
        return "array"

    # The name of the decode or encode function of a non-primitive type.
    def fn(self, expr):
        return self.key(expr)

    def order_arrays(self):
        return sorted(self.arrays.items())


def c_fields(gen, fields, indent="    "):
    out = []
    for name, field in fields.items():
        expr, optional = gen.unwrap(field)
        if optional:
            out.append("%sbool has_%s;" % (indent, name))
        ctype = gen.ctype(expr)
        sep = "" if ctype.endswith("*") else " "
        out.append("%s%s%s%s;" % (indent, ctype, sep, cname(name)))
    return out


def role_text(gen, senders):
    if senders == "any":
        return "a member of the cluster"
    return " or ".join(gen.roles[r]["as_sender"] for r in senders)


def role_mask(gen, senders):
    if senders == "any":
        return "PS_PROTO_ANY_ROLE"
    return " | ".join("PS_PROTO_ROLE_%s" % r.upper() for r in senders)


def emit_header(gen):
    proto = gen.proto
    msgs = proto["messages"]
    h = []
    w = h.append
    w("//  The wire protocol's codec, generated by schemas/gen_codec.py from")
    w("//  schemas/protocol.json: do not edit; change protocol.json instead.")
    w("//")
    w("//  Each message type has a struct of typed fields (ps_proto_<type>_t), and")
    w("//  ps_proto_t holds one decoded or to-be-encoded message of any type: its")
    w("//  header fields and, in an anonymous union, the body of its type, so a")
    w("//  handler reads msg->push.step. An optional field comes with a flag")
    w("//  has_<field>. A decoded message's strings and arrays live in the msgpack")
    w("//  zone given to ps_proto_decode, and its tensor frames stay in the frames")
    w("//  they came in (ps_msg_tensor reads them in place). ps_proto_info is the")
    w("//  dispatch table: per type its name, its reply type, whether tensor")
    w("//  frames follow, and which roles may send it.")
    w("")
    w("#ifndef PS_PROTO_H_INCLUDED")
    w("#define PS_PROTO_H_INCLUDED")
    w("")
    w("#include <stdbool.h>")
    w("#include <stddef.h>")
    w("#include <stdint.h>")
    w("")
    w("#include <msgpack.h>")
    w("")
    w('#include "ps_error.h"')
    w("")
    w("//  The protocol version this codec speaks.")
    w("#define PS_PROTO_VERSION %d" % proto["version"])
    w("")
    w("//  Message types. PS_PROTO_NONE is no type (a header that did not decode).")
    w("typedef enum {")
    w("    PS_PROTO_NONE = 0,")
    for name in msgs:
        w("    PS_PROTO_%s," % name.upper())
    w("    PS_PROTO_NTYPES")
    w("} ps_proto_type_t;")
    w("")
    w("//  The roles of a cluster's tasks, as bits of a sender mask.")
    for i, (role, spec) in enumerate(gen.roles.items()):
        w("#define PS_PROTO_ROLE_%s (1u << %d)   //  %s" % (role.upper(), i, spec["doc"]))
    w("#define PS_PROTO_ANY_ROLE ((1u << %d) - 1)" % len(gen.roles))
    w("")
    w("//  Types the messages share.")
    # Arrays of primitives need nothing; arrays of maps need the map first.
    emitted = set()

    def emit_array(key, elem):
        if key in emitted:
            return
        emitted.add(key)
        ctype = gen.ctype(elem)
        sep = "" if ctype.endswith("*") else " "
        w("typedef struct {")
        w("    size_t count;")
        w("    %s%s*items;" % (ctype, sep))
        w("} ps_proto_%s_t;" % key)
        w("")

    def needs(expr):
        # Arrays a type's definition refers to.
        out = []
        if isinstance(expr, dict):
            out.append((gen.key(expr), expr["array"]))
        elif expr not in PRIMS:
            spec = gen.types[expr]
            if isinstance(spec, dict) and "array" in spec:
                out.append((gen.key(spec["array"]) + "_array", spec["array"]))
        return out

    for key, elem in gen.order_arrays():
        if gen.kind(elem) not in ("map", "array"):
            emit_array(key, elem)
    for name in gen.maps:
        fields = gen.types[name]["map"]
        for field in fields.values():
            for key, elem in needs(gen.unwrap(field)[0]):
                emit_array(key, elem)
        w("typedef struct {")
        h.extend(c_fields(gen, fields))
        w("} ps_proto_%s_t;" % name)
        w("")
        # An array of this map, if any, right after it.
        for key, elem in gen.order_arrays():
            if elem == name:
                emit_array(key, elem)
    for key, elem in gen.order_arrays():
        emit_array(key, elem)
    w("//  The bodies of the messages that have fields.")
    for name, spec in msgs.items():
        if not spec["fields"]:
            continue
        w("//  %s" % name)
        w("typedef struct {")
        h.extend(c_fields(gen, spec["fields"]))
        w("} ps_proto_%s_t;" % name)
        w("")
    w("//  One message: the header fields, then the body of its type.")
    w("typedef struct {")
    w("    ps_proto_type_t type;")
    w("    uint64_t version;")
    w("    uint64_t id;")
    w("    union {")
    for name, spec in msgs.items():
        if spec["fields"]:
            w("        ps_proto_%s_t %s;" % (name, cname(name)))
    w("    };")
    w("} ps_proto_t;")
    w("")
    w("//  One row of the dispatch table.")
    w("typedef struct {")
    w("    const char *name;           //  the type's name on the wire")
    w("    ps_proto_type_t reply;      //  its reply type; PS_PROTO_NONE when it has none")
    w("    bool tensors;               //  tensor frames follow the header")
    w("    unsigned senders;           //  PS_PROTO_ROLE_* bits of the roles that may send it")
    w("    const char *senders_text;   //  the same in words, for error messages")
    w("} ps_proto_info_t;")
    w("")
    w("//  The dispatch table, indexed by type (row PS_PROTO_NONE is empty).")
    w("extern const ps_proto_info_t ps_proto_info [PS_PROTO_NTYPES];")
    w("")
    w("//  The type named name (len bytes, not NUL-terminated), or PS_PROTO_NONE.")
    w("ps_proto_type_t ps_proto_lookup (const char *name, size_t len);")
    w("")
    w("//  The role bit of a task name such as \"worker:3\" (role, colon, index),")
    w("//  or 0 when task is NULL or names no role.")
    w("unsigned ps_proto_role (const char *task);")
    w("")
    w("//  Whether task (as ps_proto_role reads it) may send a message of type.")
    w("bool ps_proto_may_send (ps_proto_type_t type, const char *task);")
    w("")
    w("//  Decode header, a msgpack object, and check it and the sizes of the")
    w("//  nframes tensor frames that came after it against the protocol. On")
    w("//  success fills *msg, allocating its strings and arrays in zone, and")
    w("//  returns 0. Otherwise returns PS_EVERSION for another protocol version,")
    w("//  PS_EPROTO for a header that is not a map, an unknown type, a missing,")
    w("//  unknown, repeated or wrongly typed field, a string holding a NUL byte or")
    w("//  a wrong frame count, PS_EINVAL for a value outside its field's bounds")
    w("//  (protocol.json: minimum, maximum, finite, enum, maxLength, minItems,")
    w("//  maxItems), or PS_ESHAPE when a tensor's shape, byte count and frame")
    w("//  disagree, with err naming the message, the field and, for a bound, the")
    w("//  bound; msg->id is then the request's id if the header held a valid")
    w("//  one, else 0.")
    w("int ps_proto_decode (const msgpack_object *header, const size_t *frame_sizes,")
    w("                     size_t nframes, msgpack_zone *zone, ps_proto_t *msg,")
    w("                     ps_error_t *err);")
    w("")
    w("//  Pack msg's header (version PS_PROTO_VERSION, its type and id, then the")
    w("//  fields of its type in protocol.json's order, optional ones when their")
    w("//  flag is set) with pk. Returns 0, or PS_EIO when the packer's buffer")
    w("//  cannot grow.")
    w("int ps_proto_encode (const ps_proto_t *msg, msgpack_packer *pk);")
    w("")
    w("//  The codec of each map type on its own, for a value held outside a")
    w("//  message: decode checks obj as ps_proto_decode checks a field of that")
    w("//  type (errors name the type, then the field), encode packs it.")
    for name in gen.maps:
        w("int ps_proto_%s_decode (const msgpack_object *obj, msgpack_zone *zone," % name)
        w("%sps_proto_%s_t *out, ps_error_t *err);" % (" " * (22 + len(name)), name))
        w("int ps_proto_%s_encode (msgpack_packer *pk, const ps_proto_%s_t *in);" % (name, name))
    w("")
    w("#endif")
    return "\n".join(h) + "\n"


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def emit_field_decode(gen, c, expr, target, indent):
    kind = gen.kind(expr)
    if kind in PRIMS:
        c.append("%src = s_decode_%s (val, &%s, ctx);" % (indent, kind, target))
    else:
        c.append("%src = s_decode_%s (val, &%s, ctx);" % (indent, gen.fn(expr), target))


def c_number(kind, value):
    if kind == "uint":
        return "UINT64_MAX" if value == 2**64 - 1 else "UINT64_C (%d)" % value
    if kind == "int":
        return {-2**63: "INT64_MIN", 2**63 - 1: "INT64_MAX"}.get(value, "INT64_C (%d)" % value)
    return repr(float(value))


def emit_bounds(gen, c, expr, bounds, target, size, indent):
    """The checks of a field's bounds, after its decoder succeeded; target
    is the C lvalue holding the value and size, for a str, its length in
    bytes. Each check is a compare or two on the hot path; only a failing
    one calls out of line to word the error."""
    if not bounds:
        return
    kind = gen.kind(expr)
    ind = indent + "    "
    if kind in ("uint", "int"):
        lo = bounds.get("minimum", 0 if kind == "uint" else -2**63)
        hi = bounds.get("maximum", 2**64 - 1 if kind == "uint" else 2**63 - 1)
        tests = []
        if lo > (0 if kind == "uint" else -2**63):
            tests.append("%s < %s" % (target, c_number(kind, lo)))
        if hi < (2**64 - 1 if kind == "uint" else 2**63 - 1):
            tests.append("%s > %s" % (target, c_number(kind, hi)))
        if tests:
            c.append("%sif (rc == PS_OK && (%s))" % (indent, " || ".join(tests)))
            c.append("%src = s_bound_%s (ctx, %s, %s, %s);"
                     % (ind, kind, target, c_number(kind, lo), c_number(kind, hi)))
    elif kind == "float":
        lo = bounds.get("minimum")
        hi = bounds.get("maximum")
        finite = bounds.get("finite", False) or lo is not None or hi is not None
        tests = []
        if lo is None and hi is None:
            tests.append("!isfinite (%s)" % target)
        if lo is not None:
            tests.append("!(%s >= %s)" % (target, c_number(kind, lo)))
        if hi is not None:
            tests.append("!(%s <= %s)" % (target, c_number(kind, hi)))
        if finite:
            c.append("%sif (rc == PS_OK && (%s))" % (indent, " || ".join(tests)))
            c.append("%src = s_bound_float (ctx, %s, %s, %s);"
                     % (ind, target, "-HUGE_VAL" if lo is None else c_number(kind, lo),
                        "HUGE_VAL" if hi is None else c_number(kind, hi)))
    elif kind == "str":
        if "maxLength" in bounds:
            c.append("%sif (rc == PS_OK && %s > %d)" % (indent, size, bounds["maxLength"]))
            c.append("%src = s_bound_length (ctx, %s, %d);" % (ind, size, bounds["maxLength"]))
        if "enum" in bounds:
            table = "s_enum_%d" % len(gen.enums)
            gen.enums.append("static const char *const %s [] = { %s, NULL };"
                          % (table, ", ".join(c_string(v) for v in bounds["enum"])))
            c.append("%sif (rc == PS_OK)" % indent)
            c.append("%src = s_bound_enum (ctx, %s, %s);" % (ind, target, table))
    elif kind == "array":
        lo = bounds.get("minItems", 0)
        hi = bounds.get("maxItems")
        tests = []
        if lo:
            tests.append("%s.count < %d" % (target, lo))
        if hi is not None:
            tests.append("%s.count > %d" % (target, hi))
        if tests:
            c.append("%sif (rc == PS_OK && (%s))" % (indent, " || ".join(tests)))
            c.append("%src = s_bound_items (ctx, %s.count, %d, %s);"
                     % (ind, target, lo, "SIZE_MAX" if hi is None else "%d" % hi))
        if "items" in bounds:
            elem = gen.elem(expr)
            c.append("%sfor (size_t i = 0; rc == PS_OK && i < %s.count; i++) {" % (indent, target))
            c.append("%ssize_t at = strlen (ctx->path);" % ind)
            c.append('%ssnprintf (ctx->path + at, sizeof ctx->path - at, "[%%zu]", i);' % ind)
            item = "%s.items [i]" % target
            emit_bounds(gen, c, elem, bounds["items"], item, "strlen (%s)" % item, ind)
            c.append("%sif (rc == PS_OK)" % ind)
            c.append("%s    ctx->path [at] = 0;" % ind)
            c.append("%s}" % indent)


def emit_value_encode(gen, c, expr, source, indent):
    kind = gen.kind(expr)
    if kind in PRIMS:
        c.append("%src |= s_encode_%s (pk, %s);" % (indent, kind, source))
    else:
        c.append("%src |= s_encode_%s (pk, &%s);" % (indent, gen.fn(expr), source))


def emit_map_body(gen, c, fields, target, header=False):
    """The loop over a map's entries, shared by named maps and messages.
    target (field name) is the C lvalue that field decodes into."""
    names = list(fields)
    required = [i for i, n in enumerate(names) if not gen.unwrap(fields[n])[1]]
    mask = "UINT64_C (0x%x)" % sum(1 << i for i in required)
    c.append("    static const char *const names [] = { %s };"
             % ", ".join(c_string(n) for n in names))
    c.append("    uint64_t seen = 0;")
    c.append("    size_t used = strlen (ctx->path);")
    c.append("    for (uint32_t i = 0; i < obj->via.map.size; i++) {")
    c.append("        const msgpack_object *val = &obj->via.map.ptr [i].val;")
    c.append("        int field = s_field (obj, i, names, %d, &seen, ctx);" % len(names))
    c.append("        if (field < 0)")
    c.append("            return field;")
    c.append("        s_path_field (ctx, used, names [field]);")
    c.append("        int rc = PS_OK;")
    c.append("        switch (field) {")
    for i, name in enumerate(names):
        expr, optional = gen.unwrap(fields[name])
        c.append("            case %d:" % i)
        if header and name in ("version", "type"):
            c.append("                break;      //  read before the body")
            continue
        if optional:
            c.append("                %s = true;" % target("has_" + name))
        emit_field_decode(gen, c, expr, target(name), "                ")
        emit_bounds(gen, c, expr, gen.bounds(fields[name], name), target(name),
                    "val->via.str.size", "                ")
        c.append("                break;")
    c.append("        }")
    c.append("        if (rc)")
    c.append("            return rc;")
    c.append("        ctx->path [used] = 0;")
    c.append("    }")
    c.append("    return s_missing (seen, %s, names, ctx);" % mask)


def emit_map_encode(gen, c, fields, src):
    names = list(fields)
    opt = [n for n in names if gen.unwrap(fields[n])[1]]
    count = "%d" % (len(names) - len(opt))
    for n in opt:
        count += " + %s->has_%s" % (src, n)
    return names, count


def emit_source(gen):
    proto = gen.proto
    msgs = proto["messages"]
    header_fields = proto["header"]
    c = []
    w = c.append
    w("//  The wire protocol's codec, generated by schemas/gen_codec.py from")
    w("//  schemas/protocol.json: do not edit; see ps_proto.h.")
    w("")
    w('#include "ps_proto.h"')
    w('#include "ps_shape.h"')
    w("")
    w("#include <inttypes.h>")
    w("#include <math.h>")
    w("#include <stdio.h>")
    w("#include <stdlib.h>")
    w("#include <string.h>")
    w("")
    w(s_fragment("codec_runtime.c.in"))
    enums_at = len(c)
    w("")
    # Forward declarations of every decoder and encoder, since maps and
    # arrays refer to each other in either order.
    for name in gen.maps:
        w("static int s_decode_%s (const msgpack_object *obj, ps_proto_%s_t *out, s_ctx_t *ctx);"
          % (name, name))
        w("static int s_encode_%s (msgpack_packer *pk, const ps_proto_%s_t *in);" % (name, name))
    for key, elem in gen.order_arrays():
        w("static int s_decode_%s (const msgpack_object *obj, ps_proto_%s_t *out, s_ctx_t *ctx);"
          % (key, key))
        w("static int s_encode_%s (msgpack_packer *pk, const ps_proto_%s_t *in);" % (key, key))
    w("")
    for key, elem in gen.order_arrays():
        ctype = gen.ctype(elem)
        w("static int")
        w("s_decode_%s (const msgpack_object *obj, ps_proto_%s_t *out, s_ctx_t *ctx)" % (key, key))
        w("{")
        w("    if (obj->type != MSGPACK_OBJECT_ARRAY)")
        w('        return s_expected (ctx, "array", obj);')
        w("    out->count = obj->via.array.size;")
        w("    out->items = NULL;")
        w("    if (out->count == 0)")
        w("        return PS_OK;")
        w("    out->items = s_alloc (ctx, out->count * sizeof *out->items);")
        w("    size_t used = strlen (ctx->path);")
        w("    for (uint32_t i = 0; i < obj->via.array.size; i++) {")
        w("        const msgpack_object *val = &obj->via.array.ptr [i];")
        w("        int rc;")
        w('        snprintf (ctx->path + used, sizeof ctx->path - used, "[%u]", i);')
        emit_field_decode(gen, c, elem, "out->items [i]", "        ")
        w("        if (rc)")
        w("            return rc;")
        w("    }")
        w("    ctx->path [used] = 0;")
        w("    return PS_OK;")
        w("}")
        w("")
        w("static int")
        w("s_encode_%s (msgpack_packer *pk, const ps_proto_%s_t *in)" % (key, key))
        w("{")
        w("    int rc = msgpack_pack_array (pk, in->count);")
        w("    for (size_t i = 0; i < in->count; i++)")
        emit_value_encode(gen, c, elem, "in->items [i]", "        ")
        w("    return rc;")
        w("}")
        w("")
        del ctype
    for name in gen.maps:
        fields = gen.types[name]["map"]
        w("static int")
        w("s_decode_%s (const msgpack_object *obj, ps_proto_%s_t *out, s_ctx_t *ctx)"
          % (name, name))
        w("{")
        w("    if (obj->type != MSGPACK_OBJECT_MAP)")
        w('        return s_expected (ctx, "map", obj);')
        w("    memset (out, 0, sizeof *out);")
        emit_map_body(gen, c, fields, lambda f: "out->" + cname(f))
        w("}")
        w("")
        names, count = emit_map_encode(gen, c, fields, "in")
        w("static int")
        w("s_encode_%s (msgpack_packer *pk, const ps_proto_%s_t *in)" % (name, name))
        w("{")
        w("    int rc = msgpack_pack_map (pk, %s);" % count)
        for n in names:
            expr, optional = gen.unwrap(fields[n])
            ind = "    "
            if optional:
                w("    if (in->has_%s) {" % n)  # has_ names are never keywords
                ind = "        "
            w('%src |= s_encode_key (pk, "%s");' % (ind, n))
            emit_value_encode(gen, c, expr, "in->%s" % cname(n), ind)
            if optional:
                w("    }")
        w("    return rc;")
        w("}")
        w("")
    # Messages: the body decoders read the header map with the header
    # fields first in their field table.
    for name, spec in msgs.items():
        fields = dict(header_fields)
        fields.update(spec["fields"])
        w("static int")
        w("s_decode_msg_%s (const msgpack_object *obj, ps_proto_t *msg, s_ctx_t *ctx)" % name)
        w("{")
        emit_map_body(gen, c, fields,
                      lambda f: "msg->" + f if f in header_fields
                      else "msg->%s.%s" % (cname(name), cname(f)),
                      header=True)
        w("}")
        w("")
    # Frames checks for messages that carry tensors.
    w("//  Tensor frames must match their descriptions one to one.")
    w("static int")
    w("s_check_frames (const ps_proto_t *msg, const size_t *frame_sizes, size_t nframes,")
    w("                ps_error_t *err)")
    w("{")
    w("    const char *name = ps_proto_info [msg->type].name;")
    w("    switch (msg->type) {")
    for name, spec in msgs.items():
        if isinstance(spec["frames"], dict):
            emit_entry_frames(w, name, spec["frames"]["per_entry"])
            continue
        if spec["frames"] != "tensors":
            continue
        w("        case PS_PROTO_%s:" % name.upper())
        w("            if (msg->%s.tensors.count != nframes)" % name)
        w("                return s_frame_count (name, \"'tensors'\", msg->%s.tensors.count, nframes, err);"
          % name)
        w("            for (size_t i = 0; i < nframes; i++) {")
        w("                int rc = s_check_frame (name, i, &msg->%s.tensors.items [i].shape," % name)
        w("                                        msg->%s.tensors.items [i].bytes, frame_sizes [i], err);" % name)
        w("                if (rc)")
        w("                    return rc;")
        w("            }")
        w("            return PS_OK;")
    w("        default:")
    w("            if (nframes)")
    w("                return ps_error_set (err, PS_EPROTO,")
    w('                                     "%s: expected no frames after the header, got %zu",')
    w("                                     name, nframes);")
    w("            return PS_OK;")
    w("    }")
    w("}")
    w("")
    w("const ps_proto_info_t ps_proto_info [PS_PROTO_NTYPES] = {")
    w("    [PS_PROTO_NONE] = { NULL, PS_PROTO_NONE, false, 0, NULL },")
    for name, spec in msgs.items():
        reply = "PS_PROTO_%s" % spec["reply"].upper() if "reply" in spec else "PS_PROTO_NONE"
        if "senders" not in spec:
            sys.exit("gen_codec: message '%s' has no 'senders'" % name)
        w("    [PS_PROTO_%s] = { %s, %s, %s, %s, %s }," % (
            name.upper(), c_string(name), reply,
            "false" if spec["frames"] == "none" else "true",
            role_mask(gen, spec["senders"]), c_string(role_text(gen, spec["senders"]))))
    w("};")
    w("")
    w("static int (*const s_decoders [PS_PROTO_NTYPES]) (const msgpack_object *, ps_proto_t *, s_ctx_t *) = {")
    for name in msgs:
        w("    [PS_PROTO_%s] = s_decode_msg_%s," % (name.upper(), name))
    w("};")
    w("")
    w("static const char *const s_roles [] = { %s };"
      % ", ".join(c_string(r) for r in gen.roles))
    w("")
    w("unsigned")
    w("ps_proto_role (const char *task)")
    w("{")
    w("    for (size_t i = 0; task && i < sizeof s_roles / sizeof s_roles [0]; i++) {")
    w("        size_t len = strlen (s_roles [i]);")
    w("        if (strncmp (task, s_roles [i], len) == 0 && task [len] == ':')")
    w("            return 1u << i;")
    w("    }")
    w("    return 0;")
    w("}")
    w("")
    w(s_fragment("codec_decode.c.in"))
    for name in gen.maps:
        w("int")
        w("ps_proto_%s_decode (const msgpack_object *obj, msgpack_zone *zone, ps_proto_%s_t *out,"
          % (name, name))
        w("%sps_error_t *err)" % (" " * (18 + len(name))))
        w("{")
        w("    s_ctx_t ctx = { zone, err, %s };" % c_string(name))
        w("    return s_decode_%s (obj, out, &ctx);" % name)
        w("}")
        w("")
        w("int")
        w("ps_proto_%s_encode (msgpack_packer *pk, const ps_proto_%s_t *in)" % (name, name))
        w("{")
        w("    return s_encode_%s (pk, in) ? PS_EIO : PS_OK;" % name)
        w("}")
        w("")
    w("int")
    w("ps_proto_encode (const ps_proto_t *msg, msgpack_packer *pk)")
    w("{")
    w("    int rc = PS_OK;")
    w("    switch (msg->type) {")
    for name, spec in msgs.items():
        fields = spec["fields"]
        member = cname(name)
        names, count = emit_map_encode(gen, c, fields, "(&msg->%s)" % member)
        w("        case PS_PROTO_%s:" % name.upper())
        w("            rc |= s_encode_header (pk, msg, 3 + %s);" % count)
        for n in names:
            expr, optional = gen.unwrap(fields[n])
            ind = "            "
            if optional:
                w("            if (msg->%s.has_%s) {" % (member, n))
                ind = "                "
            w('%src |= s_encode_key (pk, "%s");' % (ind, n))
            emit_value_encode(gen, c, expr, "msg->%s.%s" % (member, cname(n)), ind)
            if optional:
                w("            }")
        w("            break;")
    w("        default:")
    w("            return PS_EINVAL;")
    w("    }")
    w("    return rc ? PS_EIO : PS_OK;")
    w("}")
    if gen.enums:
        c[enums_at] = "//  The values an enum field may take.\n" + "\n".join(gen.enums) + "\n"
    return "\n".join(c) + "\n"




# The frames of a sparse message (protocol.json: "frames": {"per_entry":
# [{"field": F, "frames": [KIND, ...]}, ...]}): for each entry of array
# field F in turn, one frame per KIND, the groups in the order listed. An
# entry is a sparse_ref (count, dim); an "ids" frame holds count uint64, a
# "rows" frame count * dim float32.
FRAME_KINDS = ("ids", "rows")


def emit_entry_frames(w, name, groups):
    member = cname(name)
    w("        case PS_PROTO_%s: {" % name.upper())
    w("            size_t described = 0;")
    for group in groups:
        for kind in group["frames"]:
            if kind not in FRAME_KINDS:
                sys.exit("gen_codec: message '%s': unknown frame kind '%s'" % (name, kind))
        w("            described += %d * msg->%s.%s.count;"
          % (len(group["frames"]), member, cname(group["field"])))
    what = " and ".join("'%s'" % g["field"] for g in groups)
    w("            if (described != nframes)")
    w("                return s_frame_count (name, %s, described, nframes, err);" % c_string(what))
    w("            size_t frame = 0;")
    w("            int rc;")
    for group in groups:
        field = group["field"]
        w("            for (size_t i = 0; i < msg->%s.%s.count; i++) {" % (member, cname(field)))
        w("                const ps_proto_sparse_ref_t *ref = &msg->%s.%s.items [i];"
          % (member, cname(field)))
        for kind in group["frames"]:
            w("                rc = s_check_entry_frame (name, %s, i, %s, ref->count, ref->dim,"
              % (c_string(field), "true" if kind == "rows" else "false"))
            w("                                          frame_sizes [frame++], err);")
            w("                if (rc)")
            w("                    return rc;")
        w("            }")
    w("            return PS_OK;")
    w("        }")


def s_fragment(name):
    """A C fragment of the runtime, beside this script, without its header
    comment (the lines up to the first blank one), which speaks of the
    fragment and not of ps_proto.c."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), name)) as f:
        text = f.read()
    return text.split("\n\n", 1)[1].rstrip("\n") + "\n"


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        proto = json.load(f)
    gen = Gen(proto)
    header = emit_header(gen)
    source = emit_source(gen)
    with open(sys.argv[2], "w") as f:
        f.write(header)
    with open(sys.argv[3], "w") as f:
        f.write(source)


if __name__ == "__main__":
    main()
