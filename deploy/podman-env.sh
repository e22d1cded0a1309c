#!/usr/bin/env bash
# Run the compose demo (deploy/docker-compose.yml) with rootful podman and
# docker-compose v1 on a Debian 12 machine that has no Docker engine.
#
#   source deploy/podman-env.sh          # set up, and export DOCKER_HOST and
#                                        # CONTAINERS_CONF in this shell
#   deploy/podman-env.sh CMD [ARGS...]   # set up, then run CMD with them
#   deploy/podman-env.sh --stop          # stop the API service it started
#
# e.g.  deploy/podman-env.sh docker-compose -f deploy/docker-compose.yml up
#
# As root, it
#   1. installs what is missing (podman, docker-compose, debootstrap, runc,
#      iptables, netavark, aardvark-dns, and catatonit for the pods of
#      podman kube play) with apt;
#   2. exports CONTAINERS_CONF=tests/containers.conf (runc, ulimits);
#   3. makes the base image docker.io/library/debian:bookworm-slim with
#      debootstrap from the Debian mirror apt uses, when podman has none
#      (no registry is needed; a second run finds it and skips this);
#   4. starts podman's Docker-compatible API service on
#      unix://$PS_PODMAN_SOCK (default /run/ps-cluster/podman.sock) unless
#      it answers already, and exports DOCKER_HOST to it. PS_PODMAN_STARTED
#      is 1 when this call started it, else 0.
# Anything that cannot work stops it with a message saying what and why, and
# exit status 1 (return status, when sourced); 3 when what it needs cannot
# be installed on this system at all (no apt-get, or apt knows no such
# package), which tests/test_compose.sh counts as a skip, not a failure.
# Settings: PS_PODMAN_SOCK, PS_DEBIAN_MIRROR (default: read from apt's
# sources), PS_BASE_IMAGE (default docker.io/library/debian:bookworm-slim).

_psenv_sourced=0
[ "${BASH_SOURCE[0]}" != "$0" ] && _psenv_sourced=1

_psenv_die () {
    echo "podman-env: $*" >&2
    return 1
}

_psenv_root () {
    cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd
}

_psenv_sock () {
    echo "${PS_PODMAN_SOCK:-/run/ps-cluster/podman.sock}"
}

# The API service answers on the socket.
_psenv_alive () {
    local sock
    sock=$(_psenv_sock)
    [ -S "$sock" ] && timeout 10 podman --remote --url "unix://$sock" version >/dev/null 2>&1
}

_psenv_install () {
    local packages=(podman docker-compose debootstrap runc iptables netavark aardvark-dns catatonit)
    local missing=() p
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || { _psenv_die "missing ${missing[*]} and no apt-get to install them"; return 3; }
    echo "podman-env: installing ${missing[*]}" >&2
    # A failed update leaves apt's lists as they were; what they offer is
    # still worth a try, and the messages below say that it failed.
    local updated="" unknown=()
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || updated=" (apt-get update failed)"
    # A package without an installation candidate cannot be installed on
    # this system (another distribution or release): that is not the same
    # as an installation that fails.
    for p in "${missing[@]}"; do
        apt-cache policy "$p" 2>/dev/null | grep -q 'Candidate: [^(]' || unknown+=("$p")
    done
    if [ ${#unknown[@]} -gt 0 ]; then
        _psenv_die "apt has no package ${unknown[*]} for this system$updated"
        return 3
    fi
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
             "${missing[@]}" >&2; then
        _psenv_die "apt-get install ${missing[*]} failed$updated"
        return 1
    fi
}

# The Debian mirror apt uses (the first non-security one), for debootstrap.
_psenv_mirror () {
    if [ -n "${PS_DEBIAN_MIRROR:-}" ]; then
        echo "$PS_DEBIAN_MIRROR"
        return
    fi
    local uri
    uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null \
          | awk 'tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i }' \
          | grep -v -- '-security' | head -n 1)
    if [ -z "$uri" ]; then
        uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
              | awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }' \
              | grep -v -- '-security' | head -n 1)
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}

# The base image, made with debootstrap (minbase) and trimmed like the
# official slim images: no documentation, manual pages or translations,
# no apt lists.
_psenv_base_image () {
    local image="${PS_BASE_IMAGE:-docker.io/library/debian:bookworm-slim}"
    podman image exists "$image" && return 0
    local mirror dir t0
    mirror=$(_psenv_mirror)
    dir=$(mktemp -d /var/tmp/ps-cluster-rootfs.XXXXXX) || return 1
    t0=$(date +%s)
    echo "podman-env: making $image with debootstrap from $mirror (a minute or two)" >&2
    if ! debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$dir.log" 2>&1; then
        tail -n 20 "$dir.log" >&2
        rm -rf "$dir" "$dir.log"
        _psenv_die "debootstrap of bookworm from $mirror failed (set PS_DEBIAN_MIRROR to a reachable mirror)"
        return 1
    fi
    cat >"$dir/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
    find "$dir/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    find "$dir/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$dir"/usr/share/man/* "$dir"/usr/share/info/* "$dir"/usr/share/locale/* \
           "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb \
           "$dir"/var/lib/apt/lists/* "$dir"/var/log/*.log "$dir"/var/log/apt/*
    # No apt cache in the image's layers, as in the official images.
    echo 'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };' \
        >"$dir/etc/apt/apt.conf.d/docker-clean"
    echo 'Acquire::Languages "none";' >"$dir/etc/apt/apt.conf.d/docker-no-languages"
    if ! tar -C "$dir" --numeric-owner -c . \
         | podman import --quiet --change 'CMD ["bash"]' - "$image" >/dev/null; then
        rm -rf "$dir" "$dir.log"
        _psenv_die "podman import of the base image failed"
        return 1
    fi
    rm -rf "$dir" "$dir.log"
    echo "podman-env: made $image in $(( $(date +%s) - t0 )) s" >&2
}

# $1: the set-up lock's descriptor, which the service must not hold.
_psenv_service () {
    local sock pidfile log lockfd=$1
    sock=$(_psenv_sock)
    pidfile="${sock%.sock}.pid"
    log="${sock%.sock}.log"
    PS_PODMAN_STARTED=0
    # A service started from another checkout reads that checkout's
    # containers.conf, which may be gone (its builds then fail at once):
    # such a one is replaced.
    if _psenv_alive; then
        [ "$(cat "${sock%.sock}.conf" 2>/dev/null)" = "$CONTAINERS_CONF" ] && return 0
        echo "podman-env: the API service runs with another CONTAINERS_CONF; restarting it" >&2
        _psenv_stop
    fi
    mkdir -p "$(dirname "$sock")" 2>/dev/null \
        || { _psenv_die "cannot create $(dirname "$sock") for the API socket (set PS_PODMAN_SOCK)"; return 1; }
    rm -f "$sock"
    # Its own session: a Ctrl-C in this shell does not stop it.
    setsid podman system service --time=0 "unix://$sock" >"$log" 2>&1 </dev/null {lockfd}>&- &
    echo $! >"$pidfile"
    echo "$CONTAINERS_CONF" >"${sock%.sock}.conf"
    for _ in $(seq 1 100); do
        _psenv_alive && { PS_PODMAN_STARTED=1; return 0; }
        kill -0 "$(cat "$pidfile")" 2>/dev/null || break
        sleep 0.2
    done
    tail -n 20 "$log" >&2
    _psenv_die "the podman API service did not come up on unix://$sock (log: $log)"
}

_psenv_stop () {
    local sock pidfile pid
    sock=$(_psenv_sock)
    pidfile="${sock%.sock}.pid"
    if [ -f "$pidfile" ]; then
        pid=$(cat "$pidfile")
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid"
            for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            echo "podman-env: stopped the API service (pid $pid)" >&2
        fi
        rm -f "$pidfile"
    fi
    rm -f "$sock" "${sock%.sock}.log" "${sock%.sock}.conf"
    rmdir "$(dirname "$sock")" 2>/dev/null || true
}

_psenv_setup () {
    [ "$(id -u)" -eq 0 ] || { _psenv_die "needs root: the demo runs under rootful podman"; return 1; }
    _psenv_install || return $?
    command -v runc >/dev/null || { _psenv_die "runc is not installed"; return 1; }
    CONTAINERS_CONF="$(_psenv_root)/tests/containers.conf"
    export CONTAINERS_CONF
    [ -f "$CONTAINERS_CONF" ] || { _psenv_die "$CONTAINERS_CONF is missing"; return 1; }
    # One set-up at a time (the base image and the service are shared).
    local lock=/run/lock/ps-cluster-podman.lock fd rc=0
    mkdir -p /run/lock
    exec {fd}>"$lock"
    if ! flock -w 900 "$fd"; then
        exec {fd}>&-
        _psenv_die "another set-up has held $lock for 15 minutes"
        return 1
    fi
    _psenv_base_image && _psenv_service "$fd" || rc=1
    exec {fd}>&-
    [ $rc -eq 0 ] || return 1
    DOCKER_HOST="unix://$(_psenv_sock)"
    export DOCKER_HOST PS_PODMAN_STARTED
}

if [ "${1:-}" = "--stop" ]; then
    _psenv_stop
    [ $_psenv_sourced -eq 1 ] && return 0
    exit 0
fi

if [ $_psenv_sourced -eq 1 ]; then
    _psenv_setup || return $?
    echo "podman-env: DOCKER_HOST=$DOCKER_HOST CONTAINERS_CONF=$CONTAINERS_CONF" >&2
else
    set -u
    _psenv_setup || exit $?
    [ $# -eq 0 ] && { echo "podman-env: ready (DOCKER_HOST=$DOCKER_HOST); pass a command to run it, or source this script" >&2; exit 0; }
    exec "$@"
fi
