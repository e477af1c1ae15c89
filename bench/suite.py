#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The firn benchmark suite: one command, one JSON report, one short table.

Phases (all in one PostgreSQL database `bench`, see bench/README.md for what each figure means):
 1. generate  trips + fhv_trips (galaxy-io taxi-12mo layout), narrow, wide; load rate
 2. backfill  per dataset (taxi, narrow, wide): raw parallel binary COPY to /dev/null, firn,
              Python peer (psycopg COPY -> pyarrow -> pyiceberg); wall, ratio to raw, CPU-s per
              million rows, peak RSS, output bytes and files; rows checked in the Iceberg table
 3. cdc       a full-speed pgbench mix (insert/update/delete on trips) builds a backlog in three
              slots; pg_recvlogical drains one to /dev/null (the floor), firn and the peer catch
              up on theirs; apply rate / drain rate; values checked against PostgreSQL
 4. live      a fixed-rate pgbench mix plus probe rows while firn (then the peer) follows the
              stream; commit-to-visible latency p50/p99 (probe commit vs a reader seeing it),
              RSS over time, files per commit
firn figures are "not run" with the reason when `firn sync` is unavailable: no number is made up.

Usage: suite.py --uri URI [--size smoke|small|large] [--firn PATH] [--out FILE] [--latest]
       [--workdir DIR] [--parallel N] [--skip-peer]
       suite.py --markdown REPORT.json      the README's figures table of a report
       suite.py --update-readme REPORT.json put that table into README.md's Benchmarks section
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import datagen  # noqa: E402
import measure  # noqa: E402
from firn_run import FirnJob, firn_status, run_firn_sync, table_metadata_location  # noqa: E402

DB = "bench"
PUB = "bench_pub"
PROBE_BASE = 1_000_000_000_000_000
NOT_RUN = "not run"

# Rows per table and CDC load. small fits a 2-core, 24 GiB machine in < 15 minutes.
SIZES = {
    "smoke": dict(trips=20_000, fhv_trips=30_000, narrow=30_000, wide=2_000, cdc_full_s=2,
                  cdc_clients=2, live_rate=100, live_s=2, commit_s=1.0, peer_cap_s=60,
                  firn_cap_s=60, datasets=["taxi"]),
    # The CDC phases of small (same taxi tables and load, 1 s commit interval) without the
    # narrow and wide backfills: about 3 minutes, for profiling.
    "cdc": dict(trips=1_000_000, fhv_trips=2_000_000, narrow=10_000, wide=1_000, cdc_full_s=20,
                cdc_clients=2, live_rate=500, live_s=30, commit_s=1.0, peer_cap_s=120,
                firn_cap_s=120, datasets=["taxi"]),
    "small": dict(trips=1_000_000, fhv_trips=2_000_000, narrow=3_000_000, wide=100_000,
                  cdc_full_s=20, cdc_clients=2, live_rate=500, live_s=45, commit_s=1.0,
                  peer_cap_s=150, firn_cap_s=300),
    "large": dict(trips=8_000_000, fhv_trips=32_000_000, narrow=30_000_000, wide=1_000_000,
                  cdc_full_s=60, cdc_clients=4, live_rate=2000, live_s=120, commit_s=1.0,
                  peer_cap_s=600, firn_cap_s=1800),
}
DATASETS = {"taxi": ["trips", "fhv_trips"], "narrow": ["narrow"], "wide": ["wide"]}
# galaxy-io/benchmarks data-movement/results/2026-08-31/taxi12-3route/<sut>/
# full-load-pg-iceberg-taxi-12mo-remote.json: 298,270,427 rows on a 64-vCPU c7i.16xlarge.
GALAXY_TAXI12 = {"rows": 298_270_427, "host": "c7i.16xlarge, 64 vCPU",
                 "filament": {"wall_s": 233.2, "cpu_s": 519.9, "peak_mem_gb": 12.0},
                 "olake": {"wall_s": 204.9, "cpu_s": 7934.0, "peak_mem_gb": 18.5}}


def galaxy_line(rep: dict) -> str:
    """CPU-seconds per million rows of the taxi backfill beside galaxy's published ones."""
    ref = ", ".join(f"{k} {v['cpu_s'] / (GALAXY_TAXI12['rows'] / 1e6):.2f}"
                    for k, v in GALAXY_TAXI12.items() if isinstance(v, dict))
    taxi = rep["backfill"]["taxi"]
    here = ", ".join(f"{k} {taxi[k]['cpu_s_per_mrow']:.2f}" for k in ("firn", "peer")
                     if "cpu_s_per_mrow" in taxi[k]) or "none measured"
    return (f"taxi backfill CPU-s per million rows: here {here}; galaxy-io taxi-12mo pg->iceberg "
            f"({GALAXY_TAXI12['host']}): {ref}")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pg_connect(ci: dict, dbname: str | None = None):
    import psycopg

    return psycopg.connect(host=ci["host"], port=ci["port"], user=ci["user"],
                           dbname=dbname or ci["dbname"], autocommit=True)


def conn_uri(ci: dict) -> str:
    return f"postgresql://{ci['user']}@{ci['host']}:{ci['port']}/{ci['dbname']}"


# ------------------------------------------------------------------------------ environment

def machine_info(ci: dict) -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = next(int(x.split()[1]) for x in Path("/proc/meminfo").read_text().splitlines()
                   if x.startswith("MemTotal"))
    except (OSError, StopIteration):
        mem = 0
    with pg_connect(ci, "postgres") as c:
        pgv = c.execute("SHOW server_version").fetchone()[0]
        settings = dict(c.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN ('shared_buffers', "
            "'max_wal_size', 'fsync', 'synchronous_commit', 'wal_level')").fetchall())
    import pyarrow
    import pyiceberg

    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": round(mem / 2**20, 1),
            "kernel": platform.release(), "python": platform.python_version(),
            "postgres": pgv, "pg_settings": settings, "pyarrow": pyarrow.__version__,
            "pyiceberg": pyiceberg.__version__, "loadavg_start": os.getloadavg()}


def git_rev() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True,
                               text=True).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# ---------------------------------------------------------------------------- iceberg reads

def iceberg_table(catalog_db: Path, table: str):
    from pyiceberg.table import StaticTable

    loc = table_metadata_location(catalog_db, table)
    return None if loc is None else StaticTable.from_metadata(loc)


def output_stats(workdir: Path, catalog_db: Path, tables: list[str]) -> dict:
    """Rows, data/delete files and bytes of the tables' current snapshots, plus every byte
    under the warehouse (data, deletes, manifests, metadata)."""
    rows = data_files = delete_files = file_bytes = 0
    for t in tables:
        tbl = iceberg_table(catalog_db, t)
        if tbl is None or tbl.current_snapshot() is None:
            raise RuntimeError(f"no Iceberg table {t} in {catalog_db}")
        s = tbl.current_snapshot().summary
        rows += int(s.get("total-records") or 0) - int(s.get("total-position-deletes") or 0) \
            - int(s.get("total-equality-deletes") or 0)
        data_files += int(s.get("total-data-files") or 0)
        delete_files += int(s.get("total-delete-files") or 0)
        file_bytes += int(s.get("total-files-size") or 0)
    all_bytes = sum(p.stat().st_size for p in workdir.rglob("*") if p.is_file())
    return {"rows": rows, "data_files": data_files, "delete_files": delete_files,
            "data_bytes": file_bytes, "warehouse_bytes": all_bytes}


def check_values(ci: dict, catalog_db: Path, table: str = "trips") -> dict:
    """Compare the Iceberg table with PostgreSQL by value: row count, sum of ids and of
    total_amount (the column the CDC updates touch)."""
    import pyarrow.compute as pc

    with pg_connect(ci) as c:
        n, sid, stot = c.execute(f"SELECT count(*), sum(id), sum(total_amount) FROM {table}"
                                 ).fetchone()
    tbl = iceberg_table(catalog_db, table)
    arrow = tbl.scan(selected_fields=("id", "total_amount")).to_arrow()
    got = (arrow.num_rows, pc.sum(arrow["id"]).as_py() or 0,
           pc.sum(arrow["total_amount"]).as_py() or 0)
    want = (n, int(sid or 0), stot or 0)
    return {"match": got == want, "postgres": [str(x) for x in want],
            "iceberg": [str(x) for x in got]}


# ---------------------------------------------------------------------------------- phases

def phase_generate(ci: dict, size: dict, parallel: int) -> dict:
    with pg_connect(ci, "postgres") as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {DB}")
    out = {}
    for t in DATASETS["taxi"] + DATASETS["narrow"] + DATASETS["wide"]:
        log(f"generate {t}: {size[t]:,} rows")
        out[t] = datagen.load_table(conn_uri(ci), t, size[t], parallel)
        log(f"  {out[t]['rows_per_s']:,} rows/s, {out[t]['bytes'] / 1e6:.0f} MB")
    return out


def figures(m: measure.Measured, rows: int, raw_wall: float | None) -> dict:
    f = m.summary()
    f["rows"] = rows
    f["rows_per_s"] = round(rows / m.wall_s) if m.wall_s > 0 else None
    f["cpu_s_per_mrow"] = round(m.cpu_s / (rows / 1e6), 3) if rows else None
    if raw_wall:
        f["x_raw_copy"] = round(m.wall_s / raw_wall, 2)
    return f


def backfill_firn(ci, firn_bin, wd, name, tables, rows, raw_wall, parallel, size,
                  cpus: set[int] | None = None, slot: str | None = None) -> dict:
    job = FirnJob(firn_bin=firn_bin, workdir=wd / "firn" / name, conninfo=ci, tables=tables,
                  mode="full_refresh_cdc" if name.startswith("taxi") else "full_refresh",
                  parallel=parallel, commit_interval_s=size["commit_s"], slot=slot)
    shutil.rmtree(job.workdir, ignore_errors=True)
    m = run_firn_sync(job, timeout_s=size["firn_cap_s"], cpus=cpus)
    if m.returncode != 0:
        return {"status": "failed", "exit": m.returncode, "stderr": m.stderr_tail[-1500:]}
    f = figures(m, rows, raw_wall)
    f["output"] = output_stats(job.workdir / "warehouse", job.catalog_db, tables)
    f["rows_ok"] = f["output"]["rows"] == rows
    f["status"] = "ok" if f["rows_ok"] else "wrong row count"
    return f


def backfill_peer(ci, wd, name, tables, rows, raw_wall, parallel) -> dict:
    wh = wd / "peer" / name
    shutil.rmtree(wh, ignore_errors=True)
    m = measure.run_measured([sys.executable, str(HERE / "peer.py"), "backfill", "--uri",
                              conn_uri(ci), "--warehouse", str(wh), "--tables", ",".join(tables),
                              "--parallel", str(parallel)], sample_s=0.25, capture_stdout=True)
    if m.returncode != 0:
        return {"status": "failed", "exit": m.returncode, "stderr": m.stderr_tail[-1500:]}
    f = figures(m, rows, raw_wall)
    f["output"] = output_stats(wh, wh / "catalog.db", tables)
    f["commits"] = json.loads(m.stdout.strip().splitlines()[-1])["commits"]
    f["rows_ok"] = f["output"]["rows"] == rows
    f["status"] = "ok" if f["rows_ok"] else "wrong row count"
    return f


def backfill_separate(ci, firn_bin, wd, tables, rows, parallel, size, pages) -> dict | None:
    """The taxi raw COPY and firn again with the server on the first half of the cores and the
    client (psql, firn) on the other half, as when firn runs on its own host: the co-located
    ratio also counts firn's CPU competing with the server's for the same cores. None when the
    server is not on this machine or there is one core."""
    ncpu = len(os.sched_getaffinity(0))
    with pg_connect(ci) as c:
        pids = measure.server_pids(c)
    if ncpu < 2 or not pids:
        return None
    allc = os.sched_getaffinity(0)
    ordered = sorted(allc)
    server, client = set(ordered[:ncpu // 2]), set(ordered[ncpu // 2:])
    log(f"backfill taxi, separate cores: server on {sorted(server)}, psql and firn on "
        f"{sorted(client)}")
    try:
        measure.pin(pids, server)
        raw = measure.copy_baseline(ci, tables, parallel, pages, cpus=client)
        fr = backfill_firn(ci, firn_bin, wd, "taxi-separate", tables, rows, raw["wall_s"],
                           parallel, size, cpus=client, slot="firn_bench_separate")
    finally:
        with pg_connect(ci) as c:
            measure.pin(measure.server_pids(c), allc)
            c.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                      "WHERE slot_name = 'firn_bench_separate' AND NOT active")
        shutil.rmtree(wd / "firn" / "taxi-separate", ignore_errors=True)
    fr.pop("output", None)
    return {"server_cpus": sorted(server), "client_cpus": sorted(client), "raw_copy": raw,
            "firn": fr}


def phase_backfill(ci, firn_bin, firn_info: dict, wd, size, parallel, skip_peer) -> dict:
    """firn_info: {"available", "reason"}; set to unavailable when this firn turns out to have
    only a stub engine (its sync fails with "not built")."""
    out = {}
    for name, tables in DATASETS.items():
        if name not in size.get("datasets", DATASETS):
            continue
        rows = sum(size[t] for t in tables)
        with pg_connect(ci) as c:
            pages = {t: measure.table_pages(c, t) for t in tables}
        log(f"backfill {name}: raw COPY (binary, {parallel} connections)")
        raw = measure.copy_baseline(ci, tables, parallel, pages)
        raw["rows_per_s"] = round(rows / raw["wall_s"]) if raw["wall_s"] else None
        entry = {"tables": tables, "rows": rows, "raw_copy": raw}
        if firn_info["available"]:
            log(f"backfill {name}: firn")
            entry["firn"] = backfill_firn(ci, firn_bin, wd, name, tables, rows, raw["wall_s"],
                                          parallel, size)
            if "not built" in entry["firn"].get("stderr", ""):
                last = entry["firn"]["stderr"].strip().splitlines()[-1]
                firn_info.update(available=False, reason=f"firn sync unavailable ({last})")
        if not firn_info["available"]:
            entry["firn"] = {"status": NOT_RUN, "reason": firn_info["reason"]}
        if skip_peer:
            entry["peer"] = {"status": NOT_RUN, "reason": "--skip-peer"}
        else:
            log(f"backfill {name}: python peer")
            entry["peer"] = backfill_peer(ci, wd, name, tables, rows, raw["wall_s"], parallel)
        fr, pr = entry["firn"], entry["peer"]
        if fr.get("status") == "ok" and pr.get("status") == "ok":
            entry["firn_vs_peer_speed"] = round(pr["wall_s"] / fr["wall_s"], 2)
            entry["firn_vs_peer_cpu"] = round(fr["cpu_s"] / pr["cpu_s"], 3)
        out[name] = entry
        log(f"  raw {raw['wall_s']}s; firn {fr.get('wall_s', fr.get('status'))}; "
            f"peer {pr.get('wall_s', pr.get('status'))}")
        if name == "taxi" and firn_info["available"]:
            sep = backfill_separate(ci, firn_bin, wd, tables, rows, parallel, size, pages)
            if sep:
                entry["separate"] = sep
                log(f"  separate cores: raw {sep['raw_copy']['wall_s']}s; firn "
                    f"{sep['firn'].get('wall_s', sep['firn'].get('status'))}")
    return out


def count_changes(ci: dict, slot: str, end_lsn: str) -> dict:
    """Count the row changes pending in `slot` up to end_lsn without consuming them."""
    with pg_connect(ci) as c:
        rows = c.execute(
            "SELECT chr(get_byte(data, 0)), count(*) FROM pg_logical_slot_peek_binary_changes("
            "%s, %s, NULL, 'proto_version', '1', 'publication_names', %s) GROUP BY 1",
            (slot, end_lsn, PUB)).fetchall()
    kinds = dict(rows)
    return {"inserts": kinds.get("I", 0), "updates": kinds.get("U", 0),
            "deletes": kinds.get("D", 0), "transactions": kinds.get("C", 0),
            "changes": kinds.get("I", 0) + kinds.get("U", 0) + kinds.get("D", 0)}


def pgbench(ci: dict, args: list[str], maxid: int) -> dict:
    argv = [str(measure.PG_BINDIR / "pgbench"), "-n", "-h", ci["host"], "-p", str(ci["port"]),
            "-U", ci["user"], "-f", str(HERE / "cdc_mix.sql"), "-D", f"maxid={maxid}",
            *args, DB]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"pgbench failed: {proc.stderr[-2000:]}")
    tps = None
    for line in proc.stdout.splitlines():
        if line.startswith("tps = "):
            tps = float(line.split()[2])
        if "number of transactions actually processed" in line:
            n = int(line.split(":")[1].split("/")[0])
    return {"tps": round(tps, 1) if tps else None, "transactions": n}


def cdc_prepare(ci: dict, firn_ran: bool) -> int:
    with pg_connect(ci) as c:
        maxid = c.execute("SELECT max(id) FROM trips").fetchone()[0]
        c.execute(f"DROP PUBLICATION IF EXISTS {PUB}")
        c.execute(f"CREATE PUBLICATION {PUB} FOR TABLE trips")
        c.execute("DROP SEQUENCE IF EXISTS trips_cdc_id")
        c.execute(f"CREATE SEQUENCE trips_cdc_id START {maxid + 1}")
        for slot in ("bench_raw", "bench_peer"):
            c.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                      "WHERE slot_name = %s", (slot,))
            c.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
    return maxid


def phase_cdc(ci, firn_bin, firn_state, wd, size, parallel, skip_peer, maxid) -> dict:
    log(f"cdc: full-speed pgbench mix, {size['cdc_clients']} clients, {size['cdc_full_s']}s")
    load = pgbench(ci, ["-c", str(size["cdc_clients"]), "-j", str(size["cdc_clients"]),
                        "-T", str(size["cdc_full_s"])], maxid)
    with pg_connect(ci) as c:
        end_lsn = measure.current_lsn(c)
    counts = count_changes(ci, "bench_raw", end_lsn)
    n = counts["changes"]
    log(f"  {load['tps']} tps, {n:,} changes up to {end_lsn}; pg_recvlogical drain")
    d = measure.drain_baseline(ci, "bench_raw", PUB, end_lsn)
    if d.returncode != 0:
        raise RuntimeError(f"pg_recvlogical failed: {d.stderr_tail}")
    drain = d.summary()
    drain["changes_per_s"] = round(n / d.wall_s) if d.wall_s > 0 else None
    out = {"load": load, "end_lsn": end_lsn, **counts, "raw_drain": drain}
    firn_ok, why, job = firn_state
    if job is None:
        out["firn"] = {"status": NOT_RUN, "reason": why}
    else:
        log("cdc: firn catch-up")
        m = run_firn_sync(job, timeout_s=size["firn_cap_s"])
        if m.returncode != 0:
            out["firn"] = {"status": "failed", "exit": m.returncode,
                           "stderr": m.stderr_tail[-1500:]}
        else:
            f = m.summary()
            f["changes_per_s"] = round(n / m.wall_s) if m.wall_s > 0 else None
            f["x_drain_rate"] = round(f["changes_per_s"] / drain["changes_per_s"], 3)
            f["values"] = check_values(ci, job.catalog_db)
            f["status"] = "ok" if f["values"]["match"] else "values differ"
            out["firn"] = f
    if skip_peer:
        out["peer"] = {"status": NOT_RUN, "reason": "--skip-peer"}
    else:
        log("cdc: python peer catch-up (pyiceberg upsert)")
        wh = wd / "peer" / "taxi"
        m = measure.run_measured(
            [sys.executable, str(HERE / "peer.py"), "cdc", "--uri", conn_uri(ci), "--warehouse",
             str(wh), "--tables", "trips", "--slot", "bench_peer", "--publication", PUB,
             "--until-lsn", end_lsn], timeout_s=size["peer_cap_s"], sample_s=0.25,
            capture_stdout=True, stop_signal=signal.SIGTERM)
        out["peer"] = peer_cdc_figures(ci, m, n, drain, wh)
    fr, pr = out["firn"], out["peer"]
    if fr.get("status") == "ok" and pr.get("status") == "ok":
        out["firn_vs_peer_rate"] = round(fr["changes_per_s"] / pr["changes_per_s"], 2)
    return out


def peer_cdc_figures(ci, m: measure.Measured, n: int, drain: dict, wh: Path) -> dict:
    if m.returncode != 0 and not m.timed_out:
        return {"status": "failed", "exit": m.returncode, "stderr": m.stderr_tail[-1500:]}
    f = m.summary()
    lines = m.stdout.strip().splitlines()
    done = json.loads(lines[-1]) if lines else {"changes": 0}
    f.update(done)
    f["changes_per_s"] = round(done["changes"] / m.wall_s) if m.wall_s > 0 else None
    f["x_drain_rate"] = round(f["changes_per_s"] / drain["changes_per_s"], 3)
    if m.timed_out:
        f["status"] = f"stopped at the {round(m.wall_s)}s cap: {done['changes']}/{n} changes"
    else:
        f["values"] = check_values(ci, wh / "catalog.db")
        f["status"] = "ok" if f["values"]["match"] else "values differ"
    return f


class Prober:
    """Inserts probe trips at a steady pace, remembering when each commit returned, and polls
    an Iceberg table (through its SQLite catalog) for them, remembering when each was first
    seen. Latency = seen - committed, as a reader of the table experiences it."""

    def __init__(self, ci: dict, catalog_db: Path, base: int, every_s: float = 0.25) -> None:
        self.ci, self.catalog_db, self.next_id, self.every_s = ci, catalog_db, base, every_s
        self.committed: dict[int, float] = {}
        self.seen: dict[int, float] = {}
        self.stop_insert = threading.Event()
        self.stop_read = threading.Event()
        self.snapshots_seen = 0
        self.scan_s: list[float] = []
        self.errors: list[str] = []

    def inserter(self) -> None:
        with pg_connect(self.ci) as c:
            while not self.stop_insert.is_set():
                pid = self.next_id
                self.next_id += 1
                c.execute("INSERT INTO trips (id, vendor_id, pickup_at, dropoff_at, "
                          "passenger_count, trip_distance, ratecode_id, store_and_fwd_flag, "
                          "pu_location_id, do_location_id, payment_type, fare_amount, extra, "
                          "mta_tax, tip_amount, tolls_amount, improvement_surcharge, "
                          "total_amount, congestion_surcharge, airport_fee) VALUES (%s, 1, "
                          "localtimestamp(0), localtimestamp(0), 1, 1.00, 1, 'N', 1, 1, 1, "
                          "1.00, 0, 0.50, 0, 0, 1.00, 2.50, 0, 0)", (pid,))
                self.committed[pid] = time.time()
                self.stop_insert.wait(self.every_s)

    def reader(self) -> None:
        from pyiceberg.expressions import In
        from pyiceberg.table import StaticTable

        last = None
        while not self.stop_read.is_set():
            try:
                loc = table_metadata_location(self.catalog_db, "trips")
                pending = [i for i in list(self.committed) if i not in self.seen]
                if loc and loc != last and pending:
                    last = loc
                    self.snapshots_seen += 1
                    t_scan = time.time()
                    tbl = StaticTable.from_metadata(loc)
                    got = tbl.scan(row_filter=In("id", pending), selected_fields=("id",)
                                   ).to_arrow()["id"].to_pylist()
                    now = time.time()
                    self.scan_s.append(now - t_scan)
                    for i in got:
                        self.seen.setdefault(i, now)
            except Exception as exc:  # noqa: BLE001 - a torn read is retried next poll
                self.errors.append(str(exc)[:200])
            self.stop_read.wait(0.1)

    def latencies(self) -> dict:
        """Percentiles over ALL probes: a probe never seen counts as slower than any seen one,
        so a percentile that falls on unseen probes is null (with unseen_after_s, how long the
        youngest unseen probe had been waited for) instead of a flattering figure."""
        end = time.time()
        seen = sorted(self.seen[i] - t for i, t in self.committed.items() if i in self.seen)
        unseen = [end - t for i, t in self.committed.items() if i not in self.seen]
        n = len(seen) + len(unseen)
        out = {"probes": n, "seen": len(seen)}
        if unseen:
            out["unseen_after_s"] = round(min(unseen), 3)
        if self.scan_s:
            # The reader's own time (metadata load + scan) is part of each latency; it is given
            # here so it can be told apart from the writer's.
            out["reader_scan_s_mean"] = round(statistics.fmean(self.scan_s), 3)
            out["reader_scans"] = len(self.scan_s)
        for name, p in (("p50_s", 0.50), ("p99_s", 0.99)):
            k = min(n - 1, int(p * n)) if n else 0
            out[name] = round(seen[k], 3) if k < len(seen) else None
        if seen:
            out["max_seen_s"] = round(seen[-1], 3)
            out["mean_seen_s"] = round(statistics.fmean(seen), 3)
        return out


def commit_files(catalog_db: Path, since_ms: int) -> dict:
    """Files added per snapshot (data + delete files) for snapshots of trips after since_ms."""
    tbl = iceberg_table(catalog_db, "trips")
    per = []
    for s in tbl.metadata.snapshots if tbl else []:
        if s.timestamp_ms >= since_ms and s.summary is not None:
            per.append(int(s.summary.get("added-data-files") or 0)
                       + int(s.summary.get("added-delete-files") or 0))
    if not per:
        return {"commits": 0}
    return {"commits": len(per), "files_per_commit_mean": round(statistics.fmean(per), 2),
            "files_per_commit_max": max(per), "files_total": sum(per)}


def firn_streaming(ci: dict) -> bool:
    """Whether firn's replication connection streams (its slot is active; the bench's own slots
    never are, the peer reads through SQL functions)."""
    with pg_connect(ci) as c:
        return c.execute("SELECT count(*) FROM pg_replication_slots WHERE active AND slot_name "
                         "NOT IN ('bench_raw', 'bench_peer') AND database = %s",
                         (DB,)).fetchone()[0] > 0


def live_run(ci, size, maxid, catalog_db: Path, probe_base: int, start_follower,
             ready=None) -> dict:
    """Start the follower, wait until it is ready (ready(): True once it streams; None: a fixed
    3 s), then run the fixed-rate mix with probes, wait for the probes to show up, stop the
    follower. The wait keeps the follower's start (process, catalog, key index, replication
    connection) out of the steady-state latency; it is reported as ready_s.
    start_follower(stop_event) -> Measured."""
    stop = threading.Event()
    holder: dict = {}
    since_ms = int(time.time() * 1000)
    t_start = time.monotonic()
    follower = threading.Thread(target=lambda: holder.update(m=start_follower(stop)))
    follower.start()
    deadline = t_start + 60
    while follower.is_alive() and time.monotonic() < deadline:
        if ready is None:
            if time.monotonic() - t_start >= 3:
                break
        elif ready():
            break
        time.sleep(0.1)
    ready_s = round(time.monotonic() - t_start, 2)
    prober = Prober(ci, catalog_db, probe_base)
    threads = [threading.Thread(target=prober.inserter), threading.Thread(target=prober.reader)]
    for t in threads:
        t.start()
    try:
        load = pgbench(ci, ["-c", "2", "-j", "2", "-R", str(size["live_rate"]), "-T",
                            str(size["live_s"])], maxid)
    finally:
        prober.stop_insert.set()
        threads[0].join()
        deadline = time.time() + 3 * size["commit_s"] + 20
        while time.time() < deadline and len(prober.seen) < len(prober.committed) \
                and follower.is_alive():
            time.sleep(0.2)
        prober.stop_read.set()
        threads[1].join()
        stop.set()
        follower.join()
    m: measure.Measured = holder["m"]
    f = m.summary()
    f["load"] = load
    f["ready_s"] = ready_s
    f["latency"] = prober.latencies()
    f["reader_errors"] = prober.errors[-3:]
    f["files"] = commit_files(catalog_db, since_ms)
    step = max(1, len(m.rss_samples) // 60)
    f["rss_mb_over_time"] = [[t, round(r / 2**20, 1)] for t, r in m.rss_samples[::step]]
    ok = m.returncode in (0, -signal.SIGINT, -signal.SIGTERM, 130, 143)
    f["status"] = "ok" if ok and f["latency"]["seen"] == f["latency"]["probes"] else (
        "failed" if not ok else "probes missing")
    if not ok:
        f["stderr"] = m.stderr_tail[-1500:]
    return f


def phase_live(ci, firn_state, wd, size, skip_peer, maxid) -> dict:
    out = {"rate_tps": size["live_rate"], "seconds": size["live_s"],
           "commit_interval_s": size["commit_s"]}
    _, why, job = firn_state
    if job is None:
        out["firn"] = {"status": NOT_RUN, "reason": why}
    else:
        log(f"live: firn --follow under {size['live_rate']} tps for {size['live_s']}s")
        out["firn"] = live_run(ci, size, maxid, job.catalog_db, PROBE_BASE,
                               lambda stop: run_firn_sync(job, follow=True, stop_event=stop),
                               ready=lambda: firn_streaming(ci))
    if skip_peer:
        out["peer"] = {"status": NOT_RUN, "reason": "--skip-peer"}
    else:
        wh = wd / "peer" / "taxi"
        pre = None
        if job is not None:
            # Untimed: let the peer take in what the firn run above produced, so both start
            # the live run with an empty backlog.
            with pg_connect(ci) as c:
                lsn = measure.current_lsn(c)
            log("live: python peer catch-up before its run (untimed)")
            pre = measure.run_measured(
                [sys.executable, str(HERE / "peer.py"), "cdc", "--uri", conn_uri(ci),
                 "--warehouse", str(wh), "--tables", "trips", "--slot", "bench_peer",
                 "--publication", PUB, "--until-lsn", lsn], timeout_s=size["peer_cap_s"],
                stop_signal=signal.SIGTERM)
        log(f"live: python peer --follow under {size['live_rate']} tps for {size['live_s']}s")
        argv = [sys.executable, str(HERE / "peer.py"), "cdc", "--uri", conn_uri(ci),
                "--warehouse", str(wh), "--tables", "trips", "--slot", "bench_peer",
                "--publication", PUB, "--follow", "--interval", str(size["commit_s"])]
        out["peer"] = live_run(ci, size, maxid, wh / "catalog.db", PROBE_BASE + 10_000_000,
                               lambda stop: measure.run_measured(
                                   argv, stop_event=stop, sample_s=0.25,
                                   stop_signal=signal.SIGTERM, capture_stdout=True))
        if pre is not None and (pre.timed_out or pre.returncode != 0):
            out["peer"]["status"] += " (backlog not drained before the run)"
    return out


# ---------------------------------------------------------------------------------- report

def fmt(v, unit="", nd=1) -> str:
    if v is None:
        return "-"
    if isinstance(v, (int, float)):
        return f"{v:,.{nd}f}{unit}" if isinstance(v, float) else f"{v:,}{unit}"
    return str(v)


def pct(la: dict, key: str) -> str:
    """A latency percentile for the tables: '> N' when it falls on probes never seen."""
    if la.get(key) is not None:
        return f"{la[key]:.2f}"
    return f">{la['unseen_after_s']:.0f}" if "unseen_after_s" in la else "-"


def print_table(rep: dict, out=sys.stdout) -> None:
    w = out.write
    mi = rep["machine"]
    w(f"\nfirn benchmark, size {rep['size']}, {rep['started']}, git {rep['git']}\n")
    w(f"machine: {mi['cpu']}, {mi['cores']} cores, {mi['mem_gib']} GiB, PostgreSQL "
      f"{mi['postgres']}, load avg at start {mi['loadavg_start'][0]:.1f}\n\n")
    w("generate   " + "  ".join(f"{t} {g['rows']:,} rows @ {g['rows_per_s']:,}/s"
                                for t, g in rep["generate"].items()) + "\n\n")
    w(f"{'backfill':<9}{'system':<7}{'wall s':>8}{'rows/s':>12}{'x raw':>7}{'cpu-s/Mrow':>11}"
      f"{'peak MB':>9}{'out MB':>8}{'files':>6}  status\n")
    for name, e in rep["backfill"].items():
        raw = e["raw_copy"]
        w(f"{name:<9}{'raw':<7}{raw['wall_s']:>8.2f}{fmt(raw['rows_per_s']):>12}{'1.00':>7}"
          f"{'':>11}{'':>9}{'':>8}{'':>6}  COPY binary x{raw['parallel']}\n")
        for sysname in ("firn", "peer"):
            f = e[sysname]
            if "wall_s" not in f:
                w(f"{'':<9}{sysname:<7}{'':>61}  {f['status']}: {f.get('reason', '')}\n")
                continue
            o = f["output"]
            w(f"{'':<9}{sysname:<7}{f['wall_s']:>8.2f}{fmt(f['rows_per_s']):>12}"
              f"{f['x_raw_copy']:>7.2f}{f['cpu_s_per_mrow']:>11.2f}{f['peak_rss_mb']:>9.0f}"
              f"{o['data_bytes'] / 1e6:>8.1f}{o['data_files'] + o['delete_files']:>6}"
              f"  {f['status']}\n")
        sep = e.get("separate")
        if sep and "wall_s" in sep["firn"]:
            r, f = sep["raw_copy"], sep["firn"]
            w(f"{'':<9}{'raw':<7}{r['wall_s']:>8.2f}{fmt(round(e['rows'] / r['wall_s'])):>12}"
              f"{'1.00':>7}{'':>11}{'':>9}{'':>8}{'':>6}  server on cores {sep['server_cpus']}, "
              f"psql on {sep['client_cpus']}\n")
            w(f"{'':<9}{'firn':<7}{f['wall_s']:>8.2f}{fmt(f['rows_per_s']):>12}"
              f"{f['x_raw_copy']:>7.2f}{f['cpu_s_per_mrow']:>11.2f}{f['peak_rss_mb']:>9.0f}"
              f"{'':>8}{'':>6}  {f['status']}, on cores {sep['client_cpus']}\n")
    c = rep["cdc"]
    w(f"\ncdc backlog: {c['changes']:,} changes ({c['inserts']:,} I / {c['updates']:,} U / "
      f"{c['deletes']:,} D) from pgbench at {c['load']['tps']} tps\n")
    w(f"{'':<9}{'system':<7}{'wall s':>8}{'changes/s':>12}{'x drain':>8}{'cpu s':>8}"
      f"{'peak MB':>9}  status\n")
    d = c["raw_drain"]
    w(f"{'':<9}{'drain':<7}{d['wall_s']:>8.2f}{fmt(d['changes_per_s']):>12}{'1.00':>8}"
      f"{d['cpu_s']:>8.2f}{d['peak_rss_mb']:>9.0f}  pg_recvlogical pgoutput\n")
    for sysname in ("firn", "peer"):
        f = c[sysname]
        if "wall_s" not in f:
            w(f"{'':<9}{sysname:<7}{'':>45}  {f['status']}: {f.get('reason', '')}\n")
            continue
        w(f"{'':<9}{sysname:<7}{f['wall_s']:>8.2f}{fmt(f['changes_per_s']):>12}"
          f"{f['x_drain_rate']:>8.3f}{f['cpu_s']:>8.2f}{f['peak_rss_mb']:>9.0f}  {f['status']}\n")
    lv = rep["live"]
    w(f"\nlive {lv['rate_tps']} tps for {lv['seconds']}s, commit interval "
      f"{lv['commit_interval_s']}s\n")
    w(f"{'':<9}{'system':<7}{'p50 s':>8}{'p99 s':>8}{'probes':>8}{'peak MB':>9}{'commits':>8}"
      f"{'files/c':>8}  status\n")
    for sysname in ("firn", "peer"):
        f = lv[sysname]
        if "wall_s" not in f:
            w(f"{'':<9}{sysname:<7}{'':>49}  {f['status']}: {f.get('reason', '')}\n")
            continue
        la, fi = f["latency"], f["files"]
        w(f"{'':<9}{sysname:<7}{pct(la, 'p50_s'):>8}{pct(la, 'p99_s'):>8}"
          f"{la['seen']:>4}/{la['probes']:<3}{f['peak_rss_mb']:>9.0f}{fi['commits']:>8}"
          f"{fmt(fi.get('files_per_commit_mean'), nd=2):>8}  {f['status']}\n")
    w("\n" + galaxy_line(rep) + "\n")
    w("firn / peer: " + (json.dumps(rep["firn_vs_peer"]) if rep["firn_vs_peer"] else
                           "not available (firn not run)") + "\n")
    w(f"total {rep['total_s']:.0f}s\n")


def markdown(rep: dict) -> str:
    """The README's figures table for a report (bench/suite.py --markdown REPORT)."""
    mi = rep["machine"]
    lines = [f"Size `{rep['size']}`, run {rep['started'][:10]} at git `{rep['git']}` on {mi['cpu']}, "
             f"{mi['cores']} cores, {mi['mem_gib']} GiB, PostgreSQL {mi['postgres'].split()[0]}, "
             f"parallelism {rep['parallel']} (load average {mi['loadavg_start'][0]:.1f} at start: "
             f"a shared machine, so read ratios rather than absolute rates).", "",
             "| phase | system | wall s | rate | x floor | CPU-s / M rows | peak RSS MB | "
             "output | status |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]

    def row(*cells) -> None:
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")

    for name, e in rep["backfill"].items():
        raw = e["raw_copy"]
        row(f"backfill {name} ({e['rows']:,} rows)", "raw COPY binary", f"{raw['wall_s']:.2f}",
            f"{raw['rows_per_s']:,} rows/s", "1.00", "", "", "/dev/null", "floor")
        for sysname in ("firn", "peer"):
            f = e[sysname]
            if "wall_s" not in f:
                row("", sysname, "", "", "", "", "", "", f"{f['status']} ({f.get('reason', '')})")
                continue
            o = f["output"]
            row("", sysname, f"{f['wall_s']:.2f}", f"{f['rows_per_s']:,} rows/s",
                f"{f['x_raw_copy']:.2f}", f"{f['cpu_s_per_mrow']:.2f}", f"{f['peak_rss_mb']:.0f}",
                f"{o['data_bytes'] / 1e6:.1f} MB, {o['data_files'] + o['delete_files']} files",
                f["status"])
        sep = e.get("separate")
        if sep and "wall_s" in sep["firn"]:
            r, f = sep["raw_copy"], sep["firn"]
            row("", f"raw COPY binary, server on cores {sep['server_cpus']}, psql on "
                f"{sep['client_cpus']}", f"{r['wall_s']:.2f}",
                f"{round(e['rows'] / r['wall_s']):,} rows/s", "1.00", "", "", "/dev/null",
                "floor")
            row("", f"firn on cores {sep['client_cpus']}", f"{f['wall_s']:.2f}",
                f"{f['rows_per_s']:,} rows/s", f"{f['x_raw_copy']:.2f}",
                f"{f['cpu_s_per_mrow']:.2f}", f"{f['peak_rss_mb']:.0f}", "", f["status"])
    c = rep["cdc"]
    d = c["raw_drain"]
    row(f"CDC backlog ({c['changes']:,} changes)", "pg_recvlogical", f"{d['wall_s']:.2f}",
        f"{d['changes_per_s']:,} changes/s", "1.00", "", "", "/dev/null", "floor")
    for sysname in ("firn", "peer"):
        f = c[sysname]
        if "wall_s" not in f:
            row("", sysname, "", "", "", "", "", "", f"{f['status']} ({f.get('reason', '')})")
            continue
        row("", sysname, f"{f['wall_s']:.2f}", f"{f['changes_per_s']:,} changes/s",
            f"{f['x_drain_rate']:.3f}", "", f"{f['peak_rss_mb']:.0f}", "", f["status"])
    lv = rep["live"]
    for sysname in ("firn", "peer"):
        f = lv[sysname]
        label = f"live {lv['rate_tps']} tps, {lv['seconds']} s" if sysname == "firn" else ""
        if "wall_s" not in f:
            row(label, sysname, "", "", "", "", "", "", f"{f['status']} ({f.get('reason', '')})")
            continue
        la, fi = f["latency"], f["files"]
        row(label, sysname, "", f"latency p50 {pct(la, 'p50_s')} s, p99 {pct(la, 'p99_s')} s "
            f"({la['seen']}/{la['probes']} probes seen)", "",
            "", f"{f['peak_rss_mb']:.0f}",
            f"{fi['commits']} commits, {fi.get('files_per_commit_mean')} files/commit",
            f["status"])
    lines.append("")
    lines.append(galaxy_line(rep) + ".")
    lines.append("")
    lines.append("firn / peer: " + (", ".join(f"{k} {v}" for k, v in rep["firn_vs_peer"].items())
                                    or "not available (firn not run)"))
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--markdown":
        sys.stdout.write(markdown(json.loads(Path(sys.argv[2]).read_text())))
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "--update-readme":
        readme = REPO / "README.md"
        text = readme.read_text()
        begin, end = "<!-- bench figures: begin -->\n", "<!-- bench figures: end -->"
        i, j = text.index(begin) + len(begin), text.index(end)
        md = markdown(json.loads(Path(sys.argv[2]).read_text()))
        readme.write_text(text[:i] + md + text[j:])
        log(f"README.md figures replaced from {sys.argv[2]}")
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--uri", default=os.environ.get("FIRN_TEST_PGURI"))
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--firn", default=os.environ.get("FIRN_BIN",
                                                     str(REPO / "build/release/src/cli/firn")))
    ap.add_argument("--out", help="report file (default bench/results/<timestamp>.json)")
    ap.add_argument("--latest", action="store_true", help="also write bench/results/latest.json")
    ap.add_argument("--workdir", help="scratch folder (default: a temporary one, removed)")
    ap.add_argument("--parallel", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--skip-peer", action="store_true")
    args = ap.parse_args()
    if not args.uri:
        ap.error("--uri or FIRN_TEST_PGURI is required")
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(args.uri)
    ci = {"host": info.get("host", "127.0.0.1"), "port": int(info.get("port", 5432)),
          "user": info.get("user") or os.environ.get("PGUSER", "postgres"), "dbname": DB}
    size = dict(SIZES[args.size], name=args.size)
    t0 = time.monotonic()
    started = dt.datetime.now(dt.timezone.utc)
    wd = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="firn-bench-"))
    wd.mkdir(parents=True, exist_ok=True)
    firn_bin = Path(args.firn) if args.firn else None
    firn_ok, firn_why = firn_status(firn_bin)
    rep: dict = {"size": args.size, "sizes": size, "started": started.isoformat(timespec="seconds"),
                 "git": git_rev(), "parallel": args.parallel,
                 "firn": {"binary": str(firn_bin), "available": firn_ok, "reason": firn_why},
                 "reference": {"galaxy_taxi_12mo_pg_iceberg": GALAXY_TAXI12},
                 "machine": machine_info(ci)}
    log(f"size {args.size}, parallel {args.parallel}, firn: {firn_why}, scratch {wd}")
    try:
        rep["generate"] = phase_generate(ci, size, args.parallel)
        rep["backfill"] = phase_backfill(ci, firn_bin, rep["firn"], wd, size, args.parallel,
                                         args.skip_peer)
        firn_ok, firn_why = rep["firn"]["available"], rep["firn"]["reason"]
        fb = rep["backfill"]["taxi"]["firn"]
        job = None
        why = firn_why
        if firn_ok and fb.get("status") == "ok":
            job = FirnJob(firn_bin=firn_bin, workdir=wd / "firn" / "taxi", conninfo=ci,
                          tables=DATASETS["taxi"], mode="full_refresh_cdc",
                          parallel=args.parallel, commit_interval_s=size["commit_s"])
        elif firn_ok:
            why = f"firn backfill of taxi {fb.get('status')}"
        firn_state = (firn_ok, why, job)
        maxid = cdc_prepare(ci, job is not None)
        rep["cdc"] = phase_cdc(ci, firn_bin, firn_state, wd, size, args.parallel,
                               args.skip_peer, maxid)
        rep["live"] = phase_live(ci, firn_state, wd, size, args.skip_peer, maxid)
    finally:
        with pg_connect(ci, "postgres") as c:
            c.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                      "WHERE database = %s AND NOT active", (DB,))
        if not args.workdir:
            shutil.rmtree(wd, ignore_errors=True)
    ratios = {}
    for name, e in rep["backfill"].items():
        if "firn_vs_peer_speed" in e:
            ratios[f"backfill_{name}_speed"] = e["firn_vs_peer_speed"]
            ratios[f"backfill_{name}_cpu"] = e["firn_vs_peer_cpu"]
    if "firn_vs_peer_rate" in rep["cdc"]:
        ratios["cdc_apply_rate"] = rep["cdc"]["firn_vs_peer_rate"]
    lf, lp = rep["live"]["firn"].get("latency", {}), rep["live"]["peer"].get("latency", {})
    if lf.get("p50_s") and lp.get("p50_s"):
        ratios["live_p50_latency"] = round(lf["p50_s"] / lp["p50_s"], 3)
    rep["firn_vs_peer"] = ratios
    rep["machine"]["loadavg_end"] = os.getloadavg()
    rep["total_s"] = round(time.monotonic() - t0, 1)
    out = Path(args.out) if args.out else (
        HERE / "results" / f"{started.strftime('%Y%m%dT%H%M%SZ')}-{args.size}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rep, indent=1) + "\n")
    if args.latest:
        (HERE / "results").mkdir(exist_ok=True)
        (HERE / "results" / "latest.json").write_text(json.dumps(rep, indent=1) + "\n")
    print_table(rep)
    log(f"report: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
