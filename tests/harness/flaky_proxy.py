# SPDX-License-Identifier: Apache-2.0
"""A fault-injecting HTTP proxy for object-storage tests: it forwards every request unchanged
(Host header included, so SigV4 signatures stay valid) to a real server, except that on a
schedule it answers 503 Slow Down (with or without Retry-After) or drops the connection without
answering, before the request reaches the server. Only loopback traffic, bounded by the test.

    proxy = FlakyProxy("http://127.0.0.1:7070", fail_every=3).start()
    ... point the client at proxy.url ...
    proxy.stop(); proxy.log  # [(method, path, status or "drop"), ...]
    proxy.timed  # the same with the time each request arrived: [(monotonic, method, path, ...)]
"""

from __future__ import annotations

import http.client
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade",
              "te", "trailer"}


class FlakyProxy:
    """fail_every=N: the Nth, 2Nth, ... request fails; faults cycle through `faults`: "503",
    "503-retry-after" (Retry-After: 1), "503-retry-after=<seconds>", "429",
    "429-retry-after=<seconds>", "drop" (close without forwarding), "lost-reply" (forward, then close
    without answering: the server acted but the client cannot know) and "404-no-such-upload"
    (what S3 answers a repeated multipart complete once the upload is gone). `rule(method, path)`, when
    given, decides instead: it returns a fault name or None for each request."""

    def __init__(self, upstream: str, fail_every: int = 3,
                 faults: tuple[str, ...] = ("503", "drop", "503-retry-after"), rule=None):
        up = urllib.parse.urlsplit(upstream)
        self.upstream = (up.hostname, up.port)
        self.fail_every = fail_every
        self.faults = faults
        self.rule = rule
        self.log: list[tuple[str, str, object]] = []
        self.timed: list[tuple[float, str, str, object]] = []
        self.count = 0
        self._failures = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def start(self) -> "FlakyProxy":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _record(self, at: float, method: str, path: str, status: object) -> None:
        with self._lock:
            self.log.append((method, path, status))
            self.timed.append((at, method, path, status))

    def _next_fault(self, method: str, path: str) -> str | None:
        with self._lock:
            self.count += 1
            if self.rule:
                return self.rule(method, path)
            if self.fail_every and self.count % self.fail_every == 0:
                fault = self.faults[self._failures % len(self.faults)]
                self._failures += 1
                return fault
            return None

    def _handler(proxy):  # noqa: N805 - closes over the proxy
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length", "0") or 0)
                body = self.rfile.read(length) if length else b""
                at = time.monotonic()
                fault = proxy._next_fault(self.command, self.path)
                if fault == "drop":
                    proxy._record(at, self.command, self.path, "drop")
                    self.close_connection = True
                    return
                if fault == "404-no-such-upload":
                    proxy._record(at, self.command, self.path, 404)
                    msg = b"<Error><Code>NoSuchUpload</Code><Message>injected</Message></Error>"
                    self.send_response(404)
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                if fault and fault != "lost-reply":
                    status = 429 if fault.startswith("429") else 503
                    proxy._record(at, self.command, self.path, status)
                    msg = b"<Error><Code>SlowDown</Code><Message>injected</Message></Error>"
                    self.send_response(status)
                    if fault == "503-retry-after":
                        self.send_header("Retry-After", "1")
                    elif "-retry-after=" in fault:
                        self.send_header("Retry-After", fault.split("=", 1)[1])
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(msg)
                    return
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in HOP_BY_HOP}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                if fault == "lost-reply":
                    proxy._record(at, self.command, self.path, "lost-reply")
                    conn.close()
                    self.close_connection = True
                    return
                proxy._record(at, self.command, self.path, resp.status)
                self.send_response(resp.status)
                head = self.command == "HEAD"
                for k, v in resp.getheaders():
                    if k.lower() not in HOP_BY_HOP and (head or k.lower() != "content-length"):
                        self.send_header(k, v)
                if not head:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

        return Handler
