//  The JSON Schema validator (common/base/ps_jsonschema.h): the official
//  JSON Schema Test Suite for every keyword it supports, then what the
//  suite does not cover: prefixItems and $defs (2020-12 only; the Debian
//  package carries drafts 3 to 7), the refusal of unsupported keywords,
//  and the messages, which name the JSON pointer and what was expected.
//
//  The suite is Debian's json-schema-test-suite (deploy/install-deps.sh
//  installs it), read from $PS_JSON_SCHEMA_SUITE or
//  /usr/share/json-schema-test-suite/tests. Its newest draft there is 7,
//  whose keywords listed below mean what 2020-12's do; a group whose
//  schema uses a draft-7 form that 2020-12 dropped (items as an array,
//  definitions, additionalItems) is refused by the loader and counted
//  apart, and every file must run at least one group.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_jsonschema.h"

#define S_SUITE_DEFAULT "/usr/share/json-schema-test-suite/tests"

static const char *const s_keyword_files [] = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "items",
    "minItems", "maxItems", "minLength", "maxLength", "pattern", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "allOf", "anyOf", "oneOf", "not",
    "if-then-else", "boolean_schema", "ref", NULL
};

static void
test_official_suite (void **state)
{
    (void) state;
    const char *root = getenv ("PS_JSON_SCHEMA_SUITE");
    if (!root)
        root = S_SUITE_DEFAULT;
    int failures = 0;
    for (int f = 0; s_keyword_files [f]; f++) {
        char path [512];
        snprintf (path, sizeof path, "%s/draft7/%s.json", root, s_keyword_files [f]);
        json_error_t jerr;
        json_t *groups = json_load_file (path, 0, &jerr);
        if (!groups)
            fail_msg ("%s: %s (the JSON Schema Test Suite is Debian's package "
                      "json-schema-test-suite; deploy/install-deps.sh installs it)", path,
                      jerr.text);
        int ran = 0, refused = 0, cases = 0;
        size_t g;
        json_t *group;
        json_array_foreach (groups, g, group) {
            ps_error_t err = { 0 };
            ps_jsonschema_t *schema = ps_jsonschema_new (json_object_get (group, "schema"),
                                                         s_keyword_files [f], &err);
            if (!schema) {
                refused++;
                continue;
            }
            ran++;
            size_t t;
            json_t *test;
            json_array_foreach (json_object_get (group, "tests"), t, test) {
                bool want = json_is_true (json_object_get (test, "valid"));
                err = (ps_error_t) { 0 };
                int rc = ps_jsonschema_validate (schema, json_object_get (test, "data"), &err);
                cases++;
                if ((rc == 0) != want) {
                    printf ("MISMATCH %s: \"%s\" / \"%s\": expected %s, got %s %s\n",
                            s_keyword_files [f],
                            json_string_value (json_object_get (group, "description")),
                            json_string_value (json_object_get (test, "description")),
                            want ? "valid" : "invalid", rc == 0 ? "valid" : "invalid",
                            err.msg);
                    failures++;
                }
                //  A refusal always says where and why.
                if (rc != 0 && strncmp (err.msg, "at ", 3) != 0) {
                    printf ("MESSAGE %s: \"%s\" has no pointer\n", s_keyword_files [f], err.msg);
                    failures++;
                }
            }
            ps_jsonschema_destroy (&schema);
        }
        printf ("%-22s %2d groups run (%d cases), %d refused as not 2020-12\n",
                s_keyword_files [f], ran, cases, refused);
        if (ran == 0) {
            printf ("NONE RUN %s\n", s_keyword_files [f]);
            failures++;
        }
        json_decref (groups);
    }
    assert_int_equal (failures, 0);
}

//  Validate doc (JSON text) against schema (JSON text); returns the
//  validator's code and leaves its message in err.
static int
s_check (const char *schema_text, const char *doc_text, ps_error_t *err)
{
    ps_jsonschema_t *schema = ps_jsonschema_parse (schema_text, "test", err);
    if (!schema)
        fail_msg ("schema %s refused: %s", schema_text, err->msg);
    json_error_t jerr;
    json_t *doc = json_loads (doc_text, JSON_DECODE_ANY, &jerr);
    if (!doc)
        fail_msg ("%s: %s", doc_text, jerr.text);
    *err = (ps_error_t) { 0 };
    int rc = ps_jsonschema_validate (schema, doc, err);
    json_decref (doc);
    ps_jsonschema_destroy (&schema);
    return rc;
}

static void
s_assert_message (const char *schema, const char *doc, const char *message)
{
    ps_error_t err;
    int rc = s_check (schema, doc, &err);
    if (message == NULL && rc != 0)
        fail_msg ("%s against %s: %s", doc, schema, err.msg);
    if (message && (rc != PS_EINVAL || strcmp (err.msg, message) != 0))
        fail_msg ("%s against %s: got \"%s\", expected \"%s\"", doc, schema, err.msg, message);
}

static void
test_prefix_items_and_defs (void **state)
{
    (void) state;
    const char *pair = "{\"$defs\": {\"side\": {\"type\": \"integer\", \"minimum\": 1}},"
                       " \"type\": \"array\", \"prefixItems\": [{\"$ref\": \"#/$defs/side\"},"
                       " {\"$ref\": \"#/$defs/side\"}], \"items\": false}";
    s_assert_message (pair, "[2, 3]", NULL);
    s_assert_message (pair, "[2]", NULL);
    s_assert_message (pair, "[2, 0]", "at /1: expected an integer >= 1, got 0");
    s_assert_message (pair, "[2, 3, 4]", "at /2: no value is allowed here");
    s_assert_message (pair, "[2, 3.0]", NULL);
    //  A key with '/' and '~' is escaped in the pointer (RFC 6901).
    s_assert_message ("{\"properties\": {\"a/b~c\": {\"type\": \"string\"}}}",
                      "{\"a/b~c\": 1}", "at /a~1b~0c: expected a string, got 1");
    //  Recursion through "#".
    const char *tree = "{\"type\": \"object\", \"properties\": {\"kids\": {\"type\": \"array\","
                       " \"items\": {\"$ref\": \"#\"}}}, \"additionalProperties\": false}";
    s_assert_message (tree, "{\"kids\": [{\"kids\": []}, {}]}", NULL);
    s_assert_message (tree, "{\"kids\": [{\"kids\": [{\"x\": 1}]}]}",
                      "at /kids/0/kids/0/x: unknown key \"x\" (expected one of kids)");
}

static void
test_messages (void **state)
{
    (void) state;
    const char *job = "{\"type\": \"object\", \"additionalProperties\": false, \"properties\": {"
                      "\"lr\": {\"type\": \"number\", \"exclusiveMinimum\": 0},"
                      "\"n\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 65536},"
                      "\"m\": {\"type\": \"number\", \"minimum\": 0, \"exclusiveMaximum\": 1},"
                      "\"kind\": {\"enum\": [\"sgd\", \"adam\"]},"
                      "\"name\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 3},"
                      "\"size\": {\"anyOf\": [{\"type\": \"integer\", \"minimum\": 1},"
                      " {\"type\": \"array\", \"items\": {\"type\": \"integer\", \"minimum\": 1},"
                      " \"minItems\": 2, \"maxItems\": 2}]}},"
                      "\"required\": [\"n\"]}";
    s_assert_message (job, "{\"n\": 1, \"lr\": \"fast\"}",
                      "at /lr: expected a number > 0, got \"fast\"");
    s_assert_message (job, "{\"n\": 0}", "at /n: expected an integer in 1 .. 65536, got 0");
    s_assert_message (job, "{\"n\": 1.5}", "at /n: expected an integer in 1 .. 65536, got 1.5");
    s_assert_message (job, "{\"n\": 1, \"m\": 1}", "at /m: expected a number in [0, 1), got 1");
    s_assert_message (job, "{\"n\": 1, \"kind\": \"rmsprop\"}",
                      "at /kind: expected one of \"sgd\", \"adam\", got \"rmsprop\"");
    s_assert_message (job, "{\"n\": 1, \"name\": \"\"}",
                      "at /name: expected a non-empty string of at most 3 characters, got \"\"");
    //  Characters, not bytes: three two-byte letters fit.
    s_assert_message (job, "{\"n\": 1, \"name\": \"\\u00e9\\u00e9\\u00e9\"}", NULL);
    s_assert_message (job, "{}", "at the top level: missing required key \"n\"");
    s_assert_message (job, "[]", "at the top level: expected an object, got []");
    s_assert_message (job, "{\"n\": 1, \"lrate\": 1}",
                      "at /lrate: unknown key \"lrate\" (expected one of lr, n, m, kind, name, "
                      "size)");
    //  anyOf: the alternative that went deepest speaks; else all do.
    s_assert_message (job, "{\"n\": 1, \"size\": [3, 0]}",
                      "at /size/1: expected an integer >= 1, got 0");
    s_assert_message (job, "{\"n\": 1, \"size\": \"big\"}",
                      "at /size: expected an integer >= 1 or an array of 2 items, got \"big\"");
    //  64-bit bounds compare exactly against reals.
    s_assert_message ("{\"type\": \"integer\", \"maximum\": 9223372036854775807}",
                      "9223372036854775808.0",
                      "at the top level: expected an integer <= 9223372036854775807, "
                      "got 9.223372036854776e+18");
}

static void
test_refuses_unsupported (void **state)
{
    (void) state;
    const char *bad [][2] = {
        { "{\"multipleOf\": 2}", "keyword \"multipleOf\" is not supported" },
        { "{\"properties\": {\"a\": {\"format\": \"email\"}}}",
          "at /properties/a: keyword \"format\" is not supported" },
        { "{\"$ref\": \"#/definitions/a\"}", "at /$ref: expected \"#\" or \"#/$defs/NAME\"" },
        { "{\"$ref\": \"#/$defs/missing\"}", "at /$ref: expected" },
        { "{\"type\": \"float\"}", "at /type: expected a JSON Schema type name" },
        { "{\"items\": [{}]}", "at /items: expected a schema" },
        { "{\"minItems\": -1}", "at /minItems: expected a non-negative integer" },
        { "{\"pattern\": \"(\"}", "at /pattern: expected a POSIX extended regular expression" },
        { "{\"$schema\": \"http://json-schema.org/draft-07/schema#\"}",
          "at /$schema: expected \"https://json-schema.org/draft/2020-12/schema\"" },
        { "{\"anyOf\": []}", "at /anyOf: expected a non-empty array of schemas" },
        { "3", "expected a schema" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        ps_error_t err = { 0 };
        ps_jsonschema_t *schema = ps_jsonschema_parse (bad [i][0], "x.schema.json", &err);
        if (schema || err.code != PS_EINVAL || !strstr (err.msg, bad [i][1])
        ||  strncmp (err.msg, "schema x.schema.json: ", 22) != 0)
            fail_msg ("%s: got \"%s\", expected \"%s\"", bad [i][0], err.msg, bad [i][1]);
        ps_jsonschema_destroy (&schema);
    }
}

static void
test_describe (void **state)
{
    (void) state;
    ps_error_t err;
    ps_jsonschema_t *schema = ps_jsonschema_parse (
        "{\"$defs\": {\"count\": {\"type\": \"integer\", \"minimum\": 0}}, \"type\": \"object\","
        " \"additionalProperties\": false, \"properties\": {\"steps\": {\"$ref\": "
        "\"#/$defs/count\"}, \"values\": {\"type\": \"array\", \"items\": {\"type\": "
        "\"number\", \"exclusiveMinimum\": 0}}}}", "test", &err);
    assert_non_null (schema);
    char buf [128];
    assert_int_equal (ps_jsonschema_describe (schema, "/steps", buf, sizeof buf, &err), 0);
    assert_string_equal (buf, "an integer >= 0");
    assert_int_equal (ps_jsonschema_describe (schema, "/values/3", buf, sizeof buf, &err), 0);
    assert_string_equal (buf, "a number > 0");
    assert_int_equal (ps_jsonschema_describe (schema, "/frob", buf, sizeof buf, &err), PS_EINVAL);
    assert_string_equal (err.msg, "at /frob: unknown key \"frob\" (expected one of steps, "
                         "values)");
    assert_int_equal (ps_jsonschema_describe (schema, "/steps/x", buf, sizeof buf, &err),
                      PS_ENOTFOUND);
    ps_jsonschema_destroy (&schema);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_official_suite),
        cmocka_unit_test (test_prefix_items_and_defs),
        cmocka_unit_test (test_messages),
        cmocka_unit_test (test_refuses_unsupported),
        cmocka_unit_test (test_describe),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
