"""Schema changes while `firn sync --follow` streams (issue 6: "A Relation message that differs
from the known columns becomes a schema-change event, applied before the rows that need it").

ADD COLUMN, int -> bigint, varchar(n) -> text, numeric(p,s) widened and DROP COLUMN are taken in
the same run, which does not exit: the Iceberg schema gets the new column with a fresh field id
and the widened types, and the table equals the source (pyiceberg and DuckDB). A type change
the table cannot take (int -> text) stops that stream only: the other one keeps streaming, the
run exits 3 when stopped with one line naming the table, the column, the types and the remedy;
the next run says the same; dropping the Iceberg table copies it again."""
from __future__ import annotations

import pytest

from firnutil import (FirnEnv, compare_table, iceberg_ids, stop_process, stream_stats,
                      wait_for)

NS = "e2e"


def source_ids(conn, table: str) -> list[int]:
    return [r[0] for r in conn.execute(f"SELECT id FROM {table} ORDER BY id").fetchall()]


def follow(fe: FirnEnv):
    proc = fe.start_follow()
    wait_for(lambda: b"replication connection open" in (fe.root / "follow.log").read_bytes(),
             60, what="firn to stream")
    return proc


@pytest.mark.parametrize("version", [2, 3])
def test_schema_changes_taken_while_following(pg, pg_db, firn_bin, duck, tmp_path, version):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE s (id int PRIMARY KEY, n int, v varchar(10), "
                     "d numeric(10,2), gone text NOT NULL DEFAULT 'g'); "
                     "INSERT INTO s SELECT g, g, 'v' || g, g / 4.0, 'old' FROM "
                     "generate_series(1, 10) g; "
                     "CREATE TABLE o (id int PRIMARY KEY, v text); INSERT INTO o VALUES (1, 'o'); "
                     "CREATE TABLE k (a int, b int, v text, PRIMARY KEY (a, b)); "
                     "INSERT INTO k SELECT g, g, 'k' FROM generate_series(1, 5) g")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["s", "o", "k"], interval_s=0.2, destination={"format_version": version})
        fe.sync()
        before = fe.catalog().load_table(f"{NS}.s")
        last_id = before.metadata.last_column_id
        schema_id = before.schema().schema_id
        proc = follow(fe)
        # Rows with the old columns staged in the same buffer (and the same transaction) as the
        # ALTER and the rows using the new column.
        with conn.transaction():
            conn.execute("INSERT INTO s VALUES (11, 11, 'pre', 1.5, 'x')")
            conn.execute("UPDATE s SET v = 'upd' WHERE id = 2")
            conn.execute("ALTER TABLE s ADD COLUMN extra int")
            conn.execute("INSERT INTO s VALUES (12, 12, 'post', 2.5, 'y', 7)")
        conn.execute("UPDATE s SET extra = id * 10 WHERE id < 4")
        conn.execute("UPDATE o SET v = 'o2'")
        conn.execute("ALTER TABLE s ALTER COLUMN n TYPE bigint")
        conn.execute("INSERT INTO s VALUES (13, 1099511627776, 'big', 3.5, 'z', 8)")
        conn.execute("ALTER TABLE s ALTER COLUMN v TYPE text")
        conn.execute("INSERT INTO s VALUES (14, 14, repeat('long', 10), 4.5, 'w', 9)")
        conn.execute("ALTER TABLE s ALTER COLUMN d TYPE numeric(14,2)")
        conn.execute("INSERT INTO s VALUES (15, 15, 'wide', 123456789012.25, 'u', 10)")
        conn.execute("ALTER TABLE s DROP COLUMN gone")
        conn.execute("INSERT INTO s VALUES (16, 16, 'dropped', 5.5, 11)")
        conn.execute("UPDATE s SET v = 'after drop' WHERE id = 3")
        conn.execute("ALTER TABLE s ADD COLUMN tags int[], ADD COLUMN span interval")
        conn.execute("INSERT INTO s (id, n, v, d, extra, tags, span) VALUES "
                     "(18, 18, 'nested', 7.5, 13, '{1,NULL,3}', '1 day 2 hours')")
        conn.execute("UPDATE s SET tags = '{4}' WHERE id = 1")
        # Widened key columns: one integer key (s.id), and part of a composite key (k.a), whose
        # key index is built again with the new encoding.
        conn.execute("ALTER TABLE s ALTER COLUMN id TYPE bigint")
        conn.execute("UPDATE s SET v = 'key widened' WHERE id IN (4, 18)")
        conn.execute("INSERT INTO s (id, n, v) VALUES (5000000000, 1, 'big key')")
        conn.execute("UPDATE k SET v = 'before'  WHERE a = 1")
        conn.execute("ALTER TABLE k ALTER COLUMN a TYPE bigint")
        conn.execute("UPDATE k SET v = 'after' WHERE a IN (1, 2)")
        conn.execute("DELETE FROM k WHERE a = 3")
        conn.execute("INSERT INTO k VALUES (6000000000, 1, 'big')")
        conn.execute("INSERT INTO o VALUES (2, 'o-last')")
        wait_for(lambda: iceberg_ids(fe, "o") == [1, 2] and 5000000000 in iceberg_ids(fe, "s"), 60,
                 what="the changes after the ALTERs to be committed")
        log = (fe.root / "follow.log").read_text()
        assert proc.poll() is None, log[-3000:]
        assert stop_process(proc) == 0, (fe.root / "follow.log").read_text()[-3000:]
        log = (fe.root / "follow.log").read_text()
        assert 'column \\"extra\\" added as integer while streaming' in log, log[-3000:]

        ice = fe.catalog().load_table(f"{NS}.s")
        fields = {f.name: f for f in ice.schema().fields}
        assert ice.schema().schema_id > schema_id
        assert fields["extra"].field_id > last_id
        # New ids after last-column-id, nested ones (list element, interval members) too.
        assert fields["tags"].field_id > fields["extra"].field_id
        assert fields["tags"].field_type.element_id > fields["extra"].field_id
        assert fields["span"].field_id > fields["extra"].field_id
        assert ice.metadata.last_column_id == max(
            [fields["span"].field_id, fields["tags"].field_type.element_id] +
            [f.field_id for f in fields["span"].field_type.fields])
        assert str(fields["n"].field_type) == "long"
        assert str(fields["v"].field_type) == "string"
        assert str(fields["d"].field_type) == "decimal(14, 2)"
        assert not fields["gone"].required
        compare_table(fe, conn, duck, "s", skip=("gone",))
        compare_table(fe, conn, duck, "o")
        compare_table(fe, conn, duck, "k")
        assert str(fields["id"].field_type) == "long"
        # The dropped column: kept, its values up to the drop, null in rows written after it.
        rows = {r["id"]: r["gone"] for r in ice.scan(selected_fields=("id", "gone"))
                .to_arrow().to_pylist()}
        assert rows[5] == "old" and rows[11] == "x" and rows[15] == "u", rows
        assert rows[16] is None and rows[3] is None and rows[1] is None, rows

        # A catch-up run afterwards changes nothing, and takes changes as usual.
        conn.execute("INSERT INTO s VALUES (17, 17, 'again', 6.5, 12)")
        fe.sync()
        compare_table(fe, conn, duck, "s", skip=("gone",))


def test_incompatible_type_change_stops_that_stream(pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE s (id int PRIMARY KEY, n int, v text); "
                     "INSERT INTO s SELECT g, g, 'v' FROM generate_series(1, 5) g; "
                     "CREATE TABLE o (id int PRIMARY KEY, v text); INSERT INTO o VALUES (1, 'o'); "
                     "CREATE TABLE w (id int PRIMARY KEY, b bigint); INSERT INTO w VALUES (1, 1)")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["s", "o", "w"], interval_s=0.2)
        fe.sync()
        proc = follow(fe)
        conn.execute("INSERT INTO s VALUES (6, 6, 'before')")
        conn.execute("ALTER TABLE s ALTER COLUMN n TYPE text")
        conn.execute("INSERT INTO s VALUES (7, 'seven', 'after')")
        conn.execute("UPDATE s SET n = 'one' WHERE id = 1")
        conn.execute("ALTER TABLE w ALTER COLUMN b TYPE int")  # a narrowing
        conn.execute("INSERT INTO w VALUES (2, 2)")
        conn.execute("UPDATE o SET v = 'o2'")
        conn.execute("INSERT INTO o VALUES (2, 'o-last')")
        # The other stream goes on.
        wait_for(lambda: iceberg_ids(fe, "o") == [1, 2], 60, what="table o to take its changes")
        assert proc.poll() is None, (fe.root / "follow.log").read_text()[-3000:]
        assert iceberg_ids(fe, "s") == [1, 2, 3, 4, 5, 6]  # up to the change
        wait_for(lambda: stream_stats(fe, "e2e.s").get("stopped_at_schema_change"), 30,
                 what="stats to show the stop")
        line = ('column "n" of "public.s" changed type to text (Iceberg int -> string is not a '
                'promotion): stream stopped, the slot keeps its changes; drop table "e2e.s" and '
                'run firn sync to copy it again')
        rc = stop_process(proc)
        log = (fe.root / "follow.log").read_text()
        assert rc == 3, log[-3000:]
        assert line in log, log[-3000:]
        assert ('column \\"b\\" of \\"public.w\\" changed type to integer (Iceberg long -> '
                'int is not a promotion)') in log, log[-3000:]
        assert iceberg_ids(fe, "w") == [1]
        status = fe.run("status", *fe.sync_args, check=True).stdout
        assert "stopped at a schema change" in status, status
        compare_table(fe, conn, duck, "o")

        # The next run keeps that stream stopped, on the same line, and the other one going.
        conn.execute("INSERT INTO o VALUES (3, 'next run')")
        proc2 = fe.sync(check=False)
        assert proc2.returncode == 3, proc2.stderr[-3000:]
        assert line in proc2.stderr, proc2.stderr[-3000:]
        assert iceberg_ids(fe, "o") == [1, 2, 3]
        assert iceberg_ids(fe, "s") == [1, 2, 3, 4, 5, 6]

        # The remedy: drop the Iceberg table; the next run copies it again, nothing is lost.
        fe.catalog().drop_table(f"{NS}.s")
        fe.catalog().drop_table(f"{NS}.w")
        conn.execute("UPDATE o SET v = 'o3' WHERE id = 1")
        fe.sync()
        compare_table(fe, conn, duck, "s")
        compare_table(fe, conn, duck, "o")
        compare_table(fe, conn, duck, "w")
        conn.execute("INSERT INTO s VALUES (8, 'eight', 'later')")
        fe.sync()
        compare_table(fe, conn, duck, "s")


def test_composite_key_widened_between_runs(pg, pg_db, firn_bin, duck, tmp_path):
    """A key column of a composite key widened between runs: the key index the last run saved
    holds the old encoding, so it is built again from the data files instead of being loaded
    (loaded, an update of an old key would have added a second row)."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE s (id int, k int, v text, PRIMARY KEY (id, k)); "
                     "INSERT INTO s SELECT g, g, 'v' FROM generate_series(1, 5) g")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["s"], interval_s=0.2)
        fe.sync()
        conn.execute("UPDATE s SET v = 'a' WHERE id = 2")
        fe.sync()
        conn.execute("ALTER TABLE s ALTER COLUMN id TYPE bigint")
        conn.execute("UPDATE s SET v = 'b' WHERE id = 1")
        conn.execute("DELETE FROM s WHERE id = 3")
        fe.sync()
        compare_table(fe, conn, duck, "s")


def test_type_change_and_added_column_between_runs(pg, pg_db, firn_bin, duck, tmp_path):
    """Issue 24 item 11 (the C16 stop): a type change the table cannot take plus a column added
    after it, between runs. Every run ends on the actionable line (not an internal one about the
    added column), exits 3 (a source-side cause, not 4), the other stream goes on, and `firn
    status` shows where the slot is held: a real position, not a placeholder."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, a text); "
                     "INSERT INTO t VALUES (1, '5'); "
                     "CREATE TABLE o (id int PRIMARY KEY, v text); INSERT INTO o VALUES (1, 'o')")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["t", "o"])
        fe.sync()
        conn.execute("ALTER TABLE t ALTER COLUMN a TYPE int USING a::int")
        conn.execute("ALTER TABLE t ADD COLUMN b int")
        conn.execute("INSERT INTO t VALUES (2, 6, 7)")
        line = ('firn: column "a" of "public.t" changed type to integer (Iceberg string -> int '
                'is not a promotion): stream stopped, the slot keeps its changes; drop table '
                '"e2e.t" and run firn sync to copy it again')
        for i in range(2):
            conn.execute("INSERT INTO o VALUES (%s, 'more')", (10 + i,))
            proc = fe.sync("--log", "warn", check=False)
            assert proc.returncode == 3, proc.stderr[-3000:]
            assert proc.stderr.strip().splitlines()[-1] == line, proc.stderr[-3000:]
            assert "after evolution" not in proc.stderr, proc.stderr[-3000:]
            assert iceberg_ids(fe, "o") == [1] + list(range(10, 11 + i))
        assert iceberg_ids(fe, "t") == [1]
        stopped = stream_stats(fe, "e2e.t")["stopped_at_schema_change"]
        lsn = int(fe.catalog().load_table("e2e.t").current_snapshot().summary["firn.lsn"])
        assert stopped == f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}", stopped
        status = fe.run("status", *fe.sync_args, check=True).stdout
        row = next(r for r in status.splitlines() if r.startswith("public.t "))
        assert row.endswith(f"stopped at a schema change ({stopped})"), row
        assert "(0/1)" not in status
        compare_table(fe, conn, duck, "o")
        # The remedy as printed works on the first try, though the catch-up runs acknowledged
        # no position to the slot (the state file's position of the stream says it is ours).
        fe.catalog().drop_table(f"{NS}.t")
        fe.sync()
        compare_table(fe, conn, duck, "t")
        conn.execute("INSERT INTO t VALUES (3, 8, 9)")
        fe.sync()
        compare_table(fe, conn, duck, "t")
