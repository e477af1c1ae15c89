# SPDX-License-Identifier: Apache-2.0
"""Small-file compaction of format-2 upsert tables (issue 8, eng_compact.c): after a commit, once
a partition has destination.compact_small_files small data files (or a file with
compact_delete_percent % of its rows deleted), firn rewrites them, minus their deleted rows, in
one "replace" snapshot that removes the old data files and the delete files of only them.

Checked with rounds of CDC changes (updates, deletes, key changes, delete + re-insert) on a
table of many primitive types (numeric, uuid, timestamps, bytea, ...) bucket-partitioned, and on
one with an array column (not compacted: the Parquet reader reads flat columns only): after every
round pyiceberg and DuckDB return the PostgreSQL rows value by value; the compaction snapshots are
"replace" with the data sequence number of the snapshot they read; the key index keeps working
(later updates of moved rows delete the right positions). A second writer commits while a
compaction is written (FIRN_TEST_PAUSE): the compaction is refused, planned again on the new
snapshot and the rows still match."""

from __future__ import annotations

import os
import subprocess
import time
import uuid

from firnsync import snapshot_chain, summary_of
from sparkutil import duckdb_rows, pyiceberg_rows
from test_dv_sync import live_entries

TYPED = ["id", "v", "n", "amt", "u", "ts", "tstz", "d", "f", "b", "flag"]
SETUP = [
    "CREATE TABLE typed (id bigint PRIMARY KEY, v text, n int, amt numeric(12,3), u uuid, "
    "ts timestamp, tstz timestamptz, d date, f double precision, b bytea, flag boolean)",
    "INSERT INTO typed SELECT g, 'v' || g, g % 7, (g * 1.125)::numeric(12,3), "
    "md5(g::text)::uuid, '2024-01-01'::timestamp + g * interval '1 minute', "
    "'2024-01-01 00:00:00+00'::timestamptz + g * interval '1 second', "
    "'2020-01-01'::date + g, g / 3.0, decode(md5(g::text), 'hex'), g % 2 = 0 "
    "FROM generate_series(1, 500) g",
    "CREATE TABLE listy (id int PRIMARY KEY, tags text[], n int)",
    "INSERT INTO listy SELECT g, ARRAY['a' || g, 'b'], g FROM generate_series(1, 50) g",
]
STREAMS = [{"stream_name": "typed", "partition": ["bucket(2, id)"]},
           {"stream_name": "listy"}]
DEST = {"format_version": 2, "compact_small_files": 3, "compact_delete_percent": 0,
        "metadata_columns": False}


def round_sql(k: int) -> list[str]:
    return [
        f"UPDATE typed SET v = 'u{k}-' || id, amt = amt + {k} WHERE id % 11 = {k}",
        f"DELETE FROM typed WHERE id % 17 = {k}",
        f"UPDATE typed SET id = id + 10000 WHERE id = {20 + k}",
        f"INSERT INTO typed (id, v, n, u, flag) VALUES ({900 + k}, NULL, NULL, NULL, NULL)",
        f"DELETE FROM typed WHERE id = {30 + k}",
        f"INSERT INTO typed (id, v, n) VALUES ({30 + k}, 'back', {k})",
        f"UPDATE listy SET tags = tags || 'r{k}'::text WHERE id % 5 = {k % 5}",
    ]


def norm(rows: list[tuple]) -> list[tuple]:
    """uuid values as text (pyiceberg gives str, psycopg and DuckDB uuid.UUID)."""
    return sorted((tuple(str(v) if isinstance(v, uuid.UUID) else v for v in r) for r in rows),
                  key=repr)


def typed_rows(job, reader, where: str = "") -> tuple[list, list]:
    want = norm(job.source_rows(f"SELECT {', '.join(TYPED)} FROM typed {where}"))
    got = norm(reader(job.loc, job.table("typed"), TYPED))
    if where:
        got = [r for r in got if r[0] != 77777]
    return got, want


def check(job) -> None:
    for reader in (pyiceberg_rows, duckdb_rows):
        got, want = typed_rows(job, reader)
        assert got == want, reader.__name__
    lwant = job.source_rows("SELECT id, tags, n FROM listy")
    assert pyiceberg_rows(job.loc, job.table("listy"), ["id", "tags", "n"]) == lwant


def replace_snapshots(tbl) -> list:
    return [s for s in snapshot_chain(tbl) if summary_of(s)["operation"] == "replace"]


def check_replace(tbl, snap) -> None:
    """A replace snapshot adds data files with the sequence number of its parent (explicit),
    removes data files and only position-delete files, and keeps the record total."""
    parent = tbl.metadata.snapshot_by_id(snap.parent_snapshot_id)
    ents = [e for m in snap.manifests(tbl.io)
            for e in m.fetch_manifest_entry(tbl.io, discard_deleted=False)]
    added = [e for e in ents if e.status.value == 1 and e.snapshot_id == snap.snapshot_id]
    assert added and all(e.data_file.content.value == 0 for e in added)
    for e in added:  # explicit: the parent's, not the replace snapshot's own
        assert e.sequence_number == parent.sequence_number < snap.sequence_number, e
        assert e.file_sequence_number == snap.sequence_number, e
    s = summary_of(snap)
    assert int(s["deleted-data-files"]) > 0
    assert int(s["total-records"]) - int(s.get("total-position-deletes", 0)) == \
        int(summary_of(parent)["total-records"]) - \
        int(summary_of(parent).get("total-position-deletes", 0))


def test_compaction_between_cdc_rounds(firn_job):
    job = firn_job(STREAMS, setup=SETUP)
    job.destination_extra = dict(DEST)
    job.sync()
    check(job)
    for k in range(1, 7):
        job.sql(*round_sql(k))
        job.sync()
        check(job)
    tbl = job.loc.pyiceberg().load_table(job.table("typed"))
    reps = replace_snapshots(tbl)
    assert len(reps) >= 2, [summary_of(s)["operation"] for s in snapshot_chain(tbl)]
    for s in reps:
        check_replace(tbl, s)
    data = [e for e in live_entries(tbl) if e["data_file"]["content"] == 0]
    assert len(data) <= 2 * 3, len(data)  # per bucket: fewer than 3 small files + the rewrite
    listy = job.loc.pyiceberg().load_table(job.table("listy"))
    assert not replace_snapshots(listy)
    log = "".join(p.read_text() for p in job.workdir.glob("sync-*.log"))
    assert "compacted" in log


def test_compaction_conflict_with_another_writer(firn_job, tmp_path):
    job = firn_job([{"stream_name": "typed"}], setup=SETUP[:2])
    job.destination_extra = dict(DEST, compact_small_files=2)
    job.sync()
    job.sql(*round_sql(1)[:3])
    job.sync()  # compacts the backfill's file and this round's (2 small files)
    job.sql(*round_sql(2)[:3])
    go = tmp_path / "go"
    env = dict(os.environ, FIRN_TEST_PAUSE=f"compact-written:{go}")
    proc = subprocess.Popen(job.sync_command(), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        ready = tmp_path / "go.ready"
        for _ in range(600):
            if ready.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert ready.exists(), "compaction did not pause"
        # Another writer's commit: an append through pyiceberg of a row PostgreSQL gets too
        import pyarrow as pa
        tbl = job.loc.pyiceberg().load_table(job.table("typed"))
        arrow_schema = tbl.schema().as_arrow()
        row = {f.name: [None] for f in arrow_schema}
        row["id"] = [77777]
        row["v"] = ["other"]
        tbl.append(pa.Table.from_pydict(row, schema=arrow_schema))
        job.sql("INSERT INTO typed (id, v) VALUES (77777, 'other')")
        go.write_text("")
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-3000:]
    assert "compaction not committed" in out, out[-3000:]
    tbl = job.loc.pyiceberg().load_table(job.table("typed"))
    reps = replace_snapshots(tbl)
    assert reps, "the compaction was not planned again"
    for s in reps:
        check_replace(tbl, s)
    ops = [summary_of(s)["operation"] for s in snapshot_chain(tbl)]
    assert ops[-2:] == ["append", "replace"], ops  # planned again after the other writer's
    got, want = typed_rows(job, pyiceberg_rows, "WHERE id <> 77777")
    assert got == want
    # the next CDC round upserts the other writer's key and the moved keys exactly
    job.sql(*round_sql(3)[:3], "UPDATE typed SET v = 'again' WHERE id = 77777")
    job.sync()
    for reader in (pyiceberg_rows, duckdb_rows):
        got, want = typed_rows(job, reader)
        assert got == want, reader.__name__


def test_small_commits_leave_large_files_alone(firn_job):
    """Size tiers: three commits of a few rows each are merged, the backfill's large file (a
    higher tier, though still under 3/4 of target_file_size) is not rewritten with them."""
    job = firn_job([{"stream_name": "big"}], setup=[
        "CREATE TABLE big (id bigint PRIMARY KEY, v text)",
        "INSERT INTO big SELECT g, md5(g::text) || md5((g * 7)::text) "
        "FROM generate_series(1, 20000) g"])
    job.destination_extra = dict(DEST, compact_small_files=3)
    job.sync()
    tbl = job.loc.pyiceberg().load_table(job.table("big"))
    (base,) = [e["data_file"] for e in live_entries(tbl) if e["data_file"]["content"] == 0]
    assert base["file_size_in_bytes"] > 4 * 64 * 1024, base["file_size_in_bytes"]  # tier >= 2
    for k in range(1, 4):
        job.sql(f"UPDATE big SET v = 'r{k}' WHERE id IN ({k}, {k + 100})",
                f"INSERT INTO big VALUES ({30000 + k}, 'new')")
        job.sync()
    tbl = job.loc.pyiceberg().load_table(job.table("big"))
    reps = replace_snapshots(tbl)
    assert len(reps) == 1, [summary_of(s)["operation"] for s in snapshot_chain(tbl)]
    check_replace(tbl, reps[0])
    data = [e["data_file"] for e in live_entries(tbl) if e["data_file"]["content"] == 0]
    assert base["file_path"] in {d["file_path"] for d in data}, "the large file was rewritten"
    assert len(data) == 2, [d["file_path"] for d in data]  # the base + the 3 small ones merged
    want = sorted(job.source_rows("SELECT id, v FROM big"))
    for reader in (pyiceberg_rows, duckdb_rows):
        assert sorted(reader(job.loc, job.table("big"), ["id", "v"])) == want, reader.__name__
