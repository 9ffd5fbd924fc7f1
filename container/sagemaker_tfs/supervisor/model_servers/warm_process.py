"""A process kept warm for the next model server: TensorFlow imported ahead of time.

Our Python model server spends most of its start-up importing TensorFlow (3-4 s on a quiet
2-core machine, 10 s and more on a busy one; docs/reliability.md). The supervisor keeps one
process that has done the import, started when its kind's ``start_when`` allows (the standby:
once the stack has settled, every model server ready, so that its import does not compete
for the CPU with a model that is loading; the zygote: at once, as it forks the first model
servers too), and replaced when it exits, after a backoff that doubles up to a minute. What
it does for a model server that starts is its kind's: the standby becomes it
(``standby_model_server``), the zygote forks one (``model_server_zygote``).

Not used with the real ``tensorflow_model_server`` binary, which needs no import.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence

from sagemaker_tfs.supervisor.processes.children import describe_exit

FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 60.0
STOP_SECONDS = 5.0


class WarmProcess:
    """At most one process; ``check`` (the watch loop) notices its exit and starts one when
    none runs and ``start_when()`` allows; ``stop`` ends it and keeps it from starting again.

    A subclass names itself (``NAME``), starts its process (``_start``, which records it in
    ``process`` through ``children.spawn_for``) and hands it to model servers. Lock order:
    the spawn lock, then ``self._lock``."""

    NAME = "warm process"
    COMMAND: tuple[str, ...] = ()  # the process each kind starts, unless given another

    def __init__(
        self,
        env: dict[str, str],
        start_when: Callable[[], bool],
        nice: int = 0,
        command: Sequence[str] | None = None,
    ) -> None:
        self.env = env
        self.nice = nice
        self.command = list(self.COMMAND if command is None else command)
        self.start_when = start_when
        self.process: subprocess.Popen[bytes] | None = None
        self.restart_at = 0.0
        self.backoff = FIRST_BACKOFF_SECONDS
        self.stopped = False
        self._lock = threading.Lock()
        self._log = logging.getLogger(type(self).__module__)  # each kind's lines as before

    def check(self, now: float) -> None:
        """Notice a process that exited; start one when none runs."""
        with self._lock:
            process = self.process
        if self.stopped:
            return
        if process is not None:
            code = process.poll()
            if code is None:
                return
            self._forget(process, code, now)
        if now >= self.restart_at and self.start_when():
            self._start()

    def _forget(self, process: subprocess.Popen[bytes], code: int, now: float) -> None:
        with self._lock:
            if self.process is process:
                self.process = None
                self._let_go()
        if self._ends_for_good(process, code):
            self.stopped = True
            return
        self.restart_at = now + self.backoff
        self._log.warning(
            "%s (pid %d) %s; a new one starts in %.0fs",
            self.NAME,
            process.pid,
            describe_exit(code),
            self.backoff,
        )
        self.backoff = min(self.backoff * 2, MAX_BACKOFF_SECONDS)

    def _let_go(self) -> None:
        """What to drop with a process that is gone or stopped (under ``self._lock``)."""

    def _ends_for_good(self, process: subprocess.Popen[bytes], code: int) -> bool:
        """Whether this exit means none should start again (logged here if so)."""
        return False

    def _start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """Stop the process, if any; none starts after this."""
        self.stopped = True
        with self._lock:
            process, self.process = self.process, None
            self._let_go()
        if process is not None:
            self._log.info("stopping %s (pid %d)", self.NAME, process.pid)
            kill_group(process)


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process's group (it leads a session of its own) and wait for it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(STOP_SECONDS)
