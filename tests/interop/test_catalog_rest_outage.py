# SPDX-License-Identifier: Apache-2.0
"""A REST catalog that refuses commits for a while (an outage), through the fault-injecting proxy
(tests/harness/flaky_proxy.py) in front of the REST catalog fixture:

- `firn sync --follow` rides out 24 s of refused commits (HTTP 503, then 429, each with
  Retry-After: 3; the old limit gave up after 2.5 s) with changes arriving meanwhile: the
  attempts keep to Retry-After, the replication connection stays the same one although the
  server's wal_sender_timeout is 5 s, one warning says when the outage starts and one when it
  ends, stats.json and /metrics show it while it lasts and after, and the table ends equal to PostgreSQL's
  by value (pyiceberg) with no commit applied twice;
- a catch-up run whose commits the catalog keeps refusing gives up after
  commit.retry_timeout_seconds with one clear line and exit 4 (destination), not 3 (the CDC
  phase it failed in), acknowledging nothing it did not commit; the next run, with the catalog
  back, commits every change exactly once.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from firnsync import snapshot_chain, summary_of
from firnutil import stop_process, wait_for
from rest_fixtures import *  # noqa: F401,F403
from sparkutil import canon_rows
from test_metrics import free_port, scrape, scrape_when, value

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "harness"))
from flaky_proxy import FlakyProxy  # noqa: E402

COLS = ["id", "v", "n"]
SETUP = [
    "CREATE TABLE t1 (id bigint PRIMARY KEY, v text, n int)",
    "INSERT INTO t1 SELECT g, 'a' || g, g FROM generate_series(1, 200) g",
]
COMMIT_RE = re.compile(r"^/v1/namespaces/[^/]+/tables/t1$")


def firn_rows(loc, table):
    arrow = loc.pyiceberg().load_table(table).scan(selected_fields=tuple(COLS)).to_arrow()
    return canon_rows(arrow.select(COLS).to_pylist())


def firn_commit_ids(loc, table) -> list[str]:
    tbl = loc.pyiceberg().load_table(table)
    return [summary_of(s)["firn.commit-id"] for s in snapshot_chain(tbl)
            if "firn.commit-id" in summary_of(s)]


def test_catch_up_gives_up_with_exit_4(firn_job, rest_catalog):
    loc = rest_catalog
    state = {"refuse": False}

    def rule(method, path):
        if state["refuse"] and method == "POST" and COMMIT_RE.match(path):
            return "503"
        return None

    proxy = FlakyProxy(loc.uri, rule=rule).start()
    try:
        ns = "outage_" + uuid.uuid4().hex[:6]
        job = firn_job([{"stream_name": "t1"}], setup=SETUP,
                       catalog=loc.firn_catalog(uri=proxy.url), catalog_loc=loc, namespace=ns)
        job.destination_extra = {"commit": {"interval_seconds": 600,
                                            "retry_timeout_seconds": 3,
                                            "retry_max_wait_seconds": 0.5}}
        job.sync()  # the copy, committed
        lsn0 = job.state()["global"]["state"]["lsn"]
        job.sql("UPDATE t1 SET v = 'changed' WHERE id <= 20", "DELETE FROM t1 WHERE id > 190")
        state["refuse"] = True
        start = len(proxy.log)
        proc = job.sync(check=False)
        refused = [s for m, p, s in proxy.log[start:] if m == "POST" and COMMIT_RE.match(p)]
        state["refuse"] = False
        assert proc.returncode == 4, proc.stderr[-3000:]
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("firn: ")]
        assert len(errors) == 1, proc.stderr[-3000:]
        assert f'could not commit to table "{ns}.t1"' in errors[0], errors
        assert "HTTP 503" in errors[0], errors
        assert "(commit.retry_timeout_seconds)" in errors[0], errors
        assert "run firn sync again once it accepts commits" in errors[0], errors
        # 3 s of attempts at most 0.5 s apart
        assert len(refused) >= 5 and set(refused) == {503}, refused
        log = proc.stdout + proc.stderr
        assert log.count("catalog outage: the commit failed") == 1, log[-3000:]
        assert log.count("catalog outage: gave up after") == 1, log[-3000:]
        stats = json.loads((job.workdir / "stats.json").read_text())
        st = stats["streams"][0]
        assert stats["phase"] == "failed" and st["catalog_outages"] == 1, stats
        assert st["catalog_outage_seconds"] >= 3 and "catalog_outage_since" not in st, st
        assert "HTTP 503" in st["last_catalog_error"], st
        # nothing was acknowledged past what the table holds
        assert job.state()["global"]["state"]["lsn"] == lsn0
        assert len(firn_commit_ids(loc, job.table("t1"))) == 1

        job.sync()  # the catalog is back: the changes are read again from the slot
    finally:
        proxy.stop()
    assert firn_rows(loc, job.table("t1")) == job.source_rows("SELECT id, v, n FROM t1")
    ids = firn_commit_ids(loc, job.table("t1"))
    assert len(ids) == 2 and len(set(ids)) == 2, ids


def active_pid(job) -> int | None:
    with job.pg.connect() as conn:
        row = conn.execute("SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s",
                           (job.slot,)).fetchone()
    return row[0] if row else None


def stream_stats(job) -> dict:
    try:
        return json.loads((job.workdir / "stats.json").read_text())["streams"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return {}


def test_follow_rides_out_an_outage(firn_job, rest_catalog):
    loc = rest_catalog
    outage = {"armed": False, "start": None, "seconds": 24.0}

    def rule(method, path):
        if not (outage["armed"] and method == "POST" and COMMIT_RE.match(path)):
            return None
        now = time.monotonic()
        if outage["start"] is None:
            outage["start"] = now
        left = outage["seconds"] - (now - outage["start"])
        if left <= 0:
            return None
        return "503-retry-after=3" if left > outage["seconds"] / 2 else "429-retry-after=3"

    proxy = FlakyProxy(loc.uri, rule=rule).start()
    proc = None
    try:
        ns = "follow_" + uuid.uuid4().hex[:6]
        job = firn_job([{"stream_name": "t1"}], setup=SETUP,
                       catalog=loc.firn_catalog(uri=proxy.url), catalog_loc=loc, namespace=ns)
        # backoff capped below Retry-After: waits of 3 s can only come from the header
        job.destination_extra = {"commit": {"interval_seconds": 1, "retry_max_wait_seconds": 1},
                                 "compact_small_files": 0, "compact_delete_percent": 0}
        job.sql(f'ALTER DATABASE "{job.dbname}" SET wal_sender_timeout = \'5s\'')
        job.sync()
        log_path = job.workdir / "follow.log"
        port = free_port()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(job.sync_command() + ["--follow", "--metrics-listen",
                                                          f"127.0.0.1:{port}"],
                                    stdout=log, stderr=subprocess.STDOUT)
        table = job.table("t1")
        labels = {"stream": "public.t1", "table": table}
        want = lambda: job.source_rows("SELECT id, v, n FROM t1")  # noqa: E731
        job.sql("UPDATE t1 SET v = 'before' WHERE id = 1")
        wait_for(lambda: firn_rows(loc, table) == want(), 60, interval=0.5, what="first change")
        walsender = active_pid(job)
        assert walsender, "no walsender streams to firn"

        outage["armed"] = True
        job.sql("UPDATE t1 SET v = 'during', n = -n WHERE id <= 30",
                "DELETE FROM t1 WHERE id BETWEEN 100 AND 120")
        wait_for(lambda: outage["start"] is not None, 30, what="the first refused commit")
        # more changes while the catalog refuses: read, buffered, committed once it is back
        for i in range(3):
            job.sql(f"INSERT INTO t1 VALUES ({1000 + i}, 'late', {i})",
                    f"UPDATE t1 SET n = n + 100 WHERE id = {40 + i}")
            time.sleep(1)
        live = wait_for(lambda: stream_stats(job).get("catalog_outage_since"), 30,
                        interval=0.5, what="stats.json to show the outage")
        assert live and proc.poll() is None
        fams = wait_for(lambda: scrape_when(port, "firn_catalog_outage", 1, **labels), 30,
                        interval=0.5, what="the outage in /metrics")
        assert value(fams, "firn_catalog_outages_total", **labels) == 1
        wait_for(lambda: firn_rows(loc, table) == want(), 120, interval=0.5,
                 what="the changes after the outage")
        assert proc.poll() is None, log_path.read_text()[-3000:]
        assert active_pid(job) == walsender  # the replication connection lived through it
        wait_for(lambda: "catalog_outage_since" not in stream_stats(job)
                 and stream_stats(job).get("catalog_outages") == 1, 30, interval=0.5,
                 what="stats.json to show the outage over")
        fams = scrape(port)
        assert value(fams, "firn_catalog_outage", **labels) == 0
        assert value(fams, "firn_catalog_outages_total", **labels) == 1
        assert value(fams, "firn_catalog_outage_seconds_total", **labels) >= outage["seconds"] - 3
        assert stop_process(proc, signal.SIGTERM) == 0, log_path.read_text()[-3000:]
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        proxy.stop()

    log = log_path.read_text()
    starts = [ln for ln in log.splitlines() if "catalog outage: the commit failed" in ln]
    ends = [ln for ln in log.splitlines() if "catalog outage over after" in ln]
    assert len(starts) == 1 and len(ends) == 1, log[-4000:]
    assert f'table \\"{ns}.t1\\": catalog outage' in starts[0], starts
    assert "HTTP 503" in starts[0] and "until it accepts them" in starts[0], starts
    assert "retrying" not in log.replace(starts[0], ""), log[-4000:]  # no line per attempt
    assert log.count("replication connection open") == 1 and "reconnect" not in log, log[-4000:]

    refused = [(at, s) for at, m, p, s in proxy.timed if m == "POST" and COMMIT_RE.match(p)
               and s in (503, 429)]
    assert {s for _, s in refused} == {503, 429}, refused
    gaps = [b[0] - a[0] for a, b in zip(refused, refused[1:])]
    assert len(gaps) >= 4 and min(gaps) >= 2.9, gaps  # Retry-After: 3, backoff cap 1 s

    st = stream_stats(job)
    assert st["catalog_outages"] == 1, st
    assert st["catalog_outage_seconds"] >= outage["seconds"] - 3, st
    assert "HTTP 429" in st["last_catalog_error"], st

    assert firn_rows(loc, table) == job.source_rows("SELECT id, v, n FROM t1")
    ids = firn_commit_ids(loc, table)
    assert len(ids) == len(set(ids)), ids  # no commit applied twice


def test_stop_during_an_outage(firn_job, rest_catalog):
    """SIGTERM while a --follow commit waits for a catalog that refuses every commit: a clean stop
    (exit 0) without waiting for the catalog, nothing acknowledged past what is committed; the
    next run, with the catalog back, commits the changes once."""
    loc = rest_catalog
    state = {"refuse": False, "refused": 0}

    def rule(method, path):
        if state["refuse"] and method == "POST" and COMMIT_RE.match(path):
            state["refused"] += 1
            return "drop"  # the connection ends without a reply: an unknown outcome each time
        return None

    proxy = FlakyProxy(loc.uri, rule=rule).start()
    proc = None
    try:
        ns = "stop_" + uuid.uuid4().hex[:6]
        job = firn_job([{"stream_name": "t1"}], setup=SETUP,
                       catalog=loc.firn_catalog(uri=proxy.url), catalog_loc=loc, namespace=ns)
        job.destination_extra = {"commit": {"interval_seconds": 1, "retry_max_wait_seconds": 1}}
        job.sync()
        lsn0 = job.state()["global"]["state"]["lsn"]
        log_path = job.workdir / "follow.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(job.sync_command() + ["--follow"], stdout=log,
                                    stderr=subprocess.STDOUT)
        state["refuse"] = True
        job.sql("UPDATE t1 SET v = 'unseen' WHERE id <= 10")
        wait_for(lambda: state["refused"] >= 3, 60, what="three refused commits")
        assert proc.poll() is None, log_path.read_text()[-3000:]
        assert stop_process(proc, signal.SIGTERM, timeout=20) == 0, log_path.read_text()[-3000:]
        log = log_path.read_text()
        assert log.count("catalog outage: the commit failed") == 1, log[-3000:]
        assert job.state()["global"]["state"]["lsn"] == lsn0  # nothing acknowledged
        assert len(firn_commit_ids(loc, job.table("t1"))) == 1
        state["refuse"] = False
        job.sync()
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        proxy.stop()
    assert firn_rows(loc, job.table("t1")) == job.source_rows("SELECT id, v, n FROM t1")
    ids = firn_commit_ids(loc, job.table("t1"))
    assert len(ids) == 2 and len(set(ids)) == 2, ids
