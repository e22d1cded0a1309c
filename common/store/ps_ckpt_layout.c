//  The layout of a checkpoint root: see ps_ckpt_layout.h.
//
//  Names are the only defence a reader has against a manifest that lists
//  a path outside its directory, or a root that holds something else
//  beside the checkpoints, so every check here is strict: one canonical
//  directory name per step, plain file names only, and no symbolic link
//  is ever listed (pruning removes what is listed).

#include "ps_ckpt_layout.h"
#include "ps_client.h"
#include "ps_file.h"
#include "ps_shape.h"
#include "ps_snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define S_PREFIX        "ckpt-"

//  The snapshot file name field of ps_snap_file_t, which bounds the names
//  a checkpoint can list.
#define S_FILE_MAX      sizeof (((ps_snap_file_t *) 0)->file)

//  The directory name of the checkpoint at step, with suffix ("", ".tmp"
//  or ".old") appended. 12 digits hold any step below 10^12; larger steps
//  simply take more digits, and the name stays unique to the step.
void
ps_ckpt_layout_dirname (char *buf, size_t len, uint64_t step, const char *suffix)
{
    snprintf (buf, len, S_PREFIX "%012llu%s", (unsigned long long) step, suffix);
}

//  True when name is exactly the name ps_ckpt_layout_dirname gives a step with no suffix,
//  and then *step is that step. Only the canonical form counts, so each
//  step has one directory name and ".tmp" or ".old" names never match.
bool
ps_ckpt_layout_parse (const char *name, uint64_t *step)
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
    ps_ckpt_layout_dirname (canonical, sizeof canonical, (uint64_t) value, "");
    if (strcmp (canonical, name) != 0)
        return false;
    *step = (uint64_t) value;
    return true;
}

//  Join dir and name into buf. Returns PS_EINVAL naming both when buf is
//  too small.
int
ps_ckpt_layout_join (char *buf, size_t len, const char *dir, const char *name, ps_error_t *err)
{
    int n = snprintf (buf, len, "%s/%s", dir, name);
    if (n < 0 || (size_t) n >= len)
        return ps_error_set (err, PS_EINVAL, "path %s/%s is longer than %zu bytes",
                             dir, name, len - 1);
    return PS_OK;
}

//  Check that path fits the caller's buffer of len bytes, before any work
//  is done that the caller could not receive the result of.
int
ps_ckpt_layout_check_room (const char *path, size_t len, ps_error_t *err)
{
    if (strlen (path) >= len)
        return ps_error_set (err, PS_EINVAL, "checkpoint %s needs %zu bytes, the buffer has %zu",
                             path, strlen (path) + 1, len);
    return PS_OK;
}

//  True when file is a plain file name: not empty, no '/', not "." or "..".
//  Names in a manifest are joined to the checkpoint directory, so anything
//  else could reach outside it.
bool
ps_ckpt_layout_plain_name (const char *file)
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
int
ps_ckpt_layout_check_file (const char *file, const char *var, uint32_t part,
                           const char *context, size_t index, int code, ps_error_t *err)
{
    if (!ps_ckpt_layout_plain_name (file))
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
const char *
ps_ckpt_layout_find_duplicate (const char **names, size_t count)
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
//  removes what it lists, and must never reach through a link. Returns 0,
//  PS_ENOTFOUND when root does not exist, or PS_EIO.
int
ps_ckpt_layout_list (const char *root, uint64_t **steps, size_t *count, ps_error_t *err)
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
    int rc;
    struct dirent *entry;
    while ((rc = ps_file_next_entry (dir, root, &entry, err)) == 1) {
        uint64_t step;
        if (!ps_ckpt_layout_parse (entry->d_name, &step))
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

//  The step a checkpoint directory is named for, when its last path
//  component is a checkpoint name (trailing slashes ignored).
bool
ps_ckpt_layout_dir_step (const char *dir, uint64_t *step)
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
    return ps_ckpt_layout_parse (base, step);
}
