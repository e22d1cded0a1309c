//  Writes the seed corpora of the fuzz targets, at build time:
//
//    fuzz_seeds VECTORS_JSON OUTDIR STAMP
//
//  writes OUTDIR/<target>/ for msg, server, snapshot, checkpoint and idx,
//  then creates the file STAMP. The wire seeds come from schemas/vectors.json
//  (each vector one message) and from messages encoded here by the
//  generated codec: for msg one of every message type, each optional field
//  set; for the server sessions of requests (create, then pushes, pulls,
//  snapshots, restores, a probe of the root, a fence, a shutdown). The
//  file seeds are made by the code that writes those files: snapshots of
//  partitions of every optimizer kind (ps_partition_save), checkpoints
//  (ps_checkpoint_commit) and IDX files raw and gzipped, so no binary
//  seed is committed. The text seeds
//  (TF_CONFIG strings, job files, model specs) are files in the source
//  tree; tests/fuzz/run.sh adds them.

#include "fuzz_frames.h"
#include "fuzz_scratch.h"
#include "ps_checkpoint.h"
#include "ps_msg.h"
#include "ps_partition.h"
#include "ps_plan.h"
#include "ps_proto_conv.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

static const char *s_out;

static void __attribute__ ((format (printf, 1, 2), noreturn))
s_die (const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    fprintf (stderr, "fuzz_seeds: ");
    vfprintf (stderr, fmt, args);
    fprintf (stderr, "\n");
    va_end (args);
    exit (1);
}

static FILE *
s_create (const char *target, const char *name)
{
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/%s/%s", s_out, target, name);
    FILE *file = fopen (path, "wbe");
    if (!file)
        s_die ("cannot create %s: %s", path, strerror (errno));
    return file;
}

static void
s_close (FILE *file)
{
    if (fclose (file) != 0)
        s_die ("cannot write a seed: %s", strerror (errno));
}

static void
s_frame (FILE *file, const void *data, size_t size, bool last)
{
    if (fuzz_frames_write (file, data, size, last))
        s_die ("a frame of %zu bytes does not fit the framing", size);
}

//  Read a whole file into a new buffer.
static char *
s_slurp (const char *path, size_t *size)
{
    FILE *file = fopen (path, "rbe");
    if (!file)
        s_die ("cannot open %s: %s", path, strerror (errno));
    char *data = NULL;
    size_t used = 0, cap = 0;
    while (!feof (file)) {
        if (used == cap) {
            cap = cap ? 2 * cap : 4096;
            data = realloc (data, cap);
            if (!data)
                abort ();
        }
        used += fread (data + used, 1, cap - used, file);
        if (ferror (file))
            s_die ("cannot read %s", path);
    }
    fclose (file);
    *size = used;
    return data;
}

//  ---------------------------------------------------------------------
//  Wire seeds from the test vectors

static size_t
s_unhex (const char *hex, uint8_t *out, size_t len)
{
    size_t n = strlen (hex) / 2;
    if (n > len)
        s_die ("a vector frame of %zu bytes is too long", n);
    for (size_t i = 0; i < n; i++) {
        unsigned byte;
        if (sscanf (hex + 2 * i, "%2x", &byte) != 1)
            s_die ("bad hex in a vector frame");
        out [i] = (uint8_t) byte;
    }
    return n;
}

static void
s_vectors (const char *path)
{
    json_error_t jerr;
    json_t *root = json_load_file (path, 0, &jerr);
    json_t *vectors = json_object_get (root, "vectors");
    if (!json_is_array (vectors))
        s_die ("%s: no \"vectors\" array (%s)", path, root ? "" : jerr.text);
    size_t index;
    json_t *vector;
    json_array_foreach (vectors, index, vector) {
        json_t *frames = json_object_get (vector, "frames");
        char name [32];
        snprintf (name, sizeof name, "vector-%02zu", index);
        FILE *msg = s_create ("msg", name);
        FILE *server = s_create ("server", name);
        size_t count = json_array_size (frames);
        for (size_t i = 0; i < count; i++) {
            static uint8_t bytes [32768];
            size_t size = s_unhex (json_string_value (json_array_get (frames, i)),
                                   bytes, sizeof bytes);
            s_frame (msg, bytes, size, i + 1 == count);
            s_frame (server, bytes, size, i + 1 == count);
        }
        s_close (msg);
        s_close (server);
    }
    json_decref (root);
}

//  ---------------------------------------------------------------------
//  Messages built with the generated codec

typedef struct {
    const char *var;
    int64_t rows, cols;
} s_var_t;

static const s_var_t s_kernel = { "dense/kernel", 4, 3 };
static const s_var_t s_bias = { "dense/bias", 3, 0 };
static const s_var_t s_big = { "big", 1024, 80 };      //  over the server's inline limit
//  16 bytes: the ids frame or the rows frame of a sparse entry of two ids
//  and rows of width 2.
static const s_var_t s_sparse16 = { "sparse", 4, 0 };

#define S_MAX_VARS  2

static uint64_t s_id;

//  The message types a seed of the msg target has been written for.
static bool s_covered [PS_PROTO_NTYPES];

//  var's shape as the protocol's "shape", in storage (two entries).
static ps_proto_uint_array_t
s_dims (const s_var_t *var, uint64_t *storage)
{
    storage [0] = (uint64_t) var->rows;
    storage [1] = (uint64_t) var->cols;
    return (ps_proto_uint_array_t) { var->cols ? 2 : 1, storage };
}

static size_t
s_floats (const s_var_t *var)
{
    return (size_t) (var->rows * (var->cols ? var->cols : 1));
}

//  Write msg, encoded by the generated codec, then one tensor frame per
//  entry of grads (the message's tensors, in order), to file.
static void
s_send (FILE *file, const ps_proto_t *msg, const s_var_t *const *grads, size_t ngrads)
{
    ps_writer_t writer;
    ps_writer_init (&writer);
    ps_writer_encode (&writer, msg);
    s_frame (file, writer.sbuf.data, writer.sbuf.size, ngrads == 0);
    ps_writer_fini (&writer);
    for (size_t i = 0; i < ngrads; i++) {
        static float grad [4096];
        if (s_floats (grads [i]) > sizeof grad / sizeof grad [0])
            s_die ("a gradient of %s is too large for a seed", grads [i]->var);
        for (size_t k = 0; k < s_floats (grads [i]); k++)
            grad [k] = 0.25f * (float) k - 1.0f;
        s_frame (file, grad, s_floats (grads [i]) * sizeof (float), i + 1 == ngrads);
    }
}

//  A seed of the msg target holding msg alone. The generated decoder must
//  take it back, frames included: a seed it refuses would leave that
//  type's decoder to chance.
static void
s_message (const ps_proto_t *msg, const s_var_t *const *grads, size_t ngrads)
{
    char name [64];
    snprintf (name, sizeof name, "typed-%s", ps_proto_info [msg->type].name);
    FILE *file = s_create ("msg", name);
    s_send (file, msg, grads, ngrads);
    s_close (file);

    ps_writer_t writer;
    ps_writer_init (&writer);
    ps_writer_encode (&writer, msg);
    static float zeros [4096];
    const void *frames [1 + S_MAX_VARS] = { writer.sbuf.data };
    size_t sizes [1 + S_MAX_VARS] = { writer.sbuf.size };
    assert (ngrads <= S_MAX_VARS);
    for (size_t i = 0; i < ngrads; i++) {
        frames [i + 1] = zeros;
        sizes [i + 1] = s_floats (grads [i]) * sizeof (float);
    }
    ps_msg_t *decoded = ps_msg_new ();
    ps_error_t err;
    if (ps_msg_set (decoded, frames, sizes, 1 + ngrads))
        s_die ("cannot hold the frames of the seed %s", name);
    if (ps_msg_decode (decoded, &err))
        s_die ("the seed %s does not decode: %s", name, err.msg);
    ps_msg_destroy (&decoded);
    ps_writer_fini (&writer);
    s_covered [msg->type] = true;
}

static void
s_create_vars (FILE *file, const s_var_t *const *vars, size_t count)
{
    ps_proto_partition_t parts [S_MAX_VARS];
    uint64_t dims [S_MAX_VARS][2], rows [S_MAX_VARS][2];
    assert (count <= S_MAX_VARS);
    for (size_t i = 0; i < count; i++) {
        rows [i][0] = 0;
        rows [i][1] = (uint64_t) vars [i]->rows;
        parts [i] = (ps_proto_partition_t) {
            .var = vars [i]->var, .part = 0, .shape = s_dims (vars [i], dims [i]),
            .rows = { 2, rows [i] },
            .init = i % 2 ? (ps_proto_init_t) { .kind = "constant", .has_value = true, .value = 0.5 }
                          : (ps_proto_init_t) { .kind = "glorot_uniform", .has_seed = true,
                                                .seed = 42 } };
    }
    ps_proto_t msg = { .type = PS_PROTO_CREATE, .id = ++s_id,
                       .create.partitions = { count, parts } };
    s_send (file, &msg, NULL, 0);
}

//  A push or push-pull of step (generation 0: none) of vars.
static void
s_push (FILE *file, ps_proto_type_t type, uint64_t step, uint64_t generation,
        const s_var_t *const *vars, size_t count)
{
    ps_proto_tensor_t tensors [S_MAX_VARS];
    uint64_t dims [S_MAX_VARS][2];
    assert (count <= S_MAX_VARS);
    for (size_t i = 0; i < count; i++)
        tensors [i] = (ps_proto_tensor_t) { vars [i]->var, 0, s_dims (vars [i], dims [i]),
                                            s_floats (vars [i]) * sizeof (float) };
    ps_proto_t msg = { .type = type, .id = ++s_id };
    if (type == PS_PROTO_PUSH)
        msg.push = (ps_proto_push_t) { .step = step, .worker = 1, .has_generation = generation,
                                       .generation = generation,
                                       .tensors = { count, tensors } };
    else
        msg.push_pull = (ps_proto_push_pull_t) { .step = step, .worker = 1,
                                                 .has_generation = generation,
                                                 .generation = generation,
                                                 .tensors = { count, tensors } };
    s_send (file, &msg, vars, count);
}

static void
s_pull (FILE *file, const s_var_t *const *vars, size_t count)
{
    ps_proto_partref_t parts [S_MAX_VARS];
    assert (count <= S_MAX_VARS);
    for (size_t i = 0; i < count; i++)
        parts [i] = (ps_proto_partref_t) { vars [i]->var, 0 };
    ps_proto_t msg = { .type = PS_PROTO_PULL, .id = ++s_id, .pull.parts = { count, parts } };
    s_send (file, &msg, NULL, 0);
}

//  A request of a type with no fields.
static void
s_simple (FILE *file, ps_proto_type_t type)
{
    s_send (file, &(ps_proto_t) { .type = type, .id = ++s_id }, NULL, 0);
}

static void
s_set_optimizer (FILE *file, const char *kind, bool nesterov)
{
    ps_proto_t msg = { .type = PS_PROTO_SET_OPTIMIZER, .id = ++s_id,
                       .set_optimizer.optimizer = { .kind = kind, .has_lr = true, .lr = 0.01,
                                                    .has_momentum = nesterov, .momentum = 0.9,
                                                    .has_nesterov = nesterov,
                                                    .nesterov = nesterov } };
    s_send (file, &msg, NULL, 0);
}

static void
s_snapshot (FILE *file, const char *dir)
{
    s_send (file, &(ps_proto_t) { .type = PS_PROTO_SNAPSHOT, .id = ++s_id,
                                  .snapshot.dir = dir }, NULL, 0);
}

//  A restore of dir, of var alone when given.
static void
s_restore (FILE *file, const char *dir, const s_var_t *var)
{
    ps_proto_partref_t part = { var ? var->var : NULL, 0 };
    ps_proto_t msg = { .type = PS_PROTO_RESTORE, .id = ++s_id,
                       .restore = { .dir = dir, .has_parts = var != NULL,
                                    .parts = { 1, &part } } };
    s_send (file, &msg, NULL, 0);
}

static void
s_fence (FILE *file, uint64_t generation)
{
    s_send (file, &(ps_proto_t) { .type = PS_PROTO_FENCE, .id = ++s_id,
                                  .fence.generation = generation }, NULL, 0);
}

static void
s_sessions (void)
{
    const s_var_t *both [] = { &s_kernel, &s_bias };
    const s_var_t *kernel [] = { &s_kernel };
    const s_var_t *big [] = { &s_big };

    FILE *file = s_create ("server", "session-train");
    s_create_vars (file, both, 2);
    s_push (file, PS_PROTO_PUSH, 1, 0, both, 2);
    s_pull (file, both, 2);
    s_push (file, PS_PROTO_PUSH_PULL, 2, 0, both, 2);
    s_push (file, PS_PROTO_PUSH, 1, 0, kernel, 1);
    s_simple (file, PS_PROTO_STATS);
    s_simple (file, PS_PROTO_PING);
    s_close (file);

    //  Embedding tables: one of rows of width 2 (s_sparse16: two ids, or
    //  two rows, per frame), pushed, pulled and push-pulled.
    file = s_create ("server", "session-sparse");
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "emb", 2);
    ps_proto_tablespec_t tablespec;
    ps_proto_tablespec_set (&tablespec, &spec);
    s_send (file, &(ps_proto_t) { .type = PS_PROTO_TABLE_CREATE, .id = ++s_id,
                                  .table_create = { { 1, &tablespec }, 0, 1 } }, NULL, 0);
    ps_proto_sparse_ref_t sref = { "emb", 2, 2 };
    const s_var_t *sparse [] = { &s_sparse16, &s_sparse16 };
    s_send (file, &(ps_proto_t) { .type = PS_PROTO_SPARSE_PUSH, .id = ++s_id,
                                  .sparse_push = { 1, 0, false, 0, { 1, &sref } } }, sparse, 2);
    s_send (file, &(ps_proto_t) { .type = PS_PROTO_SPARSE_PULL, .id = ++s_id,
                                  .sparse_pull.tables = { 1, &sref } }, sparse, 1);
    s_send (file, &(ps_proto_t) { .type = PS_PROTO_SPARSE_PUSH_PULL, .id = ++s_id,
                                  .sparse_push_pull = { 2, 0, false, 0, { 1, &sref },
                                                        { 0, NULL } } }, sparse, 2);
    s_simple (file, PS_PROTO_STATS);
    s_close (file);

    file = s_create ("server", "session-optimizer");
    s_create_vars (file, both, 2);
    s_set_optimizer (file, "adam", false);
    s_push (file, PS_PROTO_PUSH_PULL, 1, 0, both, 2);
    s_set_optimizer (file, "momentum", true);
    s_push (file, PS_PROTO_PUSH, 3, 0, kernel, 1);
    s_simple (file, PS_PROTO_STATS);
    s_close (file);

    file = s_create ("server", "session-snapshot");
    s_create_vars (file, both, 2);
    s_push (file, PS_PROTO_PUSH, 1, 0, both, 2);
    s_snapshot (file, "snap");
    s_push (file, PS_PROTO_PUSH, 2, 0, both, 2);
    s_restore (file, "snap", NULL);
    s_restore (file, "snap", &s_bias);
    s_pull (file, both, 2);
    s_send (file, &(ps_proto_t) { .type = PS_PROTO_PROBE_ROOT, .id = ++s_id,
                                  .probe_root = { ".probe-ps0-1", "ps:0 1" } }, NULL, 0);
    s_close (file);

    file = s_create ("server", "session-fence");
    s_create_vars (file, both, 2);
    s_fence (file, 2);
    s_push (file, PS_PROTO_PUSH, 1, 1, kernel, 1);
    s_push (file, PS_PROTO_PUSH, 1, 2, kernel, 1);
    s_close (file);

    file = s_create ("server", "session-pool");
    s_create_vars (file, big, 1);
    s_pull (file, big, 1);
    s_close (file);

    file = s_create ("server", "session-shutdown");
    s_simple (file, PS_PROTO_PING);
    s_simple (file, PS_PROTO_SHUTDOWN);
    s_simple (file, PS_PROTO_PING);
    s_close (file);
}

//  One seed of the msg target per message type, every optional field of
//  it set, so the fuzzer starts from each of the generated decoders.
static void
s_messages (void)
{
    const s_var_t *both [] = { &s_kernel, &s_bias };
    uint64_t dims [2][2];
    ps_proto_partref_t refs [] = { { s_kernel.var, 0 }, { s_bias.var, 0 } };
    ps_proto_tensor_t tensors [] = {
        { s_kernel.var, 0, s_dims (&s_kernel, dims [0]), s_floats (&s_kernel) * 4 },
        { s_bias.var, 0, s_dims (&s_bias, dims [1]), s_floats (&s_bias) * 4 },
    };
    ps_proto_pulled_t pulled [] = {
        { s_kernel.var, 0, tensors [0].shape, tensors [0].bytes, 5 },
        { s_bias.var, 0, tensors [1].shape, tensors [1].bytes, 5 },
    };
    ps_proto_applied_t applied [] = { { s_kernel.var, 0, 6, false }, { s_bias.var, 0, 6, true } };
    uint64_t rows [] = { 0, 4 };
    ps_proto_partition_t partition = {
        s_kernel.var, 0, tensors [0].shape, { 2, rows },
        { .kind = "normal", .has_seed = true, .seed = 3, .has_value = true, .value = 1,
          .has_low = true, .low = -1, .has_high = true, .high = 1, .has_mean = true, .mean = 0,
          .has_stddev = true, .stddev = 0.05 } };
    ps_proto_part_stats_t part_stats = { s_kernel.var, 0, tensors [0].shape, { 2, rows },
                                         9, 1, 10, 480, 960, 0 };
    ps_proto_snap_file_t files [] = { { s_kernel.var, 0, "dense_kernel-0.snap", 512, 77, 9 } };
    ps_opt_config_t adam;
    ps_opt_config_default (&adam, PS_OPT_ADAM);
    ps_proto_optimizer_t optimizer;
    ps_proto_optimizer_set (&optimizer, &adam);

    //  The job plan of a register_ok, described by the code that sends one.
    int64_t splits [] = { 0, 2, 4 };
    int servers [] = { 0, 1 };
    char *endpoints [] = { "tcp://127.0.0.1:5000", "tcp://127.0.0.1:5001" };
    ps_plan_var_t var = { "dense/kernel", { 0 }, 2, splits, servers };
    ps_error_t err;
    if (ps_shape_set (&var.shape, (int64_t []) { 4, 3 }, 2, &err))
        s_die ("ps_shape_set: %s", err.msg);
    ps_plan_t plan = { .model = "{}", .batch_size = 32, .seed = 7, .data_dir = "/data",
                       .train_limit = 100, .test_limit = 10, .threads = 2, .device = "cpu",
                       .nservers = 2, .servers = endpoints, .nvars = 1, .vars = &var,
                       .client_timeout_ms = 5000, .steps_per_epoch = 3, .total_steps = 9,
                       .eval_batch = 64, .overlap = true, .sync = true, .optimizer = adam };
    ps_proto_plan_t plan_proto;
    ps_plan_to_proto (&plan, &plan_proto);

    ps_proto_report_t reports [] = {
        { .kind = "train", .status = "done", .step = 4, .generation = 1, .loss = 2.5,
          .count = 32, .applied = 2, .compute_ms = 1.5, .comm_ms = 0.5 },
        { .kind = "eval", .status = "failed", .step = 5, .generation = 1, .correct = 80,
          .count = 100, .has_update = true, .update = 7, .has_checksum = true,
          .checksum = 0xabc, .has_order = true, .order = 2, .has_error = true,
          .error = "nonfinite: a gradient holds NaN" },
    };
    const char *members [] = { "tcp://127.0.0.1:6000", "tcp://127.0.0.1:6001" };
    uint64_t tasks [] = { 0, 1 }, steps [] = { 8, 9 };

    ps_proto_t all [] = {
        { .type = PS_PROTO_PING },
        { .type = PS_PROTO_PING_OK, .ping_ok = { "ps:0", 2 } },
        { .type = PS_PROTO_CREATE, .create.partitions = { 1, &partition } },
        { .type = PS_PROTO_CREATE_OK, .create_ok = { 1, 1 } },
        { .type = PS_PROTO_PULL, .pull.parts = { 2, refs } },
        { .type = PS_PROTO_PULL_OK, .pull_ok.tensors = { 2, pulled } },
        { .type = PS_PROTO_PUSH, .push = { 12, 1, true, 2, true, 3, true, 2, { 2, tensors } } },
        { .type = PS_PROTO_PUSH_OK, .push_ok.applied = { 2, applied } },
        { .type = PS_PROTO_PUSH_PULL, .push_pull = { 13, 1, true, 2, { 2, tensors } } },
        { .type = PS_PROTO_PUSH_PULL_OK, .push_pull_ok = { { 2, applied }, { 2, pulled } } },
        { .type = PS_PROTO_SET_OPTIMIZER, .set_optimizer.optimizer = optimizer },
        { .type = PS_PROTO_SET_OPTIMIZER_OK, .set_optimizer_ok.partitions = 2 },
        { .type = PS_PROTO_STATS },
        { .type = PS_PROTO_STATS_OK, .stats_ok = { { 1, &part_stats }, 40, 2, 0, 1, 0, { 0, NULL } } },
        { .type = PS_PROTO_SNAPSHOT, .snapshot.dir = "snap" },
        { .type = PS_PROTO_SNAPSHOT_OK, .snapshot_ok.files = { 1, files } },
        { .type = PS_PROTO_FENCE, .fence.generation = 2 },
        { .type = PS_PROTO_FENCE_OK },
        { .type = PS_PROTO_RESTORE, .restore = { .dir = "snap", .has_parts = true,
                                                  .parts = { 1, refs } } },
        { .type = PS_PROTO_RESTORE_OK, .restore_ok.files = { 1, files } },
        { .type = PS_PROTO_SHUTDOWN },
        { .type = PS_PROTO_SHUTDOWN_OK },
        { .type = PS_PROTO_REGISTER, .register_ = { "worker", 1, 0x1234, "", 4242 } },
        { .type = PS_PROTO_REGISTER_OK, .register_ok = { 77, 100, 3000, true, plan_proto } },
        { .type = PS_PROTO_HEARTBEAT, .heartbeat = { 0x1234, true, true } },
        { .type = PS_PROTO_WORK_REQUEST, .work_request = { { 2, reports }, 1 } },
        { .type = PS_PROTO_WORK, .work = {
            .kind = "ring", .step = 4, .epoch = 1, .batch = 3, .generation = 2, .wait_ms = 0,
            .has_ring = true, .ring = { 1, { 2, members }, { 2, tasks }, -1, "even" },
            .has_update = true, .update = 6, .has_steps = true, .steps = { 2, steps },
            .has_examples = true, .examples = 64, .has_lr = true, .lr = 0.001,
            .has_shard = true, .shard = 1, .has_shards = true, .shards = 2,
            .has_dir = true, .dir = "ckpt", .has_order = true, .order = 3,
            .has_round = true, .round = 2, .has_round_steps = true, .round_steps = 2 } },
        { .type = PS_PROTO_ABORT, .abort.generation = 3 },
        { .type = PS_PROTO_ERROR, .error = { "not_found", "no partition dense/kernel/1" } },
    };
    for (size_t i = 0; i < sizeof all / sizeof all [0]; i++) {
        all [i].id = ++s_id;
        bool frames = ps_proto_info [all [i].type].tensors;
        s_message (&all [i], frames ? both : NULL, frames ? 2 : 0);
    }
    ps_plan_proto_release (&plan_proto);

    //  Embedding tables: one entry of two ids and rows of width 2 (16
    //  bytes each), so an entry's ids and rows frames are s_sparse16's.
    const s_var_t *sparse [] = { &s_sparse16, &s_sparse16 };
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, "emb", 2);
    ps_proto_tablespec_t tablespec;
    ps_proto_tablespec_set (&tablespec, &spec);
    ps_proto_sparse_ref_t sref = { "emb", 2, 2 };
    ps_proto_sparse_applied_t sapplied = { "emb", 2, 1, 0, false };
    ps_proto_t tables [] = {
        { .type = PS_PROTO_TABLE_CREATE, .table_create = { { 1, &tablespec }, 0, 1 } },
        { .type = PS_PROTO_TABLE_CREATE_OK, .table_create_ok = { 1, 0 } },
        { .type = PS_PROTO_SPARSE_PULL, .sparse_pull.tables = { 1, &sref } },
        { .type = PS_PROTO_SPARSE_PULL_OK, .sparse_pull_ok.tables = { 1, &sref } },
        { .type = PS_PROTO_SPARSE_PUSH, .sparse_push = { 4, 1, true, 2, { 1, &sref } } },
        { .type = PS_PROTO_SPARSE_PUSH_OK, .sparse_push_ok.applied = { 1, &sapplied } },
        { .type = PS_PROTO_SPARSE_PUSH_PULL, .sparse_push_pull = { 5, 1, true, 2, { 1, &sref },
                                                                   { 0, NULL } } },
        { .type = PS_PROTO_SPARSE_PUSH_PULL_OK, .sparse_push_pull_ok = { { 1, &sapplied },
                                                                         { 1, &sref } } },
        { .type = PS_PROTO_PROBE_ROOT, .probe_root = { ".probe-ps0-1", "ps:0 1" } },
        { .type = PS_PROTO_PROBE_ROOT_OK, .probe_root_ok.root = "/shared/ckpt" },
    };
    for (size_t i = 0; i < sizeof tables / sizeof tables [0]; i++) {
        tables [i].id = ++s_id;
        size_t nframes = ps_proto_info [tables [i].type].tensors;
        if (tables [i].type == PS_PROTO_SPARSE_PUSH || tables [i].type == PS_PROTO_SPARSE_PUSH_PULL)
            nframes = 2;
        s_message (&tables [i], nframes ? sparse : NULL, nframes);
    }
    //  A message type added to protocol.json needs its seed here.
    for (int type = 1; type < PS_PROTO_NTYPES; type++)
        if (!s_covered [type])
            s_die ("no msg seed of type %s", ps_proto_info [type].name);
}

//  ---------------------------------------------------------------------
//  Snapshots and checkpoints

//  A [4, 3] partition (rows 1..3 of a [5, 3] variable) with the optimizer
//  kind given, after pushes of steps 1, 2, 5 and 9, so its ledger has
//  steps above its watermark.
static ps_partition_t *
s_partition (const char *var, ps_opt_kind_t kind)
{
    ps_shape_t shape;
    ps_error_t err;
    ps_shape_set (&shape, (int64_t []) { 5, 3 }, 2, &err);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_GLOROT_UNIFORM);
    init.seed = 7;
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, kind);
    ps_partition_t *part = ps_partition_new (var, 0, &shape, 1, 5, &init, &opt, &err);
    if (!part)
        s_die ("ps_partition_new: %s", err.msg);
    float grad [12];
    for (int i = 0; i < 12; i++)
        grad [i] = 0.1f * (float) (i - 6);
    uint64_t steps [] = { 1, 2, 5, 9 };
    for (size_t i = 0; i < sizeof steps / sizeof steps [0]; i++) {
        uint64_t version;
        if (ps_partition_reserve_step (part, steps [i], &err)
        ||  ps_partition_push (part, steps [i], grad, NULL, &version, &err) < 0)
            s_die ("ps_partition_push: %s", err.msg);
    }
    return part;
}

static void
s_snapshots (void)
{
    static const char *names [] = { "sgd", "momentum", "adagrad", "adam" };
    char dir [PATH_MAX];
    fuzz_scratch_mkdir ("snapshots", dir, sizeof dir);
    for (int kind = PS_OPT_SGD; kind <= PS_OPT_ADAM; kind++) {
        ps_partition_t *part = s_partition ("dense/kernel", (ps_opt_kind_t) kind);
        char file [PS_NAME_MAX * 3 + 32], path [PATH_MAX * 2], seed [64];
        uint64_t bytes, version;
        uint32_t crc;
        ps_error_t err;
        if (ps_partition_save (part, dir, file, sizeof file, &bytes, &crc, &version, &err))
            s_die ("ps_partition_save: %s", err.msg);
        ps_partition_destroy (&part);
        snprintf (path, sizeof path, "%s/%s", dir, file);
        size_t size;
        char *data = s_slurp (path, &size);
        snprintf (seed, sizeof seed, "%s.snap", names [kind]);
        FILE *out = s_create ("snapshot", seed);
        if (fwrite (data, 1, size, out) != size)
            s_die ("cannot write a snapshot seed");
        s_close (out);
        free (data);
    }
}

//  Commit a checkpoint of step with two partitions under root; ckpt
//  receives its directory.
static void
s_commit (const char *root, uint64_t step, char *ckpt, size_t len)
{
    char tmpdir [PATH_MAX];
    ps_error_t err;
    if (ps_checkpoint_begin (root, step, tmpdir, sizeof tmpdir, &err))
        s_die ("ps_checkpoint_begin: %s", err.msg);
    ps_snap_file_t files [2] = { { 0 } };
    const char *vars [] = { "dense/kernel", "dense/bias" };
    for (int i = 0; i < 2; i++) {
        ps_partition_t *part = s_partition (vars [i], PS_OPT_ADAM);
        files [i].server = i;
        snprintf (files [i].var, sizeof files [i].var, "%s", vars [i]);
        if (ps_partition_save (part, tmpdir, files [i].file, sizeof files [i].file,
                               &files [i].bytes, &files [i].crc, &files [i].version, &err))
            s_die ("ps_partition_save: %s", err.msg);
        ps_partition_destroy (&part);
    }
    json_t *manifest = json_pack ("{s:I, s:s, s:i}", "global_step", (json_int_t) step,
                                  "mode", "async", "servers", 2);
    if (ps_checkpoint_commit (root, step, tmpdir, manifest, files, 2, 3, ckpt, len, &err))
        s_die ("ps_checkpoint_commit: %s", err.msg);
    json_decref (manifest);
}

//  Append the files of dir to the archive, named prefix + their name
//  (prefix "" or "ckpt-.../"); the manifest is cut to cut bytes when cut
//  is not 0.
static void
s_archive_dir (FILE *out, const char *dir, const char *prefix, size_t cut)
{
    char manifest [PATH_MAX];
    snprintf (manifest, sizeof manifest, "%s/%s", dir, PS_CHECKPOINT_MANIFEST);
    json_error_t jerr;
    json_t *loaded = json_load_file (manifest, 0, &jerr);
    json_t *files = json_object_get (loaded, "files");
    const char *names [3] = { PS_CHECKPOINT_MANIFEST, NULL, NULL };
    for (size_t i = 0; i < 2; i++)
        names [i + 1] = json_string_value (json_object_get (json_array_get (files, i), "file"));
    for (size_t i = 0; i < 3; i++) {
        if (!names [i])
            s_die ("%s lists fewer files than written", manifest);
        char name [256], path [PATH_MAX * 2];
        snprintf (name, sizeof name, "%s%s", prefix, names [i]);
        snprintf (path, sizeof path, "%s/%s", dir, names [i]);
        size_t size;
        char *data = s_slurp (path, &size);
        if (i == 0 && cut)
            size = cut < size ? cut : size;
        s_frame (out, name, strlen (name), false);
        s_frame (out, data, size, false);
        free (data);
    }
    json_decref (loaded);
}

static void
s_checkpoints (void)
{
    char root [PATH_MAX], ckpt5 [PATH_MAX], ckpt9 [PATH_MAX];
    fuzz_scratch_mkdir ("checkpoints", root, sizeof root);
    s_commit (root, 5, ckpt5, sizeof ckpt5);
    s_commit (root, 9, ckpt9, sizeof ckpt9);
    //  One checkpoint in its ckpt- directory; the same files at the top
    //  of the root; and two checkpoints whose newer one has a torn
    //  manifest, so that the reader falls back to the older.
    FILE *out = s_create ("checkpoint", "one");
    s_archive_dir (out, ckpt5, "ckpt-000000000005/", 0);
    s_close (out);
    out = s_create ("checkpoint", "flat");
    s_archive_dir (out, ckpt5, "", 0);
    s_close (out);
    out = s_create ("checkpoint", "torn-newest");
    s_archive_dir (out, ckpt5, "ckpt-000000000005/", 0);
    s_archive_dir (out, ckpt9, "ckpt-000000000009/", 40);
    s_close (out);
}

//  ---------------------------------------------------------------------
//  IDX files

static void
s_idx (const char *name, const uint32_t *dims, int rank, bool gzip)
{
    uint8_t data [256];
    size_t size = 0;
    data [size++] = 0;
    data [size++] = 0;
    data [size++] = 0x08;
    data [size++] = (uint8_t) rank;
    size_t count = 1;
    for (int i = 0; i < rank; i++) {
        for (int k = 3; k >= 0; k--)
            data [size++] = (uint8_t) (dims [i] >> (8 * k));
        count *= dims [i];
    }
    for (size_t i = 0; i < count; i++)
        data [size++] = (uint8_t) (i * 37);
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/idx/%s", s_out, name);
    if (gzip) {
        gzFile file = gzopen (path, "wb9");
        if (!file || gzwrite (file, data, (unsigned) size) != (int) size
        ||  gzclose (file) != Z_OK)
            s_die ("cannot write %s", path);
    }
    else {
        FILE *file = s_create ("idx", name);
        if (fwrite (data, 1, size, file) != size)
            s_die ("cannot write %s", path);
        s_close (file);
    }
}

static void
s_idx_files (void)
{
    uint32_t labels [] = { 10 };
    uint32_t images [] = { 2, 4, 4 };
    uint32_t four [] = { 1, 2, 3, 2 };
    s_idx ("labels-idx1-ubyte", labels, 1, false);
    s_idx ("labels-idx1-ubyte.gz", labels, 1, true);
    s_idx ("images-idx3-ubyte", images, 3, false);
    s_idx ("images-idx3-ubyte.gz", images, 3, true);
    s_idx ("rank4-ubyte", four, 4, false);
}

//  ---------------------------------------------------------------------

static void
s_make_dir (const char *target)
{
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/%s", s_out, target);
    if (mkdir (path, 0755) != 0 && errno != EEXIST)
        s_die ("cannot make %s: %s", path, strerror (errno));
}

int
main (int argc, char *argv [])
{
    if (argc != 4)
        s_die ("usage: fuzz_seeds VECTORS_JSON OUTDIR STAMP");
    s_out = argv [2];
    if (mkdir (s_out, 0755) != 0 && errno != EEXIST)
        s_die ("cannot make %s: %s", s_out, strerror (errno));
    const char *targets [] = { "msg", "server", "snapshot", "checkpoint", "idx" };
    for (size_t i = 0; i < sizeof targets / sizeof targets [0]; i++)
        s_make_dir (targets [i]);
    s_vectors (argv [1]);
    s_sessions ();
    s_messages ();
    s_snapshots ();
    s_checkpoints ();
    s_idx_files ();
    //  The stamp is what the build knows the seeds by; it comes last.
    FILE *stamp = fopen (argv [3], "we");
    if (!stamp || fclose (stamp) != 0)
        s_die ("cannot write %s", argv [3]);
    return 0;
}
