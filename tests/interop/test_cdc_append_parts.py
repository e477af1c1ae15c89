# SPDX-License-Identifier: Apache-2.0
"""A large transaction committed in parts into an append-mode table, and a crash between two
parts (issue 6; docs/cdc.md "Transactions and ordering").

An append-mode table (no primary key, REPLICA IDENTITY FULL) is a change log: every change is a
row with its _firn_op. A transaction larger than a quarter of firn's memory limit is committed in
parts before its end, while the slot stays before it. firn is killed (FIRN_TEST_CRASH) right after
the catalog commit of its second part and started again: the replay must skip exactly the
changes those parts hold, so that the table is the source's change log with every change once.
Checked value by value: the (_firn_op, id, v) multiset of the transaction read with pyiceberg
equals the one computed from the statements, and DuckDB's count and checksum of the whole table
agree; the restarted run logs the marker it skipped by."""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections import Counter

import pytest

from firnutil import FirnEnv

ROWS = 40_000
SEED = 100  # rows of the initial copy, ids 1..SEED
BASE = 1_000_000  # ids of the big transaction start here

SCHEMA = f"""
CREATE TABLE clog (id bigint NOT NULL, v text);
ALTER TABLE clog REPLICA IDENTITY FULL;
INSERT INTO clog SELECT g, 'seed ' || g FROM generate_series(1, {SEED}) g;
"""


def payload(i: int) -> str:
    """The 320-character text of row i (as repeat(md5(i::text), 10) in PostgreSQL)."""
    return hashlib.md5(str(i).encode()).hexdigest() * 10


def big_transaction(conn) -> None:
    conn.execute("BEGIN")
    conn.execute(f"INSERT INTO clog SELECT g, repeat(md5(g::text), 10) "
                 f"FROM generate_series({BASE}, {BASE + ROWS - 1}) g")
    conn.execute(f"UPDATE clog SET v = 'updated ' || id WHERE id % 10 = 3 AND id >= {BASE}")
    conn.execute(f"DELETE FROM clog WHERE id % 20 = 7 AND id >= {BASE}")
    conn.execute("UPDATE clog SET v = 'old ' || id WHERE id BETWEEN 1 AND 10")
    conn.execute("COMMIT")


def expected_log() -> Counter:
    """The change log of big_transaction: (_firn_op, id, v) with multiplicities."""
    want: Counter = Counter()
    ids = range(BASE, BASE + ROWS)
    for i in ids:
        want[("c", i, payload(i))] += 1
    for i in ids:
        if i % 10 == 3:
            want[("u", i, f"updated {i}")] += 1
    for i in ids:
        if i % 20 == 7:
            want[("d", i, payload(i))] += 1  # the old row (REPLICA IDENTITY FULL)
    for i in range(1, 11):
        want[("u", i, f"old {i}")] += 1
    return want


def sync_log(fe: FirnEnv, env: dict) -> tuple[int, str]:
    log = fe.root / "run.log"
    with open(log, "wb") as f:
        proc = subprocess.run([str(fe.firn_bin), "sync", *fe.sync_args, "--log", "info"],
                              stdout=f, stderr=f, env=fe.env(env), timeout=120)
    return proc.returncode, log.read_text(errors="replace")


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
def test_append_mode_parts_crash(pg, pg_db, firn_bin, duck, tmp_path, streamed):
    with pg.connect(dbname=pg_db) as conn:
        if streamed and conn.info.server_version < 140000:
            pytest.skip("streaming of in-progress transactions needs PostgreSQL 14")
        conn.execute(SCHEMA)
        if streamed:
            conn.execute(f'ALTER DATABASE "{pg_db}" SET logical_decoding_work_mem = \'64kB\'')
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        # Parts come at a quarter of the limit (4 MiB): the transaction makes several.
        fe.setup(pg, [("clog", {"append_mode": True})], destination={"memory_limit": "16MiB"})
        fe.sync()
        conn.autocommit = True
        big_transaction(conn)

        env = {"TMPDIR": str(tmp_path)}
        code, log = sync_log(fe, dict(env, FIRN_TEST_CRASH="after-commit:2"))
        assert code == -9, log[-3000:]
        assert "committing it in parts" in log, log[-3000:]
        parts = fe.catalog().load_table("e2e.clog").scan().to_arrow()
        total = sum(expected_log().values())
        assert 0 < parts.num_rows - SEED < total, "the crash came after two parts, not the end"

        code, log = sync_log(fe, env)
        assert code == 0, log[-3000:]
        m = re.search(r'table \\?"[^"\\]*clog\\?" holds the first (\d+) changes of the transaction',
                      log)
        assert m, log[-3000:]
        assert 0 < int(m.group(1)) < ROWS

        arrow = fe.pyiceberg_arrow("clog")
        rows = list(zip(arrow.column("_firn_op").to_pylist(), arrow.column("id").to_pylist(),
                        arrow.column("v").to_pylist()))
        seed = Counter(r for r in rows if r[0] == "r")
        assert seed == Counter(("r", i, f"seed {i}") for i in range(1, SEED + 1))
        got = Counter(r for r in rows if r[0] != "r")
        want = expected_log()
        dups = [(r[:2], n) for r, n in got.items() if n > want.get(r, 0)]
        assert not dups, f"{len(dups)} changes more than once, e.g. {dups[:3]}"
        assert got == want
        # Every change of the transaction carries its commit position.
        assert len({lsn for lsn, op in zip(arrow.column("_firn_lsn").to_pylist(),
                                           arrow.column("_firn_op").to_pylist())
                    if op != "r"}) == 1

        loc = fe.metadata_location("clog")
        n, s = duck.sql(f"SELECT count(*), sum(id) FROM iceberg_scan('{loc}')").fetchone()
        assert (n, s) == (sum(want.values()) + SEED,
                          sum(r[1] * c for r, c in want.items()) + SEED * (SEED + 1) // 2)
