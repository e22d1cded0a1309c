//  The coordinator's roster (see ps_roster.h).

#include "ps_roster.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

struct _ps_roster_t {
    ps_peer_t *peers [PS_ROLES];
    int npeers [PS_ROLES];
};

ps_roster_t *
ps_roster_new (int nservers, int nworkers, int nevaluators)
{
    ps_roster_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    int counts [PS_ROLES] = { nservers, nworkers, nevaluators };
    for (int r = 0; r < PS_ROLES; r++) {
        self->npeers [r] = counts [r];
        self->peers [r] = calloc ((size_t) counts [r] + 1, sizeof (ps_peer_t));
        if (!self->peers [r])
            abort ();
    }
    return self;
}

void
ps_roster_destroy (ps_roster_t **self_p)
{
    ps_roster_t *self = *self_p;
    if (!self)
        return;
    for (int r = 0; r < PS_ROLES; r++)
        free (self->peers [r]);
    free (self);
    *self_p = NULL;
}

int
ps_roster_count (const ps_roster_t *self, ps_role_t role)
{
    return self->npeers [role];
}

ps_peer_t *
ps_roster_peer (ps_roster_t *self, ps_role_t role, int index)
{
    assert (index >= 0 && index < self->npeers [role]);
    return &self->peers [role][index];
}

int
ps_roster_alive (const ps_roster_t *self, ps_role_t role)
{
    int n = 0;
    for (int i = 0; i < self->npeers [role]; i++)
        n += self->peers [role][i].alive;
    return n;
}

ps_peer_t *
ps_roster_find (ps_roster_t *self, const void *id, size_t len, ps_role_t *role, int *index)
{
    for (int r = 0; r < PS_ROLES; r++)
        for (int i = 0; i < self->npeers [r]; i++) {
            ps_peer_t *peer = &self->peers [r][i];
            if (peer->known && peer->id_len == len && memcmp (peer->id, id, len) == 0) {
                *role = (ps_role_t) r;
                *index = i;
                return peer;
            }
        }
    return NULL;
}

ps_join_t
ps_roster_register (ps_roster_t *self, ps_role_t role, int index, uint64_t incarnation,
                    const void *id, size_t len, uint64_t pid, double now)
{
    ps_peer_t *peer = ps_roster_peer (self, role, index);
    assert (len <= sizeof peer->id);
    bool again = peer->known && peer->incarnation == incarnation;
    bool restarted = peer->known && peer->incarnation != incarnation;
    //  A process that really restarted is taken once the old one's death
    //  is known or its silence has passed the heartbeat timeout.
    if (restarted && peer->alive)
        return PS_JOIN_REFUSED;
    if (restarted || !peer->known)
        peer->refused_report_logged = peer->refused_register_logged = false;
    bool was_alive = peer->alive;
    peer->known = true;
    peer->alive = true;
    peer->silent = false;
    peer->stopped = false;
    peer->incarnation = incarnation;
    memcpy (peer->id, id, len);
    peer->id_len = len;
    peer->last_seen = now;
    peer->pid = pid;
    if (restarted)
        return PS_JOIN_RESTARTED;
    if (!again)
        return PS_JOIN_FIRST;
    return was_alive ? PS_JOIN_AGAIN : PS_JOIN_BACK;
}

bool
ps_roster_heard (ps_roster_t *self, ps_peer_t *peer, double now)
{
    (void) self;
    peer->last_seen = now;
    if (peer->alive)
        return false;
    //  Declared failed but alive after all (it was stopped, or its network
    //  was cut): it counts again.
    peer->alive = true;
    peer->silent = false;
    return true;
}

bool
ps_roster_fail (ps_roster_t *self, ps_role_t role, int index)
{
    ps_peer_t *peer = ps_roster_peer (self, role, index);
    bool was = peer->alive;
    peer->alive = false;
    return was;
}

void
ps_roster_gone (ps_roster_t *self, ps_role_t role, int index)
{
    ps_roster_peer (self, role, index)->silent = false;
}

bool
ps_roster_expire (ps_roster_t *self, double now, double timeout_ms, ps_role_t *role,
                  int *index)
{
    for (int r = 0; r < PS_ROLES; r++)
        for (int i = 0; i < self->npeers [r]; i++) {
            ps_peer_t *peer = &self->peers [r][i];
            if (!peer->alive || now - peer->last_seen <= timeout_ms)
                continue;
            peer->alive = false;
            peer->silent = true;
            *role = (ps_role_t) r;
            *index = i;
            return true;
        }
    return false;
}
