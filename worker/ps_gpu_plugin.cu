//  The table ps-gpu.so exports; see ps_gpu_plugin.h. The module is
//  compiled with hidden visibility, so this is its only public symbol.

#include "ps_gpu_plugin.h"

extern "C" __attribute__ ((visibility ("default")))
const ps_gpu_plugin_t ps_gpu_plugin = {
    PS_GPU_PLUGIN_ABI,
    sizeof (ps_gpu_plugin_t),
    ps_gpu_probe,
    ps_gpu_roundtrip,
    ps_gpunet_new,
    ps_gpunet_destroy,
    ps_gpunet_device_name,
    ps_gpunet_set_params,
    ps_gpunet_train_step,
    ps_gpunet_forward,
    ps_gpunet_set_profiling,
    ps_gpunet_profile,
};
