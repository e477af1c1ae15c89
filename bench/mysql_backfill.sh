#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The MySQL/MariaDB backfill beside PostgreSQL's (issue 27 "Benchmark"): the taxi `trips` table
# (galaxy-io's taxi-12mo columns, bench/datagen.py, in MariaDB types) loaded into a throwaway
# MariaDB 10.11 (tests/harness/mariadb_cluster.sh), then the raw read floor (`mariadb --quick`
# draining the same SELECT firn runs to /dev/null) and one `firn sync` (full refresh) of `trips`
# into a fresh SQLite catalog; prints wall, ratio, CPU-seconds per million rows and peak RSS in
# backfill_quick.sh's format.
#
#   bash bench/mysql_backfill.sh [FIRN_BIN]      ROWS (default 1000000), WORKDIR (temporary)
#
# firn reads one consistent snapshot on one connection (docs/mysql.md), so the floor is one
# client too. Goals (issue 27): <= 1.3x the floor, >= 1 M rows per CPU-second, RSS <= 256 MiB.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
firn=${1:-$here/../build/release/src/cli/firn}
rows=${ROWS:-1000000}
work=${WORKDIR:-$(mktemp -d /tmp/firn-mybf.XXXXXX)}
[[ -x $firn ]] || { echo "no firn binary at $firn (build the release preset)" >&2; exit 2; }

if [[ -z ${FIRN_TEST_MYSQL_PORT:-} ]]; then
    exec bash "$here/../tests/harness/mariadb_cluster.sh" run -- env WORKDIR="$work" ROWS="$rows" \
        bash "$0" "$firn"
fi
trap '[[ -z ${WORKDIR_KEEP:-} ]] && rm -rf "$work"' EXIT
mkdir -p "$work"
sql() {
    mariadb --no-defaults -h "$FIRN_TEST_MYSQL_HOST" -P "$FIRN_TEST_MYSQL_PORT" \
        -u "$FIRN_TEST_MYSQL_ADMIN_USER" -p"$FIRN_TEST_MYSQL_ADMIN_PASSWORD" "$@"
}
db=$FIRN_TEST_MYSQL_DATABASE
sql "$db" >/dev/null <<EOF
CREATE TABLE trips (id bigint PRIMARY KEY, vendor_id int, pickup_at datetime, dropoff_at datetime,
  passenger_count int, trip_distance decimal(15,2), ratecode_id int, store_and_fwd_flag text,
  pu_location_id int, do_location_id int, payment_type int, fare_amount decimal(15,2),
  extra decimal(15,2), mta_tax decimal(15,2), tip_amount decimal(15,2), tolls_amount decimal(15,2),
  improvement_surcharge decimal(15,2), total_amount decimal(15,2),
  congestion_surcharge decimal(15,2), airport_fee decimal(15,2));
INSERT INTO trips SELECT seq, 1 + seq % 2, TIMESTAMP'2024-01-01 00:00:00' + INTERVAL (seq * 17) SECOND,
  TIMESTAMP'2024-01-01 00:12:00' + INTERVAL (seq * 17) SECOND, 1 + seq % 4, (seq % 2000) / 100,
  1, IF(seq % 50 = 0, 'Y', 'N'), 1 + seq % 263, 1 + (seq * 7) % 263, 1 + seq % 3,
  5 + (seq % 6000) / 100, 0.5, 0.5, (seq % 900) / 100, 0, 1, 10 + (seq % 8000) / 100, 2.5,
  IF(seq % 10 = 0, 1.75, 0)
  FROM seq_1_to_$rows;
ANALYZE TABLE trips;
EOF
cols=$(sql -N "$db" -e "SELECT GROUP_CONCAT(CONCAT('\`', COLUMN_NAME, '\`') ORDER BY ORDINAL_POSITION)
    FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '$db' AND TABLE_NAME = 'trips'")

cat >"$work/source.json" <<EOF
{"type": "mariadb", "host": "$FIRN_TEST_MYSQL_HOST", "port": $FIRN_TEST_MYSQL_PORT,
 "database": "$db", "username": "$FIRN_TEST_MYSQL_USER", "password": "$FIRN_TEST_MYSQL_PASSWORD",
 "ssl_mode": "disabled"}
EOF
cat >"$work/destination.json" <<EOF
{"catalog": {"type": "sql", "uri": "sqlite:///$work/catalog.db", "warehouse": "$work/warehouse"},
 "write": {"compression": "zstd"}, "log": "warn"}
EOF
echo "{\"selected_streams\": {\"$db\": [{\"stream_name\": \"trips\", \"sync_mode\": \"full_refresh\"}]}}" \
    >"$work/streams.json"

t0=$(date +%s.%N)
sql --quick -N "$db" -e "SELECT $cols FROM \`$db\`.\`trips\`" >/dev/null
raw=$(echo "$(date +%s.%N) - $t0" | bc)
/usr/bin/time -f "%e %U %S %M" -o "$work/time" "$firn" sync --source "$work/source.json" \
    --destination "$work/destination.json" --streams "$work/streams.json" \
    --state "$work/state.json" 2>"$work/stderr" || {
    tail -5 "$work/stderr"
    exit 1
}
read -r wall user sys rss_kb <"$work/time"
printf 'mariadb rows %s  raw %.2fs  firn %.2fs  ratio %.2f  CPU %.2fs = %.3f CPU-s/M rows  RSS %d MB\n' \
    "$rows" "$raw" "$wall" "$(echo "$wall / $raw" | bc -l)" "$(echo "$user + $sys" | bc)" \
    "$(echo "($user + $sys) * 1000000 / $rows" | bc -l)" $((rss_kb / 1024))
