# SPDX-License-Identifier: Apache-2.0
"""GCS FileIO against fake-gcs-server with Google service-account auth: media and resumable
uploads read back by Arrow's GCS filesystem (google-cloud-cpp) and by plain JSON-API GETs; the
RS256 assertions are verified by a local token endpoint against the key's public half, tokens
expire after 2 s so the provider must re-mint, x-goog-user-project rides on every request, and
tokens never reach the trace."""

from __future__ import annotations

import datetime
import json
import os
import urllib.error
import urllib.parse
import urllib.request

import pytest
from net_fixtures import *  # noqa: F401,F403
from net_fixtures import run_tool
from pyarrow import fs

KIB = 1 << 10


def _env(gcs_server, token_server=None, **extra):
    env = dict(os.environ)
    env.update(FIRN_GCS_ENDPOINT=gcs_server.endpoint, FIRN_GCS_THRESHOLD=str(1000 * KIB),
               FIRN_GCS_CHUNK=str(512 * KIB))
    if token_server:
        env.update(FIRN_GCS_KEY_FILE=str(token_server.key_file), FIRN_GCS_PROJECT="billing-proj")
    env.update(extra)
    return env


def _arrow(gcs_server):
    return fs.GcsFileSystem(anonymous=True, endpoint_override=gcs_server.endpoint.partition("://")[2],
                            scheme="http", retry_time_limit=datetime.timedelta(seconds=5))


def _json_api_get(gcs_server, name: str) -> bytes:
    url = (f"{gcs_server.endpoint}/storage/v1/b/{gcs_server.bucket}/o/"
           f"{urllib.parse.quote(name, safe='')}?alt=media")
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


def test_uploads_with_service_account_tokens_and_refresh(gcs_server, token_server, io_tool,
                                                        tmp_path):
    small, big, late = os.urandom(3000), os.urandom(3 * 1024 * KIB + 777), os.urandom(10)
    for name, data in (("s", small), ("b", big), ("l", late)):
        (tmp_path / name).write_bytes(data)
    bucket = gcs_server.bucket
    names = {"s": "w/data/small.bin", "b": "w/data/big ü+x.bin", "l": "w/metadata/late.json"}
    loc = {k: f"gs://{bucket}/{v}" for k, v in names.items()}
    env = _env(gcs_server, token_server, FIRN_HTTP_TRACE="1")
    out = run_tool(io_tool, env, "put", loc["s"], str(tmp_path / "s"), "put", loc["b"],
                   str(tmp_path / "b"), "tokens", "sleep", "2200", "put", loc["l"],
                   str(tmp_path / "l"), "tokens")
    assert out.stdout.decode().split("\n")[:5] == [
        "size 3000", f"size {len(big)}", "tokens 1", "size 10", "tokens 2"]

    # The token endpoint verified both assertions with the public key and refused none.
    assert token_server.rejected == []
    assert token_server.requests == 2 and len(token_server.issued) == 2
    assert all(c["scope"] == "https://www.googleapis.com/auth/cloud-platform"
               for c in token_server.claims)
    # A resumable upload happened (chunks answered 308), every request carried the billing
    # project, and no token appears in the trace.
    assert "uploadType=resumable" in out.stderr and "-> 308" in out.stderr
    requests = [ln for ln in out.stderr.splitlines() if ln.startswith("trace: ") and " -> " in ln
                and "/token" not in ln]
    assert len(requests) >= 8
    assert out.stderr.count("> x-goog-user-project: billing-proj") >= len(requests)
    assert "Authorization: Bearer <redacted>" in out.stderr
    for token in token_server.issued:
        assert token not in out.stderr
    assert "upload_id=<redacted>" in out.stderr

    # Independent readers: Arrow's GCS filesystem and plain JSON-API downloads.
    arrow = _arrow(gcs_server)
    for key, data in (("s", small), ("b", big), ("l", late)):
        with arrow.open_input_file(f"{bucket}/{names[key]}") as f:
            assert f.read() == data
        assert _json_api_get(gcs_server, names[key]) == data
    assert arrow.get_file_info(f"{bucket}/{names['b']}").size == len(big)

    # firn reads: whole, ranges, size; then deletes.
    env = _env(gcs_server, token_server)
    assert run_tool(io_tool, env, "get", loc["b"]).stdout == big
    assert run_tool(io_tool, env, "range", loc["b"], "524287", "3").stdout == big[524287:524290]
    assert run_tool(io_tool, env, "size", loc["b"]).stdout == f"size {len(big)}\n".encode()
    run_tool(io_tool, env, "rm", loc["b"])
    assert arrow.get_file_info(f"{bucket}/{names['b']}").type == fs.FileType.NotFound
    gone = run_tool(io_tool, env, "rm", loc["b"], check=False)
    assert gone.returncode == 1 and "FIRN_ERR_NOT_FOUND" in gone.stderr


def test_objects_are_never_overwritten(gcs_server, io_tool, tmp_path):
    (tmp_path / "a").write_bytes(b"first")
    (tmp_path / "b").write_bytes(b"second" * 300000)  # resumable
    loc = f"gs://{gcs_server.bucket}/once/metadata.json"
    env = _env(gcs_server)
    run_tool(io_tool, env, "put", loc, str(tmp_path / "a"))
    for src in ("a", "b"):
        again = run_tool(io_tool, env, "put", loc, str(tmp_path / src), check=False)
        assert again.returncode == 1 and "FIRN_ERR_EXISTS" in again.stderr
    assert _json_api_get(gcs_server, "once/metadata.json") == b"first"


def test_reads_objects_written_by_arrow(gcs_server, io_tool):
    data = os.urandom(5000)
    with _arrow(gcs_server).open_output_stream(f"{gcs_server.bucket}/arrow/x.bin") as f:
        f.write(data)
    env = _env(gcs_server)
    loc = f"gs://{gcs_server.bucket}/arrow/x.bin"
    assert run_tool(io_tool, env, "get", loc).stdout == data
    assert run_tool(io_tool, env, "range", loc, "4000", "1000").stdout == data[4000:]


def test_assertion_signed_with_another_key_is_refused(gcs_server, token_server, io_tool,
                                                      tmp_path):
    # Same account and key id, different private key: the endpoint must reject the signature.
    other = tmp_path / "other"
    other.mkdir()
    os.system(f"openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out {other}/k.pem "
              "2>/dev/null")
    key = json.loads(token_server.key_file.read_text())
    key["private_key"] = (other / "k.pem").read_text()
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(key))
    (tmp_path / "a").write_bytes(b"x")
    env = _env(gcs_server, token_server, FIRN_GCS_KEY_FILE=str(forged))
    proc = run_tool(io_tool, env, "put", f"gs://{gcs_server.bucket}/forged.bin",
                    str(tmp_path / "a"), check=False)
    assert proc.returncode == 1 and "FIRN_ERR_AUTH" in proc.stderr
    assert "signature does not verify" in proc.stderr
    assert token_server.issued == []
    with pytest.raises(urllib.error.HTTPError):
        _json_api_get(gcs_server, "forged.bin")
