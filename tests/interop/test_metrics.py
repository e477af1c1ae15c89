# SPDX-License-Identifier: Apache-2.0
"""`firn sync --follow --metrics-listen HOST:PORT` (issue 29): /metrics in the Prometheus text
format, /healthz and /readyz, scraped with urllib while a real PostgreSQL streams. The exposition
is parsed strictly (every line a HELP or TYPE comment or a sample of a declared family), the
counters are compared with the changes the test made and with the Iceberg tables (pyiceberg
snapshots), and a bad address is one clear error line with exit code 2 before anything exists.
`promtool check metrics` (Debian's, unpacked by scripts/setup.sh) must pass too."""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from firnutil import FirnEnv, stop_process, wait_for
from rest_fixtures import rest_catalog  # noqa: F401 (a fixture)
from test_engine_pg_restart import own_cluster, pg_ctl  # noqa: F401 (a fixture)

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\\\|\\"|\\n)*"'
SAMPLE = re.compile(rf"^({NAME})(?:\{{((?:{LABEL})(?:,{LABEL})*)?\}})? (\S+)$")
LABEL_ONE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"')
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy


def get(port: int, path: str, method: str = "GET") -> tuple[int, str, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with OPENER.open(req, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def alive(port: int) -> bool:
    try:
        return get(port, "/healthz")[0] == 200
    except OSError:
        return False


def parse(text: str) -> dict[str, dict]:
    """Families by name: {"type", "help", "samples": {(name, frozenset(labels)): value}}. Fails
    on any line that is not a HELP/TYPE comment or a sample of the family declared before it."""
    assert text.endswith("\n"), "the exposition must end with a newline"
    fams: dict[str, dict] = {}
    current = None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert re.fullmatch(NAME, name) and help_text, f"line {n}: {line!r}"
            assert name not in fams, f"line {n}: family {name} declared twice"
            fams[name] = {"help": help_text, "type": None, "samples": {}}
            current = name
            continue
        if line.startswith("# TYPE "):
            name, _, typ = line[7:].partition(" ")
            assert name == current and typ in TYPES, f"line {n}: {line!r}"
            assert fams[name]["type"] is None, f"line {n}: second TYPE of {name}"
            fams[name]["type"] = typ
            continue
        m = SAMPLE.match(line)
        assert m, f"line {n} is neither a comment nor a sample: {line!r}"
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        fam = fams.get(current)
        assert fam and fam["type"], f"line {n}: sample {name} outside a declared family"
        suffixes = ("_bucket", "_sum", "_count") if fam["type"] == "histogram" else ("",)
        assert any(name == current + s for s in suffixes), f"line {n}: {name} in {current}"
        if fam["type"] == "counter":
            assert name.endswith("_total"), f"line {n}: counter {name} without _total"
        else:
            assert not name.endswith("_total"), f"line {n}: {fam['type']} {name} with _total"
        pairs = LABEL_ONE.findall(labels)
        keys = [k for k, _ in pairs]
        assert len(set(keys)) == len(keys), f"line {n}: repeated label"
        v = float(value)  # also accepts +Inf, NaN
        key = (name, frozenset(pairs))
        assert key not in fam["samples"], f"line {n}: duplicate series {line!r}"
        fam["samples"][key] = v
        if fam["type"] == "counter":
            assert v >= 0 and not math.isnan(v), f"line {n}: counter below 0"
    for name, fam in fams.items():
        assert fam["type"], f"family {name} has no TYPE"
    return fams


def value(fams: dict, name: str, **labels) -> float | None:
    """The one sample of family `name` (or of a histogram's `name`) whose labels include
    `labels`; None when there is none."""
    fam = fams.get(name) or fams.get(re.sub(r"_(bucket|sum|count)$", "", name))
    if not fam:
        return None
    hits = [v for (n, ls), v in fam["samples"].items()
            if n == name and set(labels.items()) <= set(ls)]
    assert len(hits) <= 1, f"{name} {labels}: {len(hits)} series"
    return hits[0] if hits else None


def scrape(port: int) -> dict:
    status, ctype, body = get(port, "/metrics")
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4"), (status, ctype)
    return parse(body)


def scrape_when(port: int, name: str, want: float, **labels) -> dict | None:
    """The scrape when its `name` sample is `want`; None before (or before the server is up)."""
    try:
        f = scrape(port)
    except OSError:
        return None
    return f if value(f, name, **labels) == want else None


def check_histogram(fams: dict) -> None:
    fam = fams["firn_commit_duration_seconds"]
    assert fam["type"] == "histogram"
    buckets = sorted(((float(dict(ls)["le"]), v) for (n, ls), v in fam["samples"].items()
                      if n.endswith("_bucket")), key=lambda x: x[0])
    assert buckets[-1][0] == math.inf
    counts = [v for _, v in buckets]
    assert counts == sorted(counts), "histogram buckets must be cumulative"
    total = value(fams, "firn_commit_duration_seconds_count")
    assert counts[-1] == total
    commits = sum(v for (n, _), v in fams["firn_commits_total"]["samples"].items())
    assert total == commits, (total, commits)
    assert value(fams, "firn_commit_duration_seconds_sum") >= 0


def promtool_check(port: int) -> None:
    """promtool (Debian's, which scripts/setup.sh unpacks into the cache) checks the scrape."""
    cache = Path(os.environ.get("FIRN_CACHE", Path.home() / ".cache" / "firn")) / "bin"
    tool = shutil.which("promtool") or (str(cache / "promtool")
                                        if (cache / "promtool").is_file() else None)
    assert tool, f"promtool is missing: scripts/setup.sh unpacks it into {cache}"
    body = get(port, "/metrics")[2]
    r = subprocess.run([tool, "check", "metrics"], input=body, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_metrics_follow(pg, pg_db, firn_bin, tmp_path):
    port = free_port()
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE a (id int PRIMARY KEY, v text); "
                     "CREATE TABLE b (id int PRIMARY KEY, v text, n numeric(10, 2)); "
                     "INSERT INTO a SELECT g, 'x' FROM generate_series(1, 300) g; "
                     "INSERT INTO b SELECT g, 'y', g FROM generate_series(1, 6) g; "
                     "INSERT INTO b VALUES (7, 'y', 'NaN')")  # copied as null: replaced
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["a", "b"], interval_s=0.5)
        version = fe.run("version").stdout.split()[2]
        proc = fe.start_follow(None, None, "--metrics-listen", f"127.0.0.1:{port}")
        log = fe.root / "follow.log"
        try:
            wait_for(lambda: alive(port), 60, interval=0.2,
                     what="/healthz to answer")
            wait_for(lambda: b"replication connection open" in log.read_bytes(), 90,
                     what="firn to stream")
            a = {"stream": "public.a", "table": "e2e.a"}
            b = {"stream": "public.b", "table": "e2e.b"}

            def copied():
                f = scrape_when(port, "firn_source_connected", 1)
                return f if f and all(value(f, "firn_backfill_pending", **ls) == 0
                                      for ls in (a, b)) else None

            fams = wait_for(copied, 60, interval=0.2, what="the copy to finish")
            assert value(fams, "firn_build_info", version=version) == 1
            assert value(fams, "process_resident_memory_bytes") > 1 << 20
            assert value(fams, "process_open_fds") > 3  # stdio, the listening socket, ...
            start = value(fams, "firn_start_time_seconds")
            assert start - 60 < value(fams, "process_start_time_seconds") <= start + 0.01
            assert value(fams, "process_cpu_seconds_total") > 0
            assert value(fams, "firn_rows_written_total", **a) == 300
            assert value(fams, "firn_rows_written_total", **b) == 7
            assert value(fams, "firn_commits_total", result="ok", **a) >= 1
            assert value(fams, "firn_written_bytes_total", content="data", **a) > 0
            assert value(fams, "firn_tables_halted") == 0
            assert value(fams, "firn_values_replaced_total", kind="numeric_nan_as_null", **b) == 1
            status, _, body = get(port, "/readyz")
            assert (status, body) == (200, "ready\n"), body

            conn.execute("UPDATE a SET v = 'z' WHERE id <= 40")          # 40 updates
            conn.execute("INSERT INTO a SELECT g, 'n' FROM generate_series(301, 305) g")
            conn.execute("DELETE FROM b WHERE id = 1")                   # 1 delete
            conn.execute("INSERT INTO b VALUES (100, 'n', 'NaN')")       # 1 insert, replaced

            def streamed():
                f = scrape(port)
                want = [("firn_source_changes_total", dict(op="update", **a), 40),
                        ("firn_source_changes_total", dict(op="insert", **a), 5),
                        ("firn_source_changes_total", dict(op="delete", **a), 0),
                        ("firn_source_changes_total", dict(op="delete", **b), 1),
                        ("firn_source_changes_total", dict(op="insert", **b), 1),
                        ("firn_source_changes_total", dict(op="update", **b), 0),
                        ("firn_buffered_changes", a, 0), ("firn_buffered_changes", b, 0),
                        ("firn_rows_written_total", a, 345),
                        ("firn_rows_written_total", b, 8)]
                return f if all(value(f, n, **ls) == v for n, ls, v in want) else None

            fams = wait_for(streamed, 60, interval=0.3, what="metrics of the streamed changes")
            for ls in (a, b):
                assert value(fams, "firn_written_bytes_total", content="delete", **ls) > 0
                assert value(fams, "firn_commits_total", result="failed", **ls) == 0
                assert value(fams, "firn_commits_total", result="unknown", **ls) == 0
                assert value(fams, "firn_table_halted", **ls) == 0
                assert value(fams, "firn_values_replaced_total", kind="timestamps_clamped",
                             **ls) == 0
            assert value(fams, "firn_values_replaced_total", kind="numeric_nan_as_null", **a) == 0
            assert value(fams, "firn_values_replaced_total", kind="numeric_nan_as_null", **b) == 2
            assert value(fams, "firn_source_reconnects_total") == 0
            assert value(fams, "firn_ready") == 1
            check_histogram(fams)

            # Every snapshot of each table is a commit of this run that the counter saw.
            cat = fe.catalog()

            def commits_match():
                f = scrape(port)
                return f if all(
                    value(f, "firn_commits_total", result="ok", **ls) ==
                    len(cat.load_table(ls["table"]).snapshots()) for ls in (a, b)) else None

            fams = wait_for(commits_match, 30, interval=0.3, what="commits to match snapshots")
            for ls in (a, b):
                snaps = cat.load_table(ls["table"]).snapshots()
                newest = max(s.timestamp_ms for s in snaps) / 1000
                stamp = value(fams, "firn_last_commit_timestamp_seconds", **ls)
                assert abs(stamp - newest) < 5, (stamp, newest)
                assert value(fams, "firn_last_commit_age_seconds", **ls) >= 0

            # Caught up and idle: the slot's confirmed position reaches the WAL firn saw.
            def lag_small():
                f = scrape(port)
                lag = value(f, "firn_replication_lag_bytes")
                return f if lag is not None and lag < 64 * 1024 else None

            wait_for(lag_small, 60, interval=0.5, what="replication lag near zero")
            promtool_check(port)

            assert get(port, "/nope")[0] == 404
            assert get(port, "/metrics", method="POST")[0] == 405

            # A stream that stops (its source table renamed) makes the run not ready.
            conn.execute("ALTER TABLE b RENAME TO b2")
            conn.execute("INSERT INTO b2 VALUES (200, 'after')")
            wait_for(lambda: scrape_when(port, "firn_tables_halted", 1), 60, interval=0.3,
                     what="the renamed stream to stop")
            fams = scrape(port)
            assert value(fams, "firn_table_halted", **b) == 1
            assert value(fams, "firn_table_halted", **a) == 0
            assert value(fams, "firn_ready") == 0
            status, _, body = get(port, "/readyz")
            assert status == 503 and "stream public.b stopped" in body, (status, body)
            assert get(port, "/healthz")[0] == 200
            assert proc.poll() is None, log.read_text()[-3000:]
        finally:
            rc = stop_process(proc, signal.SIGTERM, timeout=60)
        assert rc == 3, log.read_text()[-3000:]  # a stream stopped: exit code 3
        with pytest.raises(OSError):
            get(port, "/healthz")  # the server ends with the run


def test_metrics_bad_address(pg, pg_db, firn_bin, tmp_path):
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    busy = held.getsockname()[1]
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.setup(pg, ["a"], source={"slot": pg_db, "publication": pg_db})
    cases = [("localhost", "expected HOST:PORT"),
             ("127.0.0.1:65536", "the port must be a number 0-65535"),
             ("127.0.0.1:http", "the port must be a number 0-65535"),
             ("::1:9187", "an IPv6 address goes in brackets"),
             (f"127.0.0.1:{busy}", "cannot listen there: Address already in use"),
             ("192.0.2.1:9187", "cannot listen there: Cannot assign requested address")]
    try:
        for addr, why in cases:
            r = subprocess.run([str(firn_bin), "sync", *fe.sync_args, "--follow",
                                "--metrics-listen", addr], capture_output=True, text=True,
                               env=fe.env(), timeout=60)
            errors = [ln for ln in r.stderr.splitlines() if "level=error" in ln or
                      ln.startswith("firn:")]
            assert r.returncode == 2, (addr, r.returncode, r.stderr)
            assert len(errors) == 1 and why in errors[0] and "--metrics-listen" in errors[0], \
                (addr, r.stderr)
            assert addr.replace('"', "") in errors[0], errors[0]
    finally:
        held.close()
    # Nothing was created: no catalog, no state lock, no slot, no publication.
    assert not fe.catalog_db.exists()
    assert not list(fe.root.glob("*.lock"))
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s",
                            (pg_db,)).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM pg_publication").fetchone()[0] == 0


def test_metrics_listen_config_key(pg, pg_db, firn_bin, tmp_path):
    """destination.json's metrics_listen: checked at load (exit 2 naming the key), served when
    --metrics-listen is not given."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a VALUES (1, 'x')")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.setup(pg, ["a"], destination={"metrics_listen": "9187"})
    r = fe.run("sync", *fe.sync_args, check=False)
    assert r.returncode == 2, r.stderr
    assert "metrics_listen" in r.stderr and "expected HOST:PORT" in r.stderr, r.stderr
    port = free_port()
    fe.write_destination(0.5, metrics_listen=f"127.0.0.1:{port}")
    proc = fe.start_follow()
    try:
        fams = wait_for(lambda: scrape_when(port, "firn_rows_written_total", 1, stream="public.a",
                                            table="e2e.a"), 90, interval=0.3,
                        what="the copy's metrics on metrics_listen")
        assert value(fams, "firn_commits_total", result="ok", stream="public.a",
                     table="e2e.a") == 1
        assert get(port, "/healthz")[1:] == ("text/plain; charset=utf-8", "ok\n")
    finally:
        rc = stop_process(proc, signal.SIGTERM, timeout=60)
    assert rc == 0, (fe.root / "follow.log").read_text()[-3000:]


def test_metrics_reconnect(own_cluster, firn_bin, tmp_path):
    """The source down under --follow: not ready (not reading the source) while firn waits to
    reconnect, alive all along; back up: one reconnect counted, ready again, changes counted."""
    pg, root = own_cluster
    port = free_port()
    with pg.connect() as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text); "
                     "INSERT INTO t SELECT g, 'x' FROM generate_series(1, 50) g")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg.dbname)
    fe.setup(pg, ["t"], interval_s=0.5)
    proc = fe.start_follow(None, None, "--metrics-listen", f"127.0.0.1:{port}")
    log = fe.root / "follow.log"
    t = {"stream": "public.t", "table": "e2e.t"}
    try:
        wait_for(lambda: scrape_when(port, "firn_backfill_pending", 0, **t), 90, interval=0.2,
                 what="the copy to finish")
        wait_for(lambda: scrape_when(port, "firn_phase", 1, phase="cdc"), 30, interval=0.2,
                 what="firn to stream")
        wait_for(lambda: get(port, "/readyz")[0] == 200, 30, interval=0.2, what="ready")
        assert value(scrape(port), "firn_rows_written_total", **t) == 50
        pg_ctl(root, pg.port, "-m", "fast", "stop")
        fams = wait_for(lambda: scrape_when(port, "firn_phase", 1, phase="reconnecting"), 60,
                        interval=0.2, what="the lost source to show")
        assert value(fams, "firn_source_connected") == 0
        assert value(fams, "firn_ready") == 0
        assert value(fams, "firn_source_reconnects_total") == 0
        status, _, body = get(port, "/readyz")
        assert status == 503 and "not reading the source (phase reconnecting)" in body, body
        assert alive(port)
        pg_ctl(root, pg.port, "start")
        wait_for(lambda: scrape_when(port, "firn_source_reconnects_total", 1), 90, interval=0.3,
                 what="the reconnect to be counted")
        wait_for(lambda: get(port, "/readyz")[0] == 200, 30, interval=0.2, what="ready again")
        with pg.connect() as conn:
            conn.execute("INSERT INTO t SELECT g, 'y' FROM generate_series(51, 60) g")
        fams = wait_for(lambda: scrape_when(port, "firn_rows_written_total", 60, **t), 60,
                        interval=0.3, what="the changes after the reconnect")
        assert value(fams, "firn_source_changes_total", op="insert", **t) == 10
        assert value(fams, "firn_source_connected") == 1
        assert proc.poll() is None, log.read_text()[-3000:]
    finally:
        rc = stop_process(proc, signal.SIGTERM, timeout=60)
    assert rc == 0, log.read_text()[-3000:]


GATE = """
CREATE FUNCTION gate(id int) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
    IF id = 31 THEN  -- waits while the test holds the lock
        PERFORM pg_advisory_lock_shared(4242);
        PERFORM pg_advisory_unlock_shared(4242);
    END IF;
    RETURN true;
END $$;
"""


def test_metrics_during_backfill(pg, pg_db, firn_bin, tmp_path):
    """While the copy runs (held at row 31 by an advisory lock the test holds): reading the
    source, ready, the copy pending; released: the copy done and its rows counted."""
    port = free_port()
    with pg.connect(dbname=pg_db, autocommit=True) as conn, \
            pg.connect(dbname=pg_db, autocommit=True) as holder:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text); "
                     "INSERT INTO t SELECT g, 'x' FROM generate_series(1, 60) g" + ";" + GATE)
        holder.execute("SELECT pg_advisory_lock(4242)")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["t"], interval_s=0.5, source={"parallelism": 1, "batch_rows": 4})
        fe.write_streams([("t", {"filter": "gate(id)"})])
        proc = fe.start_follow(None, None, "--metrics-listen", f"127.0.0.1:{port}")
        log = fe.root / "follow.log"
        t = {"stream": "public.t", "table": "e2e.t"}
        try:
            wait_for(lambda: conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 "
                "AND NOT granted").fetchone()[0] == 1 or proc.poll() is not None, 90,
                interval=0.2, what="the copy to wait at row 31")
            assert proc.poll() is None, log.read_text()[-3000:]
            fams = wait_for(lambda: scrape_when(port, "firn_backfill_pending", 1, **t), 30,
                            interval=0.2, what="the copy to show")
            assert value(fams, "firn_source_connected") == 1
            assert value(fams, "firn_phase", phase="backfill") == 1
            assert value(fams, "firn_phase", phase="cdc") == 0
            assert value(fams, "firn_commits_total", result="ok", **t) == 0
            assert get(port, "/readyz")[:3:2] == (200, "ready\n")
            holder.execute("SELECT pg_advisory_unlock(4242)")
            fams = wait_for(lambda: scrape_when(port, "firn_backfill_pending", 0, **t), 60,
                            interval=0.2, what="the copy to finish")
            assert value(fams, "firn_rows_written_total", **t) == 60
            assert value(fams, "firn_commits_total", result="ok", **t) >= 1
        finally:
            rc = stop_process(proc, signal.SIGTERM, timeout=60)
        assert rc == 0, log.read_text()[-3000:]


def test_metrics_commit_failing(firn_job, rest_catalog, tmp_path):
    """The REST catalog (behind a fault-injecting proxy) answers 503 to every commit of t1 while
    the test says so: firn retries, the retries are counted and the run is not ready, naming
    the table; once commits pass again the commit lands, counted ok, and the run is ready."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "harness"))
    from flaky_proxy import FlakyProxy

    loc = rest_catalog
    commit_re = re.compile(r"^/v1/namespaces/[^/]+/tables/t1$")
    failing = threading.Event()

    def rule(method, path):
        return "503" if failing.is_set() and method == "POST" and commit_re.match(path) else None

    proxy = FlakyProxy(loc.uri, rule=rule).start()
    port = free_port()
    ns = "metrics_" + uuid.uuid4().hex[:6]
    job = firn_job([{"stream_name": "t1"}], catalog=loc.firn_catalog(uri=proxy.url),
                   catalog_loc=loc, namespace=ns, commit_interval_s=1,
                   setup=["CREATE TABLE t1 (id bigint PRIMARY KEY, v text)",
                          "INSERT INTO t1 SELECT g, 'a' || g FROM generate_series(1, 20) g"])
    log_path = job.workdir / "follow.log"
    cmd = job.sync_command() + ["--follow", "--metrics-listen", f"127.0.0.1:{port}"]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=log)
    t = {"stream": "public.t1", "table": f"{ns}.t1"}
    try:
        wait_for(lambda: scrape_when(port, "firn_phase", 1, phase="cdc"), 120, interval=0.2,
                 what="firn to stream")
        fams = wait_for(lambda: scrape_when(port, "firn_ready", 1), 30, interval=0.2,
                        what="ready")
        ok = value(fams, "firn_commits_total", result="ok", **t)
        assert ok >= 1 and value(fams, "firn_commit_retries_total", **t) == 0
        failing.set()
        job.sql("INSERT INTO t1 VALUES (1000, 'x')")
        # under --follow firn retries until the catalog accepts commits: the failed attempt shows.
        fams = wait_for(lambda: scrape_when(port, "firn_ready", 0), 30, interval=0.05,
                        what="the failing commit to show")
        failing.clear()
        assert value(fams, "firn_commit_retries_total", **t) >= 1
        status, _, body = get(port, "/readyz")
        assert status == 503 and f"table {ns}.t1: the last commit attempt failed" in body, body
        fams = wait_for(lambda: scrape_when(port, "firn_commits_total", ok + 1, result="ok", **t),
                        60, interval=0.2, what="the commit to land")
        assert value(fams, "firn_commits_total", result="failed", **t) == 0
        assert value(fams, "firn_ready") == 1, log_path.read_text()[-3000:]
        assert get(port, "/readyz")[0] == 200
        assert proc.poll() is None, log_path.read_text()[-3000:]
    finally:
        failing.clear()
        rc = stop_process(proc, signal.SIGTERM, timeout=60)
        proxy.stop()
    assert rc == 0, log_path.read_text()[-3000:]
