//  The coordinator's evaluation queue (see ps_evalq.h).

#include "ps_evalq.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include "ps_log.h"

struct _ps_evalq_t {
    ps_metrics_t *report;
    bool pending;
    uint64_t epoch, step;
    bool busy;
    ps_eval_t out;
    bool have;
    uint64_t last_step;
    double test_loss, test_accuracy, test_auc;
    double test_mae;            //  a regression model's, else NaN
};

ps_evalq_t *
ps_evalq_new (ps_metrics_t *report)
{
    ps_evalq_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->report = report;
    return self;
}

void
ps_evalq_destroy (ps_evalq_t **self_p)
{
    free (*self_p);
    *self_p = NULL;
}

void
ps_evalq_ask (ps_evalq_t *self, uint64_t epoch, uint64_t step)
{
    self->pending = true;
    self->epoch = epoch;
    self->step = step;
}

bool
ps_evalq_pending (const ps_evalq_t *self, uint64_t *epoch, uint64_t *step)
{
    if (self->pending && epoch)
        *epoch = self->epoch;
    if (self->pending && step)
        *step = self->step;
    return self->pending;
}

const ps_eval_t *
ps_evalq_busy (const ps_evalq_t *self)
{
    return self->busy ? &self->out : NULL;
}

const ps_eval_t *
ps_evalq_take (ps_evalq_t *self, ps_role_t role, int index, uint64_t generation, double now)
{
    if (!self->pending)
        return NULL;
    self->pending = false;
    self->busy = true;
    self->out = (ps_eval_t) { .role = role, .index = index, .epoch = self->epoch,
                              .step = self->step, .generation = generation, .sent_ms = now };
    return &self->out;
}

void
ps_evalq_requeue (ps_evalq_t *self)
{
    if (!self->busy)
        return;
    self->busy = false;
    //  A newer evaluation asked for meanwhile supersedes the lost one.
    if (!self->pending)
        ps_evalq_ask (self, self->out.epoch, self->out.step);
}

void
ps_evalq_lost (ps_evalq_t *self, ps_role_t role, int index)
{
    if (self->busy && self->out.role == role && self->out.index == index)
        ps_evalq_requeue (self);
}

void
ps_evalq_result (ps_evalq_t *self, double loss, uint64_t correct, uint64_t count,
                 double auc, double abs_error, const char *who, int task, double params_ms,
                 double now)
{
    self->busy = false;
    if (count == 0)
        return;
    self->test_loss = loss / count;
    self->test_accuracy = (double) correct / count;
    self->test_auc = auc;
    self->test_mae = abs_error / count;
    self->have = true;
    self->last_step = self->out.step;
    const ps_eval_t *e = &self->out;
    if (!(params_ms >= e->sent_ms && params_ms <= now))
        params_ms = e->sent_ms;
    ps_metrics_tty_clear (self->report);
    if (isfinite (self->test_mae))
        ps_info ("evaluation after epoch %" PRIu64 " (step %" PRIu64 "): test mse %.4f, test "
                 "mae %.4f (%s:%d, %.0f ms)", e->epoch, e->step, self->test_loss,
                 self->test_mae, who, task, now - e->sent_ms);
    else
    if (isfinite (auc))
        ps_info ("evaluation after epoch %" PRIu64 " (step %" PRIu64 "): test AUC %.4f, test "
                 "log loss %.4f, test accuracy %.4f (%s:%d, %.0f ms)", e->epoch, e->step, auc,
                 self->test_loss, self->test_accuracy, who, task, now - e->sent_ms);
    else
        ps_info ("evaluation after epoch %" PRIu64 " (step %" PRIu64 "): test loss %.4f, test "
                 "accuracy %.4f (%s:%d, %.0f ms)", e->epoch, e->step, self->test_loss,
                 self->test_accuracy, who, task, now - e->sent_ms);
    json_t *record = json_pack ("{s:I, s:I, s:f, s:f, s:I, s:f, s:f, s:s, s:i}",
                                "epoch", (json_int_t) e->epoch, "step", (json_int_t) e->step,
                                "test_loss", isfinite (self->test_loss) ? self->test_loss : -1.0,
                                "test_accuracy", self->test_accuracy,
                                "count", (json_int_t) count,
                                "params_at_s",
                                (params_ms - ps_metrics_start_ms (self->report)) / 1e3,
                                "eval_ms", now - e->sent_ms, "role", who, "task", task);
    if (isfinite (auc)) {
        json_object_set_new (record, "test_auc", json_real (auc));
        json_object_set_new (record, "test_logloss", isfinite (self->test_loss)
                                                     ? json_real (self->test_loss) : json_null ());
    }
    //  A regression model has no accuracy: its errors stand in its place.
    if (isfinite (self->test_mae) && record) {
        json_object_del (record, "test_accuracy");
        json_object_set_new (record, "test_mse", json_real (self->test_loss));
        json_object_set_new (record, "test_mae", json_real (self->test_mae));
    }
    ps_metrics_event (self->report, "eval", record);
}

void
ps_evalq_rewind (ps_evalq_t *self, uint64_t after)
{
    if (self->pending && self->step > after)
        self->pending = false;
    if (self->busy && self->out.step > after)
        self->busy = false;
    if (self->have && self->last_step > after)
        self->have = false;
}

bool
ps_evalq_final (ps_evalq_t *self, uint64_t epoch, uint64_t done)
{
    if (self->have && self->last_step == done)
        return true;
    if (!self->busy && (!self->pending || self->step != done))
        ps_evalq_ask (self, epoch, done);
    return false;
}

double
ps_evalq_latest_mae (const ps_evalq_t *self)
{
    return self->have ? self->test_mae : NAN;
}

bool
ps_evalq_latest (const ps_evalq_t *self, double *test_loss, double *test_accuracy,
                 double *test_auc)
{
    *test_auc = NAN;
    if (self->have) {
        *test_loss = self->test_loss;
        *test_accuracy = self->test_accuracy;
        *test_auc = self->test_auc;
    }
    return self->have;
}
