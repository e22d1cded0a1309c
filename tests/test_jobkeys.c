//  Unit tests for the job's key table (coordinator/ps_jobkeys.c), which
//  test_job and test_job_errors reach only through ps_job.c: each key found
//  by its JSON pointer at a field inside ps_job_t; the schema in the source
//  tree accepted by the check made at every load, and a schema that
//  differs from the table (a key missing, a key the table lacks, a type
//  or an enum value the field cannot hold, no properties at all) refused
//  with a message naming the key; the names of enumerated values both
//  ways; and each key's value as JSON, with none for what JSON cannot
//  hold. The schema comes from $PS_SOURCE_ROOT, which meson sets.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness_job.h"
#include "ps_jobkeys.h"

static void
test_table (void **state)
{
    (void) state;
    assert_true (ps_jobkeys_count > 40);
    for (int i = 0; i < ps_jobkeys_count; i++) {
        const ps_jobkey_t *key = &ps_jobkeys [i];
        assert_true (strlen (key->path) < PS_JOBKEY_PATH_MAX);
        if (ps_jobkeys_index (key->path) != i)
            fail_msg ("%s is not found at its own index %d", key->path, i);
        if (key->size == 0 || key->offset + key->size > sizeof (ps_job_t))
            fail_msg ("%s: field at %zu of %zu bytes lies outside ps_job_t", key->path,
                      key->offset, key->size);
    }
    assert_int_equal (ps_jobkeys_index ("/frob"), -1);
    assert_int_equal (ps_jobkeys_index ("/optimizer"), -1);
    assert_int_equal (ps_jobkeys_index ("optimizer/lr"), -1);
    assert_int_equal (ps_jobkeys_index (""), -1);

    char path [PS_JOBKEY_PATH_MAX];
    ps_jobkeys_join (path, "", "model");
    assert_string_equal (path, "/model");
    ps_jobkeys_join (path, "/optimizer", "lr");
    assert_string_equal (path, "/optimizer/lr");
    assert_true (ps_jobkeys_index (path) >= 0);
}

//  check_schema refuses the changed schema root with a message holding
//  fragment.
static void
s_assert_schema_refused (const json_t *root, const char *fragment)
{
    ps_error_t err = { 0 };
    assert_int_equal (ps_jobkeys_check_schema (root, &err), PS_EINVAL);
    assert_int_equal (err.code, PS_EINVAL);
    if (!strstr (err.msg, PS_JOB_SCHEMA_NAME) || !strstr (err.msg, fragment))
        fail_msg ("message \"%s\" lacks \"%s\"", err.msg, fragment);
}

static void
test_schema (void **state)
{
    (void) state;
    char path [512];
    json_t *schema = harness_job_source_json ("schemas/job.schema.json", path, sizeof path);
    ps_error_t err = { 0 };
    if (ps_jobkeys_check_schema (schema, &err))
        fail_msg ("%s does not agree with the key table: %s", path, err.msg);
    json_t *properties = json_object_get (schema, "properties");
    assert_true (ps_jobkeys_is_object (json_object_get (properties, "optimizer")));
    assert_false (ps_jobkeys_is_object (json_object_get (properties, "epochs")));

    //  A key missing from the schema.
    json_t *copy = json_deep_copy (schema);
    assert_int_equal (json_object_del (json_object_get (copy, "properties"), "epochs"), 0);
    char expect [96];
    snprintf (expect, sizeof expect, "%d keys, but ps_job_t has %d", ps_jobkeys_count - 1,
              ps_jobkeys_count);
    s_assert_schema_refused (copy, expect);
    json_decref (copy);

    //  A key the table does not have, at the top and inside an object.
    copy = json_deep_copy (schema);
    assert_int_equal (json_object_set_new (json_object_get (copy, "properties"), "frob",
                                           json_pack ("{s:s}", "type", "integer")), 0);
    s_assert_schema_refused (copy, "key /frob has no field in ps_job_t");
    json_decref (copy);
    copy = json_deep_copy (schema);
    json_t *optimizer = json_object_get (json_object_get (copy, "properties"), "optimizer");
    assert_int_equal (json_object_set_new (json_object_get (optimizer, "properties"), "rho",
                                           json_pack ("{s:s}", "type", "number")), 0);
    s_assert_schema_refused (copy, "key /optimizer/rho has no field");
    json_decref (copy);

    //  A type the field cannot hold, and bounds past an int's.
    copy = json_deep_copy (schema);
    json_t *epochs = json_object_get (json_object_get (copy, "properties"), "epochs");
    assert_int_equal (json_object_set_new (epochs, "type", json_string ("string")), 0);
    s_assert_schema_refused (copy, "key /epochs of type \"string\" does not suit");
    assert_int_equal (json_object_set_new (epochs, "type", json_string ("integer")), 0);
    assert_int_equal (json_object_set_new (epochs, "maximum", json_integer (INT64_MAX)), 0);
    s_assert_schema_refused (copy, "key /epochs of type \"integer\" does not suit");
    json_decref (copy);

    //  An enum value the code does not know.
    copy = json_deep_copy (schema);
    json_t *mode = json_object_get (json_object_get (copy, "properties"), "mode");
    assert_int_equal (json_array_append_new (json_object_get (mode, "enum"),
                                             json_string ("bsp")), 0);
    s_assert_schema_refused (copy, "key /mode of type \"enum\" does not suit");
    json_decref (copy);

    //  No properties at all.
    copy = json_pack ("{s:s}", "type", "object");
    s_assert_schema_refused (copy, "no \"properties\" object");
    json_decref (copy);
    json_decref (schema);
}

static void
test_names (void **state)
{
    (void) state;
    ps_job_t job;
    ps_job_default (&job, 2);
    int mode = ps_jobkeys_index ("/mode");
    int kind = ps_jobkeys_index ("/optimizer/kind");
    int device = ps_jobkeys_index ("/device");
    assert_string_equal (ps_jobkeys_name_of (&job, mode), "async");
    assert_string_equal (ps_jobkeys_name_of (&job, kind), "adam");
    assert_string_equal (ps_jobkeys_name_of (&job, device), "cpu");
    //  A key that holds no name, and a value no name belongs to.
    assert_string_equal (ps_jobkeys_name_of (&job, ps_jobkeys_index ("/epochs")), "unknown");
    job.mode = (ps_mode_t) 99;
    assert_string_equal (ps_jobkeys_name_of (&job, mode), "unknown");

    ps_mode_t parsed = PS_MODE_ASYNC;
    ps_error_t err = { 0 };
    assert_int_equal (ps_jobkeys_parse_name (PS_JOBKEY_MODE, "sync", &parsed, &err), 0);
    assert_int_equal (parsed, PS_MODE_SYNC);
    assert_int_equal (ps_jobkeys_parse_name (PS_JOBKEY_MODE, "bsp", &parsed, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "bsp"));
    assert_int_equal (parsed, PS_MODE_SYNC);
    ps_lr_kind_t lr_kind;
    assert_int_equal (ps_jobkeys_parse_name (PS_JOBKEY_LR_KIND, "cosine", &lr_kind, NULL), 0);
    assert_int_equal (lr_kind, PS_LR_COSINE);
    int number = 0;
    assert_int_equal (ps_jobkeys_parse_name (PS_JOBKEY_INT, "3", &number, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "\"3\" is no enumerated value"));
}

static void
test_values (void **state)
{
    (void) state;
    ps_job_t job;
    ps_job_default (&job, 2);
    for (int i = 0; i < ps_jobkeys_count; i++) {
        json_t *value = ps_jobkeys_get (&job, i);
        if (!value)
            fail_msg ("the default of %s has no JSON", ps_jobkeys [i].path);
        json_decref (value);
    }
    json_t *value = ps_jobkeys_get (&job, ps_jobkeys_index ("/epochs"));
    assert_int_equal (json_integer_value (value), job.epochs);
    json_decref (value);
    //  Without boundaries there are no values either.
    value = ps_jobkeys_get (&job, ps_jobkeys_index ("/lr_schedule/values"));
    assert_int_equal (json_array_size (value), 0);
    json_decref (value);
    job.lr_schedule.nboundaries = 2;
    value = ps_jobkeys_get (&job, ps_jobkeys_index ("/lr_schedule/values"));
    assert_int_equal (json_array_size (value), 3);
    json_decref (value);

    //  What JSON cannot hold gives nothing.
    job.lr_schedule.nboundaries = PS_JOB_MAX_BOUNDARIES + 1;
    assert_null (ps_jobkeys_get (&job, ps_jobkeys_index ("/lr_schedule/boundaries")));
    job.optimizer.lr = NAN;
    assert_null (ps_jobkeys_get (&job, ps_jobkeys_index ("/optimizer/lr")));
    job.seed = (uint64_t) INT64_MAX + 1;
    assert_null (ps_jobkeys_get (&job, ps_jobkeys_index ("/seed")));
    memset (job.model, 'x', sizeof job.model);
    assert_null (ps_jobkeys_get (&job, ps_jobkeys_index ("/model")));
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_table),
        cmocka_unit_test (test_schema),
        cmocka_unit_test (test_names),
        cmocka_unit_test (test_values),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
