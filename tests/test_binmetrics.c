//  Unit tests for the binary metrics of common/model/ps_binmetrics.c: the
//  AUC of small hand-worked cases (perfect, reversed, all tied, and
//  scikit-learn's documented example), the AUC of random predictions with
//  many ties against the pairwise definition, the log loss against a
//  float64 reference with its clipping, predictions added in batches
//  giving what one call gives, and bad labels and probabilities refused
//  with the example named and nothing added.

#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness_case.h"
#include "harness_rand.h"
#include "ps_binmetrics.h"

static double
s_auc (const float *labels, const float *probs, size_t n)
{
    double auc = -1, logloss;
    ps_error_t err = { 0 };
    harness_ok (ps_binmetrics_compute (labels, probs, n, &logloss, &auc, &err), &err);
    return auc;
}

static void
test_auc_small (void **state)
{
    (void) state;
    const float labels [] = { 0, 0, 1, 1 };
    //  scikit-learn's roc_auc_score example: 0.75.
    const float sk [] = { 0.1f, 0.4f, 0.35f, 0.8f };
    assert_float_equal (s_auc (labels, sk, 4), 0.75, 1e-12);
    const float perfect [] = { 0.1f, 0.2f, 0.3f, 0.4f };
    assert_float_equal (s_auc (labels, perfect, 4), 1.0, 1e-12);
    const float reversed [] = { 0.9f, 0.8f, 0.3f, 0.2f };
    assert_float_equal (s_auc (labels, reversed, 4), 0.0, 1e-12);
    const float tied [] = { 0.5f, 0.5f, 0.5f, 0.5f };
    assert_float_equal (s_auc (labels, tied, 4), 0.5, 1e-12);
    //  One positive tied with one of two negatives, above the other: 0.75.
    const float l3 [] = { 0, 1, 0 };
    const float p3 [] = { 0.2f, 0.6f, 0.6f };
    assert_float_equal (s_auc (l3, p3, 3), 0.75, 1e-12);
    //  0 and -0 are one value, and 0 and 1 are the ends of the order.
    const float pz [] = { -0.0f, 0.0f, 1.0f, 0.0f };
    assert_float_equal (s_auc (labels, pz, 4), 0.75, 1e-12);
}

static void
test_auc_random_against_pairs (void **state)
{
    (void) state;
    enum { N = 1500 };
    uint64_t seed = 17;
    float *labels = malloc (N * sizeof (float));
    float *probs = malloc (N * sizeof (float));
    assert_non_null (labels);
    assert_non_null (probs);
    for (int round = 0; round < 4; round++) {
        //  Round 0 draws probabilities from 11 values (many ties); later
        //  rounds from the whole float range of [0, 1].
        for (size_t i = 0; i < N; i++) {
            double u = harness_unit (&seed);
            labels [i] = harness_unit (&seed) < 0.3 + 0.4 * u ? 1.0f : 0.0f;
            probs [i] = round == 0 ? (float) floor (u * 11) / 10.0f : (float) u;
        }
        double won = 0, pairs = 0;
        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j < N; j++)
                if (labels [i] == 1.0f && labels [j] == 0.0f) {
                    pairs++;
                    won += probs [i] > probs [j] ? 1.0 : probs [i] == probs [j] ? 0.5 : 0.0;
                }
        assert_float_equal (s_auc (labels, probs, N), won / pairs, 1e-12);
    }
    free (labels);
    free (probs);
}

static void
test_logloss_and_batches (void **state)
{
    (void) state;
    enum { N = 1000 };
    uint64_t seed = 5;
    float labels [N], probs [N];
    double reference = 0;
    for (size_t i = 0; i < N; i++) {
        labels [i] = harness_unit (&seed) < 0.25 ? 1.0f : 0.0f;
        //  Include the ends, which the clipping keeps finite.
        probs [i] = i % 100 == 0 ? 0.0f : i % 100 == 1 ? 1.0f : (float) harness_unit (&seed);
        double p = fmin (fmax (probs [i], 1e-7), 1 - 1e-7);
        reference -= labels [i] == 1.0f ? log (p) : log (1 - p);
    }
    reference /= N;
    ps_binmetrics_t *metrics = ps_binmetrics_new ();
    assert_non_null (metrics);
    assert_true (isnan (ps_binmetrics_logloss (metrics)));
    ps_error_t err = { 0 };
    //  Batches of uneven sizes, an empty one among them.
    size_t cuts [] = { 0, 7, 7, 300, 999, N };
    for (size_t c = 0; c + 1 < sizeof cuts / sizeof cuts [0]; c++)
        harness_ok (ps_binmetrics_add (metrics, labels + cuts [c], probs + cuts [c],
                                       cuts [c + 1] - cuts [c], &err), &err);
    assert_int_equal (ps_binmetrics_count (metrics), N);
    size_t positives = 0;
    for (size_t i = 0; i < N; i++)
        positives += labels [i] == 1.0f;
    assert_int_equal (ps_binmetrics_positives (metrics), positives);
    assert_float_equal (ps_binmetrics_logloss (metrics), reference, 1e-9 * reference);
    double auc_batches;
    harness_ok (ps_binmetrics_auc (metrics, &auc_batches, &err), &err);
    double auc_once, logloss_once;
    harness_ok (ps_binmetrics_compute (labels, probs, N, &logloss_once, &auc_once, &err), &err);
    assert_float_equal (auc_batches, auc_once, 1e-15);
    assert_float_equal (logloss_once, reference, 1e-9 * reference);
    //  A reset pass gives the same numbers again.
    ps_binmetrics_reset (metrics);
    assert_int_equal (ps_binmetrics_count (metrics), 0);
    harness_ok (ps_binmetrics_add (metrics, labels, probs, N, &err), &err);
    double auc_again;
    harness_ok (ps_binmetrics_auc (metrics, &auc_again, &err), &err);
    assert_float_equal (auc_again, auc_once, 1e-15);
    ps_binmetrics_destroy (&metrics);
    assert_null (metrics);
    ps_binmetrics_destroy (&metrics);
}

static void
test_bad_input (void **state)
{
    (void) state;
    ps_binmetrics_t *metrics = ps_binmetrics_new ();
    assert_non_null (metrics);
    ps_error_t err = { 0 };
    const float good_labels [] = { 0, 1, 0 };
    const float good_probs [] = { 0.1f, 0.5f, 0.9f };
    harness_ok (ps_binmetrics_add (metrics, good_labels, good_probs, 3, &err), &err);

    const float bad_label [] = { 0, 0.5f, 1 };
    assert_int_equal (ps_binmetrics_add (metrics, bad_label, good_probs, 3, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "label of example 1 is 0.5"));
    const float nan_prob [] = { 0.1f, 0.2f, NAN };
    assert_int_equal (ps_binmetrics_add (metrics, good_labels, nan_prob, 3, &err),
                      PS_ENONFINITE);
    assert_non_null (strstr (err.msg, "example 2"));
    const float big_prob [] = { 1.5f, 0.2f, 0.3f };
    assert_int_equal (ps_binmetrics_add (metrics, good_labels, big_prob, 3, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "example 0 is 1.5"));
    //  Nothing of the refused batches was added.
    assert_int_equal (ps_binmetrics_count (metrics), 3);
    assert_int_equal (ps_binmetrics_positives (metrics), 1);

    //  One class only: no AUC, and a message saying why.
    const float zeros [] = { 0, 0 };
    double auc = -1, logloss = -1;
    assert_int_equal (ps_binmetrics_compute (zeros, good_probs, 2, &logloss, &auc, &err),
                      PS_EINVAL);
    assert_non_null (strstr (err.msg, "0 positives and 2 negatives"));
    assert_float_equal (auc, -1, 0);
    ps_binmetrics_destroy (&metrics);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_auc_small),
        cmocka_unit_test (test_auc_random_against_pairs),
        cmocka_unit_test (test_logloss_and_batches),
        cmocka_unit_test (test_bad_input),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
