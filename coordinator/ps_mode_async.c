//  The asynchronous mode (see ps_mode_async.h): the servers' side
//  (ps_mode_ps.h) with no policy of its own.

#include "ps_mode_async.h"

#include "ps_mode_ps.h"

static void *
s_new (ps_mode_host_t *host, ps_error_t *err)
{
    (void) err;
    return ps_mode_ps_new (host, NULL, NULL);
}

static void
s_destroy (void **self_p)
{
    ps_mode_ps_t *self = *self_p;
    ps_mode_ps_destroy (&self);
    *self_p = NULL;
}

const ps_mode_ops_t ps_mode_async = {
    .name = "async",
    .holders = PS_ROLE_PS,
    .start_partial = false,
    .min_servers = 1,
    .local_servers = 2,
    .new = s_new,
    .destroy = s_destroy,
    .setup = ps_mode_ps_setup,
    .request = ps_mode_ps_request,
    .task_failed = ps_mode_ps_task_failed,
    .server_failed = ps_mode_ps_server_failed,
    .advance = ps_mode_ps_advance,
    .final_checkpoint = ps_mode_ps_final_checkpoint,
};
