//  Sharing the cores among a local cluster's processes (see ps_cores.h).

#include "ps_cores.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

//  An evaluator's threads: standalone evaluates the 10k Fashion-MNIST
//  test images in about 0.4 s on 2.
#define S_EVALUATOR_THREADS 2

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
ps_cores_available (char *source, size_t size)
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

void
ps_cores_split (int cores, int nworkers, int nservers, bool may_evaluate,
                ps_cores_split_t *split)
{
    if (cores < 1)
        cores = 1;
    if (nworkers < 1)
        nworkers = 1;
    if (nservers < 0)
        nservers = 0;
    int total = cores;
    bool evaluator = may_evaluate && cores >= nworkers + nservers + S_EVALUATOR_THREADS;
    bool idle = may_evaluate && !evaluator;
    if (evaluator)
        cores -= S_EVALUATOR_THREADS;
    int server_threads = nservers > 0 ? cores / 4 / nservers : 0;
    //  Every worker keeps a core of its own before a server has a pool.
    while (server_threads > 0 && cores - nservers * server_threads < nworkers)
        server_threads--;
    int worker_threads = (cores - nservers * server_threads) / nworkers;
    *split = (ps_cores_split_t) {
        .cores = total,
        .worker_threads = worker_threads > 0 ? worker_threads : 1,
        .server_threads = server_threads,
        .io_threads = 1,
        .evaluator = evaluator || idle,
        .evaluator_idle = idle,
        .evaluator_threads = evaluator ? S_EVALUATOR_THREADS
                           : idle ? (total < S_EVALUATOR_THREADS ? total : S_EVALUATOR_THREADS)
                           : 0,
    };
}
