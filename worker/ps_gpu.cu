//  The GPU device probe, CUDA implementation; see ps_gpu.h.

#include "ps_gpu.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

//  Report a failed CUDA call by name, with CUDA's own words for the error.
#define S_CHECK(call, code)                                                   \
    do {                                                                      \
        cudaError_t s_rc = (call);                                            \
        if (s_rc != cudaSuccess) {                                            \
            rc = ps_error_set (err, (code), "%s: %s", #call,                  \
                               cudaGetErrorString (s_rc));                    \
            goto done;                                                        \
        }                                                                     \
    } while (0)

int
ps_gpu_probe (ps_gpu_info_t *info, ps_error_t *err)
{
    int rc = PS_OK;
    cudaDeviceProp prop;
    memset (info, 0, sizeof *info);
    //  Without a driver or a device the count fails; both mean the same to
    //  a user: there is no GPU to use here.
    cudaError_t count_rc = cudaGetDeviceCount (&info->count);
    if (count_rc != cudaSuccess) {
        info->count = 0;
        rc = ps_error_set (err, PS_ENOTFOUND, "no CUDA device was found (cudaGetDeviceCount: %s)",
                           cudaGetErrorString (count_rc));
        goto done;
    }
    if (info->count == 0) {
        rc = ps_error_set (err, PS_ENOTFOUND, "no CUDA device was found");
        goto done;
    }
    S_CHECK (cudaGetDeviceProperties (&prop, 0), PS_ENOTFOUND);
    snprintf (info->name, sizeof info->name, "%s", prop.name);
    info->memory = prop.totalGlobalMem;
    info->major = prop.major;
    info->minor = prop.minor;
done:
    return rc;
}

int
ps_gpu_roundtrip (const float *data, size_t n, ps_error_t *err)
{
    int rc = PS_OK;
    float *pinned = NULL;
    float *device = NULL;
    size_t bytes = n * sizeof (float);
    S_CHECK (cudaSetDevice (0), PS_EIO);
    S_CHECK (cudaMallocHost ((void **) &pinned, bytes), PS_EIO);
    S_CHECK (cudaMalloc ((void **) &device, bytes), PS_EIO);
    memcpy (pinned, data, bytes);
    S_CHECK (cudaMemcpy (device, pinned, bytes, cudaMemcpyHostToDevice), PS_EIO);
    memset (pinned, 0, bytes);
    S_CHECK (cudaMemcpy (pinned, device, bytes, cudaMemcpyDeviceToHost), PS_EIO);
    if (memcmp (pinned, data, bytes) != 0)
        rc = ps_error_set (err, PS_ECORRUPT, "data came back from the device changed");
done:
    if (device && cudaFree (device) != cudaSuccess && rc == PS_OK)
        rc = ps_error_set (err, PS_EIO, "cudaFree failed");
    if (pinned && cudaFreeHost (pinned) != cudaSuccess && rc == PS_OK)
        rc = ps_error_set (err, PS_EIO, "cudaFreeHost failed");
    return rc;
}
