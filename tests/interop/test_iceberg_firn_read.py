# SPDX-License-Identifier: Apache-2.0
"""Tables firn writes (`firn sync`: PostgreSQL backfill, then CDC rounds with updates, deletes,
key changes and partition moves committed as position deletes through firn's key index), read
by independent readers through the same SQLite catalog:

- pyiceberg: schema with field ids, identifier fields, partition spec, the snapshot chain and
  every summary (operation, added/total records, files, delete files, position deletes, firn.lsn,
  firn.commit-id) checked against the manifests pyiceberg reads, partition tuples against the
  rows of each data file, and the rows value by value against the source;
- DuckDB's iceberg extension (iceberg_scan of the catalog's metadata file): the same rows;
- Spark (Iceberg's JDBC catalog on the same SQLite file): the same rows after the row deltas.
"""

from __future__ import annotations

import uuid
from decimal import Decimal

import pyarrow.parquet as pq

from firnsync import (check_partitions, check_summary_against_manifests, lsn_int,
                      snapshot_chain, summary_of)
from sparkutil import (assert_readers_agree, canon_rows, duckdb_rows, pyiceberg_rows,
                       uri_to_path)

ORDERS_COLS = ["id", "customer", "amount", "qty", "ratio", "paid", "created_at", "ship_date",
               "local_ts", "note", "blob", "tags"]
ACCOUNT_COLS = ["region", "no", "owner", "balance"]

SETUP = [
    """CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(12,2),
       qty int, ratio double precision, paid boolean, created_at timestamptz NOT NULL,
       ship_date date, local_ts timestamp, note text, blob bytea, tags text[])""",
    """INSERT INTO orders SELECT g,
         'cust-' || (g % 17) || CASE WHEN g % 5 = 0 THEN ' Zoë 雪 🧊' ELSE '' END,
         CASE WHEN g % 11 = 0 THEN NULL ELSE round(g * 12.345, 2) * (CASE WHEN g % 3 = 0
              THEN -1 ELSE 1 END) END,
         CASE WHEN g % 7 = 0 THEN NULL ELSE g * 3 END,
         CASE WHEN g % 13 = 0 THEN 'NaN'::float8 ELSE (g / 7.0)::float8 END,
         CASE WHEN g % 4 = 0 THEN NULL ELSE g % 2 = 0 END,
         timestamptz '2024-01-15 00:00:00.5+00' + g * interval '5 hours 7 minutes',
         date '2024-02-01' + g,
         timestamp '2023-12-31 23:59:59.123456' + g * interval '1 day',
         CASE WHEN g % 3 = 0 THEN NULL ELSE repeat('x', g % 50) END,
         CASE WHEN g % 6 = 0 THEN NULL ELSE decode(lpad(to_hex(g), 8, '0'), 'hex') END,
         CASE WHEN g % 9 = 0 THEN NULL WHEN g % 9 = 1 THEN '{}'::text[]
              ELSE ARRAY['t' || g, NULL, 'ü'] END
       FROM generate_series(1, 300) g""",
    """CREATE TABLE accounts (region text, no int, owner text, balance numeric(10,2),
       PRIMARY KEY (region, no))""",
    """INSERT INTO accounts VALUES ('eu', 1, 'Åsa', 10.00), ('eu', 2, 'Bjørn', 20.50),
       ('us', 1, 'Cy', 0.01), ('us', 2, NULL, NULL), ('日本', 1, '花子', -3.25)""",
]

STREAMS = [{"stream_name": "orders", "partition": ["month(created_at)", "bucket(4, id)"]},
           {"stream_name": "accounts"}]

ORDER_VALUES = ("(%d, 'new-%d', 9.99, 7, 0.5, true, timestamptz '2024-03-20 12:00+00', "
                "date '2024-03-21', timestamp '2024-03-20 12:00:00', 'ins', '\\x00ff'::bytea, "
                "ARRAY['n'])")


def check_schema(tbl):
    from pyiceberg.types import (BinaryType, BooleanType, DateType, DecimalType, DoubleType,
                                 IntegerType, ListType, LongType, StringType, TimestampType,
                                 TimestamptzType)

    # ids as Iceberg assigns them at create: top-level columns first, then nested fields
    got = [(f.field_id, f.name, f.field_type, f.required) for f in tbl.schema().fields]
    assert got == [
        (1, "id", LongType(), True), (2, "customer", StringType(), True),
        (3, "amount", DecimalType(12, 2), False), (4, "qty", IntegerType(), False),
        (5, "ratio", DoubleType(), False), (6, "paid", BooleanType(), False),
        (7, "created_at", TimestamptzType(), True), (8, "ship_date", DateType(), False),
        (9, "local_ts", TimestampType(), False), (10, "note", StringType(), False),
        (11, "blob", BinaryType(), False),
        (12, "tags", ListType(17, StringType(), element_required=False), False),
        (13, "_firn_op", StringType(), False), (14, "_firn_lsn", LongType(), False),
        (15, "_firn_commit_ts", TimestamptzType(), False),
        (16, "_firn_ingest_ts", TimestamptzType(), False)]
    assert tbl.schema().identifier_field_ids == [1]
    spec = [(f.source_id, f.field_id, f.name, str(f.transform)) for f in tbl.spec().fields]
    assert spec == [(7, 1000, "created_at_month", "month"), (1, 1001, "id_bucket", "bucket[4]")]
    assert tbl.format_version == 2
    props = tbl.properties
    assert props["write.delete.mode"] == "merge-on-read"
    assert props["firn.mode"] == "upsert"


def diff(got, want) -> str:
    """The rows only one side has (first few), for assertion messages."""
    extra = [r for r in got if r not in want][:3]
    missing = [r for r in want if r not in got][:3]
    return f"{len(got)} rows vs {len(want)}; unexpected {extra}; missing {missing}"


def check_rows(job, loc, name, cols):
    """pyiceberg and DuckDB return exactly the source's rows (value by value)."""
    want = job.source_rows(f"SELECT {', '.join(cols)} FROM {name}")
    table = job.table(name)
    got = pyiceberg_rows(loc, table, cols)
    assert got == want, f"pyiceberg rows of {table}: {diff(got, want)}"
    got = duckdb_rows(loc, table, cols)
    assert got == want, f"duckdb rows of {table}: {diff(got, want)}"
    return want


def meta_by_key(loc, table):
    tbl = loc.pyiceberg().load_table(table)
    arrow = tbl.scan(selected_fields=("id", "_firn_op", "_firn_lsn")).to_arrow()
    return {r["id"]: (r["_firn_op"], r["_firn_lsn"]) for r in arrow.to_pylist()}


def test_firn_tables_read_by_pyiceberg_duckdb_spark(firn_job, spark):
    job = firn_job(STREAMS, setup=SETUP)
    # the snapshot layout below is firn's CDC commits: no compaction (test_engine_compact.py)
    job.destination_extra = {"compact_small_files": 0, "compact_delete_percent": 0}
    loc = job.loc
    orders, accounts = job.table("orders"), job.table("accounts")

    # ---- backfill --------------------------------------------------------------------------
    job.sync()
    tbl = loc.pyiceberg().load_table(orders)
    check_schema(tbl)
    acc = loc.pyiceberg().load_table(accounts)
    assert acc.schema().identifier_field_ids == [1, 2]
    assert [f.required for f in acc.schema().fields[:4]] == [True, True, False, False]
    assert acc.spec().is_unpartitioned()
    check_rows(job, loc, "orders", ORDERS_COLS)
    check_rows(job, loc, "accounts", ACCOUNT_COLS)
    [snap0] = snapshot_chain(tbl)
    s0 = check_summary_against_manifests(tbl, snap0)
    assert s0["operation"] == "append" and s0["firn.backfill"] == "done", s0
    assert int(s0["added-records"]) == 300 and int(s0["total-delete-files"]) == 0, s0
    n_files = check_partitions(tbl, ["created_at", "id"])
    assert n_files == int(s0["added-data-files"]) and n_files >= 9  # 3 months x 4 buckets
    lsn0 = int(s0["firn.lsn"])
    assert set(op for op, _lsn in meta_by_key(loc, orders).values()) == {"r"}
    uuid.UUID(s0["firn.commit-id"])

    # ---- CDC round 1: two transactions -------------------------------------------------------
    before1 = job.wal_lsn()
    job.sql("UPDATE orders SET amount = amount + 1, note = 'upd1' WHERE id IN (1, 2, 3, 50, 100)",
            "DELETE FROM orders WHERE id IN (4, 5, 200)",
            "INSERT INTO orders VALUES " + ORDER_VALUES % (1001, 1001) + ", "
            + ORDER_VALUES % (1002, 1002),
            "UPDATE accounts SET balance = balance * 2 WHERE region = 'eu'",
            "DELETE FROM accounts WHERE region = 'us' AND no = 2")
    job.sql("UPDATE orders SET qty = -1 WHERE id = 1",
            "UPDATE orders SET id = 2010 WHERE id = 10",  # key change: old key deleted
            "INSERT INTO orders VALUES " + ORDER_VALUES % (1003, 1003),
            "DELETE FROM orders WHERE id IN (1002, 1003)",  # inserted this round: no trace
            "UPDATE accounts SET region = 'apac' WHERE region = 'eu' AND no = 1")
    after1 = job.wal_lsn()
    job.sync()
    tbl = loc.pyiceberg().load_table(orders)
    chain = snapshot_chain(tbl)
    assert len(chain) == 2, [summary_of(s) for s in chain]
    s1 = check_summary_against_manifests(tbl, chain[1])
    assert s1["operation"] == "overwrite", s1
    # final images of 1, 2, 3, 50, 100, 1001, 2010; rows of 1, 2, 3, 50, 100, 4, 5, 200, 10 die
    assert int(s1["added-records"]) == 7 and int(s1["added-position-deletes"]) == 9, s1
    assert int(s1["total-records"]) == 307 and int(s1["total-position-deletes"]) == 9, s1
    lsn1 = int(s1["firn.lsn"])
    assert before1 < lsn1 <= after1 and lsn1 > lsn0
    assert s1["firn.commit-id"] != s0["firn.commit-id"]
    check_rows(job, loc, "orders", ORDERS_COLS)
    check_rows(job, loc, "accounts", ACCOUNT_COLS)
    check_partitions(tbl, ["created_at", "id"])
    meta = meta_by_key(loc, orders)
    assert {k: meta[k][0] for k in (1, 2, 1001, 2010, 6)} == {1: "u", 2: "u", 1001: "c",
                                                              2010: "u", 6: "r"}
    assert meta[1][1] == lsn1 and meta[2010][1] == lsn1  # changed in the last transaction
    assert lsn0 < meta[2][1] < lsn1  # changed in the first one
    assert not {4, 5, 10, 200, 1002, 1003} & set(meta)

    # ---- CDC round 2: changes to rows firn wrote in round 1, re-insert, partition move -----
    before2 = job.wal_lsn()
    job.sql("UPDATE orders SET note = 'upd2' WHERE id IN (1, 1001, 2010)",
            "DELETE FROM orders WHERE id IN (50, 6)",
            "INSERT INTO orders VALUES " + ORDER_VALUES % (4, 4),
            "UPDATE orders SET created_at = created_at + interval '40 days' WHERE id = 7",
            "INSERT INTO accounts VALUES ('us', 2, 'back', 2.00)")
    after2 = job.wal_lsn()
    job.sync()
    tbl = loc.pyiceberg().load_table(orders)
    chain = snapshot_chain(tbl)
    assert len(chain) == 3
    s2 = check_summary_against_manifests(tbl, chain[2])
    assert int(s2["added-records"]) == 5 and int(s2["added-position-deletes"]) == 6, s2
    lsn2 = int(s2["firn.lsn"])
    assert before2 < lsn2 <= after2
    check_rows(job, loc, "orders", ORDERS_COLS)
    check_rows(job, loc, "accounts", ACCOUNT_COLS)
    meta = meta_by_key(loc, orders)
    assert meta[4] == ("c", lsn2) and meta[7] == ("u", lsn2) and meta[1001] == ("u", lsn2)
    check_partitions(tbl, ["created_at", "id"])
    # the position deletes of round 2 point into round 1's data files too
    round1_files = {e["data_file"]["file_path"] for e in tbl.inspect.entries(
        snapshot_id=chain[1].snapshot_id).to_pylist()
        if e["snapshot_id"] == chain[1].snapshot_id and e["data_file"]["content"] == 0}
    deleted_in = set()
    for e in tbl.inspect.entries().to_pylist():
        df = e["data_file"]
        if df["content"] == 1 and e["snapshot_id"] == chain[2].snapshot_id:
            deleted_in |= set(pq.read_table(uri_to_path(df["file_path"])).column(
                "file_path").to_pylist())
    assert deleted_in & round1_files, "round 2 deleted nothing in round 1's files"

    # state and summaries agree; a run with nothing new commits nothing
    state = {s["stream"]: s["state"] for s in job.state()["streams"]}
    assert lsn_int(state["orders"]["lsn"]) == lsn2
    assert state["orders"]["snapshot_id"] == chain[2].snapshot_id
    job.sync()
    assert len(snapshot_chain(loc.pyiceberg().load_table(orders))) == 3
    acc = loc.pyiceberg().load_table(accounts)
    for snap in snapshot_chain(acc):
        check_summary_against_manifests(acc, snap)

    # ---- every reader, Spark included ------------------------------------------------------
    want_orders = job.source_raw(f"SELECT {', '.join(ORDERS_COLS)} FROM orders")
    assert len(want_orders) == 297  # 300 - {4, 5, 200, 10, 50, 6} + {1001, 2010, 4}
    assert_readers_agree(spark, loc, orders, want_orders, ORDERS_COLS, equality_deletes=False,
                         position_deletes=True)
    want_acc = job.source_raw(f"SELECT {', '.join(ACCOUNT_COLS)} FROM accounts")
    assert canon_rows(want_acc) == canon_rows([("apac", 1, "Åsa", Decimal("20.00")),
                                   ("eu", 2, "Bjørn", Decimal("41.00")),
                                   ("us", 1, "Cy", Decimal("0.01")),
                                   ("us", 2, "back", Decimal("2.00")),
                                   ("日本", 1, "花子", Decimal("-3.25"))])
    assert_readers_agree(spark, loc, accounts, want_acc, ACCOUNT_COLS, equality_deletes=False,
                         position_deletes=True)
    # a filter Spark pushes into the scan (partition pruning on both transforms)
    assert spark.rows(loc, orders, ["id", "note"], where="id IN (1, 4, 7, 2010)") == [
        (1, "upd2"), (4, "ins"), (7, "xxxxxxx"), (2010, "upd2")]
    spark_snaps = spark.sql(loc, f"SELECT snapshot_id, parent_id, operation FROM "
                                 f"firn.{orders}.snapshots ORDER BY committed_at")
    assert [(s, p) for s, p, _op in spark_snaps] == [
        (c.snapshot_id, c.parent_snapshot_id) for c in chain]
