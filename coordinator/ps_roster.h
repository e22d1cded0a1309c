//  The coordinator's roster: every task of the cluster (servers, workers,
//  evaluators) as the coordinator knows it, from its registration to its
//  failure and its return.
//
//  A task is known once a process registered as it, and reached through
//  the routing id of that registration. The roster decides whom to take:
//  a first registration, the same process again, or a new process (a new
//  incarnation) once the old one is known dead; a new incarnation of a
//  task whose process still heartbeats is refused, so no process can push
//  a working one out by claiming its task. It notices silence: a live
//  task not heard from past the heartbeat timeout is declared failed and
//  marked silent, since a stopped or cut-off process may yet come back,
//  and one that speaks again is alive again. What a failure means (steps
//  to give back, a ring to form, a restore) is the loop's and the mode's
//  business, not the roster's.
//
//  Time is the caller's: every call that judges silence takes `now` (ms,
//  ps_clock_ms in the coordinator, any clock in a test).

#ifndef PS_ROSTER_H_INCLUDED
#define PS_ROSTER_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_host.h"
#include "ps_role.h"

//  The longest ZeroMQ routing id a peer may have.
#define PS_ROSTER_ID_MAX 128

//  A task as the roster knows it. The loop may read every field, and
//  keeps the counters and the `stopped` and `abandoned` marks; the roster
//  alone changes the rest.
typedef struct {
    bool known;                 //  registered at least once
    bool alive;
    bool stopped;               //  told to stop
    bool abandoned;             //  its launcher gave up restarting it
    bool silent;                //  declared failed for its silence: it may come back
    uint64_t incarnation;
    char id [PS_ROSTER_ID_MAX];
    size_t id_len;
    double last_seen;
    uint64_t pid;
    //  What the process said to reach it at (register's endpoint): a
    //  server's endpoint set (ps_host.h), "" for other roles.
    char endpoint [PS_HOST_SET_MAX];
    uint64_t steps;             //  train reports accepted
    //  What this task asked for and was refused: completions of steps it
    //  did not hold, and registrations of new incarnations while it lived.
    //  Each kind is logged once per incarnation, and counted always.
    uint64_t refused_reports;
    bool refused_report_logged;
    bool refused_register_logged;
} ps_peer_t;

//  What ps_roster_register made of a registration.
typedef enum {
    PS_JOIN_FIRST,              //  the task's first process
    PS_JOIN_AGAIN,              //  the same process again, alive all along
    PS_JOIN_BACK,               //  the same process, back after it was declared failed
    PS_JOIN_RESTARTED,          //  a new process of a task whose old one is gone
    PS_JOIN_REFUSED,            //  a new process while the old one lives: refused
} ps_join_t;

typedef struct _ps_roster_t ps_roster_t;

//  A roster of nservers, nworkers and nevaluators tasks, none known yet.
ps_roster_t *ps_roster_new (int nservers, int nworkers, int nevaluators);

//  Free the roster and set *self_p to NULL.
void ps_roster_destroy (ps_roster_t **self_p);

//  The tasks of role, and task role:index (index < ps_roster_count).
int ps_roster_count (const ps_roster_t *self, ps_role_t role);
ps_peer_t *ps_roster_peer (ps_roster_t *self, ps_role_t role, int index);

//  How many tasks of role are alive.
int ps_roster_alive (const ps_roster_t *self, ps_role_t role);

//  The task whose registration came from routing id id, or NULL.
ps_peer_t *ps_roster_find (ps_roster_t *self, const void *id, size_t len, ps_role_t *role,
                           int *index);

//  Process pid, incarnation `incarnation`, registers as role:index from
//  routing id id (at most PS_ROSTER_ID_MAX bytes; index in range: the
//  caller checks both). Anything but PS_JOIN_REFUSED makes it the task's
//  live process; a new process starts with its refusals unlogged.
ps_join_t ps_roster_register (ps_roster_t *self, ps_role_t role, int index,
                              uint64_t incarnation, const void *id, size_t len, uint64_t pid,
                              double now);

//  A message came from peer: it is alive. Returns true when it had been
//  declared failed (it is back).
bool ps_roster_heard (ps_roster_t *self, ps_peer_t *peer, double now);

//  Declare task role:index failed (its process is known dead, or the loop
//  gave up on it). Returns true when it was alive until now.
bool ps_roster_fail (ps_roster_t *self, ps_role_t role, int index);

//  The task's process is gone for certain (a launcher saw it end): it is
//  not a silent one that may come back.
void ps_roster_gone (ps_roster_t *self, ps_role_t role, int index);

//  The next live task not heard from for more than timeout_ms: declared
//  failed and silent, and returned in *role, *index. Returns false when
//  there is none. Call until false.
bool ps_roster_expire (ps_roster_t *self, double now, double timeout_ms, ps_role_t *role,
                       int *index);

#endif
