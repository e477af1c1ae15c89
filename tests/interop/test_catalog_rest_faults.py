# SPDX-License-Identifier: Apache-2.0
"""`firn sync` through the REST catalog fixture under faults:

- a 409 storm: two firn processes on two tables of one namespace, each sync round racing a
  pyiceberg appender committing to the first table in a loop, and losing at least once a round
  (a proxy lets pyiceberg commit just before firn's first commit reaches the server); every
  firn commit lands exactly once on top of pyiceberg's snapshots (reload, manifest list rebuilt
  on the new parent);
- a fault-injecting proxy (tests/harness/flaky_proxy.py) in front of the catalog: 503s on loads
  (retried) and on a commit (an unknown outcome: reload, not there, commit again), and a commit
  the server applies but whose reply is lost (unknown outcome: reload, found by firn.commit-id).
  Exactly one snapshot lands per flush, rows equal PostgreSQL's, every referenced file exists.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pyarrow as pa

from firnsync import check_summary_against_manifests, snapshot_chain, summary_of
from rest_fixtures import *  # noqa: F401,F403
from sparkutil import canon_rows, uri_to_path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "harness"))
from flaky_proxy import FlakyProxy  # noqa: E402

COLS = ["id", "v", "n"]
SETUP = [
    "CREATE TABLE t1 (id bigint PRIMARY KEY, v text, n int)",
    "CREATE TABLE t2 (id bigint PRIMARY KEY, v text, n int)",
    "INSERT INTO t1 SELECT g, 'a' || g, g FROM generate_series(1, 300) g",
    "INSERT INTO t2 SELECT g, 'b' || g, g FROM generate_series(1, 300) g",
]


def round_changes(r: int) -> list[str]:
    return [f"UPDATE t1 SET v = 'r{r}', n = n + 1 WHERE id % 7 = {r}",
            f"DELETE FROM t1 WHERE id = {10 + r}",
            f"INSERT INTO t1 VALUES ({1000 + r}, 'new{r}', {r})",
            f"UPDATE t2 SET v = 'r{r}' WHERE id % 5 = {r}",
            f"DELETE FROM t2 WHERE id = {20 + r}"]


def firn_rows(loc, table):
    arrow = loc.pyiceberg().load_table(table).scan(selected_fields=tuple(COLS)).to_arrow()
    return canon_rows(arrow.select(COLS).to_pylist())


def firn_snapshots(tbl) -> list[dict]:
    return [summary_of(s) for s in snapshot_chain(tbl) if "firn.commit-id" in summary_of(s)]


class Appender(threading.Thread):
    """Appends one row at a time to a table through pyiceberg's RestCatalog until stopped,
    reloading and retrying when it loses a race itself. append_one() also serves the proxy rule
    that commits just before firn does."""

    def __init__(self, loc, table: str):
        super().__init__(daemon=True)
        self.loc, self.table = loc, table
        self.stop_flag = threading.Event()
        self.rows: list[tuple] = []
        self.conflicts = 0
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._next = 0

    def append_one(self, cat) -> None:
        from pyiceberg.exceptions import CommitFailedException

        with self._lock:
            k = self._next
            self._next += 1
        while True:
            tbl = cat.load_table(self.table)
            schema = tbl.schema().as_arrow()
            data = {f.name: [None] for f in schema}
            data.update(id=[5_000_000 + k], v=["pyiceberg"], n=[k])
            try:
                tbl.append(pa.Table.from_pydict(data, schema=schema))
            except CommitFailedException:
                with self._lock:
                    self.conflicts += 1
                continue
            with self._lock:
                self.rows.append((5_000_000 + k, "pyiceberg", k))
            return

    def run(self) -> None:
        try:
            cat = self.loc.pyiceberg()
            while not self.stop_flag.is_set():
                self.append_one(cat)
                # Pauses longer than firn's reload-to-commit window: a writer committing faster
                # than another can reload and commit starves it under any optimistic protocol
                # (firn gives up after its retry budget), which is not what this test is about.
                time.sleep(0.4)
        except BaseException as e:  # surfaced by the test
            self.error = e


def run_parallel(jobs) -> None:
    procs = [subprocess.Popen(j.sync_command(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for j in jobs]
    for j, p in zip(jobs, procs):
        out, _ = p.communicate(timeout=240)
        j.runs += 1
        (j.workdir / f"sync-{j.runs}.log").write_text(out)
        assert p.returncode == 0, f"firn sync of {j.streams} exited {p.returncode}:\n{out[-3000:]}"


def test_conflict_storm(firn_job, rest_catalog):
    loc = rest_catalog
    ns = "storm_" + uuid.uuid4().hex[:6]
    commit_re = re.compile(r"^/v1/namespaces/[^/]+/tables/t1$")
    state = {"round": 0, "forced": 0}
    appender_box: list[Appender] = []

    def rule(method, path):
        # The first commit firn sends in each round reaches the server just after a pyiceberg
        # append: firn loses that race every round (409, reload, deletes computed again).
        if method == "POST" and commit_re.match(path) and state["forced"] < state["round"]:
            state["forced"] += 1
            appender_box[0].append_one(loc.pyiceberg())
        return None

    proxy = FlakyProxy(loc.uri, rule=rule).start()
    a = firn_job([{"stream_name": "t1"}], setup=SETUP, catalog=loc.firn_catalog(uri=proxy.url),
                 catalog_loc=loc, namespace=ns)
    b = firn_job([{"stream_name": "t2"}], database=a.dbname, slot_suffix="_b",
                 catalog=loc.firn_catalog(), catalog_loc=loc, namespace=ns)
    for job in (a, b):  # firn's own commits only: no compaction snapshots (counted below)
        job.destination_extra = {"compact_small_files": 0, "compact_delete_percent": 0}
    try:
        run_parallel([a, b])  # both create the namespace at once, then their tables
        appender = Appender(loc, a.table("t1"))
        appender_box.append(appender)
        appender.start()
        try:
            for r in range(1, 4):
                a.sql(*round_changes(r))
                state["round"] = r
                run_parallel([a, b])
        finally:
            appender.stop_flag.set()
            appender.join(timeout=60)
    finally:
        proxy.stop()
    assert state["forced"] == 3, proxy.log
    assert appender.error is None, repr(appender.error)
    assert len(appender.rows) >= 3, appender.rows

    retries = sum(len(re.findall(r"commit attempt \d+ failed", (a.workdir / f"sync-{i}.log")
                                 .read_text())) for i in range(2, a.runs + 1))
    assert retries >= 3, "firn did not lose the race of every round: the test did not test"

    want1 = canon_rows(a.source_raw("SELECT id, v, n FROM t1") + appender.rows)
    assert firn_rows(loc, a.table("t1")) == want1
    assert firn_rows(loc, b.table("t2")) == a.source_rows("SELECT id, v, n FROM t2")
    for job, name in ((a, "t1"), (b, "t2")):
        tbl = loc.pyiceberg().load_table(job.table(name))
        ours = firn_snapshots(tbl)
        assert len(ours) == 4, ours  # backfill + three rounds, each exactly once
        assert len({s["firn.commit-id"] for s in ours}) == 4
        check_summary_against_manifests(tbl, tbl.current_snapshot())
    tbl = loc.pyiceberg().load_table(a.table("t1"))
    assert len(snapshot_chain(tbl)) == 4 + len(appender.rows)


def referenced_files(tbl) -> list[str]:
    """Every file the table's snapshots reference: manifest lists, manifests, data and delete
    files (read by pyiceberg)."""
    out = []
    for snap in tbl.snapshots():
        out.append(snap.manifest_list)
        for m in snap.manifests(tbl.io):
            out.append(m.manifest_path)
    out += [f["file_path"] for f in tbl.inspect.all_files().to_pylist()]
    return out


def test_commit_faults_through_proxy(firn_job, rest_catalog):
    loc = rest_catalog
    commit_re = re.compile(r"^/v1/namespaces/[^/]+/tables/t1$")
    state = {"commits": 0, "gets": 0}
    plan = {1: "503", 3: "lost-reply"}  # commit attempt number -> fault

    def rule(method, path):
        if method == "POST" and commit_re.match(path):
            state["commits"] += 1
            return plan.get(state["commits"])
        if method == "GET" and "/tables/t1" in path:
            state["gets"] += 1
            return "503" if state["gets"] % 3 == 0 else None
        return None

    proxy = FlakyProxy(loc.uri, rule=rule).start()
    try:
        ns = "fault_" + uuid.uuid4().hex[:6]
        catalog = loc.firn_catalog(uri=proxy.url)
        job = firn_job([{"stream_name": "t1"}], setup=SETUP, catalog=catalog,
                       catalog_loc=loc, namespace=ns)
        job.sync()  # backfill: its first commit attempt gets a 503
        job.sql(*round_changes(1))
        job.sync()  # CDC: the server applies the commit, the reply is lost
    finally:
        proxy.stop()
    # 1: 503 (unknown outcome, not there: committed again as 2); 3: applied, reply lost (found
    # by its commit id on reload: no fourth attempt)
    assert state["commits"] == 3, proxy.log
    posts = [s for m, p, s in proxy.log if m == "POST" and commit_re.match(p)]
    assert posts == [503, 200, "lost-reply"], proxy.log
    assert any(m == "GET" and s == 503 for m, _p, s in proxy.log), proxy.log
    log1 = (job.workdir / "sync-1.log").read_text()
    assert log1.count("catalog outage: the commit failed") == 1, log1[-3000:]
    assert "catalog outage over after" in log1 and "landed after 1 failed attempt" in log1, \
        log1[-3000:]
    log2 = (job.workdir / "sync-2.log").read_text()  # the lost reply: found at once, no outage
    assert "catalog outage" not in log2, log2[-3000:]

    tbl = loc.pyiceberg().load_table(job.table("t1"))
    ours = firn_snapshots(tbl)
    assert len(ours) == 2 and len(snapshot_chain(tbl)) == 2, ours  # one per flush
    assert firn_rows(loc, job.table("t1")) == job.source_rows("SELECT id, v, n FROM t1")
    for snap in snapshot_chain(tbl):
        check_summary_against_manifests(tbl, snap)
    missing = [f for f in referenced_files(tbl) if not Path(uri_to_path(f)).exists()]
    assert not missing, missing


def test_metadata_commit_retried_after_503_and_lost_reply(firn_job, rest_catalog):
    """A commit that only sets table properties (here the copy-done marker of an empty table,
    which has no snapshot to carry it) is retried like a data commit: a 503, then a reply lost
    after the server applied it; the reload finds the marker, so no third request is made and the
    run succeeds (it used to fail with exit 4 at the first 503)."""
    loc = rest_catalog
    commit_re = re.compile(r"^/v1/namespaces/[^/]+/tables/t0$")
    state = {"commits": 0}
    plan = {1: "503", 2: "lost-reply"}

    def rule(method, path):
        if method == "POST" and commit_re.match(path):
            state["commits"] += 1
            return plan.get(state["commits"])
        return None

    proxy = FlakyProxy(loc.uri, rule=rule).start()
    try:
        ns = "meta_" + uuid.uuid4().hex[:6]
        catalog = loc.firn_catalog(uri=proxy.url)
        job = firn_job([{"stream_name": "t0"}],
                       setup=["CREATE TABLE t0 (id bigint PRIMARY KEY, v text)"],
                       catalog=catalog, catalog_loc=loc, namespace=ns)
        job.sync()
    finally:
        proxy.stop()
    posts = [s for m, p, s in proxy.log if m == "POST" and commit_re.match(p)]
    assert posts == [503, "lost-reply"], proxy.log
    log1 = (job.workdir / "sync-1.log").read_text()
    assert log1.count("catalog outage: the commit failed") == 1, log1[-3000:]
    assert "landed after 2 failed attempts" in log1, log1[-3000:]
    tbl = loc.pyiceberg().load_table(job.table("t0"))
    assert tbl.properties.get("firn.backfill") == "done", tbl.properties
    assert tbl.scan().to_arrow().num_rows == 0


def test_schema_commit_retried_after_503_and_lost_reply(firn_job, rest_catalog):
    """The schema change of a run (a column added at the source between runs) is committed with
    the retries of the other commits: a 503 (reload, still needed: sent again), then a reply lost
    after the server applied it (reload: the column is there, nothing sent again). The table
    ends with one schema per change, the column once, and rows equal to the source's (it used to
    fail with exit 4 at the first 503)."""
    loc = rest_catalog
    commit_re = re.compile(r"^/v1/namespaces/[^/]+/tables/t1$")
    state = {"armed": False, "commits": 0}
    plan = {1: "503", 2: "lost-reply"}

    def rule(method, path):
        if state["armed"] and method == "POST" and commit_re.match(path):
            state["commits"] += 1
            return plan.get(state["commits"])
        return None

    proxy = FlakyProxy(loc.uri, rule=rule).start()
    try:
        ns = "schema_" + uuid.uuid4().hex[:6]
        job = firn_job([{"stream_name": "t1"}], setup=[SETUP[0], SETUP[2]],
                       catalog=loc.firn_catalog(uri=proxy.url), catalog_loc=loc, namespace=ns)
        job.sync()
        job.sql("ALTER TABLE t1 ADD COLUMN w int", "UPDATE t1 SET w = id * 2 WHERE id <= 5",
                "INSERT INTO t1 VALUES (900, 'x', 9, 99)")
        state["armed"] = True  # the first commit of the next run is the schema change
        start = len(proxy.log)
        job.sync()
    finally:
        proxy.stop()
    posts = [s for m, p, s in proxy.log[start:] if m == "POST" and commit_re.match(p)]
    assert posts[:3] == [503, "lost-reply", 200], proxy.log[start:]
    log = (job.workdir / "sync-2.log").read_text()
    assert log.count("catalog outage: the commit failed") == 1, log[-3000:]
    assert "landed after 2 failed attempts" in log, log[-3000:]
    tbl = loc.pyiceberg().load_table(job.table("t1"))
    names = [f.name for f in tbl.schema().fields]
    assert names.count("w") == 1 and names[:3] == ["id", "v", "n"], names
    assert len(tbl.schemas()) == 2, tbl.schemas()  # the first one and the evolved one
    arrow = tbl.scan(selected_fields=("id", "v", "n", "w")).to_arrow()
    got = canon_rows(arrow.select(["id", "v", "n", "w"]).to_pylist())
    assert got == job.source_rows("SELECT id, v, n, w FROM t1")
