//  The worker's session with the coordinator: the link (registration and
//  heartbeats, common/wire/ps_link.h), the reports (ps_reports.h) and the
//  work requests that carry them, and every message the coordinator sends.
//  It hands the trainer (ps_trainer.h) one piece of work at a time and
//  tells it, through a small table of callbacks, what else came: a plan
//  (at each registration), an abort order, work to give back.
//
//  At most one work_request is outstanding; replies are matched to it by
//  id. A request that is never answered (the coordinator was lost, the
//  link registered again and may have swallowed the answer, or no answer
//  came in 10 s) is given up: its reports go again with the next,
//  and work that arrives later in answer to it is given back undone.
//
//  When the coordinator falls silent the session waits for the link to
//  register again and goes on with the plan it then receives; but a
//  coordinator whose heartbeats said the run was over exited, and the
//  session ends then, as it does on a "stop" that answers an earlier
//  request: a worker that missed its answer "stop" (hung, or the answer
//  was lost) does not wait for ever for a coordinator that is gone.

#ifndef PS_WSESSION_H_INCLUDED
#define PS_WSESSION_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include "ps_curve.h"
#include "ps_error.h"
#include "ps_plan.h"
#include "ps_reports.h"
#include "ps_wmode.h"

//  What the session tells its owner. Each returns at once.
typedef struct {
    //  A register_ok brought plan (take it over, whatever the result)
    //  from coordinator incarnation `coordinator`; again: this worker was
    //  registered with that incarnation already (a stalled coordinator
    //  answers every register the link sent meanwhile). Returns 0, or a
    //  code with err set when the plan cannot be used: the session ends.
    int (*plan) (void *arg, ps_plan_t *plan, uint64_t coordinator, bool again,
                 ps_error_t *err);
    //  The servers' parameters may have changed under the worker: the
    //  coordinator was lost, or this worker registered again.
    void (*stale) (void *arg);
    //  An abort of collective or round `generation`.
    void (*abort) (void *arg, uint64_t generation);
    //  Work that will not be done here (handed out in answer to a request
    //  given up on, or while stopping), to be reported failed at once.
    void (*give_back) (void *arg, const ps_work_t *work);
    void *arg;
} ps_wsession_handler_t;

typedef struct {
    const char *coordinator;    //  the coordinator's ZeroMQ endpoint
    const char *role;           //  "worker" or "evaluator"
    int index;                  //  task index
    int stop_fd;                //  a signalfd for SIGTERM/SIGINT, or -1
    ps_curve_t *curve;          //  this process's identity (NULL: unsecured)
    const char *endpoint;       //  registered: where the ring reaches this worker, or NULL
} ps_wsession_config_t;

//  What a wait saw.
typedef enum {
    PS_WSESSION_NONE,           //  nothing within the time, or nothing that matters
    PS_WSESSION_STOP,           //  stop_fd is readable
    PS_WSESSION_REPLY,          //  the answer to the outstanding request came
    PS_WSESSION_LOST,           //  the link lost the coordinator
    PS_WSESSION_REGISTERED,     //  a register_ok came and its plan is in use
    PS_WSESSION_DONE,           //  the run is over, though no answer said "stop"
} ps_wsession_event_t;

//  The pause before asking again after the coordinator refused a request
//  or sent work of an unknown kind.
#define PS_WSESSION_RETRY_MS    500

typedef struct _ps_wsession_t ps_wsession_t;

//  Start registering (config and handler are the caller's, and outlive
//  the session). Returns NULL with err set when the link cannot be made.
ps_wsession_t *ps_wsession_new (const ps_wsession_config_t *config,
                                const ps_wsession_handler_t *handler, ps_error_t *err);

//  Stop the link (it sends nothing more) and free.
void ps_wsession_destroy (ps_wsession_t **self_p);

ps_reports_t *ps_wsession_reports (ps_wsession_t *self);

//  The link's socket, readable when ps_wsession_receive has something.
void *ps_wsession_socket (ps_wsession_t *self);

//  Ask for work (carrying the pending reports) and wait for it,
//  registering first when needed. Returns 0 with the work in *work (its
//  decoded message valid until the session reads again), 1 when the
//  worker should stop (a stop signal, or the run is over), or a code with
//  err set when it cannot go on: the link failed, the coordinator refused
//  the registration, or its plan cannot be used.
int ps_wsession_next (ps_wsession_t *self, ps_work_t *work, ps_error_t *err);

//  Wait up to timeout_ms for a message and sort it into *event (with
//  check_stop, a readable stop_fd first). Returns 0, or a code with err
//  set as ps_wsession_next.
int ps_wsession_receive (ps_wsession_t *self, int timeout_ms, bool check_stop,
                         ps_wsession_event_t *event, ps_error_t *err);

//  Sleep for ms, cut short by an event, which is left in *event.
int ps_wsession_sleep (ps_wsession_t *self, uint64_t ms, ps_wsession_event_t *event,
                       ps_error_t *err);

//  Stopping: wait a little for the answer to a request still in flight
//  (work it hands out is given back), then send the reports not yet
//  delivered, asking for no more work, and wait a little for each answer
//  so they have surely left. Nothing here is fatal.
void ps_wsession_finish (ps_wsession_t *self);

#endif
