"""The model server tier: the one way its processes are built (single model, shared and per
model alike), their config files, the standby, and what the health monitor watches."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from sagemaker_tfs.ports import Instance
from sagemaker_tfs.supervisor.model_servers import model_server_configs as configs
from sagemaker_tfs.supervisor.model_servers.health import WatchedServer, status_target
from sagemaker_tfs.supervisor.model_servers.model_availability import (
    models_available_check,
    wait_until_available,
)
from sagemaker_tfs.supervisor.model_servers.model_server_zygote import (
    ModelServerZygote,
    adopts_orphans,
)
from sagemaker_tfs.supervisor.model_servers.per_model_servers import PerModelServers
from sagemaker_tfs.supervisor.model_servers.shared_model_servers import SharedModelServers
from sagemaker_tfs.supervisor.model_servers.standby_model_server import StandbyModelServer
from sagemaker_tfs.supervisor.multi_model.registry import (
    ModelLoadError,
    ModelRegistry,
    ModelServers,
)
from sagemaker_tfs.supervisor.processes.children import Child, TierStopping
from sagemaker_tfs.supervisor.processes.startup import StartupError, TierLauncher
from sagemaker_tfs.wire.errors import HttpError

logger = logging.getLogger(__name__)

TIER = "model servers"
MODEL_SERVER_STOP_SECONDS = 10.0


@dataclass(eq=False)
class ModelServerLauncher(TierLauncher):
    """Starts, stops and finds the model server processes; what both multi-model back ends
    are given at construction. ``serving()``: the stack serves (a standby may start)."""

    serving: Callable[[], bool]

    def __post_init__(self) -> None:
        work_dir = Path(self.config.work.root)
        self.python_model_server = configs.is_python_model_server()
        self.model_config_file = str(work_dir / "models.config")
        batching = self.config.model_servers.batching is not None
        self.batching_file = str(work_dir / "batching.config") if batching else None
        self.standby = self._standby()

    def _standby(self) -> StandbyModelServer | ModelServerZygote | None:
        """What starts a Python model server without its TensorFlow import: the zygote when
        forked model servers become the supervisor's children, else the standby."""
        if not (self.config.model_servers.standby and self.python_model_server):
            return None
        nice = self.config.model_servers.nice
        if self.config.model_servers.zygote and adopts_orphans():
            return ModelServerZygote(self.env, self._settled, nice)
        return StandbyModelServer(self.env, self._settled, nice)

    def _settled(self) -> bool:
        """The stack serves and no model server is starting: a standby may start now."""
        return self.serving() and all(c.ready for c in self.children.members(TIER))

    def write_configs(self) -> None:
        """The monitoring and batching files, and single-model the models' config."""
        Path(configs.monitoring_config_path(self.config)).write_text(
            configs.render_monitoring_config(), encoding="utf-8"
        )
        if self.config.model_servers.batching is not None:
            text = configs.render_batching_config(self.config.model_servers.batching)
            Path(self.batching_file or "").write_text(text, encoding="utf-8")
            logger.info("batching config %s:\n%s", self.batching_file, text.rstrip())
        if not self.config.multi_model.enabled:
            text = configs.render_model_config(self.config.models)
            Path(self.model_config_file).write_text(text, encoding="utf-8")
            logger.info("model config %s:\n%s", self.model_config_file, text.rstrip())

    def _start(
        self,
        key: str,
        instance: Instance,
        config_file: Callable[[int], str],
        ready_check: Callable[[], bool],
    ) -> None:
        """The one way a model server starts: ``config_file(failed_starts)`` is the model
        config of each start; the standby, when there is one, becomes the process."""

        def command(failed_starts: int) -> list[str]:
            return configs.model_server_command() + configs.model_server_args(
                instance, config_file(failed_starts), self.config, self.batching_file
            )

        def choose_command() -> None:
            child.argv = command(child.failed_starts)

        child = Child(
            key,
            command(0),
            self.env,
            stop_timeout=MODEL_SERVER_STOP_SECONDS,
            ready_check=ready_check,
            before_start=choose_command,
            take_standby=self._take_standby(lambda: child.restarts > 0),
            nice=self.config.model_servers.nice,
        )
        self.children.start(TIER, child)

    def _take_standby(
        self, restarting: Callable[[], bool]
    ) -> Callable[[Sequence[str]], subprocess.Popen[bytes] | None] | None:
        """The standby's ``take``; the zygote's waits for its import on a restart."""
        standby = self.standby
        if isinstance(standby, ModelServerZygote):
            return lambda argv: standby.take(argv, wait=restarting())
        return standby.take if standby is not None else None

    # --- what the back ends ask ---

    def start_model_server(
        self, key: str, instance: Instance, model_config_file: str, model_names: Sequence[str]
    ) -> None:
        ready = models_available_check(key, instance, model_names)
        try:
            self._start(key, instance, lambda _failed_starts: model_config_file, ready)
        except TierStopping:
            raise HttpError(503, "the stack is shutting down") from None

    def stop_model_server(self, key: str) -> None:
        self.children.stop_child(key)

    def model_server_pid(self, key: str) -> int | None:
        child = self.children.get(key)
        return child.pid if child is not None and child.running() else None

    # --- start-up ---

    def launch_single_model(self) -> None:
        """Every instance started, to serve every model (``wait_for_single_model`` waits)."""
        names = [m.name for m in self.config.models]
        for key, instance in self._single_model_instances():
            self.start_model_server(key, instance, self.model_config_file, names)

    def wait_for_single_model(self) -> None:
        """Returns once every instance serves every model (AVAILABLE)."""
        names = [m.name for m in self.config.models]
        for key, instance in self._single_model_instances():
            self._wait_for_models(key, instance, names)

    def _single_model_instances(self) -> list[tuple[str, Instance]]:
        keys = [f"model-server[{index}]" for index in range(len(self.config.instances))]
        return list(zip(keys, self.config.instances, strict=True))

    def _wait_for_models(self, key: str, instance: Instance, names: Sequence[str]) -> None:
        child = self._child(key)
        timeout = self.config.model_servers.wait_time_seconds
        try:
            ready = wait_until_available(instance.rest_port, names, timeout, self.starting(child))
        except ModelLoadError as error:
            raise StartupError(f"{key}: {error}") from None
        self.raise_if_stop_requested()
        if not ready:
            why = "exited" if not child.running() else "timed out"
            raise StartupError(
                f"{key} {why} before models {', '.join(names)} became AVAILABLE "
                f"(SAGEMAKER_TFS_WAIT_TIME_SECONDS={timeout})"
            )
        child.mark_ready()
        logger.info("%s: models %s AVAILABLE", key, ", ".join(names))

    def start_shared(self, shared: SharedModelServers) -> None:
        """The shared model servers: each starts with the models loaded so far (after a
        failed start: with none) and is ready once it serves what the registry holds."""
        for server in shared.servers:
            ready = partial(shared.ready, server.key)
            self._start(server.key, server.instance, shared.start_config_file, ready)
        for server in shared.servers:
            self._wait_until_in_line(shared, server.key)

    def _wait_until_in_line(self, shared: SharedModelServers, key: str) -> None:
        child = self._child(key)
        timeout = self.config.model_servers.wait_time_seconds
        if not self.wait_while_starting(child, partial(shared.ready, key), timeout):
            why = "exited" if not child.running() else "timed out"
            raise StartupError(
                f"{key} {why} before it answered (SAGEMAKER_TFS_WAIT_TIME_SECONDS={timeout})"
            )
        child.mark_ready()
        logger.info("%s: serving multi-model (shared by every model)", key)

    def _child(self, key: str) -> Child:
        child = self.children.get(key)
        assert child is not None
        return child

    # --- what the health monitor watches ---

    def watched(
        self, servers: ModelServers | None, registry: ModelRegistry | None
    ) -> list[WatchedServer]:
        """Single model: every model server, each serving every model. Multi-model shared:
        every model server, answering and in line with the registry. One per model: the
        model server of each model the registry holds as loaded (not those loading or
        unloading), serving its model."""
        shared = isinstance(servers, SharedModelServers)

        def watch(key: str, instance: Instance, models: tuple[str, ...]) -> WatchedServer:
            child, pid = self.children.get(key), self.model_server_pid(key)
            not_ready = "is being brought in line" if shared and child and not child.ready else None
            where = status_target(self.config, instance, self.python_model_server)
            return WatchedServer(key, where, models, pid, not_ready)

        if not self.config.multi_model.enabled:
            names = tuple(model.name for model in self.config.models)
            return [
                watch(f"model-server[{index}]", instance, names)
                for index, instance in enumerate(self.config.instances)
            ]
        if isinstance(servers, SharedModelServers):
            return [watch(s.key, s.instance, ()) for s in servers.servers]
        loaded = registry.list() if registry is not None else []
        key = PerModelServers.key
        return [
            watch(key(m["model_name"]), Instance(*m["instances"][0]), (m["model_name"],))
            for m in loaded
            if m["state"] == "AVAILABLE"
        ]
