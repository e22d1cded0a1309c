//  The GPU backend module, ps-gpu.so (worker/ps_gpu_plugin.h), in a build
//  with CUDA, on any machine: a program linked as ps-worker is maps none
//  of CUDA's libraries until the module is loaded, which is what keeps a
//  CPU worker's memory at its data's size; the module loads with every
//  symbol resolved (RTLD_NOW) and carries cuBLAS with it; its table is of
//  this build's version; and its probe and engine answer, on a machine
//  without a GPU, with "no device" (PS_ENOTFOUND), never a crash. With a
//  GPU the engine is made and destroyed; test_gpu_backend checks its
//  arithmetic.

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_gpu_plugin.h"
#include "ps_model.h"

static int s_failures;

static void
s_check (bool ok, const char *what)
{
    printf ("%s: %s\n", ok ? "ok" : "FAIL", what);
    if (!ok)
        s_failures++;
}

//  Whether this process maps a file whose name holds needle.
static bool
s_mapped (const char *needle)
{
    FILE *maps = fopen ("/proc/self/maps", "r");
    if (!maps) {
        perror ("/proc/self/maps");
        exit (1);
    }
    char line [4096];
    bool found = false;
    while (!found && fgets (line, sizeof line, maps))
        found = strstr (line, needle) != NULL;
    fclose (maps);
    return found;
}

int
main (void)
{
    s_check (!s_mapped ("libcublas") && !s_mapped ("libcudart"),
             "a program linked with the GPU loader maps no CUDA library before the module");
    void *module = dlopen (PS_GPU_MODULE_BUILT, RTLD_NOW | RTLD_LOCAL);
    if (!module) {
        printf ("FAIL: dlopen %s: %s\n", PS_GPU_MODULE_BUILT, dlerror ());
        return 1;
    }
    s_check (s_mapped ("libcublas"), "the module brings cuBLAS with it");
    const ps_gpu_plugin_t *plugin = dlsym (module, PS_GPU_PLUGIN_SYMBOL);
    s_check (plugin != NULL, "the module exports its table");
    if (!plugin)
        return 1;
    s_check (plugin->abi == PS_GPU_PLUGIN_ABI && plugin->size == sizeof *plugin,
             "the table is this build's version");
    //  Neither the engine's names nor the common library's are public, so
    //  nothing in the module can be bound to a program's own functions.
    s_check (dlsym (module, "ps_gpunet_new") == NULL && dlsym (module, "ps_gpu_probe") == NULL
             && dlsym (module, "ps_error_set") == NULL,
             "the module's functions are hidden behind the table");

    ps_gpu_info_t info;
    ps_error_t err = { 0 };
    int rc = plugin->probe (&info, &err);
    bool gpu = rc == 0 && info.count > 0;
    s_check (gpu || (rc == PS_ENOTFOUND && strstr (err.msg, "CUDA")),
             gpu ? "probe: a device" : "probe: no device, saying what CUDA said");
    printf ("  probe: rc %d, %d device(s)%s%s\n", rc, info.count, rc ? ": " : "",
            rc ? err.msg : "");

    ps_model_t *model = ps_model_load ("cnn", &err);
    s_check (model != NULL, "the seed model loads");
    if (!model)
        return 1;
    err = (ps_error_t) { 0 };
    ps_gpunet_t *net = plugin->net_new (model, 64, &err);
    if (gpu) {
        s_check (net != NULL, "the engine is made on the device");
        if (net)
            printf ("  device: %s\n", plugin->net_device_name (net));
        plugin->net_destroy (&net);
        s_check (net == NULL, "destroy NULLs the caller's pointer");
    }
    else
        s_check (net == NULL && strstr (err.msg, "no CUDA device"),
                 "without a device the engine is refused, saying so");
    ps_model_destroy (&model);
    printf ("%s\n", s_failures ? "FAILED" : "passed");
    return s_failures ? 1 : 0;
}
