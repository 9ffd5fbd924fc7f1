"""The model server zygote: one process with TensorFlow imported that forks model servers.

The standby (``standby_model_server``) serves one restart; a model server that dies again
before the next standby has imported TensorFlow waits for that import (3-4 s on a quiet
machine, far more on a busy one). The zygote (``sagemaker_tfs.model_server.zygote``) is asked
for a model server at every start and forks one in milliseconds, however many die in a row;
the model server then only loads its models. Forked pages are shared with it until written,
so it costs less memory than a standby that duplicates them.

A forked model server is forked twice, so it becomes the supervisor's own child (the
supervisor is a child subreaper, or PID 1 in the container) and ``ForkedProcess`` gives the
``Child`` the Popen it expects.

No model server waits for a TensorFlow import but the first ones (issue 55):

- the zygote starts with the stack (``start_now``), before any model server, and the first
  model servers are forked from it once it has imported (``wait_until_ready``): one import
  at start-up, not a model server's and the zygote's competing for the CPU, and a model
  server killed as soon as the stack serves is forked like any other. A zygote that cannot
  fork (a thread left after its imports: exit code 3) or does not import within
  ``IMPORT_WAIT_SECONDS`` leaves them to start cold.
- once ready, the zygote forks a *spare* of itself (``SpareZygote``; its pages shared until
  written, so little memory) that the supervisor keeps: when the zygote dies the spare takes
  its place at once, in the watch loop or in the ``take`` of a model server restarted in the
  same round, and a new spare is forked from it.

Only when the zygote and its spare are both gone does a new one import (after a backoff); a
model server restarted then waits for that import (``ZygoteImporting``: the ``Child`` tries
again a moment later), which started earlier than a cold start would and so ends sooner.

Not used with the real ``tensorflow_model_server`` binary, which needs no import.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from sagemaker_tfs.supervisor.model_servers.warm_process import (
    FIRST_BACKOFF_SECONDS,
    WarmProcess,
)
from sagemaker_tfs.supervisor.model_servers.zygote_channel import (
    FORK_SECONDS,
    ForkedProcess,
    SpareZygote,
    ask_for_model_server,
    ask_for_spare,
    read_line,
)
from sagemaker_tfs.supervisor.processes.children import describe_exit, spawn_for
from sagemaker_tfs.supervisor.processes.spawning import owned_processes

logger = logging.getLogger(__name__)

NAME = "model server zygote"
NOT_SINGLE_THREADED = 3  # the zygote's exit code when a fork would not be safe (no retry)
# A restart waiting for the zygote's import asks again this often, and for at most this long
# (then it starts cold: an import that takes longer is stuck).
IMPORT_POLL_SECONDS = 0.02
IMPORT_WAIT_SECONDS = 60.0
SPARE_RETRY_SECONDS = 1.0  # a spare that died, or could not be forked, is asked for again then


class ZygoteImporting(OSError):
    """The zygote still imports: try the start again in ``retry_seconds`` (``Child._restart``)."""

    retry_seconds = IMPORT_POLL_SECONDS


class ModelServerZygote(WarmProcess):
    """At most one zygote and its spare; ``take`` forks a model server from it, ``check``
    keeps a spare and replaces the zygote (by its spare when there is one).

    The same contract as ``StandbyModelServer``: ``take`` runs under the spawn lock (so the
    forked process is recorded before ``reap_orphans`` could reap it), ``check`` in the watch
    loop (and ``start_now`` in whichever thread starts a model server first). ``stop`` ends
    the zygote and its spare only: its model servers are the supervisor's children and stop
    with their tier.
    """

    NAME = NAME
    COMMAND = (sys.executable, "-m", "sagemaker_tfs.model_server.zygote")
    # Each instance's own once assigned; these (immutable) values until then.
    channel: socket.socket | None = None
    ready = False
    waiting_since: float | None = None  # a restart waits for the import since then
    spare: SpareZygote | None = None
    spare_at = 0.0  # no spare is asked for before then (monotonic)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._checking = threading.Lock()  # check from the watch loop and from start_now

    def take(self, argv: Sequence[str], wait: bool = False) -> subprocess.Popen[bytes] | None:
        """A model server running ``argv`` forked by the zygote; None while there is none
        ready (the caller spawns one). With ``wait`` (a restart), ZygoteImporting while the
        zygote imports, for up to ``IMPORT_WAIT_SECONDS``."""
        with self._lock:
            started = time.monotonic()
            if self.process is not None and self.process.poll() is not None:
                self._promote_spare()  # died since the watch loop's last round
            try:
                if self.channel is None or not self._ready_now(self.channel):
                    if wait and self.channel is not None and self._may_wait(started):
                        raise ZygoteImporting(f"{NAME} is importing TensorFlow")
                    self.waiting_since = None
                    return None
                pid = self._fork_or_promote(self.channel, argv)
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

    def _fork_or_promote(self, channel: socket.socket, argv: Sequence[str]) -> int:
        """Fork from the zygote; one that fails (it died this instant) gives its place to the
        spare, which forks instead."""
        try:
            return ask_for_model_server(channel, argv)
        except (OSError, ValueError) as error:
            if self.spare is None or not self.spare.alive():
                raise
            logger.warning("%s could not fork a model server: %s", NAME, error)
        self._discard()
        self._promote_spare()
        assert self.channel is not None
        if not self._ready_now(self.channel, FORK_SECONDS):
            raise ValueError("its spare did not say it was ready")
        return ask_for_model_server(self.channel, argv)

    def _promote_spare(self) -> bool:
        """The spare, if alive, becomes the zygote (under ``self._lock``)."""
        spare, self.spare = self.spare, None
        if spare is None or not spare.alive():
            if spare is not None:
                spare.discard()
            return False
        assert spare.process is not None
        gone = self.process
        how = "does not answer"
        if gone is not None and gone.returncode is not None:
            how = describe_exit(gone.returncode)
        self._let_go()
        self.process, self.channel, self.ready = spare.process, spare.channel, False
        self.spare_at = 0.0
        logger.warning("%s (pid %d) %s: its spare (pid %d) takes its place",
                       NAME, gone.pid if gone else 0, how, spare.process.pid)  # fmt: skip
        return True

    def _may_wait(self, now: float) -> bool:
        """A restart may wait for the import (still running, not waited on too long)."""
        if self.process is None or self.process.poll() is not None:
            return False
        if self.waiting_since is None:
            self.waiting_since = now
            logger.info("a model server waits for the import of %s (pid %d)", NAME,
                        self.process.pid)  # fmt: skip
        return now - self.waiting_since < IMPORT_WAIT_SECONDS

    def _ready_now(self, channel: socket.socket, within: float = 0.0) -> bool:
        """Whether the zygote said it has imported TensorFlow (read waiting at most
        ``within``)."""
        if not self.ready and select.select([channel], [], [], within)[0]:
            self.ready = read_line(channel, FORK_SECONDS) == "ready"
        return self.ready

    # --- the first model servers, forked too ---

    def start_now(self) -> None:
        """Start the zygote if none runs (and none is due later): before the first model
        server, which it is to fork."""
        if self.process is None:
            self.check(time.monotonic())

    def wait_until_ready(self, timeout: float, stop_requested: Callable[[], bool]) -> bool:
        """Wait (outside every lock) until the zygote has imported: True, or False once there
        is none, it exited (e.g. code 3), ``timeout`` passed or a stop was asked."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not stop_requested():
            with self._lock:
                ready = self._ready_or_gone()
            if ready is not None:
                return ready
            time.sleep(IMPORT_POLL_SECONDS)
        return False

    def _ready_or_gone(self) -> bool | None:
        """True: ready; False: no zygote (or one that will not answer); None: importing."""
        if self.stopped or self.channel is None:
            return False
        try:
            if self._ready_now(self.channel):
                return True
        except (OSError, ValueError):
            return False  # it exited: ``check`` tells why
        return None if self.process is not None and self.process.poll() is None else False

    # --- the watch loop ---

    def check(self, now: float) -> None:
        """The zygote replaced by its spare when it died, or started (``WarmProcess``); a
        spare forked from a ready zygote."""
        with self._checking:
            process = self.process
            if process is not None and process.poll() is not None:
                with self._lock:
                    if self.process is process:
                        self._promote_spare()
            super().check(now)
            self._keep_spare(now)

    def _keep_spare(self, now: float) -> None:
        spare = self.spare
        if spare is not None and not spare.alive():
            assert spare.process is not None
            logger.warning("spare of %s (pid %d) %s", NAME, spare.process.pid,
                           describe_exit(spare.process.returncode or 0))  # fmt: skip
            with self._lock:
                self.spare = None
            spare.discard()
            self.spare_at = now + SPARE_RETRY_SECONDS
        if self.spare is not None or self.stopped or now < self.spare_at:
            return
        self._fork_spare(now)

    def _fork_spare(self, now: float) -> None:
        """Ask the ready zygote for a spare (recorded as an owner's under the spawn lock)."""
        holder = SpareZygote()
        with owned_processes.recording(holder), self._lock:
            channel = self.channel
            if channel is None or self.spare is not None:
                return
            try:
                if not self._ready_now(channel):
                    return
                pid, spare_channel = ask_for_spare(channel)
            except (OSError, ValueError) as error:
                logger.warning("%s could not fork a spare: %s", NAME, error)
                self.spare_at = now + SPARE_RETRY_SECONDS
                return
            holder.process, holder.channel = ForkedProcess(pid, ["spare"]), spare_channel
            self.spare = holder
        logger.info("%s forked its spare (pid %d)", NAME, pid)

    def _ends_for_good(self, process: subprocess.Popen[bytes], code: int) -> bool:
        if code != NOT_SINGLE_THREADED:
            return False
        logger.error(
            "%s (pid %d) has threads after its imports: model servers start cold",
            NAME,
            process.pid,
        )
        return True

    def stop(self) -> None:
        """The zygote, then its spare: none starts after this."""
        super().stop()
        with self._lock:
            spare, self.spare = self.spare, None
        if spare is not None:
            logger.info("stopping the spare of %s", NAME)
            spare.discard()

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
        self._let_go()
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def _let_go(self) -> None:
        """The channel closed with the zygote it spoke to."""
        if self.channel is not None:
            self.channel.close()
        self.channel, self.ready = None, False


def _waited(now: float, since: float | None) -> str:
    return f" after waiting {now - since:.2f}s for its import" if since is not None else ""
