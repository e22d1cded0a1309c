//  The generated codec (ps_proto.h, from schemas/gen_codec.py) against the
//  schema's test vectors (schemas/vectors.json, made by an independent
//  msgpack implementation): every valid vector decodes into the typed
//  struct and encodes back to the very same header bytes, so old and new
//  processes put the same bytes on the wire; the dispatch table and its
//  authorization column say what protocol.json says.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_msg.h"
#include "ps_plan.h"
#include "ps_proto.h"

static const char *s_vectors_path;

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

//  Whether a msgpack header holds a float-typed field written as an
//  integer, which the codec reads as a double and, as every sender of
//  ours does, writes back as a float64: the one way a valid header does
//  not come back byte for byte. The vector says so with "canonical".
static void
test_vectors_round_trip (void **state)
{
    (void) state;
    json_error_t jerr;
    json_t *root = json_load_file (s_vectors_path, 0, &jerr);
    if (!root)
        fail_msg ("cannot load %s: %s", s_vectors_path, jerr.text);
    ps_msg_t *msg = ps_msg_new ();
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init (&sbuf);
    msgpack_packer pk;
    msgpack_packer_init (&pk, &sbuf, msgpack_sbuffer_write);
    size_t index, valid = 0, canonical = 0;
    json_t *vector;
    json_array_foreach (json_object_get (root, "vectors"), index, vector) {
        if (strcmp (json_string_value (json_object_get (vector, "expect")), "ok") != 0)
            continue;
        const char *name = json_string_value (json_object_get (vector, "name"));
        json_t *frames = json_object_get (vector, "frames");
        size_t nframes = json_array_size (frames);
        const void **data = calloc (nframes, sizeof *data);
        size_t *sizes = calloc (nframes, sizeof *sizes);
        assert_true (data && sizes);
        for (size_t i = 0; i < nframes; i++)
            data [i] = s_unhex (json_string_value (json_array_get (frames, i)), &sizes [i]);
        assert_int_equal (ps_msg_set (msg, data, sizes, nframes), 0);
        ps_error_t err = { 0, "" };
        if (ps_msg_decode (msg, &err))
            fail_msg ("vector '%s': %s", name, err.msg);
        const ps_proto_t *proto = ps_msg_proto (msg);
        assert_string_equal (ps_proto_info [proto->type].name,
                             json_string_value (json_object_get (vector, "type")));
        msgpack_sbuffer_clear (&sbuf);
        assert_int_equal (ps_proto_encode (proto, &pk), 0);
        //  The header, or the canonical form the vector states for it.
        const char *expect_hex = json_string_value (json_object_get (vector, "canonical"));
        if (expect_hex)
            canonical++;
        else
            expect_hex = json_string_value (json_array_get (frames, 0));
        size_t expect_len;
        uint8_t *expect = s_unhex (expect_hex, &expect_len);
        if (sbuf.size != expect_len || memcmp (sbuf.data, expect, expect_len) != 0) {
            char *text = malloc (2 * sbuf.size + 1);
            assert_non_null (text);
            for (size_t i = 0; i < sbuf.size; i++)
                sprintf (text + 2 * i, "%02x", (uint8_t) sbuf.data [i]);
            fail_msg ("vector '%s': encoded as\n%s\nexpected\n%s", name, text, expect_hex);
        }
        //  Tensor descriptors and their frames: the frames are not copied.
        if (ps_proto_info [proto->type].tensors)
            for (size_t i = 0; i < ps_msg_tensor_count (msg); i++)
                assert_memory_equal (ps_msg_tensor (msg, i), data [i + 1], sizes [i + 1]);
        free (expect);
        for (size_t i = 0; i < nframes; i++)
            free ((void *) data [i]);
        free (data);
        free (sizes);
        valid++;
    }
    assert_true (valid >= 15);
    assert_true (canonical <= 1);
    msgpack_sbuffer_destroy (&sbuf);
    ps_msg_destroy (&msg);
    json_decref (root);
}

//  Typed fields read what the vector means: a push's step and tensors, a
//  restore's optional parts, a heartbeat's optional done.
static void
test_typed_fields (void **state)
{
    (void) state;
    //  {"version":1,"type":"push","id":7,"step":12,"worker":1,
    //   "tensors":[{"var":"b","part":1,"shape":[4],"bytes":16}]}
    ps_proto_t out = { .type = PS_PROTO_PUSH, .id = 7 };
    ps_proto_tensor_t tensor = { "b", 1, { 1, (uint64_t []) { 4 } }, 16 };
    out.push.step = 12;
    out.push.worker = 1;
    out.push.tensors.count = 1;
    out.push.tensors.items = &tensor;
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init (&sbuf);
    msgpack_packer pk;
    msgpack_packer_init (&pk, &sbuf, msgpack_sbuffer_write);
    assert_int_equal (ps_proto_encode (&out, &pk), 0);
    float values [4] = { 1, 2, 3, 4 };
    const void *frames [] = { sbuf.data, values };
    size_t sizes [] = { sbuf.size, sizeof values };
    ps_msg_t *msg = ps_msg_new ();
    assert_int_equal (ps_msg_set (msg, frames, sizes, 2), 0);
    ps_error_t err;
    assert_int_equal (ps_msg_decode (msg, &err), 0);
    const ps_proto_t *in = ps_msg_proto (msg);
    assert_int_equal (in->type, PS_PROTO_PUSH);
    assert_int_equal (in->id, 7);
    assert_int_equal (in->push.step, 12);
    assert_false (in->push.has_generation);
    assert_int_equal (in->push.tensors.count, 1);
    assert_string_equal (in->push.tensors.items [0].var, "b");
    assert_int_equal (in->push.tensors.items [0].shape.items [0], 4);

    //  A frame shorter than its description is refused, naming it.
    sizes [1] = 12;
    assert_int_equal (ps_msg_set (msg, frames, sizes, 2), 0);
    assert_int_equal (ps_msg_decode (msg, &err), PS_ESHAPE);
    assert_non_null (strstr (err.msg, "push: tensors[0]: frame has 12 bytes"));
    assert_int_equal (ps_msg_id (msg), 7);
    ps_msg_destroy (&msg);
    msgpack_sbuffer_destroy (&sbuf);
}

//  A string holding a NUL byte would read as a shorter name in C: refused.
static void
test_nul_in_string (void **state)
{
    (void) state;
    //  {"version":1,"type":"snapshot","id":1,"dir":"a\0b"}
    const uint8_t header [] = {
        0x84, 0xa7, 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x01,
        0xa4, 't', 'y', 'p', 'e', 0xa8, 's', 'n', 'a', 'p', 's', 'h', 'o', 't',
        0xa2, 'i', 'd', 0x01, 0xa3, 'd', 'i', 'r', 0xa3, 'a', 0, 'b' };
    const void *frames [] = { header };
    size_t sizes [] = { sizeof header };
    ps_msg_t *msg = ps_msg_new ();
    assert_int_equal (ps_msg_set (msg, frames, sizes, 1), 0);
    ps_error_t err;
    assert_int_equal (ps_msg_decode (msg, &err), PS_EPROTO);
    assert_non_null (strstr (err.msg, "snapshot: dir: expected str without NUL bytes"));
    ps_msg_destroy (&msg);
}

//  The dispatch table: names, replies, frames, and who may send what.
static void
test_dispatch_table (void **state)
{
    (void) state;
    for (int type = 1; type < PS_PROTO_NTYPES; type++) {
        const ps_proto_info_t *info = &ps_proto_info [type];
        assert_int_equal (ps_proto_lookup (info->name, strlen (info->name)), type);
        assert_true (info->senders != 0);
        if (info->reply != PS_PROTO_NONE) {
            char expect [64];
            snprintf (expect, sizeof expect, "%s_ok", info->name);
            const char *reply = ps_proto_info [info->reply].name;
            assert_true (strcmp (reply, expect) == 0 || strcmp (reply, "work") == 0);
        }
    }
    assert_int_equal (ps_proto_lookup ("nonsense", 8), PS_PROTO_NONE);
    assert_int_equal (ps_proto_info [PS_PROTO_PUSH].reply, PS_PROTO_PUSH_OK);
    assert_true (ps_proto_info [PS_PROTO_PUSH_PULL].tensors);
    assert_false (ps_proto_info [PS_PROTO_PULL].tensors);
    //  The authorization column, as ps-server enforces it.
    assert_true (ps_proto_may_send (PS_PROTO_PUSH, "worker:3"));
    assert_false (ps_proto_may_send (PS_PROTO_PUSH, "evaluator:0"));
    assert_true (ps_proto_may_send (PS_PROTO_PULL, "evaluator:0"));
    assert_false (ps_proto_may_send (PS_PROTO_PULL, "chief:0"));
    assert_true (ps_proto_may_send (PS_PROTO_CREATE, "chief:0"));
    assert_false (ps_proto_may_send (PS_PROTO_CREATE, "worker:0"));
    assert_true (ps_proto_may_send (PS_PROTO_STATS, "ps:1"));
    assert_false (ps_proto_may_send (PS_PROTO_STATS, NULL));
    assert_false (ps_proto_may_send (PS_PROTO_SHUTDOWN, "chiefs:0"));
    assert_false (ps_proto_may_send (PS_PROTO_SHUTDOWN, "chief"));
    assert_string_equal (ps_proto_info [PS_PROTO_PULL].senders_text, "a worker or an evaluator");
}

//  Encode msg, a message without tensor frames, and decode it back: the
//  decoder's verdict, with its message in err.
static int
s_round_trip (const ps_proto_t *msg, ps_error_t *err)
{
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init (&sbuf);
    msgpack_packer pk;
    msgpack_packer_init (&pk, &sbuf, msgpack_sbuffer_write);
    assert_int_equal (ps_proto_encode (msg, &pk), 0);
    const void *frames [] = { sbuf.data };
    size_t sizes [] = { sbuf.size };
    ps_msg_t *in = ps_msg_new ();
    assert_int_equal (ps_msg_set (in, frames, sizes, 1), 0);
    int rc = ps_msg_decode (in, err);
    ps_msg_destroy (&in);
    msgpack_sbuffer_destroy (&sbuf);
    return rc;
}

//  The bounds of protocol.json are inclusive: a value on the bound is
//  taken and the first one past it is refused as invalid, naming the
//  field and the bound (schemas/vectors.json has more that are refused).
static void
test_bounds_edges (void **state)
{
    (void) state;
    ps_error_t err;
    ps_proto_t work = { .type = PS_PROTO_WORK, .id = 1,
                        .work = { .kind = "train", .step = 1, .generation = 1,
                                  .has_round = true, .round = 1,
                                  .has_round_steps = true, .round_steps = UINT32_MAX } };
    assert_int_equal (s_round_trip (&work, &err), 0);
    work.work.round_steps = (uint64_t) UINT32_MAX + 1;
    assert_int_equal (s_round_trip (&work, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "work: round_steps: 4294967296 is out of bounds, "
                                      "expected 1 to 4294967295"));
    work.work.round_steps = 1;
    work.work.round = 0;
    assert_int_equal (s_round_trip (&work, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "work: round: 0 is out of bounds"));
    work.work.round = 1;

    //  A signed bound: the ring's root is -1 (none) or a rank.
    ps_proto_ring_spec_t ring = { .members = { 1, (const char *[]) { "tcp://127.0.0.1:1" } },
                                  .tasks = { 1, (uint64_t []) { 0 } }, .root = -1, .load = "" };
    work.work.kind = "ring";
    work.work.has_ring = true;
    work.work.ring = ring;
    assert_int_equal (s_round_trip (&work, &err), 0);
    work.work.ring.root = -2;
    assert_int_equal (s_round_trip (&work, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "work: ring.root: -2 is out of bounds, expected at least -1"));
    work.work.ring.root = 0;
    work.work.kind = "dance";
    assert_int_equal (s_round_trip (&work, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "work: kind: 'dance' is out of bounds, expected one of "
                                      "train, eval, ring, save, wait, stop"));

    //  Floats that must be finite: 0 and the largest double are, NaN and
    //  the infinities are not.
    ps_proto_t opt = { .type = PS_PROTO_SET_OPTIMIZER, .id = 2,
                       .set_optimizer.optimizer = { .kind = "sgd", .has_lr = true, .lr = 0 } };
    assert_int_equal (s_round_trip (&opt, &err), 0);
    opt.set_optimizer.optimizer.lr = -1.7976931348623157e308;
    assert_int_equal (s_round_trip (&opt, &err), 0);
    const double bad [] = { NAN, HUGE_VAL, -HUGE_VAL };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        opt.set_optimizer.optimizer.lr = bad [i];
        assert_int_equal (s_round_trip (&opt, &err), PS_EINVAL);
        assert_non_null (strstr (err.msg, "set_optimizer: optimizer.lr: "));
        assert_non_null (strstr (err.msg, "expected a finite number"));
    }

    //  A float with a minimum: 0 is taken, anything below refused.
    ps_proto_report_t report = { .kind = "train", .status = "done", .step = 1, .compute_ms = 0,
                                 .comm_ms = 0 };
    ps_proto_t request = { .type = PS_PROTO_WORK_REQUEST, .id = 3,
                           .work_request = { .reports = { 1, &report }, .want = 1 } };
    assert_int_equal (s_round_trip (&request, &err), 0);
    report.comm_ms = -1e-9;
    assert_int_equal (s_round_trip (&request, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "work_request: reports[0].comm_ms: "));

    //  String lengths in bytes: a variable name of 127 bytes is taken,
    //  one of 128 refused; the fence's generation starts at 1.
    char name [129];
    memset (name, 'v', 128);
    name [127] = 0;
    ps_proto_partref_t part = { name, UINT32_MAX };
    ps_proto_t pull = { .type = PS_PROTO_PULL, .id = 4, .pull.parts = { 1, &part } };
    assert_int_equal (s_round_trip (&pull, &err), 0);
    name [127] = 'v';
    name [128] = 0;
    assert_int_equal (s_round_trip (&pull, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "pull: parts[0].var: a str of 128 bytes is out of bounds"));
    ps_proto_t fence = { .type = PS_PROTO_FENCE, .id = 5, .fence.generation = 1 };
    assert_int_equal (s_round_trip (&fence, &err), 0);
    fence.fence.generation = 0;
    assert_int_equal (s_round_trip (&fence, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "fence: generation: 0 is out of bounds, expected at least 1"));
}

//  A job plan described for register_ok, encoded, decoded and read back is
//  the plan it was; a plan the worker cannot use is refused naming why.
static void
test_plan_round_trip (void **state)
{
    (void) state;
    int64_t splits [] = { 0, 3, 5 };
    int servers [] = { 1, 0 };
    char *endpoints [] = { "tcp://127.0.0.1:5000", "tcp://127.0.0.1:5001" };
    ps_plan_var_t var = { "dense/kernel", { 0 }, 2, splits, servers };
    ps_shape_set (&var.shape, (int64_t []) { 5, 4 }, 2, NULL);
    ps_plan_t plan = { .model = "{}", .batch_size = 32, .seed = 7, .data_dir = "/data",
                       .train_limit = 100, .test_limit = 10, .threads = 2, .device = "cpu",
                       .nservers = 2, .servers = endpoints, .nvars = 1, .vars = &var,
                       .client_timeout_ms = 5000, .steps_per_epoch = 3, .total_steps = 9,
                       .eval_batch = 64, .overlap = true };
    ps_opt_config_default (&plan.optimizer, PS_OPT_ADAM);
    ps_proto_t msg = { .type = PS_PROTO_REGISTER_OK, .id = 3,
                       .register_ok = { 11, 100, 1000, true } };
    ps_plan_to_proto (&plan, &msg.register_ok.plan);
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init (&sbuf);
    msgpack_packer pk;
    msgpack_packer_init (&pk, &sbuf, msgpack_sbuffer_write);
    assert_int_equal (ps_proto_encode (&msg, &pk), 0);
    ps_plan_proto_release (&msg.register_ok.plan);
    const void *frames [] = { sbuf.data };
    size_t sizes [] = { sbuf.size };
    ps_msg_t *in = ps_msg_new ();
    assert_int_equal (ps_msg_set (in, frames, sizes, 1), 0);
    ps_error_t err;
    assert_int_equal (ps_msg_decode (in, &err), 0);
    const ps_proto_register_ok_t *reply = &ps_msg_proto (in)->register_ok;
    assert_true (reply->has_plan);
    ps_plan_t back;
    assert_int_equal (ps_plan_read (&back, &reply->plan, &err), 0);
    assert_string_equal (back.model, "{}");
    assert_string_equal (back.servers [1], "tcp://127.0.0.1:5001");
    assert_int_equal (back.nvars, 1);
    assert_string_equal (back.vars [0].var, "dense/kernel");
    assert_int_equal (back.vars [0].shape.dims [1], 4);
    assert_int_equal (back.vars [0].splits [1], 3);
    assert_int_equal (back.vars [0].servers [0], 1);
    assert_true (back.overlap);
    assert_false (back.mirrored);
    assert_int_equal (back.optimizer.kind, PS_OPT_ADAM);
    //  An image plan reads as idx data with no files; a Criteo plan keeps
    //  its files, and one without them is refused.
    assert_string_equal (back.data_format, "idx");
    assert_null (back.train_data);
    ps_plan_release (&back);

    ps_proto_plan_t text;
    strcpy (plan.data_format, "criteo");
    plan.train_data = "/data/train.txt";
    plan.test_data = "/data/test.txt.gz";
    ps_plan_to_proto (&plan, &text);
    assert_int_equal (ps_plan_read (&back, &text, &err), 0);
    assert_string_equal (back.data_format, "criteo");
    assert_string_equal (back.train_data, "/data/train.txt");
    assert_string_equal (back.test_data, "/data/test.txt.gz");
    ps_plan_release (&back);
    text.has_test_data = false;
    assert_int_equal (ps_plan_read (&back, &text, &err), PS_EPROTO);
    assert_non_null (strstr (err.msg, "data_format criteo needs both 'train_data' and 'test_data'"));
    ps_plan_proto_release (&text);
    plan.data_format [0] = 0;
    plan.train_data = plan.test_data = NULL;

    //  A partition placed on a server the plan does not list.
    servers [0] = 2;
    ps_proto_plan_t bad;
    ps_plan_to_proto (&plan, &bad);
    assert_int_equal (ps_plan_read (&back, &bad, &err), PS_EPROTO);
    assert_non_null (strstr (err.msg, "partition 0 is on server 2 of 2"));
    ps_plan_proto_release (&bad);
    ps_msg_destroy (&in);
    msgpack_sbuffer_destroy (&sbuf);
}

int
main (int argc, char *argv [])
{
    s_vectors_path = argc > 1 ? argv [1] : "schemas/vectors.json";
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_vectors_round_trip),
        cmocka_unit_test (test_typed_fields),
        cmocka_unit_test (test_nul_in_string),
        cmocka_unit_test (test_dispatch_table),
        cmocka_unit_test (test_plan_round_trip),
        cmocka_unit_test (test_bounds_edges),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
