# SPDX-License-Identifier: Apache-2.0
"""Per-stream commit policies in `firn sync --follow` (issue 7: "a commit policy per table, every
N seconds or M bytes, whichever first"): three tables changed by the same transactions commit at
their own cadence (every second; not before the stop; every 16 KiB), the slot is never
acknowledged past a change a table still buffers, and after SIGTERM every table equals the
source (pyiceberg and DuckDB, value by value)."""

from __future__ import annotations

import signal
import time

from firnutil import FirnEnv, compare_table, stop_process, wait_for

SCHEMA = """
CREATE TABLE fast (id int PRIMARY KEY, v text);
CREATE TABLE slow (id int PRIMARY KEY, v text);
CREATE TABLE sized (id int PRIMARY KEY, v text);
INSERT INTO fast VALUES (0, 'seed'); INSERT INTO slow VALUES (0, 'seed');
INSERT INTO sized VALUES (0, 'seed');
"""


def lsn_int(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def snapshots(fe: FirnEnv, table: str) -> int:
    return len(fe.catalog().load_table(f"e2e.{table}").snapshots())


def test_tables_commit_at_their_own_cadence(pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute(SCHEMA)
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.write_source(pg)
        fe.write_destination(600)
        fe.write_streams([("fast", {"commit": {"interval_seconds": 1}}),
                          ("slow", {"commit": {"interval_seconds": 3600}}),
                          ("sized", {"commit": {"interval_seconds": 3600,
                                                "max_bytes": "16KiB"}})])
        fe.sync()
        base = {t: snapshots(fe, t) for t in ("fast", "slow", "sized")}
        proc = fe.start_follow()
        try:
            wait_for(lambda: b"replication connection open" in
                     (fe.root / "follow.log").read_bytes(), 60, what="firn to stream")
            before = lsn_int(conn.execute("SELECT pg_current_wal_insert_lsn()::text")
                             .fetchone()[0])
            for i in range(1, 9):
                with conn.transaction():
                    for t in ("fast", "slow", "sized"):
                        conn.execute(f"INSERT INTO {t} SELECT g, repeat(md5(g::text), 2) "
                                     f"FROM generate_series({i * 100}, {i * 100 + 59}) g")
                time.sleep(0.8)
            wait_for(lambda: snapshots(fe, "fast") - base["fast"] >= 4, 30,
                     what="the fast table to commit every second")
            time.sleep(1.5)
            grown = {t: snapshots(fe, t) - base[t] for t in base}
            assert grown["slow"] == 0, grown
            assert 2 <= grown["sized"] <= 8, grown  # 60 rows of ~80 bytes a transaction
            assert grown["fast"] >= 4, grown
            # The fast tables' commits must not acknowledge the slow table's buffered changes.
            confirmed = conn.execute("SELECT confirmed_flush_lsn::text FROM "
                                     "pg_replication_slots WHERE slot_name = 'firn_e2e'"
                                     ).fetchone()[0]
            assert lsn_int(confirmed) <= before, (confirmed, before)
        finally:
            rc = stop_process(proc, signal.SIGTERM, timeout=60)
        log = (fe.root / "follow.log").read_text()
        assert rc == 0, log[-3000:]
        assert snapshots(fe, "slow") == base["slow"] + 1
        for t in ("fast", "slow", "sized"):
            compare_table(fe, conn, duck, t)
        # After the stop everything is acknowledged: a catch-up run finds nothing to replay.
        fe.sync()
        for t in ("fast", "slow", "sized"):
            compare_table(fe, conn, duck, t)
        assert snapshots(fe, "slow") == base["slow"] + 1
