//  The local cluster's supervisor; see ps_supervisor.h.
//
//  Children are started with fork and execve. Everything the child needs
//  (its argv, its merged environment, the descriptors of /dev/null and of
//  its log file) is prepared before the fork, because the coordinator may
//  have threads (libzmq's I/O threads) and between fork and exec the child
//  may only make async-signal-safe calls: no malloc, no stdio, no locks.
//  The child reports a failure before or at exec through a close-on-exec
//  pipe; end of file on that pipe means the exec succeeded, so
//  ps_supervisor_add and the restarts learn at once whether the program
//  could be started.
//
//  Process groups. Each child is the leader of its own process group, not
//  a member of the coordinator's. Two reasons. First, the coordinator
//  blocks SIGINT and SIGTERM and reads them through a signalfd, so that a
//  Ctrl-C is its decision: it stops its loop and then every child through
//  ps_supervisor_stop_all. Were the children in its group, a Ctrl-C at the
//  terminal would reach them at the same moment as the coordinator, which
//  would see the deaths of its workers and servers as failures to handle.
//  Second, a group can be signalled as one: ps_supervisor_stop_all and the
//  reaping of a child signal the child's whole group, so a helper process
//  a child started (a shell wrapper's program, a data loader) does not
//  outlive it. What this costs: Ctrl-Z stops only the coordinator, and
//  with `stty tostop` a child that writes to the terminal (no log file) is
//  stopped by SIGTTOU, as any background job would be.
//
//  PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not
//  the process, so the supervisor must be used from a thread that lives as
//  long as the coordinator: its main thread. It only reaches the direct
//  child; a grandchild of a coordinator killed with SIGKILL survives unless
//  it too asks for PR_SET_PDEATHSIG. The supervisor is not thread-safe.
//
//  Reaping. ps_supervisor_poll waits for each child's own pid with
//  WNOHANG, never for -1, because the coordinator may have children of its
//  own that are not the supervisor's business. It first looks with
//  WNOWAIT: while the ended child is a zombie its pid, which is also its
//  group's id, cannot be reused, so its group can be sent SIGKILL safely
//  before the child is reaped.

#include "ps_supervisor.h"
#include "ps_clock.h"
#include "ps_log.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

//  A child that dies unexpectedly this many times within the window is
//  given up on.
#define S_GIVE_UP_DEATHS        5
#define S_GIVE_UP_WINDOW_MS     30000.0

//  Restart backoff: doubles from the minimum to the maximum, and starts
//  again from the minimum after a run of at least S_BACKOFF_RESET_MS.
#define S_BACKOFF_MIN_MS        100
#define S_BACKOFF_MAX_MS        2000
#define S_BACKOFF_RESET_MS      10000.0

//  How often ps_supervisor_stop_all looks for children that have ended.
#define S_STOP_POLL_MS          5

//  The exit status of a child that could not exec, as a shell uses for a
//  command it cannot run; also the status of an event for a failed restart.
#define S_EXEC_FAILED           127

//  The status reported for a child that someone else reaped, whose real
//  status is unknown (see s_reap).
#define S_STATUS_UNKNOWN        -1

typedef struct {
    char *name;
    char **argv;                //  NULL-terminated copy
    char **env;                 //  NULL-terminated copy of the overlay
    size_t nenv;
    char *log_path;             //  NULL: inherit the coordinator's output
    pid_t pid;                  //  0 while not running
    ps_child_state_t state;
    double started_ms;          //  when the current run started
    double restart_ms;          //  when a child in backoff is due
    int backoff_ms;             //  the wait before the next restart
    double deaths [S_GIVE_UP_DEATHS];   //  ring of unexpected deaths' times
    int ndeaths;
    int next_death;
} s_child_t;

struct _ps_supervisor_t {
    bool restart;
    s_child_t **children;
    int count;
    int capacity;
};

//  The step of the child's start-up that failed, reported through the pipe.
typedef enum {
    S_STEP_PDEATHSIG,
    S_STEP_SETPGID,
    S_STEP_SIGNALS,
    S_STEP_STDIN,
    S_STEP_OUTPUT,
    S_STEP_DESCRIPTORS,
    S_STEP_EXEC,
} s_step_t;

static const char *s_step_names [] = {
    "prctl (PR_SET_PDEATHSIG)", "setpgid", "reset signals",
    "redirect stdin from /dev/null", "redirect output to the log",
    "close_range", "exec",
};

typedef struct {
    int step;
    int error;                  //  errno
} s_report_t;

//  What the child needs between fork and exec, all prepared before fork.
typedef struct {
    char *const *argv;
    char *const *envp;
    int null_fd;
    int log_fd;                 //  -1: keep stdout and stderr
    int report_fd;
    pid_t parent;
    struct sigaction dfl;
    sigset_t empty;
} s_spawn_t;

static void
s_sleep_ms (int ms)
{
    struct timespec pause = { ms / 1000, (long) (ms % 1000) * 1000000 };
    //  An early wake-up only makes the caller look again sooner.
    (void) nanosleep (&pause, NULL);
}

static s_child_t *
s_child (const ps_supervisor_t *self, int index)
{
    assert (self);
    assert (index >= 0 && index < self->count);
    return self->children [index];
}

static void
s_strv_free (char **strv)
{
    if (strv) {
        for (size_t i = 0; strv [i]; i++)
            free (strv [i]);
        free (strv);
    }
}

//  A NULL-terminated copy of a NULL-terminated list, or NULL when out of
//  memory. A NULL list copies as an empty one.
static char **
s_strv_dup (const char *const *strv, size_t *count)
{
    size_t n = 0;
    while (strv && strv [n])
        n++;
    char **copy = calloc (n + 1, sizeof (char *));
    if (!copy)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (!(copy [i] = strdup (strv [i]))) {
            s_strv_free (copy);
            return NULL;
        }
    if (count)
        *count = n;
    return copy;
}

static void
s_child_free (s_child_t **child_p)
{
    s_child_t *child = *child_p;
    if (child) {
        free (child->name);
        s_strv_free (child->argv);
        s_strv_free (child->env);
        free (child->log_path);
        free (child);
        *child_p = NULL;
    }
}

//  True when two NAME=value entries have the same NAME.
static bool
s_same_name (const char *a, const char *b)
{
    size_t alen = strcspn (a, "=");
    return alen == strcspn (b, "=") && memcmp (a, b, alen) == 0;
}

//  The child's environment: the coordinator's, less the entries the
//  overlay replaces, plus the overlay (of two overlay entries with the same
//  name, the later wins). The strings are shared, not copied, so the array
//  is only good until environ or the overlay changes: the caller uses it
//  for one fork and frees it. Returns NULL when out of memory.
static char **
s_merge_env (const s_child_t *child)
{
    size_t ninherited = 0;
    while (environ && environ [ninherited])
        ninherited++;
    char **envp = calloc (ninherited + child->nenv + 1, sizeof (char *));
    if (!envp)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < ninherited; i++) {
        bool replaced = false;
        for (size_t j = 0; j < child->nenv && !replaced; j++)
            replaced = s_same_name (environ [i], child->env [j]);
        if (!replaced)
            envp [n++] = environ [i];
    }
    for (size_t j = 0; j < child->nenv; j++) {
        bool overridden = false;
        for (size_t k = j + 1; k < child->nenv && !overridden; k++)
            overridden = s_same_name (child->env [j], child->env [k]);
        if (!overridden)
            envp [n++] = child->env [j];
    }
    envp [n] = NULL;
    return envp;
}

//  Move a close-on-exec descriptor to a number above 2, so that the
//  child's dup2 onto stdin, stdout and stderr cannot overwrite it (the
//  coordinator may run with one of those closed). Returns the descriptor,
//  or -1 with errno set, having closed fd either way on failure.
static int
s_above_stdio (int fd)
{
    if (fd < 0 || fd > STDERR_FILENO)
        return fd;
    int moved = fcntl (fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    int saved = errno;
    if (close (fd) != 0 && moved >= 0)
        ps_warn ("supervisor: cannot close descriptor %d: %s", fd, strerror (errno));
    errno = saved;
    return moved;
}

static void
s_close (int *fd_p)
{
    if (*fd_p >= 0) {
        if (close (*fd_p) != 0)
            ps_warn ("supervisor: cannot close descriptor %d: %s", *fd_p, strerror (errno));
        *fd_p = -1;
    }
}

//  In the child, after fork: report the step that failed and errno to the
//  parent, and exit.
static void __attribute__ ((noreturn))
s_child_fail (int report_fd, s_step_t step, int error)
{
    s_report_t report = { (int) step, error };
    //  When even this write fails the parent sees the pipe close as if the
    //  exec had worked, and then this exit as the child's death.
    ssize_t rc = write (report_fd, &report, sizeof report);
    (void) rc;
    _exit (S_EXEC_FAILED);
}

//  In the child, after fork: only async-signal-safe calls from here to
//  execve.
static void __attribute__ ((noreturn))
s_child_exec (const s_spawn_t *spawn)
{
    if (prctl (PR_SET_PDEATHSIG, SIGKILL) != 0)
        s_child_fail (spawn->report_fd, S_STEP_PDEATHSIG, errno);
    //  The parent may have died before the prctl, in which case the signal
    //  will never come and this child would be an orphan: give up at once.
    if (getppid () != spawn->parent)
        _exit (S_EXEC_FAILED);
    if (setpgid (0, 0) != 0)
        s_child_fail (spawn->report_fd, S_STEP_SETPGID, errno);

    //  The coordinator blocks SIGINT, SIGTERM and SIGCHLD to read them
    //  through a signalfd, and may ignore some signals; both the mask and
    //  ignored dispositions survive exec. A child starts as from a shell:
    //  default dispositions first, then an empty mask, so that no signal is
    //  delivered to a handler of the coordinator's in between. Handlers
    //  other than SIG_IGN are reset by execve anyway.
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP)
            continue;
        //  The C library reserves a few real-time signals and refuses to
        //  change them with EINVAL; they are none of the child's concern.
        if (sigaction (sig, &spawn->dfl, NULL) != 0 && errno != EINVAL)
            s_child_fail (spawn->report_fd, S_STEP_SIGNALS, errno);
    }
    if (sigprocmask (SIG_SETMASK, &spawn->empty, NULL) != 0)
        s_child_fail (spawn->report_fd, S_STEP_SIGNALS, errno);

    //  dup2 clears close-on-exec on the copies, so exactly stdin, stdout
    //  and stderr survive the exec.
    if (dup2 (spawn->null_fd, STDIN_FILENO) < 0)
        s_child_fail (spawn->report_fd, S_STEP_STDIN, errno);
    if (spawn->log_fd >= 0
    && (dup2 (spawn->log_fd, STDOUT_FILENO) < 0 || dup2 (spawn->log_fd, STDERR_FILENO) < 0))
        s_child_fail (spawn->report_fd, S_STEP_OUTPUT, errno);
    //  Any other descriptor of the coordinator's that lacks close-on-exec
    //  (a listening socket, say) must not leak into the child, where it
    //  would outlive the coordinator and keep a port bound. Kernels before
    //  5.11 lack CLOSE_RANGE_CLOEXEC (ENOSYS or EINVAL); the child then
    //  keeps those descriptors, which is no reason not to start it.
    if (close_range (STDERR_FILENO + 1, ~0U, CLOSE_RANGE_CLOEXEC) != 0
    &&  errno != ENOSYS && errno != EINVAL)
        s_child_fail (spawn->report_fd, S_STEP_DESCRIPTORS, errno);
    execve (spawn->argv [0], spawn->argv, spawn->envp);
    s_child_fail (spawn->report_fd, S_STEP_EXEC, errno);
}

//  Wait for a child that could not exec, which is about to exit.
static void
s_reap_failed (pid_t pid)
{
    while (waitpid (pid, NULL, 0) < 0)
        if (errno != EINTR) {
            ps_warn ("supervisor: cannot reap pid %d: %s", (int) pid, strerror (errno));
            return;
        }
}

//  Start the child's program. Returns 0 with child->pid set, or PS_EIO
//  naming the program and the step that failed.
static int
s_start (s_child_t *child, ps_error_t *err)
{
    int rc = PS_OK;
    int null_fd = -1;
    int log_fd = -1;
    int pipe_fds [2] = { -1, -1 };
    char **envp = s_merge_env (child);
    if (!envp)
        return ps_error_set (err, PS_EIO, "supervisor: cannot start %s (%s): out of memory",
                             child->name, child->argv [0]);

    null_fd = s_above_stdio (open ("/dev/null", O_RDONLY | O_CLOEXEC));
    if (null_fd < 0) {
        rc = ps_error_set (err, PS_EIO, "supervisor: cannot start %s (%s): open /dev/null: %s",
                           child->name, child->argv [0], strerror (errno));
        goto cleanup;
    }
    if (child->log_path) {
        log_fd = s_above_stdio (open (child->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                                      0644));
        if (log_fd < 0) {
            rc = ps_error_set (err, PS_EIO, "supervisor: cannot start %s (%s): open log %s: %s",
                               child->name, child->argv [0], child->log_path, strerror (errno));
            goto cleanup;
        }
    }
    if (pipe2 (pipe_fds, O_CLOEXEC) != 0
    ||  (pipe_fds [0] = s_above_stdio (pipe_fds [0])) < 0
    ||  (pipe_fds [1] = s_above_stdio (pipe_fds [1])) < 0) {
        rc = ps_error_set (err, PS_EIO, "supervisor: cannot start %s (%s): pipe: %s",
                           child->name, child->argv [0], strerror (errno));
        goto cleanup;
    }

    s_spawn_t spawn = {
        .argv = child->argv,
        .envp = envp,
        .null_fd = null_fd,
        .log_fd = log_fd,
        .report_fd = pipe_fds [1],
        .parent = getpid (),
    };
    spawn.dfl.sa_handler = SIG_DFL;
    if (sigemptyset (&spawn.dfl.sa_mask) != 0 || sigemptyset (&spawn.empty) != 0) {
        rc = ps_error_set (err, PS_EIO, "supervisor: cannot start %s (%s): sigemptyset: %s",
                           child->name, child->argv [0], strerror (errno));
        goto cleanup;
    }

    pid_t pid = fork ();
    if (pid == 0)
        s_child_exec (&spawn);
    if (pid < 0) {
        rc = ps_error_set (err, PS_EIO, "supervisor: cannot start %s (%s): fork: %s",
                           child->name, child->argv [0], strerror (errno));
        goto cleanup;
    }
    //  Close our copy of the write end, or the read below would never see
    //  end of file.
    s_close (&pipe_fds [1]);

    s_report_t report;
    size_t got = 0;
    while (got < sizeof report) {
        ssize_t n = read (pipe_fds [0], (char *) &report + got, sizeof report - got);
        if (n > 0)
            got += (size_t) n;
        else
        if (n == 0)
            break;
        else
        if (errno != EINTR) {
            //  Not knowing whether it started, we cannot supervise it.
            rc = ps_error_set (err, PS_EIO, "supervisor: cannot start %s (%s): read start-up report: %s",
                               child->name, child->argv [0], strerror (errno));
            if (kill (pid, SIGKILL) != 0)
                ps_warn ("supervisor: cannot kill pid %d: %s", (int) pid, strerror (errno));
            s_reap_failed (pid);
            goto cleanup;
        }
    }
    if (got == sizeof report) {
        const char *step = report.step >= 0 && report.step <= S_STEP_EXEC
                         ? s_step_names [report.step] : "start-up";
        rc = ps_error_set (err, PS_EIO, "supervisor: cannot start %s (%s): %s: %s",
                           child->name, child->argv [0], step, strerror (report.error));
        s_reap_failed (pid);
    }
    else
    if (got > 0) {
        rc = ps_error_set (err, PS_EIO, "supervisor: cannot start %s (%s): start-up report cut short",
                           child->name, child->argv [0]);
        s_reap_failed (pid);
    }
    else {
        child->pid = pid;
        child->state = PS_CHILD_RUNNING;
        child->started_ms = ps_clock_ms ();
    }

cleanup:
    s_close (&pipe_fds [0]);
    s_close (&pipe_fds [1]);
    s_close (&log_fd);
    s_close (&null_fd);
    free (envp);
    return rc;
}

//  Send sig to the child's process group. A child that has moved to a
//  group of its own making is signalled directly as well.
static void
s_signal (const s_child_t *child, int sig)
{
    if (kill (-child->pid, sig) != 0 && errno != ESRCH)
        ps_warn ("supervisor: cannot signal %s (process group %d): %s",
                 child->name, (int) child->pid, strerror (errno));
    if (getpgid (child->pid) != child->pid
    &&  kill (child->pid, sig) != 0 && errno != ESRCH)
        ps_warn ("supervisor: cannot signal %s (pid %d): %s",
                 child->name, (int) child->pid, strerror (errno));
}

//  Reap the child if it has ended (block: wait until it has). Returns true
//  with its exit status or 128 + signal in *status when it has; child->pid
//  is then 0. Whatever the child left running in its process group is
//  killed first (see the top of this file).
static bool
s_reap (s_child_t *child, bool block, int *status, bool *signaled)
{
    assert (child->pid > 0);
    siginfo_t info;
    //  With WNOHANG and nothing to report, waitid leaves info alone, and
    //  only a zeroed si_pid tells that apart.
    memset (&info, 0, sizeof info);
    int flags = WEXITED | WNOWAIT | (block ? 0 : WNOHANG);
    while (waitid (P_PID, (id_t) child->pid, &info, flags) != 0) {
        if (errno == EINTR)
            continue;
        //  ECHILD: someone else reaped it (a waitpid (-1) elsewhere in the
        //  coordinator, or SIGCHLD set to SIG_IGN). It is gone; how it ended
        //  is not known, so it counts as an unexpected death.
        ps_warn ("supervisor: %s (pid %d) cannot be waited for: %s",
                 child->name, (int) child->pid, strerror (errno));
        child->pid = 0;
        *status = S_STATUS_UNKNOWN;
        *signaled = false;
        return true;
    }
    if (info.si_pid == 0)
        return false;
    if (kill (-child->pid, SIGKILL) != 0 && errno != ESRCH)
        ps_warn ("supervisor: cannot kill what %s left in process group %d: %s",
                 child->name, (int) child->pid, strerror (errno));
    int wstatus = 0;
    while (waitpid (child->pid, &wstatus, 0) < 0)
        if (errno != EINTR) {
            ps_warn ("supervisor: cannot reap %s (pid %d): %s",
                     child->name, (int) child->pid, strerror (errno));
            break;
        }
    child->pid = 0;
    *signaled = WIFSIGNALED (wstatus);
    *status = *signaled ? 128 + WTERMSIG (wstatus) : WEXITSTATUS (wstatus);
    return true;
}

//  "exited with status 1", "was killed by signal 9", for messages.
static void
s_describe (char *buf, size_t len, int status, bool signaled)
{
    if (signaled)
        snprintf (buf, len, "was killed by signal %d", status - 128);
    else
    if (status == S_STATUS_UNKNOWN)
        snprintf (buf, len, "ended with an unknown status");
    else
        snprintf (buf, len, "exited with status %d", status);
}

//  Record that the child ended (pid: the process that ended, 0 for a
//  restart that failed) and decide what comes next: done, a restart after
//  the backoff, or giving up.
static ps_child_event_t
s_died (ps_supervisor_t *self, int index, pid_t pid, int status, bool signaled, double now)
{
    s_child_t *child = self->children [index];
    char how [64];
    if (pid == 0)
        snprintf (how, sizeof how, "could not be restarted");
    else
        s_describe (how, sizeof how, status, signaled);
    bool unexpected = signaled || status != 0;
    if (pid > 0 && !signaled && status == PS_EXIT_UNUSABLE) {
        //  It cannot run on this machine as told: a restart would fail the
        //  same way, so it is not tried (its log says why).
        child->state = PS_CHILD_GAVE_UP;
        ps_error ("supervisor: %s (pid %d) %s: it cannot run here; not restarting it",
                  child->name, (int) pid, how);
    }
    else
    if (!unexpected || !self->restart) {
        child->state = PS_CHILD_EXITED;
        if (unexpected)
            ps_warn ("supervisor: %s (pid %d) %s; restarts are off", child->name, (int) pid, how);
        else
            ps_info ("supervisor: %s (pid %d) %s", child->name, (int) pid, how);
    }
    else {
        child->deaths [child->next_death] = now;
        child->next_death = (child->next_death + 1) % S_GIVE_UP_DEATHS;
        if (child->ndeaths < S_GIVE_UP_DEATHS)
            child->ndeaths++;
        //  With the ring full, next_death is the oldest of the last deaths.
        if (child->ndeaths == S_GIVE_UP_DEATHS
        &&  now - child->deaths [child->next_death] <= S_GIVE_UP_WINDOW_MS) {
            child->state = PS_CHILD_GAVE_UP;
            ps_error ("supervisor: %s (pid %d) %s; giving up after %d failures within %.0f s",
                      child->name, (int) pid, how, S_GIVE_UP_DEATHS, S_GIVE_UP_WINDOW_MS / 1000);
        }
        else {
            if (pid > 0 && now - child->started_ms >= S_BACKOFF_RESET_MS)
                child->backoff_ms = S_BACKOFF_MIN_MS;
            child->state = PS_CHILD_BACKOFF;
            child->restart_ms = now + child->backoff_ms;
            ps_warn ("supervisor: %s (pid %d) %s; restarting in %d ms",
                     child->name, (int) pid, how, child->backoff_ms);
            child->backoff_ms = child->backoff_ms * 2 > S_BACKOFF_MAX_MS
                              ? S_BACKOFF_MAX_MS : child->backoff_ms * 2;
        }
    }
    return (ps_child_event_t) {
        .child = index, .pid = pid, .status = status, .signaled = signaled, .state = child->state
    };
}

ps_supervisor_t *
ps_supervisor_new (bool restart)
{
    ps_supervisor_t *self = calloc (1, sizeof (ps_supervisor_t));
    if (self)
        self->restart = restart;
    return self;
}

void
ps_supervisor_destroy (ps_supervisor_t **self_p)
{
    assert (self_p);
    ps_supervisor_t *self = *self_p;
    if (self) {
        ps_supervisor_stop_all (self, SIGTERM, 5000);
        for (int i = 0; i < self->count; i++)
            s_child_free (&self->children [i]);
        free (self->children);
        free (self);
        *self_p = NULL;
    }
}

//  Invalid arguments give PS_EINVAL, and running out of memory PS_ETOOBIG,
//  as elsewhere in ps-cluster; a child that cannot be started PS_EIO.
int
ps_supervisor_add (ps_supervisor_t *self, const char *name, const char *const *argv,
                   const char *const *env, const char *log_path, ps_error_t *err)
{
    assert (self);
    if (!argv || !argv [0] || !argv [0][0])
        return ps_error_set (err, PS_EINVAL, "supervisor: %s: no program, expected argv [0] to be a path",
                             name ? name : "child");
    if (!name)
        name = argv [0];
    for (size_t i = 0; env && env [i]; i++)
        if (!strchr (env [i], '=') || env [i][0] == '=')
            return ps_error_set (err, PS_EINVAL,
                                 "supervisor: %s: environment entry '%s', expected NAME=value",
                                 name, env [i]);
    if (self->count == INT32_MAX)
        return ps_error_set (err, PS_ETOOBIG, "supervisor: %s: too many children", name);

    if (self->count == self->capacity) {
        int capacity = self->capacity ? self->capacity * 2 : 8;
        s_child_t **children = realloc (self->children, (size_t) capacity * sizeof (s_child_t *));
        if (!children)
            return ps_error_set (err, PS_ETOOBIG, "supervisor: %s: out of memory", name);
        self->children = children;
        self->capacity = capacity;
    }
    s_child_t *child = calloc (1, sizeof (s_child_t));
    if (!child
    ||  !(child->name = strdup (name))
    ||  !(child->argv = s_strv_dup (argv, NULL))
    ||  !(child->env = s_strv_dup (env, &child->nenv))
    ||  (log_path && !(child->log_path = strdup (log_path)))) {
        s_child_free (&child);
        return ps_error_set (err, PS_ETOOBIG, "supervisor: %s: out of memory", name);
    }
    child->backoff_ms = S_BACKOFF_MIN_MS;
    int rc = s_start (child, err);
    if (rc) {
        s_child_free (&child);
        return rc;
    }
    ps_info ("supervisor: started %s (pid %d): %s", child->name, (int) child->pid, child->argv [0]);
    self->children [self->count] = child;
    return self->count++;
}

//  A child is reaped, and a due restart done, only while there is room to
//  report what happened; the rest wait for the next call, so no event is
//  lost. A restart that fails counts as an unexpected death and is
//  reported as an event with pid 0 and status 127.
size_t
ps_supervisor_poll (ps_supervisor_t *self, ps_child_event_t *events, size_t max)
{
    assert (self);
    assert (events || max == 0);
    size_t n = 0;
    for (int i = 0; i < self->count && n < max; i++) {
        s_child_t *child = self->children [i];
        int status;
        bool signaled;
        if (child->pid > 0) {
            pid_t pid = child->pid;
            if (s_reap (child, false, &status, &signaled))
                events [n++] = s_died (self, i, pid, status, signaled, ps_clock_ms ());
        }
        else
        if (child->state == PS_CHILD_BACKOFF && ps_clock_ms () >= child->restart_ms) {
            ps_error_t err = { 0 };
            if (s_start (child, &err) == 0)
                ps_info ("supervisor: restarted %s (pid %d)", child->name, (int) child->pid);
            else {
                ps_error ("%s", err.msg);
                events [n++] = s_died (self, i, 0, S_EXEC_FAILED, false, ps_clock_ms ());
            }
        }
    }
    return n;
}

pid_t
ps_supervisor_pid (const ps_supervisor_t *self, int child)
{
    return s_child (self, child)->pid;
}

ps_child_state_t
ps_supervisor_state (const ps_supervisor_t *self, int child)
{
    return s_child (self, child)->state;
}

const char *
ps_supervisor_name (const ps_supervisor_t *self, int child)
{
    return s_child (self, child)->name;
}

int
ps_supervisor_count (const ps_supervisor_t *self)
{
    assert (self);
    return self->count;
}

int
ps_supervisor_running (const ps_supervisor_t *self)
{
    assert (self);
    int running = 0;
    for (int i = 0; i < self->count; i++)
        if (self->children [i]->pid > 0)
            running++;
    return running;
}

//  The children stopped here are reaped here, and not reported by
//  ps_supervisor_poll: the caller asked for them to end. Each ends in
//  PS_CHILD_EXITED.
void
ps_supervisor_stop_all (ps_supervisor_t *self, int sig, int timeout_ms)
{
    assert (self);
    for (int i = 0; i < self->count; i++) {
        s_child_t *child = self->children [i];
        if (child->state == PS_CHILD_BACKOFF)
            child->state = PS_CHILD_EXITED;
        if (child->pid > 0)
            s_signal (child, sig);
    }
    double deadline = ps_clock_ms () + (timeout_ms > 0 ? timeout_ms : 0);
    bool killed = false;
    while (true) {
        int left = 0;
        for (int i = 0; i < self->count; i++) {
            s_child_t *child = self->children [i];
            if (child->pid <= 0)
                continue;
            pid_t pid = child->pid;
            int status;
            bool signaled;
            //  After SIGKILL the wait is certain to end, so it blocks.
            if (s_reap (child, killed, &status, &signaled)) {
                char how [64];
                s_describe (how, sizeof how, status, signaled);
                ps_info ("supervisor: stopped %s (pid %d): it %s", child->name, (int) pid, how);
                child->state = PS_CHILD_EXITED;
            }
            else
                left++;
        }
        if (left == 0)
            return;
        assert (!killed);
        if (ps_clock_ms () >= deadline) {
            for (int i = 0; i < self->count; i++) {
                s_child_t *child = self->children [i];
                if (child->pid > 0) {
                    ps_warn ("supervisor: %s (pid %d) did not stop within %d ms, killing it",
                             child->name, (int) child->pid, timeout_ms);
                    s_signal (child, SIGKILL);
                }
            }
            killed = true;
        }
        else
            s_sleep_ms (S_STOP_POLL_MS);
    }
}
