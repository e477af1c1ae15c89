# SPDX-License-Identifier: Apache-2.0
"""A format-3 table (deletion vectors) whose key index is downloaded one commit behind the table
and caught up (docs/internals/pkindex.md "Persistence"): the next commit's vectors must merge
every bit of the vectors committed after the downloaded copy, or deleted rows come back.
pyiceberg and DuckDB equal the source after every run."""

from __future__ import annotations

from firnutil import FirnEnv
from test_engine_e2e import compare_table

SCHEMA = """
CREATE TABLE items (id int8 PRIMARY KEY, v int4, note text);
INSERT INTO items SELECT g, g % 1000, 'n' || g FROM generate_series(1, 20000) g;
"""


def change(conn, k: int) -> None:
    conn.execute(f"UPDATE items SET v = v + 1, note = note || 'u' WHERE id % 53 = {k}")
    conn.execute(f"DELETE FROM items WHERE id % 59 = {k + 1}")
    conn.execute(f"INSERT INTO items SELECT 100000 + {k} * 1000 + g, g, 'new' FROM "
                 "generate_series(1, 200) g")


def test_v3_index_caught_up_keeps_vectors(pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)

        def host(name: str) -> None:
            fe.setup(pg, ["items"], destination={"index_dir": str(tmp_path / name),
                                                 "readers": ["spark", "duckdb", "pyiceberg"]})

        host("a")
        fe.sync()
        assert fe.catalog().load_table("e2e.items").metadata.format_version == 3
        # A commits deletes (a vector on the backfill's file) and dies before its stop upload.
        change(conn, 1)
        proc = fe.sync(env={"FIRN_TEST_CRASH": "before-ack:1"}, check=False)
        assert "FIRN_TEST_CRASH: killing" in proc.stderr, proc.stderr[-3000:]
        # B: the copy of the backfill's snapshot, caught up; its commit merges A's vector.
        host("b")
        change(conn, 2)
        out = fe.sync().stderr
        assert "(caught up next)" in out and "key index loaded" not in out, out[-3000:]
        compare_table(fe, conn, duck, "items", key=None)
        change(conn, 3)
        out = fe.sync().stderr
        assert "key index read from local disk" in out, out[-3000:]
        compare_table(fe, conn, duck, "items", key=None)
