//  Embedding tables as specified: what every role agrees on about a sparse
//  table before any row exists. A table has a name, a row width, how a row
//  starts, the per-row optimizer that updates it, when a new id earns a row
//  (admission) and when a row is given up (eviction).
//
//  Rows are keyed by 64-bit ids and spread over the servers by hash, not by
//  range, so that the hot ids of a power-law field do not all land on one
//  server and a range that does not split evenly cannot lose keys. The
//  mapping is ps_tablespec_shard_of: a pure function of the id, the table's
//  shard seed and the server count, which the coordinator records in the
//  layout and the checkpoint so that a restore puts every row where the
//  workers will look for it.
//
//  A row's first value is a pure function of (init.seed, id): every server,
//  and a pull of a row that does not exist yet, computes the same numbers,
//  so a gradient computed on an initial value is applied to that value.

#ifndef PS_TABLESPEC_H_INCLUDED
#define PS_TABLESPEC_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"
#include "ps_init.h"
#include "ps_shape.h"

#ifdef __cplusplus
extern "C" {
#endif

//  The widest row a table may have: a bound for the wire decoder and for
//  the memory a single push may ask for.
#define PS_TABLESPEC_MAX_DIM  4096

//  The largest admit_count: the counting filter's counters are bytes that
//  saturate at this value (ps_sparse_stripe.c).
#define PS_TABLESPEC_MAX_ADMIT_COUNT  255

//  The per-row optimizers (ps_rowopt.h applies them):
//    SGD:      w -= lr * g
//    Adagrad:  a += g^2;  w -= lr * g / sqrt (a + eps)          (one slot)
//    Adam:     per-row step t += 1;  m, v as Keras;  w -= lr * sqrt (1 - b2^t) / (1 - b1^t) * m / (sqrt (v) + eps)
//              (two slots; t counts this row's updates, not the global step,
//              so a rarely seen row is not biased by the step count)
//    FTRL-proximal (McMahan et al., KDD 2013; Keras' Ftrl):  slots z and n,
//              sigma = ((n + g^2)^(-lr_power) - n^(-lr_power)) / lr,
//              z += g - sigma * w,  n += g^2,
//              w = |z| <= l1 ? 0 : -(z - sign (z) * l1) / (n^(-lr_power) / lr + beta / lr + 2 * l2)
typedef enum {
    PS_ROWOPT_SGD,
    PS_ROWOPT_ADAGRAD,
    PS_ROWOPT_ADAM,
    PS_ROWOPT_FTRL,
} ps_rowopt_kind_t;

typedef struct {
    ps_rowopt_kind_t kind;
    double lr;                  //  > 0
    double beta1, beta2;        //  Adam: 0.9, 0.999
    double epsilon;             //  Adam, Adagrad: 1e-7
    double initial_accumulator; //  Adagrad's a and FTRL's n at row creation: 0.1
    double l1, l2;              //  FTRL: >= 0
    double lr_power;            //  FTRL: <= 0, -0.5
    double beta;                //  FTRL: >= 0, 0
} ps_rowopt_t;

//  Which rows go first when a shard is over capacity or a row outlives its
//  TTL: the least recently updated (by the step of its last update) or the
//  least frequently updated (by its update count, then the older).
typedef enum {
    PS_EVICT_LRU,
    PS_EVICT_LFU,
} ps_evict_policy_t;

typedef struct {
    char name [PS_NAME_MAX];    //  a variable name (ps_shape.h's rules)
    uint32_t dim;               //  floats per row, 1..PS_TABLESPEC_MAX_DIM
    ps_init_t init;             //  zeros, constant, uniform or normal
    ps_rowopt_t opt;
    //  Admission: a push to an id that has no row creates one only when
    //  the id has now been pushed admit_count times (a counting filter per
    //  shard; 0 or 1: at once) and, when admit_prob < 1, a draw from the
    //  id and its count falls below admit_prob. A push that creates no
    //  row is dropped for that id and counted.
    uint32_t admit_count;
    double admit_prob;          //  (0, 1]; 1: always
    //  Eviction, per shard: at most capacity rows (0: no limit), and no
    //  row whose last update is more than ttl steps behind the newest step
    //  the shard applied (0: no TTL).
    uint64_t capacity;
    uint64_t ttl;
    ps_evict_policy_t policy;
    //  Seeds the id -> server hash (ps_tablespec_shard_of).
    uint64_t shard_seed;
} ps_tablespec_t;

//  Fill *spec with name and dim and the defaults: init uniform
//  [-0.05, 0.05) seed 0, Adagrad lr 0.05, admission at once, no eviction,
//  LRU, shard seed 0.
void ps_tablespec_default (ps_tablespec_t *spec, const char *name, uint32_t dim);

//  Check every field; the message names the table and the field.
int ps_tablespec_validate (const ps_tablespec_t *spec, ps_error_t *err);

//  True when a and b differ; buf (may be NULL) receives the first
//  difference, e.g. "table emb_c1: dim 16, not 8".
bool ps_tablespec_differs (const ps_tablespec_t *a, const ps_tablespec_t *b, char *buf,
                           size_t len);

//  Set *opt to the defaults of kind: Keras's (SGD lr 0.01; Adagrad lr
//  0.001, initial_accumulator 0.1, epsilon 1e-7; Adam lr 0.001, 0.9,
//  0.999, 1e-7; FTRL lr 0.001, lr_power -0.5, initial_accumulator 0.1, no
//  l1, l2 or beta).
void ps_rowopt_default (ps_rowopt_t *opt, ps_rowopt_kind_t kind);

//  Parse "sgd", "adagrad", "adam" or "ftrl", and the reverse.
int ps_rowopt_kind_parse (const char *name, ps_rowopt_kind_t *kind, ps_error_t *err);
const char *ps_rowopt_kind_name (ps_rowopt_kind_t kind);

//  Floats of optimizer state per row element: SGD 0, Adagrad 1, Adam 2,
//  FTRL 2.
int ps_rowopt_slot_count (ps_rowopt_kind_t kind);

//  Parse "lru" or "lfu", and the reverse.
int ps_evict_policy_parse (const char *name, ps_evict_policy_t *policy, ps_error_t *err);
const char *ps_evict_policy_name (ps_evict_policy_t policy);

//  The shard (server index, 0..nshards-1) that holds id: a seeded 64-bit
//  mix of the id reduced to nshards by a multiply-high, so every id maps to
//  exactly one shard and each shard gets an even share of any set of ids.
//  nshards >= 1.
static inline uint32_t
ps_tablespec_shard_of (uint64_t id, uint64_t shard_seed, uint32_t nshards)
{
    uint64_t z = id ^ (shard_seed * 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (uint32_t) (((unsigned __int128) z * nshards) >> 64);
}

//  Fill out [0, dim) with the first value of row id: a pure function of
//  (spec->init, id, j). Uniform and normal take element j of row id from
//  draw j of the counter-based stream (ps_mix.h) keyed by
//  ps_mix64 (seed) ^ ps_mix64 (id + 1); zeros and constant need no draw.
//  The exact formula, for other implementations, heads ps_tablespec.c.
void ps_tablespec_init_row (const ps_tablespec_t *spec, uint64_t id, float *out);

#ifdef __cplusplus
}
#endif

#endif
