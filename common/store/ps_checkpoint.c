//  Checkpoints: see ps_checkpoint.h, and schemas/checkpoint.md for the
//  directory layout, the manifest and the commit protocol.
//
//  The module owns the directory names and the manifest keys it writes
//  itself ("format", "version", "step", "created", "files"); every other key
//  belongs to the caller and is copied through untouched. Durability comes
//  from ordering: the servers' files are fsynced by ps_snapshot_write, the
//  manifest is written under a temporary name, fsynced and renamed, and only
//  then does the directory get the name that readers look for. A directory
//  whose name is not exactly ckpt-<12 or more digits> is never read, so
//  anything a crash leaves behind is invisible to ps_checkpoint_latest.
//
//  Nothing here trusts a manifest: every key it depends on is checked for
//  type and range, file names must be plain names of snapshot files, and
//  every listed file is read through once to check its CRC.

#include "ps_checkpoint.h"
#include "ps_file.h"
#include "ps_log.h"
#include "ps_shape.h"
#include "ps_snapshot.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define S_PREFIX        "ckpt-"
#define S_MANIFEST_TMP  PS_CHECKPOINT_MANIFEST ".tmp"

//  A manifest holds a few hundred bytes per partition plus the caller's
//  keys, so anything near this size is not one of ours; refusing it keeps
//  a damaged or foreign file from costing that much memory.
#define S_MANIFEST_MAX  ((size_t) 256 << 20)

//  Snapshot files are read through in pieces of this size to check their
//  CRC, however large they are.
#define S_CRC_CHUNK     ((size_t) 1 << 20)

//  The snapshot file name field of ps_snap_file_t, which bounds the names
//  a checkpoint can list.
#define S_FILE_MAX      sizeof (((ps_snap_file_t *) 0)->file)

//  The keys this module writes; the caller's manifest must not hold them.
static const char *s_reserved [] = { "format", "version", "created", "step", "files" };

//  ---------------------------------------------------------------------
//  Names and paths

//  The directory name of the checkpoint at step, with suffix ("", ".tmp"
//  or ".old") appended. 12 digits hold any step below 10^12; larger steps
//  simply take more digits, and the name stays unique to the step.
static void
s_name (char *buf, size_t len, uint64_t step, const char *suffix)
{
    snprintf (buf, len, S_PREFIX "%012llu%s", (unsigned long long) step, suffix);
}

//  True when name is exactly the name s_name gives a step with no suffix,
//  and then *step is that step. Only the canonical form counts, so each
//  step has one directory name and ".tmp" or ".old" names never match.
static bool
s_parse_name (const char *name, uint64_t *step)
{
    size_t prefix = strlen (S_PREFIX);
    if (strncmp (name, S_PREFIX, prefix) != 0)
        return false;
    const char *digits = name + prefix;
    size_t ndigits = strspn (digits, "0123456789");
    //  A uint64_t has at most 20 digits, so longer runs are refused before
    //  parsing; strtoull reports the 20-digit ones above 2^64 - 1.
    if (ndigits < 12 || ndigits > 20 || digits [ndigits] != 0)
        return false;
    errno = 0;
    unsigned long long value = strtoull (digits, NULL, 10);
    if (errno != 0)
        return false;
    char canonical [64];
    s_name (canonical, sizeof canonical, (uint64_t) value, "");
    if (strcmp (canonical, name) != 0)
        return false;
    *step = (uint64_t) value;
    return true;
}

//  Join dir and name into buf. Returns PS_EINVAL naming both when buf is
//  too small.
static int
s_join (char *buf, size_t len, const char *dir, const char *name, ps_error_t *err)
{
    int n = snprintf (buf, len, "%s/%s", dir, name);
    if (n < 0 || (size_t) n >= len)
        return ps_error_set (err, PS_EINVAL, "path %s/%s is longer than %zu bytes",
                             dir, name, len - 1);
    return PS_OK;
}

//  Check that path fits the caller's buffer of len bytes, before any work
//  is done that the caller could not receive the result of.
static int
s_check_room (const char *path, size_t len, ps_error_t *err)
{
    if (strlen (path) >= len)
        return ps_error_set (err, PS_EINVAL, "checkpoint %s needs %zu bytes, the buffer has %zu",
                             path, strlen (path) + 1, len);
    return PS_OK;
}

//  True when file is a plain file name: not empty, no '/', not "." or "..".
//  Names in a manifest are joined to the checkpoint directory, so anything
//  else could reach outside it.
static bool
s_plain_name (const char *file)
{
    return file [0] != 0 && strchr (file, '/') == NULL
        && strcmp (file, ".") != 0 && strcmp (file, "..") != 0;
}

//  Check one listed file's name: a plain name, and the name the servers
//  give partition part of var (ps_snapshot_filename), which is the name a
//  restore looks for; var must be a valid variable name (ps_name_check).
//  context ("file <manifest>" or "checkpoint <dir>") and index say where
//  the entry came from for the message; code is what a bad name is
//  (PS_EINVAL from a caller, PS_ECORRUPT from a manifest).
static int
s_check_file_name (const char *file, const char *var, uint32_t part, const char *context,
                   size_t index, int code, ps_error_t *err)
{
    if (!s_plain_name (file))
        return ps_error_set (err, code,
                             "%s: files[%zu]: file name \"%s\" is not a plain name"
                             " (expected no '/', not . or ..)", context, index, file);
    char expect [S_FILE_MAX];
    ps_error_t why;
    if (ps_name_check (var, strlen (var), &why) != PS_OK)
        return ps_error_set (err, code, "%s: files[%zu]: %s", context, index, why.msg);
    if (ps_snapshot_filename (var, part, expect, sizeof expect) != PS_OK)
        return ps_error_set (err, code, "%s: files[%zu]: variable name \"%s\" is too long",
                             context, index, var);
    if (strcmp (file, expect) != 0)
        return ps_error_set (err, code,
                             "%s: files[%zu]: file name \"%s\", expected \"%s\""
                             " for partition %s/%u", context, index, file, expect, var, part);
    return PS_OK;
}

static int
s_compare_strings (const void *a, const void *b)
{
    return strcmp (*(const char *const *) a, *(const char *const *) b);
}

//  Find a name listed twice among count names (the array is sorted in
//  place). Returns the name, or NULL when they are all distinct.
static const char *
s_find_duplicate (const char **names, size_t count)
{
    qsort (names, count, sizeof *names, s_compare_strings);
    for (size_t i = 1; i < count; i++)
        if (strcmp (names [i - 1], names [i]) == 0)
            return names [i];
    return NULL;
}

//  ---------------------------------------------------------------------
//  Directories

static int
s_compare_steps_desc (const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? 1 : x > y ? -1 : 0;
}

//  The steps of the checkpoint directories in root, newest first, in a new
//  array (*steps, free it) of *count. Entries whose names are not exactly
//  ckpt-<digits> (the .tmp and .old directories among them) and entries
//  that are not directories are left out, symbolic links included: pruning
//  removes what it lists, and must never reach through a link. Returns 0, PS_ENOTFOUND when root
//  does not exist, or PS_EIO.
static int
s_list (const char *root, uint64_t **steps, size_t *count, ps_error_t *err)
{
    *steps = NULL;
    *count = 0;
    DIR *dir = opendir (root);
    if (!dir)
        return ps_error_set (err, errno == ENOENT ? PS_ENOTFOUND : PS_EIO,
                             "checkpoint root %s: cannot open the directory: %s",
                             root, strerror (errno));
    uint64_t *list = NULL;
    size_t used = 0, capacity = 0;
    int rc = PS_OK;
    while (rc == PS_OK) {
        errno = 0;
        struct dirent *entry = readdir (dir);
        if (!entry) {
            if (errno != 0)
                rc = ps_error_set (err, PS_EIO, "checkpoint root %s: readdir failed: %s",
                                   root, strerror (errno));
            break;
        }
        uint64_t step;
        if (!s_parse_name (entry->d_name, &step))
            continue;
        struct stat st;
        if (fstatat (dirfd (dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            //  Removed since readdir saw it: not a checkpoint any more.
            if (errno == ENOENT)
                continue;
            rc = ps_error_set (err, PS_EIO, "checkpoint root %s: stat (%s) failed: %s",
                               root, entry->d_name, strerror (errno));
            break;
        }
        if (!S_ISDIR (st.st_mode))
            continue;
        if (used == capacity) {
            size_t grown = capacity ? 2 * capacity : 16;
            uint64_t *bigger = realloc (list, grown * sizeof *list);
            if (!bigger) {
                rc = ps_error_set (err, PS_EIO, "checkpoint root %s: cannot allocate a list of %zu",
                                   root, grown);
                break;
            }
            list = bigger;
            capacity = grown;
        }
        list [used++] = step;
    }
    if (closedir (dir) != 0 && rc == PS_OK)
        rc = ps_error_set (err, PS_EIO, "checkpoint root %s: close failed: %s",
                           root, strerror (errno));
    if (rc) {
        free (list);
        return rc;
    }
    if (used > 1)
        qsort (list, used, sizeof *list, s_compare_steps_desc);
    *steps = list;
    *count = used;
    return PS_OK;
}

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
    s_name (name, sizeof name, step, ".tmp");
    int rc = s_join (path, sizeof path, root, name, err);
    if (rc == PS_OK)
        rc = s_check_room (path, len, err);
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
    if (!s_plain_name (name) || s_parse_name (name, &step))
        return ps_error_set (err, PS_EINVAL, "checkpoint root %s: \"%s\" is not a plain name "
                             "for a scratch directory", root, name);
    char path [PATH_MAX];
    int rc = s_join (path, sizeof path, root, name, err);
    if (rc == PS_OK)
        rc = s_check_room (path, len, err);
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
        int rc = s_check_file_name (f->file, f->var, f->part, context, i, PS_EINVAL, err);
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
        const char *twice = s_find_duplicate (names, nfiles);
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
        int rc = s_join (path, sizeof path, tmpdir, f->file, err);
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
//  module writes.
static int
s_check_caller (const json_t *manifest, const char *tmpdir, ps_error_t *err)
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
    return PS_OK;
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
    int rc = s_join (path, sizeof path, tmpdir, PS_CHECKPOINT_MANIFEST, err);
    if (rc == PS_OK)
        rc = s_join (tmp, sizeof tmp, tmpdir, S_MANIFEST_TMP, err);
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
    s_name (name, sizeof name, step, ".old");
    int rc = s_join (old, sizeof old, root, name, err);
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

//  Remove the checkpoints beyond the newest keep, never the one just
//  committed at step: it counts as one of the keep, and the others are
//  the newest by step. Failures are logged, not returned: the checkpoint
//  is committed by now, and an old one left behind costs only space.
static void
s_prune (const char *root, uint64_t step, int keep)
{
    uint64_t *steps;
    size_t count;
    ps_error_t err;
    if (s_list (root, &steps, &count, &err)) {
        ps_warn ("checkpoint root %s: cannot list the old checkpoints to remove: %s",
                 root, err.msg);
        return;
    }
    int kept = 1;
    for (size_t i = 0; i < count; i++) {
        if (steps [i] == step)
            continue;
        if (kept < keep) {
            kept++;
            continue;
        }
        char name [64], path [PATH_MAX], manifest [PATH_MAX];
        s_name (name, sizeof name, steps [i], "");
        if (s_join (path, sizeof path, root, name, &err)
        ||  s_join (manifest, sizeof manifest, path, PS_CHECKPOINT_MANIFEST, &err)) {
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
    s_name (name, sizeof name, step, ".tmp");
    int rc = s_join (expect, sizeof expect, root, name, err);
    if (rc)
        return rc;
    //  Only the directory ps_checkpoint_begin made for this step may
    //  become its checkpoint: a directory begun for another step holds
    //  another state of the servers.
    if (strcmp (tmpdir, expect) != 0)
        return ps_error_set (err, PS_EINVAL,
                             "checkpoint %s: expected %s, the directory begun for step %llu",
                             tmpdir, expect, (unsigned long long) step);
    s_name (name, sizeof name, step, "");
    rc = s_join (final, sizeof final, root, name, err);
    if (rc == PS_OK && dir)
        rc = s_check_room (final, len, err);
    if (rc == PS_OK)
        rc = s_check_caller (manifest, tmpdir, err);
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
//  Verify

//  Read and parse the manifest at path. Returns PS_ENOTFOUND when it is
//  missing, PS_EINVAL when it is not a regular file, PS_ETOOBIG when it is
//  larger than any manifest, PS_EIO when it cannot be read, PS_ECORRUPT
//  when it is not a JSON object.
static int
s_load_manifest (const char *path, json_t **manifest_p, ps_error_t *err)
{
    char *text;
    size_t size;
    int rc = ps_file_read (path, S_MANIFEST_MAX, &text, &size, err);
    if (rc == PS_OK) {
        json_error_t jerr;
        json_t *manifest = json_loadb (text, size, JSON_REJECT_DUPLICATES, &jerr);
        if (!manifest)
            rc = ps_error_set (err, PS_ECORRUPT, "file %s: not valid JSON: line %d, column %d: %s",
                               path, jerr.line, jerr.column, jerr.text);
        else
        if (!json_is_object (manifest)) {
            json_decref (manifest);
            rc = ps_error_set (err, PS_ECORRUPT, "file %s: expected a JSON object", path);
        }
        else
            *manifest_p = manifest;
    }
    free (text);
    return rc;
}

//  The value of key in object as an integer in [0, max], or false when it
//  is missing, not an integer or out of range.
static bool
s_get_uint (const json_t *object, const char *key, uint64_t max, uint64_t *value)
{
    const json_t *item = json_object_get (object, key);
    if (!json_is_integer (item))
        return false;
    json_int_t v = json_integer_value (item);
    if (v < 0 || (uint64_t) v > max)
        return false;
    *value = (uint64_t) v;
    return true;
}

//  The step a checkpoint directory is named for, when its last path
//  component is a checkpoint name (trailing slashes ignored).
static bool
s_dir_step (const char *dir, uint64_t *step)
{
    size_t end = strlen (dir);
    while (end > 1 && dir [end - 1] == '/')
        end--;
    size_t begin = end;
    while (begin > 0 && dir [begin - 1] != '/')
        begin--;
    char base [64];
    if (end - begin >= sizeof base)
        return false;
    memcpy (base, dir + begin, end - begin);
    base [end - begin] = 0;
    return s_parse_name (base, step);
}

//  Check the keys this module wrote: format first and version second, so
//  that a foreign file or a newer format is reported as such, then step
//  (which must match the directory's name, when it has a checkpoint's
//  name), created and files.
static int
s_check_header (const char *dir, const char *path, const json_t *manifest, ps_error_t *err)
{
    const char *format = json_string_value (json_object_get (manifest, "format"));
    if (!format)
        return ps_error_set (err, PS_ECORRUPT, "file %s: \"format\" is missing or not a string,"
                             " expected \"%s\"", path, PS_CHECKPOINT_FORMAT);
    if (strcmp (format, PS_CHECKPOINT_FORMAT) != 0)
        return ps_error_set (err, PS_ECORRUPT, "file %s: format \"%s\", expected \"%s\"",
                             path, format, PS_CHECKPOINT_FORMAT);
    const json_t *version = json_object_get (manifest, "version");
    if (!json_is_integer (version))
        return ps_error_set (err, PS_ECORRUPT, "file %s: \"version\" is missing or not an integer,"
                             " expected %d", path, PS_CHECKPOINT_VERSION);
    if (json_integer_value (version) != PS_CHECKPOINT_VERSION)
        return ps_error_set (err, PS_EVERSION, "file %s: version %lld, expected %d",
                             path, (long long) json_integer_value (version), PS_CHECKPOINT_VERSION);
    uint64_t step, named;
    if (!s_get_uint (manifest, "step", INT64_MAX, &step))
        return ps_error_set (err, PS_ECORRUPT,
                             "file %s: \"step\" is missing or not an integer >= 0", path);
    if (s_dir_step (dir, &named) && named != step)
        return ps_error_set (err, PS_ECORRUPT,
                             "file %s: step %llu, expected %llu as the directory is named", path,
                             (unsigned long long) step, (unsigned long long) named);
    if (!json_is_string (json_object_get (manifest, "created")))
        return ps_error_set (err, PS_ECORRUPT, "file %s: \"created\" is missing or not a string",
                             path);
    if (!json_is_array (json_object_get (manifest, "files")))
        return ps_error_set (err, PS_ECORRUPT, "file %s: \"files\" is missing or not an array",
                             path);
    return PS_OK;
}

//  Check every entry of "files" for its keys, types and name, then that no
//  file is listed twice. Reads nothing from the disk.
static int
s_check_entries (const char *path, const json_t *list, ps_error_t *err)
{
    size_t count = json_array_size (list);
    for (size_t i = 0; i < count; i++) {
        const json_t *entry = json_array_get (list, i);
        if (!json_is_object (entry))
            return ps_error_set (err, PS_ECORRUPT, "file %s: files[%zu] is not an object", path, i);
        const char *file = json_string_value (json_object_get (entry, "file"));
        const char *var = json_string_value (json_object_get (entry, "var"));
        if (!file || !var)
            return ps_error_set (err, PS_ECORRUPT, "file %s: files[%zu]: \"file\" or \"var\" is"
                                 " missing or not a string", path, i);
        static const struct {
            const char *key;
            uint64_t max;
        } fields [] = {
            { "server", INT32_MAX }, { "part", UINT32_MAX }, { "bytes", INT64_MAX },
            { "crc32", UINT32_MAX }, { "version", INT64_MAX },
        };
        uint64_t value, part = 0;
        for (size_t k = 0; k < sizeof fields / sizeof fields [0]; k++) {
            if (!s_get_uint (entry, fields [k].key, fields [k].max, &value))
                return ps_error_set (err, PS_ECORRUPT, "file %s: files[%zu] (%s): \"%s\" is missing"
                                     " or not an integer in 0..%llu", path, i, file, fields [k].key,
                                     (unsigned long long) fields [k].max);
            if (strcmp (fields [k].key, "part") == 0)
                part = value;
        }
        char context [PATH_MAX + 16];
        snprintf (context, sizeof context, "file %s", path);
        int rc = s_check_file_name (file, var, (uint32_t) part, context, i, PS_ECORRUPT, err);
        if (rc)
            return rc;
    }
    if (count < 2)
        return PS_OK;
    const char **names = malloc (count * sizeof *names);
    if (!names)
        return ps_error_set (err, PS_EIO, "file %s: cannot allocate a list of %zu names",
                             path, count);
    for (size_t i = 0; i < count; i++)
        names [i] = json_string_value (json_object_get (json_array_get (list, i), "file"));
    const char *twice = s_find_duplicate (names, count);
    int rc = twice ? ps_error_set (err, PS_ECORRUPT, "file %s: file %s is listed twice",
                                   path, twice)
                   : PS_OK;
    free (names);
    return rc;
}

//  The CRC-32 of the first len bytes of path, read in chunks.
static int
s_crc_file (const char *path, uint64_t len, uint32_t *crc_p, ps_error_t *err)
{
    int fd = ps_file_open_regular (path, err);
    if (fd < 0)
        return fd;
    uint8_t *buf = malloc (S_CRC_CHUNK);
    int rc = PS_OK;
    if (!buf)
        rc = ps_error_set (err, PS_EIO, "file %s: cannot allocate %zu bytes to read it",
                           path, S_CRC_CHUNK);
    uint32_t crc = (uint32_t) crc32 (0, Z_NULL, 0);
    uint64_t done = 0;
    while (rc == PS_OK && done < len) {
        size_t want = len - done < S_CRC_CHUNK ? (size_t) (len - done) : S_CRC_CHUNK;
        ssize_t n = read (fd, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = ps_error_set (err, PS_EIO, "file %s: read failed: %s", path, strerror (errno));
        else
        if (n == 0)
            //  It shrank since its size was taken.
            rc = ps_error_set (err, PS_ECORRUPT, "file %s: ended after %llu of %llu bytes",
                               path, (unsigned long long) done, (unsigned long long) len);
        else {
            crc = (uint32_t) crc32 (crc, buf, (uInt) n);
            done += (uint64_t) n;
        }
    }
    if (close (fd) != 0 && rc == PS_OK)
        rc = ps_error_set (err, PS_EIO, "file %s: close failed: %s", path, strerror (errno));
    free (buf);
    if (rc == PS_OK)
        *crc_p = crc;
    return rc;
}

//  Check one listed file against the manifest: its size, its trailer, and
//  the CRC of the bytes before the trailer.
static int
s_check_file (const char *dir, const json_t *entry, ps_error_t *err)
{
    //  s_check_entries has checked the entry; the checks here only keep
    //  this function safe on its own.
    const char *file = json_string_value (json_object_get (entry, "file"));
    uint64_t expect_bytes, expect_crc;
    if (!file
    ||  !s_get_uint (entry, "bytes", INT64_MAX, &expect_bytes)
    ||  !s_get_uint (entry, "crc32", UINT32_MAX, &expect_crc))
        return ps_error_set (err, PS_ECORRUPT, "checkpoint %s: a files[] entry lacks its keys",
                             dir);
    char path [PATH_MAX];
    int rc = s_join (path, sizeof path, dir, file, err);
    if (rc)
        return rc;
    uint64_t bytes;
    uint32_t trailer;
    rc = ps_snapshot_summary (path, &bytes, &trailer, err);
    if (rc)
        return rc;
    if (bytes != expect_bytes)
        return ps_error_set (err, PS_ECORRUPT,
                             "file %s: %llu bytes, expected %llu as the manifest records", path,
                             (unsigned long long) bytes, (unsigned long long) expect_bytes);
    if (trailer != (uint32_t) expect_crc)
        return ps_error_set (err, PS_ECORRUPT,
                             "file %s: checksum trailer 0x%08x, expected 0x%08x"
                             " as the manifest records", path, trailer, (uint32_t) expect_crc);
    //  ps_snapshot_summary has refused a file shorter than its trailer.
    uint32_t crc = 0;
    rc = s_crc_file (path, bytes - 4, &crc, err);
    if (rc)
        return rc;
    if (crc != trailer)
        return ps_error_set (err, PS_ECORRUPT,
                             "file %s: checksum mismatch: the bytes give 0x%08x,"
                             " the trailer says 0x%08x", path, crc, trailer);
    return PS_OK;
}

int
ps_checkpoint_verify (const char *dir, json_t **manifest, ps_error_t *err)
{
    assert (dir);
    if (manifest)
        *manifest = NULL;
    char path [PATH_MAX];
    int rc = s_join (path, sizeof path, dir, PS_CHECKPOINT_MANIFEST, err);
    if (rc)
        return rc;
    json_t *loaded = NULL;
    rc = s_load_manifest (path, &loaded, err);
    if (rc == PS_OK)
        rc = s_check_header (dir, path, loaded, err);
    const json_t *list = json_object_get (loaded, "files");
    if (rc == PS_OK)
        rc = s_check_entries (path, list, err);
    for (size_t i = 0; rc == PS_OK && i < json_array_size (list); i++)
        rc = s_check_file (dir, json_array_get (list, i), err);
    if (rc == PS_OK && manifest)
        *manifest = loaded;
    else
        json_decref (loaded);
    return rc;
}

//  ---------------------------------------------------------------------
//  Latest

const char *
ps_checkpoint_name (const char *root, const char *path)
{
    assert (root && path);
    size_t len = strlen (root);
    assert (strncmp (path, root, len) == 0 && path [len] == '/');
    return path + len + 1;
}

int
ps_checkpoint_latest (const char *root, char *dir, size_t len, json_t **manifest,
                      ps_error_t *err)
{
    assert (root);
    assert (dir);
    if (manifest)
        *manifest = NULL;
    uint64_t *steps;
    size_t count;
    int rc = s_list (root, &steps, &count, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < count; i++) {
        char name [64], path [PATH_MAX];
        ps_error_t why;
        s_name (name, sizeof name, steps [i], "");
        rc = s_join (path, sizeof path, root, name, err);
        if (rc == PS_OK)
            rc = s_check_room (path, len, err);
        if (rc) {
            free (steps);
            return rc;
        }
        rc = ps_checkpoint_verify (path, manifest, &why);
        if (rc == PS_OK) {
            free (steps);
            memcpy (dir, path, strlen (path) + 1);
            return PS_OK;
        }
        ps_warn ("checkpoint %s is not usable: %s; %s", path, why.msg,
                 i + 1 < count ? "trying an older one" : "no older one is left");
    }
    free (steps);
    return ps_error_set (err, PS_ENOTFOUND, "checkpoint root %s: no usable checkpoint among %zu",
                         root, count);
}

//  ---------------------------------------------------------------------
//  Before a run

int
ps_checkpoint_check_root (const char *root, bool resume, ps_error_t *err)
{
    assert (root);
    struct stat st;
    bool exists = stat (root, &st) == 0;
    if (!exists && errno == ENOTDIR)
        return ps_error_set (err, PS_EINVAL, "checkpoint directory %s: not a directory (the "
                             "path goes through a file)", root);
    if (!exists && errno != ENOENT)
        return ps_error_set (err, PS_EINVAL, "checkpoint directory %s: stat failed: %s", root,
                             strerror (errno));
    if (exists && !S_ISDIR (st.st_mode))
        return ps_error_set (err, PS_EINVAL, "checkpoint directory %s: not a directory", root);
    if (!exists && resume)
        return ps_error_set (err, PS_ENOTFOUND, "checkpoint directory %s: does not exist, so "
                             "there is nothing to resume", root);
    ps_error_t why;
    if (!exists && ps_file_mkdirs (root, &why))
        return ps_error_set (err, PS_EINVAL, "checkpoint directory %s: cannot create it (%s)",
                             root, why.msg);
    char probe [PATH_MAX];
    int rc = s_join (probe, sizeof probe, root, ".ps-write-check-XXXXXX", err);
    if (rc)
        return ps_error_prefix (err, PS_EINVAL, "checkpoint directory %s", root);
    int fd = mkostemp (probe, O_CLOEXEC);
    if (fd < 0)
        return ps_error_set (err, PS_EINVAL, "checkpoint directory %s: cannot create a file in "
                             "it: %s", root, strerror (errno));
    //  The probe is empty; failing to close or remove it changes nothing
    //  for the checkpoints, but a file left behind is worth a word.
    (void) close (fd);
    if (unlink (probe) != 0)
        ps_warn ("checkpoint directory %s: cannot remove the probe file %s: %s", root, probe,
                 strerror (errno));
    if (!resume)
        return PS_OK;
    char dir [PATH_MAX];
    rc = ps_checkpoint_latest (root, dir, sizeof dir, NULL, &why);
    if (rc == PS_ENOTFOUND)
        return ps_error_set (err, PS_ENOTFOUND, "checkpoint directory %s: no usable checkpoint "
                             "to resume from", root);
    if (rc)
        return ps_error_set (err, PS_EINVAL, "checkpoint directory %s: %s", root, why.msg);
    return PS_OK;
}
