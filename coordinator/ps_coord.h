//  The coordinator's run: the chief of a parameter-server cluster, from
//  registration to the final checkpoint.
//
//  One thread runs an event loop over the coordinator's ROUTER socket
//  (every server, worker and evaluator holds a link to it: common/wire/ps_link.h),
//  a stop signal, the launcher's events, and timers. The loop (ps_coord.c)
//  reads messages and hands each to the module that owns its concept:
//    - the roster (ps_roster.h): registration, heartbeats, failure
//      detection, a task's return; admission (ps_admit.h): which key may
//      speak as which task, and the refusals;
//    - the consistency mode (ps_mode.h, one file pair per mode): how steps
//      are handed out and completed, what a failure does, how a checkpoint
//      is drained and written, how a failed server is recovered;
//    - the evaluation queue (ps_evalq.h): an evaluation after every epoch;
//    - checkpoint control (ps_ckpt_ctl.h): when one is due, its state,
//      its manifest, and the newest valid one to restore or resume from;
//    - reporting (common/base/ps_metrics.h): the progress line, and events as
//      JSON lines in the metrics file, ending with a "done" record, and
//      the same numbers published to the Prometheus endpoint
//      (ps_exporter.h) when there is one;
//    - a launcher (ps_launcher.h), when the coordinator started the
//      tasks, so that a task's death is a failure at once rather than
//      after the heartbeat timeout.
//  It places the variables (ps_partitioner.h) and keeps the schedule
//  (ps_schedule.h), so that every batch of every epoch is trained once.

#ifndef PS_COORD_H_INCLUDED
#define PS_COORD_H_INCLUDED

#include <stdbool.h>

#include "ps_curve.h"
#include "ps_error.h"
#include "ps_exporter.h"
#include "ps_job.h"
#include "ps_model.h"
#include "ps_launcher.h"

typedef struct {
    ps_job_t job;
    const char *bind;               //  the coordinator's ZeroMQ endpoint
    int nservers, nworkers, nevaluators;
    //  The evaluator computes in the cores' idle time (a local cluster's on
    //  a machine with none to spare, ps_cores.h), so on a busy machine it
    //  may wait long for a core: once every step is done, the workers,
    //  idle then, evaluate instead, and the run's end never waits for it.
    bool idle_evaluator;
    size_t train_count;             //  training examples (after the job's limit)
    const ps_model_t *model;        //  the job's model, checked against the data
    const char *const *servers;     //  each server's endpoint, to connect to
    const char *const *workers;     //  each worker's endpoint, where the others reach it
    const char *metrics_path;       //  JSON lines; NULL = none
    ps_exporter_t *exporter;        //  the Prometheus endpoint to publish to; NULL = none
    bool resume;                    //  a checkpoint must exist to resume from
    bool progress_tty;              //  a live progress line instead of log lines
    int stop_fd;                    //  signalfd (SIGINT, SIGTERM) or -1
    int *stopped_by;                //  receives the signal that stopped the run, or 0; may be NULL
    //  The launcher of the cluster's tasks, or NULL when they were
    //  started otherwise: its events make a task's death a failure at
    //  once rather than after the heartbeat timeout.
    ps_launcher_t *launcher;
    //  The coordinator's identity (chief:0) in a secured cluster, NULL in
    //  an unsecured one: every process must then prove, by its key, the
    //  task it registers as and speaks for (ps_curve.h).
    ps_curve_t *curve;
} ps_coord_config_t;

//  Train the job. Returns 0 when training completed (every step done, the
//  final checkpoint and evaluation taken, the servers and workers told to
//  stop); a negative code with err set otherwise (a server that never
//  registered, a checkpoint that cannot be written or restored: PS_EINVAL
//  / PS_ETIMEDOUT / PS_EIO ...). A stop signal while training hands out
//  no more steps, writes a checkpoint, tells every process to stop, ends
//  the metrics file with a "stopped" record and returns PS_ECANCELED,
//  naming the checkpoint, with the signal in *stopped_by; a second signal
//  ends the run at once.
int ps_coord_run (const ps_coord_config_t *config, ps_error_t *err);

#endif
