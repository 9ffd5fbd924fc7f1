"""The service's REST client against a real HTTP server on localhost: what ``output_handler``
is given must behave as the ``requests.Response`` that ``requests.post`` returns (the
reference container's handlers call ``.json()``, ``.content``, ``.text``, ``.status_code``,
``.headers``), keep-alive connections are reused, and a server that cannot be reached raises
urllib3's error at once (the caller fails over; nothing is retried)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
import urllib3
from sagemaker_tfs.service.connections import RestClient


class Echo(BaseHTTPRequestHandler):
    """Answers a POST with what it got, and the client port it came from."""

    protocol_version = "HTTP/1.1"
    status = 200

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        answer = json.dumps(
            {"body": body.decode(), "type": self.headers["Content-Type"],
             "port": self.client_address[1]}  # fmt: skip
        ).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


class Refuses(Echo):
    status = 400


def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/models/m:predict"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def echo_uri() -> Iterator[str]:
    yield from serve(Echo)


@pytest.fixture
def refusing_uri() -> Iterator[str]:
    yield from serve(Refuses)


def test_the_answer_is_a_requests_response(echo_uri: str) -> None:
    response = RestClient().post(echo_uri, b'{"instances": [1.0]}', "application/json")
    assert isinstance(response, requests.Response)
    assert response.status_code == 200
    assert response.ok
    assert response.json()["body"] == '{"instances": [1.0]}'
    assert response.json()["type"] == "application/json"
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert response.encoding == "utf-8"
    assert json.loads(response.text) == response.json()
    assert response.content == response.text.encode()
    assert response.url == echo_uri
    assert response.request.method == "POST"
    assert response.request.body == b'{"instances": [1.0]}'
    response.raise_for_status()


def test_an_error_status_is_an_answer_not_an_exception(refusing_uri: str) -> None:
    response = RestClient().post(refusing_uri, b"{}", "application/json")
    assert response.status_code == 400
    assert not response.ok
    with pytest.raises(requests.HTTPError):
        response.raise_for_status()


def test_connections_are_kept_alive(echo_uri: str) -> None:
    rest = RestClient()
    ports = {rest.post(echo_uri, b"{}", "application/json").json()["port"] for _ in range(5)}
    assert len(ports) == 1


def test_an_unreachable_server_raises_at_once() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(urllib3.exceptions.HTTPError):
            RestClient().post(f"http://127.0.0.1:{port}/v1/models/m:predict", b"{}", "x/y")
