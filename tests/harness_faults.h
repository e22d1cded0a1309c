//  The failure cases that async, ssp and sync each run, with the same
//  checks, on a local cluster of 2 servers and 2 workers: a worker killed
//  (kill -9) mid-epoch, with or without restarts; a worker stopped
//  (SIGSTOP) past the heartbeat timeout, then continued; a server killed,
//  recovered from the newest checkpoint. mode is the run's mode flags
//  (NULL: async); examples the number of training examples before
//  PS_TEST_SCALE, which sets how long the run trains around the failure.

#ifndef PS_HARNESS_FAULTS_H_INCLUDED
#define PS_HARNESS_FAULTS_H_INCLUDED

#include <stdbool.h>

//  A worker killed a sixth of the way into a run of 3 epochs: the
//  supervisor sees the death at once, the worker's steps go back to the
//  queue, and the run completes with the other worker (and, with restart,
//  the killed one's new process).
void cluster_kill_worker (const char *name, bool restart, const char *const *mode,
                          int examples);

//  A worker stopped an eighth of the way into a run of 4 epochs, while it
//  holds a step: declared failed by the heartbeat timeout, its step goes
//  to the other worker, and after SIGCONT the same process comes back.
//  Under ssp it leaves the clock meanwhile, under sync the rounds. With
//  holds_step, the mode keeps a training worker holding a step at all
//  times, so the stopped worker must have held one (released when it was
//  declared failed) and its push of it must come, late, and be refused as
//  a duplicate; without (sync, see test_cluster_sync), it may have been
//  stopped between steps, and exactly once is all there is to check.
void cluster_stop_worker (const char *name, const char *const *mode, int examples,
                          bool holds_step);

//  A server killed a third of the way into a run of 3 epochs recovers
//  from the newest checkpoint.
void cluster_kill_server (const char *name, const char *const *mode, int examples);

//  The coordinator killed (kill -9) after the checkpoint a third of the way
//  into a run of 3 epochs: its children die with it within 2 s; the same
//  command with --resume resumes from the newest checkpoint and trains
//  exactly the steps after it, none twice.
void cluster_kill_coordinator (const char *name, const char *const *mode, int examples);

#endif
