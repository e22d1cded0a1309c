//  The step schedule; see ps_schedule.h.
//
//  Five structures, each with one job:
//
//  - A bitmap of the done steps (bit s for step s), with the done count per
//    epoch beside it, so that completing a step, asking whether one is done
//    and asking whether an epoch is done are O(1). The watermark only moves
//    up, one step at a time, so keeping it costs amortised O(1) per step.
//  - A cursor: the lowest step never handed out. Steps at and above it
//    that are already done (completed without being handed out, or
//    restored as done) are skipped as the cursor passes them.
//  - The front queue: a ring buffer of steps taken back from workers,
//    pushed at the front and handed out from the front. A queued step that
//    completes anyway is not searched for; it stays in the ring and is
//    dropped when it reaches the front, since a done step is never queued
//    again. The ring is grown only by ps_schedule_next, which keeps room for
//    every queued and in-flight step, so giving steps back never allocates
//    and never fails.
//  - A table from each in-flight step to the worker holding it and its
//    position in that worker's list (open addressing, linear probing,
//    deletion by backward shift), so that completing or giving back a step
//    is O(1) expected whoever holds it.
//  - Per worker, an unordered list of its in-flight steps; removal swaps
//    the last entry into the hole and updates that entry's position in the
//    table.

#include "ps_schedule.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

//  Workers are small integers; this bounds the per-worker table that a
//  stray id could otherwise blow up.
#define S_MAX_WORKER  65535

#define S_NONE  SIZE_MAX

//  One in-flight step; step 0 marks an empty slot (steps start at 1).
typedef struct {
    uint64_t step;
    int worker;
    size_t index;               //  position in the worker's list
} s_slot_t;

typedef struct {
    uint64_t *steps;            //  in flight, unordered
    size_t count;
    size_t capacity;
} s_worker_t;

struct _ps_schedule_t {
    uint64_t batches;           //  per epoch
    uint64_t total;
    uint64_t nepochs;           //  the last may be cut short by total
    uint64_t *done;             //  bit s of the bitmap is step s; bit 0 unused
    uint64_t *epoch_done;       //  done steps per epoch
    uint64_t done_count;
    uint64_t watermark;         //  every step up to it is done, the next is not
    uint64_t top;               //  highest done step, 0 when none
    uint64_t cursor;            //  lowest step never handed out (maybe done)

    uint64_t *queue;            //  ring, capacity a power of two (or 0)
    size_t queue_head;
    size_t queue_len;
    size_t queue_capacity;

    s_slot_t *slots;            //  in-flight table, capacity a power of two (or 0)
    size_t slot_capacity;
    unsigned slot_shift;        //  64 - log2 (slot_capacity)
    size_t in_flight;

    s_worker_t *workers;        //  indexed by worker id
    int nworkers;
};

static bool
s_is_done (const ps_schedule_t *self, uint64_t step)
{
    return (self->done [step / 64] >> (step % 64)) & 1;
}

static uint64_t
s_epoch_size (const ps_schedule_t *self, uint64_t epoch)
{
    uint64_t first = epoch * self->batches;
    return self->total - first < self->batches ? self->total - first : self->batches;
}

ps_schedule_t *
ps_schedule_new (uint64_t batches_per_epoch, uint64_t total_steps, ps_error_t *err)
{
    if (batches_per_epoch == 0 || total_steps == 0) {
        ps_error_set (err, PS_EINVAL,
                      "schedule: batches_per_epoch is %llu and total_steps %llu, expected both >= 1",
                      (unsigned long long) batches_per_epoch, (unsigned long long) total_steps);
        return NULL;
    }
    ps_schedule_t *self = calloc (1, sizeof *self);
    if (self) {
        self->batches = batches_per_epoch;
        self->total = total_steps;
        self->nepochs = (total_steps - 1) / batches_per_epoch + 1;
        self->cursor = 1;
        //  A total near 2^64 cannot be allocated, so the cursor (at most
        //  total + 1) never wraps.
        self->done = calloc (total_steps / 64 + 1, sizeof (uint64_t));
        self->epoch_done = calloc (self->nepochs, sizeof (uint64_t));
    }
    if (!self || !self->done || !self->epoch_done) {
        ps_error_set (err, PS_ETOOBIG, "schedule: cannot allocate the state of %llu steps",
                      (unsigned long long) total_steps);
        ps_schedule_destroy (&self);
        return NULL;
    }
    return self;
}

void
ps_schedule_destroy (ps_schedule_t **self_p)
{
    assert (self_p);
    if (*self_p) {
        ps_schedule_t *self = *self_p;
        for (int w = 0; w < self->nworkers; w++)
            free (self->workers [w].steps);
        free (self->workers);
        free (self->slots);
        free (self->queue);
        free (self->epoch_done);
        free (self->done);
        free (self);
        *self_p = NULL;
    }
}

uint64_t
ps_schedule_total (const ps_schedule_t *self)
{
    assert (self);
    return self->total;
}

uint64_t
ps_schedule_batches_per_epoch (const ps_schedule_t *self)
{
    assert (self);
    return self->batches;
}

void
ps_schedule_locate (const ps_schedule_t *self, uint64_t step, uint64_t *epoch, uint64_t *batch)
{
    assert (self);
    assert (step >= 1);
    if (epoch)
        *epoch = (step - 1) / self->batches;
    if (batch)
        *batch = (step - 1) % self->batches;
}

//  The in-flight table.

static size_t
s_slot_home (const ps_schedule_t *self, uint64_t step)
{
    //  Fibonacci hashing: the top bits of the product spread consecutive
    //  steps, which is what the table mostly holds, across the table.
    return (size_t) ((step * UINT64_C (0x9E3779B97F4A7C15)) >> self->slot_shift);
}

static size_t
s_slot_find (const ps_schedule_t *self, uint64_t step)
{
    if (self->slot_capacity == 0 || step == 0)
        return S_NONE;
    size_t mask = self->slot_capacity - 1;
    for (size_t i = s_slot_home (self, step); ; i = (i + 1) & mask) {
        if (self->slots [i].step == step)
            return i;
        if (self->slots [i].step == 0)
            return S_NONE;
    }
}

static void
s_slot_insert (ps_schedule_t *self, uint64_t step, int worker, size_t index)
{
    size_t mask = self->slot_capacity - 1;
    size_t i = s_slot_home (self, step);
    while (self->slots [i].step != 0)
        i = (i + 1) & mask;
    self->slots [i].step = step;
    self->slots [i].worker = worker;
    self->slots [i].index = index;
}

//  Empty slot i and move later entries of its probe run back, so that every
//  entry stays reachable from its home slot without tombstones.
static void
s_slot_remove (ps_schedule_t *self, size_t i)
{
    size_t mask = self->slot_capacity - 1;
    size_t hole = i;
    for (size_t j = (i + 1) & mask; self->slots [j].step != 0; j = (j + 1) & mask) {
        size_t home = s_slot_home (self, self->slots [j].step);
        //  The entry at j may fill the hole when the hole lies on its probe
        //  path, from its home up to j.
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            self->slots [hole] = self->slots [j];
            hole = j;
        }
    }
    self->slots [hole].step = 0;
}

//  Make room for need entries at a load of at most one half.
static int
s_slots_reserve (ps_schedule_t *self, size_t need)
{
    if (need <= self->slot_capacity / 2)
        return PS_OK;
    size_t capacity = 16;
    unsigned bits = 4;
    while (capacity / 2 < need) {
        capacity *= 2;
        bits++;
    }
    s_slot_t *slots = calloc (capacity, sizeof (s_slot_t));
    if (!slots)
        return PS_ETOOBIG;
    s_slot_t *old = self->slots;
    size_t old_capacity = self->slot_capacity;
    self->slots = slots;
    self->slot_capacity = capacity;
    self->slot_shift = 64 - bits;
    for (size_t i = 0; i < old_capacity; i++)
        if (old [i].step != 0)
            s_slot_insert (self, old [i].step, old [i].worker, old [i].index);
    free (old);
    return PS_OK;
}

//  Take the in-flight step in slot i off its worker's list and out of the
//  table.
static void
s_unflight (ps_schedule_t *self, size_t i)
{
    s_worker_t *worker = &self->workers [self->slots [i].worker];
    size_t index = self->slots [i].index;
    assert (index < worker->count && worker->steps [index] == self->slots [i].step);
    worker->count--;
    if (index < worker->count) {
        //  Move the last step into the hole. Its slot is updated in place
        //  before slot i is removed, since removal moves entries.
        uint64_t last = worker->steps [worker->count];
        worker->steps [index] = last;
        size_t j = s_slot_find (self, last);
        assert (j != S_NONE);
        self->slots [j].index = index;
    }
    s_slot_remove (self, i);
    self->in_flight--;
}

//  The front queue.

static int
s_queue_reserve (ps_schedule_t *self, size_t need)
{
    if (need <= self->queue_capacity)
        return PS_OK;
    size_t capacity = 16;
    while (capacity < need)
        capacity *= 2;
    uint64_t *queue = malloc (capacity * sizeof (uint64_t));
    if (!queue)
        return PS_ETOOBIG;
    for (size_t i = 0; i < self->queue_len; i++)
        queue [i] = self->queue [(self->queue_head + i) & (self->queue_capacity - 1)];
    free (self->queue);
    self->queue = queue;
    self->queue_capacity = capacity;
    self->queue_head = 0;
    return PS_OK;
}

static void
s_queue_push_front (ps_schedule_t *self, uint64_t step)
{
    assert (self->queue_len < self->queue_capacity);
    self->queue_head = (self->queue_head - 1) & (self->queue_capacity - 1);
    self->queue [self->queue_head] = step;
    self->queue_len++;
}

static uint64_t
s_queue_pop_front (ps_schedule_t *self)
{
    assert (self->queue_len > 0);
    uint64_t step = self->queue [self->queue_head];
    self->queue_head = (self->queue_head + 1) & (self->queue_capacity - 1);
    self->queue_len--;
    return step;
}

//  Make worker's list able to take one more step, growing the worker table
//  to reach it.
static int
s_worker_reserve (ps_schedule_t *self, int worker)
{
    if (worker >= self->nworkers) {
        int nworkers = self->nworkers ? self->nworkers : 8;
        while (nworkers <= worker)
            nworkers *= 2;
        if (nworkers > S_MAX_WORKER + 1)
            nworkers = S_MAX_WORKER + 1;
        s_worker_t *workers = realloc (self->workers, (size_t) nworkers * sizeof (s_worker_t));
        if (!workers)
            return PS_ETOOBIG;
        memset (workers + self->nworkers, 0,
                (size_t) (nworkers - self->nworkers) * sizeof (s_worker_t));
        self->workers = workers;
        self->nworkers = nworkers;
    }
    s_worker_t *w = &self->workers [worker];
    if (w->count == w->capacity) {
        size_t capacity = w->capacity ? 2 * w->capacity : 4;
        uint64_t *steps = realloc (w->steps, capacity * sizeof (uint64_t));
        if (!steps)
            return PS_ETOOBIG;
        w->steps = steps;
        w->capacity = capacity;
    }
    return PS_OK;
}

int
ps_schedule_next (ps_schedule_t *self, int worker, uint64_t *step)
{
    assert (self);
    assert (step);
    if (worker < 0 || worker > S_MAX_WORKER)
        return PS_EINVAL;
    //  Drop queued steps that completed while they waited.
    while (self->queue_len > 0 && s_is_done (self, self->queue [self->queue_head]))
        s_queue_pop_front (self);
    if (self->queue_len == 0) {
        while (self->cursor <= self->total && s_is_done (self, self->cursor))
            self->cursor++;
        if (self->cursor > self->total)
            return PS_ENOTFOUND;
    }
    //  Allocate everything first, so that a failure changes nothing that
    //  can be seen. The queue keeps room for every step in flight, so that
    //  giving them back cannot fail.
    if (s_worker_reserve (self, worker)
    ||  s_slots_reserve (self, self->in_flight + 1)
    ||  s_queue_reserve (self, self->queue_len + self->in_flight + 1))
        return PS_ETOOBIG;

    uint64_t taken = self->queue_len > 0 ? s_queue_pop_front (self) : self->cursor++;
    s_worker_t *w = &self->workers [worker];
    s_slot_insert (self, taken, worker, w->count);
    w->steps [w->count++] = taken;
    self->in_flight++;
    *step = taken;
    return PS_OK;
}

int
ps_schedule_complete (ps_schedule_t *self, uint64_t step)
{
    assert (self);
    if (step == 0 || step > self->total)
        return PS_EINVAL;
    if (s_is_done (self, step))
        return PS_DUPLICATE;
    size_t slot = s_slot_find (self, step);
    if (slot != S_NONE)
        s_unflight (self, slot);
    self->done [step / 64] |= UINT64_C (1) << (step % 64);
    self->done_count++;
    self->epoch_done [(step - 1) / self->batches]++;
    if (step > self->top)
        self->top = step;
    while (self->watermark < self->total && s_is_done (self, self->watermark + 1))
        self->watermark++;
    return PS_OK;
}

int
ps_schedule_holder (const ps_schedule_t *self, uint64_t step)
{
    assert (self);
    size_t slot = s_slot_find (self, step);
    return slot == S_NONE ? -1 : self->slots [slot].worker;
}

int
ps_schedule_release (ps_schedule_t *self, int worker, uint64_t step)
{
    assert (self);
    size_t slot = s_slot_find (self, step);
    if (slot == S_NONE || self->slots [slot].worker != worker)
        return PS_EINVAL;
    s_unflight (self, slot);
    s_queue_push_front (self, step);
    return PS_OK;
}

static int
s_step_compare (const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a;
    uint64_t y = *(const uint64_t *) b;
    return (x > y) - (x < y);
}

size_t
ps_schedule_release_worker (ps_schedule_t *self, int worker)
{
    assert (self);
    if (worker < 0 || worker >= self->nworkers)
        return 0;
    s_worker_t *w = &self->workers [worker];
    size_t count = w->count;
    if (count == 0)
        return 0;       //  steps may be NULL, which qsort must not see
    //  Pushed at the front highest first, they come out lowest first.
    qsort (w->steps, count, sizeof (uint64_t), s_step_compare);
    for (size_t i = count; i-- > 0; ) {
        size_t slot = s_slot_find (self, w->steps [i]);
        assert (slot != S_NONE);
        s_slot_remove (self, slot);
        s_queue_push_front (self, w->steps [i]);
    }
    w->count = 0;
    self->in_flight -= count;
    return count;
}

size_t
ps_schedule_in_flight (const ps_schedule_t *self)
{
    assert (self);
    return self->in_flight;
}

size_t
ps_schedule_worker_in_flight (const ps_schedule_t *self, int worker)
{
    assert (self);
    if (worker < 0 || worker >= self->nworkers)
        return 0;
    return self->workers [worker].count;
}

uint64_t
ps_schedule_done_count (const ps_schedule_t *self)
{
    assert (self);
    return self->done_count;
}

bool
ps_schedule_finished (const ps_schedule_t *self)
{
    assert (self);
    return self->done_count == self->total;
}

bool
ps_schedule_is_done (const ps_schedule_t *self, uint64_t step)
{
    assert (self);
    return step >= 1 && step <= self->total && s_is_done (self, step);
}

bool
ps_schedule_epoch_done (const ps_schedule_t *self, uint64_t epoch)
{
    assert (self);
    if (epoch >= self->nepochs)
        return false;
    return self->epoch_done [epoch] == s_epoch_size (self, epoch);
}

int
ps_schedule_done_set (const ps_schedule_t *self, uint64_t *watermark, uint64_t **above,
                      size_t *count)
{
    assert (self);
    assert (watermark && above && count);
    *watermark = self->watermark;
    *above = NULL;
    *count = 0;
    size_t n = (size_t) (self->done_count - self->watermark);
    if (n == 0)
        return PS_OK;
    uint64_t *steps = malloc (n * sizeof (uint64_t));
    if (!steps)
        return PS_ETOOBIG;
    //  Every done step above the watermark lies between it and the top.
    uint64_t start = self->watermark + 1;
    size_t k = 0;
    for (uint64_t word = start / 64; word <= self->top / 64; word++) {
        uint64_t bits = self->done [word];
        if (word == start / 64)
            bits &= ~((UINT64_C (1) << (start % 64)) - 1);
        while (bits) {
            assert (k < n);
            steps [k++] = word * 64 + (uint64_t) __builtin_ctzll (bits);
            bits &= bits - 1;
        }
    }
    assert (k == n);
    *above = steps;
    *count = n;
    return PS_OK;
}

int
ps_schedule_restore (ps_schedule_t *self, uint64_t watermark, const uint64_t *above,
                     size_t count, ps_error_t *err)
{
    assert (self);
    if (watermark > self->total)
        return ps_error_set (err, PS_EINVAL,
                             "schedule: watermark %llu is past the last step %llu",
                             (unsigned long long) watermark, (unsigned long long) self->total);
    if (count > 0 && !above)
        return ps_error_set (err, PS_EINVAL,
                             "schedule: %zu done steps above the watermark but no list", count);
    for (size_t i = 0; i < count; i++) {
        uint64_t lower = i == 0 ? watermark : above [i - 1];
        if (above [i] <= lower)
            return ps_error_set (err, PS_EINVAL,
                                 "schedule: done step %zu is %llu, expected above %s %llu",
                                 i, (unsigned long long) above [i],
                                 i == 0 ? "the watermark" : "the previous step",
                                 (unsigned long long) lower);
        if (above [i] > self->total)
            return ps_error_set (err, PS_EINVAL,
                                 "schedule: done step %zu is %llu, past the last step %llu",
                                 i, (unsigned long long) above [i],
                                 (unsigned long long) self->total);
    }

    //  Valid: from here nothing can fail.
    size_t nwords = (size_t) (self->total / 64 + 1);
    memset (self->done, 0, nwords * sizeof (uint64_t));
    //  Steps 1..watermark are bits [1, watermark + 1): whole words, then
    //  the low bits of one more; bit 0 stays clear.
    uint64_t end = watermark + 1;
    memset (self->done, 0xff, (size_t) (end / 64) * sizeof (uint64_t));
    if (end % 64)
        self->done [end / 64] |= (UINT64_C (1) << (end % 64)) - 1;
    self->done [0] &= ~UINT64_C (1);
    for (uint64_t e = 0; e < self->nepochs; e++) {
        uint64_t first = e * self->batches + 1;
        uint64_t size = s_epoch_size (self, e);
        if (watermark >= first + size - 1)
            self->epoch_done [e] = size;
        else
            self->epoch_done [e] = watermark >= first ? watermark - first + 1 : 0;
    }
    for (size_t i = 0; i < count; i++) {
        self->done [above [i] / 64] |= UINT64_C (1) << (above [i] % 64);
        self->epoch_done [(above [i] - 1) / self->batches]++;
    }
    self->done_count = watermark + count;
    self->top = count > 0 ? above [count - 1] : watermark;
    //  A list that starts right above the watermark is accepted; the
    //  watermark then moves up over it.
    self->watermark = watermark;
    while (self->watermark < self->total && s_is_done (self, self->watermark + 1))
        self->watermark++;
    self->cursor = self->watermark + 1;

    //  Nothing is in flight and nothing is queued.
    self->queue_head = 0;
    self->queue_len = 0;
    if (self->slot_capacity)
        memset (self->slots, 0, self->slot_capacity * sizeof (s_slot_t));
    self->in_flight = 0;
    for (int w = 0; w < self->nworkers; w++)
        self->workers [w].count = 0;
    return PS_OK;
}
