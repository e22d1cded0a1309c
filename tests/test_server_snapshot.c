//  Snapshots survive a crash. A server trains a few Adam steps, snapshots,
//  and is killed with SIGKILL; a new server process restores from the
//  snapshot and must hold identical values, versions, optimizer slots and
//  step ledger: pulls are bitwise equal, a replayed step is a duplicate, a
//  second snapshot is byte for byte the first, and training continues
//  exactly as it would have on the original server. A torn or corrupted
//  file, or one whose optimizer settings are out of range, is refused by
//  name and leaves the server's state unchanged.
//
//  Snapshots and restores stay inside the server's --checkpoint-root:
//  absolute paths, '..', symlinks leading out, empty or overlong names and
//  control characters are refused by name, and a server without a root
//  refuses both requests. So does a probe of the root (probe_root, the
//  coordinator's check that it shares the directory): its file lands in
//  the root itself, holding the token, and any other name is refused.
//
//  The servers are secured: snapshots, restores and the rest of the
//  control go through chief:0's client, pushes and pulls through
//  worker:0's (harness_clients_t).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "harness.h"
#include "harness_case.h"
#include "ps_bytes.h"
#include "ps_client.h"

//  The control and data clients of the n servers, holding snap/kernel and
//  snap/bias.
static void
s_clients (harness_clients_t *clients, harness_server_t *servers, int n)
{
    const char *endpoints [2];
    for (int i = 0; i < n; i++)
        endpoints [i] = servers [i].endpoint;
    ps_error_t err;
    harness_ok (harness_clients_open (clients, endpoints, n, 5000, false, &err), &err);
    ps_shape_t kernel, bias;
    ps_shape_set (&kernel, (int64_t []) { 37, 11 }, 2, NULL);
    ps_shape_set (&bias, (int64_t []) { 11 }, 1, NULL);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_GLOROT_UNIFORM);
    init.seed = 7;
    harness_clients_add_variable (clients, "snap/kernel", &kernel, &init, 2,
                                  (int64_t []) { 0, 20, 37 }, (int []) { 0, n - 1 }, &err);
    ps_init_default (&init, PS_INIT_ZEROS);
    harness_clients_add_variable (clients, "snap/bias", &bias, &init, 1, (int64_t []) { 0, 11 },
                                  (int []) { n - 1 }, &err);
}

static void
s_grads (uint64_t step, float *kernel, float *bias)
{
    for (int i = 0; i < 37 * 11; i++)
        kernel [i] = (float) sin ((double) (step * 131 + (uint64_t) i)) * 0.1f;
    for (int i = 0; i < 11; i++)
        bias [i] = (float) cos ((double) (step * 17 + (uint64_t) i));
}

static void
test_kill_restore_identical (void **state)
{
    (void) state;
    char root [64];
    harness_tmpdir (root, sizeof root);
    const char *args [] = { "--checkpoint-root", root, NULL };
    harness_server_t servers [2];
    for (int i = 0; i < 2; i++)
        assert_int_equal (harness_server_start (&servers [i], i, args), 0);
    harness_clients_t clients;
    s_clients (&clients, servers, 2);
    ps_error_t err;
    harness_ok (ps_client_create (clients.control, &err), &err);
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    opt.lr = 0.01;
    harness_ok (ps_client_set_optimizer (clients.control, &opt, &err), &err);
    float gk [37 * 11], gb [11], k1 [37 * 11], b1 [11], k2 [37 * 11], b2 [11];
    const float *grads [] = { gk, gb };
    float *first [] = { k1, b1 }, *second [] = { k2, b2 };
    //  Steps 0..9 except 4: the ledger has a hole to carry across.
    for (uint64_t step = 0; step < 10; step++) {
        if (step == 4)
            continue;
        s_grads (step, gk, gb);
        harness_ok (ps_client_push (clients.data, step, 0, grads, NULL, &err), &err);
    }
    //  Requests name directories relative to the root.
    const char *name1 = "ckpt-1", *name2 = "nested/ckpt-2";
    char dir1 [128], dir2 [128];
    snprintf (dir1, sizeof dir1, "%s/%s", root, name1);
    snprintf (dir2, sizeof dir2, "%s/%s", root, name2);
    char nested [128];
    snprintf (nested, sizeof nested, "%s/nested", root);
    assert_int_equal (mkdir (nested, 0755), 0);
    ps_snap_file_t *files;
    size_t nfiles;
    harness_ok (ps_client_snapshot (clients.control, name1, &files, &nfiles, &err), &err);
    assert_int_equal (nfiles, 3);
    for (size_t i = 0; i < nfiles; i++) {
        assert_int_equal (files [i].version, 9);
        assert_true (files [i].bytes > 0);
    }
    harness_ok (ps_client_pull (clients.data, first, &err), &err);
    //  Continue on the original servers to know where training should go.
    s_grads (10, gk, gb);
    harness_ok (ps_client_push_pull (clients.data, 10, 0, grads, first, NULL, &err), &err);
    harness_clients_close (&clients);

    //  Crash both servers; start new processes and restore.
    for (int i = 0; i < 2; i++) {
        assert_int_equal (harness_server_stop (&servers [i], SIGKILL), 128 + SIGKILL);
        assert_int_equal (harness_server_start (&servers [i], i, args), 0);
    }
    s_clients (&clients, servers, 2);
    harness_ok (ps_client_restore (clients.control, name1, &err), &err);
    ps_part_stats_t *stats;
    size_t count;
    harness_ok (ps_client_stats (clients.control, 0, &stats, &count, &err), &err);
    assert_int_equal (count, 1);
    assert_int_equal (stats [0].updates, 9);
    free (stats);
    //  A second snapshot is byte for byte the first: values, slots, Adam's
    //  step count, counters and ledger all came back.
    ps_snap_file_t *again;
    size_t nagain;
    harness_ok (ps_client_snapshot (clients.control, name2, &again, &nagain, &err), &err);
    assert_int_equal (nagain, nfiles);
    for (size_t i = 0; i < nfiles; i++) {
        char path1 [1024], path2 [1024];
        snprintf (path1, sizeof path1, "%s/%s", dir1, files [i].file);
        snprintf (path2, sizeof path2, "%s/%s", dir2, again [i].file);
        size_t len1, len2;
        uint8_t *data1 = harness_slurp (path1, &len1), *data2 = harness_slurp (path2, &len2);
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
    harness_ok (ps_client_push (clients.data, 3, 0, grads, &info, &err), &err);
    assert_int_equal (info.duplicates, 3);
    //  Step 10 gives exactly what it gave on the original servers.
    s_grads (10, gk, gb);
    harness_ok (ps_client_push_pull (clients.data, 10, 0, grads, second, &info, &err), &err);
    assert_int_equal (info.applied, 3);
    assert_memory_equal (k1, k2, sizeof k1);
    assert_memory_equal (b1, b2, sizeof b1);
    s_grads (4, gk, gb);
    harness_ok (ps_client_push (clients.data, 4, 0, grads, &info, &err), &err);
    assert_int_equal (info.applied, 3);

    //  A corrupted snapshot is refused by file name, and the server keeps
    //  the state it had.
    char path [1024];
    snprintf (path, sizeof path, "%s/%s", dir2, files [0].file);
    FILE *file = fopen (path, "r+b");
    assert_non_null (file);
    fseek (file, 100, SEEK_SET);
    int byte = fgetc (file);
    fseek (file, 100, SEEK_SET);
    fputc (byte ^ 0x10, file);
    fclose (file);
    assert_int_equal (ps_client_restore (clients.control, name2, &err), PS_ECORRUPT);
    assert_non_null (strstr (err.msg, files [0].file));
    //  Truncation too.
    snprintf (path, sizeof path, "%s/%s", dir2, files [2].file);
    assert_int_equal (truncate (path, (off_t) files [2].bytes / 2), 0);
    harness_clients_t other;
    s_clients (&other, servers, 2);
    assert_int_equal (ps_client_restore (other.control, name2, &err), PS_ECORRUPT);
    harness_clients_close (&other);
    harness_ok (ps_client_stats (clients.control, 0, &stats, &count, &err), &err);
    assert_int_equal (stats [0].updates, 11);
    free (stats);
    //  A file copied over another partition's name is refused by name.
    char from [1024], onto [1024], command [2100];
    snprintf (from, sizeof from, "%s/%s", dir1, files [1].file);
    snprintf (onto, sizeof onto, "%s/%s", dir1, files [0].file);
    snprintf (command, sizeof command, "cp '%s' '%s'", from, onto);
    assert_int_equal (system (command), 0);
    assert_int_equal (ps_client_restore (clients.control, name1, &err), PS_ECORRUPT);
    assert_non_null (strstr (err.msg, "holds partition"));
    //  A missing directory is a clear error too.
    assert_int_equal (ps_client_restore (clients.control, "nonexistent/ckpt", &err), PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "nonexistent/ckpt"));

    //  A file whose CRC is right but whose learning rate is NaN (or whose
    //  clipping bound is negative) would poison every value at the next
    //  update: refused by name, with the field, and nothing changes.
    ps_snap_file_t *third;
    size_t nthird;
    harness_ok (ps_client_snapshot (clients.control, "ckpt-3", &third, &nthird, &err), &err);
    snprintf (path, sizeof path, "%s/ckpt-3/%s", root, third [0].file);
    size_t len;
    uint8_t *good = harness_slurp (path, &len);
    static const struct { size_t offset; double value; const char *field; } bad [] = {
        { 240, NAN, "lr" }, { 296, -1, "clip_value" },
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad [0]; b++) {
        uint8_t *data = malloc (len);
        assert_non_null (data);
        memcpy (data, good, len);
        uint64_t bits;
        memcpy (&bits, &bad [b].value, sizeof bits);
        ps_put_u64 (data + bad [b].offset, bits);
        ps_put_u32 (data + len - 4, (uint32_t) crc32 (crc32 (0, Z_NULL, 0), data, (uInt) (len - 4)));
        harness_spit (path, data, len);
        free (data);
        assert_int_equal (ps_client_restore (clients.control, "ckpt-3", &err), PS_ECORRUPT);
        assert_non_null (strstr (err.msg, third [0].file));
        assert_non_null (strstr (err.msg, bad [b].field));
    }
    free (third);
    free (good);
    harness_ok (ps_client_stats (clients.control, 0, &stats, &count, &err), &err);
    assert_int_equal (stats [0].updates, 11);
    free (stats);

    free (files);
    harness_clients_close (&clients);
    for (int i = 0; i < 2; i++)
        assert_int_equal (harness_server_stop (&servers [i], SIGTERM), 0);
    harness_rmtree (root);
}

//  A snapshot to name (relative to the root) is refused with PS_EINVAL and
//  a message holding expect.
static void
s_refused (ps_client_t *client, const char *name, const char *expect)
{
    ps_error_t err;
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    int rc = ps_client_snapshot (client, name, &files, &nfiles, &err);
    free (files);
    if (rc != PS_EINVAL || !strstr (err.msg, expect))
        fail_msg ("snapshot to \"%s\": %s: %s, expected invalid saying \"%s\"", name,
                  ps_error_name (rc), err.msg, expect);
    rc = ps_client_restore (client, name, &err);
    if (rc != PS_EINVAL || !strstr (err.msg, expect))
        fail_msg ("restore from \"%s\": %s: %s, expected invalid saying \"%s\"", name,
                  ps_error_name (rc), err.msg, expect);
}

//  Nothing outside the root is written or read, whatever the request says.
static void
test_paths_confined (void **state)
{
    (void) state;
    char base [64], root [128], outside [128], link [160];
    harness_tmpdir (base, sizeof base);
    snprintf (root, sizeof root, "%s/root", base);
    snprintf (outside, sizeof outside, "%s/outside", base);
    assert_int_equal (mkdir (outside, 0755), 0);
    harness_server_t server;
    //  The root is created when missing.
    assert_int_equal (harness_server_start (&server, 0, (const char *[]) { "--checkpoint-root", root,
                                                                           NULL }), 0);
    struct stat st;
    assert_int_equal (stat (root, &st), 0);
    assert_true (S_ISDIR (st.st_mode));
    //  A symlink inside the root that leads out of it.
    snprintf (link, sizeof link, "%s/out", root);
    assert_int_equal (symlink (outside, link), 0);
    harness_server_t *servers = &server;
    harness_clients_t clients;
    s_clients (&clients, servers, 1);
    ps_error_t err;
    harness_ok (ps_client_create (clients.control, &err), &err);

    char absolute [160], escape [160];
    snprintf (absolute, sizeof absolute, "%s/abs", outside);
    snprintf (escape, sizeof escape, "../outside");
    s_refused (clients.control, absolute, "absolute");
    s_refused (clients.control, escape, "'..'");
    s_refused (clients.control, "a/../../outside", "'..'");
    s_refused (clients.control, "..", "'..'");
    s_refused (clients.control, "", "empty");
    s_refused (clients.control, "a//b", "empty");
    s_refused (clients.control, ".", "'.'");
    s_refused (clients.control, "ckpt\n1", "control");
    s_refused (clients.control, "ckpt\x1b[2J", "control");
    s_refused (clients.control, "out", "outside the checkpoint root");
    s_refused (clients.control, "out/sub", "outside the checkpoint root");
    char overlong [400];
    memset (overlong, 'a', 300);
    overlong [300] = 0;
    s_refused (clients.control, overlong, "long");
    //  Nothing was written outside.
    DIR *handle = opendir (outside);
    assert_non_null (handle);
    struct dirent *entry;
    int entries = 0;
    while ((entry = readdir (handle)))
        entries += entry->d_name [0] != '.';
    closedir (handle);
    assert_int_equal (entries, 0);
    //  A symlink inside the root that stays inside is followed.
    char inner [160], alias [160];
    snprintf (inner, sizeof inner, "%s/inner", root);
    snprintf (alias, sizeof alias, "%s/alias", root);
    assert_int_equal (mkdir (inner, 0755), 0);
    assert_int_equal (symlink (inner, alias), 0);
    ps_snap_file_t *files;
    size_t nfiles;
    harness_ok (ps_client_snapshot (clients.control, "alias", &files, &nfiles, &err), &err);
    assert_int_equal (nfiles, 3);
    harness_ok (ps_client_restore (clients.control, "inner", &err), &err);
    //  A snapshot file in a good directory that is a symlink leading out
    //  is refused too (the file it leads to is a valid snapshot).
    char moved [1024], file_link [1024];
    snprintf (moved, sizeof moved, "%s/%s", outside, files [0].file);
    snprintf (file_link, sizeof file_link, "%s/%s", inner, files [0].file);
    assert_int_equal (rename (file_link, moved), 0);
    assert_int_equal (symlink (moved, file_link), 0);
    free (files);
    assert_int_equal (ps_client_restore (clients.control, "inner", &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "outside the checkpoint root"));
    harness_clients_close (&clients);
    assert_int_equal (harness_server_stop (&server, SIGTERM), 0);

    //  Without a root, both requests are refused and say how to fix it.
    assert_int_equal (harness_server_start (&server, 0, NULL), 0);
    s_clients (&clients, servers, 1);
    harness_ok (ps_client_create (clients.control, &err), &err);
    s_refused (clients.control, "ckpt-1", "--checkpoint-root");
    harness_clients_close (&clients);
    assert_int_equal (harness_server_stop (&server, SIGTERM), 0);
    harness_rmtree (base);
}

//  A probe of the root writes its one file there, from the coordinator
//  only; a name that is not one plain component is refused by name.
static void
test_probe_root (void **state)
{
    (void) state;
    char base [64], root [128], real [PATH_MAX], seen [PATH_MAX], path [PATH_MAX];
    harness_tmpdir (base, sizeof base);
    snprintf (root, sizeof root, "%s/root", base);
    harness_server_t server;
    const char *args [] = { "--checkpoint-root", root, NULL };
    assert_int_equal (harness_server_start (&server, 0, args), 0);
    harness_server_t *servers = &server;
    harness_clients_t clients;
    s_clients (&clients, servers, 1);
    ps_error_t err;
    harness_ok (ps_client_probe_root (clients.control, 0, ".probe-ps0-1", "ps:0 1", seen,
                                      sizeof seen, &err), &err);
    assert_non_null (realpath (root, real));
    assert_string_equal (seen, real);
    snprintf (path, sizeof path, "%s/.probe-ps0-1", root);
    FILE *file = fopen (path, "r");
    assert_non_null (file);
    char text [32] = "";
    assert_non_null (fgets (text, sizeof text, file));
    fclose (file);
    assert_string_equal (text, "ps:0 1");
    const char *bad [] = { "..", ".", "", "a/b", "../x", "x\ny" };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        assert_int_equal (ps_client_probe_root (clients.control, 0, bad [i], "t", seen,
                                                sizeof seen, &err), PS_EINVAL);
        assert_non_null (strstr (err.msg, "expected one path component"));
    }
    //  A worker may not probe (protocol.json: the chief's request).
    assert_int_not_equal (ps_client_probe_root (clients.data, 0, "w", "t", seen, sizeof seen,
                                                &err), 0);
    harness_clients_close (&clients);
    assert_int_equal (harness_server_stop (&server, SIGTERM), 0);

    //  Without a root it is refused, saying how to fix it.
    assert_int_equal (harness_server_start (&server, 0, NULL), 0);
    s_clients (&clients, servers, 1);
    assert_int_equal (ps_client_probe_root (clients.control, 0, "p", "t", seen, sizeof seen,
                                            &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "--checkpoint-root"));
    harness_clients_close (&clients);
    assert_int_equal (harness_server_stop (&server, SIGTERM), 0);
    harness_rmtree (base);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_kill_restore_identical),
        cmocka_unit_test (test_paths_confined),
        cmocka_unit_test (test_probe_root),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
