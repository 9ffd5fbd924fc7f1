"""Supervisor building blocks: generated files, command lines, restarts of real processes."""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sagemaker_tfs.config import (
    BatchingConfig,
    Instance,
    ModelSpec,
    PortRange,
    StackConfig,
    load_config,
    model_spec,
)
from sagemaker_tfs.supervisor.children import Child
from sagemaker_tfs.supervisor.main import parse_args
from sagemaker_tfs.supervisor.model_server_processes import (
    model_server_args,
    quote_text_proto,
    render_batching_config,
    render_model_config,
)
from sagemaker_tfs.supervisor.registry import (
    ModelRegistry,
    PortPool,
    available_memory_bytes,
    resolve_model_url,
    validate_model_name,
)
from sagemaker_tfs.supervisor.stack import Supervisor, child_environment, gunicorn_command
from sagemaker_tfs.wire.errors import HttpError


def make_model(base: Path, version: str = "1") -> Path:
    (base / version).mkdir(parents=True)
    (base / version / "saved_model.pb").write_bytes(b"")
    return base


def stack_config(tmp_path: Path, env: dict[str, str] | None = None):
    make_model(tmp_path / "models" / "half_plus_three", "00000123")
    return load_config(
        env or {},
        model_dir=str(tmp_path / "models"),
        work_dir=str(tmp_path / "work"),
        port=8080,
        cpu_count=2,
        has_gpu=lambda: False,
    )


def test_model_config_text() -> None:
    text = render_model_config([ModelSpec("a", "/m/a"), ModelSpec("b", "/m/b")])
    assert text == (
        "model_config_list: {\n"
        '  config: {\n    name: "a"\n    base_path: "/m/a"\n    model_platform: "tensorflow"\n'
        "  },\n"
        '  config: {\n    name: "b"\n    base_path: "/m/b"\n    model_platform: "tensorflow"\n'
        "  }\n}\n"
    )


def test_model_config_serves_every_version_found(tmp_path: Path) -> None:
    base = make_model(make_model(tmp_path / "m", "00000123"), "124")
    (base / "125").mkdir()  # no SavedModel in it: not a version
    (base / "notes").mkdir()
    text = render_model_config([model_spec("m", base), ModelSpec("n", "/m/n", (7,))])
    assert text == (
        "model_config_list: {\n"
        f'  config: {{\n    name: "m"\n    base_path: "{base}"\n    model_platform: "tensorflow"\n'
        "    model_version_policy: {\n      specific: {\n"
        "        versions: 123\n        versions: 124\n      }\n    }\n"
        "  },\n"
        '  config: {\n    name: "n"\n    base_path: "/m/n"\n    model_platform: "tensorflow"\n'
        "    model_version_policy: {\n      specific: {\n        versions: 7\n      }\n    }\n"
        "  }\n}\n"
    )


def test_model_config_is_what_tf_serving_parses(tmp_path: Path) -> None:
    """The text parses as TF Serving's ModelServerConfig proto (what the real binary reads)
    into a specific version policy, and our model server reads the same policy from it."""
    text_format = pytest.importorskip("google.protobuf.text_format")
    config_pb2 = pytest.importorskip("tensorflow_serving.config.model_server_config_pb2")
    from sagemaker_tfs.model_server.model_config import model_specs

    base = make_model(make_model(tmp_path / "m", "00000123"), "00000124")
    config = text_format.Parse(render_model_config([model_spec("m", base)]),
                               config_pb2.ModelServerConfig())  # fmt: skip
    (model,) = config.model_config_list.config
    assert model.model_version_policy.WhichOneof("policy_choice") == "specific"
    assert list(model.model_version_policy.specific.versions) == [123, 124]
    (spec,) = model_specs(config)
    assert spec.policy.select([122, 123, 124, 125]) == [124, 123]


def test_stack_config_keeps_model_versions(tmp_path: Path) -> None:
    config = stack_config(tmp_path)
    assert config.models[0].versions == (123,)
    assert StackConfig.from_dict(json.loads(config.to_json())) == config


def test_model_config_quotes_untrusted_text() -> None:
    evil = 'x"\n  base_path: "/etc\\'
    text = render_model_config([ModelSpec(evil, "/m/\x01")])
    assert 'name: "x\\"\\n  base_path: \\"/etc\\\\"' in text
    assert 'base_path: "/m/\\001"' in text
    assert text.count("\n") == 7  # no line was injected
    assert quote_text_proto("plain") == '"plain"'


def test_batching_file_text() -> None:
    assert render_batching_config(BatchingConfig(8, 1000, 4, 100)) == (
        "max_batch_size { value: 8 }\n"
        "batch_timeout_micros { value: 1000 }\n"
        "num_batch_threads { value: 4 }\n"
        "max_enqueued_batches { value: 100 }\n"
    )


def test_model_server_args(tmp_path: Path) -> None:
    config = stack_config(tmp_path)
    assert model_server_args(Instance(9000, 8501), "/w/models.config", config, None) == [
        "--port=9000",
        "--rest_api_port=8501",
        "--model_config_file=/w/models.config",
        "--max_num_load_retries=0",
    ]


def test_model_server_args_batching_parallelism_gpu(tmp_path: Path) -> None:
    env = {
        "SAGEMAKER_TFS_INTER_OP_PARALLELISM": "2",
        "SAGEMAKER_TFS_INTRA_OP_PARALLELISM": "3",
        "SAGEMAKER_TFS_INSTANCE_COUNT": "2",
    }
    make_model(tmp_path / "models" / "m")
    config = load_config(env, model_dir=str(tmp_path / "models"), has_gpu=lambda: True)
    args = model_server_args(Instance(1, 2), "/c", config, "/w/batching.config")
    assert args[4:] == [
        "--enable_batching=true",
        "--batching_parameters_file=/w/batching.config",
        "--tensorflow_inter_op_parallelism=2",
        "--tensorflow_intra_op_parallelism=3",
        "--per_process_gpu_memory_fraction=0.4",
    ]


def test_gunicorn_command(tmp_path: Path) -> None:
    env = {
        "SAGEMAKER_GUNICORN_WORKERS": "3",
        "SAGEMAKER_GUNICORN_THREADS": "2",
        "SAGEMAKER_GUNICORN_WORKER_CLASS": "gthread",
        "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "44",
        "SAGEMAKER_GUNICORN_LOGLEVEL": "debug",
    }
    config = stack_config(tmp_path, env)
    argv = gunicorn_command(config)
    assert argv[:3] == [sys.executable, "-m", "gunicorn"]
    assert f"--bind=unix:{tmp_path / 'work' / 'gunicorn.sock'}" in argv
    assert "--bind=fd://7" in gunicorn_command(config, 7)  # the supervisor's held socket
    for flag in (
        "--workers=3",
        "--threads=2",
        "--worker-class=gthread",
        "--timeout=44",
        "--log-level=debug",
    ):
        assert flag in argv
    assert argv[-1] == "sagemaker_tfs.service.app:create_app()"


def test_children_reuse_large_allocations_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1000")
    env = child_environment(stack_config(tmp_path))
    assert env["MALLOC_MMAP_THRESHOLD_"] == str(256 << 20)
    assert env["MALLOC_TRIM_THRESHOLD_"] == "1000"  # the user's setting wins


def test_write_configs(tmp_path: Path) -> None:
    config = stack_config(tmp_path, {"SAGEMAKER_TFS_ENABLE_BATCHING": "true"})
    Supervisor(config).write_configs()
    work = tmp_path / "work"
    assert (work / "batching.config").read_text().startswith("max_batch_size { value: 8 }\n")
    assert "num_batch_threads { value: 2 }" in (work / "batching.config").read_text()
    assert 'name: "half_plus_three"' in (work / "models.config").read_text()
    assert StackConfig.load(work / "stack.json") == config


def test_parse_args() -> None:
    args = parse_args(["--model-dir", "/m", "--work-dir", "/w", "--port", "81"])
    assert (args.model_dir, args.work_dir, args.port) == ("/m", "/w", 81)
    with pytest.raises(SystemExit):
        parse_args(["--port", "eighty"])


@pytest.mark.parametrize("name", ["", "a" * 129, "../x", "a b", 'a"b', "-x", ".hidden", 5, None])
def test_invalid_model_names(name: object) -> None:
    with pytest.raises(HttpError) as error:
        validate_model_name(name)
    assert error.value.status == 400


def test_valid_model_names() -> None:
    for name in ("half_plus_three", "m-1.2", "A" * 128):
        assert validate_model_name(name) == name


def test_model_url_must_stay_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "models"
    make_model(root / "good")
    make_model(tmp_path / "outside")
    (root / "link").symlink_to(tmp_path / "outside")
    assert resolve_model_url("good", str(root), "g") == str(root / "good")
    assert resolve_model_url(str(root / "good"), str(root), "g") == str(root / "good")
    for url in ("../outside", str(tmp_path / "outside"), "link", "/etc", ".", "good/../.."):
        with pytest.raises(HttpError) as error:
            resolve_model_url(url, str(root), "x")
        assert error.value.status == 403, url
    for url in ("", None, 3, "a\x00b"):
        with pytest.raises(HttpError) as error:
            resolve_model_url(url, str(root), "x")
        assert error.value.status == 400


def test_model_url_without_version_dir_is_404(tmp_path: Path) -> None:
    root = tmp_path / "models"
    (root / "empty" / "abc").mkdir(parents=True)
    with pytest.raises(HttpError) as error:
        resolve_model_url("empty", str(root), "e")
    assert error.value.status == 404
    assert error.value.message == "Could not find valid base path empty for servable e"


def test_port_pool_hands_out_and_takes_back(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        pool = PortPool(PortRange(taken, taken + 4), reserved=[taken + 1])
        first = pool.take_pair()
        assert first is not None and taken not in (first.grpc_port, first.rest_port)
        assert taken + 1 not in (first.grpc_port, first.rest_port)
        assert pool.take_pair() is None  # taken, taken+1 unavailable; only 3 left
        pool.release(first)
        assert pool.take_pair() == first


def test_available_memory(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 100 kB\nMemAvailable:  2048 kB\n")
    assert available_memory_bytes(str(meminfo)) == 2048 * 1024
    assert available_memory_bytes(str(tmp_path / "missing")) is None


def test_child_is_restarted_after_it_dies(tmp_path: Path) -> None:
    child = Child("sleeper", ["sleep", "30"], {"PATH": "/usr/bin:/bin"}, stop_timeout=5)
    child.start()
    first_pid = child.pid
    child.process.send_signal(signal.SIGKILL)
    child.process.wait()
    deadline = time.monotonic() + 10
    while child.pid == first_pid and time.monotonic() < deadline:
        child.check(time.monotonic())
        time.sleep(0.05)
    assert child.pid != first_pid and child.running() and child.restarts == 1
    child.stop()
    assert not child.running()


def test_child_backoff_grows() -> None:
    child = Child("false", ["false"], {"PATH": "/usr/bin:/bin"})
    child.start()
    child.process.wait()
    now = time.monotonic()
    child.check(now)
    assert child.restart_at == pytest.approx(now + 0.5)
    child.check(now + 0.6)
    child.process.wait()
    child.check(now + 0.7)
    assert child.restart_at == pytest.approx(now + 1.7)
    child.stop()


def test_child_stop_kills_the_whole_group(tmp_path: Path) -> None:
    marker = tmp_path / "grandchild.pid"
    script = f"sleep 60 & echo $! > {marker}; trap '' TERM; wait"
    child = Child("group", ["bash", "-c", script], {"PATH": "/usr/bin:/bin"}, stop_timeout=1)
    child.start()
    deadline = time.monotonic() + 5
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(marker.read_text())
    child.stop()
    time.sleep(0.2)
    assert not Path(f"/proc/{grandchild}").exists() or "Z" in _state(grandchild)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]
    except OSError:
        return "gone"


class RecordingLauncher:
    """Records start requests; the memory check must refuse before any process starts."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def start_model_server(self, key, instance, model_config_file, model_names) -> None:
        self.started.append(key)

    def stop_model_server(self, key: str) -> None:
        pass

    def model_server_running(self, key: str) -> bool:
        return False


def test_registry_refuses_with_507_when_memory_is_low(tmp_path: Path) -> None:
    make_model(tmp_path / "models" / "m")
    config = load_config(
        {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_SAFE_PORT_RANGE": "40000-40100"},
        model_dir=str(tmp_path / "models"),
        work_dir=str(tmp_path / "work"),
    )
    launcher = RecordingLauncher()
    registry = ModelRegistry(config, launcher, memory_margin=10**9, available_memory=lambda: 10)
    with pytest.raises(HttpError) as error:
        registry.load("m", "m")
    assert error.value.status == 507
    assert error.value.message == "Not enough memory to load model m: 10 bytes available"
    assert launcher.started == [] and registry.list() == []


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_control_api_never_reads_a_body_as_the_next_request(tmp_path: Path, method: str) -> None:
    import socket

    from sagemaker_tfs.supervisor.control_api import ControlServer

    make_model(tmp_path / "models" / "m")
    config = load_config(
        {"SAGEMAKER_MULTI_MODEL": "true"},
        model_dir=str(tmp_path / "models"),
        work_dir=str(tmp_path / "work"),
    )
    path = str(tmp_path / "control.sock")
    server = ControlServer(path, ModelRegistry(config, RecordingLauncher()))
    server.serve_in_background()
    try:
        smuggled = b"GET /models HTTP/1.1\r\nHost: x\r\n\r\n"
        target = "/models" if method == "GET" else "/models/unknown"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.settimeout(5)
            raw.connect(path)
            raw.sendall(
                f"{method} {target} HTTP/1.1\r\nHost: x\r\n".encode()
                + f"Content-Length: {len(smuggled)}\r\n\r\n".encode()
                + smuggled
            )
            received = b""
            while chunk := raw.recv(65536):
                received += chunk
        assert received.count(b"HTTP/1.1 ") == 1, received
    finally:
        server.shutdown()
        server.server_close()


def _control_exchange(path: str, request: bytes) -> bytes:
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.settimeout(5)
        raw.connect(path)
        raw.sendall(request)
        received = b""
        while chunk := raw.recv(65536):
            received += chunk
    return received


@pytest.fixture
def control_socket(tmp_path: Path) -> Iterator[str]:
    from sagemaker_tfs.supervisor.control_api import ControlServer

    make_model(tmp_path / "models" / "m")
    config = load_config(
        {"SAGEMAKER_MULTI_MODEL": "true"},
        model_dir=str(tmp_path / "models"),
        work_dir=str(tmp_path / "work"),
    )
    path = str(tmp_path / "control.sock")
    server = ControlServer(path, ModelRegistry(config, RecordingLauncher()))
    server.serve_in_background()
    yield path
    server.shutdown()
    server.server_close()


def _status_headers_json(answer: bytes) -> tuple[int, str, object]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, head.decode("latin-1"), json.loads(body) if body else None


@pytest.mark.parametrize(
    ("method", "target", "allow"),
    [
        ("PUT", "/models", "GET, POST"),
        ("PATCH", "/models", "GET, POST"),
        ("OPTIONS", "/models", "GET, POST"),
        ("PUT", "/models/m", "GET, DELETE"),
        ("TRACE", "/models/m", "GET, DELETE"),
    ],
)
def test_control_api_wrong_methods_are_405_json_with_allow(
    control_socket: str, method: str, target: str, allow: str
) -> None:
    answer = _control_exchange(
        control_socket, f"{method} {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    )
    status, head, body = _status_headers_json(answer)
    assert status == 405
    assert f"Allow: {allow}" in head and "Content-Type: application/json" in head
    assert method in body["error"]


def test_control_api_head_is_405_without_a_body(control_socket: str) -> None:
    answer = _control_exchange(control_socket, b"HEAD /models HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 405 ")
    assert answer.endswith(b"\r\n\r\n")


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"FOO /models HTTP/1.1\r\nHost: x\r\n\r\n", 501),
        (b"GET /models HTTP/9.9\r\nHost: x\r\n\r\n", 505),
        (b"garbage\r\n\r\n", 400),
    ],
)
def test_control_api_protocol_errors_are_json(
    control_socket: str, request_bytes: bytes, status: int
) -> None:
    got, head, body = _status_headers_json(_control_exchange(control_socket, request_bytes))
    assert got == status
    assert "Content-Type: application/json" in head and isinstance(body["error"], str)


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (b"[" * 10000 + b"]" * 10000, "invalid JSON body"),
        (b'{"model_name": "nl\\n", "url": "m"}', "model_name must be"),
        (b'{"model_name": "m\\n", "url": "m"}', "model_name must be"),
        (b"\xff\xfe", "invalid JSON body"),
    ],
)
def test_control_api_refuses_bad_load_bodies_with_400(
    control_socket: str, body: bytes, text: str
) -> None:
    request = (
        f"POST /models HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    )
    status, _, answer = _status_headers_json(_control_exchange(control_socket, request))
    assert status == 400
    assert text in answer["error"]


class StuckLauncher(RecordingLauncher):
    """A model server that runs but never makes its model AVAILABLE."""

    def __init__(self) -> None:
        super().__init__()
        self.stopped: list[str] = []

    def stop_model_server(self, key: str) -> None:
        self.stopped.append(key)

    def model_server_running(self, key: str) -> bool:
        return key in self.started and key not in self.stopped


def test_a_load_that_cannot_finish_fails_within_the_wait_time_and_cleans_up(
    tmp_path: Path,
) -> None:
    make_model(tmp_path / "models" / "m")
    config = load_config(
        {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_TFS_WAIT_TIME_SECONDS": "1"},
        model_dir=str(tmp_path / "models"),
        work_dir=str(tmp_path / "work"),
    )
    launcher = StuckLauncher()
    registry = ModelRegistry(config, launcher)
    started = time.monotonic()
    with pytest.raises(HttpError) as error:
        registry.load("m", "m")
    assert time.monotonic() - started < 1 + 5  # the wait, plus one status poll's timeout
    assert "failed to load" in error.value.message
    assert launcher.stopped == launcher.started == ["model-server[m]"]
    assert registry.list() == []
