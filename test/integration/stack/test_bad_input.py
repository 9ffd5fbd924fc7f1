"""Bad input never takes the stack down: each case gets a JSON error, then a good request
succeeds. (Handler exceptions: test_handlers.py; multi-model bodies: test_mme_api.py.)"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from conversion_cases import BAD_BODIES
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
        *BAD_BODIES,
        ("application/json", b"\xff\xfe\x00", 400, "Invalid JSON"),
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


TEXT_LIMIT = b"JSON, JSON lines and CSV bodies are converted up to 100 MB"


def test_200_mb_json_with_content_length_is_413_at_once(stack: RunningStack) -> None:
    """Over the JSON/CSV limit: njs answers from the Content-Length, naming the way around."""
    size = 200 * MB
    head = (
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\nConnection: close\r\n\r\n"
    )
    answer = raw_request(stack, head, iter([b"[" * MB] * 200))
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert TEXT_LIMIT in answer and b"application/x-npy" in answer
    assert_still_serving(stack)


def test_200_mb_chunked_csv_is_413(stack: RunningStack) -> None:
    """No Content-Length to judge by: the Python service refuses it once read."""
    chunk = b"1.0," * (MB // 4)
    framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    head = (
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: text/csv\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    answer = raw_request(stack, head, iter([framed] * 200 + [b"0\r\n\r\n"]))
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert TEXT_LIMIT in answer
    assert_still_serving(stack)


def test_body_over_1_gb_is_413(stack: RunningStack) -> None:
    """Over what any SageMaker mode sends (1 GB): nginx refuses it from the Content-Length."""
    head = (
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
        f"Content-Length: {1025 * MB}\r\nConnection: close\r\n\r\n"
    )
    answer = raw_request(stack, head, iter([b"\0" * MB] * 1025))
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b'{"error": "Request body is larger than 1024 MB (SAGEMAKER_TFS_MAX_BODY_MB)"}' in answer
    assert_still_serving(stack)


def test_a_burst_of_bad_requests(stack: RunningStack) -> None:
    for index in range(30):
        assert stack.post(b"{" * index, "application/json").status_code == 400
    assert_still_serving(stack)


HEAD = "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize(
    ("request_text", "status"),
    [
        ("GET /invocations%00 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        ("GARBAGE\r\n\r\n", 400),
        (HEAD + "Content-Length: abc\r\n\r\n", 400),
        (HEAD + "Content-Length: -1\r\n\r\n", 400),
        (HEAD + "Content-Length: 20, 20\r\n\r\n", 400),
        (HEAD + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        (HEAD + "Transfer-Encoding: gzip\r\n\r\n", 501),
        ("POST /invocations HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 400),
        (HEAD + "X-Amzn-SageMaker-Custom-Attributes: " + "a" * 9000 + "\r\n\r\n", 431),
        ("GET /" + "a" * 9000 + " HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        ("GET /ping HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        ("TRACE /invocations HTTP/1.1\r\nHost: x\r\n\r\n", 405),
        ("GET /nothing.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 404),
        ("GET /.error/400 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 404),
        ("TRACE /invocations HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 405),
        (  # the Python service's gunicorn refused bytes that are not ASCII with an HTML 400
            "POST /invocations?q=\xe9 HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
            "Content-Length: 0\r\nConnection: close\r\n\r\n",
            400,
        ),
    ],
)
def test_nginx_own_errors_are_json(stack: RunningStack, request_text: str, status: int) -> None:
    """Malformed HTTP that nginx refuses itself, some before it has chosen a server."""
    answer = raw_request(stack, request_text, iter([]))
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status}".encode()), answer[:300]
    assert b"\r\nContent-Type: application/json" in head
    assert isinstance(json.loads(body)["error"], str)


@pytest.mark.parametrize(
    ("content_type", "body", "headers", "text"),
    [
        ("application/x-npz", b"PK\x03\x04" + bytes(5), {}, "Invalid .npz payload"),
        ("application/x-npy", b"\x93NUMPY" + bytes(10), {}, "Invalid .npy payload"),
        ("text/csv", bytes(range(256)) * 4, {}, ""),
        ("application/json", b"[" * 10000 + b"]" * 10000, {"Accept": "text/csv"}, "JSON"),
        ("application/json", b'{"instances": ["\\ud800"]}', {}, "surrogate"),
        ("application/json", b'{"instances": [' + b"1" * 5000 + b"]}", {}, "too big"),
        ("application/json", b"[1.0]", {"Accept": "\x7f"}, "control characters"),
        (
            "application/x-npy",
            b"\x93NUMPY",
            {"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-version=99999999999999999999"},
            "Invalid model version",
        ),
    ],
)
def test_hostile_bodies_are_4xx_json(
    stack: RunningStack, content_type: str, body: bytes, headers: dict[str, str], text: str
) -> None:
    response = stack.post(body, content_type, **headers)
    assert 400 <= response.status_code < 500, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    assert text in json.loads(response.content.decode("utf-8"))["error"]
    assert_still_serving(stack)
