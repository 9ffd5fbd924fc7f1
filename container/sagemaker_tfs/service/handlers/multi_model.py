"""Multi-model endpoints: which models are loaded (asked of the supervisor) and their code.

The supervisor owns the registry and its control API on a unix socket; nginx proxies the
``/models`` CRUD calls straight to it, so loading a model never holds a gunicorn worker.
This module serves ``/models/NAME/invoke`` (and ``/invocations`` with
``X-Amzn-SageMaker-Target-Model``): it looks models up with a short per-worker cache, which
is safe with several workers because the state lives in the supervisor only.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import os
import socket
import threading
import time
from dataclasses import dataclass

from sagemaker_tfs.service.handlers.code_namespaces import CodeNamespace
from sagemaker_tfs.service.handlers.user_code import UserCode, load_script_in, script_path
from sagemaker_tfs.service.routing.connections import Channels
from sagemaker_tfs.service.routing.model_servers import Candidates, ModelServer
from sagemaker_tfs.wire.errors import HttpError

logger = logging.getLogger(__name__)

LOOKUP_TTL_SECONDS = 1.0
CONTROL_TIMEOUT_SECONDS = 10.0
UNIVERSAL_CODE_DIR = "/opt/ml/code"
AVAILABLE = "AVAILABLE"  # the registry's state of a model that serves


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over the supervisor's unix socket (works under gevent's patched socket)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


@dataclass(frozen=True)
class ModelLocation:
    """Where a loaded model is: its files (for its ``code/``) and its model server's ports.

    Read from the registry's description of the model (``GET /registry/NAME`` on the control
    API, written by ``supervisor.registry.LoadedModel.describe``).
    """

    name: str
    base_path: str
    grpc_port: int
    rest_port: int

    @classmethod
    def from_description(cls, description: dict) -> ModelLocation:
        return cls(
            name=str(description["model_name"]),
            base_path=str(description["base_path"]),
            grpc_port=int(description["grpc_port"]),
            rest_port=int(description["rest_port"]),
        )


class ControlClient:
    """The supervisor's control API (``GET /registry``: the stack's own view of the models,
    with their ports; ``GET /models`` answers SageMaker's shape)."""

    def __init__(self, socket_path: str) -> None:
        self._socket_path = socket_path

    def loaded(self) -> list[dict]:
        """The descriptions of the models in the registry."""
        return self._get("/registry")["models"]

    def describe(self, name: str) -> dict | None:
        """One model's description, or None when it is not loaded."""
        return self._get(f"/registry/{name}", missing_ok=True)

    def _get(self, path: str, missing_ok: bool = False) -> dict:
        connection = UnixHTTPConnection(self._socket_path, CONTROL_TIMEOUT_SECONDS)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
        except OSError as error:
            raise HttpError(503, f"The model registry is not available: {error}") from None
        finally:
            connection.close()
        if response.status == 404 and missing_ok:
            return None  # type: ignore[return-value]
        if response.status != 200:
            raise HttpError(502, f"The model registry answered {response.status}: {body!r}")
        return json.loads(body)


class ModelDirectory:
    """The loaded models (the registry's list, asked again once it is ``LOOKUP_TTL_SECONDS``
    old) and what the worker keeps for each: its model server's channel (in ``Channels``)
    and its code's namespace. Both are let go once the model is unloaded, or reloaded
    elsewhere: the worker holds no more than the models loaded."""

    def __init__(self, client: ControlClient, channels: Channels, models_root: str,
                 universal_code_dir: str | None = None) -> None:  # fmt: skip
        self._client = client
        self._channels = channels
        self._models_root = models_root
        self._universal_code_dir = universal_code_dir
        self._lock = threading.Lock()
        self._models: dict[str, ModelLocation] = {}
        self._fetched = -math.inf
        # code dir -> its namespace and handlers; and the loaded models that use it
        self._code: dict[str, tuple[CodeNamespace, UserCode]] = {}
        self._code_users: dict[str, set[ModelLocation]] = {}

    def lookup(self, name: str) -> ModelLocation:
        """Where the model is; 404 when it is not loaded (or not yet AVAILABLE)."""
        if time.monotonic() - self._fetched >= LOOKUP_TTL_SECONDS:
            self._refresh()
        with self._lock:
            model = self._models.get(name)
        if model is None:
            model = self._loaded_since(name)
        return model

    def _loaded_since(self, name: str) -> ModelLocation:
        """A model missing from the list may have loaded since it was fetched (a load into
        the shared model servers takes tens of milliseconds): ask for that one model."""
        description = self._client.describe(name)
        if description is None or description.get("state") != AVAILABLE:
            raise HttpError(404, f"Model {name} is not loaded yet.")
        model = ModelLocation.from_description(description)
        with self._lock:
            self._models[name] = model
        return model

    def forget(self, name: str) -> None:
        """Ask the registry again at the next lookup."""
        self._fetched = -math.inf

    def _refresh(self) -> None:
        fetched = time.monotonic()
        models = {}
        for description in self._client.loaded():
            if description.get("state") == AVAILABLE:
                model = ModelLocation.from_description(description)
                models[model.name] = model
        with self._lock:
            gone = [m for name, m in self._models.items() if models.get(name) != m]
            self._models, self._fetched = models, fetched
        for model in gone:
            self._let_go(model)

    def _let_go(self, model: ModelLocation) -> None:
        """A model was unloaded (or moved): close its channel unless a shared model server's
        (other models use it), drop code no model uses now."""
        unused = []
        with self._lock:
            shared = any(m.grpc_port == model.grpc_port for m in self._models.values())
        if not shared:
            self._channels.drop(model.grpc_port)
        with self._lock:
            for code_dir, users in list(self._code_users.items()):
                users.discard(model)
                if not users:
                    del self._code_users[code_dir]
                    unused.append(self._code.pop(code_dir)[0])
        for namespace in unused:
            namespace.unload()
            logger.info("unloaded the code of %s", namespace.code_dir)

    def code_dirs(self, model: ModelLocation) -> list[str]:
        """Where a model's ``inference.py`` may be, most specific first.

        The code downloaded from S3 (``universal_code_dir``) comes before ``/opt/ml/code``.
        """
        dirs = [os.path.join(model.base_path, "code"), os.path.join(self._models_root, "code")]
        if self._universal_code_dir:
            dirs.append(self._universal_code_dir)
        dirs.append(UNIVERSAL_CODE_DIR)
        return dirs

    def user_code(self, model: ModelLocation) -> UserCode | None:
        """The handlers of the model's ``inference.py``, in its code's namespace."""
        for code_dir in self.code_dirs(model):
            path = script_path(code_dir)
            if path is not None:
                return self._load(model, code_dir, path)
        return None

    def _load(self, model: ModelLocation, code_dir: str, path: str) -> UserCode:
        with self._lock:
            loaded = self._code.get(code_dir)
            if loaded is not None:
                self._code_users[code_dir].add(model)
                return loaded[1]
        namespace = CodeNamespace(code_dir)
        try:
            user_code = load_script_in(namespace, path)
        except Exception:
            namespace.unload()
            raise
        with self._lock:
            self._code[code_dir] = (namespace, user_code)
            self._code_users.setdefault(code_dir, set()).add(model)
        logger.info("loaded %s for model %s", path, model.name)
        return user_code


class RegisteredModel(Candidates):
    """A multi-model request's candidate: the one model server of the model it names. Lookups
    are cached for a second, so another worker may have unloaded (or reloaded) the model
    meanwhile: after a failure the registry is asked again (404 once the model is gone; its
    new ports when it was reloaded, the old channel closed)."""

    def __init__(self, directory: ModelDirectory, channels: Channels, name: str) -> None:
        self._directory = directory
        self._channels = channels
        self._name = name
        self.location = directory.lookup(name)  # raises 404 when it is not loaded

    def first(self) -> ModelServer:
        location = self.location
        return ModelServer(
            location.grpc_port, location.rest_port, self._channels.get(location.grpc_port)
        )

    def next_after(self, failed: ModelServer, attempt: int) -> ModelServer:
        self.unreachable(failed)
        self.location = self._directory.lookup(self._name)
        return self.first()

    def unreachable(self, server: ModelServer) -> None:
        self._directory.forget(self._name)
