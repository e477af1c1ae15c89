# SPDX-License-Identifier: Apache-2.0
"""The one place the benchmark talks to firn: write its config files, run `firn sync`, find the
tables it wrote. Everything else in the suite is firn-agnostic (it measures a child process and
reads Iceberg tables through the catalog's SQLite file), so a change to firn's command line or
config files is a change to this file only.

Config files follow firn's OLake-compatible layout (source.json, destination.json, streams.json,
state.json; see `firn spec`): a SQL catalog in `<workdir>/catalog.db` over a local warehouse
`<workdir>/warehouse`, namespace `{database}_{schema}`, zstd Parquet.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from measure import Measured, run_measured


@dataclass
class FirnJob:
    """One firn destination: its own folder, catalog and warehouse.

    mode: full_refresh (backfill only), full_refresh_cdc (backfill, then the WAL) or cdc_only.
    """

    firn_bin: Path
    workdir: Path
    conninfo: dict  # host, port, user, dbname (trust auth, no password)
    tables: list[str]
    mode: str = "full_refresh"
    parallel: int = 2
    commit_interval_s: float = 2.0
    slot: str | None = None  # None: firn's default (firn_<database>)

    @property
    def catalog_db(self) -> Path:
        return self.workdir / "catalog.db"

    def paths(self) -> dict[str, Path]:
        return {k: self.workdir / f"{k}.json" for k in ("source", "destination", "streams",
                                                        "state")}


def firn_status(firn_bin: Path | None) -> tuple[bool, str]:
    """Whether this firn binary has a working `sync` command; else (False, why)."""
    if firn_bin is None or not Path(firn_bin).is_file() or not os.access(firn_bin, os.X_OK):
        return False, f"firn sync unavailable (no firn binary at {firn_bin})"
    try:
        proc = subprocess.run([str(firn_bin), "sync", "--help"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"firn sync unavailable ({exc})"
    if proc.returncode != 0 or "sync" not in (proc.stdout + proc.stderr):
        return False, f"firn sync unavailable (`firn sync --help` exited {proc.returncode})"
    return True, "ok"


def write_configs(job: FirnJob) -> dict[str, Path]:
    """Write source/destination/streams JSON for job (state.json is firn's to write).
    initial_wait_seconds 0: a catch-up run reads up to the WAL position current at its start
    and must not idle afterwards, or the idle wait would count as apply time."""
    job.workdir.mkdir(parents=True, exist_ok=True)
    p = job.paths()
    ci = job.conninfo
    source = {"type": "postgres", "host": ci["host"], "port": int(ci["port"]),
              "database": ci["dbname"], "username": ci["user"], "sslmode": "disable",
              "schemas": ["public"], "parallelism": job.parallel, "default_mode": job.mode,
              "initial_wait_seconds": 0}
    if job.slot:
        source.update(slot=job.slot, create_slot=True)
    destination = {"catalog": {"type": "sql", "uri": f"sqlite:///{job.catalog_db}",
                               "warehouse": str(job.workdir / "warehouse")},
                   "write": {"compression": "zstd"},
                   "commit": {"interval_seconds": job.commit_interval_s},
                   "log": "warn"}
    streams = {"selected_streams": {"public": [{"stream_name": t, "sync_mode": job.mode}
                                              for t in job.tables]}}
    for key, doc in (("source", source), ("destination", destination), ("streams", streams)):
        p[key].write_text(json.dumps(doc, indent=2) + "\n")
    return p


def run_firn_sync(job: FirnJob, *, follow: bool = False, timeout_s: float | None = None,
                  stop_event: threading.Event | None = None,
                  cpus: set[int] | None = None) -> Measured:
    """Run `firn sync` for job and measure it (wall, CPU, peak RSS, RSS over time). Without
    follow it is a catch-up run that exits by itself; with follow it runs until stop_event is
    set, then gets SIGINT (firn commits what it buffered and exits). cpus: the cores it may use."""
    p = write_configs(job)
    argv = [str(job.firn_bin), "sync", "--source", str(p["source"]), "--destination",
            str(p["destination"]), "--streams", str(p["streams"]), "--state", str(p["state"])]
    if follow:
        argv.append("--follow")
    return run_measured(argv, timeout_s=timeout_s, stop_event=stop_event, sample_s=0.25,
                        cpus=cpus)


def table_metadata_location(catalog_db: Path, table: str) -> str | None:
    """Current metadata.json of `table` in a SQL (SQLite) catalog, whatever its namespace and
    catalog name; None when the catalog or table does not exist yet. Works for firn's catalog
    and pyiceberg's alike (same iceberg_tables layout)."""
    if not Path(catalog_db).is_file():
        return None
    con = sqlite3.connect(f"file:{catalog_db}?mode=ro", uri=True, timeout=5)
    try:
        row = con.execute("SELECT metadata_location FROM iceberg_tables WHERE table_name = ?",
                          (table,)).fetchone()
    except sqlite3.Error:
        return None
    finally:
        con.close()
    return row[0] if row else None
