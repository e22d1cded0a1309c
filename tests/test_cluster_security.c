//  The cluster against processes that do not play by its rules:
//    i. processes that lie to the coordinator (completing steps they do
//       not hold, or never trained; registering as a live task) cannot
//       make it count a step that was not trained once, nor evict a live
//       worker: the run completes, or fails naming what disagrees;
//    j. a secured cluster: processes without its keys get no answer, a
//       worker's key may not control a server; the one run with
//       --insecure, which warns; and a PLAIN data plane.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include <czmq.h>
#include <zmq.h>

#include "harness.h"
#include "harness_cluster.h"
#include "ps_clock.h"
#include "ps_msg.h"
#include "ps_proto_conv.h"

//  ---------------------------------------------------------------------
//  i. Strangers and liars: processes that speak the protocol to the
//  coordinator but do not do what they say. However they lie, the run
//  trains every step exactly once, or fails and says what is wrong.

//  A hand-made peer of the coordinator or of a server: one DEALER socket,
//  the codec, and nothing of a real worker.
typedef struct {
    void *ctx;
    void *dealer;
    ps_curve_t *curve;
    ps_msg_t *msg;
    ps_writer_t writer;
    uint64_t next_id;
} s_rogue_t;

//  How a rogue connects: with the key of a task of the cluster (an
//  insider), with a key the cluster does not know, or without CURVE.
typedef enum { S_KEY_TASK, S_KEY_STRANGER, S_KEY_NONE } s_key_t;

//  Connect to endpoint, served by task server ("chief:0", "ps:1"), as
//  described by key (with task's key for S_KEY_TASK).
static void
s_rogue_open (s_rogue_t *rogue, const char *endpoint, const char *server, s_key_t key,
              const char *task)
{
    memset (rogue, 0, sizeof *rogue);
    rogue->ctx = zmq_ctx_new ();
    assert_non_null (rogue->ctx);
    rogue->dealer = zmq_socket (rogue->ctx, ZMQ_DEALER);
    assert_non_null (rogue->dealer);
    int linger = 0;
    assert_int_equal (zmq_setsockopt (rogue->dealer, ZMQ_LINGER, &linger, sizeof linger), 0);
    ps_error_t err;
    if (key == S_KEY_TASK) {
        rogue->curve = harness_curve (task);
        assert_int_equal (ps_curve_client (rogue->curve, rogue->dealer, server, &err), 0);
    }
    else
    if (key == S_KEY_STRANGER) {
        //  A stranger knows the server's public key (it is public) but
        //  holds a key pair of its own.
        char path [PATH_MAX];
        snprintf (path, sizeof path, "%s/public/%s.cert", harness_keys (), server);
        *strchr (strrchr (path, '/'), ':') = '-';
        zcert_t *server_cert = zcert_load (path);
        assert_non_null (server_cert);
        zcert_t *mine = zcert_new ();
        assert_non_null (mine);
        assert_int_equal (zmq_setsockopt (rogue->dealer, ZMQ_CURVE_SERVERKEY,
                                          zcert_public_key (server_cert), 32), 0);
        zcert_apply (mine, rogue->dealer);
        zcert_destroy (&mine);
        zcert_destroy (&server_cert);
    }
    assert_int_equal (zmq_connect (rogue->dealer, endpoint), 0);
    rogue->msg = ps_msg_new ();
    ps_writer_init (&rogue->writer);
    rogue->next_id = 1;
}

static void
s_rogue_close (s_rogue_t *rogue)
{
    ps_msg_destroy (&rogue->msg);
    ps_writer_fini (&rogue->writer);
    assert_int_equal (zmq_close (rogue->dealer), 0);
    assert_int_equal (zmq_ctx_term (rogue->ctx), 0);
}

//  Encode msg, with the rogue's next id, and send it.
static void
s_rogue_send (s_rogue_t *rogue, ps_proto_t *msg)
{
    msg->id = rogue->next_id++;
    ps_writer_encode (&rogue->writer, msg);
    ps_error_t err;
    if (ps_writer_send (&rogue->writer, rogue->dealer, NULL, 0, NULL, 0, &err) != 0)
        fail_msg ("rogue: send: %s", err.msg);
}

//  The next message from the coordinator within timeout_ms, decoded, or
//  NULL at the deadline.
static const ps_proto_t *
s_rogue_recv (s_rogue_t *rogue, int timeout_ms)
{
    zmq_pollitem_t item = { rogue->dealer, 0, ZMQ_POLLIN, 0 };
    if (zmq_poll (&item, 1, timeout_ms) <= 0)
        return NULL;
    ps_error_t err;
    if (ps_msg_recv (rogue->msg, rogue->dealer, false, &err) != 0
        ||  ps_msg_decode (rogue->msg, &err) != 0)
        fail_msg ("rogue: a message from the coordinator: %s", err.msg);
    return ps_msg_proto (rogue->msg);
}

//  The next message of type (heartbeats are skipped), or NULL.
static const ps_proto_t *
s_rogue_expect (s_rogue_t *rogue, ps_proto_type_t type, int timeout_ms)
{
    double deadline = ps_clock_ms () + timeout_ms;
    while (ps_clock_ms () < deadline) {
        const ps_proto_t *m = s_rogue_recv (rogue, 50);
        if (m && m->type == type)
            return m;
        //  "busy" answers a register while the coordinator waits for its
        //  servers: a link registers again, and so does the caller.
        if (m && m->type == PS_PROTO_ERROR && type == PS_PROTO_REGISTER_OK
        &&  ps_error_from_name (m->error.code) == PS_EBUSY)
            return NULL;
        if (m && m->type == PS_PROTO_ERROR)
            fail_msg ("rogue: expected %s, the coordinator answered an error: %s",
                      ps_proto_info [type].name, m->error.message);
    }
    return NULL;
}

static void
s_rogue_register (s_rogue_t *rogue, const char *role, int index, uint64_t incarnation)
{
    ps_proto_t msg = {
        .type = PS_PROTO_REGISTER,
        .register_ = { .role = role, .index = (uint64_t) index, .incarnation = incarnation,
                       .endpoint = "", .pid = (uint64_t) getpid () },
    };
    s_rogue_send (rogue, &msg);
}

//  A work_request that reports steps [first, last] except `skip` trained
//  (status done) at generation, and asks for work when want.
static void
s_rogue_work_request (s_rogue_t *rogue, uint64_t first, uint64_t last, uint64_t skip,
                      uint64_t generation, bool want)
{
    size_t n = 0;
    ps_proto_report_t *reports = calloc (last >= first ? last - first + 1 : 1,
                                         sizeof *reports);
    assert_non_null (reports);
    for (uint64_t step = first; step <= last; step++)
        if (step != skip)
            reports [n++] = (ps_proto_report_t) {
                .kind = "train", .status = "done", .step = step, .generation = generation,
                .loss = 1.0, .correct = 64, .count = 64, .applied = 8, .duplicates = 0,
                .compute_ms = 1.0, .comm_ms = 1.0,
            };
    ps_proto_t msg = {
        .type = PS_PROTO_WORK_REQUEST,
        .work_request = { .reports = { n, reports }, .want = want ? 1 : 0 },
    };
    s_rogue_send (rogue, &msg);
    free (reports);
}

//  Register as role:index (again and again until answered, as a link
//  does), then ask for work until a train step comes; *step and
//  *generation get it.
static void
s_rogue_take_step (s_rogue_t *rogue, const char *role, int index, uint64_t *step,
                   uint64_t *generation)
{
    double deadline = ps_clock_ms () + CLUSTER_EVENT_MS;
    const ps_proto_t *m = NULL;
    while (!m && ps_clock_ms () < deadline) {
        s_rogue_register (rogue, role, index, 0x5eed);
        m = s_rogue_expect (rogue, PS_PROTO_REGISTER_OK, 100);
    }
    if (!m)
        fail_msg ("rogue: %s:%d was not registered within %d ms", role, index, CLUSTER_EVENT_MS);
    while (ps_clock_ms () < deadline) {
        s_rogue_work_request (rogue, 1, 0, 0, 0, true);
        m = s_rogue_expect (rogue, PS_PROTO_WORK, 1000);
        if (!m)
            continue;
        if (strcmp (m->work.kind, "train") == 0) {
            *step = m->work.step;
            *generation = m->work.generation;
            return;
        }
        if (strcmp (m->work.kind, "wait") != 0)
            fail_msg ("rogue: expected work of kind train or wait, got %s", m->work.kind);
        usleep (20 * 1000);
    }
    fail_msg ("rogue: no train step within %d ms", CLUSTER_EVENT_MS);
}

//  A cluster started by hand from TF_CONFIG with nslots worker tasks, of
//  which the first nworkers are started (the rest are free for a rogue);
//  2 servers. endpoints gets the coordinator's address, then the servers'.
//  quick: the failure cases' short heartbeat timeout, for a case that waits
//  for a silent rogue to be declared failed; the others keep the default,
//  so that a loaded machine's stall is not taken for a death.
static void
s_rogue_cluster (cluster_run_t *run, int nslots, int nworkers, int limit, int test_limit,
                 int epochs, bool quick, char endpoints [3][64])
{
    int ports [3 + 4];
    assert_true (nslots <= 4);
    cluster_free_ports (ports, 3 + nslots);
    char workers [256] = "";
    for (int w = 0; w < nslots; w++)
        snprintf (workers + strlen (workers), sizeof workers - strlen (workers),
                  "%s\"127.0.0.1:%d\"", w ? ", " : "", ports [3 + w]);
    char cluster [512];
    snprintf (cluster, sizeof cluster, "{\"chief\": [\"127.0.0.1:%d\"], \"ps\": "
              "[\"127.0.0.1:%d\", \"127.0.0.1:%d\"], \"worker\": [%s]}", ports [0], ports [1],
              ports [2], workers);
    for (int i = 0; i < 3; i++)
        snprintf (endpoints [i], 64, "tcp://127.0.0.1:%d", ports [i]);
    char spec [700];
    for (int w = 0; w < nworkers; w++) {
        char name [16];
        snprintf (name, sizeof name, "worker%d", w);
        snprintf (spec, sizeof spec, "TF_CONFIG={\"cluster\": %s, \"task\": {\"type\": "
                  "\"worker\", \"index\": %d}}", cluster, w);
        cluster_start_task (run, "PS_WORKER", NULL, (const char *[]) { spec, NULL }, name);
    }
    for (int p = 0; p < 2; p++) {
        char name [16];
        snprintf (name, sizeof name, "ps%d", p);
        snprintf (spec, sizeof spec, "TF_CONFIG={\"cluster\": %s, \"task\": {\"type\": \"ps\", "
                  "\"index\": %d}}", cluster, p);
        cluster_start_task (run, "PS_SERVER", (const char *[]) { "--threads", "0", NULL },
                            (const char *[]) { spec, NULL }, name);
    }
    cluster_job_args (run, limit, test_limit, epochs);
    if (quick)
        cluster_heartbeat_args (run, CLUSTER_TIMEOUT_MS);
    snprintf (spec, sizeof spec, "TF_CONFIG={\"cluster\": %s, \"task\": {\"type\": \"chief\", "
              "\"index\": 0}}", cluster);
    cluster_run_start (run, (const char *[]) { spec, NULL });
}

//  A process that registers in a free worker slot takes a step, then says
//  every other step of the run is done, and falls silent. Only the holder
//  of a step may complete it: every report is refused (logged once), the
//  rogue is declared failed for its silence, its step goes to a real
//  worker, and every step is trained once.
static void
test_rogue_completions (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("rogue: completes others' steps");
    int limit = cluster_limit (2560), epochs = 2;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    char endpoints [3][64];
    s_rogue_cluster (run, 3, 2, limit, cluster_test_limit (500), epochs, true, endpoints);
    s_rogue_t rogue;
    s_rogue_open (&rogue, endpoints [0], "chief:0", S_KEY_TASK, "worker:2");
    uint64_t step, generation;
    s_rogue_take_step (&rogue, "worker", 2, &step, &generation);
    s_rogue_work_request (&rogue, 1, total, step, generation, false);
    assert_non_null (s_rogue_expect (&rogue, PS_PROTO_WORK, CLUSTER_EVENT_MS));
    s_rogue_close (&rogue);
    cluster_run_finish (run, 0);
    cluster_check_done (run, total, 2);
    json_t *done = cluster_find (run->rows, "done", -1);
    json_int_t refused = cluster_int (done, "refused_reports");
    assert_true (refused > 0 && refused <= (json_int_t) total - 1);
    assert_int_equal (cluster_count_match (run->rows, cluster_ev ("refused", "worker", 2)), 1);
    assert_string_equal (cluster_str (cluster_find (run->rows, "refused", 0), "what"),
                         "completion");
    //  The rogue held its step until it fell silent; the step went back.
    json_t *failed = cluster_find_match (run->rows, cluster_ev ("worker_failed", "worker", 2), 0);
    assert_non_null (failed);
    assert_int_equal (cluster_int (failed, "steps_released"), 1);
    assert_true (harness_file_contains (run->log, "refused worker:2's completion"));
    cluster_summary (run, "%" PRIu64 " steps, rogue held step %" PRIu64 " and reported %" PRIu64
                     " others: %lld refused, every step trained once", total, step, total - 1,
                     (long long) refused);
    cluster_run_destroy (run);
}

//  A process that takes a step and says it is done without pushing it.
//  The coordinator cannot tell until the end, where every partition's
//  ledger holds one step fewer than were done: the run fails, naming the
//  partitions and the counts.
static void
test_rogue_holder_lies (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("rogue: completes its step untrained");
    int limit = cluster_limit (1280), epochs = 1;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    char endpoints [3][64];
    s_rogue_cluster (run, 3, 2, limit, cluster_test_limit (500), epochs, true, endpoints);
    s_rogue_t rogue;
    s_rogue_open (&rogue, endpoints [0], "chief:0", S_KEY_TASK, "worker:2");
    uint64_t step, generation;
    s_rogue_take_step (&rogue, "worker", 2, &step, &generation);
    s_rogue_work_request (&rogue, step, step, 0, generation, false);
    assert_non_null (s_rogue_expect (&rogue, PS_PROTO_WORK, CLUSTER_EVENT_MS));
    s_rogue_close (&rogue);
    cluster_run_finish (run, 1);
    json_t *done = cluster_find (run->rows, "done", -1);
    assert_non_null (done);
    assert_int_equal (cluster_int (done, "steps"), total);
    assert_false (json_is_true (json_object_get (done, "verified")));
    json_t *mismatches = json_object_get (done, "mismatches");
    //  Every partition of every server is short of the one step.
    size_t parts = 0, i;
    json_t *server;
    json_array_foreach (json_object_get (done, "servers"), i, server)
        parts += json_array_size (json_object_get (server, "partitions"));
    assert_true (parts >= CLUSTER_CNN_VARS);
    assert_int_equal (json_array_size (mismatches), parts);
    json_t *m;
    json_array_foreach (mismatches, i, m) {
        assert_int_equal (cluster_int (m, "recorded"), total - 1);
        assert_int_equal (cluster_int (m, "expected"), total);
    }
    assert_non_null (cluster_find (run->rows, "failed", -1));
    char expect [128];
    snprintf (expect, sizeof expect, "recorded %" PRIu64, total - 1);
    assert_true (harness_file_contains (run->log, "the run is not what was scheduled"));
    assert_true (harness_file_contains (run->log, expect));
    cluster_summary (run, "%" PRIu64 " steps, rogue completed step %" PRIu64 " untrained: exit 1, "
                     "%zu partitions named", total, step, parts);
    cluster_run_destroy (run);
}

//  While worker:1 trains, another process registers as worker:1 again and
//  again, each time as a new incarnation. The live worker is never
//  evicted: each registration is refused as busy (logged once), and the
//  run completes with no worker failure.
static void
test_rogue_registrations (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("rogue: re-registers a live task");
    int limit = cluster_limit (2560), epochs = 2;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    char endpoints [3][64];
    s_rogue_cluster (run, 2, 2, limit, cluster_test_limit (500), epochs, false, endpoints);
    json_decref (cluster_wait_event (run, cluster_ev ("registered", "worker", 1), CLUSTER_RUN_MS));
    //  A second process of worker:1, with its key: a duplicate launch.
    s_rogue_t rogue;
    s_rogue_open (&rogue, endpoints [0], "chief:0", S_KEY_TASK, "worker:1");
    int attempts = 0, refusals = 0;
    while (cluster_running (run)) {
        s_rogue_register (&rogue, "worker", 1, 0xbad0000 + (uint64_t) attempts++);
        const ps_proto_t *m = s_rogue_recv (&rogue, 50);
        if (m && m->type == PS_PROTO_ERROR) {
            assert_string_equal (m->error.code, "busy");
            refusals++;
        }
        else
        if (m && m->type == PS_PROTO_REGISTER_OK)
            fail_msg ("a new incarnation of the live worker:1 was registered");
    }
    s_rogue_close (&rogue);
    cluster_run_finish (run, 0);
    cluster_check_done (run, total, 2);
    json_t *done = cluster_find (run->rows, "done", -1);
    assert_int_equal (cluster_int (done, "worker_failures"), 0);
    assert_int_equal (cluster_count (run->rows, "worker_failed"), 0);
    //  Those refused after the done record was written are not in it.
    assert_true (refusals > 0);
    assert_true (cluster_int (done, "refused_registrations") > 0);
    assert_true (cluster_int (done, "refused_registrations") <= refusals);
    assert_int_equal (cluster_count_match (run->rows, cluster_ev ("refused", "worker", 1)), 1);
    assert_int_equal (cluster_count_match (run->rows, cluster_ev_min ("registered", "worker", 1,
                                                                      "restarted", 1)), 0);
    cluster_summary (run, "%" PRIu64 " steps, %d registrations as the live worker:1, %d refused as "
                     "busy, no worker failure", total, attempts, refusals);
    cluster_run_destroy (run);
}

//  The control requests only the coordinator may send a server.
static const ps_proto_type_t s_control [] = {
    PS_PROTO_SHUTDOWN, PS_PROTO_FENCE, PS_PROTO_SNAPSHOT, PS_PROTO_RESTORE,
    PS_PROTO_SET_OPTIMIZER, PS_PROTO_CREATE,
};
#define S_NCONTROL (sizeof s_control / sizeof s_control [0])

//  Send control request c, its fields filled with harmless values (an
//  empty create, a fence and checkpoint names that match nothing), but
//  for an optimizer that would wreck the run.
static void
s_rogue_request (s_rogue_t *rogue, size_t c)
{
    ps_proto_t msg = { .type = s_control [c] };
    switch (msg.type) {
        case PS_PROTO_FENCE:
            msg.fence.generation = 5;
            break;
        case PS_PROTO_SNAPSHOT:
            msg.snapshot.dir = "ckpt-000000000001";
            break;
        case PS_PROTO_RESTORE:
            msg.restore.dir = "ckpt-000000000001";
            break;
        case PS_PROTO_SET_OPTIMIZER: {
            ps_opt_config_t opt;
            ps_opt_config_default (&opt, PS_OPT_SGD);
            opt.lr = 1e6;
            ps_proto_optimizer_set (&msg.set_optimizer.optimizer, &opt);
            break;
        }
        default:
            break;
    }
    s_rogue_send (rogue, &msg);
}

//  No answer at all within timeout_ms.
static void
s_rogue_silence (s_rogue_t *rogue, const char *who, int timeout_ms)
{
    const ps_proto_t *m = s_rogue_recv (rogue, timeout_ms);
    if (m)
        fail_msg ("%s got an answer (%s) from a secured process", who,
                  ps_proto_info [m->type].name);
}

//  A secured cluster, attacked while it trains. Processes without the
//  cluster's keys (no CURVE at all, or a key pair of their own) send the
//  coordinator and a server registrations, work requests and every control
//  request: they get no answer at all. A worker's key, which the servers
//  do trust, asks ps:0 to shut down, fence, snapshot, restore, change the
//  optimizer and create partitions: each is refused as forbidden, logged
//  once; and it cannot register as another worker. The run is unharmed:
//  every step is trained once.
static void
test_strangers (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("secured: strangers and a worker's key");
    //  Long enough to outlast the attacks (about 2 s) many times over.
    int limit = cluster_limit (12800), epochs = 4;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    char endpoints [3][64];
    s_rogue_cluster (run, 2, 2, limit, cluster_test_limit (500), epochs, false, endpoints);
    json_decref (cluster_wait_event (run, cluster_ev ("started", NULL, -1), CLUSTER_RUN_MS));
    //  Strangers, at the coordinator and at ps:0.
    s_key_t strangers [] = { S_KEY_NONE, S_KEY_STRANGER };
    const char *names [] = { "a client without CURVE", "a client with an unknown key" };
    for (int k = 0; k < 2; k++) {
        s_rogue_t rogue;
        s_rogue_open (&rogue, endpoints [0], "chief:0", strangers [k], NULL);
        s_rogue_register (&rogue, "worker", 0, 0x5eed);
        s_rogue_work_request (&rogue, 1, 0, 0, 0, true);
        s_rogue_silence (&rogue, names [k], 500);
        s_rogue_close (&rogue);
        s_rogue_open (&rogue, endpoints [1], "ps:0", strangers [k], NULL);
        for (size_t c = 0; c < S_NCONTROL; c++)
            s_rogue_request (&rogue, c);
        s_rogue_silence (&rogue, names [k], 500);
        s_rogue_close (&rogue);
    }
    //  An insider: worker:0's key at ps:0 may push and pull, nothing more.
    s_rogue_t rogue;
    s_rogue_open (&rogue, endpoints [1], "ps:0", S_KEY_TASK, "worker:0");
    for (size_t c = 0; c < S_NCONTROL; c++) {
        s_rogue_request (&rogue, c);
        const ps_proto_t *m = s_rogue_expect (&rogue, PS_PROTO_ERROR, CLUSTER_EVENT_MS);
        const char *type = ps_proto_info [s_control [c]].name;
        if (!m) {
            char log [PATH_MAX + 16];
            snprintf (log, sizeof log, "%s/ps0.log", run->dir);
            harness_print_log (log);
            fail_msg ("ps:0 did not answer %s from worker:0's key", type);
        }
        if (strcmp (m->error.code, "forbidden") != 0)
            fail_msg ("%s from worker:0's key was not refused as forbidden (%s: %s)", type,
                      m->error.code, m->error.message);
    }
    s_rogue_close (&rogue);
    //  ... and at the coordinator it is worker:0, not worker:1.
    s_rogue_open (&rogue, endpoints [0], "chief:0", S_KEY_TASK, "worker:0");
    s_rogue_register (&rogue, "worker", 1, 0x5eed);
    const ps_proto_t *m = s_rogue_expect (&rogue, PS_PROTO_ERROR, CLUSTER_EVENT_MS);
    assert_non_null (m);
    assert_string_equal (m->error.code, "forbidden");
    s_rogue_close (&rogue);
    //  The attacks came while the cluster was at work, not after.
    if (!cluster_running (run))
        fail_msg ("%s: the run ended before the attacks did: make it longer", run->name);
    cluster_run_finish (run, 0);
    cluster_check_done (run, total, 2);
    assert_int_equal (cluster_int (cluster_find (run->rows, "done", -1), "worker_failures"), 0);
    //  Logged once per key, not once per request.
    char log [PATH_MAX + 16];
    snprintf (log, sizeof log, "%s/ps0.log", run->dir);
    assert_true (harness_file_contains (log, "refused shutdown: only the coordinator"));
    assert_false (harness_file_contains (log, "refused fence"));
    assert_true (harness_file_contains (run->log, "refused register as worker:1: this key is "
                                        "worker:0's"));
    cluster_summary (run, "%" PRIu64 " steps; strangers got no answer, worker:0's key was refused "
                     "%zu control requests and worker:1's task", total, S_NCONTROL);
    cluster_run_destroy (run);
}

//  --insecure: the one run without CURVE. It trains as a secured one does,
//  and every process says, at start, that nothing is protected.
static void
test_insecure (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("local run with --insecure");
    int limit = cluster_limit (1280), epochs = 1;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    cluster_local_args (run, limit, cluster_test_limit (500), epochs);
    cluster_arg (run, "--insecure");
    cluster_run_start (run, NULL);
    cluster_run_finish (run, 0);
    cluster_check_done (run, total, 2);
    assert_true (harness_file_contains (run->log, "running with --insecure"));
    const char *children [] = { "ps0", "ps1", "worker0", "worker1" };
    for (size_t i = 0; i < 4; i++) {
        char log [PATH_MAX + 32];
        snprintf (log, sizeof log, "%s/%s.log", run->log_dir, children [i]);
        if (!harness_file_contains (log, "running with --insecure"))
            fail_msg ("%s does not warn that it runs unsecured", log);
    }
    cluster_summary (run, "%" PRIu64 " steps unsecured; all 5 processes warned", total);
    cluster_run_destroy (run);
}


//  --data-plane plain: the servers' connections authenticated by per-task
//  passwords and not encrypted (the faster choice for a network no one
//  else reaches). It trains as a CurveZMQ cluster does, and every process
//  says so at start (test_curve checks the passwords on real sockets).
static void
test_plain_data_plane (void **state)
{
    (void) state;
    cluster_run_t *run = cluster_run_new ("local run, PLAIN data plane");
    int limit = cluster_limit (1280), epochs = 1;
    uint64_t total = cluster_steps_per_epoch (limit) * (uint64_t) epochs;
    cluster_local_args (run, limit, cluster_test_limit (500), epochs);
    cluster_args (run, (const char *[]) { "--data-plane", "plain", NULL });
    cluster_run_start (run, NULL);
    cluster_run_finish (run, 0);
    cluster_check_done (run, total, 2);
    const char *logs [] = { "ps0", "ps1", "worker0", "worker1" };
    for (size_t i = 0; i < 4; i++) {
        char log [PATH_MAX + 32];
        snprintf (log, sizeof log, "%s/%s.log", run->log_dir, logs [i]);
        if (!harness_file_contains (log, "the cluster's data plane is PLAIN"))
            fail_msg ("%s does not say that the data plane is PLAIN", log);
    }
    assert_true (harness_file_contains (run->log, "the cluster's data plane is PLAIN"));
    cluster_summary (run, "%" PRIu64 " steps over a PLAIN data plane; every process said so",
                     total);
    cluster_run_destroy (run);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_rogue_completions, cluster_teardown),
        cmocka_unit_test_teardown (test_rogue_holder_lies, cluster_teardown),
        cmocka_unit_test_teardown (test_rogue_registrations, cluster_teardown),
        cmocka_unit_test_teardown (test_strangers, cluster_teardown),
        cmocka_unit_test_teardown (test_insecure, cluster_teardown),
        cmocka_unit_test_teardown (test_plain_data_plane, cluster_teardown),
    };
    return CLUSTER_MAIN ("security", tests);
}
