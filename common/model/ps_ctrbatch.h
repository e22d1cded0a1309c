//  A batch of click-through-rate examples as the CTR trainer consumes it:
//  labels, dense numeric features, and the categorical ids of each example
//  grouped by field in compressed-sparse-row form, with a weight per id
//  where the format has one.
//
//  Example i's ids of field f are ids [offsets [i * nfields + f] ..
//  offsets [i * nfields + f + 1]). A Criteo example has exactly one id per
//  field (26 fields) and no weights; a LIBSVM example has one field holding
//  all of its features, each id with its value as weight. The batch is
//  made once for the largest batch a reader will fill, so that reading
//  allocates nothing per batch; only a LIBSVM example with more features
//  than the room left grows the id arrays, which keep their size after.

#ifndef PS_CTRBATCH_H_INCLUDED
#define PS_CTRBATCH_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_error.h"

//  The text formats read (schemas/data.md): Criteo's tab-separated lines
//  (label, 13 integer features, 26 categorical ones) and LIBSVM/SVMlight
//  lines (label, then index:value pairs).
typedef enum {
    PS_CTR_CRITEO,
    PS_CTR_LIBSVM,
} ps_ctrformat_t;

#define PS_CTR_CRITEO_DENSE   13
#define PS_CTR_CRITEO_FIELDS  26

//  Parse "criteo" or "libsvm", and the reverse.
int ps_ctrformat_parse (const char *name, ps_ctrformat_t *format, ps_error_t *err);
const char *ps_ctrformat_name (ps_ctrformat_t format);

typedef struct {
    ps_ctrformat_t format;
    size_t n;                   //  examples held
    size_t max_n;               //  examples it has room for
    float *labels;              //  n labels, 0 or 1
    size_t ndense;              //  dense features per example: 13 Criteo, 0 LIBSVM
    float *dense;               //  n * ndense
    size_t nfields;             //  categorical fields per example: 26 Criteo, 1 LIBSVM
    uint32_t *offsets;          //  n * nfields + 1, offsets [0] = 0
    uint64_t *ids;              //  offsets [n * nfields] ids
    float *weights;             //  as many as ids; NULL for Criteo (every weight is 1)
    size_t ids_capacity;        //  room in ids (and weights)
    //  The line range the reader filled it from: lines [first_line,
    //  first_line + lines), of which `malformed` were skipped, so n =
    //  lines - malformed.
    uint64_t first_line;
    uint64_t lines;
    uint64_t malformed;
} ps_ctrbatch_t;

//  A batch for up to max_n examples of format. NULL and PS_ETOOBIG in err
//  when out of memory, PS_EINVAL when max_n is 0 or too large.
ps_ctrbatch_t *ps_ctrbatch_new (ps_ctrformat_t format, size_t max_n, ps_error_t *err);

//  Destroy a batch and set the caller's pointer to NULL.
void ps_ctrbatch_destroy (ps_ctrbatch_t **self_p);

//  Empty the batch for a range starting at first_line.
void ps_ctrbatch_clear (ps_ctrbatch_t *self, uint64_t first_line);

//  Make room for `more` ids beyond those held. Returns 0 or PS_ETOOBIG.
int ps_ctrbatch_reserve_ids (ps_ctrbatch_t *self, size_t more, ps_error_t *err);

#endif
