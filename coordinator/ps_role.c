//  The roles of a cluster's tasks (see ps_role.h).

#include "ps_role.h"

#include <string.h>

static const char *s_names [PS_ROLES] = { "ps", "worker", "evaluator" };

const char *
ps_role_name (ps_role_t role)
{
    return role >= 0 && role < PS_ROLES ? s_names [role] : "?";
}

int
ps_role_parse (const char *name, ps_role_t *role)
{
    for (int r = 0; r < PS_ROLES; r++)
        if (strcmp (name, s_names [r]) == 0) {
            *role = (ps_role_t) r;
            return 0;
        }
    return -1;
}
