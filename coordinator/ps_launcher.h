//  Launchers: how the coordinator starts the cluster's tasks, restarts or
//  stops one, and hears that one has ended. One interface (an ops table,
//  as nng's transports), one file pair per implementation: today the
//  local launcher (ps_launcher_local.h: child processes on this machine)
//  and the Slurm launcher (ps_launcher_slurm.h: job steps in a Slurm
//  allocation); later Kubernetes (pods).
//
//  The interface assumes nothing a cluster manager cannot give: a task
//  may run on another machine, the coordinator cannot wait for its
//  process or read its output, and the manager, not the coordinator, may
//  restart it. A task is named by its role and index; how the launcher
//  runs it (a PID, a job step, a pod) stays inside the launcher. What the
//  loop needs for failure handling is the event "task role:index ended",
//  with whether that was a clean exit (it was told to stop) and whether
//  the launcher gave up restarting it; without a launcher, or when the
//  launcher cannot tell, the heartbeat timeout finds a dead task instead.
//
//  Every task is given the same thing to run whatever the launcher: the
//  program for its role (ps-server, or ps-worker for workers and
//  evaluators), the arguments and the environment of ps_launch_spec_t
//  (its TF_CONFIG names the cluster and the task).

#ifndef PS_LAUNCHER_H_INCLUDED
#define PS_LAUNCHER_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#include "ps_cores.h"
#include "ps_error.h"
#include "ps_role.h"
#include "ps_supervisor.h"

//  What a launcher saw happen to a task.
typedef struct {
    ps_role_t role;
    int index;
    bool clean;                 //  it exited as told (status 0): not a failure to restart
    bool gave_up;               //  it failed too often: the launcher will not restart it
    //  It exited with PS_EXIT_UNUSABLE: it cannot run on its machine as
    //  told (a GPU it lacks), and the run cannot go on as asked. The
    //  reason is then its own last line, when the launcher has its log.
    bool unusable;
    char reason [256];          //  what ended it, for the log ("process 12 killed by signal 9")
} ps_task_event_t;

//  What a task runs: its arguments after the program, and the variables
//  ("NAME=value") added to its environment; each list NULL-terminated.
typedef struct {
    const char *const *args;
    const char *const *env;
} ps_launch_spec_t;

//  A launcher's operations; `self` is its state.
typedef struct {
    const char *name;
    //  Start task role:index. Returns 0, or a code with err naming the
    //  task and why it cannot be started.
    int (*start) (void *self, ps_role_t role, int index, const ps_launch_spec_t *spec,
                  ps_error_t *err);
    //  Restart it (end the running one; it starts again as it was).
    int (*restart) (void *self, ps_role_t role, int index, ps_error_t *err);
    //  Stop it for good (it exits cleanly, and is not restarted).
    int (*stop) (void *self, ps_role_t role, int index, ps_error_t *err);
    //  Tasks that ended since the last call, up to max (non-blocking);
    //  returns how many. Later ones wait for the next call. Call it often
    //  (the loop does, every turn): a launcher may do its own work here,
    //  as the local one restarts the tasks due.
    size_t (*poll) (void *self, ps_task_event_t *events, size_t max);
    //  The loop's heartbeat found task role:index silent past the timeout.
    //  A launcher that cannot see the task's process (one the cluster
    //  manager started, not the launcher) starts it again here. NULL: the
    //  launcher's own watching is enough (the local one sees every death).
    int (*silent) (void *self, ps_role_t role, int index, ps_error_t *err);
    //  Stop every task, free the state, set *self_p to NULL.
    void (*destroy) (void **self_p);
} ps_launcher_ops_t;

typedef struct _ps_launcher_t ps_launcher_t;

//  A launcher of ops with state self (taken: destroyed with it).
ps_launcher_t *ps_launcher_new (const ps_launcher_ops_t *ops, void *self);

//  Stop every task and free the launcher; sets *self_p to NULL.
void ps_launcher_destroy (ps_launcher_t **self_p);

int ps_launcher_start (ps_launcher_t *self, ps_role_t role, int index,
                       const ps_launch_spec_t *spec, ps_error_t *err);
int ps_launcher_restart (ps_launcher_t *self, ps_role_t role, int index, ps_error_t *err);
int ps_launcher_stop (ps_launcher_t *self, ps_role_t role, int index, ps_error_t *err);
size_t ps_launcher_poll (ps_launcher_t *self, ps_task_event_t *events, size_t max);
//  Tell the launcher task role:index fell silent; 0 when it has nothing
//  to do about it.
int ps_launcher_silent (ps_launcher_t *self, ps_role_t role, int index, ps_error_t *err);
const char *ps_launcher_name (const ps_launcher_t *self);


//  The event of a supervised child's end (ps_supervisor.h) that runs task
//  role:index, for launchers whose tasks are supervised child processes.
void ps_launcher_child_event (const ps_child_event_t *seen, ps_role_t role, int index,
                              ps_task_event_t *event);

//  Send sig to the process of the supervised child that runs task
//  role:index (child < 0: none), for launchers whose restart and stop are
//  signals; what names that process in an error ("" or "srun of "), and
//  none says why there is none. Returns 0, PS_ENOTFOUND naming the task,
//  or PS_EIO.
int ps_launcher_signal_child (ps_supervisor_t *supervisor, int child, ps_role_t role,
                              int index, int sig, const char *what, const char *none,
                              ps_error_t *err);

//  Start every task of a cluster of counts[role] tasks per role, whose
//  spec (the JSON of TF_CONFIG's "cluster") is tf_cluster: each gets its
//  TF_CONFIG, the key directory (NULL: --insecure), and, for servers,
//  the checkpoint root, split's server_threads (their --threads: apply-pool
//  threads; split NULL: 0, applying on the serving thread) and
//  memory_limit (their --memory-limit; NULL: none), for workers and the
//  evaluator device (their --device; NULL: the plan's), for the evaluator
//  split's evaluator_threads (its --threads; 0 or split NULL: the plan's).
//  Returns 0, or the first failure's code with err.
int ps_launcher_start_cluster (ps_launcher_t *self, const char *tf_cluster,
                               const int counts [PS_ROLES], const char *checkpoint_dir,
                               const char *keys_dir, const ps_cores_split_t *split,
                               const char *memory_limit, const char *device, ps_error_t *err);

#endif
