//  The asynchronous parameter-server mode on the worker (see ps_wmode.h):
//  the servers' side (ps_wmode_ps.h) as it is.

#include "ps_wmode_ps.h"

const ps_wmode_ops_t ps_wmode_async = {
    .name = "async",
    .same = NULL,
    .create = ps_wmode_ps_create,
    .destroy = ps_wmode_ps_destroy,
    .train = ps_wmode_ps_train,
    .eval = ps_wmode_ps_eval,
    .order = NULL,
    .settle = ps_wmode_ps_settle,
    .stale = ps_wmode_ps_stale,
    .give_back = NULL,
    .abort = NULL,
};
