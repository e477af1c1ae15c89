# SPDX-License-Identifier: Apache-2.0
"""Consolidation of position deletes on format-v2 upsert tables (issue 8): every commit writes
one delete file per partition; once destination.consolidate_deletes_after of them are not the
single file-scoped delete file of their data file, a commit replaces them with one file-scoped
delete file per data file (referenced_data_file set, every deleted position of that file) and
drops data files whose rows are all deleted, in the same snapshot.

Checked over rounds of updates, deletes, key changes and delete + re-insert, first with one
firn process per round (the tracked delete files come from reading the table), then inside one
`--follow` process (tracked as it commits): pyiceberg and DuckDB return exactly the source rows
(full row values) after every round, and pyiceberg's manifests show the delete-file layout."""

from __future__ import annotations

import signal
import subprocess
import time

from firnsync import snapshot_chain, summary_of
from sparkutil import duckdb_rows, pyiceberg_rows
from test_dv_sync import live_entries

COLS = {"items": ["id", "v", "n"], "pairs": ["a", "b", "w"]}
SETUP = [
    "CREATE TABLE items (id bigint PRIMARY KEY, v text, n int)",
    "INSERT INTO items SELECT g, 'v' || g, g % 7 FROM generate_series(1, 600) g",
    "CREATE TABLE pairs (a text, b int, w text, PRIMARY KEY (a, b))",
    "INSERT INTO pairs SELECT 'k' || (g % 5), g, 'w' || g FROM generate_series(1, 80) g",
]
STREAMS = [{"stream_name": "items", "partition": ["bucket(3, id)"]},
           {"stream_name": "pairs"}]
AFTER = 3
NO_COMPACT = {"compact_small_files": 0, "compact_delete_percent": 0}  # test_engine_compact.py


def round_sql(k: int) -> list[str]:
    """Round k: updates and deletes over the backfill files, a key change, a deleted key back,
    and a batch of new pairs rows that the next round deletes entirely (their data file is then
    fully deleted and must be dropped at the next consolidation)."""
    return [
        f"UPDATE items SET v = 'u{k}-' || id WHERE id % 13 = {k}",
        f"DELETE FROM items WHERE id % 17 = {k}",
        f"UPDATE items SET id = 10000 + {k} WHERE id = {k * 7 + 300}",
        f"INSERT INTO items SELECT 17 * g + {k - 1}, 'back{k}', {k} FROM generate_series(1, 30) g "
        f"WHERE {k} > 1 ON CONFLICT (id) DO NOTHING",
        f"UPDATE pairs SET w = w || '-{k}' WHERE b % 6 = {k % 6}",
        f"DELETE FROM pairs WHERE a = 'new' AND b < {k * 1000}",
        f"INSERT INTO pairs SELECT 'new', {k * 1000} + g, 'n{k}' FROM generate_series(1, 40) g",
        f"DELETE FROM pairs WHERE b = {k * 9}",
    ]


def check_rows(job, name: str) -> None:
    cols = COLS[name]
    want = job.source_rows(f"SELECT {', '.join(cols)} FROM {name}")
    assert pyiceberg_rows(job.loc, job.table(name), cols) == want, f"pyiceberg rows of {name}"
    assert duckdb_rows(job.loc, job.table(name), cols) == want, f"duckdb rows of {name}"


def live_files(tbl) -> tuple[dict[str, int], list[dict]]:
    """(data file -> record count, position-delete files) of the current snapshot."""
    data, deletes = {}, []
    for e in live_entries(tbl):  # pyiceberg's Avro reader with the manifest schema of v3
        f = e["data_file"]
        if f["content"] == 0:
            data[f["file_path"]] = f["record_count"]
        else:
            assert f["content"] == 1, "firn wrote an equality delete"
            deletes.append(f)
    return data, deletes


def delete_refs(tbl, f) -> set[str]:
    """Data files a position-delete file deletes from (its rows, read with pyarrow)."""
    import pyarrow.parquet as pq
    with tbl.io.new_input(f["file_path"]).open() as fh:
        return set(pq.read_table(fh).column("file_path").to_pylist())


def loose_delete_files(tbl) -> int:
    """Delete files that are not consolidated: those deleting from several data files, and
    those deleting from one that has another such file."""
    data, deletes = live_files(tbl)
    per_file: dict[str, int] = {}
    refs = []
    for f in deletes:
        r = delete_refs(tbl, f)
        refs.append(r)
        if len(r) == 1:
            p = next(iter(r))
            per_file[p] = per_file.get(p, 0) + 1
    return sum(1 for r in refs if len(r) != 1 or per_file[next(iter(r))] != 1)


def dangling_delete_files(tbl) -> int:
    """Live delete files none of whose rows refer to a live data file."""
    data, deletes = live_files(tbl)
    return sum(1 for f in deletes if not delete_refs(tbl, f) & set(data))


def check_consolidated(tbl, snap) -> None:
    """After a consolidating snapshot: it removed delete files; every live delete file is
    file-scoped (referenced_data_file = its only data file, one per data file) and refers to
    a live data file."""
    s = summary_of(snap)
    assert int(s.get("removed-position-delete-files", "0")) > 0, s
    data, deletes = live_files(tbl)
    seen = set()
    for f in deletes:
        ref = f["referenced_data_file"]
        if ref is None:  # written after the consolidation by a later commit
            continue
        assert delete_refs(tbl, f) == {ref}
        assert ref in data, f"delete file of a data file that is not live: {ref}"
        assert ref not in seen, f"two consolidated delete files for {ref}"
        seen.add(ref)


def consolidations(tbl) -> list:
    return [s for s in snapshot_chain(tbl)
            if int(summary_of(s).get("removed-position-delete-files", "0")) > 0]


def test_consolidation_over_separate_runs(firn_job):
    job = firn_job(STREAMS, setup=SETUP)
    job.destination_extra = {"consolidate_deletes_after": AFTER, **NO_COMPACT}
    job.sync()
    dropped_total = 0
    for k in range(1, 8):
        job.sql(*round_sql(k))
        out = job.sync().stderr
        for name in COLS:
            check_rows(job, name)
            tbl = job.loc.pyiceberg().load_table(job.table(name))
            # the policy: never AFTER loose delete files left after a commit
            assert loose_delete_files(tbl) < AFTER, name
            snap = tbl.current_snapshot()
            if int(summary_of(snap).get("removed-position-delete-files", "0")) > 0:
                check_consolidated(tbl, snap)
                dropped_total += int(summary_of(snap).get("deleted-data-files", "0"))
        if k >= AFTER:
            assert "consolidating position deletes" in out or k > AFTER
    for name in COLS:
        tbl = job.loc.pyiceberg().load_table(job.table(name))
        assert len(consolidations(tbl)) >= 2, name
    # pairs' per-round 'new' files are deleted whole by the next round: some were dropped
    assert dropped_total > 0


def _wait(pred, timeout=90.0) -> bool:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return True
        time.sleep(0.2)
    return False


def test_consolidation_inside_one_follow_run(firn_job):
    job = firn_job(STREAMS, setup=SETUP)
    job.destination_extra = {"consolidate_deletes_after": AFTER, **NO_COMPACT}
    job.commit_interval_s = 1
    job.sync()
    log_path = job.workdir / "follow.log"

    def snaps(name):
        return len(job.loc.pyiceberg().load_table(job.table(name)).snapshots())

    with open(log_path, "w") as log:
        proc = subprocess.Popen(job.sync_command() + ["--follow"], stdout=log, stderr=log)
    try:
        for k in range(1, 6):
            before = {n: snaps(n) for n in COLS}
            job.sql(*round_sql(k))
            assert _wait(lambda: all(snaps(n) > before[n] for n in COLS)), \
                log_path.read_text()[-3000:]
            for name in COLS:
                check_rows(job, name)
                tbl = job.loc.pyiceberg().load_table(job.table(name))
                assert loose_delete_files(tbl) < AFTER, name
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    log = log_path.read_text()
    assert proc.returncode == 0, log[-3000:]
    assert "consolidating position deletes" in log
    for name in COLS:
        tbl = job.loc.pyiceberg().load_table(job.table(name))
        cons = consolidations(tbl)
        assert len(cons) >= 1, name
        check_consolidated(tbl, cons[-1]) if cons[-1] == tbl.current_snapshot() else None
    # a later run reads the consolidated table back (tracking rebuilt from the files)
    job.sql(*round_sql(6))
    job.sync()
    for name in COLS:
        check_rows(job, name)


def spark_rewrite(spark, loc, table: str) -> None:
    """Spark's compaction rewrites every data file of the table (applying the deletes)."""
    spark.sql(loc, f"CALL {loc.name}.system.rewrite_data_files(table => '{table}', "
                   "options => map('rewrite-all', 'true', 'min-input-files', '1'))")


def check_all_readers(spark, job, name: str) -> None:
    cols = COLS[name]
    from sparkutil import assert_readers_agree
    assert_readers_agree(spark, job.loc, job.table(name),
                         job.source_raw(f"SELECT {', '.join(cols)} FROM {name}"), cols,
                         equality_deletes=False)


def test_spark_compaction_between_firn_commits(firn_job, spark):
    """Spark reads the consolidated tables; Spark's rewrite_data_files between two firn runs,
    and again while a firn --follow run is idle between two commits (its next commit conflicts
    and catches the key index up: rewritten files gone, new ones indexed, replaced delete files
    no longer tracked): the following upserts, deletes and consolidations still land exactly,
    in Spark, DuckDB and pyiceberg."""
    job = firn_job(STREAMS, setup=SETUP)
    job.destination_extra = {"consolidate_deletes_after": AFTER, **NO_COMPACT}
    job.commit_interval_s = 1
    job.sync()
    for k in range(1, 5):
        job.sql(*round_sql(k))
        job.sync()
    for name in COLS:
        assert consolidations(job.loc.pyiceberg().load_table(job.table(name))), name
        check_all_readers(spark, job, name)

    # Between two firn runs: the next run reads the compacted table. Spark leaves the
    # file-scoped delete files of the files it rewrote behind (dangling): the next
    # consolidation removes them.
    for name in COLS:
        spark_rewrite(spark, job.loc, job.table(name))
        check_all_readers(spark, job, name)
    items = job.loc.pyiceberg().load_table(job.table("items"))
    assert dangling_delete_files(items) > 0
    job.sql(*round_sql(5))
    job.sync()
    for name in COLS:
        check_all_readers(spark, job, name)
    items = job.loc.pyiceberg().load_table(job.table("items"))
    assert consolidations(items)[-1] == items.current_snapshot()
    assert dangling_delete_files(items) == 0

    # Between two commits of one follow run.
    log_path = job.workdir / "follow.log"

    def firn_snaps(name):
        tbl = job.loc.pyiceberg().load_table(job.table(name))
        return sum(1 for s in tbl.snapshots()
                   if s.summary.additional_properties.get("engine-name") == "firn")

    with open(log_path, "w") as log:
        proc = subprocess.Popen(job.sync_command() + ["--follow"], stdout=log, stderr=log)
    try:
        for k in (6, 7, 8):
            before = {n: firn_snaps(n) for n in COLS}
            job.sql(*round_sql(k))
            assert _wait(lambda: all(firn_snaps(n) > before[n] for n in COLS)), \
                log_path.read_text()[-3000:]
            if k == 6:
                for name in COLS:
                    spark_rewrite(spark, job.loc, job.table(name))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    log = log_path.read_text()
    assert proc.returncode == 0, log[-3000:]
    assert "computing deletes again" in log, log[-3000:]
    for name in COLS:
        check_all_readers(spark, job, name)
        snapshot_chain(job.loc.pyiceberg().load_table(job.table(name)))
