# SPDX-License-Identifier: Apache-2.0
"""Secrets never reach firn's output: a REST catalog uri with userinfo or a token in its query
string is printed redacted in every error and log line, a JSON parse error in a config file names
the line, column and key but never the text near the error (it may be inside a password); and
`firn status` with a source it cannot read exits 3 (README "Exit codes") with one line."""

from __future__ import annotations

import json
import socket
from urllib.parse import quote

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


# ---- a catalog that echoes what it was sent (issue 24 item 9) ----------------------------------

BEARER = "tok-ECHO-4f1c2d9e7a"
CLIENT_SECRET = "cl-secret/9x+Q=z"
VENDED = "at-VENDED-77aa88bb99"
S3_SECRET = "s3-SECRET-kq81mz0p"


class EchoCatalog:
    """A REST catalog that fails every request with an error body echoing the request: its
    Authorization header, every header and the body. The first path segment picks the answer:
    /json/... a REST error document (403), /text/... a plain-text 500, /oauth/... the token
    endpoint refuses (401, echoing the form), /grant/... it grants VENDED and the catalog then
    answers 403 echoing it."""

    def __init__(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        import threading

        self.seen: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, status: int, body: str, ctype: str = "application/json"):
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def handle_any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode(errors="replace") if n else ""
                echo = (f"{self.command} {self.path} Authorization: "
                        f"{self.headers.get('Authorization')} headers: {dict(self.headers)} "
                        f"body: {body}")
                outer.seen.append(echo)
                mode = self.path.split("/")[1]
                if self.path.endswith("/oauth/tokens"):
                    if mode == "grant":
                        return self.answer(200, json.dumps({"access_token": VENDED,
                                                            "token_type": "bearer",
                                                            "expires_in": 3600}))
                    return self.answer(401, json.dumps({"error": "invalid_client",
                                                        "error_description": echo}))
                if mode == "text":
                    return self.answer(500, echo, "text/plain")
                self.answer(403, json.dumps({"error": {"message": echo, "code": 403,
                                                       "type": "ForbiddenException"}}))

            do_GET = do_POST = do_HEAD = do_DELETE = handle_any

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def stop(self):
        self._httpd.shutdown()
        self._httpd.server_close()


def test_echoed_credentials_are_redacted(pg, pg_db, firn_bin, tmp_path):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)")
    srv = EchoCatalog()
    try:
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["t"])
        storage = {"endpoint": "http://127.0.0.1:9", "region": "us-east-1",
                   "access_key_id": "AKIDEXAMPLE", "secret_access_key": S3_SECRET}
        cases = [
            ("json", {"token": BEARER}, BEARER),
            ("text", {"token": BEARER}, BEARER),
            ("oauth", {"credential": f"client-7:{CLIENT_SECRET}"}, CLIENT_SECRET),
            ("grant", {"credential": f"client-7:{CLIENT_SECRET}"}, VENDED),
        ]
        secrets = (BEARER, CLIENT_SECRET, VENDED, S3_SECRET, "cl-secret%2F9x%2BQ%3Dz")
        for mode, auth, echoed in cases:
            dest = {"catalog": {"type": "rest", "uri": f"{srv.url}/{mode}", "warehouse": "wh",
                                **auth},
                    "storage": storage, "namespace": "e2e"}
            fe.destination.write_text(json.dumps(dest))
            for log in ("error", "trace"):
                srv.seen.clear()
                runs = [fe.run("check", "--destination", str(fe.destination), "--log", log),
                        fe.sync("--log", log, check=False)]
                # the server did echo the secret: the redaction below is what kept it out
                assert any(echoed in s or quote(echoed, safe="") in s for s in srv.seen), \
                    (mode, srv.seen)
                for proc in runs:
                    out = proc.stdout + proc.stderr
                    assert proc.returncode == 4, (mode, log, proc.stderr[-3000:])
                    for s in secrets:
                        assert s not in out, (mode, log, s, out[-3000:])
                    last = proc.stderr.strip().splitlines()[-1]
                    assert last.startswith("firn: ") and "<redacted>" in last, (mode, last)
                for f in fe.root.rglob("*"):
                    if f.is_file():
                        text = f.read_bytes()
                        for s in secrets[:4]:
                            assert s.encode() not in text or f == fe.destination, (f, s)
    finally:
        srv.stop()
