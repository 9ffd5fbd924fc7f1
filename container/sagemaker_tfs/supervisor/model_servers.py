"""Model server processes: their command lines and config files, readiness, ports, and the
multi-model registry with its control API.

The model server is the real ``tensorflow_model_server`` when it is on PATH, otherwise
``sagemaker-tfs model-server``, which takes the same flags.

Multi-model endpoints run one model server process per loaded model, so that unloading a
model really gives its memory back (the process ends). ``ModelRegistry`` is the single
source of truth for which models are loaded and on which ports; ``ControlServer`` exposes it
to the Python service over a unix socket (see docs/DESIGN.md, "Control API").
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socketserver
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Protocol

from sagemaker_tfs.config import (
    MODEL_NAME_PATTERN,
    BatchingConfig,
    Instance,
    ModelSpec,
    PortRange,
    StackConfig,
    model_spec,
    version_dirs,
)
from sagemaker_tfs.supervisor.polling import poll_until
from sagemaker_tfs.supervisor.sockets import port_is_free
from sagemaker_tfs.wire.errors import HttpError, shorten

log = logging.getLogger(__name__)

TFS_BINARY = "tensorflow_model_server"
DEFAULT_MULTI_MODEL_PORTS = PortRange(9000, 9999)
MEMORY_MARGIN_BYTES = 256 * 1024 * 1024
MAX_MODEL_NAME_CHARS = 128


# --- command lines and config files -------------------------------------------------------


def model_server_command() -> list[str]:
    """The real TF Serving binary if installed, else our compatible Python server."""
    binary = shutil.which(TFS_BINARY)
    if binary:
        return [binary]
    return [sys.executable, "-m", "sagemaker_tfs.cli", "model-server"]


def quote_text_proto(value: str) -> str:
    """A protobuf text-format string literal: nothing in ``value`` can end the string."""
    escaped = []
    for char in value:
        if char in ('"', "\\"):
            escaped.append("\\" + char)
        elif char == "\n":
            escaped.append("\\n")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\{ord(char):03o}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def render_version_policy(versions: Sequence[int]) -> str:
    """``model_version_policy`` serving exactly ``versions`` ('' for none: TF Serving's
    default, the newest version only)."""
    if not versions:
        return ""
    lines = "".join(f"        versions: {int(version)}\n" for version in versions)
    return "    model_version_policy: {\n      specific: {\n" + lines + "      }\n    }\n"


def render_model_config(models: Sequence[ModelSpec]) -> str:
    """TF Serving's text ``ModelServerConfig`` serving ``models``, each with every version
    found on disk (a ``specific`` version policy, as the reference container writes it), so
    requests can pin any of them with ``tfs-model-version``."""
    entries = []
    for model in models:
        entries.append(
            "  config: {\n"
            f"    name: {quote_text_proto(model.name)}\n"
            f"    base_path: {quote_text_proto(model.base_path)}\n"
            '    model_platform: "tensorflow"\n'
            f"{render_version_policy(model.versions)}"
            "  }"
        )
    return "model_config_list: {\n" + ",\n".join(entries) + "\n}\n"


def render_batching_config(batching: BatchingConfig) -> str:
    """TF Serving's batching parameters file, one parameter per line."""
    return (
        f"max_batch_size {{ value: {batching.max_batch_size} }}\n"
        f"batch_timeout_micros {{ value: {batching.batch_timeout_micros} }}\n"
        f"num_batch_threads {{ value: {batching.num_batch_threads} }}\n"
        f"max_enqueued_batches {{ value: {batching.max_enqueued_batches} }}\n"
    )


def model_server_args(
    instance: Instance,
    model_config_file: str,
    config: StackConfig,
    batching_file: str | None,
) -> list[str]:
    """The flags of one model server process (same for the real binary and ours)."""
    args = [
        f"--port={instance.grpc_port}",
        f"--rest_api_port={instance.rest_port}",
        f"--model_config_file={model_config_file}",
        "--max_num_load_retries=0",
    ]
    if batching_file is not None:
        args += ["--enable_batching=true", f"--batching_parameters_file={batching_file}"]
    if config.inter_op_parallelism:
        args.append(f"--tensorflow_inter_op_parallelism={config.inter_op_parallelism}")
    if config.intra_op_parallelism:
        args.append(f"--tensorflow_intra_op_parallelism={config.intra_op_parallelism}")
    if config.gpu_memory_fraction is not None:
        args.append(f"--per_process_gpu_memory_fraction={config.gpu_memory_fraction}")
    return args


# --- readiness -------------------------------------------------------------------------------


class ModelLoadError(Exception):
    """The model server reports that a model failed to load (every version ended)."""


def model_version_statuses(rest_port: int, name: str, timeout: float = 2.0) -> list[dict]:
    """``model_version_status`` of TF Serving's REST status call; empty when unanswered."""
    url = f"http://127.0.0.1:{rest_port}/v1/models/{urllib.request.quote(name, safe='')}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            status = json.load(response)
    except (OSError, ValueError):
        return []
    versions = status.get("model_version_status", []) if isinstance(status, dict) else []
    return [v for v in versions if isinstance(v, dict)]


def model_is_available(rest_port: int, name: str) -> bool:
    """True when a version of ``name`` is AVAILABLE; raises ModelLoadError if all failed."""
    versions = model_version_statuses(rest_port, name)
    if any(v.get("state") == "AVAILABLE" for v in versions):
        return True
    errors = [
        str(v.get("status", {}).get("error_message") or v.get("status", {}).get("error_code"))
        for v in versions
        if v.get("state") == "END" and v.get("status", {}).get("error_code", "OK") != "OK"
    ]
    if versions and len(errors) == len(versions):
        raise ModelLoadError(f"model {name} failed to load: {'; '.join(errors)}")
    return False


def wait_until_available(
    rest_port: int,
    names: Sequence[str],
    timeout: float,
    still_running: Callable[[], bool],
    interval: float = 0.2,
) -> bool:
    """Poll until every model in ``names`` is AVAILABLE; False on timeout or process exit.

    Raises ModelLoadError as soon as the model server reports a model as failed, rather
    than waiting for the timeout.
    """
    pending = list(names)

    def all_available() -> bool:
        pending[:] = [name for name in pending if not model_is_available(rest_port, name)]
        return not pending

    return poll_until(all_available, timeout, interval, still_running)


# --- ports and memory -----------------------------------------------------------------------


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


# --- the multi-model registry -------------------------------------------------------------


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
        with self._lock:
            model = self._models.get(name)
            if model is None:
                raise HttpError(404, f"Model {name} is not loaded yet")
            return model.describe()

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
        log.info("loaded model %s from %s on ports %s", name, base_path, model.instance)
        return dict(model.describe(), message=f"Successfully loaded model {name}")

    def unload(self, name: str) -> dict[str, Any]:
        with self._lock:
            model = self._models.get(name)
            if model is None or model.state != "AVAILABLE":
                raise HttpError(404, f"Model {name} is not loaded yet")
            model.state = "UNLOADING"
        self._forget(name)
        log.info("unloaded model %s", name)
        return {"model_name": name, "message": f"Successfully unloaded model {name}"}

    def unload_all(self) -> None:
        with self._lock:
            names = list(self._models)
        for name in names:
            self._forget(name)

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


# --- the control API --------------------------------------------------------------------------


class _ControlHandler(BaseHTTPRequestHandler):
    """JSON over HTTP on the supervisor's unix socket; see docs/DESIGN.md "Control API"."""

    server: ControlServer
    protocol_version = "HTTP/1.1"
    default_request_version = "HTTP/1.1"  # errors before the version is read still get headers
    MAX_BODY = 64 * 1024

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._dispatch(self._get)

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch(self._post)

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch(self._delete)

    def do_not_allowed(self) -> None:
        self._dispatch(self._not_allowed)

    do_PUT = do_PATCH = do_OPTIONS = do_HEAD = do_TRACE = do_CONNECT = do_not_allowed  # noqa: N815

    @staticmethod
    def _allowed_methods(parts: list[str]) -> str | None:
        if parts == ["models"]:
            return "GET, POST"
        if len(parts) == 2 and parts[0] == "models":
            return "GET, DELETE"
        return None

    def _not_allowed(self, parts: list[str]) -> dict[str, Any]:
        allowed = self._allowed_methods(parts)
        if allowed is None:
            raise HttpError(404, f"no such resource: {self.path}")
        self._allow = allowed
        raise HttpError(405, f"Method {self.command} is not allowed here; use {allowed}")

    def _get(self, parts: list[str]) -> dict[str, Any]:
        if parts == ["models"]:
            return {"models": self.server.registry.list()}
        if len(parts) == 2 and parts[0] == "models":
            return self.server.registry.get(parts[1])
        raise HttpError(404, f"no such resource: {self.path}")

    def _post(self, parts: list[str]) -> dict[str, Any]:
        if parts != ["models"]:
            raise HttpError(404, f"no such resource: {self.path}")
        body = self._read_json()
        return self.server.registry.load(body.get("model_name"), body.get("url"))

    def _delete(self, parts: list[str]) -> dict[str, Any]:
        if len(parts) == 2 and parts[0] == "models":
            return self.server.registry.unload(parts[1])
        raise HttpError(404, f"no such resource: {self.path}")

    def _read_json(self) -> dict[str, Any]:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise HttpError(400, "invalid Content-Length") from None
        if length <= 0 or length > self.MAX_BODY:
            raise HttpError(400, "expected a JSON body of at most 64 KiB")
        data = self.rfile.read(length)
        self._body_read = True
        try:
            body = json.loads(data)
        except (ValueError, RecursionError) as error:  # ValueError: also UnicodeDecodeError
            raise HttpError(400, f"invalid JSON body: {error}") from None
        if not isinstance(body, dict):
            raise HttpError(400, 'expected a JSON object {"model_name": ..., "url": ...}')
        return body

    def _unread_body(self) -> bool:
        """A body this handler did not read must not be taken for the next request."""
        declared = self.headers.get("Content-Length", "0").strip() not in ("", "0")
        chunked = "Transfer-Encoding" in self.headers
        return (declared or chunked) and not self._body_read

    def _dispatch(self, action: Callable[[list[str]], dict[str, Any]]) -> None:
        self._body_read = False
        self._allow: str | None = None
        parts = [p for p in urllib.request.unquote(self.path.split("?")[0]).split("/") if p]
        try:
            status, payload = 200, action(parts)
        except HttpError as error:
            status, payload = error.status, {"error": error.message}
        except Exception as error:  # a bug must not take the control API down
            log.exception("control API %s %s failed", self.command, self.path)
            status, payload = 500, {"error": f"internal error: {error}"}
        self._send_json(status, payload, close=status != 200 or self._unread_body())

    def _send_json(self, status: int, payload: dict[str, Any], close: bool) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status, HTTPStatus(status).phrase)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self._allow:
            self.send_header("Allow", self._allow)
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (a bad request line, an unknown method, headers too
        large...) as JSON instead of its HTML page."""
        self._allow = getattr(self, "_allow", None)
        self.close_connection = True
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = str(code)
        text = message if message and message != phrase else phrase
        self._send_json(code, {"error": shorten(text)}, close=True)

    def address_string(self) -> str:
        return "control-socket"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("control API: " + format, *args)


class ControlServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """Threaded HTTP server on a unix socket: one thread per request."""

    daemon_threads = True

    def __init__(self, path: str, registry: ModelRegistry) -> None:
        if os.path.exists(path):
            os.unlink(path)
        self.registry = registry
        super().__init__(path, _ControlHandler)
        os.chmod(path, 0o600)

    def serve_in_background(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="control-api", daemon=True)
        thread.start()
        return thread
