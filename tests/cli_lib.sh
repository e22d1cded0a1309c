# shellcheck shell=bash
# shellcheck disable=SC2154  # $work is the sourcing test's
# Helpers shared by the command-line tests, sourced by them: each test
# sets $work (a scratch directory) and failures=0 first.
#
# pass NAME, fail NAME DETAIL...: report a check (fail prints $work/out).
# run LIMIT COMMAND...: run with a time limit, output in $work/out.
# expect NAME STATUS WORDS -- COMMAND...: run and check status and words.
# metrics_field FILE EVENT FIELD: read a metrics file.
# free_port: a TCP port on 127.0.0.1 that nobody serves.

pass () { echo "PASS: $1"; }
fail () {
  echo "FAIL: $1"; shift
  for line in "$@"; do [ -z "$line" ] || echo "      $line"; done
  echo "      output:"; sed 's/^/        /' "$work/out"
  failures=$((failures + 1))
}

# run LIMIT COMMAND...: run it with a time limit (a hang becomes exit 124
# instead of stalling the suite), output in $work/out, status in $status.
run () {
  local limit=$1; shift
  timeout "$limit" "$@" >"$work/out" 2>&1
  status=$?
}

# expect NAME STATUS WORDS -- COMMAND...: check the exit status ("nonzero":
# any failure that is not a crash or a time-out) and that the output says
# each of the |-separated WORDS.
expect () {
  local name=$1 want=$2 words=$3; shift 4
  run 60 "$@"
  local ok=1
  if [ "$want" = nonzero ]; then
    { [ "$status" -ne 0 ] && [ "$status" -lt 124 ]; } || ok=0
  else
    [ "$status" = "$want" ] || ok=0
  fi
  local missing=""
  local IFS='|'
  for word in $words; do
    grep -qF -- "$word" "$work/out" || missing="$missing '$word'"
  done
  unset IFS
  if [ "$ok" = 1 ] && [ -z "$missing" ]; then
    pass "$name (exit $status)"
  else
    fail "$name" "command: $*" "exit $status, expected $want" \
      "${missing:+does not say:$missing}"
  fi
}

# Field FIELD of the first record of event EVENT of a metrics file,
# printed by python3 so that the file must parse as JSON.
metrics_field () {
  python3 -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print([r for r in rows if r["event"] == sys.argv[2]][0][sys.argv[3]])' "$1" "$2" "$3"
}

# A TCP port on 127.0.0.1 that nobody serves (the kernel's choice of a free
# one, released again for the caller to bind).
free_port () {
  python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
