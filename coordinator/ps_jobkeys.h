//  The job's keys: the table that ties each key of schemas/job.schema.json,
//  by its JSON pointer, to the field of ps_job_t that holds it and how it
//  is held there, with a key's value read as JSON, the names of its
//  enumerated values parsed, and the check, made each time the schema is
//  loaded, that the schema and the table agree key for key (so a key
//  added to one and not to the other fails every load). ps_job.c reads
//  and validates jobs through it; it is the job module's own, for no
//  other module.

#ifndef PS_JOBKEYS_H_INCLUDED
#define PS_JOBKEYS_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "ps_error.h"
#include "ps_job.h"

//  The schema's name in messages about the schema itself.
#define PS_JOB_SCHEMA_NAME  "schemas/job.schema.json (built in)"

//  How a key's value is held in ps_job_t.
typedef enum {
    PS_JOBKEY_INT,              //  int; the schema bounds it within int
    PS_JOBKEY_INT64,            //  int64_t
    PS_JOBKEY_UINT64,           //  uint64_t; JSON carries at most INT64_MAX
    PS_JOBKEY_DOUBLE,           //  double, finite
    PS_JOBKEY_BOOL,             //  bool
    PS_JOBKEY_TEXT,             //  char [size], NUL-terminated UTF-8
    PS_JOBKEY_OPT_KIND,         //  ps_opt_kind_t, by name
    PS_JOBKEY_LR_KIND,          //  ps_lr_kind_t, by name
    PS_JOBKEY_PART_KIND,        //  ps_partitioner_kind_t, by name
    PS_JOBKEY_MODE,             //  ps_mode_t, by name
    PS_JOBKEY_BOUNDARIES,       //  lr_schedule.boundaries [nboundaries]
    PS_JOBKEY_VALUES,           //  lr_schedule.values [nboundaries + 1], none when nboundaries is 0
} ps_jobkey_store_t;

//  One key: its pointer, how it is held, and where (offset and size of its
//  field in ps_job_t).
typedef struct {
    const char *path;
    ps_jobkey_store_t store;
    size_t offset;
    size_t size;
} ps_jobkey_t;

//  The table, ps_jobkeys_count keys.
extern const ps_jobkey_t ps_jobkeys [];
extern const int ps_jobkeys_count;

//  Key pointers are short ("/partitioner/min_shard_bytes", "/lr_schedule/values/16").
#define PS_JOBKEY_PATH_MAX  96

//  The index of the key at JSON pointer path, or -1.
int ps_jobkeys_index (const char *path);

//  The pointer of key in the object at prefix ("" at the top level), into
//  path of PS_JOBKEY_PATH_MAX bytes.
void ps_jobkeys_join (char *path, const char *prefix, const char *key);

//  The name of the enumerated value held by key `index` (a kind, the mode
//  or the device), or "unknown".
const char *ps_jobkeys_name_of (const ps_job_t *job, int index);

//  Parse the name of an enumerated value into *value for store. Returns 0
//  or PS_EINVAL naming the value.
int ps_jobkeys_parse_name (ps_jobkey_store_t store, const char *name, void *value,
                           ps_error_t *err);

//  The value of key `index` as JSON, or NULL when JSON cannot hold it (a
//  number that is not finite, an integer past INT64_MAX, text that is not
//  NUL-terminated UTF-8, a boundary count out of range; ps_job_validate
//  names those before converting) or memory ran out.
json_t *ps_jobkeys_get (const ps_job_t *job, int index);

//  Whether a key of the schema (its object there) is an object of keys of
//  its own.
bool ps_jobkeys_is_object (const json_t *field);

//  Check the schema (root, its top-level object) against the table: each
//  key has a field whose type and bounds suit it, each enum value is one
//  the code knows, and the two have the same keys. Returns 0 or
//  PS_EINVAL naming the key.
int ps_jobkeys_check_schema (const json_t *root, ps_error_t *err);

#endif
