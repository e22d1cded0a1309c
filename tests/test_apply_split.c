//  Unit tests for a large partition's update applied in ranges on the apply
//  pool's threads (ps_partition_push_on with ps_pool_runner): every
//  optimizer, with and without its optional features, gives bit-identical
//  values and slots to the single-threaded apply for sizes around
//  PS_PARTITION_SPLIT_MIN and odd lengths; a repeat is still a repeat; a
//  sync round's mean is applied the same; and pushes racing pulls on one
//  partition lose no update and never show half of one (SGD with lr 1 and
//  gradient -1 adds 1 to every value per update, so a pull's values must
//  all equal the version it reports).

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ps_floats.h"
#include "ps_partition.h"
#include "ps_pool.h"

#define S_STEPS  3

//  The sizes tried: around the threshold, below it, and odd lengths that
//  end in a short range.
static const size_t s_sizes [] = {
    PS_PARTITION_SPLIT_MIN - 1, PS_PARTITION_SPLIT_MIN, PS_PARTITION_SPLIT_MIN + 1,
    PS_PARTITION_SPLIT_MIN + 17, 3 * PS_PARTITION_GRAIN + 5,
};

static ps_pool_t *
s_pool (int threads)
{
    ps_error_t err;
    ps_pool_t *pool = ps_pool_new (threads, &err);
    if (!pool)
        fail_msg ("ps_pool_new: %s", err.msg);
    return pool;
}

//  A 1-D partition of n floats, values uniform in [-1, 1) from seed 7.
static ps_partition_t *
s_partition (size_t n, const ps_opt_config_t *opt)
{
    ps_shape_t shape;
    if (ps_shape_set (&shape, (const int64_t []) { (int64_t) n }, 1, NULL))
        fail_msg ("ps_shape_set");
    ps_init_t init;
    ps_init_default (&init, PS_INIT_UNIFORM);
    init.seed = 7;
    ps_error_t err;
    ps_partition_t *part = ps_partition_new ("w", 0, &shape, 0, (int64_t) n, &init, opt, &err);
    if (!part)
        fail_msg ("ps_partition_new: %s", err.msg);
    return part;
}

//  Gradient of step: varied signs and magnitudes, some large enough to clip.
static void
s_grad (float *grad, size_t n, uint64_t step)
{
    uint32_t x = 2654435761u * (uint32_t) (step + 1);
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        grad [i] = ((float) (x >> 8) / (float) (1 << 24) - 0.5f) * (i % 97 == 0 ? 40.0f : 1.0f);
    }
}

//  The configurations tried: every kind plain, then with every option on.
static int
s_configs (ps_opt_config_t *configs)
{
    int count = 0;
    const ps_opt_kind_t kinds [] = { PS_OPT_SGD, PS_OPT_MOMENTUM, PS_OPT_ADAGRAD, PS_OPT_ADAM };
    for (int options = 0; options < 2; options++)
        for (size_t k = 0; k < 4; k++) {
            ps_opt_config_t *cfg = &configs [count++];
            ps_opt_config_default (cfg, kinds [k]);
            if (options) {
                cfg->weight_decay = 0.01;
                cfg->clip_value = 5.0;
                cfg->clip_norm = 100.0;
                cfg->nesterov = kinds [k] == PS_OPT_MOMENTUM;
            }
        }
    ps_opt_config_default (&configs [count], PS_OPT_MOMENTUM);
    configs [count++].nesterov = true;
    return count;
}

static void
s_assert_same (const float *a, const float *b, size_t n, const char *what, size_t size, int cfg)
{
    if (memcmp (a, b, n * sizeof (float)) != 0) {
        size_t i = 0;
        while (memcmp (a + i, b + i, sizeof (float)) == 0)
            i++;
        fail_msg ("%s differ at %zu of %zu (config %d): %.9g, not %.9g", what, i, size, cfg,
                  (double) b [i], (double) a [i]);
    }
}

//  ps_opt_apply_range over ranges of any split equals ps_opt_apply, slots
//  included.
static void
test_ranges_bit_identical (void **state)
{
    (void) state;
    size_t n = 1001;
    ps_opt_config_t configs [16];
    int nconfigs = s_configs (configs);
    float *grad = malloc (n * sizeof (float));
    float *arrays [2][3];
    for (int a = 0; a < 2; a++)
        for (int j = 0; j < 3; j++)
            arrays [a][j] = malloc (n * sizeof (float));
    for (int c = 0; c < nconfigs; c++) {
        for (int a = 0; a < 2; a++) {
            for (size_t i = 0; i < n; i++)
                arrays [a][0][i] = (float) i / (float) n - 0.5f;
            ps_opt_init_slots (&configs [c], arrays [a] + 1, n);
        }
        for (uint64_t t = 1; t <= S_STEPS; t++) {
            s_grad (grad, n, t);
            ps_opt_apply (&configs [c], arrays [0][0], grad, arrays [0] + 1, n, t);
            ps_opt_update_t update;
            ps_opt_prepare (&configs [c], grad, n, t, &update);
            //  Uneven ranges, odd and out of order.
            const size_t cuts [] = { 0, 3, 500, 517, 1000, 1001 };
            for (size_t r = 5; r-- > 0;)
                ps_opt_apply_range (&update, arrays [1][0], grad, arrays [1] + 1,
                                    cuts [r], cuts [r + 1]);
        }
        for (int j = 0; j < 1 + ps_opt_slot_count (configs [c].kind); j++)
            s_assert_same (arrays [0][j], arrays [1][j], n, j ? "slots" : "values", n, c);
    }
    free (grad);
    for (int a = 0; a < 2; a++)
        for (int j = 0; j < 3; j++)
            free (arrays [a][j]);
}

//  Partitions updated on 2 threads equal those updated on one, for pushes
//  and push-pulls (whose out is its own gradient, as on a server).
static void
test_partition_split_bit_identical (void **state)
{
    (void) state;
    ps_pool_t *pool = s_pool (2);
    ps_opt_runner_t runner = ps_pool_runner (pool);
    ps_opt_config_t configs [16];
    int nconfigs = s_configs (configs);
    for (size_t s = 0; s < sizeof s_sizes / sizeof s_sizes [0]; s++) {
        size_t n = s_sizes [s];
        float *grad = ps_floats_alloc (n);
        float *out = ps_floats_alloc (n);
        float *one = ps_floats_alloc (n);
        float *split = ps_floats_alloc (n);
        assert_non_null (grad && out && one && split);
        for (int c = 0; c < nconfigs; c++) {
            ps_partition_t *single = s_partition (n, &configs [c]);
            ps_partition_t *many = s_partition (n, &configs [c]);
            uint64_t v1, v2;
            ps_error_t err;
            for (uint64_t step = 1; step <= S_STEPS; step++) {
                s_grad (grad, n, step);
                assert_int_equal (ps_partition_push (single, step, grad, NULL, &v1, &err), PS_OK);
                if (step < S_STEPS)
                    assert_int_equal (ps_partition_push_on (many, step, grad, NULL, &v2,
                                                            &runner, &err), PS_OK);
                else {
                    //  A push-pull whose values replace its gradient.
                    memcpy (out, grad, n * sizeof (float));
                    assert_int_equal (ps_partition_push_on (many, step, out, out, &v2,
                                                            &runner, &err), PS_OK);
                }
                assert_int_equal (v1, v2);
            }
            ps_partition_pull (single, one, &v1);
            ps_partition_pull (many, split, &v2);
            assert_int_equal (v1, S_STEPS);
            assert_int_equal (v2, S_STEPS);
            s_assert_same (one, split, n, "values", n, c);
            s_assert_same (one, out, n, "push-pull values", n, c);
            //  Every slot went into the last update's values; one more
            //  update with the same gradient shows the slots match too.
            s_grad (grad, n, 99);
            assert_int_equal (ps_partition_push (single, 99, grad, NULL, &v1, &err), PS_OK);
            assert_int_equal (ps_partition_push_on (many, 99, grad, NULL, &v2, &runner, &err),
                              PS_OK);
            ps_partition_pull (single, one, &v1);
            ps_partition_pull (many, split, &v2);
            s_assert_same (one, split, n, "values after slots", n, c);
            ps_partition_destroy (&single);
            ps_partition_destroy (&many);
        }
        free (grad);
        free (out);
        free (one);
        free (split);
    }
    ps_pool_destroy (&pool);
}

//  A repeated step changes nothing when split: the version, the values and
//  the counters stay, and a push-pull of the repeat still gets the values.
static void
test_split_duplicate (void **state)
{
    (void) state;
    ps_pool_t *pool = s_pool (2);
    ps_opt_runner_t runner = ps_pool_runner (pool);
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    size_t n = PS_PARTITION_SPLIT_MIN + 3;
    ps_partition_t *part = s_partition (n, &opt);
    float *grad = ps_floats_alloc (n);
    float *before = ps_floats_alloc (n);
    float *after = ps_floats_alloc (n);
    assert_non_null (grad && before && after);
    s_grad (grad, n, 5);
    uint64_t version;
    ps_error_t err;
    assert_int_equal (ps_partition_push_on (part, 5, grad, NULL, &version, &runner, &err), PS_OK);
    assert_int_equal (version, 1);
    ps_partition_pull (part, before, &version);
    assert_int_equal (ps_partition_push_on (part, 5, grad, after, &version, &runner, &err),
                      PS_DUPLICATE);
    assert_int_equal (version, 1);
    s_assert_same (before, after, n, "repeat's push-pull values", n, 0);
    ps_partition_pull (part, after, &version);
    s_assert_same (before, after, n, "values after a repeat", n, 0);
    ps_partition_stats_t stats;
    ps_partition_stats (part, &stats);
    assert_int_equal (stats.updates, 1);
    assert_int_equal (stats.duplicates, 1);
    assert_int_equal (stats.recorded, 1);
    free (grad);
    free (before);
    free (after);
    ps_partition_destroy (&part);
    ps_pool_destroy (&pool);
}

//  A sync round's mean, applied in ranges, equals the one applied whole.
static void
test_split_round (void **state)
{
    (void) state;
    ps_pool_t *pool = s_pool (2);
    ps_opt_runner_t runner = ps_pool_runner (pool);
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    size_t n = 2 * PS_PARTITION_SPLIT_MIN + 9;
    ps_partition_t *parts [2] = { s_partition (n, &opt), s_partition (n, &opt) };
    float *grads [2] = { ps_floats_alloc (n), ps_floats_alloc (n) };
    float *values [2] = { ps_floats_alloc (n), ps_floats_alloc (n) };
    s_grad (grads [0], n, 1);
    s_grad (grads [1], n, 2);
    for (int p = 0; p < 2; p++)
        for (uint64_t step = 1; step <= 2; step++) {
            const float *grad = grads [step - 1];
            int outcome;
            bool applied;
            uint64_t version;
            ps_error_t err;
            assert_int_equal (ps_partition_push_rounds (&parts [p], 1, step, 1, 2, &grad,
                                                        &outcome, &applied, &version,
                                                        p ? &runner : NULL, &err), PS_OK);
            assert_int_equal (outcome, PS_OK);
            assert_int_equal (applied, step == 2);
            assert_int_equal (version, step == 2);
        }
    uint64_t v0, v1;
    ps_partition_pull (parts [0], values [0], &v0);
    ps_partition_pull (parts [1], values [1], &v1);
    assert_int_equal (v0, 1);
    assert_int_equal (v1, 1);
    s_assert_same (values [0], values [1], n, "round values", n, 0);
    for (int p = 0; p < 2; p++) {
        ps_partition_destroy (&parts [p]);
        free (grads [p]);
        free (values [p]);
    }
    ps_pool_destroy (&pool);
}

//  The race: pushers apply split updates while a reader pulls.
#define S_PUSHERS        2
#define S_PUSHES         20

typedef struct {
    ps_partition_t *part;
    const ps_opt_runner_t *runner;
    const float *grad;
    size_t n;
    int index;
} s_racer_t;

static void *
s_pusher (void *arg)
{
    s_racer_t *racer = arg;
    for (uint64_t k = 0; k < S_PUSHES; k++) {
        uint64_t version;
        ps_error_t err;
        uint64_t step = k * S_PUSHERS + (uint64_t) racer->index + 1;
        if (ps_partition_push_on (racer->part, step, racer->grad, NULL, &version, racer->runner,
                                  &err) != PS_OK)
            return "push refused";
    }
    return NULL;
}

static void
test_split_race (void **state)
{
    (void) state;
    ps_pool_t *pool = s_pool (2);
    ps_opt_runner_t runner = ps_pool_runner (pool);
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_SGD);
    opt.lr = 1.0;
    size_t n = 3 * PS_PARTITION_GRAIN + 1;
    ps_shape_t shape;
    assert_int_equal (ps_shape_set (&shape, (const int64_t []) { (int64_t) n }, 1, NULL), 0);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_ZEROS);
    ps_error_t err;
    ps_partition_t *part = ps_partition_new ("w", 0, &shape, 0, (int64_t) n, &init, &opt, &err);
    assert_non_null (part);
    float *grad = ps_floats_alloc (n);
    float *seen = ps_floats_alloc (n);
    assert_non_null (grad && seen);
    for (size_t i = 0; i < n; i++)
        grad [i] = -1.0f;
    pthread_t threads [S_PUSHERS];
    s_racer_t racers [S_PUSHERS];
    for (int t = 0; t < S_PUSHERS; t++) {
        racers [t] = (s_racer_t) { part, &runner, grad, n, t };
        assert_int_equal (pthread_create (&threads [t], NULL, s_pusher, &racers [t]), 0);
    }
    //  Pull until the last update is seen: every pull is one whole version.
    uint64_t version = 0, pulls = 0;
    while (version < S_PUSHERS * S_PUSHES) {
        ps_partition_pull (part, seen, &version);
        pulls++;
        for (size_t i = 0; i < n; i++)
            if (seen [i] != (float) version)
                fail_msg ("torn read: element %zu is %g at version %llu", i, (double) seen [i],
                          (unsigned long long) version);
    }
    for (int t = 0; t < S_PUSHERS; t++) {
        void *result;
        assert_int_equal (pthread_join (threads [t], &result), 0);
        assert_null (result);
    }
    ps_partition_pull (part, seen, &version);
    assert_int_equal (version, S_PUSHERS * S_PUSHES);
    for (size_t i = 0; i < n; i++)
        assert_true (seen [i] == (float) (S_PUSHERS * S_PUSHES));
    assert_true (pulls > 0);
    free (grad);
    free (seen);
    ps_partition_destroy (&part);
    ps_pool_destroy (&pool);
}

//  ps_pool_for covers [0, n) once, with any number of threads (none: the
//  caller runs it all), and for n of no range, one range or a short last.
static void
s_count_range (void *arg, size_t begin, size_t end)
{
    atomic_size_t *covered = arg;
    atomic_fetch_add (covered, end - begin);
}

static void
test_pool_for (void **state)
{
    (void) state;
    for (int threads = 0; threads <= 3; threads++) {
        ps_pool_t *pool = s_pool (threads);
        const size_t sizes [] = { 0, 1, 9, 10, 11, 1000 };
        for (size_t s = 0; s < sizeof sizes / sizeof sizes [0]; s++) {
            atomic_size_t covered;
            atomic_init (&covered, 0);
            ps_pool_for (pool, sizes [s], 10, s_count_range, &covered);
            assert_int_equal (atomic_load (&covered), sizes [s]);
        }
        ps_pool_destroy (&pool);
    }
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_ranges_bit_identical),
        cmocka_unit_test (test_partition_split_bit_identical),
        cmocka_unit_test (test_split_duplicate),
        cmocka_unit_test (test_split_round),
        cmocka_unit_test (test_split_race),
        cmocka_unit_test (test_pool_for),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
