#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Throwaway S3-compatible server for tests: versitygw (Apache-2.0) with its posix backend in a
# temporary folder, on a free loopback port, with random root keys and one bucket created
# through curl's own SigV4 signing (independent of firn).
#
# Usage:
#   s3_server.sh run [--] CMD [ARGS...]   start a server, export its settings, run CMD, always
#                                         stop it and delete its folder, exit with CMD's status
#   s3_server.sh start DIR                start a server whose handle is DIR; print `export` lines
#   s3_server.sh stop DIR                 stop the server started with `start DIR`, delete DIR
#
# Exports: FIRN_TEST_S3_ENDPOINT (http://127.0.0.1:PORT), FIRN_TEST_S3_BUCKET, FIRN_TEST_S3_REGION,
# FIRN_TEST_S3_ACCESS_KEY, FIRN_TEST_S3_SECRET_KEY, FIRN_TEST_S3_ROOT (the posix backend folder),
# and the same as AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL_S3.
# Environment: FIRN_VERSITYGW (binary; default ${FIRN_CACHE:-~/.cache/firn}/bin/versitygw, installed
# by scripts/services.sh), FIRN_S3_START_TIMEOUT (s, default 20).
set -euo pipefail

BIN=${FIRN_VERSITYGW:-${FIRN_CACHE:-$HOME/.cache/firn}/bin/versitygw}
START_TIMEOUT_S=${FIRN_S3_START_TIMEOUT:-20}
BUCKET=firn-test
REGION=us-east-1
PORT_TRIES=5
MARKER=.firn-s3-server
EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855

say() { printf 's3_server: %s\n' "$*" >&2; }
die() {
    say "$*"
    exit 2
}

[[ -x $BIN ]] || die "cannot find versitygw at $BIN (run scripts/services.sh)"

free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

rand_hex() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# start_server DIR PORT: returns 1 when the server died (port taken) or never answered.
start_server() {
    local dir=$1 port=$2 deadline code
    ROOT_ACCESS_KEY_ID=$(cat "$dir/access") ROOT_SECRET_ACCESS_KEY=$(cat "$dir/secret") \
        setsid "$BIN" --port "127.0.0.1:$port" --region "$REGION" --quiet posix "$dir/root" \
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
    mkdir -p "$dir/root"
    : >"$dir/$MARKER"
    rand_hex 10 >"$dir/access"
    rand_hex 20 >"$dir/secret"
    for ((try = 1; try <= PORT_TRIES; try++)); do
        port=$(free_port)
        if start_server "$dir" "$port"; then
            break
        fi
        say "versitygw did not start on port $port (try $try):"
        tail -n 5 "$dir/server.log" >&2 || true
        port=''
    done
    [[ -n $port ]] || die "could not start versitygw"
    echo "$port" >"$dir/port"
    code=$(curl -s -o "$dir/mkbucket.out" -w '%{http_code}' -X PUT \
        -H "x-amz-content-sha256: $EMPTY_SHA256" \
        --aws-sigv4 "aws:amz:$REGION:s3" --user "$(cat "$dir/access"):$(cat "$dir/secret")" \
        "http://127.0.0.1:$port/$BUCKET")
    [[ $code == 200 ]] || die "could not create bucket $BUCKET (HTTP $code): $(cat "$dir/mkbucket.out")"
    cat <<EOT
export FIRN_TEST_S3_ENDPOINT=http://127.0.0.1:$port
export FIRN_TEST_S3_BUCKET=$BUCKET
export FIRN_TEST_S3_REGION=$REGION
export FIRN_TEST_S3_ACCESS_KEY=$(cat "$dir/access")
export FIRN_TEST_S3_SECRET_KEY=$(cat "$dir/secret")
export FIRN_TEST_S3_ROOT=$dir/root
export AWS_ACCESS_KEY_ID=$(cat "$dir/access")
export AWS_SECRET_ACCESS_KEY=$(cat "$dir/secret")
export AWS_REGION=$REGION
export AWS_ENDPOINT_URL_S3=http://127.0.0.1:$port
EOT
}

cmd_stop() {
    local dir=$1 pid
    [[ -f $dir/$MARKER ]] || die "$dir is not a server started by s3_server.sh"
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
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/firn-s3.XXXXXX")
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
    (($# == 2)) || die "usage: s3_server.sh start DIR"
    cmd_start "$2"
    ;;
stop)
    (($# == 2)) || die "usage: s3_server.sh stop DIR"
    cmd_stop "$2"
    ;;
*)
    sed -n '7,11p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
