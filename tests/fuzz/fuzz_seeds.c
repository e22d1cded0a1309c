//  Writes the seed corpora of the fuzz targets, at build time:
//
//    fuzz_seeds VECTORS_JSON OUTDIR STAMP
//
//  writes OUTDIR/<target>/ for msg, server, snapshot, checkpoint and idx,
//  then creates the file STAMP. The wire seeds come from schemas/vectors.json (each vector one
//  message), and the server's also from sessions of requests built here
//  with the codec's writer (create, then pushes, pulls, snapshots,
//  restores, a fence, a shutdown). The file seeds are made by the code
//  that writes those files: snapshots of partitions of every optimizer
//  kind (ps_partition_save), checkpoints (ps_checkpoint_commit) and IDX
//  files raw and gzipped, so no binary seed is committed. The text seeds
//  (TF_CONFIG strings, job files, model specs) are files in the source
//  tree; tests/fuzz/run.sh adds them.

#include "fuzz_frames.h"
#include "fuzz_scratch.h"
#include "ps_checkpoint.h"
#include "ps_msg.h"
#include "ps_partition.h"

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
//  Server sessions

typedef struct {
    const char *var;
    int64_t rows, cols;
} s_var_t;

static const s_var_t s_kernel = { "dense/kernel", 4, 3 };
static const s_var_t s_bias = { "dense/bias", 3, 0 };
static const s_var_t s_big = { "big", 1024, 80 };      //  over the server's inline limit

static uint64_t s_id;

static void
s_pack_dims (msgpack_packer *pk, const s_var_t *var)
{
    msgpack_pack_array (pk, var->cols ? 2 : 1);
    msgpack_pack_uint64 (pk, (uint64_t) var->rows);
    if (var->cols)
        msgpack_pack_uint64 (pk, (uint64_t) var->cols);
}

static size_t
s_floats (const s_var_t *var)
{
    return (size_t) (var->rows * (var->cols ? var->cols : 1));
}

static void
s_send (FILE *file, ps_writer_t *writer, const s_var_t *const *grads, size_t ngrads)
{
    s_frame (file, writer->sbuf.data, writer->sbuf.size, ngrads == 0);
    for (size_t i = 0; i < ngrads; i++) {
        static float grad [4096];
        if (s_floats (grads [i]) > sizeof grad / sizeof grad [0])
            s_die ("a gradient of %s is too large for a seed", grads [i]->var);
        for (size_t k = 0; k < s_floats (grads [i]); k++)
            grad [k] = 0.25f * (float) k - 1.0f;
        s_frame (file, grad, s_floats (grads [i]) * sizeof (float), i + 1 == ngrads);
    }
    ps_writer_fini (writer);
}

static void
s_create_vars (FILE *file, const s_var_t *const *vars, size_t count)
{
    ps_writer_t writer;
    ps_writer_init (&writer, "create", ++s_id, 1);
    msgpack_packer *pk = &writer.pk;
    ps_pack_key (pk, "partitions");
    msgpack_pack_array (pk, count);
    for (size_t i = 0; i < count; i++) {
        ps_pack_partref (pk, vars [i]->var, 0, 3);
        ps_pack_key (pk, "shape");
        s_pack_dims (pk, vars [i]);
        ps_pack_key (pk, "rows");
        msgpack_pack_array (pk, 2);
        msgpack_pack_uint64 (pk, 0);
        msgpack_pack_uint64 (pk, (uint64_t) vars [i]->rows);
        ps_pack_key (pk, "init");
        msgpack_pack_map (pk, 2);
        ps_pack_key (pk, "kind");
        ps_pack_str (pk, i % 2 ? "constant" : "glorot_uniform");
        if (i % 2)
            ps_pack_double (pk, "value", 0.5);
        else
            ps_pack_uint (pk, "seed", 42);
    }
    s_send (file, &writer, NULL, 0);
}

//  A push or push-pull of step (generation 0: none) of vars.
static void
s_push (FILE *file, const char *type, uint64_t step, uint64_t generation,
        const s_var_t *const *vars, size_t count)
{
    ps_writer_t writer;
    ps_writer_init (&writer, type, ++s_id, generation ? 4 : 3);
    msgpack_packer *pk = &writer.pk;
    ps_pack_uint (pk, "step", step);
    ps_pack_uint (pk, "worker", 1);
    if (generation)
        ps_pack_uint (pk, "generation", generation);
    ps_pack_key (pk, "tensors");
    msgpack_pack_array (pk, count);
    for (size_t i = 0; i < count; i++) {
        ps_pack_partref (pk, vars [i]->var, 0, 2);
        ps_pack_key (pk, "shape");
        s_pack_dims (pk, vars [i]);
        ps_pack_uint (pk, "bytes", s_floats (vars [i]) * sizeof (float));
    }
    s_send (file, &writer, vars, count);
}

static void
s_pull (FILE *file, const s_var_t *const *vars, size_t count)
{
    ps_writer_t writer;
    ps_writer_init (&writer, "pull", ++s_id, 1);
    ps_pack_key (&writer.pk, "parts");
    msgpack_pack_array (&writer.pk, count);
    for (size_t i = 0; i < count; i++)
        ps_pack_partref (&writer.pk, vars [i]->var, 0, 0);
    s_send (file, &writer, NULL, 0);
}

//  A request with no fields, or one string or uint field.
static void
s_simple (FILE *file, const char *type, const char *key, const char *text, uint64_t number)
{
    ps_writer_t writer;
    ps_writer_init (&writer, type, ++s_id, key ? 1 : 0);
    if (key && text) {
        ps_pack_key (&writer.pk, key);
        ps_pack_str (&writer.pk, text);
    }
    else
    if (key)
        ps_pack_uint (&writer.pk, key, number);
    s_send (file, &writer, NULL, 0);
}

static void
s_set_optimizer (FILE *file, const char *kind, bool nesterov)
{
    ps_writer_t writer;
    ps_writer_init (&writer, "set_optimizer", ++s_id, 1);
    ps_pack_key (&writer.pk, "optimizer");
    msgpack_pack_map (&writer.pk, nesterov ? 4 : 2);
    ps_pack_key (&writer.pk, "kind");
    ps_pack_str (&writer.pk, kind);
    ps_pack_double (&writer.pk, "lr", 0.01);
    if (nesterov) {
        ps_pack_double (&writer.pk, "momentum", 0.9);
        ps_pack_key (&writer.pk, "nesterov");
        msgpack_pack_true (&writer.pk);
    }
    s_send (file, &writer, NULL, 0);
}

static void
s_restore_part (FILE *file, const char *dir, const s_var_t *var)
{
    ps_writer_t writer;
    ps_writer_init (&writer, "restore", ++s_id, 2);
    ps_pack_key (&writer.pk, "dir");
    ps_pack_str (&writer.pk, dir);
    ps_pack_key (&writer.pk, "parts");
    msgpack_pack_array (&writer.pk, 1);
    ps_pack_partref (&writer.pk, var->var, 0, 0);
    s_send (file, &writer, NULL, 0);
}

static void
s_sessions (void)
{
    const s_var_t *both [] = { &s_kernel, &s_bias };
    const s_var_t *kernel [] = { &s_kernel };
    const s_var_t *big [] = { &s_big };

    FILE *file = s_create ("server", "session-train");
    s_create_vars (file, both, 2);
    s_push (file, "push", 1, 0, both, 2);
    s_pull (file, both, 2);
    s_push (file, "push_pull", 2, 0, both, 2);
    s_push (file, "push", 1, 0, kernel, 1);
    s_simple (file, "stats", NULL, NULL, 0);
    s_simple (file, "ping", NULL, NULL, 0);
    s_close (file);

    file = s_create ("server", "session-optimizer");
    s_create_vars (file, both, 2);
    s_set_optimizer (file, "adam", false);
    s_push (file, "push_pull", 1, 0, both, 2);
    s_set_optimizer (file, "momentum", true);
    s_push (file, "push", 3, 0, kernel, 1);
    s_simple (file, "stats", NULL, NULL, 0);
    s_close (file);

    file = s_create ("server", "session-snapshot");
    s_create_vars (file, both, 2);
    s_push (file, "push", 1, 0, both, 2);
    s_simple (file, "snapshot", "dir", "snap", 0);
    s_push (file, "push", 2, 0, both, 2);
    s_simple (file, "restore", "dir", "snap", 0);
    s_restore_part (file, "snap", &s_bias);
    s_pull (file, both, 2);
    s_close (file);

    file = s_create ("server", "session-fence");
    s_create_vars (file, both, 2);
    s_simple (file, "fence", "generation", NULL, 2);
    s_push (file, "push", 1, 1, kernel, 1);
    s_push (file, "push", 1, 2, kernel, 1);
    s_close (file);

    file = s_create ("server", "session-pool");
    s_create_vars (file, big, 1);
    s_pull (file, big, 1);
    s_close (file);

    file = s_create ("server", "session-shutdown");
    s_simple (file, "ping", NULL, NULL, 0);
    s_simple (file, "shutdown", NULL, NULL, 0);
    s_simple (file, "ping", NULL, NULL, 0);
    s_close (file);
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
    s_snapshots ();
    s_checkpoints ();
    s_idx_files ();
    //  The stamp is what the build knows the seeds by; it comes last.
    FILE *stamp = fopen (argv [3], "we");
    if (!stamp || fclose (stamp) != 0)
        s_die ("cannot write %s", argv [3]);
    return 0;
}
