//  Click-through-rate models on a cluster (issue 17; the training itself
//  is test_cluster_sparse) with processes killed, on data from
//  tests/gen_ctr (harness_ctr.h), on a local cluster of 2 servers and 2
//  workers:
//    a. kill -9 of a worker: the run completes, every step applied exactly
//       once by every dense partition and every table shard;
//    b. kill -9 of a server with incremental checkpoints: the coordinator
//       restores the servers, tables included, from the newest checkpoint
//       (an incremental one on top of its full base), and the run
//       completes exactly once; the checkpoint's table files, read here
//       with ps_sparse_load, hold exactly its steps, and the tables hold
//       exactly its rows and those created since the restore;
//    c. --resume of a run from an incremental checkpoint trains on to the
//       end exactly once, from the checkpoint's rows, and the keep rule
//       never removes a full checkpoint that a kept incremental one needs.
//  "Exactly once" for a table is its ledger: the done record carries, per
//  table, the steps each shard applied, and every step of the run pushes
//  to every shard (an empty push where it has no id there).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "harness.h"
#include "harness_cluster.h"
#include "harness_ctr.h"
#include "ps_checkpoint.h"
#include "ps_ckpt_layout.h"
#include "ps_sparse.h"
#include "ps_tables.h"

//  ---------------------------------------------------------------------
//  Checkpoints and their tables

//  The full checkpoint an incremental one follows (its manifest's base,
//  a checkpoint of the same root), or "" for a full one.
static void
s_base_of (const char *ckpt, char *base, size_t len)
{
    char manifest [PATH_MAX + 32];
    snprintf (manifest, sizeof manifest, "%s/MANIFEST.json", ckpt);
    json_error_t error;
    json_t *root = json_load_file (manifest, 0, &error);
    //  A checkpoint is gone only once pruned: far too late for a case.
    if (!root)
        fail_msg ("%s: %s", manifest, error.text);
    const char *name = json_string_value (json_object_get (root, PS_CHECKPOINT_BASE));
    uint64_t step;
    if (!name)
        base [0] = 0;
    else {
        assert_true (ps_ckpt_layout_parse (name, &step));
        int parent = (int) (strrchr (ckpt, '/') - ckpt);
        snprintf (base, len, "%.*s/%s", parent, ckpt, name);
    }
    json_decref (root);
}

//  Wait for the first incremental checkpoint whose base is not the
//  initial checkpoint (of step 0, whose tables are empty): a restore of
//  it reads rows from both files. Returns its step, and its directory in
//  dir.
static json_int_t
s_wait_incremental (cluster_run_t *run, char *dir, size_t len)
{
    json_int_t from = 1;
    while (true) {
        json_t *ckpt = cluster_wait_event (run, cluster_ev_min ("checkpoint", NULL, -1, "step",
                                                                from), CLUSTER_RUN_MS);
        json_int_t step = cluster_int (ckpt, "step");
        snprintf (dir, len, "%s", cluster_str (ckpt, "dir"));
        json_decref (ckpt);
        char base [PATH_MAX + 64];
        uint64_t base_step = 0;
        s_base_of (dir, base, sizeof base);
        if (base [0])
            assert_true (ps_ckpt_layout_parse (strrchr (base, '/') + 1, &base_step));
        if (base_step > 0)
            return step;
        from = step + 1;
    }
}

//  Load every table shard of the checkpoint ckpt (an incremental file on
//  top of the full one in its base) as a restore does, and check that each
//  holds exactly the checkpoint's steps in its ledger: the tables are in
//  the consistent cut with the partitions. Returns the rows over them all.
static uint64_t
s_check_checkpoint_tables (const char *ckpt, json_int_t step, size_t ntables)
{
    char base [PATH_MAX + 64];
    s_base_of (ckpt, base, sizeof base);
    DIR *dir = opendir (ckpt);
    assert_non_null (dir);
    struct dirent *entry;
    size_t shards = 0;
    uint64_t rows = 0;
    while ((entry = readdir (dir))) {
        uint32_t shard, count;
        bool full;
        if (!ps_tables_parse_filename (entry->d_name, &shard, &count, &full))
            continue;
        assert_int_equal (count, HARNESS_CTR_SERVERS);
        //  An incremental checkpoint holds only incremental table files.
        assert_true (full == (base [0] == 0));
        char path [2 * PATH_MAX], full_path [3 * PATH_MAX], full_name [PATH_MAX];
        snprintf (path, sizeof path, "%s/%s", ckpt, entry->d_name);
        if (full)
            snprintf (full_path, sizeof full_path, "%s", path);
        else {
            assert_int_equal (ps_tables_full_filename (entry->d_name, full_name,
                                                       sizeof full_name), 0);
            snprintf (full_path, sizeof full_path, "%s/%s", base, full_name);
        }
        ps_error_t err;
        ps_sparse_t *table = ps_sparse_load (full_path, full ? NULL : path, &err);
        if (!table)
            fail_msg ("%s: %s", path, err.msg);
        if (ps_sparse_steps_applied (table) != (uint64_t) step)
            fail_msg ("%s: %" PRIu64 " steps in its ledger, expected the checkpoint's %lld",
                      path, ps_sparse_steps_applied (table), (long long) step);
        ps_sparse_stats_t stats;
        ps_sparse_stats (table, &stats);
        rows += stats.rows;
        ps_sparse_destroy (&table);
        shards++;
    }
    closedir (dir);
    if (shards != ntables * HARNESS_CTR_SERVERS)
        fail_msg ("%s: %zu table shard files, expected %zu", ckpt, shards,
                  ntables * HARNESS_CTR_SERVERS);
    return rows;
}

//  Every server restored its shards of lr's table from the checkpoint ckpt
//  (holding rows rows) and counts the rows created since: with nothing
//  evicted, the done record's rows are exactly the checkpoint's and those,
//  so a restore that lost or invented a row fails here.
static void
s_check_rows_since (cluster_run_t *run, uint64_t rows, const char *ckpt)
{
    json_t *done = cluster_find (run->rows, "done", -1);
    json_t *table = json_array_get (json_object_get (done, "tables"), 0);
    if (cluster_int (table, "rows") != (json_int_t) rows + cluster_int (table, "created"))
        fail_msg ("%s: table %s holds %lld rows, expected the %" PRIu64 " restored from %s and "
                  "the %lld created since", run->name, cluster_str (table, "table"),
                  (long long) cluster_int (table, "rows"), rows, ckpt,
                  (long long) cluster_int (table, "created"));
}

//  a. A worker killed

static void
test_kill_worker (void **state)
{
    (void) state;
    const harness_ctr_data_t *data = harness_ctr_small ();
    int epochs = 3;
    cluster_run_t *run = harness_ctr_run_new ("lr, kill -9 worker", &harness_ctr_lr, data, epochs);
    uint64_t total = (uint64_t) epochs * harness_ctr_steps_per_epoch (data);
    cluster_heartbeat_args (run, CLUSTER_KILL_TIMEOUT_MS);
    //  Not restarted, so that the survivor trains every step left whatever
    //  the timing: the killed worker's pushes and its released steps are
    //  all there is to the failure.
    cluster_arg (run, "--no-restart");
    cluster_run_start (run, NULL);
    cluster_match_t due = cluster_ev_min ("progress", NULL, -1, "step", (json_int_t) total / 6);
    json_t *progress = cluster_wait_event (run, due, CLUSTER_RUN_MS);
    json_int_t at_step = cluster_int (progress, "step");
    json_decref (progress);
    if (at_step >= (json_int_t) total)
        fail_msg ("%s: the first progress event past step %" PRIu64 " came at the end of the "
                  "run: make it longer", run->name, total / 6);
    pid_t victim = cluster_task_pid (run, "worker", 1);
    assert_int_equal (kill (victim, SIGKILL), 0);
    json_t *failed = cluster_wait_event (run, cluster_ev ("worker_failed", "worker", 1),
                                         CLUSTER_EVENT_MS);
    json_int_t released = cluster_int (failed, "steps_released");
    json_decref (failed);
    cluster_run_finish (run, 0);
    harness_ctr_check_done (run, total, &harness_ctr_lr);
    assert_int_equal (cluster_int (cluster_find (run->rows, "done", -1), "worker_failures"), 1);
    assert_int_equal (cluster_count_match (run->rows, cluster_ev ("registered", "worker", 1)), 1);
    assert_true (harness_pid_gone (victim));
    cluster_check_no_children (run, 0, NULL);
    cluster_summary (run, "%" PRIu64 " steps, killed at step %lld, %lld released, every table "
                     "shard applied every step once", total, (long long) at_step,
                     (long long) released);
    cluster_run_destroy (run);
}

//  ---------------------------------------------------------------------
//  b. A server killed, restored from an incremental checkpoint

static void
test_kill_server (void **state)
{
    (void) state;
    const harness_ctr_data_t *data = harness_ctr_small ();
    int epochs = 3;
    cluster_run_t *run = harness_ctr_run_new ("lr, kill -9 server", &harness_ctr_lr, data, epochs);
    uint64_t total = (uint64_t) epochs * harness_ctr_steps_per_epoch (data);
    char root [PATH_MAX], first [PATH_MAX];
    //  Every checkpoint kept, to read the restored one after the run.
    harness_ctr_checkpoint_args (run, root, sizeof root, total / 6, 16);
    cluster_heartbeat_args (run, CLUSTER_TIMEOUT_MS);
    cluster_run_start (run, NULL);
    //  Once a step is done after the first incremental checkpoint on a
    //  full one with rows (the fifth, at two thirds of the run): the next
    //  checkpoint, a sixth of the run away, is incremental too, so the
    //  restore reads an incremental checkpoint on top of its full base,
    //  and rewinds the steps done after it.
    json_int_t first_step = s_wait_incremental (run, first, sizeof first);
    json_decref (cluster_wait_event (run, cluster_ev_min ("progress", NULL, -1, "step",
                                                          first_step + 1), CLUSTER_RUN_MS));
    pid_t victim = cluster_task_pid (run, "ps", 1);
    assert_int_equal (kill (victim, SIGKILL), 0);
    json_decref (cluster_wait_event (run, cluster_ev ("server_failed", NULL, 1),
                                     CLUSTER_EVENT_MS));
    json_decref (cluster_wait_event (run, cluster_ev ("recovered", NULL, -1), CLUSTER_EVENT_MS));
    cluster_run_finish (run, 0);
    //  Restored ledgers plus the rewound steps trained once more: every
    //  shard of the table applied every step exactly once.
    json_t *done = harness_ctr_check_done (run, total, &harness_ctr_lr);
    assert_int_equal (cluster_int (done, "recoveries"), 1);
    json_t *recovered = cluster_find (run->rows, "recovered", 0);
    assert_string_equal (cluster_str (recovered, "reason"), "recovering from a server failure");
    //  It restored the newest checkpoint before it, an incremental one.
    json_t *ckpt = NULL;
    size_t i;
    json_t *row;
    json_array_foreach (run->rows, i, row) {
        if (row == recovered)
            break;
        if (harness_event_is (row, "checkpoint"))
            ckpt = row;
    }
    assert_non_null (ckpt);
    const char *restored = cluster_str (ckpt, "dir");
    json_int_t restored_step = cluster_int (ckpt, "step");
    assert_string_equal (cluster_str (recovered, "checkpoint"), restored);
    assert_int_equal (cluster_int (recovered, "step"), restored_step);
    char base [PATH_MAX + 64];
    s_base_of (restored, base, sizeof base);
    if (!base [0])
        fail_msg ("%s: the server was restored from %s, a full checkpoint: it was killed too "
                  "late after %s", run->name, restored, first);
    //  The checkpoint it restored holds, in each shard's full file and the
    //  incremental one on top, exactly the steps before it.
    uint64_t rows = s_check_checkpoint_tables (restored, restored_step, harness_ctr_lr.ntables);
    s_check_rows_since (run, rows, restored);
    json_t *table = json_array_get (json_object_get (done, "tables"), 0);
    //  The final checkpoint holds the finished tables: as many rows as the
    //  done record counts over the servers.
    char names [16][64], last [PATH_MAX + 64];
    int count;
    cluster_checkpoints (root, names, 16, &count);
    assert_true (count >= 1);
    snprintf (last, sizeof last, "%s/%s", root, names [count - 1]);
    assert_int_equal (strtoll (names [count - 1] + 5, NULL, 10), total);
    assert_int_equal (s_check_checkpoint_tables (last, (json_int_t) total, harness_ctr_lr.ntables),
                      cluster_int (table, "rows"));
    cluster_check_no_children (run, 0, NULL);
    cluster_summary (run, "%" PRIu64 " steps, restored incremental checkpoint %lld (%" PRIu64
                     " rows) on %s, %lld steps trained again", total, (long long) restored_step,
                     rows, strrchr (base, '/') + 1,
                     (long long) cluster_int (recovered, "steps_lost"));
    cluster_run_destroy (run);
}

//  ---------------------------------------------------------------------
//  c. --resume from an incremental checkpoint

static void
test_resume_incremental (void **state)
{
    (void) state;
    const harness_ctr_data_t *data = harness_ctr_small ();
    int epochs = 3;
    cluster_run_t *run = harness_ctr_run_new ("lr, kill -9 coordinator", &harness_ctr_lr, data,
                                              epochs);
    uint64_t total = (uint64_t) epochs * harness_ctr_steps_per_epoch (data);
    char root [PATH_MAX], incr [PATH_MAX];
    harness_ctr_checkpoint_args (run, root, sizeof root, total / 6, 3);
    cluster_heartbeat_args (run, CLUSTER_KILL_TIMEOUT_MS);
    int base_argc = run->argc;
    cluster_run_start (run, NULL);
    json_int_t incr_step = s_wait_incremental (run, incr, sizeof incr);
    assert_int_equal (kill (run->pid, SIGKILL), 0);
    assert_int_equal (harness_wait (run->pid, CLUSTER_EVENT_MS), 128 + SIGKILL);
    run->pid = 0;
    run->rows = harness_jsonl_read (run->metrics);
    assert_non_null (run->rows);
    cluster_check_no_children (run, CLUSTER_EVENT_MS, NULL);
    char names [8][64], newest [PATH_MAX + 64], base [PATH_MAX + 64];
    int count;
    cluster_checkpoints (root, names, 8, &count);
    assert_true (count >= 1);
    snprintf (newest, sizeof newest, "%s/%s", root, names [count - 1]);
    json_int_t newest_step = strtoll (names [count - 1] + 5, NULL, 10);
    assert_true (newest_step >= incr_step);
    //  The next checkpoint after the first incremental one is incremental
    //  too, so whichever the coordinator wrote last is.
    s_base_of (newest, base, sizeof base);
    if (!base [0])
        fail_msg ("%s: the newest checkpoint %s is a full one: the coordinator was killed too "
                  "late after %s", run->name, newest, incr);

    //  The same command with --resume, writing a metrics file of its own.
    cluster_run_t *resumed = cluster_run_resumed (run, base_argc,
                                                  "lr, resumed from incremental");
    cluster_run_start (resumed, NULL);
    cluster_run_finish (resumed, 0);
    harness_ctr_check_done (resumed, total, &harness_ctr_lr);
    uint64_t rows = s_check_checkpoint_tables (newest, newest_step, harness_ctr_lr.ntables);
    s_check_rows_since (resumed, rows, newest);
    json_t *recovered = cluster_find (resumed->rows, "recovered", 0);
    assert_non_null (recovered);
    assert_string_equal (cluster_str (recovered, "reason"), "resuming");
    assert_string_equal (cluster_str (recovered, "checkpoint"), newest);
    assert_int_equal (cluster_int (recovered, "step"), newest_step);
    //  Keeping the newest 3 kept them, and beside them only the full
    //  checkpoints they follow, never removed.
    cluster_checkpoints (root, names, 8, &count);
    assert_true (count >= 3);
    bool needed [8] = { false };
    int incremental = 0;
    for (int i = count - 3; i < count; i++) {
        char ckpt [PATH_MAX + 64];
        struct stat st;
        snprintf (ckpt, sizeof ckpt, "%s/%s", root, names [i]);
        s_base_of (ckpt, base, sizeof base);
        if (!base [0])
            continue;
        incremental++;
        if (stat (base, &st) != 0 || !S_ISDIR (st.st_mode))
            fail_msg ("kept checkpoint %s follows %s, which is gone", ckpt, base);
        for (int j = 0; j < count - 3; j++)
            needed [j] |= strcmp (strrchr (base, '/') + 1, names [j]) == 0;
    }
    for (int j = 0; j < count - 3; j++)
        if (!needed [j])
            fail_msg ("checkpoint %s/%s is kept, but it is neither among the newest 3 nor the "
                      "base of one of them", root, names [j]);
    cluster_check_no_children (resumed, 0, NULL);
    cluster_summary (resumed, "resumed from incremental checkpoint %lld, trained the other %lld; "
                     "%d of the newest 3 incremental, %d kept", (long long) newest_step,
                     (long long) (total - (uint64_t) newest_step), incremental, count);
    cluster_run_destroy (run);
    cluster_run_destroy (resumed);
}


int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_kill_worker, cluster_teardown),
        cmocka_unit_test_teardown (test_kill_server, cluster_teardown),
        cmocka_unit_test_teardown (test_resume_incremental, cluster_teardown),
    };
    int status = CLUSTER_MAIN ("sparse_faults", tests);
    harness_ctr_cleanup ();
    return status;
}
