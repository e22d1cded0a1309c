//  Partitioners and placement: how the coordinator splits each variable
//  into partitions and which ps-server holds each one.
//
//  The partitioners are TensorFlow's (tf.distribute.experimental.partitioners),
//  with the same arithmetic, and all split along the first axis:
//    fixed     FixedShardsPartitioner (num_shards): min (num_shards, dims[0])
//    min_size  MinSizePartitioner (min_shard_bytes, max_shards):
//              max (1, min (max_shards, dims[0], ceil (bytes / min_shard_bytes)))
//              (TensorFlow rounds up, so a shard may fall below the minimum)
//    max_size  MaxSizePartitioner (max_shard_bytes, max_shards):
//              ceil (dims[0] / max (1, floor (max_shard_bytes / row_bytes))),
//              enough shards that none exceeds max_shard_bytes (a shard holds
//              whole rows, so at least one row), capped by max_shards when > 0
//  where bytes is 4 * the element count and row_bytes 4 * the elements of
//  one row (float32).
//
//  min_size also takes chunk_bytes, which TensorFlow's has not: when it is
//  not 0, a variable gets at least as many shards as max_size would give
//  it at chunk_bytes, max_shards notwithstanding. A large variable's
//  pushes and pulls thus travel as several requests, which a server
//  applies and answers each as it arrives, on its pool's threads, while
//  the next is still on the wire, as BytePS partitions tensors for the
//  same reason; one 16 MB request is instead received whole, applied
//  whole, then answered whole. The default's chunk_bytes,
//  PS_PARTITIONER_CHUNK_BYTES, is large enough that the seed models keep
//  one shard per server; 0 gives TensorFlow's partitioner exactly.
//  A variable of n rows in k shards gives the first n % k shards one row
//  more than the others, as TensorFlow does.
//
//  Placement then balances bytes across servers: partitions are taken
//  largest first (ties in variable order, then partition order) and each
//  goes to the server holding the fewest bytes so far (ties to the lowest
//  index). The result is a pure function of the variables, the
//  partitioner and the number of servers, so a coordinator that restarts
//  places everything where it was.

#ifndef PS_PARTITIONER_H_INCLUDED
#define PS_PARTITIONER_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"
#include "ps_shape.h"

typedef enum {
    PS_PARTITIONER_FIXED,
    PS_PARTITIONER_MIN_SIZE,
    PS_PARTITIONER_MAX_SIZE,
} ps_partitioner_kind_t;

typedef struct {
    ps_partitioner_kind_t kind;
    int num_shards;             //  fixed: >= 1
    int64_t min_shard_bytes;    //  min_size: >= 1 (TensorFlow's default 256 KiB)
    int64_t max_shard_bytes;    //  max_size: >= 1
    int max_shards;             //  min_size: >= 1; max_size: 0 = no cap
    int64_t chunk_bytes;        //  min_size: >= 0, 0 = none; see above
} ps_partitioner_t;

//  The default's chunk_bytes.
#define PS_PARTITIONER_CHUNK_BYTES  (INT64_C (2) << 20)

//  The default: min_size with 256 KiB per shard and at most nservers
//  shards, what TensorFlow's guide recommends for ParameterServerStrategy,
//  and shards of at most PS_PARTITIONER_CHUNK_BYTES.
void ps_partitioner_default (ps_partitioner_t *self, int nservers);

//  Parse "fixed", "min_size" or "max_size".
int ps_partitioner_kind_parse (const char *name, ps_partitioner_kind_t *kind, ps_error_t *err);
const char *ps_partitioner_kind_name (ps_partitioner_kind_t kind);

//  Check the fields the kind uses; the message names the bad field.
int ps_partitioner_validate (const ps_partitioner_t *self, ps_error_t *err);

//  Number of shards for a float32 variable of this shape (>= 1, and never
//  more than dims[0]). The partitioner must be valid and the shape too.
int ps_partitioner_shards (const ps_partitioner_t *self, const ps_shape_t *shape);

//  Row boundaries for k shards of n rows into splits (k + 1 entries):
//  splits[0] = 0, splits[k] = n, the first n % k shards one row longer.
void ps_partitioner_splits (int64_t n, int k, int64_t *splits);

//  The placement of a set of variables.
typedef struct {
    int nparts;
    int64_t *splits;            //  nparts + 1 row boundaries
    int *servers;               //  nparts server indices
} ps_placed_var_t;

typedef struct _ps_placement_t ps_placement_t;

//  Split every variable (shapes[i], i < nvars) with the partitioner and
//  place the partitions on nservers servers. Returns NULL and sets err when
//  the partitioner is invalid (PS_EINVAL), nservers < 1 (PS_EINVAL), a shape
//  is invalid: rank 0, a dimension < 1 or more than 2^40 elements
//  (PS_ESHAPE), or memory runs out (PS_ETOOBIG).
ps_placement_t *ps_placement_new (const ps_partitioner_t *partitioner,
                                  const ps_shape_t *shapes, int nvars, int nservers,
                                  ps_error_t *err);

void ps_placement_destroy (ps_placement_t **self_p);

//  Variable i's partitions (owned by the placement).
const ps_placed_var_t *ps_placement_var (const ps_placement_t *self, int i);

//  Bytes placed on server s.
int64_t ps_placement_server_bytes (const ps_placement_t *self, int s);

#endif
