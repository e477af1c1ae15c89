# SPDX-License-Identifier: Apache-2.0
"""The stats file (issue 7 "Progress": "a stats file refreshed every few seconds"): stats.json
next to the state file, replaced atomically every 5 s while `firn sync --follow` streams and at
the end of every run. Its counters are checked against what the test did to the source and
against the tables (pyiceberg snapshots), its positions against PostgreSQL."""

from __future__ import annotations

import json
import signal
import time

from firnutil import FirnEnv, stop_process, wait_for


def read_stats(fe: FirnEnv) -> dict:
    return json.loads((fe.root / "stats.json").read_text())


def lsn_int(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def test_stats_file(pg, pg_db, firn_bin, tmp_path):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE a (id int PRIMARY KEY, v text); "
                     "CREATE TABLE b (id int PRIMARY KEY, v text); "
                     "INSERT INTO a SELECT g, 'x' FROM generate_series(1, 300) g; "
                     "INSERT INTO b SELECT g, 'y' FROM generate_series(1, 7) g")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.write_source(pg)
        fe.write_destination(1)
        fe.write_streams(["a", "b"])
        fe.sync()
        st = read_stats(fe)
        assert st["phase"] == "finished" and st["mode"] == "catch-up"
        by = {s["stream"]: s for s in st["streams"]}
        assert by["public.a"]["rows_written"] == 300 and by["public.b"]["rows_written"] == 7
        assert by["public.a"]["backfill"] == {"done": True}
        assert by["public.a"]["commits"] == 1 and by["public.a"]["table"] == "e2e.a"
        assert st["rows_written"] == 307

        proc = fe.start_follow()
        try:
            wait_for(lambda: b"replication connection open" in
                     (fe.root / "follow.log").read_bytes(), 60, what="firn to stream")
            conn.execute("UPDATE a SET v = 'z' WHERE id <= 40")  # 40 changes
            conn.execute("DELETE FROM b WHERE id = 1")            # 1 change
            conn.execute("INSERT INTO b VALUES (100, 'n')")       # 1 change

            def streaming_stats():
                s = read_stats(fe)
                b = {x["stream"]: x for x in s["streams"]}
                return (s if s["phase"] == "cdc" and b["public.a"]["changes_read"] == 40
                        and b["public.b"]["changes_read"] == 2
                        and b["public.b"]["buffered_changes"] == 0 else None)

            st = wait_for(streaming_stats, 30, interval=0.5, what="stats of the streamed changes")
            assert st["mode"] == "follow"
            by = {s["stream"]: s for s in st["streams"]}
            assert by["public.a"]["commits"] >= 1 and by["public.a"]["rows_written"] == 40
            wal = lsn_int(conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])
            assert 0 < lsn_int(st["source_wal_lsn"]) <= wal
            assert st["lag_bytes"] >= 0
            assert lsn_int(by["public.a"]["committed_lsn"]) > 0
            first = st["updated_at"]
            time.sleep(6)
            assert read_stats(fe)["updated_at"] != first, "not refreshed every few seconds"
        finally:
            rc = stop_process(proc, signal.SIGTERM, timeout=60)
        assert rc == 0
        st = read_stats(fe)
        assert st["phase"] == "stopped"
        by = {s["stream"]: s for s in st["streams"]}
        snaps = len(fe.catalog().load_table("e2e.a").snapshots())
        assert by["public.a"]["commits"] == snaps - 1  # the backfill's was the earlier run's
        confirmed = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                                 "WHERE slot_name = 'firn_e2e'").fetchone()[0]
        assert lsn_int(st["acknowledged_lsn"]) <= lsn_int(confirmed)
        assert not list(fe.root.glob("stats.json.tmp*"))
