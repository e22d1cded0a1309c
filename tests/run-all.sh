#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every test in a
# release build and again in an AddressSanitizer + UBSan build, run every
# libFuzzer target for 10 seconds in a clang fuzz build, and end with the
# line "N passed, N failed, N skipped" over all three, after a line for
# each skipped test with the reason it printed and, for each failed one,
# its name and the end of its output.
set -u
cd "$(dirname "$0")/.." || exit 1
bash deploy/install-deps.sh || { echo "dependency installation failed"; exit 1; }

run_config () {
  local dir=$1 tests=$2; shift 2
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }
    rm -f "$dir.setup.log"
  fi
  # A log from an earlier run must not be counted for this one.
  rm -f "$dir/meson-logs/testlog.json"
  ninja -C "$dir" || return 1
  # Benchmarks are not tests; every test has its own timeout. The counts
  # below come from the log, so meson's own status is not needed here.
  # shellcheck disable=SC2086  # $tests is a list of meson test options.
  meson test -C "$dir" --print-errorlogs --num-processes 2 $tests || true
}

status=0
# The release build takes CUDA when meson finds it; the sanitizer build is
# made without, so both the CUDA and the CPU-only code paths are built and
# tested on every run.
# The system tests (the compose demo in containers, the failure
# injection across network namespaces, and a real Slurm) and the
# benchmarks' table script run once, in the release build.
run_config build "" || status=1
run_config build-asan "--no-suite system --no-suite bench" -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false \
  -Dcuda=disabled || status=1
# The fuzz build (clang, libFuzzer, ASan + UBSan, no CUDA) holds only the
# fuzz targets; its suite runs each for 10 s on its seeds, two at a time
# (-Dfuzz_seconds; README.md, Fuzzing).
CC=clang run_config build-fuzz "--suite fuzz" -Dfuzz=true -Dbuildtype=debugoptimized || status=1

python3 - build build-asan build-fuzz <<'PY'
import json, os, sys
passed = failed = skipped = 0
failures = []
for d in sys.argv[1:]:
    log = os.path.join(d, 'meson-logs', 'testlog.json')
    if not os.path.exists(log):
        print('%s: no test log (build failed)' % d)
        failed += 1
        continue
    for line in open(log):
        t = json.loads(line)
        r = t['result']
        if r in ('OK', 'EXPECTEDFAIL'):
            passed += 1
        elif r == 'SKIP':
            # Say why, from the test's own SKIP line. A test that skips
            # without one leaves nobody able to tell what was not checked,
            # and counts as failed.
            why = [l for l in (t.get('stdout') or '').splitlines() if 'SKIP' in l]
            if why:
                skipped += 1
                print('%s: %s: %s' % (d, t['name'], why[0].strip()))
            else:
                failed += 1
                print('%s: %s: FAIL: skipped without a SKIP line saying why' % (d, t['name']))
        else:
            # Name the test and show the end of its output here, next to
            # the counts: CI keeps only the tail of what the suite prints.
            failed += 1
            failures.append((d, t))
for d, t in failures:
    print('%s: %s: %s after %.0f s; the end of its output:'
          % (d, t['name'], t['result'], t.get('duration', 0)))
    for l in (t.get('stdout') or '').splitlines()[-15:]:
        print('    ' + l)
print('%d passed, %d failed, %d skipped' % (passed, failed, skipped))
sys.exit(1 if failed else 0)
PY
rc=$?
[ $status -eq 0 ] || rc=1
exit $rc
