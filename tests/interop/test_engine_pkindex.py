# SPDX-License-Identifier: Apache-2.0
"""The key index across restarts (issue 8): with a small index budget the index lives in run
files under destination.index_dir; a clean stop saves it and the next run reads it instead of
the key columns; a deleted folder or a killed process makes the next run rebuild it from the
table. After every run both tables (an int8 key and a composite text key) equal the source, read
by pyiceberg and DuckDB, value by value and by full-row hash."""

from __future__ import annotations

import shutil
import signal
import time

from firnutil import FirnEnv, compare_table, stop_process, wait_for

SCHEMA = """
CREATE TABLE big (id int8 PRIMARY KEY, v int4, note text);
INSERT INTO big SELECT g, g % 1000, 'n' || g FROM generate_series(1, 150000) g;
CREATE TABLE named (region text, code text, n int4, PRIMARY KEY (region, code));
INSERT INTO named SELECT 'r' || (g % 50), 'c' || g, g FROM generate_series(1, 60000) g;
"""
TABLES = ["big", "named"]


def change(conn, k: int) -> None:
    """Round k: updates and deletes spread over every file, new keys, deleted keys back."""
    conn.execute(f"UPDATE big SET v = v + 1, note = note || 'u' WHERE id % 97 = {k}")
    conn.execute(f"DELETE FROM big WHERE id % 101 = {k + 1}")
    conn.execute(f"INSERT INTO big SELECT 200000 + {k} * 1000 + g, g, 'new' FROM "
                 "generate_series(1, 500) g")
    conn.execute(f"INSERT INTO big SELECT id, 7, 'back' FROM generate_series({k}, 150000, 101) id "
                 f"WHERE id % 101 = {k} ON CONFLICT (id) DO NOTHING")
    conn.execute(f"UPDATE named SET n = n + 1000000 WHERE n % 89 = {k}")
    conn.execute(f"DELETE FROM named WHERE n % 83 = {k + 2}")
    conn.execute(f"INSERT INTO named SELECT 'new', 'k{k}-' || g, g FROM generate_series(1, 300) g")


def compare(fe: FirnEnv, conn, duck, table: str) -> None:
    compare_table(fe, conn, duck, table, key=None)


def index_dirs(root) -> dict[str, object]:
    """Table folder -> its files, under index_dir/pkindex."""
    base = root / "pkindex"
    return {d.name: sorted(p.name for p in d.iterdir()) for d in base.iterdir()} if base.exists() \
        else {}


def test_index_saved_loaded_and_rebuilt(pg, pg_db, firn_bin, duck, tmp_path):
    idx = tmp_path / "index"
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, TABLES, destination={"index_dir": str(idx), "index_memory_limit": "4MiB",
                                         "persist_key_index": False})

        # Backfill, then a clean stop: each table's index is saved (runs + manifest).
        out = fe.sync().stderr
        assert out.count("key index saved") == 2, out[-3000:]
        dirs = index_dirs(idx)
        assert len(dirs) == 2
        for files in dirs.values():
            assert "MANIFEST" in files and any(f.endswith(".pkr") for f in files), dirs
        for t in TABLES:
            compare(fe, conn, duck, t)

        # Next run reads the saved index; its flushes then change it (saved again at the end).
        change(conn, 1)
        out = fe.sync().stderr
        assert out.count("key index read from local disk") == 2, out[-3000:]
        assert "no usable local key index" not in out
        for t in TABLES:
            compare(fe, conn, duck, t)

        # Lost local disk: rebuilt from the table's key columns, same results.
        shutil.rmtree(idx)
        change(conn, 2)
        out = fe.sync().stderr
        assert out.count("no usable local key index (no saved index)") == 2, out[-3000:]
        assert out.count("key index loaded") == 2
        for t in TABLES:
            compare(fe, conn, duck, t)

        # Killed after committing changes: the saved copy was withdrawn when the index first
        # changed, so the next run rebuilds instead of reading a stale index.
        change(conn, 3)
        proc = fe.start_follow()
        try:
            wait_for(lambda: all(all(f != "MANIFEST" for f in files)
                                 for files in index_dirs(idx).values()), 60,
                     what="the index to change after a commit")
            time.sleep(0.5)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        change(conn, 4)
        out = fe.sync().stderr
        assert out.count("no usable local key index") == 2, out[-3000:]
        for t in TABLES:
            compare(fe, conn, duck, t)

        # A clean SIGTERM stop of a follow run saves it again; the next run reads it.
        change(conn, 5)
        log = fe.root / "follow-term.log"
        proc = fe.start_follow(None, log)
        try:
            wait_for(lambda: log.exists() and log.read_text().count("committed") >= 2, 60,
                     what="commits of the follow run")
        finally:
            assert stop_process(proc, signal.SIGTERM) == 0
        assert all("MANIFEST" in files for files in index_dirs(idx).values())
        change(conn, 6)
        out = fe.sync().stderr
        assert out.count("key index read from local disk") == 2, out[-3000:]
        for t in TABLES:
            compare(fe, conn, duck, t)
