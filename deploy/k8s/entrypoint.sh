#!/bin/sh
# ps-k8s: the image's entry point on Kubernetes (deploy/k8s, and Kubeflow's
# TFJob in deploy/k8s/tfjob). It turns what a pod knows about itself into
# what the three programs read, then runs its role's program:
#
#   ps-k8s [ARGS...]    run the pod's program (coordinator, ps-server or
#                       ps-worker) with ARGS
#   ps-k8s probe        the liveness/readiness probe: the protocol's ping
#                       (coordinator ping) to this server, or from a worker
#                       to every server; exit 0 when each answers
#
# The pod's role is PS_ROLE (chief, ps, worker or evaluator, set in the
# manifest). Its ordinal is PS_INDEX when set (the TFJob manifest sets it
# from the operator's replica-index label), else JOB_COMPLETION_INDEX (an
# Indexed Job), else the number after the last "-" of the host name (a
# StatefulSet's pod-N).
#
# TF_CONFIG: one that is set (Kubeflow's operator writes it) is read
# verbatim by the programs. Otherwise it is built here from the headless
# services' DNS names: task ROLE:I of the job PS_JOB_NAME (default
# ps-cluster) is at PS_HOST_TEMPLATE with {job}, {role} and {index}
# replaced (default "{job}-{role}-{index}.{job}-{role}", an Indexed Job's
# pod in its role's headless service), port PS_PORT (default 2222), with
# PS_NUM_PS servers and PS_NUM_WORKERS workers.
#
# Keys (README.md, Security): the task's secret certificate
# ROLE-I.cert_secret, its password ROLE-I.password and a server's
# passwords (a PLAIN data plane's, or the same-host plane's) from the Secret mounted at PS_SECRET_DIR (default
# /etc/ps-cluster/secret), and every public certificate from the ConfigMap
# mounted at PS_PUBLIC_DIR (default /etc/ps-cluster/public), are copied
# into PS_KEYS (default /run/ps-cluster/keys) as files of this user, mode
# 0600: the programs refuse a secret file that another user owns or that
# the group can read, which is how Kubernetes mounts Secrets for a
# non-root user (root-owned, group-readable through fsGroup).
#
# A mistake exits 2 naming the variable or file and what was expected.
set -eu

die () {
    echo "ps-k8s: $*" >&2
    exit 2
}

# A whole number, or die naming the variable.
whole () {
    case "$2" in
        ''|*[!0-9]*) die "$1 is \"$2\": expected a whole number";;
    esac
    # Without leading zeros ("07" is 7, as Kubernetes means it).
    echo "$2" | sed 's/^0*\([0-9]\)/\1/'
}

role=${PS_ROLE:-}
case "$role" in
    chief|ps|worker|evaluator) ;;
    '') die "PS_ROLE is not set: expected chief, ps, worker or evaluator (the pod's role, from its manifest)";;
    *) die "PS_ROLE is \"$role\": expected chief, ps, worker or evaluator";;
esac

if [ -n "${PS_INDEX:-}" ]; then
    index=$(whole PS_INDEX "$PS_INDEX")
elif [ -n "${JOB_COMPLETION_INDEX:-}" ]; then
    index=$(whole JOB_COMPLETION_INDEX "$JOB_COMPLETION_INDEX")
else
    host=$(hostname)
    index=$(whole "the ordinal at the end of the host name \"$host\" (or set PS_INDEX)" "${host##*-}")
fi

if [ -z "${TF_CONFIG:-}" ]; then
    job=${PS_JOB_NAME:-ps-cluster}
    case "$job" in
        ''|*[!a-z0-9-]*) die "PS_JOB_NAME is \"$job\": expected a DNS label (a-z, 0-9, -)";;
    esac
    template=${PS_HOST_TEMPLATE:-'{job}-{role}-{index}.{job}-{role}'}
    case "$template" in
        *'{index}'*) ;;
        *) die "PS_HOST_TEMPLATE is \"$template\": expected a host name with {index} (and {job}, {role})";;
    esac
    case "$template" in
        *[!a-z0-9.{}-]*) die "PS_HOST_TEMPLATE is \"$template\": expected a-z, 0-9, '.', '-' and {job}, {role}, {index}";;
    esac
    port=$(whole PS_PORT "${PS_PORT:-2222}")
    nps=$(whole PS_NUM_PS "${PS_NUM_PS:-}")
    nworkers=$(whole PS_NUM_WORKERS "${PS_NUM_WORKERS:-}")
    # The JSON list of the n tasks of a role.
    addresses () {
        i=0 list=""
        while [ "$i" -lt "$2" ]; do
            h=$(echo "$template" | sed "s/{job}/$job/g; s/{role}/$1/g; s/{index}/$i/g")
            list="$list${list:+, }\"$h:$port\""
            i=$((i + 1))
        done
        echo "[$list]"
    }
    # The quotes are the JSON's own (shellcheck takes them for quoting).
    # shellcheck disable=SC2089
    TF_CONFIG="{\"cluster\": {\"chief\": $(addresses chief 1), \"ps\": $(addresses ps "$nps"), \
\"worker\": $(addresses worker "$nworkers")}, \"task\": {\"type\": \"$role\", \"index\": $index}}"
    # shellcheck disable=SC2090
    export TF_CONFIG
fi

PS_KEYS=${PS_KEYS:-/run/ps-cluster/keys}
export PS_KEYS

if [ "${1:-}" = probe ]; then
    case "$role" in
        ps) exec coordinator ping "ps:$index" --timeout-ms "${PS_PROBE_TIMEOUT_MS:-3000}";;
        *) exec coordinator ping ps --timeout-ms "${PS_PROBE_TIMEOUT_MS:-3000}";;
    esac
fi

secret=${PS_SECRET_DIR:-/etc/ps-cluster/secret}
public=${PS_PUBLIC_DIR:-/etc/ps-cluster/public}
task=$role-$index
[ -f "$secret/$task.cert_secret" ] \
    || die "no $secret/$task.cert_secret: the Secret mounted there must hold task $role:$index's key (deploy/k8s/make-secrets.sh)"
ls "$public"/*.cert >/dev/null 2>&1 \
    || die "no public certificates (*.cert) in $public: mount the public-key ConfigMap there (deploy/k8s/make-secrets.sh)"
umask 077
mkdir -p "$PS_KEYS/public"
chmod 700 "$PS_KEYS"
# cp follows the ..data symbolic links of a mounted Secret or ConfigMap.
cp "$public"/*.cert "$PS_KEYS/public/"
chmod 755 "$PS_KEYS/public"
chmod 644 "$PS_KEYS/public"/*.cert
cp "$secret/$task.cert_secret" "$PS_KEYS/"
[ ! -f "$secret/$task.password" ] || cp "$secret/$task.password" "$PS_KEYS/"
[ "$role" != ps ] || [ ! -f "$secret/passwords" ] || cp "$secret/passwords" "$PS_KEYS/"
umask 022

case "$role" in
    chief) exec coordinator "$@";;
    ps) exec ps-server "$@";;
    *) exec ps-worker "$@";;
esac
