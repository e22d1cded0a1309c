//  The local cluster's supervisor: starts the servers and workers of
//  `coordinator --local` as child processes, restarts a child that dies
//  unexpectedly, and stops them all when the coordinator exits.
//
//  A child "dies unexpectedly" when a signal kills it or it exits with a
//  non-zero status while the supervisor is not stopping; exit status 0
//  means the child finished its work and is not restarted. A child that
//  keeps failing (5 unexpected deaths within 30 s) is given up on, so a
//  misconfigured child cannot spin; one that exits with PS_EXIT_UNUSABLE
//  (ps_error.h: it cannot run on this machine) is given up on at once.
//  Restarts wait a short backoff
//  (100 ms, doubling to 2 s) that resets after the child has run for 10 s.
//
//  No child outlives the coordinator: each is started with
//  PR_SET_PDEATHSIG (SIGKILL), so it dies even when the coordinator is
//  killed with SIGKILL, and ps_supervisor_destroy sends SIGTERM, waits, and
//  sends SIGKILL to any still running.
//
//  Each child leads its own process group, and signals from the supervisor
//  go to the whole group, so what a child started does not outlive it. A
//  Ctrl-C at the terminal therefore reaches only the coordinator, which
//  stops the children with ps_supervisor_stop_all. PR_SET_PDEATHSIG fires
//  when the thread that started the child ends: use the supervisor from the
//  coordinator's main thread. Not thread-safe.

#ifndef PS_SUPERVISOR_H_INCLUDED
#define PS_SUPERVISOR_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "ps_error.h"

typedef struct _ps_supervisor_t ps_supervisor_t;

typedef enum {
    PS_CHILD_RUNNING,
    PS_CHILD_BACKOFF,           //  died, waiting to be restarted
    PS_CHILD_EXITED,            //  exited 0, or died with restarts off
    PS_CHILD_GAVE_UP,           //  failed too often
} ps_child_state_t;

//  What ps_supervisor_poll saw happen to a child.
typedef struct {
    int child;                  //  index from ps_supervisor_add
    pid_t pid;                  //  the process that ended
    int status;                 //  exit status, or 128 + signal
    bool signaled;
    ps_child_state_t state;     //  the child's state after the event
} ps_child_event_t;

//  restart: restart children that die unexpectedly.
ps_supervisor_t *ps_supervisor_new (bool restart);

//  Stop every child (SIGTERM, up to 5 s, then SIGKILL), reap them, free.
void ps_supervisor_destroy (ps_supervisor_t **self_p);

//  Start a child: argv[0] is the program path, env a NULL-terminated list of
//  "NAME=value" added to (or replacing in) the coordinator's environment
//  (may be NULL), log_path a file its stdout and stderr are appended to
//  (NULL: inherit the coordinator's). name is for messages ("ps:0"). Returns
//  the child index (>= 0), or PS_EIO naming the program when it cannot be
//  started (fork failed, or exec failed: reported by the child through a
//  close-on-exec pipe, so a missing program is an error here, not a death).
//  PS_EINVAL when argv is empty or an env entry is not NAME=value.
int ps_supervisor_add (ps_supervisor_t *self, const char *name, const char *const *argv,
                       const char *const *env, const char *log_path, ps_error_t *err);

//  Reap children that ended and restart those due (non-blocking). Up to
//  max events are written to events; returns how many. Children beyond
//  max wait for the next call, so no event is lost. A restart that fails
//  is reported as a death with pid 0 and status 127.
size_t ps_supervisor_poll (ps_supervisor_t *self, ps_child_event_t *events, size_t max);

//  A child's current pid (0 while not running), state and name.
pid_t ps_supervisor_pid (const ps_supervisor_t *self, int child);
ps_child_state_t ps_supervisor_state (const ps_supervisor_t *self, int child);
const char *ps_supervisor_name (const ps_supervisor_t *self, int child);
int ps_supervisor_count (const ps_supervisor_t *self);

//  Children currently running.
int ps_supervisor_running (const ps_supervisor_t *self);

//  Send sig to every running child and stop restarting any. Then wait up
//  to timeout_ms for all to end, SIGKILL the rest and reap them. Each ends
//  in PS_CHILD_EXITED; ps_supervisor_poll does not report these ends.
void ps_supervisor_stop_all (ps_supervisor_t *self, int sig, int timeout_ms);

#endif
