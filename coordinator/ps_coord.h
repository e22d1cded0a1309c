//  The coordinator's run: the chief of an asynchronous parameter-server
//  cluster, from registration to the final checkpoint.
//
//  One thread runs an event loop over the coordinator's ROUTER socket
//  (every server, worker and evaluator holds a link to it: common/wire/ps_link.h),
//  a stop signal, the supervisor of a local cluster, and timers. It
//    - waits for every server to register (with a visible count and a
//      timeout), places the variables (ps_partitioner.h), creates and
//      initialises the partitions, or restores them from the newest valid
//      checkpoint (common/store/ps_checkpoint.h) when there is one;
//    - hands workers the plan when they register, and steps when they ask
//      (ps_schedule.h), so that every batch of every epoch is trained once;
//    - heartbeats every process and declares a worker failed when it falls
//      silent past the timeout or its process dies, giving its steps to
//      others; the servers' ledgers ignore the late pushes of a worker
//      declared failed that wakes up again;
//    - takes checkpoints: pause dispatch, let the steps in flight finish,
//      have every server snapshot, write the manifest, go on;
//    - on a server failure: pause, wait for the server to come back,
//      restore every server from the newest checkpoint (a consistent cut),
//      rewind the schedule to it, go on;
//    - has a worker (or the evaluator) evaluate after every epoch;
//    - reports progress on the terminal or the log, and events as JSON
//      lines in the metrics file, ending with a "done" record.

#ifndef PS_COORD_H_INCLUDED
#define PS_COORD_H_INCLUDED

#include <stdbool.h>

#include "ps_curve.h"
#include "ps_error.h"
#include "ps_job.h"
#include "ps_model.h"
#include "ps_supervisor.h"

typedef struct {
    ps_job_t job;
    const char *bind;               //  the coordinator's ZeroMQ endpoint
    int nservers, nworkers, nevaluators;
    size_t train_count;             //  training examples (after the job's limit)
    const ps_model_t *model;        //  the job's model, checked against the data
    const char *const *servers;     //  each server's endpoint, to connect to
    const char *const *workers;     //  each worker's endpoint: its ring address (mirrored)
    const char *metrics_path;       //  JSON lines; NULL = none
    bool resume;                    //  a checkpoint must exist to resume from
    bool progress_tty;              //  a live progress line instead of log lines
    int stop_fd;                    //  signalfd (SIGINT, SIGTERM) or -1
    //  A local cluster: the supervisor of the children, and each child's
    //  role ("ps", "worker", "evaluator") and task index, so that a child's
    //  death is a failure at once rather than after the heartbeat timeout.
    ps_supervisor_t *supervisor;
    const char *const *child_role;
    const int *child_index;
    //  The coordinator's identity (chief:0) in a secured cluster, NULL in
    //  an unsecured one: every process must then prove, by its key, the
    //  task it registers as and speaks for (ps_curve.h).
    ps_curve_t *curve;
} ps_coord_config_t;

//  Train the job. Returns 0 when training completed (every step done, the
//  final evaluation and checkpoint taken, the servers and workers told to
//  stop); a negative code with err set otherwise (a server that never
//  registered, a checkpoint that cannot be written or restored, a stop
//  signal: PS_EINVAL / PS_ETIMEDOUT / PS_EIO ...).
int ps_coord_run (const ps_coord_config_t *config, ps_error_t *err);

#endif
