# SPDX-License-Identifier: Apache-2.0
"""firn's Parquet column reader on parquet-java output: Spark's writer with
parquet.writer.version v1 and v2 (v2: DELTA_BINARY_PACKED, DELTA_BYTE_ARRAY, RLE booleans, data
pages v2), and the position-delete files Iceberg Java writes for a merge-on-read DELETE (field
ids 2147483546/2147483545). Values are compared with pyarrow's reading of the same files."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from test_parquet_read import POS_FIELDS, check, encodings, run_tool
from test_parquet_read import tool  # noqa: F401  (the fixture)

pytestmark = pytest.mark.spark

SPARK_COLUMNS = [
    ("id AS key", dict(type="long", name="key", required=True)),
    ("IF(id % 7 = 1, NULL, id % 3 = 0) AS b", dict(type="boolean", name="b")),
    ("IF(id % 7 = 2, NULL, CAST((id * 2654435761) % 4294967296 - 2147483648 AS INT)) AS i",
     dict(type="int", name="i")),
    ("IF(id % 7 = 3, NULL, id * 1000003 - 77777777777) AS l", dict(type="long", name="l")),
    ("IF(id % 7 = 4, NULL, CAST(id * 1.25 - 7.5 AS FLOAT)) AS f", dict(type="float", name="f")),
    ("CAST(id / 7.0 - 100 AS DOUBLE) AS d", dict(type="double", name="d")),
    ("CAST(CAST((id * 7919) % 1000000000 - 500000000 AS DECIMAL(18,0)) / 100 AS DECIMAL(9,2))"
     " AS dec9", dict(type="decimal", precision=9, scale=2, name="dec9")),
    ("CAST(CAST(id * 104729 - 5000000 AS DECIMAL(18,0)) / 10000 AS DECIMAL(18,4)) AS dec18",
     dict(type="decimal", precision=18, scale=4, name="dec18")),
    ("IF(id % 5 = 0, NULL, CAST(id * 1234567890123 - 99999 AS DECIMAL(38,10))) AS dec38",
     dict(type="decimal", precision=38, scale=10, name="dec38")),
    ("date_add(DATE'1970-01-01', CAST(id * 37 % 100000 - 50000 AS INT)) AS dt",
     dict(type="date", name="dt")),
    ("timestamp_micros(id * 1000000007 - 1000000000000000) AS ts",
     dict(type="timestamptz", name="ts")),
    ("IF(id % 7 = 0, NULL, concat('value-', lpad(CAST(id % 500 AS STRING), 8, '0'), "
     "repeat('abc', CAST(id % 4 AS INT)))) AS s", dict(type="string", name="s")),
    ("IF(id % 9 = 0, NULL, CAST(concat('b', CAST(id AS STRING)) AS BINARY)) AS bin",
     dict(type="binary", name="bin")),
]


@pytest.mark.parametrize("version,codec", [("v1", "snappy"), ("v2", "zstd"), ("v2", "gzip")])
def test_parquet_java_files(tool: Path, tmp_path: Path, spark, version: str, codec: str) -> None:
    session = spark.base
    session.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    df = session.range(0, 6000).selectExpr(*[expr for expr, _f in SPARK_COLUMNS])
    out = tmp_path / "spark"
    (df.coalesce(1).write.option("parquet.writer.version", version)
     .option("compression", codec).option("parquet.page.size", "8192")
     .option("parquet.block.size", str(64 << 10)).parquet(str(out)))
    files = sorted(out.glob("part-*.parquet"))
    assert len(files) == 1
    # Spark's plain files carry no field ids: the reader matches names
    fields = [dict(f, id=7000 + k) for k, (_e, f) in enumerate(SPARK_COLUMNS)]
    check(tool, files[0], fields, callback=version == "v2")
    encs = encodings(files[0])
    if version == "v2":
        assert {"DELTA_BINARY_PACKED", "DELTA_BYTE_ARRAY"} <= encs, encs
    assert pq.ParquetFile(files[0]).metadata.num_row_groups >= 1


def test_iceberg_java_position_deletes(tool: Path, spark, sql_catalog) -> None:
    loc = sql_catalog
    spark.sql(loc, "CREATE NAMESPACE IF NOT EXISTS firn.ns")
    spark.sql(loc, "CREATE TABLE firn.ns.t (id BIGINT NOT NULL, s STRING) USING iceberg "
                   "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    spark.sql(loc, "INSERT INTO firn.ns.t SELECT id, CAST(id AS STRING) FROM range(0, 5000)")
    spark.sql(loc, "DELETE FROM firn.ns.t WHERE id % 3 = 0 OR id > 4900")
    tbl = loc.pyiceberg().load_table("ns.t")
    paths = [f["file_path"] for f in tbl.inspect.delete_files().to_pylist()]
    assert paths, "Spark wrote no position-delete file"
    total = 0
    for uri in paths:
        path = Path(uri.removeprefix("file:"))
        assert "field_id=2147483546" in str(pq.ParquetFile(path).schema)
        rows = check(tool, path, POS_FIELDS)
        assert run_tool(tool, path, POS_FIELDS, "--callback") == rows
        total += len(rows)
    assert total == len([i for i in range(5000) if i % 3 == 0 or i > 4900])
