#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Throwaway Google Cloud Storage emulator for tests: fake-gcs-server (in-memory backend) on a free
# loopback port, speaking plain HTTP, with one bucket created through its JSON API.
#
# Usage:
#   gcs_server.sh run [--] CMD [ARGS...]   start a server, export its settings, run CMD, always
#                                          stop it and delete its folder, exit with CMD's status
#   gcs_server.sh start DIR                start a server whose handle is DIR; print `export` lines
#   gcs_server.sh stop DIR                 stop the server started with `start DIR`, delete DIR
#
# Exports: FIRN_TEST_GCS_ENDPOINT (http://127.0.0.1:PORT), FIRN_TEST_GCS_BUCKET and
# STORAGE_EMULATOR_HOST (what Google's client libraries read).
# Environment: FIRN_FAKE_GCS (binary; default ${FIRN_CACHE:-~/.cache/firn}/bin/fake-gcs-server,
# installed by scripts/services.sh), FIRN_GCS_START_TIMEOUT (s, default 20).
set -euo pipefail

BIN=${FIRN_FAKE_GCS:-${FIRN_CACHE:-$HOME/.cache/firn}/bin/fake-gcs-server}
START_TIMEOUT_S=${FIRN_GCS_START_TIMEOUT:-20}
BUCKET=firn-test
PORT_TRIES=5
MARKER=.firn-gcs-server

say() { printf 'gcs_server: %s\n' "$*" >&2; }
die() {
    say "$*"
    exit 2
}

[[ -x $BIN ]] || die "cannot find fake-gcs-server at $BIN (run scripts/services.sh)"

free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# start_server DIR PORT: returns 1 when the server died (port taken) or never answered.
start_server() {
    local dir=$1 port=$2 deadline code
    setsid "$BIN" -backend memory -scheme http -host 127.0.0.1 -port "$port" \
        -external-url "http://127.0.0.1:$port" -public-host "127.0.0.1:$port" -log-level warn \
        >"$dir/server.log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    deadline=$((SECONDS + START_TIMEOUT_S))
    while ((SECONDS < deadline)); do
        code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$port/" || true)
        if [[ $code != 000 ]]; then
            return 0
        fi
        if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
            return 1
        fi
        sleep 0.1
    done
    kill "$(cat "$dir/pid")" 2>/dev/null || true
    return 1
}

cmd_start() {
    local dir=$1 port='' try code
    [[ -e $dir ]] && die "$dir already exists"
    mkdir -p "$dir"
    : >"$dir/$MARKER"
    for ((try = 1; try <= PORT_TRIES; try++)); do
        port=$(free_port)
        if start_server "$dir" "$port"; then
            break
        fi
        say "fake-gcs-server did not start on port $port (try $try):"
        tail -n 5 "$dir/server.log" >&2 || true
        port=''
    done
    [[ -n $port ]] || die "could not start fake-gcs-server"
    echo "$port" >"$dir/port"
    code=$(curl -s -o "$dir/mkbucket.out" -w '%{http_code}' -X POST \
        -H 'Content-Type: application/json' -d "{\"name\":\"$BUCKET\"}" \
        "http://127.0.0.1:$port/storage/v1/b")
    [[ $code == 200 ]] || die "could not create bucket $BUCKET (HTTP $code): $(cat "$dir/mkbucket.out")"
    cat <<EOT
export FIRN_TEST_GCS_ENDPOINT=http://127.0.0.1:$port
export FIRN_TEST_GCS_BUCKET=$BUCKET
export STORAGE_EMULATOR_HOST=http://127.0.0.1:$port
EOT
}

cmd_stop() {
    local dir=$1 pid
    [[ -f $dir/$MARKER ]] || die "$dir is not a server started by gcs_server.sh"
    if [[ -f $dir/pid ]]; then
        pid=$(cat "$dir/pid")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
}

cmd_run() {
    [[ ${1:-} == -- ]] && shift
    (($# > 0)) || die "run needs a command"
    local tmp rc=0 exports
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/firn-gcs.XXXXXX")
    trap 'cmd_stop "$tmp/server" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
    exports=$(cmd_start "$tmp/server") || exit 2
    eval "$exports"
    "$@" || rc=$?
    exit "$rc"
}

case ${1:-} in
run)
    shift
    cmd_run "$@"
    ;;
start)
    (($# == 2)) || die "usage: gcs_server.sh start DIR"
    cmd_start "$2"
    ;;
stop)
    (($# == 2)) || die "usage: gcs_server.sh stop DIR"
    cmd_stop "$2"
    ;;
*)
    sed -n '6,10p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
