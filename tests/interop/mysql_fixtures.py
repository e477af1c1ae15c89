# SPDX-License-Identifier: Apache-2.0
"""Throwaway MariaDB servers for the MySQL-source tests (tests/harness/mariadb_cluster.sh).

`mariadb_server(settings)` starts one with the binlog settings a test needs (the harness's
FIRN_MYSQL_* variables) and returns a MariaDB handle; `stop()` deletes it. The module fixture
`mariadb` (a server with the defaults firn wants: ROW, FULL image, FULL metadata, GTID strict) is
reused by the tests of one file; the fixture `mariadb_db` gives each test a fresh database.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MARIADB_CLUSTER = REPO / "tests" / "harness" / "mariadb_cluster.sh"


def _parse_exports(text: str) -> dict[str, str]:
    env = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            key, _, value = line[len("export "):].partition("=")
            env[key] = value
    return env


@dataclass
class MariaDB:
    """Where a test server listens, its users and its handle folder."""

    env: dict[str, str]
    handle: Path
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def host(self) -> str:
        return self.env["FIRN_TEST_MYSQL_HOST"]

    @property
    def port(self) -> int:
        return int(self.env["FIRN_TEST_MYSQL_PORT"])

    @property
    def user(self) -> str:
        return self.env["FIRN_TEST_MYSQL_USER"]

    @property
    def password(self) -> str:
        return self.env["FIRN_TEST_MYSQL_PASSWORD"]

    @property
    def root(self) -> Path:
        return Path(self.env["FIRN_TEST_MYSQL_ROOT"])

    def connect(self, database: str | None = None, admin: bool = True, **kwargs):
        """A PyMySQL connection (autocommit, utf8mb4, UTC session) as the admin user, or as the
        firn user with admin=False; the caller closes it."""
        import pymysql

        params = dict(host=self.host, port=self.port, charset="utf8mb4", autocommit=True,
                      connect_timeout=10, init_command="SET time_zone = '+00:00'")
        if admin:
            params.update(user=self.env["FIRN_TEST_MYSQL_ADMIN_USER"],
                          password=self.env["FIRN_TEST_MYSQL_ADMIN_PASSWORD"])
        else:
            params.update(user=self.user, password=self.password)
        if database:
            params["database"] = database
        params.update(kwargs)
        return pymysql.connect(**params)

    def source_json(self, database: str, **extra) -> dict:
        """A firn source.json for database as the firn user."""
        doc = {"type": "mariadb", "host": self.host, "port": self.port, "database": database,
               "username": self.user, "password": self.password}
        doc.update(extra)
        return doc

    def stop(self) -> None:
        subprocess.run(["bash", str(MARIADB_CLUSTER), "stop", str(self.handle)], check=False,
                       timeout=60, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.handle.parent, ignore_errors=True)


def mariadb_server(settings: dict[str, str] | None = None) -> MariaDB:
    """Starts a server with the harness settings given (e.g. {"FIRN_MYSQL_BINLOG_FORMAT":
    "STATEMENT"}); fails the test when it does not start."""
    settings = dict(settings or {})
    handle = Path(tempfile.mkdtemp(prefix="firn-pytest-mariadb.")) / "server"
    proc = subprocess.run(["bash", str(MARIADB_CLUSTER), "start", str(handle)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                          env=dict(os.environ, **settings))
    server = MariaDB(env=_parse_exports(proc.stdout), handle=handle, settings=settings)
    if proc.returncode != 0:
        server.stop()
        pytest.fail(f"mariadb_cluster.sh start failed ({proc.returncode}):\n{proc.stderr}",
                    pytrace=False)
    return server


@pytest.fixture(scope="module")
def mariadb(request) -> MariaDB:
    """A MariaDB 10.11 server with the binlog settings firn wants, for the tests of one module."""
    server = mariadb_server()
    request.addfinalizer(server.stop)
    return server


@pytest.fixture
def mariadb_db(mariadb: MariaDB):
    """A fresh, empty database (utf8mb4) for one test, dropped afterwards; yields its name."""
    name = "t_" + uuid.uuid4().hex[:12]
    with mariadb.connect() as conn:
        conn.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    yield name
    with mariadb.connect() as conn:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
