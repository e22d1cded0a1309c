//  Worker 0 of a cluster without a chief: the coordinator's parent.
//
//  A cluster of workers only (TensorFlow's MultiWorkerMirroredStrategy
//  TF_CONFIG) lists no chief. Every process derives the coordinator's
//  address from worker 0's (ps_tfconfig.h), and ps-worker worker:0 runs
//  the coordinator there: it starts the `coordinator` program (found as
//  ps_program.h says) as a child process, with the same spec, the task
//  chief:0 and the job file it was given, then trains as worker 0. The
//  two end together, leaving no process behind:
//    - the coordinator ends: worker 0 stops training and exits with the
//      coordinator's exit status, the run's;
//    - worker 0 gets SIGTERM or SIGINT: it passes the signal on (a thread
//      watches the signalfd while the trainer runs) and goes on training;
//      the coordinator stops the run as it does on that signal (a final
//      checkpoint, for which worker 0's replica may be needed) and tells
//      the workers to stop; worker 0 then exits with its status;
//    - worker 0 dies: the kernel sends the coordinator SIGTERM
//      (PR_SET_PDEATHSIG).
//  Every other process only trains. The trainer itself (ps_trainer.h)
//  knows nothing of this: its stop descriptor is, here, the coordinator's
//  pidfd, readable once the coordinator has exited.

#ifndef PS_CHIEF_CHILD_H_INCLUDED
#define PS_CHIEF_CHILD_H_INCLUDED

#include <stdbool.h>

#include "ps_tfconfig.h"
#include "ps_trainer.h"

//  Train as config says, under the coordinator of spec tf; when this
//  process is worker 0 of a cluster whose chief is derived, first start
//  that coordinator, with --job job_file (NULL: its default job) and the
//  security given (--keys keys_dir, or --insecure), and end with it as
//  above. config->stop_fd is the signalfd of the stop signals. Errors are
//  logged. Returns ps-worker's exit status: 0 when the run is over or was
//  stopped, 1 when training failed, or the coordinator child's status.
int ps_chief_child_train (ps_tfconfig_t *tf, const char *job_file, const char *keys_dir,
                          bool insecure, const ps_trainer_config_t *config);

#endif
