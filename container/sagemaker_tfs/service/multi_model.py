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
import os
import socket
import threading
import time
from dataclasses import dataclass

from sagemaker_tfs.service.handlers import UserCode, add_import_paths, load_script, script_path
from sagemaker_tfs.wire.errors import HttpError

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


def not_loaded(name: str) -> HttpError:
    return HttpError(404, f"Model {name} is not loaded yet.")


class ControlClient:
    """The supervisor's control API (``GET /registry/NAME``: the stack's own description)."""

    def __init__(self, socket_path: str) -> None:
        self._socket_path = socket_path

    def describe(self, name: str) -> dict | None:
        """The model's description, or None when it is not loaded."""
        connection = UnixHTTPConnection(self._socket_path, CONTROL_TIMEOUT_SECONDS)
        try:
            connection.request("GET", f"/registry/{name}")
            response = connection.getresponse()
            body = response.read()
        except OSError as error:
            raise HttpError(503, f"The model registry is not available: {error}") from None
        finally:
            connection.close()
        if response.status == 404:
            return None
        if response.status != 200:
            raise HttpError(502, f"The model registry answered {response.status}: {body!r}")
        return json.loads(body)


class ModelDirectory:
    """Loaded models by name, cached for ``LOOKUP_TTL_SECONDS``; user code cached by path."""

    def __init__(
        self,
        client: ControlClient,
        models_root: str,
        work_dir: str,
        universal_code_dir: str | None = None,
    ) -> None:
        self._client = client
        self._models_root = models_root
        self._work_dir = work_dir
        self._universal_code_dir = universal_code_dir
        self._lock = threading.Lock()
        self._models: dict[str, tuple[float, ModelLocation]] = {}
        self._code: dict[str, UserCode | None] = {}

    def lookup(self, name: str) -> ModelLocation:
        now = time.monotonic()
        with self._lock:
            cached = self._models.get(name)
        if cached is not None and now - cached[0] < LOOKUP_TTL_SECONDS:
            return cached[1]
        description = self._client.describe(name)
        if description is None or description["state"] != AVAILABLE:
            self.forget(name)
            raise not_loaded(name)
        model = ModelLocation.from_description(description)
        with self._lock:
            self._models[name] = (now, model)
        return model

    def forget(self, name: str) -> None:
        with self._lock:
            self._models.pop(name, None)

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
        for code_dir in self.code_dirs(model):
            path = script_path(code_dir)
            if path is not None:
                return self._load_cached(code_dir, path)
        return None

    def _load_cached(self, code_dir: str, path: str) -> UserCode:
        with self._lock:
            if path in self._code:
                cached = self._code[path]
                assert cached is not None
                return cached
        add_import_paths(code_dir, self._work_dir)
        user_code = load_script(path)
        with self._lock:
            self._code[path] = user_code
        return user_code
