//  Launchers (see ps_launcher.h).

#include "ps_launcher.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct _ps_launcher_t {
    const ps_launcher_ops_t *ops;
    void *self;
};

ps_launcher_t *
ps_launcher_new (const ps_launcher_ops_t *ops, void *state)
{
    assert (ops && ops->start && ops->poll && ops->destroy);
    ps_launcher_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->ops = ops;
    self->self = state;
    return self;
}

void
ps_launcher_destroy (ps_launcher_t **self_p)
{
    ps_launcher_t *self = *self_p;
    if (!self)
        return;
    self->ops->destroy (&self->self);
    free (self);
    *self_p = NULL;
}

int
ps_launcher_start (ps_launcher_t *self, ps_role_t role, int index, const ps_launch_spec_t *spec,
                   ps_error_t *err)
{
    return self->ops->start (self->self, role, index, spec, err);
}

int
ps_launcher_restart (ps_launcher_t *self, ps_role_t role, int index, ps_error_t *err)
{
    if (!self->ops->restart)
        return ps_error_set (err, PS_EINVAL, "the %s launcher cannot restart %s:%d",
                             self->ops->name, ps_role_name (role), index);
    return self->ops->restart (self->self, role, index, err);
}

int
ps_launcher_stop (ps_launcher_t *self, ps_role_t role, int index, ps_error_t *err)
{
    if (!self->ops->stop)
        return ps_error_set (err, PS_EINVAL, "the %s launcher cannot stop %s:%d",
                             self->ops->name, ps_role_name (role), index);
    return self->ops->stop (self->self, role, index, err);
}

size_t
ps_launcher_poll (ps_launcher_t *self, ps_task_event_t *events, size_t max)
{
    return self->ops->poll (self->self, events, max);
}

int
ps_launcher_silent (ps_launcher_t *self, ps_role_t role, int index, ps_error_t *err)
{
    return self->ops->silent ? self->ops->silent (self->self, role, index, err) : 0;
}

void
ps_launcher_child_event (const ps_child_event_t *seen, ps_role_t role, int index,
                         ps_task_event_t *event)
{
    event->role = role;
    event->index = index;
    //  Exit status 0 is a child that was told to stop (SIGTERM, or a
    //  shutdown request): the supervisor does not restart it.
    event->clean = seen->status == 0 && !seen->signaled;
    event->gave_up = seen->state == PS_CHILD_GAVE_UP;
    event->unusable = !seen->signaled && seen->status == PS_EXIT_UNUSABLE;
    if (seen->signaled)
        snprintf (event->reason, sizeof event->reason, "process %d killed by signal %d",
                  (int) seen->pid, seen->status - 128);
    else
        snprintf (event->reason, sizeof event->reason, "process %d exited with status %d",
                  (int) seen->pid, seen->status);
}

int
ps_launcher_signal_child (ps_supervisor_t *supervisor, int child, ps_role_t role, int index,
                          int sig, const char *what, const char *none, ps_error_t *err)
{
    pid_t pid = child >= 0 ? ps_supervisor_pid (supervisor, child) : 0;
    if (pid <= 0)
        return ps_error_set (err, PS_ENOTFOUND, "%s:%d %s", ps_role_name (role), index, none);
    if (kill (pid, sig) != 0)
        return ps_error_set (err, PS_EIO, "signalling %s%s:%d (pid %d): %s", what,
                             ps_role_name (role), index, (int) pid, strerror (errno));
    return 0;
}

const char *
ps_launcher_name (const ps_launcher_t *self)
{
    return self->ops->name;
}

int
ps_launcher_start_cluster (ps_launcher_t *self, const char *tf_cluster,
                           const int counts [PS_ROLES], const char *checkpoint_dir,
                           const char *keys_dir, const ps_cores_split_t *split,
                           const char *memory_limit, const char *device, ps_error_t *err)
{
    char threads [16], eval_threads [16];
    snprintf (threads, sizeof threads, "%d", split ? split->server_threads : 0);
    snprintf (eval_threads, sizeof eval_threads, "%d", split ? split->evaluator_threads : 0);
    for (int r = 0; r < PS_ROLES; r++)
        for (int i = 0; i < counts [r]; i++) {
            const char *role = ps_role_name ((ps_role_t) r);
            size_t len = strlen (tf_cluster) + 128;
            char *tf = malloc (len);
            if (!tf)
                abort ();
            snprintf (tf, len, "TF_CONFIG={\"cluster\": %s, \"task\": {\"type\": \"%s\", "
                      "\"index\": %d}}", tf_cluster, role, i);
            const char *key_args [2] = { "--insecure", NULL };
            if (keys_dir) {
                key_args [0] = "--keys";
                key_args [1] = keys_dir;
            }
            //  The caller sized the apply pool (ps_cores.h): the
            //  server's own default, a thread per core, would
            //  oversubscribe the cores the workers compute on.
            const char *server_args [] = { "--threads", threads, "--checkpoint-root",
                                           checkpoint_dir, key_args [0], key_args [1],
                                           NULL, NULL, NULL };
            if (memory_limit) {
                int at = keys_dir ? 6 : 5;
                server_args [at] = "--memory-limit";
                server_args [at + 1] = memory_limit;
            }
            //  A worker told its device checks it before registering, and
            //  one that cannot use it says so and is not restarted.
            const char *worker_args [] = { key_args [0], key_args [1], NULL, NULL, NULL, NULL,
                                           NULL, NULL };
            int at = keys_dir ? 2 : 1;
            if (device) {
                worker_args [at++] = "--device";
                worker_args [at++] = device;
            }
            if (r == PS_ROLE_EVALUATOR && split && split->evaluator_threads > 0) {
                worker_args [at++] = "--threads";
                worker_args [at++] = eval_threads;
                //  An evaluator on no cores of its own computes only when
                //  training leaves one idle (ps_cores.h).
                if (split->evaluator_idle)
                    worker_args [at++] = "--idle-priority";
            }
            const char *env [] = { tf, NULL };
            ps_launch_spec_t spec = { r == PS_ROLE_PS ? server_args : worker_args, env };
            int rc = ps_launcher_start (self, (ps_role_t) r, i, &spec, err);
            free (tf);
            if (rc)
                return rc;
        }
    return 0;
}
