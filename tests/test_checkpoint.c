//  Unit tests for checkpoints (common/store/ps_checkpoint.c,
//  ps_ckpt_verify.c and ps_ckpt_layout.c): the layout a commit leaves, the
//  manifest it writes, pruning, committing a step again, every
//  verification failure with its code and message, the choice of the
//  newest usable checkpoint, and the leftovers of a simulated crash. The
//  snapshot files are real ones, written by ps_partition_save, and every
//  test works in its own mkdtemp directory under /tmp, removed afterwards.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"
#include "harness_case.h"
#include "harness_case.h"
#include "ps_checkpoint.h"
#include "ps_partition.h"
#include "ps_snapshot.h"

#define NFILES 3

typedef struct {
    char dir [HARNESS_DIR_SIZE];
    char root [128];            //  a checkpoint root that does not exist yet
} fixture_t;

static int
s_setup (void **state)
{
    int rc = harness_dir_setup (state, sizeof (fixture_t));
    if (rc == 0) {
        fixture_t *fx = *state;
        snprintf (fx->root, sizeof fx->root, "%s/run/ckpts", fx->dir);
    }
    return rc;
}

//  ---------------------------------------------------------------------
//  Helpers

static bool
s_exists (const char *path)
{
    struct stat st;
    return lstat (path, &st) == 0;
}

static void
s_write_text (const char *path, const char *text)
{
    FILE *file = fopen (path, "wb");
    assert_non_null (file);
    assert_int_equal (fwrite (text, 1, strlen (text), file), strlen (text));
    assert_int_equal (fclose (file), 0);
}

static void
s_path (char *buf, size_t len, const char *dir, const char *name)
{
    int n = snprintf (buf, len, "%s/%s", dir, name);
    assert_true (n > 0 && (size_t) n < len);
}

//  The path of the checkpoint directory of step in root.
static void
s_ckpt_path (char *buf, size_t len, const char *root, uint64_t step, const char *suffix)
{
    int n = snprintf (buf, len, "%s/ckpt-%012llu%s", root, (unsigned long long) step, suffix);
    assert_true (n > 0 && (size_t) n < len);
}

//  Save one partition into dir and describe its file as a server would.
static void
s_save (const char *dir, const char *var, uint32_t part, const int64_t *dims, int rank,
        int64_t row_begin, int64_t row_end, int server, uint64_t seed, ps_snap_file_t *out)
{
    ps_shape_t shape;
    assert_int_equal (ps_shape_set (&shape, dims, rank, NULL), PS_OK);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_UNIFORM);
    init.seed = seed;
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    ps_error_t err = { 0 };
    ps_partition_t *partition = ps_partition_new (var, part, &shape, row_begin, row_end,
                                                  &init, &opt, &err);
    if (!partition)
        fail_msg ("ps_partition_new: %s", err.msg);
    //  One update, so that the saved version and ledger are not trivial.
    size_t n = ps_partition_count (partition);
    float *grad = calloc (n, sizeof (float));
    assert_non_null (grad);
    for (size_t i = 0; i < n; i++)
        grad [i] = 0.25f * (float) i - (float) seed;
    uint64_t version;
    assert_int_equal (ps_partition_push (partition, seed + 1, grad, NULL, &version, NULL), PS_OK);
    free (grad);

    memset (out, 0, sizeof *out);
    out->server = server;
    snprintf (out->var, sizeof out->var, "%s", var);
    out->part = part;
    if (ps_partition_save (partition, dir, out->file, sizeof out->file, &out->bytes, &out->crc,
                           &out->version, &err))
        fail_msg ("ps_partition_save: %s", err.msg);
    assert_int_equal (out->version, 1);
    ps_partition_destroy (&partition);
}

//  The snapshot files of a small model, as two servers would write them
//  into dir: a [6, 4] kernel in two partitions and a [4] bias. seed makes
//  the contents differ from one checkpoint to the next.
static void
s_snapshot (const char *dir, uint64_t seed, ps_snap_file_t *files)
{
    int64_t kernel [] = { 6, 4 };
    int64_t bias [] = { 4 };
    s_save (dir, "dense/kernel", 0, kernel, 2, 0, 3, 0, seed, &files [0]);
    s_save (dir, "dense/kernel", 1, kernel, 2, 3, 6, 1, seed, &files [1]);
    s_save (dir, "dense/bias", 0, bias, 1, 0, 4, 1, seed, &files [2]);
}

//  The coordinator's part of a manifest (schemas/checkpoint.md), with lr
//  as given.
static json_t *
s_caller_manifest (uint64_t step, double lr)
{
    json_t *manifest = json_pack (
        "{s:I, s:{s:I, s:[I, I]}, s:{s:i, s:i}, s:{s:i, s:s}, s:{s:s, s:i, s:i},"
        " s:[{s:s, s:[i, i], s:[i, i, i], s:[i, i]}, {s:s, s:[i], s:[i, i], s:[i]}],"
        " s:i, s:f, s:s}",
        "global_step", (json_int_t) step,
        "done", "watermark", (json_int_t) step,
        "above", (json_int_t) step + 2, (json_int_t) step + 5,
        "data_cursor", "epoch", 1, "batch", 17,
        "seeds", "seed", 7, "shuffle", "ps_mix64 of (seed, epoch)",
        "job", "model", "mlp", "batch_size", 64, "epochs", 3,
        "layout",
        "var", "dense/kernel", "shape", 6, 4, "splits", 0, 3, 6, "servers", 0, 1,
        "var", "dense/bias", "shape", 4, "splits", 0, 4, "servers", 1,
        "servers", 2, "lr", lr, "mode", "async");
    assert_non_null (manifest);
    return manifest;
}

//  Begin, snapshot and commit a checkpoint at step; dir (may be NULL)
//  receives its path.
static void
s_commit (const char *root, uint64_t step, int keep, double lr, ps_snap_file_t *files, char *dir,
          size_t len)
{
    char tmpdir [256];
    ps_error_t err = { 0 };
    if (ps_checkpoint_begin (root, step, tmpdir, sizeof tmpdir, &err))
        fail_msg ("begin: %s", err.msg);
    ps_snap_file_t local [NFILES];
    if (!files)
        files = local;
    s_snapshot (tmpdir, step, files);
    json_t *manifest = s_caller_manifest (step, lr);
    if (ps_checkpoint_commit (root, step, tmpdir, manifest, files, NFILES, keep, dir, len, &err))
        fail_msg ("commit: %s", err.msg);
    json_decref (manifest);
}

static json_t *
s_load_json (const char *path)
{
    json_error_t jerr;
    json_t *json = json_load_file (path, 0, &jerr);
    if (!json)
        fail_msg ("%s: %s", path, jerr.text);
    return json;
}

static void
s_save_json (const char *path, const json_t *json)
{
    assert_int_equal (json_dump_file (json, path, JSON_INDENT (2) | JSON_PRESERVE_ORDER), 0);
}

//  Verifying dir fails with code and a message naming `names` (a path)
//  and containing `expect`; *manifest stays NULL.
static void
s_assert_verify_fails (const char *dir, int code, const char *names, const char *expect)
{
    json_t *manifest = (json_t *) 1;
    ps_error_t err = { 0 };
    int rc = ps_checkpoint_verify (dir, &manifest, &err);
    if (rc != code)
        fail_msg ("expected %s, got %s: %s", ps_error_name (code), ps_error_name (rc), err.msg);
    assert_int_equal (err.code, code);
    assert_null (manifest);
    if (!strstr (err.msg, names))
        fail_msg ("message \"%s\" does not name %s", err.msg, names);
    if (expect && !strstr (err.msg, expect))
        fail_msg ("message \"%s\" lacks \"%s\"", err.msg, expect);
}

//  Run latest with stderr going to a file, so its warnings can be read.
static int
s_latest_logged (const char *root, char *dir, size_t len, json_t **manifest, char *log,
                 size_t log_len, const char *log_path)
{
    fflush (stderr);
    int saved = dup (STDERR_FILENO);
    assert_true (saved >= 0);
    int fd = open (log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true (fd >= 0);
    assert_int_equal (dup2 (fd, STDERR_FILENO), STDERR_FILENO);
    assert_int_equal (close (fd), 0);
    ps_error_t err = { 0 };
    int rc = ps_checkpoint_latest (root, dir, len, manifest, &err);
    fflush (stderr);
    assert_int_equal (dup2 (saved, STDERR_FILENO), STDERR_FILENO);
    assert_int_equal (close (saved), 0);
    FILE *file = fopen (log_path, "rb");
    assert_non_null (file);
    size_t n = fread (log, 1, log_len - 1, file);
    log [n] = 0;
    fclose (file);
    return rc;
}

//  ---------------------------------------------------------------------
//  Tests

//  A commit leaves ckpt-<step> holding the snapshot files and a manifest
//  with our keys, the caller's keys untouched and in order, and one entry
//  per file; nothing temporary is left anywhere.
static void
test_commit_layout (void **state)
{
    fixture_t *fx = *state;
    char tmpdir [256], dir [256], expect [256], path [320];
    ps_error_t err = { 0 };
    assert_false (s_exists (fx->root));
    //  The root is created, parents and all.
    if (ps_checkpoint_begin (fx->root, 42, tmpdir, sizeof tmpdir, &err))
        fail_msg ("begin: %s", err.msg);
    s_ckpt_path (expect, sizeof expect, fx->root, 42, ".tmp");
    assert_string_equal (tmpdir, expect);
    assert_int_equal (harness_dir_entries (tmpdir), 0);

    ps_snap_file_t files [NFILES];
    s_snapshot (tmpdir, 42, files);
    //  What the servers report is what ps_snapshot_summary reads.
    for (int i = 0; i < NFILES; i++) {
        uint64_t bytes;
        uint32_t crc;
        s_path (path, sizeof path, tmpdir, files [i].file);
        assert_int_equal (ps_snapshot_summary (path, &bytes, &crc, NULL), PS_OK);
        assert_int_equal (bytes, files [i].bytes);
        assert_int_equal (crc, files [i].crc);
    }
    json_t *caller = s_caller_manifest (42, 0.001);
    json_t *before = json_deep_copy (caller);
    assert_non_null (before);
    if (ps_checkpoint_commit (fx->root, 42, tmpdir, caller, files, NFILES, 3, dir, sizeof dir,
                              &err))
        fail_msg ("commit: %s", err.msg);
    //  The caller's object is left as it was.
    assert_true (json_equal (caller, before));

    s_ckpt_path (expect, sizeof expect, fx->root, 42, "");
    assert_string_equal (dir, expect);
    assert_int_equal (harness_dir_entries (fx->root), 1);
    assert_false (s_exists (tmpdir));
    assert_int_equal (harness_dir_entries (dir), NFILES + 1);
    s_path (path, sizeof path, dir, "MANIFEST.json.tmp");
    assert_false (s_exists (path));

    s_path (path, sizeof path, dir, PS_CHECKPOINT_MANIFEST);
    json_t *manifest = s_load_json (path);
    assert_string_equal (json_string_value (json_object_get (manifest, "format")),
                         "ps-cluster-checkpoint");
    assert_int_equal (json_integer_value (json_object_get (manifest, "version")), 1);
    assert_int_equal (json_integer_value (json_object_get (manifest, "step")), 42);
    const char *created = json_string_value (json_object_get (manifest, "created"));
    assert_non_null (created);
    int year, month, day, hour, minute, second;
    char zone = 0;
    assert_int_equal (sscanf (created, "%4d-%2d-%2dT%2d:%2d:%2d%c", &year, &month, &day,
                              &hour, &minute, &second, &zone), 7);
    assert_int_equal (zone, 'Z');
    assert_int_equal (strlen (created), 20);
    assert_true (year >= 2024);

    //  Our keys first, then the caller's in the caller's order, then files.
    const char *order [] = {
        "format", "version", "step", "created", "global_step", "done", "data_cursor", "seeds",
        "job", "layout", "servers", "lr", "mode", "files",
    };
    size_t nkeys = sizeof order / sizeof order [0];
    assert_int_equal (json_object_size (manifest), nkeys);
    void *iter = json_object_iter (manifest);
    for (size_t i = 0; i < nkeys; i++, iter = json_object_iter_next (manifest, iter)) {
        assert_non_null (iter);
        assert_string_equal (json_object_iter_key (iter), order [i]);
    }
    const char *key;
    json_t *value;
    json_object_foreach (caller, key, value)
        assert_true (json_equal (json_object_get (manifest, key), value));

    json_t *list = json_object_get (manifest, "files");
    assert_int_equal (json_array_size (list), NFILES);
    for (int i = 0; i < NFILES; i++) {
        json_t *entry = json_array_get (list, (size_t) i);
        assert_int_equal (json_object_size (entry), 7);
        assert_string_equal (json_string_value (json_object_get (entry, "file")), files [i].file);
        assert_string_equal (json_string_value (json_object_get (entry, "var")), files [i].var);
        assert_int_equal (json_integer_value (json_object_get (entry, "server")), files [i].server);
        assert_int_equal (json_integer_value (json_object_get (entry, "part")), files [i].part);
        assert_int_equal (json_integer_value (json_object_get (entry, "bytes")), files [i].bytes);
        assert_int_equal (json_integer_value (json_object_get (entry, "crc32")), files [i].crc);
        assert_int_equal (json_integer_value (json_object_get (entry, "version")),
                          files [i].version);
        //  The files are where the manifest says, and they read back.
        s_path (path, sizeof path, dir, files [i].file);
        ps_snapshot_t snap;
        assert_int_equal (ps_snapshot_read (path, &snap, NULL), PS_OK);
        assert_string_equal (snap.var, files [i].var);
        ps_snapshot_release (&snap);
    }
    assert_string_equal (files [0].file, "dense%2Fkernel.part0.snap");

    //  It verifies, and verification returns what is on disk.
    json_t *verified = NULL;
    if (ps_checkpoint_verify (dir, &verified, &err))
        fail_msg ("verify: %s", err.msg);
    assert_true (json_equal (verified, manifest));
    assert_int_equal (ps_checkpoint_verify (dir, NULL, NULL), PS_OK);
    //  A copy under another name verifies too; only a checkpoint's name
    //  must match the step inside.
    s_path (path, sizeof path, fx->dir, "backup");
    assert_int_equal (rename (dir, path), 0);
    assert_int_equal (ps_checkpoint_verify (path, NULL, NULL), PS_OK);
    json_decref (verified);
    json_decref (manifest);
    json_decref (before);
    json_decref (caller);
}

//  keep = 3 over five commits leaves the newest three, and never touches
//  temporary directories or entries that are not checkpoints.
static void
test_prune (void **state)
{
    fixture_t *fx = *state;
    char path [256], other [256];
    char tmpdir [256];
    assert_int_equal (ps_checkpoint_begin (fx->root, 1, tmpdir, sizeof tmpdir, NULL), PS_OK);
    s_path (path, sizeof path, fx->root, "notes.txt");
    s_write_text (path, "not a checkpoint\n");
    const char *dirs [] = { "ckpt-5", "ckpt-0000000000001", "ckpt-000000000002.old", "other" };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs [0]; i++) {
        s_path (path, sizeof path, fx->root, dirs [i]);
        assert_int_equal (mkdir (path, 0755), 0);
    }
    //  A file named like a checkpoint is not one.
    s_ckpt_path (path, sizeof path, fx->root, 3, "");
    s_write_text (path, "x");
    int unrelated = 7;
    assert_int_equal (harness_dir_entries (fx->root), unrelated);

    uint64_t steps [] = { 10, 20, 30, 40, 50 };
    for (int i = 0; i < 5; i++) {
        s_commit (fx->root, steps [i], 3, 0.01, NULL, NULL, 0);
        int expect = i + 1 < 3 ? i + 1 : 3;
        assert_int_equal (harness_dir_entries (fx->root), unrelated + expect);
    }
    for (int i = 0; i < 5; i++) {
        s_ckpt_path (path, sizeof path, fx->root, steps [i], "");
        assert_int_equal (s_exists (path), i >= 2);
    }
    assert_true (s_exists (tmpdir));
    s_path (path, sizeof path, fx->root, "notes.txt");
    assert_true (s_exists (path));
    s_ckpt_path (path, sizeof path, fx->root, 3, "");
    assert_true (s_exists (path));

    //  After a rewind, the step just committed is kept even though newer
    //  steps exist; the oldest of the others goes.
    s_commit (fx->root, 25, 3, 0.01, NULL, other, sizeof other);
    assert_true (s_exists (other));
    for (int i = 0; i < 5; i++) {
        s_ckpt_path (path, sizeof path, fx->root, steps [i], "");
        assert_int_equal (s_exists (path), i >= 3);
    }
    //  keep = 1 leaves only the new one.
    s_commit (fx->root, 60, 1, 0.01, NULL, NULL, 0);
    assert_int_equal (harness_dir_entries (fx->root), unrelated + 1);
    char dir [256];
    json_t *manifest = NULL;
    assert_int_equal (ps_checkpoint_latest (fx->root, dir, sizeof dir, &manifest, NULL), PS_OK);
    s_ckpt_path (path, sizeof path, fx->root, 60, "");
    assert_string_equal (dir, path);
    assert_int_equal (json_integer_value (json_object_get (manifest, "step")), 60);
    json_decref (manifest);
}

//  The same step committed again (after a rewind) replaces the old
//  checkpoint completely and leaves nothing else behind.
static void
test_recommit_same_step (void **state)
{
    fixture_t *fx = *state;
    char dir [256], again [256], path [320];
    ps_snap_file_t first [NFILES], second [NFILES];
    s_commit (fx->root, 7, 3, 0.1, first, dir, sizeof dir);

    char tmpdir [256];
    ps_error_t err = { 0 };
    assert_int_equal (ps_checkpoint_begin (fx->root, 7, tmpdir, sizeof tmpdir, &err), PS_OK);
    //  Other contents this time, and one file fewer.
    s_snapshot (tmpdir, 1000, second);
    s_path (path, sizeof path, tmpdir, second [2].file);
    assert_int_equal (unlink (path), 0);
    assert_int_not_equal (first [0].crc, second [0].crc);
    json_t *manifest = s_caller_manifest (7, 0.05);
    if (ps_checkpoint_commit (fx->root, 7, tmpdir, manifest, second, NFILES - 1, 3, again,
                              sizeof again, &err))
        fail_msg ("commit: %s", err.msg);
    json_decref (manifest);
    assert_string_equal (again, dir);
    assert_int_equal (harness_dir_entries (fx->root), 1);
    assert_int_equal (harness_dir_entries (dir), NFILES);

    json_t *verified = NULL;
    if (ps_checkpoint_verify (dir, &verified, &err))
        fail_msg ("verify: %s", err.msg);
    assert_true (json_real_value (json_object_get (verified, "lr")) == 0.05);
    json_t *list = json_object_get (verified, "files");
    assert_int_equal (json_array_size (list), NFILES - 1);
    for (int i = 0; i < NFILES - 1; i++)
        assert_int_equal (json_integer_value (json_object_get (json_array_get (list, (size_t) i),
                                                               "crc32")), second [i].crc);
    json_decref (verified);
}

//  Each kind of damage is refused with its code and a message naming the
//  file. Every case gets a checkpoint of its own, in a root of its own.
typedef enum {
    DAMAGE_TRUNCATED, DAMAGE_FLIPPED, DAMAGE_TRAILER, DAMAGE_SIZE, DAMAGE_CRC, DAMAGE_MISSING,
    DAMAGE_MANIFEST_TRUNCATED, DAMAGE_MANIFEST_MISSING, DAMAGE_MANIFEST_ARRAY, DAMAGE_FORMAT,
    DAMAGE_NO_FORMAT, DAMAGE_VERSION, DAMAGE_SLASH, DAMAGE_DOTDOT, DAMAGE_WRONG_NAME,
    DAMAGE_DUPLICATE, DAMAGE_NO_CRC, DAMAGE_NEGATIVE, DAMAGE_STEP, DAMAGE_DUPLICATE_KEY,
    DAMAGE_MANIFEST_FIFO, DAMAGE_FILE_FIFO,
    DAMAGE_COUNT
} damage_t;

//  Damage the checkpoint at dir holding files; returns in names the path
//  the message must name.
static void
s_damage (damage_t damage, const char *dir, const ps_snap_file_t *files, char *names, size_t len,
          int *code, const char **expect)
{
    char manifest_path [320];
    s_path (manifest_path, sizeof manifest_path, dir, PS_CHECKPOINT_MANIFEST);
    //  Most cases name the manifest; the file cases name the file.
    s_path (names, len, dir, PS_CHECKPOINT_MANIFEST);
    char file [320];
    s_path (file, sizeof file, dir, files [1].file);
    json_t *manifest = s_load_json (manifest_path);
    json_t *entry = json_array_get (json_object_get (manifest, "files"), 1);
    *code = PS_ECORRUPT;
    *expect = NULL;
    bool rewrite = true;
    switch (damage) {
        case DAMAGE_TRUNCATED:
            assert_int_equal (truncate (file, (off_t) files [1].bytes - 10), 0);
            s_path (names, len, dir, files [1].file);
            *expect = "bytes, expected";
            rewrite = false;
            break;
        case DAMAGE_FLIPPED:
        case DAMAGE_TRAILER: {
            int fd = open (file, O_RDWR);
            assert_true (fd >= 0);
            off_t at = damage == DAMAGE_FLIPPED ? (off_t) files [1].bytes / 2
                                                : (off_t) files [1].bytes - 2;
            uint8_t byte;
            assert_int_equal (pread (fd, &byte, 1, at), 1);
            byte ^= 0x10;
            assert_int_equal (pwrite (fd, &byte, 1, at), 1);
            assert_int_equal (close (fd), 0);
            s_path (names, len, dir, files [1].file);
            *expect = damage == DAMAGE_FLIPPED ? "checksum mismatch" : "checksum trailer";
            rewrite = false;
            break;
        }
        case DAMAGE_SIZE:
            json_object_set_new (entry, "bytes", json_integer ((json_int_t) files [1].bytes + 1));
            s_path (names, len, dir, files [1].file);
            *expect = "as the manifest records";
            break;
        case DAMAGE_CRC:
            json_object_set_new (entry, "crc32", json_integer ((json_int_t) (files [1].crc ^ 1)));
            s_path (names, len, dir, files [1].file);
            *expect = "checksum trailer";
            break;
        case DAMAGE_MISSING:
            assert_int_equal (unlink (file), 0);
            s_path (names, len, dir, files [1].file);
            *code = PS_ENOTFOUND;
            rewrite = false;
            break;
        case DAMAGE_MANIFEST_TRUNCATED: {
            struct stat st;
            assert_int_equal (stat (manifest_path, &st), 0);
            assert_int_equal (truncate (manifest_path, st.st_size / 2), 0);
            *expect = "not valid JSON";
            rewrite = false;
            break;
        }
        case DAMAGE_MANIFEST_MISSING:
            assert_int_equal (unlink (manifest_path), 0);
            *code = PS_ENOTFOUND;
            rewrite = false;
            break;
        case DAMAGE_MANIFEST_ARRAY:
            s_write_text (manifest_path, "[1, 2, 3]\n");
            *expect = "object";
            rewrite = false;
            break;
        case DAMAGE_FORMAT:
            json_object_set_new (manifest, "format", json_string ("tf-checkpoint"));
            *expect = "format \"tf-checkpoint\"";
            break;
        case DAMAGE_NO_FORMAT:
            json_object_del (manifest, "format");
            *expect = "format";
            break;
        case DAMAGE_VERSION:
            json_object_set_new (manifest, "version", json_integer (2));
            *code = PS_EVERSION;
            *expect = "version 2, expected 1";
            break;
        case DAMAGE_SLASH:
            json_object_set_new (entry, "file", json_string ("sub/dense%2Fkernel.part1.snap"));
            *expect = "not a plain name";
            break;
        case DAMAGE_DOTDOT:
            json_object_set_new (entry, "file", json_string (".."));
            *expect = "not a plain name";
            break;
        case DAMAGE_WRONG_NAME:
            //  A real file of the checkpoint, but not the one of this
            //  partition: a restore would not find it.
            json_object_set_new (entry, "file", json_string (files [0].file));
            *expect = "expected \"dense%2Fkernel.part1.snap\"";
            break;
        case DAMAGE_DUPLICATE:
            json_array_append (json_object_get (manifest, "files"), entry);
            *expect = "listed twice";
            break;
        case DAMAGE_NO_CRC:
            json_object_del (entry, "crc32");
            *expect = "\"crc32\"";
            break;
        case DAMAGE_NEGATIVE:
            json_object_set_new (entry, "bytes", json_integer (-1));
            *expect = "\"bytes\"";
            break;
        case DAMAGE_STEP:
            json_object_set_new (manifest, "step", json_integer (8));
            *expect = "step 8, expected";
            break;
        case DAMAGE_DUPLICATE_KEY:
            //  jansson would not write one, so the text is edited.
            s_write_text (manifest_path, "{\"format\": \"ps-cluster-checkpoint\", "
                                         "\"format\": \"ps-cluster-checkpoint\"}");
            *expect = "duplicate";
            rewrite = false;
            break;
        case DAMAGE_MANIFEST_FIFO:
        case DAMAGE_FILE_FIFO: {
            //  Nobody writes to it: a reader that opened it would wait for
            //  ever.
            const char *path = damage == DAMAGE_FILE_FIFO ? file : manifest_path;
            assert_int_equal (unlink (path), 0);
            assert_int_equal (mkfifo (path, 0600), 0);
            if (damage == DAMAGE_FILE_FIFO)
                s_path (names, len, dir, files [1].file);
            *code = PS_EINVAL;
            *expect = "a FIFO, not a regular file";
            rewrite = false;
            break;
        }
        default:
            fail ();
    }
    if (rewrite)
        s_save_json (manifest_path, manifest);
    json_decref (manifest);
}

static void
test_verify_failures (void **state)
{
    fixture_t *fx = *state;
    for (int damage = 0; damage < DAMAGE_COUNT; damage++) {
        char root [192], dir [256], names [320];
        snprintf (root, sizeof root, "%s/case%d", fx->dir, damage);
        ps_snap_file_t files [NFILES];
        s_commit (root, 9, 3, 0.01, files, dir, sizeof dir);
        assert_int_equal (ps_checkpoint_verify (dir, NULL, NULL), PS_OK);
        int code;
        const char *expect;
        s_damage ((damage_t) damage, dir, files, names, sizeof names, &code, &expect);
        //  A reader that blocks (on a FIFO) fails the test rather than hang.
        alarm (60);
        s_assert_verify_fails (dir, code, names, expect);
        //  Nothing usable is left in that root, and the warning says why.
        char found [256], log [2048], log_path [256];
        snprintf (log_path, sizeof log_path, "%s/log.txt", fx->dir);
        assert_int_equal (s_latest_logged (root, found, sizeof found, NULL, log, sizeof log,
                                           log_path), PS_ENOTFOUND);
        alarm (0);
        if (!strstr (log, dir) || !strstr (log, names))
            fail_msg ("log \"%s\" does not name %s", log, names);
    }
}

//  A commit refuses bad arguments before it writes anything: the final
//  directory does not appear, the temporary one keeps the servers' files
//  and gets no manifest, and a correct commit from it still succeeds.
static void
test_commit_refusals (void **state)
{
    fixture_t *fx = *state;
    char tmpdir [256], final [256], path [320], other [256];
    ps_error_t err = { 0 };
    assert_int_equal (ps_checkpoint_begin (fx->root, 11, tmpdir, sizeof tmpdir, NULL), PS_OK);
    ps_snap_file_t files [NFILES], bad [NFILES];
    s_snapshot (tmpdir, 11, files);
    s_ckpt_path (final, sizeof final, fx->root, 11, "");
    json_t *manifest = s_caller_manifest (11, 0.01);

    //  The keys the module writes itself.
    const char *reserved [] = { "format", "version", "created", "step", "files" };
    for (size_t i = 0; i < sizeof reserved / sizeof reserved [0]; i++) {
        json_t *copy = json_copy (manifest);
        assert_non_null (copy);
        json_object_set_new (copy, reserved [i], json_integer (1));
        assert_int_equal (ps_checkpoint_commit (fx->root, 11, tmpdir, copy, files, NFILES, 3, NULL,
                                                0, &err), PS_EINVAL);
        char quoted [32];
        snprintf (quoted, sizeof quoted, "\"%s\"", reserved [i]);
        assert_non_null (strstr (err.msg, quoted));
        assert_non_null (strstr (err.msg, tmpdir));
        json_decref (copy);
    }
    json_t *array = json_array ();
    assert_int_equal (ps_checkpoint_commit (fx->root, 11, tmpdir, array, files, NFILES, 3, NULL, 0,
                                            &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "object"));
    json_decref (array);
    assert_int_equal (ps_checkpoint_commit (fx->root, 11, tmpdir, manifest, files, NFILES, 0,
                                            NULL, 0, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "keep"));
    //  The directory begun for another step.
    assert_int_equal (ps_checkpoint_commit (fx->root, 12, tmpdir, manifest, files, NFILES, 3,
                                            NULL, 0, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, tmpdir));
    //  Too small a buffer for the final path.
    assert_int_equal (ps_checkpoint_commit (fx->root, 11, tmpdir, manifest, files, NFILES, 3,
                                            other, 8, &err), PS_EINVAL);

    struct {
        int index;
        const char *file;
        int64_t bytes_delta;
        uint32_t crc_xor;
        int code;
        const char *expect;
    } cases [] = {
        { 1, "dense%2Fkernel.part7.snap", 0, 0, PS_EINVAL,
          "expected \"dense%2Fkernel.part1.snap\"" },
        { 1, "../dense%2Fkernel.part1.snap", 0, 0, PS_EINVAL, "not a plain name" },
        { 1, ".", 0, 0, PS_EINVAL, "not a plain name" },
        { 1, "", 0, 0, PS_EINVAL, "not a plain name" },
        { 2, NULL, 1, 0, PS_ESHAPE, "bytes, expected" },
        { 2, NULL, 0, 4, PS_ECORRUPT, "checksum trailer" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        memcpy (bad, files, sizeof bad);
        ps_snap_file_t *f = &bad [cases [i].index];
        if (cases [i].file)
            snprintf (f->file, sizeof f->file, "%s", cases [i].file);
        f->bytes += (uint64_t) cases [i].bytes_delta;
        f->crc ^= cases [i].crc_xor;
        int rc = ps_checkpoint_commit (fx->root, 11, tmpdir, manifest, bad, NFILES, 3, NULL, 0,
                                       &err);
        if (rc != cases [i].code)
            fail_msg ("case %zu: expected %s, got %s: %s", i, ps_error_name (cases [i].code),
                      ps_error_name (rc), err.msg);
        if (!strstr (err.msg, cases [i].expect))
            fail_msg ("case %zu: message \"%s\" lacks \"%s\"", i, err.msg, cases [i].expect);
        if (cases [i].code != PS_EINVAL) {
            s_path (path, sizeof path, tmpdir, f->file);
            assert_non_null (strstr (err.msg, path));
        }
    }
    //  A partition listed twice.
    memcpy (bad, files, sizeof bad);
    bad [2] = bad [0];
    assert_int_equal (ps_checkpoint_commit (fx->root, 11, tmpdir, manifest, bad, NFILES, 3, NULL, 0,
                                            &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "listed twice"));
    //  A file the server did not write.
    s_path (path, sizeof path, tmpdir, files [2].file);
    char moved [320];
    s_path (moved, sizeof moved, fx->dir, "moved.snap");
    assert_int_equal (rename (path, moved), 0);
    assert_int_equal (ps_checkpoint_commit (fx->root, 11, tmpdir, manifest, files, NFILES, 3,
                                            NULL, 0, &err), PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, path));
    assert_int_equal (rename (moved, path), 0);

    //  None of that left a trace.
    assert_false (s_exists (final));
    assert_int_equal (harness_dir_entries (tmpdir), NFILES);
    assert_int_equal (harness_dir_entries (fx->root), 1);

    if (ps_checkpoint_commit (fx->root, 11, tmpdir, manifest, files, NFILES, 3, other,
                              sizeof other, &err))
        fail_msg ("commit: %s", err.msg);
    assert_string_equal (other, final);
    assert_int_equal (ps_checkpoint_verify (final, NULL, NULL), PS_OK);
    json_decref (manifest);
}

static void
test_latest (void **state)
{
    fixture_t *fx = *state;
    char dir [256], path [320], expect [256], log [4096], log_path [128];
    snprintf (log_path, sizeof log_path, "%s/log.txt", fx->dir);
    json_t *manifest = (json_t *) 1;
    ps_error_t err = { 0 };

    //  A root that does not exist, then an empty one.
    assert_int_equal (ps_checkpoint_latest (fx->root, dir, sizeof dir, &manifest, &err),
                      PS_ENOTFOUND);
    assert_null (manifest);
    assert_non_null (strstr (err.msg, fx->root));
    char tmpdir [256];
    assert_int_equal (ps_checkpoint_begin (fx->root, 400, tmpdir, sizeof tmpdir, NULL), PS_OK);
    assert_int_equal (rmdir (tmpdir), 0);
    assert_int_equal (ps_checkpoint_latest (fx->root, dir, sizeof dir, &manifest, &err),
                      PS_ENOTFOUND);
    assert_null (manifest);

    //  A root that is a file cannot be read.
    s_path (path, sizeof path, fx->dir, "plain");
    s_write_text (path, "x");
    assert_int_equal (ps_checkpoint_latest (path, dir, sizeof dir, NULL, &err), PS_EIO);
    assert_non_null (strstr (err.msg, path));

    ps_snap_file_t files [NFILES];
    s_commit (fx->root, 100, 5, 0.01, NULL, NULL, 0);
    s_commit (fx->root, 200, 5, 0.01, NULL, NULL, 0);
    s_commit (fx->root, 300, 5, 0.01, files, NULL, 0);
    //  A newer temporary directory, complete with files and a manifest (a
    //  crash just before the final rename), and unrelated entries are
    //  never considered.
    s_commit (fx->root, 900, 5, 0.01, NULL, NULL, 0);
    char final [256];
    s_ckpt_path (final, sizeof final, fx->root, 900, "");
    s_ckpt_path (expect, sizeof expect, fx->root, 900, ".tmp");
    assert_int_equal (rename (final, expect), 0);
    s_path (path, sizeof path, fx->root, "ckpt-999999999999x");
    assert_int_equal (mkdir (path, 0755), 0);

    manifest = NULL;
    assert_int_equal (ps_checkpoint_latest (fx->root, dir, sizeof dir, &manifest, NULL), PS_OK);
    s_ckpt_path (expect, sizeof expect, fx->root, 300, "");
    assert_string_equal (dir, expect);
    assert_int_equal (json_integer_value (json_object_get (manifest, "global_step")), 300);
    json_decref (manifest);

    //  The newest one truncated: the one before it, with a warning.
    s_path (path, sizeof path, expect, files [0].file);
    assert_int_equal (truncate (path, 100), 0);
    manifest = NULL;
    int rc = s_latest_logged (fx->root, dir, sizeof dir, &manifest, log, sizeof log, log_path);
    assert_int_equal (rc, PS_OK);
    s_ckpt_path (expect, sizeof expect, fx->root, 200, "");
    assert_string_equal (dir, expect);
    assert_int_equal (json_integer_value (json_object_get (manifest, "step")), 200);
    json_decref (manifest);
    char line [1024];
    s_ckpt_path (final, sizeof final, fx->root, 300, "");
    snprintf (line, sizeof line, "checkpoint %s is not usable: file %s", final, path);
    if (!strstr (log, line) || !strstr (log, "trying an older one"))
        fail_msg ("log \"%s\" lacks \"%s\"", log, line);

    //  Its manifest damaged too: the oldest.
    s_path (path, sizeof path, expect, PS_CHECKPOINT_MANIFEST);
    s_write_text (path, "{\"format\": ");
    manifest = NULL;
    assert_int_equal (ps_checkpoint_latest (fx->root, dir, sizeof dir, &manifest, NULL), PS_OK);
    s_ckpt_path (expect, sizeof expect, fx->root, 100, "");
    assert_string_equal (dir, expect);
    json_decref (manifest);
    //  A buffer too small for the path.
    assert_int_equal (ps_checkpoint_latest (fx->root, dir, 10, NULL, &err), PS_EINVAL);

    //  None left.
    s_path (path, sizeof path, expect, PS_CHECKPOINT_MANIFEST);
    assert_int_equal (unlink (path), 0);
    manifest = (json_t *) 1;
    rc = s_latest_logged (fx->root, dir, sizeof dir, &manifest, log, sizeof log, log_path);
    assert_int_equal (rc, PS_ENOTFOUND);
    assert_null (manifest);
    assert_non_null (strstr (log, "no older one is left"));
}

//  A crash at any point of a checkpoint leaves directories that latest
//  ignores, and the next begin of the same step clears its temporary one.
static void
test_crash_leftovers (void **state)
{
    fixture_t *fx = *state;
    char good [256], tmpdir [256], path [320], dir [256];
    s_commit (fx->root, 5, 3, 0.01, NULL, good, sizeof good);

    //  Crashed after the servers wrote their files: no manifest.
    assert_int_equal (ps_checkpoint_begin (fx->root, 6, tmpdir, sizeof tmpdir, NULL), PS_OK);
    ps_snap_file_t files [NFILES];
    s_snapshot (tmpdir, 6, files);
    //  And a crash midway through replacing step 7 on a file system
    //  without RENAME_EXCHANGE: the old one renamed aside.
    s_ckpt_path (path, sizeof path, fx->root, 7, ".old");
    assert_int_equal (mkdir (path, 0755), 0);
    assert_int_equal (ps_checkpoint_latest (fx->root, dir, sizeof dir, NULL, NULL), PS_OK);
    assert_string_equal (dir, good);

    //  A server was still writing when the crash came: a temporary file of
    //  its own, and something in a subdirectory, and a link to a file
    //  outside, which must survive the clean-up.
    char sub [320], outside [320], link [320];
    s_path (path, sizeof path, tmpdir, "dense%2Fkernel.part0.snap.tmp.123");
    s_write_text (path, "partial");
    s_path (sub, sizeof sub, tmpdir, "sub");
    assert_int_equal (mkdir (sub, 0755), 0);
    s_path (path, sizeof path, sub, "deeper");
    assert_int_equal (mkdir (path, 0755), 0);
    s_path (path, sizeof path, sub, "deeper/file");
    s_write_text (path, "x");
    s_path (outside, sizeof outside, fx->dir, "outside");
    s_write_text (outside, "keep me");
    s_path (link, sizeof link, tmpdir, "link");
    assert_int_equal (symlink (outside, link), 0);
    s_path (link, sizeof link, tmpdir, "dirlink");
    assert_int_equal (symlink (fx->dir, link), 0);
    assert_int_equal (harness_dir_entries (tmpdir), NFILES + 4);

    char again [256];
    ps_error_t err = { 0 };
    if (ps_checkpoint_begin (fx->root, 6, again, sizeof again, &err))
        fail_msg ("begin: %s", err.msg);
    assert_string_equal (again, tmpdir);
    assert_int_equal (harness_dir_entries (tmpdir), 0);
    assert_true (s_exists (outside));
    assert_true (s_exists (good));
    //  begin of another step leaves that one alone.
    s_snapshot (tmpdir, 6, files);
    assert_int_equal (ps_checkpoint_begin (fx->root, 8, again, sizeof again, NULL), PS_OK);
    assert_int_equal (harness_dir_entries (tmpdir), NFILES);
    //  And it still commits.
    json_t *manifest = s_caller_manifest (6, 0.01);
    assert_int_equal (ps_checkpoint_commit (fx->root, 6, tmpdir, manifest, files, NFILES, 3, dir,
                                            sizeof dir, NULL), PS_OK);
    json_decref (manifest);
    assert_int_equal (ps_checkpoint_latest (fx->root, dir, sizeof dir, NULL, NULL), PS_OK);
    s_ckpt_path (path, sizeof path, fx->root, 6, "");
    assert_string_equal (dir, path);
}

//  begin reports a root it cannot create, naming it.
static void
test_begin_errors (void **state)
{
    fixture_t *fx = *state;
    char path [256], root [320], tmpdir [256];
    ps_error_t err = { 0 };
    s_path (path, sizeof path, fx->dir, "file");
    s_write_text (path, "x");
    s_path (root, sizeof root, path, "ckpts");
    assert_int_equal (ps_checkpoint_begin (root, 1, tmpdir, sizeof tmpdir, &err), PS_EIO);
    assert_non_null (strstr (err.msg, path));
    assert_int_equal (ps_checkpoint_begin (path, 1, tmpdir, sizeof tmpdir, &err), PS_EIO);
    assert_non_null (strstr (err.msg, "not a directory"));
    //  Too small a buffer: nothing is created.
    assert_int_equal (ps_checkpoint_begin (fx->root, 1, tmpdir, 12, &err), PS_EINVAL);
    assert_false (s_exists (fx->root));
}

//  The check a run makes before it starts: a root that is a file, or lies
//  under one, is refused; a missing one is created, unless a resume needs
//  what it would hold; a resume needs a checkpoint that verifies; the probe
//  file leaves nothing behind.
static void
test_check_root (void **state)
{
    fixture_t *fx = *state;
    char file [256], under [320];
    ps_error_t err = { 0 };
    s_path (file, sizeof file, fx->dir, "file");
    s_write_text (file, "x");
    s_path (under, sizeof under, file, "ckpts");
    assert_int_equal (ps_checkpoint_check_root (file, false, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "not a directory"));
    assert_int_equal (ps_checkpoint_check_root (under, false, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, under));
    assert_int_equal (ps_checkpoint_check_root (fx->root, true, &err), PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "does not exist"));
    assert_false (s_exists (fx->root));
    assert_int_equal (ps_checkpoint_check_root (fx->root, false, &err), PS_OK);
    assert_true (s_exists (fx->root));
    DIR *dir = opendir (fx->root);
    assert_non_null (dir);
    struct dirent *entry;
    while ((entry = readdir (dir)))
        if (strcmp (entry->d_name, ".") && strcmp (entry->d_name, ".."))
            fail_msg ("the check left %s in the root", entry->d_name);
    closedir (dir);
    assert_int_equal (ps_checkpoint_check_root (fx->root, true, &err), PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "no usable checkpoint"));
    ps_snap_file_t files [NFILES];
    char committed [256];
    s_commit (fx->root, 3, 3, 0.01, files, committed, sizeof committed);
    assert_int_equal (ps_checkpoint_check_root (fx->root, true, &err), PS_OK);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_commit_layout, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_prune, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_recommit_same_step, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_verify_failures, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_commit_refusals, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_latest, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_crash_leftovers, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_begin_errors, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_check_root, s_setup, harness_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
