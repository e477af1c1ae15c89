# SPDX-License-Identifier: Apache-2.0
"""PostgreSQL restarted or stopped under a running `firn sync --follow` (an operator's `pg_ctl
restart`, a crash, a failover's outage), on a cluster of the test's own:

- a fast restart is not held up by firn: the walsender of a shutting-down server waits until
  the client's flush position reaches everything it sent (walsender.c WalSndDone), and asks for
  it with keepalives; firn commits what it buffers at once instead of at its next commit
  (here 60 s away: pg_ctl took ~55 s and the server refused every new connection meanwhile);
- firn logs one warning naming the server and the slot, reconnects with backoff and streams on
  from the slot's confirmed position, after a fast restart and after the server was down for
  several seconds (an immediate stop: what it buffered is dropped and read again), with
  changes made before, while it waits (queued in the WAL) and after; the table then equals
  the source value by value, each key once, and firn is still running;
- kept down past `reconnect_timeout_seconds`, firn exits 3 with one line saying how long it
  tried and what to do; SIGTERM during the wait stops it at once (exit 0);
- a refusal that no wait mends ends the run at once (exit 3): the password changed, a table
  taken out of the publication, the slot created again;
- with `reconnect_timeout_seconds` 0, firn exits 3 at once with one line naming the server and
  the slot and saying to run it again, for a fast restart (the server ends the stream) and an
  immediate one (the connection drops);
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
from firnutil import (FirnEnv, META_COLUMNS, arrow_rows, diff_rows, firn_errors, reaped,
                      source_rows, stop_process, wait_for)

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


def table_diff(fe: FirnEnv, pg) -> str:
    """How table e2e.t differs from source table t, value by value and key by key ("": equal,
    each key once)."""
    tbl = fe.catalog().load_table("e2e.t")
    names = [f.name for f in tbl.schema().fields if f.name not in META_COLUMNS]
    with pg.connect(dbname=fe.dbname) as conn:
        expected = source_rows(conn, "t", tbl.schema(), names)
    return diff_rows(expected, arrow_rows(tbl.scan().to_arrow(), names), 0, names)


def assert_equal_to_source(fe: FirnEnv, pg):
    diff = table_diff(fe, pg)
    assert not diff, diff


def pg_ctl(root: Path, port: int, *args: str):
    """Runs pg_ctl on the cluster as pg_cluster.sh started it (stop, start)."""
    cmd = [f"{PG_BINDIR}/pg_ctl", "-D", str(root / "data"), "-l", str(root / "server.log"),
           "-o", f"-p {port}", "-t", "120", "-w", *args]
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    subprocess.run(cmd, check=True, capture_output=True, timeout=150, cwd="/")


def start_streaming(pg, fe: FirnEnv, tmp_path: Path, **source) -> tuple[subprocess.Popen, Path]:
    """Table t (500 rows) synced by `firn sync --follow` (commits every 2 s), past its copy."""
    with pg.connect() as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 500) g")
        if source.get("username") == "firn_pw":
            conn.execute("GRANT SELECT ON t TO firn_pw")
            conn.execute("CREATE PUBLICATION firn_e2e FOR TABLE t")
    fe.setup(pg, ["t"], interval_s=2, source=source)
    log = tmp_path / "follow.log"
    proc = fe.start_follow(None, log, "--log", "info")
    wait_for(lambda: b"backfill committed" in log.read_bytes() or proc.poll() is not None, 60,
             what="the backfill")
    assert proc.poll() is None, log.read_text()[-3000:]
    return proc, log


def lost_warnings(text: str, pg) -> list[str]:
    """The warnings of lost connections: each names the server and the slot."""
    lines = [ln for ln in text.splitlines() if "reconnecting for up to" in ln]
    for ln in lines:
        assert "level=warn" in ln and 'slot \\"firn_e2e\\"' in ln, ln
        assert f"{pg.host}:{pg.port}" in ln, ln
    return lines


def exits_3_once_lost(proc: subprocess.Popen, log: Path, pg, within: float) -> str:
    """Waits for a --follow run to end: it must exit 3 within `within` seconds, after one warning
    that the connection was lost, with one error line, which is returned."""
    t0 = time.monotonic()
    code = proc.wait(timeout=60)
    took = time.monotonic() - t0
    text = log.read_text()
    errors = firn_errors(text)
    assert code == 3, f"exit {code}:\n{text[-3000:]}"
    assert took < within, took
    assert len(errors) == 1 and len(lost_warnings(text, pg)) == 1, text[-3000:]
    return errors[0]


@pytest.mark.parametrize("outage", ["fast-restart", "down-for-seconds", "sql-session-ended"])
def test_follow_reconnects(own_cluster, firn_bin, tmp_path, outage):
    """--follow rides through a restart or an outage of several seconds: one warning, changes
    made before, while it waits and after all land once, and it is still running. Also when
    only its SQL session ends (idle_session_timeout, an administrator) while the stream lives
    on: the stats query finds it within 5 s, and both connections are opened again."""
    pg, root = own_cluster
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg.dbname)
    proc, log = start_streaming(pg, fe, tmp_path)
    with reaped(proc):
        change(pg, pg.dbname, 1000)  # read, most of it still buffered (commits every 2 s)
        if outage == "fast-restart":
            took = pg_ctl_restart(root, pg.port, "fast")
            assert took < 20, f"pg_ctl restart -m fast took {took:.1f} s"
        elif outage == "sql-session-ended":
            with pg.connect(autocommit=True) as conn:
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                             "application_name = 'firn' AND backend_type = 'client backend'")
        else:
            # A crash-like stop: what firn buffered is dropped and read again from the slot.
            pg_ctl(root, pg.port, "-m", "immediate", "stop")
            wait_for(lambda: b"reconnecting for up to" in log.read_bytes(), 30,
                     what="the reconnect warning")
            time.sleep(4)  # attempts fail meanwhile (1 s, then 2 s later)
            pg_ctl(root, pg.port, "start")
        # Made while firn waits for its next attempt (queued in the WAL), or just after.
        change(pg, pg.dbname, 2000)
        wait_for(lambda: b"reconnected to the server" in log.read_bytes()
                 or proc.poll() is not None, 60, what="the reconnect")
        assert proc.poll() is None, log.read_text()[-3000:]
        change(pg, pg.dbname, 3000)
        with pg.connect() as conn:
            conn.execute("UPDATE t SET v = 'after ' || id WHERE id % 5 = 0")
        wait_for(lambda: not table_diff(fe, pg) or proc.poll() is not None, 60,
                 what="the table to equal the source")
        assert proc.poll() is None, log.read_text()[-3000:]
        code = stop_process(proc)
    text = log.read_text()
    assert code == 0, f"exit {code}:\n{text[-3000:]}"
    assert len(lost_warnings(text, pg)) == 1, text[-3000:]
    assert not [ln for ln in text.splitlines() if ln.startswith("firn:")], text[-3000:]
    assert_equal_to_source(fe, pg)
    if outage == "down-for-seconds":
        assert "reconnect attempt" not in text  # debug only: the failures are not logged at info
    # The next run finds nothing to do twice.
    fe.sync()
    assert_equal_to_source(fe, pg)


def test_follow_gives_up(own_cluster, firn_bin, tmp_path):
    """Kept down past reconnect_timeout_seconds: exit 3 with one line saying how long firn
    tried and what to do; the next run, with the server up, loses nothing."""
    pg, root = own_cluster
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg.dbname)
    proc, log = start_streaming(pg, fe, tmp_path, reconnect_timeout_seconds=3)
    with reaped(proc):
        change(pg, pg.dbname, 1000)
        pg_ctl(root, pg.port, "-m", "immediate", "stop")
        line = exits_3_once_lost(proc, log, pg, within=20)
    assert line.startswith(f'firn: could not reconnect to the server at {pg.host}:{pg.port} for '
                           'replication slot "firn_e2e" within 3 s (reconnect_timeout_seconds'), line
    assert "run firn sync again" in line, line
    pg_ctl(root, pg.port, "start")
    fe.sync()
    assert_equal_to_source(fe, pg)


def test_follow_stops_while_reconnecting(own_cluster, firn_bin, tmp_path):
    """SIGTERM while firn waits to reconnect ends it at once with a clean stop's status."""
    pg, root = own_cluster
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg.dbname)
    proc, log = start_streaming(pg, fe, tmp_path)
    with reaped(proc):
        change(pg, pg.dbname, 1000)
        pg_ctl(root, pg.port, "-m", "immediate", "stop")
        wait_for(lambda: b"reconnecting for up to" in log.read_bytes(), 30,
                 what="the reconnect warning")
        time.sleep(2)  # into the second wait (2 s)
        assert proc.poll() is None, log.read_text()[-3000:]
        t0 = time.monotonic()
        code = stop_process(proc)
        took = time.monotonic() - t0
    text = log.read_text()
    assert code == 0, f"exit {code}:\n{text[-3000:]}"
    assert took < 3, took
    assert "stop requested while reconnecting" in text, text[-3000:]
    assert not [ln for ln in text.splitlines() if ln.startswith("firn:")], text[-3000:]
    pg_ctl(root, pg.port, "start")
    fe.sync()
    assert_equal_to_source(fe, pg)


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_restart_mid_cdc(own_cluster, firn_bin, tmp_path, mode):
    pg, root = own_cluster
    with pg.connect() as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 500) g")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg.dbname)
    fe.setup(pg, ["t"], interval_s=60, source={"reconnect_timeout_seconds": 0})
    log = tmp_path / "follow.log"
    proc = fe.start_follow(None, log, "--log", "info")
    with reaped(proc):
        wait_for(lambda: b"backfill committed" in log.read_bytes(), 60, what="the backfill")
        change(pg, pg.dbname, 1000)
        # The changes are read (buffered, not committed: the interval is 60 s).
        wait_for(lambda: buffered(tmp_path / "firn" / "stats.json") >= 30, 30,
                 what="buffered changes")
        took = pg_ctl_restart(root, pg.port, mode)
        code = proc.wait(timeout=60)
    text = log.read_text()
    errors = firn_errors(text)
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
    with reaped(proc):
        wait_for(lambda: b"backfill: " in log.read_bytes() or proc.poll() is not None, 60,
                 what="the backfill to start")
        wait_for(lambda: copy_waits(pg) or proc.poll() is not None, 60,
                 what="the COPY to reach row 2500")
        assert proc.poll() is None, "the backfill ended before the restart: make the table larger"
        pg_ctl_restart(root, pg.port, "fast")
        code = proc.wait(timeout=120)
    text = log.read_text()
    errors = firn_errors(text)
    assert code == 3 and len(errors) == 1, f"exit {code}:\n{text[-3000:]}"
    assert "run firn sync again" in errors[0], errors[0]
    with pg.connect() as conn:
        conn.execute("CREATE OR REPLACE FUNCTION held(i int) RETURNS bool LANGUAGE sql AS "
                     "'SELECT true'")
    fe.sync()
    change(pg, pg.dbname, 6000)
    fe.sync()
    assert_equal_to_source(fe, pg)


def terminate_firn(conn, walsender_only: bool):
    """Ends firn's server sessions as an administrator would (pg_terminate_backend)."""
    where = "backend_type = 'walsender'" if walsender_only else "TRUE"
    conn.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                 f"application_name = 'firn' AND {where}")


def recreate_slot(conn):
    """Drops the slot once its walsender is gone and creates it again, with a change made in
    between that the new slot does not have."""
    conn.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE "
                 "slot_name = 'firn_e2e' AND active_pid IS NOT NULL")
    wait_for(lambda: not conn.execute("SELECT active FROM pg_replication_slots WHERE "
                                      "slot_name = 'firn_e2e'").fetchone()[0], 10, interval=0.01,
             what="the walsender to exit")
    conn.execute("SELECT pg_drop_replication_slot('firn_e2e')")
    conn.execute("INSERT INTO t VALUES (-1, 'lost with the slot')")
    conn.execute("SELECT pg_create_logical_replication_slot('firn_e2e', 'pgoutput')")


@pytest.mark.parametrize("refusal", ["password", "publication", "slot"])
def test_follow_refusal_ends_at_once(own_cluster, firn_bin, tmp_path, refusal):
    """A connection lost and then refused for a reason no wait mends ends the run at once
    (exit 3) with the line of that refusal: the role's password changed, a table taken out of
    the publication (its changes since are not in the slot), the slot created again (the changes
    in between are lost)."""
    pg, root = own_cluster
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg.dbname)
    source = {}
    if refusal == "password":
        source = {"username": "firn_pw", "password": "firn_pw_secret", "host": "127.0.0.1"}
    proc, log = start_streaming(pg, fe, tmp_path, **source)
    with reaped(proc):
        change(pg, pg.dbname, 1000)
        with pg.connect(autocommit=True) as conn:
            if refusal == "password":
                conn.execute("ALTER ROLE firn_pw PASSWORD 'changed since'")
                terminate_firn(conn, walsender_only=False)
            elif refusal == "publication":
                conn.execute("ALTER PUBLICATION firn_e2e DROP TABLE t")
                terminate_firn(conn, walsender_only=True)
            else:
                recreate_slot(conn)
        line = exits_3_once_lost(proc, log, pg, within=10)  # the first attempt (after 1 s) ends it
    if refusal == "password":
        assert "password authentication failed" in line and "firn_pw" in line, line
        assert "firn_pw_secret" not in log.read_text()
    elif refusal == "publication":
        assert line.startswith('firn: table "public"."t" left publication "firn_e2e" after firn '
                               'streamed its changes'), line
    else:
        assert line.startswith('firn: replication slot "firn_e2e" on the server at '
                               f'{pg.host}:{pg.port} is at '), line
        assert "created again or advanced by another consumer" in line, line
        assert "pg_drop_replication_slot('firn_e2e')" in line, line
