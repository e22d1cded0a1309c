//  The Slurm launcher (see ps_launcher_slurm.h).

#include "ps_launcher_slurm.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ps_log.h"
#include "ps_program.h"
#include "ps_tfconfig.h"

//  How to run one task again: the whole srun command line and the
//  variables it adds, and its supervised child once relaunched (-1 before).
typedef struct {
    ps_role_t role;
    int index;
    char **argv;
    char **env;
    int child;
} s_task_t;

typedef struct {
    ps_supervisor_t *supervisor;
    char job_id [32];
    char srun [PATH_MAX], server [PATH_MAX], worker [PATH_MAX];
    int ntasks;
    s_task_t *tasks;
} s_slurm_t;

//  A NULL-terminated copy of the first n strings of list, then the rest
//  of more (NULL-terminated too, may be NULL).
static char **
s_strings (const char *const *list, size_t n, const char *const *more)
{
    size_t nmore = 0;
    while (more && more [nmore])
        nmore++;
    char **copy = calloc (n + nmore + 1, sizeof (char *));
    if (!copy)
        abort ();
    for (size_t i = 0; i < n + nmore; i++)
        if (!(copy [i] = strdup (i < n ? list [i] : more [i - n])))
            abort ();
    return copy;
}

static void
s_strings_free (char **list)
{
    for (size_t i = 0; list && list [i]; i++)
        free (list [i]);
    free (list);
}

static s_task_t *
s_task (s_slurm_t *self, ps_role_t role, int index)
{
    for (int t = 0; t < self->ntasks; t++)
        if (self->tasks [t].role == role && self->tasks [t].index == index)
            return &self->tasks [t];
    return NULL;
}

//  The node of task role:index: the host of its address in the TF_CONFIG
//  of env, into node (len bytes). Returns 0 or PS_EINVAL.
static int
s_node (const char *const *env, ps_role_t role, int index, char *node, size_t len,
        ps_error_t *err)
{
    const char *tf_text = NULL;
    for (size_t e = 0; env && env [e]; e++)
        if (strncmp (env [e], "TF_CONFIG=", 10) == 0)
            tf_text = env [e] + 10;
    if (!tf_text)
        return ps_error_set (err, PS_EINVAL, "no TF_CONFIG to relaunch it with");
    ps_tfconfig_t *tf = ps_tfconfig_parse (tf_text, "TF_CONFIG", err);
    if (!tf)
        return PS_EINVAL;
    const char *address = ps_tfconfig_address (tf, ps_role_name (role), index);
    const char *colon = address ? strrchr (address, ':') : NULL;
    int rc = 0;
    if (!colon || strncmp (address, "tcp://", 6) == 0 || (size_t) (colon - address) >= len)
        rc = ps_error_set (err, PS_EINVAL, "address \"%s\": expected NODE:PORT",
                           address ? address : "");
    else
        snprintf (node, len, "%.*s", (int) (colon - address), address);
    ps_tfconfig_destroy (&tf);
    return rc;
}

//  Record how to run task role:index again.
static int
s_start (void *self_, ps_role_t role, int index, const ps_launch_spec_t *spec, ps_error_t *err)
{
    s_slurm_t *self = self_;
    char name [64], node [256];
    snprintf (name, sizeof name, "%s:%d", ps_role_name (role), index);
    if (s_task (self, role, index))
        return ps_error_set (err, PS_EINVAL, "starting %s: it is known already", name);
    if (s_node (spec->env, role, index, node, sizeof node, err))
        return ps_error_prefix (err, PS_EINVAL, "%s", name);
    char jobid [64], nodelist [300], jobname [80];
    snprintf (jobid, sizeof jobid, "--jobid=%s", self->job_id);
    snprintf (nodelist, sizeof nodelist, "--nodelist=%s", node);
    snprintf (jobname, sizeof jobname, "--job-name=ps-%s-%d", ps_role_name (role), index);
    //  --overlap: the allocation's CPUs are all the first step's, and a
    //  step without it would wait for them. --kill-on-bad-exit: the step
    //  has one task, whose failure is the step's.
    const char *prefix [] = { self->srun, jobid, "--overlap", "--ntasks=1", "--nodes=1",
                              nodelist, jobname, "--export=ALL", "--kill-on-bad-exit=1",
                              role == PS_ROLE_PS ? self->server : self->worker };
    size_t nprefix = sizeof prefix / sizeof prefix [0];
    s_task_t *grown = realloc (self->tasks, ((size_t) self->ntasks + 1) * sizeof *grown);
    if (!grown)
        abort ();
    self->tasks = grown;
    self->tasks [self->ntasks++] = (s_task_t) {
        .role = role, .index = index, .child = -1,
        .argv = s_strings (prefix, nprefix, spec->args),
        .env = s_strings (NULL, 0, spec->env),
    };
    return 0;
}

//  Relaunch task role:index unless a relaunch of it runs already.
static int
s_silent (void *self_, ps_role_t role, int index, ps_error_t *err)
{
    s_slurm_t *self = self_;
    s_task_t *task = s_task (self, role, index);
    if (!task)
        return ps_error_set (err, PS_ENOTFOUND, "%s:%d is not a task of this job",
                             ps_role_name (role), index);
    if (task->child >= 0) {
        //  The supervisor restarts a relaunch that dies; one that runs
        //  but is silent is left to it, and a second is never started.
        ps_child_state_t state = ps_supervisor_state (self->supervisor, task->child);
        if (state == PS_CHILD_RUNNING || state == PS_CHILD_BACKOFF)
            ps_info ("%s:%d: its relaunch (srun pid %d) still runs; not starting another",
                     ps_role_name (role), index,
                     (int) ps_supervisor_pid (self->supervisor, task->child));
        return 0;
    }
    char name [64];
    snprintf (name, sizeof name, "%s:%d", ps_role_name (role), index);
    ps_error_t why;
    int child = ps_supervisor_add (self->supervisor, name, (const char *const *) task->argv,
                                   (const char *const *) task->env, NULL, &why);
    if (child < 0)
        return ps_error_set (err, child, "relaunching %s: %s", name, why.msg);
    task->child = child;
    ps_info ("relaunched %s into Slurm job %s (%s, srun pid %d)", name, self->job_id,
             task->argv [5], (int) ps_supervisor_pid (self->supervisor, child));
    return 0;
}

//  Send sig to the srun of task role:index's relaunch, which passes it on
//  to the task: SIGKILL ends srun and the supervisor relaunches it, SIGTERM
//  makes the task exit cleanly. Only relaunched tasks are reachable.
static int
s_signal (s_slurm_t *self, ps_role_t role, int index, int sig, ps_error_t *err)
{
    s_task_t *task = s_task (self, role, index);
    return ps_launcher_signal_child (self->supervisor, task ? task->child : -1, role, index, sig,
                                     "srun of ", "was not relaunched by this coordinator "
                                     "(Slurm's first step runs it)", err);
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

static size_t
s_poll (void *self_, ps_task_event_t *events, size_t max)
{
    s_slurm_t *self = self_;
    ps_child_event_t seen [16];
    size_t n = ps_supervisor_poll (self->supervisor, seen, max < 16 ? max : 16);
    for (size_t e = 0; e < n; e++)
        for (int t = 0; t < self->ntasks; t++)
            if (self->tasks [t].child == seen [e].child)
                ps_launcher_child_event (&seen [e], self->tasks [t].role, self->tasks [t].index,
                                         &events [e]);
    return n;
}

static void
s_destroy (void **self_p)
{
    s_slurm_t *self = *self_p;
    if (!self)
        return;
    ps_supervisor_destroy (&self->supervisor);
    for (int t = 0; t < self->ntasks; t++) {
        s_strings_free (self->tasks [t].argv);
        s_strings_free (self->tasks [t].env);
    }
    free (self->tasks);
    free (self);
    *self_p = NULL;
}

static const ps_launcher_ops_t s_ops = {
    .name = "slurm",
    .start = s_start,
    .restart = s_restart,
    .stop = s_stop,
    .poll = s_poll,
    .silent = s_silent,
    .destroy = s_destroy,
};

//  srun's path: $PS_SRUN, or the first srun on $PATH. Returns 0 or -1.
static int
s_find_srun (char *buf, size_t len)
{
    const char *given = getenv ("PS_SRUN");
    if (given && *given) {
        snprintf (buf, len, "%s", given);
        return access (buf, X_OK) == 0 ? 0 : -1;
    }
    const char *path = getenv ("PATH");
    while (path && *path) {
        const char *colon = strchr (path, ':');
        size_t n = colon ? (size_t) (colon - path) : strlen (path);
        if (n > 0 && n < len - 6) {
            snprintf (buf, len, "%.*s/srun", (int) n, path);
            if (access (buf, X_OK) == 0)
                return 0;
        }
        path += n + (colon ? 1 : 0);
    }
    return -1;
}

ps_launcher_t *
ps_launcher_slurm_new (const char *job_id, ps_error_t *err)
{
    s_slurm_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    int rc = 0;
    if (!job_id || !*job_id || strlen (job_id) >= sizeof self->job_id)
        rc = ps_error_set (err, PS_ENOTFOUND, "SLURM_JOB_ID is not set: the Slurm launcher "
                           "runs inside a Slurm job");
    else
    if (s_find_srun (self->srun, sizeof self->srun))
        rc = ps_error_set (err, PS_ENOTFOUND, "cannot find srun on PATH (or set PS_SRUN)");
    else
    if (ps_program_find ("PS_SERVER", "ps-server", "ps", self->server,
                         sizeof self->server)
    ||  ps_program_find ("PS_WORKER", "ps-worker", "worker", self->worker,
                         sizeof self->worker))
        rc = ps_error_set (err, PS_ENOTFOUND, "cannot find ps-server and ps-worker next to "
                           "this program (or set PS_SERVER and PS_WORKER)");
    if (rc) {
        free (self);
        return NULL;
    }
    snprintf (self->job_id, sizeof self->job_id, "%s", job_id);
    //  Restarts on: a relaunch that fails is run again, with a backoff.
    self->supervisor = ps_supervisor_new (true);
    if (!self->supervisor)
        abort ();
    return ps_launcher_new (&s_ops, self);
}
