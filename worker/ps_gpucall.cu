//  Checking CUDA and cuBLAS calls: see ps_gpucall.cuh.

#include "ps_gpucall.cuh"

#include <string.h>

//  cuBLAS's status names. The library has cublasGetStatusString, but its
//  wording varies across versions and its absence on old toolkits would
//  break the build; the enum itself is stable.
static const char *
s_cublas_status_name (cublasStatus_t status)
{
    switch (status) {
        case CUBLAS_STATUS_SUCCESS:          return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED:  return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED:     return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE:    return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH:    return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR:    return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR:   return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED:    return "CUBLAS_STATUS_NOT_SUPPORTED";
        case CUBLAS_STATUS_LICENSE_ERROR:    return "CUBLAS_STATUS_LICENSE_ERROR";
        default:                             return "unknown cuBLAS status";
    }
}

//  The called function's name: the text of the call up to its argument
//  list, so that messages say "cudaMemcpyAsync: ..." and not the whole
//  expression.
static int
s_call_name_length (const char *call)
{
    return (int) strcspn (call, " (");
}

int
ps_gpucall_cuda_failed (ps_error_t *err, const char *call, cudaError_t rc)
{
    //  A failed runtime call also sets CUDA's last-error state; clear it,
    //  or the next kernel launch's cudaGetLastError would report this
    //  failure again as its own.
    (void) cudaGetLastError ();
    return ps_error_set (err, PS_EIO, "%.*s: %s", s_call_name_length (call), call,
                         cudaGetErrorString (rc));
}

int
ps_gpucall_cublas_failed (ps_error_t *err, const char *call, cublasStatus_t status)
{
    return ps_error_set (err, PS_EIO, "%.*s: %s", s_call_name_length (call), call,
                         s_cublas_status_name (status));
}

unsigned int
ps_gpucall_blocks (int64_t count)
{
    int64_t blocks = (count + PS_GPU_THREADS - 1) / PS_GPU_THREADS;
    return (unsigned int) (blocks < PS_GPU_MAX_BLOCKS ? blocks : PS_GPU_MAX_BLOCKS);
}
