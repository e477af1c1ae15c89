#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Throwaway PostgreSQL 15 cluster for tests: logical WAL, loopback TCP on a free port plus a
# unix socket, trust auth for the test user and a password role (firn_pw) for auth tests.
#
# Usage:
#   pg_cluster.sh run [--] CMD [ARGS...]   start a cluster, export PG* and FIRN_TEST_PGURI, run CMD,
#                                          always stop and delete the cluster, exit with CMD's status
#   pg_cluster.sh start DIR                start a cluster whose handle is DIR; print `export` lines
#                                          (use: eval "$(pg_cluster.sh start DIR)")
#   pg_cluster.sh stop DIR                 stop the cluster started with `start DIR` and delete it
#
# Environment: FIRN_PG_BINDIR (default /usr/lib/postgresql/15/bin), FIRN_PG_START_TIMEOUT (s, 30),
# FIRN_PG_WAL_LEVEL (default logical; replica makes a cluster logical replication refuses),
# FIRN_PG_SSL (1: TLS on, with a self-signed certificate made at initdb, and TCP connections
# without TLS refused; the default cluster has no TLS).
set -euo pipefail

PG_BINDIR=${FIRN_PG_BINDIR:-/usr/lib/postgresql/15/bin}
START_TIMEOUT_S=${FIRN_PG_START_TIMEOUT:-30}
WAL_LEVEL=${FIRN_PG_WAL_LEVEL:-logical}
SSL=${FIRN_PG_SSL:-0}
PORT_TRIES=5
MARKER=.firn-pg-cluster
PW_ROLE=firn_pw
PW_SECRET=firn_pw_secret

say() { printf 'pg_cluster: %s\n' "$*" >&2; }
die() {
    say "$*"
    exit 2
}

usage() {
    sed -n '5,12p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

[[ $WAL_LEVEL =~ ^(replica|logical)$ ]] || die "FIRN_PG_WAL_LEVEL must be replica or logical, got \"$WAL_LEVEL\""
[[ $SSL =~ ^[01]$ ]] || die "FIRN_PG_SSL must be 0 or 1, got \"$SSL\""
[[ -x $PG_BINDIR/initdb ]] || die "cannot find initdb in $PG_BINDIR (install postgresql-15 or run scripts/setup.sh)"

test_user=$(id -un)

# Run a server-side command as the postgres OS user when we are root (postgres refuses root).
as_pg() {
    if [[ $(id -u) -eq 0 ]]; then
        (cd / && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
    else
        local p
        while :; do
            p=$((20000 + RANDOM % 40000))
            if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
                echo "$p"
                return
            fi
        done
    fi
}

# init_cluster ROOT: initdb into ROOT/data and write the configuration.
init_cluster() {
    local root=$1
    mkdir -p "$root/data" "$root/sock"
    chmod 700 "$root/data"
    if [[ $(id -u) -eq 0 ]]; then
        chown -R postgres: "$root"
    fi
    if ! as_pg "$PG_BINDIR/initdb" -D "$root/data" -U "$test_user" --auth=trust --encoding=UTF8 \
        --locale=C.UTF-8 --no-sync >"$root/initdb.log" 2>&1; then
        cat "$root/initdb.log" >&2
        die "initdb failed"
    fi
    cat >>"$root/data/postgresql.conf" <<EOF

# firn test cluster
listen_addresses = '127.0.0.1'
unix_socket_directories = '$root/sock'
wal_level = $WAL_LEVEL
max_replication_slots = 20
max_wal_senders = 20
fsync = off
synchronous_commit = off
full_page_writes = off
password_encryption = scram-sha-256
logging_collector = off
log_min_messages = warning
timezone = 'UTC'
EOF
    if [[ $SSL == 1 ]]; then
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=127.0.0.1" \
            -keyout "$root/data/server.key" -out "$root/data/server.crt" >/dev/null 2>&1 ||
            die "openssl could not make the test server's certificate"
        chmod 600 "$root/data/server.key"
        [[ $(id -u) -eq 0 ]] && chown postgres: "$root/data/server.key" "$root/data/server.crt"
        printf "ssl = on\n" >>"$root/data/postgresql.conf"
    fi
    local host=host # with TLS on, a TCP connection without TLS is refused
    [[ $SSL == 1 ]] && host=hostssl
    cat >"$root/data/pg_hba.conf" <<EOF
# TYPE  DATABASE     USER      ADDRESS        METHOD
local   all          all                      trust
local   replication  all                      trust
$host    all          $PW_ROLE   127.0.0.1/32   scram-sha-256
$host    replication  $PW_ROLE   127.0.0.1/32   scram-sha-256
$host    all          all       127.0.0.1/32   trust
$host    replication  all       127.0.0.1/32   trust
EOF
}

# start_server ROOT PORT: start and wait for readiness; returns 1 if the server died (e.g. port taken).
start_server() {
    local root=$1 port=$2 deadline
    : >"$root/server.log"
    [[ $(id -u) -eq 0 ]] && chown postgres: "$root/server.log"
    as_pg "$PG_BINDIR/pg_ctl" -D "$root/data" -l "$root/server.log" -o "-p $port" -W start >/dev/null
    deadline=$((SECONDS + START_TIMEOUT_S))
    while ((SECONDS < deadline)); do
        if "$PG_BINDIR/pg_isready" -q -t 1 -h 127.0.0.1 -p "$port" -d postgres -U "$test_user"; then
            return 0
        fi
        if ! as_pg "$PG_BINDIR/pg_ctl" -D "$root/data" status >/dev/null 2>&1; then
            # Give a just-forked postmaster a moment to write its pid file before judging it dead.
            sleep 0.2
            if ! as_pg "$PG_BINDIR/pg_ctl" -D "$root/data" status >/dev/null 2>&1; then
                return 1
            fi
        fi
        sleep 0.1
    done
    say "server on port $port not ready after ${START_TIMEOUT_S}s; server log:"
    cat "$root/server.log" >&2
    stop_root "$root"
    die "could not start PostgreSQL"
}

stop_root() {
    local root=$1 pid
    [[ -n $root && -f $root/$MARKER ]] || return 0
    if [[ -f $root/data/postmaster.pid ]]; then
        if ! as_pg "$PG_BINDIR/pg_ctl" -D "$root/data" -m immediate -t 10 stop >/dev/null 2>&1; then
            pid=$(head -n1 "$root/data/postmaster.pid" 2>/dev/null || true)
            if [[ $pid =~ ^[0-9]+$ ]]; then
                kill -KILL "$pid" 2>/dev/null || true
            fi
        fi
    fi
    rm -rf "$root"
}

# create_cluster: make a fresh cluster in a new temporary folder; sets ROOT and PORT.
create_cluster() {
    local try
    ROOT=$(mktemp -d "${TMPDIR:-/tmp}/firn-pg.XXXXXX")
    touch "$ROOT/$MARKER"
    init_cluster "$ROOT"
    for ((try = 1; try <= PORT_TRIES; try++)); do
        PORT=$(free_port)
        if start_server "$ROOT" "$PORT"; then
            break
        fi
        if ((try == PORT_TRIES)) || ! grep -q 'could not bind\|Address already in use' "$ROOT/server.log"; then
            say "server failed to start; server log:"
            cat "$ROOT/server.log" >&2
            stop_root "$ROOT"
            die "could not start PostgreSQL"
        fi
        say "port $PORT was taken, retrying"
    done
    "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$ROOT/sock" -p "$PORT" -U "$test_user" -d postgres \
        -c "CREATE ROLE $PW_ROLE LOGIN REPLICATION PASSWORD '$PW_SECRET'" \
        -c "GRANT CREATE ON DATABASE postgres TO $PW_ROLE" >/dev/null
}

env_lines() {
    cat <<EOF
export PGHOST=127.0.0.1
export PGPORT=$PORT
export PGUSER=$test_user
export PGDATABASE=postgres
export FIRN_TEST_PGURI=postgresql://$test_user@127.0.0.1:$PORT/postgres
export FIRN_TEST_PGSOCKDIR=$ROOT/sock
export FIRN_TEST_PGROOT=$ROOT
EOF
}

cmd_run() {
    [[ ${1:-} == -- ]] && shift
    (($# > 0)) || usage
    ROOT=
    child=
    cleanup() {
        if [[ -n $child ]] && kill -0 "$child" 2>/dev/null; then
            kill -TERM "$child" 2>/dev/null || true
            wait "$child" 2>/dev/null || true
        fi
        stop_root "$ROOT"
    }
    on_signal() {
        local sig=$1 code=$2
        trap - INT TERM
        say "caught SIG$sig, cleaning up"
        cleanup
        trap - EXIT
        exit "$code"
    }
    trap cleanup EXIT
    trap 'on_signal INT 130' INT
    trap 'on_signal TERM 143' TERM
    create_cluster
    eval "$(env_lines)"
    # Run CMD in the background so that a signal to this script is handled at once (bash defers
    # traps until a foreground child exits); the trap then stops CMD and the cluster.
    "$@" <&0 &
    child=$!
    local rc=0
    wait "$child" || rc=$?
    child=
    exit "$rc"
}

cmd_start() {
    local dir=${1:-}
    [[ -n $dir ]] || usage
    if [[ -f $dir/env ]]; then
        ROOT=$(sed -n 's/^export FIRN_TEST_PGROOT=//p' "$dir/env")
        PORT=$(sed -n 's/^export PGPORT=//p' "$dir/env")
        if [[ -n $ROOT && -d $ROOT/data ]] && as_pg "$PG_BINDIR/pg_ctl" -D "$ROOT/data" status >/dev/null 2>&1; then
            say "cluster in $dir already running on port $PORT"
            cat "$dir/env"
            return 0
        fi
        say "stale cluster handle in $dir, replacing it"
        stop_root "$ROOT"
        rm -f "$dir/env"
    fi
    mkdir -p "$dir"
    touch "$dir/$MARKER"
    ROOT=
    START_OK=
    trap '[[ -n $START_OK ]] || stop_root "$ROOT"' EXIT
    create_cluster
    env_lines >"$dir/env"
    START_OK=1
    say "started PostgreSQL on 127.0.0.1:$PORT (data in $ROOT); stop with: $0 stop $dir"
    cat "$dir/env"
}

cmd_stop() {
    local dir=${1:-}
    [[ -n $dir ]] || usage
    if [[ ! -f $dir/$MARKER ]]; then
        say "no cluster handle in $dir, nothing to stop"
        return 0
    fi
    if [[ -f $dir/env ]]; then
        stop_root "$(sed -n 's/^export FIRN_TEST_PGROOT=//p' "$dir/env")"
    fi
    rm -rf "$dir"
    say "stopped cluster $dir"
}

mode=${1:-}
(($# > 0)) && shift
case $mode in
run) cmd_run "$@" ;;
start) cmd_start "$@" ;;
stop) cmd_stop "$@" ;;
*) usage ;;
esac
