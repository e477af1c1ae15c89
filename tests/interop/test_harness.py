# SPDX-License-Identifier: Apache-2.0
"""Proves the test harness itself: the throwaway PostgreSQL cluster and the reader stack
(pyarrow, pyiceberg, DuckDB with iceberg) that later interop tests use as checkers."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path
from decimal import Decimal

import psycopg
import pytest

from conftest import PW_ROLE, PW_SECRET

ROWS = [
    (1, "plain ascii", Decimal("0"), dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc)),
    (-9223372036854775808, "héllo wörld ❄ 雪 🧊", Decimal("-12345678901234567890.123456789"),
     dt.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.timezone.utc)),
    (9223372036854775807, "", Decimal("1E-20"),
     dt.datetime(2038, 1, 19, 3, 14, 8, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30)))),
    (4, None, None, None),
]


def test_cluster_roundtrip_types(pg, pg_db):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        conn.execute("CREATE TABLE t (id int8 PRIMARY KEY, s text, n numeric, ts timestamptz)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO t VALUES (%s, %s, %s, %s)", ROWS)
        got = conn.execute("SELECT id, s, n, ts FROM t ORDER BY id").fetchall()
        text = conn.execute("SELECT s FROM t WHERE id = -9223372036854775808").fetchone()[0]
    want = sorted(ROWS, key=lambda r: r[0])
    assert got == want
    assert text.encode("utf-8") == "héllo wörld ❄ 雪 🧊".encode("utf-8")
    # Numerics keep their exact digits and scale, not just an equal value.
    assert [str(r[2]) for r in got] == [str(r[2]) for r in want]
    assert all(r[3] is None or r[3].utcoffset() == dt.timedelta(0) for r in got)


def test_cluster_settings(pg):
    with pg.connect() as conn:
        assert conn.execute("SHOW wal_level").fetchone()[0] == "logical"
        assert int(conn.execute("SHOW max_replication_slots").fetchone()[0]) >= 20
        assert int(conn.execute("SHOW max_wal_senders").fetchone()[0]) >= 20
        assert conn.execute("SHOW server_version_num").fetchone()[0].startswith("15")
        su, = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
        assert su
        repl, = conn.execute("SELECT rolreplication FROM pg_roles WHERE rolname = %s",
                             (PW_ROLE,)).fetchone()
        assert repl


def test_password_role(pg):
    with pg.connect(host="127.0.0.1", user=PW_ROLE, password=PW_SECRET) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == PW_ROLE
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        pg.connect(host="127.0.0.1", user=PW_ROLE, password="not-" + PW_SECRET)


def test_reader_stack(tmp_path, duck):
    """pyiceberg writes a table to a SQLite catalog and DuckDB's iceberg extension reads it back,
    all offline: a broken setup.sh fails here loudly."""
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db",
                         warehouse=f"file://{warehouse}")
    catalog.create_namespace("ns")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": ["a", "é", None]})
    table = catalog.create_table("ns.t", schema=data.schema)
    table.append(data)

    assert catalog.load_table("ns.t").scan().to_arrow().sort_by("id").equals(data)
    got = duck.execute(f"SELECT id, s FROM iceberg_scan('{table.metadata_location}') ORDER BY id")
    assert got.fetchall() == [(1, "a"), (2, "é"), (3, None)]


def test_rest_catalog_relative_handle(tmp_path):
    """`rest_catalog.sh start DIR` with a relative DIR (as README "An Iceberg REST catalog"
    shows) exports an absolute file:// warehouse: a relative one is no location a writer or
    reader can use."""
    jar = Path(os.environ.get("FIRN_CACHE", Path.home() / ".cache" / "firn")) / "jars"
    if not list(jar.glob("iceberg-open-api-*.jar")):
        pytest.skip("the REST catalog jar is not installed (scripts/setup.sh)")
    script = Path(__file__).resolve().parents[2] / "tests" / "harness" / "rest_catalog.sh"
    proc = subprocess.run(["bash", str(script), "start", "rest"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    try:
        assert proc.returncode == 0, proc.stderr
        exports = dict(line[len("export "):].split("=", 1)
                       for line in proc.stdout.splitlines() if line.startswith("export "))
        assert exports["FIRN_TEST_REST_WAREHOUSE"] == f"file://{tmp_path}/rest/warehouse"
        assert exports["FIRN_TEST_REST_DB"] == f"{tmp_path}/rest/catalog.db"
    finally:
        subprocess.run(["bash", str(script), "stop", "rest"], cwd=tmp_path, capture_output=True,
                       timeout=60)
    assert not (tmp_path / "rest").exists()
