# SPDX-License-Identifier: Apache-2.0
"""Keyless tables with REPLICA IDENTITY FULL holding identical rows (issue 24 item 3): the table is
a multiset, and an UPDATE or DELETE must remove exactly one copy of its old image, never every
copy (what an equality delete on every column does) and never none (what append mode did). firn
keys each copy by the whole row plus an occurrence number in its key index and deletes by
position, in every delete mode (eng_multiset.c).

Each run's changes are checked with pyiceberg and DuckDB against the source, as multisets of
rows (sorted lists with their duplicates), after duplicate inserts, deletes of one copy, two
updates of two identical rows in one transaction, a row updated away and back in one flush, a
no-op update, kills after the catalog commit and before the acknowledgement, and compactions
(after which the index is built again from the table)."""

from __future__ import annotations

from collections import Counter

import pytest

from firnutil import FirnEnv, compare_table

SCHEMA = """
CREATE TABLE l (host text, n int, f float8);
ALTER TABLE l REPLICA IDENTITY FULL;
INSERT INTO l VALUES ('b', 2, 0.5), ('b', 2, 0.5), ('a', 1, NULL), (NULL, NULL, NULL),
                     (NULL, NULL, NULL);
"""

ONE = "ctid = (SELECT ctid FROM l WHERE {} LIMIT 1)"

ROUNDS = [
    # the reproduction: one of two identical rows updated
    [f"UPDATE l SET n = 20 WHERE {ONE.format('host = $$b$$')}",
     f"DELETE FROM l WHERE {ONE.format('host IS NULL')}"],
    # duplicate inserts, then one copy deleted in the same flush; copies of a new row
    ["INSERT INTO l VALUES ('c', 3, 1.5), ('c', 3, 1.5), ('c', 3, 1.5)",
     f"DELETE FROM l WHERE {ONE.format('host = $$c$$')}",
     "INSERT INTO l VALUES ('d', 4, 2.5), ('d', 4, 2.5)",
     "INSERT INTO l SELECT 'e', g % 3, NULL FROM generate_series(1, 30) g"],
    # two updates of two identical rows in one transaction; a row updated away and back within
    # one flush; a no-op update of one copy; one copy of a copied-then-streamed row deleted
    ["BEGIN",
     f"UPDATE l SET n = 40 WHERE {ONE.format('host = $$d$$ AND n = 4')}",
     f"UPDATE l SET n = 41 WHERE {ONE.format('host = $$d$$ AND n = 4')}",
     "COMMIT",
     f"UPDATE l SET n = 99 WHERE {ONE.format('host = $$c$$')}",
     "UPDATE l SET n = 3 WHERE n = 99",
     f"UPDATE l SET n = n WHERE {ONE.format('host = $$e$$ AND n = 1')}",
     f"DELETE FROM l WHERE {ONE.format('host = $$e$$ AND n = 2')}",
     "DELETE FROM l WHERE host = 'a'"],
]

# killed after the catalog commit (index and state not updated), then before the acknowledgement
CRASH_ROUNDS = [
    ("after-commit:1",
     [f"UPDATE l SET f = 9.5 WHERE {ONE.format('host = $$e$$ AND n = 0')}",
      "INSERT INTO l VALUES ('b', 2, 0.5)",
      f"DELETE FROM l WHERE {ONE.format('host = $$c$$')}"]),
    ("before-ack:1",
     [f"DELETE FROM l WHERE {ONE.format('host = $$e$$ AND n = 1')}",
      f"UPDATE l SET host = 'z' WHERE {ONE.format('host = $$b$$ AND n = 2')}",
      "INSERT INTO l VALUES ('c', 3, 1.5)"]),
]

AFTER = [f"DELETE FROM l WHERE {ONE.format('host = $$b$$')}",
         f"UPDATE l SET n = 7 WHERE {ONE.format('host = $$e$$ AND n = 0')}",
         "INSERT INTO l VALUES ('e', 0, NULL), ('e', 0, NULL)"]

MODES = {
    "position": {"readers": ["spark", "duckdb", "pyiceberg", "bigquery"]},
    "deletion_vector": {"readers": ["spark", "duckdb", "pyiceberg"]},
    "equality": {"readers": ["spark", "duckdb", "trino"], "delete_mode": "equality"},
}


def check(fe, conn, duck):
    """pyiceberg and DuckDB read the source's rows with their multiplicities."""
    want = compare_table(fe, conn, duck, "l", key=None)
    got = fe.catalog().load_table("e2e.l").scan(selected_fields=("host", "n", "f")).to_arrow()
    src = conn.execute("SELECT host, n, f FROM l").fetchall()
    assert Counter(map(tuple, (r.values() for r in got.to_pylist()))) == Counter(src)
    return want


def run_sql(conn, stmts):
    for s in stmts:
        conn.execute(s)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_identical_rows_keep_their_count(pg, pg_db, firn_bin, duck, tmp_path, mode):
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute(SCHEMA)
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, [("l", {"append_mode": False})],
                 destination=dict(MODES[mode], metadata_columns=False, compact_small_files=3,
                                  compact_delete_percent=0))
        out = fe.sync().stderr
        logs = [out]
        assert "append mode" not in out, out[-3000:]
        check(fe, conn, duck)
        for stmts in ROUNDS:
            run_sql(conn, stmts)
            logs.append(fe.sync().stderr)
            check(fe, conn, duck)
        for point, stmts in CRASH_ROUNDS:
            run_sql(conn, stmts)
            proc = fe.sync(env={"FIRN_TEST_CRASH": point}, check=False)
            assert "FIRN_TEST_CRASH: killing" in proc.stderr, proc.stderr[-3000:]
            logs.append(fe.sync().stderr)
            check(fe, conn, duck)
        run_sql(conn, AFTER)
        logs.append(fe.sync().stderr)
        # the index the clean stop before saved is loaded, not rebuilt, and stays exact
        assert "key index read from local disk" in logs[-1], logs[-1][-3000:]
        check(fe, conn, duck)
        # a column widened between runs changes the row encoding: the index is built again
        conn.execute("ALTER TABLE l ALTER COLUMN n TYPE bigint")
        run_sql(conn, [f"DELETE FROM l WHERE {ONE.format('host = $$e$$ AND n = 0')}",
                       f"UPDATE l SET n = 5 WHERE {ONE.format('host = $$c$$')}"])
        logs.append(fe.sync().stderr)
        check(fe, conn, duck)
        out = "".join(logs)
        assert "found no copy" not in out, out[-3000:]
        if mode == "position":  # format 2: compacted, and the index built again from the table
            assert "compacted" in out, out[-3000:]
        tbl = fe.catalog().load_table("e2e.l")
        assert tbl.schema().identifier_field_ids == []
        contents = {int(d.content) for task in tbl.scan().plan_files() for d in task.delete_files}
        assert 2 not in contents, "no equality deletes for a multiset"
