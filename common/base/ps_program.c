//  Finding a sibling program (see ps_program.h).

#include "ps_program.h"

#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
ps_program_find (const char *env, const char *name, const char *subdir, char *buf, size_t len)
{
    assert (buf && len > 0);
    const char *given = getenv (env);
    if (given && *given) {
        snprintf (buf, len, "%s", given);
        return access (buf, X_OK) == 0 ? 0 : -1;
    }
    char self [PATH_MAX / 2];
    ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
    if (n < 0)
        return -1;
    self [n] = 0;
    char *slash = strrchr (self, '/');
    if (slash)
        *slash = 0;
    snprintf (buf, len, "%s/%s", self, name);
    if (access (buf, X_OK) == 0)
        return 0;
    snprintf (buf, len, "%s/../%s/%s", self, subdir, name);
    return access (buf, X_OK) == 0 ? 0 : -1;
}
