"""Multi-model with shared model servers: a fixed number of processes serve every model.

The default multi-model mode. ``SAGEMAKER_TFS_INSTANCE_COUNT`` model servers (one by default)
start with the stack on their fixed ports; a load or an unload changes what they serve with
``HandleReloadConfigRequest`` (``model_service_client.py``), which the real
``tensorflow_model_server`` and ours both implement: the whole new config goes over, the model
server loads what is new and unloads what is gone. A model costs its graph and variables
instead of a process, and a load is a reload instead of a process start.

Two sets of models are kept: ``wanted`` (loaded and loading: what every reload sends) and
``served`` (AVAILABLE in every model server: what ``WORK_DIR/models.config`` lists, so a model
server that restarts loads them as it starts). Reloads to one model server are sent one at a
time, each with the newest ``wanted`` set, so two loads can never undo each other.

A model server that exits (a crash, a kill, a model that brought it down) is restarted by its
``Child`` and loads ``served`` from the file; it is ready once a reload with ``wanted`` went
through and every served model is AVAILABLE in it again (``ready``, run by the watch loop,
starts that in a thread). A model that cannot be served again is dropped from the registry
(``on_lost``) with one log line; a load that was in flight when its model server died fails
with 500, so a model that crashes the model server as it loads does not come back with it.
If a model server cannot even start from the file (the real binary stops at start-up when a
model in its config fails), the next start uses an empty config and the reload loads the rest.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from sagemaker_tfs.model_discovery import ModelSpec
from sagemaker_tfs.ports import Instance
from sagemaker_tfs.stack_config import StackConfig
from sagemaker_tfs.supervisor.model_servers.command_lines import (
    grpc_target,
    render_model_config,
)
from sagemaker_tfs.supervisor.model_servers.model_service_client import (
    ModelServiceClient,
    ModelServiceError,
)
from sagemaker_tfs.supervisor.multi_model.registry import BackEndServer, ModelLoadError
from sagemaker_tfs.supervisor.processes.atomic_files import write_atomically
from sagemaker_tfs.supervisor.processes.process_memory import process_rss_bytes

if TYPE_CHECKING:
    from sagemaker_tfs.supervisor.multi_model.registry import ModelServerProcesses

logger = logging.getLogger(__name__)

# After a failed attempt to bring a restarted model server back in line, the next one waits.
SYNC_RETRY_SECONDS = 1.0


class SharedModelServer:
    """One shared model server: its key (the supervisor's Child), ports, and ModelService."""

    def __init__(self, key: str, instance: Instance, client: ModelServiceClient) -> None:
        self.key = key
        self.instance = instance
        self.client = client
        # Reloads to this model server go one at a time (see the module docstring).
        self.reload_lock = threading.Lock()
        # The process that is known to serve ``wanted``; another pid must be synced first.
        self.synced_pid: int | None = None
        self.sync_thread: threading.Thread | None = None
        self.next_sync_at = 0.0
        # The generation of ``wanted`` that the last reload sent.
        self.sent_generation = -1


class SharedModelServers:
    """The registry's model servers in shared mode (see ``registry.ModelServers``)."""

    def __init__(
        self,
        config: StackConfig,
        launcher: ModelServerProcesses,
        client_factory: Callable[[str], ModelServiceClient] = ModelServiceClient,
    ) -> None:
        self._config = config
        self._launcher = launcher
        self._pid_of = launcher.model_server_pid
        self.servers = [
            SharedModelServer(
                f"model-server[{index}]", instance, client_factory(grpc_target(config, instance))
            )
            for index, instance in enumerate(config.instances)
        ]
        self._by_key = {server.key: server for server in self.servers}
        self.copies = len(self.servers)
        self._wanted: dict[str, ModelSpec] = {}
        self._served: dict[str, ModelSpec] = {}
        self._generation = 0  # of ``wanted``: one more at each change
        self._lock = threading.Lock()  # the two sets and the file
        self._sync_lock = threading.Lock()  # starting sync threads
        self.on_lost: Callable[[str, str], None] = lambda name, reason: None
        work_dir = Path(config.work.root)
        self.config_file = str(work_dir / "models.config")
        self.empty_config_file = str(work_dir / "no-models.config")
        write_atomically(self.config_file, render_model_config([]))
        write_atomically(self.empty_config_file, render_model_config([]))
        self._pool = (
            concurrent.futures.ThreadPoolExecutor(len(self.servers), "reload")
            if len(self.servers) > 1
            else None
        )

    # --- what the supervisor asks ---

    def start(self) -> None:
        """Every model server, each starting with the models loaded so far (after a failed
        start: with none) and ready once it serves what the registry holds."""
        for server in self.servers:
            ready = partial(self.ready, server.key)
            self._launcher.start_model_server(
                server.key, server.instance, self.start_config_file, ready
            )
        for server in self.servers:
            self._launcher.wait_until_ready(server.key)
            logger.info("%s: serving multi-model (shared by every model)", server.key)

    def watched(self) -> list[BackEndServer]:
        """Every model server, answering and (once restarted) brought in line."""
        return [BackEndServer(s.key, s.instance, ready_once_in_line=True) for s in self.servers]

    def start_config_file(self, failed_starts: int) -> str:
        """The config a model server starts with: the served models, or none after a start
        that failed (the reload that makes it ready loads them then, failures aside)."""
        return self.config_file if failed_starts == 0 else self.empty_config_file

    def ready(self, key: str) -> bool:
        """The readiness check of model server ``key``: its current process serves the
        wanted models. For a new process this starts bringing it in line, in a thread."""
        server = self._by_key[key]
        pid = self._pid_of(key)
        if pid is None:
            return False
        if server.synced_pid == pid:
            return True
        with self._sync_lock:
            running = server.sync_thread is not None and server.sync_thread.is_alive()
            if not running and time.monotonic() >= server.next_sync_at:
                server.sync_thread = threading.Thread(
                    target=self._sync, args=(server, pid), name=f"sync {key}", daemon=True
                )
                server.sync_thread.start()
        return False

    # --- the ModelServers protocol ---

    def place(self, name: str) -> tuple[Instance, ...]:
        return tuple(server.instance for server in self.servers)

    def load(self, model: ModelSpec, instances: tuple[Instance, ...]) -> None:
        with self._lock:
            self._wanted[model.name] = model
            self._generation += 1
        try:
            self._on_each(lambda server: self._load_into(server, model.name))
        except BaseException:
            with self._lock:
                self._wanted.pop(model.name, None)
                self._generation += 1
            self._on_each(self._reload_quietly)
            raise
        with self._lock:
            self._served[model.name] = model
            self._write_config_file()

    def unload(self, name: str, instances: tuple[Instance, ...]) -> None:
        """Stop serving ``name`` (nothing to do after a failed load: it is gone already)."""
        with self._lock:
            if self._wanted.pop(name, None) is None:
                return
            self._generation += 1
            if self._served.pop(name, None) is not None:
                self._write_config_file()
        self._on_each(self._reload_quietly)

    def rss_bytes(self, name: str) -> int:
        return sum(process_rss_bytes(self._pid_of(server.key)) for server in self.servers)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        for server in self.servers:
            server.client.close()

    # --- reloads ---

    def _reload(self, server: SharedModelServer) -> str | None:
        """Send the newest ``wanted`` set; the model server's error message, if any."""
        with server.reload_lock:
            with self._lock:
                models = list(self._wanted.values())
                server.sent_generation = self._generation
            return server.client.reload(models, self._config.model_servers.wait_time_seconds)

    def _reload_quietly(self, server: SharedModelServer) -> None:
        """A reload after an unload or a failed load. A model server that is restarting is
        left alone: the reload that makes it ready sends the newest set anyway."""
        if server.synced_pid is None or server.synced_pid != self._pid_of(server.key):
            return
        try:
            self._reload(server)
        except ModelServiceError as error:
            logger.warning("%s: reload failed, sent again once it is back: %s", server.key, error)

    def _load_into(self, server: SharedModelServer, name: str) -> None:
        try:
            message = self._reload(server)
            state = server.client.state(name)
        except ModelServiceError as error:
            if error.code is not None and error.code.name == "DEADLINE_EXCEEDED":
                limit = self._config.model_servers.wait_time_seconds
                why = f"it did not load within SAGEMAKER_TFS_WAIT_TIME_SECONDS={limit}"
            else:
                why = f"{server.key} exited while it loaded ({error})"
            raise ModelLoadError(why) from None
        if not state.available:
            raise ModelLoadError(state.error or message or "it did not become AVAILABLE")

    def _on_each(self, action: Callable[[SharedModelServer], None]) -> None:
        """``action`` on every model server (at the same time when there are several)."""
        if self._pool is None:
            for server in self.servers:
                action(server)
            return
        for future in [self._pool.submit(action, server) for server in self.servers]:
            future.result()

    def _write_config_file(self) -> None:
        """``served`` to the file a restarting model server reads (called under the lock)."""
        write_atomically(self.config_file, render_model_config(list(self._served.values())))

    # --- bringing a restarted model server in line ---

    def _sync(self, server: SharedModelServer, pid: int) -> None:
        started = time.monotonic()
        try:
            self._reload(server)
            with self._lock:
                served = list(self._served)
            lost = {}
            for name in served:
                state = server.client.state(name)
                if not state.available:
                    lost[name] = state.error or "it did not become AVAILABLE"
        except ModelServiceError as error:
            if self._pid_of(server.key) == pid:
                logger.warning("%s (pid %d) is not serving yet: %s", server.key, pid, error)
            server.next_sync_at = time.monotonic() + SYNC_RETRY_SECONDS
            return
        if lost:
            self._drop(lost)
        if self._pid_of(server.key) != pid:
            return  # it died meanwhile: its successor is synced next
        server.synced_pid = pid
        if server.sent_generation != self._generation:  # a load or unload came meanwhile
            self._reload_quietly(server)
        logger.info(
            "%s (pid %d) serves the %d loaded model(s) (in line after %.2fs)",
            server.key,
            pid,
            len(served) - len(lost),
            time.monotonic() - started,
        )

    def _drop(self, lost: dict[str, str]) -> None:
        """Models that a restarted model server could not serve again leave the registry."""
        with self._lock:
            for name in lost:
                self._wanted.pop(name, None)
                self._served.pop(name, None)
            self._generation += 1
            self._write_config_file()
        for name, reason in lost.items():
            self.on_lost(name, reason)
        self._on_each(self._reload_quietly)
