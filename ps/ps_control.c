//  The control requests of a ps-server; see ps_control.h.

#include "ps_control.h"
#include "ps_log.h"
#include "ps_proto_conv.h"
#include "ps_snapshot.h"

#include <assert.h>
#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct _ps_control_t {
    ps_table_t *table;          //  the server's, borrowed
    ps_opt_config_t opt;        //  for partitions created from now on
    ps_ckpt_root_t *root;       //  where snapshots go, or NULL: none are taken
    uint64_t fence;             //  generation pushes must carry once fenced, or 0
};

ps_control_t *
ps_control_new (ps_table_t *table, const ps_opt_config_t *opt, const char *checkpoint_root,
                ps_error_t *err)
{
    if (ps_opt_config_validate (opt, err))
        return NULL;
    ps_control_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    if (checkpoint_root && !(self->root = ps_ckpt_root_new (checkpoint_root, err))) {
        free (self);
        return NULL;
    }
    self->table = table;
    self->opt = *opt;
    return self;
}

void
ps_control_destroy (ps_control_t **self_p)
{
    assert (self_p);
    ps_control_t *self = *self_p;
    if (self) {
        ps_ckpt_root_destroy (&self->root);
        free (self);
        *self_p = NULL;
    }
}

uint64_t
ps_control_fence_generation (ps_control_t *self)
{
    assert (self);
    return self->fence;
}

int
ps_control_create (ps_control_t *self, const ps_proto_t *req, ps_proto_t *reply,
                   ps_writer_t *writer, ps_error_t *err)
{
    const ps_proto_partition_array_t *list = &req->create.partitions;
    size_t count = list->count;
    ps_partition_t **made = calloc (count + 1, sizeof *made);
    if (!made)
        abort ();
    size_t existing = 0;
    int rc = PS_OK;
    //  Build every new partition first; the table changes only when all
    //  of them are valid, so a bad request leaves the server as it was.
    for (size_t i = 0; i < count && rc == PS_OK; i++) {
        const ps_proto_partition_t *spec = &list->items [i];
        const char *var = spec->var;
        ps_shape_t shape;
        ps_init_t init;
        const ps_proto_uint_array_t *rows = &spec->rows;
        uint64_t part = spec->part;
        //  The decoder has held the name to PS_NAME_MAX - 1 bytes, the
        //  part below 2^32 and rows to two numbers below 2^63
        //  (protocol.json's bounds).
        if ((rc = ps_proto_shape_get (&spec->shape, &shape, err)) != PS_OK
        ||  (rc = ps_proto_init_get (&spec->init, &init, err)) != PS_OK)
            rc = ps_error_prefix (err, rc, "%s/%llu", var, (unsigned long long) part);
        if (rc)
            break;
        int64_t begin = (int64_t) rows->items [0];
        int64_t end = (int64_t) rows->items [1];
        ps_partition_t *old = ps_table_lookup (self->table, var, (uint32_t) part);
        for (size_t j = 0; j < i && rc == PS_OK; j++)
            if (made [j] && strcmp (ps_partition_var (made [j]), var) == 0
            &&  ps_partition_part (made [j]) == part)
                rc = ps_error_set (err, PS_EINVAL, "%s/%llu appears twice in the request",
                                   var, (unsigned long long) part);
        if (rc)
            break;
        if (old) {
            char have [128], want [128];
            if (!ps_shape_equal (ps_partition_shape (old), &shape)
            ||  ps_partition_row_begin (old) != begin || ps_partition_row_end (old) != end)
                rc = ps_error_set (err, PS_EEXIST,
                                   "%s/%llu exists with shape %s rows [%lld,%lld), asked for %s rows [%lld,%lld)",
                                   var, (unsigned long long) part,
                                   ps_shape_str (ps_partition_shape (old), have, sizeof have),
                                   (long long) ps_partition_row_begin (old),
                                   (long long) ps_partition_row_end (old),
                                   ps_shape_str (&shape, want, sizeof want),
                                   (long long) begin, (long long) end);
            existing++;
            continue;
        }
        made [i] = ps_partition_new (var, (uint32_t) part, &shape, begin, end, &init,
                                     &self->opt, err);
        if (!made [i])
            rc = ps_error_prefix (err, err->code, "%s/%llu", var, (unsigned long long) part);
    }
    size_t created = 0;
    for (size_t i = 0; i < count; i++) {
        if (!made [i])
            continue;
        if (rc == PS_OK) {
            ps_table_put (self->table, made [i]);
            created++;
        }
        else
            ps_partition_destroy (&made [i]);
    }
    free (made);
    if (rc)
        return rc;
    ps_info ("created %zu partitions (%zu existed), %zu held", created, existing,
             ps_table_size (self->table));
    reply->create_ok.created = created;
    reply->create_ok.existing = existing;
    ps_writer_encode (writer, reply);
    return PS_OK;
}

int
ps_control_set_optimizer (ps_control_t *self, const ps_proto_t *req, ps_proto_t *reply,
                          ps_writer_t *writer, ps_error_t *err)
{
    ps_opt_config_t opt;
    int rc = ps_proto_optimizer_get (&req->set_optimizer.optimizer, &opt, err);
    if (rc)
        return rc;
    //  A partition that cannot get new slots keeps its old optimizer; the
    //  error says which, and the request can be repeated once memory is
    //  freed (repeating it on partitions already switched keeps their slots).
    size_t count;
    ps_partition_t **list = ps_table_sorted (self->table, &count);
    for (size_t i = 0; i < count && rc == PS_OK; i++)
        rc = ps_partition_set_optimizer (list [i], &opt, err);
    free (list);
    if (rc)
        return rc;
    self->opt = opt;
    ps_info ("optimizer %s lr %g on %zu partitions", ps_opt_kind_name (opt.kind), opt.lr,
             ps_table_size (self->table));
    reply->set_optimizer_ok.partitions = ps_table_size (self->table);
    ps_writer_encode (writer, reply);
    return PS_OK;
}

//  A snapshot file as a reply entry; file must outlive the encoding.
static ps_proto_snap_file_t
s_snap_file (ps_partition_t *part, const char *file, uint64_t bytes, uint32_t crc,
             uint64_t version)
{
    return (ps_proto_snap_file_t) { ps_partition_var (part), ps_partition_part (part), file,
                                    bytes, crc, version };
}

//  The directory inside the checkpoint root that a snapshot or restore
//  request names (relative to the root), into dir; with create, made when
//  missing. Refuses every request when the server has no root.
static int
s_request_dir (ps_control_t *self, const char *type, const char *name, bool create, char *dir,
               size_t len, ps_error_t *err)
{
    if (!self->root)
        return ps_error_set (err, PS_EINVAL, "%s: this server has no checkpoint root; start it "
                             "with --checkpoint-root DIR", type);
    int rc = ps_ckpt_root_resolve (self->root, name, create, dir, len, err);
    return rc ? ps_error_prefix (err, rc, "%s", type) : PS_OK;
}

int
ps_control_snapshot (ps_control_t *self, const ps_proto_t *req, ps_proto_t *reply,
                     ps_writer_t *writer, ps_error_t *err)
{
    char dir [PATH_MAX];
    int rc = s_request_dir (self, "snapshot", req->snapshot.dir, true, dir, sizeof dir, err);
    if (rc)
        return rc;
    size_t count;
    ps_partition_t **list = ps_table_sorted (self->table, &count);
    typedef char s_name_t [PS_NAME_MAX * 3 + 32];
    s_name_t *names = calloc (count + 1, sizeof *names);
    ps_proto_snap_file_t *files = calloc (count + 1, sizeof *files);
    if (!names || !files)
        abort ();
    for (size_t i = 0; i < count && rc == PS_OK; i++) {
        uint64_t bytes, version;
        uint32_t crc;
        rc = ps_partition_save (list [i], dir, names [i], sizeof names [i], &bytes, &crc,
                                &version, err);
        files [i] = s_snap_file (list [i], names [i], bytes, crc, version);
    }
    if (rc == PS_OK) {
        reply->snapshot_ok.files = (ps_proto_snap_file_array_t) { count, files };
        ps_writer_encode (writer, reply);
        ps_info ("snapshot of %zu partitions written to %s", count, dir);
    }
    free (files);
    free (names);
    free (list);
    return rc;
}

static bool
s_is_snapshot_file (const char *name)
{
    size_t len = strlen (name);
    return len > 5 && strcmp (name + len - 5, ".snap") == 0 && name [0] != '.';
}

//  The files a restore reads: the named partitions' files, or every
//  snapshot file in dir.
static zlistx_t *
s_restore_files (const char *dir, const ps_proto_partref_array_t *parts, ps_error_t *err)
{
    zlistx_t *files = zlistx_new ();
    zlistx_set_destructor (files, (zlistx_destructor_fn *) zstr_free);
    zlistx_set_duplicator (files, (zlistx_duplicator_fn *) strdup);
    zlistx_set_comparator (files, (zlistx_comparator_fn *) strcmp);
    if (parts) {
        for (size_t i = 0; i < parts->count; i++) {
            const char *var = parts->items [i].var;
            uint64_t part = parts->items [i].part;
            char file [PS_NAME_MAX * 3 + 32];
            if (ps_snapshot_filename (var, (uint32_t) part, file, sizeof file)) {
                ps_error_set (err, PS_EINVAL, "restore: parts[%zu] is not a valid partition", i);
                zlistx_destroy (&files);
                return NULL;
            }
            if (zlistx_find (files, file)) {
                ps_error_set (err, PS_EINVAL, "restore: partition %s/%llu is listed twice",
                              var, (unsigned long long) part);
                zlistx_destroy (&files);
                return NULL;
            }
            zlistx_add_end (files, file);
        }
        return files;
    }
    DIR *handle = opendir (dir);
    if (!handle) {
        ps_error_set (err, errno == ENOENT ? PS_ENOTFOUND : PS_EIO,
                      "restore: cannot open directory %s: %s", dir, strerror (errno));
        zlistx_destroy (&files);
        return NULL;
    }
    struct dirent *entry;
    while ((entry = readdir (handle)))
        if (s_is_snapshot_file (entry->d_name))
            zlistx_add_end (files, entry->d_name);
    closedir (handle);
    zlistx_sort (files);
    return files;
}

int
ps_control_restore (ps_control_t *self, const ps_proto_t *req, ps_proto_t *reply,
                    ps_writer_t *writer, ps_error_t *err)
{
    char dir [PATH_MAX];
    int rc = s_request_dir (self, "restore", req->restore.dir, false, dir, sizeof dir, err);
    if (rc)
        return rc;
    zlistx_t *files = s_restore_files (dir, req->restore.has_parts ? &req->restore.parts : NULL,
                                       err);
    if (!files)
        return err->code;
    size_t count = zlistx_size (files);
    ps_partition_t **loaded = calloc (count + 1, sizeof *loaded);
    ps_proto_snap_file_t *entries = calloc (count + 1, sizeof *entries);
    if (!loaded || !entries)
        abort ();
    //  Verify and load everything before replacing anything. A file that
    //  is a symbolic link leading out of the root is not read.
    size_t i = 0;
    for (const char *file = zlistx_first (files); file && rc == PS_OK; file = zlistx_next (files)) {
        char path [PATH_MAX + PS_NAME_MAX * 3 + 32];
        snprintf (path, sizeof path, "%s/%s", dir, file);
        rc = ps_ckpt_root_check (self->root, path, err);
        if (rc) {
            ps_error_prefix (err, rc, "restore");
            break;
        }
        loaded [i] = ps_partition_load (path, err);
        if (!loaded [i++]) {
            rc = err->code;
            break;
        }
        //  A file holds the partition its name says, or it was renamed or
        //  copied over another: restoring it would put a partition in the
        //  wrong place.
        char expect [PS_NAME_MAX * 3 + 32];
        ps_partition_t *got = loaded [i - 1];
        if (ps_snapshot_filename (ps_partition_var (got), ps_partition_part (got), expect, sizeof expect)
        ||  strcmp (expect, file) != 0)
            rc = ps_error_set (err, PS_ECORRUPT, "restore: file %s holds partition %s/%u (file %s)",
                               path, ps_partition_var (got), ps_partition_part (got), expect);
    }
    i = 0;
    for (const char *file = zlistx_first (files); file; file = zlistx_next (files), i++) {
        if (rc != PS_OK) {
            ps_partition_destroy (&loaded [i]);
            continue;
        }
        char path [PATH_MAX + PS_NAME_MAX * 3 + 32];
        snprintf (path, sizeof path, "%s/%s", dir, file);
        ps_partition_stats_t stats;
        ps_partition_stats (loaded [i], &stats);
        uint64_t bytes = 0;
        uint32_t crc = 0;
        //  The load verified the file; its size and trailer are only
        //  reported, so failing to stat it again is not worth failing for.
        if (ps_snapshot_summary (path, &bytes, &crc, NULL))
            ps_warn ("restore: cannot re-read the size of %s", path);
        entries [i] = s_snap_file (loaded [i], file, bytes, crc, stats.updates);
        ps_table_put (self->table, loaded [i]);
    }
    if (rc == PS_OK) {
        reply->restore_ok.files = (ps_proto_snap_file_array_t) { count, entries };
        ps_writer_encode (writer, reply);
        ps_info ("restored %zu partitions from %s", count, dir);
    }
    free (entries);
    free (loaded);
    zlistx_destroy (&files);
    return rc;
}

int
ps_control_fence (ps_control_t *self, const ps_proto_t *req, ps_proto_t *reply,
                  ps_writer_t *writer, ps_error_t *err)
{
    //  Generation 0 is what an untagged push would have to match, and a
    //  client cannot tag a push with it: the decoder refuses a fence at 0
    //  (protocol.json: fence.generation >= 1), so a fence cannot fail and
    //  leaves err, which every control handler takes, untouched.
    (void) err;
    self->fence = req->fence.generation;
    ps_debug ("fenced at generation %" PRIu64, self->fence);
    ps_writer_encode (writer, reply);
    return PS_OK;
}
