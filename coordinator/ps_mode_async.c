//  The asynchronous mode (see ps_mode_async.h).

#include "ps_mode_async.h"

#include "ps_mode_ps.h"

//  A worker has a step whenever the schedule has one to hand out.
static void
s_request (void *self_, ps_peer_t *peer, ps_role_t role, int index, uint64_t id,
           const ps_proto_work_request_t *req)
{
    ps_mode_ps_t *self = self_;
    ps_mode_ps_take_reports (self, peer, role, index, req);
    bool want = req->want > 0;
    if (ps_mode_ps_answer (self, peer, role, index, id, want))
        return;
    if (want && role == PS_ROLE_WORKER && ps_mode_ps_dispatching (self)
    &&  ps_mode_ps_hand_out (self, peer, index, id))
        return;
    ps_mode_ps_wait (self, peer, id);
}

const ps_mode_ops_t ps_mode_async = {
    .name = "async",
    .holders = PS_ROLE_PS,
    .start_partial = false,
    .min_servers = 1,
    .local_servers = 2,
    .new = ps_mode_ps_new,
    .destroy = ps_mode_ps_destroy,
    .setup = ps_mode_ps_setup,
    .request = s_request,
    .task_failed = ps_mode_ps_task_failed,
    .server_failed = ps_mode_ps_server_failed,
    .advance = ps_mode_ps_advance,
    .final_checkpoint = ps_mode_ps_final_checkpoint,
};
