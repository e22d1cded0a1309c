//  Checking the GPU engine's CUDA and cuBLAS calls, and the grid its
//  element-wise kernels are launched on. For the files nvcc compiles only.
//
//  Every CUDA and cuBLAS call is checked; a failure becomes PS_EIO with the
//  call's name and CUDA's (or our cuBLAS table's) words for it. Kernel
//  launches are checked with cudaGetLastError; faults inside a kernel
//  surface at the next synchronising call, which names itself.

#ifndef PS_GPUCALL_CUH_INCLUDED
#define PS_GPUCALL_CUH_INCLUDED

#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "ps_error.h"

//  Threads per block for the element-wise kernels, and a cap on the grid:
//  the kernels loop with a grid stride, so a larger batch only means more
//  iterations per thread, never a launch that exceeds the grid limits.
#define PS_GPU_THREADS      256
#define PS_GPU_MAX_BLOCKS   65536

//  Set err to PS_EIO naming the call (the text of the call up to its
//  argument list) and CUDA's words for rc, clearing CUDA's last-error
//  state. Returns PS_EIO.
int ps_gpucall_cuda_failed (ps_error_t *err, const char *call, cudaError_t rc);

//  The same for a cuBLAS status.
int ps_gpucall_cublas_failed (ps_error_t *err, const char *call, cublasStatus_t status);

//  The blocks of PS_GPU_THREADS that cover count elements, at most
//  PS_GPU_MAX_BLOCKS.
unsigned int ps_gpucall_blocks (int64_t count);

//  These macros return from the enclosing function, which has a
//  ps_error_t *err in scope; the constructor frees what was built on its
//  one exit path, so no function needs to undo anything itself.
#define PS_CUDA(call)                                                          \
    do {                                                                      \
        cudaError_t s_rc_ = (call);                                           \
        if (s_rc_ != cudaSuccess)                                             \
            return ps_gpucall_cuda_failed (err, #call, s_rc_);                         \
    } while (0)

#define PS_CUBLAS(call)                                                        \
    do {                                                                      \
        cublasStatus_t s_status_ = (call);                                    \
        if (s_status_ != CUBLAS_STATUS_SUCCESS)                               \
            return ps_gpucall_cublas_failed (err, #call, s_status_);                   \
    } while (0)

#define PS_TRY(expr)                                                           \
    do {                                                                      \
        int s_try_ = (expr);                                                  \
        if (s_try_ != PS_OK)                                                  \
            return s_try_;                                                    \
    } while (0)

//  Launch an element-wise kernel over `count` elements on the engine's
//  stream. Nothing is launched for zero elements (a grid of zero blocks is
//  a launch error).
#define PS_LAUNCH(kernel, count, ...)                                          \
    do {                                                                      \
        int64_t s_count_ = (int64_t) (count);                                 \
        if (s_count_ > 0) {                                                   \
            kernel <<<ps_gpucall_blocks (s_count_), PS_GPU_THREADS, 0,          \
                      self->stream>>> (__VA_ARGS__);                          \
            cudaError_t s_rc_ = cudaGetLastError ();                          \
            if (s_rc_ != cudaSuccess)                                         \
                return ps_error_set (err, PS_EIO, "launching %s: %s", #kernel, \
                                     cudaGetErrorString (s_rc_));             \
        }                                                                     \
    } while (0)

#endif
