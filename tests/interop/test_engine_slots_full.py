# SPDX-License-Identifier: Apache-2.0
"""Every replication slot of the server taken (max_replication_slots): the first `firn sync` of
a CDC stream cannot create its slot and says so in one line with the remedy, exit 3, and copies
nothing; once a slot is free the next run copies the table, equal to the source."""

from __future__ import annotations

import psycopg
import pytest

from firnutil import FirnEnv, META_COLUMNS, arrow_rows, diff_rows, source_rows


@pytest.fixture
def fe(pg, pg_db, firn_bin, tmp_path) -> FirnEnv:
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 100) g")
    env = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    env.setup(pg, ["t"], source={"slot": "firn_slots_full"})
    return env


def test_no_free_replication_slot(fe, pg):
    taken = []
    with pg.connect(dbname=fe.dbname) as conn:
        try:
            for i in range(100):
                name = f"trial_filler_{i}"
                try:
                    conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')",
                                 (name,))
                except psycopg.errors.ConfigurationLimitExceeded:
                    break
                taken.append(name)
            else:
                pytest.fail("max_replication_slots was never reached")
            proc = fe.sync("--log", "error", check=False)
            assert proc.returncode == 3, proc.stderr
            assert proc.stderr.strip().splitlines() == [
                'firn: could not create replication slot "firn_slots_full": all '
                'max_replication_slots are in use; drop an unused slot listed in '
                'pg_replication_slots (pg_drop_replication_slot) or raise max_replication_slots']
            conn.execute("SELECT pg_drop_replication_slot(%s)", (taken.pop(),))
            fe.sync("--log", "error")
        finally:
            for name in taken:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (name,))
    tbl = fe.catalog().load_table("e2e.t")
    names = [f.name for f in tbl.schema().fields if f.name not in META_COLUMNS]
    with pg.connect(dbname=fe.dbname) as conn:
        expected = source_rows(conn, "t", tbl.schema(), names)
    diff = diff_rows(expected, arrow_rows(tbl.scan().to_arrow(), names), 0, names)
    assert not diff and len(expected) == 100, diff
