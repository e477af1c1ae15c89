# SPDX-License-Identifier: Apache-2.0
"""PostgreSQL restarted under a running `firn sync --follow` (an operator's `pg_ctl restart`),
on a cluster of the test's own:

- a fast restart is not held up by firn: the walsender of a shutting-down server waits until
  the client's flush position reaches everything it sent (walsender.c WalSndDone), and asks for
  it with keepalives; firn commits what it buffers at once instead of at its next commit
  (here 60 s away: pg_ctl took ~55 s and the server refused every new connection meanwhile);
- firn then exits 3 with one line naming the server and the slot and saying to run it again,
  for a fast restart (the server ends the stream) and an immediate one (the connection drops);
- the next run leaves the table equal to the source, value by value."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import PG_CLUSTER, PgCluster, _parse_exports
from firnutil import FirnEnv, META_COLUMNS, arrow_rows, diff_rows, source_rows, wait_for

PG_BINDIR = os.environ.get("FIRN_PG_BINDIR", "/usr/lib/postgresql/15/bin")


@pytest.fixture
def own_cluster():
    """A logical cluster of this test only (restarting the session's would disturb others)."""
    handle = Path(tempfile.mkdtemp(prefix="firn-pytest-restart.")) / "cluster"
    proc = subprocess.run(["bash", str(PG_CLUSTER), "start", str(handle)], capture_output=True,
                          text=True, timeout=120)
    try:
        assert proc.returncode == 0, proc.stderr
        e = _parse_exports(proc.stdout)
        yield PgCluster(host=e["PGHOST"], port=int(e["PGPORT"]), user=e["PGUSER"],
                        dbname=e["PGDATABASE"]), Path(e["FIRN_TEST_PGROOT"])
    finally:
        subprocess.run(["bash", str(PG_CLUSTER), "stop", str(handle)], timeout=60)
        shutil.rmtree(handle.parent, ignore_errors=True)


def pg_ctl_restart(root: Path, port: int, mode: str) -> float:
    """Restarts the cluster as pg_cluster.sh started it; returns pg_ctl's wall time."""
    cmd = [f"{PG_BINDIR}/pg_ctl", "-D", str(root / "data"), "-l", str(root / "server.log"),
           "-o", f"-p {port}", "-m", mode, "-t", "120", "-w", "restart"]
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, capture_output=True, timeout=150, cwd="/")
    return time.monotonic() - t0


def change(pg, db: str, first: int):
    """Inserts, updates and deletes in separate transactions."""
    with pg.connect(dbname=db) as conn:
        for i in range(first, first + 30):
            conn.execute("INSERT INTO t VALUES (%s, %s)", (i, f"new {i}"))
        for i in range(1, 20):
            conn.execute("UPDATE t SET v = v || '+' WHERE id = %s", (i * 7,))
        conn.execute("DELETE FROM t WHERE id %% 11 = 0 AND id < %s", (first,))


def buffered(stats: Path) -> int:
    try:
        doc = json.loads(stats.read_text())
    except (OSError, ValueError):
        return 0
    return sum(s.get("buffered_changes") or 0 for s in doc.get("streams", []))


def assert_equal_to_source(fe: FirnEnv, pg):
    tbl = fe.catalog().load_table("e2e.t")
    names = [f.name for f in tbl.schema().fields if f.name not in META_COLUMNS]
    with pg.connect(dbname=fe.dbname) as conn:
        expected = source_rows(conn, "t", tbl.schema(), names)
    diff = diff_rows(expected, arrow_rows(tbl.scan().to_arrow(), names), 0, names)
    assert not diff, diff


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_restart_mid_cdc(own_cluster, firn_bin, tmp_path, mode):
    pg, root = own_cluster
    with pg.connect() as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 500) g")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg.dbname)
    fe.setup(pg, ["t"], interval_s=60)
    log = tmp_path / "follow.log"
    proc = fe.start_follow(None, log, "--log", "info")
    try:
        wait_for(lambda: b"backfill committed" in log.read_bytes(), 60, what="the backfill")
        change(pg, pg.dbname, 1000)
        # The changes are read (buffered, not committed: the interval is 60 s).
        wait_for(lambda: buffered(tmp_path / "firn" / "stats.json") >= 30, 30,
                 what="buffered changes")
        took = pg_ctl_restart(root, pg.port, mode)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    errors = [ln for ln in text.splitlines() if ln.startswith("firn:")]
    assert code == 3, f"exit {code}:\n{text[-3000:]}"
    assert len(errors) == 1, text[-3000:]
    line = errors[0]
    assert 'slot "firn_e2e"' in line and f"{pg.host}:{pg.port}" in line, line
    assert "run firn sync again" in line, line
    if mode == "fast":
        # Before the fix pg_ctl waited for firn's next commit (60 s here).
        assert took < 20, f"pg_ctl restart -m fast took {took:.1f} s:\n{text[-3000:]}"
        assert "shutting down or restarting" in line, line
        assert "the server asked for the confirmed position" in text, text[-3000:]
    else:
        assert "lost" in line, line
    change(pg, pg.dbname, 2000)
    fe.sync()
    assert_equal_to_source(fe, pg)


def copy_waits(pg) -> bool:
    with pg.connect() as conn:
        return bool(conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event = "
                                 "'PgSleep' AND query LIKE 'COPY%'").fetchone()[0])


def test_restart_mid_backfill(own_cluster, firn_bin, tmp_path):
    """The copy's snapshot ends with the server: the run stops (exit 3) with one line saying to
    run firn sync again, and that run leaves the table equal to the source."""
    pg, root = own_cluster
    with pg.connect() as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 5000) g")
        # The copy stops at row 2500 until the server ends it (the filter runs per row).
        conn.execute("CREATE FUNCTION held(i int) RETURNS bool LANGUAGE plpgsql AS "
                     "$$BEGIN IF i = 2500 THEN PERFORM pg_sleep(60); END IF; RETURN true; END$$")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg.dbname)
    fe.setup(pg, ["t"])
    held = json.loads(fe.streams.read_text())
    held["selected_streams"]["public"][0]["filter"] = "held(id)"
    fe.streams.write_text(json.dumps(held))
    log = tmp_path / "sync.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(firn_bin), "sync", *fe.sync_args], stdout=out, stderr=out,
                                env=fe.env())
    try:
        wait_for(lambda: b"backfill: " in log.read_bytes() or proc.poll() is not None, 60,
                 what="the backfill to start")
        wait_for(lambda: copy_waits(pg) or proc.poll() is not None, 60,
                 what="the COPY to reach row 2500")
        assert proc.poll() is None, "the backfill ended before the restart: make the table larger"
        pg_ctl_restart(root, pg.port, "fast")
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    errors = [ln for ln in text.splitlines() if ln.startswith("firn:")]
    assert code == 3 and len(errors) == 1, f"exit {code}:\n{text[-3000:]}"
    assert "run firn sync again" in errors[0], errors[0]
    with pg.connect() as conn:
        conn.execute("CREATE OR REPLACE FUNCTION held(i int) RETURNS bool LANGUAGE sql AS "
                     "'SELECT true'")
    fe.sync()
    change(pg, pg.dbname, 6000)
    fe.sync()
    assert_equal_to_source(fe, pg)
