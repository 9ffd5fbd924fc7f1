"""The model server tier: the one way its processes are built (single model, shared and per
model alike), their config files, the standby (or zygote) it watches and stops, and what the
health monitor watches (a multi-model back end names its model servers itself)."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sagemaker_tfs.ports import Instance
from sagemaker_tfs.supervisor.model_servers import command_lines
from sagemaker_tfs.supervisor.model_servers.health import WatchedServer, status_target
from sagemaker_tfs.supervisor.model_servers.model_availability import (
    models_available_check,
    wait_until_available,
)
from sagemaker_tfs.supervisor.model_servers.model_server_zygote import (
    IMPORT_WAIT_SECONDS,
    ModelServerZygote,
)
from sagemaker_tfs.supervisor.model_servers.model_server_zygote import NAME as ZYGOTE
from sagemaker_tfs.supervisor.model_servers.standby_model_server import StandbyModelServer
from sagemaker_tfs.supervisor.multi_model.registry import (
    BackEndServer,
    ModelLoadError,
    ModelServers,
)
from sagemaker_tfs.supervisor.processes.children import Child, TierStopping
from sagemaker_tfs.supervisor.processes.spawning import adopts_orphans
from sagemaker_tfs.supervisor.processes.startup import StartupError, TierLauncher
from sagemaker_tfs.wire.errors import HttpError

logger = logging.getLogger(__name__)

TIER = "model servers"
MODEL_SERVER_STOP_SECONDS = 10.0


@dataclass(eq=False)
class ModelServerLauncher(TierLauncher):
    """Starts, stops and finds the model server processes; what both multi-model back ends
    are given at construction. ``serving()``: the stack serves (a standby may start)."""

    name = TIER
    serving: Callable[[], bool]

    def __post_init__(self) -> None:
        super().__post_init__()
        work_dir = Path(self.config.work.root)
        self.python_model_server = command_lines.is_python_model_server()
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
            # The zygote starts with the stack: the first model servers are forked from it.
            return ModelServerZygote(self.env, lambda: True, nice)
        return StandbyModelServer(self.env, self._settled, nice)

    def _zygote(self) -> ModelServerZygote | None:
        return self.standby if isinstance(self.standby, ModelServerZygote) else None

    def _wait_for_zygote(self) -> None:
        """Before a first start: the zygote started (if none runs) and its import waited
        for, so that the model server is forked too; it starts cold if the zygote cannot
        fork (it exited, e.g. code 3 for a thread left after its imports) or a stop came."""
        zygote = self._zygote()
        if zygote is None:
            return
        zygote.start_now()
        stopping = self.stop_requested.is_set
        if not zygote.wait_until_ready(IMPORT_WAIT_SECONDS, stopping) and not stopping():
            logger.warning("no %s to fork from: the model server starts cold", ZYGOTE)

    def check(self, now: float) -> None:
        """The model servers, then the standby (started once they are all ready) or the
        zygote (started at once, and its spare kept)."""
        super().check(now)
        if self.standby is not None:
            self.standby.check(now)

    def begin_stop(self) -> None:
        """The standby goes first: no model server starts warm from here on."""
        if self.standby is not None:
            self.standby.stop()

    def _settled(self) -> bool:
        """The stack serves and no model server is starting: a standby may start now."""
        return self.serving() and all(c.ready for c in self.children.members(TIER))

    def write_configs(self) -> None:
        """The monitoring and batching files, and single-model the models' config."""
        Path(command_lines.monitoring_config_path(self.config)).write_text(
            command_lines.render_monitoring_config(), encoding="utf-8"
        )
        if self.config.model_servers.batching is not None:
            text = command_lines.render_batching_config(self.config.model_servers.batching)
            Path(self.batching_file or "").write_text(text, encoding="utf-8")
            logger.info("batching config %s:\n%s", self.batching_file, text.rstrip())
        if not self.config.multi_model.enabled:
            text = command_lines.render_model_config(self.config.models)
            Path(self.model_config_file).write_text(text, encoding="utf-8")
            logger.info("model config %s:\n%s", self.model_config_file, text.rstrip())

    def _take_standby(
        self, restarting: Callable[[], bool]
    ) -> Callable[[Sequence[str]], subprocess.Popen[bytes] | None] | None:
        """The standby's ``take``; a zygote waits for its import on a restart."""
        standby = self.standby
        if standby is None:
            return None
        return lambda argv: standby.take(argv, wait=restarting())

    # --- what the back ends ask ---

    def start_model_server(
        self,
        key: str,
        instance: Instance,
        config_file: Callable[[int], str],
        ready: Callable[[], bool],
    ) -> None:
        """The one way a model server starts: ``config_file(failed_starts)`` is the model
        config of each start; the standby, when there is one, becomes the process."""

        def command(failed_starts: int) -> list[str]:
            return command_lines.model_server_command() + command_lines.model_server_args(
                instance, config_file(failed_starts), self.config, self.batching_file
            )

        def choose_command() -> None:
            child.argv = command(child.failed_starts)

        self._wait_for_zygote()
        child = Child(
            key,
            command(0),
            self.env,
            stop_timeout=MODEL_SERVER_STOP_SECONDS,
            ready_check=ready,
            before_start=choose_command,
            take_standby=self._take_standby(lambda: child.restarts > 0),
            nice=self.config.model_servers.nice,
        )
        try:
            self.children.start(TIER, child)
        except TierStopping:
            raise HttpError(503, "the stack is shutting down") from None

    def wait_until_ready(self, key: str) -> None:
        child = self._child(key)
        timeout = self.config.model_servers.wait_time_seconds
        assert child.ready_check is not None
        if not self.wait_while_starting(child, child.ready_check, timeout):
            why = "exited" if not child.running() else "timed out"
            raise StartupError(
                f"{key} {why} before it answered (SAGEMAKER_TFS_WAIT_TIME_SECONDS={timeout})"
            )
        child.mark_ready()

    def stop_model_server(self, key: str) -> None:
        self.children.stop_child(key)

    def model_server_pid(self, key: str) -> int | None:
        child = self.children.get(key)
        return child.pid if child is not None and child.running() else None

    # --- start-up ---

    def launch_single_model(self) -> None:
        """Every instance started, to serve every model (``wait_for_single_model`` waits);
        with the zygote, only the zygote (it imports while gunicorn starts): the model
        servers are forked from it in ``wait_for_single_model``."""
        zygote = self._zygote()
        if zygote is not None:
            zygote.start_now()
            return
        self._start_single_model_servers()

    def _start_single_model_servers(self) -> None:
        names = [m.name for m in self.config.models]
        for key, instance in self._single_model_instances():
            ready = models_available_check(key, instance, names)
            self.start_model_server(key, instance, lambda _: self.model_config_file, ready)

    def wait_for_single_model(self) -> None:
        """Returns once every instance serves every model (AVAILABLE)."""
        if self._zygote() is not None:
            self._start_single_model_servers()
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

    def _child(self, key: str) -> Child:
        child = self.children.get(key)
        assert child is not None
        return child

    # --- what the health monitor watches ---

    def watched(self, servers: ModelServers | None) -> list[WatchedServer]:
        """Single model (``servers`` None): every model server, each serving every model.
        Multi-model: those the back end names (see ``ModelServers.watched``); one that is
        ready only once in line with the registry is not ready while it is brought in line."""
        if servers is None:
            names = tuple(model.name for model in self.config.models)
            watched = [BackEndServer(k, i, names) for k, i in self._single_model_instances()]
        else:
            watched = servers.watched()
        return [self._watch(server) for server in watched]

    def _watch(self, server: BackEndServer) -> WatchedServer:
        child = self.children.get(server.key)
        in_line = server.ready_once_in_line and child is not None and not child.ready
        where = status_target(self.config, server.instance, self.python_model_server)
        pid = self.model_server_pid(server.key)
        not_ready = "is being brought in line" if in_line else None
        return WatchedServer(server.key, where, server.models, pid, not_ready)
