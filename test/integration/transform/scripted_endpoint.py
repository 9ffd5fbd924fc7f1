"""A scripted model endpoint on a real socket, for the driver's own logic (the tests with the
whole stack are ``test_transform_main.py``). It answers ``/ping``, ``/execution-parameters`` and
``/invocations``: the body upper-cased, after a delay that shrinks with the record number (so
answers arrive out of order), 500 for bodies with ``poison``, 500 on the first two tries of
``flaky``, 400 for ``bad``, and ``sleep`` waits 12 s. It records what it saw."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedEndpoint(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most_in_flight = 0
        self.attempts: dict[bytes, int] = {}
        self.content_types: set[str] = set()
        self.execution_parameters = {
            "MaxConcurrentTransforms": 16,
            "BatchStrategy": "SINGLE_RECORD",
            "MaxPayloadInMB": 1,
        }

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedEndpoint
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/ping":
            self._send(200, b"")
        elif self.path == "/execution-parameters":
            self._send(200, json.dumps(self.server.execution_parameters).encode())
        else:
            self._send(404, b'{"error": "no"}')

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        server = self.server
        with server.lock:
            server.in_flight += 1
            server.most_in_flight = max(server.most_in_flight, server.in_flight)
            server.attempts[body] = server.attempts.get(body, 0) + 1
            attempt = server.attempts[body]
            server.content_types.add(self.headers["Content-Type"])
        try:
            digits = "".join(c for c in body.decode(errors="replace") if c.isdigit())[:4]
            time.sleep(max(0.0, 0.02 - int(digits or 0) * 0.0002))
            if b"sleep" in body:
                time.sleep(12)
            if b"poison" in body or (b"flaky" in body and attempt <= 2):
                self._send(500, b'{"error": "model server crashed"}')
            elif b"bad" in body:
                self._send(400, b'{"error": "bad record"}')
            else:
                self._send(200, body.upper())
        finally:
            with server.lock:
                server.in_flight -= 1

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def scripted_endpoint() -> Iterator[ScriptedEndpoint]:
    server = ScriptedEndpoint()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
