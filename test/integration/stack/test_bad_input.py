"""Bad input never takes the stack down: each case gets a JSON error, then a good request
succeeds. (Handler exceptions: test_handlers.py; multi-model bodies: test_mme_api.py.)"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from whole_stack import RunningStack, running_stack

pytestmark = pytest.mark.timeout(300)

REPO_ROOT = Path(__file__).resolve().parents[3]
MODELS = REPO_ROOT / "test" / "resources" / "models"
MB = 1024 * 1024


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    work_dir = tmp_path_factory.mktemp("bad_input")
    with running_stack(MODELS, work_dir) as running:
        yield running


def assert_still_serving(stack: RunningStack) -> None:
    response = stack.post("[1.0]")
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [[3.5]]}


def raw_request(stack: RunningStack, head: str, body_chunks: Iterator[bytes]) -> bytes:
    """Send a request by hand and return what the server answered (possibly early)."""
    port = int(stack.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(head.encode())
        try:
            for chunk in body_chunks:
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # nginx refused the body and closed: its answer is still readable
        answer = b""
        try:
            while data := sock.recv(65536):
                answer += data
        except ConnectionResetError:
            pass
    return answer


@pytest.mark.parametrize(
    ("content_type", "body", "status", "text"),
    [
        ("application/json", b"", 400, "Empty request body"),
        ("application/json", b"{", 400, "Invalid JSON"),
        ("application/json", b"[1.0,", 400, "Invalid JSON"),
        ("application/json", b"\xff\xfe\x00", 400, "Invalid JSON"),
        ("application/jsonlines", b"[1.0]\n{", 400, "Invalid JSON lines"),
        ("text/csv", b"", 400, "Empty request body"),
        ("text/csv", b"1.0,2.0\n3.0", 400, "Invalid CSV"),
        ("text/csv", b"abc,def", 400, ""),
        ("application/x-unknown", b"xyz", 415, "Unsupported Media Type: application/x-unknown"),
        ("image/tiff", b"II*\x00", 415, "image/tiff"),
    ],
)
def test_malformed_bodies(
    stack: RunningStack, content_type: str, body: bytes, status: int, text: str
) -> None:
    response = stack.post(body, content_type)
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    assert text in response.json()["error"]
    assert_still_serving(stack)


def test_200_mb_body_with_content_length_is_413(stack: RunningStack) -> None:
    size = 200 * MB
    head = (
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\nConnection: close\r\n\r\n"
    )
    answer = raw_request(stack, head, iter([b"[" * MB] * 200))
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b'{"error": "Request body is larger than 6 MB"}' in answer
    assert_still_serving(stack)


def test_200_mb_chunked_body_is_413(stack: RunningStack) -> None:
    chunk = b"1.0," * (MB // 4)
    framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    head = (
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: text/csv\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    answer = raw_request(stack, head, iter([framed] * 200))
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert_still_serving(stack)


def test_a_burst_of_bad_requests(stack: RunningStack) -> None:
    for index in range(30):
        assert stack.post(b"{" * index, "application/json").status_code == 400
    assert_still_serving(stack)
