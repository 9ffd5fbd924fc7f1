"""The multi-model registry: which models are loaded, on which ports, in which process.

Multi-model endpoints run one model server process per loaded model, so that unloading a
model really gives its memory back (the process ends). ``ModelRegistry`` is the single
source of truth for that; the control API (control_api.py) exposes it to the Python service.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sagemaker_tfs.config import (
    MODEL_NAME_PATTERN,
    Instance,
    PortRange,
    StackConfig,
    model_spec,
    version_dirs,
)
from sagemaker_tfs.supervisor.model_server_processes import (
    ModelLoadError,
    render_model_config,
    wait_until_available,
)
from sagemaker_tfs.supervisor.sockets import port_is_free
from sagemaker_tfs.wire.errors import HttpError

logger = logging.getLogger(__name__)

DEFAULT_MULTI_MODEL_PORTS = PortRange(9000, 9999)
MEMORY_MARGIN_BYTES = 256 * 1024 * 1024
MAX_MODEL_NAME_CHARS = 128


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


def available_memory_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """``MemAvailable`` from /proc/meminfo, or None where it cannot be read."""
    try:
        with open(meminfo, encoding="ascii") as stream:
            for line in stream:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class Launcher(Protocol):
    """What the registry needs from the supervisor to run per-model processes."""

    def start_model_server(
        self, key: str, instance: Instance, model_config_file: str, model_names: Sequence[str]
    ) -> None: ...

    def stop_model_server(self, key: str) -> None: ...

    def model_server_running(self, key: str) -> bool: ...


@dataclass
class LoadedModel:
    name: str
    url: str
    base_path: str
    instance: Instance
    state: str

    def describe(self) -> dict[str, Any]:
        return {
            "model_name": self.name,
            "url": self.url,
            "base_path": self.base_path,
            "grpc_port": self.instance.grpc_port,
            "rest_port": self.instance.rest_port,
            "state": self.state,
        }

    def public(self) -> dict[str, str]:
        """SageMaker's documented multi-model shape (``ListModels`` / ``DescribeModel``)."""
        return {"modelName": self.name, "modelUrl": self.url}


def validate_model_name(name: object) -> str:
    if (
        not isinstance(name, str)
        or len(name) > MAX_MODEL_NAME_CHARS
        or not MODEL_NAME_PATTERN.fullmatch(name)
    ):
        raise HttpError(
            400,
            "model_name must be 1-128 characters of letters, digits, '_', '-' or '.', "
            f"starting with a letter or digit, got {name!r}",
        )
    return name


def resolve_model_url(url: object, models_root: str, name: str) -> str:
    """The model's base path: ``url`` resolved, refused if it leaves the models root."""
    if not isinstance(url, str) or not url or "\x00" in url or len(url) > 4096:
        raise HttpError(400, f"url must be a non-empty path, got {url!r}")
    root = os.path.realpath(models_root)
    resolved = os.path.realpath(os.path.join(root, url))
    if os.path.commonpath([root, resolved]) != root or resolved == root:
        raise HttpError(403, f"url {url} is outside the models directory {models_root}")
    if not version_dirs(resolved):
        raise HttpError(404, f"Could not find valid base path {url} for servable {name}")
    return resolved


class ModelRegistry:
    """Which models are loaded, on which ports; loads and unloads per-model processes.

    The lock only guards the bookkeeping: waiting for a model to become AVAILABLE happens
    outside it, so loading one model never blocks other loads, lookups or unloads.
    """

    def __init__(
        self,
        config: StackConfig,
        launcher: Launcher,
        memory_margin: int = MEMORY_MARGIN_BYTES,
        available_memory: Callable[[], int | None] = available_memory_bytes,
    ) -> None:
        self._config = config
        self._launcher = launcher
        self._ports = PortPool(config.safe_port_range or DEFAULT_MULTI_MODEL_PORTS, [config.port])
        self._models: dict[str, LoadedModel] = {}
        self._lock = threading.Lock()
        self._memory_margin = memory_margin
        self._available_memory = available_memory
        self._config_dir = Path(config.work_dir) / "models"

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            return [m.describe() for m in self._models.values()]

    def get(self, name: str) -> dict[str, Any]:
        return self._get(name).describe()

    def describe_public(self, name: str) -> dict[str, str]:
        return self._get(name).public()

    def _get(self, name: str) -> LoadedModel:
        with self._lock:
            model = self._models.get(name)
            if model is None:
                raise HttpError(404, f"Model {name} is not loaded yet")
            return model

    def list_page(self, token: str | None, limit: int) -> dict[str, Any]:
        """One page of SageMaker's ``ListModels``, by name: ``{"models": [{"modelName",
        "modelUrl"}], "nextPageToken"}``. The token is the last name of the previous page,
        so loads and unloads between calls neither repeat nor skip the models that stay."""
        with self._lock:
            names = sorted(name for name in self._models if token is None or name > token)
            page = [self._models[name].public() for name in names[:limit]]
        next_token = page[-1]["modelName"] if len(names) > limit else None
        return {"models": page, "nextPageToken": next_token}

    def load(self, name: object, url: object) -> dict[str, Any]:
        name = validate_model_name(name)
        base_path = resolve_model_url(url, self._config.model_dir, name)
        model = self._reserve(name, str(url), base_path)
        try:
            config_file = self._write_model_config(model)
            self._launcher.start_model_server(self._key(name), model.instance, config_file, [name])
            available = wait_until_available(
                model.instance.rest_port,
                [name],
                self._config.wait_time_seconds,
                lambda: self._launcher.model_server_running(self._key(name)),
            )
        except ModelLoadError as error:
            self._forget(name)
            raise HttpError(500, f"Model {name} failed to load from {url}: {error}") from None
        except BaseException:
            self._forget(name)
            raise
        if not available:
            self._forget(name)
            raise HttpError(500, f"Model {name} failed to load from {url}")
        with self._lock:
            model.state = "AVAILABLE"
        logger.info("loaded model %s from %s on ports %s", name, base_path, model.instance)
        return dict(model.describe(), message=f"Successfully loaded model {name}")

    def unload(self, name: str) -> dict[str, Any]:
        with self._lock:
            model = self._models.get(name)
            if model is None or model.state != "AVAILABLE":
                raise HttpError(404, f"Model {name} is not loaded yet")
            model.state = "UNLOADING"
        self._forget(name)
        logger.info("unloaded model %s", name)
        return {"model_name": name, "message": f"Successfully unloaded model {name}"}

    def _reserve(self, name: str, url: str, base_path: str) -> LoadedModel:
        with self._lock:
            if name in self._models:
                raise HttpError(409, f"Model {name} is already loaded")
            free = self._available_memory()
            if free is not None and free < self._memory_margin:
                raise HttpError(
                    507, f"Not enough memory to load model {name}: {free} bytes available"
                )
            instance = self._ports.take_pair()
            if instance is None:
                raise HttpError(507, f"No free ports left to load model {name}")
            model = LoadedModel(name, url, base_path, instance, "LOADING")
            self._models[name] = model
            return model

    def _forget(self, name: str) -> None:
        """Stop the model's process, free its ports and drop it from the registry."""
        self._launcher.stop_model_server(self._key(name))
        with self._lock:
            model = self._models.pop(name, None)
        if model is not None:
            self._ports.release(model.instance)
            (self._config_dir / f"{name}.config").unlink(missing_ok=True)

    def _write_model_config(self, model: LoadedModel) -> str:
        self._config_dir.mkdir(parents=True, exist_ok=True)
        path = self._config_dir / f"{model.name}.config"
        path.write_text(render_model_config([model_spec(model.name, model.base_path)]))
        return str(path)

    @staticmethod
    def _key(name: str) -> str:
        return f"model-server[{name}]"
