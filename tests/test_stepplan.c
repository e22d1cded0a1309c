//  Unit tests for the worker's step plan (worker/ps_stepplan.c) and the
//  step bookkeeping of a consistency mode over it (worker/ps_wmode.h),
//  without processes: what a new plan changes (nothing, the layout or the
//  compute), the check of a plan's variables against the model (names,
//  shapes and order, each refusal naming the variable), and, on the real
//  data set (group "real"), building a step plan: an evaluator loads no
//  training data, a plan whose steps per epoch disagree with the data is
//  refused naming both counts, batches are the seed's, and a new layout
//  with another variable order is refused while the plan in use stays.
//  Then the mirrored mode on a ring of one member (a real socket on
//  loopback): joining, a step at the expected update and one at a stale
//  update, an evaluation with the replica's checksum, a save, an abort
//  outside a collective, and an evaluator's mode that reports everything
//  failed; each checked in the reports that would go to the coordinator.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>
#include <stdio.h>

#include "harness.h"
#include "ps_dataset.h"
#include "ps_model.h"
#include "ps_msg.h"
#include "ps_stepplan.h"
#include "ps_wmode.h"
#include "ps_wmode_ctr.h"

static char *
s_strdup (const char *s)
{
    char *copy = strdup (s);
    assert_non_null (copy);
    return copy;
}

//  A plan for built-in model `name` on two servers (each variable whole on
//  server v % 2), with the given data limits, as ps_plan_read would make.
static void
s_plan (ps_plan_t *plan, const char *name, uint64_t train_limit, uint64_t test_limit)
{
    ps_error_t err = { 0 };
    ps_model_t *model = ps_model_load (name, &err);
    if (!model)
        fail_msg ("model %s: %s", name, err.msg);
    memset (plan, 0, sizeof *plan);
    plan->model = s_strdup (ps_model_spec (model));
    plan->batch_size = 32;
    plan->eval_batch = 100;
    plan->seed = 7;
    plan->data_dir = s_strdup (harness_data_dir ());
    plan->train_limit = train_limit;
    plan->test_limit = test_limit;
    plan->threads = 1;
    snprintf (plan->device, sizeof plan->device, "cpu");
    plan->nservers = 2;
    plan->servers = calloc (2, sizeof (char *));
    assert_non_null (plan->servers);
    plan->servers [0] = s_strdup ("tcp://127.0.0.1:7001");
    plan->servers [1] = s_strdup ("tcp://127.0.0.1:7002");
    plan->nvars = ps_model_variable_count (model);
    plan->vars = calloc ((size_t) plan->nvars, sizeof (ps_plan_var_t));
    assert_non_null (plan->vars);
    for (int v = 0; v < plan->nvars; v++) {
        const ps_variable_t *var = ps_model_variable (model, v);
        ps_plan_var_t *pv = &plan->vars [v];
        snprintf (pv->var, sizeof pv->var, "%s", var->name);
        pv->shape = var->shape;
        pv->nparts = 1;
        pv->splits = calloc (2, sizeof (int64_t));
        pv->servers = calloc (1, sizeof (int));
        assert_non_null (pv->splits);
        assert_non_null (pv->servers);
        pv->splits [1] = var->shape.dims [0];
        pv->servers [0] = v % 2;
    }
    plan->client_timeout_ms = 5000;
    plan->eval_batch = 100;
    ps_model_destroy (&model);
}

//  Swap variables a and b of plan (their names, shapes and placement).
static void
s_swap_vars (ps_plan_t *plan, int a, int b)
{
    ps_plan_var_t var = plan->vars [a];
    plan->vars [a] = plan->vars [b];
    plan->vars [b] = var;
}

static void
test_compare (void **state)
{
    (void) state;
    ps_plan_t a, b;
    s_plan (&a, "mlp", 0, 0);
    s_plan (&b, "mlp", 0, 0);
    assert_int_equal (ps_stepplan_compare (&a, &b), PS_STEPPLAN_SAME);
    //  What the backend, the data or the batch buffers depend on.
    b.batch_size = 64;
    assert_int_equal (ps_stepplan_compare (&a, &b), PS_STEPPLAN_COMPUTE);
    b.batch_size = a.batch_size;
    b.test_limit = 100;
    assert_int_equal (ps_stepplan_compare (&a, &b), PS_STEPPLAN_COMPUTE);
    b.test_limit = a.test_limit;
    snprintf (b.device, sizeof b.device, "auto");
    assert_int_equal (ps_stepplan_compare (&a, &b), PS_STEPPLAN_COMPUTE);
    snprintf (b.device, sizeof b.device, "cpu");
    //  Where the variables live.
    free (b.servers [1]);
    b.servers [1] = s_strdup ("tcp://127.0.0.1:7003");
    assert_int_equal (ps_stepplan_compare (&a, &b), PS_STEPPLAN_LAYOUT);
    free (b.servers [1]);
    b.servers [1] = s_strdup (a.servers [1]);
    b.vars [0].servers [0] = 1;
    assert_int_equal (ps_stepplan_compare (&a, &b), PS_STEPPLAN_LAYOUT);
    b.vars [0].servers [0] = a.vars [0].servers [0];
    b.client_timeout_ms = 6000;
    assert_int_equal (ps_stepplan_compare (&a, &b), PS_STEPPLAN_LAYOUT);
    b.client_timeout_ms = a.client_timeout_ms;
    //  A change of model is a change of compute, whatever the layout.
    ps_plan_t c;
    s_plan (&c, "cnn", 0, 0);
    assert_int_equal (ps_stepplan_compare (&a, &c), PS_STEPPLAN_COMPUTE);
    //  Steps, the seed and the mode are not the step plan's to compare.
    b.total_steps = 99;
    b.steps_per_epoch = 3;
    assert_int_equal (ps_stepplan_compare (&a, &b), PS_STEPPLAN_SAME);
    ps_plan_release (&a);
    ps_plan_release (&b);
    ps_plan_release (&c);
}

static void
test_check_variables (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    ps_model_t *model = ps_model_load ("mlp", &err);
    assert_non_null (model);
    ps_plan_t plan;
    s_plan (&plan, "mlp", 0, 0);
    assert_int_equal (ps_stepplan_check_variables (&plan, model, &err), 0);
    //  The same variables in another order: the buffers would point at
    //  the wrong offsets.
    s_swap_vars (&plan, 0, 1);
    assert_int_equal (ps_stepplan_check_variables (&plan, model, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "expected the model's order"));
    assert_non_null (strstr (err.msg, plan.vars [0].var));
    s_swap_vars (&plan, 0, 1);
    //  Another shape.
    plan.vars [0].shape.dims [0]++;
    assert_int_not_equal (ps_stepplan_check_variables (&plan, model, &err), 0);
    assert_non_null (strstr (err.msg, plan.vars [0].var));
    assert_non_null (strstr (err.msg, "mlp"));
    plan.vars [0].shape.dims [0]--;
    //  One missing.
    plan.nvars--;
    assert_int_not_equal (ps_stepplan_check_variables (&plan, model, &err), 0);
    assert_non_null (strstr (err.msg, "not those of model"));
    plan.nvars++;
    ps_plan_release (&plan);
    ps_model_destroy (&model);
}

//  On the real data: 320 training examples make 10 batches of 32.
static void
test_build (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    ps_plan_t plan;
    s_plan (&plan, "mlp", 320, 200);
    plan.steps_per_epoch = 10;
    ps_stepplan_t *worker = ps_stepplan_new (&plan, true, NULL, 0, &err);
    if (!worker)
        fail_msg ("step plan refused: %s", err.msg);
    assert_null (plan.model);       //  taken over
    assert_true (ps_stepplan_trains (worker));
    assert_int_equal (ps_dataset_count (ps_stepplan_test (worker)), 200);
    //  A batch is the seed's: the same step twice gives the same gradient.
    size_t count = ps_model_param_count (ps_stepplan_model (worker));
    float *params = calloc (count, sizeof (float));
    float *g1 = calloc (count, sizeof (float)), *g2 = calloc (count, sizeof (float));
    assert_true (params && g1 && g2);
    for (size_t i = 0; i < count; i++)
        params [i] = 0.01f * (float) (i % 7);
    assert_int_equal (ps_backend_set_params (ps_stepplan_backend (worker), params, &err), 0);
    ps_batch_stats_t stats;
    int n = ps_stepplan_batch (worker, 4, 0, 3, &err);
    assert_int_equal (n, 32);
    assert_int_equal (ps_stepplan_compute (worker, 4, n, g1, &stats, &err), 0);
    assert_int_equal (stats.count, 32);
    assert_int_equal (ps_stepplan_batch (worker, 4, 0, 3, &err), 32);
    assert_int_equal (ps_stepplan_compute (worker, 4, n, g2, &stats, &err), 0);
    assert_memory_equal (g1, g2, count * sizeof (float));
    //  Another batch gives another gradient.
    assert_int_equal (ps_stepplan_batch (worker, 5, 0, 4, &err), 32);
    assert_int_equal (ps_stepplan_compute (worker, 5, n, g2, &stats, &err), 0);
    assert_memory_not_equal (g1, g2, count * sizeof (float));
    //  A batch past the epoch's end is refused, naming the step.
    assert_true (ps_stepplan_batch (worker, 11, 0, 10, &err) < 0);
    assert_non_null (strstr (err.msg, "train step 11"));
    assert_int_equal (ps_stepplan_evaluate (worker, 0, 200, &stats, &err), 0);
    assert_int_equal (stats.count, 200);

    //  A new layout whose variables are in another order is refused, and
    //  the plan in use stays.
    ps_plan_t next;
    s_plan (&next, "mlp", 320, 200);
    next.steps_per_epoch = 10;
    s_swap_vars (&next, 0, 1);
    assert_int_equal (ps_stepplan_replace (worker, &next, &err), PS_EINVAL);
    assert_null (next.model);
    assert_string_equal (ps_stepplan_plan (worker)->vars [0].var,
                         ps_model_variable (ps_stepplan_model (worker), 0)->name);
    //  One on other servers is taken.
    s_plan (&next, "mlp", 320, 200);
    next.steps_per_epoch = 10;
    free (next.servers [0]);
    next.servers [0] = s_strdup ("tcp://127.0.0.1:7009");
    assert_int_equal (ps_stepplan_replace (worker, &next, &err), 0);
    assert_string_equal (ps_stepplan_plan (worker)->servers [0], "tcp://127.0.0.1:7009");
    free (params);
    free (g1);
    free (g2);
    ps_stepplan_destroy (&worker);
    assert_null (worker);
}

static void
test_build_refused (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    //  The coordinator counted other batches than this data makes.
    ps_plan_t plan;
    s_plan (&plan, "mlp", 320, 200);
    plan.steps_per_epoch = 11;
    assert_null (ps_stepplan_new (&plan, true, NULL, 0, &err));
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "11 steps per epoch"));
    assert_non_null (strstr (err.msg, "make 10 batches of 32"));
    assert_null (plan.model);
    //  An evaluator loads only the test split, so it cannot count batches.
    s_plan (&plan, "mlp", 320, 200);
    plan.steps_per_epoch = 11;
    ps_stepplan_t *evaluator = ps_stepplan_new (&plan, false, NULL, 0, &err);
    if (!evaluator)
        fail_msg ("evaluator's step plan refused: %s", err.msg);
    assert_false (ps_stepplan_trains (evaluator));
    ps_stepplan_destroy (&evaluator);
    //  A device the build lacks.
    s_plan (&plan, "mlp", 320, 200);
    assert_null (ps_stepplan_new (&plan, true, "tpu", 0, &err));
    assert_non_null (strstr (err.msg, "tpu"));
}

//  ---------------------------------------------------------------------
//  The mirrored mode's bookkeeping

//  The reports the mode made, caught where they would be sent.
typedef struct {
    ps_msg_t *msg;
} s_catch_t;

static int
s_catch (void *arg, ps_writer_t *writer, ps_error_t *err)
{
    s_catch_t *caught = arg;
    const void *frames [1] = { writer->sbuf.data };
    size_t sizes [1] = { writer->sbuf.size };
    assert_int_equal (ps_msg_set (caught->msg, frames, sizes, 1), 0);
    if (ps_msg_decode (caught->msg, err))
        fail_msg ("the work_request does not decode: %s", err->msg);
    return 0;
}

//  Send what is pending and return the one report it must be.
static const ps_proto_report_t *
s_one_report (ps_reports_t *reports, s_catch_t *caught)
{
    ps_error_t err = { 0 };
    assert_int_equal (ps_reports_send (reports, true, &err), 0);
    ps_reports_answered (reports);
    const ps_proto_t *msg = ps_msg_proto (caught->msg);
    assert_int_equal (msg->type, PS_PROTO_WORK_REQUEST);
    assert_int_equal (msg->work_request.reports.count, 1);
    return &msg->work_request.reports.items [0];
}

static void
s_assert_status (const ps_proto_report_t *report, const char *kind, const char *status)
{
    assert_string_equal (report->kind, kind);
    if (strcmp (report->status, status) != 0)
        fail_msg ("a %s report is not %s", kind, status);
}

//  A mirrored order of the given kind: its common fields, then the body
//  the caller fills in.
static ps_work_t
s_order_work (ps_work_kind_t kind, uint64_t step, uint64_t batch, uint64_t order,
              const ps_proto_work_t *msg)
{
    ps_work_t work = { .kind = kind, .step = step, .batch = batch, .generation = 5,
                       .order = order, .msg = msg };
    snprintf (work.name, sizeof work.name, "%s", ps_work_kind_name (kind));
    return work;
}

static bool
s_never (void *arg)
{
    (void) arg;
    return false;
}

static void
test_mirrored_mode (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    ps_plan_t plan;
    s_plan (&plan, "mlp", 320, 200);
    plan.steps_per_epoch = 10;
    plan.mirrored = true;
    ps_opt_config_default (&plan.optimizer, PS_OPT_SGD);
    ps_stepplan_t *stepplan = ps_stepplan_new (&plan, true, NULL, 0, &err);
    if (!stepplan)
        fail_msg ("step plan refused: %s", err.msg);
    const ps_wmode_ops_t *ops = ps_wmode_find (ps_stepplan_plan (stepplan));
    assert_ptr_equal (ops, &ps_wmode_mirrored);
    s_catch_t caught = { .msg = ps_msg_new () };
    ps_reports_t *reports = ps_reports_new (s_catch, &caught);
    ps_wmode_host_t host = { .poll = s_never };
    ps_wmode_env_t env = { .stepplan = stepplan, .reports = reports, .host = &host,
                           .bind = "tcp://127.0.0.1:*" };
    ps_wmode_t *mode = ops->create (&env, &err);
    if (!mode)
        fail_msg ("mirrored mode refused: %s", err.msg);

    //  Join ring 5 alone; the report carries the replica's update count.
    const char *members [] = { "tcp://127.0.0.1:1" };
    uint64_t tasks [] = { 0 };
    ps_proto_work_t msg = {
        .kind = "ring", .has_ring = true,
        .ring = { .rank = 0, .members = { 1, members }, .tasks = { 1, tasks }, .root = -1,
                  .load = "" },
    };
    ps_work_t work = s_order_work (PS_WORK_RING, 0, 0, 1, &msg);
    assert_int_equal (ops->order (mode, &work, &err), 0);
    const ps_proto_report_t *report = s_one_report (reports, &caught);
    s_assert_status (report, "ring", "done");
    assert_true (report->has_update && report->has_order);
    assert_int_equal (report->update, 0);
    assert_int_equal (report->order, 1);

    //  The step at update 1 runs; the same again is at a stale update and
    //  is declined, which the coordinator answers by forming the ring anew.
    uint64_t steps [] = { 3 };
    for (int round = 0; round < 2; round++) {
        msg = (ps_proto_work_t) {
            .kind = "train", .has_steps = true, .steps = { 1, steps }, .has_lr = true,
            .lr = 0.01, .has_examples = true, .examples = 32, .has_update = true, .update = 1,
        };
        work = s_order_work (PS_WORK_TRAIN, 3, 2, 2, &msg);
        assert_int_equal (ops->train (mode, &work, &err), 0);
        report = s_one_report (reports, &caught);
        s_assert_status (report, "train", round == 0 ? "done" : "failed");
        assert_int_equal (report->update, 1);
        assert_int_equal (report->count, round == 0 ? 32 : 0);
    }

    //  An evaluation of shard 0 of 2 carries the replica's checksum; one
    //  with no valid shard is reported failed.
    msg = (ps_proto_work_t) { .kind = "eval", .has_shard = true, .shard = 0,
                              .has_shards = true, .shards = 2 };
    work = s_order_work (PS_WORK_EVAL, 3, 0, 3, &msg);
    assert_int_equal (ops->eval (mode, &work, &err), 0);
    report = s_one_report (reports, &caught);
    s_assert_status (report, "eval", "done");
    assert_int_equal (report->count, 100);
    assert_true (report->has_checksum);
    msg = (ps_proto_work_t) { .kind = "eval" };
    assert_int_equal (ops->eval (mode, &work, &err), 0);
    s_assert_status (s_one_report (reports, &caught), "eval", "failed");

    //  A save writes the replica's files.
    char dir [64];
    harness_tmpdir (dir, sizeof dir);
    msg = (ps_proto_work_t) { .kind = "save", .has_dir = true, .dir = dir };
    work = s_order_work (PS_WORK_SAVE, 3, 0, 4, &msg);
    assert_int_equal (ops->order (mode, &work, &err), 0);
    s_assert_status (s_one_report (reports, &caught), "save", "done");
    harness_rmtree (dir);

    //  Work given back carries the replica's count; an abort outside a
    //  collective changes nothing: the next step still runs.
    ps_report_t back = { .kind = PS_WORK_TRAIN, .step = 4 };
    ops->give_back (mode, &work, &back);
    assert_true (back.has_update);
    assert_int_equal (back.update, 1);
    ops->abort (mode, 99);
    steps [0] = 4;
    msg = (ps_proto_work_t) {
        .kind = "train", .has_steps = true, .steps = { 1, steps }, .has_lr = true,
        .lr = 0.01, .has_examples = true, .examples = 32, .has_update = true, .update = 2,
    };
    work = s_order_work (PS_WORK_TRAIN, 4, 3, 5, &msg);
    assert_int_equal (ops->train (mode, &work, &err), 0);
    s_assert_status (s_one_report (reports, &caught), "train", "done");
    ops->destroy (&mode);
    assert_null (mode);

    //  An evaluator holds no replica: it reports what it is given failed.
    env.evaluator = true;
    mode = ops->create (&env, &err);
    assert_non_null (mode);
    assert_int_equal (ops->train (mode, &work, &err), 0);
    report = s_one_report (reports, &caught);
    s_assert_status (report, "train", "failed");
    assert_false (report->has_update);
    ops->destroy (&mode);
    ps_reports_destroy (&reports);
    ps_msg_destroy (&caught.msg);
    ps_stepplan_destroy (&stepplan);
}

//  ---------------------------------------------------------------------
//  Click-through-rate models (worker/ps_ctrplan.c, ps_wmode_ctr.c)

#define S_CTR_LINES  1000
#define S_CTR_BAD    500        //  the line (from 0) that is malformed

//  A Criteo file of S_CTR_LINES lines in dir: line i has I1 = i and C1 =
//  i in hex, except line S_CTR_BAD, which has too few fields.
static char *
s_criteo_file (const char *dir, const char *name)
{
    char path [512];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    for (int i = 0; i < S_CTR_LINES; i++) {
        if (i == S_CTR_BAD) {
            fprintf (file, "1\t2\t3\n");
            continue;
        }
        fprintf (file, "%d\t%d", i % 4 == 0, i);
        for (int f = 1; f < 13; f++)
            fputc ('\t', file);
        fprintf (file, "\t%08x", (unsigned) i);
        for (int f = 1; f < 26; f++)
            fputc ('\t', file);
        fputc ('\n', file);
    }
    assert_int_equal (fclose (file), 0);
    return s_strdup (path);
}

//  A plan of model lr on the Criteo file at path, batch 64 (16 blocks of
//  the file, the last of 40 lines).
static void
s_ctr_plan (ps_plan_t *plan, const char *path)
{
    s_plan (plan, "lr", 0, 0);
    plan->batch_size = 64;
    snprintf (plan->data_format, sizeof plan->data_format, "criteo");
    plan->train_data = s_strdup (path);
    plan->test_data = s_strdup (path);
}

//  Batch b of epoch e is block pi_e (b), ps_dataset_shuffle's order of
//  the blocks for the plan's seed: every line is read once an epoch, the
//  malformed one skipped, the last block short; two epochs differ.
static void
test_ctr_blocks (void **state)
{
    (void) state;
    char dir [64];
    harness_tmpdir (dir, sizeof dir);
    char *path = s_criteo_file (dir, "train.txt");
    ps_plan_t plan;
    s_ctr_plan (&plan, path);
    plan.steps_per_epoch = 16;
    ps_error_t err = { 0 };
    ps_stepplan_t *stepplan = ps_stepplan_new (&plan, true, NULL, 0, &err);
    if (!stepplan)
        fail_msg ("a CTR step plan refused: %s", err.msg);
    assert_true (ps_stepplan_trains (stepplan));
    assert_null (ps_stepplan_backend (stepplan));
    ps_ctrplan_t *ctr = ps_stepplan_ctr (stepplan);
    assert_non_null (ctr);
    assert_int_equal (ps_ctrplan_blocks (ctr, 64), 16);
    uint32_t orders [2][16];
    for (uint64_t epoch = 0; epoch < 2; epoch++) {
        uint32_t perm [16];
        ps_dataset_shuffle (7, epoch, 16, perm);
        int seen [S_CTR_LINES] = { 0 };
        for (uint64_t b = 0; b < 16; b++) {
            int n = ps_ctrplan_load_train (ctr, 7, epoch, b, 64, &err);
            if (n < 0)
                fail_msg ("epoch %llu batch %llu: %s", (unsigned long long) epoch,
                          (unsigned long long) b, err.msg);
            const ps_ctrbatch_t *batch = ps_ctrplan_batch (ctr);
            assert_int_equal (batch->first_line, (uint64_t) perm [b] * 64);
            assert_int_equal (batch->lines, perm [b] == 15 ? 40 : 64);
            assert_int_equal ((uint64_t) n, batch->lines - batch->malformed);
            for (int i = 0; i < n; i++) {
                int line = (int) lrint (expm1 (batch->dense [i * batch->ndense]));
                assert_true (line >= 0 && line < S_CTR_LINES);
                seen [line]++;
            }
            orders [epoch][b] = perm [b];
        }
        for (int line = 0; line < S_CTR_LINES; line++)
            assert_int_equal (seen [line], line == S_CTR_BAD ? 0 : 1);
    }
    assert_true (memcmp (orders [0], orders [1], sizeof orders [0]) != 0);
    assert_int_equal (ps_ctrplan_load_train (ctr, 7, 0, 16, 64, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "batch 16 of epoch 0"));
    ps_stepplan_destroy (&stepplan);
    free (path);
    harness_rmtree (dir);
}

//  The plan's steps per epoch against the file's blocks, a GPU asked for
//  by name, sync mode, and an evaluator, which opens the test file only.
static void
test_ctr_refused (void **state)
{
    (void) state;
    char dir [64];
    harness_tmpdir (dir, sizeof dir);
    char *path = s_criteo_file (dir, "data.txt");
    ps_error_t err = { 0 };
    ps_plan_t plan;
    s_ctr_plan (&plan, path);
    plan.steps_per_epoch = 17;
    assert_null (ps_stepplan_new (&plan, true, NULL, 0, &err));
    assert_non_null (strstr (err.msg, "17 steps per epoch"));
    assert_non_null (strstr (err.msg, "1000 training lines"));
    assert_non_null (strstr (err.msg, "16 batches of 64"));
    s_ctr_plan (&plan, path);
    assert_null (ps_stepplan_new (&plan, true, "gpu", 0, &err));
    assert_non_null (strstr (err.msg, "\"lr\""));
    assert_non_null (strstr (err.msg, "gpu"));
    //  A training file that is not there, named.
    s_ctr_plan (&plan, path);
    free (plan.train_data);
    plan.train_data = s_strdup ("/nonexistent/train.txt");
    assert_null (ps_stepplan_new (&plan, true, NULL, 0, &err));
    assert_non_null (strstr (err.msg, "/nonexistent/train.txt"));
    //  An evaluator does not need it.
    s_ctr_plan (&plan, path);
    free (plan.train_data);
    plan.train_data = s_strdup ("/nonexistent/train.txt");
    plan.sync = true;
    assert_true (ps_wmode_find (&plan) == &ps_wmode_ctr);
    ps_stepplan_t *evaluator = ps_stepplan_new (&plan, false, NULL, 0, &err);
    if (!evaluator)
        fail_msg ("evaluator's step plan refused: %s", err.msg);
    assert_false (ps_stepplan_trains (evaluator));
    int n = ps_ctrplan_load_test (ps_stepplan_ctr (evaluator), 0, 100, &err);
    assert_int_equal (n, 100);
    //  Sync mode does not train a CTR model: refused naming both.
    ps_wmode_env_t env = { .stepplan = evaluator, .evaluator = true };
    assert_null (ps_wmode_ctr.create (&env, &err));
    assert_non_null (strstr (err.msg, "sync mode"));
    assert_non_null (strstr (err.msg, "\"lr\""));
    ps_stepplan_destroy (&evaluator);
    free (path);
    harness_rmtree (dir);
}

int
main (int argc, char **argv)
{
    if (harness_group (argc, argv, "real")) {
        harness_need_data ();
        const struct CMUnitTest real [] = {
            cmocka_unit_test (test_build),
            cmocka_unit_test (test_build_refused),
            cmocka_unit_test (test_mirrored_mode),
        };
        return cmocka_run_group_tests_name ("real data", real, NULL, NULL);
    }
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_compare),
        cmocka_unit_test (test_check_variables),
        cmocka_unit_test (test_ctr_blocks),
        cmocka_unit_test (test_ctr_refused),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
