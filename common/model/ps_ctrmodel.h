//  The click-through-rate part of a model (schemas/model.md): what a spec
//  with "inputs" adds to ps_model.h's layers and variables. Such a model
//  takes examples of dense numeric features and categorical fields (each
//  holding zero or more 64-bit ids, with a weight each), looks the ids up
//  in embedding tables, pools each field's rows into one vector, puts the
//  fields' vectors and the dense features side by side (Concatenate) and
//  runs Dense layers down to one logit, whose sigmoid is the probability
//  of a click, trained with binary cross-entropy. A wide Embedding (dim 1)
//  adds its output straight to the logit instead: a linear model's
//  per-id weights.
//
//  The Dense layers and their variables are ps_model.h's, in the flat
//  parameter vector as for any model, so the dense partitions and
//  optimizers serve them unchanged. The embeddings own no variables: their
//  rows live in tables (ps_tablespec.h), one per field or one shared by
//  several fields, created on first touch on the servers. This module
//  holds the embeddings' geometry and the tables' specs; ps_model.c reads
//  a spec and calls it for the layers only a CTR model has.

#ifndef PS_CTRMODEL_H_INCLUDED
#define PS_CTRMODEL_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "ps_error.h"
#include "ps_mix.h"
#include "ps_optimizer.h"
#include "ps_tablespec.h"

#ifdef __cplusplus
extern "C" {
#endif

//  The most categorical fields an example may have.
#define PS_CTR_MAX_FIELDS  256

//  How the rows of one field's ids become one vector: the weighted sum, or
//  the weighted sum divided by the weights' sum (0 for a field without ids).
typedef enum {
    PS_CTR_POOL_SUM,
    PS_CTR_POOL_MEAN,
} ps_ctr_pooling_t;

typedef struct {
    int layer;                  //  its index among the model's layers
    uint32_t dim;               //  floats per row
    int nfields;
    int fields [PS_CTR_MAX_FIELDS]; //  the fields it embeds, in order
    bool shared;                //  one table for every field, its ids salted by field
    ps_ctr_pooling_t pooling;
    bool sum_fields;            //  the fields' vectors added ([dim]); else side by side
    bool wide;                  //  output added to the logit, not concatenated
    int table;                  //  its first table: field j's is table + j unless shared
    int out_size;               //  output floats per example
    int out_offset;             //  where its output starts in Concatenate's; -1 when wide
} ps_ctr_embedding_t;

typedef struct {
    ps_tablespec_t spec;        //  name LAYER/fF (per field) or LAYER/table (shared)
    int embedding;              //  the embedding that reads it
    int field;                  //  a per-field table's field; -1 when shared
} ps_ctr_table_t;

typedef struct {
    int dense;                  //  dense features per example
    int fields;                 //  categorical fields per example
    int embedding_count;
    ps_ctr_embedding_t *embeddings;
    int table_count;
    ps_ctr_table_t *tables;
    int concat;                 //  features out of Concatenate: embeddings', then dense
    bool has_wide;              //  some embedding is wide
    ps_opt_config_t optimizer;  //  the dense variables' in standalone training
} ps_ctrmodel_t;

//  The key under which embedding e looks up id of its field j: the id
//  itself in a per-field table; in a shared table the id salted by its
//  field, so that the same id in two fields names two rows.
static inline uint64_t
ps_ctrmodel_key (const ps_ctr_embedding_t *e, int j, uint64_t id)
{
    return e->shared ? id ^ ps_mix64 ((uint64_t) e->fields [j] + 1) : id;
}

//  Start the CTR part of a model from its spec's "inputs" and "optimizer"
//  (checked by the schema; optimizer may be NULL: Adam 0.001). NULL with
//  err set when memory is short. where names the spec in messages.
ps_ctrmodel_t *ps_ctrmodel_new (const json_t *inputs, const json_t *optimizer,
                                const char *where, ps_error_t *err);
void ps_ctrmodel_destroy (ps_ctrmodel_t **self_p);

//  Add the Embedding layer obj (checked by the schema; its fields'
//  defaults in defs, the schema's $defs) named name, layer `layer` of the
//  model, with its tables. Sets *out_size to its output floats per example
//  (0 when wide). The message names where and the field at fault.
int ps_ctrmodel_add_embedding (ps_ctrmodel_t *self, int layer, const char *name,
                               const json_t *obj, const json_t *defs, const char *where,
                               int *out_size, ps_error_t *err);

//  The Concatenate layer: lay out the embeddings' outputs and the dense
//  features. Returns the features it gives.
int ps_ctrmodel_concatenate (ps_ctrmodel_t *self);

//  The index of the table called name, or -1.
int ps_ctrmodel_find_table (const ps_ctrmodel_t *self, const char *name);

#ifdef __cplusplus
}
#endif

#endif
