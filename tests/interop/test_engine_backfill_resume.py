# SPDX-License-Identifier: Apache-2.0
"""Chunk-level resume of the initial copy (issue 5, "Resume"; docs/internals/backfill.md).

A keyed full_refresh_cdc table in its first copy commits finished chunks as it goes
(firn.backfill=partial, firn.backfill-chunks). firn is killed right after such a commit
(FIRN_TEST_CRASH=backfill-chunk:N), the source changes in ways that move rows between chunks
(non-HOT updates, deletes, re-inserted keys, new rows), and the next run must copy only the
missing chunks, in a new snapshot, as upserts, with the kept slot's changes applied over them:
the table then equals PostgreSQL value by value with each key once. When an append-mode table
shares the unfinished copy the slot is dropped and every table is copied again, replacing the
committed chunks: again equal, no duplicates. The keyed case runs with CTID block-range chunks
and with primary-key range chunks (source.chunking)."""

from __future__ import annotations

import json
import re
import signal
import sqlite3

import pytest

from firnutil import FirnEnv, arrow_rows, diff_rows, rows_hash, source_rows

SCHEMA = """
CREATE TABLE big (id int8 PRIMARY KEY, v int4 NOT NULL, pad text);
INSERT INTO big SELECT g, g, repeat(md5(g::text), 3) FROM generate_series(1, 20000) g;
CREATE TABLE small (k int4 PRIMARY KEY, v text);
INSERT INTO small SELECT g, 's' || g FROM generate_series(1, 50) g;
"""


def summaries(fe: FirnEnv, table: str) -> list[dict]:
    """The summaries of the table's snapshots, oldest first (read through the catalog)."""
    con = sqlite3.connect(fe.catalog_db)
    try:
        loc = con.execute("SELECT metadata_location FROM iceberg_tables WHERE table_name = ?",
                          (table,)).fetchone()[0]
    finally:
        con.close()
    md = json.loads(open(loc.removeprefix("file://")).read())
    return [s["summary"] for s in sorted(md.get("snapshots", []),
                                         key=lambda s: s["sequence-number"])]


def check_table(fe: FirnEnv, conn, duck, table: str):
    ice = fe.catalog().load_table(f"e2e.{table}")
    schema = ice.schema()
    names = [f.name for f in schema.fields if not f.name.startswith("_firn_")]
    expected = source_rows(conn, table, schema, names)
    for reader, arrow in (("pyiceberg", ice.scan().to_arrow()),
                          ("duckdb", fe.duckdb_arrow(duck, table))):
        actual = arrow_rows(arrow, names)
        keys = [r[0] for r in actual]
        assert len(keys) == len(set(keys)), f"{reader}: duplicate keys in {table}"
        diff = diff_rows(expected, actual, key=0, names=names)
        assert not diff, f"{reader}: table {table} differs from the source:\n{diff}"
        assert rows_hash(actual) == rows_hash(expected)


def change_source(conn):
    """Changes that cross chunk boundaries between the crash and the next run."""
    conn.execute("UPDATE big SET pad = repeat('x', 400), v = -v WHERE id % 97 = 0")  # moves rows
    conn.execute("DELETE FROM big WHERE id % 89 = 0")
    conn.execute("INSERT INTO big SELECT g, 7, 'again' FROM generate_series(89, 20000, 89*5) g")
    conn.execute("INSERT INTO big SELECT g, g, 'new' FROM generate_series(20001, 20500) g")
    conn.execute("UPDATE big SET v = v + 1000000 WHERE id > 19000 AND id % 3 = 0")
    conn.execute("UPDATE small SET v = 'changed' WHERE k < 5")


def crash_in_copy(fe: FirnEnv, count: int = 4) -> str:
    proc = fe.sync(env={"FIRN_TEST_CRASH": f"backfill-chunk:{count}", "FIRN_LOG": "info"},
                   check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert "FIRN_TEST_CRASH: killing" in proc.stderr
    return proc.stderr


@pytest.mark.parametrize("chunking", ["ctid", "primary_key"])
def test_keyed_copy_resumes_missing_chunks(pg, pg_db, firn_bin, duck, tmp_path, chunking):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["big", "small"], interval_s=0.01,
                 source={"batch_rows": 1000, "chunk_size": "64KiB", "parallelism": 2,
                         "chunking": chunking})
        crash_in_copy(fe)
        partial = summaries(fe, "big")
        assert partial and all(s.get("firn.backfill") == "partial" for s in partial), partial
        done_ranges = partial[-1]["firn.backfill-chunks"].split(",")
        assert len(done_ranges) >= 2, done_ranges
        # key chunks record key ranges, CTID chunks block ranges
        assert all((":k" in r) == (chunking == "primary_key") for r in done_ranges), done_ranges
        committed = fe.pyiceberg_arrow("big").num_rows
        assert 0 < committed < 20000

        change_source(conn)
        proc = fe.run("sync", *fe.sync_args, env={"FIRN_LOG": "info"}, check=True)
        log = proc.stderr
        assert "kept replication slot" in log, log[-3000:]
        m = re.search(r'table \\?"e2e\.big\\?": resuming its initial copy: (\d+) of (\d+) chunks', log)
        assert m, log[-3000:]
        skipped, total = int(m.group(1)), int(m.group(2))
        assert 1 <= skipped < total, (skipped, total)
        # only the missing chunks were read: fewer rows than the table holds
        m = re.search(r'table \\?"e2e\.big\\?": backfill committed: (\d+) rows', log)
        assert m and int(m.group(1)) < 20000, log[-3000:]
        assert summaries(fe, "big")[-1].get("firn.backfill") != "partial"
        check_table(fe, conn, duck, "big")
        check_table(fe, conn, duck, "small")

        # the kept slot goes on streaming
        conn.execute("UPDATE big SET v = 0 WHERE id < 100; DELETE FROM big WHERE id = 5")
        fe.sync()
        check_table(fe, conn, duck, "big")


def test_copy_with_append_table_starts_again(pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
        conn.execute("CREATE TABLE log (seq int8 NOT NULL, note text); "
                     "ALTER TABLE log REPLICA IDENTITY FULL; "
                     "INSERT INTO log SELECT g, repeat('l', 50) FROM generate_series(1, 3000) g")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["big", "small", ("log", {"append_mode": True})], interval_s=0.01,
                 source={"batch_rows": 1000, "chunk_size": "64KiB", "parallelism": 2})
        crash_in_copy(fe)
        assert summaries(fe, "big")[-1].get("firn.backfill") == "partial"
        # an append-mode table is never committed in pieces
        assert not summaries(fe, "log")

        change_source(conn)
        conn.execute("INSERT INTO log VALUES (3001, 'after the crash')")
        proc = fe.run("sync", *fe.sync_args, env={"FIRN_LOG": "info"}, check=True)
        assert re.search(r'dropped replication slot \\?"[^"\\]+\\?": no change was read from it '
                         r'yet and [^;]*log[^;]* still need', proc.stderr), proc.stderr[-3000:]
        assert "resuming its initial copy" not in proc.stderr
        check_table(fe, conn, duck, "big")
        check_table(fe, conn, duck, "small")
        seqs = fe.pyiceberg_arrow("log").column("seq").to_pylist()
        assert sorted(seqs) == list(range(1, 3002))
