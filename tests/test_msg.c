//  The message codec against the schema's test vectors (schemas/vectors.json,
//  made by an independent msgpack implementation): every valid vector must
//  decode to its stated meaning (the typed message, encoded again and read
//  back as plain msgpack, holds what the vector says), every malformed one
//  must be refused with its stated error code and a message naming the
//  problem, and headers that ps_writer encodes from typed messages must be
//  byte for byte what the other implementation wrote.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_msg.h"
#include "ps_proto.h"

static const char *s_vectors_path;

static json_t *
s_load_vectors (void)
{
    json_error_t jerr;
    json_t *root = json_load_file (s_vectors_path, 0, &jerr);
    if (!root)
        fail_msg ("cannot load %s: %s", s_vectors_path, jerr.text);
    return json_object_get (root, "vectors") ? root : NULL;
}

static uint8_t *
s_unhex (const char *hex, size_t *len)
{
    *len = strlen (hex) / 2;
    uint8_t *bytes = malloc (*len + 1);
    assert_non_null (bytes);
    for (size_t i = 0; i < *len; i++) {
        unsigned value;
        assert_int_equal (sscanf (hex + 2 * i, "%2x", &value), 1);
        bytes [i] = (uint8_t) value;
    }
    return bytes;
}

//  Convert a msgpack object to JSON, to compare with the vector's statement
//  of meaning.
static json_t *
s_to_json (const msgpack_object *obj)
{
    switch (obj->type) {
        case MSGPACK_OBJECT_BOOLEAN:          return json_boolean (obj->via.boolean);
        case MSGPACK_OBJECT_POSITIVE_INTEGER: return json_integer ((json_int_t) obj->via.u64);
        case MSGPACK_OBJECT_NEGATIVE_INTEGER: return json_integer (obj->via.i64);
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:          return json_real (obj->via.f64);
        case MSGPACK_OBJECT_STR:              return json_stringn (obj->via.str.ptr, obj->via.str.size);
        case MSGPACK_OBJECT_ARRAY: {
            json_t *array = json_array ();
            for (uint32_t i = 0; i < obj->via.array.size; i++)
                json_array_append_new (array, s_to_json (&obj->via.array.ptr [i]));
            return array;
        }
        case MSGPACK_OBJECT_MAP: {
            json_t *map = json_object ();
            for (uint32_t i = 0; i < obj->via.map.size; i++) {
                const msgpack_object_str *key = &obj->via.map.ptr [i].key.via.str;
                char name [256];
                snprintf (name, sizeof name, "%.*s", (int) key->size, key->ptr);
                json_object_set_new (map, name, s_to_json (&obj->via.map.ptr [i].val));
            }
            return map;
        }
        default:
            return json_null ();
    }
}

//  Whether a and b mean the same: numbers by value (the codec writes a
//  float-typed field that came as an integer back as a float64, as every
//  sender of ours does), the rest as json_equal says.
static bool
s_same (const json_t *a, const json_t *b)
{
    if (json_is_number (a) && json_is_number (b))
        return json_number_value (a) == json_number_value (b);
    if (json_is_object (a) && json_is_object (b)) {
        if (json_object_size (a) != json_object_size (b))
            return false;
        const char *key;
        const json_t *value;
        json_object_foreach ((json_t *) a, key, value)
            if (!s_same (value, json_object_get (b, key)))
                return false;
        return true;
    }
    if (json_is_array (a) && json_is_array (b)) {
        if (json_array_size (a) != json_array_size (b))
            return false;
        for (size_t i = 0; i < json_array_size (a); i++)
            if (!s_same (json_array_get (a, i), json_array_get (b, i)))
                return false;
        return true;
    }
    return json_equal ((json_t *) a, (json_t *) b);
}

//  What the typed message means, as JSON: it is encoded again by the
//  generated codec and the bytes read back as plain msgpack.
static json_t *
s_meaning (const ps_proto_t *proto)
{
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init (&sbuf);
    msgpack_packer pk;
    msgpack_packer_init (&pk, &sbuf, msgpack_sbuffer_write);
    assert_int_equal (ps_proto_encode (proto, &pk), 0);
    msgpack_unpacked unpacked;
    msgpack_unpacked_init (&unpacked);
    size_t offset = 0;
    assert_int_equal (msgpack_unpack_next (&unpacked, sbuf.data, sbuf.size, &offset),
                      MSGPACK_UNPACK_SUCCESS);
    json_t *meaning = s_to_json (&unpacked.data);
    msgpack_unpacked_destroy (&unpacked);
    msgpack_sbuffer_destroy (&sbuf);
    return meaning;
}

static void
test_vectors (void **state)
{
    (void) state;
    json_t *root = s_load_vectors ();
    json_t *vectors = json_object_get (root, "vectors");
    assert_true (json_array_size (vectors) >= 30);
    ps_msg_t *msg = ps_msg_new ();
    size_t index;
    json_t *vector;
    size_t valid = 0, invalid = 0;
    json_array_foreach (vectors, index, vector) {
        const char *name = json_string_value (json_object_get (vector, "name"));
        json_t *frames = json_object_get (vector, "frames");
        size_t nframes = json_array_size (frames);
        const void **data = calloc (nframes, sizeof *data);
        size_t *sizes = calloc (nframes, sizeof *sizes);
        for (size_t i = 0; i < nframes; i++)
            data [i] = s_unhex (json_string_value (json_array_get (frames, i)), &sizes [i]);
        assert_int_equal (ps_msg_set (msg, data, sizes, nframes), 0);
        ps_error_t err = { 0, "" };
        int rc = ps_msg_decode (msg, &err);
        const char *expect = json_string_value (json_object_get (vector, "expect"));
        if (strcmp (expect, "ok") == 0) {
            if (rc != 0)
                fail_msg ("vector '%s': expected ok, got %s: %s", name, ps_error_name (rc), err.msg);
            assert_string_equal (ps_msg_type (msg), json_string_value (json_object_get (vector, "type")));
            json_t *decoded = s_meaning (ps_msg_proto (msg));
            if (!s_same (decoded, json_object_get (vector, "decoded"))) {
                char *text = json_dumps (decoded, JSON_COMPACT);
                fail_msg ("vector '%s': decoded as %s", name, text);
            }
            json_decref (decoded);
            //  Tensor frames are readable as aligned floats, equal to the bytes.
            for (size_t i = 0; i < ps_msg_tensor_count (msg); i++) {
                const float *tensor = ps_msg_tensor (msg, i);
                assert_int_equal ((uintptr_t) tensor % sizeof (float), 0);
                assert_memory_equal (tensor, data [i + 1], sizes [i + 1]);
            }
            valid++;
        }
        else {
            if (rc == 0 || strcmp (ps_error_name (rc), expect) != 0)
                fail_msg ("vector '%s': expected %s, got %s: %s", name, expect,
                          rc ? ps_error_name (rc) : "ok", err.msg);
            const char *contains = json_string_value (json_object_get (vector, "contains"));
            if (contains && !strstr (err.msg, contains))
                fail_msg ("vector '%s': message '%s' does not say '%s'", name, err.msg, contains);
            invalid++;
        }
        for (size_t i = 0; i < nframes; i++)
            free ((void *) data [i]);
        free (data);
        free (sizes);
    }
    assert_true (valid >= 15);
    assert_true (invalid >= 15);
    ps_msg_destroy (&msg);
    json_decref (root);
}

static json_t *
s_vector (json_t *root, const char *name)
{
    size_t index;
    json_t *vector;
    json_array_foreach (json_object_get (root, "vectors"), index, vector)
        if (strcmp (json_string_value (json_object_get (vector, "name")), name) == 0)
            return vector;
    fail_msg ("no vector '%s'", name);
    return NULL;
}

static void
s_assert_header_bytes (ps_writer_t *writer, json_t *vector)
{
    size_t len;
    uint8_t *expect = s_unhex (json_string_value (json_array_get (json_object_get (vector, "frames"), 0)), &len);
    assert_int_equal (writer->sbuf.size, len);
    assert_memory_equal (writer->sbuf.data, expect, len);
    free (expect);
}

//  Headers that ps_writer encodes from typed messages are canonical
//  msgpack, the same bytes as the reference implementation produced.
static void
test_writer_matches_vectors (void **state)
{
    (void) state;
    json_t *root = s_load_vectors ();
    ps_writer_t writer;
    ps_writer_init (&writer);
    ps_writer_encode (&writer, &(ps_proto_t) { .type = PS_PROTO_PING, .id = 1 });
    s_assert_header_bytes (&writer, s_vector (root, "ping"));

    ps_proto_partref_t parts [] = { { "dense/kernel", 0 }, { "dense/bias", 1 } };
    ps_proto_t pull = { .type = PS_PROTO_PULL, .id = 7, .pull.parts = { 2, parts } };
    ps_writer_encode (&writer, &pull);
    s_assert_header_bytes (&writer, s_vector (root, "pull of two partitions"));

    ps_proto_tensor_t tensors [] = {
        { "dense/kernel", 0, { 2, (uint64_t []) { 2, 3 } }, 2 * 3 * 4 },
        { "dense/bias", 1, { 1, (uint64_t []) { 4 } }, 4 * 4 },
    };
    ps_proto_t push = { .type = PS_PROTO_PUSH, .id = 7,
                        .push = { .step = 12, .worker = 1, .tensors = { 2, tensors } } };
    ps_writer_encode (&writer, &push);
    s_assert_header_bytes (&writer, s_vector (root, "push of two tensors"));
    ps_writer_fini (&writer);
    json_decref (root);
}

//  Every request type to a server names its reply type, NAME_ok; replies
//  and errors name none, and an unknown name is no type.
static void
test_reply_types (void **state)
{
    (void) state;
    const char *requests [] = { "ping", "create", "pull", "push", "push_pull", "set_optimizer",
                                "stats", "snapshot", "fence", "restore", "shutdown" };
    for (size_t i = 0; i < sizeof requests / sizeof requests [0]; i++) {
        ps_proto_type_t type = ps_proto_lookup (requests [i], strlen (requests [i]));
        assert_int_not_equal (type, PS_PROTO_NONE);
        ps_proto_type_t reply = ps_proto_info [type].reply;
        assert_int_not_equal (reply, PS_PROTO_NONE);
        char expect [64];
        snprintf (expect, sizeof expect, "%s_ok", requests [i]);
        assert_string_equal (ps_proto_info [reply].name, expect);
    }
    assert_int_equal (ps_proto_info [PS_PROTO_PUSH_OK].reply, PS_PROTO_NONE);
    assert_int_equal (ps_proto_info [PS_PROTO_ERROR].reply, PS_PROTO_NONE);
    assert_int_equal (ps_proto_lookup ("nonsense", 8), PS_PROTO_NONE);
}

//  A header frame above the limit is refused before it is parsed.
static void
test_oversized_header (void **state)
{
    (void) state;
    size_t size = PS_MSG_MAX_HEADER + 1;
    char *big = calloc (1, size);
    const void *frames [] = { big };
    ps_msg_t *msg = ps_msg_new ();
    assert_int_equal (ps_msg_set (msg, frames, &size, 1), 0);
    ps_error_t err;
    assert_int_equal (ps_msg_decode (msg, &err), PS_EPROTO);
    assert_non_null (strstr (err.msg, "limit"));
    ps_msg_destroy (&msg);
    free (big);
}

int
main (int argc, char *argv [])
{
    s_vectors_path = argc > 1 ? argv [1] : "schemas/vectors.json";
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_vectors),
        cmocka_unit_test (test_writer_matches_vectors),
        cmocka_unit_test (test_reply_types),
        cmocka_unit_test (test_oversized_header),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
