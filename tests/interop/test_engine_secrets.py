# SPDX-License-Identifier: Apache-2.0
"""Secrets never reach firn's output: a REST catalog uri with userinfo or a token in its query
string is printed redacted in every error and log line, a JSON parse error in a config file names
the line, column and key but never the text near the error (it may be inside a password); and
`firn status` with a source it cannot read exits 3 (README "Exit codes") with one line."""

from __future__ import annotations

import json
import socket

from conftest import PW_ROLE, PW_SECRET
from firnutil import FirnEnv

PASSWORD_ENV = "FIRN_TEST_E2E_PASSWORD"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rest_uri_secrets_are_redacted(pg, pg_db, firn_bin, tmp_path):
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.setup(pg, ["t"])
    uri = f"http://admin:pa55-w0rd@127.0.0.1:{free_port()}/api/catalog?token=t0k3n-xyz"
    fe.destination.write_text(json.dumps({"catalog": {"type": "rest", "uri": uri,
                                                      "warehouse": "wh"}}))
    for log in ("error", "trace"):
        proc = fe.run("check", "--destination", str(fe.destination), "--log", log)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 4, proc.stderr
        assert "pa55-w0rd" not in out and "t0k3n-xyz" not in out, out
        assert "admin" not in out, out
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("firn: ") and "http://<redacted>@127.0.0.1:" in last, last
        assert "/api/catalog?<redacted>" in last, last


def test_json_error_does_not_echo_a_password(pg, pg_db, firn_bin, tmp_path):
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.setup(pg, ["t"])
    fe.source.write_text('{"host": "h", "database": "d",\n'
                         ' "username": "u", "password": "hunter2\\qrest-of-it"}\n')
    proc = fe.run("check", "--source", str(fe.source), "--log", "error")
    assert proc.returncode == 2, proc.stderr
    assert "hunter2" not in proc.stderr + proc.stdout and "rest-of-it" not in proc.stderr
    assert proc.stderr == (f'firn: {fe.source}:2:40: invalid JSON: invalid escape at key '
                           '"password"\n'), proc.stderr


def test_status_with_a_wrong_password_exits_3(pg, pg_db, firn_bin, tmp_path):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.setup(pg, ["t"])
    fe.write_source(pg, username=PW_ROLE, password="${%s}" % PASSWORD_ENV)
    args = ["status", "--source", str(fe.source), "--streams", str(fe.streams), "--state",
            str(fe.state), "--log", "error"]
    proc = fe.run(*args, env={PASSWORD_ENV: "wrong-secret-77"})
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("firn: "), proc.stderr
    assert "password authentication failed" in lines[0], lines[0]
    assert "wrong-secret-77" not in proc.stdout + proc.stderr
    rows = proc.stdout.splitlines()
    assert rows[0].split()[:2] == ["stream", "table"] and rows[1].split()[0] == "public.t"
    proc = fe.run(*args, env={PASSWORD_ENV: PW_SECRET})
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
