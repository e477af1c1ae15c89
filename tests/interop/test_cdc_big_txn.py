# SPDX-License-Identifier: Apache-2.0
"""One large source transaction through CDC (issue 6, "a 2 GB single transaction"; issue 7).

The transaction inserts rows of about 1 KB, then updates and deletes some of them, all in one
transaction, after an aborted transaction of a quarter of its size. With
logical_decoding_work_mem = 64kB the server streams both while they are in progress (protocol
v2, PostgreSQL >= 14): firn buffers the streamed changes in memory up to its budget, spills the
rest to an unlinked temporary file, drops the aborted transaction and replays the committed one
at Stream Commit. The engine then commits it in parts when its buffers pass half the memory
limit. Checked:

- nothing lost, nothing twice: the table equals the source (count, distinct keys, sums of ids,
  numerics, text lengths and an md5 checksum of every row, computed by PostgreSQL and by DuckDB
  over iceberg_scan; full rows with pyiceberg at the default size);
- the aborted transaction left no row;
- the transaction was streamed by the server and spilled to disk by firn (firn's log);
- firn's peak RSS stays within FIRN_BIG_TXN_RSS_MB (default 512, the goal of issue 6; not
  checked for an ASan build);
- a crash after the first partial commit, then a new run, still gives the source's rows once.

The size is FIRN_BIG_TXN_MB (default 120 MB of row data, in the normal suite). The 2 GB run is
`bash tests/long/big_txn.sh` (README "Development"); it sets FIRN_BIG_TXN_MB=2048, uses the
release build and prints wall time and peak RSS."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from firnutil import FirnEnv, wait_for

MB = int(os.environ.get("FIRN_BIG_TXN_MB", "120"))
ROW_BYTES = 1024  # about: a 960-character text plus the other columns
ROWS = MB * 2**20 // ROW_BYTES
BASE = 1_000_000  # ids of the big transaction start here
# firn's memory limit for the run: small at the default size, so that the same partial-commit
# path runs as with 2 GB under the default limit.
MEMORY_LIMIT = os.environ.get("FIRN_BIG_TXN_MEMORY_LIMIT", "64MiB" if MB < 1024 else "")

SCHEMA = """
CREATE TABLE big (id bigint PRIMARY KEY, grp int NOT NULL, amount numeric(12,2),
                  at timestamptz, v text);
INSERT INTO big SELECT g, g % 7, g / 4.0, '2024-01-01'::timestamptz + g * interval '1 s',
                       'seed ' || g FROM generate_series(1, 1000) g;
"""


def payload(expr: str) -> str:
    """A 960-character text that differs per row (md5 of the id, repeated)."""
    return f"repeat(md5(({expr})::text), 30)"


def big_transaction(conn, rows: int) -> None:
    quarter = max(1, rows // 4)
    # Aborted first, large enough to be streamed and spilled too.
    conn.execute("BEGIN")
    conn.execute(f"INSERT INTO big SELECT g, 0, 0, now(), {payload('-g')} "
                 f"FROM generate_series({BASE + 10 * rows}, {BASE + 10 * rows + quarter - 1}) g")
    conn.execute("ROLLBACK")
    conn.execute("BEGIN")
    conn.execute(f"INSERT INTO big SELECT g, g % 7, (g % 100000) / 4.0, "
                 f"'2024-01-01'::timestamptz + g * interval '1 s', {payload('g')} "
                 f"FROM generate_series({BASE}, {BASE + rows - 1}) g")
    # Updates and deletes inside the same transaction, on new rows and on old ones.
    conn.execute(f"UPDATE big SET amount = amount + 1, v = 'updated ' || id "
                 f"WHERE id % 10 = 3 AND id >= {BASE}")
    conn.execute(f"DELETE FROM big WHERE id % 20 = 7 AND id >= {BASE}")
    conn.execute("UPDATE big SET v = 'old row updated' WHERE id BETWEEN 1 AND 100")
    conn.execute("DELETE FROM big WHERE id BETWEEN 101 AND 200")
    conn.execute("COMMIT")


# count, distinct ids, sum of ids, sum of amounts, sum of text lengths, md5 checksum of the rows
PG_CHECK = ("SELECT count(*), count(DISTINCT id), sum(id), sum(amount), sum(length(v)), "
            "sum(('x' || substr(md5(id || '|' || grp || '|' || coalesce(amount::text, '') || "
            "'|' || coalesce(v, '')), 1, 8))::bit(32)::bigint) FROM big")
DUCK_CHECK = ("SELECT count(*), count(DISTINCT id), sum(id), sum(amount), sum(length(v)), "
              "sum(('0x' || substr(md5(id::varchar || '|' || grp::varchar || '|' || "
              "coalesce(amount::varchar, '') || '|' || coalesce(v, '')), 1, 8))::bigint) "
              "FROM iceberg_scan('{loc}')")


def checks(conn, duck, fe: FirnEnv) -> tuple[tuple, tuple]:
    src = tuple(str(x) for x in conn.execute(PG_CHECK).fetchone())
    loc = fe.metadata_location("big")
    ice = tuple(str(x) for x in duck.sql(DUCK_CHECK.format(loc=loc)).fetchone())
    return src, ice


def run_measured(fe: FirnEnv, env: dict | None = None) -> tuple[int, float, float, str]:
    """A catch-up firn sync: (exit status, wall seconds, peak RSS MiB, stderr). The peak is the
    largest VmHWM seen after exec (sampled every 50 ms): ru_maxrss would count the pytest
    process's pages the child shares between fork and exec."""
    log = fe.root / "big_txn.log"
    t0 = time.monotonic()
    with open(log, "wb") as f:
        proc = subprocess.Popen([str(fe.firn_bin), "sync", *fe.sync_args, "--log", "info"],
                                stdout=f, stderr=f, env=fe.env(env))
        samples = []
        exe = os.path.realpath(fe.firn_bin)
        stop = threading.Event()

        def sample():
            while not stop.wait(0.05):
                try:
                    if os.readlink(f"/proc/{proc.pid}/exe") != exe:
                        continue  # not yet exec'd: the pages are pytest's
                    text = Path(f"/proc/{proc.pid}/status").read_text()
                except OSError:
                    return
                rss = re.search(r"VmRSS:\s+(\d+)", text)
                hwm = re.search(r"VmHWM:\s+(\d+)", text)
                if rss and hwm:
                    samples.append((round(time.monotonic() - t0, 2), int(rss.group(1)) // 1024,
                                    int(hwm.group(1)) / 1024))

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        _, status, usage = os.wait4(proc.pid, 0)
        stop.set()
        th.join()
    if os.environ.get("FIRN_BIG_TXN_RSS_TRACE"):
        print("rss MiB over time:", [s[:2] for s in samples[:: max(1, len(samples) // 40)]])
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    peak = max((s[2] for s in samples), default=usage.ru_maxrss / 1024)
    return proc.returncode, wall, peak, log.read_text(errors="replace")


@pytest.mark.parametrize("crash", [False, True], ids=["straight", "crash_after_first_part"])
def test_big_single_transaction(pg, pg_db, firn_bin, duck, tmp_path, crash):
    if crash and MB >= 1024:
        pytest.skip("the crash variant runs at the default size only")
    with pg.connect(dbname=pg_db) as conn:
        if conn.info.server_version < 140000:
            pytest.skip("streaming of in-progress transactions needs PostgreSQL 14")
        conn.execute(SCHEMA)
        conn.execute(f'ALTER DATABASE "{pg_db}" SET logical_decoding_work_mem = \'64kB\'')
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        dest = {"memory_limit": MEMORY_LIMIT} if MEMORY_LIMIT else {}
        fe.setup(pg, ["big"], destination=dest)
        fe.sync(timeout=300)
        conn.autocommit = True
        t0 = time.monotonic()
        big_transaction(conn, ROWS)
        load_s = time.monotonic() - t0
        wal_bytes = conn.execute("SELECT pg_current_wal_insert_lsn() - confirmed_flush_lsn "
                                 "FROM pg_replication_slots WHERE slot_name = 'firn_e2e'"
                                 ).fetchone()[0]

        env = {"TMPDIR": str(tmp_path)}
        if crash:
            # Killed right after the first partial commit of the transaction reached the catalog.
            code, _, _, log = run_measured(fe, dict(env, FIRN_TEST_CRASH="after-commit:1"))
            assert code == -9, log[-3000:]
            assert "committing it in parts" in log, log[-3000:]
        code, wall, rss_mb, log = run_measured(fe, env)
        assert code == 0, log[-3000:]
        print(f"\nbig transaction: {MB} MB of rows ({ROWS} rows, {wal_bytes / 2**20:.0f} MiB of "
              f"WAL), loaded in {load_s:.1f}s; firn sync {wall:.1f}s, peak RSS {rss_mb:.0f} MiB")

        wait_for(lambda: conn.execute("SELECT stream_txns FROM pg_stat_replication_slots "
                                      "WHERE slot_name = 'firn_e2e'").fetchone()[0] > 0, 15,
                 interval=0.5, what="the transaction to be streamed (stream_txns > 0)")
        assert re.search(r"streamed transaction \d+ committed: \d+ bytes of changes, spilled "
                         r"to a temporary file", log), log[-3000:]
        assert "committing it in parts" in log, log[-3000:]
        # The spill file is unlinked at creation: nothing is left behind.
        assert not list(tmp_path.glob("firn-pgo-*"))

        src, ice = checks(conn, duck, fe)
        assert ice == src
        assert src[0] == src[1]
        aborted = conn.execute(f"SELECT count(*) FROM big WHERE id >= {BASE + 10 * ROWS}"
                               ).fetchone()[0]
        assert aborted == 0
        if ROWS <= 400_000:
            got = fe.pyiceberg_arrow("big").select(["id", "grp", "v"]).sort_by("id")
            want = conn.execute("SELECT id, grp, v FROM big ORDER BY id").fetchall()
            assert list(zip(*(got.column(c).to_pylist() for c in ("id", "grp", "v")))) == want
        # The goal of issue 6; ASan's shadow memory and quarantine make its figure meaningless.
        limit = os.environ.get("FIRN_BIG_TXN_RSS_MB", "" if "asan" in str(firn_bin) else "512")
        if limit:
            assert rss_mb <= float(limit), f"peak RSS {rss_mb:.0f} MiB > {limit} MiB"
