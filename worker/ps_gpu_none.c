//  The GPU device probe for builds without CUDA; see ps_gpu.h.

#include "ps_gpu.h"

#include <string.h>

int
ps_gpu_probe (ps_gpu_info_t *info, ps_error_t *err)
{
    memset (info, 0, sizeof *info);
    return ps_error_set (err, PS_EINVAL,
                         "this build has no CUDA support (reconfigure with -Dcuda=enabled)");
}

int
ps_gpu_roundtrip (const float *data, size_t n, ps_error_t *err)
{
    (void) data;
    (void) n;
    return ps_error_set (err, PS_EINVAL, "this build has no CUDA support");
}
