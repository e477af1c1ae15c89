#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Throwaway MariaDB 10.11 server for tests: its own datadir under a temporary folder, loopback TCP
# on a free port plus a unix socket, binlog settings chosen per test, an admin user and a firn user.
#
# Usage:
#   mariadb_cluster.sh run [--] CMD [ARGS...]  start a server, export FIRN_TEST_MYSQL_*, run CMD,
#                                              always stop and delete the server, exit with CMD's status
#   mariadb_cluster.sh start DIR               start a server whose handle is DIR; print `export` lines
#                                              (use: eval "$(mariadb_cluster.sh start DIR)")
#   mariadb_cluster.sh stop DIR                stop the server started with `start DIR` and delete it
#
# Binlog settings (environment, read at start): FIRN_MYSQL_LOG_BIN (1, 0 = no binlog),
# FIRN_MYSQL_BINLOG_FORMAT (ROW; STATEMENT or MIXED for refusal tests), FIRN_MYSQL_BINLOG_ROW_IMAGE
# (FULL, MINIMAL, NOBLOB), FIRN_MYSQL_BINLOG_ROW_METADATA (FULL, MINIMAL, NO_LOG), FIRN_MYSQL_SERVER_ID
# (1), FIRN_MYSQL_GTID_STRICT_MODE (1), FIRN_MYSQL_GTID_DOMAIN_ID (0), FIRN_MYSQL_EXPIRE_LOGS_DAYS
# (7; 0 = never purged), FIRN_MYSQL_SSL (1: TLS with a CA made at start, whose files are exported;
# 0: no TLS), FIRN_MYSQL_EXTRA_CNF (more [mariadbd] lines, verbatim).
# Other environment: FIRN_MYSQL_BINDIR (default: the directory of `mariadbd` on PATH or /usr/sbin),
# FIRN_MYSQL_START_TIMEOUT (s, 30).
#
# Users: root over the socket (admin, no password), FIRN_TEST_MYSQL_ADMIN_USER over TCP with every
# privilege, FIRN_TEST_MYSQL_USER (firn) with REPLICATION SLAVE, REPLICATION CLIENT, SELECT on *.*,
# and FIRN_TEST_MYSQL_DATABASE (firn_test) created empty. Run as root, mariadbd runs as the mysql
# OS user (as pg_cluster.sh runs PostgreSQL as postgres); otherwise as the calling user.
set -euo pipefail

START_TIMEOUT_S=${FIRN_MYSQL_START_TIMEOUT:-30}
LOG_BIN=${FIRN_MYSQL_LOG_BIN:-1}
BINLOG_FORMAT=${FIRN_MYSQL_BINLOG_FORMAT:-ROW}
ROW_IMAGE=${FIRN_MYSQL_BINLOG_ROW_IMAGE:-FULL}
ROW_METADATA=${FIRN_MYSQL_BINLOG_ROW_METADATA:-FULL}
SERVER_ID=${FIRN_MYSQL_SERVER_ID:-1}
GTID_STRICT=${FIRN_MYSQL_GTID_STRICT_MODE:-1}
GTID_DOMAIN=${FIRN_MYSQL_GTID_DOMAIN_ID:-0}
EXPIRE_DAYS=${FIRN_MYSQL_EXPIRE_LOGS_DAYS:-7}
SSL=${FIRN_MYSQL_SSL:-0}
EXTRA_CNF=${FIRN_MYSQL_EXTRA_CNF:-}
PORT_TRIES=5
MARKER=.firn-mariadb-cluster
ADMIN_USER=firn_admin
ADMIN_SECRET=firn_admin_secret
FIRN_USER=firn
FIRN_SECRET=firn_secret
DATABASE=firn_test

say() { printf 'mariadb_cluster: %s\n' "$*" >&2; }
die() {
    say "$*"
    exit 2
}

usage() {
    sed -n '6,12p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

check_settings() {
    [[ $LOG_BIN =~ ^[01]$ ]] || die "FIRN_MYSQL_LOG_BIN must be 0 or 1, got \"$LOG_BIN\""
    [[ $BINLOG_FORMAT =~ ^(ROW|STATEMENT|MIXED)$ ]] ||
        die "FIRN_MYSQL_BINLOG_FORMAT must be ROW, STATEMENT or MIXED, got \"$BINLOG_FORMAT\""
    [[ $ROW_IMAGE =~ ^(FULL|MINIMAL|NOBLOB)$ ]] ||
        die "FIRN_MYSQL_BINLOG_ROW_IMAGE must be FULL, MINIMAL or NOBLOB, got \"$ROW_IMAGE\""
    [[ $ROW_METADATA =~ ^(FULL|MINIMAL|NO_LOG)$ ]] ||
        die "FIRN_MYSQL_BINLOG_ROW_METADATA must be FULL, MINIMAL or NO_LOG, got \"$ROW_METADATA\""
    [[ $SERVER_ID =~ ^[0-9]+$ ]] || die "FIRN_MYSQL_SERVER_ID must be a number, got \"$SERVER_ID\""
    [[ $GTID_STRICT =~ ^[01]$ ]] || die "FIRN_MYSQL_GTID_STRICT_MODE must be 0 or 1, got \"$GTID_STRICT\""
    [[ $GTID_DOMAIN =~ ^[0-9]+$ ]] || die "FIRN_MYSQL_GTID_DOMAIN_ID must be a number, got \"$GTID_DOMAIN\""
    [[ $EXPIRE_DAYS =~ ^[0-9]+$ ]] || die "FIRN_MYSQL_EXPIRE_LOGS_DAYS must be a number, got \"$EXPIRE_DAYS\""
    [[ $SSL =~ ^[01]$ ]] || die "FIRN_MYSQL_SSL must be 0 or 1, got \"$SSL\""
}

find_bindir() {
    if [[ -n ${FIRN_MYSQL_BINDIR:-} ]]; then
        BINDIR=$FIRN_MYSQL_BINDIR
    elif command -v mariadbd >/dev/null 2>&1; then
        BINDIR=$(dirname "$(command -v mariadbd)")
    else
        BINDIR=/usr/sbin
    fi
    [[ -x $BINDIR/mariadbd ]] ||
        die "cannot find mariadbd in $BINDIR (install mariadb-server or run scripts/setup.sh)"
    INSTALL_DB=$(command -v mariadb-install-db || echo /usr/bin/mariadb-install-db)
    CLIENT=$(command -v mariadb || echo /usr/bin/mariadb)
    ADMIN=$(command -v mariadb-admin || echo /usr/bin/mariadb-admin)
    [[ -x $INSTALL_DB && -x $CLIENT && -x $ADMIN ]] ||
        die "cannot find mariadb-install-db, mariadb and mariadb-admin (install mariadb-server)"
}

server_user() {
    if [[ $(id -u) -eq 0 ]]; then
        echo mysql
    else
        id -un
    fi
}

free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# make_certs ROOT: a CA and a server certificate for 127.0.0.1/localhost, and a client
# certificate, all signed by the CA.
make_certs() {
    local d=$1/ssl
    mkdir -p "$d"
    (
        cd "$d"
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=firn test CA" \
            -keyout ca.key -out ca.crt
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
        openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key -out server.csr
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
            -extfile server.ext -out server.crt
        openssl req -newkey rsa:2048 -nodes -subj "/CN=firn client" -keyout client.key -out client.csr
        openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -out client.crt
    ) >/dev/null 2>&1 || die "openssl could not make the test certificates"
    chmod 644 "$d"/*.crt "$d"/*.key
}

# write_cnf ROOT PORT: the server's option file.
write_cnf() {
    local root=$1 port=$2
    {
        cat <<EOF
[mariadbd]
datadir=$root/data
socket=$root/sock/mysqld.sock
pid-file=$root/run/mariadbd.pid
log-error=$root/run/server.log
bind-address=127.0.0.1
port=$port
user=$(server_user)
skip-name-resolve
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
default-time-zone='+00:00'
innodb_buffer_pool_size=64M
innodb_log_file_size=16M
innodb_flush_log_at_trx_commit=0
sync_binlog=0
max_connections=200
server_id=$SERVER_ID
gtid_domain_id=$GTID_DOMAIN
gtid_strict_mode=$GTID_STRICT
expire_logs_days=$EXPIRE_DAYS
EOF
        if [[ $LOG_BIN == 1 ]]; then
            cat <<EOF
log_bin=$root/binlog/master-bin
binlog_format=$BINLOG_FORMAT
binlog_row_image=$ROW_IMAGE
binlog_row_metadata=$ROW_METADATA
EOF
        fi
        if [[ $SSL == 1 ]]; then
            cat <<EOF
ssl_ca=$root/ssl/ca.crt
ssl_cert=$root/ssl/server.crt
ssl_key=$root/ssl/server.key
EOF
        fi
        [[ -z $EXTRA_CNF ]] || printf '%s\n' "$EXTRA_CNF"
    } >"$root/my.cnf"
}

init_server() {
    local root=$1
    mkdir -p "$root/data" "$root/sock" "$root/binlog" "$root/run"
    [[ $SSL == 1 ]] && make_certs "$root"
    write_cnf "$root" 0
    if [[ $(id -u) -eq 0 ]]; then
        chown -R mysql: "$root/data" "$root/sock" "$root/binlog" "$root/run"
    fi
    if ! "$INSTALL_DB" --defaults-file="$root/my.cnf" --auth-root-authentication-method=socket \
        --skip-test-db --skip-name-resolve >"$root/install.log" 2>&1; then
        cat "$root/install.log" >&2
        die "mariadb-install-db failed"
    fi
}

# start_server ROOT PORT: start and wait for readiness; returns 1 if the server died.
start_server() {
    local root=$1 port=$2 deadline pid
    write_cnf "$root" "$port"
    : >"$root/run/server.log"
    [[ $(id -u) -eq 0 ]] && chown mysql: "$root/run/server.log"
    "$BINDIR/mariadbd" --defaults-file="$root/my.cnf" </dev/null >/dev/null 2>&1 &
    pid=$!
    disown "$pid"
    echo "$pid" >"$root/launcher.pid"
    deadline=$((SECONDS + START_TIMEOUT_S))
    while ((SECONDS < deadline)); do
        if "$ADMIN" --no-defaults --socket="$root/sock/mysqld.sock" -uroot ping >/dev/null 2>&1; then
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            return 1
        fi
        sleep 0.1
    done
    say "server on port $port not ready after ${START_TIMEOUT_S}s; server log:"
    cat "$root/run/server.log" >&2
    stop_root "$root"
    die "could not start MariaDB"
}

stop_root() {
    local root=$1 pid deadline
    [[ -n $root && -f $root/$MARKER ]] || return 0
    pid=
    [[ -f $root/run/mariadbd.pid ]] && pid=$(head -n1 "$root/run/mariadbd.pid" 2>/dev/null || true)
    [[ -z $pid && -f $root/launcher.pid ]] && pid=$(head -n1 "$root/launcher.pid" 2>/dev/null || true)
    if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
        # Only this cluster's server: its pid file lives in ROOT.
        kill -KILL "$pid" 2>/dev/null || true
        deadline=$((SECONDS + 10))
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
            sleep 0.1
        done
    fi
    rm -rf "$root"
}

sql_root() {
    "$CLIENT" --no-defaults --socket="$ROOT/sock/mysqld.sock" -uroot -e "$1"
}

create_cluster() {
    local try
    ROOT=$(mktemp -d "${TMPDIR:-/tmp}/firn-mariadb.XXXXXX")
    chmod 755 "$ROOT"
    touch "$ROOT/$MARKER"
    init_server "$ROOT"
    for ((try = 1; try <= PORT_TRIES; try++)); do
        PORT=$(free_port)
        if start_server "$ROOT" "$PORT"; then
            break
        fi
        if ((try == PORT_TRIES)) || ! grep -q 'Address already in use' "$ROOT/run/server.log"; then
            say "server failed to start; server log:"
            cat "$ROOT/run/server.log" >&2
            stop_root "$ROOT"
            die "could not start MariaDB"
        fi
        say "port $PORT was taken, retrying"
    done
    sql_root "CREATE USER '$ADMIN_USER'@'%' IDENTIFIED BY '$ADMIN_SECRET';
GRANT ALL PRIVILEGES ON *.* TO '$ADMIN_USER'@'%' WITH GRANT OPTION;
CREATE USER '$FIRN_USER'@'%' IDENTIFIED BY '$FIRN_SECRET';
GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO '$FIRN_USER'@'%';
CREATE DATABASE $DATABASE CHARACTER SET utf8mb4;" || die "could not create the test users"
}

env_lines() {
    cat <<EOF
export FIRN_TEST_MYSQL_HOST=127.0.0.1
export FIRN_TEST_MYSQL_PORT=$PORT
export FIRN_TEST_MYSQL_SOCKET=$ROOT/sock/mysqld.sock
export FIRN_TEST_MYSQL_ADMIN_USER=$ADMIN_USER
export FIRN_TEST_MYSQL_ADMIN_PASSWORD=$ADMIN_SECRET
export FIRN_TEST_MYSQL_USER=$FIRN_USER
export FIRN_TEST_MYSQL_PASSWORD=$FIRN_SECRET
export FIRN_TEST_MYSQL_DATABASE=$DATABASE
export FIRN_TEST_MYSQL_ROOT=$ROOT
EOF
    if [[ $SSL == 1 ]]; then
        cat <<EOF
export FIRN_TEST_MYSQL_SSL_CA=$ROOT/ssl/ca.crt
export FIRN_TEST_MYSQL_SSL_CERT=$ROOT/ssl/client.crt
export FIRN_TEST_MYSQL_SSL_KEY=$ROOT/ssl/client.key
EOF
    fi
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
        ROOT=$(sed -n 's/^export FIRN_TEST_MYSQL_ROOT=//p' "$dir/env")
        PORT=$(sed -n 's/^export FIRN_TEST_MYSQL_PORT=//p' "$dir/env")
        if [[ -n $ROOT && -S $ROOT/sock/mysqld.sock ]] &&
            "$ADMIN" --no-defaults --socket="$ROOT/sock/mysqld.sock" -uroot ping >/dev/null 2>&1; then
            say "server in $dir already running on port $PORT"
            cat "$dir/env"
            return 0
        fi
        say "stale server handle in $dir, replacing it"
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
    say "started MariaDB on 127.0.0.1:$PORT (data in $ROOT); stop with: $0 stop $dir"
    cat "$dir/env"
}

cmd_stop() {
    local dir=${1:-}
    [[ -n $dir ]] || usage
    if [[ ! -f $dir/$MARKER ]]; then
        say "no server handle in $dir, nothing to stop"
        return 0
    fi
    if [[ -f $dir/env ]]; then
        stop_root "$(sed -n 's/^export FIRN_TEST_MYSQL_ROOT=//p' "$dir/env")"
    fi
    rm -rf "$dir"
    say "stopped server $dir"
}

mode=${1:-}
(($# > 0)) && shift
case $mode in
run | start)
    check_settings
    find_bindir
    ;;
esac
case $mode in
run) cmd_run "$@" ;;
start) cmd_start "$@" ;;
stop) cmd_stop "$@" ;;
*) usage ;;
esac
