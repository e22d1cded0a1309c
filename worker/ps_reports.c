//  Reports to the coordinator; see ps_reports.h.

#include "ps_reports.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ps_clock.h"
#include "ps_log.h"

//  Reports carried by one request, and held at most while the coordinator
//  is away (each step adds one, and no step runs without a coordinator, so
//  the bound is never reached in practice).
#define S_MAX_REPORTS       64
#define S_MAX_PENDING       1024

//  The worker's own request ids start high, so that they never meet the
//  ids of the link's messages (register, heartbeat), counted from 1: an
//  error reply then says by its id alone whether it answers the
//  registration or one of the worker's requests.
#define S_FIRST_ID          (UINT64_C (1) << 40)

//  Milliseconds between progress lines in the log.
#define S_PROGRESS_MS       10000

static const char *s_kind_names [PS_WORK_KINDS] = {
    "train", "eval", "ring", "save", "wait", "stop"
};

struct _ps_reports_t {
    ps_reports_send_fn *send;
    void *arg;
    ps_writer_t writer;
    uint64_t last_id;           //  of the last request sent
    uint64_t outstanding;       //  id of the request awaiting its answer, or 0
    ps_report_t pending [S_MAX_PENDING];
    size_t npending;
    ps_report_t sent [S_MAX_REPORTS];
    size_t nsent;
    ps_proto_report_t encoded [S_MAX_REPORTS];  //  the request's reports, as sent

    //  Counters for the progress lines and the totals.
    uint64_t steps_done, steps_failed, evals_done;
    double window_start, window_loss, window_compute_ms, window_comm_ms;
    uint64_t window_steps, window_samples;
};

const char *
ps_work_kind_name (ps_work_kind_t kind)
{
    return kind < PS_WORK_KINDS ? s_kind_names [kind] : "?";
}

ps_work_kind_t
ps_work_kind_find (const char *name)
{
    for (int k = 0; k < PS_WORK_KINDS; k++)
        if (strcmp (name, s_kind_names [k]) == 0)
            return (ps_work_kind_t) k;
    return PS_WORK_KINDS;
}

ps_reports_t *
ps_reports_new (ps_reports_send_fn *send, void *arg)
{
    ps_reports_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->send = send;
    self->arg = arg;
    self->last_id = S_FIRST_ID - 1;
    self->window_start = ps_clock_ms ();
    ps_writer_init (&self->writer);
    return self;
}

void
ps_reports_destroy (ps_reports_t **self_p)
{
    ps_reports_t *self = *self_p;
    if (!self)
        return;
    ps_writer_fini (&self->writer);
    free (self);
    *self_p = NULL;
}

void
ps_reports_add (ps_reports_t *self, const ps_report_t *report)
{
    if (self->npending == S_MAX_PENDING) {
        ps_warn ("%zu reports held for the coordinator; dropping the oldest (%s step %" PRIu64
                 ")", self->npending, ps_work_kind_name (self->pending [0].kind),
                 self->pending [0].step);
        memmove (self->pending, self->pending + 1, (S_MAX_PENDING - 1) * sizeof (ps_report_t));
        self->npending--;
    }
    self->pending [self->npending++] = *report;
}

void
ps_reports_work (ps_reports_t *self, const ps_report_t *report)
{
    if (report->kind == PS_WORK_TRAIN && report->done) {
        self->steps_done++;
        self->window_steps++;
        self->window_samples += report->count;
        self->window_loss += report->loss;
        self->window_compute_ms += report->compute_ms;
        self->window_comm_ms += report->comm_ms;
    }
    else
    if (report->kind == PS_WORK_TRAIN)
        self->steps_failed++;
    else
    if (report->kind == PS_WORK_EVAL && report->done)
        self->evals_done++;
    ps_reports_add (self, report);
    if (report->kind == PS_WORK_TRAIN)
        ps_reports_progress (self, false);
}

//  A report as the protocol has it; the strings stay the report's.
static void
s_proto_report (const ps_report_t *report, ps_proto_report_t *out)
{
    *out = (ps_proto_report_t) {
        .kind = ps_work_kind_name (report->kind),
        .status = report->done ? "done" : "failed",
        .step = report->step, .generation = report->generation,
        .loss = report->loss, .correct = report->correct, .count = report->count,
        .applied = report->applied, .duplicates = report->duplicates,
        .compute_ms = report->compute_ms, .comm_ms = report->comm_ms,
        .has_update = report->has_update, .update = report->update,
        .has_order = report->has_update, .order = report->order,
        .has_checksum = report->has_checksum, .checksum = report->checksum,
        .has_auc = report->has_auc, .auc = report->auc,
        .has_abs_error = report->has_abs_error, .abs_error = report->abs_error,
        .has_error = *report->error != 0, .error = report->error,
    };
}

int
ps_reports_send (ps_reports_t *self, bool want, ps_error_t *err)
{
    size_t n = self->npending < S_MAX_REPORTS ? self->npending : S_MAX_REPORTS;
    uint64_t id = ++self->last_id;
    for (size_t i = 0; i < n; i++)
        s_proto_report (&self->pending [i], &self->encoded [i]);
    ps_proto_t request = {
        .type = PS_PROTO_WORK_REQUEST, .id = id,
        .work_request = { .reports = { .count = n, .items = self->encoded },
                          .want = want ? 1 : 0 },
    };
    ps_writer_encode (&self->writer, &request);
    int rc = self->send (self->arg, &self->writer, err);
    if (rc)
        return rc;
    memcpy (self->sent, self->pending, n * sizeof (ps_report_t));
    self->nsent = n;
    memmove (self->pending, self->pending + n, (self->npending - n) * sizeof (ps_report_t));
    self->npending -= n;
    self->outstanding = id;
    return 0;
}

void
ps_reports_answered (ps_reports_t *self)
{
    self->outstanding = 0;
    self->nsent = 0;
}

void
ps_reports_forget (ps_reports_t *self)
{
    if (self->nsent) {
        size_t room = S_MAX_PENDING - self->nsent;
        if (self->npending > room) {
            ps_warn ("%zu reports held for the coordinator; dropping the %zu newest",
                     self->npending + self->nsent, self->npending - room);
            self->npending = room;
        }
        memmove (self->pending + self->nsent, self->pending,
                 self->npending * sizeof (ps_report_t));
        memcpy (self->pending, self->sent, self->nsent * sizeof (ps_report_t));
        self->npending += self->nsent;
        self->nsent = 0;
    }
    self->outstanding = 0;
}

uint64_t
ps_reports_outstanding (const ps_reports_t *self)
{
    return self->outstanding;
}

bool
ps_reports_ours (const ps_reports_t *self, uint64_t id)
{
    return id >= S_FIRST_ID && id <= self->last_id;
}

size_t
ps_reports_pending (const ps_reports_t *self)
{
    return self->npending;
}

size_t
ps_reports_undelivered (const ps_reports_t *self)
{
    return self->npending + self->nsent;
}

void
ps_reports_progress (ps_reports_t *self, bool force)
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

void
ps_reports_totals (const ps_reports_t *self)
{
    ps_info ("stopping: %" PRIu64 " steps trained, %" PRIu64 " failed, %" PRIu64
             " evaluations", self->steps_done, self->steps_failed, self->evals_done);
}
