#!/usr/bin/env bash
# README.md's command-line reference, generated from each command's own
# --help so that it cannot drift from the programs: the section between
# the markers "<!-- cli-reference -->" and "<!-- end cli-reference -->" is
# replaced by the --help of every program and subcommand.
#
#   tests/cli_reference.sh BUILD_DIR            rewrite README.md's section
#   tests/cli_reference.sh BUILD_DIR --check    exit 1 and show the
#                                                difference when it is stale
#                                                (meson test test_cli_reference)
set -eu
build=${1:?usage: tests/cli_reference.sh BUILD_DIR [--check]}
mode=${2:-write}
src=$(cd "$(dirname "$0")/.." && pwd)
readme=$src/README.md
# argp wraps at 79 columns unless ARGP_HELP_FMT says otherwise.
unset ARGP_HELP_FMT
section=$(mktemp)
trap 'rm -f "$section" "$section.new"' EXIT
{
  for cmd in "ps-server" "ps-worker" "ps-worker predict" "coordinator" "coordinator keygen" \
             "coordinator ping" "coordinator export" "coordinator plot"; do
    prog=${cmd%% *}
    case $prog in
      ps-server) bin=$build/ps/ps-server ;;
      ps-worker) bin=$build/worker/ps-worker ;;
      coordinator) bin=$build/coordinator/coordinator ;;
    esac
    sub=""
    [ "$cmd" = "$prog" ] || sub=${cmd#* }
    printf '### `%s`\n\n```text\n' "$cmd"
    # shellcheck disable=SC2086  # $sub is empty or one word
    "$bin" $sub --help
    printf '```\n\n'
  done
} >"$section"
python3 - "$readme" "$section" "$section.new" <<'PY'
import sys
readme, section, out = sys.argv[1:]
text = open(readme).read()
begin, end = '<!-- cli-reference -->\n', '<!-- end cli-reference -->\n'
if text.count(begin) != 1 or text.count(end) != 1:
    sys.exit('README.md: expected one "%s" and one "%s" line' % (begin.strip(), end.strip()))
head, rest = text.split(begin)
_, tail = rest.split(end)
open(out, 'w').write(head + begin + '\n' + open(section).read() + end + tail)
PY
if [ "$mode" = --check ]; then
  if ! diff -u "$readme" "$section.new"; then
    echo "FAIL: README.md's command-line reference differs from the programs' --help" \
         "(above); run tests/cli_reference.sh $build to regenerate it"
    exit 1
  fi
  echo "README.md's command-line reference matches every command's --help"
else
  cp "$section.new" "$readme"
fi
