//  The CPU engine; see ps_cpunet.h.
//
//  A step is one job run by all threads at once: the caller is shard 0,
//  threads 1..T-1 wait on a condition variable for the next job. Each shard
//  runs forward and backward over its slice of the batch into its own
//  buffers and gradient vector; a barrier; then each thread sums one slice
//  of the parameter range over all shards into the caller's gradient
//  vector; a second barrier ends the job. The gradient of the mean loss
//  comes out right because every shard scales its loss gradient by
//  1 / (whole batch), not by its own slice.
//
//  Buffers, per shard, allocated once: every layer's output (Flatten, and
//  Dropout when not training, alias their input instead), two gradient
//  buffers used in turn going backward, the im2col workspace, the pooling
//  argmax, the parameter gradient.

#include "ps_cpunet.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ps_clock.h"
#include "ps_cpu_ops.h"
#include "ps_floats.h"

typedef enum { S_JOB_TRAIN, S_JOB_FORWARD, S_JOB_STOP } s_job_kind_t;

typedef struct {
    int first, count;           //  this shard's examples of the current job
    float **out;                //  per layer: its output buffer
    int32_t **argmax;           //  per layer: pooling argmax, or NULL
    float *grad_a, *grad_b;     //  activation gradients, used in turn
    float *col;                 //  im2col workspace
    float *grads;               //  parameter gradient of this shard
    double loss;
    int correct;
    double abs_sum;             //  a regression model's summed absolute error
    double *fwd_ms, *bwd_ms;    //  per layer + loss (shard 0 only)
    ps_cpunet_t *owner;         //  for the thread that runs this shard
    int index;
    uint64_t generation;        //  the job generation when its thread was made
} s_shard_t;

struct ps_cpunet_t {
    const ps_model_t *model;
    int layers;
    int threads;                //  running, the caller included
    int shard_count;            //  allocated
    int max_batch;
    int classes;                //  the last layer's outputs
    bool regression;            //  mse against float targets, not cross-entropy
    size_t label_size;          //  bytes of one example's label
    int last_param_layer;       //  backward stops after the first layer with parameters
    size_t param_count;
    const float *params;        //  the caller's vector, read in place
    s_shard_t *shards;
    bool profiling;
    int conv_count;             //  with one, backward reuses the forward's im2col

    //  The current job, read by all threads after they see a new generation.
    s_job_kind_t job;
    const float *x;
    const uint8_t *labels;
    int n;
    uint64_t seed;
    float *grads_out;
    float *logits_out;

    pthread_t *tids;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    uint64_t generation;
    pthread_barrier_t barrier;
};

//  Forward over the shard's slice; returns the logits. `train` turns on
//  dropout. acts [i] receives the input of layer i, acts [layers] the
//  logits, for the backward pass.
static const float *
s_forward (ps_cpunet_t *self, s_shard_t *shard, bool train, const float **acts)
{
    const ps_model_t *model = self->model;
    const int n = shard->count;
    const float *cur = self->x + (size_t) shard->first * ps_model_input_size (model);
    bool timing = self->profiling && shard == &self->shards [0];
    for (int i = 0; i < self->layers; i++) {
        const ps_layer_t *l = ps_model_layer (model, i);
        const ps_variable_t *kv = l->kernel >= 0 ? ps_model_variable (model, l->kernel) : NULL;
        const ps_variable_t *bv = l->bias >= 0 ? ps_model_variable (model, l->bias) : NULL;
        const float *kernel = kv ? self->params + kv->offset : NULL;
        const float *bias = bv ? self->params + bv->offset : NULL;
        size_t out_size = (size_t) l->out_h * l->out_w * l->out_c;
        float *out = shard->out [i];
        double t0 = timing ? ps_clock_ms () : 0;
        acts [i] = cur;
        switch (l->kind) {
            case PS_LAYER_CONV2D:
                ps_cpu_conv2d_forward (l, n, cur, kernel, bias, out, shard->col);
                break;
            case PS_LAYER_DENSE:
                ps_cpu_dense_forward (l, n, cur, kernel, bias, out);
                break;
            case PS_LAYER_MAXPOOL2D:
                ps_cpu_maxpool_forward (l, n, cur, out, shard->argmax [i]);
                break;
            case PS_LAYER_RELU:
                ps_cpu_relu_forward (n * out_size, cur, out);
                break;
            case PS_LAYER_ACTIVATION:
                ps_cpu_activation_forward (l->activation, n * out_size, l->out_c, cur, out);
                break;
            case PS_LAYER_AVGPOOL2D:
                ps_cpu_avgpool_forward (l, n, cur, out);
                break;
            case PS_LAYER_GLOBALAVGPOOL2D:
                ps_cpu_gap_forward (l, n, cur, out);
                break;
            case PS_LAYER_FLATTEN:
                out = (float *) cur;
                break;
            case PS_LAYER_DROPOUT:
                if (train)
                    ps_cpu_dropout_forward (l, n, out_size, self->seed, shard->first, cur, out);
                else
                    out = (float *) cur;
                break;
            case PS_LAYER_EMBEDDING:
            case PS_LAYER_CONCATENATE:
                //  Click-through-rate layers never reach this engine:
                //  ps_model_check_batch refuses their models.
                break;
        }
        if (timing)
            shard->fwd_ms [i] += ps_clock_ms () - t0;
        cur = out;
    }
    acts [self->layers] = cur;
    return cur;
}

//  Backward from dlogits (in grad_a) down to the first layer that has
//  parameters, writing the shard's parameter gradient.
static void
s_backward (ps_cpunet_t *self, s_shard_t *shard, const float **acts)
{
    const ps_model_t *model = self->model;
    const int n = shard->count;
    float *dy = shard->grad_a;
    float *spare = shard->grad_b;
    bool timing = self->profiling && shard == &self->shards [0];
    for (int i = self->layers - 1; i >= self->last_param_layer; i--) {
        const ps_layer_t *l = ps_model_layer (model, i);
        const ps_variable_t *kv = l->kernel >= 0 ? ps_model_variable (model, l->kernel) : NULL;
        const ps_variable_t *bv = l->bias >= 0 ? ps_model_variable (model, l->bias) : NULL;
        const float *kernel = kv ? self->params + kv->offset : NULL;
        float *dkernel = kv ? shard->grads + kv->offset : NULL;
        float *dbias = bv ? shard->grads + bv->offset : NULL;
        size_t out_size = (size_t) l->out_h * l->out_w * l->out_c;
        //  The layer that begins the parameters needs no input gradient.
        float *dx = i > self->last_param_layer ? spare : NULL;
        double t0 = timing ? ps_clock_ms () : 0;
        switch (l->kind) {
            case PS_LAYER_CONV2D:
                //  The forward pass's im2col is still in col only for a
                //  network with a single convolution.
                ps_cpu_conv2d_backward (l, n, acts [i], acts [i + 1], kernel, dy, dx,
                                        dkernel, dbias, shard->col, self->conv_count == 1);
                break;
            case PS_LAYER_DENSE:
                ps_cpu_dense_backward (l, n, acts [i], acts [i + 1], kernel, dy, dx,
                                       dkernel, dbias);
                break;
            case PS_LAYER_MAXPOOL2D:
                ps_cpu_maxpool_backward (l, n, shard->argmax [i], dy, dx);
                break;
            case PS_LAYER_RELU:
                ps_cpu_relu_backward (n * out_size, acts [i + 1], dy, dy);
                dx = dy;
                break;
            case PS_LAYER_ACTIVATION:
                ps_cpu_activation_backward (l->activation, n * out_size, l->out_c, acts [i],
                                            acts [i + 1], dy, dy);
                dx = dy;
                break;
            case PS_LAYER_AVGPOOL2D:
                if (dx)
                    ps_cpu_avgpool_backward (l, n, dy, dx);
                break;
            case PS_LAYER_GLOBALAVGPOOL2D:
                if (dx)
                    ps_cpu_gap_backward (l, n, dy, dx);
                break;
            case PS_LAYER_FLATTEN:
                dx = dy;
                break;
            case PS_LAYER_DROPOUT:
                ps_cpu_dropout_backward (l, n, out_size, self->seed, shard->first, dy, dy);
                dx = dy;
                break;
            case PS_LAYER_EMBEDDING:
            case PS_LAYER_CONCATENATE:
                //  Click-through-rate layers never reach this engine:
                //  ps_model_check_batch refuses their models.
                break;
        }
        if (timing)
            shard->bwd_ms [i] += ps_clock_ms () - t0;
        if (dx && dx != dy) {
            spare = dy;
            dy = dx;
        }
    }
}

//  Sum slice t of the parameter range over the shards that ran.
static void
s_reduce (ps_cpunet_t *self, int t)
{
    size_t begin = self->param_count * t / self->threads;
    size_t end = self->param_count * (t + 1) / self->threads;
    bool first = true;
    for (int s = 0; s < self->threads; s++) {
        const s_shard_t *shard = &self->shards [s];
        if (shard->count == 0)
            continue;
        float *out = self->grads_out;
        const float *in = shard->grads;
        if (first)
            memcpy (out + begin, in + begin, (end - begin) * sizeof (float));
        else
            for (size_t i = begin; i < end; i++)
                out [i] += in [i];
        first = false;
    }
}

//  Thread t's part of the current job.
static void
s_run (ps_cpunet_t *self, int t)
{
    s_shard_t *shard = &self->shards [t];
    shard->first = (int) ((int64_t) self->n * t / self->threads);
    shard->count = (int) ((int64_t) self->n * (t + 1) / self->threads) - shard->first;
    shard->loss = 0;
    shard->correct = 0;
    shard->abs_sum = 0;
    if (shard->count > 0) {
        const float *acts [self->layers + 1];
        bool train = self->job == S_JOB_TRAIN;
        const float *logits = s_forward (self, shard, train, acts);
        bool timing = self->profiling && t == 0;
        double t0 = timing ? ps_clock_ms () : 0;
        const uint8_t *labels = self->labels + (size_t) shard->first * self->label_size;
        float *dlogits = train ? shard->grad_a : NULL;
        shard->loss = self->regression
                    ? ps_cpu_mse (shard->count, self->classes, logits, labels, 1.0f / self->n,
                                  dlogits, &shard->abs_sum)
                    : self->classes == 1
                    ? ps_cpu_sigmoid_xent (shard->count, logits, labels, 1.0f / self->n,
                                           dlogits, &shard->correct)
                    : ps_cpu_softmax_xent (shard->count, self->classes, logits, labels,
                                           1.0f / self->n, dlogits, &shard->correct);
        if (timing)
            (train ? shard->bwd_ms : shard->fwd_ms) [self->layers] += ps_clock_ms () - t0;
        if (train)
            s_backward (self, shard, acts);
        else
        if (self->logits_out)
            memcpy (self->logits_out + (size_t) shard->first * self->classes, logits,
                    (size_t) shard->count * self->classes * sizeof (float));
    }
    if (self->job == S_JOB_TRAIN) {
        pthread_barrier_wait (&self->barrier);
        s_reduce (self, t);
    }
    pthread_barrier_wait (&self->barrier);
}

static void *
s_thread (void *arg)
{
    s_shard_t *shard = arg;
    ps_cpunet_t *self = shard->owner;
    int t = shard->index;
    //  The generation is the one at creation, not the one this thread first
    //  sees: a job dispatched before the thread first ran is still its to do.
    uint64_t seen = shard->generation;
    while (true) {
        pthread_mutex_lock (&self->lock);
        while (self->generation == seen)
            pthread_cond_wait (&self->wake, &self->lock);
        seen = self->generation;
        s_job_kind_t job = self->job;
        pthread_mutex_unlock (&self->lock);
        if (job == S_JOB_STOP)
            return NULL;
        s_run (self, t);
    }
}

//  Run the job set in self on every thread, the caller included.
static void
s_dispatch (ps_cpunet_t *self)
{
    pthread_mutex_lock (&self->lock);
    self->generation++;
    pthread_cond_broadcast (&self->wake);
    pthread_mutex_unlock (&self->lock);
    if (self->job != S_JOB_STOP)
        s_run (self, 0);
}

//  Bytes of the machine's physical memory, or 0 when unknown.
static double
s_physical_memory (void)
{
    long pages = sysconf (_SC_PHYS_PAGES);
    long page = sysconf (_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double) pages * page : 0;
}

//  Allocate one shard's buffers; false when an allocation failed (what was
//  allocated is freed by ps_cpunet_destroy).
static bool
s_shard_alloc (ps_cpunet_t *self, s_shard_t *shard, int shard_max, size_t act, size_t col)
{
    shard->out = calloc (self->layers, sizeof (float *));
    shard->argmax = calloc (self->layers, sizeof (int32_t *));
    shard->fwd_ms = calloc (self->layers + 1, sizeof (double));
    shard->bwd_ms = calloc (self->layers + 1, sizeof (double));
    if (!shard->out || !shard->argmax || !shard->fwd_ms || !shard->bwd_ms)
        return false;
    for (int i = 0; i < self->layers; i++) {
        const ps_layer_t *l = ps_model_layer (self->model, i);
        size_t size = (size_t) l->out_h * l->out_w * l->out_c * shard_max;
        if (l->kind != PS_LAYER_FLATTEN && !(shard->out [i] = ps_floats_alloc (size)))
            return false;
        if (l->kind == PS_LAYER_MAXPOOL2D
        &&  !(shard->argmax [i] = (int32_t *) ps_floats_alloc (size)))
            return false;
    }
    return (shard->grad_a = ps_floats_alloc (act))
        && (shard->grad_b = ps_floats_alloc (act))
        && (!col || (shard->col = ps_floats_alloc (col)))
        && (shard->grads = ps_floats_alloc (self->param_count));
}

ps_cpunet_t *
ps_cpunet_new (const ps_model_t *model, int max_batch, int threads, ps_error_t *err)
{
    if (max_batch < 1 || threads < 1 || threads > 256) {
        ps_error_set (err, PS_EINVAL, "cpu backend: batch %d and threads %d must be "
                      "positive (threads at most 256)", max_batch, threads);
        return NULL;
    }
    //  Every BLAS call runs on the thread that makes it; see ps_cpunet.h.
    openblas_set_num_threads (1);
    ps_cpunet_t *self = calloc (1, sizeof *self);
    if (!self) {
        ps_error_set (err, PS_ETOOBIG, "cpu backend: out of memory");
        return NULL;
    }
    //  The synchronisation objects come first, so that destroy can undo
    //  any later failure. With default attributes they fail only when
    //  memory is exhausted, which may abort.
    if (pthread_mutex_init (&self->lock, NULL)
    ||  pthread_cond_init (&self->wake, NULL)
    ||  pthread_barrier_init (&self->barrier, NULL, (unsigned) threads))
        abort ();
    self->model = model;
    self->layers = ps_model_layer_count (model);
    self->threads = 1;          //  only the caller until the workers start
    self->max_batch = max_batch;
    self->classes = ps_model_classes (model);
    self->regression = ps_model_regression (model);
    self->label_size = ps_model_label_size (model);
    self->param_count = ps_model_param_count (model);
    for (int i = 0; i < self->layers; i++)
        self->conv_count += ps_model_layer (model, i)->kind == PS_LAYER_CONV2D;
    self->last_param_layer = self->layers;
    for (int i = self->layers - 1; i >= 0; i--)
        if (ps_model_layer (model, i)->kernel >= 0 || ps_model_layer (model, i)->bias >= 0)
            self->last_param_layer = i;

    //  Size everything first, and refuse a batch whose buffers could never
    //  fit, rather than dying half way through allocating them.
    const int shard_max = (max_batch + threads - 1) / threads;
    size_t col = 0;
    double per_shard = 0;
    for (int i = 0; i < self->layers; i++) {
        const ps_layer_t *l = ps_model_layer (model, i);
        double size = (double) l->out_h * l->out_w * l->out_c * shard_max;
        per_shard += size * ((l->kind != PS_LAYER_FLATTEN) + (l->kind == PS_LAYER_MAXPOOL2D));
        if (l->kind == PS_LAYER_CONV2D && ps_cpu_conv2d_col_size (l, shard_max) > col)
            col = ps_cpu_conv2d_col_size (l, shard_max);
    }
    size_t act = ps_model_max_activation (model) * shard_max;
    per_shard += 2.0 * act + col + self->param_count;
    double bytes = 4 * ((double) threads * per_shard + self->param_count);
    double memory = s_physical_memory ();
    if (memory > 0 && bytes > memory) {
        ps_error_set (err, PS_ETOOBIG, "cpu backend: batches of %d on %d threads need "
                      "%.1f GiB of buffers, more than the %.1f GiB of memory here; use a "
                      "smaller batch", max_batch, threads, bytes / (1 << 30), memory / (1 << 30));
        ps_cpunet_destroy (&self);
        return NULL;
    }
    bool ok = (self->shards = calloc (threads, sizeof (s_shard_t)))
           && (self->tids = calloc (threads, sizeof (pthread_t)));
    if (ok) {
        self->shard_count = threads;
        for (int t = 0; ok && t < threads; t++) {
            self->shards [t].owner = self;
            self->shards [t].index = t;
            ok = s_shard_alloc (self, &self->shards [t], shard_max, act, col);
        }
    }
    if (!ok) {
        ps_error_set (err, PS_ETOOBIG, "cpu backend: out of memory for %.1f GiB of buffers",
                      bytes / (1 << 30));
        ps_cpunet_destroy (&self);
        return NULL;
    }
    for (int t = 1; t < threads; t++) {
        self->shards [t].generation = self->generation;
        int rc = pthread_create (&self->tids [t], NULL, s_thread, &self->shards [t]);
        if (rc != 0) {
            ps_error_set (err, PS_EIO, "cpu backend: pthread_create: %s", strerror (rc));
            //  Stop the threads already started, then free everything.
            ps_cpunet_destroy (&self);
            return NULL;
        }
        self->threads = t + 1;
    }
    return self;
}

void
ps_cpunet_destroy (ps_cpunet_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ps_cpunet_t *self = *self_p;
    self->job = S_JOB_STOP;
    s_dispatch (self);
    for (int t = 1; t < self->threads; t++)
        pthread_join (self->tids [t], NULL);
    pthread_barrier_destroy (&self->barrier);
    pthread_cond_destroy (&self->wake);
    pthread_mutex_destroy (&self->lock);
    //  Shards exist for every thread asked for, even when fewer started.
    for (int t = 0; t < self->shard_count; t++) {
        s_shard_t *shard = &self->shards [t];
        //  A failed constructor may leave a shard only partly allocated.
        for (int i = 0; i < self->layers; i++) {
            if (shard->out)
                free (shard->out [i]);
            if (shard->argmax)
                free (shard->argmax [i]);
        }
        free (shard->out);
        free (shard->argmax);
        free (shard->fwd_ms);
        free (shard->bwd_ms);
        free (shard->grad_a);
        free (shard->grad_b);
        free (shard->col);
        free (shard->grads);
    }
    free (self->tids);
    free (self->shards);
    free (self);
    *self_p = NULL;
}

//  Sum the shards' loss and accuracy after a job.
static void
s_stats (const ps_cpunet_t *self, ps_batch_stats_t *stats)
{
    stats->loss_sum = 0;
    stats->correct = 0;
    stats->count = self->n;
    stats->abs_sum = 0;
    for (int t = 0; t < self->threads; t++) {
        stats->loss_sum += self->shards [t].loss;
        stats->abs_sum += self->shards [t].abs_sum;
        stats->correct += self->shards [t].correct;
    }
}

int
ps_cpunet_threads (const ps_cpunet_t *self)
{
    return self->threads;
}

void
ps_cpunet_set_params (ps_cpunet_t *self, const float *params)
{
    self->params = params;
}

void
ps_cpunet_train_step (ps_cpunet_t *self, const float *x, const uint8_t *labels,
                      int n, uint64_t dropout_seed, float *grads, ps_batch_stats_t *stats)
{
    self->job = S_JOB_TRAIN;
    self->x = x;
    self->labels = labels;
    self->n = n;
    self->seed = dropout_seed;
    self->grads_out = grads;
    self->logits_out = NULL;
    s_dispatch (self);
    s_stats (self, stats);
}

void
ps_cpunet_forward (ps_cpunet_t *self, const float *x, const uint8_t *labels,
                   int n, float *logits, ps_batch_stats_t *stats)
{
    self->job = S_JOB_FORWARD;
    self->x = x;
    self->labels = labels;
    self->n = n;
    self->grads_out = NULL;
    self->logits_out = logits;
    s_dispatch (self);
    s_stats (self, stats);
}

void
ps_cpunet_set_profiling (ps_cpunet_t *self, bool enabled)
{
    self->profiling = enabled;
}

void
ps_cpunet_profile (const ps_cpunet_t *self, double *fwd_ms, double *bwd_ms)
{
    memcpy (fwd_ms, self->shards [0].fwd_ms, (self->layers + 1) * sizeof (double));
    memcpy (bwd_ms, self->shards [0].bwd_ms, (self->layers + 1) * sizeof (double));
}
