"""The standby model server: a Python model server with TensorFlow imported, waiting.

Our Python model server spends most of its start-up importing TensorFlow (3-4 s on a quiet
2-core machine, 10 s and more on a busy one; docs/reliability.md), so a model server that
crashed would serve again only that much later. The supervisor keeps one process that has
done the import and waits for its flags on stdin (``sagemaker_tfs.model_server.standby``).
When a model server starts (a restart after a crash, a multi-model load), the standby
becomes it: the supervisor writes the command line to it and it only loads the models. A
new standby starts once every model server is ready again, so that its import does not
compete for the CPU with a model that is loading.

Not used with the real ``tensorflow_model_server`` binary, which needs no import.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence

from sagemaker_tfs.supervisor.children import describe_exit, spawn_for

logger = logging.getLogger(__name__)

NAME = "standby model server"
FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 60.0
STOP_SECONDS = 5.0


class StandbyModelServer:
    """At most one waiting process; ``take`` hands it over, ``check`` replaces it.

    ``take`` runs in whichever thread starts a model server (the watch loop, a control API
    request) while holding the spawn lock; ``check`` runs in the watch loop. Lock order:
    the spawn lock, then ``self._lock``.
    """

    def __init__(
        self,
        env: dict[str, str],
        start_when: Callable[[], bool],
        nice: int = 0,
        command: Sequence[str] = (sys.executable, "-m", "sagemaker_tfs.model_server.standby"),
    ) -> None:
        self.env = env
        self.nice = nice
        self.command = list(command)
        self.start_when = start_when
        self.process: subprocess.Popen[bytes] | None = None
        self.restart_at = 0.0
        self.backoff = FIRST_BACKOFF_SECONDS
        self.stopped = False
        self._lock = threading.Lock()

    def take(self, argv: Sequence[str]) -> subprocess.Popen[bytes] | None:
        """The standby, now running the model server ``argv``; None when there is none."""
        with self._lock:
            process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return None
        try:
            assert process.stdin is not None
            process.stdin.write(json.dumps(list(argv)).encode() + b"\n")
            process.stdin.close()
        except OSError as error:  # it died just now
            logger.warning("%s (pid %d) could not take over: %s", NAME, process.pid, error)
            self._kill(process)
            return None
        self.backoff = FIRST_BACKOFF_SECONDS
        return process

    def check(self, now: float) -> None:
        """Notice a standby that exited on its own; start one when none waits."""
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
        self.restart_at = now + self.backoff
        logger.warning(
            "%s (pid %d) %s; a new one starts in %.0fs",
            NAME,
            process.pid,
            describe_exit(code),
            self.backoff,
        )
        self.backoff = min(self.backoff * 2, MAX_BACKOFF_SECONDS)

    def _start(self) -> None:
        process = spawn_for(self, self.command, self.env, stdin=subprocess.PIPE, nice=self.nice)
        logger.info("started %s (pid %d)", NAME, process.pid)

    def stop(self) -> None:
        """Stop the waiting process, if any; none starts after this."""
        self.stopped = True
        with self._lock:
            process, self.process = self.process, None
        if process is not None:
            logger.info("stopping %s (pid %d)", NAME, process.pid)
            self._kill(process)

    @staticmethod
    def _kill(process: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(STOP_SECONDS)
