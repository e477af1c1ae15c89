# SPDX-License-Identifier: Apache-2.0
"""`firn sync` into the Apache Iceberg REST catalog fixture, read back by independent readers:

- file:// warehouse: a backfill and a CDC round (updates, deletes, key changes) of a table with
  most value kinds and of the type corpus (tests/data/type_corpus.sql); pyiceberg's RestCatalog
  and Spark's REST catalog return the PostgreSQL rows value by value; every corpus value equals
  what the same sync writes through firn's SQL catalog (the path the engine tests check against
  PostgreSQL for every type);
- S3 warehouse on versitygw: the catalog vends its S3 keys in each LoadTableResult and firn
  writes with them (its own storage config has none); pyiceberg reads the same rows.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from firnsync import check_summary_against_manifests, snapshot_chain, summary_of
from rest_fixtures import *  # noqa: F401,F403
from sparkutil import canon_rows

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "data" / "type_corpus.sql"

ORDERS_COLS = ["id", "customer", "amount", "qty", "ratio", "paid", "created_at", "ship_date",
               "local_ts", "note", "blob", "tags"]
SETUP = [
    """CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(12,2),
       qty int, ratio double precision, paid boolean, created_at timestamptz NOT NULL,
       ship_date date, local_ts timestamp, note text, blob bytea, tags text[])""",
    """INSERT INTO orders SELECT g,
         'cust-' || (g % 17) || CASE WHEN g % 5 = 0 THEN ' Zoë 雪 🧊' ELSE '' END,
         CASE WHEN g % 11 = 0 THEN NULL ELSE round(g * 12.345, 2) END,
         CASE WHEN g % 7 = 0 THEN NULL ELSE g * 3 END,
         CASE WHEN g % 13 = 0 THEN 'NaN'::float8 ELSE (g / 7.0)::float8 END,
         CASE WHEN g % 4 = 0 THEN NULL ELSE g % 2 = 0 END,
         timestamptz '2024-01-15 00:00:00.5+00' + g * interval '5 hours 7 minutes',
         date '2024-02-01' + g, timestamp '2023-12-31 23:59:59.123456' + g * interval '1 day',
         CASE WHEN g % 3 = 0 THEN NULL ELSE repeat('x', g % 50) END,
         CASE WHEN g % 6 = 0 THEN NULL ELSE decode(lpad(to_hex(g), 8, '0'), 'hex') END,
         CASE WHEN g % 9 = 0 THEN NULL ELSE ARRAY['t' || g, NULL, 'ü'] END
       FROM generate_series(1, 200) g""",
]
CDC = ["UPDATE orders SET amount = amount + 1, note = 'upd' WHERE id IN (1, 2, 3, 50)",
       "DELETE FROM orders WHERE id IN (4, 5, 150)",
       "UPDATE orders SET id = 1010 WHERE id = 10",
       "INSERT INTO orders SELECT id + 1000, customer, amount, qty, ratio, paid, created_at, "
       "ship_date, local_ts, 'new', blob, tags FROM orders WHERE id BETWEEN 20 AND 24"]

# Corpus columns whose values psycopg returns for every corpus row in the form pyiceberg's
# Arrow values canonicalize to (no infinite dates, no uuid objects, no padded char).
CORPUS_PG_COLS = ["id", "c_bool", "c_int2", "c_int4", "c_int8", "c_float8", "c_num_38_10",
                  "c_num_18_0", "c_text", "c_varchar", "c_bytea", "c_text_arr", "c_bool_arr",
                  "c_float8_arr"]
CORPUS_CDC = [
    "INSERT INTO firn_type_corpus SELECT id + 100, c_bool, c_int2, c_int4, c_int8, c_float4, "
    "c_float8, c_num_10_2, c_num_38_10, c_num_18_0, c_num, c_num_50_5, c_money, c_text, "
    "c_varchar, c_char, c_name, c_citext, c_char1, c_bytea, c_uuid, c_date, c_time, c_timetz, "
    "c_ts, c_tstz, c_ts3, c_interval, c_json, c_jsonb FROM firn_type_corpus",
    "UPDATE firn_type_corpus SET c_text = 'cdc ❄', c_int8 = -1 WHERE id IN (1, 3)",
    "DELETE FROM firn_type_corpus WHERE id IN (2, 104)",
]


def rest_job(firn_job, loc, streams, setup=(), **extra):
    ns = "r_" + uuid.uuid4().hex[:8]
    return firn_job(streams, setup=setup, catalog=loc.firn_catalog(), catalog_loc=loc,
                    namespace=ns, storage=loc.firn_storage(), **extra)


def pyiceberg_rows(loc, table, cols):
    arrow = loc.pyiceberg().load_table(table).scan(selected_fields=tuple(cols)).to_arrow()
    return canon_rows(arrow.select(cols).to_pylist())


def spark_rest_rows(spark, loc, table, cols):
    """Rows read by Spark through Iceberg's RESTCatalog (type=rest)."""
    session = spark.base.newSession()
    prefix = "spark.sql.catalog.rest"
    session.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    session.conf.set(prefix + ".type", "rest")
    session.conf.set(prefix + ".uri", loc.uri)
    session.conf.set(prefix + ".cache-enabled", "false")
    query = f"SELECT {', '.join(f'`{c}`' for c in cols)} FROM rest.{table}"
    df = session.sql(query)
    batches = df._collect_as_arrow()
    return canon_rows(pa.Table.from_batches(batches).to_pylist() if batches else [])


def _plain_type(t: pa.DataType) -> pa.DataType:
    """t with temporal types as their integer storage (values beyond Python's datetime range
    compare then), recursively through lists and structs."""
    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return pa.int64()
    if pa.types.is_date32(t):
        return pa.int32()
    if pa.types.is_list(t):
        return pa.list_(_plain_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain_type(f.type)) for f in t])
    return t


def plain_rows(tbl) -> list[tuple]:
    """Every row of a pyiceberg table except the _firn_ columns, as canonical tuples."""
    arrow = tbl.scan().to_arrow()
    cols = [c for c in arrow.column_names if not c.startswith("_firn_")]
    arrow = arrow.select(cols)
    arrow = arrow.cast(pa.schema([pa.field(f.name, _plain_type(f.type)) for f in arrow.schema]))
    return canon_rows(arrow.to_pylist())


def test_sync_rest_file_warehouse(firn_job, rest_catalog, spark):
    loc = rest_catalog
    job = rest_job(firn_job, loc, [{"stream_name": "orders", "partition": ["day(created_at)"]},
                                   {"stream_name": "firn_type_corpus"}],
                   setup=SETUP + [CORPUS.read_text()])
    job.sync()
    orders, corpus = job.table("orders"), job.table("firn_type_corpus")
    want = job.source_rows(f"SELECT {', '.join(ORDERS_COLS)} FROM orders")
    assert pyiceberg_rows(loc, orders, ORDERS_COLS) == want
    tbl = loc.pyiceberg().load_table(orders)
    assert tbl.schema().identifier_field_ids == [1]
    assert tbl.location().startswith(loc.warehouse)
    [snap0] = snapshot_chain(tbl)
    s0 = check_summary_against_manifests(tbl, snap0)
    assert s0["firn.backfill"] == "done" and int(s0["added-records"]) == 200, s0

    job.sql(*CDC)
    job.sql(*CORPUS_CDC)
    job.sync()
    want = job.source_rows(f"SELECT {', '.join(ORDERS_COLS)} FROM orders")
    assert len(want) == 202
    assert pyiceberg_rows(loc, orders, ORDERS_COLS) == want
    assert spark_rest_rows(spark, loc, orders, ORDERS_COLS) == want
    tbl = loc.pyiceberg().load_table(orders)
    chain = snapshot_chain(tbl)
    assert len(chain) == 2, [summary_of(s) for s in chain]
    s1 = check_summary_against_manifests(tbl, chain[1])
    assert s1["operation"] == "overwrite" and int(s1["added-position-deletes"]) == 8, s1

    want_corpus = job.source_rows(f"SELECT {', '.join(CORPUS_PG_COLS)} FROM firn_type_corpus")
    assert pyiceberg_rows(loc, corpus, CORPUS_PG_COLS) == want_corpus
    # (Spark cannot read the corpus table at all: "Spark does not support time fields")

    # every corpus column equals the same sync through the SQL catalog
    sql_job = firn_job([{"stream_name": "firn_type_corpus"}], database=job.dbname,
                       slot_suffix="_sql")
    sql_job.sync()
    got = plain_rows(loc.pyiceberg().load_table(corpus))
    ref = plain_rows(sql_job.loc.pyiceberg().load_table(sql_job.table("firn_type_corpus")))
    assert len(got) == len(want_corpus) and got == ref


def test_sync_rest_s3_vended(firn_job, rest_catalog_s3):
    loc = rest_catalog_s3
    job = rest_job(firn_job, loc, [{"stream_name": "orders"}], setup=SETUP)
    job.storage = {"endpoint": loc.s3.endpoint, "region": loc.s3.region, "path_style": True}
    job.sync()
    log = (job.workdir / "sync-1.log").read_text()
    assert "using vended S3 credentials" in log, log[-2000:]
    job.sql(*CDC)
    job.sync()
    want = job.source_rows(f"SELECT {', '.join(ORDERS_COLS)} FROM orders")
    assert pyiceberg_rows(loc, job.table("orders"), ORDERS_COLS) == want
    tbl = loc.pyiceberg().load_table(job.table("orders"))
    assert tbl.location().startswith(f"s3://{loc.s3.bucket}/rest/")
    files = tbl.inspect.files().to_pylist()
    assert files and all(f["file_path"].startswith(tbl.location() + "/data/") for f in files)
    # the objects are really in the server's bucket (its posix backend folder)
    for f in files:
        key = f["file_path"][len(f"s3://{loc.s3.bucket}/"):]
        assert (loc.s3.root / loc.s3.bucket / key).stat().st_size == f["file_size_in_bytes"]
    assert len(snapshot_chain(tbl)) == 2
