"""nginx_config.render: placeholders, modes, limits, and ``nginx -t`` on the result."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from sagemaker_tfs.model_discovery import ModelSpec
from sagemaker_tfs.ports import Instance
from sagemaker_tfs.service.edge import sessions
from sagemaker_tfs.supervisor import nginx_config
from stack_configs import StackConfigBuilder


def nginx_test(work_dir: Path, text: str) -> subprocess.CompletedProcess[str]:
    work_dir.mkdir(parents=True, exist_ok=True)
    path = work_dir / "nginx.conf"
    path.write_text(text)
    return subprocess.run(
        ["nginx", "-t", "-p", str(work_dir) + "/", "-c", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def location_block(text: str, location: str) -> str:
    match = re.search(re.escape(f"location {location} {{") + r"(.*?)\n        }", text, re.S)
    assert match, f"no location {location} in\n{text}"
    return match.group(1)


def test_single_model_config_is_valid_nginx(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    text = nginx_config.render(stack_config())
    assert "@@" not in text
    if shutil.which("nginx") is None:
        pytest.skip("nginx is not installed")
    result = nginx_test(tmp_path / "work", text)
    assert result.returncode == 0, result.stderr


def test_multi_model_config_is_valid_nginx(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    text = nginx_config.render(stack_config({"SAGEMAKER_MULTI_MODEL": "true"}))
    assert "unix:" + str(tmp_path / "work" / "supervisor.sock") in text
    assert "js_content tfs.invocations" not in text
    assert "js_content tfs.ping;" in location_block(text, "= /ping")
    result = nginx_test(tmp_path / "work", text)
    assert result.returncode == 0, result.stderr


def test_uses_js_import_and_the_njs_module(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    text = nginx_config.render(stack_config())
    assert "js_import tfs from tensorflow_serving.js;" in text
    assert "js_include" not in text
    assert text.startswith("# Generated") and "load_module " in text
    assert f"pid {tmp_path}/work/nginx.pid;" in text


def test_port_log_level_and_timeout_come_from_the_config(stack_config: StackConfigBuilder) -> None:
    env = {
        "SAGEMAKER_TFS_NGINX_LOGLEVEL": "info",
        "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "123",
    }
    text = nginx_config.render(stack_config(env, port=18111))
    assert "listen 18111;" in text
    assert "error_log stderr info;" in text
    assert "proxy_read_timeout 123s;" in text


def test_model_server_instances_are_spread(stack_config: StackConfigBuilder) -> None:
    instances = (Instance(9000, 8501), Instance(9002, 8503), Instance(9004, 8505))
    text = nginx_config.render(stack_config(instances=instances))
    upstream = re.search(r"upstream model_servers \{(.*?)\}", text, re.S)
    assert upstream
    assert "least_conn;" in upstream.group(1)
    for port in (8501, 8503, 8505):
        assert f"server 127.0.0.1:{port} max_fails=1 fail_timeout=1s;" in upstream.group(1)


def test_a_prediction_whose_model_server_died_goes_to_the_next_one(
    stack_config: StackConfigBuilder,
) -> None:
    text = nginx_config.render(stack_config(code_dir=None))
    retry = "proxy_next_upstream error http_502 http_503;"
    assert retry in location_block(text, "/tfs/")
    assert "timeout" not in retry  # a slow model must not run twice


def test_a_request_cut_by_a_gunicorn_worker_death_is_resent_only_without_user_code(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    """The resend after the request was sent (non_idempotent) only when no inference.py can
    have run it; never on a timeout (a slow model would run twice)."""
    plain = nginx_config.render(stack_config(code_dir=None))
    resend = "proxy_next_upstream error non_idempotent;"
    assert resend in location_block(plain, "@python_service")
    code = tmp_path / "code"
    code.mkdir()
    (code / "inference.py").write_text("def handler(data, context):\n    return b'', 'x'\n")
    for text in (
        nginx_config.render(stack_config(code_dir=str(code))),
        nginx_config.render(stack_config({"SAGEMAKER_MULTI_MODEL": "true"})),
    ):
        assert resend not in text
        assert "proxy_next_upstream error;" in location_block(text, "= /invocations")
    if shutil.which("nginx") is None:
        pytest.skip("nginx is not installed")
    result = nginx_test(tmp_path / "work", plain)
    assert result.returncode == 0, result.stderr


def test_njs_handles_invocations_without_inference_script(stack_config: StackConfigBuilder) -> None:
    text = nginx_config.render(stack_config(code_dir=None))
    assert "js_content tfs.invocations;" in location_block(text, "= /invocations")
    assert "js_content tfs.ping;" in location_block(text, "= /ping")


def test_inference_script_sends_invocations_to_the_service(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "inference.py").write_text("def handler(data, context):\n    return b'', 'x'\n")
    text = nginx_config.render(stack_config(code_dir=str(code)))
    block = location_block(text, "= /invocations")
    assert "proxy_pass http://python_service;" in block
    assert "js_content" not in block


def test_a_stream_only_script_leaves_invocations_as_without_a_script(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    """The service serves /invocations without a script that defines only stream_handler:
    nginx sends them to the njs, and what reaches the service is resent after a worker's
    death as without a script (issue 55: 39 of 1,503 lost to worker kills in the image)."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "inference.py").write_text(
        "def stream_handler(messages, context):\n    yield from messages\n"
    )
    text = nginx_config.render(stack_config(code_dir=str(code)))
    assert "js_content tfs.invocations;" in location_block(text, "= /invocations")
    assert "proxy_next_upstream error non_idempotent;" in location_block(text, "@python_service")


@pytest.mark.parametrize(
    ("env", "limit", "buffer"),
    [
        ({}, 1024, 16),
        ({"SAGEMAKER_BATCH": "true", "SAGEMAKER_MAX_PAYLOAD_IN_MB": "20"}, 1024, 16),
        ({"SAGEMAKER_TFS_MAX_BODY_MB": "200"}, 200, 16),
        ({"SAGEMAKER_TFS_MAX_BODY_MB": "6"}, 6, 6),
    ],
)
def test_body_limit(
    stack_config: StackConfigBuilder, env: dict[str, str], limit: int, buffer: int
) -> None:
    """Any mode's body (async: 1 GB) unless SAGEMAKER_TFS_MAX_BODY_MB lowers it; bodies over
    16 MB wait in a file rather than in nginx's memory; the 413 names the limit."""
    text = nginx_config.render(stack_config(env))
    assert f"client_max_body_size {limit}m;" in text
    assert f"client_body_buffer_size {buffer}m;" in text
    error = location_block(text, "= /.error/413")
    assert f"larger than {limit} MB (SAGEMAKER_TFS_MAX_BODY_MB)" in error


@pytest.mark.parametrize(
    ("env", "njs_limit", "text_limit"),
    [
        ({}, 256 << 10, 100),
        ({"SAGEMAKER_TFS_MAX_TEXT_BODY_MB": "300"}, 256 << 10, 300),
        (
            {"SAGEMAKER_TFS_MAX_TEXT_BODY_MB": "300", "SAGEMAKER_TFS_MAX_BODY_MB": "50"},
            256 << 10,
            50,
        ),
    ],
)
def test_text_limits_reach_the_njs(
    stack_config: StackConfigBuilder, env: dict[str, str], njs_limit: int, text_limit: int
) -> None:
    text = nginx_config.render(stack_config(env))
    assert f'set $tfs_njs_text_limit "{njs_limit}";' in text
    assert f'set $tfs_text_limit_mb "{text_limit}";' in text


def test_execution_parameters_come_from_the_batch_variables(
    stack_config: StackConfigBuilder,
) -> None:
    env = {
        "SAGEMAKER_BATCH": "true",
        "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": "7",
        "SAGEMAKER_BATCH_STRATEGY": "SINGLE_RECORD",
        "SAGEMAKER_MAX_PAYLOAD_IN_MB": "12",
    }
    text = nginx_config.render(stack_config(env))
    body = re.search(r"return 200 '(.*)';", location_block(text, "= /execution-parameters"))
    assert body
    assert json.loads(body.group(1)) == {
        "MaxConcurrentTransforms": 7,
        "BatchStrategy": "SINGLE_RECORD",
        "MaxPayloadInMB": 12,
    }


def test_execution_parameters_defaults(stack_config: StackConfigBuilder) -> None:
    params = nginx_config.execution_parameters(stack_config())
    assert params["BatchStrategy"] == "MULTI_RECORD"
    assert params["MaxPayloadInMB"] == 6
    assert params["MaxConcurrentTransforms"] >= 1


@pytest.mark.parametrize(
    ("env", "payload"),
    [
        ({"SAGEMAKER_BATCH": "true"}, 100),
        ({"SAGEMAKER_BATCH": "true", "SAGEMAKER_MAX_PAYLOAD_IN_MB": "0"}, 100),
        ({"SAGEMAKER_BATCH": "true", "SAGEMAKER_MAX_PAYLOAD_IN_MB": "500"}, 100),
        ({"SAGEMAKER_BATCH": "true", "SAGEMAKER_TFS_MAX_BODY_MB": "40"}, 40),
        ({"SAGEMAKER_TFS_MAX_BODY_MB": "4"}, 4),
    ],
)
def test_max_payload_never_exceeds_the_body_limit(
    stack_config: StackConfigBuilder, env: dict[str, str], payload: int
) -> None:
    assert nginx_config.execution_parameters(stack_config(env))["MaxPayloadInMB"] == payload


@pytest.mark.parametrize("name", ['bad"; evil', "a b", "x\n}", "../up"])
def test_default_model_names_that_could_inject_are_refused(
    stack_config: StackConfigBuilder, name: str
) -> None:
    config = stack_config(models=(ModelSpec(name, "/tmp"),), default_model=name)
    with pytest.raises(nginx_config.NginxConfigError):
        nginx_config.render(config)


def test_unknown_placeholder_is_an_error(stack_config: StackConfigBuilder) -> None:
    with pytest.raises(nginx_config.NginxConfigError, match="@@NOPE@@"):
        nginx_config.render(stack_config(), template="x @@NOPE@@")


def test_the_default_model_reaches_njs(stack_config: StackConfigBuilder) -> None:
    models = (ModelSpec("a", "/m/a"), ModelSpec("b", "/m/b"))
    text = nginx_config.render(stack_config(models=models, default_model="b"))
    assert 'set $tfs_default_model "b";' in text
    assert "$tfs_models" not in text  # /ping no longer asks the models itself


def test_workers_run_as_the_stack_user(stack_config: StackConfigBuilder) -> None:
    assert "user root;" in nginx_config.render(stack_config(), euid=0)
    assert "user " not in nginx_config.render(stack_config(), euid=1000)


@pytest.mark.parametrize("env", [{}, {"SAGEMAKER_MULTI_MODEL": "true"}])
def test_ping_reads_the_health_verdict_and_calls_no_model_server(
    stack_config: StackConfigBuilder, env: dict[str, str]
) -> None:
    config = stack_config(env)
    text = nginx_config.render(config)
    block = location_block(text, "= /ping")
    assert f'set $tfs_health_file "{config.work.health_file}";' in block
    assert f'set $tfs_health_max_age "{nginx_config.VERDICT_MAX_AGE_SECONDS}";' in block
    assert "js_content tfs.ping;" in block
    assert "proxy_pass" not in block
    assert "tfs-status" not in text and "model_servers_status" not in text


def test_a_work_dir_that_would_break_the_quoted_health_path_is_refused(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    for bad in ('a"b', "a$b", "a\\b"):
        config = stack_config(work_dir=str(tmp_path / bad))
        with pytest.raises(nginx_config.NginxConfigError, match="not allowed"):
            nginx_config.render(config)


def test_routes_live_in_the_templates_not_in_python() -> None:
    templates = nginx_config.templates_dir()
    text = "".join(path.read_text() for path in sorted(templates.glob("*.conf*")))
    for route in (
        "= /ping",
        "= /invocations",
        "/tfs/",
        "/models",
        "@python_service",
    ):
        assert f"location {route} {{" in text, route
    source = Path(nginx_config.__file__).read_text()
    assert "location " not in source and "proxy_pass" not in source


@pytest.mark.parametrize(
    "env",
    [{}, {"SAGEMAKER_MULTI_MODEL": "true"}, {"SAGEMAKER_TFS_ACCESS_LOG": "json"}],
)
def test_every_part_of_the_mode_is_a_template_file(
    stack_config: StackConfigBuilder, env: dict[str, str]
) -> None:
    parts = nginx_config.template_parts(stack_config(env))
    for name in parts.values():
        assert name is None or (nginx_config.templates_dir() / name).is_file(), name


@pytest.mark.parametrize("multi_model", ["false", "true"])
def test_metrics_and_access_log_render_valid_nginx(
    stack_config: StackConfigBuilder, tmp_path: Path, multi_model: str
) -> None:
    env = {
        "SAGEMAKER_MULTI_MODEL": multi_model,
        "SAGEMAKER_TFS_METRICS_PATH": "/stack/metrics",
        "SAGEMAKER_TFS_ACCESS_LOG": "json",
    }
    config = stack_config(env)
    text = nginx_config.render(config)
    block = location_block(text, "= /stack/metrics")
    assert f"proxy_pass http://unix:{config.work.metrics_socket}:/metrics;" in block
    # Batches no larger than PIPE_BUF: several workers' writes to the pipe never mix.
    flush = nginx_config.EDGE_LOG_FLUSH_MS
    pipe = config.work.edge_log_pipe
    assert f"access_log {pipe} tfs_edge buffer=4k flush={flush}ms if=$tfs_invocation;" in text
    assert "access_log /dev/stdout tfs_access_json if=$tfs_access_logged;" in text
    assert "        /stack/metrics 0;" in text  # not in the access log
    assert nginx_test(tmp_path / "work", text).returncode == 0


def test_metrics_off_and_the_text_access_log_of_every_request(
    stack_config: StackConfigBuilder,
) -> None:
    env = {
        "SAGEMAKER_TFS_METRICS": "false",
        "SAGEMAKER_TFS_ACCESS_LOG": "text",
        "SAGEMAKER_TFS_ACCESS_LOG_ALL": "true",
    }
    text = nginx_config.render(stack_config(env))
    assert "location = /metrics" not in text and " tfs_edge if=" not in text
    assert "access_log /dev/stdout tfs_access_text;" in text
    assert "/dev/stdout" not in nginx_config.render(stack_config())  # off by default


def test_every_invocation_location_names_its_route(stack_config: StackConfigBuilder) -> None:
    """The route nginx logs for what it answers itself; the service names its own."""
    text = nginx_config.render(stack_config())
    assert "set $tfs_route njs;" in location_block(text, "= /invocations")
    assert "set $tfs_route service;" in location_block(text, "@python_service")
    multi = nginx_config.render(stack_config({"SAGEMAKER_MULTI_MODEL": "true"}))
    for route in ("= /invocations", "~ ^/models/[^/]+/invoke$"):
        assert "set $tfs_route service;" in location_block(multi, route)
        assert "proxy_hide_header X-SageMaker-TFS-Route;" in location_block(multi, route)


def test_the_stream_path_goes_to_the_stream_server_as_a_websocket(
    stack_config: StackConfigBuilder,
) -> None:
    config = stack_config({"SAGEMAKER_TFS_STREAM_IDLE_TIMEOUT_SECONDS": "45"})
    block = location_block(nginx_config.render(config), "= /invocations-bidirectional-stream")
    assert f"proxy_pass http://unix:{config.work.stream_socket}:;" in block
    assert "proxy_set_header Upgrade $http_upgrade;" in block
    assert 'proxy_set_header Connection "Upgrade";' in block
    assert "proxy_read_timeout 75s;" in block  # the idle timeout and a margin
    assert 'return 426 \'{"error": ' in block


def test_multi_model_has_no_stream_path(stack_config: StackConfigBuilder) -> None:
    text = nginx_config.render(stack_config({"SAGEMAKER_MULTI_MODEL": "true"}))
    assert "invocations-bidirectional-stream" not in text


@pytest.mark.parametrize("bound", ["0", "5"])
def test_the_admission_bound_and_the_invocation_timeout(
    stack_config: StackConfigBuilder, tmp_path: Path, bound: str
) -> None:
    """SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS: nginx's limit_conn over the stack (none at 0);
    the invocation timeout reaches the njs either way."""
    env = {"SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS": bound, "SAGEMAKER_MODEL_SERVER_TIMEOUT": "7"}
    text = nginx_config.render(stack_config(env))
    assert ("limit_conn tfs_invocations 5;" in text) == (bound == "5")
    assert ("limit_conn_zone" in text) == (bound == "5")
    assert 'set $tfs_invocation_timeout "7";' in text
    result = nginx_test(tmp_path / "work", text)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("multi_model", ["false", "true"])
def test_sessions_route_each_session_to_its_worker_socket(
    stack_config: StackConfigBuilder, tmp_path: Path, multi_model: str
) -> None:
    env = {
        "SAGEMAKER_TFS_SESSIONS": "true",
        "SAGEMAKER_GUNICORN_WORKERS": "2",
        "SAGEMAKER_MULTI_MODEL": multi_model,
    }
    config = stack_config(env, code_dir=None)
    text = nginx_config.render(config)
    # without inference.py too: the service opens, checks and closes sessions
    block = location_block(text, "= /invocations")
    assert "proxy_pass http://$tfs_service_upstream;" in block
    assert "js_content" not in block
    assert "proxy_set_header X-Amzn-SageMaker-Session-Id $http_x_amzn_sagemaker_session_id;" in (
        block
    )
    for slot in (0, 1):
        assert f'"~^{slot}-[0-9a-f]{{32}}$" session_worker_{slot};' in text
        assert f"server unix:{config.work.session_socket(slot)};" in text
    assert "session_worker_2" not in text
    assert "default python_service;" in text
    assert "NEW_SESSION session_workers;" in text
    opening = re.search(r"upstream session_workers \{(.*?)\}", text, re.S)
    assert opening is not None
    assert opening.group(1).count("server unix:") == 2
    if shutil.which("nginx") is None:
        pytest.skip("nginx is not installed")
    result = nginx_test(tmp_path / "work", text)
    assert result.returncode == 0, result.stderr


def test_without_sessions_nothing_routes_by_session(stack_config: StackConfigBuilder) -> None:
    text = nginx_config.render(stack_config({"SAGEMAKER_MULTI_MODEL": "true"}))
    assert "proxy_pass http://python_service;" in location_block(text, "= /invocations")
    assert "tfs_service_upstream" not in text and "session_worker" not in text


@pytest.mark.parametrize("multi_model", ["false", "true"])
@pytest.mark.parametrize("code", [True, False])
def test_without_sessions_a_session_header_is_refused_as_the_service_words_it(
    stack_config: StackConfigBuilder, multi_model: str, code: bool
) -> None:
    env = {"SAGEMAKER_MULTI_MODEL": multi_model}
    text = nginx_config.render(stack_config(env) if code else stack_config(env, code_dir=None))
    refusal = f'return 400 \'{{"error": "{sessions.SESSIONS_OFF}"}}\';'
    assert refusal in location_block(text, "= /invocations")
    on = nginx_config.render(stack_config({**env, "SAGEMAKER_TFS_SESSIONS": "true"}))
    assert sessions.SESSIONS_OFF not in on


def test_a_stream_on_the_path_the_header_names_goes_to_the_stream_server(
    stack_config: StackConfigBuilder,
) -> None:
    config = stack_config()
    text = nginx_config.render(config)
    block = location_block(text, "/")
    assert f"proxy_pass http://unix:{config.work.stream_socket}:;" in block
    assert "if ($tfs_stream_elsewhere = upgrade) {\n                break;" in block
    assert block.rstrip().endswith("""return 404 '{"error": "Not Found"}';""")
    assert 'map "$http_upgrade|$uri|$http_x_amzn_sagemaker_model_invocation_path"' in text
    multi = nginx_config.render(stack_config({"SAGEMAKER_MULTI_MODEL": "true"}))
    assert "tfs_stream_elsewhere" not in multi and "unix:" + config.work.stream_socket not in multi
