# SPDX-License-Identifier: Apache-2.0
"""A catch-up run after a copy on an idle source ends promptly: reading a table with dead rows
prunes its pages, and the WAL that pruning writes is inserted but not flushed until something
else flushes (no commit follows a read-only copy; PostgreSQL's background writer logs a standby
snapshot, which gets flushed, only every 15 s), while the walsender decodes only flushed WAL:
the run, which aims at the insert position current at its start, waited 10-25 s here and up to
its 60 s limit when the position fell at the start of a WAL page. Each case: the catch-up ends
in a few seconds and the tables equal the source value by value, with changes committed around
the copy (one of them asynchronously, so its commit was not flushed when the run started)."""

from __future__ import annotations

from datetime import datetime

from firnutil import FirnEnv, compare_table

# Well under the 15 s that a standby snapshot may take to flush the WAL without firn's help
# (the catch-up alone takes about 0.5 s), and far under the 60 s limit.
CATCH_UP_MAX_S = 8


def ts(line: str) -> datetime:
    return datetime.fromisoformat(line.split()[0].removeprefix("ts=").replace("Z", "+00:00"))


def catch_up_seconds(fe: FirnEnv) -> float:
    """Runs a catch-up sync; the seconds from the start of its streaming to its end."""
    log = fe.sync("--log", "info,engine=debug", timeout=180).stderr
    start = [ln for ln in log.splitlines() if "catch-up run: streaming up to" in ln]
    end = [ln for ln in log.splitlines() if "sync finished" in ln]
    assert len(start) == 1 and len(end) == 1, log[-3000:]
    assert "has not sent WAL up to" not in log, log[-3000:]
    return (ts(end[0]) - ts(start[0])).total_seconds()


def dead_rows(conn, table: str) -> None:
    """Every row of table updated twice, the old versions left dead (no vacuum): the next read
    of each page prunes it and writes WAL for that."""
    conn.execute(f"UPDATE {table} SET v = v || 'a'")
    conn.execute(f"UPDATE {table} SET v = v || 'b'")


def async_insert(conn, table: str, key: int) -> None:
    conn.execute("SET synchronous_commit = off")
    conn.execute(f"INSERT INTO {table} VALUES ({key}, 'async')")
    conn.execute("SET synchronous_commit = on")


def test_catch_up_after_recopy_on_idle_source(pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        for t in ("a", "b"):
            conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text) "
                         "WITH (autovacuum_enabled = false)")
            conn.execute(f"INSERT INTO {t} SELECT g, repeat('x', 100) || g "
                         "FROM generate_series(1, 5000) g")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["a"])
        try:
            fe.sync()
            dead_rows(conn, "a")
            fe.sync()
            compare_table(fe, conn, duck, "a")

            # A lost slot, twice: firn copies the table again in the snapshot of a new slot.
            for key in (7001, 7002):
                dead_rows(conn, "a")
                async_insert(conn, "a", key)
                conn.execute("SELECT pg_drop_replication_slot('firn_e2e')")
                assert catch_up_seconds(fe) < CATCH_UP_MAX_S
                compare_table(fe, conn, duck, "a")

            # A table added to the streams: both copied again in the snapshot of a new slot.
            dead_rows(conn, "b")
            conn.execute("INSERT INTO a VALUES (6001, 'before')")
            async_insert(conn, "b", 7003)
            conn.execute("ALTER PUBLICATION firn_e2e ADD TABLE b")
            fe.write_streams(["a", "b"])
            assert catch_up_seconds(fe) < CATCH_UP_MAX_S
            compare_table(fe, conn, duck, "a")
            compare_table(fe, conn, duck, "b")

            # Changes after the copy arrive through the slot: the run reads them all.
            dead_rows(conn, "b")
            conn.execute("DELETE FROM a WHERE id % 7 = 0")
            async_insert(conn, "a", 7004)
            assert catch_up_seconds(fe) < CATCH_UP_MAX_S
            compare_table(fe, conn, duck, "a")
            compare_table(fe, conn, duck, "b")
        finally:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = 'firn_e2e' AND NOT active")
