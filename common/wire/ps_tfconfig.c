//  The TF_CONFIG cluster spec; see ps_tfconfig.h.

#include "ps_tfconfig.h"

#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_address.h"
#include "ps_file.h"
#include "ps_json.h"
#include "ps_log.h"
#include "ps_parse.h"

//  A cluster file holds a few addresses; a larger one is not a cluster file.
#define S_FILE_MAX  ((size_t) 1 << 20)

static const char *s_roles [] = { "chief", "worker", "ps", "evaluator" };
#define S_NROLES (sizeof s_roles / sizeof s_roles [0])
//  Indexes into s_roles.
enum { S_CHIEF, S_WORKER, S_PS, S_EVALUATOR };

struct _ps_tfconfig_t {
    json_t *root;
    json_t *roles [S_NROLES];   //  borrowed arrays, NULL when absent
    const char *task_type;
    int task_index;
    //  A chiefless spec's chief, derived from worker 0's address (the one
    //  list not borrowed from root), or why none could be derived.
    json_t *derived_chief;
    char *derive_error;
};

//  The port a chiefless cluster's coordinator takes, relative to worker 0's.
#define S_CHIEF_PORT_OFFSET 1

static int
s_role (const char *type)
{
    for (size_t i = 0; i < S_NROLES; i++)
        if (strcmp (s_roles [i], type) == 0)
            return (int) i;
    return -1;
}

static int
s_check_cluster (ps_tfconfig_t *self, json_t *cluster, const char *source, ps_error_t *err)
{
    if (!json_is_object (cluster))
        return ps_error_set (err, PS_EINVAL, "%s: 'cluster' must be an object", source);
    const char *key;
    json_t *list;
    json_object_foreach (cluster, key, list) {
        int role = s_role (key);
        if (role < 0)
            return ps_error_set (err, PS_EINVAL,
                                 "%s: unknown key 'cluster.%s', expected chief, worker, ps or evaluator",
                                 source, key);
        if (!json_is_array (list))
            return ps_error_set (err, PS_EINVAL, "%s: 'cluster.%s' must be a list of \"host:port\" strings",
                                 source, key);
        size_t i;
        json_t *address;
        json_array_foreach (list, i, address) {
            const char *text = json_string_value (address);
            ps_error_t why;
            if (!text)
                return ps_error_set (err, PS_EINVAL, "%s: 'cluster.%s[%zu]' must be a \"host:port\" string",
                                     source, key, i);
            if (ps_address_check (text, &why))
                return ps_error_set (err, PS_EINVAL, "%s: 'cluster.%s[%zu]' is \"%s\": %s",
                                     source, key, i, text, why.msg);
        }
        self->roles [role] = list;
    }
    if (self->roles [0] && json_array_size (self->roles [0]) > 1)
        return ps_error_set (err, PS_EINVAL, "%s: 'cluster.chief' lists %zu addresses, expected at most 1",
                             source, json_array_size (self->roles [0]));
    //  Two tasks on one address would both try to bind it.
    for (size_t a = 0; a < S_NROLES; a++)
        for (size_t i = 0; self->roles [a] && i < json_array_size (self->roles [a]); i++)
            for (size_t b = a; b < S_NROLES; b++)
                for (size_t j = a == b ? i + 1 : 0; self->roles [b] && j < json_array_size (self->roles [b]); j++)
                    if (strcmp (json_string_value (json_array_get (self->roles [a], i)),
                                json_string_value (json_array_get (self->roles [b], j))) == 0)
                        return ps_error_set (err, PS_EINVAL,
                                             "%s: address %s appears twice (cluster.%s[%zu] and cluster.%s[%zu])",
                                             source, json_string_value (json_array_get (self->roles [a], i)),
                                             s_roles [a], i, s_roles [b], j);
    return PS_OK;
}

//  An address without its "tcp://" prefix, as two addresses are compared.
static const char *
s_bare (const char *address)
{
    return strncmp (address, "tcp://", 6) == 0 ? address + 6 : address;
}

//  A cluster without a chief (TensorFlow's MultiWorkerMirroredStrategy
//  lists only workers) still needs a coordinator; every process derives
//  its address by the same rule, worker 0's host with worker 0's port + 1,
//  so that none needs to be told. A rule that cannot be applied (worker 0
//  is not host:port, the port is 65535, or the address is another task's)
//  is not an error until a process asks for the coordinator: a spec read
//  only for its servers' addresses does not need it.
static void
s_derive_chief (ps_tfconfig_t *self)
{
    if (self->roles [S_CHIEF] || !self->roles [S_WORKER]
    ||  json_array_size (self->roles [S_WORKER]) == 0)
        return;
    const char *worker0 = json_string_value (json_array_get (self->roles [S_WORKER], 0));
    const char *colon = strrchr (worker0, ':');
    uint64_t port = 0;
    ps_error_t why;
    char text [600];
    int rc = colon && !strstr (colon, "//")
           ? ps_parse_uint ("the port", colon + 1, 1, 65535, &port, &why) : PS_EINVAL;
    if (rc || port + S_CHIEF_PORT_OFFSET > 65535) {
        snprintf (text, sizeof text, "the cluster lists no chief, and worker 0's address %s "
                  "has no port + %d to take the coordinator's address from (the rule for a "
                  "cluster without a chief): list one in cluster.chief", worker0,
                  S_CHIEF_PORT_OFFSET);
        self->derive_error = strdup (text);
        if (!self->derive_error)
            abort ();
        return;
    }
    snprintf (text, sizeof text, "%.*s:%u", (int) (colon - worker0), worker0,
              (unsigned) (port + S_CHIEF_PORT_OFFSET));
    for (size_t r = S_WORKER; r < S_NROLES; r++)
        for (size_t i = 0; self->roles [r] && i < json_array_size (self->roles [r]); i++) {
            const char *other = json_string_value (json_array_get (self->roles [r], i));
            if (strcmp (s_bare (other), s_bare (text)) == 0) {
                char message [1400];
                snprintf (message, sizeof message, "the cluster lists no chief, so the "
                          "coordinator's address is worker 0's port + %d, %s, but that is "
                          "cluster.%s[%zu]'s address (%s): list a chief in cluster.chief or "
                          "give that task another port", S_CHIEF_PORT_OFFSET, text,
                          s_roles [r], i, other);
                self->derive_error = strdup (message);
                if (!self->derive_error)
                    abort ();
                return;
            }
        }
    self->derived_chief = json_pack ("[s]", text);
    if (!self->derived_chief)
        abort ();
    self->roles [S_CHIEF] = self->derived_chief;
}

//  TensorFlow starts ParameterServerStrategy's side-car evaluator with the
//  cluster of chief, workers and ps only and the task evaluator:0: the
//  evaluator is a client and needs no address, so that task is taken
//  although the cluster lists no evaluator.
static bool
s_unlisted_evaluator (ps_tfconfig_t *self, int role, long long index)
{
    return role == S_EVALUATOR && !self->roles [S_EVALUATOR] && index == 0;
}

static int
s_check_task (ps_tfconfig_t *self, json_t *task, const char *source, ps_error_t *err)
{
    if (!json_is_object (task))
        return ps_error_set (err, PS_EINVAL, "%s: 'task' must be an object", source);
    const char *key;
    json_t *value;
    json_object_foreach (task, key, value)
        if (strcmp (key, "type") && strcmp (key, "index"))
            return ps_error_set (err, PS_EINVAL, "%s: unknown key 'task.%s', expected type or index",
                                 source, key);
    const char *type = json_string_value (json_object_get (task, "type"));
    json_t *index = json_object_get (task, "index");
    if (!type)
        return ps_error_set (err, PS_EINVAL, "%s: 'task.type' is missing or not a string", source);
    int role = s_role (type);
    if (role < 0)
        return ps_error_set (err, PS_EINVAL,
                             "%s: 'task.type' is \"%s\", expected chief, worker, ps or evaluator",
                             source, type);
    if (!json_is_integer (index))
        return ps_error_set (err, PS_EINVAL, "%s: 'task.index' is missing or not an integer", source);
    json_int_t value_index = json_integer_value (index);
    size_t count = self->roles [role] ? json_array_size (self->roles [role]) : 0;
    if (!s_unlisted_evaluator (self, role, value_index)
    &&  (value_index < 0 || (size_t) value_index >= count))
        return ps_error_set (err, PS_EINVAL,
                             "%s: 'task.index' is %lld but cluster.%s has %zu addresses",
                             source, (long long) value_index, type, count);
    self->task_type = s_roles [role];
    self->task_index = (int) value_index;
    return PS_OK;
}

int
ps_tfconfig_set_task (ps_tfconfig_t *self, const char *type, int index, ps_error_t *err)
{
    assert (self);
    int role = s_role (type);
    if (role < 0)
        return ps_error_set (err, PS_EINVAL, "task type \"%s\": expected chief, worker, ps "
                             "or evaluator", type);
    //  A chief that could not be derived says why.
    if (role == S_CHIEF && self->derive_error)
        return ps_error_set (err, PS_EINVAL, "%s", self->derive_error);
    size_t count = self->roles [role] ? json_array_size (self->roles [role]) : 0;
    if (!s_unlisted_evaluator (self, role, index) && (index < 0 || (size_t) index >= count))
        return ps_error_set (err, PS_EINVAL, "task %s:%d is out of range: cluster.%s has %zu "
                             "address%s", type, index, type, count, count == 1 ? "" : "es");
    self->task_type = s_roles [role];
    self->task_index = index;
    return PS_OK;
}

int
ps_tfconfig_coordinator_endpoint (ps_tfconfig_t *self, char *buf, size_t len, ps_error_t *err)
{
    assert (self);
    if (self->derive_error)
        return ps_error_set (err, PS_EINVAL, "%s", self->derive_error);
    if (ps_tfconfig_count (self, "chief") < 1)
        return ps_error_set (err, PS_ENOTFOUND, "the cluster has no 'chief' (cluster.chief: "
                             "the coordinator's address)");
    return ps_tfconfig_connect_endpoint (self, "chief", 0, buf, len, err);
}

int
ps_tfconfig_parse_task (const char *text, char *type, size_t len, int *index, ps_error_t *err)
{
    const char *colon = strchr (text, ':');
    if (!colon || colon == text || (size_t) (colon - text) >= len)
        return ps_error_set (err, PS_EINVAL, "--task \"%s\" is not TYPE:INDEX (worker:0, "
                             "ps:1, evaluator:0)", text);
    uint64_t n;
    ps_error_t why;
    if (ps_parse_uint ("the index", colon + 1, 0, 1000000, &n, &why))
        return ps_error_set (err, PS_EINVAL, "--task \"%s\": %s", text, why.msg);
    memcpy (type, text, (size_t) (colon - text));
    type [colon - text] = 0;
    *index = (int) n;
    return PS_OK;
}

//  A number too large to read (ps_json.h), named by its key and what the
//  key expects, as the checks above name a value of the wrong type.
static int
s_too_large (const ps_json_overflow_t *big, const char *source, ps_error_t *err)
{
    if (!big->path [0])
        return ps_error_set (err, PS_EINVAL, "%s: expected a JSON object, got %s", source,
                             big->literal);
    if (strcmp (big->path, "task.index") == 0)
        return ps_error_set (err, PS_EINVAL, "%s: 'task.index' is %s, expected an index into "
                             "the addresses of its type", source, big->literal);
    if (strncmp (big->path, "cluster.", strlen ("cluster.")) == 0 && strchr (big->path, '['))
        return ps_error_set (err, PS_EINVAL, "%s: '%s' is %s, expected a \"host:port\" string",
                             source, big->path, big->literal);
    return ps_error_set (err, PS_EINVAL, "%s: '%s' is %s, a number too large to read", source,
                         big->path, big->literal);
}

ps_tfconfig_t *
ps_tfconfig_parse (const char *text, const char *source, ps_error_t *err)
{
    json_error_t jerr;
    json_t *root = json_loads (text, JSON_REJECT_DUPLICATES, &jerr);
    ps_json_overflow_t big;
    if (!root && ps_json_overflow (text, strlen (text), &jerr, &big)) {
        s_too_large (&big, source, err);
        return NULL;
    }
    if (!root) {
        ps_error_set (err, PS_EINVAL, "%s: bad JSON at line %d column %d: %s",
                      source, jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    ps_tfconfig_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->root = root;
    self->task_index = -1;
    int rc = PS_OK;
    if (!json_is_object (root))
        rc = ps_error_set (err, PS_EINVAL, "%s: expected a JSON object", source);
    const char *key;
    json_t *value;
    //  "environment" is what Kubeflow's TFJob operator adds to every
    //  TF_CONFIG it writes ("cloud", for TensorFlow 1.3's learn module);
    //  it says nothing about the cluster, so it is read and ignored.
    //  "rpc_layer" ("grpc") names TensorFlow's transport; ps-cluster always
    //  speaks ZeroMQ, so it is ignored too, and said so once.
    if (rc == PS_OK)
        json_object_foreach (root, key, value) {
            if (rc == PS_OK && strcmp (key, "environment") == 0 && !json_is_string (value))
                rc = ps_error_set (err, PS_EINVAL, "%s: 'environment' is not a string (TensorFlow's "
                                   "\"cloud\" or \"local\")", source);
            else
            if (rc == PS_OK && strcmp (key, "rpc_layer") == 0 && !json_is_string (value))
                rc = ps_error_set (err, PS_EINVAL, "%s: 'rpc_layer' is not a string (TensorFlow's "
                                   "\"grpc\")", source);
            else
            if (rc == PS_OK && strcmp (key, "rpc_layer") == 0)
                ps_info ("%s: rpc_layer \"%s\" ignored: ps-cluster always speaks ZeroMQ", source,
                         json_string_value (value));
            else
            if (rc == PS_OK && strcmp (key, "cluster") && strcmp (key, "task")
            &&  strcmp (key, "environment"))
                rc = ps_error_set (err, PS_EINVAL, "%s: unknown key '%s', expected cluster, task, "
                                   "environment or rpc_layer", source, key);
        }
    if (rc == PS_OK && !json_object_get (root, "cluster"))
        rc = ps_error_set (err, PS_EINVAL, "%s: key 'cluster' is missing", source);
    if (rc == PS_OK)
        rc = s_check_cluster (self, json_object_get (root, "cluster"), source, err);
    if (rc == PS_OK)
        s_derive_chief (self);
    if (rc == PS_OK && json_object_get (root, "task"))
        rc = s_check_task (self, json_object_get (root, "task"), source, err);
    if (rc)
        ps_tfconfig_destroy (&self);
    return self;
}

ps_tfconfig_t *
ps_tfconfig_from_env (ps_error_t *err)
{
    const char *text = getenv ("TF_CONFIG");
    if (!text || !*text) {
        ps_error_set (err, PS_ENOTFOUND, "TF_CONFIG is not set");
        return NULL;
    }
    return ps_tfconfig_parse (text, "TF_CONFIG", err);
}

ps_tfconfig_t *
ps_tfconfig_from_file (const char *path, ps_error_t *err)
{
    char *text;
    size_t len;
    if (ps_file_read (path, S_FILE_MAX, &text, &len, err))
        return NULL;
    //  JSON text holds no NUL; one inside the file would end the text early.
    ps_tfconfig_t *self = NULL;
    if (strlen (text) != len)
        ps_error_set (err, PS_EINVAL, "%s: a NUL byte at offset %zu, expected JSON text",
                      path, strlen (text));
    else
        self = ps_tfconfig_parse (text, path, err);
    free (text);
    return self;
}

void
ps_tfconfig_destroy (ps_tfconfig_t **self_p)
{
    assert (self_p);
    ps_tfconfig_t *self = *self_p;
    if (self) {
        json_decref (self->root);
        json_decref (self->derived_chief);
        free (self->derive_error);
        free (self);
        *self_p = NULL;
    }
}

int
ps_tfconfig_count (ps_tfconfig_t *self, const char *type)
{
    assert (self);
    int role = s_role (type);
    return role >= 0 && self->roles [role] ? (int) json_array_size (self->roles [role]) : 0;
}

const char *
ps_tfconfig_address (ps_tfconfig_t *self, const char *type, int index)
{
    assert (self);
    int role = s_role (type);
    if (role < 0 || !self->roles [role] || index < 0)
        return NULL;
    return json_string_value (json_array_get (self->roles [role], (size_t) index));
}

const char *
ps_tfconfig_task_type (ps_tfconfig_t *self)
{
    assert (self);
    return self->task_type;
}

int
ps_tfconfig_task_index (ps_tfconfig_t *self)
{
    assert (self);
    return self->task_index;
}

int
ps_tfconfig_connect_endpoint (ps_tfconfig_t *self, const char *type, int index,
                              char *buf, size_t len, ps_error_t *err)
{
    const char *address = ps_tfconfig_address (self, type, index);
    if (!address)
        return ps_error_set (err, PS_ENOTFOUND, "cluster has no %s task %d", type, index);
    int n = strstr (address, "://") ? snprintf (buf, len, "%s", address)
                                    : snprintf (buf, len, "tcp://%s", address);
    if (n < 0 || (size_t) n >= len)
        return ps_error_set (err, PS_EINVAL, "address %s is too long", address);
    return PS_OK;
}

int
ps_tfconfig_bind_endpoint (ps_tfconfig_t *self, const char *expect_type,
                           char *buf, size_t len, ps_error_t *err)
{
    assert (self);
    if (!self->task_type)
        return ps_error_set (err, PS_EINVAL, "no 'task' given, so this process has no address");
    if (strcmp (self->task_type, expect_type) != 0)
        return ps_error_set (err, PS_EINVAL, "task.type is \"%s\", expected \"%s\"",
                             self->task_type, expect_type);
    //  An evaluator that the cluster does not list has no address to bind.
    const char *address = ps_tfconfig_address (self, self->task_type, self->task_index);
    if (!address)
        return ps_error_set (err, PS_ENOTFOUND, "task %s:%d is not listed in the cluster, so "
                             "it has no address", self->task_type, self->task_index);
    int rc = ps_address_bind (address, buf, len, err);
    if (rc)
        return ps_error_prefix (err, rc, "cluster.%s[%d]", self->task_type, self->task_index);
    return PS_OK;
}

bool
ps_tfconfig_chief_derived (ps_tfconfig_t *self)
{
    assert (self);
    return self->derived_chief != NULL;
}

char *
ps_tfconfig_text_as (ps_tfconfig_t *self, const char *type, int index)
{
    assert (self);
    json_t *copy = json_deep_copy (self->root);
    if (!copy
    ||  json_object_set_new (copy, "task", json_pack ("{s:s, s:i}", "type", type, "index", index)))
        abort ();
    char *text = json_dumps (copy, JSON_COMPACT);
    json_decref (copy);
    if (!text)
        abort ();
    return text;
}
