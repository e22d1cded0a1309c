//  The job plan: what the coordinator tells a worker or evaluator when it
//  registers (the "plan" field of register_ok in schemas/protocol.json).
//  It holds everything a worker needs to train on its own: the model spec
//  as JSON text (so a user's model file need not exist on the worker's
//  machine), the data directory and limits, the batch, the seed that
//  drives shuffling and dropout, the compute settings, and the layout of
//  the variables over the servers.

#ifndef PS_PLAN_H_INCLUDED
#define PS_PLAN_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_client.h"
#include "ps_error.h"
#include "ps_optimizer.h"
#include "ps_proto.h"
#include "ps_shape.h"

typedef struct {
    char var [PS_NAME_MAX];
    ps_shape_t shape;
    int nparts;
    int64_t *splits;            //  nparts + 1 row boundaries
    int *servers;               //  nparts server indices
} ps_plan_var_t;

typedef struct {
    char *model;                //  model spec, JSON text
    int batch_size;
    uint64_t seed;
    char *data_dir;
    //  Click-through-rate models read text files rather than IDX ones:
    //  data_format is "criteo" or "libsvm" for them ("idx" for the image
    //  models, whose data is in data_dir), and train_data and test_data
    //  are the files (NULL for idx).
    char data_format [8];
    char *train_data, *test_data;
    //  An image model's IDX files by name (NULL: data_dir's files of
    //  Fashion-MNIST's names), each split's pair set together.
    char *train_images, *train_labels, *test_images, *test_labels;
    //  data_format "csv": a classifier's CSV files are train_data and
    //  test_data, and this column holds the labels (NULL otherwise).
    char *label_column;
    uint64_t train_limit, test_limit;
    int threads;
    char device [8];            //  cpu, gpu or auto
    int nservers;
    char **servers;             //  ZeroMQ endpoints
    int nvars;
    ps_plan_var_t *vars;
    int client_timeout_ms;
    uint64_t steps_per_epoch;
    uint64_t total_steps;
    int eval_batch;
    bool overlap;               //  push step k while computing step k + 1
    //  Mirrored mode: every worker holds a replica and the ring sums the
    //  gradients (worker/ps_mirror.h). The plan then lists no servers, and
    //  each variable has one partition, on "server" 0: the replica.
    bool mirrored;
    //  Sync mode: the servers apply each round's mean gradient once; a
    //  worker pushes with the work's round (worker/ps_wmode_sync.c).
    bool sync;
    ps_opt_config_t optimizer;  //  the job's optimizer (the replicas apply it)
} ps_plan_t;

//  Describe plan as the protocol's "plan" struct, for a register_ok. *out
//  points into plan's strings and into arrays allocated here, which
//  ps_plan_proto_release frees once the message is encoded.
void ps_plan_to_proto (const ps_plan_t *plan, ps_proto_plan_t *out);
void ps_plan_proto_release (ps_proto_plan_t *out);

//  Read a decoded "plan" (register_ok's plan, whose values the decoder has
//  held to protocol.json's bounds) into *plan, which owns copies (release
//  it). Returns 0, or PS_EPROTO / PS_ESHAPE (changing nothing) when the
//  fields disagree with each other or the placement is inconsistent.
int ps_plan_read (ps_plan_t *plan, const ps_proto_plan_t *in, ps_error_t *err);

//  Free what *plan owns and zero it. Also for plans built by hand with
//  heap fields.
void ps_plan_release (ps_plan_t *plan);

//  A client of the plan's servers with every variable of the plan added;
//  inits[i] (may be NULL: zeros) initialises variable i when created.
//  curve is this process's identity (NULL: unsecured; see ps_client_new).
ps_client_t *ps_plan_client (const ps_plan_t *plan, const ps_init_t *inits, ps_curve_t *curve,
                             ps_error_t *err);

#endif
