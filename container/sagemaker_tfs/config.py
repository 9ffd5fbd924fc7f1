"""The stack's configuration: every environment variable (README.md's table), parsed once.

``load_config(environ, ...)`` turns the environment (plus the ``serve`` command line
overrides) into a frozen ``StackConfig`` or raises ``ConfigError`` naming the variable and
the bad value. The supervisor writes the result to ``WORK_DIR/stack.json``; the Python
service reads it back with ``StackConfig.load(path)`` so both agree on ports and models.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagemaker_tfs.container_limits import CpuCount, cpu_count
from sagemaker_tfs.env_reader import ConfigError, EnvReader

DEFAULT_MODEL_DIR = "/opt/ml/model"
DEFAULT_MULTI_MODEL_DIR = "/opt/ml/models"
DEFAULT_WORK_DIR = "/tmp/sagemaker-tfs"
DEFAULT_PORT = 8080
DEFAULT_GRPC_PORT = 9000
DEFAULT_REST_PORT = 8501
UNLIMITED_ENQUEUED_BATCHES = 100_000_000
# Any SageMaker mode's body (async inference: 1 GB); JSON/CSV converted here (Batch's 100 MB).
DEFAULT_MAX_BODY_MB = 1024
DEFAULT_MAX_TEXT_BODY_MB = 100
BATCH_TIMEOUT_SECONDS = 600  # what Batch Transform waits for an invocation by default
NGINX_TIMEOUT_MARGIN_SECONDS = 5
# Invocations in flight and waiting, for the whole stack, beyond which nginx answers 503 at
# once (SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS; 0: no bound). Default: 32 per CPU, at least
# 64 (docs/reliability.md): twice the 32 connections of small JSON that must never be shed,
# and a queue that the compute-heavy test model (~2-3 calls a second on 2 cores) works off
# in 20-30 s, well within the 60 s timeout; capacity grows with the CPUs, and so does it.
MIN_MAX_CONCURRENT_INVOCATIONS = 64
CONCURRENT_INVOCATIONS_PER_CPU = 32
MAX_UNIX_SOCKET_PATH_BYTES = 107  # sun_path holds 108 bytes with the final NUL
# The bidirectional stream (service/stream_server.py): the largest message either way, how
# long a connection may pass no message before it is closed, how many connections at once.
DEFAULT_STREAM_MAX_MESSAGE_MB = 16
DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS = 300
DEFAULT_STREAM_MAX_CONNECTIONS = 200
# Stateful sessions: how long one lives (fixed from its opening, as its Expires announces) and
# how many a gunicorn worker holds at once.
DEFAULT_SESSION_TTL_SECONDS = 1200
DEFAULT_MAX_SESSIONS = 1000

NGINX_LOG_LEVELS = ("debug", "info", "notice", "warn", "error", "crit", "alert", "emerg")
GUNICORN_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
BATCH_STRATEGIES = ("MULTI_RECORD", "SINGLE_RECORD")
ACCESS_LOG_FORMATS = ("off", "text", "json")
DEFAULT_METRICS_PATH = "/metrics"
# Paths the stack answers itself: the metrics endpoint may not take one of them.
RESERVED_PATHS = (
    "/ping",
    "/invocations",
    "/invocations-bidirectional-stream",
    "/execution-parameters",
    "/models",
)
_METRICS_PATH = re.compile(r"(/[A-Za-z0-9_~.\-]+)+")
# The variable that tells the service's processes where the supervisor wrote the StackConfig.
STACK_CONFIG_ENV = "SAGEMAKER_TFS_STACK_CONFIG"
# In the work dir: left by a worker of gunicorn master PID once its app is loaded.
SERVICE_READY_MARKER = "gunicorn-{pid}.ready"

# A model name, wherever one is checked (full match): URL routes, Target-Model, the control API,
# names written into the nginx configuration. The njs has its copy, tested against this one.
MODEL_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_WORKER_CLASS = re.compile(r"[A-Za-z_][A-Za-z0-9_.:]*")


@dataclass(frozen=True)
class ModelSpec:
    """A model served by every model server instance: its name, its base directory and the
    version numbers found there (all of them are served, as the reference container does)."""

    name: str
    base_path: str
    versions: tuple[int, ...] = ()


@dataclass(frozen=True)
class Instance:
    """The two ports of one model server process."""

    grpc_port: int
    rest_port: int


@dataclass(frozen=True)
class PortRange:
    """``SAGEMAKER_SAFE_PORT_RANGE``: internal ports must be taken from ``low..high``."""

    low: int
    high: int

    def ports(self) -> range:
        return range(self.low, self.high + 1)


@dataclass(frozen=True)
class BatchingConfig:
    """TF Serving's batching parameters, as written to the batching file."""

    max_batch_size: int
    batch_timeout_micros: int
    num_batch_threads: int
    max_enqueued_batches: int


@dataclass(frozen=True)
class StackConfig:
    """Everything the supervisor, nginx and the Python service need to know."""

    model_dir: str
    work_dir: str
    port: int
    multi_model: bool
    models: tuple[ModelSpec, ...]
    default_model: str | None
    code_dir: str | None
    instances: tuple[Instance, ...]
    safe_port_range: PortRange | None
    nginx_log_level: str
    nginx_proxy_read_timeout: int
    gunicorn_workers: int
    gunicorn_threads: int
    gunicorn_worker_class: str
    gunicorn_timeout: int
    gunicorn_log_level: str
    batching: BatchingConfig | None
    inter_op_parallelism: int
    intra_op_parallelism: int
    gpu_memory_margin: float
    gpu_memory_fraction: float | None
    wait_time_seconds: int
    batch_transform: bool
    max_concurrent_transforms: int | None
    batch_strategy: str | None
    max_payload_in_mb: int | None
    universal_bucket: str | None
    universal_prefix: str | None
    omp_num_threads: str
    service_socket: str
    control_socket: str
    # Multi-model with both UNIVERSAL variables set: where the shared code is downloaded.
    universal_code_dir: str | None = None
    # Keep a Python model server with TensorFlow imported, waiting to replace one that exits.
    standby_model_server: bool = False
    # Multi-model: one model server process per loaded model (isolation), instead of the
    # ``instances`` serving every loaded model (density; the default).
    model_server_per_model: bool = False
    # Decoded image pixels for a float input: pixel * image_scale + image_offset.
    image_scale: float = 1.0
    image_offset: float = 0.0
    # Prometheus metrics at metrics_path on the public port (and their counting), or neither.
    metrics: bool = True
    metrics_path: str = DEFAULT_METRICS_PATH
    # nginx's per-request log line: "off", "text" or "json"; with access_log_all, /ping and
    # the metrics path are logged too.
    access_log: str = "off"
    access_log_all: bool = False
    # Largest request body accepted (nginx's client_max_body_size), in MB (MiB).
    max_body_mb: int = DEFAULT_MAX_BODY_MB
    # Largest JSON / JSON lines / CSV body the container converts itself, in MB.
    max_text_body_mb: int = DEFAULT_MAX_TEXT_BODY_MB
    # How long one call to the model server may take: its --rest_api_timeout_in_ms and the
    # service's gRPC deadline.
    model_server_timeout: int = 60
    # The container's CPU count (container_limits.cpu_count): what "CPUs" means in README's
    # table, the model servers' TensorFlow pools and REST threads.
    cpus: int = 1
    # The bidirectional stream (/invocations-bidirectional-stream, single-model endpoints).
    stream_max_message_mb: int = DEFAULT_STREAM_MAX_MESSAGE_MB
    stream_idle_timeout: int = DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS
    stream_max_connections: int = DEFAULT_STREAM_MAX_CONNECTIONS
    # Invocations in flight and waiting (nginx's limit_conn, every route), 0 for no bound.
    max_concurrent_invocations: int = MIN_MAX_CONCURRENT_INVOCATIONS

    @property
    def invocation_timeout(self) -> int:
        """Seconds an invocation may take from its arrival: ``SAGEMAKER_MODEL_SERVER_TIMEOUT``
        where set, else nginx's read timeout (``_timeouts`` makes ``model_server_timeout``
        exactly that). A request still waiting past it is not sent to a model server."""
        return self.model_server_timeout

    # Stateful sessions (SageMaker's sticky routing): NEW_SESSION / CLOSE requests, the
    # session header routed by nginx to the worker that holds the session.
    sessions: bool = False
    session_ttl_seconds: int = DEFAULT_SESSION_TTL_SECONDS
    max_sessions: int = DEFAULT_MAX_SESSIONS

    def session_socket(self, worker_slot: int) -> str:
        """The unix socket on which the gunicorn worker of ``worker_slot`` (0 to workers - 1)
        also listens, for the requests of the sessions it holds (nginx routes them there)."""
        return os.path.join(self.work_dir, f"session-{worker_slot}.sock")

    def grpc_socket_path(self, grpc_port: int) -> str | None:
        """The unix socket on which the model server of ``grpc_port`` also serves gRPC
        (``--grpc_socket_path``, beside its TCP port); the service's own calls use it. None
        when the path would not fit in a socket address (the TCP port is used then)."""
        path = os.path.join(self.work_dir, f"grpc-{grpc_port}.sock")
        return path if len(path.encode()) <= MAX_UNIX_SOCKET_PATH_BYTES else None

    def status_socket_path(self, grpc_port: int) -> str | None:
        """The Python model server's status socket beside its gRPC socket (see
        ``status_socket_beside``), or None when it has none."""
        grpc_socket = self.grpc_socket_path(grpc_port)
        return status_socket_beside(grpc_socket) if grpc_socket else None

    @property
    def health_file(self) -> str:
        """The supervisor's health verdict, which nginx answers ``/ping`` from."""
        return os.path.join(self.work_dir, "health.json")

    @property
    def max_text_body_bytes(self) -> int:
        return self.max_text_body_mb << 20

    @property
    def stream_socket(self) -> str:
        """The unix socket of the stream server, which nginx proxies the WebSocket to."""
        return os.path.join(self.work_dir, "stream.sock")

    @property
    def stream_max_message_bytes(self) -> int:
        return self.stream_max_message_mb << 20

    @property
    def stack_config_path(self) -> str:
        return os.path.join(self.work_dir, "stack.json")

    @property
    def metrics_socket(self) -> str:
        """The supervisor's metrics endpoint, which nginx's metrics path is proxied to."""
        return os.path.join(self.work_dir, "metrics.sock")

    @property
    def edge_log_pipe(self) -> str:
        """The named pipe to which nginx writes the supervisor one line per invocation."""
        return os.path.join(self.work_dir, "edge-log.pipe")

    @property
    def metrics_dir(self) -> str:
        """``PROMETHEUS_MULTIPROC_DIR`` of the gunicorn workers."""
        return os.path.join(self.work_dir, "prometheus")

    def service_ready_marker(self, gunicorn_master_pid: int) -> str:
        """The file a worker of that gunicorn master leaves once its app is loaded."""
        return os.path.join(self.work_dir, SERVICE_READY_MARKER.format(pid=gunicorn_master_pid))

    @property
    def shared_code_dir(self) -> str | None:
        """The code whose ``requirements.txt`` is installed at start: ``MODEL_DIR/code``,
        else (multi-model) the downloaded universal code."""
        return self.code_dir or self.universal_code_dir

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StackConfig:
        values = dict(data)
        values["models"] = tuple(
            ModelSpec(m["name"], m["base_path"], tuple(m.get("versions", ())))
            for m in values["models"]
        )
        values["instances"] = tuple(Instance(**i) for i in values["instances"])
        if values["safe_port_range"] is not None:
            values["safe_port_range"] = PortRange(**values["safe_port_range"])
        if values["batching"] is not None:
            values["batching"] = BatchingConfig(**values["batching"])
        return cls(**values)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> StackConfig:
        """Read the JSON the supervisor wrote (``SAGEMAKER_TFS_STACK_CONFIG``)."""
        with open(path, encoding="utf-8") as stream:
            return cls.from_dict(json.load(stream))


# --- parsing single values -------------------------------------------------------------


def status_socket_beside(grpc_socket_path: str) -> str | None:
    """The unix socket on which the Python model server answers GetModelStatus alone, on a
    small thread pool of its own, so that the supervisor's health checks never wait behind
    predictions (``--grpc_socket_path`` + ``.status``); None when the path would not fit in
    a socket address (the supervisor then asks the gRPC socket itself)."""
    path = grpc_socket_path + ".status"
    return path if len(path.encode()) <= MAX_UNIX_SOCKET_PATH_BYTES else None


def parse_port(name: str, value: str | int) -> int:
    try:
        port = int(value)
    except ValueError:
        raise ConfigError(f"{name} must be a port number, got {value!r}") from None
    if not 1 <= port <= 65535:
        raise ConfigError(f"{name} must be a port number between 1 and 65535, got {value!r}")
    return port


def parse_port_range(value: str) -> PortRange:
    """``LOW-HIGH`` -> ``PortRange``; the variable's name is in every error."""
    name = "SAGEMAKER_SAFE_PORT_RANGE"
    match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", value)
    if match is None:
        raise ConfigError(f"{name} must look like LOW-HIGH (e.g. 9000-9999), got {value!r}")
    low, high = parse_port(name, match.group(1)), parse_port(name, match.group(2))
    if low > high:
        raise ConfigError(f"{name} must have LOW <= HIGH, got {value!r}")
    return PortRange(low, high)


# --- model discovery ---------------------------------------------------------------------


def version_dirs(base_path: str | os.PathLike[str]) -> list[Path]:
    """Numeric, non-hidden sub-directories of ``base_path`` that hold a SavedModel."""
    base = Path(base_path)
    if not base.is_dir():
        return []
    found = []
    for child in sorted(base.iterdir()):
        if not child.name.isdigit() or not child.is_dir():
            continue
        if (child / "saved_model.pb").is_file() or (child / "saved_model.pbtxt").is_file():
            found.append(child)
    return found


def model_versions(base_path: str | os.PathLike[str]) -> tuple[int, ...]:
    """The version numbers of ``base_path``'s version directories (``00000123`` is 123)."""
    return tuple(sorted({int(path.name) for path in version_dirs(base_path)}))


def model_spec(name: str, base_path: str | os.PathLike[str]) -> ModelSpec:
    """A model and every version it has on disk."""
    return ModelSpec(name, str(base_path), model_versions(base_path))


def discover_models(model_dir: str) -> tuple[ModelSpec, ...]:
    """The models under ``model_dir`` (docs/contract.md "Model directory").

    ``model_dir`` itself is a model when it holds version directories (it takes the
    directory's name); otherwise each non-hidden sub-directory other than ``code`` that
    holds version directories is one, in name order.
    """
    root = Path(model_dir)
    if version_dirs(root):
        return (model_spec(root.resolve().name, root),)
    models = []
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if child.name.startswith(".") or child.name == "code" or not child.is_dir():
                continue
            if version_dirs(child):
                models.append(model_spec(child.name, child))
    return tuple(models)


def _choose_default_model(models: tuple[ModelSpec, ...], requested: str | None) -> str | None:
    if requested is None:
        return models[0].name if models else None
    if requested not in {m.name for m in models}:
        names = ", ".join(m.name for m in models) or "none"
        raise ConfigError(
            f"SAGEMAKER_TFS_DEFAULT_MODEL_NAME={requested!r} is not one of the models found "
            f"({names})"
        )
    return requested


# --- ports ----------------------------------------------------------------------------------


def allocate_instances(
    count: int, port_range: PortRange | None, public_port: int
) -> tuple[Instance, ...]:
    """Ports for ``count`` model servers: fixed defaults, or taken in order from the range.
    Either way never the public port: ``SAGEMAKER_BIND_TO_PORT=8501`` (what the SDK v3's local
    container publishes) moves the first REST port to 8503."""
    if port_range is None:
        grpc_ports = _default_ports(DEFAULT_GRPC_PORT, count, public_port)
        rest_ports = _default_ports(DEFAULT_REST_PORT, count, public_port)
        return tuple(
            Instance(grpc, rest) for grpc, rest in zip(grpc_ports, rest_ports, strict=True)
        )
    ports = [p for p in port_range.ports() if p != public_port]
    if len(ports) < 2 * count:
        raise ConfigError(
            f"SAGEMAKER_SAFE_PORT_RANGE={port_range.low}-{port_range.high} has room for "
            f"{len(ports) // 2} model server(s), SAGEMAKER_TFS_INSTANCE_COUNT asks for {count}"
        )
    return tuple(Instance(ports[2 * i], ports[2 * i + 1]) for i in range(count))


def _default_ports(first: int, count: int, public_port: int) -> list[int]:
    """``count`` ports from ``first`` in steps of two (gRPC even, REST odd: the two series never
    meet), passing over the public port."""
    ports = (port for port in itertools.count(first, 2) if port != public_port)
    return list(itertools.islice(ports, count))


def gpu_present() -> bool:
    return Path("/proc/driver/nvidia/gpus").is_dir() or Path("/dev/nvidia0").exists()


# --- the whole configuration ---------------------------------------------------------------


def _batching(env: EnvReader, batch_transform: bool, cpus: int) -> BatchingConfig | None:
    if not env.boolean("SAGEMAKER_TFS_ENABLE_BATCHING", False):
        return None
    default_enqueued = UNLIMITED_ENQUEUED_BATCHES if batch_transform else cpus
    return BatchingConfig(
        max_batch_size=env.required_integer("SAGEMAKER_TFS_MAX_BATCH_SIZE", 8),
        batch_timeout_micros=env.required_integer(
            "SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS", 1000, minimum=0
        ),
        num_batch_threads=env.required_integer("SAGEMAKER_TFS_NUM_BATCH_THREADS", cpus),
        max_enqueued_batches=env.required_integer(
            "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES", default_enqueued
        ),
    )


def default_concurrent_invocations(cpus: int) -> int:
    """``SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS``'s default for a machine of ``cpus``."""
    return max(MIN_MAX_CONCURRENT_INVOCATIONS, CONCURRENT_INVOCATIONS_PER_CPU * cpus)


def _worker_class(env: EnvReader) -> str:
    value = env.string("SAGEMAKER_GUNICORN_WORKER_CLASS", "gevent")
    if not _WORKER_CLASS.fullmatch(value):
        raise ConfigError(f"SAGEMAKER_GUNICORN_WORKER_CLASS is not a class name, got {value!r}")
    return value


def _batch_strategy(env: EnvReader) -> str | None:
    """``MULTI_RECORD``/``SINGLE_RECORD``; the API's spelling ``MultiRecord`` is accepted too."""
    value = env.raw("SAGEMAKER_BATCH_STRATEGY")
    if value is None:
        return None
    normalized = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", value).upper()
    if normalized not in BATCH_STRATEGIES:
        raise ConfigError(
            f"SAGEMAKER_BATCH_STRATEGY must be one of {', '.join(BATCH_STRATEGIES)}, got {value!r}"
        )
    return normalized


def _metrics_path(env: EnvReader) -> str:
    name = "SAGEMAKER_TFS_METRICS_PATH"
    path = env.string(name, DEFAULT_METRICS_PATH)
    segments = path.split("/")[1:]
    if not _METRICS_PATH.fullmatch(path) or "." in segments or ".." in segments:
        raise ConfigError(
            f"{name} must be a path like /metrics (letters, digits, -._~), got {path!r}"
        )
    if any(path == reserved or path.startswith(reserved + "/") for reserved in RESERVED_PATHS):
        raise ConfigError(f"{name} must not be one of the stack's own paths, got {path!r}")
    return path


def _timeouts(env: EnvReader, batch_transform: bool) -> tuple[int, int, int]:
    """``(nginx, gunicorn, model server)`` seconds. ``SAGEMAKER_MODEL_SERVER_TIMEOUT`` (else
    Batch Transform's 600 s under ``SAGEMAKER_BATCH``) sets all three, nginx a margin longer
    so that the 504 of the layer that timed out reaches the client; nginx's or gunicorn's own
    variable wins for it. Otherwise a model call may take as long as nginx waits."""
    umbrella = env.integer("SAGEMAKER_MODEL_SERVER_TIMEOUT", None)
    if umbrella is None and batch_transform:
        umbrella = BATCH_TIMEOUT_SECONDS
    gunicorn = env.required_integer("SAGEMAKER_GUNICORN_TIMEOUT_SECONDS", umbrella or 30)
    nginx_default = umbrella + NGINX_TIMEOUT_MARGIN_SECONDS if umbrella else 60
    nginx = env.required_integer("SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS", nginx_default)
    nginx = max(nginx, gunicorn)
    return nginx, gunicorn, umbrella or nginx


def _body_limits(env: EnvReader) -> tuple[int, int]:
    """``(max_body_mb, max_text_body_mb)``; the text limit never exceeds the body limit."""
    body = env.required_integer("SAGEMAKER_TFS_MAX_BODY_MB", DEFAULT_MAX_BODY_MB)
    text = env.required_integer("SAGEMAKER_TFS_MAX_TEXT_BODY_MB", DEFAULT_MAX_TEXT_BODY_MB)
    return body, min(text, body)


def _parallelism(env: EnvReader, name: str, cpus: int) -> int:
    """A TensorFlow pool's size: the variable, or the container's CPUs when it is unset or 0
    (TensorFlow's own choice, 0, would count the machine's cores, not the container's)."""
    return env.required_integer(name, 0, 0) or cpus


def _sessions_on(env: EnvReader) -> bool:
    """``SAGEMAKER_TFS_SESSIONS``, or the name AWS's container standards use; either true."""
    ours = env.boolean("SAGEMAKER_TFS_SESSIONS", False)
    return env.boolean("SAGEMAKER_ENABLE_STATEFUL_SESSIONS", False) or ours


def _check_session_sockets(work_dir: str, workers: int, sessions: bool) -> None:
    """Each worker's session socket path must fit in a unix socket address."""
    longest = os.path.join(work_dir, f"session-{workers - 1}.sock")
    if sessions and len(longest.encode()) > MAX_UNIX_SOCKET_PATH_BYTES:
        raise ConfigError(
            f"SAGEMAKER_TFS_SESSIONS needs a shorter work directory: {longest} is longer than "
            f"a unix socket path may be ({MAX_UNIX_SOCKET_PATH_BYTES} bytes)"
        )


def _code_dir(model_dir: str) -> str | None:
    code = Path(model_dir) / "code"
    return str(code) if code.is_dir() else None


def _universal_code_dir(env: EnvReader, multi_model: bool, work_dir: str) -> str | None:
    """``WORK_DIR/universal_code`` when the shared code is to be downloaded from S3.

    Not under the model dir: ``/opt/ml/models`` is mounted read-only on SageMaker.
    """
    bucket = env.raw("SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET")
    prefix = env.raw("SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX")
    if not multi_model or bucket is None or prefix is None:
        return None
    return os.path.join(work_dir, "universal_code")


def load_config(
    environ: Mapping[str, str],
    model_dir: str | None = None,
    work_dir: str | None = None,
    port: int | None = None,
    cpus: CpuCount | None = None,
    has_gpu: Callable[[], bool] = gpu_present,
) -> StackConfig:
    """Parse and validate the environment and the ``serve`` overrides into a StackConfig.
    ``cpus``: the container's CPU count (default: ``container_limits.cpu_count()``)."""
    env = EnvReader(environ)
    cpu_total = (cpus or cpu_count()).count
    multi_model = env.boolean("SAGEMAKER_MULTI_MODEL", False)
    # absolute: the model servers take base paths only as absolute paths (TF Serving's rule)
    model_dir = os.path.abspath(
        model_dir or (DEFAULT_MULTI_MODEL_DIR if multi_model else DEFAULT_MODEL_DIR)
    )
    work_dir = os.path.abspath(work_dir or DEFAULT_WORK_DIR)
    if port is None:
        raw_port = env.raw("SAGEMAKER_BIND_TO_PORT")
        port = DEFAULT_PORT if raw_port is None else parse_port("SAGEMAKER_BIND_TO_PORT", raw_port)
    else:
        port = parse_port("--port", port)

    raw_range = env.raw("SAGEMAKER_SAFE_PORT_RANGE")
    safe_port_range = None if raw_range is None else parse_port_range(raw_range)
    instance_count = env.required_integer("SAGEMAKER_TFS_INSTANCE_COUNT", 1)
    requested_default = env.raw("SAGEMAKER_TFS_DEFAULT_MODEL_NAME")

    per_model = env.boolean("SAGEMAKER_TFS_MODEL_SERVER_PER_MODEL", False) and multi_model
    if multi_model:
        if not Path(model_dir).is_dir():
            raise ConfigError(f"the multi-model directory {model_dir} does not exist")
        models: tuple[ModelSpec, ...] = ()
        # Shared model servers get their ports now; per-model ones when a model loads.
        instances: tuple[Instance, ...] = (
            () if per_model else allocate_instances(instance_count, safe_port_range, port)
        )
    else:
        models = discover_models(model_dir)
        if not models:
            raise ConfigError(
                f"no model found in {model_dir}: expected MODEL/VERSION/saved_model.pb "
                "or VERSION/saved_model.pb (VERSION numeric)"
            )
        instances = allocate_instances(instance_count, safe_port_range, port)
    default_model = None if multi_model else _choose_default_model(models, requested_default)

    batch_transform = env.boolean("SAGEMAKER_BATCH", False)
    nginx_timeout, gunicorn_timeout, model_server_timeout = _timeouts(env, batch_transform)
    max_body_mb, max_text_body_mb = _body_limits(env)
    workers = env.required_integer("SAGEMAKER_GUNICORN_WORKERS", 1)
    sessions = _sessions_on(env)
    _check_session_sockets(work_dir, workers, sessions)
    gpu_margin = env.fraction("SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN", 0.2)
    gpu_fraction = None
    if instance_count > 1 and not multi_model and has_gpu():
        gpu_fraction = round((1.0 - gpu_margin) / instance_count, 4)

    return StackConfig(
        model_dir=model_dir,
        work_dir=work_dir,
        port=port,
        multi_model=multi_model,
        models=models,
        default_model=default_model,
        code_dir=_code_dir(model_dir),
        instances=instances,
        safe_port_range=safe_port_range,
        nginx_log_level=env.choice("SAGEMAKER_TFS_NGINX_LOGLEVEL", "error", NGINX_LOG_LEVELS)
        or "error",
        nginx_proxy_read_timeout=nginx_timeout,
        gunicorn_workers=workers,
        gunicorn_threads=env.required_integer("SAGEMAKER_GUNICORN_THREADS", 1),
        gunicorn_worker_class=_worker_class(env),
        gunicorn_timeout=gunicorn_timeout,
        gunicorn_log_level=env.choice("SAGEMAKER_GUNICORN_LOGLEVEL", "info", GUNICORN_LOG_LEVELS)
        or "info",
        batching=_batching(env, batch_transform, cpu_total),
        inter_op_parallelism=_parallelism(env, "SAGEMAKER_TFS_INTER_OP_PARALLELISM", cpu_total),
        intra_op_parallelism=_parallelism(env, "SAGEMAKER_TFS_INTRA_OP_PARALLELISM", cpu_total),
        gpu_memory_margin=gpu_margin,
        gpu_memory_fraction=gpu_fraction,
        wait_time_seconds=env.required_integer("SAGEMAKER_TFS_WAIT_TIME_SECONDS", 300),
        batch_transform=batch_transform,
        max_concurrent_transforms=env.integer("SAGEMAKER_MAX_CONCURRENT_TRANSFORMS", None),
        batch_strategy=_batch_strategy(env),
        max_payload_in_mb=env.integer("SAGEMAKER_MAX_PAYLOAD_IN_MB", None, minimum=0),
        universal_bucket=env.raw("SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET"),
        universal_prefix=env.raw("SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX"),
        omp_num_threads=env.string("OMP_NUM_THREADS", "1"),
        service_socket=os.path.join(work_dir, "gunicorn.sock"),
        control_socket=os.path.join(work_dir, "supervisor.sock"),
        universal_code_dir=_universal_code_dir(env, multi_model, work_dir),
        standby_model_server=env.boolean("SAGEMAKER_TFS_STANDBY_MODEL_SERVER", True),
        model_server_per_model=per_model,
        image_scale=env.finite("SAGEMAKER_TFS_IMAGE_SCALE", 1.0),
        image_offset=env.finite("SAGEMAKER_TFS_IMAGE_OFFSET", 0.0),
        metrics=env.boolean("SAGEMAKER_TFS_METRICS", True),
        metrics_path=_metrics_path(env),
        access_log=env.choice("SAGEMAKER_TFS_ACCESS_LOG", "off", ACCESS_LOG_FORMATS) or "off",
        access_log_all=env.boolean("SAGEMAKER_TFS_ACCESS_LOG_ALL", False),
        max_body_mb=max_body_mb,
        max_text_body_mb=max_text_body_mb,
        model_server_timeout=model_server_timeout,
        cpus=cpu_total,
        stream_max_message_mb=env.required_integer(
            "SAGEMAKER_TFS_STREAM_MAX_MESSAGE_MB", DEFAULT_STREAM_MAX_MESSAGE_MB
        ),
        stream_idle_timeout=env.required_integer(
            "SAGEMAKER_TFS_STREAM_IDLE_TIMEOUT_SECONDS", DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS
        ),
        stream_max_connections=env.required_integer(
            "SAGEMAKER_TFS_STREAM_MAX_CONNECTIONS", DEFAULT_STREAM_MAX_CONNECTIONS
        ),
        max_concurrent_invocations=env.required_integer(
            "SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS", default_concurrent_invocations(cpu_total), 0
        ),
        sessions=sessions,
        session_ttl_seconds=env.required_integer(
            "SAGEMAKER_TFS_SESSION_TTL_SECONDS", DEFAULT_SESSION_TTL_SECONDS
        ),
        max_sessions=env.required_integer("SAGEMAKER_TFS_MAX_SESSIONS", DEFAULT_MAX_SESSIONS),
    )
