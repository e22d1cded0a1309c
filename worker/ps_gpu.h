//  The GPU device probe: whether a CUDA device can be used, and which. The
//  GPU compute backend (worker issue) builds on it; `--device auto` uses it
//  to choose. ps_gpu.cu implements it in the module ps-gpu.so, built when
//  meson finds CUDA; programs call ps_gpuload.c's forwarders, which load
//  the module on first use (see ps_gpu_plugin.h) or say why they cannot.

#ifndef PS_GPU_H_INCLUDED
#define PS_GPU_H_INCLUDED

#include <stddef.h>

#include "ps_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int count;                  //  CUDA devices visible
    char name [256];            //  device 0
    size_t memory;              //  bytes on device 0
    int major, minor;           //  compute capability of device 0
} ps_gpu_info_t;

//  Fill *info about the devices present. Returns 0; PS_ENOTFOUND when
//  CUDA is compiled in but no device is present (or the driver is
//  missing), with the CUDA error in err; PS_EINVAL when this build has no
//  CUDA support.
int ps_gpu_probe (ps_gpu_info_t *info, ps_error_t *err);

//  Copy n floats to device 0 and back through pinned host memory, checking
//  every CUDA call. Returns 0 when the copy came back equal, else an error
//  naming the failing call.
int ps_gpu_roundtrip (const float *data, size_t n, ps_error_t *err);

#ifdef __cplusplus
}
#endif

#endif
