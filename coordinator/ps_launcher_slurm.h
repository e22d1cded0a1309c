//  The Slurm launcher: relaunches the tasks of a cluster that runs as a
//  Slurm job step, for `coordinator --cluster-resolver slurm`.
//
//  Slurm, not the launcher, starts the cluster: one `srun` step whose
//  tasks each find their role with the cluster resolver (ps_slurm.h).
//  Starting a task here only records how to run it again (its program,
//  arguments and TF_CONFIG, and the node its address names). The
//  coordinator cannot see those processes, so it learns that one died
//  from the heartbeat timeout, and then (the `silent` operation) the
//  launcher starts it again into the same allocation:
//
//    srun --jobid=$SLURM_JOB_ID --overlap --ntasks=1 --nodes=1
//         --nodelist=NODE --export=ALL PROGRAM ARGS...
//
//  with TF_CONFIG naming the cluster and the task (a step of one task is
//  rank 0, so the rank cannot come from Slurm). Each relaunch runs as a
//  supervised child (ps_supervisor.h): when that srun ends with a failure
//  it is run again with a backoff, and given up on when it keeps failing;
//  its end is reported by poll, as the local launcher's are.
//
//  A task is relaunched at most once at a time: while a relaunch of it
//  runs (or waits to be restarted), a second silence starts nothing. A
//  silent original that is only stalled, not dead, is not killed (the
//  coordinator cannot reach its process): if it wakes up, the roster
//  refuses it while the new one lives, and the servers' ledgers ignore a
//  step it pushes twice. A stalled server still holds its port, so its
//  relaunch fails to bind until it is gone; the supervisor's backoff
//  retries it.

#ifndef PS_LAUNCHER_SLURM_H_INCLUDED
#define PS_LAUNCHER_SLURM_H_INCLUDED

#include "ps_error.h"
#include "ps_launcher.h"

//  A Slurm launcher for job job_id. srun is found on $PATH (or $PS_SRUN),
//  ps-server and ps-worker as the local launcher finds them. NULL with
//  err set when one of them cannot be found.
ps_launcher_t *ps_launcher_slurm_new (const char *job_id, ps_error_t *err);

#endif
