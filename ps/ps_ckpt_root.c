//  The checkpoint root; see ps_ckpt_root.h.

#include "ps_ckpt_root.h"
#include "ps_file.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct _ps_ckpt_root_t {
    char path [PATH_MAX];       //  resolved, without a trailing slash (but "/")
    size_t len;
};

ps_ckpt_root_t *
ps_ckpt_root_new (const char *dir, ps_error_t *err)
{
    assert (dir);
    if (ps_file_mkdirs (dir, err)) {
        ps_error_prefix (err, err ? err->code : PS_EIO, "checkpoint root");
        return NULL;
    }
    ps_ckpt_root_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    if (!realpath (dir, self->path)) {
        ps_error_set (err, PS_EIO, "checkpoint root %s: realpath failed: %s", dir, strerror (errno));
        free (self);
        return NULL;
    }
    self->len = strlen (self->path);
    return self;
}

void
ps_ckpt_root_destroy (ps_ckpt_root_t **self_p)
{
    assert (self_p);
    free (*self_p);
    *self_p = NULL;
}

const char *
ps_ckpt_root_path (ps_ckpt_root_t *self)
{
    assert (self);
    return self->path;
}

//  Check that name is a plain path relative to the root: 1..PS_CKPT_NAME_MAX
//  printable bytes, not absolute, every component 1..PS_CKPT_COMPONENT_MAX
//  bytes and neither "." nor "..". The text is checked before anything
//  touches the file system, so that no request can make the server look
//  outside the root even for a moment.
static int
s_check_name (const char *name, ps_error_t *err)
{
    size_t len = strnlen (name, PS_CKPT_NAME_MAX + 1);
    if (len == 0)
        return ps_error_set (err, PS_EINVAL, "dir is empty, expected a directory relative to "
                             "the checkpoint root");
    if (len > PS_CKPT_NAME_MAX)
        return ps_error_set (err, PS_EINVAL, "dir is longer than %d bytes", PS_CKPT_NAME_MAX);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) name [i];
        if (c < 0x20 || c == 0x7f)
            return ps_error_set (err, PS_EINVAL, "dir \"%s\" holds the control character 0x%02x "
                                 "at byte %zu", name, c, i);
    }
    if (name [0] == '/')
        return ps_error_set (err, PS_EINVAL, "dir \"%s\" is absolute, expected a path relative "
                             "to the checkpoint root", name);
    for (size_t start = 0; start <= len; ) {
        size_t end = start;
        while (end < len && name [end] != '/')
            end++;
        size_t size = end - start;
        if (size == 0)
            return ps_error_set (err, PS_EINVAL, "dir \"%s\" has an empty component at byte %zu",
                                 name, start);
        if (size > PS_CKPT_COMPONENT_MAX)
            return ps_error_set (err, PS_EINVAL, "dir \"%.40s...\" has a component of %zu bytes, "
                                 "too long: at most %d", name, size, PS_CKPT_COMPONENT_MAX);
        if (size == 1 && name [start] == '.')
            return ps_error_set (err, PS_EINVAL, "dir \"%s\" has a '.' component, expected "
                                 "plain names", name);
        if (size == 2 && name [start] == '.' && name [start + 1] == '.')
            return ps_error_set (err, PS_EINVAL, "dir \"%s\" has a '..' component, which would "
                                 "lead out of the checkpoint root", name);
        start = end + 1;
    }
    return PS_OK;
}

//  True when the resolved path real is the root or lies under it.
static bool
s_inside (ps_ckpt_root_t *self, const char *real)
{
    if (self->len == 1)
        return real [0] == '/';
    return strncmp (real, self->path, self->len) == 0
        && (real [self->len] == 0 || real [self->len] == '/');
}

//  Resolve path with realpath into real and check it lies inside the root.
//  A path that does not exist is PS_ENOTFOUND only when the part of it
//  that does exist lies inside the root: one that would lead out is said
//  to, rather than merely missing. what says what path is, for messages.
static int
s_resolve_inside (ps_ckpt_root_t *self, const char *path, const char *what, char *real,
                  ps_error_t *err)
{
    if (realpath (path, real)) {
        if (!s_inside (self, real))
            return ps_error_set (err, PS_EINVAL, "%s leads outside the checkpoint root %s (to %s)",
                                 what, self->path, real);
        return PS_OK;
    }
    int error = errno;
    if (error != ENOENT && error != ENOTDIR)
        return ps_error_set (err, PS_EIO, "%s: realpath failed: %s", what, strerror (error));
    char prefix [PATH_MAX + PS_CKPT_NAME_MAX + 2];
    snprintf (prefix, sizeof prefix, "%s", path);
    char *slash;
    while ((slash = strrchr (prefix, '/')) && slash != prefix) {
        *slash = 0;
        if (realpath (prefix, real)) {
            if (!s_inside (self, real))
                return ps_error_set (err, PS_EINVAL, "%s leads outside the checkpoint root %s "
                                     "(through %s)", what, self->path, real);
            break;
        }
    }
    return ps_error_set (err, error == ENOENT ? PS_ENOTFOUND : PS_EINVAL,
                         "%s does not exist in the checkpoint root %s: %s", what, self->path,
                         strerror (error));
}

int
ps_ckpt_root_resolve (ps_ckpt_root_t *self, const char *name, bool create, char *path,
                      size_t len, ps_error_t *err)
{
    assert (self);
    assert (name);
    int rc = s_check_name (name, err);
    if (rc)
        return rc;
    char joined [PATH_MAX + PS_CKPT_NAME_MAX + 2], real [PATH_MAX];
    char what [PS_CKPT_NAME_MAX + 32];
    snprintf (joined, sizeof joined, "%s/%s", self->path, name);
    if (create) {
        //  The parent is checked before mkdir, which would otherwise make
        //  a directory wherever a symbolic link on the way leads.
        snprintf (what, sizeof what, "the parent of dir \"%s\"", name);
        char *slash = strrchr (joined, '/');
        *slash = 0;
        rc = s_resolve_inside (self, joined, what, real, err);
        *slash = '/';
        if (rc)
            return rc;
        if (mkdir (joined, 0755) != 0 && errno != EEXIST)
            return ps_error_set (err, PS_EIO, "dir \"%s\": mkdir %s failed: %s", name, joined,
                                 strerror (errno));
    }
    snprintf (what, sizeof what, "dir \"%s\"", name);
    rc = s_resolve_inside (self, joined, what, real, err);
    if (rc)
        return rc;
    struct stat st;
    if (stat (real, &st) != 0)
        return ps_error_set (err, PS_EIO, "%s: stat %s failed: %s", what, real, strerror (errno));
    if (!S_ISDIR (st.st_mode))
        return ps_error_set (err, PS_EINVAL, "%s is not a directory", what);
    if (strlen (real) >= len)
        return ps_error_set (err, PS_EINVAL, "%s: the path %s is longer than %zu bytes", what,
                             real, len - 1);
    memcpy (path, real, strlen (real) + 1);
    return PS_OK;
}

int
ps_ckpt_root_check (ps_ckpt_root_t *self, const char *path, ps_error_t *err)
{
    assert (self);
    assert (path);
    char real [PATH_MAX], what [PATH_MAX + 16];
    snprintf (what, sizeof what, "file %s", path);
    int rc = s_resolve_inside (self, path, what, real, err);
    return rc == PS_ENOTFOUND ? PS_OK : rc;
}
