# SPDX-License-Identifier: Apache-2.0
"""A selected table the source no longer has (docs/cdc.md "Schema changes", "Renamed table").

A stream firn synced before whose table was renamed (the remedy not applied yet) or dropped is a
stopped stream: one line naming the table and what to do, the other streams copied and followed
as usual (values compared with PostgreSQL through pyiceberg and DuckDB), exit 3, stats.json shows
it stopped and the slot keeps the changes it still needs: after the remedy nothing is lost. A
stream that never synced and names no table (a misspelt name) is a configuration error (exit 2)
at `firn check` and at `firn sync`, before anything is written."""
from __future__ import annotations

from firnutil import FirnEnv, compare_table, stream_stats

NS = "e2e"


def error_lines(proc) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if ln.startswith("firn: ")]


def check(fe: FirnEnv):
    return fe.run("check", "--source", str(fe.source), "--destination", str(fe.destination),
                  "--streams", str(fe.streams), "--log", "error", timeout=60)


def test_renamed_and_dropped_tables_stop_only_their_streams(pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE r (id int PRIMARY KEY, v text); "
                     "INSERT INTO r SELECT g, 'r' || g FROM generate_series(1, 5) g; "
                     "CREATE TABLE d (id int PRIMARY KEY, v text); INSERT INTO d VALUES (1, 'd'); "
                     "CREATE TABLE o (id int PRIMARY KEY, v text); "
                     "INSERT INTO o SELECT g, 'o' || g FROM generate_series(1, 5) g")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["r", "d", "o"], interval_s=0.2)
        fe.sync()
        oid = conn.execute("SELECT 'r'::regclass::oid::text").fetchone()[0]
        assert fe.catalog().load_table(f"{NS}.r").properties["firn.source-oid"] == oid
        # Between runs: changes under the old name, the rename, changes under the new name; d is
        # dropped; o changes all along.
        conn.execute("INSERT INTO r VALUES (6, 'before rename'); UPDATE r SET v = 'u' WHERE id = 1")
        conn.execute("ALTER TABLE r RENAME TO r2")
        conn.execute("INSERT INTO r2 VALUES (7, 'renamed'); DELETE FROM r2 WHERE id = 2")
        conn.execute("DROP TABLE d")
        conn.execute("UPDATE o SET v = 'o-upd' WHERE id = 1; INSERT INTO o VALUES (6, 'o6')")

        line_r = ('source table "public.r" was renamed to "public.r2": stream stopped, the slot '
                  'keeps its changes; rename it back (ALTER TABLE "public"."r2" RENAME TO "r") '
                  'or stream "public.r2" with "target_table": "r"; then run firn sync')
        line_d = ('source table \\"public.d\\" does not exist (renamed or dropped): stream '
                  'stopped, the slot keeps its changes; rename it back or point the stream at '
                  'the new name with \\"target_table\\": \\"d\\", or remove the stream if the '
                  'table was dropped; then run firn sync')
        for attempt in range(2):
            proc = fe.sync(check=False)
            assert proc.returncode == 3, proc.stderr[-4000:]
            # The first stopped stream is the run's line; each stop is logged once.
            assert error_lines(proc) == [f"firn: {line_r}"], proc.stderr[-4000:]
            assert proc.stderr.count("was renamed to") == 2, proc.stderr[-4000:]
            assert line_d in proc.stderr, proc.stderr[-4000:]
            compare_table(fe, conn, duck, "o", "o")
            assert stream_stats(fe, f"{NS}.r").get("stopped_at_schema_change")
            assert stream_stats(fe, f"{NS}.d").get("stopped_at_schema_change")
            assert not stream_stats(fe, f"{NS}.o").get("stopped_at_schema_change")
            conn.execute(f"INSERT INTO o VALUES ({10 + attempt}, 'between'); "
                         f"INSERT INTO r2 VALUES ({10 + attempt}, 'between')")

        assert stream_stats(fe, f"{NS}.d").get("source_table_missing") is True
        status = fe.run("status", "--streams", str(fe.streams), "--state", str(fe.state),
                        "--destination", str(fe.destination)).stdout
        rows = {ln.split()[0]: ln for ln in status.splitlines()[1:]}
        assert "stopped (source table missing)" in rows["public.r"], status
        assert "stopped" not in rows["public.o"], status

        # check names both tables in one line; they were synced: a source error (3).
        proc = check(fe)
        assert proc.returncode == 3, proc.stderr
        assert error_lines(proc) == [
            'firn: source has no table for these streams: "public.r", "public.d" selected in '
            'the streams file; a table renamed: rename it back or point its stream at the new '
            'name with "target_table" (its Iceberg table); dropped: remove the stream; misspelt: '
            'fix its namespace or stream_name (firn discover lists the tables)'], proc.stderr

        # Remedies: r's stream points at r2 and keeps its Iceberg table; d's stream is removed.
        fe.write_streams(["o", ("r2", {"target_table": "r"})])
        proc = fe.sync(check=False)
        assert proc.returncode == 0, proc.stderr[-4000:]
        compare_table(fe, conn, duck, "r2", "r")  # nothing made while r was stopped is lost
        compare_table(fe, conn, duck, "o", "o")
        conn.execute("UPDATE r2 SET v = 'later' WHERE id = 7; INSERT INTO o VALUES (20, 'x')")
        fe.sync()
        compare_table(fe, conn, duck, "r2", "r")
        compare_table(fe, conn, duck, "o", "o")
        assert check(fe).returncode == 0


def test_misspelt_table_is_a_configuration_error(pg, pg_db, firn_bin, tmp_path):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE o (id int PRIMARY KEY, v text); INSERT INTO o VALUES (1, 'o')")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.setup(pg, ["o", "typo"])
    want = ('firn: source table "public.typo" of a selected stream does not exist and firn never '
            'synced it; fix the namespace or stream_name in the streams file (firn discover '
            'lists the tables) or remove the stream')
    proc = fe.sync(check=False)
    assert proc.returncode == 2, proc.stderr
    assert error_lines(proc) == [want], proc.stderr
    assert not fe.catalog_db.exists() or not fe.catalog().list_namespaces(), "a table was created"
    with pg.connect(dbname=pg_db) as conn:
        assert conn.execute("SELECT count(*) FROM pg_replication_slots "
                            "WHERE slot_name = 'firn_e2e'").fetchone()[0] == 0
    proc = check(fe)
    assert proc.returncode == 2, proc.stderr
    assert error_lines(proc) == [
        'firn: source has no table "public.typo" selected in the streams file; a table '
        'renamed: rename it back or point its stream at the new name with "target_table" (its '
        'Iceberg table); dropped: remove the stream; misspelt: fix its namespace or stream_name '
        '(firn discover lists the tables)'], proc.stderr
