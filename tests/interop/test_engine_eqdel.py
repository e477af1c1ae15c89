# SPDX-License-Identifier: Apache-2.0
"""Equality-delete mode (`"delete_mode": "equality"`, DELETES.md §5.1): firn upserts without a
key index, writing the key columns of every key a flush touched into an equality-delete file of
the same snapshot. An equality delete only reaches data files of a strictly lower data sequence
number, so the row a commit writes for a key survives that commit's delete of the key.

Each `job.sync()` is one catch-up run and so one flush and one snapshot per table; the workload
puts a delete and a re-insert of the same key into one flush and into consecutive flushes, key
changes, updates of rows changed before, inserts deleted again in the same flush. The tables are
then read by DuckDB (iceberg_scan applies equality deletes) and, in the Spark test, by Spark
(Iceberg 1.10 Java), each compared value by value with the source rows; pyiceberg, which cannot
apply equality deletes, must refuse the scan rather than return deleted rows.
"""

from __future__ import annotations

import pytest

from firnsync import entries_by_snapshot, snapshot_chain, summary_of
from sparkutil import canon_rows, delete_file_contents, duckdb_rows, pyiceberg_rows, uri_to_path

COLS = ["id", "v", "n"]
EQ = {"delete_mode": "equality", "metadata_columns": False}
V2 = {"readers": ["spark", "duckdb", "pyiceberg", "bigquery"]}  # format v2
V3 = {"readers": ["spark", "duckdb", "trino"]}  # format v3

ITEMS = ("CREATE TABLE items (id bigint PRIMARY KEY, v text, n int)",
         "INSERT INTO items SELECT g, 'v' || g, g % 7 FROM generate_series(1, 300) g")
# no key at all, old rows arrive whole: a multiset of rows, written with position deletes or DVs
# even in equality mode (an equality delete on every column would remove every identical copy;
# test_engine_multiset.py)
LOOSE = ("CREATE TABLE loose (a int NOT NULL, b text, d date)",
         "ALTER TABLE loose REPLICA IDENTITY FULL",
         "INSERT INTO loose SELECT g, 'b' || g, DATE '2024-01-01' + g FROM "
         "generate_series(1, 50) g")
LOOSE_COLS = ["a", "b", "d"]

# (flush 1) updates, deletes, a key change, delete + re-insert of one key in the same flush,
# a new key inserted and deleted, a row updated twice, an update then a delete
ROUND_1 = ("UPDATE items SET v = 'u1' WHERE id IN (1, 2, 3, 150, 299)",
           "DELETE FROM items WHERE id IN (10, 11, 12, 200)",
           "UPDATE items SET id = 5000 WHERE id = 20",
           "DELETE FROM items WHERE id = 50",
           "INSERT INTO items VALUES (50, 'again', 50)",
           "INSERT INTO items VALUES (6000, 'gone', 1)",
           "DELETE FROM items WHERE id = 6000",
           "UPDATE items SET n = n + 100 WHERE id = 60",
           "UPDATE items SET n = n + 100 WHERE id = 60",
           "UPDATE items SET v = 'doomed' WHERE id = 70",
           "DELETE FROM items WHERE id = 70",
           "INSERT INTO items VALUES (7000, 'new', 2), (7001, 'new', 3)")
# (flush 2) keys deleted in flush 1 come back, the re-keyed row goes back to its old key, a key
# re-inserted in flush 1 is deleted and inserted once more, a key changed twice
ROUND_2 = ("INSERT INTO items VALUES (10, 'back', 10), (70, 'back', 70)",
           "UPDATE items SET id = 20 WHERE id = 5000",
           "DELETE FROM items WHERE id = 50",
           "INSERT INTO items VALUES (50, 'third', 5)",
           "UPDATE items SET id = 8000 WHERE id = 7000",
           "UPDATE items SET id = 8001 WHERE id = 8000",
           "UPDATE items SET v = 'u2' WHERE id IN (1, 7001)")
# (flush 3) only deletes, then a flush that re-inserts every key just deleted
ROUND_3 = ("DELETE FROM items WHERE id IN (1, 2, 3, 4, 8001)",)
ROUND_4 = ("INSERT INTO items VALUES (1, 'r', 1), (2, 'r', 2), (3, 'r', 3), (4, 'r', 4), "
           "(8001, 'r', 8)",)

LOOSE_1 = ("UPDATE loose SET b = 'x' WHERE a IN (1, 2)",
           "DELETE FROM loose WHERE a IN (3, 4)",
           "INSERT INTO loose VALUES (3, 'b3', DATE '2024-01-04')",  # the deleted row again
           "INSERT INTO loose VALUES (100, NULL, NULL)",
           "UPDATE loose SET a = 200 WHERE a = 5")
LOOSE_2 = ("DELETE FROM loose WHERE a = 100",  # null columns match null
           "INSERT INTO loose VALUES (4, 'b4', DATE '2024-01-05')",
           "UPDATE loose SET b = NULL WHERE a = 6",
           "DELETE FROM loose WHERE a = 1")


def eq_job(firn_job, readers):
    job = firn_job([{"stream_name": "items"},
                    {"stream_name": "loose", "append_mode": False}], setup=ITEMS + LOOSE)
    job.destination_extra = dict(EQ, **readers)
    return job


def check_table(job, table, query, cols, spark=None):
    """The readers return exactly the source rows; pyiceberg refuses the scan."""
    loc = job.loc
    want = job.source_rows(query)
    assert any(c == 2 for c, _ids in delete_file_contents(loc, table)), table
    assert duckdb_rows(loc, table, cols) == want, f"duckdb read of {table}"
    if spark is not None:
        assert spark.rows(loc, table, cols) == want, f"spark read of {table}"
    with pytest.raises((ValueError, NotImplementedError), match="(?i)equality delete"):
        pyiceberg_rows(loc, table, cols)


def check_multiset(job, table, query, cols, spark=None):
    """A keyless REPLICA IDENTITY FULL table in equality mode: no equality-delete file, and every
    reader (pyiceberg too) returns exactly the source rows."""
    loc = job.loc
    want = job.source_rows(query)
    assert all(c != 2 for c, _ids in delete_file_contents(loc, table)), table
    assert duckdb_rows(loc, table, cols) == want, f"duckdb read of {table}"
    assert pyiceberg_rows(loc, table, cols) == want, f"pyiceberg read of {table}"
    if spark is not None:
        assert spark.rows(loc, table, cols) == want, f"spark read of {table}"


def check_snapshot(tbl, eq_ids):
    """The current snapshot's new equality-delete files: equality_ids, only the key columns with
    the table's field ids (read back with pyarrow), the snapshot's sequence number (the same as
    its new data files'), summary counts. Returns the entries."""
    import pyarrow.parquet as pq

    snap = tbl.current_snapshot()
    rows = [r for r in entries_by_snapshot(tbl, snap)
            if r["status"] == 1 and r["snapshot_id"] == snap.snapshot_id]
    eq = [r for r in rows if r["data_file"]["content"] == 2]
    assert eq, rows
    assert all(r["data_file"]["content"] in (0, 2) for r in rows), rows
    for r in rows:
        assert r["sequence_number"] == snap.sequence_number, r
    for r in eq:
        df = r["data_file"]
        assert list(df["equality_ids"]) == eq_ids, df
        schema = pq.read_schema(uri_to_path(df["file_path"]))
        ids = [int(f.metadata[b"PARQUET:field_id"]) for f in schema]
        assert ids == eq_ids, (df["file_path"], schema)
    s = summary_of(snap)
    assert int(s["added-equality-delete-files"]) == len(eq), s
    assert int(s["added-equality-deletes"]) == sum(r["data_file"]["record_count"] for r in eq)
    assert "added-position-delete-files" not in s, s
    return eq


@pytest.mark.parametrize("readers", [V3], ids=["v3"])  # v2: the Spark test
def test_equality_delete_mode_duckdb(firn_job, readers):
    job = eq_job(firn_job, readers)
    loc = job.loc
    items, loose = job.table("items"), job.table("loose")
    job.sync()
    tbl = loc.pyiceberg().load_table(items)
    assert tbl.format_version == (2 if readers is V2 else 3)
    assert tbl.schema().identifier_field_ids == [1]
    assert tbl.properties.get("firn.delete-mode") == "equality"
    assert loc.pyiceberg().load_table(loose).schema().identifier_field_ids == []
    log = (job.workdir / "sync-1.log").read_text()
    assert "pyiceberg, snowflake and databricks cannot read them" in log, log[-3000:]
    assert 'table "src.loose" is written with equality deletes' not in log, log[-3000:]

    for rnd, (stmts, loose_stmts) in enumerate([(ROUND_1, LOOSE_1), (ROUND_2, LOOSE_2),
                                                (ROUND_3, ()), (ROUND_4, ())], start=2):
        job.sql(*stmts, *loose_stmts)
        job.sync()
        check_table(job, items, "SELECT id, v, n FROM items", COLS)
        tbl = loc.pyiceberg().load_table(items)
        check_snapshot(tbl, [1])
        if loose_stmts:
            check_multiset(job, loose, "SELECT a, b, d FROM loose", LOOSE_COLS)
        assert len(snapshot_chain(tbl)) == rnd
    # only equality deletes, never a position delete or a DV
    assert all(c == 2 for c, _ids in delete_file_contents(loc, items))
    check_conversion(job, "items", "deletion_vector")


def check_conversion(job, src, mode, spark=None):
    """Switching the destination to `mode` converts the equality deletes of `items` into DVs
    (v3) or position deletes (v2) in one commit before the run's changes: afterwards no
    equality-delete file is live, the conversion snapshot holds exactly the rows of the one
    before it, and every reader, pyiceberg included, returns the source rows."""
    loc, items = job.loc, job.table(src)
    before = rows_before(loc, items, spark)
    n_eq = sum(1 for c, _ids in delete_file_contents(loc, items) if c == 2)
    job.destination_extra = {k: v for k, v in job.destination_extra.items()
                             if k != "delete_mode"}
    job.destination_extra["delete_mode"] = mode
    # no small-file compaction after the flush: the conversion stays the snapshot before last
    job.destination_extra.update(compact_small_files=0, compact_delete_percent=0)
    job.streams = [s for s in job.streams if s["stream_name"] == src]
    job.sql(f"UPDATE {src} SET v = 'after' WHERE id IN (1, 2, 50, 7001)",
            f"DELETE FROM {src} WHERE id IN (3, 10, 8001)",
            f"INSERT INTO {src} VALUES (9000, 'n', 9)")
    job.sync()
    log = (job.workdir / f"sync-{job.runs}.log").read_text()
    assert f"converted {n_eq} equality-delete files" in log, log[-3000:]
    tbl = loc.pyiceberg().load_table(items)
    chain = snapshot_chain(tbl)
    conv = chain[-2]
    s = summary_of(conv)
    assert int(s["removed-equality-delete-files"]) == n_eq, s
    assert "added-data-files" not in s, s
    got = canon_rows(tbl.scan(snapshot_id=conv.snapshot_id,
                              selected_fields=tuple(COLS)).to_arrow().to_pylist())
    assert got == before, "the conversion changed the rows"
    contents = {c for c, _ids in delete_file_contents(loc, items)}
    assert contents == {1}, contents
    want = job.source_rows(f"SELECT id, v, n FROM {src}")
    assert pyiceberg_rows(loc, items, COLS) == want
    assert duckdb_rows(loc, items, COLS) == want
    if spark is not None:
        assert spark.rows(loc, items, COLS) == want
    job.sql(f"DELETE FROM {src} WHERE id IN (4, 5)", f"UPDATE {src} SET n = 0 WHERE id = 9000")
    job.sync()  # the key index is at work on the converted table
    want = job.source_rows(f"SELECT id, v, n FROM {src}")
    assert pyiceberg_rows(loc, items, COLS) == want


def rows_before(loc, table, spark):
    """The rows of table before the conversion (equality deletes applied): Spark when given,
    else DuckDB."""
    if spark is not None:
        return spark.rows(loc, table, COLS)
    return duckdb_rows(loc, table, COLS)


def test_equality_delete_mode_spark(firn_job, spark):
    """The same workload on a v2 table, a keyless table and a table partitioned by bucket(4, id)
    (its equality deletes go to the partition of their key), read by Spark and DuckDB."""
    job = firn_job([{"stream_name": "items"},
                    {"stream_name": "loose", "append_mode": False},
                    {"stream_name": "parts", "partition": ["bucket(4, id)"]}],
                   setup=ITEMS + LOOSE + tuple(s.replace("items", "parts") for s in ITEMS))
    job.destination_extra = dict(EQ, **V2)
    loc = job.loc
    items, loose, parts = job.table("items"), job.table("loose"), job.table("parts")
    job.sync()
    for stmts, loose_stmts in [(ROUND_1, LOOSE_1), (ROUND_2, LOOSE_2), (ROUND_3 + ROUND_4, ())]:
        job.sql(*stmts, *loose_stmts, *(s.replace("items", "parts") for s in stmts))
        job.sync()
        check_table(job, items, "SELECT id, v, n FROM items", COLS, spark)
        check_table(job, parts, "SELECT id, v, n FROM parts", COLS, spark)
        check_multiset(job, loose, "SELECT a, b, d FROM loose", LOOSE_COLS, spark)
    # every equality-delete file of the partitioned table holds only keys of its partition
    import pyarrow.parquet as pq

    tbl = loc.pyiceberg().load_table(parts)
    eq = [f for f in tbl.inspect.delete_files().to_pylist() if f["content"] == 2]
    assert len({f["partition"]["id_bucket"] for f in eq}) > 1, eq
    from pyiceberg.transforms import BucketTransform
    from pyiceberg.types import LongType

    bucket = BucketTransform(4).transform(LongType())
    for f in eq:
        ids = pq.read_table(uri_to_path(f["file_path"])).column("id").to_pylist()
        assert {bucket(i) for i in ids} == {f["partition"]["id_bucket"]}, (f["file_path"], ids)
    check_conversion(job, "parts", "position", spark)
