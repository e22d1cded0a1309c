//  The job's keys; see ps_jobkeys.h.

#include "ps_jobkeys.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define S_KEY(path, store, member) \
    { path, store, offsetof (ps_job_t, member), sizeof (((ps_job_t *) 0)->member) }

const ps_jobkey_t ps_jobkeys [] = {
    S_KEY ("/model",                         PS_JOBKEY_TEXT,       model),
    S_KEY ("/optimizer/kind",                PS_JOBKEY_OPT_KIND,   optimizer.kind),
    S_KEY ("/optimizer/lr",                  PS_JOBKEY_DOUBLE,     optimizer.lr),
    S_KEY ("/optimizer/momentum",            PS_JOBKEY_DOUBLE,     optimizer.momentum),
    S_KEY ("/optimizer/nesterov",            PS_JOBKEY_BOOL,       optimizer.nesterov),
    S_KEY ("/optimizer/beta1",               PS_JOBKEY_DOUBLE,     optimizer.beta1),
    S_KEY ("/optimizer/beta2",               PS_JOBKEY_DOUBLE,     optimizer.beta2),
    S_KEY ("/optimizer/epsilon",             PS_JOBKEY_DOUBLE,     optimizer.epsilon),
    S_KEY ("/optimizer/initial_accumulator", PS_JOBKEY_DOUBLE,     optimizer.initial_accumulator),
    S_KEY ("/optimizer/weight_decay",        PS_JOBKEY_DOUBLE,     optimizer.weight_decay),
    S_KEY ("/optimizer/clip_value",          PS_JOBKEY_DOUBLE,     optimizer.clip_value),
    S_KEY ("/optimizer/clip_norm",           PS_JOBKEY_DOUBLE,     optimizer.clip_norm),
    S_KEY ("/lr_schedule/kind",              PS_JOBKEY_LR_KIND,    lr_schedule.kind),
    S_KEY ("/lr_schedule/boundaries",        PS_JOBKEY_BOUNDARIES, lr_schedule.boundaries),
    S_KEY ("/lr_schedule/values",            PS_JOBKEY_VALUES,     lr_schedule.values),
    S_KEY ("/lr_schedule/alpha",             PS_JOBKEY_DOUBLE,     lr_schedule.alpha),
    S_KEY ("/lr_schedule/decay_steps",       PS_JOBKEY_UINT64,     lr_schedule.decay_steps),
    S_KEY ("/lr_schedule/warmup_steps",      PS_JOBKEY_UINT64,     lr_schedule.warmup_steps),
    S_KEY ("/batch_size",                    PS_JOBKEY_INT,        batch_size),
    S_KEY ("/epochs",                        PS_JOBKEY_INT,        epochs),
    S_KEY ("/steps",                         PS_JOBKEY_UINT64,     steps),
    S_KEY ("/mode",                          PS_JOBKEY_MODE,       mode),
    S_KEY ("/staleness",                     PS_JOBKEY_INT,        staleness),
    S_KEY ("/seed",                          PS_JOBKEY_UINT64,     seed),
    S_KEY ("/data_dir",                      PS_JOBKEY_TEXT,       data_dir),
    S_KEY ("/data_format",                   PS_JOBKEY_TEXT,       data_format),
    S_KEY ("/train_data",                    PS_JOBKEY_TEXT,       train_data),
    S_KEY ("/test_data",                     PS_JOBKEY_TEXT,       test_data),
    S_KEY ("/data/train_images",             PS_JOBKEY_TEXT,       train_images),
    S_KEY ("/data/train_labels",             PS_JOBKEY_TEXT,       train_labels),
    S_KEY ("/data/test_images",              PS_JOBKEY_TEXT,       test_images),
    S_KEY ("/data/test_labels",              PS_JOBKEY_TEXT,       test_labels),
    S_KEY ("/data/label_column",             PS_JOBKEY_TEXT,       label_column),
    S_KEY ("/data/classes",                  PS_JOBKEY_INT,        classes),
    S_KEY ("/train_limit",                   PS_JOBKEY_UINT64,     train_limit),
    S_KEY ("/test_limit",                    PS_JOBKEY_UINT64,     test_limit),
    S_KEY ("/partitioner/kind",              PS_JOBKEY_PART_KIND,  partitioner.kind),
    S_KEY ("/partitioner/num_shards",        PS_JOBKEY_INT,        partitioner.num_shards),
    S_KEY ("/partitioner/min_shard_bytes",   PS_JOBKEY_INT64,      partitioner.min_shard_bytes),
    S_KEY ("/partitioner/max_shard_bytes",   PS_JOBKEY_INT64,      partitioner.max_shard_bytes),
    S_KEY ("/partitioner/max_shards",        PS_JOBKEY_INT,        partitioner.max_shards),
    S_KEY ("/partitioner/chunk_bytes",       PS_JOBKEY_INT64,      partitioner.chunk_bytes),
    S_KEY ("/checkpoint/dir",                PS_JOBKEY_TEXT,       checkpoint_dir),
    S_KEY ("/checkpoint/every_steps",        PS_JOBKEY_UINT64,     checkpoint_steps),
    S_KEY ("/checkpoint/every_seconds",      PS_JOBKEY_DOUBLE,     checkpoint_seconds),
    S_KEY ("/checkpoint/keep",               PS_JOBKEY_INT,        checkpoint_keep),
    S_KEY ("/checkpoint/full_every",         PS_JOBKEY_INT,        checkpoint_full_every),
    S_KEY ("/eval/every_epochs",             PS_JOBKEY_INT,        eval_epochs),
    S_KEY ("/eval/every_steps",              PS_JOBKEY_UINT64,     eval_steps),
    S_KEY ("/heartbeat/interval_ms",         PS_JOBKEY_INT,        heartbeat_ms),
    S_KEY ("/heartbeat/timeout_ms",          PS_JOBKEY_INT,        heartbeat_timeout_ms),
    S_KEY ("/register_timeout_ms",           PS_JOBKEY_INT,        register_timeout_ms),
    S_KEY ("/overlap",                       PS_JOBKEY_BOOL,       overlap),
    S_KEY ("/worker_threads",                PS_JOBKEY_INT,        worker_threads),
    S_KEY ("/device",                        PS_JOBKEY_TEXT,       device),
    S_KEY ("/log_seconds",                   PS_JOBKEY_DOUBLE,     log_seconds),
    S_KEY ("/nonfinite_retries",             PS_JOBKEY_INT,        nonfinite_retries),
    S_KEY ("/step_retries",                  PS_JOBKEY_INT,        step_retries),
    S_KEY ("/stop_on_divergence",            PS_JOBKEY_BOOL,       stop_on_divergence),
};
const int ps_jobkeys_count = (int) (sizeof ps_jobkeys / sizeof ps_jobkeys [0]);

int
ps_jobkeys_index (const char *path)
{
    for (int i = 0; i < ps_jobkeys_count; i++)
        if (strcmp (ps_jobkeys [i].path, path) == 0)
            return i;
    return -1;
}

//  The pointer of key in the object at prefix ("" at the top level).
void
ps_jobkeys_join (char *path, const char *prefix, const char *key)
{
    snprintf (path, PS_JOBKEY_PATH_MAX, "%s/%s", prefix, key);
}

//  The name of the enumerated value held by key `index` (a kind, the mode
//  or the device).
const char *
ps_jobkeys_name_of (const ps_job_t *job, int index)
{
    const char *p = (const char *) job + ps_jobkeys [index].offset;
    const char *name = NULL;
    switch (ps_jobkeys [index].store) {
        case PS_JOBKEY_OPT_KIND:
            name = ps_opt_kind_name (*(const ps_opt_kind_t *) p);
            break;
        case PS_JOBKEY_LR_KIND:
            name = ps_lr_kind_name (*(const ps_lr_kind_t *) p);
            break;
        case PS_JOBKEY_PART_KIND:
            name = ps_partitioner_kind_name (*(const ps_partitioner_kind_t *) p);
            break;
        case PS_JOBKEY_MODE:
            name = ps_mode_name (*(const ps_mode_t *) p);
            break;
        case PS_JOBKEY_TEXT:
            name = p;
            break;
        default:
            break;
    }
    return name ? name : "unknown";
}

//  Parse the name of an enumerated value into *value for store.
int
ps_jobkeys_parse_name (ps_jobkey_store_t store, const char *name, void *value,
                       ps_error_t *err)
{
    switch (store) {
        case PS_JOBKEY_OPT_KIND:
            return ps_opt_kind_parse (name, value, err);
        case PS_JOBKEY_LR_KIND:
            return ps_lr_kind_parse (name, value, err);
        case PS_JOBKEY_PART_KIND:
            return ps_partitioner_kind_parse (name, value, err);
        case PS_JOBKEY_MODE:
            return ps_mode_parse (name, value, err);
        default:
            return ps_error_set (err, PS_EINVAL, "\"%s\" is no enumerated value", name);
    }
}

//  The value of key `index` as JSON, or NULL when JSON cannot hold it (a
//  number that is not finite, an integer past INT64_MAX, text that is not
//  NUL-terminated UTF-8, a boundary count out of range; ps_job_validate
//  names those before converting) or memory ran out.
json_t *
ps_jobkeys_get (const ps_job_t *job, int index)
{
    const char *p = (const char *) job + ps_jobkeys [index].offset;
    const ps_lr_schedule_t *schedule = &job->lr_schedule;
    int n = schedule->nboundaries;
    switch (ps_jobkeys [index].store) {
        case PS_JOBKEY_INT:
            return json_integer (*(const int *) p);
        case PS_JOBKEY_INT64:
            return json_integer (*(const int64_t *) p);
        case PS_JOBKEY_UINT64:
            if (*(const uint64_t *) p > INT64_MAX)
                return NULL;
            return json_integer ((json_int_t) *(const uint64_t *) p);
        case PS_JOBKEY_DOUBLE:
            //  json_real refuses what is not finite.
            return json_real (*(const double *) p);
        case PS_JOBKEY_BOOL:
            return json_boolean (*(const bool *) p);
        case PS_JOBKEY_TEXT:
            if (strnlen (p, ps_jobkeys [index].size) == ps_jobkeys [index].size)
                return NULL;
            return json_string (p);
        case PS_JOBKEY_OPT_KIND:
        case PS_JOBKEY_LR_KIND:
        case PS_JOBKEY_PART_KIND:
        case PS_JOBKEY_MODE:
            return json_string (ps_jobkeys_name_of (job, index));
        case PS_JOBKEY_BOUNDARIES:
        case PS_JOBKEY_VALUES: {
            if (n < 0 || n > PS_JOB_MAX_BOUNDARIES)
                return NULL;
            json_t *array = json_array ();
            //  Without boundaries there are no values either: values [0] of a
            //  job that never had a piecewise schedule means nothing.
            int count = ps_jobkeys [index].store == PS_JOBKEY_BOUNDARIES ? n : n > 0 ? n + 1 : 0;
            const double *numbers = ps_jobkeys [index].store == PS_JOBKEY_BOUNDARIES
                                  ? schedule->boundaries : schedule->values;
            for (int i = 0; array && i < count; i++)
                if (json_array_append_new (array, json_real (numbers [i]))) {
                    json_decref (array);
                    array = NULL;
                }
            return array;
        }
    }
    return NULL;
}

//  ---------------------------------------------------------------------
//  The schema against the table

//  Whether the bounds of an integer key fit its field.
static bool
s_int_fits (const json_t *field, ps_jobkey_store_t store)
{
    const json_t *min = json_object_get (field, "minimum");
    const json_t *max = json_object_get (field, "maximum");
    if (!json_is_integer (min) || !json_is_integer (max))
        return false;
    json_int_t low = json_integer_value (min), high = json_integer_value (max);
    return (store == PS_JOBKEY_INT && low >= INT_MIN && high <= INT_MAX)
        || store == PS_JOBKEY_INT64
        || (store == PS_JOBKEY_UINT64 && low >= 0);
}

//  Check one key of the schema: its type suits its field, its bounds fit
//  the field, and each enum value is one the code knows.
static int
s_check_schema_key (const char *path, const json_t *field, int index, ps_error_t *err)
{
    const char *type = json_string_value (json_object_get (field, "type"));
    const json_t *values = json_object_get (field, "enum");
    ps_jobkey_store_t store = ps_jobkeys [index].store;
    bool fits;
    if (values) {
        fits = json_is_array (values) && json_array_size (values) > 0;
        size_t i;
        const json_t *value;
        json_array_foreach (values, i, value) {
            const char *name = json_string_value (value);
            union {
                ps_opt_kind_t opt;
                ps_lr_kind_t lr;
                ps_partitioner_kind_t partitioner;
                ps_mode_t mode;
            } scratch;
            fits = fits && name
                && (store == PS_JOBKEY_TEXT ? strlen (name) < ps_jobkeys [index].size
                                    : ps_jobkeys_parse_name (store, name, &scratch, NULL) == 0);
        }
    }
    else
    if (!type)
        fits = false;
    else
    if (strcmp (type, "integer") == 0)
        fits = s_int_fits (field, store);
    else
    if (strcmp (type, "number") == 0)
        fits = store == PS_JOBKEY_DOUBLE;
    else
    if (strcmp (type, "boolean") == 0)
        fits = store == PS_JOBKEY_BOOL;
    else
    if (strcmp (type, "string") == 0) {
        const json_t *max_length = json_object_get (field, "maxLength");
        fits = store == PS_JOBKEY_TEXT && json_is_integer (max_length)
            && json_integer_value (max_length) < (json_int_t) ps_jobkeys [index].size;
    }
    else
    if (strcmp (type, "array") == 0) {
        const json_t *max_items = json_object_get (field, "maxItems");
        int most = store == PS_JOBKEY_BOUNDARIES ? PS_JOB_MAX_BOUNDARIES
                                                 : PS_JOB_MAX_BOUNDARIES + 1;
        const char *items = json_string_value (json_object_get (json_object_get (field, "items"),
                                                                "type"));
        fits = (store == PS_JOBKEY_BOUNDARIES || store == PS_JOBKEY_VALUES)
            && json_is_integer (max_items) && json_integer_value (max_items) <= most
            && items && strcmp (items, "number") == 0;
    }
    else
        fits = false;
    if (!fits)
        return ps_error_set (err, PS_EINVAL, PS_JOB_SCHEMA_NAME ": key %s of type \"%s\" does not "
                             "suit its field of ps_job_t", path, type ? type : "enum");
    return 0;
}

//  Whether a key of the schema is an object of keys of its own.
bool
ps_jobkeys_is_object (const json_t *field)
{
    const char *type = json_string_value (json_object_get (field, "type"));
    return type && strcmp (type, "object") == 0;
}

//  Walk the schema's properties, checking each key against the table, and
//  count the leaves.
static int
s_check_schema (const json_t *properties, const char *prefix, int *count, ps_error_t *err)
{
    const char *key;
    const json_t *field;
    json_object_foreach ((json_t *) properties, key, field) {
        char path [PS_JOBKEY_PATH_MAX];
        ps_jobkeys_join (path, prefix, key);
        int rc;
        if (ps_jobkeys_is_object (field))
            rc = s_check_schema (json_object_get (field, "properties"), path, count, err);
        else {
            int index = ps_jobkeys_index (path);
            if (index < 0)
                return ps_error_set (err, PS_EINVAL, PS_JOB_SCHEMA_NAME ": key %s has no field in "
                                     "ps_job_t", path);
            rc = s_check_schema_key (path, field, index, err);
            ++*count;
        }
        if (rc)
            return rc;
    }
    return 0;
}

int
ps_jobkeys_check_schema (const json_t *root, ps_error_t *err)
{
    int count = 0;
    const json_t *properties = json_object_get (root, "properties");
    int rc = json_is_object (properties) ? s_check_schema (properties, "", &count, err)
                                         : ps_error_set (err, PS_EINVAL, PS_JOB_SCHEMA_NAME ": no "
                                                         "\"properties\" object");
    if (rc == 0 && count != ps_jobkeys_count)
        rc = ps_error_set (err, PS_EINVAL, PS_JOB_SCHEMA_NAME ": %d keys, but ps_job_t has %d",
                           count, ps_jobkeys_count);
    return rc;
}
