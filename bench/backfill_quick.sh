#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The taxi backfill alone, for iterating on copy speed (bench/README.md "Measuring the backfill
# alone"): raw `COPY (FORMAT binary)` of `trips` to /dev/null over PARALLEL ctid ranges, then one
# `firn sync` (full_refresh_cdc, the suite's mode) of `trips` into a fresh SQLite catalog, in the
# same run; prints wall, ratio, CPU-seconds per million rows, peak RSS and the load average.
#
#   bash bench/backfill_quick.sh [FIRN_BIN] [-- PREFIX...]   e.g. -- perf record -g -o perf.data
#
# Needs the PG* variables of a server (wal_level=logical, superuser) whose database holds
# `trips`: `eval "$(bash tests/harness/pg_cluster.sh start /tmp/bf)"`, then
# `$VENV/bin/python bench/datagen.py --uri "$FIRN_TEST_PGURI" --trips 2000000 --fhv 1 --narrow 1
# --wide 1`. Environment: PARALLEL (2), WORKDIR (a temporary folder, removed), SEPARATE=1 (the
# server, when local, on the first half of the cores and the raw COPY clients and firn on the
# other half for both timings, as if firn ran on its own host; the server's processes get all
# cores back at the end). Drops the replication slots of the database afterwards.
set -euo pipefail
firn=${1:-$(dirname "$0")/../build/release/src/cli/firn}
shift || true
[[ ${1:-} == -- ]] && shift
par=${PARALLEL:-2}
work=${WORKDIR:-$(mktemp -d /tmp/firn-bfq.XXXXXX)}
trap '[[ -z ${WORKDIR:-} ]] && rm -rf "$work"' EXIT
db=${PGDATABASE:-postgres}

cat >"$work/source.json" <<EOF
{"type": "postgres", "host": "${PGHOST:-127.0.0.1}", "port": ${PGPORT:-5432}, "database": "$db",
 "username": "${PGUSER:-postgres}", "sslmode": "disable", "schemas": ["public"],
 "parallelism": $par,${BATCH_ROWS:+ \"batch_rows\": $BATCH_ROWS,} "default_mode": "full_refresh_cdc", "initial_wait_seconds": 0}
EOF
cat >"$work/destination.json" <<EOF
{"catalog": {"type": "sql", "uri": "sqlite:///$work/catalog.db", "warehouse": "$work/warehouse"},
 "write": {"compression": "zstd"}, "commit": {"interval_seconds": 2.0}, "log": "warn"}
EOF
echo '{"selected_streams": {"public": [{"stream_name": "trips", "sync_mode": "full_refresh_cdc"}]}}' \
    >"$work/streams.json"

client=()
if [[ ${SEPARATE:-0} == 1 ]]; then
    ncpu=$(nproc)
    half=$((ncpu / 2))
    ((half >= 1)) || { echo "SEPARATE=1 needs 2 or more cores" >&2; exit 2; }
    server_cpus=0-$((half - 1)) client_cpus=$half-$((ncpu - 1))
    pm=$(head -1 "$(psql -XAtc 'SHOW data_directory')/postmaster.pid")
    pin_server() { # every process of the cluster: the postmaster's children inherit its mask
        taskset -p -c "$1" "$pm" >/dev/null
        for p in $(pgrep -P "$pm"); do taskset -p -c "$1" "$p" >/dev/null; done
    }
    pin_server "$server_cpus"
    trap 'pin_server 0-$((ncpu - 1)); [[ -z ${WORKDIR:-} ]] && rm -rf "$work"' EXIT
    client=(taskset -c "$client_cpus")
    echo "separate cores: server $server_cpus, clients and firn $client_cpus"
fi
rows=$(psql -XAtc "SELECT count(*) FROM trips")
pages=$(psql -XAtc "SELECT pg_relation_size('trips') / current_setting('block_size')::int")
load0=$(cut -d' ' -f1 /proc/loadavg)
t0=$(date +%s.%N)
for ((i = 0; i < par; i++)); do
    lo=$((pages * i / par)) hi=$((pages * (i + 1) / par))
    upper=" AND ctid < '($hi,0)'"
    ((i == par - 1)) && upper=""
    "${client[@]}" psql -XAtc "COPY (SELECT * FROM trips WHERE ctid >= '($lo,0)'$upper) TO STDOUT (FORMAT binary)" >/dev/null &
done
wait
raw=$(echo "$(date +%s.%N) - $t0" | bc)
/usr/bin/time -f "%e %U %S %M %R %c %w" -o "$work/time" "${client[@]}" "$@" "$firn" sync --source "$work/source.json" \
    --destination "$work/destination.json" --streams "$work/streams.json" \
    --state "$work/state.json" 2>"$work/stderr" || {
    tail -5 "$work/stderr"
    exit 1
}
read -r wall user sys rss_kb minflt invcs volcs <"$work/time"
psql -XAtqc "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
             WHERE database = current_database()" >/dev/null
printf 'rows %s  raw %.2fs  firn %.2fs  ratio %.2f  CPU %.2fs = %.3f CPU-s/M rows  RSS %d MB  faults %s  cs %s/%s  load %s/%s\n' \
    "$rows" "$raw" "$wall" "$(echo "$wall / $raw" | bc -l)" "$(echo "$user + $sys" | bc)" \
    "$(echo "($user + $sys) * 1000000 / $rows" | bc -l)" $((rss_kb / 1024)) "$minflt" "$volcs" "$invcs" "$load0" \
    "$(cut -d' ' -f1 /proc/loadavg)"
