//  What a click-through-rate step takes from the plan; see ps_ctrplan.h.

#include "ps_ctrplan.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>

#include "ps_dataset.h"
#include "ps_log.h"

struct _ps_ctrplan_t {
    const ps_model_t *model;
    ps_ctrfile_t *train;        //  NULL for an evaluator
    ps_ctrfile_t *test;
    uint64_t train_lines, test_lines;
    ps_ctrbatch_t *batch;
    ps_ctrnet_t *net;
    //  The block order of the epoch asked for last.
    uint32_t *perm;
    uint64_t perm_blocks;
    bool perm_valid;
    uint64_t perm_seed, perm_epoch;
};

ps_ctrfile_t *
ps_ctrplan_open_data (const char *path, ps_ctrformat_t format, ps_error_t *err)
{
    ps_ctrfile_t *file = ps_ctrfile_open (path, format, NULL, err);
    if (!file)
        return NULL;
    const ps_ctrindex_t *index = ps_ctrfile_index (file);
    if (ps_ctrindex_malformed (index))
        ps_warn ("%s: %llu of %llu lines are malformed and skipped (the first, line %llu: %s)",
                 path, (unsigned long long) ps_ctrindex_malformed (index),
                 (unsigned long long) ps_ctrindex_lines (index),
                 (unsigned long long) ps_ctrindex_first_malformed (index),
                 ps_ctrindex_first_reason (index));
    return file;
}

int
ps_ctrplan_check_shape (const ps_model_t *model, const ps_ctrbatch_t *batch, const char *path,
                        ps_error_t *err)
{
    const ps_ctrmodel_t *ctr = ps_model_ctr (model);
    assert (ctr);
    if (batch->ndense != (size_t) ctr->dense || batch->nfields != (size_t) ctr->fields)
        return ps_error_set (err, PS_ESHAPE, "model \"%s\" takes %d dense features and %d "
                             "fields, but %s data (%s) has %zu and %zu", ps_model_name (model),
                             ctr->dense, ctr->fields, ps_ctrformat_name (batch->format), path,
                             batch->ndense, batch->nfields);
    return 0;
}

//  The lines of file a run uses: all, or the first limit.
static uint64_t
s_limited (const ps_ctrfile_t *file, uint64_t limit)
{
    uint64_t lines = ps_ctrfile_lines (file);
    return limit && limit < lines ? limit : lines;
}

ps_ctrplan_t *
ps_ctrplan_new (const ps_plan_t *plan, const ps_model_t *model, bool train, ps_error_t *err)
{
    assert (ps_model_ctr (model));
    ps_ctrformat_t format;
    if (ps_ctrformat_parse (plan->data_format, &format, err)) {
        ps_error_prefix (err, err->code, "the plan's data_format");
        return NULL;
    }
    if (!plan->test_data || (train && !plan->train_data)) {
        ps_error_set (err, PS_EINVAL, "model \"%s\" trains on text files, but the plan names "
                      "no %s file", ps_model_name (model), plan->test_data ? "training" : "test");
        return NULL;
    }
    ps_ctrplan_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->model = model;
    int max_n = plan->batch_size > plan->eval_batch ? plan->batch_size : plan->eval_batch;
    if ((train && !(self->train = ps_ctrplan_open_data (plan->train_data, format, err)))
    ||  !(self->test = ps_ctrplan_open_data (plan->test_data, format, err))
    ||  !(self->batch = ps_ctrbatch_new (format, (size_t) (max_n > 0 ? max_n : 1), err))
    ||  ps_ctrplan_check_shape (model, self->batch, plan->test_data, err)
    ||  !(self->net = ps_ctrnet_new (model, max_n, err))) {
        ps_ctrplan_destroy (&self);
        return NULL;
    }
    self->train_lines = self->train ? s_limited (self->train, plan->train_limit) : 0;
    self->test_lines = s_limited (self->test, plan->test_limit);
    ps_info ("model %s (%zu dense parameters, %d tables) on the CPU; %" PRIu64 " training "
             "lines from %s and %" PRIu64 " test lines from %s (%s)", ps_model_name (model),
             ps_model_param_count (model), ps_model_ctr (model)->table_count, self->train_lines,
             self->train ? plan->train_data : "(none: an evaluator)", self->test_lines,
             plan->test_data, plan->data_format);
    return self;
}

void
ps_ctrplan_destroy (ps_ctrplan_t **self_p)
{
    ps_ctrplan_t *self = *self_p;
    if (!self)
        return;
    ps_ctrnet_destroy (&self->net);
    ps_ctrbatch_destroy (&self->batch);
    ps_ctrfile_destroy (&self->train);
    ps_ctrfile_destroy (&self->test);
    free (self->perm);
    free (self);
    *self_p = NULL;
}

uint64_t
ps_ctrplan_train_lines (const ps_ctrplan_t *self)
{
    return self->train_lines;
}

uint64_t
ps_ctrplan_test_lines (const ps_ctrplan_t *self)
{
    return self->test_lines;
}

uint64_t
ps_ctrplan_blocks (const ps_ctrplan_t *self, int batch)
{
    if (batch <= 0)
        return 0;
    return (self->train_lines + (uint64_t) batch - 1) / (uint64_t) batch;
}

int
ps_ctrplan_map_batch (ps_ctrnet_t *net, const ps_ctrbatch_t *batch, ps_error_t *err)
{
    assert (net);
    assert (batch);
    ps_ctrnet_batch_t view = {
        .n = batch->n, .labels = batch->labels, .dense = batch->dense,
        .offsets = batch->offsets, .ids = batch->ids, .weights = batch->weights,
    };
    return ps_ctrnet_map (net, &view, err);
}

//  Map the batch just read into the engine. Returns its examples or the
//  engine's error.
static int
s_map (ps_ctrplan_t *self, ps_error_t *err)
{
    if (self->batch->n == 0)
        return 0;
    int rc = ps_ctrplan_map_batch (self->net, self->batch, err);
    return rc ? rc : (int) self->batch->n;
}

int
ps_ctrplan_load_train (ps_ctrplan_t *self, uint64_t seed, uint64_t epoch, uint64_t b, int batch,
                       ps_error_t *err)
{
    assert (self->train);
    uint64_t blocks = ps_ctrplan_blocks (self, batch);
    if (b >= blocks)
        return ps_error_set (err, PS_EINVAL, "batch %" PRIu64 " of epoch %" PRIu64 " is past "
                             "the %" PRIu64 " batches of %d lines an epoch has", b, epoch,
                             blocks, batch);
    //  A block index is 32-bit: 4 billion blocks are 2 trillion lines at
    //  a batch of 512, past any file a worker can index.
    if (blocks > UINT32_MAX)
        return ps_error_set (err, PS_ETOOBIG, "%" PRIu64 " batches an epoch, more than the "
                             "%u the block order holds", blocks, UINT32_MAX);
    if (!self->perm_valid || self->perm_seed != seed || self->perm_epoch != epoch
    ||  self->perm_blocks != blocks) {
        if (self->perm_blocks != blocks) {
            free (self->perm);
            self->perm = malloc (blocks * sizeof *self->perm);
            if (!self->perm)
                return ps_error_set (err, PS_ETOOBIG, "out of memory for the order of %"
                                     PRIu64 " batches", blocks);
            self->perm_blocks = blocks;
        }
        ps_dataset_shuffle (seed, epoch, (uint32_t) blocks, self->perm);
        self->perm_valid = true;
        self->perm_seed = seed;
        self->perm_epoch = epoch;
    }
    uint64_t first = (uint64_t) self->perm [b] * (uint64_t) batch;
    uint64_t count = self->train_lines - first < (uint64_t) batch
                   ? self->train_lines - first : (uint64_t) batch;
    int rc = ps_ctrfile_read (self->train, first, count, self->batch, err);
    return rc ? rc : s_map (self, err);
}

int
ps_ctrplan_load_test (ps_ctrplan_t *self, uint64_t first, uint64_t count, ps_error_t *err)
{
    int rc = ps_ctrfile_read (self->test, first, count, self->batch, err);
    return rc ? rc : s_map (self, err);
}

const ps_ctrbatch_t *
ps_ctrplan_batch (const ps_ctrplan_t *self)
{
    return self->batch;
}

ps_ctrnet_t *
ps_ctrplan_net (ps_ctrplan_t *self)
{
    return self->net;
}
