//  Conversions between protocol structs and our types; see ps_proto_conv.h.

#include "ps_proto_conv.h"

#include <assert.h>

int
ps_proto_shape_get (const ps_proto_uint_array_t *dims, ps_shape_t *shape, ps_error_t *err)
{
    if (dims->count < 1 || dims->count > PS_MAX_RANK)
        return ps_error_set (err, PS_ESHAPE, "rank %zu is outside 1..%d", dims->count, PS_MAX_RANK);
    int64_t values [PS_MAX_RANK];
    for (size_t i = 0; i < dims->count; i++) {
        if (dims->items [i] > INT64_MAX)
            return ps_error_set (err, PS_ESHAPE, "dimension %zu is above 2^63-1", i);
        values [i] = (int64_t) dims->items [i];
    }
    return ps_shape_set (shape, values, (int) dims->count, err);
}

void
ps_proto_shape_set (ps_proto_uint_array_t *dims, uint64_t *storage, const ps_shape_t *shape)
{
    assert (shape->rank >= 0 && shape->rank <= PS_MAX_RANK);
    for (int i = 0; i < shape->rank; i++)
        storage [i] = (uint64_t) shape->dims [i];
    dims->count = (size_t) shape->rank;
    dims->items = storage;
}

int
ps_proto_optimizer_get (const ps_proto_optimizer_t *in, ps_opt_config_t *opt, ps_error_t *err)
{
    ps_opt_kind_t kind;
    int rc = ps_opt_kind_parse (in->kind, &kind, err);
    if (rc)
        return rc;
    ps_opt_config_default (opt, kind);
    if (in->has_lr)
        opt->lr = in->lr;
    if (in->has_momentum)
        opt->momentum = in->momentum;
    if (in->has_nesterov)
        opt->nesterov = in->nesterov;
    if (in->has_beta1)
        opt->beta1 = in->beta1;
    if (in->has_beta2)
        opt->beta2 = in->beta2;
    if (in->has_epsilon)
        opt->epsilon = in->epsilon;
    if (in->has_initial_accumulator)
        opt->initial_accumulator = in->initial_accumulator;
    if (in->has_weight_decay)
        opt->weight_decay = in->weight_decay;
    if (in->has_clip_value)
        opt->clip_value = in->clip_value;
    if (in->has_clip_norm)
        opt->clip_norm = in->clip_norm;
    rc = ps_opt_config_validate (opt, err);
    return rc ? ps_error_prefix (err, rc, "optimizer") : 0;
}

void
ps_proto_optimizer_set (ps_proto_optimizer_t *out, const ps_opt_config_t *opt)
{
    *out = (ps_proto_optimizer_t) {
        .kind = ps_opt_kind_name (opt->kind),
        .has_lr = true, .lr = opt->lr,
        .has_momentum = true, .momentum = opt->momentum,
        .has_nesterov = true, .nesterov = opt->nesterov,
        .has_beta1 = true, .beta1 = opt->beta1,
        .has_beta2 = true, .beta2 = opt->beta2,
        .has_epsilon = true, .epsilon = opt->epsilon,
        .has_initial_accumulator = true, .initial_accumulator = opt->initial_accumulator,
        .has_weight_decay = true, .weight_decay = opt->weight_decay,
        .has_clip_value = true, .clip_value = opt->clip_value,
        .has_clip_norm = true, .clip_norm = opt->clip_norm,
    };
}

int
ps_proto_init_get (const ps_proto_init_t *in, ps_init_t *init, ps_error_t *err)
{
    ps_init_kind_t kind;
    if (ps_init_kind_parse (in->kind, &kind, err))
        return err->code;
    ps_init_default (init, kind);
    if (in->has_seed)
        init->seed = in->seed;
    if (in->has_value)
        init->value = in->value;
    if (in->has_low)
        init->low = in->low;
    if (in->has_high)
        init->high = in->high;
    if (in->has_mean)
        init->mean = in->mean;
    if (in->has_stddev)
        init->stddev = in->stddev;
    return ps_init_validate (init, err);
}

void
ps_proto_init_set (ps_proto_init_t *out, const ps_init_t *init)
{
    *out = (ps_proto_init_t) { .kind = ps_init_kind_name (init->kind),
                               .has_seed = true, .seed = init->seed };
    switch (init->kind) {
        case PS_INIT_CONSTANT:
            out->has_value = true;
            out->value = init->value;
            break;
        case PS_INIT_UNIFORM:
            out->has_low = out->has_high = true;
            out->low = init->low;
            out->high = init->high;
            break;
        case PS_INIT_NORMAL:
            out->has_mean = out->has_stddev = true;
            out->mean = init->mean;
            out->stddev = init->stddev;
            break;
        default:
            break;
    }
}

//  Read a "rowopt" field: the kind's defaults, then the fields given.
static int
s_rowopt_get (const ps_proto_rowopt_t *in, ps_rowopt_t *opt, ps_error_t *err)
{
    ps_rowopt_kind_t kind;
    int rc = ps_rowopt_kind_parse (in->kind, &kind, err);
    if (rc)
        return rc;
    ps_rowopt_default (opt, kind);
    if (in->has_lr)
        opt->lr = in->lr;
    if (in->has_beta1)
        opt->beta1 = in->beta1;
    if (in->has_beta2)
        opt->beta2 = in->beta2;
    if (in->has_epsilon)
        opt->epsilon = in->epsilon;
    if (in->has_initial_accumulator)
        opt->initial_accumulator = in->initial_accumulator;
    if (in->has_l1)
        opt->l1 = in->l1;
    if (in->has_l2)
        opt->l2 = in->l2;
    if (in->has_lr_power)
        opt->lr_power = in->lr_power;
    if (in->has_beta)
        opt->beta = in->beta;
    return PS_OK;
}

int
ps_proto_tablespec_get (const ps_proto_tablespec_t *in, ps_tablespec_t *spec, ps_error_t *err)
{
    //  The decoder has held the name to PS_NAME_MAX - 1 bytes and dim to
    //  1..PS_TABLESPEC_MAX_DIM (protocol.json's bounds).
    ps_tablespec_default (spec, in->name, (uint32_t) in->dim);
    int rc = PS_OK;
    if (in->has_init)
        rc = ps_proto_init_get (&in->init, &spec->init, err);
    if (rc == PS_OK && in->has_optimizer)
        rc = s_rowopt_get (&in->optimizer, &spec->opt, err);
    if (rc == PS_OK && in->has_policy)
        rc = ps_evict_policy_parse (in->policy, &spec->policy, err);
    if (rc)
        return ps_error_prefix (err, rc, "table %s", in->name);
    if (in->has_admit_count)
        spec->admit_count = (uint32_t) in->admit_count;
    if (in->has_admit_prob)
        spec->admit_prob = in->admit_prob;
    if (in->has_capacity)
        spec->capacity = in->capacity;
    if (in->has_ttl)
        spec->ttl = in->ttl;
    if (in->has_shard_seed)
        spec->shard_seed = in->shard_seed;
    return ps_tablespec_validate (spec, err);
}

void
ps_proto_tablespec_set (ps_proto_tablespec_t *out, const ps_tablespec_t *spec)
{
    const ps_rowopt_t *opt = &spec->opt;
    *out = (ps_proto_tablespec_t) {
        .name = spec->name, .dim = spec->dim, .has_init = true,
        .has_optimizer = true, .optimizer = {
            .kind = ps_rowopt_kind_name (opt->kind),
            .has_lr = true, .lr = opt->lr,
            .has_beta1 = true, .beta1 = opt->beta1,
            .has_beta2 = true, .beta2 = opt->beta2,
            .has_epsilon = true, .epsilon = opt->epsilon,
            .has_initial_accumulator = true, .initial_accumulator = opt->initial_accumulator,
            .has_l1 = true, .l1 = opt->l1,
            .has_l2 = true, .l2 = opt->l2,
            .has_lr_power = true, .lr_power = opt->lr_power,
            .has_beta = true, .beta = opt->beta },
        .has_admit_count = true, .admit_count = spec->admit_count,
        .has_admit_prob = true, .admit_prob = spec->admit_prob,
        .has_capacity = true, .capacity = spec->capacity,
        .has_ttl = true, .ttl = spec->ttl,
        .has_policy = true, .policy = ps_evict_policy_name (spec->policy),
        .has_shard_seed = true, .shard_seed = spec->shard_seed,
    };
    ps_proto_init_set (&out->init, &spec->init);
}
