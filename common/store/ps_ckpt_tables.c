//  A checkpoint's embedding tables: see ps_ckpt_tables.h.

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_bytes.h"
#include "ps_checkpoint.h"
#include "ps_ckpt_layout.h"
#include "ps_ckpt_tables.h"
#include "ps_ckpt_verify.h"
#include "ps_sparse_file.h"

//  Rows go to the output as they lie in the files: little-endian float32.
_Static_assert (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
                "table rows are copied from the files as they are");

//  Where a row's value starts in a file's row: after its id, last step and
//  update count (schemas/checkpoint.md).
#define S_VALUE_AT  24

//  One live row: its id and where its row lies in a mapped file.
typedef struct {
    uint64_t id;
    const uint8_t *row;
} s_row_t;

//  One shard's files: the full one, and the incremental one on top.
typedef struct {
    char full_path [PATH_MAX];
    char incr_path [PATH_MAX];
    ps_sparse_file_t full, incr;
    bool has_incr;
    bool open;
} s_shard_t;

typedef struct {
    ps_tablespec_t spec;
    s_shard_t *shards;
    s_row_t *rows;              //  sorted by id
    uint64_t nrows;
    char ids_name [PS_NAME_MAX + 16];
    char embeddings_name [PS_NAME_MAX + 16];
} s_table_t;

struct _ps_ckpt_tables_t {
    char dir [PATH_MAX];
    s_table_t *tables;
    int count;
    uint32_t nshards;
};

//  The manifest's file entry of table name's shard k (full ones only when
//  full_only), or NULL.
static const json_t *
s_find_file (const json_t *manifest, const char *name, uint32_t k, bool full_only)
{
    size_t at;
    const json_t *entry;
    json_array_foreach (json_object_get (json_object_get (manifest, "tables"), "files"), at,
                        entry) {
        const char *table = json_string_value (json_object_get (entry, "table"));
        if (table && strcmp (table, name) == 0
        &&  json_integer_value (json_object_get (entry, "shard")) == (json_int_t) k
        &&  (!full_only || json_is_true (json_object_get (entry, "full"))))
            return entry;
    }
    return NULL;
}

//  The path of an entry's file in dir, after checking that the manifest
//  names a plain file.
static int
s_entry_path (char *buf, size_t len, const char *dir, const json_t *entry, const char *table,
              uint32_t k, ps_error_t *err)
{
    const char *file = json_string_value (json_object_get (entry, "file"));
    if (!file || !ps_ckpt_layout_plain_name (file))
        return ps_error_set (err, PS_EINVAL, "checkpoint %s: table \"%s\" shard %u: the "
                             "manifest names no plain file name", dir, table, k);
    return ps_ckpt_layout_join (buf, len, dir, file, err);
}

//  The base checkpoint an incremental one names, verified: its directory
//  (beside dir) into base_dir and its manifest into *base.
static int
s_open_base (const char *dir, const json_t *manifest, char *base_dir, size_t len,
             json_t **base, ps_error_t *err)
{
    const char *name = json_string_value (json_object_get (manifest, PS_CHECKPOINT_BASE));
    uint64_t step;
    if (!name || !ps_ckpt_layout_parse (name, &step))
        return ps_error_set (err, PS_EINVAL, "checkpoint %s: an incremental table file, but "
                             "the manifest's \"" PS_CHECKPOINT_BASE "\" names no checkpoint",
                             dir);
    char parent [PATH_MAX];
    snprintf (parent, sizeof parent, "%s", dir);
    size_t n = strlen (parent);
    while (n > 1 && parent [n - 1] == '/')
        parent [--n] = '\0';
    char *slash = strrchr (parent, '/');
    if (!slash)
        snprintf (parent, sizeof parent, ".");
    else
    if (slash == parent)
        parent [1] = '\0';
    else
        *slash = '\0';
    int rc = ps_ckpt_layout_join (base_dir, len, parent, name, err);
    if (rc)
        return rc;
    if ((rc = ps_checkpoint_verify (base_dir, base, err)))
        ps_error_prefix (err, rc, "checkpoint %s: its base", dir);
    return rc;
}

//  Open shard k of table t: its file in dir, and for an incremental one
//  the full file of the base. *base is the base's manifest, opened on the
//  first need.
static int
s_open_shard (ps_ckpt_tables_t *self, s_table_t *t, uint32_t k, const json_t *manifest,
              char *base_dir, size_t len, json_t **base, ps_error_t *err)
{
    s_shard_t *shard = &t->shards [k];
    const char *name = t->spec.name;
    const json_t *entry = s_find_file (manifest, name, k, false);
    if (!entry)
        return ps_error_set (err, PS_ENOTFOUND, "checkpoint %s: table \"%s\" has no file "
                             "for shard %u of %u", self->dir, name, k, self->nshards);
    int rc;
    if (json_is_true (json_object_get (entry, "full")))
        rc = s_entry_path (shard->full_path, sizeof shard->full_path, self->dir, entry, name,
                           k, err);
    else {
        shard->has_incr = true;
        rc = s_entry_path (shard->incr_path, sizeof shard->incr_path, self->dir, entry, name,
                           k, err);
        if (!rc && !*base)
            rc = s_open_base (self->dir, manifest, base_dir, len, base, err);
        const json_t *full = rc ? NULL : s_find_file (*base, name, k, true);
        if (!rc && !full)
            rc = ps_error_set (err, PS_ENOTFOUND, "checkpoint %s: table \"%s\" shard %u is "
                               "incremental, and its base %s has no full file of it",
                               self->dir, name, k, base_dir);
        if (!rc)
            rc = s_entry_path (shard->full_path, sizeof shard->full_path, base_dir, full, name,
                               k, err);
    }
    if (!rc)
        rc = ps_sparse_file_open_pair (shard->full_path,
                                       shard->has_incr ? shard->incr_path : NULL,
                                       &shard->full, &shard->incr, err);
    if (rc)
        return rc;
    shard->open = true;
    char diff [256];
    if (strcmp (shard->full.header.spec.name, name) != 0)
        return ps_error_set (err, PS_EINVAL, "file %s: holds table \"%s\", expected \"%s\"",
                             shard->full_path, shard->full.header.spec.name, name);
    if (k == 0 && t->spec.dim && shard->full.header.spec.dim != t->spec.dim)
        return ps_error_set (err, PS_EINVAL, "file %s: rows of %u floats, but the manifest's "
                             "table \"%s\" has %u", shard->full_path,
                             shard->full.header.spec.dim, name, t->spec.dim);
    if (k == 0)
        t->spec = shard->full.header.spec;
    else
    if (ps_tablespec_differs (&shard->full.header.spec, &t->spec, diff, sizeof diff))
        return ps_error_set (err, PS_EINVAL, "file %s: the spec differs from shard 0's: %s",
                             shard->full_path, diff);
    return PS_OK;
}

static int
s_cmp_row (const void *a, const void *b)
{
    uint64_t x = ((const s_row_t *) a)->id, y = ((const s_row_t *) b)->id;
    return x < y ? -1 : x > y;
}

//  Sort rows [0, n) by id in place. glibc's qsort sorts a copy when it
//  fits in memory, which would double what a table's join needs; this is
//  an introsort: quicksort on the median of three, heapsort past a depth
//  that only an adversarial order reaches, insertion sort for short runs.
static void
s_sift (s_row_t *rows, size_t root, size_t n)
{
    for (size_t child; (child = 2 * root + 1) < n; root = child) {
        if (child + 1 < n && rows [child].id < rows [child + 1].id)
            child++;
        if (rows [root].id >= rows [child].id)
            return;
        s_row_t t = rows [root];
        rows [root] = rows [child];
        rows [child] = t;
    }
}

static void
s_sort (s_row_t *rows, size_t n, int depth)
{
    while (n > 16) {
        if (depth-- == 0) {
            for (size_t i = n / 2; i-- > 0; )
                s_sift (rows, i, n);
            for (size_t end = n - 1; end > 0; end--) {
                s_row_t t = rows [0];
                rows [0] = rows [end];
                rows [end] = t;
                s_sift (rows, 0, end);
            }
            return;
        }
        //  Median of three to the front, then Hoare's partition.
        size_t mid = n / 2;
        s_row_t *a = &rows [0], *b = &rows [mid], *c = &rows [n - 1], t;
        if (b->id < a->id) { t = *a; *a = *b; *b = t; }
        if (c->id < b->id) { t = *b; *b = *c; *c = t; }
        if (b->id < a->id) { t = *a; *a = *b; *b = t; }
        uint64_t pivot = b->id;
        size_t i = 0, j = n - 1;
        for (;;) {
            while (rows [i].id < pivot)
                i++;
            while (rows [j].id > pivot)
                j--;
            if (i >= j)
                break;
            t = rows [i];
            rows [i++] = rows [j];
            rows [j--] = t;
        }
        //  [0, j] and [j + 1, n): recurse into the smaller, loop on the
        //  larger, so that the stack stays logarithmic.
        size_t left = j + 1;
        if (left < n - left) {
            s_sort (rows, left, depth);
            rows += left;
            n -= left;
        }
        else {
            s_sort (rows + left, n - left, depth);
            n = left;
        }
    }
    for (size_t i = 1; i < n; i++) {
        s_row_t t = rows [i];
        size_t j = i;
        for (; j > 0 && rows [j - 1].id > t.id; j--)
            rows [j] = rows [j - 1];
        rows [j] = t;
    }
}

static void
s_sort_rows (s_row_t *rows, size_t n)
{
    int depth = 0;
    for (size_t m = n; m > 1; m >>= 1)
        depth += 2;
    s_sort (rows, n, depth);
}

static int
s_cmp_u64 (const void *a, const void *b)
{
    uint64_t x = ps_get_u64 (a), y = ps_get_u64 (b);
    return x < y ? -1 : x > y;
}

//  Check one row of a file as a restore does (ps_sparse_stripe.c): in its
//  stripe and, here too, in its shard; updated at least once, never after
//  the file's newest step.
static int
s_check_row (const ps_ckpt_tables_t *self, const ps_sparse_file_t *file, uint32_t k,
             uint32_t s, const uint8_t *row)
{
    uint64_t id = ps_get_u64 (row);
    uint64_t last_step = ps_get_u64 (row + 8);
    uint64_t count = ps_get_u64 (row + 16);
    return ps_sparse_stripe_of (id) == s
        && ps_tablespec_shard_of (id, file->header.spec.shard_seed, self->nshards) == k
        && count > 0 && last_step <= file->header.newest_step ? 0 : -1;
}

//  Append shard k's live rows in stripe s: the incremental file's, then
//  the full file's that it neither replaces nor lists as evicted.
static int
s_join_stripe (ps_ckpt_tables_t *self, s_table_t *t, uint32_t k, uint32_t s, ps_error_t *err)
{
    s_shard_t *shard = &t->shards [k];
    size_t row_bytes = ps_sparse_file_row_bytes (&t->spec);
    const ps_sparse_file_section_t *full = &shard->full.sections [s];
    const ps_sparse_file_section_t *incr = shard->has_incr ? &shard->incr.sections [s] : NULL;
    uint64_t first = t->nrows;
    for (uint64_t i = 0; incr && i < incr->nrows; i++) {
        const uint8_t *row = incr->rows + i * row_bytes;
        if (s_check_row (self, &shard->incr, k, s, row))
            return ps_error_set (err, PS_ECORRUPT, "file %s: row %llu of stripe %u is not "
                                 "one of shard %u's (stripe, shard, updates or step)",
                                 shard->incr_path, (unsigned long long) ps_get_u64 (row), s, k);
        t->rows [t->nrows++] = (s_row_t) { .id = ps_get_u64 (row), .row = row };
    }
    //  The replaced rows are found by id among the incremental ones.
    uint64_t nincr = t->nrows - first;
    s_sort_rows (t->rows + first, (size_t) nincr);
    for (uint64_t i = 1; incr && i < incr->nevicted; i++)
        if (ps_get_u64 (incr->evicted + 8 * i) <= ps_get_u64 (incr->evicted + 8 * (i - 1)))
            return ps_error_set (err, PS_ECORRUPT, "file %s: the evicted ids of stripe %u are "
                                 "not sorted and unique", shard->incr_path, s);
    for (uint64_t i = 0; i < full->nrows; i++) {
        const uint8_t *row = full->rows + i * row_bytes;
        if (s_check_row (self, &shard->full, k, s, row))
            return ps_error_set (err, PS_ECORRUPT, "file %s: row %llu of stripe %u is not "
                                 "one of shard %u's (stripe, shard, updates or step)",
                                 shard->full_path, (unsigned long long) ps_get_u64 (row), s, k);
        s_row_t key = { .id = ps_get_u64 (row) };
        if (incr && (bsearch (row, incr->evicted, incr->nevicted, 8, s_cmp_u64)
                 ||  bsearch (&key, t->rows + first, nincr, sizeof (s_row_t), s_cmp_row)))
            continue;
        key.row = row;
        t->rows [t->nrows++] = key;
    }
    return PS_OK;
}

//  Join table t: every shard's live rows, sorted by id, each id once.
static int
s_join (ps_ckpt_tables_t *self, s_table_t *t, ps_error_t *err)
{
    uint64_t most = 0;
    for (uint32_t k = 0; k < self->nshards; k++)
        for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++)
            most += t->shards [k].full.sections [s].nrows
                  + (t->shards [k].has_incr ? t->shards [k].incr.sections [s].nrows : 0);
    if (!(t->rows = malloc ((size_t) most * sizeof (s_row_t) + 1)))
        abort ();
    int rc = PS_OK;
    for (uint32_t k = 0; !rc && k < self->nshards; k++)
        for (uint32_t s = 0; !rc && s < PS_SPARSE_STRIPES; s++)
            rc = s_join_stripe (self, t, k, s, err);
    if (rc)
        return rc;
    s_sort_rows (t->rows, (size_t) t->nrows);
    for (uint64_t i = 1; i < t->nrows; i++)
        if (t->rows [i].id == t->rows [i - 1].id)
            return ps_error_set (err, PS_ECORRUPT, "checkpoint %s: table \"%s\" holds id %llu "
                                 "twice", self->dir, t->spec.name,
                                 (unsigned long long) t->rows [i].id);
    //  Give back what replaced and evicted rows took.
    s_row_t *fit = realloc (t->rows, (size_t) t->nrows * sizeof (s_row_t) + 1);
    if (fit)
        t->rows = fit;
    return PS_OK;
}

ps_ckpt_tables_t *
ps_ckpt_tables_read (const char *dir, const json_t *manifest, ps_error_t *err)
{
    ps_ckpt_tables_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    snprintf (self->dir, sizeof self->dir, "%s", dir);
    const json_t *tables = json_object_get (manifest, "tables");
    const json_t *specs = json_object_get (tables, "specs");
    if (json_array_size (specs) == 0)
        return self;
    json_int_t shards = json_integer_value (json_object_get (tables, "shards"));
    if (shards < 1 || shards > 65536) {
        ps_error_set (err, PS_EINVAL, "checkpoint %s: tables.shards is %lld, expected the "
                      "number of servers", dir, (long long) shards);
        ps_ckpt_tables_destroy (&self);
        return NULL;
    }
    self->nshards = (uint32_t) shards;
    self->count = (int) json_array_size (specs);
    if (!(self->tables = calloc ((size_t) self->count, sizeof (s_table_t))))
        abort ();
    char base_dir [PATH_MAX] = "";
    json_t *base = NULL;
    int rc = PS_OK;
    for (int i = 0; !rc && i < self->count; i++) {
        s_table_t *t = &self->tables [i];
        const json_t *spec = json_array_get (specs, (size_t) i);
        const char *name = json_string_value (json_object_get (spec, "name"));
        json_int_t dim = json_integer_value (json_object_get (spec, "dim"));
        if (!name || ps_name_check (name, strlen (name), NULL)) {
            rc = ps_error_set (err, PS_EINVAL, "checkpoint %s: tables.specs [%d] has no valid "
                               "name", dir, i);
            break;
        }
        snprintf (t->spec.name, sizeof t->spec.name, "%s", name);
        //  0 (none given) leaves the row width to the files.
        t->spec.dim = dim > 0 && dim <= UINT32_MAX ? (uint32_t) dim : 0;
        snprintf (t->ids_name, sizeof t->ids_name, "%s/ids", name);
        snprintf (t->embeddings_name, sizeof t->embeddings_name, "%s/embeddings", name);
        if (!(t->shards = calloc (self->nshards, sizeof (s_shard_t))))
            abort ();
        for (uint32_t k = 0; !rc && k < self->nshards; k++)
            rc = s_open_shard (self, t, k, manifest, base_dir, sizeof base_dir, &base, err);
        if (!rc)
            rc = s_join (self, t, err);
    }
    json_decref (base);
    if (rc)
        ps_ckpt_tables_destroy (&self);
    return self;
}

void
ps_ckpt_tables_destroy (ps_ckpt_tables_t **self_p)
{
    ps_ckpt_tables_t *self = *self_p;
    if (!self)
        return;
    for (int i = 0; i < self->count; i++) {
        s_table_t *t = &self->tables [i];
        for (uint32_t k = 0; t->shards && k < self->nshards; k++)
            if (t->shards [k].open) {
                ps_sparse_file_close (&t->shards [k].full);
                if (t->shards [k].has_incr)
                    ps_sparse_file_close (&t->shards [k].incr);
            }
        free (t->shards);
        free (t->rows);
    }
    free (self->tables);
    free (self);
    *self_p = NULL;
}

int
ps_ckpt_tables_count (const ps_ckpt_tables_t *self)
{
    return self->count;
}

const ps_tablespec_t *
ps_ckpt_tables_spec (const ps_ckpt_tables_t *self, int index)
{
    return &self->tables [index].spec;
}

uint64_t
ps_ckpt_tables_rows (const ps_ckpt_tables_t *self, int index)
{
    return self->tables [index].nrows;
}

uint64_t
ps_ckpt_tables_id (const ps_ckpt_tables_t *self, int index, uint64_t row)
{
    return self->tables [index].rows [row].id;
}

//  The ids tensor's bytes [at, at + len): 8 per row.
static void
s_fill_ids (void *arg, uint64_t at, void *buf, size_t len)
{
    const s_table_t *t = arg;
    uint8_t *out = buf;
    while (len > 0) {
        uint64_t r = at / 8;
        size_t offset = (size_t) (at % 8);
        size_t n = 8 - offset < len ? 8 - offset : len;
        memcpy (out, (const uint8_t *) &t->rows [r].id + offset, n);
        out += n;
        at += n;
        len -= n;
    }
}

//  The embeddings tensor's bytes [at, at + len): 4 * dim per row, from
//  the row's value in its file.
static void
s_fill_embeddings (void *arg, uint64_t at, void *buf, size_t len)
{
    const s_table_t *t = arg;
    size_t value_bytes = 4 * (size_t) t->spec.dim;
    uint8_t *out = buf;
    while (len > 0) {
        uint64_t r = at / value_bytes;
        size_t offset = (size_t) (at % value_bytes);
        size_t n = value_bytes - offset < len ? value_bytes - offset : len;
        memcpy (out, t->rows [r].row + S_VALUE_AT + offset, n);
        out += n;
        at += n;
        len -= n;
    }
}

int
ps_ckpt_tables_tensors (ps_ckpt_tables_t *self, int index, ps_tensor_t *ids,
                        ps_tensor_t *embeddings)
{
    s_table_t *t = &self->tables [index];
    if (t->nrows == 0)
        return 0;
    *ids = (ps_tensor_t) { .name = t->ids_name, .dtype = PS_DTYPE_U64,
                           .shape = { .rank = 1, .dims = { (int64_t) t->nrows } },
                           .fill = s_fill_ids, .fill_arg = t };
    *embeddings = (ps_tensor_t) { .name = t->embeddings_name, .dtype = PS_DTYPE_F32,
                                  .shape = { .rank = 2, .dims = { (int64_t) t->nrows,
                                                                  (int64_t) t->spec.dim } },
                                  .fill = s_fill_embeddings, .fill_arg = t };
    return 2;
}
