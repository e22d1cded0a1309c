//  ps-worker's side of the GPU backend: the functions of ps_gpu.h and
//  ps_gpunet.h, forwarded to the module ps-gpu.so, which is loaded on
//  first use; see ps_gpu_plugin.h for why it is a module.
//
//  The module is looked for in this order, the first that exists winning:
//    1. $PS_GPU_MODULE, a path (a module kept elsewhere, or a test's);
//    2. the directory of the running program, where a copied or packaged
//       ps-worker keeps it;
//    3. PS_GPU_MODULE_INSTALLED, where `meson install` puts it;
//    4. PS_GPU_MODULE_BUILT, where meson builds it, so that the programs,
//       tests and benchmarks of a build tree find theirs.
//  A build without CUDA has no module (PS_GPU_MODULE_BUILT is not
//  defined), and every call says so. The module is never unloaded: CUDA's
//  libraries do not support it, and a process loads it at most once.
//
//  The probe first looks for the NVIDIA driver's device files
//  (/dev/nvidiactl, or /dev/dxg under WSL): without them no CUDA device
//  can be used, and loading CUDA's libraries to learn so would cost the
//  memory the module exists to save. So `--device auto` on a machine
//  without a GPU never loads it.

#include "ps_gpu_plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static const ps_gpu_plugin_t *s_plugin;
static char s_why [PATH_MAX + 512];    //  why it could not be loaded

#ifdef PS_GPU_MODULE_BUILT

//  Load the module at path into s_plugin; 0, or -1 with s_why set.
static int
s_load_path (const char *path)
{
    void *module = dlopen (path, RTLD_NOW | RTLD_LOCAL);
    if (!module) {
        snprintf (s_why, sizeof s_why, "cannot load the GPU backend: %s", dlerror ());
        return -1;
    }
    const ps_gpu_plugin_t *plugin = dlsym (module, PS_GPU_PLUGIN_SYMBOL);
    if (!plugin || plugin->abi != PS_GPU_PLUGIN_ABI || plugin->size != sizeof *plugin) {
        snprintf (s_why, sizeof s_why, "the GPU backend %s is not one this ps-worker can use "
                  "(%s); rebuild them together", path,
                  plugin ? "another version" : "it has no " PS_GPU_PLUGIN_SYMBOL " table");
        dlclose (module);
        return -1;
    }
    s_plugin = plugin;
    return 0;
}

//  Whether the NVIDIA driver's device files are here.
static bool
s_driver_present (void)
{
    return access ("/dev/nvidiactl", F_OK) == 0 || access ("/dev/dxg", F_OK) == 0;
}

//  Candidate i of the search order into path; false when there is none.
static bool
s_candidate (int i, char *path, size_t size)
{
    const char *env = getenv ("PS_GPU_MODULE");
    if (i == 0)
        return env && *env && snprintf (path, size, "%s", env) < (int) size;
    if (env && *env)
        return false;           //  a module named is the only one tried
    if (i == 1) {
        char exe [PATH_MAX];
        ssize_t len = readlink ("/proc/self/exe", exe, sizeof exe - 1);
        if (len <= 0)
            return false;
        exe [len] = '\0';
        char *slash = strrchr (exe, '/');
        if (!slash)
            return false;
        *slash = '\0';
        return snprintf (path, size, "%s/%s", exe, PS_GPU_PLUGIN_FILE) < (int) size;
    }
    if (i == 2)
        return snprintf (path, size, "%s", PS_GPU_MODULE_INSTALLED) < (int) size;
    if (i == 3)
        return snprintf (path, size, "%s", PS_GPU_MODULE_BUILT) < (int) size;
    return false;
}

static void
s_load (void)
{
    char path [PATH_MAX];
    for (int i = 0; i < 4; i++)
        if (s_candidate (i, path, sizeof path) && (i == 0 || access (path, F_OK) == 0))
            return (void) s_load_path (path);
    snprintf (s_why, sizeof s_why, "cannot find the GPU backend %s next to this program, "
              "in %s or in %s (set PS_GPU_MODULE to its path)", PS_GPU_PLUGIN_FILE,
              PS_GPU_MODULE_INSTALLED, PS_GPU_MODULE_BUILT);
}

#else

static void
s_load (void)
{
    snprintf (s_why, sizeof s_why, "no CUDA support: this ps-worker was built without CUDA");
}

#endif

//  The module's table, or NULL with err set: PS_EINVAL, naming why, and
//  what to do when the build has no CUDA.
static const ps_gpu_plugin_t *
s_plugin_get (ps_error_t *err)
{
    if (pthread_once (&s_once, s_load) != 0) {
        ps_error_set (err, PS_EINVAL, "cannot load the GPU backend: pthread_once failed");
        return NULL;
    }
    if (!s_plugin) {
#ifdef PS_GPU_MODULE_BUILT
        ps_error_set (err, PS_EINVAL, "%s", s_why);
#else
        ps_error_set (err, PS_EINVAL, "%s (rebuild with the CUDA toolkit installed and "
                      "-Dcuda=enabled, or use --device cpu)", s_why);
#endif
    }
    return s_plugin;
}

int
ps_gpu_probe (ps_gpu_info_t *info, ps_error_t *err)
{
    memset (info, 0, sizeof *info);
#ifdef PS_GPU_MODULE_BUILT
    if (!s_driver_present ())
        return ps_error_set (err, PS_ENOTFOUND, "no CUDA device: the NVIDIA driver is not "
                             "loaded here (no /dev/nvidiactl)");
#endif
    const ps_gpu_plugin_t *plugin = s_plugin_get (err);
    return plugin ? plugin->probe (info, err) : PS_EINVAL;
}

int
ps_gpu_roundtrip (const float *data, size_t n, ps_error_t *err)
{
    const ps_gpu_plugin_t *plugin = s_plugin_get (err);
    return plugin ? plugin->roundtrip (data, n, err) : PS_EINVAL;
}

ps_gpunet_t *
ps_gpunet_new (const ps_model_t *model, int max_batch, ps_error_t *err)
{
    const ps_gpu_plugin_t *plugin = s_plugin_get (err);
    return plugin ? plugin->net_new (model, max_batch, err) : NULL;
}

//  An engine exists only when the module made it, so the methods below
//  find the module loaded.

void
ps_gpunet_destroy (ps_gpunet_t **self_p)
{
    if (self_p && *self_p)
        s_plugin->net_destroy (self_p);
}

const char *
ps_gpunet_device_name (const ps_gpunet_t *self)
{
    return s_plugin->net_device_name (self);
}

int
ps_gpunet_set_params (ps_gpunet_t *self, const float *params, ps_error_t *err)
{
    return s_plugin->net_set_params (self, params, err);
}

int
ps_gpunet_train_step (ps_gpunet_t *self, const float *x, const uint8_t *labels,
                      int n, uint64_t dropout_seed, float *grads,
                      ps_batch_stats_t *stats, ps_error_t *err)
{
    return s_plugin->net_train_step (self, x, labels, n, dropout_seed, grads, stats, err);
}

int
ps_gpunet_forward (ps_gpunet_t *self, const float *x, const uint8_t *labels,
                   int n, float *logits, ps_batch_stats_t *stats, ps_error_t *err)
{
    return s_plugin->net_forward (self, x, labels, n, logits, stats, err);
}

void
ps_gpunet_set_profiling (ps_gpunet_t *self, bool enabled)
{
    s_plugin->net_set_profiling (self, enabled);
}

void
ps_gpunet_profile (const ps_gpunet_t *self, double *fwd_ms, double *bwd_ms)
{
    s_plugin->net_profile (self, fwd_ms, bwd_ms);
}
