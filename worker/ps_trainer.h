//  Cluster training: the loop a ps-worker (or evaluator) runs under a
//  coordinator, whatever the consistency mode.
//
//  The trainer opens a session with the coordinator (ps_wsession.h: the
//  link that registers and sends heartbeats, the reports, the messages),
//  and from the plan each registration brings (common/wire/ps_plan.h) it
//  builds the step plan (the model, the data and a compute backend:
//  ps_stepplan.h) and the plan's consistency mode (ps_wmode.h: a client
//  of the servers, or a member of a ring). Then it asks for work and does
//  it:
//    train   the mode's step (ps_wmode.h lists the modes);
//    eval    the mode's evaluation, reporting loss and accuracy;
//    ring, save  work of the mode's own kinds;
//    wait    ask again after the time given;
//    stop    return 0.
//  Each piece of work is reported (ps_reports.h); the reports go with the
//  next request for work, and are delivered at least once. A new plan
//  rebuilds only what it changes.
//
//  When the coordinator falls silent the session waits for it to come
//  back, and the trainer goes on with the plan it then brings; a
//  coordinator that said the run was over and has gone, or a "stop",
//  ends the run (ps_wsession.h says how).

#ifndef PS_TRAINER_H_INCLUDED
#define PS_TRAINER_H_INCLUDED

#include <stdint.h>

#include "ps_backend.h"
#include "ps_curve.h"
#include "ps_error.h"

typedef struct {
    const char *coordinator;    //  the coordinator's ZeroMQ endpoint
    const char *role;           //  "worker" or "evaluator"
    int index;                  //  task index
    int threads;                //  0: the plan's
    const char *device;         //  NULL: the plan's ("cpu", "gpu", "auto")
    int stop_fd;                //  a signalfd for SIGTERM/SIGINT, or -1
    const char *ring_bind;      //  this worker's own cluster address, for a mode that
                                //  binds an endpoint there (a ring), or NULL
    const char *ring_ipc;       //  the ipc:// endpoint it binds beside ring_bind ("": none)
    const char *ring_advert;    //  what the worker registers to be reached at: ring_bind
                                //  and ring_ipc as an endpoint set (ps_host.h), or NULL
    ps_curve_t *curve;          //  this process's identity for every socket it opens
                                //  (NULL: an unsecured cluster); the caller's
    bool idle_priority;         //  compute in the cores' idle time (see ps_trainer_run)
} ps_trainer_config_t;

//  Run until the coordinator says stop or has gone after saying the run is
//  over (returns 0), or stop_fd fires
//  (returns 0 after finishing the step in hand). Returns a negative code
//  with err set when the plan cannot be used (bad model, missing data,
//  device unavailable): such a worker could never do its work.
//
//  With idle_priority the calling thread, once the session's link runs,
//  takes Linux's SCHED_IDLE policy, and so does every thread it starts
//  afterwards (the compute threads, the servers' client): the process
//  computes only when no other wants the CPU, so an evaluator beside
//  training on cores it cannot have to itself never makes a training step
//  wait. The link's threads keep their policy, so heartbeats stay on time
//  however long the evaluation is held off. A policy that cannot be set
//  is warned of, and the process runs at its normal priority.
int ps_trainer_run (const ps_trainer_config_t *config, ps_error_t *err);

#endif
