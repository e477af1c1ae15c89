# SPDX-License-Identifier: Apache-2.0
"""firn's Parquet column reader on files other writers made: pyarrow with varied options
(dictionary on/off, data page v1/v2, every codec, BYTE_STREAM_SPLIT, DELTA_* encodings, RLE
booleans, decimals as FIXED_LEN_BYTE_ARRAY or INT32/INT64, field ids or none) and DuckDB
(parquet v1 and v2 writers, field ids or none). Every value firn reads (tests/tools/pq_read_tool,
JSON lines) is compared with what pyarrow reads from the same file; position-delete files read
back exactly; nested columns and unknown codecs fail with a clear error."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import subprocess
from decimal import Context, Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

N = 3000

# (name, Iceberg type spec, arrow type, nullable)
COLUMNS = [
    ("key", {"type": "long"}, pa.int64(), False),
    ("b", {"type": "boolean"}, pa.bool_(), True),
    ("i", {"type": "int"}, pa.int32(), True),
    ("l", {"type": "long"}, pa.int64(), True),
    ("f", {"type": "float"}, pa.float32(), True),
    ("d", {"type": "double"}, pa.float64(), True),
    ("dec9", {"type": "decimal", "precision": 9, "scale": 2}, pa.decimal128(9, 2), True),
    ("dec18", {"type": "decimal", "precision": 18, "scale": 4}, pa.decimal128(18, 4), True),
    ("dec38", {"type": "decimal", "precision": 38, "scale": 10}, pa.decimal128(38, 10), True),
    ("dt", {"type": "date"}, pa.date32(), True),
    ("tm", {"type": "time"}, pa.time64("us"), True),
    ("ts", {"type": "timestamp"}, pa.timestamp("us"), True),
    ("tz", {"type": "timestamptz"}, pa.timestamp("us", tz="UTC"), True),
    ("tsn", {"type": "timestamp_ns"}, pa.timestamp("ns"), True),
    ("s", {"type": "string"}, pa.string(), True),
    ("bin", {"type": "binary"}, pa.binary(), True),
    ("u", {"type": "uuid"}, pa.binary(16), True),
    ("fx", {"type": "fixed", "length": 5}, pa.binary(5), True),
]
FIELD_ID = {name: 10 + i for i, (name, *_rest) in enumerate(COLUMNS)}
WIDE = Context(prec=100)
TIME_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
WANT_UNIT = {"time": "us", "timestamp": "us", "timestamptz": "us", "timestamp_ns": "ns",
             "timestamptz_ns": "ns"}


@pytest.fixture(scope="session")
def tool(build_dir: Path) -> Path:
    path = build_dir / "tools" / "pq_read_tool"
    if not path.exists():
        pytest.fail(f"{path} missing: build the tests/tools targets", pytrace=False)
    return path


def spec(names=None, ids=True) -> list[dict]:
    out = []
    for name, typ, _arrow, nullable in COLUMNS:
        if names is not None and name not in names:
            continue
        # without ids in the file, the reader matches names; give it ids that match nothing
        out.append(dict(typ, name=name, id=FIELD_ID[name] if ids else 5000 + len(out),
                        required=not nullable))
    return out


def run_tool(tool: Path, path: Path, fields: list[dict], *flags: str) -> list[list]:
    proc = subprocess.run([str(tool), str(path), json.dumps(fields), *flags],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if not line.startswith("{")]


def run_tool_fail(tool: Path, path: Path, fields: list[dict]) -> str:
    proc = subprocess.run([str(tool), str(path), json.dumps(fields)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stdout[:500])
    return proc.stderr


# ---- data -----------------------------------------------------------------------------------

def make_values(rng: random.Random, name: str, n: int) -> list:
    """Edge values first, low cardinality in the first half (dictionary), unique after."""
    def pick(i, gen):
        return gen(rng.randrange(13) if i < n // 2 else i)

    edges = {
        "b": [True, False],
        "i": [-2**31, 2**31 - 1, 0, -1],
        "l": [-2**63, 2**63 - 1, 0, -1],
        "key": [],
        "f": [float("nan"), float("inf"), float("-inf"), -0.0, 3.4028234663852886e38],
        "d": [float("nan"), float("inf"), -0.0, 5e-324, 1.7976931348623157e308],
        "dec9": [Decimal("9999999.99"), Decimal("-9999999.99"), Decimal("0.01")],
        "dec18": [Decimal("99999999999999.9999"), Decimal("-99999999999999.9999")],
        "dec38": [Decimal("9" * 28 + "." + "9" * 10), Decimal("-" + "9" * 28 + "." + "9" * 10)],
        "dt": [dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1969, 12, 31)],
        "tm": [dt.time(0, 0), dt.time(23, 59, 59, 999999)],
        "ts": [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)],
        "tz": [dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.timezone.utc)],
        "tsn": [-2**63 + 1, 2**63 - 1, -1],
        "s": ["", "é漢字🙂", "x" * 300],
        "bin": [b"", b"\x00\xff" * 100],
        "u": [b"\x00" * 16, b"\xff" * 16],
        "fx": [b"\x00" * 5, b"\xff" * 5],
    }[name]
    gens = {
        "key": lambda k: k,
        "b": lambda k: k % 3 == 0,
        "i": lambda k: (k * 2654435761) % 2**32 - 2**31,
        "l": lambda k: (k * 0x9E3779B97F4A7C15) % 2**64 - 2**63,
        "f": lambda k: float(k) * 1.25 - 7.5,
        "d": lambda k: k / 7.0 - 100.0,
        "dec9": lambda k: Decimal((k * 7919) % 10**9 - 5 * 10**8).scaleb(-2),
        "dec18": lambda k: Decimal((k * 104729) % 10**18 - 5 * 10**17).scaleb(-4),
        "dec38": lambda k: Decimal((k * 0x9E3779B97F4A7C15) % 10**38 - 5 * 10**37).scaleb(-10),
        "dt": lambda k: dt.date(1970, 1, 1) + dt.timedelta(days=k * 37 % 100000 - 50000),
        "tm": lambda k: (k * 1_000_003) % 86_400_000_000,
        "ts": lambda k: (k * 1_000_000_007) - 10**15,
        "tz": lambda k: (k * 999_999_937) + 10**15,
        "tsn": lambda k: (k * 1_000_000_000_039) - 10**18,
        "s": lambda k: f"value-{k:08d}-" + "abc"[k % 3] * (k % 11),
        "bin": lambda k: k.to_bytes(8, "little")[: k % 9],
        "u": lambda k: (k * 0x9E3779B97F4A7C15 % 2**128).to_bytes(16, "big"),
        "fx": lambda k: (k % 2**40).to_bytes(5, "big"),
    }
    vals = [pick(i, gens[name]) for i in range(n)]
    vals[: len(edges)] = edges
    if name == "key":
        return list(range(n))
    for i in range(len(edges), n, 7):
        vals[i] = None
    return vals


def make_table(seed: int = 1, with_ids: bool = True, n: int = N) -> pa.Table:
    rng = random.Random(seed)
    fields, arrays = [], []
    for name, _typ, arrow, nullable in COLUMNS:
        meta = {b"PARQUET:field_id": str(FIELD_ID[name]).encode()} if with_ids else None
        fields.append(pa.field(name, arrow, nullable=nullable, metadata=meta))
        arrays.append(pa.array(make_values(rng, name, n), type=arrow))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


# ---- expected values: pyarrow's reading of the same file, in the tool's output form ---------

def canon_column(col: pa.ChunkedArray, field: dict) -> list:
    t = field["type"]
    if t == "date":
        return col.cast(pa.int32()).to_pylist()
    if t in WANT_UNIT:
        mult = TIME_UNIT[col.type.unit] // TIME_UNIT[WANT_UNIT[t]]
        return [None if v is None else v * mult for v in col.cast(pa.int64()).to_pylist()]
    vals = col.to_pylist()
    if t in ("float", "double"):
        return [None if v is None else "NaN" if math.isnan(v) else
                "Infinity" if v == math.inf else "-Infinity" if v == -math.inf else v
                for v in vals]
    if t == "decimal":
        return [None if v is None else str(int(v.scaleb(field["scale"], context=WIDE))) for v in vals]
    if t in ("binary", "uuid", "fixed"):
        return [None if v is None else (v.bytes if hasattr(v, "bytes") else bytes(v)).hex()
                for v in vals]
    return vals


def expected(path: Path, fields: list[dict], fallbacks: list | None = None) -> list[list]:
    """pyarrow's values; a column pyarrow cannot decode (it rejects some DELTA_BINARY_PACKED
    pages of DuckDB's v2 writer) is taken from DuckDB's own reader and named in fallbacks."""
    cols = []
    for f in fields:
        try:
            col = pq.read_table(path, columns=[f["name"]]).column(0)
        except OSError:
            if fallbacks is None:
                raise
            import duckdb

            con = duckdb.connect()
            col = con.execute(f"SELECT \"{f['name']}\" FROM read_parquet('{path}')").arrow()
            col = col.column(0) if hasattr(col, "column") else col.read_all().column(0)
            con.close()
            fallbacks.append(f["name"])
        cols.append(canon_column(col, f))
    return [list(r) for r in zip(*cols)]


def same(got: list, want: list) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            # -0.0 == 0.0 in Python: compare the sign too
            raise AssertionError(f"row {i}: firn {g!r} != pyarrow {w!r}")
        for a, b in zip(g, w):
            if isinstance(a, float) and isinstance(b, float):
                assert math.copysign(1, a) == math.copysign(1, b), f"row {i}: sign of zero"


def check(tool: Path, path: Path, fields: list[dict], callback: bool = False,
          fallbacks: list | None = None) -> list[list]:
    got = run_tool(tool, path, fields, *(["--callback"] if callback else []))
    same(got, expected(path, fields, fallbacks))
    return got


def encodings(path: Path) -> set[str]:
    md = pq.ParquetFile(path).metadata
    out = set()
    for g in range(md.num_row_groups):
        for c in range(md.num_columns):
            out.update(md.row_group(g).column(c).encodings)
    return out


# ---- pyarrow -----------------------------------------------------------------------------

PYARROW_CASES = {
    "default": {},
    "plain_v1": dict(use_dictionary=False),
    "dict_v2": dict(data_page_version="2.0"),
    "plain_v2": dict(use_dictionary=False, data_page_version="2.0"),
    "snappy": dict(compression="snappy"),
    "gzip_v2": dict(compression="gzip", data_page_version="2.0"),
    "zstd": dict(compression="zstd", compression_level=5),
    "none_v2": dict(compression="none", data_page_version="2.0"),
    "lz4": dict(compression="lz4"),
    "decimal_as_int": dict(store_decimal_as_integer=True),
    "decimal_as_int_plain_v2": dict(store_decimal_as_integer=True, use_dictionary=False,
                                    data_page_version="2.0"),
    "byte_stream_split": dict(use_dictionary=False,
                              use_byte_stream_split=["f", "d", "i", "l", "dt", "ts", "fx", "u"]),
    "byte_stream_split_all": dict(
        use_dictionary=False, data_page_version="2.0",
        column_encoding={"f": "BYTE_STREAM_SPLIT", "d": "BYTE_STREAM_SPLIT",
                         "i": "BYTE_STREAM_SPLIT", "l": "BYTE_STREAM_SPLIT",
                         "fx": "BYTE_STREAM_SPLIT", "u": "BYTE_STREAM_SPLIT",
                         "dec38": "BYTE_STREAM_SPLIT"}),
    "delta": dict(
        use_dictionary=False,
        column_encoding={"key": "DELTA_BINARY_PACKED", "i": "DELTA_BINARY_PACKED",
                         "l": "DELTA_BINARY_PACKED", "dt": "DELTA_BINARY_PACKED",
                         "ts": "DELTA_BINARY_PACKED", "tsn": "DELTA_BINARY_PACKED",
                         "s": "DELTA_BYTE_ARRAY", "bin": "DELTA_LENGTH_BYTE_ARRAY",
                         "fx": "DELTA_BYTE_ARRAY", "u": "DELTA_BYTE_ARRAY",
                         "dec38": "DELTA_BYTE_ARRAY", "b": "RLE"}),
    "delta_v2_zstd": dict(
        use_dictionary=False, data_page_version="2.0", compression="zstd",
        store_decimal_as_integer=True,
        column_encoding={"key": "DELTA_BINARY_PACKED", "i": "DELTA_BINARY_PACKED",
                         "l": "DELTA_BINARY_PACKED", "dec9": "DELTA_BINARY_PACKED",
                         "dec18": "DELTA_BINARY_PACKED", "tm": "DELTA_BINARY_PACKED",
                         "s": "DELTA_LENGTH_BYTE_ARRAY", "bin": "DELTA_BYTE_ARRAY",
                         "b": "RLE"}),
    "small_pages": dict(data_page_size=512, row_group_size=700, write_batch_size=64),
    "small_pages_v2_plain": dict(data_page_size=700, row_group_size=1000,
                                 data_page_version="2.0", use_dictionary=False,
                                 write_batch_size=50),
    "dict_limit_fallback": dict(dictionary_pagesize_limit=2048, data_page_size=4096),
}


@pytest.mark.parametrize("case", sorted(PYARROW_CASES))
def test_pyarrow_files(tool: Path, tmp_path: Path, case: str) -> None:
    path = tmp_path / f"{case}.parquet"
    pq.write_table(make_table(seed=len(case)), path, **PYARROW_CASES[case])
    check(tool, path, spec(), callback=len(case) % 2 == 1)


def test_pyarrow_cases_hit_their_encodings(tmp_path: Path) -> None:
    """The matrix really exercises what it claims (guards against pyarrow silently ignoring an
    option)."""
    want = {"delta": {"DELTA_BINARY_PACKED", "DELTA_BYTE_ARRAY", "DELTA_LENGTH_BYTE_ARRAY"},
            "byte_stream_split_all": {"BYTE_STREAM_SPLIT"},
            "dict_limit_fallback": {"RLE_DICTIONARY", "PLAIN"}}
    for case, encs in want.items():
        path = tmp_path / f"{case}.parquet"
        pq.write_table(make_table(), path, **PYARROW_CASES[case])
        assert encs <= encodings(path), (case, encodings(path))
    path = tmp_path / "v2.parquet"
    pq.write_table(make_table(), path, data_page_version="2.0")
    # pyarrow's own reader has no page-type view; the footer shows where pages v2 were asked
    assert pq.ParquetFile(path).metadata.num_row_groups >= 1
    path = tmp_path / "dec.parquet"
    pq.write_table(make_table(), path, store_decimal_as_integer=True)
    types = {c.name: c.physical_type for c in pq.ParquetFile(path).schema}
    assert types["dec9"] == "INT32" and types["dec18"] == "INT64"
    assert types["dec38"] == "FIXED_LEN_BYTE_ARRAY"
    pq.write_table(make_table(), path)
    types = {c.name: c.physical_type for c in pq.ParquetFile(path).schema}
    assert types["dec9"] == "FIXED_LEN_BYTE_ARRAY"  # pyarrow's default for every precision


def test_pyarrow_without_field_ids_matches_names(tool: Path, tmp_path: Path) -> None:
    path = tmp_path / "noids.parquet"
    pq.write_table(make_table(with_ids=False), path, row_group_size=1000)
    assert "field_id=-1" in str(pq.ParquetFile(path).schema)
    check(tool, path, spec(ids=False))


def test_field_ids_win_over_names(tool: Path, tmp_path: Path) -> None:
    """With field ids in the file, a renamed field still finds its column, and a field whose
    name exists but whose id does not reads as nulls."""
    path = tmp_path / "ids.parquet"
    pq.write_table(make_table(), path)
    fields = [dict(type="long", name="renamed_key", id=FIELD_ID["key"], required=True),
              dict(type="string", name="s", id=FIELD_ID["s"] + 1000, required=False),
              dict(type="int", name="i", id=FIELD_ID["i"], required=False)]
    got = run_tool(tool, path, fields)
    table = pq.read_table(path)
    assert [r[0] for r in got] == table.column("key").to_pylist()
    assert all(r[1] is None for r in got)
    assert [r[2] for r in got] == table.column("i").to_pylist()


def test_promotions(tool: Path, tmp_path: Path) -> None:
    """int -> long, float -> double, decimal(9,2) -> decimal(20,2), timestamp us -> ns."""
    path = tmp_path / "promo.parquet"
    # past the edge rows: year 1 does not fit in nanoseconds
    pq.write_table(make_table().slice(10), path, store_decimal_as_integer=True)
    fields = [dict(type="long", name="i", id=FIELD_ID["i"]),
              dict(type="double", name="f", id=FIELD_ID["f"]),
              dict(type="decimal", precision=20, scale=2, name="dec9", id=FIELD_ID["dec9"]),
              dict(type="decimal", precision=38, scale=4, name="dec18", id=FIELD_ID["dec18"]),
              dict(type="timestamp_ns", name="ts", id=FIELD_ID["ts"])]
    got = run_tool(tool, path, fields)
    table = pq.read_table(path)
    assert [r[0] for r in got] == table.column("i").to_pylist()
    fl = table.column("f").to_pylist()
    assert [r[1] for r in got] == ["NaN" if v is not None and math.isnan(v) else
                                   "Infinity" if v == math.inf else
                                   "-Infinity" if v == -math.inf else v for v in fl]
    assert [r[2] for r in got] == canon_column(table.column("dec9"), fields[2])
    assert [r[3] for r in got] == canon_column(table.column("dec18"), fields[3])
    assert [r[4] for r in got] == canon_column(table.column("ts"), fields[4])


def test_millisecond_timestamps_and_time32(tool: Path, tmp_path: Path) -> None:
    table = pa.table({
        "ts": pa.array([0, -1, 1_700_000_000_123, None], pa.timestamp("ms")),
        "tm": pa.array([0, 86_399_999, None, 5], pa.time32("ms")),
    })
    path = tmp_path / "ms.parquet"
    pq.write_table(table, path, coerce_timestamps=None, version="2.6")
    got = run_tool(tool, path, [dict(type="timestamp", name="ts", id=1),
                                dict(type="time", name="tm", id=2)])
    assert got == [[0, 0], [-1000, 86_399_999_000], [1_700_000_000_123_000, None], [None, 5000]]


def test_uint32_reads_as_long_not_int(tool: Path, tmp_path: Path) -> None:
    path = tmp_path / "u32.parquet"
    pq.write_table(pa.table({"u": pa.array([0, 2**32 - 1, None], pa.uint32())}), path)
    assert run_tool(tool, path, [dict(type="long", name="u", id=1)]) == [[0], [2**32 - 1], [None]]
    err = run_tool_fail(tool, path, [dict(type="int", name="u", id=1)])
    assert "FIRN_ERR_SCHEMA" in err and '"u"' in err


def test_nanoseconds_do_not_narrow(tool: Path, tmp_path: Path) -> None:
    path = tmp_path / "ns.parquet"
    pq.write_table(make_table(), path)
    err = run_tool_fail(tool, path, [dict(type="timestamp", name="tsn", id=FIELD_ID["tsn"])])
    assert "FIRN_ERR_SCHEMA" in err and "tsn" in err


def test_nested_column_is_unsupported(tool: Path, tmp_path: Path) -> None:
    elem = pa.field("element", pa.int32(), metadata={b"PARQUET:field_id": b"8"})
    field = pa.field("tags", pa.list_(elem), metadata={b"PARQUET:field_id": b"7"})
    path = tmp_path / "nested.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array([[1, 2], None, []], pa.list_(elem))],
                                        schema=pa.schema([field])), path)
    assert "field_id=8" in str(pq.ParquetFile(path).schema)
    err = run_tool_fail(tool, path, [dict(type="int", name="tags", id=7)])
    assert "FIRN_ERR_UNSUPPORTED" in err and '"tags"' in err
    # the leaf inside the list, selected by its own id
    err = run_tool_fail(tool, path, [dict(type="int", name="x", id=8)])
    assert "FIRN_ERR_UNSUPPORTED" in err and "repeated" in err and '"element"' in err


def test_struct_leaf_by_id(tool: Path, tmp_path: Path) -> None:
    """A primitive inside a (non-repeated) struct is flat: selectable by field id."""
    inner = pa.field("x", pa.int64(), metadata={b"PARQUET:field_id": b"2"})
    outer = pa.field("st", pa.struct([inner]), metadata={b"PARQUET:field_id": b"1"})
    arr = pa.array([{"x": 1}, None, {"x": None}, {"x": -5}], pa.struct([inner]))
    path = tmp_path / "struct.parquet"
    pq.write_table(pa.Table.from_arrays([arr], schema=pa.schema([outer])), path)
    assert run_tool(tool, path, [dict(type="long", name="x", id=2)]) == [[1], [None], [None],
                                                                         [-5]]


def test_brotli_is_unsupported(tool: Path, tmp_path: Path) -> None:
    path = tmp_path / "brotli.parquet"
    try:
        pq.write_table(make_table(n=50), path, compression="brotli")
    except Exception as e:  # pragma: no cover - pyarrow built without brotli
        pytest.skip(f"pyarrow cannot write brotli: {e}")
    err = run_tool_fail(tool, path, spec(["key"]))
    assert "FIRN_ERR_UNSUPPORTED" in err and "BROTLI" in err


def test_empty_file_and_all_null_pages(tool: Path, tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    pq.write_table(make_table().slice(0, 0), path)
    assert run_tool(tool, path, spec()) == []
    table = pa.table({"s": pa.array([None] * 5000, pa.string()),
                      "l": pa.array([None] * 5000, pa.int64())})
    for version in ("1.0", "2.0"):
        path = tmp_path / f"nulls{version}.parquet"
        pq.write_table(table, path, data_page_version=version, data_page_size=256)
        got = run_tool(tool, path, [dict(type="string", name="s", id=1),
                                    dict(type="long", name="l", id=2)])
        assert got == [[None, None]] * 5000


# ---- position deletes ----------------------------------------------------------------------

def pos_delete_table(n: int) -> pa.Table:
    rng = random.Random(5)
    files = sorted(f"s3://bucket/db/t/data/{i:05d}-{rng.getrandbits(64):016x}.parquet"
                   for i in range(7))
    rows = sorted((files[rng.randrange(len(files))], rng.randrange(2**40)) for _ in range(n))
    schema = pa.schema([
        pa.field("file_path", pa.string(), nullable=False,
                 metadata={b"PARQUET:field_id": b"2147483546"}),
        pa.field("pos", pa.int64(), nullable=False,
                 metadata={b"PARQUET:field_id": b"2147483545"}),
    ])
    return pa.Table.from_arrays([pa.array([r[0] for r in rows]), pa.array([r[1] for r in rows])],
                                schema=schema)


POS_FIELDS = [dict(type="string", name="file_path", id=2147483546, required=True),
              dict(type="long", name="pos", id=2147483545, required=True)]


@pytest.mark.parametrize("opts", [{}, dict(data_page_version="2.0", compression="snappy"),
                                  dict(use_dictionary=False, row_group_size=3000)])
def test_position_delete_files(tool: Path, tmp_path: Path, opts: dict) -> None:
    table = pos_delete_table(10000)
    path = tmp_path / "pos.parquet"
    pq.write_table(table, path, **opts)
    want = [[p, q] for p, q in zip(table.column(0).to_pylist(), table.column(1).to_pylist())]
    assert run_tool(tool, path, POS_FIELDS) == want
    assert run_tool(tool, path, POS_FIELDS, "--callback") == want


def test_position_delete_batches_give_first_rows(tool: Path, tmp_path: Path) -> None:
    path = tmp_path / "pos.parquet"
    pq.write_table(pos_delete_table(2500), path, row_group_size=1000)
    proc = subprocess.run([str(tool), str(path), json.dumps(POS_FIELDS), "--batches"],
                          capture_output=True, text=True, timeout=60, check=True)
    heads = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert heads == [{"row_group": 0, "first_row": 0, "rows": 1000},
                     {"row_group": 1, "first_row": 1000, "rows": 1000},
                     {"row_group": 2, "first_row": 2000, "rows": 500}]


# ---- DuckDB ----------------------------------------------------------------------------------

DUCK_SELECT = """
SELECT
  i::BIGINT AS key,
  CASE WHEN i % 7 = 3 THEN NULL ELSE i % 3 = 0 END AS b,
  CASE WHEN i % 7 = 4 THEN NULL ELSE ((i * 2654435761) % 4294967296 - 2147483648)::INTEGER END
    AS i,
  CASE WHEN i % 7 = 5 THEN NULL ELSE (hash(i) // 2)::BIGINT * (CASE WHEN i % 2 = 0 THEN 1 ELSE -1
    END) END AS l,
  CASE WHEN i % 7 = 6 THEN NULL ELSE (i * 1.25 - 7.5)::REAL END AS f,
  CASE WHEN i % 11 = 0 THEN NULL ELSE i / 7.0 - 100.0 END::DOUBLE AS d,
  CASE WHEN i % 7 = 1 THEN NULL ELSE ((i * 7919) % 1000000000 - 500000000) / 100 END
    ::DECIMAL(9,2) AS dec9,
  (((i * 104729) % 1000000000000000000 - 500000000000000000)::HUGEINT / 10000)::DECIMAL(18,4)
    AS dec18,
  CASE WHEN i % 5 = 0 THEN NULL ELSE (i::HUGEINT * 1234567890123456789 - 999999999999)
    ::DECIMAL(38,0)::DECIMAL(38,10) / 10 END::DECIMAL(38,10) AS dec38,
  DATE '1970-01-01' + (i * 37 % 100000 - 50000)::INTEGER AS dt,
  CASE WHEN i % 7 = 2 THEN NULL ELSE TIME '00:00:00' + to_microseconds((i * 1000003) % 86400000000)
    END AS tm,
  make_timestamp((i * 1000000007 - 1000000000000000)::BIGINT) AS ts,
  CASE WHEN i % 13 = 0 THEN NULL ELSE make_timestamp((i * 999999937 + 1000000000000000)::BIGINT)
    ::TIMESTAMPTZ END AS tz,
  make_timestamp_ns((i * 1000000000039 - 1000000000000000000)::BIGINT) AS tsn,
  CASE WHEN i % 7 = 0 THEN NULL ELSE 'value-' || lpad(i::VARCHAR, 8, '0') || '-' ||
    repeat('abc'[i % 3 + 1], i % 11) END AS s,
  CASE WHEN i % 9 = 0 THEN NULL ELSE encode('b' || (i % 100)::VARCHAR) END AS bin,
  CASE WHEN i % 7 = 3 THEN NULL ELSE uuid_extract... END AS u
FROM range(0, {n}) t(i)
"""


def duck_select(n: int) -> str:
    # uuids made deterministic from the row number
    return DUCK_SELECT.replace(
        "uuid_extract... END AS u",
        "(lpad(printf('%x', i * 7919), 8, '0') || '-0000-4000-8000-' || "
        "lpad(printf('%x', i), 12, '0'))::UUID END AS u").format(n=n)


DUCK_FIELDS = [f for f in spec() if f["name"] != "fx"]


@pytest.mark.parametrize("opts", [
    "FORMAT parquet",
    "FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 2048",
    "FORMAT parquet, COMPRESSION snappy, PARQUET_VERSION v2",
    "FORMAT parquet, COMPRESSION uncompressed, PARQUET_VERSION v2, ROW_GROUP_SIZE 1000",
    "FORMAT parquet, COMPRESSION gzip, FIELD_IDS 'auto'",
])
def test_duckdb_files(tool: Path, tmp_path: Path, opts: str) -> None:
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "duck.parquet"
    con = duckdb.connect()
    con.execute(f"COPY ({duck_select(6000)}) TO '{path}' ({opts})")
    con.close()
    ids = "FIELD_IDS" in opts
    fields = [f if ids else dict(f, id=9000 + k) for k, f in enumerate(DUCK_FIELDS)]
    if ids:
        # DuckDB 'auto' numbers the columns from 0 in order
        for k, f in enumerate(fields):
            f["id"] = k
    fallbacks: list[str] = []
    check(tool, path, fields, callback="v2" in opts, fallbacks=fallbacks)
    assert len(fallbacks) <= 1, fallbacks  # pyarrow checks all but at most one column
    if "v2" in opts:
        encs = encodings(path)
        assert {"DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "BYTE_STREAM_SPLIT"} <= encs


def test_duckdb_position_deletes(tool: Path, tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "duckpos.parquet"
    con = duckdb.connect()
    con.execute(f"""COPY (SELECT 's3://b/t/data/' || lpad((i // 1000)::VARCHAR, 5, '0') ||
                    '.parquet' AS file_path, (i * 13 % 100000)::BIGINT AS pos
                    FROM range(0, 20000) t(i) ORDER BY 1, 2) TO '{path}'
                    (FORMAT parquet, FIELD_IDS {{file_path: 2147483546, pos: 2147483545}})""")
    con.close()
    check(tool, path, POS_FIELDS)
