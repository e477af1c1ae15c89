# SPDX-License-Identifier: Apache-2.0
"""Values stored by the documented fallback rules (docs/type-mapping.md: a numeric NaN in a
decimal column becomes null, a timestamp beyond the int64 microseconds since 1970 is clamped to
INT64_MAX-1) are logged and counted the same way whether they were copied or streamed (issue 24
item 8): a WARN line, the per-stream `values_replaced` counters of stats.json, and the values
pyiceberg reads back are the documented replacements."""

from __future__ import annotations

import re
import signal
from decimal import Decimal

from firnutil import INT64_MAX, FirnEnv, reaped, stop_process, stream_stats, wait_for

FAR = "294250-06-01 00:00:00"  # PostgreSQL takes it; int64 microseconds since 1970 cannot


def table_rows(fe: FirnEnv) -> dict[int, tuple]:
    arrow = fe.pyiceberg_arrow("r")
    ids = arrow.column("id").to_pylist()
    ds = arrow.column("d").to_pylist()
    ts = arrow.column("ts").cast("int64").to_pylist()
    return {i: (d, t) for i, d, t in zip(ids, ds, ts)}


def replaced(fe: FirnEnv) -> dict:
    return stream_stats(fe, "e2e.r")["values_replaced"]


def fallback_warnings(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "level=warn" in ln and "fallback rule" in ln]


def test_streamed_replacements_logged_and_counted(pg, pg_db, firn_bin, tmp_path):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE r (id int PRIMARY KEY, d numeric(10,2), ts timestamp)")
        conn.execute("INSERT INTO r VALUES (1, 'NaN', '2020-01-01'), (2, 1.5, %s), "
                     "(3, 2.25, '2021-02-03 04:05:06')", (FAR,))
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["r"])
        first = fe.sync("--log", "info")
        assert replaced(fe) == {"numeric_nan_as_null": 1, "timestamps_clamped": 1,
                                "arrays_flattened": 0, "array_lower_bounds_dropped": 0}
        assert re.search(r"1 numeric NaN as null, 1 timestamps clamped", first.stderr), \
            first.stderr

        # Streamed: two NaNs and one far timestamp, the same column twice.
        conn.execute("INSERT INTO r VALUES (4, 'NaN', '2022-01-01'), (5, 'NaN', %s), "
                     "(6, 7.5, '2023-01-01')", (FAR,))
        conn.execute("UPDATE r SET d = 9.75 WHERE id = 3")
        second = fe.sync("--log", "info")
        warns = fallback_warnings(second.stderr)
        # One line per table and kind, naming the column and the rule, then the run's totals.
        nan = [w for w in warns if "numeric NaN has no decimal value" in w]
        far = [w for w in warns if "timestamp beyond the int64" in w]
        assert len(nan) == 1 and 'column \\"d\\"' in nan[0] and "e2e.r" in nan[0], second.stderr
        assert len(far) == 1 and 'column \\"ts\\"' in far[0], second.stderr
        assert re.search(r"table e2e\.r: streamed values stored by the documented fallback rules: "
                         r"2 numeric NaN as null, 1 timestamps clamped, 0 arrays flattened",
                         second.stderr), second.stderr
        assert replaced(fe) == {"numeric_nan_as_null": 2, "timestamps_clamped": 1,
                                "arrays_flattened": 0, "array_lower_bounds_dropped": 0}

        # A run with nothing replaced says nothing and counts nothing.
        conn.execute("INSERT INTO r VALUES (7, 1.25, '2024-01-01')")
        third = fe.sync("--log", "info")
        assert not fallback_warnings(third.stderr) and "fallback rules" not in third.stderr
        assert set(replaced(fe).values()) == {0}

        rows = table_rows(fe)
        clamped = INT64_MAX - 1
        jan = 1577836800000000  # 2020-01-01 in microseconds since 1970
        assert rows[1] == (None, jan)
        assert rows[2] == (Decimal("1.50"), clamped)
        assert rows[3][0] == Decimal("9.75")
        assert rows[4][0] is None and rows[5] == (None, clamped)
        assert rows[6][0] == Decimal("7.50") and rows[7][0] == Decimal("1.25")


def test_follow_warns_at_the_first_streamed_replacement(pg, pg_db, firn_bin, tmp_path):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE r (id int PRIMARY KEY, d numeric(10,2), ts timestamp); "
                     "INSERT INTO r VALUES (1, 1, '2020-01-01')")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["r"])
        fe.sync()
        log = fe.root / "follow.log"
        with reaped(fe.start_follow(None, None, "--log", "info")) as proc:
            wait_for(lambda: b"replication connection open" in log.read_bytes(), 60,
                     what="firn to stream")
            conn.execute("INSERT INTO r VALUES (2, 'NaN', '2020-01-01')")
            wait_for(lambda: fallback_warnings(log.read_text()), 30,
                     what="the warning of the streamed NaN")
            conn.execute("INSERT INTO r VALUES (3, 'NaN', '2020-01-01')")
            wait_for(lambda: replaced(fe)["numeric_nan_as_null"] == 2, 30, interval=0.5,
                     what="stats.json to count both NaNs")
            assert len(fallback_warnings(log.read_text())) == 1
            assert stop_process(proc, signal.SIGTERM, timeout=60) == 0
        text = log.read_text()
        assert "2 numeric NaN as null, 0 timestamps clamped" in text, text
        rows = table_rows(fe)
        assert rows[2][0] is None and rows[3][0] is None and rows[1][0] == Decimal("1.00")
