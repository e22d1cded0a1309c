#!/usr/bin/env bash
# Every benchmark in tests/bench/, one after another, and one table of all
# their BENCHROW lines (tests/harness_benchrow.h, tests/bench/benchrow.py):
# per row the benchmark, the figure, its anchor measured in the same run,
# ps-cluster's figure, the ratio (above 1 favours ps-cluster) and the goal;
# then the machine the figures came from. It builds nothing.
#
# Usage: tests/bench/run-all.sh [--quick] [--only NAME,...] [--results DIR] [BUILD_DIR]
#   BUILD_DIR    a built tree (default $PS_BUILD_DIR, else build)
#   --quick      each benchmark's short run where it has one
#   --only       these benchmarks alone (names as in the list below)
#   --results    where the logs go (default a new directory under /tmp)
# Environment: PS_BENCH_TIMEOUT (seconds per benchmark, default 1800, 600
# with --quick), PS_BENCH_PYTHON (the Python with torch, default
# /usr/bin/python3), PS_BENCH_ARGS_<name> (more arguments for that
# benchmark, for example another --python), PS_BENCH_CMD_<name> (a command
# line run instead of that benchmark's; the test of this script uses it).
#
# A benchmark that exits non-zero, times out or prints no BENCHROW line is
# a FAILED row of the table, and the script exits 1 once all have run.
# Progress goes to stderr, the table to stdout.
set -u
quick=0 only="" results="" build="${PS_BUILD_DIR:-build}"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --only) [ $# -ge 2 ] || { echo "run-all.sh: --only takes a list of names" >&2; exit 2; }
            only=$2; shift ;;
    --results) [ $# -ge 2 ] || { echo "run-all.sh: --results takes a directory" >&2; exit 2; }
               results=$2; shift ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run-all.sh: unknown option '$1'" >&2; exit 2 ;;
    *) build=$1 ;;
  esac
  shift
done
# The build directory is the caller's; the Python benchmarks run from the
# source root, where their tests/bench/ paths are.
build=$(cd "$build" 2>/dev/null && pwd) || { echo "run-all.sh: no directory '$build'" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 2
bench="$build/tests/bench"
[ -x "$bench/bench_ledger" ] || {
  echo "run-all.sh: no benchmarks built in '$build' ($bench/bench_ledger); build first" >&2
  exit 2
}
py=${PS_BENCH_PYTHON:-/usr/bin/python3}
timeout_s=${PS_BENCH_TIMEOUT:-$([ $quick -eq 1 ] && echo 600 || echo 1800)}
results=${results:-$(mktemp -d /tmp/ps-bench.XXXXXX)} || exit 2
mkdir -p "$results" || exit 2

# name | full run | quick run. The quick runs are each benchmark's --quick
# or a smaller data set, with its peers (about 3 minutes in all on two
# cores); bench_apply's full run takes seconds, and a smaller array would
# fit in the caches and say nothing of its goal.
pb="$py tests/bench" on="--build $build"
scale_small="--limit-mib 4096 --capacity 256" small="--rows 200000"
ctr_small="--rows 20000 --models lr"
benches=(
  "bench_ledger|$bench/bench_ledger|$bench/bench_ledger 1000000"
  "bench_apply|$bench/bench_apply|$bench/bench_apply"
  "bench_ps|$bench/bench_ps|$bench/bench_ps --quick"
  "bench_ps_memory|$bench/bench_ps --memory|$bench/bench_ps --memory"
  "bench_cnn|$bench/bench_cnn|$bench/bench_cnn --quick --model cnn"
  "bench_allreduce|$bench/bench_allreduce|$bench/bench_allreduce --quick"
  "bench_sparse|$bench/bench_sparse|$bench/bench_sparse --quick"
  "bench_cluster|$pb/bench_cluster.py $on|$pb/bench_cluster.py $on --quick"
  "bench_modes|$pb/bench_modes.py $on|$pb/bench_modes.py $on --quick --workers 2"
  "bench_rpc|$pb/bench_rpc.py $on|$pb/bench_rpc.py $on --quick"
  "bench_ctr|$pb/bench_ctr.py $on --cluster|$pb/bench_ctr.py $on --cluster $ctr_small"
  "bench_ctr_scale|$pb/bench_ctr_scale.py $on|$pb/bench_ctr_scale.py $on --rows 20000 $scale_small"
  "bench_export_tables|$pb/bench_export_tables.py $build|$pb/bench_export_tables.py $build $small"
  "bench_memory|$pb/bench_memory.py $on|$pb/bench_memory.py $on"
)

# Every name --only gives must be a benchmark: a typo must not run nothing.
names=" "
for b in "${benches[@]}"; do names+="${b%%|*} "; done
for n in ${only//,/ }; do
  case "$names" in *" $n "*) ;; *) echo "run-all.sh: no benchmark '$n' (one of:$names)" >&2
                                   exit 2 ;; esac
done

start_load=$(cut -d' ' -f1-3 /proc/loadavg)
start_date=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
rows="$results/rows.tsv"
: >"$rows"
status=0
for b in "${benches[@]}"; do
  name=${b%%|*}; rest=${b#*|}; full=${rest%%|*}; short=${rest#*|}
  if [ -n "$only" ]; then
    case ",$only," in *",$name,"*) ;; *) continue ;; esac
  fi
  cmd=$full; [ $quick -eq 1 ] && cmd=$short
  cmd_var="PS_BENCH_CMD_$name" extra_var="PS_BENCH_ARGS_$name"
  cmd="${!cmd_var:-$cmd} ${!extra_var:-}"
  log="$results/$name.log"
  echo "run-all.sh: $name: $cmd (log $log)" >&2
  t0=$(date +%s)
  # shellcheck disable=SC2086  # cmd is a command line of words.
  timeout --kill-after=10 "$timeout_s" $cmd >"$log" 2>&1
  rc=$?
  echo "run-all.sh: $name: exit $rc after $(( $(date +%s) - t0 )) s" >&2
  n=$(grep -c '^BENCHROW	' "$log")
  grep '^BENCHROW	' "$log" >>"$rows"
  # A failed benchmark is a row of its own, even where it printed some
  # rows first: those are kept, and marked as coming from a failed run.
  why=""
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    why="timed out after $timeout_s s"
  elif [ $rc -ne 0 ]; then
    why="exit status $rc"
  elif [ "$n" -eq 0 ]; then
    why="printed no BENCHROW line"
  fi
  if [ -n "$why" ]; then
    status=1
    printf 'BENCHROW\t%s\tFAILED: %s (log %s)\t-\t-\t-\t-\t-\t-\t-\tFAILED\n' \
      "$name" "$why" "$log" >>"$rows"
  fi
done

echo "| benchmark | row | anchor | anchor value | ps-cluster | unit | better | ratio | goal | met |"
echo "|---|---|---|---|---|---|---|---|---|---|"
# The rows keep 6 significant digits; the table shows 4 (whole numbers
# from 1000 up), and the ratio 3.
awk -F'\t' '
function num(v, digits) {
  if (v !~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/)
    return v
  return (v >= 1000 || v <= -1000) ? sprintf("%.0f", v) : sprintf("%." digits "g", v)
}
$1 == "BENCHROW" {
  $5 = num($5, 4); $6 = num($6, 4); $9 = num($9, 3)
  line = "|"
  for (i = 2; i <= 11; i++) { v = $i; gsub(/\|/, "\\|", v); line = line " " v " |" }
  print line
}' OFS='\t' "$rows"
echo
cpu=$(grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//')
echo "- machine: ${cpu:-unknown CPU}, $(nproc) cores ($(uname -m)), host $(uname -n)"
echo "- load average (1, 5, 15 min): at start $start_load, at end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- date: $start_date to $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || rev+=" (with local changes)"
echo "- git: $rev"
echo "- run: $([ $quick -eq 1 ] && echo quick || echo full), build $build, logs in $results"
[ $status -eq 0 ] || echo "run-all.sh: a benchmark failed: see the FAILED rows" >&2
exit $status
