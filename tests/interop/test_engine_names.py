# SPDX-License-Identifier: Apache-2.0
"""Names firn takes from the source or the streams file are data, never paths or SQL: a table
named like a path (`../../../../tmp/pgevil`) or a `target_table` of the same kind is written
inside the warehouse (its folder name escapes '/', '\\', '%', '~' as ~XX, docs/configuration.md
"Table locations"), a schema with a dot in its name syncs, an empty warehouse is refused; the
remedies `firn check` prints quote identifiers as PostgreSQL does and check the replica identity
before the publication's coverage."""

from __future__ import annotations

import json
import os
from pathlib import Path

from firnutil import FirnEnv


def qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def all_files(root: Path) -> set[str]:
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}


def test_path_like_names_stay_in_the_warehouse(pg, pg_db, firn_bin, tmp_path):
    evil_src = "../../../../tmp/pgevil"
    evil_target = "../../../tmp/evil"
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(f'CREATE TABLE {qi(evil_src)} (id int PRIMARY KEY, v text)')
        conn.execute(f"INSERT INTO {qi(evil_src)} VALUES (1, 'one'), (2, 'two')")
        conn.execute("CREATE TABLE plain (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO plain VALUES (7, 'seven')")
        conn.execute('CREATE SCHEMA "my.sch"')
        conn.execute('CREATE TABLE "my.sch".plain (id int PRIMARY KEY, v text)')
        conn.execute("""INSERT INTO "my.sch".plain VALUES (3, 'three')""")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.write_source(pg, slot=f"firn_{pg_db}", publication=f"firn_{pg_db}")
    fe.write_destination(namespace="{schema}")
    fe.streams.write_text(json.dumps({"selected_streams": {
        "public": [{"stream_name": evil_src},
                   {"stream_name": "plain", "target_table": evil_target}],
        "my.sch": [{"stream_name": "plain"}]}}))
    before = all_files(tmp_path.parent)
    fe.sync()
    created = all_files(tmp_path.parent) - before
    outside = sorted(p for p in created if not p.startswith(str(tmp_path) + "/"))
    assert outside == []
    ns_dir = fe.warehouse / "public"
    for name in (evil_src, evil_target):
        assert not os.path.exists(os.path.normpath(ns_dir / name)), name
    assert sorted(os.listdir(ns_dir)) == ["..~2F..~2F..~2F..~2Ftmp~2Fpgevil",
                                          "..~2F..~2F..~2Ftmp~2Fevil"]
    data = [p for p in created if p.endswith(".parquet")]
    assert data and all(p.startswith(str(fe.warehouse) + "/") for p in data), data
    cat = fe.catalog()
    rows = lambda ns, t: sorted(cat.load_table(tuple(ns.split(".")) + (t,)).scan(  # noqa: E731
        selected_fields=("id", "v")).to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows("public", evil_src) == [{"id": 1, "v": "one"}, {"id": 2, "v": "two"}]
    assert rows("public", evil_target) == [{"id": 7, "v": "seven"}]
    assert rows("my.sch", "plain") == [{"id": 3, "v": "three"}]
    assert cat.load_table(("public", evil_src)).location() == \
        f"file://{ns_dir}/..~2F..~2F..~2F..~2Ftmp~2Fpgevil"


def test_empty_warehouse_is_an_error(pg, pg_db, firn_bin, tmp_path):
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.setup(pg, ["t"])
    for wh in ("", "file://"):
        doc = json.loads(fe.destination.read_text())
        doc["catalog"]["warehouse"] = wh
        fe.destination.write_text(json.dumps(doc))
        proc = fe.run("check", "--destination", str(fe.destination), "--log", "error")
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == f'firn: {fe.destination}: "catalog.warehouse" must not be empty\n'
