#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The peer baseline: the PostgreSQL -> Iceberg pipeline a data engineer would otherwise write in
Python, with the usual libraries and no shortcuts that would not survive production.

backfill: each table is split into ctid ranges; a thread pool of `--parallel` workers runs
  `COPY (SELECT ... WHERE ctid range) TO STDOUT (FORMAT csv)` over its own psycopg connection
  and parses the bytes with pyarrow's multi-threaded CSV reader into an Arrow table of the
  table's exact types (decimal128, timestamp, ...); the main thread appends finished chunks to a
  pyiceberg table in a SQLite SQL catalog, one commit per `--commit-rows` rows.
cdc: reads a logical slot with pgoutput through `pg_logical_slot_peek_binary_changes`, decodes
  Begin/Relation/Insert/Update/Delete/Commit, folds the changes of a batch by primary key (last
  image wins), applies deletes with `table.delete(In(key, ...))` and rows with
  `table.upsert(..., join_cols=key)`, and only then advances the slot
  (`pg_replication_slot_advance`), so a crash replays instead of losing changes.

Prints one JSON line of what it did on stdout. The harness runs it as a child process and
measures it exactly like firn (wall, CPU, peak RSS).

Usage: peer.py backfill --uri URI --warehouse DIR --tables t1,t2 [--parallel N]
       peer.py cdc --uri URI --warehouse DIR --slot S --publication P --tables t1
                   [--until-lsn LSN | --follow] [--interval S] [--batch-changes N]
"""

from __future__ import annotations

import argparse
import io
import json
import signal
import struct
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

NAMESPACE = "bench"
_stop = False


def _on_signal(signum, frame) -> None:  # noqa: ARG001
    global _stop
    _stop = True


def catalog(warehouse: Path):
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse.mkdir(parents=True, exist_ok=True)
    return SqlCatalog("peer", uri=f"sqlite:///{warehouse / 'catalog.db'}",
                      warehouse=f"file://{warehouse}")


def arrow_type(pg_type: str, precision, scale) -> pa.DataType:
    """Arrow type of a PostgreSQL column (the types the benchmark tables use)."""
    return {
        "bigint": pa.int64(), "integer": pa.int32(), "smallint": pa.int32(),
        "text": pa.string(), "character varying": pa.string(), "boolean": pa.bool_(),
        "double precision": pa.float64(), "real": pa.float32(), "date": pa.date32(),
        "timestamp without time zone": pa.timestamp("us"),
        "timestamp with time zone": pa.timestamp("us", tz="UTC"),
    }.get(pg_type) or (pa.decimal128(precision, scale) if pg_type == "numeric" else None) or (
        _unsupported(pg_type))


def _unsupported(pg_type: str):
    raise SystemExit(f"peer: unsupported column type {pg_type}")


def table_schema(conn, table: str) -> pa.Schema:
    rows = conn.execute(
        "SELECT column_name, data_type, numeric_precision, numeric_scale, is_nullable "
        "FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s "
        "ORDER BY ordinal_position", (table,)).fetchall()
    return pa.schema([pa.field(n, arrow_type(t, p, s), nullable=True) for n, t, p, s, _ in rows])


def primary_key(conn, table: str) -> list[str]:
    rows = conn.execute(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary",
        (table,)).fetchall()
    return [r[0] for r in rows]


# ----------------------------------------------------------------------------------- backfill

def _copy_chunk(uri: str, table: str, schema: pa.Schema, where: str) -> pa.Table:
    cols = ", ".join(schema.names)
    buf = io.BytesIO()
    with psycopg.connect(uri, autocommit=True) as conn, conn.cursor() as cur:
        # timestamptz in UTC so the CSV text parses without a zone table.
        cur.execute("SET TimeZone = 'UTC'")
        with cur.copy(f"COPY (SELECT {cols} FROM {table} WHERE {where}) TO STDOUT "
                      "(FORMAT csv)") as copy:
            for data in copy:
                buf.write(data)
    buf.seek(0)
    if buf.getbuffer().nbytes == 0:
        return schema.empty_table()
    return pacsv.read_csv(
        buf, read_options=pacsv.ReadOptions(column_names=schema.names, block_size=8 << 20),
        convert_options=pacsv.ConvertOptions(
            column_types={f.name: f.type for f in schema}, strings_can_be_null=True,
            quoted_strings_can_be_null=False, null_values=[""], true_values=["t"],
            false_values=["f"]))


def backfill(args) -> dict:
    from measure import ctid_chunks, ctid_where, table_pages

    cat = catalog(Path(args.warehouse))
    cat.create_namespace_if_not_exists(NAMESPACE)
    out = {"tables": {}, "commits": 0}
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        for table in args.tables.split(","):
            with psycopg.connect(args.uri, autocommit=True) as conn:
                schema = table_schema(conn, table)
                pages = table_pages(conn, table)
            ident = f"{NAMESPACE}.{table}"
            if cat.table_exists(ident):
                cat.drop_table(ident)
            tbl = cat.create_table(ident, schema=schema)
            # A few chunks per worker so a slow range does not leave the others idle.
            chunks = ctid_chunks(pages, args.parallel * 4)
            pending = {pool.submit(_copy_chunk, args.uri, table, schema, ctid_where(lo, hi))
                       for lo, hi in chunks}
            ready: list[pa.Table] = []
            ready_rows = rows = 0
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    t = fut.result()
                    ready.append(t)
                    ready_rows += t.num_rows
                if ready_rows >= args.commit_rows or (not pending and ready):
                    tbl.append(pa.concat_tables(ready))
                    out["commits"] += 1
                    rows += ready_rows
                    ready, ready_rows = [], 0
            out["tables"][table] = {"rows": rows}
    return out


# ---------------------------------------------------------------------------------------- cdc

class PgOutput:
    """A pgoutput (protocol version 1) decoder: relations by OID, row changes as
    (op, relation name, values as text or None). Enough for what the benchmark streams."""

    def __init__(self) -> None:
        self.relations: dict[int, tuple[str, list[str]]] = {}

    @staticmethod
    def _tuple(buf: bytes, pos: int) -> tuple[list[str | None], int]:
        (n,) = struct.unpack_from("!h", buf, pos)
        pos += 2
        vals: list[str | None] = []
        for _ in range(n):
            kind = buf[pos:pos + 1]
            pos += 1
            if kind == b"t":
                (ln,) = struct.unpack_from("!i", buf, pos)
                pos += 4
                vals.append(buf[pos:pos + ln].decode())
                pos += ln
            elif kind == b"n":
                vals.append(None)
            else:  # 'u': unchanged TOASTed value, never produced by these tables
                raise SystemExit("peer: unchanged TOAST value in the stream")
        return vals, pos

    def decode(self, msg: bytes):
        kind = msg[:1]
        if kind == b"R":
            (oid,) = struct.unpack_from("!I", msg, 1)
            pos = 5
            nsp_end = msg.index(b"\0", pos)
            name_end = msg.index(b"\0", nsp_end + 1)
            name = msg[nsp_end + 1:name_end].decode()
            pos = name_end + 2  # replica identity byte
            (ncols,) = struct.unpack_from("!h", msg, pos)
            pos += 2
            cols = []
            for _ in range(ncols):
                end = msg.index(b"\0", pos + 1)
                cols.append(msg[pos + 1:end].decode())
                pos = end + 1 + 8  # type oid + typmod
            self.relations[oid] = (name, cols)
            return None
        if kind in (b"I", b"U", b"D"):
            (oid,) = struct.unpack_from("!I", msg, 1)
            pos = 5
            sub = msg[pos:pos + 1]
            pos += 1
            if kind == b"U" and sub in (b"K", b"O"):  # old key / old row: skip it
                _, pos = self._tuple(msg, pos)
                pos += 1  # 'N'
            vals, _ = self._tuple(msg, pos)
            name, cols = self.relations[oid]
            return kind.decode(), name, cols, vals
        return None  # B, C, O, Y, T: nothing to do for these tables


def _to_arrow(rows: list[list[str | None]], schema: pa.Schema) -> pa.Table:
    arrays = []
    for i, f in enumerate(schema):
        col = pa.array([r[i] for r in rows], type=pa.string())
        if pa.types.is_boolean(f.type):
            arr = pc.equal(col, "t")
        else:
            arr = col.cast(f.type)
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=schema)


def cdc(args) -> dict:
    from pyiceberg.expressions import In

    cat = catalog(Path(args.warehouse))
    dec = PgOutput()
    tables, schemas, keys = {}, {}, {}
    with psycopg.connect(args.uri, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        for t in args.tables.split(","):
            tables[t] = cat.load_table(f"{NAMESPACE}.{t}")
            schemas[t] = table_schema(conn, t)
            keys[t] = primary_key(conn, t)
            if len(keys[t]) != 1:
                raise SystemExit(f"peer: table {t} needs a one-column primary key")
        out = {"changes": 0, "commits": 0, "batches": 0, "deleted": 0, "upserted": 0}
        opts = ("'proto_version', '1', 'publication_names', %s")
        while not _stop:
            t_batch = time.monotonic()
            rows = conn.execute(
                "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes(%s, %s, %s, "
                + opts + ")", (args.slot, args.until_lsn, args.batch_changes,
                               args.publication)).fetchall()
            if not rows:
                if not args.follow:
                    break
                time.sleep(args.interval)
                continue
            # Fold by key: last image wins; a delete leaves None.
            state: dict[str, dict[str, list[str | None] | None]] = {t: {} for t in tables}
            for _, data in rows:
                ch = dec.decode(bytes(data))
                if ch is None or ch[1] not in tables:
                    continue
                op, name, cols, vals = ch
                k = vals[cols.index(keys[name][0])]
                state[name][k] = None if op == "D" else vals
                out["changes"] += 1
            for name, folded in state.items():
                if not folded:
                    continue
                tbl, schema, key = tables[name], schemas[name], keys[name][0]
                kt = schema.field(key).type
                dels = [k for k, v in folded.items() if v is None]
                ups = [v for v in folded.values() if v is not None]
                if dels:
                    tbl.delete(In(key, pa.array(dels).cast(kt).to_pylist()))
                    out["commits"] += 1
                    out["deleted"] += len(dels)
                if ups:
                    tbl.upsert(_to_arrow(ups, schema), join_cols=[key])
                    out["commits"] += 1
                    out["upserted"] += len(ups)
            conn.execute("SELECT pg_replication_slot_advance(%s, %s)", (args.slot, rows[-1][0]))
            out["batches"] += 1
            if args.follow:
                # Gather for at least `interval` seconds per batch, like a commit interval.
                time.sleep(max(0.0, args.interval - (time.monotonic() - t_batch)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["backfill", "cdc"])
    ap.add_argument("--uri", required=True)
    ap.add_argument("--warehouse", required=True)
    ap.add_argument("--tables", required=True)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--commit-rows", type=int, default=2_000_000)
    ap.add_argument("--slot")
    ap.add_argument("--publication")
    ap.add_argument("--until-lsn")
    ap.add_argument("--follow", action="store_true")
    ap.add_argument("--interval", type=float, default=2.0)
    ap.add_argument("--batch-changes", type=int, default=100_000)
    args = ap.parse_args()
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    pa.set_cpu_count(max(1, args.parallel))
    result = backfill(args) if args.mode == "backfill" else cdc(args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
