//  The id map; see ps_idmap.h.
//
//  An open-addressing hash table with linear probing over a power-of-two
//  number of slots, at most half full. A slot holds the position of its id
//  in the list of distinct ids and the generation of the batch that filled
//  it: a slot of an older generation is empty, so a reset only moves the
//  generation on (and clears the slots when the counter wraps, once in
//  2^32 resets).

#include "ps_idmap.h"

#include <stdlib.h>
#include <string.h>

#include "ps_mix.h"

#define S_MIN_CAPACITY  64

typedef struct {
    uint32_t generation;
    uint32_t position;
} s_slot_t;

struct _ps_idmap_t {
    uint64_t *ids;              //  the distinct ids, capacity of them
    size_t count;
    size_t capacity;
    s_slot_t *slots;            //  2 * capacity of them
    size_t mask;                //  slots - 1
    uint32_t generation;        //  the current one; never 0, the empty slots' mark
};

//  The smallest power of two >= n.
static size_t
s_pow2 (size_t n)
{
    size_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

//  The slot for id: its own, or the empty one where it goes.
static size_t
s_probe (const ps_idmap_t *self, const uint64_t *ids, uint64_t id)
{
    size_t at = (size_t) ps_mix64 (id) & self->mask;
    while (self->slots [at].generation == self->generation
       &&  ids [self->slots [at].position] != id)
        at = (at + 1) & self->mask;
    return at;
}

//  Room for capacity distinct ids, the ids held so far kept in place.
//  Returns 0 or PS_ETOOBIG, changing nothing.
static int
s_grow (ps_idmap_t *self, size_t capacity)
{
    size_t nslots = 2 * capacity;
    uint64_t *ids = malloc (capacity * sizeof *ids);
    s_slot_t *slots = calloc (nslots, sizeof *slots);
    if (!ids || !slots) {
        free (ids);
        free (slots);
        return PS_ETOOBIG;
    }
    if (self->count)
        memcpy (ids, self->ids, self->count * sizeof *ids);
    free (self->ids);
    free (self->slots);
    self->ids = ids;
    self->slots = slots;
    self->capacity = capacity;
    self->mask = nslots - 1;
    self->generation = 1;
    for (size_t i = 0; i < self->count; i++) {
        size_t at = s_probe (self, ids, ids [i]);
        self->slots [at] = (s_slot_t) { self->generation, (uint32_t) i };
    }
    return 0;
}

ps_idmap_t *
ps_idmap_new (size_t capacity)
{
    ps_idmap_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    if (capacity > ((size_t) UINT32_MAX + 1) / 2)
        capacity = ((size_t) UINT32_MAX + 1) / 2;
    if (s_grow (self, s_pow2 (capacity < S_MIN_CAPACITY ? S_MIN_CAPACITY : capacity))) {
        free (self);
        return NULL;
    }
    return self;
}

void
ps_idmap_destroy (ps_idmap_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ps_idmap_t *self = *self_p;
    free (self->ids);
    free (self->slots);
    free (self);
    *self_p = NULL;
}

void
ps_idmap_reset (ps_idmap_t *self)
{
    self->count = 0;
    if (++self->generation == 0) {
        memset (self->slots, 0, (self->mask + 1) * sizeof *self->slots);
        self->generation = 1;
    }
}

int
ps_idmap_add (ps_idmap_t *self, const uint64_t *ids, size_t n, uint32_t *index,
              ps_error_t *err)
{
    //  At most n new ids: make room for all of them first, so that the
    //  loop below cannot fail half way.
    if (n > (size_t) UINT32_MAX - self->count)
        return ps_error_set (err, PS_ETOOBIG, "id map: %zu ids and %zu more are more than "
                             "2^32 - 1", self->count, n);
    if (self->count + n > self->capacity
    &&  s_grow (self, s_pow2 (self->count + n)))
        return ps_error_set (err, PS_ETOOBIG, "id map: out of memory for %zu ids",
                             self->count + n);
    for (size_t i = 0; i < n; i++) {
        size_t at = s_probe (self, self->ids, ids [i]);
        if (self->slots [at].generation != self->generation) {
            self->ids [self->count] = ids [i];
            self->slots [at] = (s_slot_t) { self->generation, (uint32_t) self->count };
            self->count++;
        }
        index [i] = self->slots [at].position;
    }
    return 0;
}

size_t
ps_idmap_count (const ps_idmap_t *self)
{
    return self->count;
}

const uint64_t *
ps_idmap_ids (const ps_idmap_t *self)
{
    return self->ids;
}
