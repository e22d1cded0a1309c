//  The GPU probe and a device round trip through pinned memory. Without a
//  device (or without CUDA in the build) the test prints a visible SKIP and
//  exits 77, which meson counts as skipped, never as passed.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_gpu.h"

int
main (void)
{
    ps_gpu_info_t info;
    ps_error_t err;
    int rc = ps_gpu_probe (&info, &err);
    if (rc) {
        printf ("SKIP: no usable GPU: %s\n", err.msg);
        return 77;
    }
    printf ("GPU: %s, %.1f GiB, compute capability %d.%d, %d device(s)\n", info.name,
            (double) info.memory / (1 << 30), info.major, info.minor, info.count);
    if (info.name [0] == 0 || info.memory == 0) {
        printf ("FAIL: the probe reported a device without name or memory\n");
        return 1;
    }
    size_t n = 1000003;
    float *data = malloc (n * sizeof (float));
    for (size_t i = 0; i < n; i++)
        data [i] = (float) i * 0.5f - 7.0f;
    rc = ps_gpu_roundtrip (data, n, &err);
    free (data);
    if (rc) {
        printf ("FAIL: round trip: %s\n", err.msg);
        return 1;
    }
    printf ("PASS: %zu floats went to the device and came back equal\n", n);
    return 0;
}
