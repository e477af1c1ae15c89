# SPDX-License-Identifier: Apache-2.0
"""Spark writes to a table firn synced (INSERT, UPDATE and DELETE through Iceberg's JDBC catalog
on firn's SQLite file: data files and position deletes with Spark's `file:/` locations), then
firn commits CDC rounds on top. firn must rebuild its key index from Spark's files and deletes,
delete the rows Spark wrote when the source changes those keys, find its position (firn.lsn)
behind Spark's snapshots without copying the table again, and keep one linear snapshot chain.
Spark, DuckDB and pyiceberg must all return the expected rows."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from firnsync import check_partitions, check_summary_against_manifests, snapshot_chain, summary_of
from sparkutil import assert_readers_agree, canon_rows, pyiceberg_rows, uri_to_path

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
COLS = ["id", "name", "amount", "created_at"]
SETUP = [
    """CREATE TABLE items (id bigint PRIMARY KEY, name text, amount numeric(10,2),
       created_at timestamptz NOT NULL)""",
    """INSERT INTO items SELECT g, 'pg-' || g, g * 1.50, timestamptz '2024-05-01 00:00+00'
       + g * interval '1 hour' FROM generate_series(1, 40) g""",
]


def ts(hours: int) -> dt.datetime:
    return dt.datetime(2024, 5, 1, tzinfo=UTC) + dt.timedelta(hours=hours)


def spark_insert(spark, loc, table, rows):
    values = ", ".join(f"({i}, '{n}', {a}, TIMESTAMP '{t:%Y-%m-%d %H:%M:%S}', NULL, NULL, NULL, "
                       "NULL)" for i, n, a, t in rows)
    spark.sql(loc, f"INSERT INTO firn.{table} VALUES {values}")


def live_rows(job, loc, table):
    """Source rows and the table's, both canonical (the table may hold rows only Spark wrote)."""
    return (job.source_rows(f"SELECT {', '.join(COLS)} FROM items"),
            pyiceberg_rows(loc, table, COLS))


def test_spark_writes_then_firn_commits(firn_job, spark):
    job = firn_job([{"stream_name": "items", "partition": ["bucket(4, id)"]}], setup=SETUP)
    # the snapshot chain below is Spark's and firn's CDC commits: no compaction snapshot
    job.destination_extra = {"compact_small_files": 0, "compact_delete_percent": 0}
    loc = job.loc
    table = job.table("items")
    job.sync()  # backfill: 40 rows

    # ---- Spark writes on top of firn's snapshot --------------------------------------------
    spark_insert(spark, loc, table, [(900, "spark-900", "9.00", ts(900)),
                                     (901, "spark-901", "9.01", ts(901)),
                                     (902, "spark-902", "9.02", ts(902))])
    spark.sql(loc, f"UPDATE firn.{table} SET name = 'spark-upd' WHERE id IN (5, 901)")
    spark.sql(loc, f"DELETE FROM firn.{table} WHERE id IN (6, 902)")
    tbl = loc.pyiceberg().load_table(table)
    spark_files = [f for f in tbl.inspect.files().to_pylist()
                   if f["file_path"].startswith("file:/") and not
                   f["file_path"].startswith("file:///")]
    assert {f["content"] for f in spark_files} == {0, 1}, "Spark wrote no file:/ data + deletes"

    # ---- firn CDC round on top of Spark's snapshots ----------------------------------------
    job.sql("UPDATE items SET name = 'pg-upd', amount = 55.55 WHERE id = 5",  # Spark's row now
            "INSERT INTO items VALUES (900, 'pg-900', 90.00, timestamptz '2024-06-01 00:00+00')",
            "DELETE FROM items WHERE id IN (6, 7)",  # 6: Spark deleted it already
            "UPDATE items SET amount = -1 WHERE id = 8",
            "INSERT INTO items VALUES (41, 'pg-41', 41.00, timestamptz '2024-05-03 00:00+00')")
    job.sync()
    log = (job.workdir / f"sync-{job.runs}.log").read_text()
    assert "backfill" not in log.replace("backfill_done", ""), log  # no second copy

    tbl = loc.pyiceberg().load_table(table)
    chain = snapshot_chain(tbl)
    ops = [(summary_of(s).get("engine-name"), summary_of(s)["operation"]) for s in chain]
    assert [name for name, _op in ops] == ["firn", "spark", "spark", "spark", "firn"], ops
    s = check_summary_against_manifests(tbl, chain[-1])
    # 5 (Spark's row), 900 (Spark's insert), 7, 8 die; 5, 900, 8, 41 are written
    assert int(s["added-position-deletes"]) == 4 and int(s["added-records"]) == 4, s
    assert int(s["firn.lsn"]) > int(summary_of(chain[0])["firn.lsn"])
    check_partitions(tbl, ["id"])

    pg_rows = job.source_raw(f"SELECT {', '.join(COLS)} FROM items")
    # Spark's rows whose keys the source never touched stay: 901 (updated by Spark)
    expected = [r for r in pg_rows if r[0] != 6] + [(901, "spark-upd", Decimal("9.01"), ts(901))]
    by_id = {r[0]: r for r in pg_rows}
    assert 6 not in by_id and by_id[5][1] == "pg-upd" and by_id[900][1] == "pg-900"
    assert_readers_agree(spark, loc, table, expected, COLS, equality_deletes=False,
                         position_deletes=True)

    # ---- Spark again, on firn's snapshot, then firn once more -------------------------------
    spark.sql(loc, f"DELETE FROM firn.{table} WHERE id IN (41, 901)")  # 41: firn's last file
    spark.sql(loc, f"UPDATE firn.{table} SET amount = 0.5 WHERE id = 9")
    job.sql("UPDATE items SET name = 'pg-again' WHERE id IN (9, 41)",  # both changed by Spark
            "DELETE FROM items WHERE id = 900")
    job.sync()
    tbl = loc.pyiceberg().load_table(table)
    chain = snapshot_chain(tbl)
    assert len(chain) == 8
    s = check_summary_against_manifests(tbl, chain[-1])
    # 9 lives in Spark's file now: deleted there; 41 is gone from the table (Spark deleted it)
    # and comes back as an upsert; 900 dies
    assert int(s["added-position-deletes"]) == 2 and int(s["added-records"]) == 2, s
    expected = job.source_raw(f"SELECT {', '.join(COLS)} FROM items")
    assert_readers_agree(spark, loc, table, expected, COLS, equality_deletes=False,
                         position_deletes=True)
    history = spark.sql(loc, f"SELECT snapshot_id, parent_id FROM firn.{table}.history "
                             "ORDER BY made_current_at")
    assert [(c.snapshot_id, c.parent_snapshot_id) for c in chain] == history
    # no file firn references was lost on the way (every live file exists)
    import os
    for f in tbl.inspect.files().to_pylist():
        assert os.path.exists(uri_to_path(f["file_path"])), f["file_path"]
    assert canon_rows(expected) == pyiceberg_rows(loc, table, COLS)
