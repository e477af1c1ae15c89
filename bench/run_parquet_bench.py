#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Parquet write benchmark, firn vs pyarrow, single-threaded, same data and codec.

Builds bench/parquet_bench with the release preset, has it generate a taxi-shaped table
(18 columns) and write it with firn (CPU seconds of the write via getrusage), reads that file
back into an Arrow table (the same data) and writes it with pyarrow
(pa.set_cpu_count(1), use_dictionary=True, compression='zstd', same level), timing the
write's CPU seconds the same way. Prints rows/s and MB/s per core (MB = the Arrow table's
in-memory bytes, the same figure for both) and the ratio firn/pyarrow.

Usage: /root/.cache/firn/venv/bin/python bench/run_parquet_bench.py [--rows N] [--level L]
       [--repeat R] [--no-build]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--level", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2, help="runs per writer; the best counts")
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()

    if not args.no_build:
        subprocess.run(["cmake", "--preset", "release"], cwd=REPO, check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", "--preset", "release", "-j2", "--target",
                        "parquet_bench"], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    exe = REPO / "build" / "release" / "bench" / "parquet_bench"

    import pyarrow as pa
    import pyarrow.parquet as pq

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    with tempfile.TemporaryDirectory(prefix="firn-pqbench-") as tmp:
        firn_out = Path(tmp) / "firn.parquet"
        firn_runs = []
        for _ in range(args.repeat):
            proc = subprocess.run([str(exe), str(args.rows), str(firn_out), str(args.level)],
                                  check=True, capture_output=True, text=True)
            firn_runs.append(json.loads(proc.stdout))
        firn = min(firn_runs, key=lambda r: r["cpu_s"])
        table = pq.read_table(firn_out)
        assert table.num_rows == args.rows
        mb = table.nbytes / 1e6
        pa_out = Path(tmp) / "pyarrow.parquet"
        pa_cpu = []
        for _ in range(args.repeat):
            t0 = cpu()
            pq.write_table(table, pa_out, use_dictionary=True, compression="zstd",
                           compression_level=args.level)
            pa_cpu.append(cpu() - t0)
        pa_s = min(pa_cpu)
        pa_bytes = os.path.getsize(pa_out)
        # the two files must hold the same rows
        assert pq.read_table(pa_out).equals(table)

    rows = args.rows
    print(f"taxi-shaped table: {rows} rows x {table.num_columns} columns, {mb:.1f} MB in Arrow,"
          f" zstd level {args.level}, single thread, best of {args.repeat}")
    print(f"{'writer':<10}{'cpu s':>9}{'rows/s':>14}{'MB/s/core':>12}{'file MB':>10}")
    for name, s, size in (("firn", firn["cpu_s"], firn["bytes"]), ("pyarrow", pa_s, pa_bytes)):
        print(f"{name:<10}{s:>9.3f}{rows / s:>14,.0f}{mb / s:>12.1f}{size / 1e6:>10.1f}")
    print(f"ratio firn/pyarrow (throughput): {pa_s / firn['cpu_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
