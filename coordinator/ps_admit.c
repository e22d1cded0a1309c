//  Admission (see ps_admit.h).

#include "ps_admit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "ps_host.h"
#include "ps_log.h"
#include "ps_proto.h"

struct _ps_admit_t {
    ps_roster_t *roster;
    ps_metrics_t *report;
    ps_curve_t *curve;
    int timeout_ms;
    uint64_t refused;
};

ps_admit_t *
ps_admit_new (ps_roster_t *roster, ps_metrics_t *report, ps_curve_t *curve, int timeout_ms)
{
    ps_admit_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->roster = roster;
    self->report = report;
    self->curve = curve;
    self->timeout_ms = timeout_ms;
    return self;
}

void
ps_admit_destroy (ps_admit_t **self_p)
{
    free (*self_p);
    *self_p = NULL;
}

//  Answer msg with error code and message.
static void
s_refuse (ps_msg_t *msg, void *router, int code, const char *message)
{
    zmq_msg_t *envelope;
    size_t nenvelope = ps_msg_envelope (msg, &envelope);
    ps_msg_send_error (router, envelope, nenvelope, ps_msg_id (msg), code, message, NULL);
}

bool
ps_admit_authorized (ps_admit_t *self, ps_msg_t *msg, void *router, const char *role,
                     uint64_t index)
{
    if (!self->curve)
        return true;
    char claimed [48];
    snprintf (claimed, sizeof claimed, "%s:%" PRIu64, role, index);
    const char *peer = ps_msg_property (msg, PS_CURVE_PEER_TASK);
    if (peer && strcmp (peer, claimed) == 0)
        return true;
    const char *key = ps_msg_property (msg, PS_CURVE_PEER_KEY);
    char message [160];
    snprintf (message, sizeof message, "%s as %s: this key is %s's",
              ps_proto_info [ps_msg_proto (msg)->type].name, claimed, peer ? peer : "no task");
    if (ps_curve_first_refusal (self->curve, key ? key : "")) {
        ps_metrics_tty_clear (self->report);
        ps_warn ("refused %s (key %s; its later refusals are not logged)", message,
                 key ? key : "none");
        ps_metrics_event (self->report, "refused",
                          json_pack ("{s:s, s:s, s:s}", "what", "key", "claimed", claimed,
                                     "key_task", peer ? peer : ""));
    }
    s_refuse (msg, router, PS_EPERM, message);
    return false;
}

ps_peer_t *
ps_admit_register (ps_admit_t *self, ps_msg_t *msg, void *router, const void *id,
                   size_t id_len, double now, bool servers_awaited, ps_role_t *role_p,
                   int *index_p, ps_join_t *join_p)
{
    const ps_proto_register_t *reg = &ps_msg_proto (msg)->register_;
    const char *role_name = reg->role;
    ps_role_t role = PS_ROLES;
    if (ps_role_parse (role_name, &role) != 0)
        role = PS_ROLES;
    uint64_t index = reg->index;
    uint64_t incarnation = reg->incarnation;
    uint64_t pid = reg->pid;
    char message [256];
    if (role == PS_ROLES || index >= (uint64_t) ps_roster_count (self->roster, role)) {
        if (role == PS_ROLES)
            snprintf (message, sizeof message, "unknown role: expected ps, worker or evaluator");
        else {
            int count = ps_roster_count (self->roster, role);
            snprintf (message, sizeof message, "unknown task %s:%" PRIu64 ": the cluster has "
                      "%d %s task%s", role_name, index, count, role_name, count == 1 ? "" : "s");
        }
        ps_warn ("refused a registration: %s", message);
        s_refuse (msg, router, PS_EINVAL, message);
        return NULL;
    }
    if (id_len > PS_ROSTER_ID_MAX) {
        s_refuse (msg, router, PS_EINVAL, "routing id too long");
        return NULL;
    }
    int servers = ps_roster_count (self->roster, PS_ROLE_PS);
    int alive = ps_roster_alive (self->roster, PS_ROLE_PS);
    if (servers_awaited && role == PS_ROLE_WORKER && alive < servers) {
        snprintf (message, sizeof message, "the run starts once all %d servers have registered "
                  "(%d so far)", servers, alive);
        s_refuse (msg, router, PS_EBUSY, message);
        return NULL;
    }
    ps_peer_t *peer = ps_roster_peer (self->roster, role, (int) index);
    ps_join_t join = ps_roster_register (self->roster, role, (int) index, incarnation, id,
                                         id_len, pid, now);
    //  A new incarnation of a task whose process is alive (it heartbeats,
    //  and no death was seen) is refused: taking it would declare a
    //  working process failed on the word of any process that claims its
    //  task. Until the old one's death is known or its silence passes the
    //  heartbeat timeout the new one's link keeps registering, and the
    //  code "busy" tells it that waiting is right.
    if (join == PS_JOIN_REFUSED) {
        self->refused++;
        snprintf (message, sizeof message, "%s:%" PRIu64 " is held by a live process (pid %"
                  PRIu64 ", heard from %.0f ms ago); a new incarnation is taken once that "
                  "one's death is known or it has been silent for %d ms", role_name, index,
                  peer->pid, now - peer->last_seen, self->timeout_ms);
        if (!peer->refused_register_logged) {
            ps_metrics_tty_clear (self->report);
            ps_warn ("refused a registration (pid %" PRIu64 "): %s", pid, message);
            ps_metrics_event (self->report, "refused",
                              json_pack ("{s:s, s:s, s:I, s:I}", "what", "registration", "role",
                                         role_name, "task", (json_int_t) index, "pid",
                                         (json_int_t) pid));
            peer->refused_register_logged = true;
        }
        s_refuse (msg, router, PS_EBUSY, message);
        return NULL;
    }
    if (join != PS_JOIN_AGAIN) {
        ps_metrics_tty_clear (self->report);
        ps_info ("%s:%" PRIu64 " registered (pid %" PRIu64 ")%s", role_name, index, pid,
                 join == PS_JOIN_RESTARTED ? ", a new incarnation"
                 : join == PS_JOIN_BACK ? ", back after a silence" : "");
        //  The event's endpoint is the tcp one, as before endpoint sets
        //  (ps_host.h); the ipc endpoint beside it, if any, is its own field
        //  (the ZeroMQ endpoint, also where the set says plain+ipc://).
        const char *endpoint = reg->endpoint;
        size_t ipc_len = 0;
        const char *ipc = ps_host_ipc_of (endpoint, &ipc_len, NULL);
        json_t *event = json_pack ("{s:s, s:I, s:I, s:b, s:s%}", "role", role_name,
                                   "task", (json_int_t) index, "pid", (json_int_t) pid,
                                   "restarted", join == PS_JOIN_RESTARTED,
                                   "endpoint", endpoint, strcspn (endpoint, ","));
        if (event && ipc)
            json_object_set_new (event, "ipc", json_stringn (ipc, ipc_len));
        ps_metrics_event (self->report, "registered", event);
    }
    //  The endpoint of the process taken now (a new incarnation may have
    //  another ipc endpoint), cut short as an unusable set rather than
    //  mended: a set too long for the roster is told to no one.
    if (strlen (reg->endpoint) < sizeof peer->endpoint)
        memcpy (peer->endpoint, reg->endpoint, strlen (reg->endpoint) + 1);
    else
        peer->endpoint [0] = '\0';
    *role_p = role;
    *index_p = (int) index;
    *join_p = join;
    return peer;
}

uint64_t
ps_admit_refused (const ps_admit_t *self)
{
    return self->refused;
}
