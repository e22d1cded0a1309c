//  Unit tests for the layout of a checkpoint root
//  (common/store/ps_ckpt_layout.c), which test_checkpoint and
//  test_ckpt_verify reach only through the writer and the reader: the
//  directory names and the one canonical name per step that counts as a
//  checkpoint (leading zeros, suffixes, steps past 2^64 - 1 refused); the
//  step of a checkpoint's path; joining paths and the room a caller's
//  buffer needs; the plain file names a manifest may list and the name a
//  partition's file must have; a name listed twice; and the listing of a
//  real root, newest first, without .tmp and .old directories, files or
//  symbolic links. The root is a mkdtemp directory under /tmp, removed
//  afterwards.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness_ckpt.h"
#include "ps_ckpt_layout.h"
#include "ps_snapshot.h"

static void
test_names (void **state)
{
    (void) state;
    char name [64];
    ps_ckpt_layout_dirname (name, sizeof name, 42, "");
    assert_string_equal (name, "ckpt-000000000042");
    ps_ckpt_layout_dirname (name, sizeof name, 42, ".tmp");
    assert_string_equal (name, "ckpt-000000000042.tmp");
    //  Past 12 digits the name takes more, and still parses to its step.
    ps_ckpt_layout_dirname (name, sizeof name, UINT64_MAX, "");
    assert_string_equal (name, "ckpt-18446744073709551615");
    uint64_t step = 0;
    assert_true (ps_ckpt_layout_parse (name, &step));
    assert_true (step == UINT64_MAX);
    assert_true (ps_ckpt_layout_parse ("ckpt-000000000042", &step));
    assert_true (step == 42);
    assert_true (ps_ckpt_layout_parse ("ckpt-000000000000", &step));
    assert_true (step == 0);

    //  Only the canonical name counts: what a crash leaves, other
    //  spellings of the same step, and steps no uint64_t holds do not.
    const char *refused [] = {
        "ckpt-000000000042.tmp", "ckpt-000000000042.old", "ckpt-42", "ckpt-0000000000042",
        "ckpt-00000000042", "ckpt-18446744073709551616", "ckpt-000000000000000000042",
        "ckpt-+00000000042", "ckpt- 00000000042", "ckpt-", "CKPT-000000000042",
        "xckpt-000000000042", "", "ckpt-000000000042/",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused [0]; i++) {
        step = 7;
        if (ps_ckpt_layout_parse (refused [i], &step))
            fail_msg ("\"%s\" parsed as a checkpoint name", refused [i]);
        assert_true (step == 7);
    }

    //  The step of a checkpoint's path, its last component only.
    assert_true (ps_ckpt_layout_dir_step ("/run/ckpts/ckpt-000000000042", &step));
    assert_true (step == 42);
    assert_true (ps_ckpt_layout_dir_step ("/run/ckpts/ckpt-000000000043//", &step));
    assert_true (step == 43);
    assert_true (ps_ckpt_layout_dir_step ("ckpt-000000000044", &step));
    assert_true (step == 44);
    assert_false (ps_ckpt_layout_dir_step ("/run/ckpt-000000000042/sub", &step));
    assert_false (ps_ckpt_layout_dir_step ("/run/ckpts/ckpt-000000000042.tmp", &step));
    assert_false (ps_ckpt_layout_dir_step ("/", &step));
    assert_false (ps_ckpt_layout_dir_step ("", &step));
}

static void
test_paths (void **state)
{
    (void) state;
    char buf [24];
    ps_error_t err = { 0 };
    assert_int_equal (ps_ckpt_layout_join (buf, sizeof buf, "/a/b", "MANIFEST.json", &err),
                      PS_OK);
    assert_string_equal (buf, "/a/b/MANIFEST.json");
    //  One byte short for the NUL: refused, naming both parts and the room.
    assert_int_equal (ps_ckpt_layout_join (buf, sizeof buf, "/a/bcdefgh", "MANIFEST.json",
                                           &err), PS_EINVAL);
    assert_int_equal (err.code, PS_EINVAL);
    assert_string_equal (err.msg, "path /a/bcdefgh/MANIFEST.json is longer than 23 bytes");
    assert_int_equal (ps_ckpt_layout_join (buf, sizeof buf, "/a/bcdefg", "MANIFEST.json",
                                           NULL), PS_OK);
    assert_string_equal (buf, "/a/bcdefg/MANIFEST.json");

    assert_int_equal (ps_ckpt_layout_check_room ("/r/ckpt-000000000001", 21, &err), PS_OK);
    assert_int_equal (ps_ckpt_layout_check_room ("/r/ckpt-000000000001", 20, &err), PS_EINVAL);
    assert_string_equal (err.msg, "checkpoint /r/ckpt-000000000001 needs 21 bytes, "
                                  "the buffer has 20");
}

static void
test_file_names (void **state)
{
    (void) state;
    assert_true (ps_ckpt_layout_plain_name ("dense_kernel.0.snap"));
    assert_true (ps_ckpt_layout_plain_name ("..."));
    assert_false (ps_ckpt_layout_plain_name (""));
    assert_false (ps_ckpt_layout_plain_name ("."));
    assert_false (ps_ckpt_layout_plain_name (".."));
    assert_false (ps_ckpt_layout_plain_name ("a/b"));
    assert_false (ps_ckpt_layout_plain_name ("/etc/passwd"));

    //  A listed file must carry the name the servers give its partition.
    char expect [256];
    assert_int_equal (ps_snapshot_filename ("dense/kernel", 1, expect, sizeof expect), PS_OK);
    ps_error_t err = { 0 };
    assert_int_equal (ps_ckpt_layout_check_file (expect, "dense/kernel", 1, "file M", 0,
                                                 PS_ECORRUPT, &err), PS_OK);
    //  The same file listed for another partition: the code asked for,
    //  naming where the entry came from, the name and the one expected.
    assert_int_equal (ps_ckpt_layout_check_file (expect, "dense/kernel", 2, "file M", 3,
                                                 PS_ECORRUPT, &err), PS_ECORRUPT);
    assert_int_equal (err.code, PS_ECORRUPT);
    char other [256];
    assert_int_equal (ps_snapshot_filename ("dense/kernel", 2, other, sizeof other), PS_OK);
    if (!strstr (err.msg, "file M: files[3]: file name") || !strstr (err.msg, expect)
    ||  !strstr (err.msg, other) || !strstr (err.msg, "partition dense/kernel/2"))
        fail_msg ("message \"%s\" does not name the entry, %s and %s", err.msg, expect, other);
    assert_int_equal (ps_ckpt_layout_check_file ("../x", "dense/kernel", 1, "checkpoint D", 0,
                                                 PS_EINVAL, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "checkpoint D: files[0]: file name \"../x\" is not a "
                                      "plain name"));
    //  An invalid variable name is refused whatever the file's name.
    assert_int_equal (ps_ckpt_layout_check_file ("x.snap", "", 0, "file M", 1,
                                                 PS_ECORRUPT, &err), PS_ECORRUPT);
    assert_non_null (strstr (err.msg, "file M: files[1]: "));

    const char *distinct [] = { "c", "a", "b" };
    assert_null (ps_ckpt_layout_find_duplicate (distinct, 3));
    const char *twice [] = { "c", "a", "b", "a" };
    assert_string_equal (ps_ckpt_layout_find_duplicate (twice, 4), "a");
    assert_null (ps_ckpt_layout_find_duplicate (twice, 0));
}

//  A root holding checkpoints among what a crash and a user leave: only
//  the directories with canonical names are listed, newest first.
static void
test_list (void **state)
{
    harness_ckpt_fixture_t *fx = *state;
    uint64_t *steps = (uint64_t *) 1;
    size_t count = 9;
    ps_error_t err = { 0 };
    assert_int_equal (ps_ckpt_layout_list (fx->root, &steps, &count, &err), PS_ENOTFOUND);
    assert_null (steps);
    assert_int_equal (count, 0);
    assert_non_null (strstr (err.msg, fx->root));

    char path [256];
    harness_ckpt_join (path, sizeof path, fx->dir, "run");
    assert_int_equal (mkdir (path, 0755), 0);
    assert_int_equal (mkdir (fx->root, 0755), 0);
    assert_int_equal (ps_ckpt_layout_list (fx->root, &steps, &count, &err), PS_OK);
    assert_int_equal (count, 0);
    free (steps);

    const uint64_t made [] = { 5, 1000000000000ULL, 12, 7 };
    for (size_t i = 0; i < sizeof made / sizeof made [0]; i++) {
        harness_ckpt_dir (path, sizeof path, fx->root, made [i], "");
        assert_int_equal (mkdir (path, 0755), 0);
    }
    harness_ckpt_dir (path, sizeof path, fx->root, 99, ".tmp");
    assert_int_equal (mkdir (path, 0755), 0);
    harness_ckpt_dir (path, sizeof path, fx->root, 98, ".old");
    assert_int_equal (mkdir (path, 0755), 0);
    //  A file and a link with checkpoint names, and a link to a real
    //  checkpoint: pruning removes what is listed, so none of them is.
    harness_ckpt_dir (path, sizeof path, fx->root, 50, "");
    harness_ckpt_write_text (path, "not a directory");
    char target [256];
    harness_ckpt_dir (target, sizeof target, fx->root, 5, "");
    harness_ckpt_dir (path, sizeof path, fx->root, 60, "");
    assert_int_equal (symlink (target, path), 0);
    harness_ckpt_join (path, sizeof path, fx->root, "ckpt-7");
    assert_int_equal (mkdir (path, 0755), 0);

    assert_int_equal (ps_ckpt_layout_list (fx->root, &steps, &count, &err), PS_OK);
    assert_int_equal (count, 4);
    assert_true (steps [0] == 1000000000000ULL);
    assert_true (steps [1] == 12);
    assert_true (steps [2] == 7);
    assert_true (steps [3] == 5);
    free (steps);

    //  A root that is a file cannot be listed.
    harness_ckpt_join (path, sizeof path, fx->dir, "file");
    harness_ckpt_write_text (path, "x");
    assert_int_equal (ps_ckpt_layout_list (path, &steps, &count, &err), PS_EIO);
    assert_null (steps);
    assert_non_null (strstr (err.msg, path));
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_names),
        cmocka_unit_test (test_paths),
        cmocka_unit_test (test_file_names),
        cmocka_unit_test_setup_teardown (test_list, harness_ckpt_setup, harness_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
