//  gen_ctr: synthetic click-through-rate data in the Criteo text format
//  (or LIBSVM), drawn from a planted logistic model, for the tests and the
//  benchmarks (schemas/data.md, "The generator", gives the model).
//
//    gen_ctr --out DIR --train-rows N --test-rows M --seed S [--gzip]
//            [--cardinalities criteo|small] [--format criteo|libsvm]
//            [--interaction X]
//
//  writes DIR/train.txt and DIR/test.txt (with .gz appended under --gzip)
//  and DIR/planted.json: the planted model's AUC and log loss on each
//  split, computed with ps_binmetrics from the true probabilities, the
//  positive rates, the row counts and every parameter. The data has the
//  shape of Criteo's: 26 categorical fields whose cardinalities run from
//  a handful to millions (`criteo`, the Kaggle data set's) or to a few
//  thousand (`small`, learnable from a hundred thousand rows), ids drawn
//  from a power law per field, some fields often empty, and 13 integer
//  fields of heavy-tailed counts with empties. Everything is a pure
//  function of the seed: row r of a split is drawn from counter-based
//  draws (ps_mix.h) of its own, and a weight of the model is a hash of
//  (seed, field, rank), so no table of millions of weights is held.

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ps_binmetrics.h"
#include "ps_ctrparse.h"
#include "ps_file.h"
#include "ps_mix.h"
#include "ps_parse.h"

#define S_FIELDS   PS_CTR_CRITEO_FIELDS
#define S_DENSE    PS_CTR_CRITEO_DENSE
#define S_ZIPF     1.2          //  the exponent of each field's power law
#define S_POSITIVE 0.25         //  the positive rate the intercept is tuned to
#define S_PILOT    20000        //  rows the intercept is tuned on
#define S_DRAWS    128          //  counter-based draws per row (92 are used)

//  The Kaggle Display Advertising Challenge's per-field cardinalities (as
//  counted in DLRM's preprocessing of its train.txt), and a small setting
//  of the same shape.
static const uint32_t s_criteo_cards [S_FIELDS] = {
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
    27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572 };
static const uint32_t s_small_cards [S_FIELDS] = {
    300, 200, 3000, 2000, 150, 24, 1200, 600, 3, 2500, 1500, 3000, 1800,
    27, 1500, 2800, 10, 1600, 1200, 4, 2700, 18, 15, 2200, 105, 1400 };

//  How often each categorical and integer field is empty, roughly as in
//  the Kaggle data.
static const double s_cat_empty [S_FIELDS] = {
    0, 0, 0.03, 0.03, 0, 0.12, 0, 0, 0, 0, 0, 0.03, 0,
    0, 0, 0.03, 0, 0, 0.44, 0.44, 0.03, 0, 0, 0.76, 0.04, 0.44 };
static const double s_int_empty [S_DENSE] = {
    0.45, 0, 0.21, 0.22, 0.03, 0.22, 0.04, 0, 0.04, 0.45, 0.04, 0.77, 0.22 };
//  The log-normal counts: mean and spread of log (1 + x).
static const double s_int_mu [S_DENSE] = {
    0.8, 2.0, 1.7, 1.6, 7.5, 3.5, 1.6, 2.2, 3.8, 0.4, 1.0, 0.4, 1.6 };
static const double s_int_sd [S_DENSE] = {
    1.0, 1.6, 1.3, 0.9, 2.2, 1.7, 1.3, 1.1, 1.2, 0.5, 0.8, 0.6, 1.0 };

typedef struct {
    const char *out;
    uint64_t train_rows, test_rows, seed;
    bool gzip;
    bool small;
    ps_ctrformat_t format;
    double interaction;
} s_opts_t;

typedef struct {
    const uint32_t *cards;
    double sigma [S_FIELDS];    //  spread of each field's weights
    double beta [S_DENSE];      //  weights of the log1p integer features
    double top [S_FIELDS];      //  (card + 1)^(1 - S_ZIPF), for s_zipf
    double intercept;
    uint64_t key;               //  ps_mix64 (seed)
} s_model_t;

//  One drawn row: what is written, and the true probability of a 1.
typedef struct {
    int label;
    int64_t ints [S_DENSE];     //  -2: empty
    bool empty [S_FIELDS];
    uint64_t rank [S_FIELDS];   //  0 is the most frequent value
    uint32_t value [S_FIELDS];  //  the hex value written for the rank
    double prob;
} s_row_t;

//  A uniform double in (0, 1) from 64 random bits.
static double
s_unit (uint64_t bits)
{
    return ((double) (bits >> 11) + 0.5) / 9007199254740992.0;
}

//  A standard normal from two draws (Box-Muller).
static double
s_normal (uint64_t a, uint64_t b)
{
    return sqrt (-2 * log (s_unit (a))) * cos (6.283185307179586 * s_unit (b));
}

//  A normal that is a pure function of (key, a, b).
static double
s_hashed_normal (uint64_t key, uint64_t a, uint64_t b)
{
    uint64_t h = ps_mix64 (key ^ ps_mix64 (a * 0x100000001b3ULL + b));
    return s_normal (ps_mix64 (h + 1), ps_mix64 (h + 2));
}

//  The planted weight of rank r of field f (an empty field has rank
//  UINT64_MAX): frequent values carry most of the signal, as in real data,
//  which is what makes a few epochs on a modest sample learnable.
static double
s_weight (const s_model_t *model, int f, uint64_t rank)
{
    double z = s_hashed_normal (model->key, (uint64_t) f + 1, rank);
    double fade = rank == UINT64_MAX ? 1.0 : 1.0 / (1.0 + (double) rank / 10.0);
    return model->sigma [f] * z * fade;
}

//  Rank r in [0, card) from a power law of exponent S_ZIPF, by inverting
//  the continuous law's distribution function on [1, card + 1); top is
//  (card + 1)^(1 - S_ZIPF).
static uint64_t
s_zipf (double u, uint32_t card, double top)
{
    double x = pow (1 + u * (top - 1), 1 / (1 - S_ZIPF));
    uint64_t rank = (uint64_t) x - 1;
    return rank < card ? rank : card - 1;
}

static double
s_sigmoid (double x)
{
    return 1 / (1 + exp (-x));
}

//  Row r of split (0 train, 1 test, 2 the intercept's pilot), without the
//  intercept in prob when raw; the label is drawn only when not raw.
static void
s_draw (const s_model_t *model, const s_opts_t *opts, int split, uint64_t r, bool raw,
        s_row_t *row)
{
    uint64_t key = ps_mix64 (model->key + (uint64_t) split + 1);
    uint64_t counter = r * S_DRAWS;
    double logit = raw ? 0 : model->intercept;
    for (int j = 0; j < S_DENSE; j++) {
        double u = s_unit (ps_mix_draw (key, counter++));
        uint64_t a = ps_mix_draw (key, counter++);
        double z = s_normal (a, ps_mix_draw (key, counter++));
        if (u < s_int_empty [j])
            row->ints [j] = -2;
        else
        if (j == 1 && u > 0.98)
            row->ints [j] = -1;         //  Kaggle's I2 holds a few negatives
        else
            row->ints [j] = (int64_t) fmin (exp (s_int_mu [j] + s_int_sd [j] * z) - 1, 1e9);
        logit += model->beta [j] * log1p ((double) (row->ints [j] > 0 ? row->ints [j] : 0));
    }
    for (int f = 0; f < S_FIELDS; f++) {
        double e = s_unit (ps_mix_draw (key, counter++));
        double u = s_unit (ps_mix_draw (key, counter++));
        row->empty [f] = e < s_cat_empty [f];
        row->rank [f] = row->empty [f] ? UINT64_MAX : s_zipf (u, model->cards [f], model->top [f]);
        row->value [f] = (uint32_t) ps_mix64 (model->key ^ ((uint64_t) f << 40) ^ row->rank [f]);
        logit += s_weight (model, f, row->rank [f]);
    }
    //  The pairwise term: a product of two fields' hashed factors, which
    //  no model of single fields can represent.
    if (opts->interaction > 0) {
        static const int pairs [3][2] = { { 5, 8 }, { 13, 19 }, { 0, 16 } };
        for (int p = 0; p < 3; p++) {
            int a = pairs [p][0], b = pairs [p][1];
            double va = s_hashed_normal (model->key, 100 + (uint64_t) a, row->rank [a]);
            double vb = s_hashed_normal (model->key, 100 + (uint64_t) b, row->rank [b]);
            logit += opts->interaction * va * vb;
        }
    }
    row->prob = raw ? logit : s_sigmoid (logit);
    if (!raw)
        row->label = s_unit (ps_mix_draw (key, counter++)) < row->prob;
}

//  Tune the intercept so that the mean probability over a pilot sample is
//  S_POSITIVE, by bisection.
static void
s_tune_intercept (s_model_t *model, const s_opts_t *opts)
{
    double *logits = malloc (S_PILOT * sizeof (double));
    if (!logits) {
        fprintf (stderr, "gen_ctr: out of memory\n");
        exit (1);
    }
    s_row_t row;
    for (uint64_t r = 0; r < S_PILOT; r++) {
        s_draw (model, opts, 2, r, true, &row);
        logits [r] = row.prob;
    }
    double lo = -20, hi = 20;
    for (int it = 0; it < 60; it++) {
        double mid = (lo + hi) / 2, sum = 0;
        for (int r = 0; r < S_PILOT; r++)
            sum += s_sigmoid (logits [r] + mid);
        if (sum / S_PILOT < S_POSITIVE)
            lo = mid;
        else
            hi = mid;
    }
    model->intercept = (lo + hi) / 2;
    free (logits);
}

static void
s_model_init (s_model_t *model, const s_opts_t *opts)
{
    model->cards = opts->small ? s_small_cards : s_criteo_cards;
    model->key = ps_mix64 (opts->seed);
    for (int f = 0; f < S_FIELDS; f++) {
        model->sigma [f] = 1.0 / (1.0 + log10 ((double) model->cards [f]) / 2);
        model->top [f] = pow ((double) model->cards [f] + 1, 1 - S_ZIPF);
    }
    for (int j = 0; j < S_DENSE; j++)
        model->beta [j] = 0.15 * s_hashed_normal (model->key, 50, (uint64_t) j);
    s_tune_intercept (model, opts);
}

//  Append the decimal digits of v at p; returns the new end.
static char *
s_put_decimal (char *p, uint64_t v)
{
    char digits [20];
    int n = 0;
    do
        digits [n++] = (char) ('0' + v % 10);
    while ((v /= 10) > 0);
    while (n > 0)
        *p++ = digits [--n];
    return p;
}

//  Format one row as a line of opts' format into buf, which has room for
//  the longest; returns its length. Criteo lines are formatted by hand:
//  snprintf per field would make the generator several times slower.
static size_t
s_format (const s_row_t *row, const s_opts_t *opts, char *buf, size_t size)
{
    static const char hex [] = "0123456789abcdef";
    char *p = buf;
    *p++ = (char) ('0' + row->label);
    if (opts->format == PS_CTR_CRITEO) {
        for (int j = 0; j < S_DENSE; j++) {
            *p++ = '\t';
            if (row->ints [j] == -1) {
                *p++ = '-';
                *p++ = '1';
            }
            else
            if (row->ints [j] >= 0)
                p = s_put_decimal (p, (uint64_t) row->ints [j]);
        }
        for (int f = 0; f < S_FIELDS; f++) {
            *p++ = '\t';
            if (!row->empty [f])
                for (int shift = 28; shift >= 0; shift -= 4)
                    *p++ = hex [(row->value [f] >> shift) & 0xf];
        }
        *p++ = '\n';
        return (size_t) (p - buf);
    }
    //  LIBSVM: the integer features as indices 0..12 with log1p values,
    //  then each categorical value's Criteo id with value 1.
    size_t at = 1;
    for (int j = 0; j < S_DENSE; j++)
        if (row->ints [j] > 0)
            at += (size_t) snprintf (buf + at, size - at, " %d:%.6g", j,
                                     log1p ((double) row->ints [j]));
    for (int f = 0; f < S_FIELDS; f++) {
        uint64_t value = row->empty [f] ? PS_CTR_CRITEO_EMPTY : row->value [f];
        at += (size_t) snprintf (buf + at, size - at, " %llu:1", (unsigned long long)
                                 ps_ctrparse_criteo_id ((unsigned) f, value));
    }
    at += (size_t) snprintf (buf + at, size - at, "\n");
    return at;
}

//  Write `rows` rows of split to path; add their truths to metrics.
static int
s_write_split (const s_model_t *model, const s_opts_t *opts, int split, uint64_t rows,
               const char *path, ps_binmetrics_t *metrics)
{
    gzFile gz = NULL;
    FILE *plain = NULL;
    if (opts->gzip) {
        gz = gzopen (path, "wb1");
        if (gz)
            gzbuffer (gz, 1 << 20);
    }
    else
        plain = fopen (path, "wb");
    if (!gz && !plain) {
        fprintf (stderr, "gen_ctr: cannot create %s\n", path);
        return -1;
    }
    enum { CHUNK = 4096 };
    static char text [CHUNK * 1024];      //  a line is at most about 810 bytes
    float labels [CHUNK], probs [CHUNK];
    bool failed = false;
    for (uint64_t first = 0; first < rows && !failed; first += CHUNK) {
        size_t n = rows - first < CHUNK ? (size_t) (rows - first) : CHUNK, len = 0;
        for (size_t i = 0; i < n; i++) {
            s_row_t row;
            s_draw (model, opts, split, first + i, false, &row);
            len += s_format (&row, opts, text + len, sizeof text - len);
            labels [i] = (float) row.label;
            probs [i] = (float) row.prob;
        }
        ps_error_t err = { 0 };
        if (ps_binmetrics_add (metrics, labels, probs, n, &err)) {
            fprintf (stderr, "gen_ctr: %s\n", err.msg);
            failed = true;
        }
        else
        if (gz ? gzwrite (gz, text, (unsigned) len) != (int) len
               : fwrite (text, 1, len, plain) != len)
            failed = true;
    }
    if (gz ? gzclose (gz) != Z_OK : fclose (plain) != 0)
        failed = true;
    if (failed)
        fprintf (stderr, "gen_ctr: writing %s failed\n", path);
    return failed ? -1 : 0;
}

static void
s_usage (const char *why)
{
    fprintf (stderr, "gen_ctr: %s\nusage: gen_ctr --out DIR --train-rows N --test-rows M "
             "--seed S [--gzip] [--cardinalities criteo|small] [--format criteo|libsvm] "
             "[--interaction X]\n", why);
    exit (2);
}

static void
s_parse_args (int argc, char **argv, s_opts_t *opts)
{
    *opts = (s_opts_t) { .format = PS_CTR_CRITEO };
    bool rows = false, test = false, seed = false;
    ps_error_t err = { 0 };
    for (int i = 1; i < argc; i++) {
        const char *arg = argv [i];
        if (strcmp (arg, "--gzip") == 0) {
            opts->gzip = true;
            continue;
        }
        if (i + 1 == argc)
            s_usage ("an option without its value, or an unknown option");
        const char *value = argv [++i];
        int rc = 0;
        if (strcmp (arg, "--out") == 0)
            opts->out = value;
        else
        if (strcmp (arg, "--train-rows") == 0)
            rc = ps_parse_uint ("--train-rows", value, 1, UINT64_MAX / S_DRAWS,
                                &opts->train_rows, &err), rows = true;
        else
        if (strcmp (arg, "--test-rows") == 0)
            rc = ps_parse_uint ("--test-rows", value, 1, UINT64_MAX / S_DRAWS,
                                &opts->test_rows, &err), test = true;
        else
        if (strcmp (arg, "--seed") == 0)
            rc = ps_parse_uint ("--seed", value, 0, UINT64_MAX, &opts->seed, &err), seed = true;
        else
        if (strcmp (arg, "--cardinalities") == 0) {
            if (strcmp (value, "criteo") != 0 && strcmp (value, "small") != 0)
                s_usage ("--cardinalities takes criteo or small");
            opts->small = strcmp (value, "small") == 0;
        }
        else
        if (strcmp (arg, "--format") == 0)
            rc = ps_ctrformat_parse (value, &opts->format, &err);
        else
        if (strcmp (arg, "--interaction") == 0)
            rc = ps_parse_double ("--interaction", value, 0, false, 10, &opts->interaction,
                                  &err);
        else
            s_usage ("unknown option");
        if (rc)
            s_usage (err.msg);
    }
    if (!opts->out || !rows || !test || !seed)
        s_usage ("--out, --train-rows, --test-rows and --seed are required");
}

int
main (int argc, char **argv)
{
    s_opts_t opts;
    s_parse_args (argc, argv, &opts);
    ps_error_t err = { 0 };
    if (ps_file_mkdirs (opts.out, &err)) {
        fprintf (stderr, "gen_ctr: %s\n", err.msg);
        return 1;
    }
    s_model_t model;
    s_model_init (&model, &opts);
    const char *names [2] = { "train", "test" };
    uint64_t counts [2] = { opts.train_rows, opts.test_rows };
    json_t *splits = json_object ();
    for (int split = 0; split < 2; split++) {
        char path [4096];
        snprintf (path, sizeof path, "%s/%s.txt%s", opts.out, names [split],
                  opts.gzip ? ".gz" : "");
        ps_binmetrics_t *metrics = ps_binmetrics_new ();
        if (!metrics || s_write_split (&model, &opts, split, counts [split], path, metrics))
            return 1;
        double auc = NAN;
        if (ps_binmetrics_auc (metrics, &auc, &err))
            fprintf (stderr, "gen_ctr: %s: %s\n", path, err.msg);
        json_object_set_new (splits, names [split], json_pack (
            "{s:s, s:I, s:f, s:f, s:f}", "file", path, "rows", (json_int_t) counts [split],
            "positive_rate", (double) ps_binmetrics_positives (metrics) / (double) counts [split],
            "auc", isnan (auc) ? 0.5 : auc, "logloss", ps_binmetrics_logloss (metrics)));
        ps_binmetrics_destroy (&metrics);
    }
    json_t *cards = json_array ();
    for (int f = 0; f < S_FIELDS; f++)
        json_array_append_new (cards, json_integer (model.cards [f]));
    json_t *doc = json_pack ("{s:s, s:s, s:b, s:I, s:o, s:{s:f, s:f, s:f, s:f, s:o}}",
        "format", ps_ctrformat_name (opts.format),
        "cardinalities", opts.small ? "small" : "criteo", "gzip", opts.gzip,
        "seed", (json_int_t) opts.seed, "splits", splits,
        "model", "intercept", model.intercept, "zipf_exponent", S_ZIPF,
        "interaction", opts.interaction, "target_positive_rate", S_POSITIVE,
        "field_cardinalities", cards);
    char path [4096];
    snprintf (path, sizeof path, "%s/planted.json", opts.out);
    if (!doc || json_dump_file (doc, path, JSON_INDENT (2)) != 0) {
        fprintf (stderr, "gen_ctr: cannot write %s\n", path);
        return 1;
    }
    json_decref (doc);
    return 0;
}
