//  The checkpoint tests' fixture: see harness_ckpt.h.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness_ckpt.h"
#include "ps_partition.h"

int
harness_ckpt_setup (void **state)
{
    int rc = harness_dir_setup (state, sizeof (harness_ckpt_fixture_t));
    if (rc == 0) {
        harness_ckpt_fixture_t *fx = *state;
        snprintf (fx->root, sizeof fx->root, "%s/run/ckpts", fx->dir);
    }
    return rc;
}

bool
harness_ckpt_exists (const char *path)
{
    struct stat st;
    return lstat (path, &st) == 0;
}

void
harness_ckpt_write_text (const char *path, const char *text)
{
    FILE *file = fopen (path, "wb");
    assert_non_null (file);
    assert_int_equal (fwrite (text, 1, strlen (text), file), strlen (text));
    assert_int_equal (fclose (file), 0);
}

void
harness_ckpt_join (char *buf, size_t len, const char *dir, const char *name)
{
    int n = snprintf (buf, len, "%s/%s", dir, name);
    assert_true (n > 0 && (size_t) n < len);
}

//  The path of the checkpoint directory of step in root.
void
harness_ckpt_dir (char *buf, size_t len, const char *root, uint64_t step, const char *suffix)
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
void
harness_ckpt_snapshot (const char *dir, uint64_t seed, ps_snap_file_t *files)
{
    int64_t kernel [] = { 6, 4 };
    int64_t bias [] = { 4 };
    s_save (dir, "dense/kernel", 0, kernel, 2, 0, 3, 0, seed, &files [0]);
    s_save (dir, "dense/kernel", 1, kernel, 2, 3, 6, 1, seed, &files [1]);
    s_save (dir, "dense/bias", 0, bias, 1, 0, 4, 1, seed, &files [2]);
}

//  The coordinator's part of a manifest (schemas/checkpoint.md), with lr
//  as given.
json_t *
harness_ckpt_manifest (uint64_t step, double lr)
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
void
harness_ckpt_commit (const char *root, uint64_t step, int keep, double lr, ps_snap_file_t *files,
                     char *dir, size_t len)
{
    char tmpdir [256];
    ps_error_t err = { 0 };
    if (ps_checkpoint_begin (root, step, tmpdir, sizeof tmpdir, &err))
        fail_msg ("begin: %s", err.msg);
    ps_snap_file_t local [HARNESS_CKPT_FILES];
    if (!files)
        files = local;
    harness_ckpt_snapshot (tmpdir, step, files);
    json_t *manifest = harness_ckpt_manifest (step, lr);
    if (ps_checkpoint_commit (root, step, tmpdir, manifest, files, HARNESS_CKPT_FILES, keep, dir,
                              len, &err))
        fail_msg ("commit: %s", err.msg);
    json_decref (manifest);
}

json_t *
harness_ckpt_load_json (const char *path)
{
    json_error_t jerr;
    json_t *json = json_load_file (path, 0, &jerr);
    if (!json)
        fail_msg ("%s: %s", path, jerr.text);
    return json;
}
