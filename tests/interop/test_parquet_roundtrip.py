# SPDX-License-Identifier: Apache-2.0
"""firn's Parquet writer checked by independent readers: every Iceberg type with edge values,
nested lists/structs/maps, codecs and size limits, read back by pyarrow AND DuckDB and compared
value by value; statistics and Iceberg metrics compared with pyarrow's footer view and pyiceberg's
own metrics computation; a property test over random schemas and data."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import subprocess
import uuid
from decimal import Context, Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

WIDE = Context(prec=100)
EPOCH = dt.datetime(1970, 1, 1)
EPOCH_TZ = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
EPOCH_DATE = dt.date(1970, 1, 1)


@pytest.fixture(scope="session")
def tool(build_dir: Path) -> Path:
    path = build_dir / "tools" / "pq_write"
    if not path.exists():
        pytest.fail(f"{path} missing: build the tests/tools targets", pytrace=False)
    return path


def write(tool: Path, tmp_path: Path, schema: list, rows: list, options: dict | None = None,
          name: str = "t") -> tuple[Path, dict]:
    spec = tmp_path / f"{name}.json"
    out = tmp_path / f"{name}.parquet"
    spec.write_text(json.dumps({"schema": schema, "rows": rows, "options": options or {}}))
    proc = subprocess.run([str(tool), str(spec), str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out, json.loads(proc.stdout)


# ---- canonical values: what a row "means", independent of the reader's Python types ----------

def canon(field: dict, v):
    """Canonical form of a value as read back (pyarrow or DuckDB Python objects)."""
    if v is None:
        return None
    t = field["type"]
    if t in ("float", "double"):
        return "nan" if math.isnan(v) else float(v)
    if t == "decimal":
        return int(Decimal(v).scaleb(field["scale"], context=WIDE))
    if t == "date":
        return (v - EPOCH_DATE).days
    if t == "time":
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
    if t in ("timestamp", "timestamptz"):
        if isinstance(v, dt.datetime):
            base = EPOCH_TZ if v.tzinfo else EPOCH
            d = v - base
            return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds
        return int(v)
    if t == "uuid":
        return (v.bytes if isinstance(v, uuid.UUID) else bytes(v)).hex()
    if t in ("fixed", "binary"):
        return bytes(v).hex()
    if t == "list":
        return [canon(field["children"][0], e) for e in v]
    if t == "map":
        items = v.items() if isinstance(v, dict) else v
        return [[canon(field["children"][0], k), canon(field["children"][1], x)] for k, x in items]
    if t == "struct":
        return [canon(c, v[c["name"]]) for c in field["children"]]
    return v


def canon_expected(field: dict, v):
    """Canonical form of a value as given in the JSON spec."""
    if v is None:
        return None
    t = field["type"]
    if t in ("float", "double"):
        if isinstance(v, str):
            return "nan" if v == "NaN" else (-math.inf if v.startswith("-") else math.inf)
        return float(v)
    if t == "decimal":
        return int(v)
    if t == "list":
        return [canon_expected(field["children"][0], e) for e in v]
    if t == "map":
        return [[canon_expected(field["children"][0], k), canon_expected(field["children"][1], x)]
                for k, x in v]
    if t == "struct":
        return [canon_expected(c, e) for c, e in zip(field["children"], v)]
    return v


def read_pyarrow(path: Path, schema: list) -> list:
    table = pq.read_table(path)
    cols = [table.column(f["name"]).to_pylist() for f in schema]
    return [[canon(f, c[i]) for f, c in zip(schema, cols)] for i in range(table.num_rows)]


def read_duckdb(path: Path, schema: list) -> list:
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    # timestamptz as UTC wall time: DuckDB's Python conversion of TIMESTAMPTZ needs pytz
    cols = ", ".join(f'"{f["name"]}"::TIMESTAMP' if f["type"] == "timestamptz" else f'"{f["name"]}"'
                     for f in schema)
    rows = con.execute(f"SELECT {cols} FROM read_parquet('{path}')").fetchall()
    con.close()
    return [[canon(f, v) for f, v in zip(schema, row)] for row in rows]


def check_roundtrip(tool, tmp_path, schema, rows, options=None, name="t"):
    path, metrics = write(tool, tmp_path, schema, rows, options, name)
    want = [[canon_expected(f, v) for f, v in zip(schema, row)] for row in rows]
    got_pa = read_pyarrow(path, schema)
    assert len(got_pa) == len(want)
    for i, (g, w) in enumerate(zip(got_pa, want)):
        assert g == w, f"pyarrow row {i}: {g} != {w}"
    got_duck = read_duckdb(path, schema)
    for i, (g, w) in enumerate(zip(got_duck, want)):
        assert g == w, f"duckdb row {i}: {g} != {w}"
    return path, metrics


# ---- the edge-value table -------------------------------------------------------------------

def F(fid, name, type_, required=False, **kw):
    return {"id": fid, "name": name, "type": type_, "required": required, **kw}


UUID1 = "123e4567e89b12d3a456426614174000"
UUIDMAX = "ff" * 16
EDGE_SCHEMA = [
    F(1, "b", "boolean"),
    F(2, "i", "int"),
    F(3, "l", "long"),
    F(4, "f", "float"),
    F(5, "d", "double"),
    F(6, "dec9", "decimal", precision=9, scale=2),
    F(7, "dec18", "decimal", precision=18, scale=4),
    F(8, "dec38", "decimal", precision=38, scale=10),
    F(9, "dt", "date"),
    F(10, "tm", "time"),
    F(11, "ts", "timestamp"),
    F(12, "tstz", "timestamptz"),
    F(13, "s", "string"),
    F(14, "u", "uuid"),
    F(15, "fx", "fixed", length=3),
    F(16, "bin", "binary"),
    F(17, "req", "long", required=True),
]
MAXDEC38 = "9" * 38
EDGE_ROWS = [
    [True, -2**31, -2**63, 1.5, 0.0, "-99999999", "-999999999999999999", "-" + MAXDEC38,
     -719162, 0, -62135596800000000, -1, "", UUID1, "000000", "", 0],
    [False, 2**31 - 1, 2**63 - 1, "NaN", "NaN", "999999999", "999999999999999999", MAXDEC38,
     2932896, 86399999999, 253402300799999999, 253402300799999999,
     "héllo wörld ❄ 雪 🧊 and then some more text", UUIDMAX, "ffffff", "00ff10", 1],
    [None] * 16 + [2],
    [True, 0, 0, "-Infinity", "Infinity", "0", "0", "0", -1, 1, -1, 0, "a", UUID1, "7f0001",
     "ffffffffffffffffffffffffffffffffffff", 3],
    [False, -1, -1, -0.0, -0.0, "1", "-1", "12345678901234567890123456789", 0, 12, 1, 1,
     "zzzzzzzzzzzzzzzzzzzzzzzzzzzzz", "00" * 16, "800000", "61", -9],
    [True, 7, 7, 3.4028234663852886e38, 1.7976931348623157e308, "-5", "5", "-1", 1, 2, 3, 4,
     "\U0010ffff\U0010ffff" * 10, UUID1, "010203", "", 2**62],
]


@pytest.mark.parametrize("codec", ["zstd", "snappy", "gzip", "none"])
def test_edge_values_all_types(tool, tmp_path, codec):
    check_roundtrip(tool, tmp_path, EDGE_SCHEMA, EDGE_ROWS, {"codec": codec})


def test_single_row_and_all_null(tool, tmp_path):
    schema = EDGE_SCHEMA[:-1]
    check_roundtrip(tool, tmp_path, schema, [[None] * len(schema)], name="one_null")
    check_roundtrip(tool, tmp_path, schema, [[None] * len(schema)] * 3000, name="all_null")
    check_roundtrip(tool, tmp_path, schema, [EDGE_ROWS[1][:-1]], name="one")


NESTED_SCHEMA = [
    F(1, "id", "long", required=True),
    F(2, "tags", "list", children=[F(3, "element", "string")]),
    F(4, "nums", "list", required=True, children=[F(5, "element", "double", required=True)]),
    F(6, "pt", "struct", children=[F(7, "x", "int", required=True), F(8, "name", "string")]),
    F(9, "attrs", "map", children=[F(10, "key", "string", required=True), F(11, "value", "long")]),
    F(12, "deep", "list", children=[
        F(13, "element", "struct", children=[
            F(14, "k", "int"),
            F(15, "vs", "list", children=[F(16, "element", "decimal", precision=20, scale=3)])])]),
    F(17, "ll", "list", children=[F(18, "element", "list", children=[F(19, "element", "int")])]),
]
NESTED_ROWS = [
    [1, [], [], [1, "a"], [], [], []],
    [2, None, [1.5, "NaN"], None, None, None, None],
    [3, [None, "x", ""], [-0.0], [2, None], [["k1", 1], ["k2", None]],
     [None, [None, None], [5, []], [6, ["-123456789012345678", None, "1"]]], [[1, None], [], None]],
    [4, ["ü" * 20], ["Infinity"], [-3, "ß"], [["", -(2**63)]], [[7, None]], [None, [2]]],
]


def test_nested_lists_structs_maps(tool, tmp_path):
    _, metrics = check_roundtrip(tool, tmp_path, NESTED_SCHEMA, NESTED_ROWS)
    by_id = {f["id"]: f for f in metrics["fields"]}
    # repeated leaves carry counts but no bounds (Iceberg Java); the struct leaves have bounds
    assert "lower" not in by_id[3] and "upper" not in by_id[3]
    assert by_id[7]["lower"] == (-3).to_bytes(4, "little", signed=True).hex()
    assert by_id[7]["upper"] == (2).to_bytes(4, "little", signed=True).hex()


def test_many_rows_small_pages_dictionary_fallback(tool, tmp_path):
    # tiny page, dictionary and row-group targets force many pages, a PLAIN fallback mid-chunk
    # and several row groups
    schema = [F(1, "id", "long", required=True), F(2, "s", "string"), F(3, "d", "double"),
              F(4, "tags", "list", children=[F(5, "element", "int")])]
    rng = random.Random(7)
    rows = []
    for i in range(20000):
        s = None if i % 13 == 0 else f"v{rng.randrange(3000 if i < 10000 else 50)}"
        rows.append([i, s, rng.choice([None, rng.random(), float(i)]),
                     None if i % 17 == 0 else [rng.randrange(5) for _ in range(i % 4)]])
    opts = {"page_bytes": 2048, "page_rows": 700, "dict_bytes": 8192, "row_group_bytes": 60000}
    path, metrics = check_roundtrip(tool, tmp_path, schema, rows, opts)
    md = pq.ParquetFile(path).metadata
    assert md.num_row_groups > 1
    encs = {e for g in range(md.num_row_groups) for e in md.row_group(g).column(1).encodings}
    assert {"PLAIN", "RLE_DICTIONARY"} <= encs
    assert len(metrics["split_offsets"]) == md.num_row_groups


def test_million_rows_generated(tool, tmp_path):
    n = 1_000_000
    out = tmp_path / "gen.parquet"
    proc = subprocess.run([str(tool), "gen", str(n), str(out)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    t = pq.read_table(out)
    assert t.num_rows == n
    rng = range(n)
    assert t.column("id").to_pylist() == list(rng)
    assert t.column("v").to_pylist() == [None if k % 7 == 3 else k % 1000 - 500 for k in rng]
    assert t.column("d").to_pylist() == [k * 0.25 for k in rng]
    assert t.column("s").to_pylist() == [None if k % 11 == 5 else f"s{k % 5000}" for k in rng]
    ts = t.column("ts").cast(pa.int64()).to_pylist()
    assert ts == [1600000000000000 + k * 1000003 for k in rng]
    dec = t.column("dec").to_pylist()
    assert [int(x.scaleb(2)) for x in dec] == [k * 37 - 5000000 for k in rng]
    assert t.column("tags").to_pylist() == [[k + j for j in range(k % 4)] for k in rng]
    import duckdb

    got = duckdb.sql(
        f"SELECT count(*), sum(id), count(v), sum(v), count(s), count(DISTINCT s), sum(d),"
        f" sum(epoch_us(ts)), sum(dec), sum(len(tags)), sum(list_sum(tags))"
        f" FROM read_parquet('{out}')").fetchone()
    ks = range(n)
    assert got[0] == n and got[1] == sum(ks)
    assert got[2] == sum(1 for k in ks if k % 7 != 3)
    assert got[3] == sum(k % 1000 - 500 for k in ks if k % 7 != 3)
    assert got[4] == sum(1 for k in ks if k % 11 != 5) and got[5] == 5000
    assert got[6] == math.fsum(k * 0.25 for k in ks)
    assert got[7] == sum(1600000000000000 + k * 1000003 for k in ks)
    assert got[8] == Decimal(sum(k * 37 - 5000000 for k in ks)).scaleb(-2)
    assert got[9] == sum(k % 4 for k in ks)
    want_tag_sum = sum(k * (k % 4) + (k % 4) * (k % 4 - 1) // 2 for k in ks)
    assert got[10] == want_tag_sum


# ---- zstd pages stored as raw-block frames ---------------------------------------------------

def _varint(b: bytes, at: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        x = b[at]
        at += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return v, at


def _skip(b: bytes, at: int, t: int) -> int:
    """Skips one Thrift compact value of type t at b[at]."""
    if t in (1, 2):  # bool in the field header
        return at
    if t == 3:
        return at + 1
    if t in (4, 5, 6):
        return _varint(b, at)[1]
    if t == 7:
        return at + 8
    if t == 8:
        n, at = _varint(b, at)
        return at + n
    if t in (9, 10):
        head = b[at]
        at += 1
        n, et = head >> 4, head & 0x0F
        if n == 15:
            n, at = _varint(b, at)
        for _ in range(n):
            at = _skip(b, at, et)
        return at
    if t == 12:
        return _struct(b, at, {})[1]
    raise AssertionError(f"thrift type {t}")


def _struct(b: bytes, at: int, want: dict) -> tuple[dict, int]:
    """Reads a compact struct: the i32 fields whose ids are in want (id -> name), skips others."""
    got, last = {}, 0
    while True:
        head = b[at]
        at += 1
        if head == 0:
            return got, at
        t, delta = head & 0x0F, head >> 4
        if delta:
            fid = last + delta
        else:
            z, at = _varint(b, at)
            fid = (z >> 1) ^ -(z & 1)
        last = fid
        if fid in want and t == 5:
            z, at = _varint(b, at)
            got[want[fid]] = (z >> 1) ^ -(z & 1)
        else:
            at = _skip(b, at, t)


def zstd_pages(path: Path, col: int) -> list[tuple[int, bytes, int]]:
    """(page type, compressed bytes, uncompressed size) of each page of column col's chunk in
    row group 0, read from the page headers."""
    md = pq.ParquetFile(path).metadata.row_group(0).column(col)
    data = path.read_bytes()
    at = md.dictionary_page_offset if md.has_dictionary_page else md.data_page_offset
    end = at + md.total_compressed_size
    pages = []
    while at < end:
        h, at = _struct(data, at, {1: "type", 2: "usize", 3: "csize"})
        pages.append((h["type"], data[at:at + h["csize"]], h["usize"]))
        at += h["csize"]
    assert at == end
    return pages


def raw_blocks(frame: bytes, usize: int) -> int | None:
    """Number of blocks when frame is a zstd frame of Raw_Blocks only (RFC 8878), else None."""
    assert frame[:4] == bytes.fromhex("28b52ffd")
    fhd = frame[4]
    assert fhd & 0x20, "raw frames are single-segment"
    fcs_len = {0: 1, 1: 2, 2: 4, 3: 8}[fhd >> 6]
    fcs = int.from_bytes(frame[5:5 + fcs_len], "little") + (256 if fcs_len == 2 else 0)
    assert fcs == usize
    at, blocks, size = 5 + fcs_len, 0, 0
    while True:
        h = int.from_bytes(frame[at:at + 3], "little")
        if (h >> 1) & 3 != 0:
            return None
        blocks += 1
        size += h >> 3
        at += 3 + (h >> 3)
        if h & 1:
            assert at == len(frame) and size == usize
            return blocks


def test_zstd_raw_pages_read_back(tool, tmp_path):
    # random binaries (pages over 128 KiB that zstd cannot shrink: raw frames of several
    # blocks), a skewed int (dictionary ids), a counter (compressed), a constant (tiny pages,
    # raw): pyarrow and DuckDB read every value, pyarrow's zstd decodes every page
    schema = [F(1, "id", "long", required=True), F(2, "noise", "binary"), F(3, "zone", "int"),
              F(4, "one", "int")]
    rng = random.Random(11)
    rows = [[i, None if i % 97 == 5 else rng.randbytes(40).hex(),
             rng.choice([161, 237, 236, 162]) if rng.random() < 0.75 else rng.randrange(265), 7]
            for i in range(40000)]
    opts = {"codec": "zstd", "page_rows": 4000, "dict_bytes": 16384}
    path, _ = check_roundtrip(tool, tmp_path, schema, rows, opts)
    blocks = {}
    for col in range(4):
        for ptype, frame, usize in zstd_pages(path, col):
            assert pa.decompress(frame, usize, codec="zstd").size == usize
            blocks.setdefault((col, ptype), []).append(raw_blocks(frame, usize))
    # PLAIN pages after the dictionary-id page: zstd saves a few % (the length prefixes), so
    # pages between probes go raw
    noise = blocks[(1, 0)][1:]
    assert sum(b is not None and b >= 2 for b in noise) >= 5, noise
    assert blocks[(3, 0)] == [1] * 10 and blocks[(3, 2)] == [1], blocks
    assert blocks[(0, 0)][-5:] == [None] * 5, blocks[(0, 0)]


# ---- statistics and Iceberg metrics ----------------------------------------------------------

def iceberg_schema(schema: list):
    from pyiceberg import types as T
    from pyiceberg.schema import Schema

    def conv(f):
        t = f["type"]
        simple = {"boolean": T.BooleanType(), "int": T.IntegerType(), "long": T.LongType(),
                  "float": T.FloatType(), "double": T.DoubleType(), "date": T.DateType(),
                  "time": T.TimeType(), "timestamp": T.TimestampType(),
                  "timestamptz": T.TimestamptzType(), "string": T.StringType(),
                  "uuid": T.UUIDType(), "binary": T.BinaryType()}
        if t in simple:
            return simple[t]
        if t == "decimal":
            return T.DecimalType(f["precision"], f["scale"])
        if t == "fixed":
            return T.FixedType(f["length"])
        if t == "list":
            e = f["children"][0]
            return T.ListType(e["id"], conv(e), e["required"])
        if t == "map":
            k, v = f["children"]
            return T.MapType(k["id"], conv(k), v["id"], conv(v), v["required"])
        return T.StructType(*[nested(c) for c in f["children"]])

    def nested(f):
        return T.NestedField(f["id"], f["name"], conv(f), required=f["required"])

    return Schema(*[nested(f) for f in schema])


def pyiceberg_metrics(path: Path, schema: list) -> dict:
    from pyiceberg.io.pyarrow import (compute_statistics_plan,
                                      data_file_statistics_from_parquet_metadata,
                                      parquet_path_to_id_mapping)

    s = iceberg_schema(schema)
    stats = data_file_statistics_from_parquet_metadata(
        pq.ParquetFile(path).metadata, compute_statistics_plan(s, {}),
        parquet_path_to_id_mapping(s))
    return stats.to_serialized_dict()


def check_metrics(path: Path, schema: list, metrics: dict, nan_counts: dict | None = None):
    want = pyiceberg_metrics(path, schema)
    md = pq.ParquetFile(path).metadata
    assert metrics["record_count"] == want["record_count"] == md.num_rows
    assert metrics["file_size"] == path.stat().st_size
    assert metrics["split_offsets"] == want["split_offsets"]
    got = {f["id"]: f for f in metrics["fields"]}
    assert {fid: f["size"] for fid, f in got.items()} == want["column_sizes"]
    assert {fid: f["values"] for fid, f in got.items()} == want["value_counts"]
    assert {fid: f["nulls"] for fid, f in got.items()} == want["null_value_counts"]
    # pyiceberg computes bounds for top-level columns only; Iceberg Java (and firn) also for
    # leaves inside structs, never inside lists/maps (checked in test_nested_lists_structs_maps)
    top = {f["id"] for f in schema if "children" not in f}
    lower = {fid: bytes.fromhex(f["lower"]) for fid, f in got.items() if "lower" in f and fid in top}
    upper = {fid: bytes.fromhex(f["upper"]) for fid, f in got.items() if "upper" in f and fid in top}
    assert lower == want["lower_bounds"]
    assert upper.keys() == want["upper_bounds"].keys()
    for fid, theirs in want["upper_bounds"].items():
        # Iceberg Java's truncateStringMax/truncateBinaryMax drop what follows the incremented
        # code point/byte; pyiceberg keeps it. Both are upper bounds; ours is the tighter one.
        ours = upper[fid]
        assert ours == theirs or (ours < theirs and ours[:-1] == theirs[:len(ours) - 1]), fid
    if nan_counts is not None:
        assert {fid: f["nans"] for fid, f in got.items() if "nans" in f} == nan_counts


def test_statistics_match_pyarrow(tool, tmp_path):
    path, _ = write(tool, tmp_path, EDGE_SCHEMA, EDGE_ROWS)
    rg = pq.ParquetFile(path).metadata.row_group(0)
    st = {rg.column(c).path_in_schema: rg.column(c).statistics for c in range(rg.num_columns)}
    assert (st["i"].min, st["i"].max, st["i"].null_count) == (-2**31, 2**31 - 1, 1)
    assert (st["l"].min, st["l"].max) == (-2**63, 2**63 - 1)
    assert (st["f"].min, st["f"].max) == (-math.inf, 3.4028234663852886e38)
    assert (st["d"].min, st["d"].max) == (-0.0, math.inf)
    assert math.copysign(1, st["d"].min) == -1.0
    assert (st["dec38"].min, st["dec38"].max) == (Decimal("-" + MAXDEC38).scaleb(-10, WIDE),
                                                  Decimal(MAXDEC38).scaleb(-10, WIDE))
    assert (st["dt"].min, st["dt"].max) == (dt.date(1, 1, 1), dt.date(9999, 12, 31))
    assert st["s"].min == "" and st["s"].max == "\U0010ffff\U0010ffff" * 10
    assert st["bin"].min == b"" and st["bin"].max == bytes.fromhex("ff" * 18)
    assert st["b"].min is False and st["b"].max is True


def test_iceberg_metrics_match_pyiceberg(tool, tmp_path):
    path, metrics = write(tool, tmp_path, EDGE_SCHEMA, EDGE_ROWS)
    check_metrics(path, EDGE_SCHEMA, metrics, nan_counts={4: 1, 5: 1})
    path, metrics = write(tool, tmp_path, NESTED_SCHEMA, NESTED_ROWS, name="nested")
    check_metrics(path, NESTED_SCHEMA, metrics, nan_counts={5: 1})
    by_id = {f["id"]: f for f in metrics["fields"]}
    assert by_id[5]["nans"] == 1


def test_string_bound_truncation(tool, tmp_path):
    schema = [F(1, "s", "string"), F(2, "b", "binary")]
    rows = [["a" * 16 + "b", "00" * 20], ["ab" + "\U0010ffff" * 20, "11" + "ff" * 30]]
    path, metrics = write(tool, tmp_path, schema, rows)
    f = {x["id"]: x for x in metrics["fields"]}
    assert bytes.fromhex(f[1]["lower"]) == b"a" * 16
    assert bytes.fromhex(f[1]["upper"]) == b"ac"  # U+10FFFF cannot grow: increment 'b'
    assert bytes.fromhex(f[2]["lower"]) == bytes(16)
    assert bytes.fromhex(f[2]["upper"]) == bytes([0x12])
    check_metrics(path, schema, metrics)


# ---- property test: random schemas and data ----------------------------------------------------

PRIMS = ["boolean", "int", "long", "float", "double", "decimal", "date", "time", "timestamp",
         "timestamptz", "string", "uuid", "fixed", "binary"]


def rand_field(rng, ids, depth, name):
    fid = next(ids)
    req = rng.random() < 0.3
    kinds = PRIMS + (["list", "struct", "map"] if depth < 3 else [])
    t = rng.choice(kinds)
    f = F(fid, name, t, required=req)
    if t == "decimal":
        p = rng.randint(1, 38)
        f.update(precision=p, scale=rng.randint(0, p))
    elif t == "fixed":
        f["length"] = rng.randint(1, 20)
    elif t == "list":
        f["children"] = [rand_field(rng, ids, depth + 1, "element")]
    elif t == "map":
        k = rand_field(rng, ids, 3, "key")
        k["required"] = True
        f["children"] = [k, rand_field(rng, ids, depth + 1, "value")]
    elif t == "struct":
        f["children"] = [rand_field(rng, ids, depth + 1, f"c{i}") for i in range(rng.randint(1, 3))]
    return f


def rand_value(rng, f):
    if not f["required"] and rng.random() < 0.2:
        return None
    t = f["type"]
    if t == "boolean":
        return rng.random() < 0.5
    if t in ("int", "date"):
        return rng.choice([0, -1, 2**31 - 1, -2**31, rng.randint(-100000, 100000)]) if t == "int" \
            else rng.randint(-700000, 2900000)
    if t in ("long", "timestamp", "timestamptz"):
        return rng.choice([0, rng.randint(-2**62, 2**62)]) if t == "long" \
            else rng.randint(-62135596800000000, 253402300799999999)
    if t == "time":
        return rng.randint(0, 86399999999)
    if t in ("float", "double"):
        r = rng.random()
        if r < 0.05:
            return rng.choice(["NaN", "Infinity", "-Infinity"])
        x = rng.uniform(-1e6, 1e6)
        return float(pa.scalar(x, pa.float32()).as_py()) if t == "float" else x
    if t == "decimal":
        p = f["precision"]
        return str(rng.randint(-(10**p - 1), 10**p - 1))
    if t == "string":
        alphabet = "abcxyzé雪🧊 "
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
    if t == "uuid":
        return bytes(rng.randrange(256) for _ in range(16)).hex()
    if t == "fixed":
        return bytes(rng.randrange(256) for _ in range(f["length"])).hex()
    if t == "binary":
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 24))).hex()
    if t == "list":
        return [rand_value(rng, f["children"][0]) for _ in range(rng.randint(0, 4))]
    if t == "map":
        keys = {json.dumps(rand_value(rng, f["children"][0])) for _ in range(rng.randint(0, 3))}
        return [[json.loads(k), rand_value(rng, f["children"][1])] for k in sorted(keys)]
    return [rand_value(rng, c) for c in f["children"]]


@pytest.mark.parametrize("seed", range(12))
def test_property_random_schemas(tool, tmp_path, seed):
    rng = random.Random(seed)
    ids = iter(range(1, 10000))
    schema = [rand_field(rng, ids, 0, f"col{i}") for i in range(rng.randint(1, 6))]
    rows = [[rand_value(rng, f) for f in schema] for _ in range(rng.choice([1, 50, 700]))]
    opts = rng.choice([{}, {"page_bytes": 512, "page_rows": 64, "dict_bytes": 256,
                            "row_group_bytes": 4096, "codec": rng.choice(["snappy", "gzip"])}])
    path, metrics = write(tool, tmp_path, schema, rows, opts)
    want = [[canon_expected(f, v) for f, v in zip(schema, row)] for row in rows]
    got = read_pyarrow(path, schema)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"seed {seed} row {i}: {g} != {w}\nschema {schema}"
    assert len(got) == len(want)
    check_metrics(path, schema, metrics)
