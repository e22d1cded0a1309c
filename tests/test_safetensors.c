//  Unit tests for safetensors files (common/store/ps_safetensors.c): a
//  tiny file compared byte for byte with one worked out by hand from the
//  format's description (float32, and uint64 ids), a round trip (with a
//  tensor filled through the writer's buffer in several chunks), and the
//  refusals of the writer
//  (non-string metadata, a name twice, an unwritable path) and of the
//  reader (short, a header length past the end, another dtype, data
//  offsets that do not hold the tensor). Each case works in its own
//  temporary directory.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness_case.h"
#include "ps_safetensors.h"

typedef struct {
    char dir [HARNESS_DIR_SIZE];
    char path [HARNESS_DIR_SIZE + 32];
} fixture_t;

static int
s_setup (void **state)
{
    int rc = harness_dir_setup (state, sizeof (fixture_t));
    fixture_t *f = *state;
    snprintf (f->path, sizeof f->path, "%s/w.safetensors", f->dir);
    return rc;
}

//  Tensor "a" of shape [2] holding 1 and -2, metadata {"k": "v"}.
static const float s_values [2] = { 1.0f, -2.0f };

static ps_tensor_t
s_tensor (const char *name)
{
    ps_tensor_t t = { .name = name, .shape = { .rank = 1, .dims = { 2 } }, .data = s_values };
    return t;
}

//  The header is 79 bytes of compact JSON, padded with one space to 80;
//  then 1.0f (00 00 80 3f) and -2.0f (00 00 00 c0), little-endian.
static const char s_header [] =
    "{\"__metadata__\":{\"k\":\"v\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
    "\"data_offsets\":[0,8]}} ";

static void
test_bytes (void **state)
{
    fixture_t *f = *state;
    ps_tensor_t t = s_tensor ("a");
    json_t *meta = json_pack ("{s:s}", "k", "v");
    ps_error_t err;
    harness_ok (ps_safetensors_write (f->path, &t, 1, meta, &err), &err);
    json_decref (meta);
    uint8_t want [8 + 80 + 8] = { 80, 0, 0, 0, 0, 0, 0, 0 };
    assert_int_equal (strlen (s_header), 80);
    memcpy (want + 8, s_header, 80);
    static const uint8_t data [8] = { 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0 };
    memcpy (want + 88, data, 8);
    harness_file_is (f->path, want, sizeof want);
    //  Only the file: no temporary one is left beside it.
    assert_int_equal (harness_dir_entries (f->dir), 1);
}

//  A uint64 tensor ("U64", as an embedding table's ids): the header worked
//  out by hand (57 bytes of JSON, 7 spaces), then the ids little-endian.
static void
test_u64_bytes (void **state)
{
    fixture_t *f = *state;
    static const uint64_t ids [3] = { 1, (UINT64_C (1) << 40) + 5, UINT64_MAX };
    harness_filler_t filler = { .bytes = (const uint8_t *) ids };
    ps_tensor_t t = { .name = "ids", .shape = { .rank = 1, .dims = { 3 } },
                      .dtype = PS_DTYPE_U64, .fill = harness_fill, .fill_arg = &filler };
    ps_error_t err;
    harness_ok (ps_safetensors_write (f->path, &t, 1, NULL, &err), &err);
    static const char header [] =
        "{\"ids\":{\"dtype\":\"U64\",\"shape\":[3],\"data_offsets\":[0,24]}}       ";
    uint8_t want [8 + 64 + 24] = { 64 };
    assert_int_equal (strlen (header), 64);
    memcpy (want + 8, header, 64);
    static const uint8_t data [24] = { 1, 0, 0, 0, 0, 0, 0, 0,  5, 0, 0, 0, 0, 1, 0, 0,
                                       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
    memcpy (want + 72, data, 24);
    harness_file_is (f->path, want, sizeof want);
    assert_int_equal (filler.next, 24);
    //  The reader (ps-worker predict's) takes float32 only, naming the rest.
    assert_null (ps_safetensors_read (f->path, &err));
    assert_non_null (strstr (err.msg, "tensor \"ids\" has dtype U64"));
}

//  A float32 tensor larger than the writer's buffer comes through in
//  several fills, and reads back the same.
static void
test_filled_round_trip (void **state)
{
    fixture_t *f = *state;
    enum { N = 600 * 1000 };
    float *values = malloc (N * sizeof (float));
    assert_non_null (values);
    for (int i = 0; i < N; i++)
        values [i] = (float) i * 0.5f - 7;
    harness_filler_t filler = { .bytes = (const uint8_t *) values };
    ps_tensor_t t [2] = {
        s_tensor ("a"),
        { .name = "emb/embeddings", .shape = { .rank = 2, .dims = { N / 3, 3 } },
          .fill = harness_fill, .fill_arg = &filler },
    };
    ps_error_t err;
    harness_ok (ps_safetensors_write (f->path, t, 2, NULL, &err), &err);
    assert_true (filler.calls > 1);
    assert_int_equal (filler.next, (uint64_t) N * sizeof (float));
    ps_safetensors_t *file = ps_safetensors_read (f->path, &err);
    assert_non_null (file);
    const ps_tensor_t *e = ps_safetensors_find (file, "emb/embeddings");
    assert_non_null (e);
    assert_true (ps_shape_equal (&e->shape, &t [1].shape));
    assert_memory_equal (e->data, values, N * sizeof (float));
    assert_memory_equal (ps_safetensors_find (file, "a")->data, s_values, sizeof s_values);
    ps_safetensors_destroy (&file);
    free (values);
}

static void
test_round_trip (void **state)
{
    fixture_t *f = *state;
    float big [2 * 3 * 4];
    for (int i = 0; i < 24; i++)
        big [i] = (float) i * 0.25f - 3;
    ps_tensor_t t [2] = {
        { .name = "conv2d/kernel", .shape = { .rank = 3, .dims = { 2, 3, 4 } }, .data = big },
        s_tensor ("conv2d/bias"),
    };
    ps_error_t err;
    harness_ok (ps_safetensors_write (f->path, t, 2, NULL, &err), &err);
    ps_safetensors_t *file = ps_safetensors_read (f->path, &err);
    assert_non_null (file);
    assert_int_equal (ps_safetensors_count (file), 2);
    assert_string_equal (ps_safetensors_tensor (file, 0)->name, "conv2d/kernel");
    const ps_tensor_t *k = ps_safetensors_find (file, "conv2d/kernel");
    assert_true (ps_shape_equal (&k->shape, &t [0].shape));
    assert_memory_equal (k->data, big, sizeof big);
    assert_memory_equal (ps_safetensors_find (file, "conv2d/bias")->data, s_values,
                         sizeof s_values);
    assert_null (ps_safetensors_find (file, "dense/kernel"));
    assert_null (ps_safetensors_metadata (file, "model"));
    ps_safetensors_destroy (&file);
    assert_null (file);
}

static void
test_write_refusals (void **state)
{
    fixture_t *f = *state;
    ps_tensor_t t [2] = { s_tensor ("a"), s_tensor ("a") };
    ps_error_t err;
    assert_int_equal (ps_safetensors_write (f->path, t, 2, NULL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "\"a\": named twice"));
    json_t *meta = json_pack ("{s:i}", "step", 3);
    assert_int_equal (ps_safetensors_write (f->path, t, 1, meta, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "\"step\" is not a string"));
    json_decref (meta);
    char path [HARNESS_DIR_SIZE + 64];
    snprintf (path, sizeof path, "%s/no/such/dir/w.safetensors", f->dir);
    assert_int_equal (ps_safetensors_write (path, t, 1, NULL, &err), PS_EIO);
    assert_non_null (strstr (err.msg, path));
    assert_int_equal (harness_dir_entries (f->dir), 0);
}

//  Write bytes as the file and check that reading it fails with code and a
//  message holding words.
static void
s_refused (const fixture_t *f, const void *bytes, size_t len, int code, const char *words)
{
    harness_spit (f->path, bytes, len);
    ps_error_t err;
    assert_null (ps_safetensors_read (f->path, &err));
    assert_int_equal (err.code, code);
    if (!strstr (err.msg, words) || !strstr (err.msg, f->path))
        fail_msg ("expected \"%s\" and the path in: %s", words, err.msg);
}

static void
test_read_refusals (void **state)
{
    fixture_t *f = *state;
    uint8_t file [8 + 80 + 8] = { 80 };
    memcpy (file + 8, s_header, 80);
    s_refused (f, file, 5, PS_ECORRUPT, "shorter than");
    file [0] = 200;
    s_refused (f, file, sizeof file, PS_ECORRUPT, "does not fit the file");
    file [0] = 80;
    s_refused (f, file, sizeof file - 1, PS_ECORRUPT, "tensor \"a\": data_offsets");
    memcpy (file + 8 + 40, "F16", 3);
    s_refused (f, file, sizeof file, PS_ECORRUPT, "tensor \"a\" has dtype F16");
    memcpy (file + 8 + 40, "F32", 3);
    file [8] = '[';
    s_refused (f, file, sizeof file, PS_ECORRUPT, "not a JSON object");
    ps_error_t err;
    char path [HARNESS_DIR_SIZE + 32];
    snprintf (path, sizeof path, "%s/absent", f->dir);
    assert_null (ps_safetensors_read (path, &err));
    assert_int_equal (err.code, PS_ENOTFOUND);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_bytes, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_round_trip, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_u64_bytes, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_filled_round_trip, s_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_write_refusals, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_read_refusals, s_setup, harness_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
