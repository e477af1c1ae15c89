# SPDX-License-Identifier: Apache-2.0
"""firn sync under restarts (issue 7, check 2): clean stops of `firn sync --follow` with SIGINT
and SIGTERM while the source keeps changing (bounded shutdown time, exit code per README,
nothing half-committed), and kill -9 at many points, from the test-only crash hook
(FIRN_TEST_CRASH, src/engine/eng_fault.c) and from outside at random times, restarting firn each
time while a writer keeps changing the source; at the end every table equals the source by
full-row hash: no loss, no duplicates.

The workload's invariants make half-committed transactions visible in any committed snapshot:
every transaction on `bank` moves money between two accounts (the sum never changes), and every
transaction on `ledger` inserts `n` rows sharing a tag (a tag's rows are all there or none).
`ledger` has no primary key (append mode), so exactly-once shows as each `seq` exactly once.

FIRN_KILL_POINTS (default 50) and FIRN_KILL_SEED (default: random, printed) steer the kill loop;
scripts/torture.sh runs it with thousands of points."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time

import pytest

from firnutil import (FirnEnv, arrow_rows, diff_rows, rows_hash, source_rows, stop_process,
                      wait_for)

SCHEMA = """
CREATE TABLE bank (id int4 PRIMARY KEY, balance int8 NOT NULL, touched int4 DEFAULT 0,
                   memo text);
CREATE TABLE items (id int4 PRIMARY KEY, v int4, note text, big text);
CREATE TABLE ledger (seq int8 NOT NULL, tag int8 NOT NULL, n int4 NOT NULL, note text);
ALTER TABLE ledger REPLICA IDENTITY FULL;
CREATE TABLE scratch (k int4 PRIMARY KEY, v int4);
INSERT INTO scratch SELECT g, g FROM generate_series(1, 20) g;
CREATE SEQUENCE ledger_seq;
CREATE SEQUENCE ledger_tag;
INSERT INTO bank SELECT g, 1000, 0, 'm' || g FROM generate_series(1, 100) g;
INSERT INTO items SELECT g, g, repeat('n', g % 50), NULL FROM generate_series(1, 3000) g;
INSERT INTO ledger SELECT nextval('ledger_seq'), 0, 2000, 'initial'
  FROM generate_series(1, 2000) g;
"""
BANK_TOTAL = 100 * 1000
INITIAL_TAG_ROWS = 2000

CDC_POINTS = ["after-upload", "after-commit", "before-ack", "mid-txn"]
BACKFILL_POINTS = ["backfill-batch", "after-upload", "after-commit"]


class Writer(threading.Thread):
    """Keeps changing the source in small transactions until stopped."""

    def __init__(self, pg, dbname: str, seed: int, pace_s: float = 0.01):
        super().__init__(daemon=True)
        self.pg, self.dbname, self.rng, self.pace_s = pg, dbname, random.Random(seed), pace_s
        self.halt = threading.Event()
        self.txns = 0
        self.error: BaseException | None = None
        self.next_item = 10_000

    def run(self):
        try:
            with self.pg.connect(dbname=self.dbname, autocommit=False) as conn:
                while not self.halt.is_set():
                    with conn.transaction():
                        self.one(conn)
                    self.txns += 1
                    time.sleep(self.pace_s)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def one(self, conn):
        r = self.rng.random()
        if r < 0.35:
            a, b = self.rng.sample(range(1, 101), 2)
            x = self.rng.randint(1, 50)
            conn.execute("UPDATE bank SET balance = balance - %s, touched = touched + 1 "
                         "WHERE id = %s", (x, a))
            conn.execute("UPDATE bank SET balance = balance + %s, touched = touched + 1 "
                         "WHERE id = %s", (x, b))
        elif r < 0.6:
            n = self.rng.randint(1, 6)
            conn.execute("INSERT INTO ledger SELECT nextval('ledger_seq'), t, %s, 'w' "
                         "FROM (SELECT nextval('ledger_tag') t) s, generate_series(1, %s)",
                         (n, n))
        elif r < 0.75:
            self.next_item += 1
            conn.execute("INSERT INTO items VALUES (%s, %s, 'ins', NULL)",
                         (self.next_item, self.rng.randint(0, 9)))
        elif r < 0.85:
            conn.execute("UPDATE items SET v = v + 1, note = 'upd' WHERE id = %s",
                         (self.rng.randint(1, self.next_item),))
        elif r < 0.92:
            conn.execute("DELETE FROM items WHERE id = %s", (self.rng.randint(1, self.next_item),))
        elif r < 0.955:
            old = self.rng.randint(1, self.next_item)
            self.next_item += 1
            conn.execute("UPDATE items SET id = %s WHERE id = %s", (self.next_item, old))
        elif r < 0.97:
            # a TRUNCATE between other tables' rows in one transaction
            n = self.rng.randint(1, 3)
            conn.execute("INSERT INTO ledger SELECT nextval('ledger_seq'), t, %s, 'trunc' "
                         "FROM (SELECT nextval('ledger_tag') t) s, generate_series(1, %s)",
                         (n, n))
            conn.execute("TRUNCATE scratch")
            conn.execute("INSERT INTO scratch SELECT g, %s FROM generate_series(1, %s) g",
                         (self.rng.randint(0, 99), self.rng.randint(0, 20)))
        else:
            lo = self.rng.randint(1, 3000)
            # incompressible values > 8 KB stored out of line: later updates that leave them
            # untouched send them as unchanged TOAST
            conn.execute("UPDATE items SET v = -v, big = (SELECT string_agg(md5(%s::text || g), '') "
                         "FROM generate_series(1, 300) g) WHERE id BETWEEN %s AND %s",
                         (lo, lo, lo + 20))

    def stop(self):
        self.halt.set()
        self.join(timeout=30)
        if self.error:
            raise self.error


def make_env(pg, dbname, firn_bin, tmp_path, interval_s=0.3,
             delete_mode: str = "position") -> FirnEnv:
    with pg.connect(dbname=dbname) as conn:
        # transactions past 64 kB reach firn streamed, in chunks, before their commit
        conn.execute(f'ALTER DATABASE "{dbname}" SET logical_decoding_work_mem = \'64kB\'')
    fe = FirnEnv(firn_bin, tmp_path / "firn", dbname)
    fe.setup(pg, ["bank", "items", "ledger", "scratch"], interval_s=interval_s,
             source={"batch_rows": 500, "chunk_size": "64KiB", "parallelism": 2},
             destination={"delete_mode": delete_mode})
    return fe


def check_atomic(fe: FirnEnv):
    """Committed snapshots hold whole source transactions only."""
    bank = fe.pyiceberg_arrow("bank")
    assert sum(bank.column("balance").to_pylist()) == BANK_TOTAL
    ledger = fe.pyiceberg_arrow("ledger")
    counts: dict[int, list] = {}
    for tag, n in zip(ledger.column("tag").to_pylist(), ledger.column("n").to_pylist()):
        counts.setdefault(tag, []).append(n)
    for tag, ns in counts.items():
        if tag == 0 and len(ns) == 0:
            continue
        assert len(ns) == ns[0], f"ledger transaction {tag}: {len(ns)} of {ns[0]} rows committed"


def check_equal(fe: FirnEnv, conn, duck=None):
    """Every table equals the source: bank, items and scratch by full rows and hash, ledger as a
    change log holding each source row exactly once."""
    cat = fe.catalog()
    for table in ("bank", "items", "scratch"):
        ice = cat.load_table(f"e2e.{table}")
        schema = ice.schema()
        names = [f.name for f in schema.fields if not f.name.startswith("_firn_")]
        expected = source_rows(conn, table, schema, names)
        readers = [("pyiceberg", ice.scan().to_arrow())]
        if duck is not None:
            readers.append(("duckdb", fe.duckdb_arrow(duck, table)))
        for reader, arrow in readers:
            actual = arrow_rows(arrow, names)
            diff = diff_rows(expected, actual, key=0, names=names)
            assert not diff, f"{reader}: table {table} differs from the source:\n{diff}"
            assert rows_hash(actual) == rows_hash(expected)
    ledger = cat.load_table("e2e.ledger").scan().to_arrow()
    ops = set(ledger.column("_firn_op").to_pylist())
    assert ops <= {"r", "c"}, ops
    seqs = ledger.column("seq").to_pylist()
    src = [r[0] for r in conn.execute("SELECT seq FROM ledger").fetchall()]
    dups = sorted(s for s in set(seqs) if seqs.count(s) > 1) if len(seqs) != len(set(seqs)) else []
    assert not dups, f"ledger rows duplicated in the table: {dups[:10]} ({len(dups)} seqs)"
    missing = sorted(set(src) - set(seqs))
    assert not missing, f"ledger rows missing from the table: {missing[:10]} ({len(missing)})"
    assert sorted(seqs) == sorted(src)


def backfill_done(fe: FirnEnv) -> bool:
    try:
        state = json.loads(fe.state.read_text())
    except (OSError, ValueError):
        return False
    streams = state.get("streams", [])
    return len(streams) == 4 and all(s.get("state", {}).get("backfill_done") for s in streams)


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_clean_stop_mid_stream(pg, pg_db, firn_bin, duck, tmp_path, sig, code):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
        fe = make_env(pg, pg_db, firn_bin, tmp_path)
        writer = Writer(pg, pg_db, seed=int(sig))
        writer.start()
        try:
            for round_ in range(2):
                proc = fe.start_follow()
                time.sleep(4 if round_ == 0 else 2.5)  # mid-stream: the writer keeps going
                assert proc.poll() is None, (fe.root / "follow.log").read_text()[-3000:]
                t0 = time.monotonic()
                rc = stop_process(proc, sig, timeout=20)
                took = time.monotonic() - t0
                log = (fe.root / "follow.log").read_text()
                assert rc == code, f"exit {rc} after signal {sig.name}:\n{log[-3000:]}"
                assert took < 10, f"clean stop took {took:.1f}s"
                assert "firn:" not in log.splitlines()[-1], log[-2000:]
                check_atomic(fe)
        finally:
            writer.stop()
        assert writer.txns > 50
        fe.sync()
        check_atomic(fe)
        check_equal(fe, conn, duck)


def test_second_signal_exits_at_once(pg, pg_db, firn_bin, tmp_path):
    """A second SIGTERM during the clean stop exits at once (143); that is a crash, and the next
    run loses and duplicates nothing."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
        fe = make_env(pg, pg_db, firn_bin, tmp_path)
        writer = Writer(pg, pg_db, seed=7)
        writer.start()
        try:
            for _ in range(3):
                proc = fe.start_follow()
                time.sleep(3)
                proc.send_signal(signal.SIGTERM)
                time.sleep(0.05)
                rc = stop_process(proc, signal.SIGTERM, timeout=20)
                assert rc in (0, 143), (fe.root / "follow.log").read_text()[-3000:]
                check_atomic(fe)
        finally:
            writer.stop()
        fe.sync()
        check_equal(fe, conn)


def test_stop_during_backfill_is_prompt(pg, pg_db, firn_bin, tmp_path):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
        conn.execute("INSERT INTO items SELECT g, g, repeat('x', 200), NULL "
                     "FROM generate_series(100000, 160000) g")
        fe = make_env(pg, pg_db, firn_bin, tmp_path)
        proc = fe.start_follow()
        wait_for(lambda: b"backfill:" in (fe.root / "follow.log").read_bytes(), 30,
                 what="the backfill to start")
        time.sleep(0.5)
        t0 = time.monotonic()
        rc = stop_process(proc, signal.SIGTERM, timeout=30)
        took = time.monotonic() - t0
        log = (fe.root / "follow.log").read_text()
        assert rc == 0, log[-3000:]
        assert took < 10, f"stop during the backfill took {took:.1f}s:\n{log[-2000:]}"
        fe.sync(timeout=300)
        check_equal(fe, conn)


def test_kill_points(pg, pg_db, firn_bin, duck, tmp_path):
    points = int(os.environ.get("FIRN_KILL_POINTS", "50"))
    seed = int(os.environ.get("FIRN_KILL_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    delete_mode = rng.choice(["position", "deletion_vector"])
    print(f"kill loop: {points} points, FIRN_KILL_SEED={seed}, delete_mode {delete_mode}")
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
        fe = make_env(pg, pg_db, firn_bin, tmp_path, delete_mode=delete_mode)
        writer = Writer(pg, pg_db, seed=seed)
        writer.start()
        kills = {"hook": 0, "outside": 0, "clean": 0}
        history = []
        backfill_tries = 0
        try:
            for i in range(points):
                env = {}
                if not backfill_done(fe) and backfill_tries < 6:
                    # The first runs die in the initial copy: the slot exists, no table done.
                    backfill_tries += 1
                    point = rng.choice(BACKFILL_POINTS)
                    count = rng.randint(1, 3)
                    env["FIRN_TEST_CRASH"] = f"{point}:{count}"
                    how, delay = f"{point}:{count}", 6.0
                elif rng.random() < 0.2:
                    how, delay = "outside", rng.uniform(0.3, 3.0)
                else:
                    point = rng.choice(CDC_POINTS)
                    count = rng.randint(1, 60 if point == "mid-txn" else 3)
                    env["FIRN_TEST_CRASH"] = f"{point}:{count}"
                    how, delay = f"{point}:{count}", 6.0
                history.append(how)
                log_path = fe.root / f"run-{i:03d}.log"
                proc = fe.start_follow(env, log_path)
                try:
                    rc = proc.wait(timeout=delay)
                except Exception:  # still running: the point was not reached in time
                    rc = None
                if rc is None and how == "outside":
                    proc.kill()
                    rc = proc.wait()
                    kills["outside"] += 1
                elif rc is None:
                    rc = stop_process(proc, signal.SIGTERM, timeout=20)
                    fired = "FIRN_TEST_CRASH: killing" in log_path.read_text()
                    if rc == -signal.SIGKILL and fired:  # the point came up in the last flush
                        kills["hook"] += 1
                    else:
                        assert rc == 0, (f"run {i} ({how}): exit {rc}\n"
                                         f"{log_path.read_text()[-3000:]}")
                        kills["clean"] += 1
                elif rc == -signal.SIGKILL:
                    kills["hook" if how != "outside" else "outside"] += 1
                else:
                    raise AssertionError(f"run {i} ({how}, seed {seed}): firn exited {rc}:\n"
                                         f"{log_path.read_text()[-4000:]}")
                if i % 10 == 9:
                    check_atomic(fe)
        finally:
            writer.stop()
        streamed = conn.execute("SELECT coalesce(sum(stream_txns), 0) FROM "
                                "pg_stat_replication_slots").fetchone()[0]
        print(f"kill loop: {kills}, {writer.txns} source transactions ({streamed} reached firn "
              f"streamed); points: {history}")
        assert kills["hook"] + kills["outside"] >= points // 2, kills
        # ASan firn restarted every few seconds falls behind the writer; long runs leave a
        # backlog for this last catch-up run
        fe.sync(timeout=max(300, 6 * points))
        check_atomic(fe)
        check_equal(fe, conn, duck)


def test_crash_at_truncate_commit_mid_transaction(pg, pg_db, firn_bin, tmp_path):
    """A TRUNCATE inside a transaction that also wrote another table: a crash right after the
    truncate's commit must not leave that table with the transaction's rows twice."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE log (seq int4, what text); "
                     "ALTER TABLE log REPLICA IDENTITY FULL; "
                     "CREATE TABLE scratch (k int4 PRIMARY KEY, v text); "
                     "INSERT INTO scratch VALUES (1, 'a'), (2, 'b')")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["log", "scratch"], interval_s=600)
        fe.sync()
        conn.execute("INSERT INTO log VALUES (1, 'before')")
        conn.execute("BEGIN; INSERT INTO log VALUES (2, 'with truncate'); TRUNCATE scratch; "
                     "INSERT INTO scratch VALUES (3, 'c'); INSERT INTO log VALUES (3, 'after'); "
                     "COMMIT")
        # Commits of this run: whatever is flushed before the TRUNCATE, then the truncate of
        # scratch; die right after each in turn, then finish with a clean run.
        for n in (1, 2, 3):
            proc = fe.sync(env={"FIRN_TEST_CRASH": f"after-commit:{n}"}, check=False)
            assert proc.returncode in (-signal.SIGKILL, 0), proc.stderr[-3000:]
        fe.sync()
        log = fe.pyiceberg_arrow("log")
        seqs = sorted(log.column("seq").to_pylist())
        assert seqs == [1, 2, 3], f"log rows {seqs}: {log.column('_firn_op').to_pylist()}"
        scratch = fe.pyiceberg_arrow("scratch")
        assert sorted(scratch.column("k").to_pylist()) == [3]
