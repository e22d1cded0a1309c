//  Partitioners and placement; see ps_partitioner.h.
//
//  The shard counts follow TensorFlow's Python code line by line, done in
//  integer arithmetic: min_max_variable_partitioner (MinSizePartitioner)
//  takes the ceiling of total bytes over min_slice_size, and
//  variable_axis_size_partitioner (MaxSizePartitioner) fits the floor of
//  max_shard_bytes over the bytes of one row into a shard, at least one
//  row, and takes the ceiling of the rows over that. TensorFlow computes
//  both in floating point; for the sizes a shape allows (at most 2^40
//  elements, so at most 2^42 bytes) the integer forms give the same result.

#include "ps_partitioner.h"

#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

//  float32 variables only.
#define S_ELEMENT_BYTES  4

//  TensorFlow's default min_slice_size for min_max_variable_partitioner.
#define S_DEFAULT_MIN_SHARD_BYTES  (INT64_C (256) << 10)

struct _ps_placement_t {
    int nvars;
    int nservers;
    ps_placed_var_t *vars;      //  nvars entries
    int64_t *splits;            //  every variable's splits, back to back
    int *servers;               //  every variable's servers, back to back
    int64_t *server_bytes;      //  nservers entries
};

//  One partition while placement sorts them.
typedef struct {
    int64_t bytes;
    int var;
    int part;
} s_part_t;

static const char *s_kind_names [] = { "fixed", "min_size", "max_size" };
#define S_NKINDS  ((int) (sizeof s_kind_names / sizeof s_kind_names [0]))

void
ps_partitioner_default (ps_partitioner_t *self, int nservers)
{
    assert (self);
    memset (self, 0, sizeof *self);
    self->kind = PS_PARTITIONER_MIN_SIZE;
    self->min_shard_bytes = S_DEFAULT_MIN_SHARD_BYTES;
    self->max_shards = nservers;
    self->chunk_bytes = PS_PARTITIONER_CHUNK_BYTES;
}

int
ps_partitioner_kind_parse (const char *name, ps_partitioner_kind_t *kind, ps_error_t *err)
{
    assert (kind);
    for (int i = 0; name && i < S_NKINDS; i++)
        if (strcmp (name, s_kind_names [i]) == 0) {
            *kind = (ps_partitioner_kind_t) i;
            return PS_OK;
        }
    return ps_error_set (err, PS_EINVAL,
                         "partitioner kind \"%s\" is unknown, expected fixed, min_size or max_size",
                         name ? name : "(null)");
}

const char *
ps_partitioner_kind_name (ps_partitioner_kind_t kind)
{
    if ((int) kind < 0 || (int) kind >= S_NKINDS)
        return "unknown";
    return s_kind_names [kind];
}

int
ps_partitioner_validate (const ps_partitioner_t *self, ps_error_t *err)
{
    assert (self);
    switch (self->kind) {
        case PS_PARTITIONER_FIXED:
            if (self->num_shards < 1)
                return ps_error_set (err, PS_EINVAL,
                                     "partitioner fixed: num_shards is %d, expected >= 1",
                                     self->num_shards);
            return PS_OK;
        case PS_PARTITIONER_MIN_SIZE:
            if (self->min_shard_bytes < 1)
                return ps_error_set (err, PS_EINVAL,
                                     "partitioner min_size: min_shard_bytes is %lld, expected >= 1",
                                     (long long) self->min_shard_bytes);
            if (self->max_shards < 1)
                return ps_error_set (err, PS_EINVAL,
                                     "partitioner min_size: max_shards is %d, expected >= 1",
                                     self->max_shards);
            if (self->chunk_bytes < 0)
                return ps_error_set (err, PS_EINVAL,
                                     "partitioner min_size: chunk_bytes is %lld, expected >= 0 "
                                     "(0: none)", (long long) self->chunk_bytes);
            return PS_OK;
        case PS_PARTITIONER_MAX_SIZE:
            if (self->max_shard_bytes < 1)
                return ps_error_set (err, PS_EINVAL,
                                     "partitioner max_size: max_shard_bytes is %lld, expected >= 1",
                                     (long long) self->max_shard_bytes);
            if (self->max_shards < 0)
                return ps_error_set (err, PS_EINVAL,
                                     "partitioner max_size: max_shards is %d, expected >= 0 (0: no cap)",
                                     self->max_shards);
            return PS_OK;
    }
    return ps_error_set (err, PS_EINVAL,
                         "partitioner kind is %d, expected fixed, min_size or max_size",
                         (int) self->kind);
}

//  MaxSizePartitioner's count: shards of whole rows, at least one each, so
//  a row larger than max_bytes is a shard of its own.
static int64_t
s_max_size_shards (int64_t rows, int64_t row_bytes, int64_t max_bytes)
{
    int64_t rows_per_shard = max_bytes / row_bytes;
    if (rows_per_shard < 1)
        rows_per_shard = 1;
    return rows / rows_per_shard + (rows % rows_per_shard != 0);
}

int
ps_partitioner_shards (const ps_partitioner_t *self, const ps_shape_t *shape)
{
    assert (self);
    assert (shape);
    assert (shape->rank >= 1 && shape->dims [0] >= 1);
    int64_t rows = shape->dims [0];
    int64_t row_bytes = ps_shape_row_count (shape) * S_ELEMENT_BYTES;
    int64_t shards = 1;
    switch (self->kind) {
        case PS_PARTITIONER_FIXED:
            assert (self->num_shards >= 1);
            shards = rows < self->num_shards ? rows : self->num_shards;
            break;
        case PS_PARTITIONER_MIN_SIZE: {
            assert (self->min_shard_bytes >= 1 && self->max_shards >= 1);
            int64_t bytes = rows * row_bytes;
            //  The ceiling, as TensorFlow takes it: a variable a little over
            //  min_shard_bytes gets two shards, each under the minimum.
            shards = bytes / self->min_shard_bytes + (bytes % self->min_shard_bytes != 0);
            if (shards > rows)
                shards = rows;
            if (shards > self->max_shards)
                shards = self->max_shards;
            if (shards < 1)
                shards = 1;
            if (self->chunk_bytes > 0) {
                int64_t chunks = s_max_size_shards (rows, row_bytes, self->chunk_bytes);
                if (chunks > shards)
                    shards = chunks;
            }
            break;
        }
        case PS_PARTITIONER_MAX_SIZE: {
            assert (self->max_shard_bytes >= 1 && self->max_shards >= 0);
            shards = s_max_size_shards (rows, row_bytes, self->max_shard_bytes);
            if (self->max_shards > 0 && shards > self->max_shards)
                shards = self->max_shards;
            break;
        }
        default:
            assert (!"invalid partitioner kind");
    }
    //  Only an uncapped max_size on a variable of more than 2^31 rows can
    //  ask for more; such a placement could not be allocated anyway.
    return shards > INT_MAX ? INT_MAX : (int) shards;
}

void
ps_partitioner_splits (int64_t n, int k, int64_t *splits)
{
    assert (n >= 0);
    assert (k >= 1);
    assert (splits);
    int64_t base = n / k;
    int64_t extra = n % k;
    splits [0] = 0;
    for (int i = 0; i < k; i++)
        splits [i + 1] = splits [i] + base + (i < extra ? 1 : 0);
}

//  Largest first; equal sizes in variable order, then partition order. The
//  order is total, so qsort's instability cannot change the placement.
static int
s_part_compare (const void *a, const void *b)
{
    const s_part_t *x = a;
    const s_part_t *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->var != y->var)
        return x->var < y->var ? -1 : 1;
    return (x->part > y->part) - (x->part < y->part);
}

void
ps_placement_destroy (ps_placement_t **self_p)
{
    assert (self_p);
    if (*self_p) {
        ps_placement_t *self = *self_p;
        free (self->vars);
        free (self->splits);
        free (self->servers);
        free (self->server_bytes);
        free (self);
        *self_p = NULL;
    }
}

//  Check one variable's shape: the partitioner arithmetic relies on the
//  limits ps_shape_set enforces (positive dimensions, at most 2^40
//  elements).
static int
s_check_shape (const ps_shape_t *shape, int i, ps_error_t *err)
{
    if (shape->rank < 1 || shape->rank > PS_MAX_RANK)
        return ps_error_set (err, PS_ESHAPE, "placement: variable %d has rank %d, expected 1..%d",
                             i, shape->rank, PS_MAX_RANK);
    ps_shape_t copy;
    int rc = ps_shape_set (&copy, shape->dims, shape->rank, err);
    if (rc)
        return ps_error_prefix (err, rc, "placement: variable %d", i);
    return PS_OK;
}

ps_placement_t *
ps_placement_new (const ps_partitioner_t *partitioner, const ps_shape_t *shapes, int nvars,
                  int nservers, ps_error_t *err)
{
    assert (partitioner);
    if (ps_partitioner_validate (partitioner, err))
        return NULL;
    if (nservers < 1) {
        ps_error_set (err, PS_EINVAL, "placement: %d servers, expected at least 1", nservers);
        return NULL;
    }
    if (nvars < 0 || (nvars > 0 && !shapes)) {
        ps_error_set (err, PS_EINVAL, "placement: %d variables%s, expected >= 0 with their shapes",
                      nvars, shapes ? "" : " and no shapes");
        return NULL;
    }
    //  Count the partitions first, so that everything is allocated in a
    //  few blocks and a failure leaves nothing behind.
    size_t nparts = 0;
    for (int i = 0; i < nvars; i++) {
        if (s_check_shape (&shapes [i], i, err))
            return NULL;
        nparts += (size_t) ps_partitioner_shards (partitioner, &shapes [i]);
    }
    if (nparts > INT_MAX) {
        ps_error_set (err, PS_ETOOBIG, "placement: %zu partitions, expected at most %d",
                      nparts, INT_MAX);
        return NULL;
    }

    ps_placement_t *self = calloc (1, sizeof *self);
    s_part_t *parts = malloc ((nparts ? nparts : 1) * sizeof (s_part_t));
    if (self) {
        self->nvars = nvars;
        self->nservers = nservers;
        self->vars = calloc (nvars ? (size_t) nvars : 1, sizeof (ps_placed_var_t));
        self->splits = malloc ((nparts + (size_t) nvars + 1) * sizeof (int64_t));
        self->servers = malloc ((nparts ? nparts : 1) * sizeof (int));
        self->server_bytes = calloc ((size_t) nservers, sizeof (int64_t));
    }
    if (!self || !parts || !self->vars || !self->splits || !self->servers
    ||  !self->server_bytes) {
        ps_error_set (err, PS_ETOOBIG, "placement: cannot allocate %zu partitions of %d variables",
                      nparts, nvars);
        free (parts);
        ps_placement_destroy (&self);
        return NULL;
    }

    //  Split every variable and list its partitions with their sizes.
    size_t next_split = 0;
    size_t next_part = 0;
    for (int i = 0; i < nvars; i++) {
        ps_placed_var_t *var = &self->vars [i];
        int k = ps_partitioner_shards (partitioner, &shapes [i]);
        int64_t row_bytes = ps_shape_row_count (&shapes [i]) * S_ELEMENT_BYTES;
        var->nparts = k;
        var->splits = self->splits + next_split;
        var->servers = self->servers + next_part;
        ps_partitioner_splits (shapes [i].dims [0], k, var->splits);
        for (int p = 0; p < k; p++) {
            s_part_t *part = &parts [next_part + (size_t) p];
            part->bytes = (var->splits [p + 1] - var->splits [p]) * row_bytes;
            part->var = i;
            part->part = p;
        }
        next_split += (size_t) k + 1;
        next_part += (size_t) k;
    }

    //  Greedy balancing: each partition, largest first, to the server with
    //  the fewest bytes so far. A linear scan over the servers is enough for
    //  the tens of servers and thousands of partitions a job has.
    qsort (parts, nparts, sizeof (s_part_t), s_part_compare);
    for (size_t j = 0; j < nparts; j++) {
        int best = 0;
        for (int s = 1; s < nservers; s++)
            if (self->server_bytes [s] < self->server_bytes [best])
                best = s;
        self->vars [parts [j].var].servers [parts [j].part] = best;
        self->server_bytes [best] += parts [j].bytes;
    }
    free (parts);
    return self;
}

const ps_placed_var_t *
ps_placement_var (const ps_placement_t *self, int i)
{
    assert (self);
    assert (i >= 0 && i < self->nvars);
    return &self->vars [i];
}

int64_t
ps_placement_server_bytes (const ps_placement_t *self, int s)
{
    assert (self);
    assert (s >= 0 && s < self->nservers);
    return self->server_bytes [s];
}
