#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Throwaway Apache Iceberg REST catalog for tests: the runnable fixture jar of Maven Central's
# org.apache.iceberg:iceberg-open-api (RESTCatalogServer: Iceberg's JdbcCatalog behind the REST
# servlet; downloaded by scripts/setup.sh, pinned in scripts/rest-jars.txt) on Java 17, with a
# SQLite catalog database in a temporary folder, on a free loopback port. Configured through
# CATALOG_* environment variables (CATALOG_URI -> uri, CATALOG_IO__IMPL -> io-impl, ...).
#
# Usage:
#   rest_catalog.sh run [--] CMD [ARGS...]   start a catalog, export its settings, run CMD,
#                                            always stop it and delete its folder
#   rest_catalog.sh start DIR                start a catalog whose handle is DIR; print `export`
#                                            lines
#   rest_catalog.sh stop DIR                 stop the catalog started with `start DIR`, delete DIR
#
# Warehouse: FIRN_REST_WAREHOUSE (default file://DIR/warehouse). For an s3:// warehouse set
# FIRN_REST_S3_ENDPOINT, FIRN_REST_S3_ACCESS_KEY, FIRN_REST_S3_SECRET_KEY (and
# FIRN_REST_S3_REGION): the catalog then uses Iceberg's S3FileIO (path-style) and, with
# FIRN_REST_VEND=1, hands those keys to clients as vended credentials in every LoadTableResult
# (include-credentials). Extra CATALOG_* variables in the environment pass through.
# Exports: FIRN_TEST_REST_URI (http://127.0.0.1:PORT), FIRN_TEST_REST_WAREHOUSE,
# FIRN_TEST_REST_DB (the SQLite file), FIRN_TEST_REST_LOG.
# Environment: FIRN_REST_JAR (default ${FIRN_CACHE:-~/.cache/firn}/jars/iceberg-open-api-1.10.1.jar),
# FIRN_REST_JAVA (default: Debian's Java 17, else java), FIRN_REST_START_TIMEOUT (s, default 90).
set -euo pipefail

CACHE=${FIRN_CACHE:-$HOME/.cache/firn}
JAR=${FIRN_REST_JAR:-$CACHE/jars/iceberg-open-api-1.10.1.jar}
START_TIMEOUT_S=${FIRN_REST_START_TIMEOUT:-90}
PORT_TRIES=3
MARKER=.firn-rest-catalog

say() { printf 'rest_catalog: %s\n' "$*" >&2; }
die() {
    say "$*"
    exit 2
}

pick_java() {
    local cand
    for cand in ${FIRN_REST_JAVA:-} /usr/lib/jvm/java-17-openjdk-*/bin/java java; do
        [[ -n $cand ]] || continue
        if command -v "$cand" >/dev/null 2>&1; then
            echo "$cand"
            return
        fi
    done
    die "no java found (install openjdk-17-jre-headless, or run scripts/setup.sh)"
}

free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# start_server DIR PORT: returns 1 when the server died (port taken) or never answered.
start_server() {
    local dir=$1 port=$2 deadline java
    java=$(pick_java)
    (
        export CATALOG_URI="jdbc:sqlite:$dir/catalog.db"
        export CATALOG_JDBC_USER=firn CATALOG_JDBC_PASSWORD=firn
        export CATALOG_WAREHOUSE=$WAREHOUSE
        export CATALOG_REST_PORT=$port
        if [[ $WAREHOUSE == s3://* ]]; then
            export CATALOG_IO__IMPL=org.apache.iceberg.aws.s3.S3FileIO
            export CATALOG_S3_ENDPOINT=$FIRN_REST_S3_ENDPOINT
            export CATALOG_S3_PATH__STYLE__ACCESS=true
            export CATALOG_S3_ACCESS__KEY__ID=$FIRN_REST_S3_ACCESS_KEY
            export CATALOG_S3_SECRET__ACCESS__KEY=$FIRN_REST_S3_SECRET_KEY
            export CATALOG_CLIENT_REGION=${FIRN_REST_S3_REGION:-us-east-1}
            # the AWS SDK inside the catalog reads the region from here too
            export AWS_REGION=${FIRN_REST_S3_REGION:-us-east-1}
            if [[ ${FIRN_REST_VEND:-} == 1 ]]; then
                export CATALOG_INCLUDE__CREDENTIALS=true
            fi
        fi
        # C1 only and the serial collector: the catalog starts in a few seconds on 2 cores
        exec setsid "$java" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xmx512m \
            -Djava.net.preferIPv4Stack=true -jar "$JAR"
    ) >"$dir/server.log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    deadline=$((SECONDS + START_TIMEOUT_S))
    while ((SECONDS < deadline)); do
        if curl -fs -o /dev/null -m 2 "http://127.0.0.1:$port/v1/config"; then
            return 0
        fi
        if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
            return 1
        fi
        sleep 0.2
    done
    kill "$(cat "$dir/pid")" 2>/dev/null || true
    return 1
}

cmd_start() {
    local dir=$1 port='' try
    [[ -f $JAR ]] || die "cannot find the REST catalog jar at $JAR (run scripts/setup.sh)"
    [[ -e $dir ]] && die "$dir already exists"
    mkdir -p "$dir/warehouse"
    dir=$(cd "$dir" && pwd) # the warehouse location must be absolute (file://DIR/warehouse)
    : >"$dir/$MARKER"
    WAREHOUSE=${FIRN_REST_WAREHOUSE:-file://$dir/warehouse}
    if [[ $WAREHOUSE == s3://* && -z ${FIRN_REST_S3_ENDPOINT:-} ]]; then
        die "an s3:// warehouse needs FIRN_REST_S3_ENDPOINT and the keys"
    fi
    for ((try = 1; try <= PORT_TRIES; try++)); do
        port=$(free_port)
        if start_server "$dir" "$port"; then
            break
        fi
        say "the REST catalog did not start on port $port (try $try):"
        tail -n 20 "$dir/server.log" >&2 || true
        port=''
    done
    [[ -n $port ]] || die "could not start the REST catalog"
    echo "$port" >"$dir/port"
    cat <<EOT
export FIRN_TEST_REST_URI=http://127.0.0.1:$port
export FIRN_TEST_REST_WAREHOUSE=$WAREHOUSE
export FIRN_TEST_REST_DB=$dir/catalog.db
export FIRN_TEST_REST_LOG=$dir/server.log
EOT
}

cmd_stop() {
    local dir=$1 pid
    [[ -f $dir/$MARKER ]] || die "$dir is not a catalog started by rest_catalog.sh"
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
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/firn-rest.XXXXXX")
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
    (($# == 2)) || die "usage: rest_catalog.sh start DIR"
    cmd_start "$2"
    ;;
stop)
    (($# == 2)) || die "usage: rest_catalog.sh stop DIR"
    cmd_stop "$2"
    ;;
*)
    sed -n '9,15p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
