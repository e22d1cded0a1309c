//  The TF_CONFIG cluster spec: TensorFlow's own examples parse, endpoints
//  are derived as documented, and every kind of mistake is refused with a
//  message naming the source and the key.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ps_tfconfig.h"

static const char *s_good =
    "{\"cluster\": {\"chief\": [\"host0:2222\"],"
    "               \"worker\": [\"host1:2222\", \"10.0.0.2:2222\"],"
    "               \"ps\": [\"127.0.0.1:2223\", \"localhost:2224\"],"
    "               \"evaluator\": [\"host5:2222\"]},"
    " \"task\": {\"type\": \"ps\", \"index\": 1}}";

static void
test_parse_and_endpoints (void **state)
{
    (void) state;
    ps_error_t err;
    ps_tfconfig_t *tf = ps_tfconfig_parse (s_good, "TF_CONFIG", &err);
    assert_non_null (tf);
    assert_int_equal (ps_tfconfig_count (tf, "worker"), 2);
    assert_int_equal (ps_tfconfig_count (tf, "ps"), 2);
    assert_int_equal (ps_tfconfig_count (tf, "chief"), 1);
    assert_int_equal (ps_tfconfig_count (tf, "nothing"), 0);
    assert_string_equal (ps_tfconfig_task_type (tf), "ps");
    assert_int_equal (ps_tfconfig_task_index (tf), 1);
    assert_string_equal (ps_tfconfig_address (tf, "worker", 1), "10.0.0.2:2222");
    assert_null (ps_tfconfig_address (tf, "worker", 2));
    char endpoint [256];
    assert_int_equal (ps_tfconfig_bind_endpoint (tf, "ps", endpoint, sizeof endpoint, &err), 0);
    assert_string_equal (endpoint, "tcp://127.0.0.1:2224");
    assert_int_equal (ps_tfconfig_connect_endpoint (tf, "chief", 0, endpoint, sizeof endpoint, &err), 0);
    assert_string_equal (endpoint, "tcp://host0:2222");
    assert_int_equal (ps_tfconfig_bind_endpoint (tf, "worker", endpoint, sizeof endpoint, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "expected \"worker\""));
    ps_tfconfig_destroy (&tf);
    assert_null (tf);

    //  An IPv6 literal is bound as given.
    tf = ps_tfconfig_parse ("{\"cluster\": {\"ps\": [\"[::1]:2222\"]},"
                            " \"task\": {\"type\": \"ps\", \"index\": 0}}", "x", &err);
    assert_non_null (tf);
    ps_tfconfig_bind_endpoint (tf, "ps", endpoint, sizeof endpoint, &err);
    assert_string_equal (endpoint, "tcp://[::1]:2222");
    ps_tfconfig_destroy (&tf);

    //  A host name binds every interface; an endpoint passes through.
    tf = ps_tfconfig_parse ("{\"cluster\": {\"ps\": [\"ps0:2222\", \"ipc:///tmp/ps1\"]},"
                            " \"task\": {\"type\": \"ps\", \"index\": 0}}", "x", &err);
    assert_non_null (tf);
    ps_tfconfig_bind_endpoint (tf, "ps", endpoint, sizeof endpoint, &err);
    assert_string_equal (endpoint, "tcp://*:2222");
    ps_tfconfig_connect_endpoint (tf, "ps", 1, endpoint, sizeof endpoint, &err);
    assert_string_equal (endpoint, "ipc:///tmp/ps1");
    ps_tfconfig_destroy (&tf);
}

static void
s_refused (const char *text, const char *says)
{
    ps_error_t err = { 0, "" };
    ps_tfconfig_t *tf = ps_tfconfig_parse (text, "cluster.json", &err);
    if (tf)
        fail_msg ("accepted: %s", text);
    if (!strstr (err.msg, says) || !strstr (err.msg, "cluster.json"))
        fail_msg ("for %s: message '%s' does not say '%s'", text, err.msg, says);
}

static void
test_mistakes (void **state)
{
    (void) state;
    s_refused ("{\"cluster\": ", "bad JSON");
    s_refused ("[]", "expected a JSON object");
    s_refused ("{\"task\": {\"type\": \"ps\", \"index\": 0}}", "'cluster' is missing");
    s_refused ("{\"cluster\": {\"ps\": [\"a:1\"]}, \"extra\": 1}", "unknown key 'extra'");
    s_refused ("{\"cluster\": {\"gpu\": [\"a:1\"]}}", "unknown key 'cluster.gpu'");
    s_refused ("{\"cluster\": {\"ps\": \"a:1\"}}", "'cluster.ps' must be a list");
    s_refused ("{\"cluster\": {\"ps\": [\"nocolon\"]}}", "'cluster.ps[0]'");
    s_refused ("{\"cluster\": {\"ps\": [\"a:1\"], \"worker\": [\"a:1\"]}}", "appears twice");
    s_refused ("{\"cluster\": {\"chief\": [\"a:1\", \"b:1\"]}}", "at most 1");
    s_refused ("{\"cluster\": {\"ps\": [\"a:1\"]}, \"task\": {\"type\": \"ps\"}}", "'task.index'");
    s_refused ("{\"cluster\": {\"ps\": [\"a:1\"]}, \"task\": {\"type\": \"ps\", \"index\": 1}}",
               "'task.index' is 1 but cluster.ps has 1");
    s_refused ("{\"cluster\": {\"ps\": [\"a:1\"]}, \"task\": {\"type\": \"boss\", \"index\": 0}}",
               "'task.type' is \"boss\"");
    s_refused ("{\"cluster\": {\"ps\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
               "cluster.worker has 0");
    s_refused ("{\"cluster\": {\"ps\": [\"a:1\"]}, \"cluster\": {}}", "bad JSON");
}

static void
test_env_and_file (void **state)
{
    (void) state;
    ps_error_t err;
    unsetenv ("TF_CONFIG");
    assert_null (ps_tfconfig_from_env (&err));
    assert_int_equal (err.code, PS_ENOTFOUND);
    setenv ("TF_CONFIG", s_good, 1);
    ps_tfconfig_t *tf = ps_tfconfig_from_env (&err);
    assert_non_null (tf);
    ps_tfconfig_destroy (&tf);
    char path [] = "/tmp/ps-tfconfig-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    assert_int_equal (write (fd, s_good, strlen (s_good)), (ssize_t) strlen (s_good));
    close (fd);
    tf = ps_tfconfig_from_file (path, &err);
    assert_non_null (tf);
    assert_int_equal (ps_tfconfig_task_index (tf), 1);
    ps_tfconfig_destroy (&tf);
    unlink (path);
    assert_null (ps_tfconfig_from_file ("/nonexistent/tf.json", &err));
    assert_non_null (strstr (err.msg, "/nonexistent/tf.json"));
}

//  A --cluster file is held to the same rules as TF_CONFIG, duplicate keys
//  included (found by tests/fuzz/fuzz_tfconfig: the file took the last of
//  two "ps" lists where the same text was refused).
static void
test_file_duplicate_keys (void **state)
{
    (void) state;
    const char *text = "{\"cluster\":{\"ps\":[],\"ps\":[]}}";
    ps_error_t err;
    assert_null (ps_tfconfig_parse (text, "TF_CONFIG", &err));
    char path [] = "/tmp/ps-tfconfig-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    assert_int_equal (write (fd, text, strlen (text)), (ssize_t) strlen (text));
    close (fd);
    ps_tfconfig_t *tf = ps_tfconfig_from_file (path, &err);
    unlink (path);
    if (tf)
        fail_msg ("the file %s with a duplicate key was accepted", path);
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, path));
    assert_non_null (strstr (err.msg, "duplicate"));
}

//  --task TYPE:INDEX: parsed strictly, then checked against the cluster.
static void
test_set_task (void **state)
{
    (void) state;
    ps_error_t err;
    ps_tfconfig_t *tf = ps_tfconfig_parse ("{\"cluster\": {\"chief\": [\"h:1\"], "
                                           "\"ps\": [\"h:2\", \"h:3\"]}}", "spec", &err);
    assert_non_null (tf);
    assert_null (ps_tfconfig_task_type (tf));
    char type [16];
    int index = -1;
    assert_int_equal (ps_tfconfig_parse_task ("ps:1", type, sizeof type, &index, &err), PS_OK);
    assert_string_equal (type, "ps");
    assert_int_equal (index, 1);
    const char *bad [] = { "ps", ":1", "ps:", "ps:-1", "ps:1x", "ps:2000000", "averyveryverylongtype:1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        assert_int_equal (ps_tfconfig_parse_task (bad [i], type, sizeof type, &index, &err),
                          PS_EINVAL);
        assert_non_null (strstr (err.msg, bad [i]));
    }
    assert_int_equal (ps_tfconfig_set_task (tf, "ps", 1, &err), PS_OK);
    assert_string_equal (ps_tfconfig_task_type (tf), "ps");
    assert_int_equal (ps_tfconfig_task_index (tf), 1);
    assert_int_equal (ps_tfconfig_set_task (tf, "ps", 2, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "ps:2"));
    assert_int_equal (ps_tfconfig_set_task (tf, "worker", 0, &err), PS_EINVAL);
    assert_int_equal (ps_tfconfig_set_task (tf, "gpu", 0, &err), PS_EINVAL);
    //  A failed set leaves the task as it was.
    assert_int_equal (ps_tfconfig_task_index (tf), 1);
    char endpoint [64];
    assert_int_equal (ps_tfconfig_coordinator_endpoint (tf, endpoint, sizeof endpoint, &err),
                      PS_OK);
    assert_string_equal (endpoint, "tcp://h:1");
    ps_tfconfig_destroy (&tf);
    tf = ps_tfconfig_parse ("{\"cluster\": {\"ps\": [\"h:2\"]}}", "spec", &err);
    assert_non_null (tf);
    assert_int_equal (ps_tfconfig_coordinator_endpoint (tf, endpoint, sizeof endpoint, &err),
                      PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "chief"));
    ps_tfconfig_destroy (&tf);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_parse_and_endpoints),
        cmocka_unit_test (test_mistakes),
        cmocka_unit_test (test_env_and_file),
        cmocka_unit_test (test_file_duplicate_keys),
        cmocka_unit_test (test_set_task),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
