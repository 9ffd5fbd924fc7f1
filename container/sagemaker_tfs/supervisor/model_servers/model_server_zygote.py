"""The model server zygote: one process with TensorFlow imported that forks model servers.

The standby (``standby_model_server``) serves one restart; a model server that dies again
before the next standby has imported TensorFlow waits for that import (3-4 s on a quiet
machine, far more on a busy one). The zygote (``sagemaker_tfs.model_server.zygote``) is asked
for a model server at every start and forks one in milliseconds, however many die in a row;
the model server then only loads its models. Forked pages are shared with it until written,
so it costs less memory than a standby that duplicates them.

A forked model server is forked twice, so it becomes the supervisor's own child (the
supervisor is a child subreaper, or PID 1 in the container) and ``ForkedProcess`` gives the
``Child`` the Popen it expects. A model server *restarted* while the zygote imports (in the
seconds after the stack starts serving, or after the zygote itself died and was started
again) waits for that import, which started earlier than a cold start would and so ends
sooner (``ZygoteImporting``: the ``Child`` tries again a moment later); a first start, or one
with no zygote running, is spawned the cold way.

Not used with the real ``tensorflow_model_server`` binary, which needs no import.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from sagemaker_tfs.supervisor.model_servers.warm_process import FIRST_BACKOFF_SECONDS, WarmProcess
from sagemaker_tfs.supervisor.processes.children import spawn_for

logger = logging.getLogger(__name__)

NAME = "model server zygote"
FORK_SECONDS = 5.0
NOT_SINGLE_THREADED = 3  # the zygote's exit code when a fork would not be safe (no retry)
# A restart waiting for the zygote's import asks again this often, and for at most this long
# (then it starts cold: an import that takes longer is stuck).
IMPORT_POLL_SECONDS = 0.02
IMPORT_WAIT_SECONDS = 60.0


class ZygoteImporting(OSError):
    """The zygote still imports: try the start again in ``retry_seconds`` (``Child._restart``)."""

    retry_seconds = IMPORT_POLL_SECONDS


class ForkedProcess(subprocess.Popen[bytes]):
    """A Popen for a child the zygote forked: ``poll``, ``wait`` and signals work as for one
    Popen started (they need only the pid of a child of this process)."""

    def __init__(self, pid: int, args: Sequence[str]) -> None:  # noqa: PLW0231
        # Popen.__init__ would start a process; these are the attributes its methods read.
        self.args = list(args)
        self.pid = pid
        self.returncode = None
        self.stdin = self.stdout = self.stderr = None
        self.text_mode = False
        self.encoding = self.errors = None
        self.universal_newlines = False
        self._child_created = True
        self._waitpid_lock = threading.Lock()
        self._input = None
        self._communication_started = False
        self._sigint_wait_secs = 0.25
        self._closed_child_pipe_fds = True


class ModelServerZygote(WarmProcess):
    """At most one zygote; ``take`` forks a model server from it, ``check`` replaces it.

    The same contract as ``StandbyModelServer``: ``take`` runs under the spawn lock (so the
    forked process is recorded before ``reap_orphans`` could reap it), ``check`` in the watch
    loop. ``stop`` ends the zygote only: its model servers are the supervisor's children and
    stop with their tier.
    """

    NAME = NAME
    COMMAND = (sys.executable, "-m", "sagemaker_tfs.model_server.zygote")
    # Each instance's own once assigned; these (immutable) values until then.
    channel: socket.socket | None = None
    ready = False
    waiting_since: float | None = None  # a restart waits for the import since then

    def take(self, argv: Sequence[str], wait: bool = False) -> subprocess.Popen[bytes] | None:
        """A model server running ``argv`` forked by the zygote; None while there is none
        ready (the caller spawns one). With ``wait`` (a restart), ZygoteImporting while the
        zygote imports, for up to ``IMPORT_WAIT_SECONDS``."""
        with self._lock:
            started = time.monotonic()
            try:
                if self.channel is None or not self._ready_now(self.channel):
                    if wait and self.channel is not None and self._may_wait(started):
                        raise ZygoteImporting(f"{NAME} is importing TensorFlow")
                    self.waiting_since = None
                    return None
                pid = self._fork(self.channel, argv)
            except ZygoteImporting:
                raise
            except (OSError, ValueError) as error:
                logger.warning("%s could not fork a model server: %s", NAME, error)
                self._discard()
                return None
        self.backoff = FIRST_BACKOFF_SECONDS
        waited, self.waiting_since = _waited(started, self.waiting_since), None
        logger.info("%s forked pid %d in %.3fs%s", NAME, pid, time.monotonic() - started, waited)
        return ForkedProcess(pid, argv)

    def _may_wait(self, now: float) -> bool:
        """A restart may wait for the import (still running, not waited on too long)."""
        if self.process is None or self.process.poll() is not None:
            return False
        if self.waiting_since is None:
            self.waiting_since = now
            logger.info("a model server waits for the import of %s (pid %d)", NAME,
                        self.process.pid)  # fmt: skip
        return now - self.waiting_since < IMPORT_WAIT_SECONDS

    def _ready_now(self, channel: socket.socket) -> bool:
        """Whether the zygote said it has imported TensorFlow (read without waiting)."""
        if not self.ready and select.select([channel], [], [], 0)[0]:
            self.ready = _read_line(channel, FORK_SECONDS) == "ready"
        return self.ready

    @staticmethod
    def _fork(channel: socket.socket, argv: Sequence[str]) -> int:
        channel.sendall(json.dumps(list(argv)).encode() + b"\n")
        return int(_read_line(channel, FORK_SECONDS))

    def _let_go(self) -> None:
        self._close_channel()

    def _ends_for_good(self, process: subprocess.Popen[bytes], code: int) -> bool:
        if code != NOT_SINGLE_THREADED:
            return False
        logger.error(
            "%s (pid %d) has threads after its imports: model servers start cold",
            NAME,
            process.pid,
        )
        return True

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            argv = [*self.command, str(os.getpid())]
            process = spawn_for(self, argv, self.env, stdin=theirs.fileno(), nice=self.nice)
        finally:
            theirs.close()
        with self._lock:
            self.channel, self.ready = ours, False
        logger.info("started %s (pid %d)", NAME, process.pid)

    def _discard(self) -> None:
        """A zygote that does not answer is killed; ``check`` replaces it after the backoff."""
        self._close_channel()
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def _close_channel(self) -> None:
        if self.channel is not None:
            self.channel.close()
        self.channel, self.ready = None, False


PR_GET_CHILD_SUBREAPER = 37


def adopts_orphans() -> bool:
    """Whether this process gets its orphaned descendants: PID 1 or a child subreaper."""
    if os.getpid() == 1:
        return True
    flag = ctypes.c_int(0)
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    return prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag)) == 0 and flag.value == 1


def _waited(now: float, since: float | None) -> str:
    return f" after waiting {now - since:.2f}s for its import" if since is not None else ""


def _read_line(channel: socket.socket, timeout: float) -> str:
    """One line from the zygote (ValueError if it closed or took longer than ``timeout``)."""
    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([channel], [], [], remaining)[0]:
            raise ValueError(f"no answer within {timeout:.0f}s")
        chunk = channel.recv(64)
        if not chunk:
            raise ValueError("it closed its end")
        data += chunk
    return data.decode().strip()
