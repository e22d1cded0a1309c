//  The stop signals (see ps_signal.h).

#include "ps_signal.h"

#include <errno.h>
#include <string.h>
#include <sys/signalfd.h>

void
ps_signal_stop_set (sigset_t *mask)
{
    sigemptyset (mask);
    sigaddset (mask, SIGTERM);
    sigaddset (mask, SIGINT);
}

int
ps_signal_stop_fd (ps_error_t *err)
{
    sigset_t mask;
    ps_signal_stop_set (&mask);
    if (sigprocmask (SIG_BLOCK, &mask, NULL) != 0)
        return ps_error_set (err, PS_EIO, "sigprocmask: %s", strerror (errno));
    int fd = signalfd (-1, &mask, SFD_CLOEXEC);
    if (fd < 0)
        return ps_error_set (err, PS_EIO, "signalfd: %s", strerror (errno));
    return fd;
}
