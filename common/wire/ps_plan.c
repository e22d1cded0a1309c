//  The job plan: packing it into register_ok and reading it back.

#include "ps_plan.h"

#include <stdlib.h>
#include <string.h>

#include "ps_msg.h"
#include "ps_schema.h"

//  Limits on what a plan may ask of a worker; a coordinator never sends
//  more, so larger values mean a damaged or hostile message.
#define S_MAX_SERVERS   4096
#define S_MAX_VARS      65536
#define S_MAX_BATCH     (1 << 20)
#define S_MAX_THREADS   1024

void
ps_plan_pack (const ps_plan_t *plan, msgpack_packer *pk)
{
    msgpack_pack_map (pk, 17);
    ps_pack_key (pk, "model");
    ps_pack_str (pk, plan->model);
    ps_pack_uint (pk, "batch_size", (uint64_t) plan->batch_size);
    ps_pack_uint (pk, "seed", plan->seed);
    ps_pack_key (pk, "data_dir");
    ps_pack_str (pk, plan->data_dir);
    ps_pack_uint (pk, "train_limit", plan->train_limit);
    ps_pack_uint (pk, "test_limit", plan->test_limit);
    ps_pack_uint (pk, "threads", (uint64_t) plan->threads);
    ps_pack_key (pk, "device");
    ps_pack_str (pk, plan->device);
    ps_pack_key (pk, "servers");
    msgpack_pack_array (pk, (size_t) plan->nservers);
    for (int s = 0; s < plan->nservers; s++)
        ps_pack_str (pk, plan->servers [s]);
    ps_pack_key (pk, "variables");
    msgpack_pack_array (pk, (size_t) plan->nvars);
    for (int v = 0; v < plan->nvars; v++) {
        const ps_plan_var_t *var = &plan->vars [v];
        msgpack_pack_map (pk, 4);
        ps_pack_key (pk, "var");
        ps_pack_str (pk, var->var);
        ps_pack_key (pk, "shape");
        ps_pack_shape (pk, &var->shape);
        ps_pack_key (pk, "splits");
        msgpack_pack_array (pk, (size_t) var->nparts + 1);
        for (int k = 0; k <= var->nparts; k++)
            msgpack_pack_uint64 (pk, (uint64_t) var->splits [k]);
        ps_pack_key (pk, "servers");
        msgpack_pack_array (pk, (size_t) var->nparts);
        for (int k = 0; k < var->nparts; k++)
            msgpack_pack_uint64 (pk, (uint64_t) var->servers [k]);
    }
    ps_pack_uint (pk, "client_timeout_ms", (uint64_t) plan->client_timeout_ms);
    ps_pack_uint (pk, "steps_per_epoch", plan->steps_per_epoch);
    ps_pack_uint (pk, "total_steps", plan->total_steps);
    ps_pack_uint (pk, "eval_batch", (uint64_t) plan->eval_batch);
    ps_pack_key (pk, "overlap");
    if (plan->overlap)
        msgpack_pack_true (pk);
    else
        msgpack_pack_false (pk);
    ps_pack_key (pk, "mode");
    ps_pack_str (pk, plan->mirrored ? "mirrored" : "async");
    ps_pack_key (pk, "optimizer");
    ps_pack_optimizer (pk, &plan->optimizer);
}

//  A str field as a fresh NUL-terminated copy; NULL when it holds a NUL.
static char *
s_strdup_obj (const msgpack_object *obj)
{
    if (memchr (obj->via.str.ptr, 0, obj->via.str.size))
        return NULL;
    char *copy = malloc (obj->via.str.size + 1);
    if (!copy)
        abort ();
    memcpy (copy, obj->via.str.ptr, obj->via.str.size);
    copy [obj->via.str.size] = 0;
    return copy;
}

static uint64_t
s_uint (const msgpack_object *map, const char *key)
{
    return ps_obj_get (map, key)->via.u64;
}

//  Read one placed variable; the schema has checked the field types.
static int
s_unpack_var (ps_plan_var_t *var, const msgpack_object *obj, int nservers, bool mirrored,
              ps_error_t *err)
{
    if (ps_obj_str (ps_obj_get (obj, "var"), var->var, sizeof var->var))
        return ps_error_set (err, PS_EPROTO, "plan: a variable name is too long or holds NUL");
    if (ps_obj_shape (ps_obj_get (obj, "shape"), &var->shape, err))
        return ps_error_prefix (err, PS_ESHAPE, "plan: variable %s", var->var);
    if (var->shape.rank < 1)
        return ps_error_set (err, PS_ESHAPE, "plan: variable %s has rank 0", var->var);
    const msgpack_object *splits = ps_obj_get (obj, "splits");
    const msgpack_object *servers = ps_obj_get (obj, "servers");
    uint32_t nparts = servers->via.array.size;
    if (nparts < 1 || splits->via.array.size != nparts + 1
    ||  (int64_t) nparts > var->shape.dims [0])
        return ps_error_set (err, PS_ESHAPE, "plan: variable %s: %u servers for %u splits "
                             "and %lld rows (expected n servers, n + 1 splits, n <= rows)",
                             var->var, nparts, splits->via.array.size,
                             (long long) var->shape.dims [0]);
    var->nparts = (int) nparts;
    var->splits = calloc (nparts + 1, sizeof (int64_t));
    var->servers = calloc (nparts, sizeof (int));
    if (!var->splits || !var->servers)
        abort ();
    for (uint32_t k = 0; k <= nparts; k++) {
        uint64_t row = splits->via.array.ptr [k].via.u64;
        if (row > (uint64_t) var->shape.dims [0])
            return ps_error_set (err, PS_ESHAPE, "plan: variable %s: split %u is past "
                                 "the %lld rows", var->var, k, (long long) var->shape.dims [0]);
        var->splits [k] = (int64_t) row;
    }
    if (mirrored && (nparts != 1 || var->splits [0] != 0 || var->splits [1] != var->shape.dims [0]))
        return ps_error_set (err, PS_ESHAPE, "plan: variable %s: a mirrored plan holds every "
                             "variable whole, as one partition", var->var);
    for (uint32_t k = 0; k < nparts; k++) {
        uint64_t server = servers->via.array.ptr [k].via.u64;
        if (mirrored ? server != 0 : server >= (uint64_t) nservers)
            return ps_error_set (err, PS_EPROTO, "plan: variable %s: partition %u is on "
                                 "server %llu of %d", var->var, k,
                                 (unsigned long long) server, nservers);
        var->servers [k] = (int) server;
    }
    //  ps_client_add_variable checks the splits in full (increasing, from 0
    //  to the row count) when the worker builds its client.
    return 0;
}

int
ps_plan_unpack (ps_plan_t *plan, const msgpack_object *obj, ps_error_t *err)
{
    ps_plan_t tmp;
    memset (&tmp, 0, sizeof tmp);
    int rc = 0;
    tmp.model = s_strdup_obj (ps_obj_get (obj, "model"));
    tmp.data_dir = s_strdup_obj (ps_obj_get (obj, "data_dir"));
    if (!tmp.model || !tmp.data_dir) {
        rc = ps_error_set (err, PS_EPROTO, "plan: model or data_dir holds a NUL byte");
        goto done;
    }
    uint64_t batch = s_uint (obj, "batch_size");
    uint64_t threads = s_uint (obj, "threads");
    uint64_t timeout = s_uint (obj, "client_timeout_ms");
    uint64_t eval_batch = s_uint (obj, "eval_batch");
    if (batch < 1 || batch > S_MAX_BATCH || eval_batch < 1 || eval_batch > S_MAX_BATCH
    ||  threads < 1 || threads > S_MAX_THREADS || timeout < 1 || timeout > 3600000) {
        rc = ps_error_set (err, PS_EPROTO, "plan: batch_size %llu, eval_batch %llu, threads "
                           "%llu or client_timeout_ms %llu out of range",
                           (unsigned long long) batch, (unsigned long long) eval_batch,
                           (unsigned long long) threads, (unsigned long long) timeout);
        goto done;
    }
    tmp.batch_size = (int) batch;
    tmp.eval_batch = (int) eval_batch;
    tmp.threads = (int) threads;
    tmp.client_timeout_ms = (int) timeout;
    tmp.seed = s_uint (obj, "seed");
    tmp.train_limit = s_uint (obj, "train_limit");
    tmp.test_limit = s_uint (obj, "test_limit");
    tmp.steps_per_epoch = s_uint (obj, "steps_per_epoch");
    tmp.total_steps = s_uint (obj, "total_steps");
    tmp.overlap = ps_obj_get (obj, "overlap")->via.boolean;
    //  Plans without a mode come from a coordinator that knew only the
    //  asynchronous one.
    const msgpack_object *mode = ps_obj_get (obj, "mode");
    if (mode && !ps_obj_str_eq (mode, "async") && !ps_obj_str_eq (mode, "mirrored")) {
        rc = ps_error_set (err, PS_EPROTO, "plan: mode is not async or mirrored");
        goto done;
    }
    tmp.mirrored = mode && ps_obj_str_eq (mode, "mirrored");
    const msgpack_object *optimizer = ps_obj_get (obj, "optimizer");
    if (optimizer) {
        if ((rc = ps_obj_optimizer (optimizer, &tmp.optimizer, err))) {
            rc = ps_error_prefix (err, PS_EPROTO, "plan");
            goto done;
        }
    }
    else
    if (tmp.mirrored) {
        rc = ps_error_set (err, PS_EPROTO, "plan: a mirrored plan needs the optimizer");
        goto done;
    }
    if (ps_obj_str (ps_obj_get (obj, "device"), tmp.device, sizeof tmp.device)
    ||  (strcmp (tmp.device, "cpu") && strcmp (tmp.device, "gpu") && strcmp (tmp.device, "auto"))) {
        rc = ps_error_set (err, PS_EPROTO, "plan: device is not cpu, gpu or auto");
        goto done;
    }
    const msgpack_object *servers = ps_obj_get (obj, "servers");
    const msgpack_object *vars = ps_obj_get (obj, "variables");
    if ((servers->via.array.size < 1 && !tmp.mirrored) || servers->via.array.size > S_MAX_SERVERS
    ||  vars->via.array.size < 1 || vars->via.array.size > S_MAX_VARS) {
        rc = ps_error_set (err, PS_EPROTO, "plan: %u servers and %u variables (expected "
                           "1..%d, or 0 in mirrored mode, and 1..%d)", servers->via.array.size,
                           vars->via.array.size, S_MAX_SERVERS, S_MAX_VARS);
        goto done;
    }
    tmp.servers = calloc (servers->via.array.size + 1, sizeof (char *));
    tmp.vars = calloc (vars->via.array.size, sizeof (ps_plan_var_t));
    if (!tmp.servers || !tmp.vars)
        abort ();
    tmp.nservers = (int) servers->via.array.size;
    for (int s = 0; s < tmp.nservers; s++)
        if (!(tmp.servers [s] = s_strdup_obj (&servers->via.array.ptr [s]))) {
            rc = ps_error_set (err, PS_EPROTO, "plan: server %d's endpoint holds a NUL", s);
            goto done;
        }
    tmp.nvars = (int) vars->via.array.size;
    for (int v = 0; v < tmp.nvars && rc == 0; v++)
        rc = s_unpack_var (&tmp.vars [v], &vars->via.array.ptr [v], tmp.nservers, tmp.mirrored,
                           err);
done:
    if (rc)
        ps_plan_release (&tmp);
    else
        *plan = tmp;
    return rc;
}

void
ps_plan_release (ps_plan_t *plan)
{
    free (plan->model);
    free (plan->data_dir);
    if (plan->servers)
        for (int s = 0; s < plan->nservers; s++)
            free (plan->servers [s]);
    free (plan->servers);
    if (plan->vars)
        for (int v = 0; v < plan->nvars; v++) {
            free (plan->vars [v].splits);
            free (plan->vars [v].servers);
        }
    free (plan->vars);
    memset (plan, 0, sizeof *plan);
}

ps_client_t *
ps_plan_client (const ps_plan_t *plan, const ps_init_t *inits, ps_curve_t *curve,
                ps_error_t *err)
{
    ps_client_t *client = ps_client_new ((const char *const *) plan->servers, plan->nservers,
                                         plan->client_timeout_ms, curve, err);
    if (!client)
        return NULL;
    ps_init_t zeros;
    ps_init_default (&zeros, PS_INIT_ZEROS);
    for (int v = 0; v < plan->nvars; v++) {
        const ps_plan_var_t *var = &plan->vars [v];
        if (ps_client_add_variable (client, var->var, &var->shape, inits ? &inits [v] : &zeros,
                                    var->nparts, var->splits, var->servers, err) < 0) {
            ps_client_destroy (&client);
            return NULL;
        }
    }
    return client;
}
