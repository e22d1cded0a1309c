//  The control requests of a ps-server; see ps_control.h.

#include "ps_control.h"
#include "ps_file.h"
#include "ps_log.h"
#include "ps_proto_conv.h"
#include "ps_snapshot.h"
#include "ps_sparse.h"

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
    ps_tables_t *tables;        //  the server's table shards, borrowed
    ps_opt_config_t opt;        //  for partitions created from now on
    ps_ckpt_root_t *root;       //  where snapshots go, or NULL: none are taken
    uint64_t fence;             //  generation pushes must carry once fenced, or 0
};

ps_control_t *
ps_control_new (ps_table_t *table, ps_tables_t *tables, const ps_opt_config_t *opt,
                const char *checkpoint_root, ps_error_t *err)
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
    self->tables = tables;
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

//  A table shard's snapshot file as a reply entry; file must outlive the
//  encoding.
static ps_proto_table_file_t
s_table_file (ps_tshard_t *tshard, const char *file, bool full)
{
    ps_sparse_stats_t stats;
    ps_sparse_stats (ps_tshard_table (tshard), &stats);
    return (ps_proto_table_file_t) { ps_tshard_name (tshard), ps_tshard_shard (tshard),
                                     ps_tshard_shards (tshard), file, full, stats.rows,
                                     ps_sparse_steps_applied (ps_tshard_table (tshard)) };
}

//  Whether base names the snapshot written into dir: the same directory,
//  or dir renamed as a checkpoint is when committed (ckpt-<step>.tmp
//  becomes ckpt-<step>: common/store/ps_checkpoint.h), which is the only
//  name the snapshot has once it is usable.
static bool
s_same_snapshot (const char *dir, const char *base)
{
    size_t len = strlen (base);
    return strcmp (dir, base) == 0
        || (strncmp (dir, base, len) == 0 && strcmp (dir + len, ".tmp") == 0);
}

//  An incremental snapshot holds what changed since each table's last full
//  snapshot, which must be the one the request names as its base: else
//  the pair would not restore the table. Checked for every table before
//  any file is written.
static int
s_check_base (ps_control_t *self, const ps_proto_snapshot_t *req, ps_error_t *err)
{
    if (!req->has_base)
        return ps_error_set (err, PS_EINVAL, "snapshot: an incremental snapshot needs 'base', "
                             "the dir of the tables' last full snapshot");
    char base [PATH_MAX];
    int rc = s_request_dir (self, "snapshot: base", req->base, false, base, sizeof base, err);
    if (rc)
        return rc;
    size_t count;
    ps_tshard_t **list = ps_tables_sorted (self->tables, &count);
    for (size_t i = 0; i < count && rc == PS_OK; i++) {
        const char *last = ps_tshard_last_full (list [i]);
        if (!*last)
            rc = ps_error_set (err, PS_EINVAL, "snapshot: table %s has had no full snapshot "
                               "since it was created or restored, so none can be in base %s: "
                               "take a full one first", ps_tshard_name (list [i]), req->base);
        else
        if (!s_same_snapshot (last, req->base))
            rc = ps_error_set (err, PS_EINVAL, "snapshot: table %s: its last full snapshot is "
                               "in %s, not in base %s", ps_tshard_name (list [i]), last,
                               req->base);
    }
    free (list);
    return rc;
}

//  Write every table shard into dir (full, or incremental after base),
//  into files [0..count) named in names.
static int
s_snapshot_tables (const ps_proto_snapshot_t *req, const char *dir,
                   ps_tshard_t **list, size_t count, char (*names) [PATH_MAX],
                   ps_proto_table_file_t *files, ps_error_t *err)
{
    bool full = !(req->has_incremental && req->incremental);
    for (size_t i = 0; i < count; i++) {
        ps_tshard_t *tshard = list [i];
        char path [PATH_MAX * 2 + 2];
        if (ps_tables_filename (ps_tshard_name (tshard), ps_tshard_shard (tshard),
                                ps_tshard_shards (tshard), full, names [i], PATH_MAX))
            return ps_error_set (err, PS_EINVAL, "snapshot: no file name for table %s",
                                 ps_tshard_name (tshard));
        snprintf (path, sizeof path, "%s/%s", dir, names [i]);
        int rc = ps_sparse_save (ps_tshard_table (tshard), path, full, err);
        if (rc)
            return ps_error_prefix (err, rc, "snapshot: table %s", ps_tshard_name (tshard));
        if (full)
            ps_tshard_set_last_full (tshard, req->dir);
        files [i] = s_table_file (tshard, names [i], full);
    }
    return PS_OK;
}

int
ps_control_snapshot (ps_control_t *self, const ps_proto_t *req, ps_proto_t *reply,
                     ps_writer_t *writer, ps_error_t *err)
{
    char dir [PATH_MAX];
    int rc = s_request_dir (self, "snapshot", req->snapshot.dir, true, dir, sizeof dir, err);
    if (rc == PS_OK && req->snapshot.has_incremental && req->snapshot.incremental)
        rc = s_check_base (self, &req->snapshot, err);
    if (rc)
        return rc;
    size_t ntables;
    ps_tshard_t **tables = ps_tables_sorted (self->tables, &ntables);
    char (*table_names) [PATH_MAX] = calloc (ntables + 1, sizeof *table_names);
    ps_proto_table_file_t *table_files = calloc (ntables + 1, sizeof *table_files);
    if (!table_names || !table_files)
        abort ();
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
    if (rc == PS_OK)
        rc = s_snapshot_tables (&req->snapshot, dir, tables, ntables, table_names,
                                table_files, err);
    if (rc == PS_OK) {
        reply->snapshot_ok.files = (ps_proto_snap_file_array_t) { count, files };
        reply->snapshot_ok.tables = (ps_proto_table_file_array_t) { ntables, table_files };
        ps_writer_encode (writer, reply);
        ps_info ("snapshot of %zu partitions and %zu table shards written to %s", count,
                 ntables, dir);
    }
    free (files);
    free (names);
    free (list);
    free (table_files);
    free (table_names);
    free (tables);
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

//  The table shards a restore reads, loaded and verified: one per table
//  file in dir, full ones or, with a base, incremental ones each read on
//  top of the full file of the same shard in base.
typedef struct {
    size_t count;
    ps_tshard_t **tshards;
    char (*files) [PATH_MAX];
    ps_proto_table_file_t *entries;
} s_restored_tables_t;

static void
s_restored_tables_release (s_restored_tables_t *restored)
{
    for (size_t i = 0; i < restored->count; i++)
        ps_tshard_unlink (&restored->tshards [i]);
    free (restored->tshards);
    free (restored->files);
    free (restored->entries);
    *restored = (s_restored_tables_t) { 0 };
}

//  Load table file `file` of dir (on top of its full file in base_dir when
//  that is not NULL) into restored's next entry. A cluster's servers write
//  their shards into one directory: a server takes the file of the shard
//  it holds (table_create, which the coordinator sends before a restore,
//  says which) and leaves the other servers' files unread, so that a
//  restore costs one shard's memory and time, not the whole table's. A
//  file of a table it holds no shard of is refused: which shard it should
//  take is not its to guess.
static int
s_restore_table (ps_control_t *self, const char *dir, const char *base_dir, const char *file,
                 s_restored_tables_t *restored, ps_error_t *err)
{
    uint32_t shard, shards;
    bool full;
    if (!ps_tables_parse_filename (file, &shard, &shards, &full))
        return ps_error_set (err, PS_EINVAL, "restore: %s is not a table file", file);
    ps_tshard_t *held = ps_tables_lookup_file (self->tables, file);
    if (!held)
        return ps_error_set (err, PS_ENOTFOUND, "restore: %s/%s is a shard of a table this "
                             "server holds none of; create the table (table_create) before "
                             "restoring it", dir, file);
    if (ps_tshard_shard (held) != shard || ps_tshard_shards (held) != shards)
        return PS_OK;
    char path [PATH_MAX * 2 + 2], full_path [PATH_MAX * 2 + 2];
    snprintf (path, sizeof path, "%s/%s", dir, file);
    int rc = ps_ckpt_root_check (self->root, path, err);
    if (rc == PS_OK && base_dir) {
        char full_file [PATH_MAX];
        if (ps_tables_full_filename (file, full_file, sizeof full_file))
            return ps_error_set (err, PS_EINVAL, "restore: %s is not an incremental table file",
                                 file);
        snprintf (full_path, sizeof full_path, "%s/%s", base_dir, full_file);
        rc = ps_ckpt_root_check (self->root, full_path, err);
    }
    if (rc)
        return ps_error_prefix (err, rc, "restore");
    ps_sparse_t *table = ps_sparse_load (base_dir ? full_path : path, base_dir ? path : NULL,
                                         err);
    if (!table)
        return ps_error_prefix (err, err->code, "restore");
    //  A file holds the table its name says, or it was renamed or copied
    //  over another: restoring it would put rows where no worker looks.
    const ps_tablespec_t *spec = ps_sparse_spec (table);
    const ps_tablespec_t *held_spec = ps_sparse_spec (ps_tshard_table (held));
    char diff [PS_ERROR_MSG_MAX / 2];
    if (strcmp (spec->name, held_spec->name) != 0)
        rc = ps_error_set (err, PS_ECORRUPT, "restore: file %s holds table %s, expected %s",
                           path, spec->name, held_spec->name);
    else
    //  The rows, their slots and the ledger mean what the spec says: ones
    //  of another optimizer, width or initializer would train on garbage.
    if (ps_tablespec_differs (held_spec, spec, diff, sizeof diff))
        rc = ps_error_set (err, PS_EINVAL, "restore: file %s holds table %s with another spec "
                           "than the server's (%s)", path, spec->name, diff);
    if (rc) {
        ps_sparse_destroy (&table);
        return rc;
    }
    size_t i = restored->count++;
    restored->tshards [i] = ps_tshard_new (table, shard, shards);
    snprintf (restored->files [i], PATH_MAX, "%s", file);
    restored->entries [i] = s_table_file (restored->tshards [i], restored->files [i], full);
    return PS_OK;
}

static int
s_restore_tables (ps_control_t *self, const ps_proto_restore_t *req, const char *dir,
                  s_restored_tables_t *restored, ps_error_t *err)
{
    char base_dir [PATH_MAX];
    int rc = req->has_base ? s_request_dir (self, "restore: base", req->base, false, base_dir,
                                            sizeof base_dir, err)
                           : PS_OK;
    if (rc)
        return rc;
    zlistx_t *files = zlistx_new ();
    zlistx_set_destructor (files, (zlistx_destructor_fn *) zstr_free);
    zlistx_set_duplicator (files, (zlistx_duplicator_fn *) strdup);
    zlistx_set_comparator (files, (zlistx_comparator_fn *) strcmp);
    DIR *handle = opendir (dir);
    if (!handle)
        rc = ps_error_set (err, errno == ENOENT ? PS_ENOTFOUND : PS_EIO,
                           "restore: cannot open directory %s: %s", dir, strerror (errno));
    while (rc == PS_OK) {
        struct dirent *entry;
        int more = ps_file_next_entry (handle, dir, &entry, err);
        if (more <= 0) {
            rc = more;
            break;
        }
        uint32_t shard, shards;
        bool full;
        if (ps_tables_parse_filename (entry->d_name, &shard, &shards, &full)
        &&  full == !req->has_base)
            zlistx_add_end (files, entry->d_name);
    }
    if (handle)
        closedir (handle);
    zlistx_sort (files);
    size_t count = zlistx_size (files);
    restored->tshards = calloc (count + 1, sizeof *restored->tshards);
    restored->files = calloc (count + 1, sizeof *restored->files);
    restored->entries = calloc (count + 1, sizeof *restored->entries);
    if (!restored->tshards || !restored->files || !restored->entries)
        abort ();
    for (const char *file = zlistx_first (files); file && rc == PS_OK; file = zlistx_next (files))
        rc = s_restore_table (self, dir, req->has_base ? base_dir : NULL, file, restored, err);
    zlistx_destroy (&files);
    return rc;
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
    s_restored_tables_t tables = { 0 };
    if (rc == PS_OK)
        rc = s_restore_tables (self, &req->restore, dir, &tables, err);
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
    //  A shard restored from a full snapshot alone counts its changes
    //  from that snapshot on; one restored from an incremental one has no
    //  full snapshot its next incremental one could follow.
    for (size_t t = 0; rc == PS_OK && t < tables.count; t++) {
        ps_tshard_set_last_full (tables.tshards [t], req->restore.has_base ? ""
                                                                           : req->restore.dir);
        ps_tables_put (self->tables, ps_tshard_link (tables.tshards [t]));
    }
    if (rc == PS_OK) {
        reply->restore_ok.files = (ps_proto_snap_file_array_t) { count, entries };
        reply->restore_ok.tables = (ps_proto_table_file_array_t) { tables.count,
                                                                   tables.entries };
        //  Fenced in the same step: a push queued before the restore,
        //  computed against the values it replaced, is refused from here.
        if (req->restore.has_generation)
            self->fence = req->restore.generation;
        ps_writer_encode (writer, reply);
        ps_info ("restored %zu partitions and %zu table shards from %s", count, tables.count,
                 dir);
    }
    s_restored_tables_release (&tables);
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

//  Writes the probe's token, a string, to fd.
static int
s_write_token (int fd, void *arg)
{
    const char *token = arg;
    return ps_file_write_all (fd, token, strlen (token), NULL);
}

int
ps_control_probe_root (ps_control_t *self, const ps_proto_t *req, ps_proto_t *reply,
                       ps_writer_t *writer, ps_error_t *err)
{
    const char *name = req->probe_root.name;
    if (!self->root)
        return ps_error_set (err, PS_EINVAL, "probe_root: this server has no checkpoint root; "
                             "start it with --checkpoint-root DIR");
    //  One plain component, so that the file is in the root itself (the
    //  decoder has held it to 255 bytes).
    bool plain = *name && strcmp (name, ".") != 0 && strcmp (name, "..") != 0;
    for (const char *c = name; *c && plain; c++)
        plain = *c != '/' && (unsigned char) *c >= 0x20 && *c != 0x7f;
    if (!plain)
        return ps_error_set (err, PS_EINVAL, "probe_root: name \"%s\": expected one path "
                             "component (no '/', '.', '..' or control character)", name);
    char path [PATH_MAX];
    if (snprintf (path, sizeof path, "%s/%s", ps_ckpt_root_path (self->root), name)
        >= (int) sizeof path)
        return ps_error_set (err, PS_EINVAL, "probe_root: the path of \"%s\" is too long", name);
    int rc = ps_file_write_beside (path, s_write_token, (void *) req->probe_root.token, err);
    if (rc)
        return ps_error_prefix (err, rc, "probe_root");
    reply->probe_root_ok.root = ps_ckpt_root_path (self->root);
    ps_writer_encode (writer, reply);
    return PS_OK;
}

int
ps_control_table_create (ps_control_t *self, const ps_proto_t *req, ps_proto_t *reply,
                         ps_writer_t *writer, ps_error_t *err)
{
    const ps_proto_table_create_t *create = &req->table_create;
    //  The decoder has held shards to 1..2^32-1 and shard below 2^32-1.
    if (create->shard >= create->shards)
        return ps_error_set (err, PS_EINVAL, "table_create: shard %" PRIu64 " is not below "
                             "shards %" PRIu64, create->shard, create->shards);
    uint32_t shard = (uint32_t) create->shard, shards = (uint32_t) create->shards;
    size_t count = create->tables.count;
    ps_tshard_t **made = calloc (count + 1, sizeof *made);
    if (!made)
        abort ();
    size_t existing = 0;
    int rc = PS_OK;
    //  Build every new shard first; the tables change only when all of
    //  them are valid, so a bad request leaves the server as it was.
    for (size_t i = 0; i < count && rc == PS_OK; i++) {
        const ps_proto_tablespec_t *item = &create->tables.items [i];
        ps_tablespec_t spec;
        rc = ps_proto_tablespec_get (item, &spec, err);
        if (rc) {
            ps_error_prefix (err, rc, "table_create: tables[%zu]", i);
            break;
        }
        for (size_t j = 0; j < i && rc == PS_OK; j++)
            if (strcmp (create->tables.items [j].name, item->name) == 0)
                rc = ps_error_set (err, PS_EINVAL, "table_create: table %s appears twice in "
                                   "the request", item->name);
        ps_tshard_t *old = ps_tables_lookup (self->tables, item->name);
        if (rc == PS_OK && old) {
            char diff [PS_ERROR_MSG_MAX / 2];
            if (ps_tshard_shard (old) != shard || ps_tshard_shards (old) != shards)
                rc = ps_error_set (err, PS_EEXIST, "table_create: table %s exists as shard %"
                                   PRIu32 " of %" PRIu32 ", asked for shard %" PRIu32 " of %"
                                   PRIu32, item->name, ps_tshard_shard (old),
                                   ps_tshard_shards (old), shard, shards);
            else
            if (ps_tablespec_differs (ps_sparse_spec (ps_tshard_table (old)), &spec, diff,
                                      sizeof diff))
                rc = ps_error_set (err, PS_EEXIST, "table_create: table %s exists with "
                                   "another spec (%s)", item->name, diff);
            existing++;
            continue;
        }
        if (rc)
            break;
        ps_sparse_t *table = ps_sparse_new (&spec, err);
        if (!table)
            rc = ps_error_prefix (err, err->code, "table_create: tables[%zu]", i);
        else
            made [i] = ps_tshard_new (table, shard, shards);
    }
    size_t created = 0;
    for (size_t i = 0; i < count; i++) {
        if (!made [i])
            continue;
        if (rc == PS_OK) {
            ps_tables_put (self->tables, made [i]);
            created++;
        }
        else
            ps_tshard_unlink (&made [i]);
    }
    free (made);
    if (rc)
        return rc;
    ps_info ("created %zu table shards (%zu existed) as shard %" PRIu32 " of %" PRIu32
             ", %zu held", created, existing, shard, shards, ps_tables_size (self->tables));
    reply->table_create_ok.created = created;
    reply->table_create_ok.existing = existing;
    ps_writer_encode (writer, reply);
    return PS_OK;
}
