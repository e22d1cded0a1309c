//  The job plan: describing it for register_ok and reading it back.

#include "ps_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_proto_conv.h"

void
ps_plan_to_proto (const ps_plan_t *plan, ps_proto_plan_t *out)
{
    size_t nvars = (size_t) plan->nvars;
    ps_proto_placed_var_t *vars = calloc (nvars + 1, sizeof *vars);
    if (!vars)
        abort ();
    for (size_t v = 0; v < nvars; v++) {
        const ps_plan_var_t *var = &plan->vars [v];
        size_t nparts = (size_t) var->nparts;
        //  One block per variable: its shape, splits and servers (freed
        //  through shape.items, which points at its start).
        uint64_t *numbers = calloc (PS_MAX_RANK + 2 * nparts + 1, sizeof *numbers);
        if (!numbers)
            abort ();
        uint64_t *splits = numbers + PS_MAX_RANK, *servers = splits + nparts + 1;
        for (size_t k = 0; k <= nparts; k++)
            splits [k] = (uint64_t) var->splits [k];
        for (size_t k = 0; k < nparts; k++)
            servers [k] = (uint64_t) var->servers [k];
        vars [v] = (ps_proto_placed_var_t) { .var = var->var, .splits = { nparts + 1, splits },
                                             .servers = { nparts, servers } };
        ps_proto_shape_set (&vars [v].shape, numbers, &var->shape);
    }
    *out = (ps_proto_plan_t) {
        .model = plan->model, .batch_size = (uint64_t) plan->batch_size, .seed = plan->seed,
        .data_dir = plan->data_dir, .train_limit = plan->train_limit,
        .has_data_format = plan->data_format [0] != 0, .data_format = plan->data_format,
        .has_train_data = plan->train_data != NULL, .train_data = plan->train_data,
        .has_test_data = plan->test_data != NULL, .test_data = plan->test_data,
        .has_train_images = plan->train_images != NULL, .train_images = plan->train_images,
        .has_train_labels = plan->train_labels != NULL, .train_labels = plan->train_labels,
        .has_test_images = plan->test_images != NULL, .test_images = plan->test_images,
        .has_test_labels = plan->test_labels != NULL, .test_labels = plan->test_labels,
        .has_label_column = plan->label_column != NULL, .label_column = plan->label_column,
        .test_limit = plan->test_limit, .threads = (uint64_t) plan->threads,
        .device = plan->device,
        .servers = { (size_t) plan->nservers, (const char **) plan->servers },
        .variables = { nvars, vars },
        .client_timeout_ms = (uint64_t) plan->client_timeout_ms,
        .steps_per_epoch = plan->steps_per_epoch, .total_steps = plan->total_steps,
        .eval_batch = (uint64_t) plan->eval_batch, .overlap = plan->overlap,
        .has_mode = true, .mode = plan->mirrored ? "mirrored" : plan->sync ? "sync" : "async",
        .has_optimizer = true };
    ps_proto_optimizer_set (&out->optimizer, &plan->optimizer);
}

void
ps_plan_proto_release (ps_proto_plan_t *out)
{
    for (size_t v = 0; v < out->variables.count; v++)
        free (out->variables.items [v].shape.items);
    free (out->variables.items);
    memset (out, 0, sizeof *out);
}

//  A copy of a string the plan keeps.
static char *
s_strdup (const char *s)
{
    char *copy = strdup (s);
    if (!copy)
        abort ();
    return copy;
}

//  Read one placed variable.
static int
s_read_var (ps_plan_var_t *var, const ps_proto_placed_var_t *in, int nservers, bool mirrored,
            ps_error_t *err)
{
    if (strlen (in->var) >= sizeof var->var)
        return ps_error_set (err, PS_EPROTO, "plan: a variable name is longer than %zu bytes",
                             sizeof var->var - 1);
    snprintf (var->var, sizeof var->var, "%s", in->var);
    if (ps_proto_shape_get (&in->shape, &var->shape, err))
        return ps_error_prefix (err, PS_ESHAPE, "plan: variable %s", var->var);
    size_t nparts = in->servers.count;
    if (nparts < 1 || in->splits.count != nparts + 1
    ||  (int64_t) nparts > var->shape.dims [0])
        return ps_error_set (err, PS_ESHAPE, "plan: variable %s: %zu servers for %zu splits "
                             "and %lld rows (expected n servers, n + 1 splits, n <= rows)",
                             var->var, nparts, in->splits.count,
                             (long long) var->shape.dims [0]);
    var->nparts = (int) nparts;
    var->splits = calloc (nparts + 1, sizeof (int64_t));
    var->servers = calloc (nparts, sizeof (int));
    if (!var->splits || !var->servers)
        abort ();
    for (size_t k = 0; k <= nparts; k++) {
        uint64_t row = in->splits.items [k];
        if (row > (uint64_t) var->shape.dims [0])
            return ps_error_set (err, PS_ESHAPE, "plan: variable %s: split %zu is past "
                                 "the %lld rows", var->var, k, (long long) var->shape.dims [0]);
        var->splits [k] = (int64_t) row;
    }
    if (mirrored && (nparts != 1 || var->splits [0] != 0 || var->splits [1] != var->shape.dims [0]))
        return ps_error_set (err, PS_ESHAPE, "plan: variable %s: a mirrored plan holds every "
                             "variable whole, as one partition", var->var);
    for (size_t k = 0; k < nparts; k++) {
        uint64_t server = in->servers.items [k];
        if (mirrored ? server != 0 : server >= (uint64_t) nservers)
            return ps_error_set (err, PS_EPROTO, "plan: variable %s: partition %zu is on "
                                 "server %llu of %d", var->var, k,
                                 (unsigned long long) server, nservers);
        var->servers [k] = (int) server;
    }
    //  ps_client_add_variable checks the splits in full (increasing, from 0
    //  to the row count) when the worker builds its client.
    return 0;
}

int
ps_plan_read (ps_plan_t *plan, const ps_proto_plan_t *in, ps_error_t *err)
{
    ps_plan_t tmp;
    memset (&tmp, 0, sizeof tmp);
    int rc = 0;
    //  The decoder has held batch_size, eval_batch, threads and
    //  client_timeout_ms to their bounds, mode and device to their names,
    //  and the counts of servers and variables (protocol.json's bounds),
    //  so what is left to check here depends on more than one field.
    //  Plans without a mode come from a coordinator that knew only the
    //  asynchronous one.
    tmp.mirrored = in->has_mode && strcmp (in->mode, "mirrored") == 0;
    tmp.sync = in->has_mode && strcmp (in->mode, "sync") == 0;
    size_t nservers = in->servers.count, nvars = in->variables.count;
    bool text_data = in->has_data_format && strcmp (in->data_format, "idx") != 0;
    if (text_data && (!in->has_train_data || !in->has_test_data))
        return ps_error_set (err, PS_EPROTO, "plan: data_format %s needs both 'train_data' "
                             "and 'test_data'", in->data_format);
    if (text_data && strcmp (in->data_format, "csv") == 0 && !in->has_label_column)
        return ps_error_set (err, PS_EPROTO, "plan: data_format csv needs 'label_column'");
    if (nservers < 1 && !tmp.mirrored)
        return ps_error_set (err, PS_EPROTO, "plan: no servers, which only a mirrored plan "
                             "may have");
    if (in->has_optimizer) {
        if (ps_proto_optimizer_get (&in->optimizer, &tmp.optimizer, err))
            return ps_error_prefix (err, PS_EPROTO, "plan");
    }
    else
    if (tmp.mirrored)
        return ps_error_set (err, PS_EPROTO, "plan: a mirrored plan needs the optimizer");
    snprintf (tmp.device, sizeof tmp.device, "%s", in->device);
    tmp.batch_size = (int) in->batch_size;
    tmp.eval_batch = (int) in->eval_batch;
    tmp.threads = (int) in->threads;
    tmp.client_timeout_ms = (int) in->client_timeout_ms;
    tmp.seed = in->seed;
    tmp.train_limit = in->train_limit;
    tmp.test_limit = in->test_limit;
    tmp.steps_per_epoch = in->steps_per_epoch;
    tmp.total_steps = in->total_steps;
    tmp.overlap = in->overlap;
    tmp.model = s_strdup (in->model);
    tmp.data_dir = s_strdup (in->data_dir);
    snprintf (tmp.data_format, sizeof tmp.data_format, "%s",
              in->has_data_format ? in->data_format : "idx");
    if (in->has_train_data)
        tmp.train_data = s_strdup (in->train_data);
    if (in->has_test_data)
        tmp.test_data = s_strdup (in->test_data);
    if (in->has_train_images)
        tmp.train_images = s_strdup (in->train_images);
    if (in->has_train_labels)
        tmp.train_labels = s_strdup (in->train_labels);
    if (in->has_test_images)
        tmp.test_images = s_strdup (in->test_images);
    if (in->has_test_labels)
        tmp.test_labels = s_strdup (in->test_labels);
    if (in->has_label_column)
        tmp.label_column = s_strdup (in->label_column);
    tmp.servers = calloc (nservers + 1, sizeof (char *));
    tmp.vars = calloc (nvars, sizeof (ps_plan_var_t));
    if (!tmp.servers || !tmp.vars)
        abort ();
    tmp.nservers = (int) nservers;
    //  A server may be given as an endpoint set (ps_host.h), which the
    //  client turns into the endpoint for this host (ps_client_new).
    for (size_t s = 0; s < nservers; s++)
        tmp.servers [s] = s_strdup (in->servers.items [s]);
    tmp.nvars = (int) nvars;
    for (size_t v = 0; v < nvars && rc == 0; v++)
        rc = s_read_var (&tmp.vars [v], &in->variables.items [v], tmp.nservers, tmp.mirrored,
                         err);
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
    free (plan->train_data);
    free (plan->test_data);
    free (plan->train_images);
    free (plan->train_labels);
    free (plan->test_images);
    free (plan->test_labels);
    free (plan->label_column);
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
