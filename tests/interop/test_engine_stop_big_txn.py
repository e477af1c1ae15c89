# SPDX-License-Identifier: Apache-2.0
"""SIGTERM while `firn sync --follow` reads a long (streamed) transaction (issue 7 "Shutdown":
"commits or cleanly abandons the open batch within a bounded time"): firn stops within seconds
instead of reading the transaction to its end; the tables that hold none of its rows commit what
they buffer, the transaction is not committed in part, the slot is not acknowledged past what is
committed, and the next run reads the transaction again: the tables equal the source (DuckDB
over iceberg_scan and pyiceberg against PostgreSQL)."""

from __future__ import annotations

import json
import re
import signal
import time

from firnutil import FirnEnv, stop_process, wait_for
from test_engine_e2e import compare_table

ROWS = 1_000_000


def lsn_int(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def changes_read(fe: FirnEnv, stream: str) -> int:
    try:
        st = json.loads((fe.root / "stats.json").read_text())
    except (OSError, ValueError):
        return 0
    return {s["stream"]: s for s in st["streams"]}[stream].get("changes_read", 0)


def test_sigterm_inside_a_long_transaction(pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{pg_db}" SET logical_decoding_work_mem = \'64kB\'')
        conn.execute("CREATE TABLE big (id int PRIMARY KEY, v text); "
                     "CREATE TABLE small (id int PRIMARY KEY, v text); "
                     "INSERT INTO big VALUES (0, 'seed'); INSERT INTO small VALUES (0, 'seed')")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.write_source(pg)
        fe.write_destination(3600)
        fe.write_streams(["big", "small"])
        fe.sync()
        proc = fe.start_follow()
        try:
            wait_for(lambda: b"replication connection open" in
                     (fe.root / "follow.log").read_bytes(), 60, what="firn to stream")
            conn.execute("INSERT INTO small VALUES (1, 'before')")
            before = lsn_int(conn.execute("SELECT pg_current_wal_insert_lsn()::text")
                             .fetchone()[0])
            conn.execute(f"INSERT INTO big SELECT g, 'v' || g FROM generate_series(1, {ROWS}) g")
            # firn replays the streamed transaction from here on (a few seconds for ASan firn)
            wait_for(lambda: re.search(rb"streamed transaction \d+ committed: \d{8,} bytes",
                                       (fe.root / "follow.log").read_bytes()), 120,
                     interval=0.05, what="firn to replay the large transaction")
            t0 = time.monotonic()
        finally:
            rc = stop_process(proc, signal.SIGTERM, timeout=120)
        took = time.monotonic() - t0
        log = (fe.root / "follow.log").read_text()
        assert rc == 0, log[-3000:]
        assert took < 10, f"stopping took {took:.1f} s"
        # Never committed in part; the small table's earlier change is committed.
        big = fe.catalog().load_table("e2e.big").scan().to_arrow()
        assert big.num_rows in (1, ROWS + 1), big.num_rows
        compare_table(fe, conn, duck, "small")
        if "stop requested inside the transaction" in log:
            assert big.column("id").to_pylist() == [0]
            confirmed = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                                     "WHERE slot_name = 'firn_e2e'").fetchone()[0]
            assert lsn_int(confirmed) <= before + 4096, (confirmed, before)
        # The next run reads the transaction again, whole.
        fe.write_destination(3600, memory_limit="4GiB")
        fe.sync(timeout=600)
        loc = fe.metadata_location("big")
        got = duck.sql(f"SELECT count(*), count(DISTINCT id), sum(id), "
                       f"sum(length(v)) FROM iceberg_scan('{loc}')").fetchone()
        want = conn.execute("SELECT count(*), count(DISTINCT id), sum(id), sum(length(v)) "
                            "FROM big").fetchone()
        assert tuple(int(x) for x in got) == tuple(int(x) for x in want), (got, want)
        compare_table(fe, conn, duck, "small")
