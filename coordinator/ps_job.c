//  Jobs; see ps_job.h, schemas/job.md and schemas/job.json.
//
//  The schema is compiled in (ps_job_schema_json) and drives the checks:
//  which keys exist, their types, ranges and enum values. The table s_keys
//  below ties each key path of the schema to its field of ps_job_t.
//  Reading a job checks each key it names against the schema and stores
//  the value through the table; ps_job_validate turns the whole job into
//  JSON through the same table and checks that against the schema. A bound
//  changed in the schema is therefore checked on both paths, and since the
//  schema and the table are compared each time the schema is loaded, a key
//  added to one and not to the other fails every load (and the tests).
//  The rules between keys (the piecewise arrays' lengths, a checkpoint
//  interval without a directory, the heartbeat timeout) are written out
//  below, after the schema checks. Reading a job leaves out the two that
//  command-line flags can still settle (the checkpoint directory and the
//  heartbeat timeout); ps_job_validate checks them once the flags are in.
//
//  Every message is built as `key "PATH": expected ..., got ...`, and the
//  loaders put the source in front, so that a job file, a checkpoint
//  manifest and the command line (through ps_job_validate) report alike.

#include "ps_job.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_dataset.h"
#include "ps_file.h"
#include "ps_json.h"

extern const char ps_job_schema_json [];

//  How a key's value is held in ps_job_t.
typedef enum {
    S_INT,              //  int; the schema bounds it within int
    S_INT64,            //  int64_t
    S_UINT64,           //  uint64_t; JSON carries at most INT64_MAX
    S_DOUBLE,           //  double, finite
    S_BOOL,             //  bool
    S_TEXT,             //  char [size], NUL-terminated UTF-8
    S_OPT_KIND,         //  ps_opt_kind_t, by name
    S_LR_KIND,          //  ps_lr_kind_t, by name
    S_PART_KIND,        //  ps_partitioner_kind_t, by name
    S_MODE,             //  ps_mode_t, by name
    S_BOUNDARIES,       //  lr_schedule.boundaries [nboundaries]
    S_VALUES,           //  lr_schedule.values [nboundaries + 1], none when nboundaries is 0
} s_store_t;

#define S_KEY(path, store, member) \
    { path, store, offsetof (ps_job_t, member), sizeof (((ps_job_t *) 0)->member) }

static const struct {
    const char *path;
    s_store_t store;
    size_t offset;
    size_t size;
} s_keys [] = {
    S_KEY ("model",                         S_TEXT,       model),
    S_KEY ("optimizer.kind",                S_OPT_KIND,   optimizer.kind),
    S_KEY ("optimizer.lr",                  S_DOUBLE,     optimizer.lr),
    S_KEY ("optimizer.momentum",            S_DOUBLE,     optimizer.momentum),
    S_KEY ("optimizer.nesterov",            S_BOOL,       optimizer.nesterov),
    S_KEY ("optimizer.beta1",               S_DOUBLE,     optimizer.beta1),
    S_KEY ("optimizer.beta2",               S_DOUBLE,     optimizer.beta2),
    S_KEY ("optimizer.epsilon",             S_DOUBLE,     optimizer.epsilon),
    S_KEY ("optimizer.initial_accumulator", S_DOUBLE,     optimizer.initial_accumulator),
    S_KEY ("optimizer.weight_decay",        S_DOUBLE,     optimizer.weight_decay),
    S_KEY ("optimizer.clip_value",          S_DOUBLE,     optimizer.clip_value),
    S_KEY ("optimizer.clip_norm",           S_DOUBLE,     optimizer.clip_norm),
    S_KEY ("lr_schedule.kind",              S_LR_KIND,    lr_schedule.kind),
    S_KEY ("lr_schedule.boundaries",        S_BOUNDARIES, lr_schedule.boundaries),
    S_KEY ("lr_schedule.values",            S_VALUES,     lr_schedule.values),
    S_KEY ("lr_schedule.alpha",             S_DOUBLE,     lr_schedule.alpha),
    S_KEY ("lr_schedule.decay_steps",       S_UINT64,     lr_schedule.decay_steps),
    S_KEY ("lr_schedule.warmup_steps",      S_UINT64,     lr_schedule.warmup_steps),
    S_KEY ("batch_size",                    S_INT,        batch_size),
    S_KEY ("epochs",                        S_INT,        epochs),
    S_KEY ("steps",                         S_UINT64,     steps),
    S_KEY ("mode",                          S_MODE,       mode),
    S_KEY ("seed",                          S_UINT64,     seed),
    S_KEY ("data_dir",                      S_TEXT,       data_dir),
    S_KEY ("train_limit",                   S_UINT64,     train_limit),
    S_KEY ("test_limit",                    S_UINT64,     test_limit),
    S_KEY ("partitioner.kind",              S_PART_KIND,  partitioner.kind),
    S_KEY ("partitioner.num_shards",        S_INT,        partitioner.num_shards),
    S_KEY ("partitioner.min_shard_bytes",   S_INT64,      partitioner.min_shard_bytes),
    S_KEY ("partitioner.max_shard_bytes",   S_INT64,      partitioner.max_shard_bytes),
    S_KEY ("partitioner.max_shards",        S_INT,        partitioner.max_shards),
    S_KEY ("checkpoint.dir",                S_TEXT,       checkpoint_dir),
    S_KEY ("checkpoint.every_steps",        S_UINT64,     checkpoint_steps),
    S_KEY ("checkpoint.every_seconds",      S_DOUBLE,     checkpoint_seconds),
    S_KEY ("checkpoint.keep",               S_INT,        checkpoint_keep),
    S_KEY ("eval.every_epochs",             S_INT,        eval_epochs),
    S_KEY ("eval.every_steps",              S_UINT64,     eval_steps),
    S_KEY ("heartbeat.interval_ms",         S_INT,        heartbeat_ms),
    S_KEY ("heartbeat.timeout_ms",          S_INT,        heartbeat_timeout_ms),
    S_KEY ("register_timeout_ms",           S_INT,        register_timeout_ms),
    S_KEY ("overlap",                       S_BOOL,       overlap),
    S_KEY ("worker_threads",                S_INT,        worker_threads),
    S_KEY ("device",                        S_TEXT,       device),
    S_KEY ("log_seconds",                   S_DOUBLE,     log_seconds),
    S_KEY ("nonfinite_retries",             S_INT,        nonfinite_retries),
    S_KEY ("stop_on_divergence",            S_BOOL,       stop_on_divergence),
};
#define S_KEY_COUNT  (int) (sizeof s_keys / sizeof s_keys [0])

//  Key paths are short ("partitioner.min_shard_bytes", "lr_schedule.values[16]").
#define S_PATH_MAX  96

//  What messages quote of a value that was wrong.
#define S_QUOTE_MAX  72

//  A job file holds a few hundred bytes; a larger one is not a job file.
#define S_FILE_MAX  ((size_t) 1 << 20)

static const char *const s_lr_kind_names [] = { "constant", "piecewise", "cosine" };
static const char *const s_mode_names [] = { "async", "mirrored" };

static const char *
s_lr_kind_name (ps_lr_kind_t kind)
{
    return (unsigned) kind < 3 ? s_lr_kind_names [kind] : "unknown";
}

//  ---------------------------------------------------------------------
//  The table

static int
s_key_index (const char *path)
{
    for (int i = 0; i < S_KEY_COUNT; i++)
        if (strcmp (s_keys [i].path, path) == 0)
            return i;
    return -1;
}

static void
s_join (char *path, const char *prefix, const char *key)
{
    if (prefix)
        snprintf (path, S_PATH_MAX, "%s.%s", prefix, key);
    else
        snprintf (path, S_PATH_MAX, "%s", key);
}

//  The name of the enumerated value held by key `index` (a kind, the mode
//  or the device).
static const char *
s_name_of (const ps_job_t *job, int index)
{
    const char *p = (const char *) job + s_keys [index].offset;
    const char *name = NULL;
    switch (s_keys [index].store) {
        case S_OPT_KIND:
            name = ps_opt_kind_name (*(const ps_opt_kind_t *) p);
            break;
        case S_LR_KIND:
            name = s_lr_kind_name (*(const ps_lr_kind_t *) p);
            break;
        case S_PART_KIND:
            name = ps_partitioner_kind_name (*(const ps_partitioner_kind_t *) p);
            break;
        case S_MODE:
            name = ps_mode_name (*(const ps_mode_t *) p);
            break;
        case S_TEXT:
            name = p;
            break;
        default:
            break;
    }
    return name ? name : "unknown";
}

//  Parse the name of an enumerated value into *value for store.
static int
s_parse_name (s_store_t store, const char *name, void *value, ps_error_t *err)
{
    switch (store) {
        case S_OPT_KIND:
            return ps_opt_kind_parse (name, value, err);
        case S_LR_KIND:
            return ps_lr_kind_parse (name, value, err);
        case S_PART_KIND:
            return ps_partitioner_kind_parse (name, value, err);
        case S_MODE:
            return ps_mode_parse (name, value, err);
        default:
            return ps_error_set (err, PS_EINVAL, "\"%s\" is no enumerated value", name);
    }
}

//  The value of key `index` as JSON, or NULL when JSON cannot hold it (a
//  number that is not finite, an integer past INT64_MAX, text that is not
//  NUL-terminated UTF-8, a boundary count out of range; ps_job_validate
//  names those before converting) or memory ran out.
static json_t *
s_get (const ps_job_t *job, int index)
{
    const char *p = (const char *) job + s_keys [index].offset;
    const ps_lr_schedule_t *schedule = &job->lr_schedule;
    int n = schedule->nboundaries;
    switch (s_keys [index].store) {
        case S_INT:
            return json_integer (*(const int *) p);
        case S_INT64:
            return json_integer (*(const int64_t *) p);
        case S_UINT64:
            if (*(const uint64_t *) p > INT64_MAX)
                return NULL;
            return json_integer ((json_int_t) *(const uint64_t *) p);
        case S_DOUBLE:
            //  json_real refuses what is not finite.
            return json_real (*(const double *) p);
        case S_BOOL:
            return json_boolean (*(const bool *) p);
        case S_TEXT:
            if (strnlen (p, s_keys [index].size) == s_keys [index].size)
                return NULL;
            return json_string (p);
        case S_OPT_KIND:
        case S_LR_KIND:
        case S_PART_KIND:
        case S_MODE:
            return json_string (s_name_of (job, index));
        case S_BOUNDARIES:
        case S_VALUES: {
            if (n < 0 || n > PS_JOB_MAX_BOUNDARIES)
                return NULL;
            json_t *array = json_array ();
            //  Without boundaries there are no values either: values [0] of a
            //  job that never had a piecewise schedule means nothing.
            int count = s_keys [index].store == S_BOUNDARIES ? n : n > 0 ? n + 1 : 0;
            const double *numbers = s_keys [index].store == S_BOUNDARIES
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
//  The schema: loading it and checking it against the table

//  Check one key of the schema: its type suits its field, its bounds fit
//  the field, and each enum value is one the code knows.
static int
s_check_schema_key (const char *path, const json_t *field, int index, ps_error_t *err)
{
    const char *type = json_string_value (json_object_get (field, "type"));
    s_store_t store = s_keys [index].store;
    const json_t *min = json_object_get (field, "min");
    const json_t *max = json_object_get (field, "max");
    bool fits;
    if (strcmp (type, "int") == 0)
        fits = (store == S_INT && json_is_integer (min) && json_is_integer (max)
                && json_integer_value (min) >= INT_MIN && json_integer_value (max) <= INT_MAX)
            || (store == S_INT64 && json_is_integer (min))
            || (store == S_UINT64 && json_is_integer (min) && json_integer_value (min) >= 0);
    else
    if (strcmp (type, "number") == 0)
        fits = store == S_DOUBLE;
    else
    if (strcmp (type, "bool") == 0)
        fits = store == S_BOOL;
    else
    if (strcmp (type, "str") == 0) {
        const json_t *max_length = json_object_get (field, "max_length");
        fits = store == S_TEXT && json_is_integer (max_length)
            && json_integer_value (max_length) < (json_int_t) s_keys [index].size;
    }
    else
    if (strcmp (type, "enum") == 0) {
        const json_t *values = json_object_get (field, "values");
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
                && (store == S_TEXT ? strlen (name) < s_keys [index].size
                                    : s_parse_name (store, name, &scratch, NULL) == 0);
        }
    }
    else
    if (strcmp (type, "array") == 0) {
        const json_t *max_items = json_object_get (field, "max_items");
        int most = store == S_BOUNDARIES ? PS_JOB_MAX_BOUNDARIES : PS_JOB_MAX_BOUNDARIES + 1;
        const char *items = json_string_value (json_object_get (json_object_get (field, "items"),
                                                                "type"));
        fits = (store == S_BOUNDARIES || store == S_VALUES)
            && json_is_integer (max_items) && json_integer_value (max_items) <= most
            && items && strcmp (items, "number") == 0;
    }
    else
        fits = false;
    if (!fits)
        return ps_error_set (err, PS_EINVAL, "schemas/job.json (built in): key \"%s\" of type "
                             "\"%s\" does not suit its field of ps_job_t", path, type);
    return 0;
}

//  Walk the schema's keys under fields, checking each against the table,
//  and count the leaves.
static int
s_check_schema (const json_t *fields, const char *prefix, int *count, ps_error_t *err)
{
    const char *key;
    const json_t *field;
    json_object_foreach ((json_t *) fields, key, field) {
        char path [S_PATH_MAX];
        s_join (path, prefix, key);
        const char *type = json_string_value (json_object_get (field, "type"));
        if (!type)
            return ps_error_set (err, PS_EINVAL, "schemas/job.json (built in): key \"%s\" "
                                 "has no type", path);
        int rc;
        if (strcmp (type, "object") == 0)
            rc = s_check_schema (json_object_get (field, "fields"), path, count, err);
        else {
            int index = s_key_index (path);
            if (index < 0)
                return ps_error_set (err, PS_EINVAL, "schemas/job.json (built in): key \"%s\" "
                                     "has no field in ps_job_t", path);
            rc = s_check_schema_key (path, field, index, err);
            ++*count;
        }
        if (rc)
            return rc;
    }
    return 0;
}

//  Parse the built-in schema into *schema (json_decref it) and check it
//  against the table.
static int
s_schema_load (json_t **schema, ps_error_t *err)
{
    json_error_t jerr;
    *schema = json_loads (ps_job_schema_json, JSON_REJECT_DUPLICATES, &jerr);
    if (!*schema)
        return ps_error_set (err, PS_EINVAL, "schemas/job.json (built in): line %d, "
                             "column %d: %s", jerr.line, jerr.column, jerr.text);
    int count = 0;
    const json_t *fields = json_object_get (*schema, "job");
    int rc = json_is_object (fields) ? s_check_schema (fields, NULL, &count, err)
                                     : ps_error_set (err, PS_EINVAL, "schemas/job.json "
                                                     "(built in): no \"job\" object");
    if (rc == 0 && count != S_KEY_COUNT)
        rc = ps_error_set (err, PS_EINVAL, "schemas/job.json (built in): %d keys, but "
                           "ps_job_t has %d", count, S_KEY_COUNT);
    if (rc)
        json_decref (*schema);
    return rc;
}

//  ---------------------------------------------------------------------
//  Checking values against the schema

//  A key's bounds: its own, overridden side by side by those of the kind
//  of the enclosing object (the schema's "kinds").
typedef struct {
    const json_t *low, *high;
    bool low_open, high_open;
} s_bounds_t;

static void
s_bounds_add (const json_t *spec, s_bounds_t *bounds)
{
    const json_t *v;
    if ((v = json_object_get (spec, "min")))
        bounds->low = v, bounds->low_open = false;
    if ((v = json_object_get (spec, "above")))
        bounds->low = v, bounds->low_open = true;
    if ((v = json_object_get (spec, "max")))
        bounds->high = v, bounds->high_open = false;
    if ((v = json_object_get (spec, "below")))
        bounds->high = v, bounds->high_open = true;
}

//  Compare two JSON numbers: integers exactly, anything else as doubles.
static int
s_compare (const json_t *a, const json_t *b)
{
    if (json_is_integer (a) && json_is_integer (b)) {
        json_int_t x = json_integer_value (a), y = json_integer_value (b);
        return (x > y) - (x < y);
    }
    double x = json_number_value (a), y = json_number_value (b);
    return (x > y) - (x < y);
}

static bool
s_in_bounds (const json_t *value, const json_t *field, const json_t *spec)
{
    s_bounds_t bounds = { 0 };
    s_bounds_add (field, &bounds);
    s_bounds_add (spec, &bounds);
    if (bounds.low && s_compare (value, bounds.low) < (bounds.low_open ? 1 : 0))
        return false;
    if (bounds.high && s_compare (value, bounds.high) > (bounds.high_open ? -1 : 0))
        return false;
    return true;
}

//  A key's attribute, from the kind's bounds when they have it.
static const json_t *
s_attribute (const json_t *field, const json_t *spec, const char *name)
{
    const json_t *value = json_object_get (spec, name);
    return value ? value : json_object_get (field, name);
}

//  A count (items of an array, bytes of a string) against the least and
//  most the key and its kind allow.
static bool
s_count_in (size_t n, const json_t *field, const json_t *spec, const char *least,
            const char *most)
{
    const json_t *low = s_attribute (field, spec, least);
    const json_t *high = s_attribute (field, spec, most);
    return (!low || (json_int_t) n >= json_integer_value (low))
        && (!high || (json_int_t) n <= json_integer_value (high));
}

//  A number as text: integers exactly, doubles with the fewest digits
//  that read back to the same value.
static void
s_number_text (const json_t *number, char *buf, size_t size)
{
    if (json_is_integer (number)) {
        snprintf (buf, size, "%lld", (long long) json_integer_value (number));
        return;
    }
    double value = json_number_value (number);
    for (int digits = 15; digits <= 17; digits++) {
        snprintf (buf, size, "%.*g", digits, value);
        if (strtod (buf, NULL) == value)
            return;
    }
}

//  What a message quotes of a value: JSON text, cut short when long.
static void
s_quote (const json_t *value, char *buf, size_t size)
{
    if (json_is_real (value)) {
        s_number_text (value, buf, size);
        return;
    }
    char *text = json_dumps (value, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!text) {
        snprintf (buf, size, "(a value)");
        return;
    }
    if (strlen (text) < size)
        snprintf (buf, size, "%s", text);
    else
        snprintf (buf, size, "%.*s...", (int) size - 4, text);
    free (text);
}

//  The range of bounds as text (" in 1 .. 65536", " > 0", " in [0, 1)").
static void
s_range_text (const s_bounds_t *b, bool integer, char *buf, size_t size)
{
    char low [32], high [32];
    if (b->low)
        s_number_text (b->low, low, sizeof low);
    if (b->high)
        s_number_text (b->high, high, sizeof high);
    if (b->low && b->high && integer && !b->low_open && !b->high_open)
        snprintf (buf, size, " in %s .. %s", low, high);
    else
    if (b->low && b->high)
        snprintf (buf, size, " in %c%s, %s%c", b->low_open ? '(' : '[', low, high,
                  b->high_open ? ')' : ']');
    else
    if (b->low)
        snprintf (buf, size, " %s %s", b->low_open ? ">" : ">=", low);
    else
    if (b->high)
        snprintf (buf, size, " %s %s", b->high_open ? "<" : "<=", high);
    else
        buf [0] = 0;
}

//  What a key expects, in words, from its schema entry and the kind's.
static void
s_describe (const json_t *field, const json_t *spec, const char *kind, char *buf, size_t size)
{
    const char *type = json_string_value (json_object_get (field, "type"));
    s_bounds_t bounds = { 0 };
    s_bounds_add (field, &bounds);
    s_bounds_add (spec, &bounds);
    char range [96];
    s_range_text (&bounds, strcmp (type, "int") == 0, range, sizeof range);
    if (strcmp (type, "int") == 0)
        snprintf (buf, size, "an integer%s", range);
    else
    if (strcmp (type, "number") == 0)
        snprintf (buf, size, "a number%s", range);
    else
    if (strcmp (type, "bool") == 0)
        snprintf (buf, size, "true or false");
    else
    if (strcmp (type, "str") == 0) {
        const json_t *least = json_object_get (field, "min_length");
        const json_t *most = json_object_get (field, "max_length");
        snprintf (buf, size, "a %sstring", json_integer_value (least) > 0 ? "non-empty " : "");
        if (most)
            snprintf (buf + strlen (buf), size - strlen (buf), " of at most %lld bytes",
                      (long long) json_integer_value (most));
    }
    else
    if (strcmp (type, "enum") == 0) {
        snprintf (buf, size, "one of ");
        size_t i;
        const json_t *value;
        json_array_foreach (json_object_get (field, "values"), i, value)
            snprintf (buf + strlen (buf), size - strlen (buf), "%s\"%s\"", i ? ", " : "",
                      json_string_value (value));
    }
    else
    if (strcmp (type, "array") == 0) {
        const json_t *items = json_object_get (field, "items");
        s_bounds_t item_bounds = { 0 };
        s_bounds_add (items, &item_bounds);
        bool integer = strcmp (json_string_value (json_object_get (items, "type")), "int") == 0;
        s_range_text (&item_bounds, integer, range, sizeof range);
        const json_t *least = s_attribute (field, spec, "min_items");
        const json_t *most = s_attribute (field, spec, "max_items");
        char count [48];
        if (json_integer_value (least) > 0 && most)
            snprintf (count, sizeof count, "%lld to %lld", (long long) json_integer_value (least),
                      (long long) json_integer_value (most));
        else
        if (most)
            snprintf (count, sizeof count, "at most %lld", (long long) json_integer_value (most));
        else
        if (json_integer_value (least) > 0)
            snprintf (count, sizeof count, "at least %lld",
                      (long long) json_integer_value (least));
        else
            snprintf (count, sizeof count, "any number of");
        snprintf (buf, size, "an array of %s %s%s", count, integer ? "integers" : "numbers",
                  range);
    }
    else
    if (strcmp (type, "object") == 0)
        snprintf (buf, size, "an object");
    else
        snprintf (buf, size, "a value of type \"%s\"", type);
    //  Name the kind when its bounds are the ones that were broken.
    static const char *const bound_keys [] = {
        "min", "max", "above", "below", "min_items", "max_items"
    };
    for (size_t i = 0; spec && i < sizeof bound_keys / sizeof bound_keys [0]; i++)
        if (json_object_get (spec, bound_keys [i])) {
            snprintf (buf + strlen (buf), size - strlen (buf), " for kind \"%s\"", kind);
            break;
        }
}

static int
s_expected (const char *path, const json_t *field, const json_t *spec, const char *kind,
            const json_t *value, ps_error_t *err)
{
    char expected [256], got [S_QUOTE_MAX];
    s_describe (field, spec, kind, expected, sizeof expected);
    s_quote (value, got, sizeof got);
    return ps_error_set (err, PS_EINVAL, "key \"%s\": expected %s, got %s", path, expected, got);
}

static int s_check_value (const json_t *value, const json_t *field, const json_t *spec,
                          const char *kind, const char *path, ps_error_t *err);

static int
s_check_array (const json_t *value, const json_t *field, const json_t *spec, const char *kind,
               const char *path, ps_error_t *err)
{
    if (!json_is_array (value)
    ||  !s_count_in (json_array_size (value), field, spec, "min_items", "max_items"))
        return s_expected (path, field, spec, kind, value, err);
    const json_t *items = json_object_get (field, "items");
    bool increasing = json_is_true (json_object_get (field, "increasing"));
    size_t i;
    const json_t *item;
    json_array_foreach (value, i, item) {
        char item_path [S_PATH_MAX];
        snprintf (item_path, sizeof item_path, "%s[%zu]", path, i);
        int rc = s_check_value (item, items, NULL, NULL, item_path, err);
        if (rc)
            return rc;
        const json_t *before = i > 0 ? json_array_get (value, i - 1) : NULL;
        if (increasing && before && s_compare (item, before) <= 0) {
            char low [32], got [S_QUOTE_MAX];
            s_number_text (before, low, sizeof low);
            s_quote (item, got, sizeof got);
            return ps_error_set (err, PS_EINVAL, "key \"%s\": expected a number > %s (each "
                                 "item above the one before), got %s", item_path, low, got);
        }
    }
    return 0;
}

//  Check that value has the type the key describes and lies in its range;
//  spec holds the bounds of the enclosing object's kind (kind) or is NULL.
static int
s_check_value (const json_t *value, const json_t *field, const json_t *spec, const char *kind,
               const char *path, ps_error_t *err)
{
    const char *type = json_string_value (json_object_get (field, "type"));
    bool ok;
    if (strcmp (type, "int") == 0)
        ok = json_is_integer (value) && s_in_bounds (value, field, spec);
    else
    if (strcmp (type, "number") == 0)
        ok = json_is_number (value) && s_in_bounds (value, field, spec);
    else
    if (strcmp (type, "bool") == 0)
        ok = json_is_boolean (value);
    else
    if (strcmp (type, "str") == 0)
        //  A NUL inside would cut the text short in its char array.
        ok = json_is_string (value)
          && strlen (json_string_value (value)) == json_string_length (value)
          && s_count_in (json_string_length (value), field, spec, "min_length", "max_length");
    else
    if (strcmp (type, "enum") == 0) {
        ok = false;
        size_t i;
        const json_t *name;
        if (json_is_string (value))
            json_array_foreach (json_object_get (field, "values"), i, name)
                ok = ok || strcmp (json_string_value (name), json_string_value (value)) == 0;
    }
    else
    if (strcmp (type, "array") == 0)
        return s_check_array (value, field, spec, kind, path, err);
    else
        ok = strcmp (type, "object") == 0 && json_is_object (value);
    return ok ? 0 : s_expected (path, field, spec, kind, value, err);
}

//  The kind-specific bounds of key field in the object at prefix, from the
//  kind job holds there: *spec is NULL when the key has none, or when that
//  kind does not read the key.
static void
s_kind_spec (const ps_job_t *job, const json_t *field, const char *prefix,
             const json_t **spec, const char **kind)
{
    *spec = NULL;
    *kind = NULL;
    const json_t *kinds = json_object_get (field, "kinds");
    if (!kinds || !prefix)
        return;
    char path [S_PATH_MAX];
    s_join (path, prefix, "kind");
    int index = s_key_index (path);
    if (index < 0)
        return;
    *kind = s_name_of (job, index);
    *spec = json_object_get (kinds, *kind);
}

static int
s_unknown_key (const char *path, const json_t *fields, ps_error_t *err)
{
    char list [320] = "";
    const char *key;
    const json_t *field;
    json_object_foreach ((json_t *) fields, key, field) {
        size_t used = strlen (list);
        snprintf (list + used, sizeof list - used, "%s%s", used ? ", " : "", key);
    }
    return ps_error_set (err, PS_EINVAL, "unknown key \"%s\" (expected one of %s)", path, list);
}

//  A number too large to read (ps_json.h) in the job's text, reported as
//  s_check_value reports a value out of range: by its key, with what the
//  key expects (an integer key's range being at most 64 bits) and the
//  number as written; a key the schema lacks is unknown, as it would have
//  been. Returns PS_EINVAL, or the schema's error.
static int
s_too_large (const ps_json_overflow_t *big, ps_error_t *err)
{
    if (!big->path [0])
        return ps_error_set (err, PS_EINVAL, "expected a JSON object (the job), got %s",
                             big->literal);
    json_t *schema;
    int rc = s_schema_load (&schema, err);
    if (rc)
        return rc;
    //  Down the path's keys to the field; an array index means its items.
    const json_t *fields = json_object_get (schema, "job");
    const json_t *field = NULL;
    char path [sizeof big->path];
    size_t at = 0;
    //  Set when the text goes deeper than the schema does at field (an
    //  object or array where it has a number or a string): the value has
    //  the wrong shape, whatever the number inside it.
    bool shape = false;
    while (rc == 0) {
        size_t n = strcspn (big->path + at, ".[");
        char key [sizeof big->path];
        snprintf (key, sizeof key, "%.*s", (int) n, big->path + at);
        snprintf (path, sizeof path, "%.*s", (int) (at + n), big->path);
        field = json_object_get (fields, key);
        char next = big->path [at + n];
        if (!field)
            rc = s_unknown_key (path, fields, err);
        else
        if (next == '.') {
            const json_t *sub = json_object_get (field, "fields");
            if (!sub) {
                shape = true;
                break;
            }
            fields = sub;
            at += n + 1;
        }
        else {
            const json_t *items = next == '[' ? json_object_get (field, "items") : field;
            if (!items)
                shape = true;
            else
                field = items;
            break;
        }
    }
    if (rc == 0 && shape) {
        char expected [256];
        s_describe (field, NULL, NULL, expected, sizeof expected);
        rc = ps_error_set (err, PS_EINVAL, "key \"%s\": expected %s, got %s holding %s", path,
                           expected, big->path [strlen (path)] == '[' ? "an array" : "an object",
                           big->literal);
    }
    else
    if (rc == 0) {
        //  An integer key's range ends where 64 bits do, whether or not
        //  the schema says so.
        json_t *bounded = json_copy ((json_t *) field);
        if (!bounded)
            abort ();
        const char *type = json_string_value (json_object_get (field, "type"));
        if (type && strcmp (type, "int") == 0) {
            if (!json_object_get (field, "min"))
                json_object_set_new (bounded, "min", json_integer (INT64_MIN));
            if (!json_object_get (field, "max"))
                json_object_set_new (bounded, "max", json_integer (INT64_MAX));
        }
        char expected [256];
        s_describe (bounded, NULL, NULL, expected, sizeof expected);
        json_decref (bounded);
        rc = ps_error_set (err, PS_EINVAL, "key \"%s\": expected %s, got %s", big->path,
                           expected, big->literal);
    }
    json_decref (schema);
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
    char *p = (char *) job + s_keys [index].offset;
    ps_lr_schedule_t *schedule = &job->lr_schedule;
    size_t i;
    const json_t *item;
    int rc = 0;
    switch (s_keys [index].store) {
        case S_INT:
            *(int *) p = (int) json_integer_value (value);
            break;
        case S_INT64:
            *(int64_t *) p = (int64_t) json_integer_value (value);
            break;
        case S_UINT64:
            *(uint64_t *) p = (uint64_t) json_integer_value (value);
            break;
        case S_DOUBLE:
            *(double *) p = json_number_value (value);
            break;
        case S_BOOL:
            *(bool *) p = json_is_true (value);
            break;
        case S_TEXT:
            snprintf (p, s_keys [index].size, "%s", json_string_value (value));
            break;
        case S_OPT_KIND: {
            ps_opt_kind_t kind;
            rc = ps_opt_kind_parse (json_string_value (value), &kind, err);
            //  Another optimizer starts from its own defaults, so that a
            //  file naming only "kind" gets that optimizer as Keras makes
            //  it; the keys given beside "kind" are applied after this.
            if (rc == 0 && kind != job->optimizer.kind)
                ps_opt_config_default (&job->optimizer, kind);
            break;
        }
        case S_LR_KIND:
        case S_PART_KIND:
        case S_MODE:
            rc = s_parse_name (s_keys [index].store, json_string_value (value), p, err);
            break;
        case S_BOUNDARIES:
            schedule->nboundaries = (int) json_array_size (value);
            json_array_foreach (value, i, item)
                schedule->boundaries [i] = json_number_value (item);
            self->boundaries_given = true;
            break;
        case S_VALUES:
            memset (schedule->values, 0, sizeof schedule->values);
            json_array_foreach (value, i, item)
                schedule->values [i] = json_number_value (item);
            self->nvalues = (int) json_array_size (value);
            break;
    }
    return rc;
}

static int s_overlay_object (s_overlay_t *self, const json_t *obj, const json_t *fields,
                             const char *prefix, ps_error_t *err);

static int
s_overlay_key (s_overlay_t *self, const char *key, const json_t *value, const json_t *fields,
               const char *prefix, ps_error_t *err)
{
    char path [S_PATH_MAX];
    s_join (path, prefix, key);
    const json_t *field = json_object_get (fields, key);
    if (!field)
        return s_unknown_key (path, fields, err);
    const json_t *spec;
    const char *kind;
    s_kind_spec (&self->job, field, prefix, &spec, &kind);
    int rc = s_check_value (value, field, spec, kind, path, err);
    if (rc)
        return rc;
    if (json_is_object (value))
        return s_overlay_object (self, value, json_object_get (field, "fields"), path, err);
    return s_store (self, s_key_index (path), value, err);
}

static int
s_overlay_object (s_overlay_t *self, const json_t *obj, const json_t *fields,
                  const char *prefix, ps_error_t *err)
{
    //  The kind comes first: it decides the bounds of the other keys, and a
    //  new optimizer kind resets the keys given beside it.
    const json_t *kind = json_object_get (fields, "kind") ? json_object_get (obj, "kind") : NULL;
    int rc = kind ? s_overlay_key (self, "kind", kind, fields, prefix, err) : 0;
    const char *key;
    const json_t *value;
    json_object_foreach ((json_t *) obj, key, value)
        if (rc == 0 && !(kind && strcmp (key, "kind") == 0))
            rc = s_overlay_key (self, key, value, fields, prefix, err);
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
        return ps_error_set (err, PS_EINVAL, "key \"lr_schedule.values\": expected no values "
                             "(lr_schedule.boundaries is empty), got %d%s", have, origin);
    return ps_error_set (err, PS_EINVAL, "key \"lr_schedule.values\": expected %d values (one "
                         "more than the %d of lr_schedule.boundaries), got %d%s", want,
                         nboundaries, have, origin);
}

//  ---------------------------------------------------------------------
//  Checking a whole job

//  The job as JSON, following the schema's keys (those under fields, at
//  prefix); NULL as s_get.
static json_t *
s_to_json (const ps_job_t *job, const json_t *fields, const char *prefix)
{
    json_t *obj = json_object ();
    const char *key;
    const json_t *field;
    json_object_foreach ((json_t *) fields, key, field) {
        if (!obj)
            break;
        char path [S_PATH_MAX];
        s_join (path, prefix, key);
        json_t *value;
        if (strcmp (json_string_value (json_object_get (field, "type")), "object") == 0)
            value = s_to_json (job, json_object_get (field, "fields"), path);
        else
            value = s_get (job, s_key_index (path));
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
    for (int i = 0; i < S_KEY_COUNT; i++) {
        const char *p = (const char *) job + s_keys [i].offset;
        const char *path = s_keys [i].path;
        s_store_t store = s_keys [i].store;
        if (store == S_UINT64 && *(const uint64_t *) p > INT64_MAX)
            return ps_error_set (err, PS_EINVAL, "key \"%s\": expected an integer in 0 .. %lld, "
                                 "got %llu", path, (long long) INT64_MAX,
                                 (unsigned long long) *(const uint64_t *) p);
        if (store == S_DOUBLE && !isfinite (*(const double *) p))
            return ps_error_set (err, PS_EINVAL, "key \"%s\": expected a finite number, got %g",
                                 path, *(const double *) p);
        if (store == S_TEXT && strnlen (p, s_keys [i].size) == s_keys [i].size)
            return ps_error_set (err, PS_EINVAL, "key \"%s\": expected a string of at most %zu "
                                 "bytes, got one without its terminating NUL", path,
                                 s_keys [i].size - 1);
        if (store == S_TEXT) {
            json_t *text = json_string (p);
            json_decref (text);
            if (!text)
                return ps_error_set (err, PS_EINVAL, "key \"%s\": expected UTF-8 text", path);
        }
    }
    int n = schedule->nboundaries;
    if (n < 0 || n > PS_JOB_MAX_BOUNDARIES)
        return ps_error_set (err, PS_EINVAL, "key \"lr_schedule.boundaries\": expected at most "
                             "%d boundaries, got %d", PS_JOB_MAX_BOUNDARIES, n);
    for (int i = 0; i < n + (n > 0); i++) {
        if (i < n && !isfinite (schedule->boundaries [i]))
            return ps_error_set (err, PS_EINVAL, "key \"lr_schedule.boundaries[%d]\": expected "
                                 "a finite number, got %g", i, schedule->boundaries [i]);
        if (!isfinite (schedule->values [i]))
            return ps_error_set (err, PS_EINVAL, "key \"lr_schedule.values[%d]\": expected a "
                                 "finite number, got %g", i, schedule->values [i]);
    }
    return 0;
}

//  Check every key of obj (the whole job as JSON) against the schema.
static int
s_check_tree (const ps_job_t *job, const json_t *obj, const json_t *fields, const char *prefix,
              ps_error_t *err)
{
    const char *key;
    const json_t *field;
    json_object_foreach ((json_t *) fields, key, field) {
        char path [S_PATH_MAX];
        s_join (path, prefix, key);
        const json_t *value = json_object_get (obj, key);
        const json_t *spec;
        const char *kind;
        s_kind_spec (job, field, prefix, &spec, &kind);
        int rc = s_check_value (value, field, spec, kind, path, err);
        if (rc == 0 && json_is_object (value))
            rc = s_check_tree (job, value, json_object_get (field, "fields"), path, err);
        if (rc)
            return rc;
    }
    return 0;
}

//  Check the job against the schema and the owners' checks, and with
//  between_keys the rules between keys that command-line flags also set.
static int
s_validate (const ps_job_t *job, const json_t *schema, bool between_keys, ps_error_t *err)
{
    int rc = s_check_representable (job, err);
    if (rc)
        return rc;
    const json_t *fields = json_object_get (schema, "job");
    json_t *obj = s_to_json (job, fields, NULL);
    if (!obj)
        return ps_error_set (err, PS_ETOOBIG, "out of memory turning the job into JSON");
    rc = s_check_tree (job, obj, fields, NULL, err);
    json_decref (obj);
    if (rc)
        return rc;
    //  The owners' own checks, which the schema repeats where it can.
    if ((rc = ps_opt_config_validate (&job->optimizer, err)))
        return ps_error_prefix (err, rc, "key \"optimizer\"");
    if ((rc = ps_partitioner_validate (&job->partitioner, err)))
        return ps_error_prefix (err, rc, "key \"partitioner\"");

    //  The rules between keys.
    if (!between_keys)
        return 0;
    if (job->checkpoint_dir [0] == 0 && job->checkpoint_steps > 0)
        return ps_error_set (err, PS_EINVAL, "key \"checkpoint.every_steps\": expected 0 while "
                             "checkpoint.dir is empty (no checkpoints), got %llu",
                             (unsigned long long) job->checkpoint_steps);
    if (job->checkpoint_dir [0] == 0 && job->checkpoint_seconds > 0)
        return ps_error_set (err, PS_EINVAL, "key \"checkpoint.every_seconds\": expected 0 "
                             "while checkpoint.dir is empty (no checkpoints), got %g",
                             job->checkpoint_seconds);
    if (job->heartbeat_timeout_ms <= job->heartbeat_ms)
        return ps_error_set (err, PS_EINVAL, "key \"heartbeat.timeout_ms\": expected more than "
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
    job->mode = PS_MODE_ASYNC;
    job->checkpoint_keep = 3;
    job->seed = 1;
    snprintf (job->data_dir, sizeof job->data_dir, "%s", PS_DATASET_DEFAULT_DIR);
    ps_partitioner_default (&job->partitioner, nservers);
    job->eval_epochs = 1;
    job->heartbeat_ms = 500;
    job->heartbeat_timeout_ms = 3000;
    job->register_timeout_ms = 60000;
    job->worker_threads = 1;
    snprintf (job->device, sizeof job->device, "cpu");
    job->log_seconds = 5.0;
    job->nonfinite_retries = 2;
}

int
ps_job_load_json (ps_job_t *job, const json_t *obj, const char *source, ps_error_t *err)
{
    assert (job);
    assert (source);
    json_t *schema;
    int rc = s_schema_load (&schema, err);
    if (rc)
        return ps_error_prefix (err, rc, "%s", source);
    //  Everything happens on a copy, which replaces the job only when the
    //  whole of it checks out.
    s_overlay_t overlay = { .job = *job, .nvalues = -1 };
    if (!json_is_object (obj)) {
        char got [S_QUOTE_MAX];
        if (obj)
            s_quote (obj, got, sizeof got);
        rc = ps_error_set (err, PS_EINVAL, "expected a JSON object (the job), got %s",
                           obj ? got : "nothing");
    }
    if (rc == 0)
        rc = s_overlay_object (&overlay, obj, json_object_get (schema, "job"), NULL, err);
    if (rc == 0)
        rc = s_check_lengths (&overlay, job, err);
    //  A file may leave the checkpoint directory or the heartbeat timeout
    //  to the command line (or the coordinator's local-cluster defaults),
    //  so the rules between those keys wait for ps_job_validate.
    if (rc == 0)
        rc = s_validate (&overlay.job, schema, false, err);
    json_decref (schema);
    if (rc)
        return ps_error_prefix (err, rc, "%s", source);
    *job = overlay.job;
    return 0;
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
    json_t *schema;
    int rc = s_schema_load (&schema, err);
    if (rc)
        return rc;
    rc = s_validate (job, schema, true, err);
    json_decref (schema);
    return rc;
}

json_t *
ps_job_to_json (const ps_job_t *job)
{
    assert (job);
    json_t *schema;
    if (s_schema_load (&schema, NULL))
        return NULL;
    json_t *obj = s_to_json (job, json_object_get (schema, "job"), NULL);
    json_decref (schema);
    return obj;
}

int
ps_lr_kind_parse (const char *name, ps_lr_kind_t *kind, ps_error_t *err)
{
    for (int i = 0; i < 3; i++)
        if (strcmp (name, s_lr_kind_names [i]) == 0) {
            *kind = (ps_lr_kind_t) i;
            return 0;
        }
    return ps_error_set (err, PS_EINVAL, "unknown learning-rate schedule \"%s\", expected "
                         "constant, piecewise or cosine", name);
}

int
ps_mode_parse (const char *name, ps_mode_t *mode, ps_error_t *err)
{
    for (int i = 0; i < 2; i++)
        if (strcmp (name, s_mode_names [i]) == 0) {
            *mode = (ps_mode_t) i;
            return 0;
        }
    return ps_error_set (err, PS_EINVAL, "unknown mode \"%s\", expected async or mirrored", name);
}

const char *
ps_mode_name (ps_mode_t mode)
{
    return (unsigned) mode < 2 ? s_mode_names [mode] : "unknown";
}

double
ps_lr_at (const ps_lr_schedule_t *schedule, double base_lr, uint64_t step,
          uint64_t steps_per_epoch, uint64_t total_steps)
{
    assert (schedule);
    //  Step ids start at 1; a 0 is taken for the first step.
    uint64_t s = step > 0 ? step : 1;
    uint64_t w = schedule->warmup_steps;
    int n = schedule->nboundaries;
    n = n < 0 ? 0 : n > PS_JOB_MAX_BOUNDARIES ? PS_JOB_MAX_BOUNDARIES : n;
    if (w > 0 && s <= w) {
        double first = schedule->kind == PS_LR_PIECEWISE ? schedule->values [0] : base_lr;
        return first * (double) s / (double) w;
    }
    if (schedule->kind == PS_LR_PIECEWISE) {
        //  Boundaries are in epochs, so a fractional one falls between
        //  epochs; Keras compares the 0-based step, s - 1.
        double position = (double) (s - 1);
        for (int i = 0; i < n; i++)
            if (position < schedule->boundaries [i] * (double) steps_per_epoch)
                return schedule->values [i];
        return schedule->values [n];
    }
    if (schedule->kind == PS_LR_COSINE) {
        uint64_t d = schedule->decay_steps > 0 ? schedule->decay_steps : total_steps;
        //  The decay spans the steps after the warm-up, at least one so
        //  that a run no longer than its warm-up does not divide by 0.
        double span = d > w ? (double) (d - w) : 0.0;
        span = fmax (1.0, span);
        double p = fmin ((double) (s - 1 - w), span) / span;
        double alpha = schedule->alpha;
        return base_lr * ((1.0 - alpha) * 0.5 * (1.0 + cos (M_PI * p)) + alpha);
    }
    return base_lr;
}
