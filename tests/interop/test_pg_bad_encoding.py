# SPDX-License-Identifier: Apache-2.0
"""A SQL_ASCII database keeps whatever bytes it is given; a text value that is not valid UTF-8
makes the server's COPY fail (SQLSTATE 22021) when firn asks for UTF-8. Reading the chunk again
meets the same bytes in the same snapshot, so firn does not retry it: one error line naming the
problem and what to do, exit 3, no rows committed; leaving the column out (the remedy the line
names) copies the table, in the same place (the empty table the failed copy created drops the
column)."""

from __future__ import annotations

import uuid

import pytest

from firnutil import FirnEnv, arrow_rows


@pytest.fixture
def ascii_db(pg):
    name = "a_" + uuid.uuid4().hex[:12]
    with pg.connect() as conn:
        conn.execute(f"CREATE DATABASE \"{name}\" ENCODING 'SQL_ASCII' LC_COLLATE 'C' "
                     "LC_CTYPE 'C' TEMPLATE template0")
    with pg.connect(dbname=name) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text, w text)")
        conn.execute("INSERT INTO t VALUES (1, 'plain', 'x'), (2, 'caf' || chr(233), 'y')")
    yield name
    with pg.connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_invalid_utf8_is_not_retried_and_says_what_to_do(pg, ascii_db, firn_bin, tmp_path):
    fe = FirnEnv(firn_bin, tmp_path / "firn", ascii_db)
    fe.setup(pg, ["t"])
    proc = fe.sync(check=False)
    assert proc.returncode == 3, proc.stderr
    assert "retrying chunk" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "SQLSTATE 22021" in last and "not valid in the client encoding UTF8" in last, last
    assert 'leave the column out with "columns"' in last, last
    # The remedy in the same place: the table the failed copy created (no rows) follows the
    # narrowed selection; it does not keep "v" (which would fail the copy again).
    fe.write_streams([("t", {"columns": ["id", "w"]})])
    fe.sync("--log", "error")
    tbl = fe.catalog().load_table("e2e.t")
    assert [f.name for f in tbl.schema().fields if not f.name.startswith("_firn_")] == ["id", "w"]
    assert sorted(arrow_rows(tbl.scan().to_arrow(), ["id", "w"])) == [(1, "x"), (2, "y")]
