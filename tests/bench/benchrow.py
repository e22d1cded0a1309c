"""The benchmarks' machine-readable rows, for the Python benchmarks: the
same line tests/harness_benchrow.h prints for the C ones (its header and
README.md, Benchmarks, describe the fields), which tests/bench/run-all.sh
collects into one table of every benchmark."""

import math
import sys


def _field(text):
    # A tab or a newline inside a field would split the row.
    if text is None or text == '':
        return '-'
    return ' '.join(str(text).replace('\t', ' ').replace('\r', ' ').split('\n'))


def _number(value):
    if value is None or not math.isfinite(float(value)):
        return '-'
    return '%.6g' % float(value)


def row(bench, name, anchor, anchor_value, ours, unit, better, goal=None, met=None):
    """Print one BENCHROW line on stdout and flush it. anchor is None for a
    row without one; better is 'higher' or 'lower' (which way the figures
    improve); the ratio printed is ours / anchor when higher is better,
    anchor / ours when lower is, so above 1 favours ps-cluster. goal is the
    goal's text or None; met True, False or None (no goal)."""
    if better not in ('higher', 'lower'):
        raise ValueError('better is "higher" or "lower", not %r' % (better,))
    ratio = None
    if (anchor is not None and anchor_value is not None and ours is not None
            and anchor_value > 0 and ours > 0):
        ratio = ours / anchor_value if better == 'higher' else anchor_value / ours
    fields = ['BENCHROW', _field(bench), _field(name), _field(anchor),
              _number(anchor_value if anchor is not None else None), _number(ours),
              _field(unit), better, _number(ratio), _field(goal),
              '-' if met is None else ('met' if met else 'NOT met')]
    print('\t'.join(fields))
    sys.stdout.flush()
