//  Unit tests for the consistency modes' step bookkeeping
//  (coordinator/ps_mode_async.c, ps_mode_mirrored.c, ps_mode_ssp.c,
//  ps_mode_sync.c), without processes: each mode runs against a host
//  whose services record what it sends, completes and fails, and is fed
//  work_requests built as a worker would.
//  Async: hand-out, completion only by the holder, requeue on failure, a
//  gradient refused as not finite retried then failing the run, a step
//  failing otherwise backing its worker off (10 ms, doubling) and failing
//  the run after step_retries failures in a row, the
//  evaluation going to a worker, and the end. Mirrored: requests held
//  until every live worker asks, the ring formed, a global step handed
//  out and committed, and a step cut short by a failure counted when a
//  survivor completed it. Ssp: a worker two steps ahead of the slowest
//  held (S = 1) and served when a completion frees it, the staleness
//  histogram, a failed worker leaving the clock with its step requeued, a
//  worker heard again joining it, a long hold answered "wait", the held
//  request answered "stop" at the end, and an evaluating worker holding
//  nobody back (registered again meanwhile, or having lost the answer
//  that handed it the evaluation). Sync: a round's steps handed out with
//  the round, the next round only once every step of it is done, a
//  request with nothing in flight held until the next round opens (one
//  with its step in flight told to wait at once), an evaluation only for
//  a worker with nothing in flight, a failed worker's step handed to
//  another with the same round, a checkpoint waiting for the open round,
//  and the rounds in the done record. Every mode: no step handed out
//  after a stop signal but what the open sync round needs.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "ps_clock.h"
#include "ps_mode.h"
#include "ps_proto.h"

#define S_NWORKERS 2

//  What the modes did, as the host's services saw it.
typedef struct {
    ps_proto_t out;             //  the message started last
    char kind [16];             //  its kind (a work's) or type
    uint64_t step;
    int sent [S_NWORKERS];      //  messages sent to each worker
    char last [S_NWORKERS][16]; //  the kind of the last one
    uint64_t last_step [S_NWORKERS];
    //  The extra fields "round" and "round_steps" of the last message to
    //  each worker, 0 when it had none.
    uint64_t round [S_NWORKERS], round_steps [S_NWORKERS];
    int completed;              //  steps completed, and those with stats
    int counted;
    int failures;
    int fail_code;
    int finished;
} s_log_t;

typedef struct {
    ps_job_t job;
    ps_coord_config_t cfg;
    ps_plan_t plan;
    json_t *layout, *job_json;
    ps_roster_t *roster;
    ps_schedule_t *schedule;
    ps_metrics_t *report;
    ps_evalq_t *evalq;
    ps_ckpt_ctl_t *ckpt;
    ps_mode_host_t host;
    const ps_mode_ops_t *ops;
    void *mode;
    s_log_t log;
} s_fixture_t;

static ps_proto_work_t *
s_work (void *loop, uint64_t id, const char *kind, uint64_t step, uint64_t epoch,
        uint64_t batch, uint64_t wait_ms)
{
    s_fixture_t *fx = loop;
    s_log_t *log = &fx->log;
    log->out = (ps_proto_t) {
        .type = PS_PROTO_WORK, .id = id,
        .work = { .kind = kind, .step = step, .epoch = epoch, .batch = batch,
                  .generation = fx->host.generation, .wait_ms = wait_ms },
    };
    snprintf (log->kind, sizeof log->kind, "%s", kind);
    log->step = step;
    return &log->out.work;
}

static ps_proto_t *
s_message (void *loop, ps_proto_type_t type)
{
    s_log_t *log = &((s_fixture_t *) loop)->log;
    log->out = (ps_proto_t) { .type = type, .id = 1 };
    snprintf (log->kind, sizeof log->kind, "%s", ps_proto_info [type].name);
    log->step = 0;
    return &log->out;
}

//  What a mode sends must be a message the protocol accepts: encode it
//  and decode it again, as a worker would.
static void
s_check_encodes (const ps_proto_t *msg)
{
    msgpack_sbuffer buffer;
    msgpack_sbuffer_init (&buffer);
    msgpack_packer pk;
    msgpack_packer_init (&pk, &buffer, msgpack_sbuffer_write);
    assert_int_equal (ps_proto_encode (msg, &pk), 0);
    msgpack_zone zone;
    assert_true (msgpack_zone_init (&zone, 1024));
    msgpack_object header;
    size_t offset = 0;
    assert_int_equal (msgpack_unpack (buffer.data, buffer.size, &offset, &zone, &header),
                      MSGPACK_UNPACK_SUCCESS);
    ps_proto_t decoded;
    ps_error_t err = { 0 };
    int rc = ps_proto_decode (&header, NULL, 0, &zone, &decoded, &err);
    if (rc)
        print_error ("%s\n", err.msg);
    assert_int_equal (rc, 0);
    assert_int_equal (decoded.type, msg->type);
    msgpack_zone_destroy (&zone);
    msgpack_sbuffer_destroy (&buffer);
}

//  Read the round fields of the work a mode sent worker w (0 when it has
//  none).
static void
s_read_round (s_log_t *log, int w)
{
    const ps_proto_work_t *work = &log->out.work;
    bool is_work = log->out.type == PS_PROTO_WORK;
    log->round [w] = is_work && work->has_round ? work->round : 0;
    log->round_steps [w] = is_work && work->has_round_steps ? work->round_steps : 0;
}

static void
s_send (void *loop, const ps_peer_t *peer)
{
    s_fixture_t *fx = loop;
    s_check_encodes (&fx->log.out);
    for (int w = 0; w < S_NWORKERS; w++)
        if (ps_roster_peer (fx->roster, PS_ROLE_WORKER, w) == peer) {
            fx->log.sent [w]++;
            snprintf (fx->log.last [w], sizeof fx->log.last [w], "%s", fx->log.kind);
            fx->log.last_step [w] = fx->log.step;
            s_read_round (&fx->log, w);
        }
}

static void
s_fail (void *loop, int code, const char *message)
{
    s_fixture_t *fx = loop;
    (void) message;
    fx->log.failures++;
    fx->log.fail_code = code;
    fx->host.failed = true;
}

static void
s_completed (void *loop, uint64_t step, ps_peer_t *peer, const ps_step_report_t *stats)
{
    (void) step;
    s_fixture_t *fx = loop;
    fx->log.completed++;
    fx->log.counted += peer && stats;
}

static void
s_finish (void *loop, double now)
{
    (void) now;
    ((s_fixture_t *) loop)->log.finished++;
}

//  A fixture for mode, whose job has ssp's staleness, of a cluster that
//  lists nevaluators evaluators.
static s_fixture_t *
s_fixture_full (ps_mode_t mode, int staleness, int nevaluators)
{
    static s_fixture_t fx;
    static const char *workers [S_NWORKERS] = { "tcp://127.0.0.1:1", "tcp://127.0.0.1:2" };
    memset (&fx, 0, sizeof fx);
    ps_job_default (&fx.job, 1);
    fx.job.mode = mode;
    fx.job.staleness = staleness;
    fx.cfg.job = fx.job;
    fx.cfg.nworkers = S_NWORKERS;
    fx.cfg.workers = workers;
    fx.cfg.train_count = 1000;
    fx.cfg.nevaluators = nevaluators;
    ps_error_t err;
    fx.roster = ps_roster_new (0, S_NWORKERS, nevaluators);
    fx.schedule = ps_schedule_new (10, 20, &err);
    fx.report = ps_metrics_new (NULL, false, 1e9, false, 0, &err);
    fx.evalq = ps_evalq_new (fx.report);
    fx.layout = json_array ();
    fx.job_json = ps_job_to_json (&fx.job);
    fx.ckpt = ps_ckpt_ctl_new (&fx.job, &fx.plan, fx.layout, fx.job_json, 0, fx.schedule,
                               fx.report);
    fx.host = (ps_mode_host_t) {
        .loop = &fx, .cfg = &fx.cfg, .job = &fx.cfg.job, .roster = fx.roster,
        .schedule = fx.schedule, .report = fx.report, .evalq = fx.evalq, .ckpt = fx.ckpt,
        .plan = &fx.plan, .state = PS_RUN_STARTING, .steps_per_epoch = 10, .total = 20,
        .generation = 100, .lr = fx.job.optimizer.lr,
        .work = s_work, .message = s_message, .send = s_send, .fail = s_fail,
        .completed = s_completed, .finish = s_finish,
    };
    fx.ops = ps_mode_lookup (mode);
    assert_non_null (fx.ops);
    fx.mode = fx.ops->new (&fx.host, &err);
    assert_non_null (fx.mode);
    for (int w = 0; w < S_NWORKERS; w++) {
        char id [8];
        snprintf (id, sizeof id, "w%d", w);
        assert_int_equal (ps_roster_register (fx.roster, PS_ROLE_WORKER, w, 1, id, 2, 10 + w, 0),
                          PS_JOIN_FIRST);
        if (fx.ops->joined)
            fx.ops->joined (fx.mode, PS_ROLE_WORKER, w, true);
    }
    return &fx;
}

static s_fixture_t *
s_fixture_with (ps_mode_t mode, int staleness)
{
    return s_fixture_full (mode, staleness, 0);
}

static s_fixture_t *
s_fixture (ps_mode_t mode)
{
    return s_fixture_with (mode, 3);
}

static void
s_close (s_fixture_t *fx)
{
    fx->ops->destroy (&fx->mode);
    ps_ckpt_ctl_destroy (&fx->ckpt);
    ps_evalq_destroy (&fx->evalq);
    ps_metrics_destroy (&fx->report);
    ps_schedule_destroy (&fx->schedule);
    ps_roster_destroy (&fx->roster);
    json_decref (fx->layout);
    json_decref (fx->job_json);
}

//  A worker's report, as the test sets it.
typedef struct {
    const char *kind, *status;
    uint64_t step, generation;
    uint64_t order, update;     //  mirrored mode's
    const char *error;
    double auc;                 //  a CTR model's evaluation; 0: none
} s_report_t;

//  Worker w asks (want) with its reports.
static void
s_request (s_fixture_t *fx, int w, bool want, const s_report_t *reports, int n)
{
    ps_proto_report_t items [8];
    assert_true (n <= 8);
    for (int i = 0; i < n; i++) {
        const s_report_t *r = &reports [i];
        items [i] = (ps_proto_report_t) {
            .kind = r->kind, .status = r->status, .step = r->step,
            .generation = r->generation, .count = 50, .correct = 25, .loss = 60.0,
            .compute_ms = 2.0, .comm_ms = 1.0, .duplicates = 0, .applied = r->update,
            .has_update = true, .update = r->update, .has_checksum = true, .checksum = 77,
            .has_order = r->order != 0, .order = r->order,
            .has_error = r->error != NULL, .error = r->error,
            .has_auc = r->auc > 0, .auc = r->auc,
        };
    }
    ps_proto_work_request_t req = {
        .reports = { (size_t) n, items }, .want = want,
    };
    fx->ops->request (fx->mode, ps_roster_peer (fx->roster, PS_ROLE_WORKER, w), PS_ROLE_WORKER,
                      w, 1, &req);
}

static void
s_ask (s_fixture_t *fx, int w)
{
    s_request (fx, w, true, NULL, 0);
}

static void
test_async_steps (void **state)
{
    (void) state;
    s_fixture_t *fx = s_fixture (PS_MODE_ASYNC);
    //  Nothing is handed out before the run starts.
    s_ask (fx, 0);
    assert_string_equal (fx->log.last [0], "wait");
    fx->host.state = PS_RUN_RUNNING;
    s_ask (fx, 0);
    assert_string_equal (fx->log.last [0], "train");
    assert_int_equal (fx->log.last_step [0], 1);
    s_ask (fx, 1);
    assert_int_equal (fx->log.last_step [1], 2);
    //  Worker 0 completes its step and gets the next.
    s_report_t done1 = { "train", "done", 1, 100, 0, 0, NULL, 0 };
    s_request (fx, 0, true, &done1, 1);
    assert_int_equal (fx->log.completed, 1);
    assert_int_equal (fx->log.counted, 1);
    assert_int_equal (fx->log.last_step [0], 3);
    //  Worker 1 fails: its step goes back to the queue, and to worker 0.
    assert_true (ps_roster_fail (fx->roster, PS_ROLE_WORKER, 1));
    assert_int_equal (fx->ops->task_failed (fx->mode, PS_ROLE_WORKER, 1), 1);
    s_report_t done3 = { "train", "done", 3, 100, 0, 0, NULL, 0 };
    s_request (fx, 0, true, &done3, 1);
    assert_int_equal (fx->log.last_step [0], 2);
    //  Worker 1's late completion of step 2 is not its to make.
    s_report_t late = { "train", "done", 2, 100, 0, 0, NULL, 0 };
    s_request (fx, 1, false, &late, 1);
    assert_int_equal (fx->log.completed, 2);
    assert_int_equal (fx->host.refused_reports, 1);
    //  A report of an older generation says nothing.
    s_report_t old = { "train", "done", 2, 99, 0, 0, NULL, 0 };
    s_request (fx, 0, false, &old, 1);
    assert_int_equal (fx->log.completed, 2);
    assert_int_equal (ps_schedule_in_flight (fx->schedule), 1);
    s_close (fx);
}

static void
test_async_nonfinite (void **state)
{
    (void) state;
    s_fixture_t *fx = s_fixture (PS_MODE_ASYNC);
    fx->host.state = PS_RUN_RUNNING;
    s_ask (fx, 0);
    uint64_t step = fx->log.last_step [0];
    s_report_t refused = { "train", "failed", step, 100, 0, 0, "nonfinite gradient", 0 };
    //  Retried nonfinite_retries times, each time the same step again.
    for (int i = 0; i < fx->job.nonfinite_retries; i++) {
        s_request (fx, 0, true, &refused, 1);
        assert_int_equal (fx->log.last_step [0], step);
        assert_int_equal (fx->log.failures, 0);
    }
    s_request (fx, 0, true, &refused, 1);
    assert_int_equal (fx->log.failures, 1);
    assert_int_equal (fx->log.fail_code, PS_ENONFINITE);
    assert_int_equal (fx->host.nonfinite_failures, (uint64_t) fx->job.nonfinite_retries + 1);
    s_close (fx);
}

//  Ask for work as worker w until it is handed a train step, within 5 s
//  (a worker backing off after a failure is told to wait meanwhile).
static void
s_ask_until_train (s_fixture_t *fx, int w)
{
    double deadline = ps_clock_ms () + 5000;
    s_ask (fx, w);
    while (strcmp (fx->log.last [w], "train") != 0) {
        if (ps_clock_ms () > deadline)
            fail_msg ("worker %d got no train step within 5 s", w);
        harness_sleep_ms (2);
        s_ask (fx, w);
    }
}

//  A step that fails otherwise than for a non-finite gradient (a server's
//  error reply) holds its worker back, 10 ms after the first failure and
//  twice as long after each next, and is handed out again, up to
//  step_retries times in a row; the next failure fails the run.
static void
test_async_step_retries (void **state)
{
    (void) state;
    s_fixture_t *fx = s_fixture (PS_MODE_ASYNC);
    fx->cfg.job.step_retries = 3;
    fx->host.state = PS_RUN_RUNNING;
    s_ask (fx, 0);
    uint64_t step = fx->log.last_step [0];
    s_report_t failed = { "train", "failed", step, 100, 0, 0,
                          "not_found: pushing the row gradients: no table t on this server", 0 };
    for (int i = 0; i < fx->cfg.job.step_retries; i++) {
        s_request (fx, 0, true, &failed, 1);
        assert_string_equal (fx->log.last [0], "wait");
        //  The wait is what is left of the backoff when the answer is
        //  made, which a loaded machine may make a few milliseconds after
        //  the failure; it is never longer, and half is still the doubling.
        assert_true (fx->log.out.work.wait_ms > (uint64_t) 5 << i);
        assert_true (fx->log.out.work.wait_ms <= (uint64_t) 10 << i);
        assert_int_equal (fx->log.failures, 0);
        s_ask_until_train (fx, 0);
        assert_int_equal (fx->log.last_step [0], step);
    }
    s_request (fx, 0, true, &failed, 1);
    assert_int_equal (fx->log.failures, 1);
    assert_int_equal (fx->log.fail_code, PS_EIO);
    s_close (fx);
}

//  Every step of the schedule handed out and done.
static void
s_all_steps_done (s_fixture_t *fx)
{
    for (uint64_t s = 1; s <= fx->host.total; s++) {
        uint64_t step;
        assert_int_equal (ps_schedule_next (fx->schedule, 0, &step), 0);
        assert_int_equal (ps_schedule_complete (fx->schedule, step), 0);
    }
}

static void
test_async_eval_and_end (void **state)
{
    (void) state;
    s_fixture_t *fx = s_fixture (PS_MODE_ASYNC);
    fx->host.state = PS_RUN_RUNNING;
    ps_evalq_ask (fx->evalq, 1, 0);
    s_ask (fx, 1);
    assert_string_equal (fx->log.last [1], "eval");
    //  A failed evaluation waits again, for the next to ask.
    s_report_t failed = { "eval", "failed", 0, 100, 0, 0, NULL, 0 };
    s_request (fx, 1, true, &failed, 1);
    assert_string_equal (fx->log.last [1], "eval");
    s_report_t done = { "eval", "done", 0, 100, 0, 0, NULL, 0 };
    s_request (fx, 1, false, &done, 1);
    double loss, accuracy, auc;
    assert_true (ps_evalq_latest (fx->evalq, &loss, &accuracy, &auc));
    assert_true (accuracy == 0.5);
    assert_true (isnan (auc));
    //  A CTR model's evaluation carries its AUC through.
    ps_evalq_ask (fx->evalq, 1, 0);
    s_ask (fx, 1);
    assert_string_equal (fx->log.last [1], "eval");
    s_report_t ctr = { "eval", "done", 0, 100, 0, 0, NULL, 0.75 };
    s_request (fx, 1, false, &ctr, 1);
    assert_true (ps_evalq_latest (fx->evalq, &loss, &accuracy, &auc));
    assert_true (auc == 0.75 && loss == 60.0 / 50);
    //  Every step done: advance hands over to the loop's finish.
    s_all_steps_done (fx);
    fx->ops->advance (fx->mode, 0);
    assert_int_equal (fx->log.finished, 1);
    //  Once stopping, a request is answered "stop".
    fx->host.state = PS_RUN_STOPPING;
    s_ask (fx, 0);
    assert_string_equal (fx->log.last [0], "stop");
    assert_true (ps_roster_peer (fx->roster, PS_ROLE_WORKER, 0)->stopped);
    s_close (fx);
}

//  Worker w completes the step it was handed last and asks again.
static void
s_done_and_ask (s_fixture_t *fx, int w)
{
    s_report_t done = { "train", "done", fx->log.last_step [w], fx->host.generation, 0, 0, NULL, 0 };
    s_request (fx, w, true, &done, 1);
}

//  The evaluator asks for work; returns the kind it was answered.
static const char *
s_evaluator_asks (s_fixture_t *fx)
{
    ps_proto_work_request_t req = { .want = true };
    snprintf (fx->log.kind, sizeof fx->log.kind, "%s", "none");
    fx->ops->request (fx->mode, ps_roster_peer (fx->roster, PS_ROLE_EVALUATOR, 0),
                      PS_ROLE_EVALUATOR, 0, 1, &req);
    return fx->log.kind;
}

//  An async run, started now, of a cluster that lists an evaluator.
static s_fixture_t *
s_listed_evaluator_run (void)
{
    s_fixture_t *fx = s_fixture_full (PS_MODE_ASYNC, 3, 1);
    ps_metrics_start (fx->report, ps_clock_ms ());
    fx->host.state = PS_RUN_RUNNING;
    return fx;
}

//  An evaluator the cluster lists takes the evaluations from its first
//  registration on: until then they wait for it, while steps are left and
//  within the registration timeout; once it has failed, a worker takes
//  them.
static void
test_async_eval_waits_for_evaluator (void **state)
{
    (void) state;
    s_fixture_t *fx = s_listed_evaluator_run ();
    ps_evalq_ask (fx->evalq, 0, 0);
    s_ask (fx, 0);
    assert_string_equal (fx->log.last [0], "train");
    assert_true (ps_evalq_pending (fx->evalq, NULL, NULL));
    assert_int_equal (ps_roster_register (fx->roster, PS_ROLE_EVALUATOR, 0, 1, "e0", 2, 20, 0),
                      PS_JOIN_FIRST);
    if (fx->ops->joined)
        fx->ops->joined (fx->mode, PS_ROLE_EVALUATOR, 0, true);
    assert_string_equal (s_evaluator_asks (fx), "eval");
    //  The evaluator fails with the evaluation in hand (the loop gives the
    //  evaluation back, as ps_coord.c does): a worker has it.
    assert_true (ps_roster_fail (fx->roster, PS_ROLE_EVALUATOR, 0));
    ps_evalq_lost (fx->evalq, PS_ROLE_EVALUATOR, 0);
    fx->ops->task_failed (fx->mode, PS_ROLE_EVALUATOR, 0);
    s_done_and_ask (fx, 0);
    assert_string_equal (fx->log.last [0], "eval");
    s_close (fx);

    //  Past the registration timeout, a worker evaluates.
    fx = s_listed_evaluator_run ();
    fx->cfg.job.register_timeout_ms = 0;
    ps_evalq_ask (fx->evalq, 0, 0);
    s_ask (fx, 1);
    assert_string_equal (fx->log.last [1], "eval");
    s_close (fx);

    //  With no step left to hand out, a worker evaluates.
    fx = s_listed_evaluator_run ();
    s_all_steps_done (fx);
    ps_evalq_ask (fx->evalq, 1, 20);
    s_ask (fx, 1);
    assert_string_equal (fx->log.last [1], "eval");
    s_close (fx);

    //  Once the launcher gave up restarting an evaluator that never
    //  registered (the loop marks it, as ps_coord.c does), a worker
    //  evaluates.
    fx = s_listed_evaluator_run ();
    ps_evalq_ask (fx->evalq, 0, 0);
    s_ask (fx, 0);
    assert_string_equal (fx->log.last [0], "train");
    ps_roster_peer (fx->roster, PS_ROLE_EVALUATOR, 0)->abandoned = true;
    s_ask (fx, 1);
    assert_string_equal (fx->log.last [1], "eval");
    s_close (fx);
}

//  The done record's "staleness" histogram entry d.
static json_int_t
s_staleness (json_t *record, size_t d)
{
    json_t *histogram = json_object_get (json_object_get (record, "staleness"), "histogram");
    return json_integer_value (json_array_get (histogram, d));
}

static void
test_ssp_clock (void **state)
{
    (void) state;
    s_fixture_t *fx = s_fixture_with (PS_MODE_SSP, 1);
    assert_string_equal (fx->ops->name, "ssp");
    fx->host.state = PS_RUN_RUNNING;
    s_ask (fx, 0);
    s_ask (fx, 1);
    assert_int_equal (fx->log.last_step [0], 1);
    assert_int_equal (fx->log.last_step [1], 2);
    //  Worker 0 finishes step 1: one ahead of worker 1, within S = 1.
    s_done_and_ask (fx, 0);
    assert_int_equal (fx->log.last_step [0], 3);
    //  Two ahead: its request is held, not answered, however often the
    //  loop goes round.
    int sent = fx->log.sent [0];
    s_done_and_ask (fx, 0);
    fx->ops->advance (fx->mode, ps_clock_ms ());
    assert_int_equal (fx->log.sent [0], sent);
    assert_int_equal (fx->log.completed, 2);
    //  Worker 1 finishes step 2: it goes on, and the held worker 0 is
    //  served at once.
    s_done_and_ask (fx, 1);
    assert_int_equal (fx->log.last_step [1], 4);
    fx->ops->advance (fx->mode, ps_clock_ms ());
    assert_int_equal (fx->log.sent [0], sent + 1);
    assert_string_equal (fx->log.last [0], "train");
    assert_int_equal (fx->log.last_step [0], 5);
    //  Starts: steps 1, 2 and 4 level with the slowest, 3 and 5 one ahead.
    json_t *record = json_object ();
    fx->ops->report (fx->mode, record, NULL, 3);
    json_t *staleness = json_object_get (record, "staleness");
    assert_int_equal (json_integer_value (json_object_get (staleness, "bound")), 1);
    assert_int_equal (json_array_size (json_object_get (staleness, "histogram")), 2);
    assert_int_equal (s_staleness (record, 0), 3);
    assert_int_equal (s_staleness (record, 1), 2);
    assert_int_equal (json_integer_value (json_object_get (staleness, "max")), 1);
    json_decref (record);
    s_close (fx);
}

//  A worker that evaluates does not hold the others back: its clock stays
//  while it evaluates, and the other runs past the bound meanwhile; back,
//  it starts level with the slowest other.
static void
test_ssp_eval (void **state)
{
    (void) state;
    s_fixture_t *fx = s_fixture_with (PS_MODE_SSP, 1);
    fx->host.state = PS_RUN_RUNNING;
    ps_evalq_ask (fx->evalq, 1, 0);
    s_ask (fx, 1);
    assert_string_equal (fx->log.last [1], "eval");
    s_ask (fx, 0);
    for (uint64_t step = 2; step <= 5; step++) {
        s_done_and_ask (fx, 0);
        assert_string_equal (fx->log.last [0], "train");
        assert_int_equal (fx->log.last_step [0], step);
    }
    //  Back with its result, worker 1 is level with worker 0 (clock 4):
    //  it may start, and worker 0 one ahead of it still may too.
    s_report_t evaluated = { "eval", "done", 0, 100, 0, 0, NULL, 0 };
    s_request (fx, 1, true, &evaluated, 1);
    assert_string_equal (fx->log.last [1], "train");
    assert_int_equal (fx->log.last_step [1], 6);
    s_done_and_ask (fx, 0);
    assert_int_equal (fx->log.last_step [0], 7);
    //  Two ahead of worker 1 now: held.
    int sent = fx->log.sent [0];
    s_done_and_ask (fx, 0);
    assert_int_equal (fx->log.sent [0], sent);
    json_t *record = json_object ();
    fx->ops->report (fx->mode, record, NULL, 6);
    assert_int_equal (json_integer_value (json_object_get (json_object_get (record, "staleness"),
                                                           "max")), 1);
    json_decref (record);
    s_close (fx);
}

//  A worker that registers again while it evaluates is back in the clock
//  (its result may still come), and one that asks for work without the
//  result of the evaluation it was handed never had that answer: the
//  evaluation goes to the next that asks.
static void
test_ssp_eval_again (void **state)
{
    (void) state;
    s_fixture_t *fx = s_fixture_with (PS_MODE_SSP, 1);
    fx->host.state = PS_RUN_RUNNING;
    ps_evalq_ask (fx->evalq, 1, 0);
    s_ask (fx, 1);
    assert_string_equal (fx->log.last [1], "eval");
    fx->ops->joined (fx->mode, PS_ROLE_WORKER, 1, false);
    s_report_t evaluated = { "eval", "done", 0, 100, 0, 0, NULL, 0 };
    s_request (fx, 1, true, &evaluated, 1);
    assert_string_equal (fx->log.last [1], "train");
    assert_int_equal (fx->log.last_step [1], 1);
    ps_evalq_ask (fx->evalq, 1, 1);
    s_ask (fx, 0);
    assert_string_equal (fx->log.last [0], "eval");
    s_ask (fx, 0);
    assert_string_equal (fx->log.last [0], "eval");
    s_request (fx, 0, true, &(s_report_t) { "eval", "done", 1, 100, 0, 0, NULL, 0 }, 1);
    assert_string_equal (fx->log.last [0], "train");
    assert_int_equal (fx->log.last_step [0], 2);
    s_close (fx);
}

static void
test_ssp_failure (void **state)
{
    (void) state;
    s_fixture_t *fx = s_fixture_with (PS_MODE_SSP, 1);
    fx->host.state = PS_RUN_RUNNING;
    s_ask (fx, 0);
    s_ask (fx, 1);
    s_done_and_ask (fx, 0);
    s_done_and_ask (fx, 0);
    int sent = fx->log.sent [0];
    //  Worker 1, the slowest, fails: it leaves the clock, its step 2 goes
    //  back to the queue, and the held worker 0 is served that step.
    assert_true (ps_roster_fail (fx->roster, PS_ROLE_WORKER, 1));
    assert_int_equal (fx->ops->task_failed (fx->mode, PS_ROLE_WORKER, 1), 1);
    fx->ops->advance (fx->mode, ps_clock_ms ());
    assert_int_equal (fx->log.sent [0], sent + 1);
    assert_int_equal (fx->log.last_step [0], 2);
    //  Worker 1 is heard again: it joins at worker 0's clock (2), so it
    //  holds worker 0 back again once that is two ahead.
    ps_peer_t *peer = ps_roster_peer (fx->roster, PS_ROLE_WORKER, 1);
    assert_true (ps_roster_heard (fx->roster, peer, ps_clock_ms ()));
    fx->ops->rejoined (fx->mode, PS_ROLE_WORKER, 1);
    s_ask (fx, 1);
    assert_string_equal (fx->log.last [1], "train");
    assert_int_equal (fx->log.last_step [1], 4);
    s_done_and_ask (fx, 0);
    assert_string_equal (fx->log.last [0], "train");
    assert_int_equal (fx->log.last_step [0], 5);
    sent = fx->log.sent [0];
    s_done_and_ask (fx, 0);
    fx->ops->advance (fx->mode, ps_clock_ms ());
    assert_int_equal (fx->log.sent [0], sent);
    //  A request held long is answered "wait", so that the worker does not
    //  take it for lost.
    fx->ops->advance (fx->mode, ps_clock_ms () + PS_MODE_HOLD_MS + 1000);
    assert_int_equal (fx->log.sent [0], sent + 1);
    assert_string_equal (fx->log.last [0], "wait");
    //  Held again, then the run ends: the held request is answered "stop".
    s_ask (fx, 0);
    assert_int_equal (fx->log.sent [0], sent + 1);
    fx->host.state = PS_RUN_STOPPING;
    fx->ops->stop (fx->mode);
    assert_string_equal (fx->log.last [0], "stop");
    assert_int_equal (fx->log.failures, 0);
    s_close (fx);
}

//  Both workers report the phase in hand (order, update) and ask again.
static void
s_ring_reports (s_fixture_t *fx, const char *kind, uint64_t order, uint64_t update)
{
    for (int w = 0; w < S_NWORKERS; w++) {
        s_report_t r = { kind, "done", fx->log.last_step [w], fx->host.generation, order,
                         update, NULL, 0 };
        s_request (fx, w, true, &r, 1);
    }
}

//  Worker w completes step (of generation 100) and asks again.
static void
s_done (s_fixture_t *fx, int w, uint64_t step)
{
    s_report_t done = { "train", "done", step, 100, 0, 0, NULL, 0 };
    s_request (fx, w, true, &done, 1);
}

//  Worker w was last handed step of round `round` of `steps` steps.
static void
s_assert_train (s_fixture_t *fx, int w, uint64_t step, uint64_t round, uint64_t steps)
{
    assert_string_equal (fx->log.last [w], "train");
    assert_int_equal (fx->log.last_step [w], step);
    assert_int_equal (fx->log.round [w], round);
    assert_int_equal (fx->log.round_steps [w], steps);
}

//  A round is one step per live worker, named by its first step; the next
//  is handed out only once every step of this one is done, and the done
//  record counts the rounds.
static void
test_sync_rounds (void **state)
{
    (void) state;
    s_fixture_t *fx = s_fixture (PS_MODE_SYNC);
    ps_plan_t plan = { .overlap = true };
    fx->ops->plan (fx->mode, &plan);
    assert_true (plan.sync);
    assert_false (plan.overlap);
    fx->host.state = PS_RUN_RUNNING;
    s_ask (fx, 0);
    s_assert_train (fx, 0, 1, 1, 2);
    s_ask (fx, 1);
    s_assert_train (fx, 1, 2, 1, 2);
    //  Worker 0 is done first: round 1 is not, so its request is held,
    //  not answered (the worker does not poll), however often the loop
    //  goes round.
    int sent = fx->log.sent [0];
    s_done (fx, 0, 1);
    fx->ops->advance (fx->mode, ps_clock_ms ());
    assert_int_equal (fx->log.sent [0], sent);
    //  Worker 1's completion ends round 1; it gets round 3's first step,
    //  and the held worker 0 the second at once.
    s_done (fx, 1, 2);
    assert_int_equal (fx->log.completed, 2);
    s_assert_train (fx, 1, 3, 3, 2);
    fx->ops->advance (fx->mode, ps_clock_ms ());
    assert_int_equal (fx->log.sent [0], sent + 1);
    s_assert_train (fx, 0, 4, 3, 2);
    //  A worker asks before it pushes its step: with the round handed out
    //  it is told to wait at once, not held, for the step's completion
    //  goes with its next request and the round needs it.
    s_ask (fx, 0);
    assert_string_equal (fx->log.last [0], "wait");
    assert_int_equal (fx->log.round [0], 0);
    //  Nothing more while round 3 is open, even for a worker with none.
    sent = fx->log.sent [0];
    s_done (fx, 0, 4);
    fx->ops->advance (fx->mode, ps_clock_ms ());
    assert_int_equal (fx->log.sent [0], sent);
    s_done (fx, 1, 3);
    s_assert_train (fx, 1, 5, 5, 2);
    fx->ops->advance (fx->mode, ps_clock_ms ());
    s_assert_train (fx, 0, 6, 5, 2);
    json_t *record = json_object (), *mismatches = json_array ();
    fx->ops->report (fx->mode, record, mismatches, 4);
    assert_int_equal (json_integer_value (json_object_get (record, "rounds")), 2);
    assert_true (json_real_value (json_object_get (record, "round_steps_mean")) == 2.0);
    json_decref (record);
    json_decref (mismatches);
    s_close (fx);
}

//  An evaluation goes to a worker whose step is reported, never with its
//  step in flight (the step's completion, and so its round, would wait
//  for the evaluation); the other worker trains the rounds meanwhile.
static void
test_sync_eval (void **state)
{
    (void) state;
    s_fixture_t *fx = s_fixture (PS_MODE_SYNC);
    fx->host.state = PS_RUN_RUNNING;
    s_ask (fx, 0);
    s_ask (fx, 1);
    ps_evalq_ask (fx->evalq, 1, 0);
    //  Worker 0 asks before it pushes step 1: "wait", not the evaluation.
    s_ask (fx, 0);
    assert_string_equal (fx->log.last [0], "wait");
    //  Its next request carries step 1's completion: now it evaluates.
    s_done (fx, 0, 1);
    assert_string_equal (fx->log.last [0], "eval");
    //  Round 1 closes without it, and worker 1 takes both steps of round
    //  3, the second as it asks before pushing the first.
    s_done (fx, 1, 2);
    s_assert_train (fx, 1, 3, 3, 2);
    s_ask (fx, 1);
    s_assert_train (fx, 1, 4, 3, 2);
    s_report_t evaluated = { "eval", "done", 0, 100, 0, 0, NULL, 0 };
    s_request (fx, 0, true, &evaluated, 1);
    double loss, accuracy, auc;
    assert_true (ps_evalq_latest (fx->evalq, &loss, &accuracy, &auc));
    s_close (fx);
}

//  A failed worker's step of the open round goes to another worker with
//  the same step id and round; the next round counts the live workers.
static void
test_sync_rehand (void **state)
{
    (void) state;
    s_fixture_t *fx = s_fixture (PS_MODE_SYNC);
    fx->host.state = PS_RUN_RUNNING;
    s_ask (fx, 0);
    s_ask (fx, 1);
    s_assert_train (fx, 1, 2, 1, 2);
    assert_true (ps_roster_fail (fx->roster, PS_ROLE_WORKER, 1));
    assert_int_equal (fx->ops->task_failed (fx->mode, PS_ROLE_WORKER, 1), 1);
    s_done (fx, 0, 1);
    s_assert_train (fx, 0, 2, 1, 2);
    //  The failed worker's late completion is not its to make.
    s_report_t late = { "train", "done", 2, 100, 0, 0, NULL, 0 };
    s_request (fx, 1, false, &late, 1);
    assert_int_equal (fx->log.completed, 1);
    s_done (fx, 0, 2);
    assert_int_equal (fx->log.completed, 2);
    s_assert_train (fx, 0, 3, 3, 1);
    s_close (fx);
}

//  A checkpoint waits for the open round: its waiting step is still handed
//  out, no round opens before the checkpoint is taken, and the mode does
//  not take it while the round is half done.
static void
test_sync_checkpoint_drain (void **state)
{
    (void) state;
    s_fixture_t *fx = s_fixture (PS_MODE_SYNC);
    fx->host.state = PS_RUN_RUNNING;
    s_ask (fx, 0);
    ps_ckpt_ctl_pause (fx->ckpt, 1.0);
    //  Nothing in flight, but step 2 of round 1 is not done: no snapshot.
    s_report_t done1 = { "train", "done", 1, 100, 0, 0, NULL, 0 };
    s_request (fx, 0, false, &done1, 1);
    assert_int_equal (ps_schedule_in_flight (fx->schedule), 0);
    fx->ops->advance (fx->mode, 2.0);
    assert_int_equal (ps_ckpt_ctl_state (fx->ckpt), PS_CKPT_DRAINING);
    s_ask (fx, 1);
    s_assert_train (fx, 1, 2, 1, 2);
    s_ask (fx, 0);
    assert_string_equal (fx->log.last [0], "wait");
    s_done (fx, 1, 2);
    assert_string_equal (fx->log.last [1], "wait");
    assert_int_equal (ps_schedule_in_flight (fx->schedule), 0);
    assert_int_equal (ps_schedule_done_count (fx->schedule), 2);
    //  Once the checkpoint is out of the way, round 3 opens.
    ps_ckpt_ctl_cancel (fx->ckpt);
    s_ask (fx, 0);
    s_assert_train (fx, 0, 3, 3, 2);
    s_close (fx);
}

//  A run of mode under way, worker 0 handed step 1; then the stop signal.
static s_fixture_t *
s_stop_after_one (ps_mode_t mode)
{
    s_fixture_t *fx = s_fixture (mode);
    fx->host.state = PS_RUN_RUNNING;
    s_ask (fx, 0);
    fx->host.stop_asked = true;
    return fx;
}

//  A mirrored run whose ring of both workers is formed and was handed
//  global step 1 (batches 1 and 2).
static s_fixture_t *
s_mirrored_stepping (void)
{
    s_fixture_t *fx = s_fixture (PS_MODE_MIRRORED);
    assert_int_equal (fx->ops->holders, PS_ROLE_WORKER);
    assert_int_equal (fx->ops->setup (fx->mode), 0);
    fx->host.state = PS_RUN_RUNNING;
    //  A request is held until every live worker has asked.
    s_ask (fx, 0);
    fx->ops->advance (fx->mode, 0);
    assert_int_equal (fx->log.sent [0], 0);
    s_ask (fx, 1);
    uint64_t generation = fx->host.generation;
    fx->ops->advance (fx->mode, 0);
    assert_string_equal (fx->log.last [0], "ring");
    assert_string_equal (fx->log.last [1], "ring");
    assert_true (fx->host.generation == generation + 1);
    //  Both joined (order 1): the first global step hands each a batch.
    s_ring_reports (fx, "ring", 1, 0);
    fx->ops->advance (fx->mode, 0);
    assert_string_equal (fx->log.last [0], "train");
    assert_int_equal (fx->log.last_step [0], 1);
    assert_int_equal (fx->log.last_step [1], 2);
    return fx;
}

//  After a stop signal (the host's stop_asked) no mode hands out a step
//  the run's last checkpoint would miss. Async answers "wait".
static void
test_stop_asked_async (void **state)
{
    (void) state;
    s_fixture_t *fx = s_stop_after_one (PS_MODE_ASYNC);
    s_ask (fx, 1);
    assert_string_equal (fx->log.last [1], "wait");
    s_done (fx, 0, 1);
    assert_string_equal (fx->log.last [0], "wait");
    assert_int_equal (ps_schedule_done_count (fx->schedule), 1);
    assert_int_equal (ps_schedule_in_flight (fx->schedule), 0);
    s_close (fx);
}

//  Ssp (bound 0): the request of worker 0, a step ahead and held when the
//  signal comes, is answered "wait" at the next advance, as is worker 1.
static void
test_stop_asked_ssp (void **state)
{
    (void) state;
    s_fixture_t *fx = s_fixture_with (PS_MODE_SSP, 0);
    fx->host.state = PS_RUN_RUNNING;
    s_ask (fx, 0);
    s_ask (fx, 1);
    int sent = fx->log.sent [0];
    s_done_and_ask (fx, 0);
    assert_int_equal (fx->log.sent [0], sent);
    fx->host.stop_asked = true;
    fx->ops->advance (fx->mode, ps_clock_ms ());
    assert_int_equal (fx->log.sent [0], sent + 1);
    assert_string_equal (fx->log.last [0], "wait");
    s_done_and_ask (fx, 1);
    assert_string_equal (fx->log.last [1], "wait");
    assert_int_equal (ps_schedule_done_count (fx->schedule), 2);
    s_close (fx);
}

//  Sync: the open round's last step is still handed out (the checkpoint
//  waits for the round), and no round opens after it.
static void
test_stop_asked_sync (void **state)
{
    (void) state;
    s_fixture_t *fx = s_stop_after_one (PS_MODE_SYNC);
    s_ask (fx, 1);
    s_assert_train (fx, 1, 2, 1, 2);
    s_done (fx, 0, 1);
    s_done (fx, 1, 2);
    s_ask (fx, 0);
    assert_string_equal (fx->log.last [0], "wait");
    assert_string_equal (fx->log.last [1], "wait");
    assert_int_equal (ps_schedule_done_count (fx->schedule), 2);
    s_close (fx);
}

//  Mirrored: a ring that trained global step 1 (batches 1 and 2) and is
//  ready starts no other.
static void
test_stop_asked_mirrored (void **state)
{
    (void) state;
    s_fixture_t *fx = s_mirrored_stepping ();
    fx->host.stop_asked = true;
    int sent = fx->log.sent [0];
    s_ring_reports (fx, "train", 2, 1);
    fx->ops->advance (fx->mode, 0);
    fx->ops->advance (fx->mode, 0);
    assert_int_equal (ps_schedule_done_count (fx->schedule), 2);
    assert_int_equal (fx->log.sent [0], sent);
    assert_int_equal (fx->log.last_step [0], 1);
    s_close (fx);
}

static void
test_mirrored_ring (void **state)
{
    (void) state;
    s_fixture_t *fx = s_mirrored_stepping ();
    //  Both applied update 1 (order 2): both batches are done, with stats.
    s_ring_reports (fx, "train", 2, 1);
    fx->ops->advance (fx->mode, 0);
    assert_int_equal (fx->log.completed, 2);
    assert_int_equal (fx->log.counted, 2);
    assert_int_equal (ps_schedule_done_count (fx->schedule), 2);
    assert_int_equal (fx->log.last_step [0], 3);
    //  Worker 1 dies in the next step after worker 0 applied it: the step
    //  counts, since a survivor completed it, and the ring is formed anew.
    s_report_t r0 = { "train", "done", 3, fx->host.generation, 3, 2, NULL, 0 };
    s_request (fx, 0, true, &r0, 1);
    assert_true (ps_roster_fail (fx->roster, PS_ROLE_WORKER, 1));
    fx->ops->task_failed (fx->mode, PS_ROLE_WORKER, 1);
    fx->ops->advance (fx->mode, 0);
    assert_int_equal (ps_schedule_done_count (fx->schedule), 4);
    assert_string_equal (fx->log.last [0], "ring");
    assert_int_equal (fx->log.failures, 0);
    //  The done record's part: what each replica recorded.
    json_t *record = json_object (), *mismatches = json_array ();
    fx->ops->report (fx->mode, record, mismatches, 4);
    assert_int_equal (json_integer_value (json_object_get (record, "updates")), 2);
    json_decref (record);
    json_decref (mismatches);
    s_close (fx);
}

static void
test_mirrored_step_lost (void **state)
{
    (void) state;
    s_fixture_t *fx = s_fixture (PS_MODE_MIRRORED);
    assert_int_equal (fx->ops->setup (fx->mode), 0);
    fx->host.state = PS_RUN_RUNNING;
    s_ask (fx, 0);
    s_ask (fx, 1);
    fx->ops->advance (fx->mode, 0);
    s_ring_reports (fx, "ring", 1, 0);
    fx->ops->advance (fx->mode, 0);
    assert_string_equal (fx->log.last [1], "train");
    //  Worker 1 dies before anyone applied the step: its batches go back
    //  to the queue, to be trained by the next ring.
    assert_true (ps_roster_fail (fx->roster, PS_ROLE_WORKER, 1));
    fx->ops->task_failed (fx->mode, PS_ROLE_WORKER, 1);
    s_report_t r0 = { "train", "failed", 1, fx->host.generation, 2, 0, NULL, 0 };
    s_request (fx, 0, true, &r0, 1);
    fx->ops->advance (fx->mode, 0);
    assert_int_equal (ps_schedule_done_count (fx->schedule), 0);
    assert_int_equal (ps_schedule_in_flight (fx->schedule), 0);
    assert_string_equal (fx->log.last [0], "ring");
    s_close (fx);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_async_steps),
        cmocka_unit_test (test_async_nonfinite),
        cmocka_unit_test (test_async_step_retries),
        cmocka_unit_test (test_async_eval_and_end),
        cmocka_unit_test (test_async_eval_waits_for_evaluator),
        cmocka_unit_test (test_sync_rounds),
        cmocka_unit_test (test_sync_eval),
        cmocka_unit_test (test_sync_rehand),
        cmocka_unit_test (test_sync_checkpoint_drain),
        cmocka_unit_test (test_stop_asked_async),
        cmocka_unit_test (test_stop_asked_ssp),
        cmocka_unit_test (test_stop_asked_sync),
        cmocka_unit_test (test_stop_asked_mirrored),
        cmocka_unit_test (test_mirrored_ring),
        cmocka_unit_test (test_mirrored_step_lost),
        cmocka_unit_test (test_ssp_clock),
        cmocka_unit_test (test_ssp_eval),
        cmocka_unit_test (test_ssp_eval_again),
        cmocka_unit_test (test_ssp_failure),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
