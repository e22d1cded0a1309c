//  The check that the checkpoint directory is shared; see ps_shared_root.h.

#include "ps_shared_root.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ps_clock.h"

//  What to do, said after every refusal.
#define S_ADVICE "start every ps-server with --checkpoint-root set to the coordinator's " \
                 "--checkpoint-dir, a directory every machine of the cluster shares (NFS or " \
                 "similar; README: Several machines)"

//  How long a probe file written on another machine may take to appear
//  here: a network file system's client may answer from its cache of the
//  directory for a moment.
#define S_APPEAR_MS 3000

//  Whether the file at path holds exactly token. A file that is missing
//  or cannot be read holds nothing.
static bool
s_holds (const char *path, const char *token)
{
    FILE *file = fopen (path, "r");
    if (!file)
        return false;
    char buf [160];
    size_t n = fread (buf, 1, sizeof buf - 1, file);
    fclose (file);
    buf [n] = 0;
    return strcmp (buf, token) == 0;
}

int
ps_shared_root_check (ps_client_t *client, int nservers, const char *const *endpoints,
                      const char *checkpoint_dir, uint64_t nonce, ps_error_t *err)
{
    for (int s = 0; s < nservers; s++) {
        char name [64], token [64], root [PATH_MAX], path [PATH_MAX];
        snprintf (name, sizeof name, ".probe-ps%d-%016" PRIx64, s, nonce);
        snprintf (token, sizeof token, "ps:%d %016" PRIx64, s, nonce);
        int rc = ps_client_probe_root (client, s, name, token, root, sizeof root, err);
        if (rc)
            return ps_error_prefix (err, rc, "ps:%d at %s cannot write a file into a checkpoint "
                                    "directory (" S_ADVICE ")", s, endpoints [s]);
        snprintf (path, sizeof path, "%s/%s", checkpoint_dir, name);
        //  Opening the directory makes an NFS client look at it afresh
        //  (close-to-open consistency), rather than trust a cached "no
        //  such file".
        double deadline = ps_clock_ms () + S_APPEAR_MS;
        bool seen = false;
        while (true) {
            DIR *dir = opendir (checkpoint_dir);
            if (dir)
                closedir (dir);
            if ((seen = s_holds (path, token)) || ps_clock_ms () >= deadline)
                break;
            struct timespec pause = { 0, 100 * 1000 * 1000 };
            nanosleep (&pause, NULL);
        }
        //  A probe written where this coordinator sees it is removed here;
        //  one written elsewhere stays in the server's directory, small and
        //  named for what it is.
        if (seen && unlink (path) != 0 && errno != ENOENT)
            return ps_error_set (err, PS_EIO, "removing the probe file %s: %s", path,
                                 strerror (errno));
        if (!seen)
            return ps_error_set (err, PS_EINVAL, "ps:%d at %s writes its checkpoints into %s on "
                                 "its machine, which is not this coordinator's checkpoint "
                                 "directory %s: the probe file %s it wrote there did not appear "
                                 "here; " S_ADVICE, s, endpoints [s], root, checkpoint_dir, name);
    }
    return 0;
}
