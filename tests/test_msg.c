//  The message codec against the schema's test vectors (schemas/vectors.json,
//  made by an independent msgpack implementation): every valid vector must
//  decode to its stated meaning, every malformed one must be refused with its
//  stated error code and a message naming the problem, and headers built by
//  ps_writer must be byte for byte what the other implementation wrote.

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
#include "ps_schema.h"

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

//  Convert a decoded msgpack object to JSON, to compare with the vector's
//  statement of meaning.
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
            json_t *decoded = s_to_json (ps_msg_header (msg));
            if (!json_equal (decoded, json_object_get (vector, "decoded"))) {
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

//  Headers packed by ps_writer are canonical msgpack, the same bytes as the
//  reference implementation produced.
static void
test_writer_matches_vectors (void **state)
{
    (void) state;
    json_t *root = s_load_vectors ();
    ps_writer_t writer;
    ps_writer_init (&writer, "ping", 1, 0);
    s_assert_header_bytes (&writer, s_vector (root, "ping"));

    ps_writer_reset (&writer, "pull", 7, 1);
    ps_pack_key (&writer.pk, "parts");
    msgpack_pack_array (&writer.pk, 2);
    const char *vars [] = { "dense/kernel", "dense/bias" };
    for (int i = 0; i < 2; i++) {
        msgpack_pack_map (&writer.pk, 2);
        ps_pack_key (&writer.pk, "var");
        ps_pack_str (&writer.pk, vars [i]);
        ps_pack_key (&writer.pk, "part");
        msgpack_pack_uint32 (&writer.pk, (uint32_t) i);
    }
    s_assert_header_bytes (&writer, s_vector (root, "pull of two partitions"));

    ps_writer_reset (&writer, "push", 7, 3);
    ps_pack_key (&writer.pk, "step");
    msgpack_pack_uint64 (&writer.pk, 12);
    ps_pack_key (&writer.pk, "worker");
    msgpack_pack_uint32 (&writer.pk, 1);
    ps_pack_key (&writer.pk, "tensors");
    msgpack_pack_array (&writer.pk, 2);
    ps_shape_t shapes [2];
    ps_shape_set (&shapes [0], (int64_t []) { 2, 3 }, 2, NULL);
    ps_shape_set (&shapes [1], (int64_t []) { 4 }, 1, NULL);
    for (int i = 0; i < 2; i++) {
        msgpack_pack_map (&writer.pk, 4);
        ps_pack_key (&writer.pk, "var");
        ps_pack_str (&writer.pk, vars [i]);
        ps_pack_key (&writer.pk, "part");
        msgpack_pack_uint32 (&writer.pk, (uint32_t) i);
        ps_pack_key (&writer.pk, "shape");
        ps_pack_shape (&writer.pk, &shapes [i]);
        ps_pack_key (&writer.pk, "bytes");
        msgpack_pack_uint64 (&writer.pk, (uint64_t) ps_shape_count (&shapes [i]) * 4);
    }
    s_assert_header_bytes (&writer, s_vector (root, "push of two tensors"));
    ps_writer_fini (&writer);
    json_decref (root);
}

//  Every request type of the schema names a reply type that exists.
static void
test_reply_types (void **state)
{
    (void) state;
    const char *requests [] = { "ping", "create", "pull", "push", "push_pull", "set_optimizer",
                                "stats", "snapshot", "restore", "shutdown" };
    for (size_t i = 0; i < sizeof requests / sizeof requests [0]; i++) {
        const char *reply = ps_schema_reply_type (requests [i]);
        assert_non_null (reply);
        char expect [64];
        snprintf (expect, sizeof expect, "%s_ok", requests [i]);
        assert_string_equal (reply, expect);
    }
    assert_null (ps_schema_reply_type ("push_ok"));
    assert_null (ps_schema_reply_type ("error"));
    assert_null (ps_schema_reply_type ("nonsense"));
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
