//  Unit tests for sync mode's rounds in common/store/ps_partition.c: the
//  mean of a round's gradients is applied once, when its last step
//  arrives, checked against values computed by hand (SGD) and in float64
//  (Adam); repeats are counted and change nothing; a push for another
//  round than the open one is refused and leaves no trace; a partition
//  with a round half added refuses to be saved.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ps_partition.h"
#include "harness.h"

#define S_ROWS  3
#define S_COLS  2
#define S_COUNT (S_ROWS * S_COLS)

//  A partition of all rows of a 3x2 variable, every value 1.0.
static ps_partition_t *
s_partition (ps_opt_kind_t kind, double lr)
{
    ps_shape_t shape;
    if (ps_shape_set (&shape, (const int64_t []) { S_ROWS, S_COLS }, 2, NULL))
        fail_msg ("ps_shape_set");
    ps_init_t init;
    ps_init_default (&init, PS_INIT_CONSTANT);
    init.value = 1.0;
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, kind);
    opt.lr = lr;
    ps_error_t err;
    ps_partition_t *partition = ps_partition_new ("w", 0, &shape, 0, S_ROWS, &init, &opt, &err);
    if (!partition)
        fail_msg ("ps_partition_new: %s", err.msg);
    return partition;
}

static void
s_values (ps_partition_t *partition, float *out, uint64_t *version)
{
    ps_partition_pull (partition, out, version);
}

static void
test_round_mean_applied_once (void **state)
{
    (void) state;
    ps_partition_t *partition = s_partition (PS_OPT_SGD, 0.5);
    float g1 [S_COUNT] = { 1, 2, 3, 4, 5, 6 };
    float g2 [S_COUNT] = { 3, 2, 1, 0, -1, -2 };
    float values [S_COUNT];
    uint64_t version;
    bool applied;
    ps_error_t err;
    //  The first of two steps: added, not applied.
    assert_int_equal (ps_partition_push_round (partition, 10, 1, 2, g1, &applied, &version,
                                               &err), PS_OK);
    assert_false (applied);
    assert_int_equal (version, 0);
    s_values (partition, values, &version);
    for (int i = 0; i < S_COUNT; i++)
        assert_true (values [i] == 1.0f);
    //  Its repeat changes nothing.
    assert_int_equal (ps_partition_push_round (partition, 10, 1, 2, g2, &applied, &version,
                                               &err), PS_DUPLICATE);
    assert_false (applied);
    //  The second applies the mean: 1 - 0.5 * (g1 + g2) / 2 = 1 - (g1 + g2) / 4,
    //  and every (g1 + g2) here is 4, 4, 4, 4, 4, 4.
    assert_int_equal (ps_partition_push_round (partition, 11, 1, 2, g2, &applied, &version,
                                               &err), PS_OK);
    assert_true (applied);
    assert_int_equal (version, 1);
    s_values (partition, values, &version);
    for (int i = 0; i < S_COUNT; i++)
        assert_true (values [i] == 0.0f);
    //  A late copy of either step, whatever round it names, is a repeat.
    assert_int_equal (ps_partition_push_round (partition, 11, 7, 3, g1, &applied, &version,
                                               &err), PS_DUPLICATE);
    ps_partition_stats_t stats;
    ps_partition_stats (partition, &stats);
    assert_int_equal (stats.updates, 1);
    assert_int_equal (stats.duplicates, 2);
    ps_partition_destroy (&partition);
}

static void
test_round_refusals (void **state)
{
    (void) state;
    ps_partition_t *partition = s_partition (PS_OPT_SGD, 1.0);
    float g [S_COUNT] = { 1, 1, 1, 1, 1, 1 };
    uint64_t version;
    bool applied;
    ps_error_t err;
    assert_int_equal (ps_partition_push_round (partition, 1, 5, 1, g, &applied, &version, &err),
                      PS_OK);
    assert_true (applied);
    //  Round 5 was applied: neither it nor an earlier round opens again.
    assert_int_equal (ps_partition_push_round (partition, 2, 5, 1, g, &applied, &version, &err),
                      PS_EINVAL);
    assert_non_null (strstr (err.msg, "round 5 is not after round 5"));
    assert_int_equal (ps_partition_push_round (partition, 2, 4, 1, g, &applied, &version, &err),
                      PS_EINVAL);
    assert_int_equal (ps_partition_push_round (partition, 2, 6, 0, g, &applied, &version, &err),
                      PS_EINVAL);
    //  Round 6 of three steps opens; a step of round 7, or of round 6 with
    //  another count, is refused, and the refused step is not recorded:
    //  the same step is added once it names the open round.
    assert_int_equal (ps_partition_push_round (partition, 2, 6, 3, g, &applied, &version, &err),
                      PS_OK);
    assert_int_equal (ps_partition_push_round (partition, 3, 7, 3, g, &applied, &version, &err),
                      PS_EINVAL);
    assert_non_null (strstr (err.msg, "partition w/0"));
    assert_non_null (strstr (err.msg, "round 6 is open with 1 of its 3 steps"));
    assert_int_equal (ps_partition_push_round (partition, 3, 6, 2, g, &applied, &version, &err),
                      PS_EINVAL);
    assert_int_equal (ps_partition_push_round (partition, 3, 6, 3, g, &applied, &version, &err),
                      PS_OK);
    assert_false (applied);
    //  A checkpoint now would record steps 2 and 3 as applied.
    char dir [256];
    harness_tmpdir (dir, sizeof dir);
    char file [256];
    uint64_t bytes;
    uint32_t crc;
    assert_int_equal (ps_partition_save (partition, dir, file, sizeof file, &bytes, &crc,
                                         &version, &err), PS_EBUSY);
    assert_non_null (strstr (err.msg, "round 6 is open with 2 of its 3 steps"));
    assert_int_equal (ps_partition_push_round (partition, 4, 6, 3, g, &applied, &version, &err),
                      PS_OK);
    assert_true (applied);
    assert_int_equal (version, 2);
    assert_int_equal (ps_partition_save (partition, dir, file, sizeof file, &bytes, &crc,
                                         &version, &err), PS_OK);
    assert_int_equal (version, 2);
    harness_rmtree (dir);
    ps_partition_destroy (&partition);
}

//  Adam on a round of two steps, against float64 and the documented rule
//  (common/model/ps_optimizer.h): with t = 1 and slots starting at zero,
//  m = (1 - b1) g, v = (1 - b2) g^2 and the value moves by
//  lr * sqrt (1 - b2) / (1 - b1) * m / (sqrt (v) + eps), where g is the
//  round's mean gradient.
static void
test_round_adam_float64 (void **state)
{
    (void) state;
    ps_partition_t *partition = s_partition (PS_OPT_ADAM, 0.01);
    float g1 [S_COUNT] = { 0.5f, -2.0f, 1e-3f, 4.0f, -0.25f, 0.0f };
    float g2 [S_COUNT] = { 1.5f, -1.0f, 3e-3f, -4.0f, -0.75f, 0.0f };
    uint64_t version;
    bool applied;
    ps_error_t err;
    assert_int_equal (ps_partition_push_round (partition, 1, 1, 2, g1, &applied, &version,
                                               &err), PS_OK);
    assert_int_equal (ps_partition_push_round (partition, 2, 1, 2, g2, &applied, &version,
                                               &err), PS_OK);
    assert_true (applied);
    float values [S_COUNT];
    s_values (partition, values, &version);
    for (int i = 0; i < S_COUNT; i++) {
        double g = ((double) g1 [i] + (double) g2 [i]) / 2.0;
        double m = 0.1 * g, v = 0.001 * g * g;
        double expect = 1.0 - 0.01 * sqrt (0.001) / 0.1 * m / (sqrt (v) + 1e-7);
        assert_true (fabs ((double) values [i] - expect) < 1e-6);
    }
    ps_partition_destroy (&partition);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_round_mean_applied_once),
        cmocka_unit_test (test_round_refusals),
        cmocka_unit_test (test_round_adam_float64),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
