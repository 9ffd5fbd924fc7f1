"""Response streaming through the whole stack (real nginx, gunicorn with gevent, the Python
model server): a handler's generator reaches the client chunk by chunk as it produces; a
failure midway cuts the body short, which HTTP clients report (requests/urllib3, curl); a
client that leaves closes the generator; an output_handler streams too, multi-model as well.

The handlers are ``test/resources/code/streaming_probe`` and ``streaming_pair``.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from metrics_scrape import wait_for_samples
from whole_stack import RunningStack, running_stack, stack_with_code, wait_for

pytestmark = pytest.mark.timeout(300)

REPO_ROOT = Path(__file__).resolve().parents[3]
MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
CODE = REPO_ROOT / "test" / "resources" / "code"
STREAMED = "sagemaker_tfs_streamed_answers_total"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    root = tmp_path_factory.mktemp("streaming")
    with stack_with_code(root, MODEL, CODE / "streaming_probe") as running:
        yield running


def post_stream(stack: RunningStack, request: dict) -> requests.Response:
    response = requests.post(f"{stack.url}/invocations", json=request, stream=True, timeout=30)
    assert response.status_code == 200
    return response


def test_the_first_chunk_reaches_the_client_before_the_next_is_produced(
    stack: RunningStack, tmp_path: Path
) -> None:
    """The handler produces its second chunk only once the client has read the first (a
    file it waits for): any buffering on the way would leave it waiting."""
    flag = tmp_path / "flag"
    response = post_stream(stack, {"mode": "handshake", "flag": str(flag)})
    assert response.headers["Transfer-Encoding"] == "chunked"
    assert "Content-Length" not in response.headers
    assert "X-Accel-Buffering" not in response.headers  # for nginx only
    pieces = response.iter_content(chunk_size=None)
    assert next(pieces) == b"first\n"
    flag.touch()
    assert b"".join(pieces) == b"after flag\n"


def test_a_failure_midway_cuts_the_body_short(stack: RunningStack) -> None:
    """What was produced arrives, then the connection closes without the last chunk:
    requests raises ChunkedEncodingError (urllib3's ProtocolError), never a whole answer."""
    response = post_stream(stack, {"mode": "fail_after", "n": 2})
    received = []
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        for piece in response.iter_content(chunk_size=None):
            received.append(piece)
    assert b"".join(received) == b"line 0\nline 1\n"
    assert "broke off on purpose" in stack.log_text()
    assert stack.post(json.dumps({"mode": "fail_after", "n": 0})).status_code == 500


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_reports_a_cut_stream_and_not_a_complete_one(stack: RunningStack) -> None:
    def curl(request: dict) -> subprocess.CompletedProcess[str]:
        command = ["curl", "-sS", "-N", "--data-binary", json.dumps(request),
                   f"{stack.url}/invocations"]  # fmt: skip
        return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)

    cut = curl({"mode": "bad_chunk"})
    assert cut.returncode == 18, cut  # CURLE_PARTIAL_FILE
    assert cut.stdout == "a line\n" and "transfer closed with outstanding read data" in cut.stderr
    whole = curl({"mode": "size", "total": 100_000, "chunk": 1000})
    assert whole.returncode == 0 and len(whole.stdout) == 100_000


def test_an_error_before_the_first_chunk_is_an_ordinary_500(stack: RunningStack) -> None:
    response = stack.post(json.dumps({"mode": "fail_before"}))
    assert response.status_code == 500
    assert response.json() == {"error": "failed before the first chunk"}


def test_a_client_that_leaves_closes_the_generator(stack: RunningStack, tmp_path: Path) -> None:
    """The generator would yield 100,000 lines, one every 20 ms: the client reads three and
    closes its connection; the generator gets GeneratorExit within a few chunks and is not
    run further (drained)."""
    marker = tmp_path / "marker"
    body = json.dumps({"mode": "endless", "marker": str(marker), "interval": 0.02}).encode()
    with socket.create_connection(("127.0.0.1", stack.port), timeout=30) as client:
        client.sendall(b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                       b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
        received = b""
        while received.count(b"line ") < 3:
            received += client.recv(4096)
    assert wait_for(lambda: marker.read_text().startswith("closed after"), 10), marker.read_text()
    produced = int(marker.read_text().removeprefix("closed after "))
    assert 3 <= produced < 50
    time.sleep(0.5)
    assert marker.read_text() == f"closed after {produced}"
    found = wait_for_samples(f"{stack.url}/metrics", lambda s: s.value(STREAMED, outcome="closed"))
    assert found.value(STREAMED, outcome="closed") >= 1
    assert found.value(STREAMED, outcome="failed") >= 1  # the tests above


def test_a_large_answer_arrives_whole(stack: RunningStack) -> None:
    """50 MB in chunks of 3 MiB (each sent in pieces of 1 MiB)."""
    response = post_stream(stack, {"mode": "size", "total": 50_000_000, "chunk": 3 << 20})
    head, length = b"", 0
    for piece in response.iter_content(chunk_size=1 << 20):
        head += piece[: 100 - len(head)]
        length += len(piece)
    assert json.loads(head.split(b"\n")[0])["first_yield"] > 0
    assert length == 50_000_000


@pytest.fixture(scope="module")
def multi_model_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """Multi-model, one model whose code streams from output_handler."""
    root = tmp_path_factory.mktemp("streaming_mme")
    model = root / "models" / "pair"
    shutil.copytree(MODEL, model)
    shutil.copytree(CODE / "streaming_pair", model / "code")
    (root / "work").mkdir()
    with running_stack(root / "models", root / "work", multi_model=True) as running:
        loaded = requests.post(f"{running.url}/models", json={"model_name": "pair", "url": "pair"},
                               timeout=180)  # fmt: skip
        assert loaded.status_code == 200, loaded.text
        yield running


def test_an_output_handler_streams_on_a_multi_model_endpoint(
    multi_model_stack: RunningStack,
) -> None:
    response = requests.post(f"{multi_model_stack.url}/models/pair/invoke", stream=True,
                             json={"instances": [1.0, 2.0, 5.0]}, timeout=30)  # fmt: skip
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/jsonlines"
    assert response.headers["Transfer-Encoding"] == "chunked"
    lines = [json.loads(line) for line in response.iter_lines()]
    assert lines == [{"y": 3.5}, {"y": 4.0}, {"y": 5.5}]
    # a model server error: passed on as it is, output_handler not called
    refused = multi_model_stack.post(b'{"instances": ["a"]}', path="/models/pair/invoke")
    assert refused.status_code == 400 and "error" in refused.json()


SESSION_HEADER = "X-Amzn-SageMaker-Session-Id"


@pytest.fixture(scope="module")
def sessions_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    root = tmp_path_factory.mktemp("streaming-sessions")
    env = {"SAGEMAKER_ENABLE_STATEFUL_SESSIONS": "true"}
    with stack_with_code(root, MODEL, CODE / "streaming_probe", env) as running:
        yield running


def test_a_streamed_answer_inside_a_session_keeps_its_state(sessions_stack: RunningStack) -> None:
    opened = sessions_stack.post(
        '{"requestType": "NEW_SESSION"}', **{SESSION_HEADER: "NEW_SESSION"}
    )
    session_id = opened.json()["session_id"]
    url, headers = f"{sessions_stack.url}/invocations", {SESSION_HEADER: session_id}
    for count in (1, 2):
        response = requests.post(url, json={"mode": "session"}, headers=headers, timeout=30)
        assert response.headers["Transfer-Encoding"] == "chunked"
        assert response.json() == {"session_id": session_id, "count": count}
    paced = {"mode": "paced", "n": 3, "interval": 0}
    streamed = requests.post(url, json=paced, headers=headers, timeout=30)
    assert [json.loads(line)["i"] for line in streamed.text.splitlines()] == [0, 1, 2]
    closed = sessions_stack.post('{"requestType": "CLOSE"}', **{SESSION_HEADER: session_id})
    assert closed.json() == {"session_id": session_id, "closed": True}


def test_a_new_session_header_with_another_body_is_served_outside_any_session(
    sessions_stack: RunningStack,
) -> None:
    body = '{"mode": "paced", "n": 1, "interval": 0}'
    response = sessions_stack.post(body, **{SESSION_HEADER: "NEW_SESSION"})
    assert response.status_code == 200
    assert "X-Amzn-SageMaker-New-Session-Id" not in response.headers
    assert json.loads(response.text)["i"] == 0


@pytest.mark.parametrize("session_id", ["NEW_SESSION", "0-" + "a" * 32])
def test_without_sessions_a_session_header_is_a_400(stack: RunningStack, session_id: str) -> None:
    response = stack.post('{"mode": "session"}', **{SESSION_HEADER: session_id})
    assert response.status_code == 400
    assert "stateful sessions are off" in response.json()["error"]
