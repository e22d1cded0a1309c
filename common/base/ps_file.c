//  Crash-safe files (see ps_file.h).

#include "ps_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

//  Largest piece handed to one write or one crc32 call (which takes a
//  uInt length).
#define S_CHUNK  ((size_t) 1 << 30)

int
ps_file_write_all (int fd, const void *data, size_t len, uint32_t *crc)
{
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t n = write (fd, p, len < S_CHUNK ? len : S_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            //  A regular file never takes zero bytes of a non-empty write;
            //  treat it as an error rather than loop forever.
            if (n == 0)
                errno = EIO;
            return -1;
        }
        if (crc)
            *crc = (uint32_t) crc32 (*crc, p, (uInt) n);
        p += n;
        len -= (size_t) n;
    }
    return 0;
}

int
ps_file_fsync_dir (const char *dir, ps_error_t *err)
{
    int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return ps_error_set (err, PS_EIO, "directory %s: open failed: %s", dir, strerror (errno));
    if (fsync (fd) != 0) {
        int error = errno;
        //  The fsync has failed already; a close failure adds nothing.
        (void) close (fd);
        return ps_error_set (err, PS_EIO, "directory %s: fsync failed: %s", dir, strerror (error));
    }
    if (close (fd) != 0)
        return ps_error_set (err, PS_EIO, "directory %s: close failed: %s", dir, strerror (errno));
    return PS_OK;
}

//  Report that call failed on what while writing path, close fd when it is
//  open, remove the temporary file, and return PS_EIO. error is the errno
//  of the failed call, saved before the cleanup could change it.
static int
s_failed (ps_error_t *err, const char *path, const char *call, const char *what, int error,
          int fd, const char *tmp)
{
    //  The write has already failed, so a failure to close as well changes
    //  nothing the caller could act on.
    if (fd >= 0)
        (void) close (fd);
    if (unlink (tmp) != 0 && errno != ENOENT) {
        int unlink_error = errno;
        return ps_error_set (err, PS_EIO, "file %s: %s (%s) failed: %s; unlink (%s) failed too: %s",
                             path, call, what, strerror (error), tmp, strerror (unlink_error));
    }
    return ps_error_set (err, PS_EIO, "file %s: %s (%s) failed: %s",
                         path, call, what, strerror (error));
}

int
ps_file_write_atomic (const char *path, const char *tmp, ps_file_writer_fn *write_fn,
                      void *arg, ps_error_t *err)
{
    int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return s_failed (err, path, "open", tmp, errno, -1, tmp);
    if (write_fn (fd, arg))
        return s_failed (err, path, "write", tmp, errno, fd, tmp);
    if (fsync (fd) != 0)
        return s_failed (err, path, "fsync", tmp, errno, fd, tmp);
    if (close (fd) != 0)
        return s_failed (err, path, "close", tmp, errno, -1, tmp);
    if (rename (tmp, path) != 0)
        return s_failed (err, path, "rename", tmp, errno, -1, tmp);
    //  The rename is durable only once the directory entry is on disk.
    const char *slash = strrchr (path, '/');
    char *dir = !slash ? strdup (".") : slash == path ? strdup ("/")
                                      : strndup (path, (size_t) (slash - path));
    if (!dir)
        abort ();
    int rc = ps_file_fsync_dir (dir, err);
    free (dir);
    if (rc)
        return ps_error_prefix (err, rc, "file %s", path);
    return PS_OK;
}

int
ps_file_write_beside (const char *path, ps_file_writer_fn *write_fn, void *arg, ps_error_t *err)
{
    size_t len = strlen (path) + 32;
    char *tmp = malloc (len);
    if (!tmp)
        abort ();
    snprintf (tmp, len, "%s.tmp.%d", path, (int) getpid ());
    int rc = ps_file_write_atomic (path, tmp, write_fn, arg, err);
    free (tmp);
    return rc;
}

//  Remove name in the directory dir_fd and, when it is a directory,
//  everything under it, never following a symbolic link (a link is removed,
//  not what it points to). path names the same entry for messages. An entry
//  that is already gone is fine.
static int
s_remove_at (int dir_fd, const char *name, const char *path, ps_error_t *err)
{
    struct stat st;
    if (fstatat (dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT)
            return PS_OK;
        return ps_error_set (err, PS_EIO, "%s: stat failed: %s", path, strerror (errno));
    }
    if (!S_ISDIR (st.st_mode)) {
        if (unlinkat (dir_fd, name, 0) != 0 && errno != ENOENT)
            return ps_error_set (err, PS_EIO, "%s: unlink failed: %s", path, strerror (errno));
        return PS_OK;
    }
    int fd = openat (dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return ps_error_set (err, PS_EIO, "directory %s: open failed: %s", path, strerror (errno));
    DIR *dir = fdopendir (fd);
    if (!dir) {
        int error = errno;
        (void) close (fd);
        return ps_error_set (err, PS_EIO, "directory %s: fdopendir failed: %s",
                             path, strerror (error));
    }
    int rc;
    struct dirent *entry;
    while ((rc = ps_file_next_entry (dir, path, &entry, err)) == 1) {
        size_t child_len = strlen (path) + strlen (entry->d_name) + 2;
        char *child = malloc (child_len);
        if (!child) {
            rc = ps_error_set (err, PS_EIO, "directory %s: cannot allocate %zu bytes for a path",
                               path, child_len);
            break;
        }
        snprintf (child, child_len, "%s/%s", path, entry->d_name);
        rc = s_remove_at (dirfd (dir), entry->d_name, child, err);
        free (child);
        if (rc != PS_OK)
            break;
    }
    if (closedir (dir) != 0 && rc == PS_OK)
        rc = ps_error_set (err, PS_EIO, "directory %s: close failed: %s", path, strerror (errno));
    if (rc == PS_OK && unlinkat (dir_fd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
        rc = ps_error_set (err, PS_EIO, "directory %s: rmdir failed: %s", path, strerror (errno));
    return rc;
}

int
ps_file_next_entry (DIR *dir, const char *path, struct dirent **entry, ps_error_t *err)
{
    for (;;) {
        errno = 0;
        struct dirent *next = readdir (dir);
        if (!next)
            return errno == 0 ? 0 : ps_error_set (err, PS_EIO, "directory %s: readdir failed: %s",
                                                  path, strerror (errno));
        if (strcmp (next->d_name, ".") != 0 && strcmp (next->d_name, "..") != 0) {
            *entry = next;
            return 1;
        }
    }
}

int
ps_file_remove_tree (const char *path, ps_error_t *err)
{
    return s_remove_at (AT_FDCWD, path, path, err);
}

//  What a file that is not a regular file is, for messages.
static const char *
s_kind (mode_t mode)
{
    if (S_ISDIR (mode))
        return "a directory";
    if (S_ISFIFO (mode))
        return "a FIFO";
    if (S_ISCHR (mode))
        return "a character device";
    if (S_ISBLK (mode))
        return "a block device";
    if (S_ISSOCK (mode))
        return "a socket";
    return "not a file";
}

int
ps_file_open_regular (const char *path, ps_error_t *err)
{
    //  O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
    //  writer; it is cleared again once the file is known to be regular.
    int fd = open (path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return ps_error_set (err, PS_ENOTFOUND, "%s: not found", path);
        return ps_error_set (err, PS_EIO, "%s: open failed: %s", path, strerror (errno));
    }
    struct stat st;
    int rc = PS_OK;
    int flags;
    if (fstat (fd, &st) != 0)
        rc = ps_error_set (err, PS_EIO, "%s: fstat failed: %s", path, strerror (errno));
    else
    if (!S_ISREG (st.st_mode))
        rc = ps_error_set (err, PS_EINVAL, "%s: %s, not a regular file", path,
                           s_kind (st.st_mode));
    else
    if ((flags = fcntl (fd, F_GETFL)) < 0 || fcntl (fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        rc = ps_error_set (err, PS_EIO, "%s: fcntl failed: %s", path, strerror (errno));
    if (rc) {
        //  Nothing was read; a failure to close adds nothing to report.
        (void) close (fd);
        return rc;
    }
    return fd;
}

int
ps_file_read (const char *path, size_t max, char **data, size_t *len, ps_error_t *err)
{
    *data = NULL;
    *len = 0;
    int fd = ps_file_open_regular (path, err);
    if (fd < 0)
        return fd;
    struct stat st;
    char *text = NULL;
    int rc = PS_OK;
    if (fstat (fd, &st) != 0)
        rc = ps_error_set (err, PS_EIO, "%s: fstat failed: %s", path, strerror (errno));
    else
    if ((uint64_t) st.st_size > max)
        rc = ps_error_set (err, PS_ETOOBIG, "%s: %lld bytes, expected at most %zu", path,
                           (long long) st.st_size, max);
    else
    if (!(text = malloc ((size_t) st.st_size + 1)))
        rc = ps_error_set (err, PS_EIO, "%s: cannot allocate %lld bytes", path,
                           (long long) st.st_size);
    size_t size = rc == PS_OK ? (size_t) st.st_size : 0;
    size_t got = 0;
    while (rc == PS_OK && got < size) {
        ssize_t n = read (fd, text + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = ps_error_set (err, PS_EIO, "%s: read failed: %s", path, strerror (errno));
        else
        if (n == 0)
            rc = ps_error_set (err, PS_EIO, "%s: ended after %zu of %zu bytes", path,
                               got, size);
        else
            got += (size_t) n;
    }
    //  A failure to close a file only read from loses nothing, but it is
    //  reported all the same when nothing else went wrong.
    if (close (fd) != 0 && rc == PS_OK)
        rc = ps_error_set (err, PS_EIO, "%s: close failed: %s", path, strerror (errno));
    if (rc) {
        free (text);
        return rc;
    }
    text [size] = 0;
    *data = text;
    *len = size;
    return PS_OK;
}

int
ps_file_mkdirs (const char *path, ps_error_t *err)
{
    char buf [PATH_MAX];
    size_t n = strlen (path);
    if (n == 0 || n >= sizeof buf)
        return ps_error_set (err, PS_EINVAL,
                             "directory \"%s\": expected a path of 1..%zu bytes",
                             path, sizeof buf - 1);
    memcpy (buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf [i] != '/' && buf [i] != 0)
            continue;
        char saved = buf [i];
        buf [i] = 0;
        if (mkdir (buf, 0755) != 0 && errno != EEXIST) {
            //  Some file systems answer EROFS or EACCES rather than EEXIST
            //  for a directory that is there; only a missing one is an error.
            int error = errno;
            struct stat st;
            if (stat (buf, &st) != 0 || !S_ISDIR (st.st_mode))
                return ps_error_set (err, PS_EIO, "directory %s: mkdir failed: %s",
                                     buf, strerror (error));
        }
        buf [i] = saved;
    }
    struct stat st;
    if (stat (path, &st) != 0)
        return ps_error_set (err, PS_EIO, "directory %s: stat failed: %s", path, strerror (errno));
    if (!S_ISDIR (st.st_mode))
        return ps_error_set (err, PS_EIO, "directory %s: exists but is not a directory", path);
    return PS_OK;
}
