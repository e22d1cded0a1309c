//  The GPU backend against the CPU backend. Both engines run the same
//  models on the same parameters, data and dropout seeds, and must agree to
//  float rounding: logits, loss and accuracy of the forward pass, the
//  gradient of a training step (as a whole and variable by variable), and
//  the parameters after several Adam steps taken on each side separately.
//  The specs exercise every layer kind and the geometry corners: valid and
//  same padding, strides on odd sizes, non-square kernels, overlapping
//  pooling windows, layers without bias, dropout, and short batches.
//
//  Without a GPU (or without CUDA in the build) the test prints a visible
//  SKIP and exits 77, which meson counts as skipped, never as passed.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness_case.h"
#include "harness_rand.h"
#include "ps_backend.h"
#include "ps_model.h"
#include "ps_optimizer.h"

//  Relative error allowed between the engines, ||a - b|| / max (||a||, ||b||):
//  float32 sums taken in different orders stay well inside it, while any
//  indexing mistake lands far outside. A single variable's gradient gets
//  ten times more room: one near-tie in a pooling window or a ReLU that
//  lands the other way on the two engines moves one term of its sums.
#define S_TOL           1e-4
#define S_TOL_VARIABLE  1e-3

#define S_THREADS       2       //  CPU threads: the batch split is part of the test

//  Small specs, one or two layer kinds in focus each. The first layer of a
//  model needs no input gradient, so a layer whose backward pass is under
//  test always has a trainable layer before it.
typedef struct {
    const char *name;
    const char *json;
    int max_batch;
} s_spec_t;

static const s_spec_t s_specs [] = {
    {"conv valid, stride 1",
     "{\"name\": \"conv_valid\", \"input_shape\": [8, 8, 2], \"layers\": ["
     "{\"type\": \"Conv2D\", \"filters\": 3, \"kernel_size\": 1},"
     "{\"type\": \"Conv2D\", \"filters\": 4, \"kernel_size\": 3, \"activation\": \"relu\"},"
     "{\"type\": \"Flatten\"},"
     "{\"type\": \"Dense\", \"units\": 5}]}", 16},
    {"conv same, stride 2, odd 9x7x3 input",
     "{\"name\": \"conv_same\", \"input_shape\": [9, 7, 3], \"layers\": ["
     "{\"type\": \"Conv2D\", \"filters\": 3, \"kernel_size\": 1},"
     "{\"type\": \"Conv2D\", \"filters\": 5, \"kernel_size\": 3, \"strides\": 2,"
     " \"padding\": \"same\", \"activation\": \"relu\"},"
     "{\"type\": \"Conv2D\", \"filters\": 4, \"kernel_size\": [2, 3], \"strides\": [1, 2],"
     " \"padding\": \"same\"},"
     "{\"type\": \"Flatten\"},"
     "{\"type\": \"Dense\", \"units\": 4}]}", 16},
    {"max pooling same, 3x3, stride 2",
     "{\"name\": \"pool_same\", \"input_shape\": [9, 7, 3], \"layers\": ["
     "{\"type\": \"Conv2D\", \"filters\": 4, \"kernel_size\": 3, \"padding\": \"same\"},"
     "{\"type\": \"MaxPool2D\", \"pool_size\": 3, \"strides\": 2, \"padding\": \"same\"},"
     "{\"type\": \"Conv2D\", \"filters\": 3, \"kernel_size\": 2, \"activation\": \"relu\"},"
     "{\"type\": \"MaxPool2D\", \"pool_size\": 2},"
     "{\"type\": \"Flatten\"},"
     "{\"type\": \"Dense\", \"units\": 6}]}", 16},
    {"dense",
     "{\"name\": \"dense\", \"input_shape\": [20], \"layers\": ["
     "{\"type\": \"Dense\", \"units\": 16, \"activation\": \"relu\"},"
     "{\"type\": \"Dense\", \"units\": 12, \"activation\": \"relu\"},"
     "{\"type\": \"Dense\", \"units\": 7}]}", 16},
    {"flatten first",
     "{\"name\": \"flatten_first\", \"input_shape\": [4, 4, 2], \"layers\": ["
     "{\"type\": \"Flatten\"},"
     "{\"type\": \"Dense\", \"units\": 9, \"activation\": \"relu\"},"
     "{\"type\": \"Dense\", \"units\": 3}]}", 16},
    {"ReLU layers",
     "{\"name\": \"relu\", \"input_shape\": [6, 6, 2], \"layers\": ["
     "{\"type\": \"Conv2D\", \"filters\": 3, \"kernel_size\": 3},"
     "{\"type\": \"ReLU\"},"
     "{\"type\": \"Conv2D\", \"filters\": 3, \"kernel_size\": 2},"
     "{\"type\": \"ReLU\"},"
     "{\"type\": \"Flatten\"},"
     "{\"type\": \"Dense\", \"units\": 8},"
     "{\"type\": \"ReLU\"},"
     "{\"type\": \"Dense\", \"units\": 5}]}", 16},
    {"dropout 0.3",
     "{\"name\": \"dropout\", \"input_shape\": [10, 10, 1], \"layers\": ["
     "{\"type\": \"Conv2D\", \"filters\": 4, \"kernel_size\": 3, \"activation\": \"relu\"},"
     "{\"type\": \"Dropout\", \"rate\": 0.3},"
     "{\"type\": \"Flatten\"},"
     "{\"type\": \"Dense\", \"units\": 16, \"activation\": \"relu\"},"
     "{\"type\": \"Dropout\", \"rate\": 0.3},"
     "{\"type\": \"Dense\", \"units\": 10}]}", 16},
    {"no bias",
     "{\"name\": \"no_bias\", \"input_shape\": [8, 8, 1], \"layers\": ["
     "{\"type\": \"Conv2D\", \"filters\": 4, \"kernel_size\": 3, \"activation\": \"relu\","
     " \"use_bias\": false},"
     "{\"type\": \"Conv2D\", \"filters\": 4, \"kernel_size\": 3, \"use_bias\": false},"
     "{\"type\": \"MaxPool2D\"},"
     "{\"type\": \"Flatten\"},"
     "{\"type\": \"Dense\", \"units\": 6, \"activation\": \"relu\", \"use_bias\": false},"
     "{\"type\": \"Dense\", \"units\": 10, \"use_bias\": false}]}", 16},
};

#define S_SPEC_COUNT ((int) (sizeof s_specs / sizeof s_specs [0]))


//  --------------------------------------------------------------------------
//  Helpers

static float
s_uniform (uint64_t *state, double low, double high)
{
    double u = harness_unit (state);
    return (float) (low + (high - low) * u);
}

//  The number of examples whose top two CPU logits are so close that the
//  engines may, within tolerance, disagree on the prediction.
static int
s_near_ties (const float *logits, int n, int classes)
{
    int ties = 0;
    for (int e = 0; e < n; e++) {
        const float *z = logits + (size_t) e * classes;
        int best = 0;
        for (int k = 1; k < classes; k++)
            if (z [k] > z [best])
                best = k;
        for (int k = 0; k < classes; k++)
            if (k != best && fabs ((double) z [best] - z [k]) <= 1e-4 * (1 + fabs (z [best]))) {
                ties++;
                break;
            }
    }
    return ties;
}

//  One model on both engines, with everything a comparison needs.
typedef struct {
    const char *name;
    ps_model_t *model;
    ps_backend_t *cpu;
    ps_backend_t *gpu;
    int max_batch;
    int classes;
    size_t input_size;
    size_t param_count;
    float *params;
    float *x;
    uint8_t *labels;
    float *logits_cpu, *logits_gpu;
    float *grads_cpu, *grads_gpu;
    uint64_t rng;
} s_pair_t;

static void
s_pair_init (s_pair_t *pair, const char *name, ps_model_t *model, int max_batch,
             uint64_t seed)
{
    ps_error_t err;
    memset (pair, 0, sizeof *pair);
    pair->name = name;
    pair->model = model;
    pair->max_batch = max_batch;
    pair->classes = ps_model_classes (model);
    pair->input_size = ps_model_input_size (model);
    pair->param_count = ps_model_param_count (model);
    pair->rng = seed;
    pair->cpu = ps_backend_new (model, PS_DEVICE_CPU, max_batch, S_THREADS, &err);
    if (!pair->cpu)
        fail_msg ("%s: CPU backend: %s", name, err.msg);
    pair->gpu = ps_backend_new (model, PS_DEVICE_GPU, max_batch, S_THREADS, &err);
    if (!pair->gpu)
        fail_msg ("%s: GPU backend: %s", name, err.msg);
    assert_int_equal (ps_backend_device (pair->gpu), PS_DEVICE_GPU);

    size_t logits = (size_t) max_batch * pair->classes;
    pair->params = malloc (pair->param_count * sizeof (float) + 1);
    pair->x = malloc ((size_t) max_batch * pair->input_size * sizeof (float));
    pair->labels = malloc ((size_t) max_batch);
    pair->logits_cpu = malloc (logits * sizeof (float));
    pair->logits_gpu = malloc (logits * sizeof (float));
    pair->grads_cpu = malloc (pair->param_count * sizeof (float) + 1);
    pair->grads_gpu = malloc (pair->param_count * sizeof (float) + 1);
    assert_non_null (pair->params);
    assert_non_null (pair->x);
    assert_non_null (pair->labels);
    assert_non_null (pair->logits_cpu);
    assert_non_null (pair->logits_gpu);
    assert_non_null (pair->grads_cpu);
    assert_non_null (pair->grads_gpu);

    //  Keras's initial weights, then a little noise on every parameter so
    //  that the biases (zero at first) take part in the forward pass too.
    ps_model_init_params (model, seed, pair->params);
    for (size_t i = 0; i < pair->param_count; i++)
        pair->params [i] += s_uniform (&pair->rng, -0.05, 0.05);
    assert_int_equal (ps_backend_set_params (pair->cpu, pair->params, &err), 0);
    if (ps_backend_set_params (pair->gpu, pair->params, &err))
        fail_msg ("%s: GPU set_params: %s", name, err.msg);
}

static void
s_pair_destroy (s_pair_t *pair)
{
    ps_backend_destroy (&pair->cpu);
    ps_backend_destroy (&pair->gpu);
    assert_null (pair->gpu);
    free (pair->params);
    free (pair->x);
    free (pair->labels);
    free (pair->logits_cpu);
    free (pair->logits_gpu);
    free (pair->grads_cpu);
    free (pair->grads_gpu);
}

//  A fresh random batch of n examples: inputs uniform in [low, high).
static void
s_pair_batch (s_pair_t *pair, int n, double low, double high)
{
    for (size_t i = 0; i < (size_t) n * pair->input_size; i++)
        pair->x [i] = s_uniform (&pair->rng, low, high);
    for (int e = 0; e < n; e++)
        pair->labels [e] = (uint8_t) (harness_splitmix (&pair->rng) % (uint64_t) pair->classes);
}

static void
s_check_stats (const s_pair_t *pair, const char *what, int n, const ps_batch_stats_t *cpu,
               const ps_batch_stats_t *gpu, const float *cpu_logits)
{
    assert_int_equal (cpu->count, n);
    assert_int_equal (gpu->count, n);
    double loss_error = fabs (cpu->loss_sum - gpu->loss_sum)
                      / fmax (fabs (cpu->loss_sum), 1e-30);
    printf ("    %s, %s, n %d: loss %.6f / %.6f (rel error %.1e), correct %d / %d\n",
            pair->name, what, n, cpu->loss_sum, gpu->loss_sum, loss_error,
            cpu->correct, gpu->correct);
    assert_true (isfinite (gpu->loss_sum));
    assert_true (loss_error < S_TOL);
    //  A prediction may flip where the top two logits nearly tie; a
    //  training step's logits are not at hand, so it gets one example of
    //  slack (its loss and gradient are held to the tolerance anyway).
    int slack = cpu_logits ? s_near_ties (cpu_logits, n, pair->classes) : 1;
    assert_true (abs (cpu->correct - gpu->correct) <= slack);
}

//  The forward pass on n examples of the current batch.
static void
s_check_forward (s_pair_t *pair, int n)
{
    ps_error_t err;
    ps_batch_stats_t cpu, gpu;
    size_t logits = (size_t) n * pair->classes;
    assert_int_equal (ps_backend_forward (pair->cpu, pair->x, pair->labels, n,
                                          pair->logits_cpu, &cpu, &err), 0);
    if (ps_backend_forward (pair->gpu, pair->x, pair->labels, n, pair->logits_gpu, &gpu, &err))
        fail_msg ("%s: GPU forward: %s", pair->name, err.msg);
    double error = harness_rel_error (pair->logits_cpu, pair->logits_gpu, logits);
    printf ("    %s, forward, n %d: logits rel error %.2e\n", pair->name, n, error);
    assert_true (error < S_TOL);
    s_check_stats (pair, "forward", n, &cpu, &gpu, pair->logits_cpu);

    //  Without logits, the stats alone.
    ps_batch_stats_t gpu_again;
    if (ps_backend_forward (pair->gpu, pair->x, pair->labels, n, NULL, &gpu_again, &err))
        fail_msg ("%s: GPU forward without logits: %s", pair->name, err.msg);
    assert_int_equal (gpu_again.correct, gpu.correct);
    assert_true (gpu_again.loss_sum == gpu.loss_sum);
}

//  A training step on n examples of the current batch: the whole gradient,
//  each variable's, and the stats.
static void
s_check_train (s_pair_t *pair, int n, uint64_t seed)
{
    ps_error_t err;
    ps_batch_stats_t cpu, gpu;
    memset (pair->grads_gpu, 0xff, pair->param_count * sizeof (float));
    assert_int_equal (ps_backend_train_step (pair->cpu, pair->x, pair->labels, n, seed,
                                             pair->grads_cpu, &cpu, &err), 0);
    if (ps_backend_train_step (pair->gpu, pair->x, pair->labels, n, seed, pair->grads_gpu,
                               &gpu, &err))
        fail_msg ("%s: GPU train step: %s", pair->name, err.msg);
    double error = harness_rel_error (pair->grads_cpu, pair->grads_gpu, pair->param_count);
    printf ("    %s, train, n %d: gradient rel error %.2e\n", pair->name, n, error);
    bool ok = error < S_TOL;
    for (int v = 0; v < ps_model_variable_count (pair->model); v++) {
        const ps_variable_t *var = ps_model_variable (pair->model, v);
        double var_error = harness_rel_error (pair->grads_cpu + var->offset,
                                              pair->grads_gpu + var->offset, var->count);
        if (var_error >= S_TOL_VARIABLE) {
            printf ("    %s: variable %s: gradient rel error %.2e\n", pair->name,
                    var->name, var_error);
            ok = false;
        }
    }
    assert_true (ok);
    //  Dropout is active in training but the stats of the step come from
    //  the same dropped forward pass on both sides, so they agree as well.
    s_check_stats (pair, "train", n, &cpu, &gpu, NULL);
}


//  --------------------------------------------------------------------------
//  Tests

//  Every small spec: forward and training at the largest batch and at a
//  short one, with two dropout seeds.
static void
test_specs (void **state)
{
    (void) state;
    for (int s = 0; s < S_SPEC_COUNT; s++) {
        ps_error_t err;
        ps_model_t *model = ps_model_parse (s_specs [s].json, s_specs [s].name, &err);
        if (!model)
            fail_msg ("%s: %s", s_specs [s].name, err.msg);
        s_pair_t pair;
        s_pair_init (&pair, s_specs [s].name, model, s_specs [s].max_batch,
                     UINT64_C (1000) + (uint64_t) s);
        int sizes [] = { s_specs [s].max_batch, 5, 1 };
        for (int i = 0; i < 3; i++) {
            s_pair_batch (&pair, sizes [i], -1.0, 1.0);
            s_check_forward (&pair, sizes [i]);
            s_check_train (&pair, sizes [i], UINT64_C (77) + (uint64_t) i);
            s_check_train (&pair, sizes [i], UINT64_C (0x5eed5eed5eed5eed));
        }
        s_pair_destroy (&pair);
        ps_model_destroy (&model);
    }
}

//  The dropout mask follows the seed: the same seed twice gives the same
//  gradient on the GPU, another seed a different one.
static void
test_dropout_seed (void **state)
{
    (void) state;
    ps_error_t err;
    const s_spec_t *spec = NULL;
    for (int s = 0; s < S_SPEC_COUNT; s++)
        if (strstr (s_specs [s].name, "dropout"))
            spec = &s_specs [s];
    assert_non_null (spec);
    ps_model_t *model = ps_model_parse (spec->json, spec->name, &err);
    assert_non_null (model);
    s_pair_t pair;
    s_pair_init (&pair, spec->name, model, spec->max_batch, 99);
    s_pair_batch (&pair, spec->max_batch, -1.0, 1.0);
    size_t bytes = pair.param_count * sizeof (float);
    float *first = malloc (bytes);
    assert_non_null (first);
    ps_batch_stats_t stats;
    assert_int_equal (ps_backend_train_step (pair.gpu, pair.x, pair.labels, spec->max_batch,
                                             42, first, &stats, &err), 0);
    assert_int_equal (ps_backend_train_step (pair.gpu, pair.x, pair.labels, spec->max_batch,
                                             42, pair.grads_gpu, &stats, &err), 0);
    assert_memory_equal (first, pair.grads_gpu, bytes);
    assert_int_equal (ps_backend_train_step (pair.gpu, pair.x, pair.labels, spec->max_batch,
                                             43, pair.grads_gpu, &stats, &err), 0);
    assert_true (harness_rel_error (first, pair.grads_gpu, pair.param_count) > 1e-3);
    free (first);
    s_pair_destroy (&pair);
    ps_model_destroy (&model);
}

//  The built-in cnn at a full batch of 64 and a short one of 37, on
//  image-like inputs in [0, 1).
static void
test_cnn (void **state)
{
    (void) state;
    ps_error_t err;
    ps_model_t *model = ps_model_load ("cnn", &err);
    if (!model)
        fail_msg ("cnn: %s", err.msg);
    s_pair_t pair;
    s_pair_init (&pair, "cnn", model, 64, 2024);
    int sizes [] = { 64, 37 };
    for (int i = 0; i < 2; i++) {
        s_pair_batch (&pair, sizes [i], 0.0, 1.0);
        s_check_forward (&pair, sizes [i]);
        s_check_train (&pair, sizes [i], 5 + (uint64_t) i);
    }
    s_pair_destroy (&pair);
    ps_model_destroy (&model);
}

//  Training proper: five Adam steps from the same initial weights, each
//  engine updating its own copy of the parameters from its own gradients,
//  compared after every step.
static void
test_adam_steps (void **state)
{
    (void) state;
    ps_error_t err;
    ps_model_t *model = ps_model_load ("cnn", &err);
    if (!model)
        fail_msg ("cnn: %s", err.msg);
    s_pair_t pair;
    s_pair_init (&pair, "cnn adam", model, 64, 7);
    ps_opt_config_t cfg;
    ps_opt_config_default (&cfg, PS_OPT_ADAM);
    assert_int_equal (ps_opt_slot_count (PS_OPT_ADAM), 2);

    size_t count = pair.param_count;
    size_t bytes = count * sizeof (float);
    float *params_cpu = malloc (bytes);
    float *params_gpu = malloc (bytes);
    float *slots_cpu [2] = { malloc (bytes), malloc (bytes) };
    float *slots_gpu [2] = { malloc (bytes), malloc (bytes) };
    assert_non_null (params_cpu);
    assert_non_null (params_gpu);
    for (int k = 0; k < 2; k++) {
        assert_non_null (slots_cpu [k]);
        assert_non_null (slots_gpu [k]);
    }
    //  The model's own initial weights, unperturbed: training starts here.
    ps_model_init_params (model, 7, params_cpu);
    memcpy (params_gpu, params_cpu, bytes);
    ps_opt_init_slots (&cfg, slots_cpu, count);
    ps_opt_init_slots (&cfg, slots_gpu, count);

    for (uint64_t t = 1; t <= 5; t++) {
        ps_batch_stats_t cpu, gpu;
        assert_int_equal (ps_backend_set_params (pair.cpu, params_cpu, &err), 0);
        if (ps_backend_set_params (pair.gpu, params_gpu, &err))
            fail_msg ("GPU set_params: %s", err.msg);
        s_pair_batch (&pair, 64, 0.0, 1.0);
        assert_int_equal (ps_backend_train_step (pair.cpu, pair.x, pair.labels, 64, t,
                                                 pair.grads_cpu, &cpu, &err), 0);
        if (ps_backend_train_step (pair.gpu, pair.x, pair.labels, 64, t, pair.grads_gpu,
                                   &gpu, &err))
            fail_msg ("GPU train step: %s", err.msg);
        for (int v = 0; v < ps_model_variable_count (model); v++) {
            const ps_variable_t *var = ps_model_variable (model, v);
            float *cpu_slots [2] = { slots_cpu [0] + var->offset, slots_cpu [1] + var->offset };
            float *gpu_slots [2] = { slots_gpu [0] + var->offset, slots_gpu [1] + var->offset };
            ps_opt_apply (&cfg, params_cpu + var->offset, pair.grads_cpu + var->offset,
                          cpu_slots, var->count, t);
            ps_opt_apply (&cfg, params_gpu + var->offset, pair.grads_gpu + var->offset,
                          gpu_slots, var->count, t);
        }
        double error = harness_rel_error (params_cpu, params_gpu, count);
        printf ("    cnn adam, step %d: loss %.6f / %.6f, parameters rel error %.2e\n",
                (int) t, cpu.loss_sum / 64, gpu.loss_sum / 64, error);
        assert_true (error < S_TOL);
    }
    free (params_cpu);
    free (params_gpu);
    for (int k = 0; k < 2; k++) {
        free (slots_cpu [k]);
        free (slots_gpu [k]);
    }
    s_pair_destroy (&pair);
    ps_model_destroy (&model);
}

//  `--device auto` takes the GPU when there is one (this test only runs
//  when there is), and says so.
static void
test_auto_picks_gpu (void **state)
{
    (void) state;
    ps_error_t err;
    ps_model_t *model = ps_model_load ("mlp", &err);
    assert_non_null (model);
    ps_backend_t *backend = ps_backend_new (model, PS_DEVICE_AUTO, 8, 1, &err);
    if (!backend)
        fail_msg ("auto backend: %s", err.msg);
    assert_int_equal (ps_backend_device (backend), PS_DEVICE_GPU);
    printf ("    auto: %s\n", ps_backend_describe (backend));
    assert_true (strncmp (ps_backend_describe (backend), "gpu (", 5) == 0);
    ps_backend_destroy (&backend);
    assert_null (backend);
    ps_model_destroy (&model);
}

//  A batch larger than the backend was built for is refused, and the
//  backend still works afterwards.
static void
test_batch_limits (void **state)
{
    (void) state;
    ps_error_t err;
    ps_model_t *model = ps_model_load ("mlp", &err);
    assert_non_null (model);
    s_pair_t pair;
    s_pair_init (&pair, "mlp", model, 8, 3);
    s_pair_batch (&pair, 8, 0.0, 1.0);
    ps_batch_stats_t stats;
    float *x = malloc (9 * pair.input_size * sizeof (float));
    uint8_t labels [9] = { 0 };
    assert_non_null (x);
    memset (x, 0, 9 * pair.input_size * sizeof (float));
    err.code = 0;
    assert_int_equal (ps_backend_forward (pair.gpu, x, labels, 9, NULL, &stats, &err),
                      PS_EINVAL);
    assert_int_equal (err.code, PS_EINVAL);
    free (x);
    s_check_forward (&pair, 8);
    s_check_train (&pair, 8, 1);
    s_pair_destroy (&pair);
    ps_model_destroy (&model);
}

//  Profiling adds time to every layer that ran and to the loss; a second
//  step adds more.
static void
test_profiling (void **state)
{
    (void) state;
    ps_error_t err;
    ps_model_t *model = ps_model_load ("cnn", &err);
    assert_non_null (model);
    s_pair_t pair;
    s_pair_init (&pair, "cnn profile", model, 32, 11);
    int layers = ps_model_layer_count (model);
    double *fwd = calloc ((size_t) layers + 1, sizeof (double));
    double *bwd = calloc ((size_t) layers + 1, sizeof (double));
    assert_non_null (fwd);
    assert_non_null (bwd);
    ps_backend_set_profiling (pair.gpu, true);
    s_pair_batch (&pair, 32, 0.0, 1.0);
    ps_batch_stats_t stats;
    assert_int_equal (ps_backend_train_step (pair.gpu, pair.x, pair.labels, 32, 1,
                                             pair.grads_gpu, &stats, &err), 0);
    ps_backend_profile (pair.gpu, fwd, bwd);
    double total = 0;
    for (int i = 0; i <= layers; i++) {
        printf ("    layer %d: forward %.3f ms, backward %.3f ms\n", i, fwd [i], bwd [i]);
        assert_true (fwd [i] >= 0 && bwd [i] >= 0);
        total += fwd [i] + bwd [i];
    }
    assert_true (total > 0);
    //  The first convolution runs forward and, for its kernel gradient,
    //  backward; the loss runs in both directions of a training step.
    assert_true (fwd [0] > 0);
    assert_true (bwd [0] > 0);
    assert_true (bwd [layers] > 0);
    ps_backend_set_profiling (pair.gpu, false);
    double before = fwd [0];
    assert_int_equal (ps_backend_train_step (pair.gpu, pair.x, pair.labels, 32, 1,
                                             pair.grads_gpu, &stats, &err), 0);
    ps_backend_profile (pair.gpu, fwd, bwd);
    assert_true (fwd [0] == before);
    free (fwd);
    free (bwd);
    s_pair_destroy (&pair);
    ps_model_destroy (&model);
}


//  Whether this build and machine can run the GPU engine at all: build one
//  for the smallest built-in model. Without CUDA in the build the engine
//  refuses with PS_EINVAL; without a device, with PS_ENOTFOUND.
static int
s_gpu_available (void)
{
    ps_error_t err;
    ps_model_t *model = ps_model_load ("mlp", &err);
    if (!model) {
        printf ("FAIL: loading the mlp model: %s\n", err.msg);
        return -1;
    }
    err.code = 0;
    err.msg [0] = 0;
    ps_backend_t *backend = ps_backend_new (model, PS_DEVICE_GPU, 4, 1, &err);
    ps_model_destroy (&model);
    if (backend) {
        printf ("GPU backend: %s\n", ps_backend_describe (backend));
        ps_backend_destroy (&backend);
        return 1;
    }
    if (err.code == PS_EINVAL) {
        printf ("SKIP: this build has no CUDA (%s)\n", err.msg);
        return 0;
    }
    if (err.code == PS_ENOTFOUND) {
        printf ("SKIP: no CUDA device (%s)\n", err.msg);
        return 0;
    }
    printf ("FAIL: the GPU backend could not be built: %s\n", err.msg);
    return -1;
}

int
main (void)
{
    int available = s_gpu_available ();
    if (available == 0)
        return 77;
    if (available < 0)
        return 1;
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_auto_picks_gpu),
        cmocka_unit_test (test_batch_limits),
        cmocka_unit_test (test_specs),
        cmocka_unit_test (test_dropout_seed),
        cmocka_unit_test (test_cnn),
        cmocka_unit_test (test_adam_steps),
        cmocka_unit_test (test_profiling),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
