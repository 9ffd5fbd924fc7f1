"""scripts/curl.sh against a recording HTTP server on a free port: the requests it sends
(method, path, headers, body) and its exit status. Whether the stack answers them correctly
is tested with the stack itself (test/integration/stack)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from local_ports import free_port
from script_helpers import REPO_ROOT

CURL = REPO_ROOT / "scripts" / "curl.sh"


class RecordingServer(ThreadingHTTPServer):
    def __init__(self, status: int) -> None:
        super().__init__(("127.0.0.1", 0), RecordingHandler)
        self.status = status
        self.requests: list[dict] = []


class RecordingHandler(BaseHTTPRequestHandler):
    server: RecordingServer

    def answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.server.requests.append(
            {
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": self.rfile.read(length),
            }
        )
        body = b'{"predictions": [3.5, 4.0, 5.5]}'
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = answer

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the recorded requests instead."""


def serve(status: int) -> Iterator[RecordingServer]:
    server = RecordingServer(status)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    yield from serve(200)


@pytest.fixture
def failing_server() -> Iterator[RecordingServer]:
    yield from serve(500)


def run_curl(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CURL), "--port", str(port), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path("/"),
    )


def test_default_examples_send_every_content_type(server: RecordingServer) -> None:
    result = run_curl(server.server_address[1])
    assert result.returncode == 0, result.stderr
    requests = server.requests
    assert [(r["method"], r["path"]) for r in requests] == [("GET", "/ping")] + [
        ("POST", "/invocations")
    ] * 6
    types = [r["headers"].get("content-type") for r in requests[1:]]
    assert types == [
        "application/json",
        "application/jsonlines",
        "text/csv",
        "application/json",
        "application/json",
        "application/x-npy",
    ]
    assert json.loads(requests[1]["body"]) == {"instances": [1.0, 2.0, 5.0]}
    assert requests[2]["body"] == b"[1.0, 2.0]\n[5.0, 6.0]\n"
    assert requests[3]["body"] == b"1.0\n2.0\n5.0\n"
    assert requests[4]["headers"]["accept"] == "application/jsonlines"
    attributes = requests[5]["headers"]["x-amzn-sagemaker-custom-attributes"]
    assert attributes == "tfs-model-name=half_plus_three,tfs-method=predict"
    assert json.loads(requests[5]["body"]) == {"instances": [1.0, 2.0, 5.0]}
    array = np.load(io.BytesIO(requests[6]["body"]), allow_pickle=False)
    assert array.dtype == np.float32 and array.tolist() == [1.0, 2.0, 5.0]
    assert result.stdout.count("-- HTTP 200") == 7
    assert '{"predictions": [3.5, 4.0, 5.5]}' in result.stdout


def test_multi_model_example_loads_lists_invokes_and_unloads(server: RecordingServer) -> None:
    result = run_curl(
        server.server_address[1], "--model", "m1", "--models-root", "/srv", "multi-model"
    )
    assert result.returncode == 0, result.stderr
    assert [(r["method"], r["path"]) for r in server.requests] == [
        ("POST", "/models"),
        ("GET", "/models"),
        ("POST", "/models/m1/invoke"),
        ("DELETE", "/models/m1"),
    ]
    assert json.loads(server.requests[0]["body"]) == {"model_name": "m1", "url": "/srv/m1"}


def test_non_2xx_answers_make_the_script_fail(failing_server: RecordingServer) -> None:
    result = run_curl(failing_server.server_address[1], "ping", "json")
    assert result.returncode == 1
    assert "2 request(s) failed" in result.stderr
    assert len(failing_server.requests) == 2


def test_unreachable_server_fails(server: RecordingServer) -> None:
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    result = run_curl(port, "ping")
    assert result.returncode == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [(["nonsense"], "unknown example 'nonsense'"), (["--port", "x"], "invalid port 'x'")],
)
def test_usage_errors(args: list[str], message: str) -> None:
    result = subprocess.run([str(CURL), *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr


def run_against_local_stack(tmp_path: Path, env: dict[str, str], *curl_args: str) -> str:
    """start.sh --local (the real stack on this host: nginx, gunicorn, model server), then
    curl.sh, then stop.sh --local; returns curl.sh's output."""
    if shutil.which("nginx", path="/usr/sbin:/usr/bin") is None:
        pytest.skip("nginx is not installed")
    port = free_port()
    work = ["--work-dir", str(tmp_path / "work")]
    # free_port() comes from the ephemeral range (< 61000): the next 100 stay below 65536
    env = {**os.environ, "SAGEMAKER_SAFE_PORT_RANGE": f"{port + 1}-{port + 100}", **env}
    start = subprocess.run(
        [str(REPO_ROOT / "scripts" / "start.sh"), "--local", "--port", str(port), *work],
        capture_output=True,
        text=True,
        timeout=330,
        env=env,
    )
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        result = run_curl(port, *curl_args)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout
    finally:
        subprocess.run(
            [str(REPO_ROOT / "scripts" / "stop.sh"), "--local", *work], timeout=120, check=False
        )


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_every_default_example_succeeds_against_the_local_stack(tmp_path: Path) -> None:
    output = run_against_local_stack(tmp_path, {})
    assert output.count("-- HTTP 200") == 7
    assert "[3.5, 4.0, 5.5" in output.replace("\n", "").replace("    ", "")


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_multi_model_example_succeeds_against_a_local_multi_model_stack(tmp_path: Path):
    models = str(REPO_ROOT / "test" / "resources" / "models")
    env = {"SAGEMAKER_MULTI_MODEL": "true"}
    output = run_against_local_stack(tmp_path, env, "--models-root", models, "multi-model")
    assert output.count("-- HTTP 200") == 4
    assert "Successfully loaded model half_plus_three" in output
    assert "Successfully unloaded model half_plus_three" in output
