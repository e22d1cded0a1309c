#!/usr/bin/env bash
# README.md's commands, run as written, so that the README cannot drift
# from the code: every ```sh block of README.md is either run here, in a
# short variant, or excluded with a reason, and a block marked neither
# fails the test.
#
# A block is marked by HTML comments (which Markdown does not show) on the
# lines right before its ```sh line, one key each:
#
#   <!-- runnable -->          run the block (exactly one of this and
#   <!-- not runnable: WHY --> this, which never runs it and prints WHY)
#   <!-- shorten: SED -->      before running, apply this sed script to the
#                              block's text: fewer epochs, a subset of the
#                              data, a scratch path instead of /tmp. Several
#                              apply in order. $T in the result is the
#                              block's scratch directory.
#   <!-- expect: ERE -->       a line of the block's output must match (grep
#                              -E); each expect claims a line of its own, in
#                              order, so two may match the same text.
#   <!-- serves -->            the block leaves programs serving: it passes
#                              once every expect has its line, and then its
#                              programs are stopped.
#   <!-- note: TEXT -->        for the reader of the README's source only.
#
# Each block runs in bash (set -e, pipefail) in a scratch directory of its
# own that holds a symbolic link to each top-level entry of the checkout
# and `build`, a link to the build directory this test belongs to, so
# relative paths mean what they mean in the checkout and whatever a block
# writes lands in the scratch directory. It runs in a session of its own,
# and every process left in it (a server started with &) is stopped when
# the block is over. A block must exit 0 (a serving block must not exit
# non-zero) and print every expected line within its time limit, which is
# generous: the test waits for the conditions, it does not sleep.
#
# Usage: test_readme.sh BUILD_DIR   (meson test test_readme, suite system)
# PS_README_BLOCK_LIMIT=SECONDS sets the time limit of one block (300).

set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=${1:?usage: test_readme.sh BUILD_DIR}
build=$(cd "$build" && pwd)
readme=$src/README.md
limit=${PS_README_BLOCK_LIMIT:-300}     # seconds for one block

work=$(mktemp -d "${TMPDIR:-/tmp}/test_readme.XXXXXX")
# A block's processes are stopped as soon as it is over; this is for an
# interrupted test.
pgid=""
cleanup () {
  [ -z "$pgid" ] || stop_group "$pgid"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ran=0 excluded=0 failures=0
blocks=()

# stop_group PGID: SIGTERM to every process of the group, SIGKILL to what
# is left after 10 s.
stop_group () {
  kill -TERM -- "-$1" 2>/dev/null || return 0
  for _ in $(seq 100); do
    kill -0 -- "-$1" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL -- "-$1" 2>/dev/null
}

# expects_met LOG: 0 when each expected ERE has a line of LOG to itself.
expects_met () {
  local log=$1 claimed=" " pattern n line found
  for pattern in "${expects[@]}"; do
    found=0
    while IFS=: read -r n line; do
      case "$claimed" in *" $n "*) continue ;; esac
      claimed="$claimed$n "
      found=1
      break
    done < <(grep -nE -- "$pattern" "$log")
    [ "$found" = 1 ] || { missing=$pattern; return 1; }
  done
  return 0
}

# run_block LINE FILE: run the block that starts at README.md:LINE, whose
# text is in FILE, with the marks in shortens, expects and serves.
run_block () {
  local at=$1 text=$2 dir="$work/block-$1" entry
  mkdir "$dir"
  for entry in "$src"/*; do
    case "$(basename "$entry")" in build*) continue ;; esac
    ln -s "$entry" "$dir/$(basename "$entry")"
  done
  ln -s "$build" "$dir/build"
  local script="$dir.sh" log="$dir.log" sed_script
  cp "$text" "$script"
  for sed_script in "${shortens[@]}"; do
    sed -i -e "$sed_script" "$script" || { fail_block "$at" "bad shorten: $sed_script"; return; }
  done
  echo "--- README.md:$at, as run (in $dir):"
  sed 's/^/    /' "$script"
  # setsid makes the block a session and process group of its own, whose
  # id is its pid, so that everything it starts can be stopped together.
  (cd "$dir" && export T="$dir" && exec setsid bash -e -o pipefail "$script") \
    >"$log" 2>&1 </dev/null &
  local pid=$! status="" started=$SECONDS deadline=$((SECONDS + limit))
  pgid=$pid
  missing=""
  while :; do
    # The block's shell is done: a failure ends the block at once, and so
    # does success, unless it left programs serving.
    if [ -z "$status" ] && ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"; status=$?
      { [ "$status" != 0 ] || [ "$serves" = 0 ]; } && break
    fi
    if [ "$serves" = 1 ] && expects_met "$log"; then
      status=${status:-0}
      break
    fi
    # A serving block whose programs have all ended will print no more.
    if [ -n "$status" ] && ! kill -0 -- "-$pgid" 2>/dev/null; then
      expects_met "$log" || status="its programs ended before it printed every expected line"
      break
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      status="timed out"
      break
    fi
    sleep 0.2
  done
  stop_group "$pgid"
  wait "$pid" 2>/dev/null
  pgid=""
  case "$status" in
    [0-9]*) status="exit status $status" ;;
  esac
  if [ "$status" != "exit status 0" ]; then
    fail_block "$at" "$status (expected: exit status 0 and every expected line within ${limit} s)" "$log"
  elif ! expects_met "$log"; then
    fail_block "$at" "no line of its output matches the expected '$missing'" "$log"
  else
    echo "PASS: README.md:$at ran as written in $((SECONDS - started)) s (shortened by ${#shortens[@]} sed script(s))"
    ran=$((ran + 1))
  fi
}

fail_block () {
  echo "FAIL: README.md:$1: $2"
  if [ -n "${3:-}" ]; then
    echo "      last lines of its output:"
    tail -n 40 "$3" | sed 's/^/        /'
  fi
  failures=$((failures + 1))
}

# Read README.md: collect the marks above each fence, then the block.
marks=()
lineno=0
in_block=""
while IFS= read -r line || [ -n "$line" ]; do
  lineno=$((lineno + 1))
  if [ -n "$in_block" ]; then
    if [ "$line" = '```' ]; then
      [ "$in_block" = sh ] && blocks+=("$block_at")
      in_block=""
    elif [ "$in_block" = sh ]; then
      printf '%s\n' "$line" >>"$work/text-$block_at"
    fi
    continue
  fi
  case "$line" in
    '<!-- '*' -->')
      marks+=("${line:5:${#line}-9}")
      continue ;;
    '```sh')
      in_block="sh"
      block_at=$lineno
      : >"$work/text-$block_at"
      printf '%s\n' "${marks[@]+"${marks[@]}"}" >"$work/marks-$block_at"
      ;;
    '```'*)
      in_block=other ;;
  esac
  marks=()
done <"$readme"
[ -z "$in_block" ] || { echo "FAIL: README.md: a block is not closed"; exit 1; }

for at in "${blocks[@]}"; do
  kind="" why="" serves=0
  shortens=() expects=()
  while IFS= read -r mark; do
    case "$mark" in
      '') ;;
      runnable) kind="${kind}runnable" ;;
      'not runnable: '*) kind="${kind}excluded"; why=${mark#not runnable: } ;;
      'shorten: '*) shortens+=("${mark#shorten: }") ;;
      'expect: '*) expects+=("${mark#expect: }") ;;
      serves) serves=1 ;;
      'note: '*) ;;
      *) kind=bad; why="unknown mark <!-- $mark -->" ;;
    esac
  done <"$work/marks-$at"
  case "$kind" in
    runnable) run_block "$at" "$work/text-$at" ;;
    excluded)
      echo "EXCLUDED: README.md:$at: $why"
      excluded=$((excluded + 1)) ;;
    bad) fail_block "$at" "$why" ;;
    '') fail_block "$at" "the block is marked neither <!-- runnable --> nor <!-- not runnable: WHY -->" ;;
    *) fail_block "$at" "the block has more than one of <!-- runnable --> and <!-- not runnable -->" ;;
  esac
done

echo "README.md: ${#blocks[@]} command blocks: $ran ran as written, $excluded excluded, $failures failed"
[ "$ran" -gt 0 ] || { echo "FAIL: no block ran"; exit 1; }
[ "$failures" = 0 ]
