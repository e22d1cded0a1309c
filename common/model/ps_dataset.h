//  Data sets: images and their class labels loaded from a pair of IDX
//  files (Fashion-MNIST's or MNIST's by default, or any a user names),
//  with pixels scaled to [0, 1], and the deterministic batching every
//  process of a cluster agrees on.
//
//  A split is a pair of files, images and labels, or one CSV file
//  (ps_dataset_open_csv). Each file of a pair is IDX or NumPy .npy, told
//  apart by its first bytes. An IDX
//  images file is [N, H, W] (one channel) or [N, H, W, C] with C 1 or 3,
//  unsigned bytes, any H and W, read into memory; a .npy one is uint8 or
//  float32, [N, F] (flat features, 1 x F x 1), [N, H, W] or [N, H, W, C],
//  and is memory-mapped (ps_npy.h), so that it need not fit in memory.
//  Bytes are scaled to [0, 1], floats taken as they are. Labels are IDX
//  [N] bytes or a .npy [N] of integers 0 .. 255, so 1 to 256 classes,
//  inferred from the labels: the largest label kept, plus one. A
//  regression model's data set holds k float targets an example instead
//  (ps_dataset_open_targets), from a float .npy or a CSV column. Examples
//  come out as NHWC floats, which is how the models read them.
//
//  Epoch e's order is a permutation of the training set that is a pure
//  function of (seed, e): a Fisher-Yates shuffle driven by the counter-based
//  generator of ps_mix.h (the exact formula, for other implementations to
//  reproduce, heads ps_dataset.c). Any process can therefore compute the examples of batch b of
//  epoch e on its own, and every example appears exactly once per epoch.
//  Batch b holds positions [b * batch, min ((b + 1) * batch, count)) of the
//  permutation, so the last batch of an epoch may be short.

#ifndef PS_DATASET_H_INCLUDED
#define PS_DATASET_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"
#include "ps_model.h"

//  Where Debian's dataset-fashion-mnist package installs the files.
#define PS_DATASET_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"

typedef struct ps_dataset_t ps_dataset_t;

typedef enum {
    PS_SPLIT_TRAIN,             //  train-images-idx3-ubyte(.gz), train-labels-idx1-ubyte(.gz)
    PS_SPLIT_TEST,              //  t10k-images-idx3-ubyte(.gz), t10k-labels-idx1-ubyte(.gz)
} ps_split_t;

//  Load one split from dir's files of Fashion-MNIST's names, taking the
//  .gz file when present and the raw file otherwise. Checks the shapes
//  above and that labels and images are as many. limit > 0 keeps only the
//  first limit examples (for quick runs); 0 keeps all. NULL with a message
//  naming the file on error: PS_ENOTFOUND when neither file exists,
//  PS_ESHAPE for a rank, type or count mismatch, PS_ECORRUPT for a label
//  that is no class, or what ps_idx_read and ps_npy_open return.
ps_dataset_t *ps_dataset_load (const char *dir, ps_split_t split, size_t limit, ps_error_t *err);

//  Load one split from the files images and labels (IDX, plain or gzip,
//  or .npy) when both are given (not NULL, not empty), else from dir as
//  ps_dataset_load does; checked and limited as ps_dataset_load does.
//  PS_EINVAL when only one of the two files is given.
ps_dataset_t *ps_dataset_open (const char *dir, ps_split_t split, const char *images,
                               const char *labels, size_t limit, ps_error_t *err);
void ps_dataset_destroy (ps_dataset_t **self_p);

//  What a split holds, as ps_dataset_probe reads it.
typedef struct {
    size_t count;               //  examples, after the limit
    int rows, cols, channels;
    int classes;                //  the largest label kept plus one; 0 for targets
    int targets;                //  float targets an example (regression), or 0
} ps_dataset_info_t;

//  The sizes of one split without loading its images: reads the IDX
//  headers of the files ps_dataset_open would read and checks what they
//  show as it does (ranks, channels, equal image and label counts), and
//  reads the labels (one byte an example) for the classes; limit applies
//  the same way. The length of the images' data is not checked, so a
//  split that probes well may still fail to load. Returns 0 with *info
//  set, or the error ps_dataset_load would give, naming the file, with
//  *info untouched.
int ps_dataset_probe (const char *dir, ps_split_t split, const char *images,
                      const char *labels, size_t limit, ps_dataset_info_t *info,
                      ps_error_t *err);

//  As ps_dataset_open and ps_dataset_probe, for a regression model of
//  `targets` outputs (ps_model_targets; 0 reads classes, as those do): the
//  labels file is a .npy of numbers (float32 and float64 as a user gives
//  them, integers taken as values), [N] or [N, 1] for one target, [N,
//  targets] for more, each a finite float32, kept as float32 targets
//  (ps_dataset_target). An IDX labels file holds classes and is refused
//  (PS_ESHAPE, saying so); PS_ECORRUPT names a target that is not finite.
ps_dataset_t *ps_dataset_open_targets (const char *dir, ps_split_t split, const char *images,
                                       const char *labels, int targets, size_t limit,
                                       ps_error_t *err);
int ps_dataset_probe_targets (const char *dir, ps_split_t split, const char *images,
                              const char *labels, int targets, size_t limit,
                              ps_dataset_info_t *info, ps_error_t *err);

//  Load one split from a CSV file (ps_csv.h): the column label_column
//  holds the classes and every other column is a feature, so that each
//  example is 1 x features x 1 (a flat model's input). limit as for
//  ps_dataset_load. NULL with the reader's message on error.
ps_dataset_t *ps_dataset_open_csv (const char *path, const char *label_column, size_t limit,
                                   ps_error_t *err);

//  What ps_dataset_open_csv would load, as ps_dataset_probe says it (the
//  file is parsed whole: CSV has no header of sizes).
int ps_dataset_probe_csv (const char *path, const char *label_column, size_t limit,
                          ps_dataset_info_t *info, ps_error_t *err);

//  As ps_dataset_open_csv and ps_dataset_probe_csv, for a regression model
//  of `targets` outputs (0 reads classes): label_column holds each
//  example's target, any finite number. A CSV file holds one target an
//  example, so targets > 1 is refused (PS_EINVAL, pointing to .npy
//  labels [N, targets]).
ps_dataset_t *ps_dataset_open_csv_targets (const char *path, const char *label_column,
                                           int targets, size_t limit, ps_error_t *err);
int ps_dataset_probe_csv_targets (const char *path, const char *label_column, int targets,
                                  size_t limit, ps_dataset_info_t *info, ps_error_t *err);

//  Check that model takes this data set's images and has a class for each
//  of its labels (ps_model_check_input), or, for a regression model, that
//  the data set holds as many targets an example as it has outputs.
int ps_dataset_check_model (const ps_dataset_t *self, const ps_model_t *model,
                            ps_error_t *err);

size_t ps_dataset_count (const ps_dataset_t *self);
int ps_dataset_rows (const ps_dataset_t *self);
int ps_dataset_cols (const ps_dataset_t *self);
int ps_dataset_channels (const ps_dataset_t *self);

//  The classes of the labels kept: the largest plus one, 1 to 256.
int ps_dataset_classes (const ps_dataset_t *self);

//  Copy example i, rows * cols * channels floats (NHWC), to x.
void ps_dataset_image (const ps_dataset_t *self, size_t i, float *x);

//  Example i's class (a classifier's data set only).
uint8_t ps_dataset_label (const ps_dataset_t *self, size_t i);

//  The float targets an example (a regression data set), or 0 (classes).
int ps_dataset_targets (const ps_dataset_t *self);

//  Bytes of one example's label in the buffers ps_dataset_batch and
//  ps_dataset_slice fill: 1 (a class), or 4 * targets (float32 targets,
//  host order; ps_model_label_size says the same of the model).
size_t ps_dataset_label_size (const ps_dataset_t *self);

//  Copy example i's targets (a regression data set) to y.
void ps_dataset_target (const ps_dataset_t *self, size_t i, float *y);

//  Number of batches in an epoch: ceil (count / batch); 0 when batch <= 0.
size_t ps_dataset_batches (const ps_dataset_t *self, int batch);

//  Write into perm [0, count) epoch `epoch`'s order for `seed`.
void ps_dataset_permutation (const ps_dataset_t *self, uint64_t seed, uint64_t epoch,
                             uint32_t *perm);

//  Write into perm [0, count) epoch `epoch`'s shuffle of count items for
//  `seed`, the one ps_dataset_permutation uses (see ps_dataset.c): the
//  order of a CTR epoch's blocks of lines (worker/ps_ctrplan.h) too.
void ps_dataset_shuffle (uint64_t seed, uint64_t epoch, uint32_t count, uint32_t *perm);

//  Copy batch b of epoch `epoch` into x (batch * rows * cols * channels
//  floats) and labels (batch * ps_dataset_label_size bytes); returns the
//  number of examples copied (batch, or fewer for the last batch; the
//  slots past it are left alone), or
//  PS_EINVAL when b is past the epoch's end or batch <= 0.
//  The epoch's permutation is computed once and kept, so walking an epoch
//  costs O(count) in all; asking for another epoch recomputes it.
int ps_dataset_batch (ps_dataset_t *self, uint64_t seed, uint64_t epoch, size_t b,
                      int batch, float *x, uint8_t *labels, ps_error_t *err);

//  Copy examples [first, first + n) in file order (evaluation needs no
//  shuffle), labels as ps_dataset_batch does; returns the number copied
//  (fewer at the end, 0 when first is past it), or PS_EINVAL when n < 0.
int ps_dataset_slice (const ps_dataset_t *self, size_t first, int n, float *x, uint8_t *labels);

#endif
