# SPDX-License-Identifier: Apache-2.0
"""Running `firn serve` from the interop tests (tests/interop/test_serve_*.py): start it on a
free port with its own data folder, read the URL it prints and the setup token it writes, drive
the API with a requests session that sends the CSRF token, stop it (SIGTERM) or kill it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from firnutil import wait_for

PASSWORD = "correct horse battery staple"


@dataclass
class Serve:
    firn_bin: Path
    data: Path
    proc: subprocess.Popen | None = None
    url: str = ""
    log: Path = field(init=False)

    def __post_init__(self):
        self.log = self.data.parent / (self.data.name + "-serve.log")

    def start(self) -> "Serve":
        self.data.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS",
                                                           "detect_leaks=1:abort_on_error=0"))
        out = open(self.log, "ab")
        self.proc = subprocess.Popen([str(self.firn_bin), "serve", "--data", str(self.data),
                                      "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                                     stderr=out, env=env)
        line = self.proc.stdout.readline().decode()
        m = re.match(r"firn serve: listening on (http://\S+/)", line)
        assert m, f"firn serve printed {line!r}; log:\n{self.log.read_text()[-3000:]}"
        self.url = m.group(1).rstrip("/")
        return self

    def setup_token(self) -> str:
        return (self.data / "setup-token").read_text().strip()

    def stop(self) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=120)
        return self.proc.returncode if self.proc else 0

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def client(self) -> "Api":
        return Api(self.url)


class Api:
    """A browser-like API client: cookies, the session's CSRF token on state changes, and the
    server's own Origin."""

    def __init__(self, url: str):
        self.url = url
        self.http = requests.Session()
        self.csrf: str | None = None

    def call(self, method: str, path: str, json=None, headers=None, csrf: bool = True,
             **kw) -> requests.Response:
        h = {"Origin": self.url}
        if csrf and self.csrf and method not in ("GET", "HEAD"):
            h["X-CSRF-Token"] = self.csrf
        h.update(headers or {})
        return self.http.request(method, self.url + "/api/v1" + path, json=json, headers=h,
                                 timeout=300, **kw)

    def ok(self, method: str, path: str, json=None, status: int | tuple = (200, 201, 202, 204)):
        r = self.call(method, path, json=json)
        want = status if isinstance(status, tuple) else (status,)
        assert r.status_code in want, f"{method} {path}: {r.status_code} {r.text}"
        return r.json() if r.content else None

    def setup(self, token: str, username: str = "admin", password: str = PASSWORD) -> dict:
        me = self.ok("POST", "/setup", {"setup_token": token, "username": username,
                                        "password": password}, status=201)
        self.csrf = me["csrf_token"]
        return me

    def login(self, username: str = "admin", password: str = PASSWORD) -> requests.Response:
        r = self.call("POST", "/session", {"username": username, "password": password})
        if r.status_code == 200:
            self.csrf = r.json()["csrf_token"]
        return r

    def wait_run(self, run_id: int, timeout: float = 300) -> dict:
        """Waits until the run has ended; returns it."""
        def ended():
            run = self.ok("GET", f"/runs/{run_id}")
            return run if run["state"] != "running" else None
        return wait_for(ended, timeout, interval=0.5, what=f"run {run_id} to end")

    def run_log(self, run_id: int) -> str:
        return self.ok("GET", f"/runs/{run_id}/logs?limit=1048576")["text"]


def source_body(pg, dbname: str, name: str = "pg") -> dict:
    return {"name": name, "host": pg.host, "port": pg.port, "database": dbname,
            "username": pg.user, "sslmode": "disable"}


def destination_body(root: Path, name: str = "lake") -> dict:
    (root / "warehouse").mkdir(parents=True, exist_ok=True)
    return {"name": name, "catalog_type": "sql", "catalog_name": "firn",
            "catalog_uri": f"sqlite:///{root / 'catalog.db'}",
            "warehouse": str(root / "warehouse"), "namespace": "lake"}


def drop_slots(pg, dbname: str) -> None:
    """Drops the inactive replication slots of dbname (the jobs' slots), so that the database can
    be dropped."""
    with pg.connect() as conn:
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                     "WHERE database = %s AND NOT active", (dbname,))


def wait_until(predicate, timeout: float = 120, what: str = "condition"):
    return wait_for(predicate, timeout, interval=0.25, what=what)


__all__ = ["drop_slots", "Serve", "Api", "PASSWORD", "source_body", "destination_body", "wait_until", "time"]
