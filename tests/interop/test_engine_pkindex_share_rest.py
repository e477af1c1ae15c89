# SPDX-License-Identifier: Apache-2.0
"""The key index next to the table through the Apache Iceberg REST catalog fixture with an S3
warehouse (versitygw): the copy is written through firn's S3 FileIO under
<table location>/metadata/firn-index/, a run with an empty index_dir downloads it from the
bucket, a missing run object makes the next one rebuild. pyiceberg (RestCatalog over S3) returns
the PostgreSQL rows after every run."""

from __future__ import annotations

import uuid

from rest_fixtures import *  # noqa: F401,F403
from sparkutil import canon_rows

SETUP = [
    "CREATE TABLE items (id int8 PRIMARY KEY, v text, n int4)",
    "INSERT INTO items SELECT g, 'v' || g, g % 100 FROM generate_series(1, 30000) g",
]
COLS = ["id", "v", "n"]


def change(job, k: int) -> None:
    job.sql(f"UPDATE items SET v = v || 'u{k}' WHERE id % 37 = {k}",
            f"DELETE FROM items WHERE id % 41 = {k + 1}",
            f"INSERT INTO items SELECT 100000 + {k} * 1000 + g, 'new', g FROM "
            "generate_series(1, 200) g")


def rows(loc, job):
    arrow = loc.pyiceberg().load_table(job.table("items")).scan().to_arrow()
    return canon_rows(arrow.select(COLS).to_pylist())


def test_index_next_to_table_on_s3(firn_job, rest_catalog_s3, tmp_path):
    loc = rest_catalog_s3
    job = firn_job([{"stream_name": "items"}], setup=SETUP, catalog=loc.firn_catalog(),
                   catalog_loc=loc, namespace="r_" + uuid.uuid4().hex[:8],
                   storage=loc.firn_storage())

    def run(index_dir: str) -> str:
        job.destination_extra = {"index_dir": str(tmp_path / index_dir),
                                 "index_memory_limit": "4MiB"}
        job.sync()
        assert rows(loc, job) == job.source_rows(f"SELECT {', '.join(COLS)} FROM items")
        return (job.workdir / f"sync-{job.runs}.log").read_text()

    log = run("a")
    assert "key index uploaded next to the table" in log, log[-3000:]
    tbl = loc.pyiceberg().load_table(job.table("items"))
    assert tbl.location().startswith(f"s3://{loc.s3.bucket}/")
    prefix = tbl.location()[len(f"s3://{loc.s3.bucket}/"):] + "/metadata/firn-index"
    folder = loc.s3.root / loc.s3.bucket / prefix
    runs = sorted(folder.glob("run-*.pkr"))
    assert runs and len(list(folder.glob("index-*.pkm"))) == 1, list(folder.iterdir())

    change(job, 1)
    log = run("b")  # a new host: downloaded from the bucket, no key column read
    assert "key index downloaded from the table" in log, log[-3000:]
    assert "key index loaded" not in log, log[-3000:]
    ref = loc.pyiceberg().load_table(job.table("items")).current_snapshot().summary \
        .additional_properties.get("firn.key-index", "")
    assert ref.startswith(f"s3://{loc.s3.bucket}/{prefix}/index-"), ref

    for p in folder.glob("run-*.pkr"):
        p.unlink()
    change(job, 2)
    log = run("c")
    assert "key index next to the table not usable, rebuilding it" in log, log[-3000:]
    assert "key index loaded" in log
    change(job, 3)
    log = run("d")
    assert "key index downloaded from the table" in log, log[-3000:]
