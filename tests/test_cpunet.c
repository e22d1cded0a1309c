//  Tests of the whole CPU engine (worker/ps_cpunet.c) through the backend
//  interface (ps_backend.h) with PS_DEVICE_CPU: the same step gives the same
//  gradients and statistics on 1, 2 or 3 threads (also when the batch has
//  fewer examples than threads, and for a short last batch); the gradient
//  of the whole network agrees with finite differences of its own forward
//  pass; dropout follows its seed; the forward pass's logits, loss and
//  count agree with a float64 recomputation; bad arguments are refused;
//  and 300 Adam steps on real Fashion-MNIST images teach the mlp. That
//  last case runs as a meson test of its own, test_cpunet_real (`test_cpunet
//  real`), which is counted as skipped without the data set (harness_group).
//
//  The layers' arithmetic is checked one kernel at a time in
//  test_layers.c; here the subject is the engine around the kernels:
//  slicing the batch, the per-thread buffers, the reduction, the order of
//  the backward pass and the loss scaling.
//
//  The tests whose subject is not the thread count run on one thread; the
//  thread tests compare 2 and 3 threads with one, and run last. Every test
//  runs under a watchdog: the engine's threads meet at barriers, and a lost
//  wake-up would otherwise hang the test until meson kills it, with no word
//  of where.
//
//  This file is longer than the project's 800 lines on purpose: its cases
//  check one module, the CPU engine, through the backend interface under
//  the same watchdog.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "harness_case.h"
#include "harness_rand.h"
#include "ps_backend.h"
#include "ps_dataset.h"
#include "ps_model.h"
#include "ps_optimizer.h"
#include "ps_standalone.h"

//  Thread counts must not change results beyond float summation order.
#define S_THREAD_TOL   1e-5
//  Directional finite differences against the backward pass; see
//  test_gradient_check for why float32 allows no tighter bound.
#define S_FD_TOL       1e-2
//  The first and the shortest step along a unit direction, and how far two
//  central differences (at h and h / 2) may differ for the loss to count as
//  smooth over the step; see test_gradient_check.
#define S_FD_STEP      1e-2
#define S_FD_STEP_MIN  2e-4
#define S_FD_SMOOTH    2e-3
//  Examples and seeds of the gradient check (fixed, like all the data here).
#ifndef S_FD_N
#define S_FD_N         16
#endif
#ifndef S_FD_SEED
#define S_FD_SEED      21
#endif
//  Logits to loss: the engine's float32 softmax against float64.
#define S_LOSS_TOL     1e-5
//  Seconds a test may take before the watchdog calls it hung: each takes
//  well under a second in a release build and a few under the sanitizers,
//  and a hang is then reported by name well before meson's 300 s limit.
#define S_WATCHDOG_S   40

//  ---------------------------------------------------------------------
//  Watchdog

static const char *s_watch_what = "";

static void
s_on_alarm (int sig)
{
    (void) sig;
    static const char prefix [] = "\nFAIL: watchdog: no progress in time during ";
    static const char suffix [] = " (a hang: the engine's threads deadlocked?)\n";
    ssize_t rc = write (STDERR_FILENO, prefix, sizeof prefix - 1);
    rc = write (STDERR_FILENO, s_watch_what, strlen (s_watch_what));
    rc = write (STDERR_FILENO, suffix, sizeof suffix - 1);
    (void) rc;
    _exit (1);
}

static void
s_watchdog (const char *what)
{
    s_watch_what = what;
    signal (SIGALRM, s_on_alarm);
    alarm (S_WATCHDOG_S);
}

static int
s_teardown (void **state)
{
    (void) state;
    alarm (0);
    return 0;
}

//  ---------------------------------------------------------------------
//  Random numbers and buffers

static void *
s_alloc (size_t bytes)
{
    void *p = calloc (1, bytes ? bytes : 1);
    assert_non_null (p);
    return p;
}

static float *
s_floats (size_t count)
{
    return s_alloc (count * sizeof (float));
}

//  ---------------------------------------------------------------------
//  Models and data

//  A small model with every layer kind: 9x7x2 -> same conv stride 2 (5x4x4)
//  -> same pool (3x2x4) -> valid 2x2 conv (2x1x3) -> ReLU -> Flatten (6)
//  -> Dropout -> Dense 6 relu -> Dense 5.
static const char *s_every_kind =
    "{\"name\": \"every_kind\", \"input_shape\": [9, 7, 2], \"layers\": ["
    " {\"type\": \"Conv2D\", \"filters\": 4, \"kernel_size\": 3, \"strides\": 2,"
    "  \"padding\": \"same\", \"activation\": \"relu\"},"
    " {\"type\": \"MaxPool2D\", \"pool_size\": 2, \"padding\": \"same\"},"
    " {\"type\": \"Conv2D\", \"filters\": 3, \"kernel_size\": 2},"
    " {\"type\": \"ReLU\"},"
    " {\"type\": \"Flatten\"},"
    " {\"type\": \"Dropout\", \"rate\": 0.25},"
    " {\"type\": \"Dense\", \"units\": 6, \"activation\": \"relu\"},"
    " {\"type\": \"Dense\", \"units\": 5}]}";

//  The same without Dropout, for the gradient check: the forward pass has
//  no dropout, so the loss it measures must be the one trained.
static const char *s_no_dropout =
    "{\"name\": \"no_dropout\", \"input_shape\": [9, 7, 2], \"layers\": ["
    " {\"type\": \"Conv2D\", \"filters\": 4, \"kernel_size\": 3, \"strides\": 2,"
    "  \"padding\": \"same\", \"activation\": \"relu\"},"
    " {\"type\": \"MaxPool2D\", \"pool_size\": 2, \"padding\": \"same\"},"
    " {\"type\": \"Conv2D\", \"filters\": 3, \"kernel_size\": 2},"
    " {\"type\": \"ReLU\"},"
    " {\"type\": \"Flatten\"},"
    " {\"type\": \"Dense\", \"units\": 6, \"activation\": \"relu\"},"
    " {\"type\": \"Dense\", \"units\": 5}]}";

static ps_model_t *
s_model (const char *spec_or_name)
{
    ps_error_t err = { 0 };
    ps_model_t *model = spec_or_name [0] == '{'
                      ? ps_model_parse (spec_or_name, "test", &err)
                      : ps_model_load (spec_or_name, &err);
    if (!model)
        fail_msg ("model refused: %s", err.msg);
    return model;
}

static ps_backend_t *
s_backend (const ps_model_t *model, int max_batch, int threads)
{
    ps_error_t err = { 0 };
    ps_backend_t *backend = ps_backend_new (model, PS_DEVICE_CPU, max_batch, threads, &err);
    if (!backend)
        fail_msg ("ps_backend_new (threads %d): %s", threads, err.msg);
    assert_int_equal (ps_backend_device (backend), PS_DEVICE_CPU);
    return backend;
}

static void
s_set_params (ps_backend_t *backend, const float *params)
{
    ps_error_t err = { 0 };
    if (ps_backend_set_params (backend, params, &err))
        fail_msg ("ps_backend_set_params: %s", err.msg);
}

static void
s_train_step (ps_backend_t *backend, const float *x, const uint8_t *labels, int n,
              uint64_t seed, float *grads, ps_batch_stats_t *stats)
{
    ps_error_t err = { 0 };
    if (ps_backend_train_step (backend, x, labels, n, seed, grads, stats, &err))
        fail_msg ("ps_backend_train_step (n %d): %s", n, err.msg);
    assert_int_equal (stats->count, n);
}

static void
s_forward (ps_backend_t *backend, const float *x, const uint8_t *labels, int n,
           float *logits, ps_batch_stats_t *stats)
{
    ps_error_t err = { 0 };
    if (ps_backend_forward (backend, x, labels, n, logits, stats, &err))
        fail_msg ("ps_backend_forward (n %d): %s", n, err.msg);
    assert_int_equal (stats->count, n);
}

//  The model's initial parameters, with biases drawn in [-0.1, 0.1)
//  instead of zero, so that the bias gradients and the ReLU masks are those
//  of a network in training rather than at its symmetric start.
static float *
s_params (const ps_model_t *model, uint64_t seed)
{
    float *params = s_floats (ps_model_param_count (model));
    ps_model_init_params (model, seed, params);
    uint64_t state = seed;
    for (int i = 0; i < ps_model_variable_count (model); i++) {
        const ps_variable_t *v = ps_model_variable (model, i);
        if (v->shape.rank == 1)
            for (size_t j = 0; j < v->count; j++)
                params [v->offset + j] = (float) (0.2 * harness_unit (&state) - 0.1);
    }
    return params;
}

//  Parameters for the gradient check, chosen to keep the loss smooth near
//  them: the hidden units' biases alternate between +1.5 and -1.5, so that
//  every ReLU is either well on or well off (both kinds present), and the
//  hidden kernels after the first are halved, so that the sums they feed
//  stay within that margin. The logits' bias keeps its small random values.
static float *
s_params_with_margins (const ps_model_t *model, uint64_t seed)
{
    float *params = s_params (model, seed);
    int last = ps_model_variable_count (model) - 1;
    for (int i = 0; i < last; i++) {
        const ps_variable_t *v = ps_model_variable (model, i);
        for (size_t j = 0; j < v->count; j++) {
            if (v->shape.rank == 1)
                params [v->offset + j] = j % 2 ? -1.5f : 1.5f;
            else
            if (i > 0 && i < last - 1)
                params [v->offset + j] *= 0.5f;
        }
    }
    return params;
}

//  n inputs in [0, 1) (pixel-like) and labels below classes.
static void
s_data (const ps_model_t *model, int n, uint64_t seed, float **x, uint8_t **labels)
{
    size_t in = ps_model_input_size (model);
    *x = s_floats ((size_t) n * in);
    *labels = s_alloc ((size_t) n);
    uint64_t state = seed;
    for (size_t i = 0; i < (size_t) n * in; i++)
        (*x) [i] = (float) harness_unit (&state);
    for (int i = 0; i < n; i++)
        (*labels) [i] = (uint8_t) (harness_splitmix (&state) % (uint64_t) ps_model_classes (model));
}

//  ---------------------------------------------------------------------
//  Thread invariance

#define S_SIZES 4

//  Run the same steps on 1, 2 and 3 threads and compare with the first:
//  a full batch, a short last batch on the same backend (buffers sized
//  for the full one), then n = 1 and n = 2, fewer examples than 3 threads.
static void
s_check_threads (const char *spec, int max_batch)
{
    ps_model_t *model = s_model (spec);
    size_t count = ps_model_param_count (model);
    int classes = ps_model_classes (model);
    float *params = s_params (model, 7);
    float *x;
    uint8_t *labels;
    s_data (model, max_batch, 8, &x, &labels);
    const int sizes [S_SIZES] = { max_batch, max_batch * 5 / 8, 1, 2 };
    float *ref_grads [S_SIZES], *ref_logits [S_SIZES];
    ps_batch_stats_t ref_train [S_SIZES], ref_fwd [S_SIZES];
    float *grads = s_floats (count);
    float *logits = s_floats ((size_t) max_batch * classes);
    for (int k = 0; k < S_SIZES; k++) {
        ref_grads [k] = s_floats (count);
        ref_logits [k] = s_floats ((size_t) max_batch * classes);
    }

    for (int threads = 1; threads <= 3; threads++) {
        ps_backend_t *backend = s_backend (model, max_batch, threads);
        s_set_params (backend, params);
        double worst_grad = 0, worst_loss = 0, worst_logits = 0;
        for (int k = 0; k < S_SIZES; k++) {
            int n = sizes [k];
            ps_batch_stats_t train, fwd;
            //  NaN first: a gradient element the engine forgets to write
            //  shows up in every comparison.
            for (size_t i = 0; i < count; i++)
                grads [i] = NAN;
            s_train_step (backend, x, labels, n, 1000 + k, grads, &train);
            s_forward (backend, x, labels, n, logits, &fwd);
            if (threads == 1) {
                memcpy (ref_grads [k], grads, count * sizeof (float));
                memcpy (ref_logits [k], logits, (size_t) n * classes * sizeof (float));
                ref_train [k] = train;
                ref_fwd [k] = fwd;
                for (size_t i = 0; i < count; i++)
                    if (!isfinite (grads [i]))
                        fail_msg ("%s n=%d: gradient element %zu is %g", ps_model_name (model),
                                  n, i, grads [i]);
                continue;
            }
            //  Variable by variable, so that a small variable (a bias) with
            //  a wrong gradient cannot hide in the norm of a large one.
            for (int v = 0; v < ps_model_variable_count (model); v++) {
                const ps_variable_t *var = ps_model_variable (model, v);
                double e = harness_rel_error (grads + var->offset, ref_grads [k] + var->offset,
                                              var->count);
                if (!(e < S_THREAD_TOL))
                    fail_msg ("%s n=%d threads %d: %s gradient differs from 1 thread's "
                              "by %.3g (relative)", ps_model_name (model), n, threads,
                              var->name, e);
                worst_grad = fmax (worst_grad, e);
            }
            const ps_batch_stats_t *pairs [2][2] = { { &train, &ref_train [k] },
                                                     { &fwd, &ref_fwd [k] } };
            for (int p = 0; p < 2; p++) {
                double a = pairs [p][0]->loss_sum, b = pairs [p][1]->loss_sum;
                double e = fabs (a - b) / fabs (b);
                if (!(e < S_THREAD_TOL))
                    fail_msg ("%s n=%d threads %d: %s loss sum %.9g, 1 thread %.9g",
                              ps_model_name (model), n, threads, p ? "forward" : "train",
                              a, b);
                worst_loss = fmax (worst_loss, e);
                assert_int_equal (pairs [p][0]->correct, pairs [p][1]->correct);
            }
            double e = harness_rel_error (logits, ref_logits [k], (size_t) n * classes);
            if (!(e < S_THREAD_TOL))
                fail_msg ("%s n=%d threads %d: logits differ by %.3g", ps_model_name (model),
                          n, threads, e);
            worst_logits = fmax (worst_logits, e);
        }
        if (threads > 1)
            printf ("  %-10s threads %d vs 1, n = %d, %d, 1, 2: gradients %.1e, "
                    "loss %.1e, logits %.1e\n", ps_model_name (model), threads, sizes [0],
                    sizes [1], worst_grad, worst_loss, worst_logits);
        ps_backend_destroy (&backend);
        assert_null (backend);
    }
    for (int k = 0; k < S_SIZES; k++) {
        free (ref_grads [k]);
        free (ref_logits [k]);
    }
    free (grads);
    free (logits);
    free (params);
    free (x);
    free (labels);
    ps_model_destroy (&model);
}

static void
test_threads_every_kind (void **state)
{
    (void) state;
    s_watchdog ("test_threads_every_kind");
    printf ("\n");
    s_check_threads (s_every_kind, 8);
}

static void
test_threads_cnn (void **state)
{
    (void) state;
    s_watchdog ("test_threads_cnn");
    printf ("\n");
    s_check_threads ("cnn", 16);
}

//  A backend used the moment it is built: its worker threads may not have
//  started running yet when the first step is dispatched, and must still
//  take part in it. Many rounds, with more threads than this test needs
//  cores, make the unlucky schedule likely.
static void
test_threads_first_step (void **state)
{
    (void) state;
    s_watchdog ("test_threads_first_step (new backend, immediate train_step)");
    ps_model_t *model = s_model ("mlp");
    float *params = s_params (model, 3);
    float *grads = s_floats (ps_model_param_count (model));
    float *x;
    uint8_t *labels;
    s_data (model, 3, 4, &x, &labels);
    double first = 0;
    for (int round = 0; round < 200; round++) {
        ps_backend_t *backend = s_backend (model, 3, 3);
        s_set_params (backend, params);
        ps_batch_stats_t stats;
        s_train_step (backend, x, labels, 3, 1, grads, &stats);
        if (round == 0)
            first = stats.loss_sum;
        assert_true (fabs (stats.loss_sum - first) <= 1e-6 * fabs (first));
        ps_backend_destroy (&backend);
    }
    free (params);
    free (grads);
    free (x);
    free (labels);
    ps_model_destroy (&model);
}

//  ---------------------------------------------------------------------
//  The gradient of the whole network

//  The mean loss at params, measured by the forward pass, in double.
static double
s_mean_loss (ps_backend_t *backend, const float *params, const float *x,
             const uint8_t *labels, int n)
{
    ps_batch_stats_t stats;
    s_set_params (backend, params);
    s_forward (backend, x, labels, n, NULL, &stats);
    return stats.loss_sum / n;
}

//  The central difference of the mean loss over the step params +- h d,
//  and grads . d for the same step, both as derivatives along d. The
//  perturbed parameters are rounded to float; both sides use the steps
//  actually taken, so that the rounding cancels.
static void
s_central (ps_backend_t *backend, const float *params, const float *grads, const double *d,
           size_t count, double h, const float *x, const uint8_t *labels, int n,
           float *plus, float *minus, double *numeric, double *analytic)
{
    double dot = 0;
    for (size_t i = 0; i < count; i++) {
        plus [i] = (float) (params [i] + h * d [i]);
        minus [i] = (float) (params [i] - h * d [i]);
        dot += (double) grads [i] * ((double) plus [i] - minus [i]);
    }
    *analytic = dot / (2 * h);
    *numeric = (s_mean_loss (backend, plus, x, labels, n)
              - s_mean_loss (backend, minus, x, labels, n)) / (2 * h);
}

static double
s_rel (double a, double b)
{
    double scale = fmax (fabs (a), fabs (b));
    return scale > 0 ? fabs (a - b) / scale : 0;
}

//  The whole network's gradient against directional finite differences of
//  its own forward pass: for a unit direction d, the central difference
//  (L (p + h d) - L (p - h d)) / 2h of the mean loss L against grads . d.
//  Each check costs two forward passes however many parameters it covers,
//  so every variable gets a direction of its own (a wrong bias gradient
//  cannot hide behind a right kernel), and three directions span the whole
//  vector.
//
//  A direction is half random, half the computed gradient (each part of
//  unit length, over the direction's variables). The gradient part keeps
//  grads . d well away from zero, where a relative error would measure
//  only noise; the random part reaches components the gradient itself
//  would miss (a gradient element wrongly left at zero).
//
//  Why 1e-2 and the adaptive step: the forward pass is float32, so the
//  loss carries rounding of about 1e-8 (measured: a mean over many
//  elements of about 1e-7 each). Divided by 2h that is 1e-6 of a
//  derivative at h = 1e-2 and 5e-5 at h = 2e-4, against derivatives of
//  1e-2 and more here: float32 alone allows about 1e-3 at the shortest
//  step. The loss is not smooth, though: ReLU and max pooling put kinks
//  in it, and in a network this small (a few dozen units) one unit
//  crossing its kink within the step moves the central difference by
//  several percent; with the initial weights, at h = 1e-2, that happened
//  for most seeds tried, and at any h for some. Two measures keep the
//  check about the gradient rather than the kinks: parameters that keep
//  every ReLU clear of its kink (s_params_with_margins), and a step that
//  starts at 1e-2 and halves until the central differences at h and at
//  h / 2 agree within 2e-3, as they do where no kink lies within the step;
//  the one at h / 2 is compared. Over 20 seeds the worst error was then
//  1.3e-3. A real mistake (a wrong sign, a missing term, a wrong 1 / n or
//  padding offset) shows at every step and is far beyond 1e-2.
static void
test_gradient_check (void **state)
{
    (void) state;
    s_watchdog ("test_gradient_check");
    printf ("\n");
    ps_model_t *model = s_model (s_no_dropout);
    size_t count = ps_model_param_count (model);
    const int n = S_FD_N;
    float *params = s_params_with_margins (model, S_FD_SEED);
    float *x;
    uint8_t *labels;
    s_data (model, n, S_FD_SEED + 1, &x, &labels);
    ps_backend_t *backend = s_backend (model, n, 1);
    s_set_params (backend, params);
    float *grads = s_floats (count);
    ps_batch_stats_t stats;
    s_train_step (backend, x, labels, n, 0, grads, &stats);
    //  Without dropout a training step measures the loss the forward pass
    //  does.
    ps_batch_stats_t fwd;
    s_forward (backend, x, labels, n, NULL, &fwd);
    assert_true (fabs (stats.loss_sum - fwd.loss_sum) <= 1e-6 * fabs (fwd.loss_sum));
    assert_int_equal (stats.correct, fwd.correct);

    double *d = s_alloc (count * sizeof (double));
    float *plus = s_floats (count), *minus = s_floats (count);
    uint64_t rng = S_FD_SEED + 2;
    int variables = ps_model_variable_count (model);
    double worst = 0;
    for (int dir = 0; dir < variables + 3; dir++) {
        size_t begin = 0, end = count;
        const char *what = "all parameters";
        if (dir < variables) {
            const ps_variable_t *v = ps_model_variable (model, dir);
            begin = v->offset;
            end = v->offset + v->count;
            what = v->name;
        }
        double r_norm = 0, g_norm = 0;
        for (size_t i = 0; i < count; i++) {
            d [i] = i >= begin && i < end ? 2 * harness_unit (&rng) - 1 : 0;
            r_norm += d [i] * d [i];
            if (i >= begin && i < end)
                g_norm += (double) grads [i] * grads [i];
        }
        r_norm = sqrt (r_norm);
        g_norm = sqrt (g_norm);
        double norm = 0;
        for (size_t i = begin; i < end; i++) {
            d [i] = d [i] / r_norm + (g_norm > 0 ? grads [i] / g_norm : 0);
            norm += d [i] * d [i];
        }
        for (size_t i = begin; i < end; i++)
            d [i] /= sqrt (norm);

        double h = S_FD_STEP, numeric = 0, analytic = 0, coarse, unused;
        s_central (backend, params, grads, d, count, h, x, labels, n, plus, minus,
                   &coarse, &unused);
        bool smooth = false;
        while (!smooth && h / 2 >= S_FD_STEP_MIN) {
            s_central (backend, params, grads, d, count, h / 2, x, labels, n, plus, minus,
                       &numeric, &analytic);
            smooth = s_rel (coarse, numeric) < S_FD_SMOOTH;
            coarse = numeric;
            h /= 2;
        }
        if (!smooth)
            fail_msg ("%s: no step from %g down to %g over which the loss is smooth "
                      "(last central differences %.6e, grads.d %.6e)", what, S_FD_STEP,
                      S_FD_STEP_MIN, numeric, analytic);
        double err = s_rel (numeric, analytic);
        printf ("  %-16s step %.1e: grads.d %+.6e, finite difference %+.6e, "
                "relative error %.1e\n", what, h, analytic, numeric, err);
        if (!(err < S_FD_TOL))
            fail_msg ("%s: backward %.6e, finite differences %.6e, relative error %.3g",
                      what, analytic, numeric, err);
        worst = fmax (worst, err);
    }
    printf ("  worst relative error %.1e (limit %.0e)\n", worst, S_FD_TOL);
    ps_backend_destroy (&backend);
    free (d);
    free (plus);
    free (minus);
    free (grads);
    free (params);
    free (x);
    free (labels);
    ps_model_destroy (&model);
}

//  ---------------------------------------------------------------------
//  Dropout

static void
test_dropout_seed (void **state)
{
    (void) state;
    s_watchdog ("test_dropout_seed");
    ps_model_t *model = s_model (s_every_kind);
    size_t count = ps_model_param_count (model);
    const int n = 8;
    float *params = s_params (model, 31);
    float *x;
    uint8_t *labels;
    s_data (model, n, 32, &x, &labels);
    ps_backend_t *backend = s_backend (model, n, 1);
    s_set_params (backend, params);
    float *a = s_floats (count), *b = s_floats (count), *c = s_floats (count);
    ps_batch_stats_t sa, sb, sc, fwd;
    s_train_step (backend, x, labels, n, 5, a, &sa);
    s_train_step (backend, x, labels, n, 5, b, &sb);
    s_train_step (backend, x, labels, n, 6, c, &sc);
    s_forward (backend, x, labels, n, NULL, &fwd);
    //  The same seed replays the same masks: bitwise the same step.
    assert_memory_equal (a, b, count * sizeof (float));
    assert_true (sa.loss_sum == sb.loss_sum);
    //  Another seed drops other units: the gradient and the loss change,
    //  also for the layers before the Dropout.
    double e = harness_rel_error (a, c, count);
    const ps_variable_t *first = ps_model_variable (model, 0);
    double e_first = harness_rel_error (a + first->offset, c + first->offset, first->count);
    printf ("  seed 5 vs 6: gradients differ by %.2g (conv2d/kernel %.2g), losses %.6f %.6f;"
            " forward without dropout %.6f\n", e, e_first, sa.loss_sum / n,
            sc.loss_sum / n, fwd.loss_sum / n);
    assert_true (e > 1e-3);
    assert_true (e_first > 1e-3);
    assert_true (sa.loss_sum != sc.loss_sum);
    //  Dropout is on in training and off in the forward pass.
    assert_true (sa.loss_sum != fwd.loss_sum);
    ps_backend_destroy (&backend);
    free (a);
    free (b);
    free (c);
    free (params);
    free (x);
    free (labels);
    ps_model_destroy (&model);
}

//  ---------------------------------------------------------------------
//  The forward pass

static void
test_forward_logits (void **state)
{
    (void) state;
    s_watchdog ("test_forward_logits");
    ps_model_t *model = s_model ("cnn");
    const int n = 37, classes = ps_model_classes (model);
    float *params = s_params (model, 41);
    float *x;
    uint8_t *labels;
    s_data (model, n, 42, &x, &labels);
    //  Scale the inputs up so that the logits spread and the predictions
    //  are not all one class.
    for (size_t i = 0; i < (size_t) n * ps_model_input_size (model); i++)
        x [i] *= 4;
    ps_backend_t *backend = s_backend (model, 64, 1);
    assert_string_equal (ps_backend_describe (backend), "cpu (OpenBLAS, 1 thread)");
    s_set_params (backend, params);
    float *logits = s_floats ((size_t) n * classes);
    for (size_t i = 0; i < (size_t) n * classes; i++)
        logits [i] = NAN;
    ps_batch_stats_t stats;
    s_forward (backend, x, labels, n, logits, &stats);

    //  Cross-entropy from the logits in float64: log (sum exp z) - z [y],
    //  with the maximum subtracted first; correct when the label's logit
    //  is the first largest.
    double loss = 0;
    int correct = 0, predicted [10] = { 0 };
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t) i * classes;
        int best = 0;
        for (int k = 0; k < classes; k++) {
            if (!isfinite (z [k]))
                fail_msg ("logit %d of example %d is %g", k, i, z [k]);
            if (z [k] > z [best])
                best = k;
        }
        double sum = 0;
        for (int k = 0; k < classes; k++)
            sum += exp ((double) z [k] - z [best]);
        loss += log (sum) + z [best] - z [labels [i]];
        correct += best == labels [i];
        predicted [best]++;
    }
    int distinct = 0;
    for (int k = 0; k < classes; k++)
        distinct += predicted [k] > 0;
    printf ("  n %d: loss %.9g (float64 from the logits %.9g), correct %d (%d), "
            "%d classes predicted\n", n, stats.loss_sum, loss, stats.correct, correct,
            distinct);
    assert_int_equal (stats.count, n);
    assert_int_equal (stats.correct, correct);
    assert_true (fabs (stats.loss_sum - loss) <= S_LOSS_TOL * loss);
    assert_true (distinct >= 2);

    //  Without logits the statistics are the same.
    ps_batch_stats_t bare;
    s_forward (backend, x, labels, n, NULL, &bare);
    assert_true (bare.loss_sum == stats.loss_sum);
    assert_int_equal (bare.correct, stats.correct);
    ps_backend_destroy (&backend);
    free (logits);
    free (params);
    free (x);
    free (labels);
    ps_model_destroy (&model);
}

//  ---------------------------------------------------------------------
//  Errors

static void
s_expect_says (const ps_error_t *err, int code, const char *word)
{
    printf ("  refused: %s\n", err->msg);
    assert_int_equal (err->code, code);
    if (!strstr (err->msg, word))
        fail_msg ("the message \"%s\" does not say \"%s\"", err->msg, word);
}

static void
test_errors (void **state)
{
    (void) state;
    s_watchdog ("test_errors");
    printf ("\n");
    ps_model_t *model = s_model (s_every_kind);
    ps_error_t err = { 0 };
    assert_null (ps_backend_new (model, PS_DEVICE_CPU, 0, 2, &err));
    s_expect_says (&err, PS_EINVAL, "batch");
    assert_null (ps_backend_new (model, PS_DEVICE_CPU, -5, 2, &err));
    s_expect_says (&err, PS_EINVAL, "-5");
    assert_null (ps_backend_new (model, PS_DEVICE_CPU, 4, 0, &err));
    s_expect_says (&err, PS_EINVAL, "threads");
    //  A valid model whose buffers could never fit (65536 filters of 28x28
    //  floats per example, 500 examples: about 290 GiB) is refused before
    //  anything is allocated, not killed half way.
    ps_model_t *huge = s_model ("{\"input_shape\": [28, 28, 1], \"layers\": ["
        "{\"type\": \"Conv2D\", \"filters\": 65536, \"kernel_size\": 1},"
        "{\"type\": \"Flatten\"}, {\"type\": \"Dense\", \"units\": 10}]}");
    assert_null (ps_backend_new (huge, PS_DEVICE_CPU, 500, 2, &err));
    s_expect_says (&err, PS_ETOOBIG, "GiB of buffers");
    ps_model_destroy (&huge);

    const int max_batch = 4;
    float *params = s_params (model, 51);
    float *grads = s_floats (ps_model_param_count (model));
    float *x;
    uint8_t *labels;
    s_data (model, max_batch + 1, 52, &x, &labels);
    ps_backend_t *backend = s_backend (model, max_batch, 1);
    s_set_params (backend, params);
    ps_batch_stats_t stats;
    const int bad_n [] = { 0, -1, max_batch + 1 };
    for (int k = 0; k < 3; k++) {
        assert_int_equal (ps_backend_train_step (backend, x, labels, bad_n [k], 1, grads,
                                                 &stats, &err), PS_EINVAL);
        s_expect_says (&err, PS_EINVAL, "1 to 4");
        assert_int_equal (ps_backend_forward (backend, x, labels, bad_n [k], NULL, &stats,
                                              &err), PS_EINVAL);
        s_expect_says (&err, PS_EINVAL, "1 to 4");
    }
    //  The model has 5 classes: label 5 of example 3 has no logit.
    labels [3] = 5;
    assert_int_equal (ps_backend_train_step (backend, x, labels, max_batch, 1, grads, &stats,
                                             &err), PS_EINVAL);
    s_expect_says (&err, PS_EINVAL, "example 3");
    assert_non_null (strstr (err.msg, "label 5"));
    labels [3] = 255;
    assert_int_equal (ps_backend_forward (backend, x, labels, max_batch, NULL, &stats, &err),
                      PS_EINVAL);
    s_expect_says (&err, PS_EINVAL, "example 3");
    //  The refused calls left the backend fit for use.
    labels [3] = 4;
    s_train_step (backend, x, labels, max_batch, 1, grads, &stats);
    ps_backend_destroy (&backend);
    ps_backend_destroy (&backend);

    ps_device_t device;
    assert_int_equal (ps_device_parse ("cpu", &device, &err), 0);
    assert_int_equal (device, PS_DEVICE_CPU);
    assert_int_equal (ps_device_parse ("gpu", &device, &err), 0);
    assert_int_equal (device, PS_DEVICE_GPU);
    assert_int_equal (ps_device_parse ("auto", &device, &err), 0);
    assert_int_equal (device, PS_DEVICE_AUTO);
    assert_int_equal (ps_device_parse ("tpu", &device, &err), PS_EINVAL);
    s_expect_says (&err, PS_EINVAL, "\"tpu\"");

    free (params);
    free (grads);
    free (x);
    free (labels);
    ps_model_destroy (&model);
}

//  A GPU backend fails with a message saying why: a build without CUDA
//  (PS_EINVAL, "built without CUDA") or no device (PS_ENOTFOUND, "no CUDA
//  device"). On a machine that has a GPU in a CUDA build there is nothing
//  to refuse, and the test says so.
static void
test_gpu_refused (void **state)
{
    (void) state;
    s_watchdog ("test_gpu_refused");
    ps_model_t *model = s_model ("mlp");
    ps_error_t err = { 0 };
    ps_backend_t *backend = ps_backend_new (model, PS_DEVICE_GPU, 8, 1, &err);
    if (backend) {
        printf ("  a GPU is present (%s): nothing to refuse\n", ps_backend_describe (backend));
        assert_int_equal (ps_backend_device (backend), PS_DEVICE_GPU);
        ps_backend_destroy (&backend);
    }
    else {
        printf ("  refused: %s\n", err.msg);
        bool no_cuda = err.code == PS_EINVAL && strstr (err.msg, "built without CUDA");
        bool no_device = err.code == PS_ENOTFOUND && strstr (err.msg, "no CUDA device");
        if (!no_cuda && !no_device)
            fail_msg ("code %d, \"%s\": expected PS_EINVAL \"built without CUDA\" or "
                      "PS_ENOTFOUND \"no CUDA device\"", err.code, err.msg);
        //  Then auto falls back to the CPU.
        backend = ps_backend_new (model, PS_DEVICE_AUTO, 8, 1, &err);
        assert_non_null (backend);
        assert_int_equal (ps_backend_device (backend), PS_DEVICE_CPU);
        ps_backend_destroy (&backend);
    }
    ps_model_destroy (&model);
}

//  ---------------------------------------------------------------------
//  Training on real data

#define S_TRAIN_EXAMPLES  19200
#define S_TEST_EXAMPLES   2000
#define S_BATCH           64
#define S_STEPS           300       //  one pass over the 19,200 examples
#define S_EVAL_BATCH      500

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
s_evaluate (ps_backend_t *backend, const ps_dataset_t *data, float *x, uint8_t *labels,
            ps_batch_stats_t *stats)
{
    ps_error_t err = { 0 };
    if (ps_evaluate (backend, data, S_EVAL_BATCH, x, labels, NULL, stats, &err))
        fail_msg ("ps_evaluate: %s", err.msg);
    assert_int_equal (stats->count, (int) ps_dataset_count (data));
}

//  300 Adam steps of batch 64 (the defaults of ps-worker) with the
//  optimizer applied per variable, as the standalone trainer and the
//  servers do. A fresh mlp predicts about uniformly (loss near ln 10 =
//  2.30); after one pass over 19,200 images it is well past 0.8 and 75%.
static void
test_training (void **state)
{
    (void) state;
    s_watchdog ("test_training");
    printf ("\n");
    const char *dir = harness_data_dir ();
    double t0 = s_now ();
    ps_error_t err = { 0 };
    ps_dataset_t *train = ps_dataset_load (dir, PS_SPLIT_TRAIN, S_TRAIN_EXAMPLES, &err);
    if (!train)
        fail_msg ("%s", err.msg);
    ps_dataset_t *test = ps_dataset_load (dir, PS_SPLIT_TEST, S_TEST_EXAMPLES, &err);
    if (!test)
        fail_msg ("%s", err.msg);
    assert_int_equal (ps_dataset_count (train), S_TRAIN_EXAMPLES);
    assert_int_equal (ps_dataset_count (test), S_TEST_EXAMPLES);

    ps_model_t *model = s_model ("mlp");
    size_t count = ps_model_param_count (model);
    float *params = s_floats (count), *grads = s_floats (count);
    ps_model_init_params (model, 1, params);
    ps_opt_config_t cfg;
    ps_opt_config_default (&cfg, PS_OPT_ADAM);
    assert_int_equal (ps_opt_config_validate (&cfg, &err), 0);
    int slot_count = ps_opt_slot_count (cfg.kind);
    assert_int_equal (slot_count, 2);
    float *slots [PS_OPT_MAX_SLOTS];
    for (int s = 0; s < slot_count; s++)
        slots [s] = s_floats (count);
    for (int v = 0; v < ps_model_variable_count (model); v++) {
        const ps_variable_t *var = ps_model_variable (model, v);
        float *own [PS_OPT_MAX_SLOTS] = { slots [0] + var->offset, slots [1] + var->offset };
        ps_opt_init_slots (&cfg, own, var->count);
    }

    ps_backend_t *backend = s_backend (model, S_EVAL_BATCH, 1);
    float *x = s_floats ((size_t) S_EVAL_BATCH * ps_model_input_size (model));
    uint8_t *labels = s_alloc (S_EVAL_BATCH);
    s_set_params (backend, params);
    ps_batch_stats_t before, after, accuracy;
    s_evaluate (backend, train, x, labels, &before);
    double t1 = s_now ();

    double first_steps = 0, last_steps = 0;
    for (int step = 0; step < S_STEPS; step++) {
        int n = ps_dataset_batch (train, 1, 0, (size_t) step, S_BATCH, x, labels, &err);
        if (n < 0)
            fail_msg ("batch %d: %s", step, err.msg);
        assert_int_equal (n, S_BATCH);
        ps_batch_stats_t stats;
        s_set_params (backend, params);
        s_train_step (backend, x, labels, n, (uint64_t) step, grads, &stats);
        for (int v = 0; v < ps_model_variable_count (model); v++) {
            const ps_variable_t *var = ps_model_variable (model, v);
            float *own [PS_OPT_MAX_SLOTS] = { slots [0] + var->offset, slots [1] + var->offset };
            ps_opt_apply (&cfg, params + var->offset, grads + var->offset, own, var->count,
                          (uint64_t) step + 1);
        }
        if (step < 20)
            first_steps += stats.loss_sum / n / 20;
        if (step >= S_STEPS - 20)
            last_steps += stats.loss_sum / n / 20;
    }
    double t2 = s_now ();
    s_set_params (backend, params);
    s_evaluate (backend, train, x, labels, &after);
    s_evaluate (backend, test, x, labels, &accuracy);
    double loss_before = before.loss_sum / before.count;
    double loss_after = after.loss_sum / after.count;
    double acc = (double) accuracy.correct / accuracy.count;
    printf ("  mlp, %d Adam steps of %d: training loss %.4f -> %.4f (batch means: first 20 "
            "%.4f, last 20 %.4f), test accuracy %.4f on %d, test loss %.4f\n", S_STEPS,
            S_BATCH, loss_before, loss_after, first_steps, last_steps, acc,
            accuracy.count, accuracy.loss_sum / accuracy.count);
    printf ("  load + first evaluation %.2f s, training %.2f s, evaluation %.2f s\n",
            t1 - t0, t2 - t1, s_now () - t2);
    assert_true (loss_before > 2.0 && loss_before < 3.0);
    assert_true (loss_after < 0.8);
    assert_true (acc > 0.75);

    ps_backend_destroy (&backend);
    for (int s = 0; s < slot_count; s++)
        free (slots [s]);
    free (params);
    free (grads);
    free (x);
    free (labels);
    ps_model_destroy (&model);
    ps_dataset_destroy (&train);
    ps_dataset_destroy (&test);
}

int
main (int argc, char **argv)
{
    if (harness_group (argc, argv, "real")) {
        harness_need_data ();
        const struct CMUnitTest real [] = {
            cmocka_unit_test_teardown (test_training, s_teardown),
        };
        return cmocka_run_group_tests_name ("real data", real, NULL, NULL);
    }
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (test_gradient_check, s_teardown),
        cmocka_unit_test_teardown (test_dropout_seed, s_teardown),
        cmocka_unit_test_teardown (test_forward_logits, s_teardown),
        cmocka_unit_test_teardown (test_errors, s_teardown),
        cmocka_unit_test_teardown (test_gpu_refused, s_teardown),
        cmocka_unit_test_teardown (test_threads_every_kind, s_teardown),
        cmocka_unit_test_teardown (test_threads_cnn, s_teardown),
        cmocka_unit_test_teardown (test_threads_first_step, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
