# SPDX-License-Identifier: Apache-2.0
"""Soft deletes of upsert tables (issue 7, streams option `soft_delete`): a deleted row stays in
the Iceberg table as a tombstone row with _firn_op = 'd' instead of being removed. Under REPLICA
IDENTITY FULL the tombstone holds the row's last image (the old row the WAL carries); under
REPLICA IDENTITY DEFAULT it holds the key with nulls in every other column (the WAL carries only
the key). A key inserted again replaces its tombstone. Checked value by value with pyiceberg and
DuckDB against PostgreSQL: live rows against the source table, tombstones against a copy of the
rows taken in the deleting transaction (FULL) or against the deleted keys (DEFAULT)."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from firnutil import (META_COLUMNS, FirnEnv, arrow_rows, diff_rows, pyiceberg_view, source_rows)

SCHEMA = """
CREATE TABLE f (id int PRIMARY KEY, name text NOT NULL, amount numeric(10,2), tags text[],
                at timestamptz);
ALTER TABLE f REPLICA IDENTITY FULL;
CREATE TABLE gone_f (LIKE f);
CREATE TABLE k (id int PRIMARY KEY, name text NOT NULL, amount numeric(10,2), tags text[],
                at timestamptz);
CREATE TABLE gone_k (id int PRIMARY KEY);
INSERT INTO f SELECT g, 'name ' || g, g * 1.25, ARRAY['t' || g, 'u'],
                     '2024-01-01 00:00:00+00'::timestamptz + g * interval '1 hour'
              FROM generate_series(1, 20) g;
INSERT INTO k SELECT * FROM f;
"""


def delete_rows(conn, table: str, where: str) -> None:
    """Deletes rows, first recording what the tombstones must hold (one transaction)."""
    with conn.transaction():
        if table == "f":
            conn.execute(f"DELETE FROM gone_f WHERE id IN (SELECT id FROM f WHERE {where})")
            conn.execute(f"INSERT INTO gone_f SELECT * FROM f WHERE {where}")
        else:
            conn.execute(f"INSERT INTO gone_k SELECT id FROM k WHERE {where} "
                         "ON CONFLICT DO NOTHING")
        conn.execute(f"DELETE FROM {table} WHERE {where}")


def changes(conn, table: str, round_: int) -> None:
    base = 100 * round_
    delete_rows(conn, table, f"id BETWEEN {round_ * 5 - 4} AND {round_ * 5 - 2}")
    # updated, then deleted in the same transaction: the tombstone is the updated row
    with conn.transaction():
        conn.execute(f"UPDATE {table} SET name = 'changed', amount = NULL "
                     f"WHERE id = {round_ * 5 - 1}")
        if table == "f":
            conn.execute(f"INSERT INTO gone_f SELECT * FROM f WHERE id = {round_ * 5 - 1}")
        else:
            conn.execute(f"INSERT INTO gone_k VALUES ({round_ * 5 - 1})")
        conn.execute(f"DELETE FROM {table} WHERE id = {round_ * 5 - 1}")
    # inserted and deleted in later transactions of the same run
    conn.execute(f"INSERT INTO {table} VALUES ({base + 1}, 'short-lived', 1.5, '{{a}}', now())")
    delete_rows(conn, table, f"id = {base + 1}")
    # a key change: the old key's tombstone
    with conn.transaction():
        if table == "f":
            conn.execute(f"INSERT INTO gone_f SELECT * FROM f WHERE id = {round_ * 5}")
        else:
            conn.execute(f"INSERT INTO gone_k VALUES ({round_ * 5})")
        conn.execute(f"UPDATE {table} SET id = {base + 50} WHERE id = {round_ * 5}")
    conn.execute(f"UPDATE {table} SET tags = NULL WHERE id = 20")


def reinsert(conn, table: str, key: int) -> None:
    """A deleted key comes back: its tombstone is replaced by the live row."""
    with conn.transaction():
        conn.execute(f"INSERT INTO {table} VALUES ({key}, 'back', 9.99, '{{x,y}}', now())")
        conn.execute(f"DELETE FROM gone_{table} WHERE id = {key}")


def check(fe: FirnEnv, conn, duck, table: str, equality: bool = False) -> None:
    ice = fe.catalog().load_table(f"e2e.{table}")
    schema = ice.schema()
    names = [f.name for f in schema.fields if f.name not in META_COLUMNS]
    live = sorted(source_rows(conn, table, schema, names), key=repr)
    if table == "f":
        tomb = sorted(source_rows(conn, "gone_f", schema, names), key=repr)
    else:
        keys = [r[0] for r in conn.execute("SELECT id FROM gone_k").fetchall()]
        tomb = sorted([(k,) + (None,) * (len(names) - 1) for k in keys], key=repr)
    assert tomb, "the test deletes rows"
    readers = [("duckdb", fe.duckdb_arrow(duck, table))]
    if not equality:  # pyiceberg refuses equality deletes
        readers.append(("pyiceberg", ice.scan().to_arrow()))
    for reader, arrow in readers:
        is_tomb = pc.equal(arrow.column("_firn_op"), "d")
        dead = arrow.filter(is_tomb)
        alive = arrow.filter(pc.invert(is_tomb))
        assert set(alive.column("_firn_op").to_pylist()) <= {"r", "c", "u"}
        assert None not in dead.column("_firn_commit_ts").to_pylist()
        for what, want, got in (("live rows", live, alive), ("tombstones", tomb, dead)):
            if reader == "pyiceberg":
                want = pyiceberg_view(want, schema, names)
            actual = sorted(arrow_rows(got, names), key=repr)
            diff = diff_rows(want, actual, key=0, names=names)
            assert not diff, f"{reader}: {what} of {table} differ from the source:\n{diff}"


@pytest.mark.parametrize("delete_mode", ["position", "deletion_vector", "equality"])
def test_soft_delete_keeps_tombstones(pg, pg_db, firn_bin, duck, tmp_path, delete_mode):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute(SCHEMA)
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.write_source(pg)
        fe.write_destination(1, delete_mode=delete_mode)
        fe.write_streams([("f", {"soft_delete": True}), ("k", {"soft_delete": True})])
        fe.sync()
        # non-key columns of a soft-delete table are optional (a tombstone may hold only the key)
        ice = fe.catalog().load_table("e2e.k")
        assert [f.name for f in ice.schema().fields if f.required] == ["id"]
        for t in ("f", "k"):
            changes(conn, t, 1)
        fe.sync()
        for t in ("f", "k"):
            check(fe, conn, duck, t, delete_mode == "equality")
        # a second run rebuilds (or loads) the key index: tombstones are keys it knows
        for t in ("f", "k"):
            changes(conn, t, 2)
            reinsert(conn, t, 1)
            reinsert(conn, t, 101)
        fe.sync()
        for t in ("f", "k"):
            check(fe, conn, duck, t, delete_mode == "equality")
        # the key of a tombstone is still unique in the table
        ids = fe.duckdb_arrow(duck, "k").column("id").to_pylist()
        assert len(ids) == len(set(ids))
