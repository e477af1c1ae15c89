#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Demo: build firn (release preset), start a throwaway PostgreSQL 15 cluster that keeps running
# (handle in .firn/demo-pg) and load a small sample schema (scripts/demo_schema.sql).
set -euo pipefail
cd "$(dirname "$0")/.."

PG_HANDLE=.firn/demo-pg
say() { printf '\ndemo: %s\n' "$*"; }

say "setting up the machine (scripts/setup.sh)"
bash scripts/setup.sh >/dev/null

say "building the release preset"
cmake --preset release >/dev/null
cmake --build --preset release
FIRN=build/release/src/cli/firn
[[ -x $FIRN ]] || {
    echo "demo: build finished but $FIRN is missing" >&2
    exit 1
}

say "starting PostgreSQL (throwaway cluster, handle $PG_HANDLE)"
eval "$(bash tests/harness/pg_cluster.sh start "$PG_HANDLE")"

say "loading the sample schema into $FIRN_TEST_PGURI"
psql -X -q -v ON_ERROR_STOP=1 -d "$FIRN_TEST_PGURI" -f scripts/demo_schema.sql
psql -X -d "$FIRN_TEST_PGURI" -c "SELECT 'customers' AS table_name, count(*) AS rows FROM customers
    UNION ALL SELECT 'products', count(*) FROM products
    UNION ALL SELECT 'orders', count(*) FROM orders"

cat <<MSG

demo: PostgreSQL is running at $FIRN_TEST_PGURI with tables customers, products and orders.
demo: firn is built at $FIRN.
demo: the sync step (snapshot + streaming into Iceberg tables under ./warehouse) lands with the
demo: sync engine; until then this demo stops here.

  connect:  psql '$FIRN_TEST_PGURI'
  stop:     bash tests/harness/pg_cluster.sh stop $PG_HANDLE
MSG
