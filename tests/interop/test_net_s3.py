# SPDX-License-Identifier: Apache-2.0
"""S3 FileIO against a real S3-compatible server (versitygw): single PUTs and multipart uploads
written by firn are read back by independent readers (Arrow's S3 filesystem, the server's posix
backend files) and by firn's own signed GET; ranges, sizes, deletes, aborts, conditional puts,
bad credentials and redacted traces."""

from __future__ import annotations

import os

import pytest
from net_fixtures import *  # noqa: F401,F403
from net_fixtures import HARNESS, run_tool  # noqa: F401
from pyarrow import fs

MIB = 1 << 20
MULTI = {"FIRN_S3_THRESHOLD": str(6 * MIB), "FIRN_S3_PART_SIZE": str(5 * MIB)}


def _write(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_small_and_multipart_objects_read_back_independently(s3_server, io_tool, tmp_path):
    small = os.urandom(1000)
    big = os.urandom(12 * MIB + 12345)  # three parts: 5 MiB, 5 MiB, the rest
    key_small = "t/data/small.bin"
    key_big = "t/data/ü x+y=1 big.parquet"
    loc_small = f"s3://{s3_server.bucket}/{key_small}"
    loc_big = f"s3://{s3_server.bucket}/{key_big}"
    env = s3_server.env(**MULTI)
    out = run_tool(io_tool, env, "put", loc_small, _write(tmp_path, "s", small),
                   "put", loc_big, _write(tmp_path, "b", big))
    assert out.stdout.decode().split("\n")[:2] == ["size 1000", f"size {len(big)}"]

    # Arrow's S3 client (AWS SDK for C++) reads exactly the bytes written.
    afs = s3_server.pyarrow_fs()
    with afs.open_input_file(f"{s3_server.bucket}/{key_small}") as f:
        assert f.read() == small
    with afs.open_input_file(f"{s3_server.bucket}/{key_big}") as f:
        assert f.read() == big
    assert afs.get_file_info(f"{s3_server.bucket}/{key_big}").size == len(big)
    # And so does the server's own storage folder.
    assert (s3_server.root / s3_server.bucket / key_big).read_bytes() == big

    # firn reads: whole object, ranges, size, and a plain GET signed by firn's SigV4 code.
    assert run_tool(io_tool, env, "get", loc_big).stdout == big
    assert run_tool(io_tool, env, "range", loc_big, str(5 * MIB - 7), "300000").stdout == \
        big[5 * MIB - 7:5 * MIB - 7 + 300000]
    assert run_tool(io_tool, env, "range", loc_small, "990", "10").stdout == small[990:]
    assert run_tool(io_tool, env, "size", loc_big).stdout == f"size {len(big)}\n".encode()
    url = f"{s3_server.endpoint}/{s3_server.bucket}/{key_small}"
    assert run_tool(io_tool, env, "httpget", url).stdout == small

    short = run_tool(io_tool, env, "range", loc_small, "990", "11", check=False)
    assert short.returncode == 1 and "FIRN_ERR_IO" in short.stderr

    # Deletes: gone for Arrow too; a second delete reports the missing object.
    run_tool(io_tool, env, "rm", loc_small, "rm", loc_big)
    assert afs.get_file_info(f"{s3_server.bucket}/{key_big}").type == fs.FileType.NotFound
    again = run_tool(io_tool, env, "rm", loc_small, check=False)
    assert again.returncode == 1 and "FIRN_ERR_NOT_FOUND" in again.stderr
    missing = run_tool(io_tool, env, "get", loc_small, check=False)
    assert "FIRN_ERR_NOT_FOUND" in missing.stderr


def test_objects_written_by_arrow_are_read_by_firn(s3_server, io_tool):
    data = os.urandom(70000)
    afs = s3_server.pyarrow_fs()
    with afs.open_output_stream(f"{s3_server.bucket}/from-arrow/x.bin") as f:
        f.write(data)
    env = s3_server.env()
    loc = f"s3://{s3_server.bucket}/from-arrow/x.bin"
    assert run_tool(io_tool, env, "get", loc).stdout == data
    assert run_tool(io_tool, env, "range", loc, "65536", "4464").stdout == data[65536:]


def test_aborted_multipart_upload_leaves_nothing(s3_server, io_tool, tmp_path):
    big = os.urandom(11 * MIB)
    key = "t/aborted.bin"
    env = s3_server.env(**MULTI)
    run_tool(io_tool, env, "abortput", f"s3://{s3_server.bucket}/{key}",
             _write(tmp_path, "b", big))
    afs = s3_server.pyarrow_fs()
    assert afs.get_file_info(f"{s3_server.bucket}/{key}").type == fs.FileType.NotFound
    uploads = run_tool(io_tool, env, "httpget", f"{s3_server.endpoint}/{s3_server.bucket}?uploads")
    assert b"<ListMultipartUploadsResult" in uploads.stdout
    assert b"<Upload>" not in uploads.stdout


def test_conditional_put_never_replaces(s3_server, io_tool, tmp_path):
    env = s3_server.env(FIRN_S3_CONDITIONAL="1")
    loc = f"s3://{s3_server.bucket}/t/once.json"
    run_tool(io_tool, env, "put", loc, _write(tmp_path, "a", b"first"))
    again = run_tool(io_tool, env, "put", loc, _write(tmp_path, "b", b"second"), check=False)
    assert again.returncode == 1 and "FIRN_ERR_EXISTS" in again.stderr
    with s3_server.pyarrow_fs().open_input_file(f"{s3_server.bucket}/t/once.json") as f:
        assert f.read() == b"first"


def test_wrong_secret_is_permission_error_and_secrets_stay_out_of_traces(s3_server, io_tool,
                                                                         tmp_path):
    loc = f"s3://{s3_server.bucket}/t/traced.bin"
    env = s3_server.env(FIRN_HTTP_TRACE="1")
    out = run_tool(io_tool, env, "put", loc, _write(tmp_path, "a", b"abc"), "size", loc)
    assert "Authorization: AWS4-HMAC-SHA256 <redacted>" in out.stderr
    assert "PUT " + s3_server.endpoint in out.stderr
    assert s3_server.secret_key not in out.stderr
    assert "Signature=" not in out.stderr

    bad = s3_server.env(AWS_SECRET_ACCESS_KEY="not-the-secret", FIRN_HTTP_TRACE="1")
    denied = run_tool(io_tool, bad, "size", loc, check=False)
    assert denied.returncode == 1 and "FIRN_ERR_PERMISSION" in denied.stderr
    assert "not-the-secret" not in denied.stderr


@pytest.mark.parametrize("addressing", ["path", "virtual"])
def test_addressing_styles_build_the_expected_urls(s3_server, io_tool, tmp_path, addressing):
    # versitygw serves path-style here; the virtual-host form is checked by the URL in the trace
    # (bucket as a subdomain), which must fail to resolve rather than silently fall back.
    env = s3_server.env(FIRN_S3_ADDRESSING=addressing, FIRN_HTTP_TRACE="1")
    loc = f"s3://{s3_server.bucket}/t/style.bin"
    proc = run_tool(io_tool, env, "put", loc, _write(tmp_path, "a", b"x"), check=False)
    host = s3_server.endpoint.partition("://")[2]
    if addressing == "path":
        assert proc.returncode == 0, proc.stderr
        assert f"PUT http://{host}/{s3_server.bucket}/t/style.bin" in proc.stderr
    else:
        assert f"PUT http://{s3_server.bucket}.{host}/t/style.bin" in proc.stderr


def test_uploads_survive_503s_and_dropped_connections(s3_server, io_tool, tmp_path):
    # Every third request through the proxy fails (503, dropped connection, 503 + Retry-After)
    # before it reaches versitygw; parts, completes, reads and deletes must all retry through.
    from flaky_proxy import FlakyProxy

    small, big = os.urandom(2000), os.urandom(11 * MIB + 3)
    proxy = FlakyProxy(s3_server.endpoint, fail_every=3).start()
    try:
        env = s3_server.env(FIRN_S3_ENDPOINT=proxy.url, **MULTI)
        loc_small = f"s3://{s3_server.bucket}/flaky/small.bin"
        loc_big = f"s3://{s3_server.bucket}/flaky/big.bin"
        out = run_tool(io_tool, env, "put", loc_small, _write(tmp_path, "s", small), "put",
                       loc_big, _write(tmp_path, "b", big), "size", loc_big)
        assert out.stdout.decode().split("\n")[:3] == [
            "size 2000", f"size {len(big)}", f"size {len(big)}"]
        assert run_tool(io_tool, env, "get", loc_small).stdout == small
        run_tool(io_tool, env, "rm", loc_small)
    finally:
        proxy.stop()
    outcomes = [entry[2] for entry in proxy.log]
    assert "drop" in outcomes and outcomes.count(503) >= 2
    afs = s3_server.pyarrow_fs()
    with afs.open_input_file(f"{s3_server.bucket}/flaky/big.bin") as f:
        assert f.read() == big
    assert afs.get_file_info(f"{s3_server.bucket}/flaky/small.bin").type == fs.FileType.NotFound
    uploads = run_tool(io_tool, s3_server.env(), "httpget",
                       f"{s3_server.endpoint}/{s3_server.bucket}?uploads")
    assert b"<Upload>" not in uploads.stdout


def test_parallel_writers_share_one_file_io(s3_server, io_tool, tmp_path):
    data = os.urandom(7 * MIB + 5)  # multipart: 5 MiB + the rest, per writer
    env = s3_server.env(**MULTI)
    prefix = f"s3://{s3_server.bucket}/par/obj-"
    run_tool(io_tool, env, "parput", prefix, _write(tmp_path, "d", data), "4")
    afs = s3_server.pyarrow_fs()
    for i in range(4):
        with afs.open_input_file(f"{s3_server.bucket}/par/obj-{i}") as f:
            assert f.read() == data


def test_lost_reply_to_multipart_complete_is_resolved(s3_server, io_tool, tmp_path):
    # versitygw completes the upload but the reply is lost; the retried complete then finds no
    # such upload (as AWS answers; versitygw itself would repeat the 200, so the proxy answers),
    # and the FileIO must recognise its own finished object instead of failing.
    from flaky_proxy import FlakyProxy

    lost = []

    def rule(method, path):
        if method == "POST" and "uploadId=" in path:
            lost.append(path)
            return "lost-reply" if len(lost) == 1 else "404-no-such-upload"
        return None

    big = os.urandom(11 * MIB)
    proxy = FlakyProxy(s3_server.endpoint, rule=rule).start()
    try:
        env = s3_server.env(FIRN_S3_ENDPOINT=proxy.url, **MULTI)
        loc = f"s3://{s3_server.bucket}/flaky/completed-twice.bin"
        out = run_tool(io_tool, env, "put", loc, _write(tmp_path, "b", big))
        assert out.stdout.decode().startswith(f"size {len(big)}")
    finally:
        proxy.stop()
    completes = [e for e in proxy.log if e[0] == "POST" and "uploadId=" in e[1]]
    assert [e[2] for e in completes] == ["lost-reply", 404]
    with s3_server.pyarrow_fs().open_input_file(
            f"{s3_server.bucket}/flaky/completed-twice.bin") as f:
        assert f.read() == big
