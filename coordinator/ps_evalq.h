//  The coordinator's evaluation queue: which evaluation of the test set is
//  asked for, which one is in flight and with whom, and the latest result.
//
//  At most one evaluation waits (the newest asked for supersedes an older
//  one still waiting) and at most one is in flight. One whose task fails,
//  or that ends without a result, goes back to wait unless a newer one was
//  asked for meanwhile. After a restore, evaluations of steps past the
//  checkpoint are dropped: they would measure rewound parameters under a
//  later step's name, and are asked for again when training gets there.
//  Who evaluates (an evaluator, a worker, the whole ring) is the mode's
//  choice; the queue only keeps the books and reports the result.

#ifndef PS_EVALQ_H_INCLUDED
#define PS_EVALQ_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include "ps_metrics.h"
#include "ps_roster.h"

typedef struct _ps_evalq_t ps_evalq_t;

//  An evaluation in flight, as ps_evalq_take handed it out.
typedef struct {
    ps_role_t role;             //  the task evaluating
    int index;
    uint64_t epoch, step;       //  the parameters after this step
    uint64_t generation;        //  of the parameters when it was sent
    double sent_ms;
} ps_eval_t;

//  A queue whose results are logged and written to report.
ps_evalq_t *ps_evalq_new (ps_metrics_t *report);
void ps_evalq_destroy (ps_evalq_t **self_p);

//  Ask for an evaluation of the parameters after step (in epoch).
void ps_evalq_ask (ps_evalq_t *self, uint64_t epoch, uint64_t step);

//  Whether one waits (and which).
bool ps_evalq_pending (const ps_evalq_t *self, uint64_t *epoch, uint64_t *step);

//  The evaluation in flight, or NULL.
const ps_eval_t *ps_evalq_busy (const ps_evalq_t *self);

//  Hand the waiting evaluation to task role:index, at generation, now.
//  Returns it, or NULL when none waits.
const ps_eval_t *ps_evalq_take (ps_evalq_t *self, ps_role_t role, int index,
                                uint64_t generation, double now);

//  The evaluation in flight ended without a result: it waits again,
//  unless a newer one does.
void ps_evalq_requeue (ps_evalq_t *self);

//  Task role:index failed: its evaluation, if it had one, waits again.
void ps_evalq_lost (ps_evalq_t *self, ps_role_t role, int index);

//  The evaluation in flight finished: loss summed over count examples, of
//  which correct were predicted right, and for a click-through-rate model
//  the AUC over them (NAN for others), by task `task` of `who` (a role's
//  name, or "ring"). Logged and written as an "eval" record, which for a
//  CTR model also holds test_auc and test_logloss (the mean loss).
//  abs_error is a regression model's summed absolute error (NaN for a
//  classifier): its record then gives test_mse (loss / count) and test_mae
//  in place of test_accuracy. A binary image classifier's AUC is recorded
//  as a CTR model's is. params_ms is when the evaluated parameters were
//  read (the record's params_at_s), now less the evaluation's computing:
//  a task may read them a while after it is handed the evaluation (a
//  worker finishes its step first; an evaluator in the cores' idle time
//  waits for one). NaN, or a time before the hand-out: the hand-out's.
void ps_evalq_result (ps_evalq_t *self, double loss, uint64_t correct, uint64_t count,
                      double auc, double abs_error, const char *who, int task,
                      double params_ms, double now);

//  The parameters were rewound to step `after`: drop what lies past it.
void ps_evalq_rewind (ps_evalq_t *self, uint64_t after);

//  At the end of the run: true when the latest result is of step `done`;
//  otherwise asks for it (once) and returns false.
bool ps_evalq_final (ps_evalq_t *self, uint64_t epoch, uint64_t done);

//  The latest result (*test_auc NAN when it has none): false when there
//  is none.
bool ps_evalq_latest (const ps_evalq_t *self, double *test_loss, double *test_accuracy,
                      double *test_auc);

//  The latest result's mean absolute error, NaN when it has none (no
//  result yet, or a classifier's).
double ps_evalq_latest_mae (const ps_evalq_t *self);

#endif
