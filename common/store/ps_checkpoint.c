//  Checkpoints: see ps_checkpoint.h, and schemas/checkpoint.md for the
//  directory layout, the manifest and the commit protocol.
//
//  This file writes checkpoints; ps_ckpt_layout.c names them and
//  ps_ckpt_verify.c reads them. The module owns the directory names and
//  the manifest keys it writes itself ("format", "version", "step",
//  "created", "files"); every other key belongs to the caller and is copied
//  through untouched. Durability comes from ordering: the servers' files
//  are fsynced by ps_snapshot_write, the manifest is written under a
//  temporary name, fsynced and renamed, and only then does the directory
//  get the name that readers look for. A directory whose name is not
//  exactly ckpt-<12 or more digits> is never read, so anything a crash
//  leaves behind is invisible to ps_checkpoint_latest.

#include "ps_checkpoint.h"
#include "ps_file.h"
#include "ps_log.h"
#include "ps_snapshot.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define S_MANIFEST_TMP  PS_CHECKPOINT_MANIFEST ".tmp"

//  The keys this module writes; the caller's manifest must not hold them.
static const char *s_reserved [] = { "format", "version", "created", "step", "files" };

//  ---------------------------------------------------------------------
//  Begin

int
ps_checkpoint_begin (const char *root, uint64_t step, char *tmpdir, size_t len,
                     ps_error_t *err)
{
    assert (root);
    assert (tmpdir);
    //  ps_checkpoint_commit refuses such a step (see there), so no
    //  directory is made for it.
    if (step > INT64_MAX)
        return ps_error_set (err, PS_EINVAL, "checkpoint root %s: step %llu, expected below 2^63",
                             root, (unsigned long long) step);
    char name [64], path [PATH_MAX];
    ps_ckpt_layout_dirname (name, sizeof name, step, ".tmp");
    int rc = ps_ckpt_layout_join (path, sizeof path, root, name, err);
    if (rc == PS_OK)
        rc = ps_ckpt_layout_check_room (path, len, err);
    if (rc == PS_OK)
        rc = ps_file_mkdirs (root, err);
    if (rc)
        return rc;
    //  A directory of this name was left by a crash or a failed commit of
    //  the same step (or holds a replaced checkpoint a crash kept from
    //  being removed). Its files may be from another state of the servers,
    //  so none of them may end up in the new checkpoint.
    rc = ps_file_remove_tree (path, err);
    if (rc)
        return ps_error_prefix (err, rc, "checkpoint %s: cannot remove the stale directory", path);
    if (mkdir (path, 0755) != 0)
        return ps_error_set (err, PS_EIO, "checkpoint %s: mkdir failed: %s",
                             path, strerror (errno));
    memcpy (tmpdir, path, strlen (path) + 1);
    return PS_OK;
}

int
ps_checkpoint_scratch (const char *root, const char *name, char *dir, size_t len,
                       ps_error_t *err)
{
    assert (root && name && dir);
    uint64_t step;
    //  A scratch directory must never pass for a checkpoint.
    if (!ps_ckpt_layout_plain_name (name) || ps_ckpt_layout_parse (name, &step))
        return ps_error_set (err, PS_EINVAL, "checkpoint root %s: \"%s\" is not a plain name "
                             "for a scratch directory", root, name);
    char path [PATH_MAX];
    int rc = ps_ckpt_layout_join (path, sizeof path, root, name, err);
    if (rc == PS_OK)
        rc = ps_ckpt_layout_check_room (path, len, err);
    if (rc == PS_OK)
        rc = ps_file_mkdirs (root, err);
    if (rc == PS_OK && (rc = ps_file_remove_tree (path, err)) != PS_OK)
        ps_error_prefix (err, rc, "checkpoint root %s: cannot empty %s", root, name);
    if (rc)
        return rc;
    if (mkdir (path, 0755) != 0)
        return ps_error_set (err, PS_EIO, "%s: mkdir failed: %s", path, strerror (errno));
    memcpy (dir, path, strlen (path) + 1);
    return PS_OK;
}

//  ---------------------------------------------------------------------
//  Commit

//  Check the caller's files before anything is written: names, distinct
//  entries, and that each file is in tmpdir with the size and CRC trailer
//  the server reported.
static int
s_check_files (const char *tmpdir, const ps_snap_file_t *files, size_t nfiles, ps_error_t *err)
{
    for (size_t i = 0; i < nfiles; i++) {
        const ps_snap_file_t *f = &files [i];
        if (strnlen (f->file, sizeof f->file) == sizeof f->file
        ||  strnlen (f->var, sizeof f->var) == sizeof f->var)
            return ps_error_set (err, PS_EINVAL, "checkpoint %s: files[%zu]: name not terminated",
                                 tmpdir, i);
        char context [PATH_MAX + 16];
        snprintf (context, sizeof context, "checkpoint %s", tmpdir);
        int rc = ps_ckpt_layout_check_file (f->file, f->var, f->part, context, i, PS_EINVAL, err);
        if (rc)
            return rc;
        //  The manifest stores integers as JSON numbers, which jansson
        //  holds as int64_t.
        if (f->server < 0 || f->bytes > INT64_MAX || f->version > INT64_MAX)
            return ps_error_set (err, PS_EINVAL,
                                 "checkpoint %s: files[%zu] (%s): server %d, bytes %llu,"
                                 " version %llu, expected a server >= 0 and counts below 2^63",
                                 tmpdir, i, f->file, f->server, (unsigned long long) f->bytes,
                                 (unsigned long long) f->version);
    }
    if (nfiles > 1) {
        const char **names = malloc (nfiles * sizeof *names);
        if (!names)
            return ps_error_set (err, PS_EIO, "checkpoint %s: cannot allocate a list of %zu names",
                                 tmpdir, nfiles);
        for (size_t i = 0; i < nfiles; i++)
            names [i] = files [i].file;
        const char *twice = ps_ckpt_layout_find_duplicate (names, nfiles);
        int rc = twice ? ps_error_set (err, PS_EINVAL, "checkpoint %s: file %s is listed twice",
                                       tmpdir, twice)
                       : PS_OK;
        free (names);
        if (rc)
            return rc;
    }
    for (size_t i = 0; i < nfiles; i++) {
        const ps_snap_file_t *f = &files [i];
        char path [PATH_MAX];
        int rc = ps_ckpt_layout_join (path, sizeof path, tmpdir, f->file, err);
        if (rc)
            return rc;
        uint64_t bytes;
        uint32_t crc;
        rc = ps_snapshot_summary (path, &bytes, &crc, err);
        if (rc)
            return rc;
        if (bytes != f->bytes)
            return ps_error_set (err, PS_ESHAPE,
                                 "file %s: %llu bytes, expected %llu as server %d reported", path,
                                 (unsigned long long) bytes, (unsigned long long) f->bytes,
                                 f->server);
        //  Reading the trailer costs one small read, and catches a file
        //  that was rewritten since the server reported it.
        if (crc != f->crc)
            return ps_error_set (err, PS_ECORRUPT,
                                 "file %s: checksum trailer 0x%08x, expected 0x%08x"
                                 " as server %d reported", path, crc, f->crc, f->server);
    }
    return PS_OK;
}

//  Check that the caller's manifest is an object without the keys this
//  module writes, and that its "base", if any, names an older checkpoint
//  of root that is there.
static int
s_check_caller (const json_t *manifest, const char *root, uint64_t step, const char *tmpdir,
                ps_error_t *err)
{
    if (!json_is_object (manifest))
        return ps_error_set (err, PS_EINVAL, "checkpoint %s: the manifest is not a JSON object",
                             tmpdir);
    for (size_t i = 0; i < sizeof s_reserved / sizeof s_reserved [0]; i++)
        if (json_object_get (manifest, s_reserved [i]))
            return ps_error_set (err, PS_EINVAL,
                                 "checkpoint %s: the manifest holds key \"%s\", which the"
                                 " checkpoint module writes itself (expected none of format,"
                                 " version, created, step, files)", tmpdir, s_reserved [i]);
    const json_t *base = json_object_get (manifest, PS_CHECKPOINT_BASE);
    if (!base)
        return PS_OK;
    uint64_t base_step;
    const char *name = json_string_value (base);
    if (!name || !ps_ckpt_layout_parse (name, &base_step) || base_step >= step)
        return ps_error_set (err, PS_EINVAL, "checkpoint %s: the manifest's \"%s\" is not "
                             "the name of an older checkpoint (expected ckpt-<step> with a step "
                             "below %llu)", tmpdir, PS_CHECKPOINT_BASE, (unsigned long long) step);
    char dir [PATH_MAX], path [PATH_MAX];
    int rc = ps_ckpt_layout_join (dir, sizeof dir, root, name, err);
    if (rc == PS_OK)
        rc = ps_ckpt_layout_join (path, sizeof path, dir, PS_CHECKPOINT_MANIFEST, err);
    if (rc == PS_OK && access (path, F_OK) != 0)
        rc = ps_error_set (err, PS_ENOTFOUND, "checkpoint %s: its base %s is gone (%s: %s)",
                           tmpdir, name, path, strerror (errno));
    return rc;
}

//  The time now as an ISO 8601 UTC string ("2025-01-31T12:34:56Z").
static int
s_now (char *buf, size_t len, ps_error_t *err)
{
    struct timespec now;
    struct tm tm;
    if (clock_gettime (CLOCK_REALTIME, &now) != 0)
        return ps_error_set (err, PS_EIO, "clock_gettime failed: %s", strerror (errno));
    if (!gmtime_r (&now.tv_sec, &tm) || strftime (buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        return ps_error_set (err, PS_EIO, "cannot format the time %lld", (long long) now.tv_sec);
    return PS_OK;
}

//  The full manifest: our keys, then the caller's in their order, then the
//  file list. The caller's values are shared, not copied, and the caller's
//  object is left as it was.
static int
s_build (const json_t *manifest, uint64_t step, const ps_snap_file_t *files, size_t nfiles,
         const char *tmpdir, json_t **full_p, ps_error_t *err)
{
    char created [32];
    int rc = s_now (created, sizeof created, err);
    if (rc)
        return rc;
    json_t *full = json_object ();
    json_t *list = json_array ();
    bool ok = full && list
           && json_object_set_new (full, "format", json_string (PS_CHECKPOINT_FORMAT)) == 0
           && json_object_set_new (full, "version", json_integer (PS_CHECKPOINT_VERSION)) == 0
           && json_object_set_new (full, "step", json_integer ((json_int_t) step)) == 0
           && json_object_set_new (full, "created", json_string (created)) == 0;
    const char *key;
    json_t *value;
    //  json_object_foreach takes a non-const object, though it changes
    //  nothing in it.
    json_object_foreach ((json_t *) manifest, key, value) {
        if (!ok)
            break;
        ok = json_object_set (full, key, value) == 0;
    }
    for (size_t i = 0; i < nfiles && ok; i++) {
        const ps_snap_file_t *f = &files [i];
        json_t *entry = json_pack ("{s:s, s:i, s:s, s:I, s:I, s:I, s:I}",
                                   "file", f->file, "server", f->server, "var", f->var,
                                   "part", (json_int_t) f->part, "bytes", (json_int_t) f->bytes,
                                   "crc32", (json_int_t) f->crc,
                                   "version", (json_int_t) f->version);
        ok = json_array_append_new (list, entry) == 0;
    }
    if (ok) {
        ok = json_object_set_new (full, "files", list) == 0;
        list = NULL;
    }
    json_decref (list);
    if (!ok) {
        json_decref (full);
        return ps_error_set (err, PS_EIO, "checkpoint %s: cannot build the manifest: out of memory",
                             tmpdir);
    }
    *full_p = full;
    return PS_OK;
}

//  The manifest's text, for ps_file_write_atomic.
static int
s_write_text (int fd, void *arg)
{
    const char *text = arg;
    return ps_file_write_all (fd, text, strlen (text), NULL)
        || ps_file_write_all (fd, "\n", 1, NULL) ? -1 : 0;
}

//  Write the manifest into tmpdir crash-safely: MANIFEST.json.tmp, fsync,
//  close, rename to MANIFEST.json, fsync tmpdir.
static int
s_write_manifest (const char *tmpdir, const json_t *full, ps_error_t *err)
{
    char path [PATH_MAX], tmp [PATH_MAX];
    int rc = ps_ckpt_layout_join (path, sizeof path, tmpdir, PS_CHECKPOINT_MANIFEST, err);
    if (rc == PS_OK)
        rc = ps_ckpt_layout_join (tmp, sizeof tmp, tmpdir, S_MANIFEST_TMP, err);
    if (rc)
        return rc;
    char *text = json_dumps (full, JSON_INDENT (2) | JSON_PRESERVE_ORDER);
    if (!text)
        return ps_error_set (err, PS_EINVAL,
                             "file %s: the manifest cannot be encoded as JSON (a value holds"
                             " itself, or memory ran out)", path);
    rc = ps_file_write_atomic (path, tmp, s_write_text, text, err);
    free (text);
    return rc;
}

//  Undo a rename of from to to after a later step failed, so that the
//  final directory does not exist (or holds the old checkpoint again).
//  The failure being reported is already in err; an undo that fails as
//  well is appended to it.
static void
s_undo_rename (const char *from, const char *to, unsigned flags, ps_error_t *err)
{
    int rc = flags ? renameat2 (AT_FDCWD, from, AT_FDCWD, to, flags) : rename (from, to);
    if (rc != 0 && err) {
        size_t used = strlen (err->msg);
        snprintf (err->msg + used, sizeof err->msg - used,
                  "; undoing it by renaming %s to %s failed too: %s", from, to, strerror (errno));
    }
}

//  Give tmpdir the final name and make that durable. Returns PS_EIO with
//  the final directory as it was before: absent, or the old checkpoint of
//  the same step.
//
//  When final exists (the same step committed again after a rewind), the
//  two directories are swapped in one atomic renameat2 (RENAME_EXCHANGE),
//  so final always names a complete checkpoint; the old one, now under the
//  temporary name, is removed afterwards. File systems without the
//  exchange get the old one renamed aside to ckpt-<step>.old first.
static int
s_install (const char *root, const char *tmpdir, const char *final, uint64_t step,
           ps_error_t *err)
{
    struct stat st;
    bool exists = lstat (final, &st) == 0;
    if (!exists && errno != ENOENT)
        return ps_error_set (err, PS_EIO, "checkpoint %s: stat failed: %s",
                             final, strerror (errno));
    if (!exists) {
        if (rename (tmpdir, final) != 0)
            return ps_error_set (err, PS_EIO, "checkpoint %s: rename (%s) failed: %s",
                                 final, tmpdir, strerror (errno));
        int rc = ps_file_fsync_dir (root, err);
        if (rc)
            s_undo_rename (final, tmpdir, 0, err);
        return rc;
    }
    ps_error_t cleanup;
    if (renameat2 (AT_FDCWD, tmpdir, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
        int rc = ps_file_fsync_dir (root, err);
        if (rc) {
            s_undo_rename (tmpdir, final, RENAME_EXCHANGE, err);
            return rc;
        }
        //  The replaced checkpoint is now named like a stale temporary
        //  directory, which no reader looks at; failing to remove it wastes
        //  space but loses nothing.
        if (ps_file_remove_tree (tmpdir, &cleanup))
            ps_warn ("checkpoint %s: cannot remove the checkpoint it replaced: %s",
                     final, cleanup.msg);
        return PS_OK;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
        return ps_error_set (err, PS_EIO,
                             "checkpoint %s: renameat2 (%s, RENAME_EXCHANGE) failed: %s", final,
                             tmpdir, strerror (errno));

    //  No exchange here: rename the old checkpoint aside, then the new one
    //  into place. A crash between the two renames leaves neither under
    //  the final name (the older checkpoints remain).
    char name [64], old [PATH_MAX];
    ps_ckpt_layout_dirname (name, sizeof name, step, ".old");
    int rc = ps_ckpt_layout_join (old, sizeof old, root, name, err);
    if (rc)
        return rc;
    rc = ps_file_remove_tree (old, err);
    if (rc)
        return ps_error_prefix (err, rc, "checkpoint %s: cannot remove the stale %s", final, old);
    if (rename (final, old) != 0)
        return ps_error_set (err, PS_EIO, "checkpoint %s: rename (to %s) failed: %s",
                             final, old, strerror (errno));
    if (rename (tmpdir, final) != 0) {
        rc = ps_error_set (err, PS_EIO, "checkpoint %s: rename (%s) failed: %s",
                           final, tmpdir, strerror (errno));
        s_undo_rename (old, final, 0, err);
        return rc;
    }
    rc = ps_file_fsync_dir (root, err);
    if (rc) {
        s_undo_rename (final, tmpdir, 0, err);
        s_undo_rename (old, final, 0, err);
        return rc;
    }
    if (ps_file_remove_tree (old, &cleanup))
        ps_warn ("checkpoint %s: cannot remove the checkpoint it replaced: %s", final, cleanup.msg);
    return PS_OK;
}

//  What the manifest of a checkpoint says of its base.
typedef enum {
    S_BASE_NONE,                //  none: a full checkpoint, or none at all
    S_BASE_NAMED,               //  an incremental one on the base it names
    S_BASE_UNKNOWN              //  the manifest could not be read or parsed
} s_base_t;

//  What checkpoint `step` of root names as its base, in *base when it
//  names one. A checkpoint without a manifest names none: it is no
//  checkpoint a resume could use (a removal cut short leaves one). A
//  manifest that cannot be read (an I/O error, no file descriptor left,
//  a manifest cut short) may be an incremental one's: its answer is
//  unknown, and the caller must not act as if it named none.
static s_base_t
s_base_of (const char *root, uint64_t step, uint64_t *base)
{
    char name [64], dir [PATH_MAX], path [PATH_MAX];
    ps_ckpt_layout_dirname (name, sizeof name, step, "");
    if (ps_ckpt_layout_join (dir, sizeof dir, root, name, NULL)
    ||  ps_ckpt_layout_join (path, sizeof path, dir, PS_CHECKPOINT_MANIFEST, NULL))
        return S_BASE_UNKNOWN;
    FILE *file = fopen (path, "re");
    if (!file)
        return errno == ENOENT ? S_BASE_NONE : S_BASE_UNKNOWN;
    json_t *manifest = json_loadf (file, 0, NULL);
    bool failed = ferror (file) != 0;
    if (fclose (file) != 0)
        failed = true;
    if (!manifest || failed || !json_is_object (manifest)) {
        json_decref (manifest);
        return S_BASE_UNKNOWN;
    }
    //  A base key that names no checkpoint is a damaged manifest too.
    json_t *named = json_object_get (manifest, PS_CHECKPOINT_BASE);
    s_base_t answer = S_BASE_NONE;
    if (named)
        answer = json_is_string (named) && ps_ckpt_layout_parse (json_string_value (named), base)
               ? S_BASE_NAMED : S_BASE_UNKNOWN;
    json_decref (manifest);
    return answer;
}

//  Remove the checkpoints beyond the newest keep, never the one just
//  committed at step: it counts as one of the keep, and the others are
//  the newest by step. A checkpoint that a kept one names as its base
//  (an incremental checkpoint's full one) is kept too, whatever its age:
//  the kept one cannot be restored without it. While the manifest of a
//  kept one cannot be read, any older checkpoint may be its base (or its
//  base's base): none is removed, and the next prune, once it reads
//  again, catches up. Failures are logged, not returned: the checkpoint
//  is committed by now, and an old one left behind costs only space.
static void
s_prune (const char *root, uint64_t step, int keep)
{
    uint64_t *steps;
    size_t count;
    ps_error_t err;
    if (ps_ckpt_layout_list (root, &steps, &count, &err)) {
        ps_warn ("checkpoint root %s: cannot list the old checkpoints to remove: %s",
                 root, err.msg);
        return;
    }
    bool *kept = calloc (count + 1, sizeof (bool));
    if (!kept)
        abort ();
    int nkept = 1;
    for (size_t i = 0; i < count; i++)
        if (steps [i] == step || nkept++ < keep)
            kept [i] = true;
    //  Bases are older than what names them and steps run newest first,
    //  so one pass reaches a base's own base too.
    bool unknown = false;
    for (size_t i = 0; i < count; i++) {
        uint64_t base;
        s_base_t answer = kept [i] ? s_base_of (root, steps [i], &base) : S_BASE_NONE;
        if (answer == S_BASE_UNKNOWN && !unknown) {
            ps_warn ("checkpoint root %s: the manifest of the kept checkpoint at step %"
                     PRIu64 " cannot be read; no old checkpoint is removed until it can",
                     root, steps [i]);
            unknown = true;
        }
        if (answer != S_BASE_NAMED)
            continue;
        for (size_t j = i + 1; j < count; j++)
            if (steps [j] == base)
                kept [j] = true;
    }
    for (size_t i = 0; unknown && i < count; i++)
        kept [i] = true;
    for (size_t i = 0; i < count; i++) {
        if (kept [i])
            continue;
        char name [64], path [PATH_MAX], manifest [PATH_MAX];
        ps_ckpt_layout_dirname (name, sizeof name, steps [i], "");
        if (ps_ckpt_layout_join (path, sizeof path, root, name, &err)
        ||  ps_ckpt_layout_join (manifest, sizeof manifest, path, PS_CHECKPOINT_MANIFEST, &err)) {
            ps_warn ("checkpoint root %s: cannot remove an old checkpoint: %s", root, err.msg);
            continue;
        }
        //  The manifest goes first, so a removal cut short by a crash
        //  leaves a directory that fails verification rather than one that
        //  looks whole with files missing; the next prune finishes it.
        if (unlink (manifest) != 0 && errno != ENOENT)
            ps_warn ("checkpoint %s: cannot remove its manifest: %s", path, strerror (errno));
        else
        if (ps_file_remove_tree (path, &err))
            ps_warn ("checkpoint %s: cannot remove it: %s", path, err.msg);
    }
    free (kept);
    free (steps);
}

int
ps_checkpoint_commit (const char *root, uint64_t step, const char *tmpdir,
                      json_t *manifest, const ps_snap_file_t *files, size_t nfiles,
                      int keep, char *dir, size_t len, ps_error_t *err)
{
    assert (root);
    assert (tmpdir);
    assert (manifest);
    assert (files || nfiles == 0);
    if (keep < 1)
        return ps_error_set (err, PS_EINVAL, "checkpoint root %s: keep is %d, expected at least 1",
                             root, keep);
    //  The manifest stores the step as a JSON integer, which jansson holds
    //  as int64_t.
    if (step > INT64_MAX)
        return ps_error_set (err, PS_EINVAL, "checkpoint root %s: step %llu, expected below 2^63",
                             root, (unsigned long long) step);
    char name [64], expect [PATH_MAX], final [PATH_MAX];
    ps_ckpt_layout_dirname (name, sizeof name, step, ".tmp");
    int rc = ps_ckpt_layout_join (expect, sizeof expect, root, name, err);
    if (rc)
        return rc;
    //  Only the directory ps_checkpoint_begin made for this step may
    //  become its checkpoint: a directory begun for another step holds
    //  another state of the servers.
    if (strcmp (tmpdir, expect) != 0)
        return ps_error_set (err, PS_EINVAL,
                             "checkpoint %s: expected %s, the directory begun for step %llu",
                             tmpdir, expect, (unsigned long long) step);
    ps_ckpt_layout_dirname (name, sizeof name, step, "");
    rc = ps_ckpt_layout_join (final, sizeof final, root, name, err);
    if (rc == PS_OK && dir)
        rc = ps_ckpt_layout_check_room (final, len, err);
    if (rc == PS_OK)
        rc = s_check_caller (manifest, root, step, tmpdir, err);
    if (rc)
        return rc;
    rc = s_check_files (tmpdir, files, nfiles, err);
    if (rc)
        return rc;
    json_t *full = NULL;
    rc = s_build (manifest, step, files, nfiles, tmpdir, &full, err);
    if (rc)
        return rc;
    rc = s_write_manifest (tmpdir, full, err);
    json_decref (full);
    if (rc)
        return rc;
    rc = s_install (root, tmpdir, final, step, err);
    if (rc)
        return rc;
    s_prune (root, step, keep);
    if (dir)
        memcpy (dir, final, strlen (final) + 1);
    return PS_OK;
}


//  ---------------------------------------------------------------------
//  Names relative to the root

const char *
ps_checkpoint_name (const char *root, const char *path)
{
    assert (root && path);
    size_t len = strlen (root);
    assert (strncmp (path, root, len) == 0 && path [len] == '/');
    return path + len + 1;
}
