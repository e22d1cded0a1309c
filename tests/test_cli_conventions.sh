#!/usr/bin/env bash
# The command-line conventions of ps_cli.h, for every program and every
# subcommand: -h and --help print the help on stdout and exit 0, --usage
# too, -V and --version print "PROGRAM (ps-cluster) VERSION"; an unknown
# option, a missing argument or a bad value print a line that starts with
# the command's name, then the hint to --help, on stderr, and exit 2;
# --opt=value, --opt value and an unambiguous abbreviation are the same
# option; -q and -v are accepted everywhere; log lines start with an ISO
# 8601 time with the date, and -q leaves only warnings and errors.
set -u
work=$(mktemp -d /tmp/ps-cliconv-XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
. "$(dirname "$0")/cli_lib.sh"
server=${PS_SERVER:?PS_SERVER is not set}
worker=${PS_WORKER:?PS_WORKER is not set}
coordinator=${PS_COORDINATOR:?PS_COORDINATOR is not set}
version=${PS_VERSION:?PS_VERSION is not set}

# usage_error NAME STATUS-LINE -- COMMAND...: exit 2, nothing on stdout,
# and exactly two lines on stderr: STATUS-LINE, then the hint naming NAME.
usage_error () {
  local name=$1 line=$2; shift 3
  timeout 60 "$@" >"$work/stdout" 2>"$work/stderr"
  status=$?
  cp "$work/stderr" "$work/out"
  local hint="Try \`$name --help' or \`$name --usage' for more information."
  if [ "$status" = 2 ] && [ ! -s "$work/stdout" ] && [ "$(wc -l <"$work/stderr")" = 2 ] \
     && [ "$(sed -n 1p "$work/stderr")" = "$line" ] \
     && [ "$(sed -n 2p "$work/stderr")" = "$hint" ]; then
    pass "$* -> exit 2, '$line'"
  else
    fail "$*" "exit $status, expected 2 with the two lines:" "$line" "$hint"
  fi
}

# help_ok NAME -- COMMAND...: the command's help on stdout, exit 0.
help_ok () {
  local name=$1; shift 2
  for flag in -h --help --hel; do
    run 60 "$@" $flag
    if [ "$status" = 0 ] && head -1 "$work/out" | grep -qF "Usage: $name [OPTION...]" \
       && grep -qF -- "-q, --quiet" "$work/out" && grep -qF -- "-V, --version" "$work/out"; then
      pass "$* $flag -> help"
    else
      fail "$* $flag" "expected exit 0 and 'Usage: $name [OPTION...]' first"
    fi
  done
  run 60 "$@" --usage
  if [ "$status" = 0 ] && head -1 "$work/out" | grep -qF "Usage: $name [-"; then
    pass "$* --usage"
  else
    fail "$* --usage" "expected exit 0 and 'Usage: $name [-...'"
  fi
}

# The programs, and the subcommands that have their own options.
for cmd in "ps-server:$server" "ps-worker:$worker" "coordinator:$coordinator" \
           "ps-worker predict:$worker predict" "coordinator keygen:$coordinator keygen" \
           "coordinator ping:$coordinator ping" "coordinator export:$coordinator export" \
           "coordinator plot:$coordinator plot"; do
  name=${cmd%%:*}
  # shellcheck disable=SC2206  # the command and its subcommand are words
  argv=(${cmd#*:})
  help_ok "$name" -- "${argv[@]}"
  usage_error "$name" "$name: unrecognized option '--no-such-option'" -- \
    "${argv[@]}" --no-such-option
  usage_error "$name" "$name: invalid option -- 'Z'" -- "${argv[@]}" -Z
  # Only plot (its metrics file) and ping (its target) take an argument.
  [ "$name" = "coordinator plot" ] || [ "$name" = "coordinator ping" ] \
    || usage_error "$name" "$name: unexpected argument 'stray'" -- "${argv[@]}" stray
done
for prog in "ps-server:$server" "ps-worker:$worker" "coordinator:$coordinator"; do
  name=${prog%%:*}
  for flag in -V --version; do
    run 60 "${prog#*:}" $flag
    if [ "$status" = 0 ] && [ "$(cat "$work/out")" = "$name (ps-cluster) $version" ]; then
      pass "$name $flag"
    else
      fail "$name $flag" "expected exit 0 and '$name (ps-cluster) $version'"
    fi
  done
done

# A bad value names the option, whichever way it was written.
for form in "--threads=lots" "--threads lots" "--thr=lots" "-T lots" "-Tlots"; do
  # shellcheck disable=SC2086  # the form is one or two words
  usage_error ps-server 'ps-server: --threads "lots": expected a whole number in 0..256' -- \
    "$server" $form
done
usage_error ps-server "ps-server: option '--bind' requires an argument" -- "$server" --bind
for form in "--threads=lots" "--threads lots" "--thr=lots" "-T lots" "-Tlots"; do
  # shellcheck disable=SC2086  # the form is one or two words
  usage_error ps-worker 'ps-worker: --threads "lots": expected a whole number in 1..256' -- \
    "$worker" --standalone $form
  # shellcheck disable=SC2086
  usage_error "ps-worker predict" \
    'ps-worker predict: --threads "lots": expected a whole number in 1..256' -- \
    "$worker" predict $form
done
usage_error ps-worker "ps-worker: option '--model' requires an argument" -- "$worker" --model
usage_error ps-worker "ps-worker: unexpected argument 'extra'" -- "$worker" --standalone extra
usage_error "ps-worker predict" "ps-worker predict: unexpected argument 'extra'" -- \
  "$worker" predict -w x -D y extra
usage_error coordinator 'coordinator: --epochs "x": expected a whole number in 0..2147483647' -- \
  "$coordinator" --local --epochs=x
usage_error coordinator "coordinator: unexpected argument 'extra'" -- \
  "$coordinator" --local extra

# Log lines: ISO 8601 UTC time with the date and milliseconds, the
# program, the level; -q leaves only warnings and errors.
serve () {
  rm -f "$work/endpoint"
  "$server" --insecure --bind tcp://127.0.0.1:0 --endpoint-file "$work/endpoint" "$@" \
    >/dev/null 2>"$work/out" &
  local pid=$!
  for _ in $(seq 1 300); do
    [ -s "$work/endpoint" ] && break
    sleep 0.1
  done
  kill -TERM "$pid"
  wait "$pid"
}
serve
if grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z ps-server info: serving tcp://127\.0\.0\.1:[0-9]+' \
     "$work/out"; then
  pass "log lines: 2026-11-26T14:20:00.123Z ps-server info: ..."
else
  fail "log lines start with an ISO 8601 time with the date, then program and level"
fi
serve -q
if [ -s "$work/endpoint" ] && ! grep -q " info: " "$work/out"; then
  pass "-q: no info lines"
else
  fail "-q: no info lines"
fi

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all command-line convention checks passed"
