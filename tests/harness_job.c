//  The job tests' fixture: see harness_job.h.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness_job.h"

int
harness_job_setup (void **state)
{
    return harness_dir_setup (state, sizeof (harness_job_fixture_t));
}

const char *
harness_job_write (harness_job_fixture_t *fx, const char *name, const char *text)
{
    snprintf (fx->path, sizeof fx->path, "%s/%s", fx->dir, name);
    FILE *file = fopen (fx->path, "w");
    assert_non_null (file);
    assert_int_equal (fputs (text, file) >= 0, 1);
    assert_int_equal (fclose (file), 0);
    return fx->path;
}

void
harness_job_load (ps_job_t *job, const char *path)
{
    ps_error_t err = { 0 };
    if (ps_job_load_file (job, path, &err))
        fail_msg ("loading %s failed: %s", path, err.msg);
}

json_t *
harness_job_source_json (const char *rel, char *path, size_t size)
{
    const char *root = getenv ("PS_SOURCE_ROOT");
    if (!root || !*root)
        fail_msg ("PS_SOURCE_ROOT is not set: it names the source tree, which holds %s; "
                  "meson test sets it (tests/meson.build)", rel);
    snprintf (path, size, "%s/%s", root, rel);
    json_error_t jerr;
    json_t *obj = json_load_file (path, JSON_REJECT_DUPLICATES, &jerr);
    if (!obj)
        fail_msg ("%s: line %d: %s", path, jerr.line, jerr.text);
    return obj;
}
