"""What the stack is configured with: the frozen ``StackConfig`` (and where in the work
directory each of its files and sockets lives), written by the supervisor to
``WORK_DIR/stack.json`` and read back by the service's processes with ``StackConfig.load``.
config.py makes it from the environment."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sagemaker_tfs.model_discovery import ModelSpec
from sagemaker_tfs.ports import Instance, PortRange

MAX_UNIX_SOCKET_PATH_BYTES = 107  # sun_path holds 108 bytes with the final NUL
# The variable that tells the service's processes where the supervisor wrote the StackConfig.
STACK_CONFIG_ENV = "SAGEMAKER_TFS_STACK_CONFIG"
# In the work dir: left by a worker of gunicorn master PID once its app is loaded.
SERVICE_READY_MARKER = "gunicorn-{pid}.ready"


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
    universal_code_dir: str | None
    # Keep a Python model server with TensorFlow imported, waiting to replace one that exits.
    standby_model_server: bool
    # With the standby on: one process with TensorFlow imported forks every model server
    # (model_server_zygote.py) rather than one that becomes the next model server.
    model_server_zygote: bool
    # How much lower the model servers' CPU priority is than the rest of the stack's (their
    # nice value, 0-19): nginx and the supervisor, which answer /ping, stay responsive while
    # TensorFlow's threads fill every CPU.
    model_server_nice: int
    # Linux's scheduling policy for every process of the stack: "normal" (SCHED_OTHER, the
    # default) or "batch" (SCHED_BATCH: a process that wakes does not preempt the one running).
    sched_policy: str
    # Multi-model: one model server process per loaded model (isolation), instead of the
    # ``instances`` serving every loaded model (density; the default).
    model_server_per_model: bool
    # Decoded image pixels for a float input: pixel * image_scale + image_offset.
    image_scale: float
    image_offset: float
    # Prometheus metrics at metrics_path on the public port (and their counting), or neither.
    metrics: bool
    metrics_path: str
    # nginx's per-request log line: "off", "text" or "json"; with access_log_all, /ping and
    # the metrics path are logged too.
    access_log: str
    access_log_all: bool
    # Largest request body accepted (nginx's client_max_body_size), in MB (MiB).
    max_body_mb: int
    # Largest JSON / JSON lines / CSV body the container converts itself, in MB.
    max_text_body_mb: int
    # How long one call to the model server may take: its --rest_api_timeout_in_ms and the
    # service's gRPC deadline.
    model_server_timeout: int
    # The container's CPU count (container_limits.cpu_count): what "CPUs" means in README's
    # table, the model servers' TensorFlow pools and REST threads.
    cpus: int
    # The bidirectional stream (/invocations-bidirectional-stream, single-model endpoints).
    stream_max_message_mb: int
    stream_idle_timeout: int
    stream_max_connections: int
    # Seconds between the stream server's pings, and the client's time to answer (0: none).
    stream_keepalive: int
    # Invocations in flight and waiting (nginx's limit_conn, every route), 0 for no bound.
    max_concurrent_invocations: int
    # MB of request bodies of 1 MB or more that the service works on at once, shared among
    # its workers; more wait their turn (service/edge/body_budget.py), 0 for no bound.
    max_body_mb_in_flight: int

    @property
    def invocation_timeout(self) -> int:
        """Seconds an invocation may take from its arrival: ``SAGEMAKER_MODEL_SERVER_TIMEOUT``
        where set, else nginx's read timeout (``_timeouts`` makes ``model_server_timeout``
        exactly that). A request still waiting past it is not sent to a model server."""
        return self.model_server_timeout

    # Stateful sessions (SageMaker's sticky routing): NEW_SESSION / CLOSE requests, the
    # session header routed by nginx to the worker that holds the session.
    sessions: bool
    session_ttl_seconds: int
    max_sessions: int

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


def status_socket_beside(grpc_socket_path: str) -> str | None:
    """The unix socket on which the Python model server answers GetModelStatus alone, on a
    small thread pool of its own, so that the supervisor's health checks never wait behind
    predictions (``--grpc_socket_path`` + ``.status``); None when the path would not fit in
    a socket address (the supervisor then asks the gRPC socket itself)."""
    path = grpc_socket_path + ".status"
    return path if len(path.encode()) <= MAX_UNIX_SOCKET_PATH_BYTES else None
