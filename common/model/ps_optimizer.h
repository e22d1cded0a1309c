//  Optimizers: the update rules a ps-server applies to a partition when a
//  gradient arrives, and that a standalone or mirrored worker applies to its
//  own replica. One implementation serves every role.
//
//  The rules follow Keras (tf.keras.optimizers) so that users see the same
//  behaviour and defaults:
//    weight decay (decoupled):  p -= lr * wd * p            (before the update)
//    clipping by value:         g = clamp (g, -c, c)
//    clipping by norm:          g *= c / max (c, ||g||_2)   (norm of this partition's gradient)
//    SGD:       p -= lr * g
//    momentum:  v = m * v - lr * g;  p += v,   or with Nesterov  p += m * v - lr * g
//    Adagrad:   a += g^2;  p -= lr * g / sqrt (a + eps)
//    Adam:      m += (g - m) (1 - b1);  v += (g^2 - v) (1 - b2);
//               p -= lr * sqrt (1 - b2^t) / (1 - b1^t) * m / (sqrt (v) + eps)
//  where t is the 1-based count of updates applied to the slots.
//
//  The kernels are memory bound; they read the gradient in place from the
//  received message and touch every array once per update (the gradient
//  twice when clipping by norm, which needs the norm first).

#ifndef PS_OPTIMIZER_H_INCLUDED
#define PS_OPTIMIZER_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"

#define PS_OPT_MAX_SLOTS 2

typedef enum {
    PS_OPT_SGD,
    PS_OPT_MOMENTUM,
    PS_OPT_ADAGRAD,
    PS_OPT_ADAM,
} ps_opt_kind_t;

typedef struct {
    ps_opt_kind_t kind;
    double lr;                  //  learning rate, > 0
    double momentum;            //  momentum: 0 <= m < 1 (default 0.9)
    bool nesterov;              //  momentum only
    double beta1, beta2;        //  Adam: 0.9, 0.999
    double epsilon;             //  Adam, Adagrad: 1e-7
    double initial_accumulator; //  Adagrad: 0.1
    double weight_decay;        //  0 = off
    double clip_value;          //  0 = off
    double clip_norm;           //  0 = off
} ps_opt_config_t;

//  Set *cfg to the Keras defaults for kind (lr 0.01 for SGD and momentum,
//  0.001 for Adagrad and Adam).
void ps_opt_config_default (ps_opt_config_t *cfg, ps_opt_kind_t kind);

//  Check ranges and finiteness; the message names the bad field.
int ps_opt_config_validate (const ps_opt_config_t *cfg, ps_error_t *err);

//  The double-valued fields of ps_opt_config_t, by index in a fixed order
//  (lr, momentum, beta1, beta2, epsilon, initial_accumulator, weight_decay,
//  clip_value, clip_norm): the order of the snapshot file, and the names of
//  the wire protocol's optimizer map. One table serves every codec.
#define PS_OPT_NDOUBLES 9
const char *ps_opt_double_name (int index);
double ps_opt_double_get (const ps_opt_config_t *cfg, int index);
void ps_opt_double_set (ps_opt_config_t *cfg, int index, double value);

//  True when a and b differ in any field (the doubles compared bit for
//  bit); then buf (may be NULL) receives the first difference, e.g.
//  "optimizer lr 0.001, not 0.01".
bool ps_opt_config_differs (const ps_opt_config_t *a, const ps_opt_config_t *b, char *buf,
                            size_t len);

//  Parse "sgd", "momentum", "adagrad" or "adam".
int ps_opt_kind_parse (const char *name, ps_opt_kind_t *kind, ps_error_t *err);
const char *ps_opt_kind_name (ps_opt_kind_t kind);

//  Number of float slots of n elements the kind needs per variable:
//  SGD 0, momentum 1 (velocity), Adagrad 1 (accumulator), Adam 2 (m, v).
int ps_opt_slot_count (ps_opt_kind_t kind);

//  Set the slots to their initial values (zeros; Adagrad's accumulator to
//  initial_accumulator).
void ps_opt_init_slots (const ps_opt_config_t *cfg, float **slots, size_t n);

//  Apply one update to params[0..n) with gradient grad[0..n). slots holds
//  ps_opt_slot_count (cfg->kind) arrays of n floats. t is the 1-based number
//  of this update (used by Adam's bias correction). grad is not modified.
void ps_opt_apply (const ps_opt_config_t *cfg, float *params, const float *grad,
                   float **slots, size_t n, uint64_t t);

//  One update split in two, so that a large array can be updated in ranges
//  on several threads: ps_opt_prepare computes the constants of update t
//  over the whole gradient (clipping by norm reads all of it, on the calling
//  thread), then ps_opt_apply_range updates elements [begin, end) with them.
//  Every element's arithmetic is exactly ps_opt_apply's, whatever the
//  ranges, so any split into ranges gives bit-identical params and slots.
typedef struct {
    ps_opt_kind_t kind;
    bool nesterov;
    float decay;                //  1 - lr * weight_decay
    float clip;                 //  clip_value, or infinity when off
    float scale;                //  clip_norm / max (clip_norm, ||g||), or 1
    float lr;
    float momentum;
    float epsilon;
    float alpha;                //  Adam's step size, bias corrected for t
    float one_minus_b1, one_minus_b2;
} ps_opt_update_t;

void ps_opt_prepare (const ps_opt_config_t *cfg, const float *grad, size_t n, uint64_t t,
                     ps_opt_update_t *update);
void ps_opt_apply_range (const ps_opt_update_t *update, float *params, const float *grad,
                         float **slots, size_t begin, size_t end);

//  A way to run fn over [0, n) in ranges of about grain elements, on any
//  threads, returning once every range is done (ps_pool_for on a server).
//  NULL where there is none: the caller then runs [0, n) itself.
typedef void (ps_opt_range_fn) (void *arg, size_t begin, size_t end);
typedef struct {
    void (*run) (void *self, size_t n, size_t grain, ps_opt_range_fn *fn, void *arg);
    void *self;
} ps_opt_runner_t;

#endif
