"""A gunicorn worker told to stop (SIGTERM: what the supervisor sends a killed master's worker
once its successor's serves) leaves once it holds no request in progress, although a client
keeps an idle kept-alive connection to it (issue 55: the old worker of a killed master took
gunicorn's 30 s graceful timeout to leave in 2 of 10 kills in the image, nginx holding an
idle upstream connection to it). A request in progress when it was told still gets its
answer.

Real gunicorn with the stack's hooks and an ``inference.py`` whose handler sleeps as many
seconds as it is sent; raw socket clients on the service's unix socket stand in for nginx.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from front_end import EXAMPLE_MODELS
from local_ports import free_port
from sagemaker_tfs.config import load_config
from sagemaker_tfs.stack_config import STACK_CONFIG_ENV
from sagemaker_tfs.supervisor.service_launcher import gunicorn_command

pytestmark = pytest.mark.timeout(120)

SLEEPING_HANDLER = """
import json
import time


def handler(data, context):
    seconds = float(data.read() or 0)
    time.sleep(seconds)
    return json.dumps({"slept": seconds}), "application/json"
"""
GRACEFUL_TIMEOUT_SECONDS = 30  # the stack's (SAGEMAKER_GUNICORN_TIMEOUT_SECONDS)
LEAVES_WITHIN_SECONDS = 10.0  # 2.9 s at load 3 (the request ends 1.5 s after the SIGTERM)


@dataclass
class Service:
    socket_path: str
    gunicorn: subprocess.Popen[bytes]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    """gunicorn as the supervisor starts it (its command line, on a socket held for it)."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "half_plus_three").symlink_to(EXAMPLE_MODELS / "half_plus_three")
    (model_dir / "code").mkdir()
    (model_dir / "code" / "inference.py").write_text(SLEEPING_HANDLER)
    config = load_config({}, model_dir=str(model_dir), work_dir=str(tmp_path / "work"),
                         port=free_port())  # fmt: skip
    Path(config.work.root).mkdir(parents=True)
    config_path = tmp_path / "stack.json"
    config_path.write_text(config.to_json())
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(config.work.service_socket)
    listener.listen(64)
    gunicorn = subprocess.Popen(
        gunicorn_command(config, listener.fileno()), pass_fds=(listener.fileno(),),
        env=dict(os.environ, **{STACK_CONFIG_ENV: str(config_path)}),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    listener.close()
    service = Service(config.work.service_socket, gunicorn)
    deadline = time.monotonic() + 60
    ready = Path(config.work.service_ready_marker(gunicorn.pid))
    while not ready.exists():
        assert gunicorn.poll() is None and time.monotonic() < deadline, "gunicorn did not start"
        time.sleep(0.1)
    yield service
    os.killpg(gunicorn.pid, signal.SIGKILL)
    gunicorn.wait()


def invocation(seconds: float) -> bytes:
    body = str(seconds).encode()
    head = "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


def read_answer(connection: socket.socket) -> bytes:
    """One answer, head and Content-Length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        assert chunk, f"closed before an answer: {data!r}"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += connection.recv(65536)
    return head + b"\r\n\r\n" + body


def worker_pids(service: Service) -> list[int]:
    master = service.gunicorn.pid
    return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_stopping_worker_leaves_with_an_idle_kept_alive_connection_open(service: Service) -> None:
    """One connection answered once and left idle, another with a 2 s request in flight; the
    worker is told to stop 0.5 s into that request: it answers the request, closes the idle
    connection and leaves within a few seconds, not after the 30 s graceful timeout."""
    socket_path = service.socket_path
    idle = socket.socket(socket.AF_UNIX)
    idle.connect(socket_path)
    idle.sendall(invocation(0))
    assert b" 200 " in read_answer(idle).split(b"\r\n", 1)[0]
    busy = socket.socket(socket.AF_UNIX)
    busy.connect(socket_path)
    busy.sendall(invocation(2.0))
    time.sleep(0.5)
    (pid,) = worker_pids(service)
    os.kill(pid, signal.SIGTERM)
    told = time.monotonic()
    busy.settimeout(30)
    answer = read_answer(busy)
    assert answer.split(b"\r\n", 1)[0] == b"HTTP/1.1 200 OK", answer
    assert answer.endswith(b'{"slept": 2.0}')
    deadline = told + GRACEFUL_TIMEOUT_SECONDS - 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    left_after = time.monotonic() - told
    assert not alive(pid), "the worker is still there 25 s after its SIGTERM"
    assert left_after <= LEAVES_WITHIN_SECONDS, left_after
    idle.settimeout(5)
    assert idle.recv(1) == b""  # the worker closed it
