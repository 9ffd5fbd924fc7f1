"""``rest/server.py`` (the REST API's HTTP layer) over real sockets, with a faulty model manager.

The manager here is a test double on purpose: no real manager path raises a non-ServingError
or blocks on demand, and these tests are about what the HTTP server does when that happens
(a 500 JSON answer and a live server; the ``num_threads`` bound on concurrent requests; the
504 of a prediction past ``timeout_ms``).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from local_ports import free_port
from sagemaker_tfs.model_server.errors import not_found
from sagemaker_tfs.model_server.rest import http_loop
from sagemaker_tfs.model_server.rest import server as rest_server


class FaultyManager:
    """``get_servable`` raises a bug for model ``bug``, blocks for ``slow``, else NotFound."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def get_servable(self, name: str, version: int | None = None, label: str | None = None):
        if name == "bug":
            raise RuntimeError("boom")
        if name == "slow":
            self.entered.set()
            self.release.wait(30)
        raise not_found(f"Servable not found for request: Latest({name})")


@pytest.fixture
def manager() -> Iterator[FaultyManager]:
    faulty = FaultyManager()
    yield faulty
    faulty.release.set()


def start(manager: FaultyManager, num_threads: int, timeout_ms: int) -> rest_server.RestServer:
    return rest_server.serve(manager, free_port(), num_threads, timeout_ms)


def url(server: rest_server.RestServer, path: str) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def test_handler_exception_is_500_json_and_server_keeps_serving(manager: FaultyManager) -> None:
    server = start(manager, num_threads=2, timeout_ms=5000)
    try:
        body = '{"instances": [1.0]}'
        broken = requests.post(url(server, "/v1/models/bug:predict"), data=body, timeout=10)
        assert broken.status_code == 500
        assert broken.headers["Content-Type"] == "application/json"
        assert broken.json() == {"error": "INTERNAL: boom"}
        after = requests.post(url(server, "/v1/models/other:predict"), data=body, timeout=10)
        assert after.status_code == 404
        assert after.json() == {"error": "Servable not found for request: Latest(other)"}
    finally:
        server.shutdown()


def test_num_threads_bounds_concurrent_requests(manager: FaultyManager) -> None:
    """One slot, held by a blocked prediction: that one is answered 504 once it has run
    ``timeout_ms`` (``--rest_api_timeout_in_ms``) while its run goes on in the slot; the next
    waits ``timeout_ms`` for the slot and gets 503; once the run ends, the slot serves again."""
    server = start(manager, num_threads=1, timeout_ms=300)
    body = '{"instances": [1.0]}'
    try:
        holder: dict[str, Any] = {}
        thread = threading.Thread(
            target=lambda: holder.update(
                response=requests.post(url(server, "/v1/models/slow:predict"), data=body)
            )
        )
        thread.start()
        assert manager.entered.wait(10)
        blocked = requests.post(url(server, "/v1/models/x:predict"), data=body, timeout=10)
        assert blocked.status_code == 503
        assert json.loads(blocked.content) == {
            "error": "Timed out waiting for a free REST API thread"
        }
        thread.join(10)
        assert holder["response"].status_code == 504
        # answered by the server's deadline watcher while the run holds the connection's
        # thread: the connection closes once the run is over, not reused by the client
        assert holder["response"].headers["Connection"] == "close"
        assert json.loads(holder["response"].content) == {
            "error": "DEADLINE_EXCEEDED: no answer within 300 ms (--rest_api_timeout_in_ms)"
        }
        assert requests.get(url(server, "/v1/models/x"), timeout=10).status_code == 503
        manager.release.set()
        freed = requests.post(url(server, "/v1/models/x:predict"), data=body, timeout=10)
        assert freed.status_code == 404
    finally:
        server.shutdown()


def test_chunked_request_body(manager: FaultyManager) -> None:
    server = start(manager, num_threads=2, timeout_ms=5000)
    try:
        chunks = iter([b'{"instances"', b": [1.0]}"])
        response = requests.post(url(server, "/v1/models/m:predict"), data=chunks, timeout=10)
        assert response.status_code == 404  # the body was read whole, then the model looked up
        assert response.json() == {"error": "Servable not found for request: Latest(m)"}
        empty = requests.post(url(server, "/v1/models/m:predict"), data=iter([]), timeout=10)
        assert empty.json() == {"error": "JSON Parse error: The document is empty. at offset: 0"}
    finally:
        server.shutdown()


def test_expect_100_continue_is_answered_at_once(manager: FaultyManager) -> None:
    """Clients such as curl send large bodies only after ``100 Continue`` (or a 1 s wait)."""
    server = start(manager, num_threads=2, timeout_ms=5000)
    try:
        with socket.create_connection(server.server_address[:2], timeout=10) as sock:
            sock.sendall(
                b"POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n"
                b"Expect: 100-continue\r\n\r\n"
            )
            sock.settimeout(0.5)  # well under curl's 1 s fallback
            assert sock.recv(1024).startswith(b"HTTP/1.1 100 Continue\r\n")
            sock.settimeout(10)
            sock.sendall(b'{"instances": [1.0]}')
            reply = sock.recv(4096)
        assert reply.startswith(b"HTTP/1.1 404 ")
        assert reply.endswith(b'"Servable not found for request: Latest(m)"\n}')
    finally:
        server.shutdown()


def test_a_client_that_resets_its_connection_is_not_a_traceback(
    manager: FaultyManager, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """nginx workers that die (a killed master) reset their keep-alive connections: the
    server notes it at debug level and keeps serving, without a traceback on stderr."""
    server = start(manager, num_threads=2, timeout_ms=5000)
    try:
        with caplog.at_level("DEBUG", logger=http_loop.__name__):
            for _ in range(3):
                with socket.create_connection(server.server_address[:2], timeout=5) as sock:
                    body = b'{"instances": [1.0]}'
                    sock.sendall(
                        b"POST /v1/models/other:predict HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                    )
                    sock.recv(4096)  # the 404; the connection is kept alive
                    linger_zero = b"\x01\x00\x00\x00\x00\x00\x00\x00"
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger_zero)
            after = requests.post(
                url(server, "/v1/models/other:predict"), data='{"instances": [1.0]}', timeout=10
            )
            assert after.status_code == 404
            assert wait_for_went_away(caplog)
    finally:
        server.shutdown()
    assert "Traceback" not in capsys.readouterr().err
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "WARNING")]


def wait_for_went_away(caplog: pytest.LogCaptureFixture, seconds: float = 5.0) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any("went away" in record.getMessage() for record in caplog.records):
            return True
        time.sleep(0.05)
    return False


def exchange(server: rest_server.RestServer, request: bytes) -> tuple[bytes, bytes]:
    """Send ``request`` on a fresh connection and read until the server closes it: (head,
    body) of everything answered."""
    with socket.create_connection(server.server_address[:2], timeout=10) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return head, body


@pytest.mark.parametrize(
    "request_bytes, status, message",
    [
        (b"GET /v1/models/m HTTP/x.y\r\n\r\n", 400, "Bad request version ('HTTP/x.y')"),
        (b"GET /v1/models/m HTTP/2.0\r\n\r\n", 505, "Invalid HTTP version (2.0)"),
        (b"GET /v1/models/m extra HTTP/1.1\r\n\r\n", 400, "Bad request syntax"),
        (b"POST /v1/models/m\r\n\r\n", 400, "Bad HTTP/0.9 request type ('POST')"),
        (b"GET /v1/models/m HTTP/1.1\r\nno colon\r\n\r\n", 400, "Bad header line"),
        (b"GET /v1/models/m HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n", 431, "Line too long"),
        (b"GET /v1/models/m HTTP/1.1\r\n" + b"X: v\r\n" * 101 + b"\r\n", 431, "Too many headers"),
        (
            b"POST /v1/models/m:predict HTTP/1.1\r\nContent-Length: 1_0\r\n\r\n",
            400,
            "Invalid Content-Length",
        ),
        (
            b"POST /v1/models/m:predict HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            400,
            "Invalid Content-Length",
        ),
        (
            b"POST /v1/models/m:predict HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",
            400,
            "Invalid chunked encoding",
        ),
    ],
)
def test_a_bad_request_head_is_a_json_error_and_the_connection_closes(
    manager: FaultyManager, request_bytes: bytes, status: int, message: str
) -> None:
    server = start(manager, num_threads=2, timeout_ms=5000)
    try:
        head, body = exchange(server, request_bytes)
    finally:
        server.shutdown()
    assert head.startswith(b"HTTP/1.1 %d " % status)
    assert json.loads(body)["error"].startswith(message)


def test_header_names_are_read_in_any_case_and_keep_alive_follows_connection(
    manager: FaultyManager,
) -> None:
    """Two requests on one connection (the first's lower-case ``content-length`` read, or its
    body would be taken for the second's request line), then ``Connection: close`` ends it."""
    server = start(manager, num_threads=2, timeout_ms=5000)
    body = b'{"instances": [1.0]}'
    first = b"POST /v1/models/a:predict HTTP/1.1\r\ncontent-length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )
    second = b"POST /v1/models/b:predict HTTP/1.1\r\nCONTENT-LENGTH: %d\r\nConnection: close"
    second = second % len(body) + b"\r\n\r\n" + body
    try:
        head, answers = exchange(server, first + second)
    finally:
        server.shutdown()
    assert head.startswith(b"HTTP/1.1 404 ")
    assert b"Latest(a)" in answers
    assert b"HTTP/1.1 404 " in answers
    assert answers.endswith(b'"Servable not found for request: Latest(b)"\n}')
