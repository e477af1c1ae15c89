# SPDX-License-Identifier: Apache-2.0
"""The key of an existing upsert table changed under it (a `primary_key` added to the streams
file, or a new primary key at the source): the run used to look rows up by the new key in an
index and a table keyed by the old one, so updates left duplicates and deletes were lost. It
is a configuration error naming both keys (exit 2), nothing is committed, the slot keeps the
changes, and with the key set back the next run leaves the table equal to the source."""

from __future__ import annotations

import pytest

from firnutil import FirnEnv, META_COLUMNS, arrow_rows, diff_rows, source_rows


@pytest.fixture
def fe(pg, pg_db, firn_bin, tmp_path) -> FirnEnv:
    with pg.connect(dbname=pg_db) as conn:
        # FULL: an override outside the primary key needs it (test_engine_errors.py)
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, u int UNIQUE NOT NULL, v text); "
                     "ALTER TABLE t REPLICA IDENTITY FULL")
        conn.execute("INSERT INTO t SELECT g, 1000 + g, 'v' || g FROM generate_series(1, 200) g")
    env = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    env.setup(pg, ["t"])
    return env


def compare(fe: FirnEnv, pg) -> str:
    tbl = fe.catalog().load_table("e2e.t")
    names = [f.name for f in tbl.schema().fields if f.name not in META_COLUMNS]
    with pg.connect(dbname=fe.dbname) as conn:
        expected = source_rows(conn, "t", tbl.schema(), names)
    return diff_rows(expected, arrow_rows(tbl.scan().to_arrow(), names), 0, names)


def test_primary_key_changed_under_a_table(fe, pg):
    fe.sync("--log", "error")
    before = fe.catalog().load_table("e2e.t").current_snapshot().snapshot_id
    with pg.connect(dbname=fe.dbname) as conn:
        conn.execute("UPDATE t SET v = 'changed' WHERE id <= 20")
        conn.execute("DELETE FROM t WHERE id BETWEEN 21 AND 30")
    for key, shown in ((["u"], '"u"'), (["u", "id"], '"u", "id"')):
        fe.write_streams([("t", {"primary_key": key})])
        proc = fe.sync("--log", "error", check=False)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines() == [
            f'firn: table "e2e.t" is keyed by "id" but the stream\'s key is {shown}; set '
            'primary_key back, or drop the table and sync again to copy it with the new key '
            '(while opening table "e2e.t")']
        assert fe.catalog().load_table("e2e.t").current_snapshot().snapshot_id == before
    fe.write_streams(["t"])
    fe.sync("--log", "error")
    diff = compare(fe, pg)
    assert not diff, diff


def test_partition_changed_under_a_table_warns(fe, pg):
    """A `partition` added to the streams file after the table exists is not applied (the table
    keeps its spec) and says so instead of being ignored without a word."""
    fe.sync("--log", "error")
    fe.write_streams([("t", {"partition": ["bucket(4, id)"]})])
    with pg.connect(dbname=fe.dbname) as conn:
        conn.execute("UPDATE t SET v = 'p' WHERE id <= 5")
    proc = fe.sync("--log", "warn")
    warns = [line for line in proc.stderr.splitlines() if "level=warn" in line]
    assert len(warns) == 1 and warns[0].endswith(
        'msg="table \\"e2e.t\\": its partition spec (0 fields) is not the stream\'s '
        '\\"partition\\" (1 fields); firn keeps the table\'s spec: drop the table and sync '
        'again to partition it as the streams file says"'), proc.stderr
    assert list(fe.catalog().load_table("e2e.t").spec().fields) == []
    diff = compare(fe, pg)
    assert not diff, diff
    fe.write_streams(["t"])
    proc = fe.sync("--log", "warn")
    assert "level=warn" not in proc.stderr, proc.stderr
