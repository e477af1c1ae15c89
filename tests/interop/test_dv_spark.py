# SPDX-License-Identifier: Apache-2.0
"""Deletion vectors between firn and Spark (Iceberg 1.10 Java, the reference implementation), on
one SQLite catalog:

- a v3 table firn syncs: Spark reads the same rows as pyiceberg and DuckDB, and Spark's
  position_deletes metadata table decodes firn's DVs to exactly the positions pyiceberg decodes;
- Spark then deletes rows of firn's data files (merge-on-read: Spark writes DVs that merge and
  replace firn's), and firn's next commit merges Spark's DVs in turn;
- a v3 table Spark created, filled and deleted from (Spark DVs) is read and extended by firn
  (cdc_only stream on top of it): every reader agrees with the source after each step.
"""

from __future__ import annotations

from firnsync import snapshot_chain
from sparkutil import assert_readers_agree
from test_dv_sync import dv_positions, live_entries

COLS = ["id", "v", "n"]
V3 = {"readers": ["spark", "duckdb", "pyiceberg"]}


def spark_dv_positions(spark, loc, table) -> dict[str, list[int]]:
    """{data file: sorted positions} from Spark's position_deletes metadata table."""
    rows = spark.sql(loc, f"SELECT file_path, pos FROM {loc.name}.{table}.position_deletes")
    out: dict[str, list[int]] = {}
    for path, pos in rows:
        out.setdefault(path, []).append(pos)
    return {k: sorted(v) for k, v in out.items()}


def check_dvs_agree(spark, loc, table):
    """pyiceberg's and Spark's decoding of every live DV are the same positions."""
    tbl = loc.pyiceberg().load_table(table)
    mine = {ref: d["positions"] for ref, d in dv_positions(tbl).items()}
    assert mine, f"{table} has no deletion vectors"
    assert spark_dv_positions(spark, loc, table) == mine


def test_firn_dvs_read_and_extended_by_spark(firn_job, spark):
    job = firn_job([{"stream_name": "items"}], setup=(
        "CREATE TABLE items (id bigint PRIMARY KEY, v text, n int)",
        "INSERT INTO items SELECT g, 'v' || g, g % 7 FROM generate_series(1, 300) g"))
    job.destination_extra = dict(V3)
    loc, table = job.loc, job.table("items")
    job.sync()
    job.sql("UPDATE items SET v = 'u1' WHERE id IN (1, 2, 3, 150, 299)",
            "DELETE FROM items WHERE id IN (10, 11, 12, 13, 14, 15, 16, 200)",
            "UPDATE items SET id = 5000 WHERE id = 20")
    job.sync()
    want = job.source_raw("SELECT id, v, n FROM items")
    assert_readers_agree(spark, loc, table, want, COLS, equality_deletes=False,
                         position_deletes=True)
    check_dvs_agree(spark, loc, table)

    # Spark deletes rows of firn's backfill file (the source loses them too): its DV must
    # merge firn's, which it replaces in the same commit.
    job.sql("DELETE FROM items WHERE id BETWEEN 30 AND 39")
    spark.sql(loc, f"DELETE FROM {loc.name}.{table} WHERE id BETWEEN 30 AND 39")
    tbl = loc.pyiceberg().load_table(table)
    assert tbl.current_snapshot().summary.additional_properties.get("removed-dvs") == "1"
    check_dvs_agree(spark, loc, table)
    # firn (a new process: its key index comes back from Spark's DV) changes rows of that file
    job.sql("UPDATE items SET v = 'u2' WHERE id IN (40, 41, 5000)",
            "DELETE FROM items WHERE id IN (42, 1)")
    job.sync()
    want = job.source_raw("SELECT id, v, n FROM items")
    assert_readers_agree(spark, loc, table, want, COLS, position_deletes=True)
    check_dvs_agree(spark, loc, table)
    tbl = loc.pyiceberg().load_table(table)
    assert len(snapshot_chain(tbl)) == 4
    for e in live_entries(tbl):
        assert e["data_file"]["content"] in (0, 1)


def test_spark_v3_table_extended_by_firn(firn_job, spark):
    job = firn_job([{"stream_name": "items", "sync_mode": "cdc_only"}], mode="cdc_only", setup=(
        "CREATE TABLE items (id bigint PRIMARY KEY, v text, n int)",
        "INSERT INTO items SELECT g, 'v' || g, g % 7 FROM generate_series(1, 200) g "
        "WHERE g % 10 <> 0"))
    job.destination_extra = dict(V3, metadata_columns=False)
    loc, table = job.loc, job.table("items")
    job.write_configs()  # the folders of the catalog and warehouse
    spark.sql(loc, "CREATE NAMESPACE IF NOT EXISTS firn.src")
    spark.sql(loc, f"CREATE TABLE {loc.name}.{table} (id bigint NOT NULL, v string, n int) "
                   "USING iceberg TBLPROPERTIES ('format-version'='3', "
                   "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')")
    spark.sql(loc, f"INSERT INTO {loc.name}.{table} SELECT id, concat('v', id), "
                   "CAST(id % 7 AS int) FROM range(1, 201)")
    spark.sql(loc, f"DELETE FROM {loc.name}.{table} WHERE id % 10 = 0")
    check_dvs_agree(spark, loc, table)  # Spark's DV, decoded by pyiceberg and Spark
    want = job.source_raw("SELECT id, v, n FROM items")
    assert_readers_agree(spark, loc, table, want, COLS, position_deletes=True)

    job.sync()  # creates the slot; nothing to commit yet
    job.sql("UPDATE items SET v = 'firn' WHERE id IN (1, 2, 3, 99, 101)",
            "DELETE FROM items WHERE id IN (5, 55, 155)",
            "INSERT INTO items VALUES (10, 'back', 3), (500, 'new', 4)",
            "UPDATE items SET id = 600 WHERE id = 7")
    job.sync()
    # The first run built the key index from Spark's files and DV and saved it at its clean
    # stop; the second reads it back from local disk.
    log1, log2 = ((job.workdir / f"sync-{i}.log").read_text() for i in (1, 2))
    assert "key index loaded" in log1, log1[-2000:]
    assert "key index read from local disk" in log2, log2[-2000:]
    want = job.source_raw("SELECT id, v, n FROM items")
    assert_readers_agree(spark, loc, table, want, COLS, position_deletes=True)
    check_dvs_agree(spark, loc, table)
    tbl = loc.pyiceberg().load_table(table)
    s = tbl.current_snapshot().summary.additional_properties
    assert s.get("added-dvs") == "1" and s.get("removed-dvs") == "1", s  # Spark's DV replaced

    # Spark again on top of firn's commit, then firn once more
    spark.sql(loc, f"UPDATE {loc.name}.{table} SET v = 'spark' WHERE id IN (11, 12)")
    job.sql("UPDATE items SET v = 'spark' WHERE id IN (11, 12)")
    job.sync()  # replays its own UPDATE of 11, 12: the same final images
    job.sql("DELETE FROM items WHERE id IN (13, 600)", "UPDATE items SET n = -1 WHERE id = 14")
    job.sync()
    want = job.source_raw("SELECT id, v, n FROM items")
    assert_readers_agree(spark, loc, table, want, COLS, position_deletes=True)
    check_dvs_agree(spark, loc, table)


def test_foreign_dv_while_firn_follows(firn_job, spark):
    """Spark commits a DV on a file while `firn sync --follow` holds an older view of it: firn's
    commit must not drop Spark's deletes. The commit conflicts (or, had firn reloaded the table
    in between, the producer refuses a DV it did not merge); either way firn rebuilds its index
    and the table's DVs and commits the same changes again."""
    import os
    import signal
    import subprocess
    import time

    job = firn_job([{"stream_name": "items"}], setup=(
        "CREATE TABLE items (id bigint PRIMARY KEY, v text, n int)",
        "INSERT INTO items SELECT g, 'v' || g, g % 7 FROM generate_series(1, 100) g"))
    job.destination_extra = dict(V3)
    job.commit_interval_s = 1
    loc, table = job.loc, job.table("items")
    job.sync()
    paths = job.write_configs()
    log_path = job.workdir / "follow.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(job.firn_bin), "sync", "--follow", "--source", str(paths["source"]),
             "--destination", str(paths["destination"]), "--streams", str(paths["streams"]),
             "--state", str(paths["state"])], stdout=log, stderr=subprocess.STDOUT,
            env=dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"))
    try:
        deadline = time.monotonic() + 60
        while not any(m in log_path.read_bytes()
                      for m in (b"key index loaded", b"key index read from local disk")):
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
        time.sleep(1)
        spark.sql(loc, f"DELETE FROM {loc.name}.{table} WHERE id IN (20, 21)")
        job.sql("DELETE FROM items WHERE id IN (20, 21)",
                "UPDATE items SET v = 'after-spark' WHERE id IN (22, 60)")
        want = job.source_rows("SELECT id, v, n FROM items")
        deadline = time.monotonic() + 60
        while True:
            tbl = loc.pyiceberg().load_table(table)
            if tbl.current_snapshot().summary.additional_properties.get("engine-name") == "firn" \
                    and any(m in log_path.read_text() for m in (
                        "reloading its deletion vectors",  # DV not merged, found by the producer
                        "rebuilding the key index")):  # or the commit's conflict came first
                break
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    assert rc == 0, log_path.read_text()[-3000:]
    assert_readers_agree(spark, loc, table, want, COLS, position_deletes=True)
    check_dvs_agree(spark, loc, table)
