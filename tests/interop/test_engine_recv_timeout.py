"""A walsender that stops answering ends `firn sync --follow` (docs/configuration.md
`replication_timeout_seconds`): the walsender is frozen with SIGSTOP (as a vanished host or a
network cut looks to firn: the connection stays open and nothing arrives), firn fails within the
timeout with one line naming the server and the slot, commits and acknowledges nothing of what it
did not receive, and the next run takes every change, compared value by value (pyiceberg and
DuckDB). An idle but healthy stream with the same small timeout keeps running (firn asks the
server for keepalives)."""
from __future__ import annotations

import os
import signal
import time

from firnutil import FirnEnv, compare_table, iceberg_ids, stop_process, wait_for

NS = "e2e"
SLOT = "firn_e2e"


def slot(conn):
    return conn.execute("SELECT active_pid, confirmed_flush_lsn::text FROM pg_replication_slots "
                        "WHERE slot_name = %s", (SLOT,)).fetchone()


def test_silent_walsender_ends_the_run(pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text); "
                     "INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 3) g")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["t"], interval_s=0.2,
                 source={"replication_timeout_seconds": 2, "reconnect_timeout_seconds": 0})
        fe.sync()
        proc = fe.start_follow()
        walsender = None
        try:
            wait_for(lambda: slot(conn)[0], 60, what="firn to stream")
            conn.execute("INSERT INTO t VALUES (4, 'streamed')")
            wait_for(lambda: iceberg_ids(fe, "t") == [1, 2, 3, 4], 60, what="row 4")
            # Idle for more than twice the timeout: firn asks for keepalives and gets them.
            time.sleep(5)
            assert proc.poll() is None, (fe.root / "follow.log").read_text()[-3000:]
            walsender = slot(conn)[0]
            os.kill(walsender, signal.SIGSTOP)
            frozen = time.monotonic()
            before = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
            conn.execute("INSERT INTO t VALUES (5, 'sent to nobody')")
            conn.execute("UPDATE t SET v = 'changed unseen' WHERE id = 1")
            rc = proc.wait(timeout=30)
            waited = time.monotonic() - frozen
        finally:
            if walsender:
                os.kill(walsender, signal.SIGCONT)
            if proc.poll() is None:
                stop_process(proc)
        log = (fe.root / "follow.log").read_text()
        assert rc != 0, log[-3000:]
        assert waited < 15, (waited, log[-3000:])
        line = (f'no message from the server at {pg.host}:{pg.port} for 2 s on the replication '
                f'connection of slot "{SLOT}" (replication_timeout_seconds): check that the '
                'server is up and reachable; a restart resumes at the last confirmed position')
        assert line in log, log[-3000:]
        # Nothing it did not get was committed or acknowledged.
        assert iceberg_ids(fe, "t") == [1, 2, 3, 4]
        wait_for(lambda: slot(conn)[0] is None, 60, what="the frozen walsender to exit")
        # Confirmed at most up to what the server sent before it froze (keepalives may move it
        # within that), never into the changes made after.
        assert conn.execute("SELECT confirmed_flush_lsn <= %s FROM pg_replication_slots "
                            "WHERE slot_name = %s", (before, SLOT)).fetchone()[0]
        fe.sync()
        compare_table(fe, conn, duck, "t")
        assert iceberg_ids(fe, "t") == [1, 2, 3, 4, 5]
