//  Admission: who may speak to the coordinator, and as which task. In a
//  secured cluster a message counts only from the process whose key is
//  the task's it claims (ps_curve.h); a registration must name a role and
//  an index the cluster has; and the roster's rules decide whether a new
//  process may take a task (not while the old one lives). Every refusal
//  is answered with an error that says why, logged once per key or per
//  incarnation, and recorded as a "refused" event; every registration
//  taken is logged and recorded as "registered". What a registration
//  taken means to the run (the reply with the plan, a replica to reset)
//  is the loop's and the mode's.

#ifndef PS_ADMIT_H_INCLUDED
#define PS_ADMIT_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include "ps_curve.h"
#include "ps_metrics.h"
#include "ps_msg.h"
#include "ps_roster.h"

typedef struct _ps_admit_t ps_admit_t;

//  Admission to roster's tasks, events to report; curve is the
//  coordinator's identity in a secured cluster (NULL: unsecured);
//  timeout_ms the heartbeat timeout, which a refusal quotes.
ps_admit_t *ps_admit_new (ps_roster_t *roster, ps_metrics_t *report, ps_curve_t *curve,
                          int timeout_ms);
void ps_admit_destroy (ps_admit_t **self_p);

//  Whether msg, received on router, comes from task role:index's key (or
//  the cluster is unsecured). If not, it is answered "forbidden".
bool ps_admit_authorized (ps_admit_t *self, ps_msg_t *msg, void *router, const char *role,
                          uint64_t index);

//  Take the registration msg from routing id id, received on router, at
//  now: returns its task's peer, with *role, *index and *join, or NULL
//  after answering the refusal. With servers_awaited (the run has not
//  started, and servers hold its variables), a worker that registers
//  before every server has is answered "busy": its plan would give those
//  servers as the cluster spec does (tcp), never their endpoint sets, so
//  it would reach a server of its own host over loopback TCP and CurveZMQ
//  for the whole run rather than over the same-host plane (ps_curve.h).
//  Its link registers again shortly (ps_link.h). An evaluator, off the
//  training path, is taken at once.
ps_peer_t *ps_admit_register (ps_admit_t *self, ps_msg_t *msg, void *router, const void *id,
                              size_t id_len, double now, bool servers_awaited, ps_role_t *role,
                              int *index, ps_join_t *join);

//  Registrations refused because the task's process was alive.
uint64_t ps_admit_refused (const ps_admit_t *self);

#endif
