//  The consistency modes' registry (see ps_mode.h).

#include "ps_mode.h"

#include <stdarg.h>
#include <stdio.h>

#include "ps_mode_async.h"
#include "ps_mode_mirrored.h"
#include "ps_mode_ssp.h"
#include "ps_mode_sync.h"

const ps_mode_ops_t *
ps_mode_lookup (ps_mode_t mode)
{
    switch (mode) {
        case PS_MODE_ASYNC:    return &ps_mode_async;
        case PS_MODE_MIRRORED: return &ps_mode_mirrored;
        case PS_MODE_SSP:      return &ps_mode_ssp;
        case PS_MODE_SYNC:     return &ps_mode_sync;
    }
    return NULL;
}

void
ps_mode_fail (ps_mode_host_t *host, int code, const char *fmt, ...)
{
    char message [PS_ERROR_MSG_MAX];
    va_list args;
    va_start (args, fmt);
    vsnprintf (message, sizeof message, fmt, args);
    va_end (args);
    host->fail (host->loop, code, message);
}

int
ps_mode_resume (ps_mode_host_t *host, int (*load) (void *self, const char *why), void *self)
{
    int rc = PS_ENOTFOUND;
    bool resume = host->cfg->resume;
    if (ps_ckpt_ctl_enabled (host->ckpt)) {
        rc = load (self, resume ? "resuming" : "resuming the run found in the checkpoint "
                   "directory");
        if (rc && rc != PS_ENOTFOUND)
            return -1;
    }
    if (rc == PS_ENOTFOUND && resume) {
        ps_mode_fail (host, PS_ENOTFOUND, "--resume: no valid checkpoint in \"%s\"",
                      *host->job->checkpoint_dir ? host->job->checkpoint_dir
                                                 : "(no checkpoint.dir)");
        return -1;
    }
    return rc;
}
