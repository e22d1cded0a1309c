//  Optimizers; see ps_optimizer.h for the update rules.
//
//  Each rule is one loop that reads and writes every array once, so that
//  the update runs at memory speed. The optional features cost no extra
//  pass and no branch per element: weight decay multiplies the parameter
//  by a factor that is 1 when it is off, and clipping computes
//
//      g' = clamp (g, -clip_value, clip_value) * scale
//
//  on the fly, with clip_value = infinity and scale = 1 when off. Those
//  neutral values leave every number bitwise unchanged, so a configuration
//  without the features gets exactly the plain rule. The gradient is read in
//  place from the received message and never written.
//
//  Only clipping by norm needs a pass of its own, to compute the norm before
//  the update; it accumulates in double with a fixed association order, so
//  the result does not depend on the instruction set the kernels run on.
//
//  The kernels are compiled twice, for AVX2 and for the baseline x86-64,
//  and the loader picks the AVX2 copy where the CPU has it, so a portable
//  binary still runs 8 lanes wide. The AVX2 clone deliberately does not
//  enable FMA: fused multiply-adds round differently, and servers on
//  different hardware must compute bitwise the same update.

#include "ps_optimizer.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#if defined (__x86_64__)
#   define S_HOT  __attribute__ ((target_clones ("avx2", "default")))
#else
#   define S_HOT
#endif

//  Independent partial sums in the norm pass. Eight lanes of double fill
//  two AVX2 registers and hide the latency of the additions.
#define S_NORM_LANES  8

static const char *s_kind_names [] = {
    [PS_OPT_SGD]      = "sgd",
    [PS_OPT_MOMENTUM] = "momentum",
    [PS_OPT_ADAGRAD]  = "adagrad",
    [PS_OPT_ADAM]     = "adam",
};

#define S_KIND_COUNT  (sizeof s_kind_names / sizeof s_kind_names [0])

//  The per-update constants shared by every kernel, already in float so that
//  the loops do float arithmetic only.
typedef struct {
    float decay;        //  1 - lr * weight_decay
    float clip;         //  clip_value, or infinity when off
    float scale;        //  clip_norm / max (clip_norm, ||g||), or 1
} s_prologue_t;

//  Clamping with comparisons rather than fminf/fmaxf lets the compiler use
//  min/max instructions: the C functions must treat NaN specially and would
//  not vectorise. A NaN gradient passes through unchanged either way.
static inline float
s_clip (float g, float clip, float scale)
{
    g = g < -clip ? -clip : g;
    g = g > clip ? clip : g;
    return g * scale;
}

S_HOT static double
s_norm (const float *restrict grad, size_t n, float clip)
{
    double sum [S_NORM_LANES] = { 0 };
    size_t i = 0;
    for (; i + S_NORM_LANES <= n; i += S_NORM_LANES)
        for (size_t lane = 0; lane < S_NORM_LANES; lane++) {
            double g = s_clip (grad [i + lane], clip, 1.0f);
            sum [lane] += g * g;
        }
    for (size_t lane = 0; i < n; i++, lane++) {
        double g = s_clip (grad [i], clip, 1.0f);
        sum [lane] += g * g;
    }
    double total = 0.0;
    for (size_t lane = 0; lane < S_NORM_LANES; lane++)
        total += sum [lane];
    return sqrt (total);
}

S_HOT static void
s_sgd (float *restrict p, const float *restrict grad, size_t n,
       s_prologue_t pro, float lr)
{
    for (size_t i = 0; i < n; i++) {
        float g = s_clip (grad [i], pro.clip, pro.scale);
        p [i] = p [i] * pro.decay - lr * g;
    }
}

S_HOT static void
s_momentum (float *restrict p, const float *restrict grad, float *restrict v,
            size_t n, s_prologue_t pro, float lr, float m)
{
    for (size_t i = 0; i < n; i++) {
        float g = s_clip (grad [i], pro.clip, pro.scale);
        float velocity = m * v [i] - lr * g;
        v [i] = velocity;
        p [i] = p [i] * pro.decay + velocity;
    }
}

S_HOT static void
s_nesterov (float *restrict p, const float *restrict grad, float *restrict v,
            size_t n, s_prologue_t pro, float lr, float m)
{
    for (size_t i = 0; i < n; i++) {
        float g = s_clip (grad [i], pro.clip, pro.scale);
        float velocity = m * v [i] - lr * g;
        v [i] = velocity;
        p [i] = p [i] * pro.decay + (m * velocity - lr * g);
    }
}

S_HOT static void
s_adagrad (float *restrict p, const float *restrict grad, float *restrict acc,
           size_t n, s_prologue_t pro, float lr, float eps)
{
    for (size_t i = 0; i < n; i++) {
        float g = s_clip (grad [i], pro.clip, pro.scale);
        float a = acc [i] + g * g;
        acc [i] = a;
        p [i] = p [i] * pro.decay - lr * g / sqrtf (a + eps);
    }
}

S_HOT static void
s_adam (float *restrict p, const float *restrict grad, float *restrict m,
        float *restrict v, size_t n, s_prologue_t pro, float alpha,
        float one_minus_b1, float one_minus_b2, float eps)
{
    for (size_t i = 0; i < n; i++) {
        float g = s_clip (grad [i], pro.clip, pro.scale);
        float mi = m [i] + (g - m [i]) * one_minus_b1;
        float vi = v [i] + (g * g - v [i]) * one_minus_b2;
        m [i] = mi;
        v [i] = vi;
        p [i] = p [i] * pro.decay - (mi * alpha) / (sqrtf (vi) + eps);
    }
}

void
ps_opt_config_default (ps_opt_config_t *cfg, ps_opt_kind_t kind)
{
    memset (cfg, 0, sizeof *cfg);
    cfg->kind = kind;
    cfg->lr = kind == PS_OPT_SGD || kind == PS_OPT_MOMENTUM ? 0.01 : 0.001;
    cfg->momentum = 0.9;
    cfg->beta1 = 0.9;
    cfg->beta2 = 0.999;
    cfg->epsilon = 1e-7;
    cfg->initial_accumulator = 0.1;
}

//  Check that field name holds a finite value in [low, high) or, when
//  low_open, in (low, high).
static int
s_check_range (const char *name, double value, double low, bool low_open,
               double high, ps_error_t *err)
{
    bool ok = isfinite (value)
           && (low_open ? value > low : value >= low)
           && value < high;
    if (ok)
        return PS_OK;
    return ps_error_set (err, PS_EINVAL, "optimizer %s is %g, expected a finite number in %c%g, %g)",
                         name, value, low_open ? '(' : '[', low, high);
}

int
ps_opt_config_validate (const ps_opt_config_t *cfg, ps_error_t *err)
{
    if ((unsigned) cfg->kind >= S_KIND_COUNT)
        return ps_error_set (err, PS_EINVAL, "optimizer kind is %d, expected 0..%d",
                             (int) cfg->kind, (int) S_KIND_COUNT - 1);
    //  Only the fields the kind reads are checked, so that a configuration
    //  need not fill in values it does not use.
    int rc = s_check_range ("lr", cfg->lr, 0, true, INFINITY, err);
    if (rc == PS_OK)
        rc = s_check_range ("weight_decay", cfg->weight_decay, 0, false, INFINITY, err);
    if (rc == PS_OK)
        rc = s_check_range ("clip_value", cfg->clip_value, 0, false, INFINITY, err);
    if (rc == PS_OK)
        rc = s_check_range ("clip_norm", cfg->clip_norm, 0, false, INFINITY, err);
    if (rc == PS_OK && cfg->kind == PS_OPT_MOMENTUM)
        rc = s_check_range ("momentum", cfg->momentum, 0, false, 1, err);
    if (rc == PS_OK && cfg->kind == PS_OPT_ADAGRAD)
        rc = s_check_range ("initial_accumulator", cfg->initial_accumulator,
                            0, false, INFINITY, err);
    if (rc == PS_OK && cfg->kind == PS_OPT_ADAM)
        rc = s_check_range ("beta1", cfg->beta1, 0, false, 1, err);
    if (rc == PS_OK && cfg->kind == PS_OPT_ADAM)
        rc = s_check_range ("beta2", cfg->beta2, 0, false, 1, err);
    if (rc == PS_OK && (cfg->kind == PS_OPT_ADAGRAD || cfg->kind == PS_OPT_ADAM))
        rc = s_check_range ("epsilon", cfg->epsilon, 0, true, INFINITY, err);
    return rc;
}

int
ps_opt_kind_parse (const char *name, ps_opt_kind_t *kind, ps_error_t *err)
{
    for (size_t i = 0; i < S_KIND_COUNT; i++)
        if (strcmp (name, s_kind_names [i]) == 0) {
            *kind = (ps_opt_kind_t) i;
            return PS_OK;
        }
    return ps_error_set (err, PS_EINVAL,
                         "unknown optimizer '%s', expected sgd, momentum, adagrad or adam",
                         name);
}

const char *
ps_opt_kind_name (ps_opt_kind_t kind)
{
    if ((unsigned) kind >= S_KIND_COUNT)
        return "unknown";
    return s_kind_names [kind];
}

int
ps_opt_slot_count (ps_opt_kind_t kind)
{
    switch (kind) {
        case PS_OPT_SGD:
            return 0;
        case PS_OPT_MOMENTUM:
        case PS_OPT_ADAGRAD:
            return 1;
        case PS_OPT_ADAM:
            return 2;
    }
    return 0;
}

void
ps_opt_init_slots (const ps_opt_config_t *cfg, float **slots, size_t n)
{
    float initial = cfg->kind == PS_OPT_ADAGRAD ? (float) cfg->initial_accumulator : 0.0f;
    for (int s = 0; s < ps_opt_slot_count (cfg->kind); s++)
        for (size_t i = 0; i < n; i++)
            slots [s][i] = initial;
}

void
ps_opt_prepare (const ps_opt_config_t *cfg, const float *grad, size_t n, uint64_t t,
                ps_opt_update_t *update)
{
    *update = (ps_opt_update_t) {
        .kind = cfg->kind,
        .nesterov = cfg->nesterov,
        .decay = (float) (1.0 - cfg->lr * cfg->weight_decay),
        .clip = cfg->clip_value > 0 ? (float) cfg->clip_value : INFINITY,
        .scale = 1.0f,
        .lr = (float) cfg->lr,
        .momentum = (float) cfg->momentum,
        .epsilon = (float) cfg->epsilon,
    };
    if (cfg->clip_norm > 0) {
        double norm = s_norm (grad, n, update->clip);
        update->scale = (float) (cfg->clip_norm / fmax (cfg->clip_norm, norm));
    }
    if (cfg->kind == PS_OPT_ADAM) {
        //  The bias correction folds into one step size computed in
        //  double; t = 0 would divide by zero.
        assert (t >= 1);
        double b1t = pow (cfg->beta1, (double) t);
        double b2t = pow (cfg->beta2, (double) t);
        update->alpha = (float) (cfg->lr * sqrt (1.0 - b2t) / (1.0 - b1t));
        update->one_minus_b1 = (float) (1.0 - cfg->beta1);
        update->one_minus_b2 = (float) (1.0 - cfg->beta2);
    }
}

void
ps_opt_apply_range (const ps_opt_update_t *update, float *params, const float *grad,
                    float **slots, size_t begin, size_t end)
{
    assert (begin <= end);
    const ps_opt_update_t *u = update;
    s_prologue_t pro = { .decay = u->decay, .clip = u->clip, .scale = u->scale };
    size_t n = end - begin;
    float *p = params + begin;
    const float *g = grad + begin;
    switch (u->kind) {
        case PS_OPT_SGD:
            s_sgd (p, g, n, pro, u->lr);
            break;
        case PS_OPT_MOMENTUM:
            if (u->nesterov)
                s_nesterov (p, g, slots [0] + begin, n, pro, u->lr, u->momentum);
            else
                s_momentum (p, g, slots [0] + begin, n, pro, u->lr, u->momentum);
            break;
        case PS_OPT_ADAGRAD:
            s_adagrad (p, g, slots [0] + begin, n, pro, u->lr, u->epsilon);
            break;
        case PS_OPT_ADAM:
            s_adam (p, g, slots [0] + begin, slots [1] + begin, n, pro, u->alpha,
                    u->one_minus_b1, u->one_minus_b2, u->epsilon);
            break;
    }
}

void
ps_opt_apply (const ps_opt_config_t *cfg, float *params, const float *grad,
              float **slots, size_t n, uint64_t t)
{
    ps_opt_update_t update;
    ps_opt_prepare (cfg, grad, n, t, &update);
    ps_opt_apply_range (&update, params, grad, slots, 0, n);
}

static const char *s_double_names [PS_OPT_NDOUBLES] = {
    "lr", "momentum", "beta1", "beta2", "epsilon", "initial_accumulator",
    "weight_decay", "clip_value", "clip_norm",
};

//  The field behind an index; const-ness is restored by the callers.
static double *
s_double_field (ps_opt_config_t *cfg, int index)
{
    double *fields [PS_OPT_NDOUBLES] = {
        &cfg->lr, &cfg->momentum, &cfg->beta1, &cfg->beta2, &cfg->epsilon,
        &cfg->initial_accumulator, &cfg->weight_decay, &cfg->clip_value, &cfg->clip_norm,
    };
    assert (index >= 0 && index < PS_OPT_NDOUBLES);
    return fields [index];
}

const char *
ps_opt_double_name (int index)
{
    assert (index >= 0 && index < PS_OPT_NDOUBLES);
    return s_double_names [index];
}

double
ps_opt_double_get (const ps_opt_config_t *cfg, int index)
{
    return *s_double_field ((ps_opt_config_t *) cfg, index);
}

void
ps_opt_double_set (ps_opt_config_t *cfg, int index, double value)
{
    *s_double_field (cfg, index) = value;
}

bool
ps_opt_config_differs (const ps_opt_config_t *a, const ps_opt_config_t *b, char *buf,
                       size_t len)
{
    char scratch [8];
    if (!buf) {
        buf = scratch;
        len = sizeof scratch;
    }
    if (a->kind != b->kind) {
        snprintf (buf, len, "optimizer %s, not %s", ps_opt_kind_name (a->kind),
                  ps_opt_kind_name (b->kind));
        return true;
    }
    if (a->nesterov != b->nesterov) {
        snprintf (buf, len, "nesterov %d, not %d", a->nesterov, b->nesterov);
        return true;
    }
    for (int i = 0; i < PS_OPT_NDOUBLES; i++) {
        double x = ps_opt_double_get (a, i), y = ps_opt_double_get (b, i);
        if (memcmp (&x, &y, sizeof x) != 0) {
            //  Short numbers where they tell the two apart, all digits
            //  where only those do.
            char a_text [32], b_text [32];
            snprintf (a_text, sizeof a_text, "%g", x);
            snprintf (b_text, sizeof b_text, "%g", y);
            if (strcmp (a_text, b_text) == 0) {
                snprintf (a_text, sizeof a_text, "%.17g", x);
                snprintf (b_text, sizeof b_text, "%.17g", y);
            }
            snprintf (buf, len, "optimizer %s %s, not %s", ps_opt_double_name (i), a_text,
                      b_text);
            return true;
        }
    }
    return false;
}
