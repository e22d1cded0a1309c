//  Data sets: Fashion-MNIST (or MNIST) loaded from IDX files, with pixels
//  scaled to [0, 1], and the deterministic batching every process of a
//  cluster agrees on.
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

//  Where Debian's dataset-fashion-mnist package installs the files.
#define PS_DATASET_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"

typedef struct ps_dataset_t ps_dataset_t;

typedef enum {
    PS_SPLIT_TRAIN,             //  train-images-idx3-ubyte(.gz), train-labels-idx1-ubyte(.gz)
    PS_SPLIT_TEST,              //  t10k-images-idx3-ubyte(.gz), t10k-labels-idx1-ubyte(.gz)
} ps_split_t;

//  Load one split from dir, taking the .gz file when present and the raw
//  file otherwise. Checks that images are [N, rows, cols], labels [N] with
//  the same N, and every label < 10. limit > 0 keeps only the first limit
//  examples (for quick runs); 0 keeps all. NULL with a message naming the
//  file on error: PS_ENOTFOUND when neither file exists, PS_ESHAPE for a
//  rank or count mismatch, PS_ECORRUPT for a bad label, or what
//  ps_idx_read returns.
ps_dataset_t *ps_dataset_load (const char *dir, ps_split_t split, size_t limit, ps_error_t *err);
void ps_dataset_destroy (ps_dataset_t **self_p);

//  The sizes of one split without loading it: reads only the IDX headers of
//  the files ps_dataset_load would read, checks what they show as it does
//  (ranks, equal image and label counts) and applies limit the same way.
//  Labels and the length of the data are not checked, so a split that
//  probes well may still fail to load. Returns 0 with *count, *rows and
//  *cols set, or the error ps_dataset_load would give, naming the file,
//  with the outputs untouched.
int ps_dataset_probe (const char *dir, ps_split_t split, size_t limit, size_t *count,
                      int *rows, int *cols, ps_error_t *err);

size_t ps_dataset_count (const ps_dataset_t *self);
int ps_dataset_rows (const ps_dataset_t *self);
int ps_dataset_cols (const ps_dataset_t *self);
//  Fashion-MNIST and MNIST have 10 classes; labels are checked against it.
#define PS_DATASET_CLASSES 10

int ps_dataset_classes (const ps_dataset_t *self);     //  PS_DATASET_CLASSES

//  Example i: rows * cols floats in [0, 1], row-major (NHWC with c = 1).
const float *ps_dataset_image (const ps_dataset_t *self, size_t i);
uint8_t ps_dataset_label (const ps_dataset_t *self, size_t i);

//  Number of batches in an epoch: ceil (count / batch); 0 when batch <= 0.
size_t ps_dataset_batches (const ps_dataset_t *self, int batch);

//  Write into perm [0, count) epoch `epoch`'s order for `seed`.
void ps_dataset_permutation (const ps_dataset_t *self, uint64_t seed, uint64_t epoch,
                             uint32_t *perm);

//  Write into perm [0, count) epoch `epoch`'s shuffle of count items for
//  `seed`, the one ps_dataset_permutation uses (see ps_dataset.c): the
//  order of a CTR epoch's blocks of lines (worker/ps_ctrplan.h) too.
void ps_dataset_shuffle (uint64_t seed, uint64_t epoch, uint32_t count, uint32_t *perm);

//  Copy batch b of epoch `epoch` into x (batch * rows * cols floats) and
//  labels (batch bytes); returns the number of examples copied (batch, or
//  fewer for the last batch; the slots past it are left alone), or
//  PS_EINVAL when b is past the epoch's end or batch <= 0.
//  The epoch's permutation is computed once and kept, so walking an epoch
//  costs O(count) in all; asking for another epoch recomputes it.
int ps_dataset_batch (ps_dataset_t *self, uint64_t seed, uint64_t epoch, size_t b,
                      int batch, float *x, uint8_t *labels, ps_error_t *err);

//  Copy examples [first, first + n) in file order (evaluation needs no
//  shuffle); returns the number copied (fewer at the end, 0 when first is
//  past it), or PS_EINVAL when n < 0.
int ps_dataset_slice (const ps_dataset_t *self, size_t first, int n, float *x, uint8_t *labels);

#endif
