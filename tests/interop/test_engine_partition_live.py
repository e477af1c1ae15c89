"""Partitions that change while firn streams a partitioned table (issue 24 item 1).

With a publication without publish_via_partition_root, PostgreSQL sends the changes of each leaf
partition under the leaf's own oid. A partition created (at any level) while `firn sync --follow`
streams, or between runs, is placed under its streamed root and its rows reach the root's
Iceberg table. A partition attached with rows it already held (never sent as changes), and a
TRUNCATE of some partitions only, stop that table's stream with one line naming the partition
and the remedy, the slot held at the table's position, the other streams going; the remedy
(drop the Iceberg table, run firn sync) gives the source's rows. A partition detached while
streaming takes no more changes, with a warning. Partitions created while firn is killed at its
crash points lose and double nothing. Every table is compared value by value with the source
through pyiceberg and DuckDB."""
from __future__ import annotations

import pytest

from firnutil import (FirnEnv, compare_table, iceberg_ids, reaped, slot_active, stop_process,
                      stream_stats, wait_for)

NS = "e2e"
PUB = "firn_e2e"


def follow(fe: FirnEnv):
    proc = fe.start_follow()
    wait_for(lambda: b"replication connection open" in (fe.root / "follow.log").read_bytes(),
             60, what="firn to stream")
    return proc


def streaming(fe: FirnEnv, conn):
    """Starts a follow run and waits until it streams (past its checks at the start)."""
    proc = follow(fe)
    wait_for(lambda: slot_active(conn), 60, what="the slot to be in use")
    return proc


def log_of(fe: FirnEnv) -> str:
    return (fe.root / "follow.log").read_text()


def make_source(conn, via_root: bool = False, extra_pub: str = ""):
    conn.execute("CREATE TABLE p (id int, region text, v text, PRIMARY KEY (id, region)) "
                 "PARTITION BY LIST (region); "
                 "CREATE TABLE p_a PARTITION OF p FOR VALUES IN ('a'); "
                 "INSERT INTO p SELECT g, 'a', 'a' || g FROM generate_series(1, 5) g; "
                 "CREATE TABLE o (id int PRIMARY KEY, v text); INSERT INTO o VALUES (1, 'o')")
    opt = " WITH (publish_via_partition_root = true)" if via_root else ""
    conn.execute(f"CREATE PUBLICATION {PUB} FOR TABLE p, o{extra_pub}{opt}")


def confirmed_lsn(conn) -> int:
    text = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                        "WHERE slot_name = 'firn_e2e'").fetchone()[0]
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def current_lsn(conn) -> int:
    text = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def test_partitions_created_while_streaming_and_between_runs(pg, pg_db, firn_bin, duck,
                                                             tmp_path):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        make_source(conn)
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["p", "o"], interval_s=0.2)
        fe.sync()
        with reaped(streaming(fe, conn)) as proc:
            conn.execute("CREATE TABLE p_b PARTITION OF p FOR VALUES IN ('b')")
            conn.execute("INSERT INTO p SELECT g, 'b', 'b' || g FROM generate_series(10, 14) g")
            conn.execute("UPDATE p SET v = 'b-upd' WHERE id = 11")
            conn.execute("DELETE FROM p WHERE id = 12")
            # Two levels: a sub-partitioned partition and its leaf, created while streaming.
            conn.execute("CREATE TABLE p_s PARTITION OF p FOR VALUES IN ('s1', 's2') "
                         "PARTITION BY LIST (region); "
                         "CREATE TABLE p_s1 PARTITION OF p_s FOR VALUES IN ('s1')")
            conn.execute("INSERT INTO p VALUES (20, 's1', 'deep'), (21, 's1', 'deep2')")
            # Created and filled in one transaction; a row moved between partitions.
            with conn.transaction():
                conn.execute("CREATE TABLE p_c PARTITION OF p FOR VALUES IN ('c')")
                conn.execute("INSERT INTO p VALUES (30, 'c', 'same txn')")
                conn.execute("UPDATE p SET region = 'c' WHERE id = 13")
            conn.execute("INSERT INTO o VALUES (2, 'o-last')")
            wait_for(lambda: iceberg_ids(fe, "o") == [1, 2], 60, what="table o's last change")
            wait_for(lambda: 30 in iceberg_ids(fe, "p"), 30, what="the rows of p_c")
            assert proc.poll() is None, log_of(fe)[-3000:]
            assert stop_process(proc) == 0, log_of(fe)[-3000:]
        log = log_of(fe)
        assert 'partition \\"public\\".\\"p_b\\" of table \\"public\\".\\"p\\" is new' in log, log
        assert 'partition \\"public\\".\\"p_s1\\" of table' in log, log[-3000:]
        assert iceberg_ids(fe, "p") == [1, 2, 3, 4, 5, 10, 11, 13, 14, 20, 21, 30]
        compare_table(fe, conn, duck, "p")
        compare_table(fe, conn, duck, "o")

        # Between runs: a new partition (and a new leaf of the sub-partitioned one).
        conn.execute("CREATE TABLE p_d PARTITION OF p FOR VALUES IN ('d'); "
                     "CREATE TABLE p_s2 PARTITION OF p_s FOR VALUES IN ('s2'); "
                     "INSERT INTO p VALUES (40, 'd', 'stopped'), (41, 's2', 'stopped deep'); "
                     "UPDATE p SET v = 'upd stopped' WHERE id = 10")
        fe.sync()
        compare_table(fe, conn, duck, "p")
        # A whole-table TRUNCATE empties the table, then it takes new rows.
        conn.execute("TRUNCATE p")
        conn.execute("INSERT INTO p VALUES (50, 'b', 'after truncate')")
        fe.sync()
        assert iceberg_ids(fe, "p") == [50]
        compare_table(fe, conn, duck, "p")


@pytest.mark.parametrize("between_runs", [False, True])
def test_attached_partition_with_rows_stops_that_stream(pg, pg_db, firn_bin, duck, tmp_path,
                                                        between_runs):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        make_source(conn)
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["p", "o"], interval_s=0.2)
        fe.sync()
        line = ('partition "public"."p_e" was attached to table "public"."p" with rows it '
                'already held, which PostgreSQL does not send as changes: stream stopped, the '
                'slot keeps its changes; drop table "e2e.p" and run firn sync to copy it again')

        def attach():
            conn.execute("INSERT INTO p VALUES (6, 'a', 'before attach')")
            conn.execute("CREATE TABLE p_e (id int NOT NULL, region text NOT NULL, v text); "
                         "INSERT INTO p_e VALUES (60, 'e', 'held before'), (61, 'e', 'held too')")
            conn.execute("ALTER TABLE p ATTACH PARTITION p_e FOR VALUES IN ('e')")
            held = current_lsn(conn)  # the first change of p_e comes after this
            conn.execute("INSERT INTO p VALUES (62, 'e', 'after attach')")
            return held

        if between_runs:
            held = attach()
            conn.execute("INSERT INTO o VALUES (2, 'o2')")
            run = fe.sync(check=False)
            assert run.returncode == 3, run.stderr[-3000:]
            assert line in run.stderr, run.stderr[-3000:]
            assert iceberg_ids(fe, "p") == [1, 2, 3, 4, 5]
        else:
            with reaped(streaming(fe, conn)) as proc:
                held = attach()
                conn.execute("INSERT INTO o VALUES (2, 'o2')")
                wait_for(lambda: iceberg_ids(fe, "o") == [1, 2], 60, what="table o to go on")
                wait_for(lambda: stream_stats(fe, "e2e.p").get("stopped_at_schema_change"), 30,
                         what="stats to show the stop")
                assert proc.poll() is None, log_of(fe)[-3000:]
                rc = stop_process(proc)
            assert rc == 3, log_of(fe)[-3000:]
            assert line in log_of(fe), log_of(fe)[-3000:]
            # The change before the attach is in; nothing of p_e.
            assert iceberg_ids(fe, "p") == [1, 2, 3, 4, 5, 6]
        # The slot is held at the table's position, before the attach.
        assert confirmed_lsn(conn) <= held
        compare_table(fe, conn, duck, "o")

        # The next run says the same and keeps the other stream going.
        conn.execute("INSERT INTO o VALUES (3, 'o3')")
        run = fe.sync(check=False)
        assert run.returncode == 3, run.stderr[-3000:]
        assert line in run.stderr, run.stderr[-3000:]
        assert iceberg_ids(fe, "o") == [1, 2, 3]
        assert confirmed_lsn(conn) <= held

        # The remedy as printed.
        fe.catalog().drop_table(f"{NS}.p")
        fe.sync()
        assert 60 in iceberg_ids(fe, "p") and 62 in iceberg_ids(fe, "p")
        compare_table(fe, conn, duck, "p")
        conn.execute("INSERT INTO p VALUES (63, 'e', 'later'); UPDATE p SET v = 'x' WHERE id = 60")
        fe.sync()
        compare_table(fe, conn, duck, "p")
        compare_table(fe, conn, duck, "o")


def test_attached_partition_with_rows_via_partition_root(pg, pg_db, firn_bin, duck, tmp_path):
    """With publish_via_partition_root the attached rows are missing all the same."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        make_source(conn, via_root=True)
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["p", "o"], interval_s=0.2)
        fe.sync()
        # A partition created as one is fine ...
        conn.execute("CREATE TABLE p_b PARTITION OF p FOR VALUES IN ('b'); "
                     "INSERT INTO p VALUES (10, 'b', 'new')")
        fe.sync()
        compare_table(fe, conn, duck, "p")
        # ... one attached with rows is not.
        conn.execute("CREATE TABLE p_e (id int NOT NULL, region text NOT NULL, v text); "
                     "INSERT INTO p_e VALUES (60, 'e', 'held before'); "
                     "ALTER TABLE p ATTACH PARTITION p_e FOR VALUES IN ('e'); "
                     "INSERT INTO p VALUES (61, 'e', 'after')")
        run = fe.sync(check=False)
        assert run.returncode == 3, run.stderr[-3000:]
        assert 'partition "public"."p_e" was attached to table "public"."p"' in run.stderr
        fe.catalog().drop_table(f"{NS}.p")
        fe.sync()
        compare_table(fe, conn, duck, "p")


def test_truncate_of_some_partitions_stops_that_stream(pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        make_source(conn)
        conn.execute("CREATE TABLE p_b PARTITION OF p FOR VALUES IN ('b'); "
                     "INSERT INTO p VALUES (10, 'b', 'b'), (11, 'b', 'b')")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["p", "o"], interval_s=0.2)
        fe.sync()
        with reaped(streaming(fe, conn)) as proc:
            conn.execute("INSERT INTO p VALUES (6, 'a', 'before')")
            held = current_lsn(conn)
            with conn.transaction():
                conn.execute("INSERT INTO p VALUES (12, 'b', 'in the txn')")
                conn.execute("TRUNCATE p_b")
            conn.execute("INSERT INTO p VALUES (7, 'a', 'after')")
            conn.execute("INSERT INTO o VALUES (2, 'o2')")
            wait_for(lambda: iceberg_ids(fe, "o") == [1, 2], 60, what="table o to go on")
            wait_for(lambda: stream_stats(fe, "e2e.p").get("stopped_at_schema_change"), 30,
                     what="stats to show the stop")
            rc = stop_process(proc)
        log = log_of(fe)
        assert rc == 3, log[-3000:]
        assert ('some partitions of table "public"."p" were truncated while partition '
                '"public"."p_a" was not') in log, log[-3000:]
        assert 'drop table "e2e.p" and run firn sync to copy it again' in log
        # Nothing of p_a was lost from Iceberg; the table stopped before the TRUNCATE.
        assert iceberg_ids(fe, "p") == [1, 2, 3, 4, 5, 6, 10, 11, 12]
        assert confirmed_lsn(conn) <= held
        run = fe.sync(check=False)
        assert run.returncode == 3 and "were truncated while partition" in run.stderr, run.stderr
        fe.catalog().drop_table(f"{NS}.p")
        fe.sync()
        compare_table(fe, conn, duck, "p")
        compare_table(fe, conn, duck, "o")


def test_detached_partition_takes_no_more_changes(pg, pg_db, firn_bin, duck, tmp_path):
    """A partition detached while streaming (the publication also names it, so its later changes
    still arrive): they are not written to the root's table, with a warning; the rows it held
    stay there (the warning says so and how to remove them). One detached between runs is
    named at the start of the next run."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        make_source(conn, extra_pub=", p_a")
        conn.execute("CREATE TABLE p_b PARTITION OF p FOR VALUES IN ('b'); "
                     "INSERT INTO p VALUES (10, 'b', 'b')")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["p", "o"], interval_s=0.2)
        fe.sync()
        with reaped(streaming(fe, conn)) as proc:
            conn.execute("UPDATE p SET v = 'seen' WHERE id = 1")
            wait_for(lambda: ("seen",) in [(r["v"],) for r in fe.catalog().load_table(
                f"{NS}.p").scan(selected_fields=("v",)).to_arrow().to_pylist()], 60,
                what="the update before the detach")
            conn.execute("ALTER TABLE p DETACH PARTITION p_a")
            conn.execute("INSERT INTO p_a VALUES (8, 'a', 'after detach')")
            conn.execute("INSERT INTO p VALUES (11, 'b', 'still p')")
            conn.execute("INSERT INTO o VALUES (2, 'o2')")
            wait_for(lambda: iceberg_ids(fe, "o") == [1, 2], 60, what="table o's change")
            wait_for(lambda: 11 in iceberg_ids(fe, "p"), 30, what="p's change")
            assert stop_process(proc) == 0, log_of(fe)[-3000:]
        log = log_of(fe)
        assert ('partition \\"public\\".\\"p_a\\" is no longer a partition of table '
                '\\"public\\".\\"p\\" (detached or dropped)') in log, log[-3000:]
        # The detached rows stay, the row inserted after the detach is not there.
        assert iceberg_ids(fe, "p") == [1, 2, 3, 4, 5, 10, 11]
        conn.execute("INSERT INTO p VALUES (12, 'b', 'next run')")
        fe.sync()
        assert iceberg_ids(fe, "p") == [1, 2, 3, 4, 5, 10, 11, 12]
        # Detached between runs: no change tells, the start of the next run does.
        oid = conn.execute("SELECT 'p_b'::regclass::oid").fetchone()[0]
        conn.execute("CREATE TABLE p_c PARTITION OF p FOR VALUES IN ('c'); "
                     "INSERT INTO p VALUES (13, 'c', 'c'); "
                     "ALTER TABLE p DETACH PARTITION p_b")
        run = fe.sync()
        assert (f'the partition of oid {oid}, a leaf of table \\"public\\".\\"p\\" at the last '
                'start, is no longer one (detached or dropped since)') in run.stderr, run.stderr
        assert iceberg_ids(fe, "p") == [1, 2, 3, 4, 5, 10, 11, 12, 13]
        run = fe.sync()  # said once
        assert "is no longer one" not in run.stderr, run.stderr
        # Its remedy: a copy has the source's rows.
        fe.catalog().drop_table(f"{NS}.p")
        fe.sync()
        compare_table(fe, conn, duck, "p")


def test_partitions_created_while_streaming_after_kills(pg, pg_db, firn_bin, duck, tmp_path):
    """firn --follow killed (SIGKILL at its crash points: inside a transaction, after the upload,
    after the catalog commit, before the acknowledgement) while partitions are created and
    filled, restarted each time: no row of a new partition is lost or doubled."""
    points = ["mid-txn", "after-upload", "after-commit", "before-ack", "after-upload",
              "before-ack"]
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        make_source(conn)
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["p", "o"], interval_s=0.2)
        fe.sync()
        for i, point in enumerate(points):
            with reaped(fe.start_follow(env={"FIRN_TEST_CRASH": f"{point}:1"})) as proc:
                wait_for(lambda: slot_active(conn), 60, what="the slot to be in use")
                with conn.transaction():
                    conn.execute(f"CREATE TABLE p_{i} PARTITION OF p FOR VALUES IN ('r{i}')")
                    conn.execute(f"INSERT INTO p SELECT g, 'r{i}', 'v' || g FROM "
                                 f"generate_series({100 * i + 100}, {100 * i + 120}) g")
                conn.execute(f"UPDATE p SET v = 'u{i}' WHERE id = {100 * i + 101}")
                if i:
                    conn.execute(f"DELETE FROM p WHERE id = {100 * i + 2}")
                    conn.execute(f"UPDATE p SET v = 'again' WHERE region = 'r{i - 1}'")
                conn.execute(f"INSERT INTO o VALUES ({10 + i}, 'o')")
                wait_for(lambda: proc.poll() is not None, 60, what=f"firn to die at {point}")
                assert proc.returncode == -9, log_of(fe)[-3000:]
            wait_for(lambda: not slot_active(conn), 30, what="the slot to be free")
        fe.sync()
        compare_table(fe, conn, duck, "p")
        compare_table(fe, conn, duck, "o")


def test_relations_no_stream_takes_are_named(pg, pg_db, firn_bin, duck, tmp_path):
    """A table the publication carries that no stream takes, and a partition created, filled
    and dropped between runs (its rows left the table with it): skipped, each with a line."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE x (id int PRIMARY KEY)")
        make_source(conn, extra_pub=", x")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["p", "o"], interval_s=0.2)
        fe.sync()
        conn.execute("INSERT INTO x VALUES (1)")
        conn.execute("CREATE TABLE p_z PARTITION OF p FOR VALUES IN ('z'); "
                     "INSERT INTO p VALUES (90, 'z', 'short-lived')")
        oid = conn.execute("SELECT 'p_z'::regclass::oid").fetchone()[0]
        conn.execute("DROP TABLE p_z")
        conn.execute("INSERT INTO p VALUES (7, 'a', 'after')")
        run = fe.sync()
        assert ('changes of table \\"public\\".\\"x\\" are skipped: publication \\"firn_e2e\\" '
                'carries it but no stream takes it') in run.stderr, run.stderr
        assert (f'changes of relation \\"public\\".\\"p_z\\" (oid {oid}), which no longer exists, '
                'are skipped') in run.stderr, run.stderr
        compare_table(fe, conn, duck, "p")
