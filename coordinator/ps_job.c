//  Jobs; see ps_job.h, schemas/job.md and schemas/job.schema.json.
//
//  The schema is a standard JSON Schema (2020-12), compiled in
//  (ps_job_schema_json) and checked by common/base/ps_jsonschema: which
//  keys exist, their types, ranges and enum values, and the bounds that
//  depend on an object's kind. The key table (ps_jobkeys.h) ties each key
//  of the schema, by its JSON pointer, to its field of ps_job_t. Reading a
//  job validates the file against the schema, stores each key it names
//  through the table, and then validates the whole job, as ps_job_validate
//  does, by turning it into JSON through the same table. A bound changed in
//  the schema is therefore checked on both paths, and since the schema and
//  the table are compared each time the schema is loaded, a key added to
//  one and not to the other fails every load (and the tests).
//
//  What a schema cannot say is written out below, after validation: the
//  boundaries increase, the piecewise arrays' lengths agree, a string fits
//  its char array in bytes, a checkpoint interval needs a directory, the
//  heartbeat timeout exceeds its interval. Reading a job leaves out the two
//  that command-line flags can still settle (the checkpoint directory and
//  the heartbeat timeout); ps_job_validate checks them once the flags are
//  in.
//
//  Every message names the value by its JSON pointer,
//  `at /optimizer/lr: expected ..., got ...`, and the loaders put the
//  source in front, so that a job file, a checkpoint manifest and the
//  command line (through ps_job_validate) report alike.

#include "ps_job.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_dataset.h"
#include "ps_file.h"
#include "ps_jobkeys.h"
#include "ps_json.h"
#include "ps_jsonschema.h"
#include "ps_jsonvalue.h"

extern const char ps_job_schema_json [];

//  A job file holds a few hundred bytes; a larger one is not a job file.
#define S_FILE_MAX  ((size_t) 1 << 20)

//  By ps_mode_t; compared with job.schema.json's mode enum on every load.
static const char *const s_mode_names [] = { "async", "mirrored", "ssp", "sync" };
#define S_NMODES  (sizeof s_mode_names / sizeof s_mode_names [0])

//  ---------------------------------------------------------------------
//  The schema: loading it and checking it against the table

//  Load the built-in schema and check it against the table.
static ps_jsonschema_t *
s_schema_load (ps_error_t *err)
{
    ps_jsonschema_t *schema = ps_jsonschema_parse (ps_job_schema_json, PS_JOB_SCHEMA_NAME, err);
    if (!schema)
        return NULL;
    int rc = ps_jobkeys_check_schema (ps_jsonschema_root (schema), err);
    if (rc)
        ps_jsonschema_destroy (&schema);
    return schema;
}

//  A number too large to read (ps_json.h) in the job's text, reported as
//  the schema reports a value out of range: by its pointer, with what the
//  schema expects there and the number as written. A key the schema lacks
//  is unknown, as it would have been; a number inside an array or object
//  where the schema has neither is a value of the wrong shape.
static int
s_too_large (const ps_json_overflow_t *big, ps_error_t *err)
{
    if (!big->pointer [0])
        return ps_error_set (err, PS_EINVAL, "at the top level: expected an object (the job), "
                             "got %s", big->literal);
    ps_jsonschema_t *schema = s_schema_load (err);
    if (!schema)
        return PS_EINVAL;
    char expected [256];
    char pointer [sizeof big->pointer];
    snprintf (pointer, sizeof pointer, "%s", big->pointer);
    int rc = ps_jsonschema_describe (schema, pointer, expected, sizeof expected, err);
    if (rc == 0)
        rc = ps_error_set (err, PS_EINVAL, "at %s: expected %s, got %s", pointer, expected,
                           big->literal);
    else
    if (rc == PS_ENOTFOUND) {
        //  Up to the deepest key the schema has a value for.
        char *cut;
        while (rc == PS_ENOTFOUND && (cut = strrchr (pointer, '/')) && cut != pointer) {
            *cut = 0;
            rc = ps_jsonschema_describe (schema, pointer, expected, sizeof expected, err);
        }
        if (rc == 0)
            rc = ps_error_set (err, PS_EINVAL, "at %s: expected %s, got %s holding %s",
                               pointer, expected, big->pointer [strlen (pointer) + 1] >= '0'
                               && big->pointer [strlen (pointer) + 1] <= '9' ? "an array"
                                                                             : "an object",
                               big->literal);
        else
            rc = ps_error_set (err, PS_EINVAL, "at %s: %s is too large to read", big->pointer,
                               big->literal);
    }
    ps_jsonschema_destroy (&schema);
    return rc;
}

//  ---------------------------------------------------------------------
//  Reading a job

typedef struct {
    ps_job_t job;               //  the copy being changed
    int nvalues;                //  the length of lr_schedule.values given; -1: not given
    bool boundaries_given;
} s_overlay_t;

//  Store a checked value of key `index` in the copy.
static int
s_store (s_overlay_t *self, int index, const json_t *value, ps_error_t *err)
{
    ps_job_t *job = &self->job;
    char *p = (char *) job + ps_jobkeys [index].offset;
    ps_lr_schedule_t *schedule = &job->lr_schedule;
    size_t i;
    const json_t *item;
    int rc = 0;
    switch (ps_jobkeys [index].store) {
        case PS_JOBKEY_INT:
            *(int *) p = (int) ps_jsonvalue_integer (value);
            break;
        case PS_JOBKEY_INT64:
            *(int64_t *) p = (int64_t) ps_jsonvalue_integer (value);
            break;
        case PS_JOBKEY_UINT64:
            *(uint64_t *) p = (uint64_t) ps_jsonvalue_integer (value);
            break;
        case PS_JOBKEY_DOUBLE:
            *(double *) p = json_number_value (value);
            break;
        case PS_JOBKEY_BOOL:
            *(bool *) p = json_is_true (value);
            break;
        case PS_JOBKEY_TEXT:
            //  The schema counts characters; the field holds bytes. A NUL
            //  inside (jansson refuses \u0000) would cut the text short.
            if (strlen (json_string_value (value)) != json_string_length (value))
                return ps_error_set (err, PS_EINVAL, "at %s: expected text without NUL "
                                     "characters", ps_jobkeys [index].path);
            if (json_string_length (value) >= ps_jobkeys [index].size)
                return ps_error_set (err, PS_EINVAL, "at %s: expected a string of at most %zu "
                                     "bytes, got %zu bytes", ps_jobkeys [index].path,
                                     ps_jobkeys [index].size - 1, json_string_length (value));
            snprintf (p, ps_jobkeys [index].size, "%s", json_string_value (value));
            break;
        case PS_JOBKEY_OPT_KIND: {
            ps_opt_kind_t kind;
            rc = ps_opt_kind_parse (json_string_value (value), &kind, err);
            //  Another optimizer starts from its own defaults, so that a
            //  file naming only "kind" gets that optimizer as Keras makes
            //  it; the keys given beside "kind" are applied after this.
            if (rc == 0 && kind != job->optimizer.kind)
                ps_opt_config_default (&job->optimizer, kind);
            break;
        }
        case PS_JOBKEY_LR_KIND:
        case PS_JOBKEY_PART_KIND:
        case PS_JOBKEY_MODE:
            rc = ps_jobkeys_parse_name (ps_jobkeys [index].store, json_string_value (value), p,
                                        err);
            break;
        case PS_JOBKEY_BOUNDARIES:
            schedule->nboundaries = (int) json_array_size (value);
            json_array_foreach (value, i, item)
                schedule->boundaries [i] = json_number_value (item);
            self->boundaries_given = true;
            break;
        case PS_JOBKEY_VALUES:
            memset (schedule->values, 0, sizeof schedule->values);
            json_array_foreach (value, i, item)
                schedule->values [i] = json_number_value (item);
            self->nvalues = (int) json_array_size (value);
            break;
    }
    return rc;
}

//  Store the keys of obj, the object at prefix of a file that the schema
//  accepted, through the table.
static int
s_overlay_object (s_overlay_t *self, const json_t *obj, const char *prefix, ps_error_t *err)
{
    //  The kind comes first: a new optimizer kind resets the keys given
    //  beside it.
    char path [PS_JOBKEY_PATH_MAX];
    ps_jobkeys_join (path, prefix, "kind");
    int kind_index = ps_jobkeys_index (path);
    const json_t *kind = kind_index >= 0 ? json_object_get (obj, "kind") : NULL;
    int rc = kind ? s_store (self, kind_index, kind, err) : 0;
    const char *key;
    const json_t *value;
    json_object_foreach ((json_t *) obj, key, value) {
        if (rc || value == kind)
            continue;
        ps_jobkeys_join (path, prefix, key);
        int index = ps_jobkeys_index (path);
        rc = index >= 0 ? s_store (self, index, value, err)
                        : s_overlay_object (self, value, path, err);
    }
    return rc;
}

//  The piecewise arrays are stored without a count of values, so their
//  lengths are compared here, while the count is known: values has one
//  item more than boundaries, or none when boundaries is empty.
static int
s_check_lengths (const s_overlay_t *self, const ps_job_t *before, ps_error_t *err)
{
    if (self->nvalues < 0 && !self->boundaries_given)
        return 0;
    int nboundaries = self->job.lr_schedule.nboundaries;
    int want = nboundaries > 0 ? nboundaries + 1 : 0;
    int had = before->lr_schedule.nboundaries;
    int have = self->nvalues >= 0 ? self->nvalues : had > 0 ? had + 1 : 0;
    if (have == want)
        return 0;
    const char *origin = self->nvalues >= 0 ? "" : " (lr_schedule.values not given here)";
    if (want == 0)
        return ps_error_set (err, PS_EINVAL, "at /lr_schedule/values: expected no values "
                             "(lr_schedule.boundaries is empty), got %d%s", have, origin);
    return ps_error_set (err, PS_EINVAL, "at /lr_schedule/values: expected %d values (one "
                         "more than the %d of lr_schedule.boundaries), got %d%s", want,
                         nboundaries, have, origin);
}

//  ---------------------------------------------------------------------
//  Checking a whole job

//  The job as JSON, following the schema's keys (its properties, at
//  prefix); NULL as ps_jobkeys_get.
static json_t *
s_to_json (const ps_job_t *job, const json_t *properties, const char *prefix)
{
    json_t *obj = json_object ();
    const char *key;
    const json_t *field;
    json_object_foreach ((json_t *) properties, key, field) {
        if (!obj)
            break;
        char path [PS_JOBKEY_PATH_MAX];
        ps_jobkeys_join (path, prefix, key);
        json_t *value;
        if (ps_jobkeys_is_object (field))
            value = s_to_json (job, json_object_get (field, "properties"), path);
        else
            value = ps_jobkeys_get (job, ps_jobkeys_index (path));
        if (!value || json_object_set_new (obj, key, value)) {
            json_decref (obj);
            obj = NULL;
        }
    }
    return obj;
}

//  Refuse what JSON cannot carry, naming the key, before the conversion.
static int
s_check_representable (const ps_job_t *job, ps_error_t *err)
{
    const ps_lr_schedule_t *schedule = &job->lr_schedule;
    for (int i = 0; i < ps_jobkeys_count; i++) {
        const char *p = (const char *) job + ps_jobkeys [i].offset;
        const char *path = ps_jobkeys [i].path;
        ps_jobkey_store_t store = ps_jobkeys [i].store;
        if (store == PS_JOBKEY_UINT64 && *(const uint64_t *) p > INT64_MAX)
            return ps_error_set (err, PS_EINVAL, "at %s: expected an integer in 0 .. %lld, "
                                 "got %llu", path, (long long) INT64_MAX,
                                 (unsigned long long) *(const uint64_t *) p);
        if (store == PS_JOBKEY_DOUBLE && !isfinite (*(const double *) p))
            return ps_error_set (err, PS_EINVAL, "at %s: expected a finite number, got %g",
                                 path, *(const double *) p);
        if (store == PS_JOBKEY_TEXT && strnlen (p, ps_jobkeys [i].size) == ps_jobkeys [i].size)
            return ps_error_set (err, PS_EINVAL, "at %s: expected a string of at most %zu "
                                 "bytes, got one without its terminating NUL", path,
                                 ps_jobkeys [i].size - 1);
        if (store == PS_JOBKEY_TEXT) {
            json_t *text = json_string (p);
            json_decref (text);
            if (!text)
                return ps_error_set (err, PS_EINVAL, "at %s: expected UTF-8 text", path);
        }
    }
    int n = schedule->nboundaries;
    if (n < 0 || n > PS_JOB_MAX_BOUNDARIES)
        return ps_error_set (err, PS_EINVAL, "at /lr_schedule/boundaries: expected at most "
                             "%d boundaries, got %d", PS_JOB_MAX_BOUNDARIES, n);
    for (int i = 0; i < n + (n > 0); i++) {
        if (i < n && !isfinite (schedule->boundaries [i]))
            return ps_error_set (err, PS_EINVAL, "at /lr_schedule/boundaries/%d: expected "
                                 "a finite number, got %g", i, schedule->boundaries [i]);
        if (!isfinite (schedule->values [i]))
            return ps_error_set (err, PS_EINVAL, "at /lr_schedule/values/%d: expected a "
                                 "finite number, got %g", i, schedule->values [i]);
    }
    return 0;
}

//  The boundaries increase, which a schema cannot say.
static int
s_check_increasing (const ps_lr_schedule_t *schedule, ps_error_t *err)
{
    for (int i = 1; i < schedule->nboundaries; i++)
        if (!(schedule->boundaries [i] > schedule->boundaries [i - 1]))
            return ps_error_set (err, PS_EINVAL, "at /lr_schedule/boundaries/%d: expected a "
                                 "number > %.17g (each item above the one before), got %.17g",
                                 i, schedule->boundaries [i - 1], schedule->boundaries [i]);
    return 0;
}

//  Check the job against the schema and the owners' checks, and with
//  between_keys the rules between keys that command-line flags also set.
static int
s_validate (const ps_job_t *job, const ps_jsonschema_t *schema, bool between_keys,
            ps_error_t *err)
{
    int rc = s_check_representable (job, err);
    if (rc)
        return rc;
    json_t *obj = s_to_json (job, json_object_get (ps_jsonschema_root (schema), "properties"),
                             "");
    if (!obj)
        return ps_error_set (err, PS_ETOOBIG, "out of memory turning the job into JSON");
    rc = ps_jsonschema_validate (schema, obj, err);
    json_decref (obj);
    if (rc == 0)
        rc = s_check_increasing (&job->lr_schedule, err);
    if (rc)
        return rc;
    //  The owners' own checks, which the schema repeats where it can.
    if ((rc = ps_opt_config_validate (&job->optimizer, err)))
        return ps_error_prefix (err, rc, "at /optimizer");
    if ((rc = ps_partitioner_validate (&job->partitioner, err)))
        return ps_error_prefix (err, rc, "at /partitioner");

    //  The rules between keys.
    if (!between_keys)
        return 0;
    if (job->checkpoint_dir [0] == 0 && job->checkpoint_steps > 0)
        return ps_error_set (err, PS_EINVAL, "at /checkpoint/every_steps: expected 0 while "
                             "checkpoint.dir is empty (no checkpoints), got %llu",
                             (unsigned long long) job->checkpoint_steps);
    if (job->checkpoint_dir [0] == 0 && job->checkpoint_seconds > 0)
        return ps_error_set (err, PS_EINVAL, "at /checkpoint/every_seconds: expected 0 "
                             "while checkpoint.dir is empty (no checkpoints), got %g",
                             job->checkpoint_seconds);
    bool text_data = strcmp (job->data_format, "idx") != 0;
    if (text_data && (!job->train_data [0] || !job->test_data [0]))
        return ps_error_set (err, PS_EINVAL, "at /%s: expected a file of %s data (data_format "
                             "is %s), got none", job->train_data [0] ? "test_data" : "train_data",
                             job->data_format, job->data_format);
    if (!text_data && (job->train_data [0] || job->test_data [0]))
        return ps_error_set (err, PS_EINVAL, "at /%s: expected no file while data_format is "
                             "idx (the IDX files are in data_dir), got \"%s\"; set data_format "
                             "to criteo or libsvm", job->train_data [0] ? "train_data"
                             : "test_data", job->train_data [0] ? job->train_data
                             : job->test_data);
    const char *idx_file = job->train_images [0] ? "train_images" : job->train_labels [0]
                         ? "train_labels" : job->test_images [0] ? "test_images"
                         : job->test_labels [0] ? "test_labels" : NULL;
    if (text_data && idx_file)
        return ps_error_set (err, PS_EINVAL, "at /data/%s: expected no IDX file while "
                             "data_format is %s (the text files are train_data and test_data)",
                             idx_file, job->data_format);
    //  A CSV file is read whole by each process, so its limits apply as
    //  IDX ones do.
    if (text_data && strcmp (job->data_format, "csv") != 0 && (job->train_limit || job->test_limit))
        return ps_error_set (err, PS_EINVAL, "at /%s: expected 0 with %s data (a step is a "
                             "block of lines of the whole file), got %llu",
                             job->train_limit ? "train_limit" : "test_limit", job->data_format,
                             (unsigned long long) (job->train_limit ? job->train_limit
                                                                    : job->test_limit));
    if (job->heartbeat_timeout_ms <= job->heartbeat_ms)
        return ps_error_set (err, PS_EINVAL, "at /heartbeat/timeout_ms: expected more than "
                             "heartbeat.interval_ms (%d), got %d", job->heartbeat_ms,
                             job->heartbeat_timeout_ms);
    return 0;
}

//  ---------------------------------------------------------------------
//  The interface

void
ps_job_default (ps_job_t *job, int nservers)
{
    assert (job);
    memset (job, 0, sizeof *job);
    snprintf (job->model, sizeof job->model, "cnn");
    ps_opt_config_default (&job->optimizer, PS_OPT_ADAM);
    job->lr_schedule.kind = PS_LR_CONSTANT;
    job->batch_size = 64;
    job->epochs = 3;
    job->steps = 0;
    //  Without servers the variables can live only on the workers: a
    //  cluster of workers only (TensorFlow's MultiWorkerMirroredStrategy's)
    //  trains mirrored unless its job says otherwise.
    job->mode = nservers > 0 ? PS_MODE_ASYNC : PS_MODE_MIRRORED;
    job->staleness = 3;
    job->checkpoint_keep = 3;
    job->checkpoint_full_every = 1;
    job->seed = 1;
    snprintf (job->data_dir, sizeof job->data_dir, "%s", PS_DATASET_DEFAULT_DIR);
    snprintf (job->data_format, sizeof job->data_format, "idx");
    snprintf (job->label_column, sizeof job->label_column, "label");
    ps_partitioner_default (&job->partitioner, nservers > 0 ? nservers : 1);
    job->eval_epochs = 1;
    job->heartbeat_ms = 500;
    job->heartbeat_timeout_ms = 3000;
    job->register_timeout_ms = 60000;
    job->worker_threads = 1;
    snprintf (job->device, sizeof job->device, "cpu");
    job->log_seconds = 5.0;
    job->nonfinite_retries = 2;
    job->step_retries = 100;
}

int
ps_job_load_json (ps_job_t *job, const json_t *obj, const char *source, ps_error_t *err)
{
    assert (job);
    assert (source);
    ps_jsonschema_t *schema = s_schema_load (err);
    if (!schema)
        return ps_error_prefix (err, PS_EINVAL, "%s", source);
    //  Everything happens on a copy, which replaces the job only when the
    //  whole of it checks out.
    s_overlay_t overlay = { .job = *job, .nvalues = -1 };
    int rc = obj ? 0 : ps_error_set (err, PS_EINVAL, "at the top level: expected an object "
                                     "(the job), got nothing");
    if (rc == 0)
        rc = ps_jsonschema_validate (schema, obj, err);
    if (rc == 0)
        rc = s_overlay_object (&overlay, obj, "", err);
    if (rc == 0)
        rc = s_check_lengths (&overlay, job, err);
    //  A file may leave the checkpoint directory or the heartbeat timeout
    //  to the command line (or the coordinator's local-cluster defaults),
    //  so the rules between those keys wait for ps_job_validate.
    if (rc == 0)
        rc = s_validate (&overlay.job, schema, false, err);
    ps_jsonschema_destroy (&schema);
    if (rc)
        return ps_error_prefix (err, rc, "%s", source);
    *job = overlay.job;
    if (json_object_get (obj, "optimizer"))
        job->optimizer_given = true;
    if (json_object_get (obj, "worker_threads"))
        job->worker_threads_given = true;
    return 0;
}

void
ps_job_model_optimizer (ps_job_t *job, const ps_opt_config_t *model_optimizer)
{
    assert (job);
    if (model_optimizer && !job->optimizer_given)
        job->optimizer = *model_optimizer;
}

int
ps_job_load_file (ps_job_t *job, const char *path, ps_error_t *err)
{
    assert (job);
    assert (path);
    char *text;
    size_t len;
    int rc = ps_file_read (path, S_FILE_MAX, &text, &len, err);
    if (rc)
        return rc == PS_ENOTFOUND ? rc : ps_error_prefix (err, PS_EINVAL, "job file");
    json_error_t jerr;
    json_t *obj = json_loadb (text, len, JSON_REJECT_DUPLICATES, &jerr);
    ps_json_overflow_t big;
    bool too_large = !obj && ps_json_overflow (text, len, &jerr, &big);
    free (text);
    if (too_large)
        return ps_error_prefix (err, s_too_large (&big, err), "%s", path);
    if (!obj)
        return ps_error_set (err, PS_EINVAL, "%s: bad JSON at line %d, column %d: %s",
                             path, jerr.line, jerr.column, jerr.text);
    rc = ps_job_load_json (job, obj, path, err);
    json_decref (obj);
    return rc;
}

int
ps_job_validate (const ps_job_t *job, ps_error_t *err)
{
    assert (job);
    ps_jsonschema_t *schema = s_schema_load (err);
    if (!schema)
        return PS_EINVAL;
    int rc = s_validate (job, schema, true, err);
    ps_jsonschema_destroy (&schema);
    return rc;
}

json_t *
ps_job_to_json (const ps_job_t *job)
{
    assert (job);
    ps_jsonschema_t *schema = s_schema_load (NULL);
    if (!schema)
        return NULL;
    json_t *obj = s_to_json (job, json_object_get (ps_jsonschema_root (schema), "properties"),
                             "");
    ps_jsonschema_destroy (&schema);
    return obj;
}

int
ps_mode_parse (const char *name, ps_mode_t *mode, ps_error_t *err)
{
    char names [64] = "";
    for (size_t i = 0; i < S_NMODES; i++) {
        if (strcmp (name, s_mode_names [i]) == 0) {
            *mode = (ps_mode_t) i;
            return 0;
        }
        size_t used = strlen (names);
        snprintf (names + used, sizeof names - used, "%s%s", i ? (i + 1 < S_NMODES ? ", " : " or ")
                                                            : "", s_mode_names [i]);
    }
    return ps_error_set (err, PS_EINVAL, "unknown mode \"%s\", expected %s", name, names);
}

const char *
ps_mode_name (ps_mode_t mode)
{
    return (unsigned) mode < S_NMODES ? s_mode_names [mode] : "unknown";
}
