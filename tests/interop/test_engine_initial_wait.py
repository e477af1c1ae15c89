# SPDX-License-Identifier: Apache-2.0
"""`initial_wait_seconds` (OLake `update_method.initial_wait_time`) of catch-up runs: for a role
the server does not tell how far it has sent (no pg_read_all_stats), a catch-up run ends once no
change arrived for that long, and reads every change made before it started (the table equals
the source, pyiceberg and DuckDB); a role that can see pg_stat_replication ends as soon as the
server has sent the start position, whatever the setting."""

from __future__ import annotations

import time

from firnutil import FirnEnv
from test_engine_e2e import compare_table


def timed_sync(fe: FirnEnv) -> float:
    t0 = time.monotonic()
    fe.sync()
    return time.monotonic() - t0


def test_initial_wait_bounds_catch_up_runs(pg, pg_db, firn_bin, duck, tmp_path):
    role = f"r_{pg_db}"
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN REPLICATION')
        conn.execute(f'GRANT CREATE ON DATABASE "{pg_db}" TO "{role}"')
        conn.execute("CREATE TABLE w (id int PRIMARY KEY, v text)")
        conn.execute(f'ALTER TABLE w OWNER TO "{role}"')
        conn.execute("INSERT INTO w SELECT g, 'v' || g FROM generate_series(1, 50) g")
        try:
            fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
            fe.write_destination(600)
            fe.write_streams(["w"])
            fe.write_source(pg, username=role, initial_wait_seconds=1)
            fe.sync()
            conn.execute("UPDATE w SET v = 'changed' WHERE id < 10")
            conn.execute("DELETE FROM w WHERE id > 45")
            fe.sync()
            compare_table(fe, conn, duck, "w")
            # Nothing to read: the run waits initial_wait_seconds for a change, then ends.
            short = timed_sync(fe)
            fe.write_source(pg, username=role, initial_wait_seconds=8)
            long = timed_sync(fe)
            assert long >= 8, long
            assert short < long - 4, (short, long)
            conn.execute("INSERT INTO w VALUES (100, 'late')")
            fe.sync()
            compare_table(fe, conn, duck, "w")

            # A role with pg_read_all_stats: the server says it has sent everything, so the
            # run does not wait for initial_wait_seconds.
            conn.execute(f'GRANT pg_read_all_stats TO "{role}"')
            fast = timed_sync(fe)
            assert fast < long - 4, (fast, long)
            conn.execute("INSERT INTO w VALUES (101, 'seen')")
            fe.sync()
            compare_table(fe, conn, duck, "w")
        finally:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = 'firn_e2e' AND NOT active")
            conn.execute("DROP PUBLICATION IF EXISTS firn_e2e")
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')
