//  The cores a process may use; see ps_cpus.h.

#include "ps_cpus.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

//  The cgroup v2 quota in cores, rounded up; 0 when there is none or it
//  cannot be read (cgroup v1, no /sys/fs/cgroup): the other limits stand.
static int
s_cgroup_quota (void)
{
    FILE *file = fopen ("/sys/fs/cgroup/cpu.max", "r");
    if (!file)
        return 0;
    char quota [32];
    long period = 0;
    int n = fscanf (file, "%31s %ld", quota, &period);
    fclose (file);
    if (n != 2 || strcmp (quota, "max") == 0 || period <= 0)
        return 0;
    long q = 0;
    if (sscanf (quota, "%ld", &q) != 1 || q <= 0)
        return 0;
    return (int) ((q + period - 1) / period);
}

int
ps_cpus_available (char *source, size_t size)
{
    long online = sysconf (_SC_NPROCESSORS_ONLN);
    int cores = online > 0 ? (int) online : 1;
    const char *why = "CPUs online";
    cpu_set_t set;
    if (sched_getaffinity (0, sizeof set, &set) == 0) {
        int allowed = CPU_COUNT (&set);
        if (allowed > 0 && allowed < cores) {
            cores = allowed;
            why = "CPU affinity";
        }
    }
    int quota = s_cgroup_quota ();
    if (quota > 0 && quota < cores) {
        cores = quota;
        why = "cgroup CPU quota";
    }
    if (source)
        snprintf (source, size, "%s", why);
    return cores;
}
