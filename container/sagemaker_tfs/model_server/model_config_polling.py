"""``--model_config_file_poll_wait_seconds``: the model config file, re-read and applied.

As in TF Serving: a thread reads and applies the file right after start-up and then every
period (measured from the start of each run); every run applies the file, changed or not
(models added are loaded and waited for, models removed unloaded, version policies and
labels replaced). A file that cannot be read or parsed leaves the config in force
(``Failed to read ModelServerConfig file: ...``); a config the manager refuses too
(``PollFilesystemAndReloadConfig failed to ReloadConfig: ...``). The server goes on either way.
"""

from __future__ import annotations

import logging
import threading
import time

from sagemaker_tfs.model_server import model_server_config
from sagemaker_tfs.model_server.errors import ServingError
from sagemaker_tfs.model_server.serving.manager import ModelManager

logger = logging.getLogger(__name__)


class ConfigFilePoller:
    """Applies ``path`` to ``manager`` every ``period_seconds`` until ``stop`` is set."""

    def __init__(
        self, manager: ModelManager, path: str, period_seconds: float, stop: threading.Event
    ) -> None:
        self._manager = manager
        self._path = path
        self._period = period_seconds
        self._stop = stop
        self._thread = threading.Thread(target=self._loop, name="config-poll", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.poll_once()
            if self._stop.wait(max(0.0, self._period - (time.monotonic() - started))):
                return

    def poll_once(self) -> None:
        try:
            config = model_server_config.load_file(self._path)
        except ServingError as error:
            logger.error("Failed to read ModelServerConfig file: %s", error.message)
            return
        try:
            self._manager.reload_config(config)
        except ServingError as error:
            logger.error("PollFilesystemAndReloadConfig failed to ReloadConfig: %s", error.message)
