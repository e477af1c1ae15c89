# SPDX-License-Identifier: Apache-2.0
"""Names firn takes from the source or the streams file are data, never paths or SQL: a table
named like a path (`../../../../tmp/pgevil`) or a `target_table` of the same kind is written
inside the warehouse (its folder name escapes '/', '\\', '%', '~' as ~XX, docs/configuration.md
"Table locations"), a schema with a dot in its name syncs, an empty warehouse is refused; the
remedies `firn check` prints quote identifiers as PostgreSQL does and check the replica identity
before the publication's coverage."""

from __future__ import annotations

import json
import os
from pathlib import Path

from firnutil import FirnEnv


def qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def all_files(root: Path) -> set[str]:
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}


def test_path_like_names_stay_in_the_warehouse(pg, pg_db, firn_bin, tmp_path):
    evil_src = "../../../../tmp/pgevil"
    evil_target = "../../../tmp/evil"
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(f'CREATE TABLE {qi(evil_src)} (id int PRIMARY KEY, v text)')
        conn.execute(f"INSERT INTO {qi(evil_src)} VALUES (1, 'one'), (2, 'two')")
        conn.execute("CREATE TABLE plain (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO plain VALUES (7, 'seven')")
        conn.execute('CREATE SCHEMA "my.sch"')
        conn.execute('CREATE TABLE "my.sch".plain (id int PRIMARY KEY, v text)')
        conn.execute("""INSERT INTO "my.sch".plain VALUES (3, 'three')""")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.write_source(pg, slot=f"firn_{pg_db}", publication=f"firn_{pg_db}")
    fe.write_destination(namespace="{schema}")
    fe.streams.write_text(json.dumps({"selected_streams": {
        "public": [{"stream_name": evil_src},
                   {"stream_name": "plain", "target_table": evil_target}],
        "my.sch": [{"stream_name": "plain"}]}}))
    before = all_files(tmp_path.parent)
    fe.sync()
    created = all_files(tmp_path.parent) - before
    outside = sorted(p for p in created if not p.startswith(str(tmp_path) + "/"))
    assert outside == []
    ns_dir = fe.warehouse / "public"
    for name in (evil_src, evil_target):
        assert not os.path.exists(os.path.normpath(ns_dir / name)), name
    assert sorted(os.listdir(ns_dir)) == ["..~2F..~2F..~2F..~2Ftmp~2Fpgevil",
                                          "..~2F..~2F..~2Ftmp~2Fevil"]
    data = [p for p in created if p.endswith(".parquet")]
    assert data and all(p.startswith(str(fe.warehouse) + "/") for p in data), data
    cat = fe.catalog()
    rows = lambda ns, t: sorted(cat.load_table(tuple(ns.split(".")) + (t,)).scan(  # noqa: E731
        selected_fields=("id", "v")).to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows("public", evil_src) == [{"id": 1, "v": "one"}, {"id": 2, "v": "two"}]
    assert rows("public", evil_target) == [{"id": 7, "v": "seven"}]
    assert rows("my.sch", "plain") == [{"id": 3, "v": "three"}]
    assert cat.load_table(("public", evil_src)).location() == \
        f"file://{ns_dir}/..~2F..~2F..~2F..~2Ftmp~2Fpgevil"


def test_empty_warehouse_is_an_error(pg, pg_db, firn_bin, tmp_path):
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.setup(pg, ["t"])
    for wh in ("", "file://"):
        doc = json.loads(fe.destination.read_text())
        doc["catalog"]["warehouse"] = wh
        fe.destination.write_text(json.dumps(doc))
        proc = fe.run("check", "--destination", str(fe.destination), "--log", "error")
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == f'firn: {fe.destination}: "catalog.warehouse" must not be empty\n'


def check_line(fe: FirnEnv) -> str:
    proc = fe.run("check", "--source", str(fe.source), "--streams", str(fe.streams),
                  "--log", "error")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 3 and len(lines) == 1, proc.stderr
    return lines[0]


def test_remedies_quote_names_and_run_as_printed(pg, pg_db, firn_bin, tmp_path):
    """A table whose name holds quotes: the ALTER PUBLICATION check prints adds exactly that
    table when run as printed (and nothing else happens); every missing table is named in one
    line."""
    evil = 'a"; DROP TABLE victim; --'
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE victim (id int PRIMARY KEY)")
        conn.execute(f"CREATE TABLE {qi(evil)} (id int PRIMARY KEY)")
        conn.execute('CREATE TABLE "b""q" (id int PRIMARY KEY)')
        conn.execute("CREATE PUBLICATION \"it's\" FOR TABLE victim")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.write_source(pg, slot=f"firn_{pg_db}", publication="it's", create_publication=False)
    fe.write_destination()
    fe.write_streams([evil, 'b"q'])
    line = check_line(fe)
    stmt = ('ALTER PUBLICATION "it\'s" ADD TABLE "public"."a""; DROP TABLE victim; --", '
            '"public"."b""q"')
    assert line == ('firn: publication "it\'s" does not cover 2 tables: '
                    f'"public.{evil}", "public.b"q"; run {stmt}'), line
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(line.split("; run ", 1)[1])
        got = conn.execute("SELECT tablename FROM pg_publication_tables WHERE pubname = 'it''s' "
                           "ORDER BY 1").fetchall()
    assert [r[0] for r in got] == [evil, 'b"q', "victim"]
    proc = fe.run("check", "--source", str(fe.source), "--streams", str(fe.streams))
    assert proc.returncode == 0, proc.stderr


def test_replica_identity_before_coverage(pg, pg_db, firn_bin, tmp_path):
    """A keyless table with REPLICA IDENTITY DEFAULT outside the publication: adding it first
    would break the application's UPDATEs, so check names the replica identity first."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE keyed (id int PRIMARY KEY)")
        conn.execute('CREATE TABLE "no""pk" (v text)')
        conn.execute("CREATE PUBLICATION pub FOR TABLE keyed")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.write_source(pg, slot=f"firn_{pg_db}", publication="pub", create_publication=False)
    fe.write_destination()
    fe.write_streams(["keyed", ('no"pk', {"append_mode": True})])
    line = check_line(fe)
    assert line == ('firn: table "public.no"pk" has no primary key, so its updates and deletes '
                    'cannot be replicated; add a primary key or run ALTER TABLE "public"."no""pk" '
                    'REPLICA IDENTITY FULL before adding it to the publication'), line
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(line.split(" or run ", 1)[1].split(" before ")[0])
    line = check_line(fe)
    assert line == ('firn: publication "pub" does not cover table "public.no"pk"; run ALTER '
                    'PUBLICATION "pub" ADD TABLE "public"."no""pk"'), line


def test_created_publication_with_quotes_in_its_name(pg, pg_db, firn_bin, tmp_path):
    pub = 'p"ub\'s'
    with pg.connect(dbname=pg_db) as conn:
        conn.execute('CREATE TABLE "t""1" (id int PRIMARY KEY, v text)')
        conn.execute("""INSERT INTO "t""1" VALUES (1, 'x')""")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.write_source(pg, slot=f"firn_{pg_db}", publication=pub, create_publication=True)
    fe.write_destination()
    fe.write_streams(['t"1'])
    fe.sync()
    with pg.connect(dbname=pg_db) as conn:
        got = conn.execute("SELECT pubname, tablename FROM pg_publication_tables").fetchall()
    assert got == [(pub, 't"1')]
    assert fe.catalog().load_table(("e2e", 't"1')).scan().to_arrow().column("v").to_pylist() \
        == ["x"]


def test_star_and_question_mark_are_characters_of_a_name(pg, pg_db, firn_bin, tmp_path):
    """A stream names one table exactly: a table named "*" (or "a?c") is that table, never a
    pattern over its schema (which would also read tables the streams file does not select,
    here one firn cannot copy)."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute('CREATE TABLE "*" (id int PRIMARY KEY, v text); '
                     """INSERT INTO "*" VALUES (1, 'star'), (2, 'two'); """
                     'CREATE TABLE "a?c" (id int PRIMARY KEY, v text); '
                     """INSERT INTO "a?c" VALUES (5, 'q'); """
                     "CREATE TABLE abc (id int PRIMARY KEY, v text); "
                     "INSERT INTO abc VALUES (6, 'not selected'); "
                     "CREATE TABLE nocols ()")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.setup(pg, [("*", {"target_table": "star"}), ("a?c", {"target_table": "q"})])
    proc = fe.run("check", "--source", str(fe.source), "--destination", str(fe.destination),
                  "--streams", str(fe.streams), timeout=60)
    assert proc.returncode == 0, proc.stderr
    fe.sync()
    cat = fe.catalog()
    assert sorted(t[-1] for t in cat.list_tables("e2e")) == ["q", "star"]
    rows = lambda t: sorted((r["id"], r["v"]) for r in cat.load_table(  # noqa: E731
        ("e2e", t)).scan(selected_fields=("id", "v")).to_arrow().to_pylist())
    assert rows("star") == [(1, "star"), (2, "two")]
    assert rows("q") == [(5, "q")]
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("""INSERT INTO "*" VALUES (3, 'three'); INSERT INTO abc VALUES (7, 'x')""")
    fe.sync()
    assert rows("star") == [(1, "star"), (2, "two"), (3, "three")]
    # A stream of a table named "*" that does not exist is a missing table, not an empty glob.
    fe.write_streams([("*", {"target_table": "star"}), ("x*", {})])
    proc = fe.sync(check=False)
    assert proc.returncode == 2, proc.stderr
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("firn: ")] == [
        'firn: source table "public.x*" of a selected stream does not exist and firn never '
        'synced it; fix the namespace or stream_name in the streams file (firn discover lists '
        'the tables) or remove the stream'], proc.stderr
