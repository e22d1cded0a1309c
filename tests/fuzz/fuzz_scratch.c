//  A fuzz process's scratch directory; see fuzz_scratch.h.

#include "fuzz_scratch.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_dir [256];

static void
s_die (const char *what, const char *path)
{
    fprintf (stderr, "fuzz harness: %s %s: %s\n", what, path, strerror (errno));
    abort ();
}

static int
s_remove (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st;
    (void) flag;
    //  The directory itself (level 0) stays.
    if (ftw->level > 0 && remove (path) != 0)
        s_die ("cannot remove", path);
    return 0;
}

void
fuzz_scratch_clear (void)
{
    if (s_dir [0] && nftw (s_dir, s_remove, 16, FTW_DEPTH | FTW_PHYS) != 0)
        s_die ("cannot walk", s_dir);
}

static void
s_remove_all (void)
{
    fuzz_scratch_clear ();
    rmdir (s_dir);
}

const char *
fuzz_scratch_dir (void)
{
    if (s_dir [0])
        return s_dir;
    const char *base = getenv ("PS_FUZZ_TMPDIR");
    if (!base || !*base)
        base = access ("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : getenv ("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    snprintf (s_dir, sizeof s_dir, "%s/ps-fuzz.XXXXXX", base);
    if (!mkdtemp (s_dir))
        s_die ("cannot make a directory like", s_dir);
    atexit (s_remove_all);
    return s_dir;
}

void
fuzz_scratch_write (const char *name, const void *data, size_t size, char *path, size_t len)
{
    snprintf (path, len, "%s/%s", fuzz_scratch_dir (), name);
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        s_die ("cannot create", path);
    const char *p = data;
    while (size > 0) {
        ssize_t n = write (fd, p, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            s_die ("cannot write", path);
        p += n;
        size -= (size_t) n;
    }
    if (close (fd) != 0)
        s_die ("cannot close", path);
}

void
fuzz_scratch_mkdir (const char *name, char *path, size_t len)
{
    snprintf (path, len, "%s/%s", fuzz_scratch_dir (), name);
    if (mkdir (path, 0755) != 0 && errno != EEXIST)
        s_die ("cannot make directory", path);
}
