//  Unit tests for data sets (common/model/ps_dataset.c): the real Fashion-MNIST
//  splits loaded and checked against the raw files; the per-epoch
//  permutation against an independent implementation of the formula at the
//  top of ps_dataset.c, for being a permutation, for its dependence on seed
//  and epoch, and for uniformity; batches that cover an epoch exactly once;
//  and small hand-made directories with a missing file, mismatched counts,
//  a bad label or a bad rank; and probing a split's sizes from the headers
//  alone, on the real files and on hand-made ones with a truncated header.
//  The real files come from $PS_DATA_DIR (by default Debian's
//  dataset-fashion-mnist directory); the cases that need them run as a
//  meson test of their own, test_dataset_real (`test_dataset real`), which
//  is counted as skipped without them (harness_group). The hand-made ones
//  work in a mkdtemp directory under /tmp, removed afterwards.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "harness.h"
#include "harness_case.h"
#include "ps_dataset.h"
#include "ps_idx.h"
#include "ps_mix.h"

#define S_TRAIN_COUNT  60000
#define S_TEST_COUNT   10000
#define S_PIXELS       (28 * 28)

//  The real splits, loaded once for all the cases of the real-data group.
static struct {
    const char *dir;
    ps_dataset_t *train;
    ps_dataset_t *test;
} s_real;

static int
s_group_setup (void **state)
{
    (void) state;
    s_real.dir = harness_data_dir ();
    ps_error_t err = { 0 };
    s_real.train = ps_dataset_load (s_real.dir, PS_SPLIT_TRAIN, 0, &err);
    if (!s_real.train) {
        print_message ("cannot load the train split: %s\n", err.msg);
        return -1;
    }
    s_real.test = ps_dataset_load (s_real.dir, PS_SPLIT_TEST, 0, &err);
    if (!s_real.test) {
        print_message ("cannot load the test split: %s\n", err.msg);
        ps_dataset_destroy (&s_real.train);
        return -1;
    }
    return 0;
}

static int
s_group_teardown (void **state)
{
    (void) state;
    ps_dataset_destroy (&s_real.train);
    ps_dataset_destroy (&s_real.test);
    return 0;
}

typedef struct {
    char dir [HARNESS_DIR_SIZE];
} fixture_t;

static int
s_setup (void **state)
{
    return harness_dir_setup (state, sizeof (fixture_t));
}

//  The permutation as ps_dataset.c documents it, written out again here
//  from the description alone: key from seed and epoch, Fisher-Yates from
//  the top, j from the high half of draw * (i + 1) with Lemire's rejection.
static void
s_reference_permutation (size_t count, uint64_t seed, uint64_t epoch, uint32_t *perm)
{
    for (size_t i = 0; i < count; i++)
        perm [i] = (uint32_t) i;
    uint64_t key = ps_mix64 (seed ^ ps_mix64 (epoch + 0x0073687566666c65ULL));
    uint64_t counter = 0;
    for (size_t i = count - 1; i > 0; i--) {
        uint64_t bound = i + 1;
        uint64_t limit = (0 - bound) % bound;
        unsigned __int128 product;
        do
            product = (unsigned __int128) ps_mix_draw (key, counter++) * bound;
        while ((uint64_t) product < limit);
        size_t j = (size_t) (product >> 64);
        uint32_t swap = perm [i];
        perm [i] = perm [j];
        perm [j] = swap;
    }
}

//  perm holds every index in [0, count) exactly once.
static void
s_assert_permutation (const uint32_t *perm, size_t count)
{
    uint8_t *seen = calloc (count, 1);
    assert_non_null (seen);
    for (size_t i = 0; i < count; i++) {
        if (perm [i] >= count)
            fail_msg ("perm [%zu] = %u, past %zu", i, perm [i], count);
        if (seen [perm [i]]++)
            fail_msg ("index %u appears twice", perm [i]);
    }
    free (seen);
}

//  Write an IDX file of unsigned bytes, gzipped when the name ends in .gz.
static void
s_write_idx (const char *dir, const char *name, const uint32_t *dims, int rank,
             const uint8_t *data)
{
    char path [512];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    uint8_t header [4 + 4 * PS_IDX_MAX_RANK] = { 0, 0, 0x08, (uint8_t) rank };
    size_t count = 1;
    for (int i = 0; i < rank; i++) {
        for (int k = 0; k < 4; k++)
            header [4 + 4 * i + k] = (uint8_t) (dims [i] >> (24 - 8 * k));
        count *= dims [i];
    }
    size_t header_len = 4 + 4 * (size_t) rank;
    if (strlen (name) > 3 && strcmp (name + strlen (name) - 3, ".gz") == 0) {
        gzFile file = gzopen (path, "wb");
        assert_non_null (file);
        assert_int_equal (gzwrite (file, header, (unsigned) header_len), (int) header_len);
        assert_int_equal (gzwrite (file, data, (unsigned) count), (int) count);
        assert_int_equal (gzclose (file), Z_OK);
    }
    else {
        FILE *file = fopen (path, "wb");
        assert_non_null (file);
        assert_int_equal (fwrite (header, 1, header_len, file), header_len);
        assert_int_equal (fwrite (data, 1, count, file), count);
        assert_int_equal (fclose (file), 0);
    }
}

//  Loading dir's train split fails with code and a message that names
//  `file` (in dir) and contains `expect`.
static void
s_assert_load_fails (const char *dir, int code, const char *file, const char *expect)
{
    ps_error_t err = { 0 };
    ps_dataset_t *data = ps_dataset_load (dir, PS_SPLIT_TRAIN, 0, &err);
    if (data) {
        ps_dataset_destroy (&data);
        fail_msg ("loading %s succeeded, expected %s", dir, ps_error_name (code));
    }
    assert_int_equal (err.code, code);
    char path [512];
    snprintf (path, sizeof path, "%s/%s", dir, file);
    if (!strstr (err.msg, path))
        fail_msg ("message \"%s\" does not name %s", err.msg, path);
    if (expect && !strstr (err.msg, expect))
        fail_msg ("message \"%s\" lacks \"%s\"", err.msg, expect);
}

static void
test_train_split (void **state)
{
    (void) state;
    ps_dataset_t *train = s_real.train;
    assert_int_equal (ps_dataset_count (train), S_TRAIN_COUNT);
    assert_int_equal (ps_dataset_rows (train), 28);
    assert_int_equal (ps_dataset_cols (train), 28);
    assert_int_equal (ps_dataset_classes (train), 10);
    //  Fashion-MNIST's training set has 6000 examples of each class.
    size_t counts [10] = { 0 };
    for (size_t i = 0; i < S_TRAIN_COUNT; i++) {
        uint8_t label = ps_dataset_label (train, i);
        assert_true (label < 10);
        counts [label]++;
    }
    for (int c = 0; c < 10; c++)
        assert_int_equal (counts [c], 6000);
}

//  The test split against its files read independently, pixel by pixel.
static void
test_test_split (void **state)
{
    (void) state;
    ps_dataset_t *test = s_real.test;
    assert_int_equal (ps_dataset_count (test), S_TEST_COUNT);
    assert_int_equal (ps_dataset_rows (test), 28);
    assert_int_equal (ps_dataset_cols (test), 28);

    char path [512];
    snprintf (path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", s_real.dir);
    ps_idx_t images;
    assert_int_equal (ps_idx_read (path, &images, NULL), PS_OK);
    snprintf (path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", s_real.dir);
    ps_idx_t labels;
    assert_int_equal (ps_idx_read (path, &labels, NULL), PS_OK);
    assert_int_equal (images.count, (size_t) S_TEST_COUNT * S_PIXELS);

    float low = 1.0f, high = 0.0f;
    for (size_t i = 0; i < S_TEST_COUNT; i++) {
        float image [S_PIXELS];
        ps_dataset_image (test, i, image);
        for (size_t p = 0; p < S_PIXELS; p++) {
            float expect = (float) images.data [i * S_PIXELS + p] / 255.0f;
            if (image [p] != expect)
                fail_msg ("image %zu pixel %zu is %g, expected %g", i, p, image [p], expect);
            low = image [p] < low ? image [p] : low;
            high = image [p] > high ? image [p] : high;
        }
        assert_int_equal (ps_dataset_label (test, i), labels.data [i]);
    }
    assert_true (low == 0.0f);
    assert_true (high == 1.0f);
    ps_idx_free (&images);
    ps_idx_free (&labels);
}

static void
test_limit (void **state)
{
    (void) state;
    size_t limits [] = { 1, 100, S_TEST_COUNT, S_TEST_COUNT + 1, 1000000 };
    for (size_t i = 0; i < sizeof limits / sizeof limits [0]; i++) {
        ps_error_t err = { 0 };
        ps_dataset_t *data = ps_dataset_load (s_real.dir, PS_SPLIT_TEST, limits [i], &err);
        if (!data)
            fail_msg ("load failed: %s", err.msg);
        size_t count = limits [i] < S_TEST_COUNT ? limits [i] : S_TEST_COUNT;
        assert_int_equal (ps_dataset_count (data), count);
        for (size_t k = 0; k < count; k++) {
            float mine [S_PIXELS], whole [S_PIXELS];
            ps_dataset_image (data, k, mine);
            ps_dataset_image (s_real.test, k, whole);
            assert_memory_equal (mine, whole, sizeof mine);
            assert_int_equal (ps_dataset_label (data, k), ps_dataset_label (s_real.test, k));
        }
        ps_dataset_destroy (&data);
        assert_null (data);
        //  A second destroy is harmless.
        ps_dataset_destroy (&data);
    }
}

static void
test_permutation (void **state)
{
    (void) state;
    size_t count = S_TRAIN_COUNT;
    uint32_t *perm = malloc (count * sizeof (uint32_t));
    uint32_t *other = malloc (count * sizeof (uint32_t));
    assert_non_null (perm);
    assert_non_null (other);
    const uint64_t seeds [] = { 0, 1, 42, 0xdeadbeefcafef00dULL };
    const uint64_t epochs [] = { 0, 1, 7, UINT64_MAX };
    for (size_t s = 0; s < 4; s++)
        for (size_t e = 0; e < 4; e++) {
            ps_dataset_permutation (s_real.train, seeds [s], epochs [e], perm);
            s_assert_permutation (perm, count);
            //  Bitwise what the documented formula gives.
            s_reference_permutation (count, seeds [s], epochs [e], other);
            assert_memory_equal (perm, other, count * sizeof (uint32_t));
            //  The same (seed, epoch) again gives the same order.
            ps_dataset_permutation (s_real.train, seeds [s], epochs [e], other);
            assert_memory_equal (perm, other, count * sizeof (uint32_t));
            //  Well shuffled: few elements stay in place (1 expected).
            size_t fixed = 0;
            for (size_t i = 0; i < count; i++)
                fixed += perm [i] == i;
            assert_true (fixed < 20);
        }
    //  Pinned values, so that a change to the generator in ps_mix.h, which
    //  the reference above shares, is noticed: other implementations of
    //  the shuffle depend on these.
    ps_dataset_permutation (s_real.train, 1, 0, perm);
    const uint32_t pinned [] = { 1366, 32406, 30444, 52986, 51214, 14970 };
    assert_memory_equal (perm, pinned, sizeof pinned);
    assert_int_equal (perm [count - 1], 37155);

    //  Another epoch, or another seed, gives another order.
    ps_dataset_permutation (s_real.train, 42, 3, perm);
    ps_dataset_permutation (s_real.train, 42, 4, other);
    assert_memory_not_equal (perm, other, count * sizeof (uint32_t));
    ps_dataset_permutation (s_real.train, 43, 3, other);
    assert_memory_not_equal (perm, other, count * sizeof (uint32_t));
    //  Seed and epoch do not simply trade places.
    ps_dataset_permutation (s_real.train, 3, 42, other);
    assert_memory_not_equal (perm, other, count * sizeof (uint32_t));
    free (perm);
    free (other);
}

//  With three examples each of the six orders should come up about as
//  often as the others, over many seeds.
static void
test_permutation_uniform (void **state)
{
    (void) state;
    ps_dataset_t *three = ps_dataset_load (s_real.dir, PS_SPLIT_TEST, 3, NULL);
    assert_non_null (three);
    enum { TRIALS = 60000 };
    size_t counts [3][3][3] = { { { 0 } } };
    for (uint64_t seed = 0; seed < TRIALS; seed++) {
        uint32_t perm [3];
        ps_dataset_permutation (three, seed, seed % 5, perm);
        s_assert_permutation (perm, 3);
        counts [perm [0]][perm [1]][perm [2]]++;
    }
    //  Each count is binomial (60000, 1/6): mean 10000, deviation 91, so
    //  600 is over six deviations.
    size_t orders = 0;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 3; c++)
                if (counts [a][b][c]) {
                    orders++;
                    if (counts [a][b][c] < 9400 || counts [a][b][c] > 10600)
                        fail_msg ("order %d%d%d came %zu times in %d", a, b, c,
                                  counts [a][b][c], TRIALS);
                }
    assert_int_equal (orders, 6);

    //  A data set of one example has one order.
    ps_dataset_t *one = ps_dataset_load (s_real.dir, PS_SPLIT_TEST, 1, NULL);
    assert_non_null (one);
    uint32_t perm [1] = { 99 };
    ps_dataset_permutation (one, 5, 6, perm);
    assert_int_equal (perm [0], 0);
    ps_dataset_destroy (&one);
    ps_dataset_destroy (&three);
}

//  Walk epoch `epoch` in batches of 64: each example exactly once, each
//  batch holding the examples of its slice of the permutation.
static void
s_walk_epoch (ps_dataset_t *train, uint64_t seed, uint64_t epoch, const uint32_t *perm,
              float *x, uint8_t *labels)
{
    const int batch = 64;
    uint8_t *seen = calloc (S_TRAIN_COUNT, 1);
    assert_non_null (seen);
    for (size_t b = 0; b < 938; b++) {
        ps_error_t err = { 0 };
        int got = ps_dataset_batch (train, seed, epoch, b, batch, x, labels, &err);
        if (got < 0)
            fail_msg ("batch %zu: %s", b, err.msg);
        assert_int_equal (got, b < 937 ? 64 : 32);
        for (int k = 0; k < got; k++) {
            uint32_t i = perm [b * batch + (size_t) k];
            assert_int_equal (seen [i]++, 0);
            assert_int_equal (labels [k], ps_dataset_label (train, i));
            float image [S_PIXELS];
            ps_dataset_image (train, i, image);
            assert_memory_equal (x + (size_t) k * S_PIXELS, image, sizeof image);
        }
    }
    for (size_t i = 0; i < S_TRAIN_COUNT; i++)
        assert_int_equal (seen [i], 1);
    free (seen);
}

static void
test_batches (void **state)
{
    (void) state;
    ps_dataset_t *train = s_real.train;
    assert_int_equal (ps_dataset_batches (train, 64), 938);
    assert_int_equal (ps_dataset_batches (train, 1), S_TRAIN_COUNT);
    assert_int_equal (ps_dataset_batches (train, 60000), 1);
    assert_int_equal (ps_dataset_batches (train, 60001), 1);
    assert_int_equal (ps_dataset_batches (train, 7), 8572);
    assert_int_equal (ps_dataset_batches (train, 0), 0);

    float *x = malloc (64 * S_PIXELS * sizeof (float));
    uint8_t labels [64];
    uint32_t *perm = malloc (S_TRAIN_COUNT * sizeof (uint32_t));
    uint32_t *perm_next = malloc (S_TRAIN_COUNT * sizeof (uint32_t));
    assert_non_null (x);
    assert_non_null (perm);
    assert_non_null (perm_next);
    ps_dataset_permutation (train, 7, 2, perm);
    ps_dataset_permutation (train, 7, 3, perm_next);
    s_walk_epoch (train, 7, 2, perm, x, labels);
    //  Another epoch recomputes the order, and going back gives the first.
    s_walk_epoch (train, 7, 3, perm_next, x, labels);
    s_walk_epoch (train, 7, 2, perm, x, labels);

    ps_error_t err = { 0 };
    assert_int_equal (ps_dataset_batch (train, 7, 2, 938, 64, x, labels, &err), PS_EINVAL);
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "938"));
    assert_int_equal (ps_dataset_batch (train, 7, 2, SIZE_MAX, 64, x, labels, &err), PS_EINVAL);
    assert_int_equal (ps_dataset_batch (train, 7, 2, 0, 0, x, labels, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "batch size 0"));
    assert_int_equal (ps_dataset_batch (train, 7, 2, 0, -64, x, labels, &err), PS_EINVAL);
    //  The whole set in one batch.
    float *all = malloc ((size_t) S_TRAIN_COUNT * S_PIXELS * sizeof (float));
    uint8_t *all_labels = malloc (S_TRAIN_COUNT);
    assert_non_null (all);
    assert_non_null (all_labels);
    assert_int_equal (ps_dataset_batch (train, 7, 2, 0, 100000, all, all_labels, NULL),
                      S_TRAIN_COUNT);
    for (size_t k = 0; k < S_TRAIN_COUNT; k++)
        assert_int_equal (all_labels [k], ps_dataset_label (train, perm [k]));
    free (all);
    free (all_labels);
    free (perm);
    free (perm_next);
    free (x);
}

static void
test_slice (void **state)
{
    (void) state;
    ps_dataset_t *test = s_real.test;
    float *x = malloc (64 * S_PIXELS * sizeof (float));
    uint8_t labels [64];
    assert_non_null (x);
    size_t firsts [] = { 0, 1234, S_TEST_COUNT - 64, S_TEST_COUNT - 10, S_TEST_COUNT - 1 };
    for (size_t i = 0; i < sizeof firsts / sizeof firsts [0]; i++) {
        size_t first = firsts [i];
        int expect = S_TEST_COUNT - first < 64 ? (int) (S_TEST_COUNT - first) : 64;
        assert_int_equal (ps_dataset_slice (test, first, 64, x, labels), expect);
        for (int k = 0; k < expect; k++) {
            float image [S_PIXELS];
            ps_dataset_image (test, first + (size_t) k, image);
            assert_memory_equal (x + (size_t) k * S_PIXELS, image, sizeof image);
            assert_int_equal (labels [k], ps_dataset_label (test, first + (size_t) k));
        }
    }
    assert_int_equal (ps_dataset_slice (test, S_TEST_COUNT, 64, x, labels), 0);
    assert_int_equal (ps_dataset_slice (test, S_TEST_COUNT + 5, 64, x, labels), 0);
    assert_int_equal (ps_dataset_slice (test, 0, 0, x, labels), 0);
    assert_int_equal (ps_dataset_slice (test, 0, -1, x, labels), PS_EINVAL);
    free (x);
}

//  A small data set in raw files, then with gzipped labels beside the raw
//  ones, which are preferred.
static void
test_small_files (void **state)
{
    fixture_t *fx = *state;
    const uint32_t image_dims [] = { 3, 2, 2 };
    const uint8_t pixels [12] = { 0, 255, 1, 2, 3, 4, 5, 6, 7, 8, 9, 128 };
    const uint32_t label_dims [] = { 3 };
    s_write_idx (fx->dir, "train-images-idx3-ubyte", image_dims, 3, pixels);
    s_write_idx (fx->dir, "train-labels-idx1-ubyte", label_dims, 1, (const uint8_t []) { 4, 5, 6 });
    ps_error_t err = { 0 };
    ps_dataset_t *data = ps_dataset_load (fx->dir, PS_SPLIT_TRAIN, 0, &err);
    if (!data)
        fail_msg ("load failed: %s", err.msg);
    assert_int_equal (ps_dataset_count (data), 3);
    assert_int_equal (ps_dataset_rows (data), 2);
    assert_int_equal (ps_dataset_cols (data), 2);
    float image [4];
    for (size_t i = 0; i < 3; i++) {
        ps_dataset_image (data, i, image);
        for (size_t p = 0; p < 4; p++)
            assert_true (image [p] == (float) pixels [i * 4 + p] / 255.0f);
    }
    ps_dataset_image (data, 0, image);
    assert_true (image [1] == 1.0f);
    assert_int_equal (ps_dataset_label (data, 2), 6);
    ps_dataset_destroy (&data);

    s_write_idx (fx->dir, "train-labels-idx1-ubyte.gz", label_dims, 1,
                 (const uint8_t []) { 1, 2, 3 });
    data = ps_dataset_load (fx->dir, PS_SPLIT_TRAIN, 2, &err);
    if (!data)
        fail_msg ("load failed: %s", err.msg);
    assert_int_equal (ps_dataset_count (data), 2);
    assert_int_equal (ps_dataset_label (data, 0), 1);
    assert_int_equal (ps_dataset_label (data, 1), 2);
    ps_dataset_destroy (&data);
}

static void
test_missing_file (void **state)
{
    fixture_t *fx = *state;
    s_assert_load_fails (fx->dir, PS_ENOTFOUND, "train-images-idx3-ubyte(.gz)", "not found");
    const uint32_t image_dims [] = { 2, 1, 1 };
    s_write_idx (fx->dir, "train-images-idx3-ubyte.gz", image_dims, 3, (const uint8_t []) { 1, 2 });
    s_assert_load_fails (fx->dir, PS_ENOTFOUND, "train-labels-idx1-ubyte(.gz)", "not found");
    //  The other split's files are not these.
    const uint32_t label_dims [] = { 2 };
    s_write_idx (fx->dir, "train-labels-idx1-ubyte", label_dims, 1, (const uint8_t []) { 1, 2 });
    ps_error_t err = { 0 };
    ps_dataset_t *data = ps_dataset_load (fx->dir, PS_SPLIT_TEST, 0, &err);
    assert_null (data);
    assert_int_equal (err.code, PS_ENOTFOUND);
    assert_non_null (strstr (err.msg, "t10k-images-idx3-ubyte"));
    //  A damaged file is reported by the IDX reader, naming it.
    char path [512];
    snprintf (path, sizeof path, "%s/train-images-idx3-ubyte.gz", fx->dir);
    FILE *file = fopen (path, "wb");
    assert_non_null (file);
    assert_int_equal (fwrite ("\x1f\x8b\x08", 1, 3, file), 3);
    assert_int_equal (fclose (file), 0);
    s_assert_load_fails (fx->dir, PS_ECORRUPT, "train-images-idx3-ubyte.gz", NULL);
}

static void
test_inconsistent_files (void **state)
{
    fixture_t *fx = *state;
    const uint8_t bytes [64] = { 0 };
    const uint32_t image_dims [] = { 3, 2, 2 };
    s_write_idx (fx->dir, "train-images-idx3-ubyte", image_dims, 3, bytes);

    //  Four labels for three images.
    const uint32_t four [] = { 4 };
    s_write_idx (fx->dir, "train-labels-idx1-ubyte", four, 1, (const uint8_t []) { 0, 1, 2, 3 });
    s_assert_load_fails (fx->dir, PS_ESHAPE, "train-labels-idx1-ubyte", "4 labels");

    //  Any byte is a class: the largest label kept makes the count.
    const uint32_t three [] = { 3 };
    s_write_idx (fx->dir, "train-labels-idx1-ubyte", three, 1, (const uint8_t []) { 0, 1, 255 });
    ps_dataset_t *data = ps_dataset_load (fx->dir, PS_SPLIT_TRAIN, 0, NULL);
    assert_non_null (data);
    assert_int_equal (ps_dataset_classes (data), 256);
    ps_dataset_destroy (&data);
    data = ps_dataset_load (fx->dir, PS_SPLIT_TRAIN, 2, NULL);
    assert_non_null (data);
    assert_int_equal (ps_dataset_classes (data), 2);
    ps_dataset_destroy (&data);

    //  Labels of rank 2, images of rank 2 and 4.
    const uint32_t label_matrix [] = { 3, 1 };
    s_write_idx (fx->dir, "train-labels-idx1-ubyte", label_matrix, 2, bytes);
    s_assert_load_fails (fx->dir, PS_ESHAPE, "train-labels-idx1-ubyte", "rank 2");
    s_write_idx (fx->dir, "train-labels-idx1-ubyte", three, 1, bytes);
    const uint32_t flat [] = { 3, 4 };
    s_write_idx (fx->dir, "train-images-idx3-ubyte", flat, 2, bytes);
    s_assert_load_fails (fx->dir, PS_ESHAPE, "train-images-idx3-ubyte", "rank 2");
    const uint32_t two_channels [] = { 3, 2, 2, 2 };
    s_write_idx (fx->dir, "train-images-idx3-ubyte", two_channels, 4, bytes);
    s_assert_load_fails (fx->dir, PS_ESHAPE, "train-images-idx3-ubyte", "2 channels");
}

//  Probing the real splits gives the sizes loading gives, without the data.
static void
test_probe_real (void **state)
{
    (void) state;
    ps_dataset_info_t info = { 0 };
    ps_error_t err = { 0 };
    if (ps_dataset_probe (s_real.dir, PS_SPLIT_TRAIN, NULL, NULL, 0, &info, &err))
        fail_msg ("probe failed: %s", err.msg);
    assert_int_equal (info.count, S_TRAIN_COUNT);
    assert_int_equal (info.rows, 28);
    assert_int_equal (info.cols, 28);
    assert_int_equal (ps_dataset_probe (s_real.dir, PS_SPLIT_TEST, NULL, NULL, 0, &info, &err),
                      PS_OK);
    assert_int_equal (info.count, S_TEST_COUNT);
    assert_int_equal (info.rows, 28);
    assert_int_equal (info.cols, 28);
    assert_int_equal (info.channels, 1);
    assert_int_equal (info.classes, 10);
    //  The limit applies as in ps_dataset_load: it only ever lowers the count.
    size_t limits [] = { 1, 100, S_TEST_COUNT - 1, S_TEST_COUNT, S_TEST_COUNT + 1, 1000000 };
    for (size_t i = 0; i < sizeof limits / sizeof limits [0]; i++) {
        assert_int_equal (ps_dataset_probe (s_real.dir, PS_SPLIT_TEST, NULL, NULL, limits [i],
                                            &info, &err), PS_OK);
        assert_int_equal (info.count, limits [i] < S_TEST_COUNT ? limits [i] : S_TEST_COUNT);
    }
    assert_int_equal (ps_dataset_probe (s_real.dir, PS_SPLIT_TRAIN, NULL, NULL, 70000, &info,
                                        NULL), PS_OK);
    assert_int_equal (info.count, S_TRAIN_COUNT);
}

//  Probing dir's train split fails with code and a message that names
//  `file` (in dir) and contains `expect`; the outputs stay untouched.
static void
s_assert_probe_fails (const char *dir, int code, const char *file, const char *expect)
{
    ps_dataset_info_t info = { .count = 12345, .rows = -7, .cols = -8 };
    ps_error_t err = { 0 };
    int rc = ps_dataset_probe (dir, PS_SPLIT_TRAIN, NULL, NULL, 0, &info, &err);
    if (rc == PS_OK)
        fail_msg ("probing %s succeeded, expected %s", dir, ps_error_name (code));
    assert_int_equal (rc, code);
    assert_int_equal (err.code, code);
    assert_int_equal (info.count, 12345);
    assert_int_equal (info.rows, -7);
    assert_int_equal (info.cols, -8);
    char path [512];
    snprintf (path, sizeof path, "%s/%s", dir, file);
    if (!strstr (err.msg, path))
        fail_msg ("message \"%s\" does not name %s", err.msg, path);
    if (expect && !strstr (err.msg, expect))
        fail_msg ("message \"%s\" lacks \"%s\"", err.msg, expect);
}

static void
test_probe_missing (void **state)
{
    fixture_t *fx = *state;
    char missing [128];
    snprintf (missing, sizeof missing, "%s/no-such-dir", fx->dir);
    s_assert_probe_fails (missing, PS_ENOTFOUND, "train-images-idx3-ubyte(.gz)", "not found");
    s_assert_probe_fails (fx->dir, PS_ENOTFOUND, "train-images-idx3-ubyte(.gz)", "not found");
    const uint32_t image_dims [] = { 2, 1, 1 };
    s_write_idx (fx->dir, "train-images-idx3-ubyte.gz", image_dims, 3, (const uint8_t []) { 1, 2 });
    s_assert_probe_fails (fx->dir, PS_ENOTFOUND, "train-labels-idx1-ubyte(.gz)", "not found");
}

//  Write the first len bytes of an IDX header, gzipped when the name ends
//  in .gz.
static void
s_write_bytes (const char *dir, const char *name, const uint8_t *bytes, size_t len)
{
    char path [512];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    if (strlen (name) > 3 && strcmp (name + strlen (name) - 3, ".gz") == 0) {
        gzFile file = gzopen (path, "wb");
        assert_non_null (file);
        assert_int_equal (gzwrite (file, bytes, (unsigned) len), (int) len);
        assert_int_equal (gzclose (file), Z_OK);
    }
    else {
        FILE *file = fopen (path, "wb");
        assert_non_null (file);
        assert_int_equal (fwrite (bytes, 1, len, file), len);
        assert_int_equal (fclose (file), 0);
    }
}

//  Small hand-made files: the probe agrees with the load, reads only the
//  images' header (so short image data passes) and the labels, and refuses
//  what the headers show to be wrong.
static void
test_probe_files (void **state)
{
    fixture_t *fx = *state;
    const uint8_t pixels [12] = { 0 };
    const uint32_t image_dims [] = { 3, 2, 2 };
    const uint32_t three [] = { 3 };
    s_write_idx (fx->dir, "train-images-idx3-ubyte", image_dims, 3, pixels);
    s_write_idx (fx->dir, "train-labels-idx1-ubyte.gz", three, 1, (const uint8_t []) { 1, 2, 3 });
    ps_dataset_info_t info = { 0 };
    ps_error_t err = { 0 };
    if (ps_dataset_probe (fx->dir, PS_SPLIT_TRAIN, NULL, NULL, 0, &info, &err))
        fail_msg ("probe failed: %s", err.msg);
    assert_int_equal (info.count, 3);
    assert_int_equal (info.rows, 2);
    assert_int_equal (info.cols, 2);
    ps_dataset_t *data = ps_dataset_load (fx->dir, PS_SPLIT_TRAIN, 2, &err);
    assert_non_null (data);
    assert_int_equal (ps_dataset_probe (fx->dir, PS_SPLIT_TRAIN, NULL, NULL, 2, &info, &err),
                      PS_OK);
    assert_int_equal (info.count, ps_dataset_count (data));
    assert_int_equal (info.rows, ps_dataset_rows (data));
    assert_int_equal (info.cols, ps_dataset_cols (data));
    ps_dataset_destroy (&data);

    //  The probe reads the labels for the classes, as the load does.
    s_write_idx (fx->dir, "train-labels-idx1-ubyte.gz", three, 1, (const uint8_t []) { 1, 20, 3 });
    assert_int_equal (ps_dataset_probe (fx->dir, PS_SPLIT_TRAIN, NULL, NULL, 0, &info, &err),
                      PS_OK);
    assert_int_equal (info.classes, 21);
    assert_int_equal (ps_dataset_probe (fx->dir, PS_SPLIT_TRAIN, NULL, NULL, 1, &info, &err),
                      PS_OK);
    assert_int_equal (info.classes, 2);

    //  Four labels for three images, and ranks that make no data set.
    const uint32_t four [] = { 4 };
    s_write_idx (fx->dir, "train-labels-idx1-ubyte.gz", four, 1, (const uint8_t []) { 0, 1, 2, 3 });
    s_assert_probe_fails (fx->dir, PS_ESHAPE, "train-labels-idx1-ubyte.gz", "4 labels");
    const uint32_t label_matrix [] = { 3, 1 };
    s_write_idx (fx->dir, "train-labels-idx1-ubyte.gz", label_matrix, 2, pixels);
    s_assert_probe_fails (fx->dir, PS_ESHAPE, "train-labels-idx1-ubyte.gz", "rank 2");
    s_write_idx (fx->dir, "train-labels-idx1-ubyte.gz", three, 1, pixels);
    const uint32_t flat [] = { 3, 4 };
    s_write_idx (fx->dir, "train-images-idx3-ubyte", flat, 2, pixels);
    s_assert_probe_fails (fx->dir, PS_ESHAPE, "train-images-idx3-ubyte", "rank 2");

    //  A header cut off in its dimensions, raw and gzipped; the gzipped
    //  file is preferred once it exists.
    const uint8_t header [] = { 0, 0, 0x08, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2 };
    s_write_bytes (fx->dir, "train-images-idx3-ubyte", header, 10);
    s_assert_probe_fails (fx->dir, PS_ECORRUPT, "train-images-idx3-ubyte",
                          "header ends after 6 of its 12 dimension bytes");
    s_write_bytes (fx->dir, "train-images-idx3-ubyte.gz", header, 3);
    s_assert_probe_fails (fx->dir, PS_ECORRUPT, "train-images-idx3-ubyte.gz", "too short");

    //  A whole header with the data cut short probes, but does not load.
    s_write_bytes (fx->dir, "train-images-idx3-ubyte.gz", header, sizeof header);
    assert_int_equal (ps_dataset_probe (fx->dir, PS_SPLIT_TRAIN, NULL, NULL, 0, &info, &err),
                      PS_OK);
    assert_int_equal (info.count, 3);
    s_assert_load_fails (fx->dir, PS_ECORRUPT, "train-images-idx3-ubyte.gz", "truncated");
}

//  Files of any name, with three channels: loaded as NHWC, probed the
//  same, checked against models, and a pair given by half refused.
static void
test_named_files (void **state)
{
    fixture_t *fx = *state;
    //  Two 1x2 RGB images: every value is its own index.
    uint8_t pixels [12];
    for (int i = 0; i < 12; i++)
        pixels [i] = (uint8_t) (i * 20);
    const uint32_t image_dims [] = { 2, 1, 2, 3 };
    const uint32_t label_dims [] = { 2 };
    s_write_idx (fx->dir, "rgb-images.idx.gz", image_dims, 4, pixels);
    s_write_idx (fx->dir, "rgb-labels.idx", label_dims, 1, (const uint8_t []) { 3, 1 });
    char images [512], labels [512];
    snprintf (images, sizeof images, "%s/rgb-images.idx.gz", fx->dir);
    snprintf (labels, sizeof labels, "%s/rgb-labels.idx", fx->dir);
    ps_error_t err = { 0 };
    //  The directory has no Fashion-MNIST files: the named ones are read.
    ps_dataset_t *data = ps_dataset_open (fx->dir, PS_SPLIT_TEST, images, labels, 0, &err);
    if (!data)
        fail_msg ("open failed: %s", err.msg);
    assert_int_equal (ps_dataset_count (data), 2);
    assert_int_equal (ps_dataset_rows (data), 1);
    assert_int_equal (ps_dataset_cols (data), 2);
    assert_int_equal (ps_dataset_channels (data), 3);
    assert_int_equal (ps_dataset_classes (data), 4);
    for (int i = 0; i < 2; i++) {
        float image [6];
        ps_dataset_image (data, (size_t) i, image);
        for (int v = 0; v < 6; v++)
            assert_true (image [v] == (float) pixels [i * 6 + v] / 255.0f);
    }
    ps_dataset_info_t info;
    assert_int_equal (ps_dataset_probe (NULL, PS_SPLIT_TRAIN, images, labels, 0, &info, &err),
                      PS_OK);
    assert_int_equal (info.count, 2);
    assert_int_equal (info.rows, 1);
    assert_int_equal (info.cols, 2);
    assert_int_equal (info.channels, 3);
    assert_int_equal (info.classes, 4);

    //  A model of 1x2x3 inputs and 4 classes fits, a flat one of 6 too;
    //  other shapes or fewer classes do not, and the message names both.
    const char *spec = "{\"input_shape\": [1, 2, 3], \"layers\": [{\"type\": \"Flatten\"}, "
                       "{\"type\": \"Dense\", \"units\": %d}]}";
    const char *flat = "{\"input_shape\": [%d], \"layers\": [{\"type\": \"Dense\", "
                       "\"units\": 4}]}";
    char json [256];
    snprintf (json, sizeof json, spec, 4);
    ps_model_t *model = ps_model_parse (json, "rgb", &err);
    assert_non_null (model);
    assert_int_equal (ps_dataset_check_model (data, model, &err), PS_OK);
    ps_model_destroy (&model);
    snprintf (json, sizeof json, flat, 6);
    model = ps_model_parse (json, "flat", &err);
    assert_non_null (model);
    assert_int_equal (ps_dataset_check_model (data, model, &err), PS_OK);
    ps_model_destroy (&model);
    snprintf (json, sizeof json, spec, 3);
    model = ps_model_parse (json, "rgb", &err);
    assert_non_null (model);
    assert_int_equal (ps_dataset_check_model (data, model, &err), PS_ESHAPE);
    assert_non_null (strstr (err.msg, "gives 3 classes, but the data has labels up to 3 "
                                      "(4 classes)"));
    ps_model_destroy (&model);
    model = ps_model_load ("cnn", &err);
    assert_non_null (model);
    assert_int_equal (ps_dataset_check_model (data, model, &err), PS_ESHAPE);
    assert_non_null (strstr (err.msg, "takes 28x28x1 inputs, but the data has 1x2x3 images"));
    ps_model_destroy (&model);
    ps_dataset_destroy (&data);

    //  Half a pair.
    assert_null (ps_dataset_open (fx->dir, PS_SPLIT_TRAIN, images, NULL, 0, &err));
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "the training images file is given"));
    assert_int_equal (ps_dataset_probe (fx->dir, PS_SPLIT_TEST, "", labels, 0, &info, &err),
                      PS_EINVAL);
    assert_non_null (strstr (err.msg, "the test labels file is given"));
}

//  Write len bytes to dir/name.
static void
s_write_file (const char *dir, const char *name, const void *bytes, size_t len, char *path,
              size_t size)
{
    snprintf (path, size, "%s/%s", dir, name);
    FILE *file = fopen (path, "wb");
    assert_non_null (file);
    assert_int_equal (fwrite (bytes, 1, len, file), len);
    assert_int_equal (fclose (file), 0);
}

//  A .npy file of format 2.0 (a 4-byte header length) and one of 1.0 whose
//  one-byte type says '<u1', as some writers do: header, then data.
static void
test_npy_formats (void **state)
{
    fixture_t *fx = *state;
    //  Features: 2 examples of 3 uint8 values; format 2.0.
    char features [128 + 6];
    const char *dict = "{'descr': '<u1', 'fortran_order': False, 'shape': (2, 3), }";
    memset (features, ' ', sizeof features);
    memcpy (features, "\x93NUMPY\x02\x00", 8);
    uint32_t header_len = 128 - 12;
    for (int i = 0; i < 4; i++)
        features [8 + i] = (char) (header_len >> (8 * i));
    memcpy (features + 12, dict, strlen (dict));
    features [127] = '\n';
    memcpy (features + 128, (const uint8_t []) { 0, 51, 255, 102, 153, 204 }, 6);
    //  Labels: int32 [2] in format 1.0, with the keys in another order.
    char labels [128 + 8];
    const char *ldict = "{'shape': (2,), 'fortran_order': False, 'descr': '<i4'}";
    memset (labels, ' ', sizeof labels);
    memcpy (labels, "\x93NUMPY\x01\x00", 8);
    labels [8] = 128 - 10;
    labels [9] = 0;
    memcpy (labels + 10, ldict, strlen (ldict));
    labels [127] = '\n';
    memcpy (labels + 128, (const int32_t []) { 7, 2 }, 8);
    char fpath [512], lpath [512];
    s_write_file (fx->dir, "f.npy", features, sizeof features, fpath, sizeof fpath);
    s_write_file (fx->dir, "l.npy", labels, sizeof labels, lpath, sizeof lpath);
    ps_error_t err = { 0 };
    ps_dataset_t *data = ps_dataset_open (NULL, PS_SPLIT_TRAIN, fpath, lpath, 0, &err);
    if (!data)
        fail_msg ("open failed: %s", err.msg);
    assert_int_equal (ps_dataset_count (data), 2);
    assert_int_equal (ps_dataset_rows (data), 1);
    assert_int_equal (ps_dataset_cols (data), 3);
    assert_int_equal (ps_dataset_classes (data), 8);
    float x [3];
    ps_dataset_image (data, 1, x);
    assert_true (x [0] == 102 / 255.0f && x [1] == 153 / 255.0f && x [2] == 204 / 255.0f);
    assert_int_equal (ps_dataset_label (data, 0), 7);
    ps_dataset_destroy (&data);
    //  A negative label is no class.
    memcpy (labels + 128, (const int32_t []) { -1, 2 }, 8);
    s_write_file (fx->dir, "l.npy", labels, sizeof labels, lpath, sizeof lpath);
    assert_null (ps_dataset_open (NULL, PS_SPLIT_TRAIN, fpath, lpath, 0, &err));
    assert_non_null (strstr (err.msg, "label -1 at index 0"));
}

//  CSV as editors write it: CRLF line ends, spaces around cells, an empty
//  line, the label column first; and the limit.
static void
test_csv_dialects (void **state)
{
    fixture_t *fx = *state;
    const char *text = "label, a ,b\r\n1, 0.5, -2\r\n\r\n 0 ,1e-3,3\r\n2,4,5\r\n";
    char path [512];
    s_write_file (fx->dir, "d.csv", text, strlen (text), path, sizeof path);
    ps_error_t err = { 0 };
    ps_dataset_t *data = ps_dataset_open_csv (path, "label", 0, &err);
    if (!data)
        fail_msg ("open failed: %s", err.msg);
    assert_int_equal (ps_dataset_count (data), 3);
    assert_int_equal (ps_dataset_cols (data), 2);
    assert_int_equal (ps_dataset_classes (data), 3);
    float x [2];
    ps_dataset_image (data, 1, x);
    assert_true (x [0] == 1e-3f && x [1] == 3.0f);
    assert_int_equal (ps_dataset_label (data, 1), 0);
    ps_dataset_destroy (&data);
    ps_dataset_info_t info;
    assert_int_equal (ps_dataset_probe_csv (path, "label", 2, &info, &err), PS_OK);
    assert_int_equal (info.count, 2);
    assert_int_equal (info.classes, 2);
    //  A label column that is not there, named with the header's columns.
    assert_int_equal (ps_dataset_probe_csv (path, "y", 0, &info, &err), PS_ECORRUPT);
    assert_non_null (strstr (err.msg, "no column \"y\" for the labels in the header (columns: "
                                      "label, a, b)"));
}

//  The bytes of private writable memory this process has (VmData), which
//  RLIMIT_DATA limits.
static size_t
s_vm_data (void)
{
    FILE *status = fopen ("/proc/self/status", "r");
    assert_non_null (status);
    char line [256];
    size_t kb = 0;
    while (fgets (line, sizeof line, status))
        if (sscanf (line, "VmData: %zu kB", &kb) == 1)
            break;
    fclose (status);
    assert_true (kb > 0);
    return kb * 1024;
}

//  Load the CSV at path and check every value: example i's feature j is
//  (i + j) % 10, its label i % 3. Returns 0 or what failed, for a child.
static int
s_check_big_csv (const char *path, size_t rows, int features)
{
    ps_error_t err = { 0 };
    ps_dataset_t *data = ps_dataset_open_csv (path, "label", 0, &err);
    if (!data) {
        fprintf (stderr, "open failed: %s\n", err.msg);
        return 1;
    }
    int rc = ps_dataset_count (data) == rows && ps_dataset_cols (data) == features ? 0 : 2;
    float *x = malloc ((size_t) features * sizeof (float));
    for (size_t i = 0; rc == 0 && x && i < rows; i++) {
        ps_dataset_image (data, i, x);
        for (int j = 0; j < features; j++)
            if (x [j] != (float) ((i + (size_t) j) % 10))
                rc = 3;
        if (ps_dataset_label (data, i) != i % 3)
            rc = 4;
    }
    free (x);
    ps_dataset_destroy (&data);
    return x ? rc : 5;
}

//  A CSV file whose features are larger than the memory the process may
//  take: they are mapped from the file they were parsed into, never held
//  in the heap, so it loads under an RLIMIT_DATA of 16 MB above what the
//  process had (its 32 MB of features did not fit before). Without room
//  for that file the error names the directory.
static void
test_csv_out_of_core (void **state)
{
    fixture_t *fx = *state;
    const size_t rows = 65536;
    const int features = 128;
    char path [512];
    snprintf (path, sizeof path, "%s/big.csv", fx->dir);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fprintf (file, "label");
    for (int j = 0; j < features; j++)
        fprintf (file, ",f%d", j);
    fputc ('\n', file);
    for (size_t i = 0; i < rows; i++) {
        fprintf (file, "%zu", i % 3);
        for (int j = 0; j < features; j++)
            fprintf (file, ",%zu", (i + (size_t) j) % 10);
        fputc ('\n', file);
    }
    assert_int_equal (fclose (file), 0);
    bool sanitized = false;
#if defined (__SANITIZE_ADDRESS__)
    sanitized = true;
#elif defined (__has_feature)
#if __has_feature (address_sanitizer)
    sanitized = true;
#endif
#endif
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        //  The sanitizer's own memory cannot live under RLIMIT_DATA: there
        //  only the values are checked.
        struct rlimit limit = { s_vm_data () + 16 * 1024 * 1024, RLIM_INFINITY };
        if (!sanitized && setrlimit (RLIMIT_DATA, &limit) != 0)
            _exit (6);
        _exit (s_check_big_csv (path, rows, features));
    }
    int status;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
        fail_msg ("loading %zu x %d features under RLIMIT_DATA: status %d", rows, features,
                  status);
    if (sanitized)
        printf ("note: sanitizer build: the values were checked, not the memory limit\n");
    //  No room for the features' file: said, naming where.
    char *tmpdir = getenv ("TMPDIR") ? strdup (getenv ("TMPDIR")) : NULL;
    assert_int_equal (setenv ("TMPDIR", "/nonexistent-ps-dir", 1), 0);
    ps_error_t err = { 0 };
    assert_null (ps_dataset_open_csv (path, "label", 0, &err));
    assert_non_null (strstr (err.msg, "cannot make a temporary file for its features in "
                                      "/nonexistent-ps-dir"));
    if (tmpdir)
        assert_int_equal (setenv ("TMPDIR", tmpdir, 1), 0);
    else
        assert_int_equal (unsetenv ("TMPDIR"), 0);
    free (tmpdir);
}

//  Write a .npy file of format 1.0: the header dict, padded so that the
//  data starts at byte 128, then len bytes of data.
static void
s_write_npy (const char *dir, const char *name, const char *dict, const void *data,
             size_t len, char *path, size_t size)
{
    char *bytes = malloc (128 + len);
    assert_non_null (bytes);
    memset (bytes, ' ', 128);
    memcpy (bytes, "\x93NUMPY\x01\x00", 8);
    bytes [8] = 128 - 10;
    bytes [9] = 0;
    memcpy (bytes + 10, dict, strlen (dict));
    bytes [127] = '\n';
    memcpy (bytes + 128, data, len);
    s_write_file (dir, name, bytes, 128 + len, path, size);
    free (bytes);
}

//  A regression model's targets: float32 [N] and float64 [N, k] .npy
//  files become float32 targets, batched k floats an example; IDX labels,
//  the wrong second dimension and a NaN are refused; CSV reads any number
//  in the label column, one target only; a classifier's data set does not
//  fit a regression model.
static void
test_targets (void **state)
{
    fixture_t *fx = *state;
    char fpath [512], tpath [512], path [512];
    const uint8_t features [] = { 0, 51, 255, 102, 153, 204 };
    s_write_npy (fx->dir, "f.npy", "{'descr': '<u1', 'fortran_order': False, 'shape': (2, 3), }",
                 features, sizeof features, fpath, sizeof fpath);
    s_write_npy (fx->dir, "t.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                 (const float []) { 1.5f, -2.25f }, 8, tpath, sizeof tpath);
    ps_error_t err = { 0 };
    ps_dataset_t *data = ps_dataset_open_targets (NULL, PS_SPLIT_TRAIN, fpath, tpath, 1, 0,
                                                  &err);
    if (!data)
        fail_msg ("open failed: %s", err.msg);
    assert_int_equal (ps_dataset_targets (data), 1);
    assert_int_equal (ps_dataset_label_size (data), 4);
    assert_int_equal (ps_dataset_classes (data), 0);
    float y [2], x [6];
    uint8_t labels [8];
    ps_dataset_target (data, 1, y);
    assert_true (y [0] == -2.25f);
    assert_int_equal (ps_dataset_slice (data, 0, 2, x, labels), 2);
    memcpy (y, labels, sizeof y);
    assert_true (y [0] == 1.5f && y [1] == -2.25f);
    ps_dataset_destroy (&data);

    //  float64 [2, 2]: two targets an example.
    s_write_npy (fx->dir, "t2.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }",
                 (const double []) { 1, 2, 3, 0.5 }, 32, tpath, sizeof tpath);
    data = ps_dataset_open_targets (NULL, PS_SPLIT_TRAIN, fpath, tpath, 2, 0, &err);
    if (!data)
        fail_msg ("open failed: %s", err.msg);
    assert_int_equal (ps_dataset_label_size (data), 8);
    ps_dataset_target (data, 1, y);
    assert_true (y [0] == 3.0f && y [1] == 0.5f);
    ps_dataset_info_t info;
    assert_int_equal (ps_dataset_probe_targets (NULL, PS_SPLIT_TRAIN, fpath, tpath, 2, 0,
                                                &info, &err), PS_OK);
    assert_int_equal (info.targets, 2);
    assert_int_equal (info.count, 2);
    ps_dataset_destroy (&data);
    //  A model of 3 outputs does not take 2 targets an example.
    assert_null (ps_dataset_open_targets (NULL, PS_SPLIT_TRAIN, fpath, tpath, 3, 0, &err));
    assert_int_equal (err.code, PS_ESHAPE);
    assert_non_null (strstr (err.msg, "expected [N] or [N, 3] for a regression model of 3 "
                                      "outputs"));
    //  A NaN target.
    s_write_npy (fx->dir, "t3.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                 (const float []) { 1, NAN }, 8, tpath, sizeof tpath);
    assert_null (ps_dataset_open_targets (NULL, PS_SPLIT_TRAIN, fpath, tpath, 1, 0, &err));
    assert_non_null (strstr (err.msg, "target nan at index 1, expected a finite float32"));
    //  IDX labels are classes.
    const uint8_t idx [] = { 0, 0, 8, 1, 0, 0, 0, 2, 1, 0 };
    s_write_file (fx->dir, "l.idx", idx, sizeof idx, path, sizeof path);
    assert_null (ps_dataset_open_targets (NULL, PS_SPLIT_TRAIN, fpath, path, 1, 0, &err));
    assert_int_equal (err.code, PS_ESHAPE);
    assert_non_null (strstr (err.msg, "IDX labels are integer classes, but the model is a "
                                      "regression model"));

    //  CSV: any number is a target; a cell that is no number is refused.
    const char *text = "a,y,b\n1,0.25,2\n3,-7.5e2,4\n";
    s_write_file (fx->dir, "r.csv", text, strlen (text), path, sizeof path);
    data = ps_dataset_open_csv_targets (path, "y", 1, 0, &err);
    if (!data)
        fail_msg ("open failed: %s", err.msg);
    ps_dataset_target (data, 1, y);
    assert_true (y [0] == -750.0f);
    ps_dataset_image (data, 1, x);
    assert_true (x [0] == 3.0f && x [1] == 4.0f);
    ps_model_t *model = ps_model_parse ("{\"input_shape\": [2], \"loss\": \"mse\", "
                                        "\"layers\": [{\"type\": \"Dense\", \"units\": 1}]}",
                                        "reg.json", &err);
    assert_non_null (model);
    assert_int_equal (ps_dataset_check_model (data, model, &err), PS_OK);
    ps_dataset_destroy (&data);
    data = ps_dataset_open_csv (path, "b", 0, &err);
    assert_non_null (data);
    assert_int_equal (ps_dataset_check_model (data, model, &err), PS_ESHAPE);
    assert_non_null (strstr (err.msg, "is a regression model, but the data set's labels were "
                                      "read as classes"));
    ps_dataset_destroy (&data);
    ps_model_destroy (&model);
    assert_null (ps_dataset_open_csv_targets (path, "y", 2, 0, &err));
    assert_non_null (strstr (err.msg, "CSV data holds one target (the column \"y\")"));
    text = "a,y\n1,high\n";
    s_write_file (fx->dir, "bad.csv", text, strlen (text), path, sizeof path);
    assert_null (ps_dataset_open_csv_targets (path, "y", 1, 0, &err));
    assert_non_null (strstr (err.msg, "line 2, column 2: \"high\" is not a finite number"));
}

int
main (int argc, char **argv)
{
    if (harness_group (argc, argv, "real")) {
        harness_need_data ();
        const struct CMUnitTest real [] = {
            cmocka_unit_test (test_train_split),
            cmocka_unit_test (test_test_split),
            cmocka_unit_test (test_limit),
            cmocka_unit_test (test_permutation),
            cmocka_unit_test (test_permutation_uniform),
            cmocka_unit_test (test_batches),
            cmocka_unit_test (test_slice),
            cmocka_unit_test (test_probe_real),
        };
        return cmocka_run_group_tests_name ("real data", real, s_group_setup, s_group_teardown);
    }
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_small_files, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_missing_file, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_inconsistent_files, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_probe_missing, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_probe_files, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_named_files, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_npy_formats, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_csv_dialects, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_csv_out_of_core, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_targets, s_setup, harness_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
