//  Snapshots survive a crash. A server trains a few Adam steps, snapshots,
//  and is killed with SIGKILL; a new server process restores from the
//  snapshot and must hold identical values, versions, optimizer slots and
//  step ledger: pulls are bitwise equal, a replayed step is a duplicate, a
//  second snapshot is byte for byte the first, and training continues
//  exactly as it would have on the original server. A torn or corrupted
//  file is refused by name and leaves the server's state unchanged.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ps_client.h"

static void
s_ok (int rc, ps_error_t *err)
{
    if (rc != 0)
        fail_msg ("%s: %s", ps_error_name (rc), err->msg);
}

static ps_client_t *
s_client (harness_server_t *servers, int n)
{
    const char *endpoints [2];
    for (int i = 0; i < n; i++)
        endpoints [i] = servers [i].endpoint;
    ps_error_t err;
    ps_client_t *client = ps_client_new (endpoints, n, 5000, &err);
    if (!client)
        fail_msg ("client: %s", err.msg);
    ps_shape_t kernel, bias;
    ps_shape_set (&kernel, (int64_t []) { 37, 11 }, 2, NULL);
    ps_shape_set (&bias, (int64_t []) { 11 }, 1, NULL);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_GLOROT_UNIFORM);
    init.seed = 7;
    ps_client_add_variable (client, "snap/kernel", &kernel, &init, 2, (int64_t []) { 0, 20, 37 },
                            (int []) { 0, n - 1 }, &err);
    ps_init_default (&init, PS_INIT_ZEROS);
    ps_client_add_variable (client, "snap/bias", &bias, &init, 1, (int64_t []) { 0, 11 },
                            (int []) { n - 1 }, &err);
    return client;
}

static void
s_grads (uint64_t step, float *kernel, float *bias)
{
    for (int i = 0; i < 37 * 11; i++)
        kernel [i] = (float) sin ((double) (step * 131 + (uint64_t) i)) * 0.1f;
    for (int i = 0; i < 11; i++)
        bias [i] = (float) cos ((double) (step * 17 + (uint64_t) i));
}

static char *
s_read_file (const char *path, size_t *len)
{
    FILE *file = fopen (path, "rb");
    assert_non_null (file);
    fseek (file, 0, SEEK_END);
    *len = (size_t) ftell (file);
    fseek (file, 0, SEEK_SET);
    char *data = malloc (*len + 1);
    assert_int_equal (fread (data, 1, *len, file), *len);
    fclose (file);
    return data;
}

static void
test_kill_restore_identical (void **state)
{
    (void) state;
    harness_server_t servers [2];
    for (int i = 0; i < 2; i++)
        assert_int_equal (harness_server_start (&servers [i], NULL), 0);
    ps_client_t *client = s_client (servers, 2);
    ps_error_t err;
    s_ok (ps_client_create (client, &err), &err);
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    opt.lr = 0.01;
    s_ok (ps_client_set_optimizer (client, &opt, &err), &err);
    float gk [37 * 11], gb [11], k1 [37 * 11], b1 [11], k2 [37 * 11], b2 [11];
    const float *grads [] = { gk, gb };
    float *first [] = { k1, b1 }, *second [] = { k2, b2 };
    //  Steps 0..9 except 4: the ledger has a hole to carry across.
    for (uint64_t step = 0; step < 10; step++) {
        if (step == 4)
            continue;
        s_grads (step, gk, gb);
        s_ok (ps_client_push (client, step, 0, grads, NULL, &err), &err);
    }
    char dir1 [64], dir2 [64];
    harness_tmpdir (dir1, sizeof dir1);
    harness_tmpdir (dir2, sizeof dir2);
    ps_snap_file_t *files;
    size_t nfiles;
    s_ok (ps_client_snapshot (client, dir1, &files, &nfiles, &err), &err);
    assert_int_equal (nfiles, 3);
    for (size_t i = 0; i < nfiles; i++) {
        assert_int_equal (files [i].version, 9);
        assert_true (files [i].bytes > 0);
    }
    s_ok (ps_client_pull (client, first, &err), &err);
    //  Continue on the original servers to know where training should go.
    s_grads (10, gk, gb);
    s_ok (ps_client_push_pull (client, 10, 0, grads, first, NULL, &err), &err);
    ps_client_destroy (&client);

    //  Crash both servers; start new processes and restore.
    for (int i = 0; i < 2; i++) {
        assert_int_equal (harness_server_stop (&servers [i], SIGKILL), 128 + SIGKILL);
        assert_int_equal (harness_server_start (&servers [i], NULL), 0);
    }
    client = s_client (servers, 2);
    s_ok (ps_client_restore (client, dir1, &err), &err);
    ps_part_stats_t *stats;
    size_t count;
    s_ok (ps_client_stats (client, 0, &stats, &count, &err), &err);
    assert_int_equal (count, 1);
    assert_int_equal (stats [0].updates, 9);
    free (stats);
    //  A second snapshot is byte for byte the first: values, slots, Adam's
    //  step count, counters and ledger all came back.
    ps_snap_file_t *again;
    size_t nagain;
    s_ok (ps_client_snapshot (client, dir2, &again, &nagain, &err), &err);
    assert_int_equal (nagain, nfiles);
    for (size_t i = 0; i < nfiles; i++) {
        char path1 [512], path2 [512];
        snprintf (path1, sizeof path1, "%s/%s", dir1, files [i].file);
        snprintf (path2, sizeof path2, "%s/%s", dir2, again [i].file);
        size_t len1, len2;
        char *data1 = s_read_file (path1, &len1), *data2 = s_read_file (path2, &len2);
        assert_int_equal (len1, len2);
        assert_memory_equal (data1, data2, len1);
        assert_int_equal (files [i].crc, again [i].crc);
        free (data1);
        free (data2);
    }
    free (again);
    //  Replayed steps are duplicates; the hole (step 4) is not.
    s_grads (3, gk, gb);
    ps_push_info_t info;
    s_ok (ps_client_push (client, 3, 0, grads, &info, &err), &err);
    assert_int_equal (info.duplicates, 3);
    //  Step 10 gives exactly what it gave on the original servers.
    s_grads (10, gk, gb);
    s_ok (ps_client_push_pull (client, 10, 0, grads, second, &info, &err), &err);
    assert_int_equal (info.applied, 3);
    assert_memory_equal (k1, k2, sizeof k1);
    assert_memory_equal (b1, b2, sizeof b1);
    s_grads (4, gk, gb);
    s_ok (ps_client_push (client, 4, 0, grads, &info, &err), &err);
    assert_int_equal (info.applied, 3);

    //  A corrupted snapshot is refused by file name, and the server keeps
    //  the state it had.
    char path [512];
    snprintf (path, sizeof path, "%s/%s", dir2, files [0].file);
    FILE *file = fopen (path, "r+b");
    assert_non_null (file);
    fseek (file, 100, SEEK_SET);
    int byte = fgetc (file);
    fseek (file, 100, SEEK_SET);
    fputc (byte ^ 0x10, file);
    fclose (file);
    assert_int_equal (ps_client_restore (client, dir2, &err), PS_ECORRUPT);
    assert_non_null (strstr (err.msg, files [0].file));
    //  Truncation too.
    snprintf (path, sizeof path, "%s/%s", dir2, files [2].file);
    assert_int_equal (truncate (path, (off_t) files [2].bytes / 2), 0);
    ps_client_t *other = s_client (servers, 2);
    assert_int_equal (ps_client_restore (other, dir2, &err), PS_ECORRUPT);
    ps_client_destroy (&other);
    s_ok (ps_client_stats (client, 0, &stats, &count, &err), &err);
    assert_int_equal (stats [0].updates, 11);
    free (stats);
    //  A file copied over another partition's name is refused by name.
    char from [512], onto [512], command [1100];
    snprintf (from, sizeof from, "%s/%s", dir1, files [1].file);
    snprintf (onto, sizeof onto, "%s/%s", dir1, files [0].file);
    snprintf (command, sizeof command, "cp '%s' '%s'", from, onto);
    assert_int_equal (system (command), 0);
    assert_int_equal (ps_client_restore (client, dir1, &err), PS_ECORRUPT);
    assert_non_null (strstr (err.msg, "holds partition"));
    //  A missing directory is a clear error too.
    assert_int_equal (ps_client_restore (client, "/nonexistent/ckpt", &err), PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "/nonexistent/ckpt"));

    free (files);
    ps_client_destroy (&client);
    for (int i = 0; i < 2; i++)
        assert_int_equal (harness_server_stop (&servers [i], SIGTERM), 0);
    harness_rmtree (dir1);
    harness_rmtree (dir2);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_kill_restore_identical),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
