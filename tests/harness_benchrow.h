//  The benchmarks' machine-readable rows: one line per figure or goal that
//  a benchmark prints next to its human table, which tests/bench/run-all.sh
//  collects into one table of every benchmark. tests/bench/benchrow.py
//  prints the same line for the Python benchmarks; README.md (Benchmarks)
//  describes the format:
//
//    BENCHROW <bench> <row> <anchor> <anchor value> <ours> <unit> <better>
//             <ratio> <goal> <met>
//
//  tab-separated, one line, where better is "higher" or "lower" (which way
//  ours and the anchor improve) and ratio is how many times better ours is
//  than the anchor: ours / anchor when higher is better, anchor / ours
//  when lower is, so a ratio above 1 always favours ps-cluster. A row
//  without an anchor (an absolute figure) and a row without a goal print
//  "-" in those fields.

#ifndef PS_HARNESS_BENCHROW_H_INCLUDED
#define PS_HARNESS_BENCHROW_H_INCLUDED

#include <stdbool.h>

//  Which way a row's figures improve.
typedef enum {
    HARNESS_HIGHER_BETTER,      //  throughput, bandwidth, accuracy
    HARNESS_LOWER_BETTER        //  time, memory
} harness_better_t;

//  What a row says of its goal.
typedef enum {
    HARNESS_GOAL_NONE,          //  a figure without a goal: met prints "-"
    HARNESS_GOAL_MET,
    HARNESS_GOAL_NOT_MET
} harness_goal_t;

//  The goal state of a condition: HARNESS_GOAL_MET when met is true.
harness_goal_t harness_goal (bool met);

//  Print one BENCHROW line on stdout and flush it, so that a benchmark
//  killed later keeps the rows it printed. anchor may be NULL for a row
//  without one (anchor_value is then ignored); goal is the goal's text
//  (for example "ratio >= 0.60") or NULL for none. Tabs and newlines in
//  the texts are printed as spaces, so the line stays one row of fields.
void harness_benchrow (const char *bench, const char *row, const char *anchor,
                       double anchor_value, double ours, const char *unit,
                       harness_better_t better, const char *goal, harness_goal_t met);

#endif
