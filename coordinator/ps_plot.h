//  coordinator plot: a metrics file (schemas/metrics.md) drawn as a PNG
//  with gnuplot. Three panels over the step: the training loss (and each
//  evaluation's test loss; a regression model's is its mse, and its test
//  mae is drawn beside it), the training and test accuracy (each
//  evaluation a point), and the samples per second; every failure of a
//  worker or server and every recovery (a restore from a checkpoint, or a
//  failed task registered again) is a labelled vertical line across the
//  panels, at the step the run had reached when it happened.
//
//  The curves come from the "progress" records, the points from "eval";
//  an event with no step of its own is placed by its time between the
//  progress records around it. gnuplot (Debian's gnuplot-nox) renders
//  with its pngcairo terminal from a script and data files in a
//  temporary directory, removed afterwards.

#ifndef PS_PLOT_H_INCLUDED
#define PS_PLOT_H_INCLUDED

#include <stddef.h>

#include "ps_error.h"

typedef struct {
    const char *metrics_path;
    const char *out_path;       //  the PNG to write
    int width, height;          //  in pixels
} ps_plot_config_t;

//  What was drawn.
typedef struct {
    size_t progress, evaluations, failures, recoveries;
    double last_step;
} ps_plot_summary_t;

//  Draw. Returns 0, or a negative code with err saying what was wrong:
//  the metrics file cannot be read, a line is not a JSON object (its
//  number), the file has no progress records, gnuplot is not installed or
//  failed (its first line of error).
int ps_plot_run (const ps_plot_config_t *cfg, ps_plot_summary_t *summary, ps_error_t *err);

#endif
