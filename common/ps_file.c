//  Crash-safe files (see ps_file.h).

#include "ps_file.h"

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
