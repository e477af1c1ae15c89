#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Demo (README command 1): build firn (release preset), start a throwaway PostgreSQL 15 cluster that
# keeps running (handle in .firn/demo-pg), load a sample schema, sync it into Iceberg tables in a
# local warehouse with the embedded SQLite catalog, change the source, sync again, and query the
# result with DuckDB and pyiceberg.

set -euo pipefail
cd "$(dirname "$0")/.."

PG_HANDLE=.firn/demo-pg
say() { printf '\ndemo: %s\n' "$*"; }

say "setting up the machine (scripts/setup.sh)"
bash scripts/setup.sh --demo >/dev/null

say "building firn (release preset)"
cmake --preset release >/dev/null
cmake --build --preset release --target firn
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

DEMO=.firn/demo
WAREHOUSE=$PWD/$DEMO/warehouse
mkdir -p "$DEMO"
rm -rf "$WAREHOUSE" "$DEMO/catalog.db" "$DEMO/state.json" "$DEMO/streams.json" "$DEMO/index"
psql -X -q -d "$FIRN_TEST_PGURI" -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
    WHERE slot_name = 'firn_demo'" >/dev/null
psql -X -q -d "$FIRN_TEST_PGURI" -c "SET client_min_messages = warning" \
    -c "DROP PUBLICATION IF EXISTS firn_demo" >/dev/null

say "writing the configuration into $DEMO (source.json, destination.json)"
cat >"$DEMO/source.json" <<JSON
{
  "type": "postgres",
  "host": "$PGHOST",
  "port": $PGPORT,
  "database": "$PGDATABASE",
  "username": "$PGUSER",
  "sslmode": "disable",
  "slot": "firn_demo",
  "publication": "firn_demo",
  "create_slot": true,
  "create_publication": true,
  "default_mode": "full_refresh_cdc"
}
JSON
cat >"$DEMO/destination.json" <<JSON
{
  "catalog": {"type": "sql", "name": "firn", "uri": "sqlite:///$PWD/$DEMO/catalog.db",
              "warehouse": "file://$WAREHOUSE"},
  "namespace": "demo_{schema}",
  "index_dir": "$PWD/$DEMO/index"
}
JSON
ARGS=(--source "$DEMO/source.json" --destination "$DEMO/destination.json"
      --streams "$DEMO/streams.json" --state "$DEMO/state.json")

say "firn check"
"$FIRN" check --source "$DEMO/source.json" --destination "$DEMO/destination.json"
say "firn discover (every table selected, full refresh + CDC)"
"$FIRN" discover --source "$DEMO/source.json" --destination "$DEMO/destination.json" \
    --output "$DEMO/streams.json"
say "firn sync: backfill inside the replication slot's snapshot, then stream the WAL"
"$FIRN" sync "${ARGS[@]}"

say "changing the source: inserts, updates and deletes"
psql -X -q -v ON_ERROR_STOP=1 -d "$FIRN_TEST_PGURI" <<'SQL'
INSERT INTO customers (email, name, country, preferences)
    VALUES ('katherine@example.org', 'Katherine Johnson', 'US', '{"orbit": "low"}');
UPDATE customers SET vip = true, name = 'Grace M. Hopper' WHERE email = 'grace@example.org';
UPDATE products SET price = price * 0.9, tags = array_append(tags, 'sale') WHERE sku LIKE 'ICE-%';
INSERT INTO orders (id, customer_id, sku, quantity, placed_at, note)
    SELECT '6f1c0c1e-0a57-4b8e-9a55-2f3f1c7d0005', id, 'TNT-100', 2, now(), 'first order'
    FROM customers WHERE email = 'katherine@example.org';
DELETE FROM orders WHERE id = '6f1c0c1e-0a57-4b8e-9a55-2f3f1c7d0003';
BEGIN;
INSERT INTO products (sku, title, price) VALUES ('TMP-000', 'short-lived', 1);
DELETE FROM products WHERE sku = 'TMP-000';
COMMIT;
SQL
say "firn sync again: a catch-up run commits the changes and acknowledges the slot"
"$FIRN" sync "${ARGS[@]}"
"$FIRN" status "${ARGS[@]}"

say "reading the Iceberg tables back with DuckDB (iceberg extension) and pyiceberg"
VENV_PY=${FIRN_CACHE:-$HOME/.cache/firn}/venv/bin/python
"$VENV_PY" - "$PWD/$DEMO" <<'PY'
import sys, sqlite3
from duckdb_extensions import import_extension
import duckdb
from pyiceberg.catalog.sql import SqlCatalog

demo = sys.argv[1]
catalog = SqlCatalog("firn", uri=f"sqlite:///{demo}/catalog.db", warehouse=f"file://{demo}/warehouse")
con = duckdb.connect(config={"autoinstall_known_extensions": False})
for ext in ("avro", "iceberg"):
    import_extension(ext, con=con)
    con.execute(f"LOAD {ext}")
for name in ("customers", "products", "orders"):
    table = catalog.load_table(f"demo_public.{name}")
    snap = table.current_snapshot()
    print(f"\n== demo_public.{name}: snapshot {snap.snapshot_id}: "
          f"{snap.summary.get('total-records')} rows in data files, "
          f"{snap.summary.get('total-position-deletes', '0')} of them deleted (position deletes)")
    rel = con.sql(f"SELECT * EXCLUDE (_firn_ingest_ts, _firn_commit_ts) "
                  f"FROM iceberg_scan('{table.metadata_location}') ORDER BY 1")
    rel.show(max_width=200)
    rows = table.scan().to_arrow().num_rows
    print(f"pyiceberg sees {rows} rows")
PY

cat <<MSG

demo: done. PostgreSQL keeps running at $FIRN_TEST_PGURI; the Iceberg tables are in
demo: $WAREHOUSE (catalog $DEMO/catalog.db, namespace demo_public).
demo: change rows with psql and run the sync again, from $PWD:
demo:   $FIRN sync ${ARGS[*]}
demo: or keep streaming with --follow (Ctrl-C commits and stops). Read a table again:
demo:   $VENV_PY -c "from pyiceberg.catalog.sql import SqlCatalog; print(SqlCatalog('firn', uri='sqlite:///$PWD/$DEMO/catalog.db', warehouse='file://$PWD/$DEMO/warehouse').load_table('demo_public.orders').scan().to_arrow())"

  connect:  psql '$FIRN_TEST_PGURI'
  stop:     bash tests/harness/pg_cluster.sh stop $PG_HANDLE
MSG
