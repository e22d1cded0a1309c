#!/usr/bin/env bash
# Run one libFuzzer target of the fuzz build, or replay its inputs.
#
#   tests/fuzz/run.sh TARGET [SECONDS]          fuzz for a short while (default 10 s), as the test suite does
#   tests/fuzz/run.sh --long TARGET [SECONDS]   fuzz for long (default 3600 s) on a corpus kept between runs
#   tests/fuzz/run.sh --replay TARGET           run the target's inputs once each, without libFuzzer
#
# TARGET is one of: msg server tfconfig job model snapshot checkpoint idx.
# Fuzzing needs the fuzz build, in build-fuzz (or $PS_FUZZ_BUILD):
#   CC=clang meson setup build-fuzz -Dfuzz=true -Dbuildtype=debugoptimized && ninja -C build-fuzz
# --replay runs fuzz_replay_TARGET of a gcc build, in build (or $PS_FUZZ_BUILD).
#
# A target's inputs are the seeds its build generated (tests/fuzz/seeds),
# the files committed in tests/fuzz/corpus/TARGET (seeds, and every input
# that once broke a target) and the fixtures named below. Fuzzing copies
# them into a work directory in the build tree, so the source tree is never
# written: build-fuzz/tests/fuzz/work/TARGET, made afresh for a short run,
# or build-fuzz/tests/fuzz/long/TARGET, kept and grown by long runs. A
# crash, leak, timeout or broken oracle fails the run; the input that
# caused it is left in the work directory, and the command that replays it
# is printed.
set -u

mode=short
case ${1:-} in
  --long) mode=long; shift ;;
  --replay) mode=replay; shift ;;
esac
if [ $# -lt 1 ] || [ $# -gt 2 ] || { [ $mode = replay ] && [ $# -ne 1 ]; }; then
  sed -n '4,6p' "$0" | sed 's/^# *//' >&2
  exit 2
fi
target=$1
seconds=${2:-$([ $mode = long ] && echo 3600 || echo 10)}
src=$(cd "$(dirname "$0")/../.." && pwd)

case $target in
  msg|server|snapshot|checkpoint|idx|tfconfig) fixtures=() ;;
  job) fixtures=("$src"/schemas/jobs/*.json "$src"/deploy/compose-job.json) ;;
  model) fixtures=("$src"/schemas/models/*.json) ;;
  *) echo "unknown fuzz target '$target', expected one of: msg server tfconfig job model snapshot checkpoint idx" >&2
     exit 2 ;;
esac

if [ $mode = replay ]; then
  build=${PS_FUZZ_BUILD:-$src/build}
  exe=$build/tests/fuzz/fuzz_replay_$target
else
  build=${PS_FUZZ_BUILD:-$src/build-fuzz}
  exe=$build/tests/fuzz/fuzz_$target
fi
if [ ! -x "$exe" ]; then
  echo "$exe is missing: build it first (see the top of $0)" >&2
  exit 2
fi
inputs=()
for dir in "$build/tests/fuzz/seeds/$target" "$src/tests/fuzz/corpus/$target"; do
  [ -d "$dir" ] && inputs+=("$dir")
done
inputs+=("${fixtures[@]}")

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if [ $mode = replay ]; then
  exec "$exe" "${inputs[@]}"
fi

if [ $mode = long ]; then
  work=$build/tests/fuzz/long/$target
else
  work=$build/tests/fuzz/work/$target
  rm -rf "$work"
fi
mkdir -p "$work/corpus" || exit 2
for input in "${inputs[@]}"; do
  if [ -d "$input" ]; then
    cp -r "$input/." "$work/corpus/" || exit 2
  else
    cp "$input" "$work/corpus/" || exit 2
  fi
done

# The targets make their scratch directories (fuzz_scratch.h) in one of
# this run's, removed at the end even when a crashed target, or a child of
# -minimize_crash, could not remove its own.
tmp_base=/dev/shm
[ -w "$tmp_base" ] || tmp_base=${TMPDIR:-/tmp}
PS_FUZZ_TMPDIR=$(mktemp -d "$tmp_base/ps-fuzz-run.XXXXXX") || exit 2
export PS_FUZZ_TMPDIR
trap 'rm -rf "$PS_FUZZ_TMPDIR"' EXIT

# The sanitizers stop at the first report (the build compiles UBSan without
# recovery); libFuzzer also fails on a leak and on an input slower than
# -timeout.
log=$work/fuzz.log
"$exe" -max_total_time="$seconds" -timeout=60 -print_final_stats=1 \
  -artifact_prefix="$work/" "$work/corpus" >"$log" 2>&1
rc=$?

stat () { sed -n "s/^stat::$1: *//p" "$log" | tail -n 1; }
if [ $rc -ne 0 ]; then
  tail -n 80 "$log"
  echo
  echo "fuzz_$target FAILED (exit $rc); full log: $log"
  for found in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* "$work"/slow-unit-*; do
    [ -e "$found" ] && echo "replay: $exe $found"
  done
  exit 1
fi
echo "fuzz_$target: $(stat number_of_executed_units) runs in $seconds s," \
     "$(stat average_exec_per_sec) exec/s, $(stat new_units_added) new units," \
     "corpus $(find "$work/corpus" -type f | wc -l) files, peak RSS $(stat peak_rss_mb) MB"
