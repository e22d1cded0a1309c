//  A shard of a sparse embedding table; see ps_sparse.h.
//
//  The table is its stripes (ps_sparse_stripe.h, where the rules of
//  admission and eviction and the memory layout are), each behind its own
//  lock, and a step ledger behind another. A push marks its step in the
//  ledger first, so that a repeat applies nothing; then takes its ids a
//  window at a time, grouped by stripe, each stripe locked once per
//  window; then lets every stripe it touched evict. A pull groups its ids
//  the same way and creates nothing. A save copies one stripe at a time
//  under its lock and writes it outside, so pushes wait only for the copy
//  of their stripe. A failed full save leaves the table without a full
//  snapshot (the stripes copied have lost their marks), so that an
//  incremental one is refused until a full one succeeds.
//
//  The ledger and the rows of a save are not one cut through the table:
//  a push that lands between the ledger's copy and its stripe's would be
//  in the rows and not in the ledger. A server stops pushes to the table
//  for a checkpoint that must restore exactly.

#include "ps_bytes.h"
#include "ps_file.h"
#include "ps_ledger.h"
#include "ps_log.h"
#include "ps_sparse.h"
#include "ps_sparse_file.h"
#include "ps_sparse_stripe.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

//  Ids of a push or pull grouped by stripe at a time, on the stack (about
//  44 KiB): enough that a stripe's group (64 ids on average) keeps its
//  pipeline (ps_sparse_stripe.c) busy past its first few ids.
#define S_WINDOW  4096

struct _ps_sparse_t {
    ps_sparse_layout_t layout;
    ps_slabs_t *slabs;
    pthread_mutex_t ledger_lock;
    ps_ledger_t *ledger;
    uint64_t newest_step;
    uint64_t pushes, duplicates;
    atomic_uint_fast64_t pulls;
    atomic_bool oom_logged;     //  a row that could not be allocated was logged
    pthread_mutex_t save_lock;
    bool has_base;              //  the last full save succeeded (or the
    uint64_t base_size;         //  table was loaded): its size and CRC
    uint32_t base_crc;
    ps_sparse_stripe_t stripes [PS_SPARSE_STRIPES];
};

//  --------------------------------------------------------------------
//  The table

ps_sparse_t *
ps_sparse_new (const ps_tablespec_t *spec, ps_error_t *err)
{
    if (ps_tablespec_validate (spec, err))
        return NULL;
    //  Aligned, so the stripes' locks do not share cache lines with more
    //  than their neighbours'.
    size_t size = (sizeof (ps_sparse_t) + 63) / 64 * 64;
    ps_sparse_t *self = aligned_alloc (64, size);
    if (!self) {
        ps_error_set (err, PS_ETOOBIG, "table %s: cannot allocate the table", spec->name);
        return NULL;
    }
    memset (self, 0, size);
    self->slabs = ps_slabs_new ();
    ps_sparse_layout_init (&self->layout, spec, self->slabs);
    atomic_init (&self->pulls, 0);
    atomic_init (&self->oom_logged, false);
    //  A mutex that cannot be made is out of memory, which aborts, as in
    //  ps_partition.c; the stripes' locks likewise, so a table being torn
    //  down after a failure never destroys a lock that was not made.
    if (pthread_mutex_init (&self->ledger_lock, NULL) != 0
    ||  pthread_mutex_init (&self->save_lock, NULL) != 0)
        abort ();
    self->ledger = ps_ledger_new ();
    bool ok = self->ledger && self->slabs;
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++)
        if (ps_sparse_stripe_init (&self->stripes [s], &self->layout))
            ok = false;
    if (!ok) {
        ps_sparse_destroy (&self);
        ps_error_set (err, PS_ETOOBIG, "table %s: cannot allocate its ledger and filters",
                      spec->name);
    }
    return self;
}

void
ps_sparse_destroy (ps_sparse_t **self_p)
{
    assert (self_p);
    ps_sparse_t *self = *self_p;
    if (!self)
        return;
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++)
        ps_sparse_stripe_fini (&self->stripes [s], &self->layout);
    ps_slabs_destroy (&self->slabs);
    ps_ledger_destroy (&self->ledger);
    pthread_mutex_destroy (&self->ledger_lock);
    pthread_mutex_destroy (&self->save_lock);
    free (self);
    *self_p = NULL;
}

const ps_tablespec_t *
ps_sparse_spec (ps_sparse_t *self)
{
    assert (self);
    return &self->layout.spec;
}

//  A window of a request's ids grouped by stripe: the ids of stripe s are
//  order [begin [s] .. begin [s + 1]), in their order in the request.
typedef struct {
    uint64_t hashes [S_WINDOW];
    uint16_t order [S_WINDOW];
    uint32_t begin [PS_SPARSE_STRIPES + 1];
} s_window_t;

//  Group ids [0, m), m <= S_WINDOW, by stripe: a counting sort.
static void
s_window_fill (s_window_t *w, const uint64_t *ids, size_t m)
{
    memset (w->begin, 0, sizeof w->begin);
    for (size_t i = 0; i < m; i++) {
        w->hashes [i] = ps_sparse_hash (ids [i]);
        w->begin [(w->hashes [i] >> 58) + 1]++;
    }
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++)
        w->begin [s + 1] += w->begin [s];
    uint32_t next [PS_SPARSE_STRIPES];
    memcpy (next, w->begin, sizeof next);
    for (size_t i = 0; i < m; i++)
        w->order [next [w->hashes [i] >> 58]++] = (uint16_t) i;
}

//  Stripe s's group of the window, whose ids start at ids.
static ps_sparse_group_t
s_window_group (const s_window_t *w, const uint64_t *ids, uint32_t s)
{
    return (ps_sparse_group_t) {
        ids, w->hashes, w->order + w->begin [s], w->begin [s + 1] - w->begin [s]
    };
}

//  Read the rows of ids [0, n) into out (NULL: only whether each is
//  there, into found), each stripe locked once per window.
static void
s_read (ps_sparse_t *self, const uint64_t *ids, size_t n, float *out, bool *found)
{
    uint32_t dim = self->layout.spec.dim;
    s_window_t w;
    for (size_t start = 0; start < n; start += S_WINDOW) {
        size_t m = n - start < S_WINDOW ? n - start : S_WINDOW;
        s_window_fill (&w, ids + start, m);
        for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++) {
            if (w.begin [s] == w.begin [s + 1])
                continue;
            ps_sparse_stripe_t *st = &self->stripes [s];
            ps_sparse_group_t group = s_window_group (&w, ids + start, s);
            pthread_mutex_lock (&st->lock);
            ps_sparse_stripe_read (st, &self->layout, &group, out ? out + start * dim : NULL,
                                   found + start);
            pthread_mutex_unlock (&st->lock);
        }
    }
}

void
ps_sparse_pull (ps_sparse_t *self, const uint64_t *ids, size_t n, float *out)
{
    assert (self);
    uint32_t dim = self->layout.spec.dim;
    bool found [S_WINDOW];
    for (size_t start = 0; start < n; start += S_WINDOW) {
        size_t m = n - start < S_WINDOW ? n - start : S_WINDOW;
        s_read (self, ids + start, m, out + start * dim, found);
        //  Initial values are computed outside the locks.
        for (size_t i = 0; i < m; i++)
            if (!found [i])
                ps_tablespec_init_row (&self->layout.spec, ids [start + i],
                                       out + (start + i) * dim);
    }
    atomic_fetch_add_explicit (&self->pulls, n, memory_order_relaxed);
}

size_t
ps_sparse_row_bytes (ps_sparse_t *self)
{
    assert (self);
    //  The index doubles past a load of 3/4, so it holds at most 8/3
    //  entries of 4 bytes per row: 16 bytes cover that.
    return self->layout.stride + 16;
}

size_t
ps_sparse_count_absent (ps_sparse_t *self, const uint64_t *ids, size_t n)
{
    assert (self);
    bool found [S_WINDOW];
    size_t absent = 0;
    for (size_t start = 0; start < n; start += S_WINDOW) {
        size_t m = n - start < S_WINDOW ? n - start : S_WINDOW;
        s_read (self, ids + start, m, NULL, found);
        for (size_t i = 0; i < m; i++)
            absent += !found [i];
    }
    return absent;
}

int
ps_sparse_check_push (ps_sparse_t *self, uint64_t step, const uint64_t *ids, size_t n,
                      ps_error_t *err)
{
    assert (self);
    pthread_mutex_lock (&self->ledger_lock);
    int rc = ps_ledger_contains (self->ledger, step) ? PS_DUPLICATE
           : ps_ledger_reserve (self->ledger, step, err);
    pthread_mutex_unlock (&self->ledger_lock);
    if (rc)
        return rc == PS_DUPLICATE ? rc
             : ps_error_prefix (err, rc, "table %s", self->layout.spec.name);
    //  Repeated ids: a table of positions + 1, open addressing, at most
    //  half full.
    size_t size = 16;
    while (size < 2 * n)
        size *= 2;
    uint32_t *seen = calloc (size, sizeof *seen);
    if (!seen)
        return ps_error_set (err, PS_ETOOBIG, "table %s: cannot allocate a check of %zu ids",
                             self->layout.spec.name, n);
    for (size_t i = 0; i < n && rc == PS_OK; i++) {
        size_t pos = (size_t) ps_sparse_hash (ids [i]) & (size - 1);
        while (seen [pos] && ids [seen [pos] - 1] != ids [i])
            pos = (pos + 1) & (size - 1);
        if (seen [pos])
            rc = ps_error_set (err, PS_EINVAL, "table %s: id %llu is pushed twice (at %u and "
                               "%zu), expected a batch's duplicates summed", self->layout.spec.name,
                               (unsigned long long) ids [i], seen [pos] - 1, i);
        else
            seen [pos] = (uint32_t) (i + 1);
    }
    free (seen);
    return rc;
}


int
ps_sparse_push (ps_sparse_t *self, uint64_t step, const uint64_t *ids, size_t n,
                const float *grads, ps_sparse_push_result_t *result)
{
    assert (self);
    assert (result);
    memset (result, 0, sizeof *result);
    pthread_mutex_lock (&self->ledger_lock);
    int rc = ps_ledger_mark (self->ledger, step, NULL);
    if (rc == PS_DUPLICATE)
        self->duplicates++;
    if (rc == PS_OK) {
        self->pushes++;
        if (step > self->newest_step)
            self->newest_step = step;
    }
    uint64_t now = self->newest_step;
    pthread_mutex_unlock (&self->ledger_lock);
    if (rc)
        return rc;

    //  Ids go to their stripes a window at a time, each stripe locked once
    //  per window, a stripe's ids in their order in the push.
    uint32_t dim = self->layout.spec.dim;
    uint64_t touched = 0;
    s_window_t w;
    for (size_t start = 0; start < n; start += S_WINDOW) {
        size_t m = n - start < S_WINDOW ? n - start : S_WINDOW;
        s_window_fill (&w, ids + start, m);
        for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++) {
            if (w.begin [s] == w.begin [s + 1])
                continue;
            touched |= UINT64_C (1) << s;
            ps_sparse_stripe_t *st = &self->stripes [s];
            ps_sparse_group_t group = s_window_group (&w, ids + start, s);
            pthread_mutex_lock (&st->lock);
            ps_sparse_stripe_push (st, &self->layout, &group, grads + start * dim, step, result);
            pthread_mutex_unlock (&st->lock);
        }
    }
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++)
        if (touched >> s & 1) {
            ps_sparse_stripe_t *st = &self->stripes [s];
            pthread_mutex_lock (&st->lock);
            result->evicted += ps_sparse_stripe_evict (st, &self->layout, s, now);
            pthread_mutex_unlock (&st->lock);
        }
    //  Once per table, so that a server short of memory does not flood
    //  its log; the count goes on in stats.
    if (result->oom && !atomic_exchange (&self->oom_logged, true))
        ps_error ("table %s: out of memory: %zu rows of step %llu could not be allocated, "
                  "their gradients lost (counted in the table's stats as oom; logged once)",
                  self->layout.spec.name, result->oom, (unsigned long long) step);
    return PS_OK;
}

void
ps_sparse_stats (ps_sparse_t *self, ps_sparse_stats_t *stats)
{
    assert (self);
    memset (stats, 0, sizeof *stats);
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++) {
        ps_sparse_stripe_t *st = &self->stripes [s];
        pthread_mutex_lock (&st->lock);
        stats->rows += st->rows;
        stats->created += st->created;
        stats->evicted += st->evictions;
        stats->dropped += st->dropped;
        stats->oom += st->oom;
        stats->row_updates += st->row_updates;
        stats->bytes += st->bytes;
        pthread_mutex_unlock (&st->lock);
    }
    pthread_mutex_lock (&self->ledger_lock);
    stats->pushes = self->pushes;
    stats->duplicates = self->duplicates;
    stats->bytes += ps_ledger_encoded_size (self->ledger);
    pthread_mutex_unlock (&self->ledger_lock);
    stats->pulls = atomic_load_explicit (&self->pulls, memory_order_relaxed);
    stats->bytes += sizeof *self;
}

uint64_t
ps_sparse_steps_applied (ps_sparse_t *self)
{
    assert (self);
    pthread_mutex_lock (&self->ledger_lock);
    uint64_t count = ps_ledger_count (self->ledger);
    pthread_mutex_unlock (&self->ledger_lock);
    return count;
}

//  --------------------------------------------------------------------
//  Saving

//  What the file writer needs, and what it learns: the file's size and
//  CRC, which an incremental snapshot names its full one by.
typedef struct {
    ps_sparse_t *self;
    bool full;
    uint8_t *head;              //  header and ledger, encoded
    size_t head_len;
    uint8_t *buf;               //  a stripe's section, copied under its lock
    size_t buf_cap;
    uint64_t size;
    uint32_t crc;
} s_save_t;

//  Stream the header and ledger, then each stripe's section as it is
//  copied under the stripe's lock, then the CRC trailer.
static int
s_write_file (int fd, void *arg)
{
    s_save_t *save = arg;
    uint32_t crc = (uint32_t) crc32 (0, Z_NULL, 0);
    if (ps_file_write_all (fd, save->head, save->head_len, &crc))
        return -1;
    uint64_t size = save->head_len;
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++) {
        ps_sparse_stripe_t *st = &save->self->stripes [s];
        pthread_mutex_lock (&st->lock);
        size_t len = ps_sparse_stripe_copy (st, &save->self->layout, save->full, &save->buf,
                                            &save->buf_cap);
        pthread_mutex_unlock (&st->lock);
        if (!len || ps_file_write_all (fd, save->buf, len, &crc))
            return -1;
        size += len;
    }
    uint8_t trailer [PS_SPARSE_FILE_TRAILER];
    ps_put_u32 (trailer, crc);
    if (ps_file_write_all (fd, trailer, sizeof trailer, NULL))
        return -1;
    save->size = size + sizeof trailer;
    save->crc = crc;
    return 0;
}

int
ps_sparse_save (ps_sparse_t *self, const char *path, bool full, ps_error_t *err)
{
    assert (self);
    assert (path);
    pthread_mutex_lock (&self->save_lock);
    if (!full && !self->has_base) {
        pthread_mutex_unlock (&self->save_lock);
        return ps_error_set (err, PS_EINVAL, "table %s: file %s: no full snapshot to be "
                             "incremental to, expected a full save first",
                             self->layout.spec.name, path);
    }
    ps_sparse_file_header_t header = {
        .full = full,
        .base_size = full ? 0 : self->base_size,
        .base_crc = full ? 0 : self->base_crc,
        .spec = self->layout.spec,
        .sketch_width = self->layout.sketch_width,
    };
    s_save_t save = { .self = self, .full = full };
    pthread_mutex_lock (&self->ledger_lock);
    header.newest_step = self->newest_step;
    header.ledger_len = ps_ledger_encoded_size (self->ledger);
    save.head_len = PS_SPARSE_FILE_HEADER + (size_t) header.ledger_len;
    save.head = malloc (save.head_len);
    if (save.head)
        ps_ledger_encode (self->ledger, save.head + PS_SPARSE_FILE_HEADER);
    pthread_mutex_unlock (&self->ledger_lock);
    size_t tmp_len = strlen (path) + 32;
    char *tmp = malloc (tmp_len);
    int rc;
    if (!save.head || !tmp)
        rc = ps_error_set (err, PS_EIO, "table %s: file %s: cannot allocate the header",
                           self->layout.spec.name, path);
    else {
        ps_sparse_file_encode (&header, save.head);
        snprintf (tmp, tmp_len, "%s.tmp.%ld", path, (long) getpid ());
        rc = ps_file_write_atomic (path, tmp, s_write_file, &save, err);
    }
    if (full) {
        //  The marks of the stripes copied are gone whether the file made
        //  it or not: only a full snapshot that is on disk may be one that
        //  incremental snapshots follow.
        self->has_base = rc == PS_OK;
        self->base_size = save.size;
        self->base_crc = save.crc;
    }
    pthread_mutex_unlock (&self->save_lock);
    free (save.head);
    free (save.buf);
    free (tmp);
    return rc;
}

//  --------------------------------------------------------------------
//  Loading



static ps_sparse_t *
s_build (const ps_sparse_file_t *full, const ps_sparse_file_t *incr, ps_error_t *err)
{
    const ps_sparse_file_t *last = incr ? incr : full;
    ps_sparse_t *self = ps_sparse_new (&full->header.spec, err);
    if (!self)
        return NULL;
    int rc = PS_OK;
    if (self->layout.sketch_width != last->header.sketch_width)
        rc = ps_error_set (err, PS_ECORRUPT, "file %s: sketch width %u, expected %u for the "
                           "table's admission settings", last->path, last->header.sketch_width,
                           self->layout.sketch_width);
    if (rc == PS_OK) {
        ps_error_t ledger_err;
        ps_ledger_t *ledger = ps_ledger_decode (last->ledger, (size_t) last->header.ledger_len,
                                                &ledger_err);
        if (ledger) {
            ps_ledger_destroy (&self->ledger);
            self->ledger = ledger;
        }
        else
            rc = ps_error_set (err, PS_ECORRUPT, "file %s: %s", last->path, ledger_err.msg);
    }
    self->newest_step = last->header.newest_step;
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES && rc == PS_OK; s++)
        rc = ps_sparse_stripe_restore (&self->stripes [s], &self->layout, s, full, incr,
                                       self->newest_step, err);
    if (rc) {
        ps_sparse_destroy (&self);
        return NULL;
    }
    self->has_base = true;
    self->base_size = full->size;
    self->base_crc = full->crc;
    return self;
}

ps_sparse_t *
ps_sparse_load (const char *full_path, const char *incr_path, ps_error_t *err)
{
    assert (full_path);
    ps_sparse_file_t full, incr;
    if (ps_sparse_file_open_pair (full_path, incr_path, &full, &incr, err))
        return NULL;
    ps_sparse_t *self = s_build (&full, incr_path ? &incr : NULL, err);
    ps_sparse_file_close (&full);
    if (incr_path)
        ps_sparse_file_close (&incr);
    return self;
}

//  --------------------------------------------------------------------
//  Comparing


bool
ps_sparse_differs (ps_sparse_t *a, ps_sparse_t *b, char *buf, size_t len)
{
    assert (a);
    assert (b);
    char scratch [8];
    if (!buf || !len) {
        buf = scratch;
        len = sizeof scratch;
    }
    //  A table is itself; locking it twice below would hang.
    if (a == b)
        return false;
    if (ps_tablespec_differs (&a->layout.spec, &b->layout.spec, buf, len))
        return true;
    const char *name = a->layout.spec.name;
    pthread_mutex_lock (&a->ledger_lock);
    pthread_mutex_lock (&b->ledger_lock);
    bool differs = true;
    if (!ps_ledger_equal (a->ledger, b->ledger))
        snprintf (buf, len, "table %s: the ledgers differ (%llu and %llu steps)", name,
                  (unsigned long long) ps_ledger_count (a->ledger),
                  (unsigned long long) ps_ledger_count (b->ledger));
    else
    if (a->newest_step != b->newest_step)
        snprintf (buf, len, "table %s: newest step %llu, not %llu", name,
                  (unsigned long long) a->newest_step, (unsigned long long) b->newest_step);
    else
        differs = false;
    pthread_mutex_unlock (&b->ledger_lock);
    pthread_mutex_unlock (&a->ledger_lock);
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES && !differs; s++) {
        pthread_mutex_lock (&a->stripes [s].lock);
        pthread_mutex_lock (&b->stripes [s].lock);
        differs = ps_sparse_stripe_differs (&a->stripes [s], &b->stripes [s], &a->layout, s,
                                            buf, len);
        pthread_mutex_unlock (&b->stripes [s].lock);
        pthread_mutex_unlock (&a->stripes [s].lock);
    }
    return differs;
}
