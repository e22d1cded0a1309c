//  The worker's consistency modes; see ps_wmode.h.

#include "ps_wmode.h"

const ps_wmode_ops_t *
ps_wmode_find (const ps_plan_t *plan)
{
    return plan->mirrored ? &ps_wmode_mirrored : plan->sync ? &ps_wmode_sync : &ps_wmode_async;
}
