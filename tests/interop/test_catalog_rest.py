# SPDX-License-Identifier: Apache-2.0
"""firn's REST catalog client against the Apache Iceberg REST catalog fixture (Java's
RESTCatalogServer over a JdbcCatalog), checked by pyiceberg's RestCatalog as the independent
reader: namespaces (create with properties, list with pagination, exists, update, drop, errors),
tables (create with ids the server assigns, load, exists, list, drop), single-table commits and
the multi-table transaction endpoint.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from rest_fixtures import *  # noqa: F401,F403

SCHEMA = {"type": "struct", "schema-id": 0, "identifier-field-ids": [1], "fields": [
    {"id": 1, "name": "id", "required": True, "type": "long"},
    {"id": 2, "name": "payload", "required": False,
     "type": {"type": "struct", "fields": [
         {"id": 3, "name": "tags", "required": False,
          "type": {"type": "list", "element-id": 4, "element": "string",
                   "element-required": False}}]}},
    {"id": 5, "name": "ts", "required": False, "type": "timestamptz"}]}
SPEC = {"spec-id": 0, "fields": [{"source-id": 5, "field-id": 1000, "name": "ts_day",
                                  "transform": "day"}]}


@pytest.fixture(scope="module")
def catalog_tool(build_dir):
    path = build_dir / "tools" / "catalog_tool"
    if not path.is_file():
        pytest.fail(f"catalog_tool not found at {path}: build the asan preset", pytrace=False)
    return path


def tool(path, loc, *args, check=True, env=None):
    proc = subprocess.run([str(path), "firn", loc.uri, "", *args], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, **(env or {})))
    if check and proc.returncode != 0:
        raise AssertionError(f"catalog_tool {' '.join(args)} exited {proc.returncode}: "
                             f"{proc.stderr}")
    return proc


def test_namespaces(rest_catalog, catalog_tool):
    loc = rest_catalog
    ns = "ns_" + uuid.uuid4().hex[:8]
    tool(catalog_tool, loc, "create-namespace", ns, "owner=firn", "note=snow ❄")
    tool(catalog_tool, loc, "create-namespace", f"{ns}.child")
    for i in range(3):
        tool(catalog_tool, loc, "create-namespace", f"{ns}_{i}")
    py = loc.pyiceberg()
    props = py.load_namespace_properties(ns)
    assert props["owner"] == "firn" and props["note"] == "snow ❄", props
    assert (ns, "child") in py.list_namespaces(ns)

    # a second create is FIRN_ERR_EXISTS with the server's message naming the namespace
    p = tool(catalog_tool, loc, "create-namespace", ns, check=False)
    assert p.returncode == 1 and "FIRN_ERR_EXISTS" in p.stderr and ns in p.stderr, p.stderr
    assert p.stderr.count("\n") == 1, p.stderr  # one line

    # pages of one namespace each: the listing still holds everything, sorted
    listed = json.loads(tool(catalog_tool, loc, "list-namespaces",
                             env={"FIRN_REST_PAGE_SIZE": "1"}).stdout)
    want = sorted(".".join(n) for n in py.list_namespaces())
    assert listed == want and {ns, f"{ns}_0", f"{ns}_2"} <= set(listed), listed
    assert json.loads(tool(catalog_tool, loc, "list-namespaces", ns).stdout) == [f"{ns}.child"]

    assert tool(catalog_tool, loc, "ns-exists", f"{ns}.child").stdout.strip() == "true"
    assert tool(catalog_tool, loc, "ns-exists", f"{ns}.nope").stdout.strip() == "false"
    tool(catalog_tool, loc, "update-ns", ns, "k=v", "-note")
    props = py.load_namespace_properties(ns)
    assert props.get("k") == "v" and "note" not in props and props["owner"] == "firn", props
    tool(catalog_tool, loc, "drop-namespace", f"{ns}_1")
    assert (f"{ns}_1",) not in py.list_namespaces()
    p = tool(catalog_tool, loc, "ns-props", f"{ns}_1", check=False)
    assert p.returncode == 1 and "FIRN_ERR_NOT_FOUND" in p.stderr, p.stderr


def test_tables_and_commits(rest_catalog, catalog_tool, tmp_path):
    loc = rest_catalog
    ns = "tb_" + uuid.uuid4().hex[:8]
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    (tmp_path / "spec.json").write_text(json.dumps(SPEC))
    tool(catalog_tool, loc, "create-namespace", ns)
    out = json.loads(tool(catalog_tool, loc, "create-table", ns, "events",
                          str(tmp_path / "schema.json"), "--spec", str(tmp_path / "spec.json"),
                          "write.format.default=parquet").stdout)
    for name in ("b", "c"):
        tool(catalog_tool, loc, "create-table", ns, name, str(tmp_path / "schema.json"))
    md = out["metadata"]
    tbl = loc.pyiceberg().load_table(f"{ns}.events")
    # the server's ids and location are what firn reports
    assert md["table-uuid"] == str(tbl.metadata.table_uuid)
    assert md["location"] == tbl.location() and md["location"].endswith(f"/{ns}/events")
    assert out["metadata-location"] == tbl.metadata_location
    assert [(f.field_id, f.name) for f in tbl.schema().fields] == [(1, "id"), (2, "payload"),
                                                                   (3, "ts")]
    assert tbl.schema().identifier_field_ids == [1]
    assert [(f.source_id, f.name, str(f.transform)) for f in tbl.spec().fields] == [
        (3, "ts_day", "day")]
    assert tbl.format_version == 2 and tbl.properties["write.format.default"] == "parquet"

    p = tool(catalog_tool, loc, "create-table", ns, "b", str(tmp_path / "schema.json"),
             check=False)
    assert p.returncode == 1 and "FIRN_ERR_EXISTS" in p.stderr and f"{ns}.b" in p.stderr
    assert json.loads(tool(catalog_tool, loc, "list-tables", ns,
                           env={"FIRN_REST_PAGE_SIZE": "2"}).stdout) == ["b", "c", "events"]
    assert tool(catalog_tool, loc, "table-exists", ns, "b").stdout.strip() == "true"
    assert tool(catalog_tool, loc, "table-exists", ns, "zz").stdout.strip() == "false"
    p = tool(catalog_tool, loc, "show", ns, "zz", check=False)
    assert p.returncode == 1 and "FIRN_ERR_NOT_FOUND" in p.stderr and f"{ns}.zz" in p.stderr

    # commits: a property change, a schema evolution (the server keeps the field ids)
    tool(catalog_tool, loc, "set-props", ns, "events", "firn.x=1")
    target = json.loads(json.dumps(SCHEMA))
    target["fields"].append({"id": 99, "name": "extra", "required": False, "type": "int"})
    (tmp_path / "target.json").write_text(json.dumps(target))
    tool(catalog_tool, loc, "evolve", ns, "events", str(tmp_path / "target.json"))
    tbl = loc.pyiceberg().load_table(f"{ns}.events")
    assert tbl.properties["firn.x"] == "1"
    assert tbl.schema().find_field("extra").field_id == 6 and tbl.schema().schema_id == 1

    # concurrent writers on one table: every commit lands
    procs = [subprocess.Popen([str(catalog_tool), "firn", loc.uri, "", "hammer", ns, "b", w, "8"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for w in ("w1", "w2", "w3")]
    results = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), results
    props = loc.pyiceberg().load_table(f"{ns}.b").properties
    assert all(props[f"{w}.{i}"] == str(i) for w in ("w1", "w2", "w3") for i in range(8)), props

    # one transaction over two tables
    tool(catalog_tool, loc, "tx-props", ns, "b", "c", "tx=yes")
    py = loc.pyiceberg()
    assert py.load_table(f"{ns}.b").properties["tx"] == "yes"
    assert py.load_table(f"{ns}.c").properties["tx"] == "yes"

    tool(catalog_tool, loc, "drop-table", ns, "c")
    assert not py.table_exists(f"{ns}.c")
    p = tool(catalog_tool, loc, "drop-namespace", ns, check=False)
    assert p.returncode == 1 and "FIRN_ERR_INVALID" in p.stderr and "not empty" in p.stderr


def firn_check(firn_bin, tmp_path, catalog: dict, storage: dict | None = None):
    dest = {"catalog": catalog}
    if storage:
        dest["storage"] = storage
    path = tmp_path / f"destination-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(dest))
    return subprocess.run([str(firn_bin), "check", "--destination", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_firn_check(firn_bin, rest_catalog, rest_catalog_s3, tmp_path):
    # file:// warehouse: the probe object goes to the warehouse folder and is removed again
    wh = Path(rest_catalog.warehouse[len("file://"):])
    before = set(wh.iterdir())
    p = firn_check(firn_bin, tmp_path, rest_catalog.firn_catalog(warehouse=rest_catalog.warehouse))
    assert p.returncode == 0, p.stderr
    assert "destination ok: rest catalog" in p.stderr, p.stderr
    assert set(wh.iterdir()) == before
    assert not [n for n in rest_catalog.pyiceberg().list_namespaces()
                if n[0].startswith("firn_check_")]
    # s3:// warehouse with the storage settings of destination.json
    s3 = rest_catalog_s3
    p = firn_check(firn_bin, tmp_path, s3.firn_catalog(warehouse=s3.warehouse), s3.firn_storage())
    assert p.returncode == 0, p.stderr
    # vended credentials (issue 26): firn's own storage settings have no keys, or wrong ones;
    # the catalog vends keys for its tables, as firn sync uses them, so the probe goes into a
    # scratch table's location with those and passes; nothing is left in the bucket

    def leftovers():
        return sorted(str(f) for f in (s3.s3.root / s3.s3.bucket).rglob("*")
                      if f.is_file() and ("firn_check_" in str(f) or ".firn-check-" in str(f)))
    keyless = {"endpoint": s3.s3.endpoint, "region": s3.s3.region, "path_style": True}
    bad = dict(s3.firn_storage(), secret_access_key="wrong")
    for storage in (keyless, bad):
        p = firn_check(firn_bin, tmp_path, s3.firn_catalog(warehouse=s3.warehouse), storage)
        assert p.returncode == 0, p.stderr
        assert "destination ok: rest catalog" in p.stderr and "/probe" in p.stderr, p.stderr
        assert not leftovers(), leftovers()
    assert not [n for n in s3.pyiceberg().list_namespaces() if n[0].startswith("firn_check_")]
    # no catalog there
    p = firn_check(firn_bin, tmp_path, {"type": "rest", "uri": "http://127.0.0.1:9/x"})
    assert p.returncode != 0 and "http://127.0.0.1:9/x" in p.stderr, p.stderr


def test_path_like_table_name_gets_a_safe_location(rest_catalog, catalog_tool, tmp_path):
    """The server would place "../../evil" at <namespace location>/../../evil: firn asks for the
    location with the name encoded as the SQL catalog does (docs/configuration.md "Table
    locations")."""
    loc = rest_catalog
    ns = "ev_" + uuid.uuid4().hex[:8]
    nsloc = tmp_path / "nsloc"
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    tool(catalog_tool, loc, "create-namespace", ns, f"location=file://{nsloc}")
    out = json.loads(tool(catalog_tool, loc, "create-table", ns, "../../evil",
                          str(tmp_path / "schema.json")).stdout)
    assert out["metadata"]["location"] == f"file://{nsloc}/..~2F..~2Fevil"
    # (the server writes Hadoop's "file:/path" form)
    assert f"{nsloc}/..~2F..~2Fevil/metadata/" in out["metadata-location"]
    assert not (tmp_path / "evil").exists() and not (tmp_path.parent / "evil").exists()
    tbl = loc.pyiceberg().load_table((ns, "../../evil"))
    assert tbl.location() == f"file://{nsloc}/..~2F..~2Fevil"
    # "." and ".." reach the server as table names, not as path steps
    # ".." is created at an encoded location, and its URL segment is %2E%2E: dropping it drops
    # that table, never the namespace a folded "/tables/.." would name
    out = json.loads(tool(catalog_tool, loc, "create-table", ns, "..",
                          str(tmp_path / "schema.json")).stdout)
    assert out["metadata"]["location"] == f"file://{nsloc}/~2E~2E"
    assert sorted(loc.pyiceberg().list_tables(ns)) == [(ns, ".."), (ns, "../../evil")]
    tool(catalog_tool, loc, "drop-table", ns, "..", check=False)
    assert (ns,) in loc.pyiceberg().list_namespaces()
    assert (ns, "../../evil") in loc.pyiceberg().list_tables(ns)
    # a namespace without its own location: this server reports its default one
    ns2 = ns + "_default"
    tool(catalog_tool, loc, "create-namespace", ns2)
    out = json.loads(tool(catalog_tool, loc, "create-table", ns2, "a/b",
                          str(tmp_path / "schema.json")).stdout)
    nsloc2 = loc.pyiceberg().load_namespace_properties(ns2)["location"]
    assert out["metadata"]["location"] == f"{nsloc2}/a~2Fb"
