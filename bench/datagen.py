#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Benchmark data generator: taxi-shaped, narrow and wide tables, generated inside PostgreSQL.

`trips` and `fhv_trips` have exactly the columns and PostgreSQL types of the galaxy-io
data-movement benchmark's taxi-12mo dataset (data-movement/datasets/taxi.go: taxiDDL and fhvDDL),
so our figures can stand beside its published ones; the values follow the shape of the NYC TLC
2024 records (see bench/README.md, "Data"). `narrow` has 4 columns, `wide` 121.

Rows are made by `INSERT ... SELECT ... FROM generate_series(lo, hi)` with random() and a few
lookup arrays for categorical distributions, split into id ranges over `parallel` connections
(server-side generation beats sending binary COPY from Python by a wide margin: no client
encoding, no network). The primary key is added after the load, then VACUUM (FREEZE, ANALYZE)
settles the pages the way the galaxy harness does, so no autovacuum runs during a measurement.

Usage: python bench/datagen.py --uri URI [--trips N] [--fhv N] [--narrow N] [--wide N]
       [--parallel P]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

# The galaxy-io taxi-12mo layout (column, PostgreSQL type), in table order.
TRIPS_COLUMNS = [
    ("id", "bigint"), ("vendor_id", "integer"), ("pickup_at", "timestamp"),
    ("dropoff_at", "timestamp"), ("passenger_count", "integer"),
    ("trip_distance", "numeric(15,2)"), ("ratecode_id", "integer"),
    ("store_and_fwd_flag", "text"), ("pu_location_id", "integer"),
    ("do_location_id", "integer"), ("payment_type", "integer"), ("fare_amount", "numeric(15,2)"),
    ("extra", "numeric(15,2)"), ("mta_tax", "numeric(15,2)"), ("tip_amount", "numeric(15,2)"),
    ("tolls_amount", "numeric(15,2)"), ("improvement_surcharge", "numeric(15,2)"),
    ("total_amount", "numeric(15,2)"), ("congestion_surcharge", "numeric(15,2)"),
    ("airport_fee", "numeric(15,2)"),
]
FHV_COLUMNS = [
    ("id", "bigint"), ("dispatching_base_num", "text"), ("pickup_at", "timestamp"),
    ("dropoff_at", "timestamp"), ("pu_location_id", "integer"), ("do_location_id", "integer"),
    ("sr_flag", "integer"), ("affiliated_base_number", "text"),
]
NARROW_COLUMNS = [
    ("id", "bigint"), ("account_id", "integer"), ("amount", "numeric(12,2)"),
    ("created_at", "timestamptz"),
]

# Wide table: id + 120 columns cycling through these types.
WIDE_TYPES = ["integer", "bigint", "double precision", "text", "timestamp", "numeric(12,2)",
              "boolean", "date"]
WIDE_EXTRA = 120
WIDE_COLUMNS = [("id", "bigint")] + [
    (f"c{i:03d}", WIDE_TYPES[(i - 1) % len(WIDE_TYPES)]) for i in range(1, WIDE_EXTRA + 1)]

TABLES = {"trips": TRIPS_COLUMNS, "fhv_trips": FHV_COLUMNS, "narrow": NARROW_COLUMNS,
          "wide": WIDE_COLUMNS}


def _weighted(pairs: list[tuple[str, int]]) -> str:
    """A 100-element SQL array literal holding each value `weight` times; index it with
    `[1 + floor(random() * 100)::int]` to draw from the distribution."""
    items = [v for v, w in pairs for _ in range(w)]
    assert len(items) == 100, (pairs, len(items))
    return "ARRAY[" + ",".join(items) + "]"


# Hour-of-day weights of NYC yellow-cab pickups (few at 4-5 am, peak 17-19).
HOURS = _weighted([("0", 3), ("1", 2), ("2", 1), ("3", 1), ("4", 1), ("5", 1), ("6", 2),
                   ("7", 4), ("8", 5), ("9", 5), ("10", 5), ("11", 5), ("12", 6), ("13", 6),
                   ("14", 6), ("15", 6), ("16", 6), ("17", 7), ("18", 7), ("19", 6), ("20", 5),
                   ("21", 4), ("22", 3), ("23", 3)])
# The busiest TLC taxi zones (Midtown, Upper East Side, Penn Station, JFK 132, LaGuardia 138 ...).
POPULAR_ZONES = ("ARRAY[161,237,236,162,230,186,142,170,163,132,138,234,239,48,68,79,107,140,"
                 "141,249,100,113,164,229,43,246,90,263,262,233,151,137,238,50,125,114,87,144,"
                 "148,231]")
# A zone: 75% one of the 40 busy zones, else uniform over 1..265.
ZONE = ("CASE WHEN random() < 0.75 THEN (" + POPULAR_ZONES +
        ")[1 + floor(random() * 40)::int] ELSE 1 + floor(random() * 265)::int END")
# Standard normal via Box-Muller (PostgreSQL 15 has no random_normal()).
NORMAL = "(sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))"
YEAR_START = "timestamp '2024-01-01'"


def _pickup() -> str:
    return (f"date_trunc('second', {YEAR_START} + floor(random() * 366) * interval '1 day'"
            f" + ({HOURS})[1 + floor(random() * 100)::int] * interval '1 hour'"
            f" + random() * interval '1 hour')")


def trips_select(lo: int, hi: int) -> str:
    """SELECT producing trips rows lo..hi (inclusive) in TRIPS_COLUMNS order."""
    vendor = _weighted([("2", 72), ("1", 27), ("6", 1)])
    passengers = _weighted([("1", 72), ("2", 14), ("3", 4), ("4", 2), ("5", 3), ("6", 2),
                            ("0", 3)])
    ratecode = _weighted([("1", 92), ("2", 4), ("5", 2), ("99", 1), ("3", 1)])
    payment = _weighted([("1", 76), ("2", 16), ("3", 1), ("4", 2), ("0", 5)])
    extra = _weighted([("0", 45), ("1", 20), ("2.5", 25), ("5", 10)])
    # r: raw draws per row; s: derived trip figures; outer: money columns.
    return f"""
SELECT id, vendor_id, pickup_at, pickup_at + minutes * interval '1 minute' AS dropoff_at,
       passenger_count, distance AS trip_distance, ratecode_id, store_and_fwd_flag,
       pu_location_id, do_location_id, payment_type, fare AS fare_amount, extra,
       0.50::numeric(15,2) AS mta_tax, tip AS tip_amount, tolls AS tolls_amount,
       1.00::numeric(15,2) AS improvement_surcharge,
       (fare + extra + 0.50 + tip + tolls + 1.00 + congestion + airport)::numeric(15,2),
       congestion AS congestion_surcharge, airport AS airport_fee
FROM (
  SELECT *, CASE WHEN payment_type = 1 AND random() < 0.9
                 THEN round(fare * (0.12 + 0.13 * random())::numeric, 2) ELSE 0 END::numeric(15,2) AS tip
  FROM (
    SELECT *, CASE WHEN ratecode_id = 2 THEN 70.00
                   ELSE round(3.00 + 3.50 * distance + 0.35 * minutes, 2) END::numeric(15,2) AS fare,
           CASE WHEN pu_location_id IN (132, 138) THEN 1.75 ELSE 0 END::numeric(15,2) AS airport
    FROM (
      SELECT g AS id, ({vendor})[1 + floor(random() * 100)::int] AS vendor_id,
             {_pickup()} AS pickup_at, minutes,
             ({passengers})[1 + floor(random() * 100)::int] AS passenger_count,
             round((minutes * exp(ln(0.17) + 0.35 * {NORMAL}))::numeric, 2)::numeric(15,2)
               AS distance,
             ({ratecode})[1 + floor(random() * 100)::int] AS ratecode_id,
             CASE WHEN random() < 0.005 THEN 'Y' ELSE 'N' END AS store_and_fwd_flag,
             {ZONE} AS pu_location_id, {ZONE} AS do_location_id,
             ({payment})[1 + floor(random() * 100)::int] AS payment_type,
             ({extra})[1 + floor(random() * 100)::int]::numeric(15,2) AS extra,
             CASE WHEN random() < 0.07 THEN 6.94 ELSE 0 END::numeric(15,2) AS tolls,
             CASE WHEN random() < 0.9 THEN 2.50 ELSE 0 END::numeric(15,2) AS congestion
      FROM (SELECT g, least(180, greatest(1, round(exp(ln(12) + 0.65 * {NORMAL}))))
                      ::numeric AS minutes FROM generate_series({lo}::bigint, {hi}::bigint) g) g0
    ) s
  ) f
) t"""


def fhv_select(lo: int, hi: int) -> str:
    """SELECT producing fhv_trips rows lo..hi in FHV_COLUMNS order: high-volume bases (Uber
    B03404, Lyft B03406) dominate, a tail of small bases, ~3% shared-ride requests."""
    base = ("CASE WHEN u < 0.70 THEN 'B03404' WHEN u < 0.94 THEN 'B03406' "
            "ELSE 'B0' || (2000 + floor(random() * 1500)::int)::text END")
    return f"""
SELECT g AS id, dispatching_base_num, pickup_at,
       pickup_at + least(240, greatest(1, round(exp(ln(17) + 0.6 * {NORMAL}))))
                   * interval '1 minute' AS dropoff_at,
       {ZONE} AS pu_location_id, {ZONE} AS do_location_id,
       CASE WHEN random() < 0.03 THEN 1 ELSE 0 END AS sr_flag,
       CASE WHEN dispatching_base_num = 'B03404'
            THEN CASE WHEN random() < 0.9 THEN 'B03404'
                      ELSE 'B0' || (2500 + floor(random() * 900)::int)::text END
            WHEN dispatching_base_num = 'B03406' THEN ''
            ELSE dispatching_base_num END AS affiliated_base_number
FROM (SELECT g, {base} AS dispatching_base_num, {_pickup()} AS pickup_at
      FROM (SELECT g, random() AS u FROM generate_series({lo}::bigint, {hi}::bigint) g) g0) s"""


def narrow_select(lo: int, hi: int) -> str:
    """SELECT producing narrow rows: an account (Zipf-like skew), an amount, a time."""
    return f"""
SELECT g, floor(100000 * power(random(), 3))::int,
       round((exp(ln(40) + 1.1 * {NORMAL}))::numeric, 2)::numeric(12,2),
       timestamptz '2024-01-01 00:00:00+00' + random() * interval '366 days'
FROM generate_series({lo}::bigint, {hi}::bigint) g"""


def _wide_expr(i: int, typ: str) -> str:
    null = f"CASE WHEN random() < 0.05 THEN NULL ELSE " if i % 3 == 0 else "CASE WHEN true THEN "
    expr = {
        "integer": "floor(random() * 1000000)::int",
        "bigint": "floor(random() * 1e12)::bigint",
        "double precision": "random() * 1000",
        "text": "'v' || floor(random() * 100000)::int::text",
        "timestamp": f"date_trunc('second', {YEAR_START} + random() * interval '366 days')",
        "numeric(12,2)": "round((random() * 10000)::numeric, 2)",
        "boolean": "random() < 0.5",
        "date": "date '2024-01-01' + floor(random() * 366)::int",
    }[typ]
    return f"{null}{expr} END"


def wide_select(lo: int, hi: int) -> str:
    """SELECT producing wide rows: 120 columns of 8 types, every third column 5% NULL."""
    cols = ", ".join(_wide_expr(i, typ) for i, (_, typ) in enumerate(WIDE_COLUMNS[1:], 1))
    return f"SELECT g, {cols} FROM generate_series({lo}::bigint, {hi}::bigint) g"


SELECTS = {"trips": trips_select, "fhv_trips": fhv_select, "narrow": narrow_select,
           "wide": wide_select}


def create_sql(table: str) -> str:
    cols = ", ".join(f"{name} {typ}" for name, typ in TABLES[table])
    return f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} ({cols})"


def _ranges(rows: int, parts: int) -> list[tuple[int, int]]:
    step = -(-rows // parts)
    return [(lo, min(rows, lo + step - 1)) for lo in range(1, rows + 1, step)]


def load_table(uri: str, table: str, rows: int, parallel: int) -> dict:
    """Create `table` and fill it with ids 1..rows over `parallel` connections. Returns the load
    figures: seconds of the insert phase and in all (with primary key and vacuum), rows/s, the
    table's size in bytes."""
    import psycopg

    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(create_sql(table))
    errors: list[BaseException] = []

    def work(lo: int, hi: int) -> None:
        try:
            with psycopg.connect(uri, autocommit=True) as c:
                c.execute("SET synchronous_commit = off")
                c.execute(f"INSERT INTO {table} {SELECTS[table](lo, hi)}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    t0 = time.monotonic()
    threads = [threading.Thread(target=work, args=r) for r in _ranges(rows, parallel) if rows]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    insert_s = time.monotonic() - t0
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {table} ADD PRIMARY KEY (id)")
        conn.execute(f"VACUUM (FREEZE, ANALYZE) {table}")
        size = conn.execute("SELECT pg_table_size(%s)", (table,)).fetchone()[0]
    total_s = time.monotonic() - t0
    return {"table": table, "rows": rows, "columns": len(TABLES[table]),
            "insert_s": round(insert_s, 3), "total_s": round(total_s, 3),
            "rows_per_s": round(rows / insert_s) if insert_s > 0 else None,
            "bytes": size, "mb_per_s": round(size / 1e6 / insert_s, 1) if insert_s > 0 else None}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uri", required=True)
    ap.add_argument("--parallel", type=int, default=2)
    for name, default in (("trips", 1_000_000), ("fhv", 1_000_000), ("narrow", 1_000_000),
                          ("wide", 100_000)):
        ap.add_argument(f"--{name}", type=int, default=default)
    args = ap.parse_args()
    counts = {"trips": args.trips, "fhv_trips": args.fhv, "narrow": args.narrow,
              "wide": args.wide}
    for table, rows in counts.items():
        print(json.dumps(load_table(args.uri, table, rows, args.parallel)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
