"""The nginx configuration: ``render(config)`` fills ``nginx/nginx.conf.template``.

Every route and directive is in ``nginx/``; this module computes only the values and
picks the files of the mode (``template_parts``). Rendering is pure (no file system writes,
no process starts) so that it can be unit tested; the supervisor writes the result.

Single-model mode (``single_model_*.conf``): ``/invocations`` runs the njs conversions of
``tensorflow_serving.js`` (JSON, JSON lines, CSV straight to the model servers' REST API, no
Python in the path) unless ``code/inference.py`` exists, in which case every request goes to
the Python service. Multi-model mode (``multi_model_*.conf``): ``/models`` CRUD goes straight
to the supervisor's control API (unix socket), ``/models/NAME/invoke`` and ``/invocations`` to
the Python service.

Single-model mode also passes the bidirectional stream's WebSocket to the stream server
(``stream_location.conf``; on the path ``X-Amzn-SageMaker-Model-Invocation-Path`` names,
``stream_routing.conf`` and ``stream_elsewhere.conf``: paths with routes of their own keep
them). With stateful sessions on (``session_routing.conf``), ``/invocations`` goes to the
Python service in every mode, and nginx sends a request naming a session to the socket of the
gunicorn worker that holds it (the worker's slot begins the session id), and one that opens a
session (``X-Amzn-SageMaker-Session-Id: NEW_SESSION``) to the workers' sockets in turn; with
them off, a request naming one is refused (``sessions_off.conf``).

Every mode: the metrics path (``metrics.conf``, unless ``SAGEMAKER_TFS_METRICS=false``) is
proxied to the supervisor's metrics socket, and each invocation writes the supervisor one
line (``logging.conf``'s ``tfs_edge``) in a pipe, which it counts; ``access_log.conf`` writes
the access log to nginx's standard output when ``SAGEMAKER_TFS_ACCESS_LOG`` asks for it.

Admission control (``admission_zone.conf``, ``admission.conf``, unless
``SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS=0``): at most that many invocations in flight and
waiting in the whole stack, every route; beyond, an immediate 503 JSON with ``Retry-After``.
"""

from __future__ import annotations

import json
import os
import re
from importlib import resources
from pathlib import Path

from sagemaker_tfs.model_discovery import MODEL_NAME_PATTERN
from sagemaker_tfs.stack_config import StackConfig
from sagemaker_tfs.supervisor.model_servers.health import VERDICT_MAX_AGE_SECONDS
from sagemaker_tfs.user_script import may_serve_invocations

NJS_MODULE_CANDIDATES = (
    "/usr/lib/nginx/modules/ngx_http_js_module.so",
    "/etc/nginx/modules/ngx_http_js_module.so",
    "/usr/share/nginx/modules/ngx_http_js_module.so",
)
TEMPLATE_NAME = "nginx.conf.template"
NJS_NAME = "tensorflow_serving.js"
# /execution-parameters' MaxPayloadInMB: SageMaker's real-time default, Batch Transform's largest.
REALTIME_PAYLOAD_MB = 6
BATCH_PAYLOAD_MB = 100
# Bodies up to this size stay in nginx's memory (where njs reads JSON and CSV); larger ones are
# buffered in a file under WORK_DIR, so that a 1 GB body does not cost nginx 1 GB of memory.
BODY_BUFFER_MB = 16
# njs converts JSON, JSON lines and CSV bodies up to this size and hands larger ones to the
# Python service, which converts them faster: njs frees nothing until its request ends and
# reads a CSV character by character (a 1 MB CSV of short rows: 0.6-1.3 s and 20-40 MB in
# njs, docs/performance.md).
NJS_TEXT_LIMIT_BYTES = 256 << 10
RESPONSE_LIMIT_MB = 100
# nginx writes the edge log's lines in batches at most this old (nginx/metrics.conf): a
# scrape may see an invocation this much later.
EDGE_LOG_FLUSH_MS = 100
DEFAULT_BATCH_STRATEGY = "MULTI_RECORD"
CONTROL_TIMEOUT_MARGIN_SECONDS = 30
# nginx waits this much longer than the stream server's idle timeout before it gives up on an
# upgraded connection (the stream server's keepalive pings and its pongs count as traffic).
STREAM_TIMEOUT_MARGIN_SECONDS = 30
# nginx closes a connection to gunicorn idle this long. gunicorn's gevent worker, told to stop
# (a killed master's, once its successor's serves), waits for every connection it has, idle
# or not, up to its graceful timeout; with nginx's 30 s of before a killed master's worker
# stayed up to 30 s (issue 55). Only nginx can close an idle kept-alive connection without a
# race (the worker closing one as nginx sends a POST on it loses that request). Steady
# traffic keeps its connections; a request after a second of quiet opens a new one.
SERVICE_KEEPALIVE_TIMEOUT_SECONDS = 1
# Retry-After (seconds) of an answer that sheds an invocation: overload is measured in
# seconds of queued work, so a client that comes back a second later finds room again.
RETRY_AFTER_SECONDS = 1
_PLACEHOLDER = re.compile(r"@@([A-Z_]+)@@")


class NginxConfigError(ValueError):
    """The configuration cannot be expressed safely as an nginx configuration."""


def templates_dir() -> Path:
    return Path(str(resources.files("sagemaker_tfs") / "nginx"))


def njs_module_path() -> str:
    """The installed njs module; the first candidate when none exists (``nginx -t`` says)."""
    for candidate in NJS_MODULE_CANDIDATES:
        if os.path.exists(candidate):
            return candidate
    return NJS_MODULE_CANDIDATES[0]


def max_payload_mb(config: StackConfig) -> int:
    """MaxPayloadInMB for Batch Transform: 6 MB real-time, MaxPayloadInMB (or 100 MB) under
    ``SAGEMAKER_BATCH``, never more than the body limit."""
    if not config.batch.enabled:
        payload = REALTIME_PAYLOAD_MB
    elif config.batch.max_payload_in_mb:
        payload = min(config.batch.max_payload_in_mb, BATCH_PAYLOAD_MB)
    else:
        payload = BATCH_PAYLOAD_MB
    return min(payload, config.limits.max_body_mb)


def execution_parameters(config: StackConfig) -> dict[str, object]:
    """The ``/execution-parameters`` answer; values the user set in the job win anyway."""
    concurrency = config.batch.max_concurrent_transforms or max(
        1, config.service.workers, len(config.instances)
    )
    return {
        "MaxConcurrentTransforms": concurrency,
        "BatchStrategy": config.batch.strategy or DEFAULT_BATCH_STRATEGY,
        "MaxPayloadInMB": max_payload_mb(config),
    }


def has_invocation_handlers(config: StackConfig) -> bool:
    """``code/inference.py`` may serve ``/invocations`` (one with only ``stream_handler``
    does not: the invocations go as without a script, resend included)."""
    code_dir = config.code_dir
    script = None if code_dir is None else os.path.join(code_dir, "inference.py")
    return script is not None and os.path.isfile(script) and may_serve_invocations(script)


# A request whose gunicorn worker died under it (nginx reads an error: reset, closed before
# the answer's head) is sent again when no user code can have run it: predictions are
# idempotent. nginx retries a request that failed on a kept-alive (cached) connection without
# using up its one try of the single server, on another connection: one to a dead worker fails
# at once, a new one waits in the socket's backlog for the successor. An inference.py handler
# (single model, or multi-model, where a model may bring code) is the user's to retry: nginx
# answers 503 JSON. An answer whose first bytes had left is cut either way.
RESEND_TO_SERVICE = "proxy_next_upstream error non_idempotent;"
NO_RESEND_TO_SERVICE = "proxy_next_upstream error;"


def service_resend(config: StackConfig) -> str:
    """The ``proxy_next_upstream`` of requests to the Python service (proxy_to_service.conf)."""
    user_code = config.multi_model.enabled or has_invocation_handlers(config)
    return NO_RESEND_TO_SERVICE if user_code or config.sessions.enabled else RESEND_TO_SERVICE


def _checked_name(name: str) -> str:
    """Model names end up inside the configuration: refuse anything that could inject."""
    if not MODEL_NAME_PATTERN.fullmatch(name):
        raise NginxConfigError(f"model name {name!r} is not allowed in the nginx configuration")
    return name


# Parameters of the model servers in the upstream of nginx/single_model_upstreams.conf.
PREDICTION_SERVER_PARAMETERS = "max_fails=1 fail_timeout=1s"
# Characters that would end or interpolate a quoted nginx string.
_UNQUOTABLE = re.compile(r'["$\\\x00-\x1f\x7f]')


def _quotable_path(path: str) -> str:
    """A path that goes inside a quoted nginx string: refuse what would end or change it."""
    if _UNQUOTABLE.search(path):
        raise NginxConfigError(f"path {path!r} is not allowed in the nginx configuration")
    return path


def _upstream_servers(config: StackConfig, parameters: str) -> str:
    """One ``server`` line per model server (its REST port), for an upstream block."""
    return "\n".join(
        f"        server 127.0.0.1:{instance.rest_port} {parameters};"
        for instance in config.instances
    )


# A session id: its worker's slot, "-", 32 hex digits (service/edge/sessions.py).
SESSION_ID_PATTERN = "[0-9a-f]{32}"


def _session_routes(config: StackConfig) -> str:
    """One ``map`` line per worker slot: the ids of its sessions -> its upstream."""
    return "\n".join(
        f'        "~^{slot}-{SESSION_ID_PATTERN}$" session_worker_{slot};'
        for slot in range(config.service.workers)
    )


def _session_servers(config: StackConfig) -> str:
    """One ``server`` line per worker slot's session socket, for the upstream that opens
    sessions."""
    return "\n".join(
        f"        server unix:{config.work.session_socket(slot)};"
        for slot in range(config.service.workers)
    )


def _session_workers(config: StackConfig) -> str:
    """One upstream per worker slot, its session socket (kept-alive connections, as to the
    service's shared socket)."""
    return "\n".join(
        f"    upstream session_worker_{slot} {{\n"
        f"        server unix:{config.work.session_socket(slot)};\n"
        "        keepalive 4;\n"
        f"        keepalive_timeout {SERVICE_KEEPALIVE_TIMEOUT_SECONDS}s;\n"
        "    }"
        for slot in range(config.service.workers)
    )


def template_parts(config: StackConfig) -> dict[str, str | None]:
    """Which file of nginx/ fills each part placeholder (None: nothing), for this config."""
    mode = "multi_model" if config.multi_model.enabled else "single_model"
    # Sessions are opened and checked by the service: without inference.py too.
    to_service = (
        config.multi_model.enabled or config.sessions.enabled or has_invocation_handlers(config)
    )
    bounded = config.limits.max_concurrent_invocations > 0
    resent = service_resend(config) == RESEND_TO_SERVICE
    return {
        "UPSTREAMS": f"{mode}_upstreams.conf",
        "LOCATIONS": f"{mode}_locations.conf",
        "STREAM": None if config.multi_model.enabled else "stream_location.conf",
        "STREAM_ROUTING": None if config.multi_model.enabled else "stream_routing.conf",
        "STREAM_ELSEWHERE": None if config.multi_model.enabled else "stream_elsewhere.conf",
        "STREAM_PROXY": "stream_proxy.conf",
        "INVOCATIONS": "proxy_to_service.conf" if to_service else "njs_invocations.conf",
        "PROXY_TO_SERVICE": "proxy_to_service.conf",
        "PING": "ping.conf",
        "LOGGING": "logging.conf",
        "METRICS": "metrics.conf" if config.metrics.enabled else None,
        "ACCESS_LOG": "access_log.conf" if config.nginx.access_log != "off" else None,
        "ADMISSION_ZONE": "admission_zone.conf" if bounded else None,
        "ADMISSION": "admission.conf" if bounded else None,
        "SESSION_ROUTING": "session_routing.conf" if config.sessions.enabled else None,
        "SESSIONS_OFF": None if config.sessions.enabled else "sessions_off.conf",
        "SERVICE_PROXY": "service_proxy.conf",
        "ERROR_PAGES": "error_pages.conf",
        "SERVICE_RETRY": "service_retry.conf" if resent else None,
        "SERVICE_RETRY_ERRORS": "service_retry_errors.conf" if resent else None,
    }


def _fill(template: str, values: dict[str, str], parts: dict[str, str | None]) -> str:
    """Replace each ``@@KEY@@`` by its value, or by the filled template file of a part."""

    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key in parts:
            name = parts[key]
            if name is None:
                return ""
            part = (templates_dir() / name).read_text(encoding="utf-8")
            return _fill(part.removesuffix("\n"), values, parts)
        if key not in values:
            raise NginxConfigError(f"the nginx template uses an unknown placeholder @@{key}@@")
        return values[key]

    return _PLACEHOLDER.sub(replace, template)


def user_directive(euid: int) -> str:
    """Run as root, nginx would hand requests to ``nobody`` workers, which cannot reach the
    unix sockets in ``work_dir``: keep the workers as the user that runs the whole stack."""
    return "user root;\n" if euid == 0 else ""


def render(config: StackConfig, template: str | None = None, euid: int | None = None) -> str:
    """The nginx configuration text for ``config`` (``euid`` defaults to this process's)."""
    if template is None:
        template = (templates_dir() / TEMPLATE_NAME).read_text(encoding="utf-8")
    default_model = _checked_name(config.default_model) if config.default_model else ""
    values = {
        "NJS_MODULE": njs_module_path(),
        "USER": user_directive(os.geteuid() if euid is None else euid),
        "WORK_DIR": config.work.root,
        "LOG_LEVEL": config.nginx.log_level,
        "JS_DIR": str(templates_dir()),
        "BODY_LIMIT_MB": str(config.limits.max_body_mb),
        "BODY_BUFFER_MB": str(min(BODY_BUFFER_MB, config.limits.max_body_mb)),
        "NJS_TEXT_LIMIT": str(min(NJS_TEXT_LIMIT_BYTES, config.limits.max_text_body_bytes)),
        "TEXT_LIMIT_MB": str(config.limits.max_text_body_mb),
        "RESPONSE_LIMIT_MB": str(RESPONSE_LIMIT_MB),
        "PROXY_READ_TIMEOUT": str(config.nginx.proxy_read_timeout),
        "SERVICE_SOCKET": config.work.service_socket,
        "SERVICE_KEEPALIVE_TIMEOUT": str(SERVICE_KEEPALIVE_TIMEOUT_SECONDS),
        "CONTROL_SOCKET": config.work.control_socket,
        "PORT": str(config.port),
        "DEFAULT_MODEL": default_model,
        "EXECUTION_PARAMETERS": json.dumps(execution_parameters(config)),
        "PREDICTION_SERVERS": _upstream_servers(config, PREDICTION_SERVER_PARAMETERS),
        "STREAM_SOCKET": config.work.stream_socket,
        "STREAM_READ_TIMEOUT": str(config.stream.idle_timeout + STREAM_TIMEOUT_MARGIN_SECONDS),
        "HEALTH_FILE": _quotable_path(config.work.health_file),
        "HEALTH_MAX_AGE": str(VERDICT_MAX_AGE_SECONDS),
        # Loading waits for the model to become AVAILABLE: allow the supervisor's wait.
        "MODEL_LOAD_TIMEOUT": str(
            config.model_servers.wait_time_seconds + CONTROL_TIMEOUT_MARGIN_SECONDS
        ),
        "METRICS_PATH": config.metrics.path,
        "METRICS_SOCKET": config.work.metrics_socket,
        "EDGE_LOG_PIPE": config.work.edge_log_pipe,
        "EDGE_LOG_FLUSH_MS": str(EDGE_LOG_FLUSH_MS),
        "ACCESS_LOG_FORMAT": config.nginx.access_log,
        "ACCESS_LOG_CONDITION": "" if config.nginx.access_log_all else " if=$tfs_access_logged",
        "MAX_CONCURRENT_INVOCATIONS": str(config.limits.max_concurrent_invocations),
        "INVOCATION_TIMEOUT": str(config.invocation_timeout),
        "RETRY_AFTER": str(RETRY_AFTER_SECONDS),
        "SERVICE_UPSTREAM": (
            "$tfs_service_upstream" if config.sessions.enabled else "python_service"
        ),
        "SERVICE_RESEND": service_resend(config),
        "SESSION_ROUTES": _session_routes(config),
        "SESSION_SERVERS": _session_servers(config),
        "SESSION_WORKERS": _session_workers(config),
    }
    return _fill(template, values, template_parts(config))
