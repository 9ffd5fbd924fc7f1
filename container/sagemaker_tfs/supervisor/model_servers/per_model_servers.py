"""Multi-model with one model server process per loaded model (the isolated mode).

``SAGEMAKER_TFS_MODEL_SERVER_PER_MODEL=true``: each model gets its own process on two ports
from the safe range. A model that crashes its process takes no other model with it, and
unloading ends the process, so every byte comes back. The price: a whole process per model
(with the Python model server, a TensorFlow import, hundreds of MB), a process start per
load, and at most half the port range.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sagemaker_tfs.model_discovery import ModelSpec
from sagemaker_tfs.ports import Instance, PortRange, port_is_free
from sagemaker_tfs.stack_config import StackConfig
from sagemaker_tfs.supervisor.model_servers.command_lines import render_model_config
from sagemaker_tfs.supervisor.model_servers.model_availability import (
    models_available_check,
    wait_until_available,
)
from sagemaker_tfs.supervisor.multi_model.registry import BackEndServer, ModelLoadError
from sagemaker_tfs.supervisor.processes.process_memory import process_rss_bytes
from sagemaker_tfs.wire.errors import HttpError

if TYPE_CHECKING:
    from sagemaker_tfs.supervisor.multi_model.registry import ModelServerProcesses

DEFAULT_MULTI_MODEL_PORTS = PortRange(9000, 9999)


class PortPool:
    """Hands out pairs of free ports from the safe range; thread-safe."""

    def __init__(self, port_range: PortRange, reserved: Sequence[int] = ()) -> None:
        self._range = port_range
        self._in_use: set[int] = set(reserved)
        self._lock = threading.Lock()

    def take_pair(self) -> Instance | None:
        """Two free ports (gRPC, REST), or None when the range is exhausted."""
        with self._lock:
            found: list[int] = []
            for port in self._range.ports():
                if port not in self._in_use and port_is_free(port):
                    found.append(port)
                    if len(found) == 2:
                        self._in_use.update(found)
                        return Instance(found[0], found[1])
            return None

    def release(self, instance: Instance) -> None:
        with self._lock:
            self._in_use.discard(instance.grpc_port)
            self._in_use.discard(instance.rest_port)


class PerModelServers:
    """The registry's model servers in process-per-model mode (see ``registry.ModelServers``)."""

    copies = 1

    def __init__(self, config: StackConfig, launcher: ModelServerProcesses) -> None:
        self._config = config
        self._launcher = launcher
        self._ports = PortPool(config.safe_port_range or DEFAULT_MULTI_MODEL_PORTS, [config.port])
        self._config_dir = Path(config.work.root) / "models"
        # Never called: a restarted process loads its one model from its own file again.
        self.on_lost: Callable[[str, str], None] = lambda name, reason: None
        # The models that are AVAILABLE (their load returned) and not being unloaded.
        self._serving: dict[str, Instance] = {}
        self._serving_lock = threading.Lock()

    def place(self, name: str) -> tuple[Instance, ...]:
        instance = self._ports.take_pair()
        if instance is None:
            raise HttpError(507, f"No free ports left to load model {name}")
        return (instance,)

    def load(self, model: ModelSpec, instances: tuple[Instance, ...]) -> None:
        (instance,) = instances
        key = self.key(model.name)
        self._config_dir.mkdir(parents=True, exist_ok=True)
        config_file = self._config_dir / f"{model.name}.config"
        config_file.write_text(render_model_config([model]))
        ready = models_available_check(key, instance, [model.name])
        self._launcher.start_model_server(key, instance, lambda _: str(config_file), ready)
        available = wait_until_available(
            instance.rest_port,
            [model.name],
            self._config.model_servers.wait_time_seconds,
            lambda: self._launcher.model_server_pid(key) is not None,
        )
        if not available:
            raise ModelLoadError(
                f"its model server exited or did not make it AVAILABLE within "
                f"{self._config.model_servers.wait_time_seconds}s"
            )
        with self._serving_lock:
            self._serving[model.name] = instance

    def unload(self, name: str, instances: tuple[Instance, ...]) -> None:
        """Stop the model's process and give its ports back."""
        with self._serving_lock:
            self._serving.pop(name, None)
        self._launcher.stop_model_server(self.key(name))
        for instance in instances:
            self._ports.release(instance)
        (self._config_dir / f"{name}.config").unlink(missing_ok=True)

    def rss_bytes(self, name: str) -> int:
        return process_rss_bytes(self._launcher.model_server_pid(self.key(name)))

    def start(self) -> None:
        """Nothing starts with the stack: a model's process starts when it is loaded."""

    def watched(self) -> list[BackEndServer]:
        """The process of each model that is AVAILABLE (not loading, not unloading)."""
        with self._serving_lock:
            serving = list(self._serving.items())
        return [BackEndServer(self.key(name), instance, (name,)) for name, instance in serving]

    def close(self) -> None:
        """Nothing to close: the processes stop with the model server tier."""

    @staticmethod
    def key(name: str) -> str:
        """The supervisor's name for the model server of model ``name`` (its Child)."""
        return f"model-server[{name}]"
