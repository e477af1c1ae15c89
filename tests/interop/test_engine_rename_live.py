"""Renames on the source while `firn sync --follow` streams (docs/cdc.md "Schema changes").

ALTER TABLE ... RENAME TO and ALTER TABLE ... SET SCHEMA stop that stream (the Relation message
names the table's oid under another name): exit 3, one line naming both names and the remedies,
the slot kept before the change, the other streams going on. Both remedies are applied (rename it
back; select the new name with target_table/target_namespace) and the next run leaves each
Iceberg table equal to its source table, value by value (pyiceberg and DuckDB): nothing made
while the table was renamed is lost."""
from __future__ import annotations

import json
import os
import signal

from firnutil import (FirnEnv, compare_table, iceberg_ids, slot_active, stop_process,
                      stream_stats, wait_for)

NS = "e2e"


def write_streams(fe: FirnEnv, selected: dict) -> None:
    doc = {"selected_streams": {
        schema: [dict({"stream_name": name, "sync_mode": "full_refresh_cdc"}, **opts)
                 for name, opts in items] for schema, items in selected.items()}}
    fe.streams.write_text(json.dumps(doc, indent=2))


def test_table_renamed_while_following(pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA other; "
                     "CREATE TABLE r (id int PRIMARY KEY, v text); "
                     "INSERT INTO r SELECT g, 'r' || g FROM generate_series(1, 5) g; "
                     "CREATE TABLE m (id int PRIMARY KEY, v text); "
                     "INSERT INTO m SELECT g, 'm' || g FROM generate_series(1, 5) g; "
                     "CREATE TABLE o (id int PRIMARY KEY, v text); INSERT INTO o VALUES (1, 'o')")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["r", "m", "o"], interval_s=0.2)
        fe.sync()
        proc = fe.start_follow()
        try:
            wait_for(lambda: slot_active(conn), 60, what="firn to stream")
            conn.execute("INSERT INTO r VALUES (6, 'before')")
            conn.execute("UPDATE m SET v = 'before' WHERE id = 1")
            # The old name and the new one in one transaction, then changes under the new name.
            with conn.transaction():
                conn.execute("INSERT INTO r VALUES (7, 'same txn')")
                conn.execute("ALTER TABLE r RENAME TO r2")
                conn.execute("INSERT INTO r2 VALUES (8, 'renamed')")
            conn.execute("UPDATE r2 SET v = 'upd renamed' WHERE id = 1")
            conn.execute("DELETE FROM r2 WHERE id = 2")
            conn.execute("ALTER TABLE m SET SCHEMA other")
            conn.execute("INSERT INTO other.m VALUES (6, 'moved')")
            conn.execute("DELETE FROM other.m WHERE id = 3")
            conn.execute("UPDATE o SET v = 'o2'")
            conn.execute("INSERT INTO o VALUES (2, 'o-last')")
            # The other stream goes on.
            try:
                wait_for(lambda: iceberg_ids(fe, "o") == [1, 2], 60,
                         what="table o to take its changes")
            except AssertionError:
                raise AssertionError((fe.root / "follow.log").read_text()[-6000:])
            wait_for(lambda: stream_stats(fe, "e2e.r").get("stopped_at_schema_change") and
                     stream_stats(fe, "e2e.m").get("stopped_at_schema_change"), 30,
                     what="stats to show both stops")
            assert proc.poll() is None, (fe.root / "follow.log").read_text()[-3000:]
        finally:
            rc = stop_process(proc)
        log = (fe.root / "follow.log").read_text()
        assert rc == 3, log[-3000:]
        line_r = ('source table \\"public.r\\" was renamed to \\"public.r2\\": stream stopped, the '
                  'slot keeps its changes; rename it back (ALTER TABLE \\"public\\".\\"r2\\" '
                  'RENAME TO \\"r\\") or stream \\"public.r2\\" with \\"target_table\\": \\"r\\"; '
                  'then run firn sync')
        line_m = ('source table \\"public.m\\" was renamed to \\"other.m\\": stream stopped, the '
                  'slot keeps its changes; rename it back (ALTER TABLE \\"other\\".\\"m\\" SET '
                  'SCHEMA \\"public\\") or stream \\"other.m\\" with \\"target_table\\": \\"m\\", '
                  '\\"target_namespace\\": \\"e2e\\"; then run firn sync')
        assert line_r in log, log[-3000:]
        assert line_m in log, log[-3000:]
        compare_table(fe, conn, duck, "o", "o")
        # Nothing of a renamed table's changes was written under its old stream: up to the change.
        assert iceberg_ids(fe, "m") == [1, 2, 3, 4, 5]

        # Remedies: r gets its name back; m's stream is pointed at its new schema, kept on e2e.m.
        conn.execute("ALTER TABLE r2 RENAME TO r")
        conn.execute("INSERT INTO r VALUES (9, 'after remedy')")
        conn.execute("INSERT INTO other.m VALUES (7, 'after remedy')")
        write_streams(fe, {"public": [("r", {}), ("o", {})],
                           "other": [("m", {"target_table": "m", "target_namespace": NS})]})
        fe.sync()
        compare_table(fe, conn, duck, "r", "r")
        compare_table(fe, conn, duck, "other.m", "m")
        compare_table(fe, conn, duck, "o", "o")
        assert 8 in iceberg_ids(fe, "r") and 2 not in iceberg_ids(fe, "r")

        # Both streams go on as usual.
        conn.execute("UPDATE r SET v = 'later' WHERE id = 8")
        conn.execute("UPDATE other.m SET v = 'later' WHERE id = 6")
        fe.sync()
        compare_table(fe, conn, duck, "r", "r")
        compare_table(fe, conn, duck, "other.m", "m")


def field_ids(fe: FirnEnv, table: str) -> dict[str, int]:
    return {f.name: f.field_id for f in fe.catalog().load_table(f"{NS}.{table}").schema().fields}


def test_column_renamed_while_following_and_between_runs(pg, pg_db, firn_bin, duck, tmp_path):
    """RENAME COLUMN keeps the Iceberg field (same id, new name): rows from before read under the
    new name. "Drop the last column, add one of the same type" looks the same in a Relation
    message and stays a drop and an add (told apart by the source's attnum)."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE s (id int PRIMARY KEY, a text, b int); "
                     "INSERT INTO s SELECT g, 'a' || g, g FROM generate_series(1, 5) g; "
                     "CREATE TABLE d (id int PRIMARY KEY, x int, y int); "
                     "INSERT INTO d SELECT g, g, g * 10 FROM generate_series(1, 3) g")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["s", "d"], interval_s=0.2)
        fe.sync()
        ids_s, ids_d = field_ids(fe, "s"), field_ids(fe, "d")
        proc = fe.start_follow()
        try:
            wait_for(lambda: slot_active(conn), 60, what="firn to stream")
            with conn.transaction():
                conn.execute("INSERT INTO s VALUES (6, 'before', 6)")
                conn.execute("ALTER TABLE s RENAME COLUMN a TO a2")
                conn.execute("INSERT INTO s VALUES (7, 'after', 7)")
            conn.execute("UPDATE s SET a2 = 'renamed' WHERE id = 1")
            conn.execute("ALTER TABLE d DROP COLUMN y, ADD COLUMN z int")
            conn.execute("INSERT INTO d VALUES (4, 4, 400)")
            conn.execute("UPDATE d SET z = 100 WHERE id = 1")
            wait_for(lambda: 4 in iceberg_ids(fe, "d") and 7 in iceberg_ids(fe, "s"), 60,
                     what="the changes after the ALTERs")
            assert proc.poll() is None, (fe.root / "follow.log").read_text()[-3000:]
        finally:
            rc = stop_process(proc)
        log = (fe.root / "follow.log").read_text()
        assert rc == 0, log[-3000:]
        assert 'column \\"a\\" renamed to \\"a2\\" on the source while streaming' in log, log
        now_s, now_d = field_ids(fe, "s"), field_ids(fe, "d")
        assert "a" not in now_s and now_s["a2"] == ids_s["a"], (ids_s, now_s)
        compare_table(fe, conn, duck, "s", "s")
        # d: y was dropped (kept, its values in rows not written since), z is a new field.
        assert now_d["y"] == ids_d["y"] and now_d["z"] > max(ids_d.values()), (ids_d, now_d)
        ice = fe.catalog().load_table(f"{NS}.d").scan().to_arrow().to_pylist()
        assert {r["id"]: (r["y"], r["z"]) for r in ice} == {
            1: (None, 100), 2: (20, None), 3: (30, None), 4: (None, 400)}, ice

        # Between runs: a change under the old name, the rename, a change under the new name.
        conn.execute("INSERT INTO s VALUES (8, 'old name', 8)")
        conn.execute("ALTER TABLE s RENAME COLUMN b TO b2")
        conn.execute("INSERT INTO s VALUES (9, 'new name', 9)")
        conn.execute("UPDATE s SET b2 = 77 WHERE id = 2")
        fe.sync()
        now_s = field_ids(fe, "s")
        assert "b" not in now_s and now_s["b2"] == ids_s["b"], (ids_s, now_s)
        compare_table(fe, conn, duck, "s", "s")
        conn.execute("UPDATE s SET b2 = 88, a2 = 'later' WHERE id = 3")
        fe.sync()
        compare_table(fe, conn, duck, "s", "s")


def test_column_renamed_twice_stops_that_stream(pg, pg_db, firn_bin, duck, tmp_path):
    """A column renamed, written, and renamed again (firn paused meanwhile): when firn reads the
    first rename the catalog already has the second name, so which column of the change it is cannot
    be told; that stream stops (exit 3, the other goes on) and its remedy (drop the Iceberg
    table, sync) copies it again without loss."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE s (id int PRIMARY KEY, a int, b int); "
                     "INSERT INTO s SELECT g, g, g FROM generate_series(1, 3) g; "
                     "CREATE TABLE o (id int PRIMARY KEY, v text); INSERT INTO o VALUES (1, 'o')")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["s", "o"], interval_s=0.2)
        fe.sync()
        proc = fe.start_follow()
        try:
            wait_for(lambda: slot_active(conn), 60, what="firn to stream")
            # firn is paused while both renames commit, so it reads the first with the
            # catalog already at the second.
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                conn.execute("ALTER TABLE s RENAME COLUMN a TO a2")
                conn.execute("INSERT INTO s VALUES (4, 40, 4)")
                conn.execute("ALTER TABLE s RENAME COLUMN a2 TO a3")
                conn.execute("INSERT INTO s VALUES (5, 50, 5)")
                conn.execute("INSERT INTO o VALUES (2, 'o2')")
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            wait_for(lambda: iceberg_ids(fe, "o") == [1, 2], 60, what="table o")
            wait_for(lambda: stream_stats(fe, "e2e.s").get("stopped_at_schema_change"), 30,
                     what="stats to show the stop")
        finally:
            rc = stop_process(proc)
        log = (fe.root / "follow.log").read_text()
        assert rc == 3, log[-3000:]
        assert ('column \\"a\\" of \\"public.s\\" was renamed while streaming and again since '
                '(now \\"a3\\"): stream stopped, the slot keeps its changes; drop table '
                '\\"e2e.s\\" and run firn sync to copy it again') in log, log[-3000:]
        assert iceberg_ids(fe, "s") == [1, 2, 3]
        fe.catalog().drop_table(f"{NS}.s")
        # The copy holds the changes the slot replays under the in-between name: skipped.
        fe.sync()
        compare_table(fe, conn, duck, "s", "s")
        compare_table(fe, conn, duck, "o", "o")
        conn.execute("UPDATE s SET a3 = 400 WHERE id = 4")
        fe.sync()
        compare_table(fe, conn, duck, "s", "s")


SWAP = ("ALTER TABLE c RENAME city TO tmp", "ALTER TABLE c RENAME zip TO city",
        "ALTER TABLE c RENAME tmp TO zip")


def test_column_names_swapped_between_runs_and_while_following(pg, pg_db, firn_bin, duck,
                                                               tmp_path):
    """Two columns of the same type swap names (issue 24 item 2), between runs and while
    `--follow` streams: each becomes an Iceberg rename of the field of the same source column
    (attnum), so every value stays under the column it belongs to, old rows and new."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE c (id int PRIMARY KEY, city text, zip text); "
                     "INSERT INTO c SELECT g, 'city' || g, 'zip' || g FROM generate_series(1, 4) g")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["c"], interval_s=0.2)
        fe.sync()
        ids = field_ids(fe, "c")

        def check(swapped: bool):
            now = field_ids(fe, "c")
            want = ({"city": ids["zip"], "zip": ids["city"]} if swapped
                    else {"city": ids["city"], "zip": ids["zip"]})
            assert {k: now[k] for k in ("city", "zip")} == want, (ids, now)
            compare_table(fe, conn, duck, "c", "c")
            rows = {r["id"]: (r["city"], r["zip"])
                    for r in fe.catalog().load_table(f"{NS}.c").scan().to_arrow().to_pylist()}
            assert rows == dict((i, (c, z)) for i, c, z in
                                conn.execute("SELECT id, city, zip FROM c").fetchall())
            # rows copied before the swap: the old city values now read as zip
            assert rows[1] == (("zip1", "city1") if swapped else ("city1", "zip1")), rows

        # Between runs.
        for s in SWAP:
            conn.execute(s)
        conn.execute("INSERT INTO c VALUES (5, 'new city', 'new zip')")
        conn.execute("UPDATE c SET city = 'upd city' WHERE id = 2")
        out = fe.sync().stderr
        assert 'column \\"city\\" was renamed to \\"zip\\" on the source' in out, out[-3000:]
        assert 'column \\"zip\\" was renamed to \\"city\\" on the source' in out, out[-3000:]
        check(swapped=True)

        # While following: swapped back, then changes.
        proc = fe.start_follow()
        try:
            wait_for(lambda: slot_active(conn), 60, what="firn to stream")
            conn.execute("INSERT INTO c VALUES (6, 'c6', 'z6')")
            with conn.transaction():
                for s in SWAP:
                    conn.execute(s)
            conn.execute("INSERT INTO c VALUES (7, 'c7', 'z7')")
            conn.execute("UPDATE c SET zip = 'upd zip' WHERE id = 3")
            wait_for(lambda: 7 in iceberg_ids(fe, "c"), 60, what="the changes after the swap")
            assert proc.poll() is None, (fe.root / "follow.log").read_text()[-3000:]
        finally:
            rc = stop_process(proc)
        log = (fe.root / "follow.log").read_text()
        assert rc == 0, log[-3000:]
        assert 'column \\"zip\\" renamed to \\"city\\" on the source while streaming' in log, log
        check(swapped=False)
        conn.execute("UPDATE c SET city = 'last', zip = 'last zip' WHERE id = 4")
        fe.sync()
        check(swapped=False)
