# SPDX-License-Identifier: Apache-2.0
"""Running `firn sync` from the interop tests of tables firn writes
(tests/interop/test_iceberg_firn_*.py), and the checks those tests share: snapshot summaries
against the manifests, partition tuples against the rows, the snapshot chain.

A FirnJob is one source database synced into one SQL catalog (SQLite file + local warehouse,
catalog name "firn", namespace "src"), with its own replication slot and publication named after
the database. The `firn_job` fixture (conftest.py) makes a fresh database and job per test and
drops the slot and the database afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from sparkutil import SqlCatalogLoc, canon_rows, uri_to_path

NAMESPACE = "src"


@dataclass
class FirnJob:
    """One source database (`dbname` on cluster `pg`) synced by `firn_bin` into `loc`.

    streams: stream entries of selected_streams["public"] (dicts with at least stream_name);
    mode: the source's default sync mode."""

    firn_bin: Path
    pg: Any  # conftest.PgCluster
    dbname: str
    workdir: Path
    streams: list[dict] = field(default_factory=list)
    mode: str = "full_refresh_cdc"
    runs: int = 0
    # a catch-up run commits once at its end (and whenever this interval passed): large, so
    # that one run's changes land in one snapshot per table
    commit_interval_s: int = 600
    # more destination.json keys (readers, format_version, metadata_columns...)
    destination_extra: dict = field(default_factory=dict)
    # another destination than the job's own SQL catalog: the "catalog" object of
    # destination.json, an optional "storage" object, and what `loc` returns (an object with
    # pyiceberg() and metadata_location(table), e.g. rest_fixtures.RestCatalogLoc)
    catalog: dict | None = None
    storage: dict | None = None
    catalog_loc: Any = None
    namespace: str = NAMESPACE
    slot_suffix: str = ""  # several jobs on one database need their own slots

    @property
    def loc(self) -> SqlCatalogLoc:
        if self.catalog_loc is not None:
            return self.catalog_loc
        return SqlCatalogLoc(self.workdir / "catalog.db", self.workdir / "warehouse", "firn")

    @property
    def slot(self) -> str:
        return f"firn_{self.dbname}{self.slot_suffix}"

    def table(self, name: str) -> str:
        return f"{self.namespace}.{name}"

    def connect(self, **kwargs):
        """A psycopg connection to the source database (autocommit)."""
        return self.pg.connect(dbname=self.dbname, **kwargs)

    def sql(self, *statements: str) -> None:
        """Runs statements in one source transaction."""
        with self.connect(autocommit=False) as conn:
            for stmt in statements:
                conn.execute(stmt)
            conn.commit()

    def source_raw(self, query: str) -> list[tuple]:
        """Rows of a query on the source as psycopg returns them (for assert_readers_agree,
        which canonicalizes itself)."""
        with self.connect() as conn:
            conn.execute("SET TIME ZONE 'UTC'")
            return conn.execute(query).fetchall()

    def source_rows(self, query: str) -> list[tuple]:
        """Rows of a query on the source, canonical and sorted (what the readers must return)."""
        return canon_rows(self.source_raw(query))

    def wal_lsn(self) -> int:
        with self.connect() as conn:
            text = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
        hi, lo = text.split("/")
        return (int(hi, 16) << 32) | int(lo, 16)

    def write_configs(self) -> dict[str, Path]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "warehouse").mkdir(exist_ok=True)
        paths = {k: self.workdir / f"{k}.json" for k in ("source", "destination", "streams",
                                                         "state")}
        source = {"type": "postgres", "host": self.pg.host, "port": self.pg.port,
                  "database": self.dbname, "username": self.pg.user, "sslmode": "disable",
                  "slot": self.slot, "publication": self.slot, "create_slot": True,
                  "create_publication": True, "default_mode": self.mode,
                  "initial_wait_seconds": 0, "parallelism": 2}
        catalog = self.catalog or {"type": "sql", "name": "firn",
                                   "uri": f"sqlite:///{self.loc.db}",
                                   "warehouse": self.loc.warehouse_uri}
        destination = {"catalog": catalog, "namespace": self.namespace,
                       "commit": {"interval_seconds": self.commit_interval_s},
                       "log": "info", **self.destination_extra}
        if self.storage:
            destination["storage"] = self.storage
        streams = {"selected_streams": {"public": self.streams}}
        for key, doc in (("source", source), ("destination", destination),
                         ("streams", streams)):
            paths[key].write_text(json.dumps(doc, indent=1))
        return paths

    def sync_command(self) -> list[str]:
        """The `firn sync` command line of this job (writes the config files)."""
        p = self.write_configs()
        return [str(self.firn_bin), "sync", "--source", str(p["source"]), "--destination",
                str(p["destination"]), "--streams", str(p["streams"]), "--state", str(p["state"])]

    def sync(self, check: bool = True, timeout: float = 180) -> subprocess.CompletedProcess:
        """One catch-up `firn sync` run (backfill when due, then the WAL up to its start);
        fails the test on a non-zero exit unless check is False."""
        p = self.write_configs()
        env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS",
                                                           "detect_leaks=1:abort_on_error=0"))
        proc = subprocess.run([str(self.firn_bin), "sync", "--source", str(p["source"]),
                               "--destination", str(p["destination"]), "--streams",
                               str(p["streams"]), "--state", str(p["state"])],
                              capture_output=True, text=True, timeout=timeout, env=env)
        self.runs += 1
        (self.workdir / f"sync-{self.runs}.log").write_text(proc.stdout + proc.stderr)
        if check and proc.returncode != 0:
            raise AssertionError(f"firn sync run {self.runs} exited {proc.returncode}:\n"
                                 f"{proc.stderr[-4000:]}")
        return proc

    def state(self) -> dict:
        return json.loads((self.workdir / "state.json").read_text())

    def drop(self) -> None:
        """Drops the replication slot (so the database can be dropped)."""
        with self.pg.connect() as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND NOT active", (self.slot,))


# ---------------------------------------------------------------------------------------------
# Checks on the Iceberg side, through pyiceberg's metadata readers.

def lsn_int(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def snapshot_chain(tbl) -> list:
    """The main branch's snapshots from the first to the current one; asserts the chain is
    linear (every snapshot of the table is on it, parents link up, sequence numbers grow)."""
    snaps = {s.snapshot_id: s for s in tbl.snapshots()}
    chain = []
    cur = tbl.current_snapshot()
    while cur is not None:
        chain.append(cur)
        cur = snaps.get(cur.parent_snapshot_id) if cur.parent_snapshot_id is not None else None
    chain.reverse()
    assert chain and chain[0].parent_snapshot_id is None, "chain does not reach a root snapshot"
    assert {s.snapshot_id for s in chain} == set(snaps), "snapshots off the main chain"
    seqs = [s.sequence_number for s in chain]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), f"sequence numbers {seqs}"
    hist = [h.snapshot_id for h in tbl.history()]
    assert hist == [s.snapshot_id for s in chain], "history differs from the parent chain"
    return chain


def summary_of(snap) -> dict[str, str]:
    out = dict(snap.summary.additional_properties)
    out["operation"] = snap.summary.operation.value
    return out


def entries_by_snapshot(tbl, snap) -> list[dict]:
    """Manifest entries of the snapshot's manifests (pyiceberg inspect.entries)."""
    return tbl.inspect.entries(snapshot_id=snap.snapshot_id).to_pylist()


def check_summary_against_manifests(tbl, snap) -> dict[str, str]:
    """The snapshot summary's added-* and total-* counts equal what its manifests hold (read by
    pyiceberg): files ADDED by this snapshot, and every live file. Returns the summary."""
    s = summary_of(snap)
    entries = entries_by_snapshot(tbl, snap)
    live = [e for e in entries if e["status"] != 2]
    added = [e for e in live if e["status"] == 1 and e["snapshot_id"] == snap.snapshot_id]

    def count(rows, content):
        return sum(1 for e in rows if e["data_file"]["content"] == content)

    def records(rows, content):
        return sum(e["data_file"]["record_count"] for e in rows
                   if e["data_file"]["content"] == content)

    def size(rows):
        return sum(e["data_file"]["file_size_in_bytes"] for e in rows)

    want = {
        "total-data-files": count(live, 0),
        "total-delete-files": count(live, 1) + count(live, 2),
        "total-records": records(live, 0),
        "total-position-deletes": records(live, 1),
        "total-equality-deletes": records(live, 2),
        "total-files-size": size(live),
    }
    got = {k: int(s.get(k, -1)) for k in want}
    assert got == want, f"summary totals of snapshot {snap.snapshot_id}: {s}"
    added_want = {
        "added-data-files": count(added, 0),
        "added-records": records(added, 0),
        "added-delete-files": count(added, 1) + count(added, 2),
        "added-position-delete-files": count(added, 1),
        "added-position-deletes": records(added, 1),
        "added-files-size": size(added),
    }
    added_got = {k: int(s.get(k, 0)) for k in added_want}
    assert added_got == added_want, f"summary added-* of snapshot {snap.snapshot_id}: {s}"
    # every delete file must be a position-delete file with its data file's partition
    for e in live:
        df = e["data_file"]
        assert df["file_format"].upper() == "PARQUET", df["file_path"]
        assert df["content"] in (0, 1), f"firn wrote content {df['content']}: {df['file_path']}"
    return s


def check_partitions(tbl, partition_columns: Sequence[str]) -> int:
    """Every live data file's partition tuple equals the table spec's transforms applied to each
    of its rows (the file read back with pyarrow), and lies under the matching partition path.
    Returns the number of data files checked."""
    import pyarrow.parquet as pq

    spec = tbl.spec()
    schema = tbl.schema()
    fields = []
    for pf in spec.fields:
        src = schema.find_field(pf.source_id)
        fields.append((pf.name, src.name, pf.transform.transform(src.field_type)))
    assert [f[1] for f in fields] == list(partition_columns), spec
    n = 0
    for df in tbl.inspect.data_files().to_pylist():
        path = uri_to_path(df["file_path"])
        table = pq.read_table(path)
        part = df["partition"]
        for name, col, fn in fields:
            # columns a file lacks (added later) read as null
            values = table.column(col).to_pylist() if col in table.column_names else [None]
            got = {_transform_value(fn, v) for v in values}
            assert got == {_part_value(part[name])}, (
                f"{df['file_path']}: partition {name}={part[name]} but rows give {got}")
        n += 1
    return n


def _transform_value(fn, v):
    import datetime as dt

    if isinstance(v, dt.datetime):
        # pyiceberg's transforms take the Iceberg physical value (µs since epoch)
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc if v.tzinfo else None)
        delta = v - epoch
        v = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    elif isinstance(v, dt.date):
        v = (v - dt.date(1970, 1, 1)).days
    return fn(v)


def _part_value(v):
    import datetime as dt

    if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
        return (v - dt.date(1970, 1, 1)).days
    return v


def firn_summaries(chain: Iterable) -> list[dict[str, str]]:
    return [summary_of(s) for s in chain]
