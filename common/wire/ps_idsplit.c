//  A batch's ids split over the servers; see ps_idsplit.h.

#include "ps_idsplit.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

struct _ps_idsplit_t {
    uint32_t nshards;
    uint64_t shard_seed;
    size_t n, capacity;         //  ids split, and room for
    uint64_t *grouped;          //  the ids, server by server, batch order within
    uint32_t *shard;            //  per batch position: its server
    size_t *slot;               //  per batch position: its index in grouped
    size_t *begin;              //  per server: where its ids start in grouped (nshards + 1)
};

ps_idsplit_t *
ps_idsplit_new (uint32_t nshards, uint64_t shard_seed)
{
    assert (nshards >= 1);
    ps_idsplit_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->nshards = nshards;
    self->shard_seed = shard_seed;
    self->begin = calloc ((size_t) nshards + 1, sizeof *self->begin);
    if (!self->begin)
        abort ();
    return self;
}

void
ps_idsplit_destroy (ps_idsplit_t **self_p)
{
    assert (self_p);
    ps_idsplit_t *self = *self_p;
    if (!self)
        return;
    free (self->grouped);
    free (self->shard);
    free (self->slot);
    free (self->begin);
    free (self);
    *self_p = NULL;
}

void
ps_idsplit_split (ps_idsplit_t *self, const uint64_t *ids, size_t n)
{
    assert (self);
    if (n > self->capacity) {
        free (self->grouped);
        free (self->shard);
        free (self->slot);
        self->grouped = malloc (n * sizeof *self->grouped);
        self->shard = malloc (n * sizeof *self->shard);
        self->slot = malloc (n * sizeof *self->slot);
        if (!self->grouped || !self->shard || !self->slot)
            abort ();
        self->capacity = n;
    }
    self->n = n;
    //  A counting sort by server: count, then place, which keeps each
    //  server's ids in batch order.
    memset (self->begin, 0, ((size_t) self->nshards + 1) * sizeof *self->begin);
    for (size_t i = 0; i < n; i++) {
        self->shard [i] = ps_tablespec_shard_of (ids [i], self->shard_seed, self->nshards);
        self->begin [self->shard [i] + 1]++;
    }
    for (uint32_t s = 0; s < self->nshards; s++)
        self->begin [s + 1] += self->begin [s];
    for (size_t i = 0; i < n; i++) {
        //  begin [s] serves as server s's cursor here, and is put back below.
        size_t at = self->begin [self->shard [i]]++;
        self->grouped [at] = ids [i];
        self->slot [i] = at;
    }
    for (uint32_t s = self->nshards; s > 0; s--)
        self->begin [s] = self->begin [s - 1];
    self->begin [0] = 0;
}

const uint64_t *
ps_idsplit_ids (ps_idsplit_t *self, uint32_t shard, size_t *count)
{
    assert (self && shard < self->nshards);
    *count = self->begin [shard + 1] - self->begin [shard];
    return self->grouped + self->begin [shard];
}

void
ps_idsplit_gather (ps_idsplit_t *self, const float *const *rows, uint32_t dim, float *out)
{
    assert (self);
    for (size_t i = 0; i < self->n; i++) {
        uint32_t s = self->shard [i];
        const float *row = rows [s] + (self->slot [i] - self->begin [s]) * dim;
        memcpy (out + i * dim, row, dim * sizeof (float));
    }
}

void
ps_idsplit_scatter (ps_idsplit_t *self, const float *grads, uint32_t dim, float *const *out)
{
    assert (self);
    for (size_t i = 0; i < self->n; i++) {
        uint32_t s = self->shard [i];
        float *row = out [s] + (self->slot [i] - self->begin [s]) * dim;
        memcpy (row, grads + i * dim, dim * sizeof (float));
    }
}
