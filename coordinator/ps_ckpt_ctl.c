//  The coordinator's checkpoint control (see ps_ckpt_ctl.h).

#include "ps_ckpt_ctl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_checkpoint.h"
#include "ps_clock.h"
#include "ps_log.h"
#include "ps_reshard.h"

//  A failed checkpoint (a full disk, say) is tried again after this long;
//  the final one, which holds the run's result, up to this many times in
//  a row (about a minute) before the run fails.
#define S_RETRY_MS       2000
#define S_FINAL_TRIES    30

struct _ps_ckpt_ctl_t {
    const ps_job_t *job;
    const ps_plan_t *plan;
    const json_t *layout;
    const json_t *job_json;
    int nservers;
    ps_schedule_t *schedule;
    ps_metrics_t *report;

    ps_ckpt_state_t state;
    bool force;                 //  the next one is due at once
    uint64_t done;              //  steps done at the last checkpoint
    double done_ms;             //  when it was taken
    double pause_ms;            //  when dispatch paused for the current one
    double retry_ms;            //  no new attempt before this, after a failure
    uint64_t step;              //  the one being written, begun at t0 in tmp
    double t0;
    char tmp [PS_JOB_PATH_MAX + 64];
    int count;
    int failures;               //  in a row, since the last good one

    //  Embedding tables (ps_ckpt_ctl_set_tables): their specs, the last
    //  full checkpoint every server's tables follow (relative to the root;
    //  "" when the next must be full), the checkpoints since it, and the
    //  base of the one being written ("" when full).
    const json_t *tables;
    char last_full [PS_JOB_PATH_MAX + 64];
    int since_full;
    char base [PS_JOB_PATH_MAX + 64];
    char opened [PS_JOB_PATH_MAX + 64];     //  ps_ckpt_ctl_open's, as last_full
};

ps_ckpt_ctl_t *
ps_ckpt_ctl_new (const ps_job_t *job, const ps_plan_t *plan, const json_t *layout,
                 const json_t *job_json, int nservers, ps_schedule_t *schedule,
                 ps_metrics_t *report)
{
    ps_ckpt_ctl_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->job = job;
    self->plan = plan;
    self->layout = layout;
    self->job_json = job_json;
    self->nservers = nservers;
    self->schedule = schedule;
    self->report = report;
    return self;
}

void
ps_ckpt_ctl_destroy (ps_ckpt_ctl_t **self_p)
{
    free (*self_p);
    *self_p = NULL;
}

void
ps_ckpt_ctl_set_tables (ps_ckpt_ctl_t *self, const json_t *specs)
{
    self->tables = json_array_size (specs) > 0 ? specs : NULL;
}

const char *
ps_ckpt_ctl_base (const ps_ckpt_ctl_t *self)
{
    return self->base [0] ? self->base : NULL;
}

bool
ps_ckpt_ctl_enabled (const ps_ckpt_ctl_t *self)
{
    return *self->job->checkpoint_dir != 0;
}

ps_ckpt_state_t
ps_ckpt_ctl_state (const ps_ckpt_ctl_t *self)
{
    return self->state;
}

bool
ps_ckpt_ctl_due (const ps_ckpt_ctl_t *self, double now)
{
    if (!ps_ckpt_ctl_enabled (self) || now < self->retry_ms)
        return false;
    if (self->force)
        return true;
    uint64_t done = ps_schedule_done_count (self->schedule);
    const ps_job_t *job = self->job;
    return (job->checkpoint_steps && done - self->done >= job->checkpoint_steps)
        || (job->checkpoint_seconds > 0 && done > self->done
            && now - self->done_ms >= job->checkpoint_seconds * 1e3);
}

void
ps_ckpt_ctl_force (ps_ckpt_ctl_t *self)
{
    self->force = true;
}

void
ps_ckpt_ctl_pause (ps_ckpt_ctl_t *self, double now)
{
    if (self->state != PS_CKPT_IDLE)
        return;
    self->state = PS_CKPT_DRAINING;
    self->pause_ms = now;
}

void
ps_ckpt_ctl_cancel (ps_ckpt_ctl_t *self)
{
    if (self->state == PS_CKPT_DRAINING)
        self->state = PS_CKPT_IDLE;
}

int
ps_ckpt_ctl_begin (ps_ckpt_ctl_t *self, double now, uint64_t *step, char *tmp, size_t len,
                   ps_error_t *err)
{
    self->force = false;
    self->step = ps_schedule_done_count (self->schedule);
    self->t0 = now;
    if (self->pause_ms == 0)
        self->pause_ms = now;
    self->state = PS_CKPT_WRITING;
    *step = self->step;
    //  Every full_every-th checkpoint is full; the others follow the last
    //  full one, while the servers' tables still do.
    int every = self->job->checkpoint_full_every;
    bool incremental = self->tables && every > 1 && self->last_full [0]
                       && self->since_full + 1 < every;
    snprintf (self->base, sizeof self->base, "%s", incremental ? self->last_full : "");
    int rc = ps_checkpoint_begin (self->job->checkpoint_dir, self->step, self->tmp,
                                  sizeof self->tmp, err);
    snprintf (tmp, len, "%s", self->tmp);
    if (rc) {
        ps_ckpt_cut_t cut = { 0 };
        ps_ckpt_ctl_commit (self, &cut, NULL, 0, rc, err, now);
    }
    return rc;
}

//  The done set as a checkpoint records it, and the data cursor: the first
//  step not done, right after the watermark.
static int
s_done_set_json (ps_ckpt_ctl_t *self, json_t **done, json_t **cursor, ps_error_t *err)
{
    uint64_t watermark, *above;
    size_t count;
    if (ps_schedule_done_set (self->schedule, &watermark, &above, &count))
        return ps_error_set (err, PS_ETOOBIG, "no memory for the done set");
    json_t *list = json_array ();
    for (size_t i = 0; i < count; i++)
        json_array_append_new (list, json_integer ((json_int_t) above [i]));
    free (above);
    *done = json_pack ("{s:I, s:o}", "watermark", (json_int_t) watermark, "above", list);
    uint64_t total = ps_schedule_total (self->schedule);
    bool finished = watermark >= total;
    uint64_t epoch = 0, batch = 0;
    if (!finished)
        ps_schedule_locate (self->schedule, watermark + 1, &epoch, &batch);
    *cursor = json_pack ("{s:I, s:I, s:b}", "epoch", (json_int_t) epoch, "batch",
                         (json_int_t) batch, "finished", finished);
    return 0;
}

static json_t *
s_manifest (ps_ckpt_ctl_t *self, const ps_ckpt_cut_t *cut, json_t *done, json_t *cursor)
{
    json_t *manifest = json_object ();
    json_object_set_new (manifest, "global_step", json_integer ((json_int_t) self->step));
    json_object_set_new (manifest, "mode", json_string (ps_mode_name (self->job->mode)));
    json_object_set_new (manifest, "generation", json_integer ((json_int_t) cut->generation));
    json_object_set_new (manifest, "done", done);
    json_object_set_new (manifest, "data_cursor", cursor);
    json_object_set_new (manifest, "seeds",
                         json_pack ("{s:I, s:s}", "seed", (json_int_t) self->job->seed,
                                    "derivation", PS_CHECKPOINT_SEEDS_DERIVATION));
    json_object_set_new (manifest, "lr", json_real (cut->lr));
    json_object_set_new (manifest, "servers", json_integer (self->nservers));
    json_object_set_new (manifest, "steps_per_epoch",
                         json_integer ((json_int_t) ps_schedule_batches_per_epoch (self->schedule)));
    json_object_set_new (manifest, "total_steps",
                         json_integer ((json_int_t) ps_schedule_total (self->schedule)));
    json_object_set_new (manifest, "job", json_incref ((json_t *) self->job_json));
    json_object_set_new (manifest, "layout", json_incref ((json_t *) self->layout));
    if (self->tables) {
        json_t *files = json_array ();
        for (size_t i = 0; i < cut->ntables; i++) {
            const ps_table_file_t *file = &cut->tables [i];
            json_array_append_new (files, json_pack ("{s:s, s:i, s:s, s:i, s:i, s:b, s:I, s:I}",
                                                     "file", file->file, "server", file->server,
                                                     "table", file->table, "shard", file->shard,
                                                     "shards", file->shards, "full", file->full,
                                                     "rows", (json_int_t) file->rows,
                                                     "steps", (json_int_t) file->steps));
        }
        json_object_set_new (manifest, "tables",
                             json_pack ("{s:i, s:O, s:o}", "shards", self->nservers,
                                        "specs", self->tables, "files", files));
        if (self->base [0])
            json_object_set_new (manifest, PS_CHECKPOINT_BASE, json_string (self->base));
    }
    if (cut->extra)
        json_object_update (manifest, cut->extra);
    return manifest;
}

//  The table files of a checkpoint: one per table per server, each of the
//  kind (full or incremental) asked for.
static int
s_check_tables (const ps_ckpt_ctl_t *self, const ps_ckpt_cut_t *cut, ps_error_t *err)
{
    size_t expected = self->tables ? json_array_size (self->tables) * (size_t) self->nservers
                                   : 0;
    if (cut->ntables != expected)
        return ps_error_set (err, PS_ESHAPE, "%zu table files were written for %zu table "
                             "shards", cut->ntables, expected);
    bool full = self->base [0] == 0;
    for (size_t i = 0; i < cut->ntables; i++)
        if (cut->tables [i].full != full || cut->tables [i].shards != (uint32_t) self->nservers
        ||  cut->tables [i].shard != (uint32_t) cut->tables [i].server)
            return ps_error_set (err, PS_ESHAPE, "ps:%d wrote %s, expected the %s file of "
                                 "its shard %d of %d", cut->tables [i].server,
                                 cut->tables [i].file, full ? "full" : "incremental",
                                 cut->tables [i].server, self->nservers);
    return 0;
}

int
ps_ckpt_ctl_commit (ps_ckpt_ctl_t *self, const ps_ckpt_cut_t *cut, ps_snap_file_t *files,
                    size_t nfiles, int rc, const ps_error_t *err_in, double now)
{
    const char *root = self->job->checkpoint_dir;
    char dir [PS_JOB_PATH_MAX + 64];
    ps_error_t err = *err_in;
    size_t expected = 0;
    for (int v = 0; v < self->plan->nvars; v++)
        expected += (size_t) self->plan->vars [v].nparts;
    if (rc == 0 && nfiles != expected)
        rc = ps_error_set (&err, PS_ESHAPE, "%zu snapshot files were written for %zu "
                           "partitions", nfiles, expected);
    if (rc == 0)
        rc = s_check_tables (self, cut, &err);
    json_t *done = NULL, *cursor = NULL;
    if (rc == 0)
        rc = s_done_set_json (self, &done, &cursor, &err);
    if (rc == 0) {
        json_t *manifest = s_manifest (self, cut, done, cursor);
        rc = ps_checkpoint_commit (root, self->step, self->tmp, manifest, files, nfiles,
                                   self->job->checkpoint_keep, dir, sizeof dir, &err);
        json_decref (manifest);
    }
    json_decref (cut->extra);
    free (cut->tables);
    bool full = self->base [0] == 0;
    self->base [0] = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < nfiles; i++)
        bytes += files [i].bytes;
    free (files);
    self->state = PS_CKPT_IDLE;
    ps_metrics_tty_clear (self->report);
    if (rc) {
        ps_warn ("checkpoint at step %" PRIu64 " failed: %s", self->step, err.msg);
        ps_metrics_event (self->report, "checkpoint_failed",
                          json_pack ("{s:I, s:s}", "step", (json_int_t) self->step,
                                     "error", err.msg));
        //  Try again after a while rather than at once; the step count of
        //  the last good checkpoint stays, so the final one is still taken.
        self->retry_ms = now + S_RETRY_MS;
        self->failures++;
        self->pause_ms = 0;
        //  The next one is full. After a failed full one the servers'
        //  tables may follow its snapshot, which no checkpoint holds;
        //  after a failed incremental one, the cause (a server that
        //  refuses the base, a base gone from the disk) would fail every
        //  later one on the same base.
        self->last_full [0] = 0;
        return rc;
    }
    double pause = self->pause_ms > 0 ? now - self->pause_ms : now - self->t0;
    char tables [64] = "";
    if (self->tables)
        snprintf (tables, sizeof tables, " and %zu %s table files", cut->ntables,
                  full ? "full" : "incremental");
    ps_info ("checkpoint %s: step %" PRIu64 ", %zu files%s, %.1f MB, written in %.1f ms, "
             "dispatch paused %.1f ms", dir, self->step, nfiles, tables, bytes / 1e6,
             now - self->t0, pause);
    json_t *event = json_pack ("{s:I, s:s, s:I, s:I, s:f, s:f}", "step", (json_int_t) self->step,
                               "dir", dir, "files", (json_int_t) nfiles,
                               "bytes", (json_int_t) bytes, "write_ms", now - self->t0,
                               "pause_ms", pause);
    if (self->tables) {
        json_object_set_new (event, "table_files", json_integer ((json_int_t) cut->ntables));
        json_object_set_new (event, "incremental", json_boolean (!full));
    }
    ps_metrics_event (self->report, "checkpoint", event);
    self->count++;
    self->failures = 0;
    if (full) {
        snprintf (self->last_full, sizeof self->last_full, "%s", ps_checkpoint_name (root, dir));
        self->since_full = 0;
    }
    else
        self->since_full++;
    self->done_ms = now;
    self->done = self->step;
    self->pause_ms = 0;
    return 0;
}

ps_ckpt_final_t
ps_ckpt_ctl_final (const ps_ckpt_ctl_t *self, double now)
{
    if (!ps_ckpt_ctl_enabled (self) || self->done == ps_schedule_done_count (self->schedule))
        return PS_CKPT_FINAL_DONE;
    //  Training is over, but until this checkpoint is written its result
    //  lives only in the servers (or the replicas): a full disk or another
    //  passing failure is retried every few seconds, and only one that
    //  lasts about a minute fails the run.
    if (self->failures >= S_FINAL_TRIES)
        return PS_CKPT_FINAL_FAILED;
    if (now < self->retry_ms || self->state == PS_CKPT_WRITING)
        return PS_CKPT_FINAL_WAIT;
    return PS_CKPT_FINAL_TAKE;
}

//  Whether a checkpoint's layout holds this job's variables (the same
//  names and shapes, in order), however they were partitioned.
static bool
s_same_variables (const json_t *a, const json_t *b)
{
    if (!json_is_array (a) || !json_is_array (b) || json_array_size (a) != json_array_size (b))
        return false;
    for (size_t i = 0; i < json_array_size (a); i++) {
        const json_t *x = json_array_get (a, i), *y = json_array_get (b, i);
        if (!json_equal (json_object_get (x, "var"), json_object_get (y, "var"))
        ||  !json_equal (json_object_get (x, "shape"), json_object_get (y, "shape")))
            return false;
    }
    return true;
}

//  Whether the checkpoint's job has this job's data order; NULL, or the
//  key that differs.
static const char *
s_job_mismatch (const ps_ckpt_ctl_t *self, const json_t *manifest)
{
    json_t *job = json_object_get (manifest, "job");
    if (!s_same_variables (json_object_get (manifest, "layout"), self->layout))
        return "model (the variables' names or shapes)";
    if (json_integer_value (json_object_get (job, "batch_size")) != self->job->batch_size)
        return "batch_size";
    if ((uint64_t) json_integer_value (json_object_get (job, "seed")) != self->job->seed)
        return "seed";
    if ((uint64_t) json_integer_value (json_object_get (job, "train_limit"))
        != self->job->train_limit)
        return "train_limit";
    //  A job from before the CTR data keys trained on IDX data.
    const char *format = json_string_value (json_object_get (job, "data_format"));
    if (strcmp (format ? format : "idx", self->job->data_format) != 0)
        return "data_format";
    const char *train = json_string_value (json_object_get (job, "train_data"));
    if (strcmp (train ? train : "", self->job->train_data) != 0)
        return "train_data";
    //  A job from before the data object read data_dir's files.
    const json_t *data = json_object_get (job, "data");
    const char *images = json_string_value (json_object_get (data, "train_images"));
    if (strcmp (images ? images : "", self->job->train_images) != 0)
        return "data.train_images";
    const char *labels = json_string_value (json_object_get (data, "train_labels"));
    if (strcmp (labels ? labels : "", self->job->train_labels) != 0)
        return "data.train_labels";
    const json_t *tables = json_object_get (manifest, "tables");
    if (!json_equal (json_object_get (tables, "specs"), self->tables)
    &&  (self->tables || json_array_size (json_object_get (tables, "specs")) > 0))
        return "set of embedding tables (their specs)";
    if (self->tables
    &&  json_integer_value (json_object_get (tables, "shards")) != self->nservers)
        return "number of servers (the embedding tables' shards)";
    return NULL;
}

//  Cut the checkpoint in dir, written in mode `mode`, into this run's
//  partitions, in src.
static int
s_reshard (ps_ckpt_ctl_t *self, const char *dir, const char *mode, char *src, size_t len,
           ps_error_t *err)
{
    int nvars = self->plan->nvars;
    ps_reshard_var_t *vars = calloc ((size_t) nvars + 1, sizeof *vars);
    if (!vars)
        abort ();
    for (int v = 0; v < nvars; v++) {
        const ps_plan_var_t *var = &self->plan->vars [v];
        vars [v] = (ps_reshard_var_t) { .var = var->var, .shape = var->shape,
                                        .nparts = var->nparts, .splits = var->splits,
                                        .servers = var->servers };
    }
    ps_snap_file_t *files = NULL;
    size_t nfiles = 0;
    double t0 = ps_clock_ms ();
    int rc = ps_checkpoint_scratch (self->job->checkpoint_dir, "reshard.tmp", src, len, err);
    if (rc == 0)
        rc = ps_reshard (dir, vars, nvars, src, &files, &nfiles, err);
    free (vars);
    free (files);
    //  A manifest without "mode" comes from before modes were recorded,
    //  when every run kept its variables on the servers.
    if (rc == 0)
        ps_info ("checkpoint %s (%s mode) re-partitioned for this %s run into %s (%zu files, "
                 "%.0f ms)", dir, mode ? mode : ps_mode_name (PS_MODE_ASYNC), ps_mode_name (self->job->mode), src,
                 nfiles, ps_clock_ms () - t0);
    return rc;
}

int
ps_ckpt_ctl_open (ps_ckpt_ctl_t *self, char *dir, char *src, size_t len, json_t **manifest,
                  ps_error_t *err)
{
    *manifest = NULL;
    int rc = ps_checkpoint_latest (self->job->checkpoint_dir, dir, len, manifest, err);
    const char *mismatch = rc == 0 ? s_job_mismatch (self, *manifest) : NULL;
    if (mismatch)
        rc = ps_error_set (err, PS_EINVAL, "checkpoint %s was written by a job with another "
                           "%s; use another checkpoint directory or the same job", dir, mismatch);
    self->opened [0] = 0;
    if (rc == 0 && json_equal (json_object_get (*manifest, "layout"), self->layout)) {
        snprintf (src, len, "%s", dir);
        snprintf (self->opened, sizeof self->opened, "%s",
                  ps_checkpoint_name (self->job->checkpoint_dir, dir));
    }
    else
    if (rc == 0 && self->tables)
        rc = ps_error_set (err, PS_EINVAL, "checkpoint %s places the dense variables otherwise "
                           "than this run, and a run with embedding tables is not "
                           "re-partitioned; resume it with the partitioner and servers it "
                           "was written with", dir);
    else
    //  Written in the other mode, or with another placement: the same
    //  values and optimizer state, cut into this run's partitions.
    if (rc == 0 && (rc = s_reshard (self, dir, json_string_value (json_object_get (*manifest, "mode")),
                                src, len, err)) != 0) {
        char why [PS_ERROR_MSG_MAX];
        snprintf (why, sizeof why, "%s", err->msg);
        ps_error_set (err, rc, "re-partitioning checkpoint %s for this run: %s", dir, why);
    }
    if (rc) {
        json_decref (*manifest);
        *manifest = NULL;
    }
    return rc;
}

int
ps_ckpt_ctl_rewind (ps_ckpt_ctl_t *self, const json_t *manifest, double now,
                    uint64_t *watermark_p, ps_error_t *err)
{
    json_t *done = json_object_get (manifest, "done");
    json_t *list = json_object_get (done, "above");
    size_t count = json_array_size (list);
    uint64_t *above = calloc (count ? count : 1, sizeof (uint64_t));
    if (!above)
        abort ();
    for (size_t i = 0; i < count; i++)
        above [i] = (uint64_t) json_integer_value (json_array_get (list, i));
    uint64_t watermark = (uint64_t) json_integer_value (json_object_get (done, "watermark"));
    int rc = ps_schedule_restore (self->schedule, watermark, above, count, err);
    free (above);
    if (rc)
        return rc;
    if (watermark_p)
        *watermark_p = watermark;
    //  The servers' tables follow the checkpoint restored when it is a
    //  full one loaded as it is; after an incremental one they follow none.
    snprintf (self->last_full, sizeof self->last_full, "%s",
              json_object_get (manifest, PS_CHECKPOINT_BASE) ? "" : self->opened);
    self->since_full = 0;
    self->done = ps_schedule_done_count (self->schedule);
    self->done_ms = now;
    return 0;
}

int
ps_ckpt_ctl_count (const ps_ckpt_ctl_t *self)
{
    return self->count;
}

uint64_t
ps_ckpt_ctl_last_step (const ps_ckpt_ctl_t *self)
{
    return self->done;
}

int
ps_ckpt_ctl_failures (const ps_ckpt_ctl_t *self)
{
    return self->failures;
}
