# SPDX-License-Identifier: Apache-2.0
"""Fixtures for the REST catalog tests: the Apache Iceberg REST catalog fixture
(tests/harness/rest_catalog.sh: iceberg-open-api's RESTCatalogServer on Java 17, JdbcCatalog on
SQLite) with a file:// warehouse or a versitygw S3 warehouse, and RestCatalogLoc, which plays the
part of sparkutil.SqlCatalogLoc for the readers (pyiceberg's RestCatalog, Spark's REST catalog).

Import the fixtures into a test module with `from rest_fixtures import *`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from net_fixtures import S3Server, s3_server  # noqa: F401  (re-exported fixture)

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "tests" / "harness"


def _parse_exports(text: str) -> dict[str, str]:
    env = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            key, _, value = line[len("export "):].partition("=")
            env[key] = value
    return env


@dataclass(frozen=True)
class RestCatalogLoc:
    """A REST catalog as the readers see it: its URL, the warehouse, and for an S3 warehouse
    the server's endpoint and keys (which pyiceberg's FileIO needs)."""

    uri: str
    warehouse: str
    name: str = "rest"
    s3: S3Server | None = None
    log: Path | None = None

    def pyiceberg_props(self) -> dict[str, str]:
        props = {"uri": self.uri}
        if self.s3 is not None:
            props.update({"s3.endpoint": self.s3.endpoint, "s3.access-key-id": self.s3.access_key,
                          "s3.secret-access-key": self.s3.secret_key,
                          "s3.region": self.s3.region, "s3.force-virtual-addressing": "false"})
        return props

    def pyiceberg(self):
        """pyiceberg's RestCatalog on this catalog (new object each call: no caching)."""
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(self.name, **self.pyiceberg_props())

    def metadata_location(self, table: str) -> str:
        return self.pyiceberg().load_table(table).metadata_location

    def firn_catalog(self, **extra) -> dict:
        """The "catalog" object of a firn destination.json for this catalog."""
        doc = {"type": "rest", "name": self.name, "uri": self.uri}
        doc.update(extra)
        return doc

    def firn_storage(self) -> dict | None:
        """The "storage" object for firn (the S3 server's endpoint and keys), or None."""
        if self.s3 is None:
            return None
        return {"endpoint": self.s3.endpoint, "region": self.s3.region,
                "access_key_id": self.s3.access_key, "secret_access_key": self.s3.secret_key,
                "path_style": True}


def start_rest_catalog(request, warehouse: str | None = None, s3: S3Server | None = None,
                       vend: bool = False, extra_env: dict[str, str] | None = None
                       ) -> RestCatalogLoc:
    """Starts a REST catalog fixture for the scope of request; stopped by a finalizer."""
    handle = Path(tempfile.mkdtemp(prefix="firn-pytest-rest.")) / "server"
    env = dict(os.environ)
    if warehouse:
        env["FIRN_REST_WAREHOUSE"] = warehouse
    if s3 is not None:
        env.update(FIRN_REST_S3_ENDPOINT=s3.endpoint, FIRN_REST_S3_ACCESS_KEY=s3.access_key,
                   FIRN_REST_S3_SECRET_KEY=s3.secret_key, FIRN_REST_S3_REGION=s3.region)
    if vend:
        env["FIRN_REST_VEND"] = "1"
    env.update(extra_env or {})
    proc = subprocess.run(["bash", str(HARNESS / "rest_catalog.sh"), "start", str(handle)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=180,
                          env=env)

    def stop():
        if handle.exists():
            subprocess.run(["bash", str(HARNESS / "rest_catalog.sh"), "stop", str(handle)],
                           check=False, timeout=60)
        shutil.rmtree(handle.parent, ignore_errors=True)

    request.addfinalizer(stop)
    if proc.returncode != 0:
        pytest.fail(f"rest_catalog.sh start failed ({proc.returncode}):\n{proc.stderr}\n"
                    "(install the jar and Java with scripts/setup.sh)", pytrace=False)
    out = _parse_exports(proc.stdout)
    return RestCatalogLoc(out["FIRN_TEST_REST_URI"], out["FIRN_TEST_REST_WAREHOUSE"], s3=s3,
                          log=Path(out["FIRN_TEST_REST_LOG"]))


@pytest.fixture(scope="session")
def rest_catalog(request) -> RestCatalogLoc:
    """A REST catalog with a file:// warehouse, shared by the session (tests use their own
    namespaces)."""
    return start_rest_catalog(request)


@pytest.fixture(scope="session")
def rest_catalog_s3(request, s3_server) -> RestCatalogLoc:
    """A REST catalog whose warehouse is s3://<bucket>/rest on the session's versitygw, vending
    the server's keys to clients in every LoadTableResult."""
    return start_rest_catalog(request, warehouse=f"s3://{s3_server.bucket}/rest", s3=s3_server,
                              vend=True)


__all__ = ["rest_catalog", "rest_catalog_s3", "s3_server", "RestCatalogLoc",
           "start_rest_catalog"]
