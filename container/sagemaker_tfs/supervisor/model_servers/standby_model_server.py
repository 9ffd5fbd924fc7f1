"""The standby model server: a Python model server with TensorFlow imported, waiting.

The supervisor keeps one process that has done the import (``warm_process``) and waits for
its flags on stdin (``sagemaker_tfs.model_server.standby``). When a model server starts (a
restart after a crash, a multi-model load), the standby becomes it: the supervisor writes the
command line to it and it only loads the models. A new standby starts once every model server
is ready again, so that its import does not compete for the CPU with a model that is loading.

Not used with the real ``tensorflow_model_server`` binary, which needs no import.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Sequence

from sagemaker_tfs.supervisor.model_servers.warm_process import (
    FIRST_BACKOFF_SECONDS,
    WarmProcess,
    kill_group,
)
from sagemaker_tfs.supervisor.processes.children import spawn_for

logger = logging.getLogger(__name__)

NAME = "standby model server"


class StandbyModelServer(WarmProcess):
    """At most one waiting process; ``take`` hands it over, ``check`` replaces it.

    ``take`` runs in whichever thread starts a model server (the watch loop, a control API
    request) while holding the spawn lock; ``check`` runs in the watch loop.
    """

    NAME = NAME
    COMMAND = (sys.executable, "-m", "sagemaker_tfs.model_server.standby")

    def take(self, argv: Sequence[str], wait: bool = False) -> subprocess.Popen[bytes] | None:
        """The standby, now running the model server ``argv``; None when there is none
        (``wait``: the zygote's, a standby never waits for its import)."""
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
            kill_group(process)
            return None
        self.backoff = FIRST_BACKOFF_SECONDS
        return process

    def _start(self) -> None:
        process = spawn_for(self, self.command, self.env, stdin=subprocess.PIPE, nice=self.nice)
        logger.info("started %s (pid %d)", NAME, process.pid)
