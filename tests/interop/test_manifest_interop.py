# SPDX-License-Identifier: Apache-2.0
"""Manifests and manifest lists: firn writes, pyiceberg reads (every field compared with values
computed here independently); pyiceberg writes a real table, firn reads (compared with
pyiceberg's own reading of the same files)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

pyiceberg = pytest.importorskip("pyiceberg")
from pyiceberg.io.pyarrow import PyArrowFileIO  # noqa: E402
from pyiceberg.manifest import ManifestContent, read_manifest_list  # noqa: E402

IO = PyArrowFileIO()


def tool(build_dir: Path) -> Path:
    path = build_dir / "tools" / "manifest_tool"
    if not path.exists():
        pytest.fail(f"{path} not built", pytrace=False)
    return path


def entries(mf):
    return list(mf.fetch_manifest_entry(IO, discard_deleted=False))


def expected_file(i: int, content: int) -> dict:
    """The data file manifest_tool's make_file(i) describes, computed independently."""
    amount = Decimal(1999 + i).scaleb(-2)
    return {
        "file_path": f"file:///warehouse/t/data/f{i}.parquet",
        "content": content,
        "partition": [None if i == 3 else dt.date(1970, 1, 1) + dt.timedelta(days=19800 + i % 2),
                      i % 4, -amount if i % 2 else amount],
        "record_count": 1000 + i,
        "file_size_in_bytes": 65536 + i,
        "column_sizes": {fid: 100 * fid + i for fid in range(1, 5)},
        "value_counts": {fid: 1000 + i for fid in range(1, 5)},
        "null_value_counts": {fid: 0 if fid == 1 else i for fid in range(1, 5)},
        "lower_bounds": {1: (-i).to_bytes(8, "little", signed=True), 2: "Anné".encode()},
        "upper_bounds": {1: (5000 + i).to_bytes(8, "little", signed=True), 2: b"Zoe"},
        "split_offsets": [4, 1 << 20][: 1 + i % 2],
        "equality_ids": [1] if content == 2 else None,
    }


def check_file(df, want: dict) -> None:
    assert df.file_path == want["file_path"]
    assert int(df.content) == want["content"]
    assert str(df.file_format.value).lower() == "parquet"
    part = list(df.partition)
    day = part[0]
    if isinstance(day, int):
        day = dt.date(1970, 1, 1) + dt.timedelta(days=day)
    assert [day, part[1], part[2]] == want["partition"]
    for key in ("record_count", "file_size_in_bytes", "split_offsets", "column_sizes",
                "value_counts", "null_value_counts", "lower_bounds", "upper_bounds"):
        got = getattr(df, key)
        if isinstance(want[key], dict):
            got = dict(got)
        assert got == want[key], key
    assert (list(df.equality_ids) if df.equality_ids else None) == want["equality_ids"]
    assert not df.nan_value_counts


def run_write(build_dir: Path, tmp_path: Path):
    out = subprocess.run([str(tool(build_dir)), "write", str(tmp_path)], check=True,
                         capture_output=True, text=True, timeout=60).stdout.splitlines()
    snaps = []
    for line in out:
        path, summary = line.split(" ", 1)
        snaps.append((path, dict(kv.split("=", 1) for kv in summary.split(","))))
    assert len(snaps) == 3
    return snaps


def test_pyiceberg_reads_firn_manifests(build_dir, tmp_path):
    snaps = run_write(build_dir, tmp_path)

    # Snapshot 1: one data manifest with three ADDED files.
    (mf,) = list(read_manifest_list(IO.new_input(snaps[0][0])))
    assert (mf.content, mf.partition_spec_id, mf.added_snapshot_id) == (ManifestContent.DATA, 0, 101)
    assert (mf.sequence_number, mf.min_sequence_number) == (1, 1)
    assert (mf.added_files_count, mf.existing_files_count, mf.deleted_files_count) == (3, 0, 0)
    assert mf.added_rows_count == 1000 + 1001 + 1002
    assert mf.manifest_length == Path(mf.manifest_path).stat().st_size
    days = [(dt.date(2024, 3, 18) - dt.date(1970, 1, 1)).days + k for k in (0, 1)]
    assert days == [19800, 19801]
    summ = mf.partitions
    assert [s.contains_null for s in summ] == [False, False, False]
    assert summ[0].lower_bound == (19800).to_bytes(4, "little")
    assert summ[0].upper_bound == (19801).to_bytes(4, "little")
    assert summ[1].lower_bound == (0).to_bytes(4, "little")
    assert summ[1].upper_bound == (2).to_bytes(4, "little")
    assert summ[2].lower_bound == (-2000).to_bytes(2, "big", signed=True)
    assert summ[2].upper_bound == (2001).to_bytes(2, "big", signed=True)
    es = entries(mf)
    assert [int(e.status) for e in es] == [1, 1, 1]
    for i, e in enumerate(es):
        assert (e.snapshot_id, e.sequence_number, e.file_sequence_number) == (101, 1, 1)
        check_file(e.data_file, expected_file(i, 0))
    assert snaps[0][1]["operation"] == "append"
    assert snaps[0][1]["total-records"] == str(3003)

    # Snapshot 2: new data manifest, new delete manifest, the first manifest carried over.
    mfs = list(read_manifest_list(IO.new_input(snaps[1][0])))
    assert [m.content for m in mfs] == [ManifestContent.DATA, ManifestContent.DELETES,
                                         ManifestContent.DATA]
    assert [m.sequence_number for m in mfs] == [2, 2, 1]
    assert mfs[2].manifest_path == mf.manifest_path
    (e3,) = entries(mfs[0])
    check_file(e3.data_file, expected_file(3, 0))
    assert mfs[0].partitions[0].contains_null
    pos, eq = entries(mfs[1])
    check_file(pos.data_file, expected_file(10, 1))
    check_file(eq.data_file, expected_file(11, 2))
    assert pos.data_file.referenced_data_file == "file:///warehouse/t/data/f0.parquet" \
        if hasattr(pos.data_file, "referenced_data_file") else True
    assert snaps[1][1]["operation"] == "overwrite"
    assert snaps[1][1]["added-delete-files"] == "2"
    assert snaps[1][1]["total-records"] == str(3003 + 1003)

    # Snapshot 3: f1 removed -> the first manifest is rewritten with a DELETED entry.
    mfs = list(read_manifest_list(IO.new_input(snaps[2][0])))
    rewritten = [m for m in mfs if m.added_snapshot_id == 103]
    assert len(rewritten) == 1
    m = rewritten[0]
    assert (m.existing_files_count, m.deleted_files_count, m.deleted_rows_count) == (2, 1, 1001)
    assert m.sequence_number == 3 and m.min_sequence_number == 1
    got = {e.data_file.file_path.rsplit("/", 1)[1]: e for e in entries(m)}
    assert int(got["f1.parquet"].status) == 2
    assert got["f1.parquet"].snapshot_id == 103
    assert (got["f1.parquet"].sequence_number, got["f1.parquet"].file_sequence_number) == (1, 1)
    assert int(got["f0.parquet"].status) == 0 and got["f0.parquet"].snapshot_id == 101
    assert got["f0.parquet"].sequence_number == 1
    assert snaps[2][1]["operation"] == "delete"
    assert snaps[2][1]["deleted-records"] == "1001"
    assert snaps[2][1]["total-records"] == str(3003 + 1003 - 1001)
    assert snaps[2][1]["total-data-files"] == "3"


def test_manifest_header_metadata(build_dir, tmp_path):
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.manifest import MANIFEST_ENTRY_SCHEMAS, DataFile, ManifestEntry

    snaps = run_write(build_dir, tmp_path)
    (mf,) = list(read_manifest_list(IO.new_input(snaps[0][0])))
    with AvroFile[ManifestEntry](IO.new_input(mf.manifest_path), MANIFEST_ENTRY_SCHEMAS[2],
                                 read_types={-1: ManifestEntry, 2: DataFile}) as f:
        meta = f.header.meta
    assert meta["format-version"] == "2"
    assert meta["content"] == "data"
    assert meta["partition-spec-id"] == "0"
    assert meta["schema-id"] == "0"
    assert json.loads(meta["partition-spec"]) == [
        {"name": "ts_day", "transform": "day", "source-id": 3, "field-id": 1000},
        {"name": "id_bucket", "transform": "bucket[4]", "source-id": 1, "field-id": 1001},
        {"name": "amount", "transform": "identity", "source-id": 4, "field-id": 1002}]
    assert json.loads(meta["schema"])["fields"][0]["name"] == "id"
    avro_schema = json.loads(meta["avro.schema"])
    assert avro_schema["name"] == "manifest_entry"
    df = [f for f in avro_schema["fields"] if f["name"] == "data_file"][0]["type"]
    assert df["name"] == "r2"
    names = [f["name"] for f in df["fields"]]
    assert names == ["content", "file_path", "file_format", "partition", "record_count",
                     "file_size_in_bytes", "column_sizes", "value_counts", "null_value_counts",
                     "nan_value_counts", "lower_bounds", "upper_bounds", "key_metadata",
                     "split_offsets", "equality_ids", "sort_order_id", "referenced_data_file"]
    part = df["fields"][3]["type"]
    assert part["name"] == "r102"
    assert part["fields"][0]["type"] == ["null", {"type": "int", "logicalType": "date"}]
    assert part["fields"][2]["type"][1]["name"] == "decimal_12_2"
    assert df["fields"][6]["type"][1]["items"]["name"] == "k117_v118"
    assert meta["avro.codec"] == "deflate"


def _pyiceberg_table(tmp_path: Path):
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/cat.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("ns")
    schema = Schema(NestedField(1, "id", LongType(), required=False),
                    NestedField(2, "region", StringType(), required=False),
                    NestedField(3, "ts", TimestamptzType(), required=False))
    # Identity only: pyiceberg needs the optional pyiceberg-core package for other transforms.
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
    table = catalog.create_table("ns.t", schema=schema, partition_spec=spec)
    utc = dt.timezone.utc
    arrow_schema = pa.schema([("id", pa.int64()), ("region", pa.string()),
                              ("ts", pa.timestamp("us", tz="UTC"))])
    for batch in range(2):
        rows = [(batch * 10 + k, ["eu", "us", None][k % 3],
                 dt.datetime(2024, 5, 1 + k % 2, 13, tzinfo=utc)) for k in range(6)]
        table.append(pa.Table.from_pylist(
            [dict(zip(("id", "region", "ts"), r)) for r in rows], schema=arrow_schema))
    table.delete("id = 3")
    return catalog.load_table("ns.t")


def test_firn_reads_pyiceberg_manifests(build_dir, tmp_path):
    from pyiceberg.conversions import to_bytes

    table = _pyiceberg_table(tmp_path)
    snap = table.current_snapshot()
    list_path = snap.manifest_list.removeprefix("file://")
    out = subprocess.run([str(tool(build_dir)), "dump", list_path], check=True,
                         capture_output=True, text=True, timeout=60).stdout.splitlines()
    got = [json.loads(line) for line in out]
    firn_manifests = [g for g in got if g["kind"] == "manifest"]
    firn_entries = [g for g in got if g["kind"] == "entry"]

    mfs = list(read_manifest_list(IO.new_input(snap.manifest_list)))
    assert len(firn_manifests) == len(mfs)
    part_types = [f.field_type for f in table.spec().partition_type(table.schema()).fields]
    want_entries = []
    for m, fm in zip(mfs, firn_manifests):
        assert fm["path"] == m.manifest_path
        assert fm["length"] == m.manifest_length
        assert fm["content"] == int(m.content)
        assert (fm["sequence_number"], fm["min_sequence_number"]) == (
            m.sequence_number, m.min_sequence_number)
        assert fm["added_snapshot_id"] == m.added_snapshot_id
        assert fm["counts"] == [m.added_files_count, m.existing_files_count,
                                m.deleted_files_count, m.added_rows_count,
                                m.existing_rows_count, m.deleted_rows_count]
        want_entries += entries(m)
    assert len(firn_entries) == len(want_entries) > 0
    assert any(int(e.status) == 2 for e in want_entries)  # the delete rewrote a file
    for g, e in zip(firn_entries, want_entries):
        df = e.data_file
        assert g["status"] == int(e.status)
        assert g["snapshot_id"] == e.snapshot_id
        assert g["sequence_number"] == e.sequence_number
        assert g["file_sequence_number"] == e.file_sequence_number
        assert g["file_path"] == df.file_path
        assert g["file_format"] == "parquet"
        assert g["record_count"] == df.record_count
        assert g["file_size_in_bytes"] == df.file_size_in_bytes
        want_part = [None if v is None else to_bytes(t, v).hex()
                     for t, v in zip(part_types, list(df.partition))]
        assert g["partition"] == want_part
        metrics = {m[0]: m for m in g["metrics"]}
        assert {k: metrics[k][1] for k in df.column_sizes} == dict(df.column_sizes)
        assert {k: metrics[k][2] for k in df.value_counts} == dict(df.value_counts)
        assert {k: metrics[k][3] for k in df.null_value_counts} == dict(df.null_value_counts)
        assert {k: metrics[k][5] for k in df.lower_bounds} == {
            k: v.hex() for k, v in dict(df.lower_bounds).items()}
        assert {k: metrics[k][6] for k in df.upper_bounds} == {
            k: v.hex() for k, v in dict(df.upper_bounds).items()}
        assert g["split_offsets"] == list(df.split_offsets or [])
