//  Cluster training: the loop a ps-worker (or evaluator) runs under a
//  coordinator, in asynchronous parameter-server mode.
//
//  The trainer registers through a link (common/wire/ps_link.h), receives the
//  job plan (common/wire/ps_plan.h), builds the model, loads the data set and a
//  compute backend, and connects a client to the servers. Then it asks the
//  coordinator for work and does it:
//    train   pull the parameters (only when it has none of this
//            generation: after each step the fresh values come back from
//            the push itself), compute the gradient of batch (epoch,
//            batch), push it tagged with the step id and read back the
//            values in the same round trip (push-pull), report;
//    eval    pull, evaluate on the test set, report loss and accuracy;
//    wait    ask again after the time given;
//    stop    return 0.
//  To keep the worker busy, the request for the next work (carrying the
//  report of the previous step) goes out before the push, so the
//  coordinator's answer is already there when the push returns.
//
//  A failed pull or push (a server died) is reported as failed and the
//  parameters are pulled afresh for the next step. When the coordinator
//  falls silent the trainer waits for the link to register again and goes
//  on with the plan it then receives, rebuilding what the new plan changes;
//  but a coordinator whose heartbeats said the run was over exited, and
//  the trainer returns 0 then, as it does on a "stop" that answers an
//  earlier request: a worker that missed its answer "stop" (hung, or the
//  answer was lost) does not wait for ever for a coordinator that is gone.
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
    const char *ring_bind;      //  mirrored mode: this worker's ring endpoint to bind
                                //  (its own cluster address), or NULL
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
