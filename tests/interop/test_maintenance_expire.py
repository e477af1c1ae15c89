# SPDX-License-Identifier: Apache-2.0
"""Snapshot expiry inside firn's committer (issue 32 items 1 and 2, eng_expire.c,
docs/maintenance.md).

- Catch-up runs with changes each commit a snapshot; with `maintenance.min_snapshots_to_keep`
  small and `snapshot_max_age_seconds` 0, the history stays bounded, the table property
  history.expire.min-snapshots-to-keep wins over the destination default, and the files only
  expired snapshots referenced are deleted: every Parquet/Avro file left in the table's folder is
  referenced by a retained snapshot, every retained snapshot reads back by time travel, the rows
  equal PostgreSQL in pyiceberg and DuckDB, and a run after the snapshot of the initial copy
  expired resumes from its position (no second copy).
- Under `--follow`, a metadata budget (`max_metadata_size`) keeps the metadata JSON below it
  although the age and count rules keep everything, with one warning naming the table and the
  setting.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from firnsync import summary_of
from net_fixtures import *  # noqa: F401,F403  (gcs_server)
from rest_fixtures import *  # noqa: F401,F403  (rest_catalog_s3)
from firnutil import stop_process, wait_for
from sparkutil import duckdb_rows, pyiceberg_rows, uri_to_path

SETUP = [
    "CREATE TABLE acct (id int PRIMARY KEY, v text, n int)",
    "INSERT INTO acct SELECT g, 'v' || g, g FROM generate_series(1, 300) g",
]
COLS = ["id", "v", "n"]


def change_round(job, k: int) -> None:
    job.sql(f"UPDATE acct SET v = 'r{k}-' || id, n = n + {k} WHERE id % 7 = {k % 7}",
            f"DELETE FROM acct WHERE id = {10 + k}",
            f"INSERT INTO acct VALUES ({1000 + k}, 'new{k}', {k})")


def check_rows(job) -> None:
    want = job.source_rows("SELECT id, v, n FROM acct")
    for reader in (pyiceberg_rows, duckdb_rows):
        assert reader(job.loc, job.table("acct"), COLS) == want, reader.__name__


def referenced_files(tbl, live: bool = False, to_path=uri_to_path) -> set[str]:
    """Manifest lists, manifests and data/delete files of every snapshot the metadata keeps, as
    local paths: with live, only the files of live entries (what a retained snapshot reads, so
    must exist); else deleted entries too (files that may still exist)."""
    out: set[str] = set()
    for snap in tbl.metadata.snapshots:
        out.add(to_path(snap.manifest_list))
        for m in snap.manifests(tbl.io):
            out.add(to_path(m.manifest_path))
            for e in m.fetch_manifest_entry(tbl.io, discard_deleted=live):
                out.add(to_path(e.data_file.file_path))
    return out


def files_on_disk(table_dir: Path) -> set[str]:
    keep = (".parquet", ".avro", ".puffin")
    return {str(p) for p in table_dir.rglob("*")
            if p.is_file() and p.name.endswith(keep) and "firn-index" not in p.parts}


def test_catch_up_runs_expire_and_delete_only_unreferenced_files(firn_job):
    job = firn_job([{"stream_name": "acct"}], setup=SETUP,
                   destination_extra={
                       "format_version": 2, "compact_small_files": 4,
                       "maintenance": {"min_snapshots_to_keep": 2, "snapshot_max_age_seconds": 0},
                       "table_properties": {"history.expire.min-snapshots-to-keep": "4"}})
    job.sync()
    tbl = job.loc.pyiceberg().load_table(job.table("acct"))
    first = tbl.metadata.current_snapshot_id
    assert summary_of(tbl.metadata.snapshot_by_id(first)).get("firn.backfill") == "done"
    expired_logs = []
    for k in range(1, 23):
        change_round(job, k)
        proc = job.sync()
        expired_logs += [ln for ln in proc.stderr.splitlines() if "expired " in ln]
    assert expired_logs, "no expiry in 22 catch-up runs"
    assert "data and delete files" in expired_logs[0] and "acct" in expired_logs[0]

    tbl = job.loc.pyiceberg().load_table(job.table("acct"))
    snaps = tbl.metadata.snapshots
    # the table property (4) wins over the destination's 2; at most a batch (16) more
    assert 4 <= len(snaps) <= 4 + 16, len(snaps)
    assert tbl.metadata.snapshot_by_id(first) is None, "the initial copy's snapshot is kept"
    assert all(summary_of(s).get("firn.backfill") is None for s in snaps)
    # the log keeps no entry of a removed snapshot
    ids = {s.snapshot_id for s in snaps}
    assert all(e.snapshot_id in ids for e in tbl.metadata.snapshot_log)
    check_rows(job)

    # every retained snapshot reads back (its files exist) and the newest equals the source
    for s in snaps:
        tbl.scan(snapshot_id=s.snapshot_id).to_arrow()
    table_dir = Path(uri_to_path(tbl.metadata.location))
    on_disk = files_on_disk(table_dir)
    refs = referenced_files(tbl)
    missing = {f for f in referenced_files(tbl, live=True) if not os.path.exists(f)}
    assert not missing, sorted(missing)[:5]
    orphans = on_disk - refs
    assert not orphans, sorted(orphans)[:5]
    # old metadata files beyond write.metadata.previous-versions-max are deleted after commit
    metas = list((table_dir / "metadata").glob("*.metadata.json"))
    assert len(metas) <= 101 + 1, len(metas)

    # a run after the initial copy's snapshot expired resumes from its position: no second copy
    change_round(job, 99)
    proc = job.sync()
    tbl = job.loc.pyiceberg().load_table(job.table("acct"))
    head = summary_of(tbl.metadata.current_snapshot())
    assert head.get("firn.backfill") is None and head.get("firn.copy") == "done", head
    assert int(head.get("added-records", "0")) < 100, head  # the round's changes, not a copy
    check_rows(job)


def test_follow_keeps_metadata_under_the_budget(firn_job):
    budget = 48 * 1024
    job = firn_job([{"stream_name": "acct"}], setup=SETUP, commit_interval_s=0.2,
                   destination_extra={
                       "format_version": 2,
                       "maintenance": {"min_snapshots_to_keep": 100000,
                                       "snapshot_max_age_seconds": 86400,
                                       "max_metadata_size": f"{budget // 1024}KiB"}})
    cmd = job.sync_command() + ["--follow"]
    log = (job.workdir / "follow.log").open("w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
    stats_path = job.workdir / "stats.json"
    try:
        def expired() -> bool:
            try:
                doc = json.loads(stats_path.read_text())
            except (OSError, ValueError):
                return False
            return any(s.get("snapshots_expired", 0) > 0 and s.get("commits", 0) >= 40
                       for s in doc.get("streams", []))

        k = 0
        deadline = time.monotonic() + 150
        while not expired():
            assert proc.poll() is None, (job.workdir / "follow.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no expiry under the budget"
            k += 1
            change_round(job, k)
            time.sleep(0.25)
        change_round(job, 500)
        want = job.source_rows("SELECT id, v, n FROM acct")
        wait_for(lambda: pyiceberg_rows(job.loc, job.table("acct"), COLS) == want, 60,
                 what="the last round committed")
    finally:
        assert stop_process(proc, signal.SIGTERM) == 0
        log.close()
    text = (job.workdir / "follow.log").read_text()
    warns = [ln for ln in text.splitlines() if "max_metadata_size" in ln]
    assert len(warns) == 1 and "acct" in warns[0], warns
    meta = Path(uri_to_path(job.loc.metadata_location(job.table("acct"))))
    assert meta.stat().st_size < budget, meta.stat().st_size
    tbl = job.loc.pyiceberg().load_table(job.table("acct"))
    assert len(tbl.metadata.snapshots) < 40
    check_rows(job)


def run_maintain(job, dest: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(job.firn_bin), "maintain", *args, "--destination", str(dest)],
                          capture_output=True, text=True, timeout=120)


def test_firn_maintain_status_and_expire_by_hand(firn_job):
    import pyarrow as pa

    job = firn_job([{"stream_name": "acct"}], setup=SETUP)
    job.sync()
    for k in range(1, 7):
        change_round(job, k)
        job.sync()
    # a table no stream writes: two appends by pyiceberg
    cat = job.loc.pyiceberg()
    other = cat.create_table("src.other", schema=pa.schema([("x", pa.int64())]))
    other.append(pa.table({"x": [1, 2]}))
    other.append(pa.table({"x": [3]}))

    dest = json.loads((job.workdir / "destination.json").read_text())
    dest["maintenance"] = {"min_snapshots_to_keep": 2, "snapshot_max_age_seconds": 0}
    dpath = job.workdir / "maintain-destination.json"
    dpath.write_text(json.dumps(dest))

    n = len(cat.load_table("src.acct").metadata.snapshots)
    assert n >= 7
    st = run_maintain(job, dpath, "status")
    assert st.returncode == 0, st.stderr
    lines = {ln.split(":")[0]: ln for ln in st.stdout.splitlines()}
    assert set(lines) == {"src.acct", "src.other"}, st.stdout
    assert f"{n} snapshots" in lines["src.acct"] and "2 snapshots" in lines["src.other"]
    assert "records" in lines["src.acct"] and "of 4.0 MiB" in lines["src.acct"], lines

    dry = run_maintain(job, dpath, "expire", "--dry-run", "src.acct")
    assert dry.returncode == 0, dry.stderr
    assert f"src.acct: would expire {n - 2} of {n} snapshots" in dry.stdout, dry.stdout
    assert len(cat.load_table("src.acct").metadata.snapshots) == n

    ex = run_maintain(job, dpath, "expire")
    assert ex.returncode == 0, ex.stderr
    assert f"src.acct: expired {n - 2} snapshots (2 kept)" in ex.stdout, ex.stdout
    assert "src.other: expired 0 snapshots (2 kept)" in ex.stdout, ex.stdout
    tbl = cat.load_table("src.acct")
    assert len(tbl.metadata.snapshots) == 2
    table_dir = Path(uri_to_path(tbl.metadata.location))
    assert not files_on_disk(table_dir) - referenced_files(tbl)
    assert all(os.path.exists(f) for f in referenced_files(tbl, live=True))
    check_rows(job)
    assert sorted(r["x"] for r in cat.load_table("src.other").scan().to_arrow().to_pylist()) \
        == [1, 2, 3]
    # streaming goes on from the resume position after a hand-made expiry
    change_round(job, 40)
    job.sync()
    check_rows(job)

    bad = run_maintain(job, dpath, "expire", "src.nope")
    assert bad.returncode == 4 and 'table "src.nope" does not exist' in bad.stderr, bad.stderr
    bad = run_maintain(job, dpath, "expire", "nodot")
    assert bad.returncode == 2 and "NAMESPACE.TABLE" in bad.stderr, bad.stderr
    # a malformed name among good ones stops the command before anything runs
    change_round(job, 41)
    job.sync()
    n_before = len(cat.load_table("src.acct").metadata.snapshots)
    assert n_before > 2  # the retention (2) would expire some
    bad = run_maintain(job, dpath, "expire", "src.acct", "nodot")
    assert bad.returncode == 2 and "NAMESPACE.TABLE" in bad.stderr, bad.stderr
    assert len(cat.load_table("src.acct").metadata.snapshots) == n_before
    assert "expired" not in bad.stdout
    # a SQL catalog file that does not exist is an error, not an empty catalog
    missing = dict(dest, catalog=dict(dest["catalog"],
                                      uri=f"sqlite:///{job.workdir / 'nope' / 'cat.db'}"))
    mpath = job.workdir / "missing-destination.json"
    mpath.write_text(json.dumps(missing))
    bad = run_maintain(job, mpath, "status")
    assert bad.returncode == 2 and "does not exist (firn sync creates it" in bad.stderr, bad.stderr
    assert not (job.workdir / "nope").exists()
    bad = run_maintain(job, dpath, "frob")
    assert bad.returncode == 2 and 'unknown action "frob"' in bad.stderr, bad.stderr
    bad = run_maintain(job, dpath, "status", "--dry-run")
    assert bad.returncode == 2, bad.stderr


def test_expire_through_rest_catalog_on_s3(firn_job, rest_catalog_s3):
    """The REST fixture on the S3 server: the catalog accepts remove-snapshots with firn's ref
    requirements, and the objects only expired snapshots referenced leave the bucket."""
    import uuid as _uuid

    loc = rest_catalog_s3
    ns = "x_" + _uuid.uuid4().hex[:8]
    job = firn_job([{"stream_name": "acct"}], setup=SETUP, catalog=loc.firn_catalog(),
                   catalog_loc=loc, namespace=ns,
                   storage={"endpoint": loc.s3.endpoint, "region": loc.s3.region,
                            "path_style": True},
                   destination_extra={"maintenance": {"min_snapshots_to_keep": 2,
                                                      "snapshot_max_age_seconds": 0}})
    job.sync()
    for k in range(1, 6):
        change_round(job, k)
        job.sync()
    tbl = loc.pyiceberg().load_table(job.table("acct"))
    n = len(tbl.metadata.snapshots)
    assert n >= 6
    ex = run_maintain(job, job.workdir / "destination.json", "expire", job.table("acct"))
    assert ex.returncode == 0, ex.stderr
    assert f"expired {n - 2} snapshots (2 kept)" in ex.stdout, ex.stdout
    tbl = loc.pyiceberg().load_table(job.table("acct"))
    assert len(tbl.metadata.snapshots) == 2
    prefix = f"s3://{loc.s3.bucket}/"
    assert tbl.location().startswith(prefix)

    def as_obj(p: str) -> str:
        return str(loc.s3.root / loc.s3.bucket / p[len(prefix):])

    live = referenced_files(tbl, live=True, to_path=as_obj)
    refs = referenced_files(tbl, to_path=as_obj)
    table_dir = Path(as_obj(tbl.location()))
    on_disk = files_on_disk(table_dir)
    assert live <= on_disk, sorted(live - on_disk)[:5]
    assert not on_disk - refs, sorted(on_disk - refs)[:5]
    want = job.source_rows("SELECT id, v, n FROM acct")
    assert canon(loc, job.table("acct")) == want
    change_round(job, 77)
    job.sync()
    assert canon(loc, job.table("acct")) == job.source_rows("SELECT id, v, n FROM acct")


def canon(loc, table: str) -> list[tuple]:
    from sparkutil import canon_rows

    arrow = loc.pyiceberg().load_table(table).scan(selected_fields=tuple(COLS)).to_arrow()
    return canon_rows(arrow.select(COLS).to_pylist())


def plant(path: Path, data: bytes, age_s: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    t = time.time() - age_s
    os.utime(path, (t, t))


def orphan_lines(out: str) -> set[str]:
    return {ln.split(": orphan ", 1)[1] for ln in out.splitlines() if ": orphan " in ln}


def test_firn_maintain_orphans_local(firn_job):
    job = firn_job([{"stream_name": "acct"}], setup=SETUP)
    job.sync()
    change_round(job, 1)
    job.sync()
    tbl = job.loc.pyiceberg().load_table(job.table("acct"))
    table_dir = Path(uri_to_path(tbl.metadata.location))
    before = files_on_disk(table_dir)
    old = 4 * 86400
    planted = {
        table_dir / "data" / "00000-dead-beef.parquet": old,
        table_dir / "data" / "region=z%C3%BCrich" / "x.parquet": old,
        table_dir / "metadata" / "snap-1-1-lost.avro": old,
        table_dir / "metadata" / "00099-lost.metadata.json": old,
        table_dir / "data" / "young.parquet": 60,  # younger than the threshold
        table_dir / "metadata" / "firn-index" / "index-1.pkm": old,  # firn's own
    }
    for p, age in planted.items():
        plant(p, b"not iceberg", age)
    dest = job.workdir / "destination.json"

    dry = run_maintain(job, dest, "orphans", job.table("acct"))
    assert dry.returncode == 0, dry.stderr
    want = {str(p) for p, age in planted.items() if age == old and "firn-index" not in str(p)}
    listed = {uri_to_path(x) for x in orphan_lines(dry.stdout)}
    assert listed == want, dry.stdout
    assert "4 orphan files" in dry.stdout and "1 unreferenced files newer" in dry.stdout
    assert all(p.exists() for p in planted)  # a dry run deletes nothing

    rm = run_maintain(job, dest, "orphans", "--delete", job.table("acct"))
    assert rm.returncode == 0, rm.stderr
    assert "deleted 4 orphan files" in rm.stdout, rm.stdout
    for p, age in planted.items():
        assert p.exists() == (age != old or "firn-index" in str(p)), p
    assert before <= files_on_disk(table_dir)  # every file the table had is still there
    check_rows(job)
    # --older-than 0: the young one goes too; a second pass finds nothing
    rm = run_maintain(job, dest, "orphans", "--delete", "--older-than", "0")
    assert rm.returncode == 0 and "deleted 1 orphan files" in rm.stdout, rm.stdout
    again = run_maintain(job, dest, "orphans")
    assert "0 orphan files" in again.stdout, again.stdout
    bad = run_maintain(job, dest, "orphans", "--older-than", "soon")
    assert bad.returncode == 2 and "--older-than" in bad.stderr
    bad = run_maintain(job, dest, "status", "--delete")
    assert bad.returncode == 2
    change_round(job, 2)
    job.sync()
    check_rows(job)


def test_firn_maintain_orphans_s3(firn_job, rest_catalog_s3):
    import uuid as _uuid

    loc = rest_catalog_s3
    job = firn_job([{"stream_name": "acct"}], setup=SETUP, catalog=loc.firn_catalog(),
                   catalog_loc=loc, namespace="o_" + _uuid.uuid4().hex[:8],
                   storage={"endpoint": loc.s3.endpoint, "region": loc.s3.region,
                            "path_style": True})
    job.sync()
    change_round(job, 1)
    job.sync()
    tbl = loc.pyiceberg().load_table(job.table("acct"))
    prefix = f"s3://{loc.s3.bucket}/"
    table_dir = loc.s3.root / loc.s3.bucket / tbl.location()[len(prefix):]
    before = files_on_disk(table_dir)
    orphan = table_dir / "data" / "lost file+1.parquet"
    plant(orphan, b"x" * 100, 5 * 86400)
    dest = job.workdir / "destination.json"
    dry = run_maintain(job, dest, "orphans")
    assert dry.returncode == 0, dry.stderr
    assert orphan_lines(dry.stdout) == {tbl.location() + "/data/lost file+1.parquet"}, dry.stdout
    rm = run_maintain(job, dest, "orphans", "--delete", job.table("acct"))
    assert rm.returncode == 0 and "deleted 1 orphan files (100 bytes)" in rm.stdout, rm.stdout
    assert not orphan.exists()
    assert before == files_on_disk(table_dir)
    assert canon(loc, job.table("acct")) == job.source_rows("SELECT id, v, n FROM acct")


def test_firn_maintain_orphans_gcs(firn_job, gcs_server, monkeypatch, tmp_path):
    """fake-gcs-server keeps no modification times we can set: --older-than 0 takes every
    unreferenced object, and only the planted one is unreferenced."""
    import urllib.parse
    import urllib.request
    import uuid as _uuid

    from test_engine_partition_paths import _gcs_names

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_server.endpoint)
    prefix = f"orph-{_uuid.uuid4().hex[:8]}"
    db = tmp_path / "gcs-catalog.db"
    job = firn_job([{"stream_name": "acct"}], setup=SETUP,
                   catalog={"type": "sql", "name": "firn", "uri": f"sqlite:///{db}",
                            "warehouse": f"gs://{gcs_server.bucket}/{prefix}"})
    job.sync()
    change_round(job, 1)
    job.sync()
    before = _gcs_names(gcs_server, prefix + "/")
    table = next(n for n in before if n.endswith(".metadata.json")).split("/metadata/")[0]
    orphan = f"{table}/data/lost+found é.parquet"
    url = (f"{gcs_server.endpoint}/upload/storage/v1/b/{gcs_server.bucket}/o?uploadType=media&"
           f"{urllib.parse.urlencode({'name': orphan})}")
    urllib.request.urlopen(urllib.request.Request(url, data=b"x" * 10, method="POST"),
                           timeout=10).read()
    dest = job.workdir / "destination.json"
    dry = run_maintain(job, dest, "orphans", "--older-than", "0")
    assert dry.returncode == 0, dry.stderr
    assert orphan_lines(dry.stdout) == {f"gs://{gcs_server.bucket}/{orphan}"}, dry.stdout
    rm = run_maintain(job, dest, "orphans", "--older-than", "0", "--delete")
    assert rm.returncode == 0 and "deleted 1 orphan files (10 bytes)" in rm.stdout, rm.stdout
    assert _gcs_names(gcs_server, prefix + "/") == before
    change_round(job, 2)
    job.sync()  # the table still works: its manifests and files are all there


def test_expiry_killed_at_each_step(firn_job):
    """firn maintain expire killed (SIGKILL, FIRN_TEST_CRASH) after its commit and between its
    deletes: the table reads the source's rows, every file a snapshot reads exists, and the
    files the dead run left behind are exactly what `firn maintain orphans` then removes."""
    for point in ("expire-committed:1", "expire-deleting:1", "expire-deleting:4"):
        job = firn_job([{"stream_name": "acct"}], setup=SETUP,
                       destination_extra={"maintenance": {"min_snapshots_to_keep": 2,
                                                          "snapshot_max_age_seconds": 0}})
        job.sync()
        for k in range(1, 5):
            change_round(job, k)
            job.sync()
        dest = job.workdir / "destination.json"
        env = dict(os.environ, FIRN_TEST_CRASH=point)
        proc = subprocess.run([str(job.firn_bin), "maintain", "expire", "--destination",
                               str(dest)], capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == -signal.SIGKILL, (point, proc.returncode, proc.stderr[-2000:])
        tbl = job.loc.pyiceberg().load_table(job.table("acct"))
        assert len(tbl.metadata.snapshots) == 2, point  # the commit was made before the kill
        assert all(os.path.exists(f) for f in referenced_files(tbl, live=True)), point
        check_rows(job)
        table_dir = Path(uri_to_path(tbl.metadata.location))
        left = files_on_disk(table_dir) - referenced_files(tbl)
        assert left, point  # the dead run did not get to delete them all
        rm = run_maintain(job, dest, "orphans", "--older-than", "0", "--delete")
        assert rm.returncode == 0 and f"deleted {len(left)} orphan files" in rm.stdout, \
            (point, rm.stdout, sorted(left))
        assert not files_on_disk(table_dir) - referenced_files(tbl)
        change_round(job, 9)
        job.sync()
        check_rows(job)


def test_maintenance_external_leaves_history_and_files_alone(firn_job):
    """maintenance.mode "external": another tool expires and compacts. Retention that would
    expire nearly everything and a compaction threshold of 2 change nothing: every snapshot
    stays, none is a compaction ("replace"); firn maintain expire still works by hand."""
    job = firn_job([{"stream_name": "acct"}], setup=SETUP,
                   destination_extra={"format_version": 2, "compact_small_files": 2,
                                      "maintenance": {"mode": "external",
                                                      "min_snapshots_to_keep": 1,
                                                      "snapshot_max_age_seconds": 0}})
    job.sync()
    for k in range(1, 19):
        change_round(job, k)
        proc = job.sync()
        assert "expired " not in proc.stderr and "compacted" not in proc.stderr, proc.stderr
    tbl = job.loc.pyiceberg().load_table(job.table("acct"))
    assert len(tbl.metadata.snapshots) == 19
    assert all(summary_of(s)["operation"] != "replace" for s in tbl.metadata.snapshots)
    check_rows(job)
    ex = run_maintain(job, job.workdir / "destination.json", "expire", job.table("acct"))
    assert ex.returncode == 0 and "expired 18 snapshots (1 kept)" in ex.stdout, ex.stdout
    check_rows(job)
