//  Cluster training: the loop a ps-worker (or evaluator) runs under a
//  coordinator, whatever the consistency mode.
//
//  The trainer registers through a link (common/wire/ps_link.h), receives the
//  job plan (common/wire/ps_plan.h) and builds from it the step plan (the
//  model, the data and a compute backend: ps_stepplan.h) and the plan's
//  consistency mode (ps_wmode.h: a client of the servers, or a member of
//  a ring). Then it asks the coordinator for work and does it:
//    train   the mode's step (ps_wmode.h lists the modes);
//    eval    the mode's evaluation, reporting loss and accuracy;
//    ring, save  work of the mode's own kinds;
//    wait    ask again after the time given;
//    stop    return 0.
//  Each piece of work is reported (ps_reports.h); the reports go with the
//  next request for work.
//
//  When the coordinator falls silent the trainer waits for the link to
//  register again and goes on with the plan it then receives, rebuilding
//  what the new plan changes; but a coordinator whose heartbeats said the
//  run was over exited, and the trainer returns 0 then, as it does on a
//  "stop" that answers an earlier request: a worker that missed its answer
//  "stop" (hung, or the answer was lost) does not wait for ever for a
//  coordinator that is gone.
//
//  Reports are delivered at least once: those carried by a request that
//  was never answered (the coordinator was lost, or the link registered
//  again) go again with the next request, so the coordinator may see a
//  report twice. Work handed out in answer to a request given up on, or
//  when a stop signal came, is given back as a failed report.

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
    ps_curve_t *curve;          //  this process's identity for every socket it opens
                                //  (NULL: an unsecured cluster); the caller's
} ps_trainer_config_t;

//  Run until the coordinator says stop or has gone after saying the run is
//  over (returns 0), or stop_fd fires
//  (returns 0 after finishing the step in hand). Returns a negative code
//  with err set when the plan cannot be used (bad model, missing data,
//  device unavailable): such a worker could never do its work.
int ps_trainer_run (const ps_trainer_config_t *config, ps_error_t *err);

#endif
