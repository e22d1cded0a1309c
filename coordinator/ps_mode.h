//  Consistency modes: what differs between the ways a run keeps its
//  replicas of the parameters consistent, as a table of operations the
//  coordinator's loop calls (as nng's protocol ops, or redis's ae
//  backends). The loop (ps_coord.c) registers tasks, notices failures,
//  reads messages, keeps the evaluation queue, the checkpoint control and
//  the report, and ends the run; it never asks which mode it runs. A mode
//  decides how steps are handed out and completed, what a task's failure
//  does, how a checkpoint is drained and written, and what the done
//  record adds. Each mode is one file pair, ps_mode_<name>.c, found by
//  ps_mode_lookup.
//
//  A mode reaches the rest of the coordinator through its host
//  (ps_mode_host_t): the modules it may use, the run's shared numbers,
//  and a few services of the loop (answer a request, send a message, fail
//  the run, count a step done, finish). Everything is on the loop's one
//  thread.
//
//  Modes today:
//    - async (ps_mode_async.c): workers ask for steps one at a time and
//      push to the servers, whose ledgers apply each step once; a failed
//      worker's steps go back to the queue; a failed server is restored,
//      with every other, from the newest checkpoint.
//    - mirrored (ps_mode_mirrored.c): every worker holds a replica and the
//      ring all-reduces; the coordinator moves the ring from one phase to
//      the next, re-forming it when a member fails or joins.
//    - ssp (ps_mode_ssp.c, bounded staleness S): async with a clock per
//      worker, the count of its steps completed (ps_sspclock). A worker w
//      is handed its next step only while clock[w] - min(clock over the
//      live workers) <= S; otherwise its request is held until a
//      completion frees it (`advance` serves it); `task_failed` (and the
//      roster's silence, which reaches the mode through it) drops w from
//      the minimum, as does an evaluation while it runs, so a killed,
//      stopped or evaluating worker never holds the clock,
//      and `joined` / `rejoined` put it back at the current minimum; a
//      checkpoint drains exactly as async's, and `report` adds the
//      measured staleness distribution to the done record.
//    - sync (ps_mode_sync.c): rounds of one step per live worker, all
//      carrying the round's number, by which the servers sum the round's
//      gradients and apply their mean once. A worker is handed a step of
//      the open round (else its request is held, or answered "wait" while
//      a step of it is in flight); the next round opens only when every
//      step of this one is done; a failed worker's step goes back to the
//      round for another worker (the servers' ledgers keep it exactly
//      once); a checkpoint is taken only between rounds; and `report`
//      adds the rounds and their mean time to the done record.
//  Async, ssp and sync keep the variables on the servers and share one
//  implementation of that side (ps_mode_ps.c: setup, hand-out, reports,
//  the non-finite retries, evaluations, checkpoints, restore after a
//  server failure); ssp and sync are each a policy of it
//  (ps_mode_ps_policy_t), async none.

#ifndef PS_MODE_H_INCLUDED
#define PS_MODE_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "ps_ckpt_ctl.h"
#include "ps_client.h"
#include "ps_coord.h"
#include "ps_error.h"
#include "ps_evalq.h"
#include "ps_metrics.h"
#include "ps_plan.h"
#include "ps_proto.h"
#include "ps_roster.h"
#include "ps_schedule.h"

//  How long a mode may hold a worker's request before it answers "wait"
//  (a worker asks again after 10 s without an answer, taking the request
//  for lost).
#define PS_MODE_HOLD_MS  4000

//  Where the run is, as the loop sees it.
typedef enum {
    PS_RUN_STARTING,            //  waiting for the tasks that hold the variables
    PS_RUN_RUNNING,             //  training
    PS_RUN_STOPPING,            //  done; telling everyone to stop
} ps_run_state_t;

//  What the loop offers a mode. The modules and numbers are the loop's;
//  a mode may use the modules and change generation, lr, client and the
//  counters, as their comments say.
typedef struct {
    void *loop;                 //  passed back to every service
    const ps_coord_config_t *cfg;
    const ps_job_t *job;
    ps_roster_t *roster;
    ps_schedule_t *schedule;
    ps_metrics_t *report;
    ps_evalq_t *evalq;
    ps_ckpt_ctl_t *ckpt;
    const ps_plan_t *plan;
    ps_run_state_t state;       //  read only
    bool failed;                //  read only: the run has failed and ends
    //  Read only: a stop signal came. No training step is handed out from
    //  then on, so that the checkpoint it asks for is the run's last word:
    //  the run stops once that checkpoint is written.
    bool stop_asked;
    uint64_t steps_per_epoch, total;

    //  The servers, when the mode keeps the variables there (it creates
    //  the client in setup; the loop asks it for the done record's ledger
    //  counts and shuts the servers down at the end).
    ps_client_t *client;
    //  The run's generation: every piece of work carries it, and a report
    //  of another generation is stale. Unique to this coordinator; the
    //  mode moves it on when it rewinds or re-forms what it trains.
    uint64_t generation;
    double lr;                  //  the learning rate in use now
    //  The done record's counters.
    int recoveries;
    uint64_t refused_reports;
    uint64_t nonfinite_failures;

    //  Start a "work" answer to request id with its six required fields
    //  (kind, step, epoch, batch, generation, wait_ms) set and no optional
    //  one: the caller sets those it needs (has_x and x) in the body
    //  returned before send. Strings and arrays it points the body at must
    //  live until send.
    ps_proto_work_t *(*work) (void *loop, uint64_t id, const char *kind, uint64_t step,
                              uint64_t epoch, uint64_t batch, uint64_t wait_ms);
    //  Start a message of type with a fresh id and every field zero, for
    //  the caller to fill before send.
    ps_proto_t *(*message) (void *loop, ps_proto_type_t type);
    //  Encode what was started and send it to peer.
    void (*send) (void *loop, const ps_peer_t *peer);
    //  End the run with code and message (the first failure is kept).
    void (*fail) (void *loop, int code, const char *message);
    //  Step `step` is done. When peer and stats are given, it was peer's
    //  and counts in the progress and divergence report. Ends epochs and
    //  asks for the evaluations due.
    void (*completed) (void *loop, uint64_t step, ps_peer_t *peer, const ps_step_report_t *stats);
    //  Every step is done: take the last checkpoint, evaluate, write the
    //  done record, and stop (called again until it has).
    void (*finish) (void *loop, double now);
} ps_mode_host_t;

//  A mode's operations. `self` is the state its `new` returned. NULL
//  marks an operation the mode does not need.
typedef struct {
    const char *name;
    //  The role whose tasks hold the variables: the run starts when all
    //  have registered, or, with start_partial, past the registration
    //  timeout with those there.
    ps_role_t holders;
    bool start_partial;
    //  What the mode asks of the cluster: at least min_servers ps tasks,
    //  local_servers in a local cluster by default; when no_servers or
    //  no_evaluator is set, the mode uses none, and it says why to a
    //  command line that asks for them.
    int min_servers;
    int local_servers;
    const char *no_servers;
    const char *no_evaluator;
    //  Create the mode's state for host; it may set host->generation.
    //  NULL with err set on failure.
    void *(*new) (ps_mode_host_t *host, ps_error_t *err);
    void (*destroy) (void **self_p);
    //  Adjust the plan the workers get (the loop fills it from the job,
    //  partitioned over the servers when holders is PS_ROLE_PS).
    void (*plan) (void *self, ps_plan_t *plan);
    //  The holders have registered: create or restore the parameters.
    //  Returns 0, or -1 after failing the run.
    int (*setup) (void *self);
    //  Task role:index's registration was taken; fresh: by a new process
    //  (a first one, or a restart), which holds no state of the run.
    void (*joined) (void *self, ps_role_t role, int index, bool fresh);
    //  Task role:index, declared failed, was heard from again.
    void (*rejoined) (void *self, ps_role_t role, int index);
    //  A work_request (body req, id) from worker or evaluator role:index:
    //  take its reports; answer it now (host->work, host->send) or hold it.
    void (*request) (void *self, ps_peer_t *peer, ps_role_t role, int index, uint64_t id,
                     const ps_proto_work_request_t *req);
    //  Worker or evaluator role:index failed. Returns how many steps it
    //  held went back to the queue.
    size_t (*task_failed) (void *self, ps_role_t role, int index);
    //  Server index failed while training (reason: why it is thought so).
    void (*server_failed) (void *self, int index, const char *reason);
    //  Training goes on: hand out, complete, checkpoint, recover; call
    //  host->finish once every step is done. After every burst of messages.
    void (*advance) (void *self, double now);
    //  Take the run's last checkpoint. Returns 0 when written, 1 when under
    //  way (finish is called again), a negative code when it failed.
    int (*final_checkpoint) (void *self, double now);
    //  Add the mode's part to the done record of `done` steps, and to
    //  mismatches what disagrees with them.
    void (*report) (void *self, json_t *record, json_t *mismatches, uint64_t done);
    //  The done record is written: tell the tasks the mode holds to stop.
    void (*stop) (void *self);
} ps_mode_ops_t;

//  The operations of mode, never NULL for a mode the job parser accepts.
const ps_mode_ops_t *ps_mode_lookup (ps_mode_t mode);

//  Resume from the newest checkpoint when the job has a checkpoint
//  directory, with load (the mode's: 0 when loaded, PS_ENOTFOUND when
//  there is none, another code after failing the run). Returns 0 when one
//  was loaded, PS_ENOTFOUND when there is none and --resume did not ask
//  for one, or -1 after failing the run.
int ps_mode_resume (ps_mode_host_t *host, int (*load) (void *self, const char *why), void *self);

//  Fail host's run with a formatted message.
void ps_mode_fail (ps_mode_host_t *host, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

#endif
