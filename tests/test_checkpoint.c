//  Unit tests for writing checkpoints (common/store/ps_checkpoint.c): the
//  layout a commit leaves, the manifest it writes, pruning (and the bases
//  of incremental checkpoints it keeps, also while a kept manifest cannot
//  be read), committing a
//  step again, the arguments a commit refuses before it writes anything,
//  the leftovers of a simulated crash and the next begin that clears them,
//  and a root that begin cannot create. Reading checkpoints back
//  (verification, the newest usable one, the check of a root before a
//  run) is test_ckpt_verify. The snapshot files are real ones, written by
//  ps_partition_save, and every test works in its own mkdtemp directory
//  under /tmp, removed afterwards (harness_ckpt.h).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "harness_ckpt.h"
#include "ps_checkpoint.h"
#include "ps_snapshot.h"

//  The snapshot files of each checkpoint here, harness_ckpt_snapshot's.
#define NFILES HARNESS_CKPT_FILES

//  A commit leaves ckpt-<step> holding the snapshot files and a manifest
//  with our keys, the caller's keys untouched and in order, and one entry
//  per file; nothing temporary is left anywhere.
static void
test_commit_layout (void **state)
{
    harness_ckpt_fixture_t *fx = *state;
    char tmpdir [256], dir [256], expect [256], path [320];
    ps_error_t err = { 0 };
    assert_false (harness_ckpt_exists (fx->root));
    //  The root is created, parents and all.
    if (ps_checkpoint_begin (fx->root, 42, tmpdir, sizeof tmpdir, &err))
        fail_msg ("begin: %s", err.msg);
    harness_ckpt_dir (expect, sizeof expect, fx->root, 42, ".tmp");
    assert_string_equal (tmpdir, expect);
    assert_int_equal (harness_dir_entries (tmpdir), 0);

    ps_snap_file_t files [NFILES];
    harness_ckpt_snapshot (tmpdir, 42, files);
    //  What the servers report is what ps_snapshot_summary reads.
    for (int i = 0; i < NFILES; i++) {
        uint64_t bytes;
        uint32_t crc;
        harness_ckpt_join (path, sizeof path, tmpdir, files [i].file);
        assert_int_equal (ps_snapshot_summary (path, &bytes, &crc, NULL), PS_OK);
        assert_int_equal (bytes, files [i].bytes);
        assert_int_equal (crc, files [i].crc);
    }
    json_t *caller = harness_ckpt_manifest (42, 0.001);
    json_t *before = json_deep_copy (caller);
    assert_non_null (before);
    if (ps_checkpoint_commit (fx->root, 42, tmpdir, caller, files, NFILES, 3, dir, sizeof dir,
                              &err))
        fail_msg ("commit: %s", err.msg);
    //  The caller's object is left as it was.
    assert_true (json_equal (caller, before));

    harness_ckpt_dir (expect, sizeof expect, fx->root, 42, "");
    assert_string_equal (dir, expect);
    assert_int_equal (harness_dir_entries (fx->root), 1);
    assert_false (harness_ckpt_exists (tmpdir));
    assert_int_equal (harness_dir_entries (dir), NFILES + 1);
    harness_ckpt_join (path, sizeof path, dir, "MANIFEST.json.tmp");
    assert_false (harness_ckpt_exists (path));

    harness_ckpt_join (path, sizeof path, dir, PS_CHECKPOINT_MANIFEST);
    json_t *manifest = harness_ckpt_load_json (path);
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
        harness_ckpt_join (path, sizeof path, dir, files [i].file);
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
    harness_ckpt_join (path, sizeof path, fx->dir, "backup");
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
    harness_ckpt_fixture_t *fx = *state;
    char path [256], other [256];
    char tmpdir [256];
    assert_int_equal (ps_checkpoint_begin (fx->root, 1, tmpdir, sizeof tmpdir, NULL), PS_OK);
    harness_ckpt_join (path, sizeof path, fx->root, "notes.txt");
    harness_ckpt_write_text (path, "not a checkpoint\n");
    const char *dirs [] = { "ckpt-5", "ckpt-0000000000001", "ckpt-000000000002.old", "other" };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs [0]; i++) {
        harness_ckpt_join (path, sizeof path, fx->root, dirs [i]);
        assert_int_equal (mkdir (path, 0755), 0);
    }
    //  A file named like a checkpoint is not one.
    harness_ckpt_dir (path, sizeof path, fx->root, 3, "");
    harness_ckpt_write_text (path, "x");
    int unrelated = 7;
    assert_int_equal (harness_dir_entries (fx->root), unrelated);

    uint64_t steps [] = { 10, 20, 30, 40, 50 };
    for (int i = 0; i < 5; i++) {
        harness_ckpt_commit (fx->root, steps [i], 3, 0.01, NULL, NULL, 0);
        int expect = i + 1 < 3 ? i + 1 : 3;
        assert_int_equal (harness_dir_entries (fx->root), unrelated + expect);
    }
    for (int i = 0; i < 5; i++) {
        harness_ckpt_dir (path, sizeof path, fx->root, steps [i], "");
        assert_int_equal (harness_ckpt_exists (path), i >= 2);
    }
    assert_true (harness_ckpt_exists (tmpdir));
    harness_ckpt_join (path, sizeof path, fx->root, "notes.txt");
    assert_true (harness_ckpt_exists (path));
    harness_ckpt_dir (path, sizeof path, fx->root, 3, "");
    assert_true (harness_ckpt_exists (path));

    //  After a rewind, the step just committed is kept even though newer
    //  steps exist; the oldest of the others goes.
    harness_ckpt_commit (fx->root, 25, 3, 0.01, NULL, other, sizeof other);
    assert_true (harness_ckpt_exists (other));
    for (int i = 0; i < 5; i++) {
        harness_ckpt_dir (path, sizeof path, fx->root, steps [i], "");
        assert_int_equal (harness_ckpt_exists (path), i >= 3);
    }
    //  keep = 1 leaves only the new one.
    harness_ckpt_commit (fx->root, 60, 1, 0.01, NULL, NULL, 0);
    assert_int_equal (harness_dir_entries (fx->root), unrelated + 1);
    char dir [256];
    json_t *manifest = NULL;
    assert_int_equal (ps_checkpoint_latest (fx->root, dir, sizeof dir, &manifest, NULL), PS_OK);
    harness_ckpt_dir (path, sizeof path, fx->root, 60, "");
    assert_string_equal (dir, path);
    assert_int_equal (json_integer_value (json_object_get (manifest, "step")), 60);
    json_decref (manifest);
}

//  The same step committed again (after a rewind) replaces the old
//  checkpoint completely and leaves nothing else behind.
static void
test_recommit_same_step (void **state)
{
    harness_ckpt_fixture_t *fx = *state;
    char dir [256], again [256], path [320];
    ps_snap_file_t first [NFILES], second [NFILES];
    harness_ckpt_commit (fx->root, 7, 3, 0.1, first, dir, sizeof dir);

    char tmpdir [256];
    ps_error_t err = { 0 };
    assert_int_equal (ps_checkpoint_begin (fx->root, 7, tmpdir, sizeof tmpdir, &err), PS_OK);
    //  Other contents this time, and one file fewer.
    harness_ckpt_snapshot (tmpdir, 1000, second);
    harness_ckpt_join (path, sizeof path, tmpdir, second [2].file);
    assert_int_equal (unlink (path), 0);
    assert_int_not_equal (first [0].crc, second [0].crc);
    json_t *manifest = harness_ckpt_manifest (7, 0.05);
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

//  A commit refuses bad arguments before it writes anything: the final
//  directory does not appear, the temporary one keeps the servers' files
//  and gets no manifest, and a correct commit from it still succeeds.
static void
test_commit_refusals (void **state)
{
    harness_ckpt_fixture_t *fx = *state;
    char tmpdir [256], final [256], path [320], other [256];
    ps_error_t err = { 0 };
    assert_int_equal (ps_checkpoint_begin (fx->root, 11, tmpdir, sizeof tmpdir, NULL), PS_OK);
    ps_snap_file_t files [NFILES], bad [NFILES];
    harness_ckpt_snapshot (tmpdir, 11, files);
    harness_ckpt_dir (final, sizeof final, fx->root, 11, "");
    json_t *manifest = harness_ckpt_manifest (11, 0.01);

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
            harness_ckpt_join (path, sizeof path, tmpdir, f->file);
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
    harness_ckpt_join (path, sizeof path, tmpdir, files [2].file);
    char moved [320];
    harness_ckpt_join (moved, sizeof moved, fx->dir, "moved.snap");
    assert_int_equal (rename (path, moved), 0);
    assert_int_equal (ps_checkpoint_commit (fx->root, 11, tmpdir, manifest, files, NFILES, 3,
                                            NULL, 0, &err), PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, path));
    assert_int_equal (rename (moved, path), 0);

    //  None of that left a trace.
    assert_false (harness_ckpt_exists (final));
    assert_int_equal (harness_dir_entries (tmpdir), NFILES);
    assert_int_equal (harness_dir_entries (fx->root), 1);

    if (ps_checkpoint_commit (fx->root, 11, tmpdir, manifest, files, NFILES, 3, other,
                              sizeof other, &err))
        fail_msg ("commit: %s", err.msg);
    assert_string_equal (other, final);
    assert_int_equal (ps_checkpoint_verify (final, NULL, NULL), PS_OK);
    json_decref (manifest);
}


//  Begin, snapshot and commit checkpoint `step` of root keeping `keep`,
//  naming base_step's checkpoint as its base (0: none, a full one).
static int
s_commit_with_base (const char *root, uint64_t step, uint64_t base_step, int keep,
                    ps_error_t *err)
{
    char tmpdir [256], base [64];
    ps_snap_file_t files [NFILES];
    assert_int_equal (ps_checkpoint_begin (root, step, tmpdir, sizeof tmpdir, NULL), PS_OK);
    harness_ckpt_snapshot (tmpdir, step, files);
    json_t *manifest = harness_ckpt_manifest (step, 0.01);
    if (base_step) {
        ps_ckpt_layout_dirname (base, sizeof base, base_step, "");
        json_object_set_new (manifest, PS_CHECKPOINT_BASE, json_string (base));
    }
    int rc = ps_checkpoint_commit (root, step, tmpdir, manifest, files, NFILES, keep, NULL, 0,
                                   err);
    json_decref (manifest);
    return rc;
}

//  Whether checkpoint step of root exists.
static bool
s_kept (const char *root, uint64_t step)
{
    char path [256];
    harness_ckpt_dir (path, sizeof path, root, step, "");
    return harness_ckpt_exists (path);
}

//  Pruning never removes the full checkpoint that a kept incremental one
//  names as its base, however old; once no kept one needs it, it goes. A
//  base that is not an older checkpoint of the root is refused before
//  anything is written.
static void
test_prune_keeps_bases (void **state)
{
    harness_ckpt_fixture_t *fx = *state;
    ps_error_t err = { 0 };
    //  Full 1, incremental 2 and 3 on top of it, keeping 2: 3 and 2 are
    //  the newest, and both need 1.
    assert_int_equal (s_commit_with_base (fx->root, 1, 0, 2, &err), PS_OK);
    assert_int_equal (s_commit_with_base (fx->root, 2, 1, 2, &err), PS_OK);
    assert_int_equal (s_commit_with_base (fx->root, 3, 1, 2, &err), PS_OK);
    assert_true (s_kept (fx->root, 1) && s_kept (fx->root, 2) && s_kept (fx->root, 3));
    //  Full 4: 4 and 3 are kept, 3 still needs 1, and 2 goes.
    assert_int_equal (s_commit_with_base (fx->root, 4, 0, 2, &err), PS_OK);
    assert_true (s_kept (fx->root, 1) && s_kept (fx->root, 3) && s_kept (fx->root, 4));
    assert_false (s_kept (fx->root, 2));
    //  Incremental 5 on 4: 5 and 4 are kept, and 1 is needed no more.
    assert_int_equal (s_commit_with_base (fx->root, 5, 4, 2, &err), PS_OK);
    assert_true (s_kept (fx->root, 4) && s_kept (fx->root, 5));
    assert_false (s_kept (fx->root, 1) || s_kept (fx->root, 3));
    //  A base that is gone, or not older, is refused, naming it.
    assert_int_equal (s_commit_with_base (fx->root, 6, 2, 2, &err), PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "ckpt-000000000002"));
    assert_int_equal (s_commit_with_base (fx->root, 7, 7, 2, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "older checkpoint"));
    assert_false (s_kept (fx->root, 6) || s_kept (fx->root, 7));
}

//  A kept checkpoint whose manifest cannot be read (cut short here, as a
//  failing disk or a crash mid-write would leave it) may be an incremental
//  one on any older full checkpoint: while it is, pruning removes no full
//  checkpoint, and once it reads again the pruning catches up.
static void
test_prune_unknown_base (void **state)
{
    harness_ckpt_fixture_t *fx = *state;
    ps_error_t err = { 0 };
    assert_int_equal (s_commit_with_base (fx->root, 1, 0, 2, &err), PS_OK);
    assert_int_equal (s_commit_with_base (fx->root, 2, 1, 2, &err), PS_OK);
    char dir [256], manifest [300];
    harness_ckpt_dir (dir, sizeof dir, fx->root, 2, "");
    snprintf (manifest, sizeof manifest, "%s/%s", dir, PS_CHECKPOINT_MANIFEST);
    size_t len;
    uint8_t *whole = harness_slurp (manifest, &len);
    harness_spit (manifest, whole, len / 2);
    //  Full 3, keeping 2: 3 and 2 are kept, and 2 may still need 1.
    assert_int_equal (s_commit_with_base (fx->root, 3, 0, 2, &err), PS_OK);
    assert_true (s_kept (fx->root, 1) && s_kept (fx->root, 2) && s_kept (fx->root, 3));
    //  Whole again, 2 is known to need 1; full 4 then leaves 4 and 3.
    harness_spit (manifest, whole, len);
    free (whole);
    assert_int_equal (s_commit_with_base (fx->root, 4, 0, 2, &err), PS_OK);
    assert_true (s_kept (fx->root, 3) && s_kept (fx->root, 4));
    assert_false (s_kept (fx->root, 1) || s_kept (fx->root, 2));
}

//  A crash at any point of a checkpoint leaves directories that latest
//  ignores, and the next begin of the same step clears its temporary one.
static void
test_crash_leftovers (void **state)
{
    harness_ckpt_fixture_t *fx = *state;
    char good [256], tmpdir [256], path [320], dir [256];
    harness_ckpt_commit (fx->root, 5, 3, 0.01, NULL, good, sizeof good);

    //  Crashed after the servers wrote their files: no manifest.
    assert_int_equal (ps_checkpoint_begin (fx->root, 6, tmpdir, sizeof tmpdir, NULL), PS_OK);
    ps_snap_file_t files [NFILES];
    harness_ckpt_snapshot (tmpdir, 6, files);
    //  And a crash midway through replacing step 7 on a file system
    //  without RENAME_EXCHANGE: the old one renamed aside.
    harness_ckpt_dir (path, sizeof path, fx->root, 7, ".old");
    assert_int_equal (mkdir (path, 0755), 0);
    assert_int_equal (ps_checkpoint_latest (fx->root, dir, sizeof dir, NULL, NULL), PS_OK);
    assert_string_equal (dir, good);

    //  A server was still writing when the crash came: a temporary file of
    //  its own, and something in a subdirectory, and a link to a file
    //  outside, which must survive the clean-up.
    char sub [320], outside [320], link [320];
    harness_ckpt_join (path, sizeof path, tmpdir, "dense%2Fkernel.part0.snap.tmp.123");
    harness_ckpt_write_text (path, "partial");
    harness_ckpt_join (sub, sizeof sub, tmpdir, "sub");
    assert_int_equal (mkdir (sub, 0755), 0);
    harness_ckpt_join (path, sizeof path, sub, "deeper");
    assert_int_equal (mkdir (path, 0755), 0);
    harness_ckpt_join (path, sizeof path, sub, "deeper/file");
    harness_ckpt_write_text (path, "x");
    harness_ckpt_join (outside, sizeof outside, fx->dir, "outside");
    harness_ckpt_write_text (outside, "keep me");
    harness_ckpt_join (link, sizeof link, tmpdir, "link");
    assert_int_equal (symlink (outside, link), 0);
    harness_ckpt_join (link, sizeof link, tmpdir, "dirlink");
    assert_int_equal (symlink (fx->dir, link), 0);
    assert_int_equal (harness_dir_entries (tmpdir), NFILES + 4);

    char again [256];
    ps_error_t err = { 0 };
    if (ps_checkpoint_begin (fx->root, 6, again, sizeof again, &err))
        fail_msg ("begin: %s", err.msg);
    assert_string_equal (again, tmpdir);
    assert_int_equal (harness_dir_entries (tmpdir), 0);
    assert_true (harness_ckpt_exists (outside));
    assert_true (harness_ckpt_exists (good));
    //  begin of another step leaves that one alone.
    harness_ckpt_snapshot (tmpdir, 6, files);
    assert_int_equal (ps_checkpoint_begin (fx->root, 8, again, sizeof again, NULL), PS_OK);
    assert_int_equal (harness_dir_entries (tmpdir), NFILES);
    //  And it still commits.
    json_t *manifest = harness_ckpt_manifest (6, 0.01);
    assert_int_equal (ps_checkpoint_commit (fx->root, 6, tmpdir, manifest, files, NFILES, 3, dir,
                                            sizeof dir, NULL), PS_OK);
    json_decref (manifest);
    assert_int_equal (ps_checkpoint_latest (fx->root, dir, sizeof dir, NULL, NULL), PS_OK);
    harness_ckpt_dir (path, sizeof path, fx->root, 6, "");
    assert_string_equal (dir, path);
}

//  begin reports a root it cannot create, naming it.
static void
test_begin_errors (void **state)
{
    harness_ckpt_fixture_t *fx = *state;
    char path [256], root [320], tmpdir [256];
    ps_error_t err = { 0 };
    harness_ckpt_join (path, sizeof path, fx->dir, "file");
    harness_ckpt_write_text (path, "x");
    harness_ckpt_join (root, sizeof root, path, "ckpts");
    assert_int_equal (ps_checkpoint_begin (root, 1, tmpdir, sizeof tmpdir, &err), PS_EIO);
    assert_non_null (strstr (err.msg, path));
    assert_int_equal (ps_checkpoint_begin (path, 1, tmpdir, sizeof tmpdir, &err), PS_EIO);
    assert_non_null (strstr (err.msg, "not a directory"));
    //  Too small a buffer: nothing is created.
    assert_int_equal (ps_checkpoint_begin (fx->root, 1, tmpdir, 12, &err), PS_EINVAL);
    assert_false (harness_ckpt_exists (fx->root));
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_commit_layout, harness_ckpt_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_prune, harness_ckpt_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_prune_keeps_bases, harness_ckpt_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_prune_unknown_base, harness_ckpt_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_recommit_same_step, harness_ckpt_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_commit_refusals, harness_ckpt_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_crash_leftovers, harness_ckpt_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_begin_errors, harness_ckpt_setup,
                                         harness_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
