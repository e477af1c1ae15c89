# SPDX-License-Identifier: Apache-2.0
"""One table's failure stops that table alone (issue 24 item 5): a streamed change firn cannot
take (here injected with the test-only FIRN_TEST_DECODE_FAIL, since a real PostgreSQL sends no
undecodable value on demand) quarantines its table with one clear error, the other table of the
slot keeps streaming under --follow, stats.json names the stopped table and why, the slot is held
before the stopped table's first uncommitted change, and the next run (without the fault) brings
the stopped table up to the source exactly, read back by value with pyiceberg and DuckDB."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from firnutil import stop_process, wait_for
from sparkutil import duckdb_rows, pyiceberg_rows

SETUP = [
    "CREATE TABLE a (id int PRIMARY KEY, v text)",
    "CREATE TABLE b (id int PRIMARY KEY, v text)",
    "INSERT INTO a SELECT g, 'a' || g FROM generate_series(1, 5) g",
    "INSERT INTO b SELECT g, 'b' || g FROM generate_series(1, 5) g",
]


def rows(job, reader, table):
    return reader(job.loc, job.table(table), ["id", "v"])


def want(job, table):
    return job.source_rows(f"SELECT id, v FROM {table}")


def confirmed_lsn(job) -> int:
    with job.pg.connect() as c:
        text = c.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                         "WHERE slot_name = %s", (job.slot,)).fetchone()[0]
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def test_one_failing_table_stops_alone(firn_job):
    job = firn_job([{"stream_name": "a"}, {"stream_name": "b"}], setup=SETUP,
                   commit_interval_s=0.5)
    job.sync()  # the copy
    before_b = job.wal_lsn()
    cmd = job.sync_command() + ["--follow"]
    env = dict(os.environ, FIRN_TEST_DECODE_FAIL="public.b:2")
    log_path = job.workdir / "follow.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
        try:
            job.sql("INSERT INTO b VALUES (100, 'first')")
            job.sql("INSERT INTO b VALUES (101, 'fails')", "UPDATE b SET v = 'x' WHERE id = 1")
            job.sql("INSERT INTO a VALUES (100, 'after')")
            wait_for(lambda: 'src.b\\" stopped' in log_path.read_text(), 60,
                     what="the quarantine line")
            # the other table streams on, also after the failure
            for k in range(3):
                job.sql(f"INSERT INTO a VALUES ({200 + k}, 'later {k}')", "DELETE FROM a WHERE id = 2")
            wait_for(lambda: rows(job, pyiceberg_rows, "a") == want(job, "a"), 60,
                     what="table a streamed on")
            assert proc.poll() is None, log_path.read_text()[-3000:]
            def stats():
                try:
                    doc = json.loads((job.workdir / "stats.json").read_text())
                except (OSError, ValueError):
                    return {}
                return {s["table"]: s for s in doc["streams"]}

            wait_for(lambda: "stopped_because" in stats().get("src.b", {}), 30,
                     what="stats.json naming the stopped table")
            st = stats()
            assert "FIRN_TEST_DECODE_FAIL" in st["src.b"]["stopped_because"], st["src.b"]
            assert "stopped_because" not in st["src.a"]
            # held before b's first change this run read, though a committed past it
            assert confirmed_lsn(job) <= before_b + 0x10000
            assert confirmed_lsn(job) < job.wal_lsn()
        finally:
            rc = stop_process(proc, signal.SIGTERM)
    text = log_path.read_text()
    stops = [ln for ln in text.splitlines() if 'src.b\\" stopped' in ln]
    assert len(stops) == 1 and "slot is held at" in stops[0], stops
    assert rc != 0  # the run did not do all it was asked
    # b lacks its streamed changes until a run can take them; the next run brings them all
    assert rows(job, pyiceberg_rows, "b") != want(job, "b")
    job.sync()
    for t in ("a", "b"):
        for reader in (pyiceberg_rows, duckdb_rows):
            assert rows(job, reader, t) == want(job, t), (t, reader.__name__)


def test_catch_up_run_with_a_failing_table_exits_3_and_commits_the_others(firn_job):
    job = firn_job([{"stream_name": "a"}, {"stream_name": "b"}], setup=SETUP)
    job.sync()
    job.sql("INSERT INTO a VALUES (50, 'x')", "INSERT INTO b VALUES (50, 'y')")
    p = job.write_configs()
    env = dict(os.environ, FIRN_TEST_DECODE_FAIL="public.b:1")
    proc = subprocess.run(job.sync_command(), capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "FIRN_TEST_DECODE_FAIL" in proc.stderr.strip().splitlines()[-1]
    assert rows(job, pyiceberg_rows, "a") == want(job, "a")
    assert rows(job, pyiceberg_rows, "b") != want(job, "b")
    del p
    time.sleep(0.1)
    job.sync()
    assert rows(job, duckdb_rows, "b") == want(job, "b")
