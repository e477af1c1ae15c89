# SPDX-License-Identifier: Apache-2.0
"""A REST catalog that refuses commits for a while (an outage), through the fault-injecting proxy
(tests/harness/flaky_proxy.py) in front of the REST catalog fixture:

- a catch-up run whose commits the catalog keeps refusing gives up with one clear line and exit
  4 (destination), not 3 (the CDC phase it failed in), acknowledging nothing it did not commit;
  the next run, with the catalog back, commits every change exactly once.
"""

from __future__ import annotations

import re
import sys
import uuid
from pathlib import Path

from firnsync import snapshot_chain, summary_of
from rest_fixtures import *  # noqa: F401,F403
from sparkutil import canon_rows

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "harness"))
from flaky_proxy import FlakyProxy  # noqa: E402

COLS = ["id", "v", "n"]
SETUP = [
    "CREATE TABLE t1 (id bigint PRIMARY KEY, v text, n int)",
    "INSERT INTO t1 SELECT g, 'a' || g, g FROM generate_series(1, 200) g",
]
COMMIT_RE = re.compile(r"^/v1/namespaces/[^/]+/tables/t1$")


def firn_rows(loc, table):
    arrow = loc.pyiceberg().load_table(table).scan(selected_fields=tuple(COLS)).to_arrow()
    return canon_rows(arrow.select(COLS).to_pylist())


def firn_commit_ids(loc, table) -> list[str]:
    tbl = loc.pyiceberg().load_table(table)
    return [summary_of(s)["firn.commit-id"] for s in snapshot_chain(tbl)
            if "firn.commit-id" in summary_of(s)]


def test_catch_up_gives_up_with_exit_4(firn_job, rest_catalog):
    loc = rest_catalog
    state = {"refuse": False}

    def rule(method, path):
        if state["refuse"] and method == "POST" and COMMIT_RE.match(path):
            return "503"
        return None

    proxy = FlakyProxy(loc.uri, rule=rule).start()
    try:
        ns = "outage_" + uuid.uuid4().hex[:6]
        job = firn_job([{"stream_name": "t1"}], setup=SETUP,
                       catalog=loc.firn_catalog(uri=proxy.url), catalog_loc=loc, namespace=ns)
        job.sync()  # the copy, committed
        lsn0 = job.state()["global"]["state"]["lsn"]
        job.sql("UPDATE t1 SET v = 'changed' WHERE id <= 20", "DELETE FROM t1 WHERE id > 190")
        state["refuse"] = True
        start = len(proxy.log)
        proc = job.sync(check=False)
        refused = [s for m, p, s in proxy.log[start:] if m == "POST" and COMMIT_RE.match(p)]
        state["refuse"] = False
        assert proc.returncode == 4, proc.stderr[-3000:]
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("firn: ")]
        assert len(errors) == 1, proc.stderr[-3000:]
        assert f'could not commit to table "{ns}.t1"' in errors[0], errors
        assert "HTTP 503" in errors[0], errors
        assert len(refused) >= 2 and set(refused) == {503}, refused
        # nothing was acknowledged past what the table holds
        assert job.state()["global"]["state"]["lsn"] == lsn0
        assert len(firn_commit_ids(loc, job.table("t1"))) == 1

        job.sync()  # the catalog is back: the changes are read again from the slot
    finally:
        proxy.stop()
    assert firn_rows(loc, job.table("t1")) == job.source_rows("SELECT id, v, n FROM t1")
    ids = firn_commit_ids(loc, job.table("t1"))
    assert len(ids) == 2 and len(set(ids)) == 2, ids
