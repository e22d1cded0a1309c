//  CSV data for a classifier or a regression model: a header row naming
//  the columns, then one example a line, every cell a number. One column,
//  named by the caller, holds the class labels (integers 0 to 255) or, for
//  a regression model, the float target; every other column is a feature,
//  in file order. The file is plain or gzip (read through
//  zlib's gz* interface, which passes a plain file through).
//
//  The file is streamed, a line at a time, and parsed once: the labels
//  (a byte or a float an example) are kept in memory, and the float32
//  features are written to an unlinked temporary file (in $TMPDIR, or
//  /var/tmp, which is on disk) that is then mapped read-only, so that a
//  data set larger than the memory is paged in as batches use it and
//  paged out under pressure, as a memory-mapped .npy file (ps_npy.h) is.
//  Every failure names the file and what was wrong, with the line and
//  the column for a bad cell; nothing is returned half read.

#ifndef PS_CSV_H_INCLUDED
#define PS_CSV_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"

typedef struct {
    size_t rows;                //  examples read
    int features;               //  columns less the label's
    const float *values;        //  rows * features, row-major, mapped read-only
    size_t mapped;              //  the mapping's bytes
    uint8_t *labels;            //  rows, owned; NULL when reading targets
    float *targets;             //  rows, owned, when reading targets; else NULL
} ps_csv_t;

//  Read the CSV file at path, its labels from column label_column, into
//  *out (ps_csv_free frees it): classes into out->labels or, when targets
//  is true, any finite number into out->targets. limit > 0 stops after that many examples.
//  Returns 0; PS_ENOTFOUND or PS_EIO for the file; PS_ECORRUPT for a
//  header without the label column, a line with another number of cells
//  than the header, a cell that is not a finite number, a label that is
//  not an integer 0 .. 255, or no examples at all; PS_EIO naming the
//  temporary directory when the features cannot be written there (full).
int ps_csv_read (const char *path, const char *label_column, bool targets, size_t limit,
                 ps_csv_t *out, ps_error_t *err);

void ps_csv_free (ps_csv_t *csv);

#endif
