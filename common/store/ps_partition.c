//  A partition of a variable; see ps_partition.h.

#include "ps_partition.h"
#include "ps_floats.h"
#include "ps_ledger.h"
#include "ps_snapshot.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct _ps_partition_t {
    atomic_int refs;
    pthread_mutex_t lock;       //  guards everything below
    char var [PS_NAME_MAX];
    uint32_t part;
    ps_shape_t shape;
    ps_shape_t local;
    int64_t row_begin, row_end;
    size_t count;
    float *values;
    float *slots [PS_OPT_MAX_SLOTS];
    ps_opt_config_t opt;
    uint64_t opt_t;             //  updates applied to the current slots
    ps_ledger_t *ledger;
    ps_partition_stats_t stats;
    //  Sync mode's open round: the sum of its steps' gradients so far
    //  (allocated at the first round), how many of its steps were added,
    //  and the last round applied.
    float *round_sum;
    uint64_t round;
    uint32_t round_steps;
    uint32_t round_added;
    uint64_t round_applied;
};

static void
s_free_slots (ps_partition_t *self)
{
    for (int i = 0; i < PS_OPT_MAX_SLOTS; i++) {
        free (self->slots [i]);
        self->slots [i] = NULL;
    }
}

//  Fresh slots for optimizer opt, initialised, into slots; all or nothing.
static int
s_alloc_slots (const ps_opt_config_t *opt, size_t count, float **slots, ps_error_t *err)
{
    int nslots = ps_opt_slot_count (opt->kind);
    for (int i = 0; i < nslots; i++) {
        slots [i] = ps_floats_alloc (count);
        if (!slots [i]) {
            while (i-- > 0)
                free (slots [i]);
            return ps_error_set (err, PS_ETOOBIG, "cannot allocate %d optimizer slots of %zu floats",
                                 nslots, count);
        }
    }
    ps_opt_init_slots (opt, slots, count);
    return PS_OK;
}

//  The common part of new and load: identity, shape and lock.
static ps_partition_t *
s_partition_alloc (const char *var, uint32_t part, const ps_shape_t *shape,
                   int64_t row_begin, int64_t row_end, ps_error_t *err)
{
    if (ps_name_check (var, strlen (var), err))
        return NULL;
    ps_shape_t local;
    if (ps_shape_rows (shape, row_begin, row_end, &local, err))
        return NULL;
    ps_partition_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    atomic_init (&self->refs, 1);
    if (pthread_mutex_init (&self->lock, NULL) != 0)
        abort ();
    snprintf (self->var, sizeof self->var, "%s", var);
    self->part = part;
    self->shape = *shape;
    self->local = local;
    self->row_begin = row_begin;
    self->row_end = row_end;
    self->count = (size_t) ps_shape_count (&local);
    return self;
}

ps_partition_t *
ps_partition_new (const char *var, uint32_t part, const ps_shape_t *shape,
                  int64_t row_begin, int64_t row_end,
                  const ps_init_t *init, const ps_opt_config_t *opt, ps_error_t *err)
{
    if (ps_init_validate (init, err) || ps_opt_config_validate (opt, err))
        return NULL;
    ps_partition_t *self = s_partition_alloc (var, part, shape, row_begin, row_end, err);
    if (!self)
        return NULL;
    self->opt = *opt;
    self->ledger = ps_ledger_new ();
    if (!self->ledger)
        abort ();
    //  The size comes from a peer's request: not having the memory is an
    //  error to report, not a reason to stop the server.
    self->values = ps_floats_alloc (self->count);
    if (!self->values)
        ps_error_set (err, PS_ETOOBIG, "%s/%u: cannot allocate %zu floats", var, part, self->count);
    if (!self->values
    ||  s_alloc_slots (&self->opt, self->count, self->slots, err)
    ||  ps_init_fill (init, shape, row_begin, row_end, self->values, err)) {
        ps_partition_destroy (&self);
        return NULL;
    }
    return self;
}

ps_partition_t *
ps_partition_load (const char *path, ps_error_t *err)
{
    ps_snapshot_t snap;
    if (ps_snapshot_read (path, &snap, err))
        return NULL;
    ps_partition_t *self = s_partition_alloc (snap.var, snap.part, &snap.shape,
                                              snap.row_begin, snap.row_end, err);
    if (!self) {
        ps_error_prefix (err, err ? err->code : PS_ECORRUPT, "file %s", path);
        ps_snapshot_release (&snap);
        return NULL;
    }
    //  The snapshot's arrays are adopted as they are: they were allocated
    //  64-byte aligned by the reader.
    self->values = snap.values;
    memcpy (self->slots, snap.slots, sizeof self->slots);
    self->ledger = snap.ledger;
    self->opt = snap.opt;
    self->opt_t = snap.opt_t;
    self->stats.updates = snap.version;
    self->stats.duplicates = snap.duplicates;
    return self;
}

ps_partition_t *
ps_partition_link (ps_partition_t *self)
{
    assert (self);
    atomic_fetch_add (&self->refs, 1);
    return self;
}

void
ps_partition_destroy (ps_partition_t **self_p)
{
    assert (self_p);
    ps_partition_t *self = *self_p;
    if (self && atomic_fetch_sub (&self->refs, 1) == 1) {
        free (self->values);
        free (self->round_sum);
        s_free_slots (self);
        ps_ledger_destroy (&self->ledger);
        pthread_mutex_destroy (&self->lock);
        free (self);
    }
    *self_p = NULL;
}

const char *
ps_partition_var (ps_partition_t *self)
{
    assert (self);
    return self->var;
}

uint32_t
ps_partition_part (ps_partition_t *self)
{
    assert (self);
    return self->part;
}

const ps_shape_t *
ps_partition_shape (ps_partition_t *self)
{
    assert (self);
    return &self->shape;
}

int64_t
ps_partition_row_begin (ps_partition_t *self)
{
    assert (self);
    return self->row_begin;
}

int64_t
ps_partition_row_end (ps_partition_t *self)
{
    assert (self);
    return self->row_end;
}

const ps_shape_t *
ps_partition_local_shape (ps_partition_t *self)
{
    assert (self);
    return &self->local;
}

size_t
ps_partition_count (ps_partition_t *self)
{
    assert (self);
    return self->count;
}

//  One update of a partition in ranges: each range is updated, then copied
//  to out when there is one. A range reads only its own part of grad (the
//  norm, if any, was taken before), so out may be grad.
typedef struct {
    ps_partition_t *self;
    const ps_opt_update_t *update;  //  NULL: copy only
    const float *grad;
    float *out;
} s_apply_t;

static void
s_apply_range (void *arg, size_t begin, size_t end)
{
    s_apply_t *apply = arg;
    ps_partition_t *self = apply->self;
    if (apply->update)
        ps_opt_apply_range (apply->update, self->values, apply->grad, self->slots, begin, end);
    if (apply->out)
        memcpy (apply->out + begin, self->values + begin, (end - begin) * sizeof (float));
}

//  Apply update opt_t + 1 with grad (NULL: none, only copy) and copy the
//  values to out (NULL: none), in ranges on runner's threads when the
//  partition is large. Called with the lock held, which the ranges run
//  under: the lock's holder waits for them all.
static void
s_apply (ps_partition_t *self, const float *grad, float *out, const ps_opt_runner_t *runner)
{
    ps_opt_update_t update;
    if (grad) {
        self->opt_t++;
        ps_opt_prepare (&self->opt, grad, self->count, self->opt_t, &update);
    }
    s_apply_t apply = { self, grad ? &update : NULL, grad, out };
    if (runner && self->count >= PS_PARTITION_SPLIT_MIN)
        runner->run (runner->self, self->count, PS_PARTITION_GRAIN, s_apply_range, &apply);
    else
        s_apply_range (&apply, 0, self->count);
}

int
ps_partition_push (ps_partition_t *self, uint64_t step, const float *grad,
                   float *out, uint64_t *version, ps_error_t *err)
{
    return ps_partition_push_on (self, step, grad, out, version, NULL, err);
}

int
ps_partition_push_on (ps_partition_t *self, uint64_t step, const float *grad,
                      float *out, uint64_t *version, const ps_opt_runner_t *runner,
                      ps_error_t *err)
{
    assert (self);
    pthread_mutex_lock (&self->lock);
    int rc = ps_ledger_mark (self->ledger, step, err);
    if (rc == PS_OK || (rc == PS_DUPLICATE && out))
        s_apply (self, rc == PS_OK ? grad : NULL, out, runner);
    if (rc == PS_OK)
        self->stats.updates++;
    else
    if (rc == PS_DUPLICATE)
        self->stats.duplicates++;
    if (rc >= 0) {
        self->stats.bytes_in += self->count * sizeof (float);
        if (out)
            self->stats.bytes_out += self->count * sizeof (float);
    }
    *version = self->stats.updates;
    pthread_mutex_unlock (&self->lock);
    if (rc < 0)
        ps_error_prefix (err, rc, "partition %s/%u", self->var, self->part);
    return rc;
}

//  Why a push of step to round (of steps steps) cannot be added now, or
//  PS_OK. Called with the lock held.
static int
s_round_check (ps_partition_t *self, uint64_t round, uint32_t steps, ps_error_t *err)
{
    if (steps == 0)
        return ps_error_set (err, PS_EINVAL, "round %llu has no steps",
                             (unsigned long long) round);
    if (self->round_added > 0) {
        if (round != self->round)
            return ps_error_set (err, PS_EINVAL, "a step of round %llu while round %llu is "
                                 "open with %u of its %u steps", (unsigned long long) round,
                                 (unsigned long long) self->round, self->round_added,
                                 self->round_steps);
        if (steps != self->round_steps)
            return ps_error_set (err, PS_EINVAL, "round %llu has %u steps, not %u",
                                 (unsigned long long) round, self->round_steps, steps);
    }
    else
    if (round <= self->round_applied)
        return ps_error_set (err, PS_EINVAL, "round %llu is not after round %llu, the last "
                             "applied", (unsigned long long) round,
                             (unsigned long long) self->round_applied);
    if (!self->round_sum && !(self->round_sum = ps_floats_alloc (self->count)))
        return ps_error_set (err, PS_ETOOBIG, "cannot allocate a round's sum of %zu floats",
                             self->count);
    return PS_OK;
}

int
ps_partition_check_round (ps_partition_t *self, uint64_t step, uint64_t round, uint32_t steps,
                          ps_error_t *err)
{
    assert (self);
    pthread_mutex_lock (&self->lock);
    int rc = ps_ledger_contains (self->ledger, step) ? PS_OK
           : s_round_check (self, round, steps, err);
    pthread_mutex_unlock (&self->lock);
    if (rc)
        return ps_error_prefix (err, rc, "partition %s/%u", self->var, self->part);
    return PS_OK;
}

//  Add step's gradient grad to the open round (s_round_check said yes),
//  and apply the round's mean when this is its last step. Called with the
//  lock held. Returns PS_OK, or the ledger's error.
static int
s_round_add (ps_partition_t *self, uint64_t step, uint64_t round, uint32_t steps,
             const float *grad, bool *applied, const ps_opt_runner_t *runner, ps_error_t *err)
{
    int rc = ps_ledger_mark (self->ledger, step, err);
    if (rc != PS_OK)
        return rc;
    if (self->round_added == 0) {
        memcpy (self->round_sum, grad, self->count * sizeof (float));
        self->round = round;
        self->round_steps = steps;
    }
    else
        for (size_t i = 0; i < self->count; i++)
            self->round_sum [i] += grad [i];
    self->round_added++;
    if (self->round_added == self->round_steps) {
        float scale = 1.0f / (float) self->round_steps;
        for (size_t i = 0; i < self->count; i++)
            self->round_sum [i] *= scale;
        s_apply (self, self->round_sum, NULL, runner);
        self->stats.updates++;
        self->round_applied = round;
        self->round_added = 0;
        *applied = true;
    }
    return PS_OK;
}

static int
s_by_address (const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) *(ps_partition_t *const *) a;
    uintptr_t y = (uintptr_t) *(ps_partition_t *const *) b;
    return x < y ? -1 : x > y;
}

int
ps_partition_push_rounds (ps_partition_t *const *parts, size_t n, uint64_t step, uint64_t round,
                          uint32_t steps, const float *const *grads, int *outcomes,
                          bool *applied, uint64_t *versions, const ps_opt_runner_t *runner,
                          ps_error_t *err)
{
    assert (parts || n == 0);
    //  Every lock is taken before anything is checked, in address order so
    //  that two requests naming the same partitions cannot wait on each
    //  other, and held until every partition has added the step: a push
    //  of another round checked in between would find some partitions
    //  added to and others not.
    ps_partition_t **locked = malloc ((n + 1) * sizeof *locked);
    if (!locked)
        abort ();
    memcpy (locked, parts, n * sizeof *locked);
    qsort (locked, n, sizeof *locked, s_by_address);
    for (size_t i = 0; i < n; i++)
        pthread_mutex_lock (&locked [i]->lock);
    //  A repeat is answered as one whatever its round says: a late copy of
    //  a step of a round applied long ago is harmless.
    int rc = PS_OK;
    size_t refused = 0;
    for (size_t i = 0; i < n; i++)
        applied [i] = false;
    for (size_t i = 0; i < n && rc == PS_OK; i++) {
        outcomes [i] = ps_ledger_contains (parts [i]->ledger, step) ? PS_DUPLICATE : PS_OK;
        if (outcomes [i] == PS_OK)
            rc = s_round_check (parts [i], round, steps, err);
        refused = i;
    }
    //  The ledger's room for the step was reserved when the request was
    //  checked (ps_partition_reserve_step), so its mark does not fail
    //  here after another partition has added the step.
    for (size_t i = 0; i < n && rc == PS_OK; i++) {
        ps_partition_t *self = parts [i];
        if (outcomes [i] == PS_OK) {
            rc = s_round_add (self, step, round, steps, grads [i], &applied [i], runner,
                             err);
            refused = i;
        }
        else
            self->stats.duplicates++;
        if (rc == PS_OK)
            self->stats.bytes_in += self->count * sizeof (float);
    }
    for (size_t i = 0; i < n; i++)
        versions [i] = parts [i]->stats.updates;
    for (size_t i = 0; i < n; i++)
        pthread_mutex_unlock (&locked [i]->lock);
    free (locked);
    if (rc < 0)
        ps_error_prefix (err, rc, "partition %s/%u", parts [refused]->var, parts [refused]->part);
    return rc;
}

int
ps_partition_push_round (ps_partition_t *self, uint64_t step, uint64_t round, uint32_t steps,
                         const float *grad, bool *applied, uint64_t *version, ps_error_t *err)
{
    int outcome;
    int rc = ps_partition_push_rounds (&self, 1, step, round, steps, &grad, &outcome, applied,
                                       version, NULL, err);
    return rc < 0 ? rc : outcome;
}

void
ps_partition_pull (ps_partition_t *self, float *out, uint64_t *version)
{
    assert (self);
    pthread_mutex_lock (&self->lock);
    memcpy (out, self->values, self->count * sizeof (float));
    self->stats.bytes_out += self->count * sizeof (float);
    *version = self->stats.updates;
    pthread_mutex_unlock (&self->lock);
}

int
ps_partition_set_optimizer (ps_partition_t *self, const ps_opt_config_t *opt, ps_error_t *err)
{
    assert (self);
    //  New slots are made before the lock is taken and before anything
    //  changes, so a failure leaves the partition as it was.
    float *slots [PS_OPT_MAX_SLOTS] = { NULL };
    pthread_mutex_lock (&self->lock);
    bool same_kind = self->opt.kind == opt->kind;
    pthread_mutex_unlock (&self->lock);
    if (!same_kind) {
        int rc = s_alloc_slots (opt, self->count, slots, err);
        if (rc)
            return ps_error_prefix (err, rc, "partition %s/%u", self->var, self->part);
    }
    pthread_mutex_lock (&self->lock);
    if (!same_kind) {
        s_free_slots (self);
        memcpy (self->slots, slots, sizeof slots);
        self->opt_t = 0;
    }
    self->opt = *opt;
    pthread_mutex_unlock (&self->lock);
    return PS_OK;
}

int
ps_partition_reserve_step (ps_partition_t *self, uint64_t step, ps_error_t *err)
{
    assert (self);
    pthread_mutex_lock (&self->lock);
    int rc = ps_ledger_reserve (self->ledger, step, err);
    pthread_mutex_unlock (&self->lock);
    if (rc)
        return ps_error_prefix (err, rc, "partition %s/%u", self->var, self->part);
    return PS_OK;
}

void
ps_partition_stats (ps_partition_t *self, ps_partition_stats_t *stats)
{
    assert (self);
    pthread_mutex_lock (&self->lock);
    *stats = self->stats;
    stats->recorded = ps_ledger_count (self->ledger);
    pthread_mutex_unlock (&self->lock);
}

void
ps_partition_count_nonfinite (ps_partition_t *self)
{
    assert (self);
    pthread_mutex_lock (&self->lock);
    self->stats.nonfinite++;
    pthread_mutex_unlock (&self->lock);
}

int
ps_partition_save (ps_partition_t *self, const char *dir, char *file, size_t file_len,
                   uint64_t *bytes, uint32_t *crc, uint64_t *version, ps_error_t *err)
{
    assert (self);
    if (ps_snapshot_filename (self->var, self->part, file, file_len))
        return ps_error_set (err, PS_EINVAL, "partition %s/%u: file name too long",
                             self->var, self->part);
    char path [4096];
    if ((size_t) snprintf (path, sizeof path, "%s/%s", dir, file) >= sizeof path)
        return ps_error_set (err, PS_EINVAL, "snapshot path in %s is too long", dir);
    ps_snapshot_t snap = {
        .part = self->part, .shape = self->shape,
        .row_begin = self->row_begin, .row_end = self->row_end,
    };
    snprintf (snap.var, sizeof snap.var, "%s", self->var);
    //  The lock is held across the write so values, slots, counters and
    //  ledger in the file are one consistent state.
    pthread_mutex_lock (&self->lock);
    if (self->round_added > 0) {
        int busy = ps_error_set (err, PS_EBUSY, "partition %s/%u: round %llu is open with %u "
                                 "of its %u steps", self->var, self->part,
                                 (unsigned long long) self->round, self->round_added,
                                 self->round_steps);
        pthread_mutex_unlock (&self->lock);
        return busy;
    }
    snap.opt = self->opt;
    snap.opt_t = self->opt_t;
    snap.version = self->stats.updates;
    snap.duplicates = self->stats.duplicates;
    snap.values = self->values;
    memcpy (snap.slots, self->slots, sizeof snap.slots);
    snap.ledger = self->ledger;
    int rc = ps_snapshot_write (path, &snap, err);
    pthread_mutex_unlock (&self->lock);
    if (rc == PS_OK)
        rc = ps_snapshot_summary (path, bytes, crc, err);
    *version = snap.version;
    return rc;
}
