//  The local launcher: a cluster of child processes on this machine, for
//  `coordinator --local`. It runs ps-server and ps-worker (found through
//  $PS_SERVER and $PS_WORKER, next to the coordinator, or in the build
//  tree) under the supervisor (ps_supervisor.h), which restarts a child
//  that dies, gives up on one that keeps dying, and leaves none behind
//  when the coordinator exits. Each task's output goes to
//  <log_dir>/<role><index>.log. It also makes the local cluster's spec:
//  an address on 127.0.0.1 with a free port for every task.

#ifndef PS_LAUNCHER_LOCAL_H_INCLUDED
#define PS_LAUNCHER_LOCAL_H_INCLUDED

#include <stdbool.h>

#include "ps_error.h"
#include "ps_launcher.h"

//  A local launcher that writes logs into log_dir and, with restart,
//  restarts tasks that die. NULL with err set when ps-server or ps-worker
//  cannot be found.
ps_launcher_t *ps_launcher_local_new (bool restart, const char *log_dir, ps_error_t *err);

//  The spec (TF_CONFIG's "cluster" as JSON) of a local cluster of chief:0
//  and counts[role] tasks per role, each on 127.0.0.1 at a free port, as
//  a new string in *spec (free it). Returns 0, or PS_EIO with err set.
int ps_launcher_local_spec (const int counts [PS_ROLES], char **spec, ps_error_t *err);

#endif
