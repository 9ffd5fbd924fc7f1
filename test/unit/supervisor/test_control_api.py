"""The control API: JSON over HTTP on a unix socket, whatever the client sends."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from launchers import RecordingLauncher
from sagemaker_tfs.supervisor.model_servers.per_model_servers import PerModelServers
from sagemaker_tfs.supervisor.multi_model.control_api import ControlServer
from sagemaker_tfs.supervisor.multi_model.registry import ModelRegistry
from stack_configs import StackConfigBuilder, make_model


@pytest.fixture
def control_socket(stack_config: StackConfigBuilder, tmp_path: Path) -> Iterator[str]:
    make_model(tmp_path / "models" / "m")
    config = stack_config({"SAGEMAKER_MULTI_MODEL": "true"})
    path = str(tmp_path / "control.sock")
    server = ControlServer(
        path, ModelRegistry(config, PerModelServers(config, RecordingLauncher()))
    )
    server.serve_in_background()
    yield path
    server.shutdown()
    server.server_close()


def _control_exchange(path: str, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.settimeout(5)
        raw.connect(path)
        raw.sendall(request)
        received = b""
        while chunk := raw.recv(65536):
            received += chunk
    return received


def _status_headers_json(answer: bytes) -> tuple[int, str, object]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, head.decode("latin-1"), json.loads(body) if body else None


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_control_api_never_reads_a_body_as_the_next_request(
    control_socket: str, method: str
) -> None:
    smuggled = b"GET /models HTTP/1.1\r\nHost: x\r\n\r\n"
    target = "/models" if method == "GET" else "/models/unknown"
    received = _control_exchange(
        control_socket,
        f"{method} {target} HTTP/1.1\r\nHost: x\r\n".encode()
        + f"Content-Length: {len(smuggled)}\r\n\r\n".encode()
        + smuggled,
    )
    assert received.count(b"HTTP/1.1 ") == 1, received


@pytest.mark.parametrize(
    ("method", "target", "allow"),
    [
        ("PUT", "/models", "GET, POST"),
        ("PATCH", "/models", "GET, POST"),
        ("OPTIONS", "/models", "GET, POST"),
        ("PUT", "/models/m", "GET, DELETE"),
        ("TRACE", "/models/m", "GET, DELETE"),
    ],
)
def test_control_api_wrong_methods_are_405_json_with_allow(
    control_socket: str, method: str, target: str, allow: str
) -> None:
    answer = _control_exchange(
        control_socket, f"{method} {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    )
    status, head, body = _status_headers_json(answer)
    assert status == 405
    assert f"Allow: {allow}" in head and "Content-Type: application/json" in head
    assert method in body["error"]


def test_control_api_head_is_405_without_a_body(control_socket: str) -> None:
    answer = _control_exchange(control_socket, b"HEAD /models HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 405 ")
    assert answer.endswith(b"\r\n\r\n")


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"FOO /models HTTP/1.1\r\nHost: x\r\n\r\n", 501),
        (b"GET /models HTTP/9.9\r\nHost: x\r\n\r\n", 505),
        (b"garbage\r\n\r\n", 400),
    ],
)
def test_control_api_protocol_errors_are_json(
    control_socket: str, request_bytes: bytes, status: int
) -> None:
    got, head, body = _status_headers_json(_control_exchange(control_socket, request_bytes))
    assert got == status
    assert "Content-Type: application/json" in head and isinstance(body["error"], str)


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (b"[" * 10000 + b"]" * 10000, "invalid JSON body"),
        (b'{"model_name": "nl\\n", "url": "m"}', "model_name must be"),
        (b'{"model_name": "m\\n", "url": "m"}', "model_name must be"),
        (b"\xff\xfe", "invalid JSON body"),
    ],
)
def test_control_api_refuses_bad_load_bodies_with_400(
    control_socket: str, body: bytes, text: str
) -> None:
    request = (
        f"POST /models HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    )
    status, _, answer = _status_headers_json(_control_exchange(control_socket, request))
    assert status == 400
    assert text in answer["error"]


@pytest.mark.parametrize(
    ("length", "status", "text"),
    [(0, 400, 'expected a JSON object {"model_name"'), (65537, 413, "at most 64 KiB")],
)
def test_control_api_names_what_is_wrong_with_the_body_size(
    control_socket: str, length: int, status: int, text: str
) -> None:
    """An empty body was told it should be at most 64 KiB, a large one was a 400 (answered
    from the Content-Length: the body is not sent, so that the answer is not cut by a reset)."""
    request = f"POST /models HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode()
    got, _, answer = _status_headers_json(_control_exchange(control_socket, request))
    assert (got, text in answer["error"]) == (status, True), answer
