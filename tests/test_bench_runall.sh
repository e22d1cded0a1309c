#!/bin/bash
# tests/bench/run-all.sh on two fast benchmarks in their quick form
# (bench_ledger and bench_apply): one table with their BENCHROW rows, each
# with numbers where it has them, and the machine lines after it; exit 0.
# Then a benchmark that fails (bench_ledger given a bad argument through
# PS_BENCH_CMD_bench_ledger) is a FAILED row, the other's rows stay, and
# the exit status is non-zero; so is one that runs past PS_BENCH_TIMEOUT,
# and one that prints no row; an unknown name in --only is refused. And
# tests/bench/benchrow.py's ratio: ours / anchor when higher is better,
# anchor / ours when lower is. Nothing here depends on a timing.
#
# Usage: test_bench_runall.sh BUILD_DIR
set -u
build=${1:?usage: test_bench_runall.sh BUILD_DIR}
src=$(cd "$(dirname "$0")/.." && pwd)
runall="$src/tests/bench/run-all.sh"
work=$(mktemp -d /tmp/ps-runall-XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
fail () { echo "FAIL: $*"; failures=$((failures + 1)); }

# The table's rows of one benchmark: | bench | row | anchor | anchor value
# | ours | unit | better | ratio | goal | met |
rows_of () { grep "^| $1 |" "$2"; }

# 1. Both benchmarks pass: their rows, with numbers, and the machine.
"$runall" --quick --only bench_ledger,bench_apply --results "$work/ok" "$build" \
  >"$work/ok.out" 2>"$work/ok.err"
rc=$?
cat "$work/ok.out"
[ $rc -eq 0 ] || { fail "run-all.sh exited $rc on two passing benchmarks"; cat "$work/ok.err"; }
header='| benchmark | row | anchor | anchor value | ps-cluster | unit | better | ratio | goal |'
header+=' met |'
grep -qxF "$header" "$work/ok.out" || fail "no table header"
# The ledger's rows have no anchor: ours is a number, the ratio "-".
n=$(rows_of bench_ledger "$work/ok.out" | awk -F' [|] ' \
      '$5 ~ /^[0-9.e+-]+$/ && $4 == "-" && $8 == "-" { k++ } END { print k + 0 }')
[ "$n" -ge 2 ] || fail "bench_ledger: $n rows with a number and no anchor, expected 2 or more"
# bench_apply's rows: anchor, ours and ratio numbers; Adam's has its goal.
n=$(rows_of bench_apply "$work/ok.out" | awk -F' [|] ' \
      '$4 ~ /^[0-9.e+-]+$/ && $5 ~ /^[0-9.e+-]+$/ && $8 ~ /^[0-9.e+-]+$/ { k++ }
       END { print k + 0 }')
[ "$n" -ge 5 ] || fail "bench_apply: $n rows with anchor, ours and ratio numbers, expected 5"
rows_of bench_apply "$work/ok.out" | grep 'adam apply, 2 threads' | grep -q ' met \|NOT met' \
  || fail "bench_apply: Adam's row does not say whether its goal is met"
grep -q '^- machine: .*[0-9]* cores' "$work/ok.out" || fail "no machine line"
grep -q '^- load average (1, 5, 15 min): at start [0-9.]* [0-9.]* [0-9.]*, at end [0-9.]*' \
  "$work/ok.out" || fail "no load average line"
grep -q '^- date: ' "$work/ok.out" || fail "no date line"
grep -q '^- git: ' "$work/ok.out" || fail "no git line"
for b in bench_ledger bench_apply; do
  [ -s "$work/ok/$b.log" ] || fail "no log of $b in the results directory"
done
grep -q 'run-all.sh: bench_apply: ' "$work/ok.err" || fail "no progress on stderr"

# 2. A failing benchmark is a FAILED row and a non-zero exit; the other's
# rows are still there.
PS_BENCH_CMD_bench_ledger="$build/tests/bench/bench_ledger not-a-number" \
  "$runall" --quick --only bench_ledger,bench_apply --results "$work/bad" "$build" \
  >"$work/bad.out" 2>"$work/bad.err"
rc=$?
cat "$work/bad.out"
[ $rc -ne 0 ] || fail "run-all.sh exited 0 with a failing benchmark"
rows_of bench_ledger "$work/bad.out" | grep -q 'FAILED: exit status 2 .*| FAILED |$' \
  || fail "the failing bench_ledger has no FAILED row"
[ "$(rows_of bench_apply "$work/bad.out" | wc -l)" -ge 5 ] \
  || fail "bench_apply's rows are missing when bench_ledger failed"
grep -q '^- machine: ' "$work/bad.out" || fail "no machine line after a failure"

# 3. A benchmark past its timeout, and one that prints no row, are FAILED
# rows too (sleep stands in for a benchmark that hangs).
PS_BENCH_TIMEOUT=1 PS_BENCH_CMD_bench_ledger="sleep 30" PS_BENCH_CMD_bench_apply="true" \
  "$runall" --quick --only bench_ledger,bench_apply --results "$work/slow" "$build" \
  >"$work/slow.out" 2>"$work/slow.err"
rc=$?
cat "$work/slow.out"
[ $rc -ne 0 ] || fail "run-all.sh exited 0 with a benchmark past its timeout"
rows_of bench_ledger "$work/slow.out" | grep -q 'FAILED: timed out after 1 s' \
  || fail "the benchmark past its timeout has no FAILED row"
rows_of bench_apply "$work/slow.out" | grep -q 'FAILED: printed no BENCHROW line' \
  || fail "the benchmark without rows has no FAILED row"

# 4. A name that is no benchmark is refused, not run as nothing.
"$runall" --quick --only bench_nothing "$build" >"$work/none.out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--only bench_nothing exited $rc, expected 2"
grep -q "no benchmark 'bench_nothing'" "$work/none.out" || fail "--only bench_nothing: no message"

# 5. benchrow.py's ratio is above 1 where ps-cluster is better, either way.
out=$(cd "$src/tests/bench" && python3 -c '
import benchrow
benchrow.row("b", "time", "peer", 3.0, 1.0, "s", "lower", "ratio >= 2", True)
benchrow.row("b", "rate", "peer", 2.0, 1.0, "1/s", "higher")
benchrow.row("b", "alone", None, None, 5.0, "B", "lower")')
expect=$(printf 'BENCHROW\tb\ttime\tpeer\t3\t1\ts\tlower\t3\tratio >= 2\tmet
BENCHROW\tb\trate\tpeer\t2\t1\t1/s\thigher\t0.5\t-\t-
BENCHROW\tb\talone\t-\t-\t5\tB\tlower\t-\t-\t-')
[ "$out" = "$expect" ] || fail "benchrow.py printed:
$out
expected:
$expect"

[ $failures -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "test_bench_runall: all checks passed"
