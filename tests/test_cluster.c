//  The cluster, end to end, in its default mode (async): the coordinator,
//  ps-servers and ps-workers as real processes on 127.0.0.1, training the
//  cnn on subsets of the real Fashion-MNIST (harness_cluster.h says what
//  every completed run is checked for):
//    a. coordinator --local: an evaluation after each epoch, test accuracy
//       rising, the training loss falling, no child process left behind;
//    b. the same cluster started by hand, each process with its TF_CONFIG;
//       and again from cluster files, the workers with --task; and a
//       worker hung (SIGSTOP) until after the coordinator has exited, which
//       then stops by itself since the coordinator had said it finished;
//    h. an evaluator task does the evaluations;
//    o. workers reach the servers of their host over ipc://, and over tcp
//       when every process is given a host identity of its own.
//  The other cluster tests, one program each: test_cluster_faults (c-g:
//  workers, servers and the coordinator killed or stopped, damaged
//  checkpoints), test_cluster_security (i-j: liars, strangers, keys),
//  test_cluster_nonfinite (l), test_cluster_mirrored (k),
//  test_cluster_ssp (m), test_cluster_sync (n), test_cluster_accuracy
//  (mirrored and ssp training on all of the data to the accuracy target),
//  test_cluster_sparse (click-through-rate models, their embedding tables
//  on the servers, on generated Criteo-format data) and
//  test_cluster_sparse_faults (the same with processes killed).
//  Each case prints a one-line summary (time, steps, failure detection).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"
#include "harness_cluster.h"
#include "ps_clock.h"

//  ---------------------------------------------------------------------
//  a. A local cluster trains

//  Check that the worker whose log is at path said it reaches server s at
//  its ipc endpoint with PLAIN (local), or did not say it reaches it over
//  ipc at all.
static void
s_check_reached (cluster_run_t *run, const char *path, int s, bool local)
{
    char said [64];
    snprintf (said, sizeof said, "server %d is on this host: reached at ipc://", s);
    FILE *file = fopen (path, "r");
    assert_non_null (file);
    char line [1024];
    bool over_ipc = false, plain = false;
    while (fgets (line, sizeof line, file))
        if (strstr (line, said)) {
            over_ipc = true;
            plain = strstr (line, " with PLAIN, as only this user can reach it") != NULL;
        }
    fclose (file);
    if (over_ipc != local || (local && !plain)) {
        harness_print_log (path);
        fail_msg ("%s: %s %s server %d over ipc%s", run->name, path,
                  local ? "did not say it reaches" : "said it reaches", s,
                  local ? " with PLAIN" : "");
    }
}

static void
test_local_run (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("local run");
    int limit = cluster_limit (6400), test_limit = cluster_test_limit (1000), epochs = 3;
    uint64_t per_epoch = cluster_steps_per_epoch (limit), total = per_epoch * (uint64_t) epochs;
    cluster_local_args (run, limit, test_limit, epochs);
    cluster_run_start (run, NULL);
    cluster_run_finish (run, 0);
    uint64_t duplicates = cluster_check_done (run, total, 2);
    //  A healthy run is not taken for a diverging one.
    assert_int_equal (cluster_count (run->rows, "diverging"), 0);
    assert_false (json_is_true (json_object_get (cluster_find (run->rows, "done", -1),
                                                 "diverged")));
    assert_int_equal (duplicates, 0);
    json_t *rows = run->rows;
    json_t *started = cluster_find (rows, "started", 0);
    assert_int_equal (cluster_int (started, "steps_per_epoch"), per_epoch);
    assert_int_equal (cluster_int (started, "servers"), 2);
    assert_int_equal (cluster_int (started, "workers"), 2);
    //  Two servers and two workers registered, once each.
    for (int task = 0; task < 2; task++) {
        assert_int_equal (cluster_count_match (rows, cluster_ev ("registered", "ps", task)), 1);
        assert_int_equal (cluster_count_match (rows, cluster_ev ("registered", "worker", task)), 1);
    }
    assert_int_equal (cluster_count (rows, "registered"), 4);
    assert_int_equal (cluster_count (rows, "worker_failed") + cluster_count (rows, "server_failed")
                      + cluster_count (rows, "recovered"), 0);

    //  An evaluation after each epoch, of the whole test subset, by a
    //  worker; accuracy and loss improve from the first to the last.
    assert_int_equal (cluster_count (rows, "eval"), epochs);
    for (int e = 0; e < epochs; e++) {
        json_t *eval = cluster_find (rows, "eval", e);
        assert_int_equal (cluster_int (eval, "epoch"), e + 1);
        cluster_check_eval_step (eval, e, per_epoch, total);
        assert_int_equal (cluster_int (eval, "count"), test_limit);
        assert_string_equal (cluster_str (eval, "role"), "worker");
    }
    json_t *first = cluster_find (rows, "eval", 0), *last = cluster_find (rows, "eval", -1);
    double acc0 = cluster_real (first, "test_accuracy"), acc = cluster_real (last, "test_accuracy");
    //  Measured: 0.78 after one epoch, 0.83 after three (release build,
    //  6400 examples); smaller subsets learn less.
    double bound = cluster_scale () >= 1 ? 0.75 : 0.6;
    if (!(acc > acc0 && acc > bound))
        fail_msg ("test accuracy %.4f after epoch 1, %.4f after epoch %d: expected a rise, "
                  "to above %.2f", acc0, acc, epochs, bound);
    assert_true (cluster_real (last, "test_loss") < cluster_real (first, "test_loss"));
    json_t *done = cluster_find (rows, "done", -1);
    assert_true (cluster_real (done, "test_accuracy") == acc);

    //  Progress: steps move forward within the run, the workers alive (both,
    //  once both have registered), and the training loss of the last window
    //  is below the first's.
    size_t nprogress = cluster_count (rows, "progress");
    assert_true (nprogress >= 2);
    json_int_t step = 0;
    for (size_t p = 0; p < nprogress; p++) {
        json_t *progress = cluster_find (rows, "progress", (int) p);
        assert_true (cluster_int (progress, "step") >= step);
        step = cluster_int (progress, "step");
        assert_true (step > 0 && step <= (json_int_t) total);
        assert_int_equal (cluster_int (progress, "total"), total);
        assert_true (cluster_int (progress, "epoch") >= 1 && cluster_int (progress,
                                                                          "epoch") <= epochs);
        assert_true (cluster_int (progress, "workers_alive") >= 1);
        assert_true (cluster_int (progress, "workers_alive") <= 2);
        assert_true (cluster_real (progress, "samples_per_s") > 0);
        assert_true (cluster_real (progress, "accuracy") >= 0 && cluster_real (progress,
                                                                               "accuracy") <= 1);
    }
    assert_int_equal (cluster_int (cluster_find (rows, "progress", -1), "workers_alive"), 2);
    double loss0 = cluster_real (cluster_find (rows, "progress", 0), "loss");
    double loss = cluster_real (cluster_find (rows, "progress", -1), "loss");
    if (!(loss < loss0))
        fail_msg ("training loss %.4f in the first window, %.4f in the last: expected a fall",
                  loss0, loss);
    //  Every worker reached both servers over the same-host plane: ipc
    //  with PLAIN (ps_curve.h), having waited for the servers to register
    //  where it came first.
    for (int w = 0; w < 2; w++) {
        char log [PATH_MAX + 32];
        snprintf (log, sizeof log, "%s/worker%d.log", run->log_dir, w);
        for (int s = 0; s < 2; s++)
            s_check_reached (run, log, s, true);
    }
    //  The supervisor stopped every child before the coordinator exited.
    cluster_check_no_children (run, 0, NULL);
    cluster_summary (run, "%" PRIu64 " steps, %zu progress events, loss %.3f -> %.3f, test "
                     "accuracy %.3f -> %.3f, %.0f samples/s", total, nprogress, loss0, loss, acc0,
                     acc, cluster_real (done, "samples_per_s"));
    cluster_run_destroy (run);
}


//  ---------------------------------------------------------------------
//  b. A cluster started by hand

//  The cluster spec of a cluster started by hand on free loopback ports:
//  chief:0, ps:0, ps:1, worker:0 and worker:1, in that order.
static void
s_five_tasks (char *cluster, size_t len)
{
    int ports [5];
    cluster_free_ports (ports, 5);
    snprintf (cluster, len, "{\"chief\": [\"127.0.0.1:%d\"], \"ps\": [\"127.0.0.1:%d\", "
              "\"127.0.0.1:%d\"], \"worker\": [\"127.0.0.1:%d\", \"127.0.0.1:%d\"]}",
              ports [0], ports [1], ports [2], ports [3], ports [4]);
}

//  With hang, worker:1 is stopped (SIGSTOP) within the run and resumed
//  only after the coordinator has exited: it never asks for work again, so
//  no answer "stop" reaches it, yet it must stop by itself (exit 0) once it
//  finds the coordinator silent, knowing from the coordinator's heartbeats
//  that the run finished, instead of waiting for a coordinator that has
//  gone. Started by hand, since a --local coordinator's children die with it.
static void
s_manual (bool files, bool hang)
{
    cluster_run_t *run = cluster_run_new (hang ? "by hand, a worker hung across the end"
                                          : files ? "by hand, cluster files"
                                          : "by hand, TF_CONFIG");
    char cluster [512];
    s_five_tasks (cluster, sizeof cluster);
    //  Each process's TF_CONFIG or file: the cluster and its own task.
    char specs [5][700], paths [5][PATH_MAX + 32], names [5][16];
    const char *types [5] = { "chief", "ps", "ps", "worker", "worker" };
    int indices [5] = { 0, 0, 1, 0, 1 };
    for (int t = 0; t < 5; t++) {
        snprintf (names [t], sizeof names [t], "%s%d", types [t], indices [t]);
        snprintf (specs [t], sizeof specs [t], "%s{\"cluster\": %s, \"task\": {\"type\": \"%s\", "
                  "\"index\": %d}}", files ? "" : "TF_CONFIG=", cluster, types [t], indices [t]);
        snprintf (paths [t], sizeof paths [t], "%s/%s.json", run->dir, names [t]);
        if (files)
            assert_int_equal (harness_write_file (paths [t], specs [t]), 0);
    }
    //  With files, TF_CONFIG holds something that is not JSON: every
    //  process must read its file, not the environment. The coordinator
    //  and the workers share one file that names no task (the workers say
    //  theirs with --task); ps-server has no --task, so each server has a
    //  file with its task.
    char shared [PATH_MAX + 32], tasks [2][32];
    snprintf (shared, sizeof shared, "%s/cluster.json", run->dir);
    char shared_text [600];
    snprintf (shared_text, sizeof shared_text, "{\"cluster\": %s}\n", cluster);
    if (files)
        assert_int_equal (harness_write_file (shared, shared_text), 0);
    const char *bad_env [] = { "TF_CONFIG=this is not JSON", NULL };
    pid_t pids [5];
    //  The workers first, then the servers, the coordinator last: the
    //  others wait for it.
    for (int t = 3; t < 5; t++) {
        snprintf (tasks [t - 3], sizeof tasks [t - 3], "worker:%d", indices [t]);
        const char *file_args [] = { "--cluster", shared, "--task", tasks [t - 3], NULL };
        const char *env [] = { specs [t], NULL };
        pids [t] = cluster_start_task (run, "PS_WORKER", files ? file_args : NULL,
                                       files ? bad_env : env, names [t]);
    }
    //  As documented for a cluster started by hand, every server's
    //  checkpoint root is the coordinator's checkpoint directory: the
    //  coordinator checkpoints at the start and at the end.
    char root [PATH_MAX + 32];
    snprintf (root, sizeof root, "%s/checkpoints", run->dir);
    for (int t = 1; t < 3; t++) {
        const char *file_args [] = { "--cluster", paths [t], "--threads", "0",
                                     "--checkpoint-root", root, NULL };
        const char *env_args [] = { "--threads", "0", "--checkpoint-root", root, NULL };
        const char *env [] = { specs [t], NULL };
        pids [t] = cluster_start_task (run, "PS_SERVER", files ? file_args : env_args,
                                       files ? bad_env : env, names [t]);
    }
    //  A hung worker is stopped after the first epoch's evaluation, with
    //  two more epochs to go.
    int limit = cluster_limit (6400), test_limit = cluster_test_limit (1000), epochs = hang ? 3 : 2;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    if (files)
        cluster_args (run, (const char *[]) { "--cluster", shared, NULL });
    cluster_args (run, (const char *[]) { "--checkpoint-dir", root, NULL });
    cluster_job_args (run, limit, test_limit, epochs);
    if (hang)
        cluster_heartbeat_args (run, CLUSTER_TIMEOUT_MS);
    const char *env [] = { specs [0], NULL };
    cluster_run_start (run, files ? bad_env : env);
    pids [0] = run->pid;
    double t_cont = 0;
    if (hang) {
        cluster_match_t due = cluster_ev_min ("eval", NULL, -1, "epoch", 1);
        json_t *eval = cluster_wait_event (run, due, CLUSTER_RUN_MS);
        json_decref (eval);
        assert_int_equal (kill (pids [4], SIGSTOP), 0);
    }
    cluster_run_finish (run, 0);
    if (hang) {
        if (!harness_running (pids [4])) {
            cluster_print_logs (run);
            fail_msg ("%s: worker:1 ended while stopped", run->name);
        }
        //  Past the coordinator's exit; the resumed worker's first look at
        //  the link finds only what was queued before.
        usleep (500 * 1000);
        t_cont = ps_clock_ms ();
        assert_int_equal (kill (pids [4], SIGCONT), 0);
    }
    //  Every server and worker ends on its own, with status 0: the
    //  coordinator told the workers to stop and shut the servers down.
    for (int t = 1; t < 5; t++) {
        int status = harness_wait_or_kill (pids [t], 20000);
        if (status != 0) {
            char log [PATH_MAX + 80];
            snprintf (log, sizeof log, "%s/%s.log", run->dir, names [t]);
            harness_print_log (log);
            fail_msg ("%s: %s exited with status %d (-1: still running 20 s after the "
                      "coordinator)", run->name, names [t], status);
        }
        cluster_untrack_pid (pids [t]);
    }
    if (hang) {
        double stopped_after = ps_clock_ms () - t_cont;
        char log [PATH_MAX + 80];
        snprintf (log, sizeof log, "%s/%s.log", run->dir, names [4]);
        if (!harness_file_contains (log, "the coordinator finished the run and has gone")) {
            harness_print_log (log);
            fail_msg ("%s: worker:1 exited without saying that the run had finished", run->name);
        }
        //  Its step was handed to worker:0; its push after SIGCONT, if any,
        //  found the servers gone. Every step was still trained once.
        cluster_check_done (run, total, 2);
        cluster_summary (run, "%" PRIu64 " steps; worker:1 stopped after epoch 1, resumed "
                         "after the coordinator exited, stopped by itself %.0f ms later "
                         "(heartbeat timeout %d ms)", total, stopped_after, CLUSTER_TIMEOUT_MS);
        cluster_run_destroy (run);
        return;
    }
    assert_int_equal (cluster_check_done (run, total, 2), 0);
    //  The processes that registered are the ones started here.
    for (int t = 1; t < 5; t++) {
        const char *role = t < 3 ? "ps" : "worker";
        json_t *row = cluster_find_match (run->rows, cluster_ev ("registered", role, indices [t]),
                                          -1);
        assert_non_null (row);
        assert_int_equal (cluster_int (row, "pid"), pids [t]);
        assert_false (json_is_true (json_object_get (row, "restarted")));
    }
    assert_int_equal (cluster_count (run->rows, "eval"), epochs);
    assert_true (cluster_count (run->rows, "checkpoint") >= 2);
    assert_int_equal (cluster_count (run->rows, "checkpoint_failed"), 0);
    json_t *done = cluster_find (run->rows, "done", -1);
    json_t *worker_steps = json_object_get (done, "worker_steps");
    cluster_summary (run, "%" PRIu64 " steps, test accuracy %.3f, worker steps %lld + %lld", total,
                     cluster_real (done, "test_accuracy"),
                     (long long) json_integer_value (json_array_get (worker_steps, 0)),
                     (long long) json_integer_value (json_array_get (worker_steps, 1)));
    cluster_run_destroy (run);
}

//  ---------------------------------------------------------------------
//  o. Same-host peers: the workers reach the servers of their host over
//  ipc://, or over tcp when each process has a host identity of its own


//  A cluster by hand whose servers have registered before the workers
//  start, so that every worker's plan gives the servers' endpoint sets
//  (ps_host.h). With distinct, every process has a PS_HOST_ID of its own.
static void
s_same_host (bool distinct)
{
    cluster_run_t *run = cluster_run_new (distinct ? "same host, distinct host ids"
                                          : "same host, over ipc");
    char cluster [512];
    s_five_tasks (cluster, sizeof cluster);
    char specs [5][700], hosts [5][48], names [5][16];
    const char *types [5] = { "chief", "ps", "ps", "worker", "worker" };
    int indices [5] = { 0, 0, 1, 0, 1 };
    for (int t = 0; t < 5; t++) {
        snprintf (names [t], sizeof names [t], "%s%d", types [t], indices [t]);
        snprintf (specs [t], sizeof specs [t], "TF_CONFIG={\"cluster\": %s, \"task\": "
                  "{\"type\": \"%s\", \"index\": %d}}", cluster, types [t], indices [t]);
        snprintf (hosts [t], sizeof hosts [t], "PS_HOST_ID=test-host-%d", t);
    }
    char root [PATH_MAX + 32];
    snprintf (root, sizeof root, "%s/checkpoints", run->dir);
    pid_t pids [5];
    for (int t = 1; t < 3; t++) {
        const char *args [] = { "--threads", "0", "--checkpoint-root", root, NULL };
        const char *env [] = { specs [t], distinct ? hosts [t] : NULL, NULL };
        pids [t] = cluster_start_task (run, "PS_SERVER", args, env, names [t]);
    }
    int limit = cluster_limit (1600), test_limit = cluster_test_limit (500), epochs = 1;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    cluster_args (run, (const char *[]) { "--checkpoint-dir", root, NULL });
    cluster_job_args (run, limit, test_limit, epochs);
    const char *env [] = { specs [0], NULL };
    cluster_run_start (run, env);
    pids [0] = run->pid;
    for (int s = 0; s < 2; s++) {
        json_t *row = cluster_wait_event (run, cluster_ev ("registered", "ps", s), CLUSTER_RUN_MS);
        //  A server registers its tcp endpoint and an ipc:// one beside it.
        const char *endpoint = cluster_str (row, "endpoint");
        const char *ipc = cluster_str (row, "ipc");
        if (strncmp (endpoint, "tcp://", 6) != 0 || strchr (endpoint, ',')
        ||  strncmp (ipc, "ipc://", 6) != 0 || strchr (ipc, ','))
            fail_msg ("ps:%d registered %s and %s: expected tcp://... and ipc://...", s,
                      endpoint, ipc);
        json_decref (row);
    }
    for (int t = 3; t < 5; t++) {
        const char *wenv [] = { specs [t], distinct ? hosts [t] : NULL, NULL };
        pids [t] = cluster_start_task (run, "PS_WORKER", NULL, wenv, names [t]);
    }
    cluster_run_finish (run, 0);
    for (int t = 1; t < 5; t++) {
        int status = harness_wait_or_kill (pids [t], 20000);
        if (status != 0) {
            char log [PATH_MAX + 80];
            snprintf (log, sizeof log, "%s/%s.log", run->dir, names [t]);
            harness_print_log (log);
            fail_msg ("%s: %s exited with status %d", run->name, names [t], status);
        }
        cluster_untrack_pid (pids [t]);
    }
    //  Every step applied once per partition, over either transport.
    assert_int_equal (cluster_check_done (run, total, 2), 0);
    for (int t = 3; t < 5; t++) {
        char log [PATH_MAX + 80];
        snprintf (log, sizeof log, "%s/%s.log", run->dir, names [t]);
        for (int s = 0; s < 2; s++)
            s_check_reached (run, log, s, !distinct);
    }
    cluster_summary (run, "%" PRIu64 " steps, workers to servers over %s", total,
                     distinct ? "tcp" : "ipc");
    cluster_run_destroy (run);
}

static void
test_same_host (void **state)
{
    (void) state;
    s_same_host (false);
    s_same_host (true);
}

static void
test_manual_tfconfig (void **state)
{
    (void) state;
    s_manual (false, false);
}

static void
test_manual_files (void **state)
{
    (void) state;
    s_manual (true, false);
}

static void
test_manual_hung_worker (void **state)
{
    (void) state;
    s_manual (false, true);
}


//  ---------------------------------------------------------------------
//  h. An evaluator

static void
test_evaluator (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("local run with evaluator");
    int limit = cluster_limit (6400), test_limit = cluster_test_limit (1000), epochs = 2;
    uint64_t per_epoch = cluster_steps_per_epoch (limit), total = per_epoch * (uint64_t) epochs;
    cluster_local_args (run, limit, test_limit, epochs);
    //  An evaluator of cores of its own (--cores 8 says there are 8), at
    //  normal priority: one in the cores' idle time gets done as many as
    //  the machine allows (test_metrics_records tests that one).
    cluster_args (run, (const char *[]) { "--evaluator", "--cores", "8", NULL });
    cluster_run_start (run, NULL);
    cluster_run_finish (run, 0);
    assert_int_equal (cluster_check_done (run, total, 2), 0);
    assert_int_equal (cluster_count_match (run->rows, cluster_ev ("registered", "evaluator", 0)),
                      1);
    assert_int_equal (cluster_count (run->rows, "registered"), 5);
    //  Every evaluation, after each epoch, came from the evaluator; the
    //  workers only trained.
    assert_int_equal (cluster_count (run->rows, "eval"), epochs);
    for (int e = 0; e < epochs; e++) {
        json_t *eval = cluster_find (run->rows, "eval", e);
        assert_string_equal (cluster_str (eval, "role"), "evaluator");
        assert_int_equal (cluster_int (eval, "task"), 0);
        assert_int_equal (cluster_int (eval, "epoch"), e + 1);
        cluster_check_eval_step (eval, e, per_epoch, total);
        assert_int_equal (cluster_int (eval, "count"), test_limit);
    }
    json_t *last = cluster_find (run->rows, "eval", -1);
    assert_true (cluster_real (cluster_find (run->rows, "done", -1), "test_accuracy")
                 == cluster_real (last, "test_accuracy"));
    cluster_check_no_children (run, 0, NULL);
    cluster_summary (run, "%" PRIu64 " steps, %d evaluations by evaluator:0, test accuracy %.3f",
                     total, epochs, cluster_real (last, "test_accuracy"));
    cluster_run_destroy (run);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_local_run, cluster_teardown),
        cmocka_unit_test_teardown (test_manual_tfconfig, cluster_teardown),
        cmocka_unit_test_teardown (test_manual_files, cluster_teardown),
        cmocka_unit_test_teardown (test_manual_hung_worker, cluster_teardown),
        cmocka_unit_test_teardown (test_evaluator, cluster_teardown),
        cmocka_unit_test_teardown (test_same_host, cluster_teardown),
    };
    return CLUSTER_MAIN ("cluster", tests);
}
