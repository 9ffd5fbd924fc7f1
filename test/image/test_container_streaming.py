"""Response streaming and stateful sessions in a container of the image under test
(conftest.py says what is substituted): the image's nginx (njs 0.8.9) and gunicorn, two
workers, the streaming probe handler (``test/resources/code/streaming_probe``).

The handler's files (the handshake's flag, the disconnect's marker) are in the container's
``/tmp``, reached with ``podman exec``; the container shares this machine's clock, so the
delay from a yield in the container to its arrival here is measured directly.
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from image_scripts import REPO_ROOT, Container, Image, start_container
from local_ports import free_port

pytestmark = pytest.mark.slow
MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
PROBE = REPO_ROOT / "test" / "resources" / "code" / "streaming_probe"
SESSION_HEADER = "X-Amzn-SageMaker-Session-Id"
NEW_SESSION_ID = re.compile(r"(\d)-[0-9a-f]{32}")


@pytest.fixture(scope="module")
def container(
    image_under_test: Image, bin_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Container]:
    model_dir = tmp_path_factory.mktemp("streaming_model")
    shutil.copytree(MODEL, model_dir / MODEL.name)
    shutil.copytree(PROBE, model_dir / "code")
    env = {"SAGEMAKER_TFS_SESSIONS": "true", "SAGEMAKER_GUNICORN_WORKERS": "2"}
    started = start_container(image_under_test, bin_dir, free_port(), model_dir, env)
    yield started
    stopped = started.stop()
    assert stopped.returncode == 0, stopped.stderr


def stream(container: Container, request: dict) -> requests.Response:
    response = requests.post(container.url("/invocations"), json=request, stream=True,
                             timeout=60)  # fmt: skip
    assert response.status_code == 200, response.text
    assert response.headers["Transfer-Encoding"] == "chunked"
    return response


def in_container(container: Container, path: str) -> str:
    return container.exec("sh", "-c", f"cat {path} 2>/dev/null || true")


def test_the_first_chunk_arrives_before_the_next_is_produced(container: Container) -> None:
    response = stream(container, {"mode": "handshake", "flag": "/tmp/streaming-flag"})
    pieces = response.iter_content(chunk_size=None)
    assert next(pieces) == b"first\n"
    container.exec("touch", "/tmp/streaming-flag")
    assert b"".join(pieces) == b"after flag\n"


def test_each_line_arrives_within_50_ms_of_its_yield(container: Container) -> None:
    delays = []
    response = stream(container, {"mode": "paced", "n": 30, "interval": 0.02})
    for line in response.iter_lines(chunk_size=None):
        delays.append(time.time() - json.loads(line)["t"])
    assert len(delays) == 30
    assert statistics.median(delays) < 0.05, delays


def test_a_failure_midway_cuts_the_body_short(container: Container) -> None:
    response = stream(container, {"mode": "fail_after", "n": 2})
    received = []
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        for piece in response.iter_content(chunk_size=None):
            received.append(piece)
    assert b"".join(received) == b"line 0\nline 1\n"
    if shutil.which("curl"):
        command = ["curl", "-sS", "-N", "--data-binary", '{"mode": "bad_chunk"}',
                   container.url("/invocations")]  # fmt: skip
        cut = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert cut.returncode == 18 and cut.stdout == "a line\n", cut
    assert "cut short" in container.logs()


def test_a_client_that_leaves_closes_the_generator(container: Container) -> None:
    marker = "/tmp/streaming-marker"
    response = stream(container, {"mode": "endless", "marker": marker, "interval": 0.02})
    lines = response.iter_lines(chunk_size=None)
    assert [next(lines), next(lines), next(lines)] == [b"line 1", b"line 2", b"line 3"]
    response.close()
    deadline = time.monotonic() + 15
    while not in_container(container, marker).startswith("closed after"):
        assert time.monotonic() < deadline, in_container(container, marker)
        time.sleep(0.2)
    produced = int(in_container(container, marker).removeprefix("closed after "))
    assert 3 <= produced < 100


def test_a_large_streamed_answer_arrives_whole(container: Container) -> None:
    response = stream(container, {"mode": "size", "total": 100_000_000, "chunk": 1 << 20})
    assert sum(len(piece) for piece in response.iter_content(chunk_size=1 << 20)) == 100_000_000


def test_sessions_in_both_workers_keep_their_own_state(container: Container) -> None:
    def open_session() -> str:
        opened = container.invoke('{"requestType": "NEW_SESSION"}', "application/json",
                                  **{SESSION_HEADER: "NEW_SESSION"})  # fmt: skip
        assert opened.status_code == 200, opened.text
        session_id = opened.headers["X-Amzn-SageMaker-New-Session-Id"].split(";")[0]
        assert NEW_SESSION_ID.fullmatch(session_id), session_id
        return session_id

    def count(session_id: str) -> int:
        answer = container.invoke('{"mode": "session"}', "application/json",
                                  **{SESSION_HEADER: session_id})  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert answer.json()["session_id"] == session_id
        return answer.json()["count"]

    sessions = [open_session() for _ in range(4)]
    assert {session_id[0] for session_id in sessions} == {"0", "1"}
    for round_number in range(1, 26):
        assert [count(session_id) for session_id in sessions] == [round_number] * 4
    for session_id in sessions:
        closed = container.invoke('{"requestType": "CLOSE"}', "application/json",
                                  **{SESSION_HEADER: session_id})  # fmt: skip
        assert closed.headers["X-Amzn-SageMaker-Closed-Session-Id"] == session_id
    gone = container.invoke('{"mode": "session"}', "application/json",
                            **{SESSION_HEADER: sessions[0]})  # fmt: skip
    assert gone.status_code == 400 and sessions[0] in gone.json()["error"]
