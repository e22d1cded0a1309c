//  The stop signals (see ps_signal.h).

#include "ps_signal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

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

int
ps_signal_take (int fd)
{
    struct pollfd item = { .fd = fd, .events = POLLIN };
    if (poll (&item, 1, 0) != 1 || !(item.revents & POLLIN))
        return 0;
    struct signalfd_siginfo info;
    //  A signalfd that polled readable has a whole record to read; should
    //  the read fail all the same, the signal still came and means stop.
    if (read (fd, &info, sizeof info) != (ssize_t) sizeof info)
        return SIGTERM;
    return (int) info.ssi_signo;
}

void
ps_signal_name (int signo, char *name, size_t len)
{
    const char *abbrev = sigabbrev_np (signo);
    if (abbrev)
        snprintf (name, len, "SIG%s", abbrev);
    else
        snprintf (name, len, "signal %d", signo);
}
