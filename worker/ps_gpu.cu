//  The GPU device probe, CUDA implementation; see ps_gpu.h. Its CUDA
//  calls are checked with the GPU engine's PS_CUDA (ps_gpucall.cuh), so a
//  failure reads the same here as anywhere in the engine.

#include "ps_gpu.h"
#include "ps_gpucall.cuh"

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

//  The first device's properties; PS_EIO naming the call when CUDA cannot
//  read them.
static int
s_properties (cudaDeviceProp *prop, ps_error_t *err)
{
    PS_CUDA (cudaGetDeviceProperties (prop, 0));
    return PS_OK;
}

int
ps_gpu_probe (ps_gpu_info_t *info, ps_error_t *err)
{
    cudaDeviceProp prop;
    memset (info, 0, sizeof *info);
    //  Without a driver or a device the count fails; both mean the same to
    //  a user: there is no GPU to use here.
    cudaError_t count_rc = cudaGetDeviceCount (&info->count);
    if (count_rc != cudaSuccess) {
        info->count = 0;
        return ps_error_set (err, PS_ENOTFOUND, "no CUDA device was found (cudaGetDeviceCount: %s)",
                             cudaGetErrorString (count_rc));
    }
    if (info->count == 0)
        return ps_error_set (err, PS_ENOTFOUND, "no CUDA device was found");
    //  A device whose properties cannot be read is no device to use either.
    if (s_properties (&prop, err))
        return ps_error_prefix (err, PS_ENOTFOUND, "no usable CUDA device");
    snprintf (info->name, sizeof info->name, "%s", prop.name);
    info->memory = prop.totalGlobalMem;
    info->major = prop.major;
    info->minor = prop.minor;
    return PS_OK;
}

//  The round trip itself, into buffers the caller frees whatever the
//  outcome, so each checked call may return early.
static int
s_roundtrip (const float *data, size_t n, float **pinned, float **device, ps_error_t *err)
{
    size_t bytes = n * sizeof (float);
    PS_CUDA (cudaSetDevice (0));
    PS_CUDA (cudaMallocHost ((void **) pinned, bytes));
    PS_CUDA (cudaMalloc ((void **) device, bytes));
    memcpy (*pinned, data, bytes);
    PS_CUDA (cudaMemcpy (*device, *pinned, bytes, cudaMemcpyHostToDevice));
    memset (*pinned, 0, bytes);
    PS_CUDA (cudaMemcpy (*pinned, *device, bytes, cudaMemcpyDeviceToHost));
    if (memcmp (*pinned, data, bytes) != 0)
        return ps_error_set (err, PS_ECORRUPT, "data came back from the device changed");
    return PS_OK;
}

int
ps_gpu_roundtrip (const float *data, size_t n, ps_error_t *err)
{
    float *pinned = NULL;
    float *device = NULL;
    int rc = s_roundtrip (data, n, &pinned, &device, err);
    if (device && cudaFree (device) != cudaSuccess && rc == PS_OK)
        rc = ps_error_set (err, PS_EIO, "cudaFree failed");
    if (pinned && cudaFreeHost (pinned) != cudaSuccess && rc == PS_OK)
        rc = ps_error_set (err, PS_EIO, "cudaFreeHost failed");
    return rc;
}
