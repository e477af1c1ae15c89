# SPDX-License-Identifier: Apache-2.0
"""firn serve through its JSON API (issue 30, docs/serve.md): first-run setup with the setup
token, sign-in, a source on the harness's PostgreSQL and a destination on a local SQLite
catalog, both tested with `firn check`; table discovery; a job that copies two tables; its run
succeeds and the Iceberg tables equal the source value by value (pyiceberg and DuckDB); a second
run carries a change made in between (CDC); the job's files are the CLI's own (`firn status`
reads them); secrets never come back from the API and are not in the job's files; a killed
server's unfinished run becomes `abandoned` at the next start."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time

import pytest

from serveutil import drop_slots, PASSWORD, Serve, destination_body, source_body, wait_until
from sparkutil import SqlCatalogLoc

SCHEMA = """
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, balance numeric(10, 2));
INSERT INTO customers SELECT g, 'customer ' || g, g * 1.25 FROM generate_series(1, 500) g;
CREATE TABLE orders (id bigint PRIMARY KEY, customer int, placed date, note text);
INSERT INTO orders SELECT g, g % 50 + 1, date '2026-01-01' + g % 300, NULL
  FROM generate_series(1, 2000) g;
CREATE TABLE ignored (id int PRIMARY KEY);
"""


@pytest.fixture
def serve(firn_bin, tmp_path):
    s = Serve(firn_bin, tmp_path / "data").start()
    yield s
    s.stop()


def table_rows(loc: SqlCatalogLoc, name: str, cols: list[str]) -> list[tuple]:
    tbl = loc.pyiceberg().load_table(f"lake.{name}").scan(selected_fields=tuple(cols))
    arrow = tbl.to_arrow()
    return sorted(zip(*(arrow.column(c).to_pylist() for c in cols)))


def duck_rows(duck, loc: SqlCatalogLoc, name: str, cols: list[str]) -> list[tuple]:
    meta = loc.metadata_location(f"lake.{name}")
    q = f"SELECT {', '.join(cols)} FROM iceberg_scan('{meta}') ORDER BY ALL"
    return [tuple(r) for r in duck.execute(q).fetchall()]


def src_rows(pg, db, name, cols):
    with pg.connect(dbname=db) as conn:
        return sorted(tuple(r) for r in conn.execute(
            f"SELECT {', '.join(cols)} FROM {name}").fetchall())


def test_setup_source_destination_job_run(serve, pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
    api = serve.client()
    assert api.ok("GET", "/setup") == {"needed": True}
    me = api.setup(serve.setup_token())
    assert me["user"] == {"id": 1, "username": "admin", "role": "admin"}
    assert not (serve.data / "setup-token").exists()
    assert api.ok("GET", "/setup") == {"needed": False}

    src = api.ok("POST", "/sources", {**source_body(pg, pg_db), "password": "pw-not-needed"},
                 status=201)
    assert src["config"]["secrets_set"] == ["password"]
    assert "pw-not-needed" not in json.dumps(api.ok("GET", "/sources"))
    test = api.ok("POST", f"/sources/{src['id']}/test")
    assert test["ok"], test["output"]
    assert "check: ok (source)" in test["output"]

    dst_root = tmp_path / "lake"
    dst = api.ok("POST", "/destinations", destination_body(dst_root), status=201)
    test = api.ok("POST", f"/destinations/{dst['id']}/test")
    assert test["ok"], test["output"]

    found = api.ok("POST", f"/sources/{src['id']}/discover")["tables"]
    names = sorted((t["namespace"], t["name"]) for t in found)
    assert names == [("public", "customers"), ("public", "ignored"), ("public", "orders")]
    assert next(t for t in found if t["name"] == "orders")["primary_key"] == ["id"]

    job = api.ok("POST", "/jobs", {
        "name": "shop", "source_id": src["id"], "destination_id": dst["id"],
        "tables": [{"namespace": "public", "name": "customers"},
                   {"namespace": "public", "name": "orders", "sync_mode": "full_refresh_cdc"}],
        "schedule": {"kind": "manual"}}, status=201)
    folder = serve.data / "jobs" / str(job["id"])
    streams = json.loads((folder / "streams.json").read_text())
    assert sorted(e["stream_name"] for e in streams["selected_streams"]["public"]) == [
        "customers", "orders"]

    run = api.ok("POST", f"/jobs/{job['id']}/run", status=202)
    # one run per job at a time
    again = api.call("POST", f"/jobs/{job['id']}/run")
    ended = api.wait_run(run["run_id"])
    assert ended["state"] == "succeeded", api.run_log(run["run_id"])
    assert again.status_code in (202, 409)
    if again.status_code == 202:  # the first run had ended already
        api.wait_run(again.json()["run_id"])

    loc = SqlCatalogLoc(dst_root / "catalog.db", dst_root / "warehouse", "firn")
    ccols = ["id", "name", "balance"]
    ocols = ["id", "customer", "placed", "note"]
    assert table_rows(loc, "customers", ccols) == src_rows(pg, pg_db, "customers", ccols)
    assert table_rows(loc, "orders", ocols) == src_rows(pg, pg_db, "orders", ocols)
    assert duck_rows(duck, loc, "orders", ocols) == src_rows(pg, pg_db, "orders", ocols)
    tables = {".".join(t) for t in loc.pyiceberg().list_tables("lake")}
    assert tables == {"lake.customers", "lake.orders"}

    # CDC: a change between runs lands with the next run
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("UPDATE customers SET name = 'renamed', balance = 0 WHERE id = 7")
        conn.execute("DELETE FROM orders WHERE id <= 10")
        conn.execute("INSERT INTO orders VALUES (9001, 3, '2026-06-01', 'late')")
    run2 = api.ok("POST", f"/jobs/{job['id']}/run", status=202)
    assert api.wait_run(run2["run_id"])["state"] == "succeeded", api.run_log(run2["run_id"])
    assert table_rows(loc, "customers", ccols) == src_rows(pg, pg_db, "customers", ccols)
    assert table_rows(loc, "orders", ocols) == src_rows(pg, pg_db, "orders", ocols)

    # the overview and job detail read the run's stats.json
    detail = api.ok("GET", f"/jobs/{job['id']}")
    assert detail["state"] == "idle"
    assert detail["last_run"]["state"] == "succeeded"
    assert detail["stats"]["phase"] == "finished"
    assert {s["stream"] for s in detail["streams"]} == {"public.customers", "public.orders"}
    runs = api.ok("GET", f"/jobs/{job['id']}/runs?limit=1")
    assert [r["id"] for r in runs["items"]] == [run2["run_id"]]
    assert runs["next_before"] == run2["run_id"]
    older = api.ok("GET", f"/jobs/{job['id']}/runs?limit=5&before={runs['next_before']}")
    assert run["run_id"] in [r["id"] for r in older["items"]]

    # logs page by byte ranges: two halves make the whole
    whole = api.ok("GET", f"/runs/{run['run_id']}/logs?offset=0&limit=1048576")
    assert whole["size"] == len(whole["text"].encode()) and whole["size"] > 0
    half = whole["size"] // 2
    a = api.ok("GET", f"/runs/{run['run_id']}/logs?offset=0&limit={half}")
    b = api.ok("GET", f"/runs/{run['run_id']}/logs?offset={a['end']}&limit=1048576")
    assert (a["text"] + b["text"]).encode() == whole["text"].encode() or "?" in a["text"]
    last = api.ok("GET", f"/runs/{run['run_id']}/logs?limit=100")
    assert last["end"] == whole["size"] and last["offset"] == whole["size"] - 100

    # the job's files are the CLI's: firn status reads them as they are
    env = {"PATH": "/usr/bin:/bin", "FIRN_SOURCE_PASSWORD": "pw-not-needed"}
    st = subprocess.run([str(firn_bin), "status", "--streams", str(folder / "streams.json"),
                         "--state", str(folder / "state.json")], capture_output=True,
                        text=True, env=env, timeout=60)
    assert st.returncode == 0, st.stderr
    assert "public.orders" in st.stdout and "public.customers" in st.stdout
    source_json = (folder / "source.json").read_text()
    assert "pw-not-needed" not in source_json
    assert json.loads(source_json)["password"] == "${FIRN_SOURCE_PASSWORD}"
    iid = (serve.data / "instance-id").read_text().strip()
    assert json.loads(source_json)["slot"] == f"firn_{iid}_job{job['id']}" == detail["slot"]

    # secrets at rest: the database holds ciphertext only
    db = sqlite3.connect(serve.data / "firn-serve.db")
    blob = db.execute("SELECT secrets FROM sources").fetchone()[0]
    assert b"pw-not-needed" not in blob and len(blob) > 28
    db.close()
    assert "pw-not-needed" not in serve.log.read_text()
    for log in (serve.data / "runs").iterdir():
        assert "pw-not-needed" not in log.read_text()

    # a source in use cannot be deleted; the job first
    assert api.call("DELETE", f"/sources/{src['id']}").status_code == 409
    drop_slots(pg, pg_db)


def test_test_connection_reports_the_servers_error(serve, pg, pg_db, tmp_path):
    api = serve.client()
    api.setup(serve.setup_token())
    bad = api.ok("POST", "/sources", {**source_body(pg, pg_db, "bad"),
                                      "database": "no_such_db_here"}, status=201)
    res = api.ok("POST", f"/sources/{bad['id']}/test")
    assert not res["ok"] and res["exit_code"] == 3
    assert 'database "no_such_db_here" does not exist' in res["output"]
    # a destination whose warehouse cannot be made
    (tmp_path / "file").write_text("x")
    d = api.ok("POST", "/destinations", {"name": "d", "catalog_type": "sql",
                                         "warehouse": str(tmp_path / "file" / "wh")}, status=201)
    res = api.ok("POST", f"/destinations/{d['id']}/test")
    assert not res["ok"] and res["exit_code"] in (2, 4), res
    # bad input: one problem naming the field
    r = api.call("POST", "/sources", {"name": "x", "host": "h", "database": "d",
                                      "username": "u", "port": 99999})
    assert r.status_code == 422 and r.headers["Content-Type"] == "application/problem+json"
    assert '"port"' in r.json()["detail"]
    r = api.call("POST", "/destinations", {"name": "y", "catalog_type": "glue"})
    assert r.status_code == 422 and "catalog_type" in r.json()["detail"]
    r = api.call("POST", "/sources", {"name": "z", "host": "h", "database": "d",
                                      "username": "u", "colour": "blue"})
    assert r.status_code == 422 and "colour" in r.json()["detail"]


def test_auth_csrf_and_throttling(serve):
    api = serve.client()
    # before setup: nothing but setup
    assert api.call("GET", "/jobs").status_code == 401
    r = api.call("POST", "/setup", {"setup_token": "wrong", "username": "admin",
                                    "password": PASSWORD})
    assert r.status_code == 403
    r = api.call("POST", "/setup", {"setup_token": serve.setup_token(), "username": "admin",
                                    "password": "short"})
    assert r.status_code == 422
    api.setup(serve.setup_token())
    assert api.call("POST", "/setup", {"setup_token": "x", "username": "b",
                                       "password": PASSWORD}).status_code == 409

    anon = serve.client()
    for path in ("/me", "/sources", "/destinations", "/jobs", "/runs/1", "/tokens"):
        assert anon.call("GET", path).status_code == 401, path
    assert anon.call("POST", "/sources", {"name": "x"}).status_code == 401

    # CSRF: the session cookie alone does not change anything
    body = {"name": "n", "catalog_type": "sql", "warehouse": "/tmp/x"}
    assert api.call("POST", "/destinations", body, csrf=False).status_code == 403
    assert api.call("POST", "/destinations", body,
                    headers={"X-CSRF-Token": "0" * 64}).status_code == 403
    assert api.call("POST", "/destinations", body,
                    headers={"Origin": "http://evil.example"}).status_code == 403
    assert api.call("POST", "/destinations", body,
                    headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert api.call("POST", "/destinations", body).status_code == 201
    # a form post (not JSON) is refused before anything else
    r = api.http.post(api.url + "/api/v1/destinations", data="name=x",
                      headers={"Origin": api.url, "X-CSRF-Token": api.csrf,
                               "Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 415

    # API tokens: bearer, no CSRF, shown once, stored hashed
    tok = api.ok("POST", "/tokens", {"name": "ci"}, status=201)
    bearer = serve.client()
    r = bearer.http.get(bearer.url + "/api/v1/destinations",
                        headers={"Authorization": "Bearer " + tok["token"]})
    assert r.status_code == 200 and r.json()["items"][0]["name"] == "n"
    assert "token" not in api.ok("GET", "/tokens")["items"][0]
    r = bearer.http.get(bearer.url + "/api/v1/me", headers={"Authorization": "Bearer firn_x"})
    assert r.status_code == 401
    api.ok("DELETE", f"/tokens/{tok['id']}", status=204)
    r = bearer.http.get(bearer.url + "/api/v1/me",
                        headers={"Authorization": "Bearer " + tok["token"]})
    assert r.status_code == 401

    # wrong password: 401, then throttled (429 with Retry-After) even for the right one
    other = serve.client()
    for _ in range(5):
        assert other.login(password="wrong password!").status_code == 401
    r = other.login()
    assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0
    assert other.login(username="nobody").status_code == 401

    # sign-out ends the session
    assert api.call("DELETE", "/session").status_code == 204
    assert api.call("GET", "/me").status_code == 401


def test_killed_server_leaves_the_run_abandoned(firn_bin, pg, pg_db, tmp_path):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 100) g")
    s = Serve(firn_bin, tmp_path / "data").start()
    try:
        api = s.client()
        api.setup(s.setup_token())
        src = api.ok("POST", "/sources", source_body(pg, pg_db), status=201)
        dst = api.ok("POST", "/destinations", destination_body(tmp_path / "lake"), status=201)
        job = api.ok("POST", "/jobs", {"name": "j", "source_id": src["id"],
                                       "destination_id": dst["id"],
                                       "tables": [{"namespace": "public", "name": "t"}],
                                       "schedule": {"kind": "continuous"}}, status=201)
        # continuous: the scheduler starts it; wait until it streams
        def streaming():
            j = api.ok("GET", f"/jobs/{job['id']}")
            return j if j["state"] == "running" and j["stats"].get("phase") == "cdc" else None
        running = wait_until(streaming, 180, "the continuous job to stream")
        run_id = running["last_run"]["id"]
        pid = api.ok("GET", f"/runs/{run_id}")["pid"]
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait(timeout=30)
        # the child outlives the killed server; the next server stops it and abandons the run
        s2 = Serve(firn_bin, tmp_path / "data")
        s2.log = tmp_path / "data-serve2.log"
        s2.start()
        try:
            api2 = s2.client()
            assert api2.login().status_code == 200
            run = api2.ok("GET", f"/runs/{run_id}")
            assert run["state"] == "abandoned"
            assert "stopped while this run was running" in run["error"]
            assert not _alive(pid), "the old firn sync still runs"
            # a stopped (paused) continuous job does not come back by itself
            api2.ok("POST", f"/jobs/{job['id']}/stop", status=(202, 409))
        finally:
            s2.stop()
    finally:
        s.kill()
        drop_slots(pg, pg_db)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False

