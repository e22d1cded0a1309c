//  Data sets; see ps_dataset.h.
//
//  The whole split is held in memory as floats, value p stored as
//  p / 255.0f (a single-precision division, so that every implementation
//  gets the same bits), and the labels as the file's bytes.
//
//  Epoch e's permutation for seed s, which every process must compute
//  identically, is
//
//      key     = mix64 (s ^ mix64 (e + 0x0073687566666c65))
//      draw c  = ps_mix_draw (key, c) = mix64 (key + (c + 1) * 0x9e3779b97f4a7c15)
//
//  with mix64 and the draw of ps_mix.h; the constant is "shuffle" in ASCII
//  and keeps the shuffle's streams apart from those of the initializers
//  (key mix64 (s)) and of dropout (whose constant is the golden gamma).
//  Starting from the identity perm [i] = i, for i = count - 1 down to 1,
//  j is drawn uniformly from [0, i] and perm [i] and perm [j] are swapped.
//  The draws are consumed in order, c = 0, 1, 2, ..., one or more per i:
//  j is the high 64 bits of the 128-bit product draw * (i + 1), except that
//  a draw whose low 64 bits fall below 2^64 mod (i + 1) is rejected and
//  the next one taken (Lemire's method), which makes j exactly uniform.

#include "ps_dataset.h"
#include "ps_floats.h"
#include "ps_idx.h"
#include "ps_mix.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

//  Mixed with the epoch to form the shuffle's key: "shuffle" in ASCII.
#define S_SHUFFLE_TAG  0x0073687566666c65ULL

//  The files of each split, without the .gz.
static const struct {
    const char *images;
    const char *labels;
} s_files [] = {
    [PS_SPLIT_TRAIN] = { "train-images-idx3-ubyte", "train-labels-idx1-ubyte" },
    [PS_SPLIT_TEST]  = { "t10k-images-idx3-ubyte",  "t10k-labels-idx1-ubyte" },
};

struct ps_dataset_t {
    size_t count;               //  examples kept
    int rows, cols, channels;
    int classes;                //  the largest label kept plus one
    size_t pixels;              //  rows * cols * channels
    float *images;              //  count * pixels, 64-byte aligned
    uint8_t *labels;            //  count, or more when a limit was applied
    //  The permutation of the epoch ps_dataset_batch was last asked for.
    uint32_t *perm;
    bool perm_valid;
    uint64_t perm_seed;
    uint64_t perm_epoch;
};

//  Put in path the file `name` of dir: name.gz when it exists, else name.
static int
s_find (const char *dir, const char *name, char *path, size_t size, ps_error_t *err)
{
    int len = snprintf (path, size, "%s/%s.gz", dir, name);
    if (len < 0 || (size_t) len >= size)
        return ps_error_set (err, PS_EINVAL, "%s/%s.gz: path longer than %zu bytes",
                             dir, name, size - 1);
    struct stat st;
    if (stat (path, &st) == 0)
        return PS_OK;
    if (errno != ENOENT)
        return ps_error_set (err, PS_EIO, "%s: stat failed: %s", path, strerror (errno));
    //  Drop the ".gz" and try the raw file.
    path [len - 3] = 0;
    if (stat (path, &st) == 0)
        return PS_OK;
    if (errno != ENOENT)
        return ps_error_set (err, PS_EIO, "%s: stat failed: %s", path, strerror (errno));
    return ps_error_set (err, PS_ENOTFOUND, "%s(.gz): not found", path);
}

//  Copy a path the user gave into path.
static int
s_given (const char *what, const char *given, char *path, size_t size, ps_error_t *err)
{
    if (strlen (given) >= size)
        return ps_error_set (err, PS_EINVAL, "the %s file %s: path longer than %zu bytes",
                             what, given, size - 1);
    memcpy (path, given, strlen (given) + 1);
    return PS_OK;
}

//  Put in images and labels (each size bytes) the files of one split: the
//  given paths when both are set, else dir's files for split.
static int
s_split_files (const char *dir, ps_split_t split, const char *given_images,
                  const char *given_labels, char *images, char *labels, size_t size,
                  ps_error_t *err)
{
    assert (split == PS_SPLIT_TRAIN || split == PS_SPLIT_TEST);
    bool has_images = given_images && given_images [0];
    bool has_labels = given_labels && given_labels [0];
    const char *split_name = split == PS_SPLIT_TRAIN ? "training" : "test";
    if (has_images != has_labels)
        return ps_error_set (err, PS_EINVAL, "the %s %s file is given (%s) but not its %s "
                             "file: expected both or neither", split_name,
                             has_images ? "images" : "labels",
                             has_images ? given_images : given_labels,
                             has_images ? "labels" : "images");
    if (has_images) {
        int rc = s_given ("images", given_images, images, size, err);
        return rc ? rc : s_given ("labels", given_labels, labels, size, err);
    }
    assert (dir);
    int rc = s_find (dir, s_files [split].images, images, size, err);
    return rc ? rc : s_find (dir, s_files [split].labels, labels, size, err);
}

//  Check what the two headers show: images [N, rows, cols] or [N, rows,
//  cols, channels] with 1 or 3 channels, and labels [N].
static int
s_check_headers (const char *image_path, const ps_idx_t *images, const char *label_path,
                 const ps_idx_t *labels, ps_error_t *err)
{
    if (images->rank != 3 && images->rank != 4)
        return ps_error_set (err, PS_ESHAPE, "%s: rank %d, expected 3 (images, rows, columns) "
                             "or 4 (images, rows, columns, channels)", image_path, images->rank);
    if (images->rank == 4 && images->dims [3] != 1 && images->dims [3] != 3)
        return ps_error_set (err, PS_ESHAPE, "%s: %u channels, expected 1 (grayscale) or 3 "
                             "(RGB)", image_path, images->dims [3]);
    if (labels->rank != 1)
        return ps_error_set (err, PS_ESHAPE, "%s: rank %d, expected 1 (labels)",
                             label_path, labels->rank);
    if (labels->dims [0] != images->dims [0])
        return ps_error_set (err, PS_ESHAPE, "%s: %u labels, but %s holds %u images",
                             label_path, labels->dims [0], image_path, images->dims [0]);
    //  Callers size their buffers as batch * rows * cols * channels in int.
    uint64_t channels = images->rank == 4 ? images->dims [3] : 1;
    if ((uint64_t) images->dims [1] * images->dims [2] * channels > INT_MAX)
        return ps_error_set (err, PS_ESHAPE, "%s: images of %u x %u x %u values, expected "
                             "at most %d", image_path, images->dims [1], images->dims [2],
                             (unsigned) channels, INT_MAX);
    return PS_OK;
}

//  Fill info from the checked headers, the labels and the limit.
static void
s_info (const ps_idx_t *images, const ps_idx_t *labels, size_t limit, ps_dataset_info_t *info)
{
    info->count = images->dims [0];
    if (limit > 0 && limit < info->count)
        info->count = limit;
    info->rows = (int) images->dims [1];
    info->cols = (int) images->dims [2];
    info->channels = images->rank == 4 ? (int) images->dims [3] : 1;
    int top = 0;
    for (size_t i = 0; i < info->count; i++)
        if (labels->data [i] > top)
            top = labels->data [i];
    info->classes = top + 1;
}

//  Read and check both files of the split, and fill self from them.
static int
s_load (ps_dataset_t *self, const char *image_path, const char *label_path, size_t limit,
        ps_error_t *err)
{
    ps_idx_t images, labels;
    int rc = ps_idx_read (image_path, &images, err);
    if (rc)
        return rc;
    rc = ps_idx_read (label_path, &labels, err);
    if (rc == PS_OK)
        rc = s_check_headers (image_path, &images, label_path, &labels, err);
    if (rc == PS_OK) {
        ps_dataset_info_t info;
        s_info (&images, &labels, limit, &info);
        self->count = info.count;
        self->rows = info.rows;
        self->cols = info.cols;
        self->channels = info.channels;
        self->classes = info.classes;
        self->pixels = (size_t) self->rows * (size_t) self->cols * (size_t) self->channels;
        self->images = ps_floats_alloc (self->count * self->pixels);
        self->perm = malloc (self->count * sizeof (uint32_t));
        if (!self->images || !self->perm)
            rc = ps_error_set (err, PS_EIO, "%s: cannot allocate memory for %zu images",
                               image_path, self->count);
    }
    if (rc == PS_OK) {
        //  An IDX file of [N, H, W, C] is row-major, so it is NHWC already.
        size_t n = self->count * self->pixels;
        for (size_t i = 0; i < n; i++)
            self->images [i] = (float) images.data [i] / 255.0f;
        //  The label bytes are kept as read; with a limit the tail beyond
        //  count is never looked at, and is not worth a copy to drop.
        self->labels = labels.data;
        labels.data = NULL;
    }
    ps_idx_free (&images);
    ps_idx_free (&labels);
    return rc;
}

ps_dataset_t *
ps_dataset_open (const char *dir, ps_split_t split, const char *images, const char *labels,
                 size_t limit, ps_error_t *err)
{
    char image_path [PATH_MAX], label_path [PATH_MAX];
    if (s_split_files (dir, split, images, labels, image_path, label_path, sizeof image_path, err))
        return NULL;
    ps_dataset_t *self = calloc (1, sizeof (ps_dataset_t));
    if (!self) {
        ps_error_set (err, PS_EIO, "%s: cannot allocate a data set", image_path);
        return NULL;
    }
    if (s_load (self, image_path, label_path, limit, err))
        ps_dataset_destroy (&self);
    return self;
}

ps_dataset_t *
ps_dataset_load (const char *dir, ps_split_t split, size_t limit, ps_error_t *err)
{
    return ps_dataset_open (dir, split, NULL, NULL, limit, err);
}

int
ps_dataset_probe (const char *dir, ps_split_t split, const char *images, const char *labels,
                  size_t limit, ps_dataset_info_t *info, ps_error_t *err)
{
    assert (info);
    char image_path [PATH_MAX], label_path [PATH_MAX];
    int rc = s_split_files (dir, split, images, labels, image_path, label_path, sizeof image_path,
                      err);
    if (rc)
        return rc;
    //  The images' header carries no data, so only the labels need freeing.
    ps_idx_t image_idx, label_idx;
    if ((rc = ps_idx_read_header (image_path, &image_idx, err)))
        return rc;
    rc = ps_idx_read (label_path, &label_idx, err);
    if (rc == PS_OK)
        rc = s_check_headers (image_path, &image_idx, label_path, &label_idx, err);
    if (rc == PS_OK)
        s_info (&image_idx, &label_idx, limit, info);
    ps_idx_free (&label_idx);
    return rc;
}

int
ps_dataset_check_model (const ps_dataset_t *self, const ps_model_t *model, ps_error_t *err)
{
    assert (self);
    assert (model);
    return ps_model_check_input (model, self->rows, self->cols, self->channels, self->classes,
                                 err);
}

void
ps_dataset_destroy (ps_dataset_t **self_p)
{
    assert (self_p);
    ps_dataset_t *self = *self_p;
    if (self) {
        free (self->images);
        free (self->labels);
        free (self->perm);
        free (self);
        *self_p = NULL;
    }
}

size_t
ps_dataset_count (const ps_dataset_t *self)
{
    assert (self);
    return self->count;
}

int
ps_dataset_rows (const ps_dataset_t *self)
{
    assert (self);
    return self->rows;
}

int
ps_dataset_cols (const ps_dataset_t *self)
{
    assert (self);
    return self->cols;
}

int
ps_dataset_channels (const ps_dataset_t *self)
{
    assert (self);
    return self->channels;
}

int
ps_dataset_classes (const ps_dataset_t *self)
{
    assert (self);
    return self->classes;
}

const float *
ps_dataset_image (const ps_dataset_t *self, size_t i)
{
    assert (self);
    assert (i < self->count);
    return self->images + i * self->pixels;
}

uint8_t
ps_dataset_label (const ps_dataset_t *self, size_t i)
{
    assert (self);
    assert (i < self->count);
    return self->labels [i];
}

size_t
ps_dataset_batches (const ps_dataset_t *self, int batch)
{
    assert (self);
    if (batch <= 0)
        return 0;
    size_t size = (size_t) batch;
    return self->count / size + (self->count % size != 0);
}

//  A uniform integer in [0, bound), bound >= 1, from the draws of the
//  stream key from *counter on (see the top of this file).
static uint32_t
s_uniform (uint64_t key, uint64_t *counter, uint32_t bound)
{
    unsigned __int128 product = (unsigned __int128) ps_mix_draw (key, (*counter)++) * bound;
    uint64_t low = (uint64_t) product;
    //  Only a low part below bound can be one of the 2^64 mod bound
    //  products that over-represent some results, so the division that
    //  finds the threshold is almost never needed.
    if (low < bound) {
        uint64_t threshold = -(uint64_t) bound % bound;
        while (low < threshold) {
            product = (unsigned __int128) ps_mix_draw (key, (*counter)++) * bound;
            low = (uint64_t) product;
        }
    }
    return (uint32_t) (product >> 64);
}

void
ps_dataset_shuffle (uint64_t seed, uint64_t epoch, uint32_t count, uint32_t *perm)
{
    assert (perm || count == 0);
    for (uint32_t i = 0; i < count; i++)
        perm [i] = i;
    uint64_t key = ps_mix64 (seed ^ ps_mix64 (epoch + S_SHUFFLE_TAG));
    uint64_t counter = 0;
    for (uint32_t i = count ? count - 1 : 0; i > 0; i--) {
        uint32_t j = s_uniform (key, &counter, i + 1);
        uint32_t swap = perm [i];
        perm [i] = perm [j];
        perm [j] = swap;
    }
}

void
ps_dataset_permutation (const ps_dataset_t *self, uint64_t seed, uint64_t epoch,
                        uint32_t *perm)
{
    assert (self);
    //  IDX dimensions are 32-bit, so the count fits in uint32_t.
    ps_dataset_shuffle (seed, epoch, (uint32_t) self->count, perm);
}

//  Copy example i to slot k of x and labels.
static void
s_copy (const ps_dataset_t *self, size_t i, size_t k, float *x, uint8_t *labels)
{
    memcpy (x + k * self->pixels, self->images + i * self->pixels, self->pixels * sizeof (float));
    labels [k] = self->labels [i];
}

int
ps_dataset_batch (ps_dataset_t *self, uint64_t seed, uint64_t epoch, size_t b,
                  int batch, float *x, uint8_t *labels, ps_error_t *err)
{
    assert (self);
    assert (x);
    assert (labels);
    if (batch <= 0)
        return ps_error_set (err, PS_EINVAL, "batch size %d, expected at least 1", batch);
    size_t batches = ps_dataset_batches (self, batch);
    if (b >= batches)
        return ps_error_set (err, PS_EINVAL,
                             "batch %zu is past the end of the epoch: %zu examples make %zu "
                             "batches of %d", b, self->count, batches, batch);
    if (!self->perm_valid || self->perm_seed != seed || self->perm_epoch != epoch) {
        ps_dataset_permutation (self, seed, epoch, self->perm);
        self->perm_valid = true;
        self->perm_seed = seed;
        self->perm_epoch = epoch;
    }
    size_t first = b * (size_t) batch;
    size_t n = self->count - first < (size_t) batch ? self->count - first : (size_t) batch;
    for (size_t k = 0; k < n; k++)
        s_copy (self, self->perm [first + k], k, x, labels);
    return (int) n;
}

int
ps_dataset_slice (const ps_dataset_t *self, size_t first, int n, float *x, uint8_t *labels)
{
    assert (self);
    assert (x);
    assert (labels);
    if (n < 0)
        return PS_EINVAL;
    if (first >= self->count)
        return 0;
    size_t copy = self->count - first < (size_t) n ? self->count - first : (size_t) n;
    memcpy (x, self->images + first * self->pixels, copy * self->pixels * sizeof (float));
    memcpy (labels, self->labels + first, copy);
    return (int) copy;
}
