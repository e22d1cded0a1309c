//  Reports to the coordinator: what a worker says about the work it was
//  given (a step done or failed, an evaluation's loss and accuracy, a ring
//  joined, a snapshot saved), and the work requests that carry them. The
//  link (common/wire/ps_link.h) sends the heartbeats; this module sends
//  everything else the worker tells the coordinator.
//
//  The module sends through a function the owner gives it (the trainer's
//  sends on its link to the coordinator), so that it can be tested
//  without one.
//
//  A report is "pending" until a request carries it and "sent" until that
//  request is answered; a request that is never answered (the link lost
//  the coordinator, or registered again, in which case the link may have
//  swallowed the answer) puts its reports back in front of the pending
//  ones, so no report is lost to a failure of the coordinator. Reports
//  are thus delivered at least once, and the coordinator takes a report it
//  has seen before as a repeat (ps_schedule_complete answers PS_DUPLICATE).
//  At most one request is outstanding.
//
//  The module also keeps the counts behind the worker's progress lines in
//  the log, since every step this worker ran passes through it.

#ifndef PS_REPORTS_H_INCLUDED
#define PS_REPORTS_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"
#include "ps_msg.h"

//  The kinds of work, as the protocol names them (a "work" message's kind,
//  and a report's for those that are reported). Ring and save come only in
//  some modes; wait and stop are never reported.
typedef enum {
    PS_WORK_TRAIN, PS_WORK_EVAL, PS_WORK_RING, PS_WORK_SAVE, PS_WORK_WAIT, PS_WORK_STOP,
    PS_WORK_KINDS
} ps_work_kind_t;

//  The protocol's name of kind.
const char *ps_work_kind_name (ps_work_kind_t kind);

//  The kind named name, or PS_WORK_KINDS when it names none.
ps_work_kind_t ps_work_kind_find (const char *name);

typedef struct {
    ps_work_kind_t kind;
    bool done;                  //  status done, else failed
    uint64_t step, generation;
    double loss;                //  summed over the examples
    uint64_t correct, count;
    uint64_t applied, duplicates;
    double compute_ms, comm_ms;
    bool has_update;            //  carries a replica's update count and the order's number
    uint64_t update;
    uint64_t order;             //  the order's number, echoed
    bool has_checksum;          //  carries a replica's checksum (an evaluation)
    uint64_t checksum;
    bool has_auc;               //  carries the AUC of a binary model's evaluation
    double auc;
    bool has_abs_error;         //  carries a regression model's summed absolute error
    double abs_error;
    char error [400];           //  why a failed step failed, when it matters to the
                                //  coordinator ("nonfinite: ..."); "" otherwise
} ps_report_t;

typedef struct _ps_reports_t ps_reports_t;

//  Send the message in writer to the coordinator. Returns 0, or a code
//  with err set when it cannot be sent.
typedef int (ps_reports_send_fn) (void *arg, ps_writer_t *writer, ps_error_t *err);

//  Reports sent with send (arg), which must work until the reports are
//  destroyed.
ps_reports_t *ps_reports_new (ps_reports_send_fn *send, void *arg);

void ps_reports_destroy (ps_reports_t **self_p);

//  Queue a report for the next request. When the queue is full (the
//  coordinator has been away for a thousand steps, which cannot happen as
//  no step runs without one) the oldest report makes room.
void ps_reports_add (ps_reports_t *self, const ps_report_t *report);

//  Queue the report of work this worker did, and count it for the
//  progress lines: a train report done or failed, an evaluation done.
void ps_reports_work (ps_reports_t *self, const ps_report_t *report);

//  Send a work_request carrying up to a request's worth of pending
//  reports, which become the sent ones, and make it the outstanding
//  request (want: whether the worker wants more work). Returns 0, or the
//  send function's code, the reports staying pending.
int ps_reports_send (ps_reports_t *self, bool want, ps_error_t *err);

//  The outstanding request was answered: its reports were delivered.
void ps_reports_answered (ps_reports_t *self);

//  The outstanding request will not be answered: its reports go back in
//  front of the pending ones, to be carried by the next request.
void ps_reports_forget (ps_reports_t *self);

//  The id of the outstanding request, or 0 when none is.
uint64_t ps_reports_outstanding (const ps_reports_t *self);

//  Whether id is one of this worker's requests (their ids never meet
//  those of the link's own messages).
bool ps_reports_ours (const ps_reports_t *self, uint64_t id);

//  How many reports are pending, and how many pending and sent.
size_t ps_reports_pending (const ps_reports_t *self);
size_t ps_reports_undelivered (const ps_reports_t *self);

//  Log a progress line when one is due (always with force), and the
//  totals of the run when the worker stops.
void ps_reports_progress (ps_reports_t *self, bool force);
void ps_reports_totals (const ps_reports_t *self);

#endif
