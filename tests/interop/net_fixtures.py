# SPDX-License-Identifier: Apache-2.0
"""Fixtures for the object-storage tests: a versitygw S3 server and a fake-gcs-server GCS
emulator (both started by the shell harnesses in tests/harness, binaries from
scripts/services.sh), a local Google token endpoint, and the io_tool driver.

Import the fixtures into a test module with `from net_fixtures import *`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "tests" / "harness"
sys.path.insert(0, str(HARNESS))

from google_token_server import TokenServer  # noqa: E402


def _parse_exports(text: str) -> dict[str, str]:
    env = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            key, _, value = line[len("export "):].partition("=")
            env[key] = value
    return env


def _start(script: str, request) -> dict[str, str]:
    handle = Path(tempfile.mkdtemp(prefix="firn-pytest-obj.")) / "server"
    proc = subprocess.run(["bash", str(HARNESS / script), "start", str(handle)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)

    def stop():
        if handle.exists():
            subprocess.run(["bash", str(HARNESS / script), "stop", str(handle)], check=False,
                           timeout=60)
        shutil.rmtree(handle.parent, ignore_errors=True)

    request.addfinalizer(stop)
    if proc.returncode != 0:
        pytest.fail(f"{script} start failed ({proc.returncode}):\n{proc.stderr}\n"
                    "(install the servers with scripts/services.sh)", pytrace=False)
    return _parse_exports(proc.stdout)


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str
    region: str
    access_key: str
    secret_key: str
    root: Path

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for io_tool: endpoint and keys (path-style addressing by default)."""
        env = dict(os.environ)
        env.update(FIRN_S3_ENDPOINT=self.endpoint, AWS_ACCESS_KEY_ID=self.access_key,
                   AWS_SECRET_ACCESS_KEY=self.secret_key, AWS_REGION=self.region)
        env.update(extra)
        return env

    def pyarrow_fs(self):
        """An independent reader: Arrow's S3 filesystem (AWS SDK for C++)."""
        from pyarrow import fs

        scheme, _, host = self.endpoint.partition("://")
        return fs.S3FileSystem(access_key=self.access_key, secret_key=self.secret_key,
                               region=self.region, endpoint_override=host, scheme=scheme,
                               allow_bucket_creation=False)


@pytest.fixture(scope="session")
def s3_server(request) -> S3Server:
    """versitygw (posix backend) on loopback with bucket `firn-test`, for the whole session."""
    env = _start("s3_server.sh", request)
    return S3Server(endpoint=env["FIRN_TEST_S3_ENDPOINT"], bucket=env["FIRN_TEST_S3_BUCKET"],
                    region=env["FIRN_TEST_S3_REGION"], access_key=env["FIRN_TEST_S3_ACCESS_KEY"],
                    secret_key=env["FIRN_TEST_S3_SECRET_KEY"], root=Path(env["FIRN_TEST_S3_ROOT"]))


@dataclass(frozen=True)
class GcsServer:
    endpoint: str
    bucket: str


@pytest.fixture(scope="session")
def gcs_server(request) -> GcsServer:
    """fake-gcs-server (memory backend, plain HTTP) with bucket `firn-test`."""
    env = _start("gcs_server.sh", request)
    return GcsServer(endpoint=env["FIRN_TEST_GCS_ENDPOINT"], bucket=env["FIRN_TEST_GCS_BUCKET"])


@pytest.fixture
def token_server(tmp_path):
    """A Google token endpoint verifying RS256 assertions against a fresh service-account key;
    tokens live 2 s so clients refresh within a test."""
    server = TokenServer(tmp_path / "service-account", lifetime_s=2).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def io_tool(build_dir) -> Path:
    path = build_dir / "tools" / "io_tool"
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"io_tool not found at {path}: build the asan preset", pytrace=False)
    return path


def run_tool(tool: Path, env: dict[str, str], *args: str, check: bool = True,
             timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs io_tool with args; stdout is bytes, stderr text. check=True fails the test on a
    non-zero exit, showing stderr."""
    proc = subprocess.run([str(tool), *args], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout)
    proc.stderr = proc.stderr.decode(errors="replace")
    if check and proc.returncode != 0:
        pytest.fail(f"io_tool {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}",
                    pytrace=False)
    return proc


__all__ = ["s3_server", "gcs_server", "token_server", "io_tool", "run_tool", "S3Server",
           "GcsServer", "TokenServer"]
