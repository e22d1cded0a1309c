//  Data sets; see ps_dataset.h.
//
//  An IDX split is held in memory as the file's bytes, and a .npy one is
//  mapped; a byte p becomes p / 255.0f as a batch is copied out (a
//  single-precision division, so that every implementation gets the same
//  bits). Labels are held as bytes, class indices.
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
#include "ps_csv.h"
#include "ps_idx.h"
#include "ps_mix.h"
#include "ps_npy.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
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
    //  The examples' values, count * pixels of them: bytes, each scaled
    //  by 1 / 255 as it is copied out (IDX files, read into owned, or a
    //  uint8 .npy file, mapped), or float32 taken as they are (a float32
    //  .npy file, mapped, or a CSV file's features, mapped from the file
    //  they were parsed into). A mapped file is paged in as batches use it.
    const uint8_t *bytes;
    const char *floats;         //  not necessarily aligned: copied with memcpy
    uint8_t *owned;
    ps_csv_t csv;               //  a CSV file's features, mapped
    ps_npy_t npy;
    uint8_t *labels;            //  count, or more when a limit was applied; classes
    //  A regression data set's labels instead: `targets` floats an example
    //  (count * targets of them, or more), and labels is NULL. A classifier's
    //  labels stay bytes, so its data takes no more memory than before.
    int targets;
    float *target_values;
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

//  A split's images as opened: an IDX file's header (and its bytes when
//  read) or a mapped .npy file.
typedef struct {
    bool is_npy;
    ps_idx_t idx;
    ps_npy_t npy;
    int rank;
    uint64_t dims [PS_IDX_MAX_RANK];
} s_images_t;

static void
s_images_close (s_images_t *im)
{
    ps_idx_free (&im->idx);
    ps_npy_close (&im->npy);
}

//  Open the images at path, IDX or .npy as its first bytes say, reading
//  the data too when with_data, and check their shape: IDX [N, H, W] or
//  [N, H, W, C] with C 1 or 3 (the image formats); .npy uint8 or float32
//  [N, F] (flat features, which make 1 x F x 1 images), [N, H, W] or
//  [N, H, W, C]. Fills the count and geometry of info.
static int
s_open_images (const char *path, bool with_data, s_images_t *im, ps_dataset_info_t *info,
               ps_error_t *err)
{
    memset (im, 0, sizeof *im);
    int rc = ps_npy_sniff (path, &im->is_npy, err);
    if (rc)
        return rc;
    if (im->is_npy) {
        rc = with_data ? ps_npy_open (path, &im->npy, err)
                       : ps_npy_read_header (path, &im->npy, err);
        if (rc)
            return rc;
        if (im->npy.dtype != PS_NPY_U8 && im->npy.dtype != PS_NPY_F32)
            return ps_error_set (err, PS_ESHAPE, "%s: features of element type '%s', "
                                 "expected uint8 ('|u1': scaled by 1/255) or float32 ('<f4')",
                                 path, im->npy.descr);
        if (im->npy.rank < 2 || im->npy.rank > 4)
            return ps_error_set (err, PS_ESHAPE, "%s: features of rank %d, expected [N, "
                                 "features], [N, H, W] or [N, H, W, C]", path, im->npy.rank);
        im->rank = im->npy.rank;
        memcpy (im->dims, im->npy.dims, sizeof im->dims);
        if (im->rank == 2) {
            //  Flat features: one row of F columns.
            im->rank = 3;
            im->dims [2] = im->dims [1];
            im->dims [1] = 1;
        }
    }
    else {
        rc = with_data ? ps_idx_read (path, &im->idx, err)
                       : ps_idx_read_header (path, &im->idx, err);
        if (rc)
            return rc;
        im->rank = im->idx.rank;
        for (int i = 0; i < im->rank; i++)
            im->dims [i] = im->idx.dims [i];
        if (im->rank != 3 && im->rank != 4)
            return ps_error_set (err, PS_ESHAPE, "%s: rank %d, expected 3 (images, rows, "
                                 "columns) or 4 (images, rows, columns, channels)", path,
                                 im->rank);
        if (im->rank == 4 && im->dims [3] != 1 && im->dims [3] != 3)
            return ps_error_set (err, PS_ESHAPE, "%s: %u channels, expected 1 (grayscale) or 3 "
                                 "(RGB)", path, (unsigned) im->dims [3]);
    }
    uint64_t channels = im->rank == 4 ? im->dims [3] : 1;
    //  Callers size their buffers as batch * rows * cols * channels in
    //  int, and an epoch's permutation is of uint32_t.
    if (im->dims [1] * im->dims [2] * channels > INT_MAX || im->dims [0] > UINT32_MAX
    ||  im->dims [1] * im->dims [2] * channels == 0)
        return ps_error_set (err, PS_ESHAPE, "%s: %" PRIu64 " examples of %" PRIu64 " x %"
                             PRIu64 " x %" PRIu64 " values, expected at most 2^32 - 1 "
                             "examples of 1 to %d values", path, im->dims [0], im->dims [1],
                             im->dims [2], channels, INT_MAX);
    info->count = (size_t) im->dims [0];
    info->rows = (int) im->dims [1];
    info->cols = (int) im->dims [2];
    info->channels = (int) channels;
    return 0;
}

//  Read the labels at path, IDX [N] bytes or a .npy [N] of integers, into
//  *labels (malloc'd, *count of them): each a class, 0 to 255. On error
//  *labels holds nothing to free.
static int
s_read_labels (const char *path, uint8_t **labels, size_t *count, ps_error_t *err)
{
    bool is_npy;
    int rc = ps_npy_sniff (path, &is_npy, err);
    if (rc)
        return rc;
    if (!is_npy) {
        ps_idx_t idx;
        if ((rc = ps_idx_read (path, &idx, err)))
            return rc;
        if (idx.rank != 1) {
            int rank = idx.rank;
            ps_idx_free (&idx);
            return ps_error_set (err, PS_ESHAPE, "%s: rank %d, expected 1 (labels)", path,
                                 rank);
        }
        *labels = idx.data;
        *count = idx.count;
        return 0;
    }
    ps_npy_t npy;
    if ((rc = ps_npy_open (path, &npy, err)))
        return rc;
    if (npy.rank != 1)
        rc = ps_error_set (err, PS_ESHAPE, "%s: labels of rank %d, expected 1 ([N])", path,
                           npy.rank);
    else
    if (npy.dtype == PS_NPY_F32 || npy.dtype == PS_NPY_F64)
        rc = ps_error_set (err, PS_ESHAPE, "%s: labels of element type '%s', expected "
                           "integer class indices (float targets are regression, which "
                           "needs integer classes here)", path, npy.descr);
    else
    if (!(*labels = malloc (npy.count ? npy.count : 1)))
        rc = ps_error_set (err, PS_EIO, "%s: out of memory for %zu labels", path, npy.count);
    for (size_t i = 0; rc == 0 && i < npy.count; i++) {
        int64_t label = ps_npy_int (&npy, i);
        if (label < 0 || label > 255) {
            free (*labels);
            *labels = NULL;
            rc = ps_error_set (err, PS_ECORRUPT, "%s: label %" PRId64 " at index %zu, expected "
                               "a class 0 .. 255", path, label, i);
        }
        else
            (*labels) [i] = (uint8_t) label;
    }
    if (rc == 0)
        *count = npy.count;
    ps_npy_close (&npy);
    return rc;
}

//  Element i of a numeric .npy array as a double.
static double
s_npy_value (const ps_npy_t *npy, size_t i)
{
    const char *at = (const char *) npy->data + i * (size_t) npy->itemsize;
    if (npy->dtype == PS_NPY_F32) {
        float value;
        memcpy (&value, at, sizeof value);
        return value;
    }
    if (npy->dtype == PS_NPY_F64) {
        double value;
        memcpy (&value, at, sizeof value);
        return value;
    }
    return (double) ps_npy_int (npy, i);
}

//  Read a regression model's targets at path, a .npy of numbers, [N] or
//  [N, 1] for one target an example and [N, targets] for more, into
//  *values (malloc'd float32, *count examples). IDX label files hold
//  classes, so they are refused. On error *values holds nothing to free.
static int
s_read_targets (const char *path, int targets, float **values, size_t *count,
                ps_error_t *err)
{
    bool is_npy;
    int rc = ps_npy_sniff (path, &is_npy, err);
    if (rc)
        return rc;
    if (!is_npy)
        return ps_error_set (err, PS_ESHAPE, "%s: IDX labels are integer classes, but the "
                             "model is a regression model (\"loss\": \"mse\") of %d "
                             "output%s; give its targets as a float32 or float64 .npy file "
                             "[N%s]", path, targets, targets == 1 ? "" : "s",
                             targets == 1 ? "" : ", outputs");
    ps_npy_t npy;
    if ((rc = ps_npy_open (path, &npy, err)))
        return rc;
    bool fits = npy.rank == 1 ? targets == 1
              : npy.rank == 2 && npy.dims [1] == (uint64_t) targets;
    if (!fits)
        rc = ps_error_set (err, PS_ESHAPE, "%s: targets of rank %d (second dimension %llu), "
                           "expected [N] or [N, %d] for a regression model of %d output%s",
                           path, npy.rank, npy.rank > 1 ? (unsigned long long) npy.dims [1]
                           : 0ULL, targets, targets, targets == 1 ? "" : "s");
    else
    if (!(*values = malloc ((npy.count ? npy.count : 1) * sizeof (float))))
        rc = ps_error_set (err, PS_EIO, "%s: out of memory for %zu targets", path, npy.count);
    for (size_t i = 0; rc == 0 && i < npy.count; i++) {
        double value = s_npy_value (&npy, i);
        if (!isfinite (value) || fabs (value) > FLT_MAX) {
            free (*values);
            *values = NULL;
            rc = ps_error_set (err, PS_ECORRUPT, "%s: target %g at index %zu, expected a "
                               "finite float32", path, value, i);
        }
        else
            (*values) [i] = (float) value;
    }
    if (rc == 0)
        *count = npy.dims [0];
    ps_npy_close (&npy);
    return rc;
}

//  Check that the labels match the images, and fill the rest of info:
//  the limit applied, and the classes of the labels kept.
static int
s_match (const char *image_path, const char *label_path, const uint8_t *labels,
         size_t label_count, size_t limit, ps_dataset_info_t *info, ps_error_t *err)
{
    if (label_count != info->count)
        return ps_error_set (err, PS_ESHAPE, "%s: %zu labels, but %s holds %zu images",
                             label_path, label_count, image_path, info->count);
    if (limit > 0 && limit < info->count)
        info->count = limit;
    int top = 0;
    for (size_t i = 0; labels && i < info->count; i++)
        if (labels [i] > top)
            top = labels [i];
    info->classes = labels ? top + 1 : 0;
    return 0;
}

//  Read a split's labels: classes (targets 0) into *labels, else targets
//  into *values.
static int
s_read_any (const char *path, int targets, uint8_t **labels, float **values, size_t *count,
            ps_error_t *err)
{
    return targets ? s_read_targets (path, targets, values, count, err)
                   : s_read_labels (path, labels, count, err);
}

//  Read and check both files of the split, and fill self from them.
static int
s_load (ps_dataset_t *self, const char *image_path, const char *label_path, size_t limit,
        ps_error_t *err)
{
    s_images_t im;
    ps_dataset_info_t info;
    size_t label_count;
    int rc = s_open_images (image_path, true, &im, &info, err);
    if (rc == PS_OK)
        rc = s_read_any (label_path, self->targets, &self->labels, &self->target_values,
                         &label_count, err);
    if (rc == PS_OK)
        rc = s_match (image_path, label_path, self->labels, label_count, limit, &info, err);
    if (rc == PS_OK) {
        self->count = info.count;
        self->rows = info.rows;
        self->cols = info.cols;
        self->channels = info.channels;
        self->classes = info.classes;
        self->pixels = (size_t) self->rows * (size_t) self->cols * (size_t) self->channels;
        self->perm = malloc ((self->count ? self->count : 1) * sizeof (uint32_t));
        if (!self->perm)
            rc = ps_error_set (err, PS_EIO, "%s: cannot allocate memory for %zu images",
                               image_path, self->count);
    }
    if (rc == PS_OK) {
        //  An [N, H, W, C] array is row-major, so it is NHWC already. The
        //  data moves into self, which frees or unmaps it.
        if (im.is_npy && im.npy.dtype == PS_NPY_F32)
            self->floats = im.npy.data;
        else
            self->bytes = im.is_npy ? im.npy.data : im.idx.data;
        self->owned = im.idx.data;
        self->npy = im.npy;
        memset (&im, 0, sizeof im);
    }
    s_images_close (&im);
    return rc;
}

ps_dataset_t *
ps_dataset_open (const char *dir, ps_split_t split, const char *images, const char *labels,
                 size_t limit, ps_error_t *err)
{
    return ps_dataset_open_targets (dir, split, images, labels, 0, limit, err);
}

ps_dataset_t *
ps_dataset_open_targets (const char *dir, ps_split_t split, const char *images,
                         const char *labels, int targets, size_t limit, ps_error_t *err)
{
    assert (targets >= 0);
    char image_path [PATH_MAX], label_path [PATH_MAX];
    if (s_split_files (dir, split, images, labels, image_path, label_path, sizeof image_path, err))
        return NULL;
    ps_dataset_t *self = calloc (1, sizeof (ps_dataset_t));
    if (!self) {
        ps_error_set (err, PS_EIO, "%s: cannot allocate a data set", image_path);
        return NULL;
    }
    self->targets = targets;
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
    return ps_dataset_probe_targets (dir, split, images, labels, 0, limit, info, err);
}

int
ps_dataset_probe_targets (const char *dir, ps_split_t split, const char *images,
                          const char *labels, int targets, size_t limit,
                          ps_dataset_info_t *info, ps_error_t *err)
{
    assert (info);
    char image_path [PATH_MAX], label_path [PATH_MAX];
    int rc = s_split_files (dir, split, images, labels, image_path, label_path, sizeof image_path,
                            err);
    if (rc)
        return rc;
    s_images_t im;
    ps_dataset_info_t probed;
    uint8_t *label_bytes = NULL;
    float *target_values = NULL;
    size_t label_count;
    rc = s_open_images (image_path, false, &im, &probed, err);
    if (rc == PS_OK)
        rc = s_read_any (label_path, targets, &label_bytes, &target_values, &label_count, err);
    if (rc == PS_OK)
        rc = s_match (image_path, label_path, label_bytes, label_count, limit, &probed, err);
    if (rc == PS_OK) {
        probed.targets = targets;
        *info = probed;
    }
    free (label_bytes);
    free (target_values);
    s_images_close (&im);
    return rc;
}

//  Fill self (an empty data set) from a CSV file read into csv, whose
//  arrays move into self.
static int
s_from_csv (ps_dataset_t *self, const char *path, ps_csv_t *csv, ps_error_t *err)
{
    self->count = csv->rows;
    self->rows = 1;
    self->cols = csv->features;
    self->channels = 1;
    self->pixels = (size_t) csv->features;
    int top = 0;
    for (size_t i = 0; csv->labels && i < csv->rows; i++)
        if (csv->labels [i] > top)
            top = csv->labels [i];
    self->classes = csv->labels ? top + 1 : 0;
    self->floats = (const char *) csv->values;
    self->labels = csv->labels;
    self->target_values = csv->targets;
    csv->labels = NULL;
    csv->targets = NULL;
    self->csv = *csv;
    memset (csv, 0, sizeof *csv);
    if (!(self->perm = malloc (self->count * sizeof (uint32_t))))
        return ps_error_set (err, PS_EIO, "%s: cannot allocate memory for %zu examples", path,
                             self->count);
    return 0;
}

ps_dataset_t *
ps_dataset_open_csv (const char *path, const char *label_column, size_t limit,
                     ps_error_t *err)
{
    return ps_dataset_open_csv_targets (path, label_column, 0, limit, err);
}

ps_dataset_t *
ps_dataset_open_csv_targets (const char *path, const char *label_column, int targets,
                             size_t limit, ps_error_t *err)
{
    assert (path && label_column);
    assert (targets >= 0);
    //  One column names the labels (--label-column); more than one target
    //  would need a naming rule of its own, and .npy files say [N, k]
    //  plainly, so those are where several targets go.
    if (targets > 1) {
        ps_error_set (err, PS_EINVAL, "%s: the model is a regression model of %d outputs, "
                      "but CSV data holds one target (the column \"%s\"); give %d targets "
                      "an example as a .npy labels file [N, %d]", path, targets, label_column,
                      targets, targets);
        return NULL;
    }
    ps_csv_t csv;
    if (ps_csv_read (path, label_column, targets > 0, limit, &csv, err))
        return NULL;
    ps_dataset_t *self = calloc (1, sizeof (ps_dataset_t));
    if (!self) {
        ps_csv_free (&csv);
        ps_error_set (err, PS_EIO, "%s: cannot allocate a data set", path);
        return NULL;
    }
    self->targets = targets;
    if (s_from_csv (self, path, &csv, err))
        ps_dataset_destroy (&self);
    return self;
}

int
ps_dataset_probe_csv (const char *path, const char *label_column, size_t limit,
                      ps_dataset_info_t *info, ps_error_t *err)
{
    return ps_dataset_probe_csv_targets (path, label_column, 0, limit, info, err);
}

int
ps_dataset_probe_csv_targets (const char *path, const char *label_column, int targets,
                              size_t limit, ps_dataset_info_t *info, ps_error_t *err)
{
    assert (info);
    ps_error_t local;
    ps_dataset_t *data = ps_dataset_open_csv_targets (path, label_column, targets, limit,
                                                      err ? err : &local);
    if (!data)
        return err ? err->code : local.code;
    *info = (ps_dataset_info_t) { .count = data->count, .rows = data->rows,
                                  .cols = data->cols, .channels = data->channels,
                                  .classes = data->classes, .targets = data->targets };
    ps_dataset_destroy (&data);
    return 0;
}

int
ps_dataset_check_model (const ps_dataset_t *self, const ps_model_t *model, ps_error_t *err)
{
    assert (self);
    assert (model);
    if (ps_model_targets (model) != self->targets)
        return ps_error_set (err, PS_ESHAPE, "model \"%s\" does not fit the data: it %s, but "
                             "the data set's labels were read as %s", ps_model_name (model),
                             ps_model_regression (model) ? "is a regression model" : "is a "
                             "classifier", self->targets ? "regression targets" : "classes");
    return ps_model_check_input (model, self->rows, self->cols, self->channels, self->classes,
                                 err);
}

void
ps_dataset_destroy (ps_dataset_t **self_p)
{
    assert (self_p);
    ps_dataset_t *self = *self_p;
    if (self) {
        free (self->owned);
        ps_csv_free (&self->csv);
        ps_npy_close (&self->npy);
        free (self->labels);
        free (self->target_values);
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

//  Copy example i's values, as floats, to x.
static void
s_values (const ps_dataset_t *self, size_t i, float *x)
{
    if (self->floats) {
        memcpy (x, self->floats + i * self->pixels * sizeof (float),
                self->pixels * sizeof (float));
        return;
    }
    const uint8_t *at = self->bytes + i * self->pixels;
    for (size_t p = 0; p < self->pixels; p++)
        x [p] = (float) at [p] / 255.0f;
}

void
ps_dataset_image (const ps_dataset_t *self, size_t i, float *x)
{
    assert (self);
    assert (i < self->count);
    s_values (self, i, x);
}

uint8_t
ps_dataset_label (const ps_dataset_t *self, size_t i)
{
    assert (self);
    assert (i < self->count);
    assert (self->labels);
    return self->labels [i];
}

int
ps_dataset_targets (const ps_dataset_t *self)
{
    assert (self);
    return self->targets;
}

size_t
ps_dataset_label_size (const ps_dataset_t *self)
{
    assert (self);
    return self->targets ? (size_t) self->targets * sizeof (float) : 1;
}

void
ps_dataset_target (const ps_dataset_t *self, size_t i, float *y)
{
    assert (self);
    assert (i < self->count);
    assert (self->target_values);
    memcpy (y, self->target_values + i * (size_t) self->targets,
            (size_t) self->targets * sizeof (float));
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
    s_values (self, i, x + k * self->pixels);
    if (self->targets) {
        size_t size = (size_t) self->targets * sizeof (float);
        memcpy (labels + k * size, self->target_values + i * (size_t) self->targets, size);
    }
    else
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
    for (size_t k = 0; k < copy; k++)
        s_copy (self, first + k, k, x, labels);
    return (int) copy;
}
