# SPDX-License-Identifier: Apache-2.0
"""firn serve: users and roles (an admin adds an operator and a viewer; the viewer cannot change
anything, the operator runs and stops but cannot create or delete; a password change ends the
user's sessions) and cron schedules (invalid expressions rejected with the field named; the next
three fire times the server computes equal an independent minute-by-minute computation here,
Vixie's day-of-month OR day-of-week rule included)."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from serveutil import PASSWORD, Serve, destination_body, drop_slots, source_body


@pytest.fixture
def serve(firn_bin, tmp_path):
    s = Serve(firn_bin, tmp_path / "data").start()
    yield s
    s.stop()


def expand(field: str, lo: int, hi: int, names: list[str] | None = None) -> set[int]:
    out: set[int] = set()
    for item in field.split(","):
        step = 1
        if "/" in item:
            item, st = item.split("/")
            step = int(st)
        if item == "*":
            a, b = lo, hi
        else:
            def val(x):
                if names and x.lower()[:3] in names:
                    return names.index(x.lower()[:3]) + lo
                return int(x)
            a, _, b2 = item.partition("-")
            a = val(a)
            b = val(b2) if b2 else a
        out.update(range(a, b + 1, step))
    return out


def next_fires(expr: str, after: int, n: int = 3) -> list[int]:
    """Minute-by-minute reference of cron's next fire times (UTC)."""
    f = expr.split()
    minutes, hours = expand(f[0], 0, 59), expand(f[1], 0, 23)
    doms = expand(f[2], 1, 31)
    months = expand(f[3], 1, 12, ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug",
                                  "sep", "oct", "nov", "dec"])
    dows = {d % 7 for d in expand(f[4], 0, 7, ["sun", "mon", "tue", "wed", "thu", "fri",
                                               "sat"])}
    out = []
    t = after - after % 60 + 60
    while len(out) < n:
        d = dt.datetime.fromtimestamp(t, dt.timezone.utc)
        dom_ok, dow_ok = d.day in doms, (d.isoweekday() % 7) in dows
        day_ok = (dom_ok or dow_ok) if (f[2] != "*" and f[4] != "*") else (dom_ok and dow_ok)
        if d.minute in minutes and d.hour in hours and d.month in months and day_ok:
            out.append(t)
        t += 60
    return out


def test_cron_preview_matches_reference_and_rejects_bad_ones(serve):
    api = serve.client()
    api.setup(serve.setup_token())
    for expr in ("*/15 * * * *", "0 12 * * mon-fri", "30 2 1,15 * *", "0 0 13 * fri",
                 "5-10/2 3 * jan,jul *", "0 0 * * 7", "17 */5 * * *"):
        for _ in range(3):  # a minute boundary between the two computations: compute again
            before = int(time.time())
            got = api.ok("POST", "/cron-preview", {"cron": expr})["next_runs"]
            if int(time.time()) // 60 == before // 60:
                break
        assert got == next_fires(expr, before), expr
    assert api.ok("POST", "/cron-preview", {"cron": "@daily"})["next_runs"] == next_fires(
        "0 0 * * *", int(time.time()))
    for bad, word in (("61 * * * *", "minute"), ("* * * *", "5 fields"),
                      ("* 24 * * *", "hour"), ("* * * * * *", "one too many"),
                      ("*/0 * * * *", "step"), ("* * * foo *", "month"), ("@sometimes", "@")):
        r = api.call("POST", "/cron-preview", {"cron": bad})
        assert r.status_code == 422 and word in r.json()["detail"], (bad, r.text)
    r = api.call("POST", "/cron-preview", {"cron": "0 0 30 2 *"})
    assert r.status_code == 422 and "never fires" in r.json()["detail"]


def test_roles_and_cron_jobs(serve, pg, pg_db, tmp_path):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 50) g")
    admin = serve.client()
    admin.setup(serve.setup_token())
    src = admin.ok("POST", "/sources", source_body(pg, pg_db), status=201)
    dst = admin.ok("POST", "/destinations", destination_body(tmp_path / "lake"), status=201)
    tables = [{"namespace": "public", "name": "t"}]
    r = admin.call("POST", "/jobs", {"name": "bad", "source_id": src["id"],
                                     "destination_id": dst["id"], "tables": tables,
                                     "schedule": {"kind": "cron", "cron": "0 25 * * *"}})
    assert r.status_code == 422 and "hour" in r.json()["detail"]
    job = admin.ok("POST", "/jobs", {"name": "j", "source_id": src["id"],
                                     "destination_id": dst["id"], "tables": tables,
                                     "schedule": {"kind": "cron", "cron": "0 3 * * *"}},
                   status=201)
    assert job["schedule_kind"] == "cron" and job["cron"] == "0 3 * * *"
    assert job["next_runs"] == next_fires("0 3 * * *", job["created_at"])

    for name, role in (("olga", "operator"), ("vic", "viewer")):
        admin.ok("POST", "/users", {"username": name, "password": PASSWORD, "role": role},
                 status=201)
    assert admin.call("POST", "/users", {"username": "x", "password": PASSWORD,
                                         "role": "root"}).status_code == 422
    assert admin.call("POST", "/users", {"username": "olga", "password": PASSWORD,
                                         "role": "viewer"}).status_code == 409
    users = {u["username"]: u for u in admin.ok("GET", "/users")["items"]}
    assert {k: v["role"] for k, v in users.items()} == {"admin": "admin", "olga": "operator",
                                                        "vic": "viewer"}

    viewer = serve.client()
    assert viewer.login("vic").status_code == 200
    assert viewer.ok("GET", f"/jobs/{job['id']}")["name"] == "j"
    assert viewer.ok("GET", "/sources")["items"][0]["name"] == "pg"
    for method, path, body in (("POST", f"/jobs/{job['id']}/run", None),
                               ("POST", f"/jobs/{job['id']}/stop", None),
                               ("PATCH", f"/jobs/{job['id']}", {"paused": True}),
                               ("DELETE", f"/jobs/{job['id']}", None),
                               ("POST", "/jobs", {"name": "v"}),
                               ("POST", f"/sources/{src['id']}/test", None),
                               ("POST", "/sources", {"name": "v"}),
                               ("DELETE", f"/destinations/{dst['id']}", None),
                               ("GET", "/users", None),
                               ("POST", "/users", {"username": "z", "password": PASSWORD,
                                                   "role": "admin"})):
        r = viewer.call(method, path, json=body)
        assert r.status_code == 403, (method, path, r.status_code, r.text)

    op = serve.client()
    assert op.login("olga").status_code == 200
    assert op.call("POST", "/jobs", {"name": "o"}).status_code == 403
    assert op.call("DELETE", f"/jobs/{job['id']}").status_code == 403
    assert op.call("POST", "/sources", {"name": "o"}).status_code == 403
    run = op.ok("POST", f"/jobs/{job['id']}/run", status=202)
    assert op.wait_run(run["run_id"])["state"] == "succeeded", op.run_log(run["run_id"])
    assert op.ok("POST", f"/sources/{src['id']}/test")["ok"]

    # a password change ends the user's sessions; the new password works
    admin.ok("PATCH", f"/users/{users['vic']['id']}", {"password": "another long password"})
    assert viewer.call("GET", "/me").status_code == 401
    assert viewer.login("vic").status_code == 401
    assert viewer.login("vic", "another long password").status_code == 200
    # nobody deletes themselves; an admin deletes another user, whose sessions end
    assert admin.call("DELETE", f"/users/{users['admin']['id']}").status_code == 409
    admin.ok("DELETE", f"/users/{users['vic']['id']}", status=204)
    assert viewer.call("GET", "/me").status_code == 401
    drop_slots(pg, pg_db)
