#!/usr/bin/env bash
# Make a ps-cluster's CurveZMQ keys for deploy/k8s (README.md, Security and
# Running on Kubernetes) and print them as Kubernetes YAML on stdout:
#
#   deploy/k8s/make-secrets.sh [--ps N] [--workers N] [--name NAME]
#                              [--data-plane curve|plain] | kubectl apply -f -
#
# - a Secret NAME-keys-ROLE per role (chief, ps, worker) holding the secret
#   certificates of that role's tasks, ROLE-I.cert_secret, each task's
#   ROLE-I.password and the servers' passwords file (the PLAIN data
#   plane's with --data-plane plain, else the same-host plane's, README.md
#   Security); a pod mounts its role's Secret and entrypoint.sh uses
#   only its own task's file;
# - a ConfigMap NAME-public with every task's public certificate, i.e. the
#   keys every process trusts (they are not secret).
#
# Defaults: 2 servers, 2 workers (the counts of deploy/k8s/ps.yaml and
# worker.yaml), NAME ps-cluster. The keys are made by `coordinator keygen`
# (PS_COORDINATOR, else coordinator on PATH, else this checkout's
# build/coordinator/coordinator) in a private temporary directory that is
# removed on exit; nothing is written elsewhere. Mistakes exit 2 with a
# message naming the option and what was expected.
set -euo pipefail

die () { echo "make-secrets: $*" >&2; exit 2; }

nps=2 nworkers=2 name=ps-cluster plane=curve
while [ $# -gt 0 ]; do
    case "$1" in
        --ps|--workers|--name|--data-plane)
            [ $# -ge 2 ] || die "$1 needs a value"
            case "$1" in
                --ps) nps=$2;; --workers) nworkers=$2;; --name) name=$2;; --data-plane) plane=$2;;
            esac
            shift 2;;
        -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0;;
        *) die "unknown argument \"$1\" (expected --ps N, --workers N, --name NAME, --data-plane curve|plain)";;
    esac
done
[[ "$nps" =~ ^[0-9]+$ ]] || die "--ps \"$nps\": expected a whole number"
[[ "$nworkers" =~ ^[1-9][0-9]*$ ]] || die "--workers \"$nworkers\": expected a whole number, 1 or more"
[[ "$name" =~ ^[a-z0-9]([a-z0-9-]*[a-z0-9])?$ ]] || die "--name \"$name\": expected a DNS label (a-z, 0-9, -)"
[[ "$plane" =~ ^(curve|plain)$ ]] || die "--data-plane \"$plane\": expected curve or plain"

here=$(cd "$(dirname "$0")" && pwd)
coordinator=${PS_COORDINATOR:-}
if [ -z "$coordinator" ]; then
    coordinator=$(command -v coordinator || true)
fi
if [ -z "$coordinator" ] && [ -x "$here/../../build/coordinator/coordinator" ]; then
    coordinator=$here/../../build/coordinator/coordinator
fi
[ -n "$coordinator" ] || die "no coordinator program to make the keys with: build ps-cluster (build/coordinator/coordinator), put coordinator on PATH or set PS_COORDINATOR"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$coordinator" keygen --out "$dir/keys" --ps "$nps" --workers "$nworkers" \
    --data-plane "$plane" >/dev/null

# A YAML "data" entry per file: its name, its content in base64.
entries () {
    local f
    for f in "$@"; do
        [ -f "$f" ] || continue
        printf '  %s: %s\n' "$(basename "$f")" "$(base64 -w 0 "$f")"
    done
}

for role in chief ps worker; do
    files=("$dir/keys/$role"-*.cert_secret "$dir/keys/$role"-*.password)
    [ "$role" = ps ] && files+=("$dir/keys/passwords")
    cat <<YAML
# Task secret certificates of the role $role, made by coordinator keygen.
apiVersion: v1
kind: Secret
metadata:
  name: $name-keys-$role
  labels: {app.kubernetes.io/name: $name, app.kubernetes.io/component: $role}
type: Opaque
data:
$(entries "${files[@]}")
---
YAML
done
cat <<YAML
# Every task's public certificate: the keys each process trusts.
apiVersion: v1
kind: ConfigMap
metadata:
  name: $name-public
  labels: {app.kubernetes.io/name: $name}
data:
YAML
for f in "$dir/keys/public"/*.cert; do
    printf '  %s: |\n' "$(basename "$f")"
    sed 's/^/    /' "$f"
done
