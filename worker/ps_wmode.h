//  A consistency mode on the worker's side: what a step does. The trainer
//  (ps_trainer.h) is one loop for every mode: it registers, applies the
//  plan, asks the coordinator for work and hands each piece to the mode
//  of the plan through this table of operations, as nng's sockets call
//  their protocol through nni_proto_ops. The loop never asks which mode
//  it holds; a mode never talks to the coordinator but through the
//  reports (ps_reports.h) and the host's poll below.
//
//  Modes today (one file each):
//    async     (ps_wmode_async.c) pull the parameters when stale, compute
//              the batch's gradient, push it tagged with the step id and
//              read back the values in the same round trip; with the
//              plan's overlap, step k computes while step k - 1 pushes.
//    mirrored  (ps_wmode_mirrored.c) every worker holds a replica; a step
//              computes its share of the global batch and all-reduces
//              the gradient over the ring (ps_mirror.h); the coordinator
//              also orders rings to form ("ring") and replicas to be
//              saved ("save").
//    sync      (ps_wmode_sync.c) synchronous training on the servers: a
//              step pulls, computes and pushes tagged with the work's
//              round (round, round_steps) at once, with no values back;
//              the servers apply the round's mean once its last step is
//              in, and the coordinator hands out the next round only then,
//              so the next step's pull sees it. Async and sync share the
//              servers' side (ps_wmode_ps.h).
//    async, for CTR models  (ps_wmode_ctr.c) a plan whose data is Criteo
//              or LIBSVM text: async with embedding tables, each step
//              pulling its rows and pushing their gradients to every
//              server beside the dense push-pull; ps_wmode_find picks it
//              whatever the plan's mode, and it refuses sync and mirrored.
//
//  How ssp fits these operations without touching the loop (and how sync
//  was first planned; it needed no abort nor a fenced pull, since the
//  coordinator gates the rounds):
//    ssp       bounded staleness. The coordinator holds a worker back (it
//              answers "wait") until every worker has finished step
//              k - S - 1, so on the worker ssp is async: the same create,
//              settle, stale and eval. Its train is async's plus one
//              report field, the staleness it saw (the servers' version
//              at the push, from ps_push_info_t, minus the version it
//              pulled); the report struct grows that optional field.
//    sync      synchronous training on the servers. train pushes the
//              gradient tagged with the round (the work's generation and
//              step) and no values come back with it: the servers sum
//              every worker's gradient of the round and apply it once.
//              Before the next step train pulls, waiting for the round to
//              be applied (a pull fenced on the round), with the host's
//              poll as the way out when the coordinator aborts the round
//              (abort) or is lost. settle has nothing in flight; stale
//              forgets the round's parameters; give_back adds the round.
//
//  Every operation that can fail returns 0 (the work may have failed and
//  been reported so) or a negative code with err set when the worker
//  cannot go on (the plan cannot be used, the backend failed).

#ifndef PS_WMODE_H_INCLUDED
#define PS_WMODE_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include "ps_curve.h"
#include "ps_error.h"
#include "ps_plan.h"
#include "ps_proto.h"
#include "ps_reports.h"
#include "ps_stepplan.h"

//  A "work" message from the coordinator. The loop reads the fields every
//  kind has; a mode reads its own kinds' fields from msg, the decoded
//  message, which is valid until the session reads again (a mode copies
//  what it needs before it polls the loop).
typedef struct {
    ps_work_kind_t kind;        //  PS_WORK_KINDS for a kind unknown here
    char name [8];              //  the kind as the coordinator named it
    uint64_t step, epoch, batch, generation, wait_ms;
    uint64_t order;             //  the order's number, 0 when the mode has none
    uint64_t round;             //  sync mode: the step's round, 0 outside one
    uint64_t round_steps;       //  and the round's step count
    const ps_proto_work_t *msg;     //  the whole message
} ps_work_t;

//  What a mode may ask of the loop that runs it.
typedef struct {
    //  While a step waits on other processes (its peers in a collective):
    //  read what the coordinator sent. Returns true when the step should
    //  end now: the coordinator was lost, this worker registered again
    //  (its new plan waits for the step to end), the run is over, or the
    //  link failed (its error waits for the step to end).
    bool (*poll) (void *arg);
    void *arg;
    void *socket;               //  readable when poll has something to read
} ps_wmode_host_t;

//  What a mode is built from; everything is the loop's and outlives the mode.
typedef struct {
    ps_stepplan_t *stepplan;    //  the plan, the model, the data and the backend
    ps_reports_t *reports;      //  where the mode's reports go
    const ps_wmode_host_t *host;
    bool evaluator;             //  an evaluator: it only evaluates
    int index;                  //  the task index
    const char *bind;           //  this worker's own cluster address to bind, or NULL
    const char *ipc;            //  the ipc:// endpoint registered beside it ("": none)
    ps_curve_t *curve;          //  this process's identity (NULL: unsecured)
} ps_wmode_env_t;

typedef struct _ps_wmode_t ps_wmode_t;      //  a mode's own state

typedef struct {
    const char *name;

    //  Whether plans a and b, both of this mode, agree on the mode's own
    //  settings; when they do not (or the plans are of different modes)
    //  the loop builds the mode again. NULL: the mode has no settings of
    //  its own.
    bool (*same) (const ps_plan_t *a, const ps_plan_t *b);

    //  Build what the mode needs to run steps of env's plan: a client of
    //  the servers, or a member of a ring. Returns NULL with err set when
    //  it cannot.
    ps_wmode_t *(*create) (const ps_wmode_env_t *env, ps_error_t *err);
    void (*destroy) (ps_wmode_t **self_p);

    //  A train step, an evaluation, and work of the mode's own kinds
    //  (NULL when it has none; it returns 1 for a kind not its own). Each
    //  reports the work, done or failed.
    int (*train) (ps_wmode_t *self, const ps_work_t *work, ps_error_t *err);
    int (*eval) (ps_wmode_t *self, const ps_work_t *work, ps_error_t *err);
    int (*order) (ps_wmode_t *self, const ps_work_t *work, ps_error_t *err);

    //  Finish and report what a step left in flight: before any work but
    //  a train step, before the plan changes and before the worker stops.
    int (*settle) (ps_wmode_t *self, ps_error_t *err);

    //  The servers' parameters may have changed under the worker (the
    //  coordinator was lost, or restored the servers): the next step must
    //  not use parameters it holds.
    void (*stale) (ps_wmode_t *self);

    //  Fill in the mode's fields of a report of work given back undone
    //  (NULL: it has none).
    void (*give_back) (ps_wmode_t *self, const ps_work_t *work, ps_report_t *report);

    //  The coordinator aborted collective or round `generation` (NULL when
    //  the mode has none): a step waiting on it ends.
    void (*abort) (ps_wmode_t *self, uint64_t generation);
} ps_wmode_ops_t;

//  The mode a plan asks for.
const ps_wmode_ops_t *ps_wmode_find (const ps_plan_t *plan);

extern const ps_wmode_ops_t ps_wmode_async;
extern const ps_wmode_ops_t ps_wmode_mirrored;
extern const ps_wmode_ops_t ps_wmode_sync;
extern const ps_wmode_ops_t ps_wmode_ctr;

#endif
