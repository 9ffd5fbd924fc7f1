"""A module-scoped whole stack for the request-path tests.

``conftest.start_stack`` is function-scoped (a fresh stack per test); the request-path
tests send dozens of requests to one stack, so this starts ``sagemaker-tfs serve`` the
same way (free port range, SIGTERM at the end) once per test module.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import requests

STARTUP_TIMEOUT_SECONDS = 180.0


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_range(size: int) -> tuple[int, int]:
    for _ in range(200):
        low = random.randrange(20000, 60000 - size)
        if all(_port_is_free(p) for p in range(low, low + size)):
            return low, low + size - 1
    raise RuntimeError(f"no {size} consecutive free ports")


@dataclass
class RunningStack:
    url: str
    work_dir: Path
    process: subprocess.Popen[bytes]

    def log_text(self) -> str:
        return (self.work_dir / "serve.log").read_text(errors="replace")

    def post(self, body: bytes | str, content_type: str | None = "application/json",
             path: str = "/invocations", **headers: str) -> requests.Response:  # fmt: skip
        all_headers = dict(headers)
        if content_type is not None:
            all_headers["Content-Type"] = content_type
        return requests.post(self.url + path, data=body, headers=all_headers, timeout=60)

    def get(self, path: str) -> requests.Response:
        return requests.get(self.url + path, timeout=30)


def _ping(url: str) -> int | None:
    try:
        return requests.get(url + "/ping", timeout=2).status_code
    except requests.RequestException:
        return None


@contextlib.contextmanager
def running_stack(
    model_dir: Path, work_dir: Path, env: dict[str, str] | None = None, multi_model: bool = False
) -> Iterator[RunningStack]:
    low, high = _free_range(21)
    child_env = dict(os.environ)
    child_env.update(
        {
            "SAGEMAKER_SAFE_PORT_RANGE": f"{low}-{high - 1}",
            "SAGEMAKER_MULTI_MODEL": "true" if multi_model else "false",
            "SAGEMAKER_TFS_WAIT_TIME_SECONDS": "120",
        }
    )
    child_env.update(env or {})
    command = [
        sys.executable, "-m", "sagemaker_tfs.cli", "serve", "--model-dir", str(model_dir),
        "--work-dir", str(work_dir), "--port", str(high),
    ]  # fmt: skip
    with open(work_dir / "serve.log", "wb") as log_file:
        process = subprocess.Popen(
            command, env=child_env, stdout=log_file, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    stack = RunningStack(f"http://127.0.0.1:{high}", work_dir, process)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while _ping(stack.url) != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the stack did not start:\n" + stack.log_text()[-6000:])
            time.sleep(0.25)
        yield stack
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(60)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
