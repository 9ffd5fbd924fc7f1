"""The nginx configuration: ``render(config)`` fills ``templates/nginx.conf.template``.

Rendering is pure (no file system writes, no process starts) so that it can be unit
tested; ``write(config)`` puts the result and nothing else into ``work_dir``.

Single-model mode: ``/invocations`` runs the njs conversions of ``tensorflow_serving.js``
(JSON, JSON lines, CSV straight to the model servers' REST API, no Python in the path)
unless ``code/inference.py`` exists, in which case every request goes to the Python
service. Multi-model mode: ``/models`` CRUD goes straight to the supervisor's control API
(unix socket), ``/models/NAME/invoke`` and ``/invocations`` to the Python service.
"""

from __future__ import annotations

import json
import os
import re
from importlib import resources
from pathlib import Path

from sagemaker_tfs.config import MODEL_NAME_PATTERN, StackConfig

NJS_MODULE_CANDIDATES = (
    "/usr/lib/nginx/modules/ngx_http_js_module.so",
    "/etc/nginx/modules/ngx_http_js_module.so",
    "/usr/share/nginx/modules/ngx_http_js_module.so",
)
TEMPLATE_NAME = "nginx.conf.template"
NJS_NAME = "tensorflow_serving.js"
REALTIME_BODY_LIMIT_MB = 6
BATCH_BODY_LIMIT_MB = 100
RESPONSE_LIMIT_MB = 100
DEFAULT_BATCH_STRATEGY = "MULTI_RECORD"
CONTROL_TIMEOUT_MARGIN_SECONDS = 30
# SageMaker wants /ping answered within 2 s: a stuck model server must not hold it longer.
PING_TIMEOUT_SECONDS = 1
_PLACEHOLDER = re.compile(r"@@([A-Z_]+)@@")

_INDENT = "            "


class NginxConfigError(ValueError):
    """The configuration cannot be expressed safely as an nginx configuration."""


def templates_dir() -> Path:
    return Path(str(resources.files("sagemaker_tfs.supervisor") / "templates"))


def njs_module_path() -> str:
    """The installed njs module; the first candidate when none exists (``nginx -t`` says)."""
    for candidate in NJS_MODULE_CANDIDATES:
        if os.path.exists(candidate):
            return candidate
    return NJS_MODULE_CANDIDATES[0]


def body_limit_mb(config: StackConfig) -> int:
    """``client_max_body_size``: 6 MB real-time, MaxPayloadInMB (or 100 MB) for Batch."""
    if not config.batch_transform:
        return REALTIME_BODY_LIMIT_MB
    if config.max_payload_in_mb:
        return min(config.max_payload_in_mb, BATCH_BODY_LIMIT_MB)
    return BATCH_BODY_LIMIT_MB


def execution_parameters(config: StackConfig) -> dict[str, object]:
    """The ``/execution-parameters`` answer; values the user set in the job win anyway."""
    concurrency = config.max_concurrent_transforms or max(
        1, config.gunicorn_workers, len(config.instances)
    )
    return {
        "MaxConcurrentTransforms": concurrency,
        "BatchStrategy": config.batch_strategy or DEFAULT_BATCH_STRATEGY,
        "MaxPayloadInMB": body_limit_mb(config),
    }


def has_inference_script(config: StackConfig) -> bool:
    return bool(config.code_dir) and os.path.isfile(os.path.join(config.code_dir, "inference.py"))


def _checked_name(name: str) -> str:
    """Model names end up inside the configuration: refuse anything that could inject."""
    if not MODEL_NAME_PATTERN.fullmatch(name):
        raise NginxConfigError(f"model name {name!r} is not allowed in the nginx configuration")
    return name


def _model_server_upstream(config: StackConfig) -> str:
    if config.multi_model:
        return (
            f"    upstream control_api {{\n        server unix:{config.control_socket};\n    }}\n"
        )
    if not config.instances:
        return ""
    # Predictions: a model server that refused or dropped one is skipped for a second only,
    # so a restarted one is back in the rotation soon after it listens (once its models are
    # loaded). /ping's status calls have an upstream of their own that never marks a server
    # down: their 1 s timeouts (a model server starved of CPU while another one restarts)
    # must not take a live server out of the predictions' rotation.
    predict_servers = "".join(
        f"        server 127.0.0.1:{instance.rest_port} max_fails=1 fail_timeout=1s;\n"
        for instance in config.instances
    )
    status_servers = "".join(
        f"        server 127.0.0.1:{instance.rest_port} max_fails=0;\n"
        for instance in config.instances
    )
    return (
        "    upstream model_servers {\n"
        "        least_conn;\n"
        f"{predict_servers}"
        "        keepalive 32;\n"
        "    }\n"
        "    upstream model_servers_status {\n"
        f"{status_servers}"
        "        keepalive 4;\n"
        "    }\n"
    )


# The request headers the Python service reads; no other header is passed on.
SERVICE_HEADERS = (
    "Content-Type",
    "Accept",
    "X-Amzn-SageMaker-Custom-Attributes",
    "X-Amzn-SageMaker-Target-Model",
)


def _proxy_to_service() -> str:
    forwarded = "".join(
        f"{_INDENT}proxy_set_header {name} $http_{name.lower().replace('-', '_')};\n"
        for name in SERVICE_HEADERS
    )
    return (
        f"{_INDENT}if ($tfs_bad_header) {{\n"
        f"{_INDENT}    return 400 '{{\"error\": \"Bad Request: {', '.join(SERVICE_HEADERS)} "
        f"must not contain control characters\"}}';\n"
        f"{_INDENT}}}\n"
        f"{_INDENT}proxy_pass_request_headers off;\n"
        f"{forwarded}"
        f"{_INDENT}proxy_set_header Host $host;\n"
        f'{_INDENT}proxy_set_header Connection "";\n'
        f"{_INDENT}proxy_pass http://python_service;"
    )


def _ping(config: StackConfig) -> str:
    if config.multi_model:
        return f"{_INDENT}return 200 '{{}}';"
    return f"{_INDENT}js_content tfs.ping;"


def _invocations(config: StackConfig) -> str:
    if config.multi_model or has_inference_script(config):
        return _proxy_to_service()
    return f"{_INDENT}js_content tfs.invocations;"


def _mode_locations(config: StackConfig) -> str:
    if config.multi_model:
        # Loading waits for the model to become AVAILABLE: allow the supervisor's wait.
        load_timeout = config.wait_time_seconds + CONTROL_TIMEOUT_MARGIN_SECONDS
        return (
            "        location ~ ^/models/[^/]+/invoke$ {\n"
            f"{_proxy_to_service()}\n"
            "        }\n"
            "        location /models {\n"
            f"            proxy_read_timeout {load_timeout}s;\n"
            '            proxy_set_header Connection "";\n'
            "            proxy_pass http://control_api;\n"
            "        }\n"
        )
    return (
        "        location /tfs/ {\n"
        "            internal;\n"
        # A prediction the model server refused goes to the next one; one whose connection
        # broke after it was sent is sent again by tensorflow_serving.js. Not on timeouts: a
        # slow model would be run twice.
        "            proxy_next_upstream error http_502 http_503;\n"
        "            proxy_pass_request_headers off;\n"
        "            proxy_set_header Content-Type application/json;\n"
        "            proxy_set_header Accept application/json;\n"
        '            proxy_set_header Connection "";\n'
        "            proxy_pass http://model_servers/;\n"
        "        }\n"
        "        location /tfs-status/ {\n"
        "            internal;\n"
        f"            proxy_connect_timeout {PING_TIMEOUT_SECONDS}s;\n"
        f"            proxy_read_timeout {PING_TIMEOUT_SECONDS}s;\n"
        "            proxy_pass_request_headers off;\n"
        '            proxy_set_header Connection "";\n'
        "            proxy_pass http://model_servers_status/;\n"
        "        }\n"
    )


def _fill(template: str, values: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise NginxConfigError(f"the nginx template uses an unknown placeholder @@{key}@@")
        return values[key]

    return _PLACEHOLDER.sub(replace, template)


def user_directive(euid: int) -> str:
    """Run as root, nginx would hand requests to ``nobody`` workers, which cannot reach the
    unix sockets in ``work_dir``: keep the workers as the user that runs the whole stack."""
    return "user root;\n" if euid == 0 else ""


def render(
    config: StackConfig,
    template: str | None = None,
    js_dir: str | None = None,
    euid: int | None = None,
) -> str:
    """The nginx configuration text for ``config`` (``euid`` defaults to this process's)."""
    if template is None:
        template = (templates_dir() / TEMPLATE_NAME).read_text(encoding="utf-8")
    model_names = [_checked_name(model.name) for model in config.models]
    default_model = _checked_name(config.default_model) if config.default_model else ""
    values = {
        "NJS_MODULE": njs_module_path(),
        "USER": user_directive(os.geteuid() if euid is None else euid),
        "WORK_DIR": config.work_dir,
        "LOG_LEVEL": config.nginx_log_level,
        "JS_DIR": js_dir or str(templates_dir()),
        "BODY_LIMIT_MB": str(body_limit_mb(config)),
        "RESPONSE_LIMIT_MB": str(RESPONSE_LIMIT_MB),
        "PROXY_READ_TIMEOUT": str(config.nginx_proxy_read_timeout),
        "MODEL_SERVER_UPSTREAM": _model_server_upstream(config),
        "SERVICE_SOCKET": config.service_socket,
        "PORT": str(config.port),
        "DEFAULT_MODEL": default_model,
        "MODEL_NAMES": ",".join(model_names),
        "PING": _ping(config),
        "INVOCATIONS": _invocations(config),
        "EXECUTION_PARAMETERS": json.dumps(execution_parameters(config)),
        "MODE_LOCATIONS": _mode_locations(config),
        "PROXY_TO_SERVICE": _proxy_to_service(),
    }
    return _fill(template, values)


def write(config: StackConfig) -> str:
    """Render into ``WORK_DIR/nginx.conf`` and return its path."""
    path = os.path.join(config.work_dir, "nginx.conf")
    os.makedirs(config.work_dir, exist_ok=True)
    with open(path, "w", encoding="utf-8") as stream:
        stream.write(render(config))
    return path
