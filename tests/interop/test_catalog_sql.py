# SPDX-License-Identifier: Apache-2.0
"""firn's SQL catalog (SQLite) against pyiceberg's SqlCatalog: both open the same database and
warehouse and must see exactly what the other wrote (namespaces, properties, tables, schemas with
ids, identifier fields, partition specs, schema history, snapshots), and concurrent firn commits
must each land exactly once."""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path

import pytest

CATALOG = "firn_test"


@pytest.fixture
def env(tmp_path: Path, build_dir: Path):
    tool = build_dir / "tools" / "catalog_tool"
    if not tool.exists():
        pytest.fail(f"{tool} is missing: build the asan preset", pytrace=False)
    db = tmp_path / "catalog.db"
    wh = tmp_path / "warehouse"
    wh.mkdir()
    return {"tool": tool, "uri": f"sqlite:///{db}", "warehouse": f"file://{wh}", "dir": tmp_path,
            "wh": wh}


def firn(env, *args, check=True):
    proc = subprocess.run([str(env["tool"]), CATALOG, env["uri"], env["warehouse"], *map(str, args)],
                          capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"catalog_tool {args} failed ({proc.returncode}): {proc.stderr}")
    return proc


def firn_json(env, *args):
    return json.loads(firn(env, *args).stdout)


def pyiceberg_catalog(env):
    from pyiceberg.catalog import load_catalog

    return load_catalog(CATALOG, type="sql", uri=env["uri"], warehouse=env["warehouse"])


def write(env, name: str, obj) -> Path:
    path = env["dir"] / name
    path.write_text(json.dumps(obj))
    return path


SCHEMA = {
    "type": "struct", "schema-id": 0, "identifier-field-ids": [1],
    "fields": [
        {"id": 1, "name": "order_id", "required": True, "type": "long"},
        {"id": 2, "name": "customer", "required": False, "type": "string", "doc": "who"},
        {"id": 3, "name": "amount", "required": False, "type": "decimal(12,2)"},
        {"id": 4, "name": "ts", "required": False, "type": "timestamptz"},
        {"id": 5, "name": "qty", "required": True, "type": "int"},
        {"id": 6, "name": "tags", "required": False,
         "type": {"type": "list", "element-id": 7, "element": "string", "element-required": False}},
        {"id": 8, "name": "attrs", "required": False,
         "type": {"type": "map", "key-id": 9, "key": "string", "value-id": 10,
                  "value": {"type": "struct", "fields": [
                      {"id": 11, "name": "v", "required": True, "type": "double"}]},
                  "value-required": True}},
        {"id": 12, "name": "code", "required": False, "type": "fixed[4]"},
        {"id": 13, "name": "uid", "required": False, "type": "uuid"},
    ],
}


def test_firn_tables_seen_by_pyiceberg(env, duck):
    from pyiceberg.types import (DecimalType, DoubleType, FixedType, IntegerType, ListType,
                                 LongType, MapType, NestedField, StringType, StructType,
                                 TimestamptzType, UUIDType)

    firn(env, "create-namespace", "sales", "owner=etl", "comment=orders and more")
    firn(env, "create-namespace", "a.b")
    spec = write(env, "spec.json", {"spec-id": 0, "fields": [
        {"source-id": 4, "field-id": 1000, "name": "ts_day", "transform": "day"},
        {"source-id": 2, "field-id": 1001, "name": "customer_bucket", "transform": "bucket[8]"}]})
    sort = write(env, "sort.json", {"order-id": 1, "fields": [
        {"transform": "identity", "source-id": 1, "direction": "desc", "null-order": "nulls-last"}]})
    created = firn_json(env, "create-table", "sales", "orders", write(env, "s.json", SCHEMA),
                        "--spec", spec, "--sort", sort, "format-version=2",
                        "write.delete.mode=merge-on-read")
    assert created["metadata-location"].endswith(".metadata.json")
    assert "/sales/orders/metadata/00000-" in created["metadata-location"]

    # evolve: add a column, promote int -> long, widen the decimal, drop nothing
    target = json.loads(json.dumps(SCHEMA))
    target["fields"][4]["type"] = "long"
    target["fields"][2]["type"] = "decimal(18,2)"
    target["fields"].append({"id": 99, "name": "status", "required": False, "type": "string"})
    evolved = firn_json(env, "evolve", "sales", "orders", write(env, "t.json", target))
    assert evolved["metadata"]["current-schema-id"] == 1
    target["fields"] = [f for f in target["fields"] if f["name"] != "customer"]  # dropped upstream
    target["fields"].append({"id": 98, "name": "note", "required": False, "type": "string"})
    evolved = firn_json(env, "evolve", "sales", "orders", write(env, "t2.json", target))
    assert evolved["metadata"]["current-schema-id"] == 2

    cat = pyiceberg_catalog(env)
    assert sorted(cat.list_namespaces()) == [("a",), ("sales",)]
    assert cat.list_namespaces("a") == [("a", "b")]
    assert cat.load_namespace_properties("sales") == {"owner": "etl", "comment": "orders and more"}
    assert cat.load_namespace_properties("a.b") == {"exists": "true"}
    assert cat.list_tables("sales") == [("sales", "orders")]
    t = cat.load_table("sales.orders")
    assert t.metadata_location == evolved["metadata-location"]
    md = t.metadata
    assert md.format_version == 2
    assert str(md.table_uuid) == created["metadata"]["table-uuid"]
    assert md.location == env["warehouse"] + "/sales/orders"
    assert md.last_column_id == 15
    assert [s.schema_id for s in md.schemas] == [0, 1, 2]
    s = t.schema()
    assert s.schema_id == 2
    assert s.identifier_field_ids == [1]
    # fresh ids as Java/pyiceberg assign them: top-level fields first, then nested ones
    got = {f.field_id: (f.name, f.field_type, f.required) for f in s.fields}
    assert got == {
        1: ("order_id", LongType(), True),
        2: ("customer", StringType(), False),
        3: ("amount", DecimalType(18, 2), False),
        4: ("ts", TimestamptzType(), False),
        5: ("qty", LongType(), True),
        6: ("tags", ListType(10, StringType(), element_required=False), False),
        7: ("attrs", MapType(11, StringType(), 12,
                             StructType(NestedField(13, "v", DoubleType(), required=True)),
                             value_required=True), False),
        8: ("code", FixedType(4), False),
        9: ("uid", UUIDType(), False),
        14: ("status", StringType(), False),
        15: ("note", StringType(), False),
    }
    assert s.find_field("customer").doc == "who"
    old = md.schema_by_id(0)
    assert old.find_field("qty").field_type == IntegerType()
    assert old.find_field("amount").field_type == DecimalType(12, 2)
    assert md.schema_by_id(1).find_field("status").field_id == 14
    spec_got = t.spec()
    assert spec_got.spec_id == 0
    assert [(f.source_id, f.field_id, f.name, str(f.transform)) for f in spec_got.fields] == [
        (4, 1000, "ts_day", "day"), (2, 1001, "customer_bucket", "bucket[8]")]
    assert md.last_partition_id == 1001
    order = t.sort_order()
    assert order.order_id == 1
    assert [(f.source_id, str(f.transform), f.direction.value, f.null_order.value)
            for f in order.fields] == [(1, "identity", "desc", "nulls-last")]
    assert t.properties == {"write.delete.mode": "merge-on-read",
                            "write.parquet.compression-codec": "zstd"}
    assert len(md.metadata_log) == 2
    assert md.metadata_log[0].metadata_file == created["metadata-location"]
    assert "/metadata/00001-" in md.metadata_log[1].metadata_file
    assert "/metadata/00002-" in t.metadata_location
    assert md.current_snapshot_id is None
    assert t.scan().to_arrow().num_rows == 0

    # DuckDB reads firn's metadata file as an (empty) Iceberg table with the current columns
    rows = duck.execute(f"SELECT * FROM iceberg_scan('{t.metadata_location}')").fetchall()
    assert rows == []
    cols = [d[0] for d in duck.description]
    assert cols == ["order_id", "customer", "amount", "ts", "qty", "tags", "attrs", "code", "uid",
                    "status", "note"]


def test_incompatible_evolution_is_refused(env):
    firn(env, "create-namespace", "sales")
    firn(env, "create-table", "sales", "orders", write(env, "s.json", SCHEMA))
    target = json.loads(json.dumps(SCHEMA))
    target["fields"][1]["type"] = "int"
    proc = firn(env, "evolve", "sales", "orders", write(env, "bad.json", target), check=False)
    assert proc.returncode == 1
    assert "FIRN_ERR_SCHEMA" in proc.stderr
    assert 'cannot change type of column "customer" from string to int' in proc.stderr
    t = pyiceberg_catalog(env).load_table("sales.orders")
    assert len(t.metadata.schemas) == 1
    assert "/metadata/00000-" in t.metadata_location


def test_namespace_rules(env):
    cat = pyiceberg_catalog(env)
    cat.create_namespace("py_ns")
    cat.create_namespace("py_props", {"k": "v"})
    firn(env, "create-namespace", "firn_ns", "x=1")
    assert firn_json(env, "list-namespaces") == ["firn_ns", "py_ns", "py_props"]
    assert firn(env, "ns-props", "py_ns").stdout.strip() == "exists=true"
    assert firn(env, "ns-props", "py_props").stdout.strip() == "k=v"
    proc = firn(env, "create-namespace", "py_ns", check=False)
    assert proc.returncode == 1 and "FIRN_ERR_EXISTS" in proc.stderr
    proc = firn(env, "ns-props", "nope", check=False)
    assert proc.returncode == 1 and "FIRN_ERR_NOT_FOUND" in proc.stderr
    assert cat.load_namespace_properties("firn_ns") == {"x": "1"}
    from pyiceberg.exceptions import NamespaceAlreadyExistsError

    with pytest.raises(NamespaceAlreadyExistsError):
        cat.create_namespace("firn_ns")


def test_pyiceberg_tables_seen_by_firn(env):
    import pyarrow as pa
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    cat = pyiceberg_catalog(env)
    cat.create_namespace("shop")
    schema = Schema(NestedField(1, "id", LongType(), required=True),
                    NestedField(2, "name", StringType()), identifier_field_ids=[1])
    t = cat.create_table("shop.items", schema,
                         partition_spec=PartitionSpec(
                             PartitionField(2, 1000, IdentityTransform(), "name")))
    t.append(pa.Table.from_pylist([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}],
                                  schema=t.schema().as_arrow()))
    with t.update_schema() as u:
        u.add_column("price", LongType())
    t = cat.load_table("shop.items")
    t.append(pa.Table.from_pylist([{"id": 3, "name": "c", "price": 7}],
                                  schema=t.schema().as_arrow()))
    t = cat.load_table("shop.items")

    assert firn_json(env, "list-tables", "shop") == ["items"]
    shown = firn_json(env, "show", "shop", "items")
    assert shown["metadata-location"] == t.metadata_location
    md = shown["metadata"]
    assert md["table-uuid"] == str(t.metadata.table_uuid)
    assert md["current-schema-id"] == 1
    assert md["last-column-id"] == 3
    assert [f["name"] for f in md["schemas"][1]["fields"]] == ["id", "name", "price"]
    assert md["schemas"][1]["identifier-field-ids"] == [1]
    assert md["current-snapshot-id"] == t.metadata.current_snapshot_id
    assert md["refs"]["main"] == {"snapshot-id": t.metadata.current_snapshot_id, "type": "branch"}
    assert [s["snapshot-id"] for s in md["snapshots"]] == [s.snapshot_id for s in t.snapshots()]
    cur = md["snapshots"][-1]
    assert cur["sequence-number"] == 2
    assert cur["parent-snapshot-id"] == md["snapshots"][0]["snapshot-id"]
    assert cur["schema-id"] == 1
    assert cur["manifest-list"] == t.current_snapshot().manifest_list
    assert cur["summary"]["operation"] == "append"
    assert cur["summary"]["total-records"] == "3"
    assert cur["summary"]["added-records"] == "1"
    assert md["last-sequence-number"] == 2
    assert len(md["snapshot-log"]) == 2

    # firn commits to pyiceberg's table; pyiceberg still reads its data and sees the change
    after = firn_json(env, "set-props", "shop", "items", "owner=firn")
    t2 = cat.load_table("shop.items")
    assert t2.metadata_location == after["metadata-location"]
    assert "/metadata/00004-" in t2.metadata_location  # pyiceberg wrote 00000..00003
    assert t2.properties["owner"] == "firn"
    assert t2.metadata.metadata_log[-1].metadata_file == t.metadata_location
    assert t2.current_snapshot().snapshot_id == t.current_snapshot().snapshot_id
    rows = sorted(t2.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "name": "a", "price": None}, {"id": 2, "name": "b", "price": None},
                    {"id": 3, "name": "c", "price": 7}]
    # and pyiceberg can keep committing after firn
    t2.append(pa.Table.from_pylist([{"id": 4, "name": "d", "price": 1}],
                                   schema=t2.schema().as_arrow()))
    shown = firn_json(env, "show", "shop", "items")
    assert shown["metadata"]["snapshots"][-1]["summary"]["total-records"] == "4"
    assert shown["metadata"]["properties"]["owner"] == "firn"


def test_concurrent_commits_land_once(env):
    firn(env, "create-namespace", "c")
    firn(env, "create-table", "c", "t", write(env, "s.json", SCHEMA))
    n = 30
    procs = [subprocess.Popen([str(env["tool"]), CATALOG, env["uri"], env["warehouse"], "hammer",
                               "c", "t", w, str(n)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for w in ("w1", "w2", "w3")]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, errtext) in zip(procs, outs):
        assert p.returncode == 0, errtext
    retries = sum(json.loads(out)["retries"] for out, _ in outs)
    t = pyiceberg_catalog(env).load_table("c.t")
    props = t.properties
    for w in ("w1", "w2", "w3"):
        assert {k for k in props if k.startswith(w + ".")} == {f"{w}.{i}" for i in range(n)}
        assert props[f"last.{w}"] == str(n - 1)
    # one metadata file per successful commit, losers' files removed, versions consecutive
    files = sorted(p.name for p in (env["wh"] / "c" / "t" / "metadata").iterdir())
    assert len(files) == 1 + 3 * n
    assert [int(f.split("-")[0]) for f in files] == list(range(1 + 3 * n))
    log = [e.metadata_file for e in t.metadata.metadata_log]
    assert len(log) == 3 * n
    assert [Path(x).name for x in log] == files[:-1]
    assert Path(t.metadata_location).name == files[-1]
    print(f"{3 * n} commits, {retries} conflicts retried")
