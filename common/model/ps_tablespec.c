//  Embedding table specs; see ps_tablespec.h.
//
//  The first value of row id, element j, for other implementations:
//
//      key = mix64 (init.seed) ^ mix64 (id + 1)
//      u_c = (mix64 (key + (c + 1) * 0x9e3779b97f4a7c15) >> 11) * 2^-53
//
//  with mix64 the splitmix64 finalizer of ps_mix.h. Uniform takes
//  low + (high - low) * u_j, rounded to float, and a value rounded up to
//  high becomes the largest float below it. Normal takes
//  mean + stddev * sqrt (-2 ln (1 - u_2j)) * cos (2 pi u_2j+1), in double,
//  rounded to float once. Zeros and constant need no draw. These are the
//  formulas of ps_init.c over a stream keyed by the row, not by the
//  element's place in a shaped variable, which a table does not have.

#include "ps_mix.h"
#include "ps_tablespec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *s_rowopt_names [] = {
    [PS_ROWOPT_SGD]     = "sgd",
    [PS_ROWOPT_ADAGRAD] = "adagrad",
    [PS_ROWOPT_ADAM]    = "adam",
    [PS_ROWOPT_FTRL]    = "ftrl",
};
#define S_ROWOPT_COUNT  (sizeof s_rowopt_names / sizeof s_rowopt_names [0])

static const char *s_policy_names [] = {
    [PS_EVICT_LRU] = "lru",
    [PS_EVICT_LFU] = "lfu",
};
#define S_POLICY_COUNT  (sizeof s_policy_names / sizeof s_policy_names [0])

void
ps_rowopt_default (ps_rowopt_t *opt, ps_rowopt_kind_t kind)
{
    //  Every field gets a valid value whatever the kind, so that a spec
    //  switched to another kind later still validates and compares by
    //  its fields alone.
    memset (opt, 0, sizeof *opt);
    opt->kind = kind;
    opt->lr = kind == PS_ROWOPT_SGD ? 0.01 : 0.001;
    opt->beta1 = 0.9;
    opt->beta2 = 0.999;
    opt->epsilon = 1e-7;
    opt->initial_accumulator = 0.1;
    opt->l1 = 0.0;
    opt->l2 = 0.0;
    opt->lr_power = -0.5;
    opt->beta = 0.0;
}

void
ps_tablespec_default (ps_tablespec_t *spec, const char *name, uint32_t dim)
{
    memset (spec, 0, sizeof *spec);
    snprintf (spec->name, sizeof spec->name, "%s", name);
    spec->dim = dim;
    ps_init_default (&spec->init, PS_INIT_UNIFORM);
    ps_rowopt_default (&spec->opt, PS_ROWOPT_ADAGRAD);
    spec->opt.lr = 0.05;
    spec->admit_count = 1;
    spec->admit_prob = 1.0;
    spec->capacity = 0;
    spec->ttl = 0;
    spec->policy = PS_EVICT_LRU;
    spec->shard_seed = 0;
}

int
ps_rowopt_kind_parse (const char *name, ps_rowopt_kind_t *kind, ps_error_t *err)
{
    for (size_t i = 0; i < S_ROWOPT_COUNT; i++)
        if (strcmp (name, s_rowopt_names [i]) == 0) {
            *kind = (ps_rowopt_kind_t) i;
            return PS_OK;
        }
    return ps_error_set (err, PS_EINVAL,
                         "unknown row optimizer '%s', expected sgd, adagrad, adam or ftrl", name);
}

const char *
ps_rowopt_kind_name (ps_rowopt_kind_t kind)
{
    return (unsigned) kind < S_ROWOPT_COUNT ? s_rowopt_names [kind] : "unknown";
}

int
ps_rowopt_slot_count (ps_rowopt_kind_t kind)
{
    switch (kind) {
        case PS_ROWOPT_SGD:     return 0;
        case PS_ROWOPT_ADAGRAD: return 1;
        case PS_ROWOPT_ADAM:    return 2;
        case PS_ROWOPT_FTRL:    return 2;
    }
    return 0;
}

int
ps_evict_policy_parse (const char *name, ps_evict_policy_t *policy, ps_error_t *err)
{
    for (size_t i = 0; i < S_POLICY_COUNT; i++)
        if (strcmp (name, s_policy_names [i]) == 0) {
            *policy = (ps_evict_policy_t) i;
            return PS_OK;
        }
    return ps_error_set (err, PS_EINVAL, "unknown eviction policy '%s', expected lru or lfu",
                         name);
}

const char *
ps_evict_policy_name (ps_evict_policy_t policy)
{
    return (unsigned) policy < S_POLICY_COUNT ? s_policy_names [policy] : "unknown";
}

//  Check that field (named for the message) of table name is a finite
//  number in [low, high], or in (low, high] when open_low.
static int
s_check_range (const char *table, const char *field, double value, double low, bool open_low,
               double high, ps_error_t *err)
{
    bool ok = isfinite (value) && (open_low ? value > low : value >= low) && value <= high;
    if (!ok)
        return ps_error_set (err, PS_EINVAL,
                             "table %s: %s is %g, expected a finite number in %c%g, %g]",
                             table, field, value, open_low ? '(' : '[', low, high);
    return PS_OK;
}

//  The optimizer's fields, every one whatever the kind (see
//  ps_rowopt_default), with the constraints that keep an update finite.
static int
s_validate_opt (const char *table, const ps_rowopt_t *opt, ps_error_t *err)
{
    if ((unsigned) opt->kind >= S_ROWOPT_COUNT)
        return ps_error_set (err, PS_EINVAL, "table %s: optimizer kind is %d, expected 0..%d",
                             table, (int) opt->kind, (int) S_ROWOPT_COUNT - 1);
    int rc = s_check_range (table, "optimizer lr", opt->lr, 0, true, HUGE_VAL, err);
    if (rc == PS_OK)
        rc = s_check_range (table, "optimizer beta1", opt->beta1, 0, false, nextafter (1, 0), err);
    if (rc == PS_OK)
        rc = s_check_range (table, "optimizer beta2", opt->beta2, 0, false, nextafter (1, 0), err);
    if (rc == PS_OK)
        rc = s_check_range (table, "optimizer epsilon", opt->epsilon, 0, false, HUGE_VAL, err);
    if (rc == PS_OK)
        rc = s_check_range (table, "optimizer initial_accumulator", opt->initial_accumulator,
                            0, false, HUGE_VAL, err);
    if (rc == PS_OK)
        rc = s_check_range (table, "optimizer l1", opt->l1, 0, false, HUGE_VAL, err);
    if (rc == PS_OK)
        rc = s_check_range (table, "optimizer l2", opt->l2, 0, false, HUGE_VAL, err);
    if (rc == PS_OK)
        rc = s_check_range (table, "optimizer lr_power", opt->lr_power, -HUGE_VAL, false, 0, err);
    if (rc == PS_OK)
        rc = s_check_range (table, "optimizer beta", opt->beta, 0, false, HUGE_VAL, err);
    if (rc)
        return rc;
    //  Adam divides by sqrt (v) + epsilon with v = 0 at first, and Adagrad
    //  by sqrt (a + epsilon) with a = initial_accumulator at first.
    if (opt->kind == PS_ROWOPT_ADAM && !(opt->epsilon > 0))
        return ps_error_set (err, PS_EINVAL,
                             "table %s: Adam's epsilon is %g, expected it above 0", table,
                             opt->epsilon);
    if (opt->kind == PS_ROWOPT_ADAGRAD && !(opt->initial_accumulator + opt->epsilon > 0))
        return ps_error_set (err, PS_EINVAL,
                             "table %s: Adagrad's initial_accumulator + epsilon is 0, expected "
                             "it above 0", table);
    return PS_OK;
}

int
ps_tablespec_validate (const ps_tablespec_t *spec, ps_error_t *err)
{
    size_t len = strnlen (spec->name, PS_NAME_MAX);
    ps_error_t name_err;
    if (ps_name_check (spec->name, len, &name_err))
        return ps_error_set (err, PS_EINVAL, "table name: %s", name_err.msg);
    const char *name = spec->name;
    if (spec->dim < 1 || spec->dim > PS_TABLESPEC_MAX_DIM)
        return ps_error_set (err, PS_EINVAL, "table %s: dim is %u, expected 1..%d",
                             name, spec->dim, PS_TABLESPEC_MAX_DIM);
    ps_error_t init_err;
    if (ps_init_validate (&spec->init, &init_err))
        return ps_error_set (err, PS_EINVAL, "table %s: %s", name, init_err.msg);
    if (spec->init.kind == PS_INIT_GLOROT_UNIFORM)
        return ps_error_set (err, PS_EINVAL,
                             "table %s: initializer glorot_uniform needs a variable's fans, "
                             "expected zeros, constant, uniform or normal", name);
    int rc = s_validate_opt (name, &spec->opt, err);
    if (rc)
        return rc;
    if (spec->admit_count > PS_TABLESPEC_MAX_ADMIT_COUNT)
        return ps_error_set (err, PS_EINVAL, "table %s: admit_count is %u, expected 0..%d",
                             name, spec->admit_count, PS_TABLESPEC_MAX_ADMIT_COUNT);
    rc = s_check_range (name, "admit_prob", spec->admit_prob, 0, true, 1, err);
    if (rc)
        return rc;
    if ((unsigned) spec->policy >= S_POLICY_COUNT)
        return ps_error_set (err, PS_EINVAL, "table %s: eviction policy is %d, expected 0..%d",
                             name, (int) spec->policy, (int) S_POLICY_COUNT - 1);
    return PS_OK;
}

//  Compare one field: on a difference write "table NAME: FIELD A, not B"
//  and tell. Doubles are compared by value; a valid spec holds no NaN.
static bool
s_differ_u64 (const char *table, const char *field, uint64_t a, uint64_t b, char *buf, size_t len)
{
    if (a == b)
        return false;
    if (buf && len)
        snprintf (buf, len, "table %s: %s %llu, not %llu", table, field,
                  (unsigned long long) a, (unsigned long long) b);
    return true;
}

static bool
s_differ_f64 (const char *table, const char *field, double a, double b, char *buf, size_t len)
{
    if (a == b)
        return false;
    if (buf && len)
        snprintf (buf, len, "table %s: %s %.17g, not %.17g", table, field, a, b);
    return true;
}

bool
ps_tablespec_differs (const ps_tablespec_t *a, const ps_tablespec_t *b, char *buf, size_t len)
{
    if (strncmp (a->name, b->name, PS_NAME_MAX) != 0) {
        if (buf && len)
            snprintf (buf, len, "table %.*s: name %.*s, not %.*s", PS_NAME_MAX, a->name,
                      PS_NAME_MAX, a->name, PS_NAME_MAX, b->name);
        return true;
    }
    const char *t = a->name;
    const ps_rowopt_t *p = &a->opt, *q = &b->opt;
    return s_differ_u64 (t, "dim", a->dim, b->dim, buf, len)
        || s_differ_u64 (t, "init kind", a->init.kind, b->init.kind, buf, len)
        || s_differ_u64 (t, "init seed", a->init.seed, b->init.seed, buf, len)
        || s_differ_f64 (t, "init value", a->init.value, b->init.value, buf, len)
        || s_differ_f64 (t, "init low", a->init.low, b->init.low, buf, len)
        || s_differ_f64 (t, "init high", a->init.high, b->init.high, buf, len)
        || s_differ_f64 (t, "init mean", a->init.mean, b->init.mean, buf, len)
        || s_differ_f64 (t, "init stddev", a->init.stddev, b->init.stddev, buf, len)
        || s_differ_u64 (t, "optimizer kind", p->kind, q->kind, buf, len)
        || s_differ_f64 (t, "optimizer lr", p->lr, q->lr, buf, len)
        || s_differ_f64 (t, "optimizer beta1", p->beta1, q->beta1, buf, len)
        || s_differ_f64 (t, "optimizer beta2", p->beta2, q->beta2, buf, len)
        || s_differ_f64 (t, "optimizer epsilon", p->epsilon, q->epsilon, buf, len)
        || s_differ_f64 (t, "optimizer initial_accumulator", p->initial_accumulator,
                         q->initial_accumulator, buf, len)
        || s_differ_f64 (t, "optimizer l1", p->l1, q->l1, buf, len)
        || s_differ_f64 (t, "optimizer l2", p->l2, q->l2, buf, len)
        || s_differ_f64 (t, "optimizer lr_power", p->lr_power, q->lr_power, buf, len)
        || s_differ_f64 (t, "optimizer beta", p->beta, q->beta, buf, len)
        || s_differ_u64 (t, "admit_count", a->admit_count, b->admit_count, buf, len)
        || s_differ_f64 (t, "admit_prob", a->admit_prob, b->admit_prob, buf, len)
        || s_differ_u64 (t, "capacity", a->capacity, b->capacity, buf, len)
        || s_differ_u64 (t, "ttl", a->ttl, b->ttl, buf, len)
        || s_differ_u64 (t, "eviction policy", a->policy, b->policy, buf, len)
        || s_differ_u64 (t, "shard_seed", a->shard_seed, b->shard_seed, buf, len);
}

void
ps_tablespec_init_row (const ps_tablespec_t *spec, uint64_t id, float *out)
{
    uint64_t key = ps_mix64 (spec->init.seed) ^ ps_mix64 (id + 1);
    ps_init_fill_keyed (&spec->init, key, spec->dim, out);
}
