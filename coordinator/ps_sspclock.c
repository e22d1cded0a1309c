//  The clock of ssp mode; see ps_sspclock.h.

#include "ps_sspclock.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    bool live;
    bool away;                  //  live, and evaluating: not counted
    uint64_t clock;             //  steps finished
} s_worker_t;

struct _ps_sspclock_t {
    uint32_t count;
    uint32_t staleness;
    s_worker_t *workers;
    uint64_t histogram [PS_SSPCLOCK_BUCKETS];
    uint64_t widest;            //  the largest lead seen at a start
};

ps_sspclock_t *
ps_sspclock_new (uint32_t workers, uint32_t staleness)
{
    ps_sspclock_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->count = workers;
    self->staleness = staleness;
    self->workers = calloc (workers ? workers : 1, sizeof *self->workers);
    if (!self->workers)
        abort ();
    return self;
}

void
ps_sspclock_destroy (ps_sspclock_t **self_p)
{
    assert (self_p);
    ps_sspclock_t *self = *self_p;
    if (self) {
        free (self->workers);
        free (self);
        *self_p = NULL;
    }
}

//  The slowest clock of the live workers that are not away, and whether
//  there is one. A linear scan: a cluster has tens of workers, and the
//  loop asks once per step hand-out.
static bool
s_slowest (const ps_sspclock_t *self, uint64_t *slowest)
{
    bool any = false;
    *slowest = 0;
    for (uint32_t i = 0; i < self->count; i++)
        if (self->workers [i].live && !self->workers [i].away
        &&  (!any || self->workers [i].clock < *slowest)) {
            *slowest = self->workers [i].clock;
            any = true;
        }
    return any;
}

void
ps_sspclock_join (ps_sspclock_t *self, uint32_t w)
{
    assert (self && w < self->count);
    if (self->workers [w].live)
        return;
    uint64_t slowest;
    self->workers [w].clock = s_slowest (self, &slowest) ? slowest : 0;
    self->workers [w].live = true;
    self->workers [w].away = false;
}

void
ps_sspclock_leave (ps_sspclock_t *self, uint32_t w)
{
    assert (self && w < self->count);
    self->workers [w].live = false;
    self->workers [w].away = false;
}

void
ps_sspclock_away (ps_sspclock_t *self, uint32_t w, bool away)
{
    assert (self && w < self->count);
    s_worker_t *worker = &self->workers [w];
    if (!worker->live || worker->away == away)
        return;
    uint64_t slowest;
    if (!away && s_slowest (self, &slowest) && worker->clock < slowest)
        worker->clock = slowest;
    worker->away = away;
}

bool
ps_sspclock_may_start (const ps_sspclock_t *self, uint32_t w)
{
    assert (self && w < self->count && self->workers [w].live && !self->workers [w].away);
    if (self->staleness == PS_SSPCLOCK_UNBOUNDED)
        return true;
    uint64_t slowest;
    s_slowest (self, &slowest);
    return self->workers [w].clock - slowest <= self->staleness;
}

void
ps_sspclock_started (ps_sspclock_t *self, uint32_t w)
{
    assert (self && w < self->count && self->workers [w].live && !self->workers [w].away);
    uint64_t slowest;
    s_slowest (self, &slowest);
    uint64_t lead = self->workers [w].clock - slowest;
    self->histogram [lead < PS_SSPCLOCK_BUCKETS - 1 ? lead : PS_SSPCLOCK_BUCKETS - 1]++;
    if (lead > self->widest)
        self->widest = lead;
}

void
ps_sspclock_finished (ps_sspclock_t *self, uint32_t w)
{
    assert (self && w < self->count);
    self->workers [w].clock++;
}

uint64_t
ps_sspclock_of (const ps_sspclock_t *self, uint32_t w)
{
    assert (self && w < self->count);
    return self->workers [w].clock;
}

uint64_t
ps_sspclock_slowest (const ps_sspclock_t *self)
{
    assert (self);
    uint64_t slowest;
    s_slowest (self, &slowest);
    return slowest;
}

uint64_t
ps_sspclock_histogram (const ps_sspclock_t *self, uint64_t counts [PS_SSPCLOCK_BUCKETS])
{
    assert (self);
    memcpy (counts, self->histogram, sizeof self->histogram);
    return self->widest;
}
