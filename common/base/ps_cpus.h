//  The cores a process may use: the fewest of the CPUs online, the CPUs
//  its affinity mask allows (taskset, a container's cpuset) and the
//  cgroup v2 CPU quota (cpu.max, rounded up). A local cluster splits them
//  among its processes (coordinator/ps_cores.h); a ps-server sizes its
//  apply pool by them and serves small requests inline where they are few,
//  and a standalone worker sizes its CPU engine by them, so that a process
//  in a container limited to 2 cores of a larger host behaves as on a
//  2-core machine.

#ifndef PS_CPUS_H_INCLUDED
#define PS_CPUS_H_INCLUDED

#include <stddef.h>

//  The cores this process may use (>= 1), and in source (when not NULL) a
//  few words saying which limit decided it.
int ps_cpus_available (char *source, size_t size);

#endif
