//  The Prometheus text exposition format (version 0.0.4), written: metric
//  families with their "# HELP" and "# TYPE" lines, samples with at most
//  one label, and histograms as cumulative "_bucket" lines with "le"
//  labels, "_sum" and "_count". It only formats: what the numbers are,
//  and when they are taken, is the caller's business (ps_metrics renders
//  a run's numbers with it).

#ifndef PS_PROMTEXT_H_INCLUDED
#define PS_PROMTEXT_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

typedef struct _ps_promtext_t ps_promtext_t;

//  Start an empty text. Aborts when out of memory, as the other builders
//  of small strings do.
ps_promtext_t *ps_promtext_new (void);

//  Free the text, set *self_p NULL.
void ps_promtext_destroy (ps_promtext_t **self_p);

//  Open a family: its "# HELP name help" and "# TYPE name type" lines;
//  type is "counter", "gauge" or "histogram". A counter's name ends in
//  "_total", and its samples carry that name.
void ps_promtext_family (ps_promtext_t *self, const char *name, const char *type,
                         const char *help);

//  One sample of the family opened last: "name value", or with a label
//  "name{label="value"} value" when label is not NULL. Numbers are
//  written so that they read back exactly; NaN and infinities as the
//  format spells them.
void ps_promtext_sample (ps_promtext_t *self, const char *name, const char *label,
                         const char *label_value, double value);

//  A whole histogram family: n upper bounds (increasing) with the count of
//  observations in each bucket (not cumulative: counts [i] fell in
//  (bounds [i-1], bounds [i]]), above_last those above the last bound,
//  and sum the sum of every observation.
void ps_promtext_histogram (ps_promtext_t *self, const char *name, const char *help,
                            const double *bounds, const uint64_t *counts, size_t n,
                            uint64_t above_last, double sum);

//  The text written so far, which the caller frees; the object is left
//  empty for the next text.
char *ps_promtext_take (ps_promtext_t *self);

#endif
