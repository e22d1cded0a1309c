//  The benchmarks' machine-readable rows (harness_benchrow.h).

#include "harness_benchrow.h"

#include <math.h>
#include <stdio.h>

harness_goal_t
harness_goal (bool met)
{
    return met ? HARNESS_GOAL_MET : HARNESS_GOAL_NOT_MET;
}

//  Print a text field: a tab or a newline inside it would split the row.
static void
s_field (const char *text)
{
    putchar ('\t');
    if (!text || !*text) {
        putchar ('-');
        return;
    }
    for (const char *c = text; *c; c++)
        putchar (*c == '\t' || *c == '\n' || *c == '\r' ? ' ' : *c);
}

//  Print a number field; one that is not finite cannot be compared: "-".
static void
s_number (double value)
{
    if (isfinite (value))
        printf ("\t%.6g", value);
    else
        printf ("\t-");
}

void
harness_benchrow (const char *bench, const char *row, const char *anchor,
                  double anchor_value, double ours, const char *unit,
                  harness_better_t better, const char *goal, harness_goal_t met)
{
    fputs ("BENCHROW", stdout);
    s_field (bench);
    s_field (row);
    s_field (anchor);
    s_number (anchor ? anchor_value : NAN);
    s_number (ours);
    s_field (unit);
    s_field (better == HARNESS_HIGHER_BETTER ? "higher" : "lower");
    //  Only a positive pair has a ratio; a zero would make it infinite.
    double ratio = NAN;
    if (anchor && anchor_value > 0 && ours > 0)
        ratio = better == HARNESS_HIGHER_BETTER ? ours / anchor_value : anchor_value / ours;
    s_number (ratio);
    s_field (goal);
    s_field (met == HARNESS_GOAL_MET ? "met" : met == HARNESS_GOAL_NOT_MET ? "NOT met" : NULL);
    putchar ('\n');
    fflush (stdout);
}
