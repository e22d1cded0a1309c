//  The embedding table shards of a ps-server; see ps_tables.h.

#include "ps_tables.h"
#include "ps_snapshot.h"

#include <assert.h>
#include <errno.h>
#include <czmq.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct _ps_tshard_t {
    ps_sparse_t *table;
    uint32_t shard, shards;
    uint64_t shard_seed;
    atomic_int refs;
    atomic_uint_fast64_t nonfinite;
    char last_full [PATH_MAX];  //  serving thread only
};

struct _ps_tables_t {
    zhashx_t *shards;           //  table name -> ps_tshard_t *
    uint64_t budget;            //  bytes the tables may hold, 0: no limit
    atomic_uint_fast64_t reserved;  //  bytes reserved by pushes in progress
};

ps_tshard_t *
ps_tshard_new (ps_sparse_t *table, uint32_t shard, uint32_t shards)
{
    assert (table && shard < shards);
    ps_tshard_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->table = table;
    self->shard = shard;
    self->shards = shards;
    self->shard_seed = ps_sparse_spec (table)->shard_seed;
    atomic_init (&self->refs, 1);
    atomic_init (&self->nonfinite, 0);
    return self;
}

ps_tshard_t *
ps_tshard_link (ps_tshard_t *self)
{
    assert (self);
    atomic_fetch_add (&self->refs, 1);
    return self;
}

void
ps_tshard_unlink (ps_tshard_t **self_p)
{
    assert (self_p);
    ps_tshard_t *self = *self_p;
    if (!self)
        return;
    if (atomic_fetch_sub (&self->refs, 1) == 1) {
        ps_sparse_destroy (&self->table);
        free (self);
    }
    *self_p = NULL;
}

ps_sparse_t *
ps_tshard_table (ps_tshard_t *self)
{
    assert (self);
    return self->table;
}

const char *
ps_tshard_name (ps_tshard_t *self)
{
    assert (self);
    return ps_sparse_spec (self->table)->name;
}

uint32_t
ps_tshard_dim (ps_tshard_t *self)
{
    assert (self);
    return ps_sparse_spec (self->table)->dim;
}

uint32_t
ps_tshard_shard (ps_tshard_t *self)
{
    assert (self);
    return self->shard;
}

uint32_t
ps_tshard_shards (ps_tshard_t *self)
{
    assert (self);
    return self->shards;
}

bool
ps_tshard_holds (ps_tshard_t *self, uint64_t id)
{
    return ps_tablespec_shard_of (id, self->shard_seed, self->shards) == self->shard;
}

const char *
ps_tshard_last_full (ps_tshard_t *self)
{
    assert (self);
    return self->last_full;
}

void
ps_tshard_set_last_full (ps_tshard_t *self, const char *dir)
{
    assert (self);
    snprintf (self->last_full, sizeof self->last_full, "%s", dir);
}

void
ps_tshard_count_nonfinite (ps_tshard_t *self)
{
    assert (self);
    atomic_fetch_add (&self->nonfinite, 1);
}

uint64_t
ps_tshard_nonfinite (ps_tshard_t *self)
{
    assert (self);
    return atomic_load (&self->nonfinite);
}

//  ---------------------------------------------------------------------
//  The registry

static void
s_tshard_free (void **item)
{
    ps_tshard_unlink ((ps_tshard_t **) item);
}

ps_tables_t *
ps_tables_new (void)
{
    ps_tables_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->shards = zhashx_new ();
    if (!self->shards)
        abort ();
    zhashx_set_destructor (self->shards, s_tshard_free);
    atomic_init (&self->reserved, 0);
    return self;
}

void
ps_tables_destroy (ps_tables_t **self_p)
{
    assert (self_p);
    ps_tables_t *self = *self_p;
    if (self) {
        zhashx_destroy (&self->shards);
        free (self);
        *self_p = NULL;
    }
}

ps_tshard_t *
ps_tables_lookup (ps_tables_t *self, const char *name)
{
    assert (self);
    return zhashx_lookup (self->shards, name);
}

void
ps_tables_put (ps_tables_t *self, ps_tshard_t *tshard)
{
    assert (self);
    zhashx_update (self->shards, ps_tshard_name (tshard), tshard);
}

size_t
ps_tables_size (ps_tables_t *self)
{
    assert (self);
    return zhashx_size (self->shards);
}

uint64_t
ps_tables_budget (ps_tables_t *self)
{
    assert (self);
    return self->budget;
}

void
ps_tables_set_budget (ps_tables_t *self, uint64_t budget)
{
    assert (self);
    self->budget = budget;
}

uint64_t
ps_tables_bytes (ps_tables_t *self)
{
    assert (self);
    uint64_t bytes = atomic_load (&self->reserved);
    for (ps_tshard_t *tshard = zhashx_first (self->shards); tshard;
         tshard = zhashx_next (self->shards)) {
        ps_sparse_stats_t stats;
        ps_sparse_stats (tshard->table, &stats);
        bytes += stats.bytes;
    }
    return bytes;
}

void
ps_tables_reserve (ps_tables_t *self, uint64_t bytes)
{
    assert (self);
    atomic_fetch_add (&self->reserved, bytes);
}

void
ps_tables_release (ps_tables_t *self, uint64_t bytes)
{
    assert (self);
    assert (atomic_load (&self->reserved) >= bytes);
    atomic_fetch_sub (&self->reserved, bytes);
}

static int
s_tshard_cmp (const void *a, const void *b)
{
    return strcmp (ps_tshard_name (*(ps_tshard_t *const *) a),
                   ps_tshard_name (*(ps_tshard_t *const *) b));
}

ps_tshard_t **
ps_tables_sorted (ps_tables_t *self, size_t *count)
{
    assert (self);
    *count = zhashx_size (self->shards);
    ps_tshard_t **list = calloc (*count + 1, sizeof *list);
    if (!list)
        abort ();
    size_t i = 0;
    for (ps_tshard_t *tshard = zhashx_first (self->shards); tshard;
         tshard = zhashx_next (self->shards))
        list [i++] = tshard;
    qsort (list, *count, sizeof *list, s_tshard_cmp);
    return list;
}

//  ---------------------------------------------------------------------
//  Snapshot file names

#define S_FULL_SUFFIX  ".full.table"
#define S_INCR_SUFFIX  ".incr.table"

int
ps_tables_filename (const char *name, uint32_t shard, uint32_t shards, bool full, char *buf,
                    size_t len)
{
    int used = ps_snapshot_escape (name, buf, len);
    if (used < 0)
        return PS_EINVAL;
    int n = snprintf (buf + used, len - (size_t) used, ".shard%" PRIu32 "of%" PRIu32 "%s",
                      shard, shards, full ? S_FULL_SUFFIX : S_INCR_SUFFIX);
    return n < 0 || (size_t) n >= len - (size_t) used ? PS_EINVAL : PS_OK;
}

//  Read a decimal uint32 at *p, moving *p past it.
static bool
s_parse_u32 (const char **p, uint32_t *value)
{
    if (**p < '0' || **p > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long n = strtoull (*p, &end, 10);
    if (errno || n > UINT32_MAX)
        return false;
    *value = (uint32_t) n;
    *p = end;
    return true;
}

bool
ps_tables_parse_filename (const char *file, uint32_t *shard, uint32_t *shards, bool *full)
{
    size_t len = strlen (file);
    size_t suffix = strlen (S_FULL_SUFFIX);     //  both suffixes are as long
    if (len <= suffix || file [0] == '.')
        return false;
    if (strcmp (file + len - suffix, S_FULL_SUFFIX) == 0)
        *full = true;
    else
    if (strcmp (file + len - suffix, S_INCR_SUFFIX) == 0)
        *full = false;
    else
        return false;
    //  The name may hold ".shard" too, but the suffix comes after it: the
    //  last one is the suffix's.
    const char *at = NULL;
    for (const char *p = strstr (file, ".shard"); p; p = strstr (p + 1, ".shard"))
        at = p;
    if (!at)
        return false;
    const char *p = at + strlen (".shard");
    if (!s_parse_u32 (&p, shard) || strncmp (p, "of", 2) != 0)
        return false;
    p += 2;
    if (!s_parse_u32 (&p, shards) || p != file + len - suffix)
        return false;
    return *shard < *shards;
}

ps_tshard_t *
ps_tables_lookup_file (ps_tables_t *self, const char *file)
{
    assert (self);
    uint32_t shard, shards;
    bool full;
    if (!ps_tables_parse_filename (file, &shard, &shards, &full))
        return NULL;
    //  Names are escaped into file names, not back: the held table whose
    //  name gives this file name (with the file's shard and kind) is it.
    char name [PATH_MAX];
    for (ps_tshard_t *tshard = zhashx_first (self->shards); tshard;
         tshard = zhashx_next (self->shards))
        if (ps_tables_filename (ps_tshard_name (tshard), shard, shards, full, name,
                                sizeof name) == PS_OK
        &&  strcmp (name, file) == 0)
            return tshard;
    return NULL;
}

int
ps_tables_full_filename (const char *incr_file, char *buf, size_t len)
{
    uint32_t shard, shards;
    bool full;
    if (!ps_tables_parse_filename (incr_file, &shard, &shards, &full) || full)
        return PS_EINVAL;
    size_t stem = strlen (incr_file) - strlen (S_INCR_SUFFIX);
    int n = snprintf (buf, len, "%.*s%s", (int) stem, incr_file, S_FULL_SUFFIX);
    return n < 0 || (size_t) n >= len ? PS_EINVAL : PS_OK;
}
