# SPDX-License-Identifier: Apache-2.0
"""Identity partition values and partition column names outside plain ASCII (issue 24, item 4):
`zürich`, `a b/c%d`, a partition column named `é`. Partition folders are URL-encoded as Iceberg
Java and pyiceberg name them (`region=z%C3%BCrich`); the path a manifest records must be the
object's real name, byte for byte, on a local warehouse, on S3 (versitygw) and on GCS
(fake-gcs-server), so that pyiceberg and DuckDB open the files firn wrote. Each table is
compared with the source value by value, and read back by partition value."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

from net_fixtures import *  # noqa: F401,F403
from pyiceberg.expressions import EqualTo

from firnutil import FirnEnv, compare_table

SCHEMA = """
CREATE TABLE places (id int PRIMARY KEY, region text, "é" text, n int);
INSERT INTO places VALUES (1, 'zürich', 'é1', 10), (2, 'a b/c%d', 'x y', 20),
  (3, 'plain', '%41', 30), (4, NULL, NULL, 40), (5, 'zürich', 'ü/..', 50);
"""

CHANGES = [
    "INSERT INTO places VALUES (6, 'zürich', 'é1', 60), (7, '+%2B ~', '~', 70)",
    "UPDATE places SET n = n + 1 WHERE region = 'zürich'",
    "DELETE FROM places WHERE id = 2",
]

STREAMS = [("places", {"partition": ["region", "é"]})]


class ObjectEnv(FirnEnv):
    """A FirnEnv whose SQL catalog keeps its warehouse on object storage."""

    warehouse_url: str = ""
    io_props: dict = {}

    def catalog(self):
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog("firn", uri=f"sqlite:///{self.catalog_db}",
                          warehouse=self.warehouse_url, **self.io_props)


def check_by_value(fe, duck, conn, with_duck: bool = True):
    """Rows read back by each partition value (pruned through the manifests' partition tuples)
    equal the source's."""
    ice = fe.catalog().load_table("e2e.places")
    loc = fe.metadata_location("places")
    rows = conn.execute('SELECT id, region, "é" FROM places').fetchall()
    for col, at in (("region", 1), ("é", 2)):
        for v in sorted({r[at] for r in rows if r[at] is not None}):
            want = sorted(r[0] for r in rows if r[at] == v)
            got = sorted(ice.scan(row_filter=EqualTo(col, v)).to_arrow().column("id").to_pylist())
            assert got == want, (col, v, got, want)
            if with_duck:
                got = sorted(r[0] for r in duck.execute(
                    f'SELECT id FROM iceberg_scan(\'{loc}\') WHERE "{col}" = ?', [v]).fetchall())
                assert got == want, (col, v, got, want)


def data_paths(fe) -> list[str]:
    ice = fe.catalog().load_table("e2e.places")
    return [t.file.file_path for t in ice.scan().plan_files()]


def run_workload(pg, pg_db, fe, duck, check_paths, with_duck: bool = True):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
        fe.sync()
        for round_ in range(2):
            paths = data_paths(fe)
            assert any("/region=z%C3%BCrich/%C3%A9=%C3%A91/" in p for p in paths), paths
            assert any("/region=a+b%2Fc%25d/" in p for p in paths) or round_ == 1, paths
            check_paths(paths)
            if with_duck:
                compare_table(fe, conn, duck, "places")
            check_by_value(fe, duck, conn, with_duck)
            for sql in CHANGES if round_ == 0 else []:
                conn.execute(sql)
            if round_ == 0:
                fe.sync()
        assert any("/region=%2B%252B+%7E/%C3%A9=%7E/" in p for p in data_paths(fe))


def test_partition_paths_local(pg, pg_db, firn_bin, duck, tmp_path):
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.write_source(pg)
    fe.write_destination()
    fe.write_streams(STREAMS)

    def check_paths(paths):
        for p in paths:
            assert p.startswith("file://"), p
            assert Path(p[len("file://"):]).is_file(), f"manifest path {p} is not a file"

    run_workload(pg, pg_db, fe, duck, check_paths)


def test_partition_paths_s3(pg, pg_db, firn_bin, duck, tmp_path, s3_server):
    from duckdb_extensions import import_extension

    fe = ObjectEnv(firn_bin, tmp_path / "firn", pg_db)
    prefix = f"pp-{uuid.uuid4().hex[:8]}"
    fe.warehouse_url = f"s3://{s3_server.bucket}/{prefix}"
    fe.io_props = {"s3.endpoint": s3_server.endpoint, "s3.access-key-id": s3_server.access_key,
                   "s3.secret-access-key": s3_server.secret_key, "s3.region": s3_server.region,
                   "s3.force-virtual-addressing": "false"}
    fe.write_source(pg)
    fe.write_destination(catalog={"type": "sql", "name": "firn",
                                  "uri": f"sqlite:///{fe.catalog_db}",
                                  "warehouse": fe.warehouse_url},
                         storage={"endpoint": s3_server.endpoint, "region": s3_server.region,
                                  "access_key_id": s3_server.access_key,
                                  "secret_access_key": s3_server.secret_key,
                                  "path_style": True})
    fe.write_streams(STREAMS)
    import_extension("httpfs", con=duck)
    duck.execute("LOAD httpfs")
    host = s3_server.endpoint.partition("://")[2]
    duck.execute(f"CREATE SECRET (TYPE s3, KEY_ID '{s3_server.access_key}', SECRET "
                 f"'{s3_server.secret_key}', REGION '{s3_server.region}', ENDPOINT '{host}', "
                 "URL_STYLE 'path', USE_SSL false)")
    afs = s3_server.pyarrow_fs()

    def check_paths(paths):
        from pyarrow import fs

        for p in paths:
            assert p.startswith(f"s3://{s3_server.bucket}/{prefix}/"), p
            # The key as the independent client (AWS SDK for C++) and the server's own folder
            # see it: exactly the manifest's text after the bucket.
            key = p[len("s3://"):]
            assert afs.get_file_info(key).type == fs.FileType.File, p
            assert (s3_server.root / key).is_file(), p

    run_workload(pg, pg_db, fe, duck, check_paths)


def _gcs_names(gcs_server, prefix: str) -> set[str]:
    names, token = set(), None
    while True:
        q = {"prefix": prefix}
        if token:
            q["pageToken"] = token
        url = (f"{gcs_server.endpoint}/storage/v1/b/{gcs_server.bucket}/o?"
               f"{urllib.parse.urlencode(q)}")
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.load(r)
        names |= {o["name"] for o in doc.get("items", [])}
        token = doc.get("nextPageToken")
        if not token:
            return names


def test_partition_paths_gcs(pg, pg_db, firn_bin, duck, tmp_path, gcs_server, monkeypatch):
    """DuckDB reads gs:// through the XML API, which fake-gcs-server lacks: pyiceberg (Arrow's
    google-cloud-cpp client) reads the table, and the JSON API lists the object names."""
    fe = ObjectEnv(firn_bin, tmp_path / "firn", pg_db)
    prefix = f"pp-{uuid.uuid4().hex[:8]}"
    fe.warehouse_url = f"gs://{gcs_server.bucket}/{prefix}"
    fe.io_props = {"gcs.service.host": gcs_server.endpoint, "gcs.oauth2.token": "unused",
                   "gcs.oauth2.token-expires-at": str(4102444800000)}
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_server.endpoint)
    fe.write_source(pg)
    fe.write_destination(catalog={"type": "sql", "name": "firn",
                                  "uri": f"sqlite:///{fe.catalog_db}",
                                  "warehouse": fe.warehouse_url})
    fe.write_streams(STREAMS)

    def check_paths(paths):
        names = _gcs_names(gcs_server, prefix + "/")
        for p in paths:
            assert p.startswith(f"gs://{gcs_server.bucket}/{prefix}/"), p
            assert p[len(f"gs://{gcs_server.bucket}/"):] in names, (p, sorted(names))

    run_workload(pg, pg_db, fe, duck, check_paths, with_duck=False)


def test_partition_paths_after_kills(pg, pg_db, firn_bin, duck, tmp_path):
    """firn killed (SIGKILL at its crash points) in the copy and in commits of changes that move
    rows between partition folders, restarted each time: the files the manifests list exist
    under exactly their recorded paths, and the table equals the source."""
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.write_source(pg)
    fe.write_destination()
    fe.write_streams(STREAMS)
    regions = ["zürich", "a b/c%d", "+%2B ~", "ß/..", None]
    points = ["backfill-batch", "after-upload", "after-commit", "before-ack", "after-upload",
              "after-commit", "before-ack"]
    killed = 0
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
        for i, point in enumerate(points):
            proc = fe.sync(env={"FIRN_TEST_CRASH": f"{point}:1"}, check=False)
            assert proc.returncode in (0, -9), proc.stderr[-3000:]
            killed += proc.returncode == -9
            conn.execute("INSERT INTO places VALUES (%s, %s, %s, %s)",
                         (100 + i, regions[i % len(regions)], f"é{i % 2}", i))
            conn.execute("UPDATE places SET region = %s, \"é\" = %s WHERE id = %s",
                         (regions[(i + 1) % len(regions)], "ü/..", 1 + i % 5))
        fe.sync()
        assert killed >= len(points) // 2, killed
        for p in data_paths(fe):
            assert Path(p[len("file://"):]).is_file(), f"manifest path {p} is not a file"
        compare_table(fe, conn, duck, "places")
        check_by_value(fe, duck, conn)
