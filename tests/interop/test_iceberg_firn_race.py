# SPDX-License-Identifier: Apache-2.0
"""Concurrent commits to one table: two processes append data files through firn's engine
commit path (tests/tools/commit_race: the table writer, the snapshot producer and the SQL
catalog's compare-and-swap with the engine's reload-and-retry), while a third commits table
properties through firn's catalog (catalog_tool hammer). Every commit must land exactly once:
pyiceberg (and DuckDB) see every row once, the snapshot chain is linear and holds every
reported snapshot once, every summary's totals match the manifests, and no property commit was
lost."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from firnsync import check_summary_against_manifests, snapshot_chain, summary_of
from sparkutil import SqlCatalogLoc, canon_rows, duckdb_rows, pyiceberg_rows

WRITERS = ("a", "b")
COMMITS = 20
ROWS = 25
HAMMER = 30


@pytest.fixture
def tools(build_dir):
    out = {}
    for name in ("commit_race", "catalog_tool"):
        path = build_dir / "tools" / name
        if not path.exists():
            pytest.fail(f"{path} is missing: build the asan preset", pytrace=False)
        out[name] = str(path)
    return out


def test_two_processes_commit_data_files_to_one_table(sql_catalog, tools):
    from pyiceberg.schema import Schema
    from pyiceberg.types import IntegerType, LongType, NestedField, StringType

    loc: SqlCatalogLoc = sql_catalog
    cat = loc.pyiceberg()
    cat.create_namespace("race")
    # created by pyiceberg: firn commits on top of another writer's table from the start
    cat.create_table("race.t", schema=Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "writer", StringType(), required=True),
        NestedField(3, "n", IntegerType(), required=True)),
        properties={"format-version": "2"})
    base = [loc.name, loc.sqlalchemy_uri, loc.warehouse_uri]
    start = int((time.time() + 1.0) * 1e6)
    procs = [subprocess.Popen([tools["commit_race"], *base, "race", "t", w, str(COMMITS),
                               str(ROWS), str(i * 1_000_000), str(start)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, w in enumerate(WRITERS)]
    procs.append(subprocess.Popen([tools["catalog_tool"], *base, "hammer", "race", "t", "props",
                                   str(HAMMER)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, f"{p.args[0]} exited {p.returncode}: {err[-3000:]}"
    reported = {}
    for out, _err in outs[:2]:
        doc = json.loads(out)
        reported[doc["writer"]] = doc["snapshots"]
    retries = sum(err.count("retrying") for _out, err in outs[:2])

    tbl = loc.pyiceberg().load_table("race.t")
    chain = snapshot_chain(tbl)  # linear, every snapshot on it, history agrees
    assert len(chain) == len(WRITERS) * COMMITS
    by_id = {s.snapshot_id: s for s in chain}
    for w, snaps in reported.items():
        assert len(snaps) == COMMITS and len(set(snaps)) == COMMITS
        for k, sid in enumerate(snaps):
            s = summary_of(by_id[sid])
            assert (s["race.writer"], s["race.commit"]) == (w, str(k))
            assert s["operation"] == "append" and int(s["added-records"]) == ROWS, s
    # each writer's commits keep their order in the chain
    order = [summary_of(s)["race.writer"] for s in chain]
    for w in WRITERS:
        assert [int(summary_of(s)["race.commit"]) for s in chain
                if summary_of(s)["race.writer"] == w] == list(range(COMMITS))
    commit_ids = [summary_of(s)["firn.commit-id"] for s in chain]
    assert len(set(commit_ids)) == len(commit_ids)
    for s in chain:  # totals were recomputed on the parent each retry ended on
        check_summary_against_manifests(tbl, s)

    want = canon_rows([(i * 1_000_000 + k * ROWS + r, w, k) for i, w in enumerate(WRITERS)
                       for k in range(COMMITS) for r in range(ROWS)])
    assert pyiceberg_rows(loc, "race.t", ["id", "writer", "n"]) == want
    assert duckdb_rows(loc, "race.t", ["id", "writer", "n"]) == want
    props = tbl.properties
    assert all(props.get(f"props.{i}") == str(i) for i in range(HAMMER)), props
    # the race really happened: the writers interleaved and some commits were retried
    switches = sum(1 for x, y in zip(order, order[1:]) if x != y)
    assert retries > 0 or switches >= 2, order
    print(f"race: {retries} retried commits, {switches} writer switches in the chain")


def _wait_for(pred, timeout=60.0):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return True
        time.sleep(0.2)
    return False


def test_follow_run_while_another_writer_rewrites_and_inserts(firn_job):
    """A long-running `firn sync --follow` keeps its key index in memory; another writer
    rewrites every data file (a copy-on-write compaction, here pyiceberg's overwrite) and then
    appends a row with a key the source inserts later. firn's next commits must delete the key's
    row where it lives now and the foreign row of the re-inserted key: no duplicate keys."""
    import signal

    job = firn_job([{"stream_name": "t"}], setup=[
        "CREATE TABLE t (id int PRIMARY KEY, v text)",
        "INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 10) g"])
    job.commit_interval_s = 1
    job.sync()
    p = job.write_configs()
    log_path = job.workdir / "follow.log"

    def snapshots():  # firn's commits
        return sum(1 for s in job.loc.pyiceberg().load_table("src.t").snapshots()
                   if s.summary.additional_properties.get("engine-name") == "firn")

    with open(log_path, "w") as log:
        proc = subprocess.Popen([str(job.firn_bin), "sync", "--source", str(p["source"]),
                                 "--destination", str(p["destination"]), "--streams",
                                 str(p["streams"]), "--state", str(p["state"]), "--follow"],
                                stdout=log, stderr=log)
    try:
        job.sql("UPDATE t SET v = 'first' WHERE id = 1")  # firn is streaming once this lands
        assert _wait_for(lambda: snapshots() == 2), log_path.read_text()[-3000:]
        tbl = job.loc.pyiceberg().load_table("src.t")
        tbl.overwrite(tbl.scan().to_arrow())  # every data file replaced by a new one
        job.sql("UPDATE t SET v = 'changed' WHERE id = 3")
        assert _wait_for(lambda: snapshots() == 3), log_path.read_text()[-3000:]
        tbl = job.loc.pyiceberg().load_table("src.t")
        import pyarrow as pa
        tbl.append(pa.Table.from_pylist([{"id": 11, "v": "foreign"}],
                                        schema=tbl.schema().as_arrow()))
        job.sql("INSERT INTO t VALUES (11, 'from-source')", "DELETE FROM t WHERE id = 2")
        assert _wait_for(lambda: snapshots() == 4), log_path.read_text()[-3000:]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    log = log_path.read_text()
    assert proc.returncode == 0, log[-3000:]
    assert log.count("computing deletes again") >= 2, log[-3000:]
    assert pyiceberg_rows(job.loc, "src.t", ["id", "v"]) == job.source_rows("SELECT id, v FROM t")
    assert duckdb_rows(job.loc, "src.t", ["id", "v"]) == job.source_rows("SELECT id, v FROM t")
    snapshot_chain(job.loc.pyiceberg().load_table("src.t"))
