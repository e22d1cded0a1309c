//  The job tests' fixture (test_job, test_job_errors, test_jobflags): a
//  temporary directory per case into which a case writes job files and
//  loads them, failing the case with the loader's message when a file it
//  expects to load is refused, and the JSON files of the source tree (the
//  schema, the example job) that the cases compare jobs with. It lives in
//  its own library because it links the coordinator's job module, which
//  the other tests do not need.

#ifndef PS_HARNESS_JOB_H_INCLUDED
#define PS_HARNESS_JOB_H_INCLUDED

#include <stddef.h>

#include <jansson.h>

#include "harness_case.h"
#include "ps_job.h"

//  The fixture of harness_job_setup: the case's directory, and the last
//  file written into it.
typedef struct {
    char dir [HARNESS_DIR_SIZE];
    char path [128];
} harness_job_fixture_t;

//  A cmocka setup giving the case a fresh directory and the fixture above;
//  harness_dir_teardown removes both.
int harness_job_setup (void **state);

//  Write text to dir/name and return its path, fx->path. Fails the case
//  when the file cannot be written.
const char *harness_job_write (harness_job_fixture_t *fx, const char *name, const char *text);

//  Load the job file at path over job. Fails the case, with the loader's
//  message, when it is refused.
void harness_job_load (ps_job_t *job, const char *path);

//  $PS_SOURCE_ROOT/rel parsed, its path in path. Without the variable the
//  test was not started as meson starts it, which is a broken set-up, not
//  a reason to leave the file unchecked, so the case fails, saying so.
json_t *harness_job_source_json (const char *rel, char *path, size_t size);

#endif
