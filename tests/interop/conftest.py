# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures for the interop tests: a throwaway PostgreSQL cluster, the firn binary and
build folder, and DuckDB connections with the iceberg extension loaded offline.

The `pg` fixture reuses the cluster exported by `tests/harness/pg_cluster.sh run` (FIRN_TEST_PGURI)
when there is one, and otherwise starts its own with `pg_cluster.sh start` for the session.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PG_CLUSTER = REPO / "tests" / "harness" / "pg_cluster.sh"

PW_ROLE = "firn_pw"
PW_SECRET = "firn_pw_secret"


@dataclass(frozen=True)
class PgCluster:
    """Where the test cluster listens. `uri` is the superuser URI over 127.0.0.1 (trust auth)."""

    host: str
    port: int
    user: str
    dbname: str
    sockdir: str | None = None

    @property
    def uri(self) -> str:
        return self.uri_for()

    @property
    def dsn(self) -> str:
        return self.uri

    def uri_for(self, dbname: str | None = None, user: str | None = None,
                password: str | None = None) -> str:
        auth = user or self.user
        if password is not None:
            auth += ":" + password
        return f"postgresql://{auth}@{self.host}:{self.port}/{dbname or self.dbname}"

    def connect(self, dbname: str | None = None, user: str | None = None,
                password: str | None = None, autocommit: bool = True, **kwargs):
        """Open a psycopg connection over TCP (autocommit by default); the caller closes it."""
        import psycopg

        params = dict(host=self.host, port=self.port, user=user or self.user,
                      dbname=dbname or self.dbname, connect_timeout=10)
        if password is not None:
            params["password"] = password
        params.update(kwargs)
        return psycopg.connect(autocommit=autocommit, **params)


def _from_env() -> PgCluster | None:
    uri = os.environ.get("FIRN_TEST_PGURI")
    if not uri:
        return None
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(uri)
    return PgCluster(host=str(info.get("host", "127.0.0.1")), port=int(info.get("port", 5432)),
                     user=str(info.get("user", os.environ.get("PGUSER", ""))),
                     dbname=str(info.get("dbname", "postgres")),
                     sockdir=os.environ.get("FIRN_TEST_PGSOCKDIR"))


def _parse_exports(text: str) -> dict[str, str]:
    env = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            key, _, value = line[len("export "):].partition("=")
            env[key] = value
    return env


@pytest.fixture(scope="session")
def pg(request) -> PgCluster:
    """The session's PostgreSQL 15 cluster (wal_level=logical, role firn_pw for password tests)."""
    cluster = _from_env()
    if cluster is not None:
        return cluster
    handle = Path(tempfile.mkdtemp(prefix="firn-pytest-pg.")) / "cluster"
    proc = subprocess.run(["bash", str(PG_CLUSTER), "start", str(handle)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)

    def stop():
        subprocess.run(["bash", str(PG_CLUSTER), "stop", str(handle)], check=False, timeout=60)
        shutil.rmtree(handle.parent, ignore_errors=True)

    request.addfinalizer(stop)
    if proc.returncode != 0:
        pytest.fail(f"pg_cluster.sh start failed ({proc.returncode}):\n{proc.stderr}", pytrace=False)
    env = _parse_exports(proc.stdout)
    return PgCluster(host=env["PGHOST"], port=int(env["PGPORT"]), user=env["PGUSER"],
                     dbname=env["PGDATABASE"], sockdir=env.get("FIRN_TEST_PGSOCKDIR"))


@pytest.fixture(scope="session")
def pg_tls(request) -> PgCluster:
    """A second cluster, with TLS on (pg_cluster.sh FIRN_PG_SSL=1: a self-signed certificate;
    TCP connections without TLS refused, so whatever worked over it went over TLS)."""
    handle = Path(tempfile.mkdtemp(prefix="firn-pytest-pgtls.")) / "cluster"
    proc = subprocess.run(["bash", str(PG_CLUSTER), "start", str(handle)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120,
                          env=dict(os.environ, FIRN_PG_SSL="1"))

    def stop():
        subprocess.run(["bash", str(PG_CLUSTER), "stop", str(handle)], check=False, timeout=60)
        shutil.rmtree(handle.parent, ignore_errors=True)

    request.addfinalizer(stop)
    if proc.returncode != 0:
        pytest.fail(f"pg_cluster.sh start (TLS) failed ({proc.returncode}):\n{proc.stderr}",
                    pytrace=False)
    env = _parse_exports(proc.stdout)
    return PgCluster(host=env["PGHOST"], port=int(env["PGPORT"]), user=env["PGUSER"],
                     dbname=env["PGDATABASE"])


@pytest.fixture
def pg_db(pg: PgCluster):
    """A fresh, empty database for one test (dropped afterwards); yields its name."""
    name = "t_" + uuid.uuid4().hex[:12]
    with pg.connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield name
    with pg.connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _repo_path(value: str) -> Path:
    path = Path(value)
    return path if path.is_absolute() else REPO / path


@pytest.fixture(scope="session")
def build_dir() -> Path:
    """The CMake build folder (FIRN_BUILD_DIR, default build/asan)."""
    return _repo_path(os.environ.get("FIRN_BUILD_DIR", "build/asan"))


@pytest.fixture(scope="session")
def firn_bin() -> Path:
    """The firn executable (FIRN_BIN, default build/asan/src/cli/firn); fails if it is missing."""
    path = _repo_path(os.environ.get("FIRN_BIN", "build/asan/src/cli/firn"))
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"firn binary not found at {path}: build it (cmake --build --preset asan) "
                    "or set FIRN_BIN", pytrace=False)
    return path


def duckdb_connect(database: str = ":memory:"):
    """A DuckDB connection with the iceberg (and avro) extensions loaded from their PyPI packages,
    never downloading anything. The caller closes it."""
    import duckdb
    from duckdb_extensions import import_extension

    con = duckdb.connect(database, config={"autoinstall_known_extensions": False})
    for name in ("avro", "iceberg"):
        import_extension(name, con=con)
        con.execute(f"LOAD {name}")
    return con


@pytest.fixture
def duck():
    """A DuckDB connection with iceberg loaded (see duckdb_connect)."""
    con = duckdb_connect()
    yield con
    con.close()


# ---------------------------------------------------------------------------------------------
# Spark with the Iceberg runtime (tests marked `spark`; see sparkutil.py for the catalog notes).

@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Each test's firn processes keep their key indexes (index_dir defaults to
    $XDG_CACHE_HOME/firn) in the test's folder, not in the user's cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "spark: needs Spark with the Iceberg runtime (pyspark and the jars of "
        "scripts/spark-jars.txt, installed by scripts/setup.sh); starts one JVM per session")


def pytest_collection_modifyitems(config, items):
    for item in items:
        uses_spark = "spark" in getattr(item, "fixturenames", ())
        if uses_spark and item.get_closest_marker("spark") is None:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """The session's local Spark (one JVM, started on first use, ~10-20 s) as a
    sparkutil.SparkCatalogs: `spark.session(loc)` is a SparkSession whose Iceberg catalog
    `loc.name` is the JDBC catalog on the SQLite file `loc.db` with warehouse `loc.warehouse`;
    `spark.sql(loc, stmt)`, `spark.rows(loc, "ns.t")` (canonical sorted tuples),
    `spark.commit_equality_deletes(...)`; `spark.base` is the plain SparkSession."""
    from sparkutil import SparkCatalogs, build_spark_session

    try:
        session = build_spark_session(tmp_path_factory.mktemp("spark"))
    except FileNotFoundError as e:
        pytest.fail(str(e), pytrace=False)
    yield SparkCatalogs(session)
    session.stop()


@pytest.fixture
def sql_catalog(tmp_path):
    """A fresh, empty SQL catalog location for one test: <tmp>/catalog.db, warehouse
    <tmp>/warehouse, catalog name "firn" (a sparkutil.SqlCatalogLoc; nothing is created yet)."""
    from sparkutil import SqlCatalogLoc

    (tmp_path / "warehouse").mkdir()
    return SqlCatalogLoc(tmp_path / "catalog.db", tmp_path / "warehouse", "firn")


@pytest.fixture
def spark_rows(spark):
    """spark_rows(catalog_db, warehouse, "ns.table", catalog="firn", columns=None, where=None):
    the table's rows read by Spark through the JDBC catalog, canonical and sorted (catalog_db
    may also be a SqlCatalogLoc, then warehouse is None)."""
    from sparkutil import as_loc

    def read(catalog_db, warehouse, table, catalog="firn", columns=None, where=None):
        return spark.rows(as_loc(catalog_db, warehouse, catalog), table, columns, where)

    return read


# ---------------------------------------------------------------------------------------------
# firn sync on a fresh source database (tests of tables firn writes; see firnsync.py).

@pytest.fixture
def firn_job(pg, firn_bin, tmp_path):
    """firn_job(streams, mode="full_refresh_cdc", setup=(sql, ...)) -> firnsync.FirnJob: a fresh
    source database (setup statements run in it), synced by `job.sync()` into the SQL catalog
    `job.loc` (<tmp>/job-N/catalog.db, catalog "firn", namespace "src"). Slots and databases are
    dropped afterwards."""
    from firnsync import FirnJob

    jobs = []

    def make(streams, mode="full_refresh_cdc", setup=(), database=None, **job_args):
        """database: sync an existing database (of an earlier job) instead of a new one."""
        name = database or "fj_" + uuid.uuid4().hex[:10]
        if database is None:
            with pg.connect() as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
        job = FirnJob(firn_bin, pg, name, tmp_path / f"job-{len(jobs)}", list(streams), mode,
                      **job_args)
        jobs.append(job)
        if setup:
            job.sql(*setup)
        return job

    yield make
    try:
        for job in jobs:
            job.drop()
    finally:
        with pg.connect() as conn:
            for name in dict.fromkeys(job.dbname for job in jobs):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
