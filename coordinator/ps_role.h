//  The roles of a cluster's tasks, as the coordinator names them: a
//  parameter server ("ps"), a worker, an evaluator. The roster, the modes
//  and the launchers all speak of a task as a role and an index.

#ifndef PS_ROLE_H_INCLUDED
#define PS_ROLE_H_INCLUDED

typedef enum { PS_ROLE_PS, PS_ROLE_WORKER, PS_ROLE_EVALUATOR, PS_ROLES } ps_role_t;

//  The role's name ("ps", "worker", "evaluator"; "?" for none).
const char *ps_role_name (ps_role_t role);

//  The role named name: 0, or -1 when the name is none of them.
int ps_role_parse (const char *name, ps_role_t *role);

#endif
