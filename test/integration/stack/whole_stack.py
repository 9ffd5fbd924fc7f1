"""Running the whole stack (``sagemaker-tfs serve``) on the host, for tests and benchmarks.

Real nginx, gunicorn and model server processes on a free port range. ``launch`` starts a
stack, ``Stack.wait_for_ping`` waits for ``/ping`` to answer 200, ``Stack.stop`` sends
SIGTERM. ``running_stack`` does all three around a ``with`` block (one stack for a test
module or a benchmark); the ``start_stack`` fixture in ``conftest.py`` gives each test its
own. Process helpers read ``/proc`` so tests can check that nothing is left behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import requests
from local_ports import free_port_range

STARTUP_TIMEOUT_SECONDS = 180.0
STANDBY_WAITING = "standby model server (waiting)"  # its title (model_server/standby.py)
STOP_TIMEOUT_SECONDS = 60.0


class StackError(RuntimeError):
    """The stack did not start or stop as expected (the message ends with its log)."""


def _ppid_and_state(pid: int) -> tuple[int, str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[1]), fields[0]


def pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    info = _ppid_and_state(pid)
    return info is not None and info[1] != "Z"


def _leads_a_session(pid: int) -> bool:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        return os.getsid(pid) == pid
    return False


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def descendant_pids(root: int) -> list[int]:
    """Every live process below ``root`` (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = _ppid_and_state(int(entry))
            if info is not None and info[1] != "Z":
                children.setdefault(info[0], []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def wait_for(condition: Callable[[], bool], timeout: float, interval: float = 0.2) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


def http_post(
    url: str, body: bytes | str, content_type: str | None, headers: dict[str, str], timeout: float
) -> requests.Response:
    """POST ``body`` with ``headers`` and ``content_type`` as its Content-Type (``None``: no
    Content-Type header at all, to see what the stack does without one)."""
    if content_type is not None:
        headers = {**headers, "Content-Type": content_type}
    return requests.post(url, data=body, headers=headers, timeout=timeout)


@dataclass
class Stack:
    """A running ``sagemaker-tfs serve``."""

    url: str
    port: int
    work_dir: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    port_range: tuple[int, int]

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_tail(self, size: int = 6000) -> str:
        """The end of the log, for a failure message (CI shows the start of a long one)."""
        return self.log_text()[-size:]

    def post(self, body: bytes | str, content_type: str | None = "application/json",
             path: str = "/invocations", **headers: str) -> requests.Response:  # fmt: skip
        return http_post(self.url + path, body, content_type, headers, timeout=60)

    def get(self, path: str) -> requests.Response:
        return requests.get(self.url + path, timeout=30)

    def ping(self, timeout: float = 2.0) -> int | None:
        try:
            return requests.get(f"{self.url}/ping", timeout=timeout).status_code
        except requests.RequestException:
            return None

    def wait_for_ping(self, timeout: float = STARTUP_TIMEOUT_SECONDS) -> None:
        """Until /ping answers 200; raises StackError with the log if it exits or times out."""
        deadline = time.monotonic() + timeout
        while self.ping() != 200:
            if self.process.poll() is not None:
                raise StackError(
                    f"serve exited with {self.process.returncode} before /ping answered 200:\n"
                    + self.log_tail()
                )
            if time.monotonic() > deadline:
                raise StackError(f"/ping not 200 after {timeout}s:\n" + self.log_tail())
            time.sleep(0.25)

    def child_pids(self, marker: str) -> list[int]:
        """The supervisor's own children whose command line contains ``marker``: direct
        children that lead a session of their own. Workers orphaned by a killed master are
        reparented to the supervisor (a child subreaper) but lead no session."""
        return [
            pid
            for pid in descendant_pids(self.process.pid)
            if (_ppid_and_state(pid) or (0, ""))[0] == self.process.pid
            and _leads_a_session(pid)
            and marker in cmdline(pid)
        ]

    def standby_waits(self) -> bool:
        """The standby model server has imported TensorFlow and waits (its process title)."""
        return self.child_pids(STANDBY_WAITING) != []

    def settled(self) -> bool:
        """The standby model server waits and, with the zygote, its spare was forked (a round
        of the watch loop after the zygote's import)."""
        if not self.standby_waits():
            return False
        log = self.log_text()
        return "started model server zygote" not in log or "forked its spare" in log

    def wait_until_settled(self, timeout: float = STARTUP_TIMEOUT_SECONDS) -> None:
        """Until the stack has settled (``settled``). The supervisor starts the standby right
        after the stack serves (the zygote before), so a test that compares the stack's
        processes before and after starts here."""
        if not wait_for(self.settled, timeout):
            raise StackError("no standby model server waiting:\n" + self.log_tail())

    def orphans(self, marker: str) -> list[int]:
        """Live processes reparented to the supervisor (a child subreaper) whose command line
        contains ``marker``, e.g. the workers of a killed gunicorn master while they serve on."""
        found = []
        for pid in descendant_pids(self.process.pid):
            ppid, state = _ppid_and_state(pid) or (0, "Z")
            if ppid != self.process.pid or state == "Z" or _leads_a_session(pid):
                continue
            if marker in cmdline(pid):
                found.append(pid)
        return found

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> int:
        """SIGTERM, then wait; returns the exit code (kills it and raises if it hangs)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill_session()
                raise StackError("serve did not stop within the timeout after SIGTERM") from None
        return self.process.returncode

    def kill_session(self) -> None:
        """SIGKILL whatever is left in the stack's session (children in sessions of their
        own are the supervisor's job; tests check that separately)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


StartStack = Callable[..., Stack]


def launch(
    model_dir: str | os.PathLike[str],
    work_dir: Path,
    env: dict[str, str] | None = None,
    multi_model: bool = False,
    port_range_size: int = 20,
    port: int | None = None,
    affinity: set[int] | None = None,
) -> Stack:
    """Start ``sagemaker-tfs serve`` on free ports (internal ones from a safe port range);
    ``affinity``: the CPUs it (and so every process of the stack) may run on."""
    low, high = free_port_range(port_range_size + 1)
    port = port or high  # by default the public port sits just above the internal ones
    child_env = dict(os.environ)
    child_env.update(
        {
            "SAGEMAKER_SAFE_PORT_RANGE": f"{low}-{high - 1}",
            "SAGEMAKER_MULTI_MODEL": "true" if multi_model else "false",
            "SAGEMAKER_TFS_WAIT_TIME_SECONDS": "120",
        }
    )
    child_env.update(env or {})
    log_path = work_dir / "serve.log"
    command = [
        sys.executable, "-m", "sagemaker_tfs.cli", "serve", "--model-dir", str(model_dir),
        "--work-dir", str(work_dir), "--port", str(port),
    ]  # fmt: skip
    # Appending: nginx writes its access log to its own opening of the same file
    # (/dev/stdout), whose writes must not be overwritten by the supervisor's.
    with open(log_path, "ab") as log_file:
        process = subprocess.Popen(
            command, env=child_env, stdout=log_file, stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=None if affinity is None else lambda: os.sched_setaffinity(0, affinity),
        )  # fmt: skip
    return Stack(f"http://127.0.0.1:{port}", port, work_dir, process, log_path, (low, high))


@contextlib.contextmanager
def running_stack(
    model_dir: Path,
    work_dir: Path,
    env: dict[str, str] | None = None,
    multi_model: bool = False,
    affinity: set[int] | None = None,
) -> Iterator[Stack]:
    """A stack that answers /ping for the duration of the ``with`` block (its processes on
    the CPUs of ``affinity``, when given)."""
    stack = launch(model_dir, work_dir, env, multi_model, affinity=affinity)
    try:
        stack.wait_for_ping()
        yield stack
    finally:
        with contextlib.suppress(StackError):
            stack.stop()
        stack.kill_session()


@contextlib.contextmanager
def stack_with_code(
    root: Path, model: Path, code: Path | None = None, env: dict[str, str] | None = None
) -> Iterator[Stack]:
    """``running_stack`` on a copy of the model directory ``model`` under ``root``, with a copy
    of ``code`` as its ``code/`` when given."""
    shutil.copytree(model, root / "model" / model.name)
    if code is not None:
        shutil.copytree(code, root / "model" / "code")
    (root / "work").mkdir()
    with running_stack(root / "model", root / "work", env) as stack:
        yield stack


RunningStack = Stack
