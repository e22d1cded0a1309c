//  Training throughput of the worker's compute engine, in one run.
//
//  For each model asked for (the seed CNN by default) it times full local
//  training steps, as a standalone worker runs them (worker/ps_standalone.c):
//  ps_backend_set_params, ps_backend_train_step and the Adam update
//  (ps_opt_apply per variable, Keras defaults, lr 0.001), over real
//  Fashion-MNIST batches taken in shuffled order with ps_dataset_batch
//  (12,800 training examples; random data with a printed note when the data
//  set cannot be read). Copying a batch out of the data set is outside the
//  timed region, as in ps_standalone. After a warm-up, each configuration is
//  timed in several repetitions of about 1 s of busy time; a repetition's
//  figure is examples / busy seconds, and the table gives their median and
//  min-max.
//
//  Table 1: samples/s on the CPU with 1 and 2 threads (and on the GPU at
//  batches 64 and 512 when --device gpu or auto finds one); GFLOP/s counted
//  as 6 x forward MACs per example (2 FLOP per MAC; forward + 2x backward,
//  although the first layer computes no input gradient, so the work done is
//  somewhat less); process CPU seconds per wall second while timing; the
//  2-thread / 1-thread ratio. Then forward-only evaluation at batch 500 with
//  2 threads over the test set.
//
//  Table 2: where a step's time goes. With the backend's profiling on
//  (ps_backend_set_profiling), forward and backward ms per step of every
//  layer and of the loss, with 1 and 2 threads side by side; with 2 threads
//  the engine times thread 0, which runs half of the batch. The rest of the
//  step is timed here: set_params, the Adam update, and "engine other", the
//  train_step wall time the layers do not account for (waking the threads,
//  the barriers, waiting for the slower thread, summing the shards'
//  gradients).
//
//  Table 3: the peers, measured in the same run. OpenBLAS's single-thread
//  sgemm at the shapes of the CNN's two largest GEMMs, the ceiling a layer's
//  GFLOP/s in table 2 is compared with. And PyTorch: for the models it has a
//  version of (cnn, mlp), tests/bench/torch_cnn.py --bench times the same
//  training steps (forward, backward, Adam with Keras's defaults) and
//  evaluation on the same examples, batch, threads and repetitions, after
//  this program's own measurements, so the two never compete for the cores.
//  Where /usr/bin/python3 cannot import torch (python3-torch), or with
//  --no-peer, the table says there is no peer figure and why; no ratio is
//  ever taken to a figure written into this file.
//
//  A benchmark prints and never fails on timings: the summary's target says
//  "met" or "NOT met" for information only; the summary and the PyTorch
//  ratios are BENCHROW lines too (harness_benchrow.h). It exits non-zero only when
//  something could not be set up (model, backend, a failed step).
//
//  Usage: bench_cnn [--quick] [--model cnn|cnn2|mlp|all|PATH]
//                   [--device cpu|gpu|auto] [--batch N] [--data DIR]
//                   [--no-peer] [--python PATH]
//
//  This file is longer than the project's 800 lines on purpose: it is one
//  benchmark, whose tables share the timing, the data and the PyTorch peer.

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "harness.h"
#include "harness_benchrow.h"
#include "ps_backend.h"
#include "ps_clock.h"
#include "ps_dataset.h"
#include "ps_floats.h"
#include "ps_gpu.h"
#include "ps_mix.h"
#include "ps_model.h"
#include "ps_optimizer.h"

#define S_TRAIN_LIMIT   12800       //  training examples loaded
#define S_EVAL_BATCH    500
#define S_SEED          1
#define S_MAX_REPS      16
#define S_MAX_ROWS      32
#define S_MAX_MODELS    8
#define S_MAX_LAYERS    64

#define S_MAX_PEERS     16
//  The project's goal for the seed CNN with 2 threads (README, Benchmarks).
#define S_TARGET_2T     12000.0

//  The PyTorch peer, tests/bench/torch_cnn.py, as the build knows it.
#ifndef BENCH_TORCH_SCRIPT
#   define BENCH_TORCH_SCRIPT "tests/bench/torch_cnn.py"
#endif

//  How long to measure.
typedef struct {
    int reps;                   //  timed repetitions per configuration
    double rep_s;               //  busy seconds per repetition
    double warmup_s;            //  busy seconds of warm-up before them
    double profile_s;           //  busy seconds of the profiled run
} s_plan_t;

//  Where batches come from: the real data set, or a pool of random
//  examples when it cannot be read.
typedef struct {
    ps_dataset_t *train;        //  NULL: random pool
    ps_dataset_t *test;         //  NULL: evaluate on the training source
    float *pool_x;
    uint8_t *pool_labels;
    size_t pool_count;
    size_t input_size;
    uint64_t epoch;             //  where the walk through the epochs is
    size_t next;
    uint64_t draws;
    size_t eval_next;
} s_source_t;

//  One line of table 1.
typedef struct {
    char model [32];
    char what [48];             //  "train" or "eval"
    char device [96];
    bool gpu;
    int batch;
    int threads;
    double median, lo, hi;      //  samples/s
    double macs;                //  forward MACs per example
    double flop_factor;         //  6 for training, 2 for evaluation
    double cpus;                //  process CPU s per wall s, or < 0
    double ms_data;             //  ms per batch to copy it out of the data set
    int steps;
    bool train;
} s_row_t;

//  A profiled run: per layer (and the loss last) ms per step.
typedef struct {
    bool done;
    int layers;
    int shard;                  //  examples thread 0 ran per step
    int steps;
    double fwd [S_MAX_LAYERS + 1], bwd [S_MAX_LAYERS + 1];
    double set_params, train_step, optimizer;   //  ms per step
} s_profile_t;

//  A peer's figure for one of our rows: PyTorch's samples/s for the same
//  model, kind of work, threads and batch, or OpenBLAS's sgemm GFLOP/s.
typedef struct {
    char model [32];
    bool train;
    int threads;
    int batch;
    double median, lo, hi;
} s_peer_t;

static s_row_t s_rows [S_MAX_ROWS];
static int s_nrows;
static s_peer_t s_peers [S_MAX_PEERS];
static int s_npeers;
//  What the PyTorch peer was ("torch 1.13.1"), or why there is none.
static char s_peer_note [1024];

//  ---------------------------------------------------------------------
//  Helpers

//  Seconds on the monotonic clock.
static double
s_now (void)
{
    return ps_clock_ms () / 1e3;
}

static double
s_cpu_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static void
s_fail (const char *what, const char *detail)
{
    fprintf (stderr, "bench_cnn: %s: %s\n", what, detail);
    exit (EXIT_FAILURE);
}

static void
s_check (int rc, const char *what, const ps_error_t *err)
{
    if (rc < 0)
        s_fail (what, err->msg);
}

static float *
s_floats (size_t n)
{
    float *p = ps_floats_alloc (n ? n : 1);
    if (!p)
        s_fail ("ps_floats_alloc", strerror (ENOMEM));
    memset (p, 0, (n ? n : 1) * sizeof (float));
    return p;
}

//  Median, min and max of n samples; sorts them.
static void
s_stats (double *samples, int n, double *median, double *lo, double *hi)
{
    *median = harness_median (samples, n);
    *lo = samples [0];
    *hi = samples [n - 1];
}

//  12345 -> "12,345".
static const char *
s_thousands (char *buf, size_t len, double value)
{
    char digits [32];
    snprintf (digits, sizeof digits, "%.0f", value);
    size_t nd = strlen (digits), at = 0;
    for (size_t i = 0; i < nd && at + 2 < len; i++) {
        if (i > 0 && digits [i - 1] != '-' && (nd - i) % 3 == 0)
            buf [at++] = ',';
        buf [at++] = digits [i];
    }
    buf [at] = 0;
    return buf;
}

//  Forward MACs per example of layer l (0 for layers without a GEMM).
static double
s_layer_macs (const ps_layer_t *l)
{
    if (l->kind != PS_LAYER_CONV2D && l->kind != PS_LAYER_DENSE)
        return 0;
    double macs = (double) l->out_h * l->out_w * l->out_c * l->kh * l->kw * l->in_c;
    if (l->kind == PS_LAYER_DENSE)
        macs *= (double) l->in_h * l->in_w;
    return macs;
}

static const char *
s_kind_name (ps_layer_kind_t kind)
{
    switch (kind) {
        case PS_LAYER_CONV2D: return "Conv2D";
        case PS_LAYER_DENSE: return "Dense";
        case PS_LAYER_MAXPOOL2D: return "MaxPool2D";
        case PS_LAYER_RELU: return "ReLU";
        case PS_LAYER_FLATTEN: return "Flatten";
        case PS_LAYER_DROPOUT: return "Dropout";
        case PS_LAYER_EMBEDDING: return "Embedding";
        case PS_LAYER_CONCATENATE: return "Concatenate";
        case PS_LAYER_ACTIVATION: return "Activation";
        case PS_LAYER_AVGPOOL2D: return "AveragePooling2D";
        case PS_LAYER_GLOBALAVGPOOL2D: return "GlobalAveragePooling2D";
    }
    return "?";
}

//  ---------------------------------------------------------------------
//  Data

static void
s_source_open (s_source_t *src, const char *dir, const ps_model_t *model)
{
    memset (src, 0, sizeof *src);
    src->input_size = ps_model_input_size (model);
    int h, w, c;
    ps_model_input_shape (model, &h, &w, &c);
    ps_error_t err;
    src->train = ps_dataset_load (dir, PS_SPLIT_TRAIN, S_TRAIN_LIMIT, &err);
    if (!src->train)
        printf ("note: %s; timing on random data instead\n", err.msg);
    else
    if ((size_t) ps_dataset_rows (src->train) * ps_dataset_cols (src->train) != src->input_size
    ||  ps_model_classes (model) != ps_dataset_classes (src->train)) {
        printf ("note: model \"%s\" takes [%d, %d, %d] inputs and %d classes, the data %dx%d "
                "images and %d classes; timing on random data instead\n", ps_model_name (model),
                h, w, c, ps_model_classes (model), ps_dataset_rows (src->train),
                ps_dataset_cols (src->train), ps_dataset_classes (src->train));
        ps_dataset_destroy (&src->train);
    }
    if (src->train) {
        src->test = ps_dataset_load (dir, PS_SPLIT_TEST, 0, &err);
        if (!src->test)
            printf ("note: %s; evaluating on the training examples instead\n", err.msg);
        return;
    }
    //  Random pixels in [0, 1) and random labels, drawn in random order.
    src->pool_count = S_TRAIN_LIMIT;
    src->pool_x = s_floats (src->pool_count * src->input_size);
    src->pool_labels = malloc (src->pool_count);
    if (!src->pool_labels)
        s_fail ("malloc", strerror (ENOMEM));
    uint64_t key = ps_mix64 (S_SEED);
    for (size_t i = 0; i < src->pool_count * src->input_size; i++)
        src->pool_x [i] = (float) (ps_mix_draw (key, i) >> 40) * (1.0f / 16777216.0f);
    int classes = ps_model_classes (model);
    for (size_t i = 0; i < src->pool_count; i++)
        src->pool_labels [i] = (uint8_t) (ps_mix_draw (key ^ 1, i) % (uint64_t) classes);
}

static void
s_source_close (s_source_t *src)
{
    ps_dataset_destroy (&src->train);
    ps_dataset_destroy (&src->test);
    free (src->pool_x);
    free (src->pool_labels);
}

//  The next training batch of up to `batch` examples; walks the epochs'
//  shuffled orders. Returns the number of examples.
static int
s_source_batch (s_source_t *src, int batch, float *x, uint8_t *labels)
{
    if (src->train) {
        if (src->next >= ps_dataset_batches (src->train, batch)) {
            src->epoch++;
            src->next = 0;
        }
        ps_error_t err;
        int n = ps_dataset_batch (src->train, S_SEED, src->epoch, src->next++, batch,
                                  x, labels, &err);
        s_check (n, "ps_dataset_batch", &err);
        return n;
    }
    uint64_t key = ps_mix64 (S_SEED + 7);
    for (int e = 0; e < batch; e++) {
        size_t i = (size_t) (ps_mix_draw (key, src->draws++) % src->pool_count);
        memcpy (x + (size_t) e * src->input_size, src->pool_x + i * src->input_size,
                src->input_size * sizeof (float));
        labels [e] = src->pool_labels [i];
    }
    return batch;
}

//  The next evaluation batch: the test set in file order, round and round.
static int
s_source_eval (s_source_t *src, int batch, float *x, uint8_t *labels)
{
    const ps_dataset_t *data = src->test ? src->test : src->train;
    if (data) {
        if (src->eval_next >= ps_dataset_count (data))
            src->eval_next = 0;
        int n = ps_dataset_slice (data, src->eval_next, batch, x, labels);
        src->eval_next += (size_t) n;
        return n;
    }
    return s_source_batch (src, batch, x, labels);
}

//  ---------------------------------------------------------------------
//  Training state: the flat parameters, the gradient and Adam's slots, as
//  ps_standalone keeps them.

typedef struct {
    const ps_model_t *model;
    ps_opt_config_t cfg;
    int slot_count;
    float *params, *grads;
    float *slots [PS_OPT_MAX_SLOTS];
    uint64_t t;
    float *x;
    uint8_t *labels;
    uint64_t step;
} s_trainer_t;

static void
s_trainer_init (s_trainer_t *self, const ps_model_t *model, int max_batch)
{
    memset (self, 0, sizeof *self);
    self->model = model;
    ps_opt_config_default (&self->cfg, PS_OPT_ADAM);
    self->slot_count = ps_opt_slot_count (self->cfg.kind);
    size_t n = ps_model_param_count (model);
    self->params = s_floats (n);
    self->grads = s_floats (n);
    for (int s = 0; s < self->slot_count; s++)
        self->slots [s] = s_floats (n);
    self->x = s_floats ((size_t) max_batch * ps_model_input_size (model));
    self->labels = calloc ((size_t) max_batch, 1);
    if (!self->labels)
        s_fail ("calloc", strerror (ENOMEM));
    self->t = 0;
    ps_model_init_params (model, S_SEED, self->params);
    ps_opt_init_slots (&self->cfg, self->slots, n);
}

//  Start again from the initial weights and fresh slots, so that every
//  configuration times the same trajectory.
static void
s_trainer_reset (s_trainer_t *self)
{
    ps_model_init_params (self->model, S_SEED, self->params);
    ps_opt_init_slots (&self->cfg, self->slots, ps_model_param_count (self->model));
    self->t = 0;
    self->step = 0;
}

static void
s_trainer_fini (s_trainer_t *self)
{
    free (self->params);
    free (self->grads);
    for (int s = 0; s < self->slot_count; s++)
        free (self->slots [s]);
    free (self->x);
    free (self->labels);
}

static void
s_trainer_apply (s_trainer_t *self)
{
    self->t++;
    for (int i = 0; i < ps_model_variable_count (self->model); i++) {
        const ps_variable_t *v = ps_model_variable (self->model, i);
        float *slots [PS_OPT_MAX_SLOTS];
        for (int s = 0; s < self->slot_count; s++)
            slots [s] = self->slots [s] + v->offset;
        ps_opt_apply (&self->cfg, self->params + v->offset, self->grads + v->offset, slots,
                      v->count, self->t);
    }
}

//  Times of one step's parts, in seconds.
typedef struct {
    double set_params, train_step, optimizer;
} s_step_times_t;

//  One full training step on the batch in self->x; returns its busy time.
static double
s_train_step (s_trainer_t *self, ps_backend_t *backend, int n, s_step_times_t *parts)
{
    ps_error_t err;
    ps_batch_stats_t stats;
    uint64_t seed = ps_mix_draw (ps_mix64 (S_SEED ^ 0x64726f706f7574ULL), self->step++);
    double t0 = s_now ();
    s_check (ps_backend_set_params (backend, self->params, &err), "ps_backend_set_params", &err);
    double t1 = s_now ();
    s_check (ps_backend_train_step (backend, self->x, self->labels, n, seed, self->grads,
                                    &stats, &err), "ps_backend_train_step", &err);
    double t2 = s_now ();
    s_trainer_apply (self);
    double t3 = s_now ();
    if (parts) {
        parts->set_params += t1 - t0;
        parts->train_step += t2 - t1;
        parts->optimizer += t3 - t2;
    }
    return t3 - t0;
}

//  A CPU backend with `threads` threads, or exit naming the failure.
static ps_backend_t *
s_cpu_backend (const ps_model_t *model, int max_batch, int threads)
{
    ps_error_t err;
    ps_backend_t *backend = ps_backend_new (model, PS_DEVICE_CPU, max_batch, threads, &err);
    if (!backend)
        s_fail ("ps_backend_new (cpu)", err.msg);
    return backend;
}

//  ---------------------------------------------------------------------
//  Measurements

static s_row_t *
s_add_row (const char *model, const char *what, const ps_backend_t *backend, int batch,
           int threads, double macs, bool train)
{
    if (s_nrows == S_MAX_ROWS)
        s_fail ("table", "too many rows");
    s_row_t *row = &s_rows [s_nrows++];
    memset (row, 0, sizeof *row);
    snprintf (row->model, sizeof row->model, "%s", model);
    snprintf (row->what, sizeof row->what, "%s", what);
    snprintf (row->device, sizeof row->device, "%s", ps_backend_describe (backend));
    row->gpu = ps_backend_device (backend) == PS_DEVICE_GPU;
    row->batch = batch;
    row->threads = threads;
    row->macs = macs;
    row->flop_factor = train ? 6 : 2;
    row->train = train;
    return row;
}

//  Training throughput: warm-up, then plan->reps repetitions.
static void
s_measure_train (s_row_t *row, s_trainer_t *trainer, ps_backend_t *backend,
                 s_source_t *src, int batch, const s_plan_t *plan)
{
    s_trainer_reset (trainer);
    double busy = 0;
    int warm = 0;
    while (busy < plan->warmup_s || warm < 3) {
        int n = s_source_batch (src, batch, trainer->x, trainer->labels);
        busy += s_train_step (trainer, backend, n, NULL);
        warm++;
    }
    double rates [S_MAX_REPS];
    double cpu_sum = 0, wall_sum = 0, data_s = 0;
    int steps = 0;
    for (int r = 0; r < plan->reps; r++) {
        double examples = 0;
        busy = 0;
        double wall0 = s_now (), cpu0 = s_cpu_now ();
        while (busy < plan->rep_s) {
            double d0 = s_now ();
            int n = s_source_batch (src, batch, trainer->x, trainer->labels);
            data_s += s_now () - d0;
            busy += s_train_step (trainer, backend, n, NULL);
            examples += n;
            steps++;
        }
        cpu_sum += s_cpu_now () - cpu0;
        wall_sum += s_now () - wall0;
        rates [r] = examples / busy;
    }
    s_stats (rates, plan->reps, &row->median, &row->lo, &row->hi);
    row->cpus = row->gpu ? -1 : cpu_sum / wall_sum;
    row->ms_data = data_s / steps * 1e3;
    row->steps = steps;
}

//  Evaluation throughput (forward only, no dropout) at batch S_EVAL_BATCH.
static void
s_measure_eval (s_row_t *row, s_trainer_t *trainer, ps_backend_t *backend,
                s_source_t *src, const s_plan_t *plan)
{
    ps_error_t err;
    s_trainer_reset (trainer);
    s_check (ps_backend_set_params (backend, trainer->params, &err), "ps_backend_set_params",
             &err);
    double rates [S_MAX_REPS];
    double cpu_sum = 0, wall_sum = 0;
    int steps = 0;
    for (int r = -1; r < plan->reps; r++) {       //  r = -1: warm-up
        double examples = 0, busy = 0;
        double wall0 = s_now (), cpu0 = s_cpu_now ();
        double until = r < 0 ? plan->warmup_s : plan->rep_s;
        while (busy < until || examples == 0) {
            int n = s_source_eval (src, S_EVAL_BATCH, trainer->x, trainer->labels);
            ps_batch_stats_t stats;
            double t0 = s_now ();
            s_check (ps_backend_forward (backend, trainer->x, trainer->labels, n, NULL, &stats,
                                         &err), "ps_backend_forward", &err);
            busy += s_now () - t0;
            examples += n;
            steps += r >= 0;
        }
        if (r >= 0) {
            cpu_sum += s_cpu_now () - cpu0;
            wall_sum += s_now () - wall0;
            rates [r] = examples / busy;
        }
    }
    s_stats (rates, plan->reps, &row->median, &row->lo, &row->hi);
    row->cpus = row->gpu ? -1 : cpu_sum / wall_sum;
    row->steps = steps;
    row->ms_data = -1;
}

//  A profiled run of training steps on the backend.
static void
s_measure_profile (s_profile_t *prof, s_trainer_t *trainer, ps_backend_t *backend,
                   s_source_t *src, int batch, int threads, const s_plan_t *plan)
{
    const ps_model_t *model = trainer->model;
    int layers = ps_model_layer_count (model);
    memset (prof, 0, sizeof *prof);
    prof->layers = layers;
    prof->shard = ps_backend_device (backend) == PS_DEVICE_GPU ? batch : batch / threads;
    s_trainer_reset (trainer);
    ps_backend_set_profiling (backend, true);
    //  A few steps to settle, then the totals are read before and after.
    for (int i = 0; i < 3; i++) {
        int n = s_source_batch (src, batch, trainer->x, trainer->labels);
        s_train_step (trainer, backend, n, NULL);
    }
    double fwd0 [S_MAX_LAYERS + 1], bwd0 [S_MAX_LAYERS + 1];
    double fwd1 [S_MAX_LAYERS + 1], bwd1 [S_MAX_LAYERS + 1];
    ps_backend_profile (backend, fwd0, bwd0);
    s_step_times_t parts = { 0, 0, 0 };
    double busy = 0;
    int steps = 0;
    while (busy < plan->profile_s || steps < 5) {
        //  Full batches only, so that every step has the same shape.
        int n = s_source_batch (src, batch, trainer->x, trainer->labels);
        if (n < batch)
            continue;
        busy += s_train_step (trainer, backend, n, &parts);
        steps++;
    }
    ps_backend_profile (backend, fwd1, bwd1);
    ps_backend_set_profiling (backend, false);
    for (int i = 0; i <= layers; i++) {
        prof->fwd [i] = (fwd1 [i] - fwd0 [i]) / steps;
        prof->bwd [i] = (bwd1 [i] - bwd0 [i]) / steps;
    }
    prof->set_params = parts.set_params / steps * 1e3;
    prof->train_step = parts.train_step / steps * 1e3;
    prof->optimizer = parts.optimizer / steps * 1e3;
    prof->steps = steps;
    prof->done = true;
}

//  ---------------------------------------------------------------------
//  Peers

//  OpenBLAS sgemm shapes (m, n, k) timed on one thread: the seed CNN's
//  convolution as im2col GEMM at batch 64 (64 x 26 x 26 rows, 32 filters,
//  3 x 3 x 1), and the MLP's first Dense layer at batch 64.
static const int s_sgemm_shapes [][3] = { { 43264, 32, 9 }, { 64, 128, 784 } };
#define S_SGEMMS (sizeof s_sgemm_shapes / sizeof s_sgemm_shapes [0])
static double s_sgemm [S_SGEMMS][3];        //  GFLOP/s median, min, max

//  Times C = A B at shape `shape` on one OpenBLAS thread, as the CPU engine
//  calls it, in repetitions like a training row's; fills `gflops`.
static void
s_measure_sgemm (const int *shape, const s_plan_t *plan, double *gflops)
{
    int m = shape [0], n = shape [1], k = shape [2];
    float *a = s_floats ((size_t) m * (size_t) k);
    float *b = s_floats ((size_t) k * (size_t) n);
    float *c = s_floats ((size_t) m * (size_t) n);
    for (size_t i = 0; i < (size_t) m * (size_t) k; i++)
        a [i] = (float) (i % 13) * 0.01f;
    for (size_t i = 0; i < (size_t) k * (size_t) n; i++)
        b [i] = (float) (i % 7) * 0.01f;
    openblas_set_num_threads (1);
    double rates [S_MAX_REPS];
    for (int r = -1; r < plan->reps; r++) {     //  r = -1: warm-up
        double busy = 0, flop = 0;
        double until = r < 0 ? plan->warmup_s : plan->rep_s;
        while (busy < until || flop == 0) {
            double t0 = s_now ();
            cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n,
                         0.0f, c, n);
            busy += s_now () - t0;
            flop += 2.0 * m * n * k;
        }
        if (r >= 0)
            rates [r] = flop / busy * 1e-9;
    }
    s_stats (rates, plan->reps, &gflops [0], &gflops [1], &gflops [2]);
    free (a);
    free (b);
    free (c);
}

//  Runs the PyTorch peer for `model` with this run's batch, examples and
//  plan (`python` found on PATH when it has no slash), and adds the figures
//  it prints to s_peers. Returns 0 with s_peer_note naming the peer, or -1
//  with s_peer_note saying why there is no peer figure.
static int
s_run_torch_peer (const char *python, const char *model, int batch, const char *data_dir,
                  const s_plan_t *plan)
{
    char batch_s [16], eval_s [16], limit_s [16], reps_s [16], rep_s [32], warm_s [32];
    snprintf (batch_s, sizeof batch_s, "%d", batch);
    snprintf (eval_s, sizeof eval_s, "%d", S_EVAL_BATCH);
    snprintf (limit_s, sizeof limit_s, "%d", S_TRAIN_LIMIT);
    snprintf (reps_s, sizeof reps_s, "%d", plan->reps);
    snprintf (rep_s, sizeof rep_s, "%g", plan->rep_s);
    snprintf (warm_s, sizeof warm_s, "%g", plan->warmup_s);
    char *argv [] = {
        (char *) python, (char *) BENCH_TORCH_SCRIPT, "--bench", "--model", (char *) model,
        "--threads", "1,2", "--eval-threads", "2", "--batch", batch_s, "--eval-batch", eval_s,
        "--limit", limit_s, "--reps", reps_s, "--rep-seconds", rep_s, "--warmup", warm_s,
        "--data", (char *) data_dir, NULL
    };
    int fds [2];
    if (pipe (fds)) {
        snprintf (s_peer_note, sizeof s_peer_note, "pipe: %s", strerror (errno));
        return -1;
    }
    //  The peer's stdout and stderr both come here: its last line that is
    //  not a figure says why it failed, when it does.
    posix_spawn_file_actions_t actions;
    pid_t pid;
    int rc = posix_spawn_file_actions_init (&actions);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2 (&actions, fds [1], STDOUT_FILENO);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2 (&actions, fds [1], STDERR_FILENO);
    if (rc == 0)
        rc = posix_spawn_file_actions_addclose (&actions, fds [0]);
    if (rc == 0)
        rc = posix_spawnp (&pid, python, &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy (&actions);
    close (fds [1]);
    if (rc) {
        close (fds [0]);
        snprintf (s_peer_note, sizeof s_peer_note, "cannot run %s: %s", python,
                  strerror (rc));
        return -1;
    }
    FILE *out = fdopen (fds [0], "r");
    if (!out)
        s_fail ("fdopen", strerror (errno));
    char line [512], last [512] = "", version [64] = "?";
    while (fgets (line, sizeof line, out)) {
        line [strcspn (line, "\n")] = 0;
        s_peer_t peer;
        char kind [8];
        memset (&peer, 0, sizeof peer);
        if (sscanf (line, "peer %7s %31s %d %d %lf %lf %lf", kind, peer.model, &peer.threads,
                    &peer.batch, &peer.median, &peer.lo, &peer.hi) == 7
        &&  (strcmp (kind, "train") == 0 || strcmp (kind, "eval") == 0)) {
            peer.train = strcmp (kind, "train") == 0;
            if (s_npeers < S_MAX_PEERS)
                s_peers [s_npeers++] = peer;
        }
        else
        if (sscanf (line, "peer torch %63s", version) == 1)
            ;
        else
        if (*line)
            snprintf (last, sizeof last, "%s", line);
    }
    fclose (out);
    int status;
    while (waitpid (pid, &status, 0) < 0)
        if (errno != EINTR)
            s_fail ("waitpid", strerror (errno));
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
        snprintf (s_peer_note, sizeof s_peer_note, "%s %s %s (%s)", python,
                  BENCH_TORCH_SCRIPT, WIFEXITED (status) ? "failed" : "was killed",
                  *last ? last : "no output");
        return -1;
    }
    snprintf (s_peer_note, sizeof s_peer_note, "PyTorch %s, timed in this run by %s %s --bench",
              version, python, BENCH_TORCH_SCRIPT);
    return 0;
}

//  The peer's figure for our row, or NULL.
static const s_peer_t *
s_peer_for (const s_row_t *row)
{
    for (int i = 0; i < s_npeers && !row->gpu; i++)
        if (strcmp (s_peers [i].model, row->model) == 0 && s_peers [i].train == row->train
        &&  s_peers [i].threads == row->threads && s_peers [i].batch == row->batch)
            return &s_peers [i];
    return NULL;
}

static void
s_print_table3 (const s_plan_t *plan, bool sgemm_done)
{
    printf ("\nTable 3: peers, timed in this run after the rows above (median of %d "
            "repetitions of %.2f s)\n", plan->reps, plan->rep_s);
    if (sgemm_done) {
        printf ("OpenBLAS sgemm on 1 thread, the ceiling for table 2's GF/s columns:\n");
        printf ("  %-22s %8s %15s\n", "(m, n, k)", "GFLOP/s", "min-max");
        for (size_t i = 0; i < S_SGEMMS; i++) {
            char shape [48], range [32];
            snprintf (shape, sizeof shape, "(%d, %d, %d)", s_sgemm_shapes [i][0],
                      s_sgemm_shapes [i][1], s_sgemm_shapes [i][2]);
            snprintf (range, sizeof range, "%.1f-%.1f", s_sgemm [i][1], s_sgemm [i][2]);
            printf ("  %-22s %8.1f %15s\n", shape, s_sgemm [i][0], range);
        }
    }
    if (s_npeers == 0) {
        printf ("PyTorch: no peer figure: %s\n", s_peer_note);
        return;
    }
    printf ("PyTorch: %s\n", s_peer_note);
    printf ("  %-6s %-6s %7s %5s %12s %12s %17s %9s\n", "model", "what", "threads", "batch",
            "ours", "PyTorch", "PyTorch min-max", "ours/PT");
    for (int i = 0; i < s_nrows; i++) {
        const s_row_t *row = &s_rows [i];
        const s_peer_t *peer = s_peer_for (row);
        if (!peer)
            continue;
        char ours [24], theirs [24], lo [24], hi [24], range [48];
        s_thousands (ours, sizeof ours, row->median);
        s_thousands (theirs, sizeof theirs, peer->median);
        s_thousands (lo, sizeof lo, peer->lo);
        s_thousands (hi, sizeof hi, peer->hi);
        snprintf (range, sizeof range, "%s-%s", lo, hi);
        printf ("  %-6s %-6s %7d %5d %12s %12s %17s %8.2fx\n", row->model, row->what,
                row->threads, row->batch, ours, theirs, range, row->median / peer->median);
    }
    printf ("ours, PyTorch: samples/s; PyTorch trains the same model (Keras's initialisers,\n"
            "Adam lr 1e-3, eps 1e-7) on the same examples and batch with\n"
            "torch.set_num_threads (threads), and evaluates at batch %d without gradients.\n",
            S_EVAL_BATCH);
}

//  ---------------------------------------------------------------------
//  Output

static void
s_print_machine (void)
{
    long cores = sysconf (_SC_NPROCESSORS_ONLN);
    char cpu [128] = "unknown";
    FILE *info = fopen ("/proc/cpuinfo", "r");
    if (info) {
        char line [256];
        while (fgets (line, sizeof line, info))
            if (strncmp (line, "model name", 10) == 0) {
                char *colon = strchr (line, ':');
                if (colon) {
                    snprintf (cpu, sizeof cpu, "%s", colon + 2);
                    cpu [strcspn (cpu, "\n")] = 0;
                }
                break;
            }
        fclose (info);
    }
    char load [64] = "?";
    FILE *loadavg = fopen ("/proc/loadavg", "r");
    if (loadavg) {
        if (fgets (load, sizeof load, loadavg))
            load [strcspn (load, "\n")] = 0;
        fclose (loadavg);
    }
    printf ("machine: %ld CPUs online (%s); load average at start: %s\n", cores, cpu, load);
#ifdef OPENBLAS_VERSION
    printf ("OpenBLAS: %s; core %s; %d thread(s) by default, %s build\n",
            openblas_get_config (), openblas_get_corename (), openblas_get_num_threads (),
            openblas_get_parallel () == OPENBLAS_SEQUENTIAL ? "sequential" : "threaded");
#else
    printf ("BLAS: not OpenBLAS (no openblas_get_config in cblas.h)\n");
#endif
    const char *env = getenv ("OPENBLAS_NUM_THREADS");
    printf ("OPENBLAS_NUM_THREADS=%s (the CPU engine sets 1 thread per caller anyway)\n",
            env ? env : "(unset)");
}

static void
s_print_table1 (const s_plan_t *plan, bool quick)
{
    printf ("\nTable 1: throughput (median of %d repetitions of %.2f s busy time each%s)\n",
            plan->reps, plan->rep_s, quick ? ", quick run" : "");
    printf ("%-6s %-6s %-34s %5s %11s %17s %8s %8s %6s %9s %8s\n", "model", "what",
            "device", "batch", "samples/s", "min-max", "ms/step", "GFLOP/s", "CPUs",
            "vs 1 thr", "data ms");
    for (int i = 0; i < s_nrows; i++) {
        const s_row_t *row = &s_rows [i];
        const s_row_t *base = NULL;
        for (int j = 0; j < s_nrows; j++)
            if (strcmp (s_rows [j].model, row->model) == 0 && s_rows [j].train
            &&  !s_rows [j].gpu && s_rows [j].threads == 1)
                base = &s_rows [j];
        char median [24], lo [24], hi [24], range [48], ratio [16], cpus [16], data [16];
        s_thousands (median, sizeof median, row->median);
        s_thousands (lo, sizeof lo, row->lo);
        s_thousands (hi, sizeof hi, row->hi);
        snprintf (range, sizeof range, "%s-%s", lo, hi);
        if (base && row->train)
            snprintf (ratio, sizeof ratio, "%.2fx", row->median / base->median);
        else
            snprintf (ratio, sizeof ratio, "-");
        if (row->cpus >= 0)
            snprintf (cpus, sizeof cpus, "%.2f", row->cpus);
        else
            snprintf (cpus, sizeof cpus, "-");
        if (row->ms_data >= 0)
            snprintf (data, sizeof data, "%.3f", row->ms_data);
        else
            snprintf (data, sizeof data, "-");
        printf ("%-6s %-6s %-34s %5d %11s %17s %8.3f %8.1f %6s %9s %8s\n", row->model,
                row->what, row->device, row->batch, median, range,
                row->batch / row->median * 1e3, row->flop_factor * row->macs * row->median * 1e-9,
                cpus, ratio, data);
    }
    printf ("samples/s: examples / busy seconds, where a training step is set_params +\n"
            "           train_step + Adam (ps_opt_apply per variable); eval is ps_backend_forward\n"
            "           at batch %d over the test set, no dropout.\n"
            "GFLOP/s:   train 3 x 2 x forward MACs per example (forward + 2x backward, as if\n"
            "           every layer computed its input gradient; the first does not), eval\n"
            "           2 x forward MACs; times samples/s (median).\n"
            "CPUs:      process CPU seconds per wall second over the repetitions (data copy\n"
            "           included); about 1.0 per thread when nothing else competes.\n"
            "vs 1 thr:  median / the same model's CPU 1-thread training median.\n"
            "data ms:   copying a batch out of the data set (ps_dataset_batch), untimed.\n",
            S_EVAL_BATCH);
}

static void
s_print_profile_cell (const s_profile_t *prof, double fwd, double bwd, double total,
                      double fwd_gf, double bwd_gf)
{
    if (!prof->done) {
        printf (" |%8s %8s %6s %6s %6s", "-", "-", "-", "-", "-");
        return;
    }
    char fwd_s [16], bwd_s [16], fg [16], bg [16];
    if (fwd >= 0)
        snprintf (fwd_s, sizeof fwd_s, "%.3f", fwd);
    else
        snprintf (fwd_s, sizeof fwd_s, "-");
    if (bwd >= 0)
        snprintf (bwd_s, sizeof bwd_s, "%.3f", bwd);
    else
        snprintf (bwd_s, sizeof bwd_s, "-");
    if (fwd_gf > 0)
        snprintf (fg, sizeof fg, "%.1f", fwd_gf);
    else
        snprintf (fg, sizeof fg, "-");
    if (bwd_gf > 0)
        snprintf (bg, sizeof bg, "%.1f", bwd_gf);
    else
        snprintf (bg, sizeof bg, "-");
    double ms = (fwd > 0 ? fwd : 0) + (bwd > 0 ? bwd : 0);
    printf (" |%8s %8s %5.1f%% %6s %6s", fwd_s, bwd_s, 100 * ms / total, fg, bg);
}

//  Table 2 for one model: profiles [0] and [1] side by side.
static void
s_print_table2 (const ps_model_t *model, const s_profile_t *profs, const char *const *titles,
                int batch)
{
    int layers = ps_model_layer_count (model);
    int first_param = layers;
    for (int i = layers - 1; i >= 0; i--)
        if (ps_model_layer (model, i)->kernel >= 0 || ps_model_layer (model, i)->bias >= 0)
            first_param = i;
    printf ("\nTable 2: %s, ms per training step of batch %d (mean over %d and %d steps)\n",
            ps_model_name (model), batch, profs [0].steps, profs [1].steps);
    printf ("%-16s %-9s %-9s |%-38s |%-38s\n", "", "", "", titles [0], titles [1]);
    printf ("%-16s %-9s %-9s", "layer", "kind", "output");
    for (int k = 0; k < 2; k++)
        printf (" |%8s %8s %6s %6s %6s", "fwd ms", "bwd ms", "share", "fGF/s", "bGF/s");
    printf ("\n");
    double total [2];
    double accounted [2] = { 0, 0 };
    for (int k = 0; k < 2; k++)
        total [k] = profs [k].set_params + profs [k].train_step + profs [k].optimizer;
    for (int i = 0; i <= layers; i++) {
        char name [PS_NAME_MAX + 8], kind [24], out [32];
        double macs = 0, bwd_macs = 0;
        if (i < layers) {
            const ps_layer_t *l = ps_model_layer (model, i);
            snprintf (name, sizeof name, "%s", l->name);
            snprintf (kind, sizeof kind, "%s", s_kind_name (l->kind));
            if (l->out_h == 1 && l->out_w == 1)
                snprintf (out, sizeof out, "%d", l->out_c);
            else
                snprintf (out, sizeof out, "%dx%dx%d", l->out_h, l->out_w, l->out_c);
            macs = s_layer_macs (l);
            bwd_macs = i > first_param ? 2 * macs : macs;
        }
        else {
            snprintf (name, sizeof name, "loss");
            snprintf (kind, sizeof kind, "softmax");
            snprintf (out, sizeof out, "xent");
        }
        printf ("%-16s %-9s %-9s", name, kind, out);
        for (int k = 0; k < 2; k++) {
            const s_profile_t *p = &profs [k];
            double fwd = p->fwd [i], bwd = p->bwd [i];
            //  Layers below the first with parameters run no backward pass.
            if (i < layers && i < first_param)
                bwd = -1;
            accounted [k] += p->done ? (fwd > 0 ? fwd : 0) + (bwd > 0 ? bwd : 0) : 0;
            double fg = macs > 0 && fwd > 0 ? 2 * macs * p->shard / (fwd * 1e-3) * 1e-9 : 0;
            double bg = bwd_macs > 0 && bwd > 0 ? 2 * bwd_macs * p->shard / (bwd * 1e-3) * 1e-9 : 0;
            s_print_profile_cell (p, fwd, bwd, total [k], fg, bg);
        }
        printf ("\n");
    }
    const char *extra [] = { "engine other", "set_params", "adam update", "total" };
    for (int e = 0; e < 4; e++) {
        printf ("%-16s %-9s %-9s", extra [e], "", "");
        for (int k = 0; k < 2; k++) {
            const s_profile_t *p = &profs [k];
            double ms = e == 0 ? p->train_step - accounted [k]
                      : e == 1 ? p->set_params
                      : e == 2 ? p->optimizer : total [k];
            s_print_profile_cell (p, -1, ms, total [k], 0, 0);
        }
        printf ("\n");
    }
}

static void
s_print_table2_notes (void)
{
    printf ("fwd/bwd ms: per step, from ps_backend_profile (wall time per layer, as seen by\n"
            "           thread 0). With 2 threads thread 0 runs half of the batch, so its layer\n"
            "           times are half-batch times; the other thread works at the same time.\n"
            "           The loss is timed in the training step, reported as backward.\n"
            "engine other: train_step wall time minus the layers and the loss of thread 0:\n"
            "           dispatch, barriers, waiting for the other thread, summing the gradients.\n"
            "set_params, adam update: timed around ps_backend_set_params and the ps_opt_apply\n"
            "           calls (Adam, on the calling thread only); numbers go in the bwd column.\n"
            "share:     of total = set_params + train_step + adam (wall, ms per step).\n"
            "fGF/s, bGF/s: 2 x MACs of the layer's GEMMs (backward: weight gradient, plus the\n"
            "           input gradient except for the first layer with parameters) x the\n"
            "           examples thread 0 ran / its time; compare OpenBLAS's 1-thread sgemm\n"
            "           in table 3.\n");
}

//  ---------------------------------------------------------------------

static void
s_usage (void)
{
    fprintf (stderr,
        "usage: bench_cnn [--quick] [--model cnn|cnn2|mlp|all|PATH] [--device cpu|gpu|auto]\n"
        "                 [--batch N] [--data DIR] [--no-peer] [--python PATH]\n"
        "  --quick     fewer and shorter repetitions (a smoke run)\n"
        "  --model     the model to time (default cnn); all = every built-in model\n"
        "  --device    cpu (default): 1 and 2 threads; gpu or auto: also the GPU at\n"
        "              batches 64 and 512 when one is present\n"
        "  --batch N   training batch on the CPU (default 64)\n"
        "  --data DIR  Fashion-MNIST directory (default %s)\n"
        "  --no-peer   time no peers (OpenBLAS sgemm, PyTorch)\n"
        "  --python P  the Python that runs the PyTorch peer, %s\n"
        "              (default /usr/bin/python3, with Debian's python3-torch)\n",
        PS_DATASET_DEFAULT_DIR, BENCH_TORCH_SCRIPT);
}

int
main (int argc, char *argv [])
{
    //  The arithmetic mode ps-worker trains in.
    ps_floats_flush_subnormals ();
    bool quick = false;
    const char *model_arg = "cnn";
    const char *device_arg = "cpu";
    const char *data_dir = PS_DATASET_DEFAULT_DIR;
    const char *python = "/usr/bin/python3";
    bool peers = true;
    int batch = 64;
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv [i], "--quick") == 0)
            quick = true;
        else
        if (strcmp (argv [i], "--model") == 0 && i + 1 < argc)
            model_arg = argv [++i];
        else
        if (strcmp (argv [i], "--device") == 0 && i + 1 < argc)
            device_arg = argv [++i];
        else
        if (strcmp (argv [i], "--data") == 0 && i + 1 < argc)
            data_dir = argv [++i];
        else
        if (strcmp (argv [i], "--python") == 0 && i + 1 < argc)
            python = argv [++i];
        else
        if (strcmp (argv [i], "--no-peer") == 0)
            peers = false;
        else
        if (strcmp (argv [i], "--batch") == 0 && i + 1 < argc) {
            char *end;
            long value = strtol (argv [++i], &end, 10);
            if (*end || value < 1 || value > 65536) {
                s_usage ();
                return EXIT_FAILURE;
            }
            batch = (int) value;
        }
        else {
            s_usage ();
            return EXIT_FAILURE;
        }
    }
    ps_error_t err;
    ps_device_t device;
    if (ps_device_parse (device_arg, &device, &err)) {
        fprintf (stderr, "bench_cnn: %s\n", err.msg);
        s_usage ();
        return EXIT_FAILURE;
    }
    const char *names [S_MAX_MODELS];
    int nmodels = 0;
    if (strcmp (model_arg, "all") == 0)
        //  The built-in image classifiers: the click-through-rate models
        //  run on an engine of their own (worker/ps_ctrnet.h).
        for (const char *const *b = ps_model_builtins (); *b && nmodels < S_MAX_MODELS; b++) {
            ps_model_t *model = ps_model_load (*b, &err);
            if (!model)
                s_fail ("ps_model_load", err.msg);
            if (!ps_model_ctr (model))
                names [nmodels++] = *b;
            ps_model_destroy (&model);
        }
    else
        names [nmodels++] = model_arg;

    const s_plan_t plan = quick ? (s_plan_t) { 3, 0.2, 0.1, 0.3 }
                                : (s_plan_t) { 5, 1.0, 0.3, 1.0 };
    double start = s_now ();
    printf ("bench_cnn: training throughput of the compute backend%s\n",
            quick ? " (quick run)" : "");
    s_print_machine ();

    s_profile_t profiles [S_MAX_MODELS][3];
    ps_model_t *models [S_MAX_MODELS];
    memset (profiles, 0, sizeof profiles);
    bool gpu_seen = false;
    char gpu_name [128] = "";
    for (int m = 0; m < nmodels; m++) {
        ps_model_t *model = models [m] = ps_model_load (names [m], &err);
        if (!model)
            s_fail ("ps_model_load", err.msg);
        const char *name = ps_model_name (model);
        double macs = ps_model_forward_macs (model);
        int layers = ps_model_layer_count (model);
        if (layers > S_MAX_LAYERS)
            s_fail (name, "too many layers for this benchmark");
        printf ("\nmodel %s: %zu parameters, %.0f forward MACs per example, %d layers\n",
                name, ps_model_param_count (model), macs, layers);
        s_source_t src;
        s_source_open (&src, data_dir, model);
        if (m == 0 && src.train)
            printf ("data: %s, %zu training examples (limit %d), %zu test examples\n", data_dir,
                    ps_dataset_count (src.train), S_TRAIN_LIMIT,
                    src.test ? ps_dataset_count (src.test) : 0);
        int max_batch = batch > S_EVAL_BATCH ? batch : S_EVAL_BATCH;
        s_trainer_t trainer;
        s_trainer_init (&trainer, model, max_batch > 512 ? max_batch : 512);

        //  The GPU first, so that an unusable --device gpu fails at once.
        //  auto probes for a GPU to measure; the CPU rows come anyway.
        ps_gpu_info_t gpu_info;
        bool want_gpu = device == PS_DEVICE_GPU
                     || (device == PS_DEVICE_AUTO && ps_gpu_probe (&gpu_info, NULL) == 0
                         && gpu_info.count > 0);
        if (device == PS_DEVICE_AUTO && !want_gpu)
            printf ("note: --device auto found no GPU; CPU only\n");
        if (want_gpu) {
            ps_backend_t *gpu = ps_backend_new (model, PS_DEVICE_GPU, 512, 1, &err);
            if (!gpu)
                s_fail ("ps_backend_new (gpu)", err.msg);
            {
                gpu_seen = true;
                snprintf (gpu_name, sizeof gpu_name, "%s", ps_backend_describe (gpu));
                int gpu_batches [] = { 64, 512 };
                for (int g = 0; g < 2; g++) {
                    s_row_t *row = s_add_row (name, "train", gpu, gpu_batches [g], 0, macs, true);
                    s_measure_train (row, &trainer, gpu, &src, gpu_batches [g], &plan);
                    fflush (stdout);
                    fprintf (stderr, "bench_cnn: %s %s batch %d: %.0f samples/s\n", name,
                             row->device, row->batch, row->median);
                }
                s_row_t *row = s_add_row (name, "eval", gpu, S_EVAL_BATCH, 0, macs, false);
                s_measure_eval (row, &trainer, gpu, &src, &plan);
                s_measure_profile (&profiles [m][2], &trainer, gpu, &src, 64, 1, &plan);
            }
            ps_backend_destroy (&gpu);
        }
        for (int threads = 1; threads <= 2; threads++) {
            ps_backend_t *cpu = s_cpu_backend (model, max_batch, threads);
            s_row_t *row = s_add_row (name, "train", cpu, batch, threads, macs, true);
            s_measure_train (row, &trainer, cpu, &src, batch, &plan);
            fflush (stdout);
            fprintf (stderr, "bench_cnn: %s %s batch %d: %.0f samples/s\n", name, row->device,
                     batch, row->median);
            s_measure_profile (&profiles [m][threads - 1], &trainer, cpu, &src, batch, threads,
                               &plan);
            if (threads == 2) {
                row = s_add_row (name, "eval", cpu, S_EVAL_BATCH, threads, macs, false);
                s_measure_eval (row, &trainer, cpu, &src, &plan);
            }
            ps_backend_destroy (&cpu);
        }
        s_trainer_fini (&trainer);
        s_source_close (&src);
    }
    //  The peers run after every measurement of ours, alone on the machine.
    if (peers) {
        for (size_t i = 0; i < S_SGEMMS; i++)
            s_measure_sgemm (s_sgemm_shapes [i], &plan, s_sgemm [i]);
        snprintf (s_peer_note, sizeof s_peer_note, "no model of this run has a "
                  "PyTorch version in %s (cnn, mlp)", BENCH_TORCH_SCRIPT);
        for (int m = 0; m < nmodels; m++) {
            const char *name = ps_model_name (models [m]);
            if (strcmp (name, "cnn") != 0 && strcmp (name, "mlp") != 0)
                continue;
            fprintf (stderr, "bench_cnn: timing the PyTorch peer for %s\n", name);
            if (s_run_torch_peer (python, name, batch, data_dir, &plan))
                break;
        }
    }
    else
        snprintf (s_peer_note, sizeof s_peer_note, "not timed (--no-peer)");
    fprintf (stderr, "bench_cnn: finished in %.1f s\n", s_now () - start);

    s_print_table1 (&plan, quick);
    for (int m = 0; m < nmodels; m++) {
        char t1 [48], t2 [48];
        snprintf (t1, sizeof t1, " 1 thread, %d examples", batch);
        snprintf (t2, sizeof t2, " 2 threads, thread 0: %d examples", batch / 2);
        const char *titles [] = { t1, t2 };
        s_print_table2 (models [m], profiles [m], titles, batch);
        if (profiles [m][2].done) {
            s_profile_t pair [2] = { profiles [m][2], { 0 } };
            const char *gtitles [] = { " gpu, 64 examples", "" };
            s_print_table2 (models [m], pair, gtitles, 64);
        }
    }
    s_print_table2_notes ();
    if (gpu_seen)
        printf ("(gpu rows: %s; its per-layer times include a synchronise per layer)\n", gpu_name);
    s_print_table3 (&plan, peers);

    //  Summary: the target, and the ratios of table 3.
    printf ("\nSummary (information only; timings vary by +-30%% between runs, so compare\n"
            "ratios within one run):\n");
    char num [24];
    const s_row_t *cnn1 = NULL;
    for (int i = 0; i < s_nrows; i++)
        if (strcmp (s_rows [i].model, "cnn") == 0 && s_rows [i].train && !s_rows [i].gpu
        &&  s_rows [i].threads == 1)
            cnn1 = &s_rows [i];
    bool cnn_seen = false;
    for (int i = 0; i < s_nrows; i++) {
        const s_row_t *row = &s_rows [i];
        if (row->gpu)
            continue;
        if (strcmp (row->model, "cnn") == 0 && row->train && row->threads == 2) {
            cnn_seen = true;
            printf ("  target >= 12,000 samples/s with 2 threads: %s (%s, cnn batch %d)\n",
                    row->median >= S_TARGET_2T ? "met" : "NOT met",
                    s_thousands (num, sizeof num, row->median), row->batch);
            if (cnn1)
                printf ("  2-thread / 1-thread: %.2fx (1 thread %s samples/s)\n",
                        row->median / cnn1->median, s_thousands (num, sizeof num, cnn1->median));
            harness_benchrow ("bench_cnn", "cnn training, 2 threads", cnn1 ? "1 thread" : NULL,
                              cnn1 ? cnn1->median : 0, row->median, "samples/s",
                              HARNESS_HIGHER_BETTER, "ours >= 12000 samples/s",
                              harness_goal (row->median >= S_TARGET_2T));
        }
    }
    if (!cnn_seen)
        printf ("  target >= 12,000 samples/s with 2 threads: n/a (model cnn not run)\n");
    for (int i = 0; i < s_nrows; i++) {
        const s_row_t *row = &s_rows [i];
        const s_peer_t *peer = s_peer_for (row);
        if (peer) {
            printf ("  %s %s, %d thread%s: %.2fx PyTorch's samples/s in this run\n", row->model,
                    row->what, row->threads, row->threads == 1 ? "" : "s",
                    row->median / peer->median);
            char name [96];
            snprintf (name, sizeof name, "%.40s %.16s, %s%d thread%s, batch %d", row->model,
                      row->what, row->gpu ? "gpu, " : "", row->threads,
                      row->threads == 1 ? "" : "s", row->batch);
            harness_benchrow ("bench_cnn", name, "PyTorch", peer->median, row->median,
                              "samples/s", HARNESS_HIGHER_BETTER, NULL, HARNESS_GOAL_NONE);
        }
    }
    if (s_npeers == 0) {
        printf ("  vs PyTorch: no peer figure (%s)\n", s_peer_note);
        //  A row that says the peer is missing, rather than no row at all.
        char anchor [160];
        snprintf (anchor, sizeof anchor, "PyTorch: not run (%.120s)", s_peer_note);
        harness_benchrow ("bench_cnn", "cnn training vs PyTorch", anchor, NAN, NAN,
                          "samples/s", HARNESS_HIGHER_BETTER, NULL, HARNESS_GOAL_NONE);
    }
    for (int m = 0; m < nmodels; m++)
        ps_model_destroy (&models [m]);
    return EXIT_SUCCESS;
}
