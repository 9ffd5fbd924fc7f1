"""Start a real ``sagemaker-tfs model-server`` process on free ports and wait for it.

Used by the ``start_model_server`` fixture (conftest.py) and by module-scoped fixtures
(``start_server``, ``start_batching_server``).
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from local_ports import free_port

READY_LINE = "NET_LOG: Entering the event loop"
START_TIMEOUT_SECONDS = 120.0


@dataclasses.dataclass
class ServerHandle:
    """A running model server: its ports, process and log file."""

    grpc_port: int
    rest_port: int
    process: subprocess.Popen
    log_path: Path

    @property
    def log(self) -> str:
        """Everything the server printed so far."""
        return self.log_path.read_text(errors="replace")

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def wait_for_log(self, pattern: str, timeout: float = 30.0) -> re.Match:
        """Wait until ``pattern`` (a regex) appears in the log; fail the test otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.log)
            if match:
                return match
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} not in model server log:\n{self.log}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Send ``sig`` and wait for the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=timeout)


def _flag_value(args: tuple[str, ...], name: str) -> str | None:
    """The value of ``--name=value`` (TF Serving's only form; the last one wins)."""
    values = [arg.split("=", 1)[1] for arg in args if arg.startswith(f"--{name}=")]
    return values[-1] if values else None


def launch_model_server(
    args: tuple[str, ...],
    log_path: Path,
    env: dict[str, str] | None = None,
    affinity: set[int] | None = None,
) -> ServerHandle:
    """Start the server with ``args``; free ports are added for --port/--rest_api_port.
    ``affinity``: the CPUs the process may run on (as ``taskset`` would set them)."""
    args = tuple(args)
    grpc_port = _flag_value(args, "port")
    rest_port = _flag_value(args, "rest_api_port")
    if grpc_port is None:
        grpc_port = str(free_port())
        args += (f"--port={grpc_port}",)
    if rest_port is None:
        rest_port = str(free_port())
        args += (f"--rest_api_port={rest_port}",)
    command = [sys.executable, "-m", "sagemaker_tfs.cli", "model-server", *args]
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        command,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
        preexec_fn=None if affinity is None else lambda: os.sched_setaffinity(0, affinity),
    )
    log_file.close()
    return ServerHandle(int(grpc_port), int(rest_port), process, log_path)


def wait_until_ready(handle: ServerHandle, timeout: float = START_TIMEOUT_SECONDS) -> None:
    """Block until the server printed its ready line; raise with the log if it died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if READY_LINE in handle.log:
            return
        if handle.process.poll() is not None:
            raise RuntimeError(
                f"model server exited with {handle.process.returncode}:\n{handle.log}"
            )
        time.sleep(0.05)
    raise RuntimeError(f"model server not ready after {timeout}s:\n{handle.log}")


def stop_server(handle: ServerHandle, timeout: float = 15.0) -> None:
    """SIGTERM (the clean exit TF Serving gives), SIGKILL if it does not exit in time."""
    if handle.process.poll() is None:
        handle.process.send_signal(signal.SIGTERM)
        try:
            handle.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            handle.process.kill()
            handle.process.wait()


def start_server(
    args: list[str] | tuple[str, ...], log_path: Path, env: dict[str, str] | None = None
) -> ServerHandle:
    """Start the server with ``args`` on free ports and wait until it is ready."""
    handle = launch_model_server(tuple(args), log_path, env)
    try:
        wait_until_ready(handle)
    except BaseException:
        stop_server(handle)
        raise
    return handle


def start_batching_server(
    work: Path, model_base_path: Path, parameters: str, env: dict[str, str] | None = None
) -> ServerHandle:
    """Serve ``half_plus_three`` from ``model_base_path`` with batching on, configured by
    ``parameters`` (text-format BatchingParameters, written to ``work``)."""
    parameters_file = work / "batching.config"
    parameters_file.write_text(parameters)
    args = (
        "--model_name=half_plus_three",
        f"--model_base_path={model_base_path}",
        "--enable_batching",
        f"--batching_parameters_file={parameters_file}",
        "--max_num_load_retries=0",
    )
    return start_server(args, work / "server.log", env)


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``sagemaker-tfs model-server ARGS`` to its end: exit code, stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "sagemaker_tfs.cli", "model-server", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def wait_for(condition: Callable[[], object], timeout: float = 30.0) -> None:
    """Poll ``condition`` every 0.2 s until it is true; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError("condition not met in time")
