//  Unit tests for reading checkpoints (common/store/ps_ckpt_verify.c, with
//  the names of common/store/ps_ckpt_layout.c that it trusts): every
//  verification failure with its code and a message naming the file, the
//  choice of the newest usable checkpoint with a warning for each one
//  passed over, and the check a run makes of its root before it starts.
//  The checkpoints are committed by ps_checkpoint.c on real snapshot files
//  (harness_ckpt.h; writing them is test_checkpoint), and every test works
//  in its own mkdtemp directory under /tmp, removed afterwards.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "harness_ckpt.h"
#include "ps_checkpoint.h"

//  The snapshot files of each checkpoint here, harness_ckpt_snapshot's.
#define NFILES HARNESS_CKPT_FILES

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
    harness_ckpt_join (manifest_path, sizeof manifest_path, dir, PS_CHECKPOINT_MANIFEST);
    //  Most cases name the manifest; the file cases name the file.
    harness_ckpt_join (names, len, dir, PS_CHECKPOINT_MANIFEST);
    char file [320];
    harness_ckpt_join (file, sizeof file, dir, files [1].file);
    json_t *manifest = harness_ckpt_load_json (manifest_path);
    json_t *entry = json_array_get (json_object_get (manifest, "files"), 1);
    *code = PS_ECORRUPT;
    *expect = NULL;
    bool rewrite = true;
    switch (damage) {
        case DAMAGE_TRUNCATED:
            assert_int_equal (truncate (file, (off_t) files [1].bytes - 10), 0);
            harness_ckpt_join (names, len, dir, files [1].file);
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
            harness_ckpt_join (names, len, dir, files [1].file);
            *expect = damage == DAMAGE_FLIPPED ? "checksum mismatch" : "checksum trailer";
            rewrite = false;
            break;
        }
        case DAMAGE_SIZE:
            json_object_set_new (entry, "bytes", json_integer ((json_int_t) files [1].bytes + 1));
            harness_ckpt_join (names, len, dir, files [1].file);
            *expect = "as the manifest records";
            break;
        case DAMAGE_CRC:
            json_object_set_new (entry, "crc32", json_integer ((json_int_t) (files [1].crc ^ 1)));
            harness_ckpt_join (names, len, dir, files [1].file);
            *expect = "checksum trailer";
            break;
        case DAMAGE_MISSING:
            assert_int_equal (unlink (file), 0);
            harness_ckpt_join (names, len, dir, files [1].file);
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
            harness_ckpt_write_text (manifest_path, "[1, 2, 3]\n");
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
            harness_ckpt_write_text (manifest_path, "{\"format\": \"ps-cluster-checkpoint\", "
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
                harness_ckpt_join (names, len, dir, files [1].file);
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
    harness_ckpt_fixture_t *fx = *state;
    for (int damage = 0; damage < DAMAGE_COUNT; damage++) {
        char root [192], dir [256], names [320];
        snprintf (root, sizeof root, "%s/case%d", fx->dir, damage);
        ps_snap_file_t files [NFILES];
        harness_ckpt_commit (root, 9, 3, 0.01, files, dir, sizeof dir);
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

static void
test_latest (void **state)
{
    harness_ckpt_fixture_t *fx = *state;
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
    harness_ckpt_join (path, sizeof path, fx->dir, "plain");
    harness_ckpt_write_text (path, "x");
    assert_int_equal (ps_checkpoint_latest (path, dir, sizeof dir, NULL, &err), PS_EIO);
    assert_non_null (strstr (err.msg, path));

    ps_snap_file_t files [NFILES];
    harness_ckpt_commit (fx->root, 100, 5, 0.01, NULL, NULL, 0);
    harness_ckpt_commit (fx->root, 200, 5, 0.01, NULL, NULL, 0);
    harness_ckpt_commit (fx->root, 300, 5, 0.01, files, NULL, 0);
    //  A newer temporary directory, complete with files and a manifest (a
    //  crash just before the final rename), and unrelated entries are
    //  never considered.
    harness_ckpt_commit (fx->root, 900, 5, 0.01, NULL, NULL, 0);
    char final [256];
    harness_ckpt_dir (final, sizeof final, fx->root, 900, "");
    harness_ckpt_dir (expect, sizeof expect, fx->root, 900, ".tmp");
    assert_int_equal (rename (final, expect), 0);
    harness_ckpt_join (path, sizeof path, fx->root, "ckpt-999999999999x");
    assert_int_equal (mkdir (path, 0755), 0);

    manifest = NULL;
    assert_int_equal (ps_checkpoint_latest (fx->root, dir, sizeof dir, &manifest, NULL), PS_OK);
    harness_ckpt_dir (expect, sizeof expect, fx->root, 300, "");
    assert_string_equal (dir, expect);
    assert_int_equal (json_integer_value (json_object_get (manifest, "global_step")), 300);
    json_decref (manifest);

    //  The newest one truncated: the one before it, with a warning.
    harness_ckpt_join (path, sizeof path, expect, files [0].file);
    assert_int_equal (truncate (path, 100), 0);
    manifest = NULL;
    int rc = s_latest_logged (fx->root, dir, sizeof dir, &manifest, log, sizeof log, log_path);
    assert_int_equal (rc, PS_OK);
    harness_ckpt_dir (expect, sizeof expect, fx->root, 200, "");
    assert_string_equal (dir, expect);
    assert_int_equal (json_integer_value (json_object_get (manifest, "step")), 200);
    json_decref (manifest);
    char line [1024];
    harness_ckpt_dir (final, sizeof final, fx->root, 300, "");
    snprintf (line, sizeof line, "checkpoint %s is not usable: file %s", final, path);
    if (!strstr (log, line) || !strstr (log, "trying an older one"))
        fail_msg ("log \"%s\" lacks \"%s\"", log, line);

    //  Its manifest damaged too: the oldest.
    harness_ckpt_join (path, sizeof path, expect, PS_CHECKPOINT_MANIFEST);
    harness_ckpt_write_text (path, "{\"format\": ");
    manifest = NULL;
    assert_int_equal (ps_checkpoint_latest (fx->root, dir, sizeof dir, &manifest, NULL), PS_OK);
    harness_ckpt_dir (expect, sizeof expect, fx->root, 100, "");
    assert_string_equal (dir, expect);
    json_decref (manifest);
    //  A buffer too small for the path.
    assert_int_equal (ps_checkpoint_latest (fx->root, dir, 10, NULL, &err), PS_EINVAL);

    //  None left.
    harness_ckpt_join (path, sizeof path, expect, PS_CHECKPOINT_MANIFEST);
    assert_int_equal (unlink (path), 0);
    manifest = (json_t *) 1;
    rc = s_latest_logged (fx->root, dir, sizeof dir, &manifest, log, sizeof log, log_path);
    assert_int_equal (rc, PS_ENOTFOUND);
    assert_null (manifest);
    assert_non_null (strstr (log, "no older one is left"));
}

//  The check a run makes before it starts: a root that is a file, or lies
//  under one, is refused; a missing one is created, unless a resume needs
//  what it would hold; a resume needs a checkpoint that verifies; the probe
//  file leaves nothing behind.
static void
test_check_root (void **state)
{
    harness_ckpt_fixture_t *fx = *state;
    char file [256], under [320];
    ps_error_t err = { 0 };
    harness_ckpt_join (file, sizeof file, fx->dir, "file");
    harness_ckpt_write_text (file, "x");
    harness_ckpt_join (under, sizeof under, file, "ckpts");
    assert_int_equal (ps_checkpoint_check_root (file, false, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "not a directory"));
    assert_int_equal (ps_checkpoint_check_root (under, false, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, under));
    assert_int_equal (ps_checkpoint_check_root (fx->root, true, &err), PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "does not exist"));
    assert_false (harness_ckpt_exists (fx->root));
    assert_int_equal (ps_checkpoint_check_root (fx->root, false, &err), PS_OK);
    assert_true (harness_ckpt_exists (fx->root));
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
    harness_ckpt_commit (fx->root, 3, 3, 0.01, files, committed, sizeof committed);
    assert_int_equal (ps_checkpoint_check_root (fx->root, true, &err), PS_OK);
}


int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_verify_failures, harness_ckpt_setup,
                                         harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_latest, harness_ckpt_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_check_root, harness_ckpt_setup, harness_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
