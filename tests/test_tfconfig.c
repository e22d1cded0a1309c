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

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

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

    //  A host name is connected to as it is (a compose service name), and
    //  an endpoint passes through.
    tf = ps_tfconfig_parse ("{\"cluster\": {\"ps\": [\"ps-0:2222\", \"ipc:///tmp/ps1\"],"
                            " \"worker\": [\"tcp://w_1.example.org:7\"]},"
                            " \"task\": {\"type\": \"ps\", \"index\": 1}}", "x", &err);
    assert_non_null (tf);
    assert_int_equal (ps_tfconfig_connect_endpoint (tf, "ps", 0, endpoint, sizeof endpoint, &err),
                      PS_OK);
    assert_string_equal (endpoint, "tcp://ps-0:2222");
    assert_int_equal (ps_tfconfig_connect_endpoint (tf, "worker", 0, endpoint, sizeof endpoint,
                                                    &err), PS_OK);
    assert_string_equal (endpoint, "tcp://w_1.example.org:7");
    assert_int_equal (ps_tfconfig_bind_endpoint (tf, "ps", endpoint, sizeof endpoint, &err), PS_OK);
    assert_string_equal (endpoint, "ipc:///tmp/ps1");
    ps_tfconfig_destroy (&tf);
}

//  The endpoint a task binds for its host name: the address the name
//  resolves to, never every interface; a name that does not resolve is an
//  error naming the key and the name.
static void
test_bind_names (void **state)
{
    (void) state;
    ps_error_t err = { 0, "" };
    char endpoint [256];
    ps_tfconfig_t *tf = ps_tfconfig_parse ("{\"cluster\": {\"ps\": [\"127.0.0.1:1\", "
                                           "\"no-such-host.invalid:2222\"]},"
                                           " \"task\": {\"type\": \"ps\", \"index\": 1}}",
                                           "TF_CONFIG", &err);
    assert_non_null (tf);
    assert_int_equal (ps_tfconfig_bind_endpoint (tf, "ps", endpoint, sizeof endpoint, &err),
                      PS_EINVAL);
    if (!strstr (err.msg, "cluster.ps[1]") || !strstr (err.msg, "no-such-host.invalid")
    ||  !strstr (err.msg, "does not resolve"))
        fail_msg ("message '%s'", err.msg);
    ps_tfconfig_destroy (&tf);

    //  A name that resolves is bound at its address. The name must resolve
    //  on every machine, so that the case never depends on where it runs
    //  (this machine's own name need not): "localhost" is taken as
    //  127.0.0.1 without asking the resolver (ps_address.c), but host names
    //  are case-insensitive, so "LOCALHOST" is looked up in /etc/hosts as
    //  any other name is.
    const char *host = "LOCALHOST";
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *found;
    int rc = getaddrinfo (host, NULL, &hints, &found);
    if (rc != 0)
        fail_msg ("%s does not resolve here (%s): /etc/hosts has no localhost", host,
                  gai_strerror (rc));
    char address [INET_ADDRSTRLEN];
    assert_non_null (inet_ntop (AF_INET, &((struct sockaddr_in *) found->ai_addr)->sin_addr,
                                address, sizeof address));
    freeaddrinfo (found);
    char text [600], expected [300];
    snprintf (text, sizeof text, "{\"cluster\": {\"worker\": [\"%s:2223\"]},"
              " \"task\": {\"type\": \"worker\", \"index\": 0}}", host);
    tf = ps_tfconfig_parse (text, "TF_CONFIG", &err);
    assert_non_null (tf);
    assert_int_equal (ps_tfconfig_bind_endpoint (tf, "worker", endpoint, sizeof endpoint, &err),
                      PS_OK);
    snprintf (expected, sizeof expected, "tcp://%s:2223", address);
    assert_string_equal (endpoint, expected);
    ps_tfconfig_destroy (&tf);
}

//  Every address is checked when the spec is read, so that no process binds
//  or connects to something else than what was written.
static void
test_addresses (void **state)
{
    (void) state;
    char text [512];
    const struct { const char *address; const char *says; } bad [] = {
        { "127.0.0.1:70000", "port \"70000\": expected a whole number in 1..65535" },
        { "127.0.0.1:99999", "port \"99999\": expected a whole number in 1..65535" },
        { "127.0.0.1:-1", "port \"-1\"" },
        { "127.0.0.1:0", "port \"0\"" },
        { "127.0.0.1: 22", "port \" 22\"" },
        { "127.0.0.1:0x10", "port \"0x10\"" },
        { "127.0.0.1:", "port \"\"" },
        { "127.0.0.1:*", "port \"*\"" },
        { ":2222", "no host" },
        { "*:2222", "host \"*\"" },
        { "a b:2222", "host \"a b\"" },
        { "-a:2222", "host \"-a\"" },
        { "a..b:2222", "host \"a..b\"" },
        { "256.1.1.1:2222", "host \"256.1.1.1\"" },
        { "1.2.3:2222", "host \"1.2.3\"" },
        { "::1:2222", "in brackets" },
        { "[::1]", "[::1]" },
        { "[zz::1]:2222", "host \"[zz::1]\"" },
        { "tcp://127.0.0.1:70000", "port \"70000\"" },
        { "tcp://:2222", "no host" },
        { "ipc://", "ipc://" },
        { "udp://a:1", "udp://a:1" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        snprintf (text, sizeof text, "{\"cluster\": {\"ps\": [\"127.0.0.1:1\"], "
                  "\"worker\": [\"127.0.0.1:2\", \"%s\"]}}", bad [i].address);
        ps_error_t err = { 0, "" };
        ps_tfconfig_t *tf = ps_tfconfig_parse (text, "TF_CONFIG", &err);
        if (tf)
            fail_msg ("accepted %s", bad [i].address);
        char key [64];
        snprintf (key, sizeof key, "TF_CONFIG: 'cluster.worker[1]' is \"%s\"", bad [i].address);
        if (!strstr (err.msg, key) || !strstr (err.msg, bad [i].says))
            fail_msg ("for %s: message '%s' does not say '%s' and '%s'", bad [i].address,
                      err.msg, key, bad [i].says);
    }
    const char *good [] = {
        "ps-0:2222", "host.example.org.:1", "w_1:65535", "10.0.0.2:2222", "0.0.0.0:2222",
        "[::1]:2222", "[fe80::1]:2222", "tcp://ps0:2222", "tcp://[::1]:2", "ipc:///tmp/x",
        "localhost:2",
    };
    for (size_t i = 0; i < sizeof good / sizeof good [0]; i++) {
        snprintf (text, sizeof text, "{\"cluster\": {\"ps\": [\"%s\"]}}", good [i]);
        ps_error_t err = { 0, "" };
        ps_tfconfig_t *tf = ps_tfconfig_parse (text, "TF_CONFIG", &err);
        if (!tf)
            fail_msg ("refused %s: %s", good [i], err.msg);
        ps_tfconfig_destroy (&tf);
    }
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
    //  A number too large to read names its key, not a position.
    s_refused ("{\"cluster\": {\"ps\": [\"a:1\"]}, \"task\": {\"type\": \"ps\", "
               "\"index\": 9223372036854775808}}",
               "'task.index' is 9223372036854775808, expected an index into the addresses of its type");
    s_refused ("{\"cluster\": {\"ps\": [\"a:1\", 1e999]}}",
               "'cluster.ps[1]' is 1e999, expected a \"host:port\" string");
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
    //  A file is parsed as written: a key given twice is refused as it is
    //  in TF_CONFIG, not settled by the last one.
    const char *twice = "{\"cluster\": {\"ps\": [\"a:1\"]}, \"task\": {\"type\": \"ps\", "
                        "\"index\": 0}, \"task\": {\"type\": \"ps\", \"index\": 0}}";
    fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true (fd >= 0);
    assert_int_equal (write (fd, twice, strlen (twice)), (ssize_t) strlen (twice));
    close (fd);
    assert_null (ps_tfconfig_from_file (path, &err));
    if (!strstr (err.msg, path) || !strstr (err.msg, "duplicate"))
        fail_msg ("message '%s'", err.msg);
    unlink (path);
    //  A FIFO is refused, not waited on (the alarm turns a hang into a
    //  failure).
    assert_int_equal (mkfifo (path, 0600), 0);
    alarm (30);
    tf = ps_tfconfig_from_file (path, &err);
    alarm (0);
    unlink (path);
    assert_null (tf);
    if (!strstr (err.msg, path) || !strstr (err.msg, "a FIFO, not a regular file"))
        fail_msg ("message '%s'", err.msg);
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

//  What Kubeflow's Training Operator (kubeflow.org/v1 TFJob) puts in each
//  pod's TF_CONFIG, byte for byte as its genTFConfigJSONStr marshals it:
//  the replica types in lower case ("chief", "ps", "worker"), Go's map keys
//  in sorted order, the per-replica headless services' names
//  (JOB-TYPE-INDEX.NAMESPACE.svc) with the "tfjob-port" port, and a
//  top-level "environment": "cloud". Every program reads it verbatim.
static const char *s_tfjob_chief =
    "{\"cluster\":{\"chief\":[\"ps-cluster-chief-0.default.svc:2222\"],"
    "\"ps\":[\"ps-cluster-ps-0.default.svc:2222\",\"ps-cluster-ps-1.default.svc:2222\"],"
    "\"worker\":[\"ps-cluster-worker-0.default.svc:2222\",\"ps-cluster-worker-1.default.svc:2222\"]},"
    "\"task\":{\"type\":\"chief\",\"index\":0},\"environment\":\"cloud\"}";

static void
test_tfjob_operator (void **state)
{
    (void) state;
    ps_error_t err;
    ps_tfconfig_t *tf = ps_tfconfig_parse (s_tfjob_chief, "TF_CONFIG", &err);
    if (!tf)
        fail_msg ("the operator's TF_CONFIG refused: %s", err.msg);
    assert_string_equal (ps_tfconfig_task_type (tf), "chief");
    assert_int_equal (ps_tfconfig_task_index (tf), 0);
    assert_int_equal (ps_tfconfig_count (tf, "chief"), 1);
    assert_int_equal (ps_tfconfig_count (tf, "ps"), 2);
    assert_int_equal (ps_tfconfig_count (tf, "worker"), 2);
    char endpoint [128];
    assert_int_equal (ps_tfconfig_coordinator_endpoint (tf, endpoint, sizeof endpoint, &err),
                      PS_OK);
    assert_string_equal (endpoint, "tcp://ps-cluster-chief-0.default.svc:2222");
    assert_int_equal (ps_tfconfig_connect_endpoint (tf, "ps", 1, endpoint, sizeof endpoint, &err),
                      PS_OK);
    assert_string_equal (endpoint, "tcp://ps-cluster-ps-1.default.svc:2222");
    ps_tfconfig_destroy (&tf);
    //  The same cluster for a ps and a worker pod: only the task differs.
    const char *tasks [] = { "{\"type\":\"ps\",\"index\":1}", "{\"type\":\"worker\",\"index\":0}" };
    for (size_t i = 0; i < 2; i++) {
        char text [1024];
        const char *cut = strstr (s_tfjob_chief, "{\"type\"");
        snprintf (text, sizeof text, "%.*s%s,\"environment\":\"cloud\"}",
                  (int) (cut - s_tfjob_chief), s_tfjob_chief, tasks [i]);
        tf = ps_tfconfig_parse (text, "TF_CONFIG", &err);
        if (!tf)
            fail_msg ("%s refused: %s", text, err.msg);
        assert_string_equal (ps_tfconfig_task_type (tf), i == 0 ? "ps" : "worker");
        ps_tfconfig_destroy (&tf);
    }
    //  "environment" is a string or nothing; the operator's sparse form
    //  (enableDynamicWorker) names its cluster differently and is refused
    //  by name; a replica type is written in lower case, as the operator
    //  writes it.
    s_refused ("{\"cluster\": {\"ps\": [\"a:1\"]}, \"environment\": 1}",
               "'environment' is not a string");
    s_refused ("{\"sparseCluster\": {\"ps\": [\"a:1\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}",
               "unknown key 'sparseCluster'");
    s_refused ("{\"cluster\": {\"Chief\": [\"a:1\"]}}", "unknown key 'cluster.Chief'");
}

//  TensorFlow's own documentation's specs, verbatim but for the ports:
//  "rpc_layer" is read and ignored (a non-string is named), an evaluator
//  started with a cluster that lists none is taken as evaluator:0, and a
//  cluster of workers only has its coordinator at worker 0's port + 1.
static void
test_tensorflow_shapes (void **state)
{
    (void) state;
    ps_error_t err;
    //  MultiWorkerMirroredStrategy's TF_CONFIG with TensorFlow's rpc_layer.
    ps_tfconfig_t *tf = ps_tfconfig_parse (
        "{\"cluster\": {\"worker\": [\"localhost:12345\", \"localhost:23456\"]}, "
        "\"task\": {\"type\": \"worker\", \"index\": 0}, \"rpc_layer\": \"grpc\"}",
        "TF_CONFIG", &err);
    if (!tf)
        fail_msg ("refused: %s", err.msg);
    assert_true (ps_tfconfig_chief_derived (tf));
    assert_int_equal (ps_tfconfig_count (tf, "chief"), 1);
    char endpoint [128];
    assert_int_equal (ps_tfconfig_coordinator_endpoint (tf, endpoint, sizeof endpoint, &err),
                      PS_OK);
    assert_string_equal (endpoint, "tcp://localhost:12346");
    //  The coordinator started for it binds there as chief:0.
    assert_int_equal (ps_tfconfig_set_task (tf, "chief", 0, &err), PS_OK);
    assert_int_equal (ps_tfconfig_bind_endpoint (tf, "chief", endpoint, sizeof endpoint, &err),
                      PS_OK);
    assert_string_equal (endpoint, "tcp://127.0.0.1:12346");
    //  The text a child is started with: the same spec, its own task, and
    //  no chief written into it (it derives the same one).
    char *text = ps_tfconfig_text_as (tf, "chief", 0);
    ps_tfconfig_destroy (&tf);
    tf = ps_tfconfig_parse (text, "child", &err);
    free (text);
    assert_non_null (tf);
    assert_true (ps_tfconfig_chief_derived (tf));
    assert_string_equal (ps_tfconfig_task_type (tf), "chief");
    assert_int_equal (ps_tfconfig_coordinator_endpoint (tf, endpoint, sizeof endpoint, &err),
                      PS_OK);
    assert_string_equal (endpoint, "tcp://localhost:12346");
    ps_tfconfig_destroy (&tf);

    //  A listed chief is never replaced.
    tf = ps_tfconfig_parse (s_good, "x", &err);
    assert_non_null (tf);
    assert_false (ps_tfconfig_chief_derived (tf));
    ps_tfconfig_destroy (&tf);

    //  The derived address taken by another task: refused when asked for,
    //  naming both; the spec itself still parses (a server reads only its
    //  own address).
    tf = ps_tfconfig_parse ("{\"cluster\": {\"worker\": [\"localhost:12345\", "
                            "\"localhost:12346\"]}}", "TF_CONFIG", &err);
    assert_non_null (tf);
    assert_false (ps_tfconfig_chief_derived (tf));
    assert_int_equal (ps_tfconfig_coordinator_endpoint (tf, endpoint, sizeof endpoint, &err),
                      PS_EINVAL);
    assert_non_null (strstr (err.msg, "localhost:12346"));
    assert_non_null (strstr (err.msg, "cluster.worker[1]"));
    assert_non_null (strstr (err.msg, "port + 1"));
    ps_tfconfig_destroy (&tf);
    tf = ps_tfconfig_parse ("{\"cluster\": {\"worker\": [\"h:65535\"]}}", "x", &err);
    assert_non_null (tf);
    assert_int_equal (ps_tfconfig_coordinator_endpoint (tf, endpoint, sizeof endpoint, &err),
                      PS_EINVAL);
    assert_non_null (strstr (err.msg, "h:65535"));
    ps_tfconfig_destroy (&tf);

    //  ParameterServerStrategy's evaluator: its cluster lists no evaluator.
    tf = ps_tfconfig_parse ("{\"cluster\": {\"chief\": [\"localhost:2222\"], "
                            "\"worker\": [\"localhost:2223\"], \"ps\": [\"localhost:2224\"]}, "
                            "\"task\": {\"type\": \"evaluator\", \"index\": 0}}",
                            "TF_CONFIG", &err);
    if (!tf)
        fail_msg ("evaluator refused: %s", err.msg);
    assert_string_equal (ps_tfconfig_task_type (tf), "evaluator");
    assert_int_equal (ps_tfconfig_task_index (tf), 0);
    assert_int_equal (ps_tfconfig_count (tf, "evaluator"), 0);
    assert_null (ps_tfconfig_address (tf, "evaluator", 0));
    //  It binds nothing: asked for its address, it says so (it crashed).
    char bind [64];
    assert_int_equal (ps_tfconfig_bind_endpoint (tf, "evaluator", bind, sizeof bind, &err),
                      PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "task evaluator:0 is not listed in the cluster"));
    assert_int_equal (ps_tfconfig_coordinator_endpoint (tf, endpoint, sizeof endpoint, &err),
                      PS_OK);
    assert_string_equal (endpoint, "tcp://localhost:2222");
    assert_int_equal (ps_tfconfig_set_task (tf, "evaluator", 0, &err), PS_OK);
    //  Only evaluator:0, and only where no evaluator is listed.
    assert_int_equal (ps_tfconfig_set_task (tf, "evaluator", 1, &err), PS_EINVAL);
    assert_int_equal (ps_tfconfig_set_task (tf, "ps", 1, &err), PS_EINVAL);
    ps_tfconfig_destroy (&tf);
    s_refused ("{\"cluster\": {\"ps\": [\"a:1\"]}, \"task\": {\"type\": \"evaluator\", "
               "\"index\": 1}}", "'task.index' is 1");
    s_refused ("{\"cluster\": {\"ps\": [\"a:1\"], \"evaluator\": [\"a:2\"]}, "
               "\"task\": {\"type\": \"evaluator\", \"index\": 1}}", "'task.index' is 1");
    s_refused ("{\"cluster\": {\"ps\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", "
               "\"index\": 0}}", "'task.index' is 0");
    //  rpc_layer is a string or nothing.
    s_refused ("{\"cluster\": {\"ps\": [\"a:1\"]}, \"rpc_layer\": 1}",
               "'rpc_layer' is not a string");
    s_refused ("{\"cluster\": {\"ps\": [\"a:1\"]}, \"rpc\": \"grpc\"}",
               "expected cluster, task, environment or rpc_layer");
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_parse_and_endpoints),
        cmocka_unit_test (test_bind_names),
        cmocka_unit_test (test_addresses),
        cmocka_unit_test (test_mistakes),
        cmocka_unit_test (test_env_and_file),
        cmocka_unit_test (test_file_duplicate_keys),
        cmocka_unit_test (test_set_task),
        cmocka_unit_test (test_tfjob_operator),
        cmocka_unit_test (test_tensorflow_shapes),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
