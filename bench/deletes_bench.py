# SPDX-License-Identifier: Apache-2.0
"""Read cost of firn's delete encodings (issue 8, DELETES.md §5.6): after a 10 % update/delete
workload, how much slower do readers scan the table than the same rows rewritten with no
deletes?

One PostgreSQL table `t (id bigint PRIMARY KEY, a int, b bigint, c text)` of --rows rows is
synced by one `firn sync` per variant (its own slot, publication and SQL catalog):

  equality        "delete_mode": "equality" (format 2, equality-delete files)
  position-none   format 2 position deletes, "consolidate_deletes_after": 0 (never), no
                  compaction
  position-nocompact  format 2 position deletes consolidated after 8, no compaction
  position        firn's defaults: consolidation after 8, small-file compaction (8 small
                  files or 20 % of a file's rows deleted)
  position-every  format 2 position deletes consolidated at every commit (1), no compaction
  dv              format 3 deletion vectors

then --rounds rounds change --change-pct % of the rows in all (70 % of the changes update a
and c, 30 % delete; 1 % of the table is inserted besides), each round followed by one catch-up
`firn sync` per variant (one commit each). The baseline is a fresh `full_refresh` copy of the
final rows (no deletes). Every variant and the baseline are read by DuckDB (iceberg_scan) and
pyiceberg (scan().to_arrow(), not for equality deletes, which it cannot read) and, with
--spark, Spark 3.5 + Iceberg 1.10: a full-scan aggregate, the median of --reps timed runs after
one warm-up. Before timing, each reader's full-row hash must equal PostgreSQL's (a reader that
ignores deletes fails the run). The ratio is scan time ÷ the baseline's scan time.

    bash bench/deletes.sh                       # 1 M rows, 10 rounds (about 10 minutes here)
    bash bench/deletes.sh --rows 20000 --rounds 3 --reps 1     # seconds
    python bench/deletes_bench.py --uri postgresql://... [--workdir DIR] [--out FILE]

Prints a table and writes a JSON report (--out, default bench/results/<time>-deletes.json).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

REPO = Path(__file__).resolve().parents[1]
DB = "bench_deletes"
NO_COMPACT = {"compact_small_files": 0, "compact_delete_percent": 0}
VARIANTS = {
    "equality": {"delete_mode": "equality", "format_version": 2},
    "position-none": {"format_version": 2, "consolidate_deletes_after": 0, **NO_COMPACT},
    "position-nocompact": {"format_version": 2, **NO_COMPACT},
    "position": {"format_version": 2},
    "position-every": {"format_version": 2, "consolidate_deletes_after": 1, **NO_COMPACT},
    "dv": {"format_version": 3},
}
AGG = "count(*), sum(a), sum(b), sum(length(c))"
HASH_ROW = "concat_ws('|', id, a, b, c)"


def pg_connect(uri: str, dbname: str):
    import psycopg
    u = urlparse(uri)
    return psycopg.connect(host=u.hostname, port=u.port or 5432, user=u.username,
                           dbname=dbname, autocommit=True)


def setup_source(uri: str, rows: int) -> None:
    with pg_connect(uri, "postgres") as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        for (slot,) in conn.execute("SELECT slot_name FROM pg_replication_slots WHERE "
                                    "slot_name LIKE 'bdel_%'").fetchall():
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.execute(f"CREATE DATABASE {DB}")
    with pg_connect(uri, DB) as conn:
        conn.execute("CREATE TABLE t (id bigint PRIMARY KEY, a int NOT NULL, b bigint NOT NULL, "
                     "c text NOT NULL)")
        conn.execute("INSERT INTO t SELECT g, (g::bigint * 7919) % 100000, g * 31::bigint, "
                     f"md5(g::text) || md5((g * 3)::text) FROM generate_series(1, {int(rows)}) g")
        conn.execute("VACUUM ANALYZE t")


def change_round(uri: str, rows: int, r: int, rounds: int, pct: float) -> int:
    """Round r (1-based): updates and deletes spread over the whole key range (id % m = k
    picks rows uniformly across the data files), plus new keys. Returns rows changed."""
    frac = pct / 100.0 / rounds
    mod_u = max(2, round(1 / (0.7 * frac)))
    mod_d = max(2, round(1 / (0.3 * frac)))
    new = max(1, int(rows * 0.01 / rounds))
    with pg_connect(uri, DB) as conn:
        n = conn.execute(f"UPDATE t SET a = a + {r}, c = md5(c) WHERE id % {mod_u} = "
                         f"{r % mod_u}").rowcount
        n += conn.execute(f"DELETE FROM t WHERE id % {mod_d} = {(r * 7 + 1) % mod_d}").rowcount
        base = rows * 2 + r * new
        n += conn.execute(f"INSERT INTO t SELECT g, g % 1000, g, md5(g::text) FROM "
                          f"generate_series({base}, {base + new - 1}) g").rowcount
    return n


def firn_configs(uri: str, wd: Path, name: str, mode: str, extra: dict) -> list[str]:
    u = urlparse(uri)
    wd.mkdir(parents=True, exist_ok=True)
    (wd / "warehouse").mkdir(exist_ok=True)
    slot = f"bdel_{name.replace('-', '_')}"
    source = {"type": "postgres", "host": u.hostname, "port": u.port or 5432, "database": DB,
              "username": u.username, "sslmode": "disable", "schemas": ["public"],
              "slot": slot, "publication": slot, "create_slot": True,
              "create_publication": True, "default_mode": mode, "initial_wait_seconds": 0,
              "parallelism": 2}
    dest = {"catalog": {"type": "sql", "name": "bench", "uri": f"sqlite:///{wd}/catalog.db",
                        "warehouse": (wd / "warehouse").resolve().as_uri()},
            "namespace": "b", "commit": {"interval_seconds": 3600}, "log": "warn",
            "index_dir": str(wd / "index"), **extra}
    streams = {"selected_streams": {"public": [{"stream_name": "t", "sync_mode": mode}]}}
    args = []
    for key, doc in (("source", source), ("destination", dest), ("streams", streams)):
        p = wd / f"{key}.json"
        p.write_text(json.dumps(doc, indent=1))
        args += [f"--{key}", str(p)]
    return args + ["--state", str(wd / "state.json")]


def firn_sync(firn: Path, args: list[str]) -> float:
    t0 = time.monotonic()
    proc = subprocess.run([str(firn), "sync", *args], capture_output=True, text=True,
                          timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"firn sync failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.monotonic() - t0


def catalog(wd: Path):
    from pyiceberg.catalog.sql import SqlCatalog
    return SqlCatalog("bench", uri=f"sqlite:///{wd}/catalog.db",
                      warehouse=(wd / "warehouse").resolve().as_uri())


def duck():
    import duckdb
    from duckdb_extensions import import_extension
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False})
    for name in ("avro", "iceberg"):
        import_extension(name, con=con)
        con.execute(f"LOAD {name}")
    return con


def timed(fn, reps: int):
    fn()  # warm-up (and the value checked)
    times = []
    for _ in range(reps):
        t0 = time.monotonic()
        fn()
        times.append(time.monotonic() - t0)
    return statistics.median(times), min(times)


def source_truth(uri: str) -> tuple[tuple, str]:
    with pg_connect(uri, DB) as conn:
        agg = conn.execute(f"SELECT {AGG} FROM t").fetchone()
        h = conn.execute(f"SELECT md5(string_agg({HASH_ROW}, ',' ORDER BY id)) FROM t")
        return tuple(int(x) for x in agg), h.fetchone()[0]


def arrow_hash(tbl) -> tuple[tuple, str]:
    """PostgreSQL's row hash and aggregate over an Arrow table of (id, a, b, c)."""
    rows = sorted(zip(*(tbl.column(c).to_pylist() for c in ("id", "a", "b", "c"))))
    text = ",".join(f"{i}|{a}|{b}|{c}" for i, a, b, c in rows)
    agg = (len(rows), sum(r[1] for r in rows), sum(r[2] for r in rows),
           sum(len(r[3]) for r in rows))
    return agg, hashlib.md5(text.encode()).hexdigest()


def table_shape(tbl) -> dict:
    files = tbl.inspect.files().to_pylist()
    return {"data_files": sum(1 for f in files if f["content"] == 0),
            "position_delete_files": sum(1 for f in files if f["content"] == 1),
            "equality_delete_files": sum(1 for f in files if f["content"] == 2),
            "delete_records": sum(f["record_count"] for f in files if f["content"] != 0),
            "snapshots": len(tbl.snapshots())}


def read_variant(name: str, wd: Path, truth, reps: int, spark) -> dict:
    print(f"bench: reading {name}", file=sys.stderr, flush=True)
    tbl = catalog(wd).load_table("b.t")
    meta = tbl.metadata_location
    out = {"variant": name, **table_shape(tbl)}
    con = duck()
    try:
        q = f"SELECT {AGG} FROM iceberg_scan('{meta}')"
        agg = tuple(int(x) for x in con.execute(q).fetchone())
        h = con.execute(f"SELECT md5(string_agg({HASH_ROW}, ',' ORDER BY id)) FROM "
                        f"iceberg_scan('{meta}')").fetchone()[0]
        if (agg, h) != truth:  # reported, not timed: a wrong answer has no speed
            out["duckdb_wrong"] = f"read {agg}, PostgreSQL has {truth[0]}"
            print(f"{name}: DuckDB read {agg} {h}, PostgreSQL has {truth}", file=sys.stderr)
        else:
            out["duckdb_s"], out["duckdb_min_s"] = timed(lambda: con.execute(q).fetchall(),
                                                         reps)
    finally:
        con.close()
    if out["equality_delete_files"] == 0:
        got = arrow_hash(tbl.scan(selected_fields=("id", "a", "b", "c")).to_arrow())
        if got != truth:
            raise SystemExit(f"{name}: pyiceberg read {got}, PostgreSQL has {truth}")
        out["pyiceberg_s"], out["pyiceberg_min_s"] = timed(
            lambda: tbl.scan().to_arrow(), max(1, reps // 2))
    if spark is not None:
        session, loc = spark
        q = f"SELECT {AGG} FROM bench.b.t"
        s = session(loc_for(loc, wd))
        agg = tuple(int(x) for x in s.sql(q).collect()[0])
        if agg != truth[0]:
            raise SystemExit(f"{name}: Spark read {agg}, PostgreSQL has {truth[0]}")
        s.sql("REFRESH TABLE bench.b.t")
        out["spark_s"], out["spark_min_s"] = timed(lambda: s.sql(q).collect(),
                                                    max(1, reps // 2))
    return out


def loc_for(loc_cls, wd: Path):
    return loc_cls(wd / "catalog.db", wd / "warehouse", "bench")


def start_spark(workdir: Path):
    sys.path.insert(0, str(REPO / "tests" / "interop"))
    from sparkutil import SparkCatalogs, SqlCatalogLoc, build_spark_session
    cats = SparkCatalogs(build_spark_session(workdir / "spark", memory="2g"))
    return cats.session, SqlCatalogLoc


def print_table(report: dict) -> None:
    base = report["baseline"]
    readers = [r for r in ("duckdb", "pyiceberg", "spark") if f"{r}_s" in base]
    head = ["variant", "data", "pos del", "eq del", "del rows"] + \
        [f"{r} s (÷ base)" for r in readers]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for v in report["variants"] + [base]:
        cells = [v["variant"], str(v["data_files"]), str(v["position_delete_files"]),
                 str(v["equality_delete_files"]), str(v["delete_records"])]
        for r in readers:
            s = v.get(f"{r}_s")
            if v.get(f"{r}_wrong"):
                cells.append("WRONG ROWS")
            else:
                cells.append("n/a" if s is None else f"{s:.3f} ({s / base[f'{r}_s']:.2f}×)")
        print("| " + " | ".join(cells) + " |")


def run_workload(a, firn: Path, wd: Path, names: list[str]) -> tuple[int, dict]:
    """Source table, one firn destination per variant, the rounds of changes, the baseline.
    Returns (rows changed, seconds of firn's catch-up runs per variant)."""
    setup_source(a.uri, a.rows)
    jobs = {n: firn_configs(a.uri, wd / n, n, "full_refresh_cdc", VARIANTS[n]) for n in names}
    sync_s = {n: 0.0 for n in names}
    for n in names:
        firn_sync(firn, jobs[n])
    changed = 0
    for r in range(1, a.rounds + 1):
        changed += change_round(a.uri, a.rows, r, a.rounds, a.change_pct)
        for n in names:
            sync_s[n] += firn_sync(firn, jobs[n])
    base_args = firn_configs(a.uri, wd / "baseline", "baseline", "full_refresh",
                             {"format_version": 2})
    firn_sync(firn, base_args)
    return changed, sync_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uri", default=os.environ.get("FIRN_TEST_PGURI"))
    ap.add_argument("--firn", default=os.environ.get("FIRN_BIN",
                                                     REPO / "build/release/src/cli/firn"))
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--change-pct", type=float, default=10.0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--spark", action="store_true", help="also time Spark (JVM start ~20 s)")
    ap.add_argument("--reuse", action="store_true",
                    help="read the tables an earlier run left in --workdir again (no "
                         "PostgreSQL needed: its row hash was saved there)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if not a.uri and not a.reuse:
        raise SystemExit("--uri (or FIRN_TEST_PGURI) is required")
    if a.reuse and not a.workdir:
        raise SystemExit("--reuse needs --workdir")
    firn = Path(a.firn)
    wd = a.workdir or Path(os.environ.get("TMPDIR", "/tmp")) / f"firn-deletes-{os.getpid()}"
    names = [n for n in a.variants.split(",") if n]
    t0 = time.monotonic()
    if a.reuse:
        saved = json.loads((wd / "truth.json").read_text())
        truth = (tuple(saved["agg"]), saved["hash"])
        a.rows, a.rounds, a.change_pct = saved["rows"], saved["rounds"], saved["change_pct"]
        changed, sync_s = saved["changed"], saved["sync_s"]
    else:
        changed, sync_s = run_workload(a, firn, wd, names)
        truth = source_truth(a.uri)
        (wd / "truth.json").write_text(json.dumps(
            {"agg": truth[0], "hash": truth[1], "rows": a.rows, "rounds": a.rounds,
             "change_pct": a.change_pct, "changed": changed, "sync_s": sync_s}))
    spark = start_spark(wd) if a.spark else None
    report = {"rows": a.rows, "rounds": a.rounds, "change_pct": a.change_pct,
              "rows_changed": changed, "reps": a.reps, "variants": [],
              "firn_cdc_sync_s": sync_s}
    report["baseline"] = read_variant("baseline (no deletes)", wd / "baseline", truth, a.reps,
                                      spark)
    for n in names:
        report["variants"].append(read_variant(n, wd / n, truth, a.reps, spark))
    report["total_s"] = time.monotonic() - t0
    out = a.out or REPO / "bench" / "results" / (
        time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-deletes.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(f"{a.rows} rows, {a.rounds} rounds, {changed} rows changed "
          f"({100.0 * changed / a.rows:.1f} %); median of {a.reps} scans")
    print_table(report)
    print(f"report: {out}")


if __name__ == "__main__":
    main()
