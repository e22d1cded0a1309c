//  Batches of CTR examples (ps_ctrbatch.h).

#include "ps_ctrbatch.h"

#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

//  Ids a LIBSVM batch starts with room for, per example; more are made as
//  lines need them.
#define S_LIBSVM_IDS_PER_EXAMPLE 64

//  The largest batch: offsets are 32-bit, and a batch of this many Criteo
//  examples has 26 ids each.
#define S_MAX_EXAMPLES (UINT32_MAX / 64)

int
ps_ctrformat_parse (const char *name, ps_ctrformat_t *format, ps_error_t *err)
{
    if (strcmp (name, "criteo") == 0)
        *format = PS_CTR_CRITEO;
    else
    if (strcmp (name, "libsvm") == 0)
        *format = PS_CTR_LIBSVM;
    else
        return ps_error_set (err, PS_EINVAL, "data format \"%s\": expected criteo or libsvm",
                             name);
    return 0;
}

const char *
ps_ctrformat_name (ps_ctrformat_t format)
{
    return format == PS_CTR_CRITEO ? "criteo" : "libsvm";
}

ps_ctrbatch_t *
ps_ctrbatch_new (ps_ctrformat_t format, size_t max_n, ps_error_t *err)
{
    if (max_n == 0 || max_n > S_MAX_EXAMPLES) {
        ps_error_set (err, PS_EINVAL, "CTR batch: room for %zu examples, expected 1..%u", max_n,
                      (unsigned) S_MAX_EXAMPLES);
        return NULL;
    }
    ps_ctrbatch_t *self = calloc (1, sizeof (ps_ctrbatch_t));
    if (!self) {
        ps_error_set (err, PS_ETOOBIG, "CTR batch: out of memory");
        return NULL;
    }
    bool criteo = format == PS_CTR_CRITEO;
    self->format = format;
    self->max_n = max_n;
    self->ndense = criteo ? PS_CTR_CRITEO_DENSE : 0;
    self->nfields = criteo ? PS_CTR_CRITEO_FIELDS : 1;
    self->ids_capacity = max_n * (criteo ? PS_CTR_CRITEO_FIELDS : S_LIBSVM_IDS_PER_EXAMPLE);
    self->labels = malloc (max_n * sizeof (float));
    //  malloc (0) may give NULL: ask for one float where there are none.
    self->dense = malloc ((max_n * self->ndense + 1) * sizeof (float));
    self->offsets = malloc ((max_n * self->nfields + 1) * sizeof (uint32_t));
    self->ids = malloc (self->ids_capacity * sizeof (uint64_t));
    if (!criteo)
        self->weights = malloc (self->ids_capacity * sizeof (float));
    if (!self->labels || !self->dense || !self->offsets || !self->ids
        || (!criteo && !self->weights)) {
        ps_ctrbatch_destroy (&self);
        ps_error_set (err, PS_ETOOBIG, "CTR batch: out of memory for %zu examples", max_n);
        return NULL;
    }
    ps_ctrbatch_clear (self, 0);
    return self;
}

void
ps_ctrbatch_destroy (ps_ctrbatch_t **self_p)
{
    assert (self_p);
    ps_ctrbatch_t *self = *self_p;
    if (self) {
        free (self->labels);
        free (self->dense);
        free (self->offsets);
        free (self->ids);
        free (self->weights);
        free (self);
        *self_p = NULL;
    }
}

void
ps_ctrbatch_clear (ps_ctrbatch_t *self, uint64_t first_line)
{
    assert (self);
    self->n = 0;
    self->offsets [0] = 0;
    self->first_line = first_line;
    self->lines = 0;
    self->malformed = 0;
}

int
ps_ctrbatch_reserve_ids (ps_ctrbatch_t *self, size_t more, ps_error_t *err)
{
    assert (self);
    size_t held = self->offsets [self->n * self->nfields];
    if (more <= self->ids_capacity - held)
        return 0;
    size_t capacity = self->ids_capacity;
    while (capacity - held < more) {
        if (capacity > UINT32_MAX / 2)
            return ps_error_set (err, PS_ETOOBIG, "CTR batch: more than %u ids",
                                 (unsigned) UINT32_MAX);
        capacity *= 2;
    }
    uint64_t *ids = realloc (self->ids, capacity * sizeof (uint64_t));
    if (!ids)
        return ps_error_set (err, PS_ETOOBIG, "CTR batch: out of memory for %zu ids", capacity);
    self->ids = ids;
    if (self->weights) {
        float *weights = realloc (self->weights, capacity * sizeof (float));
        if (!weights)
            return ps_error_set (err, PS_ETOOBIG, "CTR batch: out of memory for %zu weights",
                                 capacity);
        self->weights = weights;
    }
    self->ids_capacity = capacity;
    return 0;
}
