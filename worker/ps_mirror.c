//  A member of a mirrored ring; see ps_mirror.h.

#include "ps_mirror.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ps_floats.h"
#include "ps_log.h"

struct _ps_mirror_t {
    ps_replica_t *replica;
    ps_ring_t *ring;
    float *grad;
    size_t count;
    ps_opt_config_t opt;        //  the optimizer in force, with the last rate
};

ps_mirror_t *
ps_mirror_new (const ps_model_t *model, uint64_t seed, const ps_opt_config_t *opt,
               const char *bind, const char *ipc, int timeout_ms, ps_curve_t *curve,
               ps_error_t *err)
{
    ps_mirror_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->opt = *opt;
    self->count = ps_model_param_count (model);
    ps_ring_config_t config = { .bind = bind, .ipc = ipc, .timeout_ms = timeout_ms,
                                .curve = curve };
    if (!(self->replica = ps_replica_new (model, seed, opt, err))
    ||  !(self->ring = ps_ring_new (&config, err)))
        goto fail;
    if (!(self->grad = ps_floats_alloc (self->count))) {
        ps_error_set (err, PS_ETOOBIG, "no memory for a gradient of %zu floats", self->count);
        goto fail;
    }
    return self;
fail:
    ps_mirror_destroy (&self);
    return NULL;
}

void
ps_mirror_destroy (ps_mirror_t **self_p)
{
    assert (self_p);
    ps_mirror_t *self = *self_p;
    if (!self)
        return;
    ps_replica_destroy (&self->replica);
    ps_ring_destroy (&self->ring);
    free (self->grad);
    free (self);
    *self_p = NULL;
}

ps_replica_t *
ps_mirror_replica (ps_mirror_t *self)
{
    assert (self);
    return self->replica;
}

ps_ring_t *
ps_mirror_ring (ps_mirror_t *self)
{
    assert (self);
    return self->ring;
}

float *
ps_mirror_grad (ps_mirror_t *self)
{
    assert (self);
    return self->grad;
}

//  Every member takes over the root's replica: first its length, then the
//  packed state, which each receiver checks in full before using it.
static int
s_take_root_state (ps_mirror_t *self, int root, ps_error_t *err)
{
    bool is_root = ps_ring_rank (self->ring) == root;
    uint8_t *state = NULL;
    size_t len = 0;
    if (is_root)
        ps_replica_pack (self->replica, &state, &len);
    uint64_t header = (uint64_t) len;
    int rc = ps_ring_broadcast (self->ring, root, &header, sizeof header, err);
    if (rc == 0 && !is_root) {
        //  A replica is the model's values and at most two slots, plus a
        //  ledger and a header: far below this bound, which only stops a
        //  damaged length from asking for all of memory.
        if (header > (uint64_t) self->count * 16 + (UINT64_C (64) << 20))
            rc = ps_error_set (err, PS_ECORRUPT, "the ring's root sent a replica of %llu bytes "
                               "for a model of %zu parameters", (unsigned long long) header,
                               self->count);
        else
        if (!(state = malloc (header ? (size_t) header : 1)))
            rc = ps_error_set (err, PS_ETOOBIG, "no memory for a replica of %llu bytes",
                               (unsigned long long) header);
        len = (size_t) header;
    }
    if (rc == 0)
        rc = ps_ring_broadcast (self->ring, root, state, len, err);
    if (rc == 0 && !is_root)
        rc = ps_replica_unpack (self->replica, state, len, err);
    free (state);
    return rc;
}

int
ps_mirror_join (ps_mirror_t *self, uint64_t ring_id, int rank, int n,
                const char *const *members, const int *tasks, int root, const char *load,
                ps_error_t *err)
{
    assert (self);
    int rc = ps_ring_form (self->ring, ring_id, rank, n, members, tasks, err);
    if (rc)
        return rc;
    if (load && *load && rank == root) {
        if ((rc = ps_replica_load (self->replica, load, err)))
            return rc;
        //  The job's optimizer wins over the checkpoint's, as when servers
        //  are restored: the same kind keeps the slots.
        if ((rc = ps_replica_set_optimizer (self->replica, &self->opt, err)))
            return rc;
        ps_info ("loaded the replica from %s (%llu updates)", load,
                 (unsigned long long) ps_replica_updates (self->replica));
    }
    if (root >= 0 && n > 1)
        rc = s_take_root_state (self, root, err);
    return rc;
}

int
ps_mirror_update (ps_mirror_t *self, const uint64_t *steps, size_t nsteps, double lr,
                  ps_error_t *err)
{
    assert (self);
    int rc = ps_ring_allreduce (self->ring, self->grad, self->count, err);
    if (rc)
        return rc;
    //  The rate is set on every update: a replica taken over from the root
    //  (or loaded) brings the root's rate, and every member must apply the
    //  step's. With the same kind this keeps the slots and costs nothing.
    self->opt.lr = lr;
    if ((rc = ps_replica_set_optimizer (self->replica, &self->opt, err)))
        return rc;
    return ps_replica_apply (self->replica, self->grad, steps, nsteps, err);
}
