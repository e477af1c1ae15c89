# SPDX-License-Identifier: Apache-2.0
"""A source column named like one of firn's metadata columns (`_firn_op`, `_firn_lsn`, ...) used
to take that column's place silently: the table then held the user's text where the change log
and the tombstones keep firn's operation. It is a configuration error naming the table and the
column (exit 2, before any table is created); each of the remedies it names works: leaving the
column out with `columns`, or `"metadata_columns": false`."""

from __future__ import annotations

import sqlite3

import pytest

from firnutil import FirnEnv, arrow_rows


@pytest.fixture
def fe(pg, pg_db, firn_bin, tmp_path) -> FirnEnv:
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, _firn_lsn text, v text)")
        conn.execute("INSERT INTO t VALUES (1, 'mine', 'a'), (2, NULL, 'b')")
    env = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    env.setup(pg, ["t"])
    return env


def tables(fe: FirnEnv) -> list:
    if not fe.catalog_db.exists():
        return []
    con = sqlite3.connect(fe.catalog_db)
    try:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'iceberg_tables'").fetchone():
            return []
        return con.execute("SELECT table_namespace, table_name FROM iceberg_tables").fetchall()
    finally:
        con.close()


def test_colliding_column_is_refused(fe):
    proc = fe.sync("--log", "error", check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        'firn: source table "public"."t" has a column "_firn_lsn", the name of a firn metadata '
        'column; rename it, leave it out with "columns", or set "metadata_columns": false in '
        'the destination (while opening table "e2e.t")']
    assert tables(fe) == [], "a table was created before the error"


def test_remedy_columns(fe, pg):
    fe.write_streams([("t", {"columns": ["id", "v"]})])
    fe.sync("--log", "error")
    tbl = fe.catalog().load_table("e2e.t")
    rows = arrow_rows(tbl.scan().to_arrow(), ["id", "v", "_firn_op"])
    assert sorted(rows) == [(1, "a", "r"), (2, "b", "r")]
    assert tbl.schema().find_field("_firn_lsn").field_type.__class__.__name__ == "LongType"


def test_remedy_no_metadata_columns(fe, pg):
    fe.write_destination(metadata_columns=False)
    fe.sync("--log", "error")
    with pg.connect(dbname=fe.dbname) as conn:
        conn.execute("UPDATE t SET _firn_lsn = 'changed' WHERE id = 2")
    fe.sync("--log", "error")
    tbl = fe.catalog().load_table("e2e.t")
    assert [f.name for f in tbl.schema().fields] == ["id", "_firn_lsn", "v"]
    assert sorted(arrow_rows(tbl.scan().to_arrow(), ["id", "_firn_lsn", "v"])) == [
        (1, "mine", "a"), (2, "changed", "b")]
