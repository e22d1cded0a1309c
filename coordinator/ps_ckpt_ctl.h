//  The coordinator's checkpoint control: when a checkpoint is due, the
//  steps of taking one (pause dispatch, drain the steps in flight, write
//  the snapshot files, commit the manifest), what a failed one does, and
//  opening the newest valid checkpoint to restore or resume from.
//
//  A checkpoint is a consistent cut: it is taken only when no step is in
//  flight, and its manifest records the steps done (the schedule's done
//  set), so that restoring it and rewinding the schedule to it trains
//  every batch exactly once. Who writes the snapshot files (every server
//  its partitions, or one ring member its replica) is the mode's
//  business; the control keeps the state machine
//
//      IDLE --pause--> DRAINING --begin--> WRITING --commit--> IDLE
//
//  (begin may also start from IDLE when nothing is in flight), counts the
//  failures, and holds a failed checkpoint back for a while before the
//  next try: a full disk is not hammered, and the final checkpoint, which
//  holds the run's result, is tried for about a minute before the run
//  gives up. Time is the caller's (`now`, in ms).

#ifndef PS_CKPT_CTL_H_INCLUDED
#define PS_CKPT_CTL_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "ps_error.h"
#include "ps_job.h"
#include "ps_metrics.h"
#include "ps_plan.h"
#include "ps_schedule.h"
#include "ps_snapshot.h"

typedef struct _ps_ckpt_ctl_t ps_ckpt_ctl_t;

typedef enum {
    PS_CKPT_IDLE,               //  no checkpoint under way
    PS_CKPT_DRAINING,           //  dispatch paused: the steps in flight finish
    PS_CKPT_WRITING,            //  the snapshot files are being written
} ps_ckpt_state_t;

//  What ps_ckpt_ctl_final says of the run's last checkpoint.
typedef enum {
    PS_CKPT_FINAL_DONE,         //  written (or the job keeps none)
    PS_CKPT_FINAL_TAKE,         //  take it now
    PS_CKPT_FINAL_WAIT,         //  the last try failed: wait a little
    PS_CKPT_FINAL_FAILED,       //  it failed too often: the run fails
} ps_ckpt_final_t;

//  What a checkpoint records besides the schedule's done set: the run's
//  generation and learning rate, keys of the mode's own (a JSON object or
//  NULL; taken), and the embedding table files the servers wrote (taken;
//  NULL when the run has no tables).
typedef struct {
    uint64_t generation;
    double lr;
    json_t *extra;
    ps_table_file_t *tables;
    size_t ntables;
} ps_ckpt_cut_t;

//  Checkpoints of job (its checkpoint.* keys) for a run placed as plan
//  (layout: the same as JSON; job_json: the job as a manifest records
//  it), with nservers servers, whose steps schedule counts. Events go to
//  report. The pointers must outlive the control.
ps_ckpt_ctl_t *ps_ckpt_ctl_new (const ps_job_t *job, const ps_plan_t *plan, const json_t *layout,
                                const json_t *job_json, int nservers, ps_schedule_t *schedule,
                                ps_metrics_t *report);
void ps_ckpt_ctl_destroy (ps_ckpt_ctl_t **self_p);

//  The run's embedding tables, as the manifest records them (a JSON array
//  of specs, one per table; kept, not taken): their shards are on every
//  server, so each checkpoint must hold one file per table per server.
//  With tables, checkpoint.full_every K > 1 makes all but every K-th
//  checkpoint incremental: its table files hold only what changed since
//  the last full checkpoint, which its manifest names as its "base" (and
//  which pruning keeps while it is needed). A checkpoint after a failed
//  one (full or incremental), after a restore from an incremental one, or
//  after a re-partitioned restore, is full.
void ps_ckpt_ctl_set_tables (ps_ckpt_ctl_t *self, const json_t *specs);

//  The base of the checkpoint begun (a directory relative to the root, as
//  a snapshot request names it), or NULL when it is a full one.
const char *ps_ckpt_ctl_base (const ps_ckpt_ctl_t *self);

//  Whether the job keeps checkpoints (has a checkpoint directory).
bool ps_ckpt_ctl_enabled (const ps_ckpt_ctl_t *self);

ps_ckpt_state_t ps_ckpt_ctl_state (const ps_ckpt_ctl_t *self);

//  Whether one is due now: forced, or the job's steps or seconds since
//  the last have passed, and no failed one is being held back.
bool ps_ckpt_ctl_due (const ps_ckpt_ctl_t *self, double now);

//  Make the next one due at once (the initial state's).
void ps_ckpt_ctl_force (ps_ckpt_ctl_t *self);

//  Pause dispatch for one: IDLE -> DRAINING.
void ps_ckpt_ctl_pause (ps_ckpt_ctl_t *self, double now);

//  Give up the pause without a checkpoint (a failure makes one
//  impossible now): DRAINING -> IDLE.
void ps_ckpt_ctl_cancel (ps_ckpt_ctl_t *self);

//  Start writing one of the steps done now into a new temporary directory
//  (tmp, len bytes): -> WRITING, *step the step it is of. Returns 0, or a
//  code with err set after counting the failure (the state is IDLE).
int ps_ckpt_ctl_begin (ps_ckpt_ctl_t *self, double now, uint64_t *step, char *tmp, size_t len,
                       ps_error_t *err);

//  The snapshot files of the checkpoint begun are written (rc 0, nfiles
//  of them) or failed (rc and *err say why): check them against the
//  plan's partitions, write the manifest with cut, commit, log and record
//  it; or count the failure and hold the next try back. Takes files and
//  cut->extra. -> IDLE. Returns 0 or the failure's code.
int ps_ckpt_ctl_commit (ps_ckpt_ctl_t *self, const ps_ckpt_cut_t *cut, ps_snap_file_t *files,
                        size_t nfiles, int rc, const ps_error_t *err, double now);

//  The last checkpoint of a run whose steps are all done (see
//  ps_ckpt_final_t).
ps_ckpt_final_t ps_ckpt_ctl_final (const ps_ckpt_ctl_t *self, double now);

//  Open the newest valid checkpoint for this job. It must come from a job
//  with the same variables and data order; when it lays the variables
//  out otherwise than this run (the other mode, another placement), it is
//  re-partitioned into the scratch directory <root>/reshard.tmp, which is
//  then what to load. dir receives the checkpoint, src the directory to
//  load from (len bytes each), *manifest the manifest (decref it).
//  Returns 0, PS_ENOTFOUND when there is none, or another code with err
//  naming the checkpoint and what is wrong.
int ps_ckpt_ctl_open (ps_ckpt_ctl_t *self, char *dir, char *src, size_t len, json_t **manifest,
                      ps_error_t *err);

//  Rewind the schedule to manifest's done set (*watermark: its
//  watermark, may be NULL); the checkpoint is the last one now, taken at
//  `now`. Returns 0 or a code with err set.
int ps_ckpt_ctl_rewind (ps_ckpt_ctl_t *self, const json_t *manifest, double now,
                        uint64_t *watermark, ps_error_t *err);

//  Checkpoints written, and failed since the last good one.
int ps_ckpt_ctl_count (const ps_ckpt_ctl_t *self);
//  The steps done at the last checkpoint written (or restored).
uint64_t ps_ckpt_ctl_last_step (const ps_ckpt_ctl_t *self);
int ps_ckpt_ctl_failures (const ps_ckpt_ctl_t *self);

#endif
