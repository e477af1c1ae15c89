# SPDX-License-Identifier: Apache-2.0
"""The exit code follows the side that failed, not the phase the run was in (README "Exit
codes"): object storage that refuses the data files of the initial copy (a fault-injecting proxy,
tests/harness/flaky_proxy.py, answering 503 to every PUT under the table's data folder in front
of the S3 server) ends the run with exit 4 (destination), although the copy reads the source;
with the storage back the next run copies the table, equal to PostgreSQL's by value (pyiceberg).
"""

from __future__ import annotations

import sys
from pathlib import Path

from net_fixtures import s3_server  # noqa: F401 (a fixture)
from sparkutil import canon_rows

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "harness"))
from flaky_proxy import FlakyProxy  # noqa: E402


def test_storage_refusing_the_copy_exits_4(firn_job, s3_server):  # noqa: F811
    s3 = s3_server
    state = {"refuse": True, "refused": 0}

    def rule(method, path):
        if state["refuse"] and method == "PUT" and "/data/" in path:
            state["refused"] += 1
            return "503"
        return None

    proxy = FlakyProxy(s3.endpoint, rule=rule).start()
    try:
        job = firn_job([{"stream_name": "t1"}],
                       setup=["CREATE TABLE t1 (id bigint PRIMARY KEY, v text)",
                              "INSERT INTO t1 SELECT g, 'v' || g FROM generate_series(1, 50) g"])
        prefix = f"s3://{s3.bucket}/exit-side-{job.dbname}"
        job.catalog = {"type": "sql", "name": "firn", "uri": f"sqlite:///{job.workdir}/cat.db",
                       "warehouse": prefix}
        job.storage = {"endpoint": proxy.url, "region": s3.region,
                       "access_key_id": s3.access_key, "secret_access_key": s3.secret_key,
                       "path_style": True}
        proc = job.sync(check=False)
        assert state["refused"] >= 1, proxy.log
        assert proc.returncode == 4, proc.stderr[-3000:]
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("firn: ")]
        assert len(errors) == 1 and "HTTP 503" in errors[0], proc.stderr[-3000:]
        state["refuse"] = False
        job.sync()
    finally:
        proxy.stop()
    from pyiceberg.catalog.sql import SqlCatalog

    cat = SqlCatalog("firn", uri=f"sqlite:///{job.workdir}/cat.db", warehouse=prefix,
                     **{"s3.endpoint": s3.endpoint, "s3.access-key-id": s3.access_key,
                        "s3.secret-access-key": s3.secret_key, "s3.region": s3.region})
    arrow = cat.load_table(job.table("t1")).scan(selected_fields=("id", "v")).to_arrow()
    assert canon_rows(arrow.select(["id", "v"]).to_pylist()) == \
        job.source_rows("SELECT id, v FROM t1")
