//  Re-partitioning a checkpoint; see ps_reshard.h.
//
//  Two passes over the source files. The first reads and verifies every
//  file in full but keeps only what it says about itself (variable, rows,
//  shape, optimizer), and checks the whole plan before anything is
//  written: every source variable is a target variable of the same shape,
//  the pieces of each variable cover its rows exactly once, and they agree
//  on the optimizer. The second assembles one variable at a time: it reads
//  the variable's pieces again into one buffer per array (values and each
//  slot), keeping their counters and ledgers, and writes every target
//  partition of the variable from slices of those buffers. Memory is one
//  variable's arrays plus one piece being read.

#include "ps_reshard.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ps_file.h"
#include "ps_floats.h"
#include "ps_ledger.h"
#include "ps_log.h"
#include "ps_snapshot.h"

//  One source file, as the first pass found it.
typedef struct {
    char *path;
    char var [PS_NAME_MAX];
    ps_shape_t shape;
    int64_t row_begin, row_end;
    ps_opt_config_t opt;
    int target;                 //  index into the target variables
    //  Filled in by the second pass, for the variable being assembled.
    uint64_t opt_t, version, duplicates;
    ps_ledger_t *ledger;
} s_piece_t;

typedef struct {
    s_piece_t *pieces;
    size_t count;
} s_sources_t;

static void
s_sources_free (s_sources_t *sources)
{
    for (size_t i = 0; i < sources->count; i++) {
        free (sources->pieces [i].path);
        ps_ledger_destroy (&sources->pieces [i].ledger);
    }
    free (sources->pieces);
    memset (sources, 0, sizeof *sources);
}

//  ---------------------------------------------------------------------
//  Checks of the target layout and of the directories

static int
s_check_layout (const ps_reshard_var_t *vars, int nvars, ps_error_t *err)
{
    if (nvars < 0 || (nvars > 0 && !vars))
        return ps_error_set (err, PS_EINVAL, "reshard: %d target variables, expected a list", nvars);
    for (int i = 0; i < nvars; i++) {
        const ps_reshard_var_t *v = &vars [i];
        if (!v->var)
            return ps_error_set (err, PS_EINVAL, "reshard: target variable %d has no name", i);
        int rc = ps_name_check (v->var, strlen (v->var), err);
        if (rc)
            return ps_error_prefix (err, PS_EINVAL, "reshard: target variable %d", i);
        ps_shape_t shape;
        rc = ps_shape_set (&shape, v->shape.dims, v->shape.rank, err);
        if (rc)
            return ps_error_prefix (err, PS_EINVAL, "reshard: target variable \"%s\"", v->var);
        for (int j = 0; j < i; j++)
            if (strcmp (vars [j].var, v->var) == 0)
                return ps_error_set (err, PS_EINVAL,
                                     "reshard: target variable \"%s\" is listed twice (%d and %d)",
                                     v->var, j, i);
        if (v->nparts < 1 || !v->splits)
            return ps_error_set (err, PS_EINVAL,
                                 "reshard: target variable \"%s\" has %d partitions, expected at "
                                 "least 1 with their splits", v->var, v->nparts);
        int64_t rows = v->shape.dims [0];
        if (v->splits [0] != 0 || v->splits [v->nparts] != rows)
            return ps_error_set (err, PS_EINVAL,
                                 "reshard: target variable \"%s\" splits run from %lld to %lld, "
                                 "expected 0 to %lld", v->var, (long long) v->splits [0],
                                 (long long) v->splits [v->nparts], (long long) rows);
        for (int k = 0; k < v->nparts; k++)
            if (v->splits [k] >= v->splits [k + 1])
                return ps_error_set (err, PS_EINVAL,
                                     "reshard: target variable \"%s\" partition %d holds rows "
                                     "[%lld,%lld), expected increasing splits", v->var, k,
                                     (long long) v->splits [k], (long long) v->splits [k + 1]);
    }
    return PS_OK;
}

//  The directory holding path, for the fsync that makes a new entry in it
//  durable.
static void
s_parent (const char *path, char *parent, size_t len)
{
    snprintf (parent, len, "%s", path);
    size_t n = strlen (parent);
    while (n > 1 && parent [n - 1] == '/')
        parent [--n] = 0;
    char *slash = strrchr (parent, '/');
    if (!slash)
        snprintf (parent, len, ".");
    else
    if (slash == parent)
        parent [1] = 0;
    else
        *slash = 0;
}

//  Create dst_dir when missing, and check that it is not src_dir.
static int
s_prepare_dst (const char *src_dir, const char *dst_dir, ps_error_t *err)
{
    if (mkdir (dst_dir, 0755) == 0) {
        //  The new directory's entry must survive a crash as well as the
        //  files that will be written into it.
        char parent [4096];
        s_parent (dst_dir, parent, sizeof parent);
        int rc = ps_file_fsync_dir (parent, err);
        if (rc)
            return rc;
    }
    else
    if (errno != EEXIST)
        return ps_error_set (err, PS_EIO, "reshard: mkdir (%s) failed: %s", dst_dir, strerror (errno));
    struct stat src, dst;
    if (stat (src_dir, &src) != 0)
        return ps_error_set (err, errno == ENOENT ? PS_ENOTFOUND : PS_EIO,
                             "reshard: stat (%s) failed: %s", src_dir, strerror (errno));
    if (stat (dst_dir, &dst) != 0)
        return ps_error_set (err, PS_EIO, "reshard: stat (%s) failed: %s", dst_dir, strerror (errno));
    if (!S_ISDIR (dst.st_mode))
        return ps_error_set (err, PS_EINVAL, "reshard: %s is not a directory", dst_dir);
    if (src.st_dev == dst.st_dev && src.st_ino == dst.st_ino)
        return ps_error_set (err, PS_EINVAL,
                             "reshard: the target directory %s is the source directory %s, "
                             "expected another one", dst_dir, src_dir);
    return PS_OK;
}

static int
s_compare_paths (const void *a, const void *b)
{
    return strcmp (((const s_piece_t *) a)->path, ((const s_piece_t *) b)->path);
}

//  The paths of the files in src_dir whose names end in ".snap", sorted, so
//  that errors and warnings come out the same from run to run.
static int
s_list_sources (const char *src_dir, s_sources_t *sources, ps_error_t *err)
{
    DIR *dir = opendir (src_dir);
    if (!dir)
        return ps_error_set (err, errno == ENOENT ? PS_ENOTFOUND : PS_EIO,
                             "reshard: opendir (%s) failed: %s", src_dir, strerror (errno));
    size_t capacity = 0;
    int rc;
    struct dirent *entry;
    while ((rc = ps_file_next_entry (dir, src_dir, &entry, err)) == 1) {
        size_t len = strlen (entry->d_name);
        if (len <= 5 || strcmp (entry->d_name + len - 5, ".snap") != 0)
            continue;
        if (sources->count == capacity) {
            capacity = capacity ? 2 * capacity : 16;
            s_piece_t *pieces = realloc (sources->pieces, capacity * sizeof *pieces);
            if (!pieces) {
                rc = ps_error_set (err, PS_ETOOBIG, "reshard: cannot list the files of %s", src_dir);
                break;
            }
            sources->pieces = pieces;
        }
        s_piece_t *piece = &sources->pieces [sources->count];
        memset (piece, 0, sizeof *piece);
        size_t size = strlen (src_dir) + len + 2;
        piece->path = malloc (size);
        if (!piece->path) {
            rc = ps_error_set (err, PS_ETOOBIG, "reshard: cannot list the files of %s", src_dir);
            break;
        }
        snprintf (piece->path, size, "%s/%s", src_dir, entry->d_name);
        sources->count++;
    }
    if (closedir (dir) != 0 && rc == PS_OK)
        rc = ps_error_set (err, PS_EIO, "reshard: closedir (%s) failed: %s", src_dir, strerror (errno));
    if (rc == PS_OK && sources->count > 1)
        qsort (sources->pieces, sources->count, sizeof (s_piece_t), s_compare_paths);
    return rc;
}

//  ---------------------------------------------------------------------
//  The first pass

static int
s_find_target (const ps_reshard_var_t *vars, int nvars, const char *var)
{
    for (int i = 0; i < nvars; i++)
        if (strcmp (vars [i].var, var) == 0)
            return i;
    return -1;
}

//  Read and verify every source file, and note what each holds.
static int
s_survey (s_sources_t *sources, const ps_reshard_var_t *vars, int nvars, ps_error_t *err)
{
    for (size_t i = 0; i < sources->count; i++) {
        s_piece_t *piece = &sources->pieces [i];
        ps_snapshot_t snap;
        int rc = ps_snapshot_read (piece->path, &snap, err);
        if (rc)
            return rc;
        memcpy (piece->var, snap.var, sizeof piece->var);
        piece->shape = snap.shape;
        piece->row_begin = snap.row_begin;
        piece->row_end = snap.row_end;
        piece->opt = snap.opt;
        ps_snapshot_release (&snap);
        piece->target = s_find_target (vars, nvars, piece->var);
        if (piece->target < 0)
            return ps_error_set (err, PS_EINVAL,
                                 "file %s: variable \"%s\" is not in the target layout, which must "
                                 "name every variable of the checkpoint", piece->path, piece->var);
        const ps_reshard_var_t *target = &vars [piece->target];
        if (!ps_shape_equal (&piece->shape, &target->shape)) {
            char have [96], want [96];
            return ps_error_set (err, PS_ESHAPE,
                                 "file %s: variable \"%s\" has shape %s, but the target layout "
                                 "gives it %s", piece->path, piece->var,
                                 ps_shape_str (&piece->shape, have, sizeof have),
                                 ps_shape_str (&target->shape, want, sizeof want));
        }
    }
    return PS_OK;
}

static int
s_compare_rows (const void *a, const void *b)
{
    const s_piece_t *x = *(const s_piece_t *const *) a;
    const s_piece_t *y = *(const s_piece_t *const *) b;
    return x->row_begin < y->row_begin ? -1 : x->row_begin > y->row_begin;
}

//  The pieces of target variable t into list (room for all sources), in
//  the order of their rows; *n receives how many. Checks that they cover
//  every row once and agree on the optimizer.
static int
s_pieces_of (const s_sources_t *sources, const ps_reshard_var_t *var, int t,
             const char *src_dir, s_piece_t **list, size_t *n, ps_error_t *err)
{
    size_t count = 0;
    for (size_t i = 0; i < sources->count; i++)
        if (sources->pieces [i].target == t)
            list [count++] = &sources->pieces [i];
    *n = count;
    if (count == 0)
        return ps_error_set (err, PS_ENOTFOUND, "reshard: variable \"%s\" has no snapshot file in %s",
                             var->var, src_dir);
    qsort (list, count, sizeof *list, s_compare_rows);
    int64_t next = 0;
    for (size_t i = 0; i < count; i++) {
        const s_piece_t *piece = list [i];
        if (piece->row_begin < next)
            return ps_error_set (err, PS_EINVAL,
                                 "reshard: rows [%lld,%lld) of \"%s\" are in both %s and %s, "
                                 "expected each row in one file", (long long) piece->row_begin,
                                 (long long) (next < piece->row_end ? next : piece->row_end),
                                 var->var, list [i - 1]->path, piece->path);
        if (piece->row_begin > next)
            return ps_error_set (err, PS_ENOTFOUND,
                                 "reshard: rows [%lld,%lld) of \"%s\" are in no snapshot file "
                                 "in %s", (long long) next, (long long) piece->row_begin,
                                 var->var, src_dir);
        next = piece->row_end;
        char what [160];
        if (i > 0 && ps_opt_config_differs (&piece->opt, &list [0]->opt, what, sizeof what))
            return ps_error_set (err, PS_EINVAL,
                                 "file %s: %s as in %s; the pieces of \"%s\" must have one "
                                 "optimizer configuration", piece->path, what, list [0]->path,
                                 var->var);
    }
    if (next < var->shape.dims [0])
        return ps_error_set (err, PS_ENOTFOUND,
                             "reshard: rows [%lld,%lld) of \"%s\" are in no snapshot file in %s",
                             (long long) next, (long long) var->shape.dims [0], var->var, src_dir);
    return PS_OK;
}

//  ---------------------------------------------------------------------
//  The second pass

//  One variable's arrays, whole.
typedef struct {
    float *values;
    float *slots [PS_OPT_MAX_SLOTS];
    int nslots;
    size_t row_count;           //  floats per row
} s_buffers_t;

static void
s_buffers_free (s_buffers_t *buffers)
{
    free (buffers->values);
    for (int i = 0; i < PS_OPT_MAX_SLOTS; i++)
        free (buffers->slots [i]);
    memset (buffers, 0, sizeof *buffers);
}

static int
s_buffers_alloc (s_buffers_t *buffers, const ps_reshard_var_t *var, ps_opt_kind_t kind,
                 ps_error_t *err)
{
    memset (buffers, 0, sizeof *buffers);
    size_t count = (size_t) ps_shape_count (&var->shape);
    buffers->row_count = (size_t) ps_shape_row_count (&var->shape);
    buffers->nslots = ps_opt_slot_count (kind);
    bool ok = (buffers->values = ps_floats_alloc (count)) != NULL;
    for (int i = 0; ok && i < buffers->nslots; i++)
        ok = (buffers->slots [i] = ps_floats_alloc (count)) != NULL;
    if (!ok) {
        s_buffers_free (buffers);
        return ps_error_set (err, PS_ETOOBIG, "reshard: cannot allocate %d arrays of %zu floats "
                             "for \"%s\"", 1 + ps_opt_slot_count (kind), count, var->var);
    }
    return PS_OK;
}

//  Read piece again into the variable's buffers and take its counters and
//  ledger. The file must still hold what the first pass saw.
static int
s_gather (s_piece_t *piece, s_buffers_t *buffers, ps_error_t *err)
{
    ps_snapshot_t snap;
    int rc = ps_snapshot_read (piece->path, &snap, err);
    if (rc)
        return rc;
    char what [160];
    if (strcmp (snap.var, piece->var) != 0 || !ps_shape_equal (&snap.shape, &piece->shape)
    ||  snap.row_begin != piece->row_begin || snap.row_end != piece->row_end
    ||  ps_opt_config_differs (&snap.opt, &piece->opt, what, sizeof what)) {
        ps_snapshot_release (&snap);
        return ps_error_set (err, PS_ECORRUPT, "file %s: changed while the checkpoint was being "
                             "resharded", piece->path);
    }
    size_t offset = (size_t) piece->row_begin * buffers->row_count;
    size_t bytes = (size_t) (piece->row_end - piece->row_begin) * buffers->row_count * sizeof (float);
    memcpy (buffers->values + offset, snap.values, bytes);
    for (int i = 0; i < buffers->nslots; i++)
        memcpy (buffers->slots [i] + offset, snap.slots [i], bytes);
    piece->opt_t = snap.opt_t;
    piece->version = snap.version;
    piece->duplicates = snap.duplicates;
    piece->ledger = snap.ledger;
    snap.ledger = NULL;
    ps_snapshot_release (&snap);
    return PS_OK;
}

//  Write partition k of var from the buffers, with the bookkeeping merged
//  from the pieces that overlap its rows, into entry.
static int
s_write_part (const ps_reshard_var_t *var, int k, s_piece_t *const *pieces, size_t npieces,
              const s_buffers_t *buffers, const char *dst_dir, ps_snap_file_t *entry,
              ps_error_t *err)
{
    int64_t begin = var->splits [k], end = var->splits [k + 1];
    ps_snapshot_t snap = {
        .part = (uint32_t) k, .shape = var->shape, .row_begin = begin, .row_end = end,
        .opt_t = UINT64_MAX, .version = UINT64_MAX,
    };
    snprintf (snap.var, sizeof snap.var, "%s", var->var);
    //  The smallest counts and the steps every overlapping piece applied:
    //  a step that reached only some of them is applied again to all rows.
    //  Duplicates take the largest count: each piece counted the repeated
    //  pushes it refused, and a push refused by several pieces is still one
    //  repeated step (a sum would count it once per piece).
    ps_ledger_t *merged = NULL;
    const ps_ledger_t *ledger = NULL;
    size_t first = npieces;
    for (size_t i = 0; i < npieces; i++) {
        const s_piece_t *piece = pieces [i];
        if (piece->row_end <= begin || piece->row_begin >= end)
            continue;
        if (first == npieces) {
            first = i;
            snap.opt = piece->opt;
            ledger = piece->ledger;
        }
        else
        if (!ps_ledger_equal (ledger, piece->ledger)) {
            ps_ledger_t *both = ps_ledger_intersect (ledger, piece->ledger, err);
            if (!both) {
                ps_ledger_destroy (&merged);
                return ps_error_prefix (err, PS_ETOOBIG, "reshard: \"%s\" partition %d",
                                        var->var, k);
            }
            ps_ledger_destroy (&merged);
            ledger = merged = both;
        }
        if (piece->opt_t < snap.opt_t)
            snap.opt_t = piece->opt_t;
        if (piece->version < snap.version)
            snap.version = piece->version;
        if (piece->duplicates > snap.duplicates)
            snap.duplicates = piece->duplicates;
    }
    //  The pieces cover every row, so at least one overlaps.
    assert (first < npieces);
    uint64_t common = ps_ledger_count (ledger);
    for (size_t i = first; i < npieces; i++) {
        const s_piece_t *piece = pieces [i];
        if (piece->row_end <= begin || piece->row_begin >= end)
            continue;
        uint64_t count = ps_ledger_count (piece->ledger);
        if (count != common)
            ps_warn ("reshard: \"%s\" partition %d (rows [%lld,%lld)): %s has %llu steps that "
                     "other pieces lack; keeping the %llu steps every piece applied, and t %llu",
                     var->var, k, (long long) begin, (long long) end, piece->path,
                     (unsigned long long) (count - common), (unsigned long long) common,
                     (unsigned long long) snap.opt_t);
    }
    //  The writer only reads the ledger; the struct's field is not const
    //  because ps_snapshot_read fills in the same struct.
    snap.ledger = (ps_ledger_t *) ledger;
    size_t offset = (size_t) begin * buffers->row_count;
    snap.values = buffers->values + offset;
    for (int i = 0; i < buffers->nslots; i++)
        snap.slots [i] = buffers->slots [i] + offset;

    int rc = PS_OK;
    char path [4096];
    if (ps_snapshot_filename (var->var, (uint32_t) k, entry->file, sizeof entry->file))
        rc = ps_error_set (err, PS_EINVAL, "reshard: the file name of \"%s\" partition %d is too "
                           "long", var->var, k);
    else
    if ((size_t) snprintf (path, sizeof path, "%s/%s", dst_dir, entry->file) >= sizeof path)
        rc = ps_error_set (err, PS_EINVAL, "reshard: the path of %s in %s is too long",
                           entry->file, dst_dir);
    if (rc == PS_OK)
        rc = ps_snapshot_write (path, &snap, err);
    if (rc == PS_OK)
        rc = ps_snapshot_summary (path, &entry->bytes, &entry->crc, err);
    ps_ledger_destroy (&merged);
    if (rc)
        return rc;
    entry->server = var->servers ? var->servers [k] : -1;
    snprintf (entry->var, sizeof entry->var, "%s", var->var);
    entry->part = (uint32_t) k;
    entry->version = snap.version;
    return PS_OK;
}

//  Assemble target variable t from its pieces and write its partitions
//  into list.
static int
s_reshard_var (const ps_reshard_var_t *var, s_piece_t **pieces, size_t npieces,
               const char *dst_dir, ps_snap_file_t *list, ps_error_t *err)
{
    s_buffers_t buffers;
    int rc = s_buffers_alloc (&buffers, var, pieces [0]->opt.kind, err);
    for (size_t i = 0; i < npieces && rc == PS_OK; i++)
        rc = s_gather (pieces [i], &buffers, err);
    for (int k = 0; k < var->nparts && rc == PS_OK; k++)
        rc = s_write_part (var, k, pieces, npieces, &buffers, dst_dir, &list [k], err);
    for (size_t i = 0; i < npieces; i++)
        ps_ledger_destroy (&pieces [i]->ledger);
    s_buffers_free (&buffers);
    return rc;
}

//  ---------------------------------------------------------------------

int
ps_reshard (const char *src_dir, const ps_reshard_var_t *vars, int nvars,
            const char *dst_dir, ps_snap_file_t **files, size_t *nfiles, ps_error_t *err)
{
    assert (src_dir);
    assert (dst_dir);
    assert (files);
    assert (nfiles);
    int rc = s_check_layout (vars, nvars, err);
    if (rc)
        return rc;
    size_t total = 0;
    for (int i = 0; i < nvars; i++)
        total += (size_t) vars [i].nparts;

    s_sources_t sources = { 0 };
    s_piece_t **list = NULL;
    ps_snap_file_t *out = NULL;
    rc = s_list_sources (src_dir, &sources, err);
    //  Everything that can be checked is checked before the first write.
    if (rc == PS_OK)
        rc = s_survey (&sources, vars, nvars, err);
    if (rc == PS_OK) {
        list = calloc (sources.count + 1, sizeof *list);
        out = calloc (total + 1, sizeof *out);
        if (!list || !out)
            rc = ps_error_set (err, PS_ETOOBIG, "reshard: cannot allocate the file lists");
    }
    for (int i = 0; i < nvars && rc == PS_OK; i++) {
        size_t n;
        rc = s_pieces_of (&sources, &vars [i], i, src_dir, list, &n, err);
    }
    if (rc == PS_OK)
        rc = s_prepare_dst (src_dir, dst_dir, err);
    size_t written = 0;
    for (int i = 0; i < nvars && rc == PS_OK; i++) {
        size_t n;
        rc = s_pieces_of (&sources, &vars [i], i, src_dir, list, &n, err);
        if (rc == PS_OK)
            rc = s_reshard_var (&vars [i], list, n, dst_dir, out + written, err);
        written += (size_t) vars [i].nparts;
    }
    s_sources_free (&sources);
    free (list);
    if (rc) {
        free (out);
        return rc;
    }
    *files = out;
    *nfiles = total;
    return PS_OK;
}
