"""The multi-model registry: which models are loaded, where, and what they took.

``ModelRegistry`` is the single source of truth for loaded models; the control API
(control_api.py) exposes it to nginx and the Python service. Where a model runs is the
business of its ``ModelServers``: the shared model servers (``shared_model_servers.py``,
the default: a fixed number of processes serve every model) or one process per model
(``per_model_servers.py``). The registry checks names, URLs and memory the same way for both.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sagemaker_tfs.model_discovery import MODEL_NAME_PATTERN, ModelSpec, model_spec, version_dirs
from sagemaker_tfs.ports import Instance
from sagemaker_tfs.stack_config import StackConfig
from sagemaker_tfs.supervisor.multi_model.memory import (
    ModelMemory,
    available_memory_bytes,
    files_bytes,
)
from sagemaker_tfs.wire.errors import HttpError

logger = logging.getLogger(__name__)

# A load is refused (507) when it would leave less memory than this, and a model that leaves
# less once loaded is unloaded again (507).
MEMORY_MARGIN_BYTES = 256 * 1024 * 1024
MAX_MODEL_NAME_CHARS = 128
MIB = 1024 * 1024


class ModelLoadError(Exception):
    """A model failed to load (the model server reports every version ended, or its process
    exited while it loaded)."""


class ModelServers(Protocol):
    """Where the registry's models run: shared model servers or one process per model."""

    # In how many processes a loaded model takes memory.
    copies: int
    # Told (name, reason) when a loaded model cannot be served again; the registry sets it.
    on_lost: Callable[[str, str], None]

    def place(self, name: str) -> tuple[Instance, ...]:
        """The model servers that will serve ``name``; HttpError 507 when there is no room."""

    def load(self, model: ModelSpec, instances: tuple[Instance, ...]) -> None:
        """Serve ``model`` there; returns once it is AVAILABLE, raises ModelLoadError."""

    def unload(self, name: str, instances: tuple[Instance, ...]) -> None:
        """Stop serving ``name`` (also after a failed or refused load)."""

    def rss_bytes(self, name: str) -> int:
        """The resident memory of the processes that serve (or will serve) ``name``."""

    def start(self) -> None:
        """At the stack's start: the model servers that serve before any load, started and
        ready (shared: each of them; one per model: none)."""

    def watched(self) -> list[BackEndServer]:
        """The model servers ``/ping`` counts on now."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class BackEndServer:
    """A model server of a back end as the health monitor watches it: its key (the
    supervisor's Child), its ports, the models it must hold AVAILABLE, and whether it is
    ready only once brought in line with the registry (shared, after a restart)."""

    key: str
    instance: Instance
    models: tuple[str, ...] = ()
    ready_once_in_line: bool = False


class ModelServerProcesses(Protocol):
    """What a back end asks of the model server launcher: start a supervised model server,
    wait for it at the stack's start, stop it, and its pid (None when not running). The
    launcher implements it; the back ends depend on this, not on the launcher."""

    def start_model_server(
        self,
        key: str,
        instance: Instance,
        config_file: Callable[[int], str],
        ready: Callable[[], bool],
    ) -> None:
        """``config_file(failed_starts)``: the model config of each start; ``ready``: its
        readiness check. HttpError 503 once the model servers stop."""

    def wait_until_ready(self, key: str) -> None:
        """Until model server ``key`` is ready; StartupError if it exits or takes longer than
        the wait time."""

    def stop_model_server(self, key: str) -> None: ...

    def model_server_pid(self, key: str) -> int | None: ...


@dataclass
class LoadedModel:
    name: str
    url: str
    base_path: str
    instances: tuple[Instance, ...]
    state: str
    estimate_bytes: int
    memory_bytes: int | None = None

    def describe(self) -> dict[str, Any]:
        """What ``GET /registry/NAME`` answers. ``grpc_port``/``rest_port``: the first model
        server; ``instances``: every model server that serves it, as [gRPC, REST] pairs."""
        first = self.instances[0]
        return {
            "model_name": self.name,
            "url": self.url,
            "base_path": self.base_path,
            "grpc_port": first.grpc_port,
            "rest_port": first.rest_port,
            "instances": [[i.grpc_port, i.rest_port] for i in self.instances],
            "state": self.state,
            "memory_bytes": self.memory_bytes,
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
    """Which models are loaded and where; loads and unloads them through ``servers``.

    The lock only guards the bookkeeping: loading happens outside it, so a load never blocks
    lookups, and (as far as the model servers allow) other loads and unloads.
    """

    def __init__(
        self,
        config: StackConfig,
        servers: ModelServers,
        memory_margin: int = MEMORY_MARGIN_BYTES,
        available_memory: Callable[[], int | None] = available_memory_bytes,
    ) -> None:
        self._config = config
        self._servers = servers
        servers.on_lost = self.lost
        self._models: dict[str, LoadedModel] = {}
        self._lock = threading.Lock()
        self._memory_margin = memory_margin
        self._available_memory = available_memory
        self._memory = ModelMemory()

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            return [m.describe() for m in self._models.values()]

    def get(self, name: str) -> dict[str, Any]:
        return self._get(name).describe()

    def serves(self, name: str) -> bool:
        """Whether a model of that name is loaded or loading."""
        with self._lock:
            return name in self._models

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
        spec = model_spec(name, base_path)
        files = files_bytes(base_path, spec.versions)
        model = self._reserve(name, str(url), base_path, files)
        try:
            before = self._servers.rss_bytes(name)
            self._servers.load(spec, model.instances)
            memory = max(0, self._servers.rss_bytes(name) - before)
        except ModelLoadError as error:
            self._forget(name)
            raise HttpError(500, f"Model {name} failed to load from {url}: {error}") from None
        except BaseException:
            self._forget(name)
            raise
        self._memory.learn(memory, files, self._servers.copies)
        self._refuse_if_memory_ran_low(name, memory)
        with self._lock:
            model.state = "AVAILABLE"
            model.memory_bytes = memory
        logger.info(
            "loaded model %s from %s (%.1f MB measured, %.1f MB of files)",
            name,
            base_path,
            memory / MIB,
            files / MIB,
        )
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

    def lost(self, name: str, reason: str) -> None:
        """The model servers could not serve ``name`` again (e.g. after a restart)."""
        with self._lock:
            model = self._models.get(name)
            if model is None or model.state != "AVAILABLE":
                return
            del self._models[name]
        logger.error("model %s is no longer loaded: %s", name, reason)

    def _reserve(self, name: str, url: str, base_path: str, files: int) -> LoadedModel:
        """Book the model as LOADING: 409 if it is there, 507 if it would not fit."""
        estimate = self._memory.estimate(files, self._servers.copies)
        with self._lock:
            if name in self._models:
                raise HttpError(409, f"Model {name} is already loaded")
            free = self._available_memory()
            if free is not None:
                loading = sum(
                    m.estimate_bytes for m in self._models.values() if m.state == "LOADING"
                )
                if free - loading - estimate < self._memory_margin:
                    raise HttpError(
                        507,
                        f"Not enough memory to load model {name}: it needs about "
                        f"{estimate // MIB} MB, {max(0, free - loading) // MIB} MB available",
                    )
            instances = self._servers.place(name)
            model = LoadedModel(name, url, base_path, instances, "LOADING", estimate)
            self._models[name] = model
            return model

    def _refuse_if_memory_ran_low(self, name: str, memory: int) -> None:
        """Unload a model that left the instance short of memory once loaded (507)."""
        free = self._available_memory()
        if free is None or free >= self._memory_margin:
            return
        self._forget(name)
        logger.warning("unloaded model %s again: %d MB left once it was loaded", name, free // MIB)
        raise HttpError(
            507,
            f"Not enough memory for model {name}: it took {memory // MIB} MB and left "
            f"{free // MIB} MB; it was unloaded again",
        )

    def _forget(self, name: str) -> None:
        with self._lock:
            model = self._models.get(name)
        if model is None:
            return
        try:
            self._servers.unload(name, model.instances)
        finally:
            with self._lock:
                self._models.pop(name, None)

    def close(self) -> None:
        self._servers.close()
