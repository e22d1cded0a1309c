//  Cluster training; see ps_trainer.h.
//
//  The trainer is one thread. It keeps at most one work_request
//  outstanding and matches the coordinator's replies to it by id. Every
//  message from the link goes through s_receive, which sorts it into one
//  of a few events: the reply awaited, a new registration (its plan is
//  applied there), the loss of the coordinator, or nothing. Work comes in
//  replies only, so whatever else arrives (a reply to a request given up
//  on) is noted and dropped.
//
//  A report is "pending" until a request carries it and "sent" until that
//  request is answered; a request that is never answered (the link lost
//  the coordinator, or registered again, in which case the link may have
//  swallowed the answer) puts its reports back in front of the pending
//  ones, so no report is lost to a failure of the coordinator. Reports
//  are thus delivered at least once, and the coordinator must take a
//  report it has seen before as a repeat (its schedule does:
//  ps_schedule_complete answers PS_DUPLICATE).

#include "ps_trainer.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_client.h"
#include "ps_clock.h"
#include "ps_dataset.h"
#include "ps_floats.h"
#include "ps_link.h"
#include "ps_log.h"
#include "ps_mirror.h"
#include "ps_model.h"
#include "ps_msg.h"
#include "ps_plan.h"
#include "ps_schema.h"
#include "ps_standalone.h"

//  Reports carried by one request, and held at most while the coordinator
//  is away (each step adds one, and no step runs without a coordinator, so
//  the bound is never reached in practice).
#define S_MAX_REPORTS       64
#define S_MAX_PENDING       1024

//  The slice of every wait: how soon a stop signal is noticed while the
//  trainer waits for the coordinator.
#define S_SLICE_MS          100
//  How long an unanswered work request is waited for before it is sent again.
#define S_REPLY_MS          10000

//  After a registration, how long the trainer listens for more before it
//  asks for work: a coordinator that was stalled answers every register
//  the link sent meanwhile, all at once, and a request sent between two of
//  those register_oks would be given up at the second.
#define S_SETTLE_MS         20

//  The pause before asking again after the coordinator refused a request.
#define S_RETRY_MS          500

//  How long the trainer waits, when stopping, for the answer to a request
//  still in flight and for the answer to its last reports. The link sends
//  nothing once it is destroyed, so waiting for the answer is how the
//  trainer knows its last reports left the process.
#define S_FINAL_WAIT_MS     2000

//  Milliseconds between progress lines in the log, and between reminders
//  that the coordinator has not answered the registration yet.
#define S_PROGRESS_MS       10000
#define S_REGISTER_LOG_MS   30000

//  The trainer's own request ids start high, so that they never meet the
//  ids of the link's messages (register, heartbeat), counted from 1: an
//  error reply then says by its id alone whether it answers the
//  registration or one of the trainer's requests.
#define S_FIRST_ID          (UINT64_C (1) << 40)

//  The kinds of work, as the protocol names them; ring and save come only
//  in mirrored mode.
typedef enum { S_TRAIN, S_EVAL, S_RING, S_SAVE, S_KINDS } s_kind_t;

static const char *s_kind_names [S_KINDS] = { "train", "eval", "ring", "save" };

typedef struct {
    s_kind_t kind;
    bool done;                  //  status done, else failed
    uint64_t step, generation;
    double loss;                //  summed over the examples
    uint64_t correct, count;
    uint64_t applied, duplicates;
    double compute_ms, comm_ms;
    bool mirrored;              //  carries the replica's update count
    uint64_t update;
    bool has_checksum;          //  a mirrored evaluation's replica checksum
    uint64_t checksum;
    uint64_t order;             //  the mirrored order's number, echoed
    char error [400];           //  why a failed step failed, when it matters to the
                                //  coordinator ("nonfinite: ..."); "" otherwise
} s_report_t;

//  A "work" message.
typedef struct {
    char kind [8];
    uint64_t step, epoch, batch, generation, wait_ms;
    uint64_t order;             //  mirrored mode: the order's number (0: none)
} s_work_t;

//  The most batches one mirrored global step may name: one per member.
#define S_MAX_RING          4096

//  What s_receive saw.
typedef enum {
    S_EV_NONE,                  //  nothing within the time, or nothing that matters
    S_EV_STOP,                  //  stop_fd is readable
    S_EV_REPLY,                 //  the answer to the outstanding request is in msg
    S_EV_LOST,                  //  the link lost the coordinator
    S_EV_REGISTERED,            //  a register_ok came and its plan is in use
    S_EV_DONE,                  //  the run is over, though no answer said "stop"
} s_event_t;

typedef struct {
    const ps_trainer_config_t *config;
    bool evaluator;
    ps_link_t *link;
    ps_msg_t *msg;
    ps_writer_t writer;

    //  The plan in use and what was built from it.
    ps_plan_t plan;
    bool have_plan;
    ps_model_t *model;
    ps_dataset_t *train;        //  NULL for an evaluator
    ps_dataset_t *test;
    ps_backend_t *backend;
    ps_client_t *client;
    //  Two parameter and two gradient vectors: while the backend computes
    //  step k from params [cur] into grads [g], the pusher thread pushes
    //  step k - 1's gradient from grads [1 - g] and receives the values
    //  after it into params [1 - cur].
    float *params [2], *grads [2], *x;
    uint8_t *labels;
    float **values [2];         //  per variable, into params [i]
    const float **grad_parts [2];   //  per variable, into grads [i]
    int cur, g;

    //  The pusher: one push-pull in flight at a time, on its own thread,
    //  which uses the client only while a push is posted; the trainer
    //  touches the client only after s_pusher_collect.
    pthread_t pusher;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool posted, finished, quit;    //  under lock
    bool pushing;               //  a push was posted and not collected yet
    int push_g, push_p;         //  its gradient and value buffers
    double push_ms;
    s_report_t push_report;     //  the step being pushed (completed when it ends)
    int push_rc;
    ps_push_info_t push_info;
    ps_error_t push_err;

    //  Whether params hold the servers' values of generation `generation`.
    bool fresh;
    uint64_t generation;

    //  Mirrored mode: the member (replica and ring) instead of the client;
    //  while a collective runs, a plan that comes in waits here, and an
    //  abort for the ring in use is noted.
    ps_mirror_t *mirror;
    uint64_t ring_id;
    bool in_collective, aborted;
    ps_plan_t deferred;
    bool have_deferred;
    int watch_rc;
    ps_error_t watch_err;
    uint64_t *steps;            //  the batches of a mirrored global step

    bool registered;
    bool settling;              //  a register_ok came within S_SETTLE_MS
    bool over;                  //  S_EV_DONE was seen: the trainer stops
    uint64_t coordinator;       //  the coordinator's incarnation
    uint64_t last_id;           //  of the last request sent
    uint64_t outstanding;       //  id of the request awaiting its answer, or 0

    s_report_t pending [S_MAX_PENDING];
    size_t npending;
    s_report_t sent [S_MAX_REPORTS];
    size_t nsent;

    //  Counters for the progress lines and the last line.
    uint64_t steps_done, steps_failed, evals_done;
    double window_start, window_loss, window_compute_ms, window_comm_ms;
    uint64_t window_steps, window_samples;
} s_trainer_t;


//  ---------------------------------------------------------------------
//  Reports

//  Queue a report for the next request. When the queue is full (the
//  coordinator has been away for a thousand steps, which cannot happen as
//  no step runs without one) the oldest report makes room.
static void
s_add_report (s_trainer_t *self, const s_report_t *report)
{
    if (self->npending == S_MAX_PENDING) {
        ps_warn ("%zu reports held for the coordinator; dropping the oldest (%s step %" PRIu64
                 ")", self->npending, s_kind_names [self->pending [0].kind],
                 self->pending [0].step);
        memmove (self->pending, self->pending + 1, (S_MAX_PENDING - 1) * sizeof (s_report_t));
        self->npending--;
    }
    self->pending [self->npending++] = *report;
}

//  Give back a piece of work that will not be done (handed out in answer
//  to a request that was given up on, or when stopping): a failed report
//  lets the coordinator hand it to another worker at once.
static void
s_give_back (s_trainer_t *self, const s_work_t *work)
{
    s_kind_t kind = S_KINDS;
    for (int k = 0; k < S_KINDS; k++)
        if (strcmp (work->kind, s_kind_names [k]) == 0)
            kind = (s_kind_t) k;
    if (kind == S_KINDS)
        return;
    ps_info ("giving back %s step %" PRIu64 " (generation %" PRIu64 ") undone", work->kind,
             work->step, work->generation);
    s_report_t report = { .kind = kind, .step = work->step, .generation = work->generation };
    if (self->mirror) {
        report.mirrored = true;
        report.update = ps_replica_updates (ps_mirror_replica (self->mirror));
        report.order = work->order;
    }
    s_add_report (self, &report);
}

//  The request in flight will not be answered: its reports go back in
//  front of the pending ones, to be carried by the next request.
static void
s_forget_request (s_trainer_t *self)
{
    if (self->nsent) {
        size_t room = S_MAX_PENDING - self->nsent;
        if (self->npending > room) {
            ps_warn ("%zu reports held for the coordinator; dropping the %zu newest",
                     self->npending + self->nsent, self->npending - room);
            self->npending = room;
        }
        memmove (self->pending + self->nsent, self->pending,
                 self->npending * sizeof (s_report_t));
        memcpy (self->pending, self->sent, self->nsent * sizeof (s_report_t));
        self->npending += self->nsent;
        self->nsent = 0;
    }
    self->outstanding = 0;
}

static void
s_pack_report (msgpack_packer *pk, const s_report_t *report)
{
    msgpack_pack_map (pk, 11 + (report->mirrored ? 2 : 0) + (report->has_checksum ? 1 : 0)
                          + (*report->error ? 1 : 0));
    ps_pack_key (pk, "kind");
    ps_pack_str (pk, s_kind_names [report->kind]);
    ps_pack_key (pk, "status");
    ps_pack_str (pk, report->done ? "done" : "failed");
    ps_pack_uint (pk, "step", report->step);
    ps_pack_uint (pk, "generation", report->generation);
    ps_pack_double (pk, "loss", report->loss);
    ps_pack_uint (pk, "correct", report->correct);
    ps_pack_uint (pk, "count", report->count);
    ps_pack_uint (pk, "applied", report->applied);
    ps_pack_uint (pk, "duplicates", report->duplicates);
    ps_pack_double (pk, "compute_ms", report->compute_ms);
    ps_pack_double (pk, "comm_ms", report->comm_ms);
    if (report->mirrored) {
        ps_pack_uint (pk, "update", report->update);
        ps_pack_uint (pk, "order", report->order);
    }
    if (report->has_checksum)
        ps_pack_uint (pk, "checksum", report->checksum);
    if (*report->error) {
        ps_pack_key (pk, "error");
        ps_pack_str (pk, report->error);
    }
}

//  Send a work_request carrying up to S_MAX_REPORTS pending reports, which
//  become the sent ones, and make it the outstanding request. Only one is
//  ever outstanding. Returns 0 or PS_EIO (the link has failed).
static int
s_send_request (s_trainer_t *self, bool want, ps_error_t *err)
{
    size_t n = self->npending < S_MAX_REPORTS ? self->npending : S_MAX_REPORTS;
    uint64_t id = ++self->last_id;
    ps_writer_reset (&self->writer, "work_request", id, 2);
    msgpack_packer *pk = &self->writer.pk;
    ps_pack_key (pk, "reports");
    msgpack_pack_array (pk, n);
    for (size_t i = 0; i < n; i++)
        s_pack_report (pk, &self->pending [i]);
    ps_pack_uint (pk, "want", want ? 1 : 0);
    int rc = ps_link_send (self->link, &self->writer, err);
    if (rc)
        return rc;
    memcpy (self->sent, self->pending, n * sizeof (s_report_t));
    self->nsent = n;
    memmove (self->pending, self->pending + n, (self->npending - n) * sizeof (s_report_t));
    self->npending -= n;
    self->outstanding = id;
    return 0;
}


static int s_pusher_collect (s_trainer_t *self, ps_error_t *err);

//  ---------------------------------------------------------------------
//  The plan and what is built from it

//  Release the client and its per-variable views of the buffers.
static void
s_teardown_client (s_trainer_t *self)
{
    ps_client_destroy (&self->client);
    ps_mirror_destroy (&self->mirror);
    for (int i = 0; i < 2; i++) {
        free (self->values [i]);
        free (self->grad_parts [i]);
        self->values [i] = NULL;
        self->grad_parts [i] = NULL;
    }
    self->fresh = false;
}

//  Release what the plan built (the plan itself stays).
static void
s_teardown (s_trainer_t *self)
{
    s_teardown_client (self);
    ps_backend_destroy (&self->backend);
    ps_dataset_destroy (&self->train);
    ps_dataset_destroy (&self->test);
    ps_model_destroy (&self->model);
    for (int i = 0; i < 2; i++) {
        free (self->params [i]);
        free (self->grads [i]);
        self->params [i] = self->grads [i] = NULL;
    }
    free (self->x);
    free (self->labels);
    self->x = NULL;
    self->labels = NULL;
    self->fresh = false;
}

static bool
s_str_eq (const char *a, const char *b)
{
    return strcmp (a, b) == 0;
}

//  Whether two plans ask for the same model, data and backend.
static bool
s_same_compute (const ps_plan_t *a, const ps_plan_t *b)
{
    return s_str_eq (a->model, b->model) && s_str_eq (a->data_dir, b->data_dir)
        && a->batch_size == b->batch_size && a->eval_batch == b->eval_batch
        && a->train_limit == b->train_limit && a->test_limit == b->test_limit
        && a->threads == b->threads && s_str_eq (a->device, b->device);
}

//  Whether two plans place the same variables on the same servers.
static bool
s_same_layout (const ps_plan_t *a, const ps_plan_t *b)
{
    if (a->nservers != b->nservers || a->nvars != b->nvars
    ||  a->client_timeout_ms != b->client_timeout_ms || a->mirrored != b->mirrored
    ||  (a->mirrored && (a->seed != b->seed || a->optimizer.kind != b->optimizer.kind)))
        return false;
    for (int s = 0; s < a->nservers; s++)
        if (!s_str_eq (a->servers [s], b->servers [s]))
            return false;
    for (int v = 0; v < a->nvars; v++) {
        const ps_plan_var_t *x = &a->vars [v], *y = &b->vars [v];
        if (!s_str_eq (x->var, y->var) || !ps_shape_equal (&x->shape, &y->shape)
        ||  x->nparts != y->nparts
        ||  memcmp (x->splits, y->splits, (x->nparts + 1) * sizeof (int64_t)) != 0
        ||  memcmp (x->servers, y->servers, x->nparts * sizeof (int)) != 0)
            return false;
    }
    return true;
}

//  Build the model, load the data and make the backend and buffers.
static int
s_build_compute (s_trainer_t *self, const ps_plan_t *plan, ps_error_t *err)
{
    const ps_trainer_config_t *config = self->config;
    if (!(self->model = ps_model_parse (plan->model, "the plan's model", err)))
        return err->code;
    //  An evaluator only evaluates, so it loads only the test split.
    if (!self->evaluator
    &&  !(self->train = ps_dataset_load (plan->data_dir, PS_SPLIT_TRAIN,
                                         (size_t) plan->train_limit, err)))
        return err->code;
    if (!(self->test = ps_dataset_load (plan->data_dir, PS_SPLIT_TEST,
                                        (size_t) plan->test_limit, err)))
        return err->code;
    int rc = ps_model_check_input (self->model, ps_dataset_rows (self->test),
                                   ps_dataset_cols (self->test), ps_dataset_classes (self->test),
                                   err);
    if (rc)
        return rc;
    const char *device_name = config->device ? config->device : plan->device;
    ps_device_t device;
    if ((rc = ps_device_parse (device_name, &device, err)))
        return rc;
    int threads = config->threads > 0 ? config->threads : plan->threads;
    int max_batch = plan->batch_size > plan->eval_batch ? plan->batch_size : plan->eval_batch;
    if (!(self->backend = ps_backend_new (self->model, device, max_batch, threads, err)))
        return err->code;
    size_t param_count = ps_model_param_count (self->model);
    for (int i = 0; i < 2; i++) {
        self->params [i] = ps_floats_alloc (param_count);
        self->grads [i] = ps_floats_alloc (param_count);
    }
    self->cur = self->g = 0;
    self->x = ps_floats_alloc ((size_t) max_batch * ps_model_input_size (self->model));
    self->labels = malloc ((size_t) max_batch);
    if (!self->params [0] || !self->params [1] || !self->grads [0] || !self->grads [1]
    ||  !self->x || !self->labels)
        return ps_error_set (err, PS_ETOOBIG, "out of memory for the parameters and a batch "
                             "of %d examples of model \"%s\"", max_batch,
                             ps_model_name (self->model));
    ps_info ("model %s (%zu parameters) on %s; %zu training and %zu test examples from %s",
             ps_model_name (self->model), param_count, ps_backend_describe (self->backend),
             self->train ? ps_dataset_count (self->train) : 0, ps_dataset_count (self->test),
             plan->data_dir);
    return 0;
}

static bool s_watch (void *arg);

//  Mirrored mode: a replica and this worker's place in the ring, bound on
//  its own address from the cluster spec. An evaluator has no part in a
//  ring (the coordinator tells it to stop).
static int
s_build_mirror (s_trainer_t *self, const ps_plan_t *plan, ps_error_t *err)
{
    if (self->evaluator)
        return 0;
    if (!self->config->ring_bind)
        return ps_error_set (err, PS_EINVAL, "the job runs in mirrored mode, which needs this "
                             "worker's own address from the cluster spec to bind its ring "
                             "endpoint");
    //  A member that hears nothing from its ring for this long gives up on
    //  the collective; the coordinator normally aborts it first, after its
    //  heartbeat timeout.
    int timeout_ms = 2 * plan->client_timeout_ms + 1000;
    if (!(self->mirror = ps_mirror_new (self->model, plan->seed, &plan->optimizer,
                                        self->config->ring_bind, timeout_ms,
                                        self->config->curve, err)))
        return ps_error_prefix (err, err->code, "mirrored mode");
    if (!self->steps && !(self->steps = calloc (S_MAX_RING, sizeof (uint64_t))))
        abort ();
    ps_ring_set_watch (ps_mirror_ring (self->mirror), ps_link_pollable (self->link), -1,
                       s_watch, self);
    ps_info ("mirrored mode: ring endpoint %s", ps_ring_endpoint (ps_mirror_ring (self->mirror)));
    return 0;
}

//  Check that the plan's variables are the model's, in the model's order,
//  and make the client of the plan's servers, its buffers pointing into
//  the flat parameter and gradient vectors.
static int
s_build_client (s_trainer_t *self, const ps_plan_t *plan, ps_error_t *err)
{
    int nvars = plan->nvars;
    const char **names = calloc ((size_t) nvars, sizeof *names);
    ps_shape_t *shapes = calloc ((size_t) nvars, sizeof *shapes);
    if (!names || !shapes)
        abort ();
    for (int v = 0; v < nvars; v++) {
        names [v] = plan->vars [v].var;
        shapes [v] = plan->vars [v].shape;
    }
    int rc = ps_model_check_variables (self->model, names, shapes, nvars, err);
    free (names);
    free (shapes);
    if (rc)
        return ps_error_prefix (err, rc, "the plan's variables are not those of model \"%s\"",
                                ps_model_name (self->model));
    //  The client takes one buffer per variable, in the plan's order; they
    //  point into the flat vector at the model's offsets, so the order must
    //  agree too.
    for (int v = 0; v < nvars; v++) {
        const ps_variable_t *var = ps_model_variable (self->model, v);
        if (!s_str_eq (plan->vars [v].var, var->name))
            return ps_error_set (err, PS_EINVAL, "the plan lists variable %d as %s, but model "
                                 "\"%s\" has %s there (expected the model's order)", v,
                                 plan->vars [v].var, ps_model_name (self->model), var->name);
    }
    if (plan->mirrored)
        return s_build_mirror (self, plan, err);
    if (!(self->client = ps_plan_client (plan, NULL, self->config->curve, err)))
        return ps_error_prefix (err, err->code, "the plan's servers");
    for (int i = 0; i < 2; i++) {
        self->values [i] = calloc ((size_t) nvars, sizeof *self->values [i]);
        self->grad_parts [i] = calloc ((size_t) nvars, sizeof *self->grad_parts [i]);
        if (!self->values [i] || !self->grad_parts [i])
            abort ();
        for (int v = 0; v < nvars; v++) {
            size_t offset = ps_model_variable (self->model, v)->offset;
            self->values [i][v] = self->params [i] + offset;
            self->grad_parts [i][v] = self->grads [i] + offset;
        }
    }
    self->fresh = false;
    return 0;
}

//  Use plan (taking it over, whatever the result): build what differs from
//  the plan in use. Returns 0, or a code with err set when the plan cannot
//  be used; the trainer cannot go on then.
static int
s_apply_plan (s_trainer_t *self, ps_plan_t *plan, ps_error_t *err)
{
    //  A plan that arrives while a collective runs (read by the ring's
    //  watch) would rebuild the ring under it: it waits until the
    //  collective has returned, aborted.
    if (self->in_collective) {
        if (self->have_deferred)
            ps_plan_release (&self->deferred);
        self->deferred = *plan;
        self->have_deferred = true;
        self->aborted = true;
        memset (plan, 0, sizeof *plan);
        return 0;
    }
    //  A push in flight uses the client and buffers about to be rebuilt.
    int rc = s_pusher_collect (self, err);
    if (rc) {
        ps_plan_release (plan);
        return rc;
    }
    if (!self->have_plan || !s_same_compute (&self->plan, plan)) {
        if (self->have_plan)
            ps_info ("the plan's model, data or compute settings changed; rebuilding");
        s_teardown (self);
        if ((rc = s_build_compute (self, plan, err)) || (rc = s_build_client (self, plan, err)))
            goto done;
    }
    else
    if (!s_same_layout (&self->plan, plan)) {
        ps_info ("the plan's servers or placement changed; reconnecting");
        s_teardown_client (self);
        if ((rc = s_build_client (self, plan, err)))
            goto done;
    }
    //  The coordinator numbers steps from its own count of batches; data
    //  that gives another count (other files, another limit) would train
    //  the wrong batches or none.
    if (self->train && plan->steps_per_epoch
    &&  plan->steps_per_epoch != ps_dataset_batches (self->train, plan->batch_size)) {
        rc = ps_error_set (err, PS_EINVAL, "the plan has %" PRIu64 " steps per epoch, but the "
                           "%zu training examples in %s make %zu batches of %d",
                           plan->steps_per_epoch, ps_dataset_count (self->train),
                           plan->data_dir, ps_dataset_batches (self->train, plan->batch_size),
                           plan->batch_size);
        goto done;
    }
done:
    if (rc) {
        ps_plan_release (plan);
        return rc;
    }
    if (self->have_plan)
        ps_plan_release (&self->plan);
    self->plan = *plan;
    self->have_plan = true;
    memset (plan, 0, sizeof *plan);
    return 0;
}


//  ---------------------------------------------------------------------
//  Messages

static bool
s_stop_requested (s_trainer_t *self)
{
    if (self->config->stop_fd < 0)
        return false;
    struct pollfd item = { .fd = self->config->stop_fd, .events = POLLIN };
    int ready;
    do
        ready = poll (&item, 1, 0);
    while (ready < 0 && errno == EINTR);
    if (ready < 0) {
        //  A stop signal that cannot be read is no reason to stop training.
        ps_warn ("poll on the stop signal: %s", strerror (errno));
        return false;
    }
    return ready > 0;
}

static void
s_read_work (const msgpack_object *header, s_work_t *work)
{
    if (ps_obj_str (ps_obj_get (header, "kind"), work->kind, sizeof work->kind))
        snprintf (work->kind, sizeof work->kind, "?");
    work->step = ps_obj_get (header, "step")->via.u64;
    work->epoch = ps_obj_get (header, "epoch")->via.u64;
    work->batch = ps_obj_get (header, "batch")->via.u64;
    work->generation = ps_obj_get (header, "generation")->via.u64;
    work->wait_ms = ps_obj_get (header, "wait_ms")->via.u64;
    const msgpack_object *order = ps_obj_get (header, "order");
    work->order = order ? order->via.u64 : 0;
}

//  A register_ok: use its plan. Whatever request was outstanding is given
//  up, since the link may have swallowed its answer (a not_found error)
//  while it registered again.
static int
s_on_register_ok (s_trainer_t *self, ps_error_t *err)
{
    const msgpack_object *header = ps_msg_header (self->msg);
    const msgpack_object *plan_obj = ps_obj_get (header, "plan");
    if (!plan_obj)
        return ps_error_set (err, PS_EPROTO, "the coordinator at %s accepted the registration "
                             "but sent no plan", self->config->coordinator);
    ps_plan_t plan;
    int rc = ps_plan_unpack (&plan, plan_obj, err);
    if (rc)
        return ps_error_prefix (err, rc, "the coordinator at %s", self->config->coordinator);
    //  A coordinator that was stalled answers every register the link sent
    //  meanwhile; the repeats need no line of their own.
    uint64_t coordinator = ps_obj_get (header, "coordinator")->via.u64;
    bool repeat = self->registered && coordinator == self->coordinator
               && s_same_compute (&self->plan, &plan) && s_same_layout (&self->plan, &plan);
    if ((rc = s_apply_plan (self, &plan, err)))
        return rc;
    s_forget_request (self);
    self->registered = true;
    self->settling = true;
    self->coordinator = coordinator;
    //  A coordinator that comes back may have restored the servers from a
    //  checkpoint; the next step pulls.
    self->fresh = false;
    ps_log (repeat ? PS_LOG_DEBUG : PS_LOG_INFO, "registered with the coordinator at %s as %s "
            "%d (coordinator incarnation %" PRIx64 "): model %s, batch %d, %d servers, %" PRIu64
            " steps", self->config->coordinator, self->config->role, self->config->index,
            self->coordinator, ps_model_name (self->model), self->plan.batch_size,
            self->plan.nservers, self->plan.total_steps);
    return 0;
}

//  The code and message of an "error" header, with stand-ins for values
//  that do not fit.
static void
s_error_fields (const msgpack_object *header, char *code, size_t code_len, char *message,
                size_t message_len)
{
    if (ps_obj_str (ps_obj_get (header, "code"), code, code_len))
        snprintf (code, code_len, "?");
    if (ps_obj_str (ps_obj_get (header, "message"), message, message_len))
        snprintf (message, message_len, "(message too long)");
}

//  Wait up to timeout_ms for a message from the coordinator and sort it
//  into *event. With check_stop, a readable stop_fd comes first (S_EV_STOP).
//  Returns 0, or a code with err set when the trainer cannot go on: the
//  link failed, the coordinator refused the registration, or its plan
//  cannot be used.
static int
s_receive (s_trainer_t *self, int timeout_ms, bool check_stop, s_event_t *event,
           ps_error_t *err)
{
    *event = S_EV_NONE;
    if (check_stop && s_stop_requested (self)) {
        *event = S_EV_STOP;
        return 0;
    }
    ps_error_t local;
    int rc = ps_link_recv (self->link, self->msg, timeout_ms, &local);
    if (rc == PS_ETIMEDOUT)
        return 0;
    if (rc == PS_EIO) {
        *err = local;
        return rc;
    }
    if (rc) {
        //  A message that does not decode is the coordinator's mistake; the
        //  request it may have answered is answered again after the
        //  coordinator is lost, so it is dropped here.
        ps_warn ("%s", local.msg);
        return 0;
    }
    const char *type = ps_msg_type (self->msg);
    const msgpack_object *header = ps_msg_header (self->msg);
    uint64_t id = ps_msg_id (self->msg);
    bool ours = id >= S_FIRST_ID && id <= self->last_id;
    if (s_str_eq (type, "register_ok")) {
        if ((rc = s_on_register_ok (self, err)))
            return rc;
        *event = S_EV_REGISTERED;
    }
    else
    if (s_str_eq (type, "error")) {
        char code [32], message [PS_ERROR_MSG_MAX];
        s_error_fields (header, code, sizeof code, message, sizeof message);
        if (ps_error_from_name (code) == PS_ETIMEDOUT) {
            //  The link's own word that the coordinator fell silent. Before
            //  the first registration there is nothing to lose.
            if (self->registered) {
                self->registered = false;
                s_forget_request (self);
                self->fresh = false;
                //  A coordinator that had said the run is over exited; one
                //  that had not may be restarted and resume the run.
                if (ps_link_finished (self->link)) {
                    ps_info ("the coordinator finished the run and has gone (%s); stopping",
                             message);
                    self->over = true;
                    *event = S_EV_DONE;
                }
                else {
                    ps_warn ("lost the coordinator (%s); waiting for it to come back", message);
                    *event = S_EV_LOST;
                }
            }
        }
        else
        if (self->outstanding && id == self->outstanding)
            *event = S_EV_REPLY;
        else
        if (ours)
            ps_debug ("the coordinator refused an earlier request: %s: %s", code, message);
        else
            //  An answer to the link's register (the link handles not_found
            //  itself): the coordinator will not have this task.
            return ps_error_set (err, PS_EINVAL, "the coordinator at %s refused to register %s "
                                 "%d: %s", self->config->coordinator, self->config->role,
                                 self->config->index, message);
    }
    else
    if (s_str_eq (type, "work")) {
        if (self->outstanding && id == self->outstanding)
            *event = S_EV_REPLY;
        else {
            //  The answer to a request given up on: the work it hands out
            //  was never started here. A "stop" holds whichever request it
            //  answers: the coordinator may not answer another.
            s_work_t work;
            s_read_work (header, &work);
            if (s_str_eq (work.kind, "stop")) {
                ps_info ("the coordinator says training is over (answering an earlier request)");
                self->over = true;
                *event = S_EV_DONE;
            }
            else
                s_give_back (self, &work);
        }
    }
    else
    if (s_str_eq (type, "abort")) {
        //  Rings are numbered upwards, so an abort of this ring or a later
        //  one (this worker was left out of it, having been stopped) ends
        //  the collective in progress; one that comes after it is stale.
        if (self->in_collective && ps_obj_get (header, "generation")->via.u64 >= self->ring_id)
            self->aborted = true;
    }
    else
        ps_debug ("ignoring a %s message from the coordinator", type);
    return 0;
}

//  Wait for the answer to the outstanding request, for a new registration
//  or for the loss of the coordinator, noticing a stop signal within
//  S_SLICE_MS.
static int
s_wait_event (s_trainer_t *self, s_event_t *event, ps_error_t *err)
{
    double deadline = ps_clock_ms () + S_REPLY_MS;
    while (true) {
        int rc = s_receive (self, S_SLICE_MS, true, event, err);
        if (rc || *event != S_EV_NONE)
            return rc;
        //  A request or its answer can be lost on a connection that drops
        //  and comes back within the heartbeat timeout, which nobody else
        //  notices: ask again rather than wait for ever. A late answer is
        //  given back like any answer to a request given up on.
        if (self->outstanding && ps_clock_ms () > deadline) {
            ps_warn ("no answer from the coordinator to a work request in %d ms; asking again",
                     S_REPLY_MS);
            s_forget_request (self);
            *event = S_EV_LOST;
            return 0;
        }
    }
}

//  Sleep for ms, cut short by an event (the stop signal, a registration,
//  the loss of the coordinator), which is left in *event.
static int
s_sleep (s_trainer_t *self, uint64_t ms, s_event_t *event, ps_error_t *err)
{
    double deadline = ps_clock_ms () + (double) ms;
    *event = S_EV_NONE;
    while (true) {
        double left = deadline - ps_clock_ms ();
        if (left <= 0)
            return 0;
        int slice = left < S_SLICE_MS ? (int) left + 1 : S_SLICE_MS;
        int rc = s_receive (self, slice, true, event, err);
        if (rc || *event != S_EV_NONE)
            return rc;
    }
}


//  ---------------------------------------------------------------------
//  Work

//  A failed pull or push: the parameters may be half overwritten, so the
//  next step pulls them afresh.
static void
s_comm_failed (s_trainer_t *self, const char *what, const s_work_t *work, ps_error_t *local)
{
    ps_warn ("%s step %" PRIu64 ": %s failed: %s", work->kind, work->step, what, local->msg);
    self->fresh = false;
}

//  Pull the parameters of the work's generation and load them into the
//  backend. Returns 0, 1 when the pull failed (reported, not fatal), or a
//  backend error.
static int
s_pull (s_trainer_t *self, const s_work_t *work, ps_error_t *err)
{
    ps_error_t local;
    if (ps_client_pull (self->client, self->values [self->cur], &local)) {
        s_comm_failed (self, "pulling the parameters", work, &local);
        return 1;
    }
    int rc = ps_backend_set_params (self->backend, self->params [self->cur], err);
    if (rc)
        return rc;
    self->fresh = true;
    self->generation = work->generation;
    return 0;
}

static void
s_progress (s_trainer_t *self, bool force)
{
    double now = ps_clock_ms ();
    if (!force && now - self->window_start < S_PROGRESS_MS)
        return;
    if (self->window_steps) {
        double busy = self->window_compute_ms + self->window_comm_ms;
        ps_info ("%" PRIu64 " steps done (%" PRIu64 " failed): last %" PRIu64 " steps, loss "
                 "%.4f, %.0f samples/s, %.0f%% of the time computing",
                 self->steps_done, self->steps_failed, self->window_steps,
                 self->window_loss / (double) self->window_samples,
                 self->window_samples / ((now - self->window_start) / 1e3),
                 busy > 0 ? 100 * self->window_compute_ms / busy : 0);
    }
    self->window_start = now;
    self->window_loss = self->window_compute_ms = self->window_comm_ms = 0;
    self->window_steps = self->window_samples = 0;
}

//  ---------------------------------------------------------------------
//  The pusher thread

static void *
s_pusher_run (void *arg)
{
    s_trainer_t *self = arg;
    pthread_mutex_lock (&self->lock);
    while (true) {
        while (!self->posted && !self->quit)
            pthread_cond_wait (&self->cond, &self->lock);
        if (self->quit)
            break;
        self->posted = false;
        uint64_t step = self->push_report.step;
        int g = self->push_g, p = self->push_p;
        pthread_mutex_unlock (&self->lock);
        ps_push_info_t info = { 0 };
        ps_error_t err;
        double t0 = ps_clock_ms ();
        int rc = ps_client_push_pull (self->client, step, (uint32_t) self->config->index,
                                      self->grad_parts [g], self->values [p], &info, &err);
        double ms = ps_clock_ms () - t0;
        pthread_mutex_lock (&self->lock);
        self->push_rc = rc;
        self->push_info = info;
        self->push_err = err;
        self->push_ms = ms;
        self->finished = true;
        pthread_cond_broadcast (&self->cond);
    }
    pthread_mutex_unlock (&self->lock);
    return NULL;
}

//  Hand the push of the step just computed (grads [g], its report in
//  *report) to the pusher, the values to come into params [1 - cur].
static void
s_pusher_post (s_trainer_t *self, const s_report_t *report)
{
    //  The servers refuse the push if they were restored since this
    //  generation's parameters (a fence).
    ps_client_set_generation (self->client, report->generation);
    pthread_mutex_lock (&self->lock);
    self->push_report = *report;
    self->push_g = self->g;
    self->push_p = 1 - self->cur;
    self->posted = true;
    pthread_cond_broadcast (&self->cond);
    pthread_mutex_unlock (&self->lock);
    self->pushing = true;
    self->g = 1 - self->g;
}

//  Wait for the push in flight, if any, and account for it: on success
//  the values it brought back become the parameters and its step is
//  reported done; on failure the step is reported failed and the next
//  step pulls afresh. Returns 0, or a backend error.
static int
s_pusher_collect (s_trainer_t *self, ps_error_t *err)
{
    if (!self->pushing)
        return 0;
    pthread_mutex_lock (&self->lock);
    while (!self->finished)
        pthread_cond_wait (&self->cond, &self->lock);
    self->finished = false;
    pthread_mutex_unlock (&self->lock);
    self->pushing = false;
    s_report_t report = self->push_report;
    report.comm_ms += self->push_ms;
    if (self->push_rc) {
        ps_warn ("train step %" PRIu64 ": pushing the gradient failed: %s", report.step,
                 self->push_err.msg);
        self->fresh = false;
        self->steps_failed++;
        report.done = false;
        //  The servers refused the gradient itself: the coordinator
        //  decides whether the step is tried again or the run stops.
        if (self->push_rc == PS_ENONFINITE)
            snprintf (report.error, sizeof report.error, "%s: %.380s",
                      ps_error_name (PS_ENONFINITE), self->push_err.msg);
    }
    else {
        //  Push-pull brought back every partition's values after this
        //  push: the freshest parameters there are.
        self->cur = self->push_p;
        self->fresh = true;
        self->generation = report.generation;
        int rc = ps_backend_set_params (self->backend, self->params [self->cur], err);
        if (rc)
            return rc;
        report.done = true;
        report.applied = self->push_info.applied;
        report.duplicates = self->push_info.duplicates;
        self->steps_done++;
        self->window_steps++;
        self->window_samples += report.count;
        self->window_loss += report.loss;
        self->window_compute_ms += report.compute_ms;
        self->window_comm_ms += report.comm_ms;
    }
    s_add_report (self, &report);
    s_progress (self, false);
    return 0;
}

//  Stop the pusher thread. A push still in flight (after a fatal error)
//  ends within the client's timeout first.
static void
s_pusher_stop (s_trainer_t *self)
{
    ps_error_t ignored;
    s_pusher_collect (self, &ignored);
    pthread_mutex_lock (&self->lock);
    self->quit = true;
    pthread_cond_broadcast (&self->cond);
    pthread_mutex_unlock (&self->lock);
    if (pthread_join (self->pusher, NULL) != 0)
        abort ();
    pthread_cond_destroy (&self->cond);
    pthread_mutex_destroy (&self->lock);
}

//  Train one step: pull when the parameters are not this generation's,
//  compute the gradient, collect the previous step's push (which ran
//  while this step computed), ask for the next work, and hand this step's
//  push to the pusher. Computing step k thus overlaps pushing step k - 1,
//  at the price of one more step of staleness; without overlap the push
//  is collected at once. Returns 0 (a step may have failed and been
//  reported so), or a code when the plan cannot be used.
static int
s_train (s_trainer_t *self, const s_work_t *work, ps_error_t *err)
{
    s_report_t report = { .step = work->step, .generation = work->generation };
    if (!self->train) {
        ps_warn ("train step %" PRIu64 ": an evaluator does not train; giving it back",
                 work->step);
        s_add_report (self, &report);
        return 0;
    }
    double t0 = ps_clock_ms ();
    int rc;
    if (!self->fresh || self->generation != work->generation) {
        //  The push in flight may bring this generation's values yet.
        if ((rc = s_pusher_collect (self, err)))
            return rc;
    }
    if (!self->fresh || self->generation != work->generation) {
        if ((rc = s_pull (self, work, err)) < 0)
            return rc;
        if (rc) {
            report.comm_ms = ps_clock_ms () - t0;
            self->steps_failed++;
            s_add_report (self, &report);
            return 0;
        }
    }
    double t1 = ps_clock_ms ();
    int n = ps_dataset_batch (self->train, self->plan.seed, work->epoch, (size_t) work->batch,
                              self->plan.batch_size, self->x, self->labels, err);
    if (n < 0)
        return ps_error_prefix (err, n, "train step %" PRIu64 " (epoch %" PRIu64 ", batch %"
                                PRIu64 ")", work->step, work->epoch, work->batch);
    //  Steps count from 1 and standalone steps from 0: with the same seed a
    //  step drops the same units in both.
    ps_batch_stats_t stats;
    if ((rc = ps_backend_train_step (self->backend, self->x, self->labels, n,
                                     ps_step_dropout_seed (self->plan.seed, work->step - 1),
                                     self->grads [self->g], &stats, err)))
        return ps_error_prefix (err, rc, "train step %" PRIu64, work->step);
    double t2 = ps_clock_ms ();
    report.compute_ms = t2 - t1;
    report.comm_ms = t1 - t0;
    report.loss = stats.loss_sum;
    report.correct = (uint64_t) stats.correct;
    report.count = (uint64_t) stats.count;
    //  The previous push has had this whole step's computation to finish;
    //  its report goes with the next request, which goes out before this
    //  push so that its answer is here when the next step wants it.
    if ((rc = s_pusher_collect (self, err)) || (rc = s_send_request (self, true, err)))
        return rc;
    s_pusher_post (self, &report);
    return self->plan.overlap ? 0 : s_pusher_collect (self, err);
}

//  Evaluate the servers' current parameters on the test set.
static int
s_eval (s_trainer_t *self, const s_work_t *work, ps_error_t *err)
{
    s_report_t report = { .kind = S_EVAL, .step = work->step, .generation = work->generation };
    double t0 = ps_clock_ms ();
    int rc = s_pusher_collect (self, err);
    if (rc)
        return rc;
    rc = s_pull (self, work, err);
    if (rc < 0)
        return rc;
    double t1 = ps_clock_ms ();
    report.comm_ms = t1 - t0;
    if (rc == 0) {
        ps_batch_stats_t stats;
        if ((rc = ps_evaluate (self->backend, self->test, self->plan.eval_batch, self->x,
                               self->labels, &stats, err)))
            return ps_error_prefix (err, rc, "eval at step %" PRIu64, work->step);
        report.compute_ms = ps_clock_ms () - t1;
        report.done = true;
        report.loss = stats.loss_sum;
        report.correct = (uint64_t) stats.correct;
        report.count = (uint64_t) stats.count;
        self->evals_done++;
        ps_info ("evaluation after %" PRIu64 " steps (epoch %" PRIu64 "): test loss %.4f, "
                 "accuracy %.4f on %d examples", work->step, work->epoch,
                 stats.count ? stats.loss_sum / stats.count : 0,
                 stats.count ? (double) stats.correct / stats.count : 0, stats.count);
    }
    s_add_report (self, &report);
    return 0;
}

//  ---------------------------------------------------------------------
//  Mirrored mode

//  The ring's watch, called while a collective waits: read what the link
//  has. An abort of the ring in use, the loss of the coordinator or a new
//  registration (the coordinator restarted, or declared this worker
//  failed) ends the collective; so does a link that failed, whose error is
//  kept for s_after_collective.
static bool
s_watch (void *arg)
{
    s_trainer_t *self = arg;
    if (self->watch_rc)
        return true;
    s_event_t event;
    int rc = s_receive (self, 0, false, &event, &self->watch_err);
    if (rc)
        self->watch_rc = rc;
    if (event == S_EV_LOST || event == S_EV_REGISTERED || event == S_EV_DONE)
        self->aborted = true;
    return self->aborted || self->watch_rc;
}

//  Run a collective (fn) with the watch armed.
static int
s_collective (s_trainer_t *self, int (*fn) (s_trainer_t *, void *, ps_error_t *), void *arg,
              ps_error_t *err)
{
    self->in_collective = true;
    self->aborted = false;
    int rc = fn (self, arg, err);
    self->in_collective = false;
    return rc;
}

//  After a collective: a link failure seen by the watch ends the trainer,
//  and a plan that came meanwhile is used now.
static int
s_after_collective (s_trainer_t *self, ps_error_t *err)
{
    if (self->watch_rc) {
        int rc = self->watch_rc;
        *err = self->watch_err;
        self->watch_rc = 0;
        return rc;
    }
    if (self->have_deferred) {
        ps_plan_t plan = self->deferred;
        memset (&self->deferred, 0, sizeof self->deferred);
        self->have_deferred = false;
        return s_apply_plan (self, &plan, err);
    }
    return 0;
}

//  A mirrored report: the replica's counters go with every one.
static void
s_mirror_report (s_trainer_t *self, s_report_t *report, bool done)
{
    ps_replica_t *replica = ps_mirror_replica (self->mirror);
    report->done = done;
    report->mirrored = true;
    report->update = ps_replica_updates (replica);
    report->applied = ps_ledger_count (ps_replica_ledger (replica));
    report->duplicates = ps_replica_duplicates (replica);
    s_add_report (self, report);
}

typedef struct {
    uint64_t ring_id;
    int rank, n, root;
    char **members;
    int *tasks;
    char load [4096];
} s_join_t;

static int
s_do_join (s_trainer_t *self, void *arg, ps_error_t *err)
{
    s_join_t *join = arg;
    return ps_mirror_join (self->mirror, join->ring_id, join->rank, join->n,
                           (const char *const *) join->members, join->tasks, join->root,
                           *join->load ? join->load : NULL, err);
}

//  Join the ring the coordinator formed, taking over the root's replica.
//  A failure is reported, not fatal: the coordinator forms the ring again.
static int
s_mirror_ring (s_trainer_t *self, const s_work_t *work, ps_error_t *err)
{
    const msgpack_object *ring = ps_obj_get (ps_msg_header (self->msg), "ring");
    s_report_t report = { .kind = S_RING, .generation = work->generation,
                          .order = work->order };
    s_join_t join = { .ring_id = work->generation };
    const msgpack_object *members = ring ? ps_obj_get (ring, "members") : NULL;
    const msgpack_object *tasks = ring ? ps_obj_get (ring, "tasks") : NULL;
    int64_t root = ring ? ps_obj_get (ring, "root")->via.i64 : -1;
    uint64_t rank = ring ? ps_obj_get (ring, "rank")->via.u64 : 0;
    uint32_t n = members ? members->via.array.size : 0;
    bool tasks_ok = tasks && tasks->via.array.size == n;
    for (uint32_t i = 0; tasks_ok && i < n; i++)
        tasks_ok = tasks->via.array.ptr [i].via.u64 <= 65535;
    if (!ring || n < 1 || n > S_MAX_RING || rank >= n || root < -1 || root >= (int64_t) n
    ||  !tasks_ok
    ||  ps_obj_str (ps_obj_get (ring, "load"), join.load, sizeof join.load)) {
        ps_warn ("the coordinator sent a ring order without a valid ring (rank %llu of %u, "
                 "root %lld); reporting it failed", (unsigned long long) rank, n,
                 (long long) root);
        s_mirror_report (self, &report, false);
        return 0;
    }
    join.rank = (int) rank;
    join.n = (int) n;
    join.root = (int) root;
    join.members = calloc (n, sizeof (char *));
    join.tasks = calloc (n, sizeof (int));
    if (!join.members || !join.tasks)
        abort ();
    for (uint32_t i = 0; i < n; i++)
        join.tasks [i] = (int) tasks->via.array.ptr [i].via.u64;
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        const msgpack_object *member = &members->via.array.ptr [i];
        if (!(join.members [i] = calloc (member->via.str.size + 1, 1)))
            abort ();
        rc = ps_obj_str (member, join.members [i], member->via.str.size + 1);
    }
    ps_error_t local;
    double t0 = ps_clock_ms ();
    if (rc == 0) {
        self->ring_id = work->generation;
        rc = s_collective (self, s_do_join, &join, &local);
    }
    else
        ps_error_set (&local, PS_EPROTO, "a member's endpoint holds a NUL byte");
    for (uint32_t i = 0; i < n; i++)
        free (join.members [i]);
    free (join.members);
    free (join.tasks);
    report.comm_ms = ps_clock_ms () - t0;
    if (rc == 0)
        ps_info ("joined ring %" PRIx64 " as member %d of %d%s; the replica is at update %"
                 PRIu64, work->generation, join.rank, join.n,
                 join.root < 0 ? "" : join.root == join.rank ? " as its root" : ", taking the "
                 "root's replica", ps_replica_updates (ps_mirror_replica (self->mirror)));
    else
        ps_warn ("joining ring %" PRIx64 ": %s", work->generation, local.msg);
    s_mirror_report (self, &report, rc == 0);
    return s_after_collective (self, err);
}

typedef struct {
    size_t nsteps;
    double lr;
} s_update_t;

static int
s_do_update (s_trainer_t *self, void *arg, ps_error_t *err)
{
    s_update_t *update = arg;
    return ps_mirror_update (self->mirror, self->steps, update->nsteps, update->lr, err);
}

//  One synchronous step: this member's batch (none when step is 0), its
//  gradient weighted by its share of the global batch, summed over the
//  ring and applied to the replica.
static int
s_mirror_train (s_trainer_t *self, const s_work_t *work, ps_error_t *err)
{
    const msgpack_object *header = ps_msg_header (self->msg);
    const msgpack_object *steps = ps_obj_get (header, "steps");
    const msgpack_object *lr = ps_obj_get (header, "lr");
    const msgpack_object *examples = ps_obj_get (header, "examples");
    const msgpack_object *number = ps_obj_get (header, "update");
    s_report_t report = { .kind = S_TRAIN, .step = work->step, .generation = work->generation,
                          .order = work->order };
    ps_replica_t *replica = ps_mirror_replica (self->mirror);
    //  The update number says which state the step expects: a replica at
    //  another count would diverge from the others, so it declines and the
    //  ring is formed again, bringing it up to date.
    if (!steps || !lr || !examples || !number || steps->via.array.size < 1
    ||  steps->via.array.size > S_MAX_RING || work->generation != self->ring_id
    ||  number->via.u64 != ps_replica_updates (replica) + 1 || !self->train) {
        ps_warn ("train step %" PRIu64 " (update %" PRIu64 " of ring %" PRIx64 ") is not one "
                 "this worker can run (its replica is at update %" PRIu64 " in ring %" PRIx64
                 "); reporting it failed", work->step, number ? number->via.u64 : 0,
                 work->generation, ps_replica_updates (replica), self->ring_id);
        s_mirror_report (self, &report, false);
        return 0;
    }
    s_update_t update = { .nsteps = steps->via.array.size, .lr = ps_obj_double (lr) };
    for (size_t i = 0; i < update.nsteps; i++)
        self->steps [i] = steps->via.array.ptr [i].via.u64;
    uint64_t total = examples->via.u64;
    float *grad = ps_mirror_grad (self->mirror);
    size_t count = ps_replica_count (replica);
    double t0 = ps_clock_ms ();
    ps_batch_stats_t stats = { 0 };
    if (work->step > 0) {
        int n = ps_dataset_batch (self->train, self->plan.seed, work->epoch,
                                  (size_t) work->batch, self->plan.batch_size, self->x,
                                  self->labels, err);
        if (n < 0)
            return ps_error_prefix (err, n, "train step %" PRIu64 " (epoch %" PRIu64 ", batch %"
                                    PRIu64 ")", work->step, work->epoch, work->batch);
        if ((uint64_t) n > total)
            return ps_error_set (err, PS_EPROTO, "train step %" PRIu64 ": the global step "
                                 "has %" PRIu64 " examples, fewer than this batch's %d",
                                 work->step, total, n);
        int rc = ps_backend_set_params (self->backend, ps_replica_params (replica), err);
        if (rc == 0)
            rc = ps_backend_train_step (self->backend, self->x, self->labels, n,
                                        ps_step_dropout_seed (self->plan.seed, work->step - 1),
                                        grad, &stats, err);
        if (rc)
            return ps_error_prefix (err, rc, "train step %" PRIu64, work->step);
        //  The backend gives the batch's mean gradient; weighted by the
        //  batch's share, the ring's sum is the global batch's mean.
        float share = (float) ((double) n / (double) total);
        for (size_t i = 0; i < count; i++)
            grad [i] *= share;
    }
    else
        memset (grad, 0, count * sizeof (float));
    double t1 = ps_clock_ms ();
    ps_error_t local;
    int rc = s_collective (self, s_do_update, &update, &local);
    double t2 = ps_clock_ms ();
    report.compute_ms = t1 - t0;
    report.comm_ms = t2 - t1;
    if (rc == 0) {
        report.loss = stats.loss_sum;
        report.correct = (uint64_t) stats.correct;
        report.count = (uint64_t) stats.count;
        self->steps_done++;
        self->window_steps++;
        self->window_samples += (uint64_t) stats.count;
        self->window_loss += stats.loss_sum;
        self->window_compute_ms += report.compute_ms;
        self->window_comm_ms += report.comm_ms;
    }
    else {
        self->steps_failed++;
        ps_warn ("train step %" PRIu64 " (ring %" PRIx64 "): %s", work->step, work->generation,
                 local.msg);
        if (rc == PS_ENONFINITE)
            snprintf (report.error, sizeof report.error, "%s: %.380s", ps_error_name (rc),
                      local.msg);
    }
    s_mirror_report (self, &report, rc == 0);
    return s_after_collective (self, err);
}

//  This member's share of an evaluation, with the replica's checksum, by
//  which the coordinator checks that the replicas agree.
static int
s_mirror_eval (s_trainer_t *self, const s_work_t *work, ps_error_t *err)
{
    const msgpack_object *header = ps_msg_header (self->msg);
    const msgpack_object *shard = ps_obj_get (header, "shard");
    const msgpack_object *shards = ps_obj_get (header, "shards");
    s_report_t report = { .kind = S_EVAL, .step = work->step, .generation = work->generation,
                          .order = work->order };
    if (!shard || !shards || shards->via.u64 < 1 || shard->via.u64 >= shards->via.u64) {
        ps_warn ("eval at step %" PRIu64 ": no valid shard; reporting it failed", work->step);
        s_mirror_report (self, &report, false);
        return 0;
    }
    ps_replica_t *replica = ps_mirror_replica (self->mirror);
    size_t total = ps_dataset_count (self->test);
    size_t first = (size_t) (total * shard->via.u64 / shards->via.u64);
    size_t end = (size_t) (total * (shard->via.u64 + 1) / shards->via.u64);
    double t0 = ps_clock_ms ();
    ps_batch_stats_t stats;
    int rc = ps_backend_set_params (self->backend, ps_replica_params (replica), err);
    if (rc == 0)
        rc = ps_evaluate_range (self->backend, self->test, first, end - first,
                                self->plan.eval_batch, self->x, self->labels, &stats, err);
    if (rc)
        return ps_error_prefix (err, rc, "eval at step %" PRIu64, work->step);
    report.compute_ms = ps_clock_ms () - t0;
    report.loss = stats.loss_sum;
    report.correct = (uint64_t) stats.correct;
    report.count = (uint64_t) stats.count;
    report.has_checksum = true;
    report.checksum = ps_replica_checksum (replica);
    self->evals_done++;
    s_mirror_report (self, &report, true);
    return 0;
}

//  Write the replica's snapshot files for a checkpoint.
static int
s_mirror_save (s_trainer_t *self, const s_work_t *work)
{
    char dir [4096];
    s_report_t report = { .kind = S_SAVE, .step = work->step, .generation = work->generation,
                          .order = work->order };
    const msgpack_object *obj = ps_obj_get (ps_msg_header (self->msg), "dir");
    ps_error_t local;
    int rc = !obj || ps_obj_str (obj, dir, sizeof dir)
           ? ps_error_set (&local, PS_EPROTO, "a save order without a valid dir") : 0;
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    double t0 = ps_clock_ms ();
    if (rc == 0)
        rc = ps_replica_save (ps_mirror_replica (self->mirror), dir, &files, &nfiles, &local);
    free (files);
    report.comm_ms = ps_clock_ms () - t0;
    if (rc)
        ps_warn ("saving the replica: %s", local.msg);
    else
        ps_info ("saved the replica into %s (%zu files, %.1f ms)", dir, nfiles, report.comm_ms);
    s_mirror_report (self, &report, rc == 0);
    return 0;
}

//  Stop: wait a little for the answer to a request still in flight (with
//  stop_fd: work it hands out is given back), then send the reports not
//  yet delivered, want 0, and wait a little for each answer so they have
//  surely left. Nothing here is fatal; the trainer stops either way.
static void
s_finish (s_trainer_t *self)
{
    ps_error_t local;
    s_event_t event;
    if (s_pusher_collect (self, &local))
        ps_warn ("%s", local.msg);
    for (int rounds = 0; rounds < 8 && self->registered; rounds++) {
        if (!self->outstanding) {
            if (!self->npending)
                break;
            if (s_send_request (self, false, &local)) {
                ps_warn ("cannot send the last reports: %s", local.msg);
                break;
            }
        }
        double deadline = ps_clock_ms () + S_FINAL_WAIT_MS;
        event = S_EV_NONE;
        while (event == S_EV_NONE && ps_clock_ms () < deadline)
            if (s_receive (self, S_SLICE_MS, false, &event, &local)) {
                ps_warn ("%s", local.msg);
                return;
            }
        if (event != S_EV_REPLY) {
            ps_warn ("the coordinator did not answer the last request; %zu reports undelivered",
                     self->nsent + self->npending);
            return;
        }
        self->outstanding = 0;
        self->nsent = 0;
        if (s_str_eq (ps_msg_type (self->msg), "work")) {
            s_work_t work;
            s_read_work (ps_msg_header (self->msg), &work);
            s_give_back (self, &work);
        }
    }
}

int
ps_trainer_run (const ps_trainer_config_t *config, ps_error_t *err)
{
    ps_error_t local;
    if (!err)
        err = &local;
    if (!config->coordinator || !config->role
    ||  (!s_str_eq (config->role, "worker") && !s_str_eq (config->role, "evaluator"))
    ||  config->index < 0)
        return ps_error_set (err, PS_EINVAL, "a trainer needs a coordinator endpoint, the role "
                             "worker or evaluator, and an index >= 0");
    s_trainer_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->config = config;
    self->evaluator = s_str_eq (config->role, "evaluator");
    self->last_id = S_FIRST_ID - 1;
    self->window_start = ps_clock_ms ();
    self->msg = ps_msg_new ();
    ps_writer_init (&self->writer, "work_request", 0, 0);
    ps_link_config_t link_config = {
        .coordinator = config->coordinator, .role = config->role, .index = config->index,
        .deliver = true, .curve = config->curve,
    };
    int rc = 0;
    if (pthread_mutex_init (&self->lock, NULL) != 0 || pthread_cond_init (&self->cond, NULL) != 0
    ||  pthread_create (&self->pusher, NULL, s_pusher_run, self) != 0)
        abort ();               //  only for lack of memory or threads
    if (!(self->link = ps_link_new (&link_config, err))) {
        rc = err->code;
        goto done;
    }
    ps_info ("registering with the coordinator at %s as %s %d", config->coordinator,
             config->role, config->index);
    double since = ps_clock_ms ();
    s_event_t event;
    //  Every wait below returns on S_EV_DONE, which sets over; the next
    //  round ends the loop.
    while (!self->over) {
        if (!self->registered) {
            if ((rc = s_receive (self, S_SLICE_MS, true, &event, err)))
                goto done;
            if (event == S_EV_STOP)
                break;
            if (!self->registered && ps_clock_ms () - since >= S_REGISTER_LOG_MS) {
                ps_warn ("still waiting for the coordinator at %s to register %s %d",
                         config->coordinator, config->role, config->index);
                since = ps_clock_ms ();
            }
            continue;
        }
        if (self->settling) {
            //  Until a while passes without another register_ok.
            self->settling = false;
            if ((rc = s_receive (self, S_SETTLE_MS, true, &event, err)))
                goto done;
            if (event == S_EV_STOP)
                break;
            continue;
        }
        if (!self->outstanding && (rc = s_send_request (self, true, err)))
            goto done;
        if ((rc = s_wait_event (self, &event, err)))
            goto done;
        if (event == S_EV_STOP)
            break;
        if (event != S_EV_REPLY) {
            since = ps_clock_ms ();
            continue;
        }
        //  The answer to the outstanding request.
        self->outstanding = 0;
        if (s_str_eq (ps_msg_type (self->msg), "error")) {
            const msgpack_object *header = ps_msg_header (self->msg);
            char code [32], message [PS_ERROR_MSG_MAX];
            s_error_fields (header, code, sizeof code, message, sizeof message);
            //  The request changed nothing, so its reports go again with the
            //  next: dropping them would leave their steps in flight at the
            //  coordinator for good.
            ps_warn ("the coordinator refused work_request: %s: %s; asking again in %d ms",
                     code, message, S_RETRY_MS);
            s_forget_request (self);
            if ((rc = s_sleep (self, S_RETRY_MS, &event, err)))
                goto done;
            if (event == S_EV_STOP)
                break;
            continue;
        }
        self->nsent = 0;
        s_work_t work;
        s_read_work (ps_msg_header (self->msg), &work);
        //  Anything but the next step waits for the push in flight, whose
        //  report should go out with the next request.
        if (!s_str_eq (work.kind, "train") && (rc = s_pusher_collect (self, err)))
            goto done;
        if (self->mirror && s_str_eq (work.kind, "ring"))
            rc = s_mirror_ring (self, &work, err);
        else
        if (self->mirror && s_str_eq (work.kind, "train"))
            rc = s_mirror_train (self, &work, err);
        else
        if (self->mirror && s_str_eq (work.kind, "eval"))
            rc = s_mirror_eval (self, &work, err);
        else
        if (self->mirror && s_str_eq (work.kind, "save"))
            rc = s_mirror_save (self, &work);
        else
        if (s_str_eq (work.kind, "train"))
            rc = s_train (self, &work, err);
        else
        if (s_str_eq (work.kind, "eval"))
            rc = s_eval (self, &work, err);
        else
        if (s_str_eq (work.kind, "wait")) {
            //  Reports waiting go out at once; otherwise ask again later.
            if (!self->npending) {
                rc = s_sleep (self, work.wait_ms, &event, err);
                if (rc == 0 && event == S_EV_STOP)
                    break;
            }
        }
        else
        if (s_str_eq (work.kind, "stop")) {
            ps_info ("the coordinator says training is over");
            break;
        }
        else {
            ps_warn ("the coordinator sent work of unknown kind \"%s\"; asking again",
                     work.kind);
            rc = s_sleep (self, S_RETRY_MS, &event, err);
            if (rc == 0 && event == S_EV_STOP)
                break;
        }
        if (rc)
            goto done;
    }
    s_finish (self);
    s_progress (self, true);
    ps_info ("stopping: %" PRIu64 " steps trained, %" PRIu64 " failed, %" PRIu64
             " evaluations", self->steps_done, self->steps_failed, self->evals_done);
done:
    s_pusher_stop (self);
    ps_link_destroy (&self->link);
    s_teardown (self);
    if (self->have_plan)
        ps_plan_release (&self->plan);
    if (self->have_deferred)
        ps_plan_release (&self->deferred);
    free (self->steps);
    ps_msg_destroy (&self->msg);
    ps_writer_fini (&self->writer);
    free (self);
    return rc;
}
