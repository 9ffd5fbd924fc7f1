"""The settings whose value is more than a typed read (``env_reader``): each reads its
variable or variables and holds them to what README.md's table allows, for ``config.py``."""

from __future__ import annotations

import re

from sagemaker_tfs.env_reader import ConfigError, EnvReader

DEFAULT_METRICS_PATH = "/metrics"
# Any SageMaker mode's body (async inference: 1 GB); JSON/CSV converted here (Batch's 100 MB).
DEFAULT_MAX_BODY_MB = 1024
DEFAULT_MAX_TEXT_BODY_MB = 100
BATCH_TIMEOUT_SECONDS = 600  # what Batch Transform waits for an invocation by default
NGINX_TIMEOUT_MARGIN_SECONDS = 5
# The model servers' nice value (SAGEMAKER_TFS_MODEL_SERVER_NICE): with TensorFlow's threads
# on every CPU, nginx at the same priority waited up to 520 ms to answer /ping; 5 or 10 below
# it, /ping's p99 was 4-9 ms. 10 left the model server a tenth of a busy core beside nginx's
# refusals under overload; 5 a quarter: 16-34% more answers at 3x the capacity
# (docs/reliability.md, "CPU priority").
DEFAULT_MODEL_SERVER_NICE = 5
MAX_NICE = 19
BATCH_STRATEGIES = ("MULTI_RECORD", "SINGLE_RECORD")
# Paths the stack answers itself: the metrics endpoint may not take one of them.
RESERVED_PATHS = (
    "/ping",
    "/invocations",
    "/invocations-bidirectional-stream",
    "/execution-parameters",
    "/models",
)
METRICS_PATH_PATTERN = re.compile(r"(/[A-Za-z0-9_~.\-]+)+")
WORKER_CLASS_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_.:]*")


def worker_class(env: EnvReader) -> str:
    value = env.string("SAGEMAKER_GUNICORN_WORKER_CLASS", "gevent")
    if not WORKER_CLASS_PATTERN.fullmatch(value):
        raise ConfigError(f"SAGEMAKER_GUNICORN_WORKER_CLASS is not a class name, got {value!r}")
    return value


def batch_strategy(env: EnvReader) -> str | None:
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


def metrics_path(env: EnvReader) -> str:
    name = "SAGEMAKER_TFS_METRICS_PATH"
    path = env.string(name, DEFAULT_METRICS_PATH)
    segments = path.split("/")[1:]
    if not METRICS_PATH_PATTERN.fullmatch(path) or "." in segments or ".." in segments:
        raise ConfigError(
            f"{name} must be a path like /metrics (letters, digits, -._~), got {path!r}"
        )
    if any(path == reserved or path.startswith(reserved + "/") for reserved in RESERVED_PATHS):
        raise ConfigError(f"{name} must not be one of the stack's own paths, got {path!r}")
    return path


def timeouts(env: EnvReader, batch_transform: bool) -> tuple[int, int, int]:
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


def body_limits(env: EnvReader) -> tuple[int, int]:
    """``(max_body_mb, max_text_body_mb)``; the text limit never exceeds the body limit."""
    body = env.required_integer("SAGEMAKER_TFS_MAX_BODY_MB", DEFAULT_MAX_BODY_MB)
    text = env.required_integer("SAGEMAKER_TFS_MAX_TEXT_BODY_MB", DEFAULT_MAX_TEXT_BODY_MB)
    return body, min(text, body)


def nice(env: EnvReader, name: str) -> int:
    value = env.required_integer(name, DEFAULT_MODEL_SERVER_NICE, minimum=0)
    if value > MAX_NICE:
        raise ConfigError(f"{name} must be an integer from 0 to {MAX_NICE}, got {value}")
    return value


def parallelism(env: EnvReader, name: str, cpus: int) -> int:
    """A TensorFlow pool's size: the variable, or the container's CPUs when it is unset or 0
    (TensorFlow's own choice, 0, would count the machine's cores, not the container's)."""
    return env.required_integer(name, 0, 0) or cpus


def sessions_on(env: EnvReader) -> bool:
    """``SAGEMAKER_TFS_SESSIONS``, or the name AWS's container standards use; either true."""
    ours = env.boolean("SAGEMAKER_TFS_SESSIONS", False)
    return env.boolean("SAGEMAKER_ENABLE_STATEFUL_SESSIONS", False) or ours
