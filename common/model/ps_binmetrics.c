//  Log loss and exact AUC of binary predictions (ps_binmetrics.h).
//
//  Each prediction is kept as one 32-bit key: the bits of its probability
//  shifted left by one, with the label in the low bit. The bits of a float
//  in [0, 1] (with -0 taken as +0) are at most 0x3f800000 and order as the
//  values do, so sorting the keys as integers sorts the predictions by
//  probability, and equal probabilities end up adjacent whatever their
//  labels. The AUC is then one walk over the groups of equal probability:
//  each positive of a group beats every negative of the groups before it
//  and ties with each negative of its own group.

#include "ps_binmetrics.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct _ps_binmetrics_t {
    uint32_t *keys;             //  count keys, (probability bits << 1) | label
    size_t count;
    size_t capacity;
    size_t positives;
    double loss_sum;            //  the sum of the clipped log losses
};

ps_binmetrics_t *
ps_binmetrics_new (void)
{
    return calloc (1, sizeof (ps_binmetrics_t));
}

void
ps_binmetrics_destroy (ps_binmetrics_t **self_p)
{
    assert (self_p);
    if (*self_p) {
        free ((*self_p)->keys);
        free (*self_p);
        *self_p = NULL;
    }
}

//  The key of one prediction, whose label and probability were checked.
static uint32_t
s_key (float label, float prob)
{
    uint32_t bits;
    float positive = prob + 0.0f;       //  -0 becomes +0
    memcpy (&bits, &positive, sizeof bits);
    return bits << 1 | (label == 1.0f);
}

int
ps_binmetrics_add (ps_binmetrics_t *self, const float *labels, const float *probs, size_t n,
                   ps_error_t *err)
{
    assert (self);
    for (size_t i = 0; i < n; i++) {
        if (labels [i] != 0.0f && labels [i] != 1.0f)
            return ps_error_set (err, PS_EINVAL, "binary metrics: label of example %zu is %g, "
                                 "expected 0 or 1", i, (double) labels [i]);
        if (!isfinite (probs [i]))
            return ps_error_set (err, PS_ENONFINITE, "binary metrics: prediction of example "
                                 "%zu is %g, expected a probability", i, (double) probs [i]);
        if (probs [i] < 0.0f || probs [i] > 1.0f)
            return ps_error_set (err, PS_EINVAL, "binary metrics: prediction of example %zu "
                                 "is %g, expected a probability in [0, 1]", i,
                                 (double) probs [i]);
    }
    if (n > self->capacity - self->count) {
        size_t capacity = self->capacity ? self->capacity : 1024;
        while (capacity - self->count < n) {
            if (capacity > SIZE_MAX / 2 / sizeof (uint32_t))
                return ps_error_set (err, PS_ETOOBIG, "binary metrics: %zu predictions "
                                     "are too many to keep", self->count + n);
            capacity *= 2;
        }
        uint32_t *keys = realloc (self->keys, capacity * sizeof (uint32_t));
        if (!keys)
            return ps_error_set (err, PS_ETOOBIG, "binary metrics: out of memory for %zu "
                                 "predictions", capacity);
        self->keys = keys;
        self->capacity = capacity;
    }
    for (size_t i = 0; i < n; i++) {
        double p = fmin (fmax ((double) probs [i], PS_BINMETRICS_EPS), 1.0 - PS_BINMETRICS_EPS);
        bool positive = labels [i] == 1.0f;
        self->loss_sum -= positive ? log (p) : log1p (-p);
        self->positives += positive;
        self->keys [self->count++] = s_key (labels [i], probs [i]);
    }
    return 0;
}

void
ps_binmetrics_reset (ps_binmetrics_t *self)
{
    assert (self);
    self->count = 0;
    self->positives = 0;
    self->loss_sum = 0;
}

size_t
ps_binmetrics_count (const ps_binmetrics_t *self)
{
    assert (self);
    return self->count;
}

size_t
ps_binmetrics_positives (const ps_binmetrics_t *self)
{
    assert (self);
    return self->positives;
}

double
ps_binmetrics_logloss (const ps_binmetrics_t *self)
{
    assert (self);
    return self->count ? self->loss_sum / (double) self->count : NAN;
}

//  Sort n keys with a least-significant-digit radix sort, a byte per pass,
//  through tmp (n keys). Passes whose byte is the same in every key are
//  skipped. The sorted keys end in keys.
static void
s_radix_sort (uint32_t *keys, uint32_t *tmp, size_t n)
{
    uint32_t *from = keys, *to = tmp;
    for (int shift = 0; shift < 32; shift += 8) {
        size_t counts [256] = { 0 };
        for (size_t i = 0; i < n; i++)
            counts [(from [i] >> shift) & 0xff]++;
        if (counts [(from [0] >> shift) & 0xff] == n)
            continue;
        size_t start = 0;
        for (int b = 0; b < 256; b++) {
            size_t c = counts [b];
            counts [b] = start;
            start += c;
        }
        for (size_t i = 0; i < n; i++)
            to [counts [(from [i] >> shift) & 0xff]++] = from [i];
        uint32_t *swap = from;
        from = to;
        to = swap;
    }
    if (from != keys)
        memcpy (keys, from, n * sizeof (uint32_t));
}

int
ps_binmetrics_auc (ps_binmetrics_t *self, double *auc, ps_error_t *err)
{
    assert (self);
    size_t negatives = self->count - self->positives;
    if (self->positives == 0 || negatives == 0)
        return ps_error_set (err, PS_EINVAL, "binary metrics: the AUC needs both classes, "
                             "got %zu positives and %zu negatives", self->positives, negatives);
    uint32_t *tmp = malloc (self->count * sizeof (uint32_t));
    if (!tmp)
        return ps_error_set (err, PS_ETOOBIG, "binary metrics: out of memory sorting %zu "
                             "predictions", self->count);
    s_radix_sort (self->keys, tmp, self->count);
    free (tmp);
    //  Pairs won, in halves so that a tie adds one: exact in a double up to
    //  2^53, which is 2^26 positives by 2^26 negatives; beyond that the
    //  rounding is far below what an AUC is ever read to.
    double won = 0;
    size_t below = 0;           //  negatives with a smaller probability
    for (size_t i = 0; i < self->count; ) {
        size_t pos = 0, neg = 0;
        uint32_t prob = self->keys [i] >> 1;
        for (; i < self->count && self->keys [i] >> 1 == prob; i++) {
            if (self->keys [i] & 1)
                pos++;
            else
                neg++;
        }
        won += (double) pos * (double) (2 * below + neg);
        below += neg;
    }
    *auc = won / 2 / ((double) self->positives * (double) negatives);
    return 0;
}

int
ps_binmetrics_compute (const float *labels, const float *probs, size_t n, double *logloss,
                       double *auc, ps_error_t *err)
{
    ps_binmetrics_t *metrics = ps_binmetrics_new ();
    if (!metrics)
        return ps_error_set (err, PS_ETOOBIG, "binary metrics: out of memory");
    int rc = ps_binmetrics_add (metrics, labels, probs, n, err);
    double result;
    if (rc == 0)
        rc = ps_binmetrics_auc (metrics, &result, err);
    if (rc == 0) {
        *auc = result;
        *logloss = ps_binmetrics_logloss (metrics);
    }
    ps_binmetrics_destroy (&metrics);
    return rc;
}

uint64_t
ps_binmetrics_correct (const float *labels, const float *probs, size_t n)
{
    uint64_t correct = 0;
    for (size_t i = 0; i < n; i++)
        correct += (probs [i] >= 0.5f) == (labels [i] >= 0.5f);
    return correct;
}
