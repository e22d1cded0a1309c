//  The local launcher (see ps_launcher_local.h).

#include "ps_launcher_local.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ps_program.h"
#include "ps_supervisor.h"

typedef struct {
    ps_supervisor_t *supervisor;
    char log_dir [PATH_MAX / 2];
    char server [PATH_MAX], worker [PATH_MAX];
    //  Each supervised child's task, by the supervisor's child index.
    int nchildren;
    struct { ps_role_t role; int index; } *tasks;
} s_local_t;

//  The supervisor's child of task role:index, or -1.
static int
s_child (const s_local_t *self, ps_role_t role, int index)
{
    for (int c = 0; c < self->nchildren; c++)
        if (self->tasks [c].role == role && self->tasks [c].index == index)
            return c;
    return -1;
}

//  Task role:index's log file, in path (len bytes).
static void
s_log_path (const s_local_t *self, ps_role_t role, int index, char *path, size_t len)
{
    snprintf (path, len, "%s/%s%d.log", self->log_dir, ps_role_name (role), index);
}

static int
s_start (void *self_, ps_role_t role, int index, const ps_launch_spec_t *spec, ps_error_t *err)
{
    s_local_t *self = self_;
    char name [64], log [PATH_MAX];
    snprintf (name, sizeof name, "%s:%d", ps_role_name (role), index);
    if (s_child (self, role, index) >= 0)
        return ps_error_set (err, PS_EINVAL, "starting %s: it runs already", name);
    s_log_path (self, role, index, log, sizeof log);
    size_t nargs = 0;
    while (spec->args [nargs])
        nargs++;
    const char **argv = calloc (nargs + 2, sizeof (char *));
    if (!argv)
        abort ();
    argv [0] = role == PS_ROLE_PS ? self->server : self->worker;
    memcpy (argv + 1, spec->args, nargs * sizeof (char *));
    ps_error_t why;
    int child = ps_supervisor_add (self->supervisor, name, argv, spec->env, log, &why);
    free (argv);
    if (child < 0)
        return ps_error_set (err, child, "starting %s: %s", name, why.msg);
    //  The supervisor numbers its children 0, 1, ... in the order added.
    self->tasks = realloc (self->tasks, ((size_t) child + 1) * sizeof *self->tasks);
    if (!self->tasks)
        abort ();
    self->tasks [child].role = role;
    self->tasks [child].index = index;
    self->nchildren = child + 1;
    return 0;
}

//  Send sig to task role:index's process: SIGKILL makes the supervisor
//  restart it, SIGTERM makes it exit cleanly, which is not restarted.
static int
s_signal (s_local_t *self, ps_role_t role, int index, int sig, ps_error_t *err)
{
    return ps_launcher_signal_child (self->supervisor, s_child (self, role, index), role, index,
                                     sig, "", "is not running", err);
}

static int
s_restart (void *self, ps_role_t role, int index, ps_error_t *err)
{
    return s_signal (self, role, index, SIGKILL, err);
}

static int
s_stop (void *self, ps_role_t role, int index, ps_error_t *err)
{
    return s_signal (self, role, index, SIGTERM, err);
}

//  The last line of a child's log, without its newline or time, in line
//  (len bytes); line is left as it was when the log cannot be read.
static void
s_last_line (const char *path, char *line, size_t len)
{
    FILE *log = fopen (path, "r");
    if (!log)
        return;
    char buf [1024], last [1024] = "";
    while (fgets (buf, sizeof buf, log))
        if (buf [0] != '\n')
            memcpy (last, buf, sizeof last);
    fclose (log);
    last [strcspn (last, "\n")] = 0;
    //  The coordinator's log line has a time of its own: the child's goes.
    const char *text = last;
    if (isdigit ((unsigned char) *text) && strchr (text, ' '))
        text = strchr (text, ' ') + 1;
    if (*text)
        snprintf (line, len, "%s", text);
}

static size_t
s_poll (void *self_, ps_task_event_t *events, size_t max)
{
    s_local_t *self = self_;
    ps_child_event_t seen [16];
    size_t n = ps_supervisor_poll (self->supervisor, seen, max < 16 ? max : 16);
    for (size_t e = 0; e < n; e++) {
        ps_role_t role = self->tasks [seen [e].child].role;
        int index = self->tasks [seen [e].child].index;
        ps_launcher_child_event (&seen [e], role, index, &events [e]);
        //  Why it cannot run is the last thing it said.
        if (events [e].unusable) {
            char log [PATH_MAX];
            s_log_path (self, role, index, log, sizeof log);
            s_last_line (log, events [e].reason, sizeof events [e].reason);
        }
    }
    return n;
}

static void
s_destroy (void **self_p)
{
    s_local_t *self = *self_p;
    if (!self)
        return;
    ps_supervisor_destroy (&self->supervisor);
    free (self->tasks);
    free (self);
    *self_p = NULL;
}

static const ps_launcher_ops_t s_ops = {
    .name = "local",
    .start = s_start,
    .restart = s_restart,
    .stop = s_stop,
    .poll = s_poll,
    .destroy = s_destroy,
};

ps_launcher_t *
ps_launcher_local_new (bool restart, const char *log_dir, ps_error_t *err)
{
    s_local_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    if (ps_program_find ("PS_SERVER", "ps-server", "ps", self->server,
                         sizeof self->server)
    ||  ps_program_find ("PS_WORKER", "ps-worker", "worker", self->worker,
                         sizeof self->worker)) {
        free (self);
        ps_error_set (err, PS_ENOTFOUND, "cannot find ps-server and ps-worker next to this "
                      "program (or set PS_SERVER and PS_WORKER)");
        return NULL;
    }
    snprintf (self->log_dir, sizeof self->log_dir, "%s", log_dir);
    self->supervisor = ps_supervisor_new (restart);
    if (!self->supervisor)
        abort ();
    return ps_launcher_new (&s_ops, self);
}

//  A free TCP port on 127.0.0.1, for a local cluster's addresses. The
//  probe socket stays open (in *fd) until every port has been chosen, so
//  no two tasks get the same port; the ports are released before the
//  children bind them, and on loopback nothing else takes one in between
//  in practice (a clash fails loudly at bind).
static int
s_free_port (int *fd)
{
    *fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*fd < 0)
        return -1;
    struct sockaddr_in addr = { .sin_family = AF_INET,
                                .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
    socklen_t len = sizeof addr;
    if (bind (*fd, (struct sockaddr *) &addr, sizeof addr) == 0
    &&  getsockname (*fd, (struct sockaddr *) &addr, &len) == 0)
        return ntohs (addr.sin_port);
    return -1;
}

int
ps_launcher_local_spec (const int counts [PS_ROLES], char **spec, ps_error_t *err)
{
    int tasks = 1;
    for (int r = 0; r < PS_ROLES; r++)
        tasks += counts [r];
    size_t len = 64 + 32 * (size_t) tasks;
    char *text = malloc (len);
    int *probes = malloc ((size_t) tasks * sizeof (int));
    if (!text || !probes)
        abort ();
    int nprobes = 0;
    int port = s_free_port (&probes [nprobes++]);
    size_t at = (size_t) snprintf (text, len, "{\"chief\": [\"127.0.0.1:%d\"]", port);
    for (int r = 0; r < PS_ROLES && port > 0; r++) {
        if (!counts [r])
            continue;
        at += (size_t) snprintf (text + at, len - at, ", \"%s\": [",
                                 ps_role_name ((ps_role_t) r));
        for (int i = 0; i < counts [r] && port > 0; i++) {
            port = s_free_port (&probes [nprobes++]);
            at += (size_t) snprintf (text + at, len - at, "%s\"127.0.0.1:%d\"", i ? ", " : "",
                                     port);
        }
        at += (size_t) snprintf (text + at, len - at, "]");
    }
    int error = errno;
    for (int p = 0; p < nprobes; p++)
        if (probes [p] >= 0)
            close (probes [p]);
    free (probes);
    snprintf (text + at, len - at, "}");
    if (port <= 0) {
        free (text);
        return ps_error_set (err, PS_EIO, "cannot find free ports on 127.0.0.1: %s",
                             strerror (error));
    }
    *spec = text;
    return 0;
}
