"""Stream options `columns`, `selected_columns` {`columns`, `sync_new_columns`} and `filter`
(docs/configuration.md "Columns and filter"), end to end against a real PostgreSQL: the Iceberg
schema holds only the selected columns (and the key, added automatically), backfill and CDC
values equal the source on them (pyiceberg and DuckDB), including an UPDATE of only an
unselected column, an unselected TOASTed column left unchanged by an UPDATE, and a key change;
`sync_new_columns` false leaves a column added while streaming out (rows still flow), true
takes it; `filter` restricts the copy of full_refresh and full_refresh_cdc streams but not the
changes streamed afterwards; `firn check` reports a bad filter and an unknown column."""
from __future__ import annotations

import json

from firnutil import META_COLUMNS, FirnEnv, stop_process, wait_for

NS = "e2e"


def ice_columns(fe: FirnEnv, table: str) -> list[str]:
    schema = fe.catalog().load_table(f"{NS}.{table}").schema()
    return [f.name for f in schema.fields if f.name not in META_COLUMNS]


def ice_rows(fe: FirnEnv, duck, table: str, names: list[str]) -> list[tuple]:
    """The table's rows on names, read by pyiceberg and DuckDB (which must agree)."""
    arrow = fe.catalog().load_table(f"{NS}.{table}").scan().to_arrow()
    py = sorted(zip(*(arrow.column(n).to_pylist() for n in names)))
    dk = fe.duckdb_arrow(duck, table)
    dd = sorted(zip(*(dk.column(n).to_pylist() for n in names)))
    assert py == dd, f"pyiceberg and duckdb disagree on {table}"
    return py


def src_rows(conn, table: str, names: list[str], where: str = "true") -> list[tuple]:
    cols = ", ".join(f'"{n}"' for n in names)
    return sorted(tuple(r) for r in conn.execute(f"SELECT {cols} FROM {table} WHERE {where}"))


def test_columns_subset_backfill_and_cdc(pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE c (id int PRIMARY KEY, a text, b int, secret text, big text);"
                     "ALTER TABLE c ALTER COLUMN big SET STORAGE EXTERNAL;"  # always TOASTed
                     "INSERT INTO c SELECT g, 'a' || g, g * 10, 's' || g, "
                     "(SELECT string_agg(md5(g::text || x::text), '') "
                     "FROM generate_series(1, 300) x) FROM generate_series(1, 20) g;"
                     "CREATE TABLE d (id int PRIMARY KEY, v text, hidden text);"
                     "ALTER TABLE d REPLICA IDENTITY FULL;"  # old rows hold hidden too
                     "INSERT INTO d SELECT g, 'v' || g, 'h' || g FROM generate_series(1, 5) g;"
                     "CREATE TABLE pt (id int PRIMARY KEY, v text, region text, z text);"
                     "INSERT INTO pt SELECT g, 'v' || g, 'r' || g % 2, 'z' FROM "
                     "generate_series(1, 6) g")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, [])
        fe.write_streams([("c", {"columns": ["a", "b"]}),
                          ("d", {"selected_columns": {"columns": ["id", "v"],
                                                      "sync_new_columns": False}}),
                          ("pt", {"columns": ["v"], "partition": ["region"]})])
        out = fe.sync()
        assert 'column \\"id\\" is not selected but is the primary key' in out.stderr
        assert ice_columns(fe, "c") == ["id", "a", "b"]
        assert ice_columns(fe, "d") == ["id", "v"]
        assert ice_rows(fe, duck, "c", ["id", "a", "b"]) == src_rows(conn, "c", ["id", "a", "b"])
        assert 'column \\"region\\" is not selected but is the partition column' in out.stderr
        assert ice_columns(fe, "pt") == ["id", "v", "region"]
        names = ["id", "v", "region"]
        assert ice_rows(fe, duck, "pt", names) == src_rows(conn, "pt", names)
        conn.execute("UPDATE c SET secret = 'changed' WHERE id = 1")  # only an unselected column
        conn.execute("UPDATE c SET a = 'toast kept' WHERE id = 2")    # big stays TOASTed
        conn.execute("UPDATE c SET big = 'small', b = -3 WHERE id = 3")
        conn.execute("UPDATE c SET id = 100 WHERE id = 4")            # old key image
        conn.execute("DELETE FROM c WHERE id = 5")
        conn.execute("INSERT INTO c VALUES (21, 'new', 210, 'x', repeat('y', 5000))")
        conn.execute("UPDATE d SET hidden = 'hh', v = 'v1b' WHERE id = 1")
        conn.execute("ALTER TABLE d ADD COLUMN w int")
        conn.execute("INSERT INTO d VALUES (6, 'v6', 'h6', 66)")
        conn.execute("DELETE FROM d WHERE id = 2")
        conn.execute("UPDATE d SET id = 20 WHERE id = 3")
        conn.execute("UPDATE pt SET z = 'zz', v = 'moved', region = 'r9' WHERE id = 1")
        fe.sync()
        assert ice_columns(fe, "c") == ["id", "a", "b"]
        assert ice_rows(fe, duck, "c", ["id", "a", "b"]) == src_rows(conn, "c", ["id", "a", "b"])
        assert ice_columns(fe, "d") == ["id", "v"]
        assert ice_rows(fe, duck, "d", ["id", "v"]) == src_rows(conn, "d", ["id", "v"])
        assert ice_rows(fe, duck, "pt", names) == src_rows(conn, "pt", names)


def test_sync_new_columns_while_streaming(pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE e (id int PRIMARY KEY, v text);"
                     "CREATE TABLE f (id int PRIMARY KEY, v text, x text);"
                     "INSERT INTO e VALUES (1, 'e1'); INSERT INTO f VALUES (1, 'f1', 'x1')")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, [], interval_s=0.2)
        fe.write_streams([("e", {"sync_new_columns": False}),
                          ("f", {"columns": ["id", "v"], "sync_new_columns": True})])
        fe.sync()
        proc = fe.start_follow()
        wait_for(lambda: b"replication connection open" in (fe.root / "follow.log").read_bytes(),
                 60, what="firn to stream")
        # A DEFAULT would stop a full_refresh_cdc stream taking the column (docs/cdc.md): left
        # out, it changes nothing.
        conn.execute("ALTER TABLE e ADD COLUMN w int DEFAULT 7")
        conn.execute("INSERT INTO e VALUES (2, 'e2', 22)")
        conn.execute("ALTER TABLE f ADD COLUMN w int")
        conn.execute("INSERT INTO f VALUES (2, 'f2', 'x2', 22)")
        conn.execute("UPDATE f SET w = 11, x = 'x1b' WHERE id = 1")
        conn.execute("INSERT INTO e VALUES (3, 'e3', 33)")

        def done():
            return (len(ice_rows(fe, duck, "e", ["id"])) == 3 and "w" in ice_columns(fe, "f")
                    and (1, 11) in ice_rows(fe, duck, "f", ["id", "w"]))
        wait_for(done, 60, interval=0.5, what="the changes after ADD COLUMN")
        assert stop_process(proc) == 0, (fe.root / "follow.log").read_text()[-3000:]
        log = (fe.root / "follow.log").read_text()
        assert "sync_new_columns is false" in log, log[-3000:]
        assert ice_columns(fe, "e") == ["id", "v"]
        assert ice_rows(fe, duck, "e", ["id", "v"]) == src_rows(conn, "e", ["id", "v"])
        assert ice_columns(fe, "f") == ["id", "v", "w"]
        assert ice_rows(fe, duck, "f", ["id", "v", "w"]) == src_rows(conn, "f", ["id", "v", "w"])
        # The next run keeps both choices: e without w, f with w (x stays out).
        conn.execute("UPDATE e SET w = 5, v = 'e1b' WHERE id = 1")
        conn.execute("UPDATE f SET w = 5, v = 'f1c' WHERE id = 1")
        fe.sync()
        assert ice_columns(fe, "e") == ["id", "v"]
        assert ice_rows(fe, duck, "e", ["id", "v"]) == src_rows(conn, "e", ["id", "v"])
        assert ice_columns(fe, "f") == ["id", "v", "w"]
        assert ice_rows(fe, duck, "f", ["id", "v", "w"]) == src_rows(conn, "f", ["id", "v", "w"])


def test_filter_on_backfill_not_cdc(pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE g (id int PRIMARY KEY, v text);"
                     "INSERT INTO g SELECT n, 'g' || n FROM generate_series(1, 30) n;"
                     "CREATE TABLE h (id int PRIMARY KEY, v text, keep bool);"
                     "INSERT INTO h SELECT n, 'h' || n, n % 3 = 0 FROM generate_series(1, 30) n;"
                     "CREATE TABLE i (id int PRIMARY KEY, u int, v text, junk text);"
                     "INSERT INTO i SELECT n, n, CASE WHEN n % 4 = 0 THEN 'skip' ELSE 'i' END, "
                     "'j' FROM generate_series(1, 20) n")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, [])
        fe.write_streams([("g", {"sync_mode": "full_refresh", "filter": "id % 2 = 0 OR id = 7"}),
                          ("h", {"filter": "keep"}),
                          ("i", {"sync_mode": "incremental", "cursor_field": "u",
                                 "columns": ["v"], "filter": "v <> 'skip' OR u IS NULL"})])
        out = fe.sync()
        assert 'column \\"u\\" is not selected but is the cursor_field' in out.stderr
        assert ice_columns(fe, "i") == ["id", "u", "v"]
        assert ice_rows(fe, duck, "i", ["id", "u", "v"]) == src_rows(conn, "i", ["id", "u", "v"],
                                                                      "v <> 'skip'")
        conn.execute("INSERT INTO i VALUES (21, 21, 'skip', 'j'), (22, 22, 'late', 'j')")
        assert ice_rows(fe, duck, "g", ["id", "v"]) == src_rows(conn, "g", ["id", "v"],
                                                                 "id % 2 = 0 OR id = 7")
        assert ice_rows(fe, duck, "h", ["id", "v"]) == src_rows(conn, "h", ["id", "v"], "keep")
        # Changes are not filtered: an update of a row the copy left out brings it (upsert).
        conn.execute("UPDATE h SET v = 'upd' WHERE id = 1")
        conn.execute("INSERT INTO h VALUES (31, 'h31', false)")
        conn.execute("DELETE FROM h WHERE id = 3")
        conn.execute("DELETE FROM g WHERE id = 2")
        fe.sync()
        want = src_rows(conn, "h", ["id", "v"], "keep OR id IN (1, 31)")
        assert ice_rows(fe, duck, "h", ["id", "v"]) == want
        assert ice_rows(fe, duck, "g", ["id", "v"]) == src_rows(conn, "g", ["id", "v"],
                                                                 "id % 2 = 0 OR id = 7")
        assert ice_rows(fe, duck, "i", ["id", "u", "v"]) == src_rows(conn, "i", ["id", "u", "v"],
                                                                      "v <> 'skip'")


def test_check_reports_bad_filter_and_unknown_column(pg, pg_db, firn_bin, tmp_path):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE k (id int PRIMARY KEY, \"Mixed\" text)")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.setup(pg, [])
    check = ["check", "--source", str(fe.source), "--streams", str(fe.streams)]
    fe.write_streams([("k", {"filter": "nosuch > 1"})])
    out = fe.run(*check)
    assert out.returncode == 2, out.stderr[-2000:]
    assert 'stream "public.k": filter is not valid: column "nosuch" does not exist' in out.stderr
    fe.write_streams([("k", {"columns": ["mixed"]})])
    for args in (check, ["sync", *fe.sync_args]):
        out = fe.run(*args)
        assert out.returncode == 2, out.stderr[-2000:]
        assert ('stream "public.k": selected column "mixed" does not exist in source table '
                '"public"."k"') in out.stderr, out.stderr[-2000:]
    fe.write_streams([("k", {"columns": ["Mixed"], "filter": "id > 0"})])
    out = fe.run(*check)
    assert out.returncode == 0, out.stderr[-2000:]
    json.loads(fe.streams.read_text())


def test_discover_baseline_and_rediscover(pg, pg_db, firn_bin, duck, tmp_path):
    """With the `streams` half firn discover writes (type_schema), a column added while firn
    was stopped counts as new; a second discover writes the selection so that it stays."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE p (id int PRIMARY KEY, v text, x text);"
                     "CREATE TABLE q (id int PRIMARY KEY, v text);"
                     "INSERT INTO p VALUES (1, 'p1', 'x1'); INSERT INTO q VALUES (1, 'q1')")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, [])
        discover = ["discover", "--source", str(fe.source), "--streams", str(fe.streams)]
        fe.streams.unlink()
        fe.run("discover", "--source", str(fe.source), "--output", str(fe.streams), check=True)
        doc = json.loads(fe.streams.read_text())
        doc["selected_streams"]["public"] = [
            {"stream_name": "p", "selected_columns": {"columns": ["id", "v"],
                                                      "sync_new_columns": True}},
            {"stream_name": "q", "sync_new_columns": False}]
        fe.streams.write_text(json.dumps(doc))
        fe.sync()
        assert ice_columns(fe, "p") == ["id", "v"] and ice_columns(fe, "q") == ["id", "v"]
        conn.execute("ALTER TABLE p ADD COLUMN w int; ALTER TABLE q ADD COLUMN w int;"
                     "INSERT INTO p VALUES (2, 'p2', 'x2', 22); INSERT INTO q VALUES (2, 'q2', 22);"
                     "UPDATE p SET w = 11 WHERE id = 1")
        fe.sync()
        assert ice_columns(fe, "p") == ["id", "v", "w"]
        assert ice_rows(fe, duck, "p", ["id", "v", "w"]) == src_rows(conn, "p", ["id", "v", "w"])
        assert ice_columns(fe, "q") == ["id", "v"]
        assert ice_rows(fe, duck, "q", ["id", "v"]) == src_rows(conn, "q", ["id", "v"])
        fe.run(*discover, check=True)
        sel = {s["stream_name"]: s for s in
               json.loads(fe.streams.read_text())["selected_streams"]["public"]}
        assert sel["p"]["selected_columns"] == {"columns": ["id", "v", "w"],
                                                "sync_new_columns": True}
        assert sel["q"]["columns"] == ["id", "v"]
        conn.execute("UPDATE p SET w = 12, x = 'x1b' WHERE id = 1; UPDATE q SET w = 5")
        fe.sync()
        assert ice_columns(fe, "p") == ["id", "v", "w"]
        assert ice_rows(fe, duck, "p", ["id", "v", "w"]) == src_rows(conn, "p", ["id", "v", "w"])
        assert ice_columns(fe, "q") == ["id", "v"]


def test_selection_changed_between_runs(pg, pg_db, firn_bin, duck, tmp_path):
    """A column added to `columns` joins the schema (older rows null, not copied again); one
    removed stays in the table, null in the rows written afterwards; each with a warning."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, a text, b int);"
                     "INSERT INTO t SELECT g, 'a' || g, g FROM generate_series(1, 3) g")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, [("t", {"columns": ["a"]})])
        fe.sync()
        assert ice_columns(fe, "t") == ["id", "a"]
        conn.execute("UPDATE t SET b = 20 WHERE id = 2")
        fe.write_streams([("t", {"columns": ["a", "b"]})])
        out = fe.sync()
        assert 'column \\"b\\" is new to the table' in out.stderr, out.stderr[-2000:]
        assert ice_columns(fe, "t") == ["id", "a", "b"]
        assert ice_rows(fe, duck, "t", ["id", "a", "b"]) == [
            (1, "a1", None), (2, "a2", 20), (3, "a3", None)]
        conn.execute("UPDATE t SET a = 'x', b = 30 WHERE id = 3")
        # Without the streams half of firn discover (type_schema), a column the table has may
        # have been synced as new: it stays, with a warning, while sync_new_columns is true.
        fe.write_streams([("t", {"columns": ["b"]})])
        out = fe.sync()
        assert 'column \\"a\\" is not in columns but its table has it' in out.stderr
        assert ice_rows(fe, duck, "t", ["id", "a", "b"]) == [
            (1, "a1", None), (2, "a2", 20), (3, "x", 30)]
        conn.execute("UPDATE t SET a = 'y', b = 40 WHERE id = 3")
        fe.write_streams([("t", {"columns": ["b"], "sync_new_columns": False})])
        out = fe.sync()
        assert 'column \\"a\\" is no longer selected' in out.stderr, out.stderr[-2000:]
        assert ice_columns(fe, "t") == ["id", "a", "b"]
        assert ice_rows(fe, duck, "t", ["id", "a", "b"]) == [
            (1, "a1", None), (2, "a2", 20), (3, None, 40)]


def test_selection_narrowed_after_failed_first_copy(pg, pg_db, firn_bin, duck, tmp_path):
    """A first copy stopped before its first commit leaves an empty table with every column:
    a column left out of `columns` before the next run is dropped from that table's schema and
    not copied (the rule for tables with rows does not apply to a table nothing was committed
    to); the copy then equals the source on the selection."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE n (id int PRIMARY KEY, a text, bad text, b int);"
                     "INSERT INTO n SELECT g, 'a' || g, 'x' || g, g FROM generate_series(1, 5) g")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["n"])
        proc = fe.sync(env={"FIRN_TEST_CRASH": "after-upload:1"}, check=False)
        assert "FIRN_TEST_CRASH: killing" in proc.stderr, proc.stderr[-3000:]
        assert ice_columns(fe, "n") == ["id", "a", "bad", "b"]
        assert fe.catalog().load_table(f"{NS}.n").current_snapshot() is None
        fe.write_streams([("n", {"columns": ["a", "b"]})])
        out = fe.sync()
        assert "is not in columns but its table has it" not in out.stderr, out.stderr[-3000:]
        assert 'column \\"bad\\", no longer copied, is dropped' in out.stderr, out.stderr[-3000:]
        assert ice_columns(fe, "n") == ["id", "a", "b"]
        assert ice_rows(fe, duck, "n", ["id", "a", "b"]) == src_rows(conn, "n", ["id", "a", "b"])
        conn.execute("UPDATE n SET a = 'z', bad = 'y' WHERE id = 2; DELETE FROM n WHERE id = 3")
        # Once rows are committed, the documented rule applies: a column selected again joins.
        fe.write_streams([("n", {"columns": ["a", "b", "bad"]})])
        out = fe.sync()
        assert 'column \\"bad\\" is new to the table' in out.stderr, out.stderr[-3000:]
        assert ice_columns(fe, "n") == ["id", "a", "b", "bad"]
        assert ice_rows(fe, duck, "n", ["id", "a", "bad"]) == [
            (1, "a1", None), (2, "z", "y"), (4, "a4", None), (5, "a5", None)]


def crash_in_copy(fe: FirnEnv) -> None:
    """Kills firn right after its second chunk commit of a first copy (partial, resumable)."""
    proc = fe.sync(env={"FIRN_TEST_CRASH": "backfill-chunk:2"}, check=False)
    assert "FIRN_TEST_CRASH: killing" in proc.stderr, proc.stderr[-3000:]


def test_selection_changed_during_unfinished_copy(pg, pg_db, firn_bin, duck, tmp_path):
    """A first copy stopped after committing some chunks is not settled yet: a column left out
    before the next run is dropped from the schema (the resumed copy equals the source on the
    selection), and a column selected since makes the copy start again, so that every row has
    it (not only the chunks copied after the change)."""
    fill = ("INSERT INTO {t} SELECT g, g, 'w' || g, repeat(md5(g::text), 3) "
            "FROM generate_series(1, 6000) g")
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE p (id int8 PRIMARY KEY, v int4, w text, pad text);"
                     "CREATE TABLE q (id int8 PRIMARY KEY, v int4, w text, pad text);"
                     + fill.format(t="p") + ";" + fill.format(t="q"))
        src = {"batch_rows": 500, "chunk_size": "64KiB", "parallelism": 2}
        fe = FirnEnv(firn_bin, tmp_path / "p", pg_db)
        fe.setup(pg, ["p"], interval_s=0.01, source=src)
        crash_in_copy(fe)
        assert 0 < fe.pyiceberg_arrow("p").num_rows < 6000
        conn.execute("UPDATE p SET w = 'changed', v = -v WHERE id % 50 = 0")
        fe.write_streams([("p", {"columns": ["v", "pad"]})])
        out = fe.sync()
        assert ('table \\"e2e.p\\": its first copy is not finished: column \\"w\\", no longer '
                'copied, is dropped from its schema') in out.stderr, out.stderr[-3000:]
        assert "copying it again from the start" not in out.stderr
        assert ice_columns(fe, "p") == ["id", "v", "pad"]
        names = ["id", "v", "pad"]
        assert ice_rows(fe, duck, "p", names) == src_rows(conn, "p", names)

        fe = FirnEnv(firn_bin, tmp_path / "q", pg_db)
        fe.setup(pg, [("q", {"columns": ["v"]})], interval_s=0.01,
                 source=dict(src, slot="firn_q", publication="firn_q"))
        crash_in_copy(fe)
        assert ice_columns(fe, "q") == ["id", "v"]
        assert 0 < fe.pyiceberg_arrow("q").num_rows < 6000
        fe.write_streams([("q", {"columns": ["v", "w"]})])
        out = fe.sync()
        names = ["id", "v", "w"]
        assert ice_columns(fe, "q") == names
        assert ice_rows(fe, duck, "q", names) == src_rows(conn, "q", names)
        assert ('table \\"e2e.q\\": its first copy is not finished and it has a new column: '
                'copying it again from the start') in out.stderr, out.stderr[-3000:]
