"""``--model-dir``: the serving stack started for the job (``sagemaker-tfs serve``) and
stopped after it, with the job's values in its environment as SageMaker sets them
(``SAGEMAKER_BATCH=true``, ``SAGEMAKER_MAX_CONCURRENT_TRANSFORMS``, ...).

The stack listens on a free port of 127.0.0.1; its internal ports come from a free
``SAGEMAKER_SAFE_PORT_RANGE``. Its log goes to ``WORK_DIR/serve.log``; when it fails to
start the end of that log is in the error.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Iterator
from pathlib import Path

from sagemaker_tfs.ports import port_is_free
from sagemaker_tfs.transform.endpoint_client import EndpointClient

PORT_RANGE_SIZE = 20
STOP_TIMEOUT_SECONDS = 60.0
START_ATTEMPTS = 3  # a port taken by another process between our check and the bind


class StackStartError(RuntimeError):
    """The stack exited or did not answer /ping; the message ends with its log."""


def _free_ports(count: int) -> int:
    for _ in range(200):
        low = random.randrange(20000, 60000 - count)
        if all(port_is_free(p) for p in range(low, low + count)):
            return low
    raise StackStartError(f"no {count} consecutive free ports found")


def _log_tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


@contextlib.contextmanager
def running_stack(model_dir: str, env: dict[str, str], start_timeout: float) -> Iterator[str]:
    """The stack's URL while the ``with`` block runs."""
    if not Path(model_dir).is_dir():
        raise StackStartError(f"--model-dir {model_dir!r} is not a directory")
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            stack = _started_stack(model_dir, env, start_timeout)
            url = next(stack)
            break
        except StackStartError as error:
            if attempt == START_ATTEMPTS or "address already in use" not in str(error).lower():
                raise
    try:
        yield url
    finally:
        stack.close()


def _started_stack(
    model_dir: str, env: dict[str, str], start_timeout: float
) -> Generator[str, None, None]:
    """A generator that yields the URL once the stack answers /ping and stops it when closed."""
    with tempfile.TemporaryDirectory(prefix="sagemaker-tfs-transform-") as work_dir:
        low = _free_ports(PORT_RANGE_SIZE + 1)
        port = low + PORT_RANGE_SIZE
        child_env = {
            **os.environ,
            "SAGEMAKER_SAFE_PORT_RANGE": f"{low}-{low + PORT_RANGE_SIZE - 1}",
            **env,
        }
        log_path = Path(work_dir) / "serve.log"
        command = [
            sys.executable,
            "-m",
            "sagemaker_tfs.cli",
            "serve",
            "--model-dir",
            model_dir,
            "--work-dir",
            work_dir,
            "--port",
            str(port),
        ]
        with open(log_path, "wb") as log_file:
            process = subprocess.Popen(
                command,
                env=child_env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_for_ping(process, url, log_path, start_timeout)
            yield url
        finally:
            _stop(process)


def _wait_for_ping(process: subprocess.Popen[bytes], url: str, log: Path, timeout: float) -> None:
    probe = EndpointClient(url, "application/octet-stream", None, 5, 0)
    deadline = time.monotonic() + timeout
    try:
        while probe.ping() != 200:
            if process.poll() is not None:
                raise StackStartError(
                    f"the stack exited with {process.returncode} before /ping answered 200; "
                    f"its log ends:\n{_log_tail(log)}"
                )
            if time.monotonic() > deadline:
                raise StackStartError(f"/ping not 200 after {timeout:g}s; log:\n{_log_tail(log)}")
            time.sleep(0.25)
    finally:
        probe.close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_TIMEOUT_SECONDS)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # anything left in its session
    process.wait()
