//  Worker 0 of a cluster without a chief (see ps_chief_child.h).

#include "ps_chief_child.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ps_log.h"
#include "ps_program.h"
#include "ps_signal.h"

extern char **environ;

//  The coordinator child: its process, a descriptor readable once it has
//  exited (the trainer's stop descriptor), and the thread that passes it
//  the stop signals while worker 0 trains, with the eventfd that ends it.
typedef struct {
    pid_t pid;
    int pidfd;
    int stop_fd;                //  the signalfd of this process's stop signals
    int quit_fd;
    pthread_t forwarder;
} s_child_t;

//  Pass the stop signal waiting on the signalfd on to the coordinator.
static void
s_forward (s_child_t *self)
{
    int signo = ps_signal_take (self->stop_fd);
    if (!signo)
        return;
    char name [32];
    ps_signal_name (signo, name, sizeof name);
    ps_info ("%s: passing it on to the coordinator (pid %d)", name, (int) self->pid);
    if (kill (self->pid, signo) != 0)
        ps_warn ("signalling the coordinator (pid %d): %s", (int) self->pid, strerror (errno));
}

//  While worker 0 trains, a stop signal is the coordinator's to act on: it
//  stops the run in order (a final checkpoint, in which worker 0's replica
//  may be needed) and then tells every worker, worker 0 included, to stop.
//  So worker 0 does not stop on the signal itself.
static void *
s_forwarder (void *arg)
{
    s_child_t *self = (s_child_t *) arg;
    while (true) {
        struct pollfd items [2] = {
            { .fd = self->stop_fd, .events = POLLIN },
            { .fd = self->quit_fd, .events = POLLIN },
        };
        int ready = poll (items, 2, -1);
        if (ready < 0 && errno != EINTR) {
            ps_warn ("passing stop signals on to the coordinator: poll: %s", strerror (errno));
            return NULL;
        }
        if (ready > 0 && (items [1].revents & POLLIN))
            return NULL;
        if (ready > 0 && (items [0].revents & POLLIN))
            s_forward (self);
    }
}

//  The environment for the child: this one, with TF_CONFIG replaced by
//  text. Built before fork: the child may call only async-signal-safe
//  functions, and setenv is not one. Free the array and its last string.
static char **
s_child_env (const char *text, char **tf_config)
{
    size_t n = 0;
    while (environ [n])
        n++;
    char **env = calloc (n + 2, sizeof (char *));
    size_t len = strlen ("TF_CONFIG=") + strlen (text) + 1;
    *tf_config = malloc (len);
    if (!env || !*tf_config)
        abort ();
    snprintf (*tf_config, len, "TF_CONFIG=%s", text);
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp (environ [i], "TF_CONFIG=", strlen ("TF_CONFIG=")) != 0)
            env [at++] = environ [i];
    env [at] = *tf_config;
    return env;
}

//  Start the coordinator. Returns 0, or -1 after logging why.
static int
s_start (ps_tfconfig_t *tf, const char *job_file, const char *keys_dir, bool insecure,
         int stop_fd, s_child_t *child)
{
    char path [4096];
    if (ps_program_find ("PS_COORDINATOR", "coordinator", "coordinator", path, sizeof path)) {
        ps_error ("worker:0 of a cluster without a chief runs the coordinator, and cannot find "
                  "the coordinator program next to ps-worker (or set PS_COORDINATOR)");
        return -1;
    }
    const char *argv [8];
    int argc = 0;
    argv [argc++] = path;
    if (job_file) {
        argv [argc++] = "--job";
        argv [argc++] = job_file;
    }
    if (insecure)
        argv [argc++] = "--insecure";
    if (keys_dir) {
        argv [argc++] = "--keys";
        argv [argc++] = keys_dir;
    }
    argv [argc] = NULL;
    char *text = ps_tfconfig_text_as (tf, "chief", 0);
    char *tf_config;
    char **env = s_child_env (text, &tf_config);
    free (text);
    sigset_t stop;
    ps_signal_stop_set (&stop);
    pid_t parent = getpid ();
    child->pid = fork ();
    if (child->pid == 0) {
        //  The coordinator blocks the stop signals itself, before its
        //  threads start; until then they end it, as any program.
        sigprocmask (SIG_UNBLOCK, &stop, NULL);
        //  Should worker 0 die without a word, its coordinator goes too; a
        //  parent that died before this line is seen by getppid.
        if (prctl (PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid () != parent)
            _exit (1);
        execve (path, (char *const *) argv, env);
        static const char message [] = "ps-worker: cannot run the coordinator program\n";
        ssize_t unused = write (STDERR_FILENO, message, sizeof message - 1);
        (void) unused;
        _exit (127);
    }
    free (env);
    free (tf_config);
    if (child->pid < 0) {
        ps_error ("starting the coordinator: fork: %s", strerror (errno));
        return -1;
    }
    child->stop_fd = stop_fd;
    child->pidfd = (int) syscall (SYS_pidfd_open, child->pid, 0);
    child->quit_fd = eventfd (0, EFD_CLOEXEC);
    int rc = child->pidfd < 0 || child->quit_fd < 0 ? errno : 0;
    if (rc == 0)
        rc = pthread_create (&child->forwarder, NULL, s_forwarder, child);
    if (rc) {
        ps_error ("watching the coordinator (pid %d): %s", (int) child->pid, strerror (rc));
        //  A coordinator that cannot be watched is not left running.
        kill (child->pid, SIGKILL);
        while (waitpid (child->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        if (child->pidfd >= 0)
            close (child->pidfd);
        if (child->quit_fd >= 0)
            close (child->quit_fd);
        return -1;
    }
    ps_info ("the cluster lists no chief: started the coordinator (pid %d)%s%s", (int) child->pid,
             job_file ? " with job " : "", job_file ? job_file : "");
    return 0;
}

//  Wait for the coordinator to end, passing it each stop signal that comes
//  meanwhile, and return its exit status as a shell reports it. A trainer
//  that failed stops it first: the run cannot go on without worker 0.
static int
s_wait (s_child_t *child, bool trainer_failed)
{
    uint64_t one = 1;
    if (write (child->quit_fd, &one, sizeof one) != (ssize_t) sizeof one
    ||  pthread_join (child->forwarder, NULL) != 0)
        ps_warn ("ending the thread that passes on stop signals: %s", strerror (errno));
    close (child->quit_fd);
    if (trainer_failed && kill (child->pid, SIGTERM) != 0)
        ps_warn ("stopping the coordinator (pid %d): %s", (int) child->pid, strerror (errno));
    while (true) {
        struct pollfd items [2] = {
            { .fd = child->pidfd, .events = POLLIN },
            { .fd = child->stop_fd, .events = POLLIN },
        };
        int ready = poll (items, 2, -1);
        if (ready < 0 && errno != EINTR) {
            ps_warn ("waiting for the coordinator: poll: %s", strerror (errno));
            break;
        }
        if (ready > 0 && (items [1].revents & POLLIN))
            s_forward (child);
        if (ready > 0 && (items [0].revents & POLLIN))
            break;
    }
    int status;
    pid_t pid;
    while ((pid = waitpid (child->pid, &status, 0)) < 0 && errno == EINTR)
        ;
    close (child->pidfd);
    if (pid < 0) {
        ps_error ("waiting for the coordinator (pid %d): %s", (int) child->pid, strerror (errno));
        return 1;
    }
    int code = WIFEXITED (status) ? WEXITSTATUS (status)
             : WIFSIGNALED (status) ? 128 + WTERMSIG (status) : 1;
    ps_info ("the coordinator (pid %d) exited with status %d", (int) child->pid, code);
    return code;
}

int
ps_chief_child_train (ps_tfconfig_t *tf, const char *job_file, const char *keys_dir,
                      bool insecure, const ps_trainer_config_t *config)
{
    assert (tf && config);
    ps_error_t err;
    const char *type = ps_tfconfig_task_type (tf);
    bool parent = ps_tfconfig_chief_derived (tf) && type && strcmp (type, "worker") == 0
                  && ps_tfconfig_task_index (tf) == 0;
    s_child_t child = { .pid = -1, .pidfd = -1, .quit_fd = -1 };
    if (parent && s_start (tf, job_file, keys_dir, insecure, config->stop_fd, &child))
        return 1;
    ps_trainer_config_t mine = *config;
    if (parent)
        mine.stop_fd = child.pidfd;
    int rc = ps_trainer_run (&mine, &err);
    if (rc)
        ps_error ("%s", err.msg);
    if (!parent)
        return rc ? 1 : 0;
    int code = s_wait (&child, rc != 0);
    return rc ? 1 : code;
}
