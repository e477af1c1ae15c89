# SPDX-License-Identifier: Apache-2.0
"""Measuring child processes and the raw PostgreSQL baselines.

`run_measured` starts a command through spawn.py, samples its resident set size from /proc while
it runs, and takes from spawn.py's os.wait4 the kernel's own user and system CPU seconds and peak
RSS (ru_maxrss) of that command. `copy_baseline` is the raw backfill floor: parallel
`COPY (SELECT * FROM t WHERE ctid >= '(a,0)' AND ctid < '(b,0)') TO STDOUT (FORMAT binary)` by
psql into /dev/null. `drain_baseline` is the raw CDC floor: pg_recvlogical with the pgoutput
plugin into /dev/null up to a fixed LSN.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PG_BINDIR = Path(os.environ.get("FIRN_PG_BINDIR", "/usr/lib/postgresql/15/bin"))
PAGE_SIZE = 8192
SPAWN = Path(__file__).resolve().parent / "spawn.py"


@dataclass
class Measured:
    """What one child process cost: wall seconds, CPU seconds (user + sys, children of the
    child included when they were waited for), peak RSS in bytes, exit status, RSS samples
    [(seconds since start, bytes)] and the tail of its stderr."""

    argv: list[str]
    wall_s: float = 0.0
    user_s: float = 0.0
    sys_s: float = 0.0
    peak_rss: int = 0
    returncode: int | None = None
    rss_samples: list[tuple[float, int]] = field(default_factory=list)
    stderr_tail: str = ""
    stdout: str = ""
    timed_out: bool = False

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s

    def summary(self) -> dict:
        return {"wall_s": round(self.wall_s, 3), "cpu_s": round(self.cpu_s, 3),
                "user_s": round(self.user_s, 3), "sys_s": round(self.sys_s, 3),
                "peak_rss_mb": round(self.peak_rss / 2**20, 1), "exit": self.returncode,
                "timed_out": self.timed_out}


def rss_of(pid: int) -> int | None:
    """Resident set size of a live process in bytes (VmRSS), None when it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


def run_measured(argv: list[str], *, env: dict | None = None, timeout_s: float | None = None,
                 sample_s: float = 0.5, stop_event: threading.Event | None = None,
                 stop_signal: int = signal.SIGINT, capture_stdout: bool = False,
                 cwd: str | None = None, cpus: set[int] | None = None) -> Measured:
    """Run argv to completion (or until timeout_s / stop_event, then stop_signal, then SIGKILL
    after 30 s) through spawn.py and measure it; cpus: the cores it may run on (None: all).
    Never raises for a failing command: check returncode (negative: killed by that signal)."""
    m = Measured(argv=[str(a) for a in argv])
    rfd, wfd = os.pipe()
    t0 = time.monotonic()
    out_file = subprocess.PIPE if capture_stdout else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, "-S", "-E", "-s", str(SPAWN), str(wfd), *m.argv],
                            env=env, stdout=out_file, stderr=subprocess.PIPE, cwd=cwd,
                            pass_fds=(wfd,),
                            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    os.close(wfd)
    tails: dict[str, bytes] = {"err": b"", "out": b"", "ctl": b""}

    def drain(stream, key: str, keep: int) -> None:
        for chunk in iter(lambda: stream.read(65536), b""):
            tails[key] = (tails[key] + chunk)[-keep:]

    ctl = os.fdopen(rfd, "rb", buffering=0)
    readers = [threading.Thread(target=drain, args=(proc.stderr, "err", 8192), daemon=True),
               threading.Thread(target=drain, args=(ctl, "ctl", 1 << 16), daemon=True)]
    if capture_stdout:
        readers.append(threading.Thread(target=drain, args=(proc.stdout, "out", 1 << 24),
                                        daemon=True))
    for r in readers:
        r.start()
    stopping_since = None
    child = None
    while proc.poll() is None:
        now = time.monotonic()
        if child is None and b"\n" in tails["ctl"]:
            child = int(tails["ctl"].split(b"\n", 1)[0])
        rss = rss_of(child) if child else None
        if rss is not None:
            m.rss_samples.append((round(now - t0, 2), rss))
        want_stop = (timeout_s is not None and now - t0 > timeout_s) or (
            stop_event is not None and stop_event.is_set())
        if want_stop and stopping_since is None:
            m.timed_out = timeout_s is not None and now - t0 > timeout_s
            proc.send_signal(stop_signal)
            stopping_since = now
        elif stopping_since is not None and now - stopping_since > 30:
            if child:
                os.kill(child, signal.SIGKILL)
            proc.kill()
        try:
            proc.wait(timeout=sample_s if stopping_since is None else 0.05)
        except subprocess.TimeoutExpired:
            pass
    m.wall_s = time.monotonic() - t0
    for r in readers:
        r.join(timeout=5)
    lines = tails["ctl"].decode().splitlines()
    rec = json.loads(lines[1]) if len(lines) > 1 else {"exit": proc.returncode, "user_s": 0.0,
                                                       "sys_s": 0.0, "maxrss": 0}
    m.returncode = rec["exit"]
    m.user_s, m.sys_s, m.peak_rss = rec["user_s"], rec["sys_s"], rec["maxrss"]
    m.wall_s = rec.get("wall_s", m.wall_s)
    m.stderr_tail = tails["err"].decode("utf-8", "replace")[-4000:]
    m.stdout = tails["out"].decode("utf-8", "replace")
    return m


def table_pages(conn, table: str) -> int:
    return conn.execute("SELECT pg_relation_size(%s)", (table,)).fetchone()[0] // PAGE_SIZE


def ctid_chunks(pages: int, parts: int) -> list[tuple[int, int | None]]:
    """Split [0, pages) into `parts` block ranges; the last is open-ended (None) so rows on
    pages added after the size was read are not missed."""
    step = max(1, -(-pages // max(1, parts)))
    out: list[tuple[int, int | None]] = []
    lo = 0
    while lo < pages:
        out.append((lo, lo + step))
        lo += step
    if not out:
        out.append((0, None))
    out[-1] = (out[-1][0], None)
    return out


def ctid_where(lo: int, hi: int | None) -> str:
    where = f"ctid >= '({lo},0)'"
    if hi is not None:
        where += f" AND ctid < '({hi},0)'"
    return where


def copy_baseline(conninfo: dict, tables: list[str], parallel: int, pages: dict[str, int],
                  fmt: str = "binary", cpus: set[int] | None = None) -> dict:
    """Raw backfill floor: every table split into `parallel` ctid ranges, each range copied by
    its own `psql -c "COPY (...) TO STDOUT (FORMAT binary)" > /dev/null`, at most `parallel`
    at once. Returns wall seconds and the summed CPU seconds of the psql clients."""
    work: queue.Queue = queue.Queue()
    for t in tables:
        for lo, hi in ctid_chunks(pages[t], parallel):
            work.put(f"COPY (SELECT * FROM {t} WHERE {ctid_where(lo, hi)}) TO STDOUT "
                     f"(FORMAT {fmt})")
    env = dict(os.environ, PGHOST=conninfo["host"], PGPORT=str(conninfo["port"]),
               PGUSER=conninfo["user"], PGDATABASE=conninfo["dbname"])
    results: list[Measured] = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            try:
                sql = work.get_nowait()
            except queue.Empty:
                return
            m = run_measured([str(PG_BINDIR / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
                              "-c", sql], env=env, sample_s=0.2, cpus=cpus)
            with lock:
                results.append(m)

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(parallel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    bad = [m for m in results if m.returncode != 0]
    if bad:
        raise RuntimeError(f"raw COPY failed: {bad[0].stderr_tail}")
    return {"wall_s": round(wall, 3), "chunks": len(results), "parallel": parallel,
            "client_cpu_s": round(sum(m.cpu_s for m in results), 3)}


def server_pids(conn) -> list[int]:
    """The processes of the server behind conn (postmaster first, then its children), when it
    runs on this machine and its data directory is readable; else []."""
    try:
        datadir = conn.execute("SHOW data_directory").fetchone()[0]
        pm = int(Path(datadir, "postmaster.pid").read_text().split("\n", 1)[0])
    except Exception:  # not a superuser, a remote server, no such file
        return []
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pm:
                kids.append(int(d.name))
    return [pm, *kids]


def pin(pids: list[int], cpus: set[int]) -> None:
    """Restrict pids to cpus (children forked later inherit the mask); gone pids are skipped."""
    for pid in pids:
        try:
            os.sched_setaffinity(pid, cpus)
        except (ProcessLookupError, PermissionError):
            pass


def current_lsn(conn, timeout_s: float = 30) -> str:
    """The WAL insert position, once it is flushed: every transaction committed so far (also
    with synchronous_commit = off) lies before it and logical decoding can read up to it."""
    lsn = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
    deadline = time.monotonic() + timeout_s
    while not conn.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (lsn,)
                           ).fetchone()[0]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"WAL not flushed up to {lsn} after {timeout_s}s")
        time.sleep(0.05)
    return lsn


def drain_baseline(conninfo: dict, slot: str, publication: str, end_lsn: str,
                   proto_version: int = 1, timeout_s: float = 600) -> Measured:
    """Raw CDC floor: pg_recvlogical streams slot `slot` with pgoutput (proto_version, the
    publication) into /dev/null and stops at end_lsn. The caller counts the changes."""
    argv = [str(PG_BINDIR / "pg_recvlogical"), "-h", conninfo["host"], "-p",
            str(conninfo["port"]), "-U", conninfo["user"], "-d", conninfo["dbname"], "-S", slot,
            "--start", "--no-loop", "-E", end_lsn, "-f", "/dev/null", "-o",
            f"proto_version={proto_version}", "-o", f"publication_names={publication}",
            "-s", "1"]
    return run_measured(argv, timeout_s=timeout_s, sample_s=0.2, stop_signal=signal.SIGTERM)
