# SPDX-License-Identifier: Apache-2.0
"""MySQL/MariaDB full-refresh backfill end to end (also empty, partitioned and 1,011-column tables): a type corpus (every type of
docs/type-mapping.md "MySQL and MariaDB" with NULLs, limits, zero and impossible dates,
negative and > 24 h TIME, latin1/gbk/utf8mb3/utf8mb4 text, BINARY padding, BIT widths, JSON,
geometry, generated and invisible columns) copied by `firn sync` from a real MariaDB 10.11 and
read back with pyiceberg and DuckDB, compared value by value with what MariaDB returns for the
same cells; the snapshot's binlog GTID position is in the snapshot summary; a table split into
many key ranges (BIGINT UNSIGNED keys above 2^63) arrives whole; a second run replaces the rows."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from decimal import Decimal

import pytest

from mysql_fixtures import mariadb, mariadb_db  # noqa: F401

COLUMNS = [
    # name, DDL, MariaDB expression giving the canonical text, python canonicalizer
    ("id", "bigint unsigned NOT NULL", "CAST(id AS CHAR)", str),
    ("i8", "tinyint", "CAST(i8 AS CHAR)", str),
    ("u8", "tinyint unsigned", "CAST(u8 AS CHAR)", str),
    ("i32", "int", "CAST(i32 AS CHAR)", str),
    ("u32", "int unsigned", "CAST(u32 AS CHAR)", str),
    ("i64", "bigint", "CAST(i64 AS CHAR)", str),
    ("dec", "decimal(10,2)", "CAST(`dec` AS CHAR)", lambda v: format(v, "f")),
    ("dec38", "decimal(38,10)", "CAST(dec38 AS CHAR)", lambda v: format(v, "f")),
    ("dec65", "decimal(65,30)", "CAST(dec65 AS CHAR)", str),
    ("f", "float", "CAST(CAST(f AS DOUBLE) AS CHAR)", lambda v: repr(float(v))),
    ("d", "double", "CAST(d AS CHAR)", lambda v: repr(float(v))),
    # no calendar day (zero, partial-zero, impossible): DATE_ADD gives NULL, firn stores null
    ("dt", "date", "IF(DATE_ADD(dt, INTERVAL 0 DAY) IS NULL, NULL, DATE_FORMAT(dt, '%Y-%m-%d'))",
     lambda v: v.isoformat()),
    ("dtm", "datetime(6)",
     "IF(DATE_ADD(dtm, INTERVAL 0 DAY) IS NULL, NULL, DATE_FORMAT(dtm, '%Y-%m-%d %H:%i:%s.%f'))",
     lambda v: v.strftime("%Y-%m-%d %H:%M:%S.%f")),
    ("ts", "timestamp(3) NULL DEFAULT NULL",
     "IF(ts = 0, NULL, DATE_FORMAT(ts, '%Y-%m-%d %H:%i:%s.%f'))",
     lambda v: v.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")),
    ("tm", "time(6)", "CAST(tm AS CHAR)", None),  # signed microseconds, formatted below
    ("yr", "year", "CAST(yr AS CHAR)", lambda v: f"{v:04d}"),
    ("s_utf", "varchar(60) CHARACTER SET utf8mb4", "s_utf", str),
    ("s_lat", "varchar(60) CHARACTER SET latin1", "s_lat", str),
    ("s_gbk", "varchar(60) CHARACTER SET gbk", "s_gbk", str),
    ("s_u3", "varchar(60) CHARACTER SET utf8mb3", "s_u3", str),
    ("txt", "mediumtext", "txt", str),
    ("ch", "char(5)", "ch", str),
    ("bin", "binary(4)", "HEX(bin)", lambda v: bytes(v).hex().upper()),
    ("vb", "varbinary(10)", "HEX(vb)", lambda v: bytes(v).hex().upper()),
    ("bl", "blob", "HEX(bl)", lambda v: bytes(v).hex().upper()),
    ("e", "enum('a','b','c')", "e", str),
    ("st", "set('x','y','z')", "st", str),
    ("b1", "bit(1)", "CAST(b1 AS UNSIGNED)", lambda v: str(int(v))),
    ("b9", "bit(9)", "CAST(b9 AS UNSIGNED)", str),
    ("b64", "bit(64)", "CAST(b64 AS UNSIGNED)", lambda v: format(v, "f")),
    ("j", "json", "j", str),
    ("g", "geometry", "HEX(ST_AsWKB(g))", lambda v: bytes(v).hex().upper()),
    ("gen", "int AS (i32 + 1) VIRTUAL", "CAST(gen AS CHAR)", str),
    ("inv", "int INVISIBLE", "CAST(inv AS CHAR)", str),
]

ROWS = [
    "(1, 1, 2, 3, 4, 5, 12.34, 1.5, 2.5, 1.5, 0.1, '2024-02-29', '2024-01-02 03:04:05.123456', "
    "'2024-01-02 03:04:05.678', '12:34:56.789012', 2024, 'héllo ❄ 🧊', 'café', '中文', 'ÿ€', "
    "'text', 'ab', x'01', x'00ff', x'deadbeef', 'b', 'x,z', b'1', b'101010101', "
    "b'1111111111111111111111111111111111111111111111111111111111111111', '{\"a\": [1, 2]}', "
    "ST_GeomFromText('POINT(1 2)'), 7)",
    # limits and zero dates
    "(9223372036854775813, -128, 255, -2147483648, 4294967295, -9223372036854775808, "
    "-99999999.99, -9999999999999999999999999999.9999999999, "
    "-99999999999999999999999999999999999.999999999999999999999999999999, 3.40282e38, "
    "1.7976931348623157e308, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', "
    "'-838:59:59.000000', 0, '', '', '', '', '', '', x'00000000', x'', x'', '', '', b'0', b'0', "
    "b'0', '[]', ST_GeomFromText('LINESTRING(0 0, 1 1)'), -1)",
    # partial-zero and impossible dates, TIME over 24 h, the largest key
    "(18446744073709551615, 127, 0, 2147483647, 0, 9223372036854775807, 0.05, 0, 0, 16777217, "
    "-0.0, '2024-00-15', '2023-02-31 10:00:00', '2038-01-19 03:14:07.999', '25:00:00.5', 1901, "
    "'x', 'x', 'x', 'x', REPEAT('long ', 20000), 'abcde', x'0102', x'01', x'00', 'c', 'x,y,z', "
    "b'1', b'111111111', b'1000000000000000000000000000000000000000000000000000000000000000', "
    "'null', NULL, 0)",
    # NULLs everywhere they may be
    "(0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL)",
]

INSERT_COLS = [c[0] for c in COLUMNS if c[0] != "gen"]


def time_text(us: int) -> str:
    neg = us < 0
    us = abs(us)
    s, frac = divmod(us, 1_000_000)
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{'-' if neg else ''}{h:02d}:{m:02d}:{s:02d}.{frac:06d}"


def canon(name, fn, v):
    if v is None:
        return None
    if name == "tm":
        return time_text(int(v))
    return fn(v)


def write_job(root, mariadb, db, tables, chunk_size=None):
    root.mkdir(parents=True, exist_ok=True)
    src = mariadb.source_json(db, ssl_mode="disabled")
    if chunk_size:
        src["chunk_size"] = chunk_size
    (root / "source.json").write_text(json.dumps(src))
    (root / "destination.json").write_text(json.dumps({
        "catalog": {"type": "sql", "name": "firn", "uri": f"sqlite:///{root / 'catalog.db'}",
                    "warehouse": f"file://{root / 'warehouse'}"}}))
    (root / "streams.json").write_text(json.dumps({"selected_streams": {
        db: [{"stream_name": t, "sync_mode": "full_refresh"} for t in tables]}}))


def sync(firn_bin, root):
    proc = subprocess.run([str(firn_bin), "sync", "--source", str(root / "source.json"),
                           "--destination", str(root / "destination.json"), "--streams",
                           str(root / "streams.json"), "--state", str(root / "state.json")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


def catalog(root):
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("firn", uri=f"sqlite:///{root / 'catalog.db'}",
                      warehouse=f"file://{root / 'warehouse'}")


def source_cells(mariadb, db):
    exprs = ", ".join(c[2] for c in COLUMNS)
    with mariadb.connect(database=db) as conn:
        cur = conn.cursor()
        cur.execute(f"SELECT {exprs} FROM corpus ORDER BY id")
        rows = [[None if v is None else str(v) if not isinstance(v, bytes) else v.decode()
                 for v in row] for row in cur.fetchall()]
    # The server's double text ("1e22") and Python's repr ("1e+22") spell one value two ways.
    for row in rows:
        for i, (name, *_) in enumerate(COLUMNS):
            if name in ("f", "d") and row[i] is not None:
                row[i] = repr(float(row[i]))
    return [tuple(r) for r in rows]


def iceberg_cells(rows):
    out = []
    for r in sorted(rows, key=lambda r: int(r["id"])):
        out.append(tuple(canon(name, fn, r[name]) for name, _, _, fn in COLUMNS))
    return out


def test_type_corpus(mariadb, mariadb_db, firn_bin, tmp_path, duck):
    ddl = ", ".join(f"`{n}` {t}" for n, t, _, _ in COLUMNS)
    with mariadb.connect(database=mariadb_db) as conn:
        cur = conn.cursor()
        cur.execute("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'")
        cur.execute(f"CREATE TABLE corpus ({ddl}, PRIMARY KEY (id))")
        cols = ", ".join(f"`{c}`" for c in INSERT_COLS)
        for row in ROWS:
            cur.execute(f"INSERT INTO corpus ({cols}) VALUES {row}")
        cur.execute("SELECT @@gtid_binlog_pos")
        gtid_before = cur.fetchone()[0]
    root = tmp_path / "job"
    write_job(root, mariadb, mariadb_db, ["corpus"])
    proc = sync(firn_bin, root)
    assert mariadb.password not in proc.stderr
    want = source_cells(mariadb, mariadb_db)
    assert len(want) == 4
    tbl = catalog(root).load_table(f"{mariadb_db}.corpus")
    got = iceberg_cells(tbl.scan().to_arrow().to_pylist())
    for w, g in zip(want, got):
        for (name, *_), wv, gv in zip(COLUMNS, w, g):
            assert gv == wv, f"pyiceberg {name}: {gv!r} != {wv!r}"
    meta = tbl.metadata_location
    duck_rows = duck.sql(f"SELECT * FROM iceberg_scan('{meta}')").to_arrow_table().to_pylist()
    assert iceberg_cells(duck_rows) == want
    schema = {f.name: str(f.field_type) for f in tbl.schema().fields}
    assert schema["id"] == "decimal(20, 0)" and schema["tm"] == "long"
    assert schema["dec65"] == "string" and schema["bin"] == "fixed[4]"
    assert schema["ts"] == "timestamptz" and schema["b1"] == "boolean"
    assert list(tbl.schema().identifier_field_ids) == [tbl.schema().find_field("id").field_id]
    meta = tbl.scan(selected_fields=("id", "_firn_op", "_firn_lsn", "_firn_commit_ts",
                                     "_firn_ingest_ts")).to_arrow().to_pylist()
    assert {r["_firn_op"] for r in meta} == {"r"}
    assert all(r["_firn_lsn"] is None and r["_firn_commit_ts"] is None for r in meta)
    assert all(r["_firn_ingest_ts"] is not None for r in meta)
    summary = tbl.current_snapshot().summary
    assert summary["firn.mysql.gtid-position"] == gtid_before
    assert summary["firn.mysql.binlog-file"].startswith("master-bin.")
    assert "3 zero dates" in proc.stderr or "zero dates stored as null" in proc.stderr


def test_chunked_copy_and_refresh(mariadb, mariadb_db, firn_bin, tmp_path):
    with mariadb.connect(database=mariadb_db) as conn:
        cur = conn.cursor()
        cur.execute("CREATE TABLE big (k bigint unsigned PRIMARY KEY, v varchar(200))")
        rows = [(9223372036854775000 + i * 7, f"row {i} " + "x" * (i % 150)) for i in range(3000)]
        cur.executemany("INSERT INTO big VALUES (%s, %s)", rows)
        cur.execute("ANALYZE TABLE big")
        cur.fetchall()
    root = tmp_path / "job"
    write_job(root, mariadb, mariadb_db, ["big"], chunk_size=16384)
    proc = sync(firn_bin, root)
    assert " chunks" in proc.stderr and " 1 chunks" not in proc.stderr, proc.stderr
    tbl = catalog(root).load_table(f"{mariadb_db}.big")
    got = sorted((int(r["k"]), r["v"]) for r in tbl.scan().to_arrow().to_pylist())
    assert got == rows
    # A second full refresh replaces the rows: deleted and changed rows are as the source is.
    with mariadb.connect(database=mariadb_db) as conn:
        cur = conn.cursor()
        cur.execute("DELETE FROM big WHERE k % 2 = 0")
        cur.execute("UPDATE big SET v = 'changed' WHERE k % 3 = 0")
        cur.execute("SELECT k, v FROM big ORDER BY k")
        want = [(int(k), v) for k, v in cur.fetchall()]
    sync(firn_bin, root)
    tbl = catalog(root).load_table(f"{mariadb_db}.big")
    got = sorted((int(r["k"]), r["v"]) for r in tbl.scan().to_arrow().to_pylist())
    assert got == want
    assert Decimal(max(k for k, _ in got)) > Decimal(2) ** 63
    state = json.loads((root / "state.json").read_text())
    entry = [s for s in state["streams"] if s["stream"] == "big"][0]
    assert entry["state"]["backfill_done"] is True
    assert int(entry["state"]["snapshot_id"]) == tbl.current_snapshot().snapshot_id
    proc = subprocess.run([str(firn_bin), "status", "--source", str(root / "source.json"),
                           "--destination", str(root / "destination.json"), "--streams",
                           str(root / "streams.json"), "--state", str(root / "state.json")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    line = [x for x in proc.stdout.splitlines() if x.startswith(f"{mariadb_db}.big")][0]
    assert "full_refresh" in line and "done" in line


def test_cdc_mode_refused(mariadb, mariadb_db, firn_bin, tmp_path):
    with mariadb.connect(database=mariadb_db) as conn:
        conn.cursor().execute("CREATE TABLE t (id int PRIMARY KEY)")
    root = tmp_path / "job"
    write_job(root, mariadb, mariadb_db, ["t"])
    doc = json.loads((root / "streams.json").read_text())
    doc["selected_streams"][mariadb_db][0]["sync_mode"] = "full_refresh_cdc"
    (root / "streams.json").write_text(json.dumps(doc))
    proc = subprocess.run([str(firn_bin), "sync", "--source", str(root / "source.json"),
                           "--destination", str(root / "destination.json"), "--streams",
                           str(root / "streams.json"), "--state", str(root / "state.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "binlog CDC" in lines[0] and "full_refresh" in lines[0]
    assert not (root / "warehouse").exists()


def test_empty_partitioned_and_wide(mariadb, mariadb_db, firn_bin, tmp_path, duck):
    wide_cols = ", ".join(f"c{i:04d} int" for i in range(1, 1011))
    with mariadb.connect(database=mariadb_db) as conn:
        cur = conn.cursor()
        cur.execute("CREATE TABLE empty_t (id int PRIMARY KEY, v text)")
        cur.execute("CREATE TABLE parts (id int, region varchar(4), v int, PRIMARY KEY (id, region)) "
                    "PARTITION BY LIST COLUMNS (region) (PARTITION pe VALUES IN ('eu'), "
                    "PARTITION pu VALUES IN ('us'))")
        cur.executemany("INSERT INTO parts VALUES (%s, %s, %s)",
                        [(i, "eu" if i % 2 else "us", i * 10) for i in range(200)])
        cur.execute(f"CREATE TABLE wide (id int PRIMARY KEY, {wide_cols}) ROW_FORMAT=DYNAMIC")
        vals = ", ".join(str(i * 3) for i in range(1, 1011))
        nulls = ", ".join(["NULL"] * 1010)
        cur.execute(f"INSERT INTO wide VALUES (1, {vals}), (2, {nulls})")
    root = tmp_path / "job"
    write_job(root, mariadb, mariadb_db, ["empty_t", "parts", "wide"])
    sync(firn_bin, root)
    cat = catalog(root)
    assert cat.load_table(f"{mariadb_db}.empty_t").scan().to_arrow().num_rows == 0
    got = sorted((r["id"], r["region"], r["v"])
                 for r in cat.load_table(f"{mariadb_db}.parts").scan().to_arrow().to_pylist())
    assert got == [(i, "eu" if i % 2 else "us", i * 10) for i in range(200)]
    wide = cat.load_table(f"{mariadb_db}.wide")
    rows = sorted(wide.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [rows[0][f"c{i:04d}"] for i in range(1, 1011)] == [i * 3 for i in range(1, 1011)]
    assert all(rows[1][f"c{i:04d}"] is None for i in range(1, 1011))
    n = duck.sql(f"SELECT count(*) FROM iceberg_scan('{wide.metadata_location}')").fetchone()[0]
    assert n == 2
    state = json.loads((root / "state.json").read_text())
    assert {s["stream"] for s in state["streams"] if s["state"]["backfill_done"]} == {
        "empty_t", "parts", "wide"}
