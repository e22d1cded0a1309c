//  Fuzz target: the job file parser (coordinator/ps_job). The input is the
//  content of a job file, written to the scratch directory and loaded with
//  ps_job_load_file over the defaults for two servers, as the coordinator
//  loads --job FILE. A job that loads is validated, and a valid one is
//  written as JSON, as a checkpoint manifest records it, and read back.
//
//  Oracles, beyond the sanitizers: a refusal leaves the job as it was and
//  names the file; a valid job has a JSON form (ps_job_to_json is NULL
//  only for what ps_job_validate refuses), and that form reads back into a
//  job with the same JSON form.

#include "fuzz_scratch.h"
#include "ps_job.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
s_fail (const char *what, const char *detail)
{
    fprintf (stderr, "fuzz_job: %s: %s\n", what, detail);
    abort ();
}

//  The learning rate of a few steps of a run of the job's length.
static void
s_schedule (const ps_job_t *job)
{
    uint64_t per_epoch = 100;
    uint64_t total = job->steps ? job->steps : per_epoch * (uint64_t) job->epochs;
    volatile double sum = 0;
    uint64_t steps [] = { 1, 2, per_epoch, total / 2 + 1, total, total + 1 };
    for (size_t i = 0; i < sizeof steps / sizeof steps [0]; i++)
        sum += ps_lr_at (&job->lr_schedule, job->optimizer.lr, steps [i], per_epoch, total);
    (void) sum;
}

static void
s_round_trip (const ps_job_t *job)
{
    json_t *json = ps_job_to_json (job);
    if (!json)
        s_fail ("a valid job has no JSON form", job->model);
    ps_job_t again;
    ps_job_default (&again, 2);
    ps_error_t err;
    if (ps_job_load_json (&again, json, "round trip", &err) != 0)
        s_fail ("a valid job's JSON form does not load", err.msg);
    json_t *json_again = ps_job_to_json (&again);
    if (!json_again || !json_equal (json, json_again)) {
        char *a = json_dumps (json, JSON_COMPACT | JSON_SORT_KEYS);
        char *b = json_again ? json_dumps (json_again, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        fprintf (stderr, "fuzz_job: written %s\nfuzz_job: read back %s\n", a, b ? b : "(none)");
        s_fail ("a valid job does not read back", "the same");
    }
    json_decref (json);
    json_decref (json_again);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char path [512];
    fuzz_scratch_write ("job.json", data, size, path, sizeof path);
    ps_job_t job, before;
    ps_job_default (&job, 2);
    //  Byte for byte, padding included, so that any write shows.
    memcpy (&before, &job, sizeof job);
    ps_error_t err = { 0 };
    if (ps_job_load_file (&job, path, &err) != 0) {
        if (memcmp (&job, &before, sizeof job) != 0)
            s_fail ("a refused file changed the job", err.msg);
        if (!strstr (err.msg, path))
            s_fail ("a refusal does not name the file", err.msg);
        return 0;
    }
    if (ps_job_validate (&job, &err) == 0) {
        s_schedule (&job);
        s_round_trip (&job);
    }
    return 0;
}
