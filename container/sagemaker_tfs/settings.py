"""The stack's settings per tier, each a frozen dataclass that ``StackConfig`` holds: the work
directory's paths (``WorkDir``), nginx, the service, the model servers, multi-model, Batch
Transform, metrics, the request limits, the bidirectional stream and stateful sessions.
config.py makes each from the environment with a typed function of its own."""

from __future__ import annotations

import os
from dataclasses import dataclass

MAX_UNIX_SOCKET_PATH_BYTES = 107  # sun_path holds 108 bytes with the final NUL
# In the work dir: left by a worker of gunicorn master PID once its app is loaded.
SERVICE_READY_MARKER = "gunicorn-{pid}.ready"


class _InWork:
    """A file or socket of the work directory: ``WorkDir.path(name)`` read as an attribute."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, work: WorkDir, owner: type[WorkDir]) -> str:
        return work.path(self.name)


@dataclass(frozen=True)
class WorkDir:
    """Where in the work directory each file and socket of the stack lives (docs/DESIGN.md,
    ``work``: which tier makes or reads each)."""

    root: str

    def path(self, name: str) -> str:
        return os.path.join(self.root, name)

    service_socket = _InWork("gunicorn.sock")  # gunicorn's, which nginx proxies to
    control_socket = _InWork("supervisor.sock")  # the multi-model control API
    health_file = _InWork("health.json")  # the health verdict nginx answers /ping from
    stream_socket = _InWork("stream.sock")  # the stream server's (nginx proxies the WebSocket)
    stack_config_path = _InWork("stack.json")
    metrics_socket = _InWork("metrics.sock")  # the supervisor's metrics endpoint
    edge_log_pipe = _InWork("edge-log.pipe")  # nginx writes one line per invocation to it
    metrics_dir = _InWork("prometheus")  # the gunicorn workers' PROMETHEUS_MULTIPROC_DIR

    def session_socket(self, worker_slot: int) -> str:
        """The unix socket on which the gunicorn worker of ``worker_slot`` (0 to workers - 1)
        also listens, for the requests of the sessions it holds (nginx routes them there)."""
        return self.path(f"session-{worker_slot}.sock")

    def grpc_socket_path(self, grpc_port: int) -> str | None:
        """The unix socket on which the model server of ``grpc_port`` also serves gRPC
        (``--grpc_socket_path``, beside its TCP port); the service's own calls use it. None
        when the path would not fit in a socket address (the TCP port is used then)."""
        path = self.path(f"grpc-{grpc_port}.sock")
        return path if len(path.encode()) <= MAX_UNIX_SOCKET_PATH_BYTES else None

    def status_socket_path(self, grpc_port: int) -> str | None:
        """The Python model server's status socket beside its gRPC socket (see
        ``status_socket_beside``), or None when it has none."""
        grpc_socket = self.grpc_socket_path(grpc_port)
        return status_socket_beside(grpc_socket) if grpc_socket else None

    def service_ready_marker(self, gunicorn_master_pid: int) -> str:
        """The file a worker of that gunicorn master leaves once its app is loaded."""
        return self.path(SERVICE_READY_MARKER.format(pid=gunicorn_master_pid))


def status_socket_beside(grpc_socket_path: str) -> str | None:
    """The unix socket on which the Python model server answers GetModelStatus alone, on a
    small thread pool of its own, so that the supervisor's health checks never wait behind
    predictions (``--grpc_socket_path`` + ``.status``); None when the path would not fit in
    a socket address (the supervisor then asks the gRPC socket itself)."""
    path = grpc_socket_path + ".status"
    return path if len(path.encode()) <= MAX_UNIX_SOCKET_PATH_BYTES else None


@dataclass(frozen=True)
class NginxSettings:
    """nginx's log level, its read timeout (already raised to gunicorn's) and the per-request
    log line: "off", "text" or "json"; with ``access_log_all``, /ping and the metrics path
    are logged too."""

    log_level: str
    proxy_read_timeout: int
    access_log: str
    access_log_all: bool


@dataclass(frozen=True)
class ServiceSettings:
    """gunicorn's workers and timeout, and how decoded image pixels become a float input:
    pixel * image_scale + image_offset."""

    workers: int
    threads: int
    worker_class: str
    timeout: int
    log_level: str
    image_scale: float
    image_offset: float


@dataclass(frozen=True)
class BatchingConfig:
    """TF Serving's batching parameters, as written to the batching file."""

    max_batch_size: int
    batch_timeout_micros: int
    num_batch_threads: int
    max_enqueued_batches: int


@dataclass(frozen=True)
class ModelServerSettings:
    """What every model server is started with."""

    batching: BatchingConfig | None
    inter_op_parallelism: int
    intra_op_parallelism: int
    omp_num_threads: str
    # How long the supervisor waits for the models to load, in seconds.
    wait_time_seconds: int
    gpu_memory_margin: float
    # None unless several instances share a GPU.
    gpu_memory_fraction: float | None
    # How long one call to the model server may take: its --rest_api_timeout_in_ms and the
    # service's gRPC deadline.
    timeout: int
    # Keep a Python model server with TensorFlow imported, waiting to replace one that exits.
    standby: bool
    # With the standby on: one process with TensorFlow imported forks every model server
    # (model_server_zygote.py) rather than one that becomes the next model server.
    zygote: bool
    # How much lower the model servers' CPU priority is than the rest of the stack's (their
    # nice value, 0-19): nginx and the supervisor, which answer /ping, stay responsive while
    # TensorFlow's threads fill every CPU.
    nice: int


@dataclass(frozen=True)
class MultiModelSettings:
    """Multi-model endpoints (``SAGEMAKER_MULTI_MODEL``)."""

    enabled: bool
    # One model server process per loaded model (isolation), instead of the ``instances``
    # serving every loaded model (density; the default).
    server_per_model: bool
    universal_bucket: str | None
    universal_prefix: str | None
    # With both UNIVERSAL variables set: where the shared code is downloaded.
    universal_code_dir: str | None


@dataclass(frozen=True)
class BatchTransformSettings:
    """Batch Transform's parameters (``SAGEMAKER_BATCH``), None where the variable is unset."""

    enabled: bool
    max_concurrent_transforms: int | None
    strategy: str | None
    max_payload_in_mb: int | None


@dataclass(frozen=True)
class MetricsSettings:
    """Prometheus metrics at ``path`` on the public port (and their counting), or neither."""

    enabled: bool
    path: str


@dataclass(frozen=True)
class Limits:
    """How much the stack takes in at once."""

    # Largest request body accepted (nginx's client_max_body_size), in MB (MiB).
    max_body_mb: int
    # Largest JSON / JSON lines / CSV body the container converts itself, in MB.
    max_text_body_mb: int
    # Invocations in flight and waiting (nginx's limit_conn, every route), 0 for no bound.
    max_concurrent_invocations: int
    # MB of request bodies of 1 MB or more that the service works on at once, shared among
    # its workers; more wait their turn (service/edge/body_budget.py), 0 for no bound.
    max_body_mb_in_flight: int

    @property
    def max_text_body_bytes(self) -> int:
        return self.max_text_body_mb << 20


@dataclass(frozen=True)
class StreamSettings:
    """The bidirectional stream (/invocations-bidirectional-stream, single-model endpoints)."""

    max_message_mb: int
    idle_timeout: int
    max_connections: int
    # Seconds between the stream server's pings, and the client's time to answer (0: none).
    keepalive: int

    @property
    def max_message_bytes(self) -> int:
        return self.max_message_mb << 20


@dataclass(frozen=True)
class SessionSettings:
    """Stateful sessions (SageMaker's sticky routing): NEW_SESSION / CLOSE requests, the
    session header routed by nginx to the worker that holds the session."""

    enabled: bool
    ttl_seconds: int
    max_sessions: int
