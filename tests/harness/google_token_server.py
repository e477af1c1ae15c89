# SPDX-License-Identifier: Apache-2.0
"""A local stand-in for Google's OAuth2 token endpoint (https://oauth2.googleapis.com/token).

It accepts the jwt-bearer grant (RFC 7523) the way Google does for service accounts: the assertion
must be an RS256 JWT whose signature verifies with the PUBLIC half of the test service-account key
(checked with the `openssl` command, no Python crypto package needed), whose `iss` is the account's
email, `aud` this endpoint's URL, `scope` present, and `iat`/`exp` a window of at most one hour
around now. It answers with a random access token that expires after `lifetime_s`, so clients
must refresh.

Use from Python (`TokenServer(...).start()`) or as a program:

    google_token_server.py --key-dir DIR [--lifetime 2]   # creates DIR/key.json, prints the URL
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import subprocess
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
EMAIL = "firn-test@firn-test-project.iam.gserviceaccount.com"


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def make_service_account(directory: Path, token_uri: str) -> Path:
    """Creates an RSA key with openssl and writes a service-account JSON key file pointing at
    token_uri; returns its path. The public half is DIR/public.pem."""
    directory.mkdir(parents=True, exist_ok=True)
    private = directory / "private.pem"
    public = directory / "public.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                    "-out", str(private)], check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", str(private), "-pubout", "-out", str(public)],
                   check=True, capture_output=True)
    key = {
        "type": "service_account",
        "project_id": "firn-test-project",
        "private_key_id": secrets.token_hex(20),
        "private_key": private.read_text(),
        "client_email": EMAIL,
        "client_id": "1234567890",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": token_uri,
    }
    path = directory / "key.json"
    path.write_text(json.dumps(key, indent=2))
    return path


class TokenServer:
    """Threaded token endpoint on 127.0.0.1. `issued` lists tokens handed out, `rejected` the
    reasons of refused requests, `requests` counts every POST."""

    def __init__(self, key_dir: Path, lifetime_s: int = 2):
        self.key_dir = Path(key_dir)
        self.lifetime_s = lifetime_s
        self.issued: list[str] = []
        self.rejected: list[str] = []
        self.requests = 0
        self.claims: list[dict] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/token"
        self.key_file = make_service_account(self.key_dir, self.url)
        self.key = json.loads(self.key_file.read_text())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def start(self) -> "TokenServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _verify_signature(self, signing_input: bytes, signature: bytes) -> bool:
        with tempfile.TemporaryDirectory() as tmp:
            data, sig = Path(tmp) / "data", Path(tmp) / "sig"
            data.write_bytes(signing_input)
            sig.write_bytes(signature)
            proc = subprocess.run(["openssl", "dgst", "-sha256", "-verify",
                                   str(self.key_dir / "public.pem"), "-signature", str(sig),
                                   str(data)], capture_output=True)
            return proc.returncode == 0

    def check(self, form: dict[str, list[str]]) -> str | None:
        """Returns None when the grant is valid, else the reason."""
        if form.get("grant_type") != [GRANT]:
            return f"grant_type {form.get('grant_type')!r}"
        assertion = (form.get("assertion") or [""])[0]
        parts = assertion.split(".")
        if len(parts) != 3:
            return "assertion is not a JWS compact serialization"
        header = json.loads(_b64url_decode(parts[0]))
        claims = json.loads(_b64url_decode(parts[1]))
        if header.get("alg") != "RS256" or header.get("typ") != "JWT":
            return f"header {header}"
        if header.get("kid") != self.key["private_key_id"]:
            return "kid does not name the key"
        if not self._verify_signature(f"{parts[0]}.{parts[1]}".encode(), _b64url_decode(parts[2])):
            return "signature does not verify with the public key"
        now = time.time()
        if claims.get("iss") != EMAIL or claims.get("aud") != self.url or not claims.get("scope"):
            return f"claims {claims}"
        iat, exp = claims.get("iat", 0), claims.get("exp", 0)
        if not (abs(iat - now) < 300 and 0 < exp - iat <= 3600):
            return f"iat/exp {iat}/{exp} at {now}"
        with self._lock:
            self.claims.append(claims)
        return None

    def _handler(server_self):  # noqa: N805 - closes over the TokenServer
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length).decode()
                with server_self._lock:
                    server_self.requests += 1
                ctype = self.headers.get("Content-Type", "")
                reason = None
                if not ctype.startswith("application/x-www-form-urlencoded"):
                    reason = f"content type {ctype!r}"
                else:
                    reason = server_self.check(urllib.parse.parse_qs(body))
                if reason:
                    with server_self._lock:
                        server_self.rejected.append(reason)
                    self._send(400, {"error": "invalid_grant", "error_description": reason})
                    return
                token = "ya29.test-" + secrets.token_urlsafe(24)
                with server_self._lock:
                    server_self.issued.append(token)
                self._send(200, {"access_token": token, "expires_in": server_self.lifetime_s,
                                 "token_type": "Bearer"})

            def _send(self, status: int, doc: dict) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--key-dir", required=True, type=Path)
    ap.add_argument("--lifetime", type=int, default=2)
    args = ap.parse_args()
    server = TokenServer(args.key_dir, args.lifetime).start()
    print(f"token endpoint {server.url}; key file {server.key_file}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    os.umask(0o077)
    main()
