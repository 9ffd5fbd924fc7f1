"""The stack's configuration: every environment variable (README.md's table), parsed once.

``load_config(environ, ...)`` turns the environment (plus the ``serve`` command line
overrides) into a frozen ``StackConfig`` or raises ``ConfigError`` naming the variable and
the bad value. The supervisor writes the result to ``WORK_DIR/stack.json``; the Python
service reads it back with ``StackConfig.load(path)`` so both agree on ports and models.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sagemaker_tfs import settings
from sagemaker_tfs.config_rules import (
    batch_strategy,
    body_limits,
    metrics_path,
    nice,
    parallelism,
    sessions_on,
    timeouts,
    worker_class,
)
from sagemaker_tfs.container_limits import CpuCount, cpu_count
from sagemaker_tfs.env_reader import ConfigError, EnvReader
from sagemaker_tfs.model_discovery import ModelSpec, discover_models
from sagemaker_tfs.ports import (
    Instance,
    PortRange,
    allocate_instances,
    parse_port,
    parse_port_range,
)
from sagemaker_tfs.stack_config import StackConfig

DEFAULT_MODEL_DIR = "/opt/ml/model"
DEFAULT_MULTI_MODEL_DIR = "/opt/ml/models"
DEFAULT_WORK_DIR = "/tmp/sagemaker-tfs"
DEFAULT_PORT = 8080
UNLIMITED_ENQUEUED_BATCHES = 100_000_000
# Two shared model servers by default for multi-model: a crash of one leaves every model
# answering on the other (at 1,000 models, 0 of 50 sampled failed against 9 with one server,
# which reloads all 1,000 before it answers for any), for a second copy of every model
# (1.18 MB a model against 0.59 MB); docs/reliability.md, "a shared model server killed".
MULTI_MODEL_INSTANCES = 2
# Invocations in flight and waiting, for the whole stack, beyond which nginx answers 503 at
# once (SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS; 0: no bound). Default: 32 per CPU, at least
# 64 (docs/reliability.md): twice the 32 connections of small JSON that must never be shed,
# and a queue that the compute-heavy test model (~2-3 calls a second on 2 cores) works off
# in 20-30 s, well within the 60 s timeout; capacity grows with the CPUs, and so does it.
MIN_MAX_CONCURRENT_INVOCATIONS = 64
CONCURRENT_INVOCATIONS_PER_CPU = 32
# MB of large request bodies (1 MB or more) the service works on at once
# (SAGEMAKER_TFS_MAX_BODY_MB_IN_FLIGHT; 0: no bound; service/edge/body_budget.py). Default: 64 per
# CPU: with 100 MB bodies on 2 cores, one at a time answered more a second than eight at once
# (docs/performance.md), and each body in flight costs several times its size.
BODY_MB_IN_FLIGHT_PER_CPU = 64
# The stack's Linux scheduling policy (SAGEMAKER_TFS_SCHED_POLICY): "normal" (SCHED_OTHER), or
# "batch" (SCHED_BATCH: no process of the stack preempts another when it wakes). On two shared
# cores beside a busy neighbour, batch answered small JSON 0.99-1.55x as many a second (with an
# inference.py 1.03-1.36x), but a CPU-bound handler's p99 at capacity was 4x longer and /ping's
# p99 under it 13-20 ms against 8-10: "normal" unless a user measures batch on their own load
# (docs/performance.md, "The scheduling policy on a shared instance").
# Each policy's name here -> the name of its constant in ``os``
# (supervisor/processes/scheduling.py).
SCHED_POLICIES = {"batch": "SCHED_BATCH", "normal": "SCHED_OTHER"}
DEFAULT_SCHED_POLICY = "normal"

NGINX_LOG_LEVELS = ("debug", "info", "notice", "warn", "error", "crit", "alert", "emerg")
GUNICORN_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
ACCESS_LOG_FORMATS = ("off", "text", "json")


def gpu_present() -> bool:
    return Path("/proc/driver/nvidia/gpus").is_dir() or Path("/dev/nvidia0").exists()


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
    work = settings.WorkDir(os.path.abspath(work_dir or DEFAULT_WORK_DIR))
    if port is None:
        raw_port = env.raw("SAGEMAKER_BIND_TO_PORT")
        port = DEFAULT_PORT if raw_port is None else parse_port("SAGEMAKER_BIND_TO_PORT", raw_port)
    else:
        port = parse_port("--port", port)
    batch = _batch_settings(env)
    service = _service_settings(env, batch.enabled)
    multi = _multi_model_settings(env, multi_model, work)
    served = _models_and_ports(env, model_dir, multi, port)
    return StackConfig(
        model_dir=model_dir,
        port=port,
        cpus=cpu_total,
        models=served.models,
        default_model=served.default_model,
        code_dir=_code_dir(model_dir),
        instances=served.instances,
        safe_port_range=served.safe_port_range,
        sched_policy=env.choice(
            "SAGEMAKER_TFS_SCHED_POLICY", DEFAULT_SCHED_POLICY, tuple(SCHED_POLICIES)
        ),
        work=work,
        nginx=_nginx_settings(env, batch.enabled),
        service=service,
        model_servers=_model_server_settings(
            env, batch.enabled, cpu_total, _gpu_sharers(served, multi, has_gpu)
        ),
        multi_model=multi,
        batch=batch,
        metrics=settings.MetricsSettings(
            env.boolean("SAGEMAKER_TFS_METRICS", True), metrics_path(env)
        ),
        limits=_limits(env, cpu_total),
        stream=_stream_settings(env),
        sessions=_session_settings(env, work, service.workers),
    )


@dataclass(frozen=True)
class _ServedModels:
    """The models found and the shared model servers' ports."""

    models: tuple[ModelSpec, ...]
    default_model: str | None
    instances: tuple[Instance, ...]
    safe_port_range: PortRange | None
    instance_count: int


def _models_and_ports(
    env: EnvReader, model_dir: str, multi: settings.MultiModelSettings, port: int
) -> _ServedModels:
    """The models found and the model servers' ports."""
    raw_range = env.raw("SAGEMAKER_SAFE_PORT_RANGE")
    safe_port_range = None if raw_range is None else parse_port_range(raw_range)
    requested_default = env.raw("SAGEMAKER_TFS_DEFAULT_MODEL_NAME")
    instance_count = env.required_integer(
        "SAGEMAKER_TFS_INSTANCE_COUNT", MULTI_MODEL_INSTANCES if multi.enabled else 1
    )
    if multi.enabled:
        if not Path(model_dir).is_dir():
            raise ConfigError(f"the multi-model directory {model_dir} does not exist")
        # Shared model servers get their ports now; per-model ones when a model loads.
        instances: tuple[Instance, ...] = (
            ()
            if multi.server_per_model
            else allocate_instances(instance_count, safe_port_range, port)
        )
        return _ServedModels((), None, instances, safe_port_range, instance_count)
    models = discover_models(model_dir)
    if not models:
        raise ConfigError(
            f"no model found in {model_dir}: expected MODEL/VERSION/saved_model.pb "
            "or VERSION/saved_model.pb (VERSION numeric)"
        )
    return _ServedModels(
        models,
        _choose_default_model(models, requested_default),
        allocate_instances(instance_count, safe_port_range, port),
        safe_port_range,
        instance_count,
    )


def _nginx_settings(env: EnvReader, batch_transform: bool) -> settings.NginxSettings:
    return settings.NginxSettings(
        log_level=env.choice("SAGEMAKER_TFS_NGINX_LOGLEVEL", "error", NGINX_LOG_LEVELS),
        proxy_read_timeout=timeouts(env, batch_transform)[0],
        access_log=env.choice("SAGEMAKER_TFS_ACCESS_LOG", "off", ACCESS_LOG_FORMATS),
        access_log_all=env.boolean("SAGEMAKER_TFS_ACCESS_LOG_ALL", False),
    )


def _service_settings(env: EnvReader, batch_transform: bool) -> settings.ServiceSettings:
    """gunicorn and the images' scale."""
    return settings.ServiceSettings(
        workers=env.required_integer("SAGEMAKER_GUNICORN_WORKERS", 1),
        threads=env.required_integer("SAGEMAKER_GUNICORN_THREADS", 1),
        worker_class=worker_class(env),
        timeout=timeouts(env, batch_transform)[1],
        log_level=env.choice("SAGEMAKER_GUNICORN_LOGLEVEL", "info", GUNICORN_LOG_LEVELS),
        image_scale=env.finite("SAGEMAKER_TFS_IMAGE_SCALE", 1.0),
        image_offset=env.finite("SAGEMAKER_TFS_IMAGE_OFFSET", 0.0),
    )


def _model_server_settings(
    env: EnvReader,
    batch_transform: bool,
    cpus: int,
    gpu_sharers: int | None,
) -> settings.ModelServerSettings:
    """Batching, TensorFlow's pools, the wait for models, the standby, a GPU's share."""
    gpu_margin = env.fraction("SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN", 0.2)
    return settings.ModelServerSettings(
        batching=_batching(env, batch_transform, cpus),
        inter_op_parallelism=parallelism(env, "SAGEMAKER_TFS_INTER_OP_PARALLELISM", cpus),
        intra_op_parallelism=parallelism(env, "SAGEMAKER_TFS_INTRA_OP_PARALLELISM", cpus),
        omp_num_threads=env.string("OMP_NUM_THREADS", "1"),
        wait_time_seconds=env.required_integer("SAGEMAKER_TFS_WAIT_TIME_SECONDS", 300),
        gpu_memory_margin=gpu_margin,
        gpu_memory_fraction=(round((1.0 - gpu_margin) / gpu_sharers, 4) if gpu_sharers else None),
        timeout=timeouts(env, batch_transform)[2],
        standby=env.boolean("SAGEMAKER_TFS_STANDBY_MODEL_SERVER", True),
        zygote=env.boolean("SAGEMAKER_TFS_MODEL_SERVER_ZYGOTE", True),
        nice=nice(env, "SAGEMAKER_TFS_MODEL_SERVER_NICE"),
    )


def _gpu_sharers(
    served: _ServedModels, multi: settings.MultiModelSettings, has_gpu: Callable[[], bool]
) -> int | None:
    """How many single-model instances share the GPU, None when they do not share one."""
    shared = served.instance_count > 1 and not multi.enabled and has_gpu()
    return served.instance_count if shared else None


def _multi_model_settings(
    env: EnvReader, multi_model: bool, work: settings.WorkDir
) -> settings.MultiModelSettings:
    bucket = env.raw("SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET")
    prefix = env.raw("SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX")
    downloaded = multi_model and bucket is not None and prefix is not None
    return settings.MultiModelSettings(
        enabled=multi_model,
        server_per_model=env.boolean("SAGEMAKER_TFS_MODEL_SERVER_PER_MODEL", False) and multi_model,
        universal_bucket=bucket,
        universal_prefix=prefix,
        # Not under the model dir: /opt/ml/models is mounted read-only on SageMaker.
        universal_code_dir=work.path("universal_code") if downloaded else None,
    )


def _batch_settings(env: EnvReader) -> settings.BatchTransformSettings:
    return settings.BatchTransformSettings(
        enabled=env.boolean("SAGEMAKER_BATCH", False),
        max_concurrent_transforms=env.integer("SAGEMAKER_MAX_CONCURRENT_TRANSFORMS", None),
        strategy=batch_strategy(env),
        max_payload_in_mb=env.integer("SAGEMAKER_MAX_PAYLOAD_IN_MB", None, minimum=0),
    )


def _limits(env: EnvReader, cpus: int) -> settings.Limits:
    """The request bodies' limits and the admission bounds."""
    max_body_mb, max_text_body_mb = body_limits(env)
    return settings.Limits(
        max_body_mb=max_body_mb,
        max_text_body_mb=max_text_body_mb,
        max_concurrent_invocations=env.required_integer(
            "SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS", default_concurrent_invocations(cpus), 0
        ),
        max_body_mb_in_flight=env.required_integer(
            "SAGEMAKER_TFS_MAX_BODY_MB_IN_FLIGHT", BODY_MB_IN_FLIGHT_PER_CPU * cpus, 0
        ),
    )


def _stream_settings(env: EnvReader) -> settings.StreamSettings:
    """The bidirectional stream (service/stream/stream_server.py): the largest message either
    way, how long a connection may pass no message before it is closed, how many connections
    at once, how often the stream server pings the client (and how long the client has to
    answer; 0: no pings, SageMaker pings every 60 s itself)."""
    return settings.StreamSettings(
        max_message_mb=env.required_integer("SAGEMAKER_TFS_STREAM_MAX_MESSAGE_MB", 16),
        idle_timeout=env.required_integer("SAGEMAKER_TFS_STREAM_IDLE_TIMEOUT_SECONDS", 300),
        max_connections=env.required_integer("SAGEMAKER_TFS_STREAM_MAX_CONNECTIONS", 200),
        keepalive=env.required_integer("SAGEMAKER_TFS_STREAM_KEEPALIVE_SECONDS", 20, 0),
    )


def _session_settings(
    env: EnvReader, work: settings.WorkDir, workers: int
) -> settings.SessionSettings:
    """Stateful sessions: how long one lives (fixed from its opening, as its Expires
    announces) and how many a gunicorn worker holds at once."""
    sessions = sessions_on(env)
    _check_session_sockets(work, workers, sessions)
    return settings.SessionSettings(
        enabled=sessions,
        ttl_seconds=env.required_integer("SAGEMAKER_TFS_SESSION_TTL_SECONDS", 1200),
        max_sessions=env.required_integer("SAGEMAKER_TFS_MAX_SESSIONS", 1000),
    )


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


def _batching(env: EnvReader, batch_transform: bool, cpus: int) -> settings.BatchingConfig | None:
    if not env.boolean("SAGEMAKER_TFS_ENABLE_BATCHING", False):
        return None
    default_enqueued = UNLIMITED_ENQUEUED_BATCHES if batch_transform else cpus
    return settings.BatchingConfig(
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


def _check_session_sockets(work: settings.WorkDir, workers: int, sessions: bool) -> None:
    """Each worker's session socket path must fit in a unix socket address."""
    longest = work.session_socket(workers - 1)
    if sessions and len(longest.encode()) > settings.MAX_UNIX_SOCKET_PATH_BYTES:
        raise ConfigError(
            f"SAGEMAKER_TFS_SESSIONS needs a shorter work directory: {longest} is longer than "
            f"a unix socket path may be ({settings.MAX_UNIX_SOCKET_PATH_BYTES} bytes)"
        )


def _code_dir(model_dir: str) -> str | None:
    code = Path(model_dir) / "code"
    return str(code) if code.is_dir() else None
