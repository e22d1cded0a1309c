//  The wire protocol's schema; see ps_schema.h.
//
//  At first use the embedded JSON is compiled into a small tree of type
//  nodes (primitive, array of T, map of named fields). Named types are
//  resolved once, so validation is a walk of the header and the tree with no
//  string lookups into the JSON. The compiled schema lives for the life of
//  the process.

#include "ps_schema.h"
#include "ps_shape.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char ps_schema_json [];

typedef enum { T_UINT, T_INT, T_FLOAT, T_STR, T_BOOL, T_ARRAY, T_MAP } s_kind_t;

typedef struct s_type_t s_type_t;

typedef struct {
    char *name;
    s_type_t *type;
    bool optional;
} s_field_t;

struct s_type_t {
    s_kind_t kind;
    s_type_t *elem;             //  T_ARRAY
    s_field_t *fields;          //  T_MAP
    size_t nfields;
};

typedef struct {
    char *name;
    char *reply;                //  NULL for replies
    s_type_t *body;             //  a T_MAP of the type-specific fields
    bool tensors;               //  frames described by field "tensors"
} s_message_t;

static struct {
    s_type_t *header;
    s_message_t *messages;
    size_t nmessages;
    json_t *types;              //  named types, during compilation only
} s_schema;

static pthread_once_t s_once = PTHREAD_ONCE_INIT;

//  A broken embedded schema is a build defect, not a runtime condition, so
//  compilation stops the process with the reason.
static void
s_die (const char *what, const char *name)
{
    fprintf (stderr, "ps-cluster: schemas/protocol.json: %s '%s'\n", what, name);
    abort ();
}

static s_type_t *s_compile (json_t *spec, const char *where);

static s_type_t *
s_compile_map (json_t *fields, const char *where)
{
    if (!json_is_object (fields))
        s_die ("map fields must be an object in", where);
    s_type_t *type = calloc (1, sizeof *type);
    if (!type)
        abort ();
    type->kind = T_MAP;
    type->nfields = json_object_size (fields);
    type->fields = calloc (type->nfields ? type->nfields : 1, sizeof (s_field_t));
    if (!type->fields)
        abort ();
    const char *key;
    json_t *value;
    size_t i = 0;
    json_object_foreach (fields, key, value) {
        s_field_t *field = &type->fields [i++];
        field->name = strdup (key);
        if (!field->name)
            abort ();
        json_t *inner = value;
        if (json_is_object (value) && json_object_get (value, "type")) {
            inner = json_object_get (value, "type");
            field->optional = json_is_true (json_object_get (value, "optional"));
        }
        field->type = s_compile (inner, key);
    }
    return type;
}

static s_type_t *
s_compile (json_t *spec, const char *where)
{
    if (json_is_string (spec)) {
        const char *name = json_string_value (spec);
        static const struct { const char *name; s_kind_t kind; } prims [] = {
            { "uint", T_UINT }, { "int", T_INT }, { "float", T_FLOAT },
            { "str", T_STR }, { "bool", T_BOOL },
        };
        for (size_t i = 0; i < sizeof prims / sizeof prims [0]; i++)
            if (strcmp (prims [i].name, name) == 0) {
                s_type_t *type = calloc (1, sizeof *type);
                if (!type)
                    abort ();
                type->kind = prims [i].kind;
                return type;
            }
        json_t *named = json_object_get (s_schema.types, name);
        if (!named)
            s_die ("unknown type", name);
        return s_compile (named, name);
    }
    if (json_is_object (spec) && json_object_get (spec, "array")) {
        s_type_t *type = calloc (1, sizeof *type);
        if (!type)
            abort ();
        type->kind = T_ARRAY;
        type->elem = s_compile (json_object_get (spec, "array"), where);
        return type;
    }
    if (json_is_object (spec) && json_object_get (spec, "map"))
        return s_compile_map (json_object_get (spec, "map"), where);
    s_die ("bad type expression in", where);
    return NULL;
}

static void
s_load (void)
{
    json_error_t jerr;
    json_t *root = json_loads (ps_schema_json, 0, &jerr);
    if (!root)
        s_die ("does not parse at", jerr.text);
    if (json_integer_value (json_object_get (root, "version")) != PS_PROTOCOL_VERSION)
        s_die ("version differs from the code's", "version");
    s_schema.types = json_object_get (root, "types");
    s_schema.header = s_compile_map (json_object_get (root, "header"), "header");
    json_t *messages = json_object_get (root, "messages");
    s_schema.nmessages = json_object_size (messages);
    s_schema.messages = calloc (s_schema.nmessages, sizeof (s_message_t));
    if (!s_schema.messages)
        abort ();
    const char *name;
    json_t *spec;
    size_t i = 0;
    json_object_foreach (messages, name, spec) {
        s_message_t *msg = &s_schema.messages [i++];
        msg->name = strdup (name);
        json_t *reply = json_object_get (spec, "reply");
        msg->reply = reply ? strdup (json_string_value (reply)) : NULL;
        if (!msg->name || (reply && !msg->reply))
            abort ();
        msg->body = s_compile_map (json_object_get (spec, "fields"), name);
        const char *frames = json_string_value (json_object_get (spec, "frames"));
        if (!frames)
            s_die ("missing 'frames' in", name);
        msg->tensors = strcmp (frames, "tensors") == 0;
    }
    s_schema.types = NULL;
    json_decref (root);
}

static const s_message_t *
s_message (const char *name, size_t len)
{
    for (size_t i = 0; i < s_schema.nmessages; i++)
        if (strlen (s_schema.messages [i].name) == len
        &&  memcmp (s_schema.messages [i].name, name, len) == 0)
            return &s_schema.messages [i];
    return NULL;
}

static const char *
s_kind_name (s_kind_t kind)
{
    static const char *names [] = { "uint", "int", "float", "str", "bool", "array", "map" };
    return names [kind];
}

static const char *
s_object_name (const msgpack_object *obj)
{
    switch (obj->type) {
        case MSGPACK_OBJECT_NIL:              return "nil";
        case MSGPACK_OBJECT_BOOLEAN:          return "bool";
        case MSGPACK_OBJECT_POSITIVE_INTEGER: return "uint";
        case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "negative int";
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:          return "float";
        case MSGPACK_OBJECT_STR:              return "str";
        case MSGPACK_OBJECT_BIN:              return "bin";
        case MSGPACK_OBJECT_ARRAY:            return "array";
        case MSGPACK_OBJECT_MAP:              return "map";
        default:                              return "ext";
    }
}

static bool
s_kind_accepts (s_kind_t kind, const msgpack_object *obj)
{
    switch (kind) {
        case T_UINT:  return obj->type == MSGPACK_OBJECT_POSITIVE_INTEGER;
        case T_INT:   return obj->type == MSGPACK_OBJECT_POSITIVE_INTEGER
                          || obj->type == MSGPACK_OBJECT_NEGATIVE_INTEGER;
        case T_FLOAT: return obj->type == MSGPACK_OBJECT_FLOAT32
                          || obj->type == MSGPACK_OBJECT_FLOAT64
                          || obj->type == MSGPACK_OBJECT_POSITIVE_INTEGER
                          || obj->type == MSGPACK_OBJECT_NEGATIVE_INTEGER;
        case T_STR:   return obj->type == MSGPACK_OBJECT_STR;
        case T_BOOL:  return obj->type == MSGPACK_OBJECT_BOOLEAN;
        case T_ARRAY: return obj->type == MSGPACK_OBJECT_ARRAY;
        case T_MAP:   return obj->type == MSGPACK_OBJECT_MAP;
    }
    return false;
}

//  Check the keys of map against type's fields. When skip is given, those
//  fields (the common header ones) are allowed in the map without being
//  part of type, which is how one header map holds both field sets.
static int s_check_map (const s_type_t *type, const msgpack_object *map,
                        const s_type_t *skip, char *path, size_t path_len,
                        ps_error_t *err);

static int
s_check (const s_type_t *type, const msgpack_object *obj, char *path, size_t path_len,
         ps_error_t *err)
{
    if (!s_kind_accepts (type->kind, obj))
        return ps_error_set (err, PS_EPROTO, "%s: expected %s, got %s",
                             path, s_kind_name (type->kind), s_object_name (obj));
    if (type->kind == T_ARRAY) {
        size_t used = strlen (path);
        for (uint32_t i = 0; i < obj->via.array.size; i++) {
            snprintf (path + used, path_len - used, "[%u]", i);
            int rc = s_check (type->elem, &obj->via.array.ptr [i], path, path_len, err);
            if (rc)
                return rc;
        }
        path [used] = 0;
    }
    else
    if (type->kind == T_MAP)
        return s_check_map (type, obj, NULL, path, path_len, err);
    return PS_OK;
}

static const s_field_t *
s_field (const s_type_t *type, const msgpack_object_str *key)
{
    if (!type)
        return NULL;
    for (size_t i = 0; i < type->nfields; i++)
        if (strlen (type->fields [i].name) == key->size
        &&  memcmp (type->fields [i].name, key->ptr, key->size) == 0)
            return &type->fields [i];
    return NULL;
}

static int
s_check_map (const s_type_t *type, const msgpack_object *map, const s_type_t *skip,
             char *path, size_t path_len, ps_error_t *err)
{
    size_t used = strlen (path);
    //  Paths read "push: tensors[0].shape": the message name, then fields.
    const char *dot = strchr (path, ':') ? "." : ": ";
    //  Every key must be a known field, present once, of the right type.
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *key = &map->via.map.ptr [i].key;
        if (key->type != MSGPACK_OBJECT_STR)
            return ps_error_set (err, PS_EPROTO, "%s: map key %u is a %s, expected str",
                                 path, i, s_object_name (key));
        for (uint32_t j = 0; j < i; j++) {
            const msgpack_object *other = &map->via.map.ptr [j].key;
            if (other->via.str.size == key->via.str.size
            &&  memcmp (other->via.str.ptr, key->via.str.ptr, key->via.str.size) == 0)
                return ps_error_set (err, PS_EPROTO, "%s: field '%.*s' appears twice", path,
                                     (int) key->via.str.size, key->via.str.ptr);
        }
        if (s_field (skip, &key->via.str))
            continue;
        const s_field_t *field = s_field (type, &key->via.str);
        if (!field)
            return ps_error_set (err, PS_EPROTO, "%s: unknown field '%.*s'", path,
                                 (int) key->via.str.size, key->via.str.ptr);
        snprintf (path + used, path_len - used, "%s%s", dot, field->name);
        int rc = s_check (field->type, &map->via.map.ptr [i].val, path, path_len, err);
        if (rc)
            return rc;
        path [used] = 0;
    }
    for (size_t f = 0; f < type->nfields; f++) {
        if (type->fields [f].optional)
            continue;
        bool found = false;
        for (uint32_t i = 0; i < map->via.map.size && !found; i++) {
            const msgpack_object_str *key = &map->via.map.ptr [i].key.via.str;
            found = strlen (type->fields [f].name) == key->size
                 && memcmp (type->fields [f].name, key->ptr, key->size) == 0;
        }
        if (!found)
            return ps_error_set (err, PS_EPROTO, "%s: missing field '%s'",
                                 path, type->fields [f].name);
    }
    return PS_OK;
}

const msgpack_object *
ps_obj_get (const msgpack_object *map, const char *key)
{
    if (map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    size_t len = strlen (key);
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr [i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == len
        &&  memcmp (k->via.str.ptr, key, len) == 0)
            return &map->via.map.ptr [i].val;
    }
    return NULL;
}

//  Tensor frames must match their descriptions one to one.
static int
s_check_frames (const s_message_t *msg, const msgpack_object *header,
                const size_t *frame_sizes, size_t nframes, ps_error_t *err)
{
    if (!msg->tensors) {
        if (nframes)
            return ps_error_set (err, PS_EPROTO, "%s: expected no frames after the header, got %zu",
                                 msg->name, nframes);
        return PS_OK;
    }
    const msgpack_object *tensors = ps_obj_get (header, "tensors");
    uint32_t count = tensors->via.array.size;
    if (count != nframes)
        return ps_error_set (err, PS_EPROTO, "%s: 'tensors' describes %u frames, got %zu",
                             msg->name, count, nframes);
    for (uint32_t i = 0; i < count; i++) {
        const msgpack_object *desc = &tensors->via.array.ptr [i];
        const msgpack_object *dims = ps_obj_get (desc, "shape");
        uint64_t bytes = ps_obj_get (desc, "bytes")->via.u64;
        int64_t values [PS_MAX_RANK];
        uint32_t rank = dims->via.array.size;
        for (uint32_t d = 0; d < rank && d < PS_MAX_RANK; d++)
            values [d] = dims->via.array.ptr [d].via.u64 > INT64_MAX
                       ? -1 : (int64_t) dims->via.array.ptr [d].via.u64;
        ps_shape_t shape;
        ps_error_t shape_err;
        if (ps_shape_set (&shape, values, rank > PS_MAX_RANK ? PS_MAX_RANK + 1 : (int) rank,
                          &shape_err))
            return ps_error_set (err, PS_ESHAPE, "%s: tensors[%u].shape: %s",
                                 msg->name, i, shape_err.msg);
        uint64_t expect = 4 * (uint64_t) ps_shape_count (&shape);
        char text [128];
        if (bytes != expect)
            return ps_error_set (err, PS_ESHAPE,
                                 "%s: tensors[%u]: shape %s needs %llu bytes, 'bytes' says %llu",
                                 msg->name, i, ps_shape_str (&shape, text, sizeof text),
                                 (unsigned long long) expect, (unsigned long long) bytes);
        if (frame_sizes [i] != bytes)
            return ps_error_set (err, PS_ESHAPE,
                                 "%s: tensors[%u]: frame has %zu bytes, header says %llu",
                                 msg->name, i, frame_sizes [i], (unsigned long long) bytes);
    }
    return PS_OK;
}

int
ps_schema_validate (const msgpack_object *header, const size_t *frame_sizes,
                    size_t nframes, const char **type, ps_error_t *err)
{
    pthread_once (&s_once, s_load);
    if (header->type != MSGPACK_OBJECT_MAP)
        return ps_error_set (err, PS_EPROTO, "header: expected a map, got %s",
                             s_object_name (header));
    //  The version comes first: a peer speaking another version may use
    //  other fields, and deserves to hear about the version, not a field.
    const msgpack_object *version = ps_obj_get (header, "version");
    if (!version)
        return ps_error_set (err, PS_EPROTO, "header: missing field 'version'");
    if (version->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return ps_error_set (err, PS_EPROTO, "header: field 'version' is a %s, expected uint",
                             s_object_name (version));
    if (version->via.u64 != PS_PROTOCOL_VERSION)
        return ps_error_set (err, PS_EVERSION, "header: protocol version %llu is not supported, expected %d",
                             (unsigned long long) version->via.u64, PS_PROTOCOL_VERSION);
    const msgpack_object *name = ps_obj_get (header, "type");
    if (!name || name->type != MSGPACK_OBJECT_STR)
        return ps_error_set (err, PS_EPROTO, "header: field 'type' %s",
                             name ? "is not a str" : "is missing");
    const s_message_t *msg = s_message (name->via.str.ptr, name->via.str.size);
    if (!msg)
        return ps_error_set (err, PS_EPROTO, "header: unknown message type '%.*s'",
                             (int) name->via.str.size, name->via.str.ptr);
    char path [256];
    snprintf (path, sizeof path, "%s", msg->name);
    //  The header map holds the common fields and the body fields together.
    int rc = s_check_map (s_schema.header, header, msg->body, path, sizeof path, err);
    if (rc == PS_OK)
        rc = s_check_map (msg->body, header, s_schema.header, path, sizeof path, err);
    if (rc == PS_OK)
        rc = s_check_frames (msg, header, frame_sizes, nframes, err);
    if (rc == PS_OK)
        *type = msg->name;
    return rc;
}

const char *
ps_schema_reply_type (const char *type)
{
    pthread_once (&s_once, s_load);
    const s_message_t *msg = s_message (type, strlen (type));
    return msg ? msg->reply : NULL;
}
