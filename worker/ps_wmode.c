//  The worker's consistency modes; see ps_wmode.h.

#include "ps_wmode.h"
#include "ps_wmode_ctr.h"

const ps_wmode_ops_t *
ps_wmode_find (const ps_plan_t *plan)
{
    //  A CTR model's own mode refuses the modes it cannot run, by name.
    if (ps_wmode_ctr_plan (plan))
        return &ps_wmode_ctr;
    return plan->mirrored ? &ps_wmode_mirrored : plan->sync ? &ps_wmode_sync : &ps_wmode_async;
}
