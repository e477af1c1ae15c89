# SPDX-License-Identifier: Apache-2.0
"""Helpers for the engine tests (tests/interop/test_engine_*.py): write the source, destination
and streams files for a test database, run `firn` with a timeout (or start `firn sync --follow`
and stop it), read an Iceberg table back with pyiceberg and with DuckDB's iceberg_scan (metadata
location from the SQLite catalog), read the source table with psycopg, and turn both sides into
the same canonical values per docs/type-mapping.md so rows compare value by value.

Canonical values: ints and bools as they are; floats as repr() (so NaN == NaN and -0.0 != 0.0;
float columns rounded to binary32 first); decimals as str(Decimal) with the column's scale;
dates as days since 1970-01-01, times as microseconds since midnight, timestamps as
microseconds since 1970 (±infinity -> ±INT64_MAX, dates ±2147483647); intervals as
(months, days, microseconds); uuids as lower-case text; binary as bytes; lists as tuples.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import sqlite3
import struct
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterable, Sequence

INT64_MAX = 2**63 - 1
DATE_INF = 2147483647
META_COLUMNS = ("_firn_op", "_firn_lsn", "_firn_commit_ts", "_firn_ingest_ts")
NAMESPACE = "e2e"

# Session settings firn fixes on its own connections (docs/type-mapping.md): the source is read
# in the same text forms.
SOURCE_SESSION = ("SET DateStyle = 'ISO, YMD'; SET TimeZone = 'UTC'; "
                  "SET IntervalStyle = 'postgres'; SET extra_float_digits = 3; "
                  "SET bytea_output = 'hex'; SET lc_monetary = 'C'")


# ---------------------------------------------------------------------------------------------
# Configuration files and running firn

@dataclass
class FirnEnv:
    """One test's firn setup: the files and where the tables land."""

    firn_bin: Path
    root: Path
    dbname: str
    source: Path = field(init=False)
    destination: Path = field(init=False)
    streams: Path = field(init=False)
    state: Path = field(init=False)
    catalog_db: Path = field(init=False)
    warehouse: Path = field(init=False)

    def __post_init__(self):
        self.root.mkdir(parents=True, exist_ok=True)
        self.source = self.root / "source.json"
        self.destination = self.root / "destination.json"
        self.streams = self.root / "streams.json"
        self.state = self.root / "state.json"
        self.catalog_db = self.root / "catalog.db"
        self.warehouse = self.root / "warehouse"

    @property
    def sync_args(self) -> list[str]:
        return ["--source", str(self.source), "--destination", str(self.destination),
                "--streams", str(self.streams), "--state", str(self.state)]

    def write_source(self, pg, slot: str = "firn_e2e", publication: str = "firn_e2e",
                     **extra) -> dict:
        doc = {"type": "postgres", "host": pg.host, "port": pg.port, "database": self.dbname,
               "username": pg.user, "sslmode": "disable", "slot": slot,
               "publication": publication, "create_slot": True, "create_publication": True,
               "parallelism": 2, "default_mode": "full_refresh_cdc"}
        doc.update(extra)
        self.source.write_text(json.dumps(doc, indent=2))
        return doc

    def write_destination(self, interval_s: float = 1, **extra) -> dict:
        doc = {"catalog": {"type": "sql", "name": "firn", "uri": f"sqlite:///{self.catalog_db}",
                           "warehouse": f"file://{self.warehouse}"},
               "namespace": NAMESPACE,
               "commit": {"interval_seconds": interval_s}}
        doc.update(extra)
        self.destination.write_text(json.dumps(doc, indent=2))
        return doc

    def write_streams(self, tables: Iterable[str | tuple[str, dict]],
                      schema: str = "public") -> dict:
        items = []
        for t in tables:
            name, opts = (t, {}) if isinstance(t, str) else t
            item = {"stream_name": name, "sync_mode": "full_refresh_cdc"}
            item.update(opts)
            items.append(item)
        doc = {"selected_streams": {schema: items}}
        self.streams.write_text(json.dumps(doc, indent=2))
        return doc

    def setup(self, pg, tables, interval_s: float = 1, source: dict | None = None,
              destination: dict | None = None):
        self.write_source(pg, **(source or {}))
        self.write_destination(interval_s, **(destination or {}))
        self.write_streams(tables)

    def env(self, extra: dict | None = None) -> dict:
        env = dict(os.environ)
        env.pop("FIRN_LOG", None)
        env.pop("FIRN_TEST_CRASH", None)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        env.update(extra or {})
        return env

    def run(self, *args: str, timeout: float = 120, env: dict | None = None,
            check: bool = False) -> subprocess.CompletedProcess:
        """Runs `firn ARGS` to completion (killed after timeout seconds)."""
        proc = subprocess.run([str(self.firn_bin), *args], capture_output=True, text=True,
                              timeout=timeout, env=self.env(env))
        if check and proc.returncode != 0:
            raise AssertionError(f"firn {' '.join(args)} exited {proc.returncode}:\n"
                                 f"{proc.stderr[-4000:]}")
        return proc

    def sync(self, *extra: str, timeout: float = 120, env: dict | None = None,
             check: bool = True) -> subprocess.CompletedProcess:
        """A catch-up `firn sync`."""
        return self.run("sync", *self.sync_args, *extra, timeout=timeout, env=env, check=check)

    def start_follow(self, env: dict | None = None, log_path: Path | None = None,
                     *extra: str) -> subprocess.Popen:
        """Starts `firn sync --follow`; stderr goes to log_path (default root/follow.log)."""
        log = open(log_path or self.root / "follow.log", "ab")
        try:
            return subprocess.Popen([str(self.firn_bin), "sync", *self.sync_args, "--follow",
                                     *extra], stdout=log, stderr=log, env=self.env(env))
        finally:
            log.close()

    # ---- the Iceberg side ----------------------------------------------------------------

    def catalog(self):
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog("firn", uri=f"sqlite:///{self.catalog_db}",
                          warehouse=f"file://{self.warehouse}")

    def metadata_location(self, table: str, namespace: str = NAMESPACE) -> str:
        con = sqlite3.connect(self.catalog_db)
        try:
            row = con.execute("SELECT metadata_location FROM iceberg_tables WHERE "
                              "table_namespace = ? AND table_name = ?",
                              (namespace, table)).fetchone()
        finally:
            con.close()
        assert row, f"table {namespace}.{table} is not in the catalog"
        return row[0]

    def pyiceberg_arrow(self, table: str, namespace: str = NAMESPACE):
        return self.catalog().load_table(f"{namespace}.{table}").scan().to_arrow()

    def duckdb_arrow(self, duck, table: str, namespace: str = NAMESPACE):
        loc = self.metadata_location(table, namespace)
        result = duck.sql(f"SELECT * FROM iceberg_scan('{loc}')")
        return result.to_arrow_table()


def wait_for(predicate, timeout: float, interval: float = 0.1, what: str = "condition"):
    """Polls predicate() until it is true (returns its value) or fails after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@contextlib.contextmanager
def reaped(proc: subprocess.Popen):
    """Kills proc and waits for it on the way out if it still runs, so that a failing step of a
    test leaves no firn process behind."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def firn_errors(text: str) -> list[str]:
    """The error lines (`firn: ...`) of a firn log."""
    return [ln for ln in text.splitlines() if ln.startswith("firn:")]


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
    """Sends sig and waits for the exit (killed after timeout); returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"firn did not stop within {timeout}s of signal {sig}")


# ---------------------------------------------------------------------------------------------
# Reading a synced table back (shared by the test_engine_* files)

def compare_table(fe: FirnEnv, conn, duck, source_table: str, table: str | None = None,
                  key: int | None = 0, skip: Sequence[str] = (),
                  namespace: str = NAMESPACE) -> list[tuple]:
    """Asserts that Iceberg table namespace.table (default: named like the source table) equals
    source table `source_table` on the table's columns (metadata columns and `skip` left out),
    read by pyiceberg and by DuckDB, row by row, value by value, and by full-row hash; returns
    the canonical source rows."""
    table = table or source_table
    ice = fe.catalog().load_table(f"{namespace}.{table}")
    schema = ice.schema()
    names = [f.name for f in schema.fields if f.name not in META_COLUMNS and f.name not in skip]
    expected = sorted(source_rows(conn, source_table, schema, names), key=repr)
    for reader, arrow in (("pyiceberg", ice.scan().to_arrow()),
                          ("duckdb", fe.duckdb_arrow(duck, table, namespace))):
        want = pyiceberg_view(expected, schema, names) if reader == "pyiceberg" else expected
        actual = sorted(arrow_rows(arrow, names), key=repr)
        diff = diff_rows(want, actual, key=key, names=names)
        assert not diff, f"{reader} reads {table} differently from {source_table}:\n{diff}"
        assert rows_hash(actual) == rows_hash(want)
    return expected


def iceberg_ids(fe: FirnEnv, table: str, namespace: str = NAMESPACE) -> list[int]:
    """The sorted values of column "id" of Iceberg table namespace.table (pyiceberg)."""
    return sorted(fe.catalog().load_table(f"{namespace}.{table}").scan(
        selected_fields=("id",)).to_arrow().column("id").to_pylist())


def stream_stats(fe: FirnEnv, table: str) -> dict:
    """The entry of Iceberg table `table` ("ns.name") in the run's stats.json."""
    doc = json.loads((fe.root / "stats.json").read_text())
    return next(s for s in doc["streams"] if s["table"] == table)


def slot_active(conn, slot: str = "firn_e2e") -> bool:
    """The replication slot is in use: firn started streaming (past its checks of the
    tables)."""
    row = conn.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                       (slot,)).fetchone()
    return bool(row and row[0])


# ---------------------------------------------------------------------------------------------
# Canonical values: the Arrow side

def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _canon_py(value: Any) -> Any:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return tuple(_canon_py(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return tuple(_canon_py(v) for v in value)
    return value


def _int_type(t):
    """The Arrow type a column is cast to before to_pylist: temporal types as integers."""
    import pyarrow as pa

    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return pa.int64()
    if pa.types.is_date32(t):
        return pa.int32()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(pa.field("element", _int_type(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(t.field(i).name, _int_type(t.field(i).type))
                          for i in range(t.num_fields)])
    return t


def _is_uuidish(t) -> bool:
    import pyarrow as pa

    if pa.types.is_fixed_size_binary(t) and t.byte_width == 16:
        return True
    return getattr(t, "extension_name", "") in ("arrow.uuid", "uuid")


def arrow_column_values(col) -> list:
    """A chunked Arrow column as canonical Python values."""
    import pyarrow as pa

    t = col.type
    if isinstance(t, pa.ExtensionType):
        col = pa.chunked_array([c.storage for c in col.chunks], type=t.storage_type)
        t = t.storage_type
    if _is_uuidish(t):
        return [None if v is None else str(v if isinstance(v, uuid.UUID) else uuid.UUID(bytes=v))
                for v in col.to_pylist()]
    target = _int_type(t)
    if target != t:
        col = col.cast(target)
    values = col.to_pylist()
    return [_canon_py(v) for v in values]


def arrow_rows(table, columns: Sequence[str] | None = None) -> list[tuple]:
    """Rows of an Arrow table (columns in the given order) as canonical tuples."""
    names = list(columns) if columns is not None else [
        n for n in table.column_names if n not in META_COLUMNS]
    cols = []
    for n in names:
        cols.append(arrow_column_values(table.column(n)))
    return [tuple(c[i] for c in cols) for i in range(table.num_rows)]


# ---------------------------------------------------------------------------------------------
# Canonical values: the PostgreSQL side (text forms parsed per the Iceberg type)

def _days_from_civil(y: int, m: int, d: int) -> int:
    y -= m <= 2
    era = y // 400  # floor division: Hinnant's (y - 399) / 400 is for C's truncation
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


_DATE_RE = re.compile(r"^(\d+)-(\d\d)-(\d\d)$")
_TIME_RE = re.compile(r"^(-?)(\d+):(\d\d):(\d\d)(?:\.(\d+))?$")


def _frac_us(frac: str | None) -> int:
    return int((frac or "").ljust(6, "0")[:6] or 0)


def parse_date(text: str) -> int:
    if text == "infinity":
        return DATE_INF
    if text == "-infinity":
        return -DATE_INF
    bc = text.endswith(" BC")
    m = _DATE_RE.match(text[:-3] if bc else text)
    assert m, f"unparsed date {text!r}"
    y = int(m.group(1))
    return _days_from_civil(1 - y if bc else y, int(m.group(2)), int(m.group(3)))


def parse_time(text: str) -> int:
    m = _TIME_RE.match(text)
    assert m, f"unparsed time {text!r}"
    us = ((int(m.group(2)) * 60 + int(m.group(3))) * 60 + int(m.group(4))) * 10**6
    us += _frac_us(m.group(5))
    return -us if m.group(1) else us


def parse_timestamp(text: str) -> int:
    if text == "infinity":
        return INT64_MAX
    if text == "-infinity":
        return -INT64_MAX
    bc = text.endswith(" BC")
    if bc:
        text = text[:-3]
    date_part, _, rest = text.partition(" ")
    tz = re.search(r"([+-]\d\d(?::\d\d){0,2})$", rest)
    offset_s = 0
    if tz:
        rest = rest[:tz.start()]
        parts = tz.group(1)[1:].split(":")
        offset_s = sum(int(p) * f for p, f in zip(parts, (3600, 60, 1)))
        if tz.group(1)[0] == "-":
            offset_s = -offset_s
    m = _DATE_RE.match(date_part)
    assert m, f"unparsed timestamp {text!r}"
    y = int(m.group(1))
    days = _days_from_civil(1 - y if bc else y, int(m.group(2)), int(m.group(3)))
    us = days * 86400 * 10**6 + parse_time(rest) - offset_s * 10**6
    if us > INT64_MAX - 1:
        us = INT64_MAX - 1  # clamped (docs/type-mapping.md)
    return us


_IV_UNIT = re.compile(r"^(-?\+?\d+) (years?|mons?|days?)$")


def parse_interval(text: str) -> tuple[int, int, int]:
    """PostgreSQL's IntervalStyle 'postgres' output -> (months, days, microseconds)."""
    months = days = us = 0
    tokens = text.split(" ")
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if i + 1 < len(tokens) and _IV_UNIT.match(tok + " " + tokens[i + 1]):
            n = int(tok)
            unit = tokens[i + 1]
            if unit.startswith("year"):
                months += 12 * n
            elif unit.startswith("mon"):
                months += n
            else:
                days += n
            i += 2
            continue
        sign = -1 if tok.startswith("-") else 1
        us += sign * parse_time(tok.lstrip("+-"))
        i += 1
    return (months, days, us)


def parse_pg_array(text: str, delim: str = ","):
    """PostgreSQL array text -> (flat elements as str or None, dims)."""
    if text.startswith("["):
        text = text[text.index("=") + 1:]
    pos = 0

    def parse(level: int):
        nonlocal pos
        assert text[pos] == "{", text
        pos += 1
        items = []
        if text[pos] == "}":
            pos += 1
            return items
        while True:
            if text[pos] == "{":
                items.append(parse(level + 1))
            elif text[pos] == '"':
                pos += 1
                buf = []
                while text[pos] != '"':
                    if text[pos] == "\\":
                        pos += 1
                    buf.append(text[pos])
                    pos += 1
                pos += 1
                items.append("".join(buf))
            else:
                start = pos
                while text[pos] not in (delim, "}"):
                    pos += 1
                raw = text[start:pos].strip()
                items.append(None if raw.upper() == "NULL" else raw)
            if text[pos] == delim:
                pos += 1
                continue
            assert text[pos] == "}", text
            pos += 1
            return items

    nested = parse(0)
    dims = []
    cur = nested
    while isinstance(cur, list):
        dims.append(len(cur))
        if not cur:
            break
        cur = cur[0]
    flat = []

    def walk(x):
        if isinstance(x, list):
            for y in x:
                walk(y)
        else:
            flat.append(x)

    walk(nested)
    if dims == [0]:
        dims = []
    return flat, dims


def shape_array(flat: list, dims: list[int], depth: int):
    """firn's rule: keep the outer depth-1 dimensions, flatten the rest into the innermost list;
    fewer dimensions get single-element outer lists; an empty array is an empty list."""
    if not dims:
        return ()
    if len(dims) >= depth:
        inner = 1
        for d in dims[depth - 1:]:
            inner *= d
        eff = dims[:depth - 1] + [inner]
    else:
        eff = [1] * (depth - len(dims)) + dims
    it = iter(flat)

    def build(level):
        if level == depth - 1:
            return tuple(next(it) for _ in range(eff[level]))
        return tuple(build(level + 1) for _ in range(eff[level]))

    return build(0)


def scalar_from_text(text: str | None, itype) -> Any:
    """A PostgreSQL text value as the canonical value of Iceberg type itype (pyiceberg type)."""
    from pyiceberg import types as it

    if text is None:
        return None
    if isinstance(itype, it.BooleanType):
        return text in ("t", "true")
    if isinstance(itype, (it.IntegerType, it.LongType)):
        return int(text)
    if isinstance(itype, it.FloatType):
        return repr(_f32(float(text)))
    if isinstance(itype, it.DoubleType):
        return repr(float(text))
    if isinstance(itype, it.DecimalType):
        if text == "NaN":
            return None
        return str(Decimal(text))
    if isinstance(itype, it.DateType):
        return parse_date(text)
    if isinstance(itype, it.TimeType):
        return parse_time(text)
    if isinstance(itype, (it.TimestampType, it.TimestamptzType)):
        return parse_timestamp(text)
    if isinstance(itype, it.UUIDType):
        return text.lower()
    if isinstance(itype, (it.BinaryType, it.FixedType)):
        assert text.startswith("\\x"), text
        return bytes.fromhex(text[2:])
    if isinstance(itype, it.StructType):  # interval
        return parse_interval(text)
    return text


def value_from_text(text: str | None, itype, delim: str = ",") -> Any:
    from pyiceberg import types as it

    if text is None:
        return None
    if isinstance(itype, it.ListType):
        depth = 0
        elem = itype
        while isinstance(elem, it.ListType):
            depth += 1
            elem = elem.element_type
        flat, dims = parse_pg_array(text, delim)
        values = [scalar_from_text(v, elem) for v in flat]
        return shape_array(values, dims, depth)
    return scalar_from_text(text, itype)


def source_select_list(conn, table: str, columns: Sequence[str]) -> str:
    """Select expressions giving every column as text in firn's forms (money as numeric)."""
    rows = conn.execute(
        "SELECT a.attname, coalesce(bt.typname, t.typname), t.typcategory, "
        "coalesce(et.typname, '') FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
        "LEFT JOIN pg_type bt ON t.typtype = 'd' AND bt.oid = t.typbasetype "
        "LEFT JOIN pg_type et ON et.oid = t.typelem AND t.typcategory = 'A' "
        "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped",
        (table,)).fetchall()
    kinds = {r[0]: (r[1], r[2], r[3]) for r in rows}
    out = []
    for c in columns:
        typ, cat, elem = kinds[c]
        q = '"' + c.replace('"', '""') + '"'
        if typ == "money":
            out.append(f"{q}::numeric::text")
        elif elem == "money" or typ == "_money":
            out.append(f"{q}::numeric[]::text")
        elif typ in ("int2vector", "oidvector"):
            # Their text form is "1 2 3": as array text, for the list firn stores.
            out.append(f"'{{' || replace({q}::text, ' ', ',') || '}}'")
        else:
            # The type's output function (::text would strip char(n) padding and add /128 to
            # inet): what firn stores for text-form types.
            out.append(f"CASE WHEN {q} IS NULL THEN NULL ELSE format('%s', {q}) END")
    return ", ".join(out)


def array_delims(conn, table: str) -> dict[str, str]:
    rows = conn.execute(
        "SELECT a.attname, et.typdelim FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
        "JOIN pg_type et ON et.oid = t.typelem AND t.typcategory = 'A' "
        "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped",
        (table,)).fetchall()
    return {r[0]: r[1] for r in rows}


def source_rows(conn, table: str, schema, columns: Sequence[str] | None = None) -> list[tuple]:
    """The source table's rows as canonical tuples, typed by the Iceberg schema (pyiceberg)."""
    names = list(columns) if columns is not None else [
        f.name for f in schema.fields if f.name not in META_COLUMNS]
    types = {f.name: f.field_type for f in schema.fields}
    delims = array_delims(conn, table)
    with conn.cursor() as cur:
        cur.execute(SOURCE_SESSION)
        cur.execute(f"SELECT {source_select_list(conn, table, names)} FROM {table}")
        raw = cur.fetchall()
    return [tuple(value_from_text(v, types[n], delims.get(n, ","))
                  for v, n in zip(r, names)) for r in raw]


# ---------------------------------------------------------------------------------------------
# Comparing

def pyiceberg_view(rows: list[tuple], schema, names: Sequence[str]) -> list[tuple]:
    """What pyiceberg returns for rows: it reads a null list<struct> as an empty list
    (apache/iceberg-python#3833, open; the Parquet file holds the null, DuckDB and pyarrow read
    it), so expected rows are adjusted for that reader only."""
    from pyiceberg import types as it

    types = {f.name: f.field_type for f in schema.fields}
    hit = [i for i, n in enumerate(names) if isinstance(types[n], it.ListType)
           and isinstance(types[n].element_type, it.StructType)]
    if not hit:
        return rows
    return [tuple(() if i in hit and v is None else v for i, v in enumerate(r)) for r in rows]


def rows_hash(rows: Iterable[tuple]) -> str:
    """A full-row hash of a set of rows (order independent)."""
    h = hashlib.sha256()
    for r in sorted(repr(r) for r in rows):
        h.update(r.encode())
        h.update(b"\n")
    return h.hexdigest()


def diff_rows(expected: list[tuple], actual: list[tuple], key: int | None = 0,
              names: Sequence[str] | None = None, limit: int = 5) -> str:
    """A readable difference of two row lists ("" when equal as multisets)."""
    if sorted(map(repr, expected)) == sorted(map(repr, actual)):
        return ""
    lines = [f"expected {len(expected)} rows, got {len(actual)}"]
    if key is not None:
        exp = {r[key]: r for r in expected}
        act = {}
        dups = []
        for r in actual:
            if r[key] in act:
                dups.append(r[key])
            act[r[key]] = r
        if dups:
            lines.append(f"duplicate keys in the table: {dups[:limit]}")
        missing = [k for k in exp if k not in act]
        extra = [k for k in act if k not in exp]
        if missing:
            lines.append(f"missing keys: {sorted(missing, key=repr)[:limit]}")
        if extra:
            lines.append(f"unexpected keys: {sorted(extra, key=repr)[:limit]}")
        shown = 0
        for k, r in exp.items():
            a = act.get(k)
            if a is None or a == r:
                continue
            for i, (x, y) in enumerate(zip(r, a)):
                if x != y:
                    col = names[i] if names else i
                    lines.append(f"key {k!r} column {col}: source {x!r:.300} table {y!r:.300}")
                    shown += 1
                    break
            if shown >= limit:
                break
    return "\n".join(lines)
