//  The cluster spec in TensorFlow's TF_CONFIG format:
//
//    {"cluster": {"chief": ["host:port"], "worker": [...], "ps": [...],
//                 "evaluator": [...]},
//     "task": {"type": "worker", "index": 0}}
//
//  Kubeflow's TFJob operator writes exactly this, with the task type in
//  lower case and a top-level "environment": "cloud", which is ignored.
//  TensorFlow's own top-level "rpc_layer" ("grpc") is ignored too, with an
//  info line saying so: ps-cluster always speaks ZeroMQ.
//
//  Two shapes of TensorFlow's documentation are taken as they are:
//    - a side-car evaluator started with the cluster of chief, workers and
//      ps only and the task {"type": "evaluator", "index": 0}: the
//      evaluator is a client and needs no address of its own;
//    - a cluster of workers only (MultiWorkerMirroredStrategy's), with no
//      chief: the coordinator's address is derived, worker 0's host with
//      worker 0's port + 1, by every process alike, and it counts as task
//      chief:0 (ps-worker worker:0 starts the coordinator there). Where
//      that rule cannot be applied (the port is 65535, worker 0 is not
//      host:port, or the address is another task's) asking for the
//      coordinator is an error that names both addresses.
//
//  Every ps-cluster process reads the same spec, from the TF_CONFIG
//  environment variable or from a file with the same JSON. Parsing checks
//  the whole spec and names the source, the key and what was expected on
//  any mistake. An address is "host:port", or a full ZeroMQ endpoint
//  ("tcp://...", "ipc://...") as a ps-cluster extension; every address is
//  checked as ps_address.h describes (a port in 1..65535, a host that is
//  an IP literal or a DNS name) when the spec is parsed.

#ifndef PS_TFCONFIG_H_INCLUDED
#define PS_TFCONFIG_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#include "ps_error.h"

typedef struct _ps_tfconfig_t ps_tfconfig_t;

//  Parse JSON text; source names it in error messages ("TF_CONFIG", a
//  file name). Returns NULL and sets err on bad JSON, an unknown key, a
//  role that is not a list of address strings, an address that is not
//  well formed (the message names the key, "cluster.worker[1]", the address
//  and what is wrong with it), a duplicate address, more than one chief, or
//  a task whose type is unknown or absent from the cluster (evaluator:0
//  excepted, above) or whose index is out of range, or an "rpc_layer" that
//  is not a string. The task is optional.
ps_tfconfig_t *ps_tfconfig_parse (const char *text, const char *source, ps_error_t *err);

//  Parse the TF_CONFIG environment variable; PS_ENOTFOUND when unset.
ps_tfconfig_t *ps_tfconfig_from_env (ps_error_t *err);

//  Parse a file holding the same JSON.
ps_tfconfig_t *ps_tfconfig_from_file (const char *path, ps_error_t *err);

void ps_tfconfig_destroy (ps_tfconfig_t **self_p);

//  Number of tasks of a type ("chief", "worker", "ps", "evaluator"); a
//  chiefless cluster's derived chief counts.
int ps_tfconfig_count (ps_tfconfig_t *self, const char *type);

//  The address of task (type, index), or NULL when out of range.
const char *ps_tfconfig_address (ps_tfconfig_t *self, const char *type, int index);

//  This process's task, or NULL / -1 when the spec has none.
const char *ps_tfconfig_task_type (ps_tfconfig_t *self);
int ps_tfconfig_task_index (ps_tfconfig_t *self);

//  Set this process's task (a --task option, or a cluster file shared by
//  every process, which names no task). PS_EINVAL when the type is unknown
//  or the index is out of range for the cluster.
int ps_tfconfig_set_task (ps_tfconfig_t *self, const char *type, int index, ps_error_t *err);

//  The endpoint of the coordinator (task chief:0, listed or derived).
//  PS_ENOTFOUND when the cluster has neither a chief nor a worker, and
//  PS_EINVAL naming both addresses when the derived one is another task's.
int ps_tfconfig_coordinator_endpoint (ps_tfconfig_t *self, char *buf, size_t len,
                                      ps_error_t *err);

//  Parse a --task option, "TYPE:INDEX" (worker:0), into type (len bytes)
//  and index. PS_EINVAL naming the text when it is not of that form or the
//  index is not a whole number in [0, 1000000].
int ps_tfconfig_parse_task (const char *text, char *type, size_t len, int *index,
                            ps_error_t *err);

//  The ZeroMQ endpoint to connect to task (type, index): "tcp://host:port"
//  for a host:port address.
int ps_tfconfig_connect_endpoint (ps_tfconfig_t *self, const char *type, int index,
                                  char *buf, size_t len, ps_error_t *err);

//  The endpoint this process binds: its own task's address, which must be
//  of type expect_type, bound as ps_address_bind does (an IP literal as
//  given, "localhost" as 127.0.0.1, a host name at the address it resolves
//  to here, never every interface). PS_ENOTFOUND for an evaluator the
//  cluster does not list (it has no address). PS_EINVAL naming the key when the
//  name does not resolve.
int ps_tfconfig_bind_endpoint (ps_tfconfig_t *self, const char *expect_type,
                               char *buf, size_t len, ps_error_t *err);

//  Whether the chief is derived from worker 0 (the cluster lists none).
bool ps_tfconfig_chief_derived (ps_tfconfig_t *self);

//  The spec's JSON, as parsed, with its task set to (type, index): for a
//  process started with the same spec as another task. Free it.
char *ps_tfconfig_text_as (ps_tfconfig_t *self, const char *type, int index);

#endif
