//  The Slurm cluster resolver: inside a Slurm job step, each task derives
//  the cluster spec (the same one TF_CONFIG gives, ps_tfconfig.h) and its
//  own task in it from the variables Slurm sets, as TensorFlow's
//  SlurmClusterResolver does. Every program takes it as
//  `--cluster-resolver slurm[:ps=N][,evaluator][,port=P]`.
//
//  The step's tasks, by rank (SLURM_PROCID, 0 .. SLURM_NTASKS - 1), are:
//  rank 0 the chief (the coordinator), ranks 1 .. N the servers (ps:0 ..
//  ps:N-1), then the workers, and, with `evaluator`, the last rank the
//  evaluator. Ranks are laid out on the step's nodes as Slurm's default
//  block distribution does: the first node (SLURM_STEP_NODELIST, expanded
//  as Slurm does) holds the first ranks, as many as its entry of
//  SLURM_STEP_TASKS_PER_NODE says ("2(x3),1"), and so on. A task's
//  address is its node's name and the port P (default
//  PS_SLURM_PORT_BASE) plus its local index on that node (SLURM_LOCALID),
//  so tasks sharing a node never share a port. Outside a step the job's
//  variables (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE, SLURM_NTASKS) are
//  read instead. A step laid out otherwise (--distribution=cyclic) is
//  refused: this task's own node and local index are checked against the
//  layout.
//
//  Only the variables are read; nothing here talks to Slurm.

#ifndef PS_SLURM_H_INCLUDED
#define PS_SLURM_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#include "ps_error.h"
#include "ps_tfconfig.h"

//  The default base port: a task listens on it plus its local index.
#define PS_SLURM_PORT_BASE 24000

//  The most hosts a node list may expand to.
#define PS_SLURM_MAX_HOSTS 65536

//  What --cluster-resolver slurm[:...] says.
typedef struct {
    int ps;                     //  servers (default 1)
    bool evaluator;             //  the last rank is an evaluator
    int port_base;              //  default PS_SLURM_PORT_BASE
} ps_slurm_options_t;

//  Parse the text of --cluster-resolver: "slurm", optionally followed by
//  ":" and a comma-separated list of ps=N (0..1000), evaluator and port=P
//  (1..65535). PS_EINVAL naming the text and what was expected.
int ps_slurm_parse_options (const char *text, ps_slurm_options_t *opt, ps_error_t *err);

//  Expand a Slurm host list ("node[01-04,07]", "a[1-2],b3",
//  "rack[1-2]-n[01-02]") into *hosts (count strings; free them with
//  ps_slurm_hosts_free), in Slurm's order: items left to right, and in an
//  item with several bracket groups the first group varying slowest. A
//  range keeps the zero padding of its lower bound ("[08-10]": 08 09 10).
//  PS_EINVAL naming the list and what is wrong with it (an unbalanced or
//  empty bracket, a range that is not N or N-M with N <= M, an empty
//  name, more than PS_SLURM_MAX_HOSTS hosts).
int ps_slurm_expand_nodelist (const char *list, char ***hosts, size_t *count, ps_error_t *err);

//  Free what ps_slurm_expand_nodelist made.
void ps_slurm_hosts_free (char **hosts, size_t count);

//  Expand a tasks-per-node list ("2(x3),1") into counts[0 .. nodes - 1].
//  PS_EINVAL naming the text when it is malformed or does not give
//  exactly `nodes` counts.
int ps_slurm_tasks_per_node (const char *text, int *counts, size_t nodes, ps_error_t *err);

//  Resolve the cluster from the Slurm variables of this process's
//  environment: *cluster becomes the JSON of TF_CONFIG's "cluster" (a new
//  string: free it), and type (len bytes) and *index this task's. Returns
//  0, or PS_ENOTFOUND naming the first variable missing (not in a Slurm
//  step), or PS_EINVAL naming the variable whose value is wrong, or too
//  few tasks for the chief, the servers, the evaluator and one worker.
int ps_slurm_resolve (const ps_slurm_options_t *opt, char **cluster, char *type, size_t len,
                      int *index, ps_error_t *err);

//  The cluster spec, with this task set, of --cluster-resolver `text`:
//  options parsed, the cluster resolved and given to ps_tfconfig_parse.
//  With cluster non-NULL *cluster also becomes the cluster's JSON (free
//  it). Returns NULL with err set as the calls above do.
ps_tfconfig_t *ps_slurm_tfconfig (const char *text, char **cluster, ps_error_t *err);

#endif
